"""Robot.add_listener's ``messages``: a listener gets every link event and only the robot's
messages it names; the commands refuse values that are not finite. A real Robot against
the simulated robot over UDP on 127.0.0.1."""

from __future__ import annotations

import math
import threading
import time

import pytest

from cozmo_driver.client.link import LinkState, LinkStateChanged, RobotReady
from cozmo_driver.client.robot import Robot, turn_message
from cozmo_driver.protocol.errors import LocalProtocolError
from cozmo_driver.protocol.session import MessageReceived
from cozmo_driver.sim import SimServer
from processes import free_udp_port


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


NOT_FINITE = (math.nan, math.inf, -math.inf)


@pytest.mark.parametrize("value", NOT_FINITE)
def test_turn_message_refuses_a_value_that_is_not_finite(value):
    # it raised "cannot convert float NaN to integer" for a turn of inf, and made a
    # TurnInPlace of angle nan for a heading of nan
    for args, name in (((value, 1.0, 5.0, 0.02, 1), "heading_rad"),
                       ((0.0, value, 5.0, 0.02, 1), "speed_radps"),
                       ((0.0, 1.0, value, 0.02, 1), "accel_radps2"),
                       ((0.0, 1.0, 5.0, value, 1), "tolerance_rad")):
        with pytest.raises(LocalProtocolError, match=f"{name} must be a finite number"):
            turn_message(*args)
    with pytest.raises(LocalProtocolError, match="turn_rad must be a finite number"):
        turn_message(0.0, 1.0, 5.0, 0.02, 1, turn_rad=value)


def test_the_robots_commands_refuse_values_that_are_not_finite():
    # they sent NaN and inf to the robot, which the firmware takes as speeds and angles
    sim = SimServer(host="127.0.0.1", port=0, seed=11).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="finite")
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        calls = {
            "left_mmps": lambda v: robot.drive_wheels(v, 0.0),
            "right_mmps": lambda v: robot.drive_wheels(0.0, v),
            "left_accel_mmps2": lambda v: robot.drive_wheels(0.0, 0.0, v, 0.0),
            "right_accel_mmps2": lambda v: robot.drive_wheels(0.0, 0.0, 0.0, v),
            "angle_rad": lambda v: robot.turn_in_place(v, absolute=True),
            "max_speed_radps": lambda v: robot.set_head_angle(0.0, v),
            "duration_s": lambda v: robot.set_lift_height(50.0, duration_s=v),
            "height_mm": lambda v: robot.post_lift_height(v, 1.0, 1.0),
            "accel_radps2": lambda v: robot.post_head_angle(0.0, 1.0, v),
            "speed_radps": lambda v: robot.move_head(v),
        }
        more = {"speed_radps": (robot.move_lift, robot.post_move_head, robot.post_move_lift,
                                lambda v: robot.turn_in_place(0.5, speed_radps=v)),
                "angle_rad": (lambda v: robot.set_head_angle(v), lambda v: robot.turn_in_place(v)),
                "heading_rad": (lambda v: robot.post_turn_in_place(v, 1.0, 5.0, 0.02, 1),)}
        cases = list(calls.items()) + [(name, call) for name, extra in more.items() for call in extra]
        for name, call in cases:
            for value in NOT_FINITE:
                with pytest.raises(LocalProtocolError, match=f"{name} must be a finite number"):
                    call(value)
        robot.drive_wheels(0.0, 0.0)  # finite values go on
    finally:
        robot.stop()
        sim.stop()


def test_a_post_while_the_client_is_not_running_is_logged_not_raised(log_records):
    # the action, media and object servers and the driver's lifecycle post at edges where the
    # client may be stopping; a post raised TransportStateError before start and after stop
    from cozmo_driver.protocol import messages as msgs
    logged = log_records("cozmo.client", "WARNING")
    robot = Robot("127.0.0.1", free_udp_port(), local_host="127.0.0.1", name="poster")
    robot.post(msgs.StopAllMotors())                        # before start
    robot.start()
    robot.stop(timeout=0.2)
    robot.post_stop_wheels()                                # after stop
    robot.post_move_head(0.0)
    posted = [m for m in logged.messages if "not sent: the robot client is not running" in m]
    assert len(posted) == 3 and "[poster] StopAllMotors" in posted[0] and "DriveWheels" in posted[1]


def test_a_stop_acknowledged_says_whether_the_robot_took_it():
    """stop_all_motors_acknowledged (a program about to be suspended by Ctrl-Z): True once the
    robot acknowledged the stop, which stopped its treads; None when no stop could be sent."""
    sim = SimServer(host="127.0.0.1", port=0, seed=11).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="acknowledged")
    try:
        assert robot.stop_all_motors_acknowledged(0.2) is None     # not started
        robot.start()
        assert robot.wait_until_ready(10.0)
        robot.drive_wheels(50.0, 50.0)
        assert sim.wait_until(lambda s: min(s.wheel_speeds()) > 0.0, 5.0)
        t0 = time.monotonic()
        assert robot.stop_all_motors_acknowledged(2.0) is True
        assert time.monotonic() - t0 < 2.0
        assert sim.wait_until(lambda s: s.wheel_speeds() == (0.0, 0.0), 1.0), sim.wheel_speeds()
        sim.set_link_up(False)      # nothing reaches the robot: its acknowledgement never comes
        robot.drive_wheels(50.0, 50.0)
        t0 = time.monotonic()
        assert robot.stop_all_motors_acknowledged(0.2) is False
        assert 0.15 < time.monotonic() - t0 < 1.0
    finally:
        robot.stop(timeout=0.5)
        sim.stop()
