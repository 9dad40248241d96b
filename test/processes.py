"""Helpers of the tests that start whole programs (the bring-up, the demo, pytest runs of
their own): a free UDP port on 127.0.0.1, whether a process is still running, where the
project's own executables are installed, the parameter files a bring-up generated for
them, and the environment of an inner pytest run."""

from __future__ import annotations

import os
import queue
import random
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pytest

__all__ = ["alive", "free_udp_port", "project_executable", "generated_parameter_directories",
           "inner_pytest_env"]


def project_executable(name: str) -> Path:
    """Where the project's console script ``name`` is installed: ``lib/cozmo_driver/`` of
    the ament index (a colcon install), else the directory of this Python (the wheel
    venv's ``bin``). Every set-up installs them all, so a missing one fails the test."""
    from cozmo_driver import bringup_plan as plan

    path = plan.locate_executable(plan.PACKAGE, name)
    if path is None:
        pytest.fail(f"{name} is not installed: run ./dev setup (or colcon build)", pytrace=False)
    return path


#: ports free_udp_port handed out in this process (never twice)
_HANDED_OUT: set = set()


def _ephemeral_range() -> range:
    try:
        low, high = (int(x) for x in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_udp_port() -> int:
    """A UDP port on 127.0.0.1 that is free now and that nothing else of the run takes before
    the test binds it: drawn above the kernel's ephemeral range, from which every bind to
    port 0 (a driver's socket, another test's) takes its port (a CI failure: a simulator
    could not bind the port this gave a moment before), and above the DDS ports of the
    domains the tests use (7400 + 250 x domain, 250 of them, domains 1..100 up to 32650)."""
    candidates = range(max(_ephemeral_range().stop, 32700), 65536)
    rng = random.Random(os.urandom(8))
    for _ in range(500 if len(candidates) else 0):
        port = rng.choice(candidates)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:  # no range left: the kernel's
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGINT, timeout: float = 15.0) -> None:
    """Stop ``proc`` if it still runs: ``sig``, up to ``timeout`` s for it to end, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs: a zombie (exited, not yet reaped by its parent)
    does not, and neither does a pid now taken by somebody else's process."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except OSError:
        return True


def generated_parameter_directories(pids) -> set:
    """The directories of the parameter files a bring-up generated (cozmo_bringup's
    ``cozmo_bringup_*``, the launch file's ``cozmo_launch_*``) named on the command lines
    of the processes ``pids``: a bring-up killed with SIGKILL cannot remove them itself."""
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                args = [arg.decode(errors="replace") for arg in stream.read().split(b"\0")]
        except OSError:
            continue
        for option, value in zip(args, args[1:]):
            directory = Path(value).parent
            if option == "--params-file" and directory.name.startswith(("cozmo_bringup_",
                                                                        "cozmo_launch_")):
                found.add(directory)
    return found


class TellsItsLog:
    """``with TellsItsLog(proc, "the driver"):`` around assertions on a running program: an
    assertion that fails kills the program and adds the end of what it wrote to stderr,
    which is where the reason is (a name guard refusing, a lost connection...)."""

    def __init__(self, proc, who: str, tail: int = 4000) -> None:
        self.proc, self.who, self.tail = proc, who, tail

    def __enter__(self) -> "TellsItsLog":
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is None or not issubclass(kind, AssertionError):
            return False
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            _, err = self.proc.communicate(timeout=10.0)
        except Exception as comm_exc:  # noqa: BLE001 - the assertion is what matters
            err = f"(its log could not be read: {comm_exc})"
        raise AssertionError(f"{exc}\n--- {self.who} wrote (exit {self.proc.returncode}):\n"
                             f"{(err or '')[-self.tail:]}") from None


#: where the test plugins (fixtures_*.py) and these helpers are
TEST_DIR = Path(__file__).resolve().parent


def inner_pytest_env(**extra: str) -> dict:
    """The environment of a pytest run that a test starts: this directory importable (the
    plugins ``-p fixtures_...``), and nothing of the outer run's own (its ``PYTEST_*``
    variables, an xdist worker's among them; its run locks; a run limit set by the caller),
    then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")
           and k not in ("COZMO_TEST_RUN_LOCKS", "COZMO_TEST_RUN_LIMIT_S")}
    env["PYTHONPATH"] = os.pathsep.join([str(TEST_DIR), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def sigint_while_importing(cmd: Sequence[str], begun: Callable[[str], bool], what: str,
                           env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None) -> Tuple[int, str]:
    """Start ``cmd`` with Python's import timing on (each module's line on stderr when it is
    done: "import time: self | cumulative | <indent>module"), send it SIGINT at the first
    module for which ``begun(module)`` holds (its imports under way), and wait for its end.
    Returns its exit status and its stderr without the import lines; ``what`` says, in the
    failure, what never came. Bounded: 30 s for the module, 30 s for the end."""
    env = dict(os.environ if env is None else env, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.Popen(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, cwd=cwd, text=True)
    lines: "queue.Queue[str]" = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True)
    reader.start()
    seen = False
    err_lines: List[str] = []
    try:
        deadline = time.monotonic() + 30.0
        while not seen and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            err_lines.append(line)
            seen = begun(line.rsplit("|", 1)[-1].strip())
        assert seen, what + ": " + "".join(err_lines)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30.0)
        reader.join(10.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    while not lines.empty():
        err_lines.append(lines.get())
    return proc.returncode, "".join(line for line in err_lines if not line.startswith("import time:"))
