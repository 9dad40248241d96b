"""The driver core's head, lift, lights and volume commands, each checked, and what cmd_vel
says of the treads' holds and of its scaling (a part of :class:`~cozmo_driver.core.DriverCore`)."""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, Optional, Tuple

from .. import robot_geometry as geo
from ..client.link import MOTOR_MIN_SPEED_RADPS
from ..driver.kinematics import wheels_to_twist
from ..driver.sensors import cliff_ahead
from ..driver.commands import CommandError, clamp, require_finite, rgb555, volume_level
from ..protocol import messages as msgs

__all__ = ["ActuatorsMixin", "SLOW_CMD_VEL", "heading_lost"]

#: the kind of the warning of a cmd_vel publisher slower than the watchdog: throttled across the
#: watchdog's stops, which it describes (they say no line held back of it)
SLOW_CMD_VEL = "cmd_vel_slow"
_LightState = msgs.STRUCTS["LightState"]
_BACKPACK = ("front", "middle", "back", "left", "right")


def heading_lost(cause: str) -> str:
    """Why a treads goal ends when the head starts to calibrate (for ``cause``): the robot
    restarts its reported heading then, and the goal holds its target in the robot's frame."""
    return f"the robot's heading restarted: the head calibrates ({cause}); the goal's target is lost"


def _speed_text(x: float) -> str:
    """A requested speed for a log line: 0.500, or 1.79e+308 rather than 309 digits."""
    return f"{x:.3f}" if abs(x) < 1e6 else f"{x:.4g}"


