"""Fuzzing: whatever the peer sends either parses or raises RemoteProtocolError, nothing else.

Three targets: ``decode_frame`` (random bytes and mutated valid frames: bit flips,
truncation, splices, random length fields), ``decode_message`` (every id with random
bodies) and a connected ``Session`` pair, which must swallow any datagram (never raise,
always return), count it, and still carry good traffic afterwards.
"""

from __future__ import annotations

import logging
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cozmo_driver.protocol.errors import RemoteProtocolError
from cozmo_driver.protocol.frames import (
    HEADER_SIZE,
    MAGIC,
    OOB_SEQ,
    SEQ_MODULUS,
    Frame,
    FrameType,
    RawPacket,
    decode_frame,
    encode_frame,
)
from cozmo_driver.protocol.messages import (
    MESSAGES_BY_ID,
    MESSAGES_BY_NAME,
    MESSAGES_BY_PACKET_TYPE,
    Message,
    UnknownMessage,
    decode_message,
    encode_packet,
)
from cozmo_driver.protocol.session import MessageReceived, Role, Session, State
from cozmo_driver.transport.memory import Impairment, MemoryLink

MSG = MESSAGES_BY_NAME
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _quiet_protocol_logger():
    logger = logging.getLogger("cozmo.protocol")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


# ----------------------------------------------------------------------------- corpus of valid frames

def _packets(*messages) -> bytes:
    return b"".join(encode_packet(m) for m in messages)


def _build_corpus():
    """Frames of every type, with packets of every kind, as a real session pair sends them."""
    corpus = [
        encode_frame(FrameType.RESET, 0, 0, OOB_SEQ),
        encode_frame(FrameType.RESET_ACK, OOB_SEQ, OOB_SEQ, 0),
        encode_frame(FrameType.FIN, OOB_SEQ, OOB_SEQ, 3),
        encode_frame(FrameType.PING, OOB_SEQ, OOB_SEQ, 2, struct.pack("<dIIB", 1500.25, 3, 0, 0)),
        encode_frame(FrameType.ENGINE_ACT, 1, 1, OOB_SEQ, bytes([0x4B]) + bytes(8)),
        encode_frame(FrameType.ENGINE, 0, 3, 1, _packets(
            MSG["SetHeadAngle"](angle_rad=0.5, action_id=3), MSG["DisplayImage"](image=b"\x3f\x3f"),
            MSG["Enable"](), MSG["CubeLights"]())),
        encode_frame(FrameType.ROBOT, OOB_SEQ, OOB_SEQ, 5, _packets(
            MSG["Ping"](time_sent_ms=12.5, counter=9), MSG["AnimationState"](timestamp_ms=77, tag=1),
            MSG["RobotState"](timestamp_ms=1, battery_voltage_v=3.9), MSG["ImageChunk"](data=bytes(range(40))))),
        encode_frame(FrameType.ROBOT, 4, 6, 0, _packets(
            MSG["FirmwareSignature"](signature='{"version": 2381}'), MSG["RobotState"](),
            MSG["BodyInfo"](body_color=2), MSG["NvStorageOpResult"](data=b"abc"))),
    ]
    engine, robot = Session(Role.ENGINE), Session(Role.ROBOT)
    link = MemoryLink(engine, robot, Impairment(delay=0.003), Impairment(delay=0.003), seed=3)
    link.trace = []
    engine.connect(0.0)
    link.run_while(lambda: not engine.is_connected, 1.0)
    for i in range(30):
        engine.send(MSG["DriveWheels"](lwheel_speed_mmps=i, rwheel_speed_mmps=-i))
        engine.send(MSG["DebugData"](args=list(range(i % 5))) if i % 3 else MSG["SyncTime"](timestamp_ms=i))
        robot.send(MSG["HardwareInfo"](serial_number_head=i))
        robot.send(MSG["RobotState"](timestamp_ms=i))
        robot.send(MSG["AnimationState"](timestamp_ms=i))
        link.run_until(link.now + 0.03)
    corpus.extend(d for _, _, d in link.trace)
    return corpus


CORPUS = _build_corpus()


