"""``cozmo_driver_node``: one Cozmo as conventional ROS 2 interfaces.

The node owns the connection to one robot (:class:`cozmo_driver.client.Robot`)
and is glue only: the logic (kinematics, odometry re-anchoring, sensor
conversions, events, command checks, camera calibration, parameters,
diagnostics) lives in :mod:`cozmo_driver.driver`, which has no ROS in it.

Threads. The protocol runs on the robot client's I/O thread. Its listener
(:meth:`CozmoDriverNode._on_robot_event`) publishes each robot state (odometry,
tf, IMU, joint states, status, battery, flag events) right there, under a lock
it shares with the few executor callbacks that touch the same objects: rclpy
publishers may be used from any thread, and an executor wake-up per robot state
(33 a second) cost more CPU than the publishing itself (rclpy rebuilds its wait
set of every entity, a hundred with the action servers, on each wake-up). Camera images are joined,
rebuilt as JPEG and published on that thread too (decoded to camera/image_raw
only while someone subscribes). Everything else it keeps (robot messages, link
changes, NV storage replies) is stamped and handed to the executor through a
:class:`~cozmo_driver.ros.handover.HandOver` (a deque and a guard condition),
which runs :meth:`CozmoDriverNode._on_handed_over`. No thread polls. Commands go the other way with ``Robot.post`` (queued to
the I/O thread, never blocking the executor).

``cmd_vel``, the one command sent many times a second, is served on a thread of
its own, outside the executor (:mod:`cozmo_driver.ros.subscription_thread`),
which also runs its watchdog; where the rclpy in use cannot do that, the
executor serves it and a timer is the watchdog. ``_drive_lock`` orders what
that thread sends with what stops the treads on the executor (emergency stop,
deactivation, a motion goal taking them), and a cmd_vel that must end a
running motion goal is handed to the executor, which ends the goal and drives.

Lifecycle (rclpy.lifecycle, Humble and later): configure creates the robot
client and the ROS interfaces, activate connects (and reconnects by itself with
back-off until cleanup) and publishes, deactivate stops every motor and stops
publishing robot data (commands are refused), cleanup disconnects. With
``autostart`` (the default) the node configures and activates itself, so
``ros2 run cozmo_driver cozmo_driver_node`` just works. ``/diagnostics`` and
``link_status`` keep reporting while inactive.

Names are relative (under the node's namespace) except the standard absolute
``/tf`` and ``/diagnostics``. See README.md, section "Driver node", for every
topic, service and parameter.
"""

from __future__ import annotations

import gc
import logging
import math
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import rclpy
from builtin_interfaces.msg import Time as TimeMsg
from cozmo_interfaces.msg import (BackpackLights, HeadAngle, LiftHeight, LinkStatus, RobotEvent,
                                  RobotInfo, RobotStatus)
from cozmo_interfaces.srv import SetEmergencyStop
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import TransformStamped, Twist, TwistStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                SetParametersResult)
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from sensor_msgs.msg import BatteryState, CameraInfo, CompressedImage, Image, Imu, JointState
from std_msgs.msg import Bool, Float32, Float64
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker

from .. import robot_geometry as geo
from .media_interfaces import MediaInterfaces
from .motion_actions import MotionActions
from .object_interfaces import ObjectInterfaces
from ..client import ClientConfig, LinkState, LinkStateChanged, Robot, RobotReady
from ..driver import camera_info as caminfo
from ..driver.commands import (CommandError, check_frame, clamp, require_finite, rgb555,
                               volume_level)
from ..driver.diagnostics import link_report, robot_report
from ..driver.events import EventDetector, RobotEventData
from ..driver.kinematics import twist_to_wheels, wheels_to_twist
from ..driver.odometry import OdometryTracker, pose_covariance, twist_covariance
from ..driver.parameters import PARAMETERS, full_frame_id, validate_all, validate_change
from ..driver.sensors import (STATUS_FLAG_NAMES, StatusFlag, battery_percentage, imu_from_state,
                              joint_positions, power_supply_status)
from ..protocol import messages as msgs
from ..protocol.camera import (ImageAssembler, coded_size, decode_to_bytes, encode_jpeg,
                               image_to_jpeg, is_half_width_color)
from ..protocol.errors import CozmoError, RemoteProtocolError
from ..protocol.nvstorage import (CAMERA_CALIB_SIZE, NV_TAG_CAMERA_CALIB, NvReadAssembler,
                                  decode_camera_calibration)
from ..protocol.session import MessageReceived, SessionConfig
from ..lifeline import exit_with_parent
from . import qos
from .battery_marker import publish_battery_marker
from .handover import HandOver
from .serialized import Template
from .subscription_thread import SubscriptionThread, Unsupported
from ._entry import init, make_node, spin_node
from .qos import QOS_COMMAND, QOS_EVENTS, QOS_LATCHED, QOS_SENSOR, QOS_STATE, QOS_TF

__all__ = ["CozmoDriverNode", "main"]

_ImageSendMode = msgs.ENUMS["ImageSendMode"]
_ImageResolution = msgs.ENUMS["ImageResolution"]
_NvOperation = msgs.ENUMS["NvOperation"]
_LightState = msgs.STRUCTS["LightState"]

# What the I/O thread hands to the executor.
_MESSAGE, _LINK, _READY, _NV, _CMD_VEL = range(5)
_EVENT_MESSAGES = frozenset(("RobotPoked", "RobotDelocalized", "FallingStarted", "FallingStopped",
                             "ButtonPressed"))
_LINK_STATUS = {
    LinkState.DISCONNECTED: LinkStatus.DISCONNECTED,
    LinkState.CONNECTING: LinkStatus.CONNECTING,
    LinkState.INITIALIZING: LinkStatus.CONNECTING,
    LinkState.READY: LinkStatus.CONNECTED,
    LinkState.LOST: LinkStatus.LOST,
}
_DEFAULT_STATE = msgs.RobotState()
#: JPEG quality of colour frames, which are rebuilt at full width (the robot sends half)
_COLOR_JPEG_QUALITY = 90
_BATTERY_PERIOD_S = 1.0
_STAMP_FIELDS = ("header.stamp.sec", "header.stamp.nanosec")
#: the streams filled in only for subscribers
_STREAMS = ("odom", "tf", "imu", "joints", "status", "compressed", "image", "camera_info")
#: how often the I/O thread asks again what it would otherwise ask per message: the
#: subscriber counts (a new subscriber gets its first message at most this much later) and
#: whether ROS time is active
_RECHECK_NS = 200_000_000
#: the fields of the per-state templates that change (after the header stamp), in the
#: order each message serializes them
_ODOM_FIELDS = ("pose.pose.position.x", "pose.pose.position.y", "pose.pose.orientation.z",
                "pose.pose.orientation.w", "pose.covariance[0]", "pose.covariance[7]",
                "pose.covariance[35]", "twist.twist.linear.x", "twist.twist.angular.z",
                "twist.covariance[0]", "twist.covariance[7]", "twist.covariance[35]")
_TF_FIELDS = ("transforms[0].header.stamp.sec", "transforms[0].header.stamp.nanosec",
              "transforms[0].transform.translation.x", "transforms[0].transform.translation.y",
              "transforms[0].transform.rotation.z", "transforms[0].transform.rotation.w")
_IMU_FIELDS = tuple(f"{vector}.{axis}" for vector, axes in (
    ("orientation", "xyzw"), ("angular_velocity", "xyz"), ("linear_acceleration", "xyz"))
    for axis in axes)
