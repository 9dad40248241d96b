"""Motion actions without ROS: path segments, path conversion, planning, goal checks,
and the trackers that turn the robot's replies into action outcomes.

Units: metres, radians and seconds everywhere here, in a planar frame given by
the caller (the driver plans in the robot's own pose frame, see
:mod:`cozmo_driver.driver.odometry`); :func:`segment_message` converts a
segment into the robot's millimetres at the protocol boundary.

Path segments (:class:`Segment`, the fields of cozmo_interfaces/PathSegment)
-----------------------------------------------------------------------------
* ``LINE`` from (start_x, start_y) to (end_x, end_y);
* ``ARC``: part of the circle of centre (center_x, center_y) and ``radius``,
  from the point at ``start_angle`` (seen from the centre) through ``sweep``
  (positive counter-clockwise);
* ``POINT_TURN`` at (start_x, start_y) to the absolute ``heading`` within
  ``tolerance``.

``speed`` is m/s along lines and arcs (negative drives backwards) and rad/s of
the body for point turns; ``accel``/``decel`` likewise m/s^2 or rad/s^2; 0 means
the default given to :func:`apply_defaults`. A point turn goes to the robot as
it is, in the body's rad/s and rad/s^2, with its flag set for the shorter way
round and the speed signed the same way (:func:`segment_message`): Anki's robot
firmware reads the message so (its path follower's point turn takes a maximum
angular velocity, accelerations and a "use the shortest direction" flag from
these fields), though pycozmo names the speeds mm/s (docs/motion.md).

Conversion of a pose path (:func:`path_to_segments`)
-----------------------------------------------------
1. The places to visit are the robot's position, then every pose's position from
   the first one beyond :data:`PATH_START_RADIUS_M` of the robot on
   (:func:`path_start_index`): the leading poses within it are where the robot is
   (a grid planner starts its path at the centre of the robot's cell, a few mm
   behind or beside it, and the robot would turn round to it and back), and so are
   those within :data:`PATH_PASSED_RADIUS_M` that the robot is past; the last
   pose always stays; a position within :data:`SAME_PLACE_M` of the previous place
   is the same place.
2. From each place, the longest run of following places that lies within
   ``fit_tolerance`` of one straight line becomes a ``LINE``, unless a circle
   through the run's first, middle and last place holds a longer run within
   ``fit_tolerance`` (the places and the midpoints between them, in order along
   it, with a radius between :data:`MIN_ARC_RADIUS_M` and
   :data:`MAX_ARC_RADIUS_M`): then it is an ``ARC``.
3. A ``POINT_TURN`` is inserted wherever the direction of travel changes in place
   by more than ``turn_threshold`` (at the robot's position before the first
   segment, and at corners between segments): the robot turns to the next
   segment's heading. Smaller changes are left to the robot's path follower.
4. The last pose's heading is honoured: the path ends with a ``POINT_TURN`` to
   it (a path that only turns in place gets it if the heading differs by more
   than ``turn_tolerance``). After driving the turn is always there: the robot's
   path follower can arrive a little off the geometric heading, and a turn
   that is already within tolerance costs nothing. The headings of the other
   poses are not used (planners often leave them unset); paths are driven
   forwards.

Trackers
--------
:class:`AxisTracker` (head, lift), :class:`TurnTracker` and
:class:`PathTracker` are fed every robot state (:class:`StateSample`), every
AcknowledgeAction and every PathFollowingEvent, and say when the action is done
(:class:`Outcome`). They finish on what the robot reports - acknowledgements,
the in-position and wheels-moving flags, path events and the pose - never on a
timer: the deadline each carries is only a safety net, checked as states
arrive, and its message says so. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import UsageError
from ..protocol import messages as msgs
from ..robot_geometry import (MAX_TURN_RATE_RADPS, MIN_TURN_RATE_RADPS, TURN_ANGLE_TOLERANCE_RAD,
                              reported_lift_height_m)
from .odometry import Pose2D, compose, wrap_angle
from .sensors import CliffEdgeTracker, StatusFlag
from .transforms import yaw_of_quaternion

__all__ = [
    "LINE", "ARC", "POINT_TURN", "SEGMENT_TYPE_NAMES",
    "MotionError", "Segment", "StateSample", "Outcome",
    "SUCCEEDED", "ABORTED", "CANCELED",
    "DEFAULT_SPEED_MPS", "DEFAULT_ACCEL_MPS2", "DEFAULT_TURN_SPEED_RADPS",
    "DEFAULT_TURN_ACCEL_RADPS2", "DEFAULT_TURN_TOLERANCE_RAD", "MAX_TURN_SPEED_RADPS", "MIN_TURN_SPEED_RADPS",
    "MIN_POSITION_TOLERANCE_M",
    "MIN_HEADING_TOLERANCE_RAD", "MIN_TURN_TOLERANCE_RAD", "HEAD_TOLERANCE_RAD",
    "LIFT_TOLERANCE_M", "MAX_ACCEL_MPS2", "MAX_TURN_ACCEL_RADPS2", "MAX_PATH_SEGMENTS",
    "MAX_PATH_POSES", "SEGMENT_GAP_M",
    "robot_segments", "robot_segment_owners", "check_robot_size",
    "SAME_PLACE_M", "PATH_START_RADIUS_M", "PATH_PASSED_RADIUS_M", "path_start_index",
    "MIN_ARC_RADIUS_M", "MAX_ARC_RADIUS_M",
    "TURN_THRESHOLD_RAD",
    "require_finite", "unit_orientation", "QUATERNION_SLACK", "floor_heading", "MIN_HEADING_PROJECTION",
    "drives_forwards", "check_speed", "check_turn_speed", "check_path_rate", "MIN_PATH_RATE",
    "check_tolerance",
    "apply_defaults", "check_segments",
    "path_to_segments", "plan_go_to_pose", "plan_drive_straight", "segment_message", "path_messages",
    "segments_end_pose", "distance_remaining", "path_duration", "axis_duration", "turn_duration",
    "interruption", "state_sample", "AxisTracker", "TurnTracker", "PathTracker",
    "FEEDBACK_PERIOD_S", "FeedbackPacer",
]

# PathSegment.msg types
LINE, ARC, POINT_TURN = 0, 1, 2
SEGMENT_TYPE_NAMES = {LINE: "LINE", ARC: "ARC", POINT_TURN: "POINT_TURN"}

#: defaults for speeds given as 0
DEFAULT_SPEED_MPS = 0.1
DEFAULT_ACCEL_MPS2 = 0.2
DEFAULT_TURN_SPEED_RADPS = 2.0
DEFAULT_TURN_ACCEL_RADPS2 = 10.0
#: the fastest turn in place (Anki's 300 deg/s; the treads' 0.2 m/s would give 8.7 rad/s,
#: which they do not reach for slipping)
MAX_TURN_SPEED_RADPS = MAX_TURN_RATE_RADPS
#: the slowest turn in place: the robot speeds a slower one up to it (robot_geometry)
MIN_TURN_SPEED_RADPS = MIN_TURN_RATE_RADPS
#: the fastest accelerations a goal or a segment may ask for (more is clamped, with a
#: warning): the treads' and a turn's
MAX_ACCEL_MPS2 = 2.0
MAX_TURN_ACCEL_RADPS2 = 50.0
#: the tightest tolerances a goal may ask for (tighter ones are refused as unreachable); a
#: turn in place stops within 2 deg of its heading, not closer (Anki's POINT_TURN_ANGLE_TOL)
MIN_POSITION_TOLERANCE_M = 0.005
MIN_HEADING_TOLERANCE_RAD = TURN_ANGLE_TOLERANCE_RAD
MIN_TURN_TOLERANCE_RAD = TURN_ANGLE_TOLERANCE_RAD
#: a point turn's tolerance when none is given (rad)
DEFAULT_TURN_TOLERANCE_RAD = 0.035
#: "in position" for head and lift actions, on top of the robot's own flags
HEAD_TOLERANCE_RAD = 0.035
LIFT_TOLERANCE_M = 0.004
#: the most segments a path may have on the robot: Anki's firmware numbers them in a signed
#: byte (PathFollower's s8 currPathSegment_, RobotState's curr_path_segment), and it splits
#: every arc where its centre angle passes 0 or pi, each piece a segment of its own
#: (Planning::Path::AppendArc), so arcs count by their pieces (:func:`robot_segments`)
MAX_PATH_SEGMENTS = 128
MAX_PATH_POSES = 20000
#: explicit segments must join: a segment may start at most this far from where the previous
#: ends. Anki's firmware refuses a whole path, silently, if any join is 1 mm or more
#: (PathFollower::StartPathTraversal: CheckContinuity(CONTINUITY_TOL_MM2 = 1), squared mm)
SEGMENT_GAP_M = 0.0005
#: path conversion (see the module docstring)
SAME_PLACE_M = 0.001
#: a path's leading poses this close to the robot are taken as its position, m: a grid planner's
#: path starts at the centre of the cell the robot is in, up to half a cell's diagonal off it
#: (7.1 mm on the 1 cm costmap of config/nav2_params.yaml), which this covers with 3 mm to spare
#: for the robot's moves between planning and the goal; a fifth of the robot's width, so what is
#: cut is no more than a path follower's own slack (Nav2's controllers prune the path to the
#: pose nearest the robot likewise)
PATH_START_RADIUS_M = 0.01
#: a leading pose farther than PATH_START_RADIUS_M but within this, m, that the robot is past (it
#: stands ahead of the pose, towards the pose after it) is taken as its position too: the robot
#: moved on since the path was planned, and followed from there it would turn round to go back
#: to it, as Nav2's controllers, which prune the path to the pose nearest the robot, do not
PATH_PASSED_RADIUS_M = 0.02
MIN_ARC_RADIUS_M = 0.01
#: go_to_pose: how far off its planned heading the path follower may arrive (the final turn's
#: loosest tolerance); the final turn is left out when the plan arrives within the heading
#: tolerance less this
ARRIVAL_HEADING_MARGIN_RAD = 0.05
MAX_ARC_RADIUS_M = 5.0
TURN_THRESHOLD_RAD = 0.35
_MIN_LINE_M = 0.001
_MAX_SWEEP_RAD = 2.0 * math.pi

SUCCEEDED, ABORTED, CANCELED = "succeeded", "aborted", "canceled"


class MotionError(UsageError, ValueError):
    """A goal cannot be planned or executed; the message says which field and why."""


# ----------------------------------------------------------------------------- segments

@dataclass(frozen=True)
class Segment:
    """One path segment; field names and meaning as cozmo_interfaces/PathSegment."""

    type: int
    start_x: float = 0.0
    start_y: float = 0.0
    end_x: float = 0.0
    end_y: float = 0.0
    center_x: float = 0.0
    center_y: float = 0.0
    radius: float = 0.0
    start_angle: float = 0.0
    sweep: float = 0.0
    heading: float = 0.0
    tolerance: float = 0.0
    speed: float = 0.0
    accel: float = 0.0
    decel: float = 0.0

    FIELDS = ("start_x", "start_y", "end_x", "end_y", "center_x", "center_y", "radius",
              "start_angle", "sweep", "heading", "tolerance", "speed", "accel", "decel")

    @classmethod
    def line(cls, x0: float, y0: float, x1: float, y1: float, speed: float = 0.0,
             accel: float = 0.0, decel: float = 0.0) -> "Segment":
        return cls(LINE, start_x=x0, start_y=y0, end_x=x1, end_y=y1, speed=speed, accel=accel,
                   decel=decel)

    @classmethod
    def arc(cls, cx: float, cy: float, radius: float, start_angle: float, sweep: float,
            speed: float = 0.0, accel: float = 0.0, decel: float = 0.0) -> "Segment":
        return cls(ARC, center_x=cx, center_y=cy, radius=radius, start_angle=start_angle,
                   sweep=sweep, speed=speed, accel=accel, decel=decel)

    @classmethod
    def point_turn(cls, x: float, y: float, heading: float, tolerance: float = 0.0,
                   speed: float = 0.0, accel: float = 0.0, decel: float = 0.0) -> "Segment":
        return cls(POINT_TURN, start_x=x, start_y=y, heading=heading, tolerance=tolerance,
                   speed=speed, accel=accel, decel=decel)

    @property
    def name(self) -> str:
        return SEGMENT_TYPE_NAMES.get(self.type, str(self.type))

    def start_point(self) -> Tuple[float, float]:
        if self.type == ARC:
            return (self.center_x + self.radius * math.cos(self.start_angle),
                    self.center_y + self.radius * math.sin(self.start_angle))
        return self.start_x, self.start_y

    def end_point(self) -> Tuple[float, float]:
        if self.type == LINE:
            return self.end_x, self.end_y
        if self.type == ARC:
            a = self.start_angle + self.sweep
            return self.center_x + self.radius * math.cos(a), self.center_y + self.radius * math.sin(a)
        return self.start_x, self.start_y

    def distance_to(self, x: float, y: float) -> float:
        """How far (m) the point is from the segment: from a line's nearest point, an
        arc's circle, a point turn's place."""
        if self.type == LINE:
            dx, dy = self.end_x - self.start_x, self.end_y - self.start_y
            span = dx * dx + dy * dy
            t = 0.0 if span == 0.0 else min(1.0, max(0.0, ((x - self.start_x) * dx
                                                          + (y - self.start_y) * dy) / span))
            return math.hypot(x - self.start_x - t * dx, y - self.start_y - t * dy)
        if self.type == ARC:
            return abs(math.hypot(x - self.center_x, y - self.center_y) - self.radius)
        return math.hypot(x - self.start_x, y - self.start_y)

    @property
    def length(self) -> float:
        """Distance driven along the segment (0 for point turns)."""
        if self.type == LINE:
            return math.hypot(self.end_x - self.start_x, self.end_y - self.start_y)
        if self.type == ARC:
            return abs(self.radius * self.sweep)
        return 0.0

    def _facing(self, travel: float) -> float:
        return wrap_angle(travel + math.pi) if self.speed < 0 else wrap_angle(travel)

    def start_heading(self, previous: float) -> float:
        """The robot's heading at the start (``previous`` for point turns)."""
        if self.type == LINE:
            return self._facing(math.atan2(self.end_y - self.start_y, self.end_x - self.start_x))
        if self.type == ARC:
            return self._facing(self.start_angle + math.copysign(math.pi / 2.0, self.sweep))
        return previous

    def end_heading(self, previous: float) -> float:
        if self.type == LINE:
            return self.start_heading(previous)
        if self.type == ARC:
            return self._facing(self.start_angle + self.sweep + math.copysign(math.pi / 2.0, self.sweep))
        return wrap_angle(self.heading)

    def transformed(self, pose: Pose2D) -> "Segment":
        """This segment with its geometry moved by the rigid transform ``pose``
        (segment frame -> the frame ``pose`` is given in)."""
        def point(x: float, y: float) -> Tuple[float, float]:
            p = compose(pose, Pose2D(x, y, 0.0))
            return p.x, p.y
        sx, sy = point(self.start_x, self.start_y)
        ex, ey = point(self.end_x, self.end_y)
        cx, cy = point(self.center_x, self.center_y)
        return replace(self, start_x=sx, start_y=sy, end_x=ex, end_y=ey, center_x=cx, center_y=cy,
                       start_angle=wrap_angle(self.start_angle + pose.yaw),
                       heading=wrap_angle(self.heading + pose.yaw))

    def describe(self) -> str:
        if self.type == LINE:
            return (f"LINE ({self.start_x:.3f}, {self.start_y:.3f}) -> ({self.end_x:.3f}, "
                    f"{self.end_y:.3f}) m at {self.speed:.3f} m/s")
        if self.type == ARC:
            return (f"ARC centre ({self.center_x:.3f}, {self.center_y:.3f}) m, radius "
                    f"{self.radius:.3f} m, from {self.start_angle:.3f} rad through {self.sweep:.3f} rad")
        return f"POINT_TURN at ({self.start_x:.3f}, {self.start_y:.3f}) m to {self.heading:.3f} rad"


