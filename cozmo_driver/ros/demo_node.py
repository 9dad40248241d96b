"""The ROS side of ``cozmo-demo``: a node that drives a Cozmo through the driver's
ROS 2 interfaces only, and watches what the driver publishes.

:class:`DemoNode` subscribes to ``link_status``, ``robot_info``, ``odom``,
``joint_states``, ``battery_state`` and ``camera/image_raw`` (counting each stream
to measure its rate) and publishes ``cmd_vel``, ``head/angle`` and
``lift/height``. :class:`Demonstration` runs the script on it, from the calling
thread, while an executor spins the node on a thread of its own:

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

A status line is printed every second (link state and RTT from
``link_status``, pose from ``odom``, battery from ``battery_state``, the rates of
odom, camera and joint_states as received here). The optional ground truth (the
simulator's true pose) is sampled alongside. Everything is bounded: each wait
has a deadline, and the whole run has one.

The animation, face and audio interfaces are found in the ROS graph by name,
and their requests filled by field name and type, so this node needs no
interface package beyond the driver's.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import rclpy
from cozmo_interfaces.msg import HeadAngle, LiftHeight, LinkStatus, RobotInfo
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import BatteryState, Image, JointState

from ..protocol.errors import CozmoError
from . import qos

__all__ = ["DemoNode", "Demonstration", "DemoOptions", "DemoResult", "DemoAbort", "GroundTruth"]

Pose = Tuple[float, float, float]          # x m, y m, yaw rad

_RELIABLE = qos.profile(10)
_LATCHED = qos.QOS_LATCHED
_POWER_STATUS = {BatteryState.POWER_SUPPLY_STATUS_CHARGING: "charging",
                 BatteryState.POWER_SUPPLY_STATUS_DISCHARGING: "discharging",
                 BatteryState.POWER_SUPPLY_STATUS_FULL: "full",
                 BatteryState.POWER_SUPPLY_STATUS_NOT_CHARGING: "not charging"}
_RATE_STREAMS = ("odom", "camera", "joint_states")
#: message types of a display topic of the driver, the preferred first
_DISPLAY_TYPES = ("cozmo_interfaces/msg/DisplayImage", "sensor_msgs/msg/Image")


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


class DemoAbort(Exception):
    """The demonstration cannot go on; ``code`` is the exit status to give."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class DemoNode(Node):
    """Subscriptions and publishers of the demonstration (see the module docstring)."""

    def __init__(self, namespace: str = "", **kwargs: Any) -> None:
        super().__init__("cozmo_demo", namespace=namespace or "", **kwargs)
        self.lock = threading.Lock()
        self.link: Optional[LinkStatus] = None
        self.robot_info: Optional[RobotInfo] = None
        self.odom: Optional[Pose] = None
        self.joints: Dict[str, float] = {}
        self.battery: Optional[BatteryState] = None
        self.image: Optional[Image] = None
        self.counts = {name: 0 for name in _RATE_STREAMS}
        self.odometry: List[Tuple[float, float, float, float]] = []
        self.record = False
        self.cmd_vel = self.create_publisher(Twist, "cmd_vel", _RELIABLE)
        self.head = self.create_publisher(HeadAngle, "head/angle", _RELIABLE)
        self.lift = self.create_publisher(LiftHeight, "lift/height", _RELIABLE)
        self.create_subscription(LinkStatus, "link_status", self._on_link, _LATCHED)
        self.create_subscription(RobotInfo, "robot_info", self._on_info, _LATCHED)
        self.create_subscription(Odometry, "odom", self._on_odom, _RELIABLE)
        self.create_subscription(JointState, "joint_states", self._on_joints, _RELIABLE)
        self.create_subscription(BatteryState, "battery_state", self._on_battery, _RELIABLE)
        self.create_subscription(Image, "camera/image_raw", self._on_image,
                                 qos_profile_sensor_data)

    # --- callbacks (executor thread)

    def _on_link(self, msg: LinkStatus) -> None:
        with self.lock:
            self.link = msg

    def _on_info(self, msg: RobotInfo) -> None:
        with self.lock:
            self.robot_info = msg

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

    # --- commands (any thread)

    def drive(self, v: float, w: float) -> None:
        msg = Twist()
        msg.linear.x = float(v)
        msg.angular.z = float(w)
        self.cmd_vel.publish(msg)

    def move_head(self, angle: float) -> None:
        self.head.publish(HeadAngle(angle=float(angle), max_speed=0.0))

    def move_lift(self, height: float) -> None:
        self.lift.publish(LiftHeight(height=float(height), max_speed=0.0))


