"""The simulated Cozmo's body and firmware: a pure model ticked by injected time.

:class:`RobotModel` knows nothing about sockets, threads or the clock. Its inputs
are engine messages (:meth:`RobotModel.handle`), scripted events
(:meth:`RobotModel.pick_up`, :meth:`RobotModel.tap_cube`, ...) and time
(:meth:`RobotModel.advance`); its outputs are robot->engine messages
(:meth:`RobotModel.pop_outgoing`), the instant it next needs to run
(:meth:`RobotModel.next_tick`) and ground truth (:meth:`RobotModel.true_pose`,
:attr:`RobotModel.framebuffer`, ...). Every ``now`` is in seconds on any
monotonic origin. Randomness (sensor noise, rssi) comes from one seeded
generator, so the same inputs give the same outputs.

:class:`RobotModel` is a small composition of parts, each in its own module and
each handling its own commands:

* :class:`~cozmo_driver.sim.firmware.Firmware` (:mod:`.firmware`): what the parts
  share: configuration, seeded generator, outbox, timers, robot clock, link state;
* :class:`~cozmo_driver.sim.body.Body` (:mod:`.body`, motors in :mod:`.motors`):
  pose and odometry frame, wheels, head and lift, IMU, battery, cliffs, falls,
  pick-ups, the charger;
* :class:`~cozmo_driver.sim.path.PathFollower` (:mod:`.path`): path segments and
  following them;
* :class:`~cozmo_driver.sim.animation.AnimationPlayer` (:mod:`.animation`): the
  animation stream, face, speaker and backpack lights;
* :class:`~cozmo_driver.sim.accessories.Accessories` (:mod:`.accessories`): the
  cubes and the charger over the radio;
* :class:`~cozmo_driver.sim.nvstorage.NvStorage` (:mod:`.nvstorage`) and
  :class:`~cozmo_driver.sim.camera.CameraControl` (:mod:`.camera`).

The model itself runs time (physics substeps, timers, animation ticks, periodic
messages), the connection's life (greeting, Enable, SyncTime), RobotState, and
the scripted events; its attributes of old (``model.wheels``, ``model.soc``,
``model.framebuffer``, ...) read and write the part that owns them.

What it models
--------------
* **Base**: differential drive, track 46 mm, wheel speed limit 200 mm/s, each
  wheel ramping to its target at its own acceleration (0 means at once, as
  Anki's firmware takes it: the motor's own, ``DEFAULT_WHEEL_ACCEL_MMPS2``, 10 m/s^2). The pose is
  integrated in substeps of at most ``physics_dt`` (10 ms), however far
  :meth:`advance` jumps. TurnInPlace (to a heading, the short way or by a given turn) and
  path following (lines, arcs, point turns) are controllers that set the wheel
  speeds, so wheel speeds, gyro and pose always agree.
* **Head and lift**: position-controlled axes with limits (head -25..44.5 deg,
  lift 32..92 mm through a 66 mm arm on a pivot 45 mm high, so the lift moves in
  arm angle and its speeds are rad/s). Moves honour max speed, acceleration and
  ``duration_sec``; velocity moves (MoveHead/MoveLift) stop at the limits.
* **Motor calibration**: at each connection's SyncTime (after Enable), as Anki's
  robot firmware does, and on StartMotorCalibration, the head and the lift
  calibrate: MotorCalibration (started, not auto-started), the motor drives to
  its low stop and rests there (0.5 s, the lift 0.75 s), MotorCalibration
  (ended). Meanwhile it takes no command: the head runs the latest one after
  the calibration, the lift drops it (as the firmware's controllers do).
  StopAllMotors drops the waiting command; the calibration goes on. While the head
  calibrates, the reported heading holds at the offset the last SetOrigin set (the
  firmware resets its IMU filter at every tick then, IMUFilter::Update): turns meanwhile
  are not counted, x and y go on along the held heading, and IS_PICKED_UP is not
  reported; turns count again after it. TurnInPlace and paths steer by the true heading.
* **Pose frames**: the true pose lives in the world frame of
  :class:`cozmo_driver.sim.world.World` (table centre, x forward). The reported
  pose is odometry: it starts at (0, 0, 0) on boot and SetOrigin re-anchors it
  (the robot's pose *becomes* ``(pose_x_mm, pose_y_mm, angle)`` in frame
  ``pose_frame_id``/``pose_origin_id``). Moving the robot by hand
  (:meth:`put_down` with a new position) changes the true pose but not odometry.
* **IMU**: gyro (rad/s, yaw rate from the wheels plus seeded noise) and
  accelerometer (mm/s^2: forward and centripetal acceleration plus gravity,
  about 9810 on z when flat; near zero while falling), in the head's axes as the
  real IMU, which sits in the head, reports them: x and z turned up by the head
  angle. Set down on its back, face or
  a side (:meth:`lay`), it reports the pitch and gravity of that pose (74.5 deg on
  its back, where the backpack holds it; -90 deg on its face; 1 g along y on a side;
  pitch 0 while the head calibrates, as the firmware resets its IMU filter then)
  and, like a robot in the air, IS_PICKED_UP and no floor under the cliff sensor (Anki's
  firmware ends "picked up" only for a robot upright on the floor, IMUFilter::DetectPickup;
  the cliff reading of a robot lying down is a guess).
* **Pick-up**: the cliff sensor loses and finds the floor at once; IS_PICKED_UP rises
  0.105 s after a lift (0.205 s while the treads run: the firmware's detection counts)
  and falls 0.205 s after the robot is set down (``PICKUP_DETECT_S``,
  ``PUT_DOWN_DETECT_S`` in ``sim/body.py``). As Anki's shipped firmware, nothing stops
  the treads then: they run on as commanded, in the air.
* **Battery**: a state of charge turned into 3.45..4.05 V (the range of Anki's firmware
  battery level, so the charge is the level a driver shows), draining faster while
  motors run (with a small sag under load) and charging on the charger's contacts: a robot
  picked up or lying down there is off them (no IS_ON_CHARGER, no IS_CHARGING, no charge)
  until :meth:`put_down` stands it on its treads in the same spot.
* **Cliff sensor**: one, under the front, as the protocol documents, reading
  about ``CLIFF_GROUND_RAW`` over the table and about ``CLIFF_DROP_RAW`` over the
  edge (``World.cliff_at``); RobotState's four ``cliff_data_raw`` values all carry
  its reading (a guess: what a real robot puts in the other three is not
  documented). With stop on cliff (on at power-up, EnableStopOnCliff switches it)
  the wheels stop when the sensor sees the edge appear while the robot drives
  forwards, once, as Anki's firmware does: while it still sees the edge, a new
  forward drive is not stopped again. Backwards nothing sees the edge, and the
  robot falls off the table once its centre is over it, as it does without stop
  on cliff.
* **Animation stream**: OutputAudio/OutputSilence, DisplayImage, AnimHead,
  AnimLift, AnimBody, AnimBackpackLights, RecordHeading, TurnToRecordedHeading,
  StartAnimation and EndAnimation go through one queue that the robot plays at
  30 frames per second as Anki's firmware does: each frame plays one audio message
  and what follows it up to the next one (audio paces the display); a frame that
  starts with anything else clears the queue; playback starts once 7 audio
  messages wait (sim.animation). IS_ANIM_BUFFER_FULL is set while more than
  ``anim_buffer_full_bytes`` wait; a message that would take it beyond
  ``anim_buffer_max_bytes`` clears the whole queue, as the firmware does
  (``anim_overflows``). Nothing of the
  stream plays before EnableAnimationState (counted in ``unplayable``), which also
  starts the AnimationState events, one per tick.
* **Objects**: three light cubes and the charger advertise ObjectAvailable
  while not connected; ObjectConnect (Anki's SetPropSlot) puts one in a radio slot (0..3,
  its object id), or empties a slot (factory id 0), as the body firmware does.
  The robot keeps the slot of an object that goes silent and connects it again by itself
  when it is heard; only objects without a slot advertise.
  :meth:`RobotModel.set_object_in_range` takes one out of radio range (it stops
  advertising, its connection drops with ObjectConnectionState ``connected``
  false and its accelerometer stream ends, one given a slot meanwhile is not heard) and
  back. StreamObjectAccel streams a cube's accelerometer; the charger has none (ignored).
* **NV storage**: an in-memory store, pre-filled with a camera calibration
  (:data:`CAMERA_CALIB_FORMAT`).

Conventions chosen where the protocol notes are silent (documented guesses):

* ``SetOrigin.unknown5`` is read as an f32 heading (the default 0x80000000 is
  -0.0); a non-finite value counts as 0.
* ``curr_path_segment`` is the index of the segment being followed and 0xFF
  (-1 as the firmware's int8) when no path runs.
* ``AnimBody.unknown`` is a turn radius in mm: +-32767 (and -32768) mean
  straight, 0 turns in place, other values drive an arc (positive: to the left).
  In place the speed is the body's rate in deg/s (positive: to the left), else
  the centre's speed in mm/s: so Anki's engine builds the message from an
  animation's body keyframe, and so its published robot firmware (an older
  revision) reads it; whether the last firmware converts from degrees is not
  known.
* Point-turn path segments take their speed and accelerations as the body's
  rad/s and rad/s^2, although pycozmo names them mm/s, and their bool (pycozmo's
  ``unknown``) as "the shorter way round"; without it they turn the way the
  speed's sign says (positive: counter-clockwise), the long way if need be. That
  is how Anki's robot firmware reads the message, as its published source shows
  (the path follower's point turn takes a maximum angular velocity, angular
  accelerations and a use-the-shortest-direction flag from these fields).
* ``NvStorageOp.length`` is the entry's total size for writes (a write shorter
  than ``length`` is a part; parts are appended until ``length`` bytes arrived,
  answered NV_MORE until then) and the most bytes wanted for reads (<= 0: all).
  Reads answer with parts of at most ``NV_CHUNK_BYTES``: NV_MORE for all but
  the last, NV_OKAY for the last. ``NvStorageOpResult.length`` is the entry's
  total size.
* ``AnimationState.num_anim_bytes_played`` counts whole packets (type, length,
  id and body) of the animation stream, ``tag`` is the id of the animation
  playing, ``enabled_anim_tracks`` is 0xFF, ``client_drop_count`` 0. As in Anki's
  firmware, ``num_audio_frames_played`` counts the audio messages and EndAnimations
  played, a cleared queue's (AbortAnimation, an overflow, a frame out of order) as
  played too, and both counters start again at EnableAnimationState.
* Cube accelerations (ObjectMoved, ObjectAccel) are the cube accelerometer's raw
  counts, 64 to 1 g (Anki's firmware), and ``ObjectPowerLevel.battery_level`` is in
  hundredths of a volt (Anki's body firmware).
* TurnInPlace, SetHeadAngle and SetLiftHeight are acknowledged (AcknowledgeAction)
  when taken, as Anki's engine expects ("when the command is received by the robot").
  TurnInPlace's angle is the heading to reach, as in Anki's firmware: ``is_absolute``
  is its "use the shortest direction", else the speed's sign gives the direction and
  ``unknown4``/``unknown5`` (a u16) the number of half turns.
* Status flags never set: IS_CARRYING_BLOCK, IS_PICKING_OR_PLACING (no carrying
  model), IS_BODY_ACC_MODE, IS_ANIMATING_IDLE and IS_CHARGER_OOS.
* SyncTime before Enable sets the clock but starts no stream (the notes: SyncTime
  "requires Enable"); BodyInfo answers the first Enable of a connection. Motion
  commands before Enable are ignored ("Enable powers the body"), and so is
  EnableAnimationState (it "requires Enable"): the stream plays only after both.
* A new connection, and a lost one, leave the motors on their last command (a
  drive goes on; an animation's treads stop with its stream) unless
  ``ModelConfig.stop_motors_on_link_end``; the cubes' radio links are dropped
  unless ``ModelConfig.keep_object_links``. Any datagram keeps the
  connection alive (a client silent for ``RobotConfig.peer_timeout`` is dropped),
  and the robot side of the reliable layer is the driver's own Session.
* Objects advertise (ObjectAvailable) once a second each while not connected;
  ObjectPowerLevel comes every 10 s. The camera calibration entry's layout is
  ``CAMERA_CALIB_FORMAT``.
* A calibrating motor drives at 35 % of its top speed (the firmware drives it at
  about a third of full power; how fast that is, is not documented), and only the
  connection's first SyncTime starts a calibration.
* Non-finite or absurd numbers in commands are read as 0 (or "no change"); path
  segments carrying them are ignored.
"""


