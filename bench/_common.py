"""What the benchmarks share: local-only ROS isolation, process meters, result tables.

Import it before rclpy: :func:`isolate_ros` must set the environment first.
Benchmarks print numbers; they never assert them. Inside ``with bench_report(name):``
every table printed with :func:`table` or :func:`comparison` (or given to
:func:`record_table`) is also written into docs/benchmarks.md, between
``<!-- name: begin -->`` and ``<!-- name: end -->``, with the date, the machine and the
load average measured while it was measured (``--no-docs``: print only).
"""

from __future__ import annotations

import datetime
import importlib.machinery
import math
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# pycozmo, the reference, imports the stdlib module chunk, which Python 3.13 removed:
# bench/compat/chunk.py stands in for it, here and in the Python processes a benchmark
# starts (its pycozmo sessions), only where there is no chunk on the path. (The path
# only: a stand-in the tests put into sys.modules has no spec, which find_spec refuses,
# and the processes started do not have it.)
if importlib.machinery.PathFinder.find_spec("chunk") is None:
    _COMPAT = str(ROOT / "bench" / "compat")
    sys.path.insert(0, _COMPAT)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [_COMPAT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

# the reservation of a ROS_DOMAIN_ID, shared with test/conftest.py and cozmo-demo
from cozmo_driver.domain_reservation import hold_domain_id, keep_discovery_local  # noqa: E402
from cozmo_driver.lifeline import PARENT_PID_ENV  # noqa: E402

_held: List[socket.socket] = []

#: False with ``--no-docs`` on the command line (print the tables only). The option is
#: taken off ``sys.argv`` when this module is imported, so that every benchmark's own
#: argument parser, which runs later, never sees it.
WRITE_DOCS = "--no-docs" not in sys.argv[1:]
sys.argv[1:] = [arg for arg in sys.argv[1:] if arg != "--no-docs"]


def isolate_ros() -> str:
    """Keep DDS on this machine and in a ROS_DOMAIN_ID of this run; the id as text.

    Discovery is limited to localhost, the robot client refuses non-loopback
    addresses, and unless the caller set ROS_DOMAIN_ID a free id is held (loopback
    TCP and UDP port 32768 + id bound until the process ends)."""
    keep_discovery_local(os.environ)
    os.environ["COZMO_LOOPBACK_ONLY"] = "1"
    if os.environ.get("ROS_DOMAIN_ID") or _held:
        return os.environ.get("ROS_DOMAIN_ID", "")
    for domain_id in range(99, 0, -1):
        held = hold_domain_id(domain_id)
        if held is None:
            continue
        _held.extend(held)
        os.environ["ROS_DOMAIN_ID"] = str(domain_id)
        return str(domain_id)
    raise RuntimeError("no free ROS_DOMAIN_ID in 1..99")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (s)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of a process (MiB); NaN if /proc does not say."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return math.nan


def pss_mib(pid: int) -> float:
    """Proportional set size of a process (MiB), from /proc/<pid>/smaps_rollup: its private
    pages plus its share of every shared one; NaN where the kernel does not say."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return math.nan


def lifeline_env() -> Dict[str, str]:
    """The environment of a process of the project's (a simulator, a driver, a bring-up) that
    this one starts: it ends when this process does, however it ends, a SIGKILL too
    (cozmo_driver.lifeline.exit_with_parent, which each of them calls first; a bring-up also
    passes it on to the nodes it starts). A ``python -c`` helper, which does not call it,
    takes ``preexec_fn=cozmo_driver.lifeline.parent_death_preexec()`` instead."""
    return dict(os.environ, **{PARENT_PID_ENV: str(os.getpid())})


def console(name: str, module: str) -> List[str]:
    """The command of an installed console script, or ``python -m module`` without one."""
    exe = Path(sys.executable).parent / name
    return [str(exe)] if exe.exists() else [sys.executable, "-m", module]


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGINT (a clean stop), then SIGKILL if it is still running after ``timeout`` s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(fn: Callable[[], object], min_reps: int, min_seconds: float) -> Tuple[float, float, int]:
    """Median and p90 (us) of ``fn``'s run time after one warm-up call (caches, lazy
    tables), over at least ``min_reps`` calls and ``min_seconds``; and the call count."""
    import numpy as np

    fn()
    samples = []
    deadline = time.perf_counter() + min_seconds
    while len(samples) < min_reps or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    arr = np.array(samples) * 1e6
    return float(np.median(arr)), float(np.percentile(arr, 90)), len(samples)


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]],
          measured: bool = True, since: Optional[float] = None) -> None:
    """Print a titled table, columns left-aligned to their widest cell (``measured``: its
    title in docs/benchmarks.md gives the machine's load while it was measured, since
    ``since`` (:func:`window_start`) or else since the previous table; false for a table
    that measures nothing, such as one read from earlier runs)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    record_table(title, header, rows, measured, since)
    print(f"\n{title}")
    print("  " + "  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    print("  " + "  ".join("-" * w for w in widths))
    for r in rows:
        print("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def stats_ms(values: Sequence[float]) -> List[str]:
    """[samples, median, p99, max] of durations in seconds, as milliseconds."""
    if not values:
        return ["0", "-", "-", "-"]
    v = sorted(x * 1e3 for x in values)
    p99 = v[min(len(v) - 1, int(math.ceil(0.99 * len(v))) - 1)]
    return [str(len(v)), f"{v[len(v) // 2]:.2f}", f"{p99:.2f}", f"{v[-1]:.2f}"]


Timing = Tuple[float, float]  # median, p90 (us)


def comparison(rows: Sequence[Tuple[str, Timing, Optional[Timing]]], what: str, note: str) -> None:
    """Print ours against the reference (median and p90, us) with the ratio."""
    record_table(f"{what} ({note})", [what, "ours median", "ours p90", "ref median", "ref p90", "ref/ours"],
                 [[name, f"{ours[0]:.1f}", f"{ours[1]:.1f}"]
                  + ([f"{ref[0]:.1f}", f"{ref[1]:.1f}", f"{ref[0] / ours[0]:.1f}x"] if ref else ["-", "-", "-"])
                  for name, ours, ref in rows])
    width = max(len(r[0]) for r in rows)
    head = (f"{what:<{width}}  {'ours med':>10} {'ours p90':>10}  {'ref med':>10} {'ref p90':>10}"
            f"  {'ref/ours':>8}")
    print()
    print(head)
    print("-" * len(head))
    for name, ours, ref in rows:
        line = f"{name:<{width}}  {ours[0]:>10.1f} {ours[1]:>10.1f}"
        if ref:
            line += f"  {ref[0]:>10.1f} {ref[1]:>10.1f}  {ref[0] / ours[0]:>7.1f}x"
        print(line)
    print(f"\n({note})")


# ----------------------------------------------------------------------------- docs/benchmarks.md

DOCS_BENCHMARKS = ROOT / "docs" / "benchmarks.md"


def block_markers(name: str) -> Tuple[str, str]:
    """The lines that open and close benchmark ``name``'s block in docs/benchmarks.md."""
    return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the lines between ``name``'s markers replaced by ``body``; ValueError if
    the markers are missing, repeated or out of order."""
    begin, end = block_markers(name)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"docs/benchmarks.md needs one {begin} ... {end} block")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body.strip()}\n{end}{tail}"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load1() -> float:
    return os.getloadavg()[0]


class BenchReport:
    """The tables of one benchmark run, each with the machine's load average while it was
    measured. The load is sampled every ``every`` seconds on a thread of its own (None: only
    when :meth:`sample` is called), and each sample is kept, with its ``clock`` time, for the
    whole run: a table's window is since the previous table, or since the ``since`` it is
    given (a time of ``clock``, :func:`time.monotonic` by default), until it is added."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic,
                 load: Callable[[], float] = _load1, every: Optional[float] = 1.0) -> None:
        self.name = name
        self.started = datetime.datetime.now()
        self.tables: List[str] = []
        self._clock = clock
        self._load = load
        self._samples: List[Tuple[float, float]] = []  # (clock time, load average)
        self._lock = threading.Lock()
        self._previous = self.sample()  # where a table without ``since`` starts
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if every is not None:
            self._thread = threading.Thread(target=self._sample_every, args=(every,), name="loadavg",
                                            daemon=True)
            self._thread.start()

    def _sample_every(self, every: float) -> None:
        while not self._stop.wait(every):
            self.sample()

    def sample(self) -> float:
        """Take a sample of the load average now; its time (of the report's clock)."""
        with self._lock:
            t = self._clock()
            self._samples.append((t, self._load()))
        return t

    def window(self, since: float, until: float) -> List[float]:
        """The load averages sampled from ``since`` to ``until`` (clock times), both included."""
        with self._lock:
            return [load for t, load in self._samples if since <= t <= until]

    def add(self, title: str, header: Sequence[object], rows: Sequence[Sequence[object]],
            measured: bool = True, since: Optional[float] = None) -> None:
        """Add a table; ``measured``: its title gives the load of its window, since ``since``
        (a time of the report's clock: the start of the measurement it comes from) or, without
        it, since the previous table (the start of the run for the first), until now."""
        now = self.sample()
        start, self._previous = (self._previous if since is None else min(since, now)), now
        samples = self.window(start, now)  # never empty: the sample just taken is in it
        load = (f" (load average (1 min) while measured: mean {sum(samples) / len(samples):.2f}, "
                f"max {max(samples):.2f} on {os.cpu_count()} cores)") if measured else ""
        cell = lambda c: str(c).replace("|", "/")  # noqa: E731
        lines = [f"**{cell(title)}**{load}", "",
                 "| " + " | ".join(cell(h) for h in header) + " |",
                 "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
        self.tables.append("\n".join(lines))

    def markdown(self) -> str:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        args = " ".join(sys.argv[1:])
        script = Path(sys.argv[0]).name
        head = (f"Run on {self.started:%Y-%m-%d %H:%M} by `bench/{script}{' ' + args if args else ''}`: "
                f"{os.cpu_count()} cores, {_cpu_model()}, Python {platform.python_version()}, "
                f"{platform.system()} {platform.release()}.")
        return "\n\n".join([head] + self.tables)


_report: Optional[BenchReport] = None


def record_table(title: str, header: Sequence[object], rows: Sequence[Sequence[object]],
                 measured: bool = True, since: Optional[float] = None) -> None:
    """Add a table to the running :func:`bench_report` (nothing outside one); ``since``: the
    start of the measurement it comes from (:func:`window_start`), else the previous table."""
    if _report is not None:
        _report.add(title, header, rows, measured, since)


def window_start() -> float:
    """The start of a measurement whose tables are added later (after another measurement, or
    together): the ``since`` to give them (:func:`table`, :func:`record_table`), so that their
    load is the load of the whole measurement. The running report takes a sample then."""
    return _report.sample() if _report is not None else time.monotonic()


@contextmanager
def bench_report(name: str, docs: Path = DOCS_BENCHMARKS,
                 write: bool = True) -> Iterator[Optional[BenchReport]]:
    """Collect the tables printed inside; when the body ends without an exception, write
    them into ``name``'s block of ``docs`` (unless ``write`` is false or ``--no-docs`` was
    on the command line: :data:`WRITE_DOCS`)."""
    global _report
    write = write and WRITE_DOCS
    _report = BenchReport(name)
    try:
        yield _report
        report = _report
    finally:
        _report = None
    body = report.markdown()
    if write and report.tables:
        docs.write_text(replace_block(docs.read_text(), name, body))
        print(f"\n{name}: tables written to {docs.relative_to(ROOT) if docs.is_relative_to(ROOT) else docs}")
