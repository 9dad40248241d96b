"""The behavior engine: emotions, reactions, behaviors and activities, without ROS.

``cozmo_behavior_node`` (:mod:`cozmo_driver.ros.behavior_node`) is its ROS
glue. Modules:

* :mod:`.behavior`: the behavior API (Behavior, ScriptBehavior, Outcome,
  Handle, BehaviorContext, RobotInterface, RobotState);
* :mod:`.behaviors`: the built-in behaviors;
* :mod:`.emotions`, :mod:`.reactions`, :mod:`.activities`: the models;
* :mod:`.engine`: the scheduler;
* :mod:`.config`: YAML loading and checking (defaults in ``default_config.yaml``);
* :mod:`.app_resources`: the Cozmo app's JSON definitions;
* :mod:`.parameters`: the node's parameters.
"""

from .behavior import (Behavior, BehaviorContext, BehaviorError, CubeTap, Handle, Outcome,
                       RobotInterface, RobotState, ScriptBehavior, Wait)
from .config import ConfigError, EngineConfig, load_config, parse_config
from .emotions import Curve, EmotionEvent, Emotions, EmotionSpec
from .engine import Engine, EngineStatus

__all__ = [
    "Behavior", "BehaviorContext", "BehaviorError", "CubeTap", "Handle", "Outcome",
    "RobotInterface", "RobotState", "ScriptBehavior", "Wait",
    "ConfigError", "EngineConfig", "load_config", "parse_config",
    "Curve", "EmotionEvent", "Emotions", "EmotionSpec",
    "Engine", "EngineStatus",
]
