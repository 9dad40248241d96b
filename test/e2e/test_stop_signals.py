"""SIGINT and SIGTERM to any program of the project stop the robot's treads and then every
process of the program, within 2 s (issue #17).

A matrix of programs x signals. The simulated Cozmo runs in this process (its ground
truth readable here); the program under test drives it:

* ``cozmo_driver_node`` alone, with cmd_vel published steadily by this test;
* ``cozmo_bringup use_sim:=true start_sim:=false`` with the face and the behavior engine,
  cmd_vel published steadily by this test;
* ``cozmo-demo robot_ip:=127.0.0.1`` (a "real" robot to the demo: this test's simulator),
  signalled while it drives its square;
* ``ros2 launch cozmo_driver cozmo.launch.py`` as the bring-up, where ``ros2`` and the
  colcon-installed package are there (skipped with the reason otherwise);
* ``ros2 run cozmo_driver cozmo_driver_node``, there too, with SIGTERM only: ``ros2 run``
  dies of it and its driver stops by its lifeline (a SIGINT to ``ros2 run`` alone is
  passed on by nobody: Ctrl-C in a terminal reaches the driver as well, as the group).

``cozmo_driver_node`` and ``cozmo_bringup`` also get SIGHUP (their terminal closed).

For each: once the treads turn (ground truth), the signal; then, each measured from the
signal, the simulator must have received StopAllMotors (or a DriveWheels of zero speeds)
and its treads must stand still, and every process of the program's tree (as seen in
/proc before the signal) must have exited, all within :data:`STOP_BOUND_S`; nothing
drives the treads again after that stop; the exit status is 0 (the demo documents 130
on Ctrl-C, 143 on SIGTERM: docs/demo.md); no line of the output says ERROR or Traceback.
The figures are printed (``pytest -s``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

from dependencies import require

rclpy = require("rclpy")

from geometry_msgs.msg import Twist  # noqa: E402

from cozmo_driver import bringup_plan as plan  # noqa: E402
from cozmo_driver.bringup import Bringup  # noqa: E402
from cozmo_driver.sim import SimServer  # noqa: E402
from processes import alive, project_executable  # noqa: E402
from ros_tools import wait_for  # noqa: E402

# realtime: each stop is timed against its bound
pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.realtime]

#: the issue's bound: from the signal to the treads stopped and every process gone
STOP_BOUND_S = 2.0
#: how long a program may take to start and drive (a loaded machine; typically 3-15 s)
START_TIMEOUT_S = 120.0
#: after the bound, how long the test waits before it kills what is left (a clean-up)
CLEANUP_S = 10.0
#: pytest-timeout's limit of a case (setup.cfg's 120 s would stop it before its own
#: START_TIMEOUT_S could say what the program printed): the start, the stop and its
#: clean-up, and a margin for the fixtures and the program's end
TEST_TIMEOUT_S = START_TIMEOUT_S + STOP_BOUND_S + 2 * CLEANUP_S + 30.0
SIGNALS = [signal.SIGINT, signal.SIGTERM]
#: what a driver sends when it tears its robot down (the cubes' lights off, the cubes
#: disconnected (ObjectConnect emptying their radio slots), the backpack dark): none of it may reach
#: the robot before the motor stop
TEARDOWN = {"CubeLights", "CubeId", "ObjectConnect", "SetBackpackLights"}


class WrongExitStatus(AssertionError):
    """The exit status is not the documented one (a failure of its own: see EXPECTED_STATUS)."""


PROGRAMS = ["cozmo_driver_node", "cozmo_bringup", "cozmo-demo", "ros2_launch"]
CASES = [pytest.param(name, sig, id=f"{name}-{signal.Signals(sig).name}")
         for name in PROGRAMS for sig in SIGNALS] + [
    pytest.param("ros2_run", signal.SIGTERM, id="ros2_run-SIGTERM")] + [
    # SIGHUP: the terminal closed (an SSH session dropped); a node used to die of it, the
    # robot driving on its last command until the robot's own link timeout
    pytest.param(name, signal.SIGHUP, id=f"{name}-SIGHUP") for name in ("cozmo_driver_node", "cozmo_bringup")]
#: the exit status each program documents for a signal (default: 0): the demo, as a shell
#: reports a program a signal interrupted, 128 + the signal's number
EXPECTED_STATUS = {("cozmo-demo", signal.SIGINT): 130, ("cozmo-demo", signal.SIGTERM): 143,
                   # Jazzy's `ros2 launch` has no SIGTERM handler: it dies of it, and its
                   # children (whose motors this test checks) stop by their lifeline
                   ("ros2_launch", signal.SIGTERM): -signal.SIGTERM,
                   # nor `ros2 run`: the driver stops by its lifeline (cozmo_driver.lifeline)
                   ("ros2_run", signal.SIGTERM): -signal.SIGTERM}
#: the demo drives its square at this speed; the test's cmd_vel is the same
SPEED_M_S = 0.05


def _stat(pid: int) -> Optional[List[str]]:
    """The fields of /proc/pid/stat after the command name (state, ppid, ...)."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            return stream.read().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(root: int) -> Set[int]:
    """Every living process below ``root`` (children, their children, ...)."""
    parents: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and fields[0] != "Z":
                parents.setdefault(int(fields[1]), []).append(int(entry))
    found: Set[int] = set()
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _command_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            return " ".join(arg.decode(errors="replace")
                            for arg in stream.read().split(b"\0")[:3])
    except OSError:
        return "?"


