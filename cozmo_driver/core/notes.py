"""The driver core's log: its lines go to the front-end (``output.note``), those that a
cause may repeat throttled per kind with the count of the others; and why a command is
refused for the driver's state, with the way out (a part of
:class:`~cozmo_driver.core.DriverCore`)."""

from __future__ import annotations

import logging
from typing import Optional, Tuple

from ..client import LinkState
from ..driver.commands import ESTOP_REFUSAL, NOT_CONNECTED_REFUSAL, inactive_refusal
from ..log_throttle import counted, field_kind

__all__ = ["NotesMixin", "STATE_WARN_PERIOD_S", "WARN_PERIOD_S"]

#: a kind of warning is said at most once per this many seconds (with the count of the others)
WARN_PERIOD_S = 2.0
#: the same for commands refused because of the driver's state (not active, not connected,
#: emergency stop), which a teleop repeats for as long as that lasts
STATE_WARN_PERIOD_S = 10.0


class NotesMixin:
    """Needs ``output``, ``throttle`` (a LogThrottle), ``clock`` and ``refused`` with its
    ``_refused_lock``; for the refusals, ``active``, ``estop``, ``suspending``, ``robot`` and
    ``link_state``."""

    def _log(self, level: int, text: str) -> None:
        self.output.note(level, text)

    def log_throttled(self, level: int, key: str, text: str, period: float = WARN_PERIOD_S,
                      later: Optional[str] = None) -> None:
        """Say ``text`` unless a line of kind ``key`` was said in the last ``period`` s; the
        next line of that kind (or :meth:`say_overdue`) says how many were left unsaid.
        ``later``: what is said instead when it is held back, without what would be stale
        by then (a retry time)."""
        due = self.throttle.due(key, self.clock(), period, text if later is None else later, level)
        if due is not None:
            self._log(level, counted(text, *due))

    def say_overdue(self) -> None:
        """The lines held back of each kind that then fell quiet (the node's 1 s timer)."""
        for _, line, level in self.throttle.overdue(self.clock()):
            self._log(level, line)

    def say_held_back(self, keep: Tuple[str, ...] = ()) -> None:
        """Every line held back, now: before a line that changes what they describe (a lost
        robot's refusals before "connected again"), not a second after it; the front-end's
        too (``output.say_held_back``: its display and light refusals). The kinds in ``keep``
        stay held back: the line does not change what they say."""
        for _, line, level in self.throttle.flush(self.clock(), keep=keep):
            self._log(level, line)
        self.output.say_held_back()

    def warn_throttled(self, key: str, text: str, period: float = WARN_PERIOD_S) -> None:
        self.log_throttled(logging.WARNING, key, text, period)

    def refuse(self, key: str, text: str, period: float = WARN_PERIOD_S) -> None:
        """Count a refused command and warn (throttled per ``key``)."""
        with self._refused_lock:
            self.refused += 1
        self.warn_throttled(key, text, period)

    def refuse_field(self, text: str) -> None:
        """:meth:`refuse`, one kind per field that ``text`` names (:func:`field_kind`)."""
        self.refuse(field_kind(text), text)

    def not_ready(self, motion: bool) -> Optional[Tuple[str, str]]:
        """(kind, why, with the way out) a command may not go to the robot now, or None."""
        if not self.active:  # (the robot client's name is the node's fully qualified one)
            return "inactive", inactive_refusal(getattr(getattr(self.robot, "link", None), "name", "<driver>"))
        if motion and self.estop:
            return "estop", ESTOP_REFUSAL
        if motion and self.suspending:
            return "suspended", "the driver is being suspended (Ctrl-Z)"
        if self.robot is None or self.link_state is not LinkState.READY:
            return "offline", NOT_CONNECTED_REFUSAL
        return None

    def ready(self, topic: str, motion: bool) -> bool:
        """May a command from ``topic`` go to the robot now? Refuses (warns, throttled per
        topic and reason: a teleop's refusals hide no other topic's) when not."""
        refused = self.not_ready(motion)
        if refused is not None:
            self.refuse(f"{refused[0]} {topic}", f"{topic} refused: {refused[1]}", STATE_WARN_PERIOD_S)
            return False
        return True
