"""Frame codec: header, sequence wire offset, packets in frames, and malformed datagrams.

Expected bytes are written out by hand from PROTOCOL_NOTES section a.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cozmo_driver.protocol.errors import RemoteProtocolError
from cozmo_driver.protocol.frames import (
    HEADER_SIZE,
    MAGIC,
    MAX_DATAGRAM_SIZE,
    MAX_FRAME_SIZE,
    MAX_PAYLOAD_SIZE,
    OOB_SEQ,
    SEQ_MODULUS,
    Frame,
    FrameType,
    RawPacket,
    decode_frame,
    encode_frame,
    is_oob_packet_type,
    seq_add,
    seq_diff,
    seq_from_wire,
    seq_to_wire,
)
from cozmo_driver.protocol.session import Role, Session

DISPLAY_BLANK = bytes.fromhex("0405009702003f3f")  # COMMAND 0x97 DisplayImage, image 3f 3f
CONNECT = bytes.fromhex("020000")
ROBOT_STATE_HEAD = bytes.fromhex("055c00f0")


def test_constants():
    assert MAGIC == bytes.fromhex("434f5a03524501")
    assert HEADER_SIZE == 14 and MAX_PAYLOAD_SIZE == 1037 and MAX_FRAME_SIZE == 1051
    assert OOB_SEQ == 0xFFFF and SEQ_MODULUS == 0xFFFE
    assert [int(t) for t in FrameType] == [0x01, 0x02, 0x03, 0x04, 0x07, 0x09, 0x0B]


def test_reset_frame_bytes():
    expected = bytes.fromhex("434f5a0352450101" "0100" "0100" "0000")
    assert encode_frame(FrameType.RESET, 0, 0, OOB_SEQ) == expected
    frame = decode_frame(expected)
    assert (frame.type, frame.first_seq, frame.seq, frame.ack, frame.packets) == (FrameType.RESET, 0, 0, OOB_SEQ, [])


def test_engine_connect_sends_the_reset_frame():
    engine = Session(Role.ENGINE)
    engine.connect(0.0)
    assert engine.datagrams_to_send(0.0) == [bytes.fromhex("434f5a0352450101" "0100" "0100" "0000")]


@pytest.mark.parametrize("value, wire", [
    (0, "0100"),
    (1, "0200"),
    (0x00FF, "0001"),
    (65533, "feff"),
    (OOB_SEQ, "0000"),
])
def test_sequence_wire_offset(value, wire):
    assert seq_to_wire(value).to_bytes(2, "little").hex() == wire
    assert seq_from_wire(int.from_bytes(bytes.fromhex(wire), "little")) == value
    data = encode_frame(FrameType.ENGINE, value, value, value)
    assert data[8:10].hex() == data[10:12].hex() == data[12:14].hex() == wire
    frame = decode_frame(data)
    assert frame.first_seq == frame.seq == frame.ack == value


def test_wire_value_ffff_never_produced():
    assert all(seq_to_wire(v) != 0xFFFF for v in list(range(SEQ_MODULUS))[-3:] + [0, OOB_SEQ])


def test_seq_arithmetic_wraps_at_0xfffe():
    assert seq_add(65533, 1) == 0
    assert seq_add(65530, 10) == 6
    assert seq_diff(2, 65532) == 4
    assert seq_diff(65532, 2) == SEQ_MODULUS - 4


def test_header_field_order():
    data = encode_frame(FrameType.ROBOT, 0x0102, 0x0304, 0x0506)
    assert data == MAGIC + bytes.fromhex("09" "0301" "0503" "0705")


def test_packets_with_and_without_id_in_engine_frame():
    payload = DISPLAY_BLANK + CONNECT + bytes.fromhex("030000") + bytes.fromhex("0a0000")
    data = encode_frame(FrameType.ENGINE, 5, 6, 2, payload)
    assert data[:14].hex() == "434f5a0352450107" "0600" "0700" "0300"
    frame = decode_frame(data)
    assert frame == Frame(FrameType.ENGINE, 5, 6, 2, [
        RawPacket(0x04, 0x97, bytes.fromhex("02003f3f")),
        RawPacket(0x02, None, b""),
        RawPacket(0x03, None, b""),
        RawPacket(0x0A, None, b""),
    ])
    assert [p.oob for p in frame.packets] == [False, False, False, True]


def test_robot_frame_with_event_and_oob_header():
    body = bytes(range(91))
    data = encode_frame(FrameType.ROBOT, OOB_SEQ, OOB_SEQ, 7, ROBOT_STATE_HEAD + body)
    assert data[8:14].hex() == "0000" "0000" "0800"
    frame = decode_frame(data)
    assert frame.type == FrameType.ROBOT and frame.first_seq == frame.seq == OOB_SEQ and frame.ack == 7
    assert frame.packets == [RawPacket(0x05, 0xF0, body)]
    assert frame.packets[0].oob and is_oob_packet_type(0x05) and not is_oob_packet_type(0x04)


def test_length_field_counts_the_id_byte():
    # COMMAND with an empty body: length 1 (just the id)
    frame = decode_frame(encode_frame(FrameType.ENGINE, 0, 0, OOB_SEQ, bytes.fromhex("04010025")))
    assert frame.packets == [RawPacket(0x04, 0x25, b"")]


def test_ping_frame_carries_a_bare_body():
    body = struct.pack("<dIIB", 1234.5, 7, 0, 0)
    data = encode_frame(FrameType.PING, OOB_SEQ, OOB_SEQ, 3, body)
    assert data == MAGIC + bytes.fromhex("0b" "0000" "0000" "0400") + body
    assert len(data) == 14 + 17
    frame = decode_frame(data)
    assert frame.packets == [RawPacket(0x0B, None, body)]
    assert frame.packets[0].oob


def test_engine_act_frame_is_id_and_body():
    data = encode_frame(FrameType.ENGINE_ACT, 4, 4, OOB_SEQ, bytes.fromhex("4b" "0000000000000000"))
    frame = decode_frame(data)
    assert (frame.type, frame.first_seq, frame.seq) == (FrameType.ENGINE_ACT, 4, 4)
    assert frame.packets == [RawPacket(0x04, 0x4B, bytes(8))]


@pytest.mark.parametrize("ftype", [FrameType.RESET, FrameType.RESET_ACK, FrameType.FIN])
def test_frames_without_packets(ftype):
    frame = decode_frame(encode_frame(ftype, OOB_SEQ, OOB_SEQ, OOB_SEQ))
    assert frame.type == ftype and frame.packets == []


def test_empty_engine_frame_is_a_lone_ack():
    frame = decode_frame(encode_frame(FrameType.ROBOT, OOB_SEQ, OOB_SEQ, 41))
    assert frame.packets == [] and frame.ack == 41 and frame.seq == OOB_SEQ


def test_decode_accepts_bytearray_and_memoryview():
    data = encode_frame(FrameType.ENGINE, 0, 0, OOB_SEQ, DISPLAY_BLANK)
    for view in (bytearray(data), memoryview(data)):
        frame = decode_frame(view)
        assert frame.packets == [RawPacket(0x04, 0x97, bytes.fromhex("02003f3f"))]
        assert type(frame.packets[0].body) is bytes


# ----------------------------------------------------------------------------- malformed input

GOOD = encode_frame(FrameType.ENGINE, 0, 1, OOB_SEQ, DISPLAY_BLANK + CONNECT)


@pytest.mark.parametrize("data, message", [
    (b"", r"0 bytes is shorter than a frame header"),
    (GOOD[:13], r"13 bytes is shorter than a frame header"),
    (b"COZ\x03RE\x02" + GOOD[7:], r"bad magic 434f5a03524502"),
    (b"\x00" * 20, r"bad magic"),
    (b"GET / HTTP/1.1\r\n\r\n", r"bad magic"),
    (GOOD[:7] + b"\x05" + GOOD[8:], r"unknown frame type 0x05"),
    (GOOD[:7] + b"\xff" + GOOD[8:], r"unknown frame type 0xff"),
    (GOOD[:-2], r"truncated packet header at offset 22 of 23"),
    (GOOD[:-1], r"truncated packet header at offset 22 of 24"),
    (GOOD[:15], r"truncated packet header at offset 14 of 15"),
    (GOOD[:18], r"packet at offset 14 declares 5 bytes but only 1 remain"),
    (GOOD[:21], r"packet at offset 14 declares 5 bytes but only 4 remain"),
    (encode_frame(FrameType.ENGINE, 0, 0, 0, bytes.fromhex("04ffff25")), r"declares 65535 bytes"),
    (encode_frame(FrameType.ROBOT, 0, 0, 0, bytes.fromhex("040000")), r"type 0x04 without its id byte"),
    (encode_frame(FrameType.ROBOT, 0, 0, 0, bytes.fromhex("050000")), r"type 0x05 without its id byte"),
    (encode_frame(FrameType.ENGINE_ACT, 0, 0, 0), r"ENGINE_ACT frame without a command id"),
])
def test_malformed_datagrams_raise_remote_protocol_error(data, message):
    with pytest.raises(RemoteProtocolError, match=message):
        decode_frame(data)


def test_a_datagram_longer_than_any_robots_is_refused_whole():
    """A datagram of more than MAX_DATAGRAM_SIZE bytes (2048; a robot's are 1420 at most) is
    malformed even when made of whole packets: the UDP adapter reads one byte more than that,
    so a longer datagram the kernel cut to the read reaches the decoder too long, never cut
    to whole packets that decode."""
    five, three = bytes.fromhex("0b02000000"), bytes.fromhex("0b0000")  # packets of 5 and 3 bytes
    fits = encode_frame(FrameType.ROBOT, OOB_SEQ, OOB_SEQ, 0, five * 405 + three * 3)
    assert len(fits) == MAX_DATAGRAM_SIZE == 2048
    assert len(decode_frame(fits).packets) == 408
    for longer in (fits + three, fits + b"\x00", fits * 2):
        with pytest.raises(RemoteProtocolError, match="datagram of more than 2048 bytes"):
            decode_frame(longer)


def test_overlong_length_field_is_not_silently_accepted():
    """pycozmo decodes a packet whose length runs past the datagram (notes m.10); we refuse it."""
    data = bytearray(encode_frame(FrameType.ROBOT, OOB_SEQ, OOB_SEQ, 0, ROBOT_STATE_HEAD + bytes(91)))
    data[15:17] = (93).to_bytes(2, "little")
    with pytest.raises(RemoteProtocolError, match="declares 93 bytes but only 92 remain"):
        decode_frame(bytes(data))
    data[15:17] = (91).to_bytes(2, "little")  # shorter length: the rest is a second, broken packet
    with pytest.raises(RemoteProtocolError):
        decode_frame(bytes(data))


# ----------------------------------------------------------------------------- property round trip

packets = st.one_of(
    st.builds(lambda t, i, b: RawPacket(t, i, b), st.sampled_from([0x04, 0x05]),
              st.integers(0, 255), st.binary(max_size=60)),
    st.builds(lambda t, b: RawPacket(t, None, b), st.sampled_from([0x02, 0x03, 0x0A, 0x0B, 0x00, 0x42]),
              st.binary(max_size=60)),
)
seqs = st.one_of(st.integers(0, SEQ_MODULUS - 1), st.just(OOB_SEQ))


def _payload(pkts):
    out = b""
    for p in pkts:
        if p.ident is None:
            out += struct.pack("<BH", p.packet_type, len(p.body)) + p.body
        else:
            out += struct.pack("<BHB", p.packet_type, len(p.body) + 1, p.ident) + p.body
    return out


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([FrameType.ENGINE, FrameType.ROBOT]), seqs, seqs, seqs, st.lists(packets, max_size=12))
def test_frame_round_trip(ftype, first, last, ack, pkts):
    data = encode_frame(ftype, first, last, ack, _payload(pkts))
    assert decode_frame(data) == Frame(ftype, first, last, ack, pkts)
