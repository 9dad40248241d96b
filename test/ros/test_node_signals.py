"""Every node's console script stops in order on SIGINT, on SIGTERM and on SIGHUP (issue #15;
SIGHUP: the terminal of a ``ros2 launch`` or ``ros2 run`` closed); the driver stops the robot
before Ctrl-Z (SIGTSTP) suspends it, and takes commands again after ``fg`` (SIGCONT).

Each node runs as a process of its own, started with the command the bring-up gives
it (bringup_plan, on the simulator at 127.0.0.1), while robot states stream: the driver
with a subscriber to each of its per-state topics (it publishes only what someone
subscribes to), the other nodes beside a driver of the module. Each is stopped
:data:`CYCLES` times per signal, at different moments after its start-up; every stop
must end with exit status 0 within :data:`STOP_TIMEOUT_S`, and nothing on stdout or
stderr may say ERROR or Traceback (the symptoms of a context shut down under running
threads: an ``[ERROR] event handler failed`` of the driver's I/O thread, an uncaught
``take_message`` error of the description publisher).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from dependencies import require

rclpy = require("rclpy")

from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import Imu, JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from cozmo_driver import bringup_plan as plan  # noqa: E402
from cozmo_driver.bringup import Bringup  # noqa: E402
from cozmo_driver.sim import SimServer  # noqa: E402
from processes import alive, project_executable  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: stops per node and signal: one at each moment of :func:`_pause` (COZMO_STOP_CYCLES
#: overrides it; bench/stop_cycles.py runs N cycles of the whole bring-up)
CYCLES = int(os.environ.get("COZMO_STOP_CYCLES", "5"))
#: a node must have exited this long after the signal
STOP_TIMEOUT_S = 5.0
#: start-up bound: import, rclpy, the node's first log line (typically about 1 s)
START_TIMEOUT_S = 30.0
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
#: the handlers test_a_sigtstp_ignored_at_the_start_stays_ignored puts back
STOP_SIGNALS_AND_CTRL_Z = (*SIGNALS, signal.SIGTSTP)
#: the log line each node writes once it runs
READY = {"driver": "connected to Cozmo", "face": "face '", "behavior": "behavior engine:",
         "description_publisher": "fixed joints on /tf_static"}


def _ours(package: str, executable: str) -> Optional[Path]:
    """The bring-up's lookup of an executable, for the project's own only (a missing one
    fails the test): robot_state_publisher, where installed, is not, so that its fallback,
    the project's description publisher, is the node tested."""
    return project_executable(executable) if package == plan.PACKAGE else None


def _commands(port: int) -> Tuple[Bringup, Dict[str, List[str]]]:
    """The bring-up's command of every node, for the simulator on 127.0.0.1:``port``."""
    args = plan.resolve_arguments({"use_sim": "true", "start_sim": "false",
                                   "sim_port": str(port), "enable_face": "true",
                                   "enable_behavior": "true"})
    bringup = Bringup(plan.make_plan(args), locate=_ours, say=lambda text: None)
    try:
        commands = {entry.name: command for entry, command in bringup.resolve()}
    except BaseException:
        bringup.remove_parameter_files()
        raise
    assert {"driver", "description_publisher", "face", "behavior"} <= set(commands), commands
    return bringup, commands


