"""cozmo_driver.lifeline: a process started by a bring-up ends when the bring-up dies.

Real processes, a few seconds each: a stand-in bring-up (a small Python process) starts a
child and is killed with SIGKILL; the child must be gone within a few seconds. Linux only
(prctl PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from cozmo_driver import lifeline
from processes import alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="PR_SET_PDEATHSIG is Linux's")

#: a child must be gone this long after its parent died (it gets SIGTERM at once)
GONE_WITHIN_S = 5.0
#: a child must have said it is past exit_with_parent() within this (a Python start-up)
STARTED_WITHIN_S = 30.0

#: a child that calls exit_with_parent() and then waits, reporting on stdout
CHILD = textwrap.dedent("""
    import os, sys, time
    from cozmo_driver.lifeline import PARENT_PID_ENV, exit_with_parent
    set_ = exit_with_parent()
    print(f"child {os.getpid()} set={set_} left={os.environ.get(PARENT_PID_ENV)!r}", flush=True)
    time.sleep(60)
""")

#: a stand-in bring-up: starts argv[1:] (with its own pid in the environment, as the plan's
#: child_environment gives it, and optionally lifeline's preexec_fn), then waits
PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    from cozmo_driver import bringup_plan as plan, lifeline
    preexec = lifeline.parent_death_preexec() if sys.argv[1] == "preexec" else None
    env = {**os.environ, **plan.child_environment()} if sys.argv[2] == "env" else None
    child = subprocess.Popen(sys.argv[3:], env=env, preexec_fn=preexec)
    print(f"parent {os.getpid()} child {child.pid}", flush=True)
    time.sleep(60)
""")


def _kill_both(parent: subprocess.Popen, child: int) -> None:
    """A test's clean-up: the stand-in parent and its child, whatever is left of them."""
    if parent.poll() is None:
        parent.kill()
    if alive(child):
        os.kill(child, signal.SIGKILL)


def _wait_gone(pid: int, timeout: float = GONE_WITHIN_S) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


#: what a test says when its child printed no line within STARTED_WITHIN_S
_SILENT = f"the child said nothing within {STARTED_WITHIN_S:.0f} s: it did not get past exit_with_parent()"


def _read_line(stream, timeout: float = STARTED_WITHIN_S) -> str:
    """The next line of ``stream``; '' if none came within ``timeout`` (or the stream ended).
    The reader thread left blocked ends with the stream, when the test kills its processes."""
    lines: list = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0] if lines else ""


def _started_child(parent: subprocess.Popen, what: str) -> int:
    """The pid of the child that ``parent`` (a stand-in, ``what``) says it started, in its
    first line, "parent <pid> child <pid>". If that line does not come within
    STARTED_WITHIN_S (or another comes, or the stand-in ends first), the stand-in is killed
    and the test fails, saying so: it waited on the line for as long as the suite's hang
    guard let it."""
    said = _read_line(parent.stdout)
    words = said.split()
    if len(words) == 4 and words[0] == "parent" and words[2] == "child":
        return int(words[3])
    ended = parent.poll()
    parent.kill()
    parent.wait(timeout=5)
    pytest.fail(f"{what} did not say 'parent <pid> child <pid>' within {STARTED_WITHIN_S:.0f} s"
                + ("" if ended is None else f" (it ended with status {ended})")
                + (f": it said {said!r}" if said else ""))


