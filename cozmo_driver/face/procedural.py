"""Cozmo's procedural face: 43 parameters, rendered to the 128x64 screen.

Pure: numpy only, no clock, no I/O.

Parameters
----------
A face is five whole-face values and 19 values per eye (:class:`FaceParams`,
:class:`EyeParams`).  :meth:`FaceParams.to_array` lays them out as 43 floats::

    0..4     face: center_x_px, center_y_px, scale_x, scale_y, angle_deg
    5..23    left eye, 19 values in Anki's CLAD ``ProceduralEyeParameter`` order
    24..42   right eye, the same

The 19 eye values, in CLAD order (the index within the eye)::

    0 center_x_px   1 center_y_px   2 scale_x   3 scale_y   4 angle_deg
    5 lower_inner_radius_x   6 lower_inner_radius_y
    7 upper_inner_radius_x   8 upper_inner_radius_y
    9 upper_outer_radius_x  10 upper_outer_radius_y
   11 lower_outer_radius_x  12 lower_outer_radius_y
   13 upper_lid_y  14 upper_lid_angle_deg  15 upper_lid_bend
   16 lower_lid_y  17 lower_lid_angle_deg  18 lower_lid_bend

This is the order of the app's animation files (``leftEye``/``rightEye`` of a
``ProceduralFace`` keyframe).  pycozmo orders indices 7..12 differently
(lower-outer, upper-inner, upper-outer: notes g and m.13) and so puts the app's
corner radii on the wrong corners; :meth:`FaceParams.from_pycozmo_array` and
:meth:`FaceParams.to_pycozmo_array` convert.

Units and geometry (:class:`FaceGeometry`, default :data:`ANKI_GEOMETRY`)
-----------------------------------------------------------------------
The screen is 128x64 with x to the right and y down; pixel (row i, column j)
is sampled at its centre (j + 0.5, i + 0.5), so the screen's centre (64, 32)
lies between pixels.  As in Anki's face drawer:

* the nominal eye is a 30 x 40 px box centred at (32, 32) (left eye) and
  (96, 32) (right eye), i.e. +-32 px either side of the screen centre;
* centres (face and eye) are offsets in screen pixels;
* a corner radius of 1.0 is half the eye's width (x) or height (y), 0 a sharp
  corner; "inner" corners face the other eye, "outer" ones the screen edge (the
  right eye is the left eye mirrored);
* a lid's ``y`` is how far it comes down (upper) or up (lower) as a fraction
  of the eye's height, its ``bend`` the height of the half-ellipse that curves
  its edge into the eye, as a fraction of the eye's height, and its angle tilts
  it (positive: the inner end lower, for both eyes and both lids);
* an eye is scaled, then rotated by ``angle_deg`` (positive: counter-clockwise
  on the screen) about its centre, then placed; lids are part of the eye and
  move, scale and rotate with it;
* the whole face is then scaled and rotated about the screen centre and shifted
  by its centre offset, which is limited so that the eyes' boxes stay on the screen
  (Anki's ProceduralFace::SetFacePosition: a gaze or an animation's face offset stops
  at the screen's edge; :attr:`FaceGeometry.keep_on_screen`).

pycozmo draws 28 x 40 eyes at +-25 px and multiplies centres by 0.55 (x) and
0.25 (y) (notes g).  :data:`PYCOZMO_GEOMETRY` reproduces those numbers for
comparison; the default follows Anki's engine, because the parameters of the
app's animations were made for it.

Rendering
---------
Every lit pixel is decided by an inside test at its centre: each pixel of an
eye's screen bounding box is mapped back into the eye's own frame (one affine
map composed of the inverse face and eye transforms), tested against the
rounded rectangle (a quarter ellipse per corner) and against the two lids
(a half-plane through the lid line, plus the bend's half-ellipse).  All of it
is vectorised numpy over the bounding boxes only; only even rows are computed
when only the 128x32 protocol image is wanted (:meth:`FaceRenderer.render_display`).
An eye left unturned on the screen (no angle of its own or of the face, as in most
faces) takes a shorter path with the same formulas and comparisons, so the same pixels:
its local x then depends on the column only and its local y on the row only.
An eye's box is never thinner than 2 px on the screen, so a closed eye (without
lids) stays a line that survives the even-row reduction; lids may still cut a thin
eye to a row or nothing (the blink removes them when the eye is nearly closed).  Measured in ``bench/bench_face.py``.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence, Union

import numpy as np

from ..protocol.display import DISPLAY_WIDTH, SCREEN_HEIGHT, fit_to_frame

__all__ = [
    "FACE_WIDTH_PX",
    "FACE_HEIGHT_PX",
    "EYE_PARAM_NAMES",
    "FACE_PARAM_NAMES",
    "PARAM_NAMES",
    "NUM_PARAMS",
    "PYCOZMO_EYE_ORDER",
    "EyeParams",
    "FaceParams",
    "FaceGeometry",
    "ANKI_GEOMETRY",
    "PYCOZMO_GEOMETRY",
    "FaceRenderer",
    "interpolate",
    "interpolate_arrays",
    "sanitize_array",
    "render_face",
]

#: The 19 eye values in CLAD ``ProceduralEyeParameter`` order.
EYE_PARAM_NAMES: tuple[str, ...] = (
    "center_x_px",
    "center_y_px",
    "scale_x",
    "scale_y",
    "angle_deg",
    "lower_inner_radius_x",
    "lower_inner_radius_y",
    "upper_inner_radius_x",
    "upper_inner_radius_y",
    "upper_outer_radius_x",
    "upper_outer_radius_y",
    "lower_outer_radius_x",
    "lower_outer_radius_y",
    "upper_lid_y",
    "upper_lid_angle_deg",
    "upper_lid_bend",
    "lower_lid_y",
    "lower_lid_angle_deg",
    "lower_lid_bend",
)
#: The five whole-face values, indices 0..4 of the 43.
FACE_PARAM_NAMES: tuple[str, ...] = ("center_x_px", "center_y_px", "scale_x", "scale_y", "angle_deg")
#: All 43 names: ``face.*``, ``left.*``, ``right.*``.
PARAM_NAMES: tuple[str, ...] = (
    tuple(f"face.{n}" for n in FACE_PARAM_NAMES)
    + tuple(f"left.{n}" for n in EYE_PARAM_NAMES)
    + tuple(f"right.{n}" for n in EYE_PARAM_NAMES)
)
NUM_PARAMS = 43
_NF = len(FACE_PARAM_NAMES)
_NE = len(EYE_PARAM_NAMES)
#: an eye's 19 values as a tuple, in CLAD order (one call)
_eye_values = operator.attrgetter(*EYE_PARAM_NAMES)
assert _NF + 2 * _NE == NUM_PARAMS

#: ``PYCOZMO_EYE_ORDER[i]`` is the CLAD index of pycozmo's eye value ``i``.
PYCOZMO_EYE_ORDER: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 11, 12, 7, 8, 9, 10, 13, 14, 15, 16, 17, 18)

# Defaults and validation ranges per eye value (CLAD order).  Anki's engine
# clips scales to >= 0, radii and lid y/bend to 0..1 and lid angles to +-45
# degrees; centres and angles are bounded here only to keep numbers sane (a
# centre beyond +-128 px is off the screen anyway).
_EYE_DEFAULTS = (0.0, 0.0, 1.0, 1.0, 0.0) + (0.5,) * 8 + (0.0,) * 6
_EYE_RANGES = (
    (-128.0, 128.0),
    (-128.0, 128.0),
    (0.0, 10.0),
    (0.0, 10.0),
    (-360.0, 360.0),
) + ((0.0, 1.0),) * 8 + (
    (0.0, 1.0),
    (-45.0, 45.0),
    (0.0, 1.0),
    (0.0, 1.0),
    (-45.0, 45.0),
    (0.0, 1.0),
)
_FACE_DEFAULTS = (0.0, 0.0, 1.0, 1.0, 0.0)
_FACE_RANGES = ((-128.0, 128.0), (-128.0, 128.0), (0.0, 10.0), (0.0, 10.0), (-360.0, 360.0))

_DEFAULTS = np.array(_FACE_DEFAULTS + _EYE_DEFAULTS * 2, dtype=np.float64)
_LO = np.array([r[0] for r in _FACE_RANGES + _EYE_RANGES * 2], dtype=np.float64)
_HI = np.array([r[1] for r in _FACE_RANGES + _EYE_RANGES * 2], dtype=np.float64)
_DEFAULTS.setflags(write=False)
_LO.setflags(write=False)
_HI.setflags(write=False)


def _eye_field(index: int) -> float:
    return dataclasses.field(default=_EYE_DEFAULTS[index])


@dataclass(slots=True)
class EyeParams:
    """The 19 values of one eye (see the module docstring for units)."""

    center_x_px: float = _eye_field(0)
    center_y_px: float = _eye_field(1)
    scale_x: float = _eye_field(2)
    scale_y: float = _eye_field(3)
    angle_deg: float = _eye_field(4)
    lower_inner_radius_x: float = _eye_field(5)
    lower_inner_radius_y: float = _eye_field(6)
    upper_inner_radius_x: float = _eye_field(7)
    upper_inner_radius_y: float = _eye_field(8)
    upper_outer_radius_x: float = _eye_field(9)
    upper_outer_radius_y: float = _eye_field(10)
    lower_outer_radius_x: float = _eye_field(11)
    lower_outer_radius_y: float = _eye_field(12)
    upper_lid_y: float = _eye_field(13)
    upper_lid_angle_deg: float = _eye_field(14)
    upper_lid_bend: float = _eye_field(15)
    lower_lid_y: float = _eye_field(16)
    lower_lid_angle_deg: float = _eye_field(17)
    lower_lid_bend: float = _eye_field(18)

    def to_list(self) -> list[float]:
        """The 19 values in CLAD order."""
        return list(map(float, _eye_values(self)))

    def copy(self) -> "EyeParams":
        """A copy (as ``dataclasses.replace(self)``, without its cost: the face is copied at
        every frame)."""
        return EyeParams(*_eye_values(self))

    @classmethod
    def from_sequence(cls, values: Sequence[float]) -> "EyeParams":
        """From 19 values in CLAD order."""
        if len(values) != _NE:
            raise ValueError(f"an eye has {_NE} values, got {len(values)}")
        return cls(*(float(v) for v in values))

    def replace(self, **changes: float) -> "EyeParams":
        return dataclasses.replace(self, **changes)

    def set_radii(self, value: float) -> "EyeParams":
        """All eight corner radii set to ``value``."""
        names = EYE_PARAM_NAMES[5:13]
        return dataclasses.replace(self, **{n: value for n in names})


@dataclass(slots=True)
class FaceParams:
    """The 43 parameters of a procedural face.

    ``left`` is the eye on the left of the screen as one looks at the robot.
    """

    center_x_px: float = 0.0
    center_y_px: float = 0.0
    scale_x: float = 1.0
    scale_y: float = 1.0
    angle_deg: float = 0.0
    left: EyeParams = field(default_factory=EyeParams)
    right: EyeParams = field(default_factory=EyeParams)

    # ------------------------------------------------------------------ arrays

    def to_array(self) -> np.ndarray:
        """43 floats: face (5), left eye (19), right eye (19), eyes in CLAD order."""
        return np.array(
            [self.center_x_px, self.center_y_px, self.scale_x, self.scale_y, self.angle_deg]
            + self.left.to_list()
            + self.right.to_list(),
            dtype=np.float64,
        )

    @classmethod
    def from_array(cls, values: Union[Sequence[float], np.ndarray]) -> "FaceParams":
        """The inverse of :meth:`to_array` (43 floats, eyes in CLAD order)."""
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if arr.size != NUM_PARAMS:
            raise ValueError(f"a face has {NUM_PARAMS} values, got {arr.size}")
        v = arr.tolist()
        return cls(
            v[0], v[1], v[2], v[3], v[4],
            EyeParams(*v[_NF:_NF + _NE]),
            EyeParams(*v[_NF + _NE:]),
        )

    @classmethod
    def from_pycozmo_array(cls, values: Sequence[float]) -> "FaceParams":
        """From pycozmo's 43-value order (its eye indices 7..12 differ from CLAD's)."""
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if arr.size != NUM_PARAMS:
            raise ValueError(f"a face has {NUM_PARAMS} values, got {arr.size}")
        out = arr.copy()
        for base in (_NF, _NF + _NE):
            for i, clad in enumerate(PYCOZMO_EYE_ORDER):
                out[base + clad] = arr[base + i]
        return cls.from_array(out)

    def to_pycozmo_array(self) -> list[float]:
        """The 43 values in pycozmo's order."""
        arr = self.to_array()
        out = arr.copy()
        for base in (_NF, _NF + _NE):
            for i, clad in enumerate(PYCOZMO_EYE_ORDER):
                out[base + i] = arr[base + clad]
        return out.tolist()

    # ------------------------------------------------------------------ dicts

    def to_dict(self) -> dict:
        """``{"center_x_px": .., ..., "left": {...}, "right": {...}}``."""
        out = {n: float(getattr(self, n)) for n in FACE_PARAM_NAMES}
        out["left"] = {n: float(getattr(self.left, n)) for n in EYE_PARAM_NAMES}
        out["right"] = {n: float(getattr(self.right, n)) for n in EYE_PARAM_NAMES}
        return out

    def updated(self, changes: Mapping) -> "FaceParams":
        """A copy with ``changes`` applied.

        Keys are face value names, ``left``/``right``/``eyes`` (both) mapping to
        eye value names, or dotted names (``"face.angle_deg"``,
        ``"left.upper_lid_y"``, ``"eyes.scale_y"``).  An unknown name raises
        ``KeyError``.
        """
        out = self.copy()
        for key, value in changes.items():
            key = str(key)
            if "." in key:
                group, name = key.split(".", 1)
                if group == "face":
                    if name not in FACE_PARAM_NAMES:
                        raise KeyError(f"unknown face parameter {name!r}")
                    setattr(out, name, float(value))
                else:
                    out._set_eye_values(group, {name: value})
            elif key in ("left", "right", "eyes"):
                if not isinstance(value, Mapping):
                    raise KeyError(f"{key!r} must map eye value names to numbers")
                out._set_eye_values(key, value)
            elif key in FACE_PARAM_NAMES:
                setattr(out, key, float(value))
            else:
                raise KeyError(f"unknown face parameter {key!r}")
        return out

    def _set_eye_values(self, group: str, values: Mapping) -> None:
        eyes = {"left": (self.left,), "right": (self.right,), "eyes": (self.left, self.right)}.get(group)
        if eyes is None:
            raise KeyError(f"unknown eye {group!r} (left, right or eyes)")
        for name, value in values.items():
            if name not in EYE_PARAM_NAMES:
                raise KeyError(f"unknown eye parameter {name!r}")
            for eye in eyes:
                setattr(eye, name, float(value))

    @classmethod
    def from_dict(cls, values: Mapping) -> "FaceParams":
        """From the form :meth:`updated` accepts, starting at the defaults."""
        return cls().updated(values)

    # ------------------------------------------------------------------ misc

    def copy(self) -> "FaceParams":
        return FaceParams(
            self.center_x_px, self.center_y_px, self.scale_x, self.scale_y, self.angle_deg,
            self.left.copy(), self.right.copy(),
        )

    def with_eyes(self, **changes: float) -> "FaceParams":
        """A copy with the same eye values changed on both eyes."""
        out = self.copy()
        out.left = dataclasses.replace(out.left, **changes)
        out.right = dataclasses.replace(out.right, **changes)
        return out

    def validated(self) -> tuple["FaceParams", list[str]]:
        """A copy with every value made usable, and what was changed.

        NaN becomes the value's default; +-inf and values outside their range
        are clamped to the range (see the module docstring).  The list holds one
        message per changed value, naming it.
        """
        arr = self.to_array()
        fixed, warnings = validate_array(arr)
        return FaceParams.from_array(fixed), warnings


