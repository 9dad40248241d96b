"""The ROS side of ``cozmo-demo``: a node that drives a Cozmo through the driver's
ROS 2 interfaces only, and watches what the driver publishes.

:class:`DemoNode` subscribes to ``link_status``, ``robot_info``, ``odom``,
``joint_states``, ``battery_state``, ``emergency_stop/engaged`` and ``camera/image_raw``
(counting each stream to measure its rate) and publishes ``cmd_vel`` (geometry_msgs/Twist, or TwistStamped
when the driver's ``cmd_vel_stamped`` is set: :attr:`DemoOptions.cmd_vel_stamped`),
``head/angle`` and ``lift/height``. :class:`Demonstration` runs the script on it from the calling
thread, which is also the one that spins the node's executor: every wait of the script
spins it, and every service call and action goal is made and awaited there
(:class:`~cozmo_driver.ros.demo_steps.SpinningCaller`), so that no response can be lost
to another thread (ros2/rclpy#1123). The script:

1. wait until the driver reports the link ``CONNECTED`` and odometry flows;
2. play a built-in animation (``nod_yes``: head, face and sound, no wheels)
   through the driver's ``play_animation`` action, its progress feedback in the
   status line, and wait for its result (a note if there is no such action);
3. turn the camera on (the driver's ``camera_enabled`` and ``camera_color``
   parameters, set through its parameter service);
4. show a face: the face node's ``set_face_expression`` service or its
   ``face/expression`` topic if there is one, else a face image on a display
   topic of the driver if it has one, else a note;
5. play a sound: a short WAV through the ``play_audio`` action if there is one,
   else a note;
6. drive a square with ``cmd_vel``, closed on ``odom``, moving the head and the
   lift at the corners;
7. level the head, lower the lift, stop, and keep the latest camera image.

Once the driver's emergency stop was engaged during the run, or when it began (even if
released since), the demo moves the robot no more: the animation is skipped, the square
fails where it was, and step 7 only stops (a stop engaged after the square fails it).

Each step's outcome is checked (the action results, the service answers, camera
frames arriving after the camera was turned on, the head and lift where they were
sent) and every failure is kept in :attr:`DemoResult.failures`, the run going on
where it can. What stops the run (the robot does not move, the link stays lost, the
simulator, the driver or the one-process stack exited, the deadline) raises :class:`DemoAbort` before the robot
answered (a bring-up failure, exit status 2); after, it is kept as the last failure
and the result returned, so that the caller can still report and save what there is.

A status line is printed every second from a thread of its own, which reads what the
callbacks stored and calls no rclpy function (link state and RTT from ``link_status``,
pose from ``odom``, battery from ``battery_state``, the rates of odom, camera and
joint_states as received here). The optional ground truth (the simulator's true pose)
is sampled alongside. Everything is bounded: each wait has a deadline, and the whole
run has one. The graph is watched too: a second publisher of ``link_status`` (another
stack with the same names in this ROS domain) stops the run.

The animation, face and audio interfaces are found in the ROS graph by name,
and their requests filled by field name and type, so this node needs no
interface package beyond the driver's; those three steps are
:class:`~cozmo_driver.ros.demo_steps.MediaSteps`, in :mod:`cozmo_driver.ros.demo_steps`.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import rclpy
from cozmo_interfaces.msg import HeadAngle, LiftHeight, LinkStatus, RobotInfo
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist, TwistStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import BatteryState, Image, JointState
from std_msgs.msg import Bool

from ..client import CozmoError
from ..errors import RemoteError
from ..robot_geometry import lift_angle_to_height
from . import qos
from .demo_steps import ANSWER_S, DISCOVERY_S, MediaSteps, SpinningCaller
from .name_guard import CHECKS_S, DUPLICATE_MARK

__all__ = ["DemoNode", "Demonstration", "DemoOptions", "DemoResult", "DemoAbort", "GroundTruth"]

Pose = Tuple[float, float, float]          # x m, y m, yaw rad

_RELIABLE = qos.profile(10)
_LATCHED = qos.QOS_LATCHED
_POWER_STATUS = {BatteryState.POWER_SUPPLY_STATUS_CHARGING: "charging",
                 BatteryState.POWER_SUPPLY_STATUS_DISCHARGING: "discharging",
                 BatteryState.POWER_SUPPLY_STATUS_FULL: "full",
                 BatteryState.POWER_SUPPLY_STATUS_NOT_CHARGING: "not charging"}
_RATE_STREAMS = ("odom", "camera", "joint_states")


def _wrap(angle: float) -> float:
    return math.atan2(math.sin(angle), math.cos(angle))


def _tenths(value: float) -> float:
    """Rounded to 0.1, without a negative zero (so that "-0.0" is never printed)."""
    return round(value, 1) + 0.0


def _yaw(q) -> float:
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def image_to_array(msg: Image) -> np.ndarray:
    """A ``mono8``/``rgb8``/``bgr8`` image message as ``(h, w)`` or ``(h, w, 3)`` uint8."""
    channels = {"mono8": 1, "rgb8": 3, "bgr8": 3}.get(msg.encoding)
    if channels is None:
        raise ValueError(f"cannot save a {msg.encoding!r} image")
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)
    pixels = rows[:, :msg.width * channels]
    if channels == 1:
        return pixels.copy()
    pixels = pixels.reshape(msg.height, msg.width, 3)
    return (pixels[:, :, ::-1] if msg.encoding == "bgr8" else pixels).copy()


class GroundTruth:
    """What a simulator can tell that a robot cannot (implemented by the caller)."""

    def pose(self) -> Tuple[float, float, float]:
        """The true pose: x mm, y mm, yaw rad, in the world frame."""
        raise NotImplementedError

    def sound_frames(self) -> int:
        """Audio frames with sound played so far."""
        raise NotImplementedError

    def animations_ended(self) -> Optional[int]:
        """Animations the robot reported ended (AnimationEnded) so far; None: unknown."""
        return None


@dataclass
class DemoOptions:
    namespace: str = ""
    color: bool = True
    side_m: float = 0.10
    speed_mps: float = 0.05
    turn_radps: float = 1.2
    connect_timeout_s: float = 20.0             # for the robot to answer the running driver
    startup_timeout_s: float = 30.0             # for the driver to start
    deadline: float = math.inf                  # time.monotonic() by which all must be done
    expression: str = "happy"
    animation: str = "nod_yes"                  # a built-in clip without wheel motion
    sound: Optional[Path] = None                # the WAV to play, if there is a way
    robot_address: str = ""                     # for messages
    cmd_vel_stamped: bool = False               # the driver's: cmd_vel is TwistStamped


@dataclass
class DemoResult:
    odometry: List[Tuple[float, float, float, float]] = field(default_factory=list)  # t, x, y, yaw
    truth: List[Tuple[float, float, float, float]] = field(default_factory=list)     # t, x, y, yaw
    truth_at_start: Optional[Tuple[float, float, float]] = None
    odom_at_start: Optional[Pose] = None
    final_odom: Optional[Pose] = None
    final_truth: Optional[Tuple[float, float, float]] = None
    camera: Optional[np.ndarray] = None
    camera_encoding: str = ""
    camera_frames: int = 0                      # received after the camera was turned on
    camera_requested: bool = False              # camera_enabled was accepted
    face_shown: bool = False
    face_how: str = ""
    sound_sent: bool = False
    sound_played: bool = False
    sound_how: str = ""
    sound_frames: int = 0
    animation_played: bool = False
    animation_how: str = ""
    animation_progress: List[float] = field(default_factory=list)   # feedback received
    animations_ended: Optional[int] = None      # AnimationEnded from the robot (ground truth)
    #: every step that failed, "step: what happened", in order
    failures: List[str] = field(default_factory=list)
    #: why the run stopped before its end ("" if it did not)
    aborted: str = ""
    #: seconds the link was down after the robot first answered (the driver reconnected)
    link_down_s: float = 0.0


class DemoAbort(RemoteError):
    """The demonstration cannot go on; ``code`` is the exit status to give. Mostly the
    robot or the driver did not do what the demo asked in time (hence a
    :class:`~cozmo_driver.errors.RemoteError`); also an interruption (code 130)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


