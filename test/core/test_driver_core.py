"""The ROS-free driver core (cozmo_driver.core) against the simulated robot over the
in-memory link, with an explicit clock: no rclpy, no sockets, no threads, no wall time."""

from __future__ import annotations

import copy
import heapq
import itertools
import logging
import math

import pytest

from cozmo_driver import robot_geometry as geo
from cozmo_driver.driver.diagnostics import ERROR, OK
from cozmo_driver.driver.events import EventType
from cozmo_driver.driver.orientation import Orientation
from cozmo_driver.client import LinkState, Robot, RobotLink
from cozmo_driver.client.link import MOTOR_MIN_SPEED_RADPS, LinkStateChanged
from cozmo_driver.core import DriverCore, RecordingOutput
from cozmo_driver.core.link_notes import LOST_HINT, SIM_LOST_HINT
from cozmo_driver.core.samples import StateSample
from cozmo_driver.driver.parameters import PARAMETERS
from cozmo_driver.protocol import messages as msgs
from cozmo_driver.protocol.session import MessageReceived
from cozmo_driver.sim import RobotConfig, SimulatedRobot
from cozmo_driver.transport.memory import Impairment, MemoryLink


class _Stats:
    wrong_source = 0
    send_errors = 0
    callback_errors = 0


class _Transport:
    stats = _Stats()


class MemoryRobot:
    """What DriverCore needs of a robot client (post, clock, calibrating, calibrate_motors,
    call_soon, schedule, stats), over a RobotLink joined to a SimulatedRobot by a
    MemoryLink, on the link's clock."""

    def __init__(self, seed: int = 3, down: Impairment | None = None) -> None:
        self.link = RobotLink(name="core-test")
        self.sim = SimulatedRobot(config=RobotConfig(seed=seed))
        self.net = MemoryLink(self.link, self.sim, None, down, seed=seed)
        self.transport = _Transport()
        self.received: list = []  # (time, message) the robot got
        self.net.on_event_b = self._robot_event
        self._soon: list = []
        self._timers: list = []
        self._order = itertools.count()
        self.listener = None

    def _robot_event(self, event) -> None:
        if isinstance(event, MessageReceived):
            self.received.append((self.net.now, event.message))

    def start(self, listener) -> None:
        self.net.on_event_a = listener
        self.link.start(self.net.now)

    # -- the client's surface
    @property
    def state(self) -> LinkState:
        return self.link.state

    @property
    def stats(self):
        return self.link.session.stats

    def post(self, message) -> None:
        self._soon.append(lambda: self.link.send(message))

    def clock(self) -> float:
        return self.net.now

    # the client's own (they use only its link and clock)
    calibrating = Robot.calibrating
    _calibrate_motors = Robot._calibrate_motors

    def calibrate_motors(self, head: bool = True, lift: bool = True) -> None:
        self.call_soon(self._calibrate_motors, head, lift)

    def call_soon(self, fn, *args) -> None:
        self._soon.append(lambda: fn(*args))

    def schedule(self, when: float, fn, *args):
        heapq.heappush(self._timers, (when, next(self._order), fn, args))

    # -- the test's clock
    def run(self, duration: float, max_steps: int = 200_000) -> None:
        end = self.net.now + duration
        for _ in range(max_steps):
            while self._soon:
                self._soon.pop(0)()
            self.net.flush()
            limit = min(end, self._timers[0][0]) if self._timers else end
            if not self.net.step(limit):
                while self._timers and self._timers[0][0] <= self.net.now:
                    _, _, fn, args = heapq.heappop(self._timers)
                    fn(*args)
                if self.net.now >= end and not self._soon:
                    return
        raise RuntimeError("did not settle")

    def sent(self, name: str) -> list:
        return [(t, m) for t, m in self.received if m.NAME == name]


PARAMS = {spec.name: spec.default for spec in PARAMETERS}
_ImageSendMode = msgs.ENUMS["ImageSendMode"]


def connected(**params):
    """A core with ``params`` over the defaults, active and connected to the simulator."""
    robot = MemoryRobot()
    output = RecordingOutput(clock_ns=lambda: int(robot.net.now * 1e9) + 1_700_000_000 * 10**9)
    core = DriverCore(robot, dict(PARAMS, **{"robot_ip": "127.0.0.1", "robot_port": 5551, **params}), output)
    robot.start(core.on_robot_event)
    core.activate()
    robot.run(2.0)
    assert core.connected, output.lines
    return robot, core, output


@pytest.fixture
def rig():
    return connected()


def test_the_robots_sync_time_ack_is_no_delocalized_event(rig):
    """The simulated robot acknowledges SyncTime with 0xc2 as Anki's firmware sends its
    SyncTimeAck once a connection; the reference client calls 0xc2 RobotDelocalized, and
    the driver published DELOCALIZED at every connection. A later 0xc2 still gives one."""
    robot, core, output = rig
    assert robot.link.sync_time_acks == 1
    assert EventType.DELOCALIZED not in [e.type for e in output.events]
    robot.sim.delocalize(robot.net.now)
    robot.run(0.2)
    assert [e.type for e in output.events].count(EventType.DELOCALIZED) == 1


def test_connects_reinitialises_and_reads_the_camera_calibration(rig):
    robot, core, output = rig
    assert [link.state for link in output.links][-1] is LinkState.READY
    assert output.infos and output.infos[0].firmware_version == 2381
    assert output.said("connected to Cozmo at 127.0.0.1:5551: firmware 2381", logging.INFO)
    for name in ("EnableStopOnCliff", "EnableCamera", "EnableColorImages", "NvStorageOp"):
        assert robot.sent(name), name
    # camera_auto_exposure (the default) starts from camera_gain and camera_exposure_ms,
    # with the third field false (Anki's firmware reads it as "send your defaults" and then
    # applies nothing); twice, as one firmware revision applies one change per message
    params = [m for _, m in robot.sent("SetCameraParams")]
    assert [(m.gain, m.exposure_ms, m.auto_exposure_enabled) for m in params] == [(1.0, 30, False)] * 2
    # a robot just connected is stopped before anything else (it may still move on a
    # command of a link that was lost, or of another program's)
    assert [t for t, _ in robot.sent("StopAllMotors")] == [0.0]
    assert output.camera_info_changes == 1 and core.calibration is not None
    assert output.said("camera calibration read from the robot")
    info = core.camera_info(320, 240)
    assert (info.width, info.height) == (320, 240) and info.k == core.calibration.k


def test_a_failed_camera_calibration_read_leaves_the_default_intrinsics_as_it_says(rig):
    """A read of the calibration that fails (the robot has none, is busy, or sends one that
    cannot be used) says which NvResult it got, and camera_info then really uses the
    default intrinsics: the calibration read before (this robot's at an earlier connection,
    or another robot's) was kept, though the warning said the defaults were used."""
    robot, core, output = rig
    tag = int(msgs.ENUMS["NvEntryTag"].NVEntry_CameraCalib)
    nv_result = msgs.ENUMS["NvResult"]
    assert core.calibration is not None and core.camera_info(320, 240).source == "robot"
    # reconnected to a robot with no calibration: the sim answers NV_NOT_FOUND
    del robot.sim.model.nv_store[tag]
    core.reinitialise(resend_only=False)
    robot.run(0.5)
    assert output.said("the robot has no camera calibration (NV_NOT_FOUND): camera_info uses the "
                       "default intrinsics", logging.WARNING), output.lines
    assert core.calibration is None and output.camera_info_changes == 2
    assert core.camera_info(320, 240).source == "default"
    # a busy NV storage is no missing calibration, and says so
    core.calibration = copy.copy(core.camera_info(320, 240))
    core._on_nv_result(msgs.NvStorageOpResult(tag=tag, length=0, op=0, result=nv_result.NV_BUSY, data=b""))
    assert output.said("the robot's camera calibration could not be read (NV_BUSY): camera_info uses "
                       "the default intrinsics", logging.WARNING), output.lines
    assert core.calibration is None and output.camera_info_changes == 3
    # one that cannot be used; with camera_info_url, that file is what camera_info uses
    core.calibration = copy.copy(core.camera_info(320, 240))
    core.camera_file = core.calibration
    core._on_nv_result(msgs.NvStorageOpResult(tag=tag, length=3, op=0, result=nv_result.NV_OKAY, data=b"abc"))
    assert output.said("camera calibration from the robot unusable (camera calibration of 3 bytes, "
                       "expected 56): camera_info uses the file of camera_info_url", logging.WARNING), output.lines
    assert core.calibration is None and output.camera_info_changes == 4


