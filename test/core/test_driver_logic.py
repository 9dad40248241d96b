"""The driver's pure logic (cozmo_driver.driver, robot_geometry, protocol.nvstorage),
tested without rclpy."""

from __future__ import annotations

import math
import os
import re
import shutil
import stat
import sys
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
from dependencies import require
from sample_data import CAMERA_YAML
from hypothesis import given
from hypothesis import strategies as st

from cozmo_driver import robot_geometry as geo
from cozmo_driver.driver import camera_info as caminfo
from cozmo_driver.driver.commands import (CommandError, check_cmd_vel_stamp, check_frame, clamp,
                                          require_finite, rgb555, rgb555_to_rgb, volume_level)
from cozmo_driver.anim.av_stream import AVStream
from cozmo_driver.driver.diagnostics import ERROR, OK, WARN, av_report, link_report, robot_report
from cozmo_driver.driver.events import EventDetector, EventType
from cozmo_driver.driver.kinematics import twist_to_wheels, wheels_to_twist
from cozmo_driver.driver.odometry import (UNOBSERVED_VARIANCE, OdometryTracker, Pose2D, compose,
                                          inverse, pose_covariance, pose_variances, quaternion_from_rpy,
                                          twist_covariance, twist_variances)
from cozmo_driver.driver.parameters import (PARAMETERS, defaults, full_frame_id, validate_all,
                                            validate_change, validate_value)
from cozmo_driver.driver.sensors import (StatusFlag, battery_percentage, imu_from_state,
                                         joint_positions, power_supply_status, status_flags_dict)
from cozmo_driver.protocol import messages as msgs
from cozmo_driver.protocol.errors import RemoteProtocolError
from cozmo_driver.protocol.session import SessionStats
from cozmo_driver.protocol.nvstorage import (CAMERA_CALIB_SIZE, NV_TAG_CAMERA_CALIB,
                                             CameraCalibration, NvReadAssembler,
                                             decode_camera_calibration, encode_camera_calibration)

ROOT = Path(__file__).resolve().parents[2]
finite = st.floats(-5.0, 5.0, allow_nan=False)


def test_pure_modules_do_not_import_rclpy():
    import subprocess
    code = ("import sys, cozmo_driver.driver, cozmo_driver.robot_geometry, "
            "cozmo_driver.protocol.nvstorage; "
            "sys.exit(1 if any(m.split('.')[0] in ('rclpy', 'sensor_msgs', 'nav_msgs') "
            "for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ----------------------------------------------------------------------------- geometry

def test_geometry_matches_the_simulated_body():
    from cozmo_driver.sim import model
    assert geo.TRACK_WIDTH_M * 1000 == pytest.approx(model.TRACK_WIDTH_MM)
    assert geo.MAX_WHEEL_SPEED_MPS * 1000 == pytest.approx(model.MAX_WHEEL_SPEED_MMPS)
    assert geo.HEAD_MIN_ANGLE_RAD == pytest.approx(model.HEAD_MIN_RAD)
    assert geo.HEAD_MAX_ANGLE_RAD == pytest.approx(model.HEAD_MAX_RAD)
    assert geo.LIFT_MIN_HEIGHT_M * 1000 == pytest.approx(model.LIFT_MIN_MM)
    assert geo.LIFT_MAX_HEIGHT_M * 1000 == pytest.approx(model.LIFT_MAX_MM)
    assert geo.LIFT_ARM_LENGTH_M * 1000 == pytest.approx(model.LIFT_ARM_MM)
    assert geo.LIFT_PIVOT_HEIGHT_M * 1000 == pytest.approx(model.LIFT_PIVOT_MM)


def test_lift_relation_at_the_limits():
    assert geo.LIFT_MIN_ANGLE_RAD == pytest.approx(math.asin((0.032 - 0.045) / 0.066))
    assert geo.LIFT_MAX_ANGLE_RAD == pytest.approx(math.asin((0.092 - 0.045) / 0.066))
    assert math.degrees(geo.LIFT_MIN_ANGLE_RAD) == pytest.approx(-11.36, abs=0.01)
    assert math.degrees(geo.LIFT_MAX_ANGLE_RAD) == pytest.approx(45.41, abs=0.01)
    for h in (0.032, 0.05, 0.07, 0.092):
        assert geo.lift_angle_to_height(geo.lift_height_to_angle(h)) == pytest.approx(h)
    assert geo.lift_height_to_angle(0.2) == geo.LIFT_MAX_ANGLE_RAD  # clamped


# ----------------------------------------------------------------------------- kinematics

def test_kinematics_straight_and_in_place():
    cmd = twist_to_wheels(0.1, 0.0)
    assert (cmd.left_mps, cmd.right_mps, cmd.limited) == (0.1, 0.1, False)
    cmd = twist_to_wheels(0.0, 2.0)
    assert cmd.left_mps == pytest.approx(-0.046) and cmd.right_mps == pytest.approx(0.046)   # 46 mm track
    assert wheels_to_twist(cmd.left_mps, cmd.right_mps) == pytest.approx((0.0, 2.0))


@given(finite, finite, st.floats(0.01, 0.2))
def test_kinematics_respect_the_limit_and_keep_curvature(v, w, limit):
    cmd = twist_to_wheels(v, w, limit)
    assert max(abs(cmd.left_mps), abs(cmd.right_mps)) <= limit + 1e-12
    v2, w2 = wheels_to_twist(cmd.left_mps, cmd.right_mps)
    assert v2 == pytest.approx(v * cmd.scale, abs=1e-12)
    assert w2 == pytest.approx(w * cmd.scale, abs=1e-9)
    if abs(v) > 1e-3 and abs(w) > 1e-3:
        assert w2 / v2 == pytest.approx(w / v, rel=1e-9)  # same radius


def test_kinematics_scale_a_fast_arc_as_a_whole():
    cmd = twist_to_wheels(0.4, 2.0, 0.2)
    assert cmd.limited
    assert cmd.right_mps == pytest.approx(0.2)
    assert cmd.left_mps / cmd.right_mps == pytest.approx((0.4 - 0.046) / (0.4 + 0.046))


# ----------------------------------------------------------------------------- odometry

@given(finite, finite, st.floats(-3.1, 3.1), finite, finite, st.floats(-3.1, 3.1))
def test_compose_inverse(x, y, a, x2, y2, a2):
    p, q = Pose2D(x, y, a), Pose2D(x2, y2, a2)
    r = compose(compose(p, q), inverse(q))
    assert (r.x, r.y) == pytest.approx((p.x, p.y), abs=1e-9)
    assert math.cos(r.yaw - p.yaw) == pytest.approx(1.0)


def test_tracker_follows_motion_without_reanchoring():
    t = OdometryTracker()
    for k in range(50):
        pose, reason = t.update((0, 1), 0.004 * k, 0.0, 0.01 * k, 0.03 * k)
        assert reason is None
    assert pose.x == pytest.approx(0.196) and pose.yaw == pytest.approx(0.49)
    assert t.distance_m == pytest.approx(0.196)
    assert t.reanchors == 0


@pytest.mark.parametrize("how", ["frame", "jump", "connection", "head calibration"])
def test_tracker_continues_when_the_robot_reanchors(how):
    t = OdometryTracker()
    t.update((0, 1), 0.0, 0.0, 0.0, 0.0)
    pose, _ = t.update((0, 1), 0.3, 0.1, 0.5, 2.0)
    frame = (1, 2) if how == "frame" else (0, 1)
    if how == "connection":
        t.new_connection()
    if how == "head calibration":  # a restart smaller than a jump is told
        t.reanchor_next("the head calibrates")
    # the robot's pose restarts elsewhere (SetOrigin, reboot, re-anchoring)
    after, reason = t.update(frame, 0.0 if how != "jump" else 2.0, 0.0,
                             0.3 if how == "head calibration" else 0.0, 2.03)
    assert reason is not None and (how != "head calibration" or reason == "the head calibrates")
    assert (after.x, after.y, after.yaw) == pytest.approx((pose.x, pose.y, pose.yaw))
    # and keeps adding the robot's motion from there, in the robot's own heading
    yaw = 0.3 if how == "head calibration" else 0.0
    moved, reason = t.update(frame, (0.0 if how != "jump" else 2.0) + 0.01 * math.cos(yaw),
                             0.01 * math.sin(yaw), yaw, 2.06)
    assert reason is None
    assert moved.x == pytest.approx(pose.x + 0.01 * math.cos(0.5))
    assert moved.y == pytest.approx(pose.y + 0.01 * math.sin(0.5))
    assert t.reanchors == 1


def test_tracker_reanchors_on_a_heading_step_its_gyro_did_not_turn():
    """The robot's heading is its gyro's integral: a step the gyro's rate does not explain
    (the head calibration's restart, told late) re-anchors, a turn it explains does not."""
    t = OdometryTracker()
    for k in range(20):      # turning at 1 rad/s, as the gyro says: followed
        pose, reason = t.update((0, 1), 0.0, 0.0, 0.03 * k, 0.03 * k, yaw_rate=1.0)
        assert reason is None
    after, reason = t.update((0, 1), 0.0, 0.0, 0.0, 0.60, yaw_rate=0.0)   # back 0.57 rad
    assert reason == "the robot's heading jumped by 0.57 rad in 0.030 s, which its gyro did not turn"
    assert after.yaw == pytest.approx(pose.yaw)
    assert t.update((0, 1), 0.0, 0.0, 0.3, 0.63, yaw_rate=None)[1] is None   # no gyro: no rule


@pytest.mark.parametrize("rate, gap, turned", [
    (2.0, 1.7, 3.4),     # more than pi in the gap: the reported step wraps to about -2.9 rad
    (5.0, 0.7, 3.5),
    (4.0, 0.3, 1.12),    # spinning, and stopped inside the gap: the last state's gyro says 0
    (5.0, 0.09, 0.40),   # two states lost while it stops: the gyro at either end, 5 and 0 rad/s
])
def test_tracker_follows_a_turn_across_a_gap_in_the_robot_states(rate, gap, turned):
    """RobotState is unreliable (a Wi-Fi stall shorter than peer_timeout leaves a gap): a turn
    made in the gap is the robot's, not a restart, and is kept (no re-anchoring on the gyro)."""
    t = OdometryTracker()
    for k in range(10):
        t.update((0, 1), 0.0, 0.0, rate * 0.03 * k, 0.03 * k, yaw_rate=rate)
    yaw0 = rate * 0.27
    end_rate = 0.0 if turned < rate * gap else rate
    pose, reason = t.update((0, 1), 0.0, 0.0, yaw0 + turned, 0.27 + gap, yaw_rate=end_rate)
    assert reason is None and t.reanchors == 0
    assert math.cos(pose.yaw - (yaw0 + turned)) == pytest.approx(1.0)
    # the rule still holds after the gap: a step the gyro did not turn re-anchors
    assert t.update((0, 1), 0.0, 0.0, yaw0 + turned - 0.5, 0.3 + gap, yaw_rate=0.0)[1] is not None


def test_tracker_reset_goes_to_the_origin():
    t = OdometryTracker()
    t.update((0, 1), 0.0, 0.0, 0.0, 0.0)
    t.update((0, 1), 0.2, 0.0, 1.0, 2.0)
    t.reset()
    pose, _ = t.update((0, 1), 0.2, 0.0, 1.0, 2.03)
    assert (pose.x, pose.y, pose.yaw) == (0.0, 0.0, 0.0)
    assert t.distance_m == 0.0
    pose, _ = t.update((0, 1), 0.2 + 0.01 * math.cos(1.0), 0.01 * math.sin(1.0), 1.0, 2.06)
    assert (pose.x, pose.y) == pytest.approx((0.01, 0.0))


def test_tracker_reset_shift_maps_poses_of_the_odom_frame_before_resets_into_the_current_one():
    """reset_shift: a point given in odom before resets (a waiting goal's target) is where it was
    on the floor, in the current odom frame; a re-anchoring (odom continuous) moves nothing."""
    t = OdometryTracker()
    t.update((0, 1), 0.0, 0.0, 0.0, 0.0)
    t.update((0, 1), 0.3, 0.1, 0.5, 2.0)
    target_reported = Pose2D(0.5, -0.2, 1.0)          # a place on the floor, in the robot's frame
    before = compose(t.offset, target_reported)       # in odom before the resets
    shift0 = t.reset_shift
    t.reset()
    t.update((0, 1), 0.3, 0.1, 0.5, 2.03)
    t.update((0, 2), 0.0, 0.0, 0.0, 2.06)             # the robot's frame restarts: re-anchored
    t.update((0, 2), 0.01, 0.0, 0.2, 2.09)
    t.reset()
    t.update((0, 2), 0.02, 0.0, 0.2, 2.12)
    moved = compose(t.reset_shift, compose(inverse(shift0), before))
    # the target in the robot's restarted frame: its (0, 0, 0) is (0.3, 0.1, 0.5) of the first
    now = compose(t.offset, compose(inverse(Pose2D(0.3, 0.1, 0.5)), target_reported))
    assert (moved.x, moved.y, moved.yaw) == pytest.approx((now.x, now.y, now.yaw), abs=1e-12)
    assert shift0 == Pose2D() and t.reset_shift != Pose2D()


def test_tracker_reset_takes_effect_at_once_from_the_latest_robot_state():
    """A goal sent right after reset_odometry converts its odom target with the offset: it is
    the new frame's at once, not only at the next robot state (~30 ms later)."""
    t = OdometryTracker()
    t.update((0, 1), 0.0, 0.0, 0.0, 0.0)
    t.update((0, 1), 0.3, 0.1, 0.5, 2.0)
    t.reset()
    assert t.pose == Pose2D() and (t.distance_m, t.rotation_rad) == (0.0, 0.0)
    here = compose(t.offset, Pose2D(0.3, 0.1, 0.5))
    assert (here.x, here.y, here.yaw) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    # the next state goes on from there: no second re-anchoring, no jump, no re-anchor count
    pose, reason = t.update((0, 1), 0.3 + 0.01 * math.cos(0.5), 0.1 + 0.01 * math.sin(0.5), 0.5, 2.03)
    assert reason is None and t.reanchors == 0
    assert (pose.x, pose.y, pose.yaw) == pytest.approx((0.01, 0.0, 0.0), abs=1e-12)
    assert t.distance_m == pytest.approx(0.01)
    # before any robot state, the first one is the origin
    t = OdometryTracker()
    t.reset()
    pose, reason = t.update((0, 1), 0.3, 0.1, 0.5, 0.0)
    assert (pose.x, pose.y, pose.yaw) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12) and reason is None
    # a reset while a re-anchoring is pending (a new connection): the new connection's first
    # pose is the origin, re-anchored once, as before
    t.new_connection()
    t.reset()
    pose, reason = t.update((0, 2), 0.0, 0.0, 0.0, 5.0)
    assert (pose.x, pose.y, pose.yaw) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    assert reason == "new connection" and t.reanchors == 1


