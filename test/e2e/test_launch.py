"""``cozmo.launch.py`` under launch_testing, found by package name as ``ros2 launch`` finds it:
the namespaced stack against the simulator publishes odom, joint_states, robot_description
and the whole tf tree under the namespace, and every process exits cleanly at the end.

launch_testing and launch_ros are not on PyPI: in the wheel venv this module is skipped with
the reason printed (test_bringup.py runs the same plan through cozmo_bringup there). In the
kit environment (``./dev test-kit``) and on a real ROS 2 install it runs; there its absence,
or a pytest that cannot load the launch_testing plugin, is a failure (test/ros_tools.py).
"""

from __future__ import annotations

import time
import unittest

import pytest

from processes import free_udp_port
from ros_tools import missing, need_installed_package, need_module

need_module("launch_testing")
need_module("launch_ros")
SHARE = need_installed_package()

# the whole stack under launch_testing: DDS, and tens of seconds. (launch_testing's plugin
# collects the module through generate_test_description: its marks are the ones it applies.)
pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.heavy]

import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from launch import LaunchDescription  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

NAMESPACE = "launch_test"
TIMEOUT_S = 40.0
#: Every frame of the robot, from odom to the camera: the driver's odometry, the
#: description's joints (fixed and moving).
FRAMES = ("base_footprint", "base_link", "imu_link", "head_link", "camera_link",
          "camera_optical_frame", "lift_link", "lift_upper_arm_link", "lift_plate_link")


def pytest_plugin_loaded(config) -> bool:
    return config.pluginmanager.hasplugin("launch_testing")


@pytest.fixture(autouse=True, scope="module")
def _launch_testing_plugin(request):
    # Without launch_testing's pytest plugin this module would be collected as plain
    # unittest classes and fail for another reason: say the real one.
    if not pytest_plugin_loaded(request.config):
        missing("launch_testing's pytest plugin is not loaded (a pytest it cannot load, "
                "e.g. pytest >= 9 with Jazzy's launch_testing: ros2/launch#979)")


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.launch_test
def generate_test_description():
    arguments = {"use_sim": "true", "sim_port": str(free_udp_port()), "namespace": NAMESPACE}
    return LaunchDescription([
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(SHARE / "launch" / "cozmo.launch.py")),
            launch_arguments=arguments.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestStackPublishes(unittest.TestCase):

    def test_topics_and_transforms(self):
        import rclpy
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import (QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy,
                               qos_profile_sensor_data)
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage

        context = rclpy.Context()
        rclpy.init(context=context)
        node = rclpy.create_node("launch_test_observer", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        latched = QoSProfile(depth=1, reliability=QoSReliabilityPolicy.RELIABLE,
                             durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
        got = {"odom": [], "joint_states": [], "robot_description": []}
        frames = set()

        def on_tf(message):
            frames.update(t.child_frame_id for t in message.transforms)

        wanted = {f"{NAMESPACE}/{frame}" for frame in FRAMES}
        try:
            node.create_subscription(Odometry, f"/{NAMESPACE}/odom", got["odom"].append, 10)
            node.create_subscription(JointState, f"/{NAMESPACE}/joint_states",
                                     got["joint_states"].append, qos_profile_sensor_data)
            node.create_subscription(String, f"/{NAMESPACE}/robot_description",
                                     got["robot_description"].append, latched)
            node.create_subscription(TFMessage, "/tf", on_tf, 100)
            node.create_subscription(TFMessage, "/tf_static", on_tf, latched)
            deadline = time.monotonic() + TIMEOUT_S
            # every message counts: the frames arrive over several /tf messages
            while (not all(got.values()) or not wanted <= frames) and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.1)
            self.assertEqual([topic for topic, messages in got.items() if not messages], [],
                             "topics without a message")
            self.assertEqual(sorted(wanted - frames), [], "frames never published")
            self.assertEqual(got["odom"][-1].header.frame_id, f"{NAMESPACE}/odom")
            self.assertEqual(got["odom"][-1].child_frame_id, f"{NAMESPACE}/base_footprint")
            self.assertIn(f'link name="{NAMESPACE}/base_link"', got["robot_description"][-1].data)
        finally:
            executor.shutdown()
            node.destroy_node()
            context.try_shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):

    def test_processes_exit_cleanly(self, proc_info):
        # launch ends every process with SIGINT after the tests: each exits with 0
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])

    def test_no_error_in_any_output(self, proc_output):
        for process_output in proc_output:
            text = process_output.text.decode(errors="replace")
            for word in ("[ERROR]", "Traceback", "Assertion"):
                self.assertNotIn(word, text, f"{process_output.process_name}: {text[-3000:]}")
