"""HandOver: items put on other threads reach the executor in order, through a guard
condition (real rclpy, no robot)."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

from dependencies import require

rclpy = require("rclpy")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402

from cozmo_driver.ros.handover import HandOver  # noqa: E402

pytestmark = [pytest.mark.ros]


def spin_until(executor, predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)
    return bool(predicate())


def test_items_from_other_threads_are_handled_in_order_on_the_executor(rclpy_context):
    node = rclpy.create_node("handover_test", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    handled: List[int] = []
    threads: List[str] = []

    def handle(item: int) -> None:
        handled.append(item)
        threads.append(threading.current_thread().name)

    handover = HandOver(node, handle)
    try:
        putter = threading.Thread(target=lambda: [handover.put(i) for i in range(100)], name="putter")
        putter.start()
        putter.join()
        handover.extend([100, 101])
        assert handled == []                       # nothing runs before the executor spins
        assert spin_until(executor, lambda: len(handled) == 102)
        assert handled == list(range(102))
        assert set(threads) == {threading.current_thread().name}
        handover.destroy()
        assert list(node.guards) == []
        handover.put(102)                          # kept, but nothing is handed over any more
        executor.spin_once(timeout_sec=0.1)
        assert handled == list(range(102))
        handover.destroy()                         # idempotent
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()


def test_an_item_put_as_the_guard_is_destroyed_is_dropped_quietly(rclpy_context):
    """put() read the guard condition, then triggered it: destroyed in between (the node's
    cleanup, while the I/O thread or a play_audio loader thread put an item), the trigger raised
    InvalidHandle into the putting thread, a traceback in the log at cleanup. The item is kept,
    as after destroy(), and nothing raised. The guard is destroyed right after put() read it."""
    node = rclpy.create_node("handover_destroyed_test", context=rclpy_context)
    handover = HandOver(node, lambda item: None)
    guard = handover._guard

    class DestroyedOnTrigger:
        """The guard put() reads; the executor destroys the real one before it is triggered."""

        def trigger(self) -> None:
            handover._guard = guard
            handover.destroy()
            guard.trigger()

    try:
        handover._guard = DestroyedOnTrigger()
        handover.put(1)
        assert handover._guard is None and list(node.guards) == []
        assert list(handover._items) == [1]
    finally:
        node.destroy_node()
