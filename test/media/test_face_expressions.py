"""Named expressions, gaze and the FaceAnimator (explicit clock, seeded)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from cozmo_driver.face.expressions import (
    ALIASES,
    BLINK_DURATION_S,
    EXPRESSIONS,
    GAZE_MAX_X_PX,
    GAZE_MAX_Y_PX,
    FaceAnimator,
    blink_factors,
    ease_in_out,
    expression,
    expression_names,
    look_at,
)
from cozmo_driver.face.procedural import FaceParams, FaceRenderer

R = FaceRenderer()
REQUIRED = ("neutral", "happy", "sad", "angry", "surprised", "sleepy", "bored", "confused", "excited",
            "fearful", "suspicious", "determined", "joy", "disgusted", "wink", "closed")


def test_the_expression_library():
    names = expression_names()
    assert len(names) >= 15
    for name in REQUIRED:
        assert name in names
    for alias, target in ALIASES.items():
        assert expression(alias) == EXPRESSIONS[target]
    assert expression("love") == EXPRESSIONS["joy"]
    with pytest.raises(KeyError, match="known") as unknown:
        expression("ecstatic", blink_taken=True)
    assert "blink (one blink, the expression kept)" in unknown.value.args[0]
    with pytest.raises(KeyError, match="known") as unknown:  # a clip, the face node's parameter
        expression("ecstatic")
    assert "blink" not in unknown.value.args[0]
    # "blink" is no face (it was "closed": the eyes shut for good); the face node blinks
    # once for it (FaceAnimator.blink), the expression kept
    assert "blink" not in ALIASES and "blink" not in EXPRESSIONS
    with pytest.raises(KeyError, match="'blink' is not an expression: it blinks once"):
        expression(" Blink ")


def test_expression_returns_a_copy():
    e = expression("happy")
    e.left.scale_x = 9.0
    assert EXPRESSIONS["happy"].left.scale_x != 9.0


def test_a_face_copy_has_every_value_and_eyes_of_its_own():
    face = FaceParams.from_array(np.arange(43, dtype=np.float64) / 7.0)
    copy = face.copy()
    assert copy == face and np.array_equal(copy.to_array(), face.to_array())
    assert copy.left is not face.left and copy.right is not face.right
    copy.left.scale_y, copy.right.upper_lid_bend = 5.0, 0.5
    assert np.array_equal(face.to_array(), np.arange(43, dtype=np.float64) / 7.0)
    before = face.to_array()
    look_at(face, 0.7, 0.6)  # moves a copy's eyes and centre
    assert np.array_equal(face.to_array(), before)


def test_every_expression_looks_different():
    images = {name: R.render(face) for name, face in EXPRESSIONS.items()}
    for (a, ia), (b, ib) in itertools.combinations(images.items(), 2):
        assert np.count_nonzero(ia != ib) > 40, (a, b)
    for name, img in images.items():
        assert img.any(), name


def test_expressions_mean_what_they_say():
    lit = {name: R.render(face).sum() for name, face in EXPRESSIONS.items()}
    assert lit["surprised"] > lit["neutral"] > lit["sleepy"] > lit["closed"]
    assert lit["squint"] < lit["neutral"]
    wink = R.render(EXPRESSIONS["wink"])
    assert wink[:, :64].sum() > 1.5 * wink[:, 64:].sum()      # one eye mostly shut
    angry = EXPRESSIONS["angry"]
    sad = EXPRESSIONS["sad"]
    assert angry.left.upper_lid_angle_deg > 0 > sad.left.upper_lid_angle_deg


# --------------------------------------------------------------------------- gaze

def test_look_at_straight_ahead_changes_nothing():
    face = EXPRESSIONS["neutral"]
    assert look_at(face, 0.0, 0.0) == face
    assert look_at(face, math.nan, math.nan) == face


def test_look_at_moves_towards_the_point():
    face = EXPRESSIONS["neutral"]
    right = look_at(face, 1.0, 0.0)
    assert right.center_x_px == pytest.approx(face.center_x_px + GAZE_MAX_X_PX)
    assert right.right.scale_y > face.right.scale_y > right.left.scale_y   # the near eye grows
    down = look_at(face, 0.0, 1.0)
    assert down.center_y_px == pytest.approx(face.center_y_px + GAZE_MAX_Y_PX)
    assert down.left.scale_y < face.left.scale_y
    assert down.left.center_x_px > face.left.center_x_px                    # eyes converge
    assert down.right.center_x_px < face.right.center_x_px
    up = look_at(face, 0.0, -1.0)
    assert up.left.scale_y > face.left.scale_y
    # the shapes of Anki's ProceduralFace::LookAt (its defaults 1.1 up, 0.85 down against
    # 0.975 ahead; the near eye +10 %, the far one -10 %), relative to straight ahead
    assert up.left.scale_y / face.left.scale_y == pytest.approx(1.1 / 0.975)
    assert down.right.scale_y / face.right.scale_y == pytest.approx(0.85 / 0.975)
    assert right.right.scale_y / face.right.scale_y == pytest.approx(1.1)
    assert right.left.scale_y / face.left.scale_y == pytest.approx(0.9)
    assert down.left.center_x_px - face.left.center_x_px == pytest.approx(2.0)
    assert look_at(face, 5.0, -5.0) == look_at(face, 1.0, -1.0)             # clamped
    img_l, img_r = R.render(look_at(face, -1, 0)), R.render(look_at(face, 1, 0))
    cols = lambda img: np.flatnonzero(img.any(axis=0))  # noqa: E731
    assert cols(img_l).mean() < cols(img_r).mean()


def test_look_at_signs_plus_x_is_the_screens_right_the_robots_left_plus_y_down():
    """+x moves the eyes to the screen's right as one looks at the robot: towards the robot's
    left (the idle LookAround glances to +x and then turns counter-clockwise, to its left);
    a tracker maps its camera image's column u to x = -(2u/width - 1). +y moves them down."""
    face = EXPRESSIONS["neutral"]

    def mean_lit(x: float, y: float) -> tuple[float, float]:
        rows, cols = np.nonzero(R.render(look_at(face, x, y)))
        return float(cols.mean()), float(rows.mean())

    xs = [mean_lit(x, 0.0)[0] for x in (-1.0, 0.0, 1.0)]
    assert xs[0] < xs[1] < xs[2]
    assert xs[1] == pytest.approx(63.5)                       # straight ahead: the screen's centre
    ys = [mean_lit(0.0, y)[1] for y in (-1.0, 0.0, 1.0)]
    assert ys[0] < ys[1] < ys[2]                              # row 0 is the screen's top


