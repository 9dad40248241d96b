"""Repeated log lines, throttled with a count. Pure: time is an argument.

A warning that can repeat at the rate of its cause (a refused command at
30 Hz, a re-anchored odometry on every forged robot state, a malformed
message) is said once per ``period_s`` for each kind (``key``): the first
event of a kind is said at once, the ones that follow within the period are
counted, and the next line of that kind says how many were left unsaid::

    throttle = LogThrottle(2.0)
    line = throttle.line("cmd_vel", "cmd_vel refused: ...", now)
    if line is not None:
        log.warning(line)   # "cmd_vel refused: ... (and 57 more like it in the last 2.3 s)"

The events held back of a kind that then falls quiet are not lost:
:meth:`LogThrottle.overdue`, called now and then (the nodes' 1 s timers), gives
the last of them once the kind's period is over, with the count of the others.
:meth:`LogThrottle.pending` tells how many wait.
"""

from __future__ import annotations

import threading
from typing import Dict, List, Optional, Tuple

__all__ = ["LogThrottle", "field_kind"]


def field_kind(text: str) -> str:
    """The kind of a warning for :class:`LogThrottle`: the field it names, not its values.
    ``"<topic> refused: <field> ..."`` is ``"<topic> <field>"``; any other text, its first
    word (``"<field> = 12 s is outside ..."``). So a mistake in another field is said at
    once, and a value that changes every time does not make a kind of its own."""
    topic, refused, reason = text.partition(" refused: ")
    return f"{topic} {reason.split(' ', 1)[0]}" if refused else text.split(" ", 1)[0]


class LogThrottle:
    """One line per ``period_s`` per key, with the count of those left unsaid. Thread-safe."""

    def __init__(self, period_s: float) -> None:
        if not period_s >= 0.0:
            raise ValueError(f"period_s = {period_s}: must be >= 0")
        self.period_s = float(period_s)
        self._lock = threading.Lock()
        # key -> (when last said, unsaid since, the last unsaid line, the kind's period)
        self._kinds: Dict[str, Tuple[float, int, Optional[str], float]] = {}

    def due(self, key: str, now: float, period_s: Optional[float] = None,
            text: Optional[str] = None) -> Optional[Tuple[int, float]]:
        """``None``: not now (this event, whose line is ``text``, is counted); else
        ``(unsaid, seconds)``: the events of this kind left unsaid since its last line, said
        that many seconds ago (the caller says one now)."""
        period = self.period_s if period_s is None else float(period_s)
        with self._lock:
            said, unsaid, _, _ = self._kinds.get(key, (None, 0, None, period))
            if said is not None and now - said < period:
                self._kinds[key] = (said, unsaid + 1, text, period)
                return None
            self._kinds[key] = (now, 0, None, period)
            return unsaid, (now - said if said is not None else 0.0)

    def line(self, key: str, text: str, now: float, period_s: Optional[float] = None) -> Optional[str]:
        """``text`` with the count of the lines left unsaid, or ``None`` when not due."""
        due = self.due(key, now, period_s, text)
        if due is None:
            return None
        return _counted(text, *due)

    def overdue(self, now: float) -> List[Tuple[str, str]]:
        """``(key, line)`` of each kind whose events were held back and whose period is
        over: the last one's line, with the count of the others; each is then said."""
        lines = []
        with self._lock:
            for key, (said, unsaid, text, period) in self._kinds.items():
                if unsaid and text is not None and now - said >= period:
                    lines.append((key, _counted(text, unsaid - 1, now - said)))
                    self._kinds[key] = (now, 0, None, period)
        return lines

    def pending(self, key: str) -> int:
        """How many events of ``key`` were counted and not said yet."""
        with self._lock:
            return self._kinds.get(key, (None, 0, None, 0.0))[1]


def _counted(text: str, unsaid: int, since: float) -> str:
    if unsaid == 0:
        return text
    return f"{text} (and {unsaid} more like it in the last {since:.1f} s)"
