"""Small rclpy shims for the distros we support (Humble and newer)."""

from __future__ import annotations

import rclpy

try:
    from rclpy.exceptions import InvalidHandle
except ImportError:  # pragma: no cover - older rclpy
    class InvalidHandle(Exception):
        pass

__all__ = ["InvalidHandle", "try_shutdown"]


def try_shutdown(context=None) -> None:
    """Shut rclpy down unless it already is: ``rclpy.try_shutdown`` where it exists
    (Humble has it); without it, ``rclpy.shutdown`` raises RuntimeError when the
    context is already shut down, which is the only error ignored here."""
    shutdown = getattr(rclpy, "try_shutdown", None)
    if shutdown is not None:
        shutdown(context=context)
        return
    try:
        rclpy.shutdown(context=context)
    except RuntimeError:
        pass  # already shut down (e.g. by the SIGINT handler)