from __future__ import annotations

import logging
import math
from collections import Counter, deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import numpy as np

from ..protocol import messages as msgs
from ..protocol.nvstorage import (  # the entry's layout is the protocol's; re-exported
    CAMERA_CALIB_FORMAT,
    CAMERA_CALIB_NUM_DISTORTION,
    CAMERA_CALIB_SIZE,
    CameraCalibration,
    decode_camera_calibration,
    encode_camera_calibration,
)
from ..protocol.status import RobotStatusFlag
from .accessories import CHARGER_FACTORY_ID, CUBE_FACTORY_IDS, Accessories
from .animation import AnimationPlayer
from .body import (
    BATTERY_EMPTY_V,
    BATTERY_FULL_V,
    CLIFF_DROP_RAW,
    CLIFF_GROUND_RAW,
    CLIFF_SENSOR_OFFSETS_MM,
    CLIFF_THRESHOLD_RAW,
    GRAVITY_MMPS2,
    Body,
)
from .camera import CameraControl, CameraSettings
from .firmware import (
    AUDIO_FRAMES_PER_SECOND,
    AUDIO_SAMPLES_PER_FRAME,
    FIRMWARE_VERSION,
    Firmware,
    ModelConfig,
    amount,
)
from .motors import (
    DEFAULT_WHEEL_ACCEL_MMPS2,
    HEAD_MAX_RAD,
    HEAD_MIN_RAD,
    LIFT_ARM_MM,
    LIFT_MAX_MM,
    LIFT_MIN_MM,
    LIFT_PIVOT_MM,
    MAX_WHEEL_SPEED_MMPS,
    TRACK_WIDTH_MM,
    lift_angle_to_height,
    lift_height_to_angle,
    wrap_angle,
)
from .nvstorage import NV_CHUNK_BYTES, NvStorage, default_camera_calibration
from .path import PathFollower

