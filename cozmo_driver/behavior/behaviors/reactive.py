"""Behaviors that answer something that happened: a cliff, a pick-up, a
put-down, a fall, a poke, a tapped cube, a greeting, a low battery."""

from __future__ import annotations

import math

from ..behavior import Outcome, ScriptBehavior

__all__ = ["ReactToCliff", "ReactToPickup", "ReactToPutDown", "ReactToFall", "ReactToPoke",
           "CelebrateCube", "Greet", "LowBatterySad"]


def _animate_or(ctx, name: str, fallback: str):
    """Play ``name``; if that fails (refused on the charger, unknown), ``fallback``."""
    played = yield ctx.animate(name)
    if not played.ok and fallback:
        played = yield ctx.animate(fallback)
    return played


class ReactToCliff(ScriptBehavior):
    """A scared face and a beep, backs away from the edge, a startled animation, turns
    away from the edge (``turn_deg``, either way; 0: no turn), so that what runs next
    (explore's first leg) does not head straight back at it."""

    description = "scared face and beeps, backs off the edge, a startled jump, turns away"
    PARAMS = {"back_off_m": 0.05, "speed": 0.06, "animation": "surprised_jump", "turn_deg": 135.0,
              "turn_speed": 1.5}

    def can_start(self, ctx):
        return not ctx.state.picked_up

    def run(self, ctx):
        p = self.params
        ctx.face("scared")
        ctx.sound("synth:beeps(1400, 2, 0.06, 0.05, 0.5)")
        backed = yield ctx.drive(-p["back_off_m"], p["speed"])
        yield ctx.animate(p["animation"])
        if backed.ok and p["turn_deg"]:   # not at the very edge: only once backed off
            angle = math.radians(abs(p["turn_deg"])) * ctx.rng.uniform(0.8, 1.0)
            turned = yield ctx.turn(angle * ctx.rng.choice((-1.0, 1.0)), p["turn_speed"])
            backed = turned
        ctx.face("worried")
        yield ctx.wait(0.5)
        return Outcome.SUCCEEDED if backed.ok else Outcome.FAILED


class ReactToPickup(ScriptBehavior):
    """Surprise, then looks around worried while held; relieved when put down."""

    description = "surprised chirp, head up, worried glances while held, happy when put down"
    PARAMS = {"max_hold_s": 45.0, "glance_s": 1.5}

    def run(self, ctx):
        p = self.params
        ctx.face("surprised")
        ctx.sound("synth:chirp(500, 1300, 0.25, 0.5)")
        yield [ctx.head(0.5), ctx.lift(0.06)]
        ctx.face("worried")
        while ctx.state.picked_up and ctx.elapsed < p["max_hold_s"]:
            ctx.look_at(ctx.rng.uniform(-0.8, 0.8), ctx.rng.uniform(-0.3, 0.3))
            yield ctx.wait_until(lambda: not ctx.state.picked_up, p["glance_s"], "until put down")
        ctx.look_at(0.0, 0.0)
        if ctx.state.picked_up:
            return Outcome.FAILED
        ctx.face("happy")
        yield ctx.lift(0.032)


class ReactToPutDown(ScriptBehavior):
    """Relief: a happy face, a nod and a rising chirp."""

    description = "happy face, a nod, a rising chirp"
    PARAMS = {"animation": "nod_yes"}

    def run(self, ctx):
        ctx.face("happy")
        ctx.sound("synth:chirp(600, 1100, 0.2, 0.4)")
        played = yield ctx.animate(self.params["animation"])
        yield ctx.head(0.1)
        return Outcome.SUCCEEDED if played.ok else Outcome.FAILED


class ReactToFall(ScriptBehavior):
    """Fright while falling (a warbling alarm), then a sad droop."""

    description = "scared face and an alarm while falling, then sad"
    PARAMS = {"animation": "sad_droop"}

    def run(self, ctx):
        ctx.face("scared")
        ctx.sound("synth:warble(900, 300, 12, 0.6, 0.5)")
        yield ctx.wait_until(lambda: not ctx.state.falling, 3.0, "until the fall ends")
        yield ctx.wait(0.5)
        ctx.face("sad")
        yield from _animate_or(ctx, self.params["animation"], "")
        yield ctx.head(-0.2)


class ReactToPoke(ScriptBehavior):
    """Startled, then a happy wiggle, or a grumble when the robot is not calm."""

    description = "startled; a happy wiggle, or a grumble when calm is low"
    PARAMS = {"grumpy_below": -0.3, "happy": "happy_wiggle", "grumpy": "angry_grumble",
              "fallback": "nod_yes"}

    def can_start(self, ctx):
        return not ctx.state.picked_up

    def run(self, ctx):
        p = self.params
        ctx.face("surprised")
        yield ctx.head(0.3)
        grumpy = ctx.emotion("calm") < p["grumpy_below"]
        played = yield from _animate_or(ctx, p["grumpy"] if grumpy else p["happy"], p["fallback"])
        return Outcome.SUCCEEDED if played.ok else Outcome.FAILED


class CelebrateCube(ScriptBehavior):
    """The tapped cube flashes, the backpack glows, beeps and a celebration."""

    description = "the tapped cube flashes green, backpack lights, beeps, the celebrate animation"
    PARAMS = {"animation": "celebrate", "fallback": "nod_yes", "cube_color": [0.0, 1.0, 0.2],
              "lights": [1.0, 0.8, 0.0], "blink_period": 0.3}

    def run(self, ctx):
        p = self.params
        factory_id = ctx.trigger.get("factory_id")
        if factory_id is None and ctx.state.last_tap is not None:
            factory_id = ctx.state.last_tap.factory_id
        if factory_id:
            ctx.cube_lights(factory_id, tuple(p["cube_color"]), p["blink_period"])
        ctx.face("excited")
        ctx.backpack_lights(tuple(p["lights"]), p["blink_period"])
        ctx.sound("synth:beeps(1200, 3, 0.08, 0.06, 0.5)")
        played = yield from _animate_or(ctx, p["animation"], p["fallback"])
        ctx.face("joy")
        yield ctx.wait(1.0)
        return Outcome.SUCCEEDED if played.ok else Outcome.FAILED


class Greet(ScriptBehavior):
    """Looks up at the user with a happy face and says hello."""

    description = "looks up, happy face, the greet animation (a nod on the charger)"
    PARAMS = {"animation": "greet", "fallback": "nod_yes", "head": 0.5}

    def can_start(self, ctx):
        return not ctx.state.picked_up

    def run(self, ctx):
        ctx.face("happy")
        yield ctx.head(self.params["head"])
        played = yield from _animate_or(ctx, self.params["animation"], self.params["fallback"])
        ctx.face("joy")
        yield ctx.wait(0.8)
        return Outcome.SUCCEEDED if played.ok else Outcome.FAILED


class LowBatterySad(ScriptBehavior):
    """Sad face, dim red blinking backpack, a falling tone, a droop."""

    description = "sad face, red blinking backpack, a falling tone, a droop"
    PARAMS = {"animation": "sad_droop", "lights": [0.6, 0.0, 0.0], "blink_period": 1.0}

    def run(self, ctx):
        p = self.params
        ctx.face("sad")
        ctx.backpack_lights(tuple(p["lights"]), p["blink_period"])
        ctx.sound("synth:chirp(700, 300, 0.7, 0.4)")
        played = yield ctx.animate(p["animation"])
        if not played.ok:
            yield ctx.head(-0.3, 1.0)
        yield ctx.wait(2.0)