def _start_parent(mode: str, env: str, *command: str) -> tuple:
    """(parent process, pid of its child) once both run."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, mode, env, *command],
                              stdout=subprocess.PIPE, text=True)
    return parent, _started_child(parent, "the stand-in bring-up")


@pytest.mark.parametrize("mode, env, command", [
    # the project's executables: the variable (what ros2 launch can give them)
    ("none", "env", [sys.executable, "-c", CHILD]),
    # any executable started by cozmo_bringup: the preexec_fn (robot_state_publisher, rviz2)
    ("preexec", "none", ["sleep", "60"]),
])
def test_a_child_ends_when_its_parent_is_killed(mode, env, command):
    parent, child = _start_parent(mode, env, *command)
    try:
        if CHILD in command:
            # the child is past exit_with_parent(), which took the parent's pid from the variable
            said = _read_line(parent.stdout)
            assert said.split() == ["child", str(child), "set=True", "left=None"], said or _SILENT
        # (the preexec_fn ran before the exec, which Popen awaited before the parent said "parent")
        assert alive(child)
        parent.kill()                                    # SIGKILL: no clean-up of its own
        parent.wait(timeout=5)
        assert _wait_gone(child), f"child {child} outlived its parent"
    finally:
        _kill_both(parent, child)


def test_a_child_whose_parent_is_already_gone_ends_at_once():
    # the bring-up died between starting the child and the child's exit_with_parent()
    gone = subprocess.Popen(["true"])
    gone.wait()
    env = {**os.environ, lifeline.PARENT_PID_ENV: str(gone.pid)}
    child = subprocess.run([sys.executable, "-c", CHILD], env=env, timeout=30,
                           capture_output=True, text=True)
    assert child.returncode == -signal.SIGTERM, child.stdout + child.stderr


def test_a_process_between_the_parent_and_the_child_is_no_death():
    # a launch prefix (``ros2 launch --launch-prefix``, e.g. gdb or a shell) sits between
    # the bring-up and the child: the bring-up is still an ancestor, the child runs on
    script = f"{sys.executable} -c '{CHILD}'; true"     # `; true`: the shell forks
    parent, shell = _start_parent("none", "env", "sh", "-c", script)
    children = []
    try:
        # the child is past exit_with_parent(): it found the parent among its ancestors, the
        # shell between them, and lives on
        said = _read_line(parent.stdout)
        words = said.split()
        assert words[:1] == ["child"] and words[2:] == ["set=True", "left=None"], said or _SILENT
        assert alive(shell) and parent.poll() is None
        with open(f"/proc/{shell}/task/{shell}/children") as stream:
            children = [int(pid) for pid in stream.read().split()]
        assert children == [int(words[1])] and alive(children[0]), (children, said)
    finally:
        parent.kill()
        parent.wait(timeout=5)
        for pid in (shell, *children):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_variable_is_taken_out_of_the_environment():
    # a process started by the child must not take the bring-up for its parent
    result = subprocess.run(
        [sys.executable, "-c", "import os, sys; from cozmo_driver.lifeline import "
         "exit_with_parent, PARENT_PID_ENV; print(exit_with_parent(), "
         "os.environ.get(PARENT_PID_ENV))"],
        env={**os.environ, lifeline.PARENT_PID_ENV: str(os.getpid())},
        capture_output=True, text=True, timeout=30)
    assert result.stdout.split() == ["True", "None"], result.stdout + result.stderr


def test_without_the_variable_nothing_happens():
    environ = {"OTHER": "1"}
    assert lifeline.exit_with_parent(environ=environ) is False
    assert environ == {"OTHER": "1"}
    environ = {lifeline.PARENT_PID_ENV: "not a pid"}
    assert lifeline.exit_with_parent(environ=environ) is False and environ == {}


#: a stand-in for ``ros2 run``, saved as a file named ``ros2`` and run as
#: ``python .../ros2 run <command>``: starts the command from its main thread (no
#: variable in its environment) and waits for it, as ros2run's run_executable does
ROS2_RUN = textwrap.dedent("""
    import os, subprocess, sys
    child = subprocess.Popen(sys.argv[2:])
    print(f"parent {os.getpid()} child {child.pid}", flush=True)
    child.wait()
