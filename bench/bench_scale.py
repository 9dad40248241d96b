"""Several robots on one machine: N simulated robots and N driver nodes, N = 1, 2, 4, 8, 16.

For each N, on this machine only:

* N simulators, each a ``cozmo-sim`` process of its own on a free port of 127.0.0.1.
  Processes rather than SimServers in this process, because this process also holds
  the subscriber: N simulators sharing its interpreter (one GIL, N robots' 33 Hz state
  and camera) would slow the deliveries being counted, and one simulator process for
  all would become the bottleneck at N = 16 rather than the drivers. As processes their
  CPU is measured apart (their own /proc figures) and is never counted as the
  drivers': it is given in a column of its own, as the machine's share it took.
* N ``cozmo_driver_node`` processes, exactly as users start them, robot K in namespace
  ``/robotK`` with frame prefix ``robotK/``, all in one ROS domain reserved for the run
  (bench/_common.py's ``isolate_ros``: discovery on localhost, loopback only). Each is
  started through ``setpriv --pdeathsig INT`` where that exists, so that a driver is
  interrupted if this script dies; the simulators stop by themselves (``--duration``).
* one rclpy node in this process subscribing to every robot's ``odom`` (and, with
  ``--camera``, its ``camera/image_raw/compressed``; without it the drivers run with
  ``camera_enabled:=false``), spun on a thread of its own.

The subscriptions exist before the drivers start. The drivers are then started all at
once; start-up is, per robot, the time from starting its process to its first odom
delivered here (median and maximum over the robots: the maximum is the time until
every robot streams), with the CPU time the driver had used by then. A driver streams
before its start-up is done (the animation library and the actions are made while the
robot connects: docs/driver.md), so each driver is then asked its lifecycle state
(``get_state``) until it is active: the time to that, and the CPU time used by then,
are reported too. Once every driver is active, after a settling second, over a window of
``--seconds`` (10 s), which thus holds no start-up:
each driver's CPU (utime + stime from /proc, % of one core; mean and max over the
robots), its memory at the end of the window (RSS, and PSS from smaps_rollup: shared
libraries divided among the processes that map them, so N x PSS is what N drivers
really take), the odom rate delivered per robot (min and median; the robot streams 33
per second) and the camera's, and where the machine's CPU went: the drivers, the
simulators, this process (the subscriber), the rest (other users of the machine), out of
the whole machine's busy time from /proc/stat; the load average is sampled throughout.
Then every driver gets SIGINT at once (escalated to SIGTERM, then SIGKILL, after bounded
waits), then the simulators; none may remain.

The script's own checks (printed, and in ``--json``): every robot streamed odom; every
driver became active; every driver and simulator ran through the window; odom came from every robot in it; every
driver stopped on SIGINT with exit status 0; no process left. Figures are printed and
written into docs/benchmarks.md (``--no-docs``: not), never asserted. On a 2-core
machine 16 drivers may take more CPU than it has: the table says what happened then
(rates not held, long start-up) rather than leaving the case out.

    .venv/bin/python bench/bench_scale.py [--counts 1,2,4,8,16] [--max-n 16] [--seconds 10]
                                          [--camera] [--json FILE] [--no-docs]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (ROOT, bench_report, console, cpu_seconds, isolate_ros, pss_mib, rss_mib, table,  # noqa: E402
                     window_start)

isolate_ros()

import rclpy  # noqa: E402
from lifecycle_msgs.msg import State  # noqa: E402
from lifecycle_msgs.srv import GetState  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import CompressedImage  # noqa: E402

#: the robot's state rate (RobotState datagrams per second), the odom rate to hold
GOAL_HZ = 33.0
#: how long one simulator may take to say its port
SIM_START_S = 20.0
#: after every robot streams, before the window
SETTLE_S = 1.0
#: how often a driver not yet active is asked its lifecycle state (s)
ACTIVE_POLL_S = 0.05
#: a state request unanswered this long is asked again (s): a request that goes out while the
#: service's reply topic is still being matched can lose its answer for good
ACTIVE_ASK_AGAIN_S = 1.0
#: each stop step (SIGINT, then SIGTERM, then SIGKILL) waits this long for all processes
STOP_STEP_S = 15.0


# ----------------------------------------------------------------------------- meters

def machine_jiffies() -> tuple:
    """(busy, total) clock ticks of all cores together so far, from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)   # idle + iowait
    total = sum(values[:8])                                       # guest time is in user already
    return total - idle, total


