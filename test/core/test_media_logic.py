"""Display, audio and animation logic of the driver without ROS: image and audio-chunk checks,
the streaming resampler, the animation library, the AV stream on an explicit clock, and the
face stream."""

from __future__ import annotations

import heapq
import itertools
import json
import math
import re
import tracemalloc
from collections import deque
from types import SimpleNamespace
from typing import Any, Deque, List

import numpy as np
import pytest

from cozmo_driver.anim.clip import (AnimationError, Clip, HeadKeyframe, LiftKeyframe, LightsKeyframe, Tracks,
                                    write_anim_bin)
from cozmo_driver.anim.library import AnimationLibrary
from cozmo_driver.anim.player import compile_clip
from cozmo_driver.anim.av_stream import AVStream
from cozmo_driver.client.link import LinkState, LinkStateChanged
from cozmo_driver.driver.commands import CommandError
from cozmo_driver.driver.media import (MAX_IMAGE_SIDE, audio_chunk_samples, face_to_screen, image_to_screen,
                                      is_empty_image, load_audio_file, motor_stops, screen_to_frame)
from cozmo_driver.face.expressions import EXPRESSIONS, FaceAnimator
from cozmo_driver.face.procedural import FaceRenderer
from cozmo_driver.face.stream import FaceStream
from cozmo_driver.protocol import messages as m
from cozmo_driver.protocol.audio import (SAMPLE_RATE, SAMPLES_PER_FRAME, StreamResampler, decode_ulaw, encode_ulaw,
                                         resample)
from sample_data import app_clip_with_sprite_and_sound
from cozmo_driver.protocol.display import BLANK_IMAGE, MAX_DISPLAY_BYTES, decode_display, image_to_bits

FRAME = 1 / 30


# --------------------------------------------------------------------------- images

def pattern() -> np.ndarray:
    """A grey (64, 128) test picture: a gradient with a bright box and a dark bar."""
    img = np.tile(np.linspace(0, 255, 128).astype(np.uint8), (64, 1))
    img[8:40, 16:60] = 250
    img[44:52, :] = 5
    return img


def as_encoding(grey: np.ndarray, encoding: str, pad: int = 0, bigendian: bool = False):
    """(width, height, step, data) of ``grey`` in ``encoding``, rows padded with ``pad`` bytes."""
    h, w = grey.shape
    if encoding == "mono8":
        px = grey[:, :, None]
    elif encoding == "mono16":
        words = grey.astype(np.uint16) * 257
        px = words.astype(">u2" if bigendian else "<u2").view(np.uint8).reshape(h, w, 2)
    elif encoding in ("rgb8", "bgr8"):
        px = np.repeat(grey[:, :, None], 3, axis=2)
    else:
        px = np.concatenate([np.repeat(grey[:, :, None], 3, axis=2), np.full((h, w, 1), 255, np.uint8)], axis=2)
    rows = px.reshape(h, -1)
    if pad:
        rows = np.concatenate([rows, np.zeros((h, pad), np.uint8)], axis=1)
    return w, h, rows.shape[1], rows.tobytes()


@pytest.mark.parametrize("encoding", ["mono8", "mono16", "rgb8", "bgr8", "rgba8", "bgra8"])
@pytest.mark.parametrize("dither", [False, True])
def test_every_encoding_gives_the_same_screen(encoding, dither):
    grey = pattern()
    w, h, step, data = as_encoding(grey, "mono8")
    expected = image_to_screen(w, h, "mono8", step, 0, data, dither)
    for pad, big in ((0, False), (3, False), (2, True)):
        w, h, step, data = as_encoding(grey, encoding, pad, big)
        got = image_to_screen(w, h, encoding, step, int(big), data, dither)
        assert got.shape == (64, 128) and got.dtype == bool
        assert np.array_equal(got, expected), (encoding, pad, big)


def test_a_128x64_mono8_image_is_shown_pixel_for_pixel_and_other_sizes_are_fitted():
    grey = pattern()
    screen = image_to_screen(128, 64, "mono8", 128, 0, grey.tobytes(), dither=False)
    assert np.array_equal(screen, grey >= 128)
    # a 320x240 picture is scaled to 85x64 and centred: the sides stay dark
    big = np.full((240, 320), 255, np.uint8)
    screen = image_to_screen(320, 240, "mono8", 320, 0, big.tobytes(), dither=True)
    cols = np.flatnonzero(screen.any(axis=0))
    assert cols[0] == (128 - 85) // 2 and cols[-1] == cols[0] + 84
    # alpha 0 is black
    w, h, step, data = as_encoding(np.full((10, 10), 255, np.uint8), "rgba8")
    clear = bytearray(data)
    clear[3::4] = bytes(len(clear[3::4]))
    assert not image_to_screen(w, h, "rgba8", step, 0, bytes(clear), dither=False).any()


def test_complex_images_are_simplified_to_fit_one_frame():
    rng = np.random.default_rng(4)
    noise = rng.integers(0, 256, (480, 640), dtype=np.uint8)
    screen = image_to_screen(640, 480, "mono8", 640, 0, noise.tobytes(), dither=True)
    data, shown = screen_to_frame(screen)
    assert len(data) <= MAX_DISPLAY_BYTES
    assert np.array_equal(decode_display(data), shown)
    assert np.mean(shown == screen[0::2]) > 0.6   # simplified, not blanked


