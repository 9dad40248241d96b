"""cozmo_description_publisher in-process: robot_description, /tf_static, /tf from joint_states."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from cozmo_driver.description import (DescriptionError, UrdfModel, quaternion_from_axis_angle,
                                      robot_description)

pytestmark = pytest.mark.ros

XACRO = Path(__file__).resolve().parents[2] / "cozmo_description" / "urdf" / "cozmo.urdf.xacro"
TIMEOUT_S = 15.0


def spin_until(executor, condition, timeout_s: float = TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        executor.spin_once(timeout_sec=min(0.1, remaining))
    return True


@pytest.fixture
def ros(rclpy_context):
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor(context=rclpy_context)
    nodes = []

    def add(node):
        nodes.append(node)
        executor.add_node(node)
        return node

    yield rclpy_context, executor, add
    for node in nodes:
        executor.remove_node(node)
        node.destroy_node()
    executor.shutdown(timeout_sec=1.0)


def _publisher_node(context, urdf: str, namespace: str = "", **params):
    from rclpy.parameter import Parameter

    from cozmo_driver.ros.description_publisher import DescriptionPublisher

    overrides = [Parameter("robot_description", value=urdf)]
    overrides += [Parameter(name, value=value) for name, value in params.items()]
    return DescriptionPublisher(context=context, namespace=namespace,
                                parameter_overrides=overrides)


def _listener(context, name="listener"):
    from rclpy.node import Node
    return Node(name, context=context)


def _moving_links(message, stamp):
    """The transforms of ``message`` by child frame; checks they are the four moving
    links, each stamped ``stamp`` (sec, nanosec)."""
    transforms = {t.child_frame_id: t for t in message.transforms}
    assert set(transforms) == {"head_link", "lift_link", "lift_upper_arm_link", "lift_plate_link"}
    for t in transforms.values():
        assert (t.header.stamp.sec, t.header.stamp.nanosec) == stamp
    return transforms


def test_description_and_static_transforms_reach_a_late_subscriber(ros):
    from std_msgs.msg import String
    from tf2_msgs.msg import TFMessage

    from cozmo_driver.ros.description_publisher import QOS_LATCHED

    context, executor, add = ros
    urdf = robot_description(prefix="robot1/", path=XACRO)
    model = UrdfModel.from_xml(urdf)
    add(_publisher_node(context, urdf, namespace="robot1"))
    executor.spin_once(timeout_sec=0.2)

    listener = add(_listener(context))  # created after the publications
    descriptions, statics = [], []
    listener.create_subscription(String, "/robot1/robot_description", descriptions.append,
                                 QOS_LATCHED)
    listener.create_subscription(TFMessage, "/tf_static", statics.append, QOS_LATCHED)
    assert spin_until(executor, lambda: descriptions and statics)
    assert descriptions[0].data == urdf

    transforms = {t.child_frame_id: t for t in statics[0].transforms}
    assert set(transforms) == {j.child for j in model.fixed_joints()}
    assert all(child.startswith("robot1/") for child in transforms)
    camera = transforms["robot1/camera_optical_frame"]
    assert camera.header.frame_id == "robot1/camera_link"
    q = camera.transform.rotation
    expected = model.joints["camera_optical_joint"].origin.rotation
    assert abs(abs(q.x * expected[0] + q.y * expected[1] + q.z * expected[2]
                   + q.w * expected[3]) - 1.0) < 1e-9
    base = transforms["robot1/base_link"]
    assert base.header.frame_id == "robot1/base_footprint"
    assert base.transform.translation.z == pytest.approx(
        model.joints["base_joint"].origin.translation[2])


def test_joint_states_are_read_only_while_tf_has_subscribers(ros):
    """Nothing listens on /tf: joint_states are taken serialized and not read (no /tf work
    30 times a second for nobody); a tf listener that comes gets the transforms as soon as
    its subscription is matched (in the node's first 5 s the count is asked at every message
    while it is 0)."""
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    context, executor, add = ros
    node = add(_publisher_node(context, robot_description(path=XACRO)))
    read = []
    on_joints = node._on_joints
    node._on_joints = lambda msg: (read.append(msg), on_joints(msg))
    listener = add(_listener(context))
    publisher = listener.create_publisher(JointState, "joint_states", 10)
    state = JointState(name=["head_joint", "lift_joint"], position=[0.3, 0.2])
    assert spin_until(executor, lambda: publisher.get_subscription_count() > 0)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        publisher.publish(state)
        executor.spin_once(timeout_sec=0.03)
    assert read == [], "joint_states read with nobody on /tf"
    received = []
    listener.create_subscription(TFMessage, "/tf", received.append, QoSProfile(depth=100))

    def sent_and_received():
        publisher.publish(state)
        return bool(received)

    assert spin_until(executor, sent_and_received)
    assert read and {t.child_frame_id for t in received[-1].transforms} >= {"head_link", "lift_link"}


def test_joint_states_move_the_head_and_the_lift_with_its_mimics(ros):
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    context, executor, add = ros
    urdf = robot_description(path=XACRO)
    model = UrdfModel.from_xml(urdf)
    add(_publisher_node(context, urdf))
    listener = add(_listener(context))
    received = []
    listener.create_subscription(TFMessage, "/tf", received.append, QoSProfile(depth=100))
    publisher = listener.create_publisher(JointState, "joint_states", 10)

    state = JointState()
    state.header.stamp.sec, state.header.stamp.nanosec = 1234, 5678
    state.name = ["head_joint", "lift_joint", "not_a_joint"]
    state.position = [0.3, 0.2, 9.0]

    def sent_and_received():
        publisher.publish(state)
        return bool(received)

    assert spin_until(executor, sent_and_received)
    transforms = _moving_links(received[-1], (1234, 5678))

    head = transforms["head_link"]
    assert head.header.frame_id == "base_link"
    expected = model.joints["head_joint"].transform(0.3)
    assert (head.transform.translation.x, head.transform.translation.z) == pytest.approx(
        (expected.translation[0], expected.translation[2]))
    q = head.transform.rotation
    assert (q.x, q.y, q.z, q.w) == pytest.approx(quaternion_from_axis_angle((0, -1, 0), 0.3))

    plate = transforms["lift_plate_link"]
    assert plate.header.frame_id == "lift_link"
    q = plate.transform.rotation
    assert (q.x, q.y, q.z, q.w) == pytest.approx(quaternion_from_axis_angle((0, -1, 0), -0.2))
    upper = transforms["lift_upper_arm_link"].transform.rotation
    lift = transforms["lift_link"].transform.rotation
    assert (upper.x, upper.y, upper.z, upper.w) == pytest.approx((lift.x, lift.y, lift.z, lift.w))
    assert lift.y == pytest.approx(-math.sin(0.1))

    # a position that is not a number: its transforms are left out (tf listeners reject a
    # NaN rotation; they went out as they came), the other joint's still go
    state.header.stamp.sec = 1300
    state.position = [math.nan, 0.1, 0.0]
    count = len(received)
    assert spin_until(executor, lambda: sent_and_received() and len(received) > count
                      and received[-1].transforms[0].header.stamp.sec == 1300)
    names = {t.child_frame_id for t in received[-1].transforms}
    assert "head_link" not in names and "lift_link" in names
    assert all(math.isfinite(t.transform.rotation.w) for t in received[-1].transforms)


def test_joints_taken_directly_unsubscribe_and_publish_tf_only_for_listeners(ros):
    """In one process with the driver (cozmo_stack): take_joints_directly() ends the
    joint_states subscription (the driver's publisher then has no subscriber of this
    process), and the function it returns publishes /tf from the positions it is given,
    with their stamp, only while /tf has subscribers."""
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    context, executor, add = ros
    node = add(_publisher_node(context, robot_description(path=XACRO)))
    published = []
    publish_joints = node._publish_joints
    node._publish_joints = lambda *args: (published.append(args), publish_joints(*args))
    listener = add(_listener(context))
    joint_states = listener.create_publisher(JointState, "joint_states", 10)
    assert spin_until(executor, lambda: joint_states.get_subscription_count() == 1)

    take = node.take_joints_directly()
    assert spin_until(executor, lambda: joint_states.get_subscription_count() == 0), \
        "the description publisher still subscribes to joint_states"
    for _ in range(5):
        take(["head_joint", "lift_joint"], (0.3, 0.2), 1234, 5678)
        executor.spin_once(timeout_sec=0.02)
    assert published == [], "/tf published with nobody listening"

    received = []
    listener.create_subscription(TFMessage, "/tf", received.append, QoSProfile(depth=100))

    def given_and_received():
        take(["head_joint", "lift_joint"], (0.3, 0.2), 1234, 5678)
        return bool(received)

    assert spin_until(executor, given_and_received)
    transforms = _moving_links(received[-1], (1234, 5678))
    q = transforms["head_link"].transform.rotation
    assert (q.x, q.y, q.z, q.w) == pytest.approx(quaternion_from_axis_angle((0, -1, 0), 0.3))


def test_with_nobody_on_tf_the_count_is_asked_every_recheck_after_the_start(ros, monkeypatch):
    """/tf's subscriber count is asked at every joint positions only in the first _EAGER_S
    (while nobody listens), then at most every _COUNT_EVERY_S: it was asked 30 times a
    second for nobody, each call tens of microseconds. A listener that comes after the
    start gets the transforms all the same. The node's clock is stepped by hand."""
    from types import SimpleNamespace

    from rclpy.qos import QoSProfile
    from tf2_msgs.msg import TFMessage

    from cozmo_driver.ros import description_publisher as module

    context, executor, add = ros
    node = add(_publisher_node(context, robot_description(path=XACRO)))
    take = node.take_joints_directly()
    asked = []
    count = node._tf_pub.get_subscription_count
    node._tf_pub.get_subscription_count = lambda: (asked.append(now[0]), count())[1]
    now = [1000.0]
    monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: now[0]))

    def give(times):
        for _ in range(times):
            take(["head_joint", "lift_joint"], (0.3, 0.2), 1234, 5678)

    give(3)  # the start: at every one
    assert len(asked) == 3
    now[0] += module._EAGER_S + 0.01  # the start is over: at most once in _COUNT_EVERY_S
    give(10)
    assert len(asked) == 4, asked
    now[0] += module._COUNT_EVERY_S / 2
    give(10)
    assert len(asked) == 4, asked
    now[0] += module._COUNT_EVERY_S / 2
    give(1)
    assert len(asked) == 5, asked

    monkeypatch.undo()  # the real clock again, long past the node's start
    node._eager_until = time.monotonic() - 1.0
    received = []
    listener = add(_listener(context))
    listener.create_subscription(TFMessage, "/tf", received.append, QoSProfile(depth=100))

    def given_and_received():
        give(1)
        return bool(received)

    assert spin_until(executor, given_and_received), "a listener that came after the start got no /tf"
    _moving_links(received[-1], (1234, 5678))


