"""Refused goals in the driver's log, throttled: one line per kind, with the count of the others.

A client that retries a goal which cannot run (drive_straight with a NaN distance at 5 Hz,
a play_audio file that is not there, any goal while the driver is inactive) had each
refusal logged, at its rate. :func:`goal_refusal` gives the line of the first of a kind at
once and counts the others into the next line of that kind (or the one that
:meth:`~cozmo_driver.log_throttle.LogThrottle.overdue` gives once the period is over), as
the topics' refusals are. A kind is the action, what became of the goal and its reason
without the values in it (:func:`~cozmo_driver.log_throttle.value_kind`)."""

from __future__ import annotations

import time
from typing import Any, Optional

from ..core.notes import STATE_WARN_PERIOD_S, WARN_PERIOD_S
from ..log_throttle import LogThrottle, value_kind
from .driver_support import ESTOP_REFUSAL, NOT_CONNECTED_REFUSAL, inactive_refusal

__all__ = ["goal_refusal"]


def goal_refusal(throttle: LogThrottle, node: Any, action: str, verdict: str, reason: str) -> Optional[str]:
    """The line to log for a goal of ``action`` ``verdict`` ("rejected", "aborted") for
    ``reason``, or None: held back and counted. A reason of the driver's state (``node``
    inactive, emergency stop, not connected), which a client repeats for as long as that
    lasts, is said at most every STATE_WARN_PERIOD_S, as the core's; the others every
    WARN_PERIOD_S."""
    state = reason in (inactive_refusal(node), ESTOP_REFUSAL, NOT_CONNECTED_REFUSAL)
    return throttle.line(f"{action} goal {verdict}: {value_kind(reason)}", f"{action} goal {verdict}: {reason}",
                         time.monotonic(), STATE_WARN_PERIOD_S if state else WARN_PERIOD_S)
