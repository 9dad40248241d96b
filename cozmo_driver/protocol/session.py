"""The Cozmo connection as a sans-I/O state machine, for both ends of the link.

A :class:`Session` never touches a socket, a thread or a clock. Its inputs are
user calls (:meth:`connect`, :meth:`send`, :meth:`disconnect`),
:meth:`receive_datagram` and :meth:`handle_timer`; its outputs are
:meth:`datagrams_to_send`, :meth:`get_timer` and :meth:`next_event`. Every time
value is an argument (seconds, any monotonic origin).

The same class plays the **engine** (the driver: it sends RESET and waits for
Connect) and the **robot** (the simulator: it answers RESET with Connect).

Reliable delivery, in both directions:

* Reliable packets are numbered 0..65533 and wrap; out-of-band packets (events,
  pings, keyframes) take no number and are neither retransmitted nor ordered.
* 62-packet windows: the receiver buffers anything within the window (unless
  ``buffer_out_of_order`` is off) and delivers in order, exactly once.
* The ``ack`` of every outgoing frame is the last packet received *in order*
  (the reference acknowledges the last frame seen, which stalls after a gap).
  A lone acknowledgement goes out ``ack_delay`` after a reliable packet arrives
  unless a frame carries it earlier (engine: a PING frame, never once its
  Disconnect went out; robot: an empty ROBOT frame).
* One retransmission timer. When it fires, packets unacknowledged for longer
  than the retransmission timeout (RTO, from the measured round trip, at least
  ``rto_min``) are sent again, and the RTO doubles up to ``rto_max`` until an
  acknowledgement makes progress: no resend storms. Before that, a frame from the
  peer that acknowledges everything up to our oldest packet in flight but not it
  (a duplicate acknowledgement) sends that packet again at once, if it went more
  than 1.5 round trips and 10 ms ago (fast retransmission), once: until an
  acknowledgement makes progress, only the timeout sends it again (an uplink that
  is down while the robot's states still come would otherwise send the window
  again at every state). Either way the packets
  after it go again too (go back N): Anki's robot firmware takes only the next
  packet in order and drops the ones after a gap, so every command behind a lost
  packet is lost with it (``buffer_out_of_order=False`` makes a receiver do so; by
  default this class keeps them).
* Frames are filled up to the 1037-byte payload limit; reliable packets in one
  frame are always consecutive. A packet that cannot fit a frame on its own is
  refused by :meth:`send` with :class:`PacketTooLargeError`.
* A reliable packet whose body cannot be decoded is still acknowledged and
  counted; it never discards its neighbours or blocks the acknowledgement.
* An ack that ran ahead (a forged or stray frame from the peer's address: the
  protocol has no authentication) is undone by the peer's own acks: when they
  stay behind packets taken as acknowledged, those packets are sent again
  (``ack_regressions``), instead of the link stalling until ``stall_timeout``.
  Acks that stay ahead of anything sent (the peer delivered forged packets in
  the places of ours) make the numbering jump after them, and the packets not
  yet acknowledged go out again under the new numbers (``seq_resyncs``).
  ``recover_acks=False`` turns both off, as Anki's robot firmware has them: every
  ack is cumulative and final.
* Two queues wait for the window: a message sent with ``background=True`` (the
  robot's animation stream: faces, sound, keyframes, 60 packets a second) goes out
  only when no other reliable packet waits, and only while fewer than
  ``background_window`` packets are unacknowledged, so that a backlog of the stream
  on a lossy link never holds up a command behind it (the robot delivers in order:
  a command waits for at most that many stream packets sent before it).
  :meth:`drop_background` empties its queue (a stop, or an aborted animation, makes
  what waits in it moot), and :meth:`disconnect` does too, so that Disconnect is the
  last packet sent. It goes out once the packets before it are acknowledged (see
  :data:`BYE_HOLD_S`: Anki's firmware acknowledges nothing after it).
* Keepalive: the engine pings every ``ping_interval`` and measures the round
  trip from the robot's echo. The peer is declared lost after ``peer_timeout``
  seconds without any datagram. :meth:`connect` after a loss or a disconnect
  starts a clean new connection on the same object.
"""

from __future__ import annotations

import enum
import logging
import math
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Dict, List, Optional, Tuple

from .errors import LocalProtocolError, NotConnectedError, PacketTooLargeError, RemoteProtocolError
from .frames import (
    MAX_PAYLOAD_SIZE,
    OOB_SEQ,
    SEQ_MODULUS,
    FrameType,
    RawPacket,
    decode_frame,
    encode_frame,
)
from .messages import ClearPath, PacketType, StopAllMotors, decode_message, encode_packet

__all__ = [
    "Role",
    "State",
    "SessionConfig",
    "SessionStats",
    "Session",
    "Connected",
    "Disconnected",
    "ConnectionLost",
    "MessageReceived",
    "PingAnswered",
    "ReceiveError",
    "SendQueueFullError",
    "give_up",
    "abandon",
    "reliable_mark",
    "acknowledged",
    "robot_closes_link",
    "ROBOT_CLOSED_LINK",
    "DISCONNECT_UNACKNOWLEDGED",
]

logger = logging.getLogger("cozmo.protocol")
#: ``extra`` of a warning that the link's state changed (no answer, connection lost): the
#: event carries it too, with its reason, and a listener that reports it (the driver) may
#: have a log handler leave these out (``record.cozmo_link_change``)
LINK_CHANGE = {"cozmo_link_change": True}

_PING_BODY = struct.Struct("<dIIB")
_CONNECT_PACKET = struct.pack("<BH", PacketType.CONNECT, 0)
_DISCONNECT_PACKET = struct.pack("<BH", PacketType.DISCONNECT, 0)
_ACK_PACKET = struct.pack("<BH", PacketType.KEYFRAME, 0)
#: engine: the stop that goes ahead of the farewell Disconnect (see _farewell_disconnect),
#: the messages of the driver's own stop (RobotLink.send: ClearPath, then StopAllMotors)
_FAREWELL_STOP = (encode_packet(ClearPath(unknown=0)), encode_packet(StopAllMotors()))
#: a reliable packet longer than this (its id and body, what the robot's length field counts)
#: is acknowledged at once with an explicit ACK packet by Anki's newer robot firmware: half
#: the most a message may have (1420 - 14 - 3 = 1403 bytes, reliableTransport.c)
BIG_PACKET = 701

#: engine: the reason of the loss of a link the robot closed itself with Disconnect, as Anki's
#: firmware does when its queue of messages awaiting our acknowledgement is full
ROBOT_CLOSED_LINK = "the robot closed the link (Disconnect)"
#: engine: the reason of a link closed with its Disconnect (or what went before it, the stop)
#: not acknowledged: the robot may not have had the stop
DISCONNECT_UNACKNOWLEDGED = "disconnected (unacknowledged)"

#: engine: how long after a Connect greeting on a live link the robot has to show, by
#: acknowledging this connection's packets, that the greeting was a replay, s
RESET_CONFIRM_S = 0.5
#: the peer's acks must stay behind packets taken as acknowledged in this many frames ...
ACK_BEHIND_FRAMES = 3
#: ... and for this long before those packets are sent again (a late frame is one frame), s
ACK_BEHIND_CONFIRM_S = 0.2
#: fast retransmission: the oldest unacknowledged packet is sent again at once when a frame
#: acknowledges everything before it but not it, this long after it was last sent: a
#: multiple of the smoothed round trip ...
FAST_RETX_RTT = 1.5
#: ... plus a margin for the peer's delayed acknowledgement and jitter, s
FAST_RETX_MARGIN_S = 0.01
#: engine: a Disconnect waits no longer than this for its acknowledgement once the robot has
#: gone silent (stopped, out of range: none will come; a live robot streams 30 states a second)
CLOSING_SILENCE_S = 0.5
#: engine, connecting: a robot still holding an old link is sent a Disconnect for it at most
#: this often while its frames come (see _stale_link), s
STALE_LINK_DISCONNECT_S = 0.2


