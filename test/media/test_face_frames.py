"""Every face frame shown: faces arriving at 30 fps against the driver's 30 Hz pacer grid.

The driver's :class:`~cozmo_driver.anim.av_stream.AVStream` runs on a robot client made of a
:class:`~cozmo_driver.client.link.RobotLink` joined to the simulated robot by the in-memory
link, on the link's explicit clock: no threads, no sockets, no wall time. Faces arrive as
the face node publishes them (a 30 Hz grid of its own, with its own phase) after a
delivery delay (DDS and the executor) that jitters, sometimes pairs two faces between two
ticks of the pacer, and sometimes stalls; the I/O thread's timer wakes up late by an
injected amount, sometimes by more than a tick. What the simulated robot received is read
from its command log."""

from __future__ import annotations

import heapq
import itertools
import math
import random
from types import SimpleNamespace
from typing import Callable, List, Tuple

import numpy as np
import pytest

from cozmo_driver.anim.av_stream import AVStream
from cozmo_driver.anim.clip import load_builtin
from cozmo_driver.anim.player import compile_clip
from cozmo_driver.client.link import RobotLink
from cozmo_driver.driver.media import screen_to_frame
from cozmo_driver.protocol.session import MessageReceived
from cozmo_driver.anim.robot_buffer import HIGH_FRAMES, PREROLL_FRAMES, BufferGuard
from cozmo_driver.protocol.audio import SAMPLE_RATE, SAMPLES_PER_FRAME
from cozmo_driver.sim import ModelConfig, RobotConfig, SimulatedRobot
from cozmo_driver.transport.memory import Impairment, MemoryLink

FRAME = 1 / 30


class LoopRobot:
    """What AVStream needs of a robot client (``clock``, ``call_soon``, ``schedule``, ``link``,
    listeners) as the I/O thread has it, on the in-memory link's clock.

    ``wake(when)`` is how late (s) a timer due at ``when`` fires; :meth:`arrive` makes a call
    from another thread (the executor's) land on the I/O thread at a given time."""

    def __init__(self, seed: int, wake: Callable[[float], float], loss: float = 0.0,
                 delay: float = 0.0, config: RobotConfig = None) -> None:
        self.link = RobotLink(name="faces")
        self.sim = SimulatedRobot(config=config or RobotConfig(seed=seed))
        self.net = MemoryLink(self.link, self.sim, Impairment(loss=loss, delay=delay),
                              Impairment(loss=loss, delay=delay), seed=seed)
        self.net.on_event_a = self._dispatch
        self.wake = wake
        self._listeners: List[Callable] = []
        self._timers: list = []  # (fires at, order, fn, handle)
        self._arrivals: list = []  # (lands at, order, fn, args)
        self._order = itertools.count()
        self.link.start(self.net.now)
        for _ in range(20):  # up to 10 s: the lossy links' handshakes take a few round trips
            self.run_until(self.net.now + 0.5)
            if self.link.is_ready:
                break
        assert self.link.is_ready, "the simulated robot did not become ready"

    def _dispatch(self, event) -> None:
        name = event.message.NAME if isinstance(event, MessageReceived) else None
        for fn, names in list(self._listeners):
            if name is None or names is None or name in names:  # as Robot.add_listener
                fn(event)

    # -- the client's surface, as the I/O thread sees it
    def clock(self) -> float:
        return self.net.now

    def call_soon(self, fn, *args) -> None:
        fn(*args)
        self.net.flush()

    def schedule(self, when: float, fn):
        handle = SimpleNamespace(cancelled=False)
        handle.cancel = lambda: setattr(handle, "cancelled", True)
        heapq.heappush(self._timers, (when + self.wake(when), next(self._order), fn, handle))
        return handle

    def add_listener(self, fn, messages=None) -> None:
        self._listeners.append((fn, None if messages is None else frozenset(messages)))

    def remove_listener(self, fn) -> None:
        self._listeners = [entry for entry in self._listeners if entry[0] != fn]

    # -- the test's side
    def arrive(self, at: float, fn, *args) -> None:
        heapq.heappush(self._arrivals, (at, next(self._order), fn, args))

    def run_until(self, end: float, max_steps: int = 1_000_000) -> None:
        for _ in range(max_steps):
            while self._timers and self._timers[0][3].cancelled:
                heapq.heappop(self._timers)
            due = min([end] + [q[0][0] for q in (self._timers, self._arrivals) if q])
            self.net.run_until(due)
            if self._arrivals and self._arrivals[0][0] <= due:
                _, _, fn, args = heapq.heappop(self._arrivals)
                self.call_soon(fn, *args)
            elif self._timers and self._timers[0][0] <= due:
                _, _, fn, _ = heapq.heappop(self._timers)
                fn()
                self.net.flush()
            elif due >= end:
                return
        raise RuntimeError("did not settle")

    def displayed(self) -> List[Tuple[float, bytes]]:
        """(time, DisplayImage bytes) the simulated robot received, in order."""
        return [(t, bytes(msg.image)) for t, msg in self.sim.model.commands() if msg.NAME == "DisplayImage"]


