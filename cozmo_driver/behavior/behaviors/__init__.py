"""The built-in behaviors, by the name a configuration's ``class:`` gives them.

Write your own by subclassing :class:`~cozmo_driver.behavior.behavior.Behavior`
(or :class:`~cozmo_driver.behavior.behavior.ScriptBehavior`) and naming it
``package.module:ClassName`` in the configuration.
"""

from __future__ import annotations

from typing import Dict, Type

from ..behavior import Behavior
from .app import AppPlayAnimations
from .charger import DriveOffCharger, SleepOnCharger
from .idle import Explore, GetBored, LookAround, PlayAnimation
from .reactive import (CelebrateCube, Greet, LowBatterySad, ReactToCliff, ReactToFall,
                       ReactToPickup, ReactToPoke, ReactToPutDown)

__all__ = [
    "BUILTIN_BEHAVIORS",
    "LookAround", "Explore", "GetBored", "PlayAnimation",
    "ReactToCliff", "ReactToPickup", "ReactToPutDown", "ReactToFall", "ReactToPoke",
    "CelebrateCube", "Greet", "LowBatterySad",
    "SleepOnCharger", "DriveOffCharger",
    "AppPlayAnimations",
]

#: class name in a configuration -> class
BUILTIN_BEHAVIORS: Dict[str, Type[Behavior]] = {
    "look_around": LookAround,
    "explore": Explore,
    "get_bored": GetBored,
    "play_animation": PlayAnimation,
    "react_to_cliff": ReactToCliff,
    "react_to_pickup": ReactToPickup,
    "react_to_put_down": ReactToPutDown,
    "react_to_fall": ReactToFall,
    "react_to_poke": ReactToPoke,
    "celebrate_cube": CelebrateCube,
    "greet": Greet,
    "low_battery_sad": LowBatterySad,
    "sleep_on_charger": SleepOnCharger,
    "drive_off_charger": DriveOffCharger,
    "app_play_animations": AppPlayAnimations,
}
