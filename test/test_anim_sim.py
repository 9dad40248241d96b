"""End to end: clips and the pacer through the project's engine session into the simulated
robot over the in-memory link, with an explicit clock (deterministic)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cozmo_driver.anim.av_pacer import AVPacer
from cozmo_driver.anim.clip import (
    AudioKeyframe,
    Clip,
    FaceKeyframe,
    HeadKeyframe,
    LiftKeyframe,
    LightsKeyframe,
    Tracks,
    load_builtin,
    synthesize,
)
from cozmo_driver.anim.player import AnimationPlayer, compile_clip, rgb_to_rgb555
from cozmo_driver.face.expressions import EXPRESSIONS
from cozmo_driver.face.procedural import FaceRenderer
from cozmo_driver.protocol import messages as m
from cozmo_driver.protocol.audio import SAMPLE_RATE, SAMPLES_PER_FRAME
from cozmo_driver.protocol.display import fit_to_frame
from cozmo_driver.protocol.session import MessageReceived, Role, Session
from cozmo_driver.sim import RobotConfig, SimulatedRobot
from cozmo_driver.transport.memory import MemoryLink

R = FaceRenderer()
FRAME = 1 / 30


class Rig:
    """The engine session and a simulated robot joined by a MemoryLink; the robot boots at 0."""

    def __init__(self, seed: int = 0) -> None:
        self.robot = SimulatedRobot(config=RobotConfig(seed=seed))
        self.engine = Session(Role.ENGINE)
        self.link = MemoryLink(self.engine, self.robot, seed=seed)
        self.events: list = []
        self.link.on_event_a = self.events.append
        self.model = self.robot.model

    def initialise(self) -> None:
        link, engine = self.link, self.engine
        engine.connect(link.now)
        assert link.run_while(lambda: not engine.is_connected, 3.0)
        engine.send(m.Enable())
        link.flush()
        assert link.run_while(lambda: not self.names("BodyInfo"), 3.0)
        engine.send(m.SetOrigin(pose_frame_id=0, pose_origin_id=1))
        engine.send(m.SyncTime(timestamp_ms=0))
        link.flush()
        assert link.run_while(lambda: not self.names("RobotState"), 3.0)

    def names(self, name: str) -> list:
        return [e.message for e in self.events if isinstance(e, MessageReceived) and e.message.NAME == name]

    def send(self, msgs) -> None:
        for x in msgs:
            self.engine.send(x)
        self.link.flush()


def test_a_clip_plays_in_the_simulator_with_sound_face_and_motion_on_time():
    rig = Rig(seed=2)
    rig.initialise()
    rig.link.run_until(1.0)
    head0 = math.degrees(rig.model.head_angle)
    lift0 = rig.model.lift_height
    tone = synthesize("tone(1000, 0.5, 0.5)")
    clip = Clip("e2e", 1.5, Tracks(
        face=[FaceKeyframe(0, EXPRESSIONS["happy"])],
        audio=[AudioKeyframe(200, tone)],
        head=[HeadKeyframe(500, 200, 30)],
        lift=[LiftKeyframe(800, 200, 80)],
        lights=[LightsKeyframe(100, 1000, ((0, 255, 0),) * 5)]))
    player = AnimationPlayer()
    t0 = 31 / 30 + 0.002                          # just after a tick of the robot's own 30 fps grid
    rig.link.run_until(t0)
    anim_id = player.play(clip, t0)
    samples = []                                  # (time, head deg, lift mm)
    t = t0
    frames_before = rig.model.audio_frames_played
    started_at = None
    while player.playing or t < t0 + 2.0:
        rig.send(player.tick(t))
        for _ in range(6):                        # sample the robot every 1/180 s
            t += FRAME / 6
            rig.link.run_until(t)
            samples.append((t, math.degrees(rig.model.head_angle), rig.model.lift_height))
            if started_at is None and rig.names("AnimationStarted"):
                started_at = t
    assert [x.anim_id for x in rig.names("AnimationStarted")] == [anim_id]
    assert [x.anim_id for x in rig.names("AnimationEnded")] == [anim_id]

    # Audio: exactly the clip's frames, the tone at 1 kHz, starting 200 ms in, 0.5 s long.
    assert rig.model.audio_frames_played - frames_before == 45
    pcm = rig.model.audio_pcm()[-45 * SAMPLES_PER_FRAME:].astype(np.float64)
    loud = np.flatnonzero(np.abs(pcm) > 2000)
    onset, offset = loud[0] / SAMPLE_RATE, loud[-1] / SAMPLE_RATE
    assert onset == pytest.approx(0.2, abs=FRAME)
    assert offset - onset == pytest.approx(0.5, abs=FRAME)
    seg = pcm[loud[0]:loud[-1]]
    peak = np.argmax(np.abs(np.fft.rfft(seg * np.hanning(len(seg))))) * SAMPLE_RATE / len(seg)
    assert peak == pytest.approx(1000, abs=5)

    # Face: the happy face in the framebuffer.
    assert np.array_equal(rig.model.framebuffer, fit_to_frame(R.render_display(EXPRESSIONS["happy"]))[1])
    assert rig.model.lights()["anim_backpack"] == [0] * 5          # off again after 1.1 s

    # Motion on time: measured from when the robot played the first frame.
    def onset_time(series, start_value):
        for ts, value in series:
            if abs(value - start_value) > 0.5:
                return ts
        raise AssertionError("never moved")

    head_start = onset_time([(ts, h) for ts, h, _ in samples], head0)
    lift_start = onset_time([(ts, li) for ts, _, li in samples], lift0)
    print(f"onsets after the first frame: head {head_start - started_at:.4f} s, lift {lift_start - started_at:.4f} s, "
          f"sound {onset:.4f}..{offset:.4f} s, {peak:.1f} Hz")
    assert head_start - started_at == pytest.approx(0.5, abs=FRAME)
    assert lift_start - started_at == pytest.approx(0.8, abs=FRAME)
    assert samples[-1][1] == pytest.approx(30, abs=1.0) and samples[-1][2] == pytest.approx(80, abs=1.0)


def test_lights_reach_the_robot_in_rgb555():
    rig = Rig()
    rig.initialise()
    player = AnimationPlayer()
    colours = ((255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (10, 20, 30))
    player.play(Clip("l", 1.0, Tracks(lights=[LightsKeyframe(0, 2000, colours)])), rig.link.now)
    t = rig.link.now
    for _ in range(10):
        rig.send(player.tick(t))
        t += FRAME
        rig.link.run_until(t)
    assert rig.model.lights()["anim_backpack"] == [rgb_to_rgb555(c) for c in colours]


@pytest.mark.parametrize("name", ["celebrate", "sneeze"])
def test_builtin_animations_play_through_without_drops(name):
    rig = Rig()
    rig.initialise()
    compiled = compile_clip(load_builtin(name))
    player = AnimationPlayer()
    t = rig.link.now
    before = rig.model.audio_frames_played
    player.play(compiled, t)
    while player.playing:
        rig.send(player.tick(t))
        t += FRAME
        rig.link.run_until(t)
    rig.link.run_until(t + 0.3)
    assert rig.model.audio_frames_played - before == compiled.num_ticks
    assert rig.model.anim_client_drops == 0 and rig.model.display_errors == 0
    assert rig.names("AnimationEnded")


def test_the_pacer_streams_audio_and_faces_into_the_simulator():
    rig = Rig()
    rig.initialise()
    pacer = AVPacer(always_on=True)
    pacer.queue_audio(synthesize("tone(700, 1.0)"), rate=SAMPLE_RATE)
    t = rig.link.now
    before = rig.model.audio_frames_played
    faces = ["neutral", "happy", "sad", "angry"]
    sent_audio = 0
    for k in range(60):
        if k % 15 == 0:
            pacer.set_face(R.render(EXPRESSIONS[faces[k // 15]]))
        msgs = pacer.tick(t)
        sent_audio += sum(x.NAME in ("OutputAudio", "OutputSilence") for x in msgs)
        rig.send(msgs)
        t += FRAME
        rig.link.run_until(t)
    rig.link.run_until(t + 0.2)
    assert sent_audio == 60
    assert rig.model.audio_frames_played - before == 60
    assert rig.model.audio_frames_with_sound >= 30
    assert np.array_equal(rig.model.framebuffer, fit_to_frame(R.render_display(EXPRESSIONS["angry"]))[1])
