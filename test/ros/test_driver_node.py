"""The driver node against the simulated robot over UDP on 127.0.0.1, with real rclpy.

Each test gets its own rclpy context (fixture ``rclpy_context``), simulator and
executor; the driver runs in-process on the test's executor (one thread: waits
are bounded ``spin_once`` loops), except the tests of the console script, which
run it as a subprocess. Addresses are always 127.0.0.1 and the simulator's port.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, List, Optional, Tuple

import numpy as np
import pytest

from dependencies import require

rclpy = require("rclpy")

from cozmo_interfaces.msg import (BackpackLights, HeadAngle, LiftHeight, LinkStatus,  # noqa: E402
                                  ObjectEvent, RobotEvent, RobotInfo, RobotStatus)
from cozmo_interfaces.srv import SetEmergencyStop  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import Twist, TwistStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.duration import Duration  # noqa: E402
from rclpy.logging import LoggingSeverity  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.time import Time  # noqa: E402
from rclpy.qos import (QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy,  # noqa: E402
                       qos_profile_sensor_data)
from sensor_msgs.msg import (BatteryState, CameraInfo, CompressedImage, Image, Imu,  # noqa: E402
                             JointState)
from sensor_msgs.srv import SetCameraInfo  # noqa: E402
from std_msgs.msg import Bool, ColorRGBA, Float32, Float64  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import Marker  # noqa: E402

from ros_harness import (CONNECT_TIMEOUT, DISCOVERY_TIMEOUT, RosHarness, closing_all,  # noqa: E402
                         qos_event_handlers, sim_fixture)
from processes import TellsItsLog  # noqa: E402
from cozmo_driver import robot_geometry as geo  # noqa: E402
from cozmo_driver.driver.events import EventType  # noqa: E402
from cozmo_driver.protocol.session import LINK_CHANGE  # noqa: E402
from cozmo_driver.ros import driver_node  # noqa: E402
from cozmo_driver.ros.driver_node import CozmoDriverNode  # noqa: E402
from cozmo_driver.ros.subscription_thread import Unsupported  # noqa: E402
from cozmo_driver.sim import SimServer  # noqa: E402

pytestmark = [pytest.mark.ros]

ROOT = Path(__file__).resolve().parents[2]
LATCHED = QoSProfile(depth=1, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL,
                     reliability=QoSReliabilityPolicy.RELIABLE)


def yaw_of(q) -> float:
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


class Harness(RosHarness):
    """One driver node and one probe node on one executor, in the test's context."""

    def __init__(self, context, sim: SimServer, namespace: str = "", start: bool = True,
                 **params: Any) -> None:
        self.sim = sim
        overrides = {"robot_ip": "127.0.0.1", "robot_port": sim.address[1], "peer_timeout": 1.0,
                     "reconnect_min": 0.2, "reconnect_max": 0.5}
        overrides.update(params)
        self.node = CozmoDriverNode(context=context, namespace=namespace,
                                    parameter_overrides=[Parameter(k, value=v)
                                                         for k, v in overrides.items()])
        super().__init__(context, "probe", namespace, nodes=(self.node,))
        if start:
            assert self.node.start()
            assert self.spin_until(lambda: self.node.connected, CONNECT_TIMEOUT), "driver did not connect"


sim = sim_fixture(seed=3)


@pytest.fixture
def make_driver(rclpy_context, sim):
    def make(server: Optional[SimServer] = None, **kwargs: Any) -> Harness:
        return Harness(rclpy_context, server or sim, **kwargs)

    with closing_all(make) as keep:
        yield keep


def relative_truth(start, now):
    """The simulator's true pose ``now`` in the frame of its pose ``start`` (metres, rad)."""
    x0, y0, a0 = start
    x, y, a = now
    c, s = math.cos(-a0), math.sin(-a0)
    dx, dy = (x - x0) / 1000.0, (y - y0) / 1000.0
    return dx * c - dy * s, dx * s + dy * c, wrap(a - a0)


# ----------------------------------------------------------------------------- connection

def test_connects_and_publishes_facts_latched(make_driver):
    h = make_driver()
    info = h.listen("info", RobotInfo, "robot_info", LATCHED)  # a late subscriber
    link = h.listen("link", LinkStatus, "link_status", LATCHED)
    diags = h.listen("diag", DiagnosticArray, "/diagnostics")
    assert h.spin_until(lambda: info and link and diags, 5.0)
    assert info[0].firmware_version == "2381"
    assert info[0].firmware_build_type == "DEVELOPMENT"
    assert info[0].head_serial == 0x45A1C0DE and info[0].body_serial == 0x0B0D1E55
    assert info[0].body_hw_version == 5 and info[0].body_color == "WHITE_v15"
    assert '"version":2381' in info[0].firmware_signature_json
    assert link[-1].state == LinkStatus.CONNECTED
    status = {s.name: s for s in diags[-1].status}
    linkdiag = status["cozmo_driver: link"]
    assert linkdiag.level == bytes([0]) and linkdiag.hardware_id == "cozmo-45a1c0de"
    keys = {kv.key for kv in linkdiag.values}
    assert {"rtt (s)", "retransmissions", "malformed datagrams dropped",
            "wrong-source datagrams dropped", "resent share (retransmitted / reliable sent, not the loss rate)"} <= keys
    # the client initialised the robot
    counts = h.sim.command_counts()
    for name in ("Enable", "SetOrigin", "SyncTime", "EnableCamera", "NvStorageOp"):
        assert counts[name] >= 1, name
    # animation playback is enabled only once something is to be played: until then the
    # robot sends no AnimationState (30 datagrams a second the driver has no use for)
    assert counts.get("EnableAnimationState", 0) == 0 and not h.sim.playback_enabled()


def test_streams_odom_imu_joints_status_battery(make_driver):
    h = make_driver()
    odom = h.listen("odom", Odometry, "odom")
    tf = h.listen("tf", TFMessage, "/tf")
    imu = h.listen("imu", Imu, "imu/data", qos_profile_sensor_data)
    joints = h.listen("joints", JointState, "joint_states")
    status = h.listen("status", RobotStatus, "status")
    battery = h.listen("battery", BatteryState, "battery_state")
    assert h.spin_until(lambda: len(odom) > 40 and battery and imu and joints and status, 10.0)
    # an odom for each of the robot's states (about 33 a second), read from their stamps (the
    # robot's clock), not from when they arrived: a loaded machine delivers in bursts
    stamps = [Time.from_msg(o.header.stamp).nanoseconds * 1e-6 for o in odom]
    spacing = float(np.median(np.diff(stamps)))
    assert 25.0 <= spacing <= 35.0, f"an odom every {spacing:.1f} ms of the robot's clock"
    o = odom[-1]
    assert (o.header.frame_id, o.child_frame_id) == ("odom", "base_footprint")
    assert o.pose.covariance[14] > 1e3 and 0 < o.pose.covariance[0] < 1e-2
    assert tf[-1].transforms[0].header.frame_id == "odom"
    assert tf[-1].transforms[0].child_frame_id == "base_footprint"
    i = imu[-1]
    assert i.header.frame_id == "imu_link"
    assert i.linear_acceleration.z == pytest.approx(9.81, abs=0.2)
    assert i.orientation_covariance[0] > 0
    j = joints[-1]
    assert list(j.name) == ["head_joint", "lift_joint"]
    assert j.position[0] == pytest.approx(geo.HEAD_MIN_ANGLE_RAD, abs=1e-3)
    assert j.position[1] == pytest.approx(geo.LIFT_MIN_ANGLE_RAD, abs=1e-3)
    s = status[-1]
    assert s.header.frame_id == "base_link" and s.curr_path_segment == -1
    assert s.head_in_pos and s.lift_in_pos and not s.is_picked_up
    assert len(s.cliff_data_raw) == 4 and min(s.cliff_data_raw) > 300
    b = battery[-1]
    assert b.present and 3.5 < b.voltage < 4.3 and 0.0 <= b.percentage <= 1.0
    assert b.power_supply_status == BatteryState.POWER_SUPPLY_STATUS_DISCHARGING
    assert math.isnan(b.current) and math.isnan(b.charge) and math.isnan(b.capacity)
    assert math.isnan(b.design_capacity) and math.isnan(b.temperature)
    assert list(b.cell_voltage) == [pytest.approx(b.voltage)]


def test_streams_from_message_objects_where_serialized_publishing_is_missing(make_driver,
                                                                             monkeypatch):
    # An rclpy without Publisher.publish(bytes): every template sets its fields on the
    # message object instead. With ROS_PYTHON_CHECK_FIELDS=1 (conftest.py) a value of the
    # wrong type (an int in a float field) raises on the I/O thread and nothing arrives.
    from cozmo_driver.ros import serialized
    monkeypatch.setattr(serialized, "serialized_publish_supported", lambda: False)
    h = make_driver()
    assert not any(t.serialized for t in h.node.streams.templates.values())
    streams = {"odom": (Odometry, "odom", 10), "tf": (TFMessage, "/tf", 10),
               "imu": (Imu, "imu/data", qos_profile_sensor_data),
               "joints": (JointState, "joint_states", 10), "status": (RobotStatus, "status", 10),
               "image": (Image, "camera/image_raw", qos_profile_sensor_data),
               "compressed": (CompressedImage, "camera/image_raw/compressed",
                              qos_profile_sensor_data),
               "info": (CameraInfo, "camera/camera_info", qos_profile_sensor_data)}
    got = {key: h.listen(key, msg_type, topic, qos)
           for key, (msg_type, topic, qos) in streams.items()}
    assert h.spin_until(lambda: all(len(v) >= 3 for v in got.values()), 10.0), \
        {key: len(v) for key, v in got.items()}
    assert not any(t.serialized for t in h.node.streams.image_templates.values())
    assert got["odom"][-1].pose.covariance[14] > 1e3
    assert got["joints"][-1].position[0] == pytest.approx(geo.HEAD_MIN_ANGLE_RAD, abs=1e-3)
    assert 3.5 < got["status"][-1].battery_voltage < 4.3
    assert (got["image"][-1].width, got["image"][-1].step) == (320, 320)
    assert (got["info"][-1].width, got["info"][-1].height) == (320, 240)



def test_sensor_streams_reach_reliable_and_best_effort_subscribers(make_driver):
    """REP-2003: a sensor driver publishes reliable, so that a reliable subscriber (a display
    added in RViz, create_subscription(Imu, "imu/data", cb, 10)) gets the streams as a
    best-effort one (sensor data QoS) does."""
    h = make_driver()
    sensors = {"imu": (Imu, "imu/data"), "image": (Image, "camera/image_raw"),
               "compressed": (CompressedImage, "camera/image_raw/compressed"),
               "info": (CameraInfo, "camera/camera_info")}
    reliable = {key: h.listen(f"{key} reliable", msg_type, topic, QoSProfile(depth=10))
                for key, (msg_type, topic) in sensors.items()}
    best_effort = {key: h.listen(f"{key} best effort", msg_type, topic, qos_profile_sensor_data)
                   for key, (msg_type, topic) in sensors.items()}
    assert h.spin_until(lambda: all(len(v) >= 3 for v in [*reliable.values(),
                                                           *best_effort.values()]), 10.0), \
        {key: len(v) for key, v in h.received.items()}
    for topic in [topic for _, topic in sensors.values()] + ["object_accel"]:
        offered = h.probe.get_publishers_info_by_topic(f"/{topic}")
        assert [info.qos_profile.reliability for info in offered] == \
            [QoSReliabilityPolicy.RELIABLE], topic


def test_battery_marker_for_rviz_while_connected_and_active(make_driver):
    h = make_driver(frame_prefix="robot1/")
    battery = h.listen("battery", BatteryState, "battery_state")
    markers = h.listen("marker", Marker, "battery_marker")
    # the marker shows the battery_state it is stamped like (the one that was the latest
    # when the 1 Hz timer fired; the simulated battery sags while the motors calibrate)
    def shown_state():
        stamps = {(b.header.stamp.sec, b.header.stamp.nanosec): b for b in battery}
        for m in reversed(markers):
            b = stamps.get((m.header.stamp.sec, m.header.stamp.nanosec))
            if b is not None:
                return m, b
        return None
    assert h.spin_until(shown_state, DISCOVERY_TIMEOUT)
    marker, b = shown_state()
    assert marker.type == Marker.TEXT_VIEW_FACING and marker.header.frame_id == "robot1/base_link"
    assert marker.pose.position.z > 0.05
    shown = re.fullmatch(r"Battery (\d\.\d\d) V (\d+) % discharging", marker.text)
    assert shown, marker.text
    assert float(shown.group(1)) == pytest.approx(b.voltage, abs=0.02)
    assert int(shown.group(2)) == pytest.approx(100 * b.percentage, abs=3)
    # deactivated: no robot data, so no marker either (RViz drops it after its lifetime)
    h.node.trigger_deactivate()
    h.spin_for(0.3)
    n = len(markers)
    h.spin_for(2.5)
    assert len(markers) == n


def test_teleop_square_matches_ground_truth(make_driver):
    h = make_driver()
    odom = h.listen("odom", Odometry, "odom")
    tf = h.listen("tf", TFMessage, "/tf")
    imu = h.listen("imu", Imu, "imu/data", qos_profile_sensor_data)
    pub = h.probe.create_publisher(Twist, "cmd_vel", 10)
    assert h.spin_until(lambda: odom, 3.0)
    start = h.sim.true_pose()
    moving_v, turning_w = [], []

    def leg(v: float, w: float, seconds: float) -> None:
        cmd = Twist()
        cmd.linear.x, cmd.angular.z = v, w
        h.spin_for(seconds, every=lambda: pub.publish(cmd), period=0.1)
        if v:
            moving_v.append(odom[-1].twist.twist.linear.x)
        if w:
            turning_w.append((odom[-1].twist.twist.angular.z, imu[-1].angular_velocity.z))

    for _ in range(4):
        leg(0.1, 0.0, 1.0)
        leg(0.0, 2.0, math.pi / 2 / 2.0)
    leg(0.0, 0.0, 0.3)
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0)
    h.spin_for(0.2)
    x, y, a = relative_truth(start, h.sim.true_pose())
    # it drove a square of about 0.1 m (and closed it within the tolerance below)
    xs = [o.pose.pose.position.x for o in odom]
    ys = [o.pose.pose.position.y for o in odom]
    assert max(xs) - min(xs) > 0.08 and max(ys) - min(ys) > 0.08
    pose = odom[-1].pose.pose
    assert pose.position.x == pytest.approx(x, abs=0.005)
    assert pose.position.y == pytest.approx(y, abs=0.005)
    assert wrap(yaw_of(pose.orientation) - a) == pytest.approx(0.0, abs=0.02)
    t = tf[-1].transforms[0].transform
    assert (t.translation.x, t.translation.y) == pytest.approx((x, y), abs=0.005)
    assert all(v == pytest.approx(0.1, abs=0.01) for v in moving_v)
    for wheel_w, gyro_w in turning_w:
        assert wheel_w == pytest.approx(2.0, abs=0.1)
        assert gyro_w == pytest.approx(wheel_w, abs=0.1)
    # the IMU's yaw is the odometry's, and so is its variance, grown with the square driven
    # (a fixed one would claim the heading better known than odom does)
    odom_at = {(o.header.stamp.sec, o.header.stamp.nanosec): o for o in odom}
    same = [(i, odom_at[(i.header.stamp.sec, i.header.stamp.nanosec)]) for i in imu
            if (i.header.stamp.sec, i.header.stamp.nanosec) in odom_at]
    assert len(same) > 10
    for i, o in same:
        assert i.orientation_covariance[8] == o.pose.covariance[35]
        assert yaw_of(i.orientation) == pytest.approx(yaw_of(o.pose.pose.orientation), abs=1e-9)
    assert same[-1][0].orientation_covariance[8] > 10 * same[0][0].orientation_covariance[8]


@pytest.fixture(params=["own thread", "executor"])
def cmd_vel_served_by(request, monkeypatch):
    """Both ways the driver serves cmd_vel: on its own thread, and on the executor where
    the rclpy in use cannot (subscription_thread.Unsupported)."""
    if request.param == "executor":
        def unsupported(*args: Any, **kwargs: Any) -> None:
            raise Unsupported("forced by the test")
        monkeypatch.setattr(driver_node, "SubscriptionThread", unsupported)
    return request.param


def drove_then_stopped(sim: SimServer) -> Tuple[bool, bool]:
    """Whether the simulator's command log holds a DriveWheels forwards, and a DriveWheels
    stopping both treads after it: facts that stay true once they happened (with one cmd_vel
    and cmd_vel_timeout 0.3 s the treads turn for about 0.3 s, which a test's thread not
    scheduled then misses)."""
    speeds = [(m.lwheel_speed_mmps, m.rwheel_speed_mmps) for _, m in sim.commands() if m.NAME == "DriveWheels"]
    first = next((i for i, (left, right) in enumerate(speeds) if left > 0 and right > 0), None)
    if first is None:
        return False, False
    return True, (0.0, 0.0) in speeds[first + 1:]


def test_watchdog_stops_the_treads_once(make_driver, cmd_vel_served_by):
    h = make_driver(cmd_vel_timeout=0.3)
    assert (h.node._cmd_vel_thread is None) == (cmd_vel_served_by == "executor")
    pub = h.probe.create_publisher(Twist, "cmd_vel", 10)
    assert h.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    before = h.sim.command_counts().get("DriveWheels", 0)
    cmd = Twist()
    cmd.linear.x = 0.05
    pub.publish(cmd)
    assert h.spin_until(lambda: drove_then_stopped(h.sim)[0], 2.0), "no DriveWheels forwards reached the robot"
    # stopped, with no cmd_vel after the first (when: on the robot clock, test_driver_core.py)
    assert h.spin_until(lambda: drove_then_stopped(h.sim)[1], 5.0), "the watchdog sent no stop"
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 5.0)
    h.spin_for(1.0)
    assert h.sim.command_counts().get("DriveWheels", 0) - before == 2  # the command, then one stop


