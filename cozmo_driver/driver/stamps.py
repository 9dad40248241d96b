"""Stamps from the robot's own clock.

The robot stamps each RobotState with the millisecond its values were sampled
(``timestamp_ms``, a 32-bit count that SyncTime starts), and each camera frame with
its capture on the same clock (``ImageChunk.frame_timestamp``; Anki's firmware takes
it about 70 ms before the frame's last byte leaves the camera). Stamping samples with
the moment they reached this computer instead adds the Wi-Fi's and this computer's
delays: a few milliseconds of jitter idle, tens under load, and for the camera the
time to send the frame's chunks.

:class:`RobotClock` maps the robot's clock to the host's: the offset between them is
the smallest difference, arrival minus robot time, seen over the last
``window_s`` seconds (the fastest state of that time came with the least delay). A
stamp is then the robot time plus that offset: the robot's own spacing, never later
than the state's arrival, never going back. The window follows a drift between the
two crystals; an offset that grew by more than ``jump_s`` at once (the robot's clock
went back, or this computer stood still that long), or shrank by as much (this
computer's clock was set back: the stamps follow it back), starts the window again, and
so does :meth:`reset` at a new connection.
"""

from __future__ import annotations

from collections import deque
from typing import Deque, Optional, Tuple

__all__ = ["RobotClock"]

_NS_PER_MS = 1_000_000
_RANGE = 1 << 32
_HALF = 1 << 31
#: a frame's mapped capture time may fall this far after its arrival (it came with less
#: delay than every state in the window) and is then stamped with its arrival
_FRAME_AHEAD_NS = 20_000_000
#: a frame_timestamp of 0 is a capture time only while the latest state is this close to
#: robot time 0 (ms): a frame captured at SyncTime is complete, at 15 fps, after about 70 ms
#: of readout and a frame period of chunks (about 140 ms of the robot's clock); later, a 0
#: is no time at all (a firmware that leaves it out sends 0) and the frame is stamped with
#: its arrival
_ZERO_FRAME_MS = 200


class RobotClock:
    """See the module docstring. Not thread-safe: call it under one lock."""

    def __init__(self, window_s: float = 5.0, jump_s: float = 1.0,
                 frame_age_s: float = 1.0) -> None:
        self.window_ns = int(window_s * 1e9)
        self.jump_ns = int(jump_s * 1e9)
        self.frame_age_ns = int(frame_age_s * 1e9)
        #: (arrival ns, offset ns) of the states in the window whose offset no later one
        #: undercuts: the first is the smallest
        self._window: Deque[Tuple[int, int]] = deque()
        self._last_ms: Optional[int] = None   # the latest state's robot time, as sent
        self._last_full = 0                   # ... unwrapped (ms)
        self._last_stamp: Optional[int] = None
        #: camera frames stamped with their arrival: no offset yet, or a frame time that
        #: does not fit (more than ``frame_age_s`` before its arrival, or after it)
        self.frames_from_arrival = 0

    def reset(self) -> None:
        """A new connection: the robot's clock starts again."""
        self._window.clear()
        self._last_ms = None
        self._last_full = 0
        self._last_stamp = None

    def _full_ms(self, robot_ms: int) -> int:
        """``robot_ms`` unwrapped next to the latest state's (forwards or back)."""
        if self._last_ms is None:
            return robot_ms
        step = (robot_ms - self._last_ms) % _RANGE
        return self._last_full + (step if step < _HALF else step - _RANGE)

    def robot_ms(self, robot_ms: int) -> int:
        """A RobotState's ``robot_ms`` unwrapped (the robot's own time, ms since this
        connection's SyncTime, past the 32-bit wrap); the latest state's from then on."""
        full = self._full_ms(int(robot_ms))
        self._last_ms, self._last_full = int(robot_ms) % _RANGE, full
        return full

    def state_stamp(self, arrival_ns: int, robot_ms: int) -> int:
        """The stamp (ns, host clock) of a RobotState sampled at ``robot_ms`` that arrived
        at ``arrival_ns``."""
        return self.stamp_at(arrival_ns, self.robot_ms(robot_ms))

    def stamp_at(self, arrival_ns: int, full_ms: int) -> int:
        """:meth:`state_stamp` of a state whose time :meth:`robot_ms` unwrapped already."""
        robot_ns = full_ms * _NS_PER_MS
        offset = arrival_ns - robot_ns
        window = self._window
        if window and abs(offset - window[0][1]) > self.jump_ns:
            window.clear()  # (a shrink: this computer's clock was set back, and so are
            self._last_stamp = None  # the stamps, with it)
        while window and window[-1][1] >= offset:
            window.pop()
        window.append((arrival_ns, offset))
        while window[0][0] < arrival_ns - self.window_ns:
            window.popleft()
        stamp = robot_ns + window[0][1]
        if self._last_stamp is not None and stamp <= self._last_stamp:
            stamp = self._last_stamp + 1
        self._last_stamp = stamp
        return stamp

    def frame_stamp(self, arrival_ns: int, frame_ms: int) -> int:
        """The stamp (ns, host clock) of a camera frame captured at ``frame_ms`` that was
        complete at ``arrival_ns``: its capture time, or its arrival when that cannot be
        told (counted in :attr:`frames_from_arrival`): no state yet, a capture time
        more than ``frame_age_s`` before the arrival or more than 20 ms after it, or a
        ``frame_ms`` of 0 (no time given) unless the robot's clock is just past 0
        (``_ZERO_FRAME_MS``: a frame captured at SyncTime)."""
        if self._window:
            full_ms = self._full_ms(int(frame_ms))
            if frame_ms == 0 and abs(self._last_full - full_ms) > _ZERO_FRAME_MS:
                self.frames_from_arrival += 1
                return arrival_ns
            stamp = full_ms * _NS_PER_MS + self._window[0][1]
            if arrival_ns - self.frame_age_ns <= stamp <= arrival_ns + _FRAME_AHEAD_NS:
                return min(stamp, arrival_ns)  # (a frame that came faster than any state)
        self.frames_from_arrival += 1
        return arrival_ns
