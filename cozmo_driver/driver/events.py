"""Discrete robot events, from status-flag transitions and from one-off messages.

Two sources, each event type taken from exactly one of them so that a
subscriber sees every transition once:

* flag transitions of RobotState.status: PICKED_UP/PUT_DOWN, ON_CHARGER/OFF_CHARGER,
  CHARGING_STARTED/CHARGING_STOPPED;
* messages: RobotPoked (POKED), RobotDelocalized (DELOCALIZED), FallingStarted
  and FallingStopped (FALLING_STARTED/FALLING_STOPPED; the IS_FALLING flag is
  not used, the messages carry the fall's duration), ButtonPressed
  (BUTTON_PRESSED/BUTTON_RELEASED), MotorCalibration
  (HEAD_/LIFT_CALIBRATION_STARTED/ENDED).

ON_BACK, ON_FACE, ON_LEFT_SIDE, ON_RIGHT_SIDE and ON_TREADS come from a third source,
the robot's pitch and acceleration (:mod:`cozmo_driver.driver.orientation`), and
CLIFF_DETECTED/CLIFF_CLEARED (:func:`cliff_event`) from a fourth, an edge of the floor
(:class:`~cozmo_driver.driver.sensors.CliffEdgeTracker`): the CLIFF_DETECTED flag held
for 0.5 s while the robot stood on its treads. The flag itself rises with every pick-up,
about 0.1 s before IS_PICKED_UP (the sensor loses the floor first); Anki's firmware delays
its cliff event as long, so that a pick-up cancels it.

A falling robot also reports IS_PICKED_UP (Anki's firmware): while IS_FALLING is set,
that bit keeps its value for the events, so a fall gives no PICKED_UP/PUT_DOWN.

The first RobotState ever seen sets the baseline without events; the baseline
is kept across reconnects, so what changed while the link was down is reported
when it comes back. Type numbers are those of cozmo_interfaces/RobotEvent. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from .sensors import StatusFlag

__all__ = ["EventType", "RobotEventData", "EventDetector", "cliff_event"]


class EventType:
    """cozmo_interfaces/RobotEvent type constants."""

    UNKNOWN = 0
    CLIFF_DETECTED = 1
    CLIFF_CLEARED = 2
    PICKED_UP = 3
    PUT_DOWN = 4
    FALLING_STARTED = 5
    FALLING_STOPPED = 6
    POKED = 7
    BUTTON_PRESSED = 8
    BUTTON_RELEASED = 9
    DELOCALIZED = 10
    ON_CHARGER = 11
    OFF_CHARGER = 12
    CHARGING_STARTED = 13
    CHARGING_STOPPED = 14
    HEAD_CALIBRATION_STARTED = 15
    HEAD_CALIBRATION_ENDED = 16
    LIFT_CALIBRATION_STARTED = 17
    LIFT_CALIBRATION_ENDED = 18
    ON_BACK = 19
    ON_FACE = 20
    ON_LEFT_SIDE = 21
    ON_RIGHT_SIDE = 22
    ON_TREADS = 23


@dataclass(frozen=True)
class RobotEventData:
    type: int
    description: str
    #: FALLING_STOPPED: the fall's duration in seconds; 0.0 for every other type
    value: float = 0.0


# flag -> (event when set, description, event when cleared, description)
_FLAG_EVENTS = (
    (StatusFlag.IS_PICKED_UP, EventType.PICKED_UP, "picked up", EventType.PUT_DOWN, "put down"),
    (StatusFlag.IS_ON_CHARGER, EventType.ON_CHARGER, "placed on the charger",
     EventType.OFF_CHARGER, "taken off the charger"),
    (StatusFlag.IS_CHARGING, EventType.CHARGING_STARTED, "charging started",
     EventType.CHARGING_STOPPED, "charging stopped"),
)


def cliff_event(edge: bool) -> RobotEventData:
    """CLIFF_DETECTED for an edge of the floor found, CLIFF_CLEARED for its end."""
    if edge:
        return RobotEventData(EventType.CLIFF_DETECTED, "cliff detected")
    return RobotEventData(EventType.CLIFF_CLEARED, "cliff cleared")


class EventDetector:
    """Feed it every RobotState's status (:meth:`on_status`) and every message
    (:meth:`on_message`); each returns the events to publish, in order."""

    def __init__(self) -> None:
        self._flags: Optional[int] = None
        self._events_flags: Optional[int] = None  # the flags as the events saw them

    @property
    def flags(self) -> int:
        """The latest status word (0 before the first)."""
        return self._flags or 0

    @property
    def lifted(self) -> bool:
        """The robot is picked up or falling, as the events see it: IS_PICKED_UP keeps its
        value while the head calibrates (see :meth:`on_status`)."""
        return bool(self.flags & StatusFlag.IS_FALLING
                    or (self._events_flags or 0) & StatusFlag.IS_PICKED_UP)

    def on_status(self, status: int, publish: bool = True,
                  head_calibrating: bool = False) -> List[RobotEventData]:
        """The events of a new status word; ``publish`` false (the node is inactive): none,
        and the flags the events saw are kept, so that the changes meanwhile come as
        events with the next status published. ``head_calibrating``: IS_PICKED_UP keeps
        its value for the events (Anki's firmware resets its IMU filter, and so its
        pick-up detection, until the head is calibrated: IMUFilter::Update; its engine
        froze its on-treads state meanwhile)."""
        previous = self._events_flags
        self._flags = status
        if not publish and previous is not None:
            return []
        if head_calibrating and previous is not None:
            status = (status & ~StatusFlag.IS_PICKED_UP) | (previous & StatusFlag.IS_PICKED_UP)
        if status & StatusFlag.IS_FALLING and previous is not None:
            # the robot reports a falling robot as picked up too (Anki's firmware: IsPickedUp()
            # includes IsFalling()); the fall has its own events, so for the events
            # IS_PICKED_UP keeps its value until the fall ends
            status = (status & ~StatusFlag.IS_PICKED_UP) | (previous & StatusFlag.IS_PICKED_UP)
        self._events_flags = status
        if previous is None:
            return []
        changed = previous ^ status
        if not changed:
            return []
        out = []
        for bit, on_type, on_text, off_type, off_text in _FLAG_EVENTS:
            if changed & bit:
                out.append(RobotEventData(on_type, on_text) if status & bit
                           else RobotEventData(off_type, off_text))
        return out

    def on_message(self, message) -> List[RobotEventData]:
        name = message.NAME
        if name == "RobotPoked":
            return [RobotEventData(EventType.POKED, "poked")]
        if name == "RobotDelocalized":
            return [RobotEventData(EventType.DELOCALIZED, "delocalized: the robot lost track of its pose")]
        if name == "FallingStarted":
            return [RobotEventData(EventType.FALLING_STARTED, "falling")]
        if name == "FallingStopped":
            duration = float(message.duration_ms) / 1000.0
            return [RobotEventData(EventType.FALLING_STOPPED,
                                   f"fall ended after {duration:.2f} s "
                                   f"(impact intensity {float(message.impact_intensity):.0f})",
                                   duration)]
        if name == "ButtonPressed":
            if message.pressed:
                return [RobotEventData(EventType.BUTTON_PRESSED, "backpack button pressed")]
            return [RobotEventData(EventType.BUTTON_RELEASED, "backpack button released")]
        if name == "MotorCalibration":
            return _calibration_event(message)
        return []


#: MotorID (MOTOR_LIFT 2, MOTOR_HEAD 3) -> (motor, its calibration's start and end event types)
_CALIBRATION_EVENTS = {3: ("head", EventType.HEAD_CALIBRATION_STARTED, EventType.HEAD_CALIBRATION_ENDED),
                       2: ("lift", EventType.LIFT_CALIBRATION_STARTED, EventType.LIFT_CALIBRATION_ENDED)}


def _calibration_event(message) -> List[RobotEventData]:
    known = _CALIBRATION_EVENTS.get(int(message.motor_id))
    if known is None:  # the treads are never calibrated
        return []
    motor, started, ended = known
    if not message.calib_started:
        return [RobotEventData(ended, f"{motor} calibrated")]
    return [RobotEventData(started, f"{motor} calibration started"
                           + (" by the robot itself (was the motor forced?)" if message.auto_started
                              else ""))]
