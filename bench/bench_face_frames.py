"""Every face frame at the robot (issue #18): a face changing every frame, counted frame by frame.

Three processes on 127.0.0.1, each started by this one:

* **the simulator** (a ``SimServer`` in a process of its own, as ``cozmo-sim`` runs it), which
  reads the frame number out of every ``DisplayImage`` it receives and reports it with the
  time it arrived;
* **the driver** (``cozmo_driver_node``, the camera off) connected to it;
* **a face source**: a ROS node that publishes ``display/face`` as ``cozmo_face_node`` does
  (sensor_msgs/Image, mono8 128 x 64, 0 or 255; reliable, transient local, depth 1; on a
  30 Hz rclpy timer, so on a clock of its own) with a new picture every frame: its frame
  number in 32 blocks, and the number's complement in 32 more as a check.

After a warm-up, for ``--seconds`` (600 by default): the frames published against the
frames the simulator received, which were dropped (published, never received), repeated
(received more than once) or out of order (received after a later one); the rate received;
the time from publication to the robot (both sides read the same CLOCK_MONOTONIC); the
driver's own counters from ``/diagnostics`` (face frames dropped by a full queue, ticks
sent late); and the CPU of each process with the load of the machine. The goal: 30.0 fps,
0 dropped, 0 repeated. Numbers are printed and written into docs/benchmarks.md
(``--no-docs``: printed only), never asserted::

    .venv/bin/python bench/bench_face_frames.py [--seconds 600] [--warmup 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Tuple

from _common import (ROOT, bench_report, console, cpu_seconds, isolate_ros, stop_process, table,  # noqa: E402
                     window_start)

from cozmo_driver.lifeline import PARENT_PID_ENV, parent_death_preexec  # noqa: E402

FPS = 30.0
#: how long a stage may take to come up (discovery, connection) before the run is given up
STARTUP_S = 60.0

# ----------------------------------------------------------------------------- the frame code

#: blocks of 8 x 16 pixels: rows 0-1 hold the frame number (16 bits each, lowest first),
#: rows 2-3 its complement; the robot shows every other row, so a block is 8 x 8 there
CODE = r"""
import numpy as np

def encode(n):
    screen = np.zeros((64, 128), dtype=np.uint8)
    for r, word in enumerate((n & 0xFFFFFFFF, ~n & 0xFFFFFFFF)):
        for b in range(32):
            row, col = r * 2 + b // 16, b % 16
            if word >> b & 1:
                screen[row * 16:(row + 1) * 16, col * 8:(col + 1) * 8] = 255
    return screen

def decode(framebuffer):
    '''The frame number of a (32, 128) framebuffer, or -1 when it holds none.'''
    words = []
    for r in range(2):
        word = 0
        for b in range(32):
            row, col = r * 2 + b // 16, b % 16
            if framebuffer[row * 8 + 4, col * 8 + 4]:
                word |= 1 << b
        words.append(word)
    return words[0] if words[1] == ~words[0] & 0xFFFFFFFF else -1
"""

#: the simulator: prints its port, then "D <arrival time> <frame number>" for every
#: DisplayImage it receives, until its stdin closes (or the bound), then "END <robot buffer overflows>"
SIM = CODE + r"""
import sys, threading, time
from cozmo_driver.lifeline import exit_with_parent
from cozmo_driver.protocol.display import decode_display
from cozmo_driver.sim import SimServer
exit_with_parent()
bound = float(sys.argv[1])
closed = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
with SimServer(host="127.0.0.1", port=0, seed=11) as sim:
    print(sim.address[1], flush=True)
    model = sim.robot.model
    seen = [0]

    def new_images():
        # on the simulator's I/O thread: the DisplayImages received since the last call
        total = model.command_counts["DisplayImage"]
        fresh = total - seen[0]
        seen[0] = total
        if not fresh:
            return []
        log = [(t, bytes(m.image)) for t, m in model.commands() if m.NAME == "DisplayImage"]
        return log[-fresh:]

    end = time.monotonic() + bound
    while not closed.is_set() and time.monotonic() < end:
        closed.wait(0.5)
        lines = []
        for t, data in sim.call(new_images):
            try:
                number = decode(decode_display(data))
            except Exception:
                number = -2
            lines.append(f"D {t:.6f} {number}")
        if lines:
            print("\n".join(lines), flush=True)
    print("END", sim.call(lambda: model.anim_overflows), flush=True)
"""

#: the face source: "ready" once the driver subscribes, then "P <time> <frame number>" for
#: every frame published on its 30 Hz timer, until its stdin closes (or the bound)
SOURCE = CODE + r"""
import sys, threading, time
import rclpy
from sensor_msgs.msg import Image
from cozmo_driver.lifeline import exit_with_parent
from cozmo_driver.ros.qos import QOS_LATCHED
exit_with_parent()
bound = float(sys.argv[1])
closed = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
rclpy.init()
node = rclpy.create_node("bench_face_frames_source")
pub = node.create_publisher(Image, "display/face", QOS_LATCHED)   # as cozmo_face_node
msg = Image(height=64, width=128, encoding="mono8", is_bigendian=0, step=128)
frames = [encode(n).tobytes() for n in range(64)]   # the first ones ready, the rest on the timer
count = [0]
out = []