def luma(rgba: np.ndarray) -> np.ndarray:
    """The grey of (h, w, 4) rgba8 pixels as the driver has always made it (ITU-R 601 luma,
    rounded, then darkened by alpha), computed whole."""
    px = rgba.astype(np.int64)
    grey = (px[:, :, 0] * 299 + px[:, :, 1] * 587 + px[:, :, 2] * 114 + 500) // 1000
    return ((grey * px[:, :, 3] + 127) // 255).astype(np.uint8)


def test_the_largest_image_is_sampled_down_before_it_is_converted():
    """A 4096 x 4096 rgba8 image (the largest accepted) is converted from every 8th pixel
    (8 per screen pixel of its 64 x 64 on the screen): converted whole it took 0.7 s and
    450 MiB on the executor, which served no emergency stop meanwhile."""
    side = MAX_IMAGE_SIDE
    small = np.tile(np.linspace(0, 255, 64).astype(np.uint8), (64, 1))
    small[8:40, 16:48] = 250
    small[44:52, :] = 5
    big = np.repeat(np.repeat(small, side // 64, axis=0), side // 64, axis=1)
    rgba = np.empty((side, side, 4), np.uint8)
    rgba[:, :, :3] = big[:, :, None]
    rgba[:, :, 3] = 255
    data = rgba.tobytes()
    del big
    for dither in (False, True):
        tracemalloc.start()
        try:
            screen = image_to_screen(side, side, "rgba8", side * 4, 0, data, dither)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        # less than a byte per pixel of the image: it was never converted whole
        assert peak < side * side // 2, f"{peak / 2**20:.0f} MiB"
        # the picture is the one of its middle pixel of every 8 x 8, fitted to 64 x 64 ...
        sampled = luma(rgba[4::8, 4::8])
        mode = "dither" if dither else "threshold"
        assert np.array_equal(screen, image_to_bits(sampled, mode, size=(64, 64)))
        # ... which shows the picture: as the 64 x 64 picture itself does, pixel for pixel
        # when thresholded, as bright in each 8 x 8 block when dithered
        direct = image_to_screen(64, 64, "mono8", 64, 0, small.tobytes(), dither)
        if not dither:
            assert np.mean(screen == direct) > 0.99
        blocks = [bits.reshape(8, 8, 16, 8).mean(axis=(1, 3)) for bits in (screen, direct)]
        assert np.abs(blocks[0] - blocks[1]).max() <= 0.1


@pytest.mark.parametrize("width, height", [(640, 480), (1280, 960), (2047, 1023)])
def test_an_image_up_to_sixteen_times_the_screen_is_converted_whole_as_before(width, height):
    rng = np.random.default_rng(width)
    rgba = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
    for dither in (False, True):
        screen = image_to_screen(width, height, "rgba8", width * 4, 0, rgba.tobytes(), dither)
        assert np.array_equal(screen, image_to_bits(luma(rgba), "dither" if dither else "threshold"))


@pytest.mark.parametrize("fields, named", [
    (dict(encoding="yuv422"), "display/image.image.encoding"),
    (dict(step=100), "display/image.image.step"),
    (dict(data=b"\0" * 100), "display/image.image.data"),
    (dict(width=0), "display/image.image.width"),
    (dict(height=5000, step=128, data=b"\0" * 128 * 5000), "display/image.image.height"),
])
def test_bad_images_are_refused_naming_the_field(fields, named):
    args = dict(width=128, height=64, encoding="mono8", step=128, is_bigendian=0, data=b"\0" * 128 * 64,
                dither=False, field="display/image.image")
    args.update(fields)
    with pytest.raises(CommandError, match=named.replace(".", r"\.")):
        image_to_screen(**args)
    assert is_empty_image(0, 0) and not is_empty_image(0, 5)


def test_a_face_must_be_the_screen_size_and_says_what_came():
    face = np.zeros((64, 128), np.uint8)
    face[10:20, 30:40] = 255
    assert np.array_equal(face_to_screen(128, 64, "mono8", 128, 0, face.tobytes()), face >= 128)
    for width, height in ((64, 32), (256, 128), (128, 32)):
        with pytest.raises(CommandError, match=f"display/face is {width} x {height}: a face must be "
                                               "128 x 64"):
            face_to_screen(width, height, "mono8", width, 0, b"\0" * width * height)


def test_audio_chunks_are_checked_and_mixed_down():
    assert audio_chunk_samples(16000, 1, [1, 2, 3]).tolist() == [1, 2, 3]
    assert audio_chunk_samples(16000, 2, [100, 300, -10, -30]).tolist() == [200, -20]
    for args, named in (((7999, 1, []), "sample_rate"), ((48001, 1, []), "sample_rate"),
                        ((16000, 3, []), "channels"), ((16000, 2, [1, 2, 3]), "samples"),
                        ((16000, 1, []), "samples is empty"), ((16000, 2, []), "samples is empty")):
        with pytest.raises(CommandError, match=named):
            audio_chunk_samples(*args)
    # a chunk of more than the driver queues is refused before anything is done with it
    # (it was resampled first, on the I/O thread, then dropped)
    assert audio_chunk_samples(8000, 2, [0] * 16000, max_s=1.0).size == 8000
    with pytest.raises(CommandError, match=r"audio/pcm.samples hold 1.0 s of sound; a chunk may "
                       r"hold at most 0.5 s \(what the driver queues\): publish the sound in "
                       r"chunks as it plays, e.g. 0.1 s each"):
        audio_chunk_samples(8000, 2, [0] * 16000, max_s=0.5)


@pytest.mark.parametrize("rate", [8000, 11025, 16000, 22320, 44100, 48000])
def test_stream_resampler_equals_the_whole_signal_resampled(rate):
    rng = np.random.default_rng(rate)
    x = (rng.standard_normal(rate // 2) * 4000).astype(np.int16)
    whole = resample(x, rate, SAMPLE_RATE)
    r = StreamResampler(rate, SAMPLE_RATE)
    parts, i = [], 0
    while i < x.size:
        n = int(rng.integers(1, 2500))
        parts.append(r.process(x[i:i + n]))
        i += n
    parts.append(r.flush())
    joined = np.concatenate(parts)
    assert joined.size == whole.size
    assert np.abs(joined.astype(int) - whole).max() <= 1
    # the resampler starts over after a flush
    assert np.array_equal(np.concatenate([r.process(x), r.flush()]), whole)


def test_load_audio_file_reads_a_wav_and_refuses_anything_else_with_a_command_error(tmp_path):
    import wave

    path = tmp_path / "tone.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((np.arange(1600, dtype=np.int16) * 10).tobytes())
    pcm, info = load_audio_file(str(path))
    assert info.sample_rate_hz == 16000 and pcm.dtype == np.int16
    assert abs(pcm.size - round(1600 * SAMPLE_RATE / 16000)) <= 1
    bad = tmp_path / "not.wav"
    bad.write_bytes(b"RIFF....WAVEnope")
    with pytest.raises(CommandError):
        load_audio_file(str(bad))


def test_a_wav_file_with_no_samples_is_refused_and_one_whose_header_was_never_finished_plays(tmp_path):
    """A WAV whose header declares no samples loaded as 0 samples, and its play_audio goal
    succeeded, "nothing to play (no samples)": a file with none is refused saying so, and one
    whose header was never finished (data size 0, the samples after it) plays them."""
    import struct
    import wave

    path = tmp_path / "empty.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
    with pytest.raises(CommandError, match=f"^{re.escape(str(path))}: no samples"):
        load_audio_file(str(path))
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.full(1600, 1000, dtype=np.int16).tobytes())
    raw = bytearray(path.read_bytes())
    raw[4:8], raw[40:44] = struct.pack("<I", 36), struct.pack("<I", 0)
    path.write_bytes(bytes(raw))
    pcm, info = load_audio_file(str(path))
    assert info.frame_count == 1600 and info.unfinished_header
    assert abs(pcm.size - round(1600 * SAMPLE_RATE / 16000)) <= 1


def test_motor_stops_stop_the_motors_an_animation_moved():
    assert motor_stops(head=False, lift=False) == []
    assert [(s.NAME, s.speed_rad_per_sec) for s in motor_stops(head=True, lift=True)] == [
        ("MoveHead", 0.0), ("MoveLift", 0.0)]
    assert [s.NAME for s in motor_stops(head=False, lift=True)] == ["MoveLift"]


# --------------------------------------------------------------------------- the library

CLIP_YAML = """
name: {name}
tracks:
  head:
    - {{time_ms: 0, duration_ms: 200, angle_deg: 20}}
"""


def test_library_loads_dirs_skips_bad_files_and_resolves(tmp_path):
    d = tmp_path / "anims"
    (d / "sub").mkdir(parents=True)
    (d / "mine.yaml").write_text(CLIP_YAML.format(name="my_nod"))
    (d / "sub" / "override.yaml").write_text(CLIP_YAML.format(name="sneeze"))
    (d / "again.yml").write_text(CLIP_YAML.format(name="my_nod"))
    (d / "broken.yaml").write_text("name: x\ntracks: {head: [{time_ms: 0, angel_deg: 3}]}\n")
    (d / "notes.txt").write_text("not a clip")
    app = Clip("anim_app_clip", 0.5, Tracks(head=[HeadKeyframe(0, 300, -10)],
                                            lights=[LightsKeyframe(0, 400, ((0, 0, 255),) * 5)]))
    (d / "app.bin").write_bytes(write_anim_bin([app]))
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"happy_things": {"Animations": [
        {"Name": "my_nod", "Weight": 1.0}, {"Name": "missing_clip", "Weight": 5.0}]},
        "sad_things": {"Animations": [{"Name": "sad_droop"}]}}))
    lib = AnimationLibrary.load([d, tmp_path / "nowhere"], groups)
    assert {"my_nod", "anim_app_clip", "sneeze", "nod_yes"} <= set(lib.names())
    assert lib.loaded_from_dirs == 3 and lib.overridden_builtins == ["sneeze"]
    assert lib.clips["sneeze"].tracks.head[0].angle_deg == 20          # the directory's wins
    text = "\n".join(lib.warnings)
    assert "broken.yaml" in text and "nowhere" in text and "again.yml" in text
    assert "missing_clip" in text
    assert lib.group_names() == ["happy_things", "sad_things"]
    assert lib.resolve(group="happy_things").name == "my_nod"          # the unknown member is left out
    assert lib.resolve("anim_app_clip").tracks.lights
    with pytest.raises(AnimationError, match="did you mean my_nod"):
        lib.resolve("my_no")
    with pytest.raises(AnimationError, match="known groups: happy_things, sad_things"):
        lib.resolve(group="nope")
    with pytest.raises(AnimationError, match="name or a group"):
        lib.resolve()


def test_an_unknown_name_says_when_it_is_a_group_a_clip_or_a_clip_that_did_not_load(tmp_path):
    """A goal giving a group as its name (or a clip as its group) was refused as unknown, with
    close names of the wrong kind or none ("no animation 'cheer'; 12 clips known"); one naming
    a clip whose file was skipped when the driver loaded it ("head[0]: ...: skipped", read as
    a keyframe skipped) heard only of other clips. Now the refusal says which field takes the
    name, or that the clip was skipped and why (one line, even for YAML's many-line errors);
    any other unknown name's says that clips were skipped (it may be one of a file skipped whole)."""
    d = tmp_path / "anims"
    d.mkdir()
    (d / "wave.yaml").write_text("name: wave\ntracks: {head: [{time_ms: 0, duration_ms: 200, angle_deg: .nan}]}\n")
    (d / "bow.yaml").write_text("name: bow\ntracks:\n  head: [{time_ms: 0\n")  # not YAML: names no clip
    (d / "long.yaml").write_text(CLIP_YAML.format(name="too_long").replace("time_ms: 0", "time_ms: 600000"))
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"cheer": {"Animations": [{"Name": "celebrate"}]}}))
    lib = AnimationLibrary.load([d], groups)
    with pytest.raises(AnimationError) as refused:
        lib.check("cheer")
    assert str(refused.value) == "no animation 'cheer'; 'cheer' is an animation group: give it as the goal's group"
    with pytest.raises(AnimationError) as refused:
        lib.check(group="nod_yes")
    assert str(refused.value) == ("no animation group 'nod_yes'; 'nod_yes' is a clip: give it as the goal's "
                                  "name, with group empty")
    with pytest.raises(AnimationError) as refused:
        lib.check("wave")
    assert str(refused.value) == (
        f"no animation 'wave': it was skipped when the clips were loaded ({d / 'wave.yaml'} [wave]: head[0]: "
        "expected a finite number, got nan); mend it, then configure the driver again")
    with pytest.raises(AnimationError) as refused:
        lib.check("bow")  # known by its file's name
    said = str(refused.value)
    assert said.startswith(f"no animation 'bow': it was skipped when the clips were loaded ({d / 'bow.yaml'}: "
                           "invalid YAML") and "\n" not in said, said
    with pytest.raises(AnimationError, match=r"'too_long': it was skipped .* lasts 600\.2 s, more than 600 s"):
        lib.check("too_long")
    # the load warnings are as they were
    assert f"{d / 'wave.yaml'} [wave]: head[0]: expected a finite number, got nan: skipped" in lib.warnings
    with pytest.raises(AnimationError) as refused:  # another clip of a file skipped whole, say
        lib.check("nod_yess")
    assert str(refused.value) == ("no animation 'nod_yess'; did you mean nod_yes? 12 clips known (list_animations); "
                                  "clips of 3 files were skipped when loaded (the configure log says why)")
    with pytest.raises(AnimationError) as refused:
        AnimationLibrary.load().check("nod_yess")
    assert str(refused.value) == "no animation 'nod_yess'; did you mean nod_yes? 12 clips known (list_animations)"


