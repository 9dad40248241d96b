"""The motion actions against the simulated robot over UDP on 127.0.0.1, with real rclpy.

Each test gets its own rclpy context, simulator, driver node and probe node on one
single-threaded executor (waits are bounded ``spin_once`` loops). Poses are checked
against the simulator's ground truth: the driver's odom frame starts where the robot
stood when it connected (SetOrigin), so a truth pose maps into odom relative to the
truth pose at connection (:func:`odom_truth`).
"""

from __future__ import annotations

import math
import struct
import time
import tracemalloc
from typing import Any, Dict, List, Optional, Tuple

import pytest

from dependencies import require

rclpy = require("rclpy")

from action_msgs.msg import GoalStatus  # noqa: E402
from cozmo_interfaces.action import (DriveStraight, FollowPath, GoToPose, PlayAnimation,  # noqa: E402
                                     SetHeadAngle, SetLiftHeight, TurnInPlace)
from cozmo_interfaces.msg import HeadAngle, PathSegment  # noqa: E402
from cozmo_interfaces.srv import SetEmergencyStop  # noqa: E402
from geometry_msgs.msg import PoseStamped, TransformStamped, Twist  # noqa: E402
from rclpy.action import ActionClient, GoalResponse  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import PointCloud2, PointField  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from ros_harness import (CONNECT_TIMEOUT, DISCOVERY_TIMEOUT, LogRecorder, RosHarness,  # noqa: E402
                         discovered, sim_fixture)
from cozmo_driver import robot_geometry as geo  # noqa: E402
from cozmo_driver.driver.motion import MAX_PATH_POSES  # noqa: E402
from cozmo_driver.driver.transforms import quaternion_from_rpy  # noqa: E402
from cozmo_driver.log_throttle import LogThrottle  # noqa: E402
from cozmo_driver.protocol.messages import ENUMS  # noqa: E402
from cozmo_driver.protocol.status import RobotStatusFlag  # noqa: E402
from cozmo_driver.ros.driver_node import CozmoDriverNode  # noqa: E402
from cozmo_driver.sim import SimServer  # noqa: E402
from cozmo_driver.sim import body as sim_body  # noqa: E402

pytestmark = [pytest.mark.ros]

TYPES = {"set_head_angle": SetHeadAngle, "set_lift_height": SetLiftHeight,
         "turn_in_place": TurnInPlace, "drive_straight": DriveStraight,
         "follow_path": FollowPath, "go_to_pose": GoToPose, "play_animation": PlayAnimation}
STATIC = QoSProfile(depth=10, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL,
                    reliability=QoSReliabilityPolicy.RELIABLE)


def wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def quat(yaw: float):
    return 0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0)


def pose_stamped(x: float, y: float, yaw: float, frame: str = "odom") -> PoseStamped:
    p = PoseStamped()
    p.header.frame_id = frame
    p.pose.position.x, p.pose.position.y = x, y
    _, _, p.pose.orientation.z, p.pose.orientation.w = quat(yaw)
    return p


def path_goal(points: List[Tuple[float, float, float]], frame: str = "odom", **kw) -> FollowPath.Goal:
    goal = FollowPath.Goal(**kw)
    goal.path.header.frame_id = frame
    goal.path.poses = [pose_stamped(x, y, yaw, "") for x, y, yaw in points]
    return goal


class Rig(RosHarness):
    """A connected driver node and a probe node (action clients, /rosout) on one executor."""

    def __init__(self, context, sim: SimServer, cli_args: Optional[List[str]] = None,
                 namespace: str = "", **params: Any) -> None:
        self.sim = sim
        overrides = {"robot_ip": "127.0.0.1", "robot_port": sim.address[1], "peer_timeout": 1.0,
                     "reconnect_min": 0.2, "reconnect_max": 0.5, "camera_enabled": False}
        overrides.update(params)
        self.node = CozmoDriverNode(context=context, cli_args=cli_args, namespace=namespace,
                                    parameter_overrides=[Parameter(k, value=v)
                                                         for k, v in overrides.items()])
        super().__init__(context, "motion_probe", namespace, nodes=(self.node,))
        self.clients: Dict[str, ActionClient] = {}
        assert self.node.start()
        assert self.spin_until(lambda: self.node.connected and self.node._motion._state is not None,
                               CONNECT_TIMEOUT), "driver did not connect"
        self.spin_for(0.2)
        self.origin = sim.true_pose()

    # --- actions

    def client(self, name: str) -> ActionClient:
        if name not in self.clients:
            self.clients[name] = self.action_client(TYPES[name], name)
        return self.clients[name]

    def send(self, name: str, goal, feedback: Optional[list] = None):
        """The goal handle, or None when the goal was rejected."""
        future = self.client(name).send_goal_async(
            goal, feedback_callback=(lambda m: feedback.append(m.feedback)) if feedback is not None else None)
        assert self.spin_until(future.done, 5.0)
        handle = future.result()
        if not handle.accepted:
            return None
        handle.result_future = handle.get_result_async()
        return handle

    def wait(self, handle, timeout: float = 20.0):
        """(status, result) of a goal."""
        assert self.spin_until(handle.result_future.done, timeout), "no result in time"
        response = handle.result_future.result()
        return response.status, response.result

    def run(self, name: str, goal, timeout: float = 20.0, feedback: Optional[list] = None):
        handle = self.send(name, goal, feedback)
        assert handle is not None, f"{name} goal rejected (see the log)"
        return self.wait(handle, timeout)

    def cancel(self, handle) -> None:
        future = handle.cancel_goal_async()
        assert self.spin_until(future.done, 5.0)
        assert future.result().goals_canceling, "cancel refused"

    def rejected(self, name: str, goal, reason: str) -> None:
        """The goal is rejected and the driver's log says ``reason``.

        The log lines are taken from the driver's logger as it writes them: /rosout is
        not reliable within one test process, where every test's context has a node of
        the same name (rcl keeps one rosout publisher per logger name and process). The
        rejections' throttle starts anew, so that a reason of the kind of the last one
        checked is said, not counted (a_bad_goal_sent_again_and_again tests the throttle)."""
        motion = self.node._motion
        lines: List[str] = []
        motion._log = LogRecorder(motion._log, lines)
        motion._throttle = LogThrottle(motion._throttle.period_s)
        try:
            assert self.send(name, goal) is None, f"{name} goal accepted"
        finally:
            motion._log = motion._log.logger
        text = f"{name} goal rejected: "
        assert any(text in m and reason in m for m in lines), f"no {reason!r} in {lines}"

    # --- ground truth

    def odom_truth(self) -> Tuple[float, float, float]:
        """The simulator's true pose in the driver's odom frame (m, rad)."""
        x0, y0, a0 = self.origin
        x, y, a = self.sim.true_pose()
        c, s = math.cos(-a0), math.sin(-a0)
        dx, dy = (x - x0) / 1000.0, (y - y0) / 1000.0
        return dx * c - dy * s, dx * s + dy * c, wrap(a - a0)

    def still(self, seconds: float = 0.3) -> bool:
        """True if the robot's true pose does not change for ``seconds``."""
        before = self.sim.true_pose()
        self.spin_for(seconds)
        after = self.sim.true_pose()
        return math.hypot(after[0] - before[0], after[1] - before[1]) < 0.5 and \
            abs(wrap(after[2] - before[2])) < 0.01

    def estop(self, engage: bool) -> None:
        self.call(SetEmergencyStop, "emergency_stop", SetEmergencyStop.Request(engage=engage))


sim = sim_fixture(seed=5)


@pytest.fixture
def rig(rclpy_context, sim):
    made = Rig(rclpy_context, sim)
    try:
        yield made
    finally:
        made.close()


# ----------------------------------------------------------------------------- head and lift

AXES = {
    # action, goal of a slow move, goal of a fast move, result field, simulator truth, tolerance
    "head": ("set_head_angle", SetHeadAngle.Goal(angle=0.7, max_speed=0.5),
             SetHeadAngle.Goal(angle=0.1), "final_angle", lambda sim: sim.head_angle(), 0.035),
    "lift": ("set_lift_height", SetLiftHeight.Goal(height=0.09, max_speed=0.3),
             SetLiftHeight.Goal(height=0.05), "final_height",
             lambda sim: sim.lift_height() / 1000.0, 0.004),
}


@pytest.mark.parametrize("axis", ["head", "lift"])
def test_axis_goal_succeeds_on_ack_and_in_position(rig, axis):
    name, slow, _, field, truth, tol = AXES[axis]
    feedback: list = []
    robot = rig.node._robot            # a calibrated motor (a goal sent while it calibrates:
    assert rig.spin_until(lambda: not robot.calibrating(axis), 5.0)  # the next test)
    status, result = rig.run(name, slow, feedback=feedback)
    assert status == GoalStatus.STATUS_SUCCEEDED and result.success, result.message
    target = slow.angle if axis == "head" else slow.height
    assert getattr(result, field) == pytest.approx(target, abs=tol)
    assert truth(rig.sim) == pytest.approx(target, abs=tol)
    assert len(feedback) >= 5  # a slow move: feedback at up to 10 Hz
    values = [getattr(f, "current_angle" if axis == "head" else "current_height") for f in feedback]
    assert values == sorted(values)  # moving towards the target
    command = [m for _, m in rig.sim.commands()
               if m.NAME == ("SetHeadAngle" if axis == "head" else "SetLiftHeight")][-1]
    assert command.action_id != 0  # tracked by the robot's AcknowledgeAction


#: how long the head and lift rest at their low stop in the connection's calibration in
#: test_axis_feedback_while_the_motor_calibrates_... (the simulator's own 0.5 and 0.75 s left
#: 0.24 and 0.56 s of it after Rig's start-up: a loaded machine took that)
CONNECTION_CALIBRATION_REST_S = 2.5


@pytest.mark.parametrize("axis", ["head", "lift"])
def test_axis_feedback_while_the_motor_calibrates_shows_what_joint_states_shows(rclpy_context, sim, monkeypatch,
                                                                                axis):
    """At connection the robot counts the head and lift angles from 0 (where they were at
    power-up) until their calibration ends at the low stop, and the driver holds
    joint_states at the low stop meanwhile. The feedback of a goal sent then showed the
    robot's count and jumped down when the calibration ended; it now shows the driver's
    angle, so it only rises towards the target."""
    name, slow, _, field, truth, tol = AXES[axis]
    for motor in (ENUMS["MotorID"].MOTOR_HEAD, ENUMS["MotorID"].MOTOR_LIFT):
        monkeypatch.setitem(sim_body.CALIBRATION_REST_S, motor, CONNECTION_CALIBRATION_REST_S)
    rig = Rig(rclpy_context, sim)
    try:
        rig.client(name)  # discovered before the goal, not in the calibration's time
        feedback: list = []
        handle = rig.send(name, slow, feedback)
        assert handle is not None, f"{name} goal rejected"
        # read once the goal was accepted, not before it was sent: it held then
        assert rig.node._robot.calibrating(axis), "the connection's calibration is under way"
        status, result = rig.wait(handle)
    finally:
        rig.close()
    assert status == GoalStatus.STATUS_SUCCEEDED and result.success, result.message
    values = [getattr(f, "current_angle" if axis == "head" else "current_height") for f in feedback]
    low = geo.HEAD_MIN_ANGLE_RAD if axis == "head" else geo.LIFT_MIN_HEIGHT_M
    assert values[0] == pytest.approx(low, abs=1e-6), values[:5]   # held at the low stop
    # from the low stop up to the target; the robot's first may read a rounding below
    # the low stop held (0.03199999984 m after 0.032)
    assert all(b >= a - 1e-6 for a, b in zip(values, values[1:])), values
    assert values[-1] < (slow.angle if axis == "head" else slow.height) + tol


