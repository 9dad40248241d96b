"""Activities: what the robot does when nothing happens.

An :class:`Activity` is a set of behaviors with a rule to choose among them,
and ``when`` conditions on the robot state (the ``charger`` activity applies
while ``on_charger: true``). The engine asks the :class:`ActivityChooser` for
the current activity (the applicable one of highest ``priority``) and, when the
robot is idle, for a behavior from it.

Each candidate's score is::

    weight x product over emotions of curve(emotion value) x repetition(seconds since it last ran)

``emotions`` maps an emotion to a curve of its value -> a factor (``get_bored``
scores high when ``stimulated`` is low), and ``repetition`` is a curve of the
seconds since the behavior last ended -> a factor (0.1 just after, 1.0 a
minute later), so the robot does not do the same thing twice in a row. A
behavior that cannot start now scores 0. The choice is random in proportion
to the scores, from a seeded generator: the same seed makes the same choices.
Pure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from .emotions import Curve
from .reactions import conditions_hold

__all__ = ["ActivityEntry", "Activity", "ActivityChooser"]


@dataclass(frozen=True)
class ActivityEntry:
    behavior: str
    weight: float = 1.0
    emotions: Mapping[str, Curve] = field(default_factory=dict)
    repetition: Optional[Curve] = None     # None: the activity's


@dataclass(frozen=True)
class Activity:
    name: str
    entries: Tuple[ActivityEntry, ...]
    when: Mapping[str, bool] = field(default_factory=dict)
    priority: int = 0
    #: seconds of rest after a behavior ends before the next is chosen
    idle_between: float = 2.0
    repetition: Optional[Curve] = None     # default repetition penalty of its entries


class ActivityChooser:
    """Picks the activity and, from it, the next behavior (see the module docstring)."""

    def __init__(self, activities: Iterable[Activity], rng: Optional[random.Random] = None) -> None:
        self.activities: List[Activity] = sorted(activities, key=lambda a: -a.priority)
        self.rng = rng or random.Random(0)

    def current(self, state: object) -> Optional[Activity]:
        for activity in self.activities:
            if conditions_hold(activity.when, state):
                return activity
        return None

    @staticmethod
    def scores(activity: Activity, emotions: Mapping[str, float], last_ended: Mapping[str, float],
               now: float, can_start: Callable[[str], bool]) -> Dict[str, float]:
        out: Dict[str, float] = {}
        for entry in activity.entries:
            score = entry.weight
            for emotion, curve in entry.emotions.items():
                score *= max(0.0, curve(emotions.get(emotion, 0.0)))
            curve = entry.repetition or activity.repetition
            last = last_ended.get(entry.behavior)
            if curve is not None and last is not None:
                score *= max(0.0, curve(now - last))
            if score > 0 and not can_start(entry.behavior):
                score = 0.0
            out[entry.behavior] = max(0.0, score)
        return out

    def choose(self, activity: Activity, emotions: Mapping[str, float],
               last_ended: Mapping[str, float], now: float,
               can_start: Callable[[str], bool]) -> Optional[str]:
        """A behavior name drawn in proportion to its score; None if every score is 0."""
        scores = self.scores(activity, emotions, last_ended, now, can_start)
        total = sum(scores.values())
        if total <= 0:
            return None
        pick = self.rng.random() * total
        for name, score in scores.items():
            if score <= 0:
                continue
            pick -= score
            if pick < 0:
                return name
        return max(scores, key=lambda n: scores[n])  # rounding at the very end
