"""Audio: companding, resampling, mix-down, WAV loading and framing."""

from __future__ import annotations

import io
import struct
import uuid
import wave

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cozmo_driver.protocol.audio import (
    MAX_WAV_SECONDS,
    SAMPLE_RATE,
    SAMPLES_PER_FRAME,
    SILENCE_CODE,
    decode_ulaw,
    encode_ulaw,
    frames_from_pcm,
    load_wav,
    mix_down,
    resample,
)
from cozmo_driver.protocol.errors import LocalProtocolError
from dependencies import require

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16)


def test_constants():
    assert SAMPLES_PER_FRAME == 744 and SAMPLE_RATE == 22320
    assert SILENCE_CODE == 0 and encode_ulaw(np.zeros(3, np.int16)) == b"\x00\x00\x00"


def test_documented_values():
    """Anki's engine's code: sign | exponent << 4 | mantissa, negative magnitudes as ~s."""
    got = encode_ulaw(np.array([0, 1000, -1000, 32767, -32768, -1, 255, 256], dtype=np.int16))
    assert list(got) == [0, 0x2F, 0xAF, 0x7F, 0xFF, 0x80, 0x0F, 0x10]


def _firmware_level(code: int) -> int:
    """What Anki's K02 firmware plays for a byte: a 12-bit DAC offset (its MuLawDecompress)."""
    bits, exponent = code & 0xF, (code >> 4) & 0x7
    if exponent:
        bits = (0x10 | bits) << (exponent - 1)
    return -bits if code & 0x80 else bits


def test_decode_is_what_the_firmware_plays():
    assert [int(v) for v in decode_ulaw(bytes(range(256)))] == [16 * _firmware_level(c) for c in range(256)]


def test_full_range_is_monotonic_and_within_a_step():
    codes = np.frombuffer(encode_ulaw(ALL_INT16), dtype=np.uint8)
    assert codes.min() == 0 and codes.max() == 255 and len(set(codes.tolist())) == 256
    decoded = decode_ulaw(codes.tobytes()).astype(np.int64)
    assert np.all(np.diff(decoded) >= 0)  # monotonic over the whole int16 range
    x = ALL_INT16.astype(np.int64)
    magnitude = np.where(x < 0, -x - 1, x)
    # the robot plays a level at most one step below the sample: 16 << (exponent - 1)
    step = np.where(magnitude >= 256, 16 << (np.floor(np.log2(np.maximum(magnitude >> 8, 1))).astype(np.int64)), 16)
    assert np.all(np.abs(decoded - x) <= step)


def test_decode_is_left_inverse_on_produced_codes():
    positive = bytes(range(128))
    assert encode_ulaw(decode_ulaw(positive)) == positive
    # a negative sample's magnitude is its complement (-s - 1): the level the robot plays for
    # a negative code, less one, encodes back to that code; 0x80 is "negative zero"
    negative = bytes(range(128, 256))
    assert encode_ulaw(decode_ulaw(negative).astype(np.int64) - 1) == negative
    assert decode_ulaw(bytes([0x80]))[0] == 0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-32768, 32767), max_size=200))
def test_encode_accepts_any_int16(values):
    arr = np.array(values, dtype=np.int64)
    assert encode_ulaw(arr) == encode_ulaw(arr.astype(np.int16))
    assert len(encode_ulaw(arr)) == len(values)


def test_encode_rejects_bad_input():
    with pytest.raises(LocalProtocolError):
        encode_ulaw(np.array([0.5]))
    with pytest.raises(LocalProtocolError):
        encode_ulaw(np.array([40000]))