#: engine: the Disconnect waits this long at most for the packets before it (the stop) to
#: be acknowledged: Anki's firmware ends the link on the Disconnect and acknowledges nothing
#: after it, of its own datagram either (reliableTransport.c Receiver_OnDisconnect, client.c),
#: so only a stop acknowledged before it is known to have arrived, s
BYE_HOLD_S = 1.0
#: engine: once everything before the Disconnect is acknowledged, the link is closed this
#: long after the Disconnect went out (a peer that acknowledges it closes it sooner): time
#: for one retransmission of it, since the firmware never acknowledges it, s
BYE_GRACE_S = 0.2


def _bye_deadline(session: "Session") -> Optional[float]:
    """CLOSING: when the held Disconnect goes out all the same, or when the link counts as
    closed, everything before the Disconnect acknowledged (None: neither is due)."""
    if session._bye_held:
        return session._closing_since + BYE_HOLD_S
    if session._bye_after_all and len(session._unacked) == 1 and not session._pending:
        return next(iter(session._unacked.values())).first_sent_at + BYE_GRACE_S
    return None


def _closing_progress(session: "Session", now: float) -> None:
    """CLOSING: send the Disconnect once what was sent before it is acknowledged (or held
    BYE_HOLD_S); close once it is acknowledged, or BYE_GRACE_S after it went out if
    everything before it was (see BYE_HOLD_S)."""
    idle = not session._unacked and not session._pending
    if session._bye_held:
        if idle or now >= session._closing_since + BYE_HOLD_S:
            session._bye_held, session._bye_after_all = False, idle
            session._queue_reliable(_DISCONNECT_PACKET)
    elif idle or (_bye_deadline(session) or math.inf) <= now:
        session._finish(State.CLOSED, Disconnected("disconnected"))


def _ping_frame(session: "Session", now: float, ack: int) -> bytes:
    """A keepalive PING (the engine's), remembered until its answer or 64 more."""
    counter = session._ping_counter
    session._ping_counter = (counter + 1) & 0xFFFFFFFF
    session._ping_sent[counter] = now
    if len(session._ping_sent) > 64:  # unanswered pings are forgotten, oldest first
        del session._ping_sent[next(iter(session._ping_sent))]
    session._last_ping = now
    session.stats.pings_sent += 1
    body = _PING_BODY.pack(now * 1000.0, counter, 0, 0)
    return encode_frame(FrameType.PING, OOB_SEQ, OOB_SEQ, ack, body)


def _closing_end(closing_since: float, last_rx: Optional[float], timeout: float) -> float:
    """When a session in CLOSING gives up waiting: ``timeout`` after the Disconnect, or
    ``CLOSING_SILENCE_S`` after the last datagram of the peer if that is sooner."""
    end = closing_since + timeout
    if last_rx is not None:
        end = min(end, max(last_rx, closing_since) + CLOSING_SILENCE_S)
    return end


class Role(enum.Enum):
    ENGINE = "engine"
    ROBOT = "robot"


def _disconnect_frame(session: "Session", seq: int, ack: int) -> bytes:
    return encode_frame(session._out_frame_type, seq, seq, ack, _DISCONNECT_PACKET)


def _farewell_disconnect(session: "Session") -> Tuple[bytes, bytes]:
    """Engine, on losing a robot that fell silent: one frame, twice, to go out ahead of the
    next RESET: ClearPath and StopAllMotors, then a Disconnect, reliable packets numbered as
    the next new ones (the robot takes packets in order only). A robot that still hears us
    (only its replies are lost) has every packet before them: it stops the treads it would
    otherwise keep driving on the last DriveWheels (the robot keeps a motor command when a
    link ends, and the driver sends nothing more), and closes its link; Anki's firmware
    otherwise holds the link and drops the RESETs of a new connection from this address as
    duplicates, each of which keeps the old link alive (reliableTransport.c as published
    first; a later version counts only packets it takes), until it hears
    nothing for its timeout. A robot that does not hear us, or is not in step, ignores it
    (:func:`_stale_link` then ends the link when the robot is heard again). The numbers are
    this link's only: the next connection starts from 0 (:meth:`Session._reset_link`)."""
    ack = (session._expected - 1) % SEQ_MODULUS if session._received_any else OOB_SEQ
    first = session._next_seq
    last = (first + len(_FAREWELL_STOP)) % SEQ_MODULUS
    frame = encode_frame(session._out_frame_type, first, last, ack, b"".join(_FAREWELL_STOP) + _DISCONNECT_PACKET)
    return frame, frame


def give_up(session: "Session", now: float) -> Optional[float]:
    """Engine: the layer above gives up on a connected link before the session's own
    ``peer_timeout`` (the robot streamed no state for its ``state_timeout``): the link
    ends as when the robot fell silent, the farewell's stop and Disconnect
    (:func:`_farewell_disconnect`) going out ahead of the next RESET, but with no event
    (the caller reports the loss). Returns how long nothing was heard from the robot, s
    (None: nothing ever was)."""
    last_rx = session._last_rx
    if session.role is Role.ENGINE and session.state is State.CONNECTED:
        session._farewell.extend(_farewell_disconnect(session))
        session.state = State.LOST
        session._reset_link(last_rx)
    return None if last_rx is None else now - last_rx


def abandon(session: "Session") -> None:
    """Engine: the I/O is over before the link closed: CLOSING (the peer had not acknowledged
    what went before the Disconnect, or the Disconnect), or CONNECTING or CONNECTED (no
    disconnect was asked for before the I/O ended): the link is closed now, what was not
    acknowledged dropped, with no event (the caller reports it)."""
    if session.role is Role.ENGINE and session.state in (State.CONNECTING, State.CONNECTED, State.CLOSING):
        session.state = State.CLOSED
        session._reset_link(session._last_rx)


def reliable_mark(session: "Session") -> Tuple[Deque[bytes], bytes]:
    """The reliable packet queued last by :meth:`Session.send` (not a background one),
    marked for :func:`acknowledged`; call it right after that send."""
    return session._pending, session._pending[-1]


def acknowledged(session: "Session", mark: Tuple[Deque[bytes], bytes]) -> bool:
    """Whether the peer has acknowledged the packet of ``mark`` (:func:`reliable_mark`): it
    waits neither for the window nor for an acknowledgement, on the same connection (one
    that ended dropped it unacknowledged). Packets queued after it do not count."""
    pending, packet = mark
    if session._pending is not pending:  # the link was reset since
        return False
    return (all(p is not packet for p in pending)
            and all(entry.packet is not packet for entry in session._unacked.values()))


def robot_closes_link(session: "Session") -> bool:
    """Robot: end a live link from the robot's side, as Anki's firmware does when its queue
    of messages awaiting the client's acknowledgement is full: a Disconnect numbered as the
    next reliable packet (the client takes packets in order), and the link is over (what
    waits unsent is dropped; the client must RESET again). Whether there was a link."""
    if session.role is not Role.ROBOT or session.state is not State.CONNECTED:
        return False
    ack = (session._expected - 1) % SEQ_MODULUS if session._received_any else OOB_SEQ
    session._farewell.append(_disconnect_frame(session, session._next_seq, ack))
    logger.info("[%s] closing the link (Disconnect)", session.name)
    session._finish(State.IDLE, Disconnected("the robot closed the link"))
    return True