def _wait_future(future, timeout: float) -> bool:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    return done.wait(timeout) and future.done()


def _action_outcome(wrapped: Any) -> Tuple[bool, str]:
    """(succeeded, "succeeded (message)" / "failed (status N)...") of an action's wrapped
    result: success needs the SUCCEEDED status and a result without ``success=False``."""
    outcome = wrapped.result
    ok = bool(getattr(outcome, "success", True)) and wrapped.status == 4  # SUCCEEDED
    message = getattr(outcome, "message", "")
    text = "succeeded" if ok else f"failed (status {wrapped.status})"
    return ok, text + (f" ({message})" if message else "")


def _fields(msg: Any) -> Dict[str, str]:
    return dict(msg.get_fields_and_field_types())


def _interface_class(type_name: str) -> Any:
    """``pkg/srv/Name`` -> the Python class (rosidl's layout), or None."""
    try:
        package, kind, name = type_name.split("/")
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ValueError, ImportError, AttributeError):
        return None


def _set_text(msg: Any, value: str, preferred: Sequence[str]) -> Optional[str]:
    """Put ``value`` into the string field of ``msg`` named first in ``preferred`` (else its
    only string field); returns the field's name, or None if there is no such field."""
    strings = [name for name, kind in _fields(msg).items() if kind.startswith("string")]
    for name in list(preferred) + (strings if len(strings) == 1 else []):
        if name in strings:
            setattr(msg, name, value)
            return name
    return None


def fill_audio_goal(goal: Any, wav: Path) -> Optional[str]:
    """Fill a play-audio goal with the WAV file ``wav`` by what its fields look like:
    a path, file name or URI string; or the file's bytes; returns how, or None."""
    kinds = _fields(goal)
    for name, kind in kinds.items():
        if kind.startswith("string") and any(k in name for k in ("path", "file", "uri", "url")):
            setattr(goal, name, wav.resolve().as_uri() if ("uri" in name or "url" in name)
                    else str(wav.resolve()))
            how = f"{name}={getattr(goal, name)}"
            break
    else:
        for name, kind in kinds.items():
            if kind == "sequence<uint8>" and name in ("data", "wav", "audio", "wav_data",
                                                      "file_data", "content"):
                setattr(goal, name, wav.read_bytes())
                how = f"{name}=<{wav.stat().st_size} bytes of WAV>"
                break
        else:
            return None
    for name, kind in kinds.items():
        if name == "volume" and kind in ("float", "double", "float32", "float64"):
            setattr(goal, name, 1.0)
    return how


