"""Animation clips: our own model, its YAML/JSON format, Cozmo's FlatBuffers clips, groups.

Pure: files are read when asked, nothing else touches I/O, clocks or threads.

The model
---------
A :class:`Clip` is a name, an optional duration and :class:`Tracks`, one list
of keyframes per kind.  Times are milliseconds from the clip's start
(``time_ms``); most keyframes also last ``duration_ms``:

=========================  ===================================================
track (YAML key)           keyframe
=========================  ===================================================
``head``                   :class:`HeadKeyframe`: ``angle_deg``, ``variability_deg``
``lift``                   :class:`LiftKeyframe`: ``height_mm``, ``variability_mm``
``body``                   :class:`BodyKeyframe`: straight (``speed_mmps``), an arc
                           (``speed_mmps`` + ``radius_mm``, positive = to the left) or
                           a turn in place (``speed_dps``, positive = to the left)
``lights``                 :class:`LightsKeyframe`: 5 backpack colours (left, front,
                           middle, back, right), RGB 0..255; the side lights (left,
                           right) show only red: their red component
``face``                   :class:`FaceKeyframe`: a procedural face; the face is
                           interpolated between consecutive keyframes
``sprite``                 :class:`SpriteKeyframe`: an image sequence (30 fps)
``audio``                  :class:`AudioKeyframe`: PCM at 22 320 Hz from a WAV file, a
                           synthesised sound, or Wwise event ids (see below)
``events``                 :class:`EventKeyframe`: a named event (the player gives it
                           when reached; the driver reports it nowhere)
``record_heading``         :class:`RecordHeadingKeyframe`
``turn_to_recorded_heading``  :class:`TurnToRecordedHeadingKeyframe`: offset, speed,
                           accelerations, tolerance, half revolutions, shortest way
=========================  ===================================================

Our file format (YAML or JSON, the same structure)
--------------------------------------------------
A file holds one clip, or several under ``clips:``.  Unknown keys are errors
(a typo must not silently do nothing), reported with the file, track and index.
Times and durations are milliseconds within 0..600 000 (:data:`MAX_CLIP_MS`), and so
must be a clip's end (the library skips a clip that ends later)::

    name: nod_yes                 # required, unique within a directory
    duration_ms: 2000             # optional: default = the end of the last keyframe
    description: free text        # optional, ignored
    tracks:
      head:
        - {time_ms: 0,   duration_ms: 150, angle_deg: 30}
        - {time_ms: 150, duration_ms: 600, angle_deg: -10, variability_deg: 0}
      lift:
        - {time_ms: 0, duration_ms: 300, height_mm: 60}
      body:
        - {time_ms: 0,   duration_ms: 400, speed_mmps: 40}                  # straight
        - {time_ms: 400, duration_ms: 500, speed_mmps: 50, radius_mm: 80}   # arc, left
        - {time_ms: 900, duration_ms: 300, speed_dps: -120}                 # turn in place, right
      lights:
        - {time_ms: 0, duration_ms: 500, all: "#00ff40"}      # the side lights: its red
        - {time_ms: 500, duration_ms: 500, left: [255, 0, 0], middle: "#0000ff"}  # others off
      face:
        - {time_ms: 0, expression: neutral}
        - {time_ms: 300, expression: happy, look_at: [0.3, -0.2]}
        - {time_ms: 600, expression: happy, params: {eyes.scale_y: 1.1, face.angle_deg: 8}}
      sprite:
        - {time_ms: 0, name: anim_sprite_folder}   # needs a sprite directory
      audio:
        - {time_ms: 0, source: "synth:chirp(600, 1400, 0.25, 0.6)"}
        - {time_ms: 500, source: sounds/beep.wav, volume: 0.8}    # relative to the file
        - {time_ms: 800, wwise: [3454987211]}                     # needs an audio map
      events:
        - {time_ms: 500, id: apex}
      record_heading:
        - {time_ms: 0}
      turn_to_recorded_heading:
        - {time_ms: 1000, duration_ms: 800, offset_deg: 0, speed_dps: 180,
           accel_dps2: 1000, decel_dps2: 1000, tolerance_deg: 2,
           num_half_revs: 0, use_shortest_dir: true}

Face keyframes: ``expression`` (a name of :data:`cozmo_driver.face.expressions.EXPRESSIONS`,
default ``neutral``), then ``params`` (changes in the form
:meth:`FaceParams.updated` accepts), then ``look_at`` ``[x, y]``; or ``array``:
the 43 values in CLAD order.  Colours are ``"#rrggbb"`` or ``[r, g, b]``; the side
lights (``left``, ``right``) are red LEDs, which show a colour's red component: one
named with green or blue in it gets a note in :attr:`Clip.mended` saying what shows
(``all`` does not: every light shows it as it can).

Values that would do nothing are mended, each with a note in :attr:`Clip.mended`
naming the file, clip, keyframe and value (the library logs each): a head or lift
target beyond the robot's range (-25..44.5 deg, 32..92 mm) is clamped to it, a face's
parameters are :meth:`FaceParams.validated` (a NaN to its default, the rest clamped to
its range) before ``look_at``, whose ``x`` and ``y`` beyond -1..1 are clamped to it, and
a clip's ``duration_ms`` shorter than its keyframes and sounds becomes their end (the
clip lasts until they end). A lights keyframe without ``duration_ms`` (or with 0)
holds until the next lights keyframe or the clip's end; one with nothing after it is
skipped.

Synthesised sounds (``synth:`` sources) are generated at load time at 22 320 Hz
(no audio files in the repository); arguments are numbers, ``volume`` is 0..1
of full scale (default 0.5), every sound gets 5 ms fades; a frequency must be
above 0 (a chirp's may be 0) and below 11 160 Hz, half the rate (a tone at it
is silent, one above it would sound at another pitch; a warble's frequency plus
its depth too): any other frequency or volume is refused, naming it:

* ``synth:tone(freq_hz, duration_s[, volume])``
* ``synth:chirp(start_hz, end_hz, duration_s[, volume])``: a linear sweep
* ``synth:warble(freq_hz, depth_hz, rate_hz, duration_s[, volume])``: vibrato
* ``synth:beeps(freq_hz, count, on_s, off_s[, volume])``
* ``synth:noise(duration_s[, volume[, seed]])``: white noise with a decay
* ``synth:silence(duration_s)``

Cozmo's own clips (``.bin``, FlatBuffers; JSON of the same shape)
----------------------------------------------------------------
The app's ``cozmo_resources/assets/animations/*.bin`` files are FlatBuffers
with root ``AnimClips { clips: [AnimClip { Name, keyframes: Keyframes }] }``
(notes g).  :func:`read_anim_bin` reads them with its own bounds-checked reader
over the raw bytes (table and field order of the public ``cozmo_anim.fbs``
fix the vtable slots); malformed data raises :class:`ClipFormatError`.  The app's
JSON form (``{"clips": [{"Name": ..., "keyframes": {"HeadAngleKeyFrame": [...]}}]}``)
is read by the same conversion.  Conversion:

* HeadAngle, LiftHeight, BodyMotion (``radius_mm`` ``"STRAIGHT"``,
  ``"TURN_IN_PLACE"``/``"POINT_TURN"`` with the speed in deg/s, or a number),
  BackpackLights (floats 0..1 -> 0..255; the fourth value, IR, is kept),
  ProceduralFace (the 43 values, eyes in CLAD order), Event, RecordHeading
  and TurnToRecordedHeading map one to one.
* RobotAudio keyframes carry Wwise event ids, which only the app's sound banks
  resolve: they are kept, and played only if an ``audio_map`` (event id ->
  WAV path or PCM at 22 320 Hz) is given; otherwise they are skipped with a warning.
* FaceAnimation keyframes name a sprite sequence: loaded from
  ``sprite_dir/<animName>/*.png`` (sorted by name, one frame per tick) when a
  sprite directory is given, else skipped with a warning.

:func:`write_anim_bin` writes clips back with the ``flatbuffers`` runtime's
Builder (imported only then): it is what the tests use to make ``.bin`` files,
so no app asset is needed anywhere.

Animation groups
----------------
The app picks an animation for a trigger from a group: a JSON file
(``animationGroups/**/<group>.json``) holding ``{"Animations": [{"Name",
"Weight", "CooldownTime_Sec", "Mood", "UseHeadAngle", "HeadAngleMin_Deg",
"HeadAngleMax_Deg"}]}``, with ``//`` and ``/* */`` comments in places.
:func:`load_animation_groups` reads each file on its own (a bad one is skipped
with a warning naming it), :class:`AnimationGroup` holds one, and
:class:`GroupChooser` picks a member by weight with a seeded generator,
honouring cool-downs (times are arguments).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import random
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import numpy as np

from ..face.expressions import expression, look_at
from ..face.procedural import EYE_PARAM_NAMES, NUM_PARAMS, FaceParams
from ..fast_yaml import safe_load
from ..json_comments import loads as json_loads
from ..protocol.audio import SAMPLE_RATE, load_wav
from ..regular_files import NotAFileError, open_regular, read_regular_text
from ..errors import CozmoError, UsageError
from ..robot_geometry import HEAD_MAX_ANGLE_RAD, HEAD_MIN_ANGLE_RAD, LIFT_MAX_HEIGHT_M, LIFT_MIN_HEIGHT_M

__all__ = [
    "SAMPLE_RATE",  # the robot's audio rate (Hz): that of clip sounds and synthesize()
    "AnimationError",
    "ClipFormatError",
    "HeadKeyframe",
    "LiftKeyframe",
    "BodyKeyframe",
    "LightsKeyframe",
    "FaceKeyframe",
    "SpriteKeyframe",
    "AudioKeyframe",
    "EventKeyframe",
    "RecordHeadingKeyframe",
    "TurnToRecordedHeadingKeyframe",
    "Tracks",
    "Clip",
    "MAX_CLIP_MS",
    "BODY_STRAIGHT",
    "BODY_ARC",
    "BODY_TURN_IN_PLACE",
    "LIGHT_NAMES",
    "synthesize",
    "parse_clip",
    "load_clip_file",
    "load_clips_dir",
    "read_anim_bin",
    "write_anim_bin",
    "clips_from_anki_json",
    "list_builtin",
    "load_builtin",
    "GroupMember",
    "AnimationGroup",
    "load_animation_groups",
    "read_group_file",
    "GroupChooser",
]

logger = logging.getLogger("cozmo.anim")


class AnimationError(UsageError):
    """An animation that cannot be played: unknown name, too long, unreadable clip."""


class ClipFormatError(AnimationError):
    """A clip file (ours, the app's JSON or FlatBuffers) cannot be read; the message says where.
    ``clip``: the name of the clip found wrong, when it was read before the error."""

    def __init__(self, message: str, clip: Optional[str] = None) -> None:
        super().__init__(message)
        self.clip = clip


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------

#: Longest time or duration a clip may hold (10 minutes; Cozmo's own clips last seconds).
MAX_CLIP_MS = 600_000

BODY_STRAIGHT = "straight"
BODY_ARC = "arc"
BODY_TURN_IN_PLACE = "turn_in_place"
#: Backpack lights in the order of ``AnimBackpackLights.colors``.
LIGHT_NAMES = ("left", "front", "middle", "back", "right")

@dataclass(slots=True)
class HeadKeyframe:
    time_ms: float
    duration_ms: float
    angle_deg: float
    variability_deg: float = 0.0


@dataclass(slots=True)
class LiftKeyframe:
    time_ms: float
    duration_ms: float
    height_mm: float
    variability_mm: float = 0.0


@dataclass(slots=True)
class BodyKeyframe:
    """Body motion for ``duration_ms``, then stop.

    ``mode`` is :data:`BODY_STRAIGHT` (``speed`` in mm/s), :data:`BODY_ARC`
    (``speed`` in mm/s at the robot's centre, ``radius_mm`` positive to the left)
    or :data:`BODY_TURN_IN_PLACE` (``speed`` in deg/s, positive to the left).
    """

    time_ms: float
    duration_ms: float
    mode: str
    speed: float
    radius_mm: Optional[float] = None


@dataclass(slots=True)
class LightsKeyframe:
    """Backpack colours for ``duration_ms`` (then off unless the next keyframe starts)."""

    time_ms: float
    duration_ms: float
    colors: tuple = ((0, 0, 0),) * 5  # (r, g, b) 0..255 per light in LIGHT_NAMES order
    ir: tuple = (False,) * 5


@dataclass(slots=True)
class FaceKeyframe:
    time_ms: float
    params: FaceParams


@dataclass(slots=True)
class SpriteKeyframe:
    """An image sequence from ``time_ms``, one ``(64, 128)`` bool frame per tick (None: unresolved)."""

    time_ms: float
    name: str
    frames: Optional[list] = None


@dataclass(slots=True)
class AudioKeyframe:
    """A sound from ``time_ms``: ``pcm`` int16 mono at 22 320 Hz (None: unresolved).

    ``source`` says where it came from (a path, a ``synth:`` spec); ``event_ids``,
    ``probabilities`` and ``has_alts`` are the app's Wwise references, kept as read.
    """

    time_ms: float
    pcm: Optional[np.ndarray] = None
    source: str = ""
    volume: float = 1.0
    event_ids: tuple = ()
    probabilities: tuple = ()
    has_alts: bool = True

    @property
    def duration_ms(self) -> float:
        return 0.0 if self.pcm is None else 1000.0 * len(self.pcm) / SAMPLE_RATE


@dataclass(slots=True)
class EventKeyframe:
    time_ms: float
    event_id: str


@dataclass(slots=True)
class RecordHeadingKeyframe:
    time_ms: float


@dataclass(slots=True)
class TurnToRecordedHeadingKeyframe:
    time_ms: float
    duration_ms: float
    offset_deg: float = 0.0
    speed_dps: float = 0.0
    accel_dps2: float = 1000.0
    decel_dps2: float = 1000.0
    tolerance_deg: float = 2.0
    num_half_revs: int = 0
    use_shortest_dir: bool = False


TRACK_NAMES = ("head", "lift", "body", "lights", "face", "sprite", "audio", "events",
               "record_heading", "turn_to_recorded_heading")


@dataclass
class Tracks:
    head: List[HeadKeyframe] = field(default_factory=list)
    lift: List[LiftKeyframe] = field(default_factory=list)
    body: List[BodyKeyframe] = field(default_factory=list)
    lights: List[LightsKeyframe] = field(default_factory=list)
    face: List[FaceKeyframe] = field(default_factory=list)
    sprite: List[SpriteKeyframe] = field(default_factory=list)
    audio: List[AudioKeyframe] = field(default_factory=list)
    events: List[EventKeyframe] = field(default_factory=list)
    record_heading: List[RecordHeadingKeyframe] = field(default_factory=list)
    turn_to_recorded_heading: List[TurnToRecordedHeadingKeyframe] = field(default_factory=list)

    @property
    def moves_treads(self) -> bool:
        """Whether the clip drives the treads: body motion, or a turn to a recorded heading."""
        return bool(self.body or self.turn_to_recorded_heading)

    @property
    def drives_forwards(self) -> bool:
        """Whether body motion takes the robot forwards (a straight or an arc at a positive
        speed; a turn in place does not)."""
        return any(k.mode != BODY_TURN_IN_PLACE and k.speed > 0 for k in self.body)

    def sort(self) -> None:
        """Sort every track by time (stable)."""
        for name in TRACK_NAMES:
            getattr(self, name).sort(key=lambda k: k.time_ms)

    def all_keyframes(self) -> Iterable[Any]:
        for name in TRACK_NAMES:
            yield from getattr(self, name)


@dataclass
class Clip:
    """A named animation.  ``duration_s`` None: it lasts until its last keyframe ends."""

    name: str
    duration_s: Optional[float] = None
    tracks: Tracks = field(default_factory=Tracks)
    #: problems found while loading (skipped keyframes, clamped values)
    warnings: List[str] = field(default_factory=list)
    #: where it was loaded from, for messages
    source: str = ""
    #: our format's values mended at load (a head or lift target beyond the robot's range, a
    #: face parameter NaN or out of range, a gaze beyond -1..1, a duration shorter than the
    #: keyframes), keyframes skipped that would not show and side lights given a colour they
    #: cannot show, each naming the file, clip, keyframe and value: the library logs each
    mended: List[str] = field(default_factory=list)

    @property
    def end_s(self) -> float:
        """When the clip ends: its duration, or the end of its last keyframe or sound if later."""
        end_ms = 0.0
        for kf in self.tracks.all_keyframes():
            end = kf.time_ms + float(getattr(kf, "duration_ms", 0.0) or 0.0)
            if isinstance(kf, SpriteKeyframe) and kf.frames:
                end = kf.time_ms + 1000.0 * len(kf.frames) / 30.0
            end_ms = max(end_ms, end)
        end = end_ms / 1000.0
        if self.duration_s is not None:
            end = max(end, float(self.duration_s))
        return end


# --------------------------------------------------------------------------------------------
# Synthesised sounds
# --------------------------------------------------------------------------------------------

_FADE_S = 0.005
_SYNTH_RE = re.compile(r"^\s*([a-z_]+)\s*\((.*)\)\s*$")
_MAX_SYNTH_S = 30.0


def _envelope(n: int, rate: int) -> np.ndarray:
    env = np.ones(n)
    k = min(int(_FADE_S * rate), n // 2)
    if k > 0:
        ramp = np.linspace(0.0, 1.0, k, endpoint=False)
        env[:k] = ramp
        env[n - k:] = ramp[::-1]
    return env


def _to_pcm(signal: np.ndarray, volume: float) -> np.ndarray:
    if not 0.0 <= volume <= 1.0:
        raise ValueError(f"volume must be within 0..1, got {volume:g}")
    return np.clip(np.rint(signal * volume * 32767.0), -32768, 32767).astype(np.int16)


def _secs(value: float, what: str) -> float:
    if not 0.0 < value <= _MAX_SYNTH_S:
        raise ValueError(f"{what} must be within 0..{_MAX_SYNTH_S:g} s, got {value:g}")
    return value


def _hz(value: float, what: str, rate: int, zero: bool = False) -> float:
    """``value``, a frequency below half the sample ``rate`` (at it a tone is silence, above
    it one folds back to another pitch) and above 0 (or 0 too, with ``zero``)."""
    nyquist = rate / 2.0
    if not (0.0 <= value if zero else 0.0 < value) or not value < nyquist:
        raise ValueError(f"{what} must be {'0 or above' if zero else 'above 0'} and below {nyquist:g} Hz "
                         f"(half the {rate} Hz sample rate: a tone at it is silent), got {value:g}")
    return value


def synthesize(spec: str, rate: int = SAMPLE_RATE) -> np.ndarray:
    """PCM (int16 mono at ``rate``) for a ``synth:`` spec (the prefix is optional).

    See the module docstring for the sounds.  Raises ``ValueError`` for an
    unknown sound or bad arguments.
    """
    text = spec[len("synth:"):] if spec.startswith("synth:") else spec
    m = _SYNTH_RE.match(text)
    if not m:
        raise ValueError(f"not a synth spec: {spec!r} (expected name(args), e.g. tone(440, 0.5))")
    name, arg_text = m.group(1), m.group(2).strip()
    try:
        args = [float(a) for a in arg_text.split(",")] if arg_text else []
    except ValueError:
        raise ValueError(f"synth arguments must be numbers: {spec!r}") from None
    if not all(math.isfinite(a) for a in args):
        raise ValueError(f"synth arguments must be finite: {spec!r}")

    def need(lo: int, hi: int) -> None:
        if not lo <= len(args) <= hi:
            raise ValueError(f"synth:{name} takes {lo}..{hi} arguments, got {len(args)}: {spec!r}")

    if name == "tone":
        need(2, 3)
        f, d = _hz(args[0], "frequency", rate), _secs(args[1], "duration")
        vol = args[2] if len(args) > 2 else 0.5
        t = np.arange(int(round(d * rate))) / rate
        sig = np.sin(2 * np.pi * f * t)
    elif name == "chirp":
        need(3, 4)
        f0, f1 = _hz(args[0], "start frequency", rate, zero=True), _hz(args[1], "end frequency", rate, zero=True)
        d = _secs(args[2], "duration")
        vol = args[3] if len(args) > 3 else 0.5
        t = np.arange(int(round(d * rate))) / rate
        sig = np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t * t / (2 * d)))
    elif name == "warble":
        need(4, 5)
        f, depth, wr, d = _hz(args[0], "frequency", rate), args[1], args[2], _secs(args[3], "duration")
        if not f + abs(depth) < rate / 2.0:
            raise ValueError(f"synth:warble's frequency plus depth must be below {rate / 2.0:g} Hz (half the "
                             f"{rate} Hz sample rate), got {f:g} + {abs(depth):g}: {spec!r}")
        vol = args[4] if len(args) > 4 else 0.5
        t = np.arange(int(round(d * rate))) / rate
        phase = 2 * np.pi * f * t
        if wr > 0:
            phase = phase - (depth / wr) * np.cos(2 * np.pi * wr * t)
        sig = np.sin(phase)
    elif name == "beeps":
        need(4, 5)
        f, count, on, off = _hz(args[0], "frequency", rate), int(args[1]), _secs(args[2], "on"), args[3]
        vol = args[4] if len(args) > 4 else 0.5
        if not 1 <= count <= 50 or not 0.0 <= off <= _MAX_SYNTH_S:
            raise ValueError(f"synth:beeps needs 1..50 beeps and a gap within 0..30 s: {spec!r}")
        t = np.arange(int(round(on * rate))) / rate
        beep = np.sin(2 * np.pi * f * t) * _envelope(t.size, rate)
        gap = np.zeros(int(round(off * rate)))
        parts = []
        for i in range(count):
            parts.append(beep)
            if i < count - 1:
                parts.append(gap)
        return _to_pcm(np.concatenate(parts), vol)
    elif name == "noise":
        need(1, 3)
        d = _secs(args[0], "duration")
        vol = args[1] if len(args) > 1 else 0.5
        seed = int(args[2]) if len(args) > 2 else 0
        n = int(round(d * rate))
        rng = np.random.default_rng(seed)
        sig = rng.uniform(-1.0, 1.0, n) * np.exp(-3.0 * np.arange(n) / max(n, 1))
    elif name == "silence":
        need(1, 1)
        return np.zeros(int(round(_secs(args[0], "duration") * rate)), dtype=np.int16)
    else:
        raise ValueError(f"unknown synth sound {name!r} (tone, chirp, warble, beeps, noise, silence)")
    return _to_pcm(sig * _envelope(sig.size, rate), vol)


# --------------------------------------------------------------------------------------------
# Our YAML/JSON format
# --------------------------------------------------------------------------------------------

AudioMap = Mapping[int, Union[str, os.PathLike, np.ndarray]]


class _Where:
    """Names the place in a file for error messages."""

    def __init__(self, source: str, clip: Optional[str] = None) -> None:
        self.source = source
        self.clip = clip  # the clip's name, once known (ClipFormatError.clip)

    def error(self, where: str, message: str) -> ClipFormatError:
        return ClipFormatError(f"{self.source}: {where}: {message}", self.clip)

    def note(self, where: str, message: str) -> str:
        return f"{self.source}: {where}: {message}"


#: the robot's head (deg) and lift (mm) ranges: our format's targets are clamped to them
_HEAD_RANGE_DEG = (round(math.degrees(HEAD_MIN_ANGLE_RAD), 6), round(math.degrees(HEAD_MAX_ANGLE_RAD), 6))
_LIFT_RANGE_MM = (round(LIFT_MIN_HEIGHT_M * 1000.0, 6), round(LIFT_MAX_HEIGHT_M * 1000.0, 6))


def _in_range(value: float, bounds: tuple, what: str, where: str, ctx: _Where, mended: List[str]) -> float:
    """``value`` clamped to ``bounds``, with a note in ``mended`` when it was beyond them;
    ``what``: e.g. "angle_deg/head/deg"."""
    key, axis, unit = what.split("/")
    fixed = min(max(value, bounds[0]), bounds[1])
    if fixed != value:
        mended.append(ctx.note(where, f"{key} {value:g} is beyond the {axis}'s range {bounds[0]:g}..{bounds[1]:g} "
                                      f"{unit}: clamped to {fixed:g}"))
    return fixed


def _hold_lights(tracks: "Tracks", lights_at: List[tuple], end_ms: float, ctx: _Where, mended: List[str]) -> None:
    """Lights keyframes ``(where, keyframe, what)`` given no duration (none, or 0) hold until
    the next lights keyframe or the clip's end ``end_ms``; one with nothing after it is skipped."""
    for where, kf, what in lights_at:
        until = min([k.time_ms for k in tracks.lights if k.time_ms > kf.time_ms] + [end_ms])
        if until > kf.time_ms:
            kf.duration_ms = until - kf.time_ms
        else:
            tracks.lights.remove(kf)
            mended.append(ctx.note(where, f"{what}, and the clip ends at {end_ms:g} ms: it would not show: skipped"))


def _number(value: Any, where: str, ctx: _Where, finite: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.error(where, f"expected a number, got {value!r}")
    value = float(value)
    if finite and not math.isfinite(value):
        raise ctx.error(where, f"expected a finite number, got {value!r}")
    return value


def _time(value: Any, where: str, ctx: _Where) -> float:
    t = _number(value, where, ctx)
    if not 0 <= t <= MAX_CLIP_MS:
        raise ctx.error(where, f"times and durations must be within 0..{MAX_CLIP_MS} ms, got {t:g}")
    return t


def _check_keys(item: Any, allowed: Iterable[str], required: Iterable[str], where: str, ctx: _Where) -> Mapping:
    if not isinstance(item, Mapping):
        raise ctx.error(where, f"expected a mapping, got {type(item).__name__}")
    allowed = set(allowed)
    unknown = sorted(str(k) for k in item if k not in allowed)
    if unknown:
        raise ctx.error(where, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    missing = [k for k in required if k not in item]
    if missing:
        raise ctx.error(where, f"missing key(s) {', '.join(missing)}")
    return item


def _color(value: Any, where: str, ctx: _Where) -> tuple:
    if isinstance(value, str):
        m = re.fullmatch(r"#?([0-9a-fA-F]{6})", value.strip())
        if not m:
            raise ctx.error(where, f"colour must be '#rrggbb' or [r, g, b], got {value!r}")
        h = m.group(1)
        return (int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16))
    if isinstance(value, Sequence) and len(value) == 3:
        out = []
        for c in value:
            c = _number(c, where, ctx)
            if not 0 <= c <= 255:
                raise ctx.error(where, f"colour components must be 0..255, got {c:g}")
            out.append(int(round(c)))
        return tuple(out)
    raise ctx.error(where, f"colour must be '#rrggbb' or [r, g, b], got {value!r}")


def _red_sides(colors: tuple, where: str, ctx: _Where, mended: List[str]) -> None:
    """A note in ``mended`` for each side light (left, right) given green or blue: they show
    only red (sent as given; the robot shows the red component)."""
    for i in (0, LIGHT_NAMES.index("right")):
        r, g, b = colors[i]
        if g or b:
            off = " (off)" if not r else ""
            mended.append(ctx.note(where, f"{LIGHT_NAMES[i]} #{r:02x}{g:02x}{b:02x}: the side lights show only red, "
                                          f"so it shows as #{r:02x}0000{off}"))


def _load_audio_source(source: str, base_dir: Optional[Path], where: str, ctx: _Where) -> np.ndarray:
    if source.startswith("synth:"):
        try:
            return synthesize(source)
        except ValueError as exc:
            raise ctx.error(where, str(exc)) from None
    path = Path(source)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        pcm, _ = load_wav(path)
    except CozmoError as exc:
        raise ctx.error(where, f"cannot load audio {source!r}: {exc}") from None
    return pcm


def _scaled(pcm: np.ndarray, volume: float) -> np.ndarray:
    if volume == 1.0:
        return pcm
    return np.clip(np.rint(pcm.astype(np.float64) * volume), -32768, 32767).astype(np.int16)


def _resolve_mapped_audio(value: Union[str, os.PathLike, np.ndarray], base_dir: Optional[Path]) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value.astype(np.int16, copy=False)
    path = Path(value)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    pcm, _ = load_wav(path)
    return pcm


def _wwise_audio(kf: AudioKeyframe, audio_map: Optional[AudioMap], base_dir: Optional[Path],
                 warnings: List[str], clip_name: str) -> None:
    """Resolve a Wwise keyframe's PCM from ``audio_map`` (first id found), else warn."""
    if audio_map:
        for event_id in kf.event_ids:
            if event_id in audio_map:
                try:
                    kf.pcm = _scaled(_resolve_mapped_audio(audio_map[event_id], base_dir), kf.volume)
                    kf.source = f"wwise:{event_id}"
                    return
                except CozmoError as exc:
                    warnings.append(f"{clip_name}: audio for Wwise event {event_id} unusable: {exc}")
                    return
    ids = ", ".join(str(i) for i in kf.event_ids) or "none"
    warnings.append(
        f"{clip_name}: audio keyframe at {kf.time_ms:g} ms (Wwise event ids {ids}) skipped: "
        "Wwise events need the app's sound banks; pass an audio_map to play them"
    )


def _load_sprite_frames(name: str, sprite_dir: Optional[Union[str, os.PathLike]],
                        warnings: List[str], clip_name: str, time_ms: float) -> Optional[list]:
    if sprite_dir is None:
        warnings.append(f"{clip_name}: sprite sequence {name!r} at {time_ms:g} ms skipped: no sprite directory given")
        return None
    frames, problem = _sprite_sequence(str(Path(sprite_dir) / name))
    if frames is None:
        warnings.append(f"{clip_name}: {problem}; sequence {name!r} skipped")
        return None
    return list(frames)


def clear_sprite_cache() -> None:
    """Forget the sprite sequences read so far (a library loaded again reads them again)."""
    _sprite_sequence.cache_clear()


@functools.lru_cache(maxsize=512)
def _sprite_sequence(folder: str):
    """(the frames of a sprite folder, None) or (None, what is wrong); read once: the app's
    clips share their sprite sequences (a blink, a squint), so each is read for the first
    clip that names it."""
    path = Path(folder)
    files = sorted(path.glob("*.png")) if path.is_dir() else []
    if not files:
        return None, f"no PNG files in {path}"
    from PIL import Image

    from ..protocol.display import image_to_bits

    frames = []
    for f in files:
        try:
            with open_regular(f, "animation_sprite_dir", binary=True) as stream, Image.open(stream) as im:
                frames.append(image_to_bits(np.asarray(im.convert("L"))))
        except (OSError, NotAFileError) as exc:
            return None, f"sprite frame {f} unreadable ({exc})"
    return tuple(frames), None


def _face_from_item(item: Mapping, where: str, ctx: _Where, mended: List[str]) -> FaceParams:
    if "array" in item:
        arr = item["array"]
        if not isinstance(arr, Sequence) or len(arr) != NUM_PARAMS:
            raise ctx.error(where, f"array must hold {NUM_PARAMS} numbers")
        face = FaceParams.from_array([_number(v, where, ctx, finite=False) for v in arr])
    else:
        name = item.get("expression", "neutral")
        try:
            face = expression(str(name))
        except KeyError as exc:
            raise ctx.error(where, str(exc.args[0])) from None
    params = item.get("params")
    if params is not None:
        if not isinstance(params, Mapping):
            raise ctx.error(where, "params must be a mapping of face parameter names to numbers")
        try:
            face = face.updated({k: _number(v, where, ctx, finite=False) if not isinstance(v, Mapping) else
                                 {kk: _number(vv, where, ctx, finite=False) for kk, vv in v.items()}
                                 for k, v in params.items()})
        except KeyError as exc:
            raise ctx.error(where, str(exc.args[0])) from None
    face, problems = face.validated()  # NaN to its default, the rest clamped, as the app's faces
    mended.extend(ctx.note(where, problem) for problem in problems)
    gaze = item.get("look_at")
    if gaze is not None:
        if not isinstance(gaze, Sequence) or len(gaze) != 2:
            raise ctx.error(where, "look_at must be [x, y] (each -1..1)")
        x, y = (_number(v, where, ctx) for v in gaze)
        for axis, v in (("x", x), ("y", y)):
            if not -1.0 <= v <= 1.0:
                fixed = max(-1.0, min(1.0, v))
                mended.append(ctx.note(where, f"look_at {axis} {v:g} is beyond -1..1: clamped to {fixed:g}"))
        face = look_at(face, x, y)  # (which clamps them)
    return face


def parse_clip(data: Mapping, source: str = "<clip>", base_dir: Optional[Union[str, os.PathLike]] = None,
               audio_map: Optional[AudioMap] = None,
               sprite_dir: Optional[Union[str, os.PathLike]] = None) -> Clip:
    """One clip from our format's mapping (see the module docstring).

    ``base_dir`` resolves relative audio paths.  Raises :class:`ClipFormatError`.
    """
    ctx = _Where(source)
    base = Path(base_dir) if base_dir is not None else None
    _check_keys(data, ("name", "duration_ms", "description", "tracks"), ("name",), "clip", ctx)
    name = data["name"]
    if not isinstance(name, str) or not name:
        raise ctx.error("name", "must be a non-empty string")
    ctx = _Where(f"{source} [{name}]", name)
    duration_s = None
    if data.get("duration_ms") is not None:
        duration_s = _time(data["duration_ms"], "duration_ms", ctx) / 1000.0
    tracks_in = data.get("tracks") or {}
    if not isinstance(tracks_in, Mapping):
        raise ctx.error("tracks", "must be a mapping of track names to lists")
    unknown = sorted(str(k) for k in tracks_in if k not in TRACK_NAMES)
    if unknown:
        raise ctx.error("tracks", f"unknown track(s) {', '.join(unknown)}; known: {', '.join(TRACK_NAMES)}")
    tracks = Tracks()
    warnings: List[str] = []
    mended: List[str] = []
    lights_held: List[tuple] = []  # lights keyframes with no duration: (where, keyframe, what)

    def items(track: str) -> List[tuple]:
        value = tracks_in.get(track) or []
        if not isinstance(value, list):
            raise ctx.error(track, "must be a list of keyframes")
        return [(f"{track}[{i}]", item) for i, item in enumerate(value)]

    for where, it in items("head"):
        _check_keys(it, ("time_ms", "duration_ms", "angle_deg", "variability_deg"), ("time_ms", "angle_deg"),
                    where, ctx)
        tracks.head.append(HeadKeyframe(
            _time(it["time_ms"], where, ctx), _time(it.get("duration_ms", 0), where, ctx),
            _in_range(_number(it["angle_deg"], where, ctx), _HEAD_RANGE_DEG, "angle_deg/head/deg", where, ctx,
                      mended),
            abs(_number(it.get("variability_deg", 0), where, ctx))))
    for where, it in items("lift"):
        _check_keys(it, ("time_ms", "duration_ms", "height_mm", "variability_mm"), ("time_ms", "height_mm"), where, ctx)
        tracks.lift.append(LiftKeyframe(
            _time(it["time_ms"], where, ctx), _time(it.get("duration_ms", 0), where, ctx),
            _in_range(_number(it["height_mm"], where, ctx), _LIFT_RANGE_MM, "height_mm/lift/mm", where, ctx, mended),
            abs(_number(it.get("variability_mm", 0), where, ctx))))
    for where, it in items("body"):
        _check_keys(it, ("time_ms", "duration_ms", "speed_mmps", "speed_dps", "radius_mm"),
                    ("time_ms", "duration_ms"), where, ctx)
        t = _time(it["time_ms"], where, ctx)
        d = _time(it["duration_ms"], where, ctx)
        if "speed_dps" in it:
            if "speed_mmps" in it or "radius_mm" in it:
                raise ctx.error(where, "a turn in place takes speed_dps alone (no speed_mmps or radius_mm)")
            tracks.body.append(BodyKeyframe(t, d, BODY_TURN_IN_PLACE, _number(it["speed_dps"], where, ctx)))
        elif "speed_mmps" in it:
            speed = _number(it["speed_mmps"], where, ctx)
            if it.get("radius_mm") is None:
                tracks.body.append(BodyKeyframe(t, d, BODY_STRAIGHT, speed))
            else:
                r = _number(it["radius_mm"], where, ctx)
                if r == 0:
                    raise ctx.error(where, "radius_mm 0 is a turn in place: use speed_dps")
                tracks.body.append(BodyKeyframe(t, d, BODY_ARC, speed, r))
        else:
            raise ctx.error(where, "needs speed_mmps (straight or arc) or speed_dps (turn in place)")
    for where, it in items("lights"):
        _check_keys(it, ("time_ms", "duration_ms", "all") + LIGHT_NAMES, ("time_ms",), where, ctx)
        if "all" in it and any(n in it for n in LIGHT_NAMES):
            raise ctx.error(where, "give either all or individual lights")
        if "all" in it:
            colors = (_color(it["all"], where, ctx),) * 5
        else:
            colors = tuple(_color(it[n], where, ctx) if n in it else (0, 0, 0) for n in LIGHT_NAMES)
            _red_sides(colors, where, ctx, mended)
        tracks.lights.append(LightsKeyframe(_time(it["time_ms"], where, ctx),
                                            _time(it.get("duration_ms", 0), where, ctx), colors))
        if not tracks.lights[-1].duration_ms:
            lights_held.append((where, tracks.lights[-1], "duration_ms 0" if "duration_ms" in it else "no duration_ms"))
    for where, it in items("face"):
        _check_keys(it, ("time_ms", "expression", "params", "look_at", "array"), ("time_ms",), where, ctx)
        if "array" in it and "expression" in it:
            raise ctx.error(where, "give either expression or array")
        tracks.face.append(FaceKeyframe(_time(it["time_ms"], where, ctx), _face_from_item(it, where, ctx, mended)))
    for where, it in items("sprite"):
        _check_keys(it, ("time_ms", "name"), ("time_ms", "name"), where, ctx)
        t = _time(it["time_ms"], where, ctx)
        frames = _load_sprite_frames(str(it["name"]), sprite_dir, warnings, name, t)
        tracks.sprite.append(SpriteKeyframe(t, str(it["name"]), frames))
    for where, it in items("audio"):
        _check_keys(it, ("time_ms", "source", "volume", "wwise"), ("time_ms",), where, ctx)
        t = _time(it["time_ms"], where, ctx)
        volume = _number(it.get("volume", 1.0), where, ctx)
        if not 0.0 <= volume <= 1.0:
            raise ctx.error(where, f"volume must be 0..1, got {volume:g}")
        if ("source" in it) == ("wwise" in it):
            raise ctx.error(where, "needs exactly one of source (a WAV path or synth:...) and wwise (event ids)")
        if "source" in it:
            src = str(it["source"])
            pcm = _scaled(_load_audio_source(src, base, where, ctx), volume)
            tracks.audio.append(AudioKeyframe(t, pcm, src, volume))
        else:
            ids = it["wwise"] if isinstance(it["wwise"], list) else [it["wwise"]]
            event_ids = tuple(int(_number(i, where, ctx)) for i in ids)
            kf = AudioKeyframe(t, None, "wwise", volume, event_ids)
            _wwise_audio(kf, audio_map, base, warnings, name)
            tracks.audio.append(kf)
    for where, it in items("events"):
        _check_keys(it, ("time_ms", "id"), ("time_ms", "id"), where, ctx)
        tracks.events.append(EventKeyframe(_time(it["time_ms"], where, ctx), str(it["id"])))
    for where, it in items("record_heading"):
        _check_keys(it, ("time_ms",), ("time_ms",), where, ctx)
        tracks.record_heading.append(RecordHeadingKeyframe(_time(it["time_ms"], where, ctx)))
    names = ("time_ms", "duration_ms", "offset_deg", "speed_dps", "accel_dps2", "decel_dps2",
             "tolerance_deg", "num_half_revs", "use_shortest_dir")
    for where, it in items("turn_to_recorded_heading"):
        _check_keys(it, names, ("time_ms",), where, ctx)
        defaults = TurnToRecordedHeadingKeyframe(0.0, 0.0)
        tracks.turn_to_recorded_heading.append(TurnToRecordedHeadingKeyframe(
            _time(it["time_ms"], where, ctx), _time(it.get("duration_ms", 0), where, ctx),
            _number(it.get("offset_deg", defaults.offset_deg), where, ctx),
            _number(it.get("speed_dps", defaults.speed_dps), where, ctx),
            _number(it.get("accel_dps2", defaults.accel_dps2), where, ctx),
            _number(it.get("decel_dps2", defaults.decel_dps2), where, ctx),
            _number(it.get("tolerance_deg", defaults.tolerance_deg), where, ctx),
            int(_number(it.get("num_half_revs", 0), where, ctx)),
            bool(it.get("use_shortest_dir", False))))
    tracks.sort()
    if duration_s is not None:
        end_ms = round(Clip(name, None, tracks).end_s * 1000.0, 6)
        if end_ms > duration_s * 1000.0 + 1e-6:
            mended.append(f"{ctx.source}: duration_ms {duration_s * 1000.0:g} is shorter than the clip's keyframes and "
                          f"sounds, which end at {end_ms:g} ms: the clip lasts {end_ms:g} ms")
            duration_s = end_ms / 1000.0
    _hold_lights(tracks, lights_held, round(Clip(name, duration_s, tracks).end_s * 1000.0, 6), ctx, mended)
    return Clip(name, duration_s, tracks, warnings, source, mended)


def _parse_document(doc: Any, source: str, base_dir: Optional[Path], audio_map: Optional[AudioMap],
                    sprite_dir) -> List[Clip]:
    if isinstance(doc, Mapping) and "clips" in doc and isinstance(doc["clips"], list) and doc["clips"] \
            and isinstance(doc["clips"][0], Mapping) and "Name" in doc["clips"][0]:
        return clips_from_anki_json(doc, source, audio_map=audio_map, sprite_dir=sprite_dir, base_dir=base_dir)
    if isinstance(doc, Mapping) and "clips" in doc:
        if set(doc) - {"clips"}:
            raise ClipFormatError(f"{source}: a file with clips: holds nothing else")
        if not isinstance(doc["clips"], list):
            raise ClipFormatError(f"{source}: clips must be a list")
        return [parse_clip(c, source, base_dir, audio_map, sprite_dir) for c in doc["clips"]]
    if isinstance(doc, Mapping):
        return [parse_clip(doc, source, base_dir, audio_map, sprite_dir)]
    raise ClipFormatError(f"{source}: expected a clip mapping or clips: [...]")


def load_clip_file(path: Union[str, os.PathLike], audio_map: Optional[AudioMap] = None,
                   sprite_dir: Optional[Union[str, os.PathLike]] = None) -> List[Clip]:
    """The clips in a file: our YAML (``.yaml``/``.yml``), JSON (ours or the app's), or ``.bin``.

    Raises :class:`ClipFormatError` for anything unreadable.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ClipFormatError(f"{p}: cannot read ({exc})") from None
    if suffix == ".bin":
        return read_anim_bin(raw, str(p), audio_map=audio_map, sprite_dir=sprite_dir, base_dir=p.parent)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClipFormatError(f"{p}: not UTF-8 text ({exc})") from None
    if suffix in (".yaml", ".yml"):
        import yaml

        try:
            doc = safe_load(text, unique_keys=True)
        except yaml.YAMLError as exc:
            raise ClipFormatError(f"{p}: invalid YAML: {exc}") from None
    elif suffix == ".json":
        try:
            doc, twice = json_loads(text, comments=False)
        except ValueError as exc:
            raise ClipFormatError(f"{p}: invalid JSON: {exc}") from None
        if twice:  # (its first copy would be lost: a track, a keyframe's field)
            raise ClipFormatError(f"{p}: invalid JSON: found duplicate key {', '.join(map(repr, twice))} "
                                  "in an object: JSON would keep only the last")
    else:
        raise ClipFormatError(f"{p}: unknown clip file type {suffix!r} (.yaml, .yml, .json or .bin)")
    return _parse_document(doc, str(p), p.parent, audio_map, sprite_dir)


def load_clips_dir(directory: Union[str, os.PathLike], audio_map: Optional[AudioMap] = None,
                   sprite_dir: Optional[Union[str, os.PathLike]] = None,
                   recursive: bool = True) -> Dict[str, Clip]:
    """Every clip in the directory's clip files, by name (sorted file order).

    A name defined twice raises :class:`ClipFormatError` naming both files.
    """
    root = Path(directory)
    if not root.is_dir():
        raise ClipFormatError(f"{root}: not a directory")
    pattern = "**/*" if recursive else "*"
    files = sorted(f for f in root.glob(pattern)
                   if f.is_file() and f.suffix.lower() in (".yaml", ".yml", ".json", ".bin"))
    out: Dict[str, Clip] = {}
    for f in files:
        for clip in load_clip_file(f, audio_map, sprite_dir):
            if clip.name in out:
                raise ClipFormatError(f"clip {clip.name!r} is defined in {out[clip.name].source} and in {f}")
            out[clip.name] = clip
    return out


_BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


def list_builtin() -> List[str]:
    """Names of the built-in animations (``cozmo_driver/anim/builtin/*.yaml``), sorted."""
    return sorted(load_clips_dir(_BUILTIN_DIR, recursive=False))


def load_builtin(name: Optional[str] = None) -> Union[Clip, Dict[str, Clip]]:
    """One built-in clip by name, or all of them (``name=None``) as a dict."""
    clips = load_clips_dir(_BUILTIN_DIR, recursive=False)
    if name is None:
        return clips
    try:
        return clips[name]
    except KeyError:
        raise KeyError(f"no built-in animation {name!r}; known: {', '.join(sorted(clips))}") from None


# --------------------------------------------------------------------------------------------
# Cozmo's clips: conversion from the app's keyframe dictionaries
# --------------------------------------------------------------------------------------------

_ANKI_TRACKS = (
    "LiftHeightKeyFrame", "ProceduralFaceKeyFrame", "HeadAngleKeyFrame", "RobotAudioKeyFrame",
    "BackpackLightsKeyFrame", "FaceAnimationKeyFrame", "EventKeyFrame", "BodyMotionKeyFrame",
    "RecordHeadingKeyFrame", "TurnToRecordedHeadingKeyFrame",
)
_ANKI_LIGHTS = ("Left", "Front", "Middle", "Back", "Right")  # our LIGHT_NAMES order


def _anki_number(kf: Mapping, key: str, default: float, ctx: _Where, where: str,
                 finite: bool = True) -> float:
    """A keyframe's number: finite, or a :class:`ClipFormatError` naming the file, the clip,
    the keyframe and the field (a NaN angle or speed could not be compiled or sent); a face's
    (``finite=False``) may be NaN or infinite, which :meth:`FaceParams.validated` mends."""
    value = kf.get(key, default)
    if value is None:
        return default
    return _number(value, f"{where}.{key}", ctx, finite=finite)


def _clip_from_anki(name: str, keyframes: Mapping, source: str, audio_map: Optional[AudioMap],
                    sprite_dir, base_dir: Optional[Path]) -> Clip:
    ctx = _Where(f"{source} [{name}]", name)
    tracks = Tracks()
    warnings: List[str] = []
    unknown = sorted(str(k) for k in keyframes if k not in _ANKI_TRACKS)
    if unknown:
        warnings.append(f"{name}: unknown keyframe tracks ignored: {', '.join(unknown)}")

    def track(key: str) -> List[tuple]:
        value = keyframes.get(key) or []
        if not isinstance(value, list):
            raise ctx.error(key, "must be a list")
        out = []
        for i, kf in enumerate(value):
            if not isinstance(kf, Mapping):
                raise ctx.error(f"{key}[{i}]", "must be a mapping")
            out.append((f"{key}[{i}]", kf))
        return out

    def trig(kf: Mapping, where: str) -> float:
        return _time(kf.get("triggerTime_ms", 0), f"{where}.triggerTime_ms", ctx)

    def dur(kf: Mapping, where: str) -> float:
        return _time(kf.get("durationTime_ms", 0), f"{where}.durationTime_ms", ctx)

    for where, kf in track("HeadAngleKeyFrame"):
        tracks.head.append(HeadKeyframe(trig(kf, where), dur(kf, where),
                                        _anki_number(kf, "angle_deg", 0, ctx, where),
                                        _anki_number(kf, "angleVariability_deg", 0, ctx, where)))
    for where, kf in track("LiftHeightKeyFrame"):
        tracks.lift.append(LiftKeyframe(trig(kf, where), dur(kf, where),
                                        _anki_number(kf, "height_mm", 0, ctx, where),
                                        _anki_number(kf, "heightVariability_mm", 0, ctx, where)))
    for where, kf in track("BodyMotionKeyFrame"):
        radius = kf.get("radius_mm", "STRAIGHT")
        speed = _anki_number(kf, "speed", 0, ctx, where)
        t, d = trig(kf, where), dur(kf, where)
        if isinstance(radius, str) and radius.upper() == "STRAIGHT":
            tracks.body.append(BodyKeyframe(t, d, BODY_STRAIGHT, speed))
        elif isinstance(radius, str) and radius.upper() in ("TURN_IN_PLACE", "POINT_TURN"):
            tracks.body.append(BodyKeyframe(t, d, BODY_TURN_IN_PLACE, speed))
        else:
            try:
                r = float(radius)
            except (TypeError, ValueError):
                raise ctx.error(
                    where, f"radius_mm must be STRAIGHT, TURN_IN_PLACE or a number, got {radius!r}") from None
            if not math.isfinite(r):
                raise ctx.error(where, f"radius_mm must be finite, got {radius!r}")
            if r == 0:
                tracks.body.append(BodyKeyframe(t, d, BODY_TURN_IN_PLACE, speed))
            else:
                tracks.body.append(BodyKeyframe(t, d, BODY_ARC, speed, r))
    for where, kf in track("BackpackLightsKeyFrame"):
        colors, irs = [], []
        for key in _ANKI_LIGHTS:
            rgba = kf.get(key) or [0.0, 0.0, 0.0, 0.0]
            if not isinstance(rgba, Sequence) or not 3 <= len(rgba) <= 4:
                raise ctx.error(f"{where}.{key}", "must hold 4 floats (r, g, b, ir)")
            vals = [_number(c, f"{where}.{key}", ctx) for c in rgba]
            colors.append(tuple(int(round(min(max(c, 0.0), 1.0) * 255.0)) for c in vals[:3]))
            irs.append(len(vals) > 3 and vals[3] >= 0.5)
        tracks.lights.append(LightsKeyframe(trig(kf, where), dur(kf, where), tuple(colors), tuple(irs)))
    for where, kf in track("ProceduralFaceKeyFrame"):
        left = kf.get("leftEye") or []
        right = kf.get("rightEye") or []
        face = FaceParams(
            _anki_number(kf, "faceCenterX", 0.0, ctx, where, finite=False),
            _anki_number(kf, "faceCenterY", 0.0, ctx, where, finite=False),
            _anki_number(kf, "faceScaleX", 1.0, ctx, where, finite=False),
            _anki_number(kf, "faceScaleY", 1.0, ctx, where, finite=False),
            _anki_number(kf, "faceAngle", 0.0, ctx, where, finite=False),
        )
        for eye_name, values in (("left", left), ("right", right)):
            if not isinstance(values, Sequence):
                raise ctx.error(where, f"{eye_name}Eye must be a list of numbers")
            if len(values) not in (0, 19):
                warnings.append(f"{name}: {where}.{eye_name}Eye has {len(values)} values, expected 19: "
                                "the missing ones keep their defaults, extra ones are ignored")
            eye = getattr(face, eye_name)
            for i, v in enumerate(values[:19]):
                setattr(eye, EYE_PARAM_NAMES[i], _number(v, f"{where}.{eye_name}Eye", ctx, finite=False))
        fixed, problems = face.validated()
        warnings.extend(f"{name}: {where}: {p}" for p in problems)
        tracks.face.append(FaceKeyframe(trig(kf, where), fixed))
    for where, kf in track("FaceAnimationKeyFrame"):
        anim = str(kf.get("animName", ""))
        t = trig(kf, where)
        tracks.sprite.append(SpriteKeyframe(t, anim, _load_sprite_frames(anim, sprite_dir, warnings, name, t)))
    for where, kf in track("RobotAudioKeyFrame"):
        ids = kf.get("audioEventId") or []
        probs = kf.get("probability") or []
        if not isinstance(ids, Sequence) or not isinstance(probs, Sequence):
            raise ctx.error(where, "audioEventId and probability must be lists")
        event_ids = tuple(int(_number(i, where, ctx)) for i in ids)
        a = AudioKeyframe(trig(kf, where), None, "wwise", _anki_number(kf, "volume", 1.0, ctx, where),
                          event_ids, tuple(_number(p, where, ctx) for p in probs), bool(kf.get("hasAlts", True)))
        a.volume = min(max(a.volume, 0.0), 1.0)
        _wwise_audio(a, audio_map, base_dir, warnings, name)
        tracks.audio.append(a)
    for where, kf in track("EventKeyFrame"):
        tracks.events.append(EventKeyframe(trig(kf, where), str(kf.get("event_id", ""))))
    for where, kf in track("RecordHeadingKeyFrame"):
        tracks.record_heading.append(RecordHeadingKeyframe(trig(kf, where)))
    for where, kf in track("TurnToRecordedHeadingKeyFrame"):
        tracks.turn_to_recorded_heading.append(TurnToRecordedHeadingKeyframe(
            trig(kf, where), dur(kf, where),
            _anki_number(kf, "offset_deg", 0, ctx, where),
            _anki_number(kf, "speed_degPerSec", 0, ctx, where),
            _anki_number(kf, "accel_degPerSec2", 1000, ctx, where),
            _anki_number(kf, "decel_degPerSec2", 1000, ctx, where),
            _anki_number(kf, "tolerance_deg", 2, ctx, where),
            int(_anki_number(kf, "numHalfRevs", 0, ctx, where)),
            bool(kf.get("useShortestDir", False))))
    tracks.sort()
    return Clip(name, None, tracks, warnings, source)


def clips_from_anki_json(doc: Mapping, source: str = "<json>", audio_map: Optional[AudioMap] = None,
                         sprite_dir=None, base_dir: Optional[Path] = None) -> List[Clip]:
    """Clips from the app's JSON form: ``{"clips": [{"Name": ..., "keyframes": {...}}]}``."""
    clips = doc.get("clips") if isinstance(doc, Mapping) else None
    if not isinstance(clips, list):
        raise ClipFormatError(f"{source}: expected {{'clips': [...]}}")
    out = []
    for i, c in enumerate(clips):
        if not isinstance(c, Mapping):
            raise ClipFormatError(f"{source}: clips[{i}] must be a mapping")
        name = c.get("Name")
        if not isinstance(name, str) or not name:
            raise ClipFormatError(f"{source}: clips[{i}] has no Name")
        keyframes = c.get("keyframes") or {}
        if not isinstance(keyframes, Mapping):
            raise ClipFormatError(f"{source}: clips[{i}].keyframes must be a mapping")
        out.append(_clip_from_anki(name, keyframes, source, audio_map, sprite_dir, base_dir))
    return out


# --------------------------------------------------------------------------------------------
# FlatBuffers: a bounds-checked reader over the raw bytes
# --------------------------------------------------------------------------------------------

# Table layouts of cozmo_anim.fbs: field name, kind, in field (= vtable slot) order.
# Kinds: scalar struct codes, "str", "[f]" (floats), "[q]" (longs), or a table name in [].
_FB_TABLES: Dict[str, tuple] = {
    "LiftHeight": (("triggerTime_ms", "I"), ("durationTime_ms", "I"), ("height_mm", "B"),
                   ("heightVariability_mm", "B")),
    "ProceduralFace": (("triggerTime_ms", "I"), ("faceAngle", "f"), ("faceCenterX", "f"), ("faceCenterY", "f"),
                       ("faceScaleX", "f"), ("faceScaleY", "f"), ("leftEye", "[f]"), ("rightEye", "[f]")),
    "HeadAngle": (("triggerTime_ms", "I"), ("durationTime_ms", "I"), ("angle_deg", "b"),
                  ("angleVariability_deg", "B")),
    "RobotAudio": (("triggerTime_ms", "I"), ("audioEventId", "[q]"), ("volume", "f"), ("probability", "[f]"),
                   ("hasAlts", "?")),
    "BackpackLights": (("triggerTime_ms", "I"), ("durationTime_ms", "I"), ("Left", "[f]"), ("Right", "[f]"),
                       ("Front", "[f]"), ("Middle", "[f]"), ("Back", "[f]")),
    "FaceAnimation": (("triggerTime_ms", "I"), ("animName", "str")),
    "Event": (("triggerTime_ms", "I"), ("event_id", "str")),
    "BodyMotion": (("triggerTime_ms", "I"), ("durationTime_ms", "I"), ("radius_mm", "str"), ("speed", "h")),
    "RecordHeading": (("triggerTime_ms", "I"),),
    "TurnToRecordedHeading": (("triggerTime_ms", "I"), ("durationTime_ms", "I"), ("offset_deg", "h"),
                              ("speed_degPerSec", "h"), ("accel_degPerSec2", "h"), ("decel_degPerSec2", "h"),
                              ("tolerance_deg", "H"), ("numHalfRevs", "H"), ("useShortestDir", "?")),
}
_FB_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "ProceduralFace": {"faceScaleX": 1.0, "faceScaleY": 1.0},
    "RobotAudio": {"volume": 1.0, "hasAlts": True},
    "TurnToRecordedHeading": {"accel_degPerSec2": 1000, "decel_degPerSec2": 1000, "tolerance_deg": 2},
}
# Keyframes table: vector of tables per slot, in this order.
_FB_KEYFRAME_TABLES = ("LiftHeight", "ProceduralFace", "HeadAngle", "RobotAudio", "BackpackLights",
                       "FaceAnimation", "Event", "BodyMotion", "RecordHeading", "TurnToRecordedHeading")
_MAX_FB_ITEMS = 1 << 20


class _FlatReader:
    """Reads FlatBuffers tables from bytes; every offset is checked against the buffer."""

    def __init__(self, data: bytes, source: str) -> None:
        self.buf = bytes(data)
        self.n = len(self.buf)
        self.source = source

    def fail(self, what: str) -> ClipFormatError:
        return ClipFormatError(f"{self.source}: malformed FlatBuffers data: {what}")

    def unpack(self, fmt: str, pos: int) -> Any:
        size = struct.calcsize("<" + fmt)
        if pos < 0 or pos + size > self.n:
            raise self.fail(f"read of {size} bytes at {pos} beyond the {self.n}-byte buffer")
        return struct.unpack_from("<" + fmt, self.buf, pos)[0]

    def root(self) -> int:
        return self.unpack("I", 0)

    def field_pos(self, table: int, slot: int) -> int:
        vtable = table - self.unpack("i", table)
        vt_size = self.unpack("H", vtable)
        if vt_size < 4 or vt_size % 2:
            raise self.fail(f"vtable of {vt_size} bytes at {vtable}")
        entry = 4 + 2 * slot
        if entry + 2 > vt_size:
            return 0
        off = self.unpack("H", vtable + entry)
        return table + off if off else 0

    def deref(self, pos: int) -> int:
        return pos + self.unpack("I", pos)

    def vector(self, table: int, slot: int) -> tuple[int, int]:
        pos = self.field_pos(table, slot)
        if not pos:
            return 0, 0
        vec = self.deref(pos)
        length = self.unpack("I", vec)
        if length > _MAX_FB_ITEMS:
            raise self.fail(f"vector of {length} items")
        return vec + 4, length

    def scalars(self, table: int, slot: int, code: str) -> list:
        start, length = self.vector(table, slot)
        if not length:
            return []
        size = struct.calcsize("<" + code)
        if start + size * length > self.n:
            raise self.fail(f"vector of {length} x {size} bytes at {start} beyond the buffer")
        return list(struct.unpack_from(f"<{length}{code}", self.buf, start))

    def string(self, table: int, slot: int) -> Optional[str]:
        pos = self.field_pos(table, slot)
        if not pos:
            return None
        s = self.deref(pos)
        length = self.unpack("I", s)
        if s + 4 + length > self.n:
            raise self.fail(f"string of {length} bytes at {s} beyond the buffer")
        try:
            return self.buf[s + 4:s + 4 + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"string at {s} is not UTF-8 ({exc})") from None

    def tables(self, table: int, slot: int) -> List[int]:
        start, length = self.vector(table, slot)
        return [self.deref(start + 4 * i) for i in range(length)]

    def read_table(self, table: int, layout: tuple, defaults: Mapping[str, Any]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for slot, (name, kind) in enumerate(layout):
            if kind == "str":
                value = self.string(table, slot)
                if value is not None:
                    out[name] = value
            elif kind.startswith("["):
                out[name] = self.scalars(table, slot, kind[1:-1])
            else:
                pos = self.field_pos(table, slot)
                if pos:
                    out[name] = self.unpack(kind, pos)
                elif name in defaults:
                    out[name] = defaults[name]
        return out


def read_anim_bin(data: bytes, source: str = "<bin>", audio_map: Optional[AudioMap] = None,
                  sprite_dir=None, base_dir: Optional[Path] = None) -> List[Clip]:
    """Clips from an ``AnimClips`` FlatBuffers file (the app's ``.bin`` animations).

    Raises :class:`ClipFormatError` on malformed data, never anything else.
    """
    r = _FlatReader(data, source)
    if r.n < 8:
        raise r.fail("shorter than a root table")
    try:
        root = r.root()
        doc = {"clips": []}
        for clip_pos in r.tables(root, 0):
            name = r.string(clip_pos, 0) or ""
            kf_pos = r.field_pos(clip_pos, 1)
            keyframes: Dict[str, list] = {}
            if kf_pos:
                kf_table = r.deref(kf_pos)
                for slot, tname in enumerate(_FB_KEYFRAME_TABLES):
                    items = [r.read_table(t, _FB_TABLES[tname], _FB_DEFAULTS.get(tname, {}))
                             for t in r.tables(kf_table, slot)]
                    if items:
                        keyframes[_ANKI_TRACKS[slot]] = items
            doc["clips"].append({"Name": name, "keyframes": keyframes})
    except RecursionError:  # pragma: no cover - the reader does not recurse
        raise r.fail("nesting too deep") from None
    return clips_from_anki_json(doc, source, audio_map=audio_map, sprite_dir=sprite_dir, base_dir=base_dir)


# --------------------------------------------------------------------------------------------
# FlatBuffers: the writer (tests make .bin clips with it)
# --------------------------------------------------------------------------------------------


def _clip_to_anki_keyframes(clip: Clip) -> Dict[str, List[Dict[str, Any]]]:
    t = clip.tracks
    kfs: Dict[str, List[Dict[str, Any]]] = {k: [] for k in _ANKI_TRACKS}
    for k in t.lift:
        kfs["LiftHeightKeyFrame"].append({"triggerTime_ms": k.time_ms, "durationTime_ms": k.duration_ms,
                                          "height_mm": k.height_mm, "heightVariability_mm": k.variability_mm})
    for k in t.face:
        p = k.params
        kfs["ProceduralFaceKeyFrame"].append({
            "triggerTime_ms": k.time_ms, "faceAngle": p.angle_deg, "faceCenterX": p.center_x_px,
            "faceCenterY": p.center_y_px, "faceScaleX": p.scale_x, "faceScaleY": p.scale_y,
            "leftEye": p.left.to_list(), "rightEye": p.right.to_list()})
    for k in t.head:
        kfs["HeadAngleKeyFrame"].append({"triggerTime_ms": k.time_ms, "durationTime_ms": k.duration_ms,
                                         "angle_deg": k.angle_deg, "angleVariability_deg": k.variability_deg})
    for k in t.audio:
        if k.event_ids:
            kfs["RobotAudioKeyFrame"].append({"triggerTime_ms": k.time_ms, "audioEventId": list(k.event_ids),
                                              "volume": k.volume, "probability": list(k.probabilities),
                                              "hasAlts": k.has_alts})
    for k in t.lights:
        entry: Dict[str, Any] = {"triggerTime_ms": k.time_ms, "durationTime_ms": k.duration_ms}
        for key, rgb, ir in zip(_ANKI_LIGHTS, k.colors, k.ir):
            entry[key] = [c / 255.0 for c in rgb] + [1.0 if ir else 0.0]
        kfs["BackpackLightsKeyFrame"].append(entry)
    for k in t.sprite:
        kfs["FaceAnimationKeyFrame"].append({"triggerTime_ms": k.time_ms, "animName": k.name})
    for k in t.events:
        kfs["EventKeyFrame"].append({"triggerTime_ms": k.time_ms, "event_id": k.event_id})
    for k in t.body:
        radius = {BODY_STRAIGHT: "STRAIGHT", BODY_TURN_IN_PLACE: "TURN_IN_PLACE"}.get(k.mode)
        if radius is None:
            radius = str(int(round(k.radius_mm or 0)))
        kfs["BodyMotionKeyFrame"].append({"triggerTime_ms": k.time_ms, "durationTime_ms": k.duration_ms,
                                          "radius_mm": radius, "speed": k.speed})
    for k in t.record_heading:
        kfs["RecordHeadingKeyFrame"].append({"triggerTime_ms": k.time_ms})
    for k in t.turn_to_recorded_heading:
        kfs["TurnToRecordedHeadingKeyFrame"].append({
            "triggerTime_ms": k.time_ms, "durationTime_ms": k.duration_ms, "offset_deg": k.offset_deg,
            "speed_degPerSec": k.speed_dps, "accel_degPerSec2": k.accel_dps2, "decel_degPerSec2": k.decel_dps2,
            "tolerance_deg": k.tolerance_deg, "numHalfRevs": k.num_half_revs, "useShortestDir": k.use_shortest_dir})
    return kfs


_FB_INT_RANGES = {"I": (0, 0xFFFFFFFF), "B": (0, 0xFF), "b": (-0x80, 0x7F), "h": (-0x8000, 0x7FFF),
                  "H": (0, 0xFFFF)}


def write_anim_bin(clips: Sequence[Clip]) -> bytes:
    """An ``AnimClips`` FlatBuffers file holding ``clips`` (needs the ``flatbuffers`` package).

    Integer fields are rounded and clamped to their types; PCM audio (which the
    format cannot hold) is left out, Wwise audio keyframes are kept.
    """
    try:
        import flatbuffers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise AnimationError("writing .bin clips needs the flatbuffers package") from exc

    b = flatbuffers.Builder(1024)
    if hasattr(b, "ForceDefaults"):
        b.ForceDefaults(True)  # write every given value, even one equal to the schema default

    def end_vector(n: int) -> int:
        try:
            return b.EndVector()
        except TypeError:  # flatbuffers < 2.0 wants the length
            return b.EndVector(n)

    def scalar_vector(code: str, values: Sequence) -> int:
        size = struct.calcsize("<" + code)
        b.StartVector(size, len(values), size)
        prepend = {"f": b.PrependFloat32, "q": b.PrependInt64}[code]
        for v in reversed(values):
            prepend(float(v) if code == "f" else int(v))
        return end_vector(len(values))

    def offset_vector(offsets: Sequence[int]) -> int:
        b.StartVector(4, len(offsets), 4)
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return end_vector(len(offsets))

    def table(tname: str, values: Mapping[str, Any]) -> int:
        layout = _FB_TABLES[tname]
        refs: Dict[int, int] = {}
        for slot, (name, kind) in enumerate(layout):  # children first
            if name not in values:
                continue
            if kind == "str":
                refs[slot] = b.CreateString(str(values[name]))
            elif kind.startswith("["):
                refs[slot] = scalar_vector(kind[1:-1], values[name])
        b.StartObject(len(layout))
        for slot, (name, kind) in enumerate(layout):
            if slot in refs:
                b.PrependUOffsetTRelativeSlot(slot, refs[slot], 0)
            elif name in values and not (kind == "str" or kind.startswith("[")):
                v = values[name]
                # The "default" passed differs from the value, so it is written on any version.
                if kind == "f":
                    b.PrependFloat32Slot(slot, float(v), math.nan)
                elif kind == "?":
                    b.PrependBoolSlot(slot, bool(v), not bool(v))
                else:
                    lo, hi = _FB_INT_RANGES[kind]
                    iv = int(min(max(round(float(v)), lo), hi))
                    prepend = {"I": b.PrependUint32Slot, "B": b.PrependUint8Slot, "b": b.PrependInt8Slot,
                               "h": b.PrependInt16Slot, "H": b.PrependUint16Slot}[kind]
                    prepend(slot, iv, iv + 1 if iv < hi else iv - 1)
        return b.EndObject()

    clip_offsets = []
    for clip in clips:
        kfs = _clip_to_anki_keyframes(clip)
        vectors: Dict[int, int] = {}
        for slot, (track, tname) in enumerate(zip(_ANKI_TRACKS, _FB_KEYFRAME_TABLES)):
            if kfs[track]:
                vectors[slot] = offset_vector([table(tname, kf) for kf in kfs[track]])
        b.StartObject(len(_FB_KEYFRAME_TABLES))
        for slot, off in vectors.items():
            b.PrependUOffsetTRelativeSlot(slot, off, 0)
        keyframes = b.EndObject()
        name = b.CreateString(clip.name)
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependUOffsetTRelativeSlot(1, keyframes, 0)
        clip_offsets.append(b.EndObject())
    clips_vec = offset_vector(clip_offsets)
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, clips_vec, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


# --------------------------------------------------------------------------------------------
# Animation groups
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class GroupMember:
    """One entry of an animation group (the app's field names in brackets)."""

    name: str  # [Name] the clip
    weight: float = 1.0  # [Weight]
    cooldown_s: float = 0.0  # [CooldownTime_Sec]
    mood: str = "Default"  # [Mood]
    use_head_angle: bool = False  # [UseHeadAngle]
    head_angle_min_deg: float = 0.0  # [HeadAngleMin_Deg]
    head_angle_max_deg: float = 0.0  # [HeadAngleMax_Deg]


@dataclass
class AnimationGroup:
    name: str
    members: List[GroupMember] = field(default_factory=list)

    @classmethod
    def from_json(cls, name: str, doc: Mapping, source: str = "<group>") -> "AnimationGroup":
        """From the app's ``{"Animations": [{"Name", "Weight", "CooldownTime_Sec", ...}]}``."""
        ctx = _Where(f"{source} [{name}]")
        if not isinstance(doc, Mapping) or not isinstance(doc.get("Animations"), list):
            raise ctx.error("group", "expected {'Animations': [...]}")
        members = []
        for i, a in enumerate(doc["Animations"]):
            where = f"Animations[{i}]"
            if not isinstance(a, Mapping) or not isinstance(a.get("Name"), str):
                raise ctx.error(where, "needs a Name")
            weight = _number(a.get("Weight", 1.0), where, ctx)
            cooldown = _number(a.get("CooldownTime_Sec", 0.0), where, ctx)
            members.append(GroupMember(
                a["Name"], max(weight, 0.0), max(cooldown, 0.0), str(a.get("Mood", "Default")),
                bool(a.get("UseHeadAngle", False)),
                _number(a.get("HeadAngleMin_Deg", 0.0), where, ctx),
                _number(a.get("HeadAngleMax_Deg", 0.0), where, ctx)))
        return cls(name, members)


def read_group_file(path: Union[str, os.PathLike], warn: Optional[Callable[[str], None]] = None) -> Any:
    """The JSON document of an animation group file; ``//`` and ``/* */`` comments (as the
    app's files have) are ignored. Raises :class:`ClipFormatError` naming the file. A key
    given twice in one object (the app's files are its format: JSON readers keep the last)
    is said to ``warn`` (default: the ``cozmo.anim`` logger)."""
    f = Path(path)
    try:
        doc, twice = json_loads(read_regular_text(f, "animation_groups_file"))
    except NotAFileError as exc:
        raise ClipFormatError(str(exc)) from None
    except (OSError, ValueError) as exc:      # ValueError: UnicodeDecodeError, JSONDecodeError
        raise ClipFormatError(f"{f}: cannot read animation group ({exc})") from None
    if twice:
        report = warn if warn is not None else logger.warning
        report(f"{f}: key {', '.join(map(repr, twice))} given twice in one object: only the last is read")
    return doc


def load_animation_groups(directory: Union[str, os.PathLike],
                          warn: Optional[Callable[[str], None]] = None) -> Dict[str, AnimationGroup]:
    """Every ``*.json`` group under ``directory`` (recursively), by file stem.

    Each file is read on its own: one that cannot be read or is not a group is
    skipped, ``warn`` (default: the ``cozmo.anim`` logger) told why, naming the
    file, and the others load. Raises :class:`ClipFormatError` only when
    ``directory`` is not a directory.
    """
    root = Path(directory)
    if not root.is_dir():
        raise ClipFormatError(f"{root}: not a directory")
    report = warn if warn is not None else logger.warning
    out: Dict[str, AnimationGroup] = {}
    for f in sorted(root.rglob("*.json")):
        try:
            out[f.stem] = AnimationGroup.from_json(f.stem, read_group_file(f, report), str(f))
        except ClipFormatError as exc:
            report(f"{exc}: skipped")
    return out


class GroupChooser:
    """Chooses group members by weight with a seeded generator, honouring cool-downs.

    A member played at ``t`` is not chosen again before ``t + cooldown_s`` while
    another eligible member is available; if every member is cooling down, the
    one whose cool-down ends first is chosen.  With ``mood``, members of that
    mood are preferred, then ``"Default"`` ones; with ``head_angle_deg``, members
    that use the head angle must have it within their range (when none does and
    every member uses it, no member is playable: :meth:`unplayable` says why).
    Members of weight 0 are chosen only when nothing else is eligible.
    """

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._last_played: Dict[tuple, float] = {}

    def choose(self, group: AnimationGroup, now: float, mood: Optional[str] = None,
               head_angle_deg: Optional[float] = None, record: bool = True) -> Optional[str]:
        """The clip name to play now (recorded as played unless ``record`` is false: then
        :meth:`played` records it once it plays), or None when no member is playable now
        (an empty group, or none fits ``head_angle_deg``: see :meth:`unplayable`)."""
        members = list(group.members)
        if head_angle_deg is not None:
            members = [m for m in members if _fits_head_angle(m, head_angle_deg)]
        if not members:
            return None
        if mood is not None:
            same = [m for m in members if m.mood == mood] or [m for m in members if m.mood == "Default"]
            members = same or members

        def ready_at(m: GroupMember) -> float:
            last = self._last_played.get((group.name, m.name))
            return -math.inf if last is None else last + m.cooldown_s

        ready = [m for m in members if ready_at(m) <= now]
        if not ready:
            pick = min(members, key=ready_at)
        else:
            weighted = [m for m in ready if m.weight > 0] or ready
            total = sum(m.weight for m in weighted)
            if total <= 0:
                pick = weighted[self._rng.randrange(len(weighted))]
            else:
                x = self._rng.uniform(0.0, total)
                acc = 0.0
                pick = weighted[-1]
                for m in weighted:
                    acc += m.weight
                    if x < acc:
                        pick = m
                        break
        if record:
            self.played(group.name, pick.name, now)
        return pick.name

    def played(self, group_name: str, member: str, now: float) -> None:
        """``member`` of group ``group_name`` played at ``now``: its cool-down starts."""
        self._last_played[(group_name, member)] = now

    @staticmethod
    def unplayable(group: AnimationGroup, head_angle_deg: Optional[float] = None) -> str:
        """Why :meth:`choose` finds no member of ``group`` playable at ``head_angle_deg``
        (what to do included), e.g. ``the head is at -20.0 deg, outside the head-angle range
        of every member (hello: 30..44 deg); move the head into one (head/angle) and try again``."""
        if not group.members or head_angle_deg is None:
            return "it has no members (those naming unknown clips are left out: see the log)"
        ranges = [f"{m.name}: {m.head_angle_min_deg:g}..{m.head_angle_max_deg:g} deg" for m in group.members]
        more = f", and {len(ranges) - 6} more" if len(ranges) > 6 else ""
        return (f"the head is at {head_angle_deg:.1f} deg, outside the head-angle range of every member "
                f"({', '.join(ranges[:6])}{more}); move the head into one (head/angle) and try again")


def _fits_head_angle(member: GroupMember, head_angle_deg: float) -> bool:
    """Whether ``member`` may play with the head at ``head_angle_deg``."""
    return not member.use_head_angle or member.head_angle_min_deg <= head_angle_deg <= member.head_angle_max_deg