def test_the_robot_plays_our_code_truer_than_the_references():
    """The reference client's code (a bias of 132, and + 1 on every byte) as Anki's firmware
    plays it: its loudest positive samples come out as silence (byte 128) and the rest a
    mantissa step off; ours as the firmware expects."""
    ref_audio = require("pycozmo.audio", "the reference oracle")
    x = np.arange(-31000, 31000, 7)
    ours = decode_ulaw(encode_ulaw(x)).astype(np.int64)
    ref = np.array([16 * _firmware_level(min(ref_audio.u_law_encoding(int(v)), 255)) for v in x])
    assert ref_audio.u_law_encoding(32767) == 128 and _firmware_level(128) == 0
    assert np.abs(ours - x).mean() < 0.8 * np.abs(ref - x).mean()


# ---------------------------------------------------------------------------------------------
# Resampling and mix-down
# ---------------------------------------------------------------------------------------------


def tone(freq: float, rate: int, seconds: float = 1.0, amplitude: float = 10000.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return np.rint(amplitude * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def peak_hz(signal: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(signal.astype(np.float64) * np.hanning(signal.size)))
    return float(np.fft.rfftfreq(signal.size, 1 / rate)[np.argmax(spectrum)])


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))


@pytest.mark.parametrize("rate_in", [48000, 44100, 22050, 16000, 8000])
def test_resample_keeps_frequency_and_duration(rate_in):
    out = resample(tone(1000, rate_in), rate_in, SAMPLE_RATE)
    assert out.dtype == np.int16
    assert out.size == SAMPLE_RATE  # one second in, one second out
    assert abs(peak_hz(out, SAMPLE_RATE) - 1000) <= 10
    assert abs(rms(out[500:-500]) / (10000 / np.sqrt(2)) - 1) < 0.01


def test_resample_removes_what_would_alias():
    src = tone(15000, 48000)
    out = resample(src, 48000, SAMPLE_RATE)
    steady = out[1000:-1000]
    # Measured about -82 dB in the steady part (the int16 rounding floor); > 40 dB required.
    assert 20 * np.log10(max(rms(steady), 1e-9) / rms(src)) < -40
    # Whole signal including the switch-on/off transients: still well below.
    assert 20 * np.log10(rms(out) / rms(src)) < -40


