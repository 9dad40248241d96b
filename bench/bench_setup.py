"""Set-up time: a fresh `./dev setup` of this checkout, step by step, with empty caches.

Run from the repository root:

    python bench/bench_setup.py [--rounds N] [--installers uv,pip] [--no-docs]

Each round copies the checkout's files (tracked and untracked, not ignored: no
venv, no build tree) into a new directory under the system's temporary
directory and runs `./dev setup` there as a user's first command would, with
the package caches empty: uv's cache is a new empty directory (UV_CACHE_DIR)
and pip's is off (PIP_NO_CACHE_DIR), so every wheel is downloaded again. It
then runs `./dev setup` a second time in the same copy, which finds
everything in place. `--installers` lists the installers to measure, each
round running every one of them in turn: `uv` (the default of `./dev`) and
`pip` (`DEV_INSTALLER=pip`, the installer before uv). The copy is removed
after each run. Prints and records the seconds of every step `./dev setup`
reported (the interface builds and the editable install run side by side, so
their times overlap), the wall clock of the whole command, and the re-run's;
then issue #18's goal (a fresh set-up within 60 s), judged on the median of the
rounds, with every round's wall clock. A set-up still running after TIMEOUT_S (30
minutes), or one the benchmark is interrupted in, is killed with every process it
started (its own session), and a timeout stops the benchmark saying so.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, bench_report, table, window_start  # noqa: E402

GOAL_S = 60.0               # issue #18: a fresh set-up within a minute on 2 cores
STEP_RE = re.compile(r"^setup: (?P<what>.+?) \.\.\. done \((?P<s>[0-9.]+) s\)$")
TIMEOUT_S = 1800.0          # one set-up; a hung one stops the benchmark


def checkout_files() -> List[str]:
    """The checkout's files as `./dev` hashes them: tracked and untracked, not ignored."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "-co", "--exclude-standard"],
                         check=True, capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def copy_checkout(dest: Path) -> None:
    for rel in checkout_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)


def step_name(what: str) -> str:
    """A step's line without what differs between installers ("(uv)", the Python path)."""
    what = what.replace(" (uv)", "")
    return re.sub(r"with Python [0-9.]+", "with Python", what)


