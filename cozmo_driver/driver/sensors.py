"""Robot sensor readings turned into SI quantities: IMU, battery, joints, status flags.

Conventions (REP-103): the robot's body axes are x forward, y left, z up, the
same as ``base_link`` and ``imu_link``; the accelerometer reports specific force
in mm/s^2 (about +9810 on z when standing flat), converted here to m/s^2.
RobotState's accelerometer and gyro readings are the IMU's own, and the IMU sits
in the head: its x and z axes are the body's turned up by the head angle (Anki's
firmware turns them back by the head angle for its own use, and sends them raw).
:func:`imu_to_body` turns them into the body's axes; y is the same in both.
Cozmo's ``pose_pitch_rad`` is positive nose-up (a positive pitch goes with a
positive forward specific force), while a positive ROS pitch (about +y, y to
the left) is nose-down: :func:`imu_from_state` negates it.

Battery percentage (:func:`battery_percentage`): linear in the voltage of
Cozmo's single LiPo cell, 3.45 V -> 0.0 and 4.05 V -> 1.0, clamped outside: the
level Anki's body firmware computes itself (battery.cpp, ``Battery::getLevel``;
only the voltage reaches the engine). It is a rough open-circuit estimate: it
reads high while charging and low under load. The same firmware shows a low-battery
pattern on the backpack below 3.50 V only while no program is connected (with one
connected the backpack shows what it is sent; Anki's app drew its own charging and
low-battery lights), and switches the robot off after a minute below 3.45 V
(:data:`BATTERY_LOW_V`, :data:`BATTERY_EMPTY_V`). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..protocol.status import RobotStatusFlag
from ..robot_geometry import (BATTERY_EMPTY_V, BATTERY_FULL_V, lift_height_to_angle,
                              reported_lift_height_m)
from .odometry import UNOBSERVED_VARIANCE, quaternion_from_rpy

__all__ = [
    "StatusFlag",
    "STATUS_FLAG_NAMES",
    "status_flags_dict",
    "cliff_ahead",
    "CLIFF_EDGE_HOLD_S",
    "CliffEdgeTracker",
    "BATTERY_EMPTY_V",
    "BATTERY_FULL_V",
    "BATTERY_LOW_V",
    "battery_percentage",
    "volts_text",
    "power_supply_status",
    "ImuReading",
    "imu_from_state",
    "orientation_variances",
    "imu_to_body",
    "GYRO_SIGMA_RADPS",
    "ACCEL_SIGMA_MPS2",
    "HEAD_STILL_RAD",
    "head_moving",
    "joint_positions",
]


class StatusFlag:
    """The bits of RobotState.status as plain ints, one attribute per RobotStatusFlag
    member (one definition, in the protocol layer). The driver tests them in every
    robot state: ``int & IntFlag`` builds a new flag in Python (about 0.7 us on CPython
    3.11), ``int & int`` does not (about 13 ns)."""


for _flag in RobotStatusFlag:
    setattr(StatusFlag, _flag.name, int(_flag))
del _flag


#: (field name of cozmo_interfaces/RobotStatus, bit) for every flag
STATUS_FLAG_NAMES: Tuple[Tuple[str, int], ...] = tuple(
    (flag.name.lower(), int(flag)) for flag in RobotStatusFlag)


def status_flags_dict(status: int) -> dict:
    """{'is_moving': bool, ...} for every known flag."""
    return {name: bool(status & bit) for name, bit in STATUS_FLAG_NAMES}


def cliff_ahead(status: int, stop_on_cliff: bool) -> bool:
    """With ``stop_on_cliff``, whether the robot, on its treads, stands with its (front) cliff
    sensor over an edge: then forward motion is the driver's to hold. Anki's firmware stops
    the treads only when the drop appears under a robot driving forwards, once: while the
    sensor still sees it, a new forward drive is not stopped again."""
    return bool(stop_on_cliff and status & RobotStatusFlag.CLIFF_DETECTED
                and not status & (RobotStatusFlag.IS_PICKED_UP | RobotStatusFlag.IS_FALLING))


#: a drop must last this long, the robot on its treads throughout, to count as an edge of
#: its floor: Anki's firmware waits as long before it reports a cliff (CLIFF_EVENT_DELAY_MS),
#: so that a pick-up, whose first sign is the sensor losing the floor, cancels it
CLIFF_EDGE_HOLD_S = 0.5


class CliffEdgeTracker:
    """Whether the cliff sensor sees an edge of the floor the robot stands on: a drop that
    lasted :data:`CLIFF_EDGE_HOLD_S` while the robot stood on its treads. Pure."""

    def __init__(self) -> None:
        self.edge = False
        self._since: Optional[Tuple[float, int]] = None  # (t, stamp) the drop was first seen

    def update(self, t: float, stamp_ns: int, drop: bool, on_treads: bool, held: bool = False
               ) -> Optional[Tuple[int, bool]]:
        """One state at ``t`` s: the sensor sees a drop (CLIFF_DETECTED), the robot is on
        its treads. Returns (stamp, edge) when that changes: an edge is stamped as the
        state that first showed its drop, its end as this state. ``held``: whether the
        robot is on its treads is not known (its head calibrates, see
        :mod:`~cozmo_driver.driver.orientation`): an edge found stays, none is found, and a
        drop seen before must hold again afterwards."""
        if held:
            self._since = None
            return None
        if not (drop and on_treads):
            self._since = None
            if self.edge:
                self.edge = False
                return stamp_ns, False
            return None
        if self.edge:
            return None
        if self._since is None:
            self._since = (t, stamp_ns)
        if t - self._since[0] >= CLIFF_EDGE_HOLD_S - 1e-9:
            self.edge = True
            return self._since[1], True
        return None


# BATTERY_EMPTY_V (0 %) and BATTERY_FULL_V (100 %): robot_geometry, shared with the simulator

#: below it the robot shows its low-battery light
BATTERY_LOW_V = 3.50


def volts_text(volts: float) -> str:
    """``volts`` as the battery's messages give it, ``3.49 V``: cut to hundredths, not rounded,
    so that a reading below a threshold (3.4996 V, below 3.50 V) is never said as the
    threshold itself ("battery low (3.50 V, below 3.50 V)")."""
    return f"{math.floor(volts * 100.0 + 1e-6) / 100.0:.2f} V"


def battery_percentage(voltage_v: float) -> float:
    """State-of-charge estimate 0.0..1.0 from the cell voltage (NaN if the voltage is not
    finite): the robot's own level (see the module docstring)."""
    if not math.isfinite(voltage_v):
        return math.nan
    fraction = (voltage_v - BATTERY_EMPTY_V) / (BATTERY_FULL_V - BATTERY_EMPTY_V)
    return min(1.0, max(0.0, fraction))


