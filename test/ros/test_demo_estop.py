"""cozmo-demo and the driver's emergency stop (:class:`cozmo_driver.ros.demo_node.Demonstration`
on a real DemoNode): once ``emergency_stop/engaged`` said true during the run, the demo
moves the robot no more, even after the stop is released.

The robot here is a stand-in for the driver: the demo's ``cmd_vel`` moves the pose the demo
reads (its odom) unless the emergency stop is engaged, as the driver does; the stop itself
comes over ROS, from a latched publisher of ``emergency_stop/engaged`` as the driver's."""

from __future__ import annotations

import math
import time

import pytest

from dependencies import require

rclpy = require("rclpy")

from cozmo_driver.ros import qos  # noqa: E402
from cozmo_driver.ros.demo_node import DemoNode, DemoOptions, Demonstration  # noqa: E402

pytestmark = pytest.mark.ros


@pytest.fixture
def square(rclpy_context):
    """A connected Demonstration spun on a real DemoNode, a stand-in robot on its drive(),
    and the driver's latched emergency_stop/engaged publisher (matched)."""
    from cozmo_interfaces.msg import LinkStatus
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Bool

    from cozmo_driver.ros.demo_steps import SpinningCaller

    node = DemoNode(context=rclpy_context)
    driver = rclpy.create_node("cozmo_driver", context=rclpy_context)
    estop = driver.create_publisher(Bool, "emergency_stop/engaged", qos.QOS_LATCHED)
    lines: list = []
    run = Demonstration(DemoOptions(robot_address="127.0.0.1:5551"), lines.append)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    run.node, run.calls = node, SpinningCaller(executor, check=run._check)
    run.connected_once = True
    with node.lock:
        node.link = LinkStatus(state=LinkStatus.CONNECTED, rtt_s=0.005)
        node.odom = (0.0, 0.0, 0.0)
    robot = {"engaged": False, "commands": [], "head_lift": [], "moved_after_stop": 0.0}

    def drive(v: float, w: float) -> None:
        robot["commands"].append((robot["engaged"], v, w))
        if robot["engaged"]:
            return                      # the driver refuses motion while it is engaged
        with node.lock:
            x, y, yaw = node.odom
            dt = 0.05
            node.odom = (x + v * math.cos(yaw) * dt, y + v * math.sin(yaw) * dt, yaw + w * dt)

    node.drive = drive
    node.move_head = lambda angle: robot["head_lift"].append(("head", angle))
    node.move_lift = lambda height: robot["head_lift"].append(("lift", height))

    def set_estop(engaged: bool) -> None:
        robot["engaged"] = engaged
        estop.publish(Bool(data=engaged))

    deadline = time.monotonic() + 5     # matched (not asserted: a demo may not subscribe)
    while estop.get_subscription_count() < 1 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    try:
        yield run, robot, set_estop, lines
    finally:
        executor.shutdown(2.0)
        driver.destroy_node()
        node.destroy_node()


def test_an_emergency_stop_released_during_the_square_does_not_drive_again(square):
    """Engaged on side 1 and released 0.5 s later, well within the side's move budget: the
    demo does not drive on; the square fails saying why, and the end moves nothing."""
    run, robot, set_estop, lines = square
    calls = {"n": 0}
    drive = run.node.drive

    def drive_and_press(v: float, w: float) -> None:
        calls["n"] += 1
        if calls["n"] == 10:
            set_estop(True)
        elif calls["n"] == 20:
            set_estop(False)        # released: the robot would move again
        drive(v, w)

    run.node.drive = drive_and_press
    run._square()
    run._finish()
    released = [cmd for cmd in robot["commands"][20:] if cmd[1] or cmd[2]]
    assert not released, f"the demo drove again after the release: {released[:3]}"
    assert run.result.failures == [
        "square: side 1 of 4: the emergency stop was engaged (emergency_stop/engaged): the demo "
        "moves the robot no more"], run.result.failures
    assert robot["head_lift"] == [], "the demo moved the head or the lift after the stop"
    assert any("head and lift: skipped" in line for line in lines), lines


def test_an_emergency_stop_engaged_before_the_square_fails_it_at_once(square):
    """Engaged before the square (the latched value as the demo found it, or during an earlier
    step): the square fails at its first side, without waiting for its move budget."""
    run, robot, set_estop, lines = square
    set_estop(True)
    started = time.monotonic()
    run.sleep(0.3)                  # the sample arrives while the demo spins
    run._square()
    assert time.monotonic() - started < 2.0
    assert run.result.failures == [
        "square: side 1 of 4: the emergency stop was engaged (emergency_stop/engaged): the demo "
        "moves the robot no more"], run.result.failures
    assert not [cmd for cmd in robot["commands"] if cmd[1] or cmd[2]]


ESTOP = "the emergency stop was engaged (emergency_stop/engaged): the demo moves the robot no more"


def test_an_emergency_stop_engaged_after_the_last_corner_skips_the_final_head_and_lift_move(square):
    """Engaged in the 0.4 s after corner 4, where the square no longer looks: the end sent head
    -5 deg and lift 32 mm all the same and failed with "head: at 10.0 deg after head/angle -5
    deg", not naming the stop. The latch is looked at in the end too: no move, a failure
    that says why."""
    run, robot, set_estop, lines = square
    move_lift = run.node.move_lift

    def lift_then_press(height: float) -> None:
        move_lift(height)
        if len(robot["head_lift"]) == 8:        # corner 4's head and lift
            set_estop(True)

    run.node.move_lift = lift_then_press
    run._square()
    assert len(robot["head_lift"]) == 8 and not run.result.failures, run.result.failures
    set_estop(False)                # released before the end: still no motion
    run._finish()
    assert len(robot["head_lift"]) == 8, f"the end moved the head or the lift: {robot['head_lift'][8:]}"
    assert run.result.failures == [f"head and lift: skipped: {ESTOP}"], run.result.failures
    assert any("head and lift: skipped: the emergency stop was engaged" in line for line in lines), lines


def test_an_emergency_stop_engaged_while_the_head_and_lift_move_at_the_end_is_said_not_a_miss(square):
    """Engaged while the final head and lift move: the check said they were not where they were
    sent, not why. The check is skipped, saying the stop was engaged."""
    run, robot, set_estop, lines = square
    move_lift = run.node.move_lift

    def lift_then_press(height: float) -> None:
        move_lift(height)
        set_estop(True)

    run.node.move_lift = lift_then_press
    run._finish()
    assert run.result.failures == [f"head and lift: not checked: {ESTOP}"], run.result.failures


def test_an_emergency_stop_engaged_when_the_demo_began_skips_the_animation(square):
    """Engaged when the demo started and released while it waited for the driver: nod_yes
    moved the head all the same. The animation is skipped, saying why (the square then fails
    at its first side, as before)."""
    run, robot, set_estop, lines = square
    set_estop(True)
    run.sleep(0.3)                  # the sample arrives while the demo spins
    set_estop(False)
    run.sleep(0.3)
    run.media.animation()
    assert run.result.animation_how == ("'nod_yes': skipped: the emergency stop was engaged "
                                        "(emergency_stop/engaged)"), run.result.animation_how
    assert not run.result.animation_played and not run.result.failures, run.result.failures
