"""Differential-drive kinematics of Cozmo's treads, in SI units.

``v`` (m/s, forward) and ``w`` (rad/s, counter-clockwise) map to tread speeds
``left = v - w * track / 2`` and ``right = v + w * track / 2``; back again
``v = (left + right) / 2`` and ``w = (right - left) / track``.

A command beyond the treads' limit is scaled down as a whole: both treads are
multiplied by the same factor, so the path's curvature ``w / v`` (its radius)
is kept and only the speed along it drops. Clipping each tread on its own would
turn a gentle arc into a sharper one. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..robot_geometry import MAX_WHEEL_SPEED_MPS, TRACK_WIDTH_M

__all__ = ["WheelCommand", "twist_to_wheels", "wheels_to_twist"]


@dataclass(frozen=True)
class WheelCommand:
    left_mps: float
    right_mps: float
    #: the factor (0 < scale <= 1) both treads were multiplied by to respect the limit
    scale: float = 1.0

    @property
    def limited(self) -> bool:
        return self.scale < 1.0


#: a twist component beyond this (m/s or rad/s) is scaled down before the treads' speeds are
#: computed, so that no finite input overflows
_PRESCALE_ABOVE = 1e6


def twist_to_wheels(v_mps: float, w_radps: float, max_wheel_speed_mps: float = MAX_WHEEL_SPEED_MPS,
                    track_m: float = TRACK_WIDTH_M) -> WheelCommand:
    """Tread speeds for a body twist, scaled to ``max_wheel_speed_mps`` preserving curvature.

    The inputs must be finite (the caller validates ROS messages first)."""
    if not max_wheel_speed_mps > 0:
        raise ValueError("max_wheel_speed_mps must be positive")
    pre = 1.0
    big = max(abs(v_mps), abs(w_radps))
    if big > _PRESCALE_ABOVE:
        # e.g. 1e308: v + w * track / 2 would overflow to inf, and inf * 0 is NaN; the
        # curvature is the same at any scale, and the result is scaled to the limit anyway
        pre = _PRESCALE_ABOVE / big
        v_mps, w_radps = v_mps * pre, w_radps * pre
    half = w_radps * track_m / 2.0
    left = v_mps - half
    right = v_mps + half
    fastest = max(abs(left), abs(right))
    if fastest <= max_wheel_speed_mps:
        return WheelCommand(left, right, pre)
    scale = max_wheel_speed_mps / fastest
    return WheelCommand(left * scale, right * scale, scale * pre)


def wheels_to_twist(left_mps: float, right_mps: float, track_m: float = TRACK_WIDTH_M):
    """(v m/s, w rad/s) of the body for tread speeds."""
    return (left_mps + right_mps) / 2.0, (right_mps - left_mps) / track_m
