"""The simulated Cozmo's body and motion: pose, motors, IMU, battery, cliffs.

:class:`Body` is the physical robot: its true pose in the world, the odometry
frame it reports (SetOrigin), the wheels, head and lift
(:mod:`cozmo_driver.sim.motors`), the accelerometer and gyro, the battery, the
the cliff sensor, falls, pick-ups and the charger. It integrates the pose in
substeps of at most ``physics_dt``. A *base controller* (a turn in place, or the
:class:`~cozmo_driver.sim.path.PathFollower`) may own the wheels: it is stepped
before them in every substep and told when it is interrupted. The body handles
the motion commands (DriveWheels, TurnInPlace, SetHeadAngle, SetOrigin, ...);
everything else about it is in :mod:`cozmo_driver.sim.model`'s docstring.
"""

from __future__ import annotations

import logging
import math
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import robot_geometry as geometry
from ..protocol import messages as msgs
from ..protocol.status import RobotStatusFlag as StatusFlag
from .firmware import Firmware, finite
from .motors import (
    DEFAULT_WHEEL_ACCEL_MMPS2,
    HEAD_MAX_RAD,
    HEAD_MAX_SPEED_RADPS,
    HEAD_MIN_RAD,
    LIFT_MAX_RAD,
    LIFT_MAX_SPEED_RADPS,
    LIFT_MIN_RAD,
    MAX_WHEEL_SPEED_MMPS,
    TRACK_WIDTH_MM,
    Axis,
    Turn,
    Wheel,
    lift_angle_to_height,
    lift_height_to_angle,
    turn_the_way,
    wrap_angle,
)

__all__ = [
    "Body",
    "BaseController",
    "GRAVITY_MMPS2",
    "BATTERY_EMPTY_V",
    "BATTERY_FULL_V",
    "CLIFF_GROUND_RAW",
    "CLIFF_DROP_RAW",
    "CLIFF_THRESHOLD_RAW",
    "CLIFF_SENSOR_OFFSETS_MM",
    "BACKPACK_TOUCH_RAW",
]

logger = logging.getLogger("cozmo.sim")

GRAVITY_MMPS2 = 9810.0
#: the voltages of an empty and a full charge (``soc`` 0 and 1): the range over which Anki's
#: body firmware computes its battery level, so that ``soc`` is the level a driver shows (a
#: charging battery reads 0.03 V more)
BATTERY_EMPTY_V = geometry.BATTERY_EMPTY_V
BATTERY_FULL_V = geometry.BATTERY_FULL_V
#: raw cliff readings over the table and over an edge: on either side of Anki's firmware's
#: thresholds (a drop below 400, the floor again above 600: CLIFF_SENSOR_DROP_LEVEL and
#: _UNDROP_LEVEL), values of the simulator's own
CLIFF_GROUND_RAW = 800
CLIFF_DROP_RAW = 25
#: a cliff sensor reading below this is a drop (CLIFF_DETECTED; the firmware's drop level)
CLIFF_THRESHOLD_RAW = 400
#: (forward, left) in mm from the robot's origin of each cliff sensor: the one the protocol
#: documents, under the front (RobotState still carries four readings: this one's, repeated)
CLIFF_SENSOR_OFFSETS_MM: Tuple[Tuple[float, float], ...] = ((geometry.CLIFF_SENSOR_X_M * 1000.0, 0.0),)
BACKPACK_TOUCH_RAW = 812
_BACK_PITCH = math.radians(74.5)  # the backpack holds a robot on its back at this pitch
#: which way the robot lies -> (RobotState pitch rad, accelerometer x, y, z mm/s^2): the
#: accelerometer reads gravity's reaction, up, in the robot's axes (x forward, y left, z up)
_LYING: Dict[str, Tuple[float, Tuple[float, float, float]]] = {
    "back": (_BACK_PITCH, (GRAVITY_MMPS2 * math.sin(_BACK_PITCH), 0.0,
                           GRAVITY_MMPS2 * math.cos(_BACK_PITCH))),
    "face": (-math.pi / 2, (-GRAVITY_MMPS2, 0.0, 0.0)),
    "left": (0.0, (0.0, -GRAVITY_MMPS2, 0.0)),
    "right": (0.0, (0.0, GRAVITY_MMPS2, 0.0)),
}
#: how long a lift takes to read as picked up, and a set-down as put down (s). Anki's firmware
#: counts its 5 ms control ticks (IMUFilter::DetectPickup): more than 20 ticks of motion while
#: the motors are idle (more than 40 while they run), and more than 40 calm ticks, upright, with
#: the floor seen again. The cliff sensor loses and finds the floor at once.
PICKUP_DETECT_S = 0.105
PICKUP_DETECT_MOVING_S = 0.205
PUT_DOWN_DETECT_S = 0.205
_DISTANCE_OFF_CHARGER_MM = 30.0
_MotorID = msgs.ENUMS["MotorID"]
#: a calibrating motor drives to its low stop at this fraction of its top speed (a guess:
#: the firmware drives it at about a third of full power), and rests there this long (s)
#: before it reports the end (the firmware waits for 0.5 s without motion, and the lift
#: 0.25 s more with the power off)
CALIBRATION_SPEED_FRACTION = 0.35
CALIBRATION_REST_S = {_MotorID.MOTOR_HEAD: 0.5, _MotorID.MOTOR_LIFT: 0.75}