def publish():
    n = count[0]
    msg.header.stamp = node.get_clock().now().to_msg()
    msg.data = frames[n] if n < len(frames) else encode(n).tobytes()
    pub.publish(msg)
    out.append(f"P {time.monotonic():.6f} {n}")
    count[0] = n + 1

end = time.monotonic() + bound
while pub.get_subscription_count() == 0 and time.monotonic() < end and not closed.is_set():
    rclpy.spin_once(node, timeout_sec=0.1)
print("ready", flush=True)
node.create_timer(1.0 / 30.0, publish)
flushed = time.monotonic()
while not closed.is_set() and time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.1)
    if out and time.monotonic() - flushed > 0.5:
        print("\n".join(out), flush=True)
        out.clear()
        flushed = time.monotonic()
if out:
    print("\n".join(out), flush=True)
print("END", count[0], flush=True)
node.destroy_node()
rclpy.try_shutdown()
"""


class Helper:
    """A ``python -c`` helper process whose stdout lines are collected on a thread; closing
    its stdin tells it to stop (each also stops by itself after its bound)."""

    def __init__(self, name: str, source: str, *args: str) -> None:
        self.name = name
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONPATH=path, **{PARENT_PID_ENV: str(os.getpid())})
        self.errors = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, "-c", source, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.errors, text=True, env=env)
        self.lines: List[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name=f"{name}-out", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def take(self) -> List[str]:
        with self._lock:
            lines, self.lines = self.lines, []
        return lines

    def peek(self, last: int) -> List[str]:
        with self._lock:
            return self.lines[-last:]

    def wait_line(self, predicate, timeout: float) -> str:
        """The first line (taken) that ``predicate`` accepts, within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for i, line in enumerate(self.lines):
                    if predicate(line):
                        del self.lines[:i + 1]
                        return line
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: nothing came within {timeout:g} s: {self.stderr_tail()}")

    def stderr_tail(self) -> str:
        return tail(self.errors)

    def finish(self, timeout: float = 20.0) -> None:
        """Close stdin (the helper stops), wait for it and for its last lines."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5.0)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.errors.close()


def tail(file) -> str:
    """The last 2000 characters written to ``file`` (a process's stderr)."""
    file.flush()
    file.seek(0)
    return file.read()[-2000:] or "(nothing on stderr)"


# ----------------------------------------------------------------------------- the driver's counters

class Diagnostics:
    """This process's node: the driver's "display and audio" values from /diagnostics."""

    def __init__(self) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile

        self.node = rclpy.create_node("bench_face_frames")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.latest: Dict[str, str] = {}
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on, QoSProfile(depth=10))

    def _on(self, msg) -> None:
        for status in msg.status:
            if status.name.endswith("display and audio"):
                self.latest = {kv.key: kv.value for kv in status.values}

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=min(0.2, max(0.0, end - time.monotonic())))

    def number(self, key: str) -> float:
        try:
            return float(self.latest.get(key, "nan"))
        except ValueError:
            return float("nan")

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


# ----------------------------------------------------------------------------- the run

def parse(lines: List[str], tag: str) -> List[Tuple[float, int]]:
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == tag:
            out.append((float(parts[1]), int(parts[2])))
    return out


def percentile(values: List[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))] if v else float("nan")