def end_group(proc: subprocess.Popen) -> None:
    """SIGKILL to ``proc``'s process group (a session of its own): ``./dev`` and every process
    it started (uv, colcon, cmake, the generators), which a kill of ``./dev`` alone leaves
    running; then reap ``proc`` and close its pipes."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def run_setup(cwd: Path, env: Dict[str, str]) -> Dict[str, object]:
    """`./dev setup` in ``cwd``: its wall clock, its steps' seconds and its output. It runs in
    a session of its own, whose every process is killed should it outlast TIMEOUT_S (or the
    benchmark be interrupted while it runs)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(["./dev", "setup"], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        end_group(proc)
        raise SystemExit(f"bench_setup: ./dev setup in {cwd} did not finish within {TIMEOUT_S:.0f} s: "
                         "it and every process it started were killed; run ./dev setup in a fresh "
                         "checkout to see which step hangs") from None
    except BaseException:
        end_group(proc)
        raise
    wall = time.monotonic() - t0
    lines = (stdout + stderr).splitlines()
    if proc.returncode != 0:
        tail = "\n".join(lines[-40:])
        raise SystemExit(f"bench_setup: ./dev setup in {cwd} exited {proc.returncode}:\n{tail}")
    steps = {step_name(m["what"]): float(m["s"]) for m in map(STEP_RE.match, lines) if m}
    return {"wall": wall, "steps": steps, "lines": lines}


def one_round(installer: str, base_env: Dict[str, str]) -> Dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="cozmo_bench_setup_") as tmp:
        work = Path(tmp) / "checkout"
        copy_checkout(work)
        env = dict(base_env)
        env["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
        env["PIP_NO_CACHE_DIR"] = "1"
        env["DEV_INSTALLER"] = installer
        fresh = run_setup(work, env)
        again = run_setup(work, env)
    for line in fresh["lines"]:
        print(f"  {line}")
    print(f"  {installer}: fresh set-up {fresh['wall']:.1f} s wall clock; "
          f"re-run {again['wall']:.2f} s")
    return {"fresh": fresh, "again": again}


def cell(values: Sequence[float], digits: int = 1) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return (f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-"
            f"{max(values):.{digits}f})")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="Writes its block of docs/benchmarks.md unless --no-docs.")
    ap.add_argument("--rounds", type=int, default=2, help="fresh set-ups per installer (default 2)")
    ap.add_argument("--installers", default="uv,pip",
                    help="comma-separated: uv (./dev's default), pip (DEV_INSTALLER=pip)")
    args = ap.parse_args(argv)
    installers = [i.strip() for i in args.installers.split(",") if i.strip()]
    bad = [i for i in installers if i not in ("uv", "pip")]
    if bad or not installers or args.rounds < 1:
        ap.error(f"--installers takes uv and/or pip (got {args.installers!r}); --rounds >= 1")

    # A user's shell: nothing of this venv's (its library path, and the guard of the ROS
    # wheels' re-exec, which would keep the new venv's python from setting its own).
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("VIRTUAL_ENV", "ROS_DISTRO", "AMENT_", "COLCON_", "UV_",
                                     "PYTHONPATH", "PIP_", "LD_LIBRARY_PATH",
                                     "_ROS_WHEELS_BOOTSTRAP"))}
    results: Dict[str, List[Dict[str, object]]] = {i: [] for i in installers}
    started = window_start()  # both tables come from all the rounds
    for r in range(args.rounds):
        for installer in installers:
            print(f"round {r + 1}/{args.rounds}, installer {installer}: fresh ./dev setup ...",
                  flush=True)
            results[installer].append(one_round(installer, base_env))

    order: List[str] = []
    for installer in installers:
        for res in results[installer]:
            for name in res["fresh"]["steps"]:
                if name not in order:
                    order.append(name)
    rows = []
    for name in order:
        rows.append([name] + [cell([res["fresh"]["steps"][name] for res in results[i]
                                    if name in res["fresh"]["steps"]]) for i in installers])
    rows.append(["**the whole fresh set-up (wall clock)**"]
                + [f"**{cell([res['fresh']['wall'] for res in results[i]])}**" for i in installers])
    rows.append(["a re-run with nothing to do (wall clock)"]
                + [cell([res["again"]["wall"] for res in results[i]], 2) for i in installers])
    header = ["step (as `./dev setup` prints it)"] + [
        f"{i}{' (default)' if i == 'uv' else ' (DEV_INSTALLER=pip)'}, s: median (min-max) of "
        f"{len(results[i])}" for i in installers]
    table(f"Fresh `./dev setup` of this checkout in a new directory, empty package caches "
          f"(uv's cache new, pip's off), {os.cpu_count()} cores; the interface builds and "
          f"the editable install run side by side. Goal: {GOAL_S:.0f} s (next table)",
          header, rows, since=started)
    rows = []
    for i in installers:
        walls = [res["fresh"]["wall"] for res in results[i]]
        within = sum(1 for w in walls if w <= GOAL_S)
        rows.append([i, f"{statistics.median(walls):.1f}", ", ".join(f"{w:.1f}" for w in walls),
                     f"{within}/{len(walls)}", "yes" if statistics.median(walls) <= GOAL_S else "no",
                     "yes" if within == len(walls) else "no"])
    table(f"Issue #18's set-up goal, a fresh `./dev setup` within {GOAL_S:.0f} s, in the same rounds "
          f"(judged on the median; every round's wall clock given)",
          ["installer", "median s", "every round, s", f"rounds within {GOAL_S:.0f} s", "met at the median",
           "met in every round"], rows, since=started)
    return 0


if __name__ == "__main__":
    with bench_report("bench_setup"):
        rc = main()
    sys.exit(rc)