def drives_forwards(segments: Sequence[Segment]) -> bool:
    """Whether a path drives the robot forwards anywhere: a line or an arc at a positive
    speed (a negative one backs it; a point turn stays where it is)."""
    return any(s.type in (LINE, ARC) and s.speed > 0.0 for s in segments)


def require_finite(prefix: str, **values: float) -> None:
    for name, value in values.items():
        if not math.isfinite(value):
            raise MotionError(f"{prefix}{name} is {value}: not a finite number")


#: how far the length of an orientation quaternion whose heading a goal uses may be from 1
#: before the goal is told that it was normalised (tf2 refuses a transform whose squared
#: length is 0.01 off 1); a rounded quaternion, e.g. (0, 0, 0.479, 0.878), is well within it
QUATERNION_SLACK = 0.01


def unit_orientation(prefix: str, q: Tuple[float, float, float, float],
                     heading_used: bool = True) -> Tuple[Tuple[float, float, float, float], Optional[str]]:
    """A pose's orientation ``q`` (x, y, z, w, each finite) as a unit quaternion, and a warning
    or None. One of length 0 (all zeros) is refused (:class:`MotionError`). When the goal uses
    its heading (``heading_used``: a go_to_pose target, a path's last pose), one whose length
    is more than :data:`QUATERNION_SLACK` off 1 is normalised with a warning that gives the
    heading it then means: a yaw written into z, say, (0, 0, 1.57, 1), means 2.0 rad, not
    1.57. Its length is taken without overflow (components of 1e200 are still a rotation,
    and 1e-200 too)."""
    largest = max(abs(c) for c in q)
    if not largest > 0.0:
        raise MotionError(f"{prefix}orientation is all zeros: not a rotation (use w = 1 for no rotation)")
    scaled = tuple(c / largest for c in q)  # (its length is then 1..2: no overflow, no underflow)
    length = math.hypot(*scaled)
    x, y, z, w = (c / length for c in scaled)
    norm = largest * length
    if not heading_used or abs(norm - 1.0) <= QUATERNION_SLACK:
        return (x, y, z, w), None
    heading = yaw_of_quaternion((x, y, z, w))
    return (x, y, z, w), (
        f"{prefix}orientation = ({q[0]:g}, {q[1]:g}, {q[2]:g}, {q[3]:g}) is not a unit quaternion "
        f"(length {norm:.4g}): normalised, it means a heading of {heading:.4f} rad "
        "(a heading h is z = sin(h/2), w = cos(h/2))")


