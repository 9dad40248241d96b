"""Camera images: chunk reassembly and the robot's "minimized JPEG" format.

Wire format, in short
---------------------
The robot streams each camera frame as a run of ``ImageChunk`` messages.  All
chunks of one frame share ``image_id``, ``image_encoding`` and
``image_resolution``; ``chunk_id`` (from 0) says where each ``data`` slice goes.
``image_chunk_count`` (the total number of chunks) and ``frame_timestamp``
(robot clock, ms) are given by the frame's last chunk: Anki's robot firmware
sends 0 for both in every other chunk ("invalid"), where the protocol notes,
taken from a client, have every chunk carry them; both are accepted.
Concatenating the slices in ``chunk_id`` order gives the frame's payload.

For the minimized encodings, JPEGMinimizedGray (8) and JPEGMinimizedColor (9),
the payload is a baseline JPEG with everything but the entropy-coded scan
removed (the colour flag, not the encoding number, decides the layout; the
reference client rebuilds only encoding 8 and picks grey or colour by the flag):

* byte 0 is a colour flag (zero: one grey component; non-zero: colour);
* the remaining bytes are the scan data *without* the 0x00 byte that JPEG
  stuffs after every 0xFF, and without the final EOI marker;
* the payload may end with 0xFF bytes of padding, which carry no data.

Both sides agree on fixed tables, so no header travels: quantisation is the
IJG luminance table at quality 50, entropy coding uses the Annex K luminance
DC and AC Huffman tables.  A grey frame has one component at the nominal
resolution.  A colour frame is coded at **half the nominal width**, with three
components: Y sampled 2x1 (an MCU covers 16x8 pixels of the half-width image)
and Cb, Cr sampled 1x1, all three using quantisation table 0 and Huffman
tables 0/0 (chroma reuses the luminance tables).  The receiver stretches the
decoded image back to the nominal width.

To rebuild a standard JFIF file: drop the flag byte and any trailing 0xFF,
re-insert 0x00 after every 0xFF, append EOI (FF D9) and put the fixed header
in front (SOI, APP0 JFIF 1.1, DQT, SOF0 with the frame size, one DHT segment
with both tables, SOS).

A payload whose scan data itself ends in 0xFF cannot survive the trailing-0xFF
strip, so :func:`encode_minimized` appends one 0x00 byte in that case; JPEG
decoders skip such extraneous bytes before EOI.

This module is pure: no sockets, threads or clocks.  Decoding pixels
(:func:`decode_to_array`) is kept apart so that the driver only pays for it
when someone wants raw images.
"""

from __future__ import annotations

import contextlib
import functools
import io
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Tuple

import numpy as np

from .errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "ENCODING_JPEG_GRAY",
    "ENCODING_JPEG_COLOR",
    "ENCODING_JPEG_MINIMIZED_GRAY",
    "ENCODING_JPEG_MINIMIZED_COLOR",
    "RESOLUTIONS",
    "RESOLUTION_NAMES",
    "MAX_CHUNK_DATA",
    "CameraImage",
    "AssemblerStats",
    "ImageAssembler",
    "resolution_size",
    "jpeg_header",
    "minimized_to_jpeg",
    "image_to_jpeg",
    "jpeg_size",
    "check_image",
    "is_half_width_color",
    "decode_to_array",
    "decode_to_bytes",
    "coded_size",
    "image_to_array",
    "encode_minimized",
    "split_into_chunks",
]

# ImageEncoding values (messages.json enum ImageEncoding) this module handles.
ENCODING_JPEG_GRAY = 5
ENCODING_JPEG_COLOR = 6
ENCODING_JPEG_MINIMIZED_GRAY = 8
ENCODING_JPEG_MINIMIZED_COLOR = 9

_MINIMIZED_ENCODINGS = (ENCODING_JPEG_MINIMIZED_GRAY, ENCODING_JPEG_MINIMIZED_COLOR)
_PLAIN_JPEG_ENCODINGS = (ENCODING_JPEG_GRAY, ENCODING_JPEG_COLOR)

_ENCODING_NAMES = {
    0: "NoneImageEncoding",
    1: "RawGray",
    2: "RawRGB",
    3: "YUYV",
    4: "BAYER",
    5: "JPEGGray",
    6: "JPEGColor",
    7: "JPEGColorHalfWidth",
    8: "JPEGMinimizedGray",
    9: "JPEGMinimizedColor",
}

#: ImageResolution enum value -> (width_px, height_px).
RESOLUTIONS: dict[int, tuple[int, int]] = {
    0: (16, 16),
    1: (40, 30),
    2: (80, 60),
    3: (160, 120),
    4: (320, 240),
    5: (400, 296),
    6: (640, 480),
    7: (800, 600),
    8: (1024, 768),
    9: (1280, 960),
    10: (1600, 1200),
    11: (2048, 1536),
    12: (3200, 2400),
}

#: ImageResolution enum value -> protocol name.
RESOLUTION_NAMES: dict[int, str] = {
    0: "VerificationSnapshot",
    1: "QQQQVGA",
    2: "QQQVGA",
    3: "QQVGA",
    4: "QVGA",
    5: "CVGA",
    6: "VGA",
    7: "SVGA",
    8: "XGA",
    9: "SXGA",
    10: "UXGA",
    11: "QXGA",
    12: "QUXGA",
}

_MAX_PIXELS = max(w * h for w, h in RESOLUTIONS.values())

#: Default slice size used by :func:`split_into_chunks` (the robot's chunks carry ~1000 B).
MAX_CHUNK_DATA = 1000


def resolution_size(resolution: int) -> tuple[int, int]:
    """Return ``(width_px, height_px)`` of an ImageResolution value.

    Raises :class:`RemoteProtocolError` for values that name no size
    (ImageResolutionCount, ImageResolutionNone, anything out of range), since the
    value comes from the robot.
    """
    try:
        return RESOLUTIONS[int(resolution)]
    except KeyError:
        raise RemoteProtocolError(f"image_resolution {resolution!r} names no image size") from None


