"""Clips compiled onto the 30 fps tick grid, and the AnimationPlayer (explicit clock)."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest

from cozmo_driver.anim.clip import (
    BODY_ARC,
    BODY_STRAIGHT,
    BODY_TURN_IN_PLACE,
    AnimationError,
    AudioKeyframe,
    BodyKeyframe,
    Clip,
    EventKeyframe,
    FaceKeyframe,
    HeadKeyframe,
    LiftKeyframe,
    LightsKeyframe,
    RecordHeadingKeyframe,
    SpriteKeyframe,
    Tracks,
    TurnToRecordedHeadingKeyframe,
    load_builtin,
    synthesize,
)
from cozmo_driver.anim.player import (
    MAX_MOVE_MS,
    TRACK_WIDTH_MM,
    AnimationPlayer,
    arc_wheel_speeds,
    body_speed_notes,
    compile_clip,
    rgb_to_rgb555,
    tick_of,
)
from cozmo_driver.face.expressions import EXPRESSIONS
from cozmo_driver.face.procedural import FaceRenderer, interpolate
from cozmo_driver.protocol import messages as m
from cozmo_driver.protocol.audio import SAMPLE_RATE, SAMPLES_PER_FRAME, decode_ulaw
from cozmo_driver.protocol.display import decode_display, fit_to_frame

R = FaceRenderer()


def names(msgs) -> list[str]:
    return [x.NAME for x in msgs]


def of(msgs, name) -> list:
    return [x for x in msgs if x.NAME == name]


def flat(timeline) -> list:
    return [x for tick in timeline for x in tick]


# --------------------------------------------------------------------------- tick grid

@pytest.mark.parametrize("seconds", [0.5, 1.0, 2.0, 3.7, 10.0])
def test_exactly_30_audio_messages_per_second(seconds):
    clip = Clip("c", seconds, Tracks(audio=[AudioKeyframe(0, synthesize(f"tone(440, {seconds})"))]))
    timeline = compile_clip(clip).timeline()
    audio = [x for x in flat(timeline) if x.NAME in ("OutputAudio", "OutputSilence")]
    assert len(timeline) == len(audio) == math.ceil(seconds * 30)
    assert all(sum(x.NAME in ("OutputAudio", "OutputSilence") for x in tick) == 1 for tick in timeline)


def test_the_grid_is_a_thirtieth_of_a_second_not_33_ms():
    assert tick_of(1000) == 30 and tick_of(10_000) == 300 and tick_of(60_000) == 1800
    assert tick_of(33) == 1 and tick_of(16) == 0 and tick_of(17) == 1
    clip = Clip("c", 10.0, Tracks(head=[HeadKeyframe(9_900, 100, 10)]))
    compiled = compile_clip(clip)
    assert compiled.num_ticks == 300
    assert 297 in compiled.messages            # 9.9 s * 30 (with 33 ms steps it would be tick 300)


def test_framing_and_order_within_a_tick():
    clip = Clip("c", 0.2, Tracks(head=[HeadKeyframe(0, 100, 10)], face=[FaceKeyframe(0, EXPRESSIONS["happy"])]))
    timeline = compile_clip(clip).timeline(anim_id=7)
    # the robot's frame is an audio message and what follows it: audio first, always
    assert names(timeline[0]) == ["OutputSilence", "StartAnimation", "AnimHead", "DisplayImage"]
    assert timeline[0][1].anim_id == 7
    assert names(timeline[-1])[0] == "OutputSilence" and names(timeline[-1])[-1] == "EndAnimation"
    assert all(names(tick)[0] in ("OutputSilence", "OutputAudio") for tick in timeline)
    assert len(of(flat(timeline), "DisplayImage")) == 1        # a held face is not re-sent


# --------------------------------------------------------------------------- head and lift

def test_short_moves_are_one_message():
    clip = Clip("c", None, Tracks(head=[HeadKeyframe(100, 255, 30, 4)], lift=[LiftKeyframe(0, 50, 80)]))
    msgs = flat(compile_clip(clip).timeline())
    [head] = of(msgs, "AnimHead")
    # the variability is drawn here, as Anki's engine does; the message's second byte is the
    # high byte of its 16-bit duration there, so 0
    assert head.duration_ms == 255 and head.variability_deg == 0 and 26 <= head.angle_deg <= 34
    drawn = {of(flat(compile_clip(clip, rng=random.Random(seed)).timeline()), "AnimHead")[0].angle_deg
             for seed in range(40)}
    assert drawn <= set(range(26, 35)) and len(drawn) > 3
    assert of(msgs, "AnimLift") == [m.AnimLift(duration_ms=50, variability_mm=0, height_mm=80)]


def test_long_moves_become_chains_of_steps_of_at_most_255_ms():
    clip = Clip("c", None, Tracks(head=[HeadKeyframe(0, 200, -20), HeadKeyframe(300, 1000, 40, 3)],
                                  lift=[LiftKeyframe(0, 600, 90)]))
    compiled = compile_clip(clip, start_lift_height_mm=30)
    heads = [(k, x) for k in sorted(compiled.messages) for x in compiled.messages[k] if x.NAME == "AnimHead"]
    assert heads[0] == (0, m.AnimHead(duration_ms=200, variability_deg=0, angle_deg=-20))
    chain = heads[1:]
    assert len(chain) == 4                                          # ceil(1000 / 255)
    assert all(x.duration_ms == 250 for _, x in chain)              # 1000 / 4, all <= 255
    assert [x.angle_deg for _, x in chain][:3] == [-5, 10, 25]      # from -20 to 40 in quarters
    assert 37 <= chain[-1][1].angle_deg <= 43                        # the last: 40 +- 3, drawn
    assert [x.variability_deg for _, x in chain] == [0, 0, 0, 0]
    assert [k for k, _ in chain] == [tick_of(300 + 250 * i) for i in range(4)] == [9, 17, 24, 32]
    lifts = [x for k in sorted(compiled.messages) for x in compiled.messages[k] if x.NAME == "AnimLift"]
    assert [(x.duration_ms, x.height_mm) for x in lifts] == [(200, 50), (200, 70), (200, 90)]
    assert all(x.duration_ms <= MAX_MOVE_MS for x in lifts + [x for _, x in heads])


def test_a_long_move_interrupted_by_the_next_keyframe():
    clip = Clip("c", None, Tracks(head=[HeadKeyframe(0, 1000, 40), HeadKeyframe(500, 100, 0)]))
    compiled = compile_clip(clip, start_head_angle_deg=0)
    heads = [x for k in sorted(compiled.messages) for x in compiled.messages[k] if x.NAME == "AnimHead"]
    assert [x.angle_deg for x in heads] == [10, 20, 0]              # steps at 0 and 250 ms, then the next


def test_a_long_first_move_from_an_unknown_start_uses_set_head_angle():
    clip = Clip("c", None, Tracks(head=[HeadKeyframe(0, 800, 30)], lift=[LiftKeyframe(100, 500, 70)]))
    msgs = flat(compile_clip(clip).timeline())
    [head] = of(msgs, "SetHeadAngle")
    assert head.angle_rad == pytest.approx(math.radians(30), abs=1e-6) and head.duration_sec == pytest.approx(0.8)
    [lift] = of(msgs, "SetLiftHeight")
    assert lift.height_mm == 70 and lift.duration_sec == pytest.approx(0.5)
    assert not of(msgs, "AnimHead") and not of(msgs, "AnimLift")


def test_angles_and_heights_are_clamped_to_their_fields():
    clip = Clip("c", None, Tracks(head=[HeadKeyframe(0, 100, 400, 500)], lift=[LiftKeyframe(0, 100, -5)]))
    msgs = flat(compile_clip(clip).timeline())
    head = of(msgs, "AnimHead")[0]
    assert -128 <= head.angle_deg <= 127 and head.variability_deg == 0
    assert of(msgs, "AnimLift")[0].height_mm == 0
    for x in msgs:
        x.encode_body()                                             # every message encodes


# --------------------------------------------------------------------------- body

def test_arc_formula():
    left, right = arc_wheel_speeds(100.0, 50.0)
    assert left == pytest.approx(100 * (50 - 23) / 50) and right == pytest.approx(100 * (50 + 23) / 50)
    # the centre moves at the given speed, and the yaw rate is v / r
    assert (left + right) / 2 == pytest.approx(100.0)
    assert (right - left) / TRACK_WIDTH_MM == pytest.approx(100.0 / 50.0)
    left, right = arc_wheel_speeds(60.0, -200.0)                    # to the right
    assert left > right and (left + right) / 2 == pytest.approx(60.0)
    with pytest.raises(ValueError):
        arc_wheel_speeds(10, 0)


def test_body_keyframes_become_drive_wheels_and_stop():
    clip = Clip("c", None, Tracks(body=[
        BodyKeyframe(0, 300, BODY_STRAIGHT, 50),
        BodyKeyframe(300, 300, BODY_ARC, 80, 100),
        BodyKeyframe(1000, 500, BODY_TURN_IN_PLACE, 90)]))
    compiled = compile_clip(clip)
    seq = [(k, (x.lwheel_speed_mmps, x.rwheel_speed_mmps)) for k in sorted(compiled.messages)
           for x in compiled.messages[k] if x.NAME == "DriveWheels"]
    w = math.radians(90) * TRACK_WIDTH_MM / 2
    expected = [(0, (50, 50)), (9, arc_wheel_speeds(80, 100)), (18, (0, 0)), (30, (-w, w)), (44, (0, 0))]
    assert [k for k, _ in seq] == [k for k, _ in expected]
    for (_, got), (_, want) in zip(seq, expected):
        assert got == pytest.approx(want, rel=1e-6)
    assert compiled.uses_body


def test_body_motion_beyond_the_treads_limit_is_scaled_keeping_its_curvature():
    """A clip's wheel speeds beyond the treads' 200 mm/s went out as written, and the
    robot (and the simulator) clamps each wheel alone: an arc (150 mm/s, radius 30 mm:
    wheels 35 and 265 mm/s) became a wider one, and the warning went into
    CompiledClip.warnings, which nothing reads. Now both wheels are scaled by one factor
    to the limit, keeping the curvature, in AnimBody's mode too, each with a note
    (AnimationLibrary.load logs it when it loads the clip); what is within the limit
    is left as it was."""
    clip = Clip("fast", None, Tracks(body=[
        BodyKeyframe(0, 300, BODY_ARC, 150, 30),
        BodyKeyframe(300, 300, BODY_TURN_IN_PLACE, 720),
        BodyKeyframe(600, 300, BODY_STRAIGHT, -250),
        BodyKeyframe(900, 300, BODY_ARC, 100, 200)]))
    compiled = compile_clip(clip)
    drives = [(x.lwheel_speed_mmps, x.rwheel_speed_mmps) for k in sorted(compiled.messages)
              for x in compiled.messages[k] if x.NAME == "DriveWheels" and (x.lwheel_speed_mmps or x.rwheel_speed_mmps)]
    left, right = arc_wheel_speeds(150, 30)
    turn = math.radians(720) * TRACK_WIDTH_MM / 2
    expected = [(200 * left / right, 200.0), (-200.0, 200.0), (-200.0, -200.0), arc_wheel_speeds(100, 200)]
    assert len(drives) == len(expected)
    for got, want in zip(drives, expected):
        assert got == pytest.approx(want, rel=1e-6)
    assert (drives[0][1] - drives[0][0]) / (drives[0][0] + drives[0][1]) == pytest.approx(
        (right - left) / (left + right))  # the arc's radius is kept
    notes = [w for w in compiled.warnings if "mm/s of a wheel" in w]
    assert notes == [
        f"fast: body motion at 0 ms asks {right:.0f} mm/s of a wheel, beyond the treads' 200 mm/s: "
        f"both wheels scaled by {200 / right:.2f} (the curvature kept; it goes less far)",
        f"fast: body motion at 300 ms asks {turn:.0f} mm/s of a wheel, beyond the treads' 200 mm/s: "
        f"both wheels scaled by {200 / turn:.2f} (the curvature kept; it goes less far)",
        "fast: body motion at 600 ms asks 250 mm/s of a wheel, beyond the treads' 200 mm/s: "
        "both wheels scaled by 0.80 (the curvature kept; it goes less far)"]
    assert body_speed_notes(clip) == notes
    bodies = [(x.speed_mmps, x.unknown) for x in of(flat(compile_clip(clip, body_mode="anim").timeline()), "AnimBody")
              if x.speed_mmps]
    assert bodies == [(round(150 * 200 / right), 30), (round(720 * 200 / turn), 0), (-200, 32767), (100, 200)]


def test_body_in_anim_mode_follows_ankis_body_motion():
    clip = Clip("c", None, Tracks(body=[BodyKeyframe(0, 100, BODY_STRAIGHT, 50),
                                        BodyKeyframe(200, 100, BODY_TURN_IN_PLACE, -90),
                                        BodyKeyframe(400, 100, BODY_ARC, 40, -120)]))
    msgs = of(flat(compile_clip(clip, body_mode="anim").timeline()), "AnimBody")
    assert [(x.speed_mmps, x.unknown) for x in msgs] == [
        (50, 32767), (0, 32767), (-90, 0), (0, 32767), (40, -120), (0, 32767)]
    with pytest.raises(ValueError):
        compile_clip(clip, body_mode="jump")


# --------------------------------------------------------------------------- lights

def test_rgb555_is_exact_for_every_channel_value():
    for c in range(256):
        q = math.floor(c * 31 / 255 + 0.5)
        assert rgb_to_rgb555((c, 0, 0)) == q << 10
        assert rgb_to_rgb555((0, c, 0)) == q << 5
        assert rgb_to_rgb555((0, 0, c)) == q
    assert rgb_to_rgb555((255, 255, 255)) == 0x7FFF
    assert rgb_to_rgb555((0, 0, 0), ir=True) == 0x8000
    assert rgb_to_rgb555((132, 0, 0)) == 16 << 10          # 16.04 rounds to 16 (pycozmo truncates to 16 too)
    assert rgb_to_rgb555((9, 0, 0)) == 1 << 10              # 1.09 -> 1; 8 -> 0.97 -> 1 (pycozmo: 0)
    assert rgb_to_rgb555((8, 0, 0)) == 1 << 10


def test_lights_on_then_off():
    colours = ((255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255), (8, 16, 24))
    clip = Clip("c", None, Tracks(lights=[LightsKeyframe(0, 500, colours), LightsKeyframe(500, 200, ((1, 1, 1),) * 5),
                                          LightsKeyframe(1000, 100, ((0, 0, 0),) * 5)]))
    compiled = compile_clip(clip)
    seq = [(k, x.colors) for k in sorted(compiled.messages) for x in compiled.messages[k]]
    assert seq[0] == (0, [0x7C00, 0x03E0, 0x001F, 0x7FFF, (1 << 10) | (2 << 5) | 3])
    # no off between back-to-back keyframes; the last off (1100 ms) goes into the clip's last tick
    assert [k for k, _ in seq] == [0, 15, 21, 30, 32]
    assert seq[2][1] == [0] * 5


# --------------------------------------------------------------------------- face and sprites

def test_face_is_interpolated_between_keyframes():
    a, b = EXPRESSIONS["neutral"], EXPRESSIONS["surprised"]
    clip = Clip("c", 2.0, Tracks(face=[FaceKeyframe(0, a), FaceKeyframe(1000, b)]))
    compiled = compile_clip(clip)
    timeline = compiled.timeline()
    shown = {k: decode_display(of(tick, "DisplayImage")[0].image) for k, tick in enumerate(timeline)
             if of(tick, "DisplayImage")}
    assert np.array_equal(shown[0], R.render_display(a))
    assert np.array_equal(shown[15], fit_to_frame(R.render_display(interpolate(a, b, 0.5)))[1])
    assert np.array_equal(shown[30], R.render_display(b))
    assert max(shown) == 30                                  # held after the last keyframe: nothing more
    assert 10 <= len(shown) <= 31


def test_nothing_is_shown_before_the_first_face_keyframe():
    clip = Clip("c", 1.0, Tracks(face=[FaceKeyframe(500, EXPRESSIONS["sad"])]))
    timeline = compile_clip(clip).timeline()
    first = [k for k, tick in enumerate(timeline) if of(tick, "DisplayImage")]
    assert first == [15]


def test_sprites_show_one_frame_per_tick_over_the_face():
    frames = []
    for i in range(3):
        f = np.zeros((64, 128), dtype=bool)
        f[:, 10 * i:10 * i + 4] = True
        frames.append(f)
    clip = Clip("c", 0.5, Tracks(face=[FaceKeyframe(0, EXPRESSIONS["neutral"])],
                                 sprite=[SpriteKeyframe(100, "s", frames), SpriteKeyframe(400, "missing", None)]))
    timeline = compile_clip(clip).timeline()
    shown = {k: decode_display(of(t, "DisplayImage")[0].image) for k, t in enumerate(timeline) if of(t, "DisplayImage")}
    assert sorted(shown) == [0, 3, 4, 5, 6]
    for i in range(3):
        assert np.array_equal(shown[3 + i], frames[i][0::2])
    assert np.array_equal(shown[6], R.render_display(EXPRESSIONS["neutral"]))   # the face comes back


# --------------------------------------------------------------------------- audio, headings, events

def test_audio_is_mixed_on_the_sample_grid():
    tone = synthesize("tone(1000, 0.1, 0.5)")
    clip = Clip("c", 1.0, Tracks(audio=[AudioKeyframe(500, tone), AudioKeyframe(550, tone)]))
    compiled = compile_clip(clip)
    sounding = [k for k, a in enumerate(compiled.audio) if a is not None]
    assert sounding[0] == 15 and sounding[-1] == math.ceil((0.55 * SAMPLE_RATE + len(tone)) / SAMPLES_PER_FRAME) - 1
    pcm = np.concatenate([decode_ulaw(compiled.audio[k]) if compiled.audio[k] else np.zeros(744, np.int16)
                          for k in range(compiled.num_ticks)])
    start = int(0.5 * SAMPLE_RATE)
    assert np.abs(pcm[:start - 2]).max() == 0 and np.abs(pcm[start + 50:start + 100]).max() > 1000
    overlap = pcm[int(0.56 * SAMPLE_RATE):int(0.59 * SAMPLE_RATE)]
    assert np.abs(overlap).max() > 25000                     # two in-phase-ish tones add


def test_headings_events_and_warnings():
    clip = Clip("c", None, Tracks(
        record_heading=[RecordHeadingKeyframe(0)],
        turn_to_recorded_heading=[TurnToRecordedHeadingKeyframe(500, 400, 10, 90)],
        events=[EventKeyframe(100, "boom")],
        audio=[AudioKeyframe(0)]))
    compiled = compile_clip(clip)
    assert [x.NAME for x in compiled.messages[0]] == ["RecordHeading"]
    assert [x.NAME for x in compiled.messages[15]] == ["TurnToRecordedHeading"]
    assert compiled.events == {3: ["boom"]}
    text = "\n".join(compiled.warnings)
    assert "TurnToRecordedHeading parameters" in text and "no sound" in text


def test_too_long_clips_are_refused():
    with pytest.raises(AnimationError):
        compile_clip(Clip("c", 3600.0))


# --------------------------------------------------------------------------- the player

def play_on_time(player, clip, t0=100.0, extra_ticks=3):
    """Each tick's messages, a tick every 1/30 s from ``t0`` until the clip has ended and
    ``extra_ticks`` more; a player that has not ended 30 ticks after the clip fails the test."""
    player.play(clip, t0)
    out = []
    k = 0
    while player.playing or k < extra_ticks:
        assert k < clip.num_ticks + extra_ticks + 30, \
            f"the player still plays after {k} ticks of a clip of {clip.num_ticks}"
        out.append(player.tick(t0 + k / 30))
        k += 1
    return out


def test_play_on_time_gives_up_on_a_player_that_never_ends():
    class Endless:
        playing = True

        def play(self, clip, t0):
            pass

        def tick(self, now):
            return []

    with pytest.raises(AssertionError, match="the player still plays after 36 ticks of a clip of 3"):
        play_on_time(Endless(), SimpleNamespace(num_ticks=3))


def test_player_on_time_matches_the_timeline():
    clip = load_builtin("greet")
    compiled = compile_clip(clip)
    player = AnimationPlayer()
    ticks = play_on_time(player, compiled)
    assert ticks[:compiled.num_ticks] == compiled.timeline(anim_id=1)
    assert all(t == [] for t in ticks[compiled.num_ticks:])
    s = player.stats
    assert s.ticks == compiled.num_ticks and s.underruns == 0 and s.display_dropped == 0
    assert s.audio_frames + s.silence_frames == compiled.num_ticks
    assert s.clips_started == s.clips_finished == 1
    assert player.progress(1e9) == 1.0


def test_anim_ids_count_and_wrap():
    player = AnimationPlayer(first_anim_id=254)
    ids = []
    for i in range(4):
        ids.append(player.play(Clip("c", 0.1), float(i)))
        player.tick(float(i) + 1)
    assert ids == [254, 255, 1, 2]


def test_progress_and_events():
    clip = Clip("c", 1.0, Tracks(events=[EventKeyframe(500, "half")]))
    player = AnimationPlayer()
    player.play(clip, 0.0)
    assert player.progress(0.0) == 0.0
    seen = []
    last = -1.0
    for k in range(30):
        player.tick(k / 30)
        p = player.progress(k / 30)
        assert p >= last
        last = p
        seen += [(k, e) for e in player.take_events()]
    assert seen == [(15, "half")]
    assert player.progress(1.0) == 1.0 and not player.playing


def test_late_ticks_catch_up_audio_but_drop_old_display_frames():
    a, b = EXPRESSIONS["neutral"], EXPRESSIONS["angry"]
    tone = synthesize("tone(800, 1.0)")
    clip = Clip("c", 1.0, Tracks(face=[FaceKeyframe(0, a), FaceKeyframe(1000, b)], audio=[AudioKeyframe(0, tone)]))
    player = AnimationPlayer()
    player.play(clip, 0.0)
    first = player.tick(0.0)
    assert names(first) == ["OutputAudio", "StartAnimation", "DisplayImage"]   # audio first
    late = player.tick(10.5 / 30)                 # ticks 1..10 at once
    assert len(of(late, "OutputAudio")) == 10     # no audio is lost
    assert len(of(late, "DisplayImage")) == 1     # only the newest face
    shown = decode_display(of(late, "DisplayImage")[0].image)
    assert np.array_equal(shown, fit_to_frame(R.render_display(interpolate(a, b, 10 / 30)))[1])
    assert names(late)[-2:] == ["OutputAudio", "DisplayImage"]
    assert player.stats.underruns == 9            # ticks 1..9 went out after their slot
    assert player.stats.display_dropped == 9
    player.tick(11 / 30)
    assert player.stats.underruns == 9


def test_cancel_stops_and_restores():
    clip = Clip("c", 2.0, Tracks(body=[BodyKeyframe(0, 2000, BODY_STRAIGHT, 50)],
                                 lights=[LightsKeyframe(0, 2000, ((255, 0, 0),) * 5)]))
    player = AnimationPlayer()
    player.play(clip, 0.0)
    for k in range(15):
        player.tick(k / 30)
    out = player.cancel(0.5)
    # no AnimBackpackLights: the abort hands the backpack back to the user's lights, and a
    # stream message after it would start the robot's emptied buffer without audio
    assert names(out) == ["AbortAnimation", "DriveWheels"]
    assert out[1] == m.DriveWheels()
    assert not player.playing and player.tick(1.0) == []
    assert player.progress(5.0) == pytest.approx(0.25)   # frozen where it stopped
    assert player.stats.clips_cancelled == 1
    assert AnimationPlayer().cancel(0.0) == []


def test_a_clip_that_only_turns_to_a_recorded_heading_drives_the_treads_and_a_cancel_stops_them():
    """TurnToRecordedHeading turns the robot on its treads: a clip with only that track
    counted as not driving them, so its cancel sent no DriveWheels(0, 0) and the turn
    went on (and the driver gave the treads to nobody: tracks.moves_treads)."""
    tracks = Tracks(record_heading=[RecordHeadingKeyframe(0)],
                    turn_to_recorded_heading=[TurnToRecordedHeadingKeyframe(100, 800)])
    assert tracks.moves_treads and not tracks.drives_forwards
    clip = Clip("turn_back", 1.0, tracks)
    assert compile_clip(clip).uses_body
    player = AnimationPlayer()
    player.play(clip, 0.0)
    player.tick(0.2)
    assert names(player.cancel(0.3)) == ["AbortAnimation", "DriveWheels"]
    assert not Tracks(record_heading=[RecordHeadingKeyframe(0)]).moves_treads


@pytest.mark.parametrize("body_mode", ["wheels", "anim"])
def test_the_player_says_when_the_treads_drive_forwards(body_mode):
    """The driver holds a clip's forward drive at a table edge as it holds cmd_vel's: the
    player says whether the treads drive forwards after the last tick sent or one due."""
    clip = Clip("c", 2.0, Tracks(body=[BodyKeyframe(0, 300, BODY_TURN_IN_PLACE, 90),
                                       BodyKeyframe(500, 300, BODY_STRAIGHT, 50),
                                       BodyKeyframe(1000, 300, BODY_STRAIGHT, -50),
                                       BodyKeyframe(1500, 300, BODY_ARC, 40, -100)]))
    assert clip.tracks.drives_forwards
    compiled = compile_clip(clip, body_mode=body_mode)
    assert [k for k, f in enumerate(compiled.forwards) if f] == list(range(15, 24)) + list(range(45, 54))
    player = AnimationPlayer()
    player.play(compiled, 0.0)
    seen = []
    for k in range(60):
        seen.append(player.drives_forwards(k / 30))   # before tick k is sent
        player.tick(k / 30)
    assert [k for k, f in enumerate(seen) if f] == list(range(15, 25)) + list(range(45, 55))
    assert not AnimationPlayer().drives_forwards(0.0)


def test_playing_over_a_clip_cancels_it_first():
    player = AnimationPlayer()
    player.play(Clip("a", 1.0, Tracks(body=[BodyKeyframe(0, 900, BODY_STRAIGHT, 20)])), 0.0)
    player.tick(0.0)
    new_id = player.play(Clip("b", 0.2), 0.1)
    out = player.tick(0.1)
    assert names(out)[:4] == ["AbortAnimation", "DriveWheels", "OutputSilence", "StartAnimation"]
    assert out[3].anim_id == new_id


def test_lead_ticks_send_early():
    player = AnimationPlayer(lead_ticks=2)
    player.play(Clip("c", 1.0), 0.0)
    out = player.tick(0.0)
    assert len([x for x in out if x.NAME == "OutputSilence"]) == 3 and player.stats.underruns == 0
    assert player.next_deadline() == pytest.approx(1 / 30)


def test_play_takes_compile_options_such_as_the_start_angle():
    clip = Clip("c", None, Tracks(head=[HeadKeyframe(0, 600, 30)]))
    player = AnimationPlayer()
    player.play(clip, 0.0, start_head_angle_deg=0.0)
    first = player.tick(0.0)
    assert of(first, "AnimHead")[0].angle_deg == 10              # a chain from 0, not SetHeadAngle
    player.play(clip, 1.0)
    assert of(player.tick(1.0), "SetHeadAngle")