def test_cmd_vel_and_its_watchdog_run_without_the_executor(make_driver):
    """cmd_vel is served on a thread of its own: while nothing spins the executor, a
    cmd_vel still drives the treads and the watchdog still stops them, once."""
    h = make_driver(cmd_vel_timeout=0.3)
    thread = h.node._cmd_vel_thread
    assert thread is not None and thread.thread.is_alive()
    # the subscription is its own node's, which the main executor does not spin
    assert thread.node not in h.executor.get_nodes()
    assert thread.subscription in thread.node.subscriptions
    assert thread.node.get_name() == "_cozmo_driver_cmd_vel"
    pub = h.publisher(Twist, "cmd_vel")
    before = h.sim.command_counts().get("DriveWheels", 0)
    cmd = Twist()
    cmd.linear.x = 0.05
    pub.publish(cmd)

    def wait(predicate, timeout: float) -> bool:  # no spinning
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:
            time.sleep(0.01)
        return bool(predicate())
    assert wait(lambda: drove_then_stopped(h.sim)[0], 2.0), "no DriveWheels forwards reached the robot"
    assert wait(lambda: drove_then_stopped(h.sim)[1], 2.0), "the watchdog sent no stop"
    assert wait(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0)
    time.sleep(0.5)
    assert h.sim.command_counts().get("DriveWheels", 0) - before == 2  # the command, one stop


@pytest.mark.parametrize("how", ["emergency stop", "deactivate"])
def test_no_cmd_vel_goes_out_after_the_treads_are_stopped(make_driver, how):
    """cmd_vel, sent from another thread 500 times a second, races the emergency stop or
    the deactivation on the executor: nothing it sends reaches the robot after the stop."""
    h = make_driver()
    pub = h.publisher(Twist, "cmd_vel", QoSProfile(depth=100))
    cmd = Twist()
    cmd.linear.x = 0.05
    done = threading.Event()

    def flood() -> None:
        for _ in range(5000):  # 10 s at most
            if done.is_set():
                return
            pub.publish(cmd)
            time.sleep(0.002)
    flooder = threading.Thread(target=flood, name="flood")
    flooder.start()
    try:
        assert h.spin_until(lambda: h.sim.wheel_speeds() != (0.0, 0.0), 2.0)
        h.spin_for(0.2)
        if how == "emergency stop":
            assert h.call(SetEmergencyStop, "emergency_stop",
                          SetEmergencyStop.Request(engage=True)).success
        else:
            assert h.node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        h.spin_for(0.5)
    finally:
        done.set()
        flooder.join(5.0)
    h.spin_for(0.3)
    names = [m.NAME for _, m in h.sim.commands()]
    # the stop after the drive began: the robot connecting before the core was active got
    # a StopAllMotors of its own (DriverCore.reinitialise; CI: it came first)
    stop = names.index("StopAllMotors", names.index("DriveWheels"))
    assert names[:stop].count("DriveWheels") >= 10
    assert "DriveWheels" not in names[stop:]
    assert h.sim.wheel_speeds() == (0.0, 0.0)


def test_a_failed_cmd_vel_thread_stops_the_treads_and_the_executor_takes_over(make_driver):
    h = make_driver(cmd_vel_timeout=0.3)
    pub = h.publisher(Twist, "cmd_vel")
    cmd = Twist()
    cmd.linear.x = 0.05
    assert h.spin_until(lambda: h.sim.wheel_speeds() != (0.0, 0.0), 2.0,
                        every=lambda: pub.publish(cmd))

    class BrokenExecutor:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError("the executor broke")
    thread = h.node._cmd_vel_thread
    executor, thread._executor = thread._executor, BrokenExecutor()
    thread.wake()
    assert h.spin_until(lambda: h.node._cmd_vel_thread is None, 2.0)
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0)
    assert not thread.thread.is_alive()
    executor.shutdown(timeout_sec=0.0)
    assert h.node._cmd_vel_sub is not None  # the main executor serves cmd_vel now
    pub = h.publisher(Twist, "cmd_vel")
    pub.publish(cmd)
    assert h.spin_until(lambda: h.sim.wheel_speeds() != (0.0, 0.0), 2.0)
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0)  # its watchdog


def test_curvature_is_kept_when_scaled(make_driver):
    h = make_driver(max_wheel_speed=0.1)
    pub = h.probe.create_publisher(Twist, "cmd_vel", 10)
    assert h.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    cmd = Twist()
    cmd.linear.x, cmd.angular.z = 0.3, 1.0
    pub.publish(cmd)

    def sent():
        drives = [m for _, m in h.sim.commands() if m.NAME == "DriveWheels"]
        return drives[-1] if drives else None
    assert h.spin_until(lambda: sent() is not None and sent().rwheel_speed_mmps != 0, 2.0)
    m = sent()
    assert max(abs(m.lwheel_speed_mmps), abs(m.rwheel_speed_mmps)) == pytest.approx(100.0)
    v = (m.lwheel_speed_mmps + m.rwheel_speed_mmps) / 2000.0
    w = (m.rwheel_speed_mmps - m.lwheel_speed_mmps) / 46.0
    assert w / v == pytest.approx(1.0 / 0.3, rel=1e-4)


def test_head_and_lift_commands_reach_targets(make_driver):
    h = make_driver()
    joints = h.listen("joints", JointState, "joint_states")
    head = h.probe.create_publisher(HeadAngle, "head/angle", 10)
    lift = h.probe.create_publisher(LiftHeight, "lift/height", 10)
    assert h.spin_until(lambda: head.get_subscription_count() and lift.get_subscription_count(), DISCOVERY_TIMEOUT)
    head.publish(HeadAngle(angle=0.3, max_speed=0.0))
    lift.publish(LiftHeight(height=0.07, max_speed=2.0))
    assert h.spin_until(lambda: abs(h.sim.head_angle() - 0.3) < 1e-3
                        and abs(h.sim.lift_height() - 70.0) < 0.5, 5.0)
    lift_angle = math.asin((0.07 - 0.045) / 0.066)
    assert h.spin_until(lambda: joints and abs(joints[-1].position[0] - 0.3) < 2e-3
                        and abs(joints[-1].position[1] - lift_angle) < 5e-3, 2.0)
    # out of range: clamped to the limits (with a warning), never refused
    head.publish(HeadAngle(angle=2.0, max_speed=0.0))
    lift.publish(LiftHeight(height=0.5, max_speed=0.0))
    assert h.spin_until(lambda: abs(h.sim.head_angle() - geo.HEAD_MAX_ANGLE_RAD) < 1e-3
                        and abs(h.sim.lift_height() - 92.0) < 0.5, 5.0)
    # velocity topics
    hv = h.probe.create_publisher(Float64, "head/velocity", 10)
    lv = h.probe.create_publisher(Float64, "lift/velocity", 10)
    assert h.spin_until(lambda: hv.get_subscription_count() and lv.get_subscription_count(), DISCOVERY_TIMEOUT)
    hv.publish(Float64(data=-2.0))
    lv.publish(Float64(data=-50.0))  # clamped to lift_max_speed
    assert h.spin_until(lambda: abs(h.sim.head_angle() - geo.HEAD_MIN_ANGLE_RAD) < 1e-3
                        and abs(h.sim.lift_height() - 32.0) < 0.5, 5.0)
    moves = [m for _, m in h.sim.commands() if m.NAME == "MoveLift"]
    assert moves[-1].speed_rad_per_sec == pytest.approx(-3.0)


def test_bad_commands_change_nothing(make_driver):
    h = make_driver()
    cmd_vel = h.probe.create_publisher(Twist, "cmd_vel", 10)
    head = h.probe.create_publisher(HeadAngle, "head/angle", 10)
    lights = h.probe.create_publisher(BackpackLights, "backpack_lights", 10)
    assert h.spin_until(lambda: cmd_vel.get_subscription_count() and head.get_subscription_count()
                        and lights.get_subscription_count(), DISCOVERY_TIMEOUT)
    before = dict(h.sim.command_counts())
    nan_x, inf_z = Twist(), Twist()
    nan_x.linear.x = math.nan
    inf_z.angular.z = math.inf
    # one at a time: command subscriptions keep only the latest message (depth 1)
    for pub, msg in ((cmd_vel, nan_x), (cmd_vel, inf_z), (head, HeadAngle(angle=math.nan)),
                     (head, HeadAngle(angle=0.1, max_speed=-1.0)),
                     (lights, BackpackLights(front=ColorRGBA(r=2.0)))):
        refused = h.node._refused
        pub.publish(msg)
        assert h.spin_until(lambda: h.node._refused == refused + 1, 2.0), msg
    h.spin_for(0.3)
    after = h.sim.command_counts()
    for name in ("DriveWheels", "SetHeadAngle", "LightStateCenter", "LightStateSide"):
        assert after.get(name, 0) == before.get(name, 0), name
    assert h.node._refused == 5
    assert h.sim.wheel_speeds() == (0.0, 0.0)


def test_stamped_cmd_vel_checks_the_frame(make_driver, cmd_vel_served_by, rclpy_log):
    """A TwistStamped in a frame other than the robot's is refused with a warning naming the
    frame, and drives nothing; one in base_link drives. The refused one is awaited (the refused
    counter), and drives at another speed: had it driven late, its DriveWheels would come first."""
    h = make_driver(cmd_vel_stamped=True)
    assert (h.node._cmd_vel_thread is None) == (cmd_vel_served_by == "executor")
    pub = h.probe.create_publisher(TwistStamped, "cmd_vel", 10)
    assert h.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)

    def drives() -> List[float]:
        return [m.lwheel_speed_mmps for _, m in h.sim.commands() if m.NAME == "DriveWheels"]

    msg = TwistStamped()
    msg.header.frame_id = "map"
    msg.twist.linear.x = 0.05
    refused = h.node._refused
    pub.publish(msg)
    assert h.spin_until(lambda: h.node._refused == refused + 1, 2.0), "the cmd_vel in 'map' was not refused"
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, "cmd_vel refused: cmd_vel.header.frame_id = 'map'")
    assert drives() == []
    msg.header.frame_id = "base_link"
    msg.twist.linear.x = 0.08
    pub.publish(msg)
    assert h.spin_until(lambda: drives(), 2.0), "the cmd_vel in 'base_link' did not drive"
    assert drives()[0] == 80.0, drives()
    assert h.node._refused == refused + 1


def test_a_stale_stamped_cmd_vel_is_refused(make_driver, cmd_vel_served_by, rclpy_log):
    """TwistStamped's stamp was never read: a stamped command delivered late (after a Wi-Fi
    stall, republished, replayed from a bag) drove for a whole cmd_vel_timeout each time it
    came. One stamped more than cmd_vel_timeout before (or after) the driver's clock is
    refused with a (throttled) warning naming its age and the parameter; a zero stamp, which
    many tools publish, is taken; so is a fresh one."""
    h = make_driver(cmd_vel_stamped=True, cmd_vel_timeout=0.5)
    assert (h.node._cmd_vel_thread is None) == (cmd_vel_served_by == "executor")
    pub = h.probe.create_publisher(TwistStamped, "cmd_vel", 10)
    assert h.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)

    def drives() -> List[float]:
        return [m.lwheel_speed_mmps for _, m in h.sim.commands() if m.NAME == "DriveWheels"]

    msg = TwistStamped()
    msg.twist.linear.x = 0.05
    now = h.node.get_clock().now()
    for offset_s in (-2.0, 3.0):  # 2 s old, 3 s ahead
        refused = h.node._refused
        msg.header.stamp = (now + Duration(seconds=offset_s)).to_msg()
        pub.publish(msg)
        assert h.spin_until(lambda: h.node._refused == refused + 1, 2.0), offset_s
    h.spin_for(0.2)
    assert drives() == []
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, "cmd_vel refused: cmd_vel.header.stamp is 2.0")
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, "cmd_vel_timeout (0.5 s)")
    msg.header.stamp = Time().to_msg()        # zero: taken
    pub.publish(msg)
    assert h.spin_until(lambda: drives() == [50.0], 2.0), drives()
    assert h.spin_until(lambda: drives() == [50.0, 0.0], 2.0), drives()  # the watchdog's stop
    msg.twist.linear.x = 0.08
    msg.header.stamp = h.node.get_clock().now().to_msg()   # fresh: taken
    pub.publish(msg)
    assert h.spin_until(lambda: drives()[2:3] == [80.0], 2.0), drives()


@pytest.mark.parametrize("stamped", [False, True], ids=["driver Twist", "driver TwistStamped"])
def test_a_cmd_vel_publisher_of_the_other_type_is_warned_of_once(make_driver, rclpy_log, stamped):
    """A node publishing cmd_vel as TwistStamped (Nav2 with enable_stamped_cmd_vel) to a driver taking
    Twist, or Twist (a plain teleop) to one taking TwistStamped, was never matched by DDS and
    nothing said so: the robot stood still without a word. The driver now warns, once for that
    node and type, naming the node, both types and both ways out; a publisher of its own type
    is no matter of it."""
    h = make_driver(cmd_vel_stamped=stamped)
    ours, other = (TwistStamped, Twist) if stamped else (Twist, TwistStamped)
    elsewhere = rclpy.Context()  # a participant of its own: one holds one type per topic
    rclpy.init(context=elsewhere, domain_id=h.context.get_domain_id())
    wrong = rclpy.create_node("nav_like", context=elsewhere)
    try:
        good = h.probe.create_publisher(ours, "cmd_vel", 10)
        bad = wrong.create_publisher(other, "cmd_vel", 10)
        assert h.spin_until(lambda: good.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
        theirs = f"geometry_msgs/msg/{other.__name__}"

        def warnings() -> List[str]:
            return [line.message for line in rclpy_log.of(h.node, LoggingSeverity.WARN)
                    if "publishes geometry_msgs" in line.message]

        assert h.spin_until(lambda: warnings(), DISCOVERY_TIMEOUT), "no warning of the publisher of the other type"
        h.spin_for(2.5)  # two more checks: said once
        assert len(warnings()) == 1, warnings()
        line = warnings()[0]
        assert f"/cmd_vel: /nav_like publishes {theirs}, but the driver takes geometry_msgs/msg/" \
               f"{ours.__name__} (cmd_vel_stamped {str(stamped).lower()})" in line
        assert f"-p cmd_vel_stamped:={str(not stamped).lower()}" in line
        assert f"enable_stamped_cmd_vel: {str(stamped).lower()}" in line
        assert "/probe" not in line
        assert bad.get_subscription_count() == 0  # (DDS indeed matches them not)
    finally:
        wrong.destroy_node()
        elsewhere.try_shutdown()


@pytest.mark.parametrize("override", [False, True], ids=["reliable", "best effort override"])
def test_a_best_effort_cmd_vel_publisher_is_warned_of_unless_the_driver_subscribes_best_effort(
        make_driver, rclpy_log, override):
    """A node publishing cmd_vel best effort (ros2 topic pub --qos-reliability best_effort, a
    publisher of sensor-data QoS) is never matched with the driver's reliable subscription: its
    commands never arrived, and the driver said nothing. It now warns once, naming the node and
    both ways out; with the driver's subscription overridden to best effort they match, and it
    says nothing."""
    params = {"qos_overrides./cmd_vel.subscription.reliability": "best_effort"} if override else {}
    h = make_driver(**params)
    pub = h.probe.create_publisher(Twist, "cmd_vel", qos_profile_sensor_data)
    reliable = h.probe.create_publisher(Twist, "cmd_vel", 10)  # (no matter of it either way)
    assert h.spin_until(lambda: reliable.get_subscription_count() > 0, DISCOVERY_TIMEOUT)

    def warnings() -> List[str]:
        return [line.message for line in rclpy_log.of(h.node, LoggingSeverity.WARN) if "/cmd_vel: " in line.message]

    if override:
        assert h.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
        h.spin_for(2.5)  # two checks
        assert warnings() == []
        return
    assert h.spin_until(lambda: warnings(), DISCOVERY_TIMEOUT), "no warning of the best-effort publisher"
    h.spin_for(2.5)
    assert warnings() == ["/cmd_vel: /probe publishes best effort, but the driver subscribes reliable: none of "
                          "its commands reach the robot; have that node publish reliable, or start the driver "
                          'with -p "qos_overrides./cmd_vel.subscription.reliability:=best_effort"'], warnings()
    assert pub.get_subscription_count() == 0


def test_lights_head_light_and_volume(make_driver):
    h = make_driver()
    lights = h.probe.create_publisher(BackpackLights, "backpack_lights", 10)
    head_light = h.probe.create_publisher(Bool, "head_light", 10)
    volume = h.probe.create_publisher(Float32, "volume", 10)
    assert h.spin_until(lambda: lights.get_subscription_count() and head_light.get_subscription_count()
                        and volume.get_subscription_count(), DISCOVERY_TIMEOUT)
    lights.publish(BackpackLights(front=ColorRGBA(r=1.0), middle=ColorRGBA(g=1.0),
                                  back=ColorRGBA(b=1.0), left=ColorRGBA(r=1.0, g=1.0, b=1.0),
                                  right=ColorRGBA(r=10 / 31)))
    head_light.publish(Bool(data=True))
    volume.publish(Float32(data=0.5))
    assert h.spin_until(lambda: h.sim.volume() == 32768, 2.0)
    state = h.sim.lights()
    backpack = state["backpack"]
    assert backpack["front"].on_color == 31 << 10
    assert backpack["middle"].on_color == 31 << 5
    assert backpack["back"].on_color == 31
    assert backpack["left"].on_color == 0x7FFF
    assert backpack["right"].on_color == 10 << 10
    assert state["head_light"] is True


def test_the_head_light_keeps_automatic_exposures_to_multiples_of_10_ms(make_driver):
    """Anki's engine limits the exposure to multiples of 10 ms while the IR head light is on
    (VisionMode::LimitedExposure): the driver's automatic exposure does the same."""
    h = make_driver(camera_exposure_ms=33)
    head_light = h.probe.create_publisher(Bool, "head_light", 10)
    assert h.spin_until(lambda: head_light.get_subscription_count(), DISCOVERY_TIMEOUT)
    t0 = time.monotonic()

    def exposures() -> List[int]:
        return [int(m.exposure_ms) for t, m in h.sim.commands()
                if t >= t0 and m.NAME == "SetCameraParams"]
    head_light.publish(Bool(data=True))
    assert h.spin_until(lambda: h.sim.lights()["head_light"] is True and exposures(), 2.0)
    h.spin_for(1.0)                              # and while the automatic exposure goes on
    assert exposures() and all(e % 10 == 0 and 10 <= e <= 60 for e in exposures()), exposures()


def test_emergency_stop_holds_until_released(make_driver):
    h = make_driver()
    pub = h.probe.create_publisher(Twist, "cmd_vel", 10)
    head = h.probe.create_publisher(HeadAngle, "head/angle", 10)
    cmd = Twist()
    cmd.linear.x = 0.05
    assert h.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    pub.publish(cmd)
    assert h.spin_until(lambda: h.sim.wheel_speeds() != (0.0, 0.0), 2.0)
    stops = h.sim.command_counts().get("StopAllMotors", 0)  # one came with the connection
    latched = QoSProfile(depth=1, reliability=QoSReliabilityPolicy.RELIABLE,
                         durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
    said = h.listen(None, Bool, "emergency_stop/engaged", latched)  # joins late: gets the last
    assert h.spin_until(lambda: said, DISCOVERY_TIMEOUT) and [m.data for m in said] == [False]
    response = h.call(SetEmergencyStop, "emergency_stop", SetEmergencyStop.Request(engage=True))
    assert response.success and "engaged" in response.message
    assert h.spin_until(lambda: len(said) == 2, 2.0) and said[-1].data is True
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0)
    assert h.sim.command_counts().get("StopAllMotors", 0) > stops
    drives = h.sim.command_counts().get("DriveWheels", 0)
    h.spin_for(0.5, every=lambda: pub.publish(cmd))
    head.publish(HeadAngle(angle=0.3))
    h.spin_for(0.3)
    assert h.sim.command_counts().get("DriveWheels", 0) == drives
    assert h.sim.command_counts().get("SetHeadAngle", 0) == 0
    assert h.sim.wheel_speeds() == (0.0, 0.0)
    response = h.call(SetEmergencyStop, "emergency_stop", SetEmergencyStop.Request(engage=False))
    assert response.success and "released" in response.message
    h.spin_for(0.2)
    assert [m.data for m in said] == [False, True, False]  # on changes only, not every second
    assert h.sim.wheel_speeds() == (0.0, 0.0)  # releasing starts nothing
    pub.publish(cmd)
    assert h.spin_until(lambda: h.sim.wheel_speeds() != (0.0, 0.0), 2.0)


def test_reset_odometry(make_driver):
    h = make_driver()
    odom = h.listen("odom", Odometry, "odom")
    pub = h.probe.create_publisher(Twist, "cmd_vel", 10)
    cmd = Twist()
    cmd.linear.x, cmd.angular.z = 0.1, 1.0
    h.spin_for(0.8, every=lambda: pub.publish(cmd))
    pub.publish(Twist())
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0)
    h.spin_for(0.1)
    assert abs(odom[-1].pose.pose.position.x) > 0.02
    response = h.call(Trigger, "reset_odometry", Trigger.Request())
    assert response.success
    n = len(odom)
    assert h.spin_until(lambda: len(odom) > n + 2, 2.0)
    pose = odom[-1].pose.pose
    assert (pose.position.x, pose.position.y, yaw_of(pose.orientation)) == \
        pytest.approx((0.0, 0.0, 0.0), abs=1e-6)
    assert odom[-1].pose.covariance[0] < 1e-5


