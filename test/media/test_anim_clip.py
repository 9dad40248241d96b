"""Clips: our YAML/JSON format, synthesised sounds, Cozmo's FlatBuffers .bin clips, groups, built-ins."""

from __future__ import annotations

import json
import math
import os
import re
import struct
import wave
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from cozmo_driver.anim.clip import (
    BODY_ARC,
    BODY_STRAIGHT,
    BODY_TURN_IN_PLACE,
    AnimationGroup,
    AudioKeyframe,
    BodyKeyframe,
    Clip,
    ClipFormatError,
    EventKeyframe,
    FaceKeyframe,
    GroupChooser,
    GroupMember,
    HeadKeyframe,
    LiftKeyframe,
    LightsKeyframe,
    RecordHeadingKeyframe,
    SpriteKeyframe,
    Tracks,
    TurnToRecordedHeadingKeyframe,
    clips_from_anki_json,
    list_builtin,
    load_animation_groups,
    load_builtin,
    load_clip_file,
    load_clips_dir,
    parse_clip,
    read_anim_bin,
    synthesize,
    write_anim_bin,
)
from cozmo_driver.anim.player import compile_clip
from cozmo_driver.face.expressions import EXPRESSIONS, look_at
from cozmo_driver.face.procedural import FaceParams
from cozmo_driver.protocol.audio import SAMPLE_RATE
from dependencies import require

# --------------------------------------------------------------------------- helpers


def peak_hz(pcm: np.ndarray, rate: int = SAMPLE_RATE) -> float:
    x = pcm.astype(np.float64) * np.hanning(len(pcm))
    spectrum = np.abs(np.fft.rfft(x))
    return float(np.argmax(spectrum) * rate / len(pcm))


def write_wav(path: Path, pcm: np.ndarray, rate: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.astype("<i2").tobytes())


FULL_YAML = """
name: demo
duration_ms: 2000
description: every track
tracks:
  head:
    - {time_ms: 0, duration_ms: 150, angle_deg: 30}
    - {time_ms: 150, duration_ms: 600, angle_deg: -10, variability_deg: 2}
  lift:
    - {time_ms: 0, duration_ms: 300, height_mm: 60}
  body:
    - {time_ms: 0, duration_ms: 400, speed_mmps: 40}
    - {time_ms: 400, duration_ms: 500, speed_mmps: 50, radius_mm: 80}
    - {time_ms: 900, duration_ms: 300, speed_dps: -120}
  lights:
    - {time_ms: 0, duration_ms: 500, all: "#00ff40"}
    - {time_ms: 500, duration_ms: 500, left: [255, 0, 0], middle: "#0000ff"}
  face:
    - {time_ms: 0, expression: neutral}
    - {time_ms: 300, expression: happy, look_at: [0.3, -0.2]}
    - {time_ms: 600, expression: happy, params: {eyes.scale_y: 1.1, face.angle_deg: 8}}
  audio:
    - {time_ms: 0, source: "synth:chirp(600, 1400, 0.25, 0.6)"}
    - {time_ms: 500, source: beep.wav, volume: 0.5}
  events:
    - {time_ms: 500, id: apex}
  record_heading:
    - {time_ms: 0}
  turn_to_recorded_heading:
    - {time_ms: 1000, duration_ms: 800, offset_deg: 5, speed_dps: 180, accel_dps2: 900, decel_dps2: 800,
       tolerance_deg: 3, num_half_revs: 1, use_shortest_dir: true}
"""


@pytest.fixture
def demo_file(tmp_path: Path) -> Path:
    t = np.arange(22050 // 4) / 22050
    write_wav(tmp_path / "beep.wav", (10000 * np.sin(2 * np.pi * 660 * t)).astype(np.int16), 22050)
    path = tmp_path / "demo.yaml"
    path.write_text(FULL_YAML)
    return path


# --------------------------------------------------------------------------- our format

def test_yaml_clip_with_every_track(demo_file):
    [clip] = load_clip_file(demo_file)
    assert clip.name == "demo" and clip.duration_s == 2.0 and clip.warnings == [] and clip.mended == []
    t = clip.tracks
    assert t.head == [HeadKeyframe(0, 150, 30, 0), HeadKeyframe(150, 600, -10, 2)]
    assert t.lift == [LiftKeyframe(0, 300, 60, 0)]
    assert t.body == [BodyKeyframe(0, 400, BODY_STRAIGHT, 40), BodyKeyframe(400, 500, BODY_ARC, 50, 80),
                      BodyKeyframe(900, 300, BODY_TURN_IN_PLACE, -120)]
    assert t.lights[0].colors == ((0, 255, 64),) * 5
    assert t.lights[1].colors == ((255, 0, 0), (0, 0, 0), (0, 0, 255), (0, 0, 0), (0, 0, 0))
    assert t.face[0].params == EXPRESSIONS["neutral"]
    assert t.face[1].params == look_at(EXPRESSIONS["happy"], 0.3, -0.2)
    assert t.face[2].params.angle_deg == 8 and t.face[2].params.right.scale_y == 1.1
    chirp, beep = t.audio
    assert chirp.source.startswith("synth:") and len(chirp.pcm) == round(0.25 * SAMPLE_RATE)
    assert beep.source == "beep.wav" and abs(len(beep.pcm) - SAMPLE_RATE / 4) <= 2
    assert peak_hz(beep.pcm) == pytest.approx(660, abs=8)
    assert 4000 < np.abs(beep.pcm).max() < 5200        # volume 0.5 of 10000
    assert t.events == [EventKeyframe(500, "apex")]
    assert t.record_heading == [RecordHeadingKeyframe(0)]
    assert t.turn_to_recorded_heading == [TurnToRecordedHeadingKeyframe(1000, 800, 5, 180, 900, 800, 3, 1, True)]
    assert clip.end_s == pytest.approx(2.0)


def test_json_form_is_the_same(demo_file, tmp_path):
    import yaml

    doc = yaml.safe_load(FULL_YAML)
    path = tmp_path / "demo.json"
    path.write_text(json.dumps({"clips": [doc, dict(doc, name="demo2")]}))
    a, b = load_clip_file(path)
    [y] = load_clip_file(demo_file)
    assert (a.name, b.name) == ("demo", "demo2")
    assert a.tracks.head == y.tracks.head and a.tracks.face == y.tracks.face


@pytest.mark.parametrize("text, message", [
    ("name: x\ntracks: {head: [{time_ms: 0, angle_deg: 1, speed: 3}]}", "head[0]: unknown key(s) speed"),
    ("name: x\ntracks: {nose: []}", "unknown track(s) nose"),
    ("tracks: {}", "missing key(s) name"),
    ("name: x\nduration_ms: -5", "within 0..600000 ms"),
    ("name: x\ntracks: {head: [{time_ms: 4000000000, angle_deg: 1}]}", "within 0..600000 ms"),
    ("name: x\ntracks: {lights: [{time_ms: 0, all: '#12345'}]}", "colour must be"),
    ("name: x\ntracks: {lights: [{time_ms: 0, all: [300, 0, 0]}]}", "0..255"),
    ("name: x\ntracks: {face: [{time_ms: 0, expression: smug}]}", "unknown expression 'smug'"),
    ("name: x\ntracks: {face: [{time_ms: 0, params: {eyes.nose: 1}}]}", "unknown eye parameter"),
    ("name: x\ntracks: {body: [{time_ms: 0, duration_ms: 5}]}", "needs speed_mmps"),
    ("name: x\ntracks: {body: [{time_ms: 0, duration_ms: 5, speed_mmps: 5, radius_mm: 0}]}", "turn in place"),
    ("name: x\ntracks: {audio: [{time_ms: 0, source: 'synth:kazoo(1)'}]}", "unknown synth sound"),
    ("name: x\ntracks: {audio: [{time_ms: 0, source: missing.wav}]}", "cannot load audio"),
    ("name: x\ntracks: {audio: [{time_ms: 0}]}", "exactly one of source"),
    ("name: x\ntracks: {head: [{time_ms: .nan, angle_deg: 1}]}", "finite"),
    ("name: x\ntracks: {head: {time_ms: 0}}", "must be a list"),
    ("- 1\n- 2", "expected a clip mapping"),
    ("name: [unclosed", "invalid YAML"),
])
def test_format_errors_name_the_place(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ClipFormatError) as info:
        load_clip_file(path)
    assert message in str(info.value)
    assert "bad.yaml" in str(info.value)


def test_unknown_file_types_and_unreadable_files(tmp_path):
    (tmp_path / "x.txt").write_text("name: x")
    with pytest.raises(ClipFormatError, match="unknown clip file type"):
        load_clip_file(tmp_path / "x.txt")
    with pytest.raises(ClipFormatError, match="cannot read"):
        load_clip_file(tmp_path / "nope.yaml")


def test_load_clips_dir_and_duplicates(tmp_path):
    (tmp_path / "a.yaml").write_text("name: one")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "b.yaml").write_text("clips: [{name: two}, {name: three}]")
    clips = load_clips_dir(tmp_path)
    assert sorted(clips) == ["one", "three", "two"]
    assert sorted(load_clips_dir(tmp_path, recursive=False)) == ["one"]
    (sub / "c.yml").write_text("name: one")
    with pytest.raises(ClipFormatError, match="defined in"):
        load_clips_dir(tmp_path)