@pytest.mark.parametrize("axis", ["head", "lift"])
def test_axis_goal_canceled_midway_stops_the_motor(rig, axis):
    name, slow, _, field, truth, tol = AXES[axis]
    handle = rig.send(name, slow)
    rig.spin_for(0.6)
    rig.cancel(handle)
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_CANCELED and not result.success
    assert "canceled" in result.message
    rig.spin_for(0.2)  # the stop reaches the robot
    stopped = truth(rig.sim)
    rig.spin_for(0.4)
    assert truth(rig.sim) == pytest.approx(stopped, abs=1e-3)      # it stays where it stopped
    target = slow.angle if axis == "head" else slow.height
    assert abs(stopped - target) > 5 * tol


@pytest.mark.parametrize("axis", ["head", "lift"])
def test_axis_goal_preempted_by_a_new_goal(rig, axis):
    name, slow, fast, field, truth, tol = AXES[axis]
    first = rig.send(name, slow)
    rig.spin_for(0.3)
    second = rig.send(name, fast)
    status, result = rig.wait(first)
    assert status == GoalStatus.STATUS_ABORTED and not result.success
    assert result.message.startswith("preempted by a new goal")
    status, result = rig.wait(second)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    target = fast.angle if axis == "head" else fast.height
    assert truth(rig.sim) == pytest.approx(target, abs=tol)


def test_emergency_stop_aborts_goals_and_refuses_new_ones(rig):
    head = rig.send("set_head_angle", AXES["head"][1])
    lift = rig.send("set_lift_height", AXES["lift"][1])
    rig.spin_for(0.3)
    rig.estop(True)
    for handle in (head, lift):
        status, result = rig.wait(handle)
        assert status == GoalStatus.STATUS_ABORTED and result.message == "emergency stop engaged"
    rig.rejected("set_head_angle", SetHeadAngle.Goal(angle=0.0), "emergency stop engaged")
    rig.estop(False)
    status, _ = rig.run("set_head_angle", SetHeadAngle.Goal(angle=0.0))
    assert status == GoalStatus.STATUS_SUCCEEDED


def test_head_topic_command_preempts_the_head_goal(rig):
    handle = rig.send("set_head_angle", AXES["head"][1])
    rig.spin_for(0.3)
    pub = rig.probe.create_publisher(HeadAngle, "head/angle", 1)
    assert rig.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    pub.publish(HeadAngle(angle=-0.2))
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.message == "preempted by a head/angle command"
    assert rig.spin_until(lambda: abs(rig.sim.head_angle() + 0.2) < 0.01, 3.0)


def test_a_head_goal_ends_the_velocity_motion_a_lowered_head_max_speed_would_send_again(rig):
    """A lowered head_max_speed sends a head/velocity motion in progress again at the new limit:
    one a set_head_angle goal took over (and ended) is no longer in progress, and sent no more."""
    from std_msgs.msg import Float64
    robot = rig.node._robot
    assert rig.spin_until(lambda: not robot.calibrating("head"), 5.0)
    pub = rig.probe.create_publisher(Float64, "head/velocity", 1)
    assert rig.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    pub.publish(Float64(data=-0.5))

    def moves():
        return [m.speed_rad_per_sec for _, m in rig.sim.commands() if m.NAME == "MoveHead"]

    assert rig.spin_until(lambda: moves() == [-0.5], 3.0), moves()
    status, result = rig.run("set_head_angle", AXES["head"][2])
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.node.set_parameters([Parameter("head_max_speed", value=0.2)])[0].successful
    rig.spin_for(0.3)
    assert moves() == [-0.5]


def test_calibrate_motors_preempts_the_head_and_lift_goals_saying_so(rig):
    """calibrate_motors during a head goal: the calibration drove the head to its low stop,
    and the goal ended "the head stopped at -0.436 rad ... (blocked?)", a hardware fault
    to look for where the user had asked for it. It preempts the goal, as a head command
    does, naming it."""
    from std_srvs.srv import Trigger
    handle = rig.send("set_head_angle", SetHeadAngle.Goal(angle=0.7, duration=4.0))
    rig.spin_for(0.5)
    assert rig.call(Trigger, "calibrate_motors", Trigger.Request()).success
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.message == "preempted by a calibrate_motors command", result.message


TREADS_GOALS = {"turn_in_place": TurnInPlace.Goal(angle=2.5, speed=0.8),
                "drive_straight": DriveStraight.Goal(distance=0.2, speed=0.05)}


def stays_still(rig) -> bool:
    """Whether the robot (the simulator's truth) is still, a moment after its goal ended."""
    rig.spin_for(0.3)  # the stop reaches the robot
    x0, y0, a0 = rig.odom_truth()
    rig.spin_for(0.6)
    x1, y1, a1 = rig.odom_truth()
    return math.hypot(x1 - x0, y1 - y0) < 0.002 and abs(wrap(a1 - a0)) < 0.01


@pytest.mark.parametrize("name", sorted(TREADS_GOALS))
def test_calibrate_motors_ends_the_treads_goal_whose_heading_it_restarts(rig, name):
    """The head's calibration restarts the robot's reported heading, and a treads goal holds
    its target in the robot's own frame: a 2.5 rad turn calibrated midway ended ABORTED
    "stopped 1.452 rad short" when the robot had turned 2.477, and a 0.2 m drive SUCCEEDED
    having turned 1.48 rad on the way. calibrate_motors now ends it at once, stopping the
    treads (and the path), saying why."""
    from std_srvs.srv import Trigger
    robot = rig.node._robot
    assert rig.spin_until(lambda: not robot.calibrating("head"), 5.0)  # the connection's
    handle = rig.send(name, TREADS_GOALS[name])
    rig.spin_for(1.0)
    clears = rig.sim.command_counts().get("ClearPath", 0)
    assert rig.call(Trigger, "calibrate_motors", Trigger.Request()).success
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_ABORTED and not result.success
    assert result.message == ("the robot's heading restarted: the head calibrates (calibrate_motors); "
                              "the goal's target is lost"), result.message
    assert stays_still(rig), "the treads were stopped"
    if name == "drive_straight":
        assert rig.sim.command_counts().get("ClearPath", 0) > clears, "the path was cleared"


#: how long the head rests at its low stop in calibrate_with_the_head_up's calibration (the
#: simulator's own 0.5 s left a goal sent after it about 0.8 s of the calibration: a client's
#: discovery or a loaded machine took that), well within the driver's wait for its end
HEAD_CALIBRATION_REST_S = 2.5


def calibrate_with_the_head_up(rig, monkeypatch, *actions: str) -> None:
    """calibrate_motors with the head up and a long rest at its low stop, so that the
    calibration lasts about 3 s; it is under way, and its start has reached the driver, on
    return. The clients of ``actions`` are discovered before, not in the calibration's time."""
    from std_srvs.srv import Trigger
    robot = rig.node._robot
    for name in actions:
        rig.client(name)
    monkeypatch.setitem(sim_body.CALIBRATION_REST_S, ENUMS["MotorID"].MOTOR_HEAD, HEAD_CALIBRATION_REST_S)
    assert rig.spin_until(lambda: not robot.calibrating("head"), 5.0)  # the connection's
    status, result = rig.run("set_head_angle", SetHeadAngle.Goal(angle=0.7))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.call(Trigger, "calibrate_motors", Trigger.Request()).success
    rig.spin_for(0.15)
    assert robot.calibrating("head")


@pytest.mark.parametrize("name", sorted(TREADS_GOALS))
def test_a_treads_goal_sent_while_the_head_calibrates_waits_for_the_calibration(rig, monkeypatch, name):
    """Anki's firmware holds the reported heading for the whole head calibration (its IMU
    filter is reset at every tick until the head is calibrated): a turn sent then spun until
    the calibration ended and then turned its full angle again, SUCCEEDED with odom wrong,
    and a path steered blind. The goal waits, the treads still, until the head is
    calibrated, and then runs, checked again."""
    robot = rig.node._robot
    calibrate_with_the_head_up(rig, monkeypatch, name)
    x0, y0, a0 = rig.odom_truth()
    handle = rig.send(name, TREADS_GOALS[name])
    assert handle is not None, "rejected"
    checks = 0
    while robot.calibrating("head"):
        rig.spin_for(0.05)
        # the pose first, then the flag: the goal starts its treads only once the driver has
        # seen the calibration end, so a pose read while the flag still holds is one the goal
        # cannot have moved (the flag read before the spin may have ended during it)
        x, y, a = rig.odom_truth()
        if not robot.calibrating("head"):
            break
        assert math.hypot(x - x0, y - y0) < 0.001 and abs(wrap(a - a0)) < 0.005, \
            "the treads moved while the head calibrated"
        checks += 1
    assert checks >= 5, f"the calibration was watched {checks} times only"
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, a = rig.odom_truth()
    if name == "turn_in_place":
        assert wrap(a - a0) == pytest.approx(2.5, abs=0.05)
    else:
        assert math.hypot(x - x0, y - y0) == pytest.approx(0.2, abs=0.01)
        assert abs(wrap(a - a0)) < 0.05
    odom = rig.node._tracker.pose  # the driver's odometry agrees with the truth
    assert math.hypot(odom.x - x, odom.y - y) < 0.01 and abs(wrap(odom.yaw - a)) < 0.05


@pytest.mark.parametrize("name", ["go_to_pose", "turn_in_place"])
def test_reset_odometry_while_a_goal_waits_for_the_head_keeps_its_target_on_the_floor(rig, monkeypatch, name):
    """A goal in odom waits for the head's calibration, and reset_odometry comes meanwhile: the
    goal went to its target taken in the new odom frame (go_to_pose {x: 0.2} 0.2 m on from where
    the robot stood, 0.1 m ahead of its target; an absolute turn to the new frame's heading),
    though the reset's answer said it goes on to the place it was sent to, as a running goal
    does. It now goes to the target on the floor it was sent to, in the odom frame of its time."""
    from std_srvs.srv import Trigger
    robot = rig.node._robot
    moved = rig.run("drive_straight", DriveStraight.Goal(distance=0.1, speed=0.08)) if name == "go_to_pose" \
        else rig.run("turn_in_place", TurnInPlace.Goal(angle=1.0))
    assert moved[0] == GoalStatus.STATUS_SUCCEEDED, moved[1].message
    calibrate_with_the_head_up(rig, monkeypatch, name)
    x0, y0, a0 = rig.odom_truth()
    goal = GoToPose.Goal(pose=pose_stamped(0.2, 0.0, 0.0), speed=0.08) if name == "go_to_pose" else \
        TurnInPlace.Goal(angle=0.0, is_absolute=True)
    handle = rig.send(name, goal)
    assert handle is not None, "rejected"
    response = rig.call(Trigger, "reset_odometry", Trigger.Request())
    assert robot.calibrating("head"), "the calibration ended before the reset"  # the goal waited
    assert f"the running {name} goal goes on to the place it was sent to" in response.message, response.message
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, a = rig.odom_truth()  # in the odom frame of the goal's time
    if name == "go_to_pose":
        assert math.hypot(x - 0.2, y) <= 0.015 and abs(a) <= 0.06, (x, y, a)
        assert result.final_pose.pose.position.x == pytest.approx(0.2 - x0, abs=0.015)  # the new frame
    else:
        assert abs(wrap(a)) <= 0.05, a  # heading 0 of the goal's odom frame
        assert result.final_heading == pytest.approx(wrap(-a0), abs=0.05)  # in the new frame


def test_a_treads_goal_waiting_for_the_head_calibration_can_be_canceled(rig, monkeypatch):
    robot = rig.node._robot
    calibrate_with_the_head_up(rig, monkeypatch, "turn_in_place")
    turns = rig.sim.command_counts().get("TurnInPlace", 0)
    handle = rig.send("turn_in_place", TREADS_GOALS["turn_in_place"])
    assert handle is not None, "rejected"
    rig.spin_for(0.1)
    rig.cancel(handle)
    status, result = rig.wait(handle)
    # the flag read after the cancel's result, not before its request: it held all along, so
    # the cancel came while the goal waited (one read before may have ended during the cancel)
    assert robot.calibrating("head"), "the calibration ended before the goal was canceled"
    assert status == GoalStatus.STATUS_CANCELED, result.message
    assert rig.spin_until(lambda: not robot.calibrating("head"), 5.0)
    assert stays_still(rig)
    assert rig.sim.command_counts().get("TurnInPlace", 0) == turns, "the turn went out"


