"""Named faces, gaze, and a face that lives over time.

Pure: time is always an argument and randomness comes from a seeded generator,
so the same seed and the same times give the same faces.

* :data:`EXPRESSIONS` / :func:`expression`: named faces, designed for this
  project (values below) in the units of :mod:`.procedural`;
* :func:`look_at`: moves a face's gaze towards a point of the image;
* :class:`FaceAnimator`: eases between expressions and adds idle life (blinks
  every few seconds, small saccades with pauses, none on shut eyes) while nothing else is shown;
  ``frame(now)`` gives the face to show at ``now``.
"""

from __future__ import annotations

import math
import random
from typing import Callable, Dict, Optional, Union

import numpy as np

from .procedural import EyeParams, FaceParams, interpolate_arrays

__all__ = [
    "EXPRESSIONS",
    "ALIASES",
    "BLINK",
    "expression",
    "expression_names",
    "look_at",
    "ease_in_out",
    "blink_factors",
    "BLINK_DURATION_S",
    "GAZE_MAX_X_PX",
    "GAZE_MAX_Y_PX",
    "FaceAnimator",
    "eyes_shut",
    "SHUT_EYE_OPEN_FRACTION",
]

# --------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------

#: The resting eyes: wider and a little shorter than the nominal box, closer together.
_REST = EyeParams(scale_x=1.2, scale_y=0.92).set_radii(0.55)
_INWARD_PX = 8.0


def _face(left: Optional[dict] = None, right: Optional[dict] = None, both: Optional[dict] = None,
          **face: float) -> FaceParams:
    """A face built on the resting eyes; ``both`` applies to both eyes, then ``left``/``right``."""
    base_left = _REST.replace(center_x_px=_INWARD_PX)
    base_right = _REST.replace(center_x_px=-_INWARD_PX)
    if both:
        base_left = base_left.replace(**both)
        base_right = base_right.replace(**both)
    if left:
        base_left = base_left.replace(**left)
    if right:
        base_right = base_right.replace(**right)
    return FaceParams(left=base_left, right=base_right, **face)