@dataclass
class Program:
    """The program under test: its process, its output, the processes of its tree."""

    command: List[str]
    log: Path
    extra_logs: List[Path] = field(default_factory=list)
    process: Optional[subprocess.Popen] = None
    tree: Dict[int, str] = field(default_factory=dict)

    def start(self) -> "Program":
        self._stream = open(self.log, "wb")
        # a session of its own, as in a terminal; SIGINT at its default disposition whatever
        # this process has (a test run in the background of a shell inherits it ignored)
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, stdout=self._stream,
            stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "COZMO_LOOPBACK_ONLY": "1"},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        return self

    def note_tree(self) -> None:
        """Add the processes of the program's tree as they are now."""
        assert self.process is not None
        for pid in descendants(self.process.pid) | {self.process.pid}:
            if pid not in self.tree:
                self.tree[pid] = _command_name(pid)

    def output(self) -> str:
        texts = []
        for path in [self.log, *self.extra_logs]:
            if path.exists():
                texts.append(f"---- {path.name}\n{path.read_text(errors='replace')}")
        return "\n".join(texts)

    def running(self) -> List[int]:
        assert self.process is not None
        self.process.poll()  # reap the program itself: a zombie is not running
        return sorted(pid for pid in self.tree if alive(pid))

    def close(self) -> None:
        if self.process is None:
            return
        for pid in self.running():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=CLEANUP_S)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL did not end it
            pass
        self._stream.close()


class CmdVel:
    """Publishes a forward cmd_vel every 50 ms from a thread of its own, until closed."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("stop_signals_teleop", context=context)
        self.publisher = self.node.create_publisher(Twist, "cmd_vel", 10)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cmd_vel", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        msg = Twist()
        msg.linear.x = SPEED_M_S
        while not self._stop.wait(0.05):
            self.publisher.publish(msg)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self.node.destroy_node()


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(host="127.0.0.1", port=0, seed=5) as server:
        yield server


def _bringup_arguments(port: int) -> List[str]:
    return ["use_sim:=true", "start_sim:=false", f"sim_port:={port}", "enable_face:=true",
            "enable_behavior:=true"]


def _driver_command(port: int) -> Tuple[List[str], Bringup]:
    args = plan.resolve_arguments({"use_sim": "true", "start_sim": "false",
                                   "sim_port": str(port)})
    bringup = Bringup(plan.make_plan(args), say=lambda text: None)
    commands = {entry.name: command for entry, command in bringup.resolve()}
    return commands["driver"], bringup


def _ros2_run_command(port: int) -> Tuple[List[str], Bringup]:
    """The driver's command as the bring-up resolves it, run by ``ros2 run``."""
    from ros_tools import need_installed_package, need_ros2

    ros2 = need_ros2()
    need_installed_package()
    command, bringup = _driver_command(port)
    return [ros2, "run", plan.PACKAGE, "cozmo_driver_node", *command[1:]], bringup


def _ros2_launch_command(port: int) -> List[str]:
    from ros_tools import need_installed_package, need_ros2

    ros2 = need_ros2()
    need_installed_package()
    return [ros2, "launch", plan.PACKAGE, "cozmo.launch.py", *_bringup_arguments(port)]


#: how long the robot may stand between two cmd_vel before the signal (they come every
#: 50 ms; a cancelled goal's stop falls between two of them)
DRIVING_AGAIN_S = 1.0


def _treads_turn(sim: SimServer) -> bool:
    left, right = sim.wheel_speeds()
    return abs(left) > 1.0 and abs(right) > 1.0


def _stop_time(sim: SimServer, before: int, since: float) -> Optional[float]:
    """When (the simulator's clock: time.monotonic) the simulator received the first
    StopAllMotors, or DriveWheels of zero speeds, at or after ``since``; None if none came
    (``before``: the StopAllMotors counted before the signal, in case the log rolled over).
    The count is read before the log: a StopAllMotors counted is in the log read after it,
    so the clock is taken for it only when the log really rolled over (read the other way
    round, one arriving between the two reads was timed at the second read, later than
    what the driver sent after it)."""
    counted = sim.command_counts().get("StopAllMotors", 0)
    for when, msg in sim.commands():
        if when >= since and (msg.NAME == "StopAllMotors" or (
                msg.NAME == "DriveWheels" and msg.lwheel_speed_mmps == 0
                and msg.rwheel_speed_mmps == 0)):
            return when
    if counted > before:  # pragma: no cover - a long log
        return time.monotonic()
    return None


def _drives_after(sim: SimServer, since: float) -> List[str]:
    return [f"{when - since:+.3f} s {msg}" for when, msg in sim.commands()
            if when > since and msg.NAME == "DriveWheels"
            and (msg.lwheel_speed_mmps != 0 or msg.rwheel_speed_mmps != 0)]