def face(j: int) -> bytes:
    """DisplayImage bytes of face number ``j``: its bits as blocks, distinct for j < 65536."""
    screen = np.zeros((64, 128), dtype=bool)
    for b in range(16):
        screen[0:16, 8 * b:8 * b + 8] = bool(j >> b & 1)
    screen[32:, (j * 7) % 128] = True
    return screen_to_frame(screen)[0]


def arrivals(first: float, count: int, delay: Callable[[int], float]) -> List[float]:
    """When faces published on a 30 Hz grid from ``first`` land on the I/O thread, in order
    (the subscription and the executor keep it), each ``delay(j)`` after its publication."""
    out: List[float] = []
    for j in range(count):
        out.append(max(out[-1] if out else 0.0, first + j * FRAME + delay(j)))
    return out


def play(robot: LoopRobot, av: AVStream, times: List[float]) -> List[bytes]:
    """Faces 0.. arrive at ``times``; the DisplayImages the robot received for them."""
    start = len(robot.displayed())
    for j, t in enumerate(times):
        robot.arrive(t, av.set_face, face(j))
    robot.run_until(times[-1] + 1.0)  # well before the 5 s refresh of an unchanged screen
    return [data for _, data in robot.displayed()[start:]]


def make(seed: int, wake: Callable[[float], float], loss: float = 0.0,
         delay: float = 0.0) -> Tuple[LoopRobot, AVStream, float]:
    """The robot, its started stream, and a tick of the pacer's grid a little ahead."""
    robot = LoopRobot(seed, wake, loss, delay)
    av = AVStream(robot, lambda report: None)
    av.start()
    origin = av.pacer.tick_time(0)
    return robot, av, origin + (math.floor((robot.clock() - origin) * 30) + 2) * FRAME


# --------------------------------------------------------------------------- every face, once, in order

@pytest.mark.parametrize("phase", [0.0, 0.001, 0.004, 0.012, 0.02, 0.028, 0.032, 0.0333])
def test_faces_at_30_fps_with_jitter_are_each_sent_once_in_order(phase):
    """The face node's grid at ``phase`` after the pacer's (near 0 and near a whole frame:
    faces land on both sides of a tick), delivery jittering by 0.3-6 ms, one face in 25
    held back by 34-45 ms (two land between the same two ticks), the I/O thread waking
    0-2 ms late and once in 150 ticks by 40-75 ms (a catch-up of two or three ticks)."""
    rng = random.Random(int(phase * 1e6))
    robot, av, grid = make(7, lambda when: rng.uniform(0.04, 0.075) if rng.random() < 1 / 150
                           else rng.uniform(0.0, 0.002))
    times = arrivals(grid + phase, 300, lambda j: rng.uniform(0.034, 0.045) if rng.random() < 1 / 25
                     else rng.uniform(0.0003, 0.006))
    got = play(robot, av, times)
    gaps = np.diff(times)
    assert (gaps < 0.004).sum() >= 5, "the arrivals never paired up between two ticks"
    assert got == [face(j) for j in range(300)]
    counters = av.counters()
    assert counters["face frames dropped (queue full)"] == 0
    assert counters["faces received"] == 300


def test_bursts_and_a_short_stall_lose_nothing_and_keep_one_face_per_tick():
    """Explicit bursts: every 10th face lands together with the next one, between the same
    two ticks; once, the executor stalls for 90 ms (three faces land at once). Every face
    goes out once, in order, and no tick carries two."""
    robot, av, grid = make(3, lambda when: 0.0005)

    def delay(j: int) -> float:
        if j % 10 == 3:
            return FRAME + 0.001               # lands when face j + 1 is published, just before it
        if 150 <= j < 153:
            return 0.09 - (j - 150) * FRAME    # a 90 ms stall: 150, 151 and 152 land at once
        return 0.012

    times = arrivals(grid + 0.015, 240, delay)
    assert times[152] - times[150] < 1e-9
    start = len(robot.displayed())
    got = play(robot, av, times)
    assert got == [face(j) for j in range(240)]
    sent_at = [t for t, _ in robot.displayed()[start:]]
    ticks = np.round((np.array(sent_at) - av.pacer.tick_time(0)) * 30).astype(int)
    assert len(set(ticks)) == len(ticks)                                  # one face per tick