def test_covariances_are_diagonal_and_grow():
    a, b = pose_covariance(0.0, 0.0), pose_covariance(2.0, 3.0)
    assert len(a) == 36 and all(a[i] == 0 for i in range(36) if i % 7)
    assert b[0] > a[0] and b[35] > a[35]
    assert a[14] == a[21] == a[28] == UNOBSERVED_VARIANCE
    assert twist_covariance(0.5)[35] > twist_covariance(0.0)[35]
    assert set(twist_covariance(unreliable=True)[::7]) == {UNOBSERVED_VARIANCE}
    # the variances the driver fills odom with are that diagonal
    assert list(pose_variances(2.0, 3.0)) == b[::7]
    assert list(twist_variances(0.5, 0.05)) == twist_covariance(0.5, 0.05)[::7]
    assert list(twist_variances(unreliable=True)) == twist_covariance(unreliable=True)[::7]


# ----------------------------------------------------------------------------- sensors

def test_battery_curve():
    # the level Anki's body firmware computes (battery.cpp): 3.45 V -> 0 %, 4.05 V -> 100 %
    assert battery_percentage(3.45) == 0.0 and battery_percentage(4.05) == 1.0
    assert battery_percentage(3.75) == pytest.approx(0.5)
    assert battery_percentage(3.0) == 0.0 and battery_percentage(4.3) == 1.0
    assert math.isnan(battery_percentage(math.nan))
    assert power_supply_status(StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING) == "CHARGING"
    assert power_supply_status(StatusFlag.IS_ON_CHARGER) == "FULL"
    assert power_supply_status(StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGER_OOS) == "NOT_CHARGING"
    # out of spec ranks before charging (Anki's engine: BadCharger first)
    assert power_supply_status(StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGER_OOS
                               | StatusFlag.IS_CHARGING) == "NOT_CHARGING"
    assert power_supply_status(0) == "DISCHARGING"


def test_status_flags_cover_the_message():
    flags = status_flags_dict(0x1FFFF)
    assert len(flags) == 17 and all(flags.values())
    text = (ROOT / "cozmo_interfaces/msg/RobotStatus.msg").read_text()
    for name in flags:
        assert re.search(rf"^bool {name}$", text, re.M), name


def test_status_flag_bits_are_plain_ints_of_the_protocol_enum():
    """The driver's StatusFlag gives every RobotStatusFlag bit as a plain int: testing an
    int against an IntFlag builds a flag in Python for every robot state."""
    from cozmo_driver.protocol.status import RobotStatusFlag
    for flag in RobotStatusFlag:
        bit = getattr(StatusFlag, flag.name)
        assert type(bit) is int and bit == flag.value, flag.name
    assert type(0x1FFFF & StatusFlag.IS_FALLING) is int


def _rotate_world_to_body(q, v):
    x, y, z, w = q
    # R^T v for the unit quaternion q (body -> world)
    r = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    return [sum(r[i][j] * v[i] for i in range(3)) for j in range(3)]


def test_imu_units_and_pitch_sign_agree_with_the_accelerometer():
    from cozmo_driver.sim.model import ModelConfig, RobotModel
    # calibrated (a robot that has not calibrated its head reports a head angle counted
    # from power-up, and the driver holds it then: test_driver_core)
    model = RobotModel(config=ModelConfig(noise=False, calibrate_at_connection=False))
    model.pick_up(0.0)
    state = model.robot_state(0.0)
    # picked up, the simulated robot pitches (its accelerometer sees it)
    reading = imu_from_state(state, yaw_rad=0.3)
    expected = _rotate_world_to_body(reading.orientation, (0.0, 0.0, 9.81))
    assert reading.linear_acceleration[0] == pytest.approx(expected[0], abs=0.5)
    assert reading.linear_acceleration[2] == pytest.approx(expected[2], abs=0.6)
    flat = imu_from_state(RobotModel(config=ModelConfig(
        noise=False, calibrate_at_connection=False)).robot_state(0.0), 0.0)
    assert flat.linear_acceleration == pytest.approx((0.0, 0.0, 9.81))
    assert flat.orientation == pytest.approx((0.0, 0.0, 0.0, 1.0))
    assert quaternion_from_rpy(0, 0, 1.0) == pytest.approx((0, 0, math.sin(0.5), math.cos(0.5)))