# --------------------------------------------------------------------------------------------
# Reassembly
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class CameraImage:
    """One complete camera frame as sent by the robot.

    ``data`` is the reassembled payload in the frame's own encoding (for
    encodings 8/9: the minimized format described in the module docstring);
    :func:`image_to_jpeg` turns it into a standard JPEG.
    """

    image_id: int
    frame_timestamp_ms: int  # robot clock, when the frame was captured
    encoding: int  # ImageEncoding value
    resolution: int  # ImageResolution value
    width: int  # nominal width in pixels (from the resolution)
    height: int  # nominal height in pixels
    data: bytes  # payload, chunks joined in chunk_id order


@dataclass(slots=True)
class AssemblerStats:
    """Counters kept by :class:`ImageAssembler`."""

    completed_images: int = 0
    #: Incomplete images abandoned (a newer image completed, too many in progress, too old).
    dropped_images: int = 0
    #: Incomplete images discarded by :meth:`ImageAssembler.discard_pending` (the receiver
    #: switched the camera off mid-frame): no loss, not counted dropped.
    discarded_images: int = 0
    #: Chunks whose ``chunk_id`` had already arrived (also late copies for completed images).
    duplicate_chunks: int = 0
    #: Chunks of images that were already abandoned or superseded.
    stale_chunks: int = 0
    #: Chunks rejected as malformed (each also raised :class:`RemoteProtocolError`).
    invalid_chunks: int = 0


_U32 = 1 << 32


class _PartialImage:
    """The chunks of one image so far. The total and the capture time may be unknown until
    the last chunk: Anki's firmware sends 0 for both in every chunk but the last."""

    __slots__ = (
        "image_id",
        "frame_timestamp_ms",
        "encoding",
        "resolution",
        "chunk_count",
        "chunks",
    )

    def __init__(self, image_id: int, encoding: int, resolution: int):
        self.image_id = image_id
        self.frame_timestamp_ms: int | None = None  # robot clock; None: not told yet
        self.encoding = encoding
        self.resolution = resolution
        self.chunk_count: int | None = None  # None: not told yet
        self.chunks: dict[int, bytes] = {}


def _is_older(a: int, b: int) -> bool:
    """True if u32 id/timestamp ``a`` comes before ``b`` (serial-number arithmetic)."""
    return 0 < (b - a) % _U32 < (1 << 31)