def test_a_head_calibration_the_robot_starts_itself_ends_the_treads_goal(rig):
    """The robot recalibrates its head by itself (a forced motor): its heading restarts as
    at calibrate_motors, and the driver ends the treads goal the same way, saying so."""
    from cozmo_driver.protocol import messages as msgs
    robot = rig.node._robot
    assert rig.spin_until(lambda: not robot.calibrating("head"), 5.0)
    handle = rig.send("turn_in_place", TREADS_GOALS["turn_in_place"])
    rig.spin_for(1.0)

    def recalibrate(model) -> None:  # as Anki's firmware: the event, and the heading restarts
        model.fw.emit(msgs.MotorCalibration(motor_id=int(msgs.ENUMS["MotorID"].MOTOR_HEAD),
                                            calib_started=True, auto_started=True))
        model.body.restart_heading()
    rig.sim._model(recalibrate)
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_ABORTED and not result.success
    assert result.message == ("the robot's heading restarted: the head calibrates (the robot "
                              "started it by itself); the goal's target is lost"), result.message
    assert stays_still(rig), "the treads were stopped"


def test_feedback_goes_out_ten_times_a_second_of_robot_states(rig):
    """Feedback was throttled to 0.1 s from the last one: with the robot's states 30 ms apart
    that is every 4th state (8.3 a second; 7.5-8 with their jitter), not the documented 10.
    100 states 30 ms apart (2.97 s), handed to the running goal as the I/O thread hands them
    over, now give 30 feedbacks (one in each 0.1 s), not 25."""
    from cozmo_driver.ros.motion_actions import _STATE
    motion = rig.node._motion
    handle = rig.send("drive_straight", DriveStraight.Goal(distance=0.3, speed=0.02))
    assert handle is not None
    assert rig.spin_until(lambda: "wheels" in motion._runs and motion._runs["wheels"].tracker is not None, 5.0)
    rig.spin_for(0.3)  # moving: its states are not still
    sent: List[float] = []
    publish = motion._publish_feedback

    def counted(run, sample) -> None:
        sent.append(sample.t)
        publish(run, sample)
    motion._publish_feedback = counted
    try:
        state, axes = motion._state, motion._axes()
        t0 = time.monotonic() + 1.0  # after every state the goal saw, well within its deadline
        for k in range(100):  # no spin in between: no state of the robot's comes among them
            motion._on_handed_over((_STATE, t0 + 0.03 * k, (state, axes)))
    finally:
        motion._publish_feedback = publish
    assert motion._runs["wheels"].outcome is None, "the goal ended"
    assert len([t for t in sent if t >= t0]) == 30, sent
    rig.cancel(handle)
    assert rig.wait(handle)[0] == GoalStatus.STATUS_CANCELED


@pytest.mark.parametrize("name", ["drive_straight", "turn_in_place"])
def test_a_treads_goal_whose_robot_is_held_ends_as_blocked_and_stops_the_treads(rig, name):
    """The robot held where it stands (the simulator's hold_treads: its treads driven on, still,
    measuring 0): the goal ends ABORTED "blocked: ..." after about 1.5 s of such states, not at
    the safety deadline, and the treads are stopped: let go, the robot stays where it is."""
    goal = DriveStraight.Goal(distance=0.3, speed=0.05) if name == "drive_straight" else \
        TurnInPlace.Goal(angle=6.0, speed=1.0)
    handle = rig.send(name, goal)
    assert handle is not None
    rig.spin_for(0.5)
    rig.sim.hold_treads()
    try:
        status, result = rig.wait(handle, timeout=8.0)  # before the safety deadline, about 15 s
    finally:
        rig.sim.hold_treads(False)
    assert status == GoalStatus.STATUS_ABORTED and not result.success
    assert result.message.startswith("blocked: the robot has not moved for about 1.5 s"), result.message
    assert "its treads still (held, or stalled)" in result.message, result.message
    assert stays_still(rig), "the treads were not stopped"


# ----------------------------------------------------------------------------- turns and straight lines

def test_a_turn_slower_than_the_robot_turns_is_raised_saying_so(rig, rclpy_log):
    """Anki's firmware turns in place no slower than 0.4 rad/s: a goal asking 0.1 is planned
    and sent at 0.4, with a warning, and ends where it was asked to."""
    status, result = rig.run("turn_in_place", TurnInPlace.Goal(angle=0.5, speed=0.1))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.odom_truth()[2] == pytest.approx(0.5, abs=0.035)
    lines = [line.message for line in rclpy_log.of(rig.node)]
    assert "turn_in_place: speed = 0.1 rad/s: the robot turns in place no slower than 0.4 rad/s " \
           "(its steering speeds a slower point turn up): raised to 0.4 rad/s" in lines, lines


def test_turn_in_place_relative_and_absolute_match_the_truth(rig):
    status, result = rig.run("turn_in_place", TurnInPlace.Goal(angle=math.pi / 2, tolerance=0.035))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, yaw = rig.odom_truth()
    assert yaw == pytest.approx(math.pi / 2, abs=0.035) and math.hypot(x, y) < 0.002
    assert result.final_heading == pytest.approx(yaw, abs=1e-3)
    assert result.turned == pytest.approx(math.pi / 2, abs=0.035)
    # three quarters of a turn clockwise, through +-pi: counted, not wrapped
    status, result = rig.run("turn_in_place", TurnInPlace.Goal(angle=-3 * math.pi / 2, speed=4.0))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert wrap(rig.odom_truth()[2] - math.pi) == pytest.approx(0.0, abs=0.03)
    status, result = rig.run("turn_in_place", TurnInPlace.Goal(angle=-math.pi / 2, is_absolute=True,
                                                               tolerance=0.04))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.odom_truth()[2] == pytest.approx(-math.pi / 2, abs=0.04)
    assert abs(result.heading_error) <= 0.04
    # tighter than the 2 deg a turn in place stops within: refused, saying why
    goal = TurnInPlace.Goal(angle=0.5, tolerance=0.02)
    rig.rejected("turn_in_place", goal, "tolerance = 0.02 rad cannot be reached")


def test_drive_straight_forwards_and_backwards_match_the_truth(rig):
    feedback: list = []
    status, result = rig.run("drive_straight", DriveStraight.Goal(distance=0.12, speed=0.15),
                             feedback=feedback)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, yaw = rig.odom_truth()
    assert (x, y) == pytest.approx((0.12, 0.0), abs=0.01) and abs(yaw) < 0.02
    assert result.distance_traveled == pytest.approx(x, abs=0.002)
    assert feedback and feedback[-1].distance_remaining < feedback[0].distance_remaining
    status, result = rig.run("drive_straight", DriveStraight.Goal(distance=-0.05))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.odom_truth()[0] == pytest.approx(0.07, abs=0.01)
    assert result.distance_traveled == pytest.approx(-0.05, abs=0.01)


WHEEL_GOALS = {
    "turn_in_place": TurnInPlace.Goal(angle=3.0, speed=1.0),
    "drive_straight": DriveStraight.Goal(distance=0.3, speed=0.08),
    "follow_path": path_goal([(0.3, 0.0, 0.0)], speed=0.08),
    "go_to_pose": GoToPose.Goal(pose=pose_stamped(0.3, 0.0, 0.0), speed=0.08),
}


@pytest.mark.parametrize("name", sorted(WHEEL_GOALS))
def test_wheel_goal_canceled_midway_stops_the_treads(rig, name):
    motion = rig.node._motion
    lines: list = []
    motion._log = LogRecorder(motion._log, lines)
    handle = rig.send(name, WHEEL_GOALS[name])
    assert rig.spin_until(lambda: rig.sim.is_connected and rig.odom_truth() != (0.0, 0.0, 0.0), 3.0)
    rig.spin_for(0.5)
    rig.cancel(handle)
    status, result = rig.wait(handle)
    motion._log = motion._log.logger
    assert status == GoalStatus.STATUS_CANCELED and not result.success
    assert f"{name}: canceled: the motor was stopped" in lines, lines   # said once, not twice
    rig.spin_for(0.25)  # the stop reaches the robot, whose treads decelerate
    assert rig.still(0.4), " ".join(m.NAME for _, m in rig.sim.commands()[-8:])
    if name in ("drive_straight", "follow_path", "go_to_pose"):
        assert rig.sim.command_counts()["ClearPath"] >= 3  # the connection's, the path's, the cancel's


@pytest.mark.parametrize("name", sorted(WHEEL_GOALS))
def test_pick_up_aborts_a_wheel_goal_with_the_reason(rig, name):
    handle = rig.send(name, WHEEL_GOALS[name])
    rig.spin_for(0.6)
    rig.sim.pick_up()
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.message == "interrupted: the robot was picked up"
    rig.rejected("drive_straight", DriveStraight.Goal(distance=0.1), "the robot was picked up")
    rig.sim.put_down()
    assert rig.spin_until(lambda: rig.send("drive_straight", DriveStraight.Goal(distance=0.01)), 3.0)


@pytest.mark.parametrize("name", sorted(WHEEL_GOALS))
def test_wheel_goal_preempted_by_a_new_goal(rig, name):
    first = rig.send(name, WHEEL_GOALS[name])
    rig.spin_for(0.5)
    second = rig.send("drive_straight", DriveStraight.Goal(distance=0.03))
    status, result = rig.wait(first)
    assert status == GoalStatus.STATUS_ABORTED and not result.success
    assert result.message == "preempted by a new goal (drive_straight)"
    status, result = rig.wait(second)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.distance_traveled == pytest.approx(0.03, abs=0.01)


def test_a_turn_preempted_by_a_goal_that_drives_nothing_is_stopped(rig):
    """A new goal stopped the goal it preempted only if that one drove a path: a turn in place
    went on, and a go_to_pose already within its tolerances sends nothing (SUCCEEDED, "nothing
    to drive"), so the robot kept turning with no goal running. The motion of the goal a new
    goal preempts is stopped when the new goal sends nothing to replace it."""
    turn = rig.send("turn_in_place", TurnInPlace.Goal(angle=6.0, speed=0.5))
    assert turn is not None
    rig.spin_for(1.0)
    ctx = rig.node._motion._goals["go_to_pose"].ctx
    here = ctx.to_odom_pose(ctx.now_sample())   # where the driver's odometry has the robot
    goal = GoToPose.Goal(pose=pose_stamped(here.x, here.y, here.yaw), position_tolerance=0.05,
                         heading_tolerance=math.pi)
    status, result = rig.run("go_to_pose", goal)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.message == "already within the tolerances: nothing to drive"
    status, result = rig.wait(turn)
    assert status == GoalStatus.STATUS_ABORTED and result.message == "preempted by a new goal (go_to_pose)"
    assert not rig.node._motion.running
    assert stays_still(rig), " ".join(m.NAME for _, m in rig.sim.commands()[-8:])


@pytest.mark.parametrize("axis", ["head", "lift"])
def test_an_axis_goal_preempted_by_a_goal_that_fails_to_start_is_stopped(rig, axis):
    """The same for the head and the lift: a new goal that ends before its command goes out
    (its start fails) stops the motion of the goal it preempted."""
    from cozmo_driver.driver.motion import MotionError
    name, slow, fast, field, truth, tol = AXES[axis]
    goal_type = rig.node._motion._goals[name]
    assert rig.spin_until(lambda: not rig.node._robot.calibrating(axis), 5.0)
    first = rig.send(name, slow)
    rig.spin_for(0.4)

    def start(run):
        raise MotionError("no start")

    goal_type.start = start
    try:
        status, result = rig.run(name, fast)
    finally:
        del goal_type.start
    assert status == GoalStatus.STATUS_ABORTED and result.message == "no start"
    status, result = rig.wait(first)
    assert status == GoalStatus.STATUS_ABORTED and result.message.startswith("preempted by a new goal")
    rig.spin_for(0.2)  # the stop reaches the robot
    stopped = truth(rig.sim)
    rig.spin_for(0.4)
    assert truth(rig.sim) == pytest.approx(stopped, abs=1e-3)      # it stays where it stopped
    target = slow.angle if axis == "head" else slow.height
    assert abs(stopped - target) > 5 * tol


