"""Driver node benchmarks, next to pycozmo 0.8.0 where it has an equivalent.

Everything runs on this machine: the simulated robot (``cozmo-sim`` on
127.0.0.1, its own process) behind a timing relay, the driver node as its own
process (``cozmo_driver_node``, exactly as users run it), and a subscriber node
in this process. DDS discovery stays on loopback, in a ROS_DOMAIN_ID reserved
for the run.

Measured:

* cmd_vel published here -> the DriveWheels datagram reaching the robot side,
  matched by a unique speed per command;
* a RobotState datagram leaving the robot side -> ``odom`` delivered to the
  subscriber here, matched by the robot's heading (it turns slowly);
* the datagram with an image's last ImageChunk leaving the robot side ->
  ``camera/image_raw/compressed`` delivered here, matched by the JPEG's hash;
* CPU time of the driver process (utime + stime from /proc) while it streams
  RobotState (~33 Hz) and the camera (~15 fps), and its resident memory, with
  three sets of subscribers here: ``odom`` and the compressed image; those and
  ``camera/image_raw`` (decoded); and every stream the driver publishes
  (``/tf``, ``imu/data``, ``joint_states``, ``status``, ``battery_state``,
  ``camera/camera_info`` too). The driver fills in and publishes only the
  streams somebody subscribes to, so the three differ.

pycozmo's equivalents: ``Client.drive_wheels`` -> DriveWheels datagram;
RobotState datagram -> its RobotState handler; last chunk -> its
EvtNewRawCameraImage handler (it decodes every frame to a PIL image); the CPU
time and memory of a process running only a pycozmo Client with the camera on.
During the CPU measurements both turn the robot slowly, commanded ten times a
second (``cmd_vel`` published here; ``Client.drive_wheels`` in pycozmo's
process), so both handle the same streams and the same commands. The pycozmo
process runs during the driver's CPU measurements, on its own simulator and
relay, and is measured over the same windows: measured one after the other,
each got whatever else the machine was doing then, which moved pycozmo's
figure between 6.4 and 8.8 % from run to run on the same code.
The simulator runs as its own process behind a timing relay
(bench/udp_tap.py, its own process too), which stamps datagrams as they pass on
CLOCK_MONOTONIC, the clock this process stamps deliveries with; so the
simulator's own work (it renders every camera frame) delays no timestamp. The
relay adds one loopback hop each way to every path measured. Numbers are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import re
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from _common import (ROOT, bench_report, console, cpu_seconds, isolate_ros, lifeline_env, rss_mib,  # noqa: E402
                     stats_ms, stop_process, table, window_start)

isolate_ros()

import rclpy  # noqa: E402
from geometry_msgs.msg import Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import BatteryState, CameraInfo, CompressedImage, Image, Imu, JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from cozmo_interfaces.msg import RobotStatus  # noqa: E402


try:
    import pycozmo  # noqa: F401  (benchmark oracle only)
except Exception as exc:  # noqa: BLE001 - any import failure means: no reference column
    pycozmo = None
    print(f"pycozmo not available ({exc.__class__.__name__}: {exc}): reference columns skipped")



#: a simulator stops by itself after this many seconds (cozmo-sim --duration), far more than a
#: run needs (about two minutes), should this process be gone without stopping it
SIM_BOUND_S = 900.0


class Tap:
    """The simulated robot in its own process behind a timing relay (bench/udp_tap.py, which
    stops at the end of its stdin, so also when this process ends)."""

    def __init__(self, seed: int = 21) -> None:
        self.sim = subprocess.Popen([sys.executable, "-m", "cozmo_driver.sim.cli", "--port", "0",
                                     "--seed", str(seed), "--quiet", "--duration", f"{SIM_BOUND_S:.0f}"],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    cwd=ROOT, env=lifeline_env())
        line = self.sim.stdout.readline()
        match = re.search(r"udp://127\.0\.0\.1:(\d+)", line)
        if not match:
            raise RuntimeError(f"simulator did not start: {line!r}")
        self.sim_port = int(match.group(1))
        self.tap = subprocess.Popen([sys.executable, str(ROOT / "bench" / "udp_tap.py"),
                                     str(self.sim_port)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
        ready = self.tap.stdout.readline().split()
        if not ready or ready[0] != "ready":
            raise RuntimeError("timing relay did not start")
        self.port = int(ready[1])
        self.data: Dict[str, Any] = {}

    def dump(self) -> Dict[str, Any]:
        self.tap.stdin.write("dump\n")
        self.tap.stdin.flush()
        self.data = json.loads(self.tap.stdout.readline())
        return self.data

    def state_time(self, yaw: float) -> Optional[float]:
        for sent_yaw, t in reversed(self.data["states"]):
            if abs(math.remainder(sent_yaw - yaw, 2 * math.pi)) < 1e-6:
                return t
        return None

    def close(self) -> None:
        if self.tap.poll() is None:
            self.tap.stdin.close()   # end of stdin: the relay stops
            try:
                self.tap.wait(5.0)
            except subprocess.TimeoutExpired:
                pass
        for proc in (self.tap, self.sim):
            stop_process(proc, 5.0)


def now() -> float:
    """CLOCK_MONOTONIC, the clock the relay process stamps with."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def start_driver(port: int, extra: Dict[str, Any]) -> subprocess.Popen:
    cmd = console("cozmo_driver_node", "cozmo_driver.ros.driver_node")
    cmd += ["--ros-args", "--log-level", "warn", "-p", "robot_ip:=127.0.0.1",
            "-p", f"robot_port:={port}"]
    for k, v in extra.items():
        cmd += ["-p", f"{k}:={v}"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=lifeline_env())



