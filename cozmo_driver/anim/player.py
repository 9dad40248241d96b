"""Clips -> protocol messages on the robot's 30 fps tick grid, and a player that paces them.

Pure: no clock, no I/O; time is always an argument.

The tick grid
-------------
The robot plays its animation stream at 30 frames a second, one audio message
(``OutputAudio`` or ``OutputSilence``) per frame; the audio is its clock (notes
e, f).  A clip is compiled (:func:`compile_clip`) into ``num_ticks`` ticks of
exactly 1/30 s (not 33 ms): tick ``k`` covers ``[k/30, (k+1)/30)`` s of the clip,
and a keyframe at ``t`` ms lands on tick ``round(t * 30 / 1000)``.  Every tick
carries, in this order:

1. exactly one audio message: ``OutputAudio`` (744 samples of the clip's mixed
   sound) or ``OutputSilence``, so a clip of ``T`` s sends ``ceil(T * 30)``
   audio messages, 30 per second;
2. ``StartAnimation(anim_id)`` on tick 0;
3. the keyframes' messages (head, lift, body, lights, headings);
4. at most one ``DisplayImage`` (the face or sprite frame, when it changed);
5. ``EndAnimation`` after the last tick's messages.

The robot (and the simulator) plays, at each of its frames, one audio message
and the messages queued after it up to the next audio message or an
``EndAnimation``, so everything after the audio in a tick happens in the same
frame as that audio. A frame must start with an audio message: Anki's firmware
clears its whole animation buffer when the next message is anything else, which
is what an empty buffer (at the connection, after an ``EndAnimation``) would
show if a tick began with its image.

Conversions
-----------
* **Head and lift.**  ``AnimHead``/``AnimLift`` carry the duration in a u8 of
  milliseconds.  A move of up to 255 ms is one message.  A longer one is a
  chain of ``n = ceil(D / 255)`` steps of ``D / n`` ms each, sent when each step
  starts, whose targets are interpolated linearly from where the previous
  keyframe left the axis (or ``start_head_angle_deg``/``start_lift_height_mm``;
  :func:`compile_loops` compiles a clip's later loops from its last targets);
  a step that would start after the next keyframe is dropped.  When the start is
  unknown (a long first move and no start given) the move becomes one
  ``SetHeadAngle``/``SetLiftHeight`` with ``duration_sec`` (the robot's own
  action, sent at the same tick).  Variability is drawn here, as Anki's engine
  does, a whole number within +- the keyframe's, and applied to the last step
  only: the message's second byte, which the reference names "variability", is
  the high byte of a 16-bit duration in Anki's engine and firmware
  (``time_ms``), so it is always sent as 0 (every step is at most 255 ms).
  Angles are whole degrees (i8) and heights whole millimetres (u8), as the
  messages carry them.
* **Body** (``body_mode="wheels"``, the default): ``DriveWheels`` at the start
  and ``DriveWheels(0, 0)`` at the end (unless the next body keyframe starts
  by then).  Straight: both wheels at ``v``.  Arc of radius ``r`` (positive:
  to the left) at centre speed ``v``: left ``v * (r - w/2) / r``, right
  ``v * (r + w/2) / r`` with the track ``w`` = 46 mm (the reference's formula
  lacks the division by ``r``).  Turn in place at ``s`` deg/s (positive: to the
  left): wheels at ``-/+ radians(s) * w/2``.  Beyond the treads' 200 mm/s both wheels
  are scaled by one factor to it (the curvature kept: the robot would clamp each wheel
  alone), with a note (:func:`body_speed_notes`).  ``body_mode="anim"`` instead sends
  ``AnimBody(speed, radius)`` in the stream as Anki's engine does (radius 32767
  straight, 0 turn in place with the speed in deg/s, else mm; the speed scaled alike) and
  ``AnimBody(0, 32767)`` to stop.
* **Backpack lights.**  ``AnimBackpackLights`` with each colour in RGB555:
  ``round(c * 31 / 255)`` per channel (the reference truncates), red in bits
  10-14, green 5-9, blue 0-4, bit 15 the IR flag of the app's clips.  The
  lights go off (all 0) at the keyframe's end unless the next one starts by then.
* **Face.**  Procedural face keyframes are interpolated linearly between
  consecutive keyframes (and held after the last), rendered, reduced to the
  even rows and run-length coded to fit one frame (``fit_to_frame``); a
  ``DisplayImage`` is sent only when the image changes.  A sprite sequence
  shows one frame per tick and hides the procedural face while it runs.
  Before the first face keyframe (or sprite) the clip sends no image of its own:
  the player sends what :meth:`AnimationPlayer.tick`'s ``underlay`` gives for
  those ticks (the pacer's face layer), if anything (else the face shown before stays).
* **Audio.**  Every sound is mixed at its sample offset ``round(t * 22320)``
  into one buffer (clipped to int16) which is cut into 744-sample frames: a
  frame with any non-zero sample is an ``OutputAudio``, else ``OutputSilence``.
  Unresolved sounds (Wwise ids without an audio map) are left out with a warning.
* **Headings.**  ``RecordHeading`` and ``TurnToRecordedHeading`` have no fields
  in the message table, so the turn's offset, speed, accelerations, tolerance,
  half revolutions and direction cannot be sent: they are kept in the clip,
  dropped on the wire (with a warning), as the reference does.  The simulator
  turns back to the recorded heading at its own speed.
* **Treads.**  A clip with body motion or a ``TurnToRecordedHeading`` drives the
  treads (``uses_body``): a cancel stops them (``DriveWheels(0, 0)``). Which ticks
  leave them driving forwards is kept (``forwards``), for the driver to hold them
  as it holds cmd_vel's (``AnimationPlayer.drives_forwards``).
* **Events** are not sent; :meth:`AnimationPlayer.take_events` reports them
  when their tick is played.

The player
----------
:class:`AnimationPlayer` is a state machine fed ``tick(now)``: it returns the
messages of every tick due by ``now`` on one grid, ``tick k`` being due at
``start + k / 30`` (``k = floor((now - start) * 30)``: computed from the start,
never accumulated, so it cannot drift).  When ``tick`` is called late and
several ticks are due at once, it catches up: every missed tick's audio and
motion messages are sent, in order, but only the newest display frame (older
ones are dropped, never rendered); each tick sent after its slot ended counts
as an underrun.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from ..face.procedural import FaceRenderer, interpolate_arrays
from ..robot_geometry import MAX_WHEEL_SPEED_MPS, TRACK_WIDTH_M
from ..protocol import messages as msgs
from ..protocol.audio import SAMPLE_RATE, SAMPLES_PER_FRAME, encode_ulaw
from ..protocol.display import fit_to_frame
from .clip import (
    BODY_ARC,
    BODY_STRAIGHT,
    BODY_TURN_IN_PLACE,
    MAX_CLIP_MS,
    AnimationError,
    AudioKeyframe,
    Clip,
)

__all__ = [
    "TICKS_PER_SECOND",
    "TICK_S",
    "TRACK_WIDTH_MM",
    "MAX_MOVE_MS",
    "rgb_to_rgb555",
    "arc_wheel_speeds",
    "body_speed_notes",
    "tick_of",
    "CompiledClip",
    "compile_clip",
    "compile_loops",
    "PlayerStats",
    "AnimationPlayer",
]

TICKS_PER_SECOND = 30
TICK_S = 1.0 / TICKS_PER_SECOND
#: Distance between Cozmo's treads (robot_geometry.TRACK_WIDTH_M: Anki's WHEEL_DIST_MM).
TRACK_WIDTH_MM = TRACK_WIDTH_M * 1000.0
#: Fastest either tread goes (robot_geometry.MAX_WHEEL_SPEED_MPS): a clip's body motion
#: beyond it is scaled down to it, both wheels by one factor.
MAX_WHEEL_SPEED_MMPS = MAX_WHEEL_SPEED_MPS * 1000.0
#: Longest move one AnimHead/AnimLift can carry (u8 milliseconds).
MAX_MOVE_MS = 255
_EPS = 1e-9
_STRAIGHT_RADIUS = 32767


def tick_of(time_ms: float) -> int:
    """The tick a time (ms from the clip start) lands on: the nearest one."""
    return int(math.floor(time_ms * TICKS_PER_SECOND / 1000.0 + 0.5 + _EPS))


def rgb_to_rgb555(rgb: Sequence[float], ir: bool = False) -> int:
    """``(r, g, b)`` 0..255 -> the robot's u16 colour: ``round(c * 31 / 255)`` per channel.

    Red in bits 10-14, green 5-9, blue 0-4; ``ir`` sets bit 15.
    """
    r, g, b = (min(31, max(0, int(math.floor(float(c) * 31.0 / 255.0 + 0.5)))) for c in rgb)
    return (0x8000 if ir else 0) | (r << 10) | (g << 5) | b


def arc_wheel_speeds(speed_mmps: float, radius_mm: float,
                     track_mm: float = TRACK_WIDTH_MM) -> tuple[float, float]:
    """(left, right) wheel speeds for an arc of ``radius_mm`` (positive: to the left) at ``speed_mmps``."""
    if radius_mm == 0:
        raise ValueError("radius 0 is a turn in place")
    half = track_mm / 2.0
    return speed_mmps * (radius_mm - half) / radius_mm, speed_mmps * (radius_mm + half) / radius_mm


def _wheel_speeds(kf: Any, track_mm: float) -> tuple[float, float]:
    """(left, right) wheel speeds, mm/s, of a body keyframe."""
    if kf.mode == BODY_STRAIGHT:
        return kf.speed, kf.speed
    if kf.mode == BODY_ARC:
        return arc_wheel_speeds(kf.speed, kf.radius_mm, track_mm)
    w = math.radians(kf.speed) * track_mm / 2.0
    return -w, w


def _body_scale(label: str, kf: Any, track_mm: float) -> tuple[float, Optional[str]]:
    """The factor a body keyframe's speed is played at (1, or less to keep both wheels
    within MAX_WHEEL_SPEED_MMPS, the curvature kept), and the note saying so (None at 1)."""
    fastest = max(abs(v) for v in _wheel_speeds(kf, track_mm))
    if fastest <= MAX_WHEEL_SPEED_MMPS + _EPS:
        return 1.0, None
    scale = MAX_WHEEL_SPEED_MMPS / fastest
    return scale, (f"{label}: body motion at {kf.time_ms:g} ms asks {fastest:.0f} mm/s of a wheel, beyond "
                   f"the treads' {MAX_WHEEL_SPEED_MMPS:.0f} mm/s: both wheels scaled by {scale:.2f} "
                   "(the curvature kept; it goes less far)")


def body_speed_notes(clip: Clip, label: Optional[str] = None, track_width_mm: float = TRACK_WIDTH_MM) -> List[str]:
    """What :func:`compile_clip` says of ``clip``'s body keyframes scaled down to the treads'
    limit, one line each, starting with ``label`` (default: the clip's name), for the library
    to say when it loads the clip."""
    label = clip.name if label is None else label
    notes = (_body_scale(label, kf, track_width_mm)[1] for kf in sorted(clip.tracks.body, key=lambda k: k.time_ms))
    return [note for note in notes if note is not None]


def _clamp_int(value: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, math.floor(value + 0.5))))


# --------------------------------------------------------------------------------------------
# Compilation
# --------------------------------------------------------------------------------------------


@dataclass
class CompiledClip:
    """A clip on the tick grid.  Display frames are rendered on demand (:meth:`display_data`)."""

    name: str
    num_ticks: int
    #: per tick: motion, light and heading messages (tick -> list)
    messages: Dict[int, List[Any]]
    #: per tick: 744 companded samples, or None for silence
    audio: List[Optional[bytes]]
    #: display changes: tick -> ("face", 43-value array) or ("bits", (32, 128) bool) or ("blank", None)
    display_changes: Dict[int, tuple]
    #: per tick: the tick of the most recent display change at or before it (-1: none yet)
    display_source: List[int]
    #: tick -> event ids
    events: Dict[int, List[str]]
    warnings: List[str] = field(default_factory=list)
    #: whether the clip drives the treads (body motion, or a turn to a recorded heading)
    uses_body: bool = False
    body_mode: str = "wheels"
    #: per tick: whether the treads drive forwards once its messages are played
    forwards: List[bool] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return self.num_ticks / TICKS_PER_SECOND

    def drives_forwards(self, first: int, last: int) -> bool:
        """Whether the treads drive forwards after any of the ticks ``first..last``."""
        return any(self.forwards[max(0, first):last + 1])

    def display_data(self, change_tick: int, renderer: FaceRenderer) -> bytes:
        """``DisplayImage.image`` bytes of the display change at ``change_tick``."""
        kind, value = self.display_changes[change_tick]
        if kind == "face":
            bits = renderer.render_display(value)
        elif kind == "bits":
            bits = value
        else:
            bits = np.zeros((32, 128), dtype=bool)
        data, _ = fit_to_frame(bits)
        return data

    def audio_message(self, k: int) -> Any:
        frame = self.audio[k]
        return msgs.OutputSilence() if frame is None else msgs.OutputAudio(samples=frame)

    def timeline(self, anim_id: int = 1, renderer: Optional[FaceRenderer] = None) -> List[List[Any]]:
        """Every tick's messages in order, as played on time (display only when it changes)."""
        renderer = renderer or FaceRenderer()
        out: List[List[Any]] = []
        last_sent: Optional[bytes] = None
        last_source = -1
        for k in range(self.num_ticks):
            tick: List[Any] = [self.audio_message(k)]
            if k == 0:
                tick.append(msgs.StartAnimation(anim_id=anim_id & 0xFF))
            tick.extend(self.messages.get(k, ()))
            src = self.display_source[k]
            if src >= 0 and src != last_source:
                last_source = src
                data = self.display_data(src, renderer)
                if data != last_sent:
                    tick.append(msgs.DisplayImage(image=data))
                    last_sent = data
            if k == self.num_ticks - 1:
                tick.append(msgs.EndAnimation())
            out.append(tick)
        return out


def _mix_audio(audio: Sequence[AudioKeyframe], num_ticks: int) -> List[Optional[bytes]]:
    """Per tick: 744 companded samples of the mixed sounds, or None where all is silent."""
    total = num_ticks * SAMPLES_PER_FRAME
    sounds = []
    for kf in audio:
        if kf.pcm is None or len(kf.pcm) == 0:
            continue
        start = int(math.floor(kf.time_ms / 1000.0 * SAMPLE_RATE + 0.5))
        if start < total:
            sounds.append((start, np.asarray(kf.pcm, dtype=np.int32)[: total - start]))
    out: List[Optional[bytes]] = [None] * num_ticks
    if not sounds:
        return out
    # Mix only the ticks the sounds cover.
    first = min(s for s, _ in sounds) // SAMPLES_PER_FRAME
    last = -(-max(s + len(p) for s, p in sounds) // SAMPLES_PER_FRAME)
    base = first * SAMPLES_PER_FRAME
    mix = np.zeros((last - first) * SAMPLES_PER_FRAME, dtype=np.int32)
    for start, pcm in sounds:
        mix[start - base:start - base + len(pcm)] += pcm
    np.clip(mix, -32768, 32767, out=mix)
    sounding = mix.reshape(-1, SAMPLES_PER_FRAME).any(axis=1)
    codes = encode_ulaw(mix.astype(np.int16))
    for i in np.flatnonzero(sounding).tolist():
        out[first + i] = codes[i * SAMPLES_PER_FRAME:(i + 1) * SAMPLES_PER_FRAME]
    return out


def _axis_track(keyframes, start_value, value_of, make_anim, make_long, clamp, add, last_tick, rng):
    """Head or lift keyframes -> messages (see the module docstring)."""
    def vary(value: float, var: float) -> float:
        # Anki's engine draws a whole number within +-variability for each message it sends
        spread = int(round(abs(var)))
        return value + rng.randint(-spread, spread) if spread else value

    current = start_value
    for i, kf in enumerate(keyframes):
        target = value_of(kf)
        var = getattr(kf, "variability_deg", getattr(kf, "variability_mm", 0.0))
        next_start = keyframes[i + 1].time_ms if i + 1 < len(keyframes) else math.inf
        d = max(0.0, kf.duration_ms)
        if d <= MAX_MOVE_MS:
            add(tick_of(kf.time_ms), make_anim(int(round(d)), clamp(vary(target, var))))
            current = target
            continue
        if current is None:
            add(tick_of(kf.time_ms), make_long(target, d / 1000.0))
            current = target
            continue
        n = math.ceil(d / MAX_MOVE_MS)
        step = d / n
        reached = current
        for j in range(n):
            t = kf.time_ms + j * step
            if t >= next_start - _EPS:
                break
            value = current + (target - current) * (j + 1) / n
            last = j == n - 1
            add(min(tick_of(t), last_tick), make_anim(int(round(step)),
                                                      clamp(vary(value, var) if last else value)))
            reached = value
        if next_start < kf.time_ms + d:
            # Interrupted: where the axis would be when the next keyframe starts.
            f = (next_start - kf.time_ms) / d
            reached = current + (target - current) * min(max(f, 0.0), 1.0)
        current = reached


def compile_clip(
    clip: Clip,
    *,
    start_head_angle_deg: Optional[float] = None,
    start_lift_height_mm: Optional[float] = None,
    body_mode: str = "wheels",
    track_width_mm: float = TRACK_WIDTH_MM,
    rng: Optional[random.Random] = None,
) -> CompiledClip:
    """Put ``clip`` on the 30 fps tick grid (see the module docstring). ``rng`` draws the
    head and lift keyframes' variability (a new ``random.Random`` by default)."""
    if body_mode not in ("wheels", "anim"):
        raise ValueError(f"body_mode must be 'wheels' or 'anim', got {body_mode!r}")
    t = clip.tracks
    rng = rng if rng is not None else random.Random()
    warnings: List[str] = list(clip.warnings)
    if not clip.end_s <= MAX_CLIP_MS / 1000.0:
        raise AnimationError(f"{clip.name}: lasts {clip.end_s:g} s, more than {MAX_CLIP_MS / 1000:g} s")
    num_ticks = max(1, int(math.ceil(clip.end_s * TICKS_PER_SECOND - _EPS)))
    last_tick = num_ticks - 1
    messages: Dict[int, List[Any]] = {}

    def add(k: int, m: Any) -> None:
        messages.setdefault(min(max(k, 0), last_tick), []).append(m)

    # Head and lift.
    _axis_track(
        sorted(t.head, key=lambda k: k.time_ms), start_head_angle_deg, lambda k: k.angle_deg,
        lambda d, v: msgs.AnimHead(duration_ms=d, variability_deg=0, angle_deg=v),
        lambda target, secs: msgs.SetHeadAngle(angle_rad=math.radians(target), duration_sec=secs),
        lambda v: _clamp_int(v, -128, 127), add, last_tick, rng)
    _axis_track(
        sorted(t.lift, key=lambda k: k.time_ms), start_lift_height_mm, lambda k: k.height_mm,
        lambda d, v: msgs.AnimLift(duration_ms=d, variability_mm=0, height_mm=v),
        lambda target, secs: msgs.SetLiftHeight(height_mm=float(target), duration_sec=secs),
        lambda v: _clamp_int(v, 0, 255), add, last_tick, rng)

    # Body.
    body = sorted(t.body, key=lambda k: k.time_ms)
    for i, kf in enumerate(body):
        next_start = body[i + 1].time_ms if i + 1 < len(body) else math.inf
        scale, note = _body_scale(clip.name, kf, track_width_mm)  # the robot would clamp each wheel alone
        if note is not None:
            warnings.append(note)
        if body_mode == "wheels":
            left, right = _wheel_speeds(kf, track_width_mm)
            add(tick_of(kf.time_ms), msgs.DriveWheels(lwheel_speed_mmps=float(left * scale),
                                                      rwheel_speed_mmps=float(right * scale)))
            stop = msgs.DriveWheels()
        else:
            radius = {BODY_STRAIGHT: _STRAIGHT_RADIUS, BODY_TURN_IN_PLACE: 0}.get(kf.mode)
            if radius is None:
                radius = _clamp_int(kf.radius_mm, -32767, 32766)
                radius = radius if radius != 0 else (1 if kf.radius_mm > 0 else -1)
            add(tick_of(kf.time_ms), msgs.AnimBody(speed_mmps=_clamp_int(kf.speed * scale, -32768, 32767),
                                                   unknown=radius))
            stop = msgs.AnimBody(speed_mmps=0, unknown=_STRAIGHT_RADIUS)
        end = kf.time_ms + kf.duration_ms
        if next_start > end + _EPS:
            add(tick_of(end), stop)

    # Backpack lights.
    lights = sorted(t.lights, key=lambda k: k.time_ms)
    for i, kf in enumerate(lights):
        next_start = lights[i + 1].time_ms if i + 1 < len(lights) else math.inf
        colors = [rgb_to_rgb555(c, ir) for c, ir in zip(kf.colors, kf.ir)]
        add(tick_of(kf.time_ms), msgs.AnimBackpackLights(colors=colors))
        end = kf.time_ms + kf.duration_ms
        if next_start > end + _EPS:
            add(tick_of(end), msgs.AnimBackpackLights(colors=[0] * 5))

    # Headings.
    for kf in t.record_heading:
        add(tick_of(kf.time_ms), msgs.RecordHeading())
    for kf in t.turn_to_recorded_heading:
        add(tick_of(kf.time_ms), msgs.TurnToRecordedHeading())
    if t.turn_to_recorded_heading:
        warnings.append(f"{clip.name}: TurnToRecordedHeading parameters (offset, speed, accelerations, tolerance, "
                        "half revolutions, direction) are not sent: the message has no fields")

    # Audio.
    for kf in t.audio:
        if kf.pcm is None and not kf.event_ids:  # unresolved Wwise events were reported when loaded
            warnings.append(f"{clip.name}: audio keyframe at {kf.time_ms:g} ms has no sound: skipped")
    audio = _mix_audio(t.audio, num_ticks)

    # Display: procedural face keyframes, then sprites on top.
    plan: List[Optional[tuple]] = [None] * num_ticks  # what to show at each tick (None: nothing yet)
    faces = sorted(t.face, key=lambda k: k.time_ms)
    if faces:
        arrays = [f.params.to_array() for f in faces]
        times = [f.time_ms for f in faces]
        first = min(tick_of(times[0]), last_tick)
        j = 0
        for k in range(first, num_ticks):
            ms = k * 1000.0 / TICKS_PER_SECOND
            while j + 1 < len(faces) and times[j + 1] <= ms + _EPS:
                j += 1
            if j + 1 < len(faces) and ms > times[j]:
                f = (ms - times[j]) / (times[j + 1] - times[j])
                plan[k] = ("face", interpolate_arrays(arrays[j], arrays[j + 1], f))
            else:
                plan[k] = ("face", arrays[j])
    for kf in sorted(t.sprite, key=lambda k: k.time_ms):
        if not kf.frames:
            continue
        k0 = tick_of(kf.time_ms)
        for i, frame in enumerate(kf.frames):
            if k0 + i < num_ticks:
                plan[k0 + i] = ("bits", np.ascontiguousarray(np.asarray(frame, dtype=bool)[0::2]))
    display_changes: Dict[int, tuple] = {}
    display_source: List[int] = [-1] * num_ticks
    prev = None
    src = -1
    for k, entry in enumerate(plan):
        if entry is not None and (prev is None or entry[0] != prev[0] or not np.array_equal(entry[1], prev[1])):
            display_changes[k] = entry
            src = k
        if entry is not None:
            prev = entry
        display_source[k] = src

    events: Dict[int, List[str]] = {}
    for kf in t.events:
        events.setdefault(min(tick_of(kf.time_ms), last_tick), []).append(kf.event_id)

    return CompiledClip(
        name=clip.name, num_ticks=num_ticks, messages=messages, audio=audio,
        display_changes=display_changes, display_source=display_source, events=events,
        warnings=warnings, uses_body=t.moves_treads, body_mode=body_mode,
        forwards=_forward_ticks(messages, num_ticks),
    )


def compile_loops(clip: Clip, loops: int, *, start_head_angle_deg: Optional[float] = None,
                  start_lift_height_mm: Optional[float] = None, **kwargs: Any) -> tuple:
    """``(first, again)``: ``clip`` compiled for its first loop from the start pose given,
    and for the loops after it from where it leaves the head and lift (the targets of its
    last head and lift keyframes), so that a long move does not start again from the first
    loop's pose; ``again`` is None when it is played once or moves neither. ``kwargs``: as
    :func:`compile_clip`'s."""
    first = compile_clip(clip, start_head_angle_deg=start_head_angle_deg,
                         start_lift_height_mm=start_lift_height_mm, **kwargs)
    head, lift = clip.tracks.head, clip.tracks.lift
    if loops < 2 or not (head or lift):
        return first, None
    again = compile_clip(
        clip, start_head_angle_deg=sorted(head, key=lambda k: k.time_ms)[-1].angle_deg if head else None,
        start_lift_height_mm=sorted(lift, key=lambda k: k.time_ms)[-1].height_mm if lift else None, **kwargs)
    return first, again


def _forward_ticks(messages: Dict[int, List[Any]], num_ticks: int) -> List[bool]:
    """Per tick: whether the clip's tread commands up to it leave the treads driving
    forwards (DriveWheels with a positive sum, AnimBody at a positive speed but a turn's)."""
    out: List[bool] = []
    forwards = False
    for k in range(num_ticks):
        for m in messages.get(k, ()):
            if m.NAME == "DriveWheels":
                forwards = m.lwheel_speed_mmps + m.rwheel_speed_mmps > 0.0
            elif m.NAME == "AnimBody":
                forwards = m.speed_mmps > 0 and m.unknown != 0
            elif m.NAME == "TurnToRecordedHeading":
                forwards = False
        out.append(forwards)
    return out


# --------------------------------------------------------------------------------------------
# The player
# --------------------------------------------------------------------------------------------


@dataclass
class PlayerStats:
    """Counters of an :class:`AnimationPlayer` (or an AV pacer), since it was made."""

    ticks: int = 0
    audio_frames: int = 0
    silence_frames: int = 0
    display_frames: int = 0
    #: display frames of late ticks that were skipped in favour of a newer one
    display_dropped: int = 0
    #: ticks sent after their 1/30 s slot had ended
    underruns: int = 0
    clips_started: int = 0
    clips_finished: int = 0
    clips_cancelled: int = 0


class AnimationPlayer:
    """Plays compiled clips on the tick grid.  See the module docstring.

    ``lead_ticks`` sends each tick that many ticks early (a small buffer on the
    robot against host jitter; 0 = exactly on time).  Anim ids count 1..255
    and wrap to 1.
    """

    def __init__(self, renderer: Optional[FaceRenderer] = None, lead_ticks: int = 0,
                 first_anim_id: int = 1, **compile_options: Any) -> None:
        self.renderer = renderer or FaceRenderer()
        self.lead_ticks = max(0, int(lead_ticks))
        self.compile_options: Mapping[str, Any] = compile_options
        self.stats = PlayerStats()
        self._next_anim_id = max(1, min(255, int(first_anim_id)))
        self._clip: Optional[CompiledClip] = None
        self._start = 0.0
        self._next_tick = 0
        self._anim_id = 0
        self._pending: List[Any] = []
        self._events: List[str] = []
        self._last_display: Optional[bytes] = None
        self._last_source = -1
        self._own_display = False
        self._progress_frozen: Optional[float] = None

    # ------------------------------------------------------------------ state

    @property
    def playing(self) -> bool:
        return self._clip is not None

    @property
    def clip(self) -> Optional[CompiledClip]:
        return self._clip

    @property
    def shown_display(self) -> bool:
        """Whether the clip playing (or last played) has reached its first face or sprite."""
        return self._own_display

    @property
    def anim_id(self) -> int:
        """The id of the clip playing (or last played)."""
        return self._anim_id

    @property
    def start_time(self) -> float:
        return self._start

    @property
    def next_tick(self) -> int:
        """Index of the next tick of the clip to send."""
        return self._next_tick

    def progress(self, now: float) -> float:
        """0..1: how much of the clip has been sent by ``now`` (1 once finished; frozen when cancelled)."""
        if self._clip is None:
            return 1.0 if self._progress_frozen is None else self._progress_frozen
        return min(1.0, self._next_tick / self._clip.num_ticks)

    def next_deadline(self) -> Optional[float]:
        """When the next tick is due (None while idle with nothing pending)."""
        if self._clip is None:
            return None
        return self._start + (self._next_tick - self.lead_ticks) / TICKS_PER_SECOND

    def drives_forwards(self, now: float) -> bool:
        """Whether the clip playing leaves its treads driving forwards after the last tick
        sent, or after one due by ``now``."""
        clip = self._clip
        return clip is not None and clip.drives_forwards(self._next_tick - 1, self.due_ticks(now) - 1)

    def take_events(self) -> List[str]:
        """Event keyframes reached since the last call."""
        out, self._events = self._events, []
        return out

    # ------------------------------------------------------------------ commands

    def play(self, clip: Union[Clip, CompiledClip], now: float, start: Optional[float] = None,
             **compile_options: Any) -> int:
        """Start ``clip`` with tick 0 due at ``start`` (default ``now``); returns its anim id.

        A :class:`Clip` is compiled with the player's options updated by
        ``compile_options`` (e.g. ``start_head_angle_deg`` = the robot's head
        angle now).  A clip already playing is cancelled first (its cancel
        messages come out with the next :meth:`tick`).
        """
        if isinstance(clip, CompiledClip):
            compiled = clip
        else:
            compiled = compile_clip(clip, **{**self.compile_options, **compile_options})
        if self._clip is not None:
            self._pending.extend(self._cancel_messages())
            self.stats.clips_cancelled += 1
        self._clip = compiled
        self._start = now if start is None else float(start)
        self._next_tick = 0
        self._anim_id = self._next_anim_id
        self._next_anim_id = self._next_anim_id % 255 + 1
        self._last_display = None
        self._last_source = -1
        self._own_display = False
        self._progress_frozen = None
        self.stats.clips_started += 1
        return self._anim_id

    def cancel(self, now: float) -> List[Any]:
        """Stop now: the messages to send at once (AbortAnimation, stop the wheels; the robot then
        shows the user's backpack lights again).

        Returns only pending messages when nothing plays.
        """
        out, self._pending = self._pending, []
        if self._clip is None:
            return out
        self._progress_frozen = self.progress(now)
        out.extend(self._cancel_messages())
        self._clip = None
        self.stats.clips_cancelled += 1
        return out

    def _cancel_messages(self) -> List[Any]:
        clip = self._clip
        out: List[Any] = [msgs.AbortAnimation()]
        if clip is not None and clip.uses_body:
            out.append(msgs.DriveWheels())
        # no AnimBackpackLights: the abort gives the backpack back to the user's lights, and
        # a stream message after it would start the emptied buffer without an audio message
        return out

    # ------------------------------------------------------------------ ticking

    def due_ticks(self, now: float) -> int:
        """How many of the clip's ticks are due by ``now`` (capped at the clip's length)."""
        if self._clip is None:
            return 0
        due = math.floor((now - self._start) * TICKS_PER_SECOND + _EPS) + 1 + self.lead_ticks
        return max(0, min(due, self._clip.num_ticks))

    def tick(self, now: float, underlay: Optional[Callable[[int, bool], Optional[Any]]] = None) -> List[Any]:
        """The messages due by ``now``, in order (empty when nothing is due).

        ``underlay(k, latest)``, when given, is asked for each tick ``k`` of the clip before
        its first face or sprite (``latest``: the newest tick of this call) and returns the
        ``DisplayImage`` to send in it, after its audio and keyframes, or None.
        """
        out, self._pending = self._pending, []
        clip = self._clip
        if clip is None:
            return out
        due = self.due_ticks(now)
        if due <= self._next_tick:
            return out
        latest = due - 1
        # A tick is late when it is sent after its own slot [start + k/30, start + (k+1)/30)
        # ended (the lead only sends ticks earlier than that).
        on_time_from = math.floor((now - self._start) * TICKS_PER_SECOND + _EPS)
        for k in range(self._next_tick, due):
            if k < on_time_from:
                self.stats.underruns += 1
            self._emit_tick(clip, k, k == latest, out, underlay)
        self._next_tick = due
        if due >= clip.num_ticks:
            self._clip = None
            self._progress_frozen = 1.0
            self.stats.clips_finished += 1
        return out

    def _emit_tick(self, clip: CompiledClip, k: int, latest: bool, out: List[Any],
                   underlay: Optional[Callable[[int, bool], Optional[Any]]]) -> None:
        stats = self.stats
        stats.ticks += 1
        out.append(clip.audio_message(k))  # first: the robot's frame starts with its audio
        if clip.audio[k] is None:
            stats.silence_frames += 1
        else:
            stats.audio_frames += 1
        if k == 0:
            out.append(msgs.StartAnimation(anim_id=self._anim_id))
        out.extend(clip.messages.get(k, ()))
        src = clip.display_source[k]
        if src < 0:
            image = underlay(k, latest) if underlay is not None else None
            if image is not None:
                out.append(image)
        elif src != self._last_source:
            self._own_display = True
            if latest:
                self._last_source = src
                data = clip.display_data(src, self.renderer)
                if data != self._last_display:
                    out.append(msgs.DisplayImage(image=data))
                    self._last_display = data
                    stats.display_frames += 1
            elif clip.display_source[k + 1] != src:
                stats.display_dropped += 1  # superseded before it could be shown
        self._events.extend(clip.events.get(k, ()))
        if k == clip.num_ticks - 1:
            out.append(msgs.EndAnimation())
