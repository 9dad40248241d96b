"""Reactions: a trigger (something that happened) -> a behavior, with a
priority and a cool-down.

Triggers are names. The robot's events become triggers in the ROS node
(:data:`ROBOT_EVENT_TRIGGERS`, by cozmo_interfaces/RobotEvent type), a cube tap
is ``cube_tapped``, the battery falling below its threshold ``low_battery``
(:class:`LowBatteryDetector`), and any other node may post a named trigger
(``face_seen`` from a face detector, or a name of the Cozmo app's reaction
triggers).

A :class:`Reaction` fires when its trigger arrives, it is not cooling down
(``cooldown`` seconds since it last fired), and the robot's state matches its
``when`` conditions (e.g. the cliff reaction needs ``picked_up: false``: a
lifted robot sees a cliff under every sensor). The engine then starts its
behavior if nothing of the same or a higher priority runs. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from ..driver.events import EventType

__all__ = [
    "TRIGGERS",
    "ROBOT_EVENT_TRIGGERS",
    "STATE_CHANGES",
    "Reaction",
    "ReactionTable",
    "LowBatteryDetector",
    "conditions_hold",
]

#: trigger names the node produces, and what they mean
TRIGGERS: Mapping[str, str] = {
    "cliff_detected": "a cliff sensor lost the floor",
    "cliff_cleared": "the cliff sensors see the floor again",
    "picked_up": "the robot was lifted",
    "put_down": "the robot was set down",
    "falling": "the robot is falling",
    "fall_ended": "the fall ended",
    "poked": "the robot was poked",
    "button_pressed": "the backpack button was pressed",
    "button_released": "the backpack button was released",
    "delocalized": "the robot lost track of its pose",
    "on_charger": "the robot was placed on its charger",
    "off_charger": "the robot left its charger",
    "charging_started": "charging began",
    "charging_stopped": "charging ended",
    "on_back": "the robot lies on its back",
    "on_face": "the robot lies on its face",
    "on_side": "the robot lies on its left or right side",
    "on_treads": "the robot stands on its treads again after lying on its back, face or side",
    "cube_tapped": "a light cube was tapped (object_events TAPPED)",
    "low_battery": "the battery fell below low_battery.threshold",
    "face_seen": "a face was seen (posted on behavior/trigger by a face detector)",
}

#: RobotEvent type -> trigger name
ROBOT_EVENT_TRIGGERS: Mapping[int, str] = {
    EventType.CLIFF_DETECTED: "cliff_detected",
    EventType.CLIFF_CLEARED: "cliff_cleared",
    EventType.PICKED_UP: "picked_up",
    EventType.PUT_DOWN: "put_down",
    EventType.FALLING_STARTED: "falling",
    EventType.FALLING_STOPPED: "fall_ended",
    EventType.POKED: "poked",
    EventType.BUTTON_PRESSED: "button_pressed",
    EventType.BUTTON_RELEASED: "button_released",
    EventType.DELOCALIZED: "delocalized",
    EventType.ON_CHARGER: "on_charger",
    EventType.OFF_CHARGER: "off_charger",
    EventType.CHARGING_STARTED: "charging_started",
    EventType.CHARGING_STOPPED: "charging_stopped",
    EventType.ON_BACK: "on_back",
    EventType.ON_FACE: "on_face",
    EventType.ON_LEFT_SIDE: "on_side",
    EventType.ON_RIGHT_SIDE: "on_side",
    EventType.ON_TREADS: "on_treads",
}

#: triggers that change the robot state: trigger -> (RobotState field, value)
STATE_CHANGES: Mapping[str, Tuple[str, bool]] = {
    "cliff_detected": ("cliff", True),
    "cliff_cleared": ("cliff", False),
    "picked_up": ("picked_up", True),
    "put_down": ("picked_up", False),
    "falling": ("falling", True),
    "fall_ended": ("falling", False),
    "on_charger": ("on_charger", True),
    "off_charger": ("on_charger", False),
    "charging_started": ("charging", True),
    "charging_stopped": ("charging", False),
    "on_back": ("lying", True),
    "on_face": ("lying", True),
    "on_side": ("lying", True),
    "on_treads": ("lying", False),
}


def conditions_hold(when: Mapping[str, bool], state: Any) -> bool:
    """Whether every ``flag: value`` of ``when`` matches the state's attribute."""
    return all(bool(getattr(state, flag)) == bool(value) for flag, value in when.items())


@dataclass(frozen=True)
class Reaction:
    """Trigger -> behavior. ``priority``: higher preempts lower (activities run
    at 0). ``cooldown``: seconds after firing during which the trigger is
    ignored. ``when``: robot state conditions ({flag: true/false})."""

    trigger: str
    behavior: str
    priority: int = 50
    cooldown: float = 0.0
    when: Mapping[str, bool] = field(default_factory=dict)
    enabled: bool = True


class ReactionTable:
    """The reactions by trigger, and when each last fired."""

    def __init__(self, reactions: Iterable[Reaction] = ()) -> None:
        self.reactions: Dict[str, Reaction] = {}
        for reaction in reactions:
            self.reactions[reaction.trigger] = reaction
        self._fired: Dict[str, float] = {}

    def get(self, trigger: str) -> Optional[Reaction]:
        reaction = self.reactions.get(trigger)
        return reaction if reaction is not None and reaction.enabled else None

    def cooling_down(self, trigger: str, now: float) -> float:
        """Seconds of cool-down left for the trigger's reaction (0: ready)."""
        reaction = self.get(trigger)
        last = self._fired.get(trigger)
        if reaction is None or last is None:
            return 0.0
        return max(0.0, last + reaction.cooldown - now)

    def select(self, trigger: str, now: float, state: Any) -> Tuple[Optional[Reaction], str]:
        """The reaction to start for ``trigger`` now, or (None, why not)."""
        reaction = self.get(trigger)
        if reaction is None:
            return None, "no reaction"
        left = self.cooling_down(trigger, now)
        if left > 0:
            return None, f"cooling down ({left:.1f} s left)"
        if not conditions_hold(reaction.when, state):
            wanted = ", ".join(f"{k}={str(v).lower()}" for k, v in reaction.when.items())
            return None, f"conditions not met ({wanted})"
        return reaction, ""

    def fired(self, trigger: str, now: float) -> None:
        self._fired[trigger] = now


class LowBatteryDetector:
    """``low_battery`` once when the charge falls below ``threshold``; re-armed
    when it rises above ``threshold + hysteresis``."""

    def __init__(self, threshold: float = 0.15, hysteresis: float = 0.05) -> None:
        self.threshold = float(threshold)
        self.hysteresis = float(hysteresis)
        self.low = False

    def update(self, fraction: float) -> bool:
        """Feed the charge (0..1); True when it just became low."""
        if fraction != fraction:  # NaN: unknown
            return False
        if not self.low and fraction < self.threshold:
            self.low = True
            return True
        if self.low and fraction > self.threshold + self.hysteresis:
            self.low = False
        return False