def test_resample_float_and_identity():
    x = np.sin(np.linspace(0, 20, 1000))
    assert np.array_equal(resample(x, 22320, 22320), x)
    y = resample(x, 8000, 16000)
    assert y.dtype == np.float64 and y.size == 2000
    # An irrational-looking ratio with many phases still works.
    assert resample(tone(440, 44101, 0.1), 44101, SAMPLE_RATE).size == -(-4410 * SAMPLE_RATE // 44101)
    with pytest.raises(LocalProtocolError):
        resample(np.zeros((10, 2), np.int16), 8000, 16000)
    with pytest.raises(LocalProtocolError):
        resample(np.zeros(10, np.int16), 0, 16000)


@pytest.mark.parametrize("rate_in", [44099, 47999, 8001])
def test_an_odd_rate_streams_from_a_table_built_once_and_stays_a_clean_tone(rate_in, monkeypatch):
    """An audio/pcm stream at an odd rate (44 099 Hz: 22 320 phases) computed the windowed
    sinc's weights of every output sample, 40 ms of the I/O thread a 0.1 s chunk against
    5 ms at 44 100 Hz, and the thread paces the face at 30 Hz. Its weights now come from one
    table of 513 rows, built once a rate (counted here, not timed), and the stream in 0.1 s
    chunks is still the tone: the right length and frequency, on the ideal sine across every
    chunk boundary (no seam), what would alias removed."""
    from cozmo_driver.protocol import audio

    rows = []
    kernel = audio._kernel
    monkeypatch.setattr(audio, "_kernel", lambda frac, *a: rows.append(frac.size) or kernel(frac, *a))
    for cached in (audio._phase_table, getattr(audio, "_interpolated_table", None)):
        if cached is not None:
            cached.cache_clear()
    seconds, chunk = 2, rate_in // 10
    x = tone(1000, rate_in, seconds)
    r = audio.StreamResampler(rate_in, SAMPLE_RATE)
    parts = [r.process(x[i:i + chunk]) for i in range(0, x.size, chunk)] + [r.flush()]
    out = np.concatenate(parts)
    assert sum(rows) <= 513, f"{sum(rows)} rows of weights computed for {seconds} s"
    again = audio.StreamResampler(rate_in, SAMPLE_RATE)  # a second stream at the rate: none
    rows.clear()
    assert np.array_equal(np.concatenate([again.process(x[:chunk]), again.flush()]),
                          resample(x[:chunk], rate_in, SAMPLE_RATE)) and rows == []

    assert out.dtype == np.int16 and out.size == -(-x.size * SAMPLE_RATE // rate_in)
    assert np.abs(out.astype(int) - resample(x, rate_in, SAMPLE_RATE)).max() <= 1
    assert abs(peak_hz(out, SAMPLE_RATE) - 1000) <= 1
    # the ideal tone at the output's instants, away from the switch-on and -off (the filter's
    # half window): every sample, those beside the chunk boundaries too, within 3 of 10 000
    t = np.arange(out.size) / SAMPLE_RATE
    ideal = 10000 * np.sin(2 * np.pi * 1000 * t)
    steady = slice(200, out.size - 200)
    assert np.abs(out[steady] - ideal[steady]).max() <= 3
    if rate_in > SAMPLE_RATE:  # a tone above the robot's Nyquist frequency is removed
        high = resample(tone(15000, rate_in), rate_in, SAMPLE_RATE)
        assert 20 * np.log10(max(rms(high[1000:-1000]), 1e-9) / rms(tone(15000, rate_in))) < -40


def test_mix_down():
    left = tone(500, 8000, 0.1)
    right = tone(700, 8000, 0.1)
    mono = mix_down(np.stack([left, right], axis=1))
    assert mono.dtype == np.int16 and mono.shape == left.shape
    assert np.all(np.abs(mono.astype(int) - (left.astype(int) + right.astype(int)) / 2) <= 0.5)
    loud = np.full((4, 2), -32768, np.int16)
    assert np.all(mix_down(loud) == -32768)  # no overflow
    assert mix_down(left) is left
    with pytest.raises(LocalProtocolError):
        mix_down(np.zeros((2, 2, 2)))


# ---------------------------------------------------------------------------------------------
# WAV files
# ---------------------------------------------------------------------------------------------


def write_wav(samples: np.ndarray, rate: int, width: int = 2) -> io.BytesIO:
    """samples: (n,) or (n, channels) int16; width 1 writes unsigned 8-bit."""
    samples = samples.reshape(samples.shape[0], -1)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(width)
        w.setframerate(rate)
        if width == 1:
            w.writeframes(((samples.astype(np.int32) >> 8) + 128).astype(np.uint8).tobytes())
        elif width == 2:
            w.writeframes(samples.astype("<i2").tobytes())
        else:
            w.writeframes(b"\x00" * width * samples.size)
    buf.seek(0)
    return buf


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 44100, 48000])
@pytest.mark.parametrize("channels", [1, 2])
def test_load_wav_accepts(rate, channels):
    mono = tone(1000, rate, 0.5)
    data = np.stack([mono] * channels, axis=1)
    pcm, info = load_wav(write_wav(data, rate))
    assert (info.channels, info.sample_width_bytes, info.sample_rate_hz) == (channels, 2, rate)
    assert info.frame_count == mono.size and info.duration_s == pytest.approx(0.5)
    assert pcm.dtype == np.int16 and pcm.size == SAMPLE_RATE // 2
    assert abs(peak_hz(pcm, SAMPLE_RATE) - 1000) <= 10


def test_load_wav_8bit_and_path(tmp_path):
    src = tone(1000, 16000, 0.25)
    path = tmp_path / "beep.wav"
    path.write_bytes(write_wav(src, 16000, width=1).getvalue())
    pcm, info = load_wav(path)
    assert info.sample_width_bytes == 1
    assert abs(peak_hz(pcm, SAMPLE_RATE) - 1000) <= 10
    assert abs(rms(pcm[200:-200]) / rms(src) - 1) < 0.02
    assert load_wav(str(path))[0].size == pcm.size


