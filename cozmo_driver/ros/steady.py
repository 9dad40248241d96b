"""Timers on the steady clock, for what a node times for itself.

``Node.create_timer`` times on the node's clock, which is ROS time: under
``use_sim_time`` it stands still until ``/clock`` is published (and follows its rate,
pauses included, after that). The nodes' own timers measure this computer's time, as the
robot link does: the driver's 1 s reports (``/diagnostics``, ``link_status``, the battery
marker, refusals held back, the objects' ageing), its wait for tf, a clip's wait for the
motors' calibration and a treads goal's for the head's, the retirement of released action
servers, the name guard and the behavior engine's ticks. They run on a steady clock, one
per node; Humble's ``Node.create_timer`` takes it already (``clock=``). The stamps of
messages stay on the node's clock."""

from __future__ import annotations

from typing import Any, Callable, Optional

from rclpy.clock import Clock, ClockType

__all__ = ["steady_clock", "steady_timer"]

_ATTRIBUTE = "_cozmo_steady_clock"


def steady_clock(node: Any) -> Clock:
    """``node``'s steady clock (made on first use, then kept on the node)."""
    clock = getattr(node, _ATTRIBUTE, None)
    if clock is None:
        clock = Clock(clock_type=ClockType.STEADY_TIME)
        setattr(node, _ATTRIBUTE, clock)
    return clock


def steady_timer(node: Any, period_s: float, callback: Callable[[], Any],
                 callback_group: Optional[Any] = None) -> Any:
    """``node.create_timer(period_s, callback, callback_group)`` on ``node``'s steady clock."""
    return node.create_timer(period_s, callback, callback_group=callback_group, clock=steady_clock(node))