def test_on_a_link_that_cannot_carry_the_stream_the_face_falls_at_most_a_second_behind():
    """35 % loss and 150 ms each way: the link carries less than the stream's 60 packets a
    second (with go back N, 35 % loss alone no longer stops it). The faces and the silence
    are skipped once a second of it waits unsent (counted), so the wait stays about a second
    instead of growing without end, and the face the robot shows catches up with the last
    one once the faces stop."""
    from cozmo_driver.anim.av_stream import BACKLOG_MAX
    robot, av, grid = make(11, lambda when: 0.0005, loss=0.35, delay=0.15)
    session = robot.link.session
    worst = 0
    times = arrivals(grid + 0.01, 600, lambda j: 0.003)               # 20 s of faces
    for j, t in enumerate(times):
        robot.arrive(t, av.set_face, face(j))
    for k in range(1, 41):
        robot.run_until(grid + k * 0.5)
        worst = max(worst, session.background_queue_length)
    assert robot.link.is_ready
    assert av.counters()["display frames and silence skipped (link behind)"] > 100
    assert worst < BACKLOG_MAX + 4                                    # one tick's worth over at most
    robot.run_until(grid + 25.0)
    assert robot.displayed()[-1][1] == face(599)


def test_a_stall_longer_than_the_queue_drops_the_oldest_and_counts_them():
    """A 400 ms stall: faces 50 to 61 land at once, when face 61 would have; the queue keeps
    the newest few, the older are dropped (counted), and the faces before and after are all
    shown, in order."""
    robot, av, grid = make(5, lambda when: 0.001)
    times = arrivals(grid + 0.01, 120, lambda j: (61 - j) * FRAME + 0.003 if 50 <= j < 62 else 0.003)
    got = play(robot, av, times)
    dropped = av.counters()["face frames dropped (queue full)"]
    shown = [face(j) for j in range(120)]
    missing = [j for j in range(120) if shown[j] not in got]
    assert dropped == len(missing) > 0
    assert got == [shown[j] for j in range(120) if j not in missing]      # once each, in order
    # the oldest of the burst went; the queue kept the newest
    assert missing == list(range(50, 62 - av.pacer.face_queue))


def test_a_streaming_face_waits_for_the_tick_instead_of_waking_the_io_thread():
    """While the pacer ticks (a face streaming keeps it active), a face handed over from
    another thread goes into the inbox that the next tick empties: no call of its own on
    the I/O thread (one wake-up per frame, the tick's, not two). Only a face that comes
    while no tick is armed (the first, the pacer idle) is handed over by a call; every face
    still goes out once, in order, on the tick after it came."""
    robot, av, grid = make(4, lambda when: 0.0005)
    calls = []
    call_soon = robot.call_soon

    def counted(fn, *args):
        if fn == av._take_faces or args[1:3] == ("set_face", av._take_faces):  # (through _run_input)
            calls.append(robot.clock())
        call_soon(fn, *args)

    robot.call_soon = counted
    times = arrivals(grid + 0.011, 200, lambda j: 0.003)
    start = len(robot.displayed())
    got = play(robot, av, times)
    assert got == [face(j) for j in range(200)]
    assert len(calls) == 1 and calls[0] == pytest.approx(times[0]), calls
    sent_at = [t for t, _ in robot.displayed()[start:]]
    ticks = [av.pacer.tick_time(0) + math.ceil((t - av.pacer.tick_time(0)) * 30) / 30 for t in times]
    assert sent_at[1:] == pytest.approx(ticks[1:], abs=0.002)  # each on the tick after it came
    assert av.counters()["face frames waiting"] == 0


