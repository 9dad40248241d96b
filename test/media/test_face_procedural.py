"""The procedural face: parameters, validation, interpolation, geometry and golden renders.

Golden images live in test/golden/face/<expression>.png (128x64, white = lit).
They were made by this renderer and checked by eye; to regenerate them after an
intended change of the renderer or of an expression, run
``COZMO_UPDATE_GOLDEN=1 ./dev test test/media/test_face_procedural.py`` and look at them:
``tools/make_face_montage.py`` draws them all into docs/images/face_expressions.png,
the picture in docs/media.md, which the last golden test keeps in step with them.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cozmo_driver.face.expressions import EXPRESSIONS, FaceAnimator, look_at
from cozmo_driver.face.procedural import (
    ANKI_GEOMETRY,
    EYE_PARAM_NAMES,
    NUM_PARAMS,
    PARAM_NAMES,
    PYCOZMO_EYE_ORDER,
    PYCOZMO_GEOMETRY,
    _DEFAULTS,
    _HI,
    _LO,
    EyeParams,
    FaceParams,
    FaceRenderer,
    interpolate,
    sanitize_array,
)
from cozmo_driver.protocol.display import MAX_DISPLAY_BYTES, decode_display, fit_to_frame
from dependencies import require

GOLDEN = Path(__file__).parents[1] / "golden" / "face"
UPDATE = os.environ.get("COZMO_UPDATE_GOLDEN") == "1"
R = FaceRenderer()


def box(img: np.ndarray) -> tuple[int, int, int, int]:
    """(row0, row1, col0, col1) inclusive bounds of the lit pixels."""
    rows = np.flatnonzero(img.any(axis=1))
    cols = np.flatnonzero(img.any(axis=0))
    return int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])


def left_half(img):
    return img[:, :64]


# --------------------------------------------------------------------------- golden renders

@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_golden_render(name):
    img = R.render(EXPRESSIONS[name])
    path = GOLDEN / f"{name}.png"
    if UPDATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img.astype(np.uint8) * 255).save(path, optimize=True)
    golden = np.asarray(Image.open(path).convert("L")) >= 128
    assert golden.shape == (64, 128)
    diff = np.count_nonzero(golden != img)
    assert diff == 0, f"{name}: {diff} pixels differ from {path}"


def test_there_are_at_least_15_goldens():
    assert len(list(GOLDEN.glob("*.png"))) >= 15
    assert {p.stem for p in GOLDEN.glob("*.png")} == set(EXPRESSIONS)


def test_the_montage_shows_the_goldens():
    """docs/images/face_expressions.png (docs/media.md's picture of the goldens, made by
    tools/make_face_montage.py) shows every golden as it is now, pixel for pixel."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("make_face_montage", root / "tools" / "make_face_montage.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    from cozmo_driver.demo_artifacts import face_picture

    screens = tool.golden_screens(GOLDEN)
    assert [name for name, _ in screens] == list(EXPRESSIONS)
    committed = np.asarray(Image.open(tool.TARGET).convert("RGB"))
    w, h = tool.tile_size()
    stale = []
    for i, (name, screen) in enumerate(screens):
        x, y = tool.tile_origin(i)
        want = np.asarray(face_picture(screen, scale=tool.SCALE, border=tool.BORDER))
        if not np.array_equal(committed[y:y + h, x:x + w], want):
            stale.append(name)
    assert not stale, f"{tool.TARGET} is out of date for {stale}: run tools/make_face_montage.py"


# --------------------------------------------------------------------------- parameters

def test_43_values_in_clad_order():
    assert NUM_PARAMS == 43 and len(PARAM_NAMES) == 43 and len(EYE_PARAM_NAMES) == 19
    p = FaceParams()
    p.left.upper_inner_radius_x = 0.11
    p.left.lower_outer_radius_y = 0.22
    p.right.upper_lid_bend = 0.33
    p.angle_deg = 7.0
    arr = p.to_array()
    assert arr.shape == (43,)
    assert arr[4] == 7.0
    assert arr[5 + 7] == pytest.approx(0.11)       # CLAD 7: UpperInnerRadiusX
    assert arr[5 + 12] == pytest.approx(0.22)      # CLAD 12: LowerOuterRadiusY
    assert arr[24 + 15] == pytest.approx(0.33)     # CLAD 15: UpperLidBend
    assert PARAM_NAMES[5 + 7] == "left.upper_inner_radius_x"
    assert FaceParams.from_array(arr) == p