#: the least horizontal part (of unit length) of the x axis of a pose or frame whose heading on
#: the floor a goal uses: one under it points (nearly) straight up or down, a pitch within 0.57 deg
#: of +-90 deg, and its heading would be whatever the rounding of its components made of it
MIN_HEADING_PROJECTION = 0.01


def floor_heading(what: str, q: Tuple[float, float, float, float], frame: str, remedy: str) -> float:
    """The heading (rad) of the x axis of the rotation ``q`` (a unit quaternion x, y, z, w, in
    ``frame``, whose xy plane is the floor) projected on the floor. One whose x axis points
    (nearly) straight up or down, its horizontal part under :data:`MIN_HEADING_PROJECTION`, has
    none: refused (:class:`MotionError`) saying ``what`` it is and ``remedy``. A merely tilted
    one keeps the heading of its projection."""
    x, y, z, w = q
    up = 2.0 * (x * z - w * y)  # the x axis's vertical part (the rest is on the floor)
    horizontal = math.hypot(1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z))
    if horizontal < MIN_HEADING_PROJECTION:
        pitch = math.degrees(math.asin(max(-1.0, min(1.0, -up))))
        raise MotionError(
            f"{what} points its x axis straight {'up' if up > 0 else 'down'} in {frame} (pitch "
            f"{pitch:+.1f} deg; the x axis's horizontal part {horizontal:.3f} of its length, under "
            f"{MIN_HEADING_PROJECTION:g}): it has no heading on the floor; {remedy}")
    return yaw_of_quaternion(q)


def check_speed(value: float, name: str, default: float, limit: float, unit: str,
                allow_negative: bool = False, limit_name: str = "",
                direction: str = "") -> Tuple[float, Optional[str]]:
    """(speed to use, warning or None): 0 -> ``default``, at most ``limit``; beyond
    ``limit`` -> clamped with a warning (naming the parameter ``limit_name`` that set the
    limit, if any); negative -> refused unless ``allow_negative`` (the sign is kept), the
    refusal saying ``direction``: what sets the direction instead."""
    if not math.isfinite(value):
        raise MotionError(f"{name} is {value}: not a finite number")
    if value < 0 and not allow_negative:
        how = f": {direction}" if direction else ""
        raise MotionError(f"{name} = {value:g} {unit}: must not be negative (0 = default); "
                          f"it is a magnitude{how}")
    if value == 0:
        return min(default, limit), None
    if abs(value) > limit:
        clamped = math.copysign(limit, value)
        limit_text = f"{limit_name} = {limit:g}" if limit_name else f"{limit:g}"
        return clamped, (f"{name} = {value:g} {unit} is beyond {limit_text} {unit}: "
                         f"clamped to {clamped:g} {unit}")
    return value, None


def check_turn_speed(value: float, name: str, default: float,
                     direction: str = "") -> Tuple[float, Optional[str]]:
    """A point turn's speed as :func:`check_speed` takes it (0 -> ``default``), and one
    slower than the robot turns (:data:`MIN_TURN_SPEED_RADPS`) raised to that, with a
    warning: the robot would turn faster than asked, and the goal's timing with it."""
    speed, warning = check_speed(value, name, default, MAX_TURN_SPEED_RADPS, "rad/s", direction=direction)
    if 0.0 < speed < MIN_TURN_SPEED_RADPS:
        return MIN_TURN_SPEED_RADPS, (
            f"{name} = {value:g} rad/s: the robot turns in place no slower than "
            f"{MIN_TURN_SPEED_RADPS:g} rad/s (its steering speeds a slower point turn up): "
            f"raised to {MIN_TURN_SPEED_RADPS:g} rad/s")
    return speed, warning


#: the robot keeps a path's speeds and accelerations as whole mm/s and mm/s^2 (Anki's
#: speedController: s16 and u16): a smaller one is 0 there, and it would not move (m/s, m/s^2)
MIN_PATH_RATE = 0.001


def check_path_rate(value: float, name: str, unit: str) -> float:
    """``value`` (a line's or arc's speed, accel or decel), refused if the robot would take
    it for 0: nearer 0 than :data:`MIN_PATH_RATE` and not 0."""
    if 0.0 < abs(value) < MIN_PATH_RATE:
        raise MotionError(f"{name} = {value:g} {unit}: the robot takes whole mm/s and mm/s^2 on a "
                          f"path, so below {MIN_PATH_RATE:g} it is 0 and the robot would not move")
    return value


def check_tolerance(value: float, name: str, minimum: float, maximum: float, unit: str) -> float:
    """A tolerance within [minimum, maximum]; 0, smaller or non-finite ones are refused."""
    if not math.isfinite(value):
        raise MotionError(f"{name} is {value}: not a finite number")
    if value < minimum:
        raise MotionError(f"{name} = {value:g} {unit} cannot be reached: the robot's motion "
                          f"and odometry need at least {minimum:g} {unit}")
    if value > maximum:
        raise MotionError(f"{name} = {value:g} {unit} is larger than {maximum:g} {unit}")
    return value


def apply_defaults(seg: Segment, speed: float, accel: float, decel: float, turn_speed: float,
                   turn_accel: float, turn_tolerance: float) -> Segment:
    """The segment with 0 speeds, accelerations and point-turn tolerance replaced by defaults."""
    if seg.type == POINT_TURN:
        return replace(seg, speed=seg.speed or turn_speed, accel=seg.accel or turn_accel,
                       decel=seg.decel or turn_accel, tolerance=seg.tolerance or turn_tolerance)
    return replace(seg, speed=seg.speed or speed, accel=seg.accel or accel, decel=seg.decel or decel)


def robot_segments(seg: Segment, start_angle: Optional[float] = None) -> int:
    """How many segments the robot makes of ``seg``: an arc is split where its centre
    angle passes 0 or pi (Anki's Planning::Path::AppendArc, which keeps arcs functions of
    x). ``start_angle`` None: the most it can be in any frame (the frame turns the angles),
    else for an arc sent with that start angle."""
    if seg.type != ARC:
        return 1
    if start_angle is None:
        return 1 + math.ceil(abs(seg.sweep) / math.pi - 1e-9)
    a = wrap_angle(start_angle)
    lo, hi = sorted((a, a + seg.sweep))
    # the multiples of pi strictly between the two ends
    return 1 + max(0, math.ceil(hi / math.pi) - math.floor(lo / math.pi) - 1)


def robot_segment_owners(segments: Sequence[Segment]) -> List[int]:
    """For each segment the robot has of ``segments`` (as sent), the index of the one it
    comes from: the robot's curr_path_segment counts an arc's pieces."""
    owners: List[int] = []
    for i, seg in enumerate(segments):
        owners.extend([i] * robot_segments(seg, seg.start_angle))
    return owners


