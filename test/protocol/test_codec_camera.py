"""Camera codec: minimized JPEG reconstruction, the encoder, and chunk reassembly."""

from __future__ import annotations

import io
import random
import struct
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cozmo_driver.protocol import camera
from cozmo_driver.protocol.camera import (
    CameraImage,
    ImageAssembler,
    decode_to_array,
    decode_to_bytes,
    encode_minimized,
    image_to_array,
    image_to_jpeg,
    jpeg_header,
    luma_sample,
    minimized_to_jpeg,
    split_into_chunks,
)
from cozmo_driver.protocol.errors import LocalProtocolError, RemoteProtocolError
from dependencies import require
from sample_data import pillow_of_ubuntu_22_04

QVGA = 4


def textured_gray(h: int = 240, w: int = 320, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = 128 + 60 * np.sin(xx / 7.0) * np.cos(yy / 11.0) + rng.normal(0, 12, (h, w))
    return img.clip(0, 255).astype(np.uint8)


def smooth_rgb(h: int = 240, w: int = 320) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    r = 128 + 100 * np.sin(xx / 40.0)
    g = 128 + 100 * np.cos(yy / 30.0)
    b = (xx + yy) * 255.0 / (w + h)
    return np.stack([r, g, b], axis=-1).clip(0, 255).astype(np.uint8)


def pillow_jpeg(gray: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(gray, "L").save(buf, "JPEG", quality=50)
    return buf.getvalue()


def pillow_decode(jpeg: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(jpeg)) as im:
        return np.array(im)


def minimize_by_hand(jpeg: bytes) -> bytes:
    """Independent oracle: strip a baseline JPEG down to flag byte + unstuffed scan."""
    i = 2
    while True:
        assert jpeg[i] == 0xFF
        marker = jpeg[i + 1]
        (length,) = struct.unpack_from(">H", jpeg, i + 2)
        if marker == 0xDA:
            scan = jpeg[i + 2 + length : -2]
            return b"\x00" + scan.replace(b"\xff\x00", b"\xff")
        i += 2 + length


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255.0**2 / mse))


# ---------------------------------------------------------------------------------------------
# Header and tables
# ---------------------------------------------------------------------------------------------


def test_header_sizes_and_size_patch():
    grey = jpeg_header(320, 240, False)
    colour = jpeg_header(160, 240, True)
    assert len(grey) == 324 and len(colour) == 334
    assert grey[0x5E:0x62] == bytes([0x00, 0xF0, 0x01, 0x40])
    assert colour[0x5E:0x62] == bytes([0x00, 0xF0, 0x00, 0xA0])
    # Quantisation table starts 16, 11, 12, 14, 12, 10, 16, 14 (zigzag, IJG quality 50).
    assert grey[25:33] == bytes([16, 11, 12, 14, 12, 10, 16, 14])


def test_pillow_quality50_tables_equal_ours():
    # The module only uses Pillow's grey scan if its tables are exactly the fixed ones.
    assert camera._parse_pillow_gray(pillow_jpeg(textured_gray(64, 64))) is not None


