"""The robot client's core: connection handshake, robot facts and reconnection.

:class:`RobotLink` wraps an engine-role :class:`Session` and is itself
sans-I/O, with the same five methods, so the UDP adapter (or a MemoryLink in
tests) drives it. On top of the session it

* brings a connected robot up as the Cozmo app does: on FirmwareSignature it
  sends Enable twice (that is what makes the robot answer with BodyInfo), on
  BodyInfo it sends SetOrigin, SyncTime (which starts the RobotState stream) and
  EnableAnimationState; the robot is *ready* at its first RobotState;
* collects the robot's facts (firmware, serials, body colour) in :class:`RobotInfo`;
* reconnects after a loss with exponential back-off, re-initialising the robot;
* gives up a connection that does not become ready within ``ready_timeout``.

Events it emits: :class:`LinkStateChanged`, :class:`RobotReady`, and the
session's :class:`MessageReceived` for every message from the robot.
"""

from __future__ import annotations

import enum
import json
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Deque, Optional

from ..protocol import messages as msgs
from ..protocol.errors import LocalProtocolError
from ..protocol.session import (
    Connected,
    ConnectionLost,
    Disconnected,
    MessageReceived,
    Role,
    Session,
    SessionConfig,
    State,
)

__all__ = ["ClientConfig", "LinkState", "RobotInfo", "RobotLink", "LinkStateChanged", "RobotReady"]

logger = logging.getLogger("cozmo.client")

#: The firmware this protocol table describes; older ones are warned about.
SUPPORTED_FIRMWARE = 2381


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
    enable_animation_state: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.reconnect_min <= self.reconnect_max:
            raise ValueError("need 0 < reconnect_min <= reconnect_max")
        if self.ready_timeout <= 0:
            raise ValueError("ready_timeout must be positive")


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


class RobotLink:
    """See the module docstring. Use :meth:`start`, :meth:`send`, :meth:`stop`."""

    def __init__(self, config: Optional[ClientConfig] = None, name: str = "cozmo") -> None:
        self.config = config or ClientConfig()
        self.session = Session(Role.ENGINE, self.config.session, name=name)
        self.name = name
        self.state = LinkState.DISCONNECTED
        self.info = RobotInfo()
        self.robot_state: Optional[Any] = None  # the latest RobotState
        self._events: Deque[Any] = deque()
        self._reconnect_at: Optional[float] = None
        self._ready_deadline: Optional[float] = None
        self._backoff = self.config.reconnect_min
        self._wanted = False
        self._synced = False
        self._now = 0.0

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
        if self.session.state is State.CONNECTED:
            try:
                self.session.send(msgs.StopAllMotors())
            except LocalProtocolError as exc:
                logger.warning("[%s] could not stop the motors: %s", self.name, exc)
        self.session.disconnect(now)
        if self.session.state is not State.CLOSING:
            self._set_state(LinkState.DISCONNECTED, "stopped")

    def send(self, message) -> None:
        """Queue a message for the robot (raises NotConnectedError when not connected)."""
        self.session.send(message)

    @property
    def is_ready(self) -> bool:
        return self.state is LinkState.READY

    @property
    def stopped(self) -> bool:
        """True once a requested stop has completed (or was never needed)."""
        return not self._wanted and self.session.state is not State.CLOSING

    def _connect(self, now: float) -> None:
        self._reconnect_at = None
        self._synced = False
        self.robot_state = None
        self.session.connect(now)
        self._ready_deadline = None
        self._set_state(LinkState.CONNECTING, "connecting")

    def _set_state(self, state: LinkState, reason: str) -> None:
        if state is not self.state:
            self.state = state
            logger.info("[%s] %s: %s", self.name, state.value, reason)
            self._events.append(LinkStateChanged(state, reason))

    def _lost(self, now: float, reason: str) -> None:
        self._ready_deadline = None
        if self._wanted and self.config.reconnect:
            self._reconnect_at = now + self._backoff
            reason = f"{reason}; reconnecting in {self._backoff:.1f} s"
            self._backoff = min(self._backoff * 2, self.config.reconnect_max)
            self._set_state(LinkState.LOST, reason)
        else:
            self._set_state(LinkState.DISCONNECTED, reason)

    # ------------------------------------------------------------------ sans-I/O surface

    def receive_datagram(self, data: bytes, now: float) -> None:
        self._now = now
        self.session.receive_datagram(data, now)

    def datagrams_to_send(self, now: float):
        self._now = now
        self._process_session_events(now)
        return self.session.datagrams_to_send(now)

    def get_timer(self) -> Optional[float]:
        times = [t for t in (self.session.get_timer(), self._reconnect_at, self._ready_deadline)
                 if t is not None]
        return min(times) if times else None

    def handle_timer(self, now: float) -> None:
        self._now = now
        self.session.handle_timer(now)
        self._process_session_events(now)
        if self._ready_deadline is not None and now >= self._ready_deadline:
            self._ready_deadline = None
            if self.state is LinkState.INITIALIZING:
                # the next attempt's connect() starts the session over
                self._lost(now, f"the robot did not become ready within {self.config.ready_timeout:.1f} s")
        if self._reconnect_at is not None and now >= self._reconnect_at:
            self._connect(now)

    def next_event(self) -> Optional[Any]:
        self._process_session_events(self._now)
        return self._events.popleft() if self._events else None

    # ------------------------------------------------------------------ session events

    def _process_session_events(self, now: float) -> None:
        session = self.session
        while True:
            event = session.next_event()
            if event is None:
                return
            if isinstance(event, MessageReceived):
                self._on_message(event.message, now)
                self._events.append(event)
            elif isinstance(event, Connected):
                self._ready_deadline = now + self.config.ready_timeout
                self._set_state(LinkState.INITIALIZING, "robot answered")
            elif isinstance(event, (ConnectionLost, Disconnected)):
                if not self._wanted:
                    self._set_state(LinkState.DISCONNECTED, event.reason)
                elif self.state is not LinkState.LOST:  # a reconnect is already scheduled
                    self._lost(now, event.reason)
            else:
                self._events.append(event)

    def _on_message(self, message, now: float) -> None:
        name = message.NAME
        if name == "RobotState":
            self.robot_state = message
            if self.state is LinkState.INITIALIZING and self._synced:
                self._ready_deadline = None
                self._backoff = self.config.reconnect_min
                self._set_state(LinkState.READY, "RobotState streaming")
                self._events.append(RobotReady(self.info))
        elif name == "FirmwareSignature":
            self._on_firmware(message.signature)
            # the app sends Enable twice; the second one makes the robot send BodyInfo
            self.session.send(msgs.Enable())
            self.session.send(msgs.Enable())
        elif name == "HardwareInfo":
            self.info.head_serial = message.serial_number_head
        elif name == "BodyInfo":
            self.info.body_serial = message.serial_number
            self.info.body_hw_version = message.body_hw_version
            color = message.body_color
            self.info.body_color = color.name if hasattr(color, "name") else str(color)
            if not self._synced:
                self.session.send(msgs.SetOrigin(pose_frame_id=0, pose_origin_id=1))
                self.session.send(msgs.SyncTime(timestamp_ms=0))
                if self.config.enable_animation_state:
                    self.session.send(msgs.EnableAnimationState())
                self._synced = True

    def _on_firmware(self, signature: str) -> None:
        self.info.firmware_signature = signature
        try:
            data = json.loads(signature)
        except ValueError:
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
