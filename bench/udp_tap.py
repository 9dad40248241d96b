"""A UDP relay for benchmarks: client <-> tap <-> simulated robot, on 127.0.0.1.

    python bench/udp_tap.py SIM_PORT       prints "ready LISTEN_PORT", then relays

It forwards every datagram at once, in its own process (so neither the
simulator's camera rendering nor a benchmark's threads delay it), and notes on
CLOCK_MONOTONIC when interesting datagrams pass:

* client -> robot: each DriveWheels (key: round(left tread speed mm/s * 100));
* robot -> client: each RobotState (its pose_angle_rad) and the datagram that
  completes each camera image (key: sha1 of the rebuilt JPEG).

A line "dump" on stdin prints everything noted so far as one JSON line; end of
stdin (or "quit") stops it. Only loopback addresses are used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cozmo_driver.protocol import messages as msgs  # noqa: E402
from cozmo_driver.protocol.camera import ImageAssembler, image_to_jpeg  # noqa: E402
from cozmo_driver.protocol.errors import RemoteProtocolError  # noqa: E402
from cozmo_driver.protocol.frames import decode_frame  # noqa: E402

DRIVE_WHEELS = msgs.DriveWheels.ID
ROBOT_STATE = msgs.RobotState.ID
IMAGE_CHUNK = msgs.ImageChunk.ID


def _arguments(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="Started by bench/bench_driver.py; 'dump' or 'quit' on stdin.")
    ap.add_argument("sim_port", metavar="SIM_PORT", type=int,
                    help="the simulated robot's UDP port on 127.0.0.1")
    args = ap.parse_args(argv)
    if not 1 <= args.sim_port <= 65535:
        ap.error(f"SIM_PORT {args.sim_port}: expected a UDP port number 1..65535")
    return args


def main() -> None:
    sim = ("127.0.0.1", _arguments().sim_port)
    front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    front.bind(("127.0.0.1", 0))
    back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    back.bind(("127.0.0.1", 0))
    client = None
    drives: dict = {}
    states: list = []
    frames: dict = {}
    frame_times: list = []
    assembler = ImageAssembler()
    print("ready", front.getsockname()[1], flush=True)
    stdin = sys.stdin.fileno()
    clock = time.clock_gettime
    mono = time.CLOCK_MONOTONIC
    while True:
        ready, _, _ = select.select([front, back, stdin], [], [])
        for sock in ready:
            if sock is front:
                data, addr = front.recvfrom(4096)
                t = clock(mono)
                client = addr
                back.sendto(data, sim)
                try:
                    for p in decode_frame(data).packets:
                        if p.ident == DRIVE_WHEELS:
                            m = msgs.DriveWheels.decode_body(p.body)
                            drives[round(m.lwheel_speed_mmps * 100)] = t
                except RemoteProtocolError:
                    pass
            elif sock is back:
                data, _ = back.recvfrom(4096)
                t = clock(mono)
                if client is not None:
                    front.sendto(data, client)
                try:
                    for p in decode_frame(data).packets:
                        if p.ident == ROBOT_STATE:
                            states.append((msgs.RobotState.decode_body(p.body).pose_angle_rad, t))
                        elif p.ident == IMAGE_CHUNK:
                            image = assembler.push_chunk(msgs.ImageChunk.decode_body(p.body))
                            if image is not None:
                                frames[hashlib.sha1(image_to_jpeg(image)).hexdigest()] = t
                                frame_times.append(t)
                except RemoteProtocolError:
                    pass
                del states[:-2000]
            else:
                line = os.read(stdin, 4096).decode()
                if not line or "quit" in line:
                    return
                if "dump" in line:
                    print(json.dumps({"drives": drives, "states": states, "frames": frames,
                                      "frame_times": frame_times}), flush=True)


if __name__ == "__main__":
    main()