def test_header_identical_to_reference():
    pc = require("pycozmo.camera", "the reference oracle")
    for w, h in camera.RESOLUTIONS.values():
        ref = pc.minigray_to_jpeg(np.array([0, 1], dtype=np.uint8), w, h)
        assert jpeg_header(w, h, False) == bytes(ref[:324])
        ref = pc.minicolor_to_jpeg(np.array([1, 1], dtype=np.uint8), w // 2, h)
        assert jpeg_header(w // 2, h, True) == bytes(ref[:334])


def test_resolution_table():
    assert camera.RESOLUTIONS[0] == (16, 16)
    assert camera.RESOLUTIONS[QVGA] == (320, 240)
    assert camera.RESOLUTIONS[12] == (3200, 2400)
    assert len(camera.RESOLUTIONS) == 13
    for bad in (13, 14, -1, 99):
        with pytest.raises(RemoteProtocolError):
            camera.resolution_size(bad)


def test_resolution_table_matches_reference():
    pc = require("pycozmo.camera", "the reference oracle")
    assert {k.value: v for k, v in pc.RESOLUTIONS.items()} == camera.RESOLUTIONS


# ---------------------------------------------------------------------------------------------
# Grey: Pillow JPEG -> minimized -> our reconstruction
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("resolution", [0, 1, 3, QVGA, 5])
def test_gray_reconstruction_is_pixel_identical_to_pillow(resolution):
    w, h = camera.RESOLUTIONS[resolution]
    img = textured_gray(h, w, seed=resolution)
    original = pillow_jpeg(img)
    mini = minimize_by_hand(original)
    assert encode_minimized(img) == mini  # the module's Pillow path strips the same way
    rebuilt = minimized_to_jpeg(mini, w, h)
    assert np.array_equal(decode_to_array(rebuilt, False), pillow_decode(original))


def test_gray_reconstruction_bytes_identical_to_reference():
    pc = require("pycozmo.camera", "the reference oracle")
    img = textured_gray()
    mini = encode_minimized(img, pad_to_multiple=4)
    ours = minimized_to_jpeg(mini, 320, 240)
    ref = pc.minigray_to_jpeg(np.frombuffer(mini, dtype=np.uint8), 320, 240)
    assert bytes(ref[: len(ours)]) == ours
    assert not ref[len(ours) :].any()  # the reference leaves its buffer untrimmed (m.14)
    assert np.array_equal(decode_to_array(ours, False), pillow_decode(bytes(ref)))


def test_padding_is_ignored():
    img = textured_gray(48, 64)
    plain = encode_minimized(img)
    padded = encode_minimized(img, pad_to_multiple=64)
    assert len(padded) % 64 == 0 and padded.startswith(plain)
    assert minimized_to_jpeg(padded, 64, 48) == minimized_to_jpeg(plain + b"\xff" * 7, 64, 48)
    assert minimized_to_jpeg(padded, 64, 48) == minimized_to_jpeg(plain, 64, 48)


def test_scan_ending_in_ff_survives_the_padding_strip():
    # Random 16x16 images whose scan data ends in 0xFF (seed found by search): the encoder appends
    # one 0x00 guard byte so the trailing-0xFF strip does not eat real data.
    hits = 0
    for seed in (177, 178, 221, 248, 275):
        img = np.random.default_rng(seed).integers(0, 256, (16, 16), dtype=np.uint8)
        mini = encode_minimized(img)
        assert mini.endswith(b"\xff\x00")
        hits += 1
        original = pillow_jpeg(img)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = decode_to_array(minimized_to_jpeg(mini, 16, 16), False)
        assert np.array_equal(got, pillow_decode(original))
        # Without the guard the last block is corrupted: the guard is needed.
        broken = decode_to_array(minimized_to_jpeg(mini[:-1], 16, 16), False)
        assert not np.array_equal(broken, pillow_decode(original))
    assert hits == 5


def test_numpy_gray_encoder_is_close_to_pillow():
    img = textured_gray()
    ours = decode_to_array(minimized_to_jpeg(encode_minimized(img, use_pillow=False), 320, 240), False)
    ref = pillow_decode(pillow_jpeg(img))
    diff = np.abs(ours.astype(int) - ref.astype(int))
    # Float DCT vs libjpeg's integer DCT: a few coefficients round differently.
    assert diff.mean() < 0.5
    assert psnr(ours, img) > 28


# ---------------------------------------------------------------------------------------------
# Colour
# ---------------------------------------------------------------------------------------------


def test_color_round_trip_psnr():
    src = smooth_rgb()
    mini = encode_minimized(src)
    assert mini[0] != 0
    jpeg = minimized_to_jpeg(mini, 320, 240)
    with Image.open(io.BytesIO(jpeg)) as im:
        assert im.size == (160, 240) and im.mode == "RGB"
        # Pillow's view of the SOF0 components: (id, H, V, quantisation table).
        assert im.layer == [(1, 2, 1, 0), (2, 1, 1, 0), (3, 1, 1, 0)]
    out = decode_to_array(jpeg, True)
    assert out.shape == (240, 320, 3)
    # Measured 43.4 dB on this image (half width, chroma at quarter width, quality 50).
    assert psnr(out, src) > 30


def test_color_reconstruction_identical_to_reference():
    pc = require("pycozmo.camera", "the reference oracle")
    mini = encode_minimized(smooth_rgb())
    ours = minimized_to_jpeg(mini, 320, 240)
    ref = pc.minicolor_to_jpeg(np.frombuffer(mini, dtype=np.uint8), 160, 240)
    assert bytes(ref[: len(ours)]) == ours


@pytest.mark.parametrize("resolution", [0, 1, 5])
def test_color_odd_block_sizes(resolution):
    w, h = camera.RESOLUTIONS[resolution]
    src = smooth_rgb(h, w)
    out = decode_to_array(minimized_to_jpeg(encode_minimized(src), w, h), True)
    assert out.shape == (h, w, 3)
    assert psnr(out, src) > 25


def test_color_flag_override():
    mini = encode_minimized(textured_gray(16, 32))
    assert minimized_to_jpeg(mini, 32, 16, color=True)[0x60:0x62] == b"\x00\x10"
    assert minimized_to_jpeg(mini, 32, 16)[0x60:0x62] == b"\x00\x20"


def test_encoder_rejects_bad_input():
    with pytest.raises(LocalProtocolError):
        encode_minimized(np.zeros((8, 8), dtype=np.float32))
    with pytest.raises(LocalProtocolError):
        encode_minimized(np.zeros((8, 9, 3), dtype=np.uint8))
    with pytest.raises(LocalProtocolError):
        encode_minimized(np.zeros((8, 8, 4), dtype=np.uint8))


# ---------------------------------------------------------------------------------------------
# Dispatch and decode errors
# ---------------------------------------------------------------------------------------------


def make_image(encoding: int, data: bytes, resolution: int = QVGA) -> CameraImage:
    w, h = camera.RESOLUTIONS[resolution]
    return CameraImage(1, 1000, encoding, resolution, w, h, data)


def test_image_to_jpeg_dispatch():
    img = textured_gray()
    plain = pillow_jpeg(img)
    assert image_to_jpeg(make_image(5, plain)) == plain
    assert image_to_jpeg(make_image(6, plain)) == plain
    mini = encode_minimized(img)
    assert image_to_jpeg(make_image(8, mini)) == minimized_to_jpeg(mini, 320, 240)
    colour = encode_minimized(smooth_rgb())
    assert image_to_jpeg(make_image(9, colour)) == minimized_to_jpeg(colour, 320, 240, color=True)
    assert image_to_array(make_image(9, colour)).shape == (240, 320, 3)
    assert image_to_array(make_image(8, mini)).shape == (240, 320)
    for enc in (0, 1, 2, 3, 4, 7, 42):
        with pytest.raises(RemoteProtocolError, match=f"encoding {enc}"):
            image_to_jpeg(make_image(enc, mini))


def test_a_plain_jpeg_frame_whose_header_is_not_its_resolution_is_refused_from_the_header_alone(monkeypatch):
    """JPEGGray/JPEGColor (5/6) frames passed through as they came: chunks that said QVGA
    with a JPEG whose header said 3200x2400 (the largest size of the table, which the
    decoder's bound let through) were decoded at that size on the I/O thread (159 ms a
    frame), and camera/image_raw and compressed carried 3200x2400 while camera_info said
    320x240. The JPEG's own size must be the chunks' resolution; only its header is read."""
    monkeypatch.setattr(Image, "open", None)  # nothing is decoded, nor its header parsed by Pillow
    for mode, size in (("L", (320, 240)), ("RGB", (320, 240)), ("RGB", (3200, 2400)), ("L", (160, 240)),
                       ("L", (640, 480)), ("L", (320, 239))):
        buf = io.BytesIO()
        Image.new(mode, size).save(buf, "JPEG", quality=50, progressive=size == (640, 480))
        for encoding in (5, 6):
            image = make_image(encoding, buf.getvalue())
            if size == (320, 240):
                assert image_to_jpeg(image) == buf.getvalue()
                continue
            with pytest.raises(RemoteProtocolError, match=f"image 1: its JPEG header says {size[0]}x{size[1]}, "
                               r"but its chunks say image_resolution 4 \(QVGA, 320x240\)"):
                image_to_jpeg(image)


def test_jpeg_size_reads_the_one_frame_header_a_decoder_would():
    """What camera.jpeg_size takes for the size is what Pillow decodes: a JPEG it cannot read
    as a decoder would (stray bytes between segments, which Pillow skips; a second frame
    header, whose size Pillow takes) is refused, not read otherwise."""
    jpeg = pillow_jpeg(textured_gray(48, 64))
    assert camera.jpeg_size(jpeg) == (64, 48)
    assert camera.jpeg_size(minimized_to_jpeg(encode_minimized(smooth_rgb(24, 40)), 40, 24)) == (20, 24)
    sof = jpeg.index(b"\xff\xc0")
    length = struct.unpack_from(">H", jpeg, sof + 2)[0]
    segment = jpeg[sof : sof + 2 + length]
    second = bytearray(segment)
    second[5:9] = struct.pack(">HH", 2400, 3200)
    with Image.open(io.BytesIO(jpeg[:sof] + segment + bytes(second) + jpeg[sof + 2 + length :])) as im:
        assert im.size == (3200, 2400)  # Pillow's size: the last header's
    refused = {
        "not a JPEG": b"GIF89a" + jpeg[6:],
        "stray bytes": jpeg[:sof] + b"\x00" + jpeg[sof:],
        "more than one frame header": jpeg[:sof] + segment + bytes(second) + jpeg[sof + 2 + length :],
        "no frame header": jpeg[:sof] + jpeg[sof + 2 + length :],
        "ends before its scan": jpeg[:sof],
        "marker FF D9": jpeg[:sof] + b"\xff\xd9" + jpeg[sof:],
        "does not fit": jpeg[:sof] + b"\xff\xc0\xff\xff",
    }
    for what, data in refused.items():
        with pytest.raises(RemoteProtocolError, match=what):
            camera.jpeg_size(data)
    assert camera.jpeg_size(jpeg[:sof] + b"\xff\xff" + jpeg[sof:]) == (64, 48)  # fill bytes before a marker


def test_decode_to_bytes_is_the_array_as_an_image_message_carries_it():
    grey = minimized_to_jpeg(encode_minimized(textured_gray()), 320, 240)
    colour = minimized_to_jpeg(encode_minimized(smooth_rgb()), 320, 240, color=True)
    for jpeg, half, shape in ((grey, False, (240, 320)), (colour, True, (240, 320, 3))):
        data, width, height, channels = decode_to_bytes(jpeg, half)
        pixels = decode_to_array(jpeg, half)
        assert pixels.shape == shape and (height, width) == shape[:2]
        assert channels == (1 if len(shape) == 2 else 3)
        assert data == pixels.tobytes()
        if not half:  # at half width, what Pillow decodes is stretched first
            assert data == pillow_decode(jpeg).tobytes()
    with pytest.raises(RemoteProtocolError):
        decode_to_bytes(b"not a jpeg", False)


def test_decoding_at_the_known_coded_size_gives_the_same_pixels():
    grey = make_image(8, encode_minimized(textured_gray()))
    colour = make_image(9, encode_minimized(smooth_rgb()[:, ::2].copy()))
    assert camera.coded_size(grey) == (320, 240)
    assert camera.coded_size(colour) == (160, 240)
    assert camera.coded_size(make_image(0, b"\xff\xd8")) is None  # a full JPEG: read its header
    for image in (grey, colour):
        jpeg, half = image_to_jpeg(image), camera.is_half_width_color(image)
        assert decode_to_bytes(jpeg, half, camera.coded_size(image)) == decode_to_bytes(jpeg, half)
    # a size that is not the stream's: the general path, same pixels (or its error)
    jpeg = image_to_jpeg(grey)
    assert decode_to_bytes(jpeg, False, (320, 200)) == decode_to_bytes(jpeg, False)
    with pytest.raises(RemoteProtocolError):
        decode_to_bytes(b"not a jpeg", False, (320, 240))


def test_decode_errors_are_remote_protocol_errors():
    with pytest.raises(RemoteProtocolError):
        minimized_to_jpeg(b"", 320, 240)
    with pytest.raises(RemoteProtocolError):
        decode_to_array(b"not a jpeg", False)
    with pytest.raises(RemoteProtocolError, match="no scan data"):
        minimized_to_jpeg(b"\x00\xff\xff", 320, 240)
    # A truncated scan still "decodes" (libjpeg only warns and fills in grey); no crash either way.
    assert decode_to_array(minimized_to_jpeg(b"\x00\x12", 320, 240), False).shape == (240, 320)


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=400), st.sampled_from([0, 1, 2]))
def test_fuzz_minimized_payloads_raise_only_remote_errors(data, resolution):
    w, h = camera.RESOLUTIONS[resolution]
    try:
        out = decode_to_array(minimized_to_jpeg(data, w, h), data[0] != 0)
    except RemoteProtocolError:
        return
    assert out.shape[:2] == (h, w)