def test_pycozmo_order_conversion():
    p = FaceParams()
    p.left.upper_inner_radius_x = 0.1   # CLAD 7 = pycozmo 9
    p.left.lower_outer_radius_x = 0.2   # CLAD 11 = pycozmo 7
    p.left.upper_outer_radius_y = 0.3   # CLAD 10 = pycozmo 12
    py = p.to_pycozmo_array()
    assert py[5 + 9] == pytest.approx(0.1)
    assert py[5 + 7] == pytest.approx(0.2)
    assert py[5 + 12] == pytest.approx(0.3)
    assert FaceParams.from_pycozmo_array(py) == p
    assert sorted(PYCOZMO_EYE_ORDER) == list(range(19))


def test_updated_and_dict_forms():
    p = FaceParams().updated({"face.angle_deg": 5, "eyes.scale_y": 0.5, "left": {"upper_lid_y": 0.2},
                              "center_x_px": 3})
    assert p.angle_deg == 5 and p.center_x_px == 3
    assert p.left.scale_y == p.right.scale_y == 0.5
    assert p.left.upper_lid_y == 0.2 and p.right.upper_lid_y == 0.0
    assert FaceParams.from_dict(p.to_dict()) == p
    for bad in ({"nose": 1}, {"left.nose": 1}, {"face.nose": 1}, {"middle.scale_x": 1}):
        with pytest.raises(KeyError):
            FaceParams().updated(bad)


def test_validation_fixes_nan_inf_and_ranges_and_names_them():
    p = FaceParams(scale_x=math.nan, angle_deg=math.inf)
    p.left.upper_lid_angle_deg = 80.0
    p.right.lower_inner_radius_y = -0.5
    p.right.scale_y = -math.inf
    fixed, warnings = p.validated()
    assert fixed.scale_x == 1.0                     # NaN -> default
    assert fixed.angle_deg == 360.0                 # +inf -> top of the range
    assert fixed.left.upper_lid_angle_deg == 45.0
    assert fixed.right.lower_inner_radius_y == 0.0
    assert fixed.right.scale_y == 0.0
    text = "\n".join(warnings)
    assert len(warnings) == 5
    for name in ("face.scale_x", "face.angle_deg", "left.upper_lid_angle_deg",
                 "right.lower_inner_radius_y", "right.scale_y"):
        assert name in text
    again, none = fixed.validated()
    assert again == fixed and none == []


def test_valid_faces_pass_validation_unchanged():
    for name, face in EXPRESSIONS.items():
        fixed, warnings = face.validated()
        assert warnings == [] and fixed == face, name


# --------------------------------------------------------------------------- interpolation

def test_interpolation_endpoints_and_middle():
    a = EXPRESSIONS["neutral"]
    b = EXPRESSIONS["angry"]
    assert interpolate(a, b, 0.0) == a
    assert interpolate(a, b, 1.0) == b
    assert interpolate(a, b, -3.0) == a             # clamped
    assert interpolate(a, b, 7.0) == b
    assert interpolate(a, b, math.nan) == a
    mid = interpolate(a, b, 0.5).to_array()
    assert np.allclose(mid, (a.to_array() + b.to_array()) / 2)
    # the inputs are not modified
    assert a == EXPRESSIONS["neutral"] and b == EXPRESSIONS["angry"]


def test_angles_blend_as_directions_as_in_ankis_engine():
    """ProceduralFace::Interpolate blends the face's and the eyes' angles as unit vectors
    (BlendAngleHelper): the short way round, and a little slower than linear mid-way."""
    def face(angle):
        return FaceParams(angle_deg=angle).with_eyes(angle_deg=angle)

    for a, b, t, want in ((-170.0, 170.0, 0.5, 180.0), (0.0, 40.0, 0.25, 9.7),
                          (10.0, 10.0, 0.3, 10.0), (350.0, 10.0, 0.5, 0.0)):
        out = interpolate(face(a), face(b), t)
        for got in (out.angle_deg, out.left.angle_deg, out.right.angle_deg):
            assert abs((got - want + 180.0) % 360.0 - 180.0) < 0.05, (a, b, t, got)
    # the other values still blend linearly
    mid = interpolate(FaceParams(center_x_px=0.0), FaceParams(center_x_px=10.0), 0.5)
    assert mid.center_x_px == 5.0


# --------------------------------------------------------------------------- geometry

