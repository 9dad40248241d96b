"""Cozmo's body in numbers, in SI units (metres, radians, seconds): the one place.

The driver (kinematics, clamping, joint states) and the robot description
(URDF, ``cozmo_description``) take their dimensions and limits from here; the
protocol keeps its own units (mm, mm/s) and the driver converts at its boundary.

Lift geometry
-------------
The lift is a parallel arm of length :data:`LIFT_ARM_LENGTH_M` turning about a
pivot :data:`LIFT_PIVOT_HEIGHT_M` above the ground. The protocol reports and
commands the lift as a *height* (of the arm's end above the ground, mm); the
joint is the arm's angle above the horizontal::

    height = LIFT_PIVOT_HEIGHT_M + LIFT_ARM_LENGTH_M * sin(angle)

Checked against the limits: the lowest height, 32 mm, is an angle of
asin((32 - 45) / 66) = -0.198 rad (-11.4 deg); the highest, 92 mm, is
asin((92 - 45) / 66) = 0.793 rad (45.4 deg). Both lie well inside the arm's
reach (|sin| <= 1), and the relation is monotonic over that range, so every
height has exactly one angle.

Pure: no ROS, no I/O.
"""

from __future__ import annotations

import math

__all__ = [
    "TRACK_WIDTH_M",
    "MAX_WHEEL_SPEED_MPS",
    "HEAD_MIN_ANGLE_RAD",
    "HEAD_MAX_ANGLE_RAD",
    "HEAD_MAX_SPEED_RADPS",
    "LIFT_MIN_HEIGHT_M",
    "LIFT_MAX_HEIGHT_M",
    "LIFT_ARM_LENGTH_M",
    "LIFT_PIVOT_HEIGHT_M",
    "LIFT_MIN_ANGLE_RAD",
    "LIFT_MAX_ANGLE_RAD",
    "LIFT_MAX_SPEED_RADPS",
    "BATTERY_CELLS",
    "BATTERY_EMPTY_V",
    "BATTERY_FULL_V",
    "MAX_TURN_RATE_RADPS",
    "MIN_TURN_RATE_RADPS",
    "TURN_ANGLE_TOLERANCE_RAD",
    "CLIFF_SENSOR_X_M",
    "FOOTPRINT_FRONT_M",
    "FOOTPRINT_REAR_M",
    "FOOTPRINT_HALF_WIDTH_M",
    "FOOTPRINT_M",
    "CLIFF_EDGE_POINTS_M",
    "lift_height_to_angle",
    "lift_angle_to_height",
]

#: distance between the two treads' contact lines (differential-drive track): Anki's
#: robot firmware (cozmoConfig.h, WHEEL_DIST_MM = 46, "approx distance b/w the center of the
#: front treads"), which its steering and odometry use
TRACK_WIDTH_M = 0.046
#: fastest either tread can go
MAX_WHEEL_SPEED_MPS = 0.2
#: fastest turn in place the robot is asked for: Anki's limit (cozmoConfig.h,
#: MAX_BODY_ROTATION_SPEED_DEG_PER_SEC = 300, "determined experimentally", below what the
#: treads' speed would allow because they slip), which its engine clamps turns to
MAX_TURN_RATE_RADPS = math.radians(300.0)
#: slowest turn in place the robot makes: Anki's Cozmo firmware speeds a slower point turn
#: up to it (steeringController, ExecutePointTurn: POINT_TURN_TERMINAL_VEL_RAD_PER_S = 0.4,
#: "make it at least that big"), TurnInPlace and a path's point turns alike
MIN_TURN_RATE_RADPS = 0.4
#: the tightest heading a turn in place reaches: Anki's engine raises any smaller
#: tolerance to it (POINT_TURN_ANGLE_TOL, 2 deg: "can't be lower than what is used
#: internally on the robot")
TURN_ANGLE_TOLERANCE_RAD = math.radians(2.0)

#: head tilt limits (positive looks up)
HEAD_MIN_ANGLE_RAD = math.radians(-25.0)
HEAD_MAX_ANGLE_RAD = math.radians(44.5)
#: fastest head speed the driver asks for
HEAD_MAX_SPEED_RADPS = 15.0