def test_hostile_jpeg_size_is_refused_before_decoding():
    jpeg = bytearray(pillow_jpeg(textured_gray(16, 16)))
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 5 : sof + 9] = struct.pack(">HH", 8000, 8000)  # under Pillow's bomb limit, over ours
    with pytest.raises(RemoteProtocolError, match="claims 8000x8000"):
        decode_to_array(bytes(jpeg), False)


_SMALL_JPEGS = [
    pillow_jpeg(textured_gray(24, 40)),
    minimized_to_jpeg(encode_minimized(smooth_rgb(24, 40)), 40, 24),
]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(_SMALL_JPEGS),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(0, 10_000),
)
def test_fuzz_mutated_jpegs_raise_only_remote_errors(jpeg, edits, cut):
    # Plain JPEG encodings (5/6) hand the robot's bytes straight to Pillow.
    data = bytearray(jpeg)
    for pos, value in edits:
        data[pos % len(data)] = value
    data = bytes(data[: max(2, len(data) - cut % 64)])
    try:
        out = decode_to_array(data, False)
    except RemoteProtocolError:
        return
    assert out.dtype == np.uint8


def test_luma_sample_is_the_image_at_a_quarter_size_grey_or_colour():
    """What the automatic exposure measures: libjpeg's scaled decoding, its grey values only."""
    grey = textured_gray(240, 320)
    jpeg = minimized_to_jpeg(encode_minimized(grey), 320, 240)
    sample = luma_sample(jpeg)
    assert sample.shape == (60, 80) and sample.dtype == np.uint8
    blocks = grey.reshape(60, 4, 80, 4).mean(axis=(1, 3))
    assert np.abs(sample.astype(float) - blocks).mean() < 6.0
    rgb = smooth_rgb(240, 320)
    colour = luma_sample(minimized_to_jpeg(encode_minimized(rgb), 320, 240))
    luma = rgb.astype(float) @ [0.299, 0.587, 0.114]
    assert colour.shape == (60, 40) and abs(float(np.median(colour)) - float(np.median(luma))) < 8.0
    with pytest.raises(RemoteProtocolError):
        luma_sample(b"not a jpeg")
    hostile = bytearray(pillow_jpeg(textured_gray(16, 16)))
    sof = hostile.index(b"\xff\xc0")
    hostile[sof + 5: sof + 9] = struct.pack(">HH", 8000, 8000)
    with pytest.raises(RemoteProtocolError, match="claims 8000x8000"):
        luma_sample(bytes(hostile))