# ----------------------------------------------------------------------------- camera

@pytest.mark.realtime  # the camera's frame rate as it comes
def test_camera_streams_both_topics(make_driver):
    from PIL import Image as PILImage
    h = make_driver()
    compressed = h.listen("compressed", CompressedImage, "camera/image_raw/compressed",
                          qos_profile_sensor_data)
    info = h.listen("info", CameraInfo, "camera/camera_info", qos_profile_sensor_data)
    assert h.spin_until(lambda: compressed and info, 5.0)
    assert h.node._pub["image"].get_subscription_count() == 0
    # the robot's 15 fps, read from the frames' stamps (the robot's clock), not from when they
    # arrived: a loaded machine delivers in bursts
    n0 = len(compressed)
    assert h.spin_until(lambda: len(compressed) >= n0 + 20, 10.0)
    stamps = [Time.from_msg(m.header.stamp).nanoseconds * 1e-9 for m in compressed[n0:]]
    fps = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    assert 12.0 <= fps <= 18.0, fps
    c = compressed[-1]
    assert c.format == "jpeg" and c.header.frame_id == "camera_optical_frame"
    with PILImage.open(io.BytesIO(bytes(c.data))) as im:
        im.load()
        assert (im.width, im.height, im.mode) == (320, 240, "L")
    # camera_info from the robot's NV calibration (the simulator's renderer intrinsics)
    from cozmo_driver.sim.model import default_camera_calibration
    calib = default_camera_calibration()
    ci = info[-1]
    assert (ci.width, ci.height) == (320, 240) and ci.header.frame_id == "camera_optical_frame"
    assert ci.k[0] == pytest.approx(calib.focal_length_x, rel=1e-5)
    assert ci.k[2] == pytest.approx(calib.center_x) and ci.distortion_model == "plumb_bob"
    # every image has its camera_info, with the same stamp (either may arrive first)
    assert h.spin_until(lambda: info[-1].header.stamp == compressed[-1].header.stamp, 5.0)
    # raw images are decoded only while someone subscribes
    raw = h.listen("raw", Image, "camera/image_raw", qos_profile_sensor_data)
    assert h.spin_until(lambda: len(raw) >= 3, 5.0)
    r = raw[-1]
    assert (r.width, r.height, r.encoding, r.step) == (320, 240, "mono8", 320)
    assert len(r.data) == 320 * 240
    # colour, switched at run time
    result = h.node.set_parameters([Parameter("camera_color", value=True)])
    assert result[0].successful
    assert h.spin_until(lambda: raw[-1].encoding == "rgb8", 5.0)
    r = raw[-1]
    assert (r.width, r.height, r.step, len(r.data)) == (320, 240, 960, 320 * 240 * 3)
    assert h.sim.camera_settings()["color"] is True
    # the robot codes colour at half width; the compressed topic carries the nominal
    # 320x240, as camera_info says, and the same picture as image_raw
    with PILImage.open(io.BytesIO(bytes(compressed[-1].data))) as im:
        im.load()
        assert (im.width, im.height, im.mode) == (320, 240, "RGB")
    same = [c for c in compressed if c.header.stamp == r.header.stamp]
    assert same, "no compressed frame with the raw frame's stamp"
    with PILImage.open(io.BytesIO(bytes(same[-1].data))) as im:
        decoded = np.asarray(im.convert("RGB"), dtype=np.int16)
    raw_pixels = np.frombuffer(bytes(r.data), dtype=np.uint8).reshape(240, 320, 3).astype(np.int16)
    assert np.abs(decoded - raw_pixels).mean() < 3.0  # JPEG quality 90 re-encoding
    # gain and exposure go to the robot (with the third field false: Anki's firmware reads it
    # as a request for its defaults and then applies nothing); out-of-range values are refused
    # automatic exposure: the driver sends its starting point (the sim's scene needs no
    # other; test/core tests the adjustment)
    start = {"gain": 1.0, "exposure_ms": 30, "auto_exposure": False}
    assert h.spin_until(lambda: {k: h.sim.camera_settings()[k] for k in start} == start,
                        3.0), h.sim.camera_settings()
    result = h.node.set_parameters([Parameter("camera_auto_exposure", value=False),
                                    Parameter("camera_gain", value=2.0),
                                    Parameter("camera_exposure_ms", value=20)])
    assert all(r.successful for r in result)
    # the three can reach the robot in more than one message: wait for all of them
    wanted = {"gain": 2.0, "exposure_ms": 20, "auto_exposure": False}
    assert h.spin_until(lambda: {k: h.sim.camera_settings()[k] for k in wanted} == wanted,
                        3.0), h.sim.camera_settings()
    assert not h.node.set_parameters([Parameter("camera_gain", value=40.0)])[0].successful
    assert not h.node.set_parameters([Parameter("camera_gain", value=4.0)])[0].successful
    assert not h.node.set_parameters([Parameter("robot_port", value=1234)])[0].successful
    # off
    assert h.node.set_parameters([Parameter("camera_enabled", value=False)])[0].successful
    h.spin_for(0.3)
    n = len(compressed)
    h.spin_for(0.5)
    assert len(compressed) == n


def test_camera_info_from_file_overrides_the_robot(make_driver, tmp_path, rclpy_log):
    from sample_data import CAMERA_YAML
    path = tmp_path / "cozmo_camera.yaml"
    path.write_text(CAMERA_YAML)
    h = make_driver(camera_info_url=path.as_uri())
    info = h.listen("info", CameraInfo, "camera/camera_info", qos_profile_sensor_data)
    assert h.spin_until(lambda: len(info) > 3, 5.0)
    assert info[-1].k[0] == 300.0 and info[-1].d[4] == pytest.approx(0.003)
    # the robot's calibration, read all the same, is said not to be the one used
    assert h.spin_until(lambda: rclpy_log.said(h.node, LoggingSeverity.INFO, "camera calibration read from "
                                               "the robot"), 5.0)
    assert rclpy_log.said(h.node, LoggingSeverity.INFO, "; camera_info_url takes precedence")


def test_a_calibration_tarball_as_camera_info_url_is_warned_of_and_the_driver_starts(make_driver, tmp_path,
                                                                                     rclpy_log):
    """camera_calibration's calibrationdata.tar.gz given as camera_info_url raised
    UnicodeDecodeError out of configure: "could not start". Now it is warned of, naming the
    file and what to do, and the robot's calibration is used."""
    import io
    import tarfile
    from sample_data import CAMERA_YAML
    path = tmp_path / "calibrationdata.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        member = tarfile.TarInfo("ost.yaml")
        member.size = len(CAMERA_YAML.encode())
        tar.addfile(member, io.BytesIO(CAMERA_YAML.encode()))
    h = make_driver(camera_info_url=str(path))  # start() succeeds and the robot connects
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, f"camera_info_url '{path}': not a YAML text file (not "
                                                         "UTF-8: byte 0x8b at offset 1); a calibration tarball")
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, "extract ost.yaml from it")
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, "; using the robot's calibration instead")
    info = h.listen("info", CameraInfo, "camera/camera_info", qos_profile_sensor_data)
    assert h.spin_until(lambda: info and info[-1].k[0] != 300.0, 5.0)


def test_a_fifo_as_camera_info_url_is_warned_of_and_configure_does_not_wait_for_a_writer(make_driver, tmp_path,
                                                                                       rclpy_log):
    """A FIFO (named pipe) given as camera_info_url held configure for good: opening it to read
    waits for a program to open it to write, and nothing did (ros2 lifecycle set configure
    never answered). Now it is refused at once, as any unusable camera_info_url is: warned of,
    naming what it is and what to give, and the robot's calibration is used."""
    fifo = tmp_path / "calibration.yaml"
    os.mkfifo(fifo)
    h = make_driver(start=False, camera_info_url=str(fifo))
    results: List[Any] = []
    configure = threading.Thread(target=lambda: results.append(h.node.trigger_configure()), daemon=True)
    configure.start()
    configure.join(10.0)  # the bound of a configure that waits for a writer, not of one that works
    blocked = configure.is_alive()
    if blocked:  # the old code: let its open (and read) end, so that the test ends
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        configure.join(10.0)
    assert not blocked, "configure waited for a writer of the FIFO"
    assert results == [TransitionCallbackReturn.SUCCESS]
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, f"camera_info_url '{fifo}': {fifo} is a FIFO (named pipe), "
                                                         "not a file: reading it would wait for a writer")
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, "; using the robot's calibration instead")
    assert h.node._core.camera_file is None
    assert h.node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert h.spin_until(lambda: h.node.connected, CONNECT_TIMEOUT), "driver did not connect"


@pytest.mark.parametrize("url, said", [
    ("package://my_cozmo/calibration/${NAME}.yaml", "package:// URLs are looked up in AMENT_PREFIX_PATH, which "
                                                    "is not set (source the workspace's setup, or give file:///"),
    ("file:///tmp/cozmo%00.yaml", "a path cannot contain a NUL character")])
def test_a_camera_info_url_that_names_no_path_is_warned_of_and_the_driver_starts(make_driver, monkeypatch,
                                                                                 rclpy_log, url, said):
    """A package:// URL where AMENT_PREFIX_PATH is not set (rclpy from PyPI: it is needed only
    to build) raised OSError out of configure, and a NUL in the path ValueError: "could not
    start", where every other unusable camera_info_url is warned of. Now they are too, the
    robot's calibration is used, and set_camera_info answers a failure saying why."""
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    h = make_driver(camera_info_url=url)  # start() succeeds and the robot connects
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, said)
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, "; using the robot's calibration instead")
    response = h.call(SetCameraInfo, "camera/set_camera_info", _calibration(320, 240, fx=290.0))
    assert not response.success and said in response.status_message, response.status_message
    info = h.listen("info", CameraInfo, "camera/camera_info", qos_profile_sensor_data)
    assert h.spin_until(lambda: info and info[-1].k[0] == 290.0, 5.0)  # used until the next configure


def _calibration(width: int = 640, height: int = 480, fx: float = 500.0) -> SetCameraInfo.Request:
    """What cameracalibrator's COMMIT sends: its calibration of images of ``width`` x ``height``."""
    msg = CameraInfo(width=width, height=height, distortion_model="plumb_bob")
    msg.d = [0.05, -0.1, 0.001, 0.0005, 0.02]
    msg.k = [fx, 0.0, width / 2 + 2, 0.0, fx + 1, height / 2 - 2, 0.0, 0.0, 1.0]
    msg.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    msg.p = [fx - 10, 0.0, width / 2, 0.0, 0.0, fx - 9, height / 2, 0.0, 0.0, 0.0, 1.0, 0.0]
    return SetCameraInfo.Request(camera_info=msg)


def test_set_camera_info_without_a_url_saves_under_ros_home_and_the_next_driver_reads_it(
        make_driver, rclpy_context, sim, tmp_path, monkeypatch, rclpy_log):
    """camera_calibration's cameracalibrator COMMITs its calibration with camera/set_camera_info
    and exits on its success without showing the answer: with camera_info_url empty the driver
    answered success, kept it until the next configure and saved nothing, so the calibration
    was lost. As camera_info_manager does, empty is file://${ROS_HOME}/camera_info/${NAME}.yaml:
    it is saved there (its directory made), camera_info publishes it (scaled to the images)
    from the next image on, and a driver configured later reads it (an info line says so).
    One of another shape, or with a NaN, is refused and changes nothing."""
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    path = tmp_path / "camera_info" / "cozmo_camera.yaml"
    first = Harness(rclpy_context, sim)
    try:
        info = first.listen("info", CameraInfo, "camera/camera_info", qos_profile_sensor_data)
        assert first.spin_until(lambda: info and info[-1].k[0] != 250.0, 5.0)
        assert not rclpy_log.said(first.node, LoggingSeverity.INFO, "camera calibration from")  # no file: quiet
        response = first.call(SetCameraInfo, "camera/set_camera_info", _calibration())
        assert response.success, response.status_message
        assert response.status_message == (
            f"saved to {path}; camera_info uses it (fx 500.0 fy 501.0 cx 322.0 cy 238.0 px at 640x480)")
        assert rclpy_log.said(first.node, LoggingSeverity.INFO,
                              f"set_camera_info: camera calibration {response.status_message}")
        count = len(info)
        assert first.spin_until(lambda: len(info) > count + 1, 5.0)
        latest = info[-1]
        assert (latest.width, latest.height) == (320, 240)
        assert list(latest.k) == [250.0, 0.0, 161.0, 0.0, 250.5, 119.0, 0.0, 0.0, 1.0]
        assert list(latest.d) == pytest.approx([0.05, -0.1, 0.001, 0.0005, 0.02])
        saved = path.read_text()
        for request, why in ((_calibration(640, 360), "the calibration is for 640x360 images (1.78:1)"),
                             (_calibration(fx=math.nan), "camera_matrix.data: not all finite")):
            response = first.call(SetCameraInfo, "camera/set_camera_info", request)
            assert not response.success and response.status_message.startswith(
                f"refused, camera_info unchanged: {why}"), response.status_message
        count = len(info)
        assert first.spin_until(lambda: len(info) > count + 1, 5.0)
        assert info[-1].k[0] == 250.0 and path.read_text() == saved
    finally:
        first.close()
    h = make_driver()  # a new driver, camera_info_url still empty: the file saved
    assert rclpy_log.said(h.node, LoggingSeverity.INFO, f"camera calibration from {path} (camera_info_url is "
                                                        "empty: file://${ROS_HOME}/camera_info/cozmo_camera.yaml)")
    info = h.listen("info", CameraInfo, "camera/camera_info", qos_profile_sensor_data)
    assert h.spin_until(lambda: info and info[-1].k[0] == 250.0, 5.0)
    assert h.spin_until(lambda: rclpy_log.said(h.node, LoggingSeverity.INFO, "; camera_info_url takes precedence"),
                        5.0)


def test_set_camera_info_saves_a_calibration_per_namespace_and_names_it_in_a_url(make_driver, rclpy_context, sim,
                                                                                  tmp_path, monkeypatch):
    """Two robots in namespaces of their own do not share the default file: its name is the
    camera's after the namespace; ${NAME} in a camera_info_url is that name too."""
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    first = Harness(rclpy_context, sim, namespace="robot1")
    try:
        response = first.call(SetCameraInfo, "camera/set_camera_info", _calibration(320, 240, fx=290.0))
    finally:
        first.close()
    path = tmp_path / "camera_info" / "robot1_cozmo_camera.yaml"
    assert response.success and response.status_message.startswith(f"saved to {path}; "), response.status_message
    assert "camera_name: robot1_cozmo_camera\n" in path.read_text()
    h = make_driver(namespace="robot1", camera_info_url=f"{tmp_path.as_uri()}/calibrations/${{NAME}}.yaml")
    response = h.call(SetCameraInfo, "camera/set_camera_info", _calibration(320, 240, fx=280.0))
    assert response.success and response.status_message.startswith(
        f"saved to {tmp_path / 'calibrations' / 'robot1_cozmo_camera.yaml'}; "), response.status_message


def test_set_camera_info_writes_the_file_of_camera_info_url(make_driver, tmp_path):
    """With camera_info_url naming a file that does not exist yet (the warning at configure
    says so), set_camera_info writes the calibration there, in the format the driver reads (read
    back here with its reader), and camera_info uses it."""
    from cozmo_driver.driver import camera_info as caminfo
    path = tmp_path / "camera_info" / "cozmo.yaml"
    h = make_driver(camera_info_url=path.as_uri())
    info = h.listen("info", CameraInfo, "camera/camera_info", qos_profile_sensor_data)
    response = h.call(SetCameraInfo, "camera/set_camera_info", _calibration(320, 240, fx=290.0))
    assert response.success, response.status_message
    assert response.status_message == f"saved to {path}; camera_info uses it (fx 290.0 fy 291.0 cx 162.0 cy 118.0 " \
                                      "px at 320x240)"
    saved = caminfo.load_camera_info_url(path.as_uri())
    assert (saved.width, saved.height, saved.k[0], saved.k[4], saved.p[0]) == (320, 240, 290.0, 291.0, 280.0)
    assert h.spin_until(lambda: info and info[-1].k[0] == 290.0, 5.0)
    assert list(info[-1].p) == [280.0, 0.0, 160.0, 0.0, 0.0, 281.0, 120.0, 0.0, 0.0, 0.0, 1.0, 0.0]