def test_cmd_vel_preempts_a_wheel_goal_but_not_the_head_goal(rig):
    head = rig.send("set_head_angle", AXES["head"][1])
    turn = rig.send("turn_in_place", TurnInPlace.Goal(angle=2.0, speed=1.0))
    rig.spin_for(0.4)
    pub = rig.probe.create_publisher(Twist, "cmd_vel", 1)
    assert rig.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    pub.publish(Twist())
    status, result = rig.wait(turn)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.message == "preempted by a cmd_vel command"
    rig.spin_for(0.25)  # cmd_vel's DriveWheels(0, 0) reaches the robot, whose treads decelerate
    assert rig.still(0.4), " ".join(m.NAME for _, m in rig.sim.commands()[-8:])
    # the head is another motor: neither the treads' goal nor cmd_vel touched its goal
    status, result = rig.wait(head)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message


@pytest.mark.parametrize("name", ["follow_path", "drive_straight", "go_to_pose"])
def test_cmd_vel_takes_the_treads_from_a_path_the_robot_follows(rig, name):
    """The robot ignores DriveWheels while it follows a path (Anki's firmware, and the
    simulator since): the goal that cmd_vel preempts ends its path on the robot first
    (ClearPath), or the teleop that took over did nothing and the path went on."""
    handle = rig.send(name, WHEEL_GOALS[name])
    assert handle is not None
    rig.spin_for(0.6)
    pub = rig.probe.create_publisher(Twist, "cmd_vel", 1)
    assert rig.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    turn = Twist()
    turn.angular.z = 1.5

    def turning() -> bool:  # on the spot, as told
        left, right = rig.sim.wheel_speeds()
        return left < -10.0 < 10.0 < right

    # the wheels are read while cmd_vel still comes, not after: the watchdog (on the I/O
    # thread, 0.5 s after the last cmd_vel) stopped them when the goal's result or the read
    # came later than that after a fixed 0.6 s of publishing
    rig.spin_for(0.6, every=lambda: pub.publish(turn))
    assert rig.spin_until(lambda: handle.result_future.done() and turning(), 20.0,
                          every=lambda: pub.publish(turn)), rig.sim.wheel_speeds()
    # and it turns where cmd_vel took over, not at the end of the path (0.3 m) that went on
    assert rig.odom_truth()[0] < 0.2, rig.odom_truth()
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_ABORTED and result.message == "preempted by a cmd_vel command"
    assert rig.sim.command_counts().get("ClearPath", 0) >= 3  # the connection's, the path's, its end


@pytest.mark.parametrize("name", ["follow_path", "drive_straight", "go_to_pose"])
def test_a_turn_that_preempts_a_path_ends_the_path_on_the_robot(rig, name):
    """Anki's firmware takes a TurnInPlace during a path without ending the path, and
    hands the treads back to it when the turn is done (the simulator since): a turn_in_place
    goal that preempts a path goal must end that path first, or the robot drives on along
    the old path after the turn (and ignores cmd_vel meanwhile)."""
    handle = rig.send(name, WHEEL_GOALS[name])
    assert handle is not None
    rig.spin_for(0.6)
    turn = rig.send("turn_in_place", TurnInPlace.Goal(angle=0.5, speed=2.0))
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.message == "preempted by a new goal (turn_in_place)"
    status, result = rig.wait(turn)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    rig.spin_for(0.5)
    assert rig.still(0.4), " ".join(m.NAME for _, m in rig.sim.commands()[-8:])  # no path resumed
    assert not rig.sim.status() & RobotStatusFlag.IS_PATHING


def test_a_goal_right_after_teleop_is_not_stopped_by_the_cmd_vel_watchdog(rig):
    pub = rig.probe.create_publisher(Twist, "cmd_vel", 1)
    assert rig.spin_until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
    twist = Twist()
    twist.linear.x = 0.05
    pub.publish(twist)
    assert rig.spin_until(lambda: rig.odom_truth()[0] > 0.002, 3.0)
    # the watchdog would send DriveWheels(0, 0) cmd_vel_timeout (0.5 s) after that cmd_vel
    status, result = rig.run("drive_straight", DriveStraight.Goal(distance=0.1, speed=0.08))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message


# ----------------------------------------------------------------------------- paths

def test_square_path_ends_where_the_truth_says(rig):
    side, step = 0.15, 0.01
    n = int(round(side / step))
    points = []
    for (x0, y0, yaw) in ((0, 0, 0), (side, 0, math.pi / 2), (side, side, math.pi),
                          (0, side, -math.pi / 2)):
        points += [(x0 + math.cos(yaw) * step * k, y0 + math.sin(yaw) * step * k, yaw) for k in range(n)]
    points.append((0.0, 0.0, 0.0))
    feedback: list = []
    status, result = rig.run("follow_path", path_goal(points, speed=0.2, turn_speed=4.0), 30.0, feedback)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.num_segments == 8 and result.segments_completed == 8  # 4 lines, 4 turns
    x, y, yaw = rig.odom_truth()
    assert math.hypot(x, y) < 0.01 and abs(yaw) < 0.035
    assert result.final_pose.header.frame_id == "odom"
    assert result.final_pose.pose.position.x == pytest.approx(x, abs=1e-3)
    seen = sorted({f.current_segment for f in feedback})
    assert len(seen) >= 6 and seen[-1] == 7  # feedback followed the robot's curr_path_segment
    remaining = [f.distance_remaining for f in feedback]
    assert remaining[0] > 0.5 and remaining[-1] < 0.05


def test_arc_path_ends_where_the_truth_says(rig):
    r = 0.15
    points = [(r * math.sin(a), r - r * math.cos(a), a)
              for a in (i * (math.pi / 2) / 30 for i in range(31))]
    status, result = rig.run("follow_path", path_goal(points, speed=0.15))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.num_segments == 2  # one arc, and the final turn
    assert rig.sim.command_counts()["AppendPathSegArc"] == 1
    x, y, yaw = rig.odom_truth()
    assert (x, y) == pytest.approx((r, r), abs=0.01) and yaw == pytest.approx(math.pi / 2, abs=0.05)


def test_point_turn_path_turns_in_place(rig):
    status, result = rig.run("follow_path", path_goal([(0.0, 0.0, 2.0)]))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.sim.command_counts()["AppendPathSegPointTurn"] == 1
    x, y, yaw = rig.odom_truth()
    assert math.hypot(x, y) < 0.003 and yaw == pytest.approx(2.0, abs=0.035)


def test_a_planners_path_starting_at_the_centre_of_the_robots_cell_is_driven_without_turning_round(rig):
    """NavFn's path on the 1 cm costmap of config/nav2_params.yaml starts at the centre of the
    cell the robot is in, here 6 mm behind and beside it: the robot was sent a point turn to
    that pose (about 3/4 of a half turn), a line of 6 mm and a point turn back before the path.
    The poses within 10 mm of the robot are its position: one line and the final turn."""
    points = [(-0.0045 + 0.01 * k, 0.0045, 0.0) for k in range(16)]
    ctx = rig.node._motion._goals["follow_path"].ctx
    lines: List[str] = []
    ctx.log = LogRecorder(ctx.log, lines)
    feedback: list = []
    try:
        status, result = rig.run("follow_path", path_goal(points, speed=0.1), feedback=feedback)
    finally:
        ctx.log = ctx.log.logger
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    counts = rig.sim.command_counts()
    assert (counts["AppendPathSegLine"], counts["AppendPathSegPointTurn"]) == (1, 1), counts
    assert (result.num_segments, result.segments_completed) == (2, 2)
    said = [m for m in lines if m.startswith("follow_path: 2 segments")]
    assert said and ", in odom, from path.poses[2] (path.poses[0..1] within 10 mm of the robot, or within " \
                    "20 mm and passed by it: taken as its position): LINE " in said[0], lines
    yaws = [2.0 * math.atan2(f.current_pose.pose.orientation.z, f.current_pose.pose.orientation.w)
            for f in feedback]
    assert yaws and max(abs(wrap(a)) for a in yaws) < 0.1  # it never turned round
    x, y, yaw = rig.odom_truth()
    assert (x, y) == pytest.approx(points[-1][:2], abs=0.01) and abs(yaw) < 0.05


def test_a_point_turn_segment_beyond_pi_is_taken_the_short_way_with_a_warning(rig):
    """A POINT_TURN segment's heading of 3*pi/2 is the heading -pi/2: the robot turns a quarter
    turn clockwise, the short way, as an absolute turn_in_place does; but where turn_in_place
    says how it took the angle, the segment's was wrapped silently, and a user who meant three
    quarters of a turn counter-clockwise (or a whole turn with 2*pi, which turns nothing) was
    not told. The log says so."""
    motion = rig.node._motion
    lines: List[str] = []
    motion._log = LogRecorder(motion._log, lines)
    try:
        status, result = rig.run("follow_path", FollowPath.Goal(segments_frame_id="odom", segments=[
            PathSegment(type=PathSegment.POINT_TURN, heading=3 * math.pi / 2)]))
    finally:
        motion._log = motion._log.logger
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.odom_truth()[2] == pytest.approx(-math.pi / 2, abs=0.035)
    assert "follow_path: segments[0].heading = 4.71239 rad is a heading: taken as -1.5708 rad, the same " \
           "heading within -pi..pi, which the robot turns to the short way (for whole turns, use " \
           "turn_in_place)" in lines, lines


def test_path_ending_in_a_point_turn_gives_float_feedback(rig):
    # Issue #15: on the last segment, a point turn, distance_remaining was sum([]) == 0, an
    # int, in a float64 field: a C-asserts build of the interfaces aborted the driver, a
    # Release one sent 0 as garbage. With ROS_PYTHON_CHECK_FIELDS=1 (conftest.py) the
    # message classes check every assignment, so the driver's executor would raise here.
    import os
    assert os.environ.get("ROS_PYTHON_CHECK_FIELDS") == "1"
    goal = FollowPath.Goal(segments=[
        PathSegment(type=PathSegment.LINE, start_x=0.0, start_y=0.0, end_x=0.05, end_y=0.0,
                    speed=0.15),
        PathSegment(type=PathSegment.POINT_TURN, start_x=0.05, start_y=0.0, heading=math.pi,
                    tolerance=0.035)])
    feedback: list = []
    status, result = rig.run("follow_path", goal, feedback=feedback)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert (result.num_segments, result.segments_completed) == (2, 2)
    on_turn = [f for f in feedback if f.current_segment == 1]
    assert on_turn, [f.current_segment for f in feedback]  # a half turn takes > 0.1 s
    for f in on_turn:
        assert type(f.distance_remaining) is float and f.distance_remaining == 0.0
    for f in feedback:
        assert type(f.current_pose.pose.position.x) is float
    assert type(result.final_pose.pose.orientation.z) is float


# Issue #7: a path started right after a turn used to stick on segment 0 now and then (the
# simulator's odometry dropped the translation while the path follower steered out a
# heading error of ~1e-10 rad); test_sim_model.py::test_path_after_a_turn_* pins it down.
def test_explicit_segments_relative_to_the_robot(rig):
    assert rig.run("turn_in_place", TurnInPlace.Goal(angle=math.pi / 2))[0] == GoalStatus.STATUS_SUCCEEDED
    _, _, yaw0 = rig.odom_truth()
    goal = FollowPath.Goal(segments_frame_id="base_footprint")
    goal.segments = [
        PathSegment(type=PathSegment.LINE, start_x=0.0, start_y=0.0, end_x=0.1, end_y=0.0, speed=0.15),
        PathSegment(type=PathSegment.POINT_TURN, start_x=0.1, start_y=0.0, heading=-math.pi / 2,
                    tolerance=0.035),
        PathSegment(type=PathSegment.LINE, start_x=0.1, start_y=0.0, end_x=0.1, end_y=-0.05),
    ]
    status, result = rig.run("follow_path", goal)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    # in the robot's start frame: 0.1 ahead, 0.05 to the right, facing right
    x, y, yaw = rig.odom_truth()
    c, s = math.cos(yaw0), math.sin(yaw0)
    assert (x * c + y * s, -x * s + y * c) == pytest.approx((0.1, -0.05), abs=0.01)
    assert wrap(yaw - yaw0 + math.pi / 2) == pytest.approx(0.0, abs=0.035)