def _latencies(tap: Tap, cmd_sent: Dict[int, float], odom_got: List[Tuple[float, float]],
               images_got: List[Tuple[str, float]]) -> Dict[str, List[float]]:
    data = tap.dump()
    drives = {int(k): t for k, t in data["drives"].items()}
    out: Dict[str, List[float]] = {"cmd": [drives[k] - t for k, t in cmd_sent.items() if k in drives]}
    odom = []
    for yaw, t in odom_got:
        sent = tap.state_time(yaw)
        if sent is not None:
            odom.append(t - sent)
    out["odom"] = odom
    out["image"] = [t - data["frames"][h] for h, t in images_got if h in data["frames"]]
    return out


def _measure_cpu(pid: int, seconds: float, keep_busy,
                 other: Optional[int] = None) -> Tuple[float, float, Optional[float]]:
    """CPU % of ``pid`` (and of ``other``, over the same window) and the window's length."""
    pids = [pid] if other is None else [pid, other]
    c0, t0 = [cpu_seconds(p) for p in pids], time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        keep_busy()
        time.sleep(0.1)
    c1, t1 = [cpu_seconds(p) for p in pids], time.monotonic()
    cpu = [(b - a) / (t1 - t0) * 100.0 for a, b in zip(c0, c1)]
    return cpu[0], t1 - t0, (cpu[1] if other is not None else None)


#: the CPU measurements: (label, whether decoded images are counted)
CPU_CASES = (("odom + compressed", False), ("+ image_raw (decoded)", True),
             ("+ every other stream", True))