# ----------------------------------------------------------------------------- events

def test_events_from_the_robot(make_driver):
    h = make_driver()
    events = h.listen("events", RobotEvent, "events")
    status = h.listen("status", RobotStatus, "status")
    assert h.spin_until(lambda: status, 3.0)

    def types():
        return [e.type for e in events]

    def expect(*wanted: int) -> None:
        assert h.spin_until(lambda: all(t in types() for t in wanted), 3.0), (wanted, types())

    h.sim.pick_up()
    expect(EventType.PICKED_UP)
    assert h.spin_until(lambda: status[-1].is_picked_up, 2.0)
    h.sim.put_down()
    expect(EventType.PUT_DOWN)
    h.sim.poke()
    expect(EventType.POKED)
    h.sim.press_button(0.1)
    expect(EventType.BUTTON_PRESSED, EventType.BUTTON_RELEASED)
    h.sim.fall(0.3, 500.0)
    expect(EventType.FALLING_STARTED, EventType.FALLING_STOPPED)
    fall = [e for e in events if e.type == EventType.FALLING_STOPPED][0]
    assert fall.value == pytest.approx(0.3, abs=0.05)
    h.sim.delocalize()
    expect(EventType.DELOCALIZED)
    h.sim.set_on_charger(True)
    expect(EventType.ON_CHARGER, EventType.CHARGING_STARTED)
    h.sim.set_on_charger(False)
    expect(EventType.OFF_CHARGER, EventType.CHARGING_STOPPED)
    assert all(e.header.frame_id == "base_link" and e.description for e in events)
    # each transition exactly once (falling: from the messages only)
    assert types().count(EventType.PICKED_UP) == 1
    assert types().count(EventType.FALLING_STARTED) == 1
    # which way up, from the pitch and the acceleration (the simulator lifts it to lay it down)
    imu = h.listen("imu", Imu, "imu/data")
    h.sim.lay("right")
    expect(EventType.ON_RIGHT_SIDE)
    assert h.spin_until(lambda: status[-1].orientation == RobotStatus.ORIENTATION_ON_RIGHT_SIDE, 2.0)
    # roll is assumed 0: on its side (roll 90 deg) its variance says it is not known
    assert h.spin_until(lambda: imu and imu[-1].orientation_covariance[0] == pytest.approx((math.pi / 2) ** 2), 2.0)
    h.sim.put_down()
    expect(EventType.ON_TREADS)
    assert h.spin_until(lambda: status[-1].orientation == RobotStatus.ORIENTATION_ON_TREADS, 2.0)
    assert h.spin_until(lambda: imu[-1].orientation_covariance[0] == pytest.approx(0.1 ** 2), 2.0)


def test_calibrate_motors_recalibrates_and_a_head_command_meanwhile_waits(make_driver):
    """The calibrate_motors service: the robot is sent StartMotorCalibration, its
    MotorCalibration messages become events, and a head command taken while the head
    calibrates goes out once it is done (a calibrating motor takes no command). Refused,
    with the reason, under the emergency stop."""
    h = make_driver()
    events = h.listen("events", RobotEvent, "events")
    status = h.listen("status", RobotStatus, "status")
    assert h.spin_until(lambda: status, 3.0)
    assert h.spin_until(lambda: not h.node._robot.calibrating("head")
                        and not h.node._robot.calibrating("lift"), 5.0)  # the connection's
    head = h.probe.create_publisher(HeadAngle, "head/angle", 10)
    response = h.call(Trigger, "calibrate_motors", Trigger.Request())
    assert response.success, response.message
    assert response.message.startswith("calibrating the head and the lift: each drives to its "
                                       "low stop"), response.message
    assert h.spin_until(lambda: EventType.HEAD_CALIBRATION_STARTED in [e.type for e in events], 3.0)
    head.publish(HeadAngle(angle=0.6))
    wanted = (EventType.HEAD_CALIBRATION_STARTED, EventType.LIFT_CALIBRATION_STARTED,
              EventType.HEAD_CALIBRATION_ENDED, EventType.LIFT_CALIBRATION_ENDED)
    assert h.spin_until(lambda: all(t in [e.type for e in events] for t in wanted), 5.0), \
        [(e.type, e.description) for e in events]
    said = {e.type: e.description for e in events}
    assert said[EventType.HEAD_CALIBRATION_STARTED] == "head calibration started"
    assert said[EventType.LIFT_CALIBRATION_ENDED] == "lift calibrated"
    assert h.sim.command_counts().get("StartMotorCalibration") == 1
    # the head went down to its stop, then to the command that waited
    assert h.spin_until(lambda: abs(h.sim.head_angle() - 0.6) < 0.03, 5.0), h.sim.head_angle()
    h.call(SetEmergencyStop, "emergency_stop", SetEmergencyStop.Request(engage=True))
    response = h.call(Trigger, "calibrate_motors", Trigger.Request())
    assert not response.success
    assert response.message == ("calibrate_motors refused: emergency stop engaged (release it "
                                "with the emergency_stop service)")
    assert h.sim.command_counts().get("StartMotorCalibration") == 1


def test_odometry_keeps_its_heading_when_the_head_recalibrates(make_driver, rclpy_log):
    """Anki's firmware restarts its reported heading when the head starts to calibrate (its
    IMU filter's rotation goes back to 0): a turned robot's odom would jump back by the
    turn, or count the jump as a turn. The driver re-anchors, and odom follows the truth."""
    h = make_driver()
    odom = h.listen("odom", Odometry, "odom")
    events = h.listen("events", RobotEvent, "events")
    assert h.spin_until(lambda: odom and not h.node._robot.calibrating("head"), 5.0)
    start = h.sim.true_pose()
    pub = h.publisher(Twist, "cmd_vel")
    cmd = Twist()
    cmd.angular.z = 1.0
    # turned at 1 rad/s (no "jump") until the truth shows half a radian, not for a fixed 0.6 s:
    # a stop that reached the robot 0.1 s late on a loaded machine turned it past 0.7 rad
    assert h.spin_until(lambda: relative_truth(start, h.sim.true_pose())[2] >= 0.5, 5.0,
                        every=lambda: pub.publish(cmd), period=0.1), relative_truth(start, h.sim.true_pose())
    pub.publish(Twist())
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0)
    h.spin_for(0.2)
    turned = relative_truth(start, h.sim.true_pose())[2]
    # more than the driver takes for a jump (0.35 rad), well short of the wrap at pi (the
    # watchdog stops the treads 0.5 s after the last cmd_vel, however late the stop)
    assert 0.4 < turned < math.pi / 2, turned
    assert h.call(Trigger, "calibrate_motors", Trigger.Request()).success
    assert h.spin_until(lambda: EventType.HEAD_CALIBRATION_ENDED in [e.type for e in events], 5.0)
    h.spin_for(0.3)
    assert abs(h.sim.reported_pose()[2]) < 0.01   # the robot's own heading restarted
    assert wrap(yaw_of(odom[-1].pose.pose.orientation) - turned) == pytest.approx(0.0, abs=0.02)
    lines = [line.message for line in rclpy_log.of(h.node)]
    # told by the event, or, when the event comes after the first state of the restart, by the
    # gyro, which did not turn (then the event's own re-anchoring is not logged: throttled)
    assert any("odometry re-anchored (the head calibrates, and the robot restarts its heading)"
               in m or "which its gyro did not turn" in m for m in lines), lines


# ----------------------------------------------------------------------------- faults

def _drive_a_bit(h: Harness, odom) -> None:
    pub = h.probe.create_publisher(Twist, "cmd_vel", 10)
    cmd = Twist()
    cmd.linear.x, cmd.angular.z = 0.1, 0.5
    h.spin_for(0.6, every=lambda: pub.publish(cmd))
    pub.publish(Twist())
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0)
    h.spin_for(0.2)
    assert odom[-1].pose.pose.position.x > 0.03


def _stamp_ns(header) -> int:
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


def test_lost_robot_is_found_again_and_odometry_continues(make_driver):
    h = make_driver()
    link = h.listen("link", LinkStatus, "link_status", LATCHED)
    info = h.listen("info", RobotInfo, "robot_info", LATCHED)
    odom = h.listen("odom", Odometry, "odom")
    _drive_a_bit(h, odom)
    before = odom[-1].pose.pose
    # the robot reboots: it forgets the session, and its odometry restarts at zero
    h.sim.reboot()
    assert h.spin_until(lambda: link and link[-1].state == LinkStatus.LOST, 5.0)
    lost_at = _stamp_ns(link[-1].header)
    n = len(odom)
    assert h.spin_until(lambda: link[-1].state == LinkStatus.CONNECTED, 10.0)
    connected_at = _stamp_ns(link[-1].header)
    assert h.spin_until(lambda: len(info) >= 2, 3.0)  # facts published again
    assert h.spin_until(lambda: len(odom) > n + 5, 3.0)
    # no stale data while lost: no odom stamped between the loss and the reconnection (a
    # count over a window after LOST raced the reconnection, 0.5 s after the loss)
    stale = [t for t in (_stamp_ns(m.header) for m in odom) if lost_at < t < connected_at]
    assert not stale, (lost_at, connected_at, stale)
    after = odom[-1].pose.pose
    assert (after.position.x, after.position.y) == pytest.approx(
        (before.position.x, before.position.y), abs=1e-3)
    assert yaw_of(after.orientation) == pytest.approx(yaw_of(before.orientation), abs=1e-3)
    assert h.node._tracker.reanchors >= 1


def test_simulator_restarted_on_the_same_port(make_driver, rclpy_context):
    first = SimServer(port=0, seed=5).start()
    port = first.address[1]
    h = make_driver(first)
    link = h.listen("link", LinkStatus, "link_status", LATCHED)
    odom = h.listen("odom", Odometry, "odom")
    assert h.spin_until(lambda: link and link[-1].state == LinkStatus.CONNECTED and odom, 3.0)
    first.stop()
    assert h.spin_until(lambda: link[-1].state == LinkStatus.LOST, 5.0)
    second = SimServer(port=port, seed=6).start()
    try:
        h.sim = second
        assert h.spin_until(lambda: link[-1].state == LinkStatus.CONNECTED, 10.0)
        n = len(odom)
        assert h.spin_until(lambda: len(odom) > n + 5, 3.0)
        assert second.streaming()
    finally:
        h.node.close()
        second.stop()


def test_garbage_datagrams_change_only_counters(make_driver):
    h = make_driver()
    link = h.listen("link", LinkStatus, "link_status", LATCHED)
    odom = h.listen("odom", Odometry, "odom")
    assert h.spin_until(lambda: link and odom, 3.0)
    h.sim.send_garbage(count=32)
    h.spin_for(1.2)
    assert link[-1].state == LinkStatus.CONNECTED
    assert link[-1].malformed_dropped > 0
    n = len(odom)
    assert h.spin_until(lambda: len(odom) > n + 10, 2.0)
    assert all(math.isfinite(o.pose.pose.position.x) for o in odom)


def test_lifecycle_deactivate_stops_and_pauses(make_driver):
    h = make_driver()
    odom = h.listen("odom", Odometry, "odom")
    events = h.listen("events", RobotEvent, "events")
    pub = h.probe.create_publisher(Twist, "cmd_vel", 10)
    cmd = Twist()
    cmd.linear.x = 0.05
    assert h.spin_until(lambda: pub.get_subscription_count() > 0 and odom, DISCOVERY_TIMEOUT)
    pub.publish(cmd)
    assert h.spin_until(lambda: h.sim.wheel_speeds() != (0.0, 0.0), 2.0)
    h.node.trigger_deactivate()
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0)
    h.spin_for(0.2)
    n = len(odom)
    h.spin_for(0.5, every=lambda: pub.publish(cmd))
    assert len(odom) == n and h.sim.wheel_speeds() == (0.0, 0.0)
    h.sim.set_on_charger(True, move=False)      # meanwhile: reported once active again
    h.spin_for(0.3)
    said = len(events)
    h.node.trigger_activate()
    assert h.spin_until(lambda: len(odom) > n + 5, 2.0)
    assert h.spin_until(lambda: EventType.ON_CHARGER in [e.type for e in events[said:]], 2.0), \
        [(e.type, e.description) for e in events[said:]]
    h.node.trigger_deactivate()
    h.sim.lay("back")                            # so is lying down (held 1 s) meanwhile
    h.spin_for(1.5)
    said = len(events)
    h.node.trigger_activate()
    assert h.spin_until(lambda: EventType.ON_BACK in [e.type for e in events[said:]], 2.0), \
        [(e.type, e.description) for e in events[said:]]
    h.node.trigger_deactivate()
    h.node.trigger_cleanup()
    assert h.spin_until(lambda: not h.sim.is_connected(), 3.0)
    # autostart is read once, at start-up: a change now would do nothing, so it is refused
    result = h.node.set_parameters([Parameter("autostart", value=False)])[0]
    assert not result.successful and "read once, when the node starts" in result.reason, result.reason
    # configure + activate again: a new connection
    assert h.node.start()
    assert h.spin_until(lambda: h.node.connected and h.sim.streaming(), 5.0)


def test_a_stop_asked_for_while_it_configures_leaves_it_inactive(make_driver, monkeypatch):
    """Ctrl-C while autostart configured (seconds on a loaded machine: the robot connects
    half-way through) waited for the configure, then activated the driver, said "activated:
    ... commands taken", and only then stopped it. Now, when it comes at the end of configure
    (earlier, the configure ends at once: the next test), start() leaves it inactive (and
    True: nothing failed); the stop follows."""
    from cozmo_driver.ros import _entry
    signals = _entry.StopSignals()  # not installed: only its request, as a signal sets it
    monkeypatch.setattr(_entry, "_signals", signals)
    h = make_driver(start=False)
    last_step = driver_node.ignored_qos_overrides

    def signalled_meanwhile(*args):  # the last step of configure
        signals.requested.set()
        return last_step(*args)

    monkeypatch.setattr(driver_node, "ignored_qos_overrides", signalled_meanwhile)
    assert h.node.start()
    assert h.node._state_machine.current_state[1] == "inactive"
    monkeypatch.setattr(_entry, "_signals", None)  # no stop asked for: the same node activates
    assert h.node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert h.node._state_machine.current_state[1] == "active"


