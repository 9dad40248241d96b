"""The bits of ``RobotState.status``: what the robot says it is doing.

The robot's own enumeration (RobotStatusFlag, identical in the reference
implementation and in Anki's CLAD definitions), used by the driver to publish
flags and events and by the simulator to set them.
"""

from __future__ import annotations

import enum

__all__ = ["RobotStatusFlag"]


class RobotStatusFlag(enum.IntFlag):
    IS_MOVING = 0x1
    IS_CARRYING_BLOCK = 0x2
    IS_PICKING_OR_PLACING = 0x4
    IS_PICKED_UP = 0x8
    IS_BODY_ACC_MODE = 0x10
    IS_FALLING = 0x20
    IS_ANIMATING = 0x40
    IS_PATHING = 0x80
    LIFT_IN_POS = 0x100
    HEAD_IN_POS = 0x200
    IS_ANIM_BUFFER_FULL = 0x400
    IS_ANIMATING_IDLE = 0x800
    IS_ON_CHARGER = 0x1000
    IS_CHARGING = 0x2000
    CLIFF_DETECTED = 0x4000
    ARE_WHEELS_MOVING = 0x8000
    IS_CHARGER_OOS = 0x10000