def power_supply_status(status: int) -> str:
    """'CHARGING', 'FULL', 'NOT_CHARGING' or 'DISCHARGING' (the suffixes of
    sensor_msgs/BatteryState POWER_SUPPLY_STATUS_*) from the status flags.

    On the charger, a charger out of spec comes first (NOT_CHARGING, as Anki's engine
    ranked it: BodyLightComponent::UpdateChargingLightConfig), then charging; on it without
    charging, the battery is full."""
    if status & StatusFlag.IS_ON_CHARGER and status & StatusFlag.IS_CHARGER_OOS:
        return "NOT_CHARGING"
    if status & StatusFlag.IS_CHARGING:
        return "CHARGING"
    if status & StatusFlag.IS_ON_CHARGER:
        return "FULL"
    return "DISCHARGING"


#: estimated 1-sigma noise of the gyro and the accelerometer (no datasheet values published)
GYRO_SIGMA_RADPS = 0.01
ACCEL_SIGMA_MPS2 = 0.1
# orientation: roll is not reported (assumed level), pitch comes from the
# accelerometer, yaw is the odometry's (its variance the odometry's too, given by the
# caller: it grows with the distance and the turns driven; this one where none is given).
_ROLL_VAR = 0.1 ** 2
_PITCH_VAR = 0.02 ** 2
#: the variance of an angle the IMU reading assumes but does not know: roll off the treads
#: (on a side it is 90 deg), pitch while the head calibrates (the robot reports 0 then)
UNKNOWN_ANGLE_VAR = (math.pi / 2) ** 2


def orientation_variances(on_treads: bool, calibrating: bool) -> Tuple[float, float]:
    """(roll, pitch) variances of imu/data's orientation: roll is assumed 0, known only
    while the robot stands on its treads; pitch is the robot's, except while its head
    calibrates."""
    return (_ROLL_VAR if on_treads else UNKNOWN_ANGLE_VAR,
            UNKNOWN_ANGLE_VAR if calibrating else _PITCH_VAR)
_YAW_VAR = 0.05 ** 2


