"""The log throttle (cozmo_driver.log_throttle) on an explicit clock: one line per period
per kind, and the next line says how many were left unsaid."""

from __future__ import annotations

import pytest

from cozmo_driver.log_throttle import LogThrottle, field_kind


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