_STATUS_FIELDS = tuple(name for name, _ in STATUS_FLAG_NAMES) + (
    "status_flags", "cliff_data_raw[0]", "cliff_data_raw[1]", "cliff_data_raw[2]",
    "cliff_data_raw[3]", "backpack_touch_sensor_raw", "curr_path_segment", "battery_voltage")
_GIL_SWITCH_INTERVAL_S = 0.0005
_WARN_PERIOD_S = 2.0


def _transition(method):
    """Log an exception of a lifecycle callback (rclpy would turn it into a bare ERROR)."""
    def wrapper(self, state):
        try:
            return method(self, state)
        except Exception as exc:  # noqa: BLE001 - reported, and the transition fails
            self.get_logger().error(f"{method.__name__} failed: {exc!r}")
            return TransitionCallbackReturn.ERROR
    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


def _descriptor(spec) -> ParameterDescriptor:
    unit = f" [{spec.unit}]" if spec.unit else ""
    change = "changeable at run time" if spec.dynamic else "takes effect at configure"
    desc = ParameterDescriptor(description=f"{spec.description}{unit} ({change})")
    if isinstance(spec.default, float):
        desc.floating_point_range = [FloatingPointRange(from_value=float(spec.minimum),
                                                        to_value=float(spec.maximum), step=0.0)]
    elif isinstance(spec.default, int) and not isinstance(spec.default, bool) \
            and spec.minimum is not None:
        desc.integer_range = [IntegerRange(from_value=int(spec.minimum),
                                           to_value=int(spec.maximum), step=1)]
    return desc