def test_an_unchanged_face_is_not_queued_again():
    """The same face again (a keep-alive) takes no place in the queue and sends nothing."""
    robot, av, grid = make(2, lambda when: 0.0)
    for j, data in enumerate([face(1), face(1), face(1), face(2), face(2), face(1)]):
        robot.arrive(grid + 0.01 + j * 0.001, av.set_face, data)
    start = len(robot.displayed())
    robot.run_until(grid + 1.0)
    sent = robot.displayed()[start:]
    assert [data for _, data in sent] == [face(1), face(2), face(1)]
    # the first at once (the pacer was idle), the others on the next two ticks
    assert sent[1][0] - sent[0][0] <= FRAME and sent[2][0] - sent[1][0] == pytest.approx(FRAME)


# --------------------------------------------------------------------------- layers above the face

def test_images_and_animations_still_cover_the_face_and_the_newest_face_returns():
    """Faces keep coming at 30 fps while a timed image, an image until replaced and an
    animation show: none of those is interrupted, no face is dropped (the FIFO keeps only the
    newest while covered), each face is sent at most once and in order, every face that came
    while nothing covered it is sent, and after each cover the newest face is the first sent."""
    robot, av, grid = make(4, lambda when: 0.001)
    img = screen_to_frame(np.ones((64, 128), dtype=bool))[0]
    held = screen_to_frame(np.eye(64, 128, dtype=bool))[0]
    clip = compile_clip(load_builtin("nod_yes"))
    covers = {"timed image": grid + 1.02, "image until replaced": grid + 3.02, "animation": grid + 6.02}
    robot.arrive(covers["timed image"], av.show_image, img, 0.5)
    robot.arrive(covers["image until replaced"], av.show_image, held, None)
    robot.arrive(grid + 4.02, av.show_image, None)
    robot.arrive(covers["animation"], av.play_clip, "clip", clip)
    times = arrivals(grid + 0.01, 300, lambda j: 0.005)
    start = len(robot.displayed())
    got = play(robot, av, times)
    sent = robot.displayed()[start:]
    faces = {face(j): j for j in range(300)}
    order = [faces[data] for _, data in sent if data in faces]
    assert order == sorted(set(order))                                    # once each, in order
    assert img in got and held in got and len(got) > len(order) + 2       # the clip's frames too
    counters = av.counters()
    assert counters["face frames dropped (queue full)"] == 0
    # each cover ends with the newest face that had come; the faces that came outside the
    # covers (from the tick before one began, when a face waiting for it was covered) all went
    windows = []
    for name, begin in covers.items():
        back_at, first = next((t, faces[d]) for t, d in sent if t > begin and d in faces)
        newest = max(j for j in range(300) if times[j] <= back_at)
        assert first == newest, name
        windows.append((begin - FRAME, back_at))
    for j in range(300):
        if not any(begin <= times[j] <= end for begin, end in windows):
            assert j in order, j
    assert counters["face frames covered (image or animation)"] >= 300 - len(order)


# --------------------------------------------------------------------------- a face source pulled at each tick

class Source:
    """A face source as the face node of the driver's process is (``FaceNode.pull_frame``):
    asked at each tick, it gives face ``j`` for each ``j`` in ``changes`` (the calls at which
    the face changed) and None otherwise; it notes when it was asked."""

    def __init__(self, changes, fail_at=()) -> None:
        self.calls: List[float] = []
        self.changes = list(changes)
        self.fail_at = set(fail_at)
        self.given: List[Tuple[float, bytes]] = []

    def __call__(self, now: float):
        n = len(self.calls)
        self.calls.append(now)
        if n in self.fail_at:
            raise RuntimeError("the face node went away")
        if n < len(self.changes) and self.changes[n] is not None:
            data = face(self.changes[n])
            self.given.append((now, data))
            return data
        return None


def test_a_pulled_face_goes_out_on_the_tick_that_pulled_it_each_once_in_order():
    """A face source (the face node of the same process) is asked at every tick of the
    grid, also while the pacer would be idle, and each frame it gives goes out on that very
    tick: none dropped, none repeated, no latency, however late the timer wakes (0-3 ms, and
    once in 100 ticks by 40-75 ms: a tick missed is a frame the source is not asked for)."""
    rng = random.Random(11)
    robot, av, grid = make(6, lambda when: rng.uniform(0.04, 0.075) if rng.random() < 1 / 100
                           else rng.uniform(0.0, 0.003))
    # 200 ticks with a new face, 60 resting (nothing new), 100 more new ones
    source = Source(list(range(200)) + [None] * 60 + list(range(200, 300)))
    start = len(robot.displayed())
    robot.arrive(grid - 0.01, av.set_face_source, source)
    robot.run_until(grid + 400 * FRAME)
    sent = robot.displayed()[start:]
    assert [data for _, data in sent] == [face(j) for j in range(300)]
    assert [t for t, _ in sent] == [t for t, _ in source.given]         # on the pulling tick
    origin = av.pacer.tick_time(0)
    ticks = [math.floor((t - origin) * 30 + 1e-9) for t in source.calls]
    assert ticks == sorted(set(ticks))                                  # once a tick at most
    assert len(source.calls) >= 390 - 15                                # every tick (bar late ones)
    counters = av.counters()
    assert counters["face frames dropped (queue full)"] == 0 and counters["face frames waiting"] == 0
    assert av.stats.faces_pulled == 300


