"""tf2_ros against the stack that ``ros2 launch cozmo_driver cozmo.launch.py use_sim:=true
namespace:=tf2_robot`` brings up (its frames then carry the prefix ``tf2_robot/``): a
``tf2_ros.Buffer`` with a ``tf2_ros.TransformListener``, in a node of this process (its own
rclpy context and executor, spun in bounded loops), as RViz, Nav2 or a user's node sees the
robot.

* The whole tree resolves, with the parents of the robot model: odom -> base_footprint ->
  base_link -> head_link -> camera_link -> camera_optical_frame, the lift's links and
  imu_link, every one prefixed with the namespace's frame prefix; the optical frame looks
  along the camera's x axis, the lift's plate sits at the height its joint state gives.
* A head move (the set_head_angle action, then the head/angle topic): the rotation of
  base_link -> head_link seen through tf is the head angle of joint_states at the same
  stamp, and the commanded angle.
* A drive (the drive_straight action): odom -> base_footprint is the odom topic's pose at
  the same stamp, and moved by the distance driven along the start heading.

Skipped in the wheel venv (no ros2 command, no tf2_ros, no colcon install) with the reason
printed; in the kit environment (``./dev test-kit``) a missing tool is a failure.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import pytest

from processes import free_udp_port
from ros_tools import (RosLaunch, arguments, need_installed_package, need_module, need_ros2,
                       problems_in_log, spin_until)

need_ros2()
need_installed_package()
need_module("tf2_ros", "tf2_ros_py: a ROS 2 tool, not on PyPI")

import rclpy  # noqa: E402
import tf2_ros  # noqa: E402
import yaml  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.time import Time  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from cozmo_driver import robot_geometry as geometry  # noqa: E402
from cozmo_interfaces.action import DriveStraight, SetHeadAngle  # noqa: E402
from cozmo_interfaces.msg import HeadAngle  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: The namespace of the stack (and, with the bring-up's frame_prefix auto, of its frames).
NAMESPACE = "tf2_robot"
FRAME_PREFIX = f"{NAMESPACE}/" if NAMESPACE else ""
TOPIC_PREFIX = f"/{NAMESPACE}" if NAMESPACE else ""
START_TIMEOUT_S = 40.0

#: Each frame of the robot and its parent in the tree (docs/bringup.md: The robot model).
PARENTS = {
    "base_footprint": "odom",
    "base_link": "base_footprint",
    "left_tread_link": "base_link",
    "right_tread_link": "base_link",
    "imu_link": "base_link",
    "head_link": "base_link",
    "camera_link": "head_link",
    "camera_optical_frame": "camera_link",
    "lift_link": "base_link",
    "lift_plate_link": "lift_link",
    "lift_upper_arm_link": "base_link",
}

Vector = Tuple[float, float, float]


def frame(name: str) -> str:
    return FRAME_PREFIX + name


def topic(name: str) -> str:
    return f"{TOPIC_PREFIX}/{name}"


def rotate(q, v: Vector) -> Vector:
    """Vector ``v`` rotated by the unit quaternion ``q`` (x, y, z, w fields)."""
    x, y, z, w = q.x, q.y, q.z, q.w
    # v' = v + 2w (u x v) + 2 u x (u x v), u = (x, y, z)
    cx, cy, cz = y * v[2] - z * v[1], z * v[0] - x * v[2], x * v[1] - y * v[0]
    ccx, ccy, ccz = y * cz - z * cy, z * cx - x * cz, x * cy - y * cx
    return (v[0] + 2 * (w * cx + ccx), v[1] + 2 * (w * cy + ccy), v[2] + 2 * (w * cz + ccz))


def elevation(v: Vector) -> float:
    """Angle of ``v`` above the x-y plane (rad), positive up."""
    return math.atan2(v[2], math.hypot(v[0], v[1]))


def yaw_of(q) -> float:
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def stamp_ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class TfProbe:
    """A node of its own context: a tf2_ros Buffer and TransformListener, odom and
    joint_states, action clients and the head/angle publisher, spun in bounded loops."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("tf2_ros_probe", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.buffer = tf2_ros.Buffer(node=self.node)
        self.listener = tf2_ros.TransformListener(self.buffer, self.node, spin_thread=False)
        self.odom: List[Odometry] = []
        self.joints: List[JointState] = []
        self.node.create_subscription(Odometry, topic("odom"), self.odom.append, 50)
        self.node.create_subscription(JointState, topic("joint_states"), self.joints.append, 50)
        self.head_angle = self.node.create_publisher(HeadAngle, topic("head/angle"), 1)

    def spin_until(self, predicate, timeout: float) -> bool:
        return spin_until(self.executor, predicate, timeout)

    def spin_for(self, seconds: float) -> None:
        self.spin_until(lambda: False, seconds)

    def lookup(self, target: str, source: str, at: Optional[Time] = None):
        """``source``'s pose in ``target`` (latest, or at stamp ``at``), waiting up to 5 s."""
        when = at if at is not None else Time()
        assert self.spin_until(lambda: self.buffer.can_transform(target, source, when), 5.0), (
            f"tf2_ros cannot transform {source} into {target} at {when}: known frames\n"
            f"{self.buffer.all_frames_as_yaml()}")
        return self.buffer.lookup_transform(target, source, when).transform

    def head_state(self, after_ns: int = 0) -> Optional[JointState]:
        """The latest joint_states stamped after ``after_ns`` that has the head."""
        for message in reversed(self.joints):
            if stamp_ns(message.header.stamp) <= after_ns:
                return None
            if "head_joint" in message.name:
                return message
        return None

    def run_action(self, action_type, name: str, goal, timeout: float):
        client = ActionClient(self.node, action_type, topic(name))
        try:
            assert self.spin_until(client.server_is_ready, 15.0), f"no {name} action server"
            sent = client.send_goal_async(goal)
            assert self.spin_until(sent.done, 10.0), f"{name}: goal not answered"
            handle = sent.result()
            assert handle.accepted, f"{name}: goal rejected"
            result = handle.get_result_async()
            assert self.spin_until(result.done, timeout), f"{name}: no result in {timeout} s"
            return result.result().result
        finally:
            client.destroy()

    def close(self) -> None:
        self.listener.unregister()
        self.executor.shutdown()
        self.node.destroy_node()


