"""launch/cozmo.launch.py under launch_testing: the stack against the simulator.

Runs wherever launch_testing is installed (a real ROS 2 install:
`colcon test`, or `./dev test` with a distro sourced). It is not on PyPI, so
in the wheel venv this module is skipped with the reason printed; there
test_bringup.py runs the same plan through cozmo_bringup.
"""

from __future__ import annotations

import socket
import time
import unittest
from pathlib import Path

import pytest

launch_testing = pytest.importorskip(
    "launch_testing", reason="launch_testing is not installed here (not on PyPI): the launch "
    "file runs on a real ROS 2 install; test_bringup.py runs the same plan with cozmo_bringup")
pytest.importorskip("launch_ros", reason="launch_ros is not installed here")

import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from launch import LaunchDescription  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parent.parent / "launch" / "cozmo.launch.py"
NAMESPACE = "launch_test"
TIMEOUT_S = 40.0


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.launch_test
def generate_test_description():
    arguments = {"use_sim": "true", "sim_port": str(_free_udp_port()), "namespace": NAMESPACE}
    return LaunchDescription([
        IncludeLaunchDescription(PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
                                 launch_arguments=arguments.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestStackPublishes(unittest.TestCase):

    def test_topics_and_transforms(self):
        import rclpy
        from nav_msgs.msg import Odometry
        from rclpy.qos import (QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy,
                               qos_profile_sensor_data)
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage

        context = rclpy.Context()
        rclpy.init(context=context)
        node = rclpy.create_node("launch_test_observer", context=context)
        latched = QoSProfile(depth=1, reliability=QoSReliabilityPolicy.RELIABLE,
                             durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
        got = {"odom": [], "joint_states": [], "robot_description": [], "tf": [],
               "tf_static": []}
        try:
            node.create_subscription(Odometry, f"/{NAMESPACE}/odom", got["odom"].append, 10)
            node.create_subscription(JointState, f"/{NAMESPACE}/joint_states",
                                     got["joint_states"].append, qos_profile_sensor_data)
            node.create_subscription(String, f"/{NAMESPACE}/robot_description",
                                     got["robot_description"].append, latched)
            node.create_subscription(TFMessage, "/tf", got["tf"].append, 100)
            node.create_subscription(TFMessage, "/tf_static", got["tf_static"].append, latched)
            deadline = time.monotonic() + TIMEOUT_S
            while not all(got.values()) and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.1)
            missing = [topic for topic, messages in got.items() if not messages]
            self.assertEqual(missing, [], f"no message on {missing}")
            frames = {t.child_frame_id for m in got["tf"] + got["tf_static"] for t in m.transforms}
            self.assertIn(f"{NAMESPACE}/base_footprint", frames)
            self.assertIn(f"{NAMESPACE}/head_link", frames)
            self.assertIn(f"{NAMESPACE}/camera_optical_frame", frames)
        finally:
            node.destroy_node()
            context.try_shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):

    def test_processes_exit_cleanly(self, proc_info):
        # SIGINT from launch at the end of the test: 0, or killed by SIGINT/SIGTERM
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
