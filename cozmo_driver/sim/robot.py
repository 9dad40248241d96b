"""The simulated Cozmo on the wire: :class:`SimulatedRobot`, sans-I/O.

A :class:`SimulatedRobot` is a :class:`~cozmo_driver.protocol.session.Session` in
the robot role on top of a :class:`~cozmo_driver.sim.model.RobotModel` and a
camera. It has a session's five methods (``receive_datagram``,
``datagrams_to_send``, ``get_timer``, ``handle_timer``, ``next_event``), so the
in-memory link (:class:`~cozmo_driver.transport.memory.MemoryLink`) and the UDP
adapter (:class:`~cozmo_driver.transport.udp.UdpTransport`) both drive it. It
never reads a clock or touches a socket.

On the wire it behaves like the robot (see shared/protocol/PROTOCOL_NOTES.md a, c,
d, j): it answers RESET with Connect, greets with HardwareInfo and
FirmwareSignature, sends BodyInfo after Enable, streams RobotState (about 33 Hz)
and ObjectAvailable only after SyncTime, echoes pings, drops a client after 5 s
of silence and accepts a new one after that, and ends the link with Disconnect when
a reliable message finds its queue of those the client has not acknowledged full
(``RobotConfig.send_queue``, 32 as in Anki's firmware). While a link lives it drops a RESET,
as Anki's firmware does (``RobotConfig.link_policy``; :attr:`holds_link` tells the
UDP adapter to ignore other addresses meanwhile). With EnableCamera(Stream) it sends
about 15 camera frames a second rendered by the world from the true pose, head
and lift, as ImageChunk plus one ImageImuData per frame (rendered on the I/O thread, or on a
:class:`~cozmo_driver.sim.camera_worker.CameraWorker` when one is set, as SimServer
does: ``RobotConfig.camera_render_thread``). Grey and colour frames
are both tagged JPEGMinimizedGray (8) by default, the payload's first byte saying
which it is: the reference client rebuilds colour frames only from encoding 8
with that flag set (shared/protocol/PROTOCOL_NOTES.md d), so that is taken as
what the robot sends; ``RobotConfig.color_image_encoding`` can tag colour frames
JPEGMinimizedColor (9) instead.

Its timer is the earliest of the session's, the model's (100 Hz physics only
while something moves, the 30 ms state stream, the 30 Hz animation tick) and the
next camera frame: nothing runs when nothing is due.

Faults for tests, all scriptable: :meth:`~SimulatedRobot.set_silent` (the robot
stops answering and hears nothing), :meth:`~SimulatedRobot.set_link_up` (the
network drops everything both ways), :meth:`~SimulatedRobot.reboot` (the robot
forgets the session and needs a new RESET) and
:meth:`~SimulatedRobot.send_garbage` (malformed datagrams to the client).
:class:`ImpairedEndpoint` adds seeded loss, duplication, reordering and delay per
direction in front of any such object (the UDP server uses it; MemoryLink has
its own impairments).
"""

from __future__ import annotations

import heapq
import logging
import math
import operator
import random
import struct
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Deque, List, Optional, Tuple

from ..protocol import messages as msgs
from ..protocol.errors import LocalProtocolError
from ..log_throttle import LogThrottle
from ..protocol.frames import MAGIC, MAX_FRAME_SIZE, MAX_PAYLOAD_SIZE, OOB_SEQ, FrameType, encode_frame
from ..protocol.session import (
    Connected,
    ConnectionLost,
    Disconnected,
    MessageReceived,
    ReceiveError,
    Role,
    Session,
    SessionConfig,
    robot_closes_link,
)
from ..transport.memory import Impairment
from .firmware import amount
from .model import ModelConfig, RobotModel

__all__ = ["SimulatedRobot", "RobotConfig", "SimStats", "ImpairedEndpoint", "Impairment",
           "GARBAGE_KINDS", "LINK_POLICIES", "room_light"]

logger = logging.getLogger("cozmo.sim")