def test_imu_readings_are_turned_from_the_heads_axes_into_the_bodys():
    """RobotState carries the IMU's raw axes, and the IMU is in the head: a robot standing
    flat and turning at 1 rad/s, its head 25 deg down, reads gravity leaning back and the
    turn partly on x. imu/data must say (0, 0, g) and (0, 0, 1)."""
    head = math.radians(-25.0)
    c, s = math.cos(head), math.sin(head)
    state = SimpleNamespace(pose_pitch_rad=0.0, head_angle_rad=head,
                            accel_x_mmps2=9810.0 * s, accel_y_mmps2=0.0, accel_z_mmps2=9810.0 * c,
                            gyro_x_radps=s, gyro_y_radps=0.0, gyro_z_radps=c)
    reading = imu_from_state(state, yaw_rad=0.0)
    assert reading.linear_acceleration == pytest.approx((0.0, 0.0, 9.81), abs=1e-9)
    assert reading.angular_velocity == pytest.approx((0.0, 0.0, 1.0), abs=1e-9)


def test_the_imu_rate_about_y_and_acceleration_along_x_and_z_are_not_trusted_while_the_head_moves():
    """The IMU is in the head: a head turning up at 1 rad/s on a robot standing still reads
    1 rad/s about y, which imu/data published as the body's pitch rate with a variance of
    (0.01 rad/s)^2 (and the head's motion off its pivot in x and z). While the head moves
    those three variances are 1e6; the others, and a head standing still, keep theirs."""
    from cozmo_driver.driver.sensors import (ACCEL_SIGMA_MPS2, GYRO_SIGMA_RADPS, HEAD_STILL_RAD,
                                             head_moving)

    state = SimpleNamespace(pose_pitch_rad=0.0, head_angle_rad=0.2, accel_x_mmps2=0.0,
                            accel_y_mmps2=0.0, accel_z_mmps2=9810.0, gyro_x_radps=0.0,
                            gyro_y_radps=1.0, gyro_z_radps=0.0)
    gv, av = GYRO_SIGMA_RADPS ** 2, ACCEL_SIGMA_MPS2 ** 2
    still = imu_from_state(state, 0.0)
    assert still.angular_velocity_covariance[::4] == [gv, gv, gv]
    assert still.linear_acceleration_covariance[::4] == [av, av, av]
    moving = imu_from_state(state, 0.0, head_moves=True)
    assert moving.angular_velocity == still.angular_velocity      # the reading is as it was
    assert moving.angular_velocity_covariance[::4] == [gv, UNOBSERVED_VARIANCE, gv]
    assert moving.linear_acceleration_covariance[::4] == [UNOBSERVED_VARIANCE, av, UNOBSERVED_VARIANCE]
    assert moving.orientation_covariance == still.orientation_covariance
    # the head moves: it calibrates, a head command runs (HEAD_IN_POS clear), or it turned
    in_pos = StatusFlag.HEAD_IN_POS
    assert not head_moving(0.2, 0.2 + HEAD_STILL_RAD / 2, in_pos, False)
    assert not head_moving(math.nan, 0.2, in_pos, False)          # the first state
    assert head_moving(0.2, 0.2, in_pos, True)
    assert head_moving(0.2, 0.2, 0, False)
    assert head_moving(0.2, 0.2 + 2 * HEAD_STILL_RAD, in_pos, False)   # by hand, say
    assert head_moving(0.2, 0.2 - 2 * HEAD_STILL_RAD, in_pos, False)


def test_joint_positions():
    state = SimpleNamespace(head_angle_rad=0.2, lift_height_mm=45.0)
    assert joint_positions(state) == pytest.approx((0.2, 0.0))
    state = SimpleNamespace(head_angle_rad=0.0, lift_height_mm=92.0)
    assert joint_positions(state)[1] == pytest.approx(geo.LIFT_MAX_ANGLE_RAD)


# ----------------------------------------------------------------------------- events

def test_events_from_flag_transitions():
    d = EventDetector()
    assert d.on_status(StatusFlag.IS_ON_CHARGER) == []  # baseline: silent
    events = d.on_status(StatusFlag.IS_PICKED_UP | StatusFlag.CLIFF_DETECTED)
    # (no cliff event from the flag: it rises with every pick-up; cliff_event, for an edge)
    assert [e.type for e in events] == [EventType.PICKED_UP, EventType.OFF_CHARGER]
    assert d.on_status(StatusFlag.IS_PICKED_UP | StatusFlag.CLIFF_DETECTED) == []
    events = d.on_status(StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING)
    assert [e.type for e in events] == [EventType.PUT_DOWN, EventType.ON_CHARGER,
                                        EventType.CHARGING_STARTED]
    assert d.on_status(StatusFlag.IS_FALLING | StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING) == []


def test_flag_changes_while_not_publishing_come_as_events_when_publishing_again():
    """While the node is inactive no event is published; what changed meanwhile comes with
    the first status after it is active again (not lost: the robot put on its charger)."""
    d = EventDetector()
    d.on_status(0)
    assert d.on_status(StatusFlag.IS_ON_CHARGER, publish=False) == []
    assert d.on_status(StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING, publish=False) == []
    assert d.flags == StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING     # current all along
    events = d.on_status(StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING)
    assert [e.type for e in events] == [EventType.ON_CHARGER, EventType.CHARGING_STARTED]
    assert d.on_status(StatusFlag.IS_PICKED_UP, publish=False) == []
    assert d.on_status(StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING) == []   # back as it was


def test_no_put_down_while_the_head_calibrates():
    """Anki's firmware clears its pick-up detection until the head is calibrated: a robot
    held in the hand while it calibrates (at a connection, on calibrate_motors) reports
    IS_PICKED_UP 0 meanwhile, which is no PUT_DOWN."""
    d = EventDetector()
    d.on_status(0)
    assert [e.type for e in d.on_status(StatusFlag.IS_PICKED_UP)] == [EventType.PICKED_UP]
    assert d.on_status(0, head_calibrating=True) == []
    assert d.on_status(StatusFlag.IS_ON_CHARGER, head_calibrating=True)[0].type == EventType.ON_CHARGER
    assert d.on_status(StatusFlag.IS_ON_CHARGER | StatusFlag.IS_PICKED_UP) == []    # still held
    assert [e.type for e in d.on_status(StatusFlag.IS_ON_CHARGER)] == [EventType.PUT_DOWN]


def test_a_fall_is_not_a_pick_up():
    """Anki's firmware reports a falling robot as picked up as well (IsPickedUp() includes
    IsFalling()): the fall has its own events, so no PICKED_UP/PUT_DOWN comes with it."""
    d = EventDetector()
    d.on_status(0)
    fall = StatusFlag.IS_FALLING | StatusFlag.IS_PICKED_UP
    assert d.on_status(fall) == [] and d.on_status(fall) == []
    assert d.on_status(0) == []
    assert d.flags == 0
    # lifted, then it falls from the hand and lands: one pick-up, one put-down
    assert [e.type for e in d.on_status(StatusFlag.IS_PICKED_UP)] == [EventType.PICKED_UP]
    assert d.on_status(fall) == []
    assert [e.type for e in d.on_status(0)] == [EventType.PUT_DOWN]


def test_events_from_messages():
    d = EventDetector()
    assert d.on_message(msgs.RobotPoked())[0].type == EventType.POKED
    assert d.on_message(msgs.RobotDelocalized())[0].type == EventType.DELOCALIZED
    assert d.on_message(msgs.FallingStarted())[0].type == EventType.FALLING_STARTED
    stopped = d.on_message(msgs.FallingStopped(duration_ms=400, impact_intensity=600.0))[0]
    assert stopped.type == EventType.FALLING_STOPPED and stopped.value == pytest.approx(0.4)
    assert d.on_message(msgs.ButtonPressed(pressed=True))[0].type == EventType.BUTTON_PRESSED
    assert d.on_message(msgs.ButtonPressed(pressed=False))[0].type == EventType.BUTTON_RELEASED
    assert d.on_message(msgs.RobotState()) == []


def test_event_types_match_the_message():
    text = (ROOT / "cozmo_interfaces/msg/RobotEvent.msg").read_text()
    declared = dict(re.findall(r"^uint8 ([A-Z_]+)=(\d+)$", text, re.M))
    ours = {k: str(v) for k, v in vars(EventType).items() if k.isupper()}
    assert ours == declared


# ----------------------------------------------------------------------------- commands

def test_require_finite_names_the_field():
    require_finite("cmd_vel", **{"linear.x": 1.0})
    with pytest.raises(CommandError, match=r"cmd_vel\.angular\.z is nan"):
        require_finite("cmd_vel", **{"linear.x": 1.0, "angular.z": math.nan})
    with pytest.raises(CommandError, match="inf"):
        require_finite("x", data=math.inf)


def test_clamp_names_the_field_and_limits():
    assert clamp(0.1, 0.0, 1.0, "f") == (0.1, None)
    value, warning = clamp(2.0, -0.436, 0.777, "head/angle.angle", "rad")
    assert value == 0.777
    assert "head/angle.angle" in warning and "-0.436" in warning and "0.777" in warning
    with pytest.raises(CommandError):
        clamp(math.nan, 0, 1, "f")


def test_rgb555_is_exact():
    assert rgb555(1.0, 1.0, 1.0, "c") == 0x7FFF
    assert rgb555(1.0, 0.0, 0.0, "c") == 31 << 10
    assert rgb555(0.0, 1.0, 0.0, "c") == 31 << 5
    assert rgb555(0.0, 0.0, 1.0, "c") == 31
    for k in range(32):
        word = rgb555(k / 31, k / 31, k / 31, "c")
        assert word == (k << 10) | (k << 5) | k
        assert rgb555_to_rgb(word) == pytest.approx((k / 31,) * 3)
    with pytest.raises(CommandError, match=r"lights\.front\.g"):
        rgb555(0.0, 1.5, 0.0, "lights.front")
    # a float32 field's value as it was written, not -0.10000000149011612
    with pytest.raises(CommandError, match=r"^c\.b = -0\.1: a colour channel"):
        rgb555(0.0, 0.0, struct.unpack("f", struct.pack("f", -0.1))[0], "c")
    # not a number: said as every other field says it, not as a value outside [0, 1]
    with pytest.raises(CommandError, match=r"^c\.r is nan: not a finite number$"):
        rgb555(math.nan, 0.0, 0.0, "c")