# ---------------------------------------------------------------------------------------------
# Chunks and reassembly
# ---------------------------------------------------------------------------------------------


def test_split_into_chunks():
    payload = bytes(range(256)) * 40
    chunks = split_into_chunks(payload)
    assert [len(c) for c in chunks] == [1000] * 10 + [240]
    assert b"".join(chunks) == payload
    assert split_into_chunks(b"") == [b""]
    with pytest.raises(LocalProtocolError):
        split_into_chunks(b"x" * 256, max_chunk=1)
    with pytest.raises(LocalProtocolError):
        split_into_chunks(b"x", max_chunk=0)


def chunks_of(image_id: int, payload: bytes, ts: int | None = None, encoding: int = 8, max_chunk: int = 1000):
    parts = split_into_chunks(payload, max_chunk)
    ts = image_id * 66 if ts is None else ts
    return [
        dict(
            image_id=image_id,
            frame_timestamp_ms=ts,
            image_encoding=encoding,
            image_resolution=QVGA,
            image_chunk_count=len(parts),
            chunk_id=i,
            data=p,
        )
        for i, p in enumerate(parts)
    ]


def feed(asm: ImageAssembler, chunks) -> list[CameraImage]:
    out = []
    for c in chunks:
        img = asm.push(**c)
        if img is not None:
            out.append(img)
    return out