def check_robot_size(segments: Sequence[Segment], what: str) -> None:
    """Refuse ``segments`` if the robot could have more than :data:`MAX_PATH_SEGMENTS` of
    them (arcs counted by the most pieces they can split into)."""
    count = sum(robot_segments(seg) for seg in segments)
    if count > MAX_PATH_SEGMENTS:
        many = f"{count} segments" if count == len(segments) else (
            f"{len(segments)} segments, up to {count} on the robot (it splits an arc where its "
            "centre angle passes 0 or pi)")
        raise MotionError(f"{what}: {many}; the robot follows at most {MAX_PATH_SEGMENTS} at once "
                          "(it numbers them in a signed byte)")


def check_segments(segments: Sequence[Segment], max_speed: float, prefix: str = "segments",
                   max_speed_name: str = "") -> Tuple[List[Segment], List[str]]:
    """Explicit segments checked and clamped: (segments, warnings). Raises MotionError
    naming the first bad field: non-finite values, unknown types, empty lines, arcs
    without radius or sweep, point-turn tolerances below :data:`MIN_TURN_TOLERANCE_RAD`,
    negative accelerations, gaps between segments over :data:`SEGMENT_GAP_M`, too many
    segments. A point turn's heading beyond -pi..pi is wrapped into it (with a warning).
    Speeds over the limits are clamped (with a warning; a line's or arc's over
    ``max_speed`` naming the parameter ``max_speed_name`` that set it, if given)."""
    if not segments:
        raise MotionError(f"{prefix} is empty: nothing to follow")
    if len(segments) > MAX_PATH_SEGMENTS:
        raise MotionError(f"{prefix} has {len(segments)} segments; the robot follows at most "
                          f"{MAX_PATH_SEGMENTS} at once")
    out: List[Segment] = []
    warnings: List[str] = []
    previous_end: Optional[Tuple[float, float]] = None
    for i, seg in enumerate(segments):
        where = f"{prefix}[{i}]."
        require_finite(where, **{f: getattr(seg, f) for f in Segment.FIELDS})
        if seg.type not in SEGMENT_TYPE_NAMES:
            raise MotionError(f"{where}type = {seg.type}: must be LINE (0), ARC (1) or POINT_TURN (2)")
        turn = seg.type == POINT_TURN
        limits = (MAX_TURN_ACCEL_RADPS2, "rad/s^2") if turn else (MAX_ACCEL_MPS2, "m/s^2")
        for name in ("accel", "decel"):
            if getattr(seg, name) < 0:
                raise MotionError(f"{where}{name} = {getattr(seg, name):g}: must not be negative "
                                  "(0 = default)")
            # 0 keeps its meaning (the goal's); beyond the limit clamped, with a warning
            value, warning = check_speed(getattr(seg, name), where + name, 0.0, *limits)
            if not turn:
                check_path_rate(value, where + name, limits[1])
            if warning:
                warnings.append(warning)
                seg = replace(seg, **{name: value})
        if seg.type == LINE:
            if seg.length < _MIN_LINE_M:
                raise MotionError(f"{where.rstrip('.')}: a LINE of {seg.length:.4f} m (at least "
                                  f"{_MIN_LINE_M} m)")
            speed, warning = check_speed(seg.speed, where + "speed", 0.0, max_speed, "m/s", True,
                                         max_speed_name)
            check_path_rate(speed, where + "speed", "m/s")
        elif seg.type == ARC:
            if seg.radius < MIN_ARC_RADIUS_M:
                raise MotionError(f"{where}radius = {seg.radius:g} m: an ARC needs at least "
                                  f"{MIN_ARC_RADIUS_M} m")
            if not 1e-3 <= abs(seg.sweep) <= _MAX_SWEEP_RAD:
                raise MotionError(f"{where}sweep = {seg.sweep:g} rad: must be within "
                                  f"0.001..{_MAX_SWEEP_RAD:.4f} rad in size")
            speed, warning = check_speed(seg.speed, where + "speed", 0.0, max_speed, "m/s", True,
                                         max_speed_name)
            check_path_rate(speed, where + "speed", "m/s")
        else:
            if seg.tolerance != 0.0:
                check_tolerance(seg.tolerance, where + "tolerance", MIN_TURN_TOLERANCE_RAD,
                                math.pi, "rad")
            if abs(seg.heading) > math.pi + 1e-9:  # a heading: the short way to it, never whole turns
                heading = wrap_angle(seg.heading)
                warnings.append(f"{where}heading = {seg.heading:g} rad is a heading: taken as {heading:.4f} "
                                "rad, the same heading within -pi..pi, which the robot turns to the short "
                                "way (for whole turns, use turn_in_place)")
                seg = replace(seg, heading=heading)
            speed, warning = check_turn_speed(seg.speed, where + "speed", 0.0)
        if warning:
            warnings.append(warning)
        seg = replace(seg, speed=speed)
        start = seg.start_point()
        if previous_end is not None:
            gap = math.hypot(start[0] - previous_end[0], start[1] - previous_end[1])
            if gap > SEGMENT_GAP_M:
                raise MotionError(f"{where.rstrip('.')}: starts {gap * 1000:.1f} mm from where "
                                  f"{prefix}[{i - 1}] ends (segments must join within "
                                  f"{SEGMENT_GAP_M * 1000:g} mm: the robot refuses a path with a "
                                  "gap of 1 mm)")
        previous_end = seg.end_point()
        out.append(seg)
    check_robot_size(out, prefix)
    return out, warnings


def segments_end_pose(segments: Sequence[Segment], start: Pose2D) -> Pose2D:
    """Where the robot ends after the segments, starting at ``start``."""
    heading = start.yaw
    x, y = start.x, start.y
    for seg in segments:
        heading = seg.end_heading(heading)
        x, y = seg.end_point()
    return Pose2D(x, y, wrap_angle(heading))


def segment_message(seg: Segment, from_heading: Optional[float] = None):
    """The AppendPathSeg* message of a segment (metres -> the robot's millimetres).

    A point turn keeps its rad/s and rad/s^2 and asks for the shorter way round; from
    ``from_heading`` (the heading the robot has when the turn begins, where known) its
    speed is signed that way too (negative: clockwise), for a robot that went by the
    sign alone."""
    mm = 1000.0
    if seg.type == LINE:
        return msgs.AppendPathSegLine(from_x_mm=seg.start_x * mm, from_y_mm=seg.start_y * mm,
                                      to_x_mm=seg.end_x * mm, to_y_mm=seg.end_y * mm,
                                      speed_mmps=seg.speed * mm, accel_mmps2=seg.accel * mm,
                                      decel_mmps2=seg.decel * mm)
    if seg.type == ARC:
        return msgs.AppendPathSegArc(center_x_mm=seg.center_x * mm, center_y_mm=seg.center_y * mm,
                                     radius_mm=seg.radius * mm, start_angle_rad=seg.start_angle,
                                     sweep_rad=seg.sweep, speed_mmps=seg.speed * mm,
                                     accel_mmps2=seg.accel * mm, decel_mmps2=seg.decel * mm)
    speed = abs(seg.speed)
    if from_heading is not None and wrap_angle(seg.heading - from_heading) < 0.0:
        speed = -speed
    # (the fields' names are pycozmo's: the robot reads rad/s, rad/s^2 and "shortest way")
    return msgs.AppendPathSegPointTurn(x_mm=seg.start_x * mm, y_mm=seg.start_y * mm,
                                       angle_rad=wrap_angle(seg.heading),
                                       angle_tolerance_rad=seg.tolerance, speed_mmps=speed,
                                       accel_mmps2=abs(seg.accel), decel_mmps2=abs(seg.decel),
                                       unknown=True)


def path_messages(segments: Sequence[Segment], start_heading: float) -> List[Any]:
    """The AppendPathSeg* messages of a path that begins at ``start_heading``: each point
    turn signed by the way it turns from the heading before it (:func:`segment_message`)."""
    messages, heading = [], start_heading
    for seg in segments:
        messages.append(segment_message(seg, heading))
        heading = seg.end_heading(heading)
    return messages


# ----------------------------------------------------------------------------- conversion