class CozmoDriverNode(LifecycleNode):
    """The driver of one Cozmo. See the module docstring."""

    def __init__(self, node_name: str = "cozmo_driver", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        for spec in PARAMETERS:
            if isinstance(spec.default, list):  # an empty list has no type: declare it typed
                self.declare_parameter(spec.name, Parameter.Type.STRING_ARRAY, _descriptor(spec))
                if self.get_parameter_or(spec.name).type_ == Parameter.Type.NOT_SET:
                    self.set_parameters([Parameter(spec.name, Parameter.Type.STRING_ARRAY,
                                                   list(spec.default))])
                continue
            self.declare_parameter(spec.name, spec.default, _descriptor(spec))
        self._params: Dict[str, Any] = {spec.name: self.get_parameter(spec.name).value
                                        for spec in PARAMETERS}
        problem = validate_all(self._params)
        if problem:
            raise ValueError(f"invalid parameters: {problem}")
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self._robot: Optional[Robot] = None
        self._configured = False
        self._active = False
        self._closed = False
        self._handover: Optional[HandOver] = None  # rarer robot events, to the executor
        # Robot states are published on the I/O thread (see the module docstring); this
        # lock guards what that shares with the executor: the odometry tracker, the
        # event detector, the pre-built messages, the publishers and the active flag.
        self._lock = threading.Lock()
        self._assembler = ImageAssembler()
        self._nv = NvReadAssembler()
        self._entities: List[Tuple[Callable[[Any], Any], Any]] = []
        self._pub: Dict[str, Any] = {}
        self._watchdog = None  # the cmd_vel watchdog's timer, when cmd_vel is on the executor
        self._cmd_vel_thread: Optional[SubscriptionThread] = None  # see _create_cmd_vel
        # cmd_vel may be served on a thread of its own: this lock orders what it sends with
        # what stops the treads (emergency stop, deactivation, a motion goal taking them)
        self._drive_lock = threading.Lock()
        self._drive_deadline: Optional[float] = None  # monotonic s: the watchdog's stop due
        self._cmd_vel_handed = 0  # cmd_vels the cmd_vel thread handed to the executor, not run
        self._diag_timer = None

        self._tracker = OdometryTracker()
        self._templates: Dict[str, Template] = {}  # per-state messages, see _build_messages
        self._battery_msg: Optional[BatteryState] = None  # the latest, for battery_marker
        self._wanted_now: Dict[str, bool] = {}  # see _wanted
        self._wanted_until = 0
        self._ros_time = False  # see _now_ns
        self._clock_checked_until = 0
        self._events = EventDetector()
        self._link_state = LinkState.DISCONNECTED
        self._ever_ready = False
        self._estop = False
        self._refused = 0
        self._refused_lock = threading.Lock()
        self._state_count = 0
        self._rate_mark: Tuple[float, int] = (time.monotonic(), 0)
        self._state_rate = 0.0
        self._yaw_diff = None  # mean |tread yaw rate - gyro z|, exponentially weighted
        self._battery_v: Optional[float] = None
        self._last_battery = 0.0
        self._warned: Dict[str, float] = {}
        self._calibration: Optional[caminfo.CameraInfoData] = None  # from the robot
        self._camera_file: Optional[caminfo.CameraInfoData] = None  # from camera_info_url
        self._info_cache: Dict[Tuple[int, int], Template] = {}  # camera_info by image size
        self._image_templates: Dict[str, Template] = {}  # by "compressed" or raw encoding
        self._robot_info: Optional[RobotInfo] = None
        # outputs re-applied on every new connection (a rebooted robot forgets them)
        self._head_light: Optional[bool] = None
        self._volume: Optional[int] = None
        self._lights: Optional[Tuple[Any, Any]] = None
        self._media: Optional[MediaInterfaces] = None  # display, audio, animations
        self._motion: Optional[MotionActions] = None  # motion actions (motion_actions.py)
        self._objects: Optional[ObjectInterfaces] = None  # cubes, charger, lights
        self._retiring_motion: Optional[MotionActions] = None  # released, servers not yet destroyed

    # ------------------------------------------------------------------ parameters

    @property
    def autostart(self) -> bool:
        return bool(self._params["autostart"])

    @property
    def connected(self) -> bool:
        """True while the robot is connected and streaming (as the executor has seen it)."""
        return self._link_state is LinkState.READY

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        changes = {p.name: p.value for p in parameters if p.name in self._params}
        if not changes:
            return SetParametersResult(successful=True)
        problem = validate_change(self._params, changes, self._configured)
        if problem:
            return SetParametersResult(successful=False, reason=problem)
        old = dict(self._params)
        self._params.update(changes)
        if self._configured:
            self._apply_dynamic(old)
        return SetParametersResult(successful=True)

    def _apply_dynamic(self, old: Dict[str, Any]) -> None:
        p = self._params
        if p["cmd_vel_timeout"] != old["cmd_vel_timeout"] and self._cmd_vel_thread is None:
            self._make_watchdog()
        if any(p[k] != old[k] for k in ("camera_enabled", "camera_color", "camera_auto_exposure",
                                        "camera_gain", "camera_exposure_ms")):
            self._send_camera_config()
        if p["stop_on_cliff"] != old["stop_on_cliff"]:
            self._post_if_ready(msgs.EnableStopOnCliff(enable=bool(p["stop_on_cliff"])))

    def _now_ns(self) -> int:
        """The node's clock, in nanoseconds: read from the system directly unless ROS time
        (use_sim_time) is active, which is what the clock itself would do, at a fraction of
        the cost (the I/O thread stamps every robot state and image). Whether ROS time is
        active is asked of the clock every 0.2 s."""
        now = time.time_ns()
        if now >= self._clock_checked_until:  # asking the clock costs more than reading it
            self._ros_time = self.get_clock().ros_time_is_active
            self._clock_checked_until = now + _RECHECK_NS
        if self._ros_time:
            return self.get_clock().now().nanoseconds
        return now

    def _frame(self, name: str) -> str:
        return full_frame_id(self._params["frame_prefix"], self._params[name])

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> bool:
        """Configure and activate (what ``autostart`` does); True on success."""
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            return False
        return self.trigger_activate() == TransitionCallbackReturn.SUCCESS

    @_transition
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        p = self._params
        config = ClientConfig(session=SessionConfig(peer_timeout=float(p["peer_timeout"])),
                              reconnect_min=float(p["reconnect_min"]),
                              reconnect_max=float(p["reconnect_max"]),
                              ready_timeout=float(p["ready_timeout"]))
        self._robot = Robot(p["robot_ip"], int(p["robot_port"]), local_host=p["local_ip"],
                            local_port=int(p["local_port"]), config=config,
                            name=self.get_fully_qualified_name())
        self._camera_file = None
        if p["camera_info_url"]:
            try:
                self._camera_file = caminfo.load_camera_info_url(p["camera_info_url"])
                self.get_logger().info(f"camera calibration from {p['camera_info_url']}")
            except caminfo.CameraInfoError as exc:
                self.get_logger().warning(f"{exc}; using the robot's calibration instead")
        self._info_cache.clear()  # the frame names may have changed since the last configure
        self._image_templates.clear()
        self._create_interfaces()
        self._media = MediaInterfaces(self, self._robot, self._params)
        self._motion = MotionActions(self, self._robot)
        self._objects = ObjectInterfaces(self, self._robot, self._params)
        self._robot.add_listener(self._on_robot_event)
        self._configured = True
        self.get_logger().info(f"configured for the robot at {p['robot_ip']}:{p['robot_port']}")
        return TransitionCallbackReturn.SUCCESS

    @_transition
    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        robot = self._robot
        if robot is None:
            return TransitionCallbackReturn.FAILURE
        if not robot.transport.running:
            try:
                robot.start()
            except CozmoError as exc:
                self.get_logger().error(f"cannot open the link to the robot: {exc}")
                return TransitionCallbackReturn.FAILURE
            self.get_logger().info(
                f"connecting to the robot at {self._params['robot_ip']}:{self._params['robot_port']}"
                f" from UDP {robot.transport.local_address[0]}:{robot.transport.local_address[1]}")
        self._active = True
        if self._media is not None:
            self._media.activate()
        if self._objects is not None:
            self._objects.activate()
        if robot.state is LinkState.READY:
            self._on_connection_ready(resend_only=True)
        self._publish_link_status()
        return super().on_activate(state)

    @_transition
    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._drive_lock, self._lock:  # no robot state is published, no cmd_vel sent
            self._active = False             # once this returns
        self._cancel_watchdog()
        if self._media is not None:
            self._media.deactivate()
        if self._objects is not None:
            self._objects.deactivate()
        if self._motion is not None:
            self._motion.abort_all("the driver was deactivated")
        self._post_if_ready(msgs.StopAllMotors())
        self.get_logger().info("deactivated: motors stopped, publishing paused, commands refused")
        return super().on_deactivate(state)

    @_transition
    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return TransitionCallbackReturn.SUCCESS

    @_transition
    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return TransitionCallbackReturn.SUCCESS

    @_transition
    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _release(self) -> None:
        """Stop the motors, disconnect, join the I/O thread, destroy the interfaces."""
        self._stop_cmd_vel_thread()
        with self._drive_lock:
            self._active = False
        if self._media is not None:
            self._media.destroy()
            self._media = None
        if self._motion is not None:
            self._motion.destroy()
            self._retiring_motion, self._motion = self._motion, None  # see destroy_node
        if self._objects is not None:
            self._objects.destroy()  # lights off and objects disconnected, before the link stops
            self._objects = None
        robot, self._robot = self._robot, None
        if robot is not None:
            try:
                robot.remove_listener(self._on_robot_event)
            except ValueError:
                pass
            try:
                robot.stop()
            except CozmoError as exc:
                self._log(logging.WARNING, f"stopping the link: {exc}")
            self._log(logging.INFO, "disconnected from the robot (motors stopped)")
        with self._lock:
            self._destroy_interfaces()
        self._configured = False
        self._link_state = LinkState.DISCONNECTED

    def _log(self, level: int, text: str) -> None:
        """Log through rclpy, or to stderr once the context is shut down (Ctrl-C)."""
        if self.context.ok():
            # one call per severity: rclpy raises when one source line logs at two
            if level >= logging.WARNING:
                self.get_logger().warning(text)
            else:
                self.get_logger().info(text)
        else:
            print(f"[{logging.getLevelName(level)}] [{self.get_name()}]: {text}", file=sys.stderr)

    def close(self) -> None:
        """Release everything (idempotent); called on shutdown before destroy_node."""
        if not self._closed:
            self._closed = True
            self._release()

    def destroy_node(self) -> None:
        self.close()
        if self._retiring_motion is not None:  # its servers may wait for a timer of this node
            self._retiring_motion.destroy_retired()
            self._retiring_motion = None
        super().destroy_node()
        # rclpy's LifecycleNode never destroys its state machine, whose native object holds
        # the rcl node (and so the context and its DDS participant, with the participant's
        # receive threads) until the Python node is collected: after gc.freeze() (main),
        # not before the process exits. Its services went with super().destroy_node().
        machine = getattr(self, "_state_machine", None)
        if machine is not None:
            try:
                machine.destroy_when_not_in_use()
            except Exception:  # noqa: BLE001 - an rclpy without it: collected with the node
                pass

    # ------------------------------------------------------------------ ROS interfaces

    def _publisher(self, key: str, msg_type, topic: str, profile: QoSProfile,
                   overridable: bool = True) -> None:
        pub = qos.create_publisher(self, msg_type, topic, profile, overridable)
        self._pub[key] = pub
        self._entities.append((self.destroy_publisher, pub))

    def _subscription(self, msg_type, topic: str, callback,
                      profile: QoSProfile = QOS_COMMAND) -> None:
        sub = qos.create_subscription(self, msg_type, topic, callback, profile)
        self._entities.append((self.destroy_subscription, sub))

    def _create_interfaces(self) -> None:
        self._wanted_until = 0  # new publishers: count their subscribers at the next message
        self._publisher("odom", Odometry, "odom", QOS_STATE)
        self._publisher("tf", TFMessage, "/tf", QOS_TF, overridable=False)
        self._publisher("imu", Imu, "imu/data", QOS_SENSOR)
        self._publisher("joints", JointState, "joint_states", QOS_STATE)
        self._publisher("battery", BatteryState, "battery_state", QOS_STATE)
        self._publisher("battery_marker", Marker, "battery_marker", QOS_STATE)
        self._publisher("status", RobotStatus, "status", QOS_STATE)
        self._publisher("events", RobotEvent, "events", QOS_EVENTS)
        self._publisher("info", RobotInfo, "robot_info", QOS_LATCHED)
        self._publisher("link", LinkStatus, "link_status", QOS_LATCHED)
        self._publisher("diagnostics", DiagnosticArray, "/diagnostics", QOS_STATE, overridable=False)
        self._publisher("compressed", CompressedImage, "camera/image_raw/compressed", QOS_SENSOR)
        self._publisher("image", Image, "camera/image_raw", QOS_SENSOR)
        self._publisher("camera_info", CameraInfo, "camera/camera_info", QOS_SENSOR)
        self._subscription(HeadAngle, "head/angle", self._on_head_angle)
        self._subscription(LiftHeight, "lift/height", self._on_lift_height)
        self._subscription(Float64, "head/velocity", self._on_head_velocity)
        self._subscription(Float64, "lift/velocity", self._on_lift_velocity)
        self._subscription(BackpackLights, "backpack_lights", self._on_backpack_lights)
        self._subscription(Bool, "head_light", self._on_head_light)
        self._subscription(Float32, "volume", self._on_volume)
        for srv_type, name, callback in ((SetEmergencyStop, "emergency_stop", self._on_emergency_stop),
                                         (Trigger, "reset_odometry", self._on_reset_odometry)):
            srv = self.create_service(srv_type, name, callback)
            self._entities.append((self.destroy_service, srv))
        self._build_messages()
        self._handover = HandOver(self, self._on_handed_over)
        self._entities.append((HandOver.destroy, self._handover))
        self._diag_timer = self.create_timer(1.0, self._on_diagnostics_timer)
        self._entities.append((self.destroy_timer, self._diag_timer))
        self._cmd_vel_handed = 0  # (a new HandOver: nothing waits in it)
        self._create_cmd_vel(own_thread=True)

    def _create_cmd_vel(self, own_thread: bool) -> None:
        """Subscribe to cmd_vel: on a thread of its own (subscription_thread.py; the watchdog
        runs there too), or where this rclpy cannot, on the executor (the watchdog a timer)."""
        if self._params["cmd_vel_stamped"]:
            msg_type, callback = TwistStamped, self._on_cmd_vel_stamped
        else:
            msg_type, callback = Twist, self._on_cmd_vel
        if own_thread:
            try:
                self._cmd_vel_thread = SubscriptionThread(
                    self, lambda group: qos.create_subscription(
                        self, msg_type, "cmd_vel", callback, QOS_COMMAND, group),
                    callback, self._stop_if_stale, self._on_cmd_vel_thread_failure,
                    "cozmo-cmd_vel")
                return
            except Unsupported as exc:
                self.get_logger().info(f"cmd_vel served by the executor: {exc}")
        self._subscription(msg_type, "cmd_vel", callback)
        self._make_watchdog()

    def _stop_cmd_vel_thread(self) -> None:
        thread, self._cmd_vel_thread = self._cmd_vel_thread, None
        if thread is not None:
            thread.stop()

    def _on_cmd_vel_thread_failure(self, exc: BaseException) -> None:
        """The cmd_vel thread: its wait failed. Stop the treads; the executor takes over."""
        self.get_logger().error(f"cmd_vel thread failed ({exc!r}): treads stopped, cmd_vel "
                                "moves to the executor")
        with self._drive_lock:
            self._drive_deadline = None
            self._post_if_ready(msgs.DriveWheels(lwheel_speed_mmps=0.0, rwheel_speed_mmps=0.0))
        handover = self._handover
        if handover is not None:
            handover.put((_CMD_VEL, None, None))

    def _build_messages(self) -> None:
        """The messages published per robot state, as templates (ros/serialized.py) with
        their constant fields set: only what changes is written per state."""
        odom = Odometry()
        odom.header.frame_id = self._frame("odom_frame")
        odom.child_frame_id = self._frame("base_frame")
        odom.pose.covariance = pose_covariance(0.0, 0.0)
        odom.twist.covariance = twist_covariance(0.0, geo.TRACK_WIDTH_M, False)
        tf = TransformStamped()
        tf.header.frame_id = odom.header.frame_id
        tf.child_frame_id = odom.child_frame_id
        imu = Imu()
        imu.header.frame_id = self._frame("imu_frame")
        reading = imu_from_state(_DEFAULT_STATE, 0.0)
        imu.orientation_covariance = reading.orientation_covariance
        imu.angular_velocity_covariance = reading.angular_velocity_covariance
        imu.linear_acceleration_covariance = reading.linear_acceleration_covariance
        joints = JointState()
        joints.name = ["head_joint", "lift_joint"]
        joints.position = [0.0, 0.0]
        status = RobotStatus()
        status.header.frame_id = self._frame("base_link_frame")
        stamp = _STAMP_FIELDS
        self._templates = {
            "odom": self._template(odom, stamp + _ODOM_FIELDS),
            "tf": self._template(TFMessage(transforms=[tf]), _TF_FIELDS),
            "imu": self._template(imu, stamp + _IMU_FIELDS),
            "joints": self._template(joints, stamp + ("position[0]", "position[1]")),
            "status": self._template(status, stamp + _STATUS_FIELDS),
        }

    def _template(self, msg: Any, fields: Tuple[str, ...],
                  tail: Optional[str] = None) -> Template:
        """A Template (ros/serialized.py); a warning if it falls back to message objects."""
        template = Template(msg, fields, tail)
        if template.failure is not None:
            self.get_logger().warning(
                f"publishing {template.failure}; falling back to message objects")
        return template

    def _make_watchdog(self) -> None:
        if self._watchdog is not None:
            self.destroy_timer(self._watchdog)
            self._watchdog = None
        timeout = float(self._params["cmd_vel_timeout"])
        if timeout > 0:
            self._watchdog = self.create_timer(timeout, self._on_watchdog)
            self._watchdog.cancel()

    def _destroy_interfaces(self) -> None:
        self._stop_cmd_vel_thread()
        if self._watchdog is not None:
            self.destroy_timer(self._watchdog)
            self._watchdog = None
        for destroy, entity in reversed(self._entities):
            destroy(entity)
        self._entities.clear()
        self._pub.clear()
        self._handover = None
        self._diag_timer = None

    # ------------------------------------------------------------------ I/O thread

    def _on_robot_event(self, event: Any) -> None:
        """Runs on the robot client's I/O thread: keep what is published, hand it over."""
        if isinstance(event, MessageReceived):
            message = event.message
            name = message.NAME
            if name == "RobotState":
                with self._lock:
                    if self._pub:
                        self._on_state(self._now_ns(), message)
                return
            elif name == "ImageChunk":
                try:
                    image = self._assembler.push_chunk(message)
                except RemoteProtocolError:
                    return  # counted by the assembler, shown in /diagnostics
                if image is not None:
                    with self._lock:
                        if self._pub:
                            self._on_image(self._now_ns(), image)
                return
            elif name in _EVENT_MESSAGES:
                item = (_MESSAGE, self._now_ns(), message)
            elif name == "NvStorageOpResult":
                item = (_NV, None, message)
            else:
                return
        elif isinstance(event, LinkStateChanged):
            if event.state is not LinkState.READY:
                self._assembler.reset()
            item = (_LINK, None, event)
        elif isinstance(event, RobotReady):
            # before this connection's first robot state, which this thread publishes next
            with self._lock:
                self._tracker.new_connection()
            item = (_READY, None, event.info)
        else:
            return
        handover = self._handover
        if handover is not None:
            handover.put(item)

    # ------------------------------------------------------------------ executor side

    def _on_handed_over(self, item: Tuple[int, Any, Any]) -> None:
        """What the I/O thread handed over, on the executor: publish or act on it."""
        kind, stamp_ns, payload = item
        if self._robot is None:
            return
        if kind == _MESSAGE:
            with self._lock:
                self._publish_events(stamp_ns, self._events.on_message(payload))
        elif kind == _LINK:
            self._on_link_state(payload)
        elif kind == _READY:
            self._on_robot_ready(payload)
        elif kind == _NV:
            self._on_nv_result(payload)
        elif kind == _CMD_VEL:
            if payload is None:  # the cmd_vel thread failed (_on_cmd_vel_thread_failure)
                if self._cmd_vel_thread is not None:
                    self._stop_cmd_vel_thread()
                    self._create_cmd_vel(own_thread=False)
            else:  # a cmd_vel that preempts a motion goal (_drive)
                self._drive(*payload, on_executor=True, handed=True)

    def _on_link_state(self, event: LinkStateChanged) -> None:
        previous, self._link_state = self._link_state, event.state
        log = self.get_logger()
        p = self._params
        where = f"{p['robot_ip']}:{p['robot_port']}"
        if event.state is LinkState.LOST:
            if previous is LinkState.READY:
                self._cancel_watchdog()
                log.warning(f"lost the robot at {where} ({event.reason}). Odometry, camera and "
                            "status pause until it is back. Is the robot switched on, and this "
                            "computer on its Wi-Fi?")
            elif self._due("connect", 10.0):
                log.info(f"the robot at {where} does not answer: {event.reason}")
        elif event.state is LinkState.DISCONNECTED:
            log.info(f"disconnected from the robot at {where}: {event.reason}")
        else:
            log.debug(f"link {event.state.value}: {event.reason}")
        self._publish_link_status()

    def _on_robot_ready(self, info) -> None:
        msg = RobotInfo()
        msg.firmware_version = str(info.firmware_version) if info.firmware_version is not None else ""
        msg.firmware_build_type = info.firmware_build or ""
        msg.firmware_signature_json = info.firmware_signature or ""
        msg.head_serial = int(info.head_serial or 0)
        msg.body_serial = int(info.body_serial or 0)
        msg.body_hw_version = int(info.body_hw_version or 0)
        msg.body_color = info.body_color or "UNKNOWN"
        self._robot_info = msg
        self._pub["info"].publish(msg)
        again = " again" if self._ever_ready else ""
        self._ever_ready = True
        self.get_logger().info(
            f"connected{again} to Cozmo at {self._params['robot_ip']}:{self._params['robot_port']}: "
            f"firmware {msg.firmware_version} ({msg.firmware_build_type}), head serial "
            f"{msg.head_serial:08x}, body serial {msg.body_serial:08x}, hardware "
            f"v{msg.body_hw_version}, {msg.body_color}")
        self._on_connection_ready(resend_only=False)

    def _on_connection_ready(self, resend_only: bool) -> None:
        """Bring a (re)connected robot to the state the node wants."""
        robot = self._robot
        if robot is None:
            return
        if self._estop or not self._active:
            robot.post(msgs.StopAllMotors())
        self._send_camera_config()
        robot.post(msgs.EnableStopOnCliff(enable=bool(self._params["stop_on_cliff"])))
        if self._head_light is not None:
            robot.post(msgs.SetHeadLight(enable=self._head_light))
        if self._volume is not None:
            robot.post(msgs.SetRobotVolume(level=self._volume))
        if self._lights is not None:
            robot.post(self._lights[0])
            robot.post(self._lights[1])
        if not resend_only:
            self._nv.reset()
            robot.post(msgs.NvStorageOp(tag=NV_TAG_CAMERA_CALIB, length=CAMERA_CALIB_SIZE,
                                        op=_NvOperation.NVOP_READ, unknown=0, data=b""))

    def _on_nv_result(self, message) -> None:
        try:
            result = self._nv.push(message)
        except RemoteProtocolError as exc:
            self.get_logger().warning(f"NV storage read: {exc}")
            return
        if result is None or result.tag != NV_TAG_CAMERA_CALIB:
            return
        if not result.ok:
            self.get_logger().warning(
                f"the robot has no camera calibration (NV result {result.result}): "
                "camera_info uses the default intrinsics")
            return
        try:
            info = caminfo.from_calibration(decode_camera_calibration(result.data))
        except (RemoteProtocolError, caminfo.CameraInfoError) as exc:
            self.get_logger().warning(f"camera calibration from the robot unusable ({exc}): "
                                      "camera_info uses the default intrinsics")
            return
        with self._lock:
            self._calibration = info
            self._info_cache.clear()
        self.get_logger().info(
            f"camera calibration read from the robot: fx {info.k[0]:.1f} fy {info.k[4]:.1f} "
            f"cx {info.k[2]:.1f} cy {info.k[5]:.1f} px at {info.width}x{info.height}")

    # --- robot state

    def _on_state(self, stamp_ns: int, state) -> None:
        self._state_count += 1
        t = stamp_ns * 1e-9
        pose, reason = self._tracker.update(
            (int(state.pose_frame_id), int(state.pose_origin_id)),
            state.pose_x_mm / 1000.0, state.pose_y_mm / 1000.0, state.pose_angle_rad, t)
        if reason is not None:
            self.get_logger().info(
                f"odometry re-anchored ({reason}): odom continues from x {pose.x:.3f} m, "
                f"y {pose.y:.3f} m, yaw {pose.yaw:.3f} rad")
        flags = int(state.status)
        events = self._events.on_status(flags)
        v, w = wheels_to_twist(state.lwheel_speed_mmps / 1000.0, state.rwheel_speed_mmps / 1000.0)
        diff = w - float(state.gyro_z_radps)
        unreliable = bool(flags & (StatusFlag.IS_PICKED_UP | StatusFlag.IS_FALLING))
        if not unreliable and math.isfinite(diff):
            self._yaw_diff = abs(diff) if self._yaw_diff is None else \
                0.95 * self._yaw_diff + 0.05 * abs(diff)
        self._battery_v = float(state.battery_voltage_v)
        if not self._active:
            return
        sec, nsec = divmod(stamp_ns, 1_000_000_000)
        tpl = self._templates
        pub = self._pub
        qz, qw = math.sin(pose.yaw / 2.0), math.cos(pose.yaw / 2.0)
        # a stream nobody subscribes to is neither filled in nor published, and the rest are
        # written into ready-serialized templates: that is most of the cost of a robot state
        # (see "Driver node, Measured" in the README)

        wanted = self._wanted(stamp_ns)
        if wanted["odom"]:
            pc = pose_covariance(self._tracker.distance_m, self._tracker.rotation_rad)
            tc = twist_covariance(diff if math.isfinite(diff) else 0.0, geo.TRACK_WIDTH_M,
                                  unreliable)
            pub["odom"].publish(tpl["odom"].pack(
                sec, nsec, pose.x, pose.y, qz, qw, pc[0], pc[7], pc[35], v, w,
                tc[0], tc[7], tc[35]))

        if self._params["publish_tf"] and wanted["tf"]:
            pub["tf"].publish(tpl["tf"].pack(sec, nsec, pose.x, pose.y, qz, qw))

        if wanted["imu"]:
            reading = imu_from_state(state, pose.yaw)
            pub["imu"].publish(tpl["imu"].pack(sec, nsec, *reading.orientation,
                                               *reading.angular_velocity,
                                               *reading.linear_acceleration))

        if wanted["joints"]:
            pub["joints"].publish(tpl["joints"].pack(sec, nsec, *joint_positions(state)))

        if wanted["status"]:
            segment = int(state.curr_path_segment)
            cliff = state.cliff_data_raw
            pub["status"].publish(tpl["status"].pack(
                sec, nsec, *[bool(flags & bit) for _, bit in STATUS_FLAG_NAMES], flags,
                int(cliff[0]), int(cliff[1]), int(cliff[2]), int(cliff[3]),
                int(state.backpack_touch_sensor_raw), -1 if segment == 0xFF else segment,
                float(state.battery_voltage_v)))

        if t - self._last_battery >= _BATTERY_PERIOD_S:
            self._last_battery = t
            self._publish_battery(_time_msg(stamp_ns), flags, float(state.battery_voltage_v))
        if events:
            self._publish_events(stamp_ns, events)

    def _wanted(self, stamp_ns: int) -> Dict[str, bool]:
        """Which per-state and camera streams have subscribers (I/O thread, lock held): asked
        of the middleware every _RECHECK_NS (and after a clock jump back), not per message."""
        until = self._wanted_until
        if stamp_ns >= until or stamp_ns < until - _RECHECK_NS:
            pub = self._pub
            self._wanted_now = {key: pub[key].get_subscription_count() > 0
                                for key in _STREAMS if key in pub}
            self._wanted_until = stamp_ns + _RECHECK_NS
        return self._wanted_now

    def _publish_battery(self, header_stamp: TimeMsg, flags: int, voltage: float) -> None:
        nan = math.nan
        msg = BatteryState()
        msg.header.stamp = header_stamp
        msg.header.frame_id = self._frame("base_link_frame")
        msg.voltage = voltage
        msg.temperature = nan
        msg.current = nan
        msg.charge = nan
        msg.capacity = nan
        msg.design_capacity = nan
        msg.percentage = battery_percentage(voltage)
        msg.power_supply_status = getattr(BatteryState,
                                          "POWER_SUPPLY_STATUS_" + power_supply_status(flags))
        msg.power_supply_health = BatteryState.POWER_SUPPLY_HEALTH_UNKNOWN
        msg.power_supply_technology = BatteryState.POWER_SUPPLY_TECHNOLOGY_LIPO
        msg.present = True
        msg.cell_voltage = [voltage] * geo.BATTERY_CELLS
        msg.cell_temperature = [nan] * geo.BATTERY_CELLS
        msg.location = "body"
        self._pub["battery"].publish(msg)
        self._battery_msg = msg

    def _publish_events(self, stamp_ns: int, events: List[RobotEventData]) -> None:
        if not self._active or not events:
            return
        header_stamp = _time_msg(stamp_ns)
        frame = self._frame("base_link_frame")
        for event in events:
            msg = RobotEvent()
            msg.header.stamp = header_stamp
            msg.header.frame_id = frame
            msg.type = event.type
            msg.description = event.description
            msg.value = float(event.value)
            self._pub["events"].publish(msg)
            self.get_logger().info(f"robot event: {event.description}")

    # --- camera

    def _camera_info_for(self, width: int, height: int) -> Template:
        cached = self._info_cache.get((width, height))
        if cached is not None:
            return cached
        data = self._camera_file or self._calibration or caminfo.default_camera_info(width, height)
        data = caminfo.scaled(data, width, height)
        msg = CameraInfo()
        msg.header.frame_id = self._frame("camera_frame")
        msg.width, msg.height = data.width, data.height
        msg.distortion_model = data.distortion_model
        msg.d = list(data.d)
        msg.k = list(data.k)
        msg.r = list(data.r)
        msg.p = list(data.p)
        template = self._template(msg, _STAMP_FIELDS)
        self._info_cache[(width, height)] = template
        return template

    def _image_template(self, key: str) -> Template:
        """The template of ``compressed`` images or of raw ones in encoding ``key``."""
        template = self._image_templates.get(key)
        if template is None:
            if key == "compressed":
                msg, fields = CompressedImage(), _STAMP_FIELDS
                msg.format = "jpeg"
            else:
                msg, fields = Image(), _STAMP_FIELDS + ("height", "width", "step")
                msg.encoding = key
            msg.header.frame_id = self._frame("camera_frame")
            template = self._image_templates[key] = self._template(msg, fields, tail="data")
        return template

    def _on_image(self, stamp_ns: int, image) -> None:
        if not self._active or not self._params["camera_enabled"]:
            return
        pub = self._pub
        # nothing is converted or published for a topic nobody subscribes to
        wanted = self._wanted(stamp_ns)
        want_compressed, want_raw, want_info = (wanted["compressed"], wanted["image"],
                                                wanted["camera_info"])
        if not (want_compressed or want_raw or want_info):
            return
        sec, nsec = divmod(stamp_ns, 1_000_000_000)
        if want_compressed or want_raw:
            self._publish_image(sec, nsec, image, want_compressed, want_raw)
        if want_info:
            pub["camera_info"].publish(
                self._camera_info_for(image.width, image.height).pack(sec, nsec))

    def _publish_image(self, sec: int, nsec: int, image, want_compressed: bool,
                       want_raw: bool) -> None:
        pixels = None  # (bytes, width, height, channels)
        try:
            jpeg = image_to_jpeg(image)
            if is_half_width_color(image):
                # the robot codes colour at half width: publish the nominal size, which
                # camera_info describes and image_transport consumers expect
                pixels = decode_to_bytes(jpeg, True, coded_size(image))
                if want_compressed:
                    data, width, height, _ = pixels
                    jpeg = encode_jpeg(np.frombuffer(data, np.uint8).reshape(height, width, 3),
                                       _COLOR_JPEG_QUALITY)
        except RemoteProtocolError as exc:
            self._warn_throttled("image", f"camera image {image.image_id} dropped: {exc}")
            return
        if want_compressed:
            self._pub["compressed"].publish(
                self._image_template("compressed").pack(jpeg, sec, nsec))
        if want_raw:
            if pixels is None:
                try:
                    pixels = decode_to_bytes(jpeg, False, coded_size(image))
                except RemoteProtocolError as exc:
                    self._warn_throttled("decode", f"camera image {image.image_id} does not decode: {exc}")
            if pixels is not None:
                data, width, height, channels = pixels
                template = self._image_template("mono8" if channels == 1 else "rgb8")
                self._pub["image"].publish(template.pack(data, sec, nsec, height, width,
                                                         width * channels))

    def _send_camera_config(self) -> None:
        p = self._params
        self._post_if_ready(msgs.EnableColorImages(enable=bool(p["camera_color"])))
        mode = _ImageSendMode.Stream if p["camera_enabled"] else _ImageSendMode.Off
        self._post_if_ready(msgs.EnableCamera(image_send_mode=mode,
                                              image_resolution=_ImageResolution.QVGA))
        self._post_if_ready(msgs.SetCameraParams(gain=float(p["camera_gain"]),
                                                 exposure_ms=int(p["camera_exposure_ms"]),
                                                 auto_exposure_enabled=bool(p["camera_auto_exposure"])))

    # --- status reports

    def _link_status_msg(self) -> LinkStatus:
        msg = LinkStatus()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.state = _LINK_STATUS[self._link_state]
        robot = self._robot
        if robot is not None:
            s = robot.stats
            msg.rtt_s = float(s.rtt_s) if s.rtt_s is not None else math.nan
            msg.datagrams_sent = int(s.datagrams_sent)
            msg.datagrams_received = int(s.datagrams_received)
            msg.retransmissions = int(s.retransmissions)
            msg.malformed_dropped = int(s.malformed_datagrams + s.malformed_packets)
            msg.wrong_source_dropped = int(robot.transport.stats.wrong_source)
        else:
            msg.rtt_s = math.nan
        return msg

    def _publish_link_status(self) -> None:
        pub = self._pub.get("link")
        if pub is not None:
            pub.publish(self._link_status_msg())

    def _on_diagnostics_timer(self) -> None:
        now = time.monotonic()
        mark_t, mark_n = self._rate_mark
        if now > mark_t:
            self._state_rate = (self._state_count - mark_n) / (now - mark_t)
        self._rate_mark = (now, self._state_count)
        self._publish_link_status()
        robot = self._robot
        if robot is None or "diagnostics" not in self._pub:
            return
        p = self._params
        where = f"{p['robot_ip']}:{p['robot_port']}"
        info = self._robot_info
        hardware_id = f"cozmo-{info.head_serial:08x}" if info is not None else f"cozmo@{where}"
        connected = self._link_state is LinkState.READY
        publish_battery_marker(self._pub["battery_marker"], self._battery_msg
                               if connected and self._active else None, self._frame("base_link_frame"))
        reports = [
            ("link", link_report(self._link_state.value, self._active, where, robot.stats,
                                 robot.transport.stats, self._state_rate, self._assembler.stats)),
            ("robot", robot_report(connected, self._battery_v if connected else None,
                                   battery_percentage(self._battery_v)
                                   if connected and self._battery_v is not None else None,
                                   self._estop, self._yaw_diff, self._tracker.reanchors,
                                   self._refused)),
        ]
        if self._media is not None:
            reports.append(("display and audio", self._media.report()))
        if self._objects is not None:
            reports.append(("objects", self._objects.report()))
        array = DiagnosticArray()
        array.header.stamp = self.get_clock().now().to_msg()
        name = self.get_fully_qualified_name().lstrip("/")
        for suffix, report in reports:
            status = DiagnosticStatus()
            status.level = bytes([report.level])
            status.name = f"{name}: {suffix}"
            status.message = report.message
            status.hardware_id = hardware_id
            status.values = [KeyValue(key=k, value=v) for k, v in report.values]
            array.status.append(status)
        self._pub["diagnostics"].publish(array)

    # ------------------------------------------------------------------ commands

    def _due(self, key: str, period: float) -> bool:
        """Is a message of kind ``key`` due (none for ``period`` s)? Marks it sent if so.

        The throttle is kept here, per key, and the caller logs at its own call site:
        rclpy keeps a severity (and throttle state) per call site, and raises when one
        site logs at two severities."""
        now = time.monotonic()
        if now - self._warned.get(key, -1e9) >= period:
            self._warned[key] = now
            return True
        return False

    def _warn_throttled(self, key: str, text: str, period: float = _WARN_PERIOD_S) -> None:
        if self._due(key, period):
            self.get_logger().warning(text)

    def _refuse(self, key: str, text: str) -> None:
        with self._refused_lock:  # the executor and the cmd_vel thread both refuse
            self._refused += 1
        self._warn_throttled(key, text)

    def _ready(self, topic: str, motion: bool) -> bool:
        """May a command from ``topic`` go to the robot now? Warns (throttled) when not."""
        if not self._active:
            self._refuse("inactive", f"{topic} refused: the driver is not active")
            return False
        if motion and self._estop:
            self._refuse("estop", f"{topic} refused: emergency stop engaged "
                         "(release it with the emergency_stop service)")
            return False
        if self._robot is None or self._link_state is not LinkState.READY:
            self._refuse("offline", f"{topic} refused: not connected to the robot")
            return False
        return True

    def _preempt_motion(self, motor: str, topic: str) -> None:
        """A command on ``topic`` takes ``motor`` over: its running motion action is aborted."""
        if self._motion is not None:
            self._motion.preempt(motor, f"preempted by a {topic} command")

    def _post_if_ready(self, message) -> None:
        robot = self._robot
        if robot is not None and self._link_state is LinkState.READY:
            robot.post(message)

    def _on_cmd_vel(self, msg: Twist) -> None:
        self._drive(msg, "cmd_vel", self._cmd_vel_thread is None)

    def _on_cmd_vel_stamped(self, msg: TwistStamped) -> None:
        allowed = (self._frame("base_link_frame"), self._frame("base_frame"))
        try:
            check_frame(msg.header.frame_id, allowed, "cmd_vel.header.frame_id")
        except CommandError as exc:
            self._refuse("cmd_vel_frame", f"cmd_vel refused: {exc}")
            return
        self._drive(msg.twist, "cmd_vel.twist", self._cmd_vel_thread is None)

    def _drive(self, twist: Twist, field: str, on_executor: bool, handed: bool = False) -> None:
        """A cmd_vel, on the cmd_vel thread or the executor (see _create_cmd_vel); ``handed``:
        one the cmd_vel thread handed to the executor."""
        lin, ang = twist.linear, twist.angular
        try:
            require_finite(field, **{"linear.x": lin.x, "linear.y": lin.y, "linear.z": lin.z,
                                     "angular.x": ang.x, "angular.y": ang.y, "angular.z": ang.z})
        except CommandError as exc:
            self._refuse("cmd_vel_value", f"cmd_vel refused: {exc}")
            return
        cmd = twist_to_wheels(lin.x, ang.z, float(self._params["max_wheel_speed"]))
        accel = float(self._params["wheel_acceleration"]) * 1000.0
        timeout = float(self._params["cmd_vel_timeout"])
        with self._drive_lock:
            if handed:
                self._cmd_vel_handed -= 1
            if not self._ready("cmd_vel", motion=True):
                return
            motion = self._motion
            goal = motion is not None and motion.has_goal("wheels")
            if not on_executor and (goal or self._cmd_vel_handed > 0):
                # ending the goal is the executor's work: it drives then (and a later cmd_vel
                # waits its turn behind the ones handed over)
                self._cmd_vel_handed += 1
                self._handover.put((_CMD_VEL, None, (twist, field)))
                return
            if goal:
                self._preempt_motion("wheels", "cmd_vel")
            self._robot.post(msgs.DriveWheels(lwheel_speed_mmps=cmd.left_mps * 1000.0,
                                              rwheel_speed_mmps=cmd.right_mps * 1000.0,
                                              lwheel_accel_mmps2=accel, rwheel_accel_mmps2=accel))
            moving = cmd.left_mps != 0.0 or cmd.right_mps != 0.0
            self._drive_deadline = time.monotonic() + timeout if moving and timeout > 0 else None
        if self._watchdog is not None:
            self._watchdog.reset()
        elif on_executor and self._cmd_vel_thread is not None:
            self._cmd_vel_thread.wake()  # its watchdog has a new deadline to wait for

    def _stop_if_stale(self) -> Optional[float]:
        """The cmd_vel watchdog (the cmd_vel thread, after every wake-up, or the watchdog
        timer): stops the treads once no cmd_vel came for cmd_vel_timeout after a moving one.
        Returns the seconds until that stop is due, or None when none is pending."""
        with self._drive_lock:
            deadline = self._drive_deadline
            if deadline is None:
                return None
            left = deadline - time.monotonic()
            if left > 0:
                return left
            self._drive_deadline = None
            self._post_if_ready(msgs.DriveWheels(lwheel_speed_mmps=0.0, rwheel_speed_mmps=0.0))
        self.get_logger().info(f"no cmd_vel for {self._params['cmd_vel_timeout']} s: "
                               "treads stopped")
        return None

    def _on_watchdog(self) -> None:
        if self._stop_if_stale() is None and self._watchdog is not None:
            self._watchdog.cancel()  # (else the stop is not due yet: the timer fires again)

    def _cancel_watchdog(self) -> None:
        """No watchdog stop is pending any more (the treads were stopped, or taken over)."""
        with self._drive_lock:
            self._drive_deadline = None
        if self._watchdog is not None:
            self._watchdog.cancel()

    def _speed(self, requested: float, limit_param: str, field: str) -> Optional[float]:
        limit = float(self._params[limit_param])
        if requested < 0:
            self._refuse(field, f"{field} = {requested}: a speed must not be negative")
            return None
        if requested == 0:
            return limit
        speed, warning = clamp(requested, 0.0, limit, field, "rad/s")
        if warning:
            self._warn_throttled(field, warning)
        return speed

    def _position(self, topic: str, field: str, value: float, max_speed: float,
                  limits: Tuple[float, float], unit: str, motor: str, command) -> None:
        """A head angle or lift height: checked, clamped, then ``command(target, speed,
        acceleration)`` posted (the motor's ``<motor>_max_speed``/``_acceleration`` params)."""
        try:
            require_finite(topic, **{field: value, "max_speed": max_speed})
        except CommandError as exc:
            self._refuse(topic, f"{topic} refused: {exc}")
            return
        if not self._ready(topic, motion=True):
            return
        self._preempt_motion(motor, topic)
        target, warning = clamp(value, limits[0], limits[1], f"{topic}.{field}", unit)
        if warning:
            self._warn_throttled(f"{topic}.{field}", warning)
        speed = self._speed(max_speed, f"{motor}_max_speed", f"{topic}.max_speed")
        if speed is None:
            return
        self._robot.post(command(target, speed, float(self._params[f"{motor}_acceleration"])))

    def _on_head_angle(self, msg: HeadAngle) -> None:
        self._position("head/angle", "angle", msg.angle, msg.max_speed,
                       (geo.HEAD_MIN_ANGLE_RAD, geo.HEAD_MAX_ANGLE_RAD), "rad", "head",
                       lambda angle, speed, accel: msgs.SetHeadAngle(
                           angle_rad=angle, max_speed_rad_per_sec=speed,
                           accel_rad_per_sec2=accel, duration_sec=0.0))

    def _on_lift_height(self, msg: LiftHeight) -> None:
        self._position("lift/height", "height", msg.height, msg.max_speed,
                       (geo.LIFT_MIN_HEIGHT_M, geo.LIFT_MAX_HEIGHT_M), "m", "lift",
                       lambda height, speed, accel: msgs.SetLiftHeight(
                           height_mm=height * 1000.0, max_speed_rad_per_sec=speed,
                           accel_rad_per_sec2=accel, duration_sec=0.0))

    def _velocity(self, msg: Float64, topic: str, limit_param: str, message_type) -> None:
        try:
            require_finite(topic, data=msg.data)
        except CommandError as exc:
            self._refuse(topic, f"{topic} refused: {exc}")
            return
        if not self._ready(topic, motion=True):
            return
        self._preempt_motion(topic.split("/")[0], topic)
        limit = float(self._params[limit_param])
        speed, warning = clamp(msg.data, -limit, limit, f"{topic}.data", "rad/s")
        if warning:
            self._warn_throttled(f"{topic}.data", warning)
        self._robot.post(message_type(speed_rad_per_sec=speed))

    def _on_head_velocity(self, msg: Float64) -> None:
        self._velocity(msg, "head/velocity", "head_max_speed", msgs.MoveHead)

    def _on_lift_velocity(self, msg: Float64) -> None:
        self._velocity(msg, "lift/velocity", "lift_max_speed", msgs.MoveLift)

    def _on_backpack_lights(self, msg: BackpackLights) -> None:
        try:
            words = {}
            for name in ("front", "middle", "back", "left", "right"):
                c = getattr(msg, name)
                words[name] = rgb555(c.r, c.g, c.b, f"backpack_lights.{name}")
        except CommandError as exc:
            self._refuse("backpack_lights", f"backpack_lights refused: {exc}")
            return
        if not self._ready("backpack_lights", motion=False):
            return

        def steady(word: int):
            return _LightState(on_color=word, off_color=word)

        center = msgs.LightStateCenter(states=[steady(words["front"]), steady(words["middle"]),
                                               steady(words["back"])], unknown=0)
        side = msgs.LightStateSide(states=[steady(words["left"]), steady(words["right"])], unknown=0)
        self._lights = (center, side)
        self._robot.post(center)
        self._robot.post(side)

    def _on_head_light(self, msg: Bool) -> None:
        if not self._ready("head_light", motion=False):
            return
        self._head_light = bool(msg.data)
        self._robot.post(msgs.SetHeadLight(enable=self._head_light))

    def _on_volume(self, msg: Float32) -> None:
        try:
            level, warning = volume_level(msg.data)
        except CommandError as exc:
            self._refuse("volume", f"volume refused: {exc}")
            return
        if warning:
            self._warn_throttled("volume.data", warning)
        if not self._ready("volume", motion=False):
            return
        self._volume = level
        self._robot.post(msgs.SetRobotVolume(level=level))

    # ------------------------------------------------------------------ services

    def _on_emergency_stop(self, request, response):
        if request.engage:
            with self._drive_lock:  # no cmd_vel goes out after the stop below
                self._estop = True
            self._cancel_watchdog()
            robot = self._robot
            sent = robot is not None and self._link_state is LinkState.READY
            if sent:
                robot.post(msgs.StopAllMotors())
            response.message = "emergency stop engaged: motors stopped, motion commands refused" \
                if sent else ("emergency stop engaged; not connected now: the motors are stopped "
                              "as soon as the robot connects")
            self.get_logger().warning(response.message)
        else:
            was = self._estop
            self._estop = False
            response.message = "emergency stop released" if was else "emergency stop was not engaged"
            self.get_logger().info(response.message)
        response.success = True
        if self._media is not None:
            self._media.on_emergency_stop(self._estop)
        if self._motion is not None and self._estop:
            self._motion.abort_all("emergency stop engaged")
        return response

    def _on_reset_odometry(self, request, response):
        with self._lock:
            self._tracker.reset()
        response.success = True
        response.message = "odometry restarts at the origin with the next robot state"
        self.get_logger().info(response.message)
        return response


# ---------------------------------------------------------------------- entry point

class _RosLogHandler(logging.Handler):
    """Forwards warnings of the protocol and client layers to the node's logger."""

    def __init__(self, node: CozmoDriverNode) -> None:
        super().__init__(logging.WARNING)
        self.node = node
        # "[cozmo.transport] text", then the traceback when the record has exc_info
        # (logger.exception on the I/O thread) and the stack when it has stack_info
        self.setFormatter(logging.Formatter("[%(name)s] %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)  # with the traceback of exc_info, if any
            logger = self.node.get_logger()
            # one call per severity: rclpy raises when one source line logs at two
            if record.levelno >= logging.ERROR:
                logger.error(text)
            else:
                logger.warning(text)
        except Exception:  # a log line must never break the I/O thread
            self.handleError(record)



def _time_msg(ns: int) -> TimeMsg:
    msg = TimeMsg()
    msg.sec, msg.nanosec = divmod(ns, 1_000_000_000)
    return msg


def main(args: Optional[List[str]] = None) -> int:
    """``cozmo_driver_node``: run the driver until Ctrl-C or SIGTERM."""
    exit_with_parent()  # end with the bring-up that started it (cozmo_driver.lifeline)
    # Two busy threads (protocol I/O and the executor) share the GIL; a waiting
    # thread gets it after at most this long (CPython's default is 5 ms, which
    # shows up directly in command and odometry latency).
    sys.setswitchinterval(_GIL_SWITCH_INTERVAL_S)
    init(args)  # SIGINT and SIGTERM stop the node before rclpy shuts down
    node = make_node("cozmo_driver_node", CozmoDriverNode,
                     (ValueError, rclpy.exceptions.ParameterException))
    if node is None:
        return 2
    handler = _RosLogHandler(node)
    cozmo_logger = logging.getLogger("cozmo")
    cozmo_logger.addHandler(handler)
    cozmo_logger.propagate = False

    def start() -> None:
        if node.autostart and not node.start():
            node.get_logger().error("could not start; the node stays up for lifecycle transitions")
        # Everything allocated so far (rclpy, message classes, numpy...) lives as long as
        # the process: keep it out of the cyclic collector's full passes, which would
        # otherwise pause both threads for milliseconds every few seconds.
        gc.freeze()

    def stop(executor) -> None:
        node.close()
        cozmo_logger.removeHandler(handler)

    spin_node(node, start, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
