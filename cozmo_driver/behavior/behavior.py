"""The behavior API: what a behavior is, what it may call, and what it sees.

A behavior is a small class (:class:`Behavior`) the engine runs one at a time:

* ``start(ctx)``: begin (send the first commands); called once;
* ``tick(ctx, now)``: called about ten times a second while it runs; returns
  ``None`` to go on, or an :class:`Outcome` when it is finished;
* ``stop(ctx, reason)``: called once when it ends, whatever the reason (its own
  outcome, a reaction with a higher priority, a user command, the engine being
  disabled, a time-out, an exception): undo what needs undoing. The engine
  cancels the commands still running by itself (which stops the motors they
  move) and puts back the face and the backpack lights the behavior changed.

Every command goes through the context ``ctx`` (:class:`BehaviorContext`),
which returns at once. Commands that take time return a :class:`Handle`
(``done``, ``ok``, ``message``, ``cancel()``); the behavior looks at it in a
later tick. :class:`ScriptBehavior` turns this into a plain generator: ``yield``
a handle (or a list of them) and the script goes on when it is done::

    class Wave(ScriptBehavior):
        PARAMS = {"height_m": 0.08}

        def run(self, ctx):
            ctx.face("happy")
            up = yield ctx.lift(self.params["height_m"])
            if not up.ok:
                return Outcome.FAILED
            yield ctx.lift(0.032)
            yield ctx.wait(0.5)

The context also carries what the behavior may read: ``ctx.state``
(:class:`RobotState`: on the charger, cliff, picked up, battery, the last cube
tap, ...), ``ctx.emotion(name)``, ``ctx.now``, ``ctx.rng`` (seeded),
``ctx.params`` and ``ctx.trigger`` (the event that started a reaction).

The engine enforces one rule in the context, for every behavior: while the
robot is on its charger nothing drives (drive, turn, and animations not known
to keep the treads still) unless the behavior class says
``drives_off_charger = True``; the refused command's handle fails at once.

The robot side is :class:`RobotInterface`: the ROS node implements it with the
driver's actions and topics; tests implement it with a fake. Pure.
"""

from __future__ import annotations

import enum
import math
import operator
import random
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import ConfigurationError

__all__ = [
    "Outcome",
    "Handle",
    "Wait",
    "RobotState",
    "CubeTap",
    "RobotInterface",
    "BehaviorContext",
    "Behavior",
    "ScriptBehavior",
    "BehaviorError",
    "ConfigError",
    "STATE_FLAGS",
]


class BehaviorError(ConfigurationError, ValueError):
    """A behavior was configured or used wrongly; the message names the key."""


class ConfigError(BehaviorError):
    """A configuration value is wrong; the message names its key (re-exported by
    :mod:`.config`, which reads the configuration; defined here so that
    :mod:`.app_resources`, which config imports, need not import config back)."""