def _stale_link(session: "Session", frame: Any, now: float) -> None:
    """Engine, connecting: a frame of the robot's that does not answer our RESET. A robot
    that acknowledges more than a RESET in it still holds a link to this address from
    before: the network failed both ways for less than the robot's own timeout, so it
    missed the farewell, and Anki's firmware drops a RESET on a live link as a duplicate
    while each one keeps that link alive (reliableTransport.c as published first; a later
    version lets the link end 5 s after the last packet it took), so that RESETs alone
    never get through. The frame's ack is the last of our old packets the robot took: a
    Disconnect numbered one after it is the packet the robot waits for, and ends that
    link; a RESET follows it at once. At most one every ``STALE_LINK_DISCONNECT_S``."""
    last = session._stale_disconnect_at
    if (session.role is Role.ENGINE and frame.type == FrameType.ROBOT and 0 < frame.ack < SEQ_MODULUS
            and (last is None or now >= last + STALE_LINK_DISCONNECT_S)):
        session._stale_disconnect_at = now
        session.stats.stale_link_disconnects += 1
        session._farewell.append(_disconnect_frame(session, (frame.ack + 1) % SEQ_MODULUS, OOB_SEQ))
        session._reset_due = True
        logger.info("[%s] the robot still holds a link from before: ending it", session.name)


def _greeting_on_live_link(session: "Session", frame: Any, now: float) -> bool:
    """Engine, connected: whether ``frame`` is set aside as a Connect greeting on a live
    link, or as a frame that decides nothing after one. Such a greeting (packet 0,
    acknowledging nothing or only the RESET) after the robot acknowledged our packets
    means it took a RESET we did not send, or is a replay of an old greeting (it can be
    byte for byte the real one). A frame that still acknowledges our packets within
    RESET_CONFIRM_S shows a replay (``replayed_connects``), and the link goes on; none in
    that time means the robot forgot the link (:meth:`Session.handle_timer`). Before the
    robot acknowledged one of our packets (an ack of 0 from a robot that greeted with it
    names the RESET) a greeting is the robot's own resend: our acknowledgements of it were
    lost, and it is taken as the duplicate it is."""
    if (session._peer_acked and frame.ack in (OOB_SEQ, 0) and frame.first_seq == 0 and frame.packets
            and frame.packets[0].packet_type == PacketType.CONNECT):
        if session._reset_suspected_at is None:
            session._reset_suspected_at = now
        return True
    if session._reset_suspected_at is None:
        return False
    if frame.ack in (OOB_SEQ, 0):
        # acknowledges nothing (or only a RESET): a robot that forgot the link sends such
        # frames, and so can anyone at its address (a replayed or forged one can come
        # before the robot's own next frame), so it decides nothing; it is set aside
        session.stats.unexpected_frames += 1
        return True
    session._reset_suspected_at = None
    session.stats.replayed_connects += 1
    return False


def _robot_takes_reset(session: "Session", now: float) -> None:
    """Robot: a client (re)started the link: answer with Connect as packet 0 (with
    ``reset_is_packet``, the RESET is the client's packet 0). On a live
    link a RESET is dropped when it is a network copy of the one just answered (nothing
    reliable came since, within ``duplicate_reset_window``) and, with ``hold_link``, always:
    Anki's firmware takes a RESET as packet 1, behind a live link's numbers, and drops it
    as a duplicate; as a frame of the client's it still keeps the link alive."""
    if session.state is State.CONNECTED:
        if session.config.hold_link:
            session._last_rx = now
            session.stats.resets_refused += 1
            return
        if (session._expected == (1 if session.config.reset_is_packet else 0)
                and session._reset_accepted_at is not None
                and now < session._reset_accepted_at + session.config.duplicate_reset_window):
            session.stats.unexpected_frames += 1  # a copy of the RESET we just answered
            return
        logger.info("[%s] client reset the link", session.name)
    session._reset_accepted_at = now
    session._reset_link(now)
    if session.config.reset_is_packet:
        # the RESET is the client's packet 0, received: the next is 1, and every frame
        # acknowledges the RESET until more comes
        session._expected = 1
        session._received_any = True
    session.state = State.CONNECTED
    session.stats.connects += 1
    session._pending.append(_CONNECT_PACKET)
    session._events.append(Connected())


class State(enum.Enum):
    IDLE = "idle"              # engine: never connected; robot: waiting for a RESET
    CONNECTING = "connecting"  # engine: RESET sent, waiting for Connect
    CONNECTED = "connected"
    CLOSING = "closing"        # engine: Disconnect sent, waiting for its acknowledgement
    CLOSED = "closed"          # engine: disconnected on request
    LOST = "lost"              # the peer fell silent (or never answered)


class SendQueueFullError(LocalProtocolError):
    """More reliable packets are waiting for the window than ``max_pending``."""


