"""Benchmarks for the camera, display and audio codecs, ours beside the reference (pycozmo).

Run:  PYTHONPATH=. python bench/bench_codecs.py [--quick]

Prints median and 90th-percentile wall time per operation in microseconds.  The
reference column is filled only when pycozmo is installed; it is imported here
and nowhere in the package.  Numbers only: nothing is asserted.

The camera frame rows time the whole receive path of one QVGA frame, from its
ImageChunk messages (as decoded from the wire) to a JPEG: ours is
``ImageAssembler.push_chunk`` per chunk and ``image_to_jpeg``; pycozmo's is its
client's own chunk handler (``Client._on_image_chunk``, which joins the chunks in a
preallocated buffer) followed by its ``minigray_to_jpeg`` / ``minicolor_to_jpeg``.
The "-> pixels" rows go on to what pycozmo's client hands its users, decoded RGB
pixels at 320x240 (its unmodified handler: JPEG, PIL decode, colour stretched);
ours decodes with ``decode_to_array``.  Both sides get the same frames, tagged
JPEGMinimizedGray (8) with the colour flag in the payload, as the robot sends them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from _common import bench_report, comparison, measure

from cozmo_driver.protocol import audio, camera, display
from cozmo_driver.protocol import messages as m


def textured_gray(h: int = 240, w: int = 320) -> np.ndarray:
    rng = np.random.default_rng(1)
    yy, xx = np.mgrid[0:h, 0:w]
    img = 128 + 60 * np.sin(xx / 7.0) * np.cos(yy / 11.0) + rng.normal(0, 12, (h, w))
    return img.clip(0, 255).astype(np.uint8)


def textured_rgb(h: int = 240, w: int = 320) -> np.ndarray:
    g = textured_gray(h, w)
    return np.stack([g, np.roll(g, 20, axis=1), 255 - g], axis=-1)


def face_like() -> np.ndarray:
    """Two filled rounded eyes on the 128x32 protocol image: a typical face frame."""
    yy, xx = np.mgrid[0:32, 0:128]
    eyes = ((xx - 40) / 18.0) ** 2 + ((yy - 16) / 12.0) ** 2 <= 1
    eyes |= ((xx - 88) / 18.0) ** 2 + ((yy - 16) / 12.0) ** 2 <= 1
    return eyes


_QVGA = int(m.ENUMS["ImageResolution"].QVGA)
_MINIMIZED = int(m.ENUMS["ImageEncoding"].JPEGMinimizedGray)  # grey and colour alike


def frame_chunks(payload: bytes, make: Callable[..., object], timestamp_name: str) -> list:
    """One camera frame as the ImageChunk messages of ``make`` (our class or pycozmo's)."""
    parts = camera.split_into_chunks(payload)
    return [make(**{timestamp_name: 1000}, image_id=1, chunk_debug=0, image_encoding=_MINIMIZED,
                 image_resolution=_QVGA, image_chunk_count=len(parts), chunk_id=k, status=0, data=part)
            for k, part in enumerate(parts)]


def our_frame_path(payload: bytes) -> tuple[Callable[[], bytes], Callable[[], object]]:
    """Ours: one assembler (as the driver keeps one), chunks -> CameraImage -> JPEG (-> pixels)."""
    chunks = frame_chunks(payload, m.ImageChunk, "frame_timestamp_ms")
    assembler = camera.ImageAssembler()

    def to_jpeg() -> bytes:
        assembler.reset()  # the same image id again: forget that it was completed
        for chunk in chunks:
            image = assembler.push_chunk(chunk)
        return camera.image_to_jpeg(image)

    def to_pixels() -> object:
        assembler.reset()
        for chunk in chunks:
            image = assembler.push_chunk(chunk)
        return camera.decode_to_array(camera.image_to_jpeg(image), camera.is_half_width_color(image))

    return to_jpeg, to_pixels


def reference_frame_path(payload: bytes) -> tuple[Callable[[], bytes], Callable[[], object]]:
    """pycozmo: its client's chunk handler on a client that never connects (no socket), then
    its reconstruction (JPEG) or its whole completion step (RGB pixels, as users get them)."""
    import pycozmo.camera as ref_camera
    import pycozmo.protocol_encoder as pe
    from pycozmo.client import Client
    from pycozmo.event import Dispatcher

    chunks = frame_chunks(payload, pe.ImageChunk, "frame_timestamp")
    width, height = ref_camera.RESOLUTIONS[pe.ImageResolution(_QVGA)]
    client = Client.__new__(Client)  # no __init__: no connection, no threads
    Dispatcher.__init__(client)
    client._reset_partial_state()
    jpegs: list[bytes] = []

    def reconstruct_only() -> None:
        data = client._partial_data[: client._partial_size]
        if data[0]:  # the colour flag: coded at half width
            jpegs.append(ref_camera.minicolor_to_jpeg(data, width // 2, height))
        else:
            jpegs.append(ref_camera.minigray_to_jpeg(data, width, height))

    def to_jpeg() -> bytes:
        client._process_completed_image = reconstruct_only
        for chunk in chunks:
            client._on_image_chunk(client, chunk)
        return jpegs.pop()

    def to_pixels() -> object:
        del client._process_completed_image  # pycozmo's own: JPEG, PIL decode to RGB, stretch
        for chunk in chunks:
            client._on_image_chunk(client, chunk)
        client._process_completed_image = reconstruct_only
        return client._latest_image

    client._process_completed_image = reconstruct_only
    return to_jpeg, to_pixels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    reps, secs = (20, 0.05) if args.quick else (200, 0.5)

    try:
        import pycozmo.audio as ref_audio
        import pycozmo.camera as ref_camera
        import pycozmo.image_encoder as ref_display
        from PIL import Image
    except ImportError:
        ref_audio = ref_camera = ref_display = None
        print("pycozmo not installed: reference column skipped")

    rows: list[tuple[str, tuple[float, float, int], tuple[float, float, int] | None]] = []

    def bench(name: str, ours: Callable[[], object], ref: Callable[[], object] | None = None) -> None:
        rows.append((name, measure(ours, reps, secs), measure(ref, reps, secs) if ref else None))

    # Camera --------------------------------------------------------------------------------
    gray = textured_gray()
    mini = camera.encode_minimized(gray)
    mini_np = np.frombuffer(mini, dtype=np.uint8)
    jpeg = camera.minimized_to_jpeg(mini, 320, 240)
    rgb = textured_rgb()
    mini_rgb = camera.encode_minimized(rgb)
    print(f"camera payloads: grey QVGA {len(mini)} B, colour QVGA {len(mini_rgb)} B")
    bench(
        f"camera: minimized->JPEG, QVGA grey ({len(mini)} B)",
        lambda: camera.minimized_to_jpeg(mini, 320, 240),
        (lambda: ref_camera.minigray_to_jpeg(mini_np, 320, 240)) if ref_camera else None,
    )
    mini_rgb_np = np.frombuffer(mini_rgb, dtype=np.uint8)
    bench(
        f"camera: minimized->JPEG, QVGA colour ({len(mini_rgb)} B)",
        lambda: camera.minimized_to_jpeg(mini_rgb, 320, 240),
        (lambda: ref_camera.minicolor_to_jpeg(mini_rgb_np, 160, 240)) if ref_camera else None,
    )
    bench("camera: JPEG->pixels (Pillow), QVGA grey", lambda: camera.decode_to_array(jpeg, False))
    for label, payload in (("grey", mini), ("colour", mini_rgb)):
        ours_jpeg, ours_pixels = our_frame_path(payload)
        ref_jpeg, ref_pixels = reference_frame_path(payload) if ref_camera else (None, None)
        count = len(camera.split_into_chunks(payload))
        what = f"QVGA {label}, {count} ImageChunks ({len(payload)} B)"
        bench(f"camera frame: chunks->JPEG, {what}", ours_jpeg, ref_jpeg)
        bench(f"camera frame: chunks->pixels, {what}", ours_pixels, ref_pixels)
    bench("camera: encode QVGA colour (numpy encoder)", lambda: camera.encode_minimized(rgb))
    bench("camera: encode QVGA grey (Pillow + strip)", lambda: camera.encode_minimized(gray))
    bench("camera: encode QVGA grey (numpy encoder)", lambda: camera.encode_minimized(gray, use_pillow=False))

    # Display -------------------------------------------------------------------------------
    for label, bits in (
        ("face", face_like()),
        ("noise 10%", np.random.default_rng(2).random((32, 128)) < 0.1),
    ):
        data = display.encode_display(bits)
        ref_img = Image.fromarray(bits.astype(np.uint8) * 255).convert("1") if ref_display else None
        bench(
            f"display: encode {label} ({len(data)} B)",
            lambda bits=bits: display.encode_display(bits),
            (lambda im=ref_img: ref_display.ImageEncoder(im).encode()) if ref_display else None,
        )
        bench(
            f"display: decode {label} ({len(data)} B)",
            lambda data=data: display.decode_display(data),
            (lambda data=data: ref_display.ImageDecoder(data).decode()) if ref_display else None,
        )
    checker = np.indices((32, 128)).sum(axis=0) % 2 == 0
    noise = np.random.default_rng(0).random((32, 128)) < 0.5
    bench("display: fit_to_frame checkerboard (4096 B -> fit)", lambda: display.fit_to_frame(checker))
    bench("display: fit_to_frame 50% noise (~2.1 kB -> fit)", lambda: display.fit_to_frame(noise))
    photo = textured_gray()
    bench("display: image_to_bits 320x240 dither", lambda: display.image_to_bits(photo, mode="dither"))

    # Audio ---------------------------------------------------------------------------------
    rng = np.random.default_rng(3)
    second = rng.integers(-30000, 30000, audio.SAMPLE_RATE).astype(np.int16)  # within the reference's range
    raw_frames = [
        second[i : i + audio.SAMPLES_PER_FRAME].astype("<i2").tobytes()
        for i in range(0, second.size, audio.SAMPLES_PER_FRAME)
    ]
    bench(
        "audio: u-law encode 1 s (22 320 samples)",
        lambda: audio.encode_ulaw(second),
        (lambda: [ref_audio.bytes_to_cozmo(f, 1, 1) for f in raw_frames]) if ref_audio else None,
    )
    bench("audio: frames_from_pcm 1 s (30 frames)", lambda: audio.frames_from_pcm(second))
    t = np.arange(48000) / 48000
    tone48 = np.rint(10000 * np.sin(2 * np.pi * 1000 * t)).astype(np.int16)
    bench("audio: resample 1 s 48 kHz -> 22 320 Hz", lambda: audio.resample(tone48, 48000, audio.SAMPLE_RATE))
    t = np.arange(44100) / 44100
    tone44 = np.rint(10000 * np.sin(2 * np.pi * 1000 * t)).astype(np.int16)
    bench("audio: resample 1 s 44.1 kHz -> 22 320 Hz", lambda: audio.resample(tone44, 44100, audio.SAMPLE_RATE))

    # Table ---------------------------------------------------------------------------------
    comparison(rows, "operation", "times in microseconds per operation; median and 90th percentile")


if __name__ == "__main__":
    with bench_report("bench_codecs"):
        main()