def test_cliff_interrupts_a_path_with_the_reason(rig):
    # as a Nav2 costmap's obstacle layer subscribes (sensor data QoS)
    clouds = rig.listen("cliff", PointCloud2, "cliff/points", qos_profile_sensor_data)
    tfs = rig.listen("tf", TFMessage, "/tf")
    # carried (odometry does not see it) to 10 cm from the table's +x edge, facing it
    rig.sim.teleport(480.0, 0.0, 0.0)
    status, result = rig.run("drive_straight", DriveStraight.Goal(distance=0.3, speed=0.1))
    assert status == GoalStatus.STATUS_ABORTED
    assert result.message.startswith("interrupted: cliff detected")
    assert 0.05 < result.distance_traveled < 0.1
    assert rig.still(0.3)
    # the edge for a costmap: a row of points beyond the robot's front, on the ground, in
    # base_footprint, stamped as a state whose transform /tf carries
    assert rig.spin_until(lambda: clouds, 2.0), "no cliff/points"
    cloud = clouds[-1]
    assert (cloud.header.frame_id, cloud.height, cloud.width, cloud.point_step) == ("base_footprint", 1, 5, 12)
    assert [(f.name, f.offset, f.datatype) for f in cloud.fields] == [
        ("x", 0, PointField.FLOAT32), ("y", 4, PointField.FLOAT32), ("z", 8, PointField.FLOAT32)]
    points = [struct.unpack_from("<3f", bytes(cloud.data), 12 * i) for i in range(cloud.width)]
    assert all(x == pytest.approx(0.064) and z == 0.0 for x, _, z in points)
    assert [round(y, 3) for _, y, _ in points] == [-0.02, -0.01, 0.0, 0.01, 0.02]
    assert any(t.header.stamp == cloud.header.stamp for m in tfs for t in m.transforms)
    # at the edge: the robot stopped its treads once and would not stop them again, so a goal
    # that may drive forwards is refused; backing away and turning are not
    said = "the robot's cliff sensor sees no floor ahead (stop_on_cliff): it could drive off the edge"
    for name, goal in (("drive_straight", DriveStraight.Goal(distance=0.05)),
                       ("follow_path", WHEEL_GOALS["follow_path"]),
                       ("go_to_pose", WHEEL_GOALS["go_to_pose"])):
        rig.rejected(name, goal, said)
    # a go_to_pose with nothing to drive, and a path that only backs away, are not forwards
    here = pose_stamped(0.0, 0.0, 0.0, frame="base_footprint")
    status, result = rig.run("go_to_pose", GoToPose.Goal(pose=here, position_tolerance=0.01,
                                                         heading_tolerance=0.05))
    assert status == GoalStatus.STATUS_SUCCEEDED and "nothing to drive" in result.message, result.message
    back = FollowPath.Goal(segments_frame_id="base_footprint", segments=[
        PathSegment(type=PathSegment.LINE, start_x=0.0, start_y=0.0, end_x=-0.02, end_y=0.0, speed=-0.05)])
    status, result = rig.run("follow_path", back)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    status, result = rig.run("drive_straight", DriveStraight.Goal(distance=-0.03))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    # the floor again: an empty cloud
    assert rig.spin_until(lambda: clouds[-1].width == 0, 2.0)
    assert len(clouds) == 2 and bytes(clouds[-1].data) == b""


# ----------------------------------------------------------------------------- go_to_pose and frames

def test_go_to_pose_in_odom_within_tolerances(rig):
    goal = GoToPose.Goal(pose=pose_stamped(0.2, 0.1, 1.0), position_tolerance=0.01,
                         heading_tolerance=0.035, speed=0.15)
    feedback: list = []
    status, result = rig.run("go_to_pose", goal, feedback=feedback)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, yaw = rig.odom_truth()
    assert math.hypot(x - 0.2, y - 0.1) <= 0.01 and abs(wrap(yaw - 1.0)) <= 0.035
    assert result.position_error <= 0.01 and abs(result.heading_error) <= 0.035
    assert result.attempts in (1, 2)
    assert feedback[-1].distance_remaining < feedback[0].distance_remaining
    # an arc when the goal lies on the circle tangent to the heading
    x0, y0, a0 = rig.odom_truth()
    r = 0.1
    target = (x0 - r * math.sin(a0) + r * math.sin(a0 + math.pi / 2),
              y0 + r * math.cos(a0) - r * math.cos(a0 + math.pi / 2), a0 + math.pi / 2)
    arcs = rig.sim.command_counts().get("AppendPathSegArc", 0)
    status, result = rig.run("go_to_pose", GoToPose.Goal(pose=pose_stamped(*target)))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.sim.command_counts()["AppendPathSegArc"] == arcs + 1
    x, y, yaw = rig.odom_truth()
    assert math.hypot(x - target[0], y - target[1]) <= 0.01


def test_go_to_pose_in_a_frame_from_tf_static(rig):
    broadcaster = rig.probe.create_publisher(TFMessage, "/tf_static", STATIC)
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = "odom", "table_corner"
    t.transform.translation.x, t.transform.translation.y = 0.1, 0.05
    (t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z,
     t.transform.rotation.w) = quat(math.pi / 2)
    broadcaster.publish(TFMessage(transforms=[t]))
    # the driver follows /tf and /tf_static only once a goal needs them (it would wake up
    # for its own odometry transforms otherwise), then the goal waits for the transforms
    rig.spin_for(0.3)
    assert rig.probe.count_subscribers("/tf_static") == 0
    # (0.1, 0) in table_corner = (0.1, 0.15) in odom, heading pi/2 + 0 = pi/2
    status, result = rig.run("go_to_pose", GoToPose.Goal(pose=pose_stamped(0.1, 0.0, 0.0, "table_corner")))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, yaw = rig.odom_truth()
    assert math.hypot(x - 0.1, y - 0.15) <= 0.01 and abs(wrap(yaw - math.pi / 2)) <= 0.05
    assert rig.probe.count_subscribers("/tf_static") == 1 and rig.probe.count_subscribers("/tf") == 1
    rig.rejected("go_to_pose", GoToPose.Goal(pose=pose_stamped(1.0, 0.0, 0.0, "map")),
                 "pose.header.frame_id = 'map': no transform to the driver's odom frame 'odom' "
                 "(frame 'map' is unknown")


def test_follow_path_in_a_frame_from_tf(rig):
    # map -> odom on /tf at 20 Hz, as a localisation would publish it: odom is 0.05 m
    # ahead of map's origin, so x = 0.15 in map is x = 0.1 in odom
    tf_pub = rig.probe.create_publisher(TFMessage, "/tf", QoSProfile(depth=100))
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = "map", "odom"
    t.transform.translation.x = 0.05
    t.transform.rotation.w = 1.0
    rig.probe.create_timer(0.05, lambda: tf_pub.publish(TFMessage(transforms=[t])))
    status, result = rig.run("follow_path", path_goal([(0.1, 0.0, 0.0), (0.15, 0.0, 0.0)],
                                                      frame="map"))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, yaw = rig.odom_truth()
    assert (x, y) == pytest.approx((0.1, 0.0), abs=0.01) and abs(yaw) < 0.03
    assert result.final_pose.header.frame_id == "odom"


def test_follow_path_waits_only_for_the_frames_of_the_field_it_uses(rig):
    """A frame in the field a goal leaves unused (no map -> odom anywhere here) is not
    waited for: the goal used to wait TF_WAIT_S for it, follow /tf from then on, and be
    accepted anyway."""
    motion = rig.node._motion
    segments = FollowPath.Goal(segments_frame_id="base_footprint", segments=[
        PathSegment(type=PathSegment.LINE, start_x=0.0, start_y=0.0, end_x=0.03, end_y=0.0)])
    segments.path.header.frame_id = "map"
    poses = path_goal([(0.03, 0.0, 0.0)], frame="map", segments_frame_id="map")
    for pose in poses.path.poses:
        pose.header.frame_id = "base_footprint"  # each pose's own frame: the path's is unused
    assert motion._goal_frames("follow_path", segments) == []
    assert motion._goal_frames("follow_path", poses) == []
    # a pose without a frame id is in the path's, and only the poses count then
    assert motion._goal_frames("follow_path", path_goal([(0.1, 0.0, 0.0)], frame="map",
                                                        segments_frame_id="table")) == ["map"]
    for goal in (segments, poses):  # (a wait for tf would have subscribed to /tf: checked below)
        handle = rig.send("follow_path", goal)
        assert handle is not None, "goal rejected"
        status, result = rig.wait(handle)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert not motion._tf_subscribed and rig.probe.count_subscribers("/tf") == 0


@pytest.mark.parametrize("interruption", ["emergency_stop", "deactivation"])
def test_a_goal_waiting_for_tf_is_rejected_by_an_emergency_stop_or_deactivation(rig, interruption):
    """A goal waiting for its transforms was checked against the driver only after the
    wait, and the emergency stop's and deactivation's abort did not reach it: engaged and
    released (deactivated and activated) meanwhile, the goal was accepted once map -> odom
    came and drove. It is rejected with the reason, and nothing moves."""
    motion = rig.node._motion
    lines: List[str] = []
    motion._log = LogRecorder(motion._log, lines)
    tf_pub = rig.probe.create_publisher(TFMessage, "/tf", QoSProfile(depth=100))
    future = rig.client("go_to_pose").send_goal_async(
        GoToPose.Goal(pose=pose_stamped(0.15, 0.0, 0.0, "map")))
    assert rig.spin_until(lambda: motion._tf_subscribed, 2.0)
    rig.spin_for(0.2)
    assert not future.done(), "the goal does not wait for tf"
    if interruption == "emergency_stop":
        rig.estop(True)
        rig.spin_for(0.2)
        rig.estop(False)
        reason = "emergency stop engaged"
    else:
        rig.node.trigger_deactivate()
        rig.spin_for(0.2)
        rig.node.trigger_activate()
        reason = "the driver was deactivated"
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = "map", "odom"
    t.transform.rotation.w = 1.0
    rig.spin_for(0.3, every=lambda: tf_pub.publish(TFMessage(transforms=[t])))
    assert rig.spin_until(future.done, 5.0)
    motion._log = motion._log.logger
    assert not future.result().accepted, "the goal was accepted after the release"
    assert any("go_to_pose goal rejected: " in m and reason in m for m in lines), lines
    assert stays_still(rig)


def test_go_to_pose_relative_to_the_robot(rig):
    assert rig.run("turn_in_place", TurnInPlace.Goal(angle=1.0))[0] == GoalStatus.STATUS_SUCCEEDED
    _, _, yaw0 = rig.odom_truth()
    status, result = rig.run("go_to_pose", GoToPose.Goal(pose=pose_stamped(0.1, 0.0, 0.0, "base_footprint")))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, yaw = rig.odom_truth()
    assert (x, y) == pytest.approx((0.1 * math.cos(yaw0), 0.1 * math.sin(yaw0)), abs=0.01)
    assert wrap(yaw - yaw0) == pytest.approx(0.0, abs=0.05)


# ----------------------------------------------------------------------------- refused goals