@pytest.fixture(scope="module")
def stack():
    args = arguments(use_sim="true", sim_port=free_udp_port())
    if NAMESPACE:
        args = [*args, *arguments(namespace=NAMESPACE)]
    with RosLaunch(*args) as launch:
        yield launch
        assert launch.running(), f"the stack ended during the tests; {launch.describe()}"
        assert problems_in_log(launch.output) == [], launch.describe()


@pytest.fixture
def probe(rclpy_context, stack):
    watcher = TfProbe(rclpy_context)
    everything = [frame(name) for name in PARENTS]
    def stamps_on_tf() -> bool:
        # the listener may have been matched after odom and joint_states: their first messages
        # can be older than anything in its buffer, and a lookup at their stamps would never
        # succeed (a CI run failed so); the tests look up at the stamps of the latest ones
        joints = Time.from_msg(watcher.head_state().header.stamp)
        odom = Time.from_msg(watcher.odom[-1].header.stamp)
        return watcher.buffer.can_transform(frame("odom"), frame("base_footprint"), odom) and all(
            watcher.buffer.can_transform(frame("base_footprint"), frame(name), joints)
            for name in ("head_link", "lift_plate_link"))
    assert watcher.spin_until(
        lambda: watcher.odom and watcher.head_state() is not None and all(
            watcher.buffer.can_transform(frame("odom"), name, Time()) for name in everything)
        and stamps_on_tf(),
        START_TIMEOUT_S), (
        f"odom: {len(watcher.odom)}, joint_states: {len(watcher.joints)}; tf2_ros knows\n"
        f"{watcher.buffer.all_frames_as_yaml()}\n{stack.describe()}")
    yield watcher
    watcher.close()


def joint_position(message: JointState, name: str) -> float:
    return message.position[list(message.name).index(name)]


