"""The driver's motion actions, served by the driver node (cozmo_interfaces/action/*).

``set_head_angle``, ``set_lift_height``, ``turn_in_place``, ``drive_straight``,
``follow_path`` and ``go_to_pose``: names relative to the driver's namespace.
Glue only: goal checks, planning, path conversion and the decisions of when a
goal is done live in :mod:`cozmo_driver.driver.motion` and the tf lookup in
:mod:`cozmo_driver.driver.transforms`; README.md, section "Motion actions and
Nav2", documents every goal, feedback and result field.

How a goal runs. The goal callback checks the goal (finite numbers, ranges,
tolerances, frames) and the driver (active, no emergency stop, connected, for
the treads: not picked up); a refused goal is REJECTED and the reason logged
(``/rosout``). An accepted goal preempts the goal running on the same motor
(head, lift, or treads: every action but the head and lift ones uses the
treads), which ends ABORTED with "preempted by a new goal". Its commands go to
the robot with an action id (SetHeadAngle, SetLiftHeight, TurnInPlace) or as a
path (ClearPath, AppendPathSeg*, ExecutePath with an event id). The robot's
replies - AcknowledgeAction, PathFollowingEvent, and every RobotState's flags
and pose - reach :meth:`MotionActions._on_handed_over` through a
:class:`~cozmo_driver.ros.handover.HandOver` (the I/O thread never touches a
goal); the trackers decide from them, and feedback goes out at up to 10 Hz.
Execute callbacks are coroutines that await one future per goal, so no executor
thread is ever blocked.

Cancel stops the motor (MoveHead(0), MoveLift(0), DriveWheels(0, 0), and
ClearPath for paths) and ends the goal CANCELED. A cmd_vel, head/angle,
head/velocity, lift/height or lift/velocity command preempts the running goal
of its motor (the node calls :meth:`MotionActions.preempt`); the emergency
stop, deactivation and a lost link abort every goal.

Frames. Poses may be in the driver's odom frame (or with an empty frame id),
in its base frame or base_link frame (relative to where the robot is when the
goal arrives), or in any frame that the latest transforms on ``/tf`` and
``/tf_static`` link to odom (:class:`~cozmo_driver.driver.transforms.TransformBuffer`;
no tf2_ros needed). The driver subscribes to those two topics the first time a
goal names such a frame, and the goal waits up to :data:`TF_WAIT_S` for its
transforms (the goal callback is a coroutine, in a re-entrant callback group of
the servers' own, so the wait holds up nothing else); a goal in a frame that
cannot be linked is then rejected, naming the frame. Targets are converted
from odom into the robot's own pose frame with the odometry offset
(:mod:`cozmo_driver.driver.odometry`), because the robot's path follower works
in its frame, in millimetres.

Like the rest of the node this expects one executor thread (the driver's
``main`` spins a SingleThreadedExecutor). The one exception is ``cmd_vel``,
served on a thread of its own: it reads :meth:`MotionActions.has_goal`, and a
goal is registered under the node's ``_drive_lock``, so that a cmd_vel either
comes before the goal or sees it (and is handed to the executor to preempt it).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from cozmo_interfaces.action import (DriveStraight, FollowPath, GoToPose, SetHeadAngle,
                                     SetLiftHeight, TurnInPlace)
from geometry_msgs.msg import PoseStamped
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.task import Future
from tf2_msgs.msg import TFMessage

from .. import robot_geometry as geo
from ..client import LinkState, LinkStateChanged
from ..driver import motion as mo
from ..driver.motion import ABORTED, CANCELED, SUCCEEDED, MotionError, Outcome, Segment, StateSample
from ..driver.odometry import Pose2D, compose, inverse, wrap_angle
from ..driver.sensors import StatusFlag
from ..driver.transforms import Transform, TransformBuffer, TransformError, compose as tf_compose
from ..driver.transforms import pose_to_2d
from ..protocol import messages as msgs
from ..protocol.session import MessageReceived
from . import qos
from .handover import HandOver

__all__ = ["MotionActions", "ACTION_NAMES", "TF_WAIT_S"]

#: action name -> (type, motor it uses)
ACTION_NAMES: Dict[str, Tuple[Any, str]] = {
    "set_head_angle": (SetHeadAngle, "head"),
    "set_lift_height": (SetLiftHeight, "lift"),
    "turn_in_place": (TurnInPlace, "wheels"),
    "drive_straight": (DriveStraight, "wheels"),
    "follow_path": (FollowPath, "wheels"),
    "go_to_pose": (GoToPose, "wheels"),
}

PREEMPTED = "preempted by a new goal"
_FEEDBACK_PERIOD_S = 0.1
_TF_MAX_AGE_S = 10.0
#: how long a goal in a frame tf does not link (yet) waits for its transforms
TF_WAIT_S = 2.0
_MAX_ACCEL_MPS2 = 2.0
_MAX_TURN_ACCEL_RADPS2 = 50.0
_MAX_AXIS_ACCEL_RADPS2 = 100.0
_SAFETY_FACTOR = 2.0
_SAFETY_MARGIN_S = 3.0
_STATE, _ACK, _PATH, _LINK = range(4)

_TF_QOS = qos.QOS_TF
_TF_STATIC_QOS = qos.profile(100, latched=True)  # what tf2's static listener asks for


@dataclass
class _Run:
    """One accepted goal."""

    name: str
    resource: str
    goal_handle: Any
    plan: Dict[str, Any]
    future: Future = field(default_factory=Future)
    tracker: Any = None
    outcome: Optional[Outcome] = None
    last_feedback: float = -1e9
    sample: Optional[StateSample] = None     # the latest robot state seen while running
    stop: Optional[Callable[[], None]] = None


class MotionActions:
    """The six motion action servers of one driver node. See the module docstring.

    ``node`` is the :class:`~cozmo_driver.ros.driver_node.CozmoDriverNode` (its state:
    active, emergency stop, link, odometry offset, parameters, frame names) and
    ``robot`` its :class:`~cozmo_driver.client.Robot`."""

    def __init__(self, node, robot) -> None:
        self._node = node
        self._robot = robot
        self._log = node.get_logger()
        self._runs: Dict[str, _Run] = {}            # motor -> its running goal
        self._by_goal: Dict[bytes, _Run] = {}
        self._plans: Dict[int, Dict[str, Any]] = {}  # id(goal request) -> checked goal
        self._state = None                           # latest RobotState (set on the I/O thread)
        self._event_id = 0
        self._pending_executes = 0                   # goal and execute callbacks not returned
        self._closed = False
        self._retired: List[Any] = []
        self._retire_timer = None
        self.tf = TransformBuffer(max_age=_TF_MAX_AGE_S)
        self._tf_subscribed = False
        self._tf_waiters: List[Tuple[List[str], Future]] = []
        self._entities: List[Tuple[Callable[[Any], Any], Any]] = []
        self._handover = HandOver(node, self._on_handed_over)
        self._entities.append((HandOver.destroy, self._handover))
        # The goal callback may wait for tf (a coroutine): a group of their own, re-entrant,
        # so that this neither holds the node's default group (odometry, commands) nor the
        # other goals, cancels and tf messages. The node is spun by one thread (README).
        self._group = ReentrantCallbackGroup()
        self._servers = []
        for name, (action_type, _) in ACTION_NAMES.items():
            self._servers.append(ActionServer(
                node, action_type, name, execute_callback=functools.partial(self._execute, name),
                goal_callback=functools.partial(self._on_goal, name),
                handle_accepted_callback=lambda handle, name=name: self._on_accepted(name, handle),
                cancel_callback=self._on_cancel, callback_group=self._group))
        robot.add_listener(self._on_robot_event)

    # ------------------------------------------------------------------ life cycle

    @property
    def running(self) -> Dict[str, str]:
        """Motor -> name of the action running on it."""
        return {resource: run.name for resource, run in self._runs.items()}

    def has_goal(self, resource: str) -> bool:
        """Whether a goal runs on ``resource`` (any thread: a dict lookup)."""
        return resource in self._runs

    def preempt(self, resource: str, reason: str) -> None:
        """End the goal running on ``resource`` as ABORTED (a topic command took the motor over)."""
        run = self._runs.get(resource)
        if run is not None:
            self._finish(run, ABORTED, reason)

    def abort_all(self, reason: str) -> None:
        """End every running goal as ABORTED (emergency stop, deactivation, lost link)."""
        for run in list(self._runs.values()):
            self._finish(run, ABORTED, reason)

    def destroy(self) -> None:
        """Abort every goal and release the servers, subscriptions and guard condition.

        An action server is destroyed once no execute callback is pending (the result of an
        aborted goal is sent on the executor's next turn); until then it refuses goals."""
        if self._closed:
            return
        self._closed = True
        try:
            self._robot.remove_listener(self._on_robot_event)
        except ValueError:
            pass
        self.abort_all("the driver is shutting down (cleanup)")
        for _, future in self._tf_waiters:
            if not future.done():
                future.set_result(False)
        for destroy, entity in reversed(self._entities):
            destroy(entity)
        self._entities.clear()
        if self._pending_executes == 0 or not self._node.context.ok():
            # (with the context shut down nothing spins any more: nothing to wait for)
            for server in self._servers:
                server.destroy()
        else:
            self._retired = list(self._servers)
            self._retire_timer = self._node.create_timer(0.2, self._destroy_retired)
        self._servers = []

    def _destroy_retired(self) -> None:
        if self._pending_executes:
            return
        self.destroy_retired()

    def destroy_retired(self) -> None:
        """Destroy the servers still waiting for their execute callbacks, now: the node is
        being destroyed, nothing will run those callbacks any more, and an action server
        left alive would keep publishing its goals' status (latched) after the node is gone."""
        for server in self._retired:
            server.destroy()
        self._retired = []
        if self._retire_timer is not None:
            self._node.destroy_timer(self._retire_timer)
            self._retire_timer = None

    # ------------------------------------------------------------------ inputs

    def _on_robot_event(self, event: Any) -> None:
        """Robot client I/O thread: hand what the trackers need to the executor."""
        if isinstance(event, MessageReceived):
            message = event.message
            name = message.NAME
            if name == "RobotState":
                self._state = message
                if not self._runs:
                    return
                item = (_STATE, time.monotonic(), message)
            elif name == "AcknowledgeAction":
                item = (_ACK, int(message.action_id), None)
            elif name == "PathFollowingEvent":
                item = (_PATH, int(message.event_id), int(message.event_type))
            else:
                return
        elif isinstance(event, LinkStateChanged):
            if event.state is LinkState.READY:
                return
            self._state = None
            item = (_LINK, event.state, event.reason)
        else:
            return
        self._handover.put(item)

    def _on_tf(self, msg: TFMessage, static: bool) -> None:
        now = time.monotonic()
        for t in msg.transforms:
            tr, q = t.transform.translation, t.transform.rotation
            self.tf.set(t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z),
                        (q.x, q.y, q.z, q.w), now, static)
        for frames, future in self._tf_waiters:
            if not future.done() and self._frames_known(frames):
                future.set_result(True)

    def _subscribe_tf(self) -> None:
        """Follow /tf and /tf_static from now on. Not before a goal needs them: the driver
        would otherwise wake up for its own odometry transforms, about 33 times a second
        (measured: about 4 % of a core more)."""
        if self._tf_subscribed or self._closed:
            return
        self._tf_subscribed = True
        node = self._node
        for topic, profile, static in (("/tf", _TF_QOS, False), ("/tf_static", _TF_STATIC_QOS, True)):
            sub = node.create_subscription(TFMessage, topic,
                                           lambda msg, static=static: self._on_tf(msg, static), profile,
                                           callback_group=self._group)
            self._entities.append((node.destroy_subscription, sub))
        self._log.info("following /tf and /tf_static for goals in other frames than odom")

    def _frames_known(self, frames: List[str]) -> bool:
        odom = self._node._frame("odom_frame")
        now = time.monotonic()
        for frame in frames:
            try:
                self.tf.lookup(odom, frame, now)
            except TransformError:
                return False
        return True

    def _goal_frames(self, name: str, goal) -> List[str]:
        """The frames a goal names that are neither odom nor the robot's own."""
        if name == "go_to_pose":
            names = {goal.pose.header.frame_id}
        elif name == "follow_path":
            names = {goal.path.header.frame_id, goal.segments_frame_id}
            names.update(p.header.frame_id for p in goal.path.poses)
        else:
            return []
        node = self._node
        own = {"", node._frame("odom_frame"), node._frame("base_frame"),
               node._frame("base_link_frame")}
        return sorted({n.lstrip("/") for n in names} - own)

    async def _wait_for_frames(self, frames: List[str]) -> None:
        """Until tf links every frame to odom, or TF_WAIT_S passes (the check then says why)."""
        if self._frames_known(frames):
            return
        self._subscribe_tf()
        future: Future = Future()
        waiter = (frames, future)
        self._tf_waiters.append(waiter)

        def give_up() -> None:
            if not future.done():
                future.set_result(False)
        timer = self._node.create_timer(TF_WAIT_S, give_up, callback_group=self._group)
        try:
            await future
        finally:
            self._node.destroy_timer(timer)
            self._tf_waiters.remove(waiter)

    def _on_handed_over(self, item: Tuple[int, Any, Any]) -> None:
        """What the I/O thread handed over, on the executor: feed the trackers."""
        kind, a, b = item
        if kind == _STATE:
            sample = _sample(b, a)
            for run in list(self._runs.values()):
                run.sample = sample
                if run.tracker is None:  # accepted, its commands not sent yet
                    continue
                outcome = run.tracker.on_state(sample)
                if outcome is not None:
                    self._on_tracker_done(run, outcome, sample)
                elif run.outcome is None and sample.t - run.last_feedback >= _FEEDBACK_PERIOD_S:
                    run.last_feedback = sample.t
                    self._publish_feedback(run, sample)
        elif kind == _ACK:
            for run in list(self._runs.values()):
                if run.tracker is not None:
                    run.tracker.on_ack(a)
        elif kind == _PATH:
            for run in list(self._runs.values()):
                if run.tracker is not None:
                    run.tracker.on_path_event(a, b)
        elif kind == _LINK and self._runs:
            self.abort_all(f"lost the robot ({a.value}: {b})")

    # ------------------------------------------------------------------ goals

    async def _on_goal(self, name: str, goal) -> GoalResponse:
        resource = ACTION_NAMES[name][1]
        frames = self._goal_frames(name, goal)
        if frames and not self._closed:
            self._pending_executes += 1  # the server must outlive this callback
            try:
                await self._wait_for_frames(frames)
            finally:
                self._pending_executes -= 1
        try:
            if self._closed:
                raise MotionError("the driver is shutting down")
            self._check_driver(resource)
            plan = getattr(self, "_check_" + name)(goal)
        except MotionError as exc:
            self._log.warning(f"{name} goal rejected: {exc}")
            return GoalResponse.REJECT
        for warning in plan.get("warnings", ()):
            self._log.warning(f"{name}: {warning}")
        if len(self._plans) > 64:  # accepted goals never handed over (should not happen)
            self._plans.clear()
        self._plans[id(goal)] = plan
        return GoalResponse.ACCEPT

    def _check_driver(self, resource: str) -> None:
        node = self._node
        if not node._active:
            raise MotionError("the driver is not active")
        if node._estop:
            raise MotionError("emergency stop engaged (release it with the emergency_stop service)")
        state = self._state
        if not node.connected or state is None:
            raise MotionError("not connected to the robot")
        if resource == "wheels":
            reason = mo.interruption(int(state.status))
            if reason:
                raise MotionError(f"{reason}: the treads cannot move it")

    def _on_accepted(self, name: str, goal_handle) -> None:
        plan = self._plans.pop(id(goal_handle.request), None)
        resource = ACTION_NAMES[name][1]
        run = _Run(name, resource, goal_handle, plan or {})
        previous = self._runs.get(resource)
        if previous is not None:
            self._finish(previous, ABORTED, f"{PREEMPTED} ({name})")
        with self._node._drive_lock:  # a cmd_vel on its own thread sees the goal, or came first
            self._runs[resource] = run
        self._by_goal[bytes(goal_handle.goal_id.uuid)] = run
        if plan is None:
            self._finish(run, ABORTED, "internal error: the goal was not checked")
        goal_handle.execute()

    def _on_cancel(self, goal_handle) -> CancelResponse:
        run = self._by_goal.get(bytes(goal_handle.goal_id.uuid))
        if run is None or run.outcome is not None:
            return CancelResponse.REJECT
        self._stop_motor(run)
        self._finish(run, CANCELED, "canceled: the motor was stopped")
        return CancelResponse.ACCEPT

    async def _execute(self, name: str, goal_handle):
        key = bytes(goal_handle.goal_id.uuid)
        run = self._by_goal.get(key)
        self._pending_executes += 1
        try:
            if run is None:  # pragma: no cover - every accepted goal has a run
                goal_handle.abort()
                return ACTION_NAMES[name][0].Result()
            if run.outcome is None:
                try:
                    getattr(self, "_start_" + run.name)(run)
                except MotionError as exc:
                    self._finish(run, ABORTED, str(exc))
            if run.outcome is None:
                await run.future
            outcome = run.outcome
            result = self._result(run)
            if outcome.status == SUCCEEDED:
                goal_handle.succeed()
            elif outcome.status == CANCELED and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.abort()
            # (one rclpy logging call per severity: a call site may not change its severity)
            if outcome.status == ABORTED:
                self._log.warning(f"{run.name}: {outcome.status}: {outcome.message}")
            else:
                self._log.info(f"{run.name}: {outcome.status}: {outcome.message}")
            return result
        finally:
            self._pending_executes -= 1
            self._by_goal.pop(key, None)

    def _finish(self, run: _Run, status: str, message: str) -> None:
        if run.outcome is not None:
            return
        run.outcome = Outcome(status, message)
        if self._runs.get(run.resource) is run:
            del self._runs[run.resource]
        if not run.future.done():
            run.future.set_result(run.outcome)

    def _on_tracker_done(self, run: _Run, outcome: Outcome, sample: StateSample) -> None:
        if outcome.status == SUCCEEDED:
            check = getattr(self, "_check_done_" + run.name, None)
            if check is not None:
                outcome = check(run, sample)
                if outcome is None:  # the run goes on (a retry)
                    return
        if outcome.status == ABORTED:
            self._stop_motor(run)
        self._finish(run, outcome.status, outcome.message)

    def _stop_motor(self, run: _Run) -> None:
        if run.stop is not None:
            try:
                run.stop()
            except Exception as exc:  # noqa: BLE001 - a lost link: nothing to stop then
                self._log.warning(f"{run.name}: could not stop the motor: {exc}")

    # ------------------------------------------------------------------ helpers

    def _send(self, *messages) -> None:
        for message in messages:
            self._robot.post(message)

    def _now_sample(self) -> StateSample:
        state = self._state
        if state is None:
            raise MotionError("not connected to the robot")
        return _sample(state, time.monotonic())

    def _offset(self) -> Pose2D:
        """odom <- robot pose frame (the odometry tracker's offset)."""
        return self._node._tracker.offset

    def _to_odom_pose(self, sample: StateSample) -> Pose2D:
        return compose(self._offset(), sample.pose)

    def _pose_msg(self, pose: Pose2D) -> PoseStamped:
        msg = PoseStamped()
        msg.header.stamp = self._node.get_clock().now().to_msg()
        msg.header.frame_id = self._node._frame("odom_frame")
        msg.pose.position.x, msg.pose.position.y = pose.x, pose.y
        msg.pose.orientation.z = math.sin(pose.yaw / 2.0)
        msg.pose.orientation.w = math.cos(pose.yaw / 2.0)
        return msg

    def _frame_in_odom(self, frame_id: str, field_name: str) -> Transform:
        """The pose of frame ``frame_id`` in the driver's odom frame (3D)."""
        node = self._node
        frame = frame_id.lstrip("/")
        odom = node._frame("odom_frame")
        if frame in ("", odom):
            return Transform()
        if frame in (node._frame("base_frame"), node._frame("base_link_frame")):
            here = self._to_odom_pose(self._now_sample())
            return Transform((here.x, here.y, 0.0), (0.0, 0.0, math.sin(here.yaw / 2.0),
                                                      math.cos(here.yaw / 2.0)))
        try:
            return self.tf.lookup(odom, frame, time.monotonic())
        except TransformError as exc:
            raise MotionError(f"{field_name} = '{frame}': no transform to the driver's odom frame "
                              f"'{odom}' ({exc})") from None

    def _pose_to_robot(self, pose, frame_id: str, field_name: str,
                       frame_cache: Optional[Dict[str, Transform]] = None) -> Pose2D:
        """A geometry_msgs/Pose in ``frame_id`` -> a Pose2D in the robot's own frame."""
        p, q = pose.position, pose.orientation
        mo.require_finite(field_name + ".", **{"position.x": p.x, "position.y": p.y,
                                               "position.z": p.z, "orientation.x": q.x,
                                               "orientation.y": q.y, "orientation.z": q.z,
                                               "orientation.w": q.w})
        norm = math.sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w)
        if norm < 1e-6:
            raise MotionError(f"{field_name}.orientation is all zeros: not a rotation "
                              "(use w = 1 for no rotation)")
        if frame_cache is not None and frame_id in frame_cache:
            frame = frame_cache[frame_id]
        else:
            frame = self._frame_in_odom(frame_id, field_name + ".header.frame_id")
            if frame_cache is not None:
                frame_cache[frame_id] = frame
        quat = (q.x / norm, q.y / norm, q.z / norm, q.w / norm)
        odom = pose_to_2d(tf_compose(frame, Transform((p.x, p.y, p.z), quat)))
        return compose(inverse(self._offset()), Pose2D(*odom))

    def _frame_to_robot(self, frame_id: str, field_name: str) -> Pose2D:
        """The 2D transform robot frame <- ``frame_id``."""
        odom = Pose2D(*pose_to_2d(self._frame_in_odom(frame_id, field_name)))
        return compose(inverse(self._offset()), odom)

    def _next_event_id(self) -> int:
        self._event_id = self._event_id % 65535 + 1
        return self._event_id

    def _deadline(self, expected_s: float) -> float:
        return time.monotonic() + _SAFETY_FACTOR * expected_s + _SAFETY_MARGIN_S

    def _take_treads(self) -> None:
        """The treads are this goal's now: a cmd_vel watchdog stop still pending from an
        earlier teleop would interrupt it (the watchdog only stops after a non-zero cmd_vel)."""
        self._node._cancel_watchdog()

    def _send_path(self, run: _Run, segments: List[Segment], start_heading: float) -> None:
        self._take_treads()
        event_id = self._next_event_id()
        self._send(msgs.ClearPath(unknown=0), *[mo.segment_message(s) for s in segments],
                   msgs.ExecutePath(event_id=event_id, unknown=False))
        run.tracker = mo.PathTracker(deadline=self._deadline(mo.path_duration(segments, start_heading)),
                                     event_id=event_id, segments=list(segments))
        run.stop = lambda: self._send(msgs.ClearPath(unknown=0),
                                      msgs.DriveWheels(lwheel_speed_mmps=0.0, rwheel_speed_mmps=0.0))

    def _param(self, name: str) -> float:
        return float(self._node._params[name])

    def _axis_speeds(self, goal, prefix: str, speed_param: str, accel_param: str,
                     warnings: List[str]) -> Tuple[float, float, float]:
        limit = self._param(speed_param)
        speed, w1 = mo.check_speed(goal.max_speed, prefix + "max_speed", limit, limit, "rad/s")
        accel, w2 = mo.check_speed(goal.accel, prefix + "accel", self._param(accel_param),
                                   _MAX_AXIS_ACCEL_RADPS2, "rad/s^2")
        if not math.isfinite(goal.duration) or not 0.0 <= goal.duration <= 60.0:
            raise MotionError(f"{prefix}duration = {goal.duration} s: must be within 0..60 s "
                              "(0 = as fast as max_speed and accel allow)")
        warnings.extend(w for w in (w1, w2) if w)
        return speed, accel, float(goal.duration)

    def _linear_speeds(self, speed_value: float, accel_value: float, prefix: str,
                       warnings: List[str]) -> Tuple[float, float]:
        speed, w1 = mo.check_speed(speed_value, prefix + "speed", mo.DEFAULT_SPEED_MPS,
                                   self._param("max_wheel_speed"), "m/s")
        accel, w2 = mo.check_speed(accel_value, prefix + "accel", mo.DEFAULT_ACCEL_MPS2,
                                   _MAX_ACCEL_MPS2, "m/s^2")
        warnings.extend(w for w in (w1, w2) if w)
        return speed, accel

    def _publish_feedback(self, run: _Run, sample: StateSample) -> None:
        feedback = getattr(self, "_feedback_" + run.name)(run, sample)
        run.goal_handle.publish_feedback(feedback)

    def _result(self, run: _Run):
        sample = run.sample
        if sample is None and self._state is not None:
            sample = _sample(self._state, time.monotonic())
        result = getattr(self, "_result_" + run.name)(run, sample)
        result.success = run.outcome.status == SUCCEEDED
        result.message = run.outcome.message
        return result

    # ------------------------------------------------------------------ set_head_angle

    def _check_axis(self, goal, field: str, limits: Tuple[float, float], unit: str,
                    motor: str) -> Dict[str, Any]:
        """The plan of a head or lift goal whose target is ``goal.<field>``; the speed limits
        and acceleration default to the ``<motor>_max_speed``/``_acceleration`` parameters."""
        value = getattr(goal, field)
        mo.require_finite("", **{field: value, "max_speed": goal.max_speed, "accel": goal.accel,
                                 "duration": goal.duration})
        lo, hi = limits
        if not lo <= value <= hi:
            raise MotionError(f"{field} = {value:.4f} {unit} is outside the {motor}'s range "
                              f"{lo:.3f}..{hi:.3f} {unit}")
        warnings: List[str] = []
        speed, accel, duration = self._axis_speeds(goal, "", f"{motor}_max_speed",
                                                   f"{motor}_acceleration", warnings)
        return {"target": float(value), "speed": speed, "accel": accel, "duration": duration,
                "warnings": warnings}

    def _check_set_head_angle(self, goal) -> Dict[str, Any]:
        return self._check_axis(goal, "angle", (geo.HEAD_MIN_ANGLE_RAD, geo.HEAD_MAX_ANGLE_RAD),
                                "rad", "head")

    def _start_set_head_angle(self, run: _Run) -> None:
        plan = run.plan
        self._start_axis(run, "head", plan["target"] - self._now_sample().head_angle,
                         lambda action_id: msgs.SetHeadAngle(
                             angle_rad=plan["target"], max_speed_rad_per_sec=plan["speed"],
                             accel_rad_per_sec2=plan["accel"], duration_sec=plan["duration"],
                             action_id=action_id),
                         mo.HEAD_TOLERANCE_RAD, StatusFlag.HEAD_IN_POS, "rad", msgs.MoveHead)

    def _start_axis(self, run: _Run, name: str, arc: float, command: Callable[[int], Any],
                    tolerance: float, flag: int, unit: str, stop_type: Any) -> None:
        """Send the head's or lift's ``command(action_id)`` and track it: ``arc`` (rad) is the
        motor's travel; the motor is stopped with ``stop_type(speed_rad_per_sec=0)``."""
        plan = run.plan
        action_id = self._robot.new_action_id()
        self._send(command(action_id))
        expected = mo.axis_duration(arc, plan["speed"], plan["accel"], plan["duration"])
        run.tracker = mo.AxisTracker(deadline=self._deadline(expected), name=name,
                                     target=plan["target"], tolerance=tolerance, flag=flag,
                                     action_id=action_id, unit=unit)
        run.stop = lambda: self._send(stop_type(speed_rad_per_sec=0.0))

    def _feedback_set_head_angle(self, run: _Run, s: StateSample):
        return SetHeadAngle.Feedback(current_angle=s.head_angle)

    def _result_set_head_angle(self, run: _Run, s: Optional[StateSample]):
        return SetHeadAngle.Result(final_angle=s.head_angle if s else math.nan)

    # ------------------------------------------------------------------ set_lift_height

    def _check_set_lift_height(self, goal) -> Dict[str, Any]:
        return self._check_axis(goal, "height", (geo.LIFT_MIN_HEIGHT_M, geo.LIFT_MAX_HEIGHT_M),
                                "m", "lift")

    def _start_set_lift_height(self, run: _Run) -> None:
        plan = run.plan
        arc = (geo.lift_height_to_angle(plan["target"])
               - geo.lift_height_to_angle(self._now_sample().lift_height))
        self._start_axis(run, "lift", arc,
                         lambda action_id: msgs.SetLiftHeight(
                             height_mm=plan["target"] * 1000.0,
                             max_speed_rad_per_sec=plan["speed"], accel_rad_per_sec2=plan["accel"],
                             duration_sec=plan["duration"], action_id=action_id),
                         mo.LIFT_TOLERANCE_M, StatusFlag.LIFT_IN_POS, "m", msgs.MoveLift)

    def _feedback_set_lift_height(self, run: _Run, s: StateSample):
        return SetLiftHeight.Feedback(current_height=s.lift_height)

    def _result_set_lift_height(self, run: _Run, s: Optional[StateSample]):
        return SetLiftHeight.Result(final_height=s.lift_height if s else math.nan)

    # ------------------------------------------------------------------ turn_in_place

    def _check_turn_in_place(self, goal) -> Dict[str, Any]:
        mo.require_finite("", angle=goal.angle, speed=goal.speed, accel=goal.accel,
                          tolerance=goal.tolerance)
        tolerance = mo.check_tolerance(goal.tolerance, "tolerance", mo.MIN_TURN_TOLERANCE_RAD, 0.5,
                                       "rad")
        if not goal.is_absolute and abs(goal.angle) > 20.0 * math.pi:
            raise MotionError(f"angle = {goal.angle:g} rad: at most 10 turns (62.8 rad) at once")
        warnings: List[str] = []
        speed, w1 = mo.check_speed(goal.speed, "speed", mo.DEFAULT_TURN_SPEED_RADPS,
                                   mo.MAX_TURN_SPEED_RADPS, "rad/s")
        accel, w2 = mo.check_speed(goal.accel, "accel", mo.DEFAULT_TURN_ACCEL_RADPS2,
                                   _MAX_TURN_ACCEL_RADPS2, "rad/s^2")
        warnings.extend(w for w in (w1, w2) if w)
        return {"angle": float(goal.angle), "absolute": bool(goal.is_absolute), "speed": speed,
                "accel": accel, "tolerance": tolerance, "warnings": warnings}

    def _start_turn_in_place(self, run: _Run) -> None:
        plan = run.plan
        sample = self._now_sample()
        if plan["absolute"]:  # a heading in odom -> in the robot's frame
            angle = wrap_angle(plan["angle"] - self._offset().yaw)
            expected = mo.turn_duration(wrap_angle(angle - sample.yaw), plan["speed"], plan["accel"])
        else:
            angle = plan["angle"]
            expected = mo.turn_duration(angle, plan["speed"], plan["accel"])
        action_id = self._robot.new_action_id()
        self._take_treads()
        # the robot stops within its own tolerance; ask for a little less than ours
        robot_tolerance = max(0.8 * plan["tolerance"], mo.MIN_TURN_TOLERANCE_RAD * 0.8)
        self._send(msgs.TurnInPlace(angle_rad=angle, speed_rad_per_sec=plan["speed"],
                                    accel_rad_per_sec2=plan["accel"],
                                    angle_tolerance_rad=robot_tolerance,
                                    is_absolute=plan["absolute"], action_id=action_id))
        run.tracker = mo.TurnTracker(deadline=self._deadline(expected), action_id=action_id,
                                     start_yaw=sample.yaw, angle=angle, absolute=plan["absolute"],
                                     tolerance=plan["tolerance"])
        run.stop = lambda: self._send(msgs.DriveWheels(lwheel_speed_mmps=0.0, rwheel_speed_mmps=0.0))

    def _feedback_turn_in_place(self, run: _Run, s: StateSample):
        t = run.tracker
        return TurnInPlace.Feedback(current_heading=self._to_odom_pose(s).yaw, turned=t.turned,
                                    remaining=t.remaining(s.yaw))

    def _result_turn_in_place(self, run: _Run, s: Optional[StateSample]):
        t = run.tracker
        if s is None or t is None:
            return TurnInPlace.Result(final_heading=math.nan, turned=0.0, heading_error=math.nan)
        return TurnInPlace.Result(final_heading=self._to_odom_pose(s).yaw, turned=t.turned,
                                  heading_error=t.remaining(s.yaw))

    # ------------------------------------------------------------------ drive_straight

    def _check_drive_straight(self, goal) -> Dict[str, Any]:
        mo.require_finite("", distance=goal.distance, speed=goal.speed, accel=goal.accel,
                          tolerance=goal.tolerance)
        if abs(goal.distance) < 0.001:
            raise MotionError(f"distance = {goal.distance:g} m: at least 0.001 m (either way)")
        if abs(goal.distance) > 10.0:
            raise MotionError(f"distance = {goal.distance:g} m: at most 10 m at once")
        tolerance = mo.check_tolerance(goal.tolerance, "tolerance", mo.MIN_POSITION_TOLERANCE_M,
                                       0.5, "m")
        warnings: List[str] = []
        speed, accel = self._linear_speeds(goal.speed, goal.accel, "", warnings)
        return {"distance": float(goal.distance), "speed": speed, "accel": accel,
                "tolerance": tolerance, "warnings": warnings}

    def _start_drive_straight(self, run: _Run) -> None:
        plan = run.plan
        start = self._now_sample().pose
        plan["start"] = start
        segment = mo.plan_drive_straight(start, plan["distance"], plan["speed"], plan["accel"])
        self._send_path(run, [segment], start.yaw)

    @staticmethod
    def _traveled(run: _Run, s: StateSample) -> float:
        start = run.plan["start"]
        return (s.x - start.x) * math.cos(start.yaw) + (s.y - start.y) * math.sin(start.yaw)

    def _check_done_drive_straight(self, run: _Run, s: StateSample) -> Outcome:
        traveled = self._traveled(run, s)
        distance, tolerance = run.plan["distance"], run.plan["tolerance"]
        if abs(traveled - distance) <= tolerance:
            return Outcome(SUCCEEDED, f"drove {traveled:.4f} m of {distance:.4f} m")
        return Outcome(ABORTED, f"the robot stopped after {traveled:.4f} m of {distance:.4f} m "
                       f"(tolerance {tolerance} m)")

    def _feedback_drive_straight(self, run: _Run, s: StateSample):
        traveled = self._traveled(run, s)
        return DriveStraight.Feedback(distance_traveled=traveled,
                                      distance_remaining=run.plan["distance"] - traveled)

    def _result_drive_straight(self, run: _Run, s: Optional[StateSample]):
        traveled = self._traveled(run, s) if s is not None and "start" in run.plan else 0.0
        return DriveStraight.Result(distance_traveled=traveled)

    # ------------------------------------------------------------------ follow_path

    def _check_follow_path(self, goal) -> Dict[str, Any]:
        mo.require_finite("", speed=goal.speed, accel=goal.accel, decel=goal.decel,
                          turn_speed=goal.turn_speed, turn_accel=goal.turn_accel,
                          fit_tolerance=goal.fit_tolerance)
        poses, segments = goal.path.poses, goal.segments
        if not poses and not segments:
            raise MotionError("empty goal: give path.poses or segments")
        if poses and segments:
            raise MotionError("give either path.poses or segments, not both")
        warnings: List[str] = []
        speed, accel = self._linear_speeds(goal.speed, goal.accel, "", warnings)
        decel, w = mo.check_speed(goal.decel, "decel", mo.DEFAULT_ACCEL_MPS2, _MAX_ACCEL_MPS2, "m/s^2")
        warnings.extend([w] if w else [])
        turn_speed, w = mo.check_speed(goal.turn_speed, "turn_speed", mo.DEFAULT_TURN_SPEED_RADPS,
                                       mo.MAX_TURN_SPEED_RADPS, "rad/s")
        warnings.extend([w] if w else [])
        turn_accel, w = mo.check_speed(goal.turn_accel, "turn_accel", mo.DEFAULT_TURN_ACCEL_RADPS2,
                                       _MAX_TURN_ACCEL_RADPS2, "rad/s^2")
        warnings.extend([w] if w else [])
        plan: Dict[str, Any] = {"speed": speed, "accel": accel, "decel": decel,
                                "turn_speed": turn_speed, "turn_accel": turn_accel,
                                "warnings": warnings}
        if poses:
            fit = mo.check_tolerance(goal.fit_tolerance, "fit_tolerance", 0.0005, 0.5, "m")
            if len(poses) > mo.MAX_PATH_POSES:
                raise MotionError(f"path has {len(poses)} poses; at most {mo.MAX_PATH_POSES}")
            cache: Dict[str, Transform] = {}
            robot_poses = [self._pose_to_robot(p.pose, p.header.frame_id or goal.path.header.frame_id,
                                               f"path.poses[{k}]", cache)
                           for k, p in enumerate(poses)]
            plan.update(poses=robot_poses, fit=fit)
            self._convert(plan, self._now_sample().pose)  # refuse what cannot be converted now
        else:
            raw = [Segment(int(s.type), **{f: float(getattr(s, f)) for f in Segment.FIELDS})
                   for s in segments]
            checked, seg_warnings = mo.check_segments(raw, self._param("max_wheel_speed"))
            warnings.extend(seg_warnings)
            to_robot = self._frame_to_robot(goal.segments_frame_id, "segments_frame_id")
            plan["segments"] = [mo.apply_defaults(s.transformed(to_robot), speed, accel, decel,
                                                  turn_speed, turn_accel, 0.02) for s in checked]
        return plan

    @staticmethod
    def _convert(plan: Dict[str, Any], start: Pose2D) -> List[Segment]:
        return mo.path_to_segments(plan["poses"], start, fit_tolerance=plan["fit"],
                                   speed=plan["speed"], accel=plan["accel"], decel=plan["decel"],
                                   turn_speed=plan["turn_speed"], turn_accel=plan["turn_accel"])

    def _start_follow_path(self, run: _Run) -> None:
        plan = run.plan
        start = self._now_sample().pose
        segments = plan.get("segments")
        if segments is None:
            segments = self._convert(plan, start)
        plan["sent"] = segments
        if not segments:
            self._finish(run, SUCCEEDED, "already at the end of the path: nothing to drive")
            return
        self._log.info(f"follow_path: {len(segments)} segments, "
                       f"{sum(s.length for s in segments):.3f} m: "
                       + "; ".join(s.describe() for s in segments[:6])
                       + (" ..." if len(segments) > 6 else ""))
        self._send_path(run, segments, start.yaw)

    def _feedback_follow_path(self, run: _Run, s: StateSample):
        t = run.tracker
        segments = run.plan["sent"]
        return FollowPath.Feedback(current_segment=t.current, num_segments=len(segments),
                                   current_pose=self._pose_msg(self._to_odom_pose(s)),
                                   distance_remaining=mo.distance_remaining(segments, t.current,
                                                                            s.x, s.y))

    def _result_follow_path(self, run: _Run, s: Optional[StateSample]):
        segments = run.plan.get("sent") or []
        result = FollowPath.Result(num_segments=len(segments),
                                   segments_completed=run.tracker.completed_segments
                                   if run.tracker is not None else
                                   (len(segments) if run.outcome.status == SUCCEEDED else 0))
        if s is not None:
            result.final_pose = self._pose_msg(self._to_odom_pose(s))
        return result

    # ------------------------------------------------------------------ go_to_pose

    def _check_go_to_pose(self, goal) -> Dict[str, Any]:
        mo.require_finite("", position_tolerance=goal.position_tolerance,
                          heading_tolerance=goal.heading_tolerance, speed=goal.speed)
        pos_tol = mo.check_tolerance(goal.position_tolerance, "position_tolerance",
                                     mo.MIN_POSITION_TOLERANCE_M, 1.0, "m")
        yaw_tol = mo.check_tolerance(goal.heading_tolerance, "heading_tolerance",
                                     mo.MIN_HEADING_TOLERANCE_RAD, math.pi, "rad")
        warnings: List[str] = []
        speed, accel = self._linear_speeds(goal.speed, 0.0, "", warnings)
        target = self._pose_to_robot(goal.pose.pose, goal.pose.header.frame_id, "pose")
        return {"target": target, "position_tolerance": pos_tol, "heading_tolerance": yaw_tol,
                "speed": speed, "accel": accel, "attempt": 0, "warnings": warnings}

    def _plan_attempt(self, run: _Run, start: Pose2D) -> bool:
        """Plan and send the next attempt; False if the robot is already there."""
        plan = run.plan
        segments = mo.plan_go_to_pose(start, plan["target"], plan["position_tolerance"],
                                      plan["heading_tolerance"], plan["speed"], plan["accel"])
        if not segments:
            return False
        plan["attempt"] += 1
        plan["sent"] = segments
        self._send_path(run, segments, start.yaw)
        return True

    def _errors(self, run: _Run, pose: Pose2D) -> Tuple[float, float]:
        target = run.plan["target"]
        return (math.hypot(target.x - pose.x, target.y - pose.y), wrap_angle(target.yaw - pose.yaw))

    def _start_go_to_pose(self, run: _Run) -> None:
        if not self._plan_attempt(run, self._now_sample().pose):
            self._finish(run, SUCCEEDED, "already within the tolerances: nothing to drive")

    def _check_done_go_to_pose(self, run: _Run, s: StateSample) -> Optional[Outcome]:
        plan = run.plan
        distance, heading = self._errors(run, s.pose)
        within = distance <= plan["position_tolerance"] and abs(heading) <= plan["heading_tolerance"]
        if within:
            return Outcome(SUCCEEDED, f"reached the pose within {distance:.4f} m and "
                           f"{abs(heading):.4f} rad (attempt {plan['attempt']})")
        if plan["attempt"] < 2:
            self._log.info(f"go_to_pose: missed by {distance:.4f} m and {heading:.4f} rad: "
                           "retrying the remainder once")
            if self._plan_attempt(run, s.pose):
                return None
        return Outcome(ABORTED, f"missed the pose by {distance:.4f} m and {abs(heading):.4f} rad "
                       f"after {plan['attempt']} attempts (tolerances {plan['position_tolerance']} m, "
                       f"{plan['heading_tolerance']} rad)")

    def _feedback_go_to_pose(self, run: _Run, s: StateSample):
        distance, heading = self._errors(run, s.pose)
        return GoToPose.Feedback(current_pose=self._pose_msg(self._to_odom_pose(s)),
                                 distance_remaining=distance, heading_error=heading,
                                 attempt=run.plan["attempt"])

    def _result_go_to_pose(self, run: _Run, s: Optional[StateSample]):
        result = GoToPose.Result(attempts=run.plan.get("attempt", 0))
        if s is not None and "target" in run.plan:
            distance, heading = self._errors(run, s.pose)
            result.position_error, result.heading_error = distance, heading
            result.final_pose = self._pose_msg(self._to_odom_pose(s))
        else:
            result.position_error = result.heading_error = math.nan
        return result


def _sample(state, t: float) -> StateSample:
    segment = int(state.curr_path_segment)
    return StateSample(t=t, x=state.pose_x_mm / 1000.0, y=state.pose_y_mm / 1000.0,
                       yaw=float(state.pose_angle_rad), flags=int(state.status),
                       head_angle=float(state.head_angle_rad),
                       lift_height=float(state.lift_height_mm) / 1000.0,
                       path_segment=-1 if segment in (0xFF, -1) else segment,
                       left_speed=state.lwheel_speed_mmps / 1000.0,
                       right_speed=state.rwheel_speed_mmps / 1000.0)