def test_in_order_reassembly_and_end_to_end_pixels():
    img = textured_gray()
    payload = encode_minimized(img)
    asm = ImageAssembler()
    out = feed(asm, chunks_of(7, payload))
    assert len(out) == 1
    got = out[0]
    assert (got.image_id, got.frame_timestamp_ms, got.width, got.height, got.data) == (7, 462, 320, 240, payload)
    assert np.array_equal(image_to_array(got), pillow_decode(pillow_jpeg(img)))
    assert asm.stats.completed_images == 1 and asm.pending == 0


def test_shuffled_and_duplicated_chunks():
    payload = encode_minimized(textured_gray())
    rng = random.Random(5)
    asm = ImageAssembler()
    for image_id in range(1, 21):
        chunks = chunks_of(image_id, payload)
        dups = [rng.choice(chunks) for _ in range(3)]
        stream = chunks + dups
        rng.shuffle(stream)
        # Count only the duplicates that arrive before completion; later ones are late copies.
        out = feed(asm, stream)
        assert len(out) == 1 and out[0].data == payload and out[0].image_id == image_id
    assert asm.stats.completed_images == 20
    assert asm.stats.duplicate_chunks == 60
    assert asm.stats.dropped_images == 0


def test_missing_chunk_drops_image_when_newer_completes():
    payload = encode_minimized(textured_gray())
    asm = ImageAssembler()
    first = chunks_of(1, payload)
    del first[4]
    assert feed(asm, first) == []
    assert asm.pending == 1
    out = feed(asm, chunks_of(2, payload))
    assert [i.image_id for i in out] == [2]
    assert asm.stats.dropped_images == 1 and asm.pending == 0
    # The lost chunk turning up late is stale, not a new image.
    late = chunks_of(1, payload)[4]
    assert asm.push(**late) is None
    assert asm.stats.stale_chunks == 1 and asm.pending == 0


def test_images_cut_short_by_switching_the_camera_off_are_discarded_not_dropped():
    payload = encode_minimized(textured_gray())
    asm = ImageAssembler()
    first = chunks_of(1, payload)
    assert feed(asm, first[:3]) == [] and asm.pending == 1
    assert asm.discard_pending() == 1 and asm.pending == 0
    # a chunk of it still in flight is stale; the next image completes; nothing was dropped
    assert asm.push(**first[3]) is None and asm.pending == 0
    assert [i.image_id for i in feed(asm, chunks_of(2, payload))] == [2]
    stats = asm.stats
    assert (stats.discarded_images, stats.dropped_images, stats.stale_chunks) == (1, 0, 1)


def test_interleaved_images_both_complete_in_order():
    payload = encode_minimized(textured_gray())
    a, b = chunks_of(10, payload), chunks_of(11, payload)
    stream = [c for pair in zip(a, b, strict=True) for c in pair]
    out = feed(ImageAssembler(), stream)
    assert [i.image_id for i in out] == [10, 11]


def test_newer_image_completing_first_drops_older():
    payload = encode_minimized(textured_gray())
    a, b = chunks_of(10, payload), chunks_of(11, payload)
    asm = ImageAssembler()
    out = feed(asm, a[:-1] + b + a[-1:])
    assert [i.image_id for i in out] == [11]
    assert asm.stats.dropped_images == 1 and asm.stats.stale_chunks == 1