def test_nominal_eyes_are_30_by_40_at_32_and_96():
    img = R.render(FaceParams().with_eyes(**{n: 0.0 for n in EYE_PARAM_NAMES[5:13]}))
    assert box(img[:, :64]) == (12, 51, 17, 46)    # 40 rows x 30 columns centred on (32, 32)
    assert box(img[:, 64:]) == (12, 51, 81 - 64, 110 - 64)
    assert img.sum() == 2 * 30 * 40


def test_the_face_offset_stops_where_the_eyes_reach_the_screens_edge():
    """Anki's ProceduralFace::SetFacePosition limits the face's centre so that the eyes'
    box stays on the screen: a larger offset draws the face at the edge, not cut off."""
    sharp = {n: 0.0 for n in EYE_PARAM_NAMES[5:13]}
    at_edge = R.render(FaceParams(center_x_px=17.0, center_y_px=-12.0).with_eyes(**sharp))
    assert box(at_edge) == (0, 39, 34, 127)                   # 17 px right, 12 px up: the edges
    for cx, cy in ((60.0, -40.0), (128.0, -128.0)):
        assert np.array_equal(R.render(FaceParams(center_x_px=cx, center_y_px=cy).with_eyes(**sharp)),
                              at_edge)
    # scaled eyes and face: Anki's box scales the eyes' offsets and sizes by the face's
    # scale, but not their nominal places (32 + 1.2 * (0 - 1.5 * 15) = 5: limited to -5)
    big = FaceParams(center_x_px=-40.0, scale_x=1.2).with_eyes(scale_x=1.5, **sharp)
    limited = FaceParams(center_x_px=-5.0, scale_x=1.2).with_eyes(scale_x=1.5, **sharp)
    assert np.array_equal(R.render(big), R.render(limited))
    # pycozmo's geometry has no such limit
    off = FaceRenderer(PYCOZMO_GEOMETRY).render(FaceParams(center_x_px=128.0).with_eyes(**sharp))
    assert not off[:, :64].any()


def test_pycozmo_geometry_preset_is_28_by_40_at_plus_minus_25():
    r = FaceRenderer(PYCOZMO_GEOMETRY)
    img = r.render(FaceParams().with_eyes(**{n: 0.0 for n in EYE_PARAM_NAMES[5:13]}))
    r0, r1, c0, c1 = box(img[:, :64])
    assert (r1 - r0 + 1, c1 - c0 + 1) == (40, 28)
    assert (c0 + c1 + 1) / 2 == 39                   # 64 - 25
    moved = r.render(FaceParams(center_x_px=20.0).with_eyes(**{n: 0.0 for n in EYE_PARAM_NAMES[5:13]}))
    assert box(moved[:, :64])[2] - c0 == 11          # 20 * 0.55


def test_centres_are_pixels():
    base = R.render(FaceParams())
    moved = R.render(FaceParams(center_x_px=5.0, center_y_px=-3.0))
    assert np.array_equal(np.roll(np.roll(base, 5, axis=1), -3, axis=0), moved)
    p = FaceParams()
    p.left.center_x_px = 4.0
    eye = R.render(p)
    assert np.array_equal(np.roll(base[:, :64], 4, axis=1), eye[:, :64])
    assert np.array_equal(base[:, 64:], eye[:, 64:])


def test_corner_radii_land_on_the_named_corners():
    # Only the left eye's upper-inner corner (top right of the left eye) is round.
    sharp = {n: 0.0 for n in EYE_PARAM_NAMES[5:13]}
    p = FaceParams().with_eyes(**sharp)
    p.left.upper_inner_radius_x = 1.0
    p.left.upper_inner_radius_y = 1.0
    img = R.render(p)
    assert img[12, 17] and img[51, 17] and img[51, 46]   # the other three corners are sharp
    assert not img[12, 46]                               # top right rounded away
    # The right eye mirrors: its upper-inner corner is its top left.
    q = FaceParams().with_eyes(**sharp)
    q.right.upper_inner_radius_x = 1.0
    q.right.upper_inner_radius_y = 1.0
    img = R.render(q)
    assert not img[12, 81] and img[12, 110]


