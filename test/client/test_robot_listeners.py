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
from cozmo_driver.protocol.session import MessageReceived, State
from cozmo_driver.sim import RobotConfig, SimServer
from cozmo_driver.transport.udp import TransportStateError
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


@pytest.mark.parametrize("value", NOT_FINITE)
def test_a_hand_built_message_with_a_value_that_is_not_finite_is_not_sent(value, log_records):
    # Robot.send and Robot.post of a message built by hand (not a typed command) sent NaN
    # and inf: struct packs them, and the firmware would take them as speeds and angles
    from cozmo_driver.protocol import messages as msgs
    logged = log_records("cozmo.transport", "WARNING")  # where a post's failure is logged
    sim = SimServer(host="127.0.0.1", port=0, seed=11).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="hand-built")
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        with pytest.raises(LocalProtocolError, match=rf"DriveWheels.rwheel_speed_mmps = {value!r}: not sent"):
            robot.send(msgs.DriveWheels(lwheel_speed_mmps=20.0, rwheel_speed_mmps=value))
        robot.post(msgs.SetHeadAngle(angle_rad=0.1, accel_rad_per_sec2=value))
        robot.post(msgs.AppendPathSegLine(to_x_mm=value))
        # finite goes on; a send runs on the I/O thread after the posts before it
        robot.send(msgs.DriveWheels(lwheel_speed_mmps=20.0, rwheel_speed_mmps=20.0))
        refused = [m for m in logged.messages if "not sent, the robot would take it as a number" in m]
        assert len(refused) == 2, logged.messages
        assert f"SetHeadAngle.accel_rad_per_sec2 = {value!r}" in refused[0]
        assert f"AppendPathSegLine.to_x_mm = {value!r}" in refused[1]
        assert sim.wait_until(lambda s: min(s.wheel_speeds()) > 0.0, 5.0)
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
        assert robot.stop_all_motors_acknowledged(2.0) is True
        assert sim.wait_until(lambda s: s.wheel_speeds() == (0.0, 0.0), 1.0), sim.wheel_speeds()
        sim.set_link_up(False)      # nothing reaches the robot: its acknowledgement never comes
        robot.drive_wheels(50.0, 50.0)
        # (1 s: the stop must first reach the I/O thread, else None, on a loaded machine too)
        assert robot.stop_all_motors_acknowledged(1.0) is False
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_listener_that_raises_keeps_no_other_from_the_event(log_records):
    # an exception of one listener left _dispatch: the listeners after it missed the event
    # (in the driver, the core behind ObjectInterfaces: an odometry sample, a LOST)
    from cozmo_driver.protocol import messages as msgs
    from cozmo_driver.protocol.errors import NotConnectedError
    logged = log_records("cozmo.client", "WARNING")
    robot = Robot("127.0.0.1", 9, name="raising")  # no start(): the events are handed in

    def broken(event):
        raise RuntimeError("a bug in a listener")

    def refused(event):
        raise NotConnectedError("a command of a listener refused")

    after = Seen()
    robot.add_listener(broken)
    robot.add_listener(refused)
    robot.add_listener(after)
    lost = LinkStateChanged(LinkState.LOST, "robot silent")
    state = MessageReceived(msgs.RobotState(timestamp_ms=1), False)
    robot._dispatch(lost)
    robot._dispatch(state)
    assert after.events == [lost, state]
    assert robot.transport.stats.callback_errors == 2  # the bugs, not the refused commands
    assert sum("failed on" in m and "[raising] listener" in m for m in logged.messages) == 2
    assert sum("a command of a listener refused" in m for m in logged.messages) == 2


