"""The driver core: one Cozmo's meaning and commands, with no ROS in it.

:class:`DriverCore` listens to a robot client (:meth:`DriverCore.on_robot_event`
is registered with ``Robot.add_listener`` and runs on the client's I/O thread)
and turns what the robot says into typed samples in SI units (REP-103), which
it hands to a :class:`~cozmo_driver.core.samples.DriverOutput`: odometry
(re-anchored, never jumping), IMU, joints, status, battery once a second,
robot events, camera frames (joined, rebuilt and decoded on demand), link
changes and the robot's facts. On each (re)connection it brings the robot to
the state wanted (motors stopped when inactive or e-stopped, stop-on-cliff,
head light, volume, backpack lights, camera settings) and reads the camera
calibration from the robot's NV storage.

Commands take SI units (:meth:`drive`, :meth:`set_head`, :meth:`set_lift`,
:meth:`move_head`, :meth:`move_lift`, :meth:`set_backpack_lights`,
:meth:`set_head_light`, :meth:`set_volume`, :meth:`emergency_stop`,
:meth:`reset_odometry`); each is checked (a non-finite value is refused, an
out-of-range one clamped) with a warning that says what was wrong, and may be
called from any thread. The cmd_vel watchdog runs on the client's clock and
scheduler (``Robot.clock``/``call_soon``/``schedule``): after a moving
:meth:`drive`, the treads are stopped once no other came for
``cmd_vel_timeout`` seconds. Nothing here polls or sleeps.

Locks. :attr:`lock` guards what the I/O thread shares with callers (tracker,
events, the active flag; a front-end publishing from its output methods holds
it too, because they run under it). :attr:`drive_lock` orders the tread
commands with what stops the treads: once :meth:`emergency_stop` or
:meth:`deactivate` returns, no drive command goes out.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple


from .. import robot_geometry as geo
from ..client import ClientConfig, LinkState, LinkStateChanged, Robot, RobotReady
from ..driver import camera_info as caminfo
from ..driver.commands import CommandError, check_twist
from ..driver.diagnostics import DiagnosticReport, link_report, robot_report
from ..driver.events import EventDetector, EventType, cliff_event
from ..driver.orientation import Orientation, OrientationDetector
from ..driver.kinematics import twist_to_wheels, wheels_to_twist
from ..driver.odometry import OdometryTracker, pose_variances, twist_variances
from ..driver.stamps import RobotClock
from ..log_throttle import LogThrottle
from ..driver.sensors import (STATUS_FLAG_NAMES, CliffEdgeTracker, StatusFlag, battery_percentage,
                              cliff_ahead, head_moving, imu_from_state, imu_to_body, joint_positions,
                              orientation_variances, power_supply_status)
from ..protocol import messages as msgs
from ..protocol.camera import (ImageAssembler)
from ..protocol.errors import CozmoError
from ..protocol.nvstorage import (CAMERA_CALIB_SIZE, NV_TAG_CAMERA_CALIB, NvReadAssembler)
from ..protocol.session import MessageReceived, SessionConfig
from .actuators import SLOW_CMD_VEL, ActuatorsMixin, heading_lost
from .camera import CameraMixin
from .held_events import EventHold
from .link_notes import LinkNotesMixin, forget_connect_lines
from .notes import WARN_PERIOD_S, NotesMixin
from .samples import (BatterySample, DriverOutput, ImuSample, JointSample,
                      LinkSample, OdomSample, StateSample, StatusSample)

__all__ = ["DriverCore", "make_robot", "CozmoError"]

_ImageResolution = msgs.ENUMS["ImageResolution"]
_NvOperation = msgs.ENUMS["NvOperation"]
_EVENT_MESSAGES = frozenset(("RobotPoked", "RobotDelocalized", "FallingStarted", "FallingStopped",
                             "ButtonPressed", "MotorCalibration"))
#: JPEG quality of colour frames, which are rebuilt at full width (the robot sends half)
COLOR_JPEG_QUALITY = 90
BATTERY_PERIOD_S = 1.0
WATCHDOG_OFF = ("cmd_vel_timeout is 0: the cmd_vel watchdog is off, and the robot drives on "
                "the last cmd_vel until another one stops it")
_FLAG_NAMES = tuple(name for name, _ in STATUS_FLAG_NAMES)
_FLAG_BITS = tuple(int(bit) for _, bit in STATUS_FLAG_NAMES)  # ints: no enum operation
_UNRELIABLE = int(StatusFlag.IS_PICKED_UP | StatusFlag.IS_FALLING)
#: why odometry re-anchors when the head starts to calibrate: Anki's firmware puts its IMU
#: filter's rotation back to 0 while the head is not calibrated (IMUFilter::Update, Reset),
#: and its heading is that rotation plus an offset, so the reported yaw restarts there
HEAD_CALIBRATION_REANCHOR = "the head calibrates, and the robot restarts its heading"
_STOP = msgs.DriveWheels(lwheel_speed_mmps=0.0, rwheel_speed_mmps=0.0)
_CALIBRATING = {EventType.HEAD_CALIBRATION_STARTED: "head", EventType.LIFT_CALIBRATION_STARTED: "lift"}


def make_robot(params: Dict[str, Any], name: str) -> Robot:
    """The robot client the driver parameters describe (not started)."""
    config = ClientConfig(session=SessionConfig(peer_timeout=float(params["peer_timeout"])),
                          reconnect_min=float(params["reconnect_min"]),
                          reconnect_max=float(params["reconnect_max"]),
                          ready_timeout=float(params["ready_timeout"]),
                          state_timeout=float(params["ready_timeout"]))
    return Robot(params["robot_ip"], int(params["robot_port"]), local_host=params["local_ip"],
                 local_port=int(params["local_port"]), config=config, name=name)


class _StateParts:
    """The samples of one robot state that a front-end reads only for the streams its
    subscribers want (see StateSample): made from the message when asked for."""

    __slots__ = ("state", "yaw", "yaw_var", "sec", "nsec", "flags", "voltage", "orientation",
                 "head", "lift", "calibrating", "head_moves")

    def __init__(self, state: Any, yaw: float, yaw_var: float, sec: int, nsec: int,
                 flags: int, voltage: float, orientation: int, head: float,
                 lift: Optional[float], calibrating: bool, head_moves: bool) -> None:
        self.state, self.yaw, self.yaw_var, self.sec, self.nsec = state, yaw, yaw_var, sec, nsec
        self.flags, self.voltage, self.orientation = flags, voltage, orientation
        self.head, self.lift = head, lift  # the head angle; the lift field if not the state's
        self.calibrating = calibrating  # the head: the robot reports pitch 0
        self.head_moves = head_moves  # (head_moving: the IMU, in the head, moves with it)

    def imu(self) -> ImuSample:
        variances = orientation_variances(
            self.orientation in (Orientation.ON_TREADS, Orientation.UNKNOWN), self.calibrating)
        reading = imu_from_state(self.state, self.yaw, self.yaw_var, self.head, *variances,
                                 head_moves=self.head_moves)
        accel_var = reading.linear_acceleration_covariance
        return ImuSample(self.sec, self.nsec, *reading.orientation, *reading.angular_velocity,
                         *reading.linear_acceleration, self.yaw_var, *variances,
                         reading.angular_velocity_covariance[4], accel_var[0], accel_var[8])

    def joints(self) -> JointSample:
        return JointSample(self.sec, self.nsec, *joint_positions(self.state, self.head, self.lift))

    def status(self) -> StatusSample:
        state, flags = self.state, self.flags
        segment = int(state.curr_path_segment)
        cliff = state.cliff_data_raw
        return StatusSample(self.sec, self.nsec, *[bool(flags & bit) for bit in _FLAG_BITS],
                            flags, int(cliff[0]), int(cliff[1]), int(cliff[2]), int(cliff[3]),
                            int(state.backpack_touch_sensor_raw),
                            -1 if segment == 0xFF else segment, self.voltage, self.orientation)


class DriverCore(NotesMixin, LinkNotesMixin, ActuatorsMixin, CameraMixin):
    """See the module docstring. ``params`` is the driver's parameter mapping (read, never
    written, by the core; names as in :mod:`cozmo_driver.driver.parameters`); ``robot`` the
    client, or anything with its ``post``, ``clock``, ``calibrating``, ``call_soon``,
    ``schedule``, ``stats`` and ``transport.stats``."""

    def __init__(self, robot: Any, params: Dict[str, Any], output: DriverOutput,
                 camera_file: Optional[caminfo.CameraInfoData] = None) -> None:
        self.robot = robot
        self.params = params
        self.output = output
        self.camera_file = camera_file  # from camera_info_url: wins over the robot's
        self.lock = threading.Lock()
        self.drive_lock = threading.Lock()
        self.tracker = OdometryTracker()
        self.robot_clock = RobotClock()  # stamps from the robot's own clock
        self.events = EventDetector()
        #: the robot's events while inactive: held from a new robot client to its activation
        self.held_events = EventHold(self._log, "robot event")
        self.orientation = OrientationDetector()
        #: whether the cliff sensor sees an edge of the floor the robot stands on
        #: (output.on_cliff_edge)
        self.cliff_edge = CliffEdgeTracker()
        # the camera streams QVGA (320 x 240) at most: larger sizes are refused undecoded
        self.assembler = ImageAssembler(max_resolution=int(_ImageResolution.QVGA))
        self._nv = NvReadAssembler()
        self.active = False
        self.estop = False
        self.suspending = False  # Ctrl-Z: motion refused until the process goes on (hold_for_ctrl_z)
        self.link_state = LinkState.DISCONNECTED
        self.ever_ready = False
        self.robot_lost = False  # a ready robot was lost, not ready again since: LOST (reported_state)
        #: why the last activation could not open the link ("": it did, or none failed since the
        #: last clean-up): the link's diagnostics are an error while the node stays inactive
        self.activation_error = ""
        self.calibration: Optional[caminfo.CameraInfoData] = None  # from the robot
        #: whether a camera topic has a subscriber (with camera_on_demand, the camera
        #: streams only while it has): :meth:`set_camera_wanted`
        self.camera_wanted = False
        #: who owns a motor now: ``has_goal(motor)``, ``preempt(motor, reason, stop=False)``
        #: and, on any thread, ``heading_restarted(reason)`` (the motion actions), or None
        self.motion: Any = None
        #: the animations: ``moves(motor)`` and ``preempt_animation(motor, by)``, or None
        self.animation: Any = None
        # outputs re-applied on every new connection (a rebooted robot forgets them)
        self.head_light: Optional[bool] = None
        self.volume: Optional[int] = None
        self.lights: Optional[Tuple[Any, Any]] = None
        self.refused = 0
        self.cmd_vel_scaled = 0  # drives scaled down to max_wheel_speed
        #: motor: (value, topic, speed sent) of its head/velocity or lift/velocity motion in effect
        self.velocities: Dict[str, Tuple[float, str, float]] = {}
        self._refused_lock = threading.Lock()
        #: repeated warnings: one line per WARN_PERIOD_S per kind, with the count left unsaid
        self.throttle = LogThrottle(WARN_PERIOD_S)
        self.clock: Callable[[], float] = time.monotonic  # the throttle's time (injectable)
        self.state_count = 0
        #: the head angle (rad) and the lift field (the lift's angle, rad, or height, mm)
        #: the samples take: the robot's, each held at the last one taken while its motor
        #: calibrates (Anki's firmware counts both from 0 at power-up until their first
        #: calibration ends at the low stop; Anki's engine took no head angle meanwhile)
        self.head_rad = geo.HEAD_MIN_ANGLE_RAD
        self._raw_head = math.nan  # the latest state's head angle (head_moving)
        self.lift_field = geo.LIFT_MIN_ANGLE_RAD
        self._rate_mark: Tuple[float, int] = (time.monotonic(), 0)
        self.yaw_diff: Optional[float] = None  # mean |tread yaw rate - gyro z|, weighted
        self.battery_v: Optional[float] = None
        self._last_battery = -math.inf
        self._deadline: Optional[float] = None  # robot clock s: the watchdog's stop due
        #: robot clock s of the last cmd_vel drive that moved the treads (None: they are not
        #: moving by cmd_vel): a new cmd_vel_timeout counts from it
        self._last_move: Optional[float] = None
        #: the last cmd_vel's (v m/s, yaw rate rad/s, acceleration mm/s^2), as asked: before any scaling or hold
        self._wheels: Optional[Tuple[float, float, float]] = None
        self._armed = False  # a watchdog check is scheduled on the I/O thread
        self._watch_handle: Any = None  # that check (I/O thread only)
        self._handed = 0  # drives handed to the front-end's thread, not run yet
        self._last_cmd: Optional[float] = None  # robot clock s of the last cmd_vel drive sent
        self._tripped = False  # the watchdog stopped the treads since that drive
        self._jerks = 0  # moving drives in a row that started the treads the watchdog had stopped

    # ------------------------------------------------------------------ small helpers

    @property
    def connected(self) -> bool:
        return self.link_state is LinkState.READY

    def shown_axes(self) -> Tuple[float, float]:
        """(head angle rad, lift height m) as joint_states shows them: the latest state's,
        each held while its motor calibrates (see ``head_rad``)."""
        return self.head_rad, geo.reported_lift_height_m(self.lift_field)

    def post_if_ready(self, message: Any) -> None:
        robot = self.robot
        if robot is not None and self.link_state is LinkState.READY:
            robot.post(message)

    # ------------------------------------------------------------------ lifecycle

    def attach(self, robot: Any) -> None:
        """A new robot client (configure), not started: its events are held until :meth:`activate`."""
        with self.lock:
            self.robot, self.camera_file = robot, None
            self.held_events.arm()

    def activate(self) -> None:
        self.say_held_back()
        self.activation_error = ""
        with self.lock:  # the events that came since the link opened go out first, in order (held_events)
            self.active = True  # (the I/O thread says ready, once it brought the robot up: RobotReady)
            self.held_events.release(self.output.on_events)
        if self.robot is not None and self.link_state is LinkState.READY:
            self.reinitialise(resend_only=True)

    def deactivate(self) -> None:
        """Inactive: no sample goes out and no drive command once this returns. The caller
        ends its own motions, then :meth:`stop_all_motors`."""
        with self.drive_lock, self.lock:
            self.active = False
            self.held_events.disarm()  # a user's choice: the robot's events are logged, not published
            self.output.on_link(self.link_sample())  # link_status says so at once
        self.cancel_watchdog()
        self._send_camera_mode()  # off: no image would be published (activate: on again)

    def release(self) -> None:
        """Inactive, and the motors stopped before anything is torn down (the drive lock
        held: no drive command goes out after the stop), whenever the robot's link is up
        (also while it is being brought up again after a reconnect). What was scheduled on the
        robot's I/O loop (a watchdog check) or handed to the front-end (drives) dies with them:
        the next configure's first moving drive schedules a check again."""
        with self.drive_lock:
            self.active = False
            self._deadline = self._last_move = self._watch_handle = None
            self._armed, self._handed, self.ever_ready = False, 0, False  # (next robot: not LOST until it answered)
            self.robot_lost, self.activation_error = False, ""
            robot = self.robot
            if robot is not None and robot.state in (LinkState.INITIALIZING, LinkState.READY):
                robot.post(msgs.StopAllMotors())
            self.forget_velocity()
        with self.lock:  # the next configure's automatic exposure starts from the parameters then
            self.exposure = None
            self.held_events.disarm()  # (the closing link's events: logged; attach holds the next's)
        self.link_state = LinkState.DISCONNECTED
        self.battery_low_said = False  # the next configure's robot (the same one, or another) is told of

    def stop_all_motors(self) -> None:
        self.forget_velocity()
        self.post_if_ready(msgs.StopAllMotors())

    # ------------------------------------------------------------------ the I/O thread

    def on_robot_event(self, event: Any) -> None:
        """The robot client's listener (I/O thread)."""
        if isinstance(event, MessageReceived):
            message = event.message
            name = message.NAME
            if name == "RobotState":
                with self.lock:
                    # the jump rules time the robot's motion by its own clock: a stamp, mapped by
                    # the least delay seen, moves with that mapping (and one from arrival, with the delays)
                    full_ms = self.robot_clock.robot_ms(int(message.timestamp_ms))
                    stamp = self.output.stamp_ns()
                    if self.output.robot_time():
                        stamp = self.robot_clock.stamp_at(stamp, full_ms)
                    self._on_state(stamp, message, full_ms / 1000.0)
            elif name == "ImageChunk":
                self._on_chunk(message)
            elif name in _EVENT_MESSAGES:
                with self.lock:
                    events = self.events.on_message(message)
                    self.orientation.on_calibration(events)
                    for e in events:  # a calibration drives the motor: a velocity motion ends
                        if e.type in _CALIBRATING:
                            self.forget_velocity(_CALIBRATING[e.type])
                    if any(e.type == EventType.HEAD_CALIBRATION_STARTED for e in events):
                        self.tracker.reanchor_next(HEAD_CALIBRATION_REANCHOR)
                        motion = self.motion
                        if motion is not None:  # a treads goal's target is in the old heading
                            motion.heading_restarted(heading_lost(
                                "the robot started it by itself" if message.auto_started
                                else "asked for: calibrate_motors, or a new connection"))
                    if events and self.active:
                        self.output.on_events(self.output.stamp_ns(), events)
                    elif events:  # held for the activation, or (deactivated) logged only
                        self.held_events.came(self.output.stamp_ns(), events)
            elif name == "NvStorageOpResult":
                self._on_nv_result(message)
        elif isinstance(event, LinkStateChanged):
            if event.state is not LinkState.READY:
                self.assembler.reset()
                # a head calibration ends with its connection (each starts one at SyncTime,
                # before its first robot state: kept from there)
                self.orientation.held = False
            self._on_link_state(event)
        elif isinstance(event, RobotReady):
            with self.lock:  # before this connection's first robot state
                self.tracker.new_connection()
                self.robot_clock.reset()
            self._on_robot_ready(event.info)

    def _on_state(self, stamp_ns: int, state: Any, robot_s: float) -> None:
        self.state_count += 1
        # the holds' clock: the stamps may stand still (ROS time without /clock) or go back
        now = self.robot.clock()
        self.state_came(now)
        tracker = self.tracker
        calibrating = self.robot.calibrating
        raw_head, flags = float(state.head_angle_rad), int(state.status)
        head_moves = head_moving(self._raw_head, raw_head, flags, calibrating("head"))
        self._raw_head = raw_head
        if calibrating("head"):
            head = self.head_rad
        else:
            head = self.head_rad = raw_head
        if calibrating("lift"):
            lift = self.lift_field
        else:
            lift, self.lift_field = None, state.lift_height_mm
        gyro_yaw = imu_to_body(float(state.gyro_x_radps), 0.0, float(state.gyro_z_radps),
                               head)[2]  # the body's yaw rate
        pose, reason = tracker.update(
            (int(state.pose_frame_id), int(state.pose_origin_id)),
            state.pose_x_mm / 1000.0, state.pose_y_mm / 1000.0, state.pose_angle_rad, robot_s, gyro_yaw)
        if reason is not None:
            self.log_throttled(logging.INFO, "reanchor",
                               f"odometry re-anchored ({reason}): odom continues from x "
                               f"{pose.x:.3f} m, y {pose.y:.3f} m, yaw {pose.yaw:.3f} rad; "
                               f"{tracker.reanchors} so far")
        cliff_rose = bool(flags & ~self.events.flags & StatusFlag.CLIFF_DETECTED)
        was_lifted = self.events.lifted
        events = self.events.on_status(flags, publish=self.active,
                                       head_calibrating=self.orientation.held)
        just_lifted = self.events.lifted and not was_lifted
        turned = self.orientation.update(now, float(state.pose_pitch_rad), float(state.accel_y_mmps2),
                                         flags, publish=self.active)
        if turned:
            events = events + turned
        v, w = wheels_to_twist(state.lwheel_speed_mmps / 1000.0, state.rwheel_speed_mmps / 1000.0)
        diff = w - gyro_yaw
        unreliable = bool(flags & _UNRELIABLE)
        if not unreliable and math.isfinite(diff):
            self.yaw_diff = abs(diff) if self.yaw_diff is None else \
                0.95 * self.yaw_diff + 0.05 * abs(diff)
        voltage = float(state.battery_voltage_v)
        self.watch_battery(voltage, flags)  # (battery_v)
        if not self.active:
            return
        sec, nsec = divmod(stamp_ns, 1_000_000_000)
        pv = pose_variances(tracker.distance_m, tracker.rotation_rad)
        tv = twist_variances(diff if math.isfinite(diff) else 0.0, geo.TRACK_WIDTH_M, unreliable)
        odom = OdomSample(stamp_ns, sec, nsec, pose.x, pose.y, pose.yaw, math.sin(pose.yaw / 2.0),
                          math.cos(pose.yaw / 2.0), pv[0], pv[1], pv[5], v, w,
                          tv[0], tv[1], tv[5])
        output = self.output
        output.on_state(StateSample(odom, _StateParts(state, pose.yaw, pv[5], sec, nsec, flags,
                                                      voltage, self.orientation.state, head,
                                                      lift, self.orientation.held, head_moves)))
        # in the air, falling or lying the sensor sees no floor either: not an edge (nor
        # while a reading that it lies waits for its hold time, nor while the head calibrates)
        on_treads = self.orientation.state == self.orientation.seen == Orientation.ON_TREADS
        edge = self.cliff_edge.update(now, stamp_ns, bool(flags & StatusFlag.CLIFF_DETECTED), on_treads,
                                      self.orientation.held)
        if edge is not None:
            output.on_cliff_edge(*edge)
            events = events + [cliff_event(edge[1])]
        if now - self._last_battery >= BATTERY_PERIOD_S:
            self._last_battery = now
            output.on_battery(BatterySample(stamp_ns, voltage, battery_percentage(voltage),
                                            power_supply_status(flags)))
        if events:
            output.on_events(stamp_ns, events)
        if self._last_move is not None and ((just_lifted and self.params["stop_when_picked_up"]) or (
                cliff_rose and cliff_ahead(flags, self.params["stop_on_cliff"]))):
            self.robot.call_soon(self._drive_again)

    def _on_robot_ready(self, info: Any) -> None:
        with self.lock:
            self.output.on_robot_info(info)
        again = " again" if self.ever_ready else ""
        self.ever_ready = True
        forget_connect_lines(self.throttle)  # a "does not answer" held back is no longer true
        self.say_held_back()
        p = self.params
        version = str(info.firmware_version) if info.firmware_version is not None else ""
        self._log(logging.INFO,
                  f"connected{again} to Cozmo at {p['robot_ip']}:{p['robot_port']}: firmware "
                  f"{version} ({info.firmware_build or ''}), head serial "
                  f"{int(info.head_serial or 0):08x}, body serial {int(info.body_serial or 0):08x}, "
                  f"hardware v{int(info.body_hw_version or 0)}, {info.body_color or 'UNKNOWN'}")
        self.reinitialise(resend_only=False, ready=True)
        self.watch_state_gaps()
        with self.lock:
            self.output.on_link(self.link_sample())

    def reinitialise(self, resend_only: bool, ready: bool = False) -> None:
        """Bring a (re)connected robot to the state wanted; unless ``resend_only``, read the
        camera calibration again. ``ready``: the link is ready from its StopAllMotors on."""
        robot = self.robot
        if robot is None:
            return
        if not resend_only or self.estop or not self.active:  # (re)connected: it may still
            robot.post(msgs.StopAllMotors())  # move on a lost link's command (docs/driver.md)
            self.forget_velocity()
        if ready:
            self.link_state, self.robot_lost = LinkState.READY, False  # commands are taken from here on
        self.send_camera_config()
        robot.post(msgs.EnableStopOnCliff(enable=bool(self.params["stop_on_cliff"])))
        if self.head_light is not None:
            robot.post(msgs.SetHeadLight(enable=self.head_light))
        if self.volume is not None:
            robot.post(msgs.SetRobotVolume(level=self.volume))
        if self.lights is not None:
            robot.post(self.lights[0])
            robot.post(self.lights[1])
        if not resend_only:
            self._nv.reset()
            robot.post(msgs.NvStorageOp(tag=NV_TAG_CAMERA_CALIB, length=CAMERA_CALIB_SIZE,
                                        op=_NvOperation.NVOP_READ, unknown=0, data=b""))

    def apply_params(self, old: Dict[str, Any]) -> None:
        """The parameters changed from ``old``: send what the robot must know."""
        p = self.params
        restart = any(p[k] != old[k] for k in ("camera_auto_exposure", "camera_gain",
                                                "camera_auto_exposure_target", "camera_exposure_ms"))
        if restart or any(p[k] != old[k] for k in ("camera_enabled", "camera_on_demand", "camera_color")):
            self.send_camera_config(restart_exposure=restart)
        if p["stop_on_cliff"] != old["stop_on_cliff"]:
            self.post_if_ready(msgs.EnableStopOnCliff(enable=bool(p["stop_on_cliff"])))
        if p["cmd_vel_timeout"] != old["cmd_vel_timeout"]:
            if not p["cmd_vel_timeout"]:
                self._log(logging.WARNING, WATCHDOG_OFF)
            # treads moving by cmd_vel stop at the new timeout after the last command (at
            # once if that is past), or never with 0
            with self.drive_lock:
                if self.robot is not None:
                    self._set_deadline(float(p["cmd_vel_timeout"]), again=True)
        # treads moving by cmd_vel go on at the new limit, or held (stopped: that drive ends); a
        # hold turned off starts nothing by itself (the next cmd_vel does)
        shaping = [k for k in ("max_wheel_speed", "stop_when_picked_up", "stop_on_cliff")
                   if p[k] != old[k] and (k == "max_wheel_speed" or p[k])]
        if shaping:
            self._drive_again(rescaled="max_wheel_speed" in shaping)
        self.slow_velocities(old)  # and a head or lift velocity motion at a lowered limit

    # ------------------------------------------------------------------ reports

    def link_sample(self) -> LinkSample:
        sample = LinkSample(self.reported_state())
        robot = self.robot
        if robot is not None:
            s = robot.stats
            sample.rtt_s = float(s.rtt_s) if s.rtt_s is not None else math.nan
            sample.datagrams_sent = int(s.datagrams_sent)
            sample.datagrams_received = int(s.datagrams_received)
            sample.retransmissions = int(s.retransmissions)
            sample.malformed_dropped = int(s.malformed_datagrams + s.malformed_packets)
            sample.wrong_source_dropped = int(robot.transport.stats.wrong_source)
        return sample

    def reports(self, where: str) -> Tuple[DiagnosticReport, DiagnosticReport]:
        """The link's and the robot's diagnostic reports; the state rate is measured since
        the previous call."""
        now = time.monotonic()
        mark_t, mark_n = self._rate_mark
        rate = (self.state_count - mark_n) / (now - mark_t) if now > mark_t else 0.0
        self._rate_mark = (now, self.state_count)
        robot = self.robot
        connected = self.connected
        volts = self.battery_v if connected else None
        return (link_report(self.reported_state().value, self.active, where, robot.stats,
                            robot.transport.stats, rate, self.assembler.stats,
                            camera=self.camera_status(),
                            frames_on_arrival=self.robot_clock.frames_from_arrival,
                            hint=self.link_hint(), images_unconverted=self.images_unconverted,
                            activation_error=self.activation_error),
                robot_report(connected, volts, battery_percentage(volts)
                             if volts is not None else None, self.estop, self.yaw_diff if connected else None,
                             self.tracker.reanchors, self.refused,
                             self.orientation.describe() if connected else None,
                             self.orientation.lying(), active=self.active,
                             on_charger=self.battery_on_charger))

    # ------------------------------------------------------------------ commands

    def drive_twist(self, field: str, linear: Tuple[float, float, float],
                    angular: Tuple[float, float, float], own_thread: bool = False) -> None:
        """A velocity command (all six components must be finite; x and yaw rate used)."""
        try:
            ignored = check_twist(field, linear, angular)  # e.g. a holonomic teleop key's y
        except CommandError as exc:
            self.refuse_field(f"cmd_vel refused: {exc}")
            return
        if ignored:
            self.warn_throttled("cmd_vel_ignored", ignored)
        self.drive(linear[0], angular[2], own_thread)

    def drive(self, v_mps: float, w_radps: float, own_thread: bool = False,
              handed: bool = False) -> None:
        """Drive at ``v_mps`` and ``w_radps`` (scaled down together to ``max_wheel_speed``),
        refreshing the watchdog. ``own_thread``: called off the front-end's thread, which
        must then end a motion goal holding the treads (the drive is handed over to it)."""
        p = self.params
        cmd = twist_to_wheels(v_mps, w_radps, float(p["max_wheel_speed"]))
        accel = float(p["wheel_acceleration"]) * 1000.0
        timeout = float(p["cmd_vel_timeout"])
        if not own_thread and self.not_ready(motion=True) is None:
            self._preempt_animation("wheels", "cmd_vel")  # not under the lock: it waits for the I/O thread
        with self.drive_lock:
            if handed:
                self._handed = max(self._handed - 1, 0)  # (0 after a release)
            if not self.ready("cmd_vel", motion=True):
                return
            motion = self.motion
            goal = motion is not None and motion.has_goal("wheels")
            if own_thread and (goal or self._handed > 0 or self._animates("wheels")):
                # a later drive waits its turn behind the ones handed over
                self._handed += 1
                self.output.hand_over(self.drive, v_mps, w_radps, False, True)
                return
            if goal:
                motion.preempt("wheels", "preempted by a cmd_vel command")
            if cmd.limited:
                self._scaled(v_mps, w_radps, cmd)
            self._wheels = (v_mps, w_radps, accel)
            held = self._post_wheels(cmd.left_mps, cmd.right_mps, accel)
            self._set_deadline(timeout, again=False)
            slow = self._cadence(bool(cmd.left_mps or cmd.right_mps), timeout)
        self._say_held(bool(cmd.left_mps or cmd.right_mps), held)
        if slow is not None:
            self._say_slow(slow, timeout)

    def _post_wheels(self, left: float, right: float, accel: float) -> Optional[str]:
        """DriveWheels for cmd_vel: stopped while the robot is picked up or falling
        (``stop_when_picked_up``: Anki's firmware would drive its treads in the air), less its
        forward motion while the cliff sensor sees no floor ahead (``cliff_ahead``; the turn is
        kept); arms the watchdog's clock. What it held back: "picked up", "cliff" or None
        (drive lock held)."""
        held = None
        lifted, cliff = self.tread_holds()
        if lifted:
            held, left, right = "picked up", 0.0, 0.0
        elif left + right > 0.0 and cliff:
            held, mean = "cliff", (left + right) / 2.0
            left, right = left - mean, right - mean
        self.robot.post(msgs.DriveWheels(lwheel_speed_mmps=left * 1000.0,
                                         rwheel_speed_mmps=right * 1000.0,
                                         lwheel_accel_mmps2=accel, rwheel_accel_mmps2=accel))
        self._last_move = self.robot.clock() if left != 0.0 or right != 0.0 else None
        return held

    def _drive_again(self, rescaled: bool = False) -> None:
        """The latest cmd_vel of a drive in progress is sent again as the parameters and
        _post_wheels hold it: the robot has just been picked up, or its cliff sensor has just
        lost the floor ahead (the robot stopped its treads there, but a cmd_vel forwards sent
        before the driver knew would start them again), or a parameter that shapes the drive
        changed (``rescaled``: max_wheel_speed, the drive scaled to it warned of as cmd_vel's)."""
        with self.drive_lock:
            wheels = self._wheels
            last = self._last_move
            if last is None or wheels is None or \
                    (self.motion is not None and self.motion.has_goal("wheels")):
                return
            cmd = twist_to_wheels(wheels[0], wheels[1], float(self.params["max_wheel_speed"]))
            if rescaled and cmd.limited:
                self._scaled(wheels[0], wheels[1], cmd)
            self._post_wheels(cmd.left_mps, cmd.right_mps, wheels[2])
            if self._last_move is None:
                self._deadline = None  # nothing turns any more: no watchdog stop to make
            else:
                self._last_move = last  # not a new cmd_vel: the watchdog counts from the last

    def _set_deadline(self, timeout: float, again: bool) -> None:
        """The watchdog's stop at ``timeout`` after the last moving drive (none for 0);
        ``again``: a check may be scheduled for a later deadline, schedule one for this
        (drive lock held)."""
        last = self._last_move
        if last is None or timeout <= 0:
            self._deadline = None
            return
        self._deadline = last + timeout
        if again or not self._armed:
            self._armed = True
            self.robot.call_soon(self._arm)

    def _arm(self) -> None:
        """I/O thread: schedule the watchdog's check at the deadline (instead of one
        scheduled before, which may be later)."""
        with self.drive_lock:
            deadline = self._deadline
            if deadline is None:
                self._armed = False
                return
        handle, self._watch_handle = self._watch_handle, None
        if handle is not None:
            handle.cancel()
        self._watch_handle = self.robot.schedule(deadline, self._on_watchdog)

    def _on_watchdog(self) -> None:
        """I/O thread: stop the treads once no drive came for cmd_vel_timeout."""
        with self.drive_lock:
            deadline = self._deadline
            if deadline is None:
                self._armed = False
                return
            if self.robot.clock() < deadline:
                self._watch_handle = self.robot.schedule(deadline, self._on_watchdog)
                return
            waited = deadline - self._last_move if self._last_move is not None else 0.0
            self._deadline = self._last_move = None
            self._armed = False
            self._watch_handle = None
            self._tripped = True
            self.post_if_ready(_STOP)
        self.say_held_back(keep=(SLOW_CMD_VEL,))
        self._log(logging.INFO, f"no cmd_vel for {waited:g} s: treads stopped")

    @property
    def watchdog_due(self) -> Optional[float]:
        """When (robot clock) the watchdog stops the treads, or None."""
        return self._deadline

    def cancel_watchdog(self) -> None:
        """No watchdog stop is pending any more (the treads were stopped, or taken over)."""
        with self.drive_lock:
            self._deadline = self._last_move = None

    def take_treads(self) -> None:
        """An animation drives the treads now: treads still moving by cmd_vel stop (the clip's
        keyframes drive them), and no watchdog stop is left pending to cut the clip's drive."""
        with self.drive_lock:
            moving, self._deadline, self._last_move = self._last_move is not None, None, None
            if moving:
                self.post_if_ready(_STOP)

    def stop_treads(self) -> None:
        """Stop the treads now (no watchdog stop pending after)."""
        with self.drive_lock:
            self._deadline = self._last_move = None
            self.post_if_ready(_STOP)

    def hold_for_ctrl_z(self, held: bool) -> None:
        """Ctrl-Z is about to suspend the process (``held``): until it goes on (False), motion
        commands are refused (the cmd_vel thread runs until the process stops), and no
        watchdog stop is left pending (the caller stops every motor)."""
        with self.drive_lock:
            self.suspending = held
            self._deadline = self._last_move = None
            self.forget_velocity()

    def emergency_stop(self, engage: bool) -> str:
        """Engage (stop every motor, refuse motion) or release the emergency stop; returns
        what happened, which is also logged."""
        if engage:
            with self.drive_lock:  # no drive goes out after the stop below
                self.estop = True
                self._deadline = self._last_move = None
                self.forget_velocity()
            sent = self.robot is not None and self.link_state is LinkState.READY
            if sent:
                self.robot.post(msgs.StopAllMotors())
            message = "emergency stop engaged: motors stopped, motion commands refused" \
                if sent else ("emergency stop engaged; not connected now: the motors are stopped "
                              "as soon as the robot connects")
            self._log(logging.WARNING, message)
        else:
            was, self.estop = self.estop, False
            message = "emergency stop released" if was else "emergency stop was not engaged"
            self._log(logging.INFO, message)
        return message

    def reset_odometry(self) -> str:
        with self.lock:  # at once: a goal checked right after converts its target with it
            now = self.tracker.reset()
        message = f"odometry restarts at the origin {'from the latest' if now else 'with the first'} robot state"
        # a tread goal keeps its target where it is on the floor (goals are held in the robot's
        # own frame), but the odom poses and headings it reports jump with the reset
        goal = self.motion.running.get("wheels") if self.motion is not None else None
        jumps = goal is not None and goal != "drive_straight"
        if jumps:
            message += (f"; the running {goal} goal goes on to the place it was sent to, and its "
                        "feedback and result give poses in the new odom frame")
        self._log(logging.WARNING if jumps else logging.INFO, message)
        return message