""")


def _start_named(tmp_path, name: str, *words: str) -> tuple:
    """(stand-in process run as ``python <tmp>/<name> <words> python -c CHILD``, the child's
    pid, the child's first line) once both run. Each of the two lines is awaited
    STARTED_WITHIN_S at most: the test fails, saying which did not come."""
    script = tmp_path / name
    script.write_text(ROS2_RUN)
    env = {key: value for key, value in os.environ.items() if key != lifeline.PARENT_PID_ENV}
    parent = subprocess.Popen([sys.executable, str(script), *words, sys.executable, "-c", CHILD],
                              stdout=subprocess.PIPE, text=True, env=env)
    child = _started_child(parent, f"the stand-in `{name} {' '.join(words)}`")
    said = _read_line(parent.stdout)   # the child's, on the stdout it inherited
    if not said:
        _kill_both(parent, child)
        pytest.fail(_SILENT)
    return parent, child, said


@pytest.mark.parametrize("name, word, ends", [
    ("ros2", "run", True),        # `ros2 run`: its executable ends with it
    ("ros2", "launch", False),    # not `ros2 run` (ros2 launch gives the variable)
    ("other", "run", False),      # a program of another name: the child runs on
])
def test_a_child_of_ros2_run_ends_when_ros2_run_is_killed(tmp_path, name, word, ends):
    parent, child, said = _start_named(tmp_path, name, word)
    try:
        assert f"set={ends}" in said, said
        parent.kill()              # SIGKILL; SIGTERM ends `ros2 run` the same way (no handler)
        parent.wait(timeout=5)
        if ends:
            assert _wait_gone(child), f"child {child} outlived `ros2 run`"
        else:
            time.sleep(1.0)
            assert alive(child), "a child whose parent is not `ros2 run` was ended"
    finally:
        _kill_both(parent, child)


def test_is_ros2_run_reads_the_command_line():
    assert lifeline.is_ros2_run(os.getpid()) is False
    assert lifeline.is_ros2_run(2 ** 22 + 1) is False   # no such process


def test_the_lifeline_prefix_becomes_the_program():
    """``python -m cozmo_driver.lifeline PROGRAM ...`` (the launch file's prefix for the
    programs that are not ours): PROGRAM runs in its place (same pid: launch signals that
    pid), without the variable, with SIGPIPE at its default (Python ignores it, and an
    ignored signal survives exec), and ends when the parent is killed."""
    script = "echo $$ ${%s:-unset} $(sed -n 's/^SigIgn:\\s*//p' /proc/$$/status); exec sleep 60" \
        % lifeline.PARENT_PID_ENV
    parent, child = _start_parent("none", "env", sys.executable, "-m", "cozmo_driver.lifeline",
                                  "sh", "-c", script)
    try:
        line = _read_line(parent.stdout).split()
        assert line[:2] == [str(child), "unset"], line or f"the program said nothing within {STARTED_WITHIN_S:.0f} s"
        assert not int(line[2], 16) & (1 << (signal.SIGPIPE - 1)), f"SIGPIPE ignored: {line}"
        parent.kill()
        parent.wait(timeout=5)
        assert _wait_gone(child), f"child {child} outlived its parent"
    finally:
        _kill_both(parent, child)
    usage = subprocess.run([sys.executable, "-m", "cozmo_driver.lifeline"], capture_output=True,
                           text=True, timeout=30)
    assert usage.returncode == 2 and "usage:" in usage.stderr, usage
    absent = subprocess.run([sys.executable, "-m", "cozmo_driver.lifeline", "/nonexistent/program"],
                            capture_output=True, text=True, timeout=30)
    assert absent.returncode == 127 and "cannot run /nonexistent/program" in absent.stderr, absent


#: ``python -m cozmo_driver.lifeline sleep 5`` as runpy runs it, with a Ctrl-C arriving just
#: before the exec (the 0.07-0.12 s before it, deterministically): execvp sends the process
#: SIGINT and waits for it
EARLY_CTRL_C = textwrap.dedent("""
    import os, runpy, signal, sys, time
    def execvp(program, args):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)
        print("SIGINT did not end the lifeline", flush=True)
    os.execvp = execvp
    sys.argv = ["lifeline", "sleep", "5"]
    runpy.run_module("cozmo_driver.lifeline", run_name="__main__", alter_sys=True)