def test_a_pulled_face_under_a_timed_image_and_a_failing_source():
    """While a timed image covers the face, pulled frames wait as handed-over ones do (the
    newest shows when the image ends); a source that raises is counted and the ticks go on;
    set_face_source(None) stops the pulls, and an idle pacer's timer is not armed again."""
    robot, av, grid = make(8, lambda when: 0.001)
    img = screen_to_frame(np.ones((64, 128), dtype=bool))[0]
    source = Source(list(range(90)), fail_at={40, 41})
    start = len(robot.displayed())
    robot.arrive(grid - 0.01, av.set_face_source, source)
    robot.arrive(grid + 10 * FRAME + 0.01, av.show_image, img, 0.3)
    robot.arrive(grid + 100 * FRAME + 0.01, av.set_face_source, None)
    robot.run_until(grid + 110 * FRAME)
    calls = len(source.calls)
    sent = [data for _, data in robot.displayed()[start:]]
    faces = {face(j): j for j in range(90)}
    order = [faces[d] for d in sent if d in faces]
    assert img in sent and order == sorted(set(order))
    assert 40 not in order and 41 not in order                         # the calls that raised
    covered = [j for j in range(90) if j not in order and j not in (40, 41)]
    assert covered and max(covered) < 25 and 89 in order              # only under the image
    assert av.stats.face_source_errors == 2 and av.stats.faces_pulled == 88
    robot.run_until(grid + 200 * FRAME)
    assert len(source.calls) == calls                                  # no pull after None
    assert av._timer is None or av._timer_at - robot.clock() > 1.0    # idle: no tick armed soon


# --------------------------------------------------------------------------- the robot's clock

def stream_a_sound(drift: float, seconds: float, guard: bool) -> Tuple[LoopRobot, AVStream, int]:
    """A sound of ``seconds`` streamed to a robot whose clock runs ``drift`` slow (a
    fraction; negative: fast) and whose buffer holds 10 audio frames; ``guard`` False leaves
    the AnimationState reports unheeded. Returns the robot, the stream and the frames sent."""
    config = RobotConfig(seed=4, model=ModelConfig(anim_period=FRAME * (1.0 + drift),
                                                   anim_buffer_max_bytes=10 * 748))
    robot = LoopRobot(4, lambda when: 0.0005, config=config)
    av = AVStream(robot, lambda report: None)
    if not guard:
        av.guard.on_state = lambda sent, played, now: 0
    av.start()
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    pcm = (8000 * np.sin(2 * np.pi * 440.0 * t)).astype(np.int16)
    robot.arrive(robot.clock() + 0.05, av.play_audio, "sound", pcm)
    robot.run_until(robot.clock() + seconds + 2.0)
    return robot, av, math.ceil(len(pcm) / SAMPLES_PER_FRAME)


@pytest.mark.parametrize("drift", [0.01, -0.01], ids=["robot-slow", "robot-fast"])
def test_a_robot_clock_that_drifts_keeps_its_buffer_and_plays_every_frame(drift):
    """The robot's clock 1 % slow or fast (a crystal's drift of hours, in 40 s): the grid
    waits or hastens a tick when a second's AnimationStates show the robot's buffer above 8
    frames or at 3 or fewer (anim.robot_buffer), so that the buffer neither overflows
    (Anki's firmware then clears it) nor runs dry; every frame of the sound is played, in
    order, once. Unheeded, the same stream overflows the slow robot's buffer and starves
    the fast one."""
    robot, av, frames = stream_a_sound(drift, 40.0, guard=True)
    anim = robot.sim.model.animation
    stats = av.guard.stats
    assert anim.anim_overflows == 0
    assert anim.starvations == 1                       # its last frame, after the sound
    assert anim.audio_frames_with_sound == frames     # every frame played
    assert robot.sim.model.audio_frames_played >= frames
    if drift > 0:
        assert 8 <= stats.ticks_held <= 14 and stats.ticks_hastened <= 1
    else:
        assert 4 <= stats.ticks_hastened <= 14 and stats.ticks_held == 0
    assert av.pacer.stats.grid_shifts == stats.ticks_held + stats.ticks_hastened
    assert av.pacer.stats.underruns == 0                # a tick sent early is not a late one
    assert av.counters()["ticks held (robot buffer full)"] == stats.ticks_held
    # the same without heeding the reports
    robot, av, frames = stream_a_sound(drift, 40.0, guard=False)
    anim = robot.sim.model.animation
    if drift > 0:
        assert anim.anim_overflows >= 1 and anim.audio_frames_with_sound < frames
    else:
        assert anim.starvations > 1