def _giver(executor, node, listener, path):
    """What gives ``node`` joint positions, ``give(names, positions, sec, nanosec)``: on
    joint_states from ``listener``, each waited for until the node read it (joint_states is
    best effort), or from the driver directly (``path`` "direct")."""
    from sensor_msgs.msg import JointState

    if path == "direct":
        return node.take_joints_directly()
    read = []
    on_joints = node._on_joints
    node._on_joints = lambda msg: (read.append(msg), on_joints(msg))
    publisher = listener.create_publisher(JointState, "joint_states", 10)
    assert spin_until(executor, lambda: publisher.get_subscription_count() > 0)

    def give(names, positions, sec, nanosec):
        count = len(read)
        state = JointState(name=list(names), position=list(positions))
        state.header.stamp.sec, state.header.stamp.nanosec = sec, nanosec
        publisher.publish(state)
        assert spin_until(executor, lambda: len(read) > count), "joint_states not read"

    return give


def _stamps(received):
    return [(message.transforms[0].header.stamp.sec, message.transforms[0].header.stamp.nanosec)
            for message in received]


@pytest.mark.parametrize("path", ["joint_states", "direct"])
def test_a_joint_is_not_sent_again_with_the_stamp_it_last_went_out_with(ros, path):
    """Under ROS time the robot's ~33 Hz states repeat a stamp while /clock is slower (Gazebo's
    10 Hz), paused or not started (stamp 0, and now() is 0 too), and the moving joints went out
    on /tf again at that stamp, which every tf2 listener ignores with a TF_REPEATED_DATA
    warning, at every state. Each stamp goes out once, a stamp that goes back (the clock
    restarted) too; through the joint_states subscription and from the driver directly alike."""
    from rclpy.qos import QoSProfile
    from tf2_msgs.msg import TFMessage

    context, executor, add = ros
    node = add(_publisher_node(context, robot_description(path=XACRO), use_sim_time=True))
    assert node.get_clock().now().nanoseconds == 0, "the ROS clock has started: no /clock expected"
    listener = add(_listener(context))
    received = []
    listener.create_subscription(TFMessage, "/tf", received.append, QoSProfile(depth=100))
    assert spin_until(executor, lambda: node._tf_pub.get_subscription_count() > 0)

    give = _giver(executor, node, listener, path)
    for sec in (0, 0, 100, 100, 50):
        give(["head_joint", "lift_joint"], (0.3, 0.2), sec, 0)
    give(["head_joint", "lift_joint"], (0.3, 0.2), 200, 0)  # the last: all before it came (reliable)
    assert spin_until(executor, lambda: any(t.header.stamp.sec == 200
                                            for message in received for t in message.transforms))
    stamps = _stamps(received)
    assert stamps == [(0, 0), (100, 0), (50, 0), (200, 0)]
    for message, stamp in zip(received, stamps):
        _moving_links(message, stamp)


