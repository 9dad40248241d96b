"""The simulated Cozmo's animation playback and its outputs: face, speaker, backpack lights.

:class:`AnimationPlayer` queues the animation stream (OutputAudio/OutputSilence,
DisplayImage, AnimHead, AnimLift, AnimBody, AnimBackpackLights, RecordHeading,
TurnToRecordedHeading, StartAnimation, EndAnimation) and plays it at 30 frames
per second as Anki's firmware does: a frame plays one audio message (audio paces
the display) and the messages queued after it, up to the next audio message or
an EndAnimation, which ends the animation; a frame that would start with
anything but an audio message clears the whole queue instead (counted in
``buffer_clears``: the engine sent a tick in the wrong order). Playback starts
once 7 audio messages (or an EndAnimation) are queued, and goes on while more
than one is, so the last one waits for the next; while it waits, treads that
AnimBody drives are stopped. Each tick reports
AnimationState. All this only once the engine has sent EnableAnimationState
(which the model takes only after Enable): what of the stream comes before is not
played (counted in ``unplayable``). Head, lift
and body tracks move the :class:`~cozmo_driver.sim.body.Body`. The player also
keeps the ground truth of what the robot showed and said (the 128x32 face
framebuffer and its history, the audio played as PCM) and the backpack lights
and volume the engine set.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import numpy as np

from ..protocol import messages as msgs
from ..protocol.errors import RemoteProtocolError
from .body import Body
from .firmware import AUDIO_SAMPLES_PER_FRAME
from .motors import (
    HEAD_MAX_SPEED_RADPS,
    LIFT_MAX_SPEED_RADPS,
    TRACK_WIDTH_MM,
    lift_height_to_angle,
    wrap_angle,
)

__all__ = ["AnimationPlayer", "PREROLL_FRAMES"]

#: audio messages queued before the robot starts playing its stream (Anki's firmware)
PREROLL_FRAMES = 7
_AUDIO = frozenset(("OutputAudio", "OutputSilence"))
#: what the firmware counts as a frame of the queue
_FRAMES = _AUDIO | {"EndAnimation"}

logger = logging.getLogger("cozmo.sim")
_LightState = msgs.STRUCTS["LightState"]


class AnimationPlayer:
    """The animation queue, its playback and the face, speaker and backpack lights.
    What was shown and played survives :meth:`boot`; the queue and settings do not."""

    def __init__(self, body: Body) -> None:
        self.body = body
        self.fw = fw = body.fw
        cfg = fw.config
        self.display_images_shown = 0
        self.display_errors = 0
        self._display_history: Deque[np.ndarray] = deque(maxlen=cfg.display_history)
        self._audio: Deque[np.ndarray] = deque()
        self._audio_len = 0
        self.audio_frames_played = 0
        self.audio_frames_with_sound = 0
        self.boot(fw.t)

    def boot(self, now: float) -> None:
        self.recorded_heading: Optional[float] = None
        self.volume = 0xFFFF  # the robot starts at full volume (Anki's K02 firmware: SetVolume(~0))
        self.backpack_lights: Dict[str, Any] = {k: _LightState() for k in
                                                ("front", "middle", "back", "left", "right")}
        self.anim_backpack_colors: List[int] = [0] * 5
        self.framebuffer = np.zeros((32, 128), dtype=bool)
        self._last_display_bytes: Optional[bytes] = None
        self._queue: Deque[Tuple[Any, int]] = deque()
        self._queue_bytes = 0
        #: AnimationState's counters as Anki's firmware keeps them (animationController.cpp):
        #: bytes and frames (audio messages and EndAnimations) played, a cleared queue's
        #: counted as played; both start again at 0 at EnableAnimationState
        self.anim_bytes_played = 0
        self.anim_frames_played = 0
        #: messages that did not fit the buffer (anim_buffer_max_bytes): as the firmware
        #: does (messages.cpp, Process_anim), the whole queue is cleared each time
        self.anim_overflows = 0
        #: times the buffer ran down to its last frame while playing (that frame waits for
        #: the next: a gap in sound and face, unless the stream had ended)
        self.starvations = 0
        self._starved = False
        #: messages of the animation stream that came before EnableAnimationState
        self.unplayable = 0
        #: times the queue was cleared because a frame did not start with an audio message
        self.buffer_clears = 0
        self._frames = 0       # audio messages and EndAnimations queued (the firmware's count)
        self._ends = 0         # EndAnimations queued
        self._playing = False
        self._body_track = False  # AnimBody drives the treads (stopped if the stream starves)
        self.current_anim: Optional[int] = None
        self.anim_state_enabled = False
        self._next_tick = now

    def reset_link(self) -> None:
        """The engine left or a new one arrived: the queue and the current animation go (and
        treads it drove stop, as when its stream starves)."""
        if self._body_track and self.body.controller is None:
            for wheel in self.body.wheels:
                wheel.command(0.0, 0.0)
        self.anim_state_enabled = False
        self._empty()
        self.current_anim = None

    def _empty(self) -> None:
        self._queue.clear()
        self._queue_bytes = 0
        self._frames = self._ends = 0
        self._playing = False
        self._body_track = False

    def handlers(self) -> Dict[str, Callable[[Any, float], None]]:
        table: Dict[str, Callable[[Any, float], None]] = dict.fromkeys(msgs.ANIMATION_STREAM, self.queue)
        table.update({"EnableAnimationState": self._on_EnableAnimationState,
                      "AbortAnimation": self._on_AbortAnimation,
                      "SetRobotVolume": self._on_SetRobotVolume,
                      "LightStateCenter": self._on_LightStateCenter,
                      "LightStateSide": self._on_LightStateSide})
        return table

    # ------------------------------------------------------------------ the queue

    @property
    def queue_bytes(self) -> int:
        return self._queue_bytes

    @property
    def queue_length(self) -> int:
        return len(self._queue)

    @property
    def buffer_full(self) -> bool:
        return self._queue_bytes >= self.fw.config.anim_buffer_full_bytes

    def due(self) -> Optional[float]:
        """When the next animation tick runs, or None while there is nothing to play or report."""
        if self._queue or (self.fw.connected and self.anim_state_enabled):
            return self._next_tick
        return None

    def _grid(self, now: float) -> float:
        period = self.fw.config.anim_period
        boot_time = self.fw.boot_time
        k = math.ceil((now - boot_time) / period - 1e-9)
        return boot_time + k * period

    def queue(self, m: Any, now: float) -> None:
        if not self.anim_state_enabled:
            # the robot plays its animation stream only once EnableAnimationState came
            self.unplayable += 1
            logger.debug("%s before EnableAnimationState: not played", m.NAME)
            return
        size = msgs.packet_size(m)
        if self._queue_bytes + size > self.fw.config.anim_buffer_max_bytes:
            self.anim_overflows += 1
            logger.warning("animation buffer overflow (%d bytes wait, %s of %d more): the queue "
                           "is cleared", self._queue_bytes, m.NAME, size)
            self._clear()
            self._end_current()
            return
        if not self._queue and not (self.fw.connected and self.anim_state_enabled):
            self._next_tick = max(self._grid(now), self._next_tick)
        self._queue.append((m, size))
        self._queue_bytes += size
        if m.NAME in _FRAMES:
            self._frames += 1
            self._ends += m.NAME == "EndAnimation"

    def _ready(self) -> bool:
        if self._playing:
            ready = self._frames > 1
            if not ready and not self._starved:
                self.starvations += 1
            self._starved = not ready
            return ready
        self._playing = self._frames >= PREROLL_FRAMES or self._ends > 0
        self._starved = False
        return self._playing

    def _clear(self) -> None:
        """Empty the queue, its bytes and frames counted as played (the firmware's Clear)."""
        self.anim_bytes_played += self._queue_bytes
        self.anim_frames_played += self._frames
        self._empty()

    def _pop(self) -> Any:
        m, size = self._queue.popleft()
        self._queue_bytes -= size
        self.anim_bytes_played += size
        return m

    def tick(self, now: float) -> None:
        """Play one frame of the queue, if it is ready (see the module docstring)."""
        fw = self.fw
        queue = self._queue
        if self._ready():
            if queue[0][0].NAME not in _AUDIO:
                logger.warning("animation stream: a frame starts with %s, not an audio message: "
                               "the queue (%d messages) is cleared", queue[0][0].NAME, len(queue))
                self.buffer_clears += 1
                self._clear()
                self._end_current()
            else:
                self._frames -= 1
                self.anim_frames_played += 1
                self._play_audio(self._pop())
                while queue and queue[0][0].NAME not in _AUDIO:
                    m = self._pop()
                    if m.NAME == "EndAnimation":
                        self._frames -= 1
                        self.anim_frames_played += 1  # the firmware counts it as a frame
                        self._ends -= 1
                        self._playing = self._body_track = False
                        self._end_current()
                        break
                    self._play(m, now)
        elif self._playing and self._body_track:
            # starved while AnimBody drives: the firmware's failsafe stops the treads
            self._body_track = False
            if self.body.controller is None:
                for wheel in self.body.wheels:
                    wheel.command(0.0, 0.0)
        if fw.connected and self.anim_state_enabled:
            fw.emit(msgs.AnimationState(
                timestamp_ms=fw.timestamp_ms(now),
                num_anim_bytes_played=self.anim_bytes_played & 0x7FFFFFFF,
                num_audio_frames_played=self.anim_frames_played & 0x7FFFFFFF,
                enabled_anim_tracks=0xFF,
                tag=self.current_anim or 0,
                client_drop_count=0))
        period = fw.config.anim_period
        self._next_tick += period
        if self._next_tick <= now:
            self._next_tick = self._grid(now + period * 0.5)

    # ------------------------------------------------------------------ playback

    def _play_audio(self, m: Any) -> None:
        self.audio_frames_played += 1
        if m.NAME == "OutputAudio":
            from ..protocol.audio import decode_ulaw
            pcm = decode_ulaw(m.samples)
            self.audio_frames_with_sound += 1
        else:
            pcm = np.zeros(AUDIO_SAMPLES_PER_FRAME, dtype=np.int16)
        self._audio.append(pcm)
        self._audio_len += len(pcm)
        limit = self.fw.config.audio_history_samples
        while self._audio_len > limit and self._audio:
            self._audio_len -= len(self._audio.popleft())

    def _play(self, m: Any, now: float) -> None:
        name = m.NAME
        body = self.body
        if name == "DisplayImage":
            self._show(bytes(m.image))
        elif name == "StartAnimation":
            if self.current_anim is not None:
                self.fw.emit(msgs.AnimationEnded(anim_id=self.current_anim))
            self.current_anim = int(m.anim_id)
            self.fw.emit(msgs.AnimationStarted(anim_id=self.current_anim))
        elif name == "EndAnimation":
            self._end_current()
        elif name == "AnimHead":
            # the field called variability is the high byte of a 16-bit duration (Anki's
            # firmware reads time_ms; its engine draws the variability itself)
            ms = int(m.duration_ms) | (int(m.variability_deg) & 0xFF) << 8
            body.head.move_to(math.radians(int(m.angle_deg)), HEAD_MAX_SPEED_RADPS, 40.0, ms / 1000.0)
        elif name == "AnimLift":
            ms = int(m.duration_ms) | (int(m.variability_mm) & 0xFF) << 8
            body.lift.move_to(lift_height_to_angle(int(m.height_mm)), LIFT_MAX_SPEED_RADPS, 40.0,
                              ms / 1000.0)
        elif name == "AnimBody":
            self._body_track = True
            self._drive(m, now)
        elif name == "AnimBackpackLights":
            self.anim_backpack_colors = [int(c) for c in m.colors]
        elif name == "RecordHeading":
            self.recorded_heading = body.yaw_u
        elif name == "TurnToRecordedHeading":
            if self.recorded_heading is not None:
                body.end_base_mode(now, "TurnToRecordedHeading")
                target = body.yaw_u + wrap_angle(self.recorded_heading - body.yaw_u)
                body.start_turn(target, math.pi, 10.0, math.radians(2.0))

    def _drive(self, m: Any, now: float) -> None:
        """AnimBody: its ``unknown`` field is read as a turn radius, and in place (radius 0)
        its speed as deg/s (see sim.model)."""
        body = self.body
        body.end_base_mode(now, "AnimBody")
        speed = float(m.speed_mmps)
        radius = int(m.unknown)
        if radius in (32767, -32768, -32767):
            left = right = speed
        elif radius == 0:
            tread = math.radians(speed) * TRACK_WIDTH_MM / 2.0
            left, right = -tread, tread
        else:
            half = TRACK_WIDTH_MM / 2.0
            left, right = speed * (1 - half / radius), speed * (1 + half / radius)
        lw, rw = body.wheels
        lw.command(left, 0.0)
        rw.command(right, 0.0)

    def _end_current(self) -> None:
        """The current animation ends: AnimationEnded, an animated drive stops, and the
        backpack shows the user's lights again (the animation's layer goes dark)."""
        if self.current_anim is not None:
            self.fw.emit(msgs.AnimationEnded(anim_id=self.current_anim))
            self.current_anim = None
            self.anim_backpack_colors = [0] * 5
            if self.body.controller is None:
                for wheel in self.body.wheels:
                    wheel.command(0.0, 0.0)

    def _show(self, image: bytes) -> None:
        self.display_images_shown += 1
        if image == self._last_display_bytes:
            self._display_history.append(self.framebuffer)
            return
        from ..protocol.display import decode_display
        try:
            fb = decode_display(image)
        except RemoteProtocolError as exc:
            self.display_errors += 1
            logger.debug("undecodable DisplayImage ignored: %s", exc)
            return
        fb.setflags(write=False)
        self.framebuffer = fb
        self._last_display_bytes = image
        self._display_history.append(fb)

    # ------------------------------------------------------------------ commands

    def _on_EnableAnimationState(self, m: Any, now: float) -> None:
        if not self.anim_state_enabled:  # the firmware's EngineInit: counters from 0
            self.anim_state_enabled = True
            self.anim_bytes_played = self.anim_frames_played = 0
            self._next_tick = self._grid(now)

    def _on_AbortAnimation(self, m: Any, now: float) -> None:
        self._clear()  # the firmware's Process_abortAnimation: AnimationController::Clear
        self._end_current()

    def _on_SetRobotVolume(self, m: Any, now: float) -> None:
        self.volume = int(m.level)

    def _on_LightStateCenter(self, m: Any, now: float) -> None:
        for key, state in zip(("front", "middle", "back"), m.states):
            self.backpack_lights[key] = state

    def _on_LightStateSide(self, m: Any, now: float) -> None:
        for key, state in zip(("left", "right"), m.states):
            self.backpack_lights[key] = state

    # ------------------------------------------------------------------ ground truth

    def display_history(self) -> List[np.ndarray]:
        return list(self._display_history)

    def audio_pcm(self) -> np.ndarray:
        """Every audio frame played (silence as zeros), oldest first, int16."""
        if not self._audio:
            return np.zeros(0, dtype=np.int16)
        return np.concatenate(list(self._audio))
