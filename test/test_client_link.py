"""The client core (RobotLink) against a scripted robot-role session, explicit clock."""

from __future__ import annotations

import json

import pytest

from cozmo_driver.client.link import ClientConfig, LinkState, LinkStateChanged, RobotLink, RobotReady
from cozmo_driver.protocol import messages as msgs
from cozmo_driver.protocol.session import (
    Connected,
    Disconnected,
    MessageReceived,
    Role,
    Session,
    SessionConfig,
)
from cozmo_driver.transport.memory import Impairment, MemoryLink


class ScriptedRobot:
    """The robot's handshake and a RobotState stream, as the notes describe them."""

    def __init__(self, firmware: dict | None = None) -> None:
        self.session = Session(Role.ROBOT, SessionConfig(peer_timeout=5.0), name="robot")
        self.received: list = []
        self.enables = 0
        self.synced = False
        self.silent = False
        self.firmware = firmware or {"version": 2381, "build": "RELEASE"}
        self._next_state = None

    # the five methods MemoryLink drives
    def receive_datagram(self, data, now):
        if not self.silent:
            self.session.receive_datagram(data, now)

    def datagrams_to_send(self, now):
        self._react(now)
        if self.synced and self.session.is_connected and now >= self._next_state:
            self.session.send(msgs.RobotState(timestamp_ms=int(now * 1000), battery_voltage_v=4.0))
            self._next_state = now + 1 / 30
        return [] if self.silent else self.session.datagrams_to_send(now)

    def get_timer(self):
        times = [t for t in (self.session.get_timer(),
                             self._next_state if self.synced and self.session.is_connected else None)
                 if t is not None]
        return min(times) if times else None

    def handle_timer(self, now):
        self.session.handle_timer(now)

    def next_event(self):
        return None

    def _react(self, now):
        while True:
            event = self.session.next_event()
            if event is None:
                return
            if isinstance(event, Connected):
                self.enables = 0
                self.synced = False
                self.session.send(msgs.HardwareInfo(serial_number_head=0x1234))
                self.session.send(msgs.FirmwareSignature(signature=json.dumps(self.firmware)))
            elif isinstance(event, Disconnected):
                self.synced = False
            elif isinstance(event, MessageReceived):
                message = event.message
                self.received.append(message.NAME)
                if message.NAME == "Enable":
                    self.enables += 1
                    if self.enables == 2:
                        self.session.send(msgs.BodyInfo(serial_number=0xBEEF, body_hw_version=5,
                                                        body_color=2))
                elif message.NAME == "SyncTime":
                    self.synced = True
                    self._next_state = now


def make_pair(**impairments):
    link_events: list = []
    client = RobotLink(ClientConfig(session=SessionConfig(peer_timeout=1.0), reconnect_min=0.5,
                                    reconnect_max=2.0))
    robot = ScriptedRobot()
    link = MemoryLink(client, robot, Impairment(**impairments), Impairment(**impairments), seed=3)
    link.on_event_a = link_events.append
    return client, robot, link, link_events


def states(events):
    return [e.state for e in events if isinstance(e, LinkStateChanged)]


def test_handshake_brings_the_robot_up_in_the_apps_order():
    client, robot, link, events = make_pair()
    client.start(link.now)
    assert link.run_while(lambda: client.state is not LinkState.READY, 2.0)
    assert states(events) == [LinkState.CONNECTING, LinkState.INITIALIZING, LinkState.READY]
    assert robot.received[:5] == ["Enable", "Enable", "SetOrigin", "SyncTime", "EnableAnimationState"]
    ready = [e for e in events if isinstance(e, RobotReady)]
    assert len(ready) == 1
    info = ready[0].info
    assert (info.firmware_version, info.firmware_build) == (2381, "RELEASE")
    assert (info.head_serial, info.body_serial, info.body_hw_version, info.body_color) == (
        0x1234, 0xBEEF, 5, "WHITE_v15")
    assert client.robot_state is not None and client.robot_state.battery_voltage_v == pytest.approx(4.0)


def test_handshake_survives_20_percent_loss():
    client, robot, link, events = make_pair(loss=0.2)
    client.start(link.now)
    assert link.run_while(lambda: client.state is not LinkState.READY, 10.0)
    assert robot.received.count("SyncTime") == 1


def test_lost_robot_is_reported_and_reconnected_with_reinitialisation():
    client, robot, link, events = make_pair()
    client.start(link.now)
    assert link.run_while(lambda: client.state is not LinkState.READY, 2.0)
    robot.silent = True
    assert link.run_while(lambda: client.state is LinkState.READY, 3.0)
    assert client.state is LinkState.LOST
    lost = [e for e in events if isinstance(e, LinkStateChanged) and e.state is LinkState.LOST]
    assert "reconnecting in 0.5 s" in lost[0].reason
    # silence continues: the back-off grows, attempts are bounded in number
    link.run_until(link.now + 4.0)
    assert client.state is not LinkState.READY
    robot.silent = False
    assert link.run_while(lambda: client.state is not LinkState.READY, 10.0)
    assert robot.received.count("SyncTime") == 2  # re-initialised after the reconnect
    assert len([e for e in events if isinstance(e, RobotReady)]) == 2


def test_stop_halts_the_motors_and_disconnects():
    client, robot, link, events = make_pair()
    client.start(link.now)
    assert link.run_while(lambda: client.state is not LinkState.READY, 2.0)
    client.stop(link.now)
    assert link.run_while(lambda: not client.stopped, 2.0)
    assert robot.received[-1] == "StopAllMotors"
    assert client.state is LinkState.DISCONNECTED
    assert robot.session.state.value == "idle"  # the robot saw the Disconnect
    link.run_until(link.now + 3.0)
    assert client.state is LinkState.DISCONNECTED  # and no reconnect happens


def test_old_firmware_is_accepted_with_its_version_recorded():
    client, robot, link, events = make_pair()
    robot.firmware = {"version": 2214, "build": "FACTORY"}
    client.start(link.now)
    assert link.run_while(lambda: client.state is not LinkState.READY, 2.0)
    assert client.info.firmware_version == 2214
    assert client.info.firmware_build == "FACTORY"