class Outcome(enum.Enum):
    """How a behavior ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value


# ---------------------------------------------------------------------------- handles

class Handle:
    """The progress of one command a behavior gave (an action goal, a light
    animation, a wait). ``done`` once it ended; ``ok`` if it ended well;
    ``message`` says how; ``cancel()`` asks for it to stop (a stopped motor)."""

    PENDING, ACTIVE, SUCCEEDED, FAILED, CANCELED = "pending", "active", "succeeded", "failed", "canceled"

    def __init__(self, what: str, kind: str = "", canceller: Optional[Callable[["Handle"], None]] = None
                 ) -> None:
        self.what = what
        #: which resource it uses: "treads", "head", "lift", "animation", "sound", "lights", "wait"
        self.kind = kind
        self.status = Handle.PENDING
        self.message = ""
        self._canceller = canceller
        self.cancel_requested = False

    def _ended(self) -> bool:
        return self.status in (Handle.SUCCEEDED, Handle.FAILED, Handle.CANCELED)

    @property
    def done(self) -> bool:
        return self._ended()

    @property
    def ok(self) -> bool:
        return self.status == Handle.SUCCEEDED

    # the robot side reports with these
    def accepted(self) -> None:
        if self.status == Handle.PENDING:
            self.status = Handle.ACTIVE

    def succeed(self, message: str = "") -> None:
        if not self._ended():
            self.status, self.message = Handle.SUCCEEDED, message

    def fail(self, message: str) -> None:
        if not self._ended():
            self.status, self.message = Handle.FAILED, message

    def canceled(self, message: str = "canceled") -> None:
        if not self._ended():
            self.status, self.message = Handle.CANCELED, message

    def cancel(self) -> None:
        """Ask the command to stop; a no-op once it is done."""
        if self.done or self.cancel_requested:
            return
        self.cancel_requested = True
        if self._canceller is not None:
            self._canceller(self)
        else:
            self.canceled()

    def __repr__(self) -> str:
        return f"<Handle {self.what} {self.status}{': ' + self.message if self.message else ''}>"


class Wait(Handle):
    """Done (ok) once ``clock() >= deadline``, or when ``until()`` holds (ok), or
    at the deadline with ``until`` given and still false (failed: timed out)."""

    def __init__(self, what: str, clock: Callable[[], float], deadline: float,
                 until: Optional[Callable[[], bool]] = None) -> None:
        super().__init__(what, "wait")
        self._clock = clock
        self._deadline = deadline
        self._until = until
        self.status = Handle.ACTIVE

    @property
    def done(self) -> bool:
        if self.status == Handle.ACTIVE:
            if self._until is not None and self._until():
                self.succeed("condition met")
            elif self._clock() >= self._deadline:
                if self._until is None:
                    self.succeed("time is up")
                else:
                    self.fail(f"{self.what}: timed out")
        return self._ended()


# ---------------------------------------------------------------------------- state

@dataclass(frozen=True)
class CubeTap:
    """The last tap on a light cube (from the driver's object_events)."""

    name: str          # "cube1".."cube3", or "object_<factory_id>"
    factory_id: int
    count: int
    time: float        # engine time of the tap


@dataclass
class RobotState:
    """What behaviors and the engine know of the robot. The ROS node keeps it
    up to date from the driver's topics; tests set it directly."""

    connected: bool = False
    on_charger: bool = False
    charging: bool = False
    cliff: bool = False
    picked_up: bool = False
    falling: bool = False
    #: on its back, face or a side (the driver's orientation), until it stands on its treads
    lying: bool = False
    #: battery charge 0..1 (None: not known yet)
    battery: Optional[float] = None
    battery_low: bool = False
    last_tap: Optional[CubeTap] = None
    #: engine time a face was last seen (None: never)
    face_seen_at: Optional[float] = None


#: the boolean fields of RobotState, usable in `when:` conditions
STATE_FLAGS: Tuple[str, ...] = tuple(f.name for f in fields(RobotState) if f.type in ("bool", bool))


class RobotInterface:
    """The commands behaviors can give the robot. Every method returns at once.

    Implemented by the ROS node (the driver's actions, topics and services) and
    by fakes in tests. Methods that take time return a :class:`Handle`; a
    command that cannot be given returns a handle that already failed, with the
    reason. The default implementations here refuse everything, so a subclass
    implements only what it has."""

    def _unavailable(self, what: str, kind: str) -> Handle:
        handle = Handle(what, kind)
        handle.fail(f"{what}: not available")
        return handle

    # motion (SI units: m, rad, s)
    def drive_straight(self, distance: float, speed: float) -> Handle:
        return self._unavailable("drive_straight", "treads")

    def turn_in_place(self, angle: float, speed: float) -> Handle:
        return self._unavailable("turn_in_place", "treads")

    def set_head_angle(self, angle: float, duration: float = 0.0) -> Handle:
        return self._unavailable("set_head_angle", "head")

    def set_lift_height(self, height: float, duration: float = 0.0) -> Handle:
        return self._unavailable("set_lift_height", "lift")

    # animation and sound
    def play_animation(self, name: str = "", group: str = "", loops: int = 1) -> Handle:
        return self._unavailable("play_animation", "animation")

    def play_sound(self, spec: str, volume: float = 1.0) -> Handle:
        """A synthesized sound (``synth:tone(...)``, ``synth:chirp(...)``, ... as in
        animation clips)."""
        return self._unavailable("play_sound", "sound")

    # face (fire and forget)
    def set_face(self, expression: str) -> None:
        pass

    def look_at(self, x: float, y: float) -> None:
        pass

    # lights (fire and forget); colours are (r, g, b) in 0..1
    def set_backpack_lights(self, colors: Optional[Sequence[Tuple[float, float, float]]],
                            blink_period: float = 0.0, fade: bool = False) -> None:
        """Five colours (front, middle, back, left, right), steady or blinking
        with ``blink_period`` (s), or with ``fade`` fading in and out over it (breathing);
        None: off."""

    def set_cube_lights(self, factory_id: int, color: Optional[Tuple[float, float, float]],
                        blink_period: float = 0.0) -> None:
        """All LEDs of one cube (by factory id) in one colour; None: off."""

    def play_light_animation(self, target: str, name: str) -> Handle:
        return self._unavailable("play_light_animation", "lights")

    def animation_drives(self, name: str, group: str) -> bool:
        """Whether the animation may move the treads (True when not known)."""
        return True


# ---------------------------------------------------------------------------- context

OFF_CHARGER_KINDS = ("treads",)


class BehaviorContext:
    """What one run of a behavior sees and may call (see the module docstring).

    Made by the engine for every start; it records the commands, so that the
    engine can cancel those still running when the behavior ends, and it
    enforces the charger rule."""

    def __init__(self, behavior: "Behavior", robot: RobotInterface, state: RobotState,
                 emotions: Callable[[str], float], now: float, rng: random.Random,
                 trigger: Optional[Mapping[str, Any]] = None,
                 log: Optional[Callable[[str], None]] = None,
                 charger_refusals: Optional[Callable[[str], None]] = None) -> None:
        self.behavior = behavior
        self.robot = robot
        self.state = state
        self._emotion = emotions
        self.now = now
        self.started_at = now
        self.rng = rng
        self.params = behavior.params
        #: the trigger that started a reaction: {"name": ..., plus the event's data}; {} for activities
        self.trigger: Mapping[str, Any] = dict(trigger or {})
        self.handles: List[Handle] = []
        self.face_changed = False
        self.gaze_changed = False  # look_at was called: the engine centres the eyes at the end
        self.lights_changed = False
        self.cubes_lit: List[int] = []
        self._log = log or (lambda text: None)
        self._charger_refusals = charger_refusals or (lambda text: None)

    # ------------------------------------------------------------------ reading

    def emotion(self, name: str) -> float:
        """The emotion's value now (0.0 for an emotion that is not configured)."""
        try:
            return self._emotion(name)
        except KeyError:
            return 0.0

    @property
    def elapsed(self) -> float:
        """Seconds since the behavior started."""
        return self.now - self.started_at

    def log(self, text: str) -> None:
        self._log(f"{self.behavior.name}: {text}")

    # ------------------------------------------------------------------ the charger rule

    def _charger_blocks(self) -> bool:
        return self.state.on_charger and not self.behavior.drives_off_charger

    def _refused(self, what: str, kind: str) -> Handle:
        handle = Handle(what, kind)
        reason = (f"{what} refused: the robot is on its charger and {self.behavior.name} "
                  "does not drive off it")
        handle.fail(reason)
        self._charger_refusals(reason)
        return self._track(handle)  # done: nothing to cancel; the behavior's failure names it

    def _track(self, handle: Handle) -> Handle:
        self.handles.append(handle)
        return handle

    # ------------------------------------------------------------------ motion

    def drive(self, distance: float, speed: float = 0.05) -> Handle:
        """Drive ``distance`` m straight (negative: backwards) at ``speed`` m/s."""
        if self._charger_blocks():
            return self._refused("drive_straight", "treads")
        return self._track(self.robot.drive_straight(float(distance), abs(float(speed))))

    def turn(self, angle: float, speed: float = 1.5) -> Handle:
        """Turn in place by ``angle`` rad (positive: counter-clockwise) at ``speed`` rad/s."""
        if self._charger_blocks():
            return self._refused("turn_in_place", "treads")
        return self._track(self.robot.turn_in_place(float(angle), abs(float(speed))))

    def head(self, angle: float, duration: float = 0.0) -> Handle:
        """Move the head to ``angle`` rad (-0.44..0.78, positive up)."""
        return self._track(self.robot.set_head_angle(
            min(0.77, max(-0.43, float(angle))), float(duration)))

    def lift(self, height: float, duration: float = 0.0) -> Handle:
        """Move the lift to ``height`` m (0.032..0.092)."""
        return self._track(self.robot.set_lift_height(
            min(0.092, max(0.032, float(height))), float(duration)))

    # ------------------------------------------------------------------ expression

    def animate(self, name: str = "", group: str = "", loops: int = 1) -> Handle:
        """Play an animation clip by name, or a member of a group."""
        what = f"animation {group or name}"
        if self._charger_blocks() and self.robot.animation_drives(name, group):
            return self._refused(what, "animation")
        return self._track(self.robot.play_animation(name=name, group=group, loops=int(loops)))

    def sound(self, spec: str, volume: float = 1.0) -> Handle:
        """A synthesized sound, e.g. ``synth:chirp(600, 1200, 0.3)``."""
        return self._track(self.robot.play_sound(spec, float(volume)))

    def face(self, expression: str) -> None:
        """Ease the face to a named expression (happy, sad, sleepy, ...)."""
        self.face_changed = True
        self.robot.set_face(expression)

    def look_at(self, x: float, y: float) -> None:
        """Turn the eyes: x, y in -1..1; +x: towards the robot's left (the screen's right as
        seen from the front; from the robot's camera image x = -(2u/width - 1)), +y: down
        (y = 2v/height - 1); centred again when the behavior ends, however it ends."""
        self.face_changed = True
        self.gaze_changed = True
        self.robot.look_at(min(1.0, max(-1.0, float(x))), min(1.0, max(-1.0, float(y))))

    def backpack_lights(self, colors: Optional[Sequence[Tuple[float, float, float]]],
                        blink_period: float = 0.0, fade: bool = False) -> None:
        """Backpack LEDs: one colour for all five, or five; None: off. Steady, or on and off
        over ``blink_period`` (s), or with ``fade`` fading in and out over it (breathing)."""
        if colors is not None and len(colors) == 3 and not isinstance(colors[0], (tuple, list)):
            colors = [tuple(colors)] * 5  # type: ignore[list-item]
        self.lights_changed = True
        lights = None if colors is None else [tuple(c) for c in colors]
        if fade:  # a RobotInterface of before ``fade`` still takes the others
            self.robot.set_backpack_lights(lights, float(blink_period), True)
        else:
            self.robot.set_backpack_lights(lights, float(blink_period))

    def cube_lights(self, factory_id: int, color: Optional[Tuple[float, float, float]],
                    blink_period: float = 0.0) -> None:
        """A cube's LEDs in one colour (None: off); put back off when the behavior ends.
        ``factory_id`` is the cube's (an int, ``ctx.trigger["factory_id"]``), not its name."""
        factory_id = _factory_id(factory_id)
        if color is not None and factory_id not in self.cubes_lit:
            self.cubes_lit.append(factory_id)
        self.robot.set_cube_lights(factory_id, color, float(blink_period))

    def light_animation(self, target: str, name: str) -> Handle:
        """A named light animation of the driver (backpack, cube1..3, cubes, charger)."""
        if target == "backpack":
            self.lights_changed = True
        return self._track(self.robot.play_light_animation(target, name))

    # ------------------------------------------------------------------ time

    def wait(self, seconds: float) -> Handle:
        """Done after ``seconds``."""
        return Wait(f"wait {seconds:g} s", lambda: self.now, self.now + max(0.0, float(seconds)))

    def wait_until(self, condition: Callable[[], bool], timeout: float, what: str = "wait") -> Handle:
        """Done (ok) when ``condition()`` holds; failed after ``timeout`` seconds."""
        return Wait(what, lambda: self.now, self.now + max(0.0, float(timeout)), until=condition)

    # ------------------------------------------------------------------ for the engine

    def active_handles(self) -> List[Handle]:
        return [h for h in self.handles if not h.done]

    def cancel_all(self) -> int:
        """Cancel every command still running; returns how many. A cancel that raises does
        not keep the others running: each is asked, then the first error is raised (the
        engine reports it, :meth:`Engine._clean_up`)."""
        count, error = 0, None
        for handle in self.handles:
            if not handle.done:
                try:
                    handle.cancel()
                except Exception as exc:  # noqa: BLE001 - raised below, once every one was asked
                    error = error or exc
                count += 1
        if error is not None:
            raise error
        return count

    def enforce_charger_rule(self) -> int:
        """Cancel tread commands still running while the robot is on its charger
        (unless the behavior drives off it); returns how many."""
        if not self._charger_blocks():
            return 0
        count = 0
        for handle in self.handles:
            if handle.kind in OFF_CHARGER_KINDS and not handle.done:
                handle.cancel()
                count += 1
        if count:
            self._charger_refusals(f"{self.behavior.name}: tread commands cancelled: the robot is on its charger")
        return count


def _factory_id(value: Any) -> int:
    """A cube's factory id as an int: a name ("cube1"), a float or a bool is refused, before
    the context records it as lit (its end would put out what it cannot name)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise BehaviorError(f"cube_lights: {value!r} is no factory id (an int, as "
                            "ctx.trigger['factory_id'] or ctx.state.last_tap.factory_id give it; "
                            "a cube's name is not one)") from None


# ---------------------------------------------------------------------------- behaviors

class Behavior:
    """Base class of behaviors. See the module docstring.

    Class attributes a subclass sets:

    * ``PARAMS``: {name: default} of the parameters it takes from the
      configuration (``behaviors.<name>.params``); unknown names are refused,
      and a value must have the default's type (an int is a float), a list the
      default's length and element types (nested lists too; an empty default
      takes any list), and a duration (a name ending in ``_s``) must be > 0;
    * ``drives_off_charger``: True for the one kind of behavior allowed to move
      the treads while the robot is on its charger;
    * ``description``: one line for the docs and the logs.

    ``can_start(ctx)`` says whether it makes sense now (the engine does not
    start it otherwise)."""

    PARAMS: Mapping[str, Any] = {}
    drives_off_charger: bool = False
    description: str = ""

    def __init__(self, name: str, params: Optional[Mapping[str, Any]] = None) -> None:
        self.name = name
        self.params: Dict[str, Any] = dict(self.PARAMS)
        for key, value in (params or {}).items():
            if key not in self.PARAMS:
                known = ", ".join(sorted(self.PARAMS)) or "none"
                raise BehaviorError(f"behaviors.{name}.params.{key}: unknown parameter of "
                                    f"{type(self).__name__} (known: {known})")
            self.params[key] = _check_type(f"behaviors.{name}.params.{key}", self.PARAMS[key], value)

    def can_start(self, ctx: BehaviorContext) -> bool:
        return True

    def start(self, ctx: BehaviorContext) -> None:
        """Begin: give the first commands."""

    def tick(self, ctx: BehaviorContext, now: float) -> Optional[Outcome]:
        """Go on; return an Outcome when finished, None to be ticked again."""
        return Outcome.SUCCEEDED

    def stop(self, ctx: BehaviorContext, reason: str) -> None:
        """The behavior ends (``reason``: its outcome, or why it was interrupted)."""


def _check_type(key: str, default: Any, value: Any) -> Any:
    if default is None:
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise BehaviorError(f"{key}: expected true or false, got {value!r}")
        return value
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise BehaviorError(f"{key}: expected a number, got {value!r}")
        if key.endswith("_s") and not value > 0:   # a wait of 0 in a loop: a loop with no wait
            raise BehaviorError(f"{key}: expected a duration > 0 s, got {value!r}")
        if isinstance(default, float):
            return float(value)
        if not float(value).is_integer():
            raise BehaviorError(f"{key}: expected a whole number, got {value!r}")
        return int(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise BehaviorError(f"{key}: expected a string, got {value!r}")
        return value
    if isinstance(default, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            raise BehaviorError(f"{key}: expected a list, got {value!r}")
        if not default:
            return list(value)
        if len(value) != len(default):
            raise BehaviorError(f"{key}: expected a list of {len(default)} like the default "
                                f"{list(default)!r}, got {value!r}")
        return [_check_type(f"{key}[{i}]", d, v) for i, (d, v) in enumerate(zip(default, value))]
    return value


#: what a script may yield: a handle, several (wait for all), or None (one tick)
Step = Union[Handle, Sequence[Handle], None]


class ScriptBehavior(Behavior):
    """A behavior written as a generator ``run(ctx)``: each ``yield`` gives a
    handle (or a list of handles, or None for one tick) and resumes when it is
    done (all of them), receiving it back. ``return`` ends it: None or
    ``Outcome.SUCCEEDED`` succeed, ``Outcome.FAILED`` fails."""

    #: steps a script may take in one tick without waiting (a bound on loops)
    MAX_STEPS_PER_TICK = 50

    def __init__(self, name: str, params: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(name, params)
        self._script: Optional[Generator[Step, Any, Optional[Outcome]]] = None
        self._waiting: Step = None
        self._result: Optional[Outcome] = None

    def run(self, ctx: BehaviorContext) -> Generator[Step, Any, Optional[Outcome]]:
        return
        yield  # pragma: no cover - makes this a generator

    def start(self, ctx: BehaviorContext) -> None:
        self._script = self.run(ctx)
        self._waiting = None
        self._result = None
        self._advance(None)

    def _advance(self, sent: Any) -> None:
        assert self._script is not None
        try:
            self._waiting = self._script.send(sent)
        except StopIteration as end:
            self._script = None
            self._result = end.value if isinstance(end.value, Outcome) else Outcome.SUCCEEDED

    def _ready(self) -> bool:
        waiting = self._waiting
        if waiting is None:
            return True
        if isinstance(waiting, Handle):
            return waiting.done
        return all(h.done for h in waiting)

    def tick(self, ctx: BehaviorContext, now: float) -> Optional[Outcome]:
        for _ in range(self.MAX_STEPS_PER_TICK):
            if self._script is None:
                return self._result
            if not self._ready():
                return None
            waited, self._waiting = self._waiting, None
            self._advance(waited)
            if self._waiting is None and self._script is not None:
                return None  # `yield None`: one tick
        return None

    def stop(self, ctx: BehaviorContext, reason: str) -> None:
        script, self._script = self._script, None
        if script is not None:
            script.close()