# --------------------------------------------------------------------------- animator

def test_ease_and_blink_shapes():
    assert ease_in_out(0) == 0 and ease_in_out(1) == 1 and ease_in_out(0.5) == 0.5
    assert ease_in_out(-1) == 0 and ease_in_out(2) == 1
    assert blink_factors(-0.1) == (1.0, 1.0) and blink_factors(BLINK_DURATION_S) == (1.0, 1.0)
    closed = min(blink_factors(t / 1000)[0] for t in range(0, 300))
    assert closed < 0.1
    assert blink_factors(0.13)[1] > 1.0                                     # widens as it closes


ANKI_BLINK = [(0.85, 1.05), (0.6, 1.2), (0.1, 2.5), (0.05, 5.0), (0.15, 2.0), (0.7, 1.2),
              (0.9, 1.0), (0.9, 1.0), (0.9, 1.0)]


@pytest.mark.parametrize("phase", [0.0, 0.004, 0.0166, 0.033])
def test_a_blink_shows_ankis_seven_frames_once_each_at_30_fps(phase):
    """ProceduralFaceDrawer::GetNextBlinkFrame: seven (height, width) frames, 33 ms each
    but the last 100 ms; in the closed one the lids go and both eyes are level (here the
    lids also go in the frames either side of it). At 30 frames a second each frame shows
    once (the last three times), whatever the phase."""
    base = EXPRESSIONS["angry"].copy()
    base.right.center_y_px += 4.0
    a = FaceAnimator(seed=3, base=base, idle=False)
    a.blink(10.0 - phase)
    times = [10.0 + k / 30.0 for k in range(10)]
    shown = [a.frame(t) for t in times]
    factors = [(round(f.left.scale_y / base.left.scale_y, 4), round(f.left.scale_x / base.left.scale_x, 4))
               for f in shown]
    assert factors == ANKI_BLINK + [(1.0, 1.0)]
    closed = shown[3]
    mean_y = (base.left.center_y_px + base.right.center_y_px) / 2
    for eye in (closed.left, closed.right):
        assert eye.center_y_px == mean_y
        assert (eye.upper_lid_y, eye.lower_lid_y, eye.upper_lid_bend, eye.lower_lid_bend,
                eye.upper_lid_angle_deg, eye.lower_lid_angle_deg) == (0.0,) * 6
    for k in (2, 4):                                               # lidless, not levelled
        assert shown[k].left.upper_lid_y == shown[k].right.lower_lid_y == 0.0
        assert shown[k].right.center_y_px == base.right.center_y_px
    assert shown[1].left.upper_lid_y == shown[5].left.upper_lid_y == base.left.upper_lid_y
    assert shown[-1] == base


