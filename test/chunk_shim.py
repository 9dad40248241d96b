"""A stand-in for the stdlib module ``chunk`` (removed in Python 3.13), for tests only.

pycozmo 0.8.0, the test-only reference implementation, does
``from chunk import Chunk`` in ``pycozmo.audiokinetic.soundbank`` (imported by
``import pycozmo``), so without ``chunk`` the reference cannot even be imported
and every conformance test against it would be skipped. pycozmo reads Wwise
sound banks with it: ``Chunk(f, bigendian=False, align=False)``, then
``getname()``, ``getsize()``, ``read(n)``, ``skip()``, and ``EOFError`` at the
end of the file. :class:`Chunk` provides that interface (and ``tell``,
``close``, ``isatty``) for IFF-style chunks: a 4-byte id, a 4-byte size, the
data, and, when aligned, one pad byte after odd-sized data.

:func:`install` puts a module holding it into ``sys.modules`` under the name
``chunk``, only when no real ``chunk`` module can be imported. test/conftest.py
calls it before any test module imports pycozmo. Nothing in the package uses it.
"""

from __future__ import annotations

import importlib.util
import struct
import sys
import types
from typing import BinaryIO

__all__ = ["Chunk", "install"]


class Chunk:
    """One chunk of an IFF-style file, read from the current position of ``file``.

    Raises :class:`EOFError` when the file ends before a whole chunk header (the
    way readers find the end of a file of chunks).
    """

    def __init__(self, file: BinaryIO, align: bool = True, bigendian: bool = True,
                 inclheader: bool = False) -> None:
        self.file = file
        self.align = align
        self.closed = False
        header = file.read(8)
        if len(header) < 8:
            raise EOFError("no complete chunk header before the end of the file")
        self.chunkname = bytes(header[:4])
        (size,) = struct.unpack(">L" if bigendian else "<L", header[4:])
        self.chunksize = size - 8 if inclheader else size
        self.size_read = 0

    def getname(self) -> bytes:
        return self.chunkname

    def getsize(self) -> int:
        return self.chunksize

    def isatty(self) -> bool:
        self._check_open()
        return False

    def tell(self) -> int:
        """Bytes of this chunk's data read so far."""
        self._check_open()
        return self.size_read

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed chunk")

    def _padded_size(self) -> int:
        return self.chunksize + (1 if self.align and self.chunksize % 2 else 0)

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of the chunk's data (all that is left when negative)."""
        self._check_open()
        left = self.chunksize - self.size_read
        if left <= 0:
            return b""
        want = left if size < 0 else min(size, left)
        data = self.file.read(want)
        self.size_read += len(data)
        if self.size_read == self.chunksize and self._padded_size() > self.chunksize:
            self.size_read += len(self.file.read(1))   # the pad byte is not data
        return data

    def skip(self) -> None:
        """Move the file to the end of this chunk (past its pad byte when aligned)."""
        self._check_open()
        rest = self._padded_size() - self.size_read
        if rest <= 0:
            return
        try:
            self.file.seek(rest, 1)
            self.size_read += rest
            return
        except (AttributeError, OSError):
            pass                                        # not seekable: read through it
        while rest > 0:
            got = len(self.file.read(min(rest, 65536)))
            if not got:
                raise EOFError("the file ends inside the chunk")
            rest -= got
            self.size_read += got

    def close(self) -> None:
        if not self.closed:
            try:
                self.skip()
            finally:
                self.closed = True


def install() -> bool:
    """Provide ``chunk`` through :data:`sys.modules` if it cannot be imported; True if installed."""
    if sys.modules.get("chunk") is not None or importlib.util.find_spec("chunk") is not None:
        return False
    module = types.ModuleType("chunk", "Test-only stand-in for the stdlib chunk module (test/chunk_shim.py).")
    module.Chunk = Chunk
    module.__all__ = ["Chunk"]
    sys.modules["chunk"] = module
    return True
