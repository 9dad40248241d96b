"""teleop_twist_keyboard drives the simulated Cozmo, as a user does it from a terminal: the stack
of ``ros2 launch cozmo_driver cozmo.launch.py use_sim:=true namespace:=teleop_robot``, and
``ros2 run teleop_twist_keyboard teleop_twist_keyboard --ros-args -r
cmd_vel:=/teleop_robot/cmd_vel`` in a pseudo-terminal (its controlling terminal).

teleop_twist_keyboard (ROS 2 branch, 2.3.2) publishes one Twist per key and repeats nothing:
the robot keeps driving after the last key only until the driver's cmd_vel watchdog
(``cmd_vel_timeout``) stops it. Checked here:

* 'i' pressed a few times drives the robot forward (odom x grows), it keeps driving after
  the last key, then stops within the watchdog time plus a margin, by the watchdog (the
  driver logs the stop), and odom stops changing;
* 'j' turns it (odom yaw grows, the position stays) and 'k' stops it (a zero Twist: no
  watchdog stop);
* Ctrl-C ends teleop_twist_keyboard with exit 0, and the robot stays still.

Each key is typed only while teleop waits in raw mode (ICANON off on the terminal), and the
next only after its Twist arrived, so that Ctrl-C is a key there, not SIGINT. teleop's first
Twists can go out before a subscriber has matched its publisher, and are lost (DDS discovery;
seen here although the graph already listed the publisher, and the driver matched it up to
3.3 s after this node did, on a loaded machine): the test types 'k' (stop) until one arrives
here, and 'i' until the robot moves, before it counts keys.
Everything is bounded by deadlines; teleop's session is killed if it outlives the test.

Skipped in the wheel venv (no ros2 command, no teleop_twist_keyboard, no colcon install) with
the reason printed; in the kit environment (``./dev test-kit``) a missing tool is a failure.
"""

from __future__ import annotations

import fcntl
import math
import os
import pty
import select
import signal
import subprocess
import termios
import threading
import time
from typing import List, Tuple

import pytest

from processes import alive, free_udp_port
from ros_tools import (RosLaunch, _session_pids, arguments, need_installed_package, need_module,
                       need_ros2, problems_in_log, spin_until, wait_for)

ROS2 = need_ros2()
need_installed_package()
need_module("teleop_twist_keyboard", "teleop_twist_keyboard: a ROS 2 tool, not on PyPI")

import rclpy  # noqa: E402
from geometry_msgs.msg import Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rcl_interfaces.srv import GetParameters  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import parameter_value_to_python  # noqa: E402

from cozmo_driver.driver.parameters import PARAMETERS_BY_NAME  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: The namespace of the stack; teleop's cmd_vel is remapped into it.
NAMESPACE = "teleop_robot"
TOPIC_PREFIX = f"/{NAMESPACE}" if NAMESPACE else ""
DRIVER = f"{TOPIC_PREFIX}/cozmo_driver"
START_TIMEOUT_S = 40.0
#: teleop_twist_keyboard's initial speeds (m/s, rad/s); the driver scales 0.5 m/s down to
#: its max_wheel_speed
TELEOP_SPEED, TELEOP_TURN = 0.5, 1.0
#: the driver's log line when its watchdog stops the treads
WATCHDOG_LOG = "treads stopped"
#: odom speeds below these are standing still
STILL_MPS, STILL_RADPS = 1e-3, 1e-2
#: the turn: 'j' until odom shows this much (rad), one every this often after the first three (s)
TURNED_RAD, TURN_KEY_EVERY_S = 0.15, 0.05
#: how much sooner than cmd_vel_timeout two keys' Twists must arrive here for no watchdog stop
#: to be allowed between them: a key may reach the driver that much later than this node (s)
KEY_GAP_MARGIN_S = 0.25


def topic(name: str) -> str:
    return f"{TOPIC_PREFIX}/{name}"


def yaw_of(odom: Odometry) -> float:
    q = odom.pose.pose.orientation
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def still(odom: Odometry) -> bool:
    twist = odom.twist.twist
    return abs(twist.linear.x) < STILL_MPS and abs(twist.angular.z) < STILL_RADPS