def blocking_import(tmp_path, monkeypatch, name: str = "cozmo_slow_import") -> "SimpleNamespace":
    """A module ``name`` whose import waits (at most 10 s) for the ``go`` event of the namespace
    returned, after setting its ``started`` event: an import that takes as long as the test wants."""
    gate = SimpleNamespace(started=threading.Event(), go=threading.Event())
    monkeypatch.setitem(sys.modules, "cozmo_test_gate", gate)
    (tmp_path / f"{name}.py").write_text("import sys\ngate = sys.modules['cozmo_test_gate']\n"
                                         "gate.started.set()\ngate.go.wait(10.0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return gate


def test_import_unless_stopped_ends_at_a_stop_and_raises_what_the_import_raised(tmp_path, monkeypatch):
    from cozmo_driver.ros.driver_support import import_unless_stopped
    lines = []
    node = SimpleNamespace(get_logger=lambda: SimpleNamespace(info=lines.append))
    gate = blocking_import(tmp_path, monkeypatch)
    assert not import_unless_stopped(node, gate.started.is_set, ("cozmo_slow_import",))  # stopped mid-import
    assert lines == ["a stop was asked for while the driver configured: it stops without configuring the rest"]
    assert not import_unless_stopped(node, lambda: True, ("json",))  # asked for before: imported or not
    assert len(lines) == 2
    gate.go.set()
    assert import_unless_stopped(node, lambda: False, ("json", "cozmo_slow_import"))  # (it finishes first)
    (tmp_path / "cozmo_broken_import.py").write_text("raise ImportError('no such thing')\n")
    with pytest.raises(ImportError, match="no such thing"):
        import_unless_stopped(node, lambda: False, ("cozmo_broken_import",))


def test_a_stop_asked_for_while_it_imports_the_animation_library_ends_its_configure_at_once(
        make_driver, monkeypatch, tmp_path, rclpy_log):
    """The animation library and the motion actions, imported half-way through configure
    (after the link opened), take about 0.6 s of CPU, seconds on a loaded machine: a Ctrl-C
    then waited for them, and for the rest of configure (a CI run: still running 5 s after
    its SIGINT). Now the configure ends as soon as the stop is asked for: start() returns
    True (nothing failed; the stop follows) with the node unconfigured, and its close
    disconnects the robot as ever."""
    from cozmo_driver.ros import _entry, driver_support
    gate = blocking_import(tmp_path, monkeypatch)
    monkeypatch.setattr(driver_support, "CONFIGURE_IMPORTS", ("cozmo_slow_import",))
    signals = _entry.StopSignals()  # not installed: only its request, as a signal sets it
    monkeypatch.setattr(_entry, "_signals", signals)
    h = make_driver(start=False)
    stopper = threading.Thread(target=lambda: gate.started.wait(10.0) and signals.requested.set())
    stopper.start()
    try:
        assert h.node.start()
    finally:
        gate.go.set()
        stopper.join(10.0)
    assert h.node._state_machine.current_state[1] == "unconfigured"
    assert rclpy_log.said(h.node, LoggingSeverity.INFO, "a stop was asked for while the driver configured")
    assert not rclpy_log.said(h.node, LoggingSeverity.INFO, "configured for the robot")
    assert h.sim.is_connected()  # the link had opened; the stop that follows closes it
    h.node.close()
    assert h.sim.wait_until(lambda sim: not sim.is_connected(), 5.0)


def test_a_failed_activation_is_an_error_in_diagnostics_until_a_clean_up(make_driver, sim):
    """ros2 lifecycle set activate failed (the link could not be opened: here its local port
    is the simulator's) and the node stayed inactive, but /diagnostics said the link was OK,
    "inactive (lifecycle); not connected (disconnected)", as of a driver told to rest. The
    link's status is an ERROR saying why, until a clean-up (or an activation that succeeds)."""
    from diagnostic_msgs.msg import DiagnosticStatus

    h = make_driver(start=False, local_ip="127.0.0.1", local_port=sim.address[1])
    diags = h.listen("diag", DiagnosticArray, "/diagnostics")

    def next_link_status() -> DiagnosticStatus:
        count = len(diags)
        assert h.spin_until(lambda: len(diags) > count, 3.0), "no /diagnostics"
        return [s for s in diags[-1].status if s.name == "cozmo_driver: link"][0]

    assert h.node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert next_link_status().level == DiagnosticStatus.OK  # configured, not told to work yet
    assert h.node.trigger_activate() == TransitionCallbackReturn.FAILURE
    status = next_link_status()
    assert status.level == DiagnosticStatus.ERROR and status.message.startswith(
        f"inactive: the last activation failed: cannot bind UDP 127.0.0.1:{sim.address[1]}"), status.message
    assert h.node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    assert h.node.set_parameters([Parameter("local_port", value=0)])[0].successful
    assert h.node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    status = next_link_status()
    assert (status.level, status.message) == (DiagnosticStatus.OK, "inactive (lifecycle); not connected (disconnected)")
    assert h.node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert h.spin_until(lambda: h.node.connected, CONNECT_TIMEOUT)


def test_diagnostics_report_the_driver_unconfigured_and_finalized_for_as_long_as_the_node_lives(make_driver, sim):
    """/diagnostics was made at configure and destroyed at cleanup: a driver started with
    autostart false, cleaned up, or shut down published nothing, and a diagnostic_aggregator
    marked it stale, as if it had crashed. Each of its parts now says it is unconfigured
    (OK, as inactive: told to rest) and how to configure it, or finalized, every second."""
    from diagnostic_msgs.msg import DiagnosticStatus

    h = make_driver(start=False)
    diags = h.listen("diag", DiagnosticArray, "/diagnostics")
    parts = [f"cozmo_driver: {part}" for part in ("link", "robot", "display and audio", "objects")]
    unconfigured = ("unconfigured (lifecycle): not connected to the robot; configure and activate it: "
                    "ros2 lifecycle set /cozmo_driver configure, then activate")
    finalized = "finalized (lifecycle shutdown): not connected to the robot; restart the node to drive it"

    def reports(link_message) -> List[DiagnosticStatus]:
        """The statuses of two arrays in a row whose link status ``link_message(message)`` takes
        (it keeps reporting, not once)."""
        def two() -> bool:
            fits = [a for a in diags if a.status and a.status[0].name == parts[0]
                    and link_message(a.status[0].message)]
            return len(fits) >= 2 and fits[-1] is diags[-1]
        assert h.spin_until(two, 5.0), [[(s.name, s.message) for s in a.status] for a in diags[-3:]]
        return list(diags[-1].status)

    def released(message: str, state: str) -> None:
        statuses = reports(lambda m: m == message)
        assert [s.name for s in statuses] == parts
        for status in statuses:
            assert (status.level, status.message) == (DiagnosticStatus.OK, message), status
            assert status.hardware_id == f"cozmo@127.0.0.1:{sim.address[1]}"
            values = {v.key: v.value for v in status.values}
            # "robot" names the robot a driver drives (the demo finds its driver by it): none here
            assert values["lifecycle state"] == state and "robot" not in values, values

    released(unconfigured, "unconfigured")   # autostart false: never configured yet
    assert h.node.start() and h.spin_until(lambda: h.node.connected, CONNECT_TIMEOUT)
    assert [s.name for s in reports(lambda m: m.startswith("connected to"))] == parts
    assert h.node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert h.node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    released(unconfigured, "unconfigured")
    assert h.node.trigger_shutdown() == TransitionCallbackReturn.SUCCESS
    released(finalized, "finalized")


def test_a_failed_configure_is_an_error_in_diagnostics_until_a_configure_succeeds(make_driver, sim, monkeypatch,
                                                                                  rclpy_log):
    """ros2 lifecycle set configure failed (here: the process out of file descriptors as the
    robot client is made) and the driver logged why, but /diagnostics said every part OK,
    "unconfigured (lifecycle)", as of a driver nobody had tried to configure. Each part is now
    an ERROR saying the configure failed, with the error the driver logged and what to do,
    until a configure succeeds (then the configured driver's reports, and OK unconfigured after
    its cleanup) or a shutdown (finalized); link_status says DISCONNECTED, inactive throughout."""
    import errno
    from diagnostic_msgs.msg import DiagnosticStatus
    import cozmo_driver.core

    h = make_driver(start=False)
    diags = h.listen("diag", DiagnosticArray, "/diagnostics")
    link = h.listen("link", LinkStatus, "link_status")
    parts = [f"cozmo_driver: {part}" for part in ("link", "robot", "display and audio", "objects")]

    def next_statuses() -> List[DiagnosticStatus]:
        count = len(diags)
        assert h.spin_until(lambda: len(diags) > count, 3.0), "no /diagnostics"
        return list(diags[-1].status)

    def out_of_descriptors(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EMFILE, "Too many open files")

    real_make_robot = cozmo_driver.core.make_robot
    monkeypatch.setattr(cozmo_driver.core, "make_robot", out_of_descriptors)
    error = "OSError(24, 'Too many open files')"
    assert h.node.trigger_configure() != TransitionCallbackReturn.SUCCESS
    assert rclpy_log.said(h.node, LoggingSeverity.ERROR, f"on_configure failed: {error}")
    statuses = next_statuses()
    assert [s.name for s in statuses] == parts
    for status in statuses:
        assert status.level == DiagnosticStatus.ERROR, status
        assert status.message == (
            f"unconfigured: the last configure failed: {error}; not connected to the robot; fix that (the "
            "driver's log says more), then configure again: ros2 lifecycle set /cozmo_driver configure, then "
            "activate"), status.message
        values = {v.key: v.value for v in status.values}
        assert values["lifecycle state"] == "unconfigured" and values["last configure"] == f"failed: {error}"
    assert next_statuses()[0].level == DiagnosticStatus.ERROR  # it keeps saying so
    count = len(link)
    assert h.spin_until(lambda: len(link) > count, 3.0)
    assert link[-1].state == LinkStatus.DISCONNECTED and not link[-1].driver_active

    monkeypatch.setattr(cozmo_driver.core, "make_robot", real_make_robot)
    assert h.node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    status = next_statuses()[0]
    assert (status.level, status.message) == (DiagnosticStatus.OK, "inactive (lifecycle); not connected (disconnected)")
    assert h.node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    status = next_statuses()[0]
    assert (status.level, status.message.split(":")[0]) == (DiagnosticStatus.OK, "unconfigured (lifecycle)"), status

    monkeypatch.setattr(cozmo_driver.core, "make_robot", out_of_descriptors)
    assert h.node.trigger_configure() != TransitionCallbackReturn.SUCCESS
    assert next_statuses()[0].level == DiagnosticStatus.ERROR
    assert h.node.trigger_shutdown() == TransitionCallbackReturn.SUCCESS
    status = next_statuses()[0]
    assert (status.level, status.message.split(" ")[0]) == (DiagnosticStatus.OK, "finalized"), status



@pytest.mark.parametrize("returned", [TransitionCallbackReturn.FAILURE, TransitionCallbackReturn.ERROR],
                         ids=["FAILURE", "ERROR"])
def test_a_configure_that_returns_failure_is_an_error_in_diagnostics_too(make_driver, monkeypatch, returned):
    """An on_configure that returned FAILURE or ERROR, rather than raising, left /diagnostics
    OK, "unconfigured (lifecycle)", as of a driver nobody had tried to configure. It is now an
    ERROR too, saying the configure returned so and that the log says why, until a configure
    succeeds. (The driver's own on_configure has no such return today: one is put in front of it.)"""
    from diagnostic_msgs.msg import DiagnosticStatus
    from cozmo_driver.ros.driver_support import transition

    real_configure = CozmoDriverNode.on_configure
    refusing = [True]

    @transition
    def on_configure(self, state):
        return returned if refusing[0] else real_configure(self, state)
    monkeypatch.setattr(CozmoDriverNode, "on_configure", on_configure)  # before the node registers it
    h = make_driver(start=False)
    diags = h.listen("diag", DiagnosticArray, "/diagnostics")

    def next_status() -> DiagnosticStatus:
        count = len(diags)
        assert h.spin_until(lambda: len(diags) > count, 3.0), "no /diagnostics"
        return diags[-1].status[0]

    assert h.node.trigger_configure() == returned
    error = f"configure returned {returned.name}: see the driver's log"
    status = next_status()
    assert status.level == DiagnosticStatus.ERROR, status
    assert status.message.startswith(f"unconfigured: the last configure failed: {error}; "), status.message
    assert {v.key: v.value for v in status.values}["last configure"] == f"failed: {error}"
    refusing[0] = False
    assert h.node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert h.node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    assert next_status().level == DiagnosticStatus.OK

def test_link_status_reports_the_driver_disconnected_for_as_long_as_the_node_lives(make_driver, sim):
    """link_status was made at configure and destroyed at cleanup: a driver started with
    autostart false, cleaned up or shut down published none (a subscriber, the behavior
    engine among them, heard of no driver), while /diagnostics said it unconfigured. It now
    says DISCONNECTED, inactive, no RTT, every second; after a cleanup with the counters of
    the link it closed (counted since that configure), none before the first configure."""
    h = make_driver(start=False)
    link = h.listen("link", LinkStatus, "link_status")

    def keeps_saying(fits) -> LinkStatus:
        """The last of two link_status in a row, published after this call, that ``fits``."""
        start = len(link)
        assert h.spin_until(lambda: len(link) >= start + 2 and all(fits(m) for m in link[-2:]), 5.0), \
            [(m.state, m.driver_active) for m in link[-3:]]
        return link[-1]

    def released(msg: LinkStatus) -> bool:
        return msg.state == LinkStatus.DISCONNECTED and not msg.driver_active and math.isnan(msg.rtt_s)

    def counters(msg: LinkStatus) -> tuple:
        return (msg.datagrams_sent, msg.datagrams_received, msg.retransmissions, msg.malformed_dropped,
                msg.wrong_source_dropped)

    assert counters(keeps_saying(released)) == (0, 0, 0, 0, 0)  # autostart false: never configured
    assert h.node.start() and h.spin_until(lambda: h.node.connected, CONNECT_TIMEOUT)
    keeps_saying(lambda m: m.state == LinkStatus.CONNECTED and m.driver_active)
    assert h.node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert h.node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    closed = keeps_saying(released)
    assert closed.datagrams_sent > 0 and closed.datagrams_received > 0, counters(closed)
    assert h.node.trigger_shutdown() == TransitionCallbackReturn.SUCCESS
    assert counters(keeps_saying(released)) == counters(closed)


def test_a_shut_down_driver_refuses_new_parameter_values(make_driver):
    """After ros2 lifecycle set shutdown (finalized: the node configures no more) every
    ros2 param set said "Set parameter successful" although no value could ever take effect
    (robot_port, camera_color alike). A new value is refused now, saying why; the same value
    (a file loaded again) is taken."""
    h = make_driver()
    assert h.node.trigger_shutdown() == TransitionCallbackReturn.SUCCESS
    assert h.spin_until(lambda: not h.sim.is_connected(), 3.0)
    for name, value in (("robot_port", 5000), ("camera_color", True)):
        result = h.node.set_parameters([Parameter(name, value=value)])[0]
        assert not result.successful and result.reason == (
            f"{name}: the node is shut down (lifecycle finalized) and takes no new value: restart it "
            "with the new one"), result.reason
    assert h.node.set_parameters([Parameter("camera_color", value=False)])[0].successful


def test_the_watchdog_stops_a_drive_after_a_cleanup_soon_after_driving(make_driver):
    """Deactivate and cleanup within cmd_vel_timeout of a moving cmd_vel stopped the I/O
    loop with the watchdog's check pending on it; the driver core, kept across cleanups,
    took it as still scheduled, and after configure and activate one cmd_vel drove the robot
    on for good. The cleanup also forgets the robot's facts (/diagnostics' hardware_id)."""
    h = make_driver()
    pub = h.probe.create_publisher(Twist, "cmd_vel", 10)
    cmd = Twist()
    cmd.linear.x = 0.05
    assert h.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    pub.publish(cmd)
    assert h.spin_until(lambda: h.sim.wheel_speeds() != (0.0, 0.0), 2.0)
    h.node.trigger_deactivate()
    h.node.trigger_cleanup()
    assert h.node._robot_info is None
    assert h.node.start()
    assert h.spin_until(lambda: h.node.connected and h.node._robot_info is not None, CONNECT_TIMEOUT)
    # until the new subscription takes one (discovery), then no more cmd_vel
    assert h.spin_until(lambda: h.sim.wheel_speeds() != (0.0, 0.0), DISCOVERY_TIMEOUT,
                        every=lambda: pub.publish(cmd))
    assert h.spin_until(lambda: h.sim.wheel_speeds() == (0.0, 0.0), 2.0), "the watchdog did not stop it"


def test_repeated_cleanups_leave_nothing_in_the_default_callback_group(make_driver):
    """rclpy's callback group keeps a weak reference to each entity made in it and drops none
    when the entity is destroyed: each cleanup and configure left about thirty dead ones in
    the driver node's default group, for the rest of the process. A configure drops those of
    the configures before, so the group holds the node's live entities alone."""
    import gc
    from rclpy.action import ActionServer
    h = make_driver()
    group = h.node.default_callback_group
    counts = []
    for _ in range(3):
        h.node.trigger_deactivate()
        h.node.trigger_cleanup()
        assert h.spin_until(lambda: not any(isinstance(w, ActionServer) for w in h.node.waitables), 3.0)
        gc.collect()  # what is destroyed is gone (not a cycle waiting for the collector)
        assert h.node.start()
        dead = [ref for ref in group.entities if ref() is None]
        assert not dead, f"{len(dead)} dead entries of {len(group.entities)}"
        counts.append(len(group.entities))
    assert len(set(counts)) == 1, counts


def test_repeated_cleanups_leave_no_action_servers_or_released_interfaces_behind(make_driver, monkeypatch):
    """Each cleanup releases the action servers (destroyed once their goals' results are
    out) and the media and motions that own them; after many configure/cleanup cycles the
    node holds one set of servers, and nothing of the released interfaces: run as main()
    runs it (the collector off for start-up, then start-up's objects frozen), the first
    configure's were frozen with start-up's and never collected, and a finished retirement
    kept the released media's and motions' goals-running callables."""
    import gc
    import weakref
    from rclpy.action import ActionServer
    from cozmo_driver.ros import driver_support
    from cozmo_driver.ros.driver_support import collector_off
    monkeypatch.setattr(driver_support, "_FROZEN", driver_support._Frozen())  # not the next tests'
    resume = collector_off()
    try:
        h = make_driver()
        assert h.spin_until(lambda: h.node.connected, CONNECT_TIMEOUT)
        resume()  # as main() does once start() has ended

        def servers() -> list:
            return [w for w in h.node.waitables if isinstance(w, ActionServer)]

        def interfaces() -> list:
            n = h.node
            return [weakref.ref(x) for x in (n._media, n._motion, n._objects, n._robot, n._media.library)]

        active = len(servers())
        assert active >= 5, active  # paths, poses, turns, animations, audio...
        released = []
        for _ in range(3):
            released += interfaces()
            h.node.trigger_deactivate()
            h.node.trigger_cleanup()
            assert h.spin_until(lambda: not servers(), 3.0), len(servers())
            assert h.node.start()
            assert h.spin_until(lambda: h.node.connected, CONNECT_TIMEOUT)
            assert len(servers()) == active
        retiring = h.node._retiring
        assert len(retiring) == 2 and all(retirement.done for retirement in retiring), retiring
        # the last configure's objects frozen as start-up's were, two turns of the 1 s timer
        # after the released servers are gone
        assert h.spin_until(lambda: gc.get_freeze_count() > 0, 4.0)
        gc.collect()
        alive = [type(ref()).__name__ for ref in released if ref() is not None]
        assert not alive, alive
    finally:
        resume()
        gc.unfreeze()


def test_two_drivers_in_two_namespaces(rclpy_context):
    sims = [SimServer(port=0, seed=11).start(), SimServer(port=0, seed=12).start()]
    harnesses = []
    try:
        for k, server in enumerate(sims, 1):
            harnesses.append(Harness(rclpy_context, server, namespace=f"robot{k}",
                                     frame_prefix=f"robot{k}/"))
        h1, h2 = harnesses
        odom1 = h1.listen("odom", Odometry, "odom")
        odom2 = h2.listen("odom", Odometry, "odom")
        tf = h1.listen("tf", TFMessage, "/tf")
        pub = h1.probe.create_publisher(Twist, "cmd_vel", 10)
        cmd = Twist()
        cmd.linear.x = 0.1
        executor = SingleThreadedExecutor(context=rclpy_context)
        for h in harnesses:
            h.executor.remove_node(h.node)
            h.executor.remove_node(h.probe)
            executor.add_node(h.node)
            executor.add_node(h.probe)
            h.executor = executor
        h1.spin_for(1.0, every=lambda: pub.publish(cmd))
        pub.publish(Twist())
        h1.spin_for(0.3)
        assert sims[0].true_pose() != sims[1].true_pose()
        assert h2.sim.command_counts().get("DriveWheels", 0) == 0
        assert odom1[-1].pose.pose.position.x > 0.05
        assert odom2[-1].pose.pose.position.x == pytest.approx(0.0, abs=1e-6)
        assert odom1[-1].header.frame_id == "robot1/odom"
        assert odom2[-1].child_frame_id == "robot2/base_footprint"
        frames = {t.child_frame_id for m in tf for t in m.transforms}
        assert frames == {"robot1/base_footprint", "robot2/base_footprint"}
    finally:
        for h in harnesses:
            h.close()
        for server in sims:
            server.stop()


def test_invalid_parameters_are_refused_at_start(rclpy_context, sim):
    """Refused in its constructor, the node is destroyed there and then: it is gone from the
    ROS graph although the exception (which holds the half-made node) is still referenced,
    so a driver started next beside it is not refused as a duplicate name."""
    probe = rclpy.create_node("refusal_probe", context=rclpy_context)
    try:
        with pytest.raises(ValueError, match="reconnect_min") as first:
            CozmoDriverNode(context=rclpy_context, parameter_overrides=[
                Parameter("reconnect_min", value=9.0), Parameter("reconnect_max", value=1.0)])
        with pytest.raises(Exception, match="odom_frame") as second:
            CozmoDriverNode(context=rclpy_context, parameter_overrides=[
                Parameter("odom_frame", value="/odom")])
        names = [name for name, _ in probe.get_node_names_and_namespaces()]
        assert "refusal_probe" in names and "cozmo_driver" not in names, names
        assert first.value is not None and second.value is not None  # (still referenced)
    finally:
        probe.destroy_node()


def test_an_empty_list_as_ros2_param_set_and_load_send_it_empties_animation_dirs(make_driver, tmp_path):
    """ros2 param set /cozmo_driver animation_dirs "[]" (and ros2 param load of config/cozmo.yaml,
    or of the node's own dump) sends the empty list as a bool array, which the string-array
    parameter refused ("Wrong parameter type, expected 'Type.STRING_ARRAY' got
    'Type.BOOL_ARRAY'"): directories once set could not be emptied again. Taken now, as unchanged
    while configured, as the new value after a clean-up; a list of numbers is still refused."""
    from rcl_interfaces.msg import Parameter as ParameterMsg, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    def ros2_param_set(value: ParameterValue):
        request = SetParameters.Request(parameters=[ParameterMsg(name="animation_dirs", value=value)])
        return driver.call(SetParameters, "/cozmo_driver/set_parameters", request).results[0]

    empty = ParameterValue(type=ParameterType.PARAMETER_BOOL_ARRAY, bool_array_value=[])
    driver = make_driver()
    assert ros2_param_set(empty).successful  # configured: unchanged, as in a whole file loaded
    assert driver.node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert driver.node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    dirs = ParameterValue(type=ParameterType.PARAMETER_STRING_ARRAY, string_array_value=[str(tmp_path)])
    assert ros2_param_set(dirs).successful
    assert driver.node.get_parameter("animation_dirs").value == [str(tmp_path)]
    result = ros2_param_set(empty)
    assert result.successful, result.reason
    assert list(driver.node.get_parameter("animation_dirs").value) == []
    numbers = ParameterValue(type=ParameterType.PARAMETER_INTEGER_ARRAY, integer_array_value=[1])
    result = ros2_param_set(numbers)
    assert not result.successful and result.reason == "animation_dirs must be a list of strings", result.reason
    no_numbers = ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY, double_array_value=[])
    assert ros2_param_set(no_numbers).successful
    assert driver.node.start()  # configured again, with no directories