def test_library_says_an_animation_dirs_entry_that_is_a_file_is_not_a_directory(tmp_path):
    """An animation_dirs entry naming a clip file was reported as "does not exist", which
    sent the user looking for a file that is there. Now the warning says it is a file and a
    directory is wanted; a path that is not there still "does not exist"."""
    clip = tmp_path / "mine.yaml"
    clip.write_text(CLIP_YAML.format(name="my_nod"))
    lib = AnimationLibrary.load([clip, tmp_path / "nowhere"])
    assert "my_nod" not in lib.names()
    assert lib.warnings == [f"animation directory {clip} is a file, not a directory (animation_dirs "
                            "takes directories of clip files): skipped",
                            f"animation directory {tmp_path / 'nowhere'} does not exist: skipped"]


def test_library_gives_app_clips_their_sprites_and_sounds(tmp_path):
    """animation_sprite_dir and animation_audio_map reach the app's clips: their sprite face
    and Wwise sound play (they were always skipped: the loader could take both, nothing
    passed them); a bad map or a missing folder is a warning naming it."""
    clips, sprites, audio_map = app_clip_with_sprite_and_sound(tmp_path)
    bare = AnimationLibrary.load([clips])
    assert [name for name, _ in bare.clips_with_warnings()] == ["anim_sprite_and_sound"]
    lib = AnimationLibrary.load([clips], audio_map_path=audio_map, sprite_dir=sprites)
    assert lib.warnings == [] and lib.clips_with_warnings() == []
    clip = lib.resolve("anim_sprite_and_sound")
    [sprite] = clip.tracks.sprite
    assert len(sprite.frames) == 4 and sprite.frames[2][30, 70] and not sprite.frames[2][30, 20]
    [audio] = clip.tracks.audio
    assert audio.source == "wwise:4000000001" and np.abs(audio.pcm).max() > 1000
    bad = tmp_path / "bad_map.yaml"
    bad.write_text("chirp: sounds/chirp.wav\n")
    lib = AnimationLibrary.load([clips], audio_map_path=bad, sprite_dir=tmp_path / "nowhere")
    text = "\n".join(lib.warnings)
    assert "'chirp' is not a Wwise event id" in text and "play without their sounds" in text
    assert "nowhere does not exist: app clips play without their sprite faces" in text
    assert [name for name, _ in lib.clips_with_warnings()] == ["anim_sprite_and_sound"]


def test_library_groups_from_one_group_file_or_a_directory(tmp_path):
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "ag_nod.json").write_text(json.dumps({"Animations": [{"Name": "nod_yes"}]}))
    one = tmp_path / "ag_single.json"
    one.write_text(json.dumps({"Animations": [{"Name": "shake_no"}]}))
    assert AnimationLibrary.load((), tmp_path / "g").group_names() == ["ag_nod"]
    assert AnimationLibrary.load((), one).resolve(group="ag_single").name == "shake_no"
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert "no groups loaded" in AnimationLibrary.load((), bad).warnings[0]
    # one bad file in the directory costs that group only, named in the warnings
    (tmp_path / "g" / "ag_broken.json").write_text("// a note\n{\"Animations\": [")
    (tmp_path / "g" / "ag_noted.json").write_text(
        "// the app's files have comments\n" + json.dumps({"Animations": [{"Name": "sneeze"}]}))
    lib = AnimationLibrary.load((), tmp_path / "g")
    assert lib.group_names() == ["ag_nod", "ag_noted"]
    assert lib.resolve(group="ag_noted").name == "sneeze"
    assert [w for w in lib.warnings if "ag_broken.json" in w and w.endswith("skipped")], lib.warnings
    # a single group file with comments
    one.write_text("/* one group */ " + json.dumps({"Animations": [{"Name": "shake_no"}]}))
    assert AnimationLibrary.load((), one).group_names() == ["ag_single"]


def test_a_group_goal_with_the_head_outside_every_members_range_is_refused_saying_so(tmp_path):
    """A group whose only member wants the head at 30..44 deg, the head at -20 deg: resolve
    refuses it with the angle and the range (it played the member)."""
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"greet": {"Animations": [
        {"Name": "nod_yes", "UseHeadAngle": True, "HeadAngleMin_Deg": 30, "HeadAngleMax_Deg": 44}]}}))
    lib = AnimationLibrary.load((), groups)
    with pytest.raises(AnimationError) as refused:
        lib.resolve(group="greet", now=1.0, head_angle_deg=-20.0)
    assert str(refused.value) == (
        "animation group 'greet' has no playable member now: the head is at -20.0 deg, outside the "
        "head-angle range of every member (nod_yes: 30..44 deg); move the head into one (head/angle) "
        "and try again")
    assert lib.resolve(group="greet", now=2.0, head_angle_deg=40.0).name == "nod_yes"


def test_library_skips_only_the_bad_group_of_a_file_of_several(tmp_path):
    """One group of a multi-group file that was not a group (no Animations list, a member
    without a Name) cost every group of the file ("no groups loaded"). Now that group is
    skipped with a warning naming it and its file, and the others load."""
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"happy": {"Animations": [{"Name": "nod_yes"}]},
                                  "broken": {"Animations": [{"Weight": 2}]},
                                  "not_a_group": {"Anims": []},
                                  "sad": {"Animations": [{"Name": "shake_no"}]}}))
    lib = AnimationLibrary.load((), groups)
    assert lib.group_names() == ["happy", "sad"]
    assert lib.resolve(group="sad").name == "shake_no"
    assert not [w for w in lib.warnings if "no groups loaded" in w], lib.warnings
    for name in ("broken", "not_a_group"):
        assert [w for w in lib.warnings if f"[{name}]" in w and str(groups) in w and w.endswith("skipped")], \
            lib.warnings
    assert len(lib.warnings) == 2


# --------------------------------------------------------------------------- the AV stream

