"""Benchmark of an audio/pcm stream's resampling to 22 320 Hz, per 0.1 s chunk, at common and odd rates.

Run:  PYTHONPATH=. python bench/bench_resample.py [--quick] [--against REV]

The driver resamples each ``audio/pcm`` chunk on the robot client's I/O thread, which also
paces the face and the robot's link at 30 Hz (33 ms a tick): what one chunk costs there is
the time it holds the thread. Per sample rate, the table gives the median and 90th
percentile (ms) of ``StreamResampler.process`` on a 0.1 s chunk of a stream going on
(after one warm-up chunk), and the first chunk of the first stream at that rate (the
filter's weights built: median of 3, each with the weight tables dropped first).
``--against REV`` adds the same figures for ``cozmo_driver/protocol/audio.py`` of the
git revision REV (loaded beside the current one). Numbers only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import subprocess
import sys
import time
from types import ModuleType
from typing import List, Optional

import numpy as np

from _common import ROOT, bench_report, measure, table

from cozmo_driver.protocol import audio

RATES = (44099, 44100, 48000, 47999, 22050, 16000, 8000, 8001)
CHUNK_S = 0.1


def audio_at(rev: str) -> ModuleType:
    """cozmo_driver/protocol/audio.py as it was at git revision ``rev``, as a module of its own."""
    source = subprocess.run(["git", "show", f"{rev}:cozmo_driver/protocol/audio.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader("cozmo_driver.protocol._audio_at_rev", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "cozmo_driver.protocol"
    sys.modules[spec.name] = module  # dataclasses look their module up there
    exec(compile(source, f"{rev}:cozmo_driver/protocol/audio.py", "exec"), module.__dict__)
    return module


def drop_tables(module: ModuleType) -> None:
    """Forget the weight tables ``module`` built (its caches), as in a fresh driver."""
    for name in ("_phase_table", "_interpolated_table"):
        cached = getattr(module, name, None)
        if cached is not None:
            cached.cache_clear()


def per_chunk(module: ModuleType, rate: int, reps: int, secs: float) -> List[float]:
    """[median, p90, first chunk] (ms) of one 0.1 s chunk at ``rate`` through ``module``'s
    StreamResampler."""
    rng = np.random.default_rng(rate)
    chunk = (rng.standard_normal(int(rate * CHUNK_S)) * 4000).astype(np.int16)
    firsts = []
    for _ in range(3):
        drop_tables(module)
        fresh = module.StreamResampler(rate, audio.SAMPLE_RATE)
        t0 = time.perf_counter()
        fresh.process(chunk)
        firsts.append(time.perf_counter() - t0)
    stream = module.StreamResampler(rate, audio.SAMPLE_RATE)
    median, p90, _ = measure(lambda: stream.process(chunk), reps, secs)
    return [median / 1e3, p90 / 1e3, statistics.median(firsts) * 1e3]


def weights(rate: int) -> str:
    """Where the current code takes the filter's weights at ``rate`` from."""
    up = audio.SAMPLE_RATE // math.gcd(rate, audio.SAMPLE_RATE)
    return f"{up} phases, " + ("table of them" if up <= audio._TABLE_PHASES
                               else f"{audio._TABLE_PHASES}-phase table interpolated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--against", metavar="REV", help="also measure audio.py of this git revision")
    args = parser.parse_args()
    reps, secs = (10, 0.2) if args.quick else (50, 1.0)
    old: Optional[ModuleType] = audio_at(args.against) if args.against else None

    header = ["rate (Hz)", "weights", "chunk median", "chunk p90", "first chunk"]
    if old is not None:
        header += [f"{args.against}: chunk median", "chunk p90", "first chunk"]
    rows = []
    for rate in RATES:
        figures = per_chunk(audio, rate, reps, secs)
        if old is not None:
            figures += per_chunk(old, rate, reps, secs)
        rows.append([str(rate), weights(rate)] + [f"{v:.2f}" for v in figures])
        print(f"{rate} Hz: " + " ".join(f"{v:.2f}" for v in figures) + " ms", flush=True)
    table("audio/pcm: resampling one 0.1 s chunk to 22 320 Hz (ms; the I/O thread's tick is 33 ms)",
          header, rows)


if __name__ == "__main__":
    with bench_report("bench_resample"):
        main()
