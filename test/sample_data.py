"""Data files the tests of several folders share, as text (and one set of files, made)."""

#: a camera_calibration_parsers YAML file of a 320x240 camera (distinct values in every field)
CAMERA_YAML = """\
image_width: 320
image_height: 240
camera_name: cozmo_camera
camera_matrix:
  rows: 3
  cols: 3
  data: [300.0, 0.0, 158.0, 0.0, 301.0, 121.0, 0.0, 0.0, 1.0]
distortion_model: plumb_bob
distortion_coefficients:
  rows: 1
  cols: 5
  data: [0.01, -0.02, 0.0, 0.0, 0.003]
rectification_matrix:
  rows: 3
  cols: 3
  data: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
projection_matrix:
  rows: 3
  cols: 4
  data: [300.0, 0.0, 158.0, 0.0, 0.0, 301.0, 121.0, 0.0, 0.0, 0.0, 1.0, 0.0]
"""


def app_clip_with_sprite_and_sound(tmp_path):
    """An app clip (.bin) whose face is a sprite sequence and whose sound a Wwise event,
    with the sprite folder and a WAV file for the event: (clip dir, sprite dir, map file)."""
    import wave

    import numpy as np
    from PIL import Image as PILImage

    from cozmo_driver.anim.clip import (AudioKeyframe, Clip, SpriteKeyframe, Tracks, synthesize,
                                        write_anim_bin)
    from cozmo_driver.protocol.audio import SAMPLE_RATE

    clips = tmp_path / "animations"
    clips.mkdir()
    app = Clip("anim_sprite_and_sound", None, Tracks(
        sprite=[SpriteKeyframe(0, "blink_sprite")],
        audio=[AudioKeyframe(0, event_ids=(4000000001, 12), probabilities=(0.5, 0.5))]))
    (clips / "app.bin").write_bytes(write_anim_bin([app]))
    sprites = tmp_path / "faceAnimations"
    (sprites / "blink_sprite").mkdir(parents=True)
    for i in range(4):
        img = np.zeros((64, 128), dtype=np.uint8)
        img[20:40, 10 + 25 * i:30 + 25 * i] = 255
        PILImage.fromarray(img).save(sprites / "blink_sprite" / f"blink_sprite_{i:02d}.png")
    (tmp_path / "sounds").mkdir()
    with wave.open(str(tmp_path / "sounds" / "chirp.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(synthesize("tone(880, 0.3)").astype("<i2").tobytes())
    audio_map = tmp_path / "audio_map.yaml"
    audio_map.write_text("# Wwise event id: WAV file\n4000000001: sounds/chirp.wav\n")
    return clips, sprites, audio_map


def pillow_of_ubuntu_22_04(monkeypatch):
    """Make ``from PIL import Image`` give the module as Pillow 9.0 has it (Humble's Ubuntu
    22.04): without ``Image.Resampling`` and ``Image.Dither``, which came with 9.1. Pillow's
    own code keeps its module (deleting the names from it breaks Pillow itself)."""
    import PIL
    from PIL import Image

    class Pillow90:
        def __getattr__(self, name):
            if name in ("Resampling", "Dither"):
                raise AttributeError(f"module 'PIL.Image' has no attribute {name!r} (Pillow 9.0)")
            return getattr(Image, name)

    monkeypatch.setattr(PIL, "Image", Pillow90())
