"""Fuzz the driver and the simulator with bad datagrams while the robot drives (issue #17).

Three processes besides this one: the simulated Cozmo (this script in ``--role sim``:
a :class:`~cozmo_driver.sim.server.SimServer` on a free UDP port of 127.0.0.1 that
prints its ground truth 50 times a second), the fuzzer (``--role fuzz``: a UDP proxy
between the driver and the simulator, which the driver takes for its robot, and the
sender of the bad datagrams) and ``cozmo_driver_node`` aimed at the proxy. This
process, an rclpy node in a ROS_DOMAIN_ID of its own (localhost discovery), drives the
robot in a slow circle over ``cmd_vel`` (Twist, 10 Hz) and listens to ``odom``,
``link_status`` and ``/diagnostics``.

After a quiet baseline (``--baseline`` s of driving) the fuzzer sends ``--count`` bad
datagrams spread evenly over ``--seconds`` s, seeded by ``--seed``, to three targets:

* ``foreign->driver``: from a socket of its own on 127.0.0.1 to the driver's port;
* ``forged->driver``: through the proxy's socket, so from the robot's own address;
* ``foreign->sim``: from a socket of its own to the simulator's port.

Kinds: random bytes, truncated frames, oversized frames, valid headers of every frame
type (and unknown ones) with garbage payloads, bad magic, frames whose packet or body
lengths are wrong (every message id), bit-flipped real frames (foreign targets only),
and real robot->driver datagrams captured at the proxy, replayed (the latest again,
older ones, and a small share, ``--handshake-share``, of the connection's first
datagrams, the robot's Connect among them) and in shuffled bursts. Not sent, because a receiver cannot tell them from
the real thing (the protocol has no authentication): to the simulator, frames that
start a connection (RESET: the robot adopts the sender of the latest RESET as its
client, by design; their type byte is changed); from the robot's address, garbage
that happens to decode as a RobotState (regenerated) and bit-flipped real frames (a
flipped timestamp is a newer state with an old pose). ``--crafted-states`` adds
that forgery on purpose, RobotStates with a timestamp ahead of the robot's, to show
what it does.

Reported for the baseline, the fuzz and a quiet period after it: whether the driver
and the simulator are alive, odom messages and rate, the longest gap between two odom
messages (a hang), connections lost, the largest pose jump between two consecutive odom messages beyond
what the commanded speed explains, backward steps of odom's yaw (the robot turns one
way only) and of its stamps, the pose error of odom against the simulator's ground
truth (aligned once, standing still, before driving), the robot's true speed against
the commanded one, the driver's counters (link_status, /diagnostics, its log's count
of stale robot states dropped) and CPU of each process. Figures go into
docs/benchmarks.md (block ``fuzz_stack``; ``--no-docs``: print only), and ``--json``
writes them to a file. Exit status 1 when a check failed (crash, hang, pose jump, odom
stopped).

    .venv/bin/python bench/fuzz_stack.py --count 1000000 --seconds 400

Every wait is bounded; every child is stopped with SIGINT, then SIGTERM, then SIGKILL,
and dies with this process (parent-death signal, and stdin closing).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import random
import re
import select
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

import _common  # bench/ is the script's directory
from _common import bench_report, cpu_seconds, keep_discovery_local, table, window_start

# ----------------------------------------------------------------------------- constants

TARGETS = ("foreign->driver", "forged->driver", "foreign->sim")
#: share of the datagrams each target gets
TARGET_WEIGHTS = (0.35, 0.40, 0.25)
KINDS = ("random", "truncated", "oversized", "garbage_payload", "bad_magic", "bad_length",
         "bad_body", "mutated", "replay", "shuffle", "replay_handshake", "crafted_state")
#: share of the replays that replay a datagram of the connection's handshake instead
HANDSHAKE_SHARE = 0.002
#: the commanded circle: forward speed (m/s) and turn rate (rad/s)
SPEED_MPS = 0.04
TURN_RADPS = 0.25
#: a step of odom this much (mm) beyond commanded speed x stamp interval is a jump
JUMP_MM = 5.0
#: a longer gap between two odom messages is a hang (s)
HANG_S = 2.0
_STALE = re.compile(r"dropped (\d+) robot state\(s\) \(the latest .*?; (\d+) so far")


def _log(text: str) -> None:
    print(f"fuzz_stack: {text}", flush=True)


def _child_preexec() -> Callable[[], None]:
    """SIGINT at its default disposition (a background job inherits it ignored), and
    SIGTERM when this process dies."""
    from cozmo_driver.lifeline import parent_death_preexec

    death = parent_death_preexec(signal.SIGTERM)

    def preexec() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        death()

    return preexec


def _stop_child(proc: subprocess.Popen, name: str, waits: Tuple[float, float, float] = (10.0, 5.0, 5.0)
                ) -> str:
    """SIGINT, then SIGTERM, then SIGKILL, each with a bounded wait; how it ended."""
    if proc.poll() is not None:
        return f"had exited ({proc.returncode})"
    for sig, wait in zip((signal.SIGINT, signal.SIGTERM, signal.SIGKILL), waits):
        try:
            proc.send_signal(sig)
        except OSError:
            pass
        try:
            code = proc.wait(wait)
            how = f"exit {code} after {signal.Signals(sig).name}"
            if sig != signal.SIGINT:
                _log(f"{name} needed {signal.Signals(sig).name}")
            return how
        except subprocess.TimeoutExpired:
            continue
    return "still running after SIGKILL"


# ============================================================================= role: sim


def run_sim(seed: int, max_life: float) -> int:
    """The simulator; ground truth on stdout; ends on stdin EOF, a signal or max_life."""
    from cozmo_driver.sim import SimServer

    from cozmo_driver.stop_flag import StopFlag

    stop = StopFlag()   # its signal handler takes no lock (an Event.set() does)
    stop.install()

    def watch_stdin() -> None:
        try:
            while sys.stdin.readline():
                pass
        except (OSError, ValueError):
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    sim = SimServer(host="127.0.0.1", port=0, seed=seed).start()
    out = sys.stdout
    try:
        out.write(json.dumps({"ready": list(sim.address), "pid": os.getpid()}) + "\n")
        out.flush()
        deadline = time.monotonic() + max_life
        while not stop.wait(0.02) and time.monotonic() < deadline:
            if not sim.running:
                out.write(json.dumps({"error": "the simulator's transport stopped"}) + "\n")
                break
            try:
                t = time.monotonic()
                x, y, yaw = sim.true_pose()
            except Exception as exc:  # noqa: BLE001 - reported, the parent decides
                out.write(json.dumps({"error": f"true_pose failed: {exc!r}"}) + "\n")
                out.flush()
                continue
            out.write(f"T {t:.6f} {x:.4f} {y:.4f} {yaw:.6f}\n")
            out.flush()
        try:
            stats = sim.stats()
            out.write(json.dumps({"stats": {
                "wrong_source": stats["transport"]["wrong_source"],
                "datagrams_in": stats["transport"]["datagrams_in"],
                "malformed": stats["session"]["malformed_datagrams"]
                + stats["session"]["malformed_packets"],
                "connects": stats["session"].get("connects", 0),
                "peer": list(sim.peer() or ())}}) + "\n")
            out.flush()
        except Exception as exc:  # noqa: BLE001
            out.write(json.dumps({"error": f"stats failed: {exc!r}"}) + "\n")
    except BrokenPipeError:
        pass
    finally:
        sim.stop()
    return 0


# ============================================================================= role: fuzz


class Generator:
    """Bad datagrams of every kind, seeded; templates from the proxy's captures."""

    def __init__(self, seed: int, captured_up: Deque[bytes], captured_down: Deque[bytes],
                 crafted_states: bool, handshake_up: List[bytes], handshake_down: List[bytes],
                 handshake_share: float) -> None:
        from cozmo_driver.protocol import frames as fr
        from cozmo_driver.protocol import messages as msgs

        self.fr, self.msgs = fr, msgs
        self.rng = random.Random(seed)
        self.up = captured_up          # driver -> robot
        self.down = captured_down      # robot -> driver
        self.crafted = crafted_states
        self.handshake_up, self.handshake_down = handshake_up, handshake_down
        self.handshake_share = handshake_share
        self.last_kind = ""
        self.frame_types = [int(t) for t in fr.FrameType] + [0x00, 0x05, 0x06, 0x08, 0x0A, 0x0C, 0xFF]
        self.message_ids = sorted(msgs.MESSAGES_BY_ID)
        self.corpus = self._corpus()
        self.robot_state = msgs.MESSAGES_BY_NAME["RobotState"]
        self.skipped_forgeries = 0
        self.forged_state_replays = 0   # forged datagrams (replayed, shuffled) holding a RobotState
        self.rewritten_resets = 0

    def _corpus(self) -> List[bytes]:
        fr, msgs = self.fr, self.msgs
        M = msgs.MESSAGES_BY_NAME
        ft = fr.FrameType
        packets = b"".join(msgs.encode_packet(m) for m in (
            M["RobotState"](timestamp_ms=5, battery_voltage_v=3.9), M["Ping"](time_sent_ms=1.0, counter=2),
            M["DriveWheels"](lwheel_speed_mmps=10.0, rwheel_speed_mmps=12.0)))
        return [
            fr.encode_frame(ft.RESET, 0, 0, fr.OOB_SEQ),
            fr.encode_frame(ft.RESET_ACK, fr.OOB_SEQ, fr.OOB_SEQ, 0),
            fr.encode_frame(ft.FIN, fr.OOB_SEQ, fr.OOB_SEQ, 1),
            fr.encode_frame(ft.PING, fr.OOB_SEQ, fr.OOB_SEQ, 2, struct.pack("<dIIB", 12.5, 3, 0, 0)),
            fr.encode_frame(ft.ENGINE_ACT, 1, 1, fr.OOB_SEQ, bytes([0x4B]) + bytes(8)),
            fr.encode_frame(ft.ENGINE, 0, 2, 1, packets),
            fr.encode_frame(ft.ROBOT, fr.OOB_SEQ, fr.OOB_SEQ, 5, packets),
        ]

    # ------------------------------------------------------------------ helpers

    def _template(self, pool: Deque[bytes]) -> bytes:
        rng = self.rng
        if pool and rng.random() < 0.8:
            try:
                return pool[rng.randrange(len(pool))]
            except IndexError:  # the proxy thread rotated the pool meanwhile
                pass
        return rng.choice(self.corpus)

    def _header(self, ftype: int) -> bytes:
        rng = self.rng
        return struct.pack("<7sBHHH", self.fr.MAGIC, ftype, rng.getrandbits(16), rng.getrandbits(16),
                           rng.getrandbits(16))

    def _packet(self, ptype: int, body: bytes, length: Optional[int] = None) -> bytes:
        return struct.pack("<BH", ptype, len(body) if length is None else length & 0xFFFF) + body

    def _bad_body(self) -> bytes:
        """A frame with one packet of a known message whose body has a wrong length."""
        rng, msgs = self.rng, self.msgs
        cls = msgs.MESSAGES_BY_ID[rng.choice(self.message_ids)]
        size = cls.SIZE if cls.SIZE is not None else cls.MIN_SIZE
        choices = [max(0, cls.MIN_SIZE - 1), max(0, cls.MIN_SIZE - rng.randint(1, 8)),
                   size + rng.randint(1, 64), rng.randint(0, 300)]
        n = rng.choice(choices)
        body = bytes([cls.ID]) + rng.randbytes(n)
        ptype = int(cls.PACKET_TYPE)
        ftype = self.fr.FrameType.ROBOT if cls.SENDER == "robot" else self.fr.FrameType.ENGINE
        if ftype == self.fr.FrameType.ROBOT and ptype >= 5:
            head = struct.pack("<7sBHHH", self.fr.MAGIC, ftype, 0, 0, 0)  # OOB seq
        else:
            head = self._header(ftype)
        return head + self._packet(ptype, body)

    def _bad_length(self) -> bytes:
        rng, fr = self.rng, self.fr
        ft = fr.FrameType
        which = rng.randrange(6)
        if which == 0:    # packet header declares more than there is
            body = rng.randbytes(rng.randint(0, 40))
            return self._header(rng.choice((ft.ENGINE, ft.ROBOT))) + self._packet(
                rng.choice((4, 5, 10, 11)), body, len(body) + rng.randint(1, 2000))
        if which == 1:    # declares less: the rest is a truncated second packet
            body = rng.randbytes(rng.randint(4, 60))
            return self._header(rng.choice((ft.ENGINE, ft.ROBOT))) + self._packet(
                rng.choice((4, 5)), body, rng.randint(0, len(body) - 3))
        if which == 2:    # PING with a body too short or too long
            return self._header(ft.PING) + rng.randbytes(rng.choice((0, 1, 7, 12, 16, 40)))
        if which == 3:    # ENGINE_ACT without its command id, or a bare header
            return self._header(ft.ENGINE_ACT) + (b"" if rng.random() < 0.5 else b"\x4b")
        if which == 4:    # RESET / RESET_ACK / FIN with a payload
            return self._header(rng.choice((ft.RESET, ft.RESET_ACK, ft.FIN))) + rng.randbytes(
                rng.randint(1, 64))
        # a packet header cut in the middle
        return self._header(rng.choice((ft.ENGINE, ft.ROBOT))) + rng.randbytes(rng.randint(1, 2))

    def _mutated(self, pool: Deque[bytes]) -> bytes:
        data = bytearray(self._template(pool))
        rng = self.rng
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        return bytes(data)

    def _crafted_state(self) -> Optional[bytes]:
        """A real RobotState datagram with its timestamp moved ahead (a forgery)."""
        fr, msgs, rng = self.fr, self.msgs, self.rng
        for data in reversed(list(self.down)[-40:]):
            try:
                frame = fr.decode_frame(data)
            except Exception:  # noqa: BLE001
                continue
            for p in frame.packets:
                if p.ident == self.robot_state.ID and p.packet_type == 5:
                    state = msgs.decode_message(p.packet_type, p.ident, p.body)
                    state.timestamp_ms = (int(state.timestamp_ms) + rng.randint(100, 100000)) % (1 << 32)
                    return fr.encode_frame(fr.FrameType.ROBOT, fr.OOB_SEQ, fr.OOB_SEQ, frame.ack,
                                           msgs.encode_packet(state))
        return None

    def _decodes_as_state(self, data: bytes) -> bool:
        """Whether a datagram decodes to a frame holding a well-formed RobotState."""
        fr, msgs = self.fr, self.msgs
        if len(data) < fr.HEADER_SIZE + 4 or data[:7] != fr.MAGIC:
            return False
        try:
            frame = fr.decode_frame(data)
        except Exception:  # noqa: BLE001 - RemoteProtocolError: not a state
            return False
        for p in frame.packets:
            if p.ident == self.robot_state.ID:
                try:
                    msgs.decode_message(p.packet_type, p.ident, p.body)
                    return True
                except Exception:  # noqa: BLE001
                    continue
        return False

    # ------------------------------------------------------------------ one datagram

    def kinds_for(self, target: str) -> List[str]:
        kinds = ["random", "truncated", "oversized", "garbage_payload", "bad_magic", "bad_length",
                 "bad_body", "replay", "shuffle"]
        if target != "forged->driver":
            kinds.append("mutated")
        elif self.crafted:
            kinds.append("crafted_state")
        return kinds

    def make(self, target: str, kind: str) -> List[bytes]:
        """One datagram (a shuffled burst: several) of ``kind`` for ``target``."""
        rng, fr = self.rng, self.fr
        pool = self.up if target == "foreign->sim" else self.down
        if kind == "random":
            n = rng.randint(0, 64) if rng.random() < 0.5 else rng.randint(0, 1500)
            out = [rng.randbytes(n)]
        elif kind == "truncated":
            t = self._template(pool)
            out = [t[:rng.randrange(len(t))]]
        elif kind == "oversized":
            t = self._template(pool)
            extra = rng.randint(fr.MAX_FRAME_SIZE - len(t) + 1, 3 * fr.MAX_FRAME_SIZE) if len(t) < \
                fr.MAX_FRAME_SIZE else rng.randint(1, 1000)
            if rng.random() < 0.01:
                extra = rng.randint(8000, 60000)
            out = [t + rng.randbytes(max(1, extra))]
        elif kind == "garbage_payload":
            out = [self._header(rng.choice(self.frame_types)) + rng.randbytes(rng.randint(0, 200))]
        elif kind == "bad_magic":
            t = bytearray(self._template(pool))
            i = rng.randrange(7)
            t[i] ^= rng.randint(1, 255)
            out = [bytes(t)]
        elif kind == "bad_length":
            out = [self._bad_length()]
        elif kind == "bad_body":
            out = [self._bad_body()]
        elif kind == "mutated":
            out = [self._mutated(pool)]
        elif kind == "replay" and rng.random() < self.handshake_share and (
                self.handshake_up if target == "foreign->sim" else self.handshake_down):
            kind = "replay_handshake"
            out = [rng.choice(self.handshake_up if target == "foreign->sim" else self.handshake_down)]
        elif kind == "replay":
            if pool:
                recent = rng.random() < 0.5
                try:
                    out = [pool[-1 - rng.randrange(min(5, len(pool)))] if recent
                           else pool[rng.randrange(len(pool))]]
                except IndexError:
                    out = [rng.choice(self.corpus)]
            else:
                out = [rng.choice(self.corpus)]
        elif kind == "shuffle":
            snapshot = list(pool)[-32:] or list(self.corpus)
            burst = [rng.choice(snapshot) for _ in range(rng.randint(2, 6))]
            rng.shuffle(burst)
            out = burst
        elif kind == "crafted_state":
            crafted = self._crafted_state()
            out = [crafted] if crafted is not None else [rng.choice(self.corpus)]
        else:
            raise ValueError(kind)
        self.last_kind = kind
        if target == "foreign->sim":
            fixed = []
            for data in out:
                if len(data) >= 8 and data[:7] == fr.MAGIC and data[7] == fr.FrameType.RESET:
                    data = data[:7] + bytes([fr.FrameType.FIN]) + data[8:]
                    self.rewritten_resets += 1
                fixed.append(data)
            out = fixed
        elif target == "forged->driver" and kind in ("replay", "shuffle", "replay_handshake"):
            self.forged_state_replays += sum(self._decodes_as_state(d) for d in out)
        elif target == "forged->driver" and kind != "crafted_state":
            for i, data in enumerate(out):
                for _ in range(20):
                    if not self._decodes_as_state(data):
                        break
                    self.skipped_forgeries += 1
                    data = rng.randbytes(len(data))
                out[i] = data
        return out


