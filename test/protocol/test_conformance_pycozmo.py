"""Conformance against the reference implementation, pycozmo 0.8.0 (a test-only oracle).

For every message: random field values (seeded), our ``encode_body()`` equals pycozmo's
``to_bytes()``, and each side decodes the other's bytes to the same values. Whole frames:
our Session's datagrams parse in pycozmo's ``Frame.from_bytes`` to the same sequence
numbers, ack and packets, and frames built by pycozmo's encoder parse in ours; and byte
for byte, every datagram of the trace is what pycozmo re-encodes from its own parse and
what both encoders produce from the same frame contents.

Only facts are taken from pycozmo, never code: it is imported here and nowhere else. On
Python 3.13, which lacks the stdlib module ``chunk`` that pycozmo imports,
test/conftest.py installs a stand-in (test/chunk_shim.py) first.
"""

from __future__ import annotations

import logging
import random
import struct
import warnings

import pytest

from dependencies import require

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # 'chunk' is deprecated in 3.11/3.12
    pycozmo = require("pycozmo", "pycozmo 0.8.0, the test-only reference")
    from pycozmo import protocol_encoder as pe
    from pycozmo.frame import Frame as PyFrame
    from pycozmo.protocol_ast import FrameType as PyFrameType

from cozmo_driver.protocol import declaration as decl  # noqa: E402
from cozmo_driver.protocol._table import F, FixedArray, VarArray  # noqa: E402
from cozmo_driver.protocol.frames import OOB_SEQ, FrameType, decode_frame, encode_frame  # noqa: E402
from cozmo_driver.protocol.messages import (  # noqa: E402
    MESSAGES_BY_NAME,
    STRUCTS,
    decode_message,
    encode_packet,
)
from cozmo_driver.protocol.session import (  # noqa: E402
    MessageReceived,
    PingAnswered,
    Role,
    Session,
    SessionConfig,
)
from cozmo_driver.transport.memory import Impairment, MemoryLink  # noqa: E402

SPECS = {m.name: m for m in decl.MESSAGES}
NAMES = [m.name for m in decl.MESSAGES]
INT_RANGE = {"u8": (0, 0xFF), "u16": (0, 0xFFFF), "u32": (0, 0xFFFFFFFF),
             "i8": (-0x80, 0x7F), "i16": (-0x8000, 0x7FFF), "i32": (-0x80000000, 0x7FFFFFFF)}
ROUNDS = 20