def validate_array(arr: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """:meth:`FaceParams.validated` on 43 floats: ``(fixed copy, warnings)``."""
    a = np.asarray(arr, dtype=np.float64).reshape(-1)
    if a.size != NUM_PARAMS:
        raise ValueError(f"a face has {NUM_PARAMS} values, got {a.size}")
    out = a.copy()
    warnings: list[str] = []
    nan = np.isnan(out)
    for i in np.flatnonzero(nan):
        out[i] = _DEFAULTS[i]
        warnings.append(f"{PARAM_NAMES[i]} is NaN: set to its default {_DEFAULTS[i]:g}")
    clipped = np.clip(out, _LO, _HI)
    for i in np.flatnonzero(clipped != out):
        warnings.append(
            f"{PARAM_NAMES[i]} = {out[i]:g} is outside {_LO[i]:g}..{_HI[i]:g}: clamped to {clipped[i]:g}"
        )
    return clipped, warnings


def sanitize_array(arr: Union[Sequence[float], np.ndarray]) -> np.ndarray:
    """43 floats made renderable without warnings: NaN -> default, clamped to the ranges."""
    a = np.asarray(arr, dtype=np.float64).reshape(-1)
    if a.size != NUM_PARAMS:
        raise ValueError(f"a face has {NUM_PARAMS} values, got {a.size}")
    a = np.where(np.isnan(a), _DEFAULTS, a)
    return a.clip(_LO, _HI)


#: the indices of the face's and the eyes' angles among the 43 (blended as directions)
_ANGLES = (4, _NF + 4, _NF + _NE + 4)


def _blend_angle(a_deg: float, b_deg: float, t: float) -> float:
    """The direction a fraction ``t`` of the way from ``a_deg`` to ``b_deg``, in degrees:
    their unit vectors blended linearly, as Anki's engine blends the face's and the eyes'
    angles (ProceduralFace::Interpolate); equal angles stay as they are."""
    if a_deg == b_deg:
        return a_deg
    a, b = math.radians(a_deg), math.radians(b_deg)
    x = (1.0 - t) * math.cos(a) + t * math.cos(b)
    y = (1.0 - t) * math.sin(a) + t * math.sin(b)
    return math.degrees(math.atan2(y, x))


def interpolate_arrays(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """43-value arrays blended a fraction ``t`` (clamped to 0..1, exact at the ends) of the
    way from ``a`` to ``b``: ``(1 - t) * a + t * b``, but the face's and the eyes' angles
    as directions (:func:`_blend_angle`): from -170 to 170 degrees the short way, through
    180."""
    if not t > 0.0:  # also NaN
        return np.array(a, dtype=np.float64)
    if t >= 1.0:
        return np.array(b, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    out = (1.0 - t) * a + t * b
    for i in _ANGLES:
        out[i] = _blend_angle(float(a[i]), float(b[i]), t)
    return out


def interpolate(a: FaceParams, b: FaceParams, t: float) -> FaceParams:
    """The face a fraction ``t`` (0..1, clamped) of the way from ``a`` to ``b``.

    Every value blends linearly but the angles, which blend as directions, as in Anki's
    engine (:func:`interpolate_arrays`); ``t = 0`` gives ``a`` and ``t = 1`` gives ``b``
    exactly.
    """
    return FaceParams.from_array(interpolate_arrays(a.to_array(), b.to_array(), t))


# --------------------------------------------------------------------------------------------
# Geometry and rendering
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FaceGeometry:
    """Where the nominal eyes sit and how centre values map to pixels."""

    eye_width_px: float = 30.0
    eye_height_px: float = 40.0
    left_eye_x_px: float = 32.0
    right_eye_x_px: float = 96.0
    eye_y_px: float = 32.0
    #: screen pixels per unit of a centre value (face and eye centres)
    center_x_scale: float = 1.0
    center_y_scale: float = 1.0
    #: an eye's box is never thinner than this on the screen, before its lids cut it (a
    #: closed eye without lids stays a line)
    min_extent_px: float = 2.0
    #: the face's centre offset is limited so that the eyes' boxes stay on the screen, as
    #: Anki's engine limits it (ProceduralFace::SetFacePosition)
    keep_on_screen: bool = True


#: Anki's engine: 30 x 40 eyes at x = 32 and 96, centres in pixels (the default).
ANKI_GEOMETRY = FaceGeometry()
#: pycozmo's numbers: 28 x 40 eyes at +-25 px, centres scaled by 0.55 (x) and 0.25 (y).
PYCOZMO_GEOMETRY = FaceGeometry(
    eye_width_px=28.0, eye_height_px=40.0, left_eye_x_px=39.0, right_eye_x_px=89.0,
    center_x_scale=0.55, center_y_scale=0.25, keep_on_screen=False,
)

#: the face's size in pixels: the robot's whole screen (width x height)
FACE_WIDTH_PX = DISPLAY_WIDTH
FACE_HEIGHT_PX = SCREEN_HEIGHT
_WIDTH = FACE_WIDTH_PX
_HEIGHT = FACE_HEIGHT_PX
_EPS = 1e-9


def _as_param_array(params: Union[FaceParams, Sequence[float], np.ndarray]) -> np.ndarray:
    if isinstance(params, FaceParams):
        return sanitize_array(params.to_array())
    return sanitize_array(params)


class FaceRenderer:
    """Renders :class:`FaceParams` (or 43-value arrays) to bool images.

    Holds only constant pixel grids; safe to share.
    """

    #: an eye that is not turned on the screen is drawn by :meth:`_draw_axis_aligned`, which
    #: gives the same pixels for less work; False: every eye by the general code of
    #: :meth:`_draw_eye` (the tests compare the two)
    _axis_aligned = True

    def __init__(self, geometry: FaceGeometry = ANKI_GEOMETRY) -> None:
        self.geometry = geometry
        self._xs = np.arange(_WIDTH, dtype=np.float64) + 0.5
        self._ys = np.arange(_HEIGHT, dtype=np.float64) + 0.5
        self._ys_even = self._ys[0::2].copy()
        self._half = (geometry.eye_width_px / 2.0, geometry.eye_height_px / 2.0)

    # ------------------------------------------------------------------ public

    def render(self, params: Union[FaceParams, Sequence[float], np.ndarray]) -> np.ndarray:
        """The full ``(64, 128)`` screen image, True = lit."""
        canvas = np.zeros((_HEIGHT, _WIDTH), dtype=bool)
        self._draw(_as_param_array(params), canvas, 1)
        return canvas

    def render_display(self, params: Union[FaceParams, Sequence[float], np.ndarray]) -> np.ndarray:
        """The ``(32, 128)`` protocol image: the even rows of :meth:`render`, computed alone."""
        canvas = np.zeros((_HEIGHT // 2, _WIDTH), dtype=bool)
        self._draw(_as_param_array(params), canvas, 2)
        return canvas

    def encode(self, params: Union[FaceParams, Sequence[float], np.ndarray]) -> bytes:
        """``DisplayImage.image`` bytes of the face (even rows, run-length coded, fits a frame)."""
        data, _ = fit_to_frame(self.render_display(params))
        return data

    # ------------------------------------------------------------------ drawing

    def _draw(self, p: np.ndarray, canvas: np.ndarray, row_step: int) -> None:
        g = self.geometry
        v = p.tolist()
        fsx, fsy = v[2], v[3]
        if fsx < 1e-6 or fsy < 1e-6:
            return  # a face scaled to nothing
        fa = math.radians(v[4])
        fc, fs = math.cos(fa), math.sin(fa)
        cx0, cy0 = _WIDTH / 2.0, _HEIGHT / 2.0
        ftx = v[0] * g.center_x_scale
        fty = v[1] * g.center_y_scale
        if g.keep_on_screen:
            ftx, fty = self._on_screen(v, ftx, fty)
        # Face forward map: s = A_f q + t_f with A_f = R(angle) diag(sx, sy),
        # R = [[c, s], [-s, c]] (positive angle: counter-clockwise on the screen).
        af = (fc * fsx, fs * fsy, -fs * fsx, fc * fsy)
        tf = (cx0 + ftx - af[0] * cx0 - af[1] * cy0, cy0 + fty - af[2] * cx0 - af[3] * cy0)
        drawn: list = []  # the parts of the canvas drawn on so far: (row0, row1, col0, col1)
        turned = []  # drawn last, by the general code
        for base, nominal_x, mirror in ((_NF, g.left_eye_x_px, 1.0), (_NF + _NE, g.right_eye_x_px, -1.0)):
            e = v[base:base + _NE]
            m = self._eye_map(e, nominal_x, mirror, af, tf, fsx, fsy)
            if m is None:
                continue
            a00, a01, a10, a11, t0, t1, det = m
            # unturned (a01 = a10 = 0, and w ascends with the row: a11 > 0): the shorter path
            if not (self._axis_aligned and a01 == 0.0 and a10 == 0.0 and a11 > 0.0
                    and self._draw_axis_aligned(e, a11 / det, a00 / det, t0, t1, canvas, row_step, drawn)):
                turned.append((e, m))
        if turned:
            # Tiny radii or bends give huge ratios whose squares overflow to inf: harmless, the
            # tests they feed come out right.
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                for e, m in turned:
                    self._draw_eye(e, m, canvas, row_step)

    def _on_screen(self, v: list, ftx: float, fty: float) -> tuple[float, float]:
        """The face's centre offset (px) limited as Anki's engine limits it: the eyes' box
        kept within the screen. As in ProceduralFace::GetEyeBoundingBox, the box is the
        eyes' nominal places plus their offsets and sizes times the face's scale; their
        angles, lids and the face's angle do not count. Eyes wider or taller than the
        screen: centred between the limits (this project's choice)."""
        g = self.geometry
        hw, hh = g.eye_width_px / 2.0, g.eye_height_px / 2.0
        left, right = _NF, _NF + _NE
        lcx, lcy = v[left] * g.center_x_scale, v[left + 1] * g.center_y_scale
        rcx, rcy = v[right] * g.center_x_scale, v[right + 1] * g.center_y_scale
        xmin = g.left_eye_x_px + v[2] * (lcx - v[left + 2] * hw)
        xmax = g.right_eye_x_px + v[2] * (rcx + v[right + 2] * hw)
        ymin = g.eye_y_px + v[3] * min(lcy - v[left + 3] * hh, rcy - v[right + 3] * hh)
        ymax = g.eye_y_px + v[3] * max(lcy + v[left + 3] * hh, rcy + v[right + 3] * hh)
        return _limit(ftx, -xmin, _WIDTH - xmax), _limit(fty, -ymin, _HEIGHT - ymax)

    def _eye_map(self, e, nominal_x, mirror, af, tf, fsx, fsy):
        """The eye's forward map to the screen, s = A l + t, of its local point l:
        ``(a00, a01, a10, a11, t0, t1, det)``; None if it squeezes the eye to nothing."""
        g = self.geometry
        # Never thinner than min_extent_px on the screen.
        sx = max(e[2], g.min_extent_px / (g.eye_width_px * fsx))
        sy = max(e[3], g.min_extent_px / (g.eye_height_px * fsy))
        ea = math.radians(e[4])
        ec, es = math.cos(ea), math.sin(ea)
        ex = nominal_x + e[0] * g.center_x_scale
        ey = g.eye_y_px + e[1] * g.center_y_scale
        # Eye forward map on the mirrored local point: q = A_e (m*u, v) + (ex, ey).
        ae = (ec * sx * mirror, es * sy, -es * sx * mirror, ec * sy)
        # Composite forward map s = A l + t.
        a00 = af[0] * ae[0] + af[1] * ae[2]
        a01 = af[0] * ae[1] + af[1] * ae[3]
        a10 = af[2] * ae[0] + af[3] * ae[2]
        a11 = af[2] * ae[1] + af[3] * ae[3]
        t0 = af[0] * ex + af[1] * ey + tf[0]
        t1 = af[2] * ex + af[3] * ey + tf[1]
        det = a00 * a11 - a01 * a10
        if abs(det) < 1e-12:
            return None
        return a00, a01, a10, a11, t0, t1, det

    def _draw_eye(self, e, m, canvas, row_step) -> None:
        """Draws the eye of values ``e`` and map ``m`` (:meth:`_eye_map`), turned or not: the
        general code, which the turned eyes take."""
        g = self.geometry
        hw = g.eye_width_px / 2.0
        hh = g.eye_height_px / 2.0
        a00, a01, a10, a11, t0, t1, det = m
        # Screen bounding box of the eye's box.
        xs_c = [a00 * cx + a01 * cy + t0 for cx in (-hw, hw) for cy in (-hh, hh)]
        ys_c = [a10 * cx + a11 * cy + t1 for cx in (-hw, hw) for cy in (-hh, hh)]
        c0 = max(0, math.floor(min(xs_c) - 0.5))
        c1 = min(_WIDTH, math.ceil(max(xs_c) + 0.5))
        r0 = max(0, math.floor(min(ys_c) - 0.5))
        r1 = min(_HEIGHT, math.ceil(max(ys_c) + 0.5))
        if row_step == 2:
            r0 += r0 & 1
        if c0 >= c1 or r0 >= r1:
            return
        xs = self._xs[c0:c1]
        ys = self._ys[r0:r1:row_step]
        if ys.size == 0:
            return
        # Inverse: l = B (s - t).
        b00, b01, b10, b11 = a11 / det, -a01 / det, -a10 / det, a00 / det
        dx = xs - t0
        dy = (ys - t1)[:, None]
        u = b00 * dx + b01 * dy  # local x (positive: towards the other eye)
        w = b10 * dx + b11 * dy  # local y (positive: down)

        au = np.abs(u)
        aw = np.abs(w)
        inside = (au <= hw + _EPS) & (aw <= hh + _EPS)
        # Corner radii by quadrant: index = inner + 2 * upper.
        rx = np.array((e[11], e[5], e[9], e[7])) * hw  # lower-outer, lower-inner, upper-outer, upper-inner
        ry = np.array((e[12], e[6], e[10], e[8])) * hh
        if rx.any() and ry.any():
            quad = (u > 0).view(np.uint8) + 2 * (w < 0).view(np.uint8)
            qrx = rx[quad]
            qry = ry[quad]
            ddx = au - (hw - qrx)
            ddy = aw - (hh - qry)
            corner = (ddx > 0) & (ddy > 0)
            if corner.any():
                outside = (ddx / qrx) ** 2 + (ddy / qry) ** 2 > 1.0 + _EPS
                inside &= ~(corner & outside)
        # Lids: upper (side = -1) and lower (side = +1).
        for side, ly, la, lb in ((-1.0, e[13], e[14], e[15]), (1.0, e[16], e[17], e[18])):
            if ly <= 0.0 and lb <= 0.0 and la == 0.0:
                continue
            a = math.radians(la)
            c, s = math.cos(a), math.sin(a)
            y0 = side * (hh - ly * g.eye_height_px)
            wy = w - y0
            # Lid frame: rotate by -a so the lid line is lv = 0; positive lv is down.
            lv = -s * u + c * wy
            covered = (lv * side) > _EPS
            if lb > 0.0:
                xr = hw / max(c, 1e-6)
                yr = lb * g.eye_height_px
                lu = c * u + s * wy
                covered |= (lu / xr) ** 2 + (lv / yr) ** 2 < 1.0 - _EPS
            inside &= ~covered
        canvas[r0 // row_step:r0 // row_step + ys.size, c0:c1] |= inside

    def _draw_axis_aligned(self, e, b00, b11, t0, t1, canvas, row_step, drawn) -> bool:
        """:meth:`_draw_eye` for an eye whose angle and the face's leave it unturned on the
        screen (the inverse map's b01 and b10 are 0): the same formulas and comparisons on
        the same numbers, so the same pixels, but the local x then depends on the column only
        and the local y on the row only. The box's test and a straight lid's become ranges of
        columns and rows, and a corner's test the sum of a column's and a row's term. False,
        with nothing drawn, when a term could be infinite (a radius or a lid's bend under
        1e-100 px, or a radius of 0 with pixels in its corner's 1e-9 margin): the general
        code draws the eye then. Raises no floating-point warning (needs no np.errstate)."""
        hw, hh = self._half
        # v: the local x in the screen's direction (u, or -u for a mirrored eye); w: the local
        # y. Both ascend with the column and the row, so a threshold is a searchsorted count.
        v = abs(b00) * (self._xs - t0)
        w = b11 * ((self._ys if row_step == 1 else self._ys_even) - t1)
        # The corners' radii at the screen's upper left, lower left, upper right and lower
        # right: inner (towards the other eye) where u > 0.
        if b00 > 0.0:
            xul, xll, xur, xlr = e[9] * hw, e[11] * hw, e[7] * hw, e[5] * hw
            yul, yll, yur, ylr = e[10] * hh, e[12] * hh, e[8] * hh, e[6] * hh
        else:
            xul, xll, xur, xlr = e[7] * hw, e[5] * hw, e[9] * hw, e[11] * hw
            yul, yll, yur, ylr = e[8] * hh, e[6] * hh, e[10] * hh, e[12] * hh
        # The box holds |v| <= hw + eps and |w| <= hh + eps; a column is in a corner where
        # |v| > hw - rx (v < -(hw - rx) on the left, v > hw - rx on the right), a row where
        # |w| > hh - ry.
        nxt, up = math.nextafter, math.inf
        c0, c1, cul, cll, cur, clr = v.searchsorted((
            -(hw + _EPS), nxt(hw + _EPS, up), -(hw - xul), -(hw - xll), nxt(hw - xur, up), nxt(hw - xlr, up),
        )).tolist()
        r0, r1, rul, rur, rll, rlr = w.searchsorted((
            -(hh + _EPS), nxt(hh + _EPS, up), -(hh - yul), -(hh - yur), nxt(hh - yll, up), nxt(hh - ylr, up),
        )).tolist()
        corners = (xul or xll or xur or xlr) and (yul or yll or yur or ylr)
        if corners and min(xul, xll, xur, xlr, yul, yll, yur, ylr) < 1e-100:
            for r, lo, hi in ((xul, c0, cul), (xll, c0, cll), (xur, cur, c1), (xlr, clr, c1),
                              (yul, r0, rul), (yur, r0, rur), (yll, rll, r1), (ylr, rlr, r1)):
                if (r == 0.0 and lo < hi) or 0.0 < r < 1e-100:
                    return False
        if c0 >= c1 or r0 >= r1:
            return True
        lids = []
        if e[13] > 0.0 or e[15] > 0.0 or e[14] != 0.0 or e[16] > 0.0 or e[18] > 0.0 or e[17] != 0.0:
            # A straight lid covers whole rows: the box loses them. A turned or bent one is
            # tested on the box's pixels below.
            for side, ly, la, lb in ((-1.0, e[13], e[14], e[15]), (1.0, e[16], e[17], e[18])):
                if ly <= 0.0 and lb <= 0.0 and la == 0.0:
                    continue
                a = math.radians(la)
                c, s = math.cos(a), math.sin(a)
                y0 = side * (hh - ly * self.geometry.eye_height_px)
                if lb > 0.0 and lb * self.geometry.eye_height_px < 1e-100:
                    return False
                if s == 0.0 and c == 1.0:
                    wy = w[r0:r1] - y0
                    if side < 0.0:  # covered where -wy > eps
                        r0 += int(wy.searchsorted(-_EPS))
                    else:  # where wy > eps
                        r1 = r0 + int(wy.searchsorted(nxt(_EPS, up)))
                    if r0 >= r1:
                        return True
                    if lb <= 0.0:
                        continue
                lids.append((side, y0, c, s, lb * self.geometry.eye_height_px))
            rul, rur, rll, rlr = (min(max(i, r0), r1) for i in (rul, rur, rll, rlr))
        lit = None
        if corners:
            lit = self._corners(np.abs(v[c0:c1]), np.abs(w[r0:r1]), (xul, xll, xur, xlr), (yul, yll, yur, ylr),
                                (cul - c0, cll - c0, cur - c0, clr - c0), (rul - r0, rll - r0, rur - r0, rlr - r0))
        if lids:
            if lit is None:
                lit = np.ones((r1 - r0, c1 - c0), dtype=bool)
            lit = self._lids(lit, v[c0:c1] if b00 > 0.0 else -v[c0:c1], w[r0:r1], lids)
        # Where no other eye has drawn, the pixels are copied, which is cheaper than or-ing them.
        alone = True
        for d in drawn:
            if r1 > d[0] and r0 < d[1] and c1 > d[2] and c0 < d[3]:
                alone = False
        drawn.append((r0, r1, c0, c1))
        if lit is None:
            canvas[r0:r1, c0:c1] = True
        elif alone:
            canvas[r0:r1, c0:c1] = lit
        else:
            canvas[r0:r1, c0:c1] |= lit
        return True

    def _corners(self, av, aw, rx, ry, cols, rows):
        """The box's pixels the corners leave (True), or None if they cut none: ``av``, ``aw``
        the box's |v| and |w|; radii and the corners' last (left) and first (right) columns,
        and last (upper) and first (lower) rows, at the upper left, lower left, upper right and
        lower right. A pixel is cut where both its column and its row are in one corner and
        (ddx / rx) ** 2 + (ddy / ry) ** 2 > 1 + eps: the sum of a column's term and a row's,
        -inf outside the corner."""
        hw, hh = self._half
        xul, xll, xur, xlr = rx
        yul, yll, yur, ylr = ry
        cul, cll, cur, clr = cols
        rul, rll, rur, rlr = rows
        tx_up = _corner_terms(av, cul, xul, cur, xur, hw)
        tx_low = tx_up if xll == xul and xlr == xur else _corner_terms(av, cll, xll, clr, xlr, hw)
        ty_left = _corner_terms(aw, rul, yul, rll, yll, hh)
        ty_right = ty_left if yur == yul and ylr == yll else _corner_terms(aw, rur, yur, rlr, ylr, hh)
        if tx_low is not tx_up:  # upper rows take the upper corners' column terms, lower rows the lower ones'
            tx_up, tx_low = (np.full(av.shape[0], -math.inf) if t is None else t for t in (tx_up, tx_low))
            tx = np.empty((aw.shape[0], av.shape[0]))
            split = max(rul, rur)
            tx[:split] = tx_up
            tx[split:] = tx_low
        elif tx_up is None:
            return None
        else:
            tx = tx_up
        if ty_right is not ty_left:  # left columns take the left corners' row terms, right ones the right ones'
            ty_left, ty_right = (np.full(aw.shape[0], -math.inf) if t is None else t for t in (ty_left, ty_right))
            ty = np.empty((aw.shape[0], av.shape[0]))
            split = max(cul, cll)
            ty[:, :split] = ty_left[:, None]
            ty[:, split:] = ty_right[:, None]
        elif ty_left is None:
            return None
        else:
            ty = ty_left[:, None]
        return tx + ty <= 1.0 + _EPS

    def _lids(self, lit, u, w, lids):
        """``lit`` less what the turned or bent lids cover (the general code's tests, on the
        box's u and w): a lid covers where ``lv * side > eps`` or inside its bend's ellipse."""
        hw = self._half[0]
        for side, y0, c, s, yr in lids:
            wy = w - y0
            if s == 0.0 and c == 1.0:  # a straight lid's bend: lu = u, lv = wy, xr = hw
                lit &= np.add.outer((wy / yr) ** 2, (u / hw) ** 2) >= 1.0 - _EPS
                continue
            lv = np.add.outer(c * wy, -s * u)
            lit &= (lv <= _EPS) if side > 0.0 else (lv >= -_EPS)
            if yr > 0.0:
                lu = np.add.outer(s * wy, c * u)
                lit &= (lu / (hw / max(c, 1e-6))) ** 2 + (lv / yr) ** 2 >= 1.0 - _EPS
        return lit


def _corner_terms(a, lo_stop, lo_r, hi_start, hi_r, h):
    """For :meth:`FaceRenderer._draw_axis_aligned`: over ``a`` (|v| of the box's columns or
    |w| of its rows, in screen order), ``((a - (h - r)) / r) ** 2`` in the corner at the low
    end (``a[:lo_stop]``, radius ``lo_r``) and at the high end (``a[hi_start:]``, ``hi_r``),
    -inf between; None when neither has a pixel."""
    n = a.shape[0]
    if lo_stop <= 0 and hi_start >= n:
        return None
    if lo_r == hi_r:
        t = a - (h - lo_r)
        t /= lo_r
        t *= t
        t[lo_stop:hi_start] = -math.inf
        return t
    t = np.full(n, -math.inf)
    for i0, i1, r in ((0, lo_stop, lo_r), (hi_start, n, hi_r)):
        if i0 < i1:
            seg = t[i0:i1]
            np.subtract(a[i0:i1], h - r, out=seg)
            seg /= r
            seg *= seg
    return t


def _limit(value: float, lo: float, hi: float) -> float:
    """``value`` within lo..hi; midway between them if they cross."""
    if lo > hi:
        return (lo + hi) / 2.0
    return min(max(value, lo), hi)


_DEFAULT_RENDERER: FaceRenderer | None = None


def render_face(params: Union[FaceParams, Sequence[float], np.ndarray]) -> np.ndarray:
    """``FaceRenderer().render(params)`` with a shared default renderer: ``(64, 128)`` bool."""
    global _DEFAULT_RENDERER
    if _DEFAULT_RENDERER is None:
        _DEFAULT_RENDERER = FaceRenderer()
    return _DEFAULT_RENDERER.render(params)


def _ensure_names(names: Iterable[str]) -> None:  # pragma: no cover - import-time self check
    assert len(set(names)) == NUM_PARAMS


_ensure_names(PARAM_NAMES)