def test_volume_and_frames():
    assert volume_level(0.0) == (0, None)
    assert volume_level(1.0) == (65535, None)
    level, warning = volume_level(1.5)
    assert level == 65535 and "volume.data" in warning
    check_frame("", ["base_link"], "f")
    check_frame("base_link", ["base_link"], "f")
    with pytest.raises(CommandError, match="'map'"):
        check_frame("map", ["base_link"], "cmd_vel.header.frame_id")


def test_a_cmd_vel_stamped_further_than_cmd_vel_timeout_from_the_clock_is_refused():
    now = 1_763_000_000 * 10**9 + 500_000_000                 # 1763000000.5 s
    check_cmd_vel_stamp(1_763_000_000, 100_000_000, now, 0.5)  # 0.4 s old
    check_cmd_vel_stamp(1_763_000_000, 900_000_000, now, 0.5)  # 0.4 s ahead
    with pytest.raises(CommandError, match=r"cmd_vel.header.stamp is 0.600 s old by the driver's "
                                           r"clock, more than cmd_vel_timeout \(0.5 s\)"):
        check_cmd_vel_stamp(1_762_999_999, 900_000_000, now, 0.5)
    with pytest.raises(CommandError, match=r"is 2.500 s ahead of the driver's clock"):
        check_cmd_vel_stamp(1_763_000_003, 0, now, 0.5)
    check_cmd_vel_stamp(0, 0, now, 0.5)              # a zero stamp: taken (many tools send it)
    check_cmd_vel_stamp(1_000, 0, 0, 0.5)            # the clock at 0 (sim time before /clock)
    check_cmd_vel_stamp(1_000, 0, now, 0.0)          # the watchdog off: no age to measure


# ----------------------------------------------------------------------------- camera info

def test_nv_calibration_layout_matches_the_simulator():
    from cozmo_driver.sim import model
    calib = CameraCalibration(290.0, 291.0, 161.0, 119.0, 0.0, 240, 320,
                              (0.125, -0.25, 0.0078125, 0.00390625, 0.03125, 0.0, 0.0, 0.0))
    blob = encode_camera_calibration(calib)
    assert len(blob) == CAMERA_CALIB_SIZE == 56
    assert decode_camera_calibration(blob + b"extra") == calib
    sim_calib = model.CameraCalibration(*[getattr(calib, f) for f in
                                          ("focal_length_x", "focal_length_y", "center_x",
                                           "center_y", "skew", "image_height", "image_width",
                                           "distortion")])
    assert model.encode_camera_calibration(sim_calib) == blob
    assert NV_TAG_CAMERA_CALIB == int(msgs.ENUMS["NvEntryTag"].NVEntry_CameraCalib)
    with pytest.raises(RemoteProtocolError):
        decode_camera_calibration(blob[:40])


def test_nv_read_assembler_joins_parts():
    a = NvReadAssembler()
    res = msgs.ENUMS["NvResult"]

    def part(result, data, op=0):
        return msgs.NvStorageOpResult(tag=NV_TAG_CAMERA_CALIB, length=6, op=op, result=result,
                                      data=data)
    assert a.push(part(res.NV_MORE, b"abc")) is None
    assert a.push(part(res.NV_OKAY, b"def", op=1)) is None  # a write result: not ours
    done = a.push(part(res.NV_OKAY, b"def"))
    assert done.ok and done.data == b"abcdef"
    failed = a.push(part(res.NV_NOT_FOUND, b""))
    assert not failed.ok and failed.result == -1


def test_nv_read_assembler_holds_a_bounded_number_of_reads_and_bytes():
    """A robot (or a forger) that starts reads of ever new entries, or sends parts without
    end, never makes it hold more than max_tags reads and max_bytes."""
    res = msgs.ENUMS["NvResult"]
    a = NvReadAssembler(max_bytes=10_000, max_tags=4)

    def more(tag, n=1000):
        return msgs.NvStorageOpResult(tag=tag, length=n, op=0, result=res.NV_MORE, data=b"x" * n)
    for tag in range(1, 5):
        assert a.push(more(tag)) is None
    with pytest.raises(RemoteProtocolError, match="more than 4 NV reads in progress: the oldest, of entry "
                       "0x00000001 .1000 bytes so far., was dropped"):
        a.push(more(5))
    for tag in range(6, 20_000):
        try:
            a.push(more(tag))
        except RemoteProtocolError:
            pass
        assert len(a._parts) <= 4 and a.held_bytes <= 10_000
    # one entry's parts beyond max_bytes in all: that read is dropped
    a.reset()
    assert a.held_bytes == 0
    for _ in range(9):
        a.push(more(NV_TAG_CAMERA_CALIB))
    with pytest.raises(RemoteProtocolError, match="exceed 10000 bytes"):
        a.push(more(NV_TAG_CAMERA_CALIB, 1001))
    assert a.held_bytes == 0
    # and a read still completes after all that
    a.push(more(NV_TAG_CAMERA_CALIB, 3))
    done = a.push(msgs.NvStorageOpResult(tag=NV_TAG_CAMERA_CALIB, length=3, op=0, result=res.NV_OKAY,
                                         data=b"abc"))
    assert done.ok and done.data == b"xxxabc" and a.held_bytes == 0


def test_camera_info_from_the_robot_and_default():
    calib = CameraCalibration(290.0, 291.0, 161.0, 119.0, 0.5, 240, 320, (0.1, -0.2))
    info = caminfo.from_calibration(calib)
    assert info.distortion_model == "plumb_bob" and info.d == [0.1, -0.2, 0.0, 0.0, 0.0]
    assert info.k == [290.0, 0.5, 161.0, 0.0, 291.0, 119.0, 0.0, 0.0, 1.0]
    assert info.p[:4] == [290.0, 0.5, 161.0, 0.0] and info.p[10] == 1.0
    rational = caminfo.from_calibration(CameraCalibration(290.0, 290.0, 160.0, 120.0,
                                                          distortion=(0, 0, 0, 0, 0, 0.1, 0, 0)))
    assert rational.distortion_model == "rational_polynomial" and len(rational.d) == 8
    default = caminfo.default_camera_info()
    assert default.k[0] == pytest.approx(160 / math.tan(math.radians(29)))
    half = caminfo.scaled(default, 160, 120)
    assert half.k[0] == pytest.approx(default.k[0] / 2) and half.k[5] == pytest.approx(60.0)
    with pytest.raises(caminfo.CameraInfoError):
        caminfo.from_calibration(CameraCalibration(math.nan, 1.0, 1.0, 1.0))




def test_camera_info_yaml_file(tmp_path):
    path = tmp_path / "cozmo.yaml"
    path.write_text(CAMERA_YAML)
    info = caminfo.load_camera_info_url(path.as_uri())
    assert (info.width, info.height, info.distortion_model) == (320, 240, "plumb_bob")
    assert info.k[0] == 300.0 and info.d[4] == 0.003 and info.p[6] == 121.0
    assert info.source == path.as_uri()
    with pytest.raises(caminfo.CameraInfoError, match="only file:// and package://"):
        caminfo.load_camera_info_url("http://cozmo/x.yaml")
    with pytest.raises(caminfo.CameraInfoError):
        caminfo.load_camera_info_url((tmp_path / "missing.yaml").as_uri())
    bad = tmp_path / "bad.yaml"
    bad.write_text(CAMERA_YAML.replace("data: [300.0, 0.0, 158.0, 0.0, 301.0, 121.0, 0.0, 0.0, 1.0]",
                                       "data: [1, 2]"))
    with pytest.raises(caminfo.CameraInfoError, match="camera_matrix"):
        caminfo.load_camera_info_url(bad.as_uri())
    # a calibration of another shape was stretched onto the 4:3 images without a word
    wide = tmp_path / "wide.yaml"
    wide.write_text(CAMERA_YAML.replace("image_width: 320", "image_width: 640")
                    .replace("image_height: 240", "image_height: 360"))
    with pytest.raises(caminfo.CameraInfoError, match=r"is for 640x360 images \(1.78:1\); the "
                       r"robot's camera takes 4:3 images \(320x240\)"):
        caminfo.load_camera_info_url(wide.as_uri())
    vga = tmp_path / "vga.yaml"
    vga.write_text(CAMERA_YAML.replace("image_width: 320", "image_width: 640")
                   .replace("image_height: 240", "image_height: 480"))
    assert caminfo.load_camera_info_url(vga.as_uri()).width == 640  # scaled to the images


def test_a_camera_info_file_with_a_key_given_twice_is_refused_naming_it_and_its_lines(tmp_path):
    """A second camera_matrix: (an old calibration's left at the end of the file) replaced
    the first without a word, as YAML keeps the last copy of a key: the driver published
    whichever came last. Now the file is refused, naming the key and both lines."""
    path = tmp_path / "cozmo.yaml"
    path.write_text(CAMERA_YAML + "camera_matrix:\n  rows: 3\n  cols: 3\n"
                    "  data: [250.0, 0.0, 160.0, 0.0, 250.0, 120.0, 0.0, 0.0, 1.0]\n")
    with pytest.raises(caminfo.CameraInfoError) as refused:
        caminfo.load_camera_info_url(path.as_uri())
    text = str(refused.value)
    assert text.startswith(f"camera_info_url {path.as_uri()!r}: ") and "found duplicate key 'camera_matrix' " \
        "(first given on line 4)" in text and "line 21" in text, text


