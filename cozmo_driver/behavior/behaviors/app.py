"""Behaviors made from the Cozmo app's behavior definitions (see
:mod:`cozmo_driver.behavior.app_resources`)."""

from __future__ import annotations

from ..behavior import Outcome, ScriptBehavior

__all__ = ["AppPlayAnimations"]


class AppPlayAnimations(ScriptBehavior):
    """The app's ``PlayAnim`` and ``PlayArbitraryAnim`` classes: play its animation
    triggers (as animation groups of the driver's ``animation_groups_file``) one
    after the other, or (``arbitrary``) one of them at random."""

    description = "the app's PlayAnim / PlayArbitraryAnim: its animation groups in turn, or one at random"
    PARAMS = {"groups": [], "arbitrary": False, "loops": 1}

    def can_start(self, ctx):
        return bool(self.params["groups"])

    def run(self, ctx):
        groups = list(self.params["groups"])
        if self.params["arbitrary"]:
            groups = [ctx.rng.choice(groups)]
        played_any = False
        for group in groups:
            played = yield ctx.animate(group=group, loops=self.params["loops"])
            if played.ok:
                played_any = True
            else:
                ctx.log(f"animation group {group}: {played.message}")
        return Outcome.SUCCEEDED if played_any else Outcome.FAILED
