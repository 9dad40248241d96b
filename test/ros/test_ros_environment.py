"""The ROS 2 environment the other tests stand on.

Checks that the run is isolated (loopback discovery, its own domain id), that
a message of cozmo_interfaces really travels over DDS between two nodes, and
that the tf2_msgs available here is the real type (same RIHS01 type hash), so
that /tf from this driver interoperates with RViz and tf2 on a real install.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from dependencies import require

from cozmo_driver.domain_reservation import keep_discovery_local

# The type hash of tf2_msgs/msg/TFMessage on ROS 2 Jazzy (and later).
TF_MESSAGE_TYPE_NAME = "tf2_msgs/msg/TFMessage"
TF_MESSAGE_TYPE_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"

# Upper bound for discovery plus delivery on loopback; typically < 0.5 s.
DELIVERY_TIMEOUT_S = 15.0


def spin_until(executor, condition, timeout_s: float) -> bool:
    """Spin ``executor`` until ``condition()`` is true or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        executor.spin_once(timeout_sec=min(0.1, remaining))
    return True


# ----------------------------------------------------------------- isolation


def test_discovery_stays_on_loopback():
    assert os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST"
    assert "ROS_STATIC_PEERS" not in os.environ
    if os.environ.get("ROS_DISTRO") == "humble":
        assert os.environ["ROS_LOCALHOST_ONLY"] == "1"   # the only switch Humble reads
    else:
        assert "ROS_LOCALHOST_ONLY" not in os.environ