def _line_fits(pts: np.ndarray, i: int, j: int, tol: float) -> bool:
    a, b = pts[i], pts[j]
    d = b - a
    length = float(np.hypot(d[0], d[1]))
    if length < 1e-12:
        return False
    u = d / length
    rel = pts[i:j + 1] - a
    along = rel @ u
    across = np.abs(rel[:, 0] * u[1] - rel[:, 1] * u[0])
    if float(across.max()) > tol:
        return False
    # in order along the line, and within it
    if np.any(np.diff(along) < -tol) or float(along.min()) < -tol or float(along.max()) > length + tol:
        return False
    return True


def _circle(p: np.ndarray, q: np.ndarray, r: np.ndarray) -> Optional[Tuple[float, float, float]]:
    """Centre and radius of the circle through three points, or None if they are collinear."""
    ax, ay = p
    bx, by = q
    cx, cy = r
    d = 2.0 * (ax * (by - cy) + bx * (cy - ay) + cx * (ay - by))
    if abs(d) < 1e-12:
        return None
    a2, b2, c2 = ax * ax + ay * ay, bx * bx + by * by, cx * cx + cy * cy
    ux = (a2 * (by - cy) + b2 * (cy - ay) + c2 * (ay - by)) / d
    uy = (a2 * (cx - bx) + b2 * (ax - cx) + c2 * (bx - ax)) / d
    return ux, uy, math.hypot(ax - ux, ay - uy)


def _arc_fit(pts: np.ndarray, i: int, j: int,
             tol: float) -> Optional[Tuple[float, float, float, float, float]]:
    """(cx, cy, radius, start_angle, sweep) of an arc through places i..j, or None."""
    if j - i < 2:
        return None
    m = (i + j) // 2
    circle = _circle(pts[i], pts[m], pts[j])
    if circle is None:
        return None
    cx, cy, radius = circle
    if not MIN_ARC_RADIUS_M <= radius <= MAX_ARC_RADIUS_M:
        return None
    rel = pts[i:j + 1] - np.array([cx, cy])
    if float(np.abs(np.hypot(rel[:, 0], rel[:, 1]) - radius).max()) > tol:
        return None
    # the path between the places (their chords' midpoints) must follow the circle too,
    # or three places around a corner would make an arc that bulges off the path
    mid = (rel[1:] + rel[:-1]) / 2.0
    if float(np.abs(np.hypot(mid[:, 0], mid[:, 1]) - radius).max()) > tol:
        return None
    angles = np.arctan2(rel[:, 1], rel[:, 0])
    steps = (np.diff(angles) + math.pi) % (2.0 * math.pi) - math.pi
    sweep = float(steps.sum())
    if abs(sweep) < 1e-6 or abs(sweep) >= _MAX_SWEEP_RAD - 1e-3:
        return None
    slack = tol / radius
    if np.any(steps * math.copysign(1.0, sweep) < -slack):
        return None  # the places go back and forth along the circle
    return cx, cy, radius, float(angles[0]), sweep


def _longest(fits, i: int, n: int, first: int) -> int:
    """The largest j in [first, n-1] with fits(j), assuming (roughly) that fits are
    contiguous from ``first``; ``first - 1`` if even ``first`` does not fit."""
    if first > n - 1 or not fits(first):
        return first - 1
    good, step = first, 1
    bad = None
    while True:
        probe = good + step
        if probe > n - 1:
            probe = n - 1
            if probe == good:
                return good
        if fits(probe):
            good = probe
            if probe == n - 1:
                return good
            step *= 2
        else:
            bad = probe
            break
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


def path_start_index(poses: Sequence[Pose2D], start: Pose2D) -> int:
    """The index of the first pose followed from ``start``: the first one more than
    :data:`PATH_START_RADIUS_M` from it that it is not past (:data:`PATH_PASSED_RADIUS_M`),
    or the last pose (never dropped: its heading is the goal's). Only leading poses are
    skipped: a path that comes back near the start later is followed there."""
    last = len(poses) - 1
    k = 0
    while k < last and _taken_as_start(poses, k, start):
        k += 1
    return k


def _taken_as_start(poses: Sequence[Pose2D], k: int, start: Pose2D) -> bool:
    """Whether the leading pose ``k`` is where the robot at ``start`` is: within
    :data:`PATH_START_RADIUS_M` of it, or within :data:`PATH_PASSED_RADIUS_M` and behind it
    along the path (``start`` ahead of the pose, towards the next pose at another place)."""
    p = poses[k]
    distance = math.hypot(start.x - p.x, start.y - p.y)
    if distance <= PATH_START_RADIUS_M:
        return True
    if distance > PATH_PASSED_RADIUS_M:
        return False
    for j in range(k + 1, len(poses)):
        dx, dy = poses[j].x - p.x, poses[j].y - p.y
        if math.hypot(dx, dy) > SAME_PLACE_M:
            return (start.x - p.x) * dx + (start.y - p.y) * dy > 0.0
    return False


def path_to_segments(poses: Sequence[Pose2D], start: Pose2D, *, fit_tolerance: float,
                     speed: float = DEFAULT_SPEED_MPS, accel: float = DEFAULT_ACCEL_MPS2,
                     decel: float = DEFAULT_ACCEL_MPS2, turn_speed: float = DEFAULT_TURN_SPEED_RADPS,
                     turn_accel: float = DEFAULT_TURN_ACCEL_RADPS2,
                     turn_tolerance: float = DEFAULT_TURN_TOLERANCE_RAD, turn_threshold: float = TURN_THRESHOLD_RAD,
                     first: Optional[int] = None) -> List[Segment]:
    """Lines, arcs and point turns that take the robot from ``start`` along ``poses``
    (the rules are in the module docstring). All poses and ``start`` in one frame.
    ``first``: :func:`path_start_index` of ``poses`` and ``start``, if the caller has it."""
    if not poses:
        raise MotionError("the path has no poses: nothing to follow")
    if len(poses) > MAX_PATH_POSES:
        raise MotionError(f"the path has {len(poses)} poses; at most {MAX_PATH_POSES} are accepted")
    for k, p in enumerate(poses):
        require_finite(f"path.poses[{k}].", x=p.x, y=p.y, yaw=p.yaw)
    check_tolerance(fit_tolerance, "fit_tolerance", 0.0005, 0.5, "m")
    places = [(start.x, start.y)]
    for p in poses[path_start_index(poses, start) if first is None else first:]:
        px, py = places[-1]
        if math.hypot(p.x - px, p.y - py) > SAME_PLACE_M:
            places.append((p.x, p.y))
    pts = np.array(places, dtype=float)
    n = len(places)
    moves: List[Segment] = []
    i = 0
    while i < n - 1:
        j_line = _longest(lambda j, i=i: _line_fits(pts, i, j, fit_tolerance), i, n, i + 1)
        j_line = max(j_line, i + 1)  # two distinct places always make a line
        j_arc = _longest(lambda j, i=i: _arc_fit(pts, i, j, fit_tolerance) is not None, i, n, i + 2)
        if j_arc > j_line:
            cx, cy, radius, a0, sweep = _arc_fit(pts, i, j_arc, fit_tolerance)
            moves.append(Segment.arc(cx, cy, radius, a0, sweep, speed, accel, decel))
            i = j_arc
        else:
            moves.append(Segment.line(pts[i][0], pts[i][1], pts[j_line][0], pts[j_line][1],
                                      speed, accel, decel))
            i = j_line
    out: List[Segment] = []
    heading = start.yaw
    for seg in moves:
        want = seg.start_heading(heading)
        if abs(wrap_angle(want - heading)) > turn_threshold:
            x, y = seg.start_point()
            out.append(Segment.point_turn(x, y, want, turn_tolerance, turn_speed, turn_accel,
                                          turn_accel))
        out.append(seg)
        heading = seg.end_heading(want)
    final = wrap_angle(poses[-1].yaw)
    if moves or abs(wrap_angle(final - heading)) > turn_tolerance:
        # after driving always (the robot's follower may arrive a little off its heading)
        x, y = places[-1]
        out.append(Segment.point_turn(x, y, final, turn_tolerance, turn_speed, turn_accel, turn_accel))
    try:
        check_robot_size(out, "the path as segments")
    except MotionError as exc:
        raise MotionError(f"{exc}; raise fit_tolerance or shorten the path") from None
    return out


