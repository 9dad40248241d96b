"""A fake robot for the behavior engine's unit tests, and behaviors that misbehave
on purpose (also loaded by name, ``behavior_fakes:RaisingBehavior``, as plug-ins)."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from cozmo_driver.behavior import Behavior, Handle, Outcome, RobotInterface, ScriptBehavior

#: the built-in clips without a body track
STILL_ANIMATIONS = ("nod_yes", "sleepy_yawn")


class TimedHandle(Handle):
    """Succeeds once ``clock() >= end``."""

    def __init__(self, what, kind, canceller, clock, end):
        super().__init__(what, kind, canceller)
        self._clock, self._end = clock, end

    @property
    def done(self) -> bool:
        if not self._ended() and self._clock() >= self._end:
            self.succeed("done")
        return self._ended()


class FakeRobot(RobotInterface):
    """Records every command; handles succeed at once (``auto``), after ``duration``
    seconds of ``clock()``, or when the test says."""

    def __init__(self, auto: bool = True, duration: float = 0.0, clock=None) -> None:
        self.auto = auto
        self.duration = duration
        self.clock = clock
        self.calls: List[Tuple[str, Any]] = []
        self.handles: List[Handle] = []
        self.face: Optional[str] = None
        self.backpack: Any = "unset"
        self.backpack_fade = False
        self.cubes: dict = {}
        self.cancelled: List[Handle] = []
        #: as a driver that is inactive or has lost the robot: light commands are recorded
        #: in ``calls`` but change nothing (the driver keeps its last pattern)
        self.refuse_lights = False

    def _handle(self, what: str, kind: str, args: Any) -> Handle:
        self.calls.append((what, args))
        if self.duration > 0 and self.clock is not None:
            handle: Handle = TimedHandle(what, kind, self._cancel, self.clock,
                                         self.clock() + self.duration)
        else:
            handle = Handle(what, kind, canceller=self._cancel)
        handle.accepted()
        self.handles.append(handle)
        if self.auto and not self.duration:
            handle.succeed("done")
        return handle

    def _cancel(self, handle: Handle) -> None:
        self.cancelled.append(handle)
        handle.canceled("canceled by the engine")

    def names(self) -> List[str]:
        return [what for what, _ in self.calls]

    def active(self) -> List[Handle]:
        return [h for h in self.handles if not h.done]

    def finish(self, ok: bool = True, message: str = "") -> None:
        for handle in self.active():
            handle.succeed(message) if ok else handle.fail(message or "failed")

    # RobotInterface
    def drive_straight(self, distance, speed):
        return self._handle("drive_straight", "treads", (distance, speed))

    def turn_in_place(self, angle, speed):
        return self._handle("turn_in_place", "treads", (angle, speed))

    def set_head_angle(self, angle, duration=0.0):
        return self._handle("set_head_angle", "head", angle)

    def set_lift_height(self, height, duration=0.0):
        return self._handle("set_lift_height", "lift", height)

    def play_animation(self, name="", group="", loops=1):
        return self._handle("play_animation", "animation", group or name)

    def play_sound(self, spec, volume=1.0):
        return self._handle("play_sound", "sound", spec)

    def set_face(self, expression):
        self.calls.append(("face", expression))
        self.face = expression

    def look_at(self, x, y):
        self.calls.append(("look_at", (x, y)))

    def set_backpack_lights(self, colors, blink_period=0.0, fade=False):
        self.calls.append(("backpack_lights", colors))
        if not self.refuse_lights:
            self.backpack_fade = fade
            self.backpack = colors

    def set_cube_lights(self, factory_id, color, blink_period=0.0):
        factory_id = int(factory_id)   # as the node's ObjectLights(factory_id=int(...))
        self.calls.append(("cube_lights", (factory_id, color)))
        if not self.refuse_lights:
            self.cubes[factory_id] = color

    def play_light_animation(self, target, name):
        return self._handle("play_light_animation", "lights", (target, name))

    def animation_drives(self, name, group):
        return (group or name) not in STILL_ANIMATIONS


class RaisingBehavior(Behavior):
    """Raises in the phase its ``raise_in`` parameter names."""

    PARAMS = {"raise_in": "tick"}

    def start(self, ctx):
        ctx.head(0.2)
        if self.params["raise_in"] == "start":
            raise RuntimeError("boom in start")

    def tick(self, ctx, now):
        if self.params["raise_in"] == "tick":
            raise RuntimeError("boom in tick")
        return Outcome.SUCCEEDED

    def stop(self, ctx, reason):
        if self.params["raise_in"] == "stop":
            raise RuntimeError("boom in stop")


class CubeLighter(Behavior):
    """Lights the cube its ``cube`` parameter names (whatever it is: a factory id, or by
    mistake a name) and the backpack, then runs until stopped."""

    PARAMS = {"cube": None}

    def start(self, ctx):
        ctx.backpack_lights((0.0, 1.0, 0.0))
        ctx.cube_lights(self.params["cube"], (0.0, 1.0, 0.0))

    def tick(self, ctx, now):
        return None


class Forever(ScriptBehavior):
    """Drives, then waits for ever (until stopped)."""

    PARAMS = {"drive": True}

    def run(self, ctx):
        if self.params["drive"]:
            ctx.drive(0.1, 0.05)
        for _ in range(100_000):  # until stopped (the engine's max_duration bounds it)
            yield ctx.wait(1.0)