def cpu_or_nan(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except OSError:
        return float("nan")


def gone(pid: int) -> bool:
    """Whether no process (or only a zombie) has this pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# ----------------------------------------------------------------------------- processes

def start_sim(seed: int, duration: float) -> tuple:
    """A ``cozmo-sim`` process on a free port of 127.0.0.1: (process, port)."""
    cmd = console("cozmo-sim", "cozmo_driver.sim.cli") + [
        "--host", "127.0.0.1", "--port", "0", "--seed", str(seed), "--quiet",
        "--duration", f"{duration:.0f}"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    return proc


def sim_port(proc: subprocess.Popen, deadline: float) -> int:
    """The port a starting simulator says it serves on (RuntimeError if it does not)."""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, min(0.5, deadline - time.monotonic())))
        if ready:
            line = proc.stdout.readline()
            match = re.search(r"udp://127\.0\.0\.1:(\d+)", line)
            if match:
                return int(match.group(1))
            if not line:
                break
    raise RuntimeError(f"a simulator did not start (exit {proc.poll()})")


def claimed(port: int) -> bool:
    """Whether a program on this machine already drives a robot at 127.0.0.1:``port``
    (the drivers' claim, cozmo_driver.client.claim): a port the kernel gave our simulator
    may be one that another program's simulator had before, its driver still claiming it."""
    from cozmo_driver.client.claim import RobotBusyError, RobotClaim

    try:
        RobotClaim("127.0.0.1", port).acquire().release()
    except RobotBusyError:
        return True
    return False


def start_sims(n: int, duration: float, result: Dict[str, Any], sims: List[subprocess.Popen]) -> List[int]:
    """N simulators, appended to ``sims`` as they start, on ports no other program claims:
    their ports. A simulator on a claimed port is stopped and started again (counted in
    ``result["sims_restarted"]``)."""
    sims.extend(start_sim(seed=100 + k, duration=duration) for k in range(n))
    deadline = time.monotonic() + SIM_START_S + n
    ports = [sim_port(p, deadline) for p in sims]
    result["sims_restarted"] = 0
    for k in range(n):
        for _ in range(5):
            if not claimed(ports[k]):
                break
            stop_all([sims[k]])
            sims[k].stdout.close()
            result["sims_restarted"] += 1
            sims[k] = start_sim(seed=100 + k, duration=duration)
            ports[k] = sim_port(sims[k], time.monotonic() + SIM_START_S)
    return ports


def driver_command(k: int, port: int, camera: bool) -> List[str]:
    cmd = ["setpriv", "--pdeathsig", "INT"] if shutil.which("setpriv") else []
    cmd += console("cozmo_driver_node", "cozmo_driver.ros.driver_node")
    return cmd + ["--ros-args", "--log-level", "warn", "-r", f"__ns:=/robot{k}",
                  "-p", "robot_ip:=127.0.0.1", "-p", f"robot_port:={port}",
                  "-p", f"frame_prefix:=robot{k}/", "-p", f"camera_enabled:={'true' if camera else 'false'}"]


def threads_of(pid: int) -> List[str]:
    """Each thread of a process as "name state wchan" (what it waits in), from /proc."""
    out = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                wchan = f.read().strip() or "-"
        except OSError:
            continue
        out.append(f"{head.split('(', 1)[1]} {rest.split()[0]} {wchan}")
    return out


def stop_all(procs: List[subprocess.Popen]) -> List[Dict[str, Any]]:
    """SIGINT to every process at once; SIGTERM to those still running after
    STOP_STEP_S, SIGKILL after another. Per process: how it stopped, its exit status and,
    if SIGINT did not stop it in time, its threads then (see threads_of)."""
    how: List[Optional[str]] = [None if p.poll() is None else "before" for p in procs]
    stuck: List[Optional[List[str]]] = [None] * len(procs)
    for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM"), (signal.SIGKILL, "SIGKILL")):
        running = [i for i, p in enumerate(procs) if p.poll() is None]
        if not running:
            break
        if name == "SIGTERM":
            for i in running:
                stuck[i] = threads_of(procs[i].pid)
        for i in running:
            try:
                procs[i].send_signal(sig)
            except ProcessLookupError:
                pass
            how[i] = name
        deadline = time.monotonic() + STOP_STEP_S
        for i in running:
            try:
                procs[i].wait(max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    for p in procs:   # after SIGKILL the wait is short; nothing is left unreaped
        if p.poll() is None:
            p.wait(5.0)
    return [{"signal": h, "exit": p.returncode, **({"threads_after_sigint": s} if s is not None else {})}
            for h, p, s in zip(how, procs, stuck)]


# ----------------------------------------------------------------------------- the subscriber

class SpunNode:
    """A fresh rclpy context and node in this process; :meth:`start_spinning` (once its
    subscriptions are made) spins it on a thread of its own until :meth:`close`."""

    def __init__(self, name: str, spin_timeout_s: float) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._spin_timeout_s = spin_timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name="spin", daemon=True)

    def start_spinning(self) -> None:
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=self._spin_timeout_s)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.context.try_shutdown()


class Subscriber(SpunNode):
    """One rclpy node in this process taking every robot's odom (and camera)."""

    def __init__(self, n: int, camera: bool) -> None:
        super().__init__("bench_scale", spin_timeout_s=0.1)
        self.first_odom: List[Optional[float]] = [None] * n
        self.start_cpu: List[Optional[float]] = [None] * n
        self.pids: List[Optional[int]] = [None] * n
        #: when each driver was first seen active (monotonic), and its CPU time (s) then
        self.active: List[Optional[float]] = [None] * n
        self.active_cpu: List[Optional[float]] = [None] * n
        self._asked: List[Any] = [None] * n
        self._asked_at: List[float] = [0.0] * n
        self._state_clients = [self.node.create_client(GetState, f"/robot{k + 1}/cozmo_driver/get_state")
                               for k in range(n)]
        self.odom = [0] * n
        self.images = [0] * n
        #: while set: (now - header.stamp) of every odom delivered, s
        self.ages: List[float] = []
        self.collect_ages = False
        for k in range(n):
            self.node.create_subscription(Odometry, f"/robot{k + 1}/odom", self._on_odom(k), 50)
            if camera:
                self.node.create_subscription(CompressedImage, f"/robot{k + 1}/camera/image_raw/compressed",
                                              self._on_image(k), qos_profile_sensor_data)
        self.start_spinning()

    def poll_active(self) -> bool:
        """Ask every driver not yet seen active its lifecycle state (one request at a time
        each; the spin thread takes the answers); True once all were seen active."""
        for k, client in enumerate(self._state_clients):
            if self.active[k] is not None:
                continue
            asked = self._asked[k]
            if asked is not None and not asked.done():
                if time.monotonic() - self._asked_at[k] < ACTIVE_ASK_AGAIN_S:
                    continue
                client.remove_pending_request(asked)
                asked = None
            answer = asked.result() if asked is not None and asked.exception() is None else None
            if answer is not None and answer.current_state.id == State.PRIMARY_STATE_ACTIVE:
                pid = self.pids[k]
                self.active_cpu[k] = cpu_or_nan(pid) if pid is not None else None
                self.active[k] = time.monotonic()   # seen active within ACTIVE_POLL_S
                continue
            self._asked[k] = client.call_async(GetState.Request()) if client.service_is_ready() else None
            self._asked_at[k] = time.monotonic()
        return all(t is not None for t in self.active)

    def _on_odom(self, k: int):
        def callback(msg: Odometry) -> None:
            if self.collect_ages:
                self.ages.append(time.time() - msg.header.stamp.sec - msg.header.stamp.nanosec * 1e-9)
            if self.first_odom[k] is None:   # start_cpu first: the main thread waits on first_odom
                now = time.monotonic()
                pid = self.pids[k]
                self.start_cpu[k] = cpu_or_nan(pid) if pid is not None else None
                self.first_odom[k] = now
            self.odom[k] += 1
        return callback

    def _on_image(self, k: int):
        def callback(_msg: CompressedImage) -> None:
            self.images[k] += 1
        return callback


# ----------------------------------------------------------------------------- one N

def run_n(n: int, args: argparse.Namespace, logs: Path) -> Dict[str, Any]:
    result: Dict[str, Any] = {"n": n, "checks": {}}
    checks = result["checks"]
    sim_life = args.start_timeout + SETTLE_S + args.seconds + 4 * STOP_STEP_S + 60.0
    sims: List[subprocess.Popen] = []
    drivers: List[subprocess.Popen] = []
    sub: Optional[Subscriber] = None
    log_files = []
    try:
        ports = start_sims(n, sim_life, result, sims)
        sub = Subscriber(n, args.camera)
        started: List[float] = []
        for k, port in enumerate(ports):
            log = open(logs / f"n{n}_robot{k + 1}.log", "w")
            log_files.append(log)
            started.append(time.monotonic())
            drivers.append(subprocess.Popen(driver_command(k + 1, port, args.camera), stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT))
            sub.pids[k] = drivers[-1].pid
        # a driver streams before its start-up is done (docs/driver.md, Start-up): the window
        # opens once every driver streams and is configured and active, so it holds no start-up
        deadline = started[0] + args.start_timeout
        while time.monotonic() < deadline and not (sub.poll_active()
                                                   and all(t is not None for t in sub.first_odom)):
            if any(p.poll() is not None for p in drivers):
                break
            time.sleep(ACTIVE_POLL_S)
        startup = [None if t is None else t - s for t, s in zip(sub.first_odom, started)]
        result["startup_s"] = startup
        checks["every robot streamed odom"] = all(s is not None for s in startup)
        result["active_s"] = [None if t is None else t - s for t, s in zip(sub.active, started)]
        result["active_cpu_s"] = list(sub.active_cpu)
        checks["every driver became active"] = all(t is not None for t in sub.active)
        time.sleep(SETTLE_S)
        result["startup_cpu_s"] = list(sub.start_cpu)
        # ---- the window
        me = os.getpid()
        pids = [p.pid for p in drivers]
        sim_pids = [p.pid for p in sims]
        odom0, img0 = list(sub.odom), list(sub.images)
        sub.collect_ages = True
        cpu0 = [cpu_or_nan(p) for p in pids]
        sim0 = [cpu_or_nan(p) for p in sim_pids]
        me0 = cpu_seconds(me)
        m0, t0 = machine_jiffies(), time.monotonic()
        loads = [os.getloadavg()[0]]
        end = t0 + args.seconds
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            loads.append(os.getloadavg()[0])
        cpu1 = [cpu_or_nan(p) for p in pids]
        sim1 = [cpu_or_nan(p) for p in sim_pids]
        me1 = cpu_seconds(me)
        m1, t1 = machine_jiffies(), time.monotonic()
        odom1, img1 = list(sub.odom), list(sub.images)
        sub.collect_ages = False
        ages = sorted(sub.ages)
        result["odom_age_ms"] = ({"median": ages[len(ages) // 2] * 1e3, "p99": ages[int(0.99 * (len(ages) - 1))] * 1e3,
                                  "max": ages[-1] * 1e3} if ages else None)
        dt = t1 - t0
        result["rss_mib"] = [rss_or_nan(p) for p in pids]
        result["pss_mib"] = [pss_mib(p) for p in pids]
        checks["every driver and simulator ran through the window"] = all(
            p.poll() is None for p in drivers + sims)
        result["window_s"] = dt
        result["cpu_pct"] = [(b - a) / dt * 100.0 for a, b in zip(cpu0, cpu1)]
        result["sims_cpu_pct"] = sum(b - a for a, b in zip(sim0, sim1)) / dt * 100.0
        result["subscriber_cpu_pct"] = (me1 - me0) / dt * 100.0
        busy = (m1[0] - m0[0]) / max(1, m1[1] - m0[1])
        result["machine_busy_pct"] = busy * 100.0 * (os.cpu_count() or 1)   # % of one core
        result["odom_hz"] = [(b - a) / dt for a, b in zip(odom0, odom1)]
        result["camera_fps"] = [(b - a) / dt for a, b in zip(img0, img1)] if args.camera else None
        result["load1"] = {"mean": sum(loads) / len(loads), "max": max(loads)}
        checks["odom from every robot in the window"] = all(h > 0 for h in result["odom_hz"])
    finally:
        t_stop = time.monotonic()
        stopped = stop_all(drivers)
        result["driver_stop_s"] = time.monotonic() - t_stop
        sims_stopped = stop_all(sims)
        if sub is not None:
            sub.close()
        for log in log_files:
            log.close()
        for p in sims:
            if p.stdout is not None:
                p.stdout.close()
    result["stopped"] = stopped
    checks["every driver stopped on SIGINT with exit 0"] = bool(drivers) and all(
        s["signal"] == "SIGINT" and s["exit"] == 0 for s in stopped)
    checks["every simulator stopped on SIGINT"] = bool(sims) and all(s["signal"] == "SIGINT" for s in sims_stopped)
    checks["no process left"] = all(gone(p.pid) for p in drivers + sims)
    failed = [name for name, ok in checks.items() if not ok]
    for k, s in enumerate(stopped):
        if "threads_after_sigint" in s:
            print(f"robot{k + 1} (N = {n}) still ran {STOP_STEP_S:.0f} s after SIGINT; its threads "
                  f"(name state wchan): {'; '.join(s['threads_after_sigint'])}")
    if failed:
        for k in range(n):
            path = logs / f"n{n}_robot{k + 1}.log"
            tail = path.read_text(errors="replace")[-1500:] if path.exists() else ""
            if tail.strip():
                print(f"--- robot{k + 1} (N = {n}) log tail:\n{tail}")
    return result


def rss_or_nan(pid: int) -> float:
    try:
        return rss_mib(pid)
    except OSError:
        return float("nan")


# ----------------------------------------------------------------------------- report

def fmt(x: Optional[float], digits: int = 1) -> str:
    return "-" if x is None or x != x else f"{x:.{digits}f}"


def summary(values: List[Optional[float]]) -> Dict[str, Optional[float]]:
    known = [v for v in values if v is not None and v == v]
    if not known:
        return {"min": None, "median": None, "mean": None, "max": None}
    return {"min": min(known), "median": statistics.median(known), "mean": sum(known) / len(known),
            "max": max(known)}


def escalated(stopped: List[Dict[str, Any]]) -> str:
    """" (K of N needed SIGTERM, M SIGKILL)" where SIGINT was not enough; "" if it was."""
    term = sum(1 for s in stopped if s["signal"] == "SIGTERM")
    kill = sum(1 for s in stopped if s["signal"] == "SIGKILL")
    if not term and not kill:
        return ""
    return f" ({term} of {len(stopped)} needed SIGTERM, {kill} SIGKILL)"


def report(results: List[Dict[str, Any]], args: argparse.Namespace, since: Optional[float] = None) -> None:
    """The tables of every N's results, each with the load since ``since`` (the start of the first N)."""
    cores = os.cpu_count() or 1
    rows = []
    for r in results:
        start = summary(r.get("startup_s", []))
        start_cpu = summary(r.get("startup_cpu_s", []))
        active, active_cpu = summary(r.get("active_s", [])), summary(r.get("active_cpu_s", []))
        streaming = sum(1 for s in r.get("startup_s", []) if s is not None)
        cpu, rss, pss = summary(r.get("cpu_pct", [])), summary(r.get("rss_mib", [])), summary(r.get("pss_mib", []))
        odom = summary(r.get("odom_hz", []))
        age = r.get("odom_age_ms")
        cam = summary(r["camera_fps"]) if r.get("camera_fps") is not None else None
        load = r.get("load1", {})
        rows.append([r["n"], f"{streaming}/{r['n']}", f"{fmt(start['median'], 2)} / {fmt(start['max'], 2)}",
                     fmt(start_cpu["median"], 2), f"{fmt(active['median'], 2)} / {fmt(active['max'], 2)}",
                     fmt(active_cpu["median"], 2),
                     f"{fmt(cpu['mean'])} / {fmt(cpu['max'])}", f"{fmt(rss['mean'], 0)}", f"{fmt(pss['mean'], 0)}",
                     f"{fmt(odom['min'])} / {fmt(odom['median'])}",
                     f"{fmt(age['median'])} / {fmt(age['p99'])}" if age else "-"]
                    + ([f"{fmt(cam['min'])} / {fmt(cam['median'])}"] if cam is not None else [])
                    + [f"{fmt(load.get('mean'), 2)} / {fmt(load.get('max'), 2)}"])
    camera_head = ["camera fps per robot, min / median (goal 15)"] if args.camera else []
    table(f"N simulated robots and N driver nodes on one machine ({cores} cores), one subscriber of every "
          f"robot's odom{' and compressed camera' if args.camera else ' (camera off)'}; per robot: "
          f"start-up = driver process started -> its first odom delivered (and the CPU time the driver "
          f"had used by then: on a busy machine start-up is mostly waiting for a core), and to its "
          f"node active (configured and activated: the rest of its start-up); CPU over a "
          f"{args.seconds:.0f} s window that opens {SETTLE_S:g} s after every driver is active; memory "
          f"at its end",
          ["N", "streaming", "start-up s, median / max", "CPU s used to start, median",
           "start-up to active s, median / max", "CPU s used until active, median",
           "driver CPU % of one core, mean / max", "RSS MiB", "PSS MiB",
           f"odom Hz per robot, min / median (goal {GOAL_HZ:.0f})",
           "odom age at delivery ms (now - header.stamp), median / p99"] + camera_head
          + ["load (1 min) in the window, mean / max"], rows, since=since)
    rows = []
    for r in results:
        if "machine_busy_pct" not in r:
            continue
        drivers = sum(r["cpu_pct"])
        rest = r["machine_busy_pct"] - drivers - r["sims_cpu_pct"] - r["subscriber_cpu_pct"]
        rest = max(0.0, rest) if rest == rest else rest   # NaN: a driver had gone
        rows.append([r["n"], fmt(r["machine_busy_pct"]), fmt(drivers), fmt(r["sims_cpu_pct"]),
                     fmt(r["subscriber_cpu_pct"]), fmt(rest), fmt(sum(r["pss_mib"]), 0),
                     fmt(r["driver_stop_s"], 2) + escalated(r["stopped"])])
    table(f"Where the machine's CPU went in the same windows (% of one core; the machine has {cores * 100} %); "
          "the rest is everything else running on the machine; N x PSS is the drivers' memory together",
          ["N", "machine busy", "drivers together", "simulators", "subscriber (this process)", "rest",
           "drivers' PSS together MiB", "all drivers stopped, s after SIGINT to all"], rows, since=since)
    rows = [[r["n"]] + ["yes" if ok else "NO" for ok in r["checks"].values()] for r in results]
    table("The script's own checks", ["N"] + list(results[0]["checks"].keys()), rows, since=since)


def readme_quote(results: List[Dict[str, Any]], camera: bool) -> None:
    """The README's few lines of it: per N, whether every robot streamed at the robot's
    rate, and what each driver took (``camera``: the run was made with ``--camera``, which
    its title and a column of the camera's rate say)."""
    rows = []
    for r in results:
        start, cpu = summary(r.get("startup_s", [])), summary(r.get("cpu_pct", []))
        active = summary(r.get("active_s", []))
        odom, pss = summary(r.get("odom_hz", [])), summary(r.get("pss_mib", []))
        streaming = sum(1 for s in r.get("startup_s", []) if s is not None)
        age = r.get("odom_age_ms")
        cam = [fmt(summary(r.get("camera_fps") or [])["min"])] if camera else []
        rows.append([r["n"], f"{streaming}/{r['n']}", fmt(odom["min"]), fmt(age["p99"]) if age else "-"] + cam
                    + [fmt(cpu["mean"]), fmt(pss["mean"], 0), fmt(start["max"], 2), fmt(active["max"], 2)])
    table(f"N simulated robots and N driver nodes on one {os.cpu_count()}-core machine, one "
          f"subscriber of every robot's odom{' and compressed camera' if camera else ''} "
          "(`bench/bench_scale.py`; all its figures, with the "
          "machine's load: [Benchmarks](docs/benchmarks.md#several-robots-bench_scale))",
          ["N", "robots streaming", f"odom Hz per robot, lowest (the robot sends {GOAL_HZ:.0f})",
           "odom age at delivery, p99 ms"] + (["camera fps per robot, lowest (the robot sends 15)"] if camera else [])
          + ["CPU % of one core per driver, mean",
             "memory per driver, PSS MiB", "all streaming, s after start", "all active, s after start"],
          rows, measured=False)


def main() -> Tuple[int, List[Dict[str, Any]], bool]:
    """Measure and print; the exit status (1 when a check failed), the results and whether
    the camera was on (--camera)."""
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="--no-docs: print the tables without writing them into docs/benchmarks.md, nor the "
               "summary the README quotes into README.md")
    ap.add_argument("--counts", default="1,2,4,8,16", help="comma-separated robot counts N")
    ap.add_argument("--max-n", type=int, default=16, help="leave out the counts above this")
    ap.add_argument("--seconds", type=float, default=10.0, help="measurement window per N")
    ap.add_argument("--start-timeout", type=float, default=120.0,
                    help="longest wait for every robot to stream, per N (s)")
    ap.add_argument("--camera", action="store_true",
                    help="drivers stream the camera and the subscriber takes it compressed")
    ap.add_argument("--json", type=Path, default=None, help="write the results and checks here")
    args = ap.parse_args()
    counts = [n for n in (int(c) for c in args.counts.split(",") if c.strip()) if 1 <= n <= args.max_n]
    if not counts:
        ap.error("no robot count left (--counts, --max-n)")
    print(f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}, discovery {os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE']}, "
          f"{os.cpu_count()} cores, N = {counts}, {args.seconds:.0f} s windows, "
          f"camera {'on' if args.camera else 'off'}", flush=True)
    results = []
    started = window_start()  # every table has a row of each N: their load is the whole run's
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        for n in counts:
            t = time.monotonic()
            r = run_n(n, args, Path(tmp))
            results.append(r)
            odom = summary(r.get("odom_hz", []))
            start = summary(r.get("startup_s", []))
            print(f"N = {n}: start-up max {fmt(start['max'], 2)} s, odom min {fmt(odom['min'])} Hz, "
                  f"driver CPU mean {fmt(summary(r.get('cpu_pct', []))['mean'])} %, load "
                  f"{fmt(r.get('load1', {}).get('mean'), 2)}; checks "
                  f"{'all passed' if all(r['checks'].values()) else 'FAILED: ' + str(r['checks'])} "
                  f"({time.monotonic() - t:.0f} s)"
                  + (f"; {r['sims_restarted']} simulator(s) restarted: another program claimed the port"
                     if r.get("sims_restarted") else ""), flush=True)
    report(results, args, since=started)
    ok = all(all(r["checks"].values()) for r in results)
    if args.json is not None:
        args.json.write_text(json.dumps({"results": results, "ok": ok}, indent=1))
    return (0 if ok else 1), results, args.camera


if __name__ == "__main__":
    with bench_report("bench_scale"):
        rc, results, camera = main()
    with bench_report("bench_scale", docs=ROOT / "README.md"):  # the README quotes it
        readme_quote(results, camera)
    sys.exit(rc)