def test_a_stop_the_robot_does_not_acknowledge_leaves_the_client_disconnected():
    # stop(timeout) stopped the I/O thread with the disconnect unfinished, and the client
    # still said READY (wait_until_ready True) with nothing running any more
    sim = SimServer(host="127.0.0.1", port=0, seed=11).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="unacknowledged")
    seen = Seen()
    robot.add_listener(seen, messages=())
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        sim.set_link_up(False)      # nothing reaches the robot: the Disconnect is never acknowledged
        robot.stop(timeout=0.0)     # the session stays CLOSING for 0.5 s at least
        assert not robot.transport.running
        assert robot.state is LinkState.DISCONNECTED
        assert not robot.wait_until_ready(0.0)
        assert seen.link_states()[-1] is LinkState.DISCONNECTED
        # as the session says it, which the driver's shutdown warning reads ("no answer in time")
        assert robot.link.state_reason == "disconnected (unacknowledged)", robot.link.state_reason
        assert robot.link.stopped
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_stop_whose_call_times_out_still_stops_the_thread_and_lets_go_of_the_robot(monkeypatch, log_records):
    # a TimeoutError of transport.call (the I/O thread held up in a listener) left stop()
    # before it stopped the transport and released the claim of the robot
    import concurrent.futures

    from cozmo_driver.client.claim import RobotClaim
    logged = log_records("cozmo.client", "WARNING")
    port = free_udp_port()
    robot = Robot("127.0.0.1", port, local_host="127.0.0.1", name="held-up")
    robot.start()

    def held_up(fn, *args, timeout=5.0, drop_late=True):
        raise concurrent.futures.TimeoutError()

    monkeypatch.setattr(robot.transport, "call", held_up)
    robot.stop(timeout=0.2)
    assert not robot.transport.running
    assert robot.state is LinkState.DISCONNECTED
    assert any("[held-up] stop: the I/O thread did not answer in time" in m for m in logged.messages)
    # the session closed too (it stayed CONNECTING, or CONNECTED, with the link DISCONNECTED)
    assert robot.link.session.state is State.CLOSED, robot.link.session.state
    # nobody answers at that port: there was no connection, and no Disconnect went out
    assert robot.link.state_reason == "disconnected (no stop sent: not connected)", robot.link.state_reason
    RobotClaim("127.0.0.1", port, local_host="127.0.0.1").acquire().release()  # the robot is free


def test_a_stop_after_the_io_thread_ended_leaves_the_client_disconnected_and_startable(log_records):
    # stop() found the transport not running and only let go of the claim: the client still
    # said READY (wait_until_ready True), no listener heard DISCONNECTED, and start() again
    # raised "transport already started" (an I/O thread that a listener's SystemExit ended
    # ends the link itself: test_a_listener_that_ends_the_io_thread_ends_the_link_and_says_so)
    logged = log_records("cozmo.client", "WARNING")
    # no Disconnect reaches the robot: it holds the link until its peer_timeout, 1 s here
    sim = SimServer(host="127.0.0.1", port=0, config=RobotConfig(seed=11, peer_timeout=1.0)).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="ended")
    seen = Seen()
    robot.add_listener(seen, messages=["RobotState"])
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        robot.transport.stop()      # directly (it joins the thread): the link is left READY
        assert not robot.transport.running
        robot.stop(timeout=0.5)
        assert robot.state is LinkState.DISCONNECTED
        assert not robot.wait_until_ready(0.0)
        assert seen.link_states()[-1] is LinkState.DISCONNECTED, seen.link_states()
        assert robot.link.session.state is State.CLOSED, robot.link.session.state
        assert any("[ended] stop: the I/O thread had ended, the link ready: no stop reached the robot" in m
                   for m in logged.messages), logged.messages
        assert robot.link.state_reason == "disconnected (no stop sent: the I/O thread had ended)", \
            robot.link.state_reason
        stopped_at = len(seen.events)
        before = seen.count("RobotState")
        robot.start()  # afresh: what the ended thread had not handed out is not handed out now
        assert robot.wait_until_ready(10.0)
        assert isinstance(seen.events[stopped_at], LinkStateChanged), seen.events[stopped_at:stopped_at + 3]
        assert seen.events[stopped_at].state is LinkState.CONNECTING
        deadline = time.monotonic() + 5.0
        while seen.count("RobotState") < before + 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert seen.count("RobotState") >= before + 10  # it streams again
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_stop_that_reaches_no_io_thread_says_no_stop_was_sent(monkeypatch):
    # a ready link whose stop never reached the I/O thread (its call timed out) was said to be
    # "disconnected (unacknowledged)", as if a Disconnect had gone out and been lost, and the
    # driver's shutdown line said the robot "did not acknowledge the stop"
    import concurrent.futures

    sim = SimServer(host="127.0.0.1", port=0, config=RobotConfig(seed=11, peer_timeout=1.0)).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="not-sent")
    seen = Seen()
    robot.add_listener(seen, messages=())
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)

        def held_up(fn, *args, timeout=5.0, drop_late=True):
            raise concurrent.futures.TimeoutError()

        with monkeypatch.context() as patched:
            patched.setattr(robot.transport, "call", held_up)
            robot.stop(timeout=0.2)
        assert robot.state is LinkState.DISCONNECTED and not robot.transport.running
        reason = "disconnected (no stop sent: the I/O thread did not answer in time)"
        assert robot.link.state_reason == reason, robot.link.state_reason
        assert seen.events[-1] == LinkStateChanged(LinkState.DISCONNECTED, reason), seen.events[-3:]
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


