"""NameGuard (cozmo_driver/ros/name_guard.py): a node whose fully qualified name is
already in the ROS graph is told so within its first seconds, with what to do; a node
with a name of its own is not; other namespaces and other domains do not count."""

from __future__ import annotations

import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from cozmo_driver.ros.name_guard import NameGuard
from ros_timeouts import DISCOVERY_TIMEOUT

# nodes in two contexts of one ROS domain
pytestmark = [pytest.mark.ros]


def spin_for(executor, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)


@pytest.fixture
def second_context(ros_domain_id):
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    yield context
    context.try_shutdown()


def spin_until(executor, predicate, timeout):
    """Spin until ``predicate()`` holds (True) or ``timeout`` s pass (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        executor.spin_once(timeout_sec=0.05)
    return True


def run_guard(first_context, second_context, first_ns, second_ns, name="guarded_node", same_domain=True):
    """What a NameGuard of the second node told; in one domain, the guard is made once the
    first node is in the second's graph (the guard's logic under test, not how fast two
    participants discover each other: that has taken more than its last check, 2.5 s)."""
    first = Node(name, namespace=first_ns, context=first_context)
    second = Node(name, namespace=second_ns, context=second_context)
    executor = SingleThreadedExecutor(context=second_context)
    executor.add_node(second)
    told = []
    guard = None
    try:
        if same_domain:
            assert spin_until(executor, lambda: (name, first_ns) in second.get_node_names_and_namespaces(),
                              DISCOVERY_TIMEOUT), f"{first_ns}/{name} never appeared in the second's graph"
        guard = NameGuard(second, told.append, checks_s=(0.3, 1.0, 2.5))
        spin_for(executor, 3.0)
        return told, guard
    finally:
        if guard is not None:
            guard.cancel()
        executor.shutdown()
        second.destroy_node()
        first.destroy_node()


def test_a_second_node_of_the_same_name_is_told_what_runs_and_what_to_do(rclpy_context, second_context,
                                                                          ros_domain_id):
    told, guard = run_guard(rclpy_context, second_context, "/guard_a", "/guard_a")
    assert len(told) == 1, told          # told once, not at every check
    assert guard.found
    text = told[0]
    assert "another node named /guard_a/guarded_node" in text
    assert f"ROS domain {ros_domain_id}" in text
    assert "namespace" in text and "ROS_DOMAIN_ID" in text


def test_keeping_a_stack_on_its_machine_is_told_for_humble_too():
    """ROS_AUTOMATIC_DISCOVERY_RANGE alone was told, which Humble ignores (it reads
    ROS_LOCALHOST_ONLY)."""
    from cozmo_driver.ros.name_guard import duplicate_message
    text = duplicate_message("/cozmo_driver", 2)
    assert text.endswith("and ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (on Humble ROS_LOCALHOST_ONLY=1) "
                         "to keep a stack on its machine"), text


def test_the_same_name_in_another_namespace_is_no_duplicate(rclpy_context, second_context):
    told, guard = run_guard(rclpy_context, second_context, "/guard_b", "/guard_c")
    assert told == [] and not guard.found


def test_the_same_name_in_another_domain_is_no_duplicate(rclpy_context, private_rclpy_context):
    # (another domain reserved as the run's is: never another run's or worker's)
    told, guard = run_guard(rclpy_context, private_rclpy_context, "/guard_d", "/guard_d", same_domain=False)
    assert told == [] and not guard.found

