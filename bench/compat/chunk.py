"""The stdlib module ``chunk`` for pycozmo, the benchmarks' reference, on Python 3.13 and
later, which removed it: test/chunk_shim.py's ``Chunk`` (tested against the stdlib's).
bench/_common.py puts this directory on the path of the benchmark and of the Python
processes it starts only where no ``chunk`` can be imported."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_cozmo_chunk_shim", Path(__file__).resolve().parents[2] / "test" / "chunk_shim.py")
_shim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shim)

Chunk = _shim.Chunk
__all__ = ["Chunk"]