def test_a_calibration_sent_to_set_camera_info_is_used_at_once_over_the_robots(rig):
    """camera/set_camera_info's calibration (set_camera_file) is what camera_info uses from
    then on, scaled to the images, the cached messages dropped; the robot's, read again at a
    reconnection, is said not to be used, naming what is instead."""
    from cozmo_driver.core.camera import SET_CAMERA_INFO
    from cozmo_driver.driver import camera_info as caminfo
    robot, core, output = rig
    changes = output.camera_info_changes
    k = [500.0, 0.0, 320.0, 0.0, 502.0, 240.0, 0.0, 0.0, 1.0]
    r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    p = [500.0, 0.0, 320.0, 0.0, 0.0, 502.0, 240.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    sent = caminfo.from_fields(640, 480, "plumb_bob", [0.1, 0.0, 0.0, 0.0, 0.0], k, r, p, SET_CAMERA_INFO)
    core.set_camera_file(sent)
    assert output.camera_info_changes == changes + 1
    info = core.camera_info(320, 240)
    assert (info.source, info.k[0], info.k[4], info.d[0]) == (SET_CAMERA_INFO, 250.0, 251.0, 0.1)
    core.reinitialise(resend_only=False)
    robot.run(0.5)
    assert output.said("; the calibration sent to set_camera_info takes precedence"), output.lines
    assert core.camera_info(320, 240).k[0] == 250.0


def test_state_samples_are_si_units_and_follow_the_robot(rig):
    robot, core, output = rig
    output.states.clear()
    output.batteries.clear()
    core.drive(0.05, 0.0)
    robot.run(1.0)
    core.set_head(0.3, 0.0)
    core.set_lift(0.07, 2.0)
    robot.run(2.0)
    states = output.states
    assert 80 <= len(states) <= 100  # 30 a second
    last = states[-1]
    assert last.odom.v_mps == pytest.approx(0.0, abs=1e-6)  # the watchdog stopped it at 0.5 s
    assert max(s.odom.v_mps for s in states) == pytest.approx(0.05, abs=2e-3)
    assert 0.015 < last.odom.x_m < 0.04 and abs(last.odom.y_m) < 2e-3
    assert last.odom.qw == pytest.approx(math.cos(last.odom.yaw_rad / 2.0))
    assert last.joints.head_rad == pytest.approx(0.3, abs=2e-3)
    assert last.joints.lift_rad == pytest.approx(math.asin((0.07 - 0.045) / 0.066), abs=5e-3)
    assert last.imu.az_mps2 == pytest.approx(9.81, abs=0.3)  # specific force, m/s^2
    assert 3.5 < last.status.battery_v < 4.3  # volts
    assert output.batteries[-1].voltage_v in {s.status.battery_v for s in states}
    assert last.status.head_in_pos and not last.status.is_picked_up
    assert last.status.path_segment == -1
    assert last.odom.sec * 10**9 + last.odom.nanosec == last.odom.stamp_ns
    assert 2 <= len(output.batteries) <= 4 and 0.0 <= output.batteries[-1].percentage <= 1.0


def test_the_watchdog_stops_once_on_the_robot_clock(rig):
    robot, core, output = rig
    core.params["cmd_vel_timeout"] = 0.3
    start = robot.net.now
    for _ in range(5):  # refreshed every 0.1 s: no stop in between
        core.drive(0.05, 0.1)
        robot.run(0.1)
    last = start + 0.4
    assert core.watchdog_due == pytest.approx(last + 0.3, abs=0.02)
    robot.run(1.0)
    drives = robot.sent("DriveWheels")
    assert len(drives) == 6
    stop_time, stop = drives[-1]
    assert (stop.lwheel_speed_mmps, stop.rwheel_speed_mmps) == (0.0, 0.0)
    assert last + 0.3 <= stop_time < last + 0.35
    assert output.said("no cmd_vel for 0.3 s: treads stopped", logging.INFO)
    assert core.watchdog_due is None


def test_a_cmd_vel_publisher_slower_than_the_watchdog_is_told_the_robot_drives_in_jerks(rig):
    """ros2 topic pub publishes once a second unless given -r: with cmd_vel_timeout 0.5 s the
    watchdog stopped the treads half a second after each command and the next one started
    them again, the robot driving in jerks, and the log said only "no cmd_vel for 0.5 s:
    treads stopped" each time. From the second such restart in a row the driver warns
    (throttled) with the gap, the parameter and the way out. A teleop paused now and then (a
    restart, then commands fast enough), a stop (a zero command) and a command long after the
    last are no matter of it."""
    robot, core, output = rig
    core.params["cmd_vel_timeout"] = 0.5

    def burst() -> None:  # 20 Hz for 0.3 s, then quiet: the watchdog stops the treads
        for _ in range(6):
            core.drive(0.05, 0.0)
            robot.run(0.05)
        robot.run(0.9)

    slow = "later than cmd_vel_timeout"
    for _ in range(3):   # restarts, each followed by commands in time
        burst()
    core.drive(0.0, 0.0)  # a stop, 0.9 s after the last: no restart
    robot.run(1.0)
    core.drive(0.05, 0.0)  # a restart long after the last command (a new teleop session)
    robot.run(3.0)
    core.drive(0.05, 0.0)
    robot.run(0.1)
    assert output.said("no cmd_vel for 0.5 s: treads stopped", logging.INFO)
    assert not output.said(slow), output.lines
    for _ in range(3):   # once a second: the second restart in a row is warned of
        core.drive(0.05, 0.0)
        robot.run(1.0)
    assert output.said("cmd_vel came 1.00 s after the one before, later than cmd_vel_timeout (0.5 s): "
                       "the watchdog stops the treads between commands, and the robot drives in jerks",
                       logging.WARNING), output.lines
    assert output.said("-r 10")


def test_the_warning_of_a_slow_cmd_vel_publisher_is_throttled_across_the_watchdogs_stops(rig):
    """With ros2 topic pub's 1 Hz the warning of a publisher slower than the watchdog came
    every second, never counted: the watchdog's stop between two commands said every line
    held back before its own ("treads stopped"), this one too, whose kind then started its
    2 s again. It describes those stops, and is throttled across them as docs/driver.md
    says: at most one line per 2 s, the next with the count of the others."""
    robot, core, output = rig
    core.clock = lambda: robot.net.now  # the throttle's time: the simulated robot's
    core.params["cmd_vel_timeout"] = 0.5
    start = len(output.lines)
    for _ in range(9):  # once a second: a restart of the treads from the second on
        core.drive(0.05, 0.0)
        robot.run(1.0)
        core.say_overdue()  # the node's 1 s timer
    lines = [line for _, line in output.lines[start:] if "later than cmd_vel_timeout" in line]
    assert sum("treads stopped" in line for _, line in output.lines[start:]) == 9
    assert 2 <= len(lines) <= 4, lines  # 7 warned of, in 7 s
    assert any("(and 1 more like it in the last 2.0 s)" in line for line in lines), lines


def _configure_again(core, **impairment):
    """What a cleanup and a configure and activate do to the core: the old robot's I/O
    loop stops (nothing scheduled on it runs again), a new robot client comes."""
    core.deactivate()
    core.release()
    robot = MemoryRobot()
    if impairment:
        robot.net.a_to_b = robot.net.b_to_a = Impairment(**impairment)
    core.robot = robot
    robot.start(core.on_robot_event)
    core.activate()
    return robot


def test_an_activation_before_the_robot_is_brought_up_takes_no_command_before_its_stop():
    """activate() (on the executor) took the link as ready when the robot client's was, and
    set the core's: activated between the link's READY and the core's RobotReady (the I/O
    thread's next event), it took a drive that went out before that connection's StopAllMotors,
    which dropped it. The core is ready once it brought the robot up (RobotReady), and an
    activation before refuses commands until then."""
    robot = MemoryRobot()
    output = RecordingOutput(clock_ns=lambda: int(robot.net.now * 1e9) + 1_700_000_000 * 10**9)
    core = DriverCore(robot, dict(PARAMS, robot_ip="127.0.0.1", robot_port=5551), output)
    seen = []

    def listener(event) -> None:
        core.on_robot_event(event)
        if isinstance(event, LinkStateChanged) and event.state is LinkState.READY:
            core.activate()  # the executor, right before the I/O thread's RobotReady
            seen.append(core.connected)
            core.drive(0.05, 0.0)

    robot.start(listener)
    robot.run(2.0)
    assert seen == [False] and core.connected and core.active
    names = [m.NAME for _, m in robot.received]
    first_stop = names.index("StopAllMotors")
    assert "DriveWheels" not in names[:first_stop], names[:first_stop]
    assert output.states  # published from the robot's first state on


def test_a_link_lost_while_the_core_is_activated_is_not_taken_as_ready(rig):
    """activate() read the robot client's link state (ready) and then set the core's: a link
    lost between the two (the I/O thread's event) was overwritten, and the core said it was
    connected, and took commands, until the next link event. The link goes as the client's
    state is read (or, if it is not read, right after the activation)."""
    robot, core, output = rig
    core.deactivate()

    class LosesTheLink(type(robot)):
        @property
        def state(self):
            lose()
            return LinkState.READY  # what the read saw

    def lose() -> None:
        if not lost:
            lost.append(True)
            core.on_robot_event(LinkStateChanged(LinkState.LOST, "robot silent for 1.0 s"))

    lost: list = []
    robot.__class__ = LosesTheLink
    try:
        core.activate()
        lose()
    finally:
        robot.__class__ = MemoryRobot
    assert core.active and not core.connected and core.link_state is LinkState.LOST


def test_the_watchdog_stops_a_drive_after_a_cleanup_that_came_soon_after_driving(rig):
    """A cleanup within cmd_vel_timeout of a moving cmd_vel stopped the robot's I/O loop with
    the watchdog's check still pending on it, and the core, kept across cleanups, took the
    check as scheduled: after the next configure no check was scheduled for a drive, and the
    robot drove on for good. Each connection's first moving drive arms the watchdog again."""
    robot, core, output = rig
    core.params["cmd_vel_timeout"] = 0.3
    core.drive(0.05, 0.1)
    robot.run(0.1)                    # the check waits for 0.4 s: it never runs
    robot = _configure_again(core)
    robot.run(2.0)
    assert core.connected
    start = robot.net.now
    core.drive(0.05, 0.1)
    robot.run(1.0)
    stops = [t for t, m in robot.sent("DriveWheels") if m.lwheel_speed_mmps == m.rwheel_speed_mmps == 0.0]
    assert len(stops) == 1 and start + 0.3 <= stops[0] < start + 0.35, (start, stops)
    assert core.watchdog_due is None


@pytest.mark.parametrize("before, after, stop_after", [
    (10.0, 0.5, 0.5),     # lowered while driving: the stop comes at the new timeout
    (10.0, 0.05, 0.1),    # lowered below the time already gone: at once
    (0.0, 0.5, 0.5),      # the watchdog turned on while driving: it counts from the last command
    (0.3, 0.0, None),     # turned off: the drive goes on
    (0.3, 2.0, 2.0),      # raised: the stop comes later
])
def test_a_new_cmd_vel_timeout_applies_to_the_drive_in_progress(rig, before, after, stop_after):
    robot, core, output = rig
    core.params["cmd_vel_timeout"] = before
    start = robot.net.now
    core.drive(0.05, 0.1)
    robot.run(0.1)
    old = dict(core.params)
    core.params["cmd_vel_timeout"] = after
    core.apply_params(old)
    robot.run(4.0)
    drives = robot.sent("DriveWheels")
    stops = [t for t, m in drives if m.lwheel_speed_mmps == 0.0 and m.rwheel_speed_mmps == 0.0]
    assert output.said("the cmd_vel watchdog is off", logging.WARNING) == (after == 0.0)
    if stop_after is None:
        assert stops == [] and core.watchdog_due is None
        return
    assert len(stops) == 1, stops
    assert start + stop_after - 0.01 <= stops[0] < start + stop_after + 0.05
    assert output.said(f"no cmd_vel for {after:g} s: treads stopped", logging.INFO), output.lines


def test_a_new_max_wheel_speed_applies_to_the_drive_in_progress(rig):
    """max_wheel_speed changed while a cmd_vel drove the treads acted only from the next
    cmd_vel: the drive in progress is sent again at once at the new limit (from the speeds
    asked for: raised, up to them again), and the watchdog still counts from the last cmd_vel."""
    robot, core, output = rig
    start = robot.net.now
    core.drive(0.15, 0.0)
    robot.run(0.1)

    def apply(**change):
        old = dict(core.params)
        core.params.update(change)
        core.apply_params(old)
        robot.run(0.05)
        last = robot.sent("DriveWheels")[-1][1]
        return last.lwheel_speed_mmps, last.rwheel_speed_mmps

    assert apply(max_wheel_speed=0.05) == pytest.approx((50.0, 50.0))
    assert output.said("cmd_vel scaled down by 0.33 to keep both treads within max_wheel_speed "
                       "= 0.050 m/s", logging.WARNING), output.lines
    assert apply(max_wheel_speed=0.2) == pytest.approx((150.0, 150.0))
    assert apply(wheel_acceleration=1.0) == pytest.approx((150.0, 150.0))  # nothing sent
    assert len(robot.sent("DriveWheels")) == 3
    robot.run(1.0)
    stops = [t for t, m in robot.sent("DriveWheels") if m.lwheel_speed_mmps == m.rwheel_speed_mmps == 0.0]
    assert len(stops) == 1 and start + 0.5 <= stops[0] < start + 0.55, (start, stops)
    robot.run(0.1)
    assert apply(max_wheel_speed=0.1) == (0.0, 0.0)  # no drive in progress: nothing sent
    assert len(robot.sent("DriveWheels")) == 4


def test_a_lowered_head_or_lift_max_speed_applies_to_the_velocity_motion_in_progress(rig):
    """head_max_speed or lift_max_speed lowered while a head/velocity or lift/velocity motion
    ran left it at its old speed (the robot keeps a MoveHead/MoveLift until a limit or a new
    command): the motion is sent again clamped to the new limit, with a warning. A raised
    limit, a motion ended (a stop, a position command, the emergency stop) and a position
    move send nothing."""
    robot, core, output = rig
    core.move_head(5.0)
    core.move_lift(-2.5)
    robot.run(0.1)

    def apply(**change):
        old = dict(core.params)
        core.params.update(change)
        core.apply_params(old)
        robot.run(0.05)
        return [m.speed_rad_per_sec for _, m in robot.sent("MoveHead")], \
            [m.speed_rad_per_sec for _, m in robot.sent("MoveLift")]

    assert apply(head_max_speed=2.0) == (pytest.approx([5.0, 2.0]), pytest.approx([-2.5]))
    assert output.said("head_max_speed lowered to 2 rad/s: the head/velocity motion in progress is "
                       "sent again: head/velocity.data = 5 rad/s is outside [-2, 2] rad/s: clamped "
                       "to 2 rad/s", logging.WARNING), output.lines
    assert apply(lift_max_speed=1.0) == (pytest.approx([5.0, 2.0]), pytest.approx([-2.5, -1.0]))
    assert output.said("lift_max_speed lowered to 1 rad/s", logging.WARNING), output.lines
    assert apply(head_max_speed=3.0, lift_max_speed=3.0)[0] == pytest.approx([5.0, 2.0])  # raised
    assert apply(head_max_speed=2.5)[0] == pytest.approx([5.0, 2.0])  # still above the motion
    assert apply(head_max_speed=1.0)[0] == pytest.approx([5.0, 2.0, 1.0])
    core.move_head(0.0)  # stopped, and the lift taken by a position command: nothing to slow
    core.set_lift(0.05)
    robot.run(0.1)
    assert apply(head_max_speed=0.5, lift_max_speed=0.5) == (pytest.approx([5.0, 2.0, 1.0, 0.0]),
                                                             pytest.approx([-2.5, -1.0]))
    core.move_head(0.5)
    robot.run(0.1)
    core.emergency_stop(True)
    core.emergency_stop(False)
    assert apply(head_max_speed=0.2)[0] == pytest.approx([5.0, 2.0, 1.0, 0.0, 0.5])
    assert len(robot.sent("SetLiftHeight")) == 1


def test_stop_when_picked_up_turned_on_stops_a_lifted_robots_drive_in_progress(rig):
    """stop_when_picked_up turned on while a lifted robot drove its treads by cmd_vel left
    them running in the air until the next cmd_vel."""
    robot, core, output = rig
    core.params["stop_when_picked_up"] = False
    robot.run(0.3)
    core.drive(-0.04, 0.5)
    robot.run(0.1)
    robot.sim.pick_up(robot.net.now)
    robot.run(0.3)
    assert output.states[-1].status.is_picked_up
    assert robot.sim.model.body.wheels[0].speed != 0.0
    old = dict(core.params)
    core.params["stop_when_picked_up"] = True
    core.apply_params(old)
    robot.run(0.1)
    assert robot.sim.model.body.wheels[0].speed == 0.0
    assert core.watchdog_due is None      # nothing left for the watchdog to stop


def test_a_hold_turned_off_starts_no_drive_by_itself(rig):
    """stop_on_cliff turned off with the robot at an edge, its cmd_vel's forward motion held
    back (the turn kept): the driver does not send the forward motion by itself; the next
    cmd_vel drives as asked."""
    robot, core, output = rig
    edge = robot.sim.model.world.table_half_size_mm
    robot.sim.teleport(robot.net.now, edge - 20.0, 0.0, 0.0)      # the sensor over the edge
    robot.run(0.3)
    core.drive(0.05, 1.0)
    robot.run(0.1)
    held = robot.sent("DriveWheels")[-1][1]
    assert held.lwheel_speed_mmps == pytest.approx(-held.rwheel_speed_mmps) != 0.0
    count = len(robot.sent("DriveWheels"))
    old = dict(core.params)
    core.params["stop_on_cliff"] = False
    core.apply_params(old)
    robot.run(0.1)
    assert len(robot.sent("DriveWheels")) == count  # nothing sent: still turning in place


def test_no_drive_after_the_emergency_stop_until_released(rig):
    robot, core, output = rig
    core.drive(0.05, 0.0)
    robot.run(0.1)
    assert core.emergency_stop(True) == \
        "emergency stop engaged: motors stopped, motion commands refused"
    core.drive(0.05, 0.0)
    core.set_head(0.2)
    robot.run(1.0)
    names = [m.NAME for _, m in robot.received]
    engaged = max(i for i, name in enumerate(names) if name == "StopAllMotors")
    assert "DriveWheels" in names[:engaged] and "DriveWheels" not in names[engaged:]
    assert core.refused == 2
    assert output.said("cmd_vel refused: emergency stop engaged", logging.WARNING)
    assert core.emergency_stop(False) == "emergency stop released"
    core.drive(0.05, 0.0)
    robot.run(0.1)
    assert robot.sent("DriveWheels")[-1][1].lwheel_speed_mmps == pytest.approx(50.0)


def test_no_motion_while_ctrl_z_suspends_the_driver(rig):
    """Ctrl-Z: from hold_for_ctrl_z(True) until the process goes on (False) no drive or head
    command goes out (the cmd_vel thread runs on until the process stops, after the stop),
    and the watchdog has nothing left to stop; after it, a new cmd_vel drives again."""
    robot, core, output = rig
    core.drive(0.05, 0.0)
    robot.run(0.1)
    assert core.watchdog_due is not None
    core.hold_for_ctrl_z(True)
    assert core.watchdog_due is None
    before = len(robot.received)
    core.drive(0.05, 0.0)
    core.set_head(0.2)
    robot.run(0.2)
    assert not [m.NAME for _, m in robot.received[before:] if m.NAME in ("DriveWheels", "SetHeadAngle")]
    assert output.said("cmd_vel refused: the driver is being suspended (Ctrl-Z)", logging.WARNING)
    core.hold_for_ctrl_z(False)
    core.drive(0.05, 0.0)
    robot.run(0.1)
    assert robot.sent("DriveWheels")[-1][1].lwheel_speed_mmps == pytest.approx(50.0)


def test_bad_commands_are_refused_or_clamped_with_what_was_wrong(rig):
    robot, core, output = rig
    core.drive_twist("cmd_vel", (math.nan, 0.0, 0.0), (0.0, 0.0, 0.0))
    core.set_head(math.inf)
    core.set_lift(0.05, -1.0)
    core.set_volume(math.nan)
    core.set_backpack_lights({"front": (1.5, 0, 0), "middle": (0, 0, 0), "back": (0, 0, 0),
                              "left": (0, 0, 0), "right": (0, 0, 0)})
    assert core.refused == 5
    for text in ("cmd_vel refused: cmd_vel.linear.x is nan", "head/angle refused: head/angle.angle",
                 "lift/height refused: lift/height.max_speed = -1.0: a speed must not be negative",
                 "volume refused", "backpack_lights refused: backpack_lights.front"):
        assert output.said(text, logging.WARNING), (text, output.lines)
    core.set_head(2.0)  # out of range: clamped, with a warning
    core.move_lift(100.0)
    robot.run(0.2)
    assert robot.sent("SetHeadAngle")[-1][1].angle_rad == pytest.approx(geo.HEAD_MAX_ANGLE_RAD)
    assert abs(robot.sent("MoveLift")[-1][1].speed_rad_per_sec) == \
        pytest.approx(PARAMS["lift_max_speed"])
    assert output.said("head/angle.angle", logging.WARNING)
    assert core.refused == 5


def test_head_and_lift_speeds_near_zero_never_reach_the_robot(rig):
    """Anki's firmware takes a head or lift speed nearer zero than 1e-5 rad/s for its full
    speed (SetMaxSpeedAndAccel: NEAR_ZERO -> MAX_*_SPEED), so MoveHead(1e-6) from a noisy
    joystick drove the head into its stop at full speed. A velocity that small is sent as
    0 (stop), a max_speed that small raised to MOTOR_MIN_SPEED_RADPS, each with a
    warning that says why."""
    robot, core, output = rig
    core.move_head(1e-6)
    core.move_lift(-1e-7)
    core.set_lift(0.05, 1e-6)
    robot.run(0.2)
    assert robot.sent("MoveHead")[-1][1].speed_rad_per_sec == 0.0
    assert robot.sent("MoveLift")[-1][1].speed_rad_per_sec == 0.0
    assert robot.sent("SetLiftHeight")[-1][1].max_speed_rad_per_sec == \
        pytest.approx(MOTOR_MIN_SPEED_RADPS)
    assert output.said("head/velocity.data = 1e-06 rad/s is nearer 0 than 0.0001, which the "
                       "robot takes for its full speed: sent as 0 (stop)", logging.WARNING)
    assert output.said("lift/height.max_speed = 1e-06 rad/s is below 0.0001, which the robot "
                       "takes for its full speed: raised to 0.0001 rad/s", logging.WARNING)
    core.move_head(0.5)  # a real speed goes as it is
    robot.run(0.1)
    assert robot.sent("MoveHead")[-1][1].speed_rad_per_sec == pytest.approx(0.5)
    assert core.refused == 0


def test_a_speed_too_near_zero_right_after_one_too_high_is_warned_of_at_once(rig):
    """Warnings of one field repeat at most every 2 s, but a different problem of the same
    field is another kind: a speed too near 0 right after one clamped (or the reverse)
    was held back until the next warning of that field, with no word meanwhile."""
    robot, core, output = rig
    core.move_head(100.0)
    core.move_head(1e-6)
    core.set_lift(0.05, 1e-6)
    core.set_lift(0.05, 100.0)
    robot.run(0.1)
    assert output.said("head/velocity.data = 100", logging.WARNING), output.lines
    assert output.said("head/velocity.data = 1e-06 rad/s is nearer 0 than", logging.WARNING), \
        output.lines
    assert output.said("lift/height.max_speed = 1e-06 rad/s is below", logging.WARNING), output.lines
    assert output.said("lift/height.max_speed = 100", logging.WARNING), output.lines
    core.move_head(1e-7)  # the same problem again within 2 s: held back, and counted
    robot.run(0.1)
    assert not output.said("head/velocity.data = 1e-07", logging.WARNING), output.lines


def test_components_a_differential_drive_cannot_follow_are_said_not_silently_dropped(rig):
    """A holonomic teleop key (Shift+J: linear.y) or linear.z: the robot did not move and
    nothing said why. Now a (throttled) warning names them; x and the yaw rate still drive."""
    robot, core, output = rig
    core.drive_twist("cmd_vel", (0.05, 0.3645, 0.0), (0.0, 0.0, 0.5))
    robot.run(0.1)
    assert output.said("cmd_vel: linear.y = 0.3645 ignored: Cozmo drives forwards and backwards "
                       "(linear.x) and turns (angular.z) only", logging.WARNING), output.lines
    left, right = (robot.sent("DriveWheels")[-1][1].lwheel_speed_mmps,
                   robot.sent("DriveWheels")[-1][1].rwheel_speed_mmps)
    assert (left + right) / 2 == pytest.approx(50.0) and right > left
    assert core.refused == 0


def test_driving_forwards_at_a_cliff_says_why_the_robot_does_not_move(rig):
    """With stop_on_cliff the robot holds its treads while its (front) cliff sensor sees no
    floor; the driver logged the cmd_vel it applied and nothing else, so the robot just
    stood there. Backwards it drives, without the warning."""
    robot, core, output = rig
    edge = robot.sim.model.world.table_half_size_mm
    robot.sim.teleport(robot.net.now, edge - 20.0, 0.0, 0.0)      # the sensor is 32 mm ahead
    robot.run(0.3)
    said = "cmd_vel drives forwards, but the robot's cliff sensor sees no floor ahead"
    core.drive(-0.03, 0.0)
    robot.run(0.3)
    assert not output.said(said, logging.WARNING)
    robot.sim.teleport(robot.net.now, edge - 20.0, 0.0, 0.0)
    robot.run(0.3)
    before = robot.sim.model.true_pose()
    # a teleop's steady 10 Hz: the robot stops its treads when the drop appears, once (Anki's
    # firmware, and the simulator since); the driver holds the forward motion after that
    for _ in range(10):
        core.drive(0.05, 0.0)
        robot.run(0.1)
    assert output.said(said, logging.WARNING), output.lines
    assert robot.sim.model.true_pose()[0] == pytest.approx(before[0], abs=1.0)
    assert robot.sent("DriveWheels")[-1][1].lwheel_speed_mmps == 0.0
    # turning on the spot at the edge is not held (the firmware does not stop it either)
    core.drive(0.05, 1.0)
    robot.run(0.3)
    wheels = robot.sent("DriveWheels")[-1][1]
    assert wheels.lwheel_speed_mmps == pytest.approx(-wheels.rwheel_speed_mmps) != 0.0
    assert robot.sim.model.true_pose()[2] > 0.1
    core.drive(0.0, 0.0)


def test_a_forward_drive_sent_as_the_edge_appears_is_sent_again_without_its_forward_motion(rig):
    """The robot stops its treads when its cliff sensor loses the floor, once; a cmd_vel
    forwards that reached it after that stop (before the driver saw the cliff) would drive it
    on. On the cliff event the driver sends the last cmd_vel again without its forward part."""
    robot, core, output = rig
    edge = robot.sim.model.world.table_half_size_mm
    robot.sim.teleport(robot.net.now, edge - 40.0, 0.0, 0.0)   # the sensor 8 mm short
    robot.run(0.3)
    core.drive(0.04, 0.0)           # one command, no repeats: the watchdog is 0.5 s
    robot.run(0.45)
    last = robot.sent("DriveWheels")[-1]
    assert (last[1].lwheel_speed_mmps, last[1].rwheel_speed_mmps) == (0.0, 0.0), last
    assert robot.sim.model.true_pose()[0] < edge - 20.0
    robot.run(0.5)   # past the watchdog: nothing turns, so it has nothing to stop or say
    assert not output.said("no cmd_vel for"), output.lines
    # the event: once the sensor has seen no floor for 0.5 s, the robot on its treads
    assert [e.type for e in output.events].count(EventType.CLIFF_DETECTED) == 1


def test_a_robot_lifted_while_teleop_drives_it_forwards_gets_no_cliff_warning(rig):
    """A lifted robot's cliff sensor loses the floor before the robot reports the pick-up,
    and the driver holds cmd_vel's forward motion meanwhile: that is no table edge, so no
    warning to drive backwards or turn away."""
    robot, core, output = rig
    robot.run(0.3)
    for k in range(12):
        if k == 3:
            robot.sim.pick_up(robot.net.now)
        core.drive(0.05, 0.0)
        robot.run(0.1)
    assert output.states[-1].status.is_picked_up
    assert not output.said("cliff sensor sees no floor ahead"), output.lines


@pytest.mark.parametrize("stop", [True, False])
def test_a_lifted_robot_has_its_treads_stopped_and_cmd_vel_held_until_it_is_put_down(rig, stop):
    """Anki's shipped firmware does not stop the treads of a robot picked up (its "pickup
    paralysis" is off): they would drive on in the air. With stop_when_picked_up the driver
    stops them when the pick-up is reported, holds cmd_vel while it lasts, saying so, and
    drives again once the robot is put down; without it the treads run on."""
    robot, core, output = rig
    core.params["stop_when_picked_up"] = stop
    robot.run(0.3)
    core.drive(-0.04, 0.5)           # backwards and turning: no cliff stop on the lift
    robot.run(0.1)
    robot.sim.pick_up(robot.net.now)
    robot.run(0.3)                   # one command only: the watchdog (0.5 s) has not fired
    assert output.states[-1].status.is_picked_up
    turning = robot.sim.model.body.wheels[0].speed != 0.0
    assert turning is not stop
    said = "cmd_vel holds still: the robot is picked up (or falling)"
    for _ in range(5):               # a teleop's steady commands
        core.drive(-0.04, 0.5)
        robot.run(0.1)
    assert (robot.sim.model.body.wheels[0].speed != 0.0) is not stop
    assert output.said(said, logging.WARNING) is stop, output.lines
    robot.sim.put_down(robot.net.now)
    robot.run(0.4)
    assert not output.states[-1].status.is_picked_up
    core.drive(-0.04, 0.5)
    robot.run(0.2)
    assert robot.sim.model.body.wheels[0].speed != 0.0      # drives again
    core.drive(0.0, 0.0)


def test_a_pick_up_is_no_cliff_event(rig):
    """The cliff sensor loses the floor whenever the robot is lifted (on a real robot before
    IS_PICKED_UP rises): CLIFF_DETECTED comes only for an edge the robot stands at, as
    Anki's firmware delays its cliff event for a pick-up to cancel it."""
    robot, core, output = rig
    robot.run(0.3)
    robot.sim.pick_up(robot.net.now)
    robot.run(1.0)
    robot.sim.put_down(robot.net.now)
    robot.run(1.0)
    types = [e.type for e in output.events]
    assert EventType.PICKED_UP in types and EventType.PUT_DOWN in types, types
    assert EventType.CLIFF_DETECTED not in types and EventType.CLIFF_CLEARED not in types, types


def test_an_edge_the_cliff_sensor_finds_is_reported_for_a_costmap_but_not_a_lifted_robot(rig):
    """on_cliff_edge (cliff/points): True, stamped as the state that showed it, when the
    sensor loses the floor of a robot on its treads; False when it sees the floor again. A
    robot picked up sees no floor either: that is no edge."""
    robot, core, output = rig
    edge = robot.sim.model.world.table_half_size_mm
    robot.sim.teleport(robot.net.now, edge - 40.0, 0.0, 0.0)   # the sensor 8 mm short
    robot.run(0.3)
    assert output.cliff_edges == []
    core.drive(0.04, 0.0)
    robot.run(0.5)
    drop = [s.odom.stamp_ns for s in output.states if s.status.cliff_detected]
    assert drop and output.cliff_edges == []        # not yet: a pick-up would cancel it
    robot.run(0.5)
    assert [e for _, e in output.cliff_edges] == [True]
    assert output.cliff_edges[0][0] == drop[0]      # stamped as the drop's first state
    core.drive(-0.04, 0.0)
    robot.run(0.4)
    assert [e for _, e in output.cliff_edges] == [True, False]
    core.drive(0.0, 0.0)
    robot.sim.teleport(robot.net.now, 0.0, 0.0, 0.0)
    robot.run(0.3)
    robot.sim.pick_up(robot.net.now)
    robot.run(1.0)
    assert output.states[-1].status.cliff_detected       # the sensor sees no floor...
    assert [e for _, e in output.cliff_edges] == [True, False]   # ...but it is no edge
    robot.sim.put_down(robot.net.now)
    robot.run(0.5)
    assert [e for _, e in output.cliff_edges] == [True, False]


def test_a_cliff_edge_is_found_under_ros_time_without_a_clock(rig):
    """The edge's hold (0.5 s) was timed by the states' stamps: under use_sim_time without
    /clock (or with it paused) they all read 0, and no edge was ever found. It is timed by
    the link's steady clock; the edge keeps its stamp, ROS time's."""
    robot, core, output = rig
    output.clock_ns = lambda: 0
    output.robot_time = lambda: False
    edge = robot.sim.model.world.table_half_size_mm
    robot.sim.teleport(robot.net.now, edge - 40.0, 0.0, 0.0)
    robot.run(0.3)
    core.drive(0.04, 0.0)
    robot.run(1.0)
    assert any(s.status.cliff_detected for s in output.states)
    assert output.cliff_edges == [(0, True)]
    core.drive(-0.04, 0.0)
    robot.run(0.4)
    assert output.cliff_edges == [(0, True), (0, False)]


def test_the_imu_roll_and_pitch_are_not_claimed_known_where_they_are_assumed(rig):
    """imu/data's roll is assumed 0: its variance said 0.1 rad while the robot lay on its
    side (roll 90 deg), and pitch's 0.02 rad while the head calibrates (pitch reported 0)."""
    robot, core, output = rig
    level = output.states[-1].imu
    assert (level.roll_var, level.pitch_var) == (0.1 ** 2, 0.02 ** 2)
    robot.sim.lay(robot.net.now, "right")
    robot.run(1.0)
    lying = output.states[-1]
    assert lying.status.orientation == Orientation.ON_RIGHT_SIDE
    assert lying.imu.roll_var == pytest.approx((math.pi / 2) ** 2)
    assert lying.imu.pitch_var == 0.02 ** 2
    robot.sim.put_down(robot.net.now)
    robot.run(1.0)
    assert output.states[-1].imu.roll_var == 0.1 ** 2
    robot.sim.model.body.calibrate(robot.net.now, head=True, lift=False)
    robot.run(0.2)
    assert core.orientation.held
    assert output.states[-1].imu.pitch_var == pytest.approx((math.pi / 2) ** 2)
    robot.run(2.0)
    assert not core.orientation.held and output.states[-1].imu.pitch_var == 0.02 ** 2


def test_the_imu_pitch_rate_and_x_z_acceleration_are_not_claimed_known_while_the_head_moves(rig):
    """The IMU is in the head: a head move reads as the body's pitch rate (and its motion
    off the pivot as acceleration along x and z), which imu/data published with the gyro's
    (0.01 rad/s)^2 while the robot stood still. While the head moves those variances are
    1e6; once it stands still again, the sensors' own. (The simulated gyro leaves the
    head's motion out: only the variances can be checked here.)"""
    robot, core, output = rig
    robot.run(0.5)
    still = output.states[-1].imu
    assert (still.wy_var, still.ax_var, still.az_var) == (0.01 ** 2, 0.1 ** 2, 0.1 ** 2)
    n = len(output.states)
    core.set_head(0.4)
    robot.run(1.5)
    moving = [s for s in output.states[n:] if not s.status.head_in_pos]
    assert len(moving) >= 3
    assert all((s.imu.wy_var, s.imu.ax_var, s.imu.az_var) == (1e6, 1e6, 1e6) for s in moving)
    last = output.states[-1]
    assert last.joints.head_rad == pytest.approx(0.4, abs=0.02)
    assert (last.imu.wy_var, last.imu.ax_var, last.imu.az_var) == (0.01 ** 2, 0.1 ** 2, 0.1 ** 2)


def test_a_robot_on_its_back_is_reported_and_driving_it_says_why_nothing_moves(rig):
    """Laid on its back, the robot's pitch becomes an ON_BACK event after the hold time,
    the status's orientation, a WARN robot diagnostic and, for a moving cmd_vel, a warning
    instead of the cliff's; stood up again, ON_TREADS."""
    robot, core, output = rig
    robot.sim.lay(robot.net.now, "back")
    robot.run(0.7)   # past the cliff edge's hold (0.5 s), within the back's (1 s)
    assert not [e for e in output.events if e.type == EventType.ON_BACK]  # still holding
    # meanwhile it reports itself picked up and its cliff sensor sees no floor: in the air,
    # not on its treads over an edge (a false edge stayed in Nav2's costmap)
    assert output.states[-1].status.cliff_detected
    assert output.states[-1].status.orientation == Orientation.IN_AIR
    assert not output.cliff_edges and EventType.CLIFF_DETECTED not in [e.type for e in output.events]
    robot.run(0.6)
    assert [e.description for e in output.events if e.type == EventType.ON_BACK] == ["on its back"]
    assert output.states[-1].status.orientation == Orientation.ON_BACK
    robot_diag = core.reports("127.0.0.1:5551")[1]
    assert robot_diag.message == "the robot lies on its back: it cannot drive until it is set upright"
    core.drive(0.05, 0.0)
    robot.run(0.1)
    # it reports itself picked up meanwhile, so the treads are held too (stop_when_picked_up)
    assert output.said("cmd_vel holds still: the robot lies on its back, which it reports as "
                       "being picked up, and the driver keeps its treads stopped until it stands "
                       "on them again (stop_when_picked_up)", logging.WARNING), output.lines
    assert robot.sent("DriveWheels")[-1][1].lwheel_speed_mmps == 0.0
    core.params["stop_when_picked_up"] = False
    core.drive(0.05, 0.0)
    robot.run(0.1)
    assert output.said("cmd_vel drives the treads, but the robot lies on its back: they touch "
                       "nothing. Set it upright on its treads", logging.WARNING), output.lines
    core.params["stop_when_picked_up"] = True
    assert not output.said("cliff sensor sees no floor ahead")
    core.drive(0.0, 0.0)
    # a head calibration resets the robot's pitch to 0 meanwhile, and its pick-up detection
    # (IS_PICKED_UP reads 0): not read as standing up, nor as put down
    robot.sim.model.body.calibrate(robot.net.now, head=True, lift=False)
    robot.run(1.5)
    assert EventType.HEAD_CALIBRATION_ENDED in [e.type for e in output.events]
    assert EventType.ON_TREADS not in [e.type for e in output.events]
    assert EventType.PUT_DOWN not in [e.type for e in output.events]
    assert output.states[-1].status.orientation == Orientation.ON_BACK
    robot.sim.put_down(robot.net.now)
    robot.run(0.4)   # put down: 0.205 s calm
    assert [e.type for e in output.events][-2:] == [EventType.PUT_DOWN, EventType.ON_TREADS]
    assert output.states[-1].status.orientation == Orientation.ON_TREADS
    assert core.reports("127.0.0.1:5551")[1].message == "ok"


_FALSE_AT_RECONNECT = {EventType.PUT_DOWN, EventType.PICKED_UP, EventType.ON_TREADS, EventType.ON_BACK,
                       EventType.CLIFF_DETECTED, EventType.CLIFF_CLEARED}


@pytest.mark.parametrize("pose", ["in the hand", "on its back"])
def test_a_reconnection_keeps_what_it_knew_while_the_head_calibrates(pose):
    """The robot calibrates its head at each connection, from SyncTime, before its first
    state, and meanwhile reports pitch 0 and a held robot as not picked up. The driver
    released its hold at each connection's first state: a robot held in the hand or lying
    on its back when the link came back read as put down and on its treads, its cliff
    sensor (no floor) as an edge (CLIFF_DETECTED and cliff/points, which a costmap keeps),
    then picked up, cliff cleared, on its back again. Now nothing changes, and imu/data's
    pitch is not claimed known meanwhile."""
    from cozmo_driver.driver.sensors import StatusFlag

    robot, core, output = connected()
    if pose == "in the hand":
        robot.sim.pick_up(robot.net.now)
        expected = Orientation.IN_AIR
    else:
        robot.sim.lay(robot.net.now, "back")
        expected = Orientation.ON_BACK
    robot.run(2.0)
    assert output.states[-1].status.orientation == expected
    output.events.clear()
    output.cliff_edges.clear()
    n = len(output.states)
    robot.link.session.disconnect(robot.net.now)
    robot.run(4.0)
    types = [e.type for e in output.events]
    assert EventType.HEAD_CALIBRATION_ENDED in types, types
    assert not _FALSE_AT_RECONNECT & set(types), [e.description for e in output.events]
    assert output.cliff_edges == []
    after = output.states[n:]
    assert all(s.status.orientation == expected for s in after)
    # the states whose readings the calibration reset (pitch 0, or not picked up)
    reset = [s for s in after if (s._parts.state.pose_pitch_rad == 0.0 if pose == "on its back"
                                  else not s._parts.flags & StatusFlag.IS_PICKED_UP)]
    assert len(reset) >= 10 and all(s.status.cliff_detected for s in reset)
    assert all(s.imu.pitch_var == pytest.approx((math.pi / 2) ** 2) for s in reset)
    assert after[-1].imu.pitch_var == 0.02 ** 2                # known again afterwards


def test_after_a_reconnections_calibration_a_robot_on_its_treads_gets_its_events(rig):
    """The hold ends with the calibration: picked up, put down and an edge of the floor
    are reported as before."""
    robot, core, output = rig
    robot.link.session.disconnect(robot.net.now)
    robot.run(4.0)
    types = [e.type for e in output.events]
    assert types.count(EventType.HEAD_CALIBRATION_ENDED) == 2 and not core.orientation.held
    output.events.clear()
    robot.sim.pick_up(robot.net.now)
    robot.run(1.0)
    robot.sim.put_down(robot.net.now)
    robot.run(1.0)
    assert [e.type for e in output.events] == [EventType.PICKED_UP, EventType.PUT_DOWN]
    robot.sim.teleport(robot.net.now, robot.sim.model.world.table_half_size_mm - 40.0, 0.0, 0.0)
    robot.run(0.3)
    core.drive(0.04, 0.0)
    robot.run(1.0)
    core.drive(0.0, 0.0)
    assert [e for _, e in output.cliff_edges] == [True]
    assert [e.type for e in output.events][-1] == EventType.CLIFF_DETECTED


def test_the_first_connections_calibration_is_honoured_and_its_first_state_is_the_baseline():
    """At the first connection too the head calibrates from before the first state: a robot
    lying on its back then (pitch read 0, its cliff sensor seeing no floor) gave a cliff edge
    meanwhile. The first state still sets the orientation's baseline (UNKNOWN only before
    it, as RobotStatus says), and where the robot lies comes once the calibration ended."""
    robot = MemoryRobot()
    output = RecordingOutput(clock_ns=lambda: int(robot.net.now * 1e9) + 1_700_000_000 * 10**9)
    core = DriverCore(robot, dict(PARAMS, robot_ip="127.0.0.1", robot_port=5551), output)
    robot.sim.lay(robot.net.now, "back")
    robot.start(core.on_robot_event)
    core.activate()
    robot.run(4.0)
    assert output.states and all(s.status.orientation != Orientation.UNKNOWN for s in output.states)
    reset = [s for s in output.states if s._parts.state.pose_pitch_rad == 0.0]
    assert len(reset) >= 10 and all(s.status.cliff_detected for s in reset)
    assert all(s.imu.pitch_var == pytest.approx((math.pi / 2) ** 2) for s in reset)
    types = [e.type for e in output.events]
    assert EventType.CLIFF_DETECTED not in types and output.cliff_edges == [], types
    assert types.count(EventType.ON_BACK) == 1 and output.states[-1].status.orientation == Orientation.ON_BACK


def test_the_head_and_lift_angles_are_held_while_they_calibrate():
    """Anki's firmware counts the head and lift angles from 0 at power-up, wherever they
    are, until their first calibration ends at the low stop (-25 deg, the lift's lowest);
    Anki's engine takes no head angle while the head calibrates. The driver published the
    robot's: joint_states showed the head and the arm level for the first second of a
    connection, then jumped down, and the IMU was turned into the body's axes by that head
    angle. Now each holds its last calibrated angle (the low stop before any) until its
    calibration ends: the head in joint_states, the IMU and the gyro's yaw rate, the lift
    in joint_states."""
    robot = MemoryRobot()
    output = RecordingOutput(clock_ns=lambda: int(robot.net.now * 1e9) + 1_700_000_000 * 10**9)
    core = DriverCore(robot, dict(PARAMS, robot_ip="127.0.0.1", robot_port=5551), output)
    robot.start(core.on_robot_event)
    core.activate()
    robot.run(3.0)

    first = [(s, s._parts.state.head_angle_rad) for s in output.states]
    uncalibrated = [s for s, raw in first if raw == pytest.approx(0.0, abs=1e-6)]
    assert len(uncalibrated) >= 10, "the simulated robot reports 0 until its head is calibrated"
    for s in uncalibrated:
        assert s.joints.head_rad == pytest.approx(geo.HEAD_MIN_ANGLE_RAD)
        assert s.joints.lift_rad == pytest.approx(geo.LIFT_MIN_ANGLE_RAD)
        assert s.imu.az_mps2 == pytest.approx(9.81, abs=0.3)     # gravity, in the body's axes
        assert abs(s.imu.ax_mps2) < 0.3
    last = output.states[-1]
    assert last._parts.state.head_angle_rad == pytest.approx(geo.HEAD_MIN_ANGLE_RAD, abs=1e-6)
    assert last.joints.head_rad == pytest.approx(geo.HEAD_MIN_ANGLE_RAD, abs=1e-6)
    assert last._parts.state.lift_height_mm == pytest.approx(geo.LIFT_MIN_ANGLE_RAD, abs=1e-6)
    assert last.joints.lift_rad == pytest.approx(geo.LIFT_MIN_ANGLE_RAD, abs=1e-6)

    # a calibration later: the angles before it hold until it ends
    core.set_head(0.3, 0.0)
    core.set_lift(0.07)
    robot.run(2.0)
    lift_rad = geo.lift_height_to_angle(0.07)
    assert output.states[-1].joints.head_rad == pytest.approx(0.3, abs=2e-3)
    assert output.states[-1].joints.lift_rad == pytest.approx(lift_rad, abs=5e-3)
    output.states.clear()
    assert core.calibrate_motors()[0]
    robot.run(0.4)
    moving = [s for s in output.states if s._parts.state.head_angle_rad < 0.25
              and s._parts.state.lift_height_mm < lift_rad - 0.05]
    assert moving, "the head and the lift drive down to their low stops"
    assert all(s.joints.head_rad == pytest.approx(0.3, abs=2e-3) for s in output.states)
    assert all(s.joints.lift_rad == pytest.approx(lift_rad, abs=5e-3) for s in output.states)
    robot.run(2.5)
    assert output.states[-1].joints.head_rad == pytest.approx(geo.HEAD_MIN_ANGLE_RAD, abs=1e-6)
    assert output.states[-1].joints.lift_rad == pytest.approx(geo.LIFT_MIN_ANGLE_RAD, abs=1e-6)


def test_samples_are_stamped_with_the_robots_own_times_through_the_delays_jitter():
    """Half the robot's datagrams come up to 25 ms late: stamped as they arrived, odometry's
    spacing jittered by as much (and the camera's frames by the time to send their chunks).
    Stamped with the robot's own times, mapped to this clock by the least delay seen, the
    states keep the robot's 30 ms and the frames its capture times."""
    robot = MemoryRobot(down=Impairment(reorder=0.5, reorder_delay=0.025))
    output = RecordingOutput(clock_ns=lambda: int(robot.net.now * 1e9) + 1_700_000_000 * 10**9)
    core = DriverCore(robot, dict(PARAMS, robot_ip="127.0.0.1", robot_port=5551), output)
    robot.start(core.on_robot_event)
    core.activate()
    core.set_camera_wanted(True)
    robot.run(3.0)
    output.states.clear()
    output.images.clear()
    robot.run(3.0)
    stamps = [s.odom.stamp_ns for s in output.states]
    robot_ms = [s._parts.state.timestamp_ms for s in output.states]   # (the message)
    assert len(stamps) > 60
    steps = [b - a - (tb - ta) * 10**6 for a, b, ta, tb in zip(stamps, stamps[1:], robot_ms, robot_ms[1:])]
    assert max(abs(x) for x in steps) <= 1000          # the robot's spacing, to a microsecond
    now = output.stamp_ns()
    assert all(stamp <= now for stamp in stamps)      # never ahead of this computer's clock
    assert output.images and all(f.stamp_ns < now for f in output.images)
    assert core.robot_clock.frames_from_arrival == 0


def test_no_command_is_taken_before_the_connections_stop_and_none_is_lost_silently():
    """The link turns ready, then the robot is brought up (RobotReady), whose first command
    is StopAllMotors. A lift command taken in between was held for the motor calibration
    and then dropped by that stop, without a word (seen by an audit in 3 of 12 tries). Now
    the driver is ready, and says so (link sample), only once the stop is out: a command
    before is refused with the reason."""
    from cozmo_driver.client import LinkStateChanged

    robot = MemoryRobot()
    output = RecordingOutput(clock_ns=lambda: int(robot.net.now * 1e9) + 1_700_000_000 * 10**9)
    core = DriverCore(robot, dict(PARAMS, robot_ip="127.0.0.1", robot_port=5551), output)
    posted: list = []
    post = robot.post
    robot.post = lambda message: (posted.append(message.NAME), post(message))
    ready_seen: list = []
    on_link = output.on_link
    output.on_link = lambda sample: (ready_seen.append(list(posted)) if sample.state is LinkState.READY
                                     else None, on_link(sample))

    def listener(event) -> None:
        core.on_robot_event(event)
        if isinstance(event, LinkStateChanged) and event.state is LinkState.READY:
            core.set_lift(0.07)            # as soon as the link is up, before RobotReady
    robot.start(listener)
    core.activate()
    robot.run(3.0)
    assert core.connected and ready_seen and "StopAllMotors" in ready_seen[0]
    assert output.said("lift/height refused: not connected to the robot", logging.WARNING)
    core.set_lift(0.07)
    robot.run(2.0)                         # held for the calibration, then sent
    assert [m.height_mm for _, m in robot.sent("SetLiftHeight")] == [pytest.approx(70.0)]


def test_inactive_core_publishes_nothing_refuses_commands_and_stops_the_robot(rig):
    robot, core, output = rig
    stops = len(robot.sent("StopAllMotors"))  # one came with the connection
    core.deactivate()
    core.stop_all_motors()
    output.states.clear()
    images = len(output.images)
    core.drive(0.05, 0.0)
    robot.run(0.5)
    assert output.states == [] and len(output.images) == images
    assert output.said("cmd_vel refused: the driver is not active")
    assert len(robot.sent("StopAllMotors")) > stops and not robot.sent("DriveWheels")


class StampedOutput(RecordingOutput):
    """Keeps each event with its stamp: (stamp_ns, type, description)."""

    def on_events(self, stamp_ns, events) -> None:
        self.events.extend((stamp_ns, e.type, e.description) for e in events)


def test_events_that_come_before_the_activation_are_published_at_it_in_order_with_their_stamps():
    """The link opens before the core is activated (the node activates it right after, on its
    own thread; start(): half-way through configure), and on a loaded machine the robot
    connected and started calibrating in between: those events were neither published nor
    logged (a CI run lost "head calibration started"). They are held (core.held_events) and go
    out at the activation, in the order they came, stamped when they came."""
    robot = MemoryRobot()
    output = StampedOutput(clock_ns=lambda: int(robot.net.now * 1e9) + 1_700_000_000 * 10**9)
    core = DriverCore(robot, dict(PARAMS, robot_ip="127.0.0.1", robot_port=5551), output)
    robot.start(core.on_robot_event)
    robot.run(1.0)  # connected, head and lift calibrated: the core not active yet
    robot.sim.poke(robot.net.now)
    robot.run(0.2)
    assert core.connected and output.events == [] and not output.said("robot event")
    activated_ns = output.stamp_ns()
    core.activate()
    held = [(t, d) for _, t, d in output.events]
    assert held == [(EventType.HEAD_CALIBRATION_STARTED, "head calibration started"),
                    (EventType.LIFT_CALIBRATION_STARTED, "lift calibration started"),
                    (EventType.HEAD_CALIBRATION_ENDED, "head calibrated"),
                    (EventType.LIFT_CALIBRATION_ENDED, "lift calibrated"),
                    (EventType.POKED, "poked")], held
    stamps = [stamp for stamp, _, _ in output.events]
    assert stamps == sorted(stamps) and stamps[-1] < activated_ns  # when they came, not now
    robot.sim.poke(robot.net.now)
    robot.run(0.2)
    assert [t for _, t, _ in output.events[5:]] == [EventType.POKED]  # and from then on as they come


def test_at_most_the_last_64_events_are_held_for_the_activation_and_the_drop_is_said_once():
    robot = MemoryRobot()
    output = StampedOutput(clock_ns=lambda: int(robot.net.now * 1e9) + 1_700_000_000 * 10**9)
    core = DriverCore(robot, dict(PARAMS, robot_ip="127.0.0.1", robot_port=5551), output)
    robot.start(core.on_robot_event)
    robot.run(1.0)  # 4 calibration events
    for _ in range(66):
        robot.sim.poke(robot.net.now)
        robot.run(0.05)
    core.activate()
    assert [t for _, t, _ in output.events] == [EventType.POKED] * 64
    dropped = [line for level, line in output.lines if "dropped" in line]
    assert dropped == ["6 robot events that came before the driver was active were dropped: only the "
                       "last 64 are published"] and output.said(dropped[0], logging.WARNING)


def test_events_while_a_user_keeps_the_core_inactive_are_logged_and_never_published(rig):
    """A deactivation is a user's choice: no sample goes out while inactive, and the events
    meanwhile are not published at the next activation either (they would report as news what
    may no longer be true); each is logged as it comes, saying so. A cleanup's likewise: the
    next robot client's are held again (attach)."""
    robot, core, output = rig
    core.deactivate()
    output.events.clear()
    robot.sim.poke(robot.net.now)
    robot.run(0.2)
    assert output.events == []
    assert output.said("robot event: poked (not published: the driver is inactive)", logging.INFO)
    core.activate()
    robot.run(0.2)
    assert output.events == []
    core.release()
    core.attach(robot)  # (the same one: what matters is a new configure's)
    robot.sim.poke(robot.net.now)
    robot.run(0.2)
    core.activate()
    assert [e.type for e in output.events] == [EventType.POKED]


def test_a_robot_connected_again_is_stopped_first(rig):
    """Driving when the link is lost: the watchdog's stop goes into the dead link, so the
    robot may still drive on the last command (or a motion of its own) when it is back.
    The first command of the new connection stops it."""
    robot, core, output = rig
    core.drive(0.05, 0.0)
    robot.run(0.2)
    assert robot.sent("DriveWheels")[-1][1].lwheel_speed_mmps > 0
    robot.link.session.disconnect(robot.net.now)  # the session ends; the link reconnects
    cut = robot.net.now
    robot.run(4.0)
    assert core.connected and output.said("connected again to Cozmo")
    handshake = ("Disconnect", "Enable", "SetOrigin", "SyncTime")  # the link's own
    again = [(t, m.NAME) for t, m in robot.received if t > cut and m.NAME not in handshake]
    # the stop goes with a ClearPath before it (a path the robot follows ignores DriveWheels)
    assert [name for _, name in again[:2]] == ["ClearPath", "StopAllMotors"], again[:5]
    assert not [name for _, name in again if name == "DriveWheels"]


def test_treads_still_driving_after_a_lost_link_are_stopped_by_the_new_connections_stop(rig):
    """The network fails both ways while the robot drives: the watchdog's stop is lost, and
    the robot, having heard nothing for 5 s, ends its link and keeps driving on its last
    DriveWheels (the simulator stopped every motor when a link ended, so a driver that
    forgot its stop at a new connection passed). Back in reach, the driver connects again,
    and its StopAllMotors first of all stops the treads."""
    robot, core, output = rig
    sim = robot.sim
    core.drive(0.05, 0.0)
    robot.run(0.3)
    robot.net.a_to_b = Impairment(loss=1.0)
    robot.net.b_to_a = Impairment(loss=1.0)
    for _ in range(80):
        robot.run(0.1)
        if not sim.is_connected:
            break
    assert not sim.is_connected                              # the robot gave the link up
    x_before = sim.model.true_pose()[0]
    robot.run(0.5)
    assert sim.model.true_pose()[0] > x_before + 20.0       # and still drives at 50 mm/s
    robot.net.a_to_b = Impairment()
    robot.net.b_to_a = Impairment()
    cut = robot.net.now
    robot.run(6.0)
    assert core.connected and output.said("connected again to Cozmo")
    assert [t for t, _ in robot.sent("StopAllMotors") if t > cut]
    assert [w.speed for w in sim.model.body.wheels] == [0.0, 0.0]
    x_stopped = sim.model.true_pose()[0]
    robot.run(1.0)
    assert sim.model.true_pose()[0] == x_stopped


def test_treads_driving_when_only_the_robots_datagrams_are_lost_are_stopped_by_the_farewell(rig):
    """Only the robot's datagrams are lost while cmd_vel keeps coming: the robot still hears
    the driver. The driver declares it lost after peer_timeout (the watchdog cancelled with
    the link, cmd_vel refused from then on), and the robot, like the simulator, keeps the
    last DriveWheels when its link ends; the RESETs that follow keep its next link alive,
    its answers lost. The farewell's StopAllMotors, ahead of its Disconnect, stops the treads."""
    robot, core, output = rig
    sim = robot.sim
    core.drive(0.05, 0.0)
    robot.run(0.3)
    robot.net.b_to_a = Impairment(loss=1.0)
    for _ in range(60):
        core.drive(0.05, 0.0)
        robot.run(0.1)
        if core.link_state is LinkState.LOST:
            break
    assert core.link_state is LinkState.LOST
    robot.run(0.5)
    names = [m.NAME for _, m in robot.received]
    after_drive = names[len(names) - names[::-1].index("DriveWheels"):]
    assert after_drive[:2] == ["ClearPath", "StopAllMotors"], after_drive
    assert [w.speed for w in sim.model.body.wheels] == [0.0, 0.0]
    x_stopped = sim.model.true_pose()[0]
    robot.run(2.0)
    assert sim.model.true_pose()[0] == x_stopped


def test_outputs_are_reapplied_after_a_reconnection(rig):
    robot, core, output = rig
    core.set_head_light(True)
    core.set_volume(0.5)
    robot.run(0.2)
    before = len(robot.sent("SetHeadLight")), len(robot.sent("NvStorageOp"))
    robot.link.session.disconnect(robot.net.now)  # the session ends; the link reconnects
    robot.run(4.0)
    assert core.connected and output.said("connected again to Cozmo")
    assert len(robot.sent("SetHeadLight")) == before[0] + 1
    assert robot.sent("SetRobotVolume")[-1][1].level == core.volume
    assert len(robot.sent("NvStorageOp")) == before[1] + 1


def test_a_held_back_no_answer_is_dropped_once_the_robot_is_back(rig):
    """"does not answer" lines held back by their 10 s were said by the 1 s timer once the
    10 s were over, seconds after "connected again": read as a new outage. The robot's
    return drops them, and the next outage is said at once."""
    robot, core, output = rig
    core.clock = robot.clock  # the throttle on the link's time
    no_answer = lambda: [t for _, t in output.lines if "does not answer" in t]  # noqa: E731
    for _ in range(2):
        robot.net.a_to_b = robot.net.b_to_a = Impairment(loss=1.0)  # the robot falls silent
        for _ in range(120):  # lost, then attempts that go unanswered, one of them held back
            robot.run(0.5)
            if core.throttle.pending("connect"):
                break
        assert core.throttle.pending("connect") and len(no_answer()) >= 1, output.lines
        assert "the simulator was stopped" in no_answer()[0]  # 127.0.0.1 (not Wi-Fi), connected before
        said = len(no_answer())
        robot.net.a_to_b = robot.net.b_to_a = Impairment()
        for _ in range(30):  # it is back
            robot.run(0.5)
            if core.connected:
                break
        assert core.connected and output.said("connected again to Cozmo")
        robot.run(11.0)
        core.say_overdue()
        assert len(no_answer()) == said, no_answer()[said:]


def test_lines_held_back_are_said_before_the_line_that_changes_what_they_describe(rig):
    """cmd_vel refused while the robot is away, or while the driver is inactive: the refusals
    held back came 1-2 s after "connected again" or "activated", as if the driver still
    refused. They are said before that line now (and the watchdog's stop, and a loss)."""
    robot, core, output = rig
    core.clock = robot.clock
    texts = lambda: [t for _, t in output.lines]  # noqa: E731

    def refused_thrice() -> None:
        for _ in range(3):
            core.drive_twist("cmd_vel", (0.05, 0.0, 0.0), (0.0, 0.0, 0.0))
            robot.run(0.1)

    robot.net.a_to_b = robot.net.b_to_a = Impairment(loss=1.0)
    for _ in range(40):
        robot.run(0.5)
        if not core.connected:
            break
    refused_thrice()
    robot.net.a_to_b = robot.net.b_to_a = Impairment()
    for _ in range(30):
        robot.run(0.5)
        if core.connected:
            break
    lines = texts()
    back = max(i for i, t in enumerate(lines) if t.startswith("connected again"))
    held = [i for i, t in enumerate(lines) if "link_status says when it is back) (and 1 more" in t]
    assert held and held[-1] < back, lines[-8:]
    core.deactivate()
    refused_thrice()
    core.activate()
    assert "the driver is not active (activate it: ros2 lifecycle set core-test activate) (and 1 more" \
        in texts()[-1], texts()[-3:]
    count = len(output.lines)
    robot.run(5.0)
    core.say_overdue()
    assert not [t for t in texts()[count:] if "refused" in t], texts()[count:]


def test_a_robot_on_its_back_is_reported_under_ros_time_without_a_clock(rig):
    """Which way up holds a reading (1 s on its back, 0.25 s on a side) before it counts: timed
    by the states' stamps, a robot lying under use_sim_time without /clock (or with it paused,
    every stamp the same) never did. The holds follow the link's steady clock."""
    robot, core, output = rig
    output.clock_ns = lambda: 0
    output.robot_time = lambda: False
    robot.sim.lay(robot.net.now, "back")
    robot.run(1.5)
    assert [e.description for e in output.events if e.type == EventType.ON_BACK] == ["on its back"]
    assert output.states[-1].status.orientation == Orientation.ON_BACK
    robot.sim.lay(robot.net.now, "right")
    robot.run(0.5)
    assert output.states[-1].status.orientation == Orientation.ON_RIGHT_SIDE


def test_the_battery_goes_out_once_a_second_when_the_stamps_jump_back(rig):
    """The battery was paced by the states' stamps: after ROS time switched to a simulated
    clock (use_sim_time, /clock from 1000 s) no stamp was a second past the last battery
    of wall time, and battery_state stopped for good. It is paced by the link's clock."""
    robot, core, output = rig
    robot.run(3.0)
    before = len(output.batteries)
    assert before >= 2
    # ROS time active (the node then stamps with it as states come, not the robot's times)
    output.clock_ns = lambda: int((robot.net.now - 100.0) * 1e9) + 1000 * 10**9
    output.robot_time = lambda: False
    robot.run(3.0)
    assert len(output.batteries) - before >= 2, len(output.batteries) - before
    assert output.batteries[-1].stamp_ns < 1100 * 10**9  # stamped with the clock it was given


def test_outages_shorter_than_peer_timeout_are_said_throttled_with_the_states_return(rig):
    """15 outages of 2 s in 60 s (under peer_timeout, 3 s) left no log line, while odometry
    paused 2 s out of every 4: a Nav2 user saw tf time out from a quiet driver. A robot state
    missing for 1 s while connected is warned of (at most once per 10 s, with the count of
    the others, none said late), and the states' return after a warned gap is said."""
    robot, core, output = rig
    core.clock = robot.clock  # the throttle on the link's time
    start = len(output.lines)
    for _ in range(15):
        robot.net.a_to_b = robot.net.b_to_a = Impairment(loss=1.0)
        robot.run(2.0)
        robot.net.a_to_b = robot.net.b_to_a = Impairment()
        robot.run(2.0)
        core.say_overdue()
    assert core.connected and not [t for _, t in output.lines[start:] if t.startswith("lost the robot")]
    gaps = [(level, t) for level, t in output.lines[start:] if "robot state" in t]
    warned = [t for level, t in gaps if level == logging.WARNING]
    again = [t for level, t in gaps if level == logging.INFO]
    assert 5 <= len(warned) <= 6 and len(again) == len(warned), gaps
    assert warned[0].startswith("no robot state for 1.0 s: odometry, tf and the robot's topics pause"), warned[0]
    assert "peer_timeout" in warned[0] and "(and 2 more like it in the last 1" in warned[1], warned
    assert all(text.startswith("robot state again after 2.") for text in again), again
    assert [level for level, _ in gaps] == [logging.WARNING, logging.INFO] * len(warned), gaps


def test_a_low_battery_is_warned_of_once_a_crossing_and_named_as_the_likely_cause_of_a_loss(rig):
    """A low or empty battery was never logged (only /diagnostics said it), and a robot that
    switched itself off on it (after a minute below 3.45 V) was reported lost with "Is the
    robot switched on, and this computer on its Wi-Fi?". One warning when the voltage drops
    below 3.50 V, again only once it recovered; a loss at a low voltage says so."""
    robot, core, output = rig
    body = robot.sim.model.body

    def low_lines():
        return [text for level, text in output.lines if level == logging.WARNING and "battery low" in text]

    body.soc = 0.055           # 3.483 V (noise 1 mV: said 3.48 V, cut to hundredths)
    robot.run(3.0)
    assert len(low_lines()) == 1, output.lines
    assert "3.48 V" in low_lines()[0] and "charger" in low_lines()[0], low_lines()
    core.drive(0.05, 0.0)      # driving sags it further: no second line
    robot.run(2.0)
    body.soc = 0.3             # charged a while: recovered
    robot.run(2.0)
    assert len(low_lines()) == 1, low_lines()
    body.soc = 0.0             # 3.45 V: low again
    robot.run(2.0)
    assert len(low_lines()) == 2, low_lines()
    robot.sim.set_silent(True, robot.net.now)  # it switched itself off
    robot.run(6.0)
    lost = [text for level, text in output.lines if level == logging.WARNING and text.startswith("lost the robot")]
    assert lost and "battery was low (3.4" in lost[-1], lost
    assert "Wi-Fi" not in lost[-1], lost[-1]
    # /diagnostics says the same, then that the driver reconnects: two sentences
    hint = dict(core.reports(f"{core.params['robot_ip']}:{core.params['robot_port']}")[0].values)["what to check"]
    assert hint.endswith("put it on its charger. The driver reconnects by itself once it answers."), hint


def test_the_robot_report_of_a_lost_robot_holds_no_value_of_its_last_states(rig):
    """Lost, the robot's diagnostics said its battery and orientation were not known, but kept
    the tread vs gyro yaw-rate difference of its last states, which no longer updated: n/a
    too while it is not connected, and measured again once it is back."""
    robot, core, output = rig
    key = "tread vs gyro yaw rate, mean |difference| (rad/s)"

    def robot_values():
        return dict(core.reports(f"{core.params['robot_ip']}:{core.params['robot_port']}")[1].values)

    robot.run(0.5)
    assert robot_values()[key] != "n/a", robot_values()
    robot.sim.set_silent(True, robot.net.now)
    robot.run(6.0)
    assert not core.connected
    values = robot_values()
    assert (values[key], values["battery voltage (V)"], values["orientation"]) == ("n/a", "n/a", "unknown"), values
    robot.sim.set_silent(False, robot.net.now)
    robot.run(6.0)
    assert core.connected and robot_values()[key] != "n/a", robot_values()


def test_a_low_battery_on_the_charger_is_no_warning_and_no_cause_of_a_loss(rig):
    """The battery warning and the loss line ignored the charger: a robot charging there
    below 3.50 V (cozmo-sim --battery 0 --on-charger) was told "battery low ... put the
    robot on its charger", and lost there blamed on its battery. While its last state says
    on the charger (or charging) neither is said; taken off still low, it is warned of."""
    robot, core, output = rig
    body = robot.sim.model.body

    def warnings(start):
        return [text for level, text in output.lines[start:] if level == logging.WARNING]

    robot.sim.set_on_charger(True, robot.net.now)
    robot.run(0.5)
    body.soc = 0.0             # 3.45 V, charging
    robot.run(3.0)
    assert core.battery_v is not None and core.battery_v < 3.5, core.battery_v
    assert not [t for t in warnings(0) if "battery low" in t], warnings(0)
    robot.sim.set_on_charger(False, robot.net.now)   # taken off, still low: warned of
    robot.run(2.0)
    low = [t for t in warnings(0) if "battery low" in t]
    assert len(low) == 1 and "charger" in low[0], low
    robot.sim.set_on_charger(True, robot.net.now)    # back on it, and lost there
    robot.run(2.0)
    start = len(output.lines)
    robot.sim.set_silent(True, robot.net.now)
    robot.run(6.0)
    lost = [t for t in warnings(start) if t.startswith("lost the robot")]
    assert lost and "battery" not in lost[-1], lost
    assert "Is the simulator still running" in lost[-1], lost[-1]  # (127.0.0.1)


def test_a_robot_that_never_answered_is_connecting_not_lost():
    """LinkStatus.LOST is "the robot stopped answering after having been connected"; a
    driver started with no robot there said LOST (and /diagnostics ERROR "lost") between
    its attempts. It says CONNECTING until the robot first answers; then a loss is LOST."""
    robot = MemoryRobot()
    robot.net.a_to_b = robot.net.b_to_a = Impairment(loss=1.0)
    output = RecordingOutput()
    core = DriverCore(robot, dict(PARAMS, robot_ip="127.0.0.1", robot_port=5551), output)
    robot.start(core.on_robot_event)
    core.activate()
    robot.run(12.0)
    states = {sample.state for sample in output.links}
    assert LinkState.LOST not in states and LinkState.CONNECTING in states, states
    link, _ = core.reports("127.0.0.1:5551")
    assert "lost" not in link.message and "connecting to" in link.message, link.message
    # what to check, as the log's attempts say it (the simulator's: a loopback robot_ip)
    assert dict(link.values)["what to check"].startswith("Is the simulator running on that port"), link.values
    robot.net.a_to_b = robot.net.b_to_a = Impairment()
    for _ in range(30):
        robot.run(0.5)
        if core.connected:
            break
    assert core.connected
    assert math.isfinite(core.link_sample().rtt_s)
    count = len(output.links)
    robot.net.a_to_b = robot.net.b_to_a = Impairment(loss=1.0)
    robot.run(5.0)
    assert LinkState.LOST in {sample.state for sample in output.links[count:]}
    # no round trip is measured without a robot: link_status said the last one, live-looking
    gone = [sample for sample in output.links[count:] if sample.state is not LinkState.READY]
    assert gone and all(math.isnan(sample.rtt_s) for sample in gone), [(s.state, s.rtt_s) for s in gone]
    values = dict(core.reports("127.0.0.1:5551")[0].values)
    assert values["rtt (s)"] == values["smoothed rtt (s)"] == "n/a", values
    assert values["what to check"] == ("Is the simulator still running (it was stopped, or its process "
                                       "ended)? The driver reconnects by itself once it answers."), values
    robot.net.a_to_b = robot.net.b_to_a = Impairment()
    for _ in range(30):
        robot.run(0.5)
        if core.connected:
            break
    link, _ = core.reports("127.0.0.1:5551")
    assert core.connected and "what to check" not in dict(link.values), link.values


def test_a_lost_robot_is_lost_until_it_is_ready_again_through_the_reconnection_attempts(rig):
    """After a loss each reconnection attempt took the link to CONNECTING, and link_status
    and /diagnostics followed it: in a 40 s loss LOST 0.5 s, CONNECTING 5 s, LOST 1 s, ...,
    /diagnostics flipping between ERROR and WARN. LOST ("the robot stopped answering after
    having been connected") holds from the loss until the robot is ready again, ERROR with it."""
    robot, core, output = rig
    robot.sim.set_silent(True, robot.net.now)
    robot.run(4.0)
    assert core.link_state is not LinkState.READY
    count = len(output.links)
    seen = set()
    for _ in range(360):
        robot.run(0.1)
        seen.add(robot.link.state)
        assert core.link_sample().state is LinkState.LOST, robot.link.state
        link, _ = core.reports("127.0.0.1:5551")
        assert link.level == ERROR and "lost" in link.message, link.message
    assert {LinkState.CONNECTING, LinkState.LOST} <= seen  # the attempts went on meanwhile
    assert {sample.state for sample in output.links[count:]} == {LinkState.LOST}
    robot.sim.set_silent(False, robot.net.now)
    for _ in range(40):
        robot.run(0.5)
        if core.connected:
            break
    assert core.connected and core.link_sample().state is LinkState.READY
    assert output.links[-1].state is LinkState.READY


def test_after_a_cleanup_a_robot_that_never_answered_is_connecting_not_lost(rig):
    """ever_ready outlived the cleanup: after a configure with no robot there (another
    robot_ip, the robot switched off) the driver said LOST, and /diagnostics ERROR "lost",
    of a robot it had not been connected to since."""
    robot, core, output = rig
    count = len(output.links)
    robot = _configure_again(core, loss=1.0)
    robot.run(12.0)
    states = {sample.state for sample in output.links[count:]}
    assert LinkState.LOST not in states and LinkState.CONNECTING in states, states
    link, _ = core.reports("127.0.0.1:5551")
    assert "lost" not in link.message and "connecting to" in link.message, link.message


def test_a_robot_that_answered_but_never_streamed_is_not_said_to_not_answer():
    """The robot took the handshake but sent no robot state: the driver said "the robot
    ... does not answer" with the hint to switch it on, of a robot that had answered."""
    robot, core, output = connected()
    core.link_state = LinkState.INITIALIZING  # a new connection's handshake was answered
    core.on_robot_event(LinkStateChanged(LinkState.LOST, "the robot did not become ready within "
                                                         "5.0 s; reconnecting in 0.5 s"))
    said = [text for level, text in output.lines if level == logging.WARNING]
    assert said and "answered, but sent no robot state" in said[-1], said
    assert "does not answer" not in said[-1]


def test_a_no_answer_said_late_has_no_stale_retry_time_and_a_silent_stream_is_its_own_kind():
    """"does not answer" lines held back by their 10 s were said up to 10 s later with the
    attempt's "reconnecting in 1.0 s", long past; and a robot that answered but sent no robot
    state, right after one that did not answer, was held back behind it (one kind for both).
    A line said late leaves the retry time out; the two problems are kinds of their own."""
    robot, core, output = connected()
    clock = [100.0]
    core.clock = lambda: clock[0]

    def attempt(previous, reason):
        core.link_state = previous
        core.on_robot_event(LinkStateChanged(LinkState.LOST, reason))
        clock[0] += 1.0
    warnings = lambda: [t for level, t in output.lines if level == logging.WARNING]  # noqa: E731
    start = len(warnings())
    attempt(LinkState.CONNECTING, "the robot did not answer within 5.0 s; reconnecting in 1.0 s")
    attempt(LinkState.CONNECTING, "the robot did not answer within 5.0 s; reconnecting in 2.0 s")
    attempt(LinkState.INITIALIZING, "the robot did not become ready within 5.0 s; reconnecting in 4.0 s")
    said = warnings()[start:]
    assert len(said) == 2 and "does not answer" in said[0] and "reconnecting in 1.0 s" in said[0], said
    assert "answered, but sent no robot state" in said[1], said
    clock[0] += 10.0
    core.say_overdue()
    late = warnings()[start + 2:]
    assert len(late) == 1 and "does not answer (the robot did not answer within 5.0 s)" in late[0], late
    assert "reconnecting in" not in late[0], late[0]


def test_a_robot_ip_naming_this_computer_gets_the_simulators_hint():
    """robot_ip:=localhost was told the real robot's hint (its Wi-Fi, the Cozmo app): the
    name was looked at, not the address it resolves to, which the UDP transport holds once
    started (its remote_addr); a robot elsewhere keeps the Wi-Fi hint."""
    for name, address, hint in (("localhost", "127.0.0.1", "Is the simulator running on that port"),
                                ("cozmo.lan", "172.31.1.1", "this computer on its Wi-Fi")):
        robot, core, output = connected(robot_ip=name)
        robot.transport.remote_addr = (address, 5551)  # as UdpTransport.start resolved it
        core.link_state = LinkState.CONNECTING          # an attempt went unanswered
        core.on_robot_event(LinkStateChanged(LinkState.LOST, "no answer within 3.0 s"))
        said = [text for level, text in output.lines if level == logging.WARNING]
        assert said and f"the robot at {name}:5551 does not answer" in said[-1], said
        assert hint in said[-1], said[-1]


def test_stop_on_cliff_off_is_sent_again_on_every_connection():
    """Anki's firmware turns stop-on-cliff back on when its link ends (the simulator since):
    stop_on_cliff false holds only if the driver says it again after a reconnection."""
    robot, core, output = connected(stop_on_cliff=False)
    assert robot.sim.model.stop_on_cliff is False
    robot.link.session.disconnect(robot.net.now)  # the session ends; the link reconnects
    robot.run(0.05)
    assert robot.sim.model.stop_on_cliff is True   # the robot's own default again
    robot.run(4.0)
    assert core.connected and output.said("connected again to Cozmo")
    assert robot.sim.model.stop_on_cliff is False


def test_the_camera_streams_while_a_camera_topic_has_a_subscriber(rig):
    """camera_on_demand (the default): the camera is off while nothing subscribes to a
    camera topic, switched on when something does and off again when nothing does;
    camera_on_demand false: on whenever camera_enabled."""
    robot, core, output = rig

    def modes():
        return [m.image_send_mode for _, m in robot.sent("EnableCamera")]
    assert modes() == [_ImageSendMode.Off] and not core.camera_streaming()
    robot.run(1.0)
    assert output.images == []
    assert "off until a camera topic has a subscriber" in core.camera_status()
    core.set_camera_wanted(True)
    robot.run(1.0)
    assert modes()[-1] == _ImageSendMode.Stream
    assert len(output.images) >= 10
    assert core.camera_status().startswith("streaming")
    core.set_camera_wanted(True)  # no change: nothing sent
    core.set_camera_wanted(False)
    robot.run(0.3)
    assert modes()[1:] == [_ImageSendMode.Stream, _ImageSendMode.Off]
    count = len(output.images)
    robot.run(0.5)
    assert len(output.images) == count
    old = dict(core.params)
    core.params["camera_on_demand"] = False
    core.apply_params(old)
    robot.run(0.5)
    assert modes()[-1] == _ImageSendMode.Stream and core.camera_streaming()
    assert len(output.images) > count
    core.params["camera_enabled"] = False
    assert core.camera_status() == "off (camera_enabled is false)"


def test_the_camera_is_said_to_be_off_while_the_robot_is_not_connected():
    """The link's diagnostics said "streaming" (with a camera topic subscribed) while the robot
    was lost or had never connected, and "exposure 30 ms (fixed)" before the first connection
    with the automatic exposure on: the robot streams nothing then."""
    robot = MemoryRobot()
    output = RecordingOutput(clock_ns=lambda: int(robot.net.now * 1e9) + 1_700_000_000 * 10**9)
    core = DriverCore(robot, dict(PARAMS, robot_ip="127.0.0.1", robot_port=5551), output)
    core.activate()  # the link not started: never connected
    core.set_camera_wanted(True)
    assert not core.connected and core.camera_status() == "off: the robot is not connected"
    robot.start(core.on_robot_event)
    robot.run(2.0)
    assert core.connected and core.camera_status().startswith("streaming (a camera topic has a subscriber); "
                                                              "gain 1.00, exposure 30 ms (automatic")
    core.on_robot_event(LinkStateChanged(LinkState.LOST, "robot silent for 1.0 s"))
    assert not core.connected and core.camera_status() == "off: the robot is not connected"
    core.params["camera_enabled"] = False  # what is said first while it is not connected
    assert core.camera_status() == "off (camera_enabled is false)"


def test_deactivate_switches_the_camera_off_and_activate_on_again(rig):
    """Inactive, the driver publishes no image: the robot streamed on over its Wi-Fi (15
    images a second that nobody got), and the diagnostics said "streaming"."""
    robot, core, output = rig

    def modes():
        return [m.image_send_mode for _, m in robot.sent("EnableCamera")]
    core.set_camera_wanted(True)
    robot.run(0.5)
    assert modes()[-1] == _ImageSendMode.Stream
    core.deactivate()
    robot.run(0.3)
    assert modes()[-1] == _ImageSendMode.Off and not core.camera_streaming()
    completed = core.assembler.stats.completed_images
    robot.run(0.6)
    assert core.assembler.stats.completed_images <= completed + 1  # at most one under way
    assert core.camera_status() == "off while the driver is inactive (lifecycle)"
    robot_diag = core.reports("127.0.0.1:5551")[1]  # not a WARN of a node told to rest
    assert (robot_diag.level, robot_diag.message) == (OK, "inactive (lifecycle)"), robot_diag
    core.activate()
    robot.run(0.5)
    assert modes()[-1] == _ImageSendMode.Stream and core.camera_streaming()
    assert core.assembler.stats.completed_images > completed + 2


@pytest.mark.parametrize("switch", ["subscriber", "camera_enabled"])
def test_a_part_frame_cut_off_by_switching_the_camera_off_is_no_dropped_image(rig, switch):
    """The camera switched off in the middle of a frame (the last subscriber leaving, or
    camera_enabled false) left its first chunks in the assembler, abandoned once the camera
    streamed again and counted in /diagnostics as "camera images dropped incomplete", which
    reads as Wi-Fi loss. It is discarded when the camera streams again, counted apart."""
    robot, core, output = rig

    def switch_camera(on: bool) -> None:
        if switch == "subscriber":
            core.set_camera_wanted(on)
        else:
            old = dict(core.params)
            core.params["camera_enabled"] = on
            core.apply_params(old)
    core.set_camera_wanted(True)
    switch_camera(True)
    robot.run(0.5)
    assert core.assembler.stats.completed_images >= 5
    cut: dict = {}

    def robot_cut_mid_frame(event) -> None:
        """The robot's stream as it is switched off mid-frame: the frame's first chunk
        arrives, the camera is switched off then, and the rest of that frame never comes."""
        message = getattr(event, "message", None)
        if isinstance(event, MessageReceived) and message.NAME == "ImageChunk":
            if not cut and message.chunk_id == 0:
                assert message.image_chunk_count == 0  # more chunks to come (told in the last)
                cut["image_id"] = message.image_id
                core.on_robot_event(event)
                switch_camera(False)
                return
            if message.image_id == cut.get("image_id"):
                return
        core.on_robot_event(event)
    robot.net.on_event_a = robot_cut_mid_frame
    robot.run(0.5)
    assert cut and not core.camera_streaming()
    assert core.assembler.pending == 1
    switch_camera(True)
    robot.run(1.0)
    stats = core.assembler.stats
    assert core.camera_streaming() and stats.completed_images >= 15
    values = dict(core.reports("test")[0].values)
    assert values["camera images dropped incomplete"] == "0", values
    assert stats.dropped_images == 0 and stats.discarded_images == 1
    assert values["camera images cut off by switching the camera off"] == "1", values


def test_camera_frames_convert_on_demand(rig):
    robot, core, output = rig
    core.set_camera_wanted(True)  # a subscriber: the camera streams
    robot.run(1.0)
    assert len(output.images) >= 10  # 15 a second
    frame = output.images[-1]
    jpeg = frame.jpeg()
    assert jpeg[:2] == b"\xff\xd8"
    data, width, height, channels = frame.pixels()
    assert (width, height) == (frame.width, frame.height) and len(data) == width * height * channels
    core.params["camera_enabled"] = False
    count = len(output.images)
    robot.run(0.5)
    assert len(output.images) == count


def test_a_camera_chunk_larger_than_qvga_is_refused_and_counted_undecoded(rig):
    """The driver asks the robot for QVGA; a chunk that says 3200 x 2400 is refused (counted
    in the assembler's invalid chunks, which /diagnostics shows) before any decoding."""
    robot, core, output = rig
    core.set_camera_wanted(True)
    robot.run(0.5)
    invalid = core.assembler.stats.invalid_chunks
    robot.sim.session.send(msgs.ImageChunk(image_id=4_000_000_000, frame_timestamp_ms=1, image_encoding=8,
                                           image_resolution=12, image_chunk_count=1, chunk_id=0,
                                           data=b"\xff" * 17))
    robot.run(0.5)
    assert core.assembler.stats.invalid_chunks == invalid + 1
    assert all(frame.width == 320 for frame in output.images)


def send_frame(robot, image_id: int, encoding: int, data: bytes, resolution: int = 4) -> None:
    """The simulated robot sends one camera frame of ``data`` in chunks of 1000 bytes, the
    count and time in the last (as Anki's firmware does)."""
    chunks = [data[i:i + 1000] for i in range(0, len(data), 1000)]
    for chunk_id, chunk in enumerate(chunks):
        last = chunk_id == len(chunks) - 1
        robot.sim.session.send(msgs.ImageChunk(
            image_id=image_id, frame_timestamp_ms=1000 * image_id if last else 0, image_encoding=encoding,
            image_resolution=resolution, image_chunk_count=len(chunks) if last else 0, chunk_id=chunk_id,
            data=chunk))
    robot.run(0.3)


def plain_jpeg(mode: str, size: tuple) -> bytes:
    import io

    from PIL import Image
    out = io.BytesIO()
    Image.new(mode, size, "white").save(out, "JPEG", quality=50)
    return out.getvalue()


def test_a_jpeg_frame_larger_than_its_chunks_say_is_dropped_from_its_header_undecoded(rig, monkeypatch):
    """A JPEGColor frame (encoding 6) whose chunks said QVGA but whose JPEG said
    3200x2400 was decoded on the I/O thread under the core's lock (159 ms), image_raw and
    compressed carried 3200x2400 while camera_info said 320x240. It is dropped, with the
    warning of a frame that does not convert, read no further than its JPEG's header."""
    import cozmo_driver.core.camera as core_camera
    robot, core, output = rig
    decoded = []
    real_decode = core_camera.decode_to_bytes
    monkeypatch.setattr(core_camera, "decode_to_bytes", lambda *a: decoded.append(a) or real_decode(*a))
    big = plain_jpeg("RGB", (3200, 2400))
    send_frame(robot, 1, 6, big)
    send_frame(robot, 2, 6, plain_jpeg("RGB", (320, 240)))  # the size its chunks say: it passes
    for frame in output.images:
        assert frame.jpeg() is None if frame.image_id == 1 else frame.jpeg()[:2] == b"\xff\xd8"
        assert frame.pixels() is None if frame.image_id == 1 else frame.pixels()[1:] == (320, 240, 3)
    assert 2 in [frame.image_id for frame in output.images]
    assert output.said("camera image 1 dropped: image 1: its JPEG header says 3200x2400, but its chunks say "
                       "image_resolution 4 (QVGA, 320x240)", logging.WARNING), output.lines
    assert len(decoded) == 1  # image 2's


def test_a_camera_frame_that_does_not_convert_is_not_published_and_counted_dropped(rig):
    """A frame of an encoding the driver does not handle (JPEGColorHalfWidth) was warned of as
    dropped, but went to the front-end all the same (which published its camera_info, an
    orphan at the dropped frame's stamp) and /diagnostics counted it completed. It is now
    dropped before: its encoding says it without decoding. A frame whose conversion fails
    later (a minimized payload with no scan data) is dropped when it is converted. Both are
    counted apart in the link's diagnostics, not as completed."""
    import numpy as np

    from cozmo_driver.protocol.camera import encode_minimized
    robot, core, output = rig
    completed = core.assembler.stats.completed_images
    send_frame(robot, 1, 8, encode_minimized(np.full((240, 320), 128, np.uint8)))
    send_frame(robot, 2, 8, b"\x00\xff\xff")
    send_frame(robot, 3, 7, bytes(range(256)) * 8)
    core.say_held_back()  # the second warning of the kind within a period, said now
    assert core.assembler.stats.completed_images == completed + 3
    assert [frame.image_id for frame in output.images] == [1, 2]
    assert output.said("camera image 3 dropped: image 3: encoding 7 (JPEGColorHalfWidth) is not supported",
                       logging.WARNING), output.lines
    good, empty = output.images
    assert good.jpeg() is not None and good.pixels()[1:] == (320, 240, 1)
    assert empty.jpeg() is None and empty.pixels() is None
    core.say_held_back()
    assert output.said("camera image 2 dropped: minimized JPEG payload holds no scan data", logging.WARNING)
    values = dict(core.reports("test")[0].values)
    assert values["camera images dropped unconverted (see the log)"] == "2"
    assert values["camera images completed"] == str(completed + 1)


def test_a_refused_head_or_lift_command_leaves_the_goal_moving_that_motor(rig):
    """A head/angle with a negative max_speed is refused; it used to abort the
    set_head_angle goal in progress first ("preempted by a head/angle command") and then
    send nothing, so the head went on to the goal's angle with its goal gone."""
    robot, core, output = rig
    preempted = []

    class Motion:
        def has_goal(self, motor):
            return True

        def preempt(self, motor, reason):
            preempted.append((motor, reason))
    core.motion = Motion()
    core.set_head(0.1, -2.0)
    core.set_lift(0.05, -1.0)
    core.set_head(math.nan)
    robot.run(0.1)
    assert preempted == [] and not robot.sent("SetHeadAngle") and not robot.sent("SetLiftHeight")
    assert output.said("head/angle refused: head/angle.max_speed = -2.0: a speed must not be negative",
                       logging.WARNING), output.lines
    core.set_head(0.1)
    robot.run(0.1)
    assert preempted == [("head", "preempted by a head/angle command")] and robot.sent("SetHeadAngle")


def test_a_drive_off_the_front_ends_thread_is_handed_over_while_a_goal_holds_the_treads(rig):
    robot, core, output = rig
    handed = []
    output.hand_over = lambda fn, *args: handed.append((fn, args))

    class Motion:
        preempted = []

        def has_goal(self, motor):
            return motor == "wheels" and not self.preempted

        def preempt(self, motor, reason):
            self.preempted.append((motor, reason))
    core.motion = Motion()
    core.drive(0.05, 0.0, own_thread=True)
    robot.run(0.1)
    assert not robot.sent("DriveWheels") and len(handed) == 1
    fn, args = handed.pop()
    fn(*args)  # on the front-end's thread: the goal ends, then it drives
    robot.run(0.1)
    assert Motion.preempted == [("wheels", "preempted by a cmd_vel command")]
    assert len(robot.sent("DriveWheels")) == 1


class Animation:
    """The core's ``animation`` hook (the media interfaces): which motors a clip moves, and
    the preemptions asked for, with the DriveWheels the robot had been sent by then."""

    def __init__(self, robot, motors) -> None:
        self.robot, self.motors, self.preempted = robot, set(motors), []

    def moves(self, motor):
        return motor in self.motors

    def preempt_animation(self, motor, by):
        self.preempted.append((motor, by, len(self.robot.sent("DriveWheels"))))
        self.motors.discard(motor)


def test_cmd_vel_and_the_head_and_lift_topics_preempt_the_animation_moving_their_motor(rig):
    """A teleop's zero Twist sent DriveWheels(0), then the clip's next body keyframe started
    the treads again: cmd_vel took the treads from a motion goal only. Now it preempts the
    animation that drives them too (before its own DriveWheels goes out; from cmd_vel's own
    thread it is handed to the front-end's, as for a goal), and head/angle, head/velocity,
    lift/height, lift/velocity and calibrate_motors the one that moves their motor."""
    robot, core, output = rig
    handed = []
    output.hand_over = lambda fn, *args: handed.append((fn, args))
    core.animation = animation = Animation(robot, {"head"})
    core.drive(0.0, 0.0, own_thread=True)         # a clip on the head only: the treads are free
    robot.run(0.1)
    assert not handed and animation.preempted == [] and len(robot.sent("DriveWheels")) == 1
    animation.motors.add("wheels")
    core.drive(0.0, 0.0, own_thread=True)
    robot.run(0.1)
    assert len(handed) == 1 and len(robot.sent("DriveWheels")) == 1
    fn, args = handed.pop()
    fn(*args)                                     # on the front-end's thread
    robot.run(0.1)
    assert animation.preempted == [("wheels", "a cmd_vel command", 1)]   # before the drive
    assert len(robot.sent("DriveWheels")) == 2
    core.set_head(0.1)
    robot.run(0.1)
    assert animation.preempted[-1][:2] == ("head", "a head/angle command")
    animation.motors.update(("head", "lift"))
    core.move_lift(0.5)
    core.move_head(0.0)
    assert [p[:2] for p in animation.preempted[-2:]] == [("lift", "a lift/velocity command"),
                                                         ("head", "a head/velocity command")]
    animation.motors.update(("head", "lift"))
    core.calibrate_motors()
    assert [p[:2] for p in animation.preempted[-2:]] == [("head", "a calibrate_motors command"),
                                                         ("lift", "a calibrate_motors command")]


def test_an_animation_taking_the_treads_stops_cmd_vel_and_its_pending_watchdog_stop(rig):
    """A clip that drives the treads takes them from cmd_vel: the watchdog stop still pending
    from a teleop a moment before cut the clip's drive about 0.5 s later, and treads still
    moving by cmd_vel drove on until the clip's first body keyframe. Both stop."""
    robot, core, output = rig
    core.drive(0.05, 0.0)
    robot.run(0.2)
    assert core.watchdog_due is not None and robot.sim.model.body.wheels[0].speed != 0.0
    core.take_treads()
    robot.run(0.1)
    assert core.watchdog_due is None
    assert robot.sent("DriveWheels")[-1][1].lwheel_speed_mmps == 0.0
    robot.run(0.2)
    assert robot.sim.model.body.wheels[0].speed == 0.0
    sent = len(robot.sent("DriveWheels"))
    robot.run(1.0)                            # no watchdog stop comes to cut a clip's drive
    assert len(robot.sent("DriveWheels")) == sent and not output.said("no cmd_vel for"), output.lines
    core.take_treads()                        # nothing moving by cmd_vel: nothing sent
    robot.run(0.1)
    assert len(robot.sent("DriveWheels")) == sent


def test_a_refusal_held_back_is_said_once_its_kind_falls_quiet(rig):
    """A NaN cmd_vel, then an inf one a second later: the second, held back by the first's
    2 s, was said only with the next refusal of its kind, which may never come. The
    node's 1 s timer (say_overdue) says it once the 2 s are over, with the count."""
    robot, core, output = rig
    clock = [100.0]
    core.clock = lambda: clock[0]
    core.drive_twist("cmd_vel", (math.nan, 0.0, 0.0), (0.0, 0.0, 0.0))
    clock[0] += 1.0
    core.drive_twist("cmd_vel", (math.inf, 0.0, 0.0), (0.0, 0.0, 0.0))
    refusals = lambda: [text for level, text in output.lines  # noqa: E731
                        if "refused" in text and level == logging.WARNING]
    assert len(refusals()) == 1 and "nan" in refusals()[0], output.lines
    core.say_overdue()  # within the 2 s: nothing yet
    assert len(refusals()) == 1
    clock[0] += 1.0
    core.say_overdue()
    assert len(refusals()) == 2 and "inf" in refusals()[1], refusals()
    core.say_overdue()  # said once
    assert len(refusals()) == 2


def test_a_refusal_of_another_field_of_the_same_topic_is_said_at_once(rig):
    """head/angle with a NaN angle, then with a NaN max_speed 0.4 s later; backpack_lights
    with a bad front, then a bad middle: the second was held back (2-3 s, or never named)
    behind the first, as the refusals were one kind per topic. The docs promise one kind
    per field, as display/image and audio/pcm had."""
    robot, core, output = rig
    clock = [100.0]
    core.clock = lambda: clock[0]
    core.set_head(math.nan)
    clock[0] += 0.4
    core.set_head(0.1, math.nan)
    off = {name: (0.0, 0.0, 0.0) for name in ("front", "middle", "back", "left", "right")}
    core.set_backpack_lights(dict(off, front=(2.0, 0.0, 0.0)))
    clock[0] += 0.4
    core.set_backpack_lights(dict(off, middle=(0.0, 0.0, -0.5)))
    refusals = [text for level, text in output.lines if "refused" in text and level == logging.WARNING]
    assert len(refusals) == 4, refusals
    assert "head/angle.max_speed" in refusals[1] and "middle" in refusals[3], refusals
    core.set_head(math.inf)  # the same field again: held back
    assert len([t for _, t in output.lines if "refused" in t]) == 4


def test_commands_refused_for_the_drivers_state_are_said_once_per_10_s(rig):
    """A teleop publishing while the driver is inactive got a refusal line every 2 s for as
    long as that lasted; a refusal for the driver's state is said once per 10 s (with the
    count), one for a value still every 2 s."""
    robot, core, output = rig
    clock = [100.0]
    core.clock = lambda: clock[0]
    core.deactivate()
    for _ in range(60):  # 6 s of a teleop at 10 Hz
        core.drive_twist("cmd_vel", (0.05, 0.0, 0.0), (0.0, 0.0, 0.0))
        clock[0] += 0.1
    core.say_overdue()
    inactive = lambda: [t for _, t in output.lines if "the driver is not active" in t]  # noqa: E731
    assert len(inactive()) == 1, inactive()
    clock[0] += 4.5
    core.say_overdue()
    assert len(inactive()) == 2 and "(and 58 more like it in the last 10.5 s)" in inactive()[1]


def test_each_topic_refused_for_the_drivers_state_is_named_at_once(rig):
    """cmd_vel at 20 Hz refused while inactive held back the head/angle and backpack_lights
    refusals behind its own (one kind per driver state, whatever the topic): they were never
    named, only counted into "cmd_vel refused: ... (and 216 more like it)". Each topic's first
    refusal is said at once, its repeats counted per topic; nothing refused is sent later."""
    robot, core, output = rig
    clock = [100.0]
    core.clock = lambda: clock[0]
    core.deactivate()
    sent = len(robot.received)
    off = {name: (0.0, 0.0, 0.0) for name in ("front", "middle", "back", "left", "right")}
    for k in range(40):  # 2 s of cmd_vel at 20 Hz, a head and a lights command among them
        core.drive_twist("cmd_vel", (0.05, 0.0, 0.0), (0.0, 0.0, 0.0))
        if k == 10:
            core.set_head(0.2)
        if k == 20:
            core.set_backpack_lights(off)
        clock[0] += 0.05
    refusals = [t for level, t in output.lines if " refused: " in t and level == logging.WARNING]
    assert [t.split(" refused")[0] for t in refusals] == ["cmd_vel", "head/angle", "backpack_lights"], refusals
    clock[0] += 10.0
    core.say_overdue()
    assert "cmd_vel refused" in output.lines[-1][1] and "(and 38 more like it" in output.lines[-1][1], \
        output.lines[-3:]
    robot.run(0.5)
    assert not [m for _, m in robot.received[sent:] if m.NAME in ("DriveWheels", "SetHeadAngle",
                                                                   "SetBackpackLights", "LightStateCenter")]
    assert core.refused == 42


def test_topic_refusals_for_the_drivers_state_say_the_way_out(rig):
    """A goal refused while inactive says how to activate the driver, and display/image's
    "not connected" that the driver reconnects by itself; cmd_vel's, head/angle's and the
    other topics' refusals (the core's) said neither."""
    robot, core, output = rig
    core.deactivate()
    core.drive(0.05, 0.0)
    assert output.said("cmd_vel refused: the driver is not active (activate it: ros2 lifecycle set "
                       "core-test activate)", logging.WARNING), output.lines[-3:]
    core.activate()
    robot.sim.set_silent(True, robot.net.now)
    robot.run(6.0)
    assert not core.connected
    core.set_head(0.1)
    assert output.said("head/angle refused: not connected to the robot (the driver reconnects by itself: "
                       "link_status says when it is back)", logging.WARNING), output.lines[-3:]


@pytest.mark.parametrize("address", ["127.0.0.1", "172.31.1.1"])
def test_a_robot_lost_after_being_connected_is_told_as_gone_not_as_never_found(address):
    """A simulator on loopback that went away was told "Is the robot switched on, and this
    computer on its Wi-Fi?"; and the "does not answer" lines of the attempts after a loss
    still asked "Are robot_ip and robot_port right? ... close the Cozmo app", wrong for a
    robot that was connected a moment ago. The loss says the simulator's hint on loopback,
    and the attempts after it say that the robot was connected and is gone."""
    robot, core, output = connected()
    robot.transport.remote_addr = (address, 5551)  # as UdpTransport.start resolved robot_ip
    start = len(output.lines)
    robot.sim.set_silent(True, robot.net.now)

    def warnings():
        return [t for level, t in output.lines[start:] if level == logging.WARNING]
    for _ in range(60):
        robot.run(0.5)
        if any("does not answer" in t for t in warnings()):
            break
    lost = [t for t in warnings() if t.startswith("lost the robot")]
    answer = [t for t in warnings() if "does not answer" in t]
    assert lost and answer, warnings()
    sim = address == "127.0.0.1"
    assert ("Wi-Fi" in lost[0]) is not sim and ("simulator" in lost[0]) is sim, lost[0]
    assert "robot_ip and robot_port" not in answer[0] and "Cozmo app" not in answer[0], answer[0]
    assert "was connected" in answer[0] and ("simulator" in answer[0]) is sim, answer[0]


@pytest.mark.parametrize("address", ["127.0.0.1", "172.31.1.1"])
def test_a_robot_that_closed_the_link_itself_is_not_asked_whether_it_is_switched_on(address):
    """A ready robot that sent Disconnect itself (Anki's firmware does when its queue of
    messages awaiting our acknowledgement is full) was told, in the loss's log line and in
    /diagnostics, "Is the robot switched on, and this computer on its Wi-Fi?" (on loopback,
    whether the simulator still runs), which cannot apply: it had just answered. Both say
    now that it closed the link itself and what that means (our acknowledgements and
    messages did not reach it in time: a poor or congested Wi-Fi link towards it), and that
    the driver reconnects, which it does; a loss of another kind after it is told as before."""
    robot, core, output = connected()
    robot.transport.remote_addr = (address, 5551)  # as UdpTransport.start resolved robot_ip
    sim = address == "127.0.0.1"
    other = SIM_LOST_HINT if sim else LOST_HINT
    hint = ("The simulator closed the link itself, as the robot does when our acknowledgements and messages "
            "do not reach it in time. The driver reconnects by itself") if sim else \
        ("It closed the link itself, as it does when our acknowledgements and messages do not reach it in "
         "time: the Wi-Fi link towards it is poor or congested (bring this computer nearer the robot). The "
         "driver reconnects by itself")
    start = len(output.lines)

    def lost_lines():
        return [t for level, t in output.lines[start:] if level == logging.WARNING and t.startswith("lost the robot")]
    assert robot.sim.close_link(robot.net.now)
    for _ in range(100):
        robot.run(0.01)
        if core.reported_state() is LinkState.LOST:
            break
    assert core.reported_state() is LinkState.LOST
    (lost,) = lost_lines()
    assert "(the robot closed the link (Disconnect); reconnecting in " in lost, lost
    assert lost.endswith(hint), lost
    assert "switched on" not in lost and other not in lost, lost
    link, _ = core.reports(f"{address}:5551")
    assert dict(link.values)["what to check"] == f"{hint}.", link.values
    for _ in range(40):  # it reconnects by itself
        robot.run(0.5)
        if core.connected:
            break
    assert core.connected, output.lines[start:]
    assert "what to check" not in dict(core.reports(f"{address}:5551")[0].values)
    robot.sim.set_silent(True, robot.net.now)  # lost again, now for its silence
    for _ in range(20):
        robot.run(0.5)
        if len(lost_lines()) == 2:
            break
    again = lost_lines()[1]
    assert again.endswith(other) and hint not in again, again


def test_a_drive_beyond_max_wheel_speed_is_scaled_with_a_throttled_warning(rig):
    robot, core, output = rig
    clock = [100.0]
    core.clock = lambda: clock[0]
    limit = core.params["max_wheel_speed"]
    core.drive(0.1, 0.0)  # within the limit: no warning
    assert not output.said("scaled")
    core.drive(2 * limit, 0.0)
    robot.run(0.1)
    drive = robot.sent("DriveWheels")[-1][1]
    assert drive.lwheel_speed_mmps == pytest.approx(limit * 1000.0)
    warnings = [text for level, text in output.lines if "scaled" in text]
    assert len(warnings) == 1, output.lines
    assert output.said(f"cmd_vel scaled down by 0.50 to keep both treads within max_wheel_speed "
                       f"= {limit:.3f} m/s: requested {2 * limit:.3f} m/s, 0.000 rad/s; applied "
                       f"{limit:.3f} m/s, 0.000 rad/s", logging.WARNING), output.lines
    for _ in range(29):  # 30 Hz teleop at full stick for a second: one line
        clock[0] += 1 / 30
        core.drive(2 * limit, 1.0)
    assert len([text for level, text in output.lines if "scaled" in text]) == 1
    clock[0] += 1.1
    core.drive(2 * limit, 0.0)
    assert core.cmd_vel_scaled == 31
    assert output.lines[-1][1].endswith("(and 29 more like it in the last 2.1 s)"), output.lines[-1]
    assert "31 scaled so far" in output.lines[-1][1]


def test_a_huge_finite_twist_is_scaled_to_the_limit_never_to_nan(rig):
    """1.79e308 m/s and 1e308 rad/s are finite, so not refused: v + w x track / 2 overflowed
    to inf and the scale to 0, and inf x 0 sent a NaN tread speed to the robot."""
    robot, core, output = rig
    limit = core.params["max_wheel_speed"]
    for v, w in ((1.79e308, 1e308), (-1.79e308, 0.0), (0.0, -1e308), (1e300, -1e300)):
        core.drive(v, w)
        robot.run(0.1)
        drive = robot.sent("DriveWheels")[-1][1]
        speeds = (drive.lwheel_speed_mmps, drive.rwheel_speed_mmps)
        assert all(math.isfinite(x) for x in speeds), (v, w, speeds)
        assert max(abs(x) for x in speeds) == pytest.approx(limit * 1000.0), (v, w, speeds)
    line = [text for level, text in output.lines if "scaled down" in text][0]
    assert "requested 1.79e+308 m/s, 1e+308 rad/s" in line and "scaled down by 1.1e-309" in line, line
    assert "nan" not in line


def test_repeated_refusals_and_re_anchorings_are_throttled_with_a_count(rig):
    robot, core, output = rig
    clock = [50.0]
    core.clock = lambda: clock[0]
    core.set_head(math.nan)
    for _ in range(99):
        clock[0] += 0.01
        core.set_head(math.nan)
    assert core.refused == 100
    assert len([t for _, t in output.lines if "head/angle refused" in t]) == 1
    clock[0] += 2.0
    core.set_head(math.nan)
    assert output.lines[-1][1].startswith("head/angle refused")
    assert "(and 99 more like it" in output.lines[-1][1]
    # replayed robot states a metre apart: re-anchored every time, said once
    state = robot.link.robot_state
    before = core.tracker.reanchors
    lines = len(output.lines)
    for k in range(40):
        forged = copy.copy(state)
        forged.pose_x_mm = 1000.0 * (k % 2)
        core.on_robot_event(MessageReceived(forged, False))
    assert core.tracker.reanchors - before >= 39
    said = [t for _, t in output.lines[lines:] if "odometry re-anchored" in t]
    assert len(said) == 1, said


def test_a_turn_is_followed_across_lost_states_while_the_robot_clocks_mapping_catches_up(rig):
    """The jump rules take the time between two states from the robot's own clock. Their
    stamps are the robot's times mapped by the least delay seen, so when the delay drops
    after a congested spell (here 6 s of states 150 ms late, then one 5 ms late) the stamps
    of two states 150 ms apart on the robot (4 lost between them) were 5 ms apart: the
    0.18 rad the robot turned in 150 ms, as its gyro said, looked like a step the gyro did
    not turn, and odometry re-anchored, dropping that turn."""
    robot, core, output = rig
    base = copy.copy(robot.link.robot_state)
    host = [output.stamp_ns()]
    output.clock_ns = lambda: host[0]
    ms0, host0, rate = int(base.timestamp_ms) + 1000, host[0] + 10**9, 1.2
    before, yaw0 = core.tracker.reanchors, None

    def feed(ms: int, delay_ms: int) -> None:
        state = copy.copy(base)
        state.timestamp_ms, state.head_angle_rad = ms, 0.0
        state.pose_angle_rad = math.remainder(rate * (ms - ms0) / 1000.0, math.tau)
        state.gyro_x_radps, state.gyro_z_radps = 0.0, rate
        host[0] = host0 + (ms - ms0 + delay_ms) * 10**6
        core.on_robot_event(MessageReceived(state, False))

    feed(ms0, 150)
    yaw0 = core.tracker.pose.yaw
    ms = ms0
    while ms < ms0 + 6000:             # 6 s late: the window's least delay is 150 ms
        ms += 30
        feed(ms, 150)
    ms += 150                          # 4 states lost, then one with the usual delay
    feed(ms, 5)
    for _ in range(10):
        ms += 30
        feed(ms, 5)
    assert core.tracker.reanchors == before, [t for _, t in output.lines if "re-anchored" in t]
    assert core.tracker.pose.yaw == pytest.approx(
        math.remainder(yaw0 + rate * (ms - ms0) / 1000.0, math.tau), abs=1e-6)


def test_a_state_samples_parts_are_made_when_first_read_and_only_once():
    # a front-end reads only the parts its subscribers want: the rest is never made
    made = []

    class Parts:
        def imu(self):
            made.append("imu")
            return ("imu",)

        def joints(self):
            made.append("joints")
            return ("joints",)

        def status(self):
            made.append("status")
            return ("status",)

    sample = StateSample("odom", Parts())
    assert sample.odom == "odom" and made == []
    assert sample.joints == ("joints",) and sample.joints == ("joints",)
    assert made == ["joints"]
    assert sample.status == ("status",) and sample.imu == ("imu",) and sample.imu == ("imu",)
    assert made == ["joints", "status", "imu"]


def _median_grey(frame) -> int:
    import numpy as np
    data, _, _, _ = frame.pixels()
    return int(np.median(np.frombuffer(data, np.uint8)))


def _exposure_rig(light: float, **params):
    robot, core, output = connected(**params)
    robot.sim.set_light(light, robot.net.now)   # before the camera streams (on demand)
    core.set_camera_wanted(True)
    return robot, core, output


@pytest.mark.parametrize("light", [0.2, 6.0])
def test_automatic_exposure_brings_a_dim_or_bright_room_to_mid_grey(light):
    """Cozmo has no automatic exposure: the driver measures the images and sends gain and
    exposure (camera_auto_exposure, the default): in a dim room the gain rises first (a
    short exposure blurs less), then the exposure; in a bright one the exposure falls."""
    robot, core, output = _exposure_rig(light)
    robot.run(0.5)
    first = _median_grey(output.images[0])
    assert abs(first - 128) > 40, first               # the room as it is
    robot.run(4.0)
    last = _median_grey(output.images[-1])
    assert abs(last - 128) <= 14, (first, last)
    camera = robot.sim.model.camera
    if light < 1:
        assert camera.gain == pytest.approx(255 / 64) and camera.exposure_ms > 30
    else:
        assert camera.gain == pytest.approx(1.0) and camera.exposure_ms < 10
    assert (camera.gain, camera.exposure_ms) == (core.exposure.gain, core.exposure.exposure_ms)
    assert "(automatic, median grey" in core.camera_status()
    # settled: no more messages while the room stays as it is
    count = len(robot.sent("SetCameraParams"))
    robot.run(2.0)
    assert len(robot.sent("SetCameraParams")) == count


def test_fixed_exposure_sends_its_values_once_and_leaves_a_dim_room_dim():
    robot, core, output = _exposure_rig(0.2, camera_auto_exposure=False, camera_gain=2.0,
                                        camera_exposure_ms=20)
    robot.run(3.0)
    assert [(m.gain, m.exposure_ms) for _, m in robot.sent("SetCameraParams")] == [(2.0, 20)] * 2
    assert _median_grey(output.images[-1]) < 40
    assert core.exposure is None and "exposure 20 ms (fixed)" in core.camera_status()
    # switched on: it starts from camera_gain and camera_exposure_ms and brightens the room
    old = dict(core.params)
    core.params["camera_auto_exposure"] = True
    core.apply_params(old)
    robot.run(0.1)
    assert [(m.gain, m.exposure_ms) for _, m in robot.sent("SetCameraParams")][2:] == [(2.0, 20)] * 2
    robot.run(4.0)
    assert abs(_median_grey(output.images[-1]) - 128) <= 14


def test_automatic_exposure_goes_on_from_where_it_was_after_a_reconnection():
    robot, core, output = _exposure_rig(0.3)
    robot.run(4.0)
    settled = core.exposure.gain, core.exposure.exposure_ms
    assert settled != (1.0, 30)
    count = len(robot.sent("SetCameraParams"))
    robot.link.session.disconnect(robot.net.now)  # the session ends; the link reconnects
    robot.run(4.0)
    assert core.connected and output.said("connected again to Cozmo")
    again = [(m.gain, m.exposure_ms) for _, m in robot.sent("SetCameraParams")[count:]]
    assert again[:2] == [settled] * 2               # not the starting point again
    # a new starting point (or target) starts it again from there
    old = dict(core.params)
    core.params["camera_auto_exposure_target"] = 64
    core.apply_params(old)
    robot.run(4.0)
    assert abs(_median_grey(output.images[-1]) - 64) <= 7


def test_automatic_exposure_starts_from_the_parameters_set_while_unconfigured():
    """camera_gain, camera_exposure_ms and camera_auto_exposure_target set between a cleanup
    and the next configure (the node applies nothing to a robot then) were ignored: the
    automatic exposure, kept across the cleanup, went on from where it was, to the old target."""
    robot, core, output = _exposure_rig(0.3)
    robot.run(4.0)
    assert (core.exposure.gain, core.exposure.exposure_ms) != (1.0, 30)
    core.deactivate()
    core.release()
    core.params.update(camera_gain=2.0, camera_exposure_ms=20, camera_auto_exposure_target=64)
    robot = MemoryRobot()
    robot.sim.set_light(0.3, robot.net.now)
    core.robot = robot
    robot.start(core.on_robot_event)
    core.activate()
    robot.run(2.0)
    assert core.connected
    sent = [(m.gain, m.exposure_ms) for _, m in robot.sent("SetCameraParams")]
    assert sent[:2] == [(2.0, 20)] * 2, sent
    assert core.exposure.target == 64


def test_a_speed_clamped_to_a_motor_limit_names_the_parameter_that_sets_it(rig):
    """A head or lift speed over its limit is clamped with a warning: the warning names the
    parameter that sets the limit (head_max_speed, lift_max_speed), so that a user who wants
    more knows what to raise."""
    robot, core, output = rig
    core.params.update(head_max_speed=2.0, lift_max_speed=1.0)
    core.move_head(5.0)
    core.set_lift(0.05, max_speed_radps=4.0)
    robot.run(0.1)
    assert robot.sent("MoveHead")[-1][1].speed_rad_per_sec == pytest.approx(2.0)
    assert robot.sent("SetLiftHeight")[-1][1].max_speed_rad_per_sec == pytest.approx(1.0)
    assert output.said("head/velocity.data = 5 rad/s is outside [-2, 2] rad/s: clamped to 2 rad/s "
                       "(the head_max_speed parameter)", logging.WARNING), output.lines
    assert output.said("lift/height.max_speed = 4 rad/s is outside [0, 1] rad/s: clamped to 1 rad/s "
                       "(the lift_max_speed parameter)", logging.WARNING), output.lines


def test_a_low_battery_is_warned_of_again_after_a_cleanup_and_a_new_configure(rig):
    """The low battery's warning is said once a crossing, and again for the next robot: it was
    rearmed only at a DISCONNECTED link, which the driver's cleanup never reports (it stops
    listening first), so a robot still low after cleanup and configure (the same one, or one
    at another robot_ip) went unwarned until its voltage had first recovered."""
    robot, core, output = rig
    low = lambda: [t for level, t in output.lines if level == logging.WARNING and "battery low" in t]  # noqa: E731
    core.watch_battery(3.46, 0)
    core.watch_battery(3.46, 0)
    assert len(low()) == 1, output.lines
    core.release()
    core.watch_battery(3.46, 0)  # the next configure's first state
    assert len(low()) == 2, output.lines