_ImageEncoding = msgs.ENUMS["ImageEncoding"]
_ImageResolution = msgs.ENUMS["ImageResolution"]
_SendMode = msgs.ENUMS["ImageSendMode"]

#: the kinds of malformed datagrams :meth:`SimulatedRobot.send_garbage` produces, in turn
GARBAGE_KINDS = ("random", "bad_magic", "short_header", "truncated_packet", "unknown_frame_type",
                 "unknown_event", "short_robot_state", "empty_reliable_frame")


#: RobotConfig.link_policy's values
LINK_POLICIES = ("firmware", "latest_reset")


def room_light(value: float) -> float:
    """``value`` as the room's light (a factor on the camera's brightness); ValueError
    unless it is a positive number."""
    try:
        light = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        light = math.nan
    if not (math.isfinite(light) and light > 0):
        raise ValueError(f"the room's light must be a positive number, not {value}")
    return light


@dataclass
class RobotConfig:
    """Tunables of the simulated robot's front-end; times in seconds."""

    seed: int = 0
    #: the robot drops a client after this long without any datagram
    peer_timeout: float = 5.0
    #: "firmware": as Anki's robot firmware (client.c, reliableTransport.c), a live link
    #: is kept until the client disconnects or falls silent for ``peer_timeout``: datagrams
    #: from anyone else are ignored, and a RESET from the client itself is dropped (it
    #: still keeps the link alive, as in the first published reliableTransport.c; a later
    #: one counts only packets it takes). "latest_reset": the sender of any RESET gets a new
    #: link at once (a simulator's shortcut; no robot does that)
    link_policy: str = "firmware"
    #: reliable messages the robot holds for the client's acknowledgement (sent or waiting):
    #: one more to send while that many wait ends the link with Disconnect, as Anki's
    #: firmware does (its queue of 32, ReliableConnection_PENDING_MESSAGE_QUEUE_LENGTH: a
    #: message it cannot queue drops the connection); 0: no bound (they wait)
    send_queue: int = 32
    camera_period: float = 1.0 / 15.0
    #: None: follow EnableColorImages (grey until asked); True/False: force colour/grey
    camera_color: Optional[bool] = None
    #: the ImageChunk encoding of colour frames: JPEGMinimizedGray (8, as the reference
    #: client expects; the payload's colour flag tells them apart) or JPEGMinimizedColor (9)
    color_image_encoding: int = 8
    #: send the previous frame again while nothing that changes the image changed
    camera_cache: bool = True
    #: under SimServer (UDP: cozmo-sim, the stack's simulator), render and encode camera
    #: frames on a worker thread (sim/camera_worker.py), so that the state stream keeps its
    #: 30 Hz on a loaded machine as a real robot's does; a frame due while the previous one
    #: still renders is skipped (SimStats.images_skipped). False: on the I/O thread, between
    #: two states, as the in-memory link always does (a SimulatedRobot driven directly has
    #: no thread: deterministic, each frame sent when it is due)
    camera_render_thread: bool = True
    #: the camera payload ends in 0xFF padding up to a multiple of this many bytes (the
    #: protocol notes: trailing 0xFF bytes are padding a receiver removes; how much a robot
    #: adds is not documented, so every size from 0 to 3 bytes of it occurs)
    camera_pad_multiple: int = 4
    #: the chunk count and capture time in an image's last ImageChunk only, 0 ("invalid")
    #: in the others, as Anki's robot firmware sends them; False: in every chunk, as the
    #: protocol notes (taken from a client) describe
    camera_fields_in_last_chunk: bool = True
    #: add seeded sensor noise to camera images (only when the image is re-rendered)
    camera_noise: bool = True
    #: how much light the room has: the camera's images scale with it as with gain and
    #: exposure time (1: as bright as the scene is drawn; :meth:`SimulatedRobot.set_light`)
    camera_light: float = 1.0
    #: events kept for next_event() when nobody reads them
    max_events: int = 1000
    model: ModelConfig = field(default_factory=ModelConfig)

    def __post_init__(self) -> None:
        if not self.camera_period > 0 or not self.peer_timeout > 0:
            raise ValueError("camera_period and peer_timeout must be positive")
        if self.link_policy not in LINK_POLICIES:
            raise ValueError(f"link_policy must be one of {', '.join(LINK_POLICIES)}, not {self.link_policy!r}")
        self.camera_light = room_light(self.camera_light)
        if isinstance(self.send_queue, bool) or not isinstance(self.send_queue, int) or self.send_queue < 0:
            raise ValueError(f"send_queue must be a whole number >= 0 (0: no bound), got {self.send_queue!r}")
        if self.camera_pad_multiple < 1:
            raise ValueError("camera_pad_multiple must be at least 1")
        if self.color_image_encoding not in (8, 9):
            raise ValueError("color_image_encoding must be 8 (JPEGMinimizedGray) or 9 (JPEGMinimizedColor)")
        if self.model.seed == 0 and self.seed:
            self.model.seed = self.seed


