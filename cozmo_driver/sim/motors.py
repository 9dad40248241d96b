"""The simulated Cozmo's motors: wheels, head and lift, and the turn controller.

Pure and stateless apart from each motor's own state: :class:`Axis` is one
position/velocity controlled joint (the head's angle, the lift arm's angle),
:class:`Wheel` one tread ramping to its target speed, :class:`Turn` the
controller of a turn in place. :class:`~cozmo_driver.sim.body.Body` owns them.
Lengths in mm, angles in rad, times in s.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

from .. import robot_geometry as geometry

__all__ = [
    "Axis",
    "Wheel",
    "Turn",
    "TRACK_WIDTH_MM",
    "MAX_WHEEL_SPEED_MMPS",
    "DEFAULT_WHEEL_ACCEL_MMPS2",
    "HEAD_MIN_RAD",
    "HEAD_MAX_RAD",
    "HEAD_MAX_SPEED_RADPS",
    "LIFT_MIN_MM",
    "LIFT_MAX_MM",
    "LIFT_ARM_MM",
    "LIFT_PIVOT_MM",
    "LIFT_MAX_SPEED_RADPS",
    "LIFT_MIN_RAD",
    "LIFT_MAX_RAD",
    "lift_height_to_angle",
    "lift_angle_to_height",
    "wrap_angle",
]

TRACK_WIDTH_MM = geometry.TRACK_WIDTH_M * 1000.0
MAX_WHEEL_SPEED_MMPS = geometry.MAX_WHEEL_SPEED_MPS * 1000.0
#: what a wheel acceleration of 0 in DriveWheels stands for: Anki's firmware then commands
#: the target speed at once ("max acceleration", steeringController ManageDirectDrive),
#: which the tread reaches at the motor's own, here Anki's MAX_WHEEL_ACCEL_MMPS2 (a
#: negative one is taken by its size, as the firmware does)
DEFAULT_WHEEL_ACCEL_MMPS2 = 10000.0
HEAD_MIN_RAD = geometry.HEAD_MIN_ANGLE_RAD
HEAD_MAX_RAD = geometry.HEAD_MAX_ANGLE_RAD
HEAD_MAX_SPEED_RADPS = geometry.HEAD_MAX_SPEED_RADPS
LIFT_MIN_MM = geometry.LIFT_MIN_HEIGHT_M * 1000.0
LIFT_MAX_MM = geometry.LIFT_MAX_HEIGHT_M * 1000.0
LIFT_ARM_MM = geometry.LIFT_ARM_LENGTH_M * 1000.0
LIFT_PIVOT_MM = geometry.LIFT_PIVOT_HEIGHT_M * 1000.0
LIFT_MAX_SPEED_RADPS = geometry.LIFT_MAX_SPEED_RADPS
DEFAULT_AXIS_ACCEL_RADPS2 = 20.0
#: Anki's firmware takes a head or lift speed nearer zero than this for its full speed
#: (SetMaxSpeedAndAccel: NEAR_ZERO, FLOATING_POINT_COMPARISON_TOLERANCE), in MoveHead and
#: MoveLift too, whose sign still gives the direction (only an exact 0 stops)
FIRMWARE_NEAR_ZERO = 1e-5


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


class Axis:
    """One position/velocity controlled joint (head angle or lift arm angle), rad."""

    __slots__ = ("pos", "vel", "lo", "hi", "vcap", "mode", "target", "vmax", "accel", "cmd_vel",
                 "calibrating", "pending", "zero")

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
        #: calibrating: the motor drives to its low stop and takes no command; the latest
        #: one waits in ``pending`` (("velocity", args) or ("position", args))
        self.calibrating = False
        self.pending: Optional[Tuple[str, Tuple[float, ...]]] = None
        #: where the firmware's count of the angle has its 0 (rad): the low stop's once a
        #: calibration has ended; see :attr:`reading`
        self.zero = 0.0

    @property
    def reading(self) -> float:
        """The angle the firmware reports (rad): the true one once the axis was calibrated,
        before that counted from :attr:`zero`."""
        return self.pos - self.zero

    @property
    def moving(self) -> bool:
        if self.mode == "position":
            return True
        if self.mode == "velocity":
            return self.vel != 0.0
        return False

    def move_velocity(self, speed: float) -> None:
        if self.calibrating:
            self.pending = ("velocity", (speed,))
            return
        if 0.0 < abs(speed) < FIRMWARE_NEAR_ZERO:
            speed = math.copysign(self.vcap, speed)
        speed = max(-self.vcap, min(self.vcap, speed))
        self.mode = "velocity" if speed else "idle"
        self.cmd_vel = speed
        self.vel = speed

    def move_to(self, target: float, max_speed: float, accel: float, duration: float) -> None:
        if self.calibrating:
            self.pending = ("position", (target, max_speed, accel, duration))
            return
        self._move_to(target, max_speed, accel, duration)

    def _move_to(self, target: float, max_speed: float, accel: float, duration: float) -> None:
        target = max(self.lo, min(self.hi, target))
        accel = accel if accel > 0 else DEFAULT_AXIS_ACCEL_RADPS2
        # with a duration Anki's (later) firmware moves by the duration and ignores the speed
        max_speed = abs(max_speed)  # as the firmware: by its size, near zero the fastest
        vmax = min(max_speed, self.vcap) if max_speed >= FIRMWARE_NEAR_ZERO and duration <= 0 \
            else self.vcap
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
        """Stop (and forget a command waiting for the calibration, which goes on)."""
        self.pending = None
        if self.calibrating:
            return
        self.mode = "idle"
        self.vel = 0.0
        self.cmd_vel = 0.0

    def start_calibration(self, speed: float) -> float:
        """Drive to the low stop at ``speed`` taking no command; returns an upper bound of
        the seconds it takes to get there."""
        self.calibrating = False
        self.stop()
        self.calibrating = True
        self._move_to(self.lo, speed, DEFAULT_AXIS_ACCEL_RADPS2, 0.0)
        return abs(self.pos - self.lo) / speed + speed / DEFAULT_AXIS_ACCEL_RADPS2

    def end_calibration(self, keep_pending: bool) -> None:
        """The low stop is the axis' zero again: the axis rests there, then runs the command
        that waited if ``keep_pending`` (else it is dropped)."""
        pending, self.pending = self.pending, None
        self.calibrating = False
        self.pos = self.target = self.lo
        self.zero = 0.0
        self.stop()
        if keep_pending and pending is not None:
            kind, args = pending
            if kind == "velocity":
                self.move_velocity(*args)
            else:
                self.move_to(*args)

    def abandon_calibration(self) -> None:
        """A calibration under way ends where it is (a motor not calibrating goes on)."""
        if self.calibrating:
            self.calibrating = False
            self.stop()

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


class Wheel:
    """One tread: its speed (mm/s) ramps to the target at its acceleration (mm/s^2)."""

    __slots__ = ("speed", "target", "accel")

    def __init__(self) -> None:
        self.speed = 0.0
        self.target = 0.0
        self.accel = DEFAULT_WHEEL_ACCEL_MMPS2

    def command(self, target: float, accel: float) -> None:
        self.target = max(-MAX_WHEEL_SPEED_MMPS, min(MAX_WHEEL_SPEED_MMPS, target))
        self.accel = abs(accel) if accel != 0 else DEFAULT_WHEEL_ACCEL_MMPS2

    def halt(self) -> None:
        self.speed = self.target = 0.0

    def step(self, dt: float) -> None:
        s, t = self.speed, self.target
        if s != t:
            dv = self.accel * dt
            self.speed = min(t, s + dv) if s < t else max(t, s - dv)


def turn_the_way(delta: float, speed: float) -> float:
    """A turn of ``delta`` (within -pi..pi) taken the way ``speed``'s sign says (0:
    anticlockwise): the same heading, a whole turn the other way round if need be."""
    if speed >= 0.0 and delta < 0.0:
        return delta + 2.0 * math.pi
    if speed < 0.0 and delta > 0.0:
        return delta - 2.0 * math.pi
    return delta


class Turn:
    """A turn in place to an unwrapped heading target (TurnInPlace, point turns)."""

    __slots__ = ("target", "wmax", "alpha", "tol", "w")

    def __init__(self, target: float, wmax: float, alpha: float, tol: float) -> None:
        self.target = target
        # as the firmware: a slower turn is sped up to its slowest (0 too)
        self.wmax = min(max(wmax, geometry.MIN_TURN_RATE_RADPS),
                        2.0 * MAX_WHEEL_SPEED_MMPS / TRACK_WIDTH_MM)
        self.alpha = alpha
        self.tol = max(tol, math.radians(0.25))
        self.w = 0.0

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

