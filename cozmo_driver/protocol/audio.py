"""Robot speaker audio: the 8-bit companding, resampling and WAV loading.

Stream
------
Each animation tick (30 per second) carries either one ``OutputAudio`` with
exactly :data:`SAMPLES_PER_FRAME` = 744 one-byte samples or an empty
``OutputSilence``.  The robot therefore plays 744 x 30 = :data:`SAMPLE_RATE`
= 22 320 samples per second, mono.

Companding
----------
The robot's own 8-bit code, as Anki's engine encodes it and its firmware (the
K02's DAC feed) expands it:

* the sign bit 0x80 for a negative sample, whose magnitude is then taken as
  ``-s - 1`` (the bitwise complement: -1 is "negative zero");
* the exponent e (0..7) is the bit length of the magnitude's top byte
  (``magnitude >> 8``), and the mantissa m is 4 bits of the magnitude:
  ``magnitude >> 4`` when e is 0, else ``(magnitude >> (e + 3)) & 0xF``;
* the transmitted byte is ``sign | e << 4 | m``, so 0 is sent as 0
  (:data:`SILENCE_CODE`).

The robot plays byte ``sign | e << 4 | m`` as a 12-bit DAC offset of ``m`` when
e is 0 and ``(16 + m) << (e - 1)`` otherwise, negated for the sign;
:func:`decode_ulaw` returns that, times 16, as int16 (+-31744 at most). The
reference client encodes differently (a bias of 132 and ``+ 1`` on every byte):
Anki's firmware would play its code for the loudest positive samples, 128, as
silence.

Everything is vectorised with 65 536- and 256-entry lookup tables built once.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import struct
import uuid
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from .errors import LocalProtocolError

__all__ = [
    "SAMPLE_RATE",
    "SAMPLES_PER_FRAME",
    "FRAMES_PER_SECOND",
    "SILENCE_CODE",
    "MIN_WAV_RATE",
    "MAX_WAV_RATE",
    "MAX_WAV_SECONDS",
    "WavInfo",
    "encode_ulaw",
    "decode_ulaw",
    "resample",
    "StreamResampler",
    "mix_down",
    "load_wav",
    "frames_from_pcm",
]

FRAMES_PER_SECOND = 30  # OutputAudio/OutputSilence packets per second
SAMPLES_PER_FRAME = 744  # samples in one OutputAudio
SAMPLE_RATE = SAMPLES_PER_FRAME * FRAMES_PER_SECOND  # 22 320 Hz
MIN_WAV_RATE = 8000  # Hz, accepted by load_wav
MAX_WAV_RATE = 48000
#: the longest WAV file load_wav takes (s): 10 minutes. A file is converted whole in memory, in
#: float64 (mixed down and resampled): 10 minutes of 48 kHz stereo take 0.9 GB at the peak
#: (measured), an hour several, which could get the driver killed
MAX_WAV_SECONDS = 600


def _build_encode_table() -> np.ndarray:
    x = np.arange(-32768, 32768, dtype=np.int64)
    negative = x < 0
    magnitude = np.where(negative, -x - 1, x)                        # 0..32767
    top = magnitude >> 8                                              # 0..127
    exponent = np.where(top > 0, np.floor(np.log2(np.maximum(top, 1))).astype(np.int64) + 1, 0)
    mantissa = np.where(exponent > 0, (magnitude >> (exponent + 3)) & 0x0F, magnitude >> 4)
    return (np.where(negative, 0x80, 0) | (exponent << 4) | mantissa).astype(np.uint8)


def _build_decode_table() -> np.ndarray:
    c = np.arange(256, dtype=np.int64)
    exponent = (c >> 4) & 0x07
    mantissa = c & 0x0F
    level = np.where(exponent > 0, (16 + mantissa) << np.maximum(exponent - 1, 0), mantissa)
    return (np.where(c & 0x80, -level, level) << 4).astype(np.int16)   # 12-bit DAC -> int16


_ENCODE = _build_encode_table()  # index: sample + 32768
_DECODE = _build_decode_table()  # index: byte

#: The byte that encodes a zero sample.
SILENCE_CODE = int(_ENCODE[32768])
assert SILENCE_CODE == 0


def _as_int16(pcm: np.ndarray | list[int], what: str = "pcm") -> np.ndarray:
    arr = np.asarray(pcm)
    if arr.dtype == np.int16:
        return arr
    if not np.issubdtype(arr.dtype, np.integer):
        raise LocalProtocolError(f"{what} must hold int16 samples, got dtype {arr.dtype}")
    if arr.size and (arr.min() < -32768 or arr.max() > 32767):
        raise LocalProtocolError(f"{what} has samples outside the int16 range")
    return arr.astype(np.int16)


def encode_ulaw(pcm: np.ndarray) -> bytes:
    """Compand int16 samples into the robot's 8-bit code, one byte per sample.

    Accepts any integer array within the int16 range (full range, including
    -32768).  Raises :class:`LocalProtocolError` for floats or out-of-range values.
    """
    arr = _as_int16(pcm).reshape(-1)
    return _ENCODE[arr.astype(np.int32) + 32768].tobytes()


def decode_ulaw(data: bytes) -> np.ndarray:
    """Expand 8-bit codes to int16 samples as the robot plays them (any byte string
    decodes; see the module docstring)."""
    return _DECODE[np.frombuffer(bytes(data), dtype=np.uint8)]


# --------------------------------------------------------------------------------------------
# Resampling
# --------------------------------------------------------------------------------------------

_ZERO_CROSSINGS = 24  # sinc lobes on each side (at the cut-off frequency)
_ROLLOFF = 0.92  # pass band edge as a fraction of the lower Nyquist frequency
_KAISER_BETA = 8.6  # ~ 85 dB stop band
#: a ratio up/down with at most this many phases (up) takes its weights from a table of
#: them all (every common rate: 8, 11.025, 16, 22.05, 32, 44.1, 48 kHz have at most 496);
#: any other from a table of this many phases, interpolated linearly between two of them
#: (measured at 44 099, 44 101, 47 999, 8001 and 9001 Hz: within 0.05 of an int16 step of
#: the exact weights, about -125 dB), so that every rate costs about the same a sample.
#: A table is built once a rate, in at most about 8 ms. Computing the exact weights of
#: each output instead (what more than 4096 phases did) took 40 ms a 0.1 s chunk at
#: 44 099 Hz (22 320 phases) against 5 ms at 44 100 Hz, and a 4096-phase table 100 ms.
_TABLE_PHASES = 512
_BLOCK = 8192  # outputs per vectorised block


def _kernel(frac: np.ndarray, cutoff: float, half: int) -> np.ndarray:
    """Windowed-sinc weights, rows = fractional offsets, columns = taps -half+1..half."""
    k = np.arange(-half + 1, half + 1, dtype=np.float64)
    tau = k[None, :] - frac[:, None]
    window = np.i0(_KAISER_BETA * np.sqrt(np.clip(1.0 - (tau / half) ** 2, 0.0, None))) / np.i0(_KAISER_BETA)
    w = cutoff * np.sinc(cutoff * tau) * window
    return w / w.sum(axis=1, keepdims=True)  # unity gain at DC for every phase


@functools.lru_cache(maxsize=16)
def _phase_table(up: int, cutoff: float, half: int) -> np.ndarray:
    table = _kernel(np.arange(up, dtype=np.float64) / up, cutoff, half)
    table.setflags(write=False)
    return table


@functools.lru_cache(maxsize=16)
def _interpolated_table(cutoff: float, half: int) -> tuple[np.ndarray, np.ndarray]:
    """The weights at _TABLE_PHASES fractional offsets, and each row's step to the next."""
    table = _kernel(np.arange(_TABLE_PHASES + 1, dtype=np.float64) / _TABLE_PHASES, cutoff, half)
    rows, steps = table[:-1].copy(), np.diff(table, axis=0)
    rows.setflags(write=False)
    steps.setflags(write=False)
    return rows, steps