@pytest.mark.parametrize("raised", [SystemExit, KeyboardInterrupt])
def test_a_listener_that_ends_the_io_thread_ends_the_link_and_says_so(raised, monkeypatch, log_records):
    # a listener's SystemExit or KeyboardInterrupt (no Exception: the listeners' guard and
    # asyncio let it through) ended the I/O thread silently: the client still said READY
    # (wait_until_ready True), no listener heard DISCONNECTED, and nothing was logged
    errors = log_records("cozmo.transport", "ERROR")
    warnings = log_records("cozmo.client", "WARNING")
    ended = []
    monkeypatch.setattr(threading, "excepthook", ended.append)  # nothing may leave the thread
    # no Disconnect reaches the robot: it holds the link until its peer_timeout, 1 s here
    sim = SimServer(host="127.0.0.1", port=0, config=RobotConfig(seed=11, peer_timeout=1.0)).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="exit")
    seen, raises = Seen(), []

    def exiting(event):  # a program's listener that ends the program from a state change
        if (isinstance(event, LinkStateChanged) and (raises or event.state is LinkState.READY)
                and robot.transport.in_io_thread()):  # (never the test's own thread)
            raises.append(event.state)
            raise raised()

    robot.add_listener(exiting, messages=())
    robot.add_listener(seen, messages=["RobotState"])  # after it: it must hear the end all the same
    try:
        robot.start()
        # READY came (the listener raised at it): not wait_until_ready, which misses a READY
        # that ended before its wait began (a run with four workers lost that race)
        assert io_thread_ended(robot, 10.0), robot.state
        assert raises and raises[0] is LinkState.READY, raises
        assert not robot.wait_until_ready(0.0)
        assert robot.state is LinkState.DISCONNECTED
        assert seen.link_states()[-1] is LinkState.DISCONNECTED, seen.link_states()
        assert raises == [LinkState.READY, LinkState.DISCONNECTED]   # (its second raise logged)
        assert robot.link.state_reason == f"disconnected (no stop sent: the I/O thread ended by {raised.__name__})"
        assert isinstance(robot.io_failure, raised)  # what the driver names (core.link_notes)
        assert robot.link.session.state is State.CLOSED, robot.link.session.state
        said = [m for m in errors.messages if m.startswith("[exit] the I/O thread ended: ")]
        assert len(said) == 1, errors.messages
        assert f"{raised.__name__} raised in an event handler or a call on it" in said[0], said
        assert "call stop(), then start() to go on" in said[0], said
        assert ended == []
        robot.stop(timeout=0.5)  # as after a lost link: the claim let go, nothing more to end
        assert not [m for m in warnings.messages if "no stop reached the robot" in m], warnings.messages
        robot.remove_listener(exiting)
        before = seen.count("RobotState")
        robot.start()
        assert robot.io_failure is None
        assert robot.wait_until_ready(10.0)
        wait_for_robot_states(seen, before + 10)
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_stop_as_a_call_s_system_exit_ends_the_io_thread_gives_the_threads_reason(log_records):
    """A stop that comes while the I/O thread ends by a SystemExit (its calls refused, "transport
    is stopping", the link not ended yet) does not end the link with its own refusal as the
    reason ("no stop sent: transport is stopping"): its wait for the thread lets the thread end
    the link first, by its own reason. The window is held by a call the thread runs as it ends."""
    warnings = log_records("cozmo.client", "WARNING")
    sim = SimServer(host="127.0.0.1", port=0, config=RobotConfig(seed=11, peer_timeout=1.0)).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="ending")
    seen = Seen()
    robot.add_listener(seen, messages=())
    held, release, in_window, release_window = (threading.Event() for _ in range(4))

    def hold():
        held.set()
        release.wait(30)

    def exiting():
        raise SystemExit()

    def ending():  # queued before the end: the thread runs it after it refuses calls
        in_window.set()
        release_window.wait(30)

    stopper = threading.Thread(target=robot.stop, kwargs={"timeout": 10.0})
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        robot.call_soon(hold)
        assert held.wait(10.0)
        robot.call_soon(exiting)
        robot.call_soon(ending)
        release.set()
        assert in_window.wait(10.0)
        assert robot.transport.running and robot.state is LinkState.READY
        stopper.start()
        deadline = time.monotonic() + 10.0
        while not any("[ending] stop: transport is stopping" in m for m in warnings.messages) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        assert any("[ending] stop: transport is stopping" in m for m in warnings.messages), warnings.messages
    finally:
        release.set()
        release_window.set()
        if stopper.is_alive():
            stopper.join(15.0)
    try:
        assert not stopper.is_alive() and not robot.transport.running
        assert robot.link.state_reason == "disconnected (no stop sent: the I/O thread ended by SystemExit)", \
            robot.link.state_reason
        assert seen.link_states().count(LinkState.DISCONNECTED) == 1, seen.link_states()
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_start_of_a_started_client_says_so_and_disturbs_nothing():
    """start() of a client that runs took its own claim of the robot for another
    program's: RobotBusyError naming this very program, as if something else drove the
    robot. It now says the client is started already, and the link streams on."""
    sim = SimServer(host="127.0.0.1", port=0, seed=11).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="twice")
    seen = Seen()
    robot.add_listener(seen, messages=["RobotState"])
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        with pytest.raises(TransportStateError, match=r"\[twice\] the robot client is started already: stop\(\) it"):
            robot.start()
        assert robot.state is LinkState.READY and robot.wait_until_ready(0.0)
        wait_for_robot_states(seen, seen.count("RobotState") + 10)
        assert seen.link_states()[-1] is LinkState.READY, seen.link_states()
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_start_after_a_listener_ended_the_io_thread_connects_without_a_stop_first(monkeypatch):
    """After a listener's SystemExit ended the I/O thread (the link ended there), start()
    without stop() first raised RobotBusyError: the client's own claim, still held,
    read as another program's. It now connects afresh."""
    monkeypatch.setattr(threading, "excepthook", lambda args: None)
    sim = SimServer(host="127.0.0.1", port=0, config=RobotConfig(seed=11, peer_timeout=1.0)).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="exit-start")
    seen, raised = Seen(), []

    def exiting(event):
        if isinstance(event, LinkStateChanged) and event.state is LinkState.READY and not raised:
            raised.append(event.state)
            raise SystemExit()

    robot.add_listener(exiting, messages=())
    robot.add_listener(seen, messages=["RobotState"])
    try:
        robot.start()
        assert io_thread_ended(robot, 10.0)
        assert raised
        assert robot.state is LinkState.DISCONNECTED
        before = seen.count("RobotState")
        robot.start()  # no stop() first
        assert robot.wait_until_ready(10.0)
        wait_for_robot_states(seen, before + 10)
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_start_after_a_stop_whose_time_ran_out_connects_afresh():
    """A stop whose time ran out ends the link here (the session closed, the link
    DISCONNECTED) while the robot, which never had the Disconnect, still holds its end and
    ignores a RESET from another address until it drops it (its peer_timeout, 1 s here):
    a start again connects anew, through that hold, and the robot streams again."""
    sim = SimServer(host="127.0.0.1", port=0, config=RobotConfig(seed=11, peer_timeout=1.0)).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="again")
    seen = Seen()
    robot.add_listener(seen, messages=["RobotState"])
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        first_port = robot.transport.local_address[1]
        sim.set_link_up(False)      # the Disconnect is lost: the robot keeps the link
        robot.stop(timeout=0.0)
        assert robot.link.state_reason == "disconnected (unacknowledged)", robot.link.state_reason
        assert robot.link.session.state is State.CLOSED
        sim.set_link_up(True)
        stopped_at = len(seen.events)
        before = seen.count("RobotState")
        robot.start()
        assert robot.wait_until_ready(10.0)
        assert seen.link_states()[-1] is LinkState.READY
        assert seen.events[stopped_at] == LinkStateChanged(LinkState.CONNECTING, "connecting")
        deadline = time.monotonic() + 5.0
        while seen.count("RobotState") < before + 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert seen.count("RobotState") >= before + 10
        assert sim.peer() == robot.transport.local_address and sim.peer()[1] != first_port
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def io_thread_ended(robot: Robot, timeout: float) -> bool:
    """Wait (``timeout`` s at most) until the robot client's I/O thread has ended; whether it has."""
    deadline = time.monotonic() + timeout
    while robot.transport.running and time.monotonic() < deadline:
        time.sleep(0.01)
    return not robot.transport.running


