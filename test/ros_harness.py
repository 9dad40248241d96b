"""The plumbing shared by the in-process ROS tests: a probe node and the nodes under test
on one ``SingleThreadedExecutor`` in the test's rclpy context.

Every wait is a bounded ``spin_once`` loop (:meth:`RosHarness.spin_until`); publishers,
service clients and action clients wait for their peer within the discovery bounds of
:mod:`ros_timeouts`. What a test file needs beyond this (the driver's parameters, the
simulator, its own helpers) stays in that file, in a subclass.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, TypeVar

import pytest
import rclpy
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile

from ros_timeouts import CONNECT_TIMEOUT, DISCOVERY_TIMEOUT, discovered  # noqa: F401  (re-exported)
from cozmo_driver.sim import SimServer

__all__ = ["CONNECT_TIMEOUT", "DISCOVERY_TIMEOUT", "RosHarness", "discovered", "closing_all", "LogRecorder",
           "sim_fixture", "qos_event_handlers"]

T = TypeVar("T")


def sim_fixture(seed: int):
    """A fixture ``sim``: a simulator on 127.0.0.1 (a free port) with ``seed``, stopped after
    the test. In a test module: ``sim = sim_fixture(seed=5)``."""

    @pytest.fixture(name="sim")
    def sim():
        """The simulated robot on 127.0.0.1 (see ``sim_fixture``)."""
        with SimServer(port=0, seed=seed) as server:
            yield server

    return sim


def qos_event_handlers(node) -> int:
    """How many of ``node``'s waitables are rclpy's QoS event handlers (entities that every
    executor wake-up checks)."""
    try:
        from rclpy.event_handler import EventHandler
    except ImportError:  # Humble
        from rclpy.qos_event import QoSEventHandler as EventHandler
    return sum(isinstance(w, EventHandler) for w in node.waitables)


@contextmanager
def closing_all(make: Callable[..., T]) -> Iterator[Callable[..., T]]:
    """``make``, keeping what it makes; on exit each is closed, the last made first.

    For a fixture that gives tests a factory of harnesses::

        with closing_all(lambda **params: Rig(rclpy_context, sim, **params)) as make:
            yield make
    """
    made: List[Any] = []

    def keep(*args: Any, **kwargs: Any) -> T:
        thing = make(*args, **kwargs)
        made.append(thing)
        return thing

    try:
        yield keep
    finally:
        for thing in reversed(made):
            thing.close()


class LogRecorder:
    """Stands in for a logger: passes each line on to ``logger`` and keeps it in ``lines``."""

    def __init__(self, logger: Any, lines: Optional[List[str]] = None) -> None:
        self.logger = logger
        self.lines: List[str] = [] if lines is None else lines

    def warning(self, text: str) -> None:
        self.lines.append(text)
        self.logger.warning(text)

    def info(self, text: str) -> None:
        self.lines.append(text)
        self.logger.info(text)

    def error(self, text: str) -> None:
        self.lines.append(text)
        self.logger.error(text)

    def debug(self, text: str) -> None:
        self.lines.append(text)
        self.logger.debug(text)


class RosHarness:
    """A probe node and ``nodes`` on one executor in ``context``.

    ``nodes`` are added to the executor before the probe. :meth:`close` closes the nodes
    it was given that have a ``close()`` (the driver's, the behavior node's; last added
    first), shuts the executor down and destroys those nodes (last added first), then the
    probe."""

    #: ``timeout_sec`` of each ``spin_once`` in :meth:`spin_until`
    spin_timeout: float = 0.02

    def __init__(self, context, probe_name: str = "probe", namespace: str = "",
                 nodes: Iterable[Any] = ()) -> None:
        self.context = context
        self.probe = rclpy.create_node(probe_name, namespace=namespace, context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.nodes: List[Any] = []
        for node in nodes:
            self.add(node)
        self.executor.add_node(self.probe)
        self.received: Dict[str, List[Any]] = {}

    def add(self, node: Any) -> Any:
        """Spin ``node`` on this executor too (and destroy it on :meth:`close`)."""
        self.executor.add_node(node)
        self.nodes.append(node)
        return node

    # --- spinning

    def spin_until(self, predicate: Callable[[], Any], timeout: float,
                   every: Optional[Callable[[], None]] = None, period: float = 0.1) -> bool:
        """Spin until ``predicate()`` holds (True) or ``timeout`` s pass (False); ``every``,
        if given, is called first and then every ``period`` s."""
        deadline = time.monotonic() + timeout
        next_call = time.monotonic()
        while True:
            if every is not None and time.monotonic() >= next_call:
                every()
                next_call += period
            if predicate():
                return True
            if time.monotonic() >= deadline:
                return False
            self.executor.spin_once(timeout_sec=self.spin_timeout)

    def spin_for(self, seconds: float, every: Optional[Callable[[], None]] = None,
                 period: float = 0.1) -> None:
        self.spin_until(lambda: False, seconds, every, period)

    # --- topics

    def listen(self, name: Optional[str], msg_type, topic: str, qos=QoSProfile(depth=100)) -> List[Any]:
        """The list that every message on ``topic`` is appended to (kept as ``received[name]``)."""
        box: List[Any] = []
        if name is not None:
            self.received[name] = box
        self.probe.create_subscription(msg_type, topic, box.append, qos)
        return box

    def publisher(self, msg_type, topic: str, qos=QoSProfile(depth=10), subscribers: int = 1):
        """A probe publisher, once it sees ``subscribers`` subscribers (within the discovery bound)."""
        pub = self.probe.create_publisher(msg_type, topic, qos)
        assert self.spin_until(lambda: pub.get_subscription_count() >= subscribers, DISCOVERY_TIMEOUT), topic
        return pub

    # --- services and actions

    def service_client(self, srv_type, name: str):
        """A probe client of service ``name`` that sees its server."""
        return discovered(self.spin_until, lambda: self.probe.create_client(srv_type, name),
                          lambda c: c.service_is_ready(), self.probe.destroy_client, f"{name} service")

    def call(self, srv_type, name: str, request, timeout: float = 5.0):
        """The response of service ``name`` to ``request`` (a fresh client, bounded waits)."""
        future = self.service_client(srv_type, name).call_async(request)
        assert self.spin_until(future.done, timeout), f"{name}: no response"
        return future.result()

    def action_client(self, action_type, name: str) -> ActionClient:
        """A probe client of action ``name`` that sees its server."""
        return discovered(self.spin_until, lambda: ActionClient(self.probe, action_type, name),
                          lambda c: c.server_is_ready(), lambda c: c.destroy(), f"{name} action server")

    # --- the end

    def close(self) -> None:
        for node in reversed(self.nodes):
            if callable(getattr(node, "close", None)):
                node.close()
        self.executor.shutdown(timeout_sec=1.0)
        for node in reversed(self.nodes):
            node.destroy_node()
        self.probe.destroy_node()
