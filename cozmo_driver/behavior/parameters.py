"""The parameters of ``cozmo_behavior_node``: one table, used by the node to
declare them (with descriptions and ranges), by ``config/cozmo.yaml`` (its
``cozmo_behavior:`` section lists each with its default) and by docs/behavior.md
(tests check all three agree). Pure."""

from __future__ import annotations

from typing import Any, Dict, Tuple

from ..driver.parameters import ParamSpec

__all__ = ["BehaviorParam", "BEHAVIOR_PARAMETERS", "USER_ACTIONS", "USER_TOPICS", "defaults"]

#: the driver's actions whose goals (not the engine's own) count as user commands
USER_ACTIONS: Tuple[str, ...] = ("play_animation", "play_audio", "set_head_angle", "set_lift_height",
                                 "turn_in_place", "drive_straight", "follow_path", "go_to_pose")
#: command topics of the driver that the engine never publishes: every message is the user's
USER_TOPICS: Tuple[str, ...] = ("cmd_vel", "head/angle", "lift/height", "head/velocity",
                                "lift/velocity")


#: a parameter's name, default, description, unit, range and whether it is ``dynamic`` (may
#: change while the node runs, with ros2 param set; else read at start-up): the driver's
#: structure (its ``frame`` flag stays False here)
BehaviorParam = ParamSpec


BEHAVIOR_PARAMETERS: Tuple[BehaviorParam, ...] = (
    BehaviorParam("enabled", True, "Run behaviors (false: the engine only follows events and "
                  "publishes emotions); also the behavior/enable service. After the emergency stop's "
                  "release nothing runs until this is set true again (or behavior/enable true)",
                  dynamic=True),
    BehaviorParam("user_pause", 10.0, "After a user command (cmd_vel, head/lift topics) or the end "
                  "of a user's goal (of a driver action, not the engine's: it holds the engine while "
                  "it runs, whatever this is) the engine stays quiet this long",
                  "s", 0.0, 3600.0, dynamic=True),
    BehaviorParam("tick_rate", 10.0, "Engine ticks per second", "Hz", 1.0, 50.0),
    BehaviorParam("emotions_rate", 2.0, "behavior/emotions is published this often, and on "
                  "every change", "Hz", 0.1, 30.0),
    BehaviorParam("config_file", "", "Engine configuration (YAML) merged over the built-in "
                  "defaults (cozmo_driver/behavior/default_config.yaml); empty: the defaults"),
    BehaviorParam("app_resources_dir", "", "The Cozmo app's resources (the directory holding "
                  "cozmo_resources/): its behaviors, reaction triggers and emotion events are "
                  "loaded into the engine; empty: none"),
    BehaviorParam("seed", 0, "Seed of the engine's random choices (the same seed makes the "
                  "same choices)", minimum=0, maximum=2**31 - 1),
    BehaviorParam("cmd_vel_stamped", False, "cmd_vel is geometry_msgs/TwistStamped: it must "
                  "be the driver's parameter of that name, and the bring-up sets it so"),
    BehaviorParam("start_delay", 2.0, "Wait after the robot connects before the first "
                  "activity starts", "s", 0.0, 600.0),
)


def defaults() -> Dict[str, Any]:
    return {p.name: p.default for p in BEHAVIOR_PARAMETERS}