@pytest.mark.parametrize("path", ["joint_states", "direct"])
def test_a_new_tf_listener_gets_the_joints_at_the_stamp_already_sent(ros, path):
    """/clock not started (every stamp 0): a tf listener that comes after the joints went out
    at stamp 0 (RViz restarted, tf2_echo) got no head or lift transform until /clock moved, as
    none went out again at that stamp. Now a rise of /tf's subscriber count forgets the stamps
    sent: the next state's transforms go out once more, for both listeners (the first may see
    TF_REPEATED_DATA once), then not again at that stamp."""
    from rclpy.qos import QoSProfile
    from tf2_msgs.msg import TFMessage

    context, executor, add = ros
    node = add(_publisher_node(context, robot_description(path=XACRO), use_sim_time=True))
    assert node.get_clock().now().nanoseconds == 0, "the ROS clock has started: no /clock expected"
    listener = add(_listener(context))
    first, second = [], []
    listener.create_subscription(TFMessage, "/tf", first.append, QoSProfile(depth=100))
    assert spin_until(executor, lambda: node._tf_pub.get_subscription_count() == 1)
    give = _giver(executor, node, listener, path)
    give(["head_joint", "lift_joint"], (0.3, 0.2), 0, 0)
    assert spin_until(executor, lambda: first), "the first listener got no /tf"

    late = add(_listener(context, "late_listener"))
    late.create_subscription(TFMessage, "/tf", second.append, QoSProfile(depth=100))
    assert spin_until(executor, lambda: node._tf_pub.get_subscription_count() == 2)

    def given_and_received():  # the count is asked every 0.2 s while /tf has subscribers
        give(["head_joint", "lift_joint"], (0.1, 0.4), 0, 0)
        return bool(second)

    assert spin_until(executor, given_and_received), \
        "the new /tf listener got no transforms at the stamp already sent"
    lift = _moving_links(second[0], (0, 0))["lift_link"].transform.rotation
    assert lift.y == pytest.approx(-math.sin(0.2))  # the state given after it came
    give(["head_joint", "lift_joint"], (0.1, 0.4), 100, 0)  # the last: all before it came (reliable)
    assert spin_until(executor, lambda: (100, 0) in _stamps(first) and (100, 0) in _stamps(second))
    assert _stamps(first) == [(0, 0), (0, 0), (100, 0)]
    assert _stamps(second) == [(0, 0), (100, 0)]
    for message in first + second:
        _moving_links(message, _stamps([message])[0])


