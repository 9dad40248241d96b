"""Every benchmark script under bench/ (and udp_tap.py, a helper bench_driver starts, which
took --help for its port and died) answers --help with its usage and runs nothing: no
simulator, no driver, docs/benchmarks.md untouched (a benchmark takes minutes and rewrites
its block there); and every one takes --no-docs, as docs/benchmarks.md says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py")
                 if p.name.startswith(("bench_", "fuzz_", "stop_")))
#: helpers a benchmark starts that can be run by hand: --help too (not --no-docs: they write nothing)
HELPERS = [ROOT / "bench" / "udp_tap.py"]


def test_there_are_benchmarks():
    assert len(SCRIPTS) >= 10, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS + HELPERS, ids=lambda p: p.name)
def test_help_prints_usage_and_runs_nothing(script):
    docs = ROOT / "docs" / "benchmarks.md"
    before = docs.read_bytes()
    result = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                            text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:"), result.stdout[:300]
    assert docs.read_bytes() == before


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_docs_is_taken_by_every_benchmark(script):
    """--no-docs beside an option the script does not know: the usage error names only that
    one (the script's parser never saw --no-docs), and nothing runs."""
    docs = ROOT / "docs" / "benchmarks.md"
    before = docs.read_bytes()
    result = subprocess.run([sys.executable, str(script), "--no-docs", "--no-such-option"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    error = [line for line in result.stderr.splitlines() if "error:" in line]
    assert error and "--no-such-option" in error[-1] and "--no-docs" not in error[-1], result.stderr
    assert docs.read_bytes() == before


def test_the_benchmarks_import_beside_a_chunk_stand_in_without_a_spec():
    """The tests put a stand-in for the stdlib module chunk into sys.modules where Python
    has none (3.13 on; test/chunk_shim.py), a module without a __spec__. bench/_common.py
    asked importlib.util.find_spec("chunk") whether to put its own stand-in on the path,
    which raises ValueError for such a module: on Python 3.13, test_stack_runs could not
    import bench/stack_runs. A process where chunk is such a module imports _common, and
    its child processes still find a chunk."""
    code = ("import sys, types, subprocess\n"
            "sys.modules['chunk'] = types.ModuleType('chunk')\n"
            f"sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
            "import _common\n"
            "print(subprocess.run([sys.executable, '-c', 'import chunk; print(chunk.Chunk)'],"
            " capture_output=True, text=True).stdout.strip())\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "Chunk" in run.stdout, run.stdout


#: the benchmarks the README quotes: they write their block there too
README_WRITERS = [p for p in SCRIPTS if 'docs=ROOT / "README.md"' in p.read_text()]


def test_some_benchmarks_write_the_readme():
    assert {p.name for p in README_WRITERS} >= {"bench_driver.py", "bench_scale.py"}, README_WRITERS


@pytest.mark.parametrize("script", README_WRITERS, ids=lambda p: p.name)
def test_the_help_of_a_benchmark_the_readme_quotes_names_both_pages(script):
    """bench_driver's --help said that --no-docs spares docs/benchmarks.md, not that it
    spares README.md too, which the script also writes."""
    result = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                            text=True, timeout=60, cwd=ROOT)
    text = " ".join(result.stdout.split())
    assert "--no-docs" in text and "docs/benchmarks.md" in text and "README.md" in text, text