class Proxy:
    """driver <-> proxy socket (the driver's robot) <-> upstream socket <-> simulator."""

    def __init__(self, sim_addr: Tuple[str, int]) -> None:
        self.sim_addr = sim_addr
        self.psock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.psock.bind(("127.0.0.1", 0))
        self.usock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.usock.bind(("127.0.0.1", 0))
        for s in (self.psock, self.usock):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.driver_addr: Optional[Tuple[str, int]] = None
        self.captured_up: Deque[bytes] = deque(maxlen=512)
        self.captured_down: Deque[bytes] = deque(maxlen=512)
        #: the first datagrams of the first connection, each way (RESET, Connect, ...)
        self.handshake_up: List[bytes] = []
        self.handshake_down: List[bytes] = []
        self.up = self.down = self.stray = self.errors = 0
        self.send_lock = threading.Lock()   # the proxy socket is shared with the forger
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="proxy", daemon=True)

    @property
    def port(self) -> int:
        return self.psock.getsockname()[1]

    def _run(self) -> None:
        psock, usock = self.psock, self.usock
        while not self.stop.is_set():
            try:
                readable, _, _ = select.select([psock, usock], [], [], 0.1)
            except (OSError, ValueError):
                return
            for sock in readable:
                for _ in range(64):
                    try:
                        data, addr = sock.recvfrom(65536, socket.MSG_DONTWAIT)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        self.errors += 1
                        break
                    try:
                        if sock is psock:
                            if self.driver_addr is None or data[7:8] == b"\x01":
                                self.driver_addr = addr  # the driver (re)connects
                            if addr != self.driver_addr:
                                self.stray += 1
                                continue
                            usock.sendto(data, self.sim_addr)
                            self.captured_up.append(data)
                            if len(self.handshake_up) < 8:
                                self.handshake_up.append(data)
                            self.up += 1
                        else:
                            if addr != self.sim_addr or self.driver_addr is None:
                                self.stray += 1
                                continue
                            with self.send_lock:
                                psock.sendto(data, self.driver_addr)
                            self.captured_down.append(data)
                            if len(self.handshake_down) < 8:
                                self.handshake_down.append(data)
                            self.down += 1
                    except OSError:
                        self.errors += 1

    def forge(self, data: bytes) -> None:
        """Send ``data`` to the driver from the robot's address (the proxy's socket)."""
        if self.driver_addr is not None:
            with self.send_lock:
                self.psock.sendto(data, self.driver_addr)