class BaseController:
    """What may own the wheels for a while (a turn in place, a path): stepped before the
    wheels in every physics substep; it hands them back by clearing ``Body.controller``."""

    #: a path: DriveWheels is ignored while it runs (as in Anki's firmware)
    follows_path = False

    def step(self, dt: float) -> None:
        raise NotImplementedError

    def interrupt(self, reason: str) -> None:
        """Another command took the wheels."""


class _TurnInPlace(BaseController):
    """TurnInPlace (acknowledged when taken, not here) and TurnToRecordedHeading.

    As Anki's firmware (steeringController: a point turn takes the steering without
    clearing the path, and its end hands it back to the path follower), a turn taken
    while a path runs keeps that path (``resume``): IS_PATHING stays set, DriveWheels is
    still ignored, and the path goes on when the turn ends (the firmware goes on at a
    point-turn segment; on a line or arc the turn has set its speed to 0, and the robot
    holds there, still on the path); an interruption of the turn (ClearPath,
    StopAllMotors, a new path) ends the path too."""

    def __init__(self, body: "Body", turn: Turn, resume: Optional[BaseController] = None) -> None:
        self.body = body
        self.turn = turn
        self.resume = resume
        self.follows_path = resume is not None

    def step(self, dt: float) -> None:
        body = self.body
        w = self.turn.step(body.yaw_u, dt)
        if w is None:
            body.set_wheels_direct(0.0, 0.0)
            body.controller = self.resume
        else:
            r = w * TRACK_WIDTH_MM / 2.0
            body.set_wheels_direct(-r, r)

    def interrupt(self, reason: str) -> None:
        logger.debug("turn interrupted: %s", reason)
        if self.resume is not None:
            self.resume.interrupt(reason)


