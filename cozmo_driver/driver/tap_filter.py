"""Which of the cubes' taps and moves are worth publishing, as Anki's engine decided.
Pure (no rclpy, no clock: every input takes ``now``, seconds on any monotonic origin).

A cube reports a tap whenever its accelerometer feels a shock: the robot driving by,
one cube knocked against another, a tap on the table all give taps too, weak ones
and several at once. Anki's engine (BlockTapFilterComponent, and BlockWorld's
handling of moves) published only some of them, and :class:`TapFilter` does the same:

* a tap of intensity (tap_pos - tap_neg) :data:`TAP_INTENSITY_MIN` or less is dropped;
* the first tap kept opens a group of :data:`TAP_GROUP_S` (over all the cubes): when it
  is over, the strongest tap of the group is published (the first of equals), the others
  are dropped, being the echoes of one shock;
* a tap shakes its cube: a move that the cube reports within :data:`MOVE_QUIET_S` of a
  kept tap, while it was not moving, is dropped (so the stop that ends it has no move to
  end);
* the charger's moves are dropped (Anki's engine: "garbage move messages").

Switched off (the driver's ``filter_object_events`` false), everything the robot reports
is published. Counts of what was dropped are in :attr:`TapFilter.counters`.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["TAP_INTENSITY_MIN", "TAP_GROUP_S", "MOVE_QUIET_S", "TapFilter"]

#: taps of this intensity or less are noise (Anki: TapFilter.IntesityMin 60)
TAP_INTENSITY_MIN = 60
#: taps this long after the first of a group are the same shock (Anki: TapFilter.WaitOffsetTime, 75 ms)
TAP_GROUP_S = 0.075
#: moves this long after a tap are the tap's (Anki: TapFilter.IgnoreMoveTimeAfterDoubleTap, 500 ms)
MOVE_QUIET_S = 0.5

WEAK = f"taps not published: intensity {TAP_INTENSITY_MIN} or less"
OUTDONE = f"taps not published: a stronger one within {TAP_GROUP_S * 1000:.0f} ms"
SHAKEN = "moves not published: caused by a tap"
CHARGER = "moves not published: the charger's"


class TapFilter:
    """See the module docstring. The records held are the caller's (any object)."""

    def __init__(self) -> None:
        self._group: List[Tuple[float, Any, int]] = []   # (intensity, record, key), in arrival order
        #: when the open group is due (inf: none is open)
        self.due_at = math.inf
        #: object key -> until when its moves are a tap's
        self._quiet_until: Dict[int, float] = {}
        self.counters: Dict[str, int] = {WEAK: 0, OUTDONE: 0, SHAKEN: 0, CHARGER: 0}

    def tap(self, key: int, intensity: float, record: Any, moving: bool, now: float) -> None:
        """A tap of object ``key`` (``moving``: it was moving already). Kept or dropped;
        a kept one comes out of :meth:`due` when its group is over (call :meth:`due` first:
        a group over by ``now`` would take this tap in)."""
        if intensity <= TAP_INTENSITY_MIN:
            self.counters[WEAK] += 1
            return
        if not self._group:
            self.due_at = now + TAP_GROUP_S
        self._group.append((intensity, record, key))
        if not moving:
            self._quiet_until[key] = now + MOVE_QUIET_S

    def due(self, now: float) -> Optional[Any]:
        """The strongest tap of a group that is over (once), else None."""
        if not self._group or now < self.due_at:
            return None
        best = max(self._group, key=lambda g: g[0])   # max keeps the first of equals
        self.counters[OUTDONE] += len(self._group) - 1
        self._group.clear()
        self.due_at = math.inf
        return best[1]

    def flush(self) -> Optional[Any]:
        """The strongest tap held, at once (switched off, or shutting down)."""
        return self.due(self.due_at)

    def move(self, key: int, charger: bool, now: float) -> bool:
        """Whether object ``key``'s report that it started moving is published."""
        if charger:
            self.counters[CHARGER] += 1
            return False
        if now < self._quiet_until.get(key, -math.inf):
            self.counters[SHAKEN] += 1
            return False
        return True

    def forget(self, key: int) -> Optional[Any]:
        """Object ``key`` disconnected: its taps' quiet time is void, and a group holding one of
        its taps is over at once: its strongest tap, to publish before the disconnection (None:
        no group holds one of its taps)."""
        self._quiet_until.pop(key, None)
        if any(k == key for _, _, k in self._group):
            return self.flush()
        return None