def run_fuzz(options: argparse.Namespace) -> int:
    """The proxy and the fuzzer. stdin: ``go`` starts the fuzz; EOF ends everything."""
    sim_addr = ("127.0.0.1", options.sim_port)
    proxy = Proxy(sim_addr)
    proxy.thread.start()
    from cozmo_driver.stop_flag import StopFlag

    stop = StopFlag()   # its signal handler takes no lock (an Event.set() does)
    stop.install()
    go = threading.Event()

    def watch_stdin() -> None:
        try:
            while True:
                line = sys.stdin.readline()
                if not line:
                    break
                if line.strip() == "go":
                    go.set()
        except (OSError, ValueError):
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    out_lock = threading.Lock()

    def emit(obj: Dict[str, Any]) -> None:
        with out_lock:
            try:
                sys.stdout.write(json.dumps(obj) + "\n")
                sys.stdout.flush()
            except (BrokenPipeError, ValueError):
                stop.set()

    emit({"ready": proxy.port, "pid": os.getpid()})
    gen = Generator(options.seed, proxy.captured_up, proxy.captured_down, options.crafted_states,
                    proxy.handshake_up, proxy.handshake_down, options.handshake_share)
    foreign = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    foreign.bind(("127.0.0.1", 0))
    foreign.setblocking(False)
    sent: Dict[str, Dict[str, int]] = {t: {} for t in TARGETS}
    errors = {"send_errors": 0, "would_block": 0}
    deadline = time.monotonic() + options.max_life
    while not stop.is_set() and not go.wait(0.1):
        if time.monotonic() > deadline:
            stop.set()
    total = 0
    t_start = time.monotonic()
    if go.is_set() and not stop.is_set():
        count, seconds = options.count, max(0.1, options.seconds)
        rng = gen.rng
        tick = 0.01
        next_report = t_start + 1.0
        while total < count and not stop.is_set() and time.monotonic() < deadline:
            now = time.monotonic()
            due = min(count, int(count * min(1.0, (now - t_start + tick) / seconds)))
            while total < due and not stop.is_set():
                target = rng.choices(TARGETS, TARGET_WEIGHTS)[0]
                if target == "forged->driver" and proxy.driver_addr is None:
                    target = "foreign->sim"
                datagrams = gen.make(target, rng.choice(gen.kinds_for(target)))
                kind = gen.last_kind
                for data in datagrams:
                    if total >= count:
                        break
                    try:
                        if target == "foreign->driver":
                            if proxy.driver_addr is None:
                                continue
                            foreign.sendto(data, proxy.driver_addr)
                        elif target == "forged->driver":
                            proxy.forge(data)
                        else:
                            foreign.sendto(data, sim_addr)
                    except BlockingIOError:
                        errors["would_block"] += 1
                    except OSError:
                        errors["send_errors"] += 1
                    total += 1
                    per = sent[target]
                    per[kind] = per.get(kind, 0) + 1
            if now >= next_report:
                emit({"progress": total, "t": now - t_start})
                next_report = now + 1.0
            time.sleep(max(0.0, tick - (time.monotonic() - now)))
        emit({"done": {"sent": sent, "total": total, "elapsed_s": time.monotonic() - t_start,
                       "errors": errors, "skipped_forgeries": gen.skipped_forgeries,
                       "forged_state_replays": gen.forged_state_replays,
                       "rewritten_resets": gen.rewritten_resets,
                       "proxy": {"up": proxy.up, "down": proxy.down, "stray": proxy.stray,
                                 "errors": proxy.errors}}})
    while not stop.wait(0.2):      # keep proxying until told to end
        if time.monotonic() > deadline:
            break
    proxy.stop.set()
    proxy.thread.join(timeout=2.0)
    return 0