class Body:
    """The robot's physical self. Physical state (pose, battery, on the charger, fallen)
    survives :meth:`boot`; firmware state (motors, odometry frame, controller) does not."""

    def __init__(self, fw: Firmware, world: Any) -> None:
        self.fw = fw
        self.world = world
        cfg = fw.config
        if cfg.start_pose is not None:
            x, y, yaw = cfg.start_pose
        elif cfg.start_on_charger and getattr(world, "charger_pose", None) is not None:
            x, y, yaw = world.charger_pose
        else:
            x, y, yaw = 0.0, 0.0, 0.0
        self.x, self.y = float(x), float(y)
        self.yaw_u = float(yaw)          # unwrapped world yaw
        self.soc = min(1.0, max(0.0, cfg.battery_soc))
        self.on_charger = bool(cfg.start_on_charger)
        self._charger_spot = (self.x, self.y) if self.on_charger else None
        self.on_floor = False            # fell off the table
        #: held in the air (or set down off its treads): the treads touch nothing
        self.picked_up = False
        #: the firmware's "picked up" (IS_PICKED_UP): follows ``picked_up`` after the firmware's
        #: detection times (PICKUP_DETECT_S, PUT_DOWN_DETECT_S)
        self.pickup_detected = False
        self._pickup_changes = 0  # bumped by each pick-up and put-down: a later one wins
        #: None, or which way it lies when set down off its treads: "back", "face", "left", "right"
        self.lying: Optional[str] = None
        self.falling = False
        self._fall_started: Optional[float] = None
        #: held where it stands, or its treads stalled against something: see hold_treads
        self.treads_held = False
        self.boot()

    def boot(self) -> None:
        """Firmware state at power-up: odometry at zero, motors idle."""
        self.pose_frame_id = 0
        self.pose_origin_id = 0
        self.set_anchor(0.0, 0.0, 0.0)
        #: the true heading where the IMU filter's rotation was last put back to 0 (see
        #: restart_heading)
        self._imu_zero_yaw = self.yaw_u
        self.wheels = (Wheel(), Wheel())
        self.head = Axis(HEAD_MIN_RAD, HEAD_MIN_RAD, HEAD_MAX_RAD, HEAD_MAX_SPEED_RADPS)
        self.lift = Axis(LIFT_MIN_RAD, LIFT_MIN_RAD, LIFT_MAX_RAD, LIFT_MAX_SPEED_RADPS)
        # Anki's firmware counts the head and lift angles from 0 (looking straight ahead,
        # the arm level) at power-up, wherever they are, until their first calibration sets
        # them to the low stop's (Head/LiftController: currentAngle_, ResetLowAnglePosition);
        # a robot that does not calibrate at connection starts calibrated
        if self.fw.config.calibrate_at_connection:
            self.head.zero = self.head.pos
            self.lift.zero = self.lift.pos
        self._calibrations = 0  # bumped when a calibration under way is abandoned
        self.controller: Optional[BaseController] = None
        self._prev_v = 0.0
        self._accel_fwd = 0.0
        self._w = 0.0
        self.stop_on_cliff = True  # the firmware's default (EnableStopOnCliff changes it)
        #: the treads were stopped at the drop the sensor still sees: not stopped again
        self._cliff_stopped = False

    def handlers(self) -> Dict[str, Callable[[Any, float], None]]:
        return {"SetOrigin": self._on_SetOrigin, "StartMotorCalibration": self._on_StartMotorCalibration,
                "DriveWheels": self._on_DriveWheels, "TurnInPlaceAtSpeed": self._on_TurnInPlaceAtSpeed,
                "TurnInPlace": self._on_TurnInPlace, "MoveHead": self._on_MoveHead,
                "MoveLift": self._on_MoveLift, "SetHeadAngle": self._on_SetHeadAngle,
                "SetLiftHeight": self._on_SetLiftHeight, "EnableStopOnCliff": self._on_EnableStopOnCliff}

    # ------------------------------------------------------------------ physics

    def needs_physics(self) -> bool:
        lw, rw = self.wheels
        return (lw.speed != 0.0 or rw.speed != 0.0 or lw.target != 0.0 or rw.target != 0.0
                or self.head.moving or self.lift.moving or self.controller is not None)

    def integrate(self, until: float) -> None:
        """Run the body from ``fw.t`` up to ``until``."""
        fw = self.fw
        if not self.needs_physics():
            self._battery(until - fw.t, moving=False)
            fw.t = max(fw.t, until)
            self._prev_v = 0.0
            self._accel_fwd = 0.0
            self._w = 0.0
            return
        dt_max = fw.config.physics_dt
        while fw.t < until - 1e-12:
            dt = min(dt_max, until - fw.t)
            self._physics_step(dt)
            fw.t += dt
        fw.t = max(fw.t, until)

    def _physics_step(self, dt: float) -> None:
        moving_motors = self.needs_physics()
        if self.controller is not None:
            self.controller.step(dt)
        lw, rw = self.wheels
        lw.step(dt)
        rw.step(dt)
        v = (lw.speed + rw.speed) / 2.0 if not self.treads_held else 0.0
        w = (rw.speed - lw.speed) / TRACK_WIDTH_MM if not self.treads_held else 0.0
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
            if self.head.calibrating:  # the IMU filter's rotation stays 0: the heading holds
                self.restart_heading()
            self._after_motion()
        self.head.step(dt)
        self.lift.step(dt)
        self._battery(dt, moving=moving_motors)

    def set_wheels_direct(self, left: float, right: float) -> None:
        """Wheel speeds set by a controller that already shapes them (no ramp)."""
        lw, rw = self.wheels
        for wheel, s in ((lw, left), (rw, right)):
            s = max(-MAX_WHEEL_SPEED_MMPS, min(MAX_WHEEL_SPEED_MMPS, s))
            wheel.target = s
            wheel.accel = 1e6
            wheel.speed = s

    def _battery(self, dt: float, moving: bool) -> None:
        if dt <= 0:
            return
        cfg = self.fw.config
        if self.on_contacts:
            self.soc = min(1.0, self.soc + cfg.battery_charge * dt)
        else:
            rate = cfg.battery_drain_moving if moving else cfg.battery_drain_idle
            self.soc = max(0.0, self.soc - rate * dt)

    def _after_motion(self) -> None:
        if self._charger_spot is not None:
            if math.hypot(self.x - self._charger_spot[0], self.y - self._charger_spot[1]) > \
                    _DISTANCE_OFF_CHARGER_MM:
                self.on_charger = False
                self._charger_spot = None
        if self.on_floor:
            return
        now = self.fw.t
        cliff = any(self.cliff_readings())
        if not cliff:
            self._cliff_stopped = False
        elif self._stop_at_drop(now):
            return
        if self.world.cliff_at(self.x, self.y):
            # the robot's centre went over the edge: it falls off the table
            self.halt_base(now, reason="cliff")
            self.on_floor = True
            self.start_fall(now, 0.35, impact=850.0)

    def _stop_at_drop(self, now: float) -> bool:
        """The cliff sensor has lost the floor: as Anki's firmware (ProxSensors::UpdateCliff),
        treads going forwards stop, once; while it still sees no floor a new forward drive
        is not stopped (the driver holds cmd_vel's), backwards nothing sees the edge, and a
        robot the firmware knows to be picked up is not stopped. Whether it stopped them."""
        lw, rw = self.wheels
        if not self.stop_on_cliff or (lw.speed + rw.speed) <= 0.0 or self._cliff_stopped \
                or self.pickup_detected:
            return False
        logger.debug("stop on cliff at (%.1f, %.1f)", self.x, self.y)
        self._cliff_stopped = True
        self.halt_base(now, reason="cliff")
        return True

    # ------------------------------------------------------------------ base control

    def start_turn(self, target: float, speed: float, accel: float, tol: float,
                   resume: Optional[BaseController] = None) -> None:
        """Turn in place to the unwrapped world heading ``target`` (then go on with the
        path ``resume``, see :class:`_TurnInPlace`)."""
        self.controller = _TurnInPlace(self, Turn(target, speed, accel, tol), resume)

    def end_base_mode(self, now: float, reason: str) -> None:
        """Abandon a running turn or path; the wheels ramp down."""
        controller = self.controller
        if controller is not None:
            self.controller = None
            controller.interrupt(reason)
            for wheel in self.wheels:
                wheel.command(0.0, DEFAULT_WHEEL_ACCEL_MMPS2)

    def halt_base(self, now: float, reason: str) -> None:
        """Abandon a turn or path and stop the wheels at once."""
        self.end_base_mode(now, reason)
        for wheel in self.wheels:
            wheel.halt()

    # ------------------------------------------------------------------ sensors

    def cliff_readings(self) -> List[bool]:
        """Which cliff sensors (:data:`CLIFF_SENSOR_OFFSETS_MM`) see a drop now."""
        if self.picked_up or self.falling:
            return [True] * len(CLIFF_SENSOR_OFFSETS_MM)       # nothing under the robot
        if self.on_floor:
            return [False] * len(CLIFF_SENSOR_OFFSETS_MM)
        c, s = math.cos(self.yaw_u), math.sin(self.yaw_u)
        cliff_at = self.world.cliff_at
        return [bool(cliff_at(self.x + c * fx - s * fy, self.y + s * fx + c * fy))
                for fx, fy in CLIFF_SENSOR_OFFSETS_MM]

    @property
    def on_contacts(self) -> bool:
        """On the charger's contacts: on the charger, on its treads and not lifted off (a robot
        picked up or lying down keeps its place on it, ``on_charger``, but is not charged)."""
        return self.on_charger and not self.picked_up and self.lying is None

    def status(self) -> int:
        """The RobotState status bits the body knows."""
        flags = 0
        lw, rw = self.wheels
        wheels_moving = lw.speed != 0.0 or rw.speed != 0.0
        if wheels_moving:
            flags |= StatusFlag.ARE_WHEELS_MOVING
        if wheels_moving or self.head.moving or self.lift.moving:
            flags |= StatusFlag.IS_MOVING
        # the firmware's IsPickedUp() includes falling; it resets its IMU filter, and so its
        # pick-up detection, until the head is calibrated (IMUFilter::Update)
        if (self.pickup_detected and not self.head.calibrating) or self.falling:
            flags |= StatusFlag.IS_PICKED_UP
        if self.falling:
            flags |= StatusFlag.IS_FALLING
        if not self.lift.moving:
            flags |= StatusFlag.LIFT_IN_POS
        if not self.head.moving:
            flags |= StatusFlag.HEAD_IN_POS
        if self.on_contacts:
            flags |= StatusFlag.IS_ON_CHARGER
            if self.soc < 1.0:
                flags |= StatusFlag.IS_CHARGING
        if any(self.cliff_readings()):
            flags |= StatusFlag.CLIFF_DETECTED
        return int(flags)

    def battery_voltage(self) -> float:
        """Battery voltage without noise (V)."""
        v = BATTERY_EMPTY_V + (BATTERY_FULL_V - BATTERY_EMPTY_V) * self.soc
        if self.needs_physics() and not self.on_contacts:
            v -= self.fw.config.battery_sag_v
        if self.on_contacts and self.soc < 1.0:
            v += 0.03  # charging voltage rides above the open-circuit one
        return min(BATTERY_FULL_V + 0.05, v)

    def sensor_fields(self) -> Dict[str, Any]:
        """RobotState's fields that the body measures, with seeded noise."""
        cfg = self.fw.config
        rng = self.fw.rng
        noise = cfg.noise
        lw, rw = self.wheels
        x, y, yaw = self.reported_pose()
        pitch = 0.0
        if self.falling:
            ax = ay = az = 0.0
        elif self.lying is not None:
            pitch, (ax, ay, az) = _LYING[self.lying]
            if self.head.calibrating:
                pitch = 0.0  # the firmware resets its IMU filter while the head calibrates
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
        # the IMU sits in the head: RobotState carries its readings in the head's axes, x and z
        # turned up by the head angle (Anki's firmware sends them raw)
        hc, hs = math.cos(self.head.pos), math.sin(self.head.pos)
        ax, az = ax * hc + az * hs, az * hc - ax * hs
        gx, gz = gx * hc + gz * hs, gz * hc - gx * hs
        cliffs = []
        readings = self.cliff_readings()
        for k in range(4):  # RobotState's four: the sensors' readings, the last one repeated
            raw = CLIFF_DROP_RAW if readings[min(k, len(readings) - 1)] else CLIFF_GROUND_RAW
            if noise:
                raw += int(round(rng.gauss(0, cfg.cliff_noise_raw)))
            cliffs.append(max(0, min(0xFFFF, raw)))
        touch = BACKPACK_TOUCH_RAW + (rng.randint(-2, 2) if noise else 0)
        return dict(
            pose_frame_id=self.pose_frame_id, pose_origin_id=self.pose_origin_id,
            pose_x_mm=x, pose_y_mm=y, pose_z_mm=0.0, pose_angle_rad=yaw, pose_pitch_rad=pitch,
            # the treads' encoders: a held tread measures nothing, whatever it is driven at
            lwheel_speed_mmps=0.0 if self.treads_held else lw.speed,
            rwheel_speed_mmps=0.0 if self.treads_held else rw.speed,
            head_angle_rad=self.head.reading,
            lift_height_mm=self.lift.reading if cfg.lift_field_is_angle else lift_angle_to_height(self.lift.reading),
            accel_x_mmps2=ax, accel_y_mmps2=ay, accel_z_mmps2=az,
            gyro_x_radps=gx, gyro_y_radps=gy, gyro_z_radps=gz,
            battery_voltage_v=volt, cliff_data_raw=cliffs, backpack_touch_sensor_raw=touch)

    def imu_rates(self) -> Tuple[float, float, float]:
        """Gyro rates (rad/s) as the camera's ImageImuData reports them."""
        return 0.0, 0.0, self._w

    # ------------------------------------------------------------------ pose frames

    def true_pose(self) -> Tuple[float, float, float]:
        """World pose (x mm, y mm, yaw rad in [-pi, pi))."""
        return self.x, self.y, wrap_angle(self.yaw_u)

    def reported_pose(self) -> Tuple[float, float, float]:
        """Odometry pose (x mm, y mm, yaw rad) in the frame set by SetOrigin."""
        ax, ay, ayaw = self.anchor
        dx, dy = self.x - ax, self.y - ay
        c, s = math.cos(-ayaw), math.sin(-ayaw)
        return dx * c - dy * s, dx * s + dy * c, wrap_angle(self.yaw_u - ayaw)

    def set_anchor(self, rx: float, ry: float, ryaw: float) -> None:
        """Make the reported pose equal (rx, ry, ryaw) at the current true pose."""
        ayaw = self.yaw_u - ryaw
        c, s = math.cos(ayaw), math.sin(ayaw)
        #: the odometry frame's origin in the world: (x mm, y mm, yaw rad)
        self.anchor = (self.x - (rx * c - ry * s), self.y - (rx * s + ry * c), ayaw)

    def restart_heading(self) -> None:
        """The head starts to calibrate, or calibrates and the robot turned: as Anki's
        firmware, whose reported heading is its IMU filter's rotation plus an offset (kept
        from the last SetOrigin) and which puts that rotation back to 0 at every tick while
        the head is not calibrated (IMUFilter::Update, Reset), the reported heading goes
        back to that offset, and holds there for the whole calibration (each physics step
        that turns restarts it again: x and y go on along the held heading); x and y stay."""
        rx, ry, _ = self.reported_pose()
        offset = self._imu_zero_yaw - self.anchor[2]
        self._imu_zero_yaw = self.yaw_u
        self.set_anchor(rx, ry, wrap_angle(offset))

    def engine_to_world(self, x: float, y: float) -> Tuple[float, float]:
        """A point of the odometry frame in the world frame."""
        ax, ay, ayaw = self.anchor
        c, s = math.cos(ayaw), math.sin(ayaw)
        return ax + x * c - y * s, ay + x * s + y * c

    @property
    def lift_height(self) -> float:
        return lift_angle_to_height(self.lift.pos)

    # ------------------------------------------------------------------ things done to the body

    def pick_up(self, now: float) -> None:
        """Someone lifts the robot: its cliff sensor loses the floor at once (treads going
        forwards stop at that drop); the firmware reads it as picked up after its detection
        time, and does nothing else about it: the treads go on as commanded, in the air
        (Anki's shipped firmware has no pick-up reaction of its own; its "pickup paralysis",
        IMUFilter::HandlePickupParalysis, is off unless an engine turns it on)."""
        if self.picked_up:
            return
        self.picked_up = True
        self._pickup_changes += 1
        change = self._pickup_changes
        self._stop_at_drop(now)  # the firmware cannot tell a lift from an edge yet
        moving = any(wheel.speed != 0.0 for wheel in self.wheels)

        def detected(t: float) -> None:
            if change == self._pickup_changes:
                self.pickup_detected = True
        self.fw.at(now + (PICKUP_DETECT_MOVING_S if moving else PICKUP_DETECT_S), detected)

    def put_down(self, now: float, pose: Optional[Tuple[float, float, float]] = None) -> None:
        """Set it down on its treads (at ``pose``, (x mm, y mm, yaw rad), if given): the floor
        is seen at once, "picked up" ends after the firmware's detection time. A pose that is
        not three finite numbers raises ValueError, before anything changes."""
        if pose is not None:
            try:
                x, y, yaw = pose
            except (TypeError, ValueError):
                raise ValueError(f"put_down: pose = {pose!r} is not (x mm, y mm, yaw rad)") from None
            self._place(x, y, yaw, "put_down")
        self.picked_up = False
        self.lying = None
        self.on_floor = self.on_floor and pose is None
        self._pickup_changes += 1
        change = self._pickup_changes

        def detected(t: float) -> None:
            if change == self._pickup_changes:
                self.pickup_detected = False
        self.fw.at(now + PUT_DOWN_DETECT_S, detected)

    def lay(self, now: float, side: str) -> None:
        """Someone sets the robot down on its back, face or a side (``_LYING``'s keys): like
        picked up, its treads touch nothing and its cliff sensor sees no floor, until
        :meth:`put_down` stands it on its treads again."""
        if side not in _LYING:
            raise ValueError(f"lay: {side!r} is not one of {sorted(_LYING)}")
        self.pick_up(now)
        self.lying = side

    def hold_treads(self, held: bool) -> None:
        """Someone holds the robot where it stands, or its treads stall against something
        (``held``), or lets it go: the firmware drives the treads on as commanded (a path
        follower pushes on, IS_PATHING and ARE_WHEELS_MOVING stay set: Anki's firmware sets
        the flag for the treads it drives), but they do not turn: the robot neither moves nor
        turns, its gyro and its treads' encoders measure nothing (RobotState's wheel speeds
        are 0)."""
        self.treads_held = bool(held)

    def teleport(self, x: float, y: float, yaw: float) -> None:
        """Move the true pose without telling odometry (a hand-placement): ``x``, ``y`` in mm,
        ``yaw`` in rad, finite numbers (else ValueError, and nothing moves)."""
        self._place(x, y, yaw, "teleport")

    def _place(self, x: Any, y: Any, yaw: Any, caller: str) -> None:
        for name, value in (("x", x), ("y", y), ("yaw", yaw)):
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = math.nan
            if not math.isfinite(number):
                raise ValueError(f"{caller}: {name} = {value!r} is not a finite number (x and y in "
                                 "mm, yaw in rad)")
        rep = self.reported_pose()
        self.x, self.y = float(x), float(y)
        self._imu_zero_yaw += float(yaw) - self.yaw_u  # unseen by the IMU filter too
        self.yaw_u = float(yaw)
        self.set_anchor(*rep)  # odometry keeps its value
        if self._charger_spot is not None:
            self.on_charger = False
            self._charger_spot = None

    def start_fall(self, now: float, duration: float, impact: float) -> None:
        """FallingStarted now, FallingStopped after ``duration`` seconds."""
        if self.falling:
            return
        fw = self.fw
        self.falling = True
        self._fall_started = now
        fw.emit(msgs.FallingStarted(unknown=fw.timestamp_ms(now)))

        def landed(t: float) -> None:
            self.falling = False
            fw.emit(msgs.FallingStopped(unknown=fw.timestamp_ms(t),
                                        duration_ms=int(round((t - now) * 1000)),
                                        impact_intensity=float(impact)))
        fw.at(now + duration, landed)

    def set_on_charger(self, on: bool, now: float, move: bool) -> None:
        if on:
            pose = getattr(self.world, "charger_pose", None)
            if move and pose is not None:
                self.halt_base(now, "placed on the charger")
                self.teleport(*pose)
            self.on_charger = True
            self.on_floor = False
            self._charger_spot = (self.x, self.y)
        else:
            self.on_charger = False
            self._charger_spot = None

    # ------------------------------------------------------------------ commands

    def _on_SetOrigin(self, m: Any, now: float) -> None:
        heading = struct.unpack("<f", struct.pack("<I", int(m.unknown5) & 0xFFFFFFFF))[0]
        if not math.isfinite(heading):
            heading = 0.0
        self.pose_frame_id = int(m.pose_frame_id)
        self.pose_origin_id = int(m.pose_origin_id)
        self.set_anchor(finite(m.pose_x_mm), finite(m.pose_y_mm), wrap_angle(heading))

    def calibrate(self, now: float, head: bool, lift: bool) -> None:
        """Calibrate the head and/or lift (at each connection's SyncTime, and on
        StartMotorCalibration): MotorCalibration started, the motor drives to its low
        stop taking no command, rests there (``CALIBRATION_REST_S``), and MotorCalibration
        ended. The head then runs the latest command that came meanwhile; the lift drops
        it. A motor already calibrating ignores a new start."""
        fw = self.fw
        generation = self._calibrations
        for wanted, motor_id, axis, keep in ((head, _MotorID.MOTOR_HEAD, self.head, True),
                                             (lift, _MotorID.MOTOR_LIFT, self.lift, False)):
            if not wanted or axis.calibrating:
                continue
            fw.emit(msgs.MotorCalibration(motor_id=motor_id, calib_started=True, auto_started=False))
            if axis is self.head:
                self.restart_heading()
            travel = axis.start_calibration(axis.vcap * CALIBRATION_SPEED_FRACTION)

            def done(t: float, motor_id: Any = motor_id, axis: Axis = axis, keep: bool = keep) -> None:
                if self._calibrations != generation or not axis.calibrating:
                    return  # abandoned: a new connection, or the client left
                axis.end_calibration(keep_pending=keep)
                fw.emit(msgs.MotorCalibration(motor_id=motor_id, calib_started=False,
                                              auto_started=False))
            fw.at(now + travel + CALIBRATION_REST_S[motor_id], done)

    def abandon_calibration(self) -> None:
        """The connection ended: a calibration under way stops without a word."""
        self._calibrations += 1
        self.head.abandon_calibration()
        self.lift.abandon_calibration()

    def _on_StartMotorCalibration(self, m: Any, now: float) -> None:
        self.calibrate(now, bool(m.head), bool(m.lift))

    def _on_DriveWheels(self, m: Any, now: float) -> None:
        if self.controller is not None and self.controller.follows_path:
            # as Anki's firmware: DriveWheels is ignored while a path is followed (only
            # ClearPath, or StopAllMotors here, ends it)
            return
        self.end_base_mode(now, "interrupted by DriveWheels")
        lw, rw = self.wheels
        lw.command(finite(m.lwheel_speed_mmps), finite(m.lwheel_accel_mmps2))
        rw.command(finite(m.rwheel_speed_mmps), finite(m.rwheel_accel_mmps2))

    def _on_TurnInPlaceAtSpeed(self, m: Any, now: float) -> None:
        self.end_base_mode(now, "interrupted by TurnInPlaceAtSpeed")
        direction = 1.0 if int(m.direction) >= 0 else -1.0
        speed = abs(finite(m.wheel_speed_mmps)) * direction
        accel = finite(m.wheel_accel_mmps2)
        lw, rw = self.wheels
        lw.command(-speed, accel)
        rw.command(speed, accel)

    def _on_TurnInPlace(self, m: Any, now: float) -> None:
        """As Anki's firmware: the angle is the heading to reach (pose frame); the notes'
        ``is_absolute`` is "take the shortest direction", else the speed's sign is the
        direction and ``unknown4 | unknown5 << 8`` the half turns to make. Acknowledged
        when taken."""
        controller = self.controller
        resume = None  # a path keeps running under the turn (see _TurnInPlace)
        if controller is not None and controller.follows_path:
            resume = getattr(controller, "resume", None) or controller
        else:
            self.end_base_mode(now, "interrupted by TurnInPlace")
        delta = wrap_angle(finite(m.angle_rad, limit=1e3) + self.anchor[2] - self.yaw_u)
        signed_speed = finite(m.speed_rad_per_sec)
        if not m.is_absolute:
            way = -1.0 if signed_speed < 0 else 1.0
            delta = turn_the_way(delta, signed_speed)  # the target on the side the turn goes
            half_turns = int(m.unknown4) | (int(m.unknown5) << 8)
            while abs(delta) < math.pi * (half_turns - 0.5):  # at most 32768 rounds
                delta += way * 2.0 * math.pi
            while abs(delta) > math.pi * (half_turns + 1.5):
                delta -= way * 2.0 * math.pi
        speed = abs(signed_speed) or math.pi
        accel = abs(finite(m.accel_rad_per_sec2)) or 10.0
        self.fw.emit(msgs.AcknowledgeAction(action_id=int(m.action_id)))
        self.start_turn(self.yaw_u + delta, speed, accel, abs(finite(m.angle_tolerance_rad)),
                        resume)

    def _on_MoveHead(self, m: Any, now: float) -> None:
        self.head.move_velocity(finite(m.speed_rad_per_sec))

    def _on_MoveLift(self, m: Any, now: float) -> None:
        self.lift.move_velocity(finite(m.speed_rad_per_sec))

    def _on_SetHeadAngle(self, m: Any, now: float) -> None:
        self.fw.emit(msgs.AcknowledgeAction(action_id=int(m.action_id)))
        self.head.move_to(finite(m.angle_rad, self.head.pos), finite(m.max_speed_rad_per_sec),
                          finite(m.accel_rad_per_sec2), finite(m.duration_sec, limit=3600.0))

    def _on_SetLiftHeight(self, m: Any, now: float) -> None:
        self.fw.emit(msgs.AcknowledgeAction(action_id=int(m.action_id)))
        self.lift.move_to(lift_height_to_angle(finite(m.height_mm, self.lift_height)),
                          finite(m.max_speed_rad_per_sec), finite(m.accel_rad_per_sec2),
                          finite(m.duration_sec, limit=3600.0))

    def _on_EnableStopOnCliff(self, m: Any, now: float) -> None:
        self.stop_on_cliff = bool(m.enable)