def plan_go_to_pose(start: Pose2D, goal: Pose2D, position_tolerance: float, heading_tolerance: float,
                    speed: float = DEFAULT_SPEED_MPS, accel: float = DEFAULT_ACCEL_MPS2,
                    turn_speed: float = DEFAULT_TURN_SPEED_RADPS,
                    turn_accel: float = DEFAULT_TURN_ACCEL_RADPS2) -> List[Segment]:
    """Segments from ``start`` to ``goal``: one arc when the circle tangent to the
    current heading through the goal arrives within half the heading tolerance of
    the goal's heading, else a point turn towards the goal (if it is more than 0.1 rad
    off) and a line; then a point turn to the goal's heading (which costs nothing
    when the robot arrives within its tolerance), left out when the planned arrival
    heading is within the heading tolerance less :data:`ARRIVAL_HEADING_MARGIN_RAD`
    (a loose tolerance does not need it), and always with a tolerance of pi (any heading).
    Only the point turn when the robot is within the position tolerance but not the
    heading's; empty when it is within both (as the goal's success is judged)."""
    turn_tol = max(MIN_TURN_TOLERANCE_RAD, min(0.05, heading_tolerance / 2.0))
    dx, dy = goal.x - start.x, goal.y - start.y
    distance = math.hypot(dx, dy)
    segs: List[Segment] = []
    heading = start.yaw
    x, y = start.x, start.y
    if distance > position_tolerance:
        bearing = math.atan2(dy, dx)
        alpha = wrap_angle(bearing - start.yaw)
        heading, x, y = bearing, goal.x, goal.y
        arc = None
        if 1e-3 <= abs(alpha) <= math.pi / 2.0:
            end_heading = wrap_angle(start.yaw + 2.0 * alpha)
            radius = distance / (2.0 * math.sin(abs(alpha)))
            arrives = abs(wrap_angle(end_heading - goal.yaw)) <= heading_tolerance / 2.0
            if radius >= MIN_ARC_RADIUS_M and arrives:
                side = math.copysign(1.0, alpha)  # centre to the left (+) or right (-)
                cx = start.x - side * radius * math.sin(start.yaw)
                cy = start.y + side * radius * math.cos(start.yaw)
                a0 = math.atan2(start.y - cy, start.x - cx)
                arc = Segment.arc(cx, cy, radius, a0, 2.0 * alpha, speed, accel, accel)
                segs.append(arc)
                heading = end_heading
        if arc is None:
            if abs(alpha) > 0.1:
                segs.append(Segment.point_turn(start.x, start.y, bearing, turn_tol, turn_speed, turn_accel,
                                               turn_accel))
            segs.append(Segment.line(start.x, start.y, goal.x, goal.y, speed, accel, accel))
    off = abs(wrap_angle(goal.yaw - heading))
    # driven: the path follower may arrive up to the margin off the planned heading, so the
    # turn is added unless the plan arrives within the tolerance less that (no heading is
    # more than pi off: none needed with pi); already there: as the goal's success, the
    # whole tolerance
    if (segs and off >= heading_tolerance - ARRIVAL_HEADING_MARGIN_RAD and heading_tolerance < math.pi) or \
            (not segs and off > heading_tolerance):
        segs.append(Segment.point_turn(x, y, wrap_angle(goal.yaw), turn_tol, turn_speed, turn_accel,
                                       turn_accel))
    return segs


def plan_drive_straight(start: Pose2D, distance: float, speed: float, accel: float) -> Segment:
    """One line along the current heading (negative ``distance``: backwards)."""
    x1 = start.x + distance * math.cos(start.yaw)
    y1 = start.y + distance * math.sin(start.yaw)
    return Segment.line(start.x, start.y, x1, y1, math.copysign(abs(speed), distance), accel, accel)


# ----------------------------------------------------------------------------- progress, timing

def distance_remaining(segments: Sequence[Segment], index: int, x: float, y: float) -> float:
    """Distance left to drive (point turns count 0) while following segment ``index``
    (-1: not started) from position (x, y). Always a float (0.0, not 0, when nothing
    is left to drive: it goes into float64 message fields)."""
    if index < 0:
        return sum((s.length for s in segments), 0.0)
    if index >= len(segments):
        return 0.0
    seg = segments[index]
    rest = sum((s.length for s in segments[index + 1:]), 0.0)
    if seg.type == LINE:
        length = seg.length
        ux, uy = (seg.end_x - seg.start_x) / length, (seg.end_y - seg.start_y) / length
        along = (x - seg.start_x) * ux + (y - seg.start_y) * uy
        return rest + min(length, max(0.0, length - along))
    if seg.type == ARC:
        # how far round (rad) from its start, the arc's way: 0..2 pi; in the part of the
        # circle the arc leaves out (none of a whole turn), the nearer end
        sweep = abs(seg.sweep)
        phi = math.atan2(y - seg.center_y, x - seg.center_x)
        progress = ((phi - seg.start_angle) * math.copysign(1.0, seg.sweep)) % (2.0 * math.pi)
        if progress > sweep:
            progress = sweep if progress - sweep < math.pi - sweep / 2.0 else 0.0
        return rest + (sweep - progress) * seg.radius
    return rest


def path_duration(segments: Sequence[Segment], start_heading: float) -> float:
    """A rough time (s) to follow the segments: distance / speed, turns / turn rate, plus
    the time to accelerate and stop on every segment."""
    total = 0.0
    heading = start_heading
    for seg in segments:
        speed = abs(seg.speed) or DEFAULT_SPEED_MPS
        accel = seg.accel or DEFAULT_ACCEL_MPS2
        if seg.type == POINT_TURN:
            speed = abs(seg.speed) or DEFAULT_TURN_SPEED_RADPS
            accel = seg.accel or DEFAULT_TURN_ACCEL_RADPS2
            total += abs(wrap_angle(seg.heading - heading)) / speed + 2.0 * speed / accel
        else:
            total += seg.length / speed + 2.0 * speed / accel
        heading = seg.end_heading(heading)
    return total


def axis_duration(distance: float, speed: float, accel: float, duration: float) -> float:
    """A rough time (s) for a head or lift move."""
    return max(duration, abs(distance) / speed + speed / accel)


def turn_duration(angle: float, speed: float, accel: float) -> float:
    return abs(angle) / speed + 2.0 * speed / accel


# ----------------------------------------------------------------------------- tracking

@dataclass(frozen=True)
class StateSample:
    """What the trackers need of one RobotState, in SI units and the robot's pose frame."""

    t: float
    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0
    flags: int = 0
    head_angle: float = 0.0
    lift_height: float = 0.0
    path_segment: int = -1
    left_speed: float = 0.0
    right_speed: float = 0.0

    @property
    def pose(self) -> Pose2D:
        return Pose2D(self.x, self.y, self.yaw)

    @property
    def wheels_moving(self) -> bool:
        return bool(self.flags & StatusFlag.ARE_WHEELS_MOVING) or \
            abs(self.left_speed) > 1e-4 or abs(self.right_speed) > 1e-4


def state_sample(state, t: float, axes: Optional[Tuple[float, float]] = None) -> StateSample:
    """The :class:`StateSample` of a RobotState message received at ``t`` (mm -> m).
    ``axes``: (head angle rad, lift height m) to take instead of the state's (the driver
    holds each while its motor calibrates: the robot's own reading means nothing then)."""
    segment = int(state.curr_path_segment)
    if axes is None:
        head, lift = float(state.head_angle_rad), reported_lift_height_m(state.lift_height_mm)
    else:
        head, lift = axes
    return StateSample(t=t, x=state.pose_x_mm / 1000.0, y=state.pose_y_mm / 1000.0,
                       yaw=float(state.pose_angle_rad), flags=int(state.status),
                       head_angle=head, lift_height=lift,
                       path_segment=-1 if segment in (0xFF, -1) else segment,
                       left_speed=state.lwheel_speed_mmps / 1000.0,
                       right_speed=state.rwheel_speed_mmps / 1000.0)


@dataclass(frozen=True)
class Outcome:
    status: str          # SUCCEEDED, ABORTED or CANCELED
    message: str


def interruption(flags: int) -> Optional[str]:
    """Why the treads cannot be trusted to move the robot now, or None."""
    if flags & StatusFlag.IS_FALLING:  # first: a falling robot also reports IS_PICKED_UP
        return "the robot is falling"
    if flags & StatusFlag.IS_PICKED_UP:
        return "the robot was picked up"
    return None


#: a running goal's feedback: once in each such period, s (10 times a second)
FEEDBACK_PERIOD_S = 0.1


