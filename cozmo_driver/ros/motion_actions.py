"""The driver's motion actions, served by the driver node (cozmo_interfaces/action/*).

``set_head_angle``, ``set_lift_height``, ``turn_in_place``, ``drive_straight``,
``follow_path`` and ``go_to_pose``: names relative to the driver's namespace.
This module keeps the goals' bookkeeping (servers, one goal per motor,
preemption, cancel, results, the robot's replies); what each action does with
its goal - check, start, feedback, result - is a class of
:mod:`cozmo_driver.ros.motion_goals`. Glue only: goal checks, planning, path
conversion and the decisions of when a goal is done live in
:mod:`cozmo_driver.driver.motion` and the tf lookup in
:mod:`cozmo_driver.driver.transforms`; commands go out through the typed calls
of :class:`cozmo_driver.client.Robot`. docs/motion.md documents every goal,
feedback and result field.

How a goal runs. The goal callback checks the goal's size first (a path of
more than ``MAX_PATH_POSES`` poses or ``MAX_PATH_SEGMENTS`` segments is
rejected before a frame is looked up or a pose read, so nothing of it is waited
for, converted or kept; the message itself is built by rclpy before any
callback sees it), then the goal (finite numbers, ranges,
tolerances, frames) and the driver (active, no emergency stop, connected, for
the treads: not picked up); a refused goal is REJECTED and the reason logged
(``/rosout``). An accepted goal preempts the goal running on the same motor
(head, lift, or treads: every action but the head and lift ones uses the
treads), which ends ABORTED with "preempted by a new goal"; its motion goes on until
the new goal's first command replaces it, and is stopped if the new goal sends none
(already there, or ended before it started). Its commands go to
the robot with an action id (``Robot.post_head_angle``, ``post_lift_height``,
``post_turn_in_place``: SetHeadAngle, SetLiftHeight, TurnInPlace) or as a path
(``Robot.post_execute_path``: ClearPath, AppendPathSeg*, ExecutePath with an
event id). The robot's
replies - AcknowledgeAction, PathFollowingEvent, and every RobotState's flags
and pose - reach :meth:`MotionActions._on_handed_over` through a
:class:`~cozmo_driver.ros.handover.HandOver` (the I/O thread never touches a
goal); the trackers decide from them, and feedback goes out 10 times a second
(:class:`~cozmo_driver.driver.motion.FeedbackPacer`).
Execute callbacks are coroutines that await one future per goal, so no executor
thread is ever blocked.

Cancel stops the motor (MoveHead(0), MoveLift(0), DriveWheels(0, 0), and
ClearPath for paths) and ends the goal CANCELED. A cmd_vel, head/angle,
head/velocity, lift/height or lift/velocity command preempts the running goal
of its motor (the node calls :meth:`MotionActions.preempt`); the emergency
stop, deactivation and a lost link abort every goal. When the head starts to
calibrate (``calibrate_motors``, or the robot by itself) the robot restarts its
reported heading, and a treads goal's target, in the robot's frame, is lost: the
goal is stopped and aborted (:meth:`MotionActions.heading_restarted`). The heading
then holds until the head is calibrated (Anki's firmware resets its IMU filter at
every tick meanwhile), so a treads goal that comes while the head calibrates waits
for the end, the treads still, cancellable and preemptable as a running goal, and is
checked again before it starts (:meth:`MotionActions._wait_for_the_head`), its odom poses in
the odom frame of its time if a reset_odometry moved it (``GoalContext.goal_odom``).

Frames. Poses may be in the driver's odom frame (or with an empty frame id),
in its base frame or base_link frame (relative to where the robot is when the
goal arrives), or in any frame that the latest transforms on ``/tf`` and
``/tf_static`` link to odom (:class:`~cozmo_driver.driver.transforms.TransformBuffer`;
no tf2_ros needed). The driver subscribes to those two topics the first time a
goal names such a frame, and the goal waits up to :data:`TF_WAIT_S` for its
transforms (the goal callback is a coroutine, in a re-entrant callback group of
the servers' own, so the wait holds up nothing else); a goal in a frame that
cannot be linked is then rejected, naming the frame; an emergency stop or a
deactivation during the wait rejects it too (engaged and released within the wait
as well). Targets are converted
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
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.task import Future
from tf2_msgs.msg import TFMessage

from ..client import LinkState, LinkStateChanged, MessageReceived
from ..client.calibration import CALIBRATION_TIMEOUT_S, START_WAIT_S
from ..driver import motion as mo
from ..driver.motion import ABORTED, CANCELED, SUCCEEDED, MotionError, Outcome, StateSample
from ..driver.odometry import compose, inverse
from ..driver.sensors import cliff_ahead
from ..driver.transforms import TransformBuffer, TransformError
from ..log_throttle import LogThrottle
from . import qos
from .driver_support import ESTOP_REFUSAL, NOT_CONNECTED_REFUSAL, ServerRetirement, inactive_refusal
from .goal_log import goal_refusal
from .handover import HandOver
from .motion_goals import GOAL_TYPES, GoalContext, MotionGoal, PathGoal, Run
from .steady import steady_timer

__all__ = ["MotionActions", "ACTION_NAMES", "TF_WAIT_S", "HEAD_CALIBRATION_WAIT_S"]

#: action name -> (type, motor it uses)
ACTION_NAMES: Dict[str, Tuple[Any, str]] = {
    name: (goal_type.ACTION, goal_type.RESOURCE) for name, goal_type in GOAL_TYPES.items()}

PREEMPTED = "preempted by a new goal"
_TF_MAX_AGE_S = 10.0
#: how long a goal in a frame tf does not link (yet) waits for its transforms
TF_WAIT_S = 2.0
#: the longest a treads goal waits for the head's calibration (s): the robot client takes the
#: calibration for over by then (a start expected in 1 s, an end in 5 s after it)
HEAD_CALIBRATION_WAIT_S = START_WAIT_S + CALIBRATION_TIMEOUT_S + 1.0
_STATE, _ACK, _PATH, _LINK, _RESTART = range(5)
#: the robot's messages the trackers take (Robot.add_listener's ``messages``)
_TRACKED_MESSAGES = frozenset(("RobotState", "AcknowledgeAction", "PathFollowingEvent"))

_TF_QOS = qos.QOS_TF
_TF_STATIC_QOS = qos.profile(100, latched=True)  # what tf2's static listener asks for


class _TfWait:
    """A goal callback waiting for tf: its frames, the future it awaits, and the reason
    :meth:`MotionActions.abort_all` ended the wait with (None: not ended so)."""

    __slots__ = ("frames", "future", "aborted")

    def __init__(self, frames: List[str], future: Future) -> None:
        self.frames = frames
        self.future = future
        self.aborted: Optional[str] = None


class MotionActions:
    """The six motion action servers of one driver node. See the module docstring.

    ``node`` is the :class:`~cozmo_driver.ros.driver_node.CozmoDriverNode` (its state:
    active, emergency stop, link, odometry offset, parameters, frame names) and
    ``robot`` its :class:`~cozmo_driver.client.Robot`."""

    def __init__(self, node, robot) -> None:
        self._node = node
        self._robot = robot
        self._log = node.get_logger()
        self._throttle = LogThrottle(2.0)  # rejections: one line per kind (goal_log), counted
        self._runs: Dict[str, Run] = {}            # motor -> its running goal
        self._by_goal: Dict[bytes, Run] = {}
        self._plans: Dict[int, Tuple[Dict[str, Any], float]] = {}  # id(goal request) -> (checked goal, when)
        self._state = None                           # latest RobotState (set on the I/O thread)
        self._pending_executes = 0                   # goal and execute callbacks not returned
        self._closed = False
        #: the servers, once released (the node destroys them when it goes, if still alive:
        #: a server left alive would keep publishing its goals' status, latched)
        self.retirement: Optional[ServerRetirement] = None
        self.tf = TransformBuffer(max_age=_TF_MAX_AGE_S)
        #: (head rad, lift m) as joint_states shows them, each held while its motor calibrates
        self._axes: Callable[[], Tuple[float, float]] = node._core.shown_axes
        context = GoalContext(node, robot, self.tf, self._latest_state, self._axes, self._finish)
        self._goals: Dict[str, MotionGoal] = {name: goal_type(context)
                                              for name, goal_type in GOAL_TYPES.items()}
        self._tf_subscribed = False
        self._tf_waiters: List[_TfWait] = []
        self._entities: List[Tuple[Callable[[Any], Any], Any]] = []
        self._handover = HandOver(node, self._on_handed_over)
        self._entities.append((HandOver.destroy, self._handover))
        # The goal callback may wait for tf (a coroutine): a group of their own, re-entrant,
        # so that this neither holds the node's default group (odometry, commands) nor the
        # other goals, cancels and tf messages. The node is spun by one thread (docs/driver.md, Threads).
        self._group = ReentrantCallbackGroup()
        self._servers = []
        for name, (action_type, _) in ACTION_NAMES.items():
            self._servers.append(ActionServer(
                node, action_type, name, execute_callback=functools.partial(self._execute, name),
                goal_callback=functools.partial(self._on_goal, name),
                handle_accepted_callback=lambda handle, name=name: self._on_accepted(name, handle),
                cancel_callback=self._on_cancel, callback_group=self._group))
        robot.add_listener(self._on_robot_event, messages=_TRACKED_MESSAGES)

    # ------------------------------------------------------------------ life cycle

    @property
    def running(self) -> Dict[str, str]:
        """Motor -> name of the action running on it."""
        return {resource: run.name for resource, run in self._runs.items()}

    def has_goal(self, resource: str) -> bool:
        """Whether a goal runs on ``resource`` (any thread: a dict lookup)."""
        return resource in self._runs

    def preempt(self, resource: str, reason: str, stop: bool = False) -> Optional[Callable[[], None]]:
        """End the goal running on ``resource`` as ABORTED (a topic command or a new goal
        took the motor over); a path ends on the robot first (ClearPath): the robot ignores
        DriveWheels while it follows a path, so the command that took over would do
        nothing, and a turn in place leaves the path to go on after it. ``stop``: the motor
        is stopped whatever the goal (nothing takes it over). Returns the stop of the motion
        left going (None: none was), for a new goal that may send nothing to replace it."""
        run = self._runs.get(resource)
        if run is None:
            return None
        stopped = stop or isinstance(self._goals.get(run.name), PathGoal)
        if stopped:
            self._stop_motor(run)
        self._finish(run, ABORTED, reason)
        return None if stopped else run.stop

    def heading_restarted(self, reason: str) -> None:
        """Any thread (the driver core's I/O thread, when the head starts to calibrate): the
        robot restarted its reported heading, and a treads goal holds its target in the
        robot's own frame; on the executor, the goal running on the treads then (one accepted
        meanwhile too: it may have started from a pose of the old heading) is stopped (and
        its path cleared) and ends ABORTED with ``reason``; one waiting for the head's
        calibration is not (it is checked again after it)."""
        self._handover.put((_RESTART, reason, None))

    def abort_all(self, reason: str) -> None:
        """End every running goal as ABORTED (emergency stop, deactivation, shutdown), and
        end the wait of every goal still waiting for tf: it is rejected with ``reason`` (a
        release or activation before its transforms come must not start it)."""
        for run in list(self._runs.values()):
            self._finish(run, ABORTED, reason)
        for waiter in self._tf_waiters:
            waiter.aborted = waiter.aborted or reason
            if not waiter.future.done():
                waiter.future.set_result(False)

    def goals_running(self) -> bool:
        """Whether a goal or execute callback has not returned yet."""
        return bool(self._runs) or self._pending_executes > 0

    def destroy(self, reason: str = "the driver is shutting down") -> None:
        """Abort every goal (``reason``) and release the servers, subscriptions and guard condition.

        The servers are destroyed once the aborted goals' results are out
        (:class:`~.driver_support.ServerRetirement`); until then they refuse goals."""
        if self._closed:
            return
        self._closed = True
        try:
            self._robot.remove_listener(self._on_robot_event)
        except ValueError:
            pass
        self.abort_all(reason)  # the tf waits too
        for destroy, entity in reversed(self._entities):
            destroy(entity)
        self._entities.clear()
        self.retirement = ServerRetirement(self._node, self._servers,
                                           lambda: self._pending_executes > 0)
        self._servers = []

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
                item = (_STATE, time.monotonic(), (message, self._axes()))
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
            item = (_LINK, event.state, (event.reason, time.monotonic()))
        else:
            return
        self._handover.put(item)

    def _on_tf(self, msg: TFMessage, static: bool) -> None:
        now = time.monotonic()
        for t in msg.transforms:
            tr, q = t.transform.translation, t.transform.rotation
            self.tf.set(t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z),
                        (q.x, q.y, q.z, q.w), now, static)
        for waiter in self._tf_waiters:
            if not waiter.future.done() and self._frames_known(waiter.frames):
                waiter.future.set_result(True)

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
        elif name == "follow_path":  # only the frames of the field it uses, as its check reads them
            poses, segments = goal.path.poses, goal.segments
            if poses and segments:
                return []  # refused by the check whatever the frames
            if poses:
                names = {p.header.frame_id or goal.path.header.frame_id for p in poses}
            else:
                names = {goal.segments_frame_id} if segments else set()
        else:
            return []
        node = self._node
        own = {"", node._frame("odom_frame"), node._frame("base_frame"),
               node._frame("base_link_frame")}
        return sorted({n.lstrip("/") for n in names} - own)

    async def _wait_for_frames(self, frames: List[str]) -> Optional[str]:
        """Until tf links every frame to odom, or TF_WAIT_S passes (the check then says why).
        Returns why the wait was cut short (:meth:`abort_all`: the goal is refused), or None."""
        if self._frames_known(frames):
            return None
        self._subscribe_tf()
        future: Future = Future()
        waiter = _TfWait(frames, future)
        self._tf_waiters.append(waiter)

        def give_up() -> None:
            if not future.done():
                future.set_result(False)
        timer = steady_timer(self._node, TF_WAIT_S, give_up, self._group)
        try:
            await future
        finally:
            self._node.destroy_timer(timer)
            self._tf_waiters.remove(waiter)
        return waiter.aborted

    def _on_handed_over(self, item: Tuple[int, Any, Any]) -> None:
        """What the I/O thread handed over, on the executor: feed the trackers."""
        kind, a, b = item
        if kind == _STATE:
            sample = mo.state_sample(b[0], a, b[1])
            for run in list(self._runs.values()):
                run.sample = sample
                if run.tracker is None:  # accepted, its commands not sent yet
                    continue
                outcome = run.tracker.on_state(sample)
                if outcome is not None:
                    self._on_tracker_done(run, outcome, sample)
                elif run.outcome is None and run.pacer.due(sample.t):
                    self._publish_feedback(run, sample)
        elif kind == _ACK:
            for run in list(self._runs.values()):
                if run.tracker is not None:
                    run.tracker.on_ack(a)
        elif kind == _PATH:
            for run in list(self._runs.values()):
                if run.tracker is not None:
                    run.tracker.on_path_event(a, b)
        elif kind == _RESTART:
            run = self._runs.get("wheels")
            if run is not None and not run.waiting:  # one waiting is checked again after it
                self.preempt("wheels", a, stop=True)
        elif kind == _LINK and self._runs:
            # only the goals that ran, or were being checked, when the link went: the hand-over
            # lags the I/O thread, and a goal checked once the link was back (READY comes first)
            # is not affected
            reason, at = b
            for run in [r for r in self._runs.values() if r.accepted_at <= at]:
                state = "" if a is LinkState.LOST else f"{a.value}: "  # not "(lost: ..."
                self._finish(run, ABORTED, f"lost the robot ({state}{reason})")

    # ------------------------------------------------------------------ goals

    async def _on_goal(self, name: str, goal) -> GoalResponse:
        resource = ACTION_NAMES[name][1]
        try:  # first, before a frame is looked up or a pose read: only the lengths
            self._goals[name].check_size(goal)
        except MotionError as exc:
            return self._reject(name, str(exc))
        frames = self._goal_frames(name, goal)
        aborted = None
        if frames and not self._closed:
            self._pending_executes += 1  # the server must outlive this callback
            try:
                aborted = await self._wait_for_frames(frames)
            finally:
                self._pending_executes -= 1
        # a goal counts from its driver check: a link lost after it (during the goal's own
        # check, 0.4 s for a long path) aborts it (_on_handed_over), though accepted after that
        checked_at = time.monotonic()
        shift = self._node._tracker.reset_shift  # its odom frame: the one of now
        try:
            if self._closed:
                raise MotionError("the driver is shutting down")
            if aborted:  # an emergency stop or deactivation while it waited, even if over now
                raise MotionError(f"{aborted} while the goal waited for the transforms of "
                                  f"{', '.join(frames)}")
            self._check_driver(resource)
            plan = self._goals[name].check(goal)
            self._goals[name].check_duration(plan)
            self._check_cliff(name, plan)
        except MotionError as exc:
            return self._reject(name, str(exc))
        for warning in plan.get("warnings", ()):
            self._log.warning(f"{name}: {warning}")
        if len(self._plans) > 64:  # accepted goals never handed over (should not happen)
            self._plans.clear()
        self._plans[id(goal)] = (plan, checked_at, shift)
        return GoalResponse.ACCEPT

    def _latest_state(self):
        """The latest RobotState: this listener's, or, in the moment after the link turned
        READY on the robot's first state and before this listener saw it, the client's."""
        state = self._state  # read once: the I/O thread clears it when the link goes
        return state if state is not None else self._robot.robot_state

    def _reject(self, name: str, reason: str) -> GoalResponse:
        """A goal rejected, ``reason`` logged: the first of a kind at once, the others counted
        (goal_log)."""
        line = goal_refusal(self._throttle, self._node, name, "rejected", reason)
        if line is not None:
            self._log.warning(line)
        return GoalResponse.REJECT

    def say_overdue(self) -> None:
        """The rejections held back of each kind that then fell quiet (the node's 1 s timer)."""
        for _, line, _ in self._throttle.overdue(time.monotonic()):
            self._log.warning(line)

    def say_held_back(self) -> None:
        """Every rejection held back, now: before "activated" or "connected again"."""
        for _, line, _ in self._throttle.flush(time.monotonic()):
            self._log.warning(line)

    def _check_driver(self, resource: str) -> None:
        node = self._node
        if not node._active:
            raise MotionError(inactive_refusal(node))
        if node._estop:
            raise MotionError(ESTOP_REFUSAL)
        state = self._latest_state()
        if not node.connected or state is None:
            raise MotionError(NOT_CONNECTED_REFUSAL)
        if resource == "wheels":
            reason = mo.interruption(int(state.status))
            if reason:
                raise MotionError(f"{reason}: the treads cannot move it")

    def _check_cliff(self, name: str, plan: Dict[str, Any]) -> None:
        """A goal that drives forwards (a path: a line or arc at a positive speed) is refused
        while the cliff sensor sees no floor ahead: the robot stopped its treads at the edge
        once and would not stop them again. Backing away and turning are taken."""
        state = self._latest_state()
        if state is not None and cliff_ahead(int(state.status), self._node._params["stop_on_cliff"]) \
                and self._goals[name].drives_forwards(plan):
            raise MotionError("the robot's cliff sensor sees no floor ahead (stop_on_cliff): it "
                              "could drive off the edge. Back away first (drive_straight with a "
                              "negative distance, or cmd_vel backwards), or turn away "
                              "(turn_in_place)")

    def _on_accepted(self, name: str, goal_handle) -> None:
        plan, checked_at, shift = self._plans.pop(id(goal_handle.request),
                                                  (None, time.monotonic(), self._node._tracker.reset_shift))
        resource = ACTION_NAMES[name][1]
        run = Run(name, resource, goal_handle, plan or {}, accepted_at=checked_at,
                  waiting=resource == "wheels" and self._robot.calibrating("head"), reset_shift=shift)
        # a path the previous goal runs ends on the robot first: a turn in place does not
        # end it there (Anki's firmware hands the treads back to the path after the turn).
        # Another motion goes on until the new goal's first command replaces it: the run holds
        # its stop until then, for a cancel, or a start that sends nothing (_execute)
        run.stop = self.preempt(resource, f"{PREEMPTED} ({name})")
        media = getattr(self._node, "_media", None)
        if media is not None:  # an animation that moves this motor ends, before the goal's commands
            media.preempt_animation(resource, f"a new {name} goal")
        core = getattr(self._node, "_core", None)
        if core is not None and resource != "wheels":  # a head/lift velocity motion ends: a lowered
            core.forget_velocity(resource)  # speed limit must not send it again after the goal
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
            if run.outcome is None and run.resource == "wheels" and \
                    (run.waiting or self._robot.calibrating("head")):
                await self._wait_for_the_head(run)
            if run.outcome is None:
                try:
                    self._goals[run.name].start(run)
                except MotionError as exc:
                    self._finish(run, ABORTED, str(exc))
            if run.tracker is None:  # nothing sent (already there, failed, ended): the motion
                self._stop_motor(run)  # of the goal it preempted, if any, must not go on
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
            said = outcome.message if outcome.message.startswith(f"{outcome.status}:") \
                else f"{outcome.status}: {outcome.message}"   # not 'canceled: canceled: ...'
            if outcome.status == ABORTED:
                self._log.warning(f"{run.name}: {said}")
            else:
                self._log.info(f"{run.name}: {said}")
            return result
        finally:
            self._pending_executes -= 1
            self._by_goal.pop(key, None)

    async def _wait_for_the_head(self, run: Run) -> None:
        """A treads goal while the head calibrates: the robot's reported heading holds until the
        head is calibrated (Anki's firmware resets its IMU filter at every tick until then), so
        a turn would not end and a path would steer blind. The goal waits, the treads still,
        until the head is calibrated (at most HEAD_CALIBRATION_WAIT_S), or until it ends
        (cancel, preemption, emergency stop...), and is checked again then: the heading
        restarted meanwhile, and a pick-up shows again."""
        self._log.info(f"{run.name}: waits for the robot to calibrate its head (it does at each "
                       "connection, and on calibrate_motors): its heading holds until then")
        run.waiting = True
        self._stop_motor(run)  # the motion it preempted: nothing replaces it for a while
        run.stop = None
        done: Future = Future()
        deadline = time.monotonic() + HEAD_CALIBRATION_WAIT_S

        def check() -> None:
            if not done.done() and (run.outcome is not None or not self._robot.calibrating("head")
                                    or time.monotonic() >= deadline):
                done.set_result(None)
        timer = steady_timer(self._node, 0.02, check, self._group)
        try:
            await done
        finally:
            self._node.destroy_timer(timer)
            run.waiting = False
        if run.outcome is not None:
            return
        if self._robot.calibrating("head"):
            self._finish(run, ABORTED, f"the robot's head still calibrates after "
                         f"{HEAD_CALIBRATION_WAIT_S:.0f} s (no HEAD_CALIBRATION_ENDED): its "
                         "heading holds until it is done")
            return
        goal = self._goals[run.name]
        # a reset_odometry meanwhile moved the odom frame: the goal's target stays on the floor
        # where it was sent to (as a running goal's does), its odom poses in the frame of its time
        shift = self._node._tracker.reset_shift
        if shift != run.reset_shift:
            goal.ctx.goal_odom = compose(shift, inverse(run.reset_shift))
            self._log.info(f"{run.name}: the odometry was reset while the goal waited: its target "
                           "stays where it was sent to on the floor")
        try:  # from the heading the calibration restarted, where the robot is now
            self._check_driver(run.resource)
            plan = goal.check(run.goal_handle.request)
            goal.check_duration(plan)
            self._check_cliff(run.name, plan)
        except MotionError as exc:
            self._finish(run, ABORTED, f"{exc} (checked again once the head was calibrated)")
            return
        finally:
            goal.ctx.goal_odom = None
        run.plan = plan

    def _finish(self, run: Run, status: str, message: str) -> None:
        if run.outcome is not None:
            return
        run.outcome = Outcome(status, message)
        if self._runs.get(run.resource) is run:
            del self._runs[run.resource]
        if not run.future.done():
            run.future.set_result(run.outcome)

    def _on_tracker_done(self, run: Run, outcome: Outcome, sample: StateSample) -> None:
        if outcome.status == SUCCEEDED:
            outcome = self._goals[run.name].check_done(run, outcome, sample)
            if outcome is None:  # the run goes on (a retry)
                return
        if outcome.status == ABORTED:
            self._stop_motor(run)
        self._finish(run, outcome.status, outcome.message)

    def _stop_motor(self, run: Run) -> None:
        if run.stop is not None:
            try:
                run.stop()
            except Exception as exc:  # noqa: BLE001 - a lost link: nothing to stop then
                self._log.warning(f"{run.name}: could not stop the motor: {exc}")

    # ------------------------------------------------------------------ helpers

    def _publish_feedback(self, run: Run, sample: StateSample) -> None:
        run.goal_handle.publish_feedback(self._goals[run.name].feedback(run, sample))

    def _result(self, run: Run):
        sample, state = run.sample, self._state  # read once: the I/O thread clears it when the link goes
        if sample is None and state is not None:
            sample = mo.state_sample(state, time.monotonic(), self._axes())
        result = self._goals[run.name].result(run, sample)
        result.success = run.outcome.status == SUCCEEDED
        result.message = run.outcome.message
        return result