def test_animations_and_motion_goals_take_the_motors_from_each_other(rig):
    """An animation that moves a motor preempts the motion goal on it, and a motion goal
    preempts the animation that moves its motor, each saying which (the newest command
    wins, as between motion goals): they drove the same motors at once, and the motion
    goal ended "interrupted by the robot". A goal on a motor the animation leaves alone
    runs beside it."""
    drive = rig.send("drive_straight", DriveStraight.Goal(distance=0.15, speed=0.04))
    rig.spin_for(0.5)
    animation = rig.send("play_animation", PlayAnimation.Goal(name="look_around"))
    status, result = rig.wait(drive)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.message == "preempted by play_animation 'look_around', which moves the treads"
    head = rig.send("set_head_angle", SetHeadAngle.Goal(angle=-0.2))
    status, result = rig.wait(animation)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.message == "preempted by a new set_head_angle goal, which moves the head"
    status, result = rig.wait(head)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    nod = rig.send("play_animation", PlayAnimation.Goal(name="nod_yes", loops=3))  # head only
    rig.spin_for(0.3)
    status, result = rig.run("set_lift_height", SetLiftHeight.Goal(height=0.06))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert not nod.result_future.done()  # still nodding
    assert rig.wait(nod)[0] == GoalStatus.STATUS_SUCCEEDED


def test_the_documented_limits_are_in_range(rig):
    """The head's and the lift's limits as the docs and the action definitions print them
    (-0.436..0.777 rad, 0.032..0.092 m): 0.777 is 44.5 degrees rounded up, and was refused
    as "outside the head's range -0.436..0.777 rad"."""
    for goal in (SetHeadAngle.Goal(angle=0.777), SetHeadAngle.Goal(angle=-0.436)):
        status, result = rig.run("set_head_angle", goal)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    status, result = rig.run("set_lift_height", SetLiftHeight.Goal(height=0.092))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    rig.rejected("set_head_angle", SetHeadAngle.Goal(angle=0.778), "outside the head's range")


def test_a_bad_goal_sent_again_and_again_is_said_once_with_the_count_of_the_others(rig):
    """A client retrying drive_straight with distance = NaN at 5 Hz had every rejection
    logged, 50 identical warnings in 10 s. The first of a kind (the action and its reason,
    whatever the values in it) is said at once, the others are counted into the next line
    of that kind, or the last one held back once the 2 s are over; another kind (another
    field, another action) is said at once."""
    motion = rig.node._motion
    lines: List[str] = []
    motion._log = LogRecorder(motion._log, lines)
    for distance in (math.nan, math.inf, math.nan, -math.inf):
        assert rig.send("drive_straight", DriveStraight.Goal(distance=distance)) is None
    assert rig.send("drive_straight", DriveStraight.Goal(distance=0.1, speed=math.nan)) is None
    assert rig.send("turn_in_place", TurnInPlace.Goal(angle=math.nan)) is None
    said = [line for line in lines if "goal rejected" in line]
    assert [line.split(": ")[:2] for line in said] == [
        ["drive_straight goal rejected", "distance is nan"], ["drive_straight goal rejected", "speed is nan"],
        ["turn_in_place goal rejected", "angle is nan"]], said
    assert rig.spin_until(lambda: len(lines) > len(said), 4.0), lines  # the 1 s timer, once the 2 s are over
    extra = lines[len(said):]
    assert len(extra) == 1 and extra[0].startswith("drive_straight goal rejected: distance is -inf: not a "
                                                   "finite number (and 2 more like it in the last "), extra


def test_bad_goals_are_rejected_with_a_message(rig):
    nan = math.nan
    rig.rejected("set_head_angle", SetHeadAngle.Goal(angle=nan), "angle is nan: not a finite number")
    rig.rejected("set_head_angle", SetHeadAngle.Goal(angle=1.5), "outside the head's range")
    rig.rejected("set_lift_height", SetLiftHeight.Goal(height=0.2), "outside the lift's range")
    rig.rejected("set_lift_height", SetLiftHeight.Goal(height=0.05, max_speed=-1.0),
                 "max_speed = -1 rad/s: must not be negative (0 = default); it is a magnitude: the lift moves "
                 "towards the height given")
    # a negative speed: what sets the direction instead
    rig.rejected("drive_straight", DriveStraight.Goal(distance=0.1, speed=-0.1),
                 "speed = -0.1 m/s: must not be negative (0 = default); it is a magnitude: a negative distance "
                 "drives backwards")
    rig.rejected("turn_in_place", TurnInPlace.Goal(angle=1.0, speed=-1.0),
                 "speed = -1 rad/s: must not be negative (0 = default); it is a magnitude: the sign of angle sets "
                 "the direction (negative: clockwise)")
    rig.rejected("turn_in_place", TurnInPlace.Goal(angle=1.0, tolerance=0.0),
                 "tolerance = 0 rad cannot be reached")
    rig.rejected("drive_straight", DriveStraight.Goal(distance=math.inf), "distance is inf")
    # the robot keeps a path's speed in whole mm/s: 0.5 mm/s would be 0 there
    rig.rejected("drive_straight", DriveStraight.Goal(distance=0.01, speed=0.0005),
                 "speed = 0.0005 m/s: the robot takes whole mm/s and mm/s^2 on a path")
    rig.rejected("follow_path", FollowPath.Goal(), "empty goal: give path.poses or segments")
    # the frame is named where it was given: the path's header, or a pose's own
    rig.rejected("follow_path", path_goal([(0.1, 0.0, 0.0)], frame="nowhere"),
                 "path.header.frame_id = 'nowhere': no transform")
    own = path_goal([(0.1, 0.0, 0.0), (0.2, 0.0, 0.0)])
    own.path.poses[1].header.frame_id = "elsewhere"
    rig.rejected("follow_path", own, "path.poses[1].header.frame_id = 'elsewhere': no transform")
    rig.rejected("follow_path", path_goal([(nan, 0.0, 0.0)]), "path.poses[0].position.x is nan")
    rig.rejected("follow_path", path_goal([(0.1, 0.0, 0.0)], fit_tolerance=0.0),
                 "fit_tolerance = 0 m cannot be reached")
    gap = FollowPath.Goal(segments=[
        PathSegment(type=PathSegment.LINE, end_x=0.1),
        PathSegment(type=PathSegment.LINE, start_x=0.3, end_x=0.4)])
    rig.rejected("follow_path", gap, "segments[1]: starts 200.0 mm from where segments[0] ends")
    # a path that starts away from the robot: the simulator drove an unplanned approach to
    # it; Anki's firmware gives a path up 50 mm off it
    far = FollowPath.Goal(segments_frame_id="base_footprint", segments=[
        PathSegment(type=PathSegment.LINE, start_x=0.3, start_y=0.2, end_x=0.4, end_y=0.2)])
    rig.rejected("follow_path", far, "segments[0]: starts 361 mm from the robot, which follows "
                 "a path only from on it")
    rig.rejected("go_to_pose", GoToPose.Goal(pose=pose_stamped(0.1, 0.0, 0.0), position_tolerance=0.0),
                 "position_tolerance = 0 m cannot be reached")
    rig.rejected("go_to_pose", GoToPose.Goal(pose=pose_stamped(0.1, 0.0, 0.0), heading_tolerance=0.0),
                 "heading_tolerance = 0 rad cannot be reached")
    zero = GoToPose.Goal(pose=pose_stamped(0.1, 0.0, 0.0))
    zero.pose.pose.orientation.w = 0.0
    rig.rejected("go_to_pose", zero, "pose.orientation is all zeros")
    assert rig.still(0.1)  # nothing reached the robot
    for name in ("ExecutePath", "AppendPathSegLine", "TurnInPlace"):
        assert rig.sim.command_counts().get(name, 0) == 0, name


def test_goal_speeds_beyond_max_wheel_speed_are_clamped_naming_the_parameter(rclpy_context, sim, rclpy_log):
    """max_wheel_speed caps the goals' speeds too (drive_straight, go_to_pose, follow_path's
    and its segments'), and the warning said only "speed = 0.1 m/s is beyond 0.05 m/s:
    clamped", leaving the user to guess what the 0.05 was: it names the parameter."""
    rig = Rig(rclpy_context, sim, max_wheel_speed=0.05)
    try:
        status, result = rig.run("drive_straight", DriveStraight.Goal(distance=0.02, speed=0.1))
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
        segments = FollowPath.Goal(segments_frame_id="base_footprint", segments=[
            PathSegment(type=PathSegment.LINE, end_x=0.02, speed=0.12)])
        status, result = rig.run("follow_path", segments)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
        lines = [line.message for line in rclpy_log.of(rig.node)]
        assert "drive_straight: speed = 0.1 m/s is beyond max_wheel_speed = 0.05 m/s: clamped to " \
               "0.05 m/s" in lines, lines
        assert "follow_path: segments[0].speed = 0.12 m/s is beyond max_wheel_speed = 0.05 m/s: " \
               "clamped to 0.05 m/s" in lines, lines
    finally:
        rig.close()


def test_goals_that_would_take_longer_than_ten_minutes_are_rejected(rig):
    """A speed far too slow for the way (a unit or a digit wrong), or a way far too long for
    the speed, is refused with the time it would take: it was accepted and held the motor
    for hours (a deadline of twice that)."""
    too_long = "a goal may take at most 600 s: raise them or split the motion"
    # (2 mm/s: slower than 1 mm/s the robot's path would not move at all, refused apart)
    rig.rejected("drive_straight", DriveStraight.Goal(distance=2.0, speed=0.002), too_long)
    rig.rejected("drive_straight", DriveStraight.Goal(distance=10.0, speed=0.001),
                 "it would take about 10000 s at the speeds and accelerations given")
    # a speed that is fine with an acceleration far too small: the hint said "raise the
    # speed" alone
    rig.rejected("set_head_angle", SetHeadAngle.Goal(angle=0.7, accel=1e-7),
                 "at the speeds and accelerations given; a goal may take at most 600 s: raise them")
    # (no turn_in_place: at most 10 turns, at 0.4 rad/s at the least, take under 160 s)
    rig.rejected("set_head_angle", SetHeadAngle.Goal(angle=0.7, max_speed=1e-5), too_long)
    rig.rejected("set_lift_height", SetLiftHeight.Goal(height=0.09, max_speed=1e-5), too_long)
    rig.rejected("go_to_pose", GoToPose.Goal(pose=pose_stamped(1e6, 0.0, 0.0)), too_long)
    rig.rejected("go_to_pose", GoToPose.Goal(pose=pose_stamped(1e30, 0.0, 0.0)),
                 "it would take about practically forever")
    rig.rejected("follow_path", path_goal([(1.5, 0.0, 0.0)], speed=0.002), too_long)
    rig.rejected("follow_path", FollowPath.Goal(segments=[
        PathSegment(type=PathSegment.LINE, end_x=1000.0, speed=0.1)]), too_long)
    assert rig.still(0.1)  # nothing reached the robot
    for name in ("ExecutePath", "AppendPathSegLine", "TurnInPlace", "SetHeadAngle", "SetLiftHeight"):
        assert rig.sim.command_counts().get(name, 0) == 0, name
    # slow but within the limit is taken: 2 cm at 1 mm/s (20 s; the wait within pytest-timeout's
    # 120 s, so that a goal that does not end is reported here)
    status, result = rig.run("drive_straight", DriveStraight.Goal(distance=0.02, speed=0.001),
                             timeout=80.0)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message


def test_an_absolute_heading_beyond_pi_is_taken_the_short_way_with_a_warning(rig):
    """3*pi/2 with is_absolute is the heading -pi/2: the robot turns the short way (a quarter
    turn clockwise), and the log says how the angle was taken (it was wrapped silently)."""
    motion = rig.node._motion
    lines: List[str] = []
    motion._log = LogRecorder(motion._log, lines)
    try:
        status, result = rig.run("turn_in_place", TurnInPlace.Goal(angle=3 * math.pi / 2,
                                                                   is_absolute=True))
    finally:
        motion._log = motion._log.logger
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.odom_truth()[2] == pytest.approx(-math.pi / 2, abs=0.03)
    assert result.turned == pytest.approx(-math.pi / 2, abs=0.03)
    assert any("turn_in_place: angle = 4.71239 rad with is_absolute is a heading: taken as "
               "-1.5708 rad" in line for line in lines), lines