@dataclass
class FeedbackPacer:
    """Which robot states a goal's feedback goes out at: the first at or after each tick of
    :data:`FEEDBACK_PERIOD_S`, the ticks counted from the first state on (not from the last
    feedback: with states 30 ms apart that gave every 4th, 8.3 times a second, and with their
    jitter every 5th now and then), so that states 30 ms apart give it 10 times a second, 90
    or 120 ms apart. After a gap of more than a period the ticks start again from the state
    after it (no burst to catch up)."""

    period: float = FEEDBACK_PERIOD_S
    _due: Optional[float] = None

    def due(self, t: float) -> bool:
        """Take a state received at ``t`` (s); whether the feedback goes out at it."""
        due = self._due
        if due is not None and t < due:
            return False
        self._due = t + self.period if due is None or t >= due + self.period else due + self.period
        return True


#: consecutive robot states (about 30 ms apart) used by the trackers' settling rules
SETTLE_STATES = 5
NO_MOTION_STATES = 15
NO_START_STATES = 40
NO_EVENT_STATES = 15
REASON_STATES = 4
#: Anki's firmware abandons a path it is this far off (PathFollower TOO_FAR_FROM_PATH_DIST_MM,
#: measured its own way), m
PATH_GIVE_UP_M = 0.05
#: a path the robot gives up with the robot this far off it is said to be given up for that, m
OFF_PATH_M = 0.04
#: robot states (about 1.5 s) that a robot following a path may stand with its treads still
#: (their measured speeds under :data:`STILL_WHEEL_MPS`) and its pose unchanged (within
#: :data:`STILL_POSITION_M` and :data:`STILL_HEADING_RAD`) before the path is taken for blocked
STALLED_STATES = 50
STILL_WHEEL_MPS = 5e-4
STILL_POSITION_M = 0.002
STILL_HEADING_RAD = 0.02


@dataclass
class _Standstill:
    """The robot states in a row whose treads are still (their measured speeds under
    :data:`STILL_WHEEL_MPS`) and whose pose stays where the first of them was: a robot whose
    treads are driven (IS_PATHING, or the wheels-moving flag, which a firmware may set for the
    treads it drives, turning or not) but that stands, held or its treads stalled."""

    at: Optional[Pose2D] = None
    count: int = 0

    def stalled(self, s: StateSample) -> bool:
        """Take state ``s``; whether :data:`STALLED_STATES` still states followed the first."""
        still = abs(s.left_speed) < STILL_WHEEL_MPS and abs(s.right_speed) < STILL_WHEEL_MPS
        at = self.at
        if not still or at is None or math.hypot(s.x - at.x, s.y - at.y) > STILL_POSITION_M \
                or abs(wrap_angle(s.yaw - at.yaw)) > STILL_HEADING_RAD:
            self.at, self.count = (s.pose if still else None), 0
            return False
        self.count += 1
        return self.count >= STALLED_STATES

    def reset(self) -> None:
        self.at, self.count = None, 0


#: what a blocked goal's message says of the time it stood (STALLED_STATES robot states)
_STOOD = "has not moved for about 1.5 s"


@dataclass
class _Tracker:
    deadline: float
    outcome: Optional[Outcome] = None

    def _finish(self, status: str, message: str) -> Outcome:
        if self.outcome is None:
            self.outcome = Outcome(status, message)
        return self.outcome

    def on_ack(self, action_id: int) -> None:  # pragma: no cover - overridden where used
        pass

    def on_path_event(self, event_id: int, event_type: int) -> None:  # pragma: no cover
        pass

    def _timed_out(self, s: StateSample, what: str) -> Optional[Outcome]:
        if s.t > self.deadline:
            return self._finish(ABORTED, f"safety timeout: {what} (the robot reported no "
                                "completion in time)")
        return None


@dataclass
class AxisTracker(_Tracker):
    """A head or lift move (SetHeadAngle / SetLiftHeight with an action id).

    Succeeds when the robot acknowledged the command (or was seen moving), reports
    the in-position flag, and the measured value is within ``tolerance`` of the
    target. Aborts when it reports in position elsewhere for :data:`SETTLE_STATES`
    states (blocked), or neither acknowledges nor moves for :data:`NO_START_STATES`.
    While ``calibrating()`` says the motor calibrates (the command is held until it is
    done), nothing counts and the safety deadline moves on with the time."""

    name: str = "head"
    target: float = 0.0
    tolerance: float = HEAD_TOLERANCE_RAD
    flag: int = StatusFlag.HEAD_IN_POS
    action_id: int = 0
    unit: str = "rad"
    acked: bool = False
    seen_moving: bool = False
    calibrating: Callable[[], bool] = field(default=lambda: False)
    _settled: int = 0
    _unstarted: int = 0
    _last_t: Optional[float] = None

    def value(self, s: StateSample) -> float:
        return s.head_angle if self.flag == StatusFlag.HEAD_IN_POS else s.lift_height

    def on_ack(self, action_id: int) -> None:
        if action_id == self.action_id:
            self.acked = True

    def on_state(self, s: StateSample) -> Optional[Outcome]:
        if self.outcome is not None:
            return self.outcome
        last, self._last_t = self._last_t, s.t
        if self.calibrating():
            if last is not None:
                self.deadline += s.t - last
            self._unstarted = self._settled = 0
            return None
        value = self.value(s)
        if not s.flags & self.flag:
            self.seen_moving = True
            self._settled = 0
            return self._timed_out(s, f"the {self.name} is still moving, at {value:.3f} {self.unit}")
        error = value - self.target
        started = self.acked or self.seen_moving
        if started and abs(error) <= self.tolerance:
            return self._finish(SUCCEEDED, f"{self.name} at {value:.3f} {self.unit}")
        if started:
            self._settled += 1
            if self._settled >= SETTLE_STATES:
                return self._finish(ABORTED, f"the {self.name} stopped at {value:.3f} {self.unit}, "
                                    f"{abs(error):.3f} {self.unit} from the target {self.target:.3f} "
                                    f"(blocked?)")
            return self._timed_out(s, f"the {self.name} is at {value:.3f} {self.unit}")
        self._unstarted += 1
        if self._unstarted >= NO_START_STATES:
            if abs(error) <= self.tolerance:
                return self._finish(SUCCEEDED, f"{self.name} at {value:.3f} {self.unit} (the robot "
                                    "did not acknowledge the command: older firmware?)")
            return self._finish(ABORTED, f"the robot neither acknowledged nor moved the {self.name} "
                                f"(at {value:.3f} {self.unit}, target {self.target:.3f})")
        return self._timed_out(s, f"the {self.name} has not started")


#: a turn's robot may go this much faster than asked (its speed controller), and past its
#: target by this much (rad) before it stops: what a gap between two states is read against
_TURN_SPEED_SLACK = 1.25
_TURN_OVERSHOOT_RAD = 0.3


