"""The log throttle (cozmo_driver.log_throttle) on an explicit clock: one line per period
per kind, and the next line says how many were left unsaid."""

from __future__ import annotations

import logging

import pytest

from cozmo_driver.log_throttle import PRUNE_AT, LogThrottle, field_kind, value_kind


def test_first_line_is_said_then_one_per_period_with_the_count():
    t = LogThrottle(2.0)
    assert t.line("refused", "cmd_vel refused", 10.0) == "cmd_vel refused"
    for k in range(57):  # 30 Hz for 1.9 s
        assert t.line("refused", "cmd_vel refused", 10.0 + (k + 1) / 30.0) is None
    assert t.pending("refused") == 57
    assert t.line("refused", "cmd_vel refused", 12.5) == \
        "cmd_vel refused (and 57 more like it in the last 2.5 s)"
    assert t.pending("refused") == 0
    # a quiet kind says its next line without a count
    assert t.line("refused", "cmd_vel refused", 20.0) == "cmd_vel refused"


def test_kinds_are_independent_and_a_period_may_be_given_per_call():
    t = LogThrottle(2.0)
    assert t.line("a", "A", 0.0) == "A"
    assert t.line("b", "B", 0.1) == "B"
    assert t.line("a", "A", 0.2) is None
    assert t.line("c", "C", 0.0, period_s=10.0) == "C"
    assert t.line("c", "C", 5.0, period_s=10.0) is None
    assert t.line("c", "C", 10.0, period_s=10.0) == "C (and 1 more like it in the last 10.0 s)"
    assert t.due("a", 2.0) == (1, 2.0)


def test_lines_held_back_are_said_once_their_period_is_over_without_waiting_for_another():
    """A kind whose events were held back and then stopped: ``overdue`` gives, once its
    period is over, the last of them with the count of the others, so that nothing stays
    unsaid until a next event that may never come (a NaN, then an inf a second later)."""
    t = LogThrottle(2.0)
    assert t.line("look_at", "x = nan refused", 0.0) == "x = nan refused"
    assert t.line("look_at", "y = inf refused", 1.0) is None
    assert t.line("quiet", "Q", 0.5) == "Q"
    assert t.overdue(1.9) == []  # within the period
    assert t.overdue(2.0) == [("look_at", "y = inf refused", logging.WARNING)]
    assert t.overdue(5.0) == [] and t.pending("look_at") == 0  # said once
    for k in range(3):
        assert t.line("look_at", f"x = {k} refused", 6.0 + k * 0.1) == ("x = 0 refused" if k == 0 else None)
    assert t.overdue(8.0) == [("look_at", "x = 2 refused (and 1 more like it in the last 2.0 s)",
                               logging.WARNING)]
    # after an overdue line, the kind's period starts again from it
    assert t.line("look_at", "x = 9 refused", 9.0) is None
    # a period given per call holds for its overdue line too
    assert t.line("c", "C", 0.0, period_s=10.0) == "C"
    assert t.line("c", "C2", 1.0, period_s=10.0) is None
    assert t.overdue(9.5) == []
    assert t.overdue(10.0) == [("look_at", "x = 9 refused", logging.WARNING),
                               ("c", "C2", logging.WARNING)]


def test_a_held_back_line_keeps_the_level_of_its_kind():
    """An info line held back comes back as info, a warning as a warning: the caller
    says each overdue line at the level its kind was given, without a table of its own."""
    t = LogThrottle(2.0)
    assert t.line("face happy", "face 'happy'", 0.0, level=logging.INFO) == "face 'happy'"
    assert t.line("face happy", "face 'happy' again", 1.0, level=logging.INFO) is None
    assert t.line("look_at", "x = nan refused", 0.0) == "x = nan refused"
    assert t.line("look_at", "x = inf refused", 1.0) is None
    assert t.line("bad", "an error", 0.0, level=logging.ERROR) == "an error"
    assert t.line("bad", "another error", 0.5, level=logging.ERROR) is None
    assert sorted(t.overdue(2.5), key=lambda e: e[0]) == [
        ("bad", "another error", logging.ERROR),
        ("face happy", "face 'happy' again", logging.INFO),
        ("look_at", "x = inf refused", logging.WARNING)]


def test_a_kind_forgotten_drops_its_held_back_line_and_its_next_is_said_at_once():
    t = LogThrottle(10.0)
    assert t.line("connect", "no answer", 0.0) == "no answer"
    assert t.line("connect", "no answer", 5.0) is None
    t.forget("connect")  # it answered
    assert t.pending("connect") == 0 and t.overdue(20.0) == []
    assert t.line("connect", "no answer", 21.0) == "no answer"
    t.forget("never seen")


def test_a_kind_dropped_loses_its_held_back_lines_but_keeps_its_period():
    t = LogThrottle(5.0)
    assert t.line("send", "send failed", 0.0) == "send failed"
    assert t.line("send", "send failed", 1.0) is None
    assert t.line("send", "send failed", 2.0) is None
    assert t.drop("send") == 2  # sends work again: said by the caller, with its own count
    assert t.pending("send") == 0 and t.overdue(20.0) == []
    assert t.line("send", "send failed", 3.0) is None  # failing again within the 5 s: held back
    assert t.overdue(5.0) == [("send", "send failed", logging.WARNING)]
    assert t.drop("send") == 0 and t.drop("never seen") == 0


