"""One subscription served on a thread of its own instead of by the executor.

Why. On each wake-up, rclpy's executor rebuilds its wait set from every entity
of every node it spins: about a millisecond of CPU for the driver node, whose
parameter services, action servers and services are fifty entities. Teleop
sends ``cmd_vel`` at 10 to 50 Hz, so serving it on the executor cost more CPU
than anything else the executor does (README, "Driver node, Measured").

How. :class:`SubscriptionThread` puts its subscription in a callback group that
no executor ever runs or waits for (:class:`NotForExecutors`), and waits for it
alone, with a guard condition that stops it, in a wait set of its own: rclpy's
``_rclpy.WaitSet``, which ``rclpy.wait_for_message`` uses too, with the same
constructor from Humble on. Messages are taken and passed to ``callback`` on
that thread, in order. Before every wait it calls ``idle()``, which returns the
longest the thread may wait (seconds: a watchdog's deadline) or None to wait
for a message without limit; :meth:`SubscriptionThread.wake` has it asked
again at once. Nothing polls.

Where this rclpy has no such wait set, or it fails its first use, the
constructor raises :class:`Unsupported` before anything is created, and the
caller subscribes the ordinary way. If waiting fails later (it never has),
``on_failure(exc)`` is called on the thread, which then ends.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional

from rclpy.callback_groups import CallbackGroup
from rclpy.guard_condition import GuardCondition

try:
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
except ImportError:  # pragma: no cover - every rclpy since Foxy has it
    _rclpy = None

__all__ = ["NotForExecutors", "SubscriptionThread", "Unsupported"]

logger = logging.getLogger(__name__)

#: messages taken per wake-up at most, before ``idle()`` is asked again
_TAKE_BATCH = 32
#: how long :meth:`SubscriptionThread.stop` waits for the thread, seconds
_JOIN_S = 5.0


class Unsupported(RuntimeError):
    """This rclpy cannot serve a subscription outside its executor."""


class NotForExecutors(CallbackGroup):
    """A callback group whose entities no executor adds to its wait set or runs (an
    executor asks ``can_execute`` before either)."""

    def can_execute(self, entity: Any) -> bool:
        return False

    def beginning_execution(self, entity: Any) -> bool:
        return False

    def ending_execution(self, entity: Any) -> None:
        pass


class SubscriptionThread:
    """See the module docstring. ``create(group)`` makes the subscription (of the caller's
    node, in ``group``); :meth:`stop` ends the thread and destroys the subscription."""

    def __init__(self, node: Any, create: Callable[[CallbackGroup], Any],
                 callback: Callable[[Any], None], idle: Callable[[], Optional[float]],
                 on_failure: Callable[[BaseException], None], name: str) -> None:
        if _rclpy is None or not hasattr(_rclpy, "WaitSet"):
            raise Unsupported("this rclpy has no wait set of its own to offer")
        self._node = node
        self._callback = callback
        self._idle = idle
        self._on_failure = on_failure
        self._stopping = False
        self._guard = GuardCondition(None, None, context=node.context)
        self.subscription = None
        try:
            self._wait_set = _rclpy.WaitSet(1, 1, 0, 0, 0, 0, node.context.handle)
            self.subscription = create(NotForExecutors())
            self._wait(0)  # the first use, on the caller's thread: a failure is Unsupported
        except Exception as exc:  # noqa: BLE001 - whatever this rclpy lacks
            self._destroy()
            raise Unsupported(f"this rclpy cannot wait outside its executor: {exc!r}") from exc
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _wait(self, timeout_ns: int) -> bool:
        """Wait for a message (or the stop guard); True when the subscription has one."""
        sub, guard, wait_set = self.subscription, self._guard, self._wait_set
        with sub.handle, guard.handle:
            wait_set.clear_entities()
            wait_set.add_subscription(sub.handle)
            wait_set.add_guard_condition(guard.handle)
            wait_set.wait(timeout_ns)
            return sub.handle.pointer in wait_set.get_ready_entities("subscription")

    def _run(self) -> None:
        sub = self.subscription
        try:
            while not self._stopping:
                wait_s = self._call(self._idle)
                timeout_ns = -1 if wait_s is None else max(0, int(wait_s * 1e9))
                if self._wait(timeout_ns) and not self._stopping:
                    for _ in range(_TAKE_BATCH):
                        with sub.handle:
                            taken = sub.handle.take_message(sub.msg_type, sub.raw)
                        if taken is None:
                            break
                        self._call(self._callback, taken[0])
        except Exception as exc:  # noqa: BLE001 - the wait itself failed
            if not self._stopping:
                self._call(self._on_failure, exc)

    @staticmethod
    def _call(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - one bad callback does not end the thread
            logger.exception("%r failed", fn)
            return None

    def wake(self) -> None:
        """Any thread: have the thread ask ``idle()`` again now (a deadline changed)."""
        guard = self._guard
        if guard is not None:
            guard.trigger()

    def stop(self) -> None:
        """End the thread (waiting for a callback under way), then destroy the subscription
        and the guard condition. Idempotent; any thread but this one's."""
        self._stopping = True
        thread = getattr(self, "thread", None)
        if thread is not None and thread.is_alive():
            try:
                self._guard.trigger()
            except Exception:  # noqa: BLE001 - context already shut down: the wait ends anyway
                pass
            thread.join(_JOIN_S)
        self._destroy()

    def _destroy(self) -> None:
        sub, self.subscription = self.subscription, None
        if sub is not None:
            self._node.destroy_subscription(sub)
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.destroy()
