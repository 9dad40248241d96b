"""The ROS 2 user tools in tests: `ros2 launch`, the `ros2` command, launch_testing, tf2_ros
and teleop_twist_keyboard, run as a user runs them, against the simulated robot.

They are not on PyPI. On a real install they come with the distro (package.xml's
test_depends, which rosdep installs); here `./dev test-kit` builds them from
../shared/ros-upstream into .venv-kit and builds the project with colcon. Where they are
absent a test that needs them is skipped with the reason printed, unless
``COZMO_REQUIRE_ROS_TOOLS=1`` (set by ``./dev test-kit``, and by ``./dev test`` with a real
ROS 2 install sourced): then their absence is a failure, so that neither can pass by skipping.

:class:`RosLaunch` starts ``ros2 launch cozmo_driver cozmo.launch.py ARGS`` by package name in
a session of its own (SIGINT at its default disposition, as in a terminal), keeps its output in
a file, and stops it with SIGINT; :func:`ros2` runs one ``ros2`` command with a deadline.
Every process is bounded in time; all traffic stays on loopback (test/conftest.py).
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

from processes import alive

__all__ = ["REQUIRED", "missing", "need_module", "need_ros2", "need_installed_package",
           "ros2", "RosLaunch", "ros2_daemon", "wait_for", "problems_in_log", "spin_until",
           "arguments", "echo_timeout", "echo_timeout_options"]

REQUIRED = os.environ.get("COZMO_REQUIRE_ROS_TOOLS") == "1"
PACKAGE = "cozmo_driver"
LAUNCH_FILE = "cozmo.launch.py"


def missing(reason: str) -> None:
    """Skip (reason printed), or fail where the tools must be there."""
    if REQUIRED:
        pytest.fail(f"{reason}; COZMO_REQUIRE_ROS_TOOLS=1 (./dev test-kit, or ./dev test with a real ROS 2 "
                    "install: rosdep installs package.xml's test_depends): the ROS 2 tools "
                    "must be installed here", pytrace=False)
    print(f"SKIP: {reason}")
    pytest.skip(reason, allow_module_level=True)


def need_module(name: str, what: str = ""):
    """Import ``name``, or :func:`missing`."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"{name} is not installed here ({what or 'a ROS 2 tool, not on PyPI'}): {exc}")
    return None  # pragma: no cover - missing() does not return


def need_ros2() -> str:
    """The path of the ``ros2`` command, or :func:`missing`."""
    path = shutil.which("ros2")
    if path is None:
        missing("the ros2 command is not installed here (ros2cli is not on PyPI; "
                "./dev test-kit builds it)")
    return path


def need_installed_package() -> Path:
    """The share directory of the colcon-installed cozmo_driver (launch file and config
    there), or :func:`missing`: ``ros2 launch cozmo_driver ...`` by package name needs it."""
    need_module("ament_index_python")
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    try:
        share = Path(get_package_share_directory(PACKAGE))
    except (PackageNotFoundError, KeyError, ValueError, LookupError) as exc:
        missing(f"{PACKAGE} is not installed in the ament index ({exc!r}): build it with "
                "colcon and source install/setup.bash")
    if not (share / "launch" / LAUNCH_FILE).is_file():
        missing(f"{share}/launch/{LAUNCH_FILE} is not installed: build with colcon")
    return share


def _default_sigint() -> None:
    # A child of a process that ignores SIGINT (a background job of a script) would ignore
    # it too; ros2 launch must see it as in a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _text(data: Any) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def ros2(*args: str, timeout: float = 30.0, check: bool = True,
         env: Optional[Dict[str, str]] = None, timed_out_ok: bool = False,
         output_if_killed: bool = False) -> Optional[subprocess.CompletedProcess]:
    """Run ``ros2 ARGS`` (text output), killed after ``timeout``; ``check``: a non-zero exit
    fails the test with the command's output. ``timed_out_ok``: a command killed after
    ``timeout`` returns None instead of failing the test (the caller decides).
    ``output_if_killed``: it returns what the command printed before it was killed, with
    ``returncode`` None (the caller decides whether that is enough)."""
    command = [need_ros2(), *args]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                env=env, stdin=subprocess.DEVNULL, preexec_fn=_default_sigint)
    except subprocess.TimeoutExpired as exc:
        if output_if_killed:
            return subprocess.CompletedProcess(command, None, _text(exc.stdout), _text(exc.stderr))
        if timed_out_ok:
            return None
        pytest.fail(f"`ros2 {' '.join(args)}` did not end within {timeout} s; output:\n"
                    f"{exc.stdout or ''}{exc.stderr or ''}")
    if check and result.returncode != 0:
        pytest.fail(f"`ros2 {' '.join(args)}` exited {result.returncode}:\n"
                    f"{result.stdout}{result.stderr}")
    return result