__all__ = [
    "RobotModel",
    "ModelConfig",
    "StatusFlag",
    "CameraSettings",
    "CameraCalibration",
    "CAMERA_CALIB_FORMAT",
    "CAMERA_CALIB_SIZE",
    "CAMERA_CALIB_NUM_DISTORTION",
    "encode_camera_calibration",
    "decode_camera_calibration",
    "default_camera_calibration",
    "NV_CHUNK_BYTES",
    "TRACK_WIDTH_MM",
    "MAX_WHEEL_SPEED_MMPS",
    "DEFAULT_WHEEL_ACCEL_MMPS2",
    "HEAD_MIN_RAD",
    "HEAD_MAX_RAD",
    "LIFT_MIN_MM",
    "LIFT_MAX_MM",
    "LIFT_ARM_MM",
    "LIFT_PIVOT_MM",
    "GRAVITY_MMPS2",
    "BATTERY_EMPTY_V",
    "BATTERY_FULL_V",
    "CLIFF_GROUND_RAW",
    "CLIFF_DROP_RAW",
    "CLIFF_THRESHOLD_RAW",
    "CLIFF_SENSOR_OFFSETS_MM",
    "CUBE_FACTORY_IDS",
    "CHARGER_FACTORY_ID",
    "FIRMWARE_VERSION",
    "AUDIO_FRAMES_PER_SECOND",
    "AUDIO_SAMPLES_PER_FRAME",
    "lift_height_to_angle",
    "lift_angle_to_height",
    "wrap_angle",
]

