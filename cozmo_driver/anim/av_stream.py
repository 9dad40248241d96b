"""Audio, display and animations paced on the robot client's I/O thread: :class:`AVStream`.

One :class:`~cozmo_driver.anim.av_pacer.AVPacer` per robot, run on the I/O
thread of the robot client (the asyncio loop of the UDP adapter), ticked by
one timer re-armed at the pacer's ``next_deadline()`` (``Robot.schedule``):
the loop wakes within about a millisecond of each 1/30 s tick, the messages go
straight to the session and out, and the grid is computed from its origin, so
nothing drifts. The executor (or any thread) only hands inputs over with
``Robot.call_soon``; results come back through ``on_report``, called on the
I/O thread (keep it short: the driver appends to a deque and triggers a guard
condition).

Layers on the screen, highest first: an animation (from its first face or sprite
on: before, the layers below show), then the image of
:meth:`AVStream.show_image` (each replaces the one before; shown for its
duration or until replaced), then the face of :meth:`AVStream.set_face`.
Faces are frames of a stream (the face node renders at 30 fps on its own clock):
each goes into the pacer's small FIFO and out on a tick of its own, in order, so
that none is lost to the two clocks' phase; the same face again (a keep-alive)
is not queued; a full FIFO drops its oldest frame, counted
(:class:`~cozmo_driver.anim.av_pacer.AVPacer`, Face frames). While the timer is
armed for the pacer's next tick (the pacer is active: a face streaming), a face
handed over waits in an inbox that the tick empties into the FIFO first, instead
of waking the I/O thread for it: one wake-up per frame, not two; otherwise it is
handed over with ``call_soon`` as every other input.
A face source (:meth:`AVStream.set_face_source`: a face node of the same process)
is pulled instead, on the I/O thread at each tick of the grid, and what it gives
goes out on that very tick: the face is rendered at the tick that sends it, with
no thread of its own to wake.
A timed image is a pacer overlay (the stream carries a frame every tick while it
shows); an image "until replaced" takes the face's place in the pacer instead
(sent once, then refreshed every ``refresh_s``: no traffic in between), and the
face returns when the image is cleared or replaced by a timed one. With no face,
the screen is blanked where the face would come back (after a timed image, a
cleared image or a cancelled animation).

Audio: :meth:`AVStream.play_audio` (a goal) clears what is queued and plays
its samples (cancelled, preempted or stopped, it drops what it has left, and the robot what it
holds of it: a stream queued behind it plays on); :meth:`AVStream.stream_audio` appends to the queue in arrival
order (nothing is mixed; a stop drops it, and the robot what it holds of it), and
:meth:`AVStream.stream_audio_at` does so with samples at another rate: the chunks of one stream go through one
:class:`~cozmo_driver.protocol.audio.StreamResampler` (no seams between them),
and the samples it holds back for its filter are sent when the stream runs dry
or ends, so the whole sound plays (a chunk at another rate, or one more than
``stream_gap_s`` after the one before, starts a new stream). A stream starts
once ``stream_prebuffer_s`` is buffered, so that chunks arriving in real time
never leave the robot short; when it runs dry (its end, or chunks later than the
buffer) its last partial frame is sent at once, padded with silence, and the
next chunk starts a new stream (buffered again); a stream shorter than the buffer is played when no
chunk came for ``stream_timeout_s``. Both follow the buffer unless given
(:func:`stream_timing`), so that a chunk as late as the buffer absorbs neither
cuts a stream short nor restarts its resampler. Sound that would queue more than
``max_queue_s`` of the stream is dropped (counted in seconds; a chunk of
:meth:`AVStream.stream_audio` whole, one of :meth:`AVStream.stream_audio_at` by the
RESAMPLE_PIECE_S pieces it is resampled in: the queue fills to the limit and the rest
of that chunk is dropped; a ``play_audio`` goal's audio,
which the stream waits behind, does not count). While an animation plays, queued audio
and images wait.

A link that cannot carry the stream (a lossy Wi-Fi) makes it pile up in the
session's background queue, behind every command (see the session). Once a second
of it (``BACKLOG_MAX`` packets) waits there, ticks go out without their face image
and their silence (counted; the pacer sends the current image again once the queue
has drained), so the screen shows the latest face late by at most about that, not
by the whole pile; sound and animations (every frame of a clip: the robot plays
one per audio message) are always sent.

Treads: ``tread_hold()``, when given, says (on the I/O thread, before each tick of a
clip that drives the treads) why no clip may drive them now and why none may drive
them forwards (the driver: the robot picked up, its cliff sensor over an edge); such a
clip is cancelled before the tick (its stops sent: ``DriveWheels(0, 0)``), reported
as not successful with "interrupted: " and that reason.

Goals (audio and animation) are identified by a token of the caller's; a new
one of the same kind preempts the one playing, which is reported as not
successful with the reason. When the robot is lost, or :meth:`AVStream.stop`
is called, every goal ends unsuccessfully with the reason, and queued audio
and images are dropped; the face is kept and shown again after a reconnection (or
:meth:`AVStream.start`); with no face the screen is blanked then after a loss (what reached the
robot is not known: a clip's frame cut mid-way, say) or where a stop cut a clip or an image (not
left showing it for good, as after a cancel).
Until the robot is back (or :meth:`AVStream.start` is called again) the pacer is
paused: no face is queued (the newest is the face), and once it is the grid goes
on from the current tick with that face, not with the ticks of the outage.

A tick that raises (a driver bug) ends the goals it played unsuccessfully, saying
that the stream failed and naming the error, drops what was queued as a loss does,
and arms the timer again: no goal waits for ever, the next ones play. The first
failure is logged with its traceback, the others counted (``stats.tick_errors``) and
logged at most every 5 s (:func:`_stream_failed`). So does the start or the cancel of a
goal that raises on the I/O thread, and the goal ends so too (:func:`_run_goal`), and
any other input of the stream that raises there (:func:`_run_input`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, List, Optional, Sequence, Tuple

import numpy as np

from ..client.link import LinkState, LinkStateChanged
from ..face.procedural import FaceRenderer
from ..protocol.audio import SAMPLE_RATE, SAMPLES_PER_FRAME, StreamResampler
from ..protocol import messages as msgs
from ..protocol.display import BLANK_IMAGE
from ..protocol.errors import CozmoError
from ..protocol.session import MessageReceived
from .av_pacer import AVPacer
from .player import TICK_S, CompiledClip
from .robot_buffer import HIGH_FRAMES, BufferGuard

__all__ = ["AVStream", "AVReport", "AVStreamStats", "stream_timing"]

#: stream packets waiting unsent in the session's background queue (about a second of the
#: stream) from which faces and silence are skipped
BACKLOG_MAX = 60
#: stream_audio_at resamples this much of the chunks waiting (s of their samples) a turn of
#: the I/O thread's loop (about 2.5 ms at 48 kHz here, where a robot state comes every 30 ms)
RESAMPLE_PIECE_S = 0.1
#: s after a clip's last tick went out within which the robot may still hold its frames (its
#: buffer, up to HIGH_FRAMES, and a frame or two on their way): a sound cancelled then is not
#: dropped on the robot, which would cut the clip's end
CLIP_TAIL_S = (HIGH_FRAMES + 2) * TICK_S

logger = logging.getLogger("cozmo.anim.av")

_AUDIO_PROGRESS, _AUDIO_DONE = "audio_progress", "audio_done"
_CLIP_PROGRESS, _CLIP_DONE = "clip_progress", "clip_done"


@dataclass
class AVReport:
    """What the I/O thread tells the caller about a goal."""

    kind: str  # "audio_progress", "audio_done", "clip_progress" or "clip_done"
    token: Any
    progress: float = 0.0
    elapsed_s: float = 0.0
    clip: str = ""
    success: bool = False
    message: str = ""

    @property
    def done(self) -> bool:
        return self.kind in (_AUDIO_DONE, _CLIP_DONE)


@dataclass
class AVStreamStats:
    """Counters of an :class:`AVStream` besides the pacer's and the player's."""

    stream_chunks: int = 0
    #: times a stream's queue ran out (its end, or chunks later than the buffer)
    stream_ran_dry: int = 0
    #: seconds of streamed audio dropped (robot not connected, or the queue full)
    stream_dropped_s: float = 0.0
    images_shown: int = 0
    faces_set: int = 0
    #: frames taken from the face source (set_face_source), and the calls of it that failed
    faces_pulled: int = 0
    face_source_errors: int = 0
    #: faces that came while an image shown until replaced held the face's place
    faces_under_image: int = 0
    send_errors: int = 0
    #: face images and silence frames not sent because the link was BACKLOG_MAX behind
    skipped_backlog: int = 0
    #: how late the timer fired after a tick was due (s)
    tick_late_max_s: float = 0.0
    tick_late_sum_s: float = 0.0
    timer_fires: int = 0
    #: ticks that raised (a driver bug): each ended the goals it played (see _stream_failed)
    tick_errors: int = 0
    #: inputs that raised on the I/O thread (a driver bug): a goal's start or cancel (see
    #: _run_goal), a face, an image, a face source, a stream's audio (see _run_input)
    input_errors: int = 0
    audio_goals: int = 0
    clip_goals: int = 0


@dataclass
class _AudioGoal:
    token: Any
    frames_needed: int
    frames_at_start: int
    accepted_at: float
    started_at: Optional[float] = None
    last_report: float = -math.inf
    samples: int = 0  # the goal's samples (at SAMPLE_RATE), queued first
    clips_at_start: int = 0  # the clips the pacer had started when it was accepted


@dataclass
class _ClipGoal:
    token: Any
    compiled: CompiledClip
    name: str
    loops: int
    stop_messages: List[Any] = field(default_factory=list)
    again: Optional[CompiledClip] = None  # the loops after the first (None: compiled)
    loop_index: int = 0
    last_report: float = -math.inf


class AVStream:
    """See the module docstring. ``robot`` is a :class:`~cozmo_driver.client.robot.Robot`
    (or anything with ``clock``, ``call_soon``, ``schedule``, ``link``, ``add_listener`` and
    ``remove_listener``)."""

    def __init__(self, robot: Any, on_report: Callable[[AVReport], None], *,
                 renderer: Optional[FaceRenderer] = None, linger_s: float = 0.5, refresh_s: float = 5.0,
                 face_queue: int = 6, stream_prebuffer_s: float = 0.1, stream_timeout_s: Optional[float] = None,
                 max_queue_s: float = 30.0, progress_period_s: float = 0.1,
                 stream_gap_s: Optional[float] = None,
                 tread_hold: Optional[Callable[[], Tuple[Optional[str], Optional[str]]]] = None) -> None:
        self.robot = robot
        self.on_report = on_report
        self.tread_hold = tread_hold  # (see the module docstring, Treads)
        self.pacer = AVPacer(linger_s=linger_s, refresh_s=refresh_s, face_queue=face_queue,
                             renderer=renderer or FaceRenderer())
        self.pacer.pause()  # until it runs and the robot is ready (_do_start, _on_link_event)
        self.stats = AVStreamStats()
        self.guard = BufferGuard()  # the robot's buffer, from its AnimationState
        self.pacer.lead_in = self.guard.lead_in  # (a sound that begins: what the robot lacks first)
        self.stream_prebuffer = max(1, int(round(stream_prebuffer_s * SAMPLE_RATE)))
        self.stream_timeout_s, self.stream_gap_s = stream_timing(stream_prebuffer_s, stream_timeout_s, stream_gap_s)
        self.max_queue_s = float(max_queue_s)
        self.progress_period_s = float(progress_period_s)
        # reports go on the grid's ticks: one due within half a tick of the period goes on
        # that tick (0.1 s is 3 ticks; a tick a hair early waited for the 4th: 7.5 a second)
        self._report_after_s = max(0.0, self.progress_period_s - TICK_S / 2)
        # Faces handed over while the timer is armed for the pacer's next tick, which takes
        # them (set_face): under the inbox lock, as the two flags.
        self._inbox_lock = threading.Lock()
        self._face_inbox: Deque[Optional[bytes]] = deque()
        self._tick_takes_faces = False  # the armed timer fires by the pacer's next tick
        self._take_posted = False       # a _take_faces is posted and has not run yet
        # Everything below is touched on the I/O thread only.
        self._running = False
        self._timer = None
        self._timer_at: Optional[float] = None
        self._audio: Optional[_AudioGoal] = None
        self._clip: Optional[_ClipGoal] = None
        self._face: Optional[bytes] = None  # the face layer
        self._face_source: Optional[Callable[[float], Optional[bytes]]] = None
        self._pull_at: Optional[float] = None  # the grid tick the armed timer pulls at
        self._held: Optional[bytes] = None  # an image shown until replaced (in the face's place)
        self._cut = False  # a stop cut a clip or an image, which may stay on the robot's screen (_resume)
        self._arm_base: Optional[float] = None  # when the armed deadline counts as due
        self._prebuffer: List[np.ndarray] = []
        self._prebuffered = 0
        self._streaming = False
        self._last_chunk_at = -math.inf
        self._intake = _Resampling(self.stream_gap_s)  # stream_audio_at's chunks
        self._resampling = False  # _resample_piece is queued on the I/O thread
        self._warned_at = -math.inf
        self._backlog_warned_at = -math.inf
        self._tick_warned_at = -math.inf  # (robot clock: _stream_failed)

    # ------------------------------------------------------------------ any thread

    def _post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` on the I/O thread; while that thread is not running (before the robot
        client starts), here: nothing else touches the stream then."""
        try:
            self.robot.call_soon(fn, *args)
        except CozmoError:  # the I/O thread is not running
            fn(*args)

    def start(self) -> None:
        """Start pacing (the robot client must be running)."""
        try:
            self.robot.call_soon(self._do_start)
        except CozmoError:
            logger.warning("display/audio: the robot client is not running: nothing is paced")

    def stop(self, reason: str = "stopped") -> None:
        """Stop pacing: goals end with ``reason``, queued audio and images are dropped, a
        playing animation is aborted on the robot. Runs before anything posted later."""
        try:
            self.robot.call_soon(self._do_stop, reason)
        except CozmoError:  # the I/O thread is not running
            self._do_stop(reason, send=False)

    def set_face(self, data: Optional[bytes]) -> None:
        """The next frame of the face layer (``DisplayImage`` bytes), or None for none."""
        with self._inbox_lock:
            self._face_inbox.append(data)
            if self._tick_takes_faces or self._take_posted:
                return  # the next tick (or the call posted) takes it, in order
            self._take_posted = True
        self._post(_run_input, self, "set_face", self._take_faces)

    def set_face_source(self, source: Optional[Callable[[float], Optional[bytes]]]) -> None:
        """Pull the face layer's frames from ``source`` (None: stop): while the stream runs
        and the robot is ready, ``source(now)`` is called on the I/O thread at every tick of
        the pacer's grid and returns the face's next frame (``DisplayImage`` bytes), which
        goes out on that tick, or None: nothing new. Faces handed over with
        :meth:`set_face` still come in besides."""
        self._post(_run_input, self, "set_face_source", self._do_set_face_source, source)

    def show_image(self, data: Optional[bytes], duration_s: Optional[float] = None) -> None:
        """Show ``data`` over the face for ``duration_s`` (None or 0: until replaced),
        replacing the image shown; None clears it."""
        self._post(_run_input, self, "show_image", self._do_show_image, data, duration_s)

    def play_audio(self, token: Any, pcm: np.ndarray) -> None:
        """Play mono int16 samples at 22 320 Hz as goal ``token`` (clears queued audio)."""
        self._post(_run_goal, self, _AUDIO_DONE, self._do_play_audio, token, np.asarray(pcm, dtype=np.int16))

    def cancel_audio(self, token: Any, reason: str = "cancelled") -> None:
        self._post(_run_goal, self, _AUDIO_DONE, self._do_cancel_audio, token, reason)

    def stream_audio(self, pcm: np.ndarray) -> None:
        """Append mono int16 samples at 22 320 Hz to the audio queue (a stream)."""
        self._post(_run_input, self, "stream_audio", self._do_stream_audio, np.asarray(pcm, dtype=np.int16))

    def stream_audio_at(self, pcm: np.ndarray, rate: int) -> None:
        """Append mono integer samples at ``rate`` Hz to the stream, resampled on the I/O
        thread (see the module docstring)."""
        self._post(_run_input, self, "stream_audio", self._do_stream_audio_at, np.asarray(pcm), int(rate))

    def play_clip(self, token: Any, compiled: CompiledClip, loops: int = 1,
                  stop_messages: Sequence[Any] = (), again: Optional[CompiledClip] = None) -> None:
        """Play ``compiled`` ``loops`` times as goal ``token`` (the loops after the first:
        ``again``, when given; see ``compile_loops``); ``stop_messages`` are sent besides the
        player's own if it is cancelled."""
        self._post(_run_goal, self, _CLIP_DONE, self._do_play_clip, token, compiled, max(1, int(loops)),
                   list(stop_messages), again)

    def cancel_clip(self, token: Any, reason: str = "cancelled") -> None:
        self._post(_run_goal, self, _CLIP_DONE, self._do_cancel_clip, token, reason)

    def cancel_clip_now(self, token: Any, reason: str) -> None:
        """:meth:`cancel_clip`, done on the I/O thread by the time this returns: a command
        posted next (``Robot.post`` goes out ahead of calls still queued) then comes after
        the clip's stops, which would otherwise stop it (a motion goal that takes a motor
        from the clip). Where the I/O thread cannot be waited for, as :meth:`cancel_clip`."""
        call = getattr(getattr(self.robot, "transport", None), "call", None)
        if call is not None:
            try:
                call(_run_goal, self, _CLIP_DONE, self._do_cancel_clip, token, reason, timeout=1.0)
                return
            except (CozmoError, TimeoutError, concurrent.futures.TimeoutError):
                pass  # (then as below: a second cancel of one clip does nothing)
        self.cancel_clip(token, reason)

    def counters(self) -> dict:
        """A snapshot of every counter (read from any thread; values may be a tick apart)."""
        return _counters(self)

    # ------------------------------------------------------------------ I/O thread: plumbing

    def _ready(self) -> bool:
        return self.robot.link.state is LinkState.READY

    def _report(self, report: AVReport) -> None:
        try:
            self.on_report(report)
        except Exception:  # noqa: BLE001 - a report must never break the I/O thread
            logger.exception("AV report handler failed")

    def _send(self, messages: Sequence[Any], clip_span: Tuple[int, int] = (0, 0)) -> None:
        """``clip_span``: where a clip's messages are in ``messages`` (see _skip_backlogged)."""
        link = self.robot.link
        if messages and link.session.background_queue_length >= BACKLOG_MAX:
            messages = _skip_backlogged(self, messages, clip_span)
        for m in messages:
            try:
                link.send(m)
            except CozmoError as exc:
                self.stats.send_errors += 1
                now = time.monotonic()
                if now - self._warned_at > 5.0:
                    self._warned_at = now
                    logger.warning("display/audio: %s not sent: %s", m.NAME, exc)

    def _stream_deadline(self) -> Optional[float]:
        """When a stream that has not started yet plays as a short sound: stream_timeout_s
        after its last chunk (its samples prebuffered, or all still in the resampler)."""
        if self._prebuffered or (self._intake.resampler is not None and not self._streaming):
            return max(self._last_chunk_at, self._intake.arrived_at) + self.stream_timeout_s
        return None

    def _arm(self) -> None:
        """Re-arm the one timer at the pacer's next deadline (or the stream's timeout)."""
        deadline = self._pull_at = None
        if self._running and self._ready():
            deadline = self.pacer.next_deadline()
            stream = self._stream_deadline()
            if stream is not None:
                deadline = stream if deadline is None else min(deadline, stream)
            if self._face_source is not None:
                self._pull_at = self.pacer.next_grid_time(self.robot.clock())
                deadline = self._pull_at if deadline is None else min(deadline, self._pull_at)
        if deadline != self._timer_at or (deadline is not None and self._timer is None):
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._timer_at = deadline
            if deadline is not None:
                # A deadline already past (the pacer resuming after an idle time) is due now.
                self._arm_base = max(deadline, self.robot.clock())
                self._timer = self.robot.schedule(deadline, self._on_timer)
        next_tick = self.pacer.next_tick_time()
        with self._inbox_lock:
            self._tick_takes_faces = takes = (self._timer is not None and next_tick is not None
                                              and deadline is not None and deadline <= next_tick)
            post = bool(self._face_inbox) and not takes and not self._take_posted
            self._take_posted = self._take_posted or post
        if post:  # faces handed over for a tick that is no longer coming
            self._post(self._take_faces)

    def _take_faces(self, arm: bool = True) -> None:
        """The faces handed over since the last call, in order (then re-arm the timer)."""
        with self._inbox_lock:
            faces = list(self._face_inbox)
            self._face_inbox.clear()
            self._take_posted = False
        for data in faces:
            self._set_face(data)
        if arm:
            self._arm()

    def _on_timer(self) -> None:
        due, self._timer, self._timer_at = self._arm_base, None, None
        pull_at, self._pull_at = self._pull_at, None
        if not self._running or not self._ready():
            self._arm()  # no tick: faces handed over for one are taken by a call of their own
            return
        now = self.robot.clock()
        if due is not None and now >= due:
            late = now - due
            s = self.stats
            s.timer_fires += 1
            s.tick_late_sum_s += late
            if late > s.tick_late_max_s:
                s.tick_late_max_s = late
        try:
            self._check_stream(now)
            self._take_faces(arm=False)
            if pull_at is not None and now >= pull_at:
                self._pull_face(now)
            held = _treads_held(self._clip, self.tread_hold, self.pacer.player, now)
            if held is not None:
                self._do_cancel_clip(self._clip.token, held)
            messages = self.pacer.tick(now)
            self._send(messages, self.pacer.clip_span)
            self.pacer.player.take_events()
            _after_tick(self, now)
        except Exception as exc:  # noqa: BLE001 - a tick must never leave the stream without its timer
            _stream_failed(self, exc, now)
            return
        self._arm()

    def _pull_face(self, now: float) -> None:
        """This tick's frame of the face source, into the pacer's FIFO ahead of the tick."""
        try:
            data = self._face_source(now)
        except Exception:  # noqa: BLE001 - a face source must never break the I/O thread
            self.stats.face_source_errors += 1
            if now - self._warned_at > 5.0:
                self._warned_at = now
                logger.exception("display: the face source failed (the face stays as it was)")
            return
        if data is not None:
            self.stats.faces_pulled += 1
            self._set_face(data)

    def _on_link_event(self, event: Any) -> None:
        if not isinstance(event, LinkStateChanged):
            return
        if event.state is LinkState.READY:
            self._resume()
            self.guard.reset()
        else:  # lost: what the robot shows is not known (frames sent into the silence), blanked if faceless
            self._cut = self._cut or event.state is LinkState.LOST
            self._drop_all(f"lost the connection to the robot ({event.reason})", send=False)
            self.pacer.pause()
        self._arm()

    def _on_anim_state(self, event: Any) -> None:
        """AnimationState (30 a second once playback is on): what the robot holds, and the grid moves a tick
        when that ran full or low (:mod:`~cozmo_driver.anim.robot_buffer`), not while a clip plays on its own grid."""
        if not isinstance(event, MessageReceived) or not self._running:
            return  # (link events come to every listener)
        sent = self.robot.link.stream_frames_sent
        if sent is None or self.pacer.player.playing:
            return None if sent is None else self.guard.note(sent, event.message.num_audio_frames_played)
        ticks = self.guard.on_state(sent, event.message.num_audio_frames_played, self.robot.clock())
        if ticks:
            self.pacer.shift(ticks)
            self._arm()

    # ------------------------------------------------------------------ I/O thread: inputs

    def _do_start(self) -> None:
        if self._running:
            return
        self._running = True
        self.robot.add_listener(self._on_link_event, messages=())  # the link's events only
        self.robot.add_listener(self._on_anim_state, messages=("AnimationState",))
        self.pacer.start(self.robot.clock())
        if self._ready():
            self._resume()  # else once it is (_on_link_event)
        self._arm()

    def _resume(self) -> None:
        """From now, showing the newest face (the screen unknown); with none, a blank screen after a
        loss, or where a stop cut a clip or an image (its frame would stay on the robot's screen for good)."""
        self.pacer.resume(self.robot.clock())
        if self._cut:
            self._cut = False
            self._blank_if_faceless()

    def _do_stop(self, reason: str, send: bool = True) -> None:
        send = send and self._running
        if self._running:
            for listener in (self._on_link_event, self._on_anim_state):
                try:
                    self.robot.remove_listener(listener)
                except ValueError:
                    pass
        self._drop_all(reason, send=send and self._ready())
        self.pacer.pause()
        self._running = False
        self._arm()

    def _drop_all(self, reason: str, send: bool) -> None:
        now = self.robot.clock()
        if self._clip is not None or self.pacer.animating or self.pacer.images_queued or self._held is not None:
            self._cut = True
        if self._clip is not None:
            goal, self._clip = self._clip, None
            stops = self.pacer.cancel_clip(now) + goal.stop_messages
            if send:
                self._send(stops)
            self._report(AVReport(_CLIP_DONE, goal.token, self._clip_progress(goal, now), clip=goal.name,
                                  success=False, message=reason))
        else:
            stops = self.pacer.cancel_clip(now)
            if send:
                self._send(stops)
        if self._audio is not None:
            goal, self._audio = self._audio, None
            self._report(AVReport(_AUDIO_DONE, goal.token, self._audio_progress(goal),
                                  self._elapsed(goal, now), success=False, message=reason))
            send = send and not _cut_short(self, goal, send)
        _cut_stream(self, send)  # audio/pcm's, and a sound's that just ended
        self.pacer.clear_images()
        if self._held is not None:
            self._held = None
            self._base_layer()
        self._reset_stream()

    def _base_layer(self) -> None:
        """The pacer's face slot: the image held until replaced, else the face."""
        self.pacer.set_face(self._held if self._held is not None else self._face)

    def _blank_if_faceless(self) -> None:
        """Where the face would show again but there is none: a blank screen (queued after
        any image showing), not the last picture left behind."""
        if self._face is None and self._held is None:
            self.pacer.show_image(BLANK_IMAGE, None)

    def _set_face(self, data: Optional[bytes]) -> None:
        self.stats.faces_set += 1
        if data is not None and data == self._face:
            return  # the same face again (a keep-alive): shown already, or waiting
        had_face, self._face = self._face is not None, data
        if self._held is not None:
            if data is not None:
                self.stats.faces_under_image += 1
        elif data is None:
            self._base_layer()
            if had_face:
                self._blank_if_faceless()
        else:
            self.pacer.queue_face(data)

    def _do_set_face_source(self, source: Optional[Callable[[float], Optional[bytes]]]) -> None:
        self._face_source = source
        self._arm()

    def _do_show_image(self, data: Optional[bytes], duration_s: Optional[float]) -> None:
        self.pacer.clear_images()
        held_before = self._held is not None
        self._held = data if data is not None and not duration_s else None
        if data is not None:
            self.stats.images_shown += 1
        if self._held is not None or held_before:
            self._base_layer()
        if data is not None and duration_s:
            self.pacer.show_image(data, duration_s)
        if self._held is None:
            self._blank_if_faceless()
        self._arm()

    def _do_play_audio(self, token: Any, pcm: np.ndarray) -> None:
        now = self.robot.clock()
        self.stats.audio_goals += 1
        if not self._running or not self._ready():
            self._report(AVReport(_AUDIO_DONE, token, message="not connected to the robot"))
            return
        if self._audio is not None:
            old, self._audio = self._audio, None
            self._report(AVReport(_AUDIO_DONE, old.token, self._audio_progress(old), self._elapsed(old, now),
                                  success=False, message="preempted by a new play_audio goal"))
            _cut_short(self, old)
        self.pacer.clear_audio()
        self._reset_stream()
        frames = -(-pcm.size // SAMPLES_PER_FRAME)
        goal = _AudioGoal(token, frames, self.pacer.stats.audio_frames, now, samples=int(pcm.size),
                          clips_at_start=self.pacer.player.stats.clips_started)
        if frames == 0:
            self._report(AVReport(_AUDIO_DONE, token, 1.0, success=True, message="nothing to play (no samples)"))
            return
        self.pacer.queue_audio(pcm, SAMPLE_RATE, final=True)
        self._audio = goal
        self._report(AVReport(_AUDIO_PROGRESS, token, 0.0, 0.0))
        goal.last_report = now
        self._arm()

    def _do_cancel_audio(self, token: Any, reason: str) -> None:
        goal = self._audio
        if goal is None or goal.token != token:
            return
        self._audio = None
        now = self.robot.clock()
        _cut_short(self, goal)  # (a stream queued behind it plays now)
        self._report(AVReport(_AUDIO_DONE, token, self._audio_progress(goal), self._elapsed(goal, now),
                              success=False, message=reason))
        self._arm()

    def _do_stream_audio(self, pcm: np.ndarray) -> None:
        self.stats.stream_chunks += 1
        self._queue_stream(pcm)

    def _queue_stream(self, pcm: np.ndarray) -> None:
        s = self.stats
        seconds = pcm.size / SAMPLE_RATE
        if not self._running or not self._ready():
            s.stream_dropped_s += seconds
            return
        # the stream's own audio counts, not a play_audio goal's that it queues behind (a file
        # of more than max_queue_s had every chunk dropped)
        goal_s = _goal_queued(self._audio, self.pacer) / SAMPLE_RATE
        queued_s = max(0.0, self.pacer.audio_queued_s - goal_s) + self._prebuffered / SAMPLE_RATE
        if queued_s + seconds > self.max_queue_s:
            s.stream_dropped_s += seconds
            now = time.monotonic()
            if now - self._warned_at > 5.0:
                self._warned_at = now
                logger.warning("audio/pcm: sound dropped: the stream would queue more than %.0f s, "
                               "the most the driver keeps; %s", self.max_queue_s,
                               _why_queued(goal_s, self.pacer.animating))
            return
        self._last_chunk_at = self.robot.clock()
        if self._streaming:
            self.pacer.queue_audio(pcm, SAMPLE_RATE, final=False)
        else:
            self._prebuffer.append(pcm)
            self._prebuffered += pcm.size
            if self._prebuffered >= self.stream_prebuffer:
                self._start_stream(final=False)
        self._arm()

    def _do_stream_audio_at(self, pcm: np.ndarray, rate: int) -> None:
        self.stats.stream_chunks += 1
        self._intake.add(pcm, rate, self.robot.clock())
        if not self._resampling:
            self._resample_piece()

    def _resample_piece(self) -> None:
        """Resample RESAMPLE_PIECE_S of the chunks waiting, and leave the rest to the loop's
        next turn: the I/O thread reads the robot's datagrams in between (a long chunk in
        one go kept odom, IMU and tf waiting, 2 s for 120 s)."""
        self._resampling = False
        while self._intake.waiting:
            tail, out = self._intake.piece()
            if tail is not None and tail.size:
                self._queue_stream(tail)  # the stream before ends: its last samples first
            if out.size:
                self._queue_stream(out)
            else:
                self._arm()  # all of it is in the resampler: its deadline (_stream_deadline)
            if self._intake.waiting and self._running:
                self._resampling = True
                try:
                    self.robot.call_soon(self._resample_piece)
                except CozmoError:  # the I/O thread has stopped: no turns to leave room for
                    self._resampling = False
                    continue
                return

    def _flush_resampler(self) -> None:
        """The stream's resampler ends: the samples it held back for its filter are queued."""
        tail = self._intake.flush()
        if tail is not None and tail.size:
            self._queue_stream(tail)

    def _start_stream(self, final: bool) -> None:
        pcm = np.concatenate(self._prebuffer) if self._prebuffer else np.zeros(0, dtype=np.int16)
        self._prebuffer = []
        self._prebuffered = 0
        self.pacer.queue_audio(pcm, SAMPLE_RATE, final=final)
        self._streaming = not final

    def _check_stream(self, now: float) -> None:
        """Before a tick: a stream short of a frame has run dry (send its tail now, padded);
        a prebuffered one without a chunk for stream_timeout_s is a short sound (play it)."""
        def short() -> bool:
            return self.pacer.audio_queued_s * SAMPLE_RATE < SAMPLES_PER_FRAME - 0.5

        if self._streaming and not self.pacer.animating and short():
            self._flush_resampler()  # what the resampler holds back belongs to the stream
            if self._streaming and short():
                self.pacer.queue_audio(np.zeros(0, dtype=np.int16), SAMPLE_RATE, final=True)
                self._streaming = False
                self.stats.stream_ran_dry += 1
        deadline = self._stream_deadline()
        if deadline is not None and now >= deadline:
            self._flush_resampler()
            if self._prebuffered:
                self._start_stream(final=True)

    def _reset_stream(self) -> None:
        self._prebuffer = []
        self._prebuffered = 0
        self._streaming = False
        self._intake.reset()

    def _do_play_clip(self, token: Any, compiled: CompiledClip, loops: int, stops: List[Any],
                      again: Optional[CompiledClip] = None) -> None:
        now = self.robot.clock()
        self.stats.clip_goals += 1
        if not self._running or not self._ready():
            self._report(AVReport(_CLIP_DONE, token, clip=compiled.name, message="not connected to the robot"))
            return
        if self._clip is not None:
            old, self._clip = self._clip, None
            self._report(AVReport(_CLIP_DONE, old.token, self._clip_progress(old, now), clip=old.name,
                                  success=False, message=f"preempted by a new play_animation goal "
                                                         f"({compiled.name})"))
        self.pacer.play_clip(compiled, now)  # cancels the old one first, on the same grid
        goal = _ClipGoal(token, compiled, compiled.name, loops, stops, again)
        self._clip = goal
        self._report(AVReport(_CLIP_PROGRESS, token, 0.0, clip=goal.name))
        goal.last_report = now
        self._arm()

    def _do_cancel_clip(self, token: Any, reason: str) -> None:
        goal = self._clip
        if goal is None or goal.token != token:
            return
        self._clip = None
        now = self.robot.clock()
        progress = self._clip_progress(goal, now)
        stops = self.pacer.cancel_clip(now) + goal.stop_messages
        if self._ready():
            self._send(stops)
        self._blank_if_faceless()  # nothing to restore: not a frame of the clip left behind
        self._report(AVReport(_CLIP_DONE, token, progress, clip=goal.name, success=False, message=reason))
        self._arm()

    # ------------------------------------------------------------------ I/O thread: progress

    def _audio_progress(self, goal: _AudioGoal) -> float:
        sent = self.pacer.stats.audio_frames - goal.frames_at_start
        return min(1.0, max(0.0, sent / goal.frames_needed))

    @staticmethod
    def _elapsed(goal: _AudioGoal, now: float) -> float:
        return 0.0 if goal.started_at is None else max(0.0, now - goal.started_at)

    def _clip_progress(self, goal: _ClipGoal, now: float) -> float:
        player = self.pacer.player
        within = player.progress(now) if player.playing else 0.0
        return min(1.0, (goal.loop_index + within) / goal.loops)


def stream_timing(buffer_s: float, timeout_s: Optional[float] = None,
                  gap_s: Optional[float] = None) -> Tuple[float, float]:
    """``(stream_timeout_s, stream_gap_s)`` of an :class:`AVStream` buffering ``buffer_s``,
    those not given derived from it: a stream still buffering waits for its next chunk as
    long as the buffer (at least 0.15 s) before it plays what it has as a short sound, and a
    chunk starts a new stream only when it comes more than the buffer and 0.15 s (at least
    0.5 s) after the one before. Fixed at 0.15 and 0.5 s, a buffer above 0.15 s cut streams
    more, not less, and one above 0.5 s restarted the resampler (a click) at a late chunk
    it absorbed."""
    buffer_s = max(0.0, float(buffer_s))
    return (max(0.15, buffer_s) if timeout_s is None else float(timeout_s),
            max(0.5, buffer_s + 0.15) if gap_s is None else float(gap_s))


def _after_tick(av: AVStream, now: float) -> None:
    """After a tick of ``av``: its goals' progress reported, an audio goal whose last frame went out
    and a clip whose last loop ended reported done, a clip with loops left played again."""
    audio = av._audio
    if audio is not None:
        sent = av.pacer.stats.audio_frames - audio.frames_at_start
        if sent and audio.started_at is None:
            audio.started_at = now  # the first frame went out on this tick
        if sent >= audio.frames_needed:
            av._audio = None
            av._report(AVReport(_AUDIO_DONE, audio.token, 1.0, av._elapsed(audio, now),
                            success=True, message="played"))
        elif now - audio.last_report >= av._report_after_s:
            audio.last_report = now
            av._report(AVReport(_AUDIO_PROGRESS, audio.token, av._audio_progress(audio),
                            av._elapsed(audio, now)))
    clip = av._clip
    if clip is not None:
        if not av.pacer.animating:
            clip.loop_index += 1
            if clip.loop_index < clip.loops:
                av.pacer.play_clip(clip.again or clip.compiled, now, next_loop=True)  # seamless
            else:
                av._clip = None
                loops = f" ({clip.loops} times)" if clip.loops > 1 else ""
                av._report(AVReport(_CLIP_DONE, clip.token, 1.0, clip=clip.name, success=True,
                                message=f"played {clip.name}{loops}"))
                return
        if now - clip.last_report >= av._report_after_s:
            clip.last_report = now
            av._report(AVReport(_CLIP_PROGRESS, clip.token, av._clip_progress(clip, now),
                            clip=clip.name))


def _run_goal(av: AVStream, kind: str, fn: Callable[..., None], token: Any, *args: Any) -> None:
    """``fn(token, *args)`` on the I/O thread: the start or the cancel of goal ``token`` (its
    ``kind`` of report: _AUDIO_DONE, _CLIP_DONE). Where it raises (a driver bug), the goal ends
    aborted saying so, as a failed tick's goals do (:func:`_stream_failed`), not never."""
    try:
        fn(token, *args)
    except Exception as exc:  # noqa: BLE001 - the goal must end and the stream play on
        _stream_failed(av, exc, av.robot.clock(), (kind, token, fn.__name__.replace("_do_", "", 1)))


def _run_input(av: AVStream, name: str, fn: Callable[..., None], *args: Any) -> None:
    """``fn(*args)`` on the I/O thread: input ``name`` of the stream that is not a goal's
    ("show_image", "set_face", ...). Where it raises (a driver bug), the stream recovers as from a
    failed tick (:func:`_stream_failed`): the raise left it half-changed, perhaps without its timer."""
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the stream must play on
        _stream_failed(av, exc, av.robot.clock(), (None, None, name))


def _stream_failed(av: AVStream, exc: Exception, now: float,
                   goal: Optional[Tuple[Optional[str], Any, str]] = None) -> None:
    """A tick of ``av`` raised ``exc`` (a driver bug) at ``now``, or, with ``goal`` (its kind of
    report, its token, the input: "play_clip", ...), the input of a goal did (:func:`_run_goal`),
    or another input did (its kind and token None: :func:`_run_input`):
    the goals playing end aborted saying so (first, the pacer left out: it may be what is broken),
    and that goal too, what was queued is dropped and stopped on the robot (as at a loss:
    :meth:`AVStream._drop_all`, then the clip goal's own stops), and the timer is armed again, so
    that no goal waits for ever and the next ones play. The first failure of a tick, and of an
    input, is logged with its traceback, the ones after it at most one line every 5 s, counted
    (``stats.tick_errors``, ``stats.input_errors``). A tick that fails before the pacer's grid
    moves on comes again on the grid's next tick (1/30 s), not at once (a busy loop)."""
    s = av.stats
    if goal is None:
        s.tick_errors += 1
        count, what = s.tick_errors, "a tick of the stream"
    else:
        s.input_errors += 1
        count, what = s.input_errors, f"the {goal[2]} of a goal" if goal[0] else f"the stream's {goal[2]} input"
    say = count == 1 or now - av._tick_warned_at >= 5.0
    if count == 1:
        av._tick_warned_at = now
        logger.error("display/audio: %s failed (a driver bug: please report it with this traceback); the goals "
                     "playing end aborted", what, exc_info=exc)
    elif say:
        av._tick_warned_at = now
        logger.error("display/audio: %s failed again (%d times so far; the first one's traceback is logged "
                     "above): %s: %s", what, count, type(exc).__name__, exc)
    reason = (f"the driver's display/audio stream failed ({type(exc).__name__}: {exc}); "
              "this is a driver bug, please report it (the driver's log has the traceback)")
    clip, audio, av._clip, av._audio = av._clip, av._audio, None, None
    if goal is not None and goal[0] and goal[1] not in [g.token for g in (clip, audio) if g is not None]:
        av._report(AVReport(goal[0], goal[1], success=False, message=reason))  # (a second end of a goal: ignored)
    try:
        progress = (av._clip_progress(clip, now) if clip is not None else 0.0,
                    av._audio_progress(audio) if audio is not None else 0.0)
    except Exception:  # noqa: BLE001 - the goals end all the same
        progress = (0.0, 0.0)
    if clip is not None:
        av._report(AVReport(_CLIP_DONE, clip.token, progress[0], clip=clip.name, success=False, message=reason))
    if audio is not None:
        av._report(AVReport(_AUDIO_DONE, audio.token, progress[1], av._elapsed(audio, now), success=False,
                            message=reason))
    try:
        send = av._ready()
        av._drop_all(reason, send=send)  # (no goal left: the player's stops, then the clip goal's)
        if clip is not None and send:
            av._send(clip.stop_messages)
        if av._cut:  # a clip or an image cut: not left on the screen with no face (as _resume)
            av._cut = False
            av._blank_if_faceless()
    except Exception:  # noqa: BLE001 - the goals have ended; the timer is armed below
        if say:
            logger.error("display/audio: dropping what the failed tick played failed too", exc_info=True)
        av._reset_stream()
    try:
        av._arm()
        late = av._timer is not None and av._timer_at is not None and av._timer_at <= av.robot.clock()
    except Exception:  # noqa: BLE001 - a timer all the same (its tick tries again)
        if say:
            logger.error("display/audio: re-arming the stream's timer failed", exc_info=True)
        late = True
    if late:  # the grid did not move on: not due again at once, but a tick later
        if av._timer is not None:
            av._timer.cancel()
        av._timer_at = av._arm_base = now + TICK_S
        av._timer = av.robot.schedule(av._timer_at, av._on_timer)


def _treads_held(goal: Optional[_ClipGoal], hold: Optional[Callable[[], Tuple[Optional[str], Optional[str]]]],
                 player: Any, now: float) -> Optional[str]:
    """Why the clip ``goal`` must end before its next tick, because of its treads
    (``hold``: see the module docstring, Treads), or None."""
    if goal is None or hold is None or not goal.compiled.uses_body:
        return None
    still, backwards = hold()
    if still is None and (backwards is None or not player.drives_forwards(now)):
        return None
    return f"interrupted: {still or backwards}"


def _cut_short(av: AVStream, goal: _AudioGoal, send: bool = True) -> bool:
    """The play_audio ``goal`` ends before its last frame (cancelled, preempted, stopped): what is
    left of it is dropped (a stream queued behind it stays), and the robot drops what it holds
    of it, up to its 7 frames (about 0.23 s, which it played on), with ``AbortAnimation`` (the
    face is sent again); not when it holds none (no frame of it went out), nor when it may hold a
    clip's frames: one started since the goal came, or one that ended less than CLIP_TAIL_S ago."""
    av.pacer.drop_audio(_goal_queued(goal, av.pacer))
    sent = av.pacer.stats.audio_frames > goal.frames_at_start
    clip = (av.pacer.player.stats.clips_started != goal.clips_at_start
            or av.robot.clock() - av.pacer.clip_ended_at < CLIP_TAIL_S)
    if send and sent and not clip and av._ready():
        av._send([msgs.AbortAnimation()])
        av.pacer.forget_screen()
        return True
    return False


def _cut_stream(av: AVStream, send: bool) -> None:
    """The stream stops (a deactivation): the audio queued is dropped (an ``audio/pcm`` stream's),
    and, with ``send``, the robot drops what it may still hold of the sound (up to its 7 frames,
    about 0.23 s, which it played on) as :func:`_cut_short` has it: ``AbortAnimation`` (the face is
    sent again), not when it may hold a clip's frames (:meth:`AVPacer.sound_held`)."""
    av.pacer.clear_audio()
    if send and av.pacer.sound_held(av.robot.clock(), CLIP_TAIL_S) and av._ready():
        av._send([msgs.AbortAnimation()])
        av.pacer.forget_screen()


def _goal_queued(goal: Optional[_AudioGoal], pacer: AVPacer) -> int:
    """Samples of the play_audio ``goal`` still waiting in the ``pacer``'s queue (ahead of
    any stream audio; 0 without a goal)."""
    if goal is None:
        return 0
    sent = pacer.stats.audio_frames - goal.frames_at_start
    return max(0, goal.samples - sent * SAMPLES_PER_FRAME)


def _why_queued(goal_s: float, animating: bool) -> str:
    """Why a stream queued as much as the driver keeps (the warning of sound dropped)."""
    if goal_s > 0.0:
        return (f"it waits behind a play_audio goal with {goal_s:.1f} s still to play (nothing "
                "is mixed; cancel the goal to hear the stream now)")
    if animating:
        return "it waits while an animation plays"
    return "is the stream faster than real time?"


def _counters(av: AVStream) -> dict:
    """:meth:`AVStream.counters`."""
    p, a, s = av.pacer.stats, av.pacer.player.stats, av.stats
    fires = max(1, s.timer_fires)
    return {
        "audio frames sent": p.audio_frames + a.audio_frames,
        "silence frames sent": p.silence_frames + a.silence_frames,
        "display frames sent": p.display_frames + a.display_frames,
        "display refreshes": p.refreshes,
        "display frames dropped (late)": p.display_dropped + a.display_dropped,
        "underruns (ticks sent late)": p.underruns + a.underruns,
        "audio stream starved ticks": p.audio_starved,
        "audio stream chunks": s.stream_chunks,
        "audio stream ran dry": s.stream_ran_dry,
        "audio stream dropped (s)": round(s.stream_dropped_s, 3),
        "audio queued (s)": round(av.pacer.audio_queued_s, 3),
        "images shown": s.images_shown,
        "faces received": s.faces_set,
        "face frames waiting": av.pacer.faces_queued + len(av._face_inbox),
        "face frames dropped (queue full)": p.faces_dropped,
        "face frames covered (image or animation)": p.faces_covered + s.faces_under_image,
        "animations started": a.clips_started,
        "animations finished": a.clips_finished,
        "animations cancelled": a.clips_cancelled,
        "send errors": s.send_errors,
        "stream ticks failed (driver bug, see the log)": s.tick_errors,
        "stream inputs failed (driver bug, see the log)": s.input_errors,
        "display frames and silence skipped (link behind)": s.skipped_backlog,
        "tick lateness max (ms)": round(s.tick_late_max_s * 1000.0, 2),
        "tick lateness mean (ms)": round(s.tick_late_sum_s / fires * 1000.0, 3),
        "robot buffer (frames, median of a second)": av.guard.stats.level,
        "ticks held (robot buffer full)": av.guard.stats.ticks_held,
        "ticks sent early (robot buffer low)": av.guard.stats.ticks_hastened,
        "silence frames sent before a sound (robot buffer low)": p.lead_in_frames,
    }


def _skip_backlogged(stream: AVStream, messages: Sequence[Any], clip_span: Tuple[int, int]) -> List[Any]:
    """The link is a second behind: leave out the face image and the silence of the
    pacer's own ticks, not of a clip's (``messages[clip_span[0]:clip_span[1]]``), whose
    frames the robot plays one per audio message (without them its keyframes bunch), but
    for the face images in a clip's ticks before its own face (``pacer.clip_faces``)."""
    start, end = clip_span
    faces = {id(m) for m in stream.pacer.clip_faces}
    skipped = [m for i, m in enumerate(messages) if id(m) in faces or (
        m.NAME in ("DisplayImage", "OutputSilence") and not start <= i < end)]
    if not skipped:
        return list(messages)
    stream.stats.skipped_backlog += len(skipped)
    if any(m.NAME == "DisplayImage" for m in skipped):
        stream.pacer.forget_screen()  # sent again once the queue drained
    now = time.monotonic()
    if now - stream._backlog_warned_at > 5.0:
        stream._backlog_warned_at = now
        logger.warning("display/audio: the link to the robot is not keeping up (%d stream packets wait to "
                       "be sent): face images and silence are skipped until it does, but for animations "
                       "(%d so far)", stream.robot.link.session.background_queue_length,
                       stream.stats.skipped_backlog)
    dropped = {id(m) for m in skipped}
    return [m for m in messages if id(m) not in dropped]


class _Resampling:
    """:meth:`AVStream.stream_audio_at`'s chunks on their way to the robot's rate (I/O
    thread): one :class:`StreamResampler` a stream, fed :data:`RESAMPLE_PIECE_S` of the
    chunks waiting at a time, in arrival order. A chunk at another rate, or one more than
    ``gap_s`` after the one before, starts a new stream."""

    def __init__(self, gap_s: float) -> None:
        self.gap_s = gap_s
        self.resampler: Optional[StreamResampler] = None  # the stream's
        self.arrived_at = -math.inf  # when the last chunk came
        self._rate = 0  # its rate
        self.waiting: Deque[list] = deque()  # [samples left, rate, starts a stream]

    def add(self, pcm: np.ndarray, rate: int, now: float) -> None:
        new = rate != self._rate or now - self.arrived_at > self.gap_s
        self.arrived_at, self._rate = now, rate
        self.waiting.append([pcm, rate, new])

    def piece(self) -> Tuple[Optional[np.ndarray], np.ndarray]:
        """``(the stream before's last samples, if this piece starts a new one; the next
        piece resampled)``; call it while :attr:`waiting`."""
        item = self.waiting[0]
        pcm, rate, new = item
        tail = None
        if new or (self.resampler is not None and self.resampler.rate_in != rate):
            tail = self.flush()
            item[2] = False
        if self.resampler is None:
            self.resampler = StreamResampler(rate, SAMPLE_RATE)
        n = max(1, int(rate * RESAMPLE_PIECE_S))
        if pcm.size > n:
            item[0], pcm = pcm[n:], pcm[:n]
        else:
            self.waiting.popleft()
        return tail, self.resampler.process(pcm)

    def flush(self) -> Optional[np.ndarray]:
        """The stream ends: the samples its resampler held back for its filter."""
        r, self.resampler = self.resampler, None
        return r.flush() if r is not None else None

    def reset(self) -> None:
        """Drop the stream and what waits."""
        self.resampler = None
        self.waiting.clear()