# ============================================================================= the run


@dataclass
class Window:
    """What was measured in one period of the run."""

    name: str
    t0: float = 0.0
    t1: float = 0.0
    odom: int = 0
    longest_gap_s: float = 0.0
    max_excess_step_mm: float = 0.0
    jumps: int = 0
    yaw_backward: int = 0
    stamp_backward: int = 0
    errors_mm: List[float] = field(default_factory=list)
    poses: List[Tuple[float, float, float]] = field(default_factory=list)  # (t, x mm, y mm)
    true_path_mm: float = 0.0
    cpu: Dict[str, float] = field(default_factory=dict)
    counters0: Dict[str, float] = field(default_factory=dict)
    counters1: Dict[str, float] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return max(1e-9, self.t1 - self.t0)

    @property
    def rate_hz(self) -> float:
        return self.odom / self.seconds


class Child:
    """A child process whose stdout lines are read on a thread."""

    def __init__(self, name: str, command: List[str], env: Dict[str, str], on_line: Callable[[str], None],
                 log: Path) -> None:
        self.name = name
        self.log = log
        self._stderr = open(log, "wb")
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=env, preexec_fn=_child_preexec(),
                                     text=True, bufsize=1)
        self.on_line = on_line
        self.thread = threading.Thread(target=self._read, name=f"{name}-out", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        for line in stream:
            self.on_line(line)

    def send(self, line: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> str:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()   # the child's own way out
        except OSError:
            pass
        try:
            self.proc.wait(3.0)
            how = f"exit {self.proc.returncode} on stdin EOF"
        except subprocess.TimeoutExpired:
            how = _stop_child(self.proc, self.name)
        self.thread.join(timeout=2.0)
        self._stderr.close()
        return how


class Truth:
    """The simulator's true poses, (t, x mm, y mm, yaw rad), in arrival order."""

    def __init__(self) -> None:
        self.samples: Deque[Tuple[float, float, float, float]] = deque(maxlen=200_000)
        self.ready: Optional[Tuple[str, int]] = None
        self.pid: Optional[int] = None
        self.stats: Dict[str, Any] = {}
        self.errors: List[str] = []
        self.lock = threading.Lock()

    def on_line(self, line: str) -> None:
        if line.startswith("T "):
            try:
                t, x, y, yaw = (float(v) for v in line.split()[1:5])
            except ValueError:
                return
            with self.lock:
                self.samples.append((t, x, y, yaw))
            return
        try:
            obj = json.loads(line)
        except ValueError:
            return
        if "ready" in obj:
            self.ready = tuple(obj["ready"])  # type: ignore[assignment]
            self.pid = obj.get("pid")
        elif "stats" in obj:
            self.stats = obj["stats"]
        elif "error" in obj:
            self.errors.append(obj["error"])

    def snapshot(self) -> List[Tuple[float, float, float, float]]:
        with self.lock:
            return list(self.samples)

    def at(self, t: float, samples: Optional[List[Tuple[float, float, float, float]]] = None
           ) -> Optional[Tuple[float, float, float]]:
        """The true pose at monotonic time ``t``, interpolated; None if not bracketed."""
        if samples is None:
            samples = self.snapshot()
        i = bisect.bisect_left(samples, (t,))
        if i == 0 or i >= len(samples):
            return None
        a, b = samples[i - 1], samples[i]
        f = (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else 0.0
        dyaw = math.atan2(math.sin(b[3] - a[3]), math.cos(b[3] - a[3]))
        return a[1] + f * (b[1] - a[1]), a[2] + f * (b[2] - a[2]), a[3] + f * dyaw

    def last_time(self) -> float:
        with self.lock:
            return self.samples[-1][0] if self.samples else -math.inf


class FuzzState:
    """What the fuzz child reported."""

    def __init__(self) -> None:
        self.ready: Optional[int] = None
        self.pid: Optional[int] = None
        self.progress = 0
        self.done: Optional[Dict[str, Any]] = None

    def on_line(self, line: str) -> None:
        try:
            obj = json.loads(line)
        except ValueError:
            return
        if "ready" in obj:
            self.ready, self.pid = obj["ready"], obj.get("pid")
        elif "progress" in obj:
            self.progress = obj["progress"]
        elif "done" in obj:
            self.done = obj["done"]


def _yaw(q) -> float:
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def _compose(a, b):
    c, s = math.cos(a[2]), math.sin(a[2])
    return (a[0] + c * b[0] - s * b[1], a[1] + s * b[0] + c * b[1], a[2] + b[2])


def _inverse(a):
    c, s = math.cos(a[2]), math.sin(a[2])
    return (-(c * a[0] + s * a[1]), s * a[0] - c * a[1], -a[2])


class Monitor:
    """The rclpy side: cmd_vel out, odom / link_status / diagnostics in."""

    def __init__(self, truth: Truth) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        from cozmo_interfaces.msg import LinkStatus

        self.truth = truth
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        self.node = rclpy.create_node("fuzz_stack_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.Twist = Twist
        self.cmd = self.node.create_publisher(Twist, "cmd_vel", 10)
        self.node.create_subscription(Odometry, "odom", self._on_odom, QoSProfile(depth=50))
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(LinkStatus, "link_status", self._on_link, latched)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 10)
        self.driving = False
        self.timer = self.node.create_timer(0.1, self._on_timer)
        self.window: Optional[Window] = None
        self.first_odom: Optional[float] = None
        self.last: Optional[Tuple[float, int, Tuple[float, float, float], float]] = None
        self.world_to_odom = None
        self.link: Dict[str, float] = {}
        self.diag: Dict[str, float] = {}
        self.odom_total = 0
        self.odom_latest: Optional[Tuple[float, float, float]] = None

    def _on_timer(self) -> None:
        msg = self.Twist()
        if self.driving:
            msg.linear.x, msg.angular.z = SPEED_MPS, TURN_RADPS
        self.cmd.publish(msg)

    def _on_link(self, msg) -> None:
        self.link = {"state": msg.state, "datagrams_received": msg.datagrams_received,
                     "malformed_dropped": msg.malformed_dropped,
                     "wrong_source_dropped": msg.wrong_source_dropped}

    def _on_diag(self, msg) -> None:
        wanted = {"malformed datagrams dropped", "malformed packets dropped", "unknown messages",
                  "duplicate packets", "out-of-window packets", "connections", "connections lost",
                  "wrong-source datagrams dropped", "odometry re-anchorings",
                  "camera chunks invalid", "camera images dropped incomplete", "datagrams received"}
        for status in msg.status:
            for kv in status.values:
                if kv.key in wanted:
                    try:
                        self.diag[kv.key] = float(kv.value)
                    except ValueError:
                        pass

    def _on_odom(self, msg) -> None:
        now = time.monotonic()
        self.odom_total += 1
        if self.first_odom is None:
            self.first_odom = now
        p = msg.pose.pose
        pose = (p.position.x * 1000.0, p.position.y * 1000.0, _yaw(p.orientation))
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        self.odom_latest = pose
        w = self.window
        last = self.last
        self.last = (now, stamp, pose, last[3] + math.atan2(math.sin(pose[2] - last[2][2]),
                                                            math.cos(pose[2] - last[2][2]))
                     if last else pose[2])
        if w is None or last is None:
            return
        w.odom += 1
        w.longest_gap_s = max(w.longest_gap_s, now - last[0])
        dt = (stamp - last[1]) * 1e-9
        if dt < 0:
            w.stamp_backward += 1
        step = math.hypot(pose[0] - last[2][0], pose[1] - last[2][1])
        excess = step - SPEED_MPS * 1000.0 * max(dt, 0.0) * 1.2
        w.max_excess_step_mm = max(w.max_excess_step_mm, excess)
        if excess > JUMP_MM:
            w.jumps += 1
        if self.last[3] - last[3] < -0.01:
            w.yaw_backward += 1
        w.poses.append((now, pose[0], pose[1]))

    def pose_errors(self, w: Window) -> None:
        """Odom against the ground truth at the time each odom message arrived (the truth,
        50 samples a second, interpolated; odom's frame aligned once, standing still)."""
        if self.world_to_odom is None:
            return
        samples = self.truth.snapshot()
        for t, x, y in w.poses:
            true = self.truth.at(t, samples)
            if true is not None:
                t_odom = _compose(self.world_to_odom, true)
                w.errors_mm.append(math.hypot(t_odom[0] - x, t_odom[1] - y))

    def spin(self, seconds: float, until: Optional[Callable[[], bool]] = None) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)
            if until is not None and until():
                return True
        return False

    def counters(self) -> Dict[str, float]:
        out = dict(self.diag)
        for k in ("malformed_dropped", "wrong_source_dropped", "datagrams_received"):
            if k in self.link:
                out[f"link_status {k}"] = float(self.link[k])
        return out

    def close(self) -> None:
        try:
            self.driving = False
            msg = self.Twist()
            self.cmd.publish(msg)
            self.executor.shutdown(timeout_sec=1.0)
            self.node.destroy_node()
        finally:
            self.context.try_shutdown()


def _stale_count(log: Path) -> int:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return 0
    found = _STALE.findall(text)
    return max((int(so_far) for _, so_far in found), default=0)


def _true_path(truth: Truth, t0: float, t1: float) -> float:
    with truth.lock:
        pts = [s for s in truth.samples if t0 <= s[0] <= t1]
    return sum(math.hypot(b[1] - a[1], b[2] - a[2]) for a, b in zip(pts, pts[1:]))


def run_stack(options: argparse.Namespace) -> Dict[str, Any]:
    domain = _common.isolate_ros()
    env = dict(os.environ)
    env.update({"COZMO_LOOPBACK_ONLY": "1", "PYTHONUNBUFFERED": "1"})
    keep_discovery_local(env)
    logs = Path(options.logs) if options.logs else Path(tempfile.mkdtemp(prefix="fuzz_stack_"))
    logs.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    max_life = options.baseline + options.seconds + options.after + 300.0
    truth, fuzz = Truth(), FuzzState()
    result: Dict[str, Any] = {"domain_id": domain, "logs": str(logs), "count": options.count,
                              "seconds": options.seconds, "seed": options.seed}
    _log(f"ROS_DOMAIN_ID={domain}, logs in {logs}")
    children: List[Child] = []
    driver: Optional[subprocess.Popen] = None
    driver_log = logs / "driver.log"
    monitor: Optional[Monitor] = None
    windows: List[Window] = []
    stops: Dict[str, str] = {}
    try:
        sim = Child("sim", me + ["--role", "sim", "--seed", str(options.seed), "--max-life", str(max_life)],
                    env, truth.on_line, logs / "sim.log")
        children.append(sim)
        if not _wait(lambda: truth.ready is not None or not sim.alive(), 30.0):
            raise RuntimeError("the simulator did not start within 30 s")
        if truth.ready is None:
            raise RuntimeError(f"the simulator exited ({sim.proc.returncode}); see {sim.log}")
        sim_port = truth.ready[1]
        fz = Child("fuzz", me + ["--role", "fuzz", "--sim-port", str(sim_port), "--seed", str(options.seed),
                                 "--count", str(options.count), "--seconds", str(options.seconds),
                                 "--max-life", str(max_life)]
                   + (["--crafted-states"] if options.crafted_states else [])
                   + ["--handshake-share", str(options.handshake_share)],
                   env, fuzz.on_line, logs / "fuzz.log")
        children.append(fz)
        if not _wait(lambda: fuzz.ready is not None or not fz.alive(), 30.0):
            raise RuntimeError("the fuzzer did not start within 30 s")
        if fuzz.ready is None:
            raise RuntimeError(f"the fuzzer exited ({fz.proc.returncode}); see {fz.log}")
        _log(f"simulator on udp://127.0.0.1:{sim_port} (pid {truth.pid}), proxy on "
             f"udp://127.0.0.1:{fuzz.ready} (pid {fuzz.pid})")
        command = _common.console("cozmo_driver_node", "cozmo_driver.ros.driver_node") + [
            "--ros-args", "-p", "robot_ip:=127.0.0.1", "-p", f"robot_port:={fuzz.ready}"]
        stream = open(driver_log, "wb")
        try:
            driver = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stream,
                                      stderr=subprocess.STDOUT, env=env, preexec_fn=_child_preexec())
        finally:
            stream.close()
        monitor = Monitor(truth)
        t_start = time.monotonic()
        if not monitor.spin(options.odom_timeout, lambda: monitor.first_odom is not None
                            or driver.poll() is not None):
            raise RuntimeError(f"no odom within {options.odom_timeout:g} s; see {driver_log}")
        if monitor.first_odom is None:
            raise RuntimeError(f"the driver exited ({driver.returncode}) before odom; see {driver_log}")
        result["first_odom_s"] = monitor.first_odom - t_start
        _log(f"first odom {result['first_odom_s']:.1f} s after the driver's start")
        # align the odom frame with the world, standing still
        monitor.spin(1.0)
        pairs = []
        for _ in range(10):
            monitor.spin(0.05)
            true = truth.at(truth.last_time() - 0.01)
            if true is not None and monitor.odom_latest is not None:
                pairs.append((monitor.odom_latest, true))
        if not pairs:
            raise RuntimeError("no ground truth from the simulator")
        odom0, true0 = pairs[-1]
        monitor.world_to_odom = _compose(odom0, _inverse(true0))
        monitor.driving = True
        monitor.spin(2.0)  # up to speed

        pids = {"driver": driver.pid, "sim": sim.proc.pid, "fuzzer": fz.proc.pid, "this (ROS probe)": os.getpid()}

        def open_window(name: str) -> Window:
            w = Window(name, t0=time.monotonic())
            w.cpu = {k: _cpu(p) for k, p in pids.items()}
            w.counters0 = monitor.counters()
            w.counters0["stale robot states dropped (driver log)"] = _stale_count(driver_log)
            monitor.window = w
            windows.append(w)
            return w

        def close_window(w: Window) -> None:
            w.t1 = time.monotonic()
            monitor.window = None
            w.cpu = {k: (_cpu(p) - w.cpu[k]) / w.seconds * 100.0 for k, p in pids.items()}
            w.counters1 = monitor.counters()
            w.counters1["stale robot states dropped (driver log)"] = _stale_count(driver_log)
            w.true_path_mm = _true_path(truth, w.t0, w.t1)
            monitor.spin(0.1)   # the truth reaches past t1
            monitor.pose_errors(w)

        alive = lambda: driver.poll() is None and sim.alive() and fz.alive()  # noqa: E731
        w = open_window("baseline")
        monitor.spin(options.baseline, lambda: not alive())
        close_window(w)
        _log(f"baseline: {w.odom} odom in {w.seconds:.1f} s ({w.rate_hz:.1f} Hz)")
        w = open_window("fuzz")
        fz.send("go")
        limit = options.seconds + 60.0
        next_note = time.monotonic() + 30.0
        end = time.monotonic() + limit
        while time.monotonic() < end and fuzz.done is None and alive():
            monitor.spin(0.5)
            if time.monotonic() >= next_note:
                next_note += 30.0
                _log(f"fuzz: {fuzz.progress} datagrams sent, {w.odom} odom so far, "
                     f"load {os.getloadavg()[0]:.2f}")
        monitor.spin(1.5, lambda: not alive())  # the driver's 1 s reports of the fuzz arrive
        close_window(w)
        _log(f"fuzz: {fuzz.progress if fuzz.done is None else fuzz.done['total']} datagrams, "
             f"{w.odom} odom in {w.seconds:.1f} s ({w.rate_hz:.1f} Hz)")
        if options.after > 0:
            w = open_window("after")
            monitor.spin(options.after, lambda: not alive())
            close_window(w)
        result["alive"] = {"driver": driver.poll() is None, "sim": sim.alive() and not truth.errors,
                           "fuzzer": fz.alive()}
        result["sim_errors"] = truth.errors
        monitor.driving = False
        monitor.spin(0.5)
    finally:
        if monitor is not None:
            monitor.close()
        if driver is not None:
            stops["driver"] = _stop_child(driver, "driver")
        for child in reversed(children):
            stops[child.name] = child.stop()
    log_text = driver_log.read_text(errors="replace") if driver_log.exists() else ""
    result.update({
        "stops": stops, "fuzz": fuzz.done, "sim_stats": truth.stats,
        "windows": [_window_summary(w) for w in windows],
        "driver_error_lines": [ln for ln in log_text.splitlines() if "ERROR" in ln][:20],
        "driver_tracebacks": log_text.count("Traceback (most recent call last)"),
        "driver_warning_lines": sum("WARN" in ln for ln in log_text.splitlines()),
        "stale_states_logged": _stale_count(driver_log),
    })
    return result


def _cpu(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except (OSError, IndexError, ValueError):
        return math.nan


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _window_summary(w: Window) -> Dict[str, Any]:
    errors = sorted(w.errors_mm)
    d = {k: v for k, v in asdict(w).items() if k not in ("errors_mm", "poses", "counters0", "counters1")}
    d.update(seconds=w.seconds, rate_hz=w.rate_hz,
             true_speed_mmps=w.true_path_mm / w.seconds,
             error_mm={"n": len(errors),
                       "median": statistics.median(errors) if errors else None,
                       "p99": errors[min(len(errors) - 1, int(0.99 * len(errors)))] if errors else None,
                       "max": errors[-1] if errors else None},
             counters={k: w.counters1.get(k, math.nan) - w.counters0.get(k, 0.0)
                       for k in sorted(set(w.counters1) | set(w.counters0))})
    return d


# ============================================================================= report


def checks(result: Dict[str, Any]) -> Dict[str, bool]:
    """The script's verdicts (True: passed)."""
    windows = {w["name"]: w for w in result.get("windows", [])}
    fz, after = windows.get("fuzz"), windows.get("after")
    alive = result.get("alive", {})
    out = {
        "driver alive": bool(alive.get("driver")),
        "simulator alive": bool(alive.get("sim")),
        "fuzzer alive": bool(alive.get("fuzzer")),
        "every datagram sent": bool(result.get("fuzz")) and result["fuzz"]["total"] == result["count"],
        "odom during the fuzz": bool(fz) and fz["odom"] > 0,
        "no hang (odom gap < 2 s)": bool(fz) and fz["longest_gap_s"] < HANG_S,
        "no pose jump": bool(fz) and fz["jumps"] == 0 and fz["yaw_backward"] == 0,
        "the link held (no connection lost)": bool(fz) and not fz["counters"].get("connections lost"),
        "no ERROR line, no traceback in the driver's log": not result.get("driver_error_lines")
        and not result.get("driver_tracebacks"),
    }
    if after is not None:
        out["odom after the fuzz"] = after["odom"] > 0
    return out


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def report(result: Dict[str, Any], since: Optional[float] = None) -> None:
    """The tables of the run, each with the load since ``since`` (the run's start)."""
    windows = result.get("windows", [])
    n_total = result["fuzz"]["total"] if result.get("fuzz") else 0
    title = (f"Driver and simulator under {n_total} bad datagrams in {_fmt(result['seconds'], 0)} s "
             f"while driving a circle ({SPEED_MPS * 1000:.0f} mm/s, {TURN_RADPS} rad/s), seed "
             f"{result['seed']}")
    header = ["period", "s", "odom", "odom Hz", "longest gap ms", "jumps (> 5 mm)",
              "largest step beyond speed mm", "yaw/stamp backward", "pose error median/p99/max mm",
              "true speed mm/s", "CPU % driver/sim/fuzzer/probe"]
    rows = []
    for w in windows:
        e = w["error_mm"]
        cpu = w["cpu"]
        rows.append([w["name"], _fmt(w["seconds"], 0), w["odom"], _fmt(w["rate_hz"]),
                     _fmt(w["longest_gap_s"] * 1000, 0), w["jumps"], _fmt(w["max_excess_step_mm"], 2),
                     f"{w['yaw_backward']}/{w['stamp_backward']}",
                     f"{_fmt(e['median'], 2)}/{_fmt(e['p99'], 2)}/{_fmt(e['max'], 2)}",
                     _fmt(w["true_speed_mmps"]),
                     "/".join(_fmt(cpu.get(k), 0) for k in ("driver", "sim", "fuzzer", "this (ROS probe)"))])
    table(title, header, rows, since=since)
    if result.get("fuzz"):
        sent = result["fuzz"]["sent"]
        kinds = [k for k in KINDS if any(k in sent[t] for t in TARGETS)]
        rows = [[t] + [sent[t].get(k, 0) for k in kinds] + [sum(sent[t].values())] for t in TARGETS]
        rows.append(["all"] + [sum(sent[t].get(k, 0) for t in TARGETS) for k in kinds] + [n_total])
        table(f"Datagrams sent, by target and kind (in {_fmt(result['fuzz']['elapsed_s'], 0)} s; "
              f"send errors {result['fuzz']['errors']['send_errors']}, would block "
              f"{result['fuzz']['errors']['would_block']})", ["target"] + kinds + ["total"], rows,
              since=since)
    names = sorted({k for w in windows for k in w["counters"]})
    if names:
        rows = [[k] + [_fmt(w["counters"].get(k), 0) for w in windows] for k in names]
        table("What the driver counted in each period (link_status, /diagnostics, its log)",
              ["counter"] + [w["name"] for w in windows], rows, since=since)
    verdict = checks(result)
    sim = result.get("sim_stats") or {}
    rows = [[k, "yes" if v else "NO"] for k, v in verdict.items()]
    rows.append(["simulator: wrong-source datagrams dropped (whole run)", _fmt(sim.get("wrong_source"))])
    rows.append(["simulator: malformed from its client (whole run)", _fmt(sim.get("malformed"))])
    if result.get("fuzz"):
        rows.append(["RESET frames to the simulator made FIN (not sent as RESET)",
                     result["fuzz"]["rewritten_resets"]])
        rows.append(["forged garbage that decoded as a RobotState, regenerated",
                     result["fuzz"]["skipped_forgeries"]])
        rows.append(["RobotStates replayed from the robot's address (in replays and shuffled bursts)",
                     result["fuzz"]["forged_state_replays"]])
        rows.append(["of them dropped as stale (not newer than the last, or ahead of the robot's "
                     "clock), as the driver's log counts them (warned every 5 s: a lower bound)",
                     result.get("stale_states_logged", 0)])
    rows.append(["processes stopped", "; ".join(f"{k}: {v}" for k, v in result.get("stops", {}).items())])
    table("Checks", ["check", "result"], rows, since=since)


# ============================================================================= main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=1_000_000, help="bad datagrams to send (1000000)")
    p.add_argument("--seconds", type=float, default=400.0,
                   help="spread them over this many seconds (400)")
    p.add_argument("--baseline", type=float, default=30.0, help="quiet driving before the fuzz, s (30)")
    p.add_argument("--after", type=float, default=10.0, help="quiet driving after the fuzz, s (10)")
    p.add_argument("--seed", type=int, default=1, help="seed of the fuzz and the simulator (1)")
    p.add_argument("--odom-timeout", type=float, default=60.0, help="wait for the first odom, s (60)")
    p.add_argument("--crafted-states", action="store_true",
                   help="also forge RobotStates with a timestamp ahead of the robot's (they cannot be "
                        "told from real ones: odom jumps)")
    p.add_argument("--handshake-share", type=float, default=HANDSHAKE_SHARE,
                   help=f"share of the replays that replay one of the first datagrams of the connection "
                        f"(the robot's Connect among them) ({HANDSHAKE_SHARE})")
    p.add_argument("--json", type=Path, default=None, help="write the results to this file")
    p.add_argument("--logs", default=None, help="directory of the processes' logs (default: a temporary one)")
    p.add_argument("--no-docs", action="store_true", help="print only; do not touch docs/benchmarks.md")
    p.add_argument("--role", choices=("run", "sim", "fuzz"), default="run", help=argparse.SUPPRESS)
    p.add_argument("--sim-port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--max-life", type=float, default=3600.0, help=argparse.SUPPRESS)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    options = build_parser().parse_args(argv)
    if options.role == "sim":
        return run_sim(options.seed, options.max_life)
    if options.role == "fuzz":
        return run_fuzz(options)
    if options.count < 1 or options.seconds <= 0:
        build_parser().error("--count must be at least 1 and --seconds positive")
    t0 = time.monotonic()
    with bench_report("fuzz_stack", write=not options.no_docs):
        started = window_start()  # every table comes from the whole run
        result = run_stack(options)
        result["elapsed_s"] = time.monotonic() - t0
        report(result, since=started)
    result["checks"] = checks(result)
    if options.json:
        options.json.write_text(json.dumps(result, indent=1, default=str))
    failed = [k for k, v in result["checks"].items() if not v]
    _log(f"{'every check passed' if not failed else 'FAILED: ' + ', '.join(failed)} "
         f"({result['elapsed_s']:.0f} s; logs in {result['logs']})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