def wait_for_robot_states(seen: Seen, count: int) -> None:
    """Wait (5 s at most) until ``seen`` has ``count`` RobotStates, and check it has."""
    deadline = time.monotonic() + 5.0
    while seen.count("RobotState") < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen.count("RobotState") >= count


@pytest.mark.parametrize("when", ["before connecting", "once connecting"])
def test_a_start_whose_connect_fails_stops_its_io_thread_and_may_be_tried_again(when):
    # start() let go of the claim when its call of link.start raised (or timed out), but left
    # the transport running, its I/O thread and bound socket: a start again raised
    # "transport already started"
    from cozmo_driver.client.claim import RobotClaim
    # the robot that had the RESET of the first start ignores the second's until peer_timeout
    sim = SimServer(host="127.0.0.1", port=0, config=RobotConfig(seed=11, peer_timeout=1.0)).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="failed-start")
    seen = Seen()
    robot.add_listener(seen, messages=["RobotState"])
    link_start = robot.link.start

    def failing_start(now):
        if when == "once connecting":
            link_start(now)
        raise RuntimeError("the link could not start")

    robot.link.start = failing_start
    try:
        with pytest.raises(RuntimeError, match="the link could not start"):
            robot.start()
        assert not robot.transport.running
        assert robot.state is LinkState.DISCONNECTED and not robot.wait_until_ready(0.0)
        connecting = when == "once connecting"
        assert robot.link.session.state is (State.CLOSED if connecting else State.IDLE), robot.link.session.state
        # (the simulator may answer the RESET before the I/O thread is stopped: INITIALIZING)
        assert seen.link_states() in (([LinkState.CONNECTING, LinkState.DISCONNECTED],
                                       [LinkState.CONNECTING, LinkState.INITIALIZING, LinkState.DISCONNECTED])
                                      if connecting else ([],)), seen.link_states()
        RobotClaim(*sim.address, local_host="127.0.0.1").acquire().release()  # the robot is free
        robot.link.start = link_start
        robot.start()
        assert robot.wait_until_ready(10.0)
        wait_for_robot_states(seen, 10)
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_stop_whose_io_thread_is_held_up_returns_and_the_thread_ends_the_link_once_free(log_records):
    # stop(timeout) called the I/O thread with the transport's own timeout, 5 s, whatever its
    # own, then waited 5 s more for the thread to end and raised: a listener that blocked
    # held stop(timeout=0.2) for 10 s, and left the client READY once it was free
    logged = log_records("cozmo.client", "WARNING")
    sim = SimServer(host="127.0.0.1", port=0, config=RobotConfig(seed=11, peer_timeout=1.0)).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="held")
    seen = Seen()
    hold, held, release, stop_returned = threading.Event(), threading.Event(), threading.Event(), threading.Event()
    returned_while_held = []

    def holding(event):  # a listener that blocks the I/O thread (once) until the test frees it
        if hold.is_set() and not held.is_set():
            held.set()
            release.wait(30.0)
            returned_while_held.append(stop_returned.is_set())

    robot.add_listener(seen, messages=["RobotState"])
    robot.add_listener(holding, messages=["RobotState"])
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        try:
            hold.set()
            assert held.wait(5.0)
            robot.stop(timeout=0.2)
            stop_returned.set()
            assert not robot.wait_until_ready(0.0)
            assert any("[held] stop: the I/O thread did not end within 0.5 s" in m for m in logged.messages), \
                logged.messages
            with pytest.raises(TransportStateError, match="already started"):
                robot.start()  # its I/O thread has not ended
        finally:
            release.set()
        assert io_thread_ended(robot, 10.0)
        assert returned_while_held == [True]
        # the thread ended the link as its last work, after the stop it had not taken in time
        # (a stop is not dropped as a late command is: "no stop sent" would name its call's timeout)
        assert robot.state is LinkState.DISCONNECTED and not robot.wait_until_ready(0.0)
        assert "no stop sent" not in robot.link.state_reason, robot.link.state_reason
        assert seen.link_states()[-1] is LinkState.DISCONNECTED, seen.link_states()
        assert robot.link.session.state is State.CLOSED, robot.link.session.state
        before = seen.count("RobotState")
        robot.start()
        assert robot.wait_until_ready(10.0)
        wait_for_robot_states(seen, before + 10)
    finally:
        release.set()
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_stop_on_the_io_thread_is_refused_at_once_and_the_link_goes_on():
    # stop() from a listener stopped the link, held the loop for its timeout, then raised
    # RuntimeError joining its own thread: the client left half stopped
    sim = SimServer(host="127.0.0.1", port=0, seed=11).start()
    robot = Robot(*sim.address, local_host="127.0.0.1", name="self-stop")
    seen = Seen()
    stop_now, done = threading.Event(), threading.Event()
    outcome = []

    def stopping(event):  # a listener that stops the robot (once)
        if stop_now.is_set() and not done.is_set():
            try:
                robot.stop(timeout=0.1)
            except Exception as exc:
                outcome.append(exc)
            else:
                outcome.append(None)
            done.set()

    robot.add_listener(seen, messages=["RobotState"])
    robot.add_listener(stopping, messages=["RobotState"])
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        stop_now.set()
        assert done.wait(5.0)
        assert len(outcome) == 1 and isinstance(outcome[0], TransportStateError), outcome
        assert "call it from another thread" in str(outcome[0])
        # nothing was stopped: the link streams on
        assert robot.transport.running and robot.state is LinkState.READY and robot.wait_until_ready(0.0)
        wait_for_robot_states(seen, seen.count("RobotState") + 10)
        assert seen.link_states()[-1] is LinkState.READY
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_a_stop_acknowledged_does_not_wait_for_what_was_queued_after_it():
    """Faces queued after the stop kept stop_all_motors_acknowledged waiting for the whole
    send queue to empty: False ('it may still be moving') though the robot took the stop."""
    from cozmo_driver.client.link import ClientConfig
    from cozmo_driver.protocol import messages as msgs
    from cozmo_driver.protocol.session import SessionConfig
    sim = SimServer(host="127.0.0.1", port=0, seed=11).start()
    # one packet in flight at a time: the faces after the stop take a round trip each
    robot = Robot(*sim.address, local_host="127.0.0.1", name="after",
                  config=ClientConfig(session=SessionConfig(window=1)))
    sent = robot.link.send

    def send(message):  # another sender's faces, queued right after the stop
        sent(message)
        if message.NAME == "StopAllMotors":
            for _ in range(1000):
                sent(msgs.DisplayImage(image=b"\x3f"))

    robot.link.send = send
    try:
        robot.start()
        assert robot.wait_until_ready(10.0)
        # a first face now, so that the link's EnableAnimationState (sent before the stream's
        # first message, in the queue of commands) is not queued after the stop
        robot.transport.call(lambda: sent(msgs.DisplayImage(image=b"\x3f")))
        robot.drive_wheels(50.0, 50.0)
        assert sim.wait_until(lambda s: min(s.wheel_speeds()) > 0.0, 5.0)
        assert robot.stop_all_motors_acknowledged(2.0) is True
        assert robot.transport.call(lambda: robot.link.session.send_queue_length) > 0  # faces still queued
        assert sim.wait_until(lambda s: s.wheel_speeds() == (0.0, 0.0), 1.0), sim.wheel_speeds()
    finally:
        robot.stop(timeout=0.5)
        sim.stop()