def bench_ours(start_companion=None) -> Dict[str, Any]:
    """``start_companion()``, if given, starts the pycozmo client whose CPU is measured in
    the same windows as the driver's (see PycozmoCpuClient) and returns it."""
    results: Dict[str, Any] = {}
    tap = Tap()
    proc = start_driver(tap.port, {"cmd_vel_timeout": 1.0})
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bench_driver", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    odom_got: List[Tuple[float, float]] = []
    images_got: List[Tuple[str, float]] = []
    got = {"odom": 0, "images": 0, "raw": 0}
    collecting = threading.Event()

    def on_odom(msg: Odometry) -> None:
        t = now()
        got["odom"] += 1
        if collecting.is_set():
            q = msg.pose.pose.orientation
            odom_got.append((math.atan2(2.0 * q.w * q.z, 1.0 - 2.0 * q.z * q.z), t))

    def on_image(msg: CompressedImage) -> None:
        t = now()
        got["images"] += 1
        if collecting.is_set():
            images_got.append((hashlib.sha1(bytes(msg.data)).hexdigest(), t))

    node.create_subscription(Odometry, "odom", on_odom, 10)
    node.create_subscription(CompressedImage, "camera/image_raw/compressed", on_image,
                             qos_profile_sensor_data)
    cmd_pub = node.create_publisher(Twist, "cmd_vel", 10)
    stop = threading.Event()
    spinner = threading.Thread(target=lambda: [executor.spin_once(timeout_sec=0.05)
                                               for _ in iter(stop.is_set, True)], daemon=True)
    spinner.start()
    gc.freeze()  # the harness's own collector pauses are not the driver's latency
    turn = Twist()
    turn.angular.z = 0.4
    companion = None
    try:
        deadline = time.monotonic() + 20.0
        while (got["odom"] < 10 or got["images"] < 3 or cmd_pub.get_subscription_count() == 0) \
                and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        if got["odom"] < 10:
            raise RuntimeError("the driver did not stream: " + (proc.stderr.read() if proc.poll() else ""))
        # --- cmd_vel -> DriveWheels
        cmd_sent: Dict[int, float] = {}
        for k in range(300):
            cmd = Twist()
            cmd.linear.x = 0.01 + k * 1e-5    # unique tread speed: 10.00 + k/100 mm/s
            cmd_sent[round((10.0 + k * 0.01) * 100)] = now()
            cmd_pub.publish(cmd)
            time.sleep(0.02)
        time.sleep(0.3)
        # --- RobotState -> odom, last chunk -> CompressedImage, while turning slowly
        collecting.set()
        end = time.monotonic() + 10.0
        while time.monotonic() < end:
            cmd_pub.publish(turn)
            time.sleep(0.1)
        collecting.clear()
        time.sleep(0.2)
        results.update(_latencies(tap, cmd_sent, odom_got, images_got))
        # --- CPU and memory of the driver process, robot turning, camera on; pycozmo's
        # client, on its own simulator, measured over the same windows
        companion = start_companion() if start_companion is not None else None
        for label, with_raw in CPU_CASES:
            if label == CPU_CASES[1][0]:
                node.create_subscription(Image, "camera/image_raw",
                                         lambda m: got.__setitem__("raw", got["raw"] + 1),
                                         qos_profile_sensor_data)
                time.sleep(1.0)
            elif label == CPU_CASES[2][0]:
                for msg_type, topic, profile in ((TFMessage, "/tf", 100), (Imu, "imu/data", qos_profile_sensor_data),
                                                 (JointState, "joint_states", 10), (RobotStatus, "status", 10),
                                                 (BatteryState, "battery_state", 10),
                                                 (CameraInfo, "camera/camera_info", qos_profile_sensor_data)):
                    node.create_subscription(msg_type, topic, lambda m: None, profile)
                time.sleep(1.0)
            n0 = dict(got)
            cpu, dt, cpu_ref = _measure_cpu(proc.pid, 10.0, lambda: cmd_pub.publish(turn),
                                            companion.pid if companion is not None else None)
            results[f"cpu {label}"] = {
                "cpu": cpu, "rss": rss_mib(proc.pid), "pycozmo": cpu_ref,
                "state_hz": (got["odom"] - n0["odom"]) / dt,
                "fps": (got["raw"] - n0["raw"] if with_raw else got["images"] - n0["images"]) / dt}
        cmd_pub.publish(Twist())
        time.sleep(0.2)
        if companion is not None:
            results["cpu pycozmo"] = companion.finish()
    finally:
        if companion is not None:
            companion.close()
        stop.set()
        spinner.join(2.0)
        stop_process(proc)
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        context.try_shutdown()
        tap.close()
    return results


PYCOZMO_CLIENT = r"""
import sys, time
import pycozmo
addr = ("127.0.0.1", int(sys.argv[1]))
pycozmo.conn.ROBOT_ADDR = addr   # never anything but the simulator
cli = pycozmo.Client(robot_addr=addr, enable_animations=False, enable_procedural_face=False)
cli.start(); cli.connect(); cli.wait_for_robot(timeout=10.0)
n = {"state": 0, "image": 0}
cli.add_handler(pycozmo.protocol_encoder.RobotState, lambda c, p: n.__setitem__("state", n["state"] + 1))
cli.add_handler(pycozmo.event.EvtNewRawCameraImage, lambda c, i: n.__setitem__("image", n["image"] + 1))
cli.enable_camera(enable=True, color=False)
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:   # turning slowly, commanded 10 times a second like the driver
    cli.drive_wheels(lwheel_speed=-9.0, rwheel_speed=9.0)
    time.sleep(0.1)
cli.stop_all_motors()
print(n["state"], n["image"], flush=True)
cli.disconnect(); cli.stop()
"""