def test_the_whole_tree_resolves_with_the_models_parents(probe):
    tree: Dict[str, dict] = yaml.safe_load(probe.buffer.all_frames_as_yaml()) or {}
    for child, parent in PARENTS.items():
        assert frame(child) in tree, f"{frame(child)} is not on tf: {sorted(tree)}"
        assert tree[frame(child)]["parent"] == frame(parent), (frame(child), tree[frame(child)])
    # nothing the robot publishes lies outside its prefix (two robots must not clash)
    assert all(name.startswith(FRAME_PREFIX) for name in tree), sorted(tree)

    # base_footprint is on the ground below base_link, whose axes it shares
    base = probe.lookup(frame("base_footprint"), frame("base_link"))
    assert base.translation.z > 0.005
    assert rotate(base.rotation, (1.0, 0.0, 0.0)) == pytest.approx((1.0, 0.0, 0.0), abs=1e-9)
    # the optical frame looks (z) along the camera's x axis, x right (-y), y down (-z)
    optical = probe.lookup(frame("camera_link"), frame("camera_optical_frame")).rotation
    assert rotate(optical, (0.0, 0.0, 1.0)) == pytest.approx((1.0, 0.0, 0.0), abs=1e-9)
    assert rotate(optical, (1.0, 0.0, 0.0)) == pytest.approx((0.0, -1.0, 0.0), abs=1e-9)
    assert rotate(optical, (0.0, 1.0, 0.0)) == pytest.approx((0.0, 0.0, -1.0), abs=1e-9)
    # the lift's plate is at the height of the lift joint's angle, and level
    state = probe.head_state()
    stamp = Time.from_msg(state.header.stamp)
    plate = probe.lookup(frame("base_footprint"), frame("lift_plate_link"), stamp)
    lift = joint_position(state, "lift_joint")
    assert plate.translation.z == pytest.approx(geometry.lift_angle_to_height(lift), abs=1e-4)
    assert geometry.LIFT_MIN_HEIGHT_M - 1e-3 <= plate.translation.z \
        <= geometry.LIFT_MAX_HEIGHT_M + 1e-3
    assert rotate(plate.rotation, (1.0, 0.0, 0.0)) == pytest.approx((1.0, 0.0, 0.0), abs=1e-6)
    # the whole chain: odom -> camera_optical_frame
    probe.lookup(frame("odom"), frame("camera_optical_frame"))


def head_seen_through_tf(probe: TfProbe, state: JointState) -> Tuple[float, float]:
    """The head's angle from base_link -> head_link, and the camera's (optical z) elevation in
    base_link, at the stamp of joint_states message ``state``."""
    stamp = Time.from_msg(state.header.stamp)
    head = probe.lookup(frame("base_link"), frame("head_link"), stamp).rotation
    # a pure tilt about the pivot's y axis: the head's y axis stays base_link's
    assert rotate(head, (0.0, 1.0, 0.0)) == pytest.approx((0.0, 1.0, 0.0), abs=1e-6)
    camera = probe.lookup(frame("base_link"), frame("camera_optical_frame"), stamp).rotation
    return elevation(rotate(head, (1.0, 0.0, 0.0))), elevation(rotate(camera, (0.0, 0.0, 1.0)))


def settled_head(probe: TfProbe, after_ns: int, target: float) -> JointState:
    """A joint_states message stamped after ``after_ns`` with the head at ``target`` and tf
    available at its stamp."""
    def ready() -> bool:
        state = probe.head_state(after_ns)
        return state is not None and abs(joint_position(state, "head_joint") - target) < 0.035 \
            and probe.buffer.can_transform(frame("base_link"), frame("head_link"),
                                           Time.from_msg(state.header.stamp))
    last = probe.head_state()
    assert probe.spin_until(ready, 10.0), (
        f"no joint_states with the head at {target:.3f} rad and its tf: last "
        f"{joint_position(last, 'head_joint') if last else None}")
    return probe.head_state(after_ns)