def test_two_threads_adding_listeners_at_once_keep_both():
    """add_listener copied the list and assigned the copy unlocked: a second thread's add
    between the two was lost (the driver adds and removes listeners on the I/O thread and on
    the executor's). Thread A is held inside its copy while B adds."""
    robot = Robot("127.0.0.1", 9)  # no start(): listeners only
    in_copy, go, b_progress = threading.Event(), threading.Event(), threading.Event()

    class HeldCopy(list):
        def __add__(self, other):
            if threading.current_thread().name == "A":
                in_copy.set()
                assert go.wait(10.0)
            return HeldCopy(list(self) + list(other))

    class SeenLock:
        """The lock of the listeners, saying when B comes to it."""

        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            if threading.current_thread().name == "B":
                b_progress.set()
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    def first(event):
        pass

    def second(event):
        pass

    def add_b():
        robot.add_listener(second)
        b_progress.set()

    robot._listeners = HeldCopy(robot._listeners)
    robot._listeners_lock = SeenLock(getattr(robot, "_listeners_lock", threading.Lock()))
    a = threading.Thread(target=robot.add_listener, args=(first,), name="A")
    b = threading.Thread(target=add_b, name="B")
    a.start()
    try:
        assert in_copy.wait(10.0)
        b.start()
        assert b_progress.wait(10.0)  # B added its listener, or waits for A's lock
    finally:
        go.set()
        a.join(10.0)
        b.join(10.0)
    assert not a.is_alive() and not b.is_alive()
    assert [callback for callback, _ in robot._listeners] == [first, second]