def _default_signals() -> None:
    """In the child: SIGINT and SIGTSTP at their default dispositions whatever this process
    has (a test run in the background of a non-interactive shell inherits SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTSTP, signal.SIG_DFL)


def _own_group() -> None:
    """In the child: :func:`_default_signals`, and a process group of its own in this
    session. Linux discards a SIGTSTP whose default action would stop a process of an
    orphaned group (no shell could continue it), and the group of a test run in a session
    of its own (a CI runner's setsid) may be one; a new group whose parent, this process,
    is in another group of the same session is not."""
    _default_signals()
    os.setpgrp()


class NodeProcess:
    """One node's process, its stdout and stderr in one file; ``own_group``: in a process
    group of its own (:func:`_own_group`), for a test that suspends it."""

    def __init__(self, command: List[str], log: Path, own_group: bool = False) -> None:
        self.log = log
        self._stream = open(log, "wb")
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=self._stream, stderr=subprocess.STDOUT,
            preexec_fn=_own_group if own_group else _default_signals)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert self.process.poll() is None, \
                f"exited with {self.process.returncode} before {text!r}:\n{self.output()}"
            assert time.monotonic() < deadline, f"no {text!r} within {timeout} s:\n{self.output()}"
            time.sleep(0.05)

    def stop(self, sig: int) -> Tuple[int, float]:
        """(exit status, seconds to exit) after ``sig``; the process is killed if it is
        still running after :data:`STOP_TIMEOUT_S` (and the status is then None)."""
        t0 = time.monotonic()
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = None
        return code, time.monotonic() - t0

    def state(self) -> str:
        """The process's state letter in /proc (R, S, T: stopped...), "" once it is gone."""
        try:
            with open(f"/proc/{self.process.pid}/stat") as stat:
                return stat.read().rsplit(") ", 1)[-1][:1]
        except OSError:
            return ""

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._stream.close()


def _check_stop(node: NodeProcess, sig: int, what: str) -> None:
    code, seconds = node.stop(sig)
    output = node.output()
    name = signal.Signals(sig).name
    assert code is not None, f"{what}: still running {STOP_TIMEOUT_S} s after {name}:\n{output}"
    assert code == 0, f"{what}: exit status {code} after {name}:\n{output}"
    bad = [line for line in output.splitlines() if "ERROR" in line or "Traceback" in line]
    assert not bad, f"{what}: after {name} ({seconds:.2f} s):\n{output}"


#: the moments after start-up at which a signal comes, one per cycle (then again)
PAUSES_S = (0.0, 0.1, 0.2, 0.3, 0.4)


def _pause(cycle: int) -> float:
    """When the signal comes after start-up: spread over 0..0.4 s across the cycles."""
    return PAUSES_S[cycle % len(PAUSES_S)]


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(host="127.0.0.1", port=0, seed=11) as server:
        yield server


@pytest.fixture
def listener(rclpy_context):
    """A node of the test's context that subscribes to the driver's per-state topics; its
    executor spun on demand."""
    node = rclpy.create_node("stop_listener", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    joints: List[JointState] = []
    node.create_subscription(JointState, "joint_states", joints.append, 10)
    for msg_type, topic, qos in ((Odometry, "odom", 10), (TFMessage, "/tf", 10),
                                 (Imu, "imu/data", qos_profile_sensor_data)):
        node.create_subscription(msg_type, topic, lambda msg: None, qos)
    try:
        yield executor, joints
    finally:
        executor.shutdown()
        node.destroy_node()


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_driver_stops_cleanly_while_it_publishes(sim, listener, sig, tmp_path):
    executor, joints = listener
    bringup, commands = _commands(sim.address[1])
    try:
        for cycle in range(CYCLES):
            node = NodeProcess(commands["driver"], tmp_path / f"driver_{cycle}.log")
            try:
                node.wait_for(READY["driver"], START_TIMEOUT_S)
                # robot states stream, and the driver publishes them: joint_states arrive
                joints.clear()
                deadline = time.monotonic() + 10.0
                while len(joints) < 3 and time.monotonic() < deadline:
                    executor.spin_once(timeout_sec=0.05)
                assert len(joints) >= 3, f"no joint_states from the driver:\n{node.output()}"
                end = time.monotonic() + _pause(cycle)
                while time.monotonic() < end:
                    executor.spin_once(timeout_sec=0.02)
                _check_stop(node, sig, f"driver, cycle {cycle}")
            finally:
                node.close()
            assert sim.wait_until(lambda s: not s.is_connected(), 5.0), \
                f"cycle {cycle}: the driver did not disconnect"
    finally:
        bringup.remove_parameter_files()


@pytest.fixture
def robot(sim, tmp_path) -> Iterator[Dict[str, List[str]]]:
    """A driver process on the simulator, streaming; the bring-up's commands."""
    bringup, commands = _commands(sim.address[1])
    driver = NodeProcess(commands["driver"], tmp_path / "robot_driver.log")
    try:
        driver.wait_for(READY["driver"], START_TIMEOUT_S)
        assert sim.wait_until(lambda s: s.streaming(), 10.0)
        yield commands
        assert driver.process.poll() is None, driver.output()
        _check_stop(driver, signal.SIGINT, "the robot's driver")
    finally:
        driver.close()
        bringup.remove_parameter_files()


@pytest.mark.parametrize("name", ["description_publisher", "face", "behavior"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_node_stops_cleanly_beside_a_streaming_driver(robot, name, sig, tmp_path):
    for cycle in range(CYCLES):
        node = NodeProcess(robot[name], tmp_path / f"{name}_{cycle}.log")
        try:
            node.wait_for(READY[name], START_TIMEOUT_S)
            time.sleep(0.2 + _pause(cycle))  # joint_states arrive meanwhile (30 a second)
            _check_stop(node, sig, f"{name}, cycle {cycle}")
        finally:
            node.close()
        assert not alive(node.process.pid)


def test_a_second_signal_while_stopping_changes_nothing(sim, tmp_path):
    # ros2 launch in a terminal: Ctrl-C reaches the node from the terminal and again from
    # launch; then SIGTERM if it takes long
    bringup, commands = _commands(sim.address[1])
    try:
        node = NodeProcess(commands["driver"], tmp_path / "driver.log")
        try:
            node.wait_for(READY["driver"], START_TIMEOUT_S)
            assert sim.wait_until(lambda s: s.streaming(), 10.0)
            node.process.send_signal(signal.SIGINT)
            time.sleep(0.01)
            node.process.send_signal(signal.SIGINT)
            _check_stop(node, signal.SIGTERM, "driver, SIGINT twice then SIGTERM")
        finally:
            node.close()
    finally:
        bringup.remove_parameter_files()


#: the test's cmd_vel, m/s: the robot drives 50 mm in each second it drives on
DRIVE_MPS = 0.05
#: the driver must be stopped (its /proc state T) this long after SIGTSTP at most: its stop
#: of the robot takes 0.2 s at most, then it suspends itself
SUSPEND_TIMEOUT_S = 3.0
#: how far the robot may move while the driver is stopped, mm (it moved 50 mm a second)
STILL_MM = 2.0


def _moved_mm(sim: SimServer, seconds: float) -> float:
    """How far (mm) the simulated robot moves in the next ``seconds``."""
    x0, y0, _ = sim.true_pose()
    time.sleep(seconds)
    x1, y1, _ = sim.true_pose()
    return math.hypot(x1 - x0, y1 - y0)


@pytest.mark.parametrize("program", ["cozmo_driver_node", "cozmo_stack"])
def test_ctrl_z_stops_the_robot_and_fg_takes_commands_again(program, sim, rclpy_context, tmp_path):
    """Ctrl-Z (SIGTSTP) suspended the driver with the robot driving on its last cmd_vel: the
    cmd_vel watchdog is stopped with the process, and the robot keeps a motor command (it
    drove 51, 102, 153, 204 mm in the 1-4 s after the signal). The driver now stops the
    robot, then is suspended for real (its state T) while a teleop's cmd_vel still comes;
    after SIGCONT (``fg``) the robot stands until a new cmd_vel, which it takes. The same
    in ``cozmo_stack`` (here the driver and the face node, whose frames stream meanwhile)."""
    from geometry_msgs.msg import Twist

    node = rclpy.create_node("ctrl_z_teleop", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    bringup, commands = _commands(sim.address[1])
    forward = Twist()
    forward.linear.x = DRIVE_MPS
    try:
        pub = node.create_publisher(Twist, "cmd_vel", 10)

        def drive_until(done, timeout: float) -> bool:
            """cmd_vel at 20 Hz until ``done()``; whether it came within ``timeout`` s."""
            deadline = time.monotonic() + timeout
            while not done():
                if time.monotonic() >= deadline:
                    return False
                pub.publish(forward)
                executor.spin_once(timeout_sec=0.05)
            return True

        command = commands["driver"] if program == "cozmo_driver_node" else [
            str(project_executable("cozmo_stack")), "--node", "driver", "--ros-args", "-p", "robot_ip:=127.0.0.1",
            "-p", f"robot_port:={sim.address[1]}", "--", "--node", "face"]
        driver = NodeProcess(command, tmp_path / "driver.log", own_group=True)
        try:
            driver.wait_for(READY["driver"], START_TIMEOUT_S)
            assert sim.wait_until(lambda s: s.streaming(), 10.0)
            assert drive_until(lambda: pub.get_subscription_count() > 0, 10.0), "the driver's cmd_vel unseen"
            start = sim.true_pose()
            assert drive_until(lambda: math.dist(sim.true_pose()[:2], start[:2]) > 10.0, 10.0), \
                f"the robot did not drive:\n{driver.output()}"
            driver.process.send_signal(signal.SIGTSTP)  # the teleop's cmd_vel still comes
            assert drive_until(lambda: driver.state() == "T", SUSPEND_TIMEOUT_S), \
                f"not stopped {SUSPEND_TIMEOUT_S} s after SIGTSTP (state {driver.state()!r}):\n{driver.output()}"
            time.sleep(0.3)
            moved = _moved_mm(sim, 1.0)
            assert driver.state() == "T", driver.output()
            assert moved < STILL_MM, f"the robot drove {moved:.0f} mm in 1 s while the driver was " \
                                     f"suspended:\n{driver.output()}"
            assert "suspended (Ctrl-Z): the robot was stopped" in driver.output(), driver.output()
            driver.process.send_signal(signal.SIGCONT)
            deadline = time.monotonic() + 5.0
            while driver.state() == "T" and time.monotonic() < deadline:
                time.sleep(0.02)
            # the latest cmd_vel the teleop sent while the driver was stopped may come now
            # (its QoS keeps one), and drive until the watchdog's 0.5 s: then nothing moves
            time.sleep(1.0)
            moved = _moved_mm(sim, 1.0)
            assert moved < STILL_MM, f"the robot drove {moved:.0f} mm by itself after SIGCONT:\n" \
                                     f"{driver.output()}"
            start = sim.true_pose()
            assert drive_until(lambda: math.dist(sim.true_pose()[:2], start[:2]) > 10.0, 5.0), \
                f"a cmd_vel after SIGCONT did not drive the robot:\n{driver.output()}"
            _check_stop(driver, signal.SIGINT, "the driver, after Ctrl-Z and fg")
        finally:
            driver.close()
    finally:
        bringup.remove_parameter_files()
        executor.shutdown()
        node.destroy_node()


def test_a_sighup_ignored_at_the_start_stays_ignored():
    """``nohup cozmo_driver_node``: the user wants the node to outlive its terminal, so a
    SIGHUP the process started with ignored stays ignored; otherwise SIGHUP stops the node
    as SIGTERM does (the tests above). The handlers are looked at, not signalled: a stop
    request would arm the stop deadline of pytest's own process."""
    from cozmo_driver.ros._entry import STOP_SIGNALS, StopSignals

    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        for ignored in (True, False):
            signal.signal(signal.SIGHUP, signal.SIG_IGN if ignored else signal.SIG_DFL)
            stop = StopSignals()
            try:
                assert stop.install()
                handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
            finally:
                stop.close()
            assert callable(handlers[signal.SIGINT]) and handlers[signal.SIGTERM] == handlers[signal.SIGINT]
            if ignored:
                assert handlers[signal.SIGHUP] == signal.SIG_IGN
            else:
                assert handlers[signal.SIGHUP] == handlers[signal.SIGINT]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_sigtstp_ignored_at_the_start_stays_ignored():
    """Ctrl-Z is a request to suspend only in a process whose node drives the robot, and not
    where it started with SIGTSTP ignored (its parent wants no suspension); as above, the
    handlers are looked at, not signalled."""
    from cozmo_driver.ros._entry import StopSignals

    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS_AND_CTRL_Z}
    try:
        for ignored in (True, False):
            signal.signal(signal.SIGTSTP, signal.SIG_IGN if ignored else signal.SIG_DFL)
            stop = StopSignals()
            try:
                assert not stop.take_ctrl_z()  # not before install()
                assert stop.install()
                assert signal.getsignal(signal.SIGTSTP) == (signal.SIG_IGN if ignored else signal.SIG_DFL)
                assert stop.take_ctrl_z() is not ignored
                handler = signal.getsignal(signal.SIGTSTP)
            finally:
                stop.close()
            if ignored:
                assert handler == signal.SIG_IGN
            else:
                assert handler == signal.getsignal(signal.SIGINT)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("acknowledged, connected", [(True, True), (False, True), (None, False)],
                         ids=["acknowledged", "unacknowledged", "not connected"])
def test_ctrl_z_ends_the_goals_and_the_animation_before_the_stop(acknowledged, connected):
    """What the driver does before Ctrl-Z suspends it, in order: motion refused, the motion
    goals and the animation ended (after fg nothing of them goes on by itself), the stop
    sent and acknowledged, one line saying what came of it; fg takes commands again."""
    from types import SimpleNamespace

    from cozmo_driver.ros.driver_support import CTRL_Z_REASON, CTRL_Z_STOP_S, ctrl_z_stop

    calls: List[tuple] = []
    logger = SimpleNamespace(info=lambda text: calls.append(("info", text)),
                             warning=lambda text: calls.append(("warning", text)))
    node = SimpleNamespace(
        _core=SimpleNamespace(connected=connected, hold_for_ctrl_z=lambda held: calls.append(("hold", held))),
        _motion=SimpleNamespace(abort_all=lambda reason: calls.append(("goals", reason))),
        _media=SimpleNamespace(abort_animations=lambda reason: calls.append(("animation", reason))),
        _robot=SimpleNamespace(stop_all_motors_acknowledged=lambda s: calls.append(("stop", s)) or acknowledged),
        get_logger=lambda: logger)
    resume = ctrl_z_stop(node)
    stop = [("stop", CTRL_Z_STOP_S)] if connected else []
    assert calls[:-1] == [("hold", True), ("goals", CTRL_Z_REASON), ("animation", CTRL_Z_REASON), *stop]
    level, text = calls[-1]
    assert text.endswith("; fg resumes, and commands are taken again"), text
    if acknowledged:
        assert (level, text) == ("info", "suspended (Ctrl-Z): the robot was stopped; fg resumes, and commands "
                                         "are taken again")
    else:
        assert level == "warning" and ("may still be moving" if connected else "not connected") in text, text
    resume()
    assert calls[-1] == ("hold", False)