def test_load_wav_stereo_is_mixed_not_first_channel():
    left = tone(1000, 22050, 0.5)
    silent = np.zeros_like(left)
    pcm, _ = load_wav(write_wav(np.stack([silent, left], axis=1), 22050))
    assert rms(pcm[500:-500]) == pytest.approx(rms(left) / 2, rel=0.02)


def float_wav() -> io.BytesIO:
    """A 32-bit IEEE float WAV (format tag 3), which the stdlib `wave` cannot read."""
    data = np.zeros(100, "<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, 16000, 64000, 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return io.BytesIO(b"RIFF" + struct.pack("<I", len(body)) + body)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: write_wav(np.zeros((100, 1), np.int16), 16000, width=3), "24-bit"),
        (lambda: write_wav(np.zeros((100, 1), np.int16), 16000, width=4), "32-bit"),
        (float_wav, "not a plain PCM WAV"),
        (lambda: write_wav(np.zeros((100, 1), np.int16), 96000), "96000 Hz"),
        (lambda: write_wav(np.zeros((100, 1), np.int16), 4000), "4000 Hz"),
        (lambda: write_wav(np.zeros((100, 3), np.int16), 16000), "3 channels"),
        (lambda: io.BytesIO(b"RIFX not a wav file at all"), "not a plain PCM WAV"),
        (lambda: io.BytesIO(b"RIFF"), "truncated|not a plain PCM WAV"),
        (lambda: io.BytesIO(b"RIFF\x10\0"), "<stream>: truncated WAV file"),
        (lambda: io.BytesIO(b""), r"<stream>: not a plain PCM WAV file \(the file is empty\)"),
        (lambda: io.BytesIO(b"hi"), r"not a plain PCM WAV file \(file does not start with RIFF id\)"),
    ],
)
def test_load_wav_rejects(make, message):
    with pytest.raises(LocalProtocolError, match=message):
        load_wav(make())


class Pipe:
    """A file that can only be read, as a FIFO's is (no seek, no tell)."""

    def __init__(self, data: bytes) -> None:
        self._buf = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._buf.read(n)


def extensible(wav: bytes, sub_format: int = 1) -> bytes:
    """``wav`` (a plain PCM file as :func:`write_wav` writes it) in WAVE_FORMAT_EXTENSIBLE
    (format tag 0xFFFE, a 40-byte fmt chunk), its sub-format GUID KSDATAFORMAT_SUBTYPE_PCM
    (1) or another (3: IEEE float)."""
    assert wav[12:20] == b"fmt " + struct.pack("<I", 16) and wav[36:40] == b"data"
    _, channels, rate, byte_rate, align, bits = struct.unpack("<HHIIHH", wav[20:36])
    guid = uuid.UUID(f"{sub_format:08x}-0000-0010-8000-00aa00389b71").bytes_le
    fmt = struct.pack("<HHIIHHHHI", 0xFFFE, channels, rate, byte_rate, align, bits, 22, bits,
                      (1 << channels) - 1) + guid
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + wav[36:]
    return b"RIFF" + struct.pack("<I", len(body)) + body


