"""One subscription served on a thread of its own instead of by the main executor.

Why. On each wake-up, rclpy's executor rebuilds its wait set from every entity
of every node it spins: about a millisecond of CPU for the driver node, whose
parameter services, action servers and services are fifty entities. Teleop
sends ``cmd_vel`` at 10 to 50 Hz, so serving it on the main executor cost more
CPU than anything else the executor does.

How, with public rclpy API only (Humble to Lyrical). :class:`SubscriptionThread`
makes a small node of its own, ``_<node name>_<suffix>`` in the same namespace
and context (no parameter services, no rosout, no global arguments: a global
``__node`` remapping must not give it the driver's name), which holds nothing
but the subscription (to the topic name as the driver node resolves it, so the
driver's remappings apply), and spins it with an executor of its own on a thread
of its own. Messages are passed to ``callback`` on that thread, in order.

The executor is rclpy's ``EventsExecutor`` (``rclpy.experimental``, Jazzy on),
where it exists: it runs in C++ and hands a message to Python about 0.25 ms
sooner than the ``SingleThreadedExecutor``, which builds a wait set and a task
per message in Python. Elsewhere (Humble), or with ``events=False``, it is a
``SingleThreadedExecutor`` over the subscription and a guard condition: a wait
set of two entities. The thread blocks in the executor until a message comes or
:meth:`SubscriptionThread.stop` ends the wait: by the guard condition, or, as
the EventsExecutor takes no guard conditions and its ``wake()`` does not end a
``spin_once`` (rclpy 7.1), by the executor's ``shutdown()``, which does. The
EventsExecutor's wait is bounded (``EVENTS_WAIT_S``) all the same, so that a
context shut down under it is seen.

If making that node fails, the constructor raises :class:`Unsupported` before
anything is left behind, and the caller subscribes the ordinary way. If
spinning fails later (it never has), ``on_failure(exc)`` is called on the
thread, which then ends; a context shut down from outside (rclpy's
``ExternalShutdownException``) ends the thread too, without a call. :class:`ThreadedSubscription` does both for a node
that has no hand-over of its own (the face node's ``face/look_at``, the
description publisher's ``joint_states``): the subscription on a thread where
rclpy allows, on the node's executor otherwise or after the thread failed.

:class:`PolledSubscription` is the other way out of the executor: a subscription
on such a companion node that nothing spins, whose messages wait in its queue
until the owner takes them (``take_message``, as rclpy's executors do), on a
thread that wakes anyway: no wake-up per message at all.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from typing import Any, Callable, List

from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from ..errors import ConfigurationError

try:  # Jazzy on; not in Humble
    from rclpy.experimental import EventsExecutor
except ImportError:  # pragma: no cover - depends on the distribution
    EventsExecutor = None

__all__ = ["PolledSubscription", "SubscriptionThread", "ThreadedSubscription", "Unsupported",
           "end_at_exit", "events_executor_available"]

logger = logging.getLogger(__name__)

#: how long :meth:`SubscriptionThread.stop` waits for the thread, seconds
_JOIN_S = 5.0
#: the longest an EventsExecutor's spin_once waits (stop() ends it sooner), seconds
EVENTS_WAIT_S = 0.5
#: the parameter (Jazzy on; Humble has none and ignores it) that gives every node a
#: ``~/get_type_description`` service: a companion node (:func:`_companion`) holds nothing but
#: its subscription, so it is given False. Not only one service less: a node made and destroyed
#: with that service keeps about 100 kB of the process's memory for good (rclpy 7.1, Fast DDS),
#: and the driver makes its cmd_vel and face companions anew at every configure
_TYPE_DESCRIPTION_SERVICE = "start_type_description_service"
#: what ends a thread at interpreter exit (see end_at_exit); weak: it keeps nothing alive
_AT_EXIT: "List[weakref.WeakMethod]" = []


def end_at_exit(stop: Callable[[], None]) -> None:
    """Have the bound method ``stop``, which ends a thread of its object, called at
    interpreter exit if the object still lives (a node that was never destroyed): a daemon
    thread that wakes in rclpy's native code while the interpreter finalizes is ended by
    CPython from inside that code, which aborts the process ("terminate called without an
    active exception")."""
    _AT_EXIT[:] = [ref for ref in _AT_EXIT if ref() is not None]
    _AT_EXIT.append(weakref.WeakMethod(stop))


def _end_all_at_exit() -> None:
    for ref in list(_AT_EXIT):
        stop = ref()
        if stop is not None:
            try:
                stop()
            except Exception:  # noqa: BLE001 - the process is ending anyway
                pass


atexit.register(_end_all_at_exit)


def events_executor_available() -> bool:
    """Whether this rclpy has the EventsExecutor."""
    return EventsExecutor is not None


class Unsupported(ConfigurationError, RuntimeError):
    """A subscription cannot be served outside the caller's executor here."""


def _companion(node: Any, topic: str, suffix: str) -> "tuple[Node, str]":
    """A node of its own beside ``node`` (``_<node name>_<suffix>``, same namespace and
    context, no parameter services, no rosout, no global arguments) and ``topic`` as
    ``node`` resolves it (its remappings apply). The ``qos_overrides`` parameters ``node``
    was given for the topic are given to it (an overridable subscription takes them)."""
    name = topic
    resolve = getattr(node, "resolve_topic_name", None)  # Humble on
    if resolve is not None:
        name = resolve(topic)
    from ._entry import given_parameters
    overrides = [value for key, value in given_parameters(node).items()
                 if key.startswith(f"qos_overrides.{name}.")]
    overrides.append(Parameter(_TYPE_DESCRIPTION_SERVICE, value=False))  # see the constant
    # hidden (the leading "_"): `ros2 param list` and `ros2 node list` pass it by, as they
    # would wait 5 s for the parameter services it has not
    return Node(f"_{node.get_name()}_{suffix}", namespace=node.get_namespace(),
                context=node.context, start_parameter_services=False,
                enable_rosout=False, use_global_arguments=False,
                parameter_overrides=overrides), name


class SubscriptionThread:
    """See the module docstring. ``subscribe(node, topic, callback)`` makes the
    subscription on the given (the thread's own) node; :meth:`stop` ends the thread and
    destroys that node."""

    def __init__(self, node: Any, topic: str, subscribe: Callable[[Any, str, Callable], Any],
                 callback: Callable[[Any], None], on_failure: Callable[[BaseException], None],
                 suffix: str = "cmd_vel", events: bool = True) -> None:
        self._callback = callback
        self._on_failure = on_failure
        self._context = node.context
        self._stopping = False
        self.node = None
        self._executor = None
        self._guard = None
        #: "events" (the EventsExecutor) or "wait set" (SingleThreadedExecutor and a guard)
        self.executor_kind = "events" if events and events_executor_available() else "wait set"
        try:
            self.node, name = _companion(node, topic, suffix)
            self.subscription = subscribe(self.node, name, self._call)
            if self.executor_kind == "events":
                self._executor = EventsExecutor(context=node.context)
                self._wait_s = EVENTS_WAIT_S
            else:
                self._guard = self.node.create_guard_condition(lambda: None)
                self._executor = SingleThreadedExecutor(context=node.context)
                self._wait_s = None
            self._executor.add_node(self.node)
        except Exception as exc:  # noqa: BLE001 - whatever this rclpy lacks
            self._destroy()
            raise Unsupported(f"cannot serve {topic} on a node of its own: {exc!r}") from exc
        self.thread = threading.Thread(target=self._run, name=f"cozmo-{suffix}", daemon=True)
        self.thread.start()
        end_at_exit(self.stop)

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._executor.spin_once(timeout_sec=self._wait_s)
        except Exception as exc:  # noqa: BLE001 - spinning itself failed
            if self._stopping:
                return
            if not self._context.ok():  # shut down from outside (ExternalShutdownException):
                logger.debug("%s: the context was shut down (%r)", self.thread.name, exc)
                return  # the end of the thread, not a failure: no context to move to
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
        """Any thread: have the thread look up from its wait now (the wait-set executor),
        or within ``EVENTS_WAIT_S`` (the EventsExecutor)."""
        guard = self._guard
        if guard is not None:
            guard.trigger()

    def stop(self) -> None:
        """End the thread (waiting for a callback under way), then destroy its node.
        Idempotent; any thread but this one's."""
        self._stopping = True
        thread = getattr(self, "thread", None)
        if thread is not None and thread.is_alive():
            try:
                if self._guard is not None:
                    self.wake()
                elif self._executor is not None:
                    # ends the wait at once; waits for a callback under way
                    self._executor.shutdown(timeout_sec=_JOIN_S)
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


class ThreadedSubscription:
    """A subscription of ``node`` served on a :class:`SubscriptionThread` (companion node
    ``_<node name>_<suffix>``) where rclpy allows, by ``node``'s executor where it does not
    or once the thread has failed (a guard condition of ``node`` moves it there, on the
    executor's thread). Made without QoS event handlers and without ``qos_overrides``
    parameters (``qos.create_subscription``).
    ``callback`` runs on whichever thread serves it, so what it touches must be safe for
    that; ``raw``: it gets the serialized message (bytes). :meth:`close` ends the thread
    (destroying ``node`` ends the rest)."""

    def __init__(self, node: Any, msg_type: Any, topic: str, callback: Callable[[Any], None],
                 profile: Any, suffix: str, raw: bool = False) -> None:
        from . import qos

        self._node, self._topic, self._callback = node, topic, callback
        self._make = lambda owner, name, cb: qos.create_subscription(
            owner, msg_type, name, cb, profile, raw=raw, overridable=False)
        self.subscription = None
        self.thread: Any = None
        self._moved = node.create_guard_condition(self._to_executor)
        try:
            self.thread = SubscriptionThread(node, topic, self._make, callback, self._failed,
                                             suffix=suffix)
        except Unsupported as exc:
            node.get_logger().info(f"{topic} served by the executor: {exc}")
            self.subscription = self._make(node, topic, callback)

    def _failed(self, exc: BaseException) -> None:
        """The thread: spinning failed; the executor takes the subscription over."""
        self._node.get_logger().error(f"{self._topic} thread failed ({exc!r}): "
                                      f"{self._topic} moves to the executor")
        self._moved.trigger()

    def _to_executor(self) -> None:
        thread, self.thread = self.thread, None
        if thread is not None:
            thread.stop()
            self.subscription = self._make(self._node, self._topic, self._callback)

    def close(self) -> None:
        """End the thread and destroy its node (idempotent; not from the thread itself)."""
        thread, self.thread = self.thread, None
        if thread is not None:
            thread.stop()

    def unsubscribe(self) -> None:
        """End the subscription wherever it is served (the thread and its node, or the
        node's own subscription); it is not taken up again. Idempotent; not from the
        thread itself."""
        self._node.destroy_guard_condition(self._moved)  # no move to the executor after this
        self.close()
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            self._node.destroy_subscription(subscription)


class PolledSubscription:
    """A subscription of ``node``'s that no executor serves (see the module docstring):
    made by ``subscribe(owner, name, callback)`` on the companion node
    ``_<node name>_<suffix>``; :meth:`take` returns the messages waiting (the QoS depth
    bounds them, the newest kept). Not thread-safe: the owner takes and closes under a
    lock of its own. Raises :class:`Unsupported` where this rclpy cannot take by hand."""

    def __init__(self, node: Any, topic: str, subscribe: Callable[[Any, str, Callable], Any],
                 suffix: str) -> None:
        self.node = None
        try:
            self.node, name = _companion(node, topic, suffix)
            self.subscription = subscribe(self.node, name, lambda msg: None)
            if not callable(getattr(self.subscription.handle, "take_message", None)):
                raise AttributeError("this rclpy's subscriptions have no take_message")
        except Exception as exc:  # noqa: BLE001 - whatever this rclpy lacks
            self.close()
            raise Unsupported(f"cannot take {topic} by hand: {exc!r}") from exc

    def take(self, limit: int = 64) -> List[Any]:
        """The messages waiting, oldest first (at most ``limit``), each as ``(message,
        info)``: ``info`` is rclpy's message info (a dict with ``received_timestamp``, ns
        of the system clock, where this rclpy gives one; else None); none once closed."""
        if self.node is None:
            return []
        sub, out = self.subscription, []
        with sub.handle:
            for _ in range(limit):
                got = sub.handle.take_message(sub.msg_type, sub.raw)
                if got is None:
                    break
                out.append((got[0], got[1] if len(got) > 1 else None))
        return out

    def close(self) -> None:
        """Destroy the companion node and the subscription with it (idempotent)."""
        node, self.node = self.node, None
        if node is not None:
            node.destroy_node()
