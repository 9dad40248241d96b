"""Frames (one UDP datagram each) and the packets inside them.

A frame is ``magic[7], type u8, first_seq u16, seq u16, ack u16, payload``. The
three sequence fields travel as ``(value + 1) mod 65536``, so "none" (0xffff)
is 0 on the wire. ENGINE (0x07) and ROBOT (0x09) frames carry packets
``type u8, length u16, [id u8], body``; a PING frame (0x0b) carries one bare
Ping body; an ENGINE_ACT frame (0x04) one ``id + body`` command.

Decoding raises :class:`RemoteProtocolError` and nothing else, whatever the
input. Packet bodies are not decoded here: the session decodes each packet on
its own, so one bad packet never takes its neighbours down with it.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import List, Optional

from .declaration import FRAME
from .errors import RemoteProtocolError

__all__ = [
    "FrameType",
    "Frame",
    "RawPacket",
    "MAGIC",
    "HEADER_SIZE",
    "MAX_PAYLOAD_SIZE",
    "MAX_FRAME_SIZE",
    "MAX_DATAGRAM_SIZE",
    "OOB_SEQ",
    "SEQ_MODULUS",
    "seq_to_wire",
    "seq_from_wire",
    "seq_add",
    "seq_diff",
    "encode_frame",
    "decode_frame",
    "is_oob_packet_type",
]

MAGIC: bytes = FRAME["magic"]
HEADER_SIZE: int = FRAME["header_size"]
#: The robot drops frames whose payload exceeds this.
MAX_PAYLOAD_SIZE: int = FRAME["max_frame_payload_size"]
MAX_FRAME_SIZE: int = HEADER_SIZE + MAX_PAYLOAD_SIZE
#: The longest datagram decoded, bytes: more than any robot sends (its frames are at most
#: 1420 bytes). A longer one is no robot's and is dropped whole, as malformed; the UDP
#: adapter reads one byte more than this, so that a datagram the kernel cut to its buffer
#: is told from one that fits, and is never taken as whole.
MAX_DATAGRAM_SIZE: int = 2048
#: "No sequence number" (out-of-band packets, frames without reliable packets).
OOB_SEQ: int = FRAME["oob_seq"]
#: Reliable packets are numbered 0 .. SEQ_MODULUS - 1 and wrap around.
SEQ_MODULUS: int = FRAME["max_seq"]
_FIRST_OOB_PACKET_TYPE = 5  # EVENT, KEYFRAME and PING take no sequence number

_HEADER = struct.Struct("<7sBHHH")
_PACKET_HEAD = struct.Struct("<BH")


class FrameType(enum.IntEnum):
    RESET = 0x01
    RESET_ACK = 0x02
    FIN = 0x03
    ENGINE_ACT = 0x04
    ENGINE = 0x07
    ROBOT = 0x09
    PING = 0x0B


_FRAME_TYPES = frozenset(int(t) for t in FrameType)
_ID_PACKET_TYPES = (0x04, 0x05)  # COMMAND and EVENT carry an id byte


def seq_to_wire(value: int) -> int:
    return (value + 1) & 0xFFFF


def seq_from_wire(value: int) -> int:
    return (value - 1) & 0xFFFF


def seq_add(seq: int, n: int) -> int:
    return (seq + n) % SEQ_MODULUS


def seq_diff(a: int, b: int) -> int:
    """How far ``a`` is ahead of ``b``, modulo the sequence space."""
    return (a - b) % SEQ_MODULUS


def is_oob_packet_type(packet_type: int) -> bool:
    return packet_type >= _FIRST_OOB_PACKET_TYPE


@dataclass(slots=True)
class RawPacket:
    """One packet as it was framed: type, id (COMMAND/EVENT only) and body bytes."""

    packet_type: int
    ident: Optional[int]
    body: bytes

    @property
    def oob(self) -> bool:
        return self.packet_type >= _FIRST_OOB_PACKET_TYPE


@dataclass(slots=True)
class Frame:
    type: int
    first_seq: int
    seq: int
    ack: int
    packets: List[RawPacket] = field(default_factory=list)


def encode_frame(frame_type: int, first_seq: int, seq: int, ack: int, payload: bytes = b"") -> bytes:
    """One datagram. Sequence values are logical (``OOB_SEQ`` for none)."""
    return _HEADER.pack(MAGIC, frame_type, (first_seq + 1) & 0xFFFF, (seq + 1) & 0xFFFF,
                        (ack + 1) & 0xFFFF) + payload


def decode_frame(data) -> Frame:
    """Parse a datagram into a :class:`Frame` with raw packets."""
    n = len(data)
    if n > MAX_DATAGRAM_SIZE:
        raise RemoteProtocolError(f"datagram of more than {MAX_DATAGRAM_SIZE} bytes, longer than any robot's: "
                                  "dropped whole")
    if n < HEADER_SIZE:
        raise RemoteProtocolError(f"datagram of {n} bytes is shorter than a frame header")
    magic, ftype, w_first, w_seq, w_ack = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise RemoteProtocolError(f"bad magic {bytes(magic).hex()}")
    if ftype not in _FRAME_TYPES:
        raise RemoteProtocolError(f"unknown frame type 0x{ftype:02x}")
    frame = Frame(ftype, (w_first - 1) & 0xFFFF, (w_seq - 1) & 0xFFFF, (w_ack - 1) & 0xFFFF)
    if ftype == FrameType.ENGINE or ftype == FrameType.ROBOT:
        packets = frame.packets
        off = HEADER_SIZE
        while off < n:
            if off + 3 > n:
                raise RemoteProtocolError(f"truncated packet header at offset {off} of {n}")
            ptype, length = _PACKET_HEAD.unpack_from(data, off)
            end = off + 3 + length
            if end > n:
                raise RemoteProtocolError(
                    f"packet at offset {off} declares {length} bytes but only {n - off - 3} remain")
            if ptype in _ID_PACKET_TYPES:
                if length < 1:
                    raise RemoteProtocolError(f"packet of type 0x{ptype:02x} without its id byte")
                packets.append(RawPacket(ptype, data[off + 3], bytes(data[off + 4:end])))
            else:
                packets.append(RawPacket(ptype, None, bytes(data[off + 3:end])))
            off = end
    elif ftype == FrameType.PING:
        packets = frame.packets
        packets.append(RawPacket(0x0B, None, bytes(data[HEADER_SIZE:])))
    elif ftype == FrameType.ENGINE_ACT:
        if n < HEADER_SIZE + 1:
            raise RemoteProtocolError("ENGINE_ACT frame without a command id")
        frame.packets.append(RawPacket(0x04, data[HEADER_SIZE], bytes(data[HEADER_SIZE + 1:])))
    return frame
