"""SubscriptionThread: a subscription served on a node and thread of its own, which the
main executor never spins (real rclpy and DDS, public API only, no robot). Every test
runs with both executors: rclpy's EventsExecutor (Jazzy on) and the wait-set one
(SingleThreadedExecutor, the only one on Humble)."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

from dependencies import require

rclpy = require("rclpy")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from std_msgs.msg import Int32  # noqa: E402

from cozmo_driver.ros import subscription_thread as st  # noqa: E402
from cozmo_driver.ros.subscription_thread import SubscriptionThread, Unsupported  # noqa: E402

pytestmark = [pytest.mark.ros]


def wait_until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(predicate())


class Rig:
    """A node in a namespace served by an executor (which the tests never spin), and a
    publisher node."""

    def __init__(self, context, events: bool) -> None:
        self.events = events
        self.node = rclpy.create_node("served", namespace="/robot1", context=context)
        self.other = rclpy.create_node("publisher", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.executor.add_node(self.other)
        self.pub = self.other.create_publisher(Int32, "/robot1/numbers", 100)
        self.got: List[int] = []
        self.threads: List[str] = []
        self.failures: List[BaseException] = []

    def callback(self, msg: Int32) -> None:
        self.got.append(msg.data)
        self.threads.append(threading.current_thread().name)

    def start(self) -> SubscriptionThread:
        return SubscriptionThread(
            self.node, "numbers", lambda node, topic, cb: node.create_subscription(
                Int32, topic, cb, 100), self.callback, self.failures.append, "numbers",
            events=self.events)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.other.destroy_node()
        self.node.destroy_node()


@pytest.fixture(params=["events", "wait set"])
def rig(rclpy_context, request):
    if request.param == "events" and not st.events_executor_available():
        reason = "this rclpy has no EventsExecutor (rclpy.experimental: Jazzy on)"
        print(reason)
        pytest.skip(reason)
    r = Rig(rclpy_context, events=request.param == "events")
    yield r
    r.close()


def test_the_events_executor_is_used_where_rclpy_has_it(rig):
    served = rig.start()
    try:
        assert served.executor_kind == ("events" if rig.events else "wait set")
        expected = st.EventsExecutor if rig.events else st.SingleThreadedExecutor
        assert type(served._executor).__name__ == getattr(expected, "__name__", "")
    finally:
        served.stop()


def test_stop_ends_the_wait_of_an_idle_thread(rig):
    """No message ever comes: stop() ends the executor's wait itself (the guard, or the
    EventsExecutor's shutdown), and the thread and its node are gone."""
    served = rig.start()
    time.sleep(0.1)   # the thread is in its wait
    served.stop()
    assert not served.thread.is_alive() and served.node is None
    assert rig.failures == []


def test_messages_reach_the_callback_on_its_own_thread_in_order_without_the_executor(rig):
    served = rig.start()
    try:
        assert served.node.get_name() == "_served_numbers"  # hidden
        assert served.node.get_namespace() == "/robot1"
        assert served.subscription.topic_name == "/robot1/numbers"
        assert served.node not in rig.executor.get_nodes()
        assert wait_until(lambda: rig.pub.get_subscription_count() > 0)
        for i in range(20):
            rig.pub.publish(Int32(data=i))
        assert wait_until(lambda: len(rig.got) == 20)
        assert rig.got == list(range(20))
        assert set(rig.threads) == {"cozmo-numbers"}
    finally:
        served.stop()
    assert not served.thread.is_alive() and served.node is None


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


def test_a_failing_spin_is_reported_on_the_thread_which_then_ends(rig):
    served = rig.start()

    class Broken:
        def __getattr__(self, name: str):
            raise RuntimeError("the executor broke")
    executor, served._executor = served._executor, Broken()
    served.wake()
    try:
        assert wait_until(lambda: not served.thread.is_alive())
        assert [str(e) for e in rig.failures] == ["the executor broke"]
    finally:
        served.stop()
        executor.shutdown(timeout_sec=0.0)


def test_a_context_shut_down_from_outside_ends_the_thread_without_a_failure(rig, rclpy_context):
    """The context shut down under the thread (rclpy.shutdown by another part of the
    program, rclpy's own signal handlers): spin_once's ExternalShutdownException went to
    on_failure, and the driver logged "cmd_vel thread failed ... moves to the executor"
    and moved the subscription to a dead context. Now it is the end of the thread."""
    served = rig.start()
    try:
        rclpy.shutdown(context=rclpy_context)
        assert wait_until(lambda: not served.thread.is_alive())
        assert rig.failures == []
    finally:
        served.stop()


def test_unsupported_when_the_node_cannot_be_made_and_nothing_is_left(rig, monkeypatch):
    made = []

    class Recorded(st.Node):
        destroyed = False

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

        def destroy_node(self) -> None:
            Recorded.destroyed = True
            super().destroy_node()

    def no_executor(*args, **kwargs):
        raise RuntimeError("no executor here")
    monkeypatch.setattr(st, "Node", Recorded)
    monkeypatch.setattr(st, "SingleThreadedExecutor", no_executor)
    monkeypatch.setattr(st, "EventsExecutor", no_executor)
    with pytest.raises(Unsupported, match="no executor here"):
        rig.start()
    assert len(made) == 1 and Recorded.destroyed


def test_the_companion_node_holds_nothing_but_the_subscription(rig):
    """Jazzy gives every node a ~/get_type_description service; the companion had one too,
    and a node made and destroyed with it keeps about 100 kB of the process's memory (rclpy
    7.1, Fast DDS): the driver makes its cmd_vel and face companions at each configure."""
    served = rig.start()
    try:
        assert [s.srv_name for s in served.node.services] == []
        assert len(list(served.node.subscriptions)) == 1
        assert not served.node.get_parameter_or("start_type_description_service").value
    finally:
        served.stop()


def test_stop_is_idempotent(rig):
    served = rig.start()
    served.stop()
    served.stop()
    assert not served.thread.is_alive() and served.node is None
    served.wake()  # after stop: nothing to wake, no error