def test_lids_cover_from_the_top_and_bottom_and_tilt_inner_end_down():
    sharp = {n: 0.0 for n in EYE_PARAM_NAMES[5:13]}
    half = R.render(FaceParams().with_eyes(upper_lid_y=0.5, **sharp))
    assert box(half[:, :64])[:2] == (32, 51)             # the top 20 of 40 rows covered
    low = R.render(FaceParams().with_eyes(lower_lid_y=0.25, **sharp))
    assert box(low[:, :64])[:2] == (12, 41)
    angry = R.render(FaceParams().with_eyes(upper_lid_y=0.3, upper_lid_angle_deg=20.0, **sharp))
    left, right = angry[:, :64], angry[:, 64:]
    top_row = lambda img, col: int(np.flatnonzero(img[:, col])[0])  # noqa: E731
    assert top_row(left, 45) > top_row(left, 18)         # left eye: inner (right) end lower
    assert top_row(right, 81 - 64) > top_row(right, 110 - 64)  # right eye: inner (left) end lower
    bent = R.render(FaceParams().with_eyes(lower_lid_y=0.1, lower_lid_bend=0.4, **sharp))
    col_mid, col_edge = bent[:, 32], bent[:, 18]
    assert np.flatnonzero(col_mid)[-1] < np.flatnonzero(col_edge)[-1]  # the bend rises in the middle


def test_face_angle_turns_counter_clockwise_and_scale_shrinks():
    img = R.render(FaceParams(angle_deg=15.0))
    assert box(img[:, 64:])[0] < box(img[:, :64])[0]     # right eye higher
    small = R.render(FaceParams(scale_x=0.5, scale_y=0.5))
    assert 0.2 < small.sum() / R.render(FaceParams()).sum() < 0.3
    assert not R.render(FaceParams(scale_x=0.0)).any()


def test_a_closed_eye_stays_visible_on_the_even_rows():
    for cy in np.arange(-3.0, 3.0, 0.25):
        p = FaceParams().with_eyes(scale_y=0.0, center_y_px=float(cy))
        assert R.render_display(p).any(), cy


def test_render_display_is_the_even_rows():
    for face in EXPRESSIONS.values():
        assert np.array_equal(R.render_display(face), R.render(face)[0::2])


finite = st.floats(-200, 200, allow_nan=False)
anything = st.one_of(finite, st.sampled_from([math.nan, math.inf, -math.inf, 1e30, -1e30]))


@settings(max_examples=150, deadline=None)
@given(st.lists(anything, min_size=43, max_size=43))
def test_any_parameters_render_without_error(values):
    full = R.render(values)
    assert full.shape == (64, 128) and full.dtype == bool
    assert np.array_equal(R.render_display(values), full[0::2])
    data = R.encode(values)
    assert len(data) <= MAX_DISPLAY_BYTES
    assert np.array_equal(decode_display(data), fit_to_frame(full[0::2])[1])
    assert np.array_equal(sanitize_array(values), sanitize_array(sanitize_array(values)))


def test_renderer_accepts_params_arrays_and_lists():
    p = EXPRESSIONS["happy"]
    assert np.array_equal(R.render(p), R.render(p.to_array()))
    assert np.array_equal(R.render(p), R.render(p.to_array().tolist()))
    with pytest.raises(ValueError):
        R.render([0.0] * 42)


def test_eyeparams_helpers():
    e = EyeParams().set_radii(0.2)
    assert e.to_list()[5:13] == [0.2] * 8
    assert EyeParams.from_sequence(e.to_list()) == e
    with pytest.raises(ValueError):
        EyeParams.from_sequence([1.0] * 18)


def test_anki_geometry_is_the_default():
    assert R.geometry == ANKI_GEOMETRY
    assert (ANKI_GEOMETRY.eye_width_px, ANKI_GEOMETRY.eye_height_px) == (30.0, 40.0)


def test_close_to_pycozmo_with_its_geometry():
    """pycozmo's default face and ours with its geometry preset cover nearly the same pixels."""
    pf = require("pycozmo.procedural_face")
    ref = np.asarray(pf.ProceduralFace().render(), dtype=bool)
    ours = FaceRenderer(PYCOZMO_GEOMETRY).render(FaceParams())
    iou = np.count_nonzero(ref & ours) / np.count_nonzero(ref | ours)
    assert iou > 0.9, iou


# --------------------------------------------------------------------------- the axis-aligned path

