"""The robot client's core: connection handshake, robot facts and reconnection.

:class:`RobotLink` wraps an engine-role :class:`Session` and is itself
sans-I/O, with the same five methods, so the UDP adapter (or a MemoryLink in
tests) drives it. On top of the session it

* brings a connected robot up as the Cozmo app does: on FirmwareSignature it
  sends Enable twice (that is what makes the robot answer with BodyInfo), on
  BodyInfo it sends SetOrigin and SyncTime (which starts the RobotState stream); the
  robot is *ready* at its first RobotState. EnableAnimationState, which the robot needs
  before it plays anything of its animation stream (face images, sound, keyframes) and
  which starts its AnimationState events (30 a second), goes out right before the first
  such message of each connection (``animation_state_on_demand``; at bring-up without it);
* holds a head or lift command while the robot calibrates that motor, as it does at
  each connection, and sends it when the calibration is done
  (:mod:`cozmo_driver.client.calibration`);
* collects the robot's facts (firmware, serials, body colour) in :class:`RobotInfo`, afresh
  at each connection attempt (nothing of an earlier robot's is kept);
* reconnects after a loss with exponential back-off, re-initialising the robot;
* gives up a connection that does not become ready within ``ready_timeout``, and a ready
  one whose RobotState stream stopped for ``state_timeout`` (perhaps before the session's
  ``peer_timeout``), sending the robot the session's farewell first (its stop and
  Disconnect, as for a robot that fell silent: one that still hears us would drive on);
* drops a RobotState that is not newer than the last one by the robot's own
  clock (``timestamp_ms``, a 32-bit millisecond count from SyncTime, compared
  with its wrap-around), so that a replayed, duplicated or reordered datagram
  never moves the odometry backwards, and a RobotState whose time is ahead of
  the robot's clock as started by our SyncTime (one replayed from an earlier
  connection, or forged) is dropped too, as is one that arrives before our SyncTime
  (the robot streams its state from SyncTime on: a late one of an earlier connection);
  the drops are counted
  (:attr:`RobotLink.stale_states`) and warned about at most once a
  ``warn_period`` with their count. A robot whose clock really went back is
  followed again after ``STALE_RESYNC_S`` of stale states in a row, each newer
  than the one before and together keeping pace with the local clock (a replay
  at a flood's rate does not); so is one that jumped ahead (or a host clock that
  stood still, e.g. in a short suspend), after ``STALE_RESYNC_S`` of states ahead
  of it in a row, kept pace the same way;
* drops a RobotState with a float that is not finite (NaN or infinite), which no
  robot sends and which would spoil the odometry for good, counting it as a
  malformed packet (the session's ``malformed_packets``) and warning at most once
  a ``warn_period``.

Events it emits: :class:`LinkStateChanged`, :class:`RobotReady`, and the
session's :class:`MessageReceived` for every message from the robot.
"""

from __future__ import annotations

import enum
import json
import logging
import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Deque, Optional

from ..protocol import messages as msgs
from ..protocol.errors import LocalProtocolError
from .calibration import MotorCalibration
from ..protocol.session import (
    DISCONNECT_UNACKNOWLEDGED,
    Connected,
    ConnectionLost,
    Disconnected,
    MessageReceived,
    Role,
    Session,
    SessionConfig,
    State,
    abandon,
    give_up,
)

__all__ = ["ClientConfig", "LinkState", "RobotInfo", "RobotLink", "LinkStateChanged", "RobotReady",
           "MOTOR_MIN_SPEED_RADPS", "RETRY_SEPARATOR", "DISCONNECT_UNACKNOWLEDGED", "NO_STOP_SENT",
           "firmware_safe_speeds"]

logger = logging.getLogger("cozmo.client")