""")


def test_a_ctrl_c_before_the_exec_ends_the_lifeline_quietly():
    """Ctrl-C in the lifeline's first tenth of a second (before it becomes the program)
    printed a KeyboardInterrupt traceback and exited 1; the project's nodes exit 0 quietly
    then (entry_points), and so does the lifeline. Imported as a library (by every node) it
    leaves SIGINT alone."""
    run = subprocess.run([sys.executable, "-c", EARLY_CTRL_C], capture_output=True, text=True, timeout=30)
    assert (run.returncode, run.stdout, run.stderr) == (0, "", ""), run
    imported = subprocess.run([sys.executable, "-c", "import signal, cozmo_driver.lifeline; "
                               "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"],
                              capture_output=True, text=True, timeout=30)
    assert imported.stdout.strip() == "True", imported


#: a stand-in robot_state_publisher (a package of its own on AMENT_PREFIX_PATH): says its
#: pid, then waits without a handler of its own, as a program launch starts and we do not own
STAND_IN = "#!/bin/sh\necho \"stand-in $$ started\"\nexec sleep 120\n"


def _stand_in_prefix(root) -> str:
    """An ament prefix holding the package robot_state_publisher with the stand-in."""
    (root / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (root / "share" / "ament_index" / "resource_index" / "packages" / "robot_state_publisher").touch()
    program = root / "lib" / "robot_state_publisher" / "robot_state_publisher"
    program.parent.mkdir(parents=True)
    program.write_text(STAND_IN)
    program.chmod(0o755)
    return str(root)


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: signal.Signals(s).name)
def test_a_program_not_ours_ends_when_ros2_launch_is_killed(tmp_path, sig):
    """``ros2 launch`` killed (SIGTERM from a process manager or ``timeout``: Jazzy's has no
    handler for it; SIGKILL): robot_state_publisher and RViz, which launch starts without a
    parent-death signal and which do not call exit_with_parent, ran on with parent 1. The
    launch file starts them through ``python -m cozmo_driver.lifeline``. The checkout's
    launch file, with a stand-in robot_state_publisher; the project's own processes must
    be gone too."""
    import re
    from pathlib import Path

    from processes import free_udp_port
    from ros_tools import LAUNCH_FILE, need_installed_package, need_ros2

    ros2 = need_ros2()
    need_installed_package()  # the simulator and the driver, by package
    launch_file = Path(__file__).resolve().parents[2] / "launch" / LAUNCH_FILE
    env = {**os.environ, "AMENT_PREFIX_PATH": os.pathsep.join(
        [_stand_in_prefix(tmp_path / "stand_in"), os.environ.get("AMENT_PREFIX_PATH", "")])}
    env.pop(lifeline.PARENT_PID_ENV, None)
    log = tmp_path / "launch.log"
    with open(log, "wb") as stream:
        launch = subprocess.Popen(
            [ros2, "launch", str(launch_file), "use_sim:=true", f"sim_port:={free_udp_port()}"],
            stdin=subprocess.DEVNULL, stdout=stream, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)
    session = [launch.pid]
    try:
        deadline = time.monotonic() + 60.0
        while not ("stand-in" in log.read_text() and "connected to Cozmo" in log.read_text()):
            assert launch.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        stand_in = int(re.search(r"stand-in (\d+) started", log.read_text()).group(1))
        session = _session(launch.pid)
        assert stand_in in session and len(session) >= 4, session  # launch, sim, driver, stand-in
        launch.send_signal(sig)
        launch.wait(timeout=10)
        assert _wait_gone(stand_in), f"robot_state_publisher outlived ros2 launch:\n{log.read_text()}"
        deadline = time.monotonic() + 20.0
        while any(alive(pid) for pid in session) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in session if alive(pid)], log.read_text()
    finally:
        if launch.poll() is None:
            launch.kill()
            launch.wait()
        for pid in session:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def _session(sid: int) -> list:
    """The living processes of session ``sid``."""
    from ros_tools import _session_pids

    return _session_pids(sid)