# --------------------------------------------------------------------------- synthesised sounds

def test_synth_tone_and_chirp():
    tone = synthesize("synth:tone(1000, 0.5, 0.5)")
    assert tone.dtype == np.int16 and len(tone) == SAMPLE_RATE // 2
    assert peak_hz(tone) == pytest.approx(1000, abs=3)
    assert 16000 < np.abs(tone).max() <= 16384
    assert abs(int(tone[0])) < 200 and abs(int(tone[-1])) < 200      # faded in and out
    chirp = synthesize("chirp(500, 1500, 1.0)")
    first, last = chirp[: SAMPLE_RATE // 5], chirp[-SAMPLE_RATE // 5:]
    assert peak_hz(first) < 800 < 1200 < peak_hz(last)
    beeps = synthesize("beeps(1000, 3, 0.1, 0.05)")
    assert len(beeps) == round(0.1 * SAMPLE_RATE) * 3 + round(0.05 * SAMPLE_RATE) * 2
    assert len(synthesize("noise(0.2, 0.3, 5)")) == round(0.2 * SAMPLE_RATE)
    assert np.array_equal(synthesize("noise(0.2, 0.3, 5)"), synthesize("noise(0.2, 0.3, 5)"))
    assert not synthesize("silence(0.1)").any()
    assert len(synthesize("warble(400, 50, 8, 0.3)")) == round(0.3 * SAMPLE_RATE)


@pytest.mark.parametrize("spec", ["tone(1000)", "tone(a, 1)", "tone(1000, 0)", "tone(1000, 99)", "buzz(1, 2)",
                                  "tone 1000", "beeps(1000, 0, 0.1, 0.1)", "tone(inf, 1)"])
def test_synth_errors(spec):
    with pytest.raises(ValueError):
        synthesize(spec)


@pytest.mark.parametrize("spec, message", [
    ("tone(11160, 0.5)", "frequency must be above 0 and below 11160 Hz"),
    ("tone(20000, 0.5)", "got 20000"),
    ("tone(0, 0.5)", "frequency must be above 0"),
    ("beeps(15000, 2, 0.1, 0.1)", "frequency must be above 0 and below 11160 Hz"),
    ("chirp(500, 12000, 0.5)", "end frequency must be 0 or above and below 11160 Hz"),
    ("warble(11000, 300, 5, 0.5)", "frequency plus depth must be below 11160 Hz"),
    ("tone(1000, 0.5, 1.5)", "volume must be within 0..1, got 1.5"),
    ("noise(0.5, -0.2)", "volume must be within 0..1, got -0.2"),
])
def test_synth_refuses_a_sound_it_cannot_make_as_asked(spec, message):
    """A frequency at or above half the robot's 22 320 Hz rate was clamped to it with no word,
    and sin(pi n) is 0: silence; a volume outside 0..1 was clamped quietly, where an audio
    keyframe's is refused. Both are refused now, saying why."""
    with pytest.raises(ValueError, match=re.escape(message)):
        synthesize(spec)
    assert synthesize("tone(11000, 0.1, 1.0)").any()            # just below: a tone


# --------------------------------------------------------------------------- FlatBuffers

def build_bin_by_hand() -> bytes:
    """An AnimClips file made directly with the flatbuffers Builder, following cozmo_anim.fbs."""
    flatbuffers = require("flatbuffers")
    b = flatbuffers.Builder(0)

    def floats(values):
        b.StartVector(4, len(values), 4)
        for v in reversed(values):
            b.PrependFloat32(v)
        return b.EndVector()

    def tables(offsets):
        b.StartVector(4, len(offsets), 4)
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    # HeadAngle {triggerTime_ms, durationTime_ms, angle_deg: byte, angleVariability_deg: ubyte}
    heads = []
    for t, d, a, v in ((0, 400, -20, 0), (500, 100, 35, 3)):
        b.StartObject(4)
        b.PrependUint32Slot(0, t, 0)
        b.PrependUint32Slot(1, d, 0)
        b.PrependInt8Slot(2, a, 0)
        b.PrependUint8Slot(3, v, 0)
        heads.append(b.EndObject())
    # LiftHeight {triggerTime_ms, durationTime_ms, height_mm: ubyte, heightVariability_mm: ubyte}
    b.StartObject(4)
    b.PrependUint32Slot(0, 100, 0)
    b.PrependUint32Slot(1, 300, 0)
    b.PrependUint8Slot(2, 70, 0)
    lift = b.EndObject()
    # ProceduralFace {triggerTime_ms, faceAngle, faceCenterX, faceCenterY, faceScaleX, faceScaleY, leftEye, rightEye}
    face = EXPRESSIONS["angry"]
    left = floats(face.left.to_list())
    right = floats(face.right.to_list())
    b.StartObject(8)
    b.PrependUint32Slot(0, 33, 0)
    b.PrependFloat32Slot(1, 4.0, 0.0)
    b.PrependFloat32Slot(2, -3.0, 0.0)
    b.PrependFloat32Slot(3, 2.0, 0.0)
    b.PrependFloat32Slot(4, 1.25, 1.0)
    # faceScaleY left out: its default is 1
    b.PrependUOffsetTRelativeSlot(6, left, 0)
    b.PrependUOffsetTRelativeSlot(7, right, 0)
    proc = b.EndObject()
    # RobotAudio {triggerTime_ms, audioEventId: [long], volume = 1, probability: [float], hasAlts = true}
    b.StartVector(8, 2, 8)
    b.PrependInt64(2263734285)
    b.PrependInt64(1234567890123)
    ids = b.EndVector()
    probs = floats([0.5, 0.5])
    b.StartObject(5)
    b.PrependUint32Slot(0, 250, 0)
    b.PrependUOffsetTRelativeSlot(1, ids, 0)
    b.PrependFloat32Slot(2, 0.7, 1.0)
    b.PrependUOffsetTRelativeSlot(3, probs, 0)
    b.PrependBoolSlot(4, False, True)
    audio = b.EndObject()
    # BackpackLights {triggerTime_ms, durationTime_ms, Left, Right, Front, Middle, Back}
    colours = [floats(c) for c in ([1, 0, 0, 0], [0, 0, 1, 1], [0, 1, 0, 0], [1, 1, 1, 0], [0.5, 0.5, 0, 0])]
    b.StartObject(7)
    b.PrependUint32Slot(0, 0, 0)
    b.PrependUint32Slot(1, 600, 0)
    for slot, off in enumerate(colours, start=2):
        b.PrependUOffsetTRelativeSlot(slot, off, 0)
    lights = b.EndObject()
    # FaceAnimation {triggerTime_ms, animName}, Event {triggerTime_ms, event_id}
    sprite_name = b.CreateString("anim_sprite")
    b.StartObject(2)
    b.PrependUint32Slot(0, 700, 0)
    b.PrependUOffsetTRelativeSlot(1, sprite_name, 0)
    sprite = b.EndObject()
    event_name = b.CreateString("DEVICE_AUDIO_TRIGGER")
    b.StartObject(2)
    b.PrependUint32Slot(0, 800, 0)
    b.PrependUOffsetTRelativeSlot(1, event_name, 0)
    event = b.EndObject()
    # BodyMotion {triggerTime_ms, durationTime_ms, radius_mm: string, speed: short}
    bodies = []
    for t, d, r, s in ((0, 300, "STRAIGHT", 50), (300, 200, "TURN_IN_PLACE", -90), (500, 400, "120", 60)):
        rs = b.CreateString(r)
        b.StartObject(4)
        b.PrependUint32Slot(0, t, 0)
        b.PrependUint32Slot(1, d, 0)
        b.PrependUOffsetTRelativeSlot(2, rs, 0)
        b.PrependInt16Slot(3, s, 0)
        bodies.append(b.EndObject())
    # RecordHeading {triggerTime_ms}; TurnToRecordedHeading {...}
    b.StartObject(1)
    b.PrependUint32Slot(0, 900, 0)
    record = b.EndObject()
    b.StartObject(9)
    b.PrependUint32Slot(0, 1000, 0)
    b.PrependUint32Slot(1, 500, 0)
    b.PrependInt16Slot(2, -15, 0)
    b.PrependInt16Slot(3, 200, 0)
    b.PrependInt16Slot(4, 800, 1000)
    # decel left at its default 1000
    b.PrependUint16Slot(6, 4, 2)
    b.PrependUint16Slot(7, 2, 0)
    b.PrependBoolSlot(8, True, False)
    turn = b.EndObject()
    vecs = [tables([lift]), tables([proc]), tables(heads), tables([audio]), tables([lights]),
            tables([sprite]), tables([event]), tables(bodies), tables([record]), tables([turn])]
    b.StartObject(10)
    for slot, v in enumerate(vecs):
        b.PrependUOffsetTRelativeSlot(slot, v, 0)
    keyframes = b.EndObject()
    name = b.CreateString("anim_handmade_01")
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependUOffsetTRelativeSlot(1, keyframes, 0)
    clip = b.EndObject()
    empty_name = b.CreateString("anim_empty")
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, empty_name, 0)
    empty = b.EndObject()
    clips = tables([clip, empty])
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, clips, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def test_read_a_bin_built_with_the_flatbuffers_builder():
    clip, empty = read_anim_bin(build_bin_by_hand(), "handmade.bin")
    assert clip.name == "anim_handmade_01" and empty.name == "anim_empty"
    assert empty.tracks == Tracks() and empty.warnings == []
    t = clip.tracks
    assert t.head == [HeadKeyframe(0, 400, -20, 0), HeadKeyframe(500, 100, 35, 3)]
    assert t.lift == [LiftKeyframe(100, 300, 70, 0)]
    [face] = t.face
    angry = EXPRESSIONS["angry"]
    assert face.time_ms == 33
    assert (face.params.angle_deg, face.params.center_x_px, face.params.center_y_px) == (4.0, -3.0, 2.0)
    assert (face.params.scale_x, face.params.scale_y) == (1.25, 1.0)
    assert np.allclose(face.params.left.to_list(), angry.left.to_list(), atol=1e-6)
    assert np.allclose(face.params.right.to_list(), angry.right.to_list(), atol=1e-6)
    [audio] = t.audio
    assert audio.event_ids == (1234567890123, 2263734285)
    assert audio.probabilities == (0.5, 0.5) and audio.volume == pytest.approx(0.7) and audio.has_alts is False
    assert audio.pcm is None
    [lights] = t.lights
    # file order Left, Right, Front, Middle, Back -> ours left, front, middle, back, right
    assert lights.colors == ((255, 0, 0), (0, 255, 0), (255, 255, 255), (128, 128, 0), (0, 0, 255))
    assert lights.ir == (False, False, False, False, True)
    assert t.sprite == [SpriteKeyframe(700, "anim_sprite", None)]
    assert t.events == [EventKeyframe(800, "DEVICE_AUDIO_TRIGGER")]
    assert t.body == [BodyKeyframe(0, 300, BODY_STRAIGHT, 50), BodyKeyframe(300, 200, BODY_TURN_IN_PLACE, -90),
                      BodyKeyframe(500, 400, BODY_ARC, 60, 120)]
    assert t.record_heading == [RecordHeadingKeyframe(900)]
    assert t.turn_to_recorded_heading == [TurnToRecordedHeadingKeyframe(1000, 500, -15, 200, 800, 1000, 4, 2, True)]
    text = "\n".join(clip.warnings)
    assert "Wwise" in text and "audio_map" in text            # skipped: no sound banks
    assert "anim_sprite" in text and "sprite directory" in text


