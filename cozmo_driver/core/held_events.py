"""Events that come while the driver is inactive: held for its activation, or only logged.

A robot client's link opens before the driver that opened it is active: the front-end
activates the core right after the link opened (on its own thread), and a loaded machine
lets the robot connect and send its first events (its head and lift starting to calibrate,
the cubes it hears) in between. Those events, and only those, are held: from
:meth:`EventHold.arm` (a new robot client, not yet active) until :meth:`EventHold.release`
(its activation), the last :data:`HELD_EVENTS_MAX` of them, which then go out in the order
they came, with the stamps they came with, and are logged as they go out (a moment after
the line that says the link opened). Events that come while a user keeps the driver
inactive (a lifecycle deactivation, or once it is released) are not held: while inactive
the driver publishes no sample, and events of an unknown time ago, published at the next
activation, would report as news what may no longer be true; each is logged as it comes,
saying so. Not thread-safe: the caller holds its own lock. Pure.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable, Deque, Optional, Sequence, Tuple

__all__ = ["EventHold", "HELD_EVENTS_MAX", "NOT_PUBLISHED"]

#: at most this many events are held for the activation (the latest: older ones are dropped)
HELD_EVENTS_MAX = 64
#: what a line of an event that is only logged adds
NOT_PUBLISHED = "(not published: the driver is inactive)"


class EventHold:
    """Events of one kind (``kind``: "robot event", "object event"), each with a
    ``description``, coming while the driver is inactive. ``note(level, text)`` logs."""

    def __init__(self, note: Callable[[int, str], None], kind: str, limit: int = HELD_EVENTS_MAX,
                 armed: bool = True) -> None:
        self._note = note
        self.kind = kind
        self.limit = limit
        self._held: Optional[Deque[Tuple[Any, Any]]] = None
        self.dropped = 0
        if armed:
            self.arm()

    def arm(self) -> None:
        """A new robot client, not yet active: its events are held until :meth:`release`."""
        self._held, self.dropped = deque(maxlen=self.limit), 0

    def disarm(self) -> None:
        """Inactive by a user's choice (or released): events are only logged; what was held is
        forgotten."""
        self._held, self.dropped = None, 0

    def came(self, stamp: Any, events: Sequence[Any]) -> None:
        """Events that came while the driver is inactive, stamped ``stamp``: held, or logged."""
        held = self._held
        for event in events:
            if held is None:
                self._note(logging.INFO, f"{self.kind}: {event.description} {NOT_PUBLISHED}")
                continue
            if len(held) == held.maxlen:
                self.dropped += 1
            held.append((stamp, event))

    def release(self, publish: Callable[[Any, list], None]) -> None:
        """The activation: ``publish(stamp, [event])`` each event held, in order (none is
        held any more from here on); the count of those dropped is said once."""
        held, dropped = self._held or (), self.dropped
        self.disarm()
        if dropped:
            self._note(logging.WARNING, f"{dropped} {self.kind}s that came before the driver was active "
                                        f"were dropped: only the last {self.limit} are published")
        for stamp, event in held:
            publish(stamp, [event])
