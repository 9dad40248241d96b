"""The simulated Cozmo's NV storage: an in-memory store answering NvStorageOp.

:class:`NvStorage` keeps entries by tag (pre-filled with a camera calibration
that matches :mod:`cozmo_driver.sim.world`'s renderer, laid out as
:data:`~cozmo_driver.protocol.nvstorage.CAMERA_CALIB_FORMAT`). Writes longer than
one frame arrive in parts and are answered NV_MORE until complete; reads answer
with parts of at most :data:`NV_CHUNK_BYTES` (see :mod:`cozmo_driver.sim.model`'s
docstring for the conventions). The store survives reboots; a part-written entry
does not survive the connection.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional

from ..protocol import messages as msgs
from ..protocol.nvstorage import CameraCalibration, encode_camera_calibration
from .firmware import Firmware

__all__ = ["NvStorage", "NV_CHUNK_BYTES", "default_camera_calibration"]

#: largest data part of one NvStorageOpResult (it must fit one frame)
NV_CHUNK_BYTES = 1000

_NvOp = msgs.ENUMS["NvOperation"]
_NvResult = msgs.ENUMS["NvResult"]
_NvTag = msgs.ENUMS["NvEntryTag"]


def default_camera_calibration() -> CameraCalibration:
    """The calibration that matches :mod:`cozmo_driver.sim.world`'s renderer at QVGA."""
    try:
        from .world import camera_intrinsics
        fx, fy, cx, cy = camera_intrinsics(320, 240)
    except ImportError:  # the renderer is optional for the model
        fx = fy = 160.0 / math.tan(math.radians(29.0))
        cx, cy = 160.0, 120.0
    return CameraCalibration(fx, fy, cx, cy, 0.0, 240, 320)


class NvStorage:
    """Tag -> bytes, and the entries being written in parts."""

    def __init__(self, fw: Firmware) -> None:
        self.fw = fw
        self.store: Dict[int, bytes] = {
            int(_NvTag.NVEntry_CameraCalib): encode_camera_calibration(default_camera_calibration()),
        }
        self.reset_link()

    def reset_link(self) -> None:
        self._pending_writes: Dict[int, bytearray] = {}

    def handlers(self) -> Dict[str, Callable[[Any, float], None]]:
        return {"NvStorageOp": self._on_NvStorageOp}

    def _on_NvStorageOp(self, m: Any, now: float) -> None:
        op = int(m.op)

        def reply(result: Any, payload: bytes = b"", length: Optional[int] = None) -> None:
            self.fw.emit(msgs.NvStorageOpResult(tag=m.tag, length=len(payload) if length is None else length,
                                                op=m.op, result=result, data=payload))

        if op == _NvOp.NVOP_READ:
            self._read(int(m.tag), int(m.length), reply)
        elif op == _NvOp.NVOP_WRITE:
            self._write(int(m.tag), int(m.length), bytes(m.data), reply)
        elif op == _NvOp.NVOP_ERASE:
            if self.store.pop(int(m.tag), None) is None:
                reply(_NvResult.NV_NOT_FOUND, b"", 0)
            else:
                reply(_NvResult.NV_OKAY, b"", 0)
        elif op == _NvOp.NVOP_WIPEALL:
            store = self.store
            for key in [k for k in store if k < 0x80000000]:  # factory entries survive
                del store[key]
            reply(_NvResult.NV_OKAY, b"", 0)
        else:
            reply(_NvResult.NV_BAD_ARGS, b"", 0)

    def _read(self, tag: int, want: int, reply: Callable[..., None]) -> None:
        entry = self.store.get(tag)
        if entry is None:
            reply(_NvResult.NV_NOT_FOUND, b"", 0)
            return
        body = entry[:want] if want > 0 else entry
        parts = [body[i:i + NV_CHUNK_BYTES] for i in range(0, len(body), NV_CHUNK_BYTES)] or [b""]
        for k, part in enumerate(parts):
            last = k == len(parts) - 1
            reply(_NvResult.NV_OKAY if last else _NvResult.NV_MORE, part, len(entry))

    def _write(self, tag: int, total: int, data: bytes, reply: Callable[..., None]) -> None:
        store = self.store
        pending = self._pending_writes.get(tag)
        if pending is None and (total <= 0 or total <= len(data)):
            store[tag] = data if total <= 0 else data[:total]
            reply(_NvResult.NV_OKAY, b"", len(store[tag]))
            return
        buf = self._pending_writes.setdefault(tag, bytearray())
        buf += data
        if len(buf) >= total:
            store[tag] = bytes(buf[:total])
            del self._pending_writes[tag]
            reply(_NvResult.NV_OKAY, b"", total)
        else:
            reply(_NvResult.NV_MORE, b"", len(buf))