def run(seconds: float, warmup: float) -> Tuple[List[List[str]], List[List[str]]]:
    import rclpy

    bound = str(seconds + warmup + STARTUP_S + 60.0)
    rclpy.init()
    sim = source = driver = None
    diags: Optional[Diagnostics] = None
    driver_log = tempfile.TemporaryFile("w+")
    try:
        sim = Helper("simulator", SIM, bound)
        port = int(sim.wait_line(lambda line: line.isdigit(), STARTUP_S))
        driver = subprocess.Popen(
            console("cozmo_driver_node", "cozmo_driver.ros.driver_node")
            + ["--ros-args", "--log-level", "warn", "-p", "robot_ip:=127.0.0.1", "-p", f"robot_port:={port}",
               "-p", "camera_enabled:=false"],
            stdin=subprocess.DEVNULL, stdout=driver_log, stderr=subprocess.STDOUT, text=True,
            preexec_fn=parent_death_preexec())
        diags = Diagnostics()
        source = Helper("face source", SOURCE, bound)
        source.wait_line(lambda line: line == "ready", STARTUP_S)
        # warm-up: the face reaches the robot and the stream settles
        deadline = time.monotonic() + STARTUP_S
        while not any(n >= 0 for _, n in parse(sim.peek(50), "D")):
            if time.monotonic() > deadline or driver.poll() is not None:
                raise RuntimeError(f"no face frame reached the robot; the driver said: {tail(driver_log)}")
            diags.spin(0.2)
        diags.spin(warmup)
        before = dict(diags.latest)
        pids = {"driver": driver.pid, "face source": source.proc.pid, "simulator": sim.proc.pid,
                "this benchmark": os.getpid()}
        c0, t_start = {k: cpu_seconds(p) for k, p in pids.items()}, time.monotonic()
        load = [os.getloadavg()[0]]
        while time.monotonic() < t_start + seconds:
            diags.spin(min(1.0, t_start + seconds - time.monotonic()))
            load.append(os.getloadavg()[0])
        t_stop = time.monotonic()
        c1 = {k: cpu_seconds(p) for k, p in pids.items()}
        diags.spin(1.5)  # the window's last frames reach the robot, and a report comes
        after = dict(diags.latest)
        source.finish()
        diags.spin(1.0)
        sim.finish()
        published = parse(source.take(), "P")
        sim_lines = sim.take()
        received = parse(sim_lines, "D")
        robot_drops = next((line.split()[1] for line in sim_lines if line.startswith("END")), "?")
    finally:
        for helper in (source, sim):
            if helper is not None:
                helper.kill()
        if driver is not None:
            stop_process(driver, 20.0)
        if diags is not None:
            diags.close()
        driver_log.close()
        rclpy.try_shutdown()

    window = {n: t for t, n in published if t_start <= t < t_stop}
    span = t_stop - t_start
    arrivals = [(t, n) for t, n in received if n in window]
    seen: Dict[int, float] = {}
    repeated = out_of_order = 0
    newest = -1
    for t, n in arrivals:
        if n in seen:
            repeated += 1
            continue
        seen[n] = t
        if n < newest:
            out_of_order += 1
        newest = max(newest, n)
    dropped = sorted(set(window) - set(seen))
    at_robot = [t for t, n in received if n >= 0 and t_start <= t < t_stop]
    other = sum(1 for t, n in received if n < 0 and t_start <= t < t_stop)
    latency = [(seen[n] - window[n]) * 1e3 for n in seen]

    def delta(key: str) -> str:
        try:
            return f"{float(after[key]) - float(before[key]):.0f}"
        except (KeyError, ValueError):
            return "?"

    first_drops = ", ".join(str(n) for n in dropped[:5]) + (" ..." if len(dropped) > 5 else "")
    frames = [
        ["frames published (30 Hz timer)", f"{len(window)} ({len(window) / span:.2f} fps)"],
        ["DisplayImage frames received at the robot", f"{len(at_robot)} ({len(at_robot) / span:.2f} fps)"],
        ["published frames received", f"{len(seen)}"],
        ["dropped (published, never received)", f"{len(dropped)}" + (f": {first_drops}" if dropped else "")],
        ["repeated (received more than once)", f"{repeated}"],
        ["out of order (received after a later frame)", f"{out_of_order}"],
        ["other DisplayImages in the window (not a frame of the source)", f"{other}"],
        ["publication -> robot, ms: median / p99 / max",
         " / ".join(f"{percentile(latency, q):.1f}" for q in (0.5, 0.99, 1.0))],
        ["driver: face frames dropped (queue full)", delta("face frames dropped (queue full)")],
        ["driver: faces received", delta("faces received")],
        ["driver: ticks sent late", delta("underruns (ticks sent late)")],
        ["driver: timer lateness max, ms (since start)", after.get("tick lateness max (ms)", "?")],
        ["robot: times its animation buffer overflowed and was cleared (since start)", robot_drops],
    ]
    cpu = [[name, f"{(c1[name] - c0[name]) / span * 100.0:.1f}"] for name in pids]
    cpu.append(["load average (1 min): mean / max",
                f"{sum(load) / len(load):.2f} / {max(load):.2f} on {os.cpu_count()} cores"])
    return frames, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="With --no-docs the tables are printed only, not written into docs/benchmarks.md.")
    parser.add_argument("--seconds", type=float, default=600.0, help="the measured window (s; default 600)")
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="seconds of frames before the window (default 5)")
    options = parser.parse_args()
    if options.seconds <= 0 or options.warmup < 0:
        parser.error("--seconds must be > 0 and --warmup >= 0")
    isolate_ros()
    with bench_report("bench_face_frames"):
        started = window_start()  # both tables come from the one run: their load is the run's
        frames, cpu = run(options.seconds, options.warmup)
        table(f"A face changing every frame: the source's frames at the robot, {options.seconds:g} s "
              "window (simulator, driver and source each a process on 127.0.0.1)",
              ["what", "measured"], frames, since=started)
        table(f"CPU % of one core over the same {options.seconds:g} s", ["process", "CPU %"], cpu,
              since=started)


if __name__ == "__main__":
    main()