#: what a LOST event's reason puts before its retry time ("...; reconnecting in 1.0 s")
RETRY_SEPARATOR = "; reconnecting in "
#: what the reason of a link ended with no stop sent to the robot begins with, then why and
#: ")": "disconnected (no stop sent: not connected)" of one that was not connected, else
#: "disconnected (no stop sent: the I/O thread had ended)" and the like (see
#: RobotLink.abandon_stop); a stop sent but not acknowledged is DISCONNECT_UNACKNOWLEDGED
NO_STOP_SENT = "disconnected (no stop sent: "
#: The firmware this protocol table describes; older ones are warned about.
SUPPORTED_FIRMWARE = 2381

#: how long stale RobotStates must arrive in a row, each newer than the previous one and
#: keeping pace with the local clock, before the robot's clock is taken to have gone back, s
STALE_RESYNC_S = 1.0
#: how far the robot's clock may read ahead of the time since our SyncTime: its delay and
#: jitter (ms), and its crystal's drift against ours (a fraction)
SYNC_MARGIN_MS = 1000.0
CLOCK_DRIFT = 0.001
#: messages that make the animation stream still waiting to be sent moot (see RobotLink.send)
_DROPS_STREAM = frozenset(("StopAllMotors", "AbortAnimation"))
#: the animation stream's messages the robot counts as frames in AnimationState's
#: num_audio_frames_played (Anki's animationController.cpp), and their ids
_FRAME_NAMES = frozenset(("OutputAudio", "OutputSilence", "EndAnimation"))
_FRAME_IDS = frozenset(msgs.MESSAGES_BY_NAME[name].ID for name in _FRAME_NAMES)
_CLEAR_PATH = msgs.ClearPath(unknown=0)
#: the slowest head or lift speed (and acceleration) sent to the robot, rad/s: Anki's
#: firmware takes one nearer zero than 1e-5 (NEAR_ZERO) for its full speed (LiftController's
#: and HeadController's SetMaxSpeedAndAccel), so MoveHead(1e-6) would drive the head into
#: its stop as fast as the motor goes
MOTOR_MIN_SPEED_RADPS = 1e-4
#: the message the link takes for the robot's SyncTimeAck: Anki's firmware sends an empty
#: SyncTimeAck once a connection, a few control ticks after SyncTime (messages.cpp Update:
#: syncTimeAckSent_, re-armed at each disconnection; an older one at once on SyncTime), and
#: its engine read no RobotState before it. Its id is not in Anki's published source; the
#: reference client's table has one empty robot message there, 0xc2, which it names
#: RobotDelocalized and never handles, while in Anki's published source RobotDelocalized
#: is only a message of the engine to its apps. So the first 0xc2 after SyncTime is taken
#: as the ack and not reported; a later one still gives the driver's DELOCALIZED event.
SYNC_TIME_ACK = "RobotDelocalized"
#: head and lift commands and their speed fields (see firmware_safe_speeds)
_MOTOR_VELOCITY = frozenset(("MoveHead", "MoveLift"))
_MOTOR_POSITION = frozenset(("SetHeadAngle", "SetLiftHeight"))
_HALF_RANGE = 1 << 31
_RANGE = 1 << 32


def _frames_in(packets) -> int:
    """How many of these encoded packets (type, length, id, body) are frames."""
    return sum(1 for p in packets if len(p) > 3 and p[3] in _FRAME_IDS)


def firmware_safe_speeds(message):
    """``message``, or a copy of it whose head or lift speeds keep off the firmware's
    near-zero reading (:data:`MOTOR_MIN_SPEED_RADPS`): a MoveHead/MoveLift speed nearer
    zero is sent as 0 (stop), a SetHeadAngle/SetLiftHeight maximum speed or acceleration
    as that minimum (0 keeps its meaning, the robot's fastest). Other messages are
    returned as they are."""
    name = message.NAME
    floor = MOTOR_MIN_SPEED_RADPS
    if name in _MOTOR_VELOCITY:
        if 0.0 < abs(message.speed_rad_per_sec) < floor:
            return replace(message, speed_rad_per_sec=0.0)
    elif name in _MOTOR_POSITION:
        fields = {}
        for field in ("max_speed_rad_per_sec", "accel_rad_per_sec2"):
            value = getattr(message, field)
            if 0.0 < abs(value) < floor:
                fields[field] = floor
        if fields:
            return replace(message, **fields)
    return message