@dataclass
class SimStats:
    """Counters of the robot front-end (the session has its own ``stats``)."""

    datagrams_in: int = 0
    datagrams_out: int = 0
    dropped_silent_in: int = 0
    dropped_silent_out: int = 0
    dropped_link_down_in: int = 0
    dropped_link_down_out: int = 0
    dropped_booting: int = 0
    #: datagrams beyond the robot's frame limit (MAX_FRAME_SIZE), dropped unacknowledged
    dropped_oversized_in: int = 0
    garbage_sent: int = 0
    images_sent: int = 0
    image_renders: int = 0
    #: frames due while the camera worker still rendered the previous one: not made
    images_skipped: int = 0
    #: frames the worker rendered for a camera since turned off or changed, or a link
    #: since ended (or whose render failed): not sent
    images_dropped: int = 0
    image_bytes_sent: int = 0
    clients_accepted: int = 0
    clients_lost: int = 0
    reboots: int = 0
    receive_errors: int = 0
    unsendable: int = 0
    #: links the robot ended because a reliable message found its queue full (send_queue)
    queue_full_closes: int = 0
    sent: Counter = field(default_factory=Counter)


@dataclass(frozen=True)
class _Frame:
    """A camera frame as captured (the worker renders it meanwhile): its cache key, capture
    time (the robot's ms), how it is tagged, and the camera's epoch and link it belongs to."""

    key: tuple
    timestamp_ms: int
    resolution: int
    color: bool
    height: int
    epoch: int
    session: Any


