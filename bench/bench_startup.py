"""Start-up: from starting a driver process to its first odom at a subscriber (issue #18).

Each round, on this machine only (127.0.0.1, one ROS domain reserved for the run), starts
one fresh process of each program below, one after the other, each against a simulator
of its own (a fresh ``cozmo-sim`` process, up before the clock starts):

* **the driver node**, exactly as users start it: ``cozmo_driver_node --ros-args -p
  robot_ip:=127.0.0.1 -p robot_port:=P`` (default parameters otherwise). The clock runs
  from just before the process is started to the first ``odom`` delivered to a subscriber
  in this process (CLOCK_MONOTONIC); the driver's CPU time by then is read from /proc.
* **the driver node through a timing wrapper** (``PHASES`` below): the same ``main()``,
  with the moments of its phases stamped from outside (interpreter up, the driver's
  module imported, rclpy initialised, the rclpy node and its DDS participant made, the
  driver's node made, its publishers made, the link opened, the robot ready, the first
  robot state handed to the publishers, start-up done): where the time goes.
* **pycozmo 0.8.0**, a process making its ``Client`` as its documentation does (``start``,
  ``connect``, ``wait_for_robot``) with a RobotState handler added first: process started
  -> the first RobotState handled (the process prints CLOCK_MONOTONIC, which is the
  machine's). pycozmo publishes nothing; this is its equivalent of the first odom.
* **a bare rclpy node** (``BARE``): a process that imports rclpy and nav_msgs, makes a
  node and an Odometry publisher and publishes 100 times a second: process started ->
  its first message here, the floor of any rclpy program on this machine.

The subscriber of a ROS run is made (a new rclpy context and node in this process) just
before its process is started, as a bring-up starts them all at once. A subscriber that
has been up for seconds before a new node appears is found by that node only at the
subscriber's next periodic announcement (Fast DDS, every 3 s) in about half the runs
here, whichever the node: measured so, start-up is mostly that lottery (0 to 3 s) and
says nothing about the program. When the subscriber's publisher count first becomes 1
(the subscriber matched the publisher: discovery done) is recorded too; on Humble, whose
subscriptions do not count their publishers, when the graph first shows a publisher of
the topic.

Byte code: the processes run with a byte-code cache of their own (``PYTHONPYCACHEPREFIX``
in a temporary directory, filled by one warm-up start of each program that is not
counted), as after an installation, which compiles the modules; ``--as-is`` runs them with
this environment's settings instead (with ``PYTHONDONTWRITEBYTECODE=1`` and no cache,
every start compiles the project's modules again).

Figures are printed and written into docs/benchmarks.md (``--no-docs``: not), never
asserted::

    .venv/bin/python bench/bench_startup.py [--runs 10] [--as-is] [--no-pycozmo] [--no-docs]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional


def _arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="Prints its tables and writes them into docs/benchmarks.md.")
    ap.add_argument("--runs", type=int, default=10, help="rounds: fresh processes of each program (10)")
    ap.add_argument("--as-is", action="store_true",
                    help="no byte-code cache of the benchmark's own: the processes get this "
                         "environment's byte-code settings")
    ap.add_argument("--no-pycozmo", action="store_true", help="leave pycozmo 0.8.0 out")
    ap.add_argument("--no-docs", action="store_true", help="print the tables only")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="longest wait for a program's first message, s (30)")
    return ap.parse_args()


if __name__ == "__main__":
    ARGS = _arguments()   # --help: usage, before anything is started or imported

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, bench_report, console, cpu_seconds, isolate_ros, table, window_start  # noqa: E402

isolate_ros()

from nav_msgs.msg import Odometry  # noqa: E402

from bench_scale import SpunNode, claimed, sim_port, start_sim, stop_all  # noqa: E402

#: a simulator lives this long at most (it stops by itself)
SIM_LIFE_S = 120.0
#: how long a simulator may take to say its port
SIM_START_S = 20.0

#: the driver's main() with its phases stamped (CLOCK_MONOTONIC), printed on stderr at exit as
#: one "PHASES <json>" line. Only what exists is wrapped (the names may change).
PHASES = r"""
import importlib.abc, importlib.machinery, json, sys, time
marks = [("interpreter up", time.monotonic())]
import atexit
atexit.register(lambda: print("PHASES " + json.dumps(marks), file=sys.stderr, flush=True))

