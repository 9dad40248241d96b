"""Checks and conversions of commands before anything reaches the robot.

A value that is not finite, or that has no meaning for the robot (a colour
channel outside 0..1, a stamped command in a foreign frame), raises
:class:`CommandError` naming the field: the whole command is refused. A finite
value beyond a joint's or actuator's limits is clamped by :func:`clamp`, which
says which field was clamped and to what limits. Pure.

Colours: the robot's lights take RGB555 words (bits 14..10 red, 9..5 green,
4..0 blue, bit 15 zero). :func:`rgb555` maps each channel ``c`` in 0.0..1.0 to
``round(c * 31)``, so that ``k / 31`` gives back exactly ``k`` and 0.0 and 1.0
map to 0 and 31; alpha is not used.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional, Tuple

from ..errors import UsageError

__all__ = ["CommandError", "require_finite", "clamp", "rgb555", "rgb555_to_rgb", "volume_level",
           "check_frame", "check_cmd_vel_stamp", "ESTOP_REFUSAL", "NOT_CONNECTED_REFUSAL", "inactive_refusal"]

#: why a command or goal is refused for the driver's state, as the driver core's topics, the
#: media and the motion actions say it (with the way out)
ESTOP_REFUSAL = "emergency stop engaged (release it with the emergency_stop service)"
NOT_CONNECTED_REFUSAL = ("not connected to the robot (the driver reconnects by itself: "
                         "link_status says when it is back)")


def inactive_refusal(node_name: str) -> str:
    """Why a command or goal is refused while the driver ``node_name`` (its fully qualified
    name) is inactive."""
    return f"the driver is not active (activate it: ros2 lifecycle set {node_name} activate)"


class CommandError(UsageError, ValueError):
    """A command was refused; the message names the field and why."""


def require_finite(prefix: str, **fields: float) -> None:
    """Raise CommandError naming the first field whose value is NaN or infinite."""
    for name, value in fields.items():
        if not math.isfinite(value):
            raise CommandError(f"{prefix}.{name} is {value}: not a finite number")


def check_twist(field: str, linear: Tuple[float, float, float],
                angular: Tuple[float, float, float]) -> Optional[str]:
    """Raise CommandError naming a velocity component that is not finite; else a warning
    naming the non-zero components a differential drive cannot follow (None if none)."""
    require_finite(field, **{"linear.x": linear[0], "linear.y": linear[1], "linear.z": linear[2],
                             "angular.x": angular[0], "angular.y": angular[1], "angular.z": angular[2]})
    ignored = [f"{name} = {value:.7g}" for name, value in (
        ("linear.y", linear[1]), ("linear.z", linear[2]), ("angular.x", angular[0]),
        ("angular.y", angular[1])) if value != 0.0]
    if not ignored:
        return None
    return (f"{field}: {', '.join(ignored)} ignored: Cozmo drives forwards and backwards "
            "(linear.x) and turns (angular.z) only")


def clamp(value: float, lo: float, hi: float, field: str,
          unit: str = "") -> Tuple[float, Optional[str]]:
    """(value clamped to [lo, hi], a warning naming the field and the limits or None)."""
    if not math.isfinite(value):
        raise CommandError(f"{field} is {value}: not a finite number")
    if lo <= value <= hi:
        return value, None
    clamped = min(max(value, lo), hi)
    u = f" {unit}" if unit else ""
    return clamped, (f"{field} = {value:.4g}{u} is outside [{lo:.4g}, {hi:.4g}]{u}: "
                     f"clamped to {clamped:.4g}{u}")


def rgb555(r: float, g: float, b: float, field: str) -> int:
    """RGB555 word of a colour with channels in 0.0..1.0 (see the module docstring)."""
    out = 0
    require_finite(field, r=r, g=g, b=b)
    for name, c in (("r", r), ("g", g), ("b", b)):
        if not 0.0 <= c <= 1.0:
            raise CommandError(f"{field}.{name} = {c:.7g}: a colour channel must be in [0, 1]")
        out = (out << 5) | int(round(c * 31.0))
    return out


def rgb555_to_rgb(word: int) -> Tuple[float, float, float]:
    """Channels 0.0..1.0 of an RGB555 word (the inverse of :func:`rgb555`)."""
    return ((word >> 10) & 31) / 31.0, ((word >> 5) & 31) / 31.0, (word & 31) / 31.0


def volume_level(volume: float) -> Tuple[int, Optional[str]]:
    """SetRobotVolume level 0..65535 for a volume 0.0..1.0 (clamped with a warning)."""
    value, warning = clamp(volume, 0.0, 1.0, "volume.data")
    return int(round(value * 65535.0)), warning


def check_frame(frame_id: str, allowed: Iterable[str], field: str) -> None:
    """Refuse a stamped command whose frame is neither empty nor one of ``allowed``."""
    if frame_id and frame_id not in allowed:
        names = ", ".join(repr(a) for a in allowed)
        raise CommandError(f"{field} = {frame_id!r}: commands must be in {names} (or empty)")


def check_cmd_vel_stamp(sec: int, nanosec: int, now_ns: int, timeout_s: float) -> None:
    """Refuse a stamped cmd_vel stamped more than ``timeout_s`` (``cmd_vel_timeout``) before
    ``now_ns``, the driver's clock (ns), or more than that after it: a command delivered late
    (after a Wi-Fi stall, republished, replayed from a bag) would drive the treads for a whole
    cmd_vel_timeout each time it came. A zero stamp (many tools publish one) is taken, and
    nothing is refused while the clock reads 0 (simulated time before the first /clock) or
    with ``timeout_s`` 0 (the watchdog off: no age to measure against)."""
    if (sec == 0 and nanosec == 0) or now_ns == 0 or timeout_s <= 0.0:
        return
    age = (now_ns - (sec * 1_000_000_000 + nanosec)) / 1e9
    if abs(age) > timeout_s:
        said = f"{age:.3f} s old by" if age > 0 else f"{-age:.3f} s ahead of"
        raise CommandError(f"cmd_vel.header.stamp is {said} the driver's clock, more than "
                           f"cmd_vel_timeout ({timeout_s:g} s): a stale command (or clocks "
                           "apart: synchronise them, or send a zero stamp)")