class Probe:
    """A node of its own context: odom and cmd_vel, each with the time it arrived."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("teleop_probe", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.odom: List[Tuple[float, Odometry]] = []
        self.cmd_vel: List[Tuple[float, Twist]] = []
        self.node.create_subscription(
            Odometry, topic("odom"), lambda m: self.odom.append((time.monotonic(), m)), 50)
        self.node.create_subscription(
            Twist, topic("cmd_vel"), lambda m: self.cmd_vel.append((time.monotonic(), m)), 50)

    def spin_until(self, predicate, timeout: float) -> bool:
        return spin_until(self.executor, predicate, timeout, step=0.02)

    def spin_for(self, seconds: float) -> None:
        self.spin_until(lambda: False, seconds)

    @property
    def last_odom(self) -> Odometry:
        return self.odom[-1][1]

    def odom_since(self, start: float) -> List[Tuple[float, Odometry]]:
        return [(t, m) for t, m in self.odom if t >= start]

    def parameter(self, node: str, name: str):
        client = self.node.create_client(GetParameters, f"{node}/get_parameters")
        try:
            assert self.spin_until(client.service_is_ready, 15.0), f"{node}: no parameter service"
            future = client.call_async(GetParameters.Request(names=[name]))
            assert self.spin_until(future.done, 10.0), f"{node}: get_parameters not answered"
            return parameter_value_to_python(future.result().values[0])
        finally:
            self.node.destroy_client(client)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


def _terminal_child() -> None:
    # In the child, after setsid (start_new_session): the pty becomes its controlling
    # terminal, as a terminal emulator does for its shell; SIGINT at its default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Teleop:
    """``ros2 run teleop_twist_keyboard teleop_twist_keyboard`` in a pseudo-terminal."""

    def __init__(self, cmd_vel: str) -> None:
        self.master, self.slave = pty.openpty()
        self.command = [ROS2, "run", "teleop_twist_keyboard", "teleop_twist_keyboard",
                        "--ros-args", "-r", f"cmd_vel:={cmd_vel}"]
        self.process = subprocess.Popen(
            self.command, stdin=self.slave, stdout=self.slave, stderr=self.slave,
            start_new_session=True, preexec_fn=_terminal_child, close_fds=True)
        self._output = bytearray()
        self._closing = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._closing.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            self._output.extend(data)

    @property
    def output(self) -> str:
        return bytes(self._output).decode(errors="replace")

    def raw(self) -> bool:
        """The terminal is in raw mode: teleop waits in its read of one key."""
        return not termios.tcgetattr(self.slave)[3] & termios.ICANON

    def type(self, key: str) -> None:
        os.write(self.master, key.encode())

    def describe(self) -> str:
        return f"`{' '.join(self.command[1:])}`; its terminal:\n{self.output[-3000:]}"

    def leftovers(self) -> List[int]:
        """Processes still running in teleop's session (ros2 run and its child)."""
        return [pid for pid in _session_pids(self.process.pid) if alive(pid)]

    def close(self) -> None:
        if self.process.poll() is None or self.leftovers():
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._closing.set()
        self._reader.join(timeout=2)
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture
def probe(rclpy_context):
    watcher = Probe(rclpy_context)
    yield watcher
    watcher.close()


def wait_for_key_read(probe: Probe, teleop: Teleop) -> None:
    assert probe.spin_until(lambda: teleop.raw() or teleop.process.poll() is not None, 10.0), \
        f"teleop does not wait for a key; {teleop.describe()}"
    assert teleop.process.poll() is None, f"teleop exited; {teleop.describe()}"


def press(probe: Probe, teleop: Teleop, key: str, linear: float, angular: float) -> float:
    """Type ``key`` once teleop waits for it; when its Twist (``linear``.x, ``angular``.z,
    the rest 0) arrived here."""
    wait_for_key_read(probe, teleop)
    count = len(probe.cmd_vel)
    teleop.type(key)

    def arrived() -> bool:
        # (one writer to one reader, reliable: in order, so the last is this key's)
        return len(probe.cmd_vel) > count and twist_values(probe.cmd_vel[-1][1]) == (
            linear, 0.0, 0.0, 0.0, 0.0, angular)
    assert probe.spin_until(arrived, 5.0), (
        f"no cmd_vel ({linear}, {angular}) after the key {key!r}: "
        f"{[twist_values(m) for _, m in probe.cmd_vel[count:]]}; {teleop.describe()}")
    return probe.cmd_vel[-1][0]


def twist_values(twist: Twist) -> Tuple[float, ...]:
    return (twist.linear.x, twist.linear.y, twist.linear.z,
            twist.angular.x, twist.angular.y, twist.angular.z)