def test_bounded_pending_images():
    payload = encode_minimized(textured_gray(), pad_to_multiple=1)
    asm = ImageAssembler(max_pending=2)
    for image_id in range(1, 6):
        feed(asm, chunks_of(image_id, payload)[:3])
        assert asm.pending <= 2
    assert asm.stats.dropped_images == 3
    # Image 5 (still pending) can finish.
    out = feed(asm, chunks_of(5, payload)[3:])
    assert [i.image_id for i in out] == [5]
    assert asm.stats.dropped_images == 4  # image 4 abandoned when 5 completed


def test_late_start_of_an_older_image_does_not_evict_newer_ones():
    payload = encode_minimized(textured_gray())
    asm = ImageAssembler(max_pending=2)
    feed(asm, chunks_of(10, payload)[:2])
    feed(asm, chunks_of(11, payload)[:2])
    assert asm.push(**chunks_of(9, payload)[0]) is None  # older than both: not assembled
    assert asm.stats.stale_chunks == 1 and asm.stats.dropped_images == 0
    assert [i.image_id for i in feed(asm, chunks_of(10, payload)[2:])] == [10]
    assert [i.image_id for i in feed(asm, chunks_of(11, payload)[2:])] == [11]


def test_old_frames_expire_by_robot_timestamp():
    payload = encode_minimized(textured_gray())
    asm = ImageAssembler(max_pending=4, max_age_ms=500)
    feed(asm, chunks_of(1, payload, ts=1000)[:2])
    feed(asm, chunks_of(2, payload, ts=1400)[:2])
    assert asm.pending == 2
    feed(asm, chunks_of(3, payload, ts=1600)[:1])
    assert asm.pending == 2 and asm.stats.dropped_images == 1


def test_late_duplicate_after_completion_is_counted_not_restarted():
    payload = encode_minimized(textured_gray())
    asm = ImageAssembler()
    chunks = chunks_of(3, payload)
    assert len(feed(asm, chunks)) == 1
    assert feed(asm, chunks[:2]) == []
    assert asm.stats.duplicate_chunks == 2 and asm.pending == 0


def test_image_id_wraps_and_restarts():
    payload = encode_minimized(textured_gray(16, 16))
    asm = ImageAssembler()
    for image_id in (0xFFFFFFFE, 0xFFFFFFFF, 0, 1):
        assert len(feed(asm, chunks_of(image_id, payload, ts=image_id & 0xFFFF))) == 1
    # The robot restarted: ids far behind the last one start a fresh sequence.
    asm2 = ImageAssembler()
    feed(asm2, chunks_of(50_000, payload))
    assert len(feed(asm2, chunks_of(1, payload))) == 1
    asm2.reset()
    assert asm2.pending == 0


def test_invalid_chunks_raise_remote_errors():
    asm = ImageAssembler()
    base = dict(image_id=1, frame_timestamp_ms=0, image_encoding=8, image_resolution=QVGA, data=b"x")
    with pytest.raises(RemoteProtocolError):
        asm.push(image_chunk_count=2, chunk_id=2, **base)
    with pytest.raises(RemoteProtocolError):
        asm.push(**{**base, "image_resolution": 14}, image_chunk_count=1, chunk_id=0)
    asm.push(image_chunk_count=3, chunk_id=0, **base)
    with pytest.raises(RemoteProtocolError, match="says 4 chunks, which contradicts"):
        asm.push(image_chunk_count=4, chunk_id=1, **base)
    # a chunk count that leaves out a chunk already here
    asm.push(**{**base, "image_id": 2}, image_chunk_count=0, chunk_id=5)
    with pytest.raises(RemoteProtocolError, match="says 3 chunks, which contradicts"):
        asm.push(**{**base, "image_id": 2}, image_chunk_count=3, chunk_id=2)
    with pytest.raises(RemoteProtocolError, match="contradicts earlier chunks' frame_timestamp"):
        asm.push(**{**base, "image_id": 2, "frame_timestamp_ms": 7}, image_chunk_count=0, chunk_id=1)
        asm.push(**{**base, "image_id": 2, "frame_timestamp_ms": 8}, image_chunk_count=0, chunk_id=2)
    assert asm.stats.invalid_chunks == 5
    assert asm.pending == 2