def stamp(owner, attr, label, at_end=True):
    fn = getattr(owner, attr, None)
    if fn is None:
        return
    done = []
    def wrapper(*args, **kwargs):
        if not at_end and not done:
            marks.append((label, time.monotonic()))
        result = fn(*args, **kwargs)
        if at_end and not done:
            marks.append((label, time.monotonic()))
        done.append(1)
        return result
    setattr(owner, attr, wrapper)

#: module -> (class or None, function, label, stamped at its end); wrapped when the driver imports
#: the module, so that the wrapper imports nothing before the driver does
WRAP = {"cozmo_driver.ros._entry": [(None, "init", "rclpy initialised", True),
                                    (None, "make_node", "node made (parameters declared)", True)],
        "rclpy.lifecycle.node": [("LifecycleNode", "__init__", "rclpy node made (its DDS participant)", True)],
        "cozmo_driver.ros.driver_streams": [("DriverStreams", "build", "stream publishers made", True),
                                            ("DriverStreams", "on_state", "first robot state to the publishers", True)],
        "cozmo_driver.client.robot": [("Robot", "start", "link opened (Robot.start)", True)],
        "cozmo_driver.core.driver": [("DriverCore", "_on_robot_ready", "robot ready (handshake done)", False)],
        "cozmo_driver.ros.driver_node": [("CozmoDriverNode", "start", "start-up done (configured, activated)",
                                          True)]}

