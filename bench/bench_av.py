"""Benchmark of the face node and of the driver's display/audio pacing, as processes.

Run:  .venv/bin/python bench/bench_av.py [--quick] [--seconds S]   (S at least 2)

1. ``cozmo_face_node`` on its own (its own process, 30 fps): CPU time (utime +
   stime from /proc) and images published per second, resting (``idle:=false``),
   with idle life (the default: blinks and saccades), and with the gaze moved on
   every frame (``face/look_at`` at 30 Hz from this process: a render per frame).
2. ``cozmo_driver_node`` against the simulator (both their own processes, the
   camera off): the driver's CPU time idle, showing the face node's face, and
   streaming PCM on ``audio/pcm`` (16 kHz, 0.1 s chunks from this process); and
   from its ``/diagnostics``: frames sent, ticks sent late, how late the I/O
   thread's timer fired.

DDS discovery stays on loopback in a ROS_DOMAIN_ID of its own. Numbers only:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import math
import socket
import subprocess
import time
from typing import List, Optional

from _common import bench_report, console, cpu_seconds, isolate_ros, stop_process as stop, table  # noqa: E402

isolate_ros()

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from cozmo_interfaces.msg import AudioChunk  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import Point  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402




def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Probe:
    """This process's node: counts face images, publishes gaze and PCM, keeps diagnostics."""

    def __init__(self) -> None:
        self.node = rclpy.create_node("bench_av")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.faces = 0
        self.diags: List[tuple] = []  # (arrival time, the stream's values)
        self.node.create_subscription(Image, "display/face", self._on_face, qos_profile_sensor_data)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, QoSProfile(depth=10))
        self.look = self.node.create_publisher(Point, "face/look_at", 10)
        self.pcm = self.node.create_publisher(AudioChunk, "audio/pcm", 100)

    def _on_face(self, msg: Image) -> None:
        self.faces += 1

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.endswith("display and audio"):
                self.diags.append((time.monotonic(), {kv.key: kv.value for kv in status.values}))

    def spin(self, seconds: float, every=None, period: float = 1 / 30) -> None:
        end = time.monotonic() + seconds
        next_call = time.monotonic()
        while time.monotonic() < end:
            if every is not None and time.monotonic() >= next_call:
                every()
                next_call += period
            self.executor.spin_once(timeout_sec=0.002)


def measure(proc: subprocess.Popen, probe: Probe, seconds: float, every=None, period: float = 1 / 30):
    """(CPU % of one core, face images received per second) over ``seconds``."""
    probe.faces = 0
    c0, t0 = cpu_seconds(proc.pid), time.monotonic()
    probe.spin(seconds, every, period)
    c1, t1 = cpu_seconds(proc.pid), time.monotonic()
    return 100.0 * (c1 - c0) / (t1 - t0), probe.faces / (t1 - t0)