def test_audio_map_and_sprite_dir_resolve_what_the_app_needs(tmp_path):
    tone = synthesize("tone(440, 0.2)")
    frames = tmp_path / "sprites" / "anim_sprite"
    frames.mkdir(parents=True)
    for i in range(3):
        img = np.zeros((64, 128), dtype=np.uint8)
        img[10:20, 10 + 20 * i:30 + 20 * i] = 255
        Image.fromarray(img).save(frames / f"anim_sprite_{i:03d}.png")
    clip, _ = read_anim_bin(build_bin_by_hand(), audio_map={2263734285: tone}, sprite_dir=tmp_path / "sprites")
    assert clip.warnings == []
    [audio] = clip.tracks.audio
    assert audio.source == "wwise:2263734285"
    assert np.allclose(audio.pcm, np.rint(tone * 0.7), atol=1)
    [sprite] = clip.tracks.sprite
    assert len(sprite.frames) == 3 and sprite.frames[1][15, 40] and not sprite.frames[1][15, 10]


def test_write_and_read_back_every_keyframe():
    require("flatbuffers")  # write_anim_bin's
    clip = Clip("roundtrip", None, Tracks(
        head=[HeadKeyframe(0, 300, 20, 2), HeadKeyframe(400, 1000, -25, 0)],
        lift=[LiftKeyframe(33, 100, 50, 1)],
        body=[BodyKeyframe(0, 500, BODY_ARC, 50, -100), BodyKeyframe(500, 100, BODY_TURN_IN_PLACE, 90),
              BodyKeyframe(600, 100, BODY_STRAIGHT, -40)],
        lights=[LightsKeyframe(0, 100, ((255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255)),
                               (True, False, False, False, False))],
        face=[FaceKeyframe(0, EXPRESSIONS["happy"]), FaceKeyframe(500, EXPRESSIONS["sad"])],
        sprite=[SpriteKeyframe(10, "spr")],
        audio=[AudioKeyframe(0, None, "wwise", 0.5, (123, 456), (0.25, 0.75), False)],
        events=[EventKeyframe(10, "x")],
        record_heading=[RecordHeadingKeyframe(0)],
        turn_to_recorded_heading=[TurnToRecordedHeadingKeyframe(100, 200, 5, 90, 500, 600, 3, 2, True)]))
    data = write_anim_bin([clip, Clip("second")])
    back, second = read_anim_bin(data)
    assert second.name == "second" and second.tracks == Tracks()
    a, b = clip.tracks, back.tracks
    assert (a.head, a.lift, a.body, a.events, a.record_heading, a.turn_to_recorded_heading) == \
           (b.head, b.lift, b.body, b.events, b.record_heading, b.turn_to_recorded_heading)
    assert a.lights == b.lights
    for x, y in zip(a.face, b.face):
        assert x.time_ms == y.time_ms and np.allclose(x.params.to_array(), y.params.to_array(), atol=1e-6)
    assert b.sprite[0].name == "spr" and b.audio[0].event_ids == (123, 456)
    assert b.audio[0].probabilities == (0.25, 0.75) and b.audio[0].has_alts is False