@dataclass(frozen=True)
class ImuReading:
    orientation: Tuple[float, float, float, float]          # x, y, z, w
    orientation_covariance: List[float]
    angular_velocity: Tuple[float, float, float]             # rad/s
    angular_velocity_covariance: List[float]
    linear_acceleration: Tuple[float, float, float]          # m/s^2
    linear_acceleration_covariance: List[float]


def _diag3(a: float, b: float, c: float) -> List[float]:
    return [a, 0.0, 0.0, 0.0, b, 0.0, 0.0, 0.0, c]


#: the most the head angle may change between two robot states (about 0.07 rad/s at 33 a
#: second) for the head to count as still (:func:`head_moving`)
HEAD_STILL_RAD = 0.002


def head_moving(previous_rad: float, head_rad: float, flags: int, calibrating: bool) -> bool:
    """Whether the head moves: it calibrates, the robot reports it not in position
    (HEAD_IN_POS clear: a head command runs), or its angle changed by more than
    :data:`HEAD_STILL_RAD` since the previous state's (``previous_rad``; NaN: none). The
    IMU sits in the head: its gyro then adds the head's rate to the body's pitch rate, and
    its accelerometer, off the head's pivot, the head's tangential and centripetal
    acceleration to x and z (see :func:`imu_from_state`)."""
    return (calibrating or not flags & StatusFlag.HEAD_IN_POS
            or abs(head_rad - previous_rad) > HEAD_STILL_RAD)


def imu_to_body(x: float, y: float, z: float, head_rad: float) -> Tuple[float, float, float]:
    """A vector (acceleration or rate) in the head's IMU axes -> the body's, the head at
    ``head_rad`` (positive up)."""
    c, s = math.cos(head_rad), math.sin(head_rad)
    return x * c - z * s, y, x * s + z * c


def imu_from_state(state, yaw_rad: float, yaw_var: float = _YAW_VAR,
                   head_rad: Optional[float] = None, roll_var: float = _ROLL_VAR,
                   pitch_var: float = _PITCH_VAR, head_moves: bool = False) -> ImuReading:
    """An IMU reading from a RobotState; ``yaw_rad`` is the heading to report and
    ``yaw_var`` its variance (the driver passes its continuous odometry yaw and that
    yaw's variance, so IMU and odom agree, and neither claims the heading better known
    than the other). ``head_rad``: the head angle that turns the IMU's axes into the
    body's, if not the state's (the driver's while the head calibrates). ``roll_var`` and
    ``pitch_var``: see :func:`orientation_variances`. ``head_moves`` (:func:`head_moving`):
    the rate about y and the acceleration along x and z include the head's own motion,
    which is not taken out: their variances are UNOBSERVED_VARIANCE (1e6, as odometry's
    terms it does not observe)."""
    pitch = -float(state.pose_pitch_rad)  # the body's already
    head = float(state.head_angle_rad) if head_rad is None else head_rad
    gv = GYRO_SIGMA_RADPS ** 2
    av = ACCEL_SIGMA_MPS2 ** 2
    # the head's motion is in the rate about y and in the acceleration along x and z
    wyv, axzv = (UNOBSERVED_VARIANCE, UNOBSERVED_VARIANCE) if head_moves else (gv, av)
    return ImuReading(
        orientation=quaternion_from_rpy(0.0, pitch, yaw_rad),
        orientation_covariance=_diag3(roll_var, pitch_var, yaw_var),
        angular_velocity=imu_to_body(float(state.gyro_x_radps), float(state.gyro_y_radps),
                                     float(state.gyro_z_radps), head),
        angular_velocity_covariance=_diag3(gv, wyv, gv),
        linear_acceleration=imu_to_body(float(state.accel_x_mmps2) / 1000.0,
                                        float(state.accel_y_mmps2) / 1000.0,
                                        float(state.accel_z_mmps2) / 1000.0, head),
        linear_acceleration_covariance=_diag3(axzv, av, axzv),
    )


def joint_positions(state, head_rad: Optional[float] = None,
                    lift_field: Optional[float] = None) -> Tuple[float, float]:
    """(head joint rad, lift joint rad) from a RobotState; ``head_rad``: the head angle,
    ``lift_field``: the value of the state's lift field, to take instead of the state's."""
    head = float(state.head_angle_rad) if head_rad is None else head_rad
    lift = state.lift_height_mm if lift_field is None else lift_field
    return head, lift_height_to_angle(reported_lift_height_m(lift))
