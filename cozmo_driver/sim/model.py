"""The simulated Cozmo's body: a pure model ticked by injected time.

:class:`RobotModel` knows nothing about sockets, threads or the clock. Its inputs
are engine messages (:meth:`RobotModel.handle`), scripted events
(:meth:`RobotModel.pick_up`, :meth:`RobotModel.tap_cube`, ...) and time
(:meth:`RobotModel.advance`); its outputs are robot->engine messages
(:meth:`RobotModel.pop_outgoing`), the instant it next needs to run
(:meth:`RobotModel.next_tick`) and ground truth (:meth:`RobotModel.true_pose`,
:attr:`RobotModel.framebuffer`, ...). Every ``now`` is in seconds on any
monotonic origin. Randomness (sensor noise, rssi) comes from one seeded
generator, so the same inputs give the same outputs.

What it models
--------------
* **Base**: differential drive, track 45 mm, wheel speed limit 200 mm/s, each
  wheel ramping to its target at its own acceleration (a non-positive
  acceleration means the motor's own, ``DEFAULT_WHEEL_ACCEL_MMPS2``). The pose is
  integrated in substeps of at most ``physics_dt`` (10 ms), however far
  :meth:`advance` jumps. TurnInPlace (absolute or relative, with tolerance) and
  path following (lines, arcs, point turns) are controllers that set the wheel
  speeds, so wheel speeds, gyro and pose always agree.
* **Head and lift**: position-controlled axes with limits (head -25..44.5 deg,
  lift 32..92 mm through a 66 mm arm on a pivot 45 mm high, so the lift moves in
  arm angle and its speeds are rad/s). Moves honour max speed, acceleration and
  ``duration_sec``; velocity moves (MoveHead/MoveLift) stop at the limits.
* **Pose frames**: the true pose lives in the world frame of
  :class:`cozmo_driver.sim.world.World` (table centre, x forward). The reported
  pose is odometry: it starts at (0, 0, 0) on boot and SetOrigin re-anchors it
  (the robot's pose *becomes* ``(pose_x_mm, pose_y_mm, angle)`` in frame
  ``pose_frame_id``/``pose_origin_id``). Moving the robot by hand
  (:meth:`put_down` with a new position) changes the true pose but not odometry.
* **IMU**: gyro (rad/s, yaw rate from the wheels plus seeded noise) and
  accelerometer (mm/s^2: forward and centripetal acceleration plus gravity,
  about 9810 on z when flat; near zero while falling).
* **Battery**: a state of charge turned into 3.5..4.2 V, draining faster while
  motors run (with a small sag under load) and charging on the charger.
* **Cliff sensors**: four (front-left, front-right, back-left, back-right)
  reading about ``CLIFF_GROUND_RAW`` over the table and about ``CLIFF_DROP_RAW``
  over the edge (``World.cliff_at``). With EnableStopOnCliff the wheels stop when
  a sensor in the direction of travel sees the edge; without it the robot drives
  off the table and falls.
* **Animation stream**: OutputAudio/OutputSilence, DisplayImage, AnimHead,
  AnimLift, AnimBody, AnimBackpackLights, RecordHeading, TurnToRecordedHeading,
  StartAnimation and EndAnimation go through one queue that the robot plays at
  30 frames per second: each tick plays messages up to and including one audio
  message (audio paces the display). IS_ANIM_BUFFER_FULL is set while more than
  ``anim_buffer_full_bytes`` wait; beyond ``anim_buffer_max_bytes`` messages are
  dropped and counted in ``AnimationState.client_drop_count``.
* **Objects**: three light cubes and the charger advertise ObjectAvailable
  while not connected; ObjectConnect gives them per-connection object ids.
  :meth:`RobotModel.set_object_in_range` takes one out of radio range (it stops
  advertising, its connection drops with ObjectConnectionState ``connected``
  false, connecting fails after ``OBJECT_CONNECT_FAIL_S``) and back.
* **NV storage**: an in-memory store, pre-filled with a camera calibration
  (:data:`CAMERA_CALIB_FORMAT`).

Conventions chosen where the protocol notes are silent (documented guesses):

* ``SetOrigin.unknown5`` is read as an f32 heading (the default 0x80000000 is
  -0.0); a non-finite value counts as 0.
* ``curr_path_segment`` is the index of the segment being followed and 0xFF
  (-1 as the firmware's int8) when no path runs.
* ``AnimBody.unknown`` is a turn radius in mm: +-32767 (and -32768) mean
  straight, 0 turns in place, other values drive an arc (positive: to the left).
* Point-turn path segments take their speed and accelerations as wheel speeds
  (mm/s, mm/s^2), as their field names say.
* ``NvStorageOp.length`` is the entry's total size for writes (a write shorter
  than ``length`` is a part; parts are appended until ``length`` bytes arrived,
  answered NV_MORE until then) and the most bytes wanted for reads (<= 0: all).
  Reads answer with parts of at most ``NV_CHUNK_BYTES``: NV_MORE for all but
  the last, NV_OKAY for the last. ``NvStorageOpResult.length`` is the entry's
  total size.
* ``AnimationState.num_anim_bytes_played`` counts whole packets (type, length,
  id and body) of the animation stream, ``tag`` is the id of the animation
  playing, ``enabled_anim_tracks`` is 0xFF.
* Cube accelerations (ObjectMoved, ObjectAccel) are in mm/s^2 like RobotState's,
  and ``ObjectPowerLevel.battery_level`` is a percentage.
* TurnInPlace is acknowledged (AcknowledgeAction) when it completes; an
  interrupted turn is not acknowledged. SetHeadAngle and SetLiftHeight are
  acknowledged when accepted.
* Status flags never set: IS_CARRYING_BLOCK, IS_PICKING_OR_PLACING (no carrying
  model), IS_BODY_ACC_MODE, IS_ANIMATING_IDLE and IS_CHARGER_OOS.
* SyncTime before Enable sets the clock but starts no stream (the notes: SyncTime
  "requires Enable"); BodyInfo answers the first Enable of a connection.
* Non-finite or absurd numbers in commands are read as 0 (or "no change"); path
  segments carrying them are ignored.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import math
import random
import struct
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import numpy as np

from .. import robot_geometry as geometry
from ..protocol import messages as msgs
from ..protocol.errors import RemoteProtocolError
from ..protocol.nvstorage import (  # the entry's layout is the protocol's; re-exported
    CAMERA_CALIB_FORMAT,
    CAMERA_CALIB_NUM_DISTORTION,
    CAMERA_CALIB_SIZE,
    CameraCalibration,
    decode_camera_calibration,
    encode_camera_calibration,
)
from ..protocol.status import RobotStatusFlag

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

# ----------------------------------------------------------------------------- constants

TRACK_WIDTH_MM = geometry.TRACK_WIDTH_M * 1000.0
MAX_WHEEL_SPEED_MMPS = geometry.MAX_WHEEL_SPEED_MPS * 1000.0
#: what a non-positive wheel acceleration in DriveWheels stands for
DEFAULT_WHEEL_ACCEL_MMPS2 = 1000.0
HEAD_MIN_RAD = geometry.HEAD_MIN_ANGLE_RAD
HEAD_MAX_RAD = geometry.HEAD_MAX_ANGLE_RAD
HEAD_MAX_SPEED_RADPS = geometry.HEAD_MAX_SPEED_RADPS
LIFT_MIN_MM = geometry.LIFT_MIN_HEIGHT_M * 1000.0
LIFT_MAX_MM = geometry.LIFT_MAX_HEIGHT_M * 1000.0
LIFT_ARM_MM = geometry.LIFT_ARM_LENGTH_M * 1000.0
LIFT_PIVOT_MM = geometry.LIFT_PIVOT_HEIGHT_M * 1000.0
LIFT_MAX_SPEED_RADPS = geometry.LIFT_MAX_SPEED_RADPS
DEFAULT_AXIS_ACCEL_RADPS2 = 20.0
GRAVITY_MMPS2 = 9810.0
BATTERY_EMPTY_V = 3.5
BATTERY_FULL_V = 4.2
CLIFF_GROUND_RAW = 450
CLIFF_DROP_RAW = 25
#: a cliff sensor reading below this is a drop (CLIFF_DETECTED)
CLIFF_THRESHOLD_RAW = 150
#: (forward, left) in mm from the robot's origin: front-left, front-right, back-left, back-right
CLIFF_SENSOR_OFFSETS_MM: Tuple[Tuple[float, float], ...] = ((32.0, 12.0), (32.0, -12.0),
                                                           (-22.0, 12.0), (-22.0, -12.0))
BACKPACK_TOUCH_RAW = 812
FIRMWARE_VERSION = 2381
AUDIO_FRAMES_PER_SECOND = 30
AUDIO_SAMPLES_PER_FRAME = 744
#: the robot's three light cubes, then the charger (factory ids as advertised)
CUBE_FACTORY_IDS: Tuple[int, int, int] = (0xC0B10001, 0xC0B10002, 0xC0B10003)
CHARGER_FACTORY_ID = 0xC4A20001
#: an ObjectConnect to an object out of radio range is answered "not connected" this much later (s)
OBJECT_CONNECT_FAIL_S = 0.5
#: largest data part of one NvStorageOpResult (it must fit one frame)
NV_CHUNK_BYTES = 1000
_DISTANCE_OFF_CHARGER_MM = 30.0
_ANIM_STREAM = frozenset((
    "OutputAudio", "OutputSilence", "DisplayImage", "AnimHead", "AnimLift", "AnimBody",
    "AnimBackpackLights", "RecordHeading", "TurnToRecordedHeading", "StartAnimation",
    "EndAnimation"))

_ObjectType = msgs.ENUMS["ObjectType"]
_NvOp = msgs.ENUMS["NvOperation"]
_NvResult = msgs.ENUMS["NvResult"]
_NvTag = msgs.ENUMS["NvEntryTag"]
_PathEvent = msgs.ENUMS["PathEventType"]
_UpAxis = msgs.ENUMS["UpAxis"]
_MotorID = msgs.ENUMS["MotorID"]
_LightState = msgs.STRUCTS["LightState"]


#: The bits of RobotState.status (one definition, in the protocol layer).
StatusFlag = RobotStatusFlag


def _num(value: Any, default: float = 0.0, limit: float = 1e6) -> float:
    """A field value as a finite float within +-limit (NaN and infinities become ``default``)."""
    x = float(value)
    if not math.isfinite(x):
        return default
    return max(-limit, min(limit, x))


def wrap_angle(a: float) -> float:
    """The angle in [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def lift_height_to_angle(height_mm: float) -> float:
    s = (min(max(height_mm, LIFT_MIN_MM), LIFT_MAX_MM) - LIFT_PIVOT_MM) / LIFT_ARM_MM
    return math.asin(max(-1.0, min(1.0, s)))


def lift_angle_to_height(angle_rad: float) -> float:
    return LIFT_PIVOT_MM + LIFT_ARM_MM * math.sin(angle_rad)


LIFT_MIN_RAD = lift_height_to_angle(LIFT_MIN_MM)
LIFT_MAX_RAD = lift_height_to_angle(LIFT_MAX_MM)


# ----------------------------------------------------------------------------- camera calibration

def default_camera_calibration() -> CameraCalibration:
    """The calibration that matches :mod:`cozmo_driver.sim.world`'s renderer at QVGA."""
    try:
        from .world import camera_intrinsics
        fx, fy, cx, cy = camera_intrinsics(320, 240)
    except ImportError:  # the renderer is optional for the model
        fx = fy = 160.0 / math.tan(math.radians(29.0))
        cx, cy = 160.0, 120.0
    return CameraCalibration(fx, fy, cx, cy, 0.0, 240, 320)


# ----------------------------------------------------------------------------- configuration

@dataclass
class ModelConfig:
    """Tunables of the model; times in seconds."""

    seed: int = 0
    #: world pose (x mm, y mm, yaw rad) at boot; None: the table centre
    start_pose: Optional[Tuple[float, float, float]] = None
    start_on_charger: bool = False
    physics_dt: float = 0.01
    state_period: float = 0.030
    anim_period: float = 1.0 / AUDIO_FRAMES_PER_SECOND
    object_available_period: float = 1.0
    object_accel_period: float = 0.030
    power_level_period: float = 10.0
    anim_buffer_full_bytes: int = 12_000
    anim_buffer_max_bytes: int = 48_000
    #: ground-truth audio kept, in samples (oldest dropped first)
    audio_history_samples: int = AUDIO_SAMPLES_PER_FRAME * AUDIO_FRAMES_PER_SECOND * 60
    display_history: int = 64
    command_log: int = 20_000
    battery_soc: float = 0.8
    #: state-of-charge change per second
    battery_drain_idle: float = 1.0 / 7200.0
    battery_drain_moving: float = 1.0 / 2400.0
    battery_charge: float = 1.0 / 1800.0
    battery_sag_v: float = 0.04
    noise: bool = True
    gyro_noise_radps: float = 0.002
    accel_noise_mmps2: float = 15.0
    battery_noise_v: float = 0.001
    cliff_noise_raw: float = 4.0
    serial_number_head: int = 0x45A1C0DE
    body_serial_number: int = 0x0B0D1E55
    body_hw_version: int = 5
    body_color: int = 2  # BodyColor.WHITE_v15
    firmware_build: str = "DEVELOPER"

    def __post_init__(self) -> None:
        for name in ("physics_dt", "state_period", "anim_period", "object_available_period",
                     "object_accel_period", "power_level_period"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")


@dataclass
class CameraSettings:
    """What the engine asked of the camera (the robot front-end streams it)."""

    mode: int = 0               # ImageSendMode: Off, Stream, SingleShot
    resolution: int = 4         # ImageResolution (QVGA)
    color: bool = False
    gain: float = 1.0
    exposure_ms: Optional[float] = None
    auto_exposure: bool = True
    head_light: bool = False
    #: bumped on every change (the front-end restarts its schedule)
    generation: int = 0


# ----------------------------------------------------------------------------- motors

class _Axis:
    """One position/velocity controlled joint (head angle or lift arm angle), rad."""

    __slots__ = ("pos", "vel", "lo", "hi", "vcap", "mode", "target", "vmax", "accel", "cmd_vel")

    def __init__(self, pos: float, lo: float, hi: float, vcap: float) -> None:
        self.pos = pos
        self.vel = 0.0
        self.lo = lo
        self.hi = hi
        self.vcap = vcap
        self.mode = "idle"      # idle | velocity | position
        self.target = pos
        self.vmax = vcap
        self.accel = DEFAULT_AXIS_ACCEL_RADPS2
        self.cmd_vel = 0.0

    @property
    def moving(self) -> bool:
        if self.mode == "position":
            return True
        if self.mode == "velocity":
            return self.vel != 0.0
        return False

    def move_velocity(self, speed: float) -> None:
        speed = max(-self.vcap, min(self.vcap, speed))
        self.mode = "velocity" if speed else "idle"
        self.cmd_vel = speed
        self.vel = speed

    def move_to(self, target: float, max_speed: float, accel: float, duration: float) -> None:
        target = max(self.lo, min(self.hi, target))
        accel = accel if accel > 0 else DEFAULT_AXIS_ACCEL_RADPS2
        vmax = min(max_speed, self.vcap) if max_speed > 0 else self.vcap
        distance = abs(target - self.pos)
        if duration > 0 and distance > 0:
            # trapezoid covering `distance` in `duration`: v = (aT - sqrt(a^2T^2 - 4ad)) / 2
            disc = (accel * duration) ** 2 - 4.0 * accel * distance
            if disc >= 0:
                vmax = min(vmax, max(1e-3, (accel * duration - math.sqrt(disc)) / 2.0))
            else:  # not reachable at this acceleration: a triangle profile takes longer
                accel = max(accel, 4.0 * distance / duration ** 2)
                vmax = min(vmax, 2.0 * distance / duration)
        self.mode = "position"
        self.target = target
        self.vmax = vmax
        self.accel = accel
        if self.vel and (target - self.pos) * self.vel < 0:
            self.vel = 0.0

    def stop(self) -> None:
        self.mode = "idle"
        self.vel = 0.0
        self.cmd_vel = 0.0

    def step(self, dt: float) -> None:
        mode = self.mode
        if mode == "velocity":
            pos = self.pos + self.cmd_vel * dt
            if pos <= self.lo or pos >= self.hi:
                pos = max(self.lo, min(self.hi, pos))
                self.vel = 0.0
            else:
                self.vel = self.cmd_vel
            self.pos = pos
        elif mode == "position":
            d = self.target - self.pos
            a = self.accel
            if abs(d) < 1e-5 and abs(self.vel) <= a * dt:
                self.pos = self.target
                self.vel = 0.0
                self.mode = "idle"
                return
            direction = 1.0 if d > 0 else -1.0
            vdes = direction * min(self.vmax, math.sqrt(2.0 * a * abs(d)))
            v = self.vel
            v = min(vdes, v + a * dt) if v < vdes else max(vdes, v - a * dt)
            pos = self.pos + v * dt
            if (self.target - pos) * direction <= 0:
                pos = self.target
                v = 0.0
                self.mode = "idle"
            self.pos = pos
            self.vel = v


class _Wheel:
    __slots__ = ("speed", "target", "accel")

    def __init__(self) -> None:
        self.speed = 0.0
        self.target = 0.0
        self.accel = DEFAULT_WHEEL_ACCEL_MMPS2

    def command(self, target: float, accel: float) -> None:
        self.target = max(-MAX_WHEEL_SPEED_MMPS, min(MAX_WHEEL_SPEED_MMPS, target))
        self.accel = accel if accel > 0 else DEFAULT_WHEEL_ACCEL_MMPS2

    def halt(self) -> None:
        self.speed = self.target = 0.0

    def step(self, dt: float) -> None:
        s, t = self.speed, self.target
        if s != t:
            dv = self.accel * dt
            self.speed = min(t, s + dv) if s < t else max(t, s - dv)


class _Turn:
    """A turn in place to an unwrapped heading target (TurnInPlace, point turns)."""

    __slots__ = ("target", "wmax", "alpha", "tol", "w", "action_id")

    def __init__(self, target: float, wmax: float, alpha: float, tol: float,
                 action_id: Optional[int]) -> None:
        self.target = target
        self.wmax = min(wmax, 2.0 * MAX_WHEEL_SPEED_MMPS / TRACK_WIDTH_MM)
        self.alpha = alpha
        self.tol = max(tol, math.radians(0.25))
        self.w = 0.0
        self.action_id = action_id

    def step(self, yaw_u: float, dt: float) -> Optional[float]:
        """The yaw rate to command now, or None when the turn is complete."""
        rem = self.target - yaw_u
        if abs(rem) <= self.tol:
            return None
        wdes = math.copysign(min(self.wmax, math.sqrt(2.0 * self.alpha * abs(rem))), rem)
        w = self.w
        dw = self.alpha * dt
        w = min(wdes, w + dw) if w < wdes else max(wdes, w - dw)
        if w * rem > 0 and abs(w * dt) > abs(rem):  # never overshoot within a step
            w = rem / dt
        self.w = w
        return w


# ----------------------------------------------------------------------------- paths

@dataclass
class _Segment:
    kind: str                    # line | arc | turn
    msg: Any                     # the AppendPathSeg* message as received (engine frame)


@dataclass
class _PathRun:
    event_id: int
    segments: List[_Segment]
    index: int = 0
    v: float = 0.0               # commanded linear speed, mm/s
    turn: Optional[_Turn] = None
    arc_progress: Optional[float] = None  # rad along the current arc's sweep


# ----------------------------------------------------------------------------- objects

@dataclass
class _Object:
    index: int                   # 1..3 cubes, 0 charger
    factory_id: int
    object_type: int
    object_id: Optional[int] = None
    lights: List[Any] = field(default_factory=lambda: [_LightState() for _ in range(4)])
    rotation_period_frames: int = 0
    battery_level: int = 100
    up_axis: int = 5             # ZPositive
    stream_accel: bool = False
    rssi_base: int = -55
    next_available: float = 0.0
    next_power: float = 0.0
    #: within radio range: advertises, can connect (see set_object_in_range)
    in_range: bool = True


# ----------------------------------------------------------------------------- the model

class RobotModel:
    """The robot's body and firmware behaviour. See the module docstring."""

    def __init__(self, world: Any = None, config: Optional[ModelConfig] = None,
                 now: float = 0.0) -> None:
        self.config = config or ModelConfig()
        self.world = world if world is not None else _default_world(self.config.seed)
        self.rng = random.Random(self.config.seed)
        self._out: List[Any] = []
        self._timers: List[Tuple[float, int, Callable[[float], None]]] = []
        self._timer_seq = itertools.count()
        self.command_counts: Counter = Counter()
        self._commands: Deque[Tuple[float, Any]] = deque(maxlen=self.config.command_log)
        self.nv_store: Dict[int, bytes] = {
            int(_NvTag.NVEntry_CameraCalib): encode_camera_calibration(default_camera_calibration()),
        }
        # physical state (survives reboots and reconnects)
        cfg = self.config
        if cfg.start_pose is not None:
            x, y, yaw = cfg.start_pose
        elif cfg.start_on_charger and getattr(self.world, "charger_pose", None) is not None:
            x, y, yaw = self.world.charger_pose
        else:
            x, y, yaw = 0.0, 0.0, 0.0
        self.x, self.y = float(x), float(y)
        self.yaw_u = float(yaw)          # unwrapped world yaw
        self.soc = min(1.0, max(0.0, cfg.battery_soc))
        self.on_charger = bool(cfg.start_on_charger)
        self._charger_spot = (self.x, self.y) if self.on_charger else None
        self.on_floor = False            # fell off the table
        self.picked_up = False
        self.falling = False
        self._fall_started: Optional[float] = None
        self.display_images_shown = 0
        self.display_errors = 0
        self._display_history: Deque[np.ndarray] = deque(maxlen=cfg.display_history)
        self._audio: Deque[np.ndarray] = deque()
        self._audio_len = 0
        self.audio_frames_played = 0
        self.audio_frames_with_sound = 0
        self.objects: List[_Object] = self._make_objects()
        self.reboots = 0
        self._boot(now)

    # ------------------------------------------------------------------ boot / reset

    def _make_objects(self) -> List[_Object]:
        objs = [_Object(i + 1, fid, int(getattr(_ObjectType, f"Block_LIGHTCUBE{i + 1}")),
                        rssi_base=-48 - 6 * i, battery_level=92 - 7 * i)
                for i, fid in enumerate(CUBE_FACTORY_IDS)]
        objs.append(_Object(0, CHARGER_FACTORY_ID, int(_ObjectType.Charger_Basic),
                            lights=[_LightState() for _ in range(4)], rssi_base=-60,
                            battery_level=100))
        return objs

    def _boot(self, now: float) -> None:
        """Firmware state at power-up: odometry at zero, nothing enabled."""
        self.t = now
        self.boot_time = now
        self._sync_at = now
        self._sync_ts = 0
        self.pose_frame_id = 0
        self.pose_origin_id = 0
        self._set_anchor(0.0, 0.0, 0.0)
        self.wheels = (_Wheel(), _Wheel())
        self.head = _Axis(HEAD_MIN_RAD, HEAD_MIN_RAD, HEAD_MAX_RAD, HEAD_MAX_SPEED_RADPS)
        self.lift = _Axis(LIFT_MIN_RAD, LIFT_MIN_RAD, LIFT_MAX_RAD, LIFT_MAX_SPEED_RADPS)
        self.base_mode = "wheels"        # wheels | turn | path
        self._turn: Optional[_Turn] = None
        self._path_segments: List[_Segment] = []
        self._path: Optional[_PathRun] = None
        self._prev_v = 0.0
        self._accel_fwd = 0.0
        self._w = 0.0
        self.stop_on_cliff = False
        self.recorded_heading: Optional[float] = None
        self.volume = 0
        self.backpack_lights: Dict[str, Any] = {k: _LightState() for k in
                                                ("front", "middle", "back", "left", "right")}
        self.anim_backpack_colors: List[int] = [0] * 5
        self.head_light = False
        self.camera = CameraSettings()
        self.framebuffer = np.zeros((32, 128), dtype=bool)
        self._last_display_bytes: Optional[bytes] = None
        self._anim_queue: Deque[Tuple[Any, int]] = deque()
        self._anim_queue_bytes = 0
        self.anim_bytes_played = 0
        self.anim_client_drops = 0
        self.current_anim: Optional[int] = None
        self.anim_state_enabled = False
        self._next_anim_tick = now
        self._calibrating = False
        self._reset_connection_state(now)

    def _reset_connection_state(self, now: float) -> None:
        self.connected = False
        self.enabled = False
        self.body_info_sent = False
        self.streaming = False
        self.discovery = True
        self.anim_state_enabled = False
        self.camera.mode = 0
        self.camera.generation += 1
        self._next_state = now
        self._next_accel = now
        self._pending_nv_writes: Dict[int, bytearray] = {}
        self._selected_object: Optional[int] = None
        self._next_object_id = 1
        self._anim_queue.clear()
        self._anim_queue_bytes = 0
        self.current_anim = None
        for obj in self.objects:
            obj.object_id = None
            obj.stream_accel = False
            obj.rotation_period_frames = 0

    def reboot(self, now: float) -> None:
        """Power-cycle the firmware: the body stays where it is, everything else resets."""
        self.advance(now)
        self._out.clear()
        self._timers.clear()
        self._boot(now)
        self.reboots += 1
        logger.info("simulated robot rebooted")

    # ------------------------------------------------------------------ connection hooks

    def on_connected(self, now: float) -> None:
        """A client reset the link: greet it with HardwareInfo and FirmwareSignature."""
        self.advance(now)
        self._stop_everything(now, reason="new connection")
        self._reset_connection_state(now)
        self.connected = True
        cfg = self.config
        self._emit(msgs.HardwareInfo(serial_number_head=cfg.serial_number_head,
                                     unknown1=4, unknown2=0))
        self._emit(msgs.FirmwareSignature(unknown=0, signature=self.firmware_signature()))

    def on_disconnected(self, now: float) -> None:
        """The client left or went silent: stop the motors and every stream."""
        self.advance(now)
        self._stop_everything(now, reason="disconnected")
        self._reset_connection_state(now)
        self._out.clear()

    def firmware_signature(self) -> str:
        cfg = self.config
        return json.dumps({
            "version": FIRMWARE_VERSION,
            "git-rev": "5f1c7e2d9a4b3c6e8f0a1b2c3d4e5f6a7b8c9d0e",
            "date": "Mon Jan 22 16:40:11 2018",
            "time": 1516639211,
            "build": cfg.firmware_build,
        }, separators=(",", ":"))

    # ------------------------------------------------------------------ outputs

    def _emit(self, message: Any) -> None:
        self._out.append(message)

    def pop_outgoing(self) -> List[Any]:
        """Robot->engine messages produced since the last call, in order."""
        out = self._out
        self._out = []
        return out

    def timestamp_ms(self, now: float) -> int:
        """The robot clock (ms): zeroed at boot, set by SyncTime."""
        return int(self._sync_ts + (now - self._sync_at) * 1000.0) & 0xFFFFFFFF

    def next_tick(self) -> Optional[float]:
        """When :meth:`advance` must run next, or None when nothing is due."""
        cfg = self.config
        times = []
        if self._timers:
            times.append(self._timers[0][0])
        if self._needs_physics():
            times.append(self.t + cfg.physics_dt)
        if self.connected and self.streaming:
            times.append(self._next_state)
            if self.discovery:
                times.extend(o.next_available for o in self.objects if o.object_id is None)
            times.extend(o.next_power for o in self.objects if o.object_id is not None)
        if self._anim_queue or (self.connected and self.anim_state_enabled):
            times.append(self._next_anim_tick)
        if self.connected and any(o.stream_accel for o in self.objects):
            times.append(self._next_accel)
        return min(times) if times else None

    def _needs_physics(self) -> bool:
        lw, rw = self.wheels
        return (lw.speed != 0.0 or rw.speed != 0.0 or lw.target != 0.0 or rw.target != 0.0
                or self.head.moving or self.lift.moving or self.base_mode != "wheels")

    # ------------------------------------------------------------------ time

    def advance(self, now: float) -> None:
        """Run the body up to ``now``: physics substeps, timers, periodic messages."""
        if now < self.t:
            return
        while True:
            due = self._timers[0][0] if self._timers and self._timers[0][0] <= now else None
            anim_due = (self._next_anim_tick if (self._anim_queue or
                        (self.connected and self.anim_state_enabled))
                        and self._next_anim_tick <= now else None)
            stop = now
            if due is not None:
                stop = min(stop, due)
            if anim_due is not None:
                stop = min(stop, anim_due)
            self._integrate(stop)
            if due is not None and due <= stop:
                _, _, fn = heapq.heappop(self._timers)
                fn(stop)
                continue
            if anim_due is not None and anim_due <= stop:
                self._anim_tick(stop)
                continue
            if stop >= now:
                break
        self._periodic(now)

    def _at(self, when: float, fn: Callable[[float], None]) -> None:
        heapq.heappush(self._timers, (when, next(self._timer_seq), fn))

    def _integrate(self, until: float) -> None:
        dt_max = self.config.physics_dt
        if not self._needs_physics():
            self._battery(until - self.t, moving=False)
            self.t = max(self.t, until)
            self._prev_v = 0.0
            self._accel_fwd = 0.0
            self._w = 0.0
            return
        while self.t < until - 1e-12:
            dt = min(dt_max, until - self.t)
            self._physics_step(dt)
            self.t += dt
        self.t = max(self.t, until)

    def _physics_step(self, dt: float) -> None:
        moving_motors = self._needs_physics()
        if self.base_mode == "turn" and self._turn is not None:
            w = self._turn.step(self.yaw_u, dt)
            if w is None:
                turn = self._turn
                self._set_wheels_direct(0.0, 0.0)
                self._turn = None
                self.base_mode = "wheels"
                if turn.action_id is not None:
                    self._emit(msgs.AcknowledgeAction(action_id=turn.action_id))
            else:
                r = w * TRACK_WIDTH_MM / 2.0
                self._set_wheels_direct(-r, r)
        elif self.base_mode == "path" and self._path is not None:
            self._path_step(dt)
        lw, rw = self.wheels
        lw.step(dt)
        rw.step(dt)
        v = (lw.speed + rw.speed) / 2.0
        w = (rw.speed - lw.speed) / TRACK_WIDTH_MM
        self._accel_fwd = (v - self._prev_v) / dt if dt > 0 else 0.0
        self._prev_v = v
        self._w = w if not self.picked_up and not self.falling else 0.0
        if not self.picked_up and not self.falling and (v or w):
            # exact arc integration, in the chord form: the chord of the arc driven in
            # dt is v dt sin(h)/h long at heading yaw + h, h = w dt / 2. Unlike
            # (v/w)(sin(yaw + w dt) - sin(yaw)) it has no cancellation for tiny w (issue #7:
            # that form skipped the translation for |w| <= 1e-9, and a path follower
            # steering out a heading error of ~1e-10 rad left the robot standing still).
            yaw = self.yaw_u
            half = 0.5 * w * dt
            chord = v * dt * (math.sin(half) / half if half else 1.0)
            self.x += chord * math.cos(yaw + half)
            self.y += chord * math.sin(yaw + half)
            self.yaw_u = yaw + w * dt
            self._after_motion()
        self.head.step(dt)
        self.lift.step(dt)
        self._battery(dt, moving=moving_motors)

    def _set_wheels_direct(self, left: float, right: float) -> None:
        lw, rw = self.wheels
        for wheel, s in ((lw, left), (rw, right)):
            s = max(-MAX_WHEEL_SPEED_MMPS, min(MAX_WHEEL_SPEED_MMPS, s))
            wheel.target = s
            wheel.accel = 1e6  # the controller already shapes the speed
            wheel.speed = s

    def _battery(self, dt: float, moving: bool) -> None:
        if dt <= 0:
            return
        cfg = self.config
        if self.on_charger:
            self.soc = min(1.0, self.soc + cfg.battery_charge * dt)
        else:
            rate = cfg.battery_drain_moving if moving else cfg.battery_drain_idle
            self.soc = max(0.0, self.soc - rate * dt)

    # ------------------------------------------------------------------ cliffs, charger

    def cliff_readings(self) -> List[bool]:
        """Which of the four cliff sensors see a drop now."""
        if self.picked_up or self.falling:
            return [True] * 4       # nothing under the robot
        if self.on_floor:
            return [False] * 4
        c, s = math.cos(self.yaw_u), math.sin(self.yaw_u)
        cliff_at = self.world.cliff_at
        return [bool(cliff_at(self.x + c * fx - s * fy, self.y + s * fx + c * fy))
                for fx, fy in CLIFF_SENSOR_OFFSETS_MM]

    def _after_motion(self) -> None:
        if self._charger_spot is not None:
            if math.hypot(self.x - self._charger_spot[0], self.y - self._charger_spot[1]) > \
                    _DISTANCE_OFF_CHARGER_MM:
                self.on_charger = False
                self._charger_spot = None
        if self.on_floor:
            return
        lw, rw = self.wheels
        v = (lw.speed + rw.speed) / 2.0
        if self.stop_on_cliff:
            fl, fr, bl, br = self.cliff_readings()
            if (v > 0 and (fl or fr)) or (v < 0 and (bl or br)):
                logger.debug("stop on cliff at (%.1f, %.1f)", self.x, self.y)
                self._halt_base(self.t, reason="cliff")
                return
        if self.world.cliff_at(self.x, self.y):
            # the robot's centre went over the edge: it falls off the table
            self._halt_base(self.t, reason="cliff")
            self.on_floor = True
            self._start_fall(self.t, 0.35, impact=850.0)

    # ------------------------------------------------------------------ periodic streams

    def _periodic(self, now: float) -> None:
        cfg = self.config
        if not self.connected:
            return
        if self.streaming:
            if now >= self._next_state:
                self._emit(self.robot_state(now))
                self._next_state += cfg.state_period
                if self._next_state <= now:
                    self._next_state = now + cfg.state_period
            for obj in self.objects:
                if obj.object_id is None:
                    if self.discovery and now >= obj.next_available:
                        rssi = obj.rssi_base + (self.rng.randint(-4, 4) if cfg.noise else 0)
                        self._emit(msgs.ObjectAvailable(factory_id=obj.factory_id,
                                                        object_type=obj.object_type, rssi=rssi))
                        obj.next_available = now + cfg.object_available_period
                elif now >= obj.next_power:
                    self._emit(msgs.ObjectPowerLevel(object_id=obj.object_id, missed_packets=0,
                                                     battery_level=obj.battery_level))
                    obj.next_power = now + cfg.power_level_period
        streams = [o for o in self.objects if o.stream_accel and o.object_id is not None]
        if streams and now >= self._next_accel:
            ts = self.timestamp_ms(now)
            for obj in streams:
                ax, ay, az = self._cube_gravity(obj)
                n = cfg.accel_noise_mmps2 if cfg.noise else 0.0
                self._emit(msgs.ObjectAccel(timestamp_ms=ts, object_id=obj.object_id,
                                            accel_x=ax + self.rng.gauss(0, n) if n else ax,
                                            accel_y=ay + self.rng.gauss(0, n) if n else ay,
                                            accel_z=az + self.rng.gauss(0, n) if n else az))
            self._next_accel += cfg.object_accel_period
            if self._next_accel <= now:
                self._next_accel = now + cfg.object_accel_period

    @staticmethod
    def _cube_gravity(obj: _Object) -> Tuple[float, float, float]:
        axis = int(obj.up_axis)
        vec = [0.0, 0.0, 0.0]
        if axis < 6:
            vec[axis // 2] = GRAVITY_MMPS2 if axis % 2 else -GRAVITY_MMPS2
        else:
            vec[2] = GRAVITY_MMPS2
        return vec[0], vec[1], vec[2]

    # ------------------------------------------------------------------ RobotState

    def status(self) -> int:
        flags = 0
        lw, rw = self.wheels
        wheels_moving = lw.speed != 0.0 or rw.speed != 0.0
        if wheels_moving:
            flags |= StatusFlag.ARE_WHEELS_MOVING
        if wheels_moving or self.head.moving or self.lift.moving:
            flags |= StatusFlag.IS_MOVING
        if self.picked_up:
            flags |= StatusFlag.IS_PICKED_UP
        if self.falling:
            flags |= StatusFlag.IS_FALLING
        if self.current_anim is not None:
            flags |= StatusFlag.IS_ANIMATING
        if self._path is not None:
            flags |= StatusFlag.IS_PATHING
        if not self.lift.moving:
            flags |= StatusFlag.LIFT_IN_POS
        if not self.head.moving:
            flags |= StatusFlag.HEAD_IN_POS
        if self._anim_queue_bytes >= self.config.anim_buffer_full_bytes:
            flags |= StatusFlag.IS_ANIM_BUFFER_FULL
        if self.on_charger:
            flags |= StatusFlag.IS_ON_CHARGER
            if self.soc < 1.0:
                flags |= StatusFlag.IS_CHARGING
        if any(self.cliff_readings()):
            flags |= StatusFlag.CLIFF_DETECTED
        return int(flags)

    def battery_voltage(self) -> float:
        """Battery voltage without noise (V)."""
        v = BATTERY_EMPTY_V + (BATTERY_FULL_V - BATTERY_EMPTY_V) * self.soc
        if self._needs_physics() and not self.on_charger:
            v -= self.config.battery_sag_v
        if self.on_charger and self.soc < 1.0:
            v += 0.03  # charging voltage rides above the open-circuit one
        return min(BATTERY_FULL_V + 0.05, v)

    def reported_pose(self) -> Tuple[float, float, float]:
        """Odometry pose (x mm, y mm, yaw rad) in the frame set by SetOrigin."""
        ax, ay, ayaw = self._anchor
        dx, dy = self.x - ax, self.y - ay
        c, s = math.cos(-ayaw), math.sin(-ayaw)
        return dx * c - dy * s, dx * s + dy * c, wrap_angle(self.yaw_u - ayaw)

    def _set_anchor(self, rx: float, ry: float, ryaw: float) -> None:
        """Make the reported pose equal (rx, ry, ryaw) at the current true pose."""
        ayaw = self.yaw_u - ryaw
        c, s = math.cos(ayaw), math.sin(ayaw)
        self._anchor = (self.x - (rx * c - ry * s), self.y - (rx * s + ry * c), ayaw)

    def _engine_to_world(self, x: float, y: float) -> Tuple[float, float]:
        ax, ay, ayaw = self._anchor
        c, s = math.cos(ayaw), math.sin(ayaw)
        return ax + x * c - y * s, ay + x * s + y * c

    def robot_state(self, now: float) -> Any:
        cfg = self.config
        rng = self.rng
        noise = cfg.noise
        lw, rw = self.wheels
        x, y, yaw = self.reported_pose()
        pitch = 0.0
        if self.falling:
            ax = ay = az = 0.0
        elif self.picked_up:
            pitch = 0.15
            ax, ay, az = (GRAVITY_MMPS2 * math.sin(pitch) + rng.uniform(-400, 400),
                          rng.uniform(-300, 300), GRAVITY_MMPS2 * math.cos(pitch) + rng.uniform(-500, 500))
        else:
            ax = self._accel_fwd
            ay = self._prev_v * self._w
            az = GRAVITY_MMPS2
        gx = gy = 0.0
        gz = self._w
        if self.picked_up:
            gx, gy, gz = rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3)
        volt = self.battery_voltage()
        if noise:
            an, gn = cfg.accel_noise_mmps2, cfg.gyro_noise_radps
            ax += rng.gauss(0, an)
            ay += rng.gauss(0, an)
            az += rng.gauss(0, an)
            gx += rng.gauss(0, gn)
            gy += rng.gauss(0, gn)
            gz += rng.gauss(0, gn)
            volt += rng.gauss(0, cfg.battery_noise_v)
        cliffs = []
        for drop in self.cliff_readings():
            raw = CLIFF_DROP_RAW if drop else CLIFF_GROUND_RAW
            if noise:
                raw += int(round(rng.gauss(0, cfg.cliff_noise_raw)))
            cliffs.append(max(0, min(0xFFFF, raw)))
        touch = BACKPACK_TOUCH_RAW + (rng.randint(-2, 2) if noise else 0)
        path = self._path
        return msgs.RobotState(
            timestamp_ms=self.timestamp_ms(now),
            pose_frame_id=self.pose_frame_id,
            pose_origin_id=self.pose_origin_id,
            pose_x_mm=x, pose_y_mm=y, pose_z_mm=0.0,
            pose_angle_rad=yaw, pose_pitch_rad=pitch,
            lwheel_speed_mmps=lw.speed, rwheel_speed_mmps=rw.speed,
            head_angle_rad=self.head.pos,
            lift_height_mm=lift_angle_to_height(self.lift.pos),
            accel_x_mmps2=ax, accel_y_mmps2=ay, accel_z_mmps2=az,
            gyro_x_radps=gx, gyro_y_radps=gy, gyro_z_radps=gz,
            battery_voltage_v=volt,
            status=self.status(),
            cliff_data_raw=cliffs,
            backpack_touch_sensor_raw=touch,
            curr_path_segment=min(path.index, 254) if path is not None else 0xFF,
        )

    def imu_rates(self) -> Tuple[float, float, float]:
        """Gyro rates (rad/s) as the camera's ImageImuData reports them."""
        return 0.0, 0.0, self._w

    # ------------------------------------------------------------------ commands

    def handle(self, message: Any, now: float) -> None:
        """Act on one engine->robot message received at ``now``."""
        self.advance(now)
        name = message.NAME
        self.command_counts[name] += 1
        self._commands.append((now, message))
        if name in _ANIM_STREAM:
            self._queue_anim(message, now)
            return
        handler = getattr(self, "_on_" + name, None)
        if handler is None:
            logger.debug("no behaviour for %s", name)
            return
        handler(message, now)

    def commands(self) -> List[Tuple[float, Any]]:
        """The most recent commands received, as (time, message)."""
        return list(self._commands)

    # --- system

    def _on_Enable(self, m: Any, now: float) -> None:
        self.enabled = True
        if not self.body_info_sent:
            self.body_info_sent = True
            cfg = self.config
            self._emit(msgs.BodyInfo(serial_number=cfg.body_serial_number,
                                     body_hw_version=cfg.body_hw_version,
                                     body_color=cfg.body_color))

    def _on_SyncTime(self, m: Any, now: float) -> None:
        self._sync_at = now
        self._sync_ts = int(m.timestamp_ms)
        if not self.enabled:
            logger.info("SyncTime before Enable: clock set, streams stay off")
            return
        if not self.streaming:
            self.streaming = True
            self._next_state = now
            for k, obj in enumerate(self.objects):
                obj.next_available = now + 0.05 + 0.2 * k

    def _on_SetOrigin(self, m: Any, now: float) -> None:
        heading = struct.unpack("<f", struct.pack("<I", int(m.unknown5) & 0xFFFFFFFF))[0]
        if not math.isfinite(heading):
            heading = 0.0
        self.pose_frame_id = int(m.pose_frame_id)
        self.pose_origin_id = int(m.pose_origin_id)
        self._set_anchor(_num(m.pose_x_mm), _num(m.pose_y_mm), wrap_angle(heading))

    def _on_EnableAnimationState(self, m: Any, now: float) -> None:
        if not self.anim_state_enabled:
            self.anim_state_enabled = True
            self._next_anim_tick = self._anim_grid(now)

    def _on_StartMotorCalibration(self, m: Any, now: float) -> None:
        motors = [(_MotorID.MOTOR_HEAD, self.head, HEAD_MIN_RAD)] if m.head else []
        if m.lift:
            motors.append((_MotorID.MOTOR_LIFT, self.lift, LIFT_MIN_RAD))
        for motor_id, axis, low in motors:
            self._emit(msgs.MotorCalibration(motor_id=motor_id, calib_started=True, auto_started=False))
            axis.move_to(low, 0, 0, 0.5)

            def done(t: float, motor_id: Any = motor_id) -> None:
                self._emit(msgs.MotorCalibration(motor_id=motor_id, calib_started=False,
                                                 auto_started=False))
            self._at(now + 1.0, done)

    def _on_ShutdownRobot(self, m: Any, now: float) -> None:
        logger.info("ShutdownRobot received (the simulator keeps running)")

    # --- motors

    def _on_DriveWheels(self, m: Any, now: float) -> None:
        self._end_base_mode(now, "interrupted by DriveWheels")
        lw, rw = self.wheels
        lw.command(_num(m.lwheel_speed_mmps), _num(m.lwheel_accel_mmps2))
        rw.command(_num(m.rwheel_speed_mmps), _num(m.rwheel_accel_mmps2))

    def _on_TurnInPlaceAtSpeed(self, m: Any, now: float) -> None:
        self._end_base_mode(now, "interrupted by TurnInPlaceAtSpeed")
        direction = 1.0 if int(m.direction) >= 0 else -1.0
        speed = abs(_num(m.wheel_speed_mmps)) * direction
        accel = _num(m.wheel_accel_mmps2)
        lw, rw = self.wheels
        lw.command(-speed, accel)
        rw.command(speed, accel)

    def _on_TurnInPlace(self, m: Any, now: float) -> None:
        self._end_base_mode(now, "interrupted by TurnInPlace")
        if m.is_absolute:
            target_world = _num(m.angle_rad, limit=1e3) + self._anchor[2]
            delta = wrap_angle(target_world - self.yaw_u)
        else:
            delta = _num(m.angle_rad, limit=1e3)
        speed = abs(_num(m.speed_rad_per_sec)) or math.pi
        accel = abs(_num(m.accel_rad_per_sec2)) or 10.0
        self._start_turn(self.yaw_u + delta, speed, accel, abs(_num(m.angle_tolerance_rad)),
                         int(m.action_id))

    def _start_turn(self, target: float, speed: float, accel: float, tol: float,
                    action_id: Optional[int]) -> None:
        self._turn = _Turn(target, speed, accel, tol, action_id)
        self.base_mode = "turn"

    def _on_StopAllMotors(self, m: Any, now: float) -> None:
        self._stop_everything(now, reason="StopAllMotors")

    def _on_MoveHead(self, m: Any, now: float) -> None:
        self.head.move_velocity(_num(m.speed_rad_per_sec))

    def _on_MoveLift(self, m: Any, now: float) -> None:
        self.lift.move_velocity(_num(m.speed_rad_per_sec))

    def _on_SetHeadAngle(self, m: Any, now: float) -> None:
        self._emit(msgs.AcknowledgeAction(action_id=int(m.action_id)))
        self.head.move_to(_num(m.angle_rad, self.head.pos), _num(m.max_speed_rad_per_sec),
                          _num(m.accel_rad_per_sec2), _num(m.duration_sec, limit=3600.0))

    def _on_SetLiftHeight(self, m: Any, now: float) -> None:
        self._emit(msgs.AcknowledgeAction(action_id=int(m.action_id)))
        self.lift.move_to(lift_height_to_angle(_num(m.height_mm, self.lift_height)),
                          _num(m.max_speed_rad_per_sec), _num(m.accel_rad_per_sec2),
                          _num(m.duration_sec, limit=3600.0))

    def _on_EnableStopOnCliff(self, m: Any, now: float) -> None:
        self.stop_on_cliff = bool(m.enable)

    def _stop_everything(self, now: float, reason: str) -> None:
        self._halt_base(now, reason)
        self._path_segments = []
        self.head.stop()
        self.lift.stop()

    def _halt_base(self, now: float, reason: str) -> None:
        self._end_base_mode(now, reason)
        for wheel in self.wheels:
            wheel.halt()

    def _end_base_mode(self, now: float, reason: str) -> None:
        """Abandon a running turn or path (the path reports PATH_INTERRUPTED)."""
        if self._path is not None:
            self._emit(msgs.PathFollowingEvent(event_id=self._path.event_id,
                                               event_type=_PathEvent.PATH_INTERRUPTED))
            logger.debug("path %d interrupted: %s", self._path.event_id, reason)
            self._path = None
        if self._turn is not None:
            logger.debug("turn interrupted: %s", reason)
            self._turn = None
        if self.base_mode != "wheels":
            self.base_mode = "wheels"
            for wheel in self.wheels:
                wheel.command(0.0, DEFAULT_WHEEL_ACCEL_MMPS2)

    # --- paths

    def _append_segment(self, kind: str, m: Any) -> None:
        values = [getattr(m, f) for f in m.FIELDS]
        if any(isinstance(v, float) and not (math.isfinite(v) and abs(v) <= 1e6) for v in values):
            logger.warning("path segment with an impossible value ignored: %r", m)
            return
        self._path_segments.append(_Segment(kind, m))

    def _on_AppendPathSegLine(self, m: Any, now: float) -> None:
        self._append_segment("line", m)

    def _on_AppendPathSegArc(self, m: Any, now: float) -> None:
        self._append_segment("arc", m)

    def _on_AppendPathSegPointTurn(self, m: Any, now: float) -> None:
        self._append_segment("turn", m)

    def _on_ClearPath(self, m: Any, now: float) -> None:
        if self._path is not None:
            self._halt_base(now, "ClearPath")
        self._path_segments = []

    def _on_TrimPath(self, m: Any, now: float) -> None:
        segs = self._path_segments
        head, tail = int(m.head), int(m.tail)
        segs[:] = segs[head:len(segs) - tail] if tail else segs[head:]
        if self._path is not None:
            self._path.index = max(0, self._path.index - head)

    def _on_ExecutePath(self, m: Any, now: float) -> None:
        self._end_base_mode(now, "new path")
        event_id = int(m.event_id)
        self._emit(msgs.PathFollowingEvent(event_id=event_id, event_type=_PathEvent.PATH_STARTED))
        if self.picked_up:
            self._emit(msgs.PathFollowingEvent(event_id=event_id,
                                               event_type=_PathEvent.PATH_INTERRUPTED))
            return
        segments = self._path_segments  # shared: segments appended while running extend the path
        self._path = _PathRun(event_id, segments, v=(self.wheels[0].speed + self.wheels[1].speed) / 2)
        self.base_mode = "path"
        if not segments:
            self._finish_path()

    def _finish_path(self) -> None:
        path = self._path
        self._path = None
        self.base_mode = "wheels"
        self._set_wheels_direct(0.0, 0.0)
        self._path_segments = []
        if path is not None:
            self._emit(msgs.PathFollowingEvent(event_id=path.event_id,
                                               event_type=_PathEvent.PATH_COMPLETED))

    def _path_step(self, dt: float) -> None:
        path = self._path
        while path.index < len(path.segments):
            seg = path.segments[path.index]
            done = self._segment_step(path, seg, dt)
            if not done:
                return
            path.index += 1
            path.turn = None
            path.arc_progress = None
        self._finish_path()

    def _segment_step(self, path: _PathRun, seg: _Segment, dt: float) -> bool:
        """Drive one substep along ``seg``; True when the segment is finished."""
        m = seg.msg
        if seg.kind == "turn":
            if path.turn is None:
                target_world = float(m.angle_rad) + self._anchor[2]
                half = TRACK_WIDTH_MM / 2.0
                wmax = abs(float(m.speed_mmps)) / half or 2.0
                alpha = abs(float(m.accel_mmps2)) / half or 10.0
                path.turn = _Turn(self.yaw_u + wrap_angle(target_world - self.yaw_u), wmax, alpha,
                                  abs(float(m.angle_tolerance_rad)), None)
            w = path.turn.step(self.yaw_u, dt)
            if w is None:
                self._set_wheels_direct(0.0, 0.0)
                path.v = 0.0
                return True
            r = w * TRACK_WIDTH_MM / 2.0
            self._set_wheels_direct(-r, r)
            return False
        # lines and arcs: steer towards a point a little ahead on the segment
        speed = float(m.speed_mmps)
        sign = -1.0 if speed < 0 else 1.0
        vmax = min(abs(speed) or 100.0, MAX_WHEEL_SPEED_MMPS)
        accel = abs(float(m.accel_mmps2)) or 200.0
        decel = abs(float(m.decel_mmps2)) or 200.0
        if seg.kind == "line":
            ax_, ay_ = self._engine_to_world(float(m.from_x_mm), float(m.from_y_mm))
            bx, by = self._engine_to_world(float(m.to_x_mm), float(m.to_y_mm))
            dx, dy = bx - ax_, by - ay_
            length = math.hypot(dx, dy)
            if length < 1e-6:
                return True
            ux, uy = dx / length, dy / length
            along = (self.x - ax_) * ux + (self.y - ay_) * uy
            remaining = length - along
            if remaining <= 1.0:
                return True
            look = along + min(20.0, remaining)
            tx, ty = ax_ + ux * look, ay_ + uy * look
        else:  # arc
            cx, cy = self._engine_to_world(float(m.center_x_mm), float(m.center_y_mm))
            radius = abs(float(m.radius_mm))
            sweep = float(m.sweep_rad)
            start = float(m.start_angle_rad) + self._anchor[2]
            if radius < 1e-6 or abs(sweep) < 1e-9:
                return True
            d = 1.0 if sweep > 0 else -1.0
            phi = math.atan2(self.y - cy, self.x - cx)
            progress = wrap_angle(phi - start) * d
            if progress < -0.5:
                progress += 2.0 * math.pi
            # keep progress monotonic across the +-pi seam for sweeps beyond pi
            prev = path.arc_progress
            while prev is not None and progress + math.pi < prev:
                progress += 2.0 * math.pi
            path.arc_progress = progress
            remaining = (abs(sweep) - progress) * radius
            if remaining <= 1.0:
                return True
            ahead = start + d * (progress + min(20.0, remaining) / radius)
            tx, ty = cx + radius * math.cos(ahead), cy + radius * math.sin(ahead)
        heading = math.atan2(ty - self.y, tx - self.x)
        facing = self.yaw_u if sign > 0 else self.yaw_u + math.pi
        err = wrap_angle(heading - facing)
        nxt = path.segments[path.index + 1] if path.index + 1 < len(path.segments) else None
        stop_at_end = nxt is None or nxt.kind == "turn"
        if abs(err) > math.radians(50) and abs(path.v) < 20.0:
            # turn towards the segment before driving along it
            path.v = 0.0
            w = math.copysign(min(4.0, 3.0 * abs(err) + 0.3), err)
            r = w * TRACK_WIDTH_MM / 2.0
            self._set_wheels_direct(-r, r)
            return False
        vdes = vmax
        if stop_at_end:
            vdes = min(vdes, math.sqrt(2.0 * decel * remaining))
        if abs(err) > math.radians(20):
            vdes = min(vdes, 30.0)
        v = abs(path.v)
        v = min(vdes, v + accel * dt) if v < vdes else max(vdes, v - decel * dt)
        path.v = sign * v
        w = max(-6.0, min(6.0, 4.0 * err))
        half = w * TRACK_WIDTH_MM / 2.0
        left, right = sign * v - half, sign * v + half
        scale = max(abs(left), abs(right)) / MAX_WHEEL_SPEED_MMPS
        if scale > 1.0:
            left /= scale
            right /= scale
        self._set_wheels_direct(left, right)
        return False

    # --- animation stream

    def _anim_grid(self, now: float) -> float:
        period = self.config.anim_period
        k = math.ceil((now - self.boot_time) / period - 1e-9)
        return self.boot_time + k * period

    def _queue_anim(self, m: Any, now: float) -> None:
        size = msgs.packet_size(m)
        cfg = self.config
        if self._anim_queue_bytes + size > cfg.anim_buffer_max_bytes:
            self.anim_client_drops += 1
            logger.debug("animation buffer overflow: %s dropped", m.NAME)
            return
        if not self._anim_queue and not (self.connected and self.anim_state_enabled):
            self._next_anim_tick = max(self._anim_grid(now), self._next_anim_tick)
        self._anim_queue.append((m, size))
        self._anim_queue_bytes += size

    @property
    def anim_queue_bytes(self) -> int:
        return self._anim_queue_bytes

    @property
    def anim_queue_length(self) -> int:
        return len(self._anim_queue)

    def _anim_tick(self, now: float) -> None:
        queue = self._anim_queue
        while queue:
            m, size = queue.popleft()
            self._anim_queue_bytes -= size
            self.anim_bytes_played += size
            name = m.NAME
            if name == "OutputAudio" or name == "OutputSilence":
                self._play_audio(m)
                break
            self._play_anim_message(m, now)
        if self.connected and self.anim_state_enabled:
            self._emit(msgs.AnimationState(
                timestamp_ms=self.timestamp_ms(now),
                num_anim_bytes_played=self.anim_bytes_played & 0x7FFFFFFF,
                num_audio_frames_played=self.audio_frames_played & 0x7FFFFFFF,
                enabled_anim_tracks=0xFF,
                tag=self.current_anim or 0,
                client_drop_count=self.anim_client_drops & 0xFF))
        self._next_anim_tick += self.config.anim_period
        if self._next_anim_tick <= now:
            self._next_anim_tick = self._anim_grid(now + self.config.anim_period * 0.5)

    def _play_audio(self, m: Any) -> None:
        self.audio_frames_played += 1
        if m.NAME == "OutputAudio":
            from ..protocol.audio import decode_ulaw
            pcm = decode_ulaw(m.samples)
            self.audio_frames_with_sound += 1
        else:
            pcm = np.zeros(AUDIO_SAMPLES_PER_FRAME, dtype=np.int16)
        self._audio.append(pcm)
        self._audio_len += len(pcm)
        limit = self.config.audio_history_samples
        while self._audio_len > limit and self._audio:
            self._audio_len -= len(self._audio.popleft())

    def _play_anim_message(self, m: Any, now: float) -> None:
        name = m.NAME
        rng = self.rng
        if name == "DisplayImage":
            self._show(bytes(m.image))
        elif name == "StartAnimation":
            if self.current_anim is not None:
                self._emit(msgs.AnimationEnded(anim_id=self.current_anim))
            self.current_anim = int(m.anim_id)
            self._emit(msgs.AnimationStarted(anim_id=self.current_anim))
        elif name == "EndAnimation":
            if self.current_anim is not None:
                self._emit(msgs.AnimationEnded(anim_id=self.current_anim))
                self.current_anim = None
                self._anim_body_stop(now)
        elif name == "AnimHead":
            var = abs(int(m.variability_deg))
            angle = math.radians(int(m.angle_deg) + (rng.uniform(-var, var) if var else 0.0))
            self.head.move_to(angle, HEAD_MAX_SPEED_RADPS, 40.0, int(m.duration_ms) / 1000.0)
        elif name == "AnimLift":
            var = int(m.variability_mm)
            height = int(m.height_mm) + (rng.uniform(-var, var) if var else 0.0)
            self.lift.move_to(lift_height_to_angle(height), LIFT_MAX_SPEED_RADPS, 40.0,
                              int(m.duration_ms) / 1000.0)
        elif name == "AnimBody":
            self._end_base_mode(now, "AnimBody")
            speed = float(m.speed_mmps)
            radius = int(m.unknown)
            lw, rw = self.wheels
            if radius in (32767, -32768, -32767):
                left = right = speed
            elif radius == 0:
                left, right = -speed, speed
            else:
                half = TRACK_WIDTH_MM / 2.0
                left, right = speed * (1 - half / radius), speed * (1 + half / radius)
            lw.command(left, 0.0)
            rw.command(right, 0.0)
        elif name == "AnimBackpackLights":
            self.anim_backpack_colors = [int(c) for c in m.colors]
        elif name == "RecordHeading":
            self.recorded_heading = self.yaw_u
        elif name == "TurnToRecordedHeading":
            if self.recorded_heading is not None:
                self._end_base_mode(now, "TurnToRecordedHeading")
                target = self.yaw_u + wrap_angle(self.recorded_heading - self.yaw_u)
                self._start_turn(target, math.pi, 10.0, math.radians(2.0), None)

    def _anim_body_stop(self, now: float) -> None:
        if self.base_mode == "wheels":
            for wheel in self.wheels:
                wheel.command(0.0, 0.0)

    def _on_AbortAnimation(self, m: Any, now: float) -> None:
        self._anim_queue.clear()
        self._anim_queue_bytes = 0
        if self.current_anim is not None:
            self._emit(msgs.AnimationEnded(anim_id=self.current_anim))
            self.current_anim = None
            self._anim_body_stop(now)

    def _show(self, image: bytes) -> None:
        self.display_images_shown += 1
        if image == self._last_display_bytes:
            self._display_history.append(self.framebuffer)
            return
        from ..protocol.display import decode_display
        try:
            fb = decode_display(image)
        except RemoteProtocolError as exc:
            self.display_errors += 1
            logger.debug("undecodable DisplayImage ignored: %s", exc)
            return
        fb.setflags(write=False)
        self.framebuffer = fb
        self._last_display_bytes = image
        self._display_history.append(fb)

    # --- audio, lights, camera

    def _on_SetRobotVolume(self, m: Any, now: float) -> None:
        self.volume = int(m.level)

    def _on_LightStateCenter(self, m: Any, now: float) -> None:
        for key, state in zip(("front", "middle", "back"), m.states):
            self.backpack_lights[key] = state

    def _on_LightStateSide(self, m: Any, now: float) -> None:
        for key, state in zip(("left", "right"), m.states):
            self.backpack_lights[key] = state

    def _on_SetHeadLight(self, m: Any, now: float) -> None:
        self.head_light = bool(m.enable)
        self.camera.head_light = self.head_light

    def _on_EnableCamera(self, m: Any, now: float) -> None:
        self.camera.mode = int(m.image_send_mode)
        self.camera.resolution = int(m.image_resolution)
        self.camera.generation += 1

    def _on_EnableColorImages(self, m: Any, now: float) -> None:
        self.camera.color = bool(m.enable)

    def _on_SetCameraParams(self, m: Any, now: float) -> None:
        self.camera.gain = max(0.0, _num(m.gain, 1.0, limit=64.0))
        self.camera.exposure_ms = float(m.exposure_ms) or None
        self.camera.auto_exposure = bool(m.auto_exposure_enabled)

    # --- objects

    def _object_by_factory(self, factory_id: int) -> Optional[_Object]:
        for obj in self.objects:
            if obj.factory_id == factory_id:
                return obj
        return None

    def _object_by_id(self, object_id: int) -> Optional[_Object]:
        for obj in self.objects:
            if obj.object_id is not None and obj.object_id == object_id:
                return obj
        return None

    def _on_ObjectConnect(self, m: Any, now: float) -> None:
        obj = self._object_by_factory(int(m.factory_id))
        if obj is None:
            self._emit(msgs.ObjectConnectionState(object_id=0, factory_id=int(m.factory_id),
                                                  object_type=_ObjectType.InvalidObject,
                                                  connected=False))
            return
        if m.connect and not obj.in_range:
            # out of range: the robot tries, hears nothing, and reports the failure
            def failed(t: float, obj: _Object = obj) -> None:
                if obj.object_id is None:
                    self._emit(msgs.ObjectConnectionState(object_id=0, factory_id=obj.factory_id,
                                                          object_type=obj.object_type, connected=False))
            self._at(now + OBJECT_CONNECT_FAIL_S, failed)
            return
        if m.connect:
            if obj.object_id is None:
                obj.object_id = self._next_object_id
                self._next_object_id += 1
            obj.next_power = now + 0.5
            self._emit(msgs.ObjectConnectionState(object_id=obj.object_id, factory_id=obj.factory_id,
                                                  object_type=obj.object_type, connected=True))
        else:
            object_id = obj.object_id if obj.object_id is not None else 0
            obj.object_id = None
            obj.stream_accel = False
            obj.next_available = now + self.config.object_available_period if obj.in_range else math.inf
            self._emit(msgs.ObjectConnectionState(object_id=object_id, factory_id=obj.factory_id,
                                                  object_type=obj.object_type, connected=False))

    def _on_SetAccessoryDiscovery(self, m: Any, now: float) -> None:
        self.discovery = bool(m.enable)

    def _on_CubeId(self, m: Any, now: float) -> None:
        obj = self._object_by_id(int(m.object_id))
        self._selected_object = int(m.object_id) if obj is not None else None
        if obj is not None:
            obj.rotation_period_frames = int(m.rotation_period_frames)

    def _on_CubeLights(self, m: Any, now: float) -> None:
        if self._selected_object is None:
            return
        obj = self._object_by_id(self._selected_object)
        if obj is not None:
            obj.lights = list(m.states)

    def _on_StreamObjectAccel(self, m: Any, now: float) -> None:
        obj = self._object_by_id(int(m.object_id))
        if obj is not None:
            if m.enable and not any(o.stream_accel for o in self.objects):
                self._next_accel = now
            obj.stream_accel = bool(m.enable)

    # --- NV storage

    def _on_NvStorageOp(self, m: Any, now: float) -> None:
        tag = int(m.tag)
        op = int(m.op)
        data = bytes(m.data)
        store = self.nv_store

        def reply(result: Any, payload: bytes = b"", length: Optional[int] = None) -> None:
            self._emit(msgs.NvStorageOpResult(tag=m.tag, length=len(payload) if length is None else length,
                                              op=m.op, result=result, data=payload))

        if op == _NvOp.NVOP_READ:
            entry = store.get(tag)
            if entry is None:
                reply(_NvResult.NV_NOT_FOUND, b"", 0)
                return
            want = int(m.length)
            body = entry[:want] if want > 0 else entry
            parts = [body[i:i + NV_CHUNK_BYTES] for i in range(0, len(body), NV_CHUNK_BYTES)] or [b""]
            for k, part in enumerate(parts):
                last = k == len(parts) - 1
                reply(_NvResult.NV_OKAY if last else _NvResult.NV_MORE, part, len(entry))
        elif op == _NvOp.NVOP_WRITE:
            total = int(m.length)
            pending = self._pending_nv_writes.get(tag)
            if pending is None and (total <= 0 or total <= len(data)):
                store[tag] = data if total <= 0 else data[:total]
                reply(_NvResult.NV_OKAY, b"", len(store[tag]))
                return
            buf = self._pending_nv_writes.setdefault(tag, bytearray())
            buf += data
            if len(buf) >= total:
                store[tag] = bytes(buf[:total])
                del self._pending_nv_writes[tag]
                reply(_NvResult.NV_OKAY, b"", total)
            else:
                reply(_NvResult.NV_MORE, b"", len(buf))
        elif op == _NvOp.NVOP_ERASE:
            if store.pop(tag, None) is None:
                reply(_NvResult.NV_NOT_FOUND, b"", 0)
            else:
                reply(_NvResult.NV_OKAY, b"", 0)
        elif op == _NvOp.NVOP_WIPEALL:
            for key in [k for k in store if k < 0x80000000]:  # factory entries survive
                del store[key]
            reply(_NvResult.NV_OKAY, b"", 0)
        else:
            reply(_NvResult.NV_BAD_ARGS, b"", 0)

    # ------------------------------------------------------------------ scripted events

    def pick_up(self, now: float) -> None:
        """Someone lifts the robot: wheels stop, a path is interrupted."""
        self.advance(now)
        if self.picked_up:
            return
        self._halt_base(now, "picked up")
        self.picked_up = True

    def put_down(self, now: float, pose: Optional[Tuple[float, float, float]] = None) -> None:
        """Set the robot down, optionally at a new true world pose (odometry does not see it)."""
        self.advance(now)
        if pose is not None:
            self._teleport(*pose)
        self.picked_up = False
        self.on_floor = self.on_floor and pose is None

    def _teleport(self, x: float, y: float, yaw: float) -> None:
        rep = self.reported_pose()
        self.x, self.y = float(x), float(y)
        self.yaw_u = float(yaw)
        self._set_anchor(*rep)  # odometry keeps its value
        if self._charger_spot is not None:
            self.on_charger = False
            self._charger_spot = None

    def fall(self, now: float, duration: float = 0.4, impact: float = 600.0) -> None:
        """The robot falls for ``duration`` seconds: FallingStarted ... FallingStopped."""
        self.advance(now)
        self._halt_base(now, "falling")
        self._start_fall(now, duration, impact)

    def _start_fall(self, now: float, duration: float, impact: float) -> None:
        if self.falling:
            return
        self.falling = True
        self._fall_started = now
        self._emit(msgs.FallingStarted(unknown=self.timestamp_ms(now)))

        def landed(t: float) -> None:
            self.falling = False
            self._emit(msgs.FallingStopped(unknown=self.timestamp_ms(t),
                                           duration_ms=int(round((t - now) * 1000)),
                                           impact_intensity=float(impact)))
        self._at(now + duration, landed)

    def poke(self, now: float) -> None:
        self.advance(now)
        self._emit(msgs.RobotPoked())

    def press_button(self, now: float, duration: float = 0.2) -> None:
        """Backpack button: ButtonPressed(True), then ButtonPressed(False) after ``duration``."""
        self.advance(now)
        self._emit(msgs.ButtonPressed(pressed=True))
        self._at(now + duration, lambda t: self._emit(msgs.ButtonPressed(pressed=False)))

    def delocalize(self, now: float) -> None:
        self.advance(now)
        self._emit(msgs.RobotDelocalized())

    def set_on_charger(self, on: bool, now: float, move: bool = True) -> None:
        """Put the robot on the charger (at the world's charger pose when ``move``) or take it off."""
        self.advance(now)
        if on:
            pose = getattr(self.world, "charger_pose", None)
            if move and pose is not None:
                self._halt_base(now, "placed on the charger")
                self._teleport(*pose)
            self.on_charger = True
            self.on_floor = False
            self._charger_spot = (self.x, self.y)
        else:
            self.on_charger = False
            self._charger_spot = None

    def teleport(self, now: float, x: float, y: float, yaw: float) -> None:
        """Move the true pose without telling odometry (a hand-placement)."""
        self.advance(now)
        self._teleport(x, y, yaw)

    def _cube(self, n: int) -> _Object:
        if not 1 <= n <= 3:
            raise ValueError(f"cube number must be 1..3, got {n}")
        return self.objects[n - 1]

    def tap_cube(self, n: int, now: float, taps: int = 1) -> bool:
        """ObjectTapped from cube ``n`` (1..3); False if it is not connected."""
        self.advance(now)
        obj = self._cube(n)
        if obj.object_id is None or not self.connected:
            return False
        self._emit(msgs.ObjectTapped(timestamp_ms=self.timestamp_ms(now), object_id=obj.object_id,
                                     num_taps=max(1, min(255, taps)), tap_time=12, tap_neg=-38,
                                     tap_pos=41))
        return True

    def move_cube(self, n: int, now: float, accel: Tuple[float, float, float] = (350.0, -120.0, 9810.0),
                  axis: int = 5) -> bool:
        self.advance(now)
        obj = self._cube(n)
        if obj.object_id is None or not self.connected:
            return False
        self._emit(msgs.ObjectMoved(timestamp_ms=self.timestamp_ms(now), object_id=obj.object_id,
                                    active_accel_x=accel[0], active_accel_y=accel[1],
                                    active_accel_z=accel[2], axis_of_accel=axis))
        return True

    def stop_cube(self, n: int, now: float) -> bool:
        self.advance(now)
        obj = self._cube(n)
        if obj.object_id is None or not self.connected:
            return False
        self._emit(msgs.ObjectStoppedMoving(timestamp_ms=self.timestamp_ms(now), object_id=obj.object_id))
        return True

    def set_cube_up_axis(self, n: int, axis: int, now: float) -> bool:
        self.advance(now)
        obj = self._cube(n)
        obj.up_axis = int(axis)
        if obj.object_id is None or not self.connected:
            return False
        self._emit(msgs.ObjectUpAxisChanged(timestamp_ms=self.timestamp_ms(now), object_id=obj.object_id,
                                            axis=axis))
        return True

    def set_cube_battery(self, n: int, level: int, now: float) -> None:
        self.advance(now)
        obj = self._cube(n)
        obj.battery_level = max(0, min(255, int(level)))
        obj.next_power = now

    def set_object_in_range(self, n: int, in_range: bool, now: float) -> None:
        """Take cube ``n`` (1..3; 0: the charger) out of radio range or bring it back.

        Out of range it stops advertising, a connection to it drops (the robot reports
        ObjectConnectionState with ``connected`` false) and ObjectConnect fails after
        ``OBJECT_CONNECT_FAIL_S``; back in range it advertises again at once."""
        self.advance(now)
        if not 0 <= n <= 3:
            raise ValueError(f"object number must be 0 (charger) or 1..3, got {n}")
        obj = self.objects[n - 1] if n else self.objects[3]
        if bool(in_range) == obj.in_range:
            return
        obj.in_range = bool(in_range)
        if in_range:
            obj.next_available = now
            return
        obj.next_available = math.inf
        if obj.object_id is not None:
            object_id, obj.object_id = obj.object_id, None
            obj.stream_accel = False
            if self.connected:
                self._emit(msgs.ObjectConnectionState(object_id=object_id, factory_id=obj.factory_id,
                                                      object_type=obj.object_type, connected=False))

    # ------------------------------------------------------------------ ground truth

    def true_pose(self) -> Tuple[float, float, float]:
        """World pose (x mm, y mm, yaw rad in [-pi, pi))."""
        return self.x, self.y, wrap_angle(self.yaw_u)

    @property
    def head_angle(self) -> float:
        return self.head.pos

    @property
    def lift_height(self) -> float:
        return lift_angle_to_height(self.lift.pos)

    @property
    def is_moving(self) -> bool:
        return self._needs_physics()

    def display_history(self) -> List[np.ndarray]:
        return list(self._display_history)

    def audio_pcm(self) -> np.ndarray:
        """Every audio frame played (silence as zeros), oldest first, int16."""
        if not self._audio:
            return np.zeros(0, dtype=np.int16)
        return np.concatenate(list(self._audio))

    def lights(self) -> Dict[str, Any]:
        """Light colours: backpack LightStates, animation colours, head light, cube lights."""
        return {
            "backpack": dict(self.backpack_lights),
            "anim_backpack": list(self.anim_backpack_colors),
            "head_light": self.head_light,
            "cubes": {obj.index: list(obj.lights) for obj in self.objects if obj.index},
            "charger": list(self.objects[3].lights),
        }

    def object_ids(self) -> Dict[int, Optional[int]]:
        """Cube number (1..3, 0 for the charger) -> object id, or None if not connected."""
        return {obj.index: obj.object_id for obj in self.objects}

    def object_states(self) -> Dict[int, Dict[str, Any]]:
        """Cube number (1..3, 0 for the charger) -> factory id, object id, in range, light
        states, rotation period (frames), accelerometer stream, battery level, up axis."""
        return {obj.index: {"factory_id": obj.factory_id, "object_id": obj.object_id,
                            "in_range": obj.in_range, "lights": list(obj.lights),
                            "rotation_period_frames": obj.rotation_period_frames,
                            "stream_accel": obj.stream_accel, "battery_level": obj.battery_level,
                            "up_axis": obj.up_axis}
                for obj in self.objects}


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
