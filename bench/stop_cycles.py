"""Start and stop the whole bring-up N times; count how each stop went (issue #15).

Each cycle starts ``ros2 launch cozmo_driver cozmo.launch.py use_sim:=true`` (where the
``ros2`` command and the installed package are there) or ``cozmo_bringup use_sim:=true``
(``--mode`` chooses; ``auto`` takes the first that is available), in a ROS_DOMAIN_ID of
its own (reserved as test/conftest.py does: loopback port 32768 + id bound while the
cycle runs), with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, the simulator on a free UDP
port of 127.0.0.1 and a marker of the cycle in its environment (inherited by every
process it starts). It waits for the first ``odom`` message (an rclpy subscriber of its
own context in this process), lets the stack run ``--settle`` seconds, sends SIGINT (the
child starts with SIGINT at its default disposition: a background job of a
non-interactive shell inherits it ignored, and Jazzy's ``ros2 launch`` has no SIGTERM
handler), and waits up to ``--kill-after`` seconds for it to exit; a child still running
then is a hang, killed with its session. Then every process whose environment still has
the cycle's marker (``/proc/*/environ``) is an orphan, counted and killed.

Reported: clean stops (exit 0 in time, no ERROR line, no traceback, no child escalated
to SIGTERM or SIGKILL or exiting non-zero, no orphan), exit codes, stop times (SIGINT ->
exit of the launching process: median and max), ERROR lines, tracebacks, escalations,
hangs, orphans, and the time from start to the first odom. Every wait is bounded. Output of
every cycle goes to a log file (``--logs``, default a temporary directory, kept only when
something went wrong).

    ./dev setup && .venv/bin/python bench/stop_cycles.py -n 20 --mode bringup

The summary is also written into docs/benchmarks.md, into the block of the front-end
that ran (``stop_cycles_bringup`` or ``stop_cycles_launch``; ``--no-docs`` to print only),
with the machine and its load. A run ended by Ctrl-C prints the summary of the cycles it
finished and writes nothing (exit status 130): a partial run never replaces a recorded one.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from _common import bench_report, hold_domain_id, keep_discovery_local, table  # bench/ is the script's directory

MARKER = "COZMO_STOP_CYCLES_MARK"
_DOMAIN_IDS = range(1, 101)
_TRACEBACK = "Traceback (most recent call last)"
#: a child that did not stop by itself on SIGINT: cozmo_bringup's and launch's words for it
_ESCALATION = re.compile(r"still running, sending SIG|escalating to .?SIG")
#: a child's exit status other than 0: cozmo_bringup's words (launch says "[ERROR] ... process
#: has died ... exit code N", which counts as an ERROR line)
_CHILD_FAILED = re.compile(r"exited with status (-?[1-9]\d*)")


@dataclass
class Cycle:
    index: int
    domain_id: int
    sim_port: int
    log: Path
    exit_code: Optional[int] = None      # None: hung (killed)
    first_odom_s: Optional[float] = None
    stop_s: Optional[float] = None
    error_lines: List[str] = field(default_factory=list)
    tracebacks: int = 0
    escalations: List[str] = field(default_factory=list)
    child_failures: List[str] = field(default_factory=list)
    orphans: List[str] = field(default_factory=list)
    note: str = ""

    @property
    def hung(self) -> bool:
        return self.exit_code is None

    @property
    def clean(self) -> bool:
        return (self.exit_code == 0 and not self.error_lines and not self.tracebacks
                and not self.escalations and not self.child_failures and not self.orphans
                and self.first_odom_s is not None)


# ---------------------------------------------------------------------------- set-up


def _installed_package() -> bool:
    """Whether ``ros2 launch cozmo_driver ...`` can find the package (its launch file)."""
    try:
        from ament_index_python.packages import get_package_share_directory
        share = Path(get_package_share_directory("cozmo_driver"))
    except Exception:  # noqa: BLE001 - any lookup failure means: not installed
        return False
    return (share / "launch" / "cozmo.launch.py").is_file()


def choose_mode(mode: str) -> str:
    launch_ok = shutil.which("ros2") is not None and _installed_package()
    if mode == "launch" and not launch_ok:
        sys.exit("stop_cycles: --mode launch needs the ros2 command and cozmo_driver installed "
                 "by colcon (source its install/setup.bash)")
    if mode == "auto":
        return "launch" if launch_ok else "bringup"
    return mode


def command(mode: str, sim_port: int, extra: Sequence[str]) -> List[str]:
    args = ["use_sim:=true", f"sim_port:={sim_port}", *extra]
    if mode == "launch":
        return [shutil.which("ros2") or "ros2", "launch", "cozmo_driver", "cozmo.launch.py", *args]
    exe = Path(sys.executable).parent / "cozmo_bringup"
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "cozmo_driver.bringup"]
    return base + args


def reserve_domain(after: int) -> Tuple[int, List[socket.socket]]:
    """A free ROS_DOMAIN_ID, the first after ``after`` (so that consecutive cycles differ),
    held by binding loopback TCP and UDP port 32768 + id."""
    ids = list(_DOMAIN_IDS)
    start = ids.index(after) + 1 if after in ids else 0
    for domain_id in ids[start:] + ids[:start]:
        held = hold_domain_id(domain_id)
        if held is not None:
            return domain_id, held
    raise RuntimeError("no free ROS_DOMAIN_ID in 1..100")


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


# ---------------------------------------------------------------------------- processes


def marked_processes(mark: str) -> List[Tuple[int, str]]:
    """(pid, command line) of every live process (not a zombie) whose environment has
    ``MARKER=mark``."""
    needle = f"{MARKER}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found.append((pid, cmdline))
    return found


def kill_marked(mark: str) -> None:
    for pid, _ in marked_processes(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class OdomWatch:
    """An rclpy context of its own in ``domain_id`` with one ``odom`` subscriber."""

    def __init__(self, domain_id: int, topic: str) -> None:
        import rclpy
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import qos_profile_sensor_data

        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("stop_cycles_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.count = 0
        self.node.create_subscription(Odometry, topic, self._on_odom, qos_profile_sensor_data)

    def _on_odom(self, msg) -> None:
        self.count += 1

    def wait(self, timeout: float, alive) -> bool:
        deadline = time.monotonic() + timeout
        while self.count == 0 and time.monotonic() < deadline and alive():
            self.executor.spin_once(timeout_sec=0.05)
        return self.count > 0

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.context.try_shutdown()


def run_cycle(index: int, mode: str, options: argparse.Namespace, logs: Path,
              last_domain: int) -> Cycle:
    domain_id, held = reserve_domain(last_domain)
    port = free_udp_port()
    cycle = Cycle(index, domain_id, port, logs / f"cycle_{index:03d}.log")
    mark = f"{uuid.uuid4().hex}-{index}"
    env = dict(os.environ)
    env.update({MARKER: mark, "ROS_DOMAIN_ID": str(domain_id), "COZMO_LOOPBACK_ONLY": "1",
                "PYTHONUNBUFFERED": "1"})
    keep_discovery_local(env)
    watch = OdomWatch(domain_id, options.odom_topic)
    stream = open(cycle.log, "wb")
    t0 = time.monotonic()
    proc = subprocess.Popen(command(mode, port, options.arg), stdin=subprocess.DEVNULL,
                            stdout=stream, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True, preexec_fn=_default_sigint)
    try:
        if watch.wait(options.odom_timeout, lambda: proc.poll() is None):
            cycle.first_odom_s = time.monotonic() - t0
            end = time.monotonic() + options.settle
            while time.monotonic() < end:
                watch.executor.spin_once(timeout_sec=0.05)
        else:
            cycle.note = ("exited before the first odom" if proc.poll() is not None
                          else f"no odom within {options.odom_timeout:g} s")
        if proc.poll() is None:
            t_signal = time.monotonic()
            proc.send_signal(signal.SIGINT)
            try:
                cycle.exit_code = proc.wait(timeout=options.kill_after)
                cycle.stop_s = time.monotonic() - t_signal
            except subprocess.TimeoutExpired:
                cycle.exit_code = None
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait()
        else:
            cycle.exit_code = proc.returncode
        orphans = marked_processes(mark)
        cycle.orphans = [f"{pid} {cmd}" for pid, cmd in orphans]
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
        kill_marked(mark)
        stream.close()
        watch.close()
        for sock in held:
            sock.close()
    text = cycle.log.read_text(errors="replace")
    cycle.error_lines = [line for line in text.splitlines() if "ERROR" in line]
    cycle.tracebacks = text.count(_TRACEBACK)
    cycle.escalations = [line for line in text.splitlines() if _ESCALATION.search(line)]
    cycle.child_failures = [line for line in text.splitlines() if _CHILD_FAILED.search(line)]
    return cycle


# ---------------------------------------------------------------------------- report


def _seconds(values: List[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):.2f} s, max {max(values):.2f} s (n={len(values)})"


def report(cycles: List[Cycle], mode: str, elapsed: float) -> str:
    codes: Dict[str, int] = {}
    for c in cycles:
        key = "hung (killed)" if c.hung else str(c.exit_code)
        codes[key] = codes.get(key, 0) + 1
    lines = [
        f"stop cycles: {len(cycles)} x {mode} (SIGINT after the first odom), {elapsed:.0f} s",
        f"  clean stops (exit 0 in time, no ERROR, no traceback, no escalation, every "
        f"child 0, no orphan): "
        f"{sum(c.clean for c in cycles)}/{len(cycles)}",
        "  exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())),
        f"  stop time (SIGINT -> exit): {_seconds([c.stop_s for c in cycles if c.stop_s is not None])}",
        f"  ERROR lines: {sum(len(c.error_lines) for c in cycles)} "
        f"(in {sum(bool(c.error_lines) for c in cycles)} cycles)",
        f"  tracebacks: {sum(c.tracebacks for c in cycles)} "
        f"(in {sum(bool(c.tracebacks) for c in cycles)} cycles)",
        f"  children stopped by SIGTERM/SIGKILL escalation: "
        f"{sum(bool(c.escalations) for c in cycles)} cycles; children exited non-zero: "
        f"{sum(len(c.child_failures) for c in cycles)}",
        f"  hangs (killed after the limit): {sum(c.hung for c in cycles)}",
        f"  orphans (still running after the stop): {sum(len(c.orphans) for c in cycles)} "
        f"(in {sum(bool(c.orphans) for c in cycles)} cycles)",
        f"  time to first odom: "
        f"{_seconds([c.first_odom_s for c in cycles if c.first_odom_s is not None])}"
        + (f"; none in {sum(c.first_odom_s is None for c in cycles)} cycles"
           if any(c.first_odom_s is None for c in cycles) else ""),
    ]
    for c in cycles:
        if not c.clean:
            problems = [p for p in (
                c.note, "hung" if c.hung else "",
                f"exit {c.exit_code}" if c.exit_code not in (0, None) else "",
                f"{len(c.error_lines)} ERROR lines" if c.error_lines else "",
                f"{c.tracebacks} tracebacks" if c.tracebacks else "",
                "escalated: " + "; ".join(c.escalations) if c.escalations else "",
                "children: " + "; ".join(c.child_failures) if c.child_failures else "",
                f"orphans: {'; '.join(c.orphans)}" if c.orphans else "") if p]
            lines.append(f"  cycle {c.index} (domain {c.domain_id}, log {c.log}): "
                         + ", ".join(problems))
            lines.extend(f"      {line}" for line in c.error_lines[:3])
    return "\n".join(lines)


def summary_rows(cycles: List[Cycle]) -> List[List[object]]:
    """The report as table rows, for docs/benchmarks.md."""
    def seconds(values: List[float]) -> str:
        return (f"{statistics.median(values):.2f} s / {max(values):.2f} s" if values else "-")
    return [
        ["cycles run, clean", f"{len(cycles)}, {sum(c.clean for c in cycles)}"],
        ["SIGINT to exit, median / max", seconds([c.stop_s for c in cycles if c.stop_s is not None])],
        ["start to first odom, median / max",
         seconds([c.first_odom_s for c in cycles if c.first_odom_s is not None])],
        ["ERROR lines", sum(len(c.error_lines) for c in cycles)],
        ["tracebacks", sum(c.tracebacks for c in cycles)],
        ["hangs (killed after --kill-after)", sum(c.hung for c in cycles)],
        ["children escalated to SIGTERM/SIGKILL or exiting non-zero",
         sum(bool(c.escalations or c.child_failures) for c in cycles)],
        ["cycles with orphans", sum(bool(c.orphans) for c in cycles)],
    ]


class Interrupted(Exception):
    """Ctrl-C ended the cycles early: what was measured is printed, not written anywhere."""


def main(argv: Optional[Sequence[str]] = None) -> int:
    options = arguments(argv)
    mode = choose_mode(options.mode)
    try:
        # the block of the front-end run (the names in full: test_docs.py finds each block's writer)
        with (bench_report("stop_cycles_launch") if mode == "launch" else bench_report("stop_cycles_bringup")):
            return run(options, mode)
    except Interrupted as interrupted:   # a partial run never replaces a recorded one
        print(f"stop_cycles: {interrupted}: the summary above is not written into docs/benchmarks.md",
              flush=True)
        return 128 + int(signal.SIGINT)


def arguments(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--cycles", type=int, default=50, help="start/stop cycles (50)")
    parser.add_argument("--mode", choices=("auto", "launch", "bringup"), default="auto",
                        help="ros2 launch or cozmo_bringup (auto: ros2 launch where the ros2 "
                             "command and the installed package are there)")
    parser.add_argument("--settle", type=float, default=1.0,
                        help="seconds between the first odom and SIGINT (1.0)")
    parser.add_argument("--odom-timeout", type=float, default=40.0,
                        help="seconds to wait for the first odom (40)")
    parser.add_argument("--kill-after", type=float, default=10.0,
                        help="seconds after SIGINT before a child counts as hung and is "
                             "killed (10)")
    parser.add_argument("--odom-topic", default="/odom", help="where odom comes (/odom)")
    parser.add_argument("--logs", type=Path, default=None,
                        help="directory for the cycles' output (default: a temporary one, "
                             "removed when every stop was clean)")
    parser.add_argument("arg", nargs="*", help="more launch arguments (name:=value), e.g. "
                        "enable_face:=true enable_behavior:=true")
    options = parser.parse_args(argv)
    if options.cycles < 1:
        parser.error("--cycles must be at least 1")
    bad = [a for a in options.arg if not re.match(r"^[A-Za-z_]\w*:=", a)]
    if bad:
        parser.error(f"launch arguments are name:=value: {bad}")
    return options


def run(options: argparse.Namespace, mode: str) -> int:
    """The cycles of ``mode`` (launch or bringup); Interrupted after Ctrl-C, once the cycles
    done are reported."""
    keep_discovery_local(os.environ)  # for this process's probe too
    logs = options.logs or Path(tempfile.mkdtemp(prefix="stop_cycles_"))
    logs.mkdir(parents=True, exist_ok=True)
    print(f"stop_cycles: {options.cycles} cycles of {' '.join(command(mode, 0, options.arg))} "
          f"(sim_port per cycle); logs in {logs}", flush=True)
    cycles: List[Cycle] = []
    t0 = time.monotonic()
    last_domain = 0
    interrupted = False
    try:
        for i in range(options.cycles):
            cycle = run_cycle(i, mode, options, logs, last_domain)
            last_domain = cycle.domain_id
            cycles.append(cycle)
            stop = f"{cycle.stop_s:.2f} s" if cycle.stop_s is not None else "-"
            odom = f"{cycle.first_odom_s:.2f} s" if cycle.first_odom_s is not None else "-"
            print(f"cycle {i:3d}: domain {cycle.domain_id:3d}, first odom {odom}, exit "
                  f"{'hung' if cycle.hung else cycle.exit_code} after {stop}"
                  f"{'' if cycle.clean else '  <- NOT CLEAN'}", flush=True)
    except KeyboardInterrupt:
        interrupted = True
    print(report(cycles, mode, time.monotonic() - t0), flush=True)
    what = "ros2 launch cozmo_driver cozmo.launch.py" if mode == "launch" else "cozmo_bringup"
    table(f"{what} {' '.join(['use_sim:=true', *options.arg])}: SIGINT {options.settle:g} s after "
          "the first odom", ["", "value"], summary_rows(cycles))
    if interrupted:
        raise Interrupted(f"interrupted after {len(cycles)} of {options.cycles} cycles (logs in {logs})")
    all_clean = bool(cycles) and all(c.clean for c in cycles) and len(cycles) == options.cycles
    if all_clean and options.logs is None:
        shutil.rmtree(logs, ignore_errors=True)
    return 0 if all_clean else 1


if __name__ == "__main__":
    sys.exit(main())