def test_tf_follows_a_head_move(probe):
    before = probe.head_state()
    start = joint_position(before, "head_joint")
    head, camera = head_seen_through_tf(probe, before)
    assert head == pytest.approx(start, abs=1e-3)
    assert camera == pytest.approx(start, abs=1e-3)

    # the set_head_angle action: 0.5 rad up, or down to -0.2 if it is already up there
    target = 0.5 if start < 0.2 else -0.2
    assert abs(target - start) > 0.3
    result = probe.run_action(SetHeadAngle, "set_head_angle", SetHeadAngle.Goal(angle=target),
                              10.0)
    assert result.success, result.message
    assert result.final_angle == pytest.approx(target, abs=0.035)
    ended = stamp_ns(probe.node.get_clock().now().to_msg())
    state = settled_head(probe, ended, target)
    head, camera = head_seen_through_tf(probe, state)
    reported = joint_position(state, "head_joint")
    assert head == pytest.approx(reported, abs=1e-3)
    assert head == pytest.approx(target, abs=0.035)
    assert camera == pytest.approx(head, abs=1e-3)

    # the head/angle topic: back to level
    sent = stamp_ns(probe.node.get_clock().now().to_msg())
    probe.head_angle.publish(HeadAngle(angle=0.0, max_speed=0.0))
    state = settled_head(probe, sent, 0.0)
    probe.spin_for(0.5)  # the move's end: no overshoot or drift after it
    state = probe.head_state()
    head, camera = head_seen_through_tf(probe, state)
    assert head == pytest.approx(joint_position(state, "head_joint"), abs=1e-3)
    assert head == pytest.approx(0.0, abs=0.035)


def pose_of(odom: Odometry):
    return odom.pose.pose


def test_tf_follows_a_drive(probe):
    def stopped() -> bool:
        last = probe.odom[-1]
        return abs(last.twist.twist.linear.x) < 1e-4 and abs(last.twist.twist.angular.z) < 1e-4
    assert probe.spin_until(stopped, 5.0), "the robot does not stand still before the drive"
    start_odom = probe.odom[-1]
    start = probe.lookup(frame("odom"), frame("base_footprint"),
                         Time.from_msg(start_odom.header.stamp))
    assert start.translation.x == pytest.approx(pose_of(start_odom).position.x, abs=1e-6)
    assert start.translation.y == pytest.approx(pose_of(start_odom).position.y, abs=1e-6)
    heading = yaw_of(start.rotation)

    distance = 0.10
    result = probe.run_action(DriveStraight, "drive_straight",
                              DriveStraight.Goal(distance=distance, speed=0.1), 15.0)
    assert result.success, result.message
    assert result.distance_traveled == pytest.approx(distance, abs=0.01)

    ended = stamp_ns(probe.node.get_clock().now().to_msg())

    def after_and_still() -> bool:
        return stamp_ns(probe.odom[-1].header.stamp) > ended and stopped() and \
            probe.buffer.can_transform(frame("odom"), frame("base_footprint"),
                                       Time.from_msg(probe.odom[-1].header.stamp))
    assert probe.spin_until(after_and_still, 5.0), "no odom of the stopped robot after the drive"
    end_odom = probe.odom[-1]
    end = probe.lookup(frame("odom"), frame("base_footprint"),
                       Time.from_msg(end_odom.header.stamp))

    # tf at odom's stamp is odom's pose
    pose = pose_of(end_odom)
    assert (end.translation.x, end.translation.y, end.translation.z) == pytest.approx(
        (pose.position.x, pose.position.y, pose.position.z), abs=1e-6)
    assert yaw_of(end.rotation) == pytest.approx(yaw_of(pose.orientation), abs=1e-6)
    # and it moved by the distance driven, along the start heading
    dx = end.translation.x - start.translation.x
    dy = end.translation.y - start.translation.y
    along = dx * math.cos(heading) + dy * math.sin(heading)
    across = -dx * math.sin(heading) + dy * math.cos(heading)
    assert along == pytest.approx(distance, abs=0.01)
    assert along == pytest.approx(result.distance_traveled, abs=0.005)
    assert abs(across) < 0.005
    assert abs(math.remainder(yaw_of(end.rotation) - heading, math.tau)) < 0.02
    # the latest transform is the robot standing there
    latest = probe.lookup(frame("odom"), frame("base_footprint"))
    assert (latest.translation.x, latest.translation.y) == pytest.approx(
        (end.translation.x, end.translation.y), abs=1e-3)
    # the camera moved with the base
    camera = probe.lookup(frame("odom"), frame("camera_link"),
                          Time.from_msg(end_odom.header.stamp))
    camera_before = probe.lookup(frame("odom"), frame("camera_link"),
                                 Time.from_msg(start_odom.header.stamp))
    assert math.hypot(camera.translation.x - camera_before.translation.x,
                      camera.translation.y - camera_before.translation.y) == pytest.approx(
        math.hypot(dx, dy), abs=2e-3)