def test_an_orientation_that_is_not_a_unit_quaternion_is_normalised_saying_the_heading_it_means(rig):
    """A pose's orientation was normalised silently: a yaw of 1.57 written into z,
    (0, 0, 1.57, 1), was taken as the heading 2.0 rad without a word, and one of huge
    components, (0, 0, 1e200, 1e200), whose length overflowed, as the heading 0 (the robot
    did not turn: "already within the tolerances"). It is normalised without overflow, and
    when the goal uses its heading (go_to_pose's pose, a path's last pose) a warning gives
    the heading it means; a rounded quaternion, or a path's other poses, say nothing."""
    motion = rig.node._motion
    lines: List[str] = []
    motion._log = LogRecorder(motion._log, lines)
    try:
        x, y, _ = rig.odom_truth()
        huge = GoToPose.Goal(pose=pose_stamped(x, y, 0.0))
        huge.pose.pose.orientation.z = huge.pose.pose.orientation.w = 1e200
        status, result = rig.run("go_to_pose", huge)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
        assert rig.odom_truth()[2] == pytest.approx(math.pi / 2, abs=0.06), result.message
        assert any("go_to_pose: pose.orientation = (0, 0, 1e+200, 1e+200) is not a unit quaternion "
                   "(length 1.414e+200): normalised, it means a heading of 1.5708 rad" in line
                   for line in lines), lines
        del lines[:]
        path = path_goal([(0.02, 0.0, 0.0), (0.04, 0.0, 0.0)], frame="base_footprint")
        path.path.poses[0].pose.orientation.z = 3.0            # not used: nothing said
        path.path.poses[1].pose.orientation.z, path.path.poses[1].pose.orientation.w = 1.57, 1.0
        status, result = rig.run("follow_path", path)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
        said = [line for line in lines if "unit quaternion" in line]
        assert said == ["follow_path: path.poses[1].orientation = (0, 0, 1.57, 1) is not a unit quaternion "
                        "(length 1.861): normalised, it means a heading of 2.0073 rad (a heading h is "
                        "z = sin(h/2), w = cos(h/2))"], lines
        del lines[:]
        rounded = GoToPose.Goal(pose=pose_stamped(*rig.odom_truth()[:2], 0.0))
        rounded.pose.pose.orientation.z, rounded.pose.pose.orientation.w = 0.479, 0.878
        assert rig.send("go_to_pose", rounded) is not None
        assert not [line for line in lines if "unit quaternion" in line], lines
    finally:
        motion._log = motion._log.logger


def test_an_orientation_pointing_straight_up_or_down_has_no_heading_and_is_refused(rig):
    """A pose whose x axis points (nearly) straight up or down (a pitch of +-90 deg: a pose
    in a camera's frame, roll, pitch and yaw in the wrong order) has no heading on the floor,
    and go_to_pose turned the robot to whatever heading the rounding of its components made.
    Where the goal uses its heading (go_to_pose's pose, a path's last pose, the frame of the
    segments) it is refused saying so, as it is in odom: a frame pitched in tf counts, and a
    pose that undoes the pitch is fine. A merely tilted pose keeps the heading of its
    projection on the floor, as before, and a path's other poses are not looked at."""
    def pitched(pose, pitch: float, yaw: float = 0.3, roll: float = 0.0) -> None:
        o = pose.orientation
        o.x, o.y, o.z, o.w = quaternion_from_rpy(roll, pitch, yaw)

    no_heading = "it has no heading on the floor; give a heading h on the floor alone: z = sin(h/2)"
    down = GoToPose.Goal(pose=pose_stamped(0.1, 0.0, 0.0))
    pitched(down.pose.pose, math.pi / 2)
    rig.rejected("go_to_pose", down, "pose.orientation points its x axis straight down in odom (pitch "
                 "+90.0 deg; the x axis's horizontal part 0.000 of its length, under 0.01): " + no_heading)
    nearly_up = GoToPose.Goal(pose=pose_stamped(0.1, 0.0, 0.0))
    pitched(nearly_up.pose.pose, -math.pi / 2 + 0.005, roll=0.4)  # (5 mrad: under 0.01)
    rig.rejected("go_to_pose", nearly_up, "pose.orientation points its x axis straight up in odom "
                 "(pitch -89.7 deg; the x axis's horizontal part 0.005 of its length")
    path = path_goal([(0.05, 0.0, 0.0), (0.1, 0.0, 0.0)])
    pitched(path.path.poses[1].pose, math.pi / 2)
    rig.rejected("follow_path", path, "path.poses[1].orientation points its x axis straight down in odom")
    # a frame looking straight down (its x axis), as a camera's over the floor
    broadcaster = rig.probe.create_publisher(TFMessage, "/tf_static", STATIC)
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = "odom", "overhead"
    t.transform.translation.z = 0.3
    (t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z,
     t.transform.rotation.w) = quaternion_from_rpy(0.0, math.pi / 2, 0.0)
    broadcaster.publish(TFMessage(transforms=[t]))
    rig.rejected("go_to_pose", GoToPose.Goal(pose=pose_stamped(0.0, 0.0, 0.0, "overhead")),
                 "pose.orientation points its x axis straight down in odom (pitch +90.0 deg")
    rig.rejected("follow_path", FollowPath.Goal(segments_frame_id="overhead", segments=[
        PathSegment(type=PathSegment.LINE, end_x=0.05)]),
        "segments_frame_id = 'overhead' points its x axis straight down in odom (pitch +90.0 deg")
    assert rig.still(0.1)  # nothing reached the robot
    for name in ("ExecutePath", "AppendPathSegLine", "TurnInPlace"):
        assert rig.sim.command_counts().get(name, 0) == 0, name
    # a pose in that frame that pitches back up is level in odom: its heading is the yaw's
    undone = GoToPose.Goal(pose=pose_stamped(0.0, 0.0, 0.0, "overhead"))
    # (0.3 m down the frame's x axis, the floor, 0.05 m along its z axis, odom's x)
    undone.pose.pose.position.x, undone.pose.pose.position.z = 0.3, 0.05
    pitched(undone.pose.pose, -math.pi / 2, yaw=0.0)
    status, result = rig.run("go_to_pose", undone)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, yaw = rig.odom_truth()
    assert math.hypot(x - 0.05, y) <= 0.01 and abs(yaw) <= 0.05
    # tilted poses keep working: a path's first pose pointing up is not used, its last pose
    # tilted by 0.4 rad (and rolled) is the heading pi/2 on the floor
    x, y, _ = rig.odom_truth()
    tilted = path_goal([(x + 0.02, y, 0.0), (x + 0.04, y, 0.0)])
    pitched(tilted.path.poses[0].pose, -math.pi / 2)
    pitched(tilted.path.poses[1].pose, 0.4, yaw=math.pi / 2, roll=0.3)
    status, result = rig.run("follow_path", tilted)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert rig.odom_truth()[2] == pytest.approx(math.pi / 2, abs=0.06)


def test_reset_odometry_during_go_to_pose_says_what_the_goal_does(rig):
    """The goal goes on to the place on the floor it was sent to (it is held in the robot's
    own frame); the reset's answer says so, and that the goal's poses are now in the new
    odom frame (they jumped without a word)."""
    from std_srvs.srv import Trigger
    handle = rig.send("go_to_pose", GoToPose.Goal(pose=pose_stamped(0.15, 0.0, 0.0), speed=0.05))
    assert handle is not None
    rig.spin_for(0.8)
    start_truth = rig.sim.true_pose()
    response = rig.call(Trigger, "reset_odometry", Trigger.Request())
    assert response.success
    assert "the running go_to_pose goal goes on to the place it was sent to, and its feedback " \
           "and result give poses in the new odom frame" in response.message, response.message
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    x, y, _ = rig.odom_truth()  # the truth in the odom frame of before the reset
    assert math.hypot(x - 0.15, y) <= 0.01
    # the result's pose is in the new frame: the way driven since the reset
    driven = math.hypot(rig.sim.true_pose()[0] - start_truth[0],
                        rig.sim.true_pose()[1] - start_truth[1]) / 1000.0
    assert result.final_pose.pose.position.x == pytest.approx(driven, abs=0.01)
    # with no goal running, the answer is the plain one
    plain = rig.call(Trigger, "reset_odometry", Trigger.Request()).message
    assert plain == "odometry restarts at the origin from the latest robot state"


def test_a_goal_sent_right_after_reset_odometry_is_in_the_new_odom_frame(rig):
    """go_to_pose {x: 0.1, frame odom} checked right after reset_odometry, before the next robot
    state: the target is 0.1 m ahead of where the robot stood at the reset (the new frame), not
    (0.1, 0) of the old frame. The robot's states are held off while the goal is checked."""
    status, result = rig.run("drive_straight", DriveStraight.Goal(distance=0.1, speed=0.08))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    rig.spin_for(0.2)
    x0, y0, _ = rig.odom_truth()
    assert x0 == pytest.approx(0.1, abs=0.01)
    goal_type = rig.node._motion._goals["go_to_pose"]
    checked = goal_type.check
    core = rig.node._core

    def check_right_after_a_reset(goal):
        assert core.reset_odometry()
        with core.lock:  # no robot state is taken in the meantime
            return checked(goal)

    goal_type.check = check_right_after_a_reset
    try:
        status, result = rig.run("go_to_pose", GoToPose.Goal(pose=pose_stamped(0.1, 0.0, 0.0), speed=0.08))
    finally:
        goal_type.check = checked
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.attempts >= 1, result.message  # it drove
    x, y, yaw = rig.odom_truth()
    assert math.hypot(x - x0 - 0.1, y - y0) <= 0.015 and abs(yaw) <= 0.06
    pose = result.final_pose.pose
    assert (pose.position.x, pose.position.y) == pytest.approx((0.1, 0.0), abs=0.015)


def test_an_over_long_path_is_rejected_before_anything_of_it_is_read(rig):
    too_many = MAX_PATH_POSES + 1
    goal = path_goal([(0.0001 * k, 0.0, 0.0) for k in range(too_many)])
    for pose in goal.path.poses:
        pose.header.frame_id = "map"  # a frame tf does not link: a frame check would wait for it
    motion = rig.node._motion
    lines: List[str] = []
    motion._log = LogRecorder(motion._log, lines)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        handling = motion._on_goal("follow_path", goal)
        with pytest.raises(StopIteration) as answered:  # answered at once: nothing awaited
            handling.send(None)
        grown = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        motion._log = motion._log.logger
    assert answered.value.value == GoalResponse.REJECT
    assert any(f"follow_path goal rejected: path has {too_many} poses; at most {MAX_PATH_POSES}"
               in line for line in lines), lines
    # nothing built per pose (a converted pose alone is over 100 bytes), no tf followed
    assert grown < 64 * 1024, grown
    assert not motion._tf_subscribed and not motion._plans


def test_deactivation_aborts_and_refuses_and_a_lost_robot_aborts(rig):
    handle = rig.send("drive_straight", WHEEL_GOALS["drive_straight"])
    rig.spin_for(0.3)
    rig.node.trigger_deactivate()
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_ABORTED and result.message == "the driver was deactivated"
    rig.rejected("drive_straight", DriveStraight.Goal(distance=0.1), "the driver is not active "
                 f"(activate it: ros2 lifecycle set {rig.node.get_fully_qualified_name()} activate)")
    rig.node.trigger_activate()
    handle = rig.send("set_head_angle", AXES["head"][1])
    rig.spin_for(0.2)
    rig.sim.set_silent(True)
    status, result = rig.wait(handle, 5.0)
    assert status == GoalStatus.STATUS_ABORTED and result.message.startswith(
        "lost the robot (nothing heard from the robot for ")
    rig.rejected("set_head_angle", SetHeadAngle.Goal(angle=0.0), "not connected to the robot "
                 "(the driver reconnects by itself: link_status says when it is back)")