logger = logging.getLogger("cozmo.sim")

#: The bits of RobotState.status (one definition, in the protocol layer).
StatusFlag = RobotStatusFlag


class _Part:
    """An attribute of :class:`RobotModel` that lives in one of its parts (read and write)."""

    __slots__ = ("part", "attr")

    def __init__(self, part: str, attr: Optional[str] = None) -> None:
        self.part = part
        self.attr = attr

    def __set_name__(self, owner: type, name: str) -> None:
        if self.attr is None:
            self.attr = name

    def __get__(self, obj: Any, owner: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.part), self.attr)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(getattr(obj, self.part), self.attr, value)


#: how long after a connection's SyncTime the robot acknowledges it (4 control ticks)
SYNC_TIME_ACK_DELAY_S = 0.02

#: commands that move a motor: taken only once Enable has powered the body
_MOVES = frozenset({"DriveWheels", "TurnInPlace", "TurnInPlaceAtSpeed", "MoveHead", "MoveLift",
                    "SetHeadAngle", "SetLiftHeight", "ExecutePath"})
#: taken only once Enable has powered the body too (the notes: it "requires Enable"); the
#: animation stream plays only after it, so none of the stream plays before Enable either
_NEEDS_ENABLE = _MOVES | {"EnableAnimationState"}