def _build_expressions() -> Dict[str, FaceParams]:
    e: Dict[str, FaceParams] = {}
    e["neutral"] = _face()
    # Happy eyes are arches: round tops, and a bent lower lid parallel to them.
    arch = dict(upper_inner_radius_x=0.9, upper_outer_radius_x=0.9, upper_inner_radius_y=1.0,
                upper_outer_radius_y=1.0, lower_lid_y=0.15, lower_lid_bend=0.5)
    e["happy"] = _face(both=dict(scale_y=0.9, **arch), center_y_px=-2.0)
    e["joy"] = _face(both=dict(scale_x=1.4, scale_y=1.0, **arch), center_y_px=-5.0)
    e["excited"] = _face(
        both=dict(scale_x=1.3, scale_y=1.12, lower_lid_y=0.12, lower_lid_bend=0.3,
                  upper_inner_radius_y=0.75, upper_outer_radius_y=0.75),
        center_y_px=-4.0,
    )
    e["sad"] = _face(
        left=dict(center_x_px=5.0), right=dict(center_x_px=-5.0),
        both=dict(scale_y=0.82, upper_lid_y=0.32, upper_lid_angle_deg=-22.0, upper_lid_bend=0.05,
                  lower_inner_radius_y=0.7, lower_outer_radius_y=0.7),
        center_y_px=6.0,
    )
    e["angry"] = _face(
        both=dict(scale_y=0.86, upper_lid_y=0.3, upper_lid_angle_deg=26.0, lower_lid_y=0.12,
                  upper_inner_radius_x=0.2, upper_outer_radius_x=0.3),
        center_y_px=2.0,
    )
    e["surprised"] = _face(
        left=dict(center_x_px=4.0), right=dict(center_x_px=-4.0),
        both={"scale_x": 1.2, "scale_y": 1.15, **{n: 0.75 for n in _RADII}},
        center_y_px=-3.0,
    )
    e["sleepy"] = _face(
        both=dict(scale_x=1.25, upper_lid_y=0.55, upper_lid_angle_deg=-6.0, upper_lid_bend=0.08,
                  lower_lid_y=0.12),
        center_y_px=6.0,
    )
    e["bored"] = _face(
        both=dict(scale_x=1.28, scale_y=0.85, upper_lid_y=0.46, lower_lid_y=0.08),
        center_x_px=-10.0, center_y_px=3.0,
    )
    e["confused"] = _face(
        left=dict(scale_y=0.8, upper_lid_y=0.3, upper_lid_angle_deg=-14.0, lower_lid_y=0.1),
        right=dict(scale_x=1.1, scale_y=1.08, center_y_px=-3.0),
        angle_deg=-6.0,
    )
    e["fearful"] = _face(
        left=dict(center_x_px=3.0), right=dict(center_x_px=-3.0),
        both=dict(scale_x=0.95, scale_y=1.08, upper_lid_y=0.14, upper_lid_angle_deg=-18.0,
                  lower_lid_y=0.1, lower_lid_bend=0.1),
        center_y_px=-4.0, scale_x=0.95,
    )
    e["suspicious"] = _face(
        left=dict(upper_lid_y=0.4, lower_lid_y=0.32),
        right=dict(upper_lid_y=0.33, lower_lid_y=0.28, upper_lid_angle_deg=6.0),
        both=dict(scale_x=1.25),
        center_x_px=-12.0,
    )
    e["determined"] = _face(
        both=dict(scale_y=0.95, upper_lid_y=0.24, upper_lid_angle_deg=16.0, lower_lid_y=0.2,
                  lower_lid_bend=0.25),
    )
    e["disgusted"] = _face(
        left=dict(upper_lid_y=0.42, upper_lid_angle_deg=12.0, lower_lid_y=0.18, scale_y=0.8),
        right=dict(scale_y=0.72, lower_lid_y=0.38, lower_lid_bend=0.25, upper_lid_y=0.12),
        angle_deg=5.0, center_x_px=4.0,
    )
    e["wink"] = _face(
        left=dict(lower_lid_y=0.2, lower_lid_bend=0.35),
        right=dict(scale_x=1.3, scale_y=0.55, center_y_px=4.0, **arch),
    )
    e["closed"] = _face(both=dict(scale_x=1.3, scale_y=0.05, center_y_px=4.0))
    e["skeptical"] = _face(
        left=dict(scale_y=1.05, center_y_px=-3.0),
        right=dict(upper_lid_y=0.38, upper_lid_angle_deg=12.0, lower_lid_y=0.15),
    )
    e["worried"] = _face(
        both=dict(scale_x=1.05, scale_y=0.95, upper_lid_y=0.22, upper_lid_angle_deg=-20.0,
                  lower_lid_y=0.18, lower_lid_bend=0.1),
        center_y_px=2.0,
    )
    e["squint"] = _face(both=dict(scale_x=1.3, upper_lid_y=0.36, lower_lid_y=0.36))
    return e


_RADII = (
    "lower_inner_radius_x", "lower_inner_radius_y", "upper_inner_radius_x", "upper_inner_radius_y",
    "upper_outer_radius_x", "upper_outer_radius_y", "lower_outer_radius_x", "lower_outer_radius_y",
)

#: Named faces (read-only by convention: :func:`expression` returns copies).
EXPRESSIONS: Dict[str, FaceParams] = _build_expressions()
#: Other names for some expressions.
ALIASES: Dict[str, str] = {
    "love": "joy",
    "scared": "fearful",
    "afraid": "fearful",
    "focused": "determined",
    "default": "neutral",
}


#: Not an expression: the name the face node takes (face/expression, set_face_expression) to
#: blink once, the expression kept (:meth:`FaceAnimator.blink`); ``closed`` shuts the eyes.
BLINK = "blink"


