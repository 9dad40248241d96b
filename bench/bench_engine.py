#!/usr/bin/env python3
"""Protocol engine benchmarks, ours next to pycozmo 0.8.0 where it has an equivalent.

1. Message codec: microseconds per encode/decode of RobotState and ImageChunk.
2. Engine-added latency: from a send call to the datagram arriving at a robot
   socket on 127.0.0.1 (ours: the UDP adapter; pycozmo: its Connection thread).
3. Delivery of 1000 reliable packets at 0, 10 and 30 % loss each way (simulated
   time on the in-memory link, and the wall-clock CPU it took to compute).
4. Commands on a lossy link while the animation stream runs (a face image and an
   audio frame 30 times a second, as the driver's pacer sends them): how late a
   DriveWheels sent once a second reaches the simulated robot, and whether the
   shutdown's StopAllMotors reaches it (RobotLink + SimulatedRobot on the in-memory
   link, simulated time, several seeds).

Prints tables; asserts nothing. All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import timeit

from _common import bench_report, table  # noqa: E402  (puts the repository on sys.path)

from cozmo_driver.protocol import messages as msgs  # noqa: E402
from cozmo_driver.protocol.session import MessageReceived, Role, Session, SessionConfig  # noqa: E402
from cozmo_driver.transport.memory import Impairment, MemoryLink  # noqa: E402
from cozmo_driver.transport.udp import UdpTransport  # noqa: E402

try:
    import pycozmo  # noqa: F401  (test/benchmark oracle only)
    from pycozmo import protocol_encoder as pe
except Exception as exc:  # pragma: no cover - depends on the environment
    pycozmo = None
    print(f"pycozmo not available ({exc.__class__.__name__}: {exc}): reference columns skipped")


def per_call_us(fn, number: int) -> float:
    runs = timeit.repeat(fn, number=number, repeat=5)
    return min(runs) / number * 1e6



def bench_codec() -> None:
    state = msgs.RobotState(timestamp_ms=1234, pose_x_mm=10.0, pose_y_mm=-4.0, pose_angle_rad=0.5,
                            battery_voltage_v=4.1, status=0x8201, cliff_data_raw=[300, 310, 305, 299])
    state_body = state.encode_body()
    chunk = msgs.ImageChunk(frame_timestamp_ms=99, image_id=7, image_encoding=8, image_resolution=4,
                            image_chunk_count=10, chunk_id=3, data=bytes(range(256)) * 4)
    chunk_body = chunk.encode_body()
    rows = []
    ours = {
        "RobotState encode": per_call_us(state.encode_body, 20000),
        "RobotState decode": per_call_us(lambda: msgs.RobotState.decode_body(state_body), 20000),
        "ImageChunk encode": per_call_us(chunk.encode_body, 20000),
        "ImageChunk decode": per_call_us(lambda: msgs.ImageChunk.decode_body(chunk_body), 20000),
    }
    ref = {}
    if pycozmo is not None:
        p_state = pe.RobotState(timestamp=1234, pose_x=10.0, pose_y=-4.0, pose_angle_rad=0.5,
                                battery_voltage=4.1, status=0x8201, cliff_data_raw=(300, 310, 305, 299))
        p_chunk = pe.ImageChunk(frame_timestamp=99, image_id=7, image_encoding=8, image_resolution=4,
                                image_chunk_count=10, chunk_id=3, data=bytes(range(256)) * 4)
        assert p_state.to_bytes() == state_body and p_chunk.to_bytes() == chunk_body
        ref = {
            "RobotState encode": per_call_us(p_state.to_bytes, 5000),
            "RobotState decode": per_call_us(lambda: pe.RobotState.from_bytes(state_body), 5000),
            "ImageChunk encode": per_call_us(p_chunk.to_bytes, 5000),
            "ImageChunk decode": per_call_us(lambda: pe.ImageChunk.from_bytes(chunk_body), 5000),
        }
    for name, value in ours.items():
        r = ref.get(name)
        rows.append([name, f"{value:.2f}", f"{r:.2f}" if r else "-", f"{r / value:.1f}x" if r else "-"])
    table("Message codec, microseconds per call (best of 5)", ["operation", "ours", "pycozmo", "speed-up"],
          rows)


class _RobotPeer:
    """A robot-role session on UDP that timestamps every SetRobotVolume it receives."""

    def __init__(self) -> None:
        self.session = Session(Role.ROBOT, SessionConfig(peer_timeout=5.0), name="bench-robot")
        self.arrivals = {}
        self.transport = UdpTransport(self, local_addr=("127.0.0.1", 0), peer_policy="reset",
                                      name="bench-robot")

    def receive_datagram(self, data, now):
        arrived = time.perf_counter()
        self.session.receive_datagram(data, now)
        while True:
            event = self.session.next_event()
            if event is None:
                break
            if isinstance(event, MessageReceived) and event.message.NAME == "SetRobotVolume":
                self.arrivals.setdefault(event.message.level, arrived)

    def datagrams_to_send(self, now):
        return self.session.datagrams_to_send(now)

    def get_timer(self):
        return self.session.get_timer()

    def handle_timer(self, now):
        self.session.handle_timer(now)

    def next_event(self):
        return None


def _percentiles(samples):
    samples = sorted(samples)
    return (statistics.median(samples), samples[int(len(samples) * 0.99) - 1], samples[-1])


def latency_ours(n: int) -> list:
    robot = _RobotPeer()
    robot.transport.start()
    engine = Session(Role.ENGINE, name="bench-engine")
    transport = UdpTransport(engine, local_addr=("127.0.0.1", 0), remote_addr=robot.transport.local_address,
                             name="bench-engine").start()
    try:
        transport.call(engine.connect, time.monotonic())
        deadline = time.monotonic() + 5
        while not engine.is_connected and time.monotonic() < deadline:
            time.sleep(0.01)
        sent = {}
        for i in range(n):
            sent[i] = time.perf_counter()
            transport.call_soon(engine.send, msgs.SetRobotVolume(level=i))
            time.sleep(0.005)
        deadline = time.monotonic() + 5
        while len(robot.arrivals) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return [(robot.arrivals[i] - sent[i]) * 1e3 for i in range(n) if i in robot.arrivals]
    finally:
        transport.stop()
        robot.transport.stop()


def latency_pycozmo(n: int) -> list:
    robot = _RobotPeer()
    robot.transport.start()
    conn = pycozmo.conn.Connection(robot_addr=robot.transport.local_address)
    conn.start()
    try:
        conn.connect()
        deadline = time.monotonic() + 5
        while conn.state != conn.CONNECTED and time.monotonic() < deadline:
            time.sleep(0.01)
        sent = {}
        for i in range(n):
            sent[i] = time.perf_counter()
            conn.send(pe.SetRobotVolume(level=i))
            time.sleep(0.005)
        deadline = time.monotonic() + 5
        while len(robot.arrivals) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return [(robot.arrivals[i] - sent[i]) * 1e3 for i in range(n) if i in robot.arrivals]
    finally:
        conn.stop()
        robot.transport.stop()


def bench_latency() -> None:
    n = 300
    rows = []
    lat = latency_ours(n)
    med, p99, worst = _percentiles(lat)
    rows.append(["ours (UdpTransport)", len(lat), f"{med:.3f}", f"{p99:.3f}", f"{worst:.3f}"])
    if pycozmo is not None:
        lat = latency_pycozmo(n)
        if lat:
            med, p99, worst = _percentiles(lat)
            rows.append(["pycozmo Connection", len(lat), f"{med:.3f}", f"{p99:.3f}", f"{worst:.3f}"])
    table(f"Send call -> datagram at the robot socket, 127.0.0.1, ms ({n} sends, 5 ms apart)",
          ["engine", "received", "median", "p99", "max"], rows)


def bench_delivery() -> None:
    rows = []
    for loss in (0.0, 0.1, 0.3):
        engine = Session(Role.ENGINE)
        robot = Session(Role.ROBOT, SessionConfig(peer_timeout=5.0))
        got = []
        link = MemoryLink(engine, robot, Impairment(loss=loss, delay=0.002),
                          Impairment(loss=loss, delay=0.002), seed=7)
        link.on_event_b = lambda ev: got.append(ev) if isinstance(ev, MessageReceived) else None
        engine.connect(0.0)
        link.run_while(lambda: not engine.is_connected, 10.0)
        start = link.now
        cpu = time.process_time()
        for i in range(1000):
            engine.send(msgs.SetRobotVolume(level=i))
        link.run_while(lambda: len(got) < 1000, 120.0)
        cpu = time.process_time() - cpu
        in_order = [e.message.level for e in got] == list(range(1000))
        rows.append([f"{loss:.0%}", len(got), "yes" if in_order else "NO", f"{link.now - start:.2f}",
                     engine.stats.retransmissions, f"{cpu * 1e3:.0f}"])
    table("1000 reliable packets engine -> robot, 2 ms each way, in-memory link (simulated seconds)",
          ["loss each way", "delivered", "in order, once", "time s", "retransmissions", "CPU ms"], rows)


def bench_commands_under_loss(seeds: int = 6, seconds: int = 20) -> None:
    from cozmo_driver.client import RobotLink
    from cozmo_driver.sim import RobotConfig, SimulatedRobot

    rows = []
    for loss in (0.0, 0.02, 0.05, 0.1, 0.2):
        delays, stops, never, queue = [], [], 0, 0
        for seed in range(1, seeds + 1):
            link = RobotLink(name="bench")
            sim = SimulatedRobot(config=RobotConfig(seed=seed))
            net = MemoryLink(link, sim, Impairment(loss=loss, delay=0.005), Impairment(loss=loss, delay=0.005),
                             seed=seed)
            got = []
            net.on_event_b = lambda ev, got=got, net=net: (
                got.append((net.now, ev.message.NAME)) if isinstance(ev, MessageReceived) else None)
            link.start(net.now)
            net.run_while(lambda: not link.is_ready, 20.0)
            t0, sent = net.now, []
            for k in range(30 * seconds):
                net.run_until(t0 + k / 30.0)
                link.send(msgs.DisplayImage(image=bytes(600)))
                link.send(msgs.OutputAudio(samples=bytes(744)))
                if k % 30 == 15:
                    sent.append(net.now)
                    link.send(msgs.DriveWheels(lwheel_speed_mmps=float(k), rwheel_speed_mmps=0.0))
                queue = max(queue, link.session.send_queue_length)
            arrived = [t for t, name in got if name == "DriveWheels"]
            for t in sent:
                later = [a for a in arrived if a >= t]
                if later:
                    delays.append((later[0] - t) * 1e3)
            stop = net.now
            link.stop(net.now)
            net.run_until(net.now + 3.0)
            at = [t for t, name in got if name == "StopAllMotors" and t >= stop]
            if at:
                stops.append((at[0] - stop) * 1e3)
            else:
                never += 1
        q = statistics.quantiles(delays, n=10) if len(delays) > 1 else [float("nan")] * 9
        rows.append([f"{loss:.0%}", f"{len(delays)}/{seeds * seconds}", f"{statistics.median(delays):.0f}",
                     f"{q[-1]:.0f}", f"{max(delays):.0f}", queue,
                     f"{len(stops)}/{seeds}", f"{statistics.median(stops):.0f}" if stops else "-"])
    table(f"Commands behind the animation stream (30 faces + 30 audio frames a second), 5 ms each way, "
          f"in-memory link, {seeds} seeds x {seconds} s (simulated milliseconds)",
          ["loss each way", "DriveWheels delivered", "delay median", "delay p90", "delay max",
           "send queue max (packets)", "shutdown stop delivered", "stop delay median"], rows)


def main() -> int:
    argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="--no-docs: print the tables without writing them into docs/benchmarks.md").parse_args()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    bench_codec()
    bench_latency()
    bench_delivery()
    bench_commands_under_loss()
    return 0


if __name__ == "__main__":
    with bench_report("bench_engine"):
        rc = main()
    sys.exit(rc)