def _random_faces(seed: int, count: int) -> list[list[float]]:
    """``count`` faces of 43 values from Python's seeded generator (random() and uniform(),
    whose sequences stay the same across versions). Three in ten are resting faces moved
    about as a gaze and a blink move them; two in ten take round values (halves, quarters,
    scales such as 0.3), which put pixels' centres on the edges of the eyes' boxes, corners
    and lids, or a rounding error away; the others take each value anywhere in its range,
    often at its ends, at its default, tiny, or for an angle at 0, 90, 180 or 360 degrees
    (cosines and sines not exactly 0 or 1)."""
    rng = random.Random(seed)
    angles = {4, 5 + 4, 24 + 4}
    lid_angles = {5 + 14, 5 + 17, 24 + 14, 24 + 17}
    lids = {base + i for base in (5, 24) for i in (13, 15, 16, 18)}
    special_angles = (90.0, -90.0, 180.0, -180.0, 360.0, -360.0, 1e-12, 45.0)
    pick = lambda values: values[int(rng.random() * len(values))]  # noqa: E731
    faces = []
    for _ in range(count):
        v = [float(x) for x in _DEFAULTS]
        kind = rng.random()
        if kind < 0.2:
            for i in range(NUM_PARAMS):
                if _HI[i] == 128.0:
                    v[i] = int(rng.random() * 41) / 2.0 - 10.0
                elif _HI[i] == 10.0:  # some put a box's edge on pixels' centres, some 1e-15 off
                    v[i] = pick((0.5, 1.0, 1.0, 1.5, 2.0, 0.25, 0.3, 0.7, 1.1, 1.3, 0.325, 0.675, 1.075))
                elif i in angles or i in lid_angles:
                    v[i] = pick((0.0, 0.0, 0.0, 0.0, 90.0, 180.0, -45.0, 30.0))
                elif i in lids:
                    v[i] = pick((0.0, 0.0, 0.25, 0.5))
                else:
                    v[i] = pick((0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 0.05, 0.225, 0.3))
        elif kind < 0.5:
            v[0], v[1] = rng.uniform(-40.0, 40.0), rng.uniform(-20.0, 20.0)
            radius = rng.random() if rng.random() < 0.5 else 0.55
            for base, inward in ((5, 1.0), (24, -1.0)):
                v[base] = inward * 8.0 + rng.uniform(-2.0, 2.0)
                v[base + 1] = rng.uniform(-4.0, 4.0)
                v[base + 2] = 1.2 * rng.uniform(0.9, 1.1)
                v[base + 3] = 0.92 * rng.uniform(0.75, 1.25)
                if rng.random() < 0.2:  # a blink's frame
                    v[base + 3] *= rng.uniform(0.0, 0.2)
                    v[base + 2] *= rng.uniform(1.0, 5.0)
                for i in range(5, 13):
                    v[base + i] = radius
                if rng.random() < 0.3:  # lids, straight or tilted
                    v[base + 13], v[base + 16] = rng.uniform(0.0, 0.5), rng.uniform(0.0, 0.4)
                    v[base + 15], v[base + 18] = rng.uniform(0.0, 0.5), rng.uniform(0.0, 0.5)
                    if rng.random() < 0.5:
                        v[base + 14], v[base + 17] = rng.uniform(-30.0, 30.0), rng.uniform(-30.0, 30.0)
        else:
            for i in range(NUM_PARAMS):
                lo, hi = float(_LO[i]), float(_HI[i])
                r = rng.random()
                if i in angles or i in lid_angles:
                    zero = 0.6 if i in angles else 0.4
                    if r < zero:
                        v[i] = 0.0
                    elif r < zero + 0.15:
                        v[i] = special_angles[int(rng.random() * len(special_angles))]
                    else:
                        v[i] = rng.uniform(lo, hi)
                elif r < 0.07:
                    v[i] = lo
                elif r < 0.14:
                    v[i] = hi
                elif r < 0.3:
                    pass  # the default
                elif r < 0.36:
                    v[i] = max(lo, 0.0) + (1e-300 if rng.random() < 0.5 else 1e-9)
                elif hi == 10.0 and r < 0.75:  # scales: mostly where faces are
                    v[i] = rng.uniform(0.0, 2.0)
                elif hi == 128.0 and r < 0.75:  # centres: mostly on the screen
                    v[i] = rng.uniform(-20.0, 20.0)
                elif i in lids and r < 0.75:  # lids: mostly leaving some of the eye
                    v[i] = rng.uniform(0.0, 0.4)
                else:
                    v[i] = rng.uniform(lo, hi)
        faces.append(v)
    return faces


