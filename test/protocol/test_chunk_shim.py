"""test/chunk_shim.py: the test-only stand-in for the stdlib ``chunk`` module that
keeps pycozmo (the reference oracle) importable on Python 3.13."""

from __future__ import annotations

import importlib
import io
import random
import struct
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import chunk_shim
from dependencies import require


def chunk_bytes(name: bytes, data: bytes, bigendian: bool = True, align: bool = True,
                inclheader: bool = False) -> bytes:
    size = len(data) + (8 if inclheader else 0)
    pad = b"\0" if align and len(data) % 2 else b""
    return name + struct.pack(">L" if bigendian else "<L", size) + data + pad


def walk(chunk_cls, stream: bytes, reads: list[int], **options) -> list:
    """Everything a reader can observe while going through a file of chunks."""
    f = io.BytesIO(stream)
    seen = []
    while True:
        try:
            c = chunk_cls(f, **options)
        except EOFError:
            seen.append(("eof", f.tell()))
            return seen
        seen.append((c.getname(), c.getsize(), f.tell()))
        for n in reads:
            seen.append((c.read(n), c.tell(), f.tell()))
        c.skip()
        seen.append(("skipped", c.tell(), f.tell()))
        c.close()
        with pytest.raises(ValueError):
            c.read(1)


def random_stream(rng: random.Random, **options) -> bytes:
    names = [b"BKHD", b"DIDX", b"DATA", b"HIRC", b"INIT"]
    return b"".join(chunk_bytes(rng.choice(names), rng.randbytes(rng.randint(0, 41)), **options)
                    for _ in range(rng.randint(0, 6)))


@pytest.mark.parametrize("options", [
    dict(bigendian=False, align=False),                    # what pycozmo uses
    dict(bigendian=True, align=True),
    dict(bigendian=False, align=True, inclheader=True),
])
def test_reads_chunk_files(options):
    rng = random.Random(7)
    for _ in range(50):
        stream = random_stream(rng, **options)
        reads = [rng.choice([-1, 0, 1, 3, 4, 12, 100]) for _ in range(rng.randint(0, 4))]
        seen = walk(chunk_shim.Chunk, stream, reads, **options)
        assert seen[-1] == ("eof", len(stream))
    data = bytes(range(13))
    f = io.BytesIO(chunk_bytes(b"ABCD", data, **options) + b"tail")
    c = chunk_shim.Chunk(f, **options)
    assert (c.getname(), c.getsize()) == (b"ABCD", 13)
    assert c.read(4) + c.read(100) == data and c.read() == b""
    assert f.read() == b"tail"                               # the pad byte, if any, was consumed


def test_matches_the_stdlib_module_where_it_exists():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # deprecated in 3.11 and 3.12
        try:
            stdlib = importlib.import_module("chunk")
        except ImportError:
            pytest.skip("no stdlib chunk module on this Python (3.13+): nothing to compare with")
    if stdlib.Chunk is chunk_shim.Chunk:
        pytest.skip("the shim is installed: no stdlib chunk module to compare with")
    rng = random.Random(3)
    for options in (dict(bigendian=False, align=False), dict(bigendian=True, align=True),
                    dict(bigendian=True, align=False, inclheader=True)):
        for _ in range(100):
            stream = random_stream(rng, **options)
            if rng.random() < 0.3:
                stream = stream[:rng.randint(0, len(stream))]      # truncated files too
            reads = [rng.choice([-1, 0, 1, 2, 5, 16, 64]) for _ in range(rng.randint(0, 4))]
            assert walk(chunk_shim.Chunk, stream, reads, **options) == \
                walk(stdlib.Chunk, stream, reads, **options)


def soundbank() -> bytes:
    """A minimal Wwise sound bank: header, data index, data and one sound object."""
    header = struct.pack("<LL", 120, 0x1234) + bytes(24)
    index = struct.pack("<LLL", 77, 0, 5)
    sfx = struct.pack("<LBLLL", 0, 0, 77, 5, 0)
    hirc = struct.pack("<L", 1) + struct.pack("<BLL", 2, len(sfx) + 4, 55) + sfx
    opts = dict(bigendian=False, align=False)
    return (chunk_bytes(b"BKHD", header, **opts) + chunk_bytes(b"DIDX", index, **opts)
            + chunk_bytes(b"DATA", b"abcde", **opts) + chunk_bytes(b"STMG", b"xyz", **opts)
            + chunk_bytes(b"HIRC", hirc, **opts))


def test_pycozmo_reads_a_sound_bank_through_the_shim(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        soundbank_module = require("pycozmo.audiokinetic.soundbank")
    monkeypatch.setattr(soundbank_module, "Chunk", chunk_shim.Chunk)
    data = soundbank()
    bank = soundbank_module.SoundBankReader({}).load_file(io.BytesIO(data), "test.bnk")
    assert (bank.version, bank.id) == (120, 0x1234)
    assert data[bank.data_offset:bank.data_offset + 5] == b"abcde"
    assert set(bank.objs) == {77, 55}
    assert (bank.objs[77].offset, bank.objs[77].length) == (0, 5)
    assert bank.objs[55].file_id == 77


def test_install_makes_pycozmo_importable_without_the_stdlib_module():
    """As on Python 3.13: ``chunk`` cannot be imported; after install() pycozmo can."""
    require("pycozmo")
    script = textwrap.dedent("""
        import sys
        sys.modules["chunk"] = None          # 'import chunk' now fails, as on Python 3.13
        try:
            import chunk
        except ImportError:
            pass
        else:
            raise SystemExit("chunk still importable")
        import chunk_shim
        assert chunk_shim.install() is True
        assert chunk_shim.install() is False  # once is enough
        import pycozmo
        from pycozmo.audiokinetic import soundbank
        assert soundbank.Chunk is chunk_shim.Chunk
        print("ok", pycozmo.__version__)
    """)
    out = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", script],
                         cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "0.8.0"]


def test_install_leaves_a_real_module_alone():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            importlib.import_module("chunk")
        except ImportError:
            pytest.skip("no stdlib chunk module on this Python")
    before = sys.modules.get("chunk")
    assert chunk_shim.install() is False
    assert sys.modules.get("chunk") is before