def bench_face_node(probe: Probe, seconds: float) -> None:
    rows = []
    rng = np.random.default_rng(1)
    for label, params, moving in (("resting (idle:=false)", ["-p", "idle:=false"], False),
                                  ("idle life (default)", [], False),
                                  ("gaze moved every frame", [], True)):
        proc = subprocess.Popen(console("cozmo_face_node", "cozmo_driver.ros.face_node")
                                + ["--ros-args", "--log-level", "warn"] + params,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            probe.spin(3.0)  # start-up and discovery

            def gaze() -> None:
                x, y = rng.uniform(-1, 1, 2)
                probe.look.publish(Point(x=float(x), y=float(y), z=0.0))

            cpu, rate = measure(proc, probe, seconds, gaze if moving else None)
            rows.append([label, f"{cpu:.1f}", f"{rate:.1f}"])
        finally:
            stop(proc)
    table(f"cozmo_face_node at 30 fps, {seconds:g} s each", ["face", "CPU % of one core",
                                                               "images published / s"], rows)


def bench_driver(probe: Probe, seconds: float) -> None:
    port = free_udp_port()
    sim = subprocess.Popen(console("cozmo-sim", "cozmo_driver.sim.cli") + ["--port", str(port), "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    driver = subprocess.Popen(console("cozmo_driver_node", "cozmo_driver.ros.driver_node")
                              + ["--ros-args", "--log-level", "warn", "-p", "robot_ip:=127.0.0.1",
                                 "-p", f"robot_port:={port}", "-p", "camera_enabled:=false"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    face: Optional[subprocess.Popen] = None
    rows = []
    try:
        probe.spin(4.0)
        cpu, _ = measure(driver, probe, seconds)
        running(driver, "the driver")
        rows.append(["idle (robot state streaming, camera off)", f"{cpu:.1f}", "-", "-", "-"])
        face = subprocess.Popen(console("cozmo_face_node", "cozmo_driver.ros.face_node")
                                + ["--ros-args", "--log-level", "warn"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        probe.spin(3.0)

        t0 = time.monotonic()
        cpu, _ = measure(driver, probe, seconds)
        running(driver, "the driver")
        running(face, "the face node")
        rows.append(["showing the face node's face (idle life)", f"{cpu:.1f}", *stream_numbers(probe, t0)])
        stop(face)
        face = None
        rate, n = 16000, 1600
        t = np.arange(int(rate * (seconds + 2))) / rate
        signal_pcm = (np.sin(2 * np.pi * 440 * t) * 6000).astype(np.int16)
        state = {"i": 0}

        def chunk() -> None:
            i = state["i"]
            probe.pcm.publish(AudioChunk(sample_rate=rate, channels=1,
                                         samples=signal_pcm[i * n:(i + 1) * n].tolist()))
            state["i"] = i + 1

        t0 = time.monotonic()
        cpu, _ = measure(driver, probe, seconds, chunk, 0.1)
        running(driver, "the driver")
        rows.append(["streaming PCM on audio/pcm (16 kHz, 0.1 s chunks)", f"{cpu:.1f}",
                     *stream_numbers(probe, t0)])
    finally:
        if face is not None:
            stop(face)
        stop(driver)
        stop(sim)
    table(f"cozmo_driver_node with the simulator, {seconds:g} s each",
          ["while", "CPU % of one core", "frames sent / s", "ticks sent late",
           "timer lateness mean / max (ms)"], rows)


def running(proc: subprocess.Popen, what: str) -> None:
    """A process measured must have run the whole window: else its figures are no one's."""
    if proc.poll() is not None:
        said = proc.stderr.read() if proc.stderr is not None else ""
        raise SystemExit(f"bench_av: {what} exited with status {proc.returncode} during the "
                         f"measurement; it said:\n{said[-2000:]}")


def stream_numbers(probe: Probe, since: float) -> List[str]:
    """Frames sent per second, ticks sent late and timer lateness, from the driver's
    /diagnostics received since ``since``."""
    window = [(t, d) for t, d in probe.diags if t >= since]
    if len(window) < 2:
        raise SystemExit(f"bench_av: {len(window)} /diagnostics report(s) of the driver in the "
                         "window: is another stack running in this ROS domain?")
    (t0, d0), (t1, d1) = window[0], window[-1]

    def delta(key: str) -> float:
        return float(d1.get(key, "nan")) - float(d0.get(key, "nan"))

    frames = delta("audio frames sent") + delta("silence frames sent")
    return [f"{frames / (t1 - t0):.1f}", f"{delta('underruns (ticks sent late)'):.0f}",
            f"{d1.get('tick lateness mean (ms)', '?')} / {d1.get('tick lateness max (ms)', '?')}"]


#: the shortest window: the driver's /diagnostics comes once a second, and its rates are
#: read between the first and the last report of a window, so it must hold two of them
MIN_SECONDS = 2.0


def window_seconds(text: str) -> float:
    """--seconds: a finite number of seconds, at least :data:`MIN_SECONDS`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not MIN_SECONDS <= value < math.inf:
        raise argparse.ArgumentTypeError(
            f"{text}: at least {MIN_SECONDS:g} s, so that the window holds two of the driver's "
            f"/diagnostics reports (one a second), between which its rates are read")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 s per measurement instead of 10")
    parser.add_argument("--seconds", type=window_seconds, default=None, metavar="S",
                        help=f"seconds per measurement (default 10, 4 with --quick; at least "
                             f"{MIN_SECONDS:g}: the driver's rates are read between two of its "
                             f"/diagnostics reports, one a second)")
    args = parser.parse_args()
    seconds = args.seconds if args.seconds is not None else (4.0 if args.quick else 10.0)
    rclpy.init()
    probe = Probe()
    try:
        bench_face_node(probe, seconds)
        bench_driver(probe, seconds)
    finally:
        probe.node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    with bench_report("bench_av"):
        main()
