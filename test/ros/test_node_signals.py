"""Every node's console script stops in order on SIGINT, on SIGTERM and on SIGHUP (issue #15;
SIGHUP: the terminal of a ``ros2 launch`` or ``ros2 run`` closed).

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


class NodeProcess:
    """One node's process, its stdout and stderr in one file."""

    def __init__(self, command: List[str], log: Path) -> None:
        self.log = log
        self._stream = open(log, "wb")
        # SIGINT at its default disposition whatever this process has (a test run in the
        # background of a non-interactive shell inherits it ignored)
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=self._stream, stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

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
