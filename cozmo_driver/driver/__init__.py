"""The driver's logic without ROS: kinematics, odometry, sensor conversions,
events, command checks, camera calibration, parameters and diagnostics.

Nothing here imports rclpy or message packages; the node
(:mod:`cozmo_driver.ros.driver_node`) is the glue around it, and these modules
are unit-tested on their own.
"""

from . import camera_info, commands, diagnostics, events, kinematics, odometry, parameters, sensors

__all__ = ["camera_info", "commands", "diagnostics", "events", "kinematics", "odometry",
           "parameters", "sensors"]