#: why the demo moves the robot no more (its failures say it)
_ESTOP_ENGAGED = "the emergency stop was engaged (emergency_stop/engaged): the demo moves the robot no more"


class _EmergencyStopped(RemoteError):
    """The driver's emergency stop was engaged during the run, at the move named (the driver
    refuses motion: the demo cannot go on moving the robot)."""


class DemoNode(Node):
    """Subscriptions and publishers of the demonstration (see the module docstring)."""

    def __init__(self, namespace: str = "", stamped: bool = False, **kwargs: Any) -> None:
        """``stamped``: cmd_vel is geometry_msgs/TwistStamped (the driver's cmd_vel_stamped)."""
        super().__init__("cozmo_demo", namespace=namespace or "", **kwargs)
        self.stamped = bool(stamped)
        ns = (namespace or "").strip("/")
        #: the name of the driver's link report on /diagnostics
        self.driver_link_report = f"{ns}/cozmo_driver: link" if ns else "cozmo_driver: link"
        self.lock = threading.Lock()
        #: robot address -> when a driver of the demo's driver name last reported it
        self.driver_robots: Dict[str, float] = {}
        self.link: Optional[LinkStatus] = None
        self.robot_info: Optional[RobotInfo] = None
        self.odom: Optional[Pose] = None
        self.joints: Dict[str, float] = {}
        self.battery: Optional[BatteryState] = None
        self.image: Optional[Image] = None
        self.counts = {name: 0 for name in _RATE_STREAMS}
        self.counts_at_camera_on = 0
        self.odometry: List[Tuple[float, float, float, float]] = []
        self.record = False
        #: the driver's emergency stop was engaged since this node was made (kept once true)
        self.estop_engaged = False
        self.cmd_vel = self.create_publisher(TwistStamped if self.stamped else Twist, "cmd_vel",
                                             _RELIABLE)
        self.head = self.create_publisher(HeadAngle, "head/angle", _RELIABLE)
        self.lift = self.create_publisher(LiftHeight, "lift/height", _RELIABLE)
        self.create_subscription(LinkStatus, "link_status", self._on_link, _LATCHED)
        self.create_subscription(RobotInfo, "robot_info", self._on_info, _LATCHED)
        self.create_subscription(Bool, "emergency_stop/engaged", self._on_estop, _LATCHED)
        self.create_subscription(Odometry, "odom", self._on_odom, _RELIABLE)
        self.create_subscription(JointState, "joint_states", self._on_joints, _RELIABLE)
        self.create_subscription(BatteryState, "battery_state", self._on_battery, _RELIABLE)
        self.create_subscription(Image, "camera/image_raw", self._on_image,
                                 qos_profile_sensor_data)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics,
                                 qos.QOS_STATE)

    # --- callbacks (executor thread)

    def _on_link(self, msg: LinkStatus) -> None:
        with self.lock:
            self.link = msg

    def _on_info(self, msg: RobotInfo) -> None:
        with self.lock:
            self.robot_info = msg

    def _on_estop(self, msg: Bool) -> None:
        if msg.data:
            with self.lock:
                self.estop_engaged = True

    def _on_odom(self, msg: Odometry) -> None:
        p = msg.pose.pose
        pose = (p.position.x, p.position.y, _yaw(p.orientation))
        now = time.monotonic()
        with self.lock:
            self.odom = pose
            self.counts["odom"] += 1
            if self.record:
                self.odometry.append((now, *pose))

    def _on_joints(self, msg: JointState) -> None:
        with self.lock:
            self.counts["joint_states"] += 1
            self.joints.update(zip(msg.name, msg.position))

    def _on_battery(self, msg: BatteryState) -> None:
        with self.lock:
            self.battery = msg

    def _on_image(self, msg: Image) -> None:
        with self.lock:
            self.image = msg
            self.counts["camera"] += 1

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        """Which robot each driver of the demo's driver name drives (its link report's
        ``robot`` value): the demo's own driver is the one at the demo's robot."""
        now = time.monotonic()
        for status in msg.status:
            if status.name != self.driver_link_report:
                continue
            for value in status.values:
                if value.key == "robot":
                    with self.lock:
                        self.driver_robots[value.value] = now

    # --- commands (any thread)

    def drive(self, v: float, w: float) -> None:
        twist = Twist()
        twist.linear.x = float(v)
        twist.angular.z = float(w)
        if not self.stamped:
            self.cmd_vel.publish(twist)
            return
        msg = TwistStamped(twist=twist)     # frame empty: the robot's own base
        msg.header.stamp = self.get_clock().now().to_msg()
        self.cmd_vel.publish(msg)

    def move_head(self, angle: float) -> None:
        self.head.publish(HeadAngle(angle=float(angle), max_speed=0.0))

    def move_lift(self, height: float) -> None:
        self.lift.publish(LiftHeight(height=float(height), max_speed=0.0))