def expression_names() -> list[str]:
    """The names of :data:`EXPRESSIONS` (without aliases), in definition order."""
    return list(EXPRESSIONS)


def expression(name: str, blink_taken: bool = False) -> FaceParams:
    """A copy of the named expression (aliases accepted, case and surrounding spaces
    ignored); ``KeyError`` names the choices, with :data:`BLINK` where the caller takes it
    (``blink_taken``: the face node's commands), and says that :data:`BLINK` is none."""
    key = name.strip().lower()
    if key == BLINK:
        raise KeyError(f"{BLINK!r} is not an expression: it blinks once, the expression kept "
                       "(the face node's face/expression and set_face_expression); 'closed' shuts the eyes")
    key = ALIASES.get(key, key)
    try:
        return EXPRESSIONS[key].copy()
    except KeyError:
        aliases = ", ".join(f"{alias} ({meant})" for alias, meant in sorted(ALIASES.items()))
        blink = f"; and {BLINK} (one blink, the expression kept)" if blink_taken else ""
        raise KeyError(f"unknown expression {name!r}; known: {', '.join(sorted(EXPRESSIONS))}; "
                       f"aliases: {aliases}{blink}") from None


# --------------------------------------------------------------------------------------------
# Gaze
# --------------------------------------------------------------------------------------------

#: How far the face moves for a gaze at the edge of the image (x, y = +-1).
GAZE_MAX_X_PX = 22.0
GAZE_MAX_Y_PX = 12.0
# The eyes' shapes follow Anki's ProceduralFace::LookAt with its default arguments: the eye
# on the side looked at is up to 10 % taller and the other as much shorter; both are 1.1x
# looking fully up and 0.85x fully down against 0.975x straight ahead (here relative to
# straight ahead, which leaves the face as it is: +-12.8 %); looking down they move up to
# 2 px towards each other.
_GAZE_NEAR_EYE_GROWTH = 0.1
_GAZE_VERTICAL = 0.125 / 0.975
_GAZE_CONVERGE_PX = 2.0


def _gaze_point(v: float) -> float:
    """A gaze coordinate within -1..1 (NaN: 0)."""
    return 0.0 if v != v else max(-1.0, min(1.0, float(v)))


def look_at(params: FaceParams, x: float, y: float) -> FaceParams:
    """``params`` looking towards ``(x, y)`` in normalised image coordinates.

    ``x`` and ``y`` run from -1 to 1 (clamped; NaN counts as 0): (0, 0) is
    straight ahead, +x to the right of the screen as seen from the front, i.e. towards
    the robot's left (from the robot's camera image: x = -(2u/width - 1)), +y down
    (y = 2v/height - 1).  The whole face
    shifts by up to :data:`GAZE_MAX_X_PX` / :data:`GAZE_MAX_Y_PX`; the eye on
    the side looked at grows a little and the other shrinks, eyes open a little
    looking up and narrow looking down, and converge slightly looking down.
    """
    x, y = _gaze_point(x), _gaze_point(y)
    out = params.copy()
    out.center_x_px += x * GAZE_MAX_X_PX
    out.center_y_px += y * GAZE_MAX_Y_PX
    vertical = 1.0 - _GAZE_VERTICAL * y
    out.left.scale_y *= vertical * (1.0 - _GAZE_NEAR_EYE_GROWTH * x)
    out.right.scale_y *= vertical * (1.0 + _GAZE_NEAR_EYE_GROWTH * x)
    if y > 0:
        out.left.center_x_px += _GAZE_CONVERGE_PX * y
        out.right.center_x_px -= _GAZE_CONVERGE_PX * y
    return out


# --------------------------------------------------------------------------------------------
# Animation
# --------------------------------------------------------------------------------------------


def ease_in_out(t: float) -> float:
    """Smoothstep 3t^2 - 2t^3 on t clamped to 0..1."""
    t = 0.0 if not t > 0.0 else (1.0 if t > 1.0 else t)
    return t * t * (3.0 - 2.0 * t)