def test_transition_eases_from_the_current_face_to_the_target():
    a = FaceAnimator(seed=1, base="neutral", idle=False)
    a.set_expression("angry", now=10.0, duration_s=0.4)
    assert a.frame(10.0) == EXPRESSIONS["neutral"]
    assert a.transitioning(10.2)
    mid = a.frame(10.2).to_array()
    assert np.allclose(mid, (EXPRESSIONS["neutral"].to_array() + EXPRESSIONS["angry"].to_array()) / 2)
    assert a.frame(10.4) == EXPRESSIONS["angry"]
    assert a.frame(99.0) == EXPRESSIONS["angry"] and not a.transitioning(99.0)
    # changing target mid-way starts from where the face is
    a.set_expression("happy", now=100.0, duration_s=1.0)
    a.set_expression("sad", now=100.5, duration_s=1.0)
    start = a.frame(100.5).to_array()
    assert np.allclose(start, (EXPRESSIONS["angry"].to_array() + EXPRESSIONS["happy"].to_array()) / 2)
    assert a.target() == EXPRESSIONS["sad"]


def frames(animator: FaceAnimator, times) -> list:
    return [animator.frame(t).to_array() for t in times]


def test_idle_life_is_deterministic_and_independent_of_the_frame_rate():
    times30 = [k / 30 for k in range(30 * 40)]
    a = frames(FaceAnimator(seed=7), times30)
    b = frames(FaceAnimator(seed=7), times30)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    # Called 3x less often, the faces at the common times are the same.
    c_anim = FaceAnimator(seed=7)
    common = {}
    for k in range(0, 30 * 40, 3):
        common[k] = c_anim.frame(k / 30).to_array()
    for k, arr in common.items():
        assert np.array_equal(arr, a[k]), k
    other = frames(FaceAnimator(seed=8), times30)
    assert not all(np.array_equal(x, y) for x, y in zip(a, other))


def test_blinks_every_few_seconds_and_saccades():
    anim = FaceAnimator(seed=3, blink_interval_s=(2.5, 6.0))
    base = EXPRESSIONS["neutral"].left.scale_y
    closed_ticks = 0
    for k in range(30 * 120):
        f = anim.frame(k / 30)
        if f.left.scale_y < 0.3 * base:
            closed_ticks += 1
    # 120 s with a blink every 2.8..6.3 s
    assert 19 <= anim.blinks <= 43
    assert closed_ticks >= anim.blinks        # each blink shows at least one shut frame at 30 fps
    assert 120 / 3.07 - 10 <= anim.saccades <= 120 / 0.87 + 10
    centres = {round(anim.frame(t).center_x_px, 3) for t in np.arange(120, 140, 0.5)}
    assert len(centres) > 5                   # the gaze moves around


def test_no_idle_life_when_disabled_and_look_at_holds():
    anim = FaceAnimator(seed=3, idle=False)
    for k in range(30 * 20):
        assert anim.frame(k / 30) == EXPRESSIONS["neutral"]
    assert anim.blinks == 0 and anim.saccades == 0
    anim.look_at(1.0, 0.0, now=20.0, duration_s=0.1)
    assert anim.frame(20.2) == look_at(EXPRESSIONS["neutral"], 1.0, 0.0)
    anim.blink(21.0)
    assert anim.frame(21.13).left.scale_y < 0.1 * EXPRESSIONS["neutral"].left.scale_y
    assert anim.frame(21.5) == look_at(EXPRESSIONS["neutral"], 1.0, 0.0)
    anim.set_idle(True, now=22.0)
    for k in range(30 * 10):
        anim.frame(22.0 + k / 30)
    assert anim.blinks >= 2


def test_a_blink_shuts_to_a_level_line():
    anim = FaceAnimator(seed=0, base="angry", idle=False)
    anim.blink(0.0)
    shut = anim.frame(0.13)
    assert shut.left.upper_lid_y == 0 and shut.left.upper_lid_angle_deg == 0
    img = R.render_display(shut)
    rows = np.flatnonzero(img.any(axis=1))
    assert 1 <= len(rows) <= 3
    assert isinstance(shut, FaceParams)


def test_a_gaze_beyond_the_image_is_clamped_when_asked_not_only_when_drawn():
    """look_at(5, 0) is the edge of the image (x = 1): the gaze back to the centre eases
    from there, not from 5 (held at the edge for most of the ease), and a tracker's x =
    1.5 leaves the saccades room to move the eyes back from the edge."""
    neutral = EXPRESSIONS["neutral"]
    anim = FaceAnimator(seed=3, idle=False)
    anim.look_at(5.0, -5.0, now=0.0, duration_s=0.1)
    assert anim.frame(1.0) == look_at(neutral, 1.0, -1.0)
    anim.look_at(0.0, 0.0, now=2.0, duration_s=0.2)
    assert np.allclose(anim.frame(2.1).to_array(),                       # half-way at half the time
                       look_at(neutral, 0.5, -0.5).to_array())
    anim.look_at(math.nan, math.nan, now=3.0, duration_s=0.0)
    assert anim.frame(3.0) == neutral                                    # NaN: straight ahead
    idle = FaceAnimator(seed=3)
    idle.look_at(1.5, 0.0, now=0.0, duration_s=0.0)
    edge = look_at(neutral, 1.0, 0.0).center_x_px
    centres = [idle.frame(k / 30).center_x_px for k in range(30 * 20)]
    assert min(centres) < edge - 0.1 * GAZE_MAX_X_PX, "the saccades never moved the eyes from the edge"


