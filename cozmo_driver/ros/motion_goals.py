"""What each motion action does with its goal: check it, start it, report on it.

One class per action (:data:`GOAL_TYPES`), all on :class:`MotionGoal`:
``check(goal)`` turns a goal request into a plan (a dict; raises
:class:`~cozmo_driver.driver.motion.MotionError` naming the field),
``start(run)`` sends the commands through the robot client's typed calls and
sets the run's tracker and motor stop, ``feedback(run, sample)`` and
``result(run, sample)`` build the action's messages, and ``check_done(run,
sample)`` may overrule a tracker's success (drive_straight checks the distance,
go_to_pose retries once). The families share what they can: the head and lift
goals :class:`AxisGoal`, the tread goals that drive a path :class:`PathGoal`.

Everything here runs on the executor; the goal bookkeeping (servers, runs,
preemption, cancel, results) is :class:`~cozmo_driver.ros.motion_actions.MotionActions`'.
The planning, conversion and trackers themselves are pure, in
:mod:`cozmo_driver.driver.motion`; this module converts between them and the
action messages, and between the odom frame (and tf frames) of the goals and the
robot's own pose frame.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from cozmo_interfaces.action import (DriveStraight, FollowPath, GoToPose, SetHeadAngle,
                                     SetLiftHeight, TurnInPlace)
from geometry_msgs.msg import PoseStamped
from rclpy.task import Future

from .. import robot_geometry as geo
from ..driver import motion as mo
from ..driver.motion import ABORTED, SUCCEEDED, MotionError, Outcome, Segment, StateSample
from ..driver.odometry import Pose2D, compose, inverse, wrap_angle
from ..driver.sensors import StatusFlag
from ..driver.transforms import Transform, TransformBuffer, TransformError, compose as tf_compose
from ..driver.transforms import pose_to_2d

__all__ = ["GoalContext", "MotionGoal", "PathGoal", "GOAL_TYPES", "Run"]

_MAX_ACCEL_MPS2 = mo.MAX_ACCEL_MPS2
_MAX_TURN_ACCEL_RADPS2 = mo.MAX_TURN_ACCEL_RADPS2
_MAX_AXIS_ACCEL_RADPS2 = 100.0
_SAFETY_FACTOR = 2.0
_SAFETY_MARGIN_S = 3.0
#: the longest a goal may be expected to take (s): a speed that would take longer is a mistake
#: (a unit, a missing digit), not a plan, and would hold the motor for hours
MAX_GOAL_S = 600.0


@dataclass
class Run:
    """One accepted goal."""

    name: str
    resource: str
    goal_handle: Any
    plan: Dict[str, Any]
    future: Future = field(default_factory=Future)
    tracker: Any = None
    outcome: Optional[Outcome] = None
    pacer: mo.FeedbackPacer = field(default_factory=mo.FeedbackPacer)  # when its feedback goes out
    sample: Optional[StateSample] = None     # the latest robot state seen while running
    stop: Optional[Callable[[], None]] = None  # before its start: the preempted goal's, if it moves on
    accepted_at: float = 0.0                 # time.monotonic() when its driver check began
    waiting: bool = False                    # a treads goal that waits for the head's calibration
    #: the odometry's reset_shift when the goal was checked: its odom frame (see GoalContext.goal_odom)
    reset_shift: Pose2D = Pose2D()


class GoalContext:
    """What the goals share: the driver node, its robot client, the tf buffer, the latest
    robot state with the head and lift as the driver shows them, and the way to end a run.
    Given by :class:`MotionActions`."""

    def __init__(self, node, robot, tf: TransformBuffer, state: Callable[[], Any],
                 axes: Callable[[], Tuple[float, float]],
                 finish: Callable[[Run, str, str], None]) -> None:
        self.node = node
        self.robot = robot
        self.log = node.get_logger()
        self.tf = tf
        self.state = state
        self.axes = axes  # (head rad, lift m) as shown: held while a motor calibrates
        self.finish = finish
        #: while a goal is checked again: the odom frame of its time in the current one, if a
        #: reset_odometry moved it since (its odom poses and headings are in that frame); else None
        self.goal_odom: Optional[Pose2D] = None
        self._event_id = 0

    def now_sample(self) -> StateSample:
        state = self.state()
        if state is None:
            raise MotionError("not connected to the robot")
        return mo.state_sample(state, time.monotonic(), self.axes())

    def offset(self) -> Pose2D:
        """odom <- robot pose frame (the odometry tracker's offset)."""
        return self.node._tracker.offset

    def to_odom_pose(self, sample: StateSample) -> Pose2D:
        return compose(self.offset(), sample.pose)

    def pose_msg(self, pose: Pose2D) -> PoseStamped:
        msg = PoseStamped()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = self.node._frame("odom_frame")
        msg.pose.position.x, msg.pose.position.y = pose.x, pose.y
        msg.pose.orientation.z = math.sin(pose.yaw / 2.0)
        msg.pose.orientation.w = math.cos(pose.yaw / 2.0)
        return msg

    def final_pose_msg(self, sample: Optional[StateSample]) -> PoseStamped:
        """A result's final pose: where the robot is, in odom; or, with no robot state (the link
        went before the goal saw one), unknown: odom, with a NaN position and orientation, as the
        other results give a value they cannot know (an empty frame id and an all-zero
        quaternion would not be a pose)."""
        if sample is not None:
            return self.pose_msg(self.to_odom_pose(sample))
        msg = self.pose_msg(Pose2D())
        p, q = msg.pose.position, msg.pose.orientation
        p.x = p.y = p.z = q.x = q.y = q.z = q.w = math.nan
        return msg

    def frame_in_odom(self, frame_id: str, field_name: str) -> Transform:
        """The pose of frame ``frame_id`` in the driver's odom frame (3D)."""
        node = self.node
        frame = frame_id.lstrip("/")
        odom = node._frame("odom_frame")
        if frame in ("", odom):
            moved = self.goal_odom
            if moved is None:
                return Transform()
            return Transform((moved.x, moved.y, 0.0), (0.0, 0.0, math.sin(moved.yaw / 2.0),
                                                        math.cos(moved.yaw / 2.0)))
        if frame in (node._frame("base_frame"), node._frame("base_link_frame")):
            here = self.to_odom_pose(self.now_sample())
            return Transform((here.x, here.y, 0.0), (0.0, 0.0, math.sin(here.yaw / 2.0),
                                                      math.cos(here.yaw / 2.0)))
        try:
            return self.tf.lookup(odom, frame, time.monotonic())
        except TransformError as exc:
            raise MotionError(f"{field_name} = '{frame}': no transform to the driver's odom frame "
                              f"'{odom}' ({exc})") from None

    def pose_to_robot(self, pose, frame_id: str, field_name: str,
                      frame_cache: Optional[Dict[str, Transform]] = None,
                      frame_field: Optional[str] = None,
                      warnings: Optional[List[str]] = None) -> Pose2D:
        """A geometry_msgs/Pose in ``frame_id`` (the field ``frame_field``, by default the
        pose's header's) -> a Pose2D in the robot's own frame. ``warnings``: the goal uses
        the pose's heading, and a warning goes there if its orientation had to be normalised
        (:func:`~cozmo_driver.driver.motion.unit_orientation`); one whose x axis points straight
        up or down in odom is refused then (:func:`~cozmo_driver.driver.motion.floor_heading`)."""
        p, q = pose.position, pose.orientation
        mo.require_finite(field_name + ".", **{"position.x": p.x, "position.y": p.y,
                                               "position.z": p.z, "orientation.x": q.x,
                                               "orientation.y": q.y, "orientation.z": q.z,
                                               "orientation.w": q.w})
        quat, warning = mo.unit_orientation(field_name + ".", (q.x, q.y, q.z, q.w),
                                            heading_used=warnings is not None)
        if warning is not None and warnings is not None:
            warnings.append(warning)
        if frame_cache is not None and frame_id in frame_cache:
            frame = frame_cache[frame_id]
        else:
            frame = self.frame_in_odom(frame_id, frame_field or field_name + ".header.frame_id")
            if frame_cache is not None:
                frame_cache[frame_id] = frame
        in_odom = tf_compose(frame, Transform((p.x, p.y, p.z), quat))
        odom = pose_to_2d(in_odom)
        if warnings is not None:  # its heading is used: one straight up or down has none
            odom = odom[:2] + (mo.floor_heading(
                field_name + ".orientation", in_odom.rotation, self.node._frame("odom_frame"),
                "give a heading h on the floor alone: z = sin(h/2), w = cos(h/2)"),)
        return compose(inverse(self.offset()), Pose2D(*odom))

    def frame_to_robot(self, frame_id: str, field_name: str) -> Pose2D:
        """The 2D transform robot frame <- ``frame_id`` (refused if that frame's x axis points
        straight up or down: its projection on the floor has no heading)."""
        frame = self.frame_in_odom(frame_id, field_name)
        heading = mo.floor_heading(f"{field_name} = '{frame_id.lstrip('/')}'", frame.rotation,
                                   self.node._frame("odom_frame"),
                                   "give segments in a frame whose x axis is on the floor "
                                   "(base_footprint, odom)")
        return compose(inverse(self.offset()), Pose2D(frame.translation[0], frame.translation[1], heading))

    def next_event_id(self) -> int:
        self._event_id = self._event_id % 65535 + 1
        return self._event_id

    @staticmethod
    def deadline(expected_s: float) -> float:
        return time.monotonic() + _SAFETY_FACTOR * expected_s + _SAFETY_MARGIN_S

    def take_treads(self) -> None:
        """The treads are this goal's now: a cmd_vel watchdog stop still pending from an
        earlier teleop would interrupt it (the watchdog only stops after a non-zero cmd_vel)."""
        self.node._cancel_watchdog()

    def param(self, name: str) -> float:
        return float(self.node._params[name])

    def linear_speeds(self, speed_value: float, accel_value: float, prefix: str,
                      warnings: List[str], direction: str = "") -> Tuple[float, float]:
        speed, w1 = mo.check_speed(speed_value, prefix + "speed", mo.DEFAULT_SPEED_MPS,
                                   self.param("max_wheel_speed"), "m/s", limit_name="max_wheel_speed",
                                   direction=direction)
        accel, w2 = mo.check_speed(accel_value, prefix + "accel", mo.DEFAULT_ACCEL_MPS2,
                                   _MAX_ACCEL_MPS2, "m/s^2")
        mo.check_path_rate(speed, prefix + "speed", "m/s")  # the robot's paths: whole mm/s
        mo.check_path_rate(accel, prefix + "accel", "m/s^2")
        warnings.extend(w for w in (w1, w2) if w)
        return speed, accel


class MotionGoal:
    """The part of one action that knows its goal, feedback and result; see the module
    docstring. ``ACTION`` is its cozmo_interfaces action type, ``RESOURCE`` its motor."""

    ACTION: Any = None
    RESOURCE = "wheels"

    def __init__(self, ctx: GoalContext) -> None:
        self.ctx = ctx

    def check_size(self, goal) -> None:
        """Refuse (:class:`MotionError`) a goal too large to be looked at, before anything of
        it is read or converted; by default every goal is small."""

    def check(self, goal) -> Dict[str, Any]:
        raise NotImplementedError

    def start(self, run: Run) -> None:
        raise NotImplementedError

    def feedback(self, run: Run, s: StateSample):
        raise NotImplementedError

    def result(self, run: Run, s: Optional[StateSample]):
        raise NotImplementedError

    def check_done(self, run: Run, outcome: Outcome, s: StateSample) -> Optional[Outcome]:
        """The outcome of a run whose tracker succeeded with ``outcome`` (None: the run goes
        on, a retry); by default the tracker's."""
        return outcome

    def duration(self, plan: Dict[str, Any]) -> float:
        """About how long (s) the checked goal takes from where the robot is now."""
        raise NotImplementedError

    def drives_forwards(self, plan: Dict[str, Any]) -> bool:
        """Whether the checked goal drives the robot forwards from where it is now (refused
        at a cliff ahead); by default not (the head, the lift, a turn in place)."""
        return False

    def check_duration(self, plan: Dict[str, Any]) -> None:
        """Refuse a goal expected to take longer than :data:`MAX_GOAL_S` (a speed far too
        slow for the distance, or a distance far too long for the speed)."""
        expected = self.duration(plan)
        if not expected <= MAX_GOAL_S:
            said = f"{expected:.0f} s" if expected < 1e9 else "practically forever"
            raise MotionError(f"it would take about {said} at the speeds and accelerations given; a goal "
                              f"may take at most {MAX_GOAL_S:.0f} s: raise them or split the motion")


# ----------------------------------------------------------------------------- head and lift

class AxisGoal(MotionGoal):
    """A head or lift goal: its target is ``goal.<FIELD>`` within ``LIMITS`` (``UNIT``); the
    speed limits and acceleration default to the ``<motor>_max_speed``/``_acceleration``
    parameters."""

    FIELD = ""
    LIMITS: Tuple[float, float] = (0.0, 0.0)
    UNIT = ""
    TOLERANCE = 0.0
    FLAG = 0

    def check(self, goal) -> Dict[str, Any]:
        field_name, motor = self.FIELD, self.RESOURCE
        value = getattr(goal, field_name)
        mo.require_finite("", **{field_name: value, "max_speed": goal.max_speed,
                                 "accel": goal.accel, "duration": goal.duration})
        lo, hi = self.LIMITS
        # the limits as the docs and this message print them (3 decimals) are in range: a
        # value within half a unit of that past a limit is the limit
        if not lo - 5e-4 <= value <= hi + 5e-4:
            raise MotionError(f"{field_name} = {value:.4f} {self.UNIT} is outside the {motor}'s "
                              f"range {lo:.3f}..{hi:.3f} {self.UNIT}")
        value = min(max(value, lo), hi)
        limit = self.ctx.param(f"{motor}_max_speed")
        speed, w1 = mo.check_speed(goal.max_speed, "max_speed", limit, limit, "rad/s",
                                   direction=f"the {motor} moves towards the {field_name} given")
        accel, w2 = mo.check_speed(goal.accel, "accel", self.ctx.param(f"{motor}_acceleration"),
                                   _MAX_AXIS_ACCEL_RADPS2, "rad/s^2")
        if not math.isfinite(goal.duration) or not 0.0 <= goal.duration <= 60.0:
            raise MotionError(f"duration = {goal.duration} s: must be within 0..60 s "
                              "(0 = as fast as max_speed and accel allow)")
        return {"target": float(value), "speed": speed, "accel": accel,
                "duration": float(goal.duration), "warnings": [w for w in (w1, w2) if w]}

    def arc(self, plan: Dict[str, Any]) -> float:
        """The motor's travel (rad) from where it is to the target."""
        raise NotImplementedError

    def command(self, plan: Dict[str, Any], action_id: int) -> None:
        raise NotImplementedError

    def stop_motor(self) -> None:
        raise NotImplementedError

    def duration(self, plan: Dict[str, Any]) -> float:
        return mo.axis_duration(self.arc(plan), plan["speed"], plan["accel"], plan["duration"])

    def start(self, run: Run) -> None:
        ctx, plan = self.ctx, run.plan
        expected = self.duration(plan)
        action_id = ctx.robot.new_action_id()
        self.command(plan, action_id)
        robot, motor = ctx.robot, self.RESOURCE
        run.tracker = mo.AxisTracker(deadline=ctx.deadline(expected), name=motor,
                                     target=plan["target"], tolerance=self.TOLERANCE, flag=self.FLAG,
                                     action_id=action_id, unit=self.UNIT,
                                     calibrating=lambda: robot.calibrating(motor))
        run.stop = self.stop_motor


class SetHeadAngleGoal(AxisGoal):
    ACTION = SetHeadAngle
    RESOURCE = "head"
    FIELD = "angle"
    LIMITS = (geo.HEAD_MIN_ANGLE_RAD, geo.HEAD_MAX_ANGLE_RAD)
    UNIT = "rad"
    TOLERANCE = mo.HEAD_TOLERANCE_RAD
    FLAG = StatusFlag.HEAD_IN_POS

    def arc(self, plan: Dict[str, Any]) -> float:
        return plan["target"] - self.ctx.now_sample().head_angle

    def command(self, plan: Dict[str, Any], action_id: int) -> None:
        self.ctx.robot.post_head_angle(plan["target"], plan["speed"], plan["accel"],
                                       plan["duration"], action_id)

    def stop_motor(self) -> None:
        self.ctx.robot.post_move_head(0.0)

    def feedback(self, run: Run, s: StateSample):
        return SetHeadAngle.Feedback(current_angle=s.head_angle)

    def result(self, run: Run, s: Optional[StateSample]):
        return SetHeadAngle.Result(final_angle=s.head_angle if s else math.nan)


class SetLiftHeightGoal(AxisGoal):
    ACTION = SetLiftHeight
    RESOURCE = "lift"
    FIELD = "height"
    LIMITS = (geo.LIFT_MIN_HEIGHT_M, geo.LIFT_MAX_HEIGHT_M)
    UNIT = "m"
    TOLERANCE = mo.LIFT_TOLERANCE_M
    FLAG = StatusFlag.LIFT_IN_POS

    def arc(self, plan: Dict[str, Any]) -> float:
        return (geo.lift_height_to_angle(plan["target"])
                - geo.lift_height_to_angle(self.ctx.now_sample().lift_height))

    def command(self, plan: Dict[str, Any], action_id: int) -> None:
        self.ctx.robot.post_lift_height(plan["target"] * 1000.0, plan["speed"], plan["accel"],
                                        plan["duration"], action_id)

    def stop_motor(self) -> None:
        self.ctx.robot.post_move_lift(0.0)

    def feedback(self, run: Run, s: StateSample):
        return SetLiftHeight.Feedback(current_height=s.lift_height)

    def result(self, run: Run, s: Optional[StateSample]):
        return SetLiftHeight.Result(final_height=s.lift_height if s else math.nan)


# ----------------------------------------------------------------------------- turn in place

class TurnInPlaceGoal(MotionGoal):
    ACTION = TurnInPlace

    def check(self, goal) -> Dict[str, Any]:
        mo.require_finite("", angle=goal.angle, speed=goal.speed, accel=goal.accel,
                          tolerance=goal.tolerance)
        tolerance = mo.check_tolerance(goal.tolerance, "tolerance", mo.MIN_TURN_TOLERANCE_RAD, 0.5,
                                       "rad")
        if not goal.is_absolute and abs(goal.angle) > 20.0 * math.pi:
            raise MotionError(f"angle = {goal.angle:g} rad: at most 10 turns (62.8 rad) at once")
        warnings: List[str] = []
        angle = float(goal.angle)
        if goal.is_absolute and abs(angle) > math.pi + 1e-9:
            # a heading: the robot turns the short way to it, never whole turns
            angle = wrap_angle(angle)
            warnings.append(f"angle = {goal.angle:g} rad with is_absolute is a heading: taken as "
                            f"{angle:.4f} rad, the same heading within -pi..pi (for whole turns, "
                            "leave is_absolute false)")
        if goal.is_absolute and self.ctx.goal_odom is not None:  # a heading of the goal's odom frame
            angle = wrap_angle(angle + self.ctx.goal_odom.yaw)
        speed, w1 = mo.check_turn_speed(goal.speed, "speed", mo.DEFAULT_TURN_SPEED_RADPS,
                                        direction="the sign of angle sets the direction (negative: clockwise)")
        accel, w2 = mo.check_speed(goal.accel, "accel", mo.DEFAULT_TURN_ACCEL_RADPS2,
                                   _MAX_TURN_ACCEL_RADPS2, "rad/s^2")
        warnings.extend(w for w in (w1, w2) if w)
        return {"angle": angle, "absolute": bool(goal.is_absolute), "speed": speed,
                "accel": accel, "tolerance": tolerance, "warnings": warnings}

    def _turn(self, plan: Dict[str, Any], sample: StateSample) -> Tuple[float, float]:
        """(the angle to send, the angle to turn from ``sample``) in the robot's frame."""
        if plan["absolute"]:  # a heading in odom -> in the robot's frame
            angle = wrap_angle(plan["angle"] - self.ctx.offset().yaw)
            return angle, wrap_angle(angle - sample.yaw)
        return plan["angle"], plan["angle"]

    def duration(self, plan: Dict[str, Any]) -> float:
        turn = self._turn(plan, self.ctx.now_sample())[1]
        return mo.turn_duration(turn, plan["speed"], plan["accel"])

    def start(self, run: Run) -> None:
        ctx, plan = self.ctx, run.plan
        sample = ctx.now_sample()
        angle, turn = self._turn(plan, sample)
        expected = mo.turn_duration(turn, plan["speed"], plan["accel"])
        action_id = ctx.robot.new_action_id()
        ctx.take_treads()
        # the robot stops within its own tolerance; ask for a little less than ours
        robot_tolerance = max(0.8 * plan["tolerance"], mo.MIN_TURN_TOLERANCE_RAD * 0.8)
        if plan["absolute"]:  # the short way to the heading
            ctx.robot.post_turn_in_place(angle, plan["speed"], plan["accel"], robot_tolerance,
                                         action_id)
        else:  # the robot takes headings only: where this turn ends, that way, that far
            ctx.robot.post_turn_in_place(sample.yaw + angle, plan["speed"], plan["accel"],
                                         robot_tolerance, action_id, turn_rad=angle)
        run.tracker = mo.TurnTracker(deadline=ctx.deadline(expected), action_id=action_id,
                                     start_yaw=sample.yaw, angle=angle, absolute=plan["absolute"],
                                     tolerance=plan["tolerance"], speed=plan["speed"],
                                     start_t=sample.t)
        run.stop = ctx.robot.post_stop_wheels

    def feedback(self, run: Run, s: StateSample):
        t = run.tracker
        return TurnInPlace.Feedback(current_heading=self.ctx.to_odom_pose(s).yaw, turned=t.turned,
                                    remaining=t.remaining(s.yaw))

    def result(self, run: Run, s: Optional[StateSample]):
        t, plan = run.tracker, run.plan
        if s is None:
            return TurnInPlace.Result(final_heading=math.nan, turned=0.0, heading_error=math.nan)
        heading = self.ctx.to_odom_pose(s).yaw
        if t is not None:
            return TurnInPlace.Result(final_heading=heading, turned=t.turned, heading_error=t.remaining(s.yaw))
        # ended before it started: nothing turned; a heading's error is from where the robot points
        error = math.nan if "angle" not in plan else \
            wrap_angle(plan["angle"] - heading) if plan["absolute"] else plan["angle"]
        return TurnInPlace.Result(final_heading=heading, turned=0.0, heading_error=error)


# ----------------------------------------------------------------------------- paths

class PathGoal(MotionGoal):
    """A goal the robot drives as a path of segments (its own path follower)."""

    def send_path(self, run: Run, segments: List[Segment], start_heading: float) -> None:
        ctx = self.ctx
        ctx.take_treads()
        event_id = ctx.next_event_id()
        ctx.robot.post_execute_path(mo.path_messages(segments, start_heading), event_id)
        run.tracker = mo.PathTracker(deadline=ctx.deadline(mo.path_duration(segments, start_heading)),
                                     event_id=event_id, segments=list(segments))
        run.stop = ctx.robot.post_stop_path


class DriveStraightGoal(PathGoal):
    ACTION = DriveStraight

    def check(self, goal) -> Dict[str, Any]:
        mo.require_finite("", distance=goal.distance, speed=goal.speed, accel=goal.accel,
                          tolerance=goal.tolerance)
        if abs(goal.distance) < 0.001:
            raise MotionError(f"distance = {goal.distance:g} m: at least 0.001 m (either way)")
        if abs(goal.distance) > 10.0:
            raise MotionError(f"distance = {goal.distance:g} m: at most 10 m at once")
        tolerance = mo.check_tolerance(goal.tolerance, "tolerance", mo.MIN_POSITION_TOLERANCE_M,
                                       0.5, "m")
        warnings: List[str] = []
        speed, accel = self.ctx.linear_speeds(goal.speed, goal.accel, "", warnings,
                                              direction="a negative distance drives backwards")
        return {"distance": float(goal.distance), "speed": speed, "accel": accel,
                "tolerance": tolerance, "warnings": warnings}

    def drives_forwards(self, plan: Dict[str, Any]) -> bool:
        return plan["distance"] > 0.0

    def duration(self, plan: Dict[str, Any]) -> float:
        start = self.ctx.now_sample().pose
        segment = mo.plan_drive_straight(start, plan["distance"], plan["speed"], plan["accel"])
        return mo.path_duration([segment], start.yaw)

    def start(self, run: Run) -> None:
        plan = run.plan
        start = self.ctx.now_sample().pose
        plan["start"] = start
        segment = mo.plan_drive_straight(start, plan["distance"], plan["speed"], plan["accel"])
        self.send_path(run, [segment], start.yaw)

    @staticmethod
    def _traveled(run: Run, s: StateSample) -> float:
        start = run.plan["start"]
        return (s.x - start.x) * math.cos(start.yaw) + (s.y - start.y) * math.sin(start.yaw)

    def check_done(self, run: Run, outcome: Outcome, s: StateSample) -> Outcome:
        traveled = self._traveled(run, s)
        distance, tolerance = run.plan["distance"], run.plan["tolerance"]
        if abs(traveled - distance) <= tolerance:
            return Outcome(SUCCEEDED, f"drove {traveled:.4f} m of {distance:.4f} m")
        return Outcome(ABORTED, f"the robot stopped after {traveled:.4f} m of {distance:.4f} m "
                       f"(tolerance {tolerance} m)")

    def feedback(self, run: Run, s: StateSample):
        traveled = self._traveled(run, s)
        return DriveStraight.Feedback(distance_traveled=traveled,
                                      distance_remaining=run.plan["distance"] - traveled)

    def result(self, run: Run, s: Optional[StateSample]):
        traveled = self._traveled(run, s) if s is not None and "start" in run.plan else 0.0
        return DriveStraight.Result(distance_traveled=traveled)


class FollowPathGoal(PathGoal):
    ACTION = FollowPath

    def check_size(self, goal) -> None:
        """Only the lengths: a path of too many poses or segments is refused before its
        frames are looked up or a pose converted (nothing of it is kept)."""
        poses, segments = len(goal.path.poses), len(goal.segments)
        if poses > mo.MAX_PATH_POSES:
            raise MotionError(f"path has {poses} poses; at most {mo.MAX_PATH_POSES} (thin it out, "
                              "or send it in parts)")
        if segments > mo.MAX_PATH_SEGMENTS:
            raise MotionError(f"{segments} segments; at most {mo.MAX_PATH_SEGMENTS} at once")

    def check(self, goal) -> Dict[str, Any]:
        ctx = self.ctx
        mo.require_finite("", speed=goal.speed, accel=goal.accel, decel=goal.decel,
                          turn_speed=goal.turn_speed, turn_accel=goal.turn_accel,
                          fit_tolerance=goal.fit_tolerance)
        poses, segments = goal.path.poses, goal.segments
        if not poses and not segments:
            raise MotionError("empty goal: give path.poses or segments")
        if poses and segments:
            raise MotionError("give either path.poses or segments, not both")
        warnings: List[str] = []
        speed, accel = ctx.linear_speeds(goal.speed, goal.accel, "", warnings)
        decel, w = mo.check_speed(goal.decel, "decel", mo.DEFAULT_ACCEL_MPS2, _MAX_ACCEL_MPS2, "m/s^2")
        mo.check_path_rate(decel, "decel", "m/s^2")
        warnings.extend([w] if w else [])
        turn_speed, w = mo.check_turn_speed(goal.turn_speed, "turn_speed", mo.DEFAULT_TURN_SPEED_RADPS)
        warnings.extend([w] if w else [])
        turn_accel, w = mo.check_speed(goal.turn_accel, "turn_accel", mo.DEFAULT_TURN_ACCEL_RADPS2,
                                       _MAX_TURN_ACCEL_RADPS2, "rad/s^2")
        warnings.extend([w] if w else [])
        plan: Dict[str, Any] = {"speed": speed, "accel": accel, "decel": decel,
                                "turn_speed": turn_speed, "turn_accel": turn_accel,
                                "warnings": warnings}
        if poses:
            fit = mo.check_tolerance(goal.fit_tolerance, "fit_tolerance", 0.0005, 0.5, "m")
            cache: Dict[str, Transform] = {}
            last = len(poses) - 1  # the one pose whose heading is used (the final point turn)
            robot_poses = [ctx.pose_to_robot(p.pose, p.header.frame_id or goal.path.header.frame_id,
                                             f"path.poses[{k}]", cache,
                                             None if p.header.frame_id else "path.header.frame_id",
                                             warnings if k == last else None)
                           for k, p in enumerate(poses)]
            plan.update(poses=robot_poses, fit=fit)
            # refuse what cannot be converted now; kept for the goal's duration
            plan["converted"] = self._convert(plan, ctx.now_sample().pose)
        else:
            raw = [Segment(int(s.type), **{f: float(getattr(s, f)) for f in Segment.FIELDS})
                   for s in segments]
            checked, seg_warnings = mo.check_segments(raw, ctx.param("max_wheel_speed"),
                                                      max_speed_name="max_wheel_speed")
            warnings.extend(seg_warnings)
            to_robot = ctx.frame_to_robot(goal.segments_frame_id, "segments_frame_id")
            plan["segments"] = [mo.apply_defaults(s.transformed(to_robot), speed, accel, decel, turn_speed,
                                                  turn_accel, mo.DEFAULT_TURN_TOLERANCE_RAD)
                                for s in checked]
            here = ctx.now_sample().pose
            x, y = plan["segments"][0].start_point()
            off = math.hypot(x - here.x, y - here.y)
            if off > mo.PATH_GIVE_UP_M:
                raise MotionError(
                    f"segments[0]: starts {off * 1000:.0f} mm from the robot, which follows a path "
                    f"only from on it (it gives a path up {mo.PATH_GIVE_UP_M * 1000:.0f} mm off it): "
                    f"start it where the robot is (0, 0 in {ctx.node._frame('base_frame')}), or drive "
                    "there first (go_to_pose)")
        return plan

    @staticmethod
    def _convert(plan: Dict[str, Any], start: Pose2D, first: Optional[int] = None) -> List[Segment]:
        return mo.path_to_segments(plan["poses"], start, fit_tolerance=plan["fit"],
                                   speed=plan["speed"], accel=plan["accel"], decel=plan["decel"],
                                   turn_speed=plan["turn_speed"], turn_accel=plan["turn_accel"],
                                   first=first)

    def duration(self, plan: Dict[str, Any]) -> float:
        segments = plan.get("segments")
        return mo.path_duration(plan["converted"] if segments is None else segments,
                                self.ctx.now_sample().yaw)

    def drives_forwards(self, plan: Dict[str, Any]) -> bool:
        segments = plan.get("segments")
        return mo.drives_forwards(plan["converted"] if segments is None else segments)

    def start(self, run: Run) -> None:
        plan = run.plan
        start = self.ctx.now_sample().pose
        segments = plan.get("segments")
        # the leading poses taken as the robot's position (docs/motion.md, rule 1): said below, once
        # a goal, rather than warned (a grid planner's every path has one)
        skipped = 0 if segments is not None else mo.path_start_index(plan["poses"], start)
        if segments is None:
            segments = self._convert(plan, start, skipped)
        plan["sent"] = segments
        if not segments:
            self.ctx.finish(run, SUCCEEDED, "already at the end of the path: nothing to drive")
            return
        odom = self.ctx.offset()  # the segments are in the robot's own frame: told in odom
        near = ("" if not skipped else f", from path.poses[{skipped}] (path.poses[0"
                f"{'' if skipped == 1 else f'..{skipped - 1}'}] within {mo.PATH_START_RADIUS_M * 1000:.0f} mm "
                f"of the robot, or within {mo.PATH_PASSED_RADIUS_M * 1000:.0f} mm and passed by it: taken "
                "as its position)")
        self.ctx.log.info(f"follow_path: {len(segments)} segment{'s' if len(segments) != 1 else ''}, "
                          f"{sum(s.length for s in segments):.3f} m, in "
                          f"{self.ctx.node._frame('odom_frame')}{near}: "
                          + "; ".join(s.transformed(odom).describe() for s in segments[:6])
                          + (" ..." if len(segments) > 6 else ""))
        self.send_path(run, segments, start.yaw)

    def feedback(self, run: Run, s: StateSample):
        t = run.tracker
        segments = run.plan["sent"]
        return FollowPath.Feedback(current_segment=t.current, num_segments=len(segments),
                                   current_pose=self.ctx.pose_msg(self.ctx.to_odom_pose(s)),
                                   distance_remaining=mo.distance_remaining(segments, t.current,
                                                                            s.x, s.y))

    def result(self, run: Run, s: Optional[StateSample]):
        segments = run.plan.get("sent") or []
        result = FollowPath.Result(num_segments=len(segments),
                                   segments_completed=run.tracker.completed_segments
                                   if run.tracker is not None else
                                   (len(segments) if run.outcome.status == SUCCEEDED else 0))
        result.final_pose = self.ctx.final_pose_msg(s)
        return result


class GoToPoseGoal(PathGoal):
    ACTION = GoToPose

    def check(self, goal) -> Dict[str, Any]:
        mo.require_finite("", position_tolerance=goal.position_tolerance,
                          heading_tolerance=goal.heading_tolerance, speed=goal.speed)
        pos_tol = mo.check_tolerance(goal.position_tolerance, "position_tolerance",
                                     mo.MIN_POSITION_TOLERANCE_M, 1.0, "m")
        yaw_tol = mo.check_tolerance(goal.heading_tolerance, "heading_tolerance",
                                     mo.MIN_HEADING_TOLERANCE_RAD, math.pi, "rad")
        warnings: List[str] = []
        speed, accel = self.ctx.linear_speeds(goal.speed, 0.0, "", warnings)
        target = self.ctx.pose_to_robot(goal.pose.pose, goal.pose.header.frame_id, "pose",
                                        warnings=warnings)
        return {"target": target, "position_tolerance": pos_tol, "heading_tolerance": yaw_tol,
                "speed": speed, "accel": accel, "attempt": 0, "warnings": warnings}

    @staticmethod
    def _segments(plan: Dict[str, Any], start: Pose2D) -> List[Segment]:
        return mo.plan_go_to_pose(start, plan["target"], plan["position_tolerance"],
                                  plan["heading_tolerance"], plan["speed"], plan["accel"])

    def duration(self, plan: Dict[str, Any]) -> float:
        start = self.ctx.now_sample().pose
        return mo.path_duration(self._segments(plan, start), start.yaw)

    def drives_forwards(self, plan: Dict[str, Any]) -> bool:
        return mo.drives_forwards(self._segments(plan, self.ctx.now_sample().pose))

    def _plan_attempt(self, run: Run, start: Pose2D) -> bool:
        """Plan and send the next attempt; False if the robot is already there."""
        plan = run.plan
        segments = self._segments(plan, start)
        if not segments:
            return False
        plan["attempt"] += 1
        plan["sent"] = segments
        self.send_path(run, segments, start.yaw)
        return True

    @staticmethod
    def _errors(run: Run, pose: Pose2D) -> Tuple[float, float]:
        target = run.plan["target"]
        return (math.hypot(target.x - pose.x, target.y - pose.y), wrap_angle(target.yaw - pose.yaw))

    def start(self, run: Run) -> None:
        if not self._plan_attempt(run, self.ctx.now_sample().pose):
            self.ctx.finish(run, SUCCEEDED, "already within the tolerances: nothing to drive")

    def check_done(self, run: Run, outcome: Outcome, s: StateSample) -> Optional[Outcome]:
        plan = run.plan
        distance, heading = self._errors(run, s.pose)
        within = distance <= plan["position_tolerance"] and abs(heading) <= plan["heading_tolerance"]
        if within:
            return Outcome(SUCCEEDED, f"reached the pose within {distance:.4f} m and "
                           f"{abs(heading):.4f} rad (attempt {plan['attempt']})")
        if plan["attempt"] < 2:
            self.ctx.log.info(f"go_to_pose: missed by {distance:.4f} m and {heading:.4f} rad: "
                              "retrying the remainder once")
            if self._plan_attempt(run, s.pose):
                return None
        return Outcome(ABORTED, f"missed the pose by {distance:.4f} m and {abs(heading):.4f} rad "
                       f"after {plan['attempt']} attempts (tolerances {plan['position_tolerance']} m, "
                       f"{plan['heading_tolerance']} rad)")

    def feedback(self, run: Run, s: StateSample):
        distance, heading = self._errors(run, s.pose)
        return GoToPose.Feedback(current_pose=self.ctx.pose_msg(self.ctx.to_odom_pose(s)),
                                 distance_remaining=distance, heading_error=heading,
                                 attempt=run.plan["attempt"])

    def result(self, run: Run, s: Optional[StateSample]):
        result = GoToPose.Result(attempts=run.plan.get("attempt", 0), final_pose=self.ctx.final_pose_msg(s))
        if s is not None and "target" in run.plan:
            result.position_error, result.heading_error = self._errors(run, s.pose)
        else:
            result.position_error = result.heading_error = math.nan
        return result


#: action name -> the class that runs its goals (the order the servers are created in)
GOAL_TYPES: Dict[str, type] = {
    "set_head_angle": SetHeadAngleGoal,
    "set_lift_height": SetLiftHeightGoal,
    "turn_in_place": TurnInPlaceGoal,
    "drive_straight": DriveStraightGoal,
    "follow_path": FollowPathGoal,
    "go_to_pose": GoToPoseGoal,
}