class FakeRobot:
    """What AVStream needs of a Robot, on an explicit clock; call_soon runs at once."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sent: List[tuple] = []           # (time, message)
        self.link = SimpleNamespace(state=LinkState.READY, send=lambda msg: self.sent.append((self.now, msg)),
                                    session=SimpleNamespace(background_queue_length=0))
        self.listeners: List[Any] = []
        self._timers: list = []
        self._seq = itertools.count()

    def clock(self) -> float:
        return self.now

    def call_soon(self, fn, *args) -> None:
        fn(*args)

    def schedule(self, when, fn):
        handle = SimpleNamespace(cancelled=False)
        handle.cancel = lambda: setattr(handle, "cancelled", True)
        heapq.heappush(self._timers, (when, next(self._seq), fn, handle))
        return handle

    def add_listener(self, fn, messages=None) -> None:  # it hands out link events only
        self.listeners.append(fn)

    def remove_listener(self, fn) -> None:
        self.listeners.remove(fn)

    def run_until(self, t: float) -> None:
        while self._timers and self._timers[0][0] <= t:
            when, _, fn, handle = heapq.heappop(self._timers)
            if handle.cancelled:
                continue
            self.now = max(self.now, when)
            fn()
        self.now = max(self.now, t)

    def set_link(self, state: LinkState) -> None:
        self.link.state = state
        for fn in list(self.listeners):
            fn(LinkStateChanged(state, "test"))

    def names(self, since: float = -1.0) -> List[str]:
        return [msg.NAME for t, msg in self.sent if t >= since]


def make_stream(**kwargs):
    robot = FakeRobot()
    reports: list = []
    av = AVStream(robot, reports.append, **kwargs)
    av.start()
    return robot, av, reports


def tone(seconds: float, freq: float = 1000.0) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (np.sin(2 * np.pi * freq * t) * 8000).astype(np.int16)


def test_an_audio_goal_plays_every_frame_on_the_grid_and_reports_progress():
    robot, av, reports = make_stream()
    pcm = tone(1.0)
    av.play_audio("a", pcm)
    robot.run_until(robot.now + 2.0)
    audio = [(t, msg) for t, msg in robot.sent if msg.NAME == "OutputAudio"]
    assert len(audio) == math.ceil(pcm.size / SAMPLES_PER_FRAME) == 30
    gaps = np.diff([t for t, _ in audio])
    assert np.allclose(gaps, FRAME, atol=1e-9)                       # one per tick, exactly
    done = [r for r in reports if r.done]
    assert len(done) == 1 and done[0].success and done[0].token == "a"
    assert done[0].elapsed_s == pytest.approx(29 * FRAME)
    progress = [r.progress for r in reports if r.kind == "audio_progress"]
    assert progress[0] == 0.0 and progress == sorted(progress) and len(progress) >= 8
    assert av.counters()["underruns (ticks sent late)"] == 0
    assert robot.names().count("OutputSilence") == 15                  # lingers 0.5 s, then stops
    robot.run_until(robot.now + 5.0)
    assert not robot._timers or all(h.cancelled for *_, h in robot._timers)


def test_goals_report_their_progress_ten_times_a_second():
    """A clip's and an audio goal's progress came every 4 ticks of the grid (7.5 a second; 8.5
    with the driver's timer): a tick is 1/30 s, and the 3rd tick after a report, 0.1 s on the
    grid, measured a hair short of 0.1 s on the clock and waited for the 4th. Now each comes
    every 3 ticks, ten a second, as the docs say."""
    for kind in ("clip", "audio"):
        robot, av, _ = make_stream()
        times: List[float] = []
        av.on_report = lambda report: times.append(robot.now) if report.kind == f"{kind}_progress" else None
        if kind == "clip":
            av.play_clip("c", compile_clip(Clip("c", 3.0, Tracks(head=[HeadKeyframe(0, 200, 10)]))))
        else:
            av.play_audio("a", tone(3.0))
        robot.run_until(robot.now + 4.0)
        gaps = np.diff(times)
        assert len(times) >= 29 and np.allclose(gaps, 3 * FRAME, atol=1e-6), (kind, len(times), gaps)


def test_audio_goals_preempt_and_cancel():
    robot, av, reports = make_stream()
    av.play_audio(1, tone(2.0))
    robot.run_until(robot.now + 0.5)
    av.play_audio(2, tone(2.0, 500))
    robot.run_until(robot.now + 0.5)
    av.cancel_audio(2)
    sent_at_cancel = robot.names().count("OutputAudio")
    robot.run_until(robot.now + 1.0)
    assert robot.names().count("OutputAudio") == sent_at_cancel
    done = {r.token: r for r in reports if r.done}
    assert not done[1].success and "preempted" in done[1].message
    assert not done[2].success and done[2].message == "cancelled"
    assert 0.2 < done[2].progress < 0.35


def test_cancelling_an_audio_goal_drops_its_own_sound_and_the_stream_behind_it_plays():
    """Cancelling a play_audio goal emptied the whole queue and reset the stream: the
    audio/pcm chunks queued behind the goal (the warning of a chunk dropped says to cancel
    the goal to hear them) were thrown away with it."""
    robot, av, reports = make_stream(stream_prebuffer_s=0.1, stream_timeout_s=0.15)
    av.play_audio(1, tone(2.0))
    robot.run_until(robot.now + 0.3)
    stream = tone(0.5, 500)                                  # 11 160 samples: 15 frames
    for piece in np.array_split(stream, 5):
        av.stream_audio(piece)
        robot.run_until(robot.now + 0.05)
    before = robot.names().count("OutputAudio")
    av.cancel_audio(1)
    (done,) = [r for r in reports if r.done]
    assert not done.success and done.message == "cancelled" and 0.2 < done.progress < 0.4
    robot.run_until(robot.now + 1.5)
    after = played(robot)[before * SAMPLES_PER_FRAME:]
    # the stream at once, whole and from its first sample: nothing of the goal is left
    assert np.array_equal(after, decode_ulaw(encode_ulaw(stream)))
    assert av.counters()["audio stream dropped (s)"] == 0.0
    # a cancel with no stream behind the goal still stops the sound at once
    av.play_audio(2, tone(2.0))
    robot.run_until(robot.now + 0.3)
    av.cancel_audio(2)
    sent_at_cancel = robot.names().count("OutputAudio")
    robot.run_until(robot.now + 1.0)
    assert robot.names().count("OutputAudio") == sent_at_cancel


def test_a_stream_is_prebuffered_then_flushed_when_it_stops():
    robot, av, reports = make_stream(stream_prebuffer_s=0.1, stream_timeout_s=0.3)
    chunk = tone(0.05)                                   # 1116 samples: 1.5 frames
    av.stream_audio(chunk)
    robot.run_until(robot.now + 0.02)
    assert "OutputAudio" not in robot.names()             # 0.05 s is under the prebuffer
    for _ in range(9):
        robot.run_until(robot.now + 0.05)
        av.stream_audio(chunk)
    robot.run_until(robot.now + 1.5)
    audio = robot.names().count("OutputAudio")
    assert audio == math.ceil(10 * chunk.size / SAMPLES_PER_FRAME)  # the tail was flushed
    assert av.counters()["underruns (ticks sent late)"] == 0
    robot.set_link(LinkState.LOST)
    av.stream_audio(chunk)
    assert av.counters()["audio stream dropped (s)"] == pytest.approx(0.05, abs=1e-3)


def played(robot) -> np.ndarray:
    """Every sample the robot was sent, decoded (OutputAudio frames in order)."""
    frames = [msg.samples for _, msg in robot.sent if msg.NAME == "OutputAudio"]
    return np.concatenate([decode_ulaw(bytes(f)) for f in frames]) if frames else np.zeros(0, np.int16)


def test_a_larger_buffer_absorbs_later_chunks_before_and_after_the_stream_starts():
    """audio_stream_buffer 1 s: a chunk 0.06 s late while the stream was still buffering cut it
    off (a fixed 0.15 s timeout: 0.5 s of sound, 0.5 s of silence, then the rest), and one
    0.6 s late once it played restarted its resampler (a fixed 0.5 s gap: a click). Both
    follow the buffer now: the stream plays whole, without a seam."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(16000 * 3) * 4000).astype(np.int16)       # 3 s at 16 kHz
    robot, av, _ = make_stream(stream_prebuffer_s=1.0)
    t0 = robot.now
    for i, piece in enumerate(np.array_split(x, 30)):                    # 0.1 s chunks, in real time
        robot.run_until(t0 + 0.1 * i + {5: 0.06, 15: 0.6}.get(i, 0.0))
        av.stream_audio_at(piece, 16000)
    robot.run_until(robot.now + 3.0)
    whole = resample(x, 16000, SAMPLE_RATE)
    got = played(robot)
    start = int(np.argmax(np.abs(got) > 0))
    assert np.array_equal(got[start:start + whole.size], decode_ulaw(encode_ulaw(whole)))
    assert av.counters()["audio stream ran dry"] == 1                  # its end only


def test_chunks_at_another_rate_play_whole_without_seams():
    """audio/pcm chunks at their own rate: one resampler a stream (no seams), and the samples
    it holds back for its filter are sent at the stream's end. They were dropped: the end of
    every stream (3.5 ms at 8 kHz) was lost, and a chunk of 20 samples played nothing."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(8000) * 4000).astype(np.int16)           # 0.5 s at 16 kHz
    robot, av, _ = make_stream(stream_prebuffer_s=0.1, stream_timeout_s=0.15)
    for piece in np.array_split(x, 25):                                 # 20 ms chunks, in real time
        av.stream_audio_at(piece, 16000)
        robot.run_until(robot.now + 0.02)
    robot.run_until(robot.now + 1.5)
    whole = resample(x, 16000, SAMPLE_RATE)
    got = played(robot)
    assert got.size == math.ceil(whole.size / SAMPLES_PER_FRAME) * SAMPLES_PER_FRAME  # the tail too
    start = int(np.argmax(np.abs(got) > 0))                             # the stream's first sample
    ref = decode_ulaw(encode_ulaw(whole))                               # what mu-law makes of it
    assert np.array_equal(got[start:start + whole.size], ref)           # no seam, nothing lost
    assert not np.any(got[start + whole.size:])                         # then the frame's padding
    # a chunk too short to fill the resampler's window plays too, as a short sound
    robot2, av2, _ = make_stream(stream_prebuffer_s=0.1, stream_timeout_s=0.15)
    dc = np.full(20, 20000, dtype=np.int16)                             # 2.5 ms at 8 kHz
    av2.stream_audio_at(dc, 8000)
    robot2.run_until(robot2.now + 1.0)
    loud = int(np.sum(np.abs(played(robot2).astype(int)) > 10000))
    assert abs(loud - 20 * SAMPLE_RATE / 8000) <= 8, loud
    # a new rate starts a new stream: the one before ends whole first
    robot3, av3, _ = make_stream(stream_prebuffer_s=0.01, stream_timeout_s=0.15)
    av3.stream_audio_at(np.full(800, 20000, dtype=np.int16), 8000)     # 0.1 s
    av3.stream_audio_at(np.full(1600, -20000, dtype=np.int16), 16000)  # 0.1 s
    robot3.run_until(robot3.now + 1.0)
    got = played(robot3).astype(int)
    assert abs(int(np.sum(got > 10000)) - 0.1 * SAMPLE_RATE) <= 12
    assert abs(int(np.sum(got < -10000)) - 0.1 * SAMPLE_RATE) <= 12


class TurnRobot(FakeRobot):
    """A FakeRobot whose call_soon queues, as the I/O thread's loop does: :meth:`turn` runs
    what was queued before it, as one turn of the loop (datagrams are read between two)."""

    def __init__(self) -> None:
        super().__init__()
        self.soon: Deque[tuple] = deque()

    def call_soon(self, fn, *args) -> None:
        self.soon.append((fn, args))

    def turn(self) -> None:
        for _ in range(len(self.soon)):
            fn, args = self.soon.popleft()
            fn(*args)


def test_a_long_chunk_is_resampled_a_piece_a_turn_in_order_with_the_chunks_after_it():
    """A 10 s chunk at 48 kHz was resampled in one call on the I/O thread, which then read
    no robot state for 0.1-0.3 s (odom, IMU and tf stopped; 2-3 s for a 120 s chunk, more
    than the robot's peer timeout). It is resampled 0.1 s of its samples a turn of the
    loop, and a chunk that comes meanwhile follows it: the sound is the same, without seams."""
    from cozmo_driver.anim.av_stream import RESAMPLE_PIECE_S
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(480_000) * 3000).astype(np.int16)       # 10 s at 48 kHz
    y = (rng.standard_normal(4_800) * 3000).astype(np.int16)         # 0.1 s more
    robot = TurnRobot()
    av = AVStream(robot, [].append, stream_prebuffer_s=0.02)
    av.start()
    robot.turn()
    av.stream_audio_at(x, 48000)
    robot.turn()  # the chunk comes: its first piece only
    first = av.pacer.audio_queued_s
    assert 0.0 < first <= RESAMPLE_PIECE_S + 1e-9, first
    turns = 1
    while robot.soon and turns < 1000:
        if turns == 3:
            av.stream_audio_at(y, 48000)  # the next chunk, while the first is still in pieces
        robot.turn()
        turns += 1
    assert turns >= 10 / RESAMPLE_PIECE_S, turns
    robot.run_until(robot.now + 11.0)
    whole = resample(np.concatenate([x, y]), 48000, SAMPLE_RATE)
    got = played(robot)
    start = int(np.argmax(np.abs(got) > 0))
    assert np.array_equal(got[start:start + whole.size], decode_ulaw(encode_ulaw(whole)))


def test_clips_loop_cancel_and_restore_the_face():
    robot, av, reports = make_stream()
    face = screen_to_frame(FaceRenderer().render(EXPRESSIONS["happy"]))[0]
    clip = compile_clip(Clip("c", 0.5, Tracks(head=[HeadKeyframe(0, 100, 20)],
                                              lights=[LightsKeyframe(100, 300, ((0, 255, 0),) * 5)])))
    av.play_clip("x", clip, loops=2)
    robot.run_until(robot.now + 1.5)
    names = robot.names()
    assert names.count("StartAnimation") == 2 and names.count("EndAnimation") == 2
    starts = [t for t, msg in robot.sent if msg.NAME == "StartAnimation"]
    assert starts[1] - starts[0] == pytest.approx(clip.num_ticks * FRAME)  # back to back
    done = [r for r in reports if r.done]
    assert done[-1].success and done[-1].progress == 1.0 and "2 times" in done[-1].message
    # cancel, with a face to go back to
    av.set_face(face)
    t0 = robot.now
    av.play_clip("y", clip, loops=5, stop_messages=[m.MoveHead(speed_rad_per_sec=0.0)])
    robot.run_until(t0 + 0.3)
    before = len(robot.sent)
    av.cancel_clip("y")
    robot.run_until(t0 + 0.5)
    after = robot.sent[before:]
    names = [msg.NAME for _, msg in after]
    assert names[0] == "AbortAnimation" and "MoveHead" in names
    assert "AnimBackpackLights" not in names   # the abort gives the backpack back by itself
    shown = [msg.image for _, msg in after if msg.NAME == "DisplayImage"]
    assert shown and shown[-1] == face
    assert [r for r in reports if r.done][-1].message == "cancelled"


def test_loops_after_the_first_start_their_head_and_lift_moves_from_where_the_clip_left_them():
    """A clip was compiled once, from where the head and lift were, and each loop replayed
    it: a long move (chained AnimHead/AnimLift steps) started again from the first loop's
    start pose in every loop, the head jumping back down at each. Now the loops after the
    first are compiled from the targets of the clip's last head and lift keyframes."""
    from cozmo_driver.anim.clip import LiftKeyframe
    from cozmo_driver.anim.player import compile_loops
    robot, av, reports = make_stream()
    clip = Clip("c", 0.8, Tracks(head=[HeadKeyframe(0, 600, 30)], lift=[LiftKeyframe(0, 600, 80)]))
    first, again = compile_loops(clip, 3, start_head_angle_deg=-20.0, start_lift_height_mm=32.0)
    av.play_clip("x", first, loops=3, again=again)
    robot.run_until(robot.now + 3.0)
    assert [msg.angle_deg for _, msg in robot.sent if msg.NAME == "AnimHead"] == [-3, 13, 30] + [30, 30, 30] * 2
    assert [msg.height_mm for _, msg in robot.sent if msg.NAME == "AnimLift"] == [48, 64, 80] + [80, 80, 80] * 2
    assert [r for r in reports if r.done][-1].message == "played c (3 times)"
    assert compile_loops(clip, 1, start_head_angle_deg=-20.0)[1] is None                  # played once
    assert compile_loops(Clip("still", 0.5, Tracks(lights=[LightsKeyframe(0, 300, ((0, 255, 0),) * 5)])),
                         3)[1] is None                                                   # nothing to move


def test_without_a_face_a_cancelled_clip_and_a_timed_image_leave_a_blank_screen():
    robot, av, _ = make_stream()
    img = screen_to_frame(np.ones((64, 128), bool))[0]
    av.show_image(img, 0.2)
    robot.run_until(robot.now + 1.0)
    shown = [msg.image for _, msg in robot.sent if msg.NAME == "DisplayImage"]
    assert shown == [img, BLANK_IMAGE]
    times = [t for t, msg in robot.sent if msg.NAME == "DisplayImage"]
    assert times[1] - times[0] == pytest.approx(0.2, abs=1e-9)


@pytest.mark.parametrize("cut", ["clip", "timed image", "image until replaced", "finished clip"])
@pytest.mark.parametrize("stop", ["robot lost", "deactivated"])
def test_without_a_face_what_a_loss_or_a_deactivation_cut_is_blanked_when_the_stream_goes_on(cut, stop):
    """No face node: a clip showing its own face, or an image, cut by a lost robot or a
    deactivation stayed on the robot's screen for good after the reconnection or the
    activation (a clip's frozen mid-frame; a 2 s image for ever), where a cancelled clip or
    an image's end blanks it; and so did a clip's frame cut by a loss that the driver saw
    only after it had sent the clip to its end (the robot silent for peer_timeout). Now the
    screen is blanked when the stream goes on after a loss, or after a deactivation that cut
    something; a finished clip's last frame stays through a deactivation, as before."""
    from cozmo_driver.anim.clip import FaceKeyframe
    robot, av, _ = make_stream()
    img = screen_to_frame(np.ones((64, 128), bool))[0]
    if "clip" in cut:
        seconds = 0.3 if cut == "finished clip" else 3.0
        av.play_clip("c", compile_clip(Clip("c", seconds, Tracks(face=[FaceKeyframe(0, EXPRESSIONS["happy"])]))))
    else:
        av.show_image(img, 2.0 if cut == "timed image" else None)
    robot.run_until(robot.now + 0.5)
    if cut == "finished clip":
        assert av.pacer.player.stats.clips_finished == 1
    assert [msg for _, msg in robot.sent if msg.NAME == "DisplayImage"], "nothing shown before the cut"
    if stop == "robot lost":
        robot.set_link(LinkState.LOST)
        robot.run_until(robot.now + 1.0)
        before = len(robot.sent)
        robot.set_link(LinkState.READY)
    else:
        av.stop("the driver was deactivated")
        robot.run_until(robot.now + 1.0)
        before = len(robot.sent)
        av.start()
    robot.run_until(robot.now + 5.0)
    blanked = [] if (cut, stop) == ("finished clip", "deactivated") else [BLANK_IMAGE]
    assert [msg.image for _, msg in robot.sent[before:] if msg.NAME == "DisplayImage"] == blanked
    # a deactivation that cuts nothing sends nothing when the driver is active again
    av.stop("the driver was deactivated")
    before = len(robot.sent)
    av.start()
    robot.run_until(robot.now + 1.0)
    assert [msg.NAME for _, msg in robot.sent[before:]] == []


def test_an_image_until_replaced_costs_no_traffic_and_is_refreshed():
    robot, av, _ = make_stream(refresh_s=5.0, linger_s=0.5)
    face = screen_to_frame(FaceRenderer().render(EXPRESSIONS["neutral"]))[0]
    img = screen_to_frame(np.ones((64, 128), bool))[0]
    av.set_face(face)
    av.show_image(img, None)
    t0 = robot.now
    robot.run_until(t0 + 11.0)
    displays = [(t - t0, msg.image) for t, msg in robot.sent if msg.NAME == "DisplayImage"]
    assert [d for _, d in displays] == [img, img, img]                  # shown, refreshed twice
    assert displays[1][0] == pytest.approx(5.0, abs=FRAME)
    assert len(robot.sent) == 3 * (2 + 15)        # each: image, silence, 0.5 s of lingering; nothing else
    av.show_image(None)                                                 # cleared: the face again
    robot.run_until(robot.now + 0.1)
    assert [msg.image for _, msg in robot.sent if msg.NAME == "DisplayImage"][-1] == face


def test_losing_the_robot_ends_every_goal_and_a_reconnection_shows_the_face_again():
    robot, av, reports = make_stream()
    face = screen_to_frame(FaceRenderer().render(EXPRESSIONS["sad"]))[0]
    av.set_face(face)
    av.play_audio("a", tone(3.0))
    av.play_clip("c", compile_clip(Clip("c", 3.0, Tracks(head=[HeadKeyframe(0, 100, 20)]))))
    robot.run_until(robot.now + 0.5)
    robot.set_link(LinkState.LOST)
    done = {r.token: r for r in reports if r.done}
    assert "lost the connection" in done["a"].message and "lost the connection" in done["c"].message
    before = len(robot.sent)
    robot.run_until(robot.now + 2.0)
    assert len(robot.sent) == before                                    # nothing while lost
    robot.set_link(LinkState.READY)
    robot.run_until(robot.now + 0.1)
    assert [msg.image for _, msg in robot.sent[before:] if msg.NAME == "DisplayImage"] == [face]
    av.stop("stopped")
    av.play_audio("b", tone(0.1))
    assert [r for r in reports if r.token == "b"][0].message == "not connected to the robot"


class FailingTicks:
    """The pacer's tick, raising for the next ``failing`` calls (a stand-in for any bug of a tick:
    what is tested is what the stream does then, not why the tick failed)."""

    def __init__(self, pacer) -> None:
        self.real, self.failing, self.failures = pacer.tick, 0, 0
        pacer.tick = self

    def __call__(self, now: float):
        if self.failing:
            self.failing -= 1
            self.failures += 1
            raise RuntimeError("tick failed")
        return self.real(now)


def stream_errors(errors) -> list:
    """The ERROR records of cozmo.anim.av (``errors``: log_records("cozmo.anim.av", "ERROR"),
    attached to that logger: caplog missed them after another test's ROS log bridge had ended
    the logger's propagation, in a kit run)."""
    return list(errors.records)


def test_a_tick_that_raises_ends_its_goals_saying_so_and_the_stream_plays_on(log_records):
    """A tick that raised (on the I/O thread: the robot client's loop logged it) left the stream
    without its timer: the goal playing never ended and the next ones waited until another input
    re-armed it. Now the goals it played end aborted saying the stream failed (a driver bug), the
    timer is armed again and the next goal plays; the first failure is logged with its traceback,
    the others counted, one line at most every 5 s, and a tick failing for good fails once a tick
    (1/30 s), not in a busy loop."""
    errors = log_records("cozmo.anim.av", "ERROR")
    robot, av, reports = make_stream()
    ticks = FailingTicks(av.pacer)
    av.play_audio("a", tone(1.0))
    robot.run_until(robot.now + 0.2)
    ticks.failing = 1
    robot.run_until(robot.now + FRAME)
    failed_at = robot.now
    assert ticks.failures == 1
    (done,) = [r for r in reports if r.done]
    assert done.token == "a" and not done.success
    assert "display/audio stream failed (RuntimeError: tick failed)" in done.message
    assert "driver bug, please report it" in done.message
    assert av._timer is not None and av._timer_at > robot.now             # armed again
    (logged,) = stream_errors(errors)
    assert logged.exc_info is not None and "a tick of the stream failed" in logged.getMessage()
    # the next goal plays whole
    before = robot.names().count("OutputAudio")
    av.play_audio("b", tone(0.5))
    robot.run_until(robot.now + 1.0)
    assert [r.message for r in reports if r.done and r.token == "b"] == ["played"]
    assert robot.names().count("OutputAudio") - before == 15
    # a tick that fails every time (a face to show keeps it due): once a tick, counted, not logged
    face = screen_to_frame(FaceRenderer().render(EXPRESSIONS["happy"]))[0]
    ticks.failing = 1000
    av.set_face(face)
    robot.run_until(robot.now + 0.5)
    assert 15 <= ticks.failures - 1 <= 17
    av.play_audio("c", tone(1.0))
    robot.run_until(robot.now + FRAME)
    assert [r.message for r in reports if r.done and r.token == "c"] == [done.message]
    assert len(stream_errors(errors)) == 1
    robot.run_until(failed_at + 5.0 + FRAME)                                 # 5 s after the first
    first, again = stream_errors(errors)
    assert again.exc_info is None and "failed again" in again.getMessage()
    assert f"({av.stats.tick_errors} times so far" in again.getMessage() and av.stats.tick_errors > 100
    assert av.counters()["stream ticks failed (driver bug, see the log)"] == ticks.failures
    # mended: the face shows and a goal plays
    ticks.failing = 0
    before = len(robot.sent)
    av.play_audio("d", tone(0.5))
    robot.run_until(robot.now + 1.0)
    assert [r.message for r in reports if r.done and r.token == "d"] == ["played"]
    assert [msg.image for _, msg in robot.sent[before:] if msg.NAME == "DisplayImage"] == [face]
    assert len(stream_errors(errors)) == 2


def test_a_tick_that_raises_ends_its_clip_goal_even_when_ending_it_fails_too(log_records):
    """Where ending the goals fails too (the pacer may be what is broken), they end all the same,
    without it, and the timer is armed again: the next clip plays."""
    errors = log_records("cozmo.anim.av", "ERROR")
    robot, av, reports = make_stream()
    ticks = FailingTicks(av.pacer)
    clip = compile_clip(Clip("c", 0.5, Tracks(head=[HeadKeyframe(0, 100, 20)])))
    av.play_clip("x", clip)
    robot.run_until(robot.now + 0.2)
    cancel_clip = av.pacer.cancel_clip

    def broken(now):
        raise ValueError("cancel failed")

    av.pacer.cancel_clip = broken
    ticks.failing = 1
    robot.run_until(robot.now + FRAME)
    (done,) = [r for r in reports if r.done]
    assert done.token == "x" and not done.success and "stream failed (RuntimeError: tick failed)" in done.message
    assert av._timer is not None and av._timer_at > robot.now
    assert [r.exc_info[1].args[0] for r in stream_errors(errors)] == ["tick failed", "cancel failed"]
    av.pacer.cancel_clip = cancel_clip
    av.play_clip("y", clip)
    robot.run_until(robot.now + 1.0)
    assert [(r.success, r.message) for r in reports if r.done and r.token == "y"] == [(True, "played c")]


def loop_catching(robot) -> list:
    """Have ``robot.call_soon`` run its call as the robot client's loop does: what raises is caught
    (the loop logs it and runs on), and kept in the list returned, not raised to the caller."""
    escaped: list = []

    def call_soon(fn, *args) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - as asyncio's loop
            escaped.append(exc)

    robot.call_soon = call_soon
    return escaped


def raising_once(obj, name: str, message: str) -> None:
    """``obj.name`` raises RuntimeError(``message``) at its next call, then is itself again."""
    real = getattr(obj, name)

    def broken(*args, **kwargs):
        setattr(obj, name, real)
        raise RuntimeError(message)

    setattr(obj, name, broken)


@pytest.mark.parametrize("goal", ["play_clip", "play_audio", "cancel_clip", "cancel_audio"])
def test_a_goal_whose_start_or_cancel_raises_ends_saying_so_and_the_next_goal_plays(log_records, goal):
    """The start or the cancel of a goal is run on the I/O thread: where it raised (a driver bug;
    the robot client's loop logged it), the goal never ended, its client waited until its own
    timeout. Now it ends aborted saying the stream failed, as a failed tick's goals do, and the
    next goal plays; the first failure is logged with its traceback, the next ones within 5 s
    only counted."""
    errors = log_records("cozmo.anim.av", "ERROR")
    robot, av, reports = make_stream()
    escaped = loop_catching(robot)
    clip = compile_clip(Clip("c", 0.5, Tracks(head=[HeadKeyframe(0, 100, 20)])))
    pacer_call = {"play_clip": "play_clip", "play_audio": "queue_audio", "cancel_clip": "cancel_clip",
                  "cancel_audio": "drop_audio"}[goal]
    for n in (1, 2):
        token = f"x{n}"
        if goal.startswith("cancel"):
            (av.play_clip(token, clip) if goal == "cancel_clip" else av.play_audio(token, tone(1.0)))
            robot.run_until(robot.now + 0.2)
        raising_once(av.pacer, pacer_call, f"{goal} failed")
        if goal == "play_clip":
            av.play_clip(token, clip)
        elif goal == "play_audio":
            av.play_audio(token, tone(1.0))
        else:
            getattr(av, goal)(token)
        robot.run_until(robot.now + FRAME)
        ended = [r for r in reports if r.done and r.token == token]
        assert len(ended) == 1, f"goal {token} got {len(ended)} results ({goal} raised: {escaped})"
        done = ended[0]
        assert not done.success and done.kind == ("clip_done" if "clip" in goal else "audio_done")
        assert f"display/audio stream failed (RuntimeError: {goal} failed)" in done.message
        assert "driver bug, please report it" in done.message
        assert escaped == []                                     # nothing left to the loop
    assert av.stats.input_errors == 2 and av.counters()["stream inputs failed (driver bug, see the log)"] == 2
    (logged,) = stream_errors(errors)                          # the second, within 5 s: counted
    assert logged.exc_info[1].args[0] == f"{goal} failed" and f"the {goal} of a goal failed" in logged.getMessage()
    av.play_clip("y", clip)
    robot.run_until(robot.now + 1.0)
    assert [(r.success, r.message) for r in reports if r.done and r.token == "y"] == [(True, "played c")]
    before = robot.names().count("OutputAudio")
    av.play_audio("z", tone(0.5))
    robot.run_until(robot.now + 1.0)
    assert [r.message for r in reports if r.done and r.token == "z"] == ["played"]
    assert robot.names().count("OutputAudio") - before == 15



def column_face(k: int) -> bytes:
    """A face of its own for each ``k`` (a lit column): every one differs from the one before."""
    screen = np.zeros((64, 128), bool)
    screen[:, k % 128] = True
    return screen_to_frame(screen)[0]


def counting_emits(monkeypatch, av) -> list:
    """The ticks the pacer works through from now on (each call of its _emit), as a list."""
    ticks: list = []
    emit = av.pacer._emit

    def counted(k, latest, out):
        ticks.append(k)
        emit(k, latest, out)

    monkeypatch.setattr(av.pacer, "_emit", counted)
    return ticks


@pytest.mark.parametrize("outage", ["robot lost", "deactivated"])
def test_after_an_outage_the_newest_face_shows_at_once_with_no_burst_of_late_ticks(monkeypatch, outage):
    """A face node's faces (10 new ones a second) keep coming while the robot is lost, or
    the driver deactivated, for 9.5 s, right after a face change (within the 0.5 s linger)
    and with faces waiting: on the return one tick goes out, the current one, with the
    newest face; no tick is late, no face counted dropped, none left waiting."""
    robot, av, _ = make_stream(face_queue=6)
    k = 0
    for _ in range(20):
        k += 1
        av.set_face(column_face(k))
        robot.run_until(robot.now + 0.1)
    for _ in range(5):  # five between two ticks: the tick takes one, four wait when the outage starts
        k += 1
        av.set_face(column_face(k))
    robot.run_until(robot.now + 1 / 30)
    assert av.pacer.faces_queued == 4
    if outage == "robot lost":
        robot.set_link(LinkState.LOST)
    else:
        av.stop("deactivated")
    for _ in range(95):
        k += 1
        av.set_face(column_face(k))
        robot.run_until(robot.now + 0.1)
    before, counters = len(robot.sent), av.counters()
    assert counters["face frames waiting"] == 0
    ticks = counting_emits(monkeypatch, av)
    if outage == "robot lost":
        robot.set_link(LinkState.READY)
    else:
        av.start()
    robot.run_until(robot.now + 0.001)
    back = robot.sent[before:]
    assert [msg.NAME for _, msg in back] == ["OutputSilence", "DisplayImage"]
    assert back[1][1].image == column_face(k)                            # the newest, first
    assert len(ticks) == 1
    after = av.counters()
    assert after["underruns (ticks sent late)"] == counters["underruns (ticks sent late)"]
    assert after["face frames dropped (queue full)"] == 0
    # and the faces stream on at 30 fps as before, one tick each, none lost or doubled
    start = len(robot.sent)
    for _ in range(60):
        k += 1
        av.set_face(column_face(k))
        robot.run_until(robot.now + 1 / 30)
    shown = [msg.image for _, msg in robot.sent[start:] if msg.NAME == "DisplayImage"]
    assert shown == [column_face(i) for i in range(k - 59, k + 1)]
    assert av.counters()["underruns (ticks sent late)"] == counters["underruns (ticks sent late)"]


def test_activating_after_8_hours_works_through_one_tick_not_the_nights(monkeypatch):
    """The driver deactivated overnight within the linger of a face change: activating
    again sends the current tick only (it worked through every tick of the 8 h, 864 000,
    on the I/O thread)."""
    robot, av, _ = make_stream()
    av.set_face(column_face(1))
    robot.run_until(robot.now + 0.1)
    av.set_face(column_face(2))
    robot.run_until(robot.now + 0.05)
    av.stop("deactivated")
    robot.run_until(robot.now + 8 * 3600.0)
    av.set_face(column_face(3))
    before, underruns = len(robot.sent), av.counters()["underruns (ticks sent late)"]
    ticks = counting_emits(monkeypatch, av)
    av.start()
    robot.run_until(robot.now + 0.001)
    assert len(ticks) == 1
    assert [msg.NAME for _, msg in robot.sent[before:]] == ["OutputSilence", "DisplayImage"]
    assert robot.sent[-1][1].image == column_face(3)
    assert av.counters()["underruns (ticks sent late)"] == underruns


# --------------------------------------------------------------------------- the face stream

def test_a_link_a_second_behind_gets_no_faces_or_silence_but_all_sound_until_it_catches_up():
    """The session's background queue holds BACKLOG_MAX stream packets (a lossy link): the
    ticks go out without their face image and silence, counted; sound is still sent; once
    the queue drained the current face is sent again."""
    from cozmo_driver.anim.av_stream import BACKLOG_MAX
    robot, av, reports = make_stream()
    faces = [screen_to_frame(FaceRenderer().render(EXPRESSIONS[name]))[0] for name in ("happy", "sad")]
    av.set_face(faces[0])
    robot.run_until(robot.now + 0.2)
    assert "DisplayImage" in robot.names()
    robot.link.session.background_queue_length = BACKLOG_MAX
    t = robot.now + 1e-9                                               # after the tick due now
    av.set_face(faces[1])
    av.play_audio("a", tone(0.3))
    robot.run_until(robot.now + 0.5)
    sent = robot.names(since=t)
    assert "DisplayImage" not in sent and "OutputSilence" not in sent
    assert sent.count("OutputAudio") == 9                              # 0.3 s of sound: every frame
    assert av.counters()["display frames and silence skipped (link behind)"] >= 10
    robot.link.session.background_queue_length = 0
    t = robot.now + 1e-9
    robot.run_until(robot.now + 0.2)
    shown = [msg for when, msg in robot.sent if when >= t and msg.NAME == "DisplayImage"]
    assert shown                                                       # the face again, at once
    assert robot.names(since=t)[:2] == ["OutputSilence", "DisplayImage"]   # its frame's audio first


def test_a_link_a_second_behind_still_gets_every_frame_of_a_clip():
    """Behind by BACKLOG_MAX packets, every tick lost its silence and face image, a clip's
    too: the robot plays a frame per audio message, so the clip's keyframes were bunched
    (its 15 ticks went out with no audio message). Now a clip's ticks keep theirs, each its
    audio message, its face shown; the pacer's own ticks around it still skip theirs."""
    from cozmo_driver.anim.av_stream import BACKLOG_MAX
    from cozmo_driver.anim.clip import FaceKeyframe
    robot, av, _ = make_stream()
    face = screen_to_frame(FaceRenderer().render(EXPRESSIONS["neutral"]))[0]
    av.set_face(face)
    robot.run_until(robot.now + 0.2)
    robot.link.session.background_queue_length = BACKLOG_MAX
    clip = compile_clip(Clip("c", 0.5, Tracks(head=[HeadKeyframe(0, 100, 20), HeadKeyframe(300, 100, -10)],
                                              face=[FaceKeyframe(0, EXPRESSIONS["happy"]),
                                                    FaceKeyframe(300, EXPRESSIONS["sad"])])))
    t = robot.now + 1e-9
    av.set_face(screen_to_frame(FaceRenderer().render(EXPRESSIONS["angry"]))[0])
    robot.run_until(robot.now + 0.1)
    av.play_clip("c", clip)
    robot.run_until(robot.now + 1.0)
    sent = robot.names(since=t)
    first, last = sent.index("StartAnimation") - 1, sent.index("EndAnimation")   # (a tick's audio first)
    assert "OutputSilence" not in sent[:first] and "DisplayImage" not in sent[:first]   # the pacer's own
    assert "OutputSilence" not in sent[last + 1:] and "DisplayImage" not in sent[last + 1:]
    ticks = sent[first:last + 1]
    assert ticks[:2] == ["OutputSilence", "StartAnimation"]
    assert ticks.count("OutputSilence") + ticks.count("OutputAudio") == clip.num_ticks == 15
    assert ticks.count("DisplayImage") >= 2 and ticks.count("AnimHead") == 2


def test_the_face_shows_through_every_loop_of_a_clip_without_one_and_is_skipped_while_behind():
    """A lift clip played 3 times (no face of its own) showed none of the faces that came
    meanwhile: the face before stayed frozen. Now each goes out in the clip's ticks, the loops
    after the first too; a link a second behind still skips those images (not the clip's
    silence), and the current face is sent again once it caught up."""
    from cozmo_driver.anim.av_stream import BACKLOG_MAX
    robot, av, _ = make_stream()
    faces = [screen_to_frame(FaceRenderer().render(EXPRESSIONS[name]))[0]
             for name in ("happy", "sad", "angry", "surprised", "sleepy")]
    av.set_face(faces[0])
    robot.run_until(robot.now + 0.2)
    clip = compile_clip(Clip("lift_only", None, Tracks(lift=[LiftKeyframe(0, 500, 90)])))
    t = robot.now + 1e-9
    av.play_clip("c", clip, loops=3)
    for face in faces[1:4]:                       # 0.4, 0.8 and 1.2 s into the 1.5 s
        robot.run_until(robot.now + 0.4)
        av.set_face(face)
    robot.run_until(robot.now + 0.6)
    during = [msg for when, msg in robot.sent if when >= t]
    names = [msg.NAME for msg in during]
    assert names.count("StartAnimation") == 3 and names.count("EndAnimation") == 3
    last = len(names) - 1 - names[::-1].index("EndAnimation")
    assert [msg.image for msg in during[:last] if msg.NAME == "DisplayImage"] == faces[1:4]
    assert av.counters()["face frames covered (image or animation)"] == 0
    robot.link.session.background_queue_length = BACKLOG_MAX
    t = robot.now + 1e-9
    av.play_clip("d", clip)
    robot.run_until(robot.now + 0.2)
    av.set_face(faces[4])
    robot.run_until(robot.now + 0.5)
    sent = robot.names(since=t)
    assert "DisplayImage" not in sent and sent.count("OutputSilence") == clip.num_ticks   # the clip's only
    robot.link.session.background_queue_length = 0
    t = robot.now + 1e-9
    robot.run_until(robot.now + 0.2)
    assert [msg.image for when, msg in robot.sent if when >= t and msg.NAME == "DisplayImage"] == [faces[4]]


def test_face_stream_renders_on_change_and_keeps_alive():
    animator = FaceAnimator(seed=1, base="neutral", now=0.0, idle=False)
    stream = FaceStream(animator, keepalive_s=1.0)
    first = stream.frame(0.0)
    assert first is not None and first.shape == (64, 128) and set(np.unique(first)) <= {0, 255}
    assert np.array_equal(first > 0, FaceRenderer().render(EXPRESSIONS["neutral"]))
    sent = [k for k in range(1, 60) if stream.frame(k / 30) is not None]
    assert sent == [30]                                                  # only the keep-alive
    assert stream.stats.rendered == 1
    animator.set_expression("happy", 2.0, 0.2)
    changed = [k for k in range(60, 75) if stream.frame(k / 30) is not None]
    assert 5 <= len(changed) <= 8                                        # the 0.2 s transition
    assert np.array_equal(stream.image > 0, FaceRenderer().render(EXPRESSIONS["happy"]))
    idle = FaceStream(FaceAnimator(seed=2, now=0.0, idle=True))
    published = sum(idle.frame(k / 30) is not None for k in range(30 * 20))
    assert 20 < published < 300 and idle.animator.blinks >= 3         # blinks and saccades


def test_the_face_stream_renders_only_the_displayed_rows_when_asked():
    """display_rows=True (the face node handing frames to the driver of its own process,
    nothing else subscribed): the (32, 128) rows the robot shows, each the even row of the
    screen; the whole screen is still there when asked for; a change of form is a frame
    at once (the other side may have nothing yet), then keep-alives as before."""
    animator = FaceAnimator(seed=1, base="neutral", now=0.0, idle=False)
    stream = FaceStream(animator, keepalive_s=1.0)
    rows = stream.frame(0.0, display_rows=True)
    assert rows is not None and rows.shape == (32, 128) and rows.dtype == bool
    screen = FaceRenderer().render(EXPRESSIONS["neutral"])
    assert np.array_equal(rows, screen[0::2])
    assert np.array_equal(screen_to_frame(rows)[0], screen_to_frame(screen)[0])
    assert np.array_equal(stream.image > 0, screen)                      # rendered when asked
    assert [k for k in range(1, 45) if stream.frame(k / 30, display_rows=True) is not None] == [30]
    animator.set_expression("happy", 2.0, 0.0)
    happy = stream.frame(2.0, display_rows=True)
    assert np.array_equal(happy, FaceRenderer().render(EXPRESSIONS["happy"])[0::2])
    full = stream.frame(2.0 + 1 / 30)                                     # the other form: at once
    assert full is not None and full.shape == (64, 128)
    assert np.array_equal(full > 0, FaceRenderer().render(EXPRESSIONS["happy"]))
    assert stream.frame(2.0 + 2 / 30) is None
    assert stream.frame(2.0 + 3 / 30, display_rows=True) is not None
    assert stream.stats.rendered == 4


def test_a_face_set_before_the_client_runs_is_shown_once_it_does():
    from cozmo_driver.transport.udp import TransportError

    robot = FakeRobot()
    running = {"yes": False}
    run_soon = robot.call_soon

    def call_soon(fn, *args):
        if not running["yes"]:
            raise TransportError("transport is not running")
        run_soon(fn, *args)

    robot.call_soon = call_soon
    reports: list = []
    av = AVStream(robot, reports.append)
    face = screen_to_frame(FaceRenderer().render(EXPRESSIONS["wink"]))[0]
    av.set_face(face)                                   # configured, not yet active
    av.play_audio("early", tone(0.1))
    assert reports[-1].done and reports[-1].message == "not connected to the robot"
    assert robot.sent == []
    running["yes"] = True
    av.start()
    robot.run_until(robot.now + 0.1)
    assert [msg.image for _, msg in robot.sent if msg.NAME == "DisplayImage"] == [face]


def test_an_unknown_animation_or_group_is_named_with_close_names_and_nothing_is_chosen(tmp_path):
    lib = AnimationLibrary.load()
    lib.check("nod_yes")
    for name, said in (("nod_yess", "no animation 'nod_yess'; did you mean nod_yes?"),
                       ("nod", "did you mean nod_yes?"),
                       ("zzz", "no animation 'zzz'; 12 clips known (list_animations)")):
        with pytest.raises(AnimationError, match=re.escape(said)):
            lib.check(name)
        with pytest.raises(AnimationError, match=re.escape(said)):
            lib.resolve(name)
    with pytest.raises(AnimationError, match="give an animation name or a group"):
        lib.check()
    with pytest.raises(AnimationError, match="no groups are loaded"):
        lib.check(group="happy")
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"happy_things": {"Animations": [{"Name": "nod_yes"}]}}))
    lib = AnimationLibrary.load(groups_path=groups)
    lib.check(group="happy_things")
    with pytest.raises(AnimationError, match=re.escape("no animation group 'happy_thing'; did you mean "
                                                       "happy_things? 1 groups known (list_animations)")):
        lib.check(group="happy_thing")