def newer(timestamp_ms: int, last_ms: int) -> bool:
    """Whether the robot time ``timestamp_ms`` is after ``last_ms`` (32-bit, wrapping)."""
    return 0 < (int(timestamp_ms) - int(last_ms)) % _RANGE < _HALF_RANGE


class LinkState(enum.Enum):
    DISCONNECTED = "disconnected"  # not started, or stopped
    CONNECTING = "connecting"      # RESET sent, waiting for the robot
    INITIALIZING = "initializing"  # connected, bringing the robot up
    READY = "ready"                # RobotState is streaming
    LOST = "lost"                  # the robot went silent; a reconnect is scheduled


@dataclass
class ClientConfig:
    """Client tunables; times in seconds."""

    session: SessionConfig = field(default_factory=SessionConfig)
    reconnect: bool = True
    reconnect_min: float = 0.5
    reconnect_max: float = 5.0
    #: a connection that has not streamed RobotState this long after Connect is retried
    ready_timeout: float = 5.0
    #: a ready connection whose RobotState stream stops this long is taken as lost and
    #: retried: a robot that dropped the link (it heard nothing from us for its own 5 s)
    #: still echoes our pings, which keep the session alive, but streams nothing (the link
    #: sends it the farewell's stop and Disconnect first, as the session does after peer_timeout)
    state_timeout: float = 5.0
    enable_animation_state: bool = True
    #: send EnableAnimationState right before the first message of the animation stream
    #: (messages.ANIMATION_STREAM) of each connection, not at bring-up: a robot that plays
    #: nothing then sends no AnimationState, 30 datagrams a second the client only drops
    animation_state_on_demand: bool = True
    #: shortest time between two warnings of the same kind (dropped stale states), s
    warn_period: float = 5.0

    def __post_init__(self) -> None:
        # NaN passes no comparison: a NaN ready_timeout or state_timeout would never expire
        for name in ("reconnect_min", "reconnect_max", "ready_timeout", "state_timeout"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number above 0, got {value!r}")
        if not self.reconnect_min <= self.reconnect_max:
            raise ValueError(f"need reconnect_min <= reconnect_max, got {self.reconnect_min!r} "
                             f"and {self.reconnect_max!r}")
        if not (math.isfinite(self.warn_period) and self.warn_period >= 0):
            raise ValueError(f"warn_period must be a finite number of 0 or more, got {self.warn_period!r}")


@dataclass
class RobotInfo:
    """What the robot says about itself during the handshake."""

    firmware_version: Optional[int] = None
    firmware_build: str = ""
    firmware_signature: str = ""
    head_serial: Optional[int] = None
    body_serial: Optional[int] = None
    body_hw_version: Optional[int] = None
    body_color: str = ""


@dataclass(slots=True)
class LinkStateChanged:
    state: LinkState
    reason: str


@dataclass(slots=True)
class RobotReady:
    info: RobotInfo


def _silent(seconds: float) -> str:
    """Why a robot nothing was heard from for ``seconds`` is lost."""
    return (f"nothing heard from the robot for {seconds:.1f} s: it is off, out of reach, or only its "
            "replies are lost")


class RobotLink:
    """See the module docstring. Use :meth:`start`, :meth:`send`, :meth:`stop`."""

    def __init__(self, config: Optional[ClientConfig] = None, name: str = "cozmo") -> None:
        self.config = config or ClientConfig()
        self.session = Session(Role.ENGINE, self.config.session, name=name)
        self.name = name
        self.state = LinkState.DISCONNECTED
        #: why the link is in ``state`` (the reason of its last LinkStateChanged), e.g.
        #: "disconnected" once the robot acknowledged the stop (and, if it does, the
        #: goodbye: Anki's firmware does not), "disconnected (unacknowledged)" when it
        #: did not, and one that begins with NO_STOP_SENT when no stop was sent (see
        #: :meth:`abandon_stop`)
        self.state_reason = "not started"
        self.info = RobotInfo()
        self.robot_state: Optional[Any] = None  # the latest RobotState
        self._events: Deque[Any] = deque()
        self._reconnect_at: Optional[float] = None
        self._ready_deadline: Optional[float] = None
        self._backoff = self.config.reconnect_min
        self._wanted = False
        self._synced = False
        self._sync_acked = False
        #: SyncTimeAcks taken (one a connection; see SYNC_TIME_ACK)
        self.sync_time_acks = 0
        #: EnableAnimationState went out on this connection / a playback message did
        self._playback_enabled = False
        self._playback_wanted = False
        #: frames of the animation stream queued since EnableAnimationState, less those
        #: dropped unsent (see :attr:`stream_frames_sent`)
        self._stream_frames = 0
        self._now = 0.0
        #: RobotStates dropped because they were not newer than the last one
        self.stale_states = 0
        self._last_ts: Optional[int] = None
        self._sync_at: Optional[float] = None  # when SyncTime(0) went out: robot time 0
        self._stale_run: list = []      # timestamps of the stale states in a row
        self._ahead_run: list = []      # those of the states ahead of the robot's clock in a row
        self._bad_warned_at: Optional[float] = None
        self._bad_unwarned = 0
        self._stale_warned_at: Optional[float] = None
        self._stale_unwarned = 0
        #: head and lift commands held while the robot calibrates those motors
        self.calibration = MotorCalibration(name)

    # ------------------------------------------------------------------ user calls

    def start(self, now: float) -> None:
        """Connect, and keep reconnecting until :meth:`stop`."""
        self._wanted = True
        self._backoff = self.config.reconnect_min
        self._connect(now)

    def stop(self, now: float) -> None:
        """Stop the motors, say goodbye and stay disconnected."""
        self._wanted = False
        self._reconnect_at = None
        self._ready_deadline = None
        self.calibration.reset()
        if self.session.state is State.CONNECTED:
            try:
                self.send(msgs.StopAllMotors())  # ahead of the animation stream, which it drops
            except LocalProtocolError as exc:
                logger.warning("[%s] could not stop the motors: %s", self.name, exc)
        self.session.disconnect(now)
        if self.session.state is not State.CLOSING:
            self._set_state(LinkState.DISCONNECTED, "stopped")

    def abandon_stop(self, why: str = "the I/O stopped first") -> Optional[LinkStateChanged]:
        """After the I/O stopped (no ``next_event`` is taken any more): a stop the robot had not
        finished, its Disconnect unacknowledged, or one that never reached the I/O (its thread
        had ended, or did not answer), ends here, the session closed and the link disconnected.
        Events not taken before the I/O stopped (an I/O thread ended in the middle of its
        hand-out) are dropped: a later :meth:`start` hands out only its own. Returns that state
        change for the caller to hand out, or None when the link was disconnected already.

        Its reason says what became of the stop: "disconnected (unacknowledged)" when the
        Disconnect was asked for (the session closing), "disconnected (no stop sent: ``why``)"
        when the link was connected but no stop reached the I/O (``why``: what kept it, e.g.
        "the I/O thread had ended"), "disconnected (no stop sent: not connected)" when there
        was no connection to send it on (connecting, or lost)."""
        self._wanted = False
        self._reconnect_at = self._ready_deadline = None
        was = self.session.state
        abandon(self.session)
        self._events.clear()
        while self.session.next_event() is not None:
            pass
        if self.state is LinkState.DISCONNECTED:
            return None
        # the driver's shutdown line reads these (release_line)
        if was is State.CLOSING:
            reason = DISCONNECT_UNACKNOWLEDGED  # the session's word for it
        else:
            reason = f"{NO_STOP_SENT}{why if was is State.CONNECTED else 'not connected'})"
        self._set_state(LinkState.DISCONNECTED, reason)
        return self._events.pop()

    def send(self, message) -> None:
        """Queue a message for the robot (raises NotConnectedError when not connected);
        before the connection's first message of the animation stream, EnableAnimationState.

        The animation stream waits behind every other message (the session's background
        queue), so that a backlog of faces and sound on a lossy link never delays a
        command; StopAllMotors and AbortAnimation first drop what of the stream waits
        unsent (its body, head and lift keyframes would move the robot again after them).
        StopAllMotors also ends a path being followed (ClearPath first): DriveWheels is
        ignored while a path is followed, so a teleop after the stop would not move the
        robot. (The published versions of Anki's firmware end the path on StopAllMotors
        themselves, through direct drive; the ClearPath does not depend on it.)

        A message with NaN or an infinity in a float field raises LocalProtocolError and
        nothing is sent (the typed commands of :class:`Robot` refuse them before this)."""
        bad = msgs.non_finite(message)
        if bad is not None:
            raise LocalProtocolError(f"{bad}: not sent, the robot would take it as a number: give a finite value")
        name = message.NAME
        if name in msgs.ANIMATION_STREAM:
            if not self._playback_enabled:
                self._playback_wanted = True
                if self._synced and self.config.enable_animation_state:
                    self._enable_playback()
            self.session.send(message, background=True)
            if name in _FRAME_NAMES and self._playback_enabled:
                self._stream_frames += 1
            return
        if name in _DROPS_STREAM:
            self._stream_frames -= _frames_in(self.session.background_queue)
            self.session.drop_background()
        if name == "StopAllMotors":
            self.session.send(_CLEAR_PATH)
        message = firmware_safe_speeds(message)
        if self.calibration.hold(message):
            return
        self.session.send(message)

    def _send_released(self, messages) -> None:
        """Send the commands a finished motor calibration held."""
        for message in messages:
            try:
                self.session.send(message)
            except LocalProtocolError as exc:
                logger.warning("[%s] %s not sent: %s", self.name, message.NAME, exc)

    def _enable_playback(self) -> None:
        self.session.send(msgs.EnableAnimationState())
        self._playback_enabled = True
        self._stream_frames = 0  # the robot counts from 0 again too

    @property
    def stream_frames_sent(self) -> Optional[int]:
        """Frames of the animation stream (audio messages and EndAnimations) sent to the
        robot since EnableAnimationState on this connection, not counting those still
        waiting in the session's queue: AnimationState's ``num_audio_frames_played`` taken
        from it is what the robot holds in its buffer or has on the way (None: playback
        not enabled on this connection)."""
        if not self._playback_enabled:
            return None
        background = self.session.background_queue
        return self._stream_frames - (_frames_in(background) if background else 0)

    @property
    def is_ready(self) -> bool:
        return self.state is LinkState.READY

    @property
    def awaiting_connect(self) -> bool:
        """A RESET is out and the robot's answer is awaited (see the UDP adapter's peer filter)."""
        return self.session.awaiting_connect

    @property
    def stopped(self) -> bool:
        """True once a requested stop has completed (or was never needed)."""
        return not self._wanted and self.session.state is not State.CLOSING

    def _connect(self, now: float) -> None:
        self._reconnect_at = None
        self._synced = self._sync_acked = False
        self._playback_enabled = self._playback_wanted = False
        self.robot_state = None
        # another robot may answer (or this one with new firmware): none of the last one's facts
        # is kept (a new object: the last RobotReady's stays as it was)
        self.info = RobotInfo()
        self._take(None)  # SyncTime starts the robot's clock again
        self._sync_at = None
        self.calibration.reset()
        self.session.connect(now)
        self._ready_deadline = None
        self._set_state(LinkState.CONNECTING, "connecting")

    def _set_state(self, state: LinkState, reason: str) -> None:
        if state is not self.state:
            self.state, self.state_reason = state, reason
            logger.info("[%s] %s: %s", self.name, state.value, reason)
            self._events.append(LinkStateChanged(state, reason))

    def _lost(self, now: float, reason: str) -> None:
        self._ready_deadline = None
        self.calibration.reset()
        if self._wanted and self.config.reconnect:
            self._reconnect_at = now + self._backoff
            reason = f"{reason}{RETRY_SEPARATOR}{self._backoff:.1f} s"
            self._backoff = min(self._backoff * 2, self.config.reconnect_max)
            self._set_state(LinkState.LOST, reason)
        else:
            self._set_state(LinkState.DISCONNECTED, reason)

    def _give_up(self, now: float) -> str:
        """End a ready link whose RobotState stream stopped for ``state_timeout`` as the session
        ends one whose robot fell silent, with the farewell's stop (a robot that still hears us,
        only its replies lost, would drive on); why, as seen."""
        timeout = self.config.state_timeout
        silence = give_up(self.session, now)
        if silence is None or silence >= timeout - 1e-6:
            return _silent(timeout)
        return f"no RobotState for {timeout:.1f} s though the robot still answers: it dropped the link"

    # ------------------------------------------------------------------ sans-I/O surface

    def receive_datagram(self, data: bytes, now: float) -> None:
        self._now = now
        self.session.receive_datagram(data, now)

    def datagrams_to_send(self, now: float):
        self._now = now
        if self.session.pending_events:
            self._process_session_events(now)
        return self.session.datagrams_to_send(now)

    def get_timer(self) -> Optional[float]:
        deadline = self.session.get_timer()
        for t in (self._reconnect_at, self._ready_deadline, self.calibration.due()):
            if t is not None and (deadline is None or t < deadline):
                deadline = t
        return deadline

    def handle_timer(self, now: float) -> None:
        self._now = now
        self.session.handle_timer(now)
        self._process_session_events(now)
        if self._ready_deadline is not None and now >= self._ready_deadline:
            self._ready_deadline = None
            stats = self.session.stats
            if self.state is LinkState.INITIALIZING:
                # ended at the robot too (the farewell's stop and Disconnect): a robot with Anki's
                # link policy would keep it, each next RESET refused; connect() starts over
                stats.connections_without_state += 1
                give_up(self.session, now)
                self._lost(now, f"the robot did not become ready within {self.config.ready_timeout:.1f} s")
            elif self.state is LinkState.READY:
                stats.connections_lost += 1
                self._lost(now, self._give_up(now))
        if self._reconnect_at is not None and now >= self._reconnect_at:
            self._connect(now)
        due = self.calibration.due()
        if due is not None and now >= due:
            self._send_released(self.calibration.on_timer(now))

    def next_event(self) -> Optional[Any]:
        if self.session.pending_events:
            self._process_session_events(self._now)
        events = self._events
        return events.popleft() if events else None

    # ------------------------------------------------------------------ session events

    def _process_session_events(self, now: float) -> None:
        session = self.session
        while True:
            event = session.next_event()
            if event is None:
                return
            if isinstance(event, MessageReceived):
                m = event.message
                if m.NAME == "RobotState":
                    # one sum: NaN or infinite if any term is (f32 values cannot overflow it)
                    if not math.isfinite(
                            m.pose_x_mm + m.pose_y_mm + m.pose_z_mm + m.pose_angle_rad + m.pose_pitch_rad
                            + m.lwheel_speed_mmps + m.rwheel_speed_mmps + m.head_angle_rad
                            + m.lift_height_mm + m.accel_x_mmps2 + m.accel_y_mmps2 + m.accel_z_mmps2
                            + m.gyro_x_radps + m.gyro_y_radps + m.gyro_z_radps + m.battery_voltage_v):
                        self._drop_not_finite(m, now)
                        continue
                    if not self._fresh(m, now):
                        continue
                try:
                    if self._on_message(event.message, now):
                        continue  # taken by the link itself
                except Exception as exc:  # a message this link cannot take: counted and dropped
                    self.session.stats.malformed_packets += 1
                    logger.warning("[%s] %s dropped: %s: %.120s (%d malformed packets so far)",
                                   self.name, event.message.NAME, type(exc).__name__, exc,
                                   self.session.stats.malformed_packets)
                    continue
                self._events.append(event)
            elif isinstance(event, Connected):
                self._ready_deadline = now + self.config.ready_timeout
                self._set_state(LinkState.INITIALIZING, "robot answered")
            elif isinstance(event, (ConnectionLost, Disconnected)):
                reason = event.reason
                if isinstance(event, ConnectionLost) and reason == "robot silent":  # (peer_timeout)
                    reason = _silent(event.silence_s)
                if not self._wanted:
                    self._set_state(LinkState.DISCONNECTED, reason)
                elif self.state is not LinkState.LOST:  # a reconnect is already scheduled
                    self._lost(now, reason)
            else:
                self._events.append(event)

    def _fresh(self, state, now: float) -> bool:
        """Whether a RobotState is newer than the last one (else it is counted and dropped)."""
        ts = int(state.timestamp_ms)
        last = self._last_ts
        if self._sync_at is None:
            # the robot streams its state from our SyncTime on: one before it is a late
            # duplicate of an earlier connection's (or forged), and must not become the last
            self._count_stale(ts, last, now, "arrived before this connection's SyncTime")
            return False
        # the robot's clock started at 0 when it got our SyncTime: a state from further
        # ahead is from an earlier connection (a replay) or forged, never this robot's
        elapsed_ms = (now - self._sync_at) * 1000.0
        if ts > elapsed_ms + SYNC_MARGIN_MS + elapsed_ms * CLOCK_DRIFT:
            if self._keeps_pace(self._ahead_run, ts, now):
                logger.warning("[%s] the robot's clock jumped ahead from %s ms to %d ms (or this "
                               "computer's clock stood still): following it again", self.name,
                               "none" if last is None else last, ts)
                self._sync_at = now - ts / 1000.0
                return self._take(ts)
            self._count_stale(ts, last, now, "ahead of the robot's clock")
            return False
        if last is None or newer(ts, last):
            return self._take(ts)
        if self._keeps_pace(self._stale_run, ts, now):
            logger.warning("[%s] the robot's clock went back from %d ms to %d ms: following it "
                           "again", self.name, last, ts)
            return self._take(ts)
        self._count_stale(ts, last, now, "not newer than the last one")
        return False

    def _take(self, ts: Optional[int]) -> bool:
        """Make ``ts`` the last robot time taken (None: none yet) and start the clock check's runs again."""
        self._last_ts = ts
        self._stale_run = []
        self._ahead_run = []
        return True

    @staticmethod
    def _keeps_pace(run: list, ts: int, now: float) -> bool:
        """Add a state the clock check refused to ``run`` (a new run unless it is newer than
        the last of it); True once the run spans ``STALE_RESYNC_S`` and the robot's clock
        kept pace with the local one over it (within a quarter)."""
        if run and not newer(ts, run[-1][0]):
            run.clear()
        run.append((ts, now))
        local_s = now - run[0][1]
        robot_s = ((ts - run[0][0]) % _RANGE) / 1000.0
        return local_s >= STALE_RESYNC_S and abs(robot_s - local_s) <= 0.25 * local_s

    def _drop_not_finite(self, state, now: float) -> None:
        stats = self.session.stats
        stats.malformed_packets += 1
        self._bad_unwarned += 1
        if self._bad_warned_at is None or now - self._bad_warned_at >= self.config.warn_period:
            fields = [f for f in state.FIELDS
                      if isinstance(getattr(state, f), float) and not math.isfinite(getattr(state, f))]
            logger.warning("[%s] dropped %d robot state(s) with values that are not finite (the "
                           "latest: %s); %d malformed packets so far", self.name, self._bad_unwarned,
                           ", ".join(f"{f} = {getattr(state, f)}" for f in fields), stats.malformed_packets)
            self._bad_warned_at = now
            self._bad_unwarned = 0

    def _count_stale(self, ts: int, last: Optional[int], now: float, why: str) -> None:
        self.stale_states += 1
        self._stale_unwarned += 1
        if self._stale_warned_at is None or now - self._stale_warned_at >= self.config.warn_period:
            logger.warning("[%s] dropped %d robot state(s) (the latest %s: robot time %d ms, last "
                           "%s ms): replayed, duplicated, reordered or forged datagrams; %d so far",
                           self.name, self._stale_unwarned, why, ts,
                           "none" if last is None else last, self.stale_states)
            self._stale_warned_at = now
            self._stale_unwarned = 0

    def _on_message(self, message, now: float) -> bool:
        """Take what the link needs of ``message``; True if it is the link's alone (not
        to be delivered)."""
        name = message.NAME
        if name == SYNC_TIME_ACK and self._synced and not self._sync_acked:
            # the first after our SyncTime is the robot's SyncTimeAck (see SYNC_TIME_ACK)
            self._sync_acked = True
            self.sync_time_acks += 1
            logger.debug("[%s] SyncTimeAck (0x%02x) taken", self.name, message.ID)
            return True
        if name == "RobotState":
            self.robot_state = message
            if self.state is LinkState.READY:
                self._ready_deadline = now + self.config.state_timeout
            elif self.state is LinkState.INITIALIZING and self._synced:
                self._ready_deadline = now + self.config.state_timeout
                self._backoff = self.config.reconnect_min
                self._set_state(LinkState.READY, "RobotState streaming")
                self._events.append(RobotReady(self.info))
        elif name == "FirmwareSignature":
            self._on_firmware(message.signature)
            # the app sends Enable twice, and the second is the one the robot acts on (it
            # answers with BodyInfo): Anki's firmware takes the RESET as its reliable
            # packet 1 and drops our first packet after it, numbered 1 as well (as the
            # reference client numbers it), as a duplicate, acknowledging it all the same.
            # The first Enable is that packet: keep the pair first on every connection. A
            # stop during the handshake closes the session: nothing more is brought up then.
            if self.session.is_connected:
                self.session.send(msgs.Enable())
                self.session.send(msgs.Enable())
        elif name == "MotorCalibration":
            self._send_released(self.calibration.on_message(message, now))
        elif name == "HardwareInfo":
            self.info.head_serial = message.serial_number_head
        elif name == "BodyInfo":
            self.info.body_serial = message.serial_number
            self.info.body_hw_version = message.body_hw_version
            color = message.body_color
            self.info.body_color = color.name if hasattr(color, "name") else str(color)
            if not self._synced and self.session.is_connected:  # (not while a stop closes it)
                self.session.send(msgs.SetOrigin(pose_frame_id=0, pose_origin_id=1))
                # the second field is the drive centre's offset in Anki's firmware: 0, so that
                # the robot reports the pose of the point between its treads (base_footprint)
                self.session.send(msgs.SyncTime(timestamp_ms=0, unknown=0))
                self._sync_at = now
                self.calibration.expect(now)  # the robot calibrates head and lift now
                config = self.config
                if config.enable_animation_state and (
                        self._playback_wanted or not config.animation_state_on_demand):
                    self._enable_playback()
                self._synced = True
        return False

    def _on_firmware(self, signature: str) -> None:
        self.info.firmware_signature = signature
        try:
            data = json.loads(signature)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            logger.warning("[%s] firmware signature is not JSON: %.80r", self.name, signature)
            return
        if not isinstance(data, dict):
            return
        version = data.get("version")
        if isinstance(version, int):
            self.info.firmware_version = version
            if version < SUPPORTED_FIRMWARE:
                logger.warning("[%s] firmware %d is older than %d: some messages may differ",
                               self.name, version, SUPPORTED_FIRMWARE)
        build = data.get("build")
        if isinstance(build, str):
            self.info.firmware_build = build
            if build.upper() == "FACTORY":
                logger.warning("[%s] the robot runs FACTORY firmware; update it with the Cozmo app",
                               self.name)
