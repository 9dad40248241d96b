"""Two sessions joined by an in-memory link, driven by an explicit clock.

For deterministic tests and the in-memory simulator front-end: no sockets, no
threads, no real time. Each direction can lose, duplicate, delay and reorder
datagrams with a seeded random generator, so every run is reproducible.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple

from ..protocol.session import Session

__all__ = ["Impairment", "MemoryLink"]


@dataclass
class Impairment:
    """What happens to datagrams in one direction. Probabilities are 0..1."""

    loss: float = 0.0
    duplicate: float = 0.0
    #: probability that a datagram is held back by an extra random delay (reordering)
    reorder: float = 0.0
    #: fixed one-way delay in seconds
    delay: float = 0.0
    #: the extra delay of a reordered datagram is uniform in [0, reorder_delay]
    reorder_delay: float = 0.02

    def __post_init__(self) -> None:
        for name in ("loss", "duplicate", "reorder"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within 0..1, got {value}")
        if self.delay < 0 or self.reorder_delay < 0:
            raise ValueError("delays must be >= 0")


@dataclass(order=True)
class _InFlight:
    arrival: float
    order: int
    to_b: bool = field(compare=False)
    data: bytes = field(compare=False)


class MemoryLink:
    """Carries datagrams between session ``a`` (usually the engine) and ``b``.

    ``run_until(t)`` advances the clock, firing timers and deliveries in time
    order; ``on_event_a``/``on_event_b`` callbacks see every event the sessions
    emit (or leave them queued when ``None``).
    """

    def __init__(self, a: Session, b: Session, a_to_b: Optional[Impairment] = None,
                 b_to_a: Optional[Impairment] = None, seed: int = 0, now: float = 0.0) -> None:
        self.a = a
        self.b = b
        self.a_to_b = a_to_b or Impairment()
        self.b_to_a = b_to_a or Impairment()
        self.rng = random.Random(seed)
        self.now = now
        self._queue: List[_InFlight] = []
        self._order = 0
        self.on_event_a: Optional[Callable[[Any], None]] = None
        self.on_event_b: Optional[Callable[[Any], None]] = None
        #: every datagram put on the link: (time, "a->b" or "b->a", bytes)
        self.trace: Optional[List[Tuple[float, str, bytes]]] = None
        self.delivered = 0
        self.dropped = 0

    def _transmit(self, data: bytes, to_b: bool) -> None:
        imp = self.a_to_b if to_b else self.b_to_a
        if self.trace is not None:
            self.trace.append((self.now, "a->b" if to_b else "b->a", data))
        rng = self.rng
        copies = 2 if imp.duplicate and rng.random() < imp.duplicate else 1
        for _ in range(copies):
            if imp.loss and rng.random() < imp.loss:
                self.dropped += 1
                continue
            arrival = self.now + imp.delay
            if imp.reorder and rng.random() < imp.reorder:
                arrival += rng.random() * imp.reorder_delay
            self._order += 1
            heapq.heappush(self._queue, _InFlight(arrival, self._order, to_b, data))

    def flush(self) -> None:
        """Send whatever both sessions have ready at the current time."""
        for data in self.a.datagrams_to_send(self.now):
            self._transmit(data, True)
        for data in self.b.datagrams_to_send(self.now):
            self._transmit(data, False)
        self._drain_events()

    def _drain_events(self) -> None:
        for session, callback in ((self.a, self.on_event_a), (self.b, self.on_event_b)):
            if callback is None:
                continue
            while True:
                event = session.next_event()
                if event is None:
                    break
                callback(event)

    def next_deadline(self) -> Optional[float]:
        times = [t for t in (self.a.get_timer(), self.b.get_timer()) if t is not None]
        if self._queue:
            times.append(self._queue[0].arrival)
        return min(times) if times else None

    def step(self, limit: float) -> bool:
        """Advance to the next deadline not after ``limit``; False when there is none."""
        deadline = self.next_deadline()
        if deadline is None or deadline > limit:
            self.now = max(self.now, limit)
            return False
        self.now = max(self.now, deadline)
        while self._queue and self._queue[0].arrival <= self.now:
            item = heapq.heappop(self._queue)
            target = self.b if item.to_b else self.a
            target.receive_datagram(item.data, self.now)
            self.delivered += 1
        for session in (self.a, self.b):
            timer = session.get_timer()
            if timer is not None and timer <= self.now:
                session.handle_timer(self.now)
        self.flush()
        return True

    def run_until(self, t: float, max_steps: int = 1_000_000) -> None:
        """Advance the clock to ``t``. Bounded: raises if it takes more than ``max_steps``."""
        self.flush()
        for _ in range(max_steps):
            if not self.step(t):
                return
        raise RuntimeError(f"link did not settle within {max_steps} steps (now={self.now})")

    def run_while(self, predicate: Callable[[], bool], timeout: float, max_steps: int = 1_000_000) -> bool:
        """Advance while ``predicate()`` holds, at most ``timeout`` seconds; True if it stopped holding."""
        end = self.now + timeout
        self.flush()
        for _ in range(max_steps):
            if not predicate():
                return True
            if not self.step(end):
                return not predicate()
        raise RuntimeError(f"link did not settle within {max_steps} steps (now={self.now})")