class ImageAssembler:
    """Rebuild camera frames from ``ImageChunk`` messages.

    Chunks of one image may arrive in any order and more than once; an image is
    complete when every ``chunk_id`` in ``0 .. image_chunk_count-1`` has arrived.
    At most ``max_pending`` images are assembled at once (the oldest is abandoned
    to make room).  When an image completes, any older incomplete image is
    abandoned, so frames come out in ``image_id`` order.  An incomplete image whose
    capture time is known is also abandoned once a chunk arrives whose
    ``frame_timestamp`` is more than ``max_age_ms`` later than its own (robot clock,
    so no wall clock is read).  A chunk count or capture time of 0 is "not told":
    the robot tells both in an image's last chunk only.

    Chunks of an image that was already completed or abandoned are ignored.  An
    image id "far" behind the newest finished one (``stale_window`` ids or more)
    is taken as a fresh sequence, e.g. after the robot restarted; call
    :meth:`reset` on reconnect anyway, and :meth:`discard_pending` when the camera was
    switched off (what it cut short is not counted as dropped).

    ``max_resolution`` (an ImageResolution value) refuses chunks of larger images: a
    receiver that asked for QVGA need not decode 3200 x 2400 pixels for a forged
    17-byte chunk (None: every size of :data:`RESOLUTIONS`).
    """

    def __init__(self, max_pending: int = 2, max_age_ms: int = 1000, stale_window: int = 64,
                 max_resolution: int | None = None):
        if max_pending < 1:
            raise LocalProtocolError("max_pending must be at least 1")
        if max_age_ms < 0 or stale_window < 1:
            raise LocalProtocolError("max_age_ms must be >= 0 and stale_window >= 1")
        self.max_pending = max_pending
        self.max_age_ms = max_age_ms
        self.stale_window = stale_window
        if max_resolution is not None and max_resolution not in RESOLUTIONS:
            raise LocalProtocolError(f"max_resolution {max_resolution} names no image size")
        self._resolutions = frozenset(r for r in RESOLUTIONS
                                      if max_resolution is None or r <= max_resolution)
        self.stats = AssemblerStats()
        self._pending: dict[int, _PartialImage] = {}
        self._floor: int | None = None  # newest image id completed or abandoned
        self._recent_completed: deque[int] = deque(maxlen=8)

    @property
    def pending(self) -> int:
        """Number of images currently being assembled."""
        return len(self._pending)

    def reset(self) -> None:
        """Forget all partial images and history (counters are kept)."""
        self._pending.clear()
        self._floor = None
        self._recent_completed.clear()

    def discard_pending(self) -> int:
        """Discard every incomplete image (counted ``discarded_images``, not dropped): the
        receiver switched the camera off, and the robot sends no more of them. Their late
        chunks are stale from here on. Returns how many were discarded."""
        discarded = list(self._pending)
        self._pending.clear()
        for image_id in discarded:
            self._advance_floor(image_id)
        self.stats.discarded_images += len(discarded)
        return len(discarded)

    def push_chunk(self, chunk: Any) -> CameraImage | None:
        """Add a decoded ``ImageChunk`` message (any object with its field names).

        The timestamp is read from ``frame_timestamp_ms`` (this project's message
        table) or, failing that, ``frame_timestamp`` (the reference's name).
        """
        timestamp = getattr(chunk, "frame_timestamp_ms", None)
        if timestamp is None:
            timestamp = chunk.frame_timestamp
        return self.push(
            image_id=chunk.image_id,
            frame_timestamp_ms=timestamp,
            image_encoding=chunk.image_encoding,
            image_resolution=chunk.image_resolution,
            image_chunk_count=chunk.image_chunk_count,
            chunk_id=chunk.chunk_id,
            data=chunk.data,
        )

    def push(
        self,
        image_id: int,
        frame_timestamp_ms: int,
        image_encoding: int,
        image_resolution: int,
        image_chunk_count: int,
        chunk_id: int,
        data: bytes,
    ) -> CameraImage | None:
        """Add one chunk; return the completed :class:`CameraImage`, else ``None``.

        Raises :class:`RemoteProtocolError` (and counts ``invalid_chunks``) for a
        chunk that cannot belong to any image: a ``chunk_id`` out of range of the
        chunk count it or an earlier chunk of its image gives, an unknown resolution,
        or metadata contradicting earlier chunks of the same image (a count that
        leaves out a chunk already held among them). A chunk count or timestamp of 0 is not
        told (every chunk but an image's last, from a real robot).
        """
        image_id = int(image_id)
        frame_timestamp_ms = int(frame_timestamp_ms)
        encoding = int(image_encoding)
        resolution = int(image_resolution)
        count = int(image_chunk_count)
        chunk_id = int(chunk_id)
        stats = self.stats

        # the robot gives the total and the capture time only in an image's last chunk (its
        # firmware sends 0 for both in the others, "invalid"); a chunk that gives them must
        # agree with every other chunk of its image that does
        if not 0 <= chunk_id < (count or 256) or count > 256:
            stats.invalid_chunks += 1
            raise RemoteProtocolError(f"image {image_id}: chunk_id {chunk_id} out of range for {count} chunks")
        if resolution not in self._resolutions:
            stats.invalid_chunks += 1
            if resolution in RESOLUTIONS:
                raise RemoteProtocolError(f"image {image_id}: image_resolution {resolution} "
                                          f"({RESOLUTION_NAMES[resolution]}) is larger than asked for")
            raise RemoteProtocolError(f"image {image_id}: image_resolution {resolution} names no image size")

        partial = self._pending.get(image_id)
        if partial is None:
            if self._floor is not None and (self._floor - image_id) % _U32 < self.stale_window:
                if image_id in self._recent_completed:
                    stats.duplicate_chunks += 1
                else:
                    stats.stale_chunks += 1
                return None
            while len(self._pending) >= self.max_pending:
                # Make room by abandoning the oldest image (u32 serial order) -- unless the
                # newcomer is itself the oldest: then it is the one not worth assembling.
                newest = image_id
                for i in self._pending:
                    if _is_older(newest, i):
                        newest = i
                oldest = max((*self._pending, image_id), key=lambda i: (newest - i) % _U32)
                if oldest == image_id:
                    stats.stale_chunks += 1
                    return None
                self._abandon(oldest)
            partial = _PartialImage(image_id, encoding, resolution)
            self._pending[image_id] = partial
        elif partial.encoding != encoding or partial.resolution != resolution:
            stats.invalid_chunks += 1
            raise RemoteProtocolError(f"image {image_id}: chunk {chunk_id} contradicts earlier chunks' metadata")

        if count:
            known = partial.chunk_count
            if (known is not None and known != count) or \
                    (known is None and any(i >= count for i in partial.chunks)):
                stats.invalid_chunks += 1
                raise RemoteProtocolError(f"image {image_id}: chunk {chunk_id} says {count} chunks, "
                                          "which contradicts earlier chunks")
        elif partial.chunk_count is not None and chunk_id >= partial.chunk_count:
            # a chunk that gives no count, beyond the one an earlier chunk gave: kept, it would
            # complete the image with a chunk missing
            stats.invalid_chunks += 1
            raise RemoteProtocolError(f"image {image_id}: chunk_id {chunk_id} out of range for "
                                      f"{partial.chunk_count} chunks")
        if frame_timestamp_ms:
            known = partial.frame_timestamp_ms
            if known is not None and known != frame_timestamp_ms:
                stats.invalid_chunks += 1
                raise RemoteProtocolError(f"image {image_id}: chunk {chunk_id} contradicts earlier "
                                          "chunks' frame_timestamp")
        if chunk_id in partial.chunks:
            stats.duplicate_chunks += 1
            return None
        if count:
            partial.chunk_count = count
        if frame_timestamp_ms and partial.frame_timestamp_ms is None:
            partial.frame_timestamp_ms = frame_timestamp_ms
            self._expire(frame_timestamp_ms, image_id)
        partial.chunks[chunk_id] = bytes(data)
        if partial.chunk_count is None or len(partial.chunks) < partial.chunk_count:
            return None

        # Complete: emit it and abandon everything older.
        del self._pending[image_id]
        for other in [i for i in self._pending if _is_older(i, image_id)]:
            self._abandon(other)
        self._advance_floor(image_id)
        self._recent_completed.append(image_id)
        stats.completed_images += 1
        width, height = RESOLUTIONS[resolution]
        chunks = partial.chunks
        return CameraImage(
            image_id=image_id,
            frame_timestamp_ms=partial.frame_timestamp_ms or 0,
            encoding=encoding,
            resolution=resolution,
            width=width,
            height=height,
            data=b"".join(chunks[i] for i in range(len(chunks))),
        )

    def _expire(self, now_frame_ms: int, current: int) -> None:
        """Abandon the incomplete images captured more than ``max_age_ms`` before
        ``now_frame_ms`` (those whose capture time is known), but ``current``."""
        for image_id in [
            i
            for i, p in self._pending.items()
            if i != current and p.frame_timestamp_ms is not None
            and _is_older(p.frame_timestamp_ms, now_frame_ms)
            and (now_frame_ms - p.frame_timestamp_ms) % _U32 > self.max_age_ms
        ]:
            self._abandon(image_id)

    def _abandon(self, image_id: int) -> None:
        del self._pending[image_id]
        self.stats.dropped_images += 1
        self._advance_floor(image_id)

    def _advance_floor(self, image_id: int) -> None:
        if self._floor is None or _is_older(self._floor, image_id):
            self._floor = image_id


# --------------------------------------------------------------------------------------------
# Standard tables (ITU-T T.81 Annex K) and the fixed header
# --------------------------------------------------------------------------------------------