def _filter(buf: np.ndarray, first: int, n_from: int, count: int, up: int, down: int, cutoff: float,
            half: int) -> np.ndarray:
    """Outputs ``n_from .. n_from + count - 1`` (float64) of the polyphase filter; ``buf[i]``
    is input sample ``first + i``, and holds every output's window. Output n is centred on
    input ``n * down / up``: the taps ``floor`` of it ``- half + 1 .. + half``, weighted for
    its fractional part. The cost a sample is the same for every ratio."""
    windows = np.lib.stride_tricks.sliding_window_view(buf, 2 * half)  # row j: buf[j : j + 2 half]
    exact = up <= _TABLE_PHASES
    if exact:
        table = _phase_table(up, cutoff, half)
    else:
        rows, steps = _interpolated_table(cutoff, half)
    out = np.empty(count, dtype=np.float64)
    for start in range(0, count, _BLOCK):
        n = np.arange(n_from + start, n_from + min(start + _BLOCK, count), dtype=np.int64)
        pos = n * down
        base, phase = pos // up, pos % up
        window = windows[base - half + 1 - first]
        if exact:
            out[start : start + n.size] = np.einsum("ij,ij->i", window, table[phase])
        else:
            scaled = phase * _TABLE_PHASES
            row, frac = scaled // up, (scaled % up) / up
            out[start : start + n.size] = (np.einsum("ij,ij->i", window, rows[row])
                                           + frac * np.einsum("ij,ij->i", window, steps[row]))
    return out