def _packet_offsets(data: bytes):
    """Offsets of the packet headers of a valid ENGINE/ROBOT frame."""
    offsets, off = [], HEADER_SIZE
    if data[7] in (FrameType.ENGINE, FrameType.ROBOT):
        while off + 3 <= len(data):
            offsets.append(off)
            off += 3 + struct.unpack_from("<H", data, off + 1)[0]
    return offsets


@st.composite
def mutated_frames(draw):
    data = bytearray(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "splice", "length", "extend", "header"]))
        if kind == "flip" and data:
            for _ in range(draw(st.integers(1, 4))):
                i = draw(st.integers(0, len(data) - 1))
                data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[draw(st.integers(0, len(data))):]
        elif kind == "splice":
            other = draw(st.sampled_from(CORPUS))
            data = data[:draw(st.integers(0, len(data)))] + other[draw(st.integers(0, len(other))):]
        elif kind == "length":
            offsets = _packet_offsets(bytes(data)) if len(data) > 7 else []
            if offsets:
                off = draw(st.sampled_from(offsets))
                data[off + 1:off + 3] = struct.pack("<H", draw(st.integers(0, 0xFFFF)))
        elif kind == "extend":
            data += draw(st.binary(min_size=1, max_size=40))
        elif kind == "header" and len(data) >= HEADER_SIZE:
            field = draw(st.sampled_from([7, 8, 10, 12]))
            width = 1 if field == 7 else 2
            data[field:field + width] = draw(st.binary(min_size=width, max_size=width))
    return bytes(data)


any_datagram = st.one_of(
    st.binary(max_size=1200),
    st.builds(lambda t, rest: MAGIC + bytes([t]) + rest, st.sampled_from([1, 2, 3, 4, 7, 9, 11, 0, 8, 255]),
              st.binary(max_size=120)),
    mutated_frames(),
    mutated_frames(),  # weighted: mutations of real frames reach deepest
)


def check_frame_result(data: bytes):
    try:
        frame = decode_frame(data)
    except RemoteProtocolError as exc:
        assert str(exc), "a RemoteProtocolError must say what was wrong"
        return None
    assert isinstance(frame, Frame)
    assert frame.type in set(FrameType)
    assert data[:7] == MAGIC and len(data) >= HEADER_SIZE
    for value in (frame.first_seq, frame.seq, frame.ack):
        assert 0 <= value <= 0xFFFF
    payload = sum(3 + len(p.body) + (p.ident is not None) for p in frame.packets)
    if frame.type in (FrameType.ENGINE, FrameType.ROBOT):
        assert HEADER_SIZE + payload == len(data)  # every byte belongs to exactly one packet
    for p in frame.packets:
        assert isinstance(p, RawPacket) and type(p.body) is bytes
        assert 0 <= p.packet_type <= 255 and (p.ident is None or 0 <= p.ident <= 255)
    return frame


# ----------------------------------------------------------------------------- decode_frame

def test_corpus_is_valid_and_varied():
    frames = [decode_frame(d) for d in CORPUS]
    assert {f.type for f in frames} == set(FrameType)
    assert len(CORPUS) > 60
    assert any(len(f.packets) >= 3 for f in frames)


@FUZZ
@given(st.binary(max_size=1200))
def test_decode_frame_random_bytes(data):
    check_frame_result(data)


@FUZZ
@given(any_datagram)
def test_decode_frame_magic_prefixed_and_mutated(data):
    check_frame_result(data)


def test_decode_frame_every_truncation_and_single_bit_flip():
    """Exhaustive over a few frames: every prefix, and every single bit flipped."""
    for data in CORPUS[:12]:
        for n in range(len(data) + 1):
            check_frame_result(data[:n])
        for i in range(len(data)):
            for bit in range(8):
                mutated = bytearray(data)
                mutated[i] ^= 1 << bit
                check_frame_result(bytes(mutated))


# ----------------------------------------------------------------------------- decode_message

KEYS = ([(cls.PACKET_TYPE, cls.ID) for cls in MESSAGES_BY_ID.values()]
        + [(t, None) for t in MESSAGES_BY_PACKET_TYPE]
        + [(0x04, 0x0C), (0x05, 0xF9), (0x07, None), (0x04, 0xF0), (0x05, 0x37)])