class Stamper(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in WRAP:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module
        def exec_and_wrap(module):
            exec_module(module)
            for owner, attr, label, at_end in WRAP[name]:
                stamp(module if owner is None else getattr(module, owner), attr, label, at_end)
        spec.loader.exec_module = exec_and_wrap
        return spec

sys.meta_path.insert(0, Stamper())
from cozmo_driver.ros import driver_node as dn
marks.append(("driver module imported", time.monotonic()))
sys.argv[0] = "cozmo_driver_node"
sys.exit(dn.main())
"""

#: a bare rclpy node: an Odometry publisher at 100 Hz on argv[1], for at most argv[2] s
BARE = r"""
import sys, time
import rclpy
from nav_msgs.msg import Odometry
rclpy.init()
node = rclpy.create_node("bench_startup_bare")
pub = node.create_publisher(Odometry, sys.argv[1], 10)
msg = Odometry()
end = time.monotonic() + float(sys.argv[2])
try:
    while time.monotonic() < end:
        pub.publish(msg)
        time.sleep(0.01)
except KeyboardInterrupt:
    pass
node.destroy_node()
rclpy.try_shutdown()
"""

#: pycozmo 0.8.0: a Client on 127.0.0.1:argv[1]; prints CLOCK_MONOTONIC of its first RobotState
PYCOZMO = r"""
import sys, time
import pycozmo
addr = ("127.0.0.1", int(sys.argv[1]))
pycozmo.conn.ROBOT_ADDR = addr   # never anything but the simulator
first = []
cli = pycozmo.Client(robot_addr=addr, enable_procedural_face=False, enable_animations=False)
cli.add_handler(pycozmo.protocol_encoder.RobotState, lambda c, p: first.append(time.monotonic()))
cli.start(); cli.connect(); cli.wait_for_robot(timeout=20.0)
end = time.monotonic() + 10.0
while not first and time.monotonic() < end:
    time.sleep(0.001)
print(first[0] if first else "nan", flush=True)
cli.disconnect(); cli.stop()
"""


# ----------------------------------------------------------------------------- one run

class Subscriber(SpunNode):
    """A fresh rclpy context and node in this process taking ``topic``, spun on a thread."""

    def __init__(self, topic: str) -> None:
        super().__init__("bench_startup", spin_timeout_s=0.05)
        self.first: Optional[float] = None
        self.pid: Optional[int] = None
        self.cpu: Optional[float] = None
        self.sub = self.node.create_subscription(Odometry, topic, self._on_msg, 10)
        self.start_spinning()

    def _on_msg(self, _msg: Odometry) -> None:
        if self.first is None:
            now = time.monotonic()
            if self.pid is not None:
                try:
                    self.cpu = cpu_seconds(self.pid)
                except OSError:
                    pass
            self.first = now

    def publishers(self) -> int:
        """The publishers matched with the subscription; on Humble, whose Subscription has no
        get_publisher_count (Iron and later), the publishers of its topic in the graph."""
        count = getattr(self.sub, "get_publisher_count", None)
        return count() if count is not None else self.node.count_publishers(self.sub.topic_name)


def _pdeathsig() -> List[str]:
    """A child that gets SIGINT if this script dies (where setpriv exists)."""
    return ["setpriv", "--pdeathsig", "INT"] if shutil.which("setpriv") else []


def start_simulator(seed: int) -> tuple:
    """A fresh simulator on a free port no other program claims: (process, port)."""
    for _ in range(5):
        proc = start_sim(seed=seed, duration=SIM_LIFE_S)
        port = sim_port(proc, time.monotonic() + SIM_START_S)
        if not claimed(port):
            return proc, port
        stop_all([proc])
        proc.stdout.close()
    raise RuntimeError("no simulator port free of other programs' claims")


def ros_run(command: List[str], topic: str, env: Dict[str, str], timeout: float,
            log: Path) -> Dict[str, Any]:
    """Start ``command`` with a fresh subscriber of ``topic``: seconds from the start to
    the subscriber matching its publisher and to the first message, the program's CPU
    seconds by then, and its stderr (the phases line of PHASES)."""
    sub = Subscriber(topic)
    out: Dict[str, Any] = {}
    try:
        with open(log, "w") as err:
            t0 = time.monotonic()
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err, cwd=ROOT, env=env)
            sub.pid = proc.pid
            matched = None
            while sub.first is None and time.monotonic() < t0 + timeout and proc.poll() is None:
                if matched is None and sub.publishers() > 0:
                    matched = time.monotonic()
                time.sleep(0.001)
            if matched is None and sub.first is not None:
                matched = sub.first
            out = {"t0": t0, "first_s": None if sub.first is None else sub.first - t0,
                   "matched_s": None if matched is None else matched - t0, "cpu_s": sub.cpu,
                   "exit_early": proc.poll()}
            stopped = stop_all([proc])[0]
            out["stop"] = stopped
    finally:
        sub.close()
    text = log.read_text(errors="replace")
    for line in text.splitlines():
        if line.startswith("PHASES "):
            out["phases"] = [(name, t - out["t0"]) for name, t in json.loads(line[7:])]
    if out.get("first_s") is None:
        out["log_tail"] = text[-1500:]
    return out


def pycozmo_run(port: int, env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", PYCOZMO, str(port)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        stdout, stderr = proc.communicate(timeout=timeout + 20.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    try:
        first = float(stdout.split()[0]) - t0
    except (IndexError, ValueError):
        return {"first_s": None, "log_tail": stderr[-1500:]}
    return {"first_s": first if first == first else None, "cpu_s": None}


# ----------------------------------------------------------------------------- the rounds

def child_environment(args: argparse.Namespace, cache: Optional[str]) -> Dict[str, str]:
    env = dict(os.environ)
    if cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache
    return env


def driver_command(port: int, phases: bool) -> List[str]:
    head = [sys.executable, "-c", PHASES] if phases else console("cozmo_driver_node",
                                                                   "cozmo_driver.ros.driver_node")
    return _pdeathsig() + head + ["--ros-args", "-p", "robot_ip:=127.0.0.1", "-p", f"robot_port:={port}"]


def one_round(k: int, args: argparse.Namespace, env: Dict[str, str], logs: Path,
              programs: List[str]) -> Dict[str, Dict[str, Any]]:
    results: Dict[str, Dict[str, Any]] = {}
    for program in programs:
        if program == "bare":
            results[program] = ros_run(_pdeathsig() + [sys.executable, "-c", BARE, "/bare/odom",
                                                        str(args.timeout + 5.0)],
                                       "/bare/odom", env, args.timeout, logs / f"{k}_bare.log")
            continue
        sim, port = start_simulator(seed=200 + k)
        try:
            if program == "pycozmo":
                results[program] = pycozmo_run(port, env, args.timeout)
            else:
                results[program] = ros_run(driver_command(port, program == "phases"), "/odom", env,
                                           args.timeout, logs / f"{k}_{program}.log")
        finally:
            stop_all([sim])
            sim.stdout.close()
    return results


# ----------------------------------------------------------------------------- report

def fmt(x: Optional[float], digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def spread(values: List[Optional[float]]) -> Dict[str, Optional[float]]:
    known = [v for v in values if v is not None]
    if not known:
        return {"n": 0, "median": None, "min": None, "max": None}
    return {"n": len(known), "median": statistics.median(known), "min": min(known), "max": max(known)}


#: issue #18: the first odom at most this long after the driver's process started (s)
GOAL_S = 0.5

LABELS = {"driver": "driver node (`cozmo_driver_node`)",
          "phases": "driver node through the timing wrapper",
          "pycozmo": "pycozmo 0.8.0 (first RobotState handled; it publishes nothing)",
          "bare": "a bare rclpy node publishing Odometry (the floor)"}


def report(rounds: List[Dict[str, Dict[str, Any]]], args: argparse.Namespace, programs: List[str],
           since: Optional[float] = None) -> None:
    """The tables of ``rounds``, each with the load since ``since`` (the start of the rounds)."""
    cache = "with this environment's byte-code settings" if args.as_is else \
        "byte code cached, as installed"
    rows = []
    for program in programs:
        runs = [r[program] for r in rounds if program in r]
        first = spread([r.get("first_s") for r in runs])
        matched = spread([r.get("matched_s") for r in runs])
        cpu = spread([r.get("cpu_s") for r in runs])
        rows.append([LABELS[program], f"{first['n']}/{len(runs)}", fmt(first["median"]),
                     f"{fmt(first['min'])} - {fmt(first['max'])}",
                     fmt(matched["median"]) if matched["n"] else "-", fmt(cpu["median"]) if cpu["n"] else "-"])
    table(f"Start-up, s: process started -> its first odom delivered to a subscriber made just before it "
          f"(pycozmo: its first RobotState handled); {args.runs} rounds of fresh processes, each on a fresh "
          f"simulator on 127.0.0.1, {cache} ({os.cpu_count()} cores)",
          ["program", "runs with a first message", "median", "min - max",
           "subscriber matched the publisher, median", "CPU s used by then, median"], rows, since=since)
    rows = []
    for program in ("driver", "bare"):
        firsts = [r[program].get("first_s") for r in rounds if program in r]
        first = spread(firsts)
        within = sum(1 for f in firsts if f is not None and f <= GOAL_S)
        rows.append([LABELS[program], fmt(first["median"]), f"{within}/{len(firsts)}",
                     "yes" if first["median"] is not None and first["median"] <= GOAL_S else "no",
                     "yes" if firsts and within == len(firsts) else "no"])
    table(f"Issue #18's start-up goal, the first odom at most {GOAL_S:g} s after the process started, in "
          f"the same rounds (a start with no first odom counts as missing it)",
          ["program", "median s", f"starts within {GOAL_S:g} s", "met at the median", "met in every start"],
          rows, since=since)
    phase_runs = [r["phases"] for r in rounds if "phases" in r]
    at: Dict[str, List[Optional[float]]] = {}
    for run in phase_runs:
        for name, _ in run.get("phases", []):
            at.setdefault(name, [])
    for name in at:
        at[name] = [next((t for n, t in run.get("phases", []) if n == name), None) for run in phase_runs]
    at["first odom at the subscriber"] = [run.get("first_s") for run in phase_runs]
    order = sorted(at, key=lambda name: spread(at[name])["median"] or 0.0)
    rows = []
    for k, name in enumerate(order):
        s = spread(at[name])
        step = None
        if k:
            step = spread([None if a is None or b is None else a - b
                           for a, b in zip(at[name], at[order[k - 1]])])["median"]
        rows.append([name, fmt(s["median"], 3), f"{fmt(s['min'], 3)} - {fmt(s['max'], 3)}", fmt(step, 3)])
    if phase_runs:
        table("Where the driver's start-up goes (the driver through the timing wrapper): s since its "
              "process was started, at the end of each phase (the robot's readiness: at its start), "
              "in the order of their medians",
              ["phase", "median", "min - max", "after the row above, median"], rows, since=since)


def main(args: argparse.Namespace) -> int:
    if args.runs < 1:
        print("--runs must be at least 1", file=sys.stderr)
        return 2
    programs = ["driver", "phases"] + ([] if args.no_pycozmo else ["pycozmo"]) + ["bare"]
    print(f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}, discovery {os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE']}, "
          f"{os.cpu_count()} cores, {args.runs} rounds of {', '.join(programs)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        logs = Path(tmp)
        cache = None if args.as_is else str(logs / "pycache")
        env = child_environment(args, cache)
        if cache is not None:   # warm-up: fill the byte-code cache; not counted
            one_round(0, args, env, logs, programs)
        rounds = []
        started = window_start()  # every table comes from all the rounds
        for k in range(1, args.runs + 1):
            rounds.append(one_round(k, args, env, logs, programs))
            line = ", ".join(f"{p} {fmt(r.get('first_s'))} s" for p, r in rounds[-1].items())
            print(f"round {k}: {line}", flush=True)
            for p, r in rounds[-1].items():
                if r.get("first_s") is None:
                    print(f"--- {p}: no first message; log tail:\n{r.get('log_tail', '')}", flush=True)
    report(rounds, args, programs, since=started)
    return 0


if __name__ == "__main__":
    with bench_report("bench_startup"):
        rc = main(ARGS)
    sys.exit(rc)