def handshake(probe: Probe, teleop: Teleop) -> int:
    """'k' (stop: a zero Twist, harmless) every 0.2 s until one arrives here: teleop's first
    Twist can go out before this node's subscription has matched its publisher (seen: the
    graph lists the publisher, yet the first message never arrives). The keys typed."""
    deadline = time.monotonic() + 15.0
    typed = 0
    while not probe.cmd_vel:
        assert time.monotonic() < deadline, \
            f"no cmd_vel after {typed} x 'k'; {teleop.describe()}"
        wait_for_key_read(probe, teleop)
        teleop.type("k")
        typed += 1
        probe.spin_until(lambda: bool(probe.cmd_vel), 0.2)
    probe.spin_for(0.3)
    assert all(twist_values(m) == (0.0,) * 6 for _, m in probe.cmd_vel)
    return typed


def test_teleop_keys_drive_the_robot_and_the_watchdog_stops_it(probe):
    launch_args = arguments(use_sim="true", sim_port=free_udp_port())
    if NAMESPACE:
        launch_args = [*launch_args, *arguments(namespace=NAMESPACE)]
    with RosLaunch(*launch_args) as launch:
        assert probe.spin_until(lambda: probe.odom and still(probe.last_odom),
                                START_TIMEOUT_S), f"no odom of a still robot; {launch.describe()}"
        timeout = probe.parameter(DRIVER, "cmd_vel_timeout")
        assert timeout == pytest.approx(PARAMETERS_BY_NAME["cmd_vel_timeout"].default) == 0.5

        teleop = Teleop(topic("cmd_vel"))
        try:
            # its help on the terminal, its publisher in the graph, waiting for a key
            assert probe.spin_until(
                lambda: "Moving around" in teleop.output and teleop.raw()
                and probe.node.count_publishers(topic("cmd_vel")) >= 1, 20.0), \
                f"teleop did not come up; {teleop.describe()}"
            handshake(probe, teleop)
            watchdog_stops = launch.output.count(WATCHDOG_LOG)

            # forward: 'i' every 0.1 s until the robot moves (the driver's subscription, too,
            # may match teleop's publisher a moment after its first Twist), then five more,
            # then no more keys
            start = probe.last_odom
            first_key = time.monotonic()
            presses = 0
            while not probe.spin_until(lambda: probe.last_odom.twist.twist.linear.x > 0.01,
                                       0.1):
                assert time.monotonic() - first_key < 15.0, (
                    f"the robot did not move after {presses} x 'i'; {launch.describe()}")
                press(probe, teleop, "i", TELEOP_SPEED, 0.0)
                presses += 1
            moving_after = time.monotonic() - first_key
            for _ in range(5):
                press(probe, teleop, "i", TELEOP_SPEED, 0.0)
                probe.spin_for(0.1)
            released = probe.cmd_vel[-1][0]
            assert probe.spin_until(
                lambda: probe.odom[-1][0] > released + timeout + 2.0, timeout + 5.0)
            after = probe.odom_since(released)
            moving = [m for t, m in after if t <= released + 0.6 * timeout]
            assert moving and not any(still(m) for m in moving), (
                "the robot stopped before the watchdog was due: "
                f"{[round(m.twist.twist.linear.x, 3) for m in moving]}")
            stop = next((t for t, m in after if still(m)), None)
            assert stop is not None, "the robot never stopped after the keys were released"
            assert stop - released <= timeout + 1.0, (
                f"the robot stopped {stop - released:.2f} s after the last key "
                f"(cmd_vel_timeout {timeout} s)")
            # and stays there: odom stops changing
            resting = [m for t, m in after if t >= stop + 0.3]
            assert resting and all(still(m) for m in resting)
            xs = [m.pose.pose.position.x for m in resting]
            assert max(xs) - min(xs) < 1e-4, xs
            # the watchdog stopped it, and the robot drove forward
            assert wait_for(lambda: launch.output.count(WATCHDOG_LOG) > watchdog_stops, 3.0), \
                f"the driver logged no watchdog stop; {launch.describe()}"
            end = probe.last_odom
            forward = end.pose.pose.position.x - start.pose.pose.position.x
            assert forward > 0.05, f"drove {forward:.3f} m"
            print(f"moving after {presses} x 'i' ({moving_after:.2f} s); forward "
                  f"{forward:.3f} m; stopped {stop - released:.2f} s after the last key")
            assert abs(end.pose.pose.position.y - start.pose.pose.position.y) < 0.005
            assert abs(math.remainder(yaw_of(end) - yaw_of(start), math.tau)) < 0.02

            # turn left: 'j' three times, each as soon as the one before arrived, then every
            # TURN_KEY_EVERY_S until odom shows the turn, then 'k' stops it; when each key's
            # Twist arrived here (about when it reached the driver, a subscriber as this is)
            watchdog_stops = launch.output.count(WATCHDOG_LOG)
            start = probe.last_odom
            keys: List[float] = []

            def turned_enough() -> bool:
                return math.remainder(yaw_of(probe.last_odom) - yaw_of(start), math.tau) >= TURNED_RAD
            while len(keys) < 3 or not probe.spin_until(turned_enough, TURN_KEY_EVERY_S):
                assert not keys or keys[-1] - keys[0] < 15.0, (
                    f"the robot did not turn after {len(keys)} x 'j'; {launch.describe()}")
                keys.append(press(probe, teleop, "j", 0.0, TELEOP_TURN))
            stopped_at = press(probe, teleop, "k", 0.0, 0.0)
            keys.append(stopped_at)
            assert probe.spin_until(
                lambda: probe.odom[-1][0] > stopped_at + timeout + 1.0, timeout + 5.0)
            resting = [m for t, m in probe.odom_since(stopped_at + timeout)]
            assert resting and all(still(m) for m in resting), "the robot did not stop after 'k'"
            yaws = [yaw_of(m) for m in resting]
            assert max(yaws) - min(yaws) < 1e-3, yaws
            end = probe.last_odom
            turned = math.remainder(yaw_of(end) - yaw_of(start), math.tau)
            assert turned > 0.1, f"turned {turned:.3f} rad"
            print(f"turned {turned:.3f} rad after {len(keys) - 1} x 'j'")
            assert math.hypot(end.pose.pose.position.x - start.pose.pose.position.x,
                              end.pose.pose.position.y - start.pose.pose.position.y) < 0.005
            # 'k' stopped it, not the watchdog (a zero cmd_vel leaves it nothing to do). The
            # watchdog may stop the treads where two keys reached the driver cmd_vel_timeout
            # apart (a loaded machine): not where they came here less than
            # cmd_vel_timeout - KEY_GAP_MARGIN_S apart, 'k' after the last 'j' included
            gaps = [later - earlier for earlier, later in zip(keys, keys[1:])]
            long_gaps = [gap for gap in gaps if gap >= timeout - KEY_GAP_MARGIN_S]
            stops = launch.output.count(WATCHDOG_LOG) - watchdog_stops
            assert stops <= len(long_gaps), (
                f"{stops} watchdog stop(s) while the turn's keys came "
                f"{', '.join(f'{gap:.2f}' for gap in gaps)} s apart (cmd_vel_timeout {timeout} s); "
                f"{launch.describe()}")
            if long_gaps:
                print(f"keys {len(long_gaps)} time(s) {timeout - KEY_GAP_MARGIN_S:g} s or more apart: "
                      f"{stops} watchdog stop(s) allowed there")

            # Ctrl-C: teleop exits 0; it publishes a last zero Twist on its way out, which may
            # or may not leave the process before it ends (nothing waits for it): whatever
            # arrives is a stop, and the robot stays where it is
            count = len(probe.cmd_vel)
            resting_at = probe.last_odom.pose.pose.position
            wait_for_key_read(probe, teleop)  # in raw mode Ctrl-C is a key, not SIGINT
            teleop.type("\x03")
            assert probe.spin_until(lambda: teleop.process.poll() is not None, 10.0), \
                f"teleop did not exit after Ctrl-C; {teleop.describe()}"
            assert teleop.process.returncode == 0, teleop.describe()
            probe.spin_for(1.0)
            assert all(twist_values(m) == (0.0,) * 6 for _, m in probe.cmd_vel[count:])
            assert len(probe.cmd_vel) <= count + 1
            assert still(probe.last_odom)
            assert math.hypot(probe.last_odom.pose.pose.position.x - resting_at.x,
                              probe.last_odom.pose.pose.position.y - resting_at.y) < 1e-4
            assert wait_for(lambda: not teleop.leftovers(), 3.0), \
                f"processes left by teleop: {teleop.leftovers()}; {teleop.describe()}"
        finally:
            teleop.close()
        assert launch.running(), launch.describe()
        assert problems_in_log(launch.output) == [], launch.describe()