@pytest.mark.parametrize("given", ["show_image", "stream_audio"])
def test_an_input_that_is_no_goals_and_raises_ends_the_goals_playing_and_the_stream_plays_on(log_records, given):
    """An image or a stream's audio (a face frame, a face source) is handled on the I/O thread too: where that
    raised (a driver bug), the robot client's loop logged it and the stream was left half-changed,
    perhaps without its timer. Now the stream recovers as from a failed tick: the goal playing ends
    aborted saying so, the failure is logged with its traceback and counted, and the next goal
    plays."""
    errors = log_records("cozmo.anim.av", "ERROR")
    robot, av, reports = make_stream()
    escaped = loop_catching(robot)
    clip = compile_clip(Clip("c", 0.5, Tracks(head=[HeadKeyframe(0, 100, 20)])))
    av.play_clip("x", clip)
    robot.run_until(robot.now + 0.2)
    face = screen_to_frame(FaceRenderer().render(EXPRESSIONS["happy"]))[0]
    if given == "show_image":
        raising_once(av.pacer, "clear_images", "show_image failed")
        av.show_image(face, 1.0)
    else:
        raising_once(av._intake, "add", "stream_audio failed")
        av.stream_audio_at(tone(0.2), 16000)
    robot.run_until(robot.now + FRAME)
    assert escaped == []                                         # nothing left to the loop
    (done,) = [r for r in reports if r.done]
    assert done.token == "x" and not done.success
    assert f"display/audio stream failed (RuntimeError: {given} failed)" in done.message
    assert av.stats.input_errors == 1
    (logged,) = stream_errors(errors)
    assert logged.exc_info[1].args[0] == f"{given} failed"
    assert f"the stream's {given} input failed" in logged.getMessage()
    assert av._timer is not None                                 # armed again
    av.play_clip("y", clip)
    robot.run_until(robot.now + 1.0)
    assert [(r.success, r.message) for r in reports if r.done and r.token == "y"] == [(True, "played c")]