@pytest.mark.parametrize("distro, localhost_only", [("humble", "1"), ("jazzy", None), (None, None)])
def test_local_discovery_on_humble_sets_the_switch_humble_reads(distro, localhost_only):
    """Humble reads ROS_LOCALHOST_ONLY only (ROS_AUTOMATIC_DISCOVERY_RANGE is Iron's): tests,
    benchmarks and the demo removed it there and discovered over the LAN. Later distros
    warn that it is deprecated, so it is removed there (the wheels have no ROS_DISTRO)."""
    env = {"ROS_STATIC_PEERS": "10.0.0.1", "ROS_LOCALHOST_ONLY": "0"}
    if distro:
        env["ROS_DISTRO"] = distro
    keep_discovery_local(env)
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST" and "ROS_STATIC_PEERS" not in env
    assert env.get("ROS_LOCALHOST_ONLY") == localhost_only
    # unless forced (the demo, the doc images), what the user chose stays
    chosen = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "ROS_DISTRO": distro or ""}
    keep_discovery_local(chosen, force=False)
    assert chosen["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET" and "ROS_LOCALHOST_ONLY" not in chosen



@pytest.mark.parametrize("distro", ["humble", "jazzy"])
def test_a_localhost_switch_the_user_set_is_kept_unless_forced(distro):
    """ROS_LOCALHOST_ONLY=0 exported by the user (Humble's way of choosing the LAN) was not
    the user's choice for the demo and the doc images: on Humble it became 1, on later
    distros it was removed, and the range set to LOCALHOST. Now it is kept, as a range is."""
    chosen = {"ROS_LOCALHOST_ONLY": "0", "ROS_DISTRO": distro, "ROS_STATIC_PEERS": "10.0.0.1"}
    keep_discovery_local(chosen, force=False)
    assert chosen == {"ROS_LOCALHOST_ONLY": "0", "ROS_DISTRO": distro, "ROS_STATIC_PEERS": "10.0.0.1"}


def test_domain_id_is_this_runs_own(ros_domain_id, ros_domain_reservation):
    assert os.environ["ROS_DOMAIN_ID"] == str(ros_domain_id)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # a worker of a parallel run: it holds an id of its own, whether the controller
        # reserved one or the caller set one (the held port below: no other process can
        # hold the same)
        assert ros_domain_reservation.reserved_here
    if not ros_domain_reservation.reserved_here:
        pytest.skip("ROS_DOMAIN_ID was chosen by the caller; nothing reserved here")
    assert 1 <= ros_domain_id <= 100
    # The reservation is held: nobody else can take the same id meanwhile.
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as probe:
            with pytest.raises(OSError):
                probe.bind(("127.0.0.1", ros_domain_reservation.port))


@pytest.mark.ros
def test_message_fields_are_type_checked_here_and_in_started_processes():
    # An int in a float64 field aborts a C-asserts build and arrives as garbage from a
    # Release one: with ROS_PYTHON_CHECK_FIELDS=1 it is an error at the assignment.
    require("geometry_msgs.msg", "an exec_depend of package.xml")
    import subprocess
    import sys

    from geometry_msgs.msg import Vector3

    assert os.environ.get("ROS_PYTHON_CHECK_FIELDS") == "1"
    with pytest.raises(AssertionError, match="must be of type 'float'"):
        Vector3().x = 3
    Vector3().x = 3.0
    child = subprocess.run(
        [sys.executable, "-c", "from geometry_msgs.msg import Vector3\n"
         "try:\n    Vector3().x = 3\nexcept AssertionError:\n    print('checked')"],
        capture_output=True, text=True, timeout=60)
    assert child.stdout.strip() == "checked", child.stderr


@pytest.mark.ros
def test_context_uses_the_reserved_domain(rclpy_context, ros_domain_id):
    assert rclpy_context.ok()
    assert rclpy_context.get_domain_id() == ros_domain_id


# ---------------------------------------------------------- DDS round trip


@pytest.mark.ros
def test_robot_status_round_trip_over_dds(rclpy_context):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from cozmo_interfaces.msg import RobotStatus

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    talker = Node("env_check_talker", context=rclpy_context)
    listener = Node("env_check_listener", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    try:
        received: list[RobotStatus] = []
        listener.create_subscription(RobotStatus, "robot_status", received.append, qos)
        publisher = talker.create_publisher(RobotStatus, "robot_status", qos)
        executor.add_node(talker)
        executor.add_node(listener)

        assert spin_until(executor, lambda: publisher.get_subscription_count() > 0, DELIVERY_TIMEOUT_S), (
            "the subscription was never matched: DDS discovery on loopback failed"
        )

        sent = RobotStatus()
        sent.header.stamp = talker.get_clock().now().to_msg()
        sent.header.frame_id = "base_link"
        sent.is_picked_up = True
        sent.cliff_detected = True
        sent.status_flags = RobotStatus.STATUS_IS_PICKED_UP | RobotStatus.STATUS_CLIFF_DETECTED
        sent.cliff_data_raw = [101, 202, 303, 404]
        sent.backpack_touch_sensor_raw = 4242
        sent.curr_path_segment = -1
        sent.battery_voltage = 3.875
        publisher.publish(sent)

        assert spin_until(executor, lambda: received, DELIVERY_TIMEOUT_S), "RobotStatus not delivered"
        got = received[0]
        assert got.header.frame_id == "base_link"
        assert got.header.stamp == sent.header.stamp
        assert got.is_picked_up and got.cliff_detected and not got.is_moving
        assert got.status_flags == 0x4008
        assert list(got.cliff_data_raw) == [101, 202, 303, 404]
        assert got.backpack_touch_sensor_raw == 4242
        assert got.curr_path_segment == -1
        assert got.battery_voltage == pytest.approx(3.875)
    finally:
        executor.shutdown()
        talker.destroy_node()
        listener.destroy_node()


# ----------------------------------------------------------------- tf2_msgs


def _type_description_file() -> Path | None:
    """The generated JSON type description of TFMessage, if this ROS has one."""
    import tf2_msgs

    # <prefix>/lib/pythonX.Y/site-packages/tf2_msgs/__init__.py -> <prefix>
    prefixes = [Path(tf2_msgs.__file__).resolve().parents[4]]
    prefixes += [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in prefixes:
        candidate = prefix / "share" / "tf2_msgs" / "msg" / "TFMessage.json"
        if candidate.is_file():
            return candidate
    return None


@pytest.mark.ros
def test_tf2_msgs_imports():
    from geometry_msgs.msg import TransformStamped
    from tf2_msgs.msg import TFMessage

    message = TFMessage(transforms=[TransformStamped()])
    assert len(message.transforms) == 1


@pytest.mark.ros
def test_tf2_msgs_type_description_hash():
    description = _type_description_file()
    if description is None:
        pytest.skip("no generated type description (ROS 2 before Jazzy has no RIHS01 type hashes)")
    hashes = {
        entry["type_name"]: entry["hash_string"]
        for entry in json.loads(description.read_text())["type_hashes"]
    }
    assert hashes[TF_MESSAGE_TYPE_NAME] == TF_MESSAGE_TYPE_HASH


@pytest.mark.ros
def test_tf2_msgs_type_hash_on_the_graph(rclpy_context):
    """The hash the type support announces to DDS peers, read back from the graph."""
    from rclpy.node import Node

    from tf2_msgs.msg import TFMessage

    node = Node("env_check_tf_hash", context=rclpy_context)
    try:
        node.create_publisher(TFMessage, "tf", 10)
        infos = node.get_publishers_info_by_topic("/tf")
        assert len(infos) == 1
        info = infos[0]
        if not hasattr(info, "topic_type_hash"):
            pytest.skip("this rclpy exposes no type hashes (ROS 2 before Jazzy)")
        assert info.topic_type == TF_MESSAGE_TYPE_NAME
        assert str(info.topic_type_hash) == TF_MESSAGE_TYPE_HASH
    finally:
        node.destroy_node()