def test_a_whole_number_for_a_double_parameter_is_taken_as_that_double(make_driver):
    """ros2 param set /cozmo_driver cmd_vel_timeout 1 (or max_wheel_speed 200) was refused by
    rclpy before the driver's checks ("Wrong parameter type, expected 'Type.DOUBLE'"), which did
    not say that 1.0 would do. A whole number is now taken as that double (the parameter stays
    a double: ros2 param get shows 3.0), still within the range; a string for a double, or a
    double for an integer, is refused saying what is expected, with an example."""
    from rcl_interfaces.msg import Parameter as ParameterMsg, ParameterType, ParameterValue
    from rcl_interfaces.srv import GetParameters, SetParameters

    def ros2_param_set(name: str, value: ParameterValue):
        request = SetParameters.Request(parameters=[ParameterMsg(name=name, value=value)])
        return driver.call(SetParameters, "/cozmo_driver/set_parameters", request).results[0]

    def ros2_param_get(name: str) -> ParameterValue:
        return driver.call(GetParameters, "/cozmo_driver/get_parameters", GetParameters.Request(names=[name])).values[0]

    def integer(value: int) -> ParameterValue:
        return ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value)

    driver = make_driver()
    result = ros2_param_set("cmd_vel_timeout", integer(3))
    assert result.successful, result.reason
    got = ros2_param_get("cmd_vel_timeout")
    assert (got.type, got.double_value) == (ParameterType.PARAMETER_DOUBLE, 3.0)
    assert driver.node._params["cmd_vel_timeout"] == 3.0 and type(driver.node._params["cmd_vel_timeout"]) is float
    result = ros2_param_set("max_wheel_speed", integer(200))    # mm/s meant: still out of range
    assert not result.successful and "max_wheel_speed" in result.reason, result.reason
    result = ros2_param_set("max_wheel_speed", integer(0))
    assert not result.successful and "max_wheel_speed" in result.reason, result.reason
    fast = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value="fast")
    result = ros2_param_set("cmd_vel_timeout", fast)
    assert not result.successful and result.reason == (
        "Wrong parameter type: cmd_vel_timeout is a double parameter, e.g. 3.0 (a whole number is "
        "taken too); got 'fast', a string"), result.reason
    port = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=5551.0)
    result = ros2_param_set("robot_port", port)
    assert not result.successful and result.reason.startswith(
        "Wrong parameter type: robot_port is an integer parameter, e.g. "), result.reason
    assert ros2_param_get("cmd_vel_timeout").double_value == 3.0 and driver.node._params["cmd_vel_timeout"] == 3.0
    # the node's own set_parameters, as a program in its process calls it
    assert driver.node.set_parameters([Parameter("head_max_speed", value=5)])[0].successful
    assert driver.node.get_parameter("head_max_speed").type_ == Parameter.Type.DOUBLE


def test_a_whole_number_for_a_double_parameter_is_taken_at_start_up(make_driver, rclpy_context):
    """-p cmd_vel_timeout:=1 (or 1 in a parameter file) stopped the driver at start-up (rclpy's
    "expecting type 'DOUBLE'", with a hint to write 1.0): it is now taken as 1.0, and the
    parameter is a double; a string for a double still stops it, saying what is expected."""
    from rcl_interfaces.msg import ParameterType
    from rcl_interfaces.srv import GetParameters
    from rclpy.exceptions import ParameterException

    driver = make_driver(peer_timeout=2, cmd_vel_timeout=1)   # as a parameter file gives them
    got = driver.call(GetParameters, "/cozmo_driver/get_parameters",
                      GetParameters.Request(names=["peer_timeout", "cmd_vel_timeout"])).values
    assert [(v.type, v.double_value) for v in got] == [(ParameterType.PARAMETER_DOUBLE, 2.0),
                                                      (ParameterType.PARAMETER_DOUBLE, 1.0)]
    assert driver.node._params["cmd_vel_timeout"] == 1.0 and type(driver.node._params["cmd_vel_timeout"]) is float
    node = CozmoDriverNode(node_name="cozmo_driver_whole", context=rclpy_context, cli_args=[
        "--ros-args", "-p", "robot_ip:=127.0.0.1", "-p", "wheel_acceleration:=2"])
    try:
        assert node.get_parameter("wheel_acceleration").type_ == Parameter.Type.DOUBLE
        assert node.get_parameter("wheel_acceleration").value == 2.0 and node._params["wheel_acceleration"] == 2.0
    finally:
        node.destroy_node()
    with pytest.raises(ParameterException) as refused:
        CozmoDriverNode(node_name="cozmo_driver_whole", context=rclpy_context, cli_args=[
            "--ros-args", "-p", "robot_ip:=127.0.0.1", "-p", "cmd_vel_timeout:=fast"])
    assert str(refused.value) == ("Wrong parameter type: cmd_vel_timeout is a double parameter, e.g. "
                                  "-p cmd_vel_timeout:=0.5 (a whole number is taken too); got 'fast', a string")


def test_a_qos_override_rclpy_cannot_take_is_refused_naming_it_and_the_values(rclpy_context):
    """reliability:=bogus raised a bare RuntimeError from rclpy when cmd_vel's subscription
    was made, after a line saying cmd_vel was served another way: configure failed with
    neither the parameter nor the values it takes named. Now the node is refused at once."""
    with pytest.raises(ValueError) as refused:
        CozmoDriverNode(context=rclpy_context, cli_args=[
            "--ros-args", "-p", "qos_overrides./cmd_vel.subscription.reliability:=bogus",
            "-p", "qos_overrides./odom.publisher.depth:=-3",
            "-p", "qos_overrides./odom.publisher.history:=KEEP_LAST"])   # (case aside: fine)
    reliabilities = ", ".join(p.name.lower() for p in rclpy.qos.ReliabilityPolicy if p.name != "UNKNOWN")
    assert str(refused.value) == (
        f"qos_overrides./cmd_vel.subscription.reliability = 'bogus': use {reliabilities}; "
        "qos_overrides./odom.publisher.depth = -3: a depth is a whole number from 0 to 2147483647")


def test_the_qos_values_refused_are_those_rclpy_cannot_take():
    """The values each policy takes were a fixed list, without Jazzy's best_available
    (refused, though rclpy takes it), and a depth had no upper limit (2**31 passed, and
    making the topic failed at configure with pybind's TypeError). Now they are rclpy's own
    (its policies' names, but unknown) and a depth at most 2**31 - 1, rmw's."""
    from types import SimpleNamespace

    from cozmo_driver.ros._entry import bad_qos_overrides

    def problems(**given: Any) -> List[str]:
        node = SimpleNamespace(_parameter_overrides={
            f"qos_overrides./odom.publisher.{policy}": Parameter(policy, value=value)
            for policy, value in given.items()})
        return bad_qos_overrides(node)

    for policy in rclpy.qos.ReliabilityPolicy:
        if policy.name != "UNKNOWN":
            assert problems(reliability=policy.name.lower()) == [], policy
    for policy in rclpy.qos.HistoryPolicy:
        if policy.name != "UNKNOWN":
            assert problems(history=policy.name) == [], policy
    assert problems(depth=2 ** 31 - 1) == []
    assert problems(depth=2 ** 31) == ["qos_overrides./odom.publisher.depth = 2147483648: a depth is a "
                                       "whole number from 0 to 2147483647"]
    assert len(problems(reliability="unknown")) == 1 and len(problems(history="unknown")) == 1
    if "BEST_AVAILABLE" in rclpy.qos.ReliabilityPolicy.__members__:  # Jazzy and later
        assert problems(reliability="best_available") == []


def test_a_misspelt_parameter_is_named_with_the_closest_one(rclpy_context, tmp_path, rclpy_log):
    """A parameter file (or -p) setting a name the driver does not have: a warning naming it
    and the closest name. A misspelt max_wheel_speed or cmd_vel_timeout left the limit at its
    default without a word."""
    params = tmp_path / "typo.yaml"
    params.write_text("cozmo_driver:\n  ros__parameters:\n    max_wheel_sped: 0.1\n"
                      "    use_sim_time: false\n    max_wheel_speed: 0.15\n")
    node = CozmoDriverNode(context=rclpy_context, cli_args=[
        "--ros-args", "--params-file", str(params), "-p", "cmd_vel_timout:=0.0",
        "-p", "qos_overrides./odom.publisher.depth:=5"])
    try:
        warned = [line.message for line in rclpy_log.of(node, LoggingSeverity.WARN)
                  if "is not a parameter of" in line.message]
        assert warned == [
            "parameter 'cmd_vel_timout' is not a parameter of cozmo_driver: ignored (did you mean "
            "'cmd_vel_timeout'?)",
            "parameter 'max_wheel_sped' is not a parameter of cozmo_driver: ignored (did you mean "
            "'max_wheel_speed'?)"], warned
        assert node.get_parameter("max_wheel_speed").value == 0.15
    finally:
        node.destroy_node()


# ----------------------------------------------------------------------------- console script

def _node_command(port: int, params_file: Optional[Path] = None) -> List[str]:
    exe = Path(sys.executable).parent / "cozmo_driver_node"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "cozmo_driver.ros.driver_node"]
    cmd.append("--ros-args")
    if params_file is not None:  # first: the -p below must win
        cmd += ["--params-file", str(params_file)]
    return cmd + ["-p", "robot_ip:=127.0.0.1", "-p", f"robot_port:={port}"]


