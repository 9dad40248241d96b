"""Every benchmark script under bench/ answers --help with its usage and runs nothing: no
simulator, no driver, docs/benchmarks.md untouched (a benchmark takes minutes and rewrites
its block there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py")
                 if p.name.startswith(("bench_", "fuzz_", "stop_")))


def test_there_are_benchmarks():
    assert len(SCRIPTS) >= 10, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_prints_usage_and_runs_nothing(script):
    docs = ROOT / "docs" / "benchmarks.md"
    before = docs.read_bytes()
    result = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                            text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:"), result.stdout[:300]
    assert docs.read_bytes() == before
