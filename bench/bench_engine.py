#!/usr/bin/env python3
"""Protocol engine benchmarks, ours next to pycozmo 0.8.0 where it has an equivalent.

1. Message codec: microseconds per encode/decode of RobotState and ImageChunk.
2. Engine-added latency: from a send call to the datagram arriving at a robot
   socket on 127.0.0.1 (ours: the UDP adapter; pycozmo: its Connection thread).
3. Delivery of 1000 reliable packets at 10 % loss each way (simulated time on
   the in-memory link, and the wall-clock CPU it took to compute).

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


def main() -> int:
    argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="--no-docs: print the tables without writing them into docs/benchmarks.md").parse_args()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    bench_codec()
    bench_latency()
    bench_delivery()
    return 0


if __name__ == "__main__":
    with bench_report("bench_engine"):
        rc = main()
    sys.exit(rc)