def test_pycozmo_reads_what_we_write():
    """The reference's generated accessors (from cozmo_anim.fbs) agree with our writer's layout."""
    require("pycozmo")
    from pycozmo.CozmoAnim.AnimClips import AnimClips

    clip = Clip("x", None, Tracks(
        head=[HeadKeyframe(100, 200, -12, 3)],
        body=[BodyKeyframe(0, 300, BODY_ARC, 55, 77)],
        face=[FaceKeyframe(0, FaceParams(angle_deg=5.0, center_x_px=2.0, left=EXPRESSIONS["wink"].left))],
        turn_to_recorded_heading=[TurnToRecordedHeadingKeyframe(0, 10, -5, 120, 900, 700, 4, 3, True)]))
    ref = AnimClips.GetRootAsAnimClips(write_anim_bin([clip]), 0)
    kf = ref.Clips(0).Keyframes()
    assert ref.Clips(0).Name() == b"x"
    head = kf.HeadAngleKeyFrame(0)
    assert (head.TriggerTimeMs(), head.DurationTimeMs(), head.AngleDeg(),
            head.AngleVariabilityDeg()) == (100, 200, -12, 3)
    body = kf.BodyMotionKeyFrame(0)
    assert (body.RadiusMm(), body.Speed()) == (b"77", 55)
    face = kf.ProceduralFaceKeyFrame(0)
    assert (face.FaceAngle(), face.FaceCenterX(), face.LeftEyeLength()) == (5.0, 2.0, 19)
    assert face.LeftEye(13) == pytest.approx(EXPRESSIONS["wink"].left.upper_lid_y)
    turn = kf.TurnToRecordedHeadingKeyFrame(0)
    assert (turn.OffsetDeg(), turn.SpeedDegPerSec(), turn.AccelDegPerSec2(), turn.DecelDegPerSec2(),
            turn.ToleranceDeg(), turn.NumHalfRevs(), turn.UseShortestDir()) == (-5, 120, 900, 700, 4, 3, True)


def test_bin_file_and_anki_json(tmp_path):
    path = tmp_path / "anim_handmade.bin"
    path.write_bytes(build_bin_by_hand())
    clips = load_clips_dir(tmp_path)
    assert sorted(clips) == ["anim_empty", "anim_handmade_01"]
    doc = {"clips": [{"Name": "j", "keyframes": {
        "HeadAngleKeyFrame": [{"triggerTime_ms": 0, "durationTime_ms": 99, "angle_deg": 7}],
        "BodyMotionKeyFrame": [{"triggerTime_ms": 0, "durationTime_ms": 99, "radius_mm": "POINT_TURN", "speed": 30}],
        "ProceduralFaceKeyFrame": [{"triggerTime_ms": 0, "leftEye": [0.0] * 19, "rightEye": [], "faceAngle": 400}],
        "Mystery": []}}]}
    (tmp_path / "app.json").write_text(json.dumps(doc))
    [j] = load_clip_file(tmp_path / "app.json")
    assert j.tracks.head == [HeadKeyframe(0, 99, 7, 0)]
    assert j.tracks.body[0].mode == BODY_TURN_IN_PLACE
    assert j.tracks.face[0].params.angle_deg == 360.0          # clamped, with a warning
    assert any("face.angle_deg" in w for w in j.warnings)
    assert any("Mystery" in w for w in j.warnings)
    with pytest.raises(ClipFormatError):
        clips_from_anki_json({"clips": [{"keyframes": {}}]})


@pytest.mark.parametrize("track, keyframe, field", [
    ("TurnToRecordedHeadingKeyFrame", {"numHalfRevs": "Infinity"}, "numHalfRevs"),
    ("HeadAngleKeyFrame", {"angle_deg": "NaN"}, "angle_deg"),
    ("BodyMotionKeyFrame", {"radius_mm": "STRAIGHT", "speed": "NaN"}, "speed"),
    ("LiftHeightKeyFrame", {"height_mm": "-Infinity"}, "height_mm"),
])
def test_an_app_clip_with_a_non_finite_number_is_refused_naming_file_keyframe_and_field(
        tmp_path, track, keyframe, field):
    """The app's JSON may hold NaN and Infinity (Python's json reads them): numHalfRevs
    Infinity raised OverflowError, which took the driver's configure down naming no file; a
    NaN angle loaded and failed in the goal; a NaN speed was sent as DriveWheels(nan, nan).
    Each is a ClipFormatError naming the file, the clip, the keyframe and the field; a face's
    NaN is still mended with a warning (FaceParams.validated)."""
    body = ", ".join(f'"{k}": {v if v in ("NaN", "Infinity", "-Infinity") else json.dumps(v)}'
                     for k, v in keyframe.items())
    path = tmp_path / "bad_app.json"
    path.write_text('{"clips": [{"Name": "bad", "keyframes": {"%s": [{"triggerTime_ms": 0, '
                    '"durationTime_ms": 100, %s}], "ProceduralFaceKeyFrame": [{"triggerTime_ms": 0, '
                    '"faceAngle": NaN}]}}]}' % (track, body))
    with pytest.raises(ClipFormatError) as info:
        load_clip_file(path)
    assert str(info.value).startswith(f"{path} [bad]: {track}[0].{field}: expected a finite number"), info.value
    path.write_text('{"clips": [{"Name": "face", "keyframes": {"ProceduralFaceKeyFrame": '
                    '[{"triggerTime_ms": 0, "faceAngle": NaN}]}}]}')
    [clip] = load_clip_file(path)
    assert any("face.angle_deg is NaN" in w for w in clip.warnings), clip.warnings