@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("width", [1, 2])
def test_load_wav_accepts_extensible_pcm_on_every_python(tmp_path, channels, width):
    """The stdlib wave module reads PCM in WAVE_FORMAT_EXTENSIBLE from Python 3.12 on only:
    the same file played on Jazzy and was refused on Humble ('unknown format: 65534'). It is
    read on every Python, from a path or a pipe, as the same samples in a plain header."""
    left = tone(1000, 16000, 0.25)
    plain = write_wav(np.stack([left, left // 3][:channels], axis=1), 16000, width).getvalue()
    want_pcm, want_info = load_wav(io.BytesIO(plain))
    path = tmp_path / "ext.wav"
    path.write_bytes(extensible(plain))
    for source in (path, io.BytesIO(extensible(plain)), Pipe(extensible(plain))):
        pcm, info = load_wav(source)
        assert info == want_info and (info.channels, info.sample_width_bytes) == (channels, width)
        assert np.array_equal(pcm, want_pcm)


def test_load_wav_skips_the_chunks_around_the_fmt_chunk_padded_or_not():
    """The header is read here, not by wave: chunks before and after the fmt chunk (an odd
    size is padded to an even one) are skipped in a file or a pipe, in a plain header or an
    extensible one."""
    wav = write_wav(tone(1000, 16000, 0.25), 16000).getvalue()
    want_pcm, want_info = load_wav(io.BytesIO(wav))
    for header in (wav, extensible(wav)):
        at = header.index(b"data")
        body = (b"WAVE" + b"LIST" + struct.pack("<I", 5) + b"INFOx\0" + header[12:at]
                + b"JUNK" + struct.pack("<I", 4) + b"\0" * 4 + header[at:])
        riff = b"RIFF" + struct.pack("<I", len(body)) + body
        for source in (io.BytesIO(riff), Pipe(riff)):
            pcm, info = load_wav(source)
            assert info == want_info and np.array_equal(pcm, want_pcm)


def test_load_wav_refuses_extensible_float_as_it_does_plain_float():
    """An extensible file whose sub-format is not integer PCM (IEEE float) is refused as the
    plain one is, saying what it holds."""
    plain = float_wav().getvalue()
    ext = extensible(plain, 3)
    for make, what in ((lambda: io.BytesIO(plain), "IEEE float"), (lambda: io.BytesIO(ext), "extensible IEEE float"),
                       (lambda: Pipe(ext), "extensible IEEE float")):
        with pytest.raises(LocalProtocolError, match=rf"^<stream>: not a plain PCM WAV file \({what} samples; "
                           r"only 8- or 16-bit integer PCM is supported\)$"):
            load_wav(make())
    odd = extensible(plain, 0x55)  # an MPEG layer 3 GUID
    with pytest.raises(LocalProtocolError, match=r"extensible sub-format 00000055-0000-0010-8000-00aa00389b71"):
        load_wav(io.BytesIO(odd))


def test_load_wav_refuses_a_file_longer_than_its_limit_naming_both():
    """A file was read and converted whole, in float64, however long: an hour of stereo took
    gigabytes and could get the driver killed. One longer than MAX_WAV_SECONDS is refused,
    before it is read when the file can seek, else once that much of it was read."""
    assert MAX_WAV_SECONDS == 600
    long = write_wav(np.zeros(601 * 8000, np.int16), 8000, width=1).getvalue()  # 601 s, 4.8 MB
    with pytest.raises(LocalProtocolError, match=r"^<stream>: 601 s of sound \(10.0 minutes\); a WAV file "
                       r"may hold at most 600 s \(10 minutes\), as it is converted whole in memory: "
                       r"cut it into shorter files$"):
        load_wav(io.BytesIO(long))
    with pytest.raises(LocalProtocolError, match=r"^<stream>: more than 600 s of sound; a WAV file may "
                       r"hold at most 600 s"):
        load_wav(Pipe(long))
    # a header that declares more than the file holds (espeak-ng --stdout writes 0x7ffff000
    # bytes, 13.5 hours at its 22 050 Hz: it cannot seek back to write the size) is taken
    # for what the file holds
    short = bytearray(write_wav(tone(1000, 22050, 0.5), 22050).getvalue())
    assert short[36:40] == b"data"
    short[4:8], short[40:44] = struct.pack("<I", 0x7FFFF024), struct.pack("<I", 0x7FFFF000)
    for source in (io.BytesIO(bytes(short)), Pipe(bytes(short))):
        pcm, info = load_wav(source)
        assert info.duration_s == pytest.approx(0.5) and pcm.size == SAMPLE_RATE // 2


def unfinished(wav: bytes, riff_size: int) -> bytes:
    """``wav`` as a recording stopped before its header was finished leaves it: data size 0."""
    raw = bytearray(wav)
    assert raw[36:40] == b"data"
    raw[4:8], raw[40:44] = struct.pack("<I", riff_size), struct.pack("<I", 0)
    return bytes(raw)


def test_load_wav_reads_the_samples_after_a_header_that_was_never_finished():
    """A recording whose header was never finished (GStreamer's wavenc stopped with Ctrl-C:
    data size 0, the RIFF size its header's) loaded as 0 samples, and its goal succeeded
    with nothing played. The samples that follow are read (the info says why), within the
    length limit; a data chunk of no samples followed only by chunks (a LIST) holds none."""
    wav = write_wav(tone(1000, 16000, 0.5), 16000).getvalue()
    for riff in (len(wav) - 8, 36):
        for source in (io.BytesIO(unfinished(wav, riff)), Pipe(unfinished(wav, riff))):
            pcm, info = load_wav(source)
            assert info.frame_count == 8000 and pcm.size == SAMPLE_RATE // 2 and info.unfinished_header
            assert abs(peak_hz(pcm, SAMPLE_RATE) - 1000) <= 10
    pcm, info = load_wav(io.BytesIO(wav))
    assert not info.unfinished_header
    empty = bytearray(write_wav(np.zeros(1, np.int16), 16000).getvalue()[:44])  # its header only
    empty[4:8], empty[40:44] = struct.pack("<I", 36), struct.pack("<I", 0)
    empty = bytes(empty)
    listed = bytearray(empty + b"LIST" + struct.pack("<I", 4) + b"INFO")
    listed[4:8] = struct.pack("<I", len(listed) - 8)
    for data in (empty, bytes(listed)):
        pcm, info = load_wav(io.BytesIO(data))
        assert pcm.size == 0 and info.frame_count == 0 and not info.unfinished_header
    long = unfinished(write_wav(np.zeros(601 * 8000, np.int16), 8000, width=1).getvalue(), 36)
    with pytest.raises(LocalProtocolError, match=r"^<stream>: 601 s of sound"):
        load_wav(io.BytesIO(long))
    with pytest.raises(LocalProtocolError, match=r"^<stream>: more than 600 s of sound"):
        load_wav(Pipe(long))


def test_load_wav_missing_file(tmp_path):
    with pytest.raises(LocalProtocolError):
        load_wav(tmp_path / "nope.wav")


# ---------------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------------


def test_frames_from_pcm_pads_with_silence_code():
    pcm = tone(1000, SAMPLE_RATE, 0.1)  # 2232 samples = 3 frames exactly
    frames = frames_from_pcm(pcm)
    assert len(frames) == 3 and all(len(f) == SAMPLES_PER_FRAME for f in frames)
    frames = frames_from_pcm(pcm[:2000])
    assert len(frames) == 3 and len(frames[-1]) == SAMPLES_PER_FRAME
    assert frames[-1][2000 - 2 * SAMPLES_PER_FRAME :] == bytes([SILENCE_CODE]) * (3 * 744 - 2000)
    assert b"".join(frames)[:2000] == encode_ulaw(pcm[:2000])
    assert frames_from_pcm(np.zeros(0, np.int16)) == []
    with pytest.raises(LocalProtocolError):
        frames_from_pcm(np.zeros((10, 2), np.int16))


def test_wav_to_frames_end_to_end():
    pcm, _ = load_wav(write_wav(tone(440, 48000, 1.0), 48000))
    frames = frames_from_pcm(pcm)
    assert len(frames) == 30
    decoded = decode_ulaw(b"".join(frames))
    assert abs(peak_hz(decoded, SAMPLE_RATE) - 440) <= 5