@pytest.mark.parametrize("content", ["foo: [\n", None], ids=["not-yaml", "missing"])
def test_a_parameter_file_rcl_cannot_read_is_one_line_and_status_2(tmp_path, content):
    """rcl refuses the file in rclpy.init: a 20-line traceback and status 1 before; now the
    program's name, the file and rcl's reason in one line, and 2 as for a refused value."""
    path = tmp_path / "bad.yaml"
    if content is not None:
        path.write_text(content)
    result = subprocess.run(_node_command(9, path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    said = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(said) == 1 and f"--params-file {path}" in said[0], result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def test_an_unknown_ros_argument_is_one_line_and_status_2():
    """--param-file, a misspelt --params-file: rclpy.init's UnknownROSArgsError was a
    15-line traceback and status 1; now one line naming the arguments and the one meant,
    and 2, as for a parameter file rcl cannot read."""
    command = _node_command(9)
    command[command.index("--ros-args") + 1:1 + command.index("--ros-args")] = ["--param-file", "cozmo.yaml"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    said = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(said) == 1, result.stderr
    assert "unknown ROS arguments: --param-file cozmo.yaml (did you mean --params-file?" in said[0], said
    assert "Traceback" not in result.stderr, result.stderr


def test_a_mistyped_robot_ip_is_refused_not_read_as_another_address(sim):
    """robot_ip:=127.0.1, a shortened address that the C library reads as 127.0.0.1: the
    driver drove the robot there (as 172.31.1 would have driven 172.31.0.1). Now it exits
    2 at once, naming the value and the form an address takes, and the simulator at
    127.0.0.1 hears nothing."""
    port = sim.address[1]
    proc = subprocess.Popen(_node_command(port) + ["-p", "robot_ip:=127.0.1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, (out, err)
    assert ("cozmo_driver: refusing to run: '127.0.1' is not an IPv4 address of four numbers 0-255 "
            "separated by dots: check the address (a Cozmo answers at 172.31.1.1 on its own Wi-Fi)"
            ) in err.splitlines(), err
    assert "Traceback" not in err
    assert not sim.is_connected() and sim.transport.stats.datagrams_in == 0, sim.transport.stats


@pytest.mark.parametrize("node, param, example", [("driver", "peer_timeout", "3.0"), ("face", "fps", "30.0")])
def test_a_string_for_a_double_parameter_says_what_to_write(node, param, example):
    """-p peer_timeout:=2 stopped the node with rclpy's words only ("Trying to set parameter
    'peer_timeout' to '2' of type 'INTEGER', expecting type 'DOUBLE'"); a whole number is now
    taken (test_a_whole_number_for_a_double_parameter_is_taken_at_start_up), and a value that
    is no number says what the parameter takes, with an example."""
    module = {"driver": "driver_node", "face": "face_node"}[node]
    exe = Path(sys.executable).parent / f"cozmo_{module}"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", f"cozmo_driver.ros.{module}"]
    cmd += ["--ros-args", "-p", "robot_ip:=127.0.0.1", "-p", "robot_port:=1", "-p", f"{param}:=fast"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result
    assert (f"Wrong parameter type: {param} is a double parameter, e.g. -p {param}:={example} (a whole "
            "number is taken too); got 'fast', a string") in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def _loopback_params_file(tmp_path: Path, port: int, **params: Any) -> Path:
    """config/cozmo.yaml with the robot on 127.0.0.1 (never the real robot's address), and
    ``params``."""
    import yaml
    doc = yaml.safe_load((ROOT / "config/cozmo.yaml").read_text())
    doc["cozmo_driver"]["ros__parameters"].update(robot_ip="127.0.0.1", robot_port=port, **params)
    path = tmp_path / "cozmo_loopback.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@contextlib.contextmanager
def _driver_process(rclpy_context, sim, probe_name: str):
    """(a probe harness, the driver's console script on ``sim`` as a process); both ended
    at the end (the process killed if it still runs)."""
    probe = RosHarness(rclpy_context, probe_name)
    proc = subprocess.Popen(_node_command(sim.address[1]), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        yield probe, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        probe.close()


@pytest.mark.slow
def test_goals_running_when_the_driver_stops_end_with_a_result(rclpy_context, sim):
    """Ctrl-C while goals run: each client gets its result (aborted, "the driver is shutting
    down"); the servers went with the node before the results were sent, and a client
    waited for good (ros2 action send_goal until killed)."""
    from action_msgs.msg import GoalStatus
    from cozmo_interfaces.action import PlayAnimation, SetLiftHeight
    with _driver_process(rclpy_context, sim, "goal_client") as (probe, proc):
        with TellsItsLog(proc, "the driver"):
            goals = {}
            for name, action, goal in (
                    ("set_lift_height", SetLiftHeight, SetLiftHeight.Goal(height=0.09, duration=30.0)),
                    ("play_animation", PlayAnimation, PlayAnimation.Goal(name="nod_yes", loops=50))):
                sent = probe.action_client(action, name).send_goal_async(goal)
                assert probe.spin_until(sent.done, 10.0) and sent.result().accepted, name
                goals[name] = sent.result().get_result_async()
            probe.spin_for(0.5)
            assert not any(result.done() for result in goals.values())
        proc.send_signal(signal.SIGINT)
        assert probe.spin_until(lambda: all(result.done() for result in goals.values()), 5.0), \
            [name for name, result in goals.items() if not result.done()]
        for name, result in goals.items():
            got = result.result()
            assert got.status == GoalStatus.STATUS_ABORTED, (name, got.status)
            assert got.result.message == "the driver is shutting down", (name, got.result.message)
        assert probe.spin_until(lambda: proc.poll() is not None, 10.0)
        assert proc.returncode == 0


@pytest.mark.slow
def test_another_process_sees_the_link_closed_when_the_driver_stops(rclpy_context, sim, tmp_path):
    """The driver's last link_status (DISCONNECTED) reaches a subscriber in another process
    before the driver's publisher is gone (a behavior node, a dashboard): published just
    before the publisher was destroyed, it did not."""
    with _driver_process(rclpy_context, sim, "link_watcher") as (probe, proc):
        link = probe.listen("link", LinkStatus, "link_status", LATCHED)
        with TellsItsLog(proc, "the driver"):
            assert probe.spin_until(lambda: link and link[-1].state == LinkStatus.CONNECTED,
                                    20.0), [m.state for m in link]
        proc.send_signal(signal.SIGINT)
        assert probe.spin_until(lambda: proc.poll() is not None, 10.0)
        probe.spin_for(0.5)
        assert link[-1].state == LinkStatus.DISCONNECTED, [m.state for m in link]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_console_script_stops_the_robot_on_signal(sim, sig, tmp_path):
    env = dict(os.environ)
    port = sim.address[1]
    # the camera streaming with no subscriber (camera_on_demand off): a stop under load
    params = _loopback_params_file(tmp_path, port, camera_on_demand=False)
    proc = subprocess.Popen(_node_command(port, params),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        with TellsItsLog(proc, "the driver"):
            assert sim.wait_until(lambda s: s.streaming(), 15.0), "the node did not connect"
            # camera frames flowing too (a bound for a loaded machine, not a timing claim)
            assert sim.wait_until(lambda s: s.counters()["camera"] > 5, 20.0), "no camera frames"
        before = sim.command_counts().get("StopAllMotors", 0)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Traceback" not in out, err
    assert sim.command_counts().get("StopAllMotors", 0) > before  # wheels stopped
    assert sim.wait_until(lambda s: not s.is_connected(), 3.0)   # disconnect sent
    assert "connected to Cozmo" in out + err


def test_image_qos_can_be_overridden(make_driver):
    """Images are reliable by default (REP-2003); qos_overrides parameters make them best
    effort."""
    h = make_driver(**{"qos_overrides./camera/image_raw/compressed.publisher.reliability":
                       "best_effort"})
    got = h.listen("compressed", CompressedImage, "camera/image_raw/compressed",
                   qos_profile_sensor_data)
    assert h.spin_until(lambda: len(got) >= 2, 5.0)
    info = h.probe.get_publishers_info_by_topic("/camera/image_raw/compressed")
    assert info[0].qos_profile.reliability == QoSReliabilityPolicy.BEST_EFFORT
    default = h.probe.get_publishers_info_by_topic("/camera/image_raw")
    assert default[0].qos_profile.reliability == QoSReliabilityPolicy.RELIABLE


def test_cmd_vel_qos_can_be_overridden_and_an_override_nothing_takes_is_warned_of(
        make_driver, rclpy_log):
    """cmd_vel and display/face are taken on threads of their own, whose nodes get the
    driver's overrides for their topics; an override that nothing takes (a topic without
    overrides, a policy rclpy does not let be overridden) was ignored without a word."""
    h = make_driver(**{"qos_overrides./cmd_vel.subscription.reliability": "best_effort",
                       "qos_overrides./display/face.subscription.depth": 3,
                       "qos_overrides./tf.publisher.reliability": "best_effort",
                       "qos_overrides./odom.publisher.durability": "transient_local"})
    assert h.node._cmd_vel_thread is not None and h.node._media._face_thread is not None
    info = h.probe.get_subscriptions_info_by_topic("/cmd_vel")
    assert [i.qos_profile.reliability for i in info] == [QoSReliabilityPolicy.BEST_EFFORT]
    assert h.node._media._face_thread.subscription.qos_profile.depth == 3  # (not discovered)
    warned = [line.message for line in rclpy_log.of(h.node, LoggingSeverity.WARN)
              if "is ignored" in line.message]
    assert [w.split("'")[1] for w in warned] == ["qos_overrides./odom.publisher.durability",
                                                 "qos_overrides./tf.publisher.reliability"], warned
    assert "only reliability, history and depth" in warned[0]


def test_an_override_that_leaves_out_the_namespace_is_told_the_full_name(make_driver, rclpy_log):
    """A qos_overrides parameter names the topic in full, with the node's namespace; the
    key docs/driver.md gives, copied into a namespaced launch's parameters, was ignored
    with a warning that did not say why."""
    h = make_driver(namespace="robot1",
                    **{"qos_overrides./cmd_vel.subscription.reliability": "best_effort",
                       "qos_overrides./robot1/odom.publisher.reliability": "best_effort"})
    assert h.probe.get_publishers_info_by_topic("/robot1/odom")[0].qos_profile.reliability \
        == QoSReliabilityPolicy.BEST_EFFORT  # the full name is taken
    warned = [line.message for line in rclpy_log.of(h.node, LoggingSeverity.WARN)
              if "is ignored" in line.message]
    assert len(warned) == 1, warned
    assert warned[0].startswith("parameter 'qos_overrides./cmd_vel.subscription.reliability' "
                                "is ignored"), warned
    assert ("did you mean 'qos_overrides./robot1/cmd_vel.subscription.reliability'? (a topic "
            "is named in full, with the namespace)") in warned[0], warned


def test_no_qos_event_handlers_burden_the_executor(make_driver):
    """The driver's publishers and subscriptions come without rclpy's default QoS event
    handlers, each of which is an entity of every executor wake-up: the node has no more
    of them than a bare node (rclpy's own /rosout publisher...)."""
    h = make_driver()
    bare = rclpy.create_node("bare", context=h.probe.context)
    try:
        assert len(list(h.node.subscriptions)) >= 10 and len(list(h.node.publishers)) >= 15
        assert qos_event_handlers(h.node) == qos_event_handlers(bare)
    finally:
        bare.destroy_node()


def test_streams_without_subscribers_are_not_published(make_driver):
    """A robot-state or camera stream nobody subscribes to is not filled in or published;
    it starts with its first subscriber."""
    h = make_driver(camera_enabled=True)
    published = {"imu": 0, "compressed": 0}
    for key in published:
        publish = h.node._pub[key].publish

        def counting(msg, key=key, publish=publish):
            published[key] += 1
            publish(msg)
        h.node._pub[key].publish = counting
    odom = h.listen("odom", Odometry, "odom")
    assert h.spin_until(lambda: len(odom) >= 20, 5.0)
    assert published == {"imu": 0, "compressed": 0}
    imu = h.listen("imu", Imu, "imu/data", qos_profile_sensor_data)
    images = h.listen("images", CompressedImage, "camera/image_raw/compressed", qos_profile_sensor_data)
    assert h.spin_until(lambda: len(imu) >= 5 and len(images) >= 2, DISCOVERY_TIMEOUT)
    assert published["imu"] >= 5 and published["compressed"] >= 2


def test_a_late_subscriber_gets_odom_under_use_sim_time_with_no_clock(make_driver):
    """use_sim_time set and no /clock published: every stamp is 0. The check for new
    subscribers was keyed on the stamps, so it never ran again and a subscriber that came
    later got nothing; it runs on the host's clock under ROS time."""
    h = make_driver()
    imu = h.listen("imu", Imu, "imu/data", qos_profile_sensor_data)   # one stream is wanted
    assert h.spin_until(lambda: len(imu) >= 5, DISCOVERY_TIMEOUT)
    h.node.set_parameters([Parameter("use_sim_time", Parameter.Type.BOOL, True)])
    h.spin_for(0.6)                              # the driver sees ROS time (asked every 0.2 s)
    odom = h.listen("odom", Odometry, "odom")
    assert h.spin_until(lambda: len(odom) >= 5, DISCOVERY_TIMEOUT)
    assert all(m.header.stamp.sec == 0 and m.header.stamp.nanosec == 0 for m in odom[-3:])


def _odom_transforms(messages: List[TFMessage]) -> List[Any]:
    return [t for m in messages for t in m.transforms
            if (t.header.frame_id, t.child_frame_id) == ("odom", "base_footprint")]


def test_a_later_tf_listener_gets_odom_to_base_footprint_while_the_clock_stands_still(make_driver):
    """use_sim_time and a /clock that stands still: every state is stamped alike, and the
    driver sends odom -> base_footprint once per stamp (tf2 would warn TF_REPEATED_DATA at
    the repeats). A tf listener that came after it went out (RViz restarted, tf2_echo, Nav2)
    got none until the clock moved. Now a rise of /tf's subscriber count sends the next
    state's once more, at the stamp already sent."""
    from rosgraph_msgs.msg import Clock
    h = make_driver(use_sim_time=True)
    clock = h.publisher(Clock, "/clock")     # the driver's time source (best effort)
    still = Clock()
    still.clock.sec = 1000
    assert h.spin_until(lambda: h.node.get_clock().now().nanoseconds == 1000 * 10**9, DISCOVERY_TIMEOUT,
                        every=lambda: clock.publish(still)), "the driver's clock did not take /clock"
    first = h.listen("first", TFMessage, "/tf")
    assert h.spin_until(lambda: any(t.header.stamp.sec == 1000 for t in _odom_transforms(first)),
                        DISCOVERY_TIMEOUT), "the first tf listener got no odom -> base_footprint"
    second = h.listen("second", TFMessage, "/tf")
    assert h.spin_until(lambda: _odom_transforms(second), DISCOVERY_TIMEOUT), \
        "a tf listener that came later got no odom -> base_footprint while the clock stood still"
    late = _odom_transforms(second)[0]
    assert (late.header.stamp.sec, late.header.stamp.nanosec) == (1000, 0)
    assert h.node.get_clock().now().nanoseconds == 1000 * 10**9   # it stood still throughout


def test_the_drivers_own_timers_run_under_use_sim_time_with_no_clock(make_driver):
    """use_sim_time set and no /clock published: ROS time stands still, and the driver's
    timers, made on the node's clock, never fired: no /diagnostics, no periodic
    link_status, and a goal in a frame tf does not know was neither accepted nor rejected
    (the wait for tf never gave up). They run on the steady clock."""
    from cozmo_interfaces.action import GoToPose
    from cozmo_driver.ros.motion_actions import TF_WAIT_S
    h = make_driver(use_sim_time=True)
    assert h.node.get_clock().now().nanoseconds == 0   # ROS time: no /clock
    diags = h.listen("diag", DiagnosticArray, "/diagnostics")
    link = h.listen("link", LinkStatus, "link_status")
    assert h.spin_until(lambda: len(diags) >= 2 and len(link) >= 2, DISCOVERY_TIMEOUT + 2.0), \
        (len(diags), len(link))
    goal = GoToPose.Goal()
    goal.pose.header.frame_id = "map"
    goal.pose.pose.position.x, goal.pose.pose.orientation.w = 0.05, 1.0
    future = h.action_client(GoToPose, "go_to_pose").send_goal_async(goal)
    assert h.spin_until(future.done, TF_WAIT_S + 3.0), "the goal was neither accepted nor rejected"
    assert not future.result().accepted


def test_the_robot_streams_its_camera_only_while_a_camera_topic_has_a_subscriber(make_driver):
    """camera_on_demand (the default): no camera frame leaves the robot while nothing
    subscribes to a camera topic; the first subscriber starts the camera, and it stops
    again CAMERA_HOLD_NS after the last one went. The diagnostics say which."""
    from cozmo_driver.ros.driver_streams import CAMERA_HOLD_NS

    h = make_driver(camera_enabled=True)
    odom = h.listen("odom", Odometry, "odom")
    assert h.spin_until(lambda: len(odom) >= 20, 5.0)
    h.spin_for(0.5)
    idle = h.sim.counters()["camera"]
    h.spin_for(1.0)
    assert h.sim.counters()["camera"] == idle, "the camera streamed with no subscriber"
    status = h.listen("diag", DiagnosticArray, "/diagnostics")
    assert h.spin_until(lambda: any(_camera_said(m, "off until") for m in status), 5.0)
    images = []
    sub = h.probe.create_subscription(CompressedImage, "camera/image_raw/compressed", images.append,
                                      qos_profile_sensor_data)
    assert h.spin_until(lambda: len(images) >= 3, DISCOVERY_TIMEOUT), "the camera did not start"
    assert h.spin_until(lambda: any(_camera_said(m, "streaming") for m in status[-3:]), 5.0)
    h.probe.destroy_subscription(sub)
    h.spin_for(CAMERA_HOLD_NS / 1e9 + 1.5)  # the hold, the graph and the robot catch up
    stopped = h.sim.counters()["camera"]
    h.spin_for(1.0)
    assert h.sim.counters()["camera"] == stopped, "the camera went on after its last subscriber"
    # camera_on_demand off: the camera streams with no subscriber
    assert h.node.set_parameters([Parameter("camera_on_demand", value=False)])[0].successful
    assert h.spin_until(lambda: h.sim.counters()["camera"] > stopped + 5, 5.0)


class _Recorded:
    """A real publisher that also notes each publish in ``log`` (what the I/O thread did, in
    order); everything else goes to the publisher."""

    def __init__(self, publisher: Any, key: str, log: List[Any]) -> None:
        self._publisher, self._key, self._log = publisher, key, log

    def publish(self, msg: Any) -> None:
        self._log.append(self._key)
        self._publisher.publish(msg)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._publisher, name)


def test_camera_with_state_publishes_each_image_right_after_the_next_states_odom(make_driver):
    """camera_with_state: an image is not published when its last chunk comes but right after
    the odom of the next robot state (one wake-up of a consumer of both), with its own stamp;
    none is lost, and two images with no state between them do not wait."""
    from cozmo_driver.core import CameraFrame

    h = make_driver(camera_enabled=True)
    images = h.listen("compressed", CompressedImage, "camera/image_raw/compressed",
                      qos_profile_sensor_data)
    odom = h.listen("odom", Odometry, "odom", qos_profile_sensor_data)
    assert h.spin_until(lambda: len(images) >= 3 and odom, DISCOVERY_TIMEOUT)
    log: List[Any] = []
    streams, pub = h.node._streams, h.node._pub
    on_state, on_image = streams.on_state, streams.on_image

    def state(sample: Any) -> None:
        log.append("state")
        on_state(sample)

    def image(frame: Any) -> None:
        log.append(("image", frame.stamp_ns))
        on_image(frame)

    with h.node._core.lock:  # the I/O thread calls both under it
        for key in ("odom", "compressed"):
            pub[key] = _Recorded(pub[key], key, log)
        streams.on_state, streams.on_image = state, image
    # off (the default): each image at once, when it comes
    assert h.spin_until(lambda: log.count("compressed") >= 5, 5.0)
    with h.node._core.lock:
        before = [log[i - 1] for i, entry in enumerate(log) if entry == "compressed"]
        del log[:]
    assert before and all(entry[0] == "image" for entry in before), before
    assert h.node.set_parameters([Parameter("camera_with_state", value=True)])[0].successful
    n = len(images)
    assert h.spin_until(lambda: log.count("compressed") >= 10 and len(images) >= n + 10, 5.0)
    with h.node._core.lock:
        seen = list(log)
    came = [entry[1] for entry in seen if isinstance(entry, tuple)]
    published = [i for i, entry in enumerate(seen) if entry == "compressed"]
    # each right after a state's odom, and every image published but the one still waiting
    assert all(seen[i - 2:i] == ["state", "odom"] for i in published), seen
    assert len(came) - 1 <= len(published) <= len(came), seen
    # with the stamps they came with
    stamps = {Time.from_msg(m.header.stamp).nanoseconds for m in images[n:]}
    assert stamps and stamps <= set(came) | {s for s in stamps if s < came[0]}, (stamps, came)
    # two images with no state between them: the first is published when the second comes
    assert h.node.set_parameters([Parameter("camera_enabled", value=False)])[0].successful
    h.spin_for(0.5)  # the last image and the state after it

    def frame(stamp_ns: int) -> CameraFrame:
        made = CameraFrame(stamp_ns, *divmod(stamp_ns, 1_000_000_000), 1, 320, 240,
                           lambda *_: None, None)
        made._jpeg, made._tried = b"\xff\xd8 not decoded \xff\xd9", 3
        return made

    with h.node._core.lock:
        del log[:]
        streams.on_image(frame(10**18))
        assert log.count("compressed") == 0, log
        streams.on_image(frame(10**18 + 1))
        assert log.count("compressed") == 1, log
    assert h.spin_until(lambda: log.count("compressed") == 2, 2.0), log
    assert h.spin_until(lambda: {Time.from_msg(m.header.stamp).nanoseconds for m in images}
                        >= {10**18, 10**18 + 1}, 2.0)


def _camera_said(msg: Any, start: str) -> bool:
    return any(kv.key == "camera" and kv.value.startswith(start)
               for status in msg.status for kv in status.values)


# ----------------------------------------------------------------------------- log severities
# rclpy remembers the severity of the first line each source position logs, and raises
# ValueError ("Logger severity cannot be changed between calls") when that position logs
# at another severity: in the driver that was an exception out of the executor, which
# ended the process. These sequences used to do that; the driver's own rclpy logger is
# left as it is (rclpy_log reads what it writes).

def test_cmd_vel_while_the_robot_stops_answering_and_comes_back(make_driver, rclpy_log):
    """cmd_vel keeps coming while the robot stops answering (a restart): each is refused with
    a warning, and the robot that does not answer is reported with a warning (once both
    came from one line). The driver stays up and drives again once the robot is back."""
    first = SimServer(port=0, seed=5).start()
    port = first.address[1]
    h = make_driver(first)
    link = h.listen("link", LinkStatus, "link_status", LATCHED)
    pub = h.publisher(Twist, "cmd_vel")
    cmd = Twist()
    cmd.linear.x = 0.05

    def drive() -> None:
        pub.publish(cmd)
    assert h.spin_until(lambda: first.wheel_speeds() != (0.0, 0.0), 2.0, every=drive)
    first.stop()
    warned = lambda: rclpy_log.said(h.node, LoggingSeverity.WARN,  # noqa: E731
                                    "cmd_vel refused: not connected to the robot")
    told = lambda: rclpy_log.said(h.node, LoggingSeverity.WARN, "does not answer")  # noqa: E731
    # both kinds, in either order, and the executor goes on (an exception would end spin_until)
    assert h.spin_until(lambda: warned() and told(), 15.0, every=drive), \
        [(int(line.severity), line.message) for line in rclpy_log.of(h.node)]
    h.spin_for(2.5, every=drive)  # both again (the warnings are throttled to one per 2 s)
    second = SimServer(port=port, seed=6).start()
    try:
        h.sim = second
        assert h.spin_until(lambda: link[-1].state == LinkStatus.CONNECTED, 10.0, every=drive)
        assert h.spin_until(lambda: second.wheel_speeds() != (0.0, 0.0), 3.0, every=drive)
    finally:
        h.node.close()
        second.stop()


def test_the_start_up_log_says_connecting_before_the_robots_events(make_driver, rclpy_log):
    """Start-up holds the log lines said while the robot connects until its first state is
    out (driver_streams.hold_notes); the robot's and the cubes' events of that moment were
    logged at once, so the log read "head calibration started" and "cube1 appeared" before
    "connecting to the robot". Now they are held with them, in the order they came."""
    h = make_driver()
    # "head calibration started" even when the robot connected before the core was active (a
    # CI run with four workers lost it then): held for the activation (core.held_events)
    assert h.spin_until(lambda: rclpy_log.said(h.node, LoggingSeverity.INFO, "cube1 (")
                        and rclpy_log.said(h.node, LoggingSeverity.INFO, "head calibration started"), 5.0)
    lines = [line.message for line in rclpy_log.of(h.node)]
    first = {prefix: next(i for i, m in enumerate(lines) if m.startswith(prefix))
             for prefix in ("connecting to the robot", "connected to Cozmo", "robot event: ",
                            "object event: ")}
    assert first["connecting to the robot"] == 0, lines  # held lines and events in order


def test_the_events_that_come_before_the_activation_are_published_at_it_in_order(make_driver, rclpy_log,
                                                                                 monkeypatch):
    """The link opens before the core is active (activate opens it, then activates the core;
    start() does both half-way through configure), and a loaded machine let the robot connect,
    start calibrating and advertise its cubes in between: those events were neither published
    nor logged (a CI run with four workers lost "head calibration started"). Here the core's
    activation waits until they came, as a loaded machine's would: they are held, and at the
    activation published in the order they came, stamped when they came, and logged, after
    the line that says the link opened; the cubes' too."""
    h = make_driver(start=False)
    events = h.listen("events", RobotEvent, "events")
    object_events = h.listen("object_events", ObjectEvent, "object_events")
    core = h.node._core
    came = {"MotorCalibration": threading.Event(), "ObjectAvailable": threading.Event()}
    handle, activate = core.on_robot_event, core.activate
    activated_ns: List[int] = []

    def listener(event) -> None:  # the core's (configure registers it), on the I/O thread
        handle(event)
        name = getattr(getattr(event, "message", None), "NAME", None)
        if name in came:  # (the object interfaces, listening before the core, had it first)
            came[name].set()

    def late_activation() -> None:
        assert all(seen.wait(CONNECT_TIMEOUT) for seen in came.values()), "the robot did not connect"
        activated_ns.append(time.time_ns())
        activate()

    monkeypatch.setattr(core, "on_robot_event", listener)
    monkeypatch.setattr(core, "activate", late_activation)
    assert h.node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert h.spin_until(lambda: h.node._pub["events"].get_subscription_count() > 0
                        and h.node._objects._pub_events.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    assert h.node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert h.spin_until(lambda: len(events) >= 2 and object_events, 5.0), ([e.description for e in events],
                                                                           object_events)
    assert [e.type for e in events[:2]] == [EventType.HEAD_CALIBRATION_STARTED, EventType.LIFT_CALIBRATION_STARTED]
    assert Time.from_msg(events[0].header.stamp).nanoseconds < activated_ns[0]
    assert object_events[0].type == ObjectEvent.APPEARED
    assert Time.from_msg(object_events[0].header.stamp).nanoseconds < activated_ns[0]
    lines = [line.message for line in rclpy_log.of(h.node)]
    starts = ("connecting to the robot", "robot event: head calibration s", "robot event: lift calibration s",
              "object event: ")
    said = [i for i, m in enumerate(lines) if m.startswith(starts)]
    assert [lines[i].split(":")[0] for i in said[:4]] == ["connecting to the robot at 127.0.0.1", "robot event",
                                                          "robot event", "object event"], lines


def test_the_events_while_a_user_keeps_the_driver_inactive_are_logged_and_never_published(make_driver, rclpy_log):
    """Deactivated, the driver publishes no sample: the robot's events meanwhile are not published,
    neither then nor at the next activation (they would report as news what may no longer be
    true); each is logged as it comes, saying it was not published. The cubes' likewise."""
    h = make_driver()
    events = h.listen("events", RobotEvent, "events")
    object_events = h.listen("object_events", ObjectEvent, "object_events")
    assert h.spin_until(lambda: h.node._pub["events"].get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    assert h.spin_until(lambda: rclpy_log.said(h.node, LoggingSeverity.INFO, "object event: cube1 (")
                        and rclpy_log.said(h.node, LoggingSeverity.INFO, ") connected"), 10.0)
    assert h.node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    published = len(object_events)
    h.sim.poke()
    assert h.sim.tap_cube(1)
    not_published = "(not published: the driver is inactive)"
    assert h.spin_until(lambda: rclpy_log.said(h.node, LoggingSeverity.INFO, f"robot event: poked {not_published}")
                        and rclpy_log.said(h.node, LoggingSeverity.INFO, f"(intensity 79) {not_published}"), 3.0)
    assert h.node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    h.sim.press_button(0.1)
    assert h.spin_until(lambda: EventType.BUTTON_RELEASED in [e.type for e in events], 3.0)
    assert EventType.POKED not in [e.type for e in events], [e.description for e in events]
    assert ObjectEvent.TAPPED not in [e.type for e in object_events[published:]]


def test_closing_the_link_of_a_lost_robot_does_not_claim_the_motors_were_stopped(make_driver, rclpy_log):
    """Closed while the link tries again (connecting: most of the time after a loss), it said
    "the robot was connecting: nothing to stop", at INFO, of a robot that may still drive."""
    first = SimServer(port=0, seed=5).start()
    h = make_driver(first)
    link = h.listen("link", LinkStatus, "link_status", LATCHED)
    assert h.spin_until(lambda: link and link[-1].state == LinkStatus.CONNECTED, 10.0)
    first.stop()
    assert h.spin_until(lambda: link[-1].state == LinkStatus.LOST, 10.0)
    assert h.spin_until(lambda: h.node._core.link_state.value == "connecting", 10.0)
    assert link[-1].state == LinkStatus.LOST  # (link_status says LOST until the robot is back)
    h.node.close()
    lines = [line.message for line in rclpy_log.of(h.node)]
    assert rclpy_log.said(h.node, LoggingSeverity.WARN,
                          "link closed (the robot was lost: no stop could reach it"), lines
    assert not any("disconnected from the robot (motors stopped)" in m for m in lines), lines


def test_closing_the_link_of_a_robot_that_never_answered_says_there_was_nothing_to_stop(
        make_driver, rclpy_log):
    """A robot that never answered (switched off, or another program holds it) is "lost"
    between the driver's tries: closing then warned that no stop could reach it and that it
    might still move, of a robot the driver never drove."""
    absent = SimServer(port=0, seed=5).start()
    port = absent.address[1]
    absent.stop()
    # a long wait between tries, to close while the link is "lost"
    h = make_driver(robot_port=port, start=False, reconnect_min=5.0, reconnect_max=5.0)
    assert h.node.start()
    # said when the try timed out: then the link waits, "lost", for its next try
    assert h.spin_until(lambda: rclpy_log.said(h.node, LoggingSeverity.WARN, "does not answer"), 10.0)
    h.node.close()
    lines = [line.message for line in rclpy_log.of(h.node)]
    # activated with no robot: it does not say that commands are taken (they are refused)
    assert "activated: the robot is not connected yet: its state is published, and commands taken, " \
           "once it answers" in lines, lines
    assert not any(m.startswith("activated: robot state published") for m in lines), lines
    assert rclpy_log.said(h.node, LoggingSeverity.INFO,
                          "link closed (the robot never answered: nothing to stop)"), lines
    assert not any("no stop could reach it" in m for m in lines), lines


def test_an_io_thread_ended_by_a_system_exit_is_said_with_what_to_do_and_activation_connects_again(
        make_driver, rclpy_log):
    """A SystemExit in the robot client's I/O thread (a bug in code it runs) ends the thread and
    the link with it: the driver said only "disconnected from the robot at ...: disconnected (no
    stop sent: the I/O thread ended by SystemExit)", at INFO, and nothing of what to do. It says,
    as an error, that the driver no longer hears the robot nor reconnects by itself, that the
    robot may still move, and how to connect again: a deactivation and activation does."""
    h = make_driver()
    link = h.listen("link", LinkStatus, "link_status", LATCHED)
    assert h.spin_until(lambda: link and link[-1].state == LinkStatus.CONNECTED, CONNECT_TIMEOUT)
    robot, raised = h.node._robot, []

    def exiting(event):  # a bug in code the I/O thread runs: once
        if not raised:
            raised.append(event)
            raise SystemExit()

    robot.add_listener(exiting, messages=["RobotState"])
    assert h.spin_until(lambda: link[-1].state == LinkStatus.DISCONNECTED, 10.0), [m.state for m in link]
    lines = [line.message for line in rclpy_log.of(h.node)]
    name = h.node.get_fully_qualified_name()
    said = [m for m in lines if m.startswith("SystemExit ended the robot client's I/O thread")]
    assert len(said) == 1, lines
    assert rclpy_log.said(h.node, LoggingSeverity.ERROR, said[0])
    assert "(disconnected (no stop sent: the I/O thread ended by SystemExit))" in said[0], said
    assert "does not reconnect by itself" in said[0] and "If the robot still moves, pick it up" in said[0], said
    assert f"To connect again: ros2 lifecycle set {name} deactivate, then activate" in said[0], said
    robot.remove_listener(exiting)
    assert h.node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert h.node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert h.spin_until(lambda: link[-1].state == LinkStatus.CONNECTED, CONNECT_TIMEOUT), [m.state for m in link]


@pytest.mark.parametrize("reason, said", [
    ("disconnected", (logging.INFO, "disconnected from the robot (motors stopped)")),
    ("disconnected (unacknowledged)",
     (logging.WARNING, "disconnected from the robot, but it did not acknowledge the stop (no answer in time): "
                       "it may still be moving; if it does, pick it up or switch it off")),
    ("disconnected (no stop sent: the I/O thread had ended)",
     (logging.WARNING, "disconnected from the robot, but no stop was sent to it (the I/O thread had ended): "
                       "it may still be moving; if it does, pick it up or switch it off")),
], ids=["acknowledged", "unacknowledged", "not sent"])
def test_the_closing_line_says_what_became_of_the_stop(reason, said):
    """The robot client's reason for a ready link ended with no stop sent (its I/O thread
    ended, or did not answer) read "disconnected (unacknowledged)", and the driver said the
    robot "did not acknowledge the stop", of a stop that never left: it says none was sent."""
    from cozmo_driver.ros.driver_support import release_line

    for state in ("ready", "initializing"):
        assert release_line(state, reason, was_connected=True) == said


def test_closing_the_link_says_whether_the_robot_acknowledged_the_stop(make_driver, rclpy_log):
    """A stall of the Wi-Fi shorter than the loss timeout, then the driver stops: its stop and
    goodbye go unacknowledged, and the driver says so instead of "motors stopped"; its last
    link_status says DISCONNECTED (a dashboard must not keep showing CONNECTED)."""
    sims = [SimServer(port=0, seed=5).start(), SimServer(port=0, seed=6).start()]
    try:
        for sim, stall in zip(sims, (False, True)):
            before = len(rclpy_log.lines)  # both drivers have the same name
            h = make_driver(sim)
            link = h.listen("link", LinkStatus, "link_status", LATCHED)
            assert h.spin_until(lambda: link and link[-1].state == LinkStatus.CONNECTED, 10.0)
            if stall:
                sim.set_link_up(False)
                h.spin_for(0.3)
            h.node.trigger_deactivate()
            h.node.trigger_cleanup()
            assert h.spin_until(lambda: link[-1].state == LinkStatus.DISCONNECTED, 5.0), \
                [m.state for m in link]
            lines = [(line.severity, line.message) for line in rclpy_log.lines[before:]]
            acknowledged = (LoggingSeverity.INFO, "disconnected from the robot (motors stopped)")
            # a warning: the robot may be driving
            unacknowledged = (LoggingSeverity.WARN,
                              "disconnected from the robot, but it did not acknowledge the stop "
                              "(no answer in time): it may still be moving; if it does, pick it up "
                              "or switch it off")
            assert (acknowledged in lines, unacknowledged in lines) == (not stall, stall), lines
            h.node.close()
    finally:
        for sim in sims:
            sim.stop()


def test_a_late_robot_then_a_refused_and_an_out_of_range_head_angle(make_driver, rclpy_log):
    """The driver starts before the robot answers (an info line, throttled), the robot comes
    late, and then head/angle commands are refused (negative speed) and clamped (out of
    range), each with a warning: the driver stays up and the head moves to its limit."""
    absent = SimServer(port=0, seed=5).start()
    port = absent.address[1]
    absent.stop()
    h = make_driver(robot_port=port, start=False)  # nothing answers on that port yet
    assert h.node.start()
    # a warning that says what to check (throttled)
    assert h.spin_until(lambda: rclpy_log.said(h.node, LoggingSeverity.WARN, "does not answer"), 10.0)
    # a robot on 127.0.0.1: the simulator, not a robot off Wi-Fi
    assert rclpy_log.said(h.node, LoggingSeverity.WARN, "Is the simulator running on that port "
                          "(cozmo-sim --port N; or launch with use_sim:=true start_sim:=true)? It "
                          "answers one program at a time")
    late = SimServer(port=port, seed=6).start()
    try:
        h.sim = late
        assert h.spin_until(lambda: h.node.connected, CONNECT_TIMEOUT), "driver did not connect"
        head = h.publisher(HeadAngle, "head/angle")
        refused = h.node._refused
        head.publish(HeadAngle(angle=0.1, max_speed=-1.0))
        assert h.spin_until(lambda: h.node._refused == refused + 1, 2.0)
        head.publish(HeadAngle(angle=2.0, max_speed=0.0))
        assert h.spin_until(lambda: abs(late.head_angle() - geo.HEAD_MAX_ANGLE_RAD) < 1e-3, 5.0)
        assert rclpy_log.said(h.node, LoggingSeverity.WARN, "a speed must not be negative")
        assert h.spin_until(lambda: rclpy_log.said(h.node, LoggingSeverity.WARN, "head/angle.angle"),
                            2.0), [line.message for line in rclpy_log.of(h.node)]
        assert h.node.connected
    finally:
        h.node.close()
        late.stop()


def test_warnings_and_errors_of_the_client_layers_reach_rclpy_with_their_traceback(
        rclpy_context, rclpy_log):
    """_RosLogHandler (what the console script attaches to the "cozmo" logger): warnings at
    WARN, errors at ERROR, one after the other from the same handler, and a record's
    exc_info (logger.exception on the I/O thread) as its formatted traceback. The session's
    lines of a link that changed state are not forwarded: the driver says each in its own
    words ("[cozmo.protocol] [/cozmo_driver] no answer from the robot" came with every
    "the robot ... does not answer", unthrottled)."""
    node = rclpy.create_node("log_handler_probe", context=rclpy_context)
    handler = driver_node._RosLogHandler(node)
    logger = logging.getLogger("cozmo.test_log_handler")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        logger.info("not forwarded: below WARNING")
        logger.warning("peer silent for %.1f s", 1.5)
        try:
            {}["missing"]
        except KeyError:
            logger.exception("event handler failed on %r", "event")
        logger.error("no traceback here")
        logger.warning("a warning again")
        logger.warning("no answer from the robot", extra=LINK_CHANGE)  # the driver says it
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        node.destroy_node()
    lines = [(int(line.severity), line.message) for line in rclpy_log.of("log_handler_probe")]
    assert [severity for severity, _ in lines] == [LoggingSeverity.WARN, LoggingSeverity.ERROR,
                                                    LoggingSeverity.ERROR, LoggingSeverity.WARN]
    assert lines[0][1] == "[cozmo.test_log_handler] peer silent for 1.5 s"
    failed = lines[1][1]
    assert failed.startswith("[cozmo.test_log_handler] event handler failed on 'event'\n"), failed
    assert "Traceback (most recent call last):" in failed and "KeyError: 'missing'" in failed
    assert "test_driver_node.py" in failed
    assert lines[2][1] == "[cozmo.test_log_handler] no traceback here"
    assert lines[3][1] == "[cozmo.test_log_handler] a warning again"


def test_the_motor_calibrations_info_lines_reach_rclpy_and_other_info_lines_do_not(
        rclpy_context, rclpy_log):
    """docs/driver.md promises the log says when a command waits for the motor calibration;
    the handler took warnings only, and the "cozmo" logger's level dropped info lines
    before, so the line reached no one. The calibration's logger is forwarded at INFO."""
    node = rclpy.create_node("calibration_log_probe", context=rclpy_context)
    handler = driver_node._RosLogHandler(node)
    calibration, client = logging.getLogger("cozmo.client.calibration"), logging.getLogger("cozmo.transport")
    # (attached to each: under launch_testing's plugin, loggers made after launch.logging is
    # imported do not propagate; the driver's process does not import it)
    level = client.level
    client.setLevel(logging.INFO)
    for logger in (calibration, client):
        logger.addHandler(handler)
    try:
        assert calibration.isEnabledFor(logging.INFO)     # the handler saw to that
        calibration.info("%s held until ...", "SetLiftHeight")
        client.info("not forwarded: the driver says what matters itself")
    finally:
        for logger in (calibration, client):
            logger.removeHandler(handler)
        client.setLevel(level)
        node.destroy_node()
    lines = [(int(line.severity), line.message) for line in rclpy_log.of("calibration_log_probe")]
    assert lines == [(LoggingSeverity.INFO, "[cozmo.client.calibration] SetLiftHeight held until ...")]


def test_destroy_node_frees_the_native_node(rclpy_context):
    # rclpy's LifecycleNode keeps its state machine, which holds the rcl node (and so the
    # context and its DDS participant, with the participant's threads), until the Python
    # node is collected; the driver's main() freezes it out of the collector, and the
    # process used to exit with those threads running (now and then a SIGSEGV after a
    # clean stop). destroy_node must finalise the rcl node: it leaves the graph at once.
    from cozmo_driver.ros.driver_node import CozmoDriverNode
    probe = rclpy.create_node("destroy_probe", context=rclpy_context)
    try:
        driver = CozmoDriverNode(context=rclpy_context,
                                 parameter_overrides=[Parameter("autostart", value=False)])
        assert "cozmo_driver" in probe.get_node_names()
        driver.destroy_node()
        assert "cozmo_driver" not in probe.get_node_names()
    finally:
        probe.destroy_node()


@pytest.mark.parametrize("how", ["deactivated", "lost"])
def test_camera_with_state_drops_the_image_waiting_when_no_state_is_to_come(make_driver, how):
    """camera_with_state: an image waits for the next robot state. Deactivated (or the robot
    lost) while one waited, no state came to publish it, and the first state after the
    activation (or the reconnection) published it seconds later with its old stamp, as if
    new. It is dropped then: no stream goes on with data from before the pause."""
    h = make_driver(camera_enabled=True, camera_with_state=True, peer_timeout=1.0)
    images = h.listen("compressed", CompressedImage, "camera/image_raw/compressed",
                      qos_profile_sensor_data)
    assert h.spin_until(lambda: len(images) >= 3, DISCOVERY_TIMEOUT)
    streams, core = h.node._streams, h.node._core
    on_state, held = streams.on_state, []

    def state(sample: Any) -> None:  # no robot state reaches the publishers while held
        if not held:
            on_state(sample)
    with core.lock:  # the I/O thread calls it under the lock
        streams.on_state = state
        held.append(True)
    assert h.spin_until(lambda: streams._image_waiting is not None, 5.0), "an image waits"
    with core.lock:
        (waiting,) = [m for p, m in streams._image_waiting if p is h.node._pub["compressed"]]
    if isinstance(waiting, bytes):  # serialized once, published as such
        from rclpy.serialization import deserialize_message
        waiting = deserialize_message(waiting, CompressedImage)
    stale = Time.from_msg(waiting.header.stamp).nanoseconds
    if how == "deactivated":
        assert h.node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    else:  # the robot silent until the driver declares it lost (peer_timeout), then back
        h.sim.set_silent(True)
        assert h.spin_until(lambda: core.robot_lost, 10.0), "the robot was declared lost"
        h.sim.set_silent(False)
    with core.lock:
        held.clear()
    if how == "deactivated":
        assert h.node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    n = len(images)
    assert h.spin_until(lambda: len(images) >= n + 5, 20.0), len(images)
    stamps = [Time.from_msg(m.header.stamp).nanoseconds for m in images[n:]]
    assert stale not in stamps, "the image that waited was published after the pause"
    assert min(stamps) > stale, stamps
