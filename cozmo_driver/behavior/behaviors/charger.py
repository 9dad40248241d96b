"""Behaviors on the charger: go to sleep on it, drive off it."""

from __future__ import annotations

from ..behavior import Outcome, ScriptBehavior

__all__ = ["SleepOnCharger", "DriveOffCharger"]


class SleepOnCharger(ScriptBehavior):
    """A yawn, the head and lift down, the eyes closed, the backpack breathing
    blue, a soft snore now and then; wakes when taken off the charger."""

    description = "yawn, head and lift down, eyes closed, blue breathing lights, snores; ends off the charger"
    PARAMS = {"sleep_s": 120.0, "snore_s": 8.0, "snore": "synth:warble(180, 40, 3, 1.0, 0.2)",
              "lights": [0.0, 0.1, 0.5], "breathe_period": 2.0}

    def can_start(self, ctx):
        return ctx.state.on_charger

    def run(self, ctx):
        p = self.params
        ctx.face("sleepy")
        # taken off the charger while it yawns or lowers its head, it wakes at once (its end
        # cancels what still runs), not once they are done
        yield _done_or_off_charger(ctx, [ctx.animate("sleepy_yawn")], p["sleep_s"])
        if not ctx.state.on_charger:
            return Outcome.SUCCEEDED
        yield _done_or_off_charger(ctx, [ctx.head(-0.4, 1.5), ctx.lift(0.032)], p["sleep_s"])
        if not ctx.state.on_charger:
            return Outcome.SUCCEEDED
        ctx.face("closed")
        ctx.backpack_lights(tuple(p["lights"]), p["breathe_period"], fade=True)
        while ctx.state.on_charger and ctx.elapsed < p["sleep_s"]:
            yield ctx.wait_until(lambda: not ctx.state.on_charger, p["snore_s"], "sleep")
            if ctx.state.on_charger:
                ctx.sound(p["snore"], 0.5)
        ctx.face("sleepy")


def _done_or_off_charger(ctx, handles, timeout):
    """A wait that ends when the handles are all done, or the robot is off its charger."""
    return ctx.wait_until(lambda: not ctx.state.on_charger or all(h.done for h in handles), timeout,
                          "falling asleep")


class DriveOffCharger(ScriptBehavior):
    """Wakes up and drives forwards off the charger. The one behavior allowed to
    move the treads while the robot is on it."""

    description = "wakes up and drives forwards off the charger (needs battery >= min_battery)"
    drives_off_charger = True
    PARAMS = {"distance_m": 0.12, "speed": 0.05, "min_battery": 0.3}

    def can_start(self, ctx):
        s = ctx.state
        if not s.on_charger or s.picked_up or s.battery_low:
            return False
        return s.battery is None or s.battery >= self.params["min_battery"]

    def run(self, ctx):
        p = self.params
        ctx.face("happy")
        ctx.sound("synth:chirp(400, 900, 0.3, 0.4)")
        yield [ctx.head(0.0), ctx.lift(0.032)]
        drove = yield ctx.drive(p["distance_m"], p["speed"])
        if not drove.ok:
            return Outcome.FAILED
        off = yield ctx.wait_until(lambda: not ctx.state.on_charger, 2.0, "until off the charger")
        return Outcome.SUCCEEDED if off.ok else Outcome.FAILED
