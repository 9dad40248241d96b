"""The parameters of ``cozmo_face_node`` (read at start-up): one table, used by the node to
declare them and list them in ``--help``, by ``config/cozmo.yaml``'s ``cozmo_face:``
section and by the bring-up, which tells a node's parameter given as its argument. Pure."""

from __future__ import annotations

from ..driver.parameters import ParamSpec

__all__ = ["FACE_PARAMETERS", "MAX_FPS"]

#: the highest fps: the robot shows a frame every 1/30 s, so the driver takes one face a tick
#: (a faster face filled its queue and lost a frame in three to a half of them, unsaid)
MAX_FPS = 30.0

#: the node's parameters (read at start-up), declared from this table; ``--help`` lists them
FACE_PARAMETERS = (
    ParamSpec("fps", 30.0, "Frames rendered per second (at most 30: the robot shows 30 a second)", "1/s",
              1.0, MAX_FPS),
    ParamSpec("expression", "neutral", "The expression at start-up"),
    ParamSpec("idle", True, "Idle life: blinks and small eye movements"),
    ParamSpec("seed", 0, "Seed of the idle life (the same seed blinks the same way)"),
    ParamSpec("transition_s", 0.3, "Default time to ease from one expression to the next", "s", 0.0, 10.0),
    ParamSpec("keepalive_s", 1.0, "An unchanged face is published again this often", "s", 0.1, 60.0),
)