class ActuatorsMixin:
    """DriverCore's head, lift, backpack light, head light and volume commands, and cmd_vel's
    warnings of the treads' holds and of its scaling (they use its params, robot, refusal and
    readiness checks, orientation and goal pre-emption)."""

    def tread_holds(self) -> Tuple[bool, bool]:
        """(whether no tread may drive now: ``stop_when_picked_up`` and the robot picked up or
        falling; else whether none may drive forwards: ``stop_on_cliff`` and the cliff sensor
        over an edge, :func:`cliff_ahead`), from the latest robot state; any thread."""
        if self.params["stop_when_picked_up"] and self.events.lifted:
            return True, False
        return False, cliff_ahead(self.events.flags, self.params["stop_on_cliff"])

    def _say_held(self, moving: bool, held: Optional[str]) -> None:
        """After a cmd_vel (``moving``: not a stop) that ``held`` says what the treads' holds
        kept back of ("picked up", "cliff" or None): a (throttled) warning of why the robot
        does not move as asked."""
        if moving and held == "picked up":
            where = (f"lies {self.orientation.describe()}, which it reports as being picked up"
                     if self.orientation.lying() else "is picked up (or falling)")
            self.warn_throttled("cmd_vel_picked_up", (
                f"cmd_vel holds still: the robot {where}, and the driver keeps its treads "
                "stopped until it stands on them again (stop_when_picked_up)"))
        elif moving and self.orientation.lying():
            self.warn_throttled("cmd_vel_lying", (
                f"cmd_vel drives the treads, but the robot lies {self.orientation.describe()}: "
                "they touch nothing. Set it upright on its treads"))
        elif held == "cliff" and self.cliff_edge.edge:  # not for a lift, whose drop comes first
            self.warn_throttled("cmd_vel_cliff", (
                "cmd_vel drives forwards, but the robot's cliff sensor sees no floor ahead: the "
                "driver holds the treads' forward motion (stop_on_cliff); turning and driving "
                "backwards still work. Drive backwards, turn away, or put it back on the table"))

    def _cadence(self, moving: bool, timeout: float) -> Optional[float]:
        """A cmd_vel drive went out (``moving``: not a stop; drive lock held): the time since
        the one before when this is the second moving drive in a row to start the treads again
        within 4 ``timeout`` of the one before, after the watchdog stopped them (a publisher
        slower than ``cmd_vel_timeout``: the robot drives in jerks), else None."""
        now = self.robot.clock()
        gap = now - self._last_cmd if self._last_cmd is not None else math.inf
        self._last_cmd = now
        restarted = moving and self._tripped and gap < 4.0 * timeout
        self._tripped = False
        self._jerks = self._jerks + 1 if restarted else 0
        return gap if self._jerks >= 2 else None

    def _say_slow(self, gap: float, timeout: float) -> None:
        """The (throttled) warning of a cmd_vel publisher slower than the watchdog."""
        self.warn_throttled(SLOW_CMD_VEL, (
            f"cmd_vel came {gap:.2f} s after the one before, later than cmd_vel_timeout ({timeout:g} s): "
            "the watchdog stops the treads between commands, and the robot drives in jerks. Publish "
            f"at least every {timeout:g} s while driving (ros2 topic pub publishes once a second unless "
            "given -r 10, say), or raise cmd_vel_timeout"))

    def _scaled(self, v_mps: float, w_radps: float, cmd: Any) -> None:
        """A drive beyond ``max_wheel_speed`` was scaled down: count it, warn (throttled)."""
        self.cmd_vel_scaled += 1
        v, w = wheels_to_twist(cmd.left_mps, cmd.right_mps)
        scale = f"{cmd.scale:.2f}" if cmd.scale >= 0.01 else f"{cmd.scale:.3g}"
        self.warn_throttled("cmd_vel_scaled", (
            f"cmd_vel scaled down by {scale} to keep both treads within max_wheel_speed "
            f"= {float(self.params['max_wheel_speed']):.3f} m/s: requested {_speed_text(v_mps)} m/s, "
            f"{_speed_text(w_radps)} rad/s; applied {v:.3f} m/s, {w:.3f} rad/s (the curvature is kept; "
            f"{self.cmd_vel_scaled} scaled so far)"))

    def _animates(self, motor: str) -> bool:
        """Whether an animation moves ``motor`` (or waits to start, and will); any thread."""
        animation = self.animation
        return animation is not None and animation.moves(motor)

    def _preempt_animation(self, motor: str, topic: str) -> None:
        """A command from ``topic`` takes ``motor``: the animation that moves it ends (its
        stops go out before this returns, so before the command); the front-end's thread."""
        if self._animates(motor):
            self.animation.preempt_animation(motor, f"a {topic} command")

    def _preempt(self, motor: str, topic: str) -> None:
        """A command from ``topic`` takes ``motor``: the motion goal and the animation that
        move it end (the newest command wins)."""
        self.forget_velocity(motor)
        if self.motion is not None:
            self.motion.preempt(motor, f"preempted by a {topic} command")
        self._preempt_animation(motor, topic)

    def _speed(self, requested: float, limit_param: str, field: str) -> Optional[float]:
        limit = float(self.params[limit_param])
        if requested < 0:
            self.refuse(field, f"{field.split('.')[0]} refused: {field} = {requested}: a speed must "
                        "not be negative")
            return None
        if requested == 0:
            return limit
        if requested < MOTOR_MIN_SPEED_RADPS:  # the firmware would take it for full speed
            # a problem of its own: not held back by a clamp's warning of the field
            self.warn_throttled(f"{field} near 0", f"{field} = {requested:g} rad/s is below "
                                f"{MOTOR_MIN_SPEED_RADPS:g}, which the robot takes for its "
                                f"full speed: raised to {MOTOR_MIN_SPEED_RADPS:g} rad/s")
            return MOTOR_MIN_SPEED_RADPS
        speed, warning = clamp(requested, 0.0, limit, field, "rad/s")
        if warning:
            self.warn_throttled(field, f"{warning} (the {limit_param} parameter)")
        return speed

    def _position(self, topic: str, field: str, value: float, max_speed: float,
                  limits: Tuple[float, float], unit: str, motor: str,
                  command: Callable[[float, float, float], Any]) -> None:
        try:
            require_finite(topic, **{field: value, "max_speed": max_speed})
        except CommandError as exc:
            self.refuse_field(f"{topic} refused: {exc}")
            return
        if not self.ready(topic, motion=True):
            return
        speed = self._speed(max_speed, f"{motor}_max_speed", f"{topic}.max_speed")
        if speed is None:
            return  # refused: a goal moving the motor goes on
        self._preempt(motor, topic)
        target, warning = clamp(value, limits[0], limits[1], f"{topic}.{field}", unit)
        if warning:
            self.warn_throttled(f"{topic}.{field}", warning)
        self.robot.post(command(target, speed, float(self.params[f"{motor}_acceleration"])))

    def set_head(self, angle_rad: float, max_speed_radps: float = 0.0,
                 topic: str = "head/angle") -> None:
        """Head to ``angle_rad`` (clamped to its range) at ``max_speed_radps`` (0: the
        ``head_max_speed`` parameter)."""
        self._position(topic, "angle", angle_rad, max_speed_radps,
                       (geo.HEAD_MIN_ANGLE_RAD, geo.HEAD_MAX_ANGLE_RAD), "rad", "head",
                       lambda angle, speed, accel: msgs.SetHeadAngle(
                           angle_rad=angle, max_speed_rad_per_sec=speed,
                           accel_rad_per_sec2=accel, duration_sec=0.0))

    def set_lift(self, height_m: float, max_speed_radps: float = 0.0,
                 topic: str = "lift/height") -> None:
        """Lift to ``height_m`` (clamped to its range)."""
        self._position(topic, "height", height_m, max_speed_radps,
                       (geo.LIFT_MIN_HEIGHT_M, geo.LIFT_MAX_HEIGHT_M), "m", "lift",
                       lambda height, speed, accel: msgs.SetLiftHeight(
                           height_mm=height * 1000.0, max_speed_rad_per_sec=speed,
                           accel_rad_per_sec2=accel, duration_sec=0.0))

    def _velocity(self, value: float, topic: str, motor: str, message_type: Any) -> None:
        try:
            require_finite(topic, data=value)
        except CommandError as exc:
            self.refuse_field(f"{topic} refused: {exc}")
            return
        if not self.ready(topic, motion=True):
            return
        self._preempt(motor, topic)
        limit = float(self.params[f"{motor}_max_speed"])
        speed, warning = clamp(value, -limit, limit, f"{topic}.data", "rad/s")
        if warning:
            warning = f"{warning} (the {motor}_max_speed parameter)"
        kind = f"{topic}.data"
        if 0.0 < abs(speed) < MOTOR_MIN_SPEED_RADPS:  # the firmware: full speed
            kind, speed, warning = f"{topic}.data near 0", 0.0, (
                f"{topic}.data = {value:g} rad/s is nearer 0 than {MOTOR_MIN_SPEED_RADPS:g}, "
                "which the robot takes for its full speed: sent as 0 (stop)")
        if warning:
            self.warn_throttled(kind, warning)
        self.robot.post(message_type(speed_rad_per_sec=speed))
        if speed != 0.0:  # the robot keeps it until a limit or a new command: a lowered limit re-sends it
            self.velocities[motor] = (value, topic, speed)

    def forget_velocity(self, *motors: str) -> None:
        """No head/velocity or lift/velocity motion of ``motors`` (of both with none given) is in
        effect any more: something else took the motor or stopped it; any thread."""
        for motor in motors or ("head", "lift"):
            self.velocities.pop(motor, None)

    def slow_velocities(self, old: Dict[str, Any]) -> None:
        """``head_max_speed`` or ``lift_max_speed`` lowered from ``old``'s below the speed of
        the velocity motion of its motor still in effect: the motion is sent again clamped to
        the new limit, with a warning (a raised limit speeds nothing up)."""
        for motor, message_type in (("head", msgs.MoveHead), ("lift", msgs.MoveLift)):
            name = f"{motor}_max_speed"
            limit, moving = float(self.params[name]), self.velocities.get(motor)
            if moving is None or limit >= float(old[name]) or abs(moving[2]) <= limit or \
                    self.not_ready(motion=True) is not None or self._animates(motor) or \
                    (self.motion is not None and self.motion.has_goal(motor)):
                continue
            value, topic, _ = moving
            speed, warning = clamp(value, -limit, limit, f"{topic}.data", "rad/s")
            self.warn_throttled(name, f"{name} lowered to {limit:.4g} rad/s: the {topic} motion in "
                                f"progress is sent again: {warning}")
            self.robot.post(message_type(speed_rad_per_sec=speed))
            self.velocities[motor] = (value, topic, speed)

    def move_head(self, speed_radps: float, topic: str = "head/velocity") -> None:
        self._velocity(speed_radps, topic, "head", msgs.MoveHead)

    def move_lift(self, speed_radps: float, topic: str = "lift/velocity") -> None:
        self._velocity(speed_radps, topic, "lift", msgs.MoveLift)

    def set_backpack_lights(self, colors: Dict[str, Tuple[float, float, float]],
                            topic: str = "backpack_lights") -> None:
        """Steady colours (r, g, b in 0..1) for front, middle, back, left and right."""
        try:
            words = {name: rgb555(*colors[name], f"{topic}.{name}") for name in _BACKPACK}
        except CommandError as exc:
            self.refuse_field(f"{topic} refused: {exc}")
            return
        if not self.ready(topic, motion=False):
            return

        def steady(name: str) -> Any:
            return _LightState(on_color=words[name], off_color=words[name])

        center = msgs.LightStateCenter(states=[steady("front"), steady("middle"), steady("back")],
                                       unknown=0)
        side = msgs.LightStateSide(states=[steady("left"), steady("right")], unknown=0)
        self.lights = (center, side)
        self.robot.post(center)
        self.robot.post(side)

    def calibrate_motors(self) -> Tuple[bool, str]:
        """The ``calibrate_motors`` service: (whether the robot was asked, what happened)."""
        refused = self.not_ready(motion=True)
        if refused is not None:
            message = f"calibrate_motors refused: {refused[1]}"
            self._log(logging.WARNING, message)
            return False, message
        for motor in ("head", "lift"):  # the calibration moves them: not to a goal's target
            self._preempt(motor, "calibrate_motors")  # (an animation's stops go out first)
        motion = self.motion
        if motion is not None:  # the head's calibration restarts the robot's heading: a treads
            # goal's target is lost; the treads stop (nothing takes them over)
            motion.preempt("wheels", heading_lost("calibrate_motors"), stop=True)
        self.robot.calibrate_motors(head=True, lift=True)
        message = ("calibrating the head and the lift: each drives to its low stop; head and "
                   "lift commands wait until the robot reports the end (events "
                   "HEAD_CALIBRATION_ENDED, LIFT_CALIBRATION_ENDED)")
        self._log(logging.INFO, message)
        return True, message

    def set_head_light(self, on: bool, topic: str = "head_light") -> None:
        if not self.ready(topic, motion=False):
            return
        self.head_light = bool(on)
        self.robot.post(msgs.SetHeadLight(enable=self.head_light))
        self.head_light_changed(self.head_light)

    def set_volume(self, volume: float, topic: str = "volume") -> None:
        """Volume 0..1 (clamped with a warning; NaN refused)."""
        try:
            level, warning = volume_level(volume)
        except CommandError as exc:
            self.refuse_field(f"{topic} refused: {exc}")
            return
        if warning:
            self.warn_throttled(f"{topic}.data", warning)
        if not self.ready(topic, motion=False):
            return
        self.volume = level
        self.robot.post(msgs.SetRobotVolume(level=level))
