"""The driver's ``play_animation`` goals (a part of :class:`~cozmo_driver.ros.media_interfaces.MediaInterfaces`).

A goal names a clip or a group; an unknown one is rejected when it comes. A clip
that moves the head or the lift waits while the robot calibrates them (at each
connection); that wait can be cancelled or preempted like a playing clip (a new goal
preempts it once it passes the checks made when it comes: one refused then does not;
a group's member starts its cool-down when it plays, not when it is chosen). A clip
takes the motors it moves from the motion goals, and from ``cmd_vel`` (a
pending cmd_vel watchdog stop would cut its drive): the newer command wins, so a
motion goal, a ``cmd_vel`` or a ``head``/``lift`` topic command preempts the
animation that moves its motor (:meth:`AnimationGoals.preempt_animation`, which
the driver core calls through its ``animation`` hook).

The treads of a clip are held as ``cmd_vel``'s are: with ``stop_when_picked_up``
no clip drives them while the robot is picked up or falling, and with
``stop_on_cliff`` none drives them forwards while the cliff sensor sees no floor
ahead. Such a goal is refused when it comes; a clip playing when that happens is
aborted before its next tick (:meth:`AnimationGoals.tread_hold`, which the
:class:`~cozmo_driver.anim.av_stream.AVStream` asks on the I/O thread), which
stops its treads. On the charger, a user's clip that drives the treads under the name of
a built-in one that keeps them still is refused: the behavior engine plays those names
there, trusting the built-in clips (it cannot see the driver's clips).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

from cozmo_interfaces.action import PlayAnimation
from rclpy.action import GoalResponse
from rclpy.task import Future

from ..anim.clip import AnimationError, Clip
from ..anim.player import compile_loops
from ..driver.media import motor_stops
from .steady import steady_timer

__all__ = ["AnimationGoals", "MAX_LOOPS", "clip_motors"]

#: longest a play_animation goal waits for the robot to calibrate its head and lift, s (the
#: client sends held commands after 5 s without the calibration's end)
_CALIBRATION_WAIT_S = 6.0
#: the most times a play_animation goal plays its clip (a uint32 allows 4 billion: years)
MAX_LOOPS = 1000
#: a play_animation name or group longer than this is refused without being quoted whole
_LONGEST_NAME = 256
#: the motion actions' resources, as a log line names them
_MOTOR_NAMES = {"wheels": "treads", "head": "head", "lift": "lift"}
#: why no clip may drive the treads now (stop_when_picked_up), and why none may drive them
#: forwards (stop_on_cliff)
LIFTED_HOLD = ("the robot is picked up (or falling), and the driver keeps the treads still "
               "until it stands on them again (stop_when_picked_up)")
CLIFF_HOLD = ("the robot's cliff sensor sees no floor ahead (stop_on_cliff): it could drive "
              "off the edge (or it is being lifted, which the robot reports a moment later)")


def clip_motors(clip: Clip) -> frozenset:
    """The motion actions' resources ``clip`` moves: the treads (body motion, or a turn to a
    recorded heading), the head, the lift."""
    tracks = clip.tracks
    return frozenset(resource for resource, moves in (
        ("wheels", tracks.moves_treads), ("head", bool(tracks.head)), ("lift", bool(tracks.lift)))
        if moves)


@dataclass
class _Waiting:
    """A goal waiting for the robot to calibrate its motors, before it plays."""

    handle: Any
    motors: frozenset
    preempted: Optional[str] = None  # why it may not start after all


class AnimationGoals:
    """The ``play_animation`` part of MediaInterfaces (its goals, stream, library and
    parameters). See the module docstring."""

    _waiting: List[_Waiting]

    def moves(self, resource: str) -> bool:
        """Whether a play_animation goal moves ``resource`` (wheels, head, lift) or waits to
        (any thread: the cmd_vel thread asks)."""
        return any(resource in goal.motors and not goal.future.done()
                   for goal in tuple(self._goals.values())) or \
            any(resource in waiting.motors and waiting.preempted is None
                for waiting in tuple(self._waiting))

    def preempt_animation(self, resource: str, by: str) -> None:
        """``by`` (e.g. "a new set_head_angle goal", "a cmd_vel command") takes ``resource``
        (wheels, head, lift): the animation that moves it, or waits to, ends aborted, saying
        so (the newest command wins, as between motion goals). A clip playing is stopped on
        the robot by the time this returns, so that the command that follows comes after
        its stops."""
        reason = f"preempted by {by}, which moves the {_MOTOR_NAMES[resource]}"
        for goal in list(self._goals.values()):
            if goal.kind == "animation" and resource in goal.motors:
                goal.motors = frozenset()  # no longer its: a command that follows does not wait
                self.av.cancel_clip_now(goal.token, reason)
        for waiting in self._waiting:
            if resource in waiting.motors and waiting.preempted is None:
                waiting.preempted = reason

    def tread_hold(self) -> Tuple[Optional[str], Optional[str]]:
        """(why no clip may drive the treads now, why none may drive them forwards), each
        None when it may, from the latest robot state, as cmd_vel's treads are held
        (``stop_when_picked_up``, ``stop_on_cliff``); any thread."""
        core = getattr(self.node, "_core", None)
        if core is None:
            return None, None
        lifted, cliff = core.tread_holds()
        return (LIFTED_HOLD if lifted else None), (CLIFF_HOLD if cliff else None)

    def _treads_refusal(self, clip: Clip) -> Optional[str]:
        """Why ``clip`` may not start now because of its treads (:meth:`tread_hold`; a user's
        clip driving them under a still built-in clip's name, on the charger), or None."""
        if not clip.tracks.moves_treads:
            return None
        where = self.library.drives_unlike_builtin.get(clip.name)
        if where is not None and getattr(getattr(self.node, "_core", None), "battery_on_charger", False):
            return (f"'{clip.name}' (of {where}) drives the treads, unlike the built-in clip it replaces, and "
                    f"the robot is on its charger, where behaviors play '{clip.name}' as a clip that keeps the "
                    "treads still: give your clip another name to play it there")
        still, backwards = self.tread_hold()
        if still is not None:
            return f"'{clip.name}' drives the treads, and {still}"
        if backwards is not None and clip.tracks.drives_forwards:
            return (f"'{clip.name}' drives forwards, and {backwards}. Back away first (cmd_vel "
                    "backwards, or drive_straight with a negative distance), or turn away")
        return None

    def _cancel_waiting(self, goal_handle: Any) -> bool:
        """A cancel of a goal that waits for the calibration: taken (its wait ends at its
        next check, and it ends canceled with nothing sent)."""
        return any(waiting.handle is goal_handle for waiting in self._waiting)

    def _accept_animation(self, goal_request) -> GoalResponse:
        """An animation or group the library does not know is rejected now, the reason
        logged (naming close names); the rest is checked when the goal runs."""
        for field in ("name", "group"):
            text = getattr(goal_request, field)
            if len(text) > _LONGEST_NAME:  # no clip's: refused without quoting it whole
                self._goal_warning("play_animation", "rejected", f"{field} {text[:40]!r}... has "
                                   f"{len(text)} characters; the clips' names are short (list_animations)")
                return GoalResponse.REJECT
        try:
            self.library.check(goal_request.name, goal_request.group)
        except AnimationError as exc:
            self._goal_warning("play_animation", "rejected", str(exc))
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute_animation(self, handle) -> PlayAnimation.Result:
        request = handle.request
        result = PlayAnimation.Result()
        problem = self._refusal(motion=True)
        if problem is not None:
            return self._refused(handle, result, "play_animation", problem)
        axes = self._axes()
        try:  # a group's member recorded as played when it plays: a refusal starts no cool-down
            clip = self.library.resolve(request.name, request.group, time.monotonic(),
                                        math.degrees(axes[0]) if axes is not None else None, record=False)
        except AnimationError as exc:
            return self._refused(handle, result, "play_animation", str(exc))
        loops = max(1, int(request.loops))
        if loops > MAX_LOOPS:
            self._log.warning(f"play_animation goal loops = {loops} is beyond {MAX_LOOPS}: clamped")
            loops = MAX_LOOPS
        # refused before it is counted: a goal refused when it comes preempts no goal waiting
        problem = self._treads_refusal(clip)
        if problem is None:
            try:  # from where the motors are
                compiled, again = self._compile(clip, loops, axes)
            except AnimationError as exc:
                problem = str(exc)
        if problem is not None:
            return self._refused(handle, result, "play_animation", problem)
        motors = clip_motors(clip)
        moved = [motor for motor in ("head", "lift") if motor in motors]
        self._animation_goals += 1
        if any(self.robot.calibrating(motor) for motor in moved):
            # a calibrating motor takes no keyframe (the lift drops them): the clip starts
            # once the robot is done, from where that left the motors
            mine = self._animation_goals
            waiting = _Waiting(handle, motors)
            self._waiting.append(waiting)
            try:
                problem = await self._calibrated(handle, moved, lambda: mine != self._animation_goals
                                                 or waiting.preempted is not None)
            finally:
                self._waiting.remove(waiting)
            if handle.is_cancel_requested:
                self._log.info("play_animation: canceled while the robot calibrated its motors")
                return self._end(handle, result, False, "canceled before it started")
            if mine != self._animation_goals or waiting.preempted is not None:
                message = (f"{waiting.preempted or 'preempted by a new play_animation goal'} "
                           "(while this one waited for the robot to calibrate its motors)")
                self._log.warning(f"play_animation: aborted: {message}")
                return self._end(handle, result, False, message)
            problem = problem or self._treads_refusal(clip)  # the robot lifted meanwhile, say
            if problem is None:
                try:  # from where the calibration left the motors
                    compiled, again = self._compile(clip, loops, self._axes())
                except AnimationError as exc:
                    problem = str(exc)
            if problem is not None:
                return self._refused(handle, result, "play_animation", problem)
        if request.group:
            self.library.played(request.group, clip.name, time.monotonic())
        stops = motor_stops(head=bool(clip.tracks.head), lift=bool(clip.tracks.lift))
        goal = self._new_goal("animation", handle)
        goal.clip = clip.name
        goal.motors = motors
        motion = getattr(self.node, "_motion", None)
        for resource in sorted(goal.motors) if motion is not None else ():
            motion.preempt(resource, f"preempted by play_animation '{clip.name}', which moves "
                                     f"the {_MOTOR_NAMES[resource]}")
        core = getattr(self.node, "_core", None)
        if "wheels" in motors and core is not None:
            core.take_treads()  # cmd_vel's drive stops, and its watchdog would cut the clip's
        for motor in ("head", "lift") if core is not None else ():
            if motor in motors:  # its head/lift velocity motion ends: a lowered limit re-sends none
                core.forget_velocity(motor)
        self._log.info(f"play_animation: {clip.name} ({compiled.duration_s:.2f} s"
                       f"{f', {loops} times' if loops > 1 else ''})")
        self.av.play_clip(goal.token, compiled, loops, stops, again)
        return await self._run(goal, result)

    def _compile(self, clip: Clip, loops: int, axes: Optional[Tuple[float, float]]) -> tuple:
        """``compile_loops`` of ``clip`` from where the motors are (``axes``: head rad, lift m;
        None: unknown), the loops after the first from where the clip leaves them. Raises
        :class:`AnimationError`."""
        return compile_loops(clip, loops, start_head_angle_deg=math.degrees(axes[0]) if axes is not None else None,
                             start_lift_height_mm=1000.0 * axes[1] if axes is not None else None,
                             body_mode="anim" if self.params["animation_body_in_stream"] else "wheels")

    async def _calibrated(self, handle: Any, motors: List[str],
                          preempted: Callable[[], bool]) -> Optional[str]:
        """Wait (at most ``_CALIBRATION_WAIT_S``, or until the goal is canceled or
        ``preempted()``) while the robot calibrates ``motors``, as it does at each
        connection; returns why the goal cannot start after all (e-stop, deactivated, lost
        robot), or None."""
        self._log.info(f"play_animation: waits for the robot to calibrate its "
                       f"{' and '.join(motors)} (it does at each connection)")
        done = Future()
        deadline = time.monotonic() + _CALIBRATION_WAIT_S

        def check() -> None:
            if not done.done() and (handle.is_cancel_requested or preempted() or not self._active
                                    or time.monotonic() >= deadline
                                    or not any(self.robot.calibrating(m) for m in motors)):
                done.set_result(None)
        timer = steady_timer(self.node, 0.02, check)
        try:
            await done
        finally:
            self.node.destroy_timer(timer)
        return self._after_wait(motion=True)