# The blink, as Anki's engine draws it (ProceduralFaceDrawer::GetNextBlinkFrame): seven
# frames of (eye scale_y, scale_x) factors on the face as it was, 33 ms each but the last
# (100 ms); in the fourth, "closed", the lids are removed and both eyes level at their mean
# height, so the closed eye is a clean horizontal line. Here each frame lasts one display
# frame (1/30 s) and the last three, so that at 30 frames a second each is shown once
# whatever the blink's phase against the frames. The lids also go in the frames either side
# of the closed one (10 and 15 % of the height, this project's choice): there an eye is a
# few pixels tall, and lids (squint, sleepy, suspicious) cut it to a row or none, which
# fell on an odd row of the screen in many gazes, one the robot does not show (it shows
# the even rows): the eye vanished for a frame. Without them it is at least 2 px tall
# (FaceGeometry.min_extent_px), so it always lights an even row.
_BLINK_FRAMES = ((0.85, 1.05), (0.6, 1.2), (0.1, 2.5), (0.05, 5.0), (0.15, 2.0), (0.7, 1.2), (0.9, 1.0))
_BLINK_CLOSED = 3
_BLINK_LIDLESS = (2, 3, 4)
_BLINK_FRAME_S = 1.0 / 30.0
_BLINK_LAST_FRAMES = 3
BLINK_DURATION_S = (len(_BLINK_FRAMES) - 1 + _BLINK_LAST_FRAMES) * _BLINK_FRAME_S


def _blink_frame(t: float) -> Optional[int]:
    """Which of the blink's frames shows ``t`` seconds into it; None outside it."""
    if not 0.0 <= t < BLINK_DURATION_S:
        return None
    return min(int(t / _BLINK_FRAME_S + 1e-9), len(_BLINK_FRAMES) - 1)


def blink_factors(t: float) -> tuple[float, float]:
    """``(scale_y, scale_x)`` factors ``t`` seconds into a blink (1, 1 outside it)."""
    frame = _blink_frame(t)
    return (1.0, 1.0) if frame is None else _BLINK_FRAMES[frame]


def _apply_blink(p: FaceParams, t: float) -> FaceParams:
    frame = _blink_frame(t)
    if frame is None:
        return p
    fy, fx = _BLINK_FRAMES[frame]
    out = p.copy()
    mean_y = 0.5 * (out.left.center_y_px + out.right.center_y_px)
    for eye in (out.left, out.right):
        eye.scale_y *= fy
        eye.scale_x *= fx
        if frame in _BLINK_LIDLESS:  # no lids on a near-closed eye: a clean line
            eye.upper_lid_y = eye.lower_lid_y = 0.0
            eye.upper_lid_bend = eye.lower_lid_bend = 0.0
            eye.upper_lid_angle_deg = eye.lower_lid_angle_deg = 0.0
        if frame == _BLINK_CLOSED:  # and level
            eye.center_y_px = mean_y
    return out


#: An eye open less than this fraction of the nominal eye's height (its ``scale_y``, times the
#: face's, times what its lids leave open) is shut: ``closed`` (0.05: 2 px of 40) is, ``sleepy``
#: (about 0.3), ``squint`` and every other expression are not.
SHUT_EYE_OPEN_FRACTION = 0.1


def eyes_shut(params: FaceParams) -> bool:
    """Whether both eyes of ``params`` are (nearly) shut: idle life leaves them alone."""
    return all(
        params.scale_y * eye.scale_y * max(0.0, 1.0 - eye.upper_lid_y - eye.lower_lid_y) < SHUT_EYE_OPEN_FRACTION
        for eye in (params.left, params.right)
    )


ExpressionLike = Union[str, FaceParams]


