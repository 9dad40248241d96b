"""Robot.add_listener's ``messages``: a listener gets every link event and only the robot's
messages it names. A real Robot against the simulated robot over UDP on 127.0.0.1."""

from __future__ import annotations

import threading
import time

import pytest

from cozmo_driver.client.link import LinkState, LinkStateChanged, RobotReady
from cozmo_driver.client.robot import Robot
from cozmo_driver.protocol.session import MessageReceived
from cozmo_driver.sim import SimServer


class Seen:
    """The events a listener was called with (from the I/O thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list = []

    def __call__(self, event) -> None:
        with self.lock:
            self.events.append(event)

    def messages(self) -> set:
        with self.lock:
            return {e.message.NAME for e in self.events if isinstance(e, MessageReceived)}

    def link_states(self) -> list:
        with self.lock:
            return [e.state for e in self.events if isinstance(e, LinkStateChanged)]

    def count(self, name: str) -> int:
        with self.lock:
            return sum(isinstance(e, MessageReceived) and e.message.NAME == name for e in self.events)


def test_listeners_get_the_link_events_and_only_the_messages_they_name():
    sim = SimServer(host="127.0.0.1", port=0, seed=11).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="listeners")
    everything, states, link_only = Seen(), Seen(), Seen()
    robot.add_listener(everything)
    robot.add_listener(states, messages=["RobotState"])
    robot.add_listener(link_only, messages=())
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        deadline = time.monotonic() + 5.0
        while states.count("RobotState") < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert states.count("RobotState") >= 10
        # the handshake's messages reached the listener of everything only
        assert {"RobotState", "FirmwareSignature", "BodyInfo"} <= everything.messages()
        assert states.messages() == {"RobotState"}
        assert link_only.messages() == set()
        # every link event reached all three, in the same order
        for seen in (everything, states, link_only):
            assert seen.link_states()[-1] is LinkState.READY, seen.link_states()
            assert any(isinstance(e, RobotReady) for e in seen.events)
        assert everything.link_states() == states.link_states() == link_only.link_states()
        # a listener removed is called no more; one never added cannot be removed
        robot.remove_listener(states)
        before = states.count("RobotState")
        after_everything = everything.count("RobotState")
        deadline = time.monotonic() + 5.0
        while everything.count("RobotState") < after_everything + 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert everything.count("RobotState") >= after_everything + 5
        assert states.count("RobotState") <= before + 1  # one may have been under way
        with pytest.raises(ValueError, match="is not a listener"):
            robot.remove_listener(states)
    finally:
        robot.stop()
        sim.stop()


def test_an_action_acknowledged_before_the_wait_is_found_by_it():
    """The robot acknowledges TurnInPlace when it takes it, often before the sender waits:
    the wait then returns True at once (it raised "not awaited", seen in the protocol
    demo's thread in the fresh-clone CI), and the id is forgotten after the wait."""
    from cozmo_driver.protocol import messages as msgs
    robot = Robot("127.0.0.1", 9)  # no start(): nothing is sent
    action = robot.new_action_id()
    robot._dispatch(MessageReceived(msgs.AcknowledgeAction(action_id=action), True))
    assert robot.wait_for_action(action, 0.1)
    assert action not in robot._actions
    other = robot.new_action_id()
    assert not robot.wait_for_action(other, 0.01) and other not in robot._actions