def test_a_clip_file_whose_reader_fails_unexpectedly_is_skipped_naming_it(tmp_path, monkeypatch):
    """One file is one file: an exception the reader did not foresee skips it with a warning
    naming it (docs/media.md), instead of failing the driver's configure."""
    from cozmo_driver.anim import library

    (tmp_path / "good.yaml").write_text("name: good_one")
    (tmp_path / "odd.yaml").write_text("name: odd_one")
    (tmp_path / "inf.json").write_text('{"clips": [{"Name": "inf", "keyframes": {"TurnToRecordedHeadingKeyFrame": '
                                       '[{"triggerTime_ms": 0, "numHalfRevs": Infinity}]}}]}')
    real = library.load_clip_file

    def reader(path, **kwargs):
        if Path(path).name == "odd.yaml":
            raise RuntimeError("a reader's bug")
        return real(path, **kwargs)

    monkeypatch.setattr(library, "load_clip_file", reader)
    lib = library.AnimationLibrary.load([tmp_path], builtin=False)
    assert lib.names() == ["good_one"]
    assert f"{tmp_path / 'odd.yaml'}: cannot read (RuntimeError(\"a reader's bug\")): skipped" in lib.warnings
    assert any(w.startswith(f"{tmp_path / 'inf.json'} [inf]: TurnToRecordedHeadingKeyFrame[0].numHalfRevs")
               and w.endswith(": skipped") for w in lib.warnings), lib.warnings


def test_a_clip_lasting_more_than_600_s_is_skipped_at_load_naming_its_file(tmp_path):
    """Each keyframe's time and duration are within 600 s, but their sum was not checked:
    a clip ending at 700 s loaded and was listed, and every goal for it aborted when it was
    compiled ("lasts 700 s, more than 600 s"). Now it is skipped at load with a warning
    naming its file, and the other clips of the file load."""
    from cozmo_driver.anim.library import AnimationLibrary

    path = tmp_path / "long.yaml"
    path.write_text("clips:\n"
                    "  - {name: too_long, tracks: {head: [{time_ms: 500000, duration_ms: 200000, angle_deg: 5}]}}\n"
                    "  - {name: just_right, tracks: {head: [{time_ms: 300000, duration_ms: 300000, angle_deg: 5}]}}\n")
    lib = AnimationLibrary.load([tmp_path], builtin=False)
    assert lib.names() == ["just_right"] and lib.loaded_from_dirs == 1
    assert lib.warnings == [f"{path} [too_long]: lasts 700 s, more than 600 s (a keyframe's time plus its "
                            "duration): skipped"]
    assert compile_clip(lib.clips["just_right"]).duration_s == pytest.approx(600.0)


def test_a_sprite_dir_naming_a_file_says_it_is_a_file_not_that_it_does_not_exist(tmp_path):
    """animation_sprite_dir naming a file (a PNG, say) was reported as "does not exist",
    sending the user looking for a file that is there, where animation_dirs says "is a
    file". Now it says so too; a path that is not there still "does not exist"."""
    from cozmo_driver.anim.library import AnimationLibrary

    png = tmp_path / "frame_00.png"
    png.write_bytes(b"not really a PNG")
    tail = ": app clips play without their sprite faces"
    assert AnimationLibrary.load(builtin=False, sprite_dir=png).warnings == [
        f"sprite directory {png} is a file, not a directory (animation_sprite_dir takes the directory "
        f"of sprite folders){tail}"]
    assert AnimationLibrary.load(builtin=False, sprite_dir=tmp_path / "nowhere").warnings == [
        f"sprite directory {tmp_path / 'nowhere'} does not exist{tail}"]



@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("given", ["animation_audio_map", "animation_groups_file", "a group file",
                                   "a sprite frame"])
def test_a_fifo_among_the_animation_files_is_refused_without_waiting(tmp_path, given):
    """A FIFO (named pipe) as animation_audio_map or animation_groups_file, as a group file in
    the groups directory or as a frame in a sprite folder of animation_sprite_dir: the driver's
    configure waited for a program to write to it, for good. Each is refused at once, naming
    the parameter, and the rest loads."""
    from fifos import without_waiting_for
    from cozmo_driver.anim.library import AnimationLibrary

    fifo = tmp_path / "fifo.json"
    if given == "a group file":
        (tmp_path / "groups").mkdir()
        fifo = tmp_path / "groups" / "greetings.json"
    elif given == "a sprite frame":
        frames = tmp_path / "sprites" / "anim_sprite"
        frames.mkdir(parents=True)
        Image.fromarray(np.zeros((64, 128), dtype=np.uint8)).save(frames / "anim_sprite_000.png")
        fifo = frames / "anim_sprite_001.png"
    os.mkfifo(fifo)
    refused = (f"{fifo} is a FIFO (named pipe), not a file: reading it would wait for a writer (or never end)")
    if given == "a sprite frame":
        clip, _ = without_waiting_for(fifo, lambda: read_anim_bin(build_bin_by_hand(),
                                                                   sprite_dir=tmp_path / "sprites"))
        assert any(f"animation_sprite_dir: {refused}" in w for w in clip.warnings), clip.warnings
        return
    load = {"animation_audio_map": lambda: AnimationLibrary.load(builtin=False, audio_map_path=fifo),
            "animation_groups_file": lambda: AnimationLibrary.load(builtin=False, groups_path=fifo),
            "a group file": lambda: AnimationLibrary.load(builtin=False, groups_path=tmp_path / "groups")}[given]
    tail = {"animation_audio_map": "app clips play without their sounds", "animation_groups_file": "no groups loaded",
            "a group file": "skipped"}[given]
    name = "animation_groups_file" if given == "a group file" else given
    assert without_waiting_for(fifo, load).warnings == [f"{name}: {refused}: {tail}"]

