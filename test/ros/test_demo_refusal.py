"""How cozmo-demo words its refusal to run beside another stack of its names
(:meth:`cozmo_driver.ros.demo_node.Demonstration._check`), on a real DemoNode.

The demo may see the other stack in three ways, in an order that depends on timing: the
other driver's link report on /diagnostics naming its robot, two publishers of
link_status in the graph, or its own driver exiting because that driver's name guard
found the other one. The first is the one that tells the person which robot the other
stack drives, so the other two wait up to ``NAME_THE_OTHER_S`` for it."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("rclpy")

from cozmo_driver.ros.demo_node import DemoAbort, DemoNode, DemoOptions, Demonstration  # noqa: E402
from cozmo_driver.ros.name_guard import duplicate_message  # noqa: E402

pytestmark = pytest.mark.ros

OURS = "127.0.0.1:5551"
THEIRS = "127.0.0.1:6000"


def refusal() -> str:
    """What demo.py says when the stack's driver exited after its name guard refused."""
    return ("cozmo_driver_node exited with status 2, saying \"cozmo_driver: refusing to run: "
            + duplicate_message("/cozmo_driver", 2) + "\" (its output is in bringup.log)")


@pytest.fixture
def demo(rclpy_context):
    node = DemoNode(context=rclpy_context)
    lines = []
    run = Demonstration(DemoOptions(robot_address=OURS), lines.append,
                        processes_alive=refusal)
    run.node = node
    try:
        yield run
    finally:
        node.destroy_node()


def test_a_driver_refused_by_its_name_guard_waits_for_the_other_drivers_robot(demo):
    demo._check()    # the driver exited, but the other one's robot is not known yet: no abort
    with demo.node.lock:
        demo.node.driver_robots[THEIRS] = time.monotonic()   # its link report came
    with pytest.raises(DemoAbort) as caught:
        demo._check()
    assert str(caught.value).startswith(
        "another stack runs with this one's names in ROS domain"), caught.value
    assert f"a driver named /cozmo_driver connected to the robot at {THEIRS}; this demo's " \
           f"is at {OURS}" in str(caught.value)
    assert caught.value.code == 2


def test_without_the_other_drivers_robot_the_refusal_itself_is_said(demo):
    demo.NAME_THE_OTHER_S = 0.3
    demo._check()
    time.sleep(0.35)
    with pytest.raises(DemoAbort) as caught:
        demo._check()
    assert str(caught.value) == refusal()
    assert caught.value.code == 2
