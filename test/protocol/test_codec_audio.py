"""Audio: companding, resampling, mix-down, WAV loading and framing."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cozmo_driver.protocol.audio import (
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

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16)


def test_constants():
    assert SAMPLES_PER_FRAME == 744 and SAMPLE_RATE == 22320
    assert SILENCE_CODE == 1 and encode_ulaw(np.zeros(3, np.int16)) == b"\x01\x01\x01"


# ---------------------------------------------------------------------------------------------
# Companding
# ---------------------------------------------------------------------------------------------


def test_documented_values():
    got = encode_ulaw(np.array([0, 1000, -1000, 32767], dtype=np.int16))
    assert list(got) == [1, 50, 178, 128]


def test_loud_negative_peaks_clamp_to_255():
    # The reference produces 256 (and crashes) from -31612 down; we send 255.
    got = np.frombuffer(encode_ulaw(np.array([-31611, -31612, -32000, -32768], dtype=np.int16)), np.uint8)
    assert list(got) == [255, 255, 255, 255]
    assert decode_ulaw(bytes([255]))[0] == -31100


def test_full_range_is_bounded_and_monotonic():
    codes = np.frombuffer(encode_ulaw(ALL_INT16), dtype=np.uint8)
    assert codes.min() == 1 and codes.max() == 255  # 0 is never produced
    decoded = decode_ulaw(codes.tobytes()).astype(np.int64)
    assert np.all(np.diff(decoded) >= 0)  # monotonic over the whole int16 range
    x = ALL_INT16.astype(np.int64)
    err = np.abs(decoded - x)
    # Within the unsaturated range the error is at most half a step: 4 << exponent.
    biased = np.abs(x) + 132
    exponent = np.floor(np.log2(biased)).astype(np.int64) - 7
    normal = (x > -31612) & (biased <= 32767) & (x < 32635)
    assert np.all(err[normal] <= (4 << exponent[normal]))
    # Saturated ends: positive top (clip of the biased magnitude) and clamped negative peaks.
    assert err[x >= 32635].max() <= 32767 - 32124
    assert err[x <= -31612].max() == 32768 - 31100


def test_decode_is_left_inverse_on_produced_codes():
    # 129 is "negative zero" (samples -1..-3): it decodes to 0, which is sent as 1.
    codes = bytes(c for c in range(1, 256) if c != 129)
    assert encode_ulaw(decode_ulaw(codes)) == codes
    assert decode_ulaw(bytes([129]))[0] == 0


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


def test_agrees_with_reference_where_it_does_not_crash():
    ref_audio = pytest.importorskip("pycozmo.audio", reason="pycozmo is the reference oracle")
    ours = np.frombuffer(encode_ulaw(ALL_INT16), dtype=np.uint8)
    crashed = []
    for sample in range(-32768, 32768):
        code = ref_audio.u_law_encoding(sample)
        if code > 255:  # the reference's 256: bytearray() raises on it
            crashed.append(sample)
            continue
        assert code == ours[sample + 32768], sample
    assert crashed == list(range(-32768, -31611))


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
    ],
)
def test_load_wav_rejects(make, message):
    with pytest.raises(LocalProtocolError, match=message):
        load_wav(make())


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