def test_a_clip_driving_a_wheel_beyond_the_treads_limit_is_noted_at_load(tmp_path):
    """speed_dps: 720 asks 289 mm/s of each wheel, beyond the treads' 200 mm/s; the note
    compile_clip made of it was never read. Now the library notes it when it loads the
    clip (the driver logs it at configure), naming the file; the clip plays scaled."""
    from cozmo_driver.anim.library import AnimationLibrary

    path = tmp_path / "spin.yaml"
    path.write_text("name: spin\ntracks:\n  body:\n    - {time_ms: 0, duration_ms: 500, speed_dps: 720}\n"
                    "    - {time_ms: 500, duration_ms: 500, speed_dps: 100}\n")
    lib = AnimationLibrary.load([tmp_path], builtin=False)
    assert lib.names() == ["spin"]
    assert lib.warnings == [f"{path} [spin]: body motion at 0 ms asks 289 mm/s of a wheel, beyond the treads' "
                            "200 mm/s: both wheels scaled by 0.69 (the curvature kept; it goes less far)"]
    assert not [w for w in AnimationLibrary.load().warnings if "mm/s of a wheel" in w]  # none built in


def test_a_builtin_clip_replaced_is_said_naming_the_file_and_whether_it_now_drives_the_treads(tmp_path):
    """A clip of animation_dirs replacing a built-in one was counted (overridden_builtins)
    and said nowhere, and a user's sleepy_yawn with a body track drove the treads where
    behaviors play it on the charger as a clip that keeps them still. Now each replacement
    is a warning naming its file; one that drives the treads where the built-in one keeps
    them still says it is refused on the charger, and is listed for the driver to refuse."""
    from cozmo_driver.anim.library import AnimationLibrary

    (tmp_path / "yawn.yaml").write_text("name: sleepy_yawn\ntracks:\n  body:\n"
                                        "    - {time_ms: 0, duration_ms: 300, speed_mmps: 30}\n")
    (tmp_path / "sneeze.yaml").write_text("name: sneeze\ntracks:\n  head:\n"
                                          "    - {time_ms: 0, duration_ms: 200, angle_deg: 20}\n")
    (tmp_path / "nod.yaml").write_text("name: nod_yes\ntracks:\n  head:\n"
                                       "    - {time_ms: 0, duration_ms: 200, angle_deg: 20}\n")
    lib = AnimationLibrary.load([tmp_path])
    assert lib.overridden_builtins == ["nod_yes", "sleepy_yawn", "sneeze"]
    assert lib.warnings == [
        f"clip 'nod_yes' of {tmp_path / 'nod.yaml'} replaces the built-in one: behaviors playing 'nod_yes' play it",
        f"clip 'sleepy_yawn' of {tmp_path / 'yawn.yaml'} replaces the built-in one: behaviors playing "
        "'sleepy_yawn' play it; it drives the treads, which the built-in one keeps still, so it is refused while "
        "the robot is on its charger (where behaviors play it as a clip that keeps the treads still)",
        f"clip 'sneeze' of {tmp_path / 'sneeze.yaml'} replaces the built-in one: behaviors playing 'sneeze' play it"]
    assert lib.drives_unlike_builtin == {"sleepy_yawn": str(tmp_path / "yawn.yaml")}


ODDITIES_YAML = """
clips:
  - name: oddities
    duration_ms: 1000
    tracks:
      head:
        - {time_ms: 0, duration_ms: 300, angle_deg: 80}
        - {time_ms: 300, duration_ms: 300, angle_deg: -60}
      lift:
        - {time_ms: 0, duration_ms: 300, height_mm: 300}
      face:
        - {time_ms: 0, expression: happy, params: {eyes.scale_y: .nan, face.angle_deg: 1000}}
        - {time_ms: 200, array: [0, 0, 1, 1, .inf, %s]}
      lights:
        - {time_ms: 0, all: "#ff0000"}
        - {time_ms: 400, duration_ms: 0, all: "#00ff00"}
        - {time_ms: 600, all: "#0000ff"}
  - name: lights_at_the_end
    tracks:
      head:
        - {time_ms: 0, duration_ms: 200, angle_deg: 0}
      lights:
        - {time_ms: 200, all: "#ffffff"}
""" % ", ".join(["0"] * 38)


def test_our_format_mends_values_that_would_do_nothing_with_a_warning_naming_them(tmp_path):
    """Our format took values that did nothing, with no word: a head or lift target beyond
    the robot's range was squeezed into the message's byte (80 deg sent as 80, 300 mm as
    255), a face's NaN or out-of-range parameter was taken as it was (the app's JSON mends
    them), and a lights keyframe without duration_ms lasted 0 ms and never showed. Now the
    head and lift are clamped to the robot's range and the face mended, each with a warning
    naming the file, clip, keyframe and value, and a lights keyframe without a duration holds
    until the next one or the clip's end (one with nothing after it is skipped, saying so)."""
    from cozmo_driver.anim.library import AnimationLibrary

    path = tmp_path / "odd.yaml"
    path.write_text(ODDITIES_YAML)
    odd, at_end = load_clip_file(path)
    where = f"{path} [oddities]"
    assert odd.mended == [
        f"{where}: head[0]: angle_deg 80 is beyond the head's range -25..44.5 deg: clamped to 44.5",
        f"{where}: head[1]: angle_deg -60 is beyond the head's range -25..44.5 deg: clamped to -25",
        f"{where}: lift[0]: height_mm 300 is beyond the lift's range 32..92 mm: clamped to 92",
        f"{where}: face[0]: left.scale_y is NaN: set to its default 1",
        f"{where}: face[0]: right.scale_y is NaN: set to its default 1",
        f"{where}: face[0]: face.angle_deg = 1000 is outside -360..360: clamped to 360",
        f"{where}: face[1]: face.angle_deg = inf is outside -360..360: clamped to 360",
    ]
    assert [k.angle_deg for k in odd.tracks.head] == [44.5, -25] and odd.tracks.lift[0].height_mm == 92
    assert odd.tracks.face[0].params.left.scale_y == 1 and odd.tracks.face[0].params.angle_deg == 360
    assert [(k.time_ms, k.duration_ms) for k in odd.tracks.lights] == [(0, 400), (400, 200), (600, 400)]
    assert at_end.mended == [f"{path} [lights_at_the_end]: lights[0]: no duration_ms, and the clip ends "
                             "at 200 ms: it would not show: skipped"] and at_end.tracks.lights == []
    compiled = compile_clip(odd, start_head_angle_deg=0.0, start_lift_height_mm=32.0)
    sent = [(k, m) for k in sorted(compiled.messages) for m in compiled.messages[k]]
    assert max(m.angle_deg for _, m in sent if m.NAME == "AnimHead") == 45          # 44.5 rounded, not 80
    assert max(m.height_mm for _, m in sent if m.NAME == "AnimLift") == 92
    lights = [(k, m.colors[0]) for k, m in sent if m.NAME == "AnimBackpackLights"]
    assert lights[:3] == [(0, 0x7C00), (12, 0x03E0), (18, 0x001F)]    # each shows, each until the next
    lib = AnimationLibrary.load([tmp_path], builtin=False)
    assert lib.warnings == odd.mended + at_end.mended