def echo_timeout_options(help_text: str, timeout: float) -> List[str]:
    """The options that make ``ros2 topic echo`` wait at most ``timeout`` s for a message, given
    what its ``--help`` printed: ``--timeout`` where it lists one (Iron and later, ros2cli#792),
    none where it does not (Humble): there the echo waits until it is stopped, and the caller's
    time limit on the process (the ``timeout`` of :func:`ros2`, a test's bounded wait and stop)
    ends it."""
    if re.search(r"(?<![\w-])--timeout(?![\w-])", help_text):
        return ["--timeout", f"{timeout:g}"]
    return []


@functools.lru_cache(maxsize=None)
def _echo_help() -> str:
    return ros2("topic", "echo", "--help", timeout=30.0).stdout


def echo_timeout(timeout: float) -> List[str]:
    """:func:`echo_timeout_options` of this ``ros2`` (its help read once)."""
    return echo_timeout_options(_echo_help(), timeout)


class ros2_daemon:
    """A ``ros2 daemon`` for this run's ROS_DOMAIN_ID, started before and stopped after (the
    verbs discover through it; without one each verb starts one that outlives the run)."""

    def __enter__(self) -> "ros2_daemon":
        ros2("daemon", "stop", check=False, timeout=20)
        ros2("daemon", "start", timeout=20)
        return self

    def __exit__(self, *exc) -> None:
        ros2("daemon", "stop", check=False, timeout=20)


def wait_for(predicate, timeout: float, interval: float = 0.1) -> bool:
    """Poll ``predicate()`` until true or ``timeout`` s passed; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return bool(value)
        time.sleep(interval)


def _session_pids(sid: int) -> List[int]:
    """Processes of session ``sid`` (the launch and every process it started)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields: state ppid pgrp session ...
        if fields[0] != "Z" and int(fields[3]) == sid:
            pids.append(int(entry))
    return pids


class RosLaunch:
    """``ros2 launch cozmo_driver cozmo.launch.py ARGS`` as a user starts it in a terminal.

    Its own session (so that nothing it starts can outlive the test: :meth:`stop` checks),
    output to a file (:attr:`output`)."""

    def __init__(self, *arguments: str, package: str = PACKAGE, launch_file: str = LAUNCH_FILE,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.command = [need_ros2(), "launch", package, launch_file, *arguments]
        self._log = tempfile.NamedTemporaryFile(prefix="ros2_launch_", suffix=".log",
                                                delete=False)
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True, env=env, preexec_fn=_default_sigint)
        self.exit_code: Optional[int] = None
        self.stop_seconds: Optional[float] = None
        self.leftovers: List[int] = []

    @property
    def output(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> int:
        """SIGINT, as Ctrl-C; wait up to ``timeout`` s for the launch and every process of its
        session; SIGKILL what is left (recorded in :attr:`leftovers`). The launch's exit code."""
        if self.exit_code is not None:
            return self.exit_code
        sid = self.process.pid
        start = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        remaining = max(0.5, timeout - (time.monotonic() - start))
        wait_for(lambda: not _session_pids(sid), remaining)
        self.stop_seconds = time.monotonic() - start
        self.leftovers = [pid for pid in _session_pids(sid) if alive(pid)]
        if self.process.poll() is None or self.leftovers:
            try:
                os.killpg(sid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=5)
        self.exit_code = self.process.returncode
        self._log.close()
        return self.exit_code

    def __enter__(self) -> "RosLaunch":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass

    def describe(self) -> str:
        return f"`{' '.join(self.command[1:])}`; its output:\n{self.output[-6000:]}"


def problems_in_log(text: str) -> List[str]:
    """Lines of a launch's output that a clean run never has: errors, and a driver's stop
    that the robot did not answer (on Ctrl-C the simulator must outlive the driver's
    goodbye: cozmo-sim --stop-grace)."""
    bad = ("[ERROR]", "Traceback", "[FATAL]", "Assertion", "Segmentation fault",
           "it may still be moving", "the robot was lost")
    return [line for line in text.splitlines() if any(word in line for word in bad)]



def spin_until(executor, predicate, timeout: float, step: float = 0.05) -> bool:
    """Spin ``executor`` until ``predicate()`` or ``timeout`` s; its last value."""
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=step)
    return bool(predicate())



def arguments(**values: object) -> Sequence[str]:
    """``name:=value`` launch arguments."""
    return [f"{name}:={value}" for name, value in values.items()]