#: lift height limits (arm end above the ground)
LIFT_MIN_HEIGHT_M = 0.032
LIFT_MAX_HEIGHT_M = 0.092
LIFT_ARM_LENGTH_M = 0.066
LIFT_PIVOT_HEIGHT_M = 0.045
#: fastest lift speed the driver asks for (arm angle)
LIFT_MAX_SPEED_RADPS = 10.0

#: the battery is one LiPo cell
BATTERY_CELLS = 1
#: the voltages Anki's body firmware reads as a battery level of 0 and 100 % (battery.cpp,
#: Battery::getLevel; below the first for a minute, it switches the robot off)
BATTERY_EMPTY_V = 3.45
BATTERY_FULL_V = 4.05

#: the cliff sensor (the one the protocol documents, under the front) ahead of the robot's
#: origin (base_footprint); the distance is this project's estimate, the simulator's too
CLIFF_SENSOR_X_M = 0.032
#: the robot's outline on the ground, base_footprint (x forward, y left), the footprint of
#: config/nav2_params.yaml's costmaps: from 36 mm behind (the treads end 33 mm behind) to
#: 49 mm ahead, where the lift's forks reach with the arm level (48 mm with the lift down,
#: 33 mm, the treads, with it up), 28 mm to each side (the treads' outer edges), as
#: cozmo_description draws the robot (test/e2e/test_nav2_config.py checks both)
FOOTPRINT_FRONT_M = 0.049
FOOTPRINT_REAR_M = -0.036
FOOTPRINT_HALF_WIDTH_M = 0.028
FOOTPRINT_M = ((FOOTPRINT_FRONT_M, FOOTPRINT_HALF_WIDTH_M), (FOOTPRINT_FRONT_M, -FOOTPRINT_HALF_WIDTH_M),
               (FOOTPRINT_REAR_M, -FOOTPRINT_HALF_WIDTH_M), (FOOTPRINT_REAR_M, FOOTPRINT_HALF_WIDTH_M))
#: where cliff/points marks an edge the cliff sensor found (base_footprint: x forward, y
#: left, z up): a row as wide as the body, 1.5 cm beyond the footprint's front, where the
#: drop goes on (inside the footprint, a costmap's footprint clearing would erase it at once)
CLIFF_EDGE_POINTS_M = tuple((FOOTPRINT_FRONT_M + 0.015, y, 0.0)
                            for y in (-0.02, -0.01, 0.0, 0.01, 0.02))


def lift_height_to_angle(height_m: float) -> float:
    """Arm angle (rad above horizontal) of a lift height (m); heights outside the
    limits are clamped to them first."""
    height = min(max(height_m, LIFT_MIN_HEIGHT_M), LIFT_MAX_HEIGHT_M)
    return math.asin((height - LIFT_PIVOT_HEIGHT_M) / LIFT_ARM_LENGTH_M)


def lift_angle_to_height(angle_rad: float) -> float:
    """Lift height (m) of an arm angle (rad above horizontal)."""
    return LIFT_PIVOT_HEIGHT_M + LIFT_ARM_LENGTH_M * math.sin(angle_rad)


LIFT_MIN_ANGLE_RAD = lift_height_to_angle(LIFT_MIN_HEIGHT_M)
LIFT_MAX_ANGLE_RAD = lift_height_to_angle(LIFT_MAX_HEIGHT_M)

#: below this size, RobotState's lift field is an angle (rad), above it a height (mm)
_LIFT_FIELD_ANGLE_LIMIT = 10.0


def reported_lift_height_m(value: float) -> float:
    """The lift height (m) of RobotState's lift field (``lift_height_mm``), whichever unit
    the robot sends. The protocol notes (pycozmo) read it as the height in mm; Anki's robot
    firmware fills it with the lift's angle in radians (``liftAngle``, as Anki's cozmoclad
    names the field at that offset). The two never overlap (the arm's angle stays within
    -0.2..0.8 rad, its height within 32..92 mm), so either is read right."""
    value = float(value)
    if abs(value) < _LIFT_FIELD_ANGLE_LIMIT:
        return lift_angle_to_height(value)
    return value / 1000.0
