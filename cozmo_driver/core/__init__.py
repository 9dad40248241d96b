"""The driver core: what one Cozmo does and means, with no ROS in it.

:class:`DriverCore` runs on the robot client's I/O thread (it is the client's
listener) and hands typed samples in SI units (:mod:`.samples`) to a
:class:`DriverOutput`, which a front-end such as the ROS node
(:mod:`cozmo_driver.ros.driver_node`) implements. Commands go the other way, in
SI units, checked. Layers: protocol -> transport -> client -> core -> ros.
"""

from ..errors import ConfigurationError
from .driver import CozmoError, DriverCore, make_robot
from .samples import (BatterySample, CameraFrame, DriverOutput, ImuSample, JointSample,
                      LinkSample, OdomSample, RecordingOutput, StateSample, StatusSample)

__all__ = ["DriverCore", "make_robot", "CozmoError", "ConfigurationError", "DriverOutput", "RecordingOutput",
           "StateSample", "OdomSample", "ImuSample", "JointSample", "StatusSample",
           "BatterySample", "LinkSample", "CameraFrame"]