def check_message_result(ptype, ident, body):
    try:
        msg = decode_message(ptype, ident, body)
    except RemoteProtocolError as exc:
        assert str(exc)
        return
    if isinstance(msg, UnknownMessage):
        assert msg.body == bytes(body)
        return
    assert isinstance(msg, Message)
    assert (msg.PACKET_TYPE, msg.ID) == (ptype, ident)
    assert len(body) >= msg.MIN_SIZE
    # whatever decodes must encode again, and be stable from then on
    again = msg.encode_body()
    assert decode_message(ptype, ident, again).encode_body() == again
    if msg.SIZE is not None:
        assert len(again) == msg.SIZE


@FUZZ
@given(st.sampled_from(KEYS).flatmap(lambda key: st.tuples(
    st.just(key), st.binary(max_size=(MESSAGES_BY_ID.get(key[1]).SIZE or 40) + 40
                            if key[1] in MESSAGES_BY_ID else 60))))
def test_decode_message_random_bodies(case):
    (ptype, ident), body = case
    check_message_result(ptype, ident, body)


def test_decode_message_every_length_for_every_id():
    rng = random.Random(2381)
    for ptype, ident in KEYS:
        cls = MESSAGES_BY_ID.get(ident) if ident is not None else MESSAGES_BY_PACKET_TYPE.get(ptype)
        top = (cls.SIZE if cls is not None and cls.SIZE is not None else 30) + 6
        for n in range(top + 1):
            for fill in (b"\x00", b"\xff", None):
                body = fill * n if fill is not None else bytes(rng.getrandbits(8) for _ in range(n))
                check_message_result(ptype, ident, body)


def test_decode_message_rejects_bad_variable_parts():
    for body in (bytes.fromhex("0000" "0500" "6162"),       # count 5, two bytes
                 bytes.fromhex("0000" "0200" "ff fe"),      # not UTF-8
                 bytes.fromhex("0000" "01")):               # count cut in half
        with pytest.raises(RemoteProtocolError, match="FirmwareSignature"):
            decode_message(0x04, 0xEE, body)
    with pytest.raises(RemoteProtocolError, match="DebugData"):
        decode_message(0x04, 0xB0, bytes(7) + b"\x03" + bytes(8))  # 3 args need 12 bytes


# ----------------------------------------------------------------------------- sessions

def _connected_pair(seed):
    engine, robot = Session(Role.ENGINE), Session(Role.ROBOT)
    link = MemoryLink(engine, robot, Impairment(delay=0.005), Impairment(delay=0.005), seed=seed)
    engine.connect(0.0)
    assert link.run_while(lambda: not (engine.is_connected and robot.is_connected), 2.0)
    link.run_until(link.now + 0.2)  # the Connect is acknowledged: nothing reliable in flight
    assert engine.send_queue_length == robot.send_queue_length == 0
    return engine, robot, link


def _disruptive(session, frame) -> bool:
    """Would a genuine peer frame like this change the session's state on purpose?

    A RESET (robot) or FIN (robot) restarts or ends the link, and a reliable packet whose
    seq falls in the receive window is accepted as the peer's next packet: both are what
    the protocol is for, so afterwards the pair is reconnected before checking traffic.
    (Reads the private ``_expected``: the fuzz input is arbitrary, the oracle must be exact.)
    """
    if frame.type in (FrameType.RESET, FrameType.FIN):
        return session.role is Role.ROBOT
    if frame.type == FrameType.RESET_ACK or frame.first_seq == OOB_SEQ:
        return False
    reliable = sum(1 for p in frame.packets if p.packet_type < 5)
    window = session.config.window
    for k in range(reliable):
        seq = (frame.first_seq + k) % SEQ_MODULUS
        if (seq - session._expected) % SEQ_MODULUS < window:
            return True
    return False