# Annex K.1 luminance quantisation table in natural (row-major) order. IJG quality 50 uses it
# unscaled (scale factor 100 %).
_LUMA_QUANT_NATURAL = np.array(
    [
        [16, 11, 10, 16, 24, 40, 51, 61],
        [12, 12, 14, 19, 26, 58, 60, 55],
        [14, 13, 16, 24, 40, 57, 69, 56],
        [14, 17, 22, 29, 51, 87, 80, 62],
        [18, 22, 37, 56, 68, 109, 103, 77],
        [24, 35, 55, 64, 81, 104, 113, 92],
        [49, 64, 78, 87, 103, 121, 120, 101],
        [72, 92, 95, 98, 112, 100, 103, 99],
    ],
    dtype=np.int32,
)


def _zigzag_order() -> np.ndarray:
    """Natural (row*8+col) index of each zigzag position 0..63."""
    cells = [(r, c) for r in range(8) for c in range(8)]
    # Anti-diagonals r+c; even diagonals run bottom-left -> top-right (row descending).
    cells.sort(key=lambda rc: (rc[0] + rc[1], -rc[0] if (rc[0] + rc[1]) % 2 == 0 else rc[0]))
    return np.array([r * 8 + c for r, c in cells], dtype=np.intp)


_ZIGZAG = _zigzag_order()
_QUANT_ZIGZAG = _LUMA_QUANT_NATURAL.reshape(64)[_ZIGZAG]