class FaceAnimator:
    """A face over time: eased expression changes, gaze, blinks and saccades.

    Feed it times (seconds on any monotonic clock); :meth:`frame` returns the
    face to show.  Everything random comes from generators seeded with
    ``seed``, and blinks and saccades are scheduled in time order, so the faces
    depend only on the seed and on the times and calls made, never on how often
    :meth:`frame` is called.  Times should not go backwards.

    Idle life (``idle=True``): a blink every ``blink_interval_s`` (uniform
    range) and, separately, saccades: every ``saccade_interval_s`` the gaze
    jumps (in ``saccade_duration_s``) to a random point within
    ``saccade_range`` (normalised, added to the gaze set by :meth:`look_at`),
    returning to the centre about one time in three. Neither while the eyes being eased
    to are shut (:func:`eyes_shut`: ``closed``, not ``sleepy``): the idle blinks and saccades
    due then are skipped (a saccade's offset is taken back to the centre as they close);
    :meth:`blink` and :meth:`look_at` still act.
    """

    def __init__(
        self,
        seed: int = 0,
        base: ExpressionLike = "neutral",
        now: float = 0.0,
        idle: bool = True,
        blink_interval_s: tuple[float, float] = (2.5, 6.0),
        saccade_interval_s: tuple[float, float] = (0.8, 3.0),
        saccade_range: tuple[float, float] = (0.3, 0.3),
        saccade_duration_s: float = 1.0 / 15.0,
        ease: Callable[[float], float] = ease_in_out,
    ) -> None:
        self.seed = int(seed)
        self.idle = bool(idle)
        self.blink_interval_s = blink_interval_s
        self.saccade_interval_s = saccade_interval_s
        self.saccade_range = saccade_range
        self.saccade_duration_s = float(saccade_duration_s)
        self.ease = ease
        self._blink_rng = random.Random(self.seed * 2 + 1)
        self._saccade_rng = random.Random(self.seed * 2 + 2)
        start = self._resolve(base).to_array()
        self._shut = eyes_shut(FaceParams.from_array(start))
        self._from = start
        self._to = start
        self._t0 = now
        self._duration = 0.0
        self._gaze_from = (0.0, 0.0)
        self._gaze_to = (0.0, 0.0)
        self._gaze_t0 = now
        self._gaze_duration = 0.0
        self._sacc_from = (0.0, 0.0)
        self._sacc_to = (0.0, 0.0)
        self._sacc_t0 = now
        self._blink_start: Optional[float] = None
        self._next_blink = now + self._blink_rng.uniform(*blink_interval_s)
        self._next_saccade = now + self._saccade_rng.uniform(*saccade_interval_s)
        self.blinks = 0
        self.saccades = 0

    @staticmethod
    def _resolve(expr: ExpressionLike) -> FaceParams:
        return expression(expr) if isinstance(expr, str) else expr.copy()

    # ------------------------------------------------------------------ commands

    def set_expression(self, expr: ExpressionLike, now: float, duration_s: float = 0.3) -> None:
        """Ease from the face shown at ``now`` (without gaze and blink) to ``expr``."""
        self._advance(now)  # the idle life due until now, with the eyes as they were
        current = self._base_array(now)
        target = self._resolve(expr)
        self._from = current
        self._to = target.to_array()
        self._shut = eyes_shut(target)
        if self._shut:  # the eyes go back to the centre as they close
            self._sacc_from, self._sacc_to, self._sacc_t0 = self._saccade(now), (0.0, 0.0), now
        self._t0 = now
        self._duration = max(0.0, float(duration_s))

    def look_at(self, x: float, y: float, now: float, duration_s: float = 0.12) -> None:
        """Turn the gaze towards normalised ``(x, y)`` (see :func:`look_at`: clamped to -1..1,
        NaN counts as 0) over ``duration_s``. Clamped here, not only when drawn: a gaze
        asked beyond the edge is held at the edge, so the next one eases from there and
        the saccades still move the eyes."""
        self._gaze_from = self._gaze(now)
        self._gaze_to = (_gaze_point(x), _gaze_point(y))
        self._gaze_t0 = now
        self._gaze_duration = max(0.0, float(duration_s))

    def blink(self, now: float) -> None:
        """Blink now (the next idle blink is rescheduled after this one)."""
        self._blink_start = now
        self.blinks += 1
        self._next_blink = now + BLINK_DURATION_S + self._blink_rng.uniform(*self.blink_interval_s)

    def set_idle(self, enabled: bool, now: float) -> None:
        """Turn idle life on or off; turning it on restarts the blink and saccade schedules."""
        enabled = bool(enabled)
        if enabled and not self.idle:
            self._next_blink = now + self._blink_rng.uniform(*self.blink_interval_s)
            self._next_saccade = now + self._saccade_rng.uniform(*self.saccade_interval_s)
        if not enabled:
            self._sacc_from = self._sacc_to = (0.0, 0.0)
        self.idle = enabled

    # ------------------------------------------------------------------ state

    def transitioning(self, now: float) -> bool:
        """True while an expression change is in progress."""
        return now < self._t0 + self._duration

    def target(self) -> FaceParams:
        """The expression being eased towards."""
        return FaceParams.from_array(self._to)

    def _base_array(self, now: float) -> np.ndarray:
        if self._duration <= 0.0 or now >= self._t0 + self._duration:
            return self._to
        return interpolate_arrays(self._from, self._to, self.ease((now - self._t0) / self._duration))

    def _gaze(self, now: float) -> tuple[float, float]:
        if self._gaze_duration <= 0.0:
            f = 1.0
        else:
            f = self.ease((now - self._gaze_t0) / self._gaze_duration)
        (x0, y0), (x1, y1) = self._gaze_from, self._gaze_to
        return x0 + f * (x1 - x0), y0 + f * (y1 - y0)

    def _saccade(self, now: float) -> tuple[float, float]:
        f = self.ease((now - self._sacc_t0) / self.saccade_duration_s) if self.saccade_duration_s > 0 else 1.0
        (x0, y0), (x1, y1) = self._sacc_from, self._sacc_to
        return x0 + f * (x1 - x0), y0 + f * (y1 - y0)

    def _advance(self, now: float) -> None:
        if not self.idle:
            return
        while self._next_blink <= now:
            start = self._next_blink
            if not self._shut:
                self._blink_start = start
                self.blinks += 1
            self._next_blink = start + BLINK_DURATION_S + self._blink_rng.uniform(*self.blink_interval_s)
        while self._next_saccade <= now:
            start = self._next_saccade
            rng = self._saccade_rng
            if self._shut:
                self._next_saccade = start + self.saccade_duration_s + rng.uniform(*self.saccade_interval_s)
                continue
            self._sacc_from = self._saccade(start)
            if rng.random() < 1.0 / 3.0:
                self._sacc_to = (0.0, 0.0)
            else:
                rx, ry = self.saccade_range
                self._sacc_to = (rng.uniform(-rx, rx), rng.uniform(-ry, ry))
            self._sacc_t0 = start
            self.saccades += 1
            self._next_saccade = start + self.saccade_duration_s + rng.uniform(*self.saccade_interval_s)

    # ------------------------------------------------------------------ output

    def frame(self, now: float) -> FaceParams:
        """The face to show at ``now``."""
        self._advance(now)
        face = FaceParams.from_array(self._base_array(now))
        gx, gy = self._gaze(now)
        if self.idle:
            sx, sy = self._saccade(now)
            gx += sx
            gy += sy
        if gx or gy:
            face = look_at(face, gx, gy)
        if self._blink_start is not None:
            face = _apply_blink(face, now - self._blink_start)
        return face


def _check() -> None:  # pragma: no cover - import-time self check
    for name, face in EXPRESSIONS.items():
        fixed, warnings = face.validated()
        assert not warnings, (name, warnings)
    assert all(v in EXPRESSIONS for v in ALIASES.values())
    assert math.isclose(BLINK_DURATION_S, 0.3)


_check()