def resample(pcm: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """Change the sample rate of a mono signal with a windowed-sinc polyphase filter.

    The filter is a Kaiser-windowed sinc (24 lobes each side, about 85 dB stop
    band) whose cut-off is 0.92 x the lower of the two Nyquist frequencies, so
    content that would alias is removed when downsampling (48 kHz -> 22 320 Hz,
    measured: flat to 9 kHz, -2.5 dB at 10 kHz, below -85 dB from 11.5 kHz up).
    A ratio of more than 512 phases (an odd rate such as 44 099 Hz: 22 320) takes
    its weights from a 512-phase table, interpolated (within 0.05 of an int16 step),
    so every rate costs about the same a sample.
    The output has
    ``ceil(len(pcm) * rate_out / rate_in)`` samples: the duration is kept.
    Integer input gives int16 output (rounded and clipped), float input float64.
    """
    x = np.asarray(pcm)
    if x.ndim != 1:
        raise LocalProtocolError(f"resample expects a 1-D signal, got shape {x.shape}; mix down first")
    rate_in, rate_out = int(rate_in), int(rate_out)
    if rate_in <= 0 or rate_out <= 0:
        raise LocalProtocolError("sample rates must be positive")
    integer = np.issubdtype(x.dtype, np.integer)
    if not integer and not np.issubdtype(x.dtype, np.floating):
        raise LocalProtocolError(f"resample expects integer or float samples, got {x.dtype}")
    if rate_in == rate_out or x.size == 0:
        return x.astype(np.int16 if integer else np.float64)

    g = math.gcd(rate_in, rate_out)
    up, down = rate_out // g, rate_in // g
    cutoff = min(1.0, rate_out / rate_in) * _ROLLOFF  # relative to the input Nyquist
    half = math.ceil(_ZERO_CROSSINGS / cutoff)
    n_out = -(-x.size * up // down)
    padded = np.concatenate((np.zeros(half), x.astype(np.float64), np.zeros(half + 1)))
    out = _filter(padded, -half, 0, n_out, up, down, cutoff, half)
    if integer:
        return np.clip(np.rint(out), -32768, 32767).astype(np.int16)
    return out


class StreamResampler:
    """:func:`resample` for a signal that arrives in pieces: same filter, no seams.

    Each :meth:`process` call returns every output sample whose filter window
    the input received so far covers; the filter's history is kept between
    calls, so the output of a stream cut into any pieces equals (to rounding)
    :func:`resample` of the whole signal. :meth:`flush` pads the end with zeros
    and returns the rest: in total ``ceil(n_in * rate_out / rate_in)`` samples.
    Takes integer samples, gives int16.
    """

    def __init__(self, rate_in: int, rate_out: int) -> None:
        rate_in, rate_out = int(rate_in), int(rate_out)
        if rate_in <= 0 or rate_out <= 0:
            raise LocalProtocolError("sample rates must be positive")
        self.rate_in, self.rate_out = rate_in, rate_out
        g = math.gcd(rate_in, rate_out)
        self._up, self._down = rate_out // g, rate_in // g
        self._cutoff = min(1.0, rate_out / rate_in) * _ROLLOFF
        self._half = math.ceil(_ZERO_CROSSINGS / self._cutoff)
        # Input samples kept, as float64; _buf[0] is input index _buf_start. The
        # signal starts with `half` zeros, as in resample().
        self._buf = np.zeros(self._half, dtype=np.float64)
        self._buf_start = -self._half
        self._n_in = 0
        self._n_out = 0  # outputs produced so far

    @property
    def identity(self) -> bool:
        return self.rate_in == self.rate_out

    def _produce(self, last_out: int) -> np.ndarray:
        """Outputs ``_n_out`` .. ``last_out - 1`` (their windows must be in the buffer)."""
        up, down, half = self._up, self._down, self._half
        count = last_out - self._n_out
        if count <= 0:
            return np.zeros(0, dtype=np.int16)
        out = _filter(self._buf, self._buf_start, self._n_out, count, up, down, self._cutoff, half)
        self._n_out = last_out
        # Keep what the next output's window starts from.
        keep_from = (self._n_out * down) // up - half + 1
        if keep_from > self._buf_start:
            self._buf = self._buf[keep_from - self._buf_start :]
            self._buf_start = keep_from
        return np.clip(np.rint(out), -32768, 32767).astype(np.int16)

    def process(self, pcm: np.ndarray) -> np.ndarray:
        """The output samples that ``pcm`` (mono, integer) completes."""
        x = np.asarray(pcm)
        if x.ndim != 1 or not np.issubdtype(x.dtype, np.integer):
            raise LocalProtocolError(f"StreamResampler takes 1-D integer samples, got {x.dtype} {x.shape}")
        if self.identity:
            self._n_in += x.size
            self._n_out += x.size
            return np.clip(x, -32768, 32767).astype(np.int16)
        self._buf = np.concatenate((self._buf, x.astype(np.float64)))
        self._n_in += x.size
        # Output n needs inputs up to floor(n * down / up) + half.
        last_in = self._n_in - 1
        if last_in - self._half < 0:
            return np.zeros(0, dtype=np.int16)
        last_out = ((last_in - self._half) * self._up) // self._down + 1
        return self._produce(last_out)

    def flush(self) -> np.ndarray:
        """The remaining outputs, the input padded with zeros; the resampler starts over afterwards."""
        total = -(-self._n_in * self._up // self._down)
        if self.identity or total <= self._n_out:
            out = np.zeros(0, dtype=np.int16)
        else:
            self._buf = np.concatenate((self._buf, np.zeros(self._half + 1)))
            out = self._produce(total)
        self.__init__(self.rate_in, self.rate_out)
        return out


def mix_down(pcm: np.ndarray) -> np.ndarray:
    """Average ``(n, channels)`` samples to mono ``(n,)``; 1-D input is returned unchanged.

    Integer input gives int16 (rounded mean, no overflow), float input float64.
    """
    x = np.asarray(pcm)
    if x.ndim == 1:
        return x
    if x.ndim != 2 or x.shape[1] < 1:
        raise LocalProtocolError(f"mix_down expects (n, channels), got shape {x.shape}")
    mean = x.astype(np.float64).mean(axis=1)
    if np.issubdtype(x.dtype, np.integer):
        return np.clip(np.rint(mean), -32768, 32767).astype(np.int16)
    return mean


# --------------------------------------------------------------------------------------------
# WAV files and frames
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class WavInfo:
    """What :func:`load_wav` found in the file (before conversion)."""

    channels: int
    sample_width_bytes: int
    sample_rate_hz: int
    frame_count: int  # samples per channel
    duration_s: float
    #: the header declares no samples, but samples follow it (a recording whose header was
    #: never finished, e.g. GStreamer's wavenc stopped with Ctrl-C): they were read
    unfinished_header: bool = False


def load_wav(source: str | os.PathLike[str] | BinaryIO) -> tuple[np.ndarray, WavInfo]:
    """Read a PCM WAV file and return ``(mono int16 samples at SAMPLE_RATE, info)``.

    Accepts 8-bit (unsigned) or 16-bit (signed) integer PCM, mono or stereo, at
    8 000..48 000 Hz, up to :data:`MAX_WAV_SECONDS` long, in a plain header (format 1) or
    a WAVE_FORMAT_EXTENSIBLE one whose sub-format is PCM, on every Python (the header is
    read here: the stdlib ``wave`` reads the latter from 3.12 on only).  Stereo is averaged
    to mono and the signal is resampled with an anti-aliasing filter (see :func:`resample`).
    Anything else (24/32-bit, float, compressed formats, plain or extensible, other rates,
    more channels, a longer, truncated or non-WAV file) raises :class:`LocalProtocolError`.
    A longer file is refused before it is read when it can seek, else once
    ``MAX_WAV_SECONDS`` of it were read; a header that declares more than the file holds
    (``espeak-ng --stdout``'s) is taken for what the file holds, and so is one that declares
    no samples when samples follow it (:attr:`WavInfo.unfinished_header`; whole chunks after
    an empty data chunk, a LIST, are not samples). A file with no samples gives none.
    """
    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else getattr(source, "name", "<stream>")
    try:
        with contextlib.ExitStack() as files:
            f = files.enter_context(open(source, "rb")) if isinstance(source, (str, os.PathLike)) else source
            channels, width, rate, frames = _read_wav_header(f, name)
            if width not in (1, 2):
                raise LocalProtocolError(
                    f"{name}: {8 * width}-bit samples are not supported (only 8- or 16-bit integer PCM)"
                )
            if channels not in (1, 2):
                raise LocalProtocolError(f"{name}: {channels} channels are not supported (only mono or stereo)")
            if not MIN_WAV_RATE <= rate <= MAX_WAV_RATE:
                raise LocalProtocolError(
                    f"{name}: sample rate {rate} Hz is not supported (only {MIN_WAV_RATE}-{MAX_WAV_RATE} Hz)"
                )
            most = MAX_WAV_SECONDS * rate
            held = _frames_held(f, frames, width * channels)
            if held is not None and held > most:
                raise LocalProtocolError(_too_long(name, held / rate))
            if frames:
                raw = f.read(min(frames, most + 1) * width * channels)
            else:  # no samples, or a header never finished: what follows it, unless only chunks
                raw = f.read((most + 1) * width * channels)
                raw = b"" if _chunks_only(raw) else raw
            if len(raw) > most * width * channels:
                raise LocalProtocolError(_too_long(name, None))
    except EOFError as exc:
        raise LocalProtocolError(f"{name}: truncated WAV file") from exc
    except OSError as exc:
        raise LocalProtocolError(f"{name}: cannot read WAV file ({exc})") from exc

    usable = len(raw) // (width * channels) * (width * channels)
    if width == 1:
        samples = (np.frombuffer(raw[:usable], dtype=np.uint8).astype(np.int16) - 128) << 8
    else:
        samples = np.frombuffer(raw[:usable], dtype="<i2").astype(np.int16)
    samples = samples.reshape(-1, channels)
    n = samples.shape[0]
    info = WavInfo(channels, width, rate, n, n / rate, unfinished_header=bool(n) and not frames)
    mono = mix_down(samples) if channels > 1 else samples[:, 0]
    return resample(mono, rate, SAMPLE_RATE), info


#: the GUID of a WAVE_FORMAT_EXTENSIBLE sub-format but its first two bytes, a format tag
_SUBTYPE_TAIL = uuid.UUID("00000000-0000-0010-8000-00aa00389b71").bytes_le[2:]
_PCM, _EXTENSIBLE = 1, 0xFFFE
#: the formats of samples a refusal names
_FORMAT_NAMES = {3: "IEEE float", 6: "A-law", 7: "mu-law"}
_ONLY_PCM = "only 8- or 16-bit integer PCM is supported"


def _read_wav_header(f: BinaryIO, name: str) -> tuple[int, int, int, int]:
    """``(channels, sample width in bytes, rate, frames declared)`` from the RIFF header of a
    PCM WAV file, plain or extensible, read here (by Python's ``wave`` only plain PCM before
    3.12); ``f`` is left at the start of the samples. It only reads (a pipe can be read).

    Raises :class:`LocalProtocolError` for what is no PCM WAV file, EOFError when the file
    ends within the header.
    """

    def chunk_header() -> tuple[bytes, int]:
        head = f.read(8)
        if len(head) < 8:
            raise EOFError
        return head[:4], int.from_bytes(head[4:], "little")

    riff = f.read(4)
    if not riff:  # (an empty file was "truncated", as one cut within its header is)
        raise _not_pcm(name, "the file is empty")
    if riff != b"RIFF":
        raise _not_pcm(name, "file does not start with RIFF id")
    if len(f.read(4)) < 4:  # (its size is not used: unfinished recordings get it wrong)
        raise EOFError
    if f.read(4) != b"WAVE":
        raise _not_pcm(name, "not a WAVE file")
    fmt = None
    while True:
        try:
            chunk, size = chunk_header()
        except EOFError:
            raise _not_pcm(name, "fmt chunk and/or data chunk missing") from None
        if chunk == b"data":
            if fmt is None:
                raise _not_pcm(name, "data chunk before fmt chunk")
            channels, width, rate = fmt
            return channels, width, rate, size // (channels * width)
        body = f.read(min(size, 64)) if chunk == b"fmt " else b""
        _skip(f, size + (size & 1) - len(body))
        if chunk == b"fmt ":
            fmt = _pcm_format(body, name)


def _pcm_format(body: bytes, name: str) -> tuple[int, int, int]:
    """``(channels, sample width in bytes, rate)`` from the first bytes of the fmt chunk of
    the WAV file ``name``: PCM, plain or extensible; any other format is refused."""
    if len(body) < 16:
        raise EOFError
    tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", body)
    extensible = ""
    if tag == _EXTENSIBLE:
        if len(body) < 40:
            raise _not_pcm(name, f"an extensible fmt chunk of {len(body)} bytes, not 40")
        guid = body[24:40]
        tag, extensible = int.from_bytes(guid[:2], "little"), "extensible "
        if guid[2:] != _SUBTYPE_TAIL or (tag != _PCM and tag not in _FORMAT_NAMES):
            raise _not_pcm(name, f"extensible sub-format {uuid.UUID(bytes_le=guid)}; {_ONLY_PCM}")
    if tag != _PCM:
        what = f"{_FORMAT_NAMES[tag]} samples" if tag in _FORMAT_NAMES else f"unknown format {tag}"
        raise _not_pcm(name, f"{extensible}{what}; {_ONLY_PCM}")
    if not bits:
        raise _not_pcm(name, "bad sample width")
    if not channels:
        raise _not_pcm(name, "bad # of channels")
    return channels, (bits + 7) // 8, rate


def _not_pcm(name: str, why: str) -> LocalProtocolError:
    """The refusal of the file ``name``, no PCM WAV file as :func:`load_wav` reads, ``why``."""
    return LocalProtocolError(f"{name}: not a plain PCM WAV file ({why})")


def _skip(f: BinaryIO, n: int) -> None:
    """Move ``f`` ``n`` bytes on: seek where it can, else read them."""
    try:
        if f.seekable():
            f.seek(n, os.SEEK_CUR)
            return
    except (AttributeError, OSError, ValueError):
        pass
    while n > 0:
        got = f.read(min(n, 1 << 16))
        if not got:
            raise EOFError
        n -= len(got)


def _frames_held(f: BinaryIO, declared: int, frame_bytes: int) -> int | None:
    """The frames a WAV file's data really holds, ``f`` at their start: those its header
    declares, or fewer where the file ends first (it declares none: all to the end, see
    :func:`load_wav`); None when ``f`` cannot seek (a pipe)."""
    try:
        if not f.seekable():
            return None
        here = f.tell()
        end = f.seek(0, os.SEEK_END)
        f.seek(here)
    except (AttributeError, OSError, ValueError):
        return None
    held = max(0, end - here) // frame_bytes
    return min(declared, held) if declared else held


def _chunks_only(data: bytes) -> bool:
    """Whether ``data``, what follows a data chunk that declares no samples, is RIFF chunks
    (an id of four printable characters and a size) to its end rather than samples."""
    at = 0
    while at + 8 <= len(data):
        if not all(0x20 <= c < 0x7F for c in data[at:at + 4]):
            return False
        size = int.from_bytes(data[at + 4:at + 8], "little")
        at += 8 + size + (size & 1)
    return at in (len(data), len(data) + 1)  # (a last pad byte left out)


def _too_long(name: str, seconds: float | None) -> str:
    """Why the WAV file ``name``, ``seconds`` long (None: more than the limit), is refused."""
    said = f"more than {MAX_WAV_SECONDS} s" if seconds is None else f"{seconds:.0f} s"
    minutes = "" if seconds is None else f" ({seconds / 60:.1f} minutes)"
    return (f"{name}: {said} of sound{minutes}; a WAV file may hold at most {MAX_WAV_SECONDS} s "
            f"({MAX_WAV_SECONDS // 60} minutes), as it is converted whole in memory: cut it into "
            "shorter files")


def frames_from_pcm(pcm: np.ndarray) -> list[bytes]:
    """Cut mono int16 samples at :data:`SAMPLE_RATE` into ``OutputAudio`` payloads.

    Each payload is 744 companded bytes; the last one is padded with
    :data:`SILENCE_CODE`, 0x00.
    """
    arr = _as_int16(pcm)
    if arr.ndim != 1:
        raise LocalProtocolError(f"frames_from_pcm expects mono samples, got shape {arr.shape}")
    codes = encode_ulaw(arr)
    pad = (-len(codes)) % SAMPLES_PER_FRAME
    codes += bytes([SILENCE_CODE]) * pad
    return [codes[i : i + SAMPLES_PER_FRAME] for i in range(0, len(codes), SAMPLES_PER_FRAME)]
