"""The robot client API: typed, on top of the protocol engine and one transport."""

from .link import ClientConfig, LinkState, LinkStateChanged, RobotInfo, RobotLink, RobotReady
from .robot import DEFAULT_ROBOT_ADDRESS, DEFAULT_ROBOT_PORT, Robot

__all__ = [
    "ClientConfig",
    "LinkState",
    "LinkStateChanged",
    "RobotInfo",
    "RobotLink",
    "RobotReady",
    "Robot",
    "DEFAULT_ROBOT_ADDRESS",
    "DEFAULT_ROBOT_PORT",
]