def test_a_held_back_nan_warning_is_said_with_the_next_joints_once_its_2_s_are_over(ros, rclpy_log,
                                                                                   monkeypatch):
    """A NaN joint, then an inf one a second later: the second, held back by the first's
    2 s, is said with the next joint positions once the 2 s are over, not only with a next
    bad position that may never come."""
    from types import SimpleNamespace

    from rclpy.logging import LoggingSeverity
    from rclpy.qos import QoSProfile
    from tf2_msgs.msg import TFMessage

    from cozmo_driver.ros import description_publisher

    context, executor, add = ros
    node = add(_publisher_node(context, robot_description(path=XACRO)))
    listener = add(_listener(context))
    received = []
    listener.create_subscription(TFMessage, "/tf", received.append, QoSProfile(depth=100))
    take = node.take_joints_directly()

    def given_and_received():
        take(["head_joint", "lift_joint"], (0.3, 0.2), 1234, 5678)
        return bool(received)

    assert spin_until(executor, given_and_received)

    def warned():
        return [line.message for line in rclpy_log.of(node, LoggingSeverity.WARN)
                if "is not a finite number" in line.message]

    # the node's clock, moved by the test: a sleep(1.0) between the two bad positions that a
    # loaded machine overran by a second let the first's 2 s end, and the second was said at once
    clock = [time.monotonic()]
    monkeypatch.setattr(description_publisher, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    take(["head_joint", "lift_joint"], (math.nan, 0.2), 1234, 5678)
    clock[0] += 1.0
    take(["head_joint", "lift_joint"], (0.3, math.inf), 1234, 5678)
    assert len(warned()) == 1 and "head_joint = nan" in warned()[0], warned()
    clock[0] += 0.9
    take(["head_joint", "lift_joint"], (0.3, 0.2), 1234, 5678)
    assert len(warned()) == 1, warned()     # not before the 2 s are over
    clock[0] += 0.2
    take(["head_joint", "lift_joint"], (0.3, 0.2), 1234, 5678)
    assert len(warned()) == 2 and "lift_joint = inf" in warned()[1], warned()


def test_frame_prefix_parameter_prefixes_every_frame(ros):
    from tf2_msgs.msg import TFMessage

    from cozmo_driver.ros.description_publisher import QOS_LATCHED

    context, executor, add = ros
    add(_publisher_node(context, robot_description(path=XACRO), frame_prefix="c2/"))
    listener = add(_listener(context))
    statics = []
    listener.create_subscription(TFMessage, "/tf_static", statics.append, QOS_LATCHED)
    assert spin_until(executor, lambda: statics)
    frames = {t.header.frame_id for t in statics[0].transforms} | \
        {t.child_frame_id for t in statics[0].transforms}
    assert frames and all(f.startswith("c2/") for f in frames)


def test_an_empty_description_is_refused(rclpy_context):
    from cozmo_driver.ros.description_publisher import DescriptionPublisher

    import rclpy

    probe = rclpy.create_node("description_probe", context=rclpy_context)
    try:
        with pytest.raises(DescriptionError, match="robot_description parameter is empty") as refused:
            DescriptionPublisher(context=rclpy_context)
        # refused in its constructor, it is gone from the graph (the exception still holds it)
        names = [name for name, _ in probe.get_node_names_and_namespaces()]
        assert "description_publisher" not in names and refused.value is not None, names
    finally:
        probe.destroy_node()


@pytest.mark.parametrize("given", [(), ("-p", "robot_description:=<robot name='x'><link name='a'/>"
                                             "<joint name='j' type='fixed'><parent link='a'/>"
                                             "<child link='b'/></joint></robot>")],
                         ids=["missing", "bad"])
def test_a_missing_or_bad_description_says_where_the_parameter_goes(given):
    """The hint was `-p robot_description:="$(xacro cozmo.urdf.xacro)"`, without saying that
    it goes after --ros-args, in cozmo_stack in the node's own section, or under which key of
    a parameter file, nor where cozmo.urdf.xacro is; a bad description got no hint at all."""
    import subprocess

    from cozmo_driver.description import xacro_path
    from processes import project_executable

    exe = project_executable("cozmo_description_publisher")
    result = subprocess.run([str(exe), "--ros-args", "-r", "__ns:=/r1", *given],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("cozmo_description_publisher: ")]
    assert len(said) == 1, result.stderr
    text = said[0]
    if given:
        assert "the robot_description parameter is not a URDF this node can use (joint j refers to " \
               "unknown link 'b')" in text, text
    else:
        assert "the robot_description parameter is empty" in text, text
    assert ("on the command line after --ros-args (cozmo_description_publisher --ros-args -p "
            f'robot_description:="$(xacro {xacro_path()})"') in text, text
    assert "in cozmo_stack in the node's own section: cozmo_stack --node description_publisher --ros-args " \
           "-p robot_description:=..." in text, text
    assert "in a --params-file, in the node's section (/r1/description_publisher: {ros__parameters: " \
           "{robot_description: '<robot ...>'}})" in text, text


def test_a_parameter_of_the_wrong_type_is_one_line_and_status_2():
    """-p frame_prefix:=7 (an integer): rclpy's InvalidParameterTypeException was a traceback
    and status 1; now one line naming the parameter, and 2, as the other nodes say it."""
    import subprocess

    from processes import project_executable

    exe = project_executable("cozmo_description_publisher")
    result = subprocess.run([str(exe), "--ros-args", "-p", "frame_prefix:=7"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("cozmo_description_publisher: ")]
    assert len(said) == 1 and "frame_prefix" in said[0], result.stderr