@dataclass
class TurnTracker(_Tracker):
    """TurnInPlace with an action id. Relative turns count the heading change
    state by state (so turns beyond half a revolution work): the change is taken
    within -pi..pi, or, when the time since the state before (``start_t`` for the
    first) allows more than pi at the turn's ``speed``, in the turn's direction
    unless that would go past the target (:meth:`_step`); absolute turns compare
    the heading. Succeeds when acknowledged (or seen turning), the treads have
    stopped and the remaining angle is within ``tolerance``."""

    action_id: int = 0
    start_yaw: float = 0.0
    angle: float = 0.0            # relative turn, or the absolute target heading
    absolute: bool = False
    tolerance: float = DEFAULT_TURN_TOLERANCE_RAD
    speed: float = 0.0            # the turn's speed, rad/s (0: unknown, states taken as close)
    start_t: Optional[float] = None  # when start_yaw was read (StateSample.t)
    acked: bool = False
    seen_moving: bool = False
    turned: float = 0.0
    _last_yaw: Optional[float] = None
    _last_t: Optional[float] = None
    _settled: int = 0
    _still: int = 0
    #: while the wheels-moving flag is set: how long the treads stand still
    _standstill: _Standstill = field(default_factory=_Standstill)

    def on_ack(self, action_id: int) -> None:
        if action_id == self.action_id:
            self.acked = True

    def remaining(self, yaw: float) -> float:
        if self.absolute:
            return wrap_angle(self.angle - yaw)
        return self.angle - self.turned

    def _step(self, change: float, dt: Optional[float]) -> float:
        """The turn between two states whose heading differs by ``change`` (within
        -pi..pi), ``dt`` s apart. A relative turn's robot may turn more than pi between
        two states (none for pi / speed: 0.6 s at the fastest turn, far more than the
        robot's 30 ms between states but less than the link's timeout): a change against
        the goal's way is then taken the goal's way round, unless that takes the robot
        past the target by more than it overshoots (near its end a turn eases back)."""
        if self.absolute or dt is None or self.speed <= 0.0 or \
                dt * self.speed * _TURN_SPEED_SLACK <= math.pi:
            return change
        way = 1.0 if self.angle >= 0.0 else -1.0
        if change * way >= 0.0:
            return change
        other = change + way * 2.0 * math.pi
        reach = min(dt * self.speed * _TURN_SPEED_SLACK,
                    way * (self.angle - self.turned) + self.tolerance + _TURN_OVERSHOOT_RAD)
        return other if abs(other) <= reach else change

    def on_state(self, s: StateSample) -> Optional[Outcome]:
        if self.outcome is not None:
            return self.outcome
        last = self.start_yaw if self._last_yaw is None else self._last_yaw
        since = self.start_t if self._last_t is None else self._last_t
        self.turned += self._step(wrap_angle(s.yaw - last), None if since is None else s.t - since)
        self._last_yaw, self._last_t = s.yaw, s.t
        reason = interruption(s.flags)
        if reason:
            return self._finish(ABORTED, f"interrupted: {reason}")
        remaining = self.remaining(s.yaw)
        if s.wheels_moving:
            self.seen_moving = True
            self._settled = 0
            if self._standstill.stalled(s):  # the flag set, the treads still: held, or stalled
                return self._finish(ABORTED, f"blocked: the robot {_STOOD}, its treads still (held, or "
                                    f"stalled), {abs(remaining):.3f} rad from the target")
            return self._timed_out(s, f"still turning, {remaining:.3f} rad to go")
        self._standstill.reset()
        if self.acked or self.seen_moving:
            if abs(remaining) <= self.tolerance:
                return self._finish(SUCCEEDED, f"turned {self.turned:.3f} rad, heading error "
                                    f"{remaining:.4f} rad")
            self._settled += 1
            limit = SETTLE_STATES if self.seen_moving else NO_MOTION_STATES
            if self._settled >= limit:
                # left against the turn's way (the short way to a heading): it went past
                way = wrap_angle(self.angle - self.start_yaw) if self.absolute else self.angle
                where = "past the target" if remaining * way < 0.0 else "short of the target"
                return self._finish(ABORTED, f"the robot stopped {abs(remaining):.3f} rad {where} "
                                    f"(tolerance {self.tolerance:.3f} rad)")
            return self._timed_out(s, f"{remaining:.3f} rad to go")
        self._still += 1
        if self._still >= NO_START_STATES:
            if abs(remaining) <= self.tolerance:
                return self._finish(SUCCEEDED, "already at the heading (the robot did not "
                                    "acknowledge the turn)")
            return self._finish(ABORTED, "the robot neither acknowledged nor started the turn")
        return self._timed_out(s, "the turn has not started")


_PATH_STARTED, _PATH_INTERRUPTED, _PATH_COMPLETED = 0, 1, 2


@dataclass
class PathTracker(_Tracker):
    """A path sent with ClearPath + AppendPathSeg* + ExecutePath(event_id).

    PATH_COMPLETED finishes it (after the treads have stopped); PATH_INTERRUPTED
    aborts it with the reason read from the robot states that follow (picked up,
    falling, cliff detected; "interrupted by the robot" if none shows within
    :data:`REASON_STATES` states). A pick-up or fall seen in the
    state aborts at once, and so does a robot that follows the path (IS_PATHING) but stands,
    its treads still, for :data:`STALLED_STATES` states (blocked: :class:`_Standstill`). A cliff
    is named once the sensor has seen no floor for
    :data:`~.sensors.CLIFF_EDGE_HOLD_S`: a lifted robot loses the floor first and stops
    for it, and reports the pick-up 0.1-0.2 s later. If the robot never sends the event,
    IS_PATHING going from set to clear for :data:`NO_EVENT_STATES` states counts as
    completion."""

    event_id: int = 0
    segments: List[Segment] = field(default_factory=list)
    phase: str = "waiting"        # waiting | running | completing | interrupted
    current: int = -1             # the segment being followed (from curr_path_segment)
    seen_pathing: bool = False
    note: str = ""
    _count: int = 0
    #: the interrupted path's drop, held as long as the driver's edges are (CLIFF_EDGE_HOLD_S)
    _drop: CliffEdgeTracker = field(default_factory=CliffEdgeTracker)
    #: for each segment on the robot, ours it belongs to (robot_segment_owners)
    _owners: Optional[List[int]] = None
    #: how far the robot was from the segment it followed, at the last state (m)
    _off_path: float = 0.0
    #: while it follows the path: how long it stands still
    _standstill: _Standstill = field(default_factory=_Standstill)

    def on_path_event(self, event_id: int, event_type: int) -> None:
        if event_id != self.event_id or self.outcome is not None:
            return
        event_type = int(event_type)
        if event_type == _PATH_STARTED and self.phase == "waiting":
            self.phase = "running"
        elif event_type == _PATH_COMPLETED and self.phase in ("waiting", "running"):
            self.phase = "completing"
            self._count = 0
        elif event_type == _PATH_INTERRUPTED and self.phase in ("waiting", "running"):
            self.phase = "interrupted"
            self._count = 0

    @property
    def completed_segments(self) -> int:
        if self.outcome is not None and self.outcome.status == SUCCEEDED:
            return len(self.segments)
        return max(0, self.current)

    def on_state(self, s: StateSample) -> Optional[Outcome]:
        if self.outcome is not None:
            return self.outcome
        if self._owners is None:
            self._owners = robot_segment_owners(self.segments)
        if 0 <= s.path_segment < len(self._owners):  # the robot counts an arc's pieces
            self.current = self._owners[s.path_segment]
        if 0 <= self.current < len(self.segments):
            self._off_path = self.segments[self.current].distance_to(s.x, s.y)
        reason = interruption(s.flags)
        if reason:
            return self._finish(ABORTED, f"interrupted: {reason}")
        if self.phase == "interrupted":
            # the reason shows in the flags of the states that follow the event (a state
            # already on its way when the robot stopped may not have it yet)
            drop = bool(s.flags & StatusFlag.CLIFF_DETECTED)
            if self._drop.update(s.t, 0, drop, True) is not None:
                return self._finish(ABORTED, "interrupted: cliff detected (the robot stopped "
                                    "at an edge)")
            if drop:
                return None
            self._count += 1
            if self._count >= REASON_STATES:
                if self._off_path >= OFF_PATH_M:
                    return self._finish(ABORTED, f"interrupted by the robot, {self._off_path * 1000:.0f} "
                                        f"mm off its path: it gives a path up {PATH_GIVE_UP_M * 1000:.0f} "
                                        "mm off it (pushed, blocked, or its treads slipping)")
                return self._finish(ABORTED, "interrupted by the robot")
            return None
        if self.phase == "completing":
            self._count += 1
            if not s.wheels_moving or self._count >= NO_MOTION_STATES:
                return self._finish(SUCCEEDED, "path completed" + self.note)
            return None
        if s.flags & StatusFlag.IS_PATHING:
            self.seen_pathing = True
            self._count = 0
            if self.phase == "waiting":
                self.phase = "running"
            if self._standstill.stalled(s):  # held, or its treads stalled: it would push on
                left = distance_remaining(self.segments, self.current, s.x, s.y)
                return self._finish(ABORTED, f"blocked: the robot {_STOOD} on its path, its treads still "
                                    f"(held, or stalled), on segment {max(self.current, 0)}, {left:.3f} m "
                                    "from its end")
        elif self.seen_pathing:
            self._count += 1
            if self._count >= NO_EVENT_STATES and not s.wheels_moving:
                self.note = " (the robot sent no PathFollowingEvent; IS_PATHING cleared)"
                self.phase = "completing"
                return self._finish(SUCCEEDED, "path completed" + self.note)
        elif self.phase == "waiting":
            self._count += 1
            if self._count >= NO_START_STATES:
                return self._finish(ABORTED, "the robot did not start the path (no "
                                    "PathFollowingEvent, IS_PATHING never set)")
        return self._timed_out(s, f"path not finished, on segment {self.current}")
