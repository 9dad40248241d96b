"""The 30 fps audio + display pacer the driver streams through.

Pure: no clock, no I/O; ``now`` is always an argument (seconds, any monotonic origin).

One clock
---------
The robot plays its animation stream one frame per 1/30 s and takes the audio
messages as its clock: each frame plays one ``OutputAudio``/``OutputSilence``
and the messages queued after it, up to the next one (Anki's firmware; the
notes e, f say "up to and including", which is the same stream only once it
runs).  The pacer keeps
one grid: tick ``k`` is due at ``t0 + k / 30`` (``t0``: :meth:`AVPacer.start`,
or the first call), and :meth:`AVPacer.tick` returns the messages of every tick
due by ``now``, the index being ``floor((now - t0) * 30)``: computed from the
origin, never accumulated, so the stream cannot drift.  A tick that carries
something and is sent after its slot ended counts as an underrun (idle ticks,
which send nothing, never do); all its audio is still sent (audio is never
dropped, the robot needs every frame), but of several late ticks only the
newest overlay image is sent (face frames: see below).

A sound that begins (its tick follows one that sent no audio) goes after
``lead_in()`` silence frames, sent at once: those the robot lacks of its preroll
(:meth:`~cozmo_driver.anim.robot_buffer.BufferGuard.lead_in`; a robot that plays on
from its last frame held after a pause does not wait for 7 frames again).

Ticks that were idle when a call returned (nothing to send until an input
arrives: :meth:`AVPacer.next_deadline` was None, or later) are not sent late
when an input arrives after them: the grid resumes at the current tick, so a
sound queued after minutes of silence starts at once instead of as a burst.
So does it after :meth:`AVPacer.pause` (the stream stopped: the robot lost, the
driver deactivated) once :meth:`AVPacer.resume` is called, whatever was due when
it stopped: the ticks in between are neither sent nor counted late.

What each tick carries (exactly one audio message while the pacer is *active*,
then at most one ``DisplayImage``; the robot takes a frame as an audio message
and what follows it up to the next one, and clears its whole buffer if one
starts with anything else):

* **Audio**: ``OutputAudio`` with the next 744 queued samples (PCM of any rate,
  resampled to 22 320 Hz by :func:`cozmo_driver.protocol.audio.resample`).  A
  final chunk's tail is padded with silence; a stream pushed in parts
  (``final=False``) that runs dry sends silence and counts ``audio_starved``
  until more arrives.  With no samples queued, ``OutputSilence``, sent only
  while active.
* **Display**: the image to show is the current overlay
  (:meth:`AVPacer.show_image`: queued images shown in order, each for its
  ``duration_s`` or, without one, for one tick: a video) or else the face layer.
  A ``DisplayImage`` is sent when the image differs from what the screen shows,
  and the shown image is sent again every ``refresh_s`` (the robot blanks a
  screen left without a refresh).

**Face frames.**  The face layer is fed two ways.  :meth:`AVPacer.set_face`
replaces it at once (an image held in the face's place, or none).
:meth:`AVPacer.queue_face` is for a face that changes every frame (the face
node's 30 fps, on a clock of its own): its frames wait in a small FIFO
(``face_queue`` frames) and each tick takes the next one, so that two frames
arriving between the same two ticks are shown on consecutive ticks instead of
the first being replaced unseen; the price is at most ``face_queue`` frames of
latency after a burst.  Late ticks sent together each take their own frame
(the robot plays them one per frame from its buffer).  A frame arriving when
the FIFO is full drops the oldest waiting one (``faces_dropped``).  While an
overlay or an animation's face covers the face, the FIFO keeps only the newest frame
(the others are ``faces_covered``, never shown by design) and that frame shows
when the face layer does again.  While paused (no tick to show a frame on) the FIFO
keeps none: the newest frame is the face, shown first after :meth:`AVPacer.resume`,
and the frames it replaced are not counted.

**When silence is sent.**  The pacer is active, and sends one audio message
per tick, while audio is queued or playing, while an overlay image is shown or
queued, on every tick that sends a ``DisplayImage`` (the robot shows images
when an audio frame arrives), and for ``linger_s`` after the last of these (so
short gaps between sounds or images do not start and stop the robot's stream).
Otherwise nothing is sent at all: an idle robot gets no traffic.  With
``always_on=True`` every tick carries an audio message (a continuous clock,
e.g. while a face node streams frames).

Animations (:meth:`AVPacer.play_clip`) run through an
:class:`~cozmo_driver.anim.player.AnimationPlayer` started on the pacer's own
grid: while one plays, its ticks replace the pacer's (queued audio and images
wait), and afterwards the pacer carries on on the same grid and sends the face
layer again.  Until the clip shows a face (or sprite) of its own, none in the loops
before (``next_loop``), the face layer's frames go out in its ticks as in the
pacer's own, each after its tick's audio and keyframe messages (not while an
image is shown or waits: that stays on the screen); only from then on is the
face covered.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, List, Optional, Union

import numpy as np

from ..face.procedural import FaceRenderer
from ..protocol import messages as msgs
from ..protocol.audio import SAMPLE_RATE, SAMPLES_PER_FRAME, SILENCE_CODE, encode_ulaw, mix_down, resample
from ..protocol.display import DISPLAY_HEIGHT, DISPLAY_WIDTH, MAX_DISPLAY_BYTES, SCREEN_HEIGHT, fit_to_frame
from ..protocol.errors import LocalProtocolError
from .clip import Clip
from .player import TICKS_PER_SECOND, AnimationPlayer, CompiledClip

__all__ = ["AVPacer", "PacerStats", "ImageLike"]

ImageLike = Union[np.ndarray, bytes, bytearray]
_EPS = 1e-9


@dataclass
class PacerStats:
    """Counters of an :class:`AVPacer` (its own ticks; animations count in ``player.stats``)."""

    #: ticks of the grid handled by the pacer (idle ones included)
    ticks: int = 0
    #: ticks sent after their slot ended
    underruns: int = 0
    audio_frames: int = 0
    silence_frames: int = 0
    display_frames: int = 0
    #: images never shown because newer ones replaced them during a late catch-up
    display_dropped: int = 0
    #: ticks with a non-final audio stream queued but fewer than 744 samples
    audio_starved: int = 0
    #: display frames re-sent by the refresh
    refreshes: int = 0
    #: face frames dropped unseen because the face FIFO was full (the oldest waiting one)
    faces_dropped: int = 0
    #: face frames not shown on a tick of their own because an overlay or an animation
    #: covered the face (they came, or waited, meanwhile; the newest shows afterwards)
    faces_covered: int = 0
    #: times the grid moved by a tick (:meth:`AVPacer.shift`)
    grid_shifts: int = 0
    #: silence frames sent before a sound because the robot held too few (``lead_in``)
    lead_in_frames: int = 0


class _Image:
    """An image for the screen, encoded on first use."""

    __slots__ = ("_source", "_data")

    def __init__(self, image: ImageLike) -> None:
        if isinstance(image, (bytes, bytearray)):
            data = bytes(image)
            if len(data) > MAX_DISPLAY_BYTES:
                raise LocalProtocolError(
                    f"display image of {len(data)} bytes does not fit a frame (at most {MAX_DISPLAY_BYTES})")
            self._source = None
            self._data: Optional[bytes] = data
            return
        arr = np.asarray(image)
        if arr.shape == (SCREEN_HEIGHT, DISPLAY_WIDTH):
            arr = arr[0::2]
        elif arr.shape != (DISPLAY_HEIGHT, DISPLAY_WIDTH):
            raise LocalProtocolError(
                f"images must be (64, 128) or (32, 128) arrays or encoded bytes, got shape {arr.shape}")
        self._source = np.array(arr != 0, dtype=bool)
        self._data = None

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data, _ = fit_to_frame(self._source)
            self._source = None
        return self._data


class _Overlay:
    __slots__ = ("image", "duration_s", "until", "shown")

    def __init__(self, image: _Image, duration_s: Optional[float]) -> None:
        self.image = image
        self.duration_s = duration_s
        self.until = 0
        self.shown = False


class AVPacer:
    """Paces audio and display at 30 ticks per second.  See the module docstring."""

    def __init__(self, *, always_on: bool = False, linger_s: float = 0.5, refresh_s: float = 5.0,
                 face_queue: int = 6, renderer: Optional[FaceRenderer] = None,
                 player: Optional[AnimationPlayer] = None) -> None:
        self.always_on = bool(always_on)
        #: face frames that may wait for their tick (:meth:`queue_face`)
        self.face_queue = max(1, int(face_queue))
        self.linger_ticks = max(0, int(round(linger_s * TICKS_PER_SECOND)))
        self.refresh_ticks = max(1, int(round(refresh_s * TICKS_PER_SECOND)))
        self.player = player or AnimationPlayer(renderer=renderer)
        self.stats = PacerStats()
        self._t0: Optional[float] = None
        self._next = 0
        self._early = 0  # ticks the last shift brought forward
        # audio
        self._chunks: Deque[np.ndarray] = deque()
        self._chunk_pos = 0
        self._queued = 0
        self._final = True
        self._sound_tick = -(1 << 62)  # the last tick that sent audio, or waited for a stream's
        self._sound_sent = -(1 << 62)  # the last tick that sent an OutputAudio (sound_held)
        #: how many silence frames go before a sound that begins (none if None): what the robot
        #: lacks of its preroll (``BufferGuard.lead_in``; see the module docstring)
        self.lead_in: Optional[Callable[[], int]] = None
        # display
        self._face: Optional[_Image] = None
        self._faces: Deque[_Image] = deque()  # face frames waiting for their tick, oldest first
        self._overlays: Deque[_Overlay] = deque()
        self._overlay: Optional[_Overlay] = None
        self._on_screen: Optional[bytes] = None
        self._on_screen_image: Optional[_Image] = None
        self._last_display_tick = -(1 << 62)
        self._last_active_tick = -(1 << 62)
        # The first tick the pacer would send, as of the end of the last tick() call, if
        # no input came (inf: none): the ticks before it were idle even when an input
        # arrived since (after a long idle the grid resumes now, not from the old tick).
        self._quiet_until: float = math.inf
        self._paused = False  # (pause, resume)
        # animation
        self._clip_first_tick = 0
        self._clip_ticks = 0
        self._clip_face = False  # the clip playing (its loops) showed a face of its own: the face is covered
        #: where the player's (a clip's) messages are in the list the last tick() returned,
        #: (start, end): a link that is behind still gets their silence and images, the
        #: robot playing a clip's frame per audio message
        self.clip_span = (0, 0)
        #: the face layer's images among the clip's messages (sent before its first face)
        self.clip_faces: List[Any] = []
        #: when the last clip sent its last tick (the robot plays its last frames after it)
        self.clip_ended_at = -math.inf

    # ------------------------------------------------------------------ the grid

    @property
    def started(self) -> bool:
        return self._t0 is not None

    def start(self, now: float) -> None:
        """Put tick 0 at ``now`` (once; later calls do nothing)."""
        if self._t0 is None:
            self._t0 = float(now)

    def tick_time(self, k: int) -> float:
        """When tick ``k`` is due."""
        if self._t0 is None:
            raise LocalProtocolError("the pacer has not started")
        return self._t0 + k / TICKS_PER_SECOND

    def shift(self, ticks: int) -> None:
        """Move the grid by whole ticks: 1 sends every tick from the next one a tick later,
        -1 a tick earlier (the next one is due at once). Nothing is skipped or repeated;
        for the robot's buffer (:class:`~cozmo_driver.anim.robot_buffer.BufferGuard`)."""
        if self._t0 is not None and ticks:
            self._t0 += ticks / TICKS_PER_SECOND
            self._early = max(0, -ticks)
            self.stats.grid_shifts += 1

    def pause(self) -> None:
        """The stream stops (the robot lost, the driver deactivated): of the face frames waiting
        only the newest stays, as the face, and until :meth:`resume` a face frame replaces the face
        instead of queueing (none of them is counted: no tick was there to show it)."""
        self._paused = True
        if self._faces:
            self._face = self._faces[-1]
            self._faces.clear()

    def resume(self, now: float) -> None:
        """The stream goes on at ``now`` (the robot back, the driver active again): the grid
        goes on from the current tick, as after an idle time (the ticks since :meth:`pause` are
        neither sent nor late), and the screen's content is unknown (the face is sent again).
        A clip still playing is the caller's to cancel first (:meth:`cancel_clip`)."""
        self.start(now)
        self._paused = False
        slot = self._slot(now)
        if slot > self._next:
            self.stats.ticks += slot - self._next
            self._next = slot
        self._quiet_until = math.inf  # (tick: a tick that passes before the next call is not late)
        self._early = 0
        self._forget_screen()

    def next_tick_time(self) -> Optional[float]:
        """When the next tick is due (None before :meth:`start`): a face frame queued
        before then is shown on it at the earliest."""
        return None if self._t0 is None else self.tick_time(self._next)

    def next_grid_time(self, now: float) -> float:
        """When the first tick of the grid after ``now`` is due (sent or not, busy or
        idle): where a face pulled at it goes out at once (``AVStream.set_face_source``)."""
        self.start(now)
        return self.tick_time(self._slot(now) + 1)

    def _slot(self, now: float) -> int:
        return math.floor((now - self._t0) * TICKS_PER_SECOND + _EPS)

    # ------------------------------------------------------------------ inputs

    def queue_audio(self, pcm: np.ndarray, rate: int = SAMPLE_RATE, final: bool = True) -> None:
        """Queue samples (int16, mono or ``(n, channels)``) at ``rate`` Hz behind what is queued.

        ``final=False`` marks a part of a longer stream: its tail waits for the
        next part instead of being padded.
        """
        arr = np.asarray(pcm)
        if arr.ndim == 2:
            arr = mix_down(arr)
        if arr.ndim != 1:
            raise LocalProtocolError(f"audio must be (n,) or (n, channels), got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise LocalProtocolError(f"audio must hold integer samples, got {arr.dtype}")
        if int(rate) != SAMPLE_RATE:
            arr = resample(arr, int(rate), SAMPLE_RATE)
        arr = np.clip(arr, -32768, 32767).astype(np.int16)
        if arr.size:
            self._chunks.append(arr)
            self._queued += arr.size
        self._final = bool(final)

    @property
    def audio_queued_s(self) -> float:
        """Seconds of audio waiting."""
        return self._queued / SAMPLE_RATE

    def clear_audio(self) -> None:
        self._chunks.clear()
        self._chunk_pos = 0
        self._queued = 0
        self._final = True

    def drop_audio(self, samples: int) -> None:
        """Drop the first ``samples`` queued samples (a sound cancelled midway); what is
        queued behind them stays, as it was queued (a stream's too)."""
        left = min(max(0, int(samples)), self._queued)
        self._queued -= left
        while left:
            chunk = self._chunks[0]
            take = min(left, chunk.size - self._chunk_pos)
            self._chunk_pos += take
            left -= take
            if self._chunk_pos == chunk.size:
                self._chunks.popleft()
                self._chunk_pos = 0

    def set_face(self, image: Optional[ImageLike]) -> None:
        """The face layer, at once: shown whenever no overlay is (None: nothing).  Face
        frames waiting in the FIFO are replaced too (counted as covered)."""
        self.stats.faces_covered += len(self._faces)
        self._faces.clear()
        self._face = None if image is None else _Image(image)

    def queue_face(self, image: ImageLike) -> None:
        """The next frame of the face layer: shown on the first tick after those waiting
        (see Face frames in the module docstring)."""
        frame = _Image(image)
        if self._paused:  # no tick to show it on: the newest is the face once the stream resumes
            self._face = frame
            return
        if self._face_covered():
            self.stats.faces_covered += len(self._faces) + 1
            self._faces.clear()
            self._face = frame
            return
        if len(self._faces) >= self.face_queue:
            self._faces.popleft()
            self.stats.faces_dropped += 1
        self._faces.append(frame)

    @property
    def faces_queued(self) -> int:
        """Face frames waiting for their tick."""
        return len(self._faces)

    def _face_covered(self) -> bool:
        return (self.player.playing and self._clip_face) or self._overlay is not None or bool(self._overlays)

    def _cover_faces(self) -> None:
        """The face is covered: of the frames waiting only the newest stays, as the face."""
        if self._faces:
            self.stats.faces_covered += len(self._faces)
            self._face = self._faces[-1]
            self._faces.clear()

    def show_image(self, image: ImageLike, duration_s: Optional[float] = None) -> None:
        """Queue an overlay image: shown for ``duration_s`` (None: one tick), then the next or the face."""
        if duration_s is not None and not duration_s >= 0:
            raise LocalProtocolError(f"duration_s must be >= 0, got {duration_s!r}")
        self._overlays.append(_Overlay(_Image(image), duration_s))
        self._cover_faces()

    def clear_images(self) -> None:
        """Drop every overlay (the face layer shows again)."""
        self._overlays.clear()
        self._overlay = None

    @property
    def images_queued(self) -> int:
        return len(self._overlays) + (self._overlay is not None)

    # ------------------------------------------------------------------ animations

    def play_clip(self, clip: Union[Clip, CompiledClip], now: float, next_loop: bool = False,
                  **compile_options: Any) -> int:
        """Play an animation from the next tick of the grid; returns its anim id.

        ``next_loop``: it is the next loop of the clip that just played, which keeps covering
        the face if it showed one (else the face shows until its first face keyframe).
        ``compile_options`` go to :func:`~cozmo_driver.anim.player.compile_clip`
        (e.g. ``start_head_angle_deg``, ``start_lift_height_mm``).
        """
        self.start(now)
        if not next_loop:
            if self._clip_face and self.player.playing:
                self._forget_screen()  # the face of the clip it replaces is on the screen
            self._clip_face = False
        first = max(self._next, self._slot(now) + 1)  # the next tick not sent and not yet due
        anim_id = self.player.play(clip, now, start=self.tick_time(first), **compile_options)
        self._clip_first_tick = first
        self._clip_ticks = self.player.clip.num_ticks if self.player.clip is not None else 0
        return anim_id

    def cancel_clip(self, now: float) -> List[Any]:
        """Stop the animation at once; returns the messages to send now."""
        out = self.player.cancel(now)
        if out:
            self._forget_screen()
        return out

    @property
    def animating(self) -> bool:
        return self.player.playing

    def sound_held(self, now: float, tail_s: float) -> bool:
        """Whether the robot may still hold sound the pacer sent (queued audio, not a clip's), and no
        clip's frames: its last ``OutputAudio`` went out less than ``tail_s`` (the robot's buffer and
        frames on their way) before ``now``, no clip started after it, and none ended less than
        ``tail_s`` ago."""
        if self._t0 is None or self.player.playing or self._clip_first_tick > self._sound_sent:
            return False
        return now - self.tick_time(self._sound_sent) < tail_s and now - self.clip_ended_at >= tail_s

    def _forget_screen(self) -> None:
        self._on_screen = None
        self._on_screen_image = None

    def forget_screen(self) -> None:
        """The screen's content is unknown (e.g. the robot reconnected): send the current image again."""
        self._forget_screen()

    # ------------------------------------------------------------------ state

    def active_at(self, k: int) -> bool:
        """Whether tick ``k`` sends an audio message (before its own display decision)."""
        return (self.always_on or self._queued > 0 or self._overlay is not None or bool(self._overlays)
                or k < self._last_active_tick + self.linger_ticks + 1)

    def next_deadline(self) -> Optional[float]:
        """When :meth:`tick` next has something to send (None: nothing until an input arrives)."""
        if self._t0 is None:
            return None
        if self.player.playing:
            return self.tick_time(self._next)
        if self.active_at(self._next) or self._wants_display():
            return self.tick_time(self._next)
        if self._on_screen is not None:
            return self.tick_time(max(self._next, self._last_display_tick + self.refresh_ticks))
        return None

    def _first_busy_tick(self) -> float:
        """The tick :meth:`next_deadline` names, as an index (inf: none)."""
        if self.player.playing or self.active_at(self._next) or self._wants_display():
            return self._next
        if self._on_screen is not None:
            return max(self._next, self._last_display_tick + self.refresh_ticks)
        return math.inf

    def _wants_display(self) -> bool:
        if self._overlay is None and not self._overlays and self._faces:
            return True
        desired = self._overlay.image if self._overlay is not None else (
            self._overlays[0].image if self._overlays else self._face)
        return desired is not None and desired is not self._on_screen_image

    # ------------------------------------------------------------------ ticking

    def tick(self, now: float) -> List[Any]:
        """The messages of every tick due by ``now``, in order."""
        self.start(now)
        out: List[Any] = []
        slot = self._slot(now)
        due = slot + 1
        # Ticks that were idle when the last call ended stay idle: resume on the current slot.
        resume = min(slot, self._quiet_until)
        if resume > self._next:
            self.stats.ticks += int(resume - self._next)
            self._next = int(resume)
        try:
            return self._tick(now, slot, due, out)
        finally:
            self._quiet_until = self._first_busy_tick()

    def _tick(self, now: float, slot: int, due: int, out: List[Any]) -> List[Any]:
        self.clip_span = (0, 0)
        self.clip_faces = []
        if self.player.playing:
            # The pacer's own ticks up to the clip's first one, then the clip's.
            self._emit_own(min(due, self._clip_first_tick), slot, out)
            start = len(out)
            out.extend(self.player.tick(now, self._underlay))
            self.clip_span = (start, len(out))
            if self.player.shown_display and not self._clip_face:
                self._clip_face = True  # its own face from now on: the face layer is covered
                self._cover_faces()
            if self.player.playing:
                self._next = max(self._next, due)
                return out
            # Finished: carry on after its last tick, and show the face again.
            self.clip_ended_at = now
            self._next = max(self._next, self._clip_first_tick + self._clip_ticks)
            if self._clip_face:
                self._forget_screen()
        else:
            out.extend(self.player.tick(now))  # cancel messages still pending, if any
        self._emit_own(due, slot, out)
        return out

    def _emit_own(self, due: int, slot: int, out: List[Any]) -> None:
        """The pacer's own ticks from the next one up to (not including) ``due``."""
        if due <= self._next:
            return
        if not self.active_at(self._next) and not self._wants_display():
            # Idle: nothing to send for the ticks in between, and they are not late.
            self.stats.ticks += due - 1 - self._next
            self._next = due - 1
        latest = due - 1
        early, self._early = self._early, 0  # ticks a shift brought forward are not late
        for k in range(self._next, due):
            if k < slot - early and (self.active_at(k) or self._wants_display()):
                self.stats.underruns += 1
            self._emit(k, k == latest, out)
        self._next = due

    def _advance_overlay(self, k: int) -> None:
        ov = self._overlay
        if ov is not None and k >= ov.until:
            if not ov.shown:
                self.stats.display_dropped += 1
            self._overlay = ov = None
        if ov is None and self._overlays:
            ov = self._overlays.popleft()
            ticks = 1 if ov.duration_s is None else max(1, int(round(ov.duration_s * TICKS_PER_SECOND)))
            ov.until = k + ticks
            self._overlay = ov

    def _underlay(self, k: int, latest: bool) -> Optional[Any]:
        """The face layer's image for tick ``k`` of a clip that has shown no face of its own
        (:meth:`AnimationPlayer.tick`'s ``underlay``), or None: not while an image waits."""
        if self._clip_face or self._overlay is not None or self._overlays:
            return None
        display = self._face_frame(self._clip_first_tick + k, latest)
        if display is not None:
            self.clip_faces.append(display)
        return display

    def _face_frame(self, k: int, latest: bool) -> Optional[Any]:
        """Tick ``k``'s DisplayImage of the face layer, or None: the FIFO's next frame."""
        next_face = False
        if self._faces:
            self._face = self._faces.popleft()  # this tick's face frame, late or not
            next_face = True
        return self._display(self._face, k, latest or next_face)

    def _display(self, desired: Optional[_Image], k: int, send: bool) -> Optional[Any]:
        """The DisplayImage showing ``desired`` at tick ``k``, when ``send`` and it is not on the
        screen (or is due for a refresh); else None."""
        if not send or desired is None:
            return None
        display = None
        refresh = k - self._last_display_tick >= self.refresh_ticks
        if desired is not self._on_screen_image or refresh:
            data = desired.data
            if data != self._on_screen or refresh:
                display = msgs.DisplayImage(image=data)
                self.stats.display_frames += 1
                if data == self._on_screen:
                    self.stats.refreshes += 1
                self._on_screen = data
                self._last_display_tick = k
            self._on_screen_image = desired
        return display

    def _emit(self, k: int, latest: bool, out: List[Any]) -> None:
        stats = self.stats
        stats.ticks += 1
        self._advance_overlay(k)
        # this tick's DisplayImage, sent after its audio message
        if self._overlay is not None:
            self._cover_faces()
            display = self._display(self._overlay.image, k, latest)
        else:
            display = self._face_frame(k, latest)
        if self._overlay is not None and latest:
            self._overlay.shown = True
        audio = self._take_audio()
        if audio is not None and k - 1 != self._sound_tick and self.lead_in is not None:
            lead = max(0, int(self.lead_in()))  # a sound begins: the robot's buffer first
            out.extend(msgs.OutputSilence() for _ in range(lead))
            stats.silence_frames += lead
            stats.lead_in_frames += lead
        if audio is not None or (self._queued and not self._final):
            self._sound_tick = k
        if audio is not None:
            out.append(msgs.OutputAudio(samples=audio))
            stats.audio_frames += 1
            self._last_active_tick = k
            self._sound_sent = k
        elif display is not None or self.active_at(k):
            out.append(msgs.OutputSilence())
            stats.silence_frames += 1
            if self._queued and not self._final:
                stats.audio_starved += 1
        if display is not None:  # after its frame's audio message, which the robot plays first
            out.append(display)
        if display is not None or self._overlay is not None:
            self._last_active_tick = k

    def _take_audio(self) -> Optional[bytes]:
        """The next frame's 744 companded samples, or None (nothing, or a non-final stream short of a frame)."""
        if self._queued == 0 or (self._queued < SAMPLES_PER_FRAME and not self._final):
            return None
        need = min(SAMPLES_PER_FRAME, self._queued)
        parts = []
        while need:
            chunk = self._chunks[0]
            take = min(need, chunk.size - self._chunk_pos)
            parts.append(chunk[self._chunk_pos:self._chunk_pos + take])
            self._chunk_pos += take
            need -= take
            if self._chunk_pos == chunk.size:
                self._chunks.popleft()
                self._chunk_pos = 0
        frame = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self._queued -= frame.size
        codes = encode_ulaw(frame)
        if len(codes) < SAMPLES_PER_FRAME:
            codes += bytes([SILENCE_CODE]) * (SAMPLES_PER_FRAME - len(codes))
        return codes