class Demonstration:
    """The demo's script on a :class:`DemoNode` (see the module docstring)."""

    #: how far the head and the lift may end from where they were sent (rad, m)
    HEAD_TOLERANCE_RAD = math.radians(3.0)
    LIFT_TOLERANCE_M = 0.005
    #: how often the graph is looked at for a second driver (s)
    GRAPH_CHECK_S = 0.5
    #: how long two link_status publishers are given for the other driver's link report
    #: (1 Hz on /diagnostics) to name its robot, before the demo refuses without that name (s)
    NAME_THE_OTHER_S = 2.5
    #: how long the demo's node is on the graph before it commands anything (s): a stack
    #: that ran before it is found only at that stack's next discovery announcement (Fast
    #: DDS: every 3 s), and this stack's driver looks for a namesake as long (CHECKS_S)
    GRAPH_SETTLE_S = max(CHECKS_S) + 0.5

    def __init__(self, options: DemoOptions, out: Callable[[str], None],
                 ground_truth: Optional[GroundTruth] = None,
                 processes_alive: Callable[[], Optional[str]] = lambda: None,
                 stop: Optional[Any] = None,
                 face_node_running: Callable[[], bool] = lambda: False) -> None:
        """``processes_alive()`` says why the run cannot go on (a required process exited),
        or None; ``face_node_running()`` whether a face node started by the bring-up runs;
        ``stop`` (a :class:`~cozmo_driver.stop_flag.StopFlag` or a ``threading.Event``)
        interrupts the run once set."""
        self.options = options
        self.face_node_running = face_node_running
        self.say = out
        self.truth_source = ground_truth
        self.processes_alive = processes_alive
        self.stop = stop or threading.Event()
        self.t0 = time.monotonic()
        self.activity = "starting"
        self.result = DemoResult()
        self.node: Optional[DemoNode] = None
        self.calls: Optional[SpinningCaller] = None
        self.connected_once = False
        #: the emergency stop was engaged during the run: the demo moves the robot no more
        self.emergency_stopped = False
        self._lost_since: Optional[float] = None
        self._lost_total = 0.0                  # seconds the link was not CONNECTED, after it was
        self._graph_checked = -math.inf
        self._on_graph_since = math.inf  # when the demo's node was made (run)
        self._two_drivers_since: Optional[float] = None
        self.media = MediaSteps(self)
        self._done = threading.Event()
        ns = options.namespace.strip("/")
        self.driver_fqn = f"/{ns}/cozmo_driver" if ns else "/cozmo_driver"
        self.prefix = f"/{ns}" if ns else ""

    # --- output

    def stamp(self) -> str:
        return f"[{time.monotonic() - self.t0:5.1f} s]"

    def out(self, text: str) -> None:
        self.say(f"{self.stamp()} {text}")

    def failed(self, step: str, text: str) -> None:
        """Step ``step`` failed: kept in the result's failures and printed."""
        self.result.failures.append(f"{step}: {text}")
        self.out(f"{step}: FAILED: {text}")

    # --- running

    def run(self) -> DemoResult:
        """Run the whole script on this thread, which spins the node. Raises
        :class:`DemoAbort` when the robot or the stack could not be brought up (code 2) or
        on an interruption (130); a run stopped after the robot answered returns its
        result, the reason in ``aborted`` and last in ``failures``."""
        context = rclpy.Context()
        # not sys.argv: name:=value there is ours; a context of its own installs no
        # signal handler (the demo has its own)
        rclpy.init(args=[], context=context)
        executor = SingleThreadedExecutor(context=context)
        node = DemoNode(self.options.namespace, stamped=self.options.cmd_vel_stamped,
                        context=context)
        self.node = node
        self._on_graph_since = time.monotonic()
        executor.add_node(node)
        self.calls = SpinningCaller(executor, check=self._check)
        status = threading.Thread(target=self._status_loop, name="demo-status", daemon=True)
        sampler = None
        try:
            status.start()
            self._wait_connected()
            try:
                self.media.animation()
                if self.truth_source is not None:
                    sampler = threading.Thread(target=self._sample_truth, name="demo-truth",
                                               daemon=True)
                self._start_recording()
                if sampler is not None:
                    sampler.start()
                self._camera_on()
                self.media.face()
                self.media.sound()
                self._square()
                self._finish()
            except DemoAbort as exc:
                if exc.code != 1:       # an interruption (130)
                    raise
                self.result.aborted = str(exc)
                node.drive(0.0, 0.0)
                self.media.sound_unawaited()   # before the stop: what stopped the run is the last failure
                self.result.failures.append(f"stopped: {exc}")
                self.out(f"stopped: {exc}")
                self._collect()
            return self.result
        finally:
            self._done.set()
            if self.connected_once:
                node.drive(0.0, 0.0)    # the driver's cmd_vel watchdog would stop it too
            status.join(2.0)
            if sampler is not None:
                sampler.join(2.0)
            executor.shutdown(2.0)
            node.destroy_node()
            context.try_shutdown()

    # --- checks

    def _abort(self, message: str) -> DemoAbort:
        """Before the robot answered, the stack was not brought up (2); after, the
        demonstration failed (1)."""
        return DemoAbort(message, 1 if self.connected_once else 2)

    def _check(self) -> None:
        if self.stop.is_set():
            raise DemoAbort("interrupted", 130)
        # another stack first: its driver is why this one's own may have exited (name guard)
        self._check_graph()
        dead = self.processes_alive()
        if dead and DUPLICATE_MARK in dead and self._two_drivers_since is None:
            # this stack's driver refused to run beside another of its name: name that one
            self._two_drivers_since = time.monotonic()
        if dead and not self._naming_the_other():
            raise self._abort(dead)
        if time.monotonic() > self.options.deadline:
            raise self._abort("the run took longer than --duration allows: stopped")
        if self.connected_once:
            with self.node.lock:
                state = self.node.link.state if self.node.link is not None else ""
            if state == LinkStatus.CONNECTED:
                if self._lost_since is not None:
                    lost = time.monotonic() - self._lost_since
                    self._lost_total += lost
                    self.out(f"link CONNECTED again after {lost:.1f} s")
                self._lost_since = None
            elif self._lost_since is None:
                self._lost_since = time.monotonic()
                self.out(f"link {state}: the driver is reconnecting")
            elif time.monotonic() - self._lost_since > 6.0:
                raise DemoAbort(f"the link to the robot stayed {state} for 6 s: is the robot on "
                                "and this machine still on its Wi-Fi?")

    def _others(self, what: str) -> DemoAbort:
        domain = os.environ.get("ROS_DOMAIN_ID", "").strip() or "0"
        return self._abort(
            f"another stack runs with this one's names in ROS domain {domain} ({what}): the "
            "demo would read and command both. Stop the other one, or separate the two: "
            "--namespace NS, or a ROS domain each (export ROS_DOMAIN_ID=<a free id>)")

    def _check_graph(self, at_once: bool = False) -> None:
        """Another driver of this demo's driver name (another stack with the same names in
        this ROS domain): its link report on /diagnostics names another robot, or the
        graph shows two publishers of link_status. The demo would read and command both.
        The graph is asked every GRAPH_CHECK_S, or now with ``at_once``."""
        with self.node.lock:
            others = sorted(a for a in self.node.driver_robots if a != self.options.robot_address)
        if others:
            raise self._others(f"a driver named {self.driver_fqn} connected to the robot at "
                               f"{others[0]}; this demo's is at {self.options.robot_address}")
        now = time.monotonic()
        if not at_once and now - self._graph_checked < self.GRAPH_CHECK_S:
            return
        self._graph_checked = now
        drivers = self.node.count_publishers("link_status")
        if drivers <= 1:
            return              # (once seen, two stay seen: this stack's may be the one refused)
        if self._two_drivers_since is None:
            self._two_drivers_since = now
        if now - self._two_drivers_since >= self.NAME_THE_OTHER_S:
            raise self._others(f"{drivers} nodes publish {self.prefix}/link_status")

    def _naming_the_other(self) -> bool:
        """Whether the graph shows a second driver whose robot is not named yet (this stack's
        driver exiting meanwhile is its name guard refusing to run beside that one)."""
        since = self._two_drivers_since
        return since is not None and time.monotonic() - since < self.NAME_THE_OTHER_S

    def lost_so_far(self) -> float:
        """Seconds the link was not CONNECTED since the robot first answered."""
        now = time.monotonic()
        return self._lost_total + (now - self._lost_since if self._lost_since is not None else 0.0)

    def _late(self, start: float, budget: float, lost_at_start: float) -> Optional[str]:
        """Whether a move begun at ``start`` overran ``budget`` seconds, not counting the
        time the link was down meanwhile: None, or what to add to the message."""
        lost = self.lost_so_far() - lost_at_start
        if time.monotonic() - start - lost <= budget:
            return None
        return f" (the link was down {lost:.1f} s meanwhile)" if lost > 0.05 else ""

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, spinning the node and checking the run meanwhile (raises
        :class:`DemoAbort`)."""
        self.calls.spin_for(seconds)

    # --- steps

    def _wait_connected(self) -> None:
        """Wait for the driver's first link_status (it may take a while to start on a busy
        machine), then up to connect_timeout_s for the robot to answer it. The driver is
        known to be this demo's by its link report on /diagnostics, which names the robot:
        a latched CONNECTED from another stack's driver of the same name is not taken, and
        none is taken before the demo's node has been on the graph for GRAPH_SETTLE_S, long
        enough to find a stack that ran before it."""
        node = self.node
        o = self.options
        self.activity = "waiting for the driver to connect"
        self.out(f"waiting for {self.driver_fqn} to connect to {o.robot_address}")
        deadline = time.monotonic() + max(o.startup_timeout_s, o.connect_timeout_s)
        seen_driver = False
        while True:
            with node.lock:
                state = node.link.state if node.link is not None else None
                has_odom = node.odom is not None
                ours = o.robot_address in node.driver_robots
            if state is not None and not seen_driver:
                seen_driver = True
                deadline = time.monotonic() + o.connect_timeout_s
                if state != LinkStatus.CONNECTED:
                    self.out(f"the driver is up: link_status {state}")
            answered = state == LinkStatus.CONNECTED and has_odom and ours
            if answered:
                # not while another driver of this name is on the graph, its robot not yet
                # named: the demo refuses then, having commanded nothing (_check_graph);
                # both waits are bounded (GRAPH_SETTLE_S, NAME_THE_OTHER_S)
                self._check_graph(at_once=True)
                settled = time.monotonic() - self._on_graph_since >= self.GRAPH_SETTLE_S
                if settled and not self._naming_the_other():
                    break
            elif time.monotonic() > deadline:
                raise self._not_connected(state, ours, seen_driver)
            self.sleep(0.05)
        self.connected_once = True
        self.activity = "connected"
        with node.lock:
            link, info = node.link, node.robot_info
        rtt = f"{link.rtt_s * 1e3:.1f} ms" if math.isfinite(link.rtt_s) else "-"
        self.out(f"driver connected to the robot: link_status CONNECTED, rtt {rtt}")
        self.sleep(0.3)
        with node.lock:
            info = node.robot_info
        if info is not None:
            self.out(f"robot_info: firmware {info.firmware_version} ({info.firmware_build_type}), "
                     f"head serial 0x{info.head_serial:08x}, body colour {info.body_color}")

    def _not_connected(self, state: Optional[str], ours: bool, seen_driver: bool) -> DemoAbort:
        """Why :meth:`_wait_connected` gave up (a bring-up failure): what did not come (the
        driver's link_status, the robot's answer, the driver's report naming the robot, odom)."""
        o = self.options
        if not seen_driver:
            return DemoAbort(
                f"the driver did not publish link_status within "
                f"{max(o.startup_timeout_s, o.connect_timeout_s):g} s of its start (see its log)", 2)
        with self.node.lock:
            link = self.node.link
        if state != LinkStatus.CONNECTED and link is not None and not link.driver_active:
            # its configure failed (say its port taken), or it was deactivated: not the robot's fault
            return DemoAbort(
                f"{self.driver_fqn} is not active (link_status {state}, driver_active false) "
                f"{o.connect_timeout_s:g} s after it came up: its configure failed, or it was "
                f"deactivated; its log says why (ros2 lifecycle get {self.driver_fqn} shows its state)", 2)
        if state != LinkStatus.CONNECTED:
            return DemoAbort(
                f"no answer from the robot at {o.robot_address} within {o.connect_timeout_s:g} s "
                f"(link_status {state}): is this machine on the robot's Wi-Fi? (Cozmo is a "
                "Wi-Fi access point named Cozmo_...; its password shows on its face when you "
                "raise and lower its lift; the robot is at 172.31.1.1) Is the robot switched "
                "on and awake?", 2)
        if not ours:    # the robot answered; the driver's report of it did not come
            with self.node.lock:
                named = sorted(self.node.driver_robots)
            return DemoAbort(
                f"{self.driver_fqn} reports link_status CONNECTED, but no link report of it on "
                f"/diagnostics ({self.node.driver_link_report}) named the robot at "
                f"{o.robot_address} within {o.connect_timeout_s:g} s"
                + (f" (they named {', '.join(named)})" if named else " (none came)")
                + ": the demo knows its own driver by that report, and takes no other stack's "
                "driver for it (see the driver's log)", 2)
        return DemoAbort(
            f"{self.driver_fqn} reports link_status CONNECTED to the robot at {o.robot_address}, "
            f"but published no odom within {o.connect_timeout_s:g} s (see its log)", 2)

    def _start_recording(self) -> None:
        node = self.node
        with node.lock:
            odom = node.odom
            node.record = True
        self.result.odom_at_start = odom
        if self.truth_source is not None:
            self.result.truth_at_start = self.truth_source.pose()
            self.result.sound_frames = self.truth_source.sound_frames()

    def _sample_truth(self) -> None:
        while not self._done.is_set():
            try:
                x, y, yaw = self.truth_source.pose()
            except (CozmoError, TimeoutError, concurrent.futures.TimeoutError):
                return                  # the simulator stopped: nothing more to sample
            self.result.truth.append((time.monotonic(), x, y, yaw))
            self._done.wait(1.0 / 30.0)

    def _camera_on(self) -> None:
        node = self.node
        self.activity = "camera on"
        service = f"{self.driver_fqn}/set_parameters"
        client = node.create_client(SetParameters, service)
        try:
            if not self.calls.wait_for_service(client, DISCOVERY_S):
                self.failed("camera", f"{service} is not available")
                return
            request = SetParameters.Request()
            values = {"camera_enabled": True, "camera_color": bool(self.options.color)}
            request.parameters = [
                Parameter(name=name, value=ParameterValue(type=ParameterType.PARAMETER_BOOL,
                                                          bool_value=value))
                for name, value in values.items()]
            text = ", ".join(f"{k}={str(v).lower()}" for k, v in values.items())
            self.out(f"camera on: {text} -> {service}")
            with node.lock:
                node.counts_at_camera_on = node.counts["camera"]
            response = self.calls.call(client, request, ANSWER_S)
            if response is None:
                self.failed("camera", f"the driver did not answer set_parameters within "
                                      f"{ANSWER_S:g} s")
                return
            refused = [f"{name} ({res.reason})" for name, res in zip(values, response.results)
                       if not res.successful]
            if len(response.results) != len(values):
                refused.append(f"{len(response.results)} answers to {len(values)} parameters")
            if refused:
                self.failed("camera", "the driver refused " + ", ".join(refused))
                return
            self.result.camera_requested = True
        finally:
            node.destroy_client(client)

    # --- motion

    def _pose(self) -> Pose:
        with self.node.lock:
            return self.node.odom

    def estop_latched(self) -> bool:
        """Whether the driver's emergency stop was engaged during the run, or already was
        when it began, released since or not: latched in :attr:`emergency_stopped` once
        seen, and from then on the demo moves the robot no more."""
        with self.node.lock:
            if self.node.estop_engaged:
                self.emergency_stopped = True
        return self.emergency_stopped

    def _halt_if_stopped(self, move: str) -> None:
        """Once the driver's emergency stop was engaged, even if released since: cmd_vel 0,
        and :class:`_EmergencyStopped` for ``move`` (a release does not start the demo's
        motion again)."""
        if self.estop_latched():
            self.node.drive(0.0, 0.0)
            raise _EmergencyStopped(move)

    def _drive_side(self, start_heading: float, move: str) -> None:
        o = self.options
        x0, y0, _ = self._pose()
        start, lost0 = time.monotonic(), self.lost_so_far()
        budget = 3.0 * o.side_m / o.speed_mps + 5.0
        while True:
            self._halt_if_stopped(move)
            x, y, yaw = self._pose()
            remaining = o.side_m - math.hypot(x - x0, y - y0)
            if remaining <= 0.0005:
                break
            late = self._late(start, budget, lost0)
            if late is not None:
                raise DemoAbort(f"the robot did not drive the side of the square within "
                                f"{budget:.0f} s{late}: was it picked up, or stopped at a cliff?")
            v = min(o.speed_mps, max(0.01, 2.5 * remaining))
            w = max(-0.6, min(0.6, 3.0 * _wrap(start_heading - yaw)))
            self.node.drive(v, w)
            self.sleep(0.05)
        self.node.drive(0.0, 0.0)

    def _turn_to(self, heading: float, move: str) -> None:
        o = self.options
        start, lost0 = time.monotonic(), self.lost_so_far()
        while True:
            self._halt_if_stopped(move)
            _, _, yaw = self._pose()
            error = _wrap(heading - yaw)
            if abs(error) < math.radians(0.5):
                break
            late = self._late(start, 8.0, lost0)
            if late is not None:
                raise DemoAbort(f"the robot did not turn within 8 s{late}: was it picked up?")
            w = math.copysign(min(o.turn_radps, max(0.2, 3.0 * abs(error))), error)
            self.node.drive(0.0, w)
            self.sleep(0.05)
        self.node.drive(0.0, 0.0)

    def _square(self) -> None:
        """The square; once the emergency stop was engaged, a failure and no more motion."""
        try:
            self._square_moves()
        except _EmergencyStopped as exc:
            self.emergency_stopped = True
            self.failed("square", f"{exc}: {_ESTOP_ENGAGED}")

    def _square_moves(self) -> None:
        o = self.options
        node = self.node
        _, _, yaw0 = self._pose()
        moves = [(math.radians(20.0), 0.070), (math.radians(-10.0), 0.045),
                 (math.radians(30.0), 0.090), (math.radians(10.0), 0.060)]
        for side in range(4):
            heading = yaw0 + side * math.pi / 2
            self.activity = f"square: side {side + 1} of 4"
            self.out(f"side {side + 1} of 4: cmd_vel {o.speed_mps:.2f} m/s over "
                     f"{o.side_m * 1000:.0f} mm (closed on odom)")
            self._drive_side(heading, f"side {side + 1} of 4")
            self.sleep(0.2)
            self.activity = f"square: corner {side + 1} of 4"
            self.out(f"corner {side + 1} of 4: cmd_vel turn +90 deg at up to "
                     f"{o.turn_radps:.1f} rad/s")
            self._turn_to(heading + math.pi / 2, f"corner {side + 1} of 4")
            head, lift = moves[side]
            self._halt_if_stopped(f"corner {side + 1} of 4")
            self.out(f"head/angle {math.degrees(head):+.0f} deg, lift/height "
                     f"{lift * 1000:.0f} mm")
            node.move_head(head)
            node.move_lift(lift)
            self.sleep(0.4)

    def _finish(self) -> None:
        node = self.node
        self.activity = "finishing"
        head, lift = math.radians(-5.0), 0.032
        node.drive(0.0, 0.0)
        seen_before = self.emergency_stopped      # by the square, which then failed
        moving = not self.estop_latched()
        if moving:
            node.move_head(head)
            node.move_lift(lift)
            self.out("stop: cmd_vel 0, head/angle -5 deg, lift/height 32 mm")
            self.sleep(1.0)
        else:
            self.out("stop: cmd_vel 0; head and lift: skipped: the emergency stop was engaged")
            if not seen_before:     # engaged after the square's last move
                self.failed("head and lift", f"skipped: {_ESTOP_ENGAGED}")
        self.media.sound_result()
        if moving and self.estop_latched():     # engaged while they moved
            self.failed("head and lift", f"not checked: {_ESTOP_ENGAGED}")
        elif moving:
            self._check_joints(head, lift)
        self._collect()
        self._check_camera()
        self.activity = "done"

    def _check_joints(self, head: float, lift: float) -> None:
        """The head and the lift where they were sent last (joint_states)."""
        with self.node.lock:
            joints = dict(self.node.joints)
        if "head_joint" not in joints or "lift_joint" not in joints:
            self.failed("head and lift", "no head_joint and lift_joint on joint_states")
            return
        head_now = joints["head_joint"]
        lift_now = lift_angle_to_height(joints["lift_joint"])
        if abs(head_now - head) > self.HEAD_TOLERANCE_RAD:
            self.failed("head", f"at {math.degrees(head_now):.1f} deg after head/angle "
                                f"{math.degrees(head):.0f} deg")
        if abs(lift_now - lift) > self.LIFT_TOLERANCE_M:
            self.failed("lift", f"at {lift_now * 1e3:.1f} mm after lift/height "
                                f"{lift * 1e3:.0f} mm")

    def _check_camera(self) -> None:
        """Frames arrived after the camera was turned on, in the encoding asked for."""
        result = self.result
        if not result.camera_requested:
            return                      # the camera step failed already
        if result.camera_frames == 0 or result.camera is None:
            self.failed("camera", "no image arrived on camera/image_raw after the camera was "
                                  "turned on")
            return
        colour = result.camera.ndim == 3
        if colour != bool(self.options.color):
            self.failed("camera", f"{result.camera_encoding} images although "
                                  f"{'colour' if self.options.color else 'grey'} was asked for")

    def _collect(self) -> None:
        """The odometry recorded, the final pose and truth, the latest camera image."""
        node = self.node
        with node.lock:
            image = node.image
            node.record = False
            final = node.odom
            frames = node.counts["camera"] - node.counts_at_camera_on
        result = self.result
        result.link_down_s = self.lost_so_far()
        result.odometry = list(node.odometry)
        result.final_odom = final
        result.camera_frames = max(0, frames) if result.camera_requested else 0
        if self.truth_source is not None and result.truth_at_start is not None:
            try:
                result.final_truth = self.truth_source.pose()
                result.sound_frames = self.truth_source.sound_frames() - result.sound_frames
            except (CozmoError, TimeoutError, concurrent.futures.TimeoutError):
                result.final_truth = None   # the simulator stopped
        if image is not None:
            try:
                result.camera = image_to_array(image)
                result.camera_encoding = image.encoding
            except ValueError as exc:
                self.failed("camera", str(exc))

    # --- status

    def status_line(self, rates: Dict[str, float]) -> str:
        """link state and RTT | pose | battery | stream rates | what the demo does."""
        node = self.node
        with node.lock:
            link, odom, battery = node.link, node.odom, node.battery
        if link is None:
            link_text = "no link_status yet"
        else:
            rtt = f"{link.rtt_s * 1e3:3.1f} ms" if math.isfinite(link.rtt_s) else "-"
            link_text = f"{link.state} rtt {rtt:>6}"
        pose = (f"x {_tenths(odom[0] * 1e3):+6.1f} y {_tenths(odom[1] * 1e3):+6.1f} mm yaw "
                f"{_tenths(math.degrees(odom[2])):+6.1f} deg" if odom is not None
                else "no odom yet")
        parts = [link_text, pose]
        if battery is not None:
            pct = f" {battery.percentage * 100:.0f} %" if math.isfinite(battery.percentage) else ""
            charge = _POWER_STATUS.get(battery.power_supply_status, "")
            parts.append(f"battery {battery.voltage:.2f} V{pct}"
                         + ("" if charge in ("", "discharging") else f" {charge}"))
        parts.append(f"odom {rates['odom']:2.0f} Hz, camera {rates['camera']:2.0f} fps, "
                     f"joint_states {rates['joint_states']:2.0f} Hz")
        parts.append(self.activity)
        return " | ".join(parts)

    def _status_loop(self) -> None:
        node = self.node
        with node.lock:
            last_counts = dict(node.counts)
        last = time.monotonic()
        while not self._done.wait(1.0):
            now = time.monotonic()
            with node.lock:
                counts = dict(node.counts)
            rates = {k: (counts[k] - last_counts[k]) / (now - last) for k in counts}
            last_counts, last = counts, now
            self.out(self.status_line(rates))
