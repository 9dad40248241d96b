"""The driver node's own topics and services: names, message types and QoS (the display,
audio, animation, motion and object interfaces have theirs in their own modules).

The message packages are imported here, not by :mod:`cozmo_driver.ros.driver_node`,
which imports this module only once its node, and so its DDS participant, exists:
discovery then runs while the rest is imported (docs/driver.md, Start-up).
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

from cozmo_interfaces.msg import (BackpackLights, HeadAngle, LiftHeight, RobotEvent,
                                  RobotInfo, RobotStatus)
from cozmo_interfaces.srv import SetEmergencyStop
from geometry_msgs.msg import Twist, TwistStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import (BatteryState, CameraInfo, CompressedImage, Image, Imu, JointState,
                             PointCloud2)
from std_msgs.msg import Bool, Float32, Float64
from sensor_msgs.srv import SetCameraInfo
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker

from .qos import QOS_EVENTS, QOS_LATCHED, QOS_SENSOR_OUT, QOS_STATE, QOS_TF

__all__ = ["PUBLISHERS", "SERVICES", "services", "command_subscriptions", "cmd_vel_type"]

#: (key in the node's publishers, type, topic, QoS, overridable by qos_overrides parameters)
PUBLISHERS = (
    ("odom", Odometry, "odom", QOS_STATE, True), ("imu", Imu, "imu/data", QOS_SENSOR_OUT, True),
    ("joints", JointState, "joint_states", QOS_STATE, True),
    ("battery", BatteryState, "battery_state", QOS_STATE, True),
    ("battery_marker", Marker, "battery_marker", QOS_STATE, True),
    ("status", RobotStatus, "status", QOS_STATE, True),
    ("events", RobotEvent, "events", QOS_EVENTS, True),
    ("cliff", PointCloud2, "cliff/points", QOS_SENSOR_OUT, True),
    ("info", RobotInfo, "robot_info", QOS_LATCHED, True),
    ("estop", Bool, "emergency_stop/engaged", QOS_LATCHED, True),
    ("compressed", CompressedImage, "camera/image_raw/compressed", QOS_SENSOR_OUT, True),
    ("image", Image, "camera/image_raw", QOS_SENSOR_OUT, True),
    ("camera_info", CameraInfo, "camera/camera_info", QOS_SENSOR_OUT, True),
    ("tf", TFMessage, "/tf", QOS_TF, False))

#: (type, name, the node's method that answers)
SERVICES = ((SetEmergencyStop, "emergency_stop", "_on_emergency_stop"),
            (Trigger, "reset_odometry", "_on_reset_odometry"),
            (Trigger, "calibrate_motors", "_on_calibrate_motors"))


def services(node: Any) -> List[Tuple[Any, str, Callable[[Any, Any], Any]]]:
    """(type, name, callback) of the driver's services: :data:`SERVICES`, answered by
    ``node``'s methods, and camera/set_camera_info (:mod:`.camera_info_service`)."""
    from . import camera_info_service
    return [(srv_type, name, getattr(node, method)) for srv_type, name, method in SERVICES] + [
        (SetCameraInfo, camera_info_service.SERVICE,
         lambda request, response: camera_info_service.set_camera_info(node, request, response))]


def command_subscriptions(core: Any) -> List[Tuple[Any, str, Callable[[Any], None]]]:
    """(type, topic, callback) of the command topics but cmd_vel, each a call of ``core``
    (the :class:`~cozmo_driver.core.DriverCore`)."""
    return [
        (HeadAngle, "head/angle", lambda m: core.set_head(m.angle, m.max_speed)),
        (LiftHeight, "lift/height", lambda m: core.set_lift(m.height, m.max_speed)),
        (Float64, "head/velocity", lambda m: core.move_head(m.data)),
        (Float64, "lift/velocity", lambda m: core.move_lift(m.data)),
        (BackpackLights, "backpack_lights", lambda m: core.set_backpack_lights(
            {name: (getattr(m, name).r, getattr(m, name).g, getattr(m, name).b)
             for name in ("front", "middle", "back", "left", "right")})),
        (Bool, "head_light", lambda m: core.set_head_light(m.data)),
        (Float32, "volume", lambda m: core.set_volume(m.data))]


def cmd_vel_type(stamped: bool) -> Any:
    """cmd_vel's message type: TwistStamped or Twist (the ``cmd_vel_stamped`` parameter)."""
    return TwistStamped if stamped else Twist
