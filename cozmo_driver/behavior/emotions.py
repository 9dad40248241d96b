"""Emotions: named values that events push and time pulls back to rest.

Each emotion (:class:`EmotionSpec`) has a range, a resting value it decays
towards and a decay law, one of:

* ``half_life`` (s): exponential; the distance from rest halves every
  ``half_life`` seconds (0: no decay);
* ``decay``, a :class:`Curve` of seconds since the last change -> the fraction
  of the distance from rest still held then (1 at 0 s, falling to 0): a
  piecewise-linear decay graph, as the Cozmo app's mood configuration has them.

The value is never stepped by a timer: an emotion keeps the value it was set
to and when (its anchor), and :meth:`Emotions.value` computes
``rest + (anchored - rest) * decay(now - anchor_time)``, so any ``now`` gives
the exact value the configuration says, whatever the tick rate. A change at
``now`` adds to the decayed value, clamps it to the range and re-anchors.

Emotion events (:class:`EmotionEvent`) are named sets of changes ("cliff_detected":
confident -0.15, calm -0.3). The same event repeated soon after itself is
dampened: its changes are multiplied by the repetition penalty curve at the
seconds since it was last applied (the event's own curve, else the model's).

Time is an argument everywhere; nothing here sleeps or reads a clock. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

__all__ = ["Curve", "EmotionSpec", "EmotionEvent", "Emotions"]


@dataclass(frozen=True)
class Curve:
    """A piecewise-linear function given by points (x, y), x strictly increasing;
    constant beyond the first and the last point."""

    points: Tuple[Tuple[float, float], ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("a curve needs at least one point")
        xs = [p[0] for p in self.points]
        if any(b <= a for a, b in zip(xs, xs[1:])):
            raise ValueError(f"the x values of a curve must increase: {xs}")
        if not all(math.isfinite(v) for p in self.points for v in p):
            raise ValueError("curve points must be finite numbers")

    @classmethod
    def of(cls, points: Iterable[Sequence[float]]) -> "Curve":
        return cls(tuple((float(x), float(y)) for x, y in points))

    @classmethod
    def constant(cls, y: float) -> "Curve":
        return cls(((0.0, float(y)),))

    def __call__(self, x: float) -> float:
        pts = self.points
        if x <= pts[0][0]:
            return pts[0][1]
        if x >= pts[-1][0]:
            return pts[-1][1]
        lo, hi = 0, len(pts) - 1
        while hi - lo > 1:  # bisection: bounded by log2(len) steps
            mid = (lo + hi) // 2
            if pts[mid][0] <= x:
                lo = mid
            else:
                hi = mid
        (x0, y0), (x1, y1) = pts[lo], pts[hi]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@dataclass(frozen=True)
class EmotionSpec:
    """One emotion: its range, resting value, starting value and decay law."""

    name: str
    minimum: float = -1.0
    maximum: float = 1.0
    rest: float = 0.0
    initial: Optional[float] = None     # None: rest
    half_life: float = 60.0             # s; 0: no decay; ignored when decay is set
    decay: Optional[Curve] = None       # seconds since the last change -> fraction held

    def __post_init__(self) -> None:
        if not self.minimum < self.maximum:
            raise ValueError(f"emotion {self.name}: min {self.minimum} must be below max {self.maximum}")
        for what, value in (("rest", self.rest), ("initial", self.start_value)):
            if not self.minimum <= value <= self.maximum:
                raise ValueError(f"emotion {self.name}: {what} {value} is outside "
                                 f"{self.minimum}..{self.maximum}")
        if self.half_life < 0:
            raise ValueError(f"emotion {self.name}: half_life must be >= 0")

    @property
    def start_value(self) -> float:
        return self.rest if self.initial is None else float(self.initial)

    def held(self, elapsed: float) -> float:
        """The fraction of the distance from rest still held ``elapsed`` seconds after a change."""
        if elapsed <= 0:
            return 1.0
        if self.decay is not None:
            return min(1.0, max(0.0, self.decay(elapsed)))
        if self.half_life <= 0:
            return 1.0
        return 0.5 ** (elapsed / self.half_life)


@dataclass(frozen=True)
class EmotionEvent:
    """A named set of emotion changes, e.g. ``cliff_detected``: {confident: -0.15}."""

    name: str
    changes: Mapping[str, float]
    repetition_penalty: Optional[Curve] = None  # None: the model's default
    #: s: the trigger of its name arriving sooner after it last applied the event does not apply
    #: it (the engine's rule: a trigger posted with every camera frame moves the mood no faster)
    min_interval: float = 0.0


@dataclass
class _State:
    value: float          # at anchor time
    since: float          # anchor time


class Emotions:
    """The current mood: every emotion's value at any ``now``. See the module docstring."""

    def __init__(self, specs: Iterable[EmotionSpec], events: Iterable[EmotionEvent] = (),
                 repetition_penalty: Optional[Curve] = None, now: float = 0.0) -> None:
        self.specs: Dict[str, EmotionSpec] = {}
        for spec in specs:
            self.specs[spec.name] = spec
        self.events: Dict[str, EmotionEvent] = {e.name: e for e in events}
        self.repetition_penalty = repetition_penalty
        self._state = {name: _State(spec.start_value, now) for name, spec in self.specs.items()}
        self._last_event: Dict[str, float] = {}
        #: changes since :meth:`take_changed` was last called
        self._changed = False

    # ------------------------------------------------------------------ reading

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(self.specs)

    def value(self, name: str, now: float) -> float:
        spec = self.specs[name]
        state = self._state[name]
        return spec.rest + (state.value - spec.rest) * spec.held(now - state.since)

    def values(self, now: float) -> Dict[str, float]:
        return {name: self.value(name, now) for name in self.specs}

    def take_changed(self) -> bool:
        """Whether an event or a direct change happened since the last call."""
        changed, self._changed = self._changed, False
        return changed

    # ------------------------------------------------------------------ changing

    def add(self, name: str, delta: float, now: float) -> float:
        """Add ``delta`` to the emotion's current value (clamped); returns the new value."""
        spec = self.specs[name]
        value = min(spec.maximum, max(spec.minimum, self.value(name, now) + float(delta)))
        self._state[name] = _State(value, now)
        self._changed = True
        return value

    def set(self, name: str, value: float, now: float) -> float:
        spec = self.specs[name]
        value = min(spec.maximum, max(spec.minimum, float(value)))
        self._state[name] = _State(value, now)
        self._changed = True
        return value

    def penalty(self, event: str, now: float) -> float:
        """The multiplier of ``event``'s changes if it were applied at ``now``."""
        last = self._last_event.get(event)
        if last is None:
            return 1.0
        ev = self.events.get(event)
        curve = (ev.repetition_penalty if ev is not None and ev.repetition_penalty is not None
                 else self.repetition_penalty)
        return 1.0 if curve is None else max(0.0, curve(now - last))

    def apply(self, event: str, now: float, scale: float = 1.0) -> Dict[str, float]:
        """Apply the named event (dampened by its repetition penalty); returns
        {emotion: change applied}; an event that is not configured changes nothing."""
        ev = self.events.get(event)
        if ev is None:
            return {}
        return self.apply_changes(ev.changes, now, scale=scale, key=event)

    def apply_changes(self, changes: Mapping[str, float], now: float, scale: float = 1.0,
                      key: Optional[str] = None) -> Dict[str, float]:
        """Apply explicit changes; with ``key`` they count as that event for the repetition penalty."""
        factor = scale * (self.penalty(key, now) if key is not None else 1.0)
        if key is not None:
            self._last_event[key] = now
        applied: Dict[str, float] = {}
        for name, delta in changes.items():
            if name not in self.specs:
                continue
            before = self.value(name, now)
            after = self.add(name, float(delta) * factor, now)
            applied[name] = after - before
        return applied