def _calibration_tarball(path):
    """What camera_calibration's cameracalibrator saves: calibrationdata.tar.gz, with ost.yaml in it."""
    import io
    import tarfile
    data = CAMERA_YAML.encode()
    with tarfile.open(path, "w:gz") as tar:
        member = tarfile.TarInfo("ost.yaml")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))


def test_a_camera_info_file_that_is_not_utf8_text_is_refused_saying_what_to_do(tmp_path):
    """A calibration tarball or a Latin-1 YAML raised UnicodeDecodeError, which only
    CameraInfoError's handler was ready for: the driver did not start (docs/driver.md promises
    a warning naming the file and the robot's calibration)."""
    tarball = tmp_path / "calibrationdata.tar.gz"
    _calibration_tarball(tarball)
    with pytest.raises(caminfo.CameraInfoError) as refused:
        caminfo.load_camera_info_url(str(tarball))
    assert str(refused.value) == (
        f"camera_info_url {str(tarball)!r}: not a YAML text file (not UTF-8: byte 0x8b at "
        "offset 1); a calibration tarball (camera_calibration's calibrationdata.tar.gz): extract ost.yaml "
        "from it (tar xzf calibrationdata.tar.gz ost.yaml) and name that; a YAML file in another encoding: "
        "save it as UTF-8")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(CAMERA_YAML.replace("cozmo_camera", "caméra").encode("latin-1"))
    with pytest.raises(caminfo.CameraInfoError) as refused:  # a URL: the file is named too
        caminfo.load_camera_info_url(latin.as_uri())
    assert str(refused.value).startswith(f"camera_info_url {latin.as_uri()!r}: {latin} is not a YAML text file "
                                         "(not UTF-8: byte 0xe9 at offset ")


@pytest.mark.parametrize("field, value, problem", [
    ("image_width: 320", "image_width: .inf", "image_width: inf is not a positive integer"),
    ("image_height: 240", "image_height: -.inf", "image_height: -inf is not a positive integer"),
    ("image_width: 320", "image_width: .nan", "image_width: nan is not a positive integer"),
    ("image_width: 320", "image_width: 320.5", "image_width: 320.5 is not a positive integer"),
    ("image_width: 320", "image_width: true", "image_width: True is not a positive integer"),
    ("image_width: 320", "image_width: " + "9" * 30, "image_width: " + "9" * 30 + " is more than a "
     "CameraInfo holds (4294967295)"),
    ("0.0, 0.003]", "0.0, " + "9" * 400 + "]", "distortion_coefficients.data: not all finite"),
    ("0.0, 0.0, 1.0]\ndistortion_model", "0.0, 0.0, " + "9" * 400 + "]\ndistortion_model",
     "camera_matrix.data: not all finite"),
], ids=["inf", "-inf", "nan", "fraction", "bool", "huge", "huge-term", "huge-matrix"])
def test_a_camera_info_file_with_a_size_or_number_out_of_range_is_refused(tmp_path, field, value, problem):
    """``image_width: .inf`` raised OverflowError (int of an infinity), and so did a number too
    large for a float among the matrices: neither was a CameraInfoError, so the driver did not
    start. A size that is no integer (320.5, true) was taken as one (320, 1)."""
    assert field in CAMERA_YAML
    path = tmp_path / "cozmo.yaml"
    path.write_text(CAMERA_YAML.replace(field, value, 1))
    with pytest.raises(caminfo.CameraInfoError) as refused:
        caminfo.load_camera_info_url(str(path))
    assert str(refused.value) == f"camera_info_url {str(path)!r}: {problem}"


def _sent_calibration(width=640, height=480, **fields):
    """The fields of a CameraInfo as cameracalibrator sends it (COMMIT), for from_fields."""
    sent = dict(width=width, height=height, distortion_model="plumb_bob",
                d=[0.0123, -1e-05, 2.5e-07, 0.0, 1.5e+20],
                k=[578.25, 0.0, 321.5, 0.0, 579.125, 239.75, 0.0, 0.0, 1.0],
                r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
                p=[570.5, 0.0, 320.25, 0.0, 0.0, 574.0, 240.5, 0.0, 0.0, 0.0, 1.0, 0.0], source="set_camera_info")
    sent.update(fields)
    return sent


def test_a_calibration_sent_is_written_as_the_reader_reads_it(tmp_path):
    """camera/set_camera_info's calibration, written where camera_info_url names a file (its
    directories made), is read back as it was sent, every number exactly (and as a float by
    PyYAML: 1e-05 without a point would be a string), in camera_calibration_parsers' format."""
    import yaml
    info = caminfo.from_fields(**_sent_calibration())
    text = caminfo.camera_info_yaml(info)
    doc = yaml.safe_load(text)
    assert list(doc) == ["image_width", "image_height", "camera_name", "camera_matrix", "distortion_model",
                         "distortion_coefficients", "rectification_matrix", "projection_matrix"]
    assert doc["camera_name"] == "cozmo_camera" and doc["distortion_model"] == "plumb_bob"
    assert doc["distortion_coefficients"] == {"rows": 1, "cols": 5, "data": [0.0123, -1e-05, 2.5e-07, 0.0, 1.5e+20]}
    assert (doc["projection_matrix"]["rows"], doc["projection_matrix"]["cols"]) == (3, 4)
    assert all(type(v) is float for v in doc["distortion_coefficients"]["data"])
    path = tmp_path / "camera_info" / "cozmo.yaml"
    assert caminfo.save_camera_info_url(path.as_uri(), info) == str(path)
    back = caminfo.load_camera_info_url(path.as_uri())
    assert (back.width, back.height, back.distortion_model, back.d, back.k, back.r, back.p) == \
        (info.width, info.height, info.distortion_model, info.d, info.k, info.r, info.p)
    # written again over it, whole; a plain path, ~ and ${ROS_HOME} resolved as when read
    again = caminfo.from_fields(**_sent_calibration(320, 240, distortion_model="rational polynomial?",
                                                    d=[0.1] * 8))
    caminfo.save_camera_info_url(str(path), again)
    back = caminfo.load_camera_info_url(str(path))
    assert (back.width, back.distortion_model, back.d) == (320, "rational polynomial?", [0.1] * 8)
    assert [p.name for p in path.parent.iterdir()] == ["cozmo.yaml"]  # no temporary file left


def test_a_calibration_saved_through_a_symlink_writes_its_target_and_keeps_the_mode(tmp_path):
    """The file was written beside the path and renamed over it: a camera_info_url that is a
    symlink (colcon build --symlink-install's package:// files) became a plain file, the
    calibration in the source tree unchanged, and the file's mode was the umask's. Now the
    link's target is written (a file beside it, renamed over it) with the mode it had."""
    import os
    import stat
    target = tmp_path / "src" / "cozmo.yaml"
    target.parent.mkdir()
    target.write_text(CAMERA_YAML)
    target.chmod(0o640)
    link = tmp_path / "install" / "calibration" / "cozmo.yaml"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(target, link.parent))
    info = caminfo.from_fields(**_sent_calibration(320, 240))
    assert caminfo.save_camera_info_url(link.as_uri(), info) == str(link)
    assert link.is_symlink() and link.resolve() == target
    assert caminfo.load_camera_info_url(str(target)).k == info.k
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["cozmo.yaml"]  # no temporary file left
    assert sorted(p.name for p in link.parent.iterdir()) == ["cozmo.yaml"]


def test_a_calibration_sent_is_checked_as_a_file_is(tmp_path):
    """What the reader refuses is refused when sent: another shape than 4:3, a size that is
    no positive integer, a number that is not finite; a calibration tarball where
    camera_info_url points is not written over; a file that cannot be written is said."""
    def refused(**fields):
        with pytest.raises(caminfo.CameraInfoError) as refusal:
            caminfo.from_fields(**_sent_calibration(**fields))
        return str(refusal.value)
    assert refused(width=640, height=360) == (
        "the calibration is for 640x360 images (1.78:1); the robot's camera takes 4:3 images (320x240): it is "
        "another camera's calibration, or one of cropped images")
    assert refused(width=0, height=0) == "image_width: 0 is not a positive integer"
    assert refused(k=[math.nan] + [0.0] * 8) == "camera_matrix.data: not all finite"
    assert refused(d=[math.inf]) == "distortion_coefficients.data: not all finite"
    assert refused(p=[0.0] * 9) == "projection_matrix.data: needs 12 numbers"
    assert caminfo.from_fields(**_sent_calibration(160, 120)).width == 160  # scaled to the images
    info = caminfo.from_fields(**_sent_calibration())
    tarball = tmp_path / "calibrationdata.tar.gz"
    _calibration_tarball(tarball)
    before = tarball.read_bytes()
    with pytest.raises(caminfo.CameraInfoError) as refusal:
        caminfo.save_camera_info_url(str(tarball), info)
    assert str(refusal.value) == (f"camera_info_url {str(tarball)!r}: {tarball} is not a YAML text file (a "
                                  "calibration tarball?): it is left as it is")
    assert tarball.read_bytes() == before
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(caminfo.CameraInfoError) as refusal:  # a directory where one is needed
        caminfo.save_camera_info_url(str(blocked / "cozmo.yaml"), info)
    assert str(refusal.value).startswith(f"camera_info_url {str(blocked / 'cozmo.yaml')!r}: cannot write "
                                         f"{blocked / 'cozmo.yaml'}: ")  # the OS's reason
    with pytest.raises(caminfo.CameraInfoError, match="a relative path"):
        caminfo.save_camera_info_url("cozmo.yaml", info)


