"""Continuous odometry from the robot's reported pose, and honest covariances.

The robot reports its pose (x, y, yaw) in a frame it identifies by
``pose_frame_id``/``pose_origin_id``. That pose can jump: on every new connection
the driver's SetOrigin puts it back to (0, 0, 0) wherever the robot stands; an
engine may re-anchor it (new frame ids) after the robot was picked up or
delocalized; a reboot restarts it at zero. A published ``odom`` pose must never
jump (REP-105: odom is continuous; Nav2 and robot_localization assume it).

Policy (:class:`OdometryTracker`): the published pose is ``offset * reported``,
with ``offset`` a rigid 2D transform. It starts as the identity. Whenever

* a new connection starts (the first pose after (re)connecting),
* the head starts to calibrate (Anki's firmware restarts its heading then: its IMU
  filter's rotation goes back to 0 while the head is not calibrated, and the
  reported yaw with it: :meth:`OdometryTracker.reanchor_next`),
* the reported frame ids change, or
* the reported heading turns between two consecutive reports further than the
  gyro's yaw rate allows (``yaw_rate``: more than ``jump_gyro_rad +
  jump_gyro_rate_radps * dt`` off the mean of its rates at both reports times dt,
  the difference wrapped to +-pi; the robot's heading is its gyro's integral,
  so this catches a restart too small for the rule below, such as the head
  calibration's when its event comes after the state; not across a gap of more
  than ``jump_gyro_max_dt_s``, lost states, in which the turn is not known), or
* the reported pose moves further between two consecutive reports than the
  robot can drive (more than ``jump_distance_m + jump_speed_mps * dt`` or
  ``jump_angle_rad + jump_rate_radps * dt``),

the offset is recomposed so that the published pose at that instant equals the
last published pose: odometry continues from where it was and the robot's
motion from then on is added to it. Only :meth:`OdometryTracker.reset` (the
``reset_odometry`` service) makes the published pose jump, to the origin: at once, from
the latest reported pose (or from the first one, if none came yet).

Covariances (:func:`pose_covariance`, :func:`twist_covariance`) are diagonal.
x, y and yaw grow with the distance driven and the angle turned since the last
reset (dead reckoning drifts); z, roll and pitch are not observed by planar
odometry and get :data:`UNOBSERVED_VARIANCE`. Pure.
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Tuple

from ..robot_geometry import TRACK_WIDTH_M
from .transforms import quaternion_from_rpy

__all__ = [
    "Pose2D",
    "compose",
    "inverse",
    "wrap_angle",
    "OdometryTracker",
    "pose_covariance",
    "pose_variances",
    "twist_covariance",
    "twist_variances",
    "quaternion_from_yaw",
    "quaternion_from_rpy",
    "UNOBSERVED_VARIANCE",
]

#: variance given to quantities that are not measured at all
UNOBSERVED_VARIANCE = 1.0e6

# Dead-reckoning drift model (estimates for Cozmo's treads; see docs/driver.md, Odometry re-anchoring):
_BASE_VAR_XY = 1.0e-6           # m^2 right after a reset
_VAR_XY_PER_M = 0.05 ** 2       # m^2 per metre driven: 5 cm 1-sigma after 1 m
_BASE_VAR_YAW = 1.0e-6          # rad^2
_VAR_YAW_PER_RAD = 0.05 ** 2    # rad^2 per radian turned
_VAR_YAW_PER_M = 0.1 ** 2       # rad^2 per metre driven (tread slip)
# Twist: tread speed noise 1-sigma (m/s); lateral slip of a non-holonomic base.
WHEEL_SPEED_SIGMA_MPS = 0.005
_VAR_VY = 1.0e-4


def wrap_angle(a: float) -> float:
    """The angle in [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


class Pose2D(NamedTuple):
    """A planar pose (immutable; a named tuple, made at every robot state)."""

    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0


def compose(a: Pose2D, b: Pose2D) -> Pose2D:
    """``a * b``: pose ``b`` expressed in the frame where ``a`` is given."""
    c, s = math.cos(a.yaw), math.sin(a.yaw)
    return Pose2D(a.x + c * b.x - s * b.y, a.y + s * b.x + c * b.y, wrap_angle(a.yaw + b.yaw))


def inverse(a: Pose2D) -> Pose2D:
    c, s = math.cos(a.yaw), math.sin(a.yaw)
    return Pose2D(-(c * a.x + s * a.y), -(-s * a.x + c * a.y), wrap_angle(-a.yaw))


class OdometryTracker:
    """Turns reported poses into a continuous odometry pose. See the module docstring."""

    def __init__(self, jump_distance_m: float = 0.05, jump_speed_mps: float = 0.3,
                 jump_angle_rad: float = 0.35, jump_rate_radps: float = 12.0,
                 jump_gyro_rad: float = 0.15, jump_gyro_rate_radps: float = 2.5,
                 jump_gyro_max_dt_s: float = 0.1) -> None:
        self.jump_distance_m = jump_distance_m
        self.jump_speed_mps = jump_speed_mps
        self.jump_angle_rad = jump_angle_rad
        self.jump_rate_radps = jump_rate_radps
        self.jump_gyro_rad = jump_gyro_rad
        self.jump_gyro_rate_radps = jump_gyro_rate_radps
        self.jump_gyro_max_dt_s = jump_gyro_max_dt_s
        self.offset = Pose2D()
        self.pose = Pose2D()          # the last published pose
        self.distance_m = 0.0         # driven since the last reset
        self.rotation_rad = 0.0       # turned since the last reset
        self.reanchors = 0
        #: how the resets moved the odom frame: the odom frame of before every reset, as seen in
        #: the current one (a pose p in odom before them is ``compose(reset_shift, p)`` now; a pose
        #: of between two readings a and b is ``compose(b, compose(inverse(a), p))``)
        self.reset_shift = Pose2D()
        self._frame: Optional[Tuple[int, int]] = None
        self._last_reported: Optional[Pose2D] = None
        self._last_t: Optional[float] = None
        self._last_yaw_rate: Optional[float] = None
        self._reanchor: Optional[str] = None
        self._reset = False

    def new_connection(self) -> None:
        """The next reported pose starts a new connection: re-anchor on it."""
        self.reanchor_next("new connection")

    def reanchor_next(self, reason: str) -> None:
        """Re-anchor on the next reported pose, for ``reason`` (the robot's pose restarts)."""
        self._reanchor = reason

    def reset(self) -> bool:
        """Make the latest reported pose the origin (0, 0, 0) at once (a goal checked right after
        converts its odom target with the new offset) and clear the drift; True. With no pose
        reported yet, the first one is the origin: False."""
        last = self._last_reported
        self._reset = last is None
        if last is not None:
            self._restart_at(inverse(last))
            self.pose = Pose2D()
            self.distance_m = 0.0
            self.rotation_rad = 0.0
        return last is not None

    def update(self, frame: Tuple[int, int], x: float, y: float, yaw: float,
               t: float, yaw_rate: Optional[float] = None) -> Tuple[Pose2D, Optional[str]]:
        """The odometry pose for a reported pose at the robot's time ``t`` (s, its own clock:
        a host stamp moves with the mapping of that clock and with the delays), and the reason
        of a re-anchoring (``None`` if there was none); ``yaw_rate``: the gyro's (rad/s)."""
        reported = Pose2D(x, y, wrap_angle(yaw))
        reason: Optional[str] = None
        last = self._last_reported
        if last is not None:
            if self._reanchor is not None:
                reason = self._reanchor
            elif frame != self._frame:
                reason = (f"the robot's pose frame changed from {self._frame[0]}/{self._frame[1]} "
                          f"to {frame[0]}/{frame[1]}")
            else:
                dt = max(0.0, t - self._last_t) if self._last_t is not None else 0.0
                dist = math.hypot(reported.x - last.x, reported.y - last.y)
                dyaw = wrap_angle(reported.yaw - last.yaw)
                turn = abs(dyaw)
                if dist > self.jump_distance_m + self.jump_speed_mps * dt:
                    reason = f"the robot's pose jumped by {dist:.3f} m in {dt:.3f} s"
                elif turn > self.jump_angle_rad + self.jump_rate_radps * dt:
                    reason = f"the robot's heading jumped by {turn:.2f} rad in {dt:.3f} s"
                elif self._gyro_disagrees(dyaw, dt, yaw_rate):
                    reason = (f"the robot's heading jumped by {turn:.2f} rad in {dt:.3f} s, "
                              f"which its gyro did not turn")
        self._reanchor = None
        if reason is not None:
            self.offset = compose(self.pose, inverse(reported))
            self.reanchors += 1
        if self._reset:
            self._reset = False
            self._restart_at(inverse(reported))
            self.pose = Pose2D()
            self.distance_m = 0.0
            self.rotation_rad = 0.0
        pose = compose(self.offset, reported)
        if reason is None:
            self.distance_m += math.hypot(pose.x - self.pose.x, pose.y - self.pose.y)
            self.rotation_rad += abs(wrap_angle(pose.yaw - self.pose.yaw))
        self.pose = pose
        self._frame = frame
        self._last_reported = reported
        self._last_t = t
        self._last_yaw_rate = yaw_rate if yaw_rate is not None and math.isfinite(yaw_rate) else None
        return pose, reason

    def _restart_at(self, offset: Pose2D) -> None:
        """A reset: ``offset`` from now on; the odom frame moves by the change (reset_shift)."""
        self.reset_shift = compose(compose(offset, inverse(self.offset)), self.reset_shift)
        self.offset = offset

    def _gyro_disagrees(self, dyaw: float, dt: float, yaw_rate: Optional[float]) -> bool:
        """Whether the reported turn ``dyaw`` (wrapped) is further off the gyro's than the rule
        allows: the gyro's turn is the mean of its rates at both states times ``dt``; no rule
        without a rate or over a gap longer than ``jump_gyro_max_dt_s`` (lost states: two samples
        cannot describe a turn that long, started, stopped or more than half a turn in it)."""
        if yaw_rate is None or not math.isfinite(yaw_rate) or dt > self.jump_gyro_max_dt_s:
            return False
        last = self._last_yaw_rate
        gyro_turn = (yaw_rate if last is None else 0.5 * (yaw_rate + last)) * dt
        return abs(wrap_angle(dyaw - gyro_turn)) > self.jump_gyro_rad + self.jump_gyro_rate_radps * dt


def _diag6(values) -> List[float]:
    out = [0.0] * 36
    for i, v in enumerate(values):
        out[7 * i] = float(v)
    return out


def pose_variances(distance_m: float, rotation_rad: float) -> Tuple[float, ...]:
    """The diagonal of :func:`pose_covariance` (x, y, z, roll, pitch, yaw)."""
    var_xy = _BASE_VAR_XY + _VAR_XY_PER_M * distance_m
    var_yaw = _BASE_VAR_YAW + _VAR_YAW_PER_RAD * rotation_rad + _VAR_YAW_PER_M * distance_m
    big = UNOBSERVED_VARIANCE
    return var_xy, var_xy, big, big, big, var_yaw


def pose_covariance(distance_m: float, rotation_rad: float) -> List[float]:
    """Row-major 6x6 covariance of an odometry pose (x, y, z, roll, pitch, yaw)."""
    return _diag6(pose_variances(distance_m, rotation_rad))


def twist_variances(yaw_rate_disagreement_radps: float = 0.0, track_m: float = TRACK_WIDTH_M,
                    unreliable: bool = False) -> Tuple[float, ...]:
    """The diagonal of :func:`twist_covariance` (vx, vy, vz, wx, wy, wz)."""
    big = UNOBSERVED_VARIANCE
    if unreliable:
        return (big,) * 6
    var_v = WHEEL_SPEED_SIGMA_MPS ** 2 / 2.0
    var_w = 2.0 * WHEEL_SPEED_SIGMA_MPS ** 2 / track_m ** 2 + yaw_rate_disagreement_radps ** 2
    return var_v, _VAR_VY, big, big, big, var_w


def twist_covariance(yaw_rate_disagreement_radps: float = 0.0, track_m: float = TRACK_WIDTH_M,
                     unreliable: bool = False) -> List[float]:
    """Row-major 6x6 covariance of a twist from tread speeds (vx, vy, vz, wx, wy, wz).

    ``yaw_rate_disagreement_radps`` is the difference between the treads' yaw
    rate and the gyro's: its square is added to wz's variance. ``unreliable``
    (the robot is picked up or falling: the treads say nothing about the motion)
    makes every term :data:`UNOBSERVED_VARIANCE`."""
    return _diag6(twist_variances(yaw_rate_disagreement_radps, track_m, unreliable))


def quaternion_from_yaw(yaw: float) -> Tuple[float, float, float, float]:
    """(x, y, z, w) of a rotation about z."""
    return 0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0)