def test_our_format_notes_a_gaze_beyond_the_image_and_a_duration_shorter_than_its_keyframes(tmp_path):
    """A face's look_at beyond -1..1 was clamped, and a duration_ms shorter than the clip's
    keyframes ignored (the clip lasts until they end), both with no word: each is mended with
    a note naming the file, clip, keyframe and value."""
    path = tmp_path / "gaze.yaml"
    path.write_text("name: gaze\nduration_ms: 500\ntracks:\n"
                    "  face:\n    - {time_ms: 0, expression: happy, look_at: [1.5, -0.5]}\n"
                    "    - {time_ms: 300, look_at: [0.2, -4]}\n"
                    "  head:\n    - {time_ms: 400, duration_ms: 400, angle_deg: 10}\n"
                    "  audio:\n    - {time_ms: 600, source: 'synth:tone(500, 0.5)'}\n")
    clip, = load_clip_file(path)
    where = f"{path} [gaze]"
    assert clip.mended == [
        f"{where}: face[0]: look_at x 1.5 is beyond -1..1: clamped to 1",
        f"{where}: face[1]: look_at y -4 is beyond -1..1: clamped to -1",
        f"{where}: duration_ms 500 is shorter than the clip's keyframes and sounds, which end at 1100 ms: "
        "the clip lasts 1100 ms",
    ]
    assert clip.end_s == pytest.approx(1.1) and clip.duration_s == pytest.approx(1.1)
    assert clip.tracks.face[0].params == look_at(EXPRESSIONS["happy"], 1.0, -0.5)


def test_a_side_light_given_a_colour_it_cannot_show_is_noted_saying_what_shows(tmp_path):
    """The side lights (left, right) show only red, but a clip could give them any colour
    with no word (the built-in celebrate's blue and green sides stayed dark): a left or right
    light with green or blue is noted, naming the file, clip, keyframe and what shows (its
    red component); ``all`` (every light, each as it can) and a red side are not."""
    path = tmp_path / "sides.yaml"
    path.write_text("name: sides\ntracks:\n  lights:\n"
                    "    - {time_ms: 0, duration_ms: 100, left: '#0060ff', front: '#00ff00', right: [255, 128, 0]}\n"
                    "    - {time_ms: 100, duration_ms: 100, left: '#800000', right: [40, 0, 0], back: '#0000ff'}\n"
                    "    - {time_ms: 200, duration_ms: 100, all: '#00ff40'}\n")
    clip, = load_clip_file(path)
    where = f"{path} [sides]: lights[0]"
    assert clip.mended == [
        f"{where}: left #0060ff: the side lights show only red, so it shows as #000000 (off)",
        f"{where}: right #ff8000: the side lights show only red, so it shows as #ff0000",
    ]
    assert clip.tracks.lights[0].colors[0] == (0, 0x60, 0xFF)           # sent as given


@pytest.fixture(scope="module")
def good_bin() -> bytes:
    """build_bin_by_hand(), made once for the tests that read it (only they need flatbuffers)."""
    return build_bin_by_hand()


def test_malformed_bins_raise_clip_format_errors_only(good_bin):
    for n in (0, 3, 7, 16, 100, len(good_bin) - 1):
        with pytest.raises(ClipFormatError):
            read_anim_bin(good_bin[:n])
    with pytest.raises(ClipFormatError):
        read_anim_bin(b"\xff\xff\xff\xff" + bytes(20))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzzed_bins_never_raise_anything_else(good_bin, data):
    buf = bytearray(good_bin)
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    try:
        clips = read_anim_bin(bytes(buf))
    except ClipFormatError:
        return
    for c in clips:
        compile_clip(c)


# --------------------------------------------------------------------------- groups

def test_groups_load_and_choose_by_weight_honouring_cooldowns(tmp_path):
    d = tmp_path / "animationGroups" / "reactions"
    d.mkdir(parents=True)
    (d / "ag_happy.json").write_text(json.dumps({"Animations": [
        {"Name": "a", "Weight": 3.0, "CooldownTime_Sec": 0.0, "Mood": "Default"},
        {"Name": "b", "Weight": 1.0, "CooldownTime_Sec": 0.0, "Mood": "Default"},
        {"Name": "never", "Weight": 0.0, "CooldownTime_Sec": 0.0, "Mood": "Default"},
    ]}))
    (d / "ag_cool.json").write_text(json.dumps({"Animations": [
        {"Name": "x", "Weight": 1.0, "CooldownTime_Sec": 10.0, "Mood": "Default"},
        {"Name": "y", "Weight": 1.0, "CooldownTime_Sec": 20.0, "Mood": "Default",
         "UseHeadAngle": True, "HeadAngleMin_Deg": 10, "HeadAngleMax_Deg": 40},
    ]}))
    groups = load_animation_groups(tmp_path / "animationGroups")
    assert sorted(groups) == ["ag_cool", "ag_happy"]
    assert groups["ag_cool"].members[1].head_angle_max_deg == 40
    chooser = GroupChooser(seed=5)
    picks = [chooser.choose(groups["ag_happy"], now=float(i)) for i in range(4000)]
    share = picks.count("a") / len(picks)
    assert 0.72 < share < 0.78 and "never" not in picks
    again = GroupChooser(seed=5)
    assert [again.choose(groups["ag_happy"], now=float(i)) for i in range(4000)] == picks

    cool = groups["ag_cool"]
    c = GroupChooser(seed=1)
    first = c.choose(cool, 0.0, head_angle_deg=20)
    second = c.choose(cool, 1.0, head_angle_deg=20)
    assert {first, second} == {"x", "y"}                 # the first is cooling down
    third = c.choose(cool, 2.0, head_angle_deg=20)       # both cooling: x is ready first
    assert third == "x"
    assert GroupChooser().choose(cool, 0.0, head_angle_deg=-20) == "x"   # y needs 10..40 degrees
    assert GroupChooser().choose(AnimationGroup("empty"), 0.0) is None


def test_a_group_whose_every_member_wants_another_head_angle_has_none_playable_and_says_why():
    """Every member uses the head angle and the head is outside each range: no member is
    chosen (one was played anyway), and unplayable() names the angle and the ranges."""
    high = AnimationGroup("high", [GroupMember("hello", 1.0, 0.0, "Default", True, 30, 44),
                                   GroupMember("peek", 1.0, 0.0, "Default", True, 10, 20.5)])
    chooser = GroupChooser(seed=3)
    assert chooser.choose(high, 0.0, head_angle_deg=-20) is None
    assert chooser.choose(high, 0.0, head_angle_deg=35, record=False) == "hello"
    assert chooser.choose(high, 0.0, head_angle_deg=20.5, record=False) == "peek"
    assert chooser.choose(high, 0.0, record=False) in ("hello", "peek")  # the angle not known
    assert GroupChooser.unplayable(high, -20) == (
        "the head is at -20.0 deg, outside the head-angle range of every member (hello: 30..44 deg, "
        "peek: 10..20.5 deg); move the head into one (head/angle) and try again")
    many = AnimationGroup("many", [GroupMember(f"m{i}", 1.0, 0.0, "Default", True, 30, 44) for i in range(8)])
    assert GroupChooser.unplayable(many, 0.0).endswith("m5: 30..44 deg, and 2 more); move the head into one "
                                                       "(head/angle) and try again")