class SimulatedRobot:
    """A Cozmo on the wire, sans-I/O. See the module docstring.

    ``world`` provides ``render``, ``cliff_at`` and ``charger_pose`` (default: a
    :class:`cozmo_driver.sim.world.World` with the seed). ``now`` is the time of
    power-up on the caller's clock.
    """

    def __init__(self, world: Any = None, config: Optional[RobotConfig] = None,
                 now: float = 0.0, name: str = "sim") -> None:
        self.config = config or RobotConfig()
        self.name = name
        self.model = RobotModel(world, self.config.model, now)
        self.world = self.model.world
        self.stats = SimStats()
        self.session = self._new_session()
        self._events: Deque[Any] = deque(maxlen=self.config.max_events)
        self._garbage: List[bytes] = []
        self._oversized_log = LogThrottle(5.0)
        self._rng = random.Random(self.config.seed * 7919 + 17)
        self.silent = False
        self.link_up = True
        #: the room's light (:meth:`set_light`)
        self.light = float(self.config.camera_light)
        self._boot_until = now
        self._camera_next: Optional[float] = None
        self._camera_generation = -1
        self._image_id = 0
        self._last_frame_key: Optional[tuple] = None
        self._last_payload: Optional[bytes] = None
        #: renders frames off the I/O thread (a CameraWorker; SimServer sets it), or None
        self.camera_worker: Any = None
        #: bumped when the camera is set anew or the link changes: a frame rendered before is stale
        self._frame_epoch = 0
        self._now = now

    def _new_session(self) -> Session:
        # as Anki's firmware: only the next packet in order is taken, later ones dropped,
        # the RESET is the client's packet 0 (the client's first packet is lost), a big
        # packet is acknowledged at once, acks are cumulative and final (a packet acked
        # ahead is never sent again: the client stalls, PROTOCOL_NOTES m.1), and the
        # link ends on a Disconnect without acknowledging it
        return Session(Role.ROBOT, SessionConfig(peer_timeout=self.config.peer_timeout,
                                                 buffer_out_of_order=False, reset_is_packet=True,
                                                 ack_big_packets=True, ack_disconnect=False,
                                                 recover_acks=False,
                                                 hold_link=self.config.link_policy == "firmware"),
                       name=self.name)

    # ------------------------------------------------------------------ the five methods

    def receive_datagram(self, data: bytes, now: float) -> None:
        """A datagram from the client."""
        if not self.link_up:
            self.stats.dropped_link_down_in += 1
            return
        if self.silent:
            self.stats.dropped_silent_in += 1
            return
        if now < self._boot_until:
            self.stats.dropped_booting += 1
            return
        if len(data) > MAX_FRAME_SIZE:
            self._drop_oversized(len(data), now)
            return
        self.stats.datagrams_in += 1
        self.session.receive_datagram(data, now)
        self._process(now)

    def _drop_oversized(self, size: int, now: float) -> None:
        """As the robot does (PROTOCOL_NOTES: it drops frames with more than 1037 B of
        payload): the frame is not taken, not acknowledged; a client that sends it reliably
        sends it again and again. Counted, and said once per 5 s."""
        self.stats.dropped_oversized_in += 1
        line = self._oversized_log.line(
            "oversized", f"[{self.name}] dropped a datagram of {size} B from the client, "
            f"unacknowledged: the robot takes frames of at most {MAX_FRAME_SIZE} B "
            f"({MAX_PAYLOAD_SIZE} B of payload)", now)
        if line is not None:
            logger.warning(line)

    def handle_timer(self, now: float) -> None:
        session_timer = self.session.get_timer()
        if session_timer is not None and session_timer <= now:
            self.session.handle_timer(now)
        self._process(now)

    def get_timer(self) -> Optional[float]:
        times = [t for t in (self.session.get_timer(), self.model.next_tick(), self._camera_next)
                 if t is not None]
        return min(times) if times else None

    def datagrams_to_send(self, now: float) -> List[bytes]:
        out = self.session.datagrams_to_send(now)
        if self._garbage:
            out = out + self._garbage
            self._garbage = []
        if not out:
            return out
        if not self.link_up:
            self.stats.dropped_link_down_out += len(out)
            return []
        if self.silent:
            self.stats.dropped_silent_out += len(out)
            return []
        self.stats.datagrams_out += len(out)
        return out

    def next_event(self) -> Optional[Any]:
        """Session events (Connected, Disconnected, MessageReceived, ...), for observers."""
        events = self._events
        return events.popleft() if events else None

    # ------------------------------------------------------------------ internals

    def _process(self, now: float) -> None:
        self._now = now
        model = self.model
        session = self.session
        while True:
            event = session.next_event()
            if event is None:
                break
            if isinstance(event, MessageReceived):
                model.handle(event.message, now)
            elif isinstance(event, Connected):
                self.stats.clients_accepted += 1
                logger.info("[%s] client connected", self.name)
                model.on_connected(now)
                self._reset_camera()
            elif isinstance(event, (Disconnected, ConnectionLost)):
                self.stats.clients_lost += 1
                logger.info("[%s] client gone: %s", self.name, event.reason)
                model.on_disconnected(now)
                self._reset_camera()
            elif isinstance(event, ReceiveError):
                self.stats.receive_errors += 1
            self._events.append(event)
        model.advance(now)
        self._camera(now)
        if self._flush():
            self._process(now)  # the link's end (model.on_disconnected)

    def _flush(self) -> bool:
        """Send what the model has for the client; True if that ended the link (a full queue)."""
        out = self.model.pop_outgoing()
        if not out:
            return False
        session = self.session
        if not session.is_connected:
            return False
        sent = self.stats.sent
        limit = self.config.send_queue
        for message in out:
            if limit and not message.OOB and session.send_queue_length >= limit:
                # as Anki's firmware: a reliable message that finds its queue full ends the
                # link (the client stopped acknowledging); what was left is not sent
                self.stats.queue_full_closes += 1
                logger.warning("[%s] %d reliable messages unacknowledged by the client, the most "
                               "the robot holds: it ends the link (Disconnect)", self.name, limit)
                robot_closes_link(session)
                return True
            try:
                session.send(message)
            except LocalProtocolError as exc:  # queue full or link just closed: counted
                self.stats.unsendable += 1
                logger.debug("[%s] cannot send %s: %s", self.name, message.NAME, exc)
                continue
            sent[message.NAME] += 1

    # ------------------------------------------------------------------ camera

    def _reset_camera(self) -> None:
        self._frame_epoch += 1
        self._camera_next = None
        self._camera_generation = -1
        self._last_frame_key = None
        self._last_payload = None

    def frame_ready(self, now: float) -> None:
        """The camera worker finished a frame: send it now (it is also looked for at every
        turn)."""
        self._process(now)

    def _camera(self, now: float) -> None:
        cam = self.model.camera
        if cam.generation != self._camera_generation:
            self._camera_generation = cam.generation
            self._frame_epoch += 1
            self._camera_next = now
        if self.camera_worker is not None:
            self._collect_frame()
        if cam.mode == _SendMode.Off or not self.session.is_connected:
            self._camera_next = None
            return
        if self._camera_next is None or now < self._camera_next:
            return
        made = self._send_frame(now)
        period = self.config.camera_period
        if cam.mode == _SendMode.SingleShot and made:
            cam.mode = int(_SendMode.Off)
            self._camera_next = None
            return
        self._camera_next += period
        if self._camera_next <= now:
            self._camera_next = now + period

    def _send_frame(self, now: float) -> bool:
        """Make the frame due (sent, or handed to the worker); False when it was skipped
        (a single shot is then tried again a period later)."""
        from ..protocol.camera import RESOLUTIONS, encode_minimized

        worker = self.camera_worker
        if worker is not None and worker.busy:  # at most one frame in flight: this one is not made
            self.stats.images_skipped += 1
            return False
        model = self.model
        cam = model.camera
        resolution = int(cam.resolution)
        if resolution not in RESOLUTIONS or RESOLUTIONS[resolution][0] > 640:
            resolution = int(_ImageResolution.QVGA)
        width, height = RESOLUTIONS[resolution]
        forced = self.config.camera_color
        color = cam.color if forced is None else forced
        x, y, yaw = model.true_pose()
        head = model.head_angle
        lift = model.lift_height
        gain = (cam.gain if cam.gain > 0 else 1.0) * self.light
        exposure = cam.exposure_ms
        key = (round(x, 1), round(y, 1), round(yaw, 4), round(head, 4), round(lift, 1),
               width, height, color, round(gain, 4), exposure, cam.head_light)
        frame = _Frame(key, model.timestamp_ms(now), resolution, color, height, self._frame_epoch, self.session)
        if self.config.camera_cache and key == self._last_frame_key and self._last_payload:
            self._transmit_frame(frame, self._last_payload)
            return True
        world, noise, pad = self.world, self.config.camera_noise, self.config.camera_pad_multiple
        if worker is not None:  # what the render reads, taken now, on this thread
            snapshot = getattr(world, "snapshot", None)
            world = snapshot() if snapshot is not None else world

        def render() -> bytes:
            pixels = world.render(x, y, yaw, head, width=width, height=height, color=color, gain=gain,
                                  exposure_ms=exposure, lift_height_mm=lift, noise=noise)
            return encode_minimized(pixels, pad_to_multiple=pad)

        if worker is not None and worker.submit(frame, render):
            return True
        payload = render()  # here: no worker (or it stopped)
        self.stats.image_renders += 1
        self._frame_done(frame, payload)
        return True

    def _collect_frame(self) -> None:
        """Send the frame the worker finished, unless it is stale: the camera was set anew
        (turned off, say) or the link changed since it was captured."""
        done = self.camera_worker.take()
        if done is None:
            return
        frame, payload = done
        if payload is not None:
            self.stats.image_renders += 1
        if (payload is None or frame.epoch != self._frame_epoch or frame.session is not self.session
                or not self.session.is_connected):
            self.stats.images_dropped += 1
            return
        self._frame_done(frame, payload)

    def _frame_done(self, frame: "_Frame", payload: bytes) -> None:
        self._last_frame_key = frame.key
        self._last_payload = payload
        self._transmit_frame(frame, payload)

    def _transmit_frame(self, frame: "_Frame", payload: bytes) -> None:
        """The frame's chunks (stamped with its capture time) and its ImageImuData (now's rates)."""
        from ..protocol.camera import split_into_chunks

        chunks = split_into_chunks(payload)
        self._image_id = (self._image_id + 1) & 0xFFFFFFFF
        image_id = self._image_id
        timestamp = frame.timestamp_ms
        encoding = (_ImageEncoding(self.config.color_image_encoding) if frame.color
                    else _ImageEncoding.JPEGMinimizedGray)
        count = len(chunks)
        session = self.session
        last_only = self.config.camera_fields_in_last_chunk
        for chunk_id, data in enumerate(chunks):
            told = not last_only or chunk_id == count - 1
            session.send(msgs.ImageChunk(frame_timestamp_ms=timestamp if told else 0,
                                         image_id=image_id, chunk_debug=0, image_encoding=encoding,
                                         image_resolution=frame.resolution,
                                         image_chunk_count=count if told else 0,
                                         chunk_id=chunk_id, status=0, data=data))
        rx, ry, rz = self.model.imu_rates()
        session.send(msgs.ImageImuData(image_id=image_id, rate_x_radps=rx, rate_y_radps=ry,
                                       rate_z_radps=rz, line_2_number=min(255, frame.height // 2)))
        self.stats.images_sent += 1
        self.stats.image_bytes_sent += len(payload)
        self.stats.sent["ImageChunk"] += count
        self.stats.sent["ImageImuData"] += 1

    # ------------------------------------------------------------------ faults

    def set_silent(self, silent: bool, now: float) -> None:
        """A hung robot: it hears nothing and says nothing (its timers still run)."""
        self.silent = bool(silent)
        self._process(now)

    def set_light(self, light: float, now: float) -> None:
        """The room's light (RobotConfig.camera_light): 0.25 a dim room, 4 a sunny one."""
        self.light = room_light(light)

    def set_link_up(self, up: bool, now: float) -> None:
        """The Wi-Fi link: when down, every datagram is lost both ways."""
        self.link_up = bool(up)
        self._process(now)

    def close_link(self, now: float) -> bool:
        """The robot ends the link itself with Disconnect, as Anki's firmware does when its
        queue of messages awaiting the client's acknowledgement is full: the client must
        RESET again. Whether a client was connected."""
        return self._script(now, robot_closes_link, self.session)

    def reboot(self, now: float, downtime: float = 0.0) -> None:
        """The robot restarts: the session is forgotten (the client must RESET again); it
        answers nothing for ``downtime`` seconds (a finite number >= 0, else ValueError)."""
        downtime = amount("reboot", "downtime", downtime, " (s)")
        self.stats.reboots += 1
        self.session = self._new_session()
        self.model.reboot(now)
        self._reset_camera()
        self._garbage = []
        self._boot_until = now + downtime
        logger.info("[%s] rebooted", self.name)
        self._process(now)

    def send_garbage(self, now: float, count: int = 1, kind: Optional[str] = None) -> List[bytes]:
        """Queue ``count`` malformed datagrams for the client (kinds cycle through
        :data:`GARBAGE_KINDS` unless ``kind`` is given); returns them. ValueError for a
        ``count`` that is not a whole number >= 0, or an unknown ``kind``."""
        try:
            whole = -1 if isinstance(count, bool) else operator.index(count)
        except TypeError:
            whole = -1
        if whole < 0:
            raise ValueError(f"send_garbage: count must be a whole number >= 0, got {count!r}")
        if kind is not None and kind not in GARBAGE_KINDS:
            raise ValueError(f"unknown garbage kind {kind!r}; one of {GARBAGE_KINDS}")
        made = []
        for k in range(whole):
            which = kind or GARBAGE_KINDS[(self.stats.garbage_sent + k) % len(GARBAGE_KINDS)]
            made.append(self._make_garbage(which))
        self.stats.garbage_sent += len(made)
        self._garbage.extend(made)
        self._process(now)
        return made

    def _make_garbage(self, kind: str) -> bytes:
        rng = self._rng
        ack = OOB_SEQ
        if kind == "random":
            return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        if kind == "bad_magic":
            return b"COZ\x03XX\x01" + bytes([FrameType.ROBOT]) + bytes(6) + b"\x05\x01\x00\xf0"
        if kind == "short_header":
            return MAGIC + bytes([FrameType.ROBOT, 0])
        if kind == "truncated_packet":
            return encode_frame(FrameType.ROBOT, OOB_SEQ, OOB_SEQ, ack,
                                struct.pack("<BHB", 0x05, 200, 0xF0) + bytes(10))
        if kind == "unknown_frame_type":
            return MAGIC + bytes([0x42]) + bytes(6) + bytes(rng.randrange(256) for _ in range(8))
        if kind == "unknown_event":
            return encode_frame(FrameType.ROBOT, OOB_SEQ, OOB_SEQ, ack,
                                struct.pack("<BHB", 0x05, 5, 0xF9) + b"\xde\xad\xbe\xef")
        if kind == "short_robot_state":
            return encode_frame(FrameType.ROBOT, OOB_SEQ, OOB_SEQ, ack,
                                struct.pack("<BHB", 0x05, 4, 0xF0) + b"\x01\x02\x03")
        if kind == "empty_reliable_frame":
            # a frame claiming reliable packets it does not carry, far outside any window
            return encode_frame(FrameType.ROBOT, 30000, 30000, ack)
        raise ValueError(f"unknown garbage kind {kind!r}; one of {GARBAGE_KINDS}")

    # ------------------------------------------------------------------ scripted events

    def _script(self, now: float, fn, *args) -> Any:
        result = fn(*args)
        self._process(now)
        return result

    def pick_up(self, now: float) -> None:
        self._script(now, self.model.pick_up, now)

    def put_down(self, now: float, pose: Optional[Tuple[float, float, float]] = None) -> None:
        self._script(now, self.model.put_down, now, pose)

    def lay(self, now: float, side: str) -> None:
        self._script(now, self.model.lay, now, side)

    def fall(self, now: float, duration: float = 0.4, impact: float = 600.0) -> None:
        self._script(now, self.model.fall, now, duration, impact)

    def poke(self, now: float) -> None:
        self._script(now, self.model.poke, now)

    def press_button(self, now: float, duration: float = 0.2) -> None:
        self._script(now, self.model.press_button, now, duration)

    def delocalize(self, now: float) -> None:
        self._script(now, self.model.delocalize, now)

    def set_on_charger(self, on: bool, now: float, move: bool = True) -> None:
        self._script(now, self.model.set_on_charger, on, now, move)

    def hold_treads(self, now: float, held: bool = True) -> None:
        self._script(now, self.model.hold_treads, now, held)

    def teleport(self, now: float, x: float, y: float, yaw: float) -> None:
        self._script(now, self.model.teleport, now, x, y, yaw)

    def tap_cube(self, n: int, now: float, taps: int = 1, intensity: int = 79,
                 jolt: bool = False) -> bool:
        return self._script(now, self.model.tap_cube, n, now, taps, intensity, jolt)

    def move_cube(self, n: int, now: float) -> bool:
        return self._script(now, self.model.move_cube, n, now)

    def stop_cube(self, n: int, now: float) -> bool:
        return self._script(now, self.model.stop_cube, n, now)

    def set_cube_up_axis(self, n: int, axis: int, now: float) -> bool:
        return self._script(now, self.model.set_cube_up_axis, n, axis, now)

    def set_cube_battery(self, n: int, level: int, now: float) -> None:
        self._script(now, self.model.set_cube_battery, n, level, now)

    def set_object_in_range(self, n: int, in_range: bool, now: float) -> None:
        self._script(now, self.model.set_object_in_range, n, in_range, now)

    # ------------------------------------------------------------------ state

    @property
    def is_connected(self) -> bool:
        return self.session.is_connected

    @property
    def holds_link(self) -> bool:
        """A client has a link that the firmware's policy keeps (the UDP adapter then takes
        no RESET from another address)."""
        return self.session.config.hold_link and self.session.is_connected


class ImpairedEndpoint:
    """Seeded loss, duplication, reordering and delay in front of a sans-I/O endpoint.

    ``up`` applies to datagrams arriving from the client, ``down`` to datagrams the
    endpoint sends. Held datagrams are released by the timer, so the wrapper has
    the same five methods and stays sans-I/O.
    """

    def __init__(self, inner: Any, up: Optional[Impairment] = None,
                 down: Optional[Impairment] = None, seed: int = 0) -> None:
        self.inner = inner
        self.up = up or Impairment()
        self.down = down or Impairment()
        self.rng = random.Random(seed)
        self._held_up: List[Tuple[float, int, bytes]] = []
        self._held_down: List[Tuple[float, int, bytes]] = []
        self._order = 0
        self.dropped_up = 0
        self.dropped_down = 0
        self.duplicated = 0
        self.delayed = 0

    @property
    def holds_link(self) -> bool:
        return bool(getattr(self.inner, "holds_link", False))

    def _impair(self, data: bytes, imp: Impairment, now: float, held: list) -> Tuple[List[bytes], bool]:
        """Copies to deliver now, and whether this counted a drop."""
        rng = self.rng
        copies = 2 if imp.duplicate and rng.random() < imp.duplicate else 1
        if copies == 2:
            self.duplicated += 1
        now_list = []
        dropped = False
        for _ in range(copies):
            if imp.loss and rng.random() < imp.loss:
                dropped = True
                continue
            arrival = now + imp.delay
            if imp.reorder and rng.random() < imp.reorder:
                arrival += rng.random() * imp.reorder_delay
            if arrival > now:
                self._order += 1
                self.delayed += 1
                heapq.heappush(held, (arrival, self._order, data))
            else:
                now_list.append(data)
        return now_list, dropped

    def receive_datagram(self, data: bytes, now: float) -> None:
        deliver, dropped = self._impair(data, self.up, now, self._held_up)
        self.dropped_up += dropped
        for d in deliver:
            self.inner.receive_datagram(d, now)

    def handle_timer(self, now: float) -> None:
        held = self._held_up
        while held and held[0][0] <= now:
            _, _, data = heapq.heappop(held)
            self.inner.receive_datagram(data, now)
        timer = self.inner.get_timer()
        if timer is not None and timer <= now:
            self.inner.handle_timer(now)

    def get_timer(self) -> Optional[float]:
        times = [self.inner.get_timer()]
        if self._held_up:
            times.append(self._held_up[0][0])
        if self._held_down:
            times.append(self._held_down[0][0])
        times = [t for t in times if t is not None]
        return min(times) if times else None

    def datagrams_to_send(self, now: float) -> List[bytes]:
        out: List[bytes] = []
        held = self._held_down
        while held and held[0][0] <= now:
            out.append(heapq.heappop(held)[2])
        for data in self.inner.datagrams_to_send(now):
            deliver, dropped = self._impair(data, self.down, now, held)
            self.dropped_down += dropped
            out.extend(deliver)
        return out

    def next_event(self) -> Optional[Any]:
        return self.inner.next_event()
