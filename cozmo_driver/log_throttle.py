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
the last of them once the kind's period is over, with the count of the others and
the level the kind's lines are said at.
:meth:`LogThrottle.pending` tells how many wait; :meth:`LogThrottle.flush` gives them
all at once (before a line that changes what they describe), and
:meth:`LogThrottle.forget` drops them when what they say has stopped being true
(:meth:`LogThrottle.drop` too, keeping the kind's period).

A kind whose period is over with nothing held back is as good as never seen: a throttle that
holds many kinds forgets those (:data:`PRUNE_AT`), so that kinds named after what a client
chose (an animation's name or a frame id in a refused goal's reason) do not pile up for the
life of the node.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

__all__ = ["LogThrottle", "PRUNE_AT", "field_kind", "value_kind", "counted"]

#: a value as a message gives it (12, -0.5, 1e+09, 0x4d, nan, inf, 127.0.0.1), not within a name (cube1)
_VALUE = re.compile(r"(?<![\w.])[-+]?(?:0x[0-9a-f]+|nan|inf|(?:\d+(?:\.\d+)*\.?|\.\d+)(?:e[-+]?\d+)?)(?![\w])",
                    re.IGNORECASE)
#: a kind is known by this many characters at most (a reason quoting a long text)
_KIND_CHARS = 120
#: a throttle holding this many kinds forgets the quiet ones (period over, nothing held back)
#: when a new kind comes; then again once it holds twice as many as were left
PRUNE_AT = 64


def field_kind(text: str) -> str:
    """The kind of a warning for :class:`LogThrottle`: the field it names, not its values.
    ``"<topic> refused: <field> ..."`` is ``"<topic> <field>"``; any other text, its first
    word (``"<field> = 12 s is outside ..."``). So a mistake in another field is said at
    once, and a value that changes every time does not make a kind of its own."""
    topic, refused, reason = text.partition(" refused: ")
    return f"{topic} {reason.split(' ', 1)[0]}" if refused else text.split(" ", 1)[0]


def value_kind(text: str) -> str:
    """The kind of a reason for :class:`LogThrottle`: its text with the values in it (numbers,
    nan, inf) left out, so that ``"distance is nan: ..."`` and ``"distance is inf: ..."`` are
    one kind and ``"speed is nan: ..."`` another (a refused goal, whose reasons name no field
    first)."""
    return _VALUE.sub("#", text)[:_KIND_CHARS]


class _Kind(NamedTuple):
    said: Optional[float]  # when its last line was said
    unsaid: int  # its events counted since
    text: Optional[str]  # the last unsaid one's line
    period: float
    level: int  # the level its lines are said at (for its overdue line)


class LogThrottle:
    """One line per ``period_s`` per key, with the count of those left unsaid. Thread-safe."""

    def __init__(self, period_s: float) -> None:
        if not period_s >= 0.0:
            raise ValueError(f"period_s = {period_s}: must be >= 0")
        self.period_s = float(period_s)
        self._lock = threading.Lock()
        self._kinds: Dict[str, _Kind] = {}
        self._prune_at = PRUNE_AT

    def due(self, key: str, now: float, period_s: Optional[float] = None,
            text: Optional[str] = None, level: int = logging.WARNING) -> Optional[Tuple[int, float]]:
        """``None``: not now (this event, whose line is ``text``, is counted); else
        ``(unsaid, seconds)``: the events of this kind left unsaid since its last line, said
        that many seconds ago (the caller says one now, at ``level``)."""
        period = self.period_s if period_s is None else float(period_s)
        with self._lock:
            kind = self._kinds.get(key)
            if kind is not None and kind.said is not None and now - kind.said < period:
                self._kinds[key] = _Kind(kind.said, kind.unsaid + 1, text, period, level)
                return None
            if kind is None and len(self._kinds) >= self._prune_at:
                self._forget_quiet(now)
            self._kinds[key] = _Kind(now, 0, None, period, level)
            if kind is None or kind.said is None:
                return 0, 0.0
            return kind.unsaid, now - kind.said

    def line(self, key: str, text: str, now: float, period_s: Optional[float] = None,
             level: int = logging.WARNING) -> Optional[str]:
        """``text`` with the count of the lines left unsaid, or ``None`` when not due. ``level``
        (a :mod:`logging` level) is what the caller says it at: :meth:`overdue` gives it back."""
        due = self.due(key, now, period_s, text, level)
        if due is None:
            return None
        return counted(text, *due)

    def overdue(self, now: float) -> List[Tuple[str, str, int]]:
        """``(key, line, level)`` of each kind whose events were held back and whose period is
        over: the last one's line, with the count of the others, and the level its kind was
        last given; each is then said, and its kind's period starts again from it."""
        return self._held_back(now, due_only=True)

    def flush(self, now: float, key: Optional[str] = None,
              keep: Tuple[str, ...] = ()) -> List[Tuple[str, str, int]]:
        """:meth:`overdue` for every kind (or only ``key``) now, its period over or not: said
        before a line that changes what they describe ("connected again" after "not
        connected" refusals). The kinds in ``keep`` stay held back and throttled: the line
        does not change what they describe."""
        return self._held_back(now, due_only=False, only=key, keep=keep)

    def _held_back(self, now: float, due_only: bool, only: Optional[str] = None,
                   keep: Tuple[str, ...] = ()) -> List[Tuple[str, str, int]]:
        lines = []
        with self._lock:
            for key, kind in self._kinds.items():
                if only is not None and key != only or key in keep:
                    continue
                if kind.unsaid and kind.text is not None and (
                        not due_only or now - kind.said >= kind.period):
                    lines.append((key, counted(kind.text, kind.unsaid - 1, now - kind.said),
                                  kind.level))
                    self._kinds[key] = _Kind(now, 0, None, kind.period, kind.level)
        return lines

    def _forget_quiet(self, now: float) -> None:
        """(Under the lock.) Drop the kinds whose period is over with nothing held back: their
        next event is said at once, as it would be anyway."""
        self._kinds = {key: kind for key, kind in self._kinds.items()
                       if kind.unsaid or (kind.said is not None and now - kind.said < kind.period)}
        self._prune_at = max(PRUNE_AT, 2 * len(self._kinds))

    def forget(self, key: str) -> None:
        """Drop what is held back of ``key`` and its period: what it said is no longer true
        (a robot that "does not answer" answered), and its next event is said at once."""
        with self._lock:
            self._kinds.pop(key, None)

    def drop(self, key: str) -> int:
        """Drop what is held back of ``key``, its period kept (a cause that repeats goes on
        being throttled): what it said is no longer true, and the caller says what replaces
        it. Returns how many events were dropped."""
        with self._lock:
            kind = self._kinds.get(key)
            if kind is None or not kind.unsaid:
                return 0
            self._kinds[key] = _Kind(kind.said, 0, None, kind.period, kind.level)
            return kind.unsaid

    def pending(self, key: str) -> int:
        """How many events of ``key`` were counted and not said yet."""
        with self._lock:
            kind = self._kinds.get(key)
            return kind.unsaid if kind is not None else 0


def counted(text: str, unsaid: int, since: float) -> str:
    """``text`` with the count of the lines of its kind left unsaid in the last ``since`` s."""
    if unsaid == 0:
        return text
    return f"{text} (and {unsaid} more like it in the last {since:.1f} s)"