class Demonstration:
    """The demo's script on a :class:`DemoNode` (see the module docstring)."""

    def __init__(self, options: DemoOptions, out: Callable[[str], None],
                 ground_truth: Optional[GroundTruth] = None,
                 processes_alive: Callable[[], Optional[str]] = lambda: None,
                 stop: Optional[threading.Event] = None,
                 face_node_running: Callable[[], bool] = lambda: False) -> None:
        """``processes_alive()`` says why the run cannot go on (a required process exited),
        or None; ``face_node_running()`` whether a face node started by the bring-up runs."""
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
        self.connected_once = False
        self._lost_since: Optional[float] = None
        self._sound_future = None
        self._done = threading.Event()
        ns = options.namespace.strip("/")
        self.driver_fqn = f"/{ns}/cozmo_driver" if ns else "/cozmo_driver"
        self.prefix = f"/{ns}" if ns else ""

    # --- output

    def stamp(self) -> str:
        return f"[{time.monotonic() - self.t0:5.1f} s]"

    def out(self, text: str) -> None:
        self.say(f"{self.stamp()} {text}")

    # --- running

    def run(self) -> DemoResult:
        """Run the whole script; raises :class:`DemoAbort` when it cannot finish."""
        context = rclpy.Context()
        rclpy.init(args=[], context=context)   # not sys.argv: name:=value there is ours
        executor = SingleThreadedExecutor(context=context)
        node = DemoNode(self.options.namespace, context=context)
        self.node = node
        executor.add_node(node)
        spinner = threading.Thread(target=executor.spin, name="demo-executor", daemon=True)
        spinner.start()
        status = threading.Thread(target=self._status_loop, name="demo-status", daemon=True)
        sampler = None
        try:
            status.start()
            self._wait_connected()
            self._animation()
            if self.truth_source is not None:
                sampler = threading.Thread(target=self._sample_truth, name="demo-truth",
                                           daemon=True)
            self._start_recording()
            if sampler is not None:
                sampler.start()
            self._camera_on()
            self._face()
            self._sound()
            self._square()
            self._finish()
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
            spinner.join(2.0)

    # --- checks

    def _check(self) -> None:
        if self.stop.is_set():
            raise DemoAbort("interrupted", 130)
        dead = self.processes_alive()
        if dead:
            raise DemoAbort(dead)
        if time.monotonic() > self.options.deadline:
            raise DemoAbort("the run took longer than --duration allows: stopped")
        if self.connected_once:
            with self.node.lock:
                state = self.node.link.state if self.node.link is not None else ""
            if state == LinkStatus.CONNECTED:
                self._lost_since = None
            elif self._lost_since is None:
                self._lost_since = time.monotonic()
                self.out(f"link {state}: the driver is reconnecting")
            elif time.monotonic() - self._lost_since > 6.0:
                raise DemoAbort(f"the link to the robot stayed {state} for 6 s: is the robot on "
                                "and this machine still on its Wi-Fi?")

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while True:
            self._check()
            left = end - time.monotonic()
            if left <= 0:
                return
            self.stop.wait(min(0.05, left))

    # --- steps

    def _wait_connected(self) -> None:
        """Wait for the driver's first link_status (it may take a while to start on a busy
        machine), then up to connect_timeout_s for the robot to answer it."""
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
            if state is not None and not seen_driver:
                seen_driver = True
                deadline = time.monotonic() + o.connect_timeout_s
                if state != LinkStatus.CONNECTED:
                    self.out(f"the driver is up: link_status {state}")
            if state == LinkStatus.CONNECTED and has_odom:
                break
            if time.monotonic() > deadline:
                if not seen_driver:
                    raise DemoAbort(
                        f"the driver did not publish link_status within "
                        f"{max(o.startup_timeout_s, o.connect_timeout_s):g} s of its start "
                        "(see its log)", 2)
                raise DemoAbort(
                    f"no answer from the robot at {o.robot_address} within "
                    f"{o.connect_timeout_s:g} s (link_status {state}): is this machine "
                    "on the robot's Wi-Fi? (Cozmo is a Wi-Fi access point named Cozmo_...; its "
                    "password shows on its face when you raise and lower its lift; the robot "
                    "is at 172.31.1.1) Is the robot switched on and awake?", 2)
            self._check()
            self.stop.wait(0.05)
        self.connected_once = True
        self.activity = "connected"
        with node.lock:
            link, info = node.link, node.robot_info
        rtt = f"{link.rtt_s * 1e3:.1f} ms" if math.isfinite(link.rtt_s) else "-"
        self.out(f"driver connected to the robot: link_status CONNECTED, rtt {rtt}")
        self._sleep(0.3)
        with node.lock:
            info = node.robot_info
        if info is not None:
            self.out(f"robot_info: firmware {info.firmware_version} ({info.firmware_build_type}), "
                     f"head serial 0x{info.head_serial:08x}, body colour {info.body_color}")

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
        client = node.create_client(SetParameters, f"{self.driver_fqn}/set_parameters")
        try:
            if not client.wait_for_service(timeout_sec=5.0):
                raise DemoAbort(f"{self.driver_fqn}/set_parameters is not available")
            request = SetParameters.Request()
            values = {"camera_enabled": True, "camera_color": bool(self.options.color)}
            request.parameters = [
                Parameter(name=name, value=ParameterValue(type=ParameterType.PARAMETER_BOOL,
                                                          bool_value=value))
                for name, value in values.items()]
            text = ", ".join(f"{k}={str(v).lower()}" for k, v in values.items())
            self.out(f"camera on: {text} -> {self.driver_fqn}/set_parameters")
            future = client.call_async(request)
            if not _wait_future(future, 5.0):
                raise DemoAbort("the driver did not answer set_parameters within 5 s")
            for name, res in zip(values, future.result().results):
                if not res.successful:
                    raise DemoAbort(f"the driver refused {name}: {res.reason}")
        finally:
            node.destroy_client(client)

    # --- face

    def _find_face(self) -> Optional[Tuple[str, str, str]]:
        """(kind, name, type) of the first way to show a face that the graph offers."""
        node = self.node
        ns = self.prefix
        for name, types in node.get_service_names_and_types():
            if name.endswith("/set_face_expression") and name.startswith(ns + "/") and types:
                return "service", name, types[0]
        for name, types in node.get_topic_names_and_types():
            if name == f"{ns}/face/expression" and types:
                return "topic", name, types[0]
        driver_ns = ns or "/"
        try:
            subscribed = node.get_subscriber_names_and_types_by_node("cozmo_driver", driver_ns)
        except RuntimeError:        # NodeNameNonExistentError: no driver, no display topic
            subscribed = []
        displays = [(name, types[0]) for name, types in subscribed
                    if types and "display" in name and types[0] in _DISPLAY_TYPES]
        displays.sort(key=lambda item: _DISPLAY_TYPES.index(item[1]))
        if displays:
            return ("display", *displays[0])
        return None

    def _face(self) -> None:
        self.activity = "face"
        found = self._find_face()
        # a face node that was started may take a moment to offer its interfaces
        wait_until = time.monotonic() + (8.0 if self.face_node_running() else 1.0)
        while found is None and time.monotonic() < wait_until:
            self._sleep(0.2)
            found = self._find_face()
            if found is None and not self.face_node_running():
                wait_until = min(wait_until, time.monotonic() + 0.5)
        result = self.result
        if found is None:
            result.face_how = ("skipped: nothing offers a set_face_expression service, a "
                               "face/expression topic or a display topic of the driver")
            self.out(f"face: {result.face_how}")
            return
        kind, name, type_name = found
        expression = self.options.expression
        try:
            if kind == "service":
                result.face_shown = self._face_by_service(name, type_name, expression)
            elif kind == "topic":
                result.face_shown = self._face_by_topic(name, type_name, expression)
            else:
                result.face_shown = self._face_by_display(name, type_name, expression)
        except (ValueError, TypeError, AttributeError, AssertionError, KeyError) as exc:
            # an interface of another shape than expected: a note, not a failure
            result.face_how = f"{kind} {name} ({type_name}) could not be used: {exc}"
            self.out(f"face: {result.face_how}")

    def _face_by_service(self, name: str, type_name: str, expression: str) -> bool:
        srv = _interface_class(type_name)
        if srv is None:
            self.result.face_how = f"service {name}: type {type_name} not importable"
            self.out(f"face: {self.result.face_how}")
            return False
        request = srv.Request()
        used = _set_text(request, expression, ("expression", "name", "face", "data"))
        if used is None:
            self.result.face_how = f"service {name} ({type_name}) has no expression field"
            self.out(f"face: {self.result.face_how}")
            return False
        client = self.node.create_client(srv, name)
        try:
            if not client.wait_for_service(timeout_sec=3.0):
                self.result.face_how = f"service {name} did not become available"
                self.out(f"face: {self.result.face_how}")
                return False
            self.out(f"face: {used}='{expression}' -> service {name}")
            future = client.call_async(request)
            if not _wait_future(future, 5.0):
                self.result.face_how = f"service {name} did not answer within 5 s"
                self.out(f"face: {self.result.face_how}")
                return False
            response = future.result()
            ok = bool(getattr(response, "success", True))
            message = getattr(response, "message", "")
            self.result.face_how = f"'{expression}' via service {name}" + \
                (f" ({message})" if message else "")
            if not ok:
                self.out(f"face: refused: {message}")
            return ok
        finally:
            self.node.destroy_client(client)

    def _publish_when_matched(self, msg_type: Any, name: str, msg: Any, qos: Any) -> None:
        publisher = self.node.create_publisher(msg_type, name, qos)
        try:
            end = time.monotonic() + 3.0
            while publisher.get_subscription_count() == 0 and time.monotonic() < end:
                self._sleep(0.05)
            publisher.publish(msg)
            self._sleep(0.3)           # let a reliable sample reach the subscriber
        finally:
            self.node.destroy_publisher(publisher)

    def _face_by_topic(self, name: str, type_name: str, expression: str) -> bool:
        msg_type = _interface_class(type_name)
        if msg_type is None:
            self.result.face_how = f"topic {name}: type {type_name} not importable"
            self.out(f"face: {self.result.face_how}")
            return False
        msg = msg_type()
        used = _set_text(msg, expression, ("expression", "name", "face", "data"))
        if used is None:
            self.result.face_how = f"topic {name} ({type_name}) has no expression field"
            self.out(f"face: {self.result.face_how}")
            return False
        self.out(f"face: {used}='{expression}' -> topic {name}")
        self._publish_when_matched(msg_type, name, msg, _RELIABLE)
        self.result.face_how = f"'{expression}' via topic {name}"
        return True

    def _face_by_display(self, name: str, type_name: str, expression: str) -> bool:
        from ..face.expressions import expression as face_expression
        from ..face.procedural import render_face

        screen = render_face(face_expression(expression))          # (64, 128) bool
        image = Image()
        image.header.stamp = self.node.get_clock().now().to_msg()
        image.height, image.width = screen.shape
        image.encoding = "mono8"
        image.step = image.width
        image.data = (screen.astype(np.uint8) * 255).tobytes()
        msg_type = _interface_class(type_name)
        if msg_type is None:
            raise ValueError(f"type {type_name} is not importable")
        if msg_type is Image:
            msg = image
        else:                       # a message around the image (and a duration: 0, for good)
            msg = msg_type()
            fields = [n for n, kind in _fields(msg).items() if kind == "sensor_msgs/Image"]
            if not fields:
                raise ValueError(f"{type_name} has no sensor_msgs/Image field")
            setattr(msg, fields[0], image)
        self.out(f"face: a rendered '{expression}' face, 128x64 mono8 -> topic {name} "
                 f"({type_name})")
        self._publish_when_matched(msg_type, name, msg, _RELIABLE)
        self.result.face_how = f"a rendered '{expression}' face on the display topic {name}"
        return True

    # --- animation

    def _animation(self) -> None:
        """Play ``options.animation`` through the ``play_animation`` action, showing its
        progress in the status line, and wait for the result."""
        self.activity = "animation"
        result = self.result
        name = self.options.animation
        from rclpy.action import ActionClient, get_action_names_and_types

        found = None
        for action_name, types in get_action_names_and_types(self.node):
            if action_name == f"{self.prefix}/play_animation" and types:
                found = (action_name, types[0])
                break
        if found is None:
            result.animation_how = "skipped: nothing offers a play_animation action"
            self.out(f"animation: {result.animation_how}")
            return
        action_name, type_name = found
        action = _interface_class(type_name)
        goal = action.Goal() if action is not None else None
        if goal is None or _set_text(goal, name, ("name", "animation", "clip")) is None:
            result.animation_how = (f"skipped: action {action_name} ({type_name}) takes no "
                                    "animation name the demo knows how to fill")
            self.out(f"animation: {result.animation_how}")
            return
        client = ActionClient(self.node, action, action_name)
        try:
            if not client.wait_for_server(timeout_sec=3.0):
                result.animation_how = f"skipped: action server {action_name} did not answer"
                self.out(f"animation: {result.animation_how}")
                return
            before = self.truth_source.animations_ended() if self.truth_source else None

            def on_feedback(message: Any) -> None:      # executor thread
                progress = float(getattr(message.feedback, "progress", 0.0))
                result.animation_progress.append(progress)
                self.activity = f"animation {name} {progress * 100:3.0f} %"

            self.out(f"animation: name='{name}' -> action {action_name}")
            self.activity = f"animation {name}   0 %"
            goal_future = client.send_goal_async(goal, feedback_callback=on_feedback)
            self._wait_for(goal_future, 5.0)
            handle = goal_future.result() if goal_future.done() else None
            if handle is None or not handle.accepted:
                result.animation_how = (f"action {action_name}: the goal was "
                                        f"{'rejected' if handle is not None else 'not answered'}")
                return
            result_future = handle.get_result_async()
            self._wait_for(result_future, 30.0)
            if not result_future.done():
                handle.cancel_goal_async()
                result.animation_how = f"action {action_name}: no result within 30 s (cancelled)"
                return
            ok, outcome = _action_outcome(result_future.result())
            result.animation_played = ok
            progress = result.animation_progress
            seen = (f"; {len(progress)} progress feedbacks, {progress[0] * 100:.0f} % .. "
                    f"{progress[-1] * 100:.0f} %" if progress else "; no progress feedback")
            result.animation_how = f"'{name}' via action {action_name}: {outcome}{seen}"
            if before is not None:
                # the robot reports AnimationEnded once it has played what it buffered, which
                # can be a few frames after the driver sent the last one: wait for it, bounded
                after = self.truth_source.animations_ended()
                end = time.monotonic() + 3.0
                while after is not None and after == before and time.monotonic() < end:
                    self._sleep(0.1)
                    after = self.truth_source.animations_ended()
                result.animations_ended = None if after is None else after - before
        finally:
            if result.animation_how and not result.animation_how.startswith("skipped"):
                self.out(f"animation: {result.animation_how}")
            client.destroy()
            self.activity = "animation done"

    def _wait_for(self, future: Any, timeout: float) -> None:
        """Wait until ``future`` is done or ``timeout`` s pass, checking the run meanwhile."""
        end = time.monotonic() + timeout
        while not future.done() and time.monotonic() < end:
            self._sleep(0.02)

    # --- sound

    def _sound(self) -> None:
        self.activity = "sound"
        result = self.result
        wav = self.options.sound
        from rclpy.action import ActionClient, get_action_names_and_types

        found = None
        for name, types in get_action_names_and_types(self.node):
            if name.endswith("/play_audio") and name.startswith(self.prefix + "/") and types:
                found = (name, types[0])
                break
        if found is None or wav is None:
            result.sound_how = "skipped: nothing offers a play_audio action" \
                if found is None else "skipped: no sound file"
            self.out(f"sound: {result.sound_how}")
            return
        name, type_name = found
        action = _interface_class(type_name)
        if action is None:
            result.sound_how = f"skipped: action {name}: type {type_name} not importable"
            self.out(f"sound: {result.sound_how}")
            return
        goal = action.Goal()
        how = fill_audio_goal(goal, wav)
        if how is None:
            result.sound_how = (f"skipped: action {name} ({type_name}) takes no file path or "
                                "WAV bytes the demo knows how to fill")
            self.out(f"sound: {result.sound_how}")
            return
        client = ActionClient(self.node, action, name)
        if not client.wait_for_server(timeout_sec=3.0):
            result.sound_how = f"skipped: action server {name} did not answer"
            self.out(f"sound: {result.sound_how}")
            return
        self.out(f"sound: {wav.name} -> action {name} ({how})")
        self._sound_future = (client, client.send_goal_async(goal), name)
        result.sound_sent = True

    def _sound_result(self) -> None:
        if self._sound_future is None:
            return
        client, goal_future, name = self._sound_future
        result = self.result
        try:
            if not _wait_future(goal_future, 3.0):
                result.sound_how = f"action {name}: the goal was not answered"
                return
            handle = goal_future.result()
            if not handle.accepted:
                result.sound_how = f"action {name}: the goal was rejected"
                return
            result_future = handle.get_result_async()
            if not _wait_future(result_future, 10.0):
                result.sound_how = f"action {name}: no result within 10 s"
                return
            ok, outcome = _action_outcome(result_future.result())
            result.sound_played = ok
            result.sound_how = f"{self.options.sound.name} via action {name}: {outcome}"
        finally:
            self.out(f"sound: {result.sound_how}")
            client.destroy()

    # --- motion

    def _pose(self) -> Pose:
        with self.node.lock:
            return self.node.odom

    def _drive_side(self, start_heading: float) -> None:
        o = self.options
        x0, y0, _ = self._pose()
        end = time.monotonic() + 3.0 * o.side_m / o.speed_mps + 5.0
        while True:
            x, y, yaw = self._pose()
            remaining = o.side_m - math.hypot(x - x0, y - y0)
            if remaining <= 0.0005:
                break
            if time.monotonic() > end:
                raise DemoAbort("the robot did not drive the side of the square in time: "
                                "was it picked up, or stopped at a cliff?")
            v = min(o.speed_mps, max(0.01, 2.5 * remaining))
            w = max(-0.6, min(0.6, 3.0 * _wrap(start_heading - yaw)))
            self.node.drive(v, w)
            self._sleep(0.05)
        self.node.drive(0.0, 0.0)

    def _turn_to(self, heading: float) -> None:
        o = self.options
        end = time.monotonic() + 8.0
        while True:
            _, _, yaw = self._pose()
            error = _wrap(heading - yaw)
            if abs(error) < math.radians(0.5):
                break
            if time.monotonic() > end:
                raise DemoAbort("the robot did not turn in time: was it picked up?")
            w = math.copysign(min(o.turn_radps, max(0.2, 3.0 * abs(error))), error)
            self.node.drive(0.0, w)
            self._sleep(0.05)
        self.node.drive(0.0, 0.0)

    def _square(self) -> None:
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
            self._drive_side(heading)
            self._sleep(0.2)
            self.activity = f"square: corner {side + 1} of 4"
            self.out(f"corner {side + 1} of 4: cmd_vel turn +90 deg at up to "
                     f"{o.turn_radps:.1f} rad/s")
            self._turn_to(heading + math.pi / 2)
            head, lift = moves[side]
            self.out(f"head/angle {math.degrees(head):+.0f} deg, lift/height "
                     f"{lift * 1000:.0f} mm")
            node.move_head(head)
            node.move_lift(lift)
            self._sleep(0.4)

    def _finish(self) -> None:
        node = self.node
        self.activity = "finishing"
        node.drive(0.0, 0.0)
        node.move_head(math.radians(-5.0))
        node.move_lift(0.032)
        self.out("stop: cmd_vel 0, head/angle -5 deg, lift/height 32 mm")
        self._sleep(1.0)
        self._sound_result()
        with node.lock:
            image = node.image
            node.record = False
            final = node.odom
        result = self.result
        result.odometry = list(node.odometry)
        result.final_odom = final
        if self.truth_source is not None:
            result.final_truth = self.truth_source.pose()
            result.sound_frames = self.truth_source.sound_frames() - result.sound_frames
        if image is not None:
            result.camera = image_to_array(image)
            result.camera_encoding = image.encoding
        self.activity = "done"

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
