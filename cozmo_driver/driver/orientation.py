"""Which way up the robot is: on its treads, in the air, falling, on its back, face or side.

The robot itself reports only "picked up" and "falling"; lying on its back, face or
side is read from each RobotState's pitch and sideways acceleration, with the
thresholds Anki's engine used for Cozmo (its off-treads states):

* on its back: pitch within 15 deg of 74.5 deg (the backpack holds it at that angle);
* on its face: pitch above 110 deg or below -80 deg;
* on its right / left side: sideways acceleration within 3000 mm/s^2 of +10500 / -9000
  (the accelerometer's y axis, positive to the robot's left, reads gravity);
* otherwise on its treads, or in the air while the IS_PICKED_UP flag is set; falling
  while IS_FALLING is set.

While the head calibrates, the readings are not used: Anki's firmware resets its IMU
filter then (pitch 0, whatever the pose), so a robot on its back would seem to stand up
and lie down again (:meth:`OrientationDetector.on_calibration`). The robot calibrates at
each connection, from before its first RobotState: the first reading ever, taken then,
still sets the baseline (the state is UNKNOWN only before it), and where the robot lies
comes as an event once the calibration has ended.

A new reading must hold before it counts, so that a robot turned over by hand does not
report every pose it passes through: 0.25 s for a side or the face, 1.0 s for the back
(a robot rolling from its face to its treads passes over its back). On its treads, in
the air and falling count at once.

:meth:`OrientationDetector.update` returns the events to publish: ON_BACK, ON_FACE,
ON_LEFT_SIDE, ON_RIGHT_SIDE, and ON_TREADS once it stands on its treads again after
one of those. Picked up and falling have their own events (PICKED_UP, FALLING_STARTED),
so none is added for them. As with the status flags, the first reading ever sets the
baseline without an event, the state is kept across reconnects, and a change while the
node is inactive is reported once it publishes again. Pure.
"""

from __future__ import annotations

import math
from typing import List, Optional

from .events import EventType, RobotEventData
from .sensors import StatusFlag

__all__ = ["Orientation", "OrientationDetector", "classify", "ORIENTATION_NAMES"]


class Orientation:
    """cozmo_interfaces/RobotStatus ORIENTATION_* constants."""

    UNKNOWN = 0
    ON_TREADS = 1
    IN_AIR = 2
    FALLING = 3
    ON_BACK = 4
    ON_FACE = 5
    ON_LEFT_SIDE = 6
    ON_RIGHT_SIDE = 7


#: Orientation value -> what it is called in the log and in events
ORIENTATION_NAMES = {
    Orientation.UNKNOWN: "unknown", Orientation.ON_TREADS: "on its treads",
    Orientation.IN_AIR: "in the air", Orientation.FALLING: "falling",
    Orientation.ON_BACK: "on its back", Orientation.ON_FACE: "on its face",
    Orientation.ON_LEFT_SIDE: "on its left side", Orientation.ON_RIGHT_SIDE: "on its right side",
}

BACK_PITCH_RAD = math.radians(74.5)
BACK_TOLERANCE_RAD = math.radians(15.0)
#: pitch beyond these (either way) is face down
FACE_PITCH_ABOVE_RAD = math.radians(110.0)
FACE_PITCH_BELOW_RAD = math.radians(-80.0)
RIGHT_SIDE_ACCEL_MMPS2 = 10500.0
LEFT_SIDE_ACCEL_MMPS2 = -9000.0
SIDE_TOLERANCE_MMPS2 = 3000.0
#: how long a side or face reading must hold before it counts, s
HOLD_S = 0.25
#: the same for the back, s
BACK_HOLD_S = 1.0

_HOLD = {Orientation.ON_BACK: BACK_HOLD_S, Orientation.ON_FACE: HOLD_S,
         Orientation.ON_LEFT_SIDE: HOLD_S, Orientation.ON_RIGHT_SIDE: HOLD_S}
_EVENTS = {Orientation.ON_BACK: EventType.ON_BACK, Orientation.ON_FACE: EventType.ON_FACE,
           Orientation.ON_LEFT_SIDE: EventType.ON_LEFT_SIDE,
           Orientation.ON_RIGHT_SIDE: EventType.ON_RIGHT_SIDE}


