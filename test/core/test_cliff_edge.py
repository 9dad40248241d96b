"""driver.sensors.CliffEdgeTracker: a drop under the cliff sensor of a robot on its treads,
held CLIFF_EDGE_HOLD_S (Anki's firmware's delay before its cliff event, which a pick-up
cancels), is an edge of its floor (cliff/points)."""

from __future__ import annotations

import math

from cozmo_driver.driver.sensors import CLIFF_EDGE_HOLD_S, CliffEdgeTracker

STEP = 0.03  # the robot's state period


def run(tracker, states, t0=0.0):
    """Feed (drop, on_treads) states 30 ms apart; the changes, as (state index, stamp, edge)."""
    out = []
    for i, (drop, on_treads) in enumerate(states):
        t = t0 + i * STEP
        change = tracker.update(t, int(t * 1e9), drop, on_treads)
        if change is not None:
            out.append((i, *change))
    return out


def test_a_drop_held_on_the_treads_is_an_edge_stamped_when_it_appeared():
    n = math.ceil(CLIFF_EDGE_HOLD_S / STEP)  # states after the first drop's
    tracker = CliffEdgeTracker()
    changes = run(tracker, [(False, True)] * 3 + [(True, True)] * (n + 3) + [(False, True)] * 2)
    assert changes == [(3 + n, int(3 * STEP * 1e9), True), (3 + n + 3, int((6 + n) * STEP * 1e9), False)]
    assert not tracker.edge


def test_a_pick_up_within_the_hold_cancels_it():
    # lifted: the sensor loses the floor first, the robot says it is picked up a little later
    n = math.ceil(CLIFF_EDGE_HOLD_S / STEP)  # states after the first drop's
    tracker = CliffEdgeTracker()
    assert run(tracker, [(True, True)] * (n - 2) + [(True, False)] * 50 + [(True, True)] * 3) == []
    assert not tracker.edge


def test_a_short_drop_is_no_edge_and_a_new_one_starts_the_hold_again():
    n = math.ceil(CLIFF_EDGE_HOLD_S / STEP)  # states after the first drop's
    tracker = CliffEdgeTracker()
    states = [(True, True)] * (n - 1) + [(False, True)] + [(True, True)] * (n + 1)
    assert run(tracker, states) == [(2 * n, int(n * STEP * 1e9), True)]


def test_an_edge_ends_when_the_robot_leaves_its_treads():
    n = math.ceil(CLIFF_EDGE_HOLD_S / STEP)  # states after the first drop's
    tracker = CliffEdgeTracker()
    changes = run(tracker, [(True, True)] * (n + 1) + [(True, False)] * 2)
    assert [(i, edge) for i, _, edge in changes] == [(n, True), (n + 1, False)]


def test_while_which_way_up_is_not_known_an_edge_stays_and_none_is_found():
    """While the head calibrates the robot's pitch and pick-up flag are reset: it may read on
    its treads in the hand or on its back. An edge found before stays, no drop becomes
    one, and a drop seen before must hold again afterwards."""
    n = math.ceil(CLIFF_EDGE_HOLD_S / STEP)  # states after the first drop's
    tracker = CliffEdgeTracker()
    for i in range(3 * n):
        assert tracker.update(i * STEP, i, True, True, held=True) is None
    assert not tracker.edge
    run(tracker, [(True, True)] * (n - 2))                       # a drop waits...
    assert tracker.update(1.0, 1, True, True, held=True) is None  # ...and must start again
    assert run(tracker, [(True, True)] * (n - 1), t0=1.1) == []
    assert run(tracker, [(True, True)] * (n + 1), t0=2.0)[0][2] is True
    for i in range(3 * n):
        assert tracker.update(3.0 + i * STEP, i, False, False, held=True) is None
    assert tracker.edge                                           # the edge found stays