def bench_pycozmo() -> Dict[str, Any]:
    results: Dict[str, Any] = {}
    tap = Tap()
    addr = ("127.0.0.1", tap.port)
    pycozmo.conn.ROBOT_ADDR = addr   # never anything but the simulator
    cli = pycozmo.Client(robot_addr=addr, enable_animations=False, enable_procedural_face=False)
    odom_got: List[Tuple[float, float]] = []
    image_times: List[float] = []
    collecting = threading.Event()

    def on_state(_cli: Any, pkt: Any) -> None:
        t = now()
        if collecting.is_set():
            odom_got.append((float(pkt.pose_angle_rad), t))

    def on_image(_cli: Any, _image: Any) -> None:
        t = now()
        if collecting.is_set():
            image_times.append(t)

    cli.start()
    gc.freeze()
    try:
        cli.connect()
        cli.wait_for_robot(timeout=10.0)
        cli.add_handler(pycozmo.protocol_encoder.RobotState, on_state)
        cli.add_handler(pycozmo.event.EvtNewRawCameraImage, on_image)
        cli.enable_camera(enable=True, color=False)
        time.sleep(1.0)
        cmd_sent: Dict[int, float] = {}
        for k in range(300):
            speed = 10.0 + k * 0.01
            cmd_sent[round(speed * 100)] = now()
            cli.drive_wheels(lwheel_speed=speed, rwheel_speed=speed)
            time.sleep(0.02)
        time.sleep(0.3)
        collecting.set()
        end = time.monotonic() + 10.0
        while time.monotonic() < end:
            cli.drive_wheels(lwheel_speed=-9.0, rwheel_speed=9.0)
            time.sleep(0.1)
        collecting.clear()
        cli.stop_all_motors()
        time.sleep(0.2)
        results.update(_latencies(tap, cmd_sent, odom_got, []))
        # pycozmo hands out decoded PIL images, not bytes to match: pair each with
        # the latest image completed at the relay before it
        sent = sorted(tap.data["frame_times"])
        lat = []
        for t in image_times:
            before = [s for s in sent if s <= t][-1:]
            if before:
                lat.append(t - before[0])
        results["image"] = lat
    finally:
        cli.disconnect()
        cli.stop()
        tap.close()
    return results


class PycozmoCpuClient:
    """A process running only a pycozmo client (PYCOZMO_CLIENT) on its own simulator and
    relay, receiving the same streams as the driver and turning the robot the same way,
    for ``seconds``. It runs while the driver's CPU is measured, so that both are
    measured over the same windows, under the same load on the machine: measured one
    after the other, each would get whatever the machine happened to be doing."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.tap = Tap(seed=22)
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(PYCOZMO_CLIENT)
        self.script = f.name
        self.proc = subprocess.Popen([sys.executable, f.name, str(self.tap.port), str(seconds)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.close()
            raise RuntimeError("pycozmo client did not start: " + self.proc.stderr.read())
        time.sleep(1.0)

    def finish(self) -> Dict[str, Any]:
        """Its resident memory and the streams it received (waits for it to end)."""
        result: Dict[str, Any] = {"rss": rss_mib(self.pid)}
        counts = self.proc.stdout.readline().split()
        elapsed = max(1e-9, self.seconds)
        result["state_hz"] = int(counts[0]) / elapsed if counts else math.nan
        result["fps"] = int(counts[1]) / elapsed if counts else math.nan
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if os.path.exists(self.script):
            os.unlink(self.script)
        self.tap.close()


def main() -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Measure and print; what was measured, ours and pycozmo's (for the README's quote)."""
    argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="--no-docs: print the tables without writing them into docs/benchmarks.md, nor the "
               "summary the README quotes into README.md").parse_args()
    # The harness's own threads (publisher, subscriber, pycozmo's) must not wait
    # CPython's default 5 ms for the GIL between stamping and sending.
    sys.setswitchinterval(0.0005)
    print(f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}, discovery "
          f"{os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE']}, {os.cpu_count()} cores")
    companion_s = 1.0 + len(CPU_CASES) * 11.5  # the driver's CPU cases, with their settling
    started = window_start()  # both tables come from both measurements: their load is since then
    ours = bench_ours((lambda: PycozmoCpuClient(companion_s)) if pycozmo is not None else None)
    ref = bench_pycozmo() if pycozmo is not None else {}
    rows = []
    for key, ours_name, ref_name, _ in PATHS:
        rows.append(["driver node", ours_name] + stats_ms(ours.get(key, [])))
        if ref:
            rows.append(["pycozmo", ref_name] + stats_ms(ref.get(key, [])))
    table("Latency, ms (same machine, simulated robot on 127.0.0.1)",
          ["who", "path", "samples", "median", "p99", "max"], rows, since=started)
    rows = []
    for label, _ in CPU_CASES:
        r = ours[f"cpu {label}"]
        ref_cpu = f"{r['pycozmo']:.1f}" if r.get("pycozmo") is not None else "-"
        rows.append([f"driver node, {label}", f"{r['cpu']:.1f}", ref_cpu, f"{r['rss']:.0f}",
                     f"{r['state_hz']:.1f}", f"{r['fps']:.1f}"])
    if "cpu pycozmo" in ours:
        r = ours["cpu pycozmo"]
        rows.append(["pycozmo Client (decodes every frame)", "-", "-", f"{r['rss']:.0f}",
                     f"{r['state_hz']:.1f}", f"{r['fps']:.1f}"])
    table("Process CPU (% of one core) and resident memory while streaming RobotState and camera; "
          "the driver's rows name what is subscribed; pycozmo's client runs at the same time on "
          "its own simulator and is measured over the same 10 s windows",
          ["process", "CPU %", "pycozmo CPU %, same window", "RSS MiB", "states/s delivered",
           "images/s delivered"], rows, since=started)
    return ours, ref


