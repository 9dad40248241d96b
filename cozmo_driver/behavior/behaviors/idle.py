"""Behaviors for idle time, chosen by activities: look around, explore, get
bored, play an animation."""

from __future__ import annotations

import math

from ...face.expressions import BLINK, expression
from ..behavior import BehaviorError, Outcome, ScriptBehavior

__all__ = ["LookAround", "Explore", "GetBored", "PlayAnimation"]


class LookAround(ScriptBehavior):
    """Raises the head and glances left and right, turning the body a little
    (only the eyes on the charger)."""

    description = "head up, glances left and right with the eyes and small turns of the body"
    PARAMS = {"glances": 3, "turn_deg": 45.0, "turn_speed": 1.2, "head": 0.35, "pause_s": 0.8}

    def can_start(self, ctx):
        return not ctx.state.picked_up

    def run(self, ctx):
        p = self.params
        ctx.face("neutral")
        yield ctx.head(p["head"])
        for _ in range(max(1, p["glances"])):
            side = ctx.rng.choice((-1.0, 1.0))
            ctx.look_at(0.8 * side, -0.2)
            if ctx.state.on_charger:
                yield ctx.wait(p["pause_s"])
            else:
                angle = side * math.radians(p["turn_deg"]) * ctx.rng.uniform(0.5, 1.0)
                turned = yield ctx.turn(angle, p["turn_speed"])
                if not turned.ok:
                    return Outcome.FAILED
            yield ctx.wait(p["pause_s"])
        ctx.look_at(0.0, 0.0)
        yield ctx.head(0.1)


class Explore(ScriptBehavior):
    """Drives slowly in short legs with random turns between them; at a cliff
    it backs off and turns away (and the driver's stop-on-cliff stops the treads
    at the edge first)."""

    description = "slow legs of driving with random turns; backs off and turns away at a cliff"
    PARAMS = {"legs": 4, "leg_m": 0.08, "speed": 0.04, "turn_deg": 90.0, "back_off_m": 0.05,
              "head": -0.15}

    def can_start(self, ctx):
        s = ctx.state
        return not (s.on_charger or s.picked_up or s.falling or s.cliff)

    def _back_off(self, ctx):
        backed = yield ctx.drive(-self.params["back_off_m"], self.params["speed"])
        if not backed.ok:
            return False
        turned = yield ctx.turn(math.pi * ctx.rng.uniform(0.7, 1.0) * ctx.rng.choice((-1.0, 1.0)), 1.5)
        return turned.ok

    def run(self, ctx):
        p = self.params
        ctx.face("determined")
        yield [ctx.head(p["head"]), ctx.lift(0.032)]
        for _ in range(max(1, p["legs"])):
            if ctx.state.cliff:
                ok = yield from self._back_off(ctx)
                if not ok:
                    return Outcome.FAILED
            leg = yield ctx.drive(p["leg_m"], p["speed"])
            if not leg.ok:
                if ctx.state.picked_up or ctx.state.falling:
                    return Outcome.FAILED
                if ctx.state.cliff or "cliff" in leg.message:
                    ok = yield from self._back_off(ctx)
                    if not ok:
                        return Outcome.FAILED
                    continue
                return Outcome.FAILED
            angle = math.radians(p["turn_deg"]) * ctx.rng.uniform(0.3, 1.0) * ctx.rng.choice((-1.0, 1.0))
            turned = yield ctx.turn(angle, 1.2)
            if not turned.ok:
                return Outcome.FAILED
        ctx.face("happy")
        yield ctx.wait(0.5)


class GetBored(ScriptBehavior):
    """A bored face, the head sinks, a sigh, a look aside."""

    description = "bored face, the head sinks slowly, a sigh, a glance aside"
    PARAMS = {"head": -0.25, "sigh": "synth:chirp(520, 260, 0.7, 0.35)", "wait_s": 2.0}

    def run(self, ctx):
        p = self.params
        ctx.face("bored")
        yield ctx.head(p["head"], 1.5)
        yield ctx.sound(p["sigh"])
        yield ctx.wait(p["wait_s"])
        ctx.look_at(ctx.rng.uniform(-1.0, 1.0), 0.3)
        yield ctx.wait(p["wait_s"] / 2)
        ctx.look_at(0.0, 0.0)
        yield ctx.head(0.0, 0.8)


class PlayAnimation(ScriptBehavior):
    """Plays one animation (a clip, or a member of a group), with a face before
    it; on failure (e.g. an animation that drives, refused on the charger) the
    ``fallback`` clip instead."""

    description = "one animation (params animation or group), an optional face and fallback clip"
    PARAMS = {"animation": "", "group": "", "face": "", "loops": 1, "fallback": ""}

    def __init__(self, name, params=None):
        super().__init__(name, params)
        face = self.params["face"]
        if face.strip() and face.strip().lower() != BLINK:  # blink: the face node blinks once
            try:
                expression(face)   # one of the face node's, refused at the start, naming the key
            except KeyError as exc:
                raise BehaviorError(f"behaviors.{name}.params.face: {exc.args[0]}") from None

    def run(self, ctx):
        p = self.params
        if p["face"]:
            ctx.face(p["face"])
        played = yield ctx.animate(p["animation"], p["group"], p["loops"])
        if not played.ok and p["fallback"]:
            played = yield ctx.animate(p["fallback"])
        return Outcome.SUCCEEDED if played.ok else Outcome.FAILED
