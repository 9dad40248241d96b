"""driver.auto_exposure: gain and exposure from the images' brightness, the rule of Anki's
engine for Cozmo (pure: images in, settings out)."""

from __future__ import annotations

import numpy as np
import pytest

from cozmo_driver.driver.auto_exposure import (EXPOSURE_RANGE_MS, GAIN_RANGE, SETTLE_FRAMES,
                                               SETTLED_EVERY, AutoExposure)


def grey(value: int, n: int = 1200) -> np.ndarray:
    return np.full((n // 40, 40), value, dtype=np.uint8)


def measured(ae: AutoExposure, image: np.ndarray):
    """The first change the next images bring (the settling ones skipped), else None."""
    for _ in range(max(SETTLE_FRAMES, SETTLED_EVERY) + 1):
        change = ae.update(image)
        if change is not None:
            return change
    return None


def test_the_images_after_a_change_are_not_measured():
    ae = AutoExposure(1.0, 30)
    dark = grey(40)
    assert [ae.update(dark) for _ in range(SETTLE_FRAMES)] == [None] * SETTLE_FRAMES
    assert ae.update(dark) is not None          # measured: raised
    assert [ae.update(dark) for _ in range(SETTLE_FRAMES)] == [None] * SETTLE_FRAMES
    assert ae.update(dark) is not None


def test_once_right_it_measures_one_image_in_settled_every():
    ae = AutoExposure(1.0, 30)
    for _ in range(SETTLE_FRAMES):
        ae.update(grey(128))
    assert ae.update(grey(128)) is None and ae.value == 128   # measured: right
    dark = grey(40)
    assert [ae.update(dark) for _ in range(SETTLED_EVERY - 1)] == [None] * (SETTLED_EVERY - 1)
    assert ae.value == 128                      # not measured meanwhile
    assert ae.update(dark) is not None and ae.value == 40


def test_brighter_raises_the_gain_first_then_the_exposure():
    ae = AutoExposure(1.0, 30)
    gain, exposure = measured(ae, grey(100))
    assert exposure == 30 and gain == pytest.approx(1.28, abs=1 / 64)   # 128 / 100
    gain, exposure = measured(ae, grey(10))     # far too dark: at most 1.5x a step
    assert exposure == 30 and gain == pytest.approx(1.28 * 1.5, abs=1 / 64)
    for _ in range(3):
        gain, exposure = measured(ae, grey(10))
    assert gain == GAIN_RANGE[1] and exposure > 30   # the gain at its most, then the exposure


def test_darker_lowers_the_exposure_first_then_the_gain():
    ae = AutoExposure(2.0, 30)
    gain, exposure = measured(ae, grey(160))
    assert gain == 2.0 and exposure == round(30 * 128 / 160)
    for _ in range(10):
        change = measured(ae, grey(250))
        gain, exposure = change
        if exposure == EXPOSURE_RANGE_MS[0]:
            break
    assert exposure == EXPOSURE_RANGE_MS[0] and gain == 2.0
    gain, exposure = measured(ae, grey(250))
    assert exposure == EXPOSURE_RANGE_MS[0] and gain < 2.0


def test_an_image_mostly_white_is_halved_at_once():
    ae = AutoExposure(1.0, 40)
    image = grey(255)
    image[:5] = 100                             # under a fifth not white
    assert measured(ae, image) == (1.0, 20)


def test_a_black_image_is_raised_by_the_most_a_step_allows():
    ae = AutoExposure(1.0, 30)
    assert measured(ae, grey(0)) == (1.5, 30)


def test_near_the_target_nothing_changes_and_the_limit_is_cleared():
    ae = AutoExposure(1.0, 30)
    for value in (116, 128, 140):               # within 10 % of 128
        assert measured(ae, grey(value)) is None
        assert ae.value == value and ae.limit == ""


def test_the_median_is_the_value_measured():
    ae = AutoExposure(1.0, 30)
    image = np.concatenate([np.full(600, 20), np.full(599, 250), [64]]).astype(np.uint8)
    measured(ae, image)
    assert ae.value == 64                       # 600 below it, 599 above
    ae = AutoExposure(1.0, 30, target=200)
    assert measured(ae, grey(200)) is None      # its own target


def test_small_settings_still_move_by_one_step():
    ae = AutoExposure(1.0, 2)
    assert measured(ae, grey(200)) == (1.0, 1)  # 2 * 0.64 rounds to 1: a step of 1 ms
    ae = AutoExposure(GAIN_RANGE[1], 1)
    assert measured(ae, grey(120)) is None      # within the tolerance
    assert measured(ae, grey(112))[1] == 2      # 1 * 1.14 would round back to 1


@pytest.mark.parametrize("value, limit, gain, exposure", [
    (20, "too dark", GAIN_RANGE[1], EXPOSURE_RANGE_MS[1]),
    (250, "too bright", GAIN_RANGE[0], EXPOSURE_RANGE_MS[0]),
])
def test_at_both_limits_it_says_so_and_sends_nothing(value, limit, gain, exposure):
    ae = AutoExposure(gain, exposure)
    assert measured(ae, grey(value)) is None
    assert ae.limit == limit and (ae.gain, ae.exposure_ms) == (gain, exposure)
    assert measured(ae, grey(128)) is None and ae.limit == ""


def test_a_starting_point_outside_its_range_is_brought_into_it():
    ae = AutoExposure(0.1, 500)
    assert (ae.gain, ae.exposure_ms) == (GAIN_RANGE[0], EXPOSURE_RANGE_MS[1])
    ae = AutoExposure(float("nan"), 0)
    assert (ae.gain, ae.exposure_ms) == (GAIN_RANGE[0], EXPOSURE_RANGE_MS[0])
    assert AutoExposure(2.01, 30).gain * 64 == 129  # the robot's 1/64 steps


def test_restart_waits_for_images_exposed_with_the_settings_sent():
    ae = AutoExposure(1.0, 30)
    assert measured(ae, grey(128)) is None
    ae.restart()
    assert [ae.update(grey(10)) for _ in range(SETTLE_FRAMES)] == [None] * SETTLE_FRAMES
    assert ae.update(grey(10)) is not None


def test_the_driver_reference_states_the_rule_as_the_code_has_it():
    from pathlib import Path

    from cozmo_driver.driver import auto_exposure as ae
    text = (Path(__file__).resolve().parents[2] / "docs" / "driver.md").read_text()
    section = " ".join(text.split("## Camera exposure", 1)[1].split())
    words = {2: "two", 15: "fifteen"}
    for phrase in (f"one image in {words[ae.SETTLED_EVERY]}",
                   f"the {words[ae.SETTLE_FRAMES]} images after a change",
                   f"by {1 - ae.MAX_CHANGE}x to {1 + ae.MAX_CHANGE}x at most",
                   f"more than {ae.MAX_WHITE_FRACTION:.0%} white".replace("%", " %"),
                   f"within {ae.TOLERANCE:.0%} of the target".replace("%", " %"),
                   f"up to {ae.GAIN_RANGE[1]:.2f}", f"up to {ae.EXPOSURE_RANGE_MS[1]} ms",
                   f"down to {ae.EXPOSURE_RANGE_MS[0]} ms", f"down to {ae.GAIN_RANGE[0]:g})",
                   f"multiples of {ae.HEAD_LIGHT_EXPOSURE_STEP_MS} ms"):
        assert phrase in section, phrase


def test_an_image_is_decoded_only_when_it_is_measured():
    ae = AutoExposure(1.0, 30)
    decoded = []

    def decode():
        decoded.append(1)
        return grey(128)
    for _ in range(SETTLE_FRAMES + 2 * SETTLED_EVERY + 1):
        assert ae.update(decode) is None
    assert len(decoded) == 3                    # after the settling images, then 1 in 15


def test_with_the_head_light_on_exposures_are_multiples_of_10_ms():
    """Anki's engine: VisionMode::LimitedExposure, on while the head light is, keeps the
    exposure to multiples of 10 ms (at most the largest below the camera's limit) against
    artifacts from the IR light's pulsing."""
    from cozmo_driver.driver.auto_exposure import HEAD_LIGHT_EXPOSURE_STEP_MS
    assert HEAD_LIGHT_EXPOSURE_STEP_MS == 10
    ae = AutoExposure(GAIN_RANGE[1], 33)
    assert ae.set_head_light(True) == (GAIN_RANGE[1], 40)        # raised to a multiple at once
    assert ae.set_head_light(True) is None                        # already one
    seen = set()
    for value in (60, 60, 60, 60, 250, 250, 250, 250, 250, 250):  # darker, then much brighter
        change = measured(ae, grey(value))
        if change is not None:
            seen.add(change[1])
    assert seen and all(e % 10 == 0 and 10 <= e <= 60 for e in seen), seen
    assert 60 in seen and 10 in seen                              # the whole limited range
    off = AutoExposure(1.0, 20)
    off.set_head_light(True)
    assert off.set_head_light(False) is None and not off.head_light   # off: any value again
    assert measured(off, grey(150)) == (1.0, round(20 * 128 / 150))   # 17 ms
    dim = AutoExposure(1.0, 67)
    assert dim.set_head_light(True) == (1.0, 60)                  # 67 ms: the largest multiple below
