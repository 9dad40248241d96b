"""One subscription served on a thread of its own instead of by the main executor.

Why. On each wake-up, rclpy's executor rebuilds its wait set from every entity
of every node it spins: about a millisecond of CPU for the driver node, whose
parameter services, action servers and services are fifty entities. Teleop
sends ``cmd_vel`` at 10 to 50 Hz, so serving it on the main executor cost more
CPU than anything else the executor does.

How, with public rclpy API only (Humble to Lyrical). :class:`SubscriptionThread`
makes a small node of its own, ``<node name>_<suffix>`` in the same namespace
and context (no parameter services, no rosout, no global arguments: a global
``__node`` remapping must not give it the driver's name), which holds nothing
but the subscription (to the topic name as the driver node resolves it, so the
driver's remappings apply) and a guard condition, and spins it with a
``SingleThreadedExecutor`` on a thread of its own: the wait set it rebuilds is
two entities. Messages are passed to ``callback`` on that thread, in order.
Nothing polls: the thread blocks in the executor until a message comes or
:meth:`SubscriptionThread.stop` triggers the guard.

If making that node fails, the constructor raises :class:`Unsupported` before
anything is left behind, and the caller subscribes the ordinary way. If
spinning fails later (it never has), ``on_failure(exc)`` is called on the
thread, which then ends.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from ..errors import ConfigurationError

__all__ = ["SubscriptionThread", "Unsupported"]

logger = logging.getLogger(__name__)

#: how long :meth:`SubscriptionThread.stop` waits for the thread, seconds
_JOIN_S = 5.0


class Unsupported(ConfigurationError, RuntimeError):
    """A subscription cannot be served outside the caller's executor here."""


class SubscriptionThread:
    """See the module docstring. ``subscribe(node, topic, callback)`` makes the
    subscription on the given (the thread's own) node; :meth:`stop` ends the thread and
    destroys that node."""

    def __init__(self, node: Any, topic: str, subscribe: Callable[[Any, str, Callable], Any],
                 callback: Callable[[Any], None], on_failure: Callable[[BaseException], None],
                 suffix: str = "cmd_vel") -> None:
        self._callback = callback
        self._on_failure = on_failure
        self._stopping = False
        self.node = None
        self._executor = None
        try:
            name = topic
            resolve = getattr(node, "resolve_topic_name", None)  # Humble on
            if resolve is not None:
                name = resolve(topic)
            self.node = Node(f"{node.get_name()}_{suffix}", namespace=node.get_namespace(),
                             context=node.context, start_parameter_services=False,
                             enable_rosout=False, use_global_arguments=False)
            self._guard = self.node.create_guard_condition(lambda: None)
            self.subscription = subscribe(self.node, name, self._call)
            self._executor = SingleThreadedExecutor(context=node.context)
            self._executor.add_node(self.node)
        except Exception as exc:  # noqa: BLE001 - whatever this rclpy lacks
            self._destroy()
            raise Unsupported(f"cannot serve {topic} on a node of its own: {exc!r}") from exc
        self.thread = threading.Thread(target=self._run, name=f"cozmo-{suffix}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._executor.spin_once()
        except Exception as exc:  # noqa: BLE001 - spinning itself failed
            if not self._stopping:
                self._call_failure(exc)

    def _call(self, msg: Any) -> None:
        if self._stopping:
            return
        try:
            self._callback(msg)
        except Exception:  # noqa: BLE001 - one bad message does not end the thread
            logger.exception("%r failed", self._callback)

    def _call_failure(self, exc: BaseException) -> None:
        try:
            self._on_failure(exc)
        except Exception:  # noqa: BLE001
            logger.exception("%r failed", self._on_failure)

    def wake(self) -> None:
        """Any thread: have the thread look up from its wait now."""
        guard = getattr(self, "_guard", None)
        if guard is not None:
            guard.trigger()

    def stop(self) -> None:
        """End the thread (waiting for a callback under way), then destroy its node.
        Idempotent; any thread but this one's."""
        self._stopping = True
        thread = getattr(self, "thread", None)
        if thread is not None and thread.is_alive():
            try:
                self.wake()
            except Exception:  # noqa: BLE001 - context already shut down: the wait ends anyway
                pass
            thread.join(_JOIN_S)
        self._destroy()

    def _destroy(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            try:
                executor.shutdown(timeout_sec=0.0)
            except Exception:  # noqa: BLE001 - a failed executor: its node goes anyway
                logger.debug("shutting the executor down failed", exc_info=True)
        self._guard = None  # (it goes with the node)
        node, self.node = self.node, None
        if node is not None:
            node.destroy_node()