def classify(pitch_rad: float, accel_y_mmps2: float, flags: int) -> int:
    """The orientation one reading shows (an Orientation value), before any hold time.
    A reading that is not finite shows nothing new: on its treads, or in the air."""
    if flags & StatusFlag.IS_FALLING:
        return Orientation.FALLING
    if abs(accel_y_mmps2 - RIGHT_SIDE_ACCEL_MMPS2) <= SIDE_TOLERANCE_MMPS2:
        return Orientation.ON_RIGHT_SIDE
    if abs(accel_y_mmps2 - LEFT_SIDE_ACCEL_MMPS2) <= SIDE_TOLERANCE_MMPS2:
        return Orientation.ON_LEFT_SIDE
    if pitch_rad > FACE_PITCH_ABOVE_RAD or pitch_rad < FACE_PITCH_BELOW_RAD:
        return Orientation.ON_FACE
    if abs(pitch_rad - BACK_PITCH_RAD) <= BACK_TOLERANCE_RAD:
        return Orientation.ON_BACK
    return Orientation.IN_AIR if flags & StatusFlag.IS_PICKED_UP else Orientation.ON_TREADS


class OrientationDetector:
    """Feed it every RobotState (:meth:`update`); :attr:`state` is the orientation that
    counts (UNKNOWN before the first reading)."""

    def __init__(self) -> None:
        self.state = Orientation.UNKNOWN
        self._candidate = Orientation.UNKNOWN
        self._since = 0.0
        self._off_treads = False  # on its back, face or side since it last stood on its treads
        self._reported = Orientation.UNKNOWN  # the state as of the last reading published
        #: what the last reading showed, held or not (classify)
        self.seen = Orientation.UNKNOWN
        #: the head calibrates: readings are ignored (see the module docstring)
        self.held = False

    def on_calibration(self, events: List[RobotEventData]) -> None:
        """Hold while the head calibrates: pass every event from the robot's messages."""
        for event in events:
            if event.type == EventType.HEAD_CALIBRATION_STARTED:
                self.held = True
            elif event.type == EventType.HEAD_CALIBRATION_ENDED:
                self.held = False

    def update(self, t: float, pitch_rad: float, accel_y_mmps2: float,
               flags: int, publish: bool = True) -> List[RobotEventData]:
        """One reading at time ``t`` (s, any monotonic clock): the events it confirms.
        ``publish`` false (the node is inactive): the state follows the readings but no
        event is returned; the first reading published again reports where the robot lies
        now if that differs from what the events last said (as the status flags do)."""
        if self.held and self.state != Orientation.UNKNOWN:
            return []  # (the first reading ever is the baseline all the same: see above)
        seen = self.seen = classify(pitch_rad, accel_y_mmps2, flags)
        if self.state == Orientation.UNKNOWN:
            self.state = self._candidate = self._reported = seen
            self._off_treads = seen in _EVENTS
            return []
        if seen != self._candidate:
            self._candidate, self._since = seen, t
        if seen != self.state and t - self._since >= _HOLD.get(seen, 0.0):
            self.state = seen
        elif seen != self.state and self.state == Orientation.ON_TREADS and flags & StatusFlag.IS_PICKED_UP:
            self.state = Orientation.IN_AIR  # lying, not held yet, and it says it is picked up
        if not publish or self.state == self._reported:
            return []
        self._reported = self.state
        event = _EVENTS.get(self.state)
        if event is not None:
            self._off_treads = True
            return [RobotEventData(event, ORIENTATION_NAMES[self.state])]
        if self.state == Orientation.ON_TREADS and self._off_treads:
            self._off_treads = False
            return [RobotEventData(EventType.ON_TREADS, "back on its treads")]
        return []

    def describe(self) -> Optional[str]:
        """The orientation in words, None before the first reading."""
        return None if self.state == Orientation.UNKNOWN else ORIENTATION_NAMES[self.state]

    def lying(self) -> bool:
        """On its back, face or side (where its treads do not touch the floor)."""
        return self.state in _EVENTS