def test_a_stray_chunk_beyond_the_known_count_is_refused_not_a_crash():
    """A chunk that gives no count (0, as all but an image's last do) and a chunk_id at or
    beyond the count an earlier chunk gave is refused and counted; it was kept, the image
    "completed" with a chunk missing, and joining it raised KeyError (a traceback in the
    driver, the frame counted as completed). In the other order (the stray first) the chunk
    giving the count is the one refused; either way the image is not completed."""
    asm = ImageAssembler(max_resolution=QVGA)
    base = dict(image_id=1, image_encoding=8, image_resolution=QVGA)
    assert asm.push(frame_timestamp_ms=1000, image_chunk_count=3, chunk_id=2, data=b"c", **base) is None
    with pytest.raises(RemoteProtocolError, match="image 1: chunk_id 5 out of range for 3 chunks"):
        asm.push(frame_timestamp_ms=0, image_chunk_count=0, chunk_id=5, data=b"x", **base)
    with pytest.raises(RemoteProtocolError, match="chunk_id 3 out of range for 3 chunks"):
        asm.push(frame_timestamp_ms=0, image_chunk_count=0, chunk_id=3, data=b"x", **base)
    assert asm.push(frame_timestamp_ms=0, image_chunk_count=0, chunk_id=0, data=b"a", **base) is None
    image = asm.push(frame_timestamp_ms=0, image_chunk_count=0, chunk_id=1, data=b"b", **base)
    assert image is not None and image.data == b"abc"
    assert (asm.stats.invalid_chunks, asm.stats.completed_images) == (2, 1)
    # the stray first: the count that leaves it out is refused, and nothing completes
    other = dict(base, image_id=2)
    asm.push(frame_timestamp_ms=0, image_chunk_count=0, chunk_id=5, data=b"x", **other)
    asm.push(frame_timestamp_ms=0, image_chunk_count=0, chunk_id=0, data=b"a", **other)
    asm.push(frame_timestamp_ms=0, image_chunk_count=0, chunk_id=1, data=b"b", **other)
    with pytest.raises(RemoteProtocolError, match="image 2: chunk 2 says 3 chunks, which contradicts"):
        asm.push(frame_timestamp_ms=1066, image_chunk_count=3, chunk_id=2, data=b"c", **other)
    assert (asm.stats.invalid_chunks, asm.stats.completed_images) == (3, 1) and asm.pending == 1


def firmware_chunks(chunks):
    """The chunks as Anki's robot firmware sends them: the chunk count and the capture
    time in the last chunk only, 0 ("invalid") in every other."""
    last = len(chunks) - 1
    return [dict(c, image_chunk_count=c["image_chunk_count"] if c["chunk_id"] == last else 0,
                 frame_timestamp_ms=c["frame_timestamp_ms"] if c["chunk_id"] == last else 0)
            for c in chunks]


def test_chunks_that_give_the_count_and_time_only_in_the_last_chunk_assemble():
    """A real robot's stream (its firmware's image sender marks both fields invalid, 0, in
    all but an image's last chunk): every image assembles, with the last chunk's capture
    time, in order or shuffled; before, every such chunk was refused as "out of range for 0
    chunks", and a real robot's camera gave no image at all."""
    payload = encode_minimized(textured_gray())
    asm = ImageAssembler()
    rng = random.Random(3)
    for image_id in range(1, 11):
        stream = firmware_chunks(chunks_of(image_id, payload, max_chunk=600))
        assert len(stream) > 2 and stream[0]["image_chunk_count"] == 0
        if image_id % 2:
            rng.shuffle(stream)
        out = feed(asm, stream)
        assert len(out) == 1, image_id
        assert (out[0].image_id, out[0].frame_timestamp_ms, out[0].data) == (image_id, image_id * 66,
                                                                            payload)
    assert asm.stats.completed_images == 10 and asm.stats.invalid_chunks == 0
    assert asm.stats.dropped_images == 0 and asm.pending == 0
    # a lost chunk: that image is dropped when the next completes, and the next is whole
    lost = firmware_chunks(chunks_of(11, payload, max_chunk=600))
    del lost[1]
    assert feed(asm, lost) == []
    out = feed(asm, firmware_chunks(chunks_of(12, payload, max_chunk=600)))
    assert [i.image_id for i in out] == [12] and asm.stats.dropped_images == 1


def test_an_image_larger_than_max_resolution_is_refused_before_anything_is_decoded():
    """The driver asks for QVGA: a 17-byte chunk that says QUXGA (3200 x 2400, 23 MB of
    pixels to decode) is refused and counted; QVGA and smaller still assemble."""
    asm = ImageAssembler(max_resolution=QVGA)
    base = dict(image_id=1, frame_timestamp_ms=0, image_encoding=8, image_chunk_count=1, chunk_id=0,
                data=b"x" * 17)
    with pytest.raises(RemoteProtocolError, match="image_resolution 12 .QUXGA. is larger than asked for"):
        asm.push(image_resolution=12, **base)
    assert asm.stats.invalid_chunks == 1 and asm.pending == 0
    payload = encode_minimized(textured_gray(32, 32))
    assert len(feed(asm, chunks_of(2, payload))) == 1
    small = [dict(c, image_resolution=3) for c in chunks_of(3, payload)]
    assert len(feed(asm, small)) == 1
    assert len(feed(ImageAssembler(), [dict(c, image_resolution=6) for c in chunks_of(4, payload)])) == 1
    with pytest.raises(LocalProtocolError, match="max_resolution 13"):
        ImageAssembler(max_resolution=13)