def _alone(face: FaceParams, keep: str) -> FaceParams:
    """``face`` with the eye other than ``keep`` shut by its lids (which change nothing else:
    the face's place on the screen does not depend on them)."""
    out = face.copy()
    other = out.right if keep == "left" else out.left
    other.upper_lid_y = other.lower_lid_y = 1.0
    other.upper_lid_angle_deg = other.lower_lid_angle_deg = 0.0
    return out


def test_every_blink_frame_shows_both_eyes_on_the_rows_the_robot_shows():
    """The robot shows the even rows only. Mid-blink (frames 2 and 4: 10 and 15 % of the
    height) the lids of squint, sleepy, suspicious or bored cut the eye to a pixel or so,
    which could fall on an odd row: the eye vanished from the robot's screen for a frame."""
    start = 0.0
    for name, gx, gy in itertools.product(EXPRESSIONS, (-0.3, 0.0, 0.3), np.linspace(-0.3, 0.3, 9)):
        anim = FaceAnimator(seed=0, base=name, idle=False)
        anim.look_at(gx, gy, now=start, duration_s=0.0)
        anim.blink(start)
        for k in range(7):
            face = anim.frame(start + (k + 0.5) / 30.0)
            for eye in ("left", "right"):
                assert R.render_display(_alone(face, eye)).any(), (name, gx, round(gy, 2), k, eye)


def test_no_idle_blinks_or_saccades_on_shut_eyes():
    """``closed`` (sleeping on the charger) shuts the eyes: the idle life neither blinks them
    (a blink widens an eye 2.5-5x: the shut eyes became one line across the screen for
    0.1 s every few seconds) nor moves them about; it resumes when they open, and sleepy
    eyes (a third open) still blink and look about."""
    closed = EXPRESSIONS["closed"]
    asleep = FaceAnimator(seed=3, base="closed")
    for k in range(30 * 60):
        assert asleep.frame(k / 30) == closed, k / 30
    assert asleep.blinks == 0 and asleep.saccades == 0
    # falling asleep: from the end of the change the face is the shut one, the saccade's
    # offset taken back to the centre; waking up: the idle life is back
    anim = FaceAnimator(seed=5)
    for k in range(30 * 20):
        anim.frame(k / 30)
    assert anim.saccades > 0 and anim.blinks > 0
    anim.set_expression("closed", now=20.0, duration_s=0.3)
    blinks, saccades = anim.blinks, anim.saccades          # those due until 20 s counted
    for k in range(30 * 60):
        t = 20.0 + k / 30
        face = anim.frame(t)
        if t >= 20.5:
            assert face == closed, t
    assert (anim.blinks, anim.saccades) == (blinks, saccades)
    anim.set_expression("neutral", now=80.0)
    for k in range(30 * 30):
        anim.frame(80.0 + k / 30)
    assert anim.blinks > blinks and anim.saccades > saccades
    # eyes shut by their lids are shut too
    lidded = EXPRESSIONS["neutral"].copy()
    for eye in (lidded.left, lidded.right):
        eye.upper_lid_y, eye.lower_lid_y = 0.6, 0.4
    shut = FaceAnimator(seed=3, base=lidded)
    for k in range(30 * 30):
        assert shut.frame(k / 30) == lidded
    sleepy = FaceAnimator(seed=3, base="sleepy")
    for k in range(30 * 30):
        sleepy.frame(k / 30)
    assert sleepy.blinks > 0 and sleepy.saccades > 0


def test_shutting_the_eyes_does_not_depend_on_how_often_frames_are_asked():
    times = [k / 30 for k in range(30 * 40)]
    changes = {300: "closed", 600: "neutral", 900: "sleepy"}

    def run(step):
        anim, out = FaceAnimator(seed=11), {}
        for k, t in enumerate(times):
            if k in changes:
                anim.set_expression(changes[k], now=t)
            if k % step == 0 or k in changes:
                out[k] = anim.frame(t).to_array()
        return out

    every, sparse = run(1), run(97)
    for k, arr in sparse.items():
        assert np.array_equal(arr, every[k]), k