def stream_after(sound_before: bool, jitter: float) -> Tuple[LoopRobot, AVStream, int, int]:
    """6 s of an audio/pcm stream (16 kHz, 20 ms chunks, each up to ``jitter`` s late) a second
    after the robot's buffer ran down (a short sound before it, ``sound_before``) or from the
    connection. Returns the robot, the stream, and the robot's starvations and the stream's
    runs dry while it played."""
    robot = LoopRobot(4, lambda when: 0.0005)
    av = AVStream(robot, lambda report: None)
    av.start()
    if sound_before:
        beep = (8000 * np.sin(2 * np.pi * 440.0 * np.arange(3000) / SAMPLE_RATE)).astype(np.int16)
        robot.arrive(robot.clock() + 0.05, av.play_audio, "beep", beep)
    start = robot.clock() + 2.0                        # the sound, its linger, and a second idle
    robot.run_until(start - 0.01)
    rate, chunk = 16000, 320
    t = np.arange(6 * rate) / rate
    pcm = (8000 * np.sin(2 * np.pi * 500.0 * t)).astype(np.int16)
    rng = random.Random(7)
    at = 0.0
    for j in range(pcm.size // chunk):
        at = max(at, start + j * chunk / rate + rng.uniform(0.0, jitter))
        robot.arrive(at, av.stream_audio_at, pcm[j * chunk:(j + 1) * chunk], rate)
    anim = robot.sim.model.animation
    starved, dry = anim.starvations, av.stats.stream_ran_dry
    robot.run_until(start + 6.0 - 0.1)                 # (before its end runs dry)
    return robot, av, anim.starvations - starved, av.stats.stream_ran_dry - dry


@pytest.mark.parametrize("jitter", [0.0, 0.03, 0.06])
def test_a_stream_that_begins_after_a_pause_starts_the_robot_with_its_preroll(jitter):
    """After a sound, the robot plays on from its last frame held (it waits for 7 frames only
    when it is not playing): an audio/pcm stream that began a second after it was played with
    a frame or two in the robot's buffer, the guard's early ticks took those the robot lacked
    from the driver's 0.1 s (audio_stream_buffer), and chunks late by less than that buffer ran
    the stream dry mid-way: a gap of 0.1 s or more in the sound, twice in 6 s at 90 ms. The
    sound now begins after the silence frames the robot lacks of its 7, as the first sound of
    a connection does (where it waits for 7 frames itself)."""
    for sound_before in (False, True):
        robot, av, starved, dry = stream_after(sound_before, jitter)
        assert (starved, dry) == (0, 0), (sound_before, starved, dry)
        assert av.guard.stats.ticks_hastened == 0, sound_before
        held = av.guard.stats.level
        assert PREROLL_FRAMES - 2 <= held <= HIGH_FRAMES, (sound_before, held)
    assert av.counters()["silence frames sent before a sound (robot buffer low)"] >= PREROLL_FRAMES - 2


def tone(freq: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (8000 * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def sounding(robot: LoopRobot) -> int:
    """Audio frames with sound the simulated robot has played."""
    return robot.sim.model.animation.audio_frames_with_sound


def aborts(robot: LoopRobot) -> int:
    return sum(1 for _, msg in robot.sim.model.commands() if msg.NAME == "AbortAnimation")


@pytest.mark.parametrize("end", ["cancel", "preempt", "stop"])
def test_a_sound_ended_early_stops_on_the_robot_at_once(end):
    """A play_audio goal cancelled, preempted by a new one or stopped (deactivated) mid-sound:
    the driver dropped what was left of it, but the robot played on what it held of it, its 7
    frames (0.23 s; a new goal's sound came after that tail). It now drops them too
    (AbortAnimation), so the sound stops at once; a stream queued behind a cancelled goal still
    plays, whole."""
    robot = LoopRobot(4, lambda when: 0.0005)
    av = AVStream(robot, lambda report: None)
    av.start()
    t0 = robot.clock() + 0.05
    robot.arrive(t0, av.play_audio, "long", tone(440.0, 3.0))
    if end == "cancel":
        robot.arrive(t0 + 1.0, av.stream_audio, tone(660.0, 0.5))   # queued behind the goal
    robot.run_until(t0 + 1.5)
    assert sounding(robot) >= 30                                     # the robot plays it
    before = sounding(robot)
    if end == "cancel":
        av.cancel_audio("long")
    elif end == "preempt":
        av.play_audio("short", tone(880.0, 0.5))
    else:
        av.stop("the driver was deactivated")
    robot.run_until(robot.clock() + 2.0)
    after = sounding(robot) - before
    follows = {"cancel": 15, "preempt": 15, "stop": 0}[end]          # the stream's or the new goal's 0.5 s
    assert follows <= after <= follows + 1, (end, after)             # (+1: the frame under way)
    assert aborts(robot) == 1


@pytest.mark.parametrize("when", ["while the clip plays", "just after the clip"])
def test_a_sound_cancelled_behind_a_clip_leaves_the_clip_alone(when):
    """A clip holds the robot's buffer while it plays, and its last frames for a while after
    its last tick went out: a play_audio goal cancelled then (waiting behind the clip, or come
    while it played and begun after it) sends no AbortAnimation, which would cut the clip's end."""
    robot = LoopRobot(4, lambda when: 0.0005)
    cancel_at = []

    def report(r) -> None:
        if r.kind == "clip_done" and when == "just after the clip":
            cancel_at.append(robot.clock() + 0.1)
            robot.arrive(cancel_at[0], av.cancel_audio, "long")
    av = AVStream(robot, report)
    av.start()
    t0 = robot.clock() + 0.05
    if when == "while the clip plays":                               # the sound first, the clip cuts it
        robot.arrive(t0, av.play_audio, "long", tone(440.0, 5.0))
        robot.arrive(t0 + 0.5, av.play_clip, "clip", compile_clip(load_builtin("celebrate")))
    else:                                                            # the sound comes during the clip
        robot.arrive(t0, av.play_clip, "clip", compile_clip(load_builtin("celebrate")))
        robot.arrive(t0 + 0.5, av.play_audio, "long", tone(440.0, 5.0))
    if when == "while the clip plays":
        robot.arrive(t0 + 1.0, av.cancel_audio, "long")
    robot.run_until(t0 + 6.0)
    assert aborts(robot) == 0
    assert robot.sim.model.animation.audio_frames_played > 90
    if cancel_at:                                                    # the sound went on after the clip
        ended = [t for t, msg in robot.sim.model.commands() if msg.NAME == "EndAnimation"]
        assert len(ended) == 1 and ended[0] < cancel_at[0]
    # the same cancel once the clip's frames are played drops the sound's on the robot
    robot.arrive(robot.clock() + 0.01, av.play_audio, "again", tone(440.0, 3.0))
    robot.run_until(robot.clock() + 1.0)
    av.cancel_audio("again")
    robot.run_until(robot.clock() + 0.5)
    assert aborts(robot) == 1


def stream_chunks(robot: LoopRobot, av: AVStream, start: float, seconds: float) -> None:
    """An audio/pcm stream of ``seconds``: 0.1 s chunks, each arriving as it would in real time."""
    chunk = tone(523.0, 0.1)
    for i in range(int(round(seconds / 0.1))):
        robot.arrive(start + 0.1 * i, av.stream_audio, chunk)


@pytest.mark.parametrize("when", ["mid-stream", "as it ran dry", "long after", "during a clip",
                                  "just after a clip"])
def test_a_deactivation_stops_an_audio_stream_on_the_robot_at_once(when):
    """The driver deactivated while an audio/pcm stream plays, or just after its last frame went
    out: the driver dropped the stream's queue, but the robot played on what it held of it, its 7
    frames (0.23 s). It now drops them too (AbortAnimation), as a play_audio goal's end does; not
    when it holds no sound any more, nor its clip's frames (a clip cancelled by the stop is
    aborted once; a stream played on after a clip's last frames sent leaves them alone)."""
    robot = LoopRobot(4, lambda when: 0.0005)
    av = AVStream(robot, lambda report: None)
    av.start()
    t0 = robot.clock() + 0.05
    stream_chunks(robot, av, t0, 1.0 if when in ("as it ran dry", "long after") else 3.0)
    if when == "during a clip":
        robot.arrive(t0 + 1.0, av.play_clip, "clip", compile_clip(load_builtin("celebrate")))
    if when == "just after a clip":
        robot.arrive(t0, av.play_clip, "clip", compile_clip(load_builtin("celebrate")))
    robot.run_until(t0 + (1.2 if when == "during a clip" else 0.6))
    assert sounding(robot) >= (8 if when != "just after a clip" else 0)
    if when == "as it ran dry":
        for _ in range(90):                                          # until its last frame went out
            if av.pacer.stats.audio_frames >= 30 and not av.pacer.audio_queued_s:
                break
            robot.run_until(robot.clock() + FRAME)
    elif when == "long after":
        robot.run_until(t0 + 3.0)
    elif when == "just after a clip":
        for _ in range(300):                                         # the clip's last tick
            if robot.clock() - av.pacer.clip_ended_at < 0.1:
                break
            robot.run_until(robot.clock() + FRAME)
        queued = av.pacer.stats.audio_frames
        robot.run_until(av.pacer.clip_ended_at + 0.2)                # the stream plays on after it
        assert av.pacer.stats.audio_frames > queued
    before = sounding(robot)
    av.stop("the driver was deactivated")
    robot.run_until(robot.clock() + 1.0)
    after = sounding(robot) - before
    if when in ("mid-stream", "as it ran dry"):
        assert after <= 1, (when, after)                             # (the frame under way)
        assert aborts(robot) == 1
        assert sounding(robot) < 30                                  # not all of it played
    elif when == "during a clip":
        assert aborts(robot) == 1                                    # the clip's, once
    else:
        assert aborts(robot) == 0, when


def test_the_guard_waits_a_second_of_reports_and_moves_one_tick_at_a_time():
    guard = BufferGuard()
    now, sent, played = 0.0, 100, 100 - PREROLL_FRAMES
    for _ in range(30):                                 # a second at the preroll's level
        assert guard.on_state(sent, played, now) == 0
        now += FRAME
        sent += 1
        played += 1
    assert guard.on_state(sent, played, now) == 0 and guard.stats.level == PREROLL_FRAMES
    moves = []
    for _ in range(90):                                 # the robot plays no more than half
        now += FRAME
        sent += 1
        played += _ % 2
        moves.append(guard.on_state(sent, played, now))
    assert moves.count(1) == 2 and moves.count(-1) == 0 and guard.stats.level > HIGH_FRAMES
    guard.reset()
    moves = [guard.on_state(10 + k, 9 + k, k * FRAME) for k in range(31)]  # one frame held
    assert moves[-1] == -1 and guard.stats.ticks_hastened == 1
    # no frames went out that second (a pause): a buffer run low is no reason
    idle = [guard.on_state(41, 40, 1.1 + k * FRAME) for k in range(31)]
    assert idle[-1] == 0
    # counts that cannot line up (the robot's did not start again from 0): nothing moves
    for played in (5000, -5000):
        guard.reset()
        odd = [guard.on_state(100 + k, played + k, k * FRAME) for k in range(31)]
        assert odd[-1] == 0 and guard.stats.level == 100 - played
    assert (guard.stats.ticks_held, guard.stats.ticks_hastened) == (2, 1)  # those of above only


def test_docs_state_the_guards_bounds_as_the_code_has_them():
    from pathlib import Path

    from cozmo_driver.anim import robot_buffer as rb
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "media.md").read_text().split())
    assert f"starts playing once {rb.PREROLL_FRAMES} audio frames wait" in text
    assert f"above {rb.HIGH_FRAMES} frames while the robot plays" in text
    share = rb._STREAMING_SHARE
    assert (f"at {rb.LOW_FRAMES} or fewer while the stream sent at least {share:.0%} of that "
            f"second's frames ({round(share * 30)} of 30)").replace("%", " %") in text
    assert f"above {rb.MAX_FRAMES} frames: a robot whose counts did not start again" in text
    assert rb.WINDOW_S == 1.0 and "Over each second the median decides" in text