class RobotModel:
    """The robot's body and firmware behaviour, composed of its parts. See the module docstring."""

    # the parts' state, under the names it always had
    x = _Part("body")
    y = _Part("body")
    yaw_u = _Part("body")
    soc = _Part("body")
    on_charger = _Part("body")
    on_floor = _Part("body")
    picked_up = _Part("body")
    falling = _Part("body")
    wheels = _Part("body")
    head = _Part("body")
    lift = _Part("body")
    stop_on_cliff = _Part("body")
    pose_frame_id = _Part("body")
    pose_origin_id = _Part("body")
    recorded_heading = _Part("animation")
    volume = _Part("animation")
    backpack_lights = _Part("animation")
    anim_backpack_colors = _Part("animation")
    framebuffer = _Part("animation")
    display_images_shown = _Part("animation")
    display_errors = _Part("animation")
    audio_frames_played = _Part("animation")
    audio_frames_with_sound = _Part("animation")
    anim_bytes_played = _Part("animation")
    anim_overflows = _Part("animation")
    unplayable = _Part("animation")
    buffer_clears = _Part("animation")
    starvations = _Part("animation")
    current_anim = _Part("animation")
    anim_state_enabled = _Part("animation")
    anim_queue_bytes = _Part("animation", "queue_bytes")
    anim_queue_length = _Part("animation", "queue_length")
    objects = _Part("accessories")
    discovery = _Part("accessories")
    nv_store = _Part("nv", "store")
    camera = _Part("camera_control", "settings")
    head_light = _Part("camera_control")
    t = _Part("fw")
    boot_time = _Part("fw")
    rng = _Part("fw")
    connected = _Part("fw")
    enabled = _Part("fw")
    body_info_sent = _Part("fw")
    streaming = _Part("fw")

    def __init__(self, world: Any = None, config: Optional[ModelConfig] = None,
                 now: float = 0.0) -> None:
        self.config = config or ModelConfig()
        self.world = world if world is not None else _default_world(self.config.seed)
        self.fw = Firmware(self.config, now)
        self.command_counts: Counter = Counter()
        self._commands: Deque[Tuple[float, Any]] = deque(maxlen=self.config.command_log)
        self.body = Body(self.fw, self.world)
        self.path = PathFollower(self.body)
        self.animation = AnimationPlayer(self.body)
        self.accessories = Accessories(self.fw)
        self.nv = NvStorage(self.fw)
        self.camera_control = CameraControl()
        self._handlers: Dict[str, Callable[[Any, float], None]] = {
            "Enable": self._on_Enable, "SyncTime": self._on_SyncTime,
            "StopAllMotors": self._on_StopAllMotors, "ShutdownRobot": self._on_ShutdownRobot}
        for part in (self.body, self.path, self.animation, self.accessories, self.nv,
                     self.camera_control):
            self._handlers.update(part.handlers())
        self.reboots = 0
        self._boot(now)

    # ------------------------------------------------------------------ boot / connection

    def _boot(self, now: float) -> None:
        """Firmware state at power-up: odometry at zero, nothing enabled."""
        self.fw.boot(now)
        self.body.boot()
        self.path.boot()
        self.animation.boot(now)
        self.camera_control.boot()
        self._reset_connection_state(now)

    def _reset_connection_state(self, now: float, boot: bool = True) -> None:
        self.fw.reset_link()
        # Anki's firmware turns stop-on-cliff back on when its link ends (cozmoBot, on the
        # radio's disconnection): a driver must send it again on every connection
        self.body.stop_on_cliff = True
        self.animation.reset_link()
        self.camera_control.reset_link()
        self.accessories.reset_link(now, keep_links=not boot and self.config.keep_object_links)
        self.nv.reset_link()
        self._next_state = now

    def reboot(self, now: float) -> None:
        """Power-cycle the firmware: the body stays where it is, everything else resets."""
        self.advance(now)
        self.fw.out.clear()
        self.fw.timers.clear()
        self._boot(now)
        self.reboots += 1
        logger.info("simulated robot rebooted")

    def on_connected(self, now: float) -> None:
        """A client reset the link: greet it with HardwareInfo and FirmwareSignature."""
        self.advance(now)
        self._link_changes(now, reason="new connection")
        self._reset_connection_state(now, boot=False)
        fw = self.fw
        fw.connected = True
        fw.emit(msgs.HardwareInfo(serial_number_head=self.config.serial_number_head,
                                  unknown1=4, unknown2=0))
        fw.emit(msgs.FirmwareSignature(unknown=0, signature=fw.signature()))

    def on_disconnected(self, now: float) -> None:
        """The client left or went silent: every stream stops (and the motors with
        ``stop_motors_on_link_end``)."""
        self.advance(now)
        self._link_changes(now, reason="disconnected")
        self._reset_connection_state(now, boot=False)
        self.fw.out.clear()

    def firmware_signature(self) -> str:
        return self.fw.signature()

    def _link_changes(self, now: float, reason: str) -> None:
        """A link ends or begins: a calibration under way ends; the motors keep their last
        command unless ``stop_motors_on_link_end`` (an animation's treads stop with the
        animation: see AnimationPlayer.reset_link)."""
        if self.config.stop_motors_on_link_end:
            self._stop_everything(now, reason)
        else:
            self.body.abandon_calibration()

    def _stop_everything(self, now: float, reason: str) -> None:
        if reason != "StopAllMotors":
            self.body.abandon_calibration()
        self.body.halt_base(now, reason)
        self.path.forget()
        self.body.head.stop()
        self.body.lift.stop()

    # ------------------------------------------------------------------ outputs and time

    def pop_outgoing(self) -> List[Any]:
        """Robot->engine messages produced since the last call, in order."""
        return self.fw.pop_outgoing()

    def timestamp_ms(self, now: float) -> int:
        """The robot clock (ms): zeroed at boot, set by SyncTime."""
        return self.fw.timestamp_ms(now)

    def next_tick(self) -> Optional[float]:
        """When :meth:`advance` must run next, or None when nothing is due."""
        fw = self.fw
        times: List[float] = []
        if fw.timers:
            times.append(fw.timers[0][0])
        if self.body.needs_physics():
            times.append(fw.t + self.config.physics_dt)
        if fw.connected and fw.streaming:
            times.append(self._next_state)
        self.accessories.due(times)
        anim = self.animation.due()
        if anim is not None:
            times.append(anim)
        return min(times) if times else None

    def advance(self, now: float) -> None:
        """Run the body up to ``now``: physics substeps, timers, animation, periodic messages."""
        fw = self.fw
        if now < fw.t:
            return
        while True:
            due = fw.timers[0][0] if fw.timers and fw.timers[0][0] <= now else None
            anim_due = self.animation.due()
            if anim_due is not None and anim_due > now:
                anim_due = None
            stop = now
            if due is not None:
                stop = min(stop, due)
            if anim_due is not None:
                stop = min(stop, anim_due)
            self.body.integrate(stop)
            if due is not None and due <= stop:
                fw.run_timer(stop)
                continue
            if anim_due is not None and anim_due <= stop:
                self.animation.tick(stop)
                continue
            if stop >= now:
                break
        self._periodic(now)

    def _periodic(self, now: float) -> None:
        fw = self.fw
        if not fw.connected:
            return
        if fw.streaming and now >= self._next_state:
            period = self.config.state_period
            fw.emit(self.robot_state(now))
            self._next_state += period
            if self._next_state < now + period / 2:
                # late: a catch-up state a fraction of a millisecond later would carry the
                # same robot time, which a client rightly drops as a duplicate; the robot's
                # own tick never does that, so skip the slot
                self._next_state = now + period
        self.accessories.periodic(now)

    # ------------------------------------------------------------------ RobotState

    def status(self) -> int:
        flags = self.body.status()
        if self.animation.current_anim is not None:
            flags |= StatusFlag.IS_ANIMATING
        if self.path.run is not None:
            flags |= StatusFlag.IS_PATHING
        if self.animation.buffer_full:
            flags |= StatusFlag.IS_ANIM_BUFFER_FULL
        return int(flags)

    def robot_state(self, now: float) -> Any:
        fields = self.body.sensor_fields()
        index = self.path.segment_index
        return msgs.RobotState(timestamp_ms=self.fw.timestamp_ms(now), status=self.status(),
                               curr_path_segment=min(index, 254) if index is not None else 0xFF,
                               **fields)

    def battery_voltage(self) -> float:
        """Battery voltage without noise (V)."""
        return self.body.battery_voltage()

    def reported_pose(self) -> Tuple[float, float, float]:
        """Odometry pose (x mm, y mm, yaw rad) in the frame set by SetOrigin."""
        return self.body.reported_pose()

    def cliff_readings(self) -> List[bool]:
        """Which cliff sensors see a drop now (one: the front sensor)."""
        return self.body.cliff_readings()

    def imu_rates(self) -> Tuple[float, float, float]:
        """Gyro rates (rad/s) as the camera's ImageImuData reports them."""
        return self.body.imu_rates()

    # ------------------------------------------------------------------ commands

    def handle(self, message: Any, now: float) -> None:
        """Act on one engine->robot message received at ``now``."""
        self.advance(now)
        name = message.NAME
        self.command_counts[name] += 1
        self._commands.append((now, message))
        handler = self._handlers.get(name)
        if handler is None:
            logger.debug("no behaviour for %s", name)
            return
        if name in _NEEDS_ENABLE and not self.fw.enabled:
            logger.info("%s before Enable: the body is not powered, %s", name,
                        "nothing moves" if name in _MOVES else "no animation plays")
            return
        handler(message, now)

    def commands(self) -> List[Tuple[float, Any]]:
        """The most recent commands received, as (time, message)."""
        return list(self._commands)

    def _on_Enable(self, m: Any, now: float) -> None:
        fw = self.fw
        fw.enabled = True
        if not fw.body_info_sent:
            fw.body_info_sent = True
            cfg = self.config
            fw.emit(msgs.BodyInfo(serial_number=cfg.body_serial_number,
                                  body_hw_version=cfg.body_hw_version, body_color=cfg.body_color))

    def _on_SyncTime(self, m: Any, now: float) -> None:
        fw = self.fw
        fw.sync_time(int(m.timestamp_ms), now)
        if not fw.enabled:
            logger.info("SyncTime before Enable: clock set, streams stay off")
            return
        if not fw.streaming:
            fw.streaming = True
            self._next_state = now
            self.accessories.start_streams(now)
            if self.config.calibrate_at_connection:
                self.body.calibrate(now, head=True, lift=True)
            # Anki's firmware acknowledges SyncTime once a connection, a few 5 ms control
            # ticks later (messages.cpp Update: more than 3 ticks and the gyro's bias known);
            # which message id it has is not published: 0xc2 here (see client.link.SYNC_TIME_ACK)
            connection = fw.connection
            fw.at(now + SYNC_TIME_ACK_DELAY_S,
                  lambda t: fw.emit(msgs.RobotDelocalized())
                  if fw.streaming and fw.connection == connection else None)

    def _on_StopAllMotors(self, m: Any, now: float) -> None:
        self._stop_everything(now, reason="StopAllMotors")

    def _on_ShutdownRobot(self, m: Any, now: float) -> None:
        logger.info("ShutdownRobot received (the simulator keeps running)")

    # ------------------------------------------------------------------ scripted events

    def pick_up(self, now: float) -> None:
        """Someone lifts the robot: wheels stop, a path is interrupted."""
        self.advance(now)
        self.body.pick_up(now)

    def put_down(self, now: float, pose: Optional[Tuple[float, float, float]] = None) -> None:
        """Set the robot down, optionally at a new true world pose (odometry does not see it)."""
        self.advance(now)
        self.body.put_down(now, pose)

    def lay(self, now: float, side: str) -> None:
        """Set the robot down on its ``side``: "back", "face", "left" or "right" (see
        :meth:`Body.lay`); :meth:`put_down` stands it up again."""
        self.advance(now)
        self.body.lay(now, side)

    def fall(self, now: float, duration: float = 0.4, impact: float = 600.0) -> None:
        """The robot falls for ``duration`` seconds: FallingStarted ... FallingStopped, with
        IS_FALLING and, as Anki's firmware reports a falling robot, IS_PICKED_UP; ``impact``:
        FallingStopped's impact intensity. Each a finite number >= 0, else ValueError."""
        duration = amount("fall", "duration", duration, " (s)")
        impact = amount("fall", "impact", impact)
        self.advance(now)
        self.body.halt_base(now, "falling")
        self.body.start_fall(now, duration, impact)

    def poke(self, now: float) -> None:
        self.advance(now)
        self.fw.emit(msgs.RobotPoked())

    def press_button(self, now: float, duration: float = 0.2) -> None:
        """Backpack button: ButtonPressed(True), then ButtonPressed(False) after ``duration``
        seconds (a finite number >= 0, else ValueError)."""
        duration = amount("press_button", "duration", duration, " (s)")
        self.advance(now)
        fw = self.fw
        fw.emit(msgs.ButtonPressed(pressed=True))
        fw.at(now + duration, lambda t: fw.emit(msgs.ButtonPressed(pressed=False)))

    def delocalize(self, now: float) -> None:
        self.advance(now)
        self.fw.emit(msgs.RobotDelocalized())

    def set_on_charger(self, on: bool, now: float, move: bool = True) -> None:
        """Put the robot on the charger (at the world's charger pose when ``move``) or take it off."""
        self.advance(now)
        self.body.set_on_charger(on, now, move)

    def hold_treads(self, now: float, held: bool = True) -> None:
        """Hold the robot where it stands (its treads stall, driven on) or let it go; see
        :meth:`Body.hold_treads`."""
        self.advance(now)
        self.body.hold_treads(held)

    def teleport(self, now: float, x: float, y: float, yaw: float) -> None:
        """Move the true pose without telling odometry (a hand-placement)."""
        self.advance(now)
        self.body.teleport(x, y, yaw)

    def tap_cube(self, n: int, now: float, taps: int = 1, intensity: int = 79,
                 jolt: bool = False) -> bool:
        """ObjectTapped from cube ``n`` (1..3) of ``intensity`` (tap_pos - tap_neg); ``jolt``:
        with the move and stop a tap often causes. False if it is not connected."""
        self.advance(now)
        return self.accessories.tap(n, now, taps, intensity, jolt)

    def move_cube(self, n: int, now: float, accel: Tuple[float, float, float] = (2.0, -1.0, 64.0),
                  axis: int = 5) -> bool:
        self.advance(now)
        return self.accessories.move(n, now, accel, axis)

    def stop_cube(self, n: int, now: float) -> bool:
        self.advance(now)
        return self.accessories.stop(n, now)

    def set_cube_up_axis(self, n: int, axis: int, now: float) -> bool:
        self.advance(now)
        return self.accessories.set_up_axis(n, axis, now)

    def set_cube_battery(self, n: int, level: int, now: float) -> None:
        self.advance(now)
        self.accessories.set_battery(n, level, now)

    def set_object_in_range(self, n: int, in_range: bool, now: float) -> None:
        """Take cube ``n`` (1..3; 0: the charger) out of radio range or bring it back.

        Out of range it stops advertising and a connection to it drops (the robot reports
        ObjectConnectionState with ``connected`` false, and keeps its slot); back in range
        it connects again at once in the slot it holds, or advertises if it holds none."""
        self.advance(now)
        self.accessories.set_in_range(n, in_range, now)

    # ------------------------------------------------------------------ ground truth

    def true_pose(self) -> Tuple[float, float, float]:
        """World pose (x mm, y mm, yaw rad in [-pi, pi))."""
        return self.body.true_pose()

    @property
    def head_angle(self) -> float:
        return self.body.head.pos

    @property
    def lift_height(self) -> float:
        return self.body.lift_height

    @property
    def is_moving(self) -> bool:
        return self.body.needs_physics()

    def display_history(self) -> List[np.ndarray]:
        return self.animation.display_history()

    def audio_pcm(self) -> np.ndarray:
        """Every audio frame played (silence as zeros), oldest first, int16."""
        return self.animation.audio_pcm()

    def lights(self) -> Dict[str, Any]:
        """Light colours: backpack LightStates, animation colours, head light, cube lights."""
        return {"backpack": dict(self.animation.backpack_lights),
                "anim_backpack": list(self.animation.anim_backpack_colors),
                "head_light": self.camera_control.head_light,
                **self.accessories.lights()}

    def object_ids(self) -> Dict[int, Optional[int]]:
        """Cube number (1..3, 0 for the charger) -> object id, or None if not connected."""
        return self.accessories.object_ids()

    def object_states(self) -> Dict[int, Dict[str, Any]]:
        """Cube number (1..3, 0 for the charger) -> factory id, object id, in range, light
        states, rotation period (frames), accelerometer stream, battery level, up axis."""
        return self.accessories.object_states()


def _default_world(seed: int) -> Any:
    try:
        from .world import World
    except ImportError:  # pragma: no cover - the renderer is part of the package
        return _FlatTable()
    return World(seed)


class _FlatTable:
    """A stand-in world: a 1200 mm square table, no renderer."""

    charger_pose = (-210.0, 0.0, 0.0)

    @staticmethod
    def cliff_at(x_mm: float, y_mm: float) -> bool:
        return abs(x_mm) > 600.0 or abs(y_mm) > 600.0

    @staticmethod
    def render(x_mm, y_mm, yaw_rad, head_angle_rad, width=320, height=240, color=True, gain=1.0,
               exposure_ms=None, lift_height_mm=None, **_):
        shade = int(96 + 60 * math.sin(yaw_rad) + 100 * head_angle_rad) % 256
        shape = (height, width, 3) if color else (height, width)
        img = np.full(shape, shade, dtype=np.uint8)
        return np.clip(img.astype(np.float32) * gain, 0, 255).astype(np.uint8)