def test_a_goal_whose_check_the_link_went_during_is_aborted(rig):
    """The goal callback checks the driver (connected), then the goal itself (0.4 s for a
    follow_path of 20000 poses). A link lost meanwhile aborts the goals that ran when it went,
    and the goal was counted from its acceptance, after that: it was not aborted, started from
    the state of before, and ended only with the next reconnect attempt. A goal is counted from
    its driver check: one the link went during is aborted. The link goes, as the I/O thread
    says it, right after the goal's own check."""
    from cozmo_driver.client import LinkState, LinkStateChanged
    motion = rig.node._motion
    goal_type = motion._goals["follow_path"]
    checked = goal_type.check

    def check_as_the_link_goes(goal):
        plan = checked(goal)
        motion._on_robot_event(LinkStateChanged(LinkState.LOST, "robot silent for 1.0 s"))
        return plan

    goal_type.check = check_as_the_link_goes
    try:
        handle = rig.send("follow_path", WHEEL_GOALS["follow_path"])
    finally:
        goal_type.check = checked
    assert handle is not None, "follow_path goal rejected"
    status, result = rig.wait(handle, 5.0)
    assert status == GoalStatus.STATUS_ABORTED, result.message
    assert result.message == "lost the robot (robot silent for 1.0 s)"


@pytest.mark.parametrize("name", ["follow_path", "go_to_pose"])
def test_a_goal_that_lost_the_robot_before_it_started_gives_an_unknown_final_pose(rig, name):
    """Accepted, then the link goes before the goal starts: its result's final_pose is in odom
    with a NaN position and orientation (unknown, as the other results say it), not an empty
    frame id and an all-zero quaternion."""
    motion = rig.node._motion
    goal_type = motion._goals[name]
    started = goal_type.start

    def start_without_the_robot(run) -> None:
        rig.sim.set_silent(True)
        time.sleep(0.2)            # the states on their way are in
        motion._state = None       # as the I/O thread sets it when the link goes
        goal_type.ctx.state = lambda: None
        run.sample = None          # none reached the goal
        started(run)

    goal_type.start = start_without_the_robot
    status, result = rig.run(name, WHEEL_GOALS[name])
    assert status == GoalStatus.STATUS_ABORTED and result.message == "not connected to the robot"
    pose = result.final_pose
    assert pose.header.frame_id == "odom"
    p, q = pose.pose.position, pose.pose.orientation
    assert all(math.isnan(v) for v in (p.x, p.y, p.z, q.x, q.y, q.z, q.w)), pose
    if name == "go_to_pose":
        assert math.isnan(result.position_error) and math.isnan(result.heading_error)


@pytest.mark.parametrize("absolute", [False, True])
def test_a_turn_that_ended_before_it_started_gives_the_heading_it_knows(rig, absolute):
    """A turn_in_place that ends before it starts while the robot is connected: the result has
    final_heading from the latest robot state and a heading_error of target - reached (the whole
    relative turn; for a heading, the heading less where the robot points), not NaN."""
    from cozmo_driver.driver.motion import MotionError
    goal_type = rig.node._motion._goals["turn_in_place"]
    started = goal_type.start

    def refused(run) -> None:
        raise MotionError("refused before the start")

    goal_type.start = refused
    try:
        status, result = rig.run("turn_in_place", TurnInPlace.Goal(angle=1.0, is_absolute=absolute))
    finally:
        goal_type.start = started
    assert status == GoalStatus.STATUS_ABORTED and result.message == "refused before the start"
    heading = rig.odom_truth()[2]
    assert result.final_heading == pytest.approx(heading, abs=0.02)
    assert result.turned == 0.0
    assert result.heading_error == pytest.approx(wrap(1.0 - result.final_heading) if absolute else 1.0)


def test_a_path_away_from_the_robot_is_told_to_start_in_its_own_base_frame(rclpy_context, sim):
    """The refusal of segments that start away from the robot said "(0, 0 in base_footprint)"
    under any frame_prefix: it names the driver's base frame as it is."""
    rig = Rig(rclpy_context, sim, namespace="prefixed", frame_prefix="robot1/")
    try:
        far = FollowPath.Goal(segments_frame_id="robot1/base_footprint", segments=[
            PathSegment(type=PathSegment.LINE, start_x=0.3, start_y=0.2, end_x=0.4, end_y=0.2)])
        rig.rejected("follow_path", far, "start it where the robot is (0, 0 in robot1/base_footprint)")
    finally:
        rig.close()


def test_a_result_made_as_the_link_goes_is_the_goals_own(rig):
    """The result of a goal that saw no robot state read the latest state twice, and the I/O
    thread sets it to None when the link goes: gone between the two reads, the result raised
    AttributeError, rclpy logged "Error raised in execute callback" and the goal ended ABORTED
    with an empty result. The state is read once: the goal's own result, from the state read."""
    from cozmo_driver.driver.motion import MotionError
    from cozmo_driver.ros.motion_actions import MotionActions
    motion = rig.node._motion
    goal_type = motion._goals["turn_in_place"]
    started, made = goal_type.start, motion._result

    def refused(run) -> None:
        raise MotionError("refused before the start")

    class LinkGoesAfterTheFirstRead(MotionActions):
        """The latest state as the I/O thread leaves it: the link goes right after one read."""

        @property
        def _state(self):
            state, self.__dict__["_state"] = self.__dict__["_state"], None
            return state

        @_state.setter
        def _state(self, value) -> None:
            self.__dict__["_state"] = value

    def result_as_the_link_goes(run):
        motion.__class__ = LinkGoesAfterTheFirstRead
        try:
            return made(run)
        finally:
            motion.__class__ = MotionActions

    goal_type.start, motion._result = refused, result_as_the_link_goes
    try:
        status, result = rig.run("turn_in_place", TurnInPlace.Goal(angle=1.0))
    finally:
        goal_type.start = started
        del motion._result
    assert status == GoalStatus.STATUS_ABORTED and result.message == "refused before the start"
    assert result.final_heading == pytest.approx(rig.odom_truth()[2], abs=0.02)


def test_cleanup_with_a_goal_running_releases_the_servers(rclpy_context, sim):
    from rclpy.action import get_action_server_names_and_types_by_node

    # a namespace of its own: the graph may still list the nodes of earlier tests for a while
    rig = Rig(rclpy_context, sim, namespace="cleanup")

    def servers() -> List[str]:
        names = get_action_server_names_and_types_by_node(rig.probe, "cozmo_driver", "/cleanup")
        return [n.rsplit("/", 1)[-1] for n, _ in names]

    try:
        _cleanup_with_a_goal_running(rig, servers)
    finally:
        rig.close()


def _cleanup_with_a_goal_running(rig: Rig, servers) -> None:
    assert rig.spin_until(lambda: "drive_straight" in servers(), 3.0)
    handle = rig.send("drive_straight", WHEEL_GOALS["drive_straight"])
    rig.spin_for(0.3)
    rig.node.trigger_deactivate()
    rig.node.trigger_cleanup()          # no spin in between: the goal's result is still pending
    status, result = rig.wait(handle)
    assert status == GoalStatus.STATUS_ABORTED and result.message == "the driver was deactivated"
    assert rig.spin_until(lambda: not set(servers()) & set(TYPES), 3.0), servers()
    assert rig.node.start() and rig.spin_until(lambda: rig.node.connected, 5.0)
    assert rig.spin_until(lambda: servers().count("drive_straight") == 1, 3.0), servers()
    rig.clients.clear()
    status, result = rig.run("set_head_angle", SetHeadAngle.Goal(angle=0.2))
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message


def test_goals_running_at_a_lifecycle_shutdown_end_naming_the_shutdown(rig):
    """ros2 lifecycle set shutdown while goals run (active -> finalized, no deactivation
    first): a motion goal ended "the driver is shutting down (cleanup)", naming a cleanup
    nobody asked for, and an animation "the driver is shutting down". Both name the
    shutdown now."""
    from rclpy.lifecycle import TransitionCallbackReturn
    handles = {name: rig.send(name, goal) for name, goal in (
        ("drive_straight", WHEEL_GOALS["drive_straight"]),
        ("play_animation", PlayAnimation.Goal(name="nod_yes", loops=50)))}
    assert all(handles.values()), handles
    rig.spin_for(0.3)
    assert rig.node.trigger_shutdown() == TransitionCallbackReturn.SUCCESS
    for name, handle in handles.items():
        status, result = rig.wait(handle)
        assert status == GoalStatus.STATUS_ABORTED, (name, status)
        assert result.message == "the driver is shutting down (lifecycle shutdown)", (name, result.message)


def test_a_goal_right_after_a_fast_lifecycle_cycle_reaches_only_the_new_servers(rig):
    """Deactivate, cleanup, configure and activate back to back: the released servers
    (destroyed once their goals' results are out) stood beside the new ones of the same
    names, and a goal sent at once reached both: the old motion servers rejected it ("the
    driver is shutting down"), the old media ones accepted it, the new one accepted and ran
    it, and the client kept the first answer. Configure withdraws the released servers: the
    new ones alone answer, and a goal running at the cycle still gets its result."""
    running = rig.send("set_lift_height", SetLiftHeight.Goal(height=0.09, max_speed=0.1))
    assert running is not None
    rig.spin_for(0.2)
    for cycle in range(2):
        node = rig.node
        node.trigger_deactivate()
        node.trigger_cleanup()
        assert node.start()             # configure and activate: no spin since the deactivation
        assert rig.spin_until(lambda: node.connected, CONNECT_TIMEOUT)
        if cycle == 0:
            status, result = rig.wait(running, 5.0)
            assert status == GoalStatus.STATUS_ABORTED and result.message == "the driver was deactivated", \
                result.message
        for name, goal in (("set_head_angle", SetHeadAngle.Goal(angle=0.1 * (cycle + 1))),
                           ("play_animation", PlayAnimation.Goal(name="nod_yes"))):
            handle = rig.send(name, goal)
            assert handle is not None, f"cycle {cycle}: {name} goal rejected"
            status, result = rig.wait(handle)
            assert status == GoalStatus.STATUS_SUCCEEDED, (cycle, name, result.message)


def test_follow_path_can_be_remapped_beside_nav2(rclpy_context, sim):
    # Nav2's controller_server serves nav2_msgs/FollowPath as follow_path: rename ours. rcl
    # remaps an action's topics and services, not its name: one rule for each of the five.
    rules = sum((["-r", f"follow_path/_action/{part}:=cozmo_follow_path/_action/{part}"]
                 for part in ("send_goal", "cancel_goal", "get_result", "feedback", "status")), [])
    rig = Rig(rclpy_context, sim, cli_args=["--ros-args"] + rules)
    try:
        client = discovered(rig.spin_until, lambda: ActionClient(rig.probe, FollowPath, "cozmo_follow_path"),
                            lambda c: c.server_is_ready(), lambda c: c.destroy(),
                            "cozmo_follow_path action server")
        future = client.send_goal_async(path_goal([(0.05, 0.0, 0.0)]))
        assert rig.spin_until(future.done, 5.0)
        handle = future.result()
        handle.result_future = handle.get_result_async()
        assert rig.wait(handle)[0] == GoalStatus.STATUS_SUCCEEDED
    finally:
        rig.close()


def test_a_driver_destroyed_with_a_goal_running_leaves_no_action_server(rig):
    """Closed while a goal's execute callback is pending, the driver retires its action
    servers until that callback returns; destroying the node must destroy them anyway, or
    their latched goal status would outlive the node (another node would read a stale,
    running goal from it)."""
    handle = rig.send("set_head_angle", SetHeadAngle.Goal(angle=0.7, max_speed=0.2))
    assert handle is not None
    topic = "/set_head_angle/_action/status"
    assert rig.probe.get_publishers_info_by_topic(topic)
    node = rig.node
    node.close()                      # the execute callback has not returned yet
    rig.executor.remove_node(node)
    rig.nodes.remove(node)
    node.destroy_node()
    assert rig.spin_until(lambda: not rig.probe.get_publishers_info_by_topic(topic), DISCOVERY_TIMEOUT), \
        rig.probe.get_publishers_info_by_topic(topic)
