"""How full the robot's animation buffer is, from its AnimationState: :class:`BufferGuard`. Pure.

The robot plays the animation stream (audio, faces, keyframes) one frame every 1/30 s on
its own clock; the driver sends it on the host's (the pacer's grid). Two crystals never
agree exactly: tens of parts per million apart, a stream that runs for an hour leaves the
robot a frame or two more, or less, than it started with. Anki's firmware
(animationController.cpp) starts playing once 7 audio frames wait, plays on while more
than one does, and when a message does not fit its buffer clears the whole buffer
(messages.cpp, ``Process_anim``): a gap in sound and face. Left alone, a robot whose
clock is slow fills its buffer until it overflows, and one whose clock is fast runs down
to its last frame, where any late datagram stalls it (a gap too).

Anki's engine streamed as much as a byte budget allowed, from AnimationState's bytes
played. The driver keeps its clock and its pacing, and watches the same reports: the
firmware counts in ``num_audio_frames_played`` every audio message and EndAnimation it
played (a cleared buffer's too), from 0 at EnableAnimationState, and the robot client
counts the frames it sent since then (``RobotLink.stream_frames_sent``): the difference
is what the robot holds or has on the way. Each second of reports (about 30) gives one
median. Above ``HIGH_FRAMES`` while the robot plays, the pacer's grid moves one tick
later (the robot plays a frame from its buffer meanwhile); at ``LOW_FRAMES`` or fewer
while frames went out all that second, one tick earlier (the next tick goes at once).
One tick at a time, at most one a second: a late datagram or a burst moves single
reports, not a second's median, so only the two clocks' drift, or a buffer run low after
a pause, moves the grid. Nothing is lost or sent twice: the stream's frames only go out
a tick later or earlier. A median that cannot be (below 0, or more than ``MAX_FRAMES``:
a robot whose counts do not start again at EnableAnimationState, say) moves nothing; it
shows in the stats, as every median does.

The firmware waits for its 7 frames only when it is not playing (at the connection, after an
EndAnimation): a stream that stops leaves it playing, its last frame held, and a stream that
starts again is played from the first frame that comes, with a frame or two buffered. The
guard's early ticks would then take the frames the robot lacks from the driver's own buffer
(an ``audio/pcm`` stream's ``audio_stream_buffer``), which a chunk late by less than that buffer
ran dry mid-way. So a sound that begins while the robot holds fewer than its 7 frames is sent
after :meth:`BufferGuard.lead_in` silence frames, sent at once (the robot's last report says
what it holds, clips playing included): it starts with the preroll's buffer, as the first sound
of a connection does.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import List, Optional

__all__ = ["BufferGuard", "BufferGuardStats", "PREROLL_FRAMES", "HIGH_FRAMES", "LOW_FRAMES",
           "MAX_FRAMES", "WINDOW_S"]

#: audio frames the firmware waits for before it plays a stream (ANIMATION_PREROLL_LENGTH)
PREROLL_FRAMES = 7
#: a second's median above this: the grid waits a tick
HIGH_FRAMES = PREROLL_FRAMES + 1
#: at most this while streaming: the grid goes a tick early
LOW_FRAMES = 3
#: reports are taken together over this long (s)
WINDOW_S = 1.0
#: a second counts as streaming when this share of its 30 frames went out
_STREAMING_SHARE = 0.8
#: more frames than the robot's buffer and the session's window could hold together
MAX_FRAMES = 100


@dataclass
class BufferGuardStats:
    #: ticks the grid waited because the robot's buffer held too much
    ticks_held: int = 0
    #: ticks sent early because it held too little
    ticks_hastened: int = 0
    #: the last second's median of frames in the robot's buffer or on their way (None: no
    #: report yet on this connection)
    level: Optional[float] = None


class BufferGuard:
    """Decides, from AnimationState reports, when the pacer's grid moves a tick. See the
    module docstring."""

    def __init__(self) -> None:
        self.stats = BufferGuardStats()
        self._levels: List[int] = []
        self._start: Optional[float] = None
        self._sent0 = 0
        self._played0 = 0
        #: frames the robot holds or has on the way, as of its last report (None: none yet on
        #: this connection, or counts that cannot be)
        self.held: Optional[int] = None

    def reset(self) -> None:
        """A new connection (or playback enabled anew): the counts start again."""
        self.held = None
        self._start = None
        self._levels = []
        self.stats.level = None

    def on_state(self, sent: int, played: int, now: float) -> int:
        """One AnimationState: ``sent`` frames sent since EnableAnimationState, ``played``
        its ``num_audio_frames_played``, at ``now`` (s). Returns the ticks to move the grid
        by: 1 (later), -1 (earlier) or 0."""
        self.note(sent, played)
        if self._start is None:
            self._start, self._sent0, self._played0 = now, sent, played
            self._levels = []
        self._levels.append(sent - played)
        if now - self._start < WINDOW_S - 1e-6:
            return 0
        median = statistics.median(self._levels)
        elapsed = now - self._start
        streamed = sent - self._sent0
        playing = played > self._played0
        self._start = None
        self.stats.level = median
        if not 0 <= median <= MAX_FRAMES:
            return 0  # the counts do not line up: nothing to go by
        if median > HIGH_FRAMES and playing:
            self.stats.ticks_held += 1
            return 1
        if median <= LOW_FRAMES and streamed >= _STREAMING_SHARE * 30.0 * elapsed:
            self.stats.ticks_hastened += 1
            return -1
        return 0

    def note(self, sent: int, played: int) -> None:
        """What the robot holds, from one AnimationState (:meth:`on_state` notes it too; this
        alone while an animation plays on its own grid): :attr:`held`."""
        level = sent - played
        self.held = level if 0 <= level <= MAX_FRAMES else None

    def lead_in(self) -> int:
        """Silence frames to send before a sound that begins now: as many as bring what the
        robot holds, with the sound's first frame, to :data:`PREROLL_FRAMES` (0 when it is not
        known). See the module docstring."""
        return 0 if self.held is None else max(0, PREROLL_FRAMES - 1 - self.held)