#: the three latency paths: (key, the driver's path, pycozmo's path, the README's words)
PATHS = (("cmd", "cmd_vel published -> DriveWheels datagram at the robot",
          "Client.drive_wheels() -> DriveWheels datagram at the robot",
          "a drive command to the robot (cmd_vel; pycozmo: drive_wheels())"),
         ("odom", "RobotState datagram sent -> odom delivered to a subscriber",
          "RobotState datagram sent -> RobotState handler",
          "a robot state to the program (odom in another process; pycozmo: its handler)"),
         ("image", "last ImageChunk sent -> CompressedImage delivered",
          "last ImageChunk sent -> EvtNewRawCameraImage (decoded)",
          "a camera frame to the program (compressed; pycozmo: decoded)"))
def readme_quote(ours: Dict[str, Any], ref: Dict[str, Any]) -> None:
    """The README's few lines of what :func:`main` measured: each path's median and p99 for
    both, and the CPU of the driver process with odom and the compressed camera subscribed,
    beside pycozmo's whole program (the subscriber, the benchmark's process, is not counted:
    bench_stack measures the driver with a consumer)."""
    rows = []
    for key, _, _, words in PATHS:
        cells = []
        for values in (ours.get(key, []), ref.get(key, []) if ref else []):
            _, median, p99, _ = stats_ms(values)
            cells.append(f"{median} / {p99}" if values else "-")
        rows.append([f"{words}, ms: median / p99"] + cells)
    label, _ = CPU_CASES[0]
    cpu = ours[f"cpu {label}"]
    rows.append([f"CPU % of one core while the robot streams its state and camera ({label} subscribed): "
                 "the driver process alone; the program that subscribes not counted (driver + a consumer: "
                 "see [docs/benchmarks.md, bench_stack]"
                 "(docs/benchmarks.md#the-whole-stack-in-one-process-bench_stack))",
                 f"{cpu['cpu']:.1f}", f"{cpu['pycozmo']:.1f}" if cpu.get("pycozmo") is not None else "-"])
    table("The driver node against pycozmo 0.8.0 on the same simulated robot and machine, in "
          "the same run (`bench/bench_driver.py`; all its figures, with the machine's load: "
          "[Benchmarks](docs/benchmarks.md#the-driver-node-bench_driver))",
          ["what", "driver node", "pycozmo 0.8.0"], rows, measured=False)


if __name__ == "__main__":
    with bench_report("bench_driver"):
        measured = main()
    with bench_report("bench_driver", docs=ROOT / "README.md"):  # the README quotes it
        readme_quote(*measured)