@dataclass
class SessionConfig:
    """Tunables of a session; times in seconds. The defaults suit a real robot."""

    window: int = 62
    #: engine: interval between keepalive pings while connected
    ping_interval: float = 0.5
    #: silence after which the peer is declared lost (the robot drops a client after 5 s)
    peer_timeout: float = 3.0
    #: engine: RESET is repeated this often until the robot answers ...
    reset_interval: float = 0.5
    #: ... and given up (state LOST) after this long
    connect_timeout: float = 5.0
    #: engine: how long a Disconnect may wait for its acknowledgement (and the stop before
    #: it for its delivery: on a link losing a fifth of its datagrams each way that takes
    #: up to about 2 s, behind the animation stream's packets already sent), as long as the
    #: robot is heard of (see CLOSING_SILENCE_S)
    disconnect_timeout: float = 2.0
    rto_initial: float = 0.1
    rto_min: float = 0.1
    rto_max: float = 1.0
    #: the peer still sends but has not acknowledged our oldest packet for this long,
    #: through at least ``stall_retransmissions`` resends: it has forgotten the link
    stall_timeout: float = 10.0
    stall_retransmissions: int = 10
    #: robot: a RESET this soon after the accepted one, with nothing reliable received
    #: in between, is a network duplicate and is ignored
    duplicate_reset_window: float = 0.25
    #: a lone acknowledgement waits this long for a frame to ride on
    ack_delay: float = 0.005
    #: reliable packets allowed to wait for window space before send() refuses more
    max_pending: int = 4096
    #: background packets go out only while fewer reliable packets than this are
    #: unacknowledged, so that a command is delivered behind at most this many (the
    #: robot delivers in order); at 60 a second that leaves the stream a third of a
    #: second of acknowledgements missing before it waits
    background_window: int = 20
    #: robot: while a link lives, drop every RESET (as Anki's firmware does) instead of
    #: taking one from the client as the start of a new link
    hold_link: bool = False
    #: keep packets that arrive after a gap until the gap is filled (False: drop them, as
    #: Anki's robot firmware does: it takes only the next packet in order)
    buffer_out_of_order: bool = True
    #: robot: acknowledge every reliable packet of more than BIG_PACKET bytes at once with an
    #: explicit ACK packet (type 0x0a, which the notes call Keyframe), as Anki's newer firmware
    #: does
    ack_big_packets: bool = False
    #: robot: take a RESET as the client's reliable packet 0, as Anki's firmware does
    #: (reliableTransport.c: a new link expects 1 on the wire, the RESET is numbered 1, and
    #: the next expected is 2; Anki's engine numbered its RESET so and its first packet 2).
    #: A client that numbers its first packet like the RESET (the reference client, and this
    #: class as the engine) has it dropped as a duplicate and acknowledged all the same
    reset_is_packet: bool = False
    #: robot: acknowledge the engine's Disconnect (Anki's firmware does not: it ends the link
    #: on it, see BYE_HOLD_S)
    ack_disconnect: bool = True
    #: undo an ack that ran ahead when the peer's own acks stay behind it, and jump the
    #: numbering after acks that stay ahead of anything sent (:class:`_AckGuard`); False
    #: takes every ack as cumulative and final, as Anki's robot firmware does (a packet
    #: taken as acknowledged is never sent again)
    recover_acks: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.window <= 1000:
            raise ValueError(f"window must be 1..1000, got {self.window}")
        if self.background_window < 1:
            raise ValueError(f"background_window must be >= 1, got {self.background_window}")
        for name in ("ping_interval", "peer_timeout", "reset_interval", "connect_timeout",
                     "disconnect_timeout", "rto_initial", "rto_min", "rto_max", "stall_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.ack_delay < 0 or self.max_pending < 1 or self.duplicate_reset_window < 0:
            raise ValueError("ack_delay and duplicate_reset_window must be >= 0, max_pending >= 1")
        if self.stall_retransmissions < 1:
            raise ValueError("stall_retransmissions must be >= 1")


@dataclass
class SessionStats:
    """Counters of one session; they survive reconnects."""

    datagrams_sent: int = 0
    datagrams_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    reliable_packets_sent: int = 0
    reliable_packets_delivered: int = 0
    oob_packets_sent: int = 0
    oob_packets_received: int = 0
    retransmissions: int = 0
    retransmission_timeouts: int = 0
    #: the packets in flight sent again, from the oldest on, on a duplicate acknowledgement
    #: before their retransmission timeout
    fast_retransmissions: int = 0
    #: reliable packets dropped because one before them was missing (buffer_out_of_order off)
    out_of_order_dropped: int = 0
    standalone_acks: int = 0
    #: explicit acknowledgement packets (type 0x0a) received: they carry nothing else
    explicit_acks: int = 0
    malformed_datagrams: int = 0
    malformed_packets: int = 0
    unknown_messages: int = 0
    duplicate_packets: int = 0
    out_of_window_packets: int = 0
    #: frames dropped as out of place: a FIN or RESET from the robot's address, frames
    #: before the robot's Connect or while not connected (left over from an old connection)
    unexpected_frames: int = 0
    pings_sent: int = 0
    pings_answered: int = 0
    #: engine: ping echoes dropped as they answer no ping of this connection that awaits
    #: its echo (a network duplicate, an echo of a ping of an earlier connection, or of one
    #: forgotten among 64 unanswered)
    unmatched_ping_echoes: int = 0
    connects: int = 0
    #: connections that were up and were lost (not counting attempts the robot never answered)
    connections_lost: int = 0
    #: connection attempts the robot did not answer within connect_timeout
    connect_timeouts: int = 0
    #: connections the robot answered but that never streamed its state (counted by the
    #: client, which knows what ready means: cozmo_driver.client.link)
    connections_without_state: int = 0
    #: engine: the robot opened a new connection this session did not ask for (it took a
    #: RESET from someone else: forged, stray or replayed); the link was given up
    peer_resets: int = 0
    #: engine: Disconnects sent, while connecting, to a robot that still held a link to this
    #: client from before (see ``_stale_link``)
    stale_link_disconnects: int = 0
    #: robot (``hold_link``): RESETs dropped because a link lived
    resets_refused: int = 0
    #: engine: a Connect greeting on a connected link that a frame within RESET_CONFIRM_S
    #: showed to be a replay (it still acknowledged this connection's packets); nothing
    #: was lost
    replayed_connects: int = 0
    #: the peer's acknowledgements stayed behind packets this session had taken as
    #: acknowledged (by a forged or stray frame whose ack ran ahead): they were sent again
    ack_regressions: int = 0
    #: the peer's acks stayed ahead of anything this session sent (it had taken forged or
    #: stray packets for ours): numbering jumped after its ack and the unacknowledged
    #: packets were sent again
    seq_resyncs: int = 0
    discarded_on_reset: int = 0
    #: background packets (the animation stream) dropped from their queue before being
    #: sent, by :meth:`Session.drop_background` or a disconnect
    background_dropped: int = 0
    rtt_s: Optional[float] = None
    srtt_s: Optional[float] = None


# ----------------------------------------------------------------------------- events

@dataclass(slots=True)
class Connected:
    """Engine: the robot answered the RESET. Robot: a client reset the link."""


@dataclass(slots=True)
class Disconnected:
    """The connection ended in order (``reason`` says how)."""

    reason: str


@dataclass(slots=True)
class ConnectionLost:
    """The peer fell silent for ``silence_s`` seconds, or never answered."""

    reason: str
    silence_s: float


@dataclass(slots=True)
class MessageReceived:
    message: Any
    reliable: bool


@dataclass(slots=True)
class PingAnswered:
    counter: int
    rtt_s: float


@dataclass(slots=True)
class ReceiveError:
    """A datagram or packet was dropped as malformed (already counted in stats)."""

    reason: str


class _Unacked:
    __slots__ = ("packet", "first_sent_at", "sent_at", "sends")

    def __init__(self, packet: bytes, sent_at: float) -> None:
        self.packet = packet
        self.first_sent_at = sent_at
        self.sent_at = sent_at
        self.sends = 1


class _Persisting:
    """A condition seen in frame after frame: :meth:`seen` is True once it held in
    ``ACK_BEHIND_FRAMES`` frames over ``ACK_BEHIND_CONFIRM_S`` without a :meth:`clear` in
    between (and starts counting again)."""

    __slots__ = ("since", "frames")

    def __init__(self) -> None:
        self.since: Optional[float] = None
        self.frames = 0

    def clear(self) -> None:
        self.since = None

    def seen(self, now: float) -> bool:
        if self.since is None:
            self.since, self.frames = now, 1
            return False
        self.frames += 1
        if self.frames < ACK_BEHIND_FRAMES or now < self.since + ACK_BEHIND_CONFIRM_S:
            return False
        self.since = None
        return True


class _AckGuard:
    """The acks that acknowledge nothing new, for one link.

    Normally such an ack names the last packet taken as acknowledged, or an older one in a
    frame that arrived late. But the protocol has no authentication: a forged or stray
    frame from the peer's address is taken for the peer's, and two kinds would stall a
    plain selective-repeat link until ``stall_timeout``:

    * an ack that runs ahead of what the peer really has: the packets it covers would
      never be sent again, and the peer would wait for them for ever. When the peer's own
      acks stay behind packets taken as acknowledged, those packets go back to the
      unacknowledged ones and are sent again (``ack_regressions``);
    * packets numbered as our next ones, which the peer delivers in the places of ours: it
      takes ours for duplicates and acknowledges beyond anything we sent, so nothing would
      be acknowledged again. When its acks stay ahead so, our numbering jumps after its ack
      and the packets not yet acknowledged are queued again, first, under the new numbers
      (``seq_resyncs``).

    "Stay": in ``ACK_BEHIND_FRAMES`` frames over ``ACK_BEHIND_CONFIRM_S`` with no ordinary
    ack in between (:class:`_Persisting`), so that one late frame changes nothing."""

    def __init__(self, window: int) -> None:
        self.window = window
        # the last acknowledged packets (at most a window of them, oldest first)
        self.acked: Dict[int, _Unacked] = {}
        self.behind = _Persisting()
        self.ahead = _Persisting()

    def taken(self, seq: int, entry: _Unacked) -> None:
        """``seq`` was taken as acknowledged."""
        acked = self.acked
        acked[seq] = entry
        if len(acked) > self.window:
            del acked[next(iter(acked))]

    def progress(self) -> None:
        """An ack acknowledged something new: nothing is in dispute."""
        self.behind.clear()
        self.ahead.clear()

    def old_ack(self, session: "Session", ack: int, now: float) -> None:
        if not session.config.recover_acks:
            return  # every ack cumulative and final, as Anki's robot firmware has them
        if (ack - session._next_seq) % SEQ_MODULUS < self.window:
            if self.ahead.seen(now):
                self._renumber(session, ack)
            return
        self.ahead.clear()
        acked = self.acked
        if not acked or (ack + 1) % SEQ_MODULUS not in acked:
            self.behind.clear()  # the last acknowledged packet, or older than the record
            return
        if not self.behind.seen(now):
            return
        restored: Dict[int, _Unacked] = {}
        seq = (ack + 1) % SEQ_MODULUS
        while seq in acked:
            restored[seq] = acked.pop(seq)
            seq = (seq + 1) % SEQ_MODULUS
        count = len(restored)
        for entry in restored.values():
            entry.sends = max(entry.sends, 2)  # no RTT sample from these (Karn)
        restored.update(session._unacked)
        session._unacked = restored
        known = set(session._retx)
        session._retx = [s for s in restored if s not in known] + session._retx
        session.stats.ack_regressions += 1
        logger.warning("[%s] the peer's acknowledgements stay at packet %d, behind packets taken "
                       "as acknowledged (a forged or stray frame's ack ran ahead): %d packet(s) "
                       "sent again", session.name, ack, count)

    def _renumber(self, session: "Session", ack: int) -> None:
        again = [entry.packet for entry in session._unacked.values()]
        session._unacked = {}
        self.acked.clear()
        session._retx = []
        session._pending.extendleft(reversed(again))
        skipped = (ack + 1 - session._next_seq) % SEQ_MODULUS
        session._next_seq = (ack + 1) % SEQ_MODULUS
        session.stats.seq_resyncs += 1
        logger.warning("[%s] the peer acknowledges up to packet %d, which was never sent (it "
                       "took forged or stray packets for ours): numbering continues after it "
                       "(%d numbers skipped), %d packet(s) sent again", session.name, ack, skipped,
                       len(again))


def _rtt_sample(session: "Session", rtt: float) -> None:
    """A round trip measured: the smoothed RTT, its variation and the RTO (RFC 6298's way)."""
    stats = session.stats
    stats.rtt_s = rtt
    if stats.srtt_s is None:
        stats.srtt_s = rtt
        session._rttvar = rtt / 2
    else:
        session._rttvar = 0.75 * session._rttvar + 0.25 * abs(stats.srtt_s - rtt)
        stats.srtt_s = 0.875 * stats.srtt_s + 0.125 * rtt
    cfg = session.config
    session._rto = min(cfg.rto_max, max(cfg.rto_min, stats.srtt_s + 4 * session._rttvar))


class Session:
    """One end of a Cozmo link. See the module docstring."""

    def __init__(self, role: Role, config: Optional[SessionConfig] = None, name: str = "") -> None:
        self.role = role
        self.config = config or SessionConfig()
        self.name = name or role.value
        self.stats = SessionStats()
        self.state = State.IDLE
        self._events: Deque[Any] = deque()
        #: the events not taken yet, oldest first (read-only: take them with next_event();
        #: a layer above may look whether there are any without a call)
        self.pending_events = self._events
        self._out_frame_type = FrameType.ENGINE if role is Role.ENGINE else FrameType.ROBOT
        self._ping_counter = 0
        self._rttvar = 0.0
        self._farewell: List[bytes] = []  # datagrams that outlive a link reset
        self._reset_accepted_at: Optional[float] = None
        self._reset_link(None)

    # ------------------------------------------------------------------ state reset

    def _reset_link(self, now: Optional[float]) -> None:
        """Forget both windows and every queue: a new connection starts from seq 0."""
        pending = getattr(self, "_pending", None)
        unacked = getattr(self, "_unacked", None)
        background = getattr(self, "_background", None)
        if pending or unacked or background:
            self.stats.discarded_on_reset += len(pending or ()) + len(unacked or ()) + len(background or ())
        self._next_seq = 0                       # next reliable seq to assign
        self._unacked: Dict[int, _Unacked] = {}  # seq -> packet, insertion ordered
        self._ack_guard = _AckGuard(self.config.window)
        self._pending: Deque[bytes] = deque()    # reliable packets waiting for the window
        self._background: Deque[bytes] = deque()  # the same, sent when _pending is empty
        self._oob_out: List[bytes] = []           # out-of-band packets for the next flush
        self._retx: List[int] = []                # seqs due for retransmission
        self._fast_retx_of: Optional[int] = None  # fast-retransmitted until progress: one a loss
        self._expected = 0                        # next reliable seq we will deliver
        self._rx_buffer: Dict[int, RawPacket] = {}
        self._received_any = False
        self._peer_acked = False                  # the peer acknowledged one of our packets
        self._greeting_ack = OOB_SEQ              # the ack of the robot's greeting (engine)
        self._reset_suspected_at: Optional[float] = None  # a Connect greeting came (engine)
        self._ack_due: Optional[float] = None
        self._rto = self.config.rto_initial
        self._rto_backoff = 1
        self.stats.rtt_s = self.stats.srtt_s = None  # a round trip is of a connection
        self._rttvar = 0.0
        #: pings of this connection awaiting their echo (counter -> when sent): an echo of
        #: an earlier connection's ping, late, is no round trip of this one
        self._ping_sent: Dict[int, float] = {}
        self._last_rx = now
        self._last_ping = None
        self._ping_due = False
        self._reset_due = False
        self._reset_sent_at: Optional[float] = None
        self._connect_started: Optional[float] = None
        self._closing_since: Optional[float] = None
        self._bye_held = self._bye_after_all = False  # the Disconnect waits / all before it taken
        self._stale_disconnect_at: Optional[float] = None

    # ------------------------------------------------------------------ user calls

    def connect(self, now: float) -> None:
        """Engine: start (or restart) a connection: a RESET goes out at once."""
        if self.role is not Role.ENGINE:
            raise LocalProtocolError("only the engine role connects; the robot answers RESET")
        self._reset_link(now)
        self.state = State.CONNECTING
        self._connect_started = now
        self._reset_due = True
        logger.info("[%s] connecting", self.name)

    def disconnect(self, now: float) -> None:
        """Engine: send Disconnect; nothing more is accepted after it."""
        if self.role is not Role.ENGINE:
            raise LocalProtocolError("only the engine role disconnects")
        if self.state is State.CONNECTED:
            self.drop_background()
            self.state, self._closing_since, self._bye_held = State.CLOSING, now, True
            _closing_progress(self, now)  # the Disconnect, once what went before is taken
            logger.info("[%s] disconnecting", self.name)
        elif self.state in (State.CONNECTING, State.LOST):
            self._finish(State.CLOSED, Disconnected("disconnected before the robot answered"))

    def send(self, message, background: bool = False) -> None:
        """Queue a message. Reliable messages need a connection; events go out as they are;
        ``background``: see the module docstring."""
        packet = encode_packet(message)
        if len(packet) > MAX_PAYLOAD_SIZE:
            raise PacketTooLargeError(
                f"{message.NAME} takes {len(packet)} bytes but a frame carries at most "
                f"{MAX_PAYLOAD_SIZE}: it cannot be sent")
        if message.OOB:
            if self.state is not State.CONNECTED:
                raise NotConnectedError(f"cannot send {message.NAME}: session is {self.state.value}")
            self._oob_out.append(packet)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("[%s] >> %r", self.name, message)
            return
        if self.state is not State.CONNECTED:
            raise NotConnectedError(f"cannot send {message.NAME}: session is {self.state.value}")
        self._queue_reliable(packet, background)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("[%s] >> %r", self.name, message)

    def send_ping(self) -> int:
        """Engine: ping now (on the next flush); returns the ping's counter."""
        if self.role is not Role.ENGINE or self.state is not State.CONNECTED:
            raise NotConnectedError("pings are sent by a connected engine")
        self._ping_due = True
        return self._ping_counter

    @property
    def is_connected(self) -> bool:
        return self.state is State.CONNECTED

    @property
    def awaiting_connect(self) -> bool:
        """Engine: a RESET is out and the robot's Connect is awaited (the UDP adapter then
        takes the answer from a new source port of the robot's host)."""
        return self.role is Role.ENGINE and self.state is State.CONNECTING

    @property
    def send_queue_length(self) -> int:
        """Reliable packets not yet acknowledged, in flight or waiting."""
        return len(self._unacked) + len(self._pending) + len(self._background)

    background_queue_length = property(lambda self: len(self._background),
                                       doc="Background packets waiting to be sent (none sent yet).")
    background_queue = property(lambda self: self._background,
                                doc="Those packets, oldest first (read only).")

    def drop_background(self) -> int:
        """Forget the background packets not yet sent (those sent are still delivered);
        returns how many (counted in ``background_dropped``)."""
        dropped = len(self._background)
        self._background.clear()
        self.stats.background_dropped += dropped
        return dropped

    def _queue_reliable(self, packet: bytes, background: bool = False) -> None:
        waiting = len(self._pending) + len(self._background)
        if waiting >= self.config.max_pending:
            raise SendQueueFullError(
                f"{waiting} reliable packets already wait for the robot's window; "
                "slow down or check the link")
        (self._background if background else self._pending).append(packet)

    # ------------------------------------------------------------------ events

    def next_event(self) -> Optional[Any]:
        """The next event, or ``None``."""
        events = self._events
        return events.popleft() if events else None

    # ------------------------------------------------------------------ receiving

    def receive_datagram(self, data: bytes, now: float) -> None:
        """Feed one datagram from the peer. Malformed input is counted, never raised."""
        stats = self.stats
        stats.bytes_received += len(data)
        try:
            frame = decode_frame(data)
        except RemoteProtocolError as exc:
            stats.malformed_datagrams += 1
            self._events.append(ReceiveError(f"malformed datagram dropped: {exc}"))
            logger.debug("[%s] malformed datagram dropped: %s", self.name, exc)
            return
        stats.datagrams_received += 1
        ftype = frame.type
        if ftype == FrameType.RESET:
            if self.role is Role.ROBOT:
                _robot_takes_reset(self, now)
            else:
                stats.unexpected_frames += 1
            return
        if frame.first_seq != OOB_SEQ and frame.first_seq >= SEQ_MODULUS:
            stats.malformed_datagrams += 1
            self._events.append(ReceiveError(f"frame with impossible sequence number {frame.first_seq}"))
            return
        if ftype == FrameType.FIN:
            if self.role is Role.ROBOT and self.state is State.CONNECTED:
                self._peer_disconnected("the engine sent FIN")
            else:
                stats.unexpected_frames += 1  # the robot never sends FIN
            return
        if ftype == FrameType.RESET_ACK or self.state not in (
                State.CONNECTING, State.CONNECTED, State.CLOSING):
            stats.unexpected_frames += 1
            return
        if self.state is State.CONNECTING:
            # only the robot's Connect (packet 0) opens the link; anything else is
            # left over from a previous connection and must not leak into this one
            if not any(p.packet_type == PacketType.CONNECT for p in frame.packets):
                stats.unexpected_frames += 1
                _stale_link(self, frame, now)
                return
            self._greeting_ack = frame.ack  # 0: the robot counts the RESET as its packet 0
        elif self.role is Role.ENGINE and self.state is State.CONNECTED and _greeting_on_live_link(self, frame, now):
            return
        self._last_rx = now
        if frame.ack < SEQ_MODULUS:  # OOB_SEQ means none; 65534 never occurs on the wire
            self._on_ack(frame.ack, now)
        seq = frame.first_seq
        for packet in frame.packets:
            if packet.packet_type >= 5:
                stats.oob_packets_received += 1
                self._deliver(packet, now, reliable=False)
                continue
            if seq == OOB_SEQ:
                stats.malformed_packets += 1
                self._events.append(ReceiveError("reliable packet in a frame without sequence numbers"))
                continue
            self._on_reliable(seq, packet, now)
            seq = (seq + 1) % SEQ_MODULUS
            if self.state not in (State.CONNECTING, State.CONNECTED, State.CLOSING):
                return  # a Disconnect in this frame ended the link

    def _on_reliable(self, seq: int, packet: RawPacket, now: float) -> None:
        if self.state is State.CONNECTING and (seq != 0 or packet.packet_type != PacketType.CONNECT):
            self.stats.unexpected_frames += 1
            return
        distance = (seq - self._expected) % SEQ_MODULUS
        if self._ack_due is None:
            self._ack_due = now + self.config.ack_delay
        if distance >= self.config.window:
            # already delivered (a retransmission) or too far ahead
            if distance > SEQ_MODULUS - self.config.window - 1:
                self.stats.duplicate_packets += 1
            else:
                self.stats.out_of_window_packets += 1
            return
        if distance:
            if not self.config.buffer_out_of_order:
                self.stats.out_of_order_dropped += 1
            elif seq in self._rx_buffer:
                self.stats.duplicate_packets += 1
            else:
                self._rx_buffer[seq] = packet
            return
        self._advance(packet, now)
        buffered = self._rx_buffer
        while buffered:
            nxt = buffered.pop(self._expected, None)
            if nxt is None:
                break
            self._advance(nxt, now)

    def _advance(self, packet: RawPacket, now: float) -> None:
        self._expected = (self._expected + 1) % SEQ_MODULUS
        self._received_any = True
        self.stats.reliable_packets_delivered += 1
        if self.config.ack_big_packets and len(packet.body) + (packet.ident is not None) > BIG_PACKET:
            self._oob_out.append(_ACK_PACKET)  # an explicit acknowledgement, at once
            self._ack_due = now
        self._deliver(packet, now, reliable=True)

    def _deliver(self, packet: RawPacket, now: float, reliable: bool) -> None:
        ptype = packet.packet_type
        if ptype == PacketType.PING:
            self._on_ping(packet.body, now)
            return
        if ptype == PacketType.KEYFRAME:
            # Anki's eRMT_ACK (the notes' "Keyframe"): an explicit acknowledgement, its frame's
            # ack field says what; Anki's newer robot firmware sends one at once for every
            # reliable packet of more than BIG_PACKET bytes (a sound chunk, a large face)
            self.stats.explicit_acks += 1
            return
        if ptype == PacketType.CONNECT:
            if self.role is Role.ENGINE and self.state is State.CONNECTING:
                self.state = State.CONNECTED
                self.stats.connects += 1
                self._ping_due = True
                self._events.append(Connected())
                logger.info("[%s] connected", self.name)
            return
        if ptype == PacketType.DISCONNECT:
            if self.role is Role.ROBOT:
                self._peer_disconnected("the engine sent Disconnect")
            elif self.state is State.CONNECTED:  # Anki's firmware, its send queue full: lost now
                self.stats.connections_lost += 1
                self._finish(State.LOST, ConnectionLost(ROBOT_CLOSED_LINK, 0.0))
            return
        try:
            message = decode_message(ptype, packet.ident, packet.body)
        except RemoteProtocolError as exc:
            self.stats.malformed_packets += 1
            self._events.append(ReceiveError(f"undecodable packet dropped: {exc}"))
            logger.debug("[%s] undecodable packet dropped: %s", self.name, exc)
            return
        if message.NAME == "UnknownMessage":
            self.stats.unknown_messages += 1
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("[%s] << %r", self.name, message)
        self._events.append(MessageReceived(message, reliable))

    def _on_ping(self, body: bytes, now: float) -> None:
        if self.role is Role.ROBOT:
            # echo the ping back unchanged, out of band
            if self.state is State.CONNECTED:
                self._oob_out.append(struct.pack("<BH", PacketType.PING, len(body)) + body)
            return
        if len(body) < _PING_BODY.size:
            self.stats.malformed_packets += 1
            self._events.append(ReceiveError(f"ping echo of {len(body)} bytes dropped"))
            return
        _, counter, _, _ = _PING_BODY.unpack_from(body)
        sent = self._ping_sent.pop(counter, None)
        if sent is None:
            self.stats.unmatched_ping_echoes += 1
            return
        rtt = max(0.0, now - sent)
        self.stats.pings_answered += 1
        _rtt_sample(self, rtt)
        self._events.append(PingAnswered(counter, rtt))

    def _on_ack(self, ack: int, now: float) -> None:
        unacked = self._unacked
        if not unacked:
            if not self._peer_acked:
                return  # nothing of ours sent yet: a robot's ack names the RESET (its packet 0)
            self._on_old_ack(ack, now)
            return
        base = next(iter(unacked))
        in_flight = (self._next_seq - base) % SEQ_MODULUS
        if (ack - base) % SEQ_MODULUS >= in_flight:
            self._on_old_ack(ack, now)  # acknowledges nothing new
            return
        guard = self._ack_guard
        guard.progress()
        sample = None
        while unacked:
            seq = next(iter(unacked))
            entry = unacked.pop(seq)
            guard.taken(seq, entry)
            if entry.sends == 1:
                sample = now - entry.sent_at  # Karn: only never-retransmitted packets
            if seq == ack:
                break
        if sample is not None:
            _rtt_sample(self, sample)
        # the greeting's ack (0) names the RESET, not our packet 0, which such a robot drops
        self._peer_acked = self._peer_acked or ack != self._greeting_ack
        self._rto_backoff = 1
        self._fast_retx_of = None
        if self._retx:
            self._retx = [s for s in self._retx if s in unacked]
        if self.state is State.CLOSING:
            _closing_progress(self, now)

    def _on_old_ack(self, ack: int, now: float) -> None:
        """An ack that acknowledges nothing new: :class:`_AckGuard` looks at it; one just
        short of our oldest packet in flight sends that again (fast retransmission)."""
        unacked, srtt = self._unacked, self.stats.srtt_s
        if unacked and srtt is not None:
            base = next(iter(unacked))
            if ((ack + 1) % SEQ_MODULUS == base and base not in self._retx and base != self._fast_retx_of
                    and now - unacked[base].sent_at >= FAST_RETX_RTT * srtt + FAST_RETX_MARGIN_S):
                # go back N: Anki's firmware drops every packet after a missing one, so
                # all of ours in flight behind it are lost too
                known = set(self._retx)
                self._retx.extend(s for s in unacked if s not in known)
                self._fast_retx_of = base
                self.stats.fast_retransmissions += 1
        self._ack_guard.old_ack(self, ack, now)

    def _on_peer_reset(self, now: float) -> None:
        """Engine: the robot greets us with a new Connect (packet 0, acknowledging nothing)
        although it had acknowledged our packets on this connection: it took a RESET we did
        not send (forged, stray or replayed) and forgot the link. Neither side's windows
        match any more, and the robot waits for a client's handshake (it will not stream
        RobotState until SyncTime), so the connection is over once no frame acknowledging
        our packets came within ``RESET_CONFIRM_S`` of the greeting: report it lost then
        (the caller reconnects with its own RESET) instead of after ``stall_timeout``."""
        self.stats.peer_resets += 1
        self.stats.connections_lost += 1
        silence = now - self._last_rx if self._last_rx is not None else 0.0
        logger.warning("[%s] the robot started a new connection this client did not open "
                       "(a RESET from elsewhere): connection lost", self.name)
        self._finish(State.LOST, ConnectionLost(
            "the robot reset the link (a RESET this client did not send)", silence))

    def _peer_disconnected(self, reason: str) -> None:
        logger.info("[%s] %s", self.name, reason)
        if self._received_any and self.config.ack_disconnect:  # what we got, the Disconnect too
            ack = (self._expected - 1) % SEQ_MODULUS
            self._farewell.append(encode_frame(self._out_frame_type, OOB_SEQ, OOB_SEQ, ack))
        self._finish(State.IDLE, Disconnected(reason))

    def _finish(self, state: State, event: Any) -> None:
        self.state = state
        last_rx = self._last_rx
        self._reset_link(last_rx)
        self._events.append(event)

    # ------------------------------------------------------------------ timers

    def get_timer(self) -> Optional[float]:
        """When :meth:`handle_timer` must run next, or ``None`` for never."""
        state = self.state
        if state is State.IDLE or state is State.CLOSED or state is State.LOST:
            return 0.0 if self._farewell else None
        cfg = self.config
        candidates = []
        if state is State.CONNECTING:
            if self._reset_sent_at is not None:
                candidates.append(self._reset_sent_at + cfg.reset_interval)
            candidates.append(self._connect_started + cfg.connect_timeout)
            return min(candidates)
        if self._ack_due is not None:
            candidates.append(self._ack_due)
        if self._unacked:
            oldest = min(e.sent_at for e in self._unacked.values())
            candidates.append(oldest + self._rto * self._rto_backoff)
            base = self._unacked[next(iter(self._unacked))]
            if base.sends > cfg.stall_retransmissions:
                candidates.append(base.first_sent_at + cfg.stall_timeout)
        if self._last_rx is not None:
            candidates.append(self._last_rx + cfg.peer_timeout)
        if self._reset_suspected_at is not None:
            candidates.append(self._reset_suspected_at + RESET_CONFIRM_S)
        if self.role is Role.ENGINE:
            if state is State.CONNECTED and self._last_ping is not None:
                candidates.append(self._last_ping + cfg.ping_interval)
            if state is State.CLOSING and self._closing_since is not None:
                candidates.append(_closing_end(self._closing_since, self._last_rx, cfg.disconnect_timeout))
                candidates.append(_bye_deadline(self) or math.inf)
        return min(candidates) if candidates else None

    def handle_timer(self, now: float) -> None:
        """Run whatever is due at ``now``: resends, acks, pings, timeouts."""
        state = self.state
        cfg = self.config
        if state is State.CONNECTING:
            if now >= self._connect_started + cfg.connect_timeout:
                self.stats.connect_timeouts += 1
                self._finish(State.LOST, ConnectionLost(
                    f"the robot did not answer within {cfg.connect_timeout:.1f} s", now - self._connect_started))
                logger.warning("[%s] no answer from the robot", self.name, extra=LINK_CHANGE)
            elif self._reset_sent_at is not None and now >= self._reset_sent_at + cfg.reset_interval:
                self._reset_due = True
            return
        if state not in (State.CONNECTED, State.CLOSING):
            return
        if self._reset_suspected_at is not None and now >= self._reset_suspected_at + RESET_CONFIRM_S:
            self._on_peer_reset(now)  # the robot greeted us and acknowledged nothing since
            return
        if self._last_rx is not None and now >= self._last_rx + cfg.peer_timeout:
            silence = now - self._last_rx
            self.stats.connections_lost += 1
            logger.warning("[%s] peer silent for %.1f s: connection lost", self.name, silence,
                           extra=LINK_CHANGE)
            if self.role is Role.ROBOT:
                self._finish(State.IDLE, ConnectionLost("client silent", silence))
            elif state is State.CLOSING:
                self._finish(State.CLOSED, Disconnected(DISCONNECT_UNACKNOWLEDGED))
            else:
                self._farewell.extend(_farewell_disconnect(self))
                self._finish(State.LOST, ConnectionLost("robot silent", silence))
            return
        if state is State.CLOSING:
            _closing_progress(self, now)
            if self.state is not State.CLOSING:
                return
        if state is State.CLOSING and now >= _closing_end(self._closing_since, self._last_rx, cfg.disconnect_timeout):
            self._finish(State.CLOSED, Disconnected(DISCONNECT_UNACKNOWLEDGED))
            return
        if self._unacked:
            base = self._unacked[next(iter(self._unacked))]
            oldest = base.first_sent_at
            if now >= oldest + cfg.stall_timeout and base.sends > cfg.stall_retransmissions:
                # traffic still arrives but our packets are never acknowledged: the peer
                # has forgotten this link (rebooted, or took a stale RESET)
                self.stats.connections_lost += 1
                logger.warning("[%s] no acknowledgement for %.1f s: connection lost",
                               self.name, now - oldest, extra=LINK_CHANGE)
                if self.role is Role.ENGINE and state is State.CONNECTED:
                    self._finish(State.LOST, ConnectionLost("robot stopped acknowledging", now - oldest))
                elif self.role is Role.ENGINE:
                    self._finish(State.CLOSED, Disconnected(DISCONNECT_UNACKNOWLEDGED))
                else:
                    self._finish(State.IDLE, ConnectionLost("client stopped acknowledging", now - oldest))
                return
            rto = self._rto * self._rto_backoff
            due = [seq for seq, e in self._unacked.items() if now >= e.sent_at + rto]
            if due and due[0] == next(iter(self._unacked)):
                due = list(self._unacked)  # go back N, as on a duplicate acknowledgement
            if due:
                self.stats.retransmission_timeouts += 1
                known = set(self._retx)
                self._retx.extend(s for s in due if s not in known)
                self._rto_backoff = min(self._rto_backoff * 2, max(1, int(cfg.rto_max / self._rto)))
        if (self.role is Role.ENGINE and state is State.CONNECTED and self._last_ping is not None
                and now >= self._last_ping + cfg.ping_interval):
            self._ping_due = True

    # ------------------------------------------------------------------ sending

    def datagrams_to_send(self, now: float) -> List[bytes]:
        """Everything that should go on the wire now, as whole datagrams."""
        out: List[bytes] = []
        if self._farewell:
            out.extend(self._farewell)
            self._farewell = []
        state = self.state
        ack = (self._expected - 1) % SEQ_MODULUS if self._received_any else OOB_SEQ
        if state is State.CONNECTING:
            if self._reset_due:
                self._reset_due = False
                self._reset_sent_at = now
                out.append(encode_frame(FrameType.RESET, 0, 0, OOB_SEQ))
        elif state is State.CONNECTED or state is State.CLOSING:
            items: List[tuple] = []
            # 1. retransmissions, oldest first
            if self._retx:
                unacked = self._unacked
                for seq in sorted(self._retx, key=lambda s: (s - self._send_base()) % SEQ_MODULUS):
                    entry = unacked.get(seq)
                    if entry is not None:
                        entry.sent_at = now
                        entry.sends += 1
                        self.stats.retransmissions += 1
                        items.append((seq, entry.packet))
                self._retx = []
            # 2. new reliable packets, as the window allows: the background ones last, and
            #    only while few are unacknowledged
            config = self.config
            for pending, window in ((self._pending, config.window),
                                    (self._background, min(config.background_window, config.window))):
                while pending and len(self._unacked) < window:
                    packet = pending.popleft()
                    seq = self._next_seq
                    self._next_seq = (seq + 1) % SEQ_MODULUS
                    self._unacked[seq] = _Unacked(packet, now)
                    self.stats.reliable_packets_sent += 1
                    items.append((seq, packet))
            # 3. out-of-band packets
            if self._oob_out:
                self.stats.oob_packets_sent += len(self._oob_out)
                items.extend((OOB_SEQ, p) for p in self._oob_out)
                self._oob_out = []
            if items:
                out.extend(self._pack(items, ack))
            # 4. keepalive (engine) in its own PING frame; it also carries the ack
            if self._ping_due and self.role is Role.ENGINE and state is State.CONNECTED:
                self._ping_due = False
                out.append(_ping_frame(self, now, ack))
            if out or (state is State.CLOSING and not self._bye_held):  # nothing after the Disconnect
                self._ack_due = None
            elif self._ack_due is not None and now >= self._ack_due:
                self._ack_due = None
                self.stats.standalone_acks += 1
                if self.role is Role.ENGINE:
                    out.append(_ping_frame(self, now, ack))
                else:
                    out.append(encode_frame(FrameType.ROBOT, OOB_SEQ, OOB_SEQ, ack))
        if out:
            stats = self.stats
            stats.datagrams_sent += len(out)
            stats.bytes_sent += sum(len(d) for d in out)
        return out

    def _send_base(self) -> int:
        return next(iter(self._unacked)) if self._unacked else self._next_seq

    def _pack(self, items: List[tuple], ack: int) -> List[bytes]:
        """Fill frames up to the payload limit; reliable seqs in a frame are consecutive."""
        frames = []
        ftype = self._out_frame_type
        parts: List[bytes] = []
        size = 0
        first = last = OOB_SEQ
        for seq, packet in items:
            plen = len(packet)
            breaks_run = seq != OOB_SEQ and last != OOB_SEQ and seq != (last + 1) % SEQ_MODULUS
            if parts and (size + plen > MAX_PAYLOAD_SIZE or breaks_run):
                frames.append(encode_frame(ftype, first, last, ack, b"".join(parts)))
                parts, size, first, last = [], 0, OOB_SEQ, OOB_SEQ
            parts.append(packet)
            size += plen
            if seq != OOB_SEQ:
                if first == OOB_SEQ:
                    first = seq
                last = seq
        if parts:
            frames.append(encode_frame(ftype, first, last, ack, b"".join(parts)))
        return frames