def test_flush_says_every_held_back_line_now_and_the_period_goes_on():
    t = LogThrottle(2.0)
    assert t.line("a", "A1", 0.0) == "A1"
    assert t.line("a", "A2", 0.5) is None
    assert t.line("a", "A3", 1.0) is None
    assert t.line("b", "B1", 0.0, level=logging.INFO) == "B1"
    assert t.flush(1.5) == [("a", "A3 (and 1 more like it in the last 1.5 s)", logging.WARNING)]
    assert t.flush(1.6) == [] and t.overdue(5.0) == []
    assert t.line("a", "A4", 5.2) == "A4"
    assert t.line("a", "A5", 5.4) is None
    assert t.flush(5.5) == [("a", "A5", logging.WARNING)]
    assert t.line("a", "A6", 7.0) is None  # the period starts again from the line flushed
    assert t.overdue(7.4) == [] and t.overdue(7.5) == [("a", "A6", logging.WARNING)]


def test_flush_of_one_kind_leaves_the_others_held_back():
    t = LogThrottle(2.0)
    for key in ("a", "b"):
        assert t.line(key, f"{key}1", 0.0) == f"{key}1"
        assert t.line(key, f"{key}2", 0.5) is None
    assert t.flush(1.0, key="b") == [("b", "b2", logging.WARNING)]
    assert t.pending("a") == 1 and t.pending("b") == 0
    assert t.overdue(2.0) == [("a", "a2", logging.WARNING)]


def test_flush_leaves_the_kinds_kept_held_back_and_throttled():
    t = LogThrottle(2.0)
    for key in ("a", "b"):
        assert t.line(key, f"{key}1", 0.0) == f"{key}1"
        assert t.line(key, f"{key}2", 0.5) is None
    assert t.flush(1.0, keep=("a",)) == [("b", "b2", logging.WARNING)]
    assert t.pending("a") == 1 and t.line("a", "a3", 1.5) is None  # its period goes on from 0.0
    assert t.overdue(2.0) == [("a", "a3 (and 1 more like it in the last 2.0 s)", logging.WARNING)]


def test_kinds_named_by_clients_do_not_pile_up_and_quiet_kinds_are_forgotten_unchanged():
    """A goal refused for a name a client chose (an animation, a frame id) is a kind of its
    own: a client trying a new name every second kept one more kind in the throttle for the
    life of the node. Quiet kinds (period over, nothing held back) are forgotten once many are
    held, which changes no line: a kind still in its period is still throttled, and one with
    events held back still has them said by ``overdue``."""
    t = LogThrottle(2.0)
    assert t.line("kept", "K", 0.0) == "K"
    assert t.line("kept", "K", 0.5) is None  # held back: never forgotten
    for k in range(10 * PRUNE_AT):  # a new name a second
        assert t.line(f"no animation 'clip_{k}'", f"clip_{k}", 1.0 + k) == f"clip_{k}"
        assert len(t._kinds) <= 2 * PRUNE_AT, k
    now = 1.0 + 10 * PRUNE_AT
    assert t.line("no animation 'clip_0'", "clip_0", now) == "clip_0"  # forgotten: said at once, as before
    last = f"no animation 'clip_{10 * PRUNE_AT - 1}'"
    assert t.line(last, "again", now - 0.5) is None  # within its period: still throttled
    assert t.overdue(now + 10.0) == [("kept", "K", logging.WARNING),
                                     (last, "again", logging.WARNING)]


def test_a_negative_period_is_refused():
    with pytest.raises(ValueError):
        LogThrottle(-1.0)


def test_a_warnings_kind_is_the_field_it_names_not_its_values():
    a = field_kind("object_lights refused: object_lights.lights[0].on_color.r = 1.002: a colour ...")
    b = field_kind("object_lights refused: object_lights.lights[0].on_color.r = 1.5: a colour ...")
    c = field_kind("object_lights refused: object_lights.lights[0].on_period is nan: ...")
    assert a == b == "object_lights object_lights.lights[0].on_color.r" and c != a
    assert field_kind("display/image refused: display/image.image.step = 64 is shorter ...") != \
        field_kind("display/image refused: display/image.image.encoding 'x' is not ...")
    assert field_kind("object_lights.rotation_period = 9 s is outside [0, 8.5] s: clamped") == \
        field_kind("object_lights.rotation_period = 12 s is outside [0, 8.5] s: clamped") == \
        "object_lights.rotation_period"


def test_a_reasons_kind_is_its_text_without_its_values():
    """A refused goal's reason names no field first ("the driver is not active", "it would
    take about 1000 s"): its kind is its text with the values left out."""
    assert value_kind("distance is nan: not a finite number") == value_kind("distance is -inf: not a finite number") \
        == "distance is #: not a finite number"
    assert value_kind("speed is nan: not a finite number") != value_kind("distance is nan: not a finite number")
    assert value_kind("it would take about 1e+04 s; at most 600 s") == value_kind("it would take about 17.5 s; at "
                                                                                "most 600 s")
    assert value_kind("cube1 at 0x4d, lights[0] on 127.0.0.1:5551") == "cube1 at #, lights[#] on #:#"
    assert value_kind("information about infinity") == "information about infinity"
    assert len(value_kind("x" * 1000)) == 120