def _renders(renderer: FaceRenderer, faces) -> list[np.ndarray]:
    return [img for face in faces for img in (renderer.render(face), renderer.render_display(face))]


#: sha256 of the renders of _random_faces(18, 2000) (render(), render_display() of each, then
#: every fourth face's with PYCOZMO_GEOMETRY) as the renderer drew them before it had the
#: axis-aligned path (commit 09e6816). An intended change of the drawing changes it: then
#: put the changed renderer's digest here, after looking at the goldens.
GOLDEN_DIGEST = "89d2382fc9539d7d43488b9a0bf44ce125a4c5426e9c51650a8dd8c81b78e9fe"


def test_the_renders_of_2000_faces_are_as_before_the_axis_aligned_path():
    """The shorter path for unturned eyes changed no pixel of 2000 faces of every kind."""
    faces = _random_faces(18, 2000)
    digest = hashlib.sha256()
    for img in _renders(R, faces) + _renders(FaceRenderer(PYCOZMO_GEOMETRY), faces[::4]):
        digest.update(img.tobytes())
    assert digest.hexdigest() == GOLDEN_DIGEST


def _general(geometry=ANKI_GEOMETRY) -> FaceRenderer:
    """A renderer that draws every eye by the general code (turned eyes' path)."""
    r = FaceRenderer(geometry)
    r._axis_aligned = False
    return r


class _Counted(FaceRenderer):
    """A renderer that counts the eyes _draw_axis_aligned drew (True) and left to the general
    code (False)."""

    def __init__(self, geometry=ANKI_GEOMETRY) -> None:
        super().__init__(geometry)
        self.counts = {True: 0, False: 0}

    def _draw_axis_aligned(self, *args) -> bool:
        drawn = super()._draw_axis_aligned(*args)
        self.counts[drawn] += 1
        return drawn


def _animated_faces() -> list[np.ndarray]:
    """Every expression, still and looking about, and an animator's frames: a gaze moved every
    frame (look_at), its blinks and saccades, and eased changes between the expressions."""
    faces = [face.to_array() for face in EXPRESSIONS.values()]
    rng = random.Random(5)
    for face in EXPRESSIONS.values():
        faces += [look_at(face, rng.uniform(-1.2, 1.2), rng.uniform(-1.2, 1.2)).to_array() for _ in range(8)]
    animator = FaceAnimator(seed=3)
    names = sorted(EXPRESSIONS)
    t = 10.0
    for i in range(900):
        t += 1.0 / 30.0
        if i % 60 == 0:
            animator.set_expression(names[(i // 60) % len(names)], t, 0.3)
        animator.look_at(rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0), t - 0.01)
        faces.append(animator.frame(t).to_array())
    return faces


def test_the_axis_aligned_path_draws_what_the_general_path_draws():
    """Unturned eyes take a shorter path (FaceRenderer._draw_axis_aligned) that must light
    exactly the pixels of the general one: several thousand faces, each value over its whole
    range (angles, lids, bends, extreme scales), gazes, blinks and every expression."""
    faces = _random_faces(7, 3000) + _animated_faces()
    for geometry, some in ((ANKI_GEOMETRY, faces), (PYCOZMO_GEOMETRY, faces[::5])):
        fast, general = _Counted(geometry), _general(geometry)
        for face in some:
            for a, b in zip(_renders(fast, [face]), _renders(general, [face])):
                if not np.array_equal(a, b):
                    raise AssertionError(f"{np.count_nonzero(a != b)} pixels differ for {list(face)}")
        # compared, not skipped: most eyes took the shorter path, a few were left to the other
        assert fast.counts[True] > 2 * len(some) and fast.counts[False] > 0, fast.counts


def test_unturned_eyes_take_the_axis_aligned_path():
    """The shorter path draws the eyes of a face moved about by its gaze; not a turned face's,
    nor an eye with a radius so small that its corner's terms could be infinite."""
    r = _Counted()
    for x in (-1.0, -0.3, 0.0, 0.4, 1.0):
        r.render_display(look_at(EXPRESSIONS["neutral"], x, -x / 2))
        r.render(look_at(EXPRESSIONS["happy"], x, x / 2))
    assert r.counts == {True: 20, False: 0}
    r.render(FaceParams(angle_deg=5.0))
    assert r.counts == {True: 20, False: 0}
    r.render(FaceParams().with_eyes(upper_outer_radius_x=1e-300))
    assert r.counts == {True: 20, False: 2}
