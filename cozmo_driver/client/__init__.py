"""The robot client API: typed, on top of the protocol engine and one transport.

Besides its own classes it re-exports what it delivers and raises, so that the
layers above (the ROS nodes) need not import the protocol: the events its
listeners receive (:class:`MessageReceived`, whose ``message.NAME`` names the
robot's message, next to :class:`LinkStateChanged` and :class:`RobotReady`) and
the root of its errors (:class:`CozmoError`).
"""

from ..protocol.errors import CozmoError
from ..protocol.session import MessageReceived
from .link import ClientConfig, LinkState, LinkStateChanged, RobotInfo, RobotLink, RobotReady
from .claim import RobotBusyError
from .robot import DEFAULT_ROBOT_ADDRESS, DEFAULT_ROBOT_PORT, Robot

__all__ = [
    "ClientConfig",
    "CozmoError",
    "LinkState",
    "LinkStateChanged",
    "MessageReceived",
    "RobotInfo",
    "RobotLink",
    "RobotReady",
    "Robot",
    "RobotBusyError",
    "DEFAULT_ROBOT_ADDRESS",
    "DEFAULT_ROBOT_PORT",
]
