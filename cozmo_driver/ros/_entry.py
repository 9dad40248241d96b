"""The shape the nodes' console-script ``main()`` share: make the node (a bad parameter or
configuration: a message on stderr, rclpy shut down, and the caller exits with 2), then spin
it on a single-threaded executor until Ctrl-C, SIGTERM or an external shutdown, and clean up.
``rclpy.init`` (and any signal set-up) stays with each node's ``main``."""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Tuple, Type

from rclpy.executors import SingleThreadedExecutor

from ._compat import try_shutdown

try:
    from rclpy.executors import ExternalShutdownException
except ImportError:  # pragma: no cover - older rclpy
    class ExternalShutdownException(Exception):
        pass

__all__ = ["make_node", "spin_node"]


def make_node(prog: str, factory: Callable[[], Any],
              errors: Tuple[Type[BaseException], ...]) -> Optional[Any]:
    """``factory()``; on one of ``errors`` print ``prog: error`` to stderr, shut rclpy down
    and return None."""
    try:
        return factory()
    except errors as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        try_shutdown()
        return None


def spin_node(node: Any, start: Optional[Callable[[], None]] = None,
              stop: Optional[Callable[[SingleThreadedExecutor], None]] = None) -> None:
    """Spin ``node`` until interrupted or shut down from outside; ``start()`` runs first
    (inside the interruptible part), ``stop(executor)`` after (with the executor still up
    and the context still valid), then the executor, the node and rclpy are shut down."""
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        if start is not None:
            start()
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if stop is not None:
            stop(executor)
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        try_shutdown()