def test_group_files_are_read_one_by_one_with_comments_and_bad_ones_skipped(tmp_path, log_records):
    d = tmp_path / "animationGroups"
    (d / "sub").mkdir(parents=True)
    (d / "ag_plain.json").write_text(json.dumps({"Animations": [{"Name": "a"}]}))
    (d / "sub" / "ag_commented.json").write_text(
        '// the app writes notes like this\n'
        '{"Animations": [ /* two members */\n'
        '  {"Name": "b//not a comment", "Weight": 2.0}, // a line comment after a value\n'
        '  {"Name": "c", "Weight": 1.0}]}\n')
    (d / "ag_broken.json").write_text('{"Animations": [{"Name": "x"},]')       # invalid JSON
    (d / "ag_no_name.json").write_text(json.dumps({"Animations": [{"Weight": 1}]}))
    (d / "ag_latin1.json").write_bytes(b'{"Animations": [{"Name": "caf\xe9"}]}')
    warnings: list = []
    groups = load_animation_groups(d, warnings.append)
    assert sorted(groups) == ["ag_commented", "ag_plain"]
    assert [m.name for m in groups["ag_commented"].members] == ["b//not a comment", "c"]
    assert [m.weight for m in groups["ag_commented"].members] == [2.0, 1.0]
    assert len(warnings) == 3 and all(w.endswith(": skipped") for w in warnings)
    for stem, why in (("ag_broken", "cannot read animation group"), ("ag_no_name", "Name"),
                      ("ag_latin1", "cannot read animation group")):
        assert any(str(d / f"{stem}.json") in w and why in w for w in warnings), (stem, warnings)
    # without a warn callback the warnings go to the cozmo.anim logger (read there: caplog
    # sees only records that propagate, see fixtures_logging.py)
    logged = log_records("cozmo.anim", "WARNING")
    assert sorted(load_animation_groups(d)) == ["ag_commented", "ag_plain"]
    assert sorted(logged.messages) == sorted(warnings)
    assert {r.levelname for r in logged.records} == {"WARNING"}
    with pytest.raises(ClipFormatError, match="not a directory"):
        load_animation_groups(d / "ag_plain.json")


def test_a_group_file_with_a_key_given_twice_is_read_with_a_warning_naming_it(tmp_path):
    """JSON keeps the last copy of a key given twice: a group's first Animations list was
    dropped without a word. The app's files are its format, not refused here (JSON
    readers commonly keep the last): the file is still read, with a warning naming the file and the key."""
    d = tmp_path / "animationGroups"
    d.mkdir()
    (d / "ag_twice.json").write_text('{"Animations": [{"Name": "a"}],\n "Animations": [{"Name": "b"}]}\n')
    warnings: list = []
    groups = load_animation_groups(d, warnings.append)
    assert [m.name for m in groups["ag_twice"].members] == ["b"]
    assert warnings == [f"{d / 'ag_twice.json'}: key 'Animations' given twice in one object: only the "
                        "last is read"]


@pytest.mark.parametrize("suffix, text, words", [
    (".yaml", "name: x\ntracks:\n  head: [{time_ms: 0, angle_deg: 10}]\n  head: [{time_ms: 0, angle_deg: -10}]\n",
     ("invalid YAML", "found duplicate key 'head' (first given on line 3)", "line 4")),
    (".json", '{"name": "x", "tracks": {"head": [{"time_ms": 0, "angle_deg": 10}], '
              '"head": [{"time_ms": 0, "angle_deg": -10}]}}',
     ("invalid JSON: found duplicate key 'head' in an object: JSON would keep only the last",)),
])
def test_a_clip_file_with_a_key_given_twice_is_refused_naming_it(tmp_path, suffix, text, words):
    """A track given twice in a clip: the second replaced the first without a word (the nod
    lost its first half). Now the file is refused (the library skips it with the message)."""
    path = tmp_path / f"nod{suffix}"
    path.write_text(text)
    with pytest.raises(ClipFormatError) as refused:
        load_clip_file(path)
    assert str(refused.value).startswith(f"{path}: ") and all(w in str(refused.value) for w in words), refused.value


@pytest.mark.parametrize("text, words", [
    ("4000000001: a.wav\n4000000002: b.wav\n4000000001: c.wav\n",
     ("not YAML or JSON", "found duplicate key 4000000001 (first given on line 1)", "line 3")),
    ('{"4000000001": "a.wav", "4000000001": "c.wav"}', ("found duplicate key '4000000001'",)),
    ("4000000001: a.wav\n'4000000001': c.wav\n",
     ("4000000001 and '4000000001' are both the event 4000000001; give it once",)),
])
def test_an_audio_map_with_an_event_given_twice_is_refused_naming_it(tmp_path, text, words):
    """An event given twice in animation_audio_map played the last file named for it, the
    first silently dropped. Now the map is refused naming the event (and its lines)."""
    from cozmo_driver.anim.library import load_audio_map

    path = tmp_path / "map.yaml"
    path.write_text(text)
    with pytest.raises(ClipFormatError) as refused:
        load_audio_map(path)
    text = str(refused.value)
    assert text.startswith(f"audio map {path}: ") and all(w in text for w in words), text


# --------------------------------------------------------------------------- built-ins

def test_builtin_animations():
    names = list_builtin()
    assert len(names) >= 10
    clips = load_builtin()
    assert sorted(clips) == names
    used = set()
    for name, clip in clips.items():
        assert clip.warnings == [] and clip.mended == [], name
        compiled = compile_clip(clip)
        assert compiled.warnings == [], name
        assert 1.0 <= clip.end_s <= 4.0
        assert any(a is not None for a in compiled.audio), name     # every one makes a sound
        assert compiled.display_changes, name
        used |= {t for t in ("head", "lift", "body", "lights", "face", "audio") if getattr(clip.tracks, t)}
    assert used == {"head", "lift", "body", "lights", "face", "audio"}
    assert load_builtin("nod_yes").name == "nod_yes"
    with pytest.raises(KeyError, match="known"):
        load_builtin("moonwalk")


def test_celebrate_lights_its_side_lights_in_red():
    """The built-in celebrate gave its side lights blue, green and yellow, which the robot's
    red-only side LEDs showed dark or red: every colour it sends them has red in it now."""
    compiled = compile_clip(load_builtin("celebrate"))
    sides = [(m.colors[0], m.colors[4]) for k in sorted(compiled.messages) for m in compiled.messages[k]
             if m.NAME == "AnimBackpackLights" and any(m.colors)]
    assert len(sides) == 4
    assert all(c >> 10 & 31 for pair in sides for c in pair), [f"{a:04x} {b:04x}" for a, b in sides]


def test_builtins_are_package_data():
    setup = (Path(__file__).parents[2] / "setup.py").read_text()
    assert "builtin/*.yaml" in setup
    assert len(list((Path(__file__).parents[2] / "cozmo_driver" / "anim" / "builtin").glob("*.yaml"))) >= 10


def test_parse_clip_from_a_mapping():
    clip = parse_clip({"name": "m", "tracks": {"face": [{"time_ms": 0, "array": [0.0] * 43}]}})
    assert clip.tracks.face[0].params.left.scale_x == 0.0
    assert math.isclose(clip.end_s, 0.0)


def test_struct_sanity():
    # the reader checks offsets: a root pointing past the end is an error, not an exception of struct
    with pytest.raises(ClipFormatError):
        read_anim_bin(struct.pack("<I", 1000) + bytes(8))