@pytest.fixture(autouse=True)
def _quiet_loggers():
    loggers = [logging.getLogger(n) for n in ("cozmo.protocol", "pycozmo.protocol", "pycozmo")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    yield
    for lg, level in zip(loggers, levels):
        lg.setLevel(level)


# ----------------------------------------------------------------------------- random values

def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def random_scalar(rng: random.Random, ftype: str, enum: str | None):
    if enum:
        return rng.choice([v for _, v in decl.ENUMS[enum]])  # pycozmo accepts declared values only
    if ftype == "bool":
        return rng.random() < 0.5
    if ftype == "f32":
        return rng.choice([f32(rng.uniform(-1e4, 1e4)), f32(rng.uniform(-1, 1)), 0.0, -0.0,
                           float("inf"), f32(rng.uniform(-3e38, 3e38))])
    if ftype == "f64":
        return rng.choice([rng.uniform(-1e9, 1e9), 0.0, rng.random()])
    lo, hi = INT_RANGE[ftype]
    return rng.choice([lo, hi, rng.randint(lo, hi), rng.randint(lo, hi)])


def random_values(rng: random.Random, name: str) -> dict:
    """Field values keyed by OUR field names; light states as plain dicts."""
    values = {}
    for f in SPECS[name].fields:
        if isinstance(f, F):  # a retyped field takes values both readings hold (ObjectConnect's 0/1)
            values[f.name] = random_scalar(rng, f.ref_type or f.type, f.enum)
        elif isinstance(f, FixedArray):
            if f.element == "u8":
                values[f.name] = bytes(rng.getrandbits(8) for _ in range(f.count))
            elif f.element.startswith("struct:"):
                fields = decl.STRUCTS[f.element[7:]]
                values[f.name] = [{s.name: random_scalar(rng, s.type, None) for s in fields}
                                  for _ in range(f.count)]
            else:
                values[f.name] = [random_scalar(rng, f.element, None) for _ in range(f.count)]
        elif isinstance(f, VarArray):
            n = rng.choice([0, 1, 2, rng.randint(0, 255 if f.prefix == "u8" else 600)])
            if f.element == "u8":
                values[f.name] = bytes(rng.getrandbits(8) for _ in range(n))
            else:
                values[f.name] = [random_scalar(rng, f.element, None) for _ in range(n)]
        else:
            n = rng.randint(0, 40)
            values[f.name] = "".join(rng.choice('ab{}":, 0é✓\U0001f916') for _ in range(n))
    return values


def ours_from(name: str, values: dict):
    kwargs = {}
    for f in SPECS[name].fields:
        v = values[f.name]
        if isinstance(f, FixedArray) and f.element.startswith("struct:"):
            v = [STRUCTS[f.element[7:]](**item) for item in v]
        kwargs[f.name] = v
    return MESSAGES_BY_NAME[name](**kwargs)


def theirs_from(name: str, values: dict):
    kwargs = {}
    for f in SPECS[name].fields:
        v = values[f.name]
        if isinstance(f, FixedArray) and f.element.startswith("struct:"):
            v = [getattr(pe, f.element[7:])(**item) for item in v]
        kwargs[f.ref or f.name] = v
    return getattr(pe, name)(**kwargs)


def theirs_values(name: str, pkt) -> dict:
    """pycozmo's decoded fields, normalised to our value shapes and names."""
    out = {}
    for f in SPECS[name].fields:
        v = getattr(pkt, f.ref or f.name)
        if isinstance(f, F):
            v = v.value if hasattr(v, "value") else v
        elif isinstance(f, (FixedArray, VarArray)) and f.element == "u8":
            v = bytes(v)
        elif isinstance(f, FixedArray) and f.element.startswith("struct:"):
            v = [{s.name: getattr(item, s.name) for s in decl.STRUCTS[f.element[7:]]} for item in v]
        elif isinstance(f, (FixedArray, VarArray)):
            v = list(v)
        out[f.name] = v
    return out


def our_values(name: str, msg) -> dict:
    out = {}
    for f in SPECS[name].fields:
        v = getattr(msg, f.name)
        if isinstance(f, F) and f.enum:
            v = int(v)
        elif isinstance(f, FixedArray) and f.element.startswith("struct:"):
            v = [{s.name: getattr(item, s.name) for s in decl.STRUCTS[f.element[7:]]} for item in v]
        elif isinstance(f, (FixedArray, VarArray)) and f.element != "u8":
            v = list(v)
        out[f.name] = v
    return out


def test_every_message_exists_in_pycozmo():
    assert set(NAMES) == {n for n in NAMES if isinstance(getattr(pe, n, None), type)}
    assert {cls.ID for cls in MESSAGES_BY_NAME.values() if cls.ID is not None} == set(pe.PACKETS_BY_ID)
    rng = random.Random(1)
    for name in NAMES:
        theirs = theirs_from(name, random_values(rng, name))
        cls = MESSAGES_BY_NAME[name]
        assert theirs.id == cls.ID, name
        assert int(theirs.type.value) == int(cls.PACKET_TYPE), name
        assert theirs.is_oob() == cls.OOB, name
        if cls.SIZE is not None:
            assert len(theirs) == cls.SIZE, name


@pytest.mark.parametrize("name", NAMES)
def test_message_bytes_and_values_agree(name):
    rng = random.Random(f"conformance-{name}")
    cls = MESSAGES_BY_NAME[name]
    for _ in range(ROUNDS):
        values = random_values(rng, name)
        ours = ours_from(name, values)
        theirs = theirs_from(name, values)
        body = ours.encode_body()
        assert body == theirs.to_bytes(), values
        # the packet header too: pycozmo writes it when it frames a packet
        framed = PyFrame(PyFrameType.ENGINE, 0, 0, OOB_SEQ, [theirs]).to_bytes()
        assert framed[14:] == encode_packet(ours)
        # pycozmo decodes our bytes to the same values ...
        assert theirs_values(name, type(theirs).from_bytes(body)) == values
        # ... and we decode pycozmo's bytes to the same values
        decoded = decode_message(int(cls.PACKET_TYPE), cls.ID, theirs.to_bytes())
        assert decoded == ours
        assert our_values(name, decoded) == values


# ----------------------------------------------------------------------------- frames

def _py_packets(frame):
    return [(int(p.type.value), p.id if p.id is not None and int(p.type.value) in (4, 5) else None,
             p.to_bytes()) for p in frame.pkts]


def _our_packets(frame):
    return [(p.packet_type, p.ident, p.body) for p in frame.packets]


def _our_frame_bytes(frame) -> bytes:
    """Our encoder's datagram for a frame's contents: each packet decoded, then encoded again."""
    messages = [decode_message(p.packet_type, p.ident, p.body) for p in frame.packets]
    if frame.type in (FrameType.ENGINE, FrameType.ROBOT):
        payload = b"".join(encode_packet(msg) for msg in messages)
    elif frame.type == FrameType.PING:                      # the ping body without a packet header
        (ping,) = messages
        payload = ping.encode_body()
    elif frame.type == FrameType.ENGINE_ACT:                # one command: its id, then its body
        (command,) = messages
        payload = bytes([command.ID]) + command.encode_body()
    else:
        assert not messages
        payload = b""
    return encode_frame(frame.type, frame.first_seq, frame.seq, frame.ack, payload)


def _their_frame_bytes(frame) -> bytes:
    """pycozmo's encoder's datagram for the same contents, its packets built from our values."""
    packets = []
    for p in frame.packets:
        msg = decode_message(p.packet_type, p.ident, p.body)
        packets.append(theirs_from(msg.NAME, our_values(msg.NAME, msg)))
    return PyFrame(PyFrameType(frame.type), frame.first_seq, frame.seq, frame.ack, packets).to_bytes()


def test_session_frames_parse_in_pycozmo():
    engine = Session(Role.ENGINE)
    robot = Session(Role.ROBOT)
    link = MemoryLink(engine, robot, Impairment(delay=0.005, loss=0.2), Impairment(delay=0.005), seed=5)
    link.trace = []
    engine.connect(0.0)
    assert link.run_while(lambda: not engine.is_connected, 2.0)
    for i in range(12):
        engine.send(MESSAGES_BY_NAME["SetHeadAngle"](angle_rad=0.25 * i, action_id=i))
        engine.send(MESSAGES_BY_NAME["DisplayImage"](image=bytes([0x3F, i])))
        engine.send(MESSAGES_BY_NAME["Enable"]())
        robot.send(MESSAGES_BY_NAME["RobotState"](timestamp_ms=i, battery_voltage_v=4.0))
        robot.send(MESSAGES_BY_NAME["HardwareInfo"](serial_number_head=i))
        if i % 4 == 0:
            engine.send_ping()
        link.run_until(link.now + 0.04)
    link.run_while(lambda: engine.send_queue_length or robot.send_queue_length, 5.0)
    kinds = set()
    assert len(link.trace) > 50
    for _, way, data in link.trace:
        ours = decode_frame(data)
        theirs = PyFrame.from_bytes(data)
        # whole frames byte for byte: pycozmo re-encodes its parse to the datagram, and both
        # encoders build exactly this datagram from the frame's contents
        assert theirs.to_bytes() == data
        assert _our_frame_bytes(ours) == data
        assert _their_frame_bytes(ours) == data
        assert int(theirs.type.value) == ours.type
        assert (theirs.first_seq, theirs.seq, theirs.ack) == (ours.first_seq, ours.seq, ours.ack)
        assert _py_packets(theirs) == _our_packets(ours)
        # pycozmo numbers the reliable packets from first_seq: they must end at seq
        reliable = [p for p in theirs.pkts if not p.is_oob()]
        if reliable:
            assert reliable[-1].seq == ours.seq
        kinds.add((way, FrameType(ours.type).name, bool(reliable)))
    assert {("a->b", "RESET", False), ("a->b", "ENGINE", True), ("a->b", "PING", False),
            ("b->a", "ROBOT", True), ("b->a", "ROBOT", False)} <= kinds
    assert engine.stats.retransmissions > 0  # retransmitted frames were checked too


def test_pycozmo_frames_parse_in_ours():
    cmds = [pe.SetHeadAngle(angle_rad=0.5, action_id=7), pe.DisplayImage(image=b"\x3f\x3f"), pe.Enable(),
            pe.Disconnect()]
    events = [pe.RobotState(cliff_data_raw=(1, 2, 3, 4), battery_voltage=3.75),
              pe.AnimationState(timestamp=5, tag=2), pe.ImageChunk(image_id=3, data=b"\x01\x02\x03")]
    cases = [
        PyFrame(PyFrameType.ENGINE, 10, 13, 4, cmds),
        PyFrame(PyFrameType.ROBOT, OOB_SEQ, OOB_SEQ, 13, events),
        PyFrame(PyFrameType.ROBOT, 65532, 65533, 0, [pe.HardwareInfo(serial_number_head=9), pe.BodyInfo(body_color=2)]),
        PyFrame(PyFrameType.PING, OOB_SEQ, OOB_SEQ, 2, [pe.Ping(time_sent_ms=3.5, counter=4)]),
        PyFrame(PyFrameType.RESET, 0, 0, OOB_SEQ, []),
        PyFrame(PyFrameType.ENGINE_ACT, 3, 3, OOB_SEQ, [pe.SyncTime(timestamp=77)]),
    ]
    for py in cases:
        data = py.to_bytes()
        ours = decode_frame(data)
        assert _our_frame_bytes(ours) == data                # our encoder, same frame, same bytes
        assert ours.type == int(py.type.value)
        assert (ours.first_seq, ours.seq, ours.ack) == (py.first_seq, py.seq, py.ack)
        assert len(ours.packets) == len(py.pkts)
        for raw, pkt in zip(ours.packets, py.pkts):
            assert raw.packet_type == int(pkt.type.value)
            assert raw.body == pkt.to_bytes()
            name = type(pkt).__name__
            decoded = decode_message(raw.packet_type, raw.ident, raw.body)
            assert decoded.NAME == name
            assert our_values(name, decoded) == theirs_values(name, pkt)


def test_pycozmo_robot_ping_echo_frame():
    """A real robot answers a ping in a ROBOT frame, out of band: Ping + AnimationState."""
    engine = Session(Role.ENGINE, SessionConfig(ping_interval=100.0))
    engine.connect(0.0)
    engine.datagrams_to_send(0.0)
    connect = PyFrame(PyFrameType.ROBOT, 0, 0, OOB_SEQ, [pe.Connect()]).to_bytes()
    engine.receive_datagram(connect, 0.01)
    (ping_datagram,) = engine.datagrams_to_send(0.01)
    ping = PyFrame.from_bytes(ping_datagram).pkts[0]
    assert isinstance(ping, pe.Ping) and ping.counter == 0
    while engine.next_event() is not None:
        pass
    echo = PyFrame(PyFrameType.ROBOT, OOB_SEQ, OOB_SEQ, OOB_SEQ, [
        pe.Ping(time_sent_ms=ping.time_sent_ms, counter=ping.counter, last=ping.last, unknown=ping.unknown),
        pe.AnimationState(timestamp=1234, num_anim_bytes_played=10, num_audio_frames_played=3,
                          enabled_anim_tracks=0xFF, tag=7, client_drop_count=1),
    ]).to_bytes()
    assert echo[8:12] == bytes(4)  # first_seq and seq are "none" on the wire
    frame = decode_frame(echo)
    assert [(p.packet_type, p.ident) for p in frame.packets] == [(0x0B, None), (0x05, 0xF1)]
    engine.receive_datagram(echo, 0.03)
    events = []
    while (event := engine.next_event()) is not None:
        events.append(event)
    assert isinstance(events[0], PingAnswered) and events[0].counter == 0
    assert events[0].rtt_s == pytest.approx(0.02)
    assert isinstance(events[1], MessageReceived) and not events[1].reliable
    assert events[1].message == MESSAGES_BY_NAME["AnimationState"](
        timestamp_ms=1234, num_anim_bytes_played=10, num_audio_frames_played=3,
        enabled_anim_tracks=0xFF, tag=7, client_drop_count=1)


def test_reset_and_connect_bytes_match_pycozmo():
    assert PyFrame(PyFrameType.RESET, 0, 0, OOB_SEQ, []).to_bytes() == encode_frame(FrameType.RESET, 0, 0, OOB_SEQ)
    engine = Session(Role.ENGINE)
    engine.connect(0.0)
    assert engine.datagrams_to_send(0.0) == [PyFrame(PyFrameType.RESET, 0, 0, OOB_SEQ, []).to_bytes()]