@pytest.mark.timeout(TEST_TIMEOUT_S)
@pytest.mark.parametrize("name, sig", CASES)
def test_a_signal_stops_the_treads_then_every_process(name, sig, sim, rclpy_context, tmp_path):
    port = sim.address[1]
    bringup = None
    extra: List[Path] = []
    if name == "cozmo_driver_node":
        command, bringup = _driver_command(port)
    elif name == "ros2_run":
        command, bringup = _ros2_run_command(port)
    elif name == "cozmo_bringup":
        command = [str(project_executable("cozmo_bringup")), *_bringup_arguments(port)]
    elif name == "cozmo-demo":
        artifacts = tmp_path / "artifacts"
        command = [str(project_executable("cozmo-demo")), "robot_ip:=127.0.0.1",
                   f"robot_port:={port}", "--artifacts", str(artifacts), "--duration", "120"]
        extra.append(artifacts / "bringup.log")
    else:
        command = _ros2_launch_command(port)
    program = Program(command, tmp_path / "program.log", extra)
    teleop = None if name == "cozmo-demo" else CmdVel(rclpy_context)
    try:
        program.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _treads_turn(sim):
            program.note_tree()
            assert program.process.poll() is None, \
                f"{name} exited with {program.process.returncode} before driving:\n" \
                f"{program.output()}"
            assert time.monotonic() < deadline, \
                f"{name}: the treads did not turn within {START_TIMEOUT_S} s:\n{program.output()}"
            time.sleep(0.05)
        time.sleep(0.5)  # every process of the program is up and the robot drives on
        program.note_tree()
        # (a goal of the behavior engine that the user's cmd_vel makes it cancel stops the
        # treads until the next cmd_vel, 50 ms on: driving is waited for, briefly)
        assert wait_for(lambda: _treads_turn(sim), DRIVING_AGAIN_S, interval=0.01), \
            f"{name}: the robot stopped driving:\n{program.output()}"
        stops_before = sim.command_counts().get("StopAllMotors", 0)

        t0 = time.monotonic()
        os.kill(program.process.pid, sig)
        t_command = t_treads = t_exit = None
        while time.monotonic() - t0 < STOP_BOUND_S + CLEANUP_S:
            now = time.monotonic()
            if t_command is None:
                received = _stop_time(sim, stops_before, t0)
                t_command = None if received is None else received - t0
            if t_treads is None and not _treads_turn(sim) and sim.wheel_speeds() == (0.0, 0.0):
                t_treads = now - t0
            if t_exit is None and not program.running():
                t_exit = now - t0
            if None not in (t_command, t_treads, t_exit):
                break
            time.sleep(0.01)
        left = program.running()
        # an ObjectConnect putting a cube in a slot is its discovery going on, not the teardown
        after = [(when - t0, msg.NAME) for when, msg in sim.commands() if when >= t0
                 and not (msg.NAME == "ObjectConnect" and msg.factory_id)]
        around = "\n".join(f"  {when - t0:+.3f} s {msg}" for when, msg in sim.commands()
                            if t0 - 1.0 <= when <= t0 + STOP_BOUND_S)
        if not left:  # gone (perhaps a zombie a moment ago): its status
            program.process.wait(timeout=CLEANUP_S)
        print(f"\n{name} {signal.Signals(sig).name}: stop received {t_command} s, treads "
              f"stopped {t_treads} s, every process ({len(program.tree)}) exited {t_exit} s "
              f"after the signal; exit status {program.process.returncode}")
        output = program.output()
        sig_name = signal.Signals(sig).name
        assert t_command is not None, f"{name}: no StopAllMotors after {sig_name}:\n{output}"
        assert t_treads is not None, f"{name}: the treads still turn after {sig_name}"
        assert not left, f"{name}: still running after {sig_name}: " \
            f"{[program.tree[pid] for pid in left]}:\n{output}"
        assert max(t_command, t_treads, t_exit) <= STOP_BOUND_S, \
            f"{name}: {sig_name} took longer than {STOP_BOUND_S} s (stop {t_command:.2f} s, " \
            f"treads {t_treads:.2f} s, exit {t_exit:.2f} s):\n{around}\n{output}"
        early = [what for when, what in after if when < t_command and what in TEARDOWN]
        assert not early, f"{name}: the robot was torn down before its motors were " \
            f"stopped: {early} came before the stop; the robot received:\n{around}\n{output}"
        drives = _drives_after(sim, t0 + t_command)
        assert not drives, f"{name}: the treads were driven again after the stop: {drives}"
        assert sim.wheel_speeds() == (0.0, 0.0)
        expected = EXPECTED_STATUS.get((name, sig), 0)
        bad = [line for line in output.splitlines() if "ERROR" in line or "Traceback" in line]
        assert not bad, f"{name}: after {sig_name}: {bad}\n{output}"
        if program.process.returncode != expected:
            raise WrongExitStatus(f"{name}: exit status {program.process.returncode} after "
                                  f"{sig_name}, expected {expected}:\n{output}")
    finally:
        if teleop is not None:
            teleop.close()
        program.close()
        if bringup is not None:
            bringup.remove_parameter_files()