def test_push_chunk_accepts_message_objects():
    payload = encode_minimized(textured_gray(32, 32))
    asm = ImageAssembler()
    msgs = [
        SimpleNamespace(
            image_id=c["image_id"],
            frame_timestamp=c["frame_timestamp_ms"],
            chunk_debug=0,
            image_encoding=c["image_encoding"],
            image_resolution=c["image_resolution"],
            image_chunk_count=c["image_chunk_count"],
            chunk_id=c["chunk_id"],
            status=0,
            data=c["data"],
        )
        for c in chunks_of(9, payload, max_chunk=100)
    ]
    results = [asm.push_chunk(m) for m in reversed(msgs)]
    assert results[-1] is not None and results[-1].data == payload
    assert all(r is None for r in results[:-1])


def test_push_chunk_with_the_message_table_class():
    from cozmo_driver.protocol import messages
    image_chunk = messages.MESSAGES_BY_NAME["ImageChunk"]
    payload = encode_minimized(textured_gray(32, 32))
    asm = ImageAssembler()
    out = None
    for c in chunks_of(4, payload, max_chunk=100):
        msg = image_chunk(
            frame_timestamp_ms=c["frame_timestamp_ms"],
            image_id=c["image_id"],
            chunk_debug=0,
            image_encoding=c["image_encoding"],
            image_resolution=c["image_resolution"],
            image_chunk_count=c["image_chunk_count"],
            chunk_id=c["chunk_id"],
            status=0,
            data=c["data"],
        )
        decoded = type(msg).decode_body(msg.encode_body())
        out = asm.push_chunk(decoded) or out
    assert out is not None and out.data == payload and out.frame_timestamp_ms == 4 * 66


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 30))
def test_reassembly_property(rnd, nchunks):
    payload = bytes(rnd.getrandbits(8) for _ in range(nchunks * 10))
    chunks = chunks_of(1, payload, max_chunk=10)
    stream = chunks + [rnd.choice(chunks) for _ in range(rnd.randint(0, 5))]
    rnd.shuffle(stream)
    missing = rnd.random() < 0.3
    if missing:
        gone = rnd.choice(chunks)["chunk_id"]
        stream = [c for c in stream if c["chunk_id"] != gone]
    out = feed(ImageAssembler(), stream)
    if missing:
        assert out == []
    else:
        assert len(out) == 1 and out[0].data == payload


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 6) | st.integers(0, 2**32 - 1),  # image_id: mostly a few nearby ids
            st.integers(0, 2**32 - 1),  # frame_timestamp_ms
            st.integers(-128, 127),  # image_encoding
            st.integers(-128, 127) | st.just(QVGA),  # image_resolution
            st.integers(0, 255) | st.integers(1, 3),  # image_chunk_count
            st.integers(0, 255) | st.integers(0, 2),  # chunk_id
            st.binary(max_size=8),
        ),
        max_size=60,
    ),
    st.integers(1, 3),
)
def test_fuzz_assembler_raises_only_remote_errors_and_stays_bounded(chunks, max_pending):
    asm = ImageAssembler(max_pending=max_pending)
    for chunk in chunks:
        try:
            img = asm.push(*chunk)
        except RemoteProtocolError:
            img = None
        assert asm.pending <= max_pending
        if img is not None:
            assert img.image_id == chunk[0]


@pytest.mark.parametrize("shape", [(240, 320), (240, 320, 3)])
def test_encode_jpeg_round_trips_grey_and_colour(shape):
    """encode_jpeg (used to publish colour frames at full width) keeps size, mode and picture."""
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    pixels = ((x * 255) // shape[1]).astype(np.uint8)
    if len(shape) == 3:
        pixels = np.stack([pixels, ((y * 255) // shape[0]).astype(np.uint8), 255 - pixels], axis=-1)
    decoded = camera.decode_to_array(camera.encode_jpeg(pixels, 90), False)
    assert decoded.shape == pixels.shape and decoded.dtype == np.uint8
    assert np.abs(decoded.astype(np.int16) - pixels).mean() < 2.0


def test_colour_frames_decode_with_the_pillow_of_ubuntu_22_04(monkeypatch):
    """Humble's Ubuntu 22.04 has Pillow 9.0, without ``Image.Resampling`` (9.1 on): with it
    named, every colour frame raised on the I/O thread there and none was published."""
    image = make_image(9, encode_minimized(smooth_rgb()[:, ::2].copy()))
    jpeg = image_to_jpeg(image)
    sized, general = (decode_to_bytes(jpeg, True, camera.coded_size(image)), decode_to_bytes(jpeg, True))
    pillow_of_ubuntu_22_04(monkeypatch)
    assert decode_to_bytes(jpeg, True, camera.coded_size(image)) == sized
    assert decode_to_bytes(jpeg, True) == general