@pytest.mark.parametrize("url", ["file://~/cozmo.yaml", "file://tmp/x/cozmo.yaml", "file://robot/cozmo.yaml"])
def test_a_file_url_with_a_host_is_refused_saying_it_needs_three_slashes(url):
    """urlparse takes what follows file:// up to the next slash as a host: ``file://~/cozmo.yaml``
    opened /cozmo.yaml and ``file://tmp/x/cozmo.yaml`` /x/cozmo.yaml, and the error named the
    URL, not the file. camera_info_manager takes only file:/// URLs: so does the driver."""
    with pytest.raises(caminfo.CameraInfoError) as refused:
        caminfo.load_camera_info_url(url)
    assert str(refused.value) == (f"camera_info_url {url!r}: a file:// URL takes an absolute path after "
                                  "three slashes (file:///absolute/path.yaml, or file://${ROS_HOME}/path.yaml)")


def test_a_plain_path_may_start_with_a_tilde_and_a_relative_one_is_refused_saying_why(tmp_path, monkeypatch):
    """``~/cozmo.yaml`` (as every other path parameter takes it) was refused as 'only file://
    URLs are supported', as was ``cozmo.yaml``: the calibration was not used and the message
    sent the user to a form that they had not got wrong."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "cozmo.yaml").write_text(CAMERA_YAML)
    assert caminfo.load_camera_info_url("~/cozmo.yaml").width == 320
    with pytest.raises(caminfo.CameraInfoError) as refused:
        caminfo.load_camera_info_url("cozmo.yaml")
    assert str(refused.value) == ("camera_info_url 'cozmo.yaml': a relative path; give an absolute one "
                                  "(/path.yaml, ~/path.yaml or file:///absolute/path.yaml)")


def test_a_package_url_is_read_from_the_package_share_directory(tmp_path, monkeypatch):
    """camera_info_manager's package://pkg/path form: the file in the package's share
    directory (an ament index made here); an unknown package is named."""
    require("ament_index_python", "an exec_depend of package.xml")
    share = tmp_path / "share"
    (share / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (share / "ament_index" / "resource_index" / "packages" / "my_cozmo").write_text("")
    (share / "my_cozmo" / "calibration").mkdir(parents=True)
    (share / "my_cozmo" / "calibration" / "cozmo.yaml").write_text(CAMERA_YAML)
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path))
    assert caminfo.load_camera_info_url("package://my_cozmo/calibration/cozmo.yaml").width == 320
    with pytest.raises(caminfo.CameraInfoError) as refused:
        caminfo.load_camera_info_url("package://no_such_pkg/cozmo.yaml")
    assert str(refused.value) == ("camera_info_url 'package://no_such_pkg/cozmo.yaml': no package "
                                  "'no_such_pkg' is installed where this process looks (its workspace sourced?)")


def test_a_file_url_may_name_localhost_or_ros_home_and_an_unreadable_file_is_named(tmp_path, monkeypatch):
    """${ROS_HOME} is resolved as camera_info_manager does ($ROS_HOME, else ~/.ros); the error
    of a file that cannot be read names the path opened."""
    path = tmp_path / "cozmo.yaml"
    path.write_text(CAMERA_YAML)
    assert caminfo.load_camera_info_url(f"file://localhost{path}").width == 320
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    assert caminfo.load_camera_info_url("file://${ROS_HOME}/cozmo.yaml").width == 320
    assert caminfo.load_camera_info_url("${ROS_HOME}/cozmo.yaml").width == 320   # a plain path too
    monkeypatch.delenv("ROS_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    url = "file://${ROS_HOME}/camera_info/cozmo.yaml"
    with pytest.raises(caminfo.CameraInfoError) as refused:
        caminfo.load_camera_info_url(url)
    assert str(refused.value) == (f"camera_info_url {url!r}: cannot read "
                                  f"{tmp_path}/home/.ros/camera_info/cozmo.yaml: No such file or directory")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_a_device_as_camera_info_url_is_refused_without_waiting(tmp_path):
    """Reading a FIFO (named pipe) as camera_info_url waited for a program to write to it, for
    good (configure, and set_camera_info's save, which reads the file first, hung); /dev/zero
    would be read without end. Both are refused at once, saying what they are; the FIFO stays."""
    from fifos import without_waiting_for
    fifo = str(tmp_path / "calibration.yaml")
    os.mkfifo(fifo)
    info = caminfo.default_camera_info()
    errors: list = []
    for call in (lambda: caminfo.load_camera_info_url(fifo), lambda: caminfo.save_camera_info_url(fifo, info)):
        with pytest.raises(caminfo.CameraInfoError) as refused:
            without_waiting_for(fifo, call)
        errors.append(str(refused.value))
    said = (f"camera_info_url {fifo!r}: {fifo} is a FIFO (named pipe), not a file: reading it would wait for a "
            "writer (or never end); give the path of a calibration YAML file")
    assert errors == [said, said]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # not replaced by the save
    if os.path.exists("/dev/zero"):
        with pytest.raises(caminfo.CameraInfoError, match="'/dev/zero': /dev/zero is a character device, not a file"):
            caminfo.load_camera_info_url("/dev/zero")


def test_an_empty_camera_info_url_is_camera_info_managers_default_file_and_name_is_the_camera(tmp_path,
                                                                                             monkeypatch):
    """camera_info_url empty meant no file: a calibration sent to set_camera_info was kept
    until the next configure only, which cameracalibrator (it exits on COMMIT's success) never
    shows. As camera_info_manager takes it, empty is file://${ROS_HOME}/camera_info/${NAME}.yaml,
    and ${NAME} in a given URL is the camera's name: cozmo_camera, after the driver's namespace
    (a robot each in namespaces of their own keep a calibration each); the file says it."""
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    assert caminfo.DEFAULT_URL == "file://${ROS_HOME}/camera_info/${NAME}.yaml"
    assert caminfo.camera_name("/") == caminfo.camera_name("") == "cozmo_camera"
    assert caminfo.camera_name("/robot1") == "robot1_cozmo_camera"
    assert caminfo.camera_name("/lab/robot_2") == "lab_robot_2_cozmo_camera"
    assert caminfo.resolve_url("", "cozmo_camera") == "file://${ROS_HOME}/camera_info/cozmo_camera.yaml"
    assert caminfo.resolve_url("package://my_cozmo/${NAME}.yaml", "robot1_cozmo_camera") == \
        "package://my_cozmo/robot1_cozmo_camera.yaml"
    assert caminfo.resolve_url("/calib/cozmo.yaml", "robot1_cozmo_camera") == "/calib/cozmo.yaml"
    url = caminfo.resolve_url("", "robot1_cozmo_camera")
    path = tmp_path / "camera_info" / "robot1_cozmo_camera.yaml"
    assert caminfo.camera_info_path(url) == str(path)
    info = caminfo.from_fields(**_sent_calibration())
    assert caminfo.save_camera_info_url(url, info, "robot1_cozmo_camera") == str(path)  # its directory made
    assert "camera_name: robot1_cozmo_camera\n" in path.read_text()
    assert caminfo.load_camera_info_url(url).k == info.k


@pytest.mark.parametrize("term", [".nan", ".inf", "-.inf", "nan"])
def test_a_camera_info_file_with_a_non_finite_distortion_term_is_refused(tmp_path, term):
    """The distortion terms are checked as the matrices are: a file with NaN or infinity among
    them was taken, and camera_info published it (an undistortion of every pixel to NaN). The
    warning names the file and the field."""
    path = tmp_path / "cozmo.yaml"
    path.write_text(CAMERA_YAML.replace("data: [0.01, -0.02, 0.0, 0.0, 0.003]",
                                        f"data: [0.01, -0.02, 0.0, {term}, 0.003]"))
    with pytest.raises(caminfo.CameraInfoError) as refused:
        caminfo.load_camera_info_url(path.as_uri())
    assert str(refused.value) == f"camera_info_url {path.as_uri()!r}: distortion_coefficients.data: not all finite"


# ----------------------------------------------------------------------------- parameters

def test_parameter_defaults_are_valid_and_described():
    assert validate_all(defaults()) is None
    for spec in PARAMETERS:
        assert spec.description, spec.name
        if isinstance(spec.default, (int, float)) and not isinstance(spec.default, bool) \
                and spec.name not in ():
            assert spec.minimum is not None and spec.maximum is not None, spec.name
            assert spec.minimum <= spec.default <= spec.maximum, spec.name


def _driver_yaml_comments() -> dict:
    """{parameter: its comment lines, joined} of config/cozmo.yaml's cozmo_driver section."""
    lines = (Path(__file__).resolve().parents[2] / "config" / "cozmo.yaml").read_text().splitlines()
    comments, pending = {}, []
    for line in lines[lines.index("cozmo_driver:") + 1:]:
        if line and not line.startswith(" "):
            break  # the next node's section
        stripped = line.strip()
        if stripped.startswith("# ---"):
            pending = []  # a group's heading
        elif stripped.startswith("#"):
            pending.append(stripped[1:].strip())
        elif re.match(r"^    \w+:", line):
            comments[stripped.split(":", 1)[0]] = " ".join(pending)
            pending = []
    return comments


def test_config_yaml_comments_say_what_each_parameter_spec_says():
    """The file's comment of each driver parameter starts with its ParamSpec's description
    (an example may follow) and ends with its unit, range and when a change takes effect:
    stop_on_cliff's and stop_when_picked_up's had fallen behind their specs."""
    comments = _driver_yaml_comments()
    for spec in PARAMETERS:
        tail = (f" [{spec.unit}]" if spec.unit else "") + "." + (
            f" Range {spec.minimum!r}..{spec.maximum!r}." if spec.minimum is not None else "")
        kind = "dynamic" if spec.dynamic else "read when the node starts" if spec.startup else "static"
        comment = comments.get(spec.name, "")
        assert comment.startswith(spec.description) and comment.endswith(f"{tail} ({kind})"), \
            (spec.name, comment)


def test_parameter_validation():
    assert "outside" in validate_value("robot_port", 70000)
    assert "must be a int" in validate_value("robot_port", "5551")
    assert validate_value("peer_timeout", 2) is None  # an int for a double is fine
    assert "'/'" in validate_value("odom_frame", "/odom")
    assert "empty" in validate_value("base_frame", "")
    assert validate_value("frame_prefix", "robot1/") is None
    assert "reconnect_min" in validate_all({**defaults(), "reconnect_min": 9.0, "reconnect_max": 1.0})
    assert validate_value("qos_overrides./odom.publisher.depth", 5) is None
    current = defaults()
    assert "configure: deactivate and clean up the node first" in validate_change(
        current, {"robot_ip": "127.0.0.1"}, configured=True)
    # inactive already: only the clean-up is left to do
    assert "configure: clean up the node first" in validate_change(
        current, {"robot_ip": "127.0.0.1"}, configured=True, active=False)
    assert validate_change(current, {"robot_ip": "127.0.0.1"}, configured=False) is None
    assert validate_change(current, {"camera_color": True}, configured=True) is None
    # an address set at run time (after a clean-up) is judged when set, not first at activate
    assert validate_change(current, {"robot_ip": "cozmo.local"}, configured=False) is None
    assert validate_change(current, {"robot_ip": " 127.0.0.1"}, configured=False) == (
        "robot_ip = ' 127.0.0.1': no spaces around an address")
    assert validate_change(current, {"local_ip": "999.1.1.1"}, configured=False) == (
        "local_ip: '999.1.1.1' is not an IPv4 address of four numbers 0-255 separated by dots")
    assert "robot_ip: 0.0.0.0 is the unspecified address" in validate_change(
        current, {"robot_ip": "0.0.0.0"}, configured=False)
    assert validate_change(current, {"local_ip": "0.0.0.0"}, configured=False) is None
    # read only when the node starts: refused configured or not, with what to do instead
    for configured in (True, False):
        assert validate_change(current, {"autostart": False}, configured=configured) == (
            "autostart is read once, when the node starts: give it there (-p autostart:=false, "
            "or the parameter file)")
    assert validate_change(current, {"autostart": True}, configured=False) is None  # unchanged
    # shut down (finalized): no new value of any kind, the same one taken
    assert validate_change(current, {"cmd_vel_timeout": 1.0}, configured=False, active=False,
                           finalized=True) == ("cmd_vel_timeout: the node is shut down (lifecycle "
                                               "finalized) and takes no new value: restart it with the new one")
    assert validate_change(current, {"cmd_vel_timeout": 0.5}, configured=False, finalized=True) is None
    assert "outside" in validate_change(current, {"camera_gain": 9.0}, configured=True)
    # one of a min/max pair set on its own (rclpy checks each parameter that ros2 param set or
    # ros2 param load sets by itself): the refusal says which to change first, and how to set both
    hint = ("ros2 param set and ros2 param load have each parameter checked on its own, a file's in "
            "its order; or set both in one call of the node's set_parameters_atomically service, or give "
            "both at start")
    assert validate_change(current, {"object_reconnect_min": 20.0}, configured=True) == (
        "object_reconnect_min (20.0 s) must not exceed object_reconnect_max (10.0 s) (raise "
        f"object_reconnect_max first: {hint})")
    assert validate_change(current, {"object_reconnect_max": 0.5}, configured=True) == (
        f"object_reconnect_min (1.0 s) must not exceed object_reconnect_max (0.5 s) (lower "
        f"object_reconnect_min first: {hint})")
    assert validate_change(current, {"reconnect_min": 9.0}, configured=False).endswith(
        f"(raise reconnect_max first: {hint})")
    assert validate_change(current, {"object_reconnect_min": 20.0, "object_reconnect_max": 60.0},
                           configured=True) is None
    assert validate_change(current, {"object_reconnect_min": 20.0, "object_reconnect_max": 15.0},
                           configured=True) == \
        "object_reconnect_min (20.0 s) must not exceed object_reconnect_max (15.0 s)"
    assert full_frame_id("robot1/", "odom") == "robot1/odom"
    assert full_frame_id("", "odom") == "odom"


def test_odom_frame_may_not_be_a_frame_on_the_robot():
    """base_frame:=odom was taken: the driver then sent odom -> odom on /tf, which every tf
    listener refuses (TF_SELF_TRANSFORM) 33 times a second, and odom's child frame was its own
    frame; odom_frame:=base_link made odom the robot description's base_link, under
    base_footprint, under odom: a loop. Refused at start and when set, naming both."""
    for name in ("base_frame", "base_link_frame", "imu_frame", "camera_frame"):
        problem = validate_all({**defaults(), name: "odom"})
        assert problem is not None and problem.startswith(f"odom_frame and {name} are both 'odom'"), problem
        assert validate_change(defaults(), {"odom_frame": defaults()[name]}, configured=False) == (
            f"odom_frame and {name} are both {defaults()[name]!r}: odom_frame stays where the robot "
            f"started, {name} moves with the robot (tf2 refuses a transform from a frame to itself, "
            "and a tree through which a frame is its own ancestor): give them different names")
    # the frames on the robot may share a name (an IMU reported in base_link's axes)
    assert validate_all({**defaults(), "imu_frame": "base_link"}) is None
    assert validate_all({**defaults(), "base_frame": "base_link"}) is None


def test_config_yaml_lists_every_parameter_with_its_default():
    import yaml
    doc = yaml.safe_load((ROOT / "config/cozmo.yaml").read_text())
    params = doc["cozmo_driver"]["ros__parameters"]
    assert params == defaults()


def test_readme_documents_every_parameter():
    section = (ROOT / "docs" / "driver.md").read_text().split("## Parameters", 1)[1]
    for spec in PARAMETERS:
        assert f"| `{spec.name}` |" in section, spec.name


def test_the_parameter_table_says_what_ros2_param_describe_says():
    """Each row's units, range, when a change applies and description are the ParamSpec's, which
    ``ros2 param describe`` shows (a link to another page stands for its path): head_max_speed's
    and lift_max_speed's rows promised a warning and a position move keeping its speed that
    their descriptions left out."""
    section = (ROOT / "docs" / "driver.md").read_text().split("<!-- reference: cozmo_driver parameters -->")[1]
    rows = {}
    for line in section.split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    for spec in PARAMETERS:
        _, _, _, unit, limits, changes, description = rows[spec.name]
        description = re.sub(r"\[[^]]*\]\(([\w-]+\.md)(#[\w-]+)?\)", r"docs/\1", description)
        whole = isinstance(spec.default, int) and not isinstance(spec.default, bool)
        expected_limits = "" if spec.minimum is None else (
            f"{int(spec.minimum)}..{int(spec.maximum)}" if whole else f"{spec.minimum!r}..{spec.maximum!r}")
        expected_changes = "run time" if spec.dynamic else "start-up" if spec.startup else "configure"
        assert (unit, limits, changes, description) == (
            spec.unit, expected_limits, expected_changes, spec.description), spec.name


# ----------------------------------------------------------------------------- diagnostics

def test_diagnostic_levels():
    session = SessionStats(reliable_packets_sent=10, retransmissions=1, rtt_s=0.002,
                           srtt_s=0.002, datagrams_sent=5, datagrams_received=6,
                           malformed_datagrams=2, connects=1, stale_link_disconnects=1,
                           connections_without_state=4, unexpected_frames=7, unmatched_ping_echoes=5)
    transport = SimpleNamespace(wrong_source=3, send_errors=0, callback_errors=0)
    ready = link_report("ready", True, "127.0.0.1:5551", session, transport, 33.0)
    assert ready.level == OK
    values = dict(ready.values)
    # frames of an old connection and unmatched ping echoes: dropped, counted, and shown
    assert values["unexpected frames dropped (out of place, or of an earlier connection)"] == "7"
    assert values["ping echoes unmatched (duplicates, or of an earlier connection)"] == "5"
    assert values["wrong-source datagrams dropped"] == "3"
    assert values["malformed datagrams dropped"] == "2"
    assert values["stale links ended"] == "1"
    assert values["connections answered without robot state"] == "4"
    assert values["resent share (retransmitted / reliable sent, not the loss rate)"] == "0.1"
    # the message says what was dropped: datagrams, packets of good datagrams, or both
    assert ready.message.endswith(" (malformed datagrams dropped)"), ready.message
    for datagrams, packets, said in ((0, 3, "packets"), (2, 3, "datagrams and packets")):
        stats = SessionStats(datagrams_received=6, malformed_datagrams=datagrams, malformed_packets=packets)
        report = link_report("ready", True, "127.0.0.1:5551", stats, transport, 33.0)
        assert report.message.endswith(f" (malformed {said} dropped)"), report.message
    assert link_report("lost", True, "x", None, None, 0.0).level == ERROR
    # connected, but nothing came since the last report (the robot is lost after peer_timeout)
    # an error of the driver's own handling of a datagram: counted and logged, and shown
    failing = link_report("ready", True, "127.0.0.1:5551", session,
                          SimpleNamespace(wrong_source=0, send_errors=0, callback_errors=2), 33.0)
    assert dict(failing.values)["errors handling datagrams (see the log)"] == "2"
    assert failing.level == WARN and failing.message.endswith("(2 errors handling datagrams: see the log)")
    assert dict(ready.values)["errors handling datagrams (see the log)"] == "0"
    stalled = link_report("ready", True, "127.0.0.1:5551", session, transport, 0.0)
    assert stalled.level == WARN and stalled.message.startswith(
        "connected to 127.0.0.1:5551, but no robot state since the last report")
    assert link_report("connecting", True, "x", None, None, 0.0).level == WARN
    assert link_report("lost", False, "x", None, None, 0.0).level == OK
    # inactive, it says the link's state all the same (a lost robot looked like a resting one)
    assert link_report("lost", False, "x", None, None, 0.0).message == \
        "inactive (lifecycle); robot x lost, reconnecting"
    # what to check, while it is not OK only
    assert ("what to check", "Is it on?") in link_report("lost", True, "x", None, None, 0.0, hint="Is it on?").values
    assert "what to check" not in dict(link_report("lost", False, "x", None, None, 0.0, hint="Is it on?").values)
    assert robot_report(True, 3.55, 0.17, False, 0.01, 0, 0).level == OK
    # below the robot's own low-battery light (3.50 V), and below the voltage under which it
    # switches itself off after a minute (3.45 V); the voltage decides, not the estimate
    low = robot_report(True, 3.48, None, False, 0.01, 0, 0)
    assert low.level == WARN and low.message == "battery low (3.48 V): put the robot on its charger"
    empty = robot_report(True, 3.41, 0.0, True, 0.01, 0, 0, "on its back", lying=True)
    assert empty.level == ERROR and empty.message.startswith(
        "battery empty (3.41 V): the robot switches itself off after a minute below 3.45 V")
    assert robot_report(True, math.nan, math.nan, False, None, 0, 0).level == OK
    # on its charger, a low or empty battery is being charged: said, no warning and no
    # error, and not "put the robot on its charger" (it is there)
    for volts in (3.48, 3.41):
        charging = robot_report(True, volts, None, False, 0.01, 0, 0, on_charger=True)
        assert charging.level == OK and charging.message == f"battery low ({volts:.2f} V), charging on its charger"
    assert robot_report(True, 3.48, None, True, 0.01, 0, 0, on_charger=True).message == (
        "emergency stop engaged; battery low (3.48 V), charging on its charger")
    assert robot_report(True, 3.9, None, False, 0.01, 0, 0, on_charger=True).message == "ok"
    assert robot_report(True, 4.0, 0.8, True, 0.01, 0, 0).message == "emergency stop engaged"
    # the emergency stop adds to the other problems (it replaced them); an error comes first
    both = robot_report(True, 3.48, None, True, 0.01, 0, 0, "on its back", lying=True)
    assert both.level == WARN and both.message == (
        "emergency stop engaged; the robot lies on its back: it cannot drive until it is set "
        "upright; battery low (3.48 V): put the robot on its charger"), both.message
    assert "; emergency stop engaged; the robot lies on its back: " in empty.message, empty.message
    # inactive (lifecycle) is OK, as for the link, and says what it knows all the same
    assert robot_report(False, None, None, False, None, 0, 0).level == WARN
    resting = robot_report(False, None, None, False, None, 0, 0, active=False)
    assert resting.level == OK and resting.message == "inactive (lifecycle); no data: not connected"
    low_resting = robot_report(True, 3.48, None, False, 0.01, 0, 0, active=False)
    assert low_resting.level == OK and low_resting.message == \
        "inactive (lifecycle); battery low (3.48 V): put the robot on its charger"
    assert robot_report(True, 4.0, 0.8, False, 0.01, 0, 0, active=False).message == "inactive (lifecycle)"


def test_the_display_and_audio_diagnostic_warns_once_its_stream_failed():
    """A tick or a goal's input of the display/audio stream that raised (a driver bug: its goals end
    aborted, the stream plays on) was only counted: "display and audio" stayed OK. It is WARN from
    the first failure on, saying how many, while the driver is active; the counters are the
    stream's own (AVStream.counters(), so that their names are those it gives)."""
    av = AVStream(SimpleNamespace(), lambda report: None)

    def report(active=True, connected=True, underruns=0):
        return av_report(active, connected, av.counters(), underruns, "idle", 3, 1, 0, 0)

    assert (report().level, report().message) == (OK, "idle")
    av.stats.tick_errors = 1
    failed = report()
    assert failed.level == WARN
    assert failed.message == "the display/audio stream failed 1 time (a driver bug: see the log); idle"
    av.stats.input_errors = 2
    assert report().message.startswith("the display/audio stream failed 3 times (a driver bug: see the log); ")
    assert dict(report().values)["stream inputs failed (driver bug, see the log)"] == "2"
    late = report(underruns=4)
    assert late.level == WARN and late.message.endswith("; 4 frames sent late since the last report (idle)")
    assert report(connected=False).message.endswith("; not connected: nothing plays")
    assert (report(active=False).level, report(active=False).message) == (OK, "inactive (lifecycle)")


def test_a_battery_just_below_a_threshold_is_not_said_at_the_threshold():
    """3.4996 V, below the 3.50 V of the low battery, was said "battery low (3.50 V)" (and
    logged "battery low (3.50 V, below 3.50 V)"), 3.4496 V "battery empty (3.45 V): ... below
    3.45 V": rounded to the threshold it is below. The voltages are cut to hundredths now."""
    assert robot_report(True, 3.4996, None, False, 0.01, 0, 0).message == \
        "battery low (3.49 V): put the robot on its charger"
    assert robot_report(True, 3.4496, None, False, 0.01, 0, 0).message.startswith("battery empty (3.44 V): ")
    assert robot_report(True, 3.4996, None, False, 0.01, 0, 0, on_charger=True).message == \
        "battery low (3.49 V), charging on its charger"
    from cozmo_driver.driver.sensors import volts_text  # the messages' form, also the log's
    assert [volts_text(v) for v in (3.47, 3.48, 3.5, 4.05, 3.4999)] == \
        ["3.47 V", "3.48 V", "3.50 V", "4.05 V", "3.49 V"]


# ----------------------------------------------------------------------------- speech

def test_speech_refuses_with_what_to_do():
    """Without espeak-ng the answer says how to install it; a text too long, empty or with a
    NUL, and a voice name that could be an option, are refused before anything runs."""
    from cozmo_driver.driver.speech import MAX_TEXT_CHARS, check_voice, speak
    with pytest.raises(CommandError, match="speech needs no-such-speaker on the driver's computer, "
                       "and it is not installed: sudo apt install espeak-ng"):
        speak("hello", program="no-such-speaker")
    with pytest.raises(CommandError, match=f"text has {MAX_TEXT_CHARS + 1} characters; at most"):
        speak("a" * (MAX_TEXT_CHARS + 1), program="no-such-speaker")
    with pytest.raises(CommandError, match="text is empty"):
        speak(" \n\t", program="no-such-speaker")
    with pytest.raises(CommandError, match="NUL"):
        speak("a\x00b", program="no-such-speaker")
    with pytest.raises(CommandError, match="voice '--stdout' is not a voice name"):
        speak("hello", voice="--stdout", program="no-such-speaker")
    assert all(check_voice(v) is None for v in ("en-us", "en+f3", "mb-en1", "de", "other/en-GB"))
    assert validate_all({"speech_voice": "-v"}).startswith("speech_voice: '-v' is not a voice name")


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (an "
                    "optional system package: sudo apt install espeak-ng; ./dev setup installs it)")
def test_a_voice_espeak_ng_does_not_have_is_named_with_its_parameter():
    """A voice from the parameter file (not checked at start-up) that espeak-ng does not
    have: the goal's answer names the voice and the parameter, and how to list the voices."""
    from cozmo_driver.driver.speech import speak, voice_missing
    with pytest.raises(CommandError) as raised:
        speak("hello", voice="zz-nosuch")
    assert str(raised.value) == ("espeak-ng has no voice 'zz-nosuch' (the speech_voice "
                                 "parameter; list them with: espeak-ng --voices)")
    assert voice_missing("zz-nosuch") == ("espeak-ng has no voice 'zz-nosuch' (list them "
                                          "with: espeak-ng --voices)")
    assert voice_missing("en-us") is None and voice_missing("en+f3") is None
    assert voice_missing("zz-nosuch", program="no-such-speaker") is None  # a goal says it
    assert validate_all({"speech_speed": 40}) == "speech_speed = 40 is outside [80, 450] words/min"


# ----------------------------------------------------------------------------- lift field

def test_the_lift_field_is_read_right_as_an_angle_or_as_a_height():
    """RobotState's lift field: Anki's firmware sends the arm's angle in radians (cozmoclad
    names it liftAngle), the protocol notes read it as the height in mm. Both give the same
    joint and height; read as mm, a real robot's angle put the lift at 0-1 mm."""
    from cozmo_driver.driver.motion import state_sample
    from cozmo_driver.driver.sensors import joint_positions
    for height_mm in (32.0, 45.0, 70.0, 92.0):
        angle = geo.lift_height_to_angle(height_mm / 1000.0)
        as_angle = SimpleNamespace(head_angle_rad=0.1, lift_height_mm=angle)
        as_height = SimpleNamespace(head_angle_rad=0.1, lift_height_mm=height_mm)
        assert geo.reported_lift_height_m(angle) == pytest.approx(height_mm / 1000.0, abs=1e-9)
        assert geo.reported_lift_height_m(height_mm) == pytest.approx(height_mm / 1000.0)
        assert joint_positions(as_angle) == pytest.approx(joint_positions(as_height))
        assert joint_positions(as_angle)[1] == pytest.approx(angle)
    fields = dict(pose_x_mm=0.0, pose_y_mm=0.0, pose_angle_rad=0.0, head_angle_rad=0.0,
                  lwheel_speed_mmps=0.0, rwheel_speed_mmps=0.0, status=0, gyro_z_radps=0.0,
                  pose_frame_id=0, pose_origin_id=1, curr_path_segment=-1)
    sample = state_sample(SimpleNamespace(lift_height_mm=geo.lift_height_to_angle(0.07), **fields), 0.0)
    assert sample.lift_height == pytest.approx(0.07)