def _expected_packet_counts(session, frame):
    """(malformed_packets, unknown_messages) this frame adds, for frames without sequenced
    reliable packets; None when reliable packets are in play (window logic, not modelled)."""
    if frame.type in (FrameType.RESET, FrameType.RESET_ACK, FrameType.FIN):
        return 0, 0
    malformed = unknown = 0
    for p in frame.packets:
        if p.packet_type < 5:
            if frame.first_seq != OOB_SEQ:
                return None
            malformed += 1
            continue
        if p.packet_type == 0x0B:
            if session.role is Role.ENGINE and len(p.body) < 17:
                malformed += 1
            continue
        try:
            msg = decode_message(p.packet_type, p.ident, p.body)
        except RemoteProtocolError:
            malformed += 1
        else:
            unknown += isinstance(msg, UnknownMessage)
    return malformed, unknown


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**16), st.lists(st.tuples(st.booleans(), any_datagram), min_size=1, max_size=6))
def test_session_swallows_any_datagram_and_keeps_working(seed, datagrams):
    engine, robot, link = _connected_pair(seed)
    disrupted = False
    for to_robot, data in datagrams:
        target = robot if to_robot else engine
        stats = target.stats
        try:
            frame = decode_frame(data)
        except RemoteProtocolError:
            frame = None
        live = target.state is State.CONNECTED
        expected = _expected_packet_counts(target, frame) if frame is not None and live else None
        if frame is not None and live:
            disrupted = disrupted or _disruptive(target, frame)
        before = (stats.malformed_datagrams, stats.datagrams_received, stats.malformed_packets,
                  stats.unknown_messages)

        assert target.receive_datagram(data, link.now) is None  # returns, never raises

        after = (stats.malformed_datagrams, stats.datagrams_received, stats.malformed_packets,
                 stats.unknown_messages)
        if frame is None:
            assert after == (before[0] + 1, before[1], before[2], before[3])
        else:
            assert after[:2] == (before[0], before[1] + 1)
            if expected is not None:
                assert (after[2] - before[2], after[3] - before[3]) == expected, frame
            else:
                assert after[2] >= before[2] and after[3] >= before[3]
        link.run_until(link.now + 0.03)  # timers and replies run without error too
    # good traffic still flows (after a reconnect if the fuzz legitimately reset the link)
    if disrupted or not (engine.is_connected and robot.is_connected):
        assert disrupted, "only a legitimate RESET/FIN/in-window packet may end or reset the link"
        engine.connect(link.now)
        assert link.run_while(lambda: not (engine.is_connected and robot.is_connected), 2.0)
    for session in (engine, robot):  # forget what the fuzz phase produced
        while session.next_event() is not None:
            pass
    got_robot, got_engine = [], []
    link.on_event_b = lambda ev: isinstance(ev, MessageReceived) and ev.reliable and got_robot.append(ev.message)
    link.on_event_a = lambda ev: isinstance(ev, MessageReceived) and ev.reliable and got_engine.append(ev.message)
    sent_robot = [MSG["SyncTime"](timestamp_ms=i) for i in range(20)]
    sent_engine = [MSG["FallingStarted"](unknown=i) for i in range(20)]
    for a, b in zip(sent_robot, sent_engine):
        engine.send(a)
        robot.send(b)
    assert link.run_while(lambda: engine.send_queue_length or robot.send_queue_length, 5.0)
    assert got_robot == sent_robot and got_engine == sent_engine


@pytest.mark.parametrize("to_robot", [True, False], ids=["robot", "engine"])
def test_session_counts_each_kind_of_bad_input(to_robot):
    engine, robot, link = _connected_pair(7)
    target = robot if to_robot else engine
    ftype = FrameType.ENGINE if to_robot else FrameType.ROBOT
    now = link.now
    target.receive_datagram(b"\x00garbage", now)
    assert target.stats.malformed_datagrams == 1
    bad_event = struct.pack("<BHB", 0x05, 11, 0xF0) + bytes(10)            # RobotState cut short
    unknown_event = struct.pack("<BHB", 0x05, 3, 0xF9) + b"\x01\x02"       # undeclared id
    target.receive_datagram(encode_frame(ftype, OOB_SEQ, OOB_SEQ, OOB_SEQ, bad_event + unknown_event), now)
    assert target.stats.malformed_packets == 1 and target.stats.unknown_messages == 1
    # a reliable packet in a frame that claims to carry none
    target.receive_datagram(encode_frame(ftype, OOB_SEQ, OOB_SEQ, OOB_SEQ, bytes.fromhex("04010025")), now)
    assert target.stats.malformed_packets == 2
    assert target.state is State.CONNECTED