# Annex K.3 luminance tables: number of codes of each length 1..16, then the symbols.
_DC_BITS = bytes([0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
_DC_VALUES = bytes(range(12))
_AC_BITS = bytes([0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7D])
_AC_VALUES = bytes.fromhex(
    "01020300041105122131410613516107227114328191a1082342b1c11552d1f0"
    "2433627282090a161718191a25262728292a3435363738393a434445464748494a"
    "535455565758595a636465666768696a737475767778797a838485868788898a"
    "92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6"
    "c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9fa"
)
assert len(_DC_VALUES) == sum(_DC_BITS) and len(_AC_VALUES) == sum(_AC_BITS) == 162


def _huffman_codes(bits: bytes, values: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Canonical Huffman codes: per symbol 0..255, (code, length); length 0 = no code."""
    codes = np.zeros(256, dtype=np.uint64)
    lengths = np.zeros(256, dtype=np.uint64)
    code = 0
    k = 0
    for length, n in enumerate(bits, start=1):
        for _ in range(n):
            codes[values[k]] = code
            lengths[values[k]] = length
            code += 1
            k += 1
        code <<= 1
    return codes, lengths


_DC_CODE, _DC_LEN = _huffman_codes(_DC_BITS, _DC_VALUES)
_AC_CODE, _AC_LEN = _huffman_codes(_AC_BITS, _AC_VALUES)

_SOF_HEIGHT_OFFSET = 0x5E  # height, then width, big-endian u16, inside SOF0


def _segment(marker: int, body: bytes) -> bytes:
    return struct.pack(">BBH", 0xFF, marker, len(body) + 2) + body


@functools.lru_cache(maxsize=64)
def jpeg_header(width: int, height: int, color: bool) -> bytes:
    """Fixed JFIF header for a minimized payload, for the *coded* size ``width`` x ``height``.

    For colour frames pass the coded (half) width.  324 bytes for grey, 334 for colour.
    """
    if not (0 < width < 65536 and 0 < height < 65536):
        raise LocalProtocolError(f"JPEG frame size {width}x{height} out of range")
    app0 = b"JFIF\x00" + struct.pack(">BBBHHBB", 1, 1, 0, 1, 1, 0, 0)
    dqt = b"\x00" + bytes(_QUANT_ZIGZAG.astype(np.uint8))
    if color:
        # Y: id 1, H=2 V=1; Cb: id 2, 1x1; Cr: id 3, 1x1; all on quantisation table 0.
        comps = bytes([1, 0x21, 0, 2, 0x11, 0, 3, 0x11, 0])
        scan_comps = bytes([1, 0x00, 2, 0x00, 3, 0x00])
    else:
        comps = bytes([1, 0x11, 0])
        scan_comps = bytes([1, 0x00])
    ncomp = len(comps) // 3
    sof = struct.pack(">BHHB", 8, height, width, ncomp) + comps
    dht = b"\x00" + _DC_BITS + _DC_VALUES + b"\x10" + _AC_BITS + _AC_VALUES
    sos = bytes([ncomp]) + scan_comps + bytes([0, 63, 0])
    header = (
        b"\xff\xd8"
        + _segment(0xE0, app0)
        + _segment(0xDB, dqt)
        + _segment(0xC0, sof)
        + _segment(0xC4, dht)
        + _segment(0xDA, sos)
    )
    assert header[_SOF_HEIGHT_OFFSET : _SOF_HEIGHT_OFFSET + 4] == struct.pack(">HH", height, width)
    return header


# --------------------------------------------------------------------------------------------
# Minimized -> JPEG
# --------------------------------------------------------------------------------------------


def minimized_to_jpeg(data: bytes, width: int, height: int, color: bool | None = None) -> bytes:
    """Rebuild a standard JFIF JPEG from a minimized payload.

    ``width`` and ``height`` are the *nominal* image size (from the resolution);
    colour payloads are coded at half that width and the header says so.
    ``color=None`` takes the colour flag from byte 0 of ``data``.
    Raises :class:`RemoteProtocolError` for a payload without scan data.
    """
    if not data:
        raise RemoteProtocolError("empty minimized JPEG payload")
    if not isinstance(data, bytes):
        data = bytes(data)
    if color is None:
        color = data[0] != 0
    coded_width = width // 2 if color else width
    if coded_width < 1 or height < 1:
        raise LocalProtocolError(f"image size {width}x{height} too small")
    header = jpeg_header(coded_width, height, bool(color))
    scan = data[1:].rstrip(b"\xff")
    if not scan:
        raise RemoteProtocolError("minimized JPEG payload holds no scan data")
    scan = scan.replace(b"\xff", b"\xff\x00")
    return b"".join((header, scan, b"\xff\xd9"))


# JPEG markers: the frame headers (SOF0..SOF15 but DHT, JPG and DAC), the start of scan, and
# those that stand alone, with no length (TEM, RST0..RST7)
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_SOS_MARKER = 0xDA
_LONE_MARKERS = frozenset(range(0xD0, 0xD8)) | {0x01}


def jpeg_size(jpeg: bytes) -> tuple[int, int]:
    """``(width, height)`` of a JPEG as its frame header (the SOF segment) says, read from the
    segments before its first scan: no pixel is decoded.

    Strict where decoders are lenient, so that what it reads is what a decoder reads: raises
    :class:`RemoteProtocolError` for data that does not start as a JPEG, has bytes between its
    segments, ends before its scan, or has no frame header or more than one (Pillow takes the
    size of the last).
    """
    data = memoryview(jpeg)
    end = len(data)
    if data[:2] != b"\xff\xd8":
        raise RemoteProtocolError("not a JPEG: it does not start with SOI (FF D8)")
    size: tuple[int, int] | None = None
    i = 2
    while True:
        if i >= end:
            raise RemoteProtocolError("JPEG ends before its scan")
        if data[i] != 0xFF:
            raise RemoteProtocolError(f"JPEG has stray bytes at offset {i}, where a marker belongs")
        while i < end and data[i] == 0xFF:  # fill bytes may come before a marker
            i += 1
        if i >= end:
            raise RemoteProtocolError("JPEG ends before its scan")
        marker = data[i]
        i += 1
        if marker in _LONE_MARKERS:
            continue
        if marker < 0xC0 or marker in (0xD8, 0xD9):  # reserved, a second SOI, EOI
            raise RemoteProtocolError(f"JPEG has marker FF {marker:02X} before its scan")
        if i + 2 > end:
            raise RemoteProtocolError("JPEG ends before its scan")
        length = (data[i] << 8) | data[i + 1]
        if length < 2 or i + length > end:
            raise RemoteProtocolError(f"JPEG segment FF {marker:02X} of length {length} does not fit")
        if marker == _SOS_MARKER:
            if size is None:
                raise RemoteProtocolError("JPEG has no frame header (SOF) before its scan")
            return size
        if marker in _SOF_MARKERS:
            if size is not None:
                raise RemoteProtocolError("JPEG has more than one frame header (SOF)")
            if length < 8:
                raise RemoteProtocolError(f"JPEG frame header of length {length} is too short")
            # precision (1 byte), then the height and the width, big-endian u16
            size = ((data[i + 5] << 8) | data[i + 6], (data[i + 3] << 8) | data[i + 4])
        i += length


def check_image(image: CameraImage) -> None:
    """Raise :class:`RemoteProtocolError` for a :class:`CameraImage` that :func:`image_to_jpeg`
    cannot make a JPEG of its nominal size of, as far as that is known without decoding: an
    encoding this module does not handle, or a plain JPEG (JPEGGray/JPEGColor, 5/6) whose
    own header (:func:`jpeg_size`) gives another size than the chunks' ``image_resolution``
    (the robot's camera sends neither: both were forged, or corrupted). A minimized frame
    (8/9) passes: the header it gets is made for its resolution."""
    if image.encoding in _MINIMIZED_ENCODINGS:
        return
    if image.encoding in _PLAIN_JPEG_ENCODINGS:
        try:
            width, height = jpeg_size(image.data)
        except RemoteProtocolError as exc:
            raise RemoteProtocolError(f"image {image.image_id}: {exc}") from None
        if (width, height) != (image.width, image.height):
            resolution = RESOLUTION_NAMES.get(image.resolution, "unknown")
            raise RemoteProtocolError(
                f"image {image.image_id}: its JPEG header says {width}x{height}, but its chunks say "
                f"image_resolution {image.resolution} ({resolution}, {image.width}x{image.height})"
            )
        return
    name = _ENCODING_NAMES.get(image.encoding, "unknown")
    raise RemoteProtocolError(
        f"image {image.image_id}: encoding {image.encoding} ({name}) is not supported; "
        "expected JPEGGray(5), JPEGColor(6), JPEGMinimizedGray(8) or JPEGMinimizedColor(9)"
    )


def image_to_jpeg(image: CameraImage) -> bytes:
    """Standard JPEG bytes for a :class:`CameraImage`, at its nominal size.

    JPEGGray/JPEGColor (5/6) already are JPEG files and pass through, once their header
    is found to give the nominal size; the minimized encodings (8/9) are rebuilt with
    :func:`minimized_to_jpeg`. Anything else raises :class:`RemoteProtocolError`
    (see :func:`check_image`).
    """
    check_image(image)
    if image.encoding in _PLAIN_JPEG_ENCODINGS:
        return bytes(image.data)
    return minimized_to_jpeg(image.data, image.width, image.height)


def is_half_width_color(image: CameraImage) -> bool:
    """True if the image is a minimized colour frame coded at half width."""
    return image.encoding in _MINIMIZED_ENCODINGS and len(image.data) > 0 and image.data[0] != 0


def decode_to_array(jpeg: bytes, color_half_width: bool) -> np.ndarray:
    """Decode JPEG bytes to ``uint8`` pixels: ``(H, W)`` for grey, ``(H, W, 3)`` RGB for colour.

    With ``color_half_width`` the decoded image is stretched to twice its width
    (the nominal size of a minimized colour frame).
    Raises :class:`RemoteProtocolError` if the data does not decode.
    """
    data, width, height, channels = decode_to_bytes(jpeg, color_half_width)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return np.frombuffer(data, dtype=np.uint8).reshape(shape)


def coded_size(image: CameraImage) -> Optional[Tuple[int, int]]:
    """(width, height) of the JPEG :func:`image_to_jpeg` makes of a minimized frame (its
    own header, so known without parsing it), or None for other encodings."""
    if image.encoding not in _MINIMIZED_ENCODINGS or not image.data:
        return None
    return (image.width // 2 if image.data[0] != 0 else image.width), image.height


def decode_to_bytes(jpeg: bytes, color_half_width: bool,
                    size: Optional[Tuple[int, int]] = None) -> Tuple[bytes, int, int, int]:
    """Like :func:`decode_to_array`, as (row-major pixel bytes, width, height, channels):
    what a sensor_msgs/Image carries, without an array in between.

    ``size`` (:func:`coded_size`: a minimized frame, grey or, with ``color_half_width``,
    colour) lets libjpeg decode straight into an image of that size, skipping Pillow's
    reading of the JPEG header; data that does not decode that way takes the general
    path, which reports the error."""
    from PIL import Image

    if size is not None:
        mode = "RGB" if color_half_width else "L"
        try:
            im = Image.frombytes(mode, size, jpeg, "jpeg", mode, "")
        except (ValueError, OSError, TypeError, SystemError):
            pass
        else:
            if color_half_width:
                im = im.resize((im.width * 2, im.height), _bilinear(Image))
            return im.tobytes(), im.width, im.height, 1 if mode == "L" else 3
    with _opened(jpeg) as im:
        im.load()
        if im.mode not in ("L", "RGB"):
            im = im.convert("RGB")
        if color_half_width:
            im = im.resize((im.width * 2, im.height), _bilinear(Image))
        return im.tobytes(), im.width, im.height, 1 if im.mode == "L" else 3


def _bilinear(image_module: Any) -> Any:
    """Pillow's bilinear filter: ``Image.Resampling`` came with Pillow 9.1, and Ubuntu
    22.04 (Humble's) has 9.0, where only ``Image.BILINEAR`` is."""
    return getattr(image_module, "Resampling", image_module).BILINEAR


@contextlib.contextmanager
def _opened(jpeg: bytes) -> Iterator[Any]:
    """Pillow's image of JPEG bytes, refused before any pixel is decoded when it claims more
    pixels than any resolution; Pillow's errors on corrupt data, also those of what the
    caller does with the image, become :class:`RemoteProtocolError`."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(jpeg)) as im:
            if im.width * im.height > _MAX_PIXELS:
                raise RemoteProtocolError(
                    f"camera image claims {im.width}x{im.height} pixels, more than any resolution"
                )
            yield im
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise RemoteProtocolError(f"camera image does not decode: {exc}") from exc


def luma_sample(jpeg: bytes, scale: int = 4) -> np.ndarray:
    """The grey values of a JPEG at 1/``scale`` of its size (libjpeg scales while it
    decodes and skips the colour), as a 2-D ``uint8`` array: enough to measure how
    bright an image is. Raises :class:`RemoteProtocolError` if the data does not decode."""
    with _opened(jpeg) as im:
        im.draft("L", (max(1, im.width // scale), max(1, im.height // scale)))
        if im.mode != "L":
            im = im.convert("L")
        return np.asarray(im, dtype=np.uint8)


def encode_jpeg(pixels: np.ndarray, quality: int = 90) -> bytes:
    """Baseline JPEG bytes of ``uint8`` pixels, ``(H, W)`` grey or ``(H, W, 3)`` RGB."""
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=int(quality))
    return out.getvalue()


def image_to_array(image: CameraImage) -> np.ndarray:
    """Pixels of a :class:`CameraImage` at its nominal resolution (see :func:`decode_to_array`)."""
    return decode_to_array(image_to_jpeg(image), is_half_width_color(image))


# --------------------------------------------------------------------------------------------
# Encoder (simulated robot, tests)
# --------------------------------------------------------------------------------------------


def _dct_matrix() -> np.ndarray:
    """Orthonormal 8-point DCT-II; equal to the JPEG forward DCT's scaling."""
    u = np.arange(8)[:, None]
    x = np.arange(8)[None, :]
    d = np.cos((2 * x + 1) * u * np.pi / 16) * np.sqrt(2 / 8)
    d[0, :] = np.sqrt(1 / 8)
    return d


def _fdct_quant_matrix() -> np.ndarray:
    """(64, 64) matrix: flattened 8x8 block -> zigzag-ordered coefficients / quantiser."""
    d = _dct_matrix()
    # coef[u, v] = sum_xy d[u, x] d[v, y] block[x, y] -> row-major kron.
    kron = np.kron(d, d)  # (64 coef, 64 pixels)
    return (kron[_ZIGZAG, :] / _QUANT_ZIGZAG[:, None]).T.astype(np.float64)


_FDCT_QUANT_F32 = _fdct_quant_matrix().astype(np.float32)
# RGB (as a sum of two pixels) -> Y, Cb, Cr (JFIF; chroma centred on 0), as right-multiplied matrix.
_RGB_TO_YCC_HALF = (
    0.5
    * np.array(
        [
            [0.299, 0.587, 0.114],
            [-0.168736, -0.331264, 0.5],
            [0.5, -0.418688, -0.081312],
        ]
    ).T
).astype(np.float32)

# ZRL (16 zeros) prefix for 0..3 repetitions, and its length.
_ZRL_CODE = int(_AC_CODE[0xF0])
_ZRL_LEN = int(_AC_LEN[0xF0])
_ZRL_PREFIX = np.array(
    [
        0,
        _ZRL_CODE,
        (_ZRL_CODE << _ZRL_LEN) | _ZRL_CODE,
        (((_ZRL_CODE << _ZRL_LEN) | _ZRL_CODE) << _ZRL_LEN) | _ZRL_CODE,
    ],
    dtype=np.uint64,
)
_EOB_CODE = int(_AC_CODE[0x00])
_EOB_LEN = int(_AC_LEN[0x00])


_GEMM_ROWS = 16


def _fdct_quantize(blocks: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """(N, 64) level-shifted pixel blocks -> (N, 64) quantised zigzag coefficients (int32).

    Done as a stack of small (16 x 64) products: they stay below OpenBLAS's
    threading threshold, so no worker threads wake up and spin on a small machine.
    """
    n = blocks.shape[0]
    pad = (-n) % _GEMM_ROWS
    if pad:
        blocks = np.concatenate((blocks, np.zeros((pad, 64), dtype=blocks.dtype)))
    coefs = np.matmul(blocks.reshape(-1, _GEMM_ROWS, 64), matrix).reshape(-1, 64)[:n]
    return np.rint(coefs).astype(np.int32)


def _to_blocks(plane: np.ndarray) -> np.ndarray:
    """(H, W) plane, both multiples of 8 -> (H/8, W/8, 64) blocks in row-major pixel order."""
    h, w = plane.shape
    return plane.reshape(h // 8, 8, w // 8, 8).transpose(0, 2, 1, 3).reshape(h // 8, w // 8, 64)


def _magnitude_category(v: np.ndarray) -> np.ndarray:
    """JPEG size category: number of bits of |v| (0 for 0)."""
    return np.frexp(np.abs(v).astype(np.float64))[1].astype(np.int64)


def _extra_bits(v: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The ``size`` low bits JPEG appends after a category: v, or v-1 in ones' complement form."""
    v = v.astype(np.int64)
    return np.where(v < 0, v + (np.int64(1) << size) - 1, v).astype(np.uint64)


def _entropy_code(coefs: np.ndarray, comp_of_block: np.ndarray, ncomp: int) -> bytes:
    """Huffman-code quantised zigzag blocks (N, 64) in scan order; all tables 0/0.

    Returns the scan bytes without stuffing, padded with 1-bits to a byte boundary.
    """
    nblocks = coefs.shape[0]
    # DC: differences against the previous block of the same component.
    dc = coefs[:, 0].astype(np.int64)
    diff = np.empty_like(dc)
    for c in range(ncomp):
        sel = np.nonzero(comp_of_block == c)[0]
        d = dc[sel]
        diff[sel] = np.diff(d, prepend=0)
    dc_size = _magnitude_category(diff)
    dc_len = _DC_LEN[dc_size] + dc_size.astype(np.uint64)
    dc_val = (_DC_CODE[dc_size] << dc_size.astype(np.uint64)) | _extra_bits(diff, dc_size)

    # AC: one token per non-zero coefficient, carrying any ZRL codes in front of it.
    ac = coefs[:, 1:]
    blk, pos = np.nonzero(ac)
    pos = pos + 1
    val = ac[blk, pos - 1].astype(np.int64)
    prev = np.empty_like(pos)
    if pos.size:
        prev[0] = 0
        prev[1:] = pos[:-1]
        first = np.ones(pos.size, dtype=bool)
        first[1:] = blk[1:] != blk[:-1]
        prev[first] = 0
    run = pos - prev - 1
    nzrl = run >> 4
    size = _magnitude_category(val)
    sym = ((run & 15) << 4) | size
    usize = size.astype(np.uint64)
    sym_len = _AC_LEN[sym]
    ac_len = nzrl.astype(np.uint64) * np.uint64(_ZRL_LEN) + sym_len + usize
    ac_val = (((_ZRL_PREFIX[nzrl] << sym_len) | _AC_CODE[sym]) << usize) | _extra_bits(val, size)

    # EOB unless the block's last non-zero coefficient is the 63rd.
    nnz = np.bincount(blk, minlength=nblocks)
    needs_eob = ac[:, 62] == 0

    # Token layout: per block DC, its AC tokens, then EOB (if any).
    per_block = 1 + nnz + needs_eob
    start = np.cumsum(per_block) - per_block
    ntok = int(per_block.sum())
    tok_len = np.empty(ntok, dtype=np.uint64)
    tok_val = np.empty(ntok, dtype=np.uint64)
    tok_len[start] = dc_len
    tok_val[start] = dc_val
    if pos.size:
        first_idx = np.cumsum(nnz) - nnz  # index in the AC arrays of each block's first token
        rank = np.arange(pos.size) - first_idx[blk]
        at = start[blk] + 1 + rank
        tok_len[at] = ac_len
        tok_val[at] = ac_val
    eob_at = (start + per_block - 1)[needs_eob]
    tok_len[eob_at] = _EOB_LEN
    tok_val[eob_at] = _EOB_CODE

    # Bit packing: expand each token into its bits, most significant first.
    lens = tok_len.astype(np.int64)
    total = int(lens.sum())
    tok_of_bit = np.repeat(np.arange(ntok), lens)
    bit_start = np.cumsum(lens) - lens
    shift = (bit_start + lens - 1)[tok_of_bit] - np.arange(total)
    bits = ((tok_val[tok_of_bit] >> shift.astype(np.uint64)) & np.uint64(1)).astype(np.uint8)
    pad = (-total) % 8
    if pad:
        bits = np.concatenate((bits, np.ones(pad, dtype=np.uint8)))
    return np.packbits(bits).tobytes()


def _pad_edges(plane: np.ndarray, mult_h: int, mult_w: int) -> np.ndarray:
    h, w = plane.shape[:2]
    ph, pw = (-h) % mult_h, (-w) % mult_w
    if ph or pw:
        pad = ((0, ph), (0, pw)) + ((0, 0),) * (plane.ndim - 2)
        plane = np.pad(plane, pad, mode="edge")
    return plane


def _encode_gray_numpy(gray: np.ndarray) -> bytes:
    plane = _pad_edges(gray.astype(np.float32) - 128.0, 8, 8)
    coefs = _fdct_quantize(_to_blocks(plane).reshape(-1, 64), _FDCT_QUANT_F32)
    return _entropy_code(coefs, np.zeros(coefs.shape[0], dtype=np.int8), 1)


def _encode_color_numpy(rgb: np.ndarray) -> bytes:
    """Scan data of a colour frame: RGB at nominal size -> half width, YCbCr, Y 2x1, chroma 1x1."""
    # Half width: mean of each horizontal pixel pair.
    pair_sum = rgb[:, 0::2].astype(np.uint16) + rgb[:, 1::2]
    half = _pad_edges(pair_sum, 8, 16).astype(np.float32)
    # JFIF YCbCr (level-shifted by -128; the 0.5 folds in the pair mean).
    ycc = half @ _RGB_TO_YCC_HALF
    ycc[..., 0] -= 128.0
    y = ycc[..., 0]
    # Chroma: one sample per two luma samples horizontally (mean of the pair).
    chroma = (ycc[:, 0::2, 1:] + ycc[:, 1::2, 1:]) * 0.5
    yb = _to_blocks(y)  # (R, 2C, 64)
    rows, ycols = yb.shape[:2]
    mcus = ycols // 2
    ordered = np.concatenate(
        (
            yb.reshape(rows, mcus, 2, 64),
            _to_blocks(chroma[..., 0])[:, :, None, :],
            _to_blocks(chroma[..., 1])[:, :, None, :],
        ),
        axis=2,
    ).reshape(-1, 64)
    coefs = _fdct_quantize(ordered, _FDCT_QUANT_F32)
    comp = np.tile(np.array([0, 0, 1, 2], dtype=np.int8), rows * mcus)
    return _entropy_code(coefs, comp, 3)


def _parse_pillow_gray(jpeg: bytes) -> bytes | None:
    """Unstuffed scan data of a Pillow grey JPEG if its tables are exactly ours, else None."""
    if jpeg[:2] != b"\xff\xd8" or jpeg[-2:] != b"\xff\xd9":
        return None
    i = 2
    quant: dict[int, bytes] = {}
    huff: dict[int, tuple[bytes, bytes]] = {}
    sof = None
    while i + 4 <= len(jpeg):
        if jpeg[i] != 0xFF:
            return None
        marker = jpeg[i + 1]
        (length,) = struct.unpack_from(">H", jpeg, i + 2)
        body = jpeg[i + 4 : i + 2 + length]
        if marker == 0xDB:
            j = 0
            while j < len(body):
                if body[j] >> 4:  # 16-bit table
                    return None
                quant[body[j] & 15] = body[j + 1 : j + 65]
                j += 65
        elif marker == 0xC4:
            j = 0
            while j < len(body):
                tc_th = body[j]
                counts = body[j + 1 : j + 17]
                n = sum(counts)
                huff[tc_th] = (counts, body[j + 17 : j + 17 + n])
                j += 17 + n
        elif marker == 0xC0:
            sof = body
        elif 0xC1 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return None  # not baseline
        elif marker == 0xDD:
            return None  # restart interval
        elif marker == 0xDA:
            if body != bytes([1, body[1], 0x00, 0, 63, 0]) or sof is None:
                return None
            if sof[5] != 1 or sof[7] != 0x11 or quant.get(sof[8]) != bytes(_QUANT_ZIGZAG.astype(np.uint8)):
                return None
            if huff.get(0x00) != (_DC_BITS, _DC_VALUES) or huff.get(0x10) != (_AC_BITS, _AC_VALUES):
                return None
            scan = jpeg[i + 2 + length : -2]
            if b"\xff" in scan.replace(b"\xff\x00", b""):
                return None  # markers (e.g. RST) inside the scan
            return scan.replace(b"\xff\x00", b"\xff")
        i += 2 + length
    return None


def _encode_gray_pillow(gray: np.ndarray) -> bytes | None:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(gray, "L").save(buf, "JPEG", quality=50, optimize=False, progressive=False)
    return _parse_pillow_gray(buf.getvalue())


def encode_minimized(pixels: np.ndarray, *, use_pillow: bool = True, pad_to_multiple: int = 1) -> bytes:
    """Encode pixels into the robot's minimized JPEG format (quality 50).

    ``pixels``: ``uint8`` array, ``(H, W)`` grey or ``(H, W, 3)`` RGB, at the
    nominal resolution.  Colour frames are coded at half width (W must be even).
    Grey frames go through Pillow when ``use_pillow`` and Pillow's tables match
    the fixed ones (checked on every call), else through this module's numpy
    encoder, which also codes all colour frames.

    The result is the flag byte, the unstuffed scan data, one 0x00 byte if the
    scan ends in 0xFF (see module docstring) and 0xFF padding up to a multiple of
    ``pad_to_multiple`` bytes.
    """
    arr = np.asarray(pixels)
    if arr.dtype != np.uint8:
        raise LocalProtocolError(f"pixels must be uint8, got {arr.dtype}")
    if pad_to_multiple < 1:
        raise LocalProtocolError("pad_to_multiple must be >= 1")
    if arr.ndim == 2 and arr.shape[0] > 0 and arr.shape[1] > 0:
        color = False
        scan = _encode_gray_pillow(np.ascontiguousarray(arr)) if use_pillow else None
        if scan is None:
            scan = _encode_gray_numpy(arr)
    elif arr.ndim == 3 and arr.shape[2] == 3 and arr.shape[0] > 0 and arr.shape[1] >= 2:
        if arr.shape[1] % 2:
            raise LocalProtocolError(f"colour frames need an even width, got {arr.shape[1]}")
        color = True
        scan = _encode_color_numpy(arr)
    else:
        raise LocalProtocolError(f"pixels must be (H, W) or (H, W, 3), got shape {arr.shape}")
    out = bytearray(b"\x01" if color else b"\x00")
    out += scan
    if scan.endswith(b"\xff"):
        out.append(0x00)
    pad = (-len(out)) % pad_to_multiple
    out += b"\xff" * pad
    return bytes(out)


def split_into_chunks(payload: bytes, max_chunk: int = MAX_CHUNK_DATA) -> list[bytes]:
    """Cut a payload into ``ImageChunk`` data slices of at most ``max_chunk`` bytes (1..255 slices)."""
    if max_chunk < 1:
        raise LocalProtocolError("max_chunk must be >= 1")
    chunks = [bytes(payload[i : i + max_chunk]) for i in range(0, len(payload), max_chunk)] or [b""]
    if len(chunks) > 255:
        raise LocalProtocolError(f"payload of {len(payload)} B needs {len(chunks)} chunks; at most 255 fit a u8 count")
    return chunks
