"""SubscriptionThread: a subscription served on a thread of its own, which the executor
never waits for (real rclpy and DDS, two nodes in one context, no robot)."""

from __future__ import annotations

import threading
import time
from typing import Any, List, Optional

import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from std_msgs.msg import Int32  # noqa: E402

from cozmo_driver.ros import subscription_thread as st  # noqa: E402
from cozmo_driver.ros.subscription_thread import (NotForExecutors, SubscriptionThread,  # noqa: E402
                                                   Unsupported)

pytestmark = [pytest.mark.ros]


def wait_until(predicate, timeout: float = 5.0, spin=None) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        if spin is not None:
            spin.spin_once(timeout_sec=0.02)
        else:
            time.sleep(0.01)
    return bool(predicate())


class Rig:
    """A node served by an executor (which the tests spin or not), and a publisher node."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("served", context=context)
        self.other = rclpy.create_node("publisher", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.executor.add_node(self.other)
        self.pub = self.other.create_publisher(Int32, "numbers", 100)
        self.got: List[int] = []
        self.threads: List[str] = []
        self.idle_calls = 0
        self.idle_wait: Optional[float] = None
        self.idle_returned: List[Optional[float]] = []
        self.failures: List[BaseException] = []

    def callback(self, msg: Int32) -> None:
        self.got.append(msg.data)
        self.threads.append(threading.current_thread().name)

    def idle(self) -> Optional[float]:
        self.idle_calls += 1
        self.idle_returned.append(self.idle_wait)
        return self.idle_wait

    def start(self) -> SubscriptionThread:
        return SubscriptionThread(
            self.node, lambda group: self.node.create_subscription(
                Int32, "numbers", self.callback, 100, callback_group=group),
            self.callback, self.idle, self.failures.append, "numbers-thread")

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.other.destroy_node()
        self.node.destroy_node()


@pytest.fixture
def rig(rclpy_context):
    r = Rig(rclpy_context)
    yield r
    r.close()


def test_messages_reach_the_callback_on_its_own_thread_in_order_without_the_executor(rig):
    served = rig.start()
    try:
        assert served.subscription in list(rig.node.subscriptions)
        assert not rig.executor.can_execute(served.subscription)
        assert wait_until(lambda: rig.pub.get_subscription_count() > 0)
        for i in range(50):
            rig.pub.publish(Int32(data=i))
        # nobody spins the executor: the thread alone takes the messages
        assert wait_until(lambda: len(rig.got) == 50)
        assert rig.got == list(range(50))
        assert set(rig.threads) == {"numbers-thread"}
        assert rig.idle_calls >= 2  # asked before each wait
        # and an executor spinning the node never runs the subscription's callback
        rig.pub.publish(Int32(data=50))
        assert wait_until(lambda: len(rig.got) == 51, spin=rig.executor)
        assert set(rig.threads) == {"numbers-thread"}
    finally:
        served.stop()
    assert not served.thread.is_alive()
    assert list(rig.node.subscriptions) == []


def test_idle_sets_the_longest_wait_without_messages(rig):
    rig.idle_wait = 0.05  # a watchdog's deadline, 50 ms away each time
    served = rig.start()
    try:
        assert wait_until(lambda: rig.idle_calls >= 5, 2.0)
        rig.idle_wait = None  # nothing due: the thread waits for a message only
        assert wait_until(lambda: rig.idle_returned[-1] is None, 2.0)
        calls = rig.idle_calls
        time.sleep(0.3)
        assert rig.idle_calls == calls
        assert wait_until(lambda: rig.pub.get_subscription_count() > 0)
        rig.pub.publish(Int32(data=7))
        assert wait_until(lambda: rig.got == [7] and rig.idle_calls == calls + 1)
        served.wake()  # asked again at once
        assert wait_until(lambda: rig.idle_calls == calls + 2)
        assert rig.got == [7]
    finally:
        served.stop()


def test_a_failing_callback_is_logged_and_the_thread_goes_on(rig, log_records):
    logged = log_records(st.logger.name, "ERROR")  # (caplog would need propagation)
    served = rig.start()
    bad = []

    def failing(msg: Int32) -> None:
        bad.append(msg.data)
        if msg.data == 1:
            raise ValueError("bad message")
        rig.callback(msg)
    served._callback = failing
    try:
        assert wait_until(lambda: rig.pub.get_subscription_count() > 0)
        for i in range(3):
            rig.pub.publish(Int32(data=i))
        assert wait_until(lambda: rig.got == [0, 2])
        assert wait_until(lambda: "bad message" in logged.text)
        assert "Traceback" in logged.text and "ValueError: bad message" in logged.text
    finally:
        served.stop()


def test_a_failing_wait_is_reported_on_the_thread_which_then_ends(rig):
    served = rig.start()

    class FailingWaitSet:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError("the wait set broke")
    try:
        served._wait_set = FailingWaitSet()
        served._guard.trigger()  # wake the thread: its next wait fails
        served.thread.join(5.0)
        assert not served.thread.is_alive()
        assert len(rig.failures) == 1 and "the wait set broke" in str(rig.failures[0])
    finally:
        served.stop()
    assert list(rig.node.subscriptions) == []


def test_unsupported_where_rclpy_has_no_wait_set_and_nothing_is_left(rig, monkeypatch):
    monkeypatch.setattr(st, "_rclpy", object())
    with pytest.raises(Unsupported, match="no wait set"):
        rig.start()
    assert list(rig.node.subscriptions) == []


def test_unsupported_when_the_first_wait_fails_and_nothing_is_left(rig, monkeypatch):
    def broken(self, timeout_ns: int) -> bool:
        raise TypeError("incompatible function arguments")
    monkeypatch.setattr(SubscriptionThread, "_wait", broken)
    with pytest.raises(Unsupported, match="incompatible function arguments"):
        rig.start()
    assert list(rig.node.subscriptions) == []
    assert list(rig.node.guards) == []


def test_stop_is_idempotent_and_the_group_refuses_every_entity(rig):
    served = rig.start()
    served.stop()
    served.stop()
    group = NotForExecutors()
    assert not group.can_execute(object()) and not group.beginning_execution(object())
