"""Layouts of the robot's non-volatile storage entries, and reading them back.

The robot keeps factory data (camera calibration, IMU info, ...) in NV storage.
An engine reads an entry with ``NvStorageOp(tag, length, op=NVOP_READ)``; the
robot answers with one or more ``NvStorageOpResult`` messages: ``NV_MORE`` for
every part but the last, ``NV_OKAY`` for the last (``length`` is the entry's total
size), or an error result such as ``NV_NOT_FOUND``.
:class:`NvReadAssembler` joins the parts.

NVEntry_CameraCalib (tag 0x80000001), little-endian, 56 bytes::

    focal_length_x f32, focal_length_y f32, center_x f32, center_y f32, skew f32,
    image_height u16, image_width u16, distortion f32[8]

Pixels; the distortion coefficients are in OpenCV order (k1, k2, p1, p2, k3, k4,
k5, k6). :func:`decode_camera_calibration` parses it.

Pure: no sockets, threads or clocks.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from .errors import RemoteProtocolError

__all__ = [
    "CAMERA_CALIB_FORMAT",
    "CAMERA_CALIB_SIZE",
    "CAMERA_CALIB_NUM_DISTORTION",
    "NV_TAG_CAMERA_CALIB",
    "CameraCalibration",
    "encode_camera_calibration",
    "decode_camera_calibration",
    "NvReadResult",
    "NvReadAssembler",
]

#: struct format of NVEntry_CameraCalib
CAMERA_CALIB_FORMAT = "<5f2H8f"
CAMERA_CALIB_SIZE = struct.calcsize(CAMERA_CALIB_FORMAT)
CAMERA_CALIB_NUM_DISTORTION = 8
#: NvEntryTag.NVEntry_CameraCalib
NV_TAG_CAMERA_CALIB = 0x80000001
_CALIB = struct.Struct(CAMERA_CALIB_FORMAT)

# NvResult values used here (the protocol's NvResult enumeration)
_NV_OKAY = 0
_NV_MORE = 3


@dataclass(frozen=True)
class CameraCalibration:
    """Pinhole intrinsics of the camera at ``image_width`` x ``image_height`` pixels."""

    focal_length_x: float
    focal_length_y: float
    center_x: float
    center_y: float
    skew: float = 0.0
    image_height: int = 240
    image_width: int = 320
    distortion: Tuple[float, ...] = (0.0,) * CAMERA_CALIB_NUM_DISTORTION


def encode_camera_calibration(calib: CameraCalibration) -> bytes:
    """The 56-byte NVEntry_CameraCalib blob (missing distortion terms are 0)."""
    dist = tuple(calib.distortion) + (0.0,) * (CAMERA_CALIB_NUM_DISTORTION - len(calib.distortion))
    return _CALIB.pack(calib.focal_length_x, calib.focal_length_y, calib.center_x, calib.center_y,
                       calib.skew, calib.image_height, calib.image_width,
                       *dist[:CAMERA_CALIB_NUM_DISTORTION])


def decode_camera_calibration(data: bytes) -> CameraCalibration:
    """Parse an NVEntry_CameraCalib blob (raises RemoteProtocolError if too short).
    Bytes after the first 56 are ignored."""
    if len(data) < CAMERA_CALIB_SIZE:
        raise RemoteProtocolError(
            f"camera calibration of {len(data)} bytes, expected {CAMERA_CALIB_SIZE}")
    v = _CALIB.unpack_from(data, 0)
    return CameraCalibration(v[0], v[1], v[2], v[3], v[4], v[5], v[6], tuple(v[7:]))


@dataclass(frozen=True)
class NvReadResult:
    """A finished read: ``data`` on success, else ``result`` names the failure."""

    tag: int
    ok: bool
    data: bytes
    result: int


class NvReadAssembler:
    """Joins the ``NvStorageOpResult`` parts of NV reads, per tag.

    Feed every ``NvStorageOpResult`` of a read to :meth:`push`; it returns an
    :class:`NvReadResult` when the read finished (``NV_OKAY`` or an error), else
    ``None``. Results of other operations (writes, erases) are ignored.

    What it holds is bounded, whatever the robot (or a forger) sends: at most
    ``max_tags`` reads in progress (a part of one more forgets the oldest) and
    ``max_bytes`` in all (a part beyond that forgets its read); either raises
    :class:`RemoteProtocolError` saying what was dropped.
    """

    def __init__(self, max_bytes: int = 1 << 20, max_tags: int = 8) -> None:
        self.max_bytes = max_bytes
        self.max_tags = max_tags
        self._parts: Dict[int, bytearray] = {}
        self._total = 0

    def reset(self) -> None:
        self._parts.clear()
        self._total = 0

    @property
    def held_bytes(self) -> int:
        """Bytes of the reads in progress."""
        return self._total

    def _forget(self, tag: int) -> int:
        dropped = len(self._parts.pop(tag))
        self._total -= dropped
        return dropped

    def push(self, message) -> Optional[NvReadResult]:
        if int(message.op) != 0:  # NVOP_READ
            return None
        tag = int(message.tag)
        result = int(message.result)
        if result == _NV_MORE:
            evicted = None
            if tag not in self._parts and len(self._parts) >= self.max_tags:
                evicted = next(iter(self._parts))
                evicted_bytes = self._forget(evicted)
            buf = self._parts.setdefault(tag, bytearray())
            data = bytes(message.data)
            buf += data
            self._total += len(data)
            if self._total > self.max_bytes:
                self._forget(tag)
                raise RemoteProtocolError(f"NV reads in progress exceed {self.max_bytes} bytes: "
                                          f"the read of entry 0x{tag:08x} was dropped")
            if evicted is not None:
                raise RemoteProtocolError(f"more than {self.max_tags} NV reads in progress: the "
                                          f"oldest, of entry 0x{evicted:08x} ({evicted_bytes} bytes "
                                          "so far), was dropped")
            return None
        if tag in self._parts:
            self._total -= len(self._parts[tag])
        buf = self._parts.pop(tag, bytearray())
        if result == _NV_OKAY:
            buf += bytes(message.data)
            return NvReadResult(tag, True, bytes(buf), result)
        return NvReadResult(tag, False, b"", result)
