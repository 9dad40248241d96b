"""The simulated Cozmo: a robot that speaks the real UDP protocol.

Layers, each usable alone:

* :class:`RobotModel` (:mod:`.model`): the body and firmware behaviour, pure,
  ticked by injected time. It is a small composition of parts, each handling
  its own commands:

  - :mod:`.firmware`: what the parts share (configuration, seeded generator,
    outbox, timers, robot clock, link state);
  - :mod:`.body` (motors in :mod:`.motors`): pose and odometry frame, wheels,
    head and lift, IMU, battery, cliff sensors, falls, pick-ups, the charger;
  - :mod:`.path`: the path follower (AppendPathSeg*, ExecutePath, ...);
  - :mod:`.animation`: animation playback and its outputs (face, speaker,
    backpack lights);
  - :mod:`.accessories`: the light cubes and the charger over the radio;
  - :mod:`.nvstorage`: NV storage; :mod:`.camera`: the camera's settings;

* :class:`SimulatedRobot` (:mod:`.robot`): the protocol on top of it, sans-I/O
  with a session's five methods (drive it with
  :class:`~cozmo_driver.transport.memory.MemoryLink` in tests), and the camera
  front-end;
* :class:`SimServer` (:mod:`.server`): the robot on a loopback UDP port, with
  thread-safe scripting and ground truth; ``cozmo-sim`` (:mod:`.cli`) runs it.

The camera renderer lives in :mod:`.world` and is imported only when needed.
"""

from .model import (
    CAMERA_CALIB_FORMAT,
    CAMERA_CALIB_SIZE,
    CHARGER_FACTORY_ID,
    CUBE_FACTORY_IDS,
    CameraCalibration,
    ModelConfig,
    RobotModel,
    StatusFlag,
    decode_camera_calibration,
    default_camera_calibration,
    encode_camera_calibration,
)
from .robot import GARBAGE_KINDS, ImpairedEndpoint, Impairment, RobotConfig, SimStats, SimulatedRobot
from .server import DEFAULT_PORT, NonLoopbackAddressError, SimError, SimServer

__all__ = [
    "RobotModel",
    "ModelConfig",
    "StatusFlag",
    "CameraCalibration",
    "CAMERA_CALIB_FORMAT",
    "CAMERA_CALIB_SIZE",
    "encode_camera_calibration",
    "decode_camera_calibration",
    "default_camera_calibration",
    "CUBE_FACTORY_IDS",
    "CHARGER_FACTORY_ID",
    "SimulatedRobot",
    "RobotConfig",
    "SimStats",
    "ImpairedEndpoint",
    "Impairment",
    "GARBAGE_KINDS",
    "SimServer",
    "SimError",
    "NonLoopbackAddressError",
    "DEFAULT_PORT",
]
