"""How cozmo-demo words its refusal to run beside another stack of its names
(:meth:`cozmo_driver.ros.demo_node.Demonstration._check`), on a real DemoNode.

The demo may see the other stack in three ways, in an order that depends on timing: the
other driver's link report on /diagnostics naming its robot, two publishers of
link_status in the graph, or one of its own nodes exiting because that node's name guard
found the other stack's (the driver, or another node such as the description publisher:
``demo._Demo._processes_alive``, with real child processes). The first is the one that
tells the person which robot the other stack drives, so the other two wait up to
``NAME_THE_OTHER_S`` for it, and the demo takes its own driver as connected only when
no second driver is on the graph, so that it refuses having commanded nothing."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from dependencies import require

rclpy = require("rclpy")

from cozmo_driver.ros.demo_node import DemoAbort, DemoNode, DemoOptions, Demonstration  # noqa: E402
from cozmo_driver import demo as demo_module  # noqa: E402
from cozmo_driver.bringup import Child  # noqa: E402
from cozmo_driver.bringup_plan import ProcessEntry  # noqa: E402
from cozmo_driver.ros.name_guard import DUPLICATE_MARK, duplicate_message  # noqa: E402

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


# ---------------------------------------------------------------- demo.py: its own processes

def exited_child(name: str, node_name: str, required: bool) -> Child:
    """A real process of the bring-up that has exited with status 2."""
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"])
    proc.wait(10)
    entry = ProcessEntry(name, "cozmo_driver", f"cozmo_{name}", True, "always",
                         node_name=node_name, required=required)
    return Child(entry, [sys.executable], proc)


def demo_with(tmp_path, *children: Child):
    run = demo_module._Demo(argparse.Namespace(artifacts=str(tmp_path)))
    run.bringup = SimpleNamespace(children=list(children))
    said = []
    run.say = said.append
    return run, said


def test_a_node_refused_by_its_name_guard_stops_the_run_as_the_drivers_refusal_does(tmp_path):
    """Not only the driver (required): the description publisher refusing to run beside the
    other stack's is the same conflict, not a node to go on without."""
    child = exited_child("description_publisher", "description_publisher", required=False)
    (tmp_path / "bringup.log").write_text(
        "[ERROR] [1795494128.397777522] [description_publisher]: refusing to run: "
        + duplicate_message("/description_publisher", 2) + "\n")
    run, said = demo_with(tmp_path, child)
    dead = run._processes_alive()
    assert dead is not None and DUPLICATE_MARK in dead, dead
    assert dead.startswith("cozmo_description_publisher exited with status 2, saying "
                           "\"description_publisher: refusing to run: another node named "
                           "/description_publisher already run(s) in ROS domain "), dead
    assert run.process_failures == [] and said == []


def test_a_node_that_exited_otherwise_is_gone_on_without_once_its_words_had_time(tmp_path,
                                                                                 monkeypatch):
    """What a process said may reach bringup.log just after its exit: the demo reads the log
    for EXIT_SAID_WAIT_S before it goes on without that node (and a refusal written
    meanwhile still stops the run)."""
    monkeypatch.setattr(demo_module, "EXIT_SAID_WAIT_S", 0.3)
    child = exited_child("face", "face", required=False)
    log = tmp_path / "bringup.log"
    log.write_text("[INFO] [1.0] [face]: frames at 30 fps\n")
    run, said = demo_with(tmp_path, child)
    assert run._processes_alive() is None
    assert said == [] and run.process_failures == []          # not yet: its words may come
    time.sleep(0.35)
    assert run._processes_alive() is None
    assert run.process_failures == [f"face: {child.label} exited with status 2 during the run"]
    assert len(said) == 1 and said[0].endswith("going on without it"), said
    assert run._processes_alive() is None and len(said) == 1   # said once

    late = exited_child("face", "face", required=False)
    log.write_text("")
    run, said = demo_with(tmp_path, late)
    assert run._processes_alive() is None
    log.write_text("[ERROR] [2.0] [face]: refusing to run: "
                   + duplicate_message("/face", 2) + "\n")     # written after the exit
    dead = run._processes_alive()
    assert dead is not None and DUPLICATE_MARK in dead and said == [], (dead, said)


def test_a_required_node_that_exited_stops_the_run_at_once(tmp_path):
    child = exited_child("driver", "cozmo_driver", required=True)
    (tmp_path / "bringup.log").write_text("")
    run, said = demo_with(tmp_path, child)
    assert run._processes_alive() == (f"cozmo_driver exited with status 2 (its output is in "
                                      f"{tmp_path / 'bringup.log'})")


# ---------------------------------------------------------------- connection and the graph

@pytest.fixture
def connecting(rclpy_context):
    """connecting(n): a Demonstration on a real DemoNode, spun, with ``n`` other nodes each
    publishing link_status (drivers, as the graph shows them); its own driver CONNECTED on
    its robot, odom come."""
    from cozmo_interfaces.msg import LinkStatus
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor

    from cozmo_driver.ros.demo_steps import SpinningCaller

    made = []

    def make(drivers: int):
        node = DemoNode(context=rclpy_context)
        on_graph = time.monotonic()
        others = [rclpy.create_node(f"driver{i}", context=rclpy_context) for i in range(drivers)]
        for other in others:
            other.create_publisher(LinkStatus, "link_status", 1)
        lines: list = []
        run = Demonstration(DemoOptions(robot_address=OURS, connect_timeout_s=20.0), lines.append)
        executor = SingleThreadedExecutor(context=rclpy_context)
        executor.add_node(node)
        run.node, run.calls = node, SpinningCaller(executor, check=run._check)
        run._on_graph_since = on_graph  # as run() does when it makes the node
        made.append((executor, others, node))
        deadline = time.monotonic() + 10
        while node.count_publishers("link_status") < drivers:   # the graph shows them all
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with node.lock:
            node.link = LinkStatus(state=LinkStatus.CONNECTED, rtt_s=0.005)
            node.odom = Odometry()
            node.driver_robots[OURS] = time.monotonic()
        return run, lines

    yield make
    for executor, others, node in made:
        executor.shutdown(2.0)
        for other in others:
            other.destroy_node()
        node.destroy_node()


def test_its_own_driver_is_not_taken_as_connected_while_a_second_driver_is_on_the_graph(
        connecting):
    """Its own driver CONNECTED, on its robot, odom coming; but two link_status publishers
    in the graph and the other's robot not named yet: the demo does not say "driver
    connected" (and so commands nothing); it refuses with status 2 once NAME_THE_OTHER_S
    has passed."""
    run, lines = connecting(2)
    run.NAME_THE_OTHER_S = 1.0
    started = time.monotonic()
    with pytest.raises(DemoAbort) as caught:
        run._wait_connected()
    assert time.monotonic() - started >= 0.9
    assert "2 nodes publish /link_status" in str(caught.value), caught.value
    assert caught.value.code == 2 and not run.connected_once
    assert not any("driver connected to the robot" in line for line in lines), lines


def test_its_own_driver_alone_on_the_graph_is_taken_as_connected(connecting):
    """... but not before the demo's node has been on the graph for GRAPH_SETTLE_S: a stack
    that ran before it is found only at that stack's next discovery announcement (the fresh
    CI clone of 2026-11-25 saw the other stack's report 3.2 s after the demo started, when
    it had taken its own driver as connected at 2.6 s and sent a goal to both)."""
    run, lines = connecting(1)
    run._wait_connected()
    assert time.monotonic() - run._on_graph_since >= run.GRAPH_SETTLE_S
    assert run.GRAPH_SETTLE_S >= 3.0   # Fast DDS announces a participant every 3 s
    assert run.connected_once
    assert any("driver connected to the robot: link_status CONNECTED" in line
               for line in lines), lines


def bring_up_failure(run) -> str:
    """Why ``run``'s wait for its driver to connect gave up, within 1 s: a bring-up failure
    (status 2), the demo never connected."""
    run.options.connect_timeout_s = run.options.startup_timeout_s = 1.0
    with pytest.raises(DemoAbort) as caught:
        run._wait_connected()
    assert caught.value.code == 2 and not run.connected_once
    return str(caught.value)


def test_a_driver_that_is_not_active_is_said_as_such_not_a_silent_robot(connecting):
    """Its driver up but inactive (its configure failed, say its port taken: it publishes
    link_status DISCONNECTED, driver_active false, as it does unconfigured): the demo says the
    driver is not active and where to look, not that the robot did not answer nor to check
    the Wi-Fi (the robot was never asked)."""
    from cozmo_interfaces.msg import LinkStatus

    run, lines = connecting(0)
    with run.node.lock:
        run.node.link = LinkStatus(state=LinkStatus.DISCONNECTED, driver_active=False, rtt_s=float("nan"))
    said = bring_up_failure(run)
    assert "Wi-Fi" not in said and "no answer from the robot" not in said, said
    assert said.startswith("/cozmo_driver is not active (link_status DISCONNECTED, driver_active false) 1 s "
                           "after it came up: its configure failed, or it was deactivated"), said
    assert "ros2 lifecycle get /cozmo_driver" in said, said
    # an active driver whose robot does not answer: the robot's silence, as before
    with run.node.lock:
        run.node.link = LinkStatus(state=LinkStatus.CONNECTING, driver_active=True, rtt_s=float("nan"))
    said = bring_up_failure(run)
    assert said.startswith(f"no answer from the robot at {OURS} within 1 s"), said


def test_a_driver_connected_whose_robot_is_never_named_is_said_as_such(connecting):
    """Its driver CONNECTED, odom coming, but no link report on /diagnostics names the
    demo's robot: the robot did answer, so the demo does not ask whether this machine is on
    the robot's Wi-Fi; it says what did not match."""
    run, lines = connecting(1)
    with run.node.lock:
        run.node.driver_robots.clear()
    said = bring_up_failure(run)
    assert "Wi-Fi" not in said and "no answer from the robot" not in said, said
    assert said.startswith(f"/cozmo_driver reports link_status CONNECTED, but no link report "
                           f"of it on /diagnostics (cozmo_driver: link) named the robot at "
                           f"{OURS} within 1 s"), said


def test_an_artefact_that_cannot_be_written_is_a_failure_of_the_run_not_a_crash(tmp_path):
    """The pictures are written at the end, after the robot and every process stopped: a file
    that cannot be written (a full disk; here a directory that became a file) ended the demo
    with a traceback and no report. It is a failure of the run, named with its file, and the
    report goes on to its end (exit status 1)."""
    import numpy as np
    from cozmo_driver.ros.demo_node import DemoResult
    blocked = tmp_path / "artefacts"
    run, said = demo_with(blocked)
    blocked.write_text("not a directory")  # every file under it fails to open
    result = DemoResult(odometry=[(0.0, 0.0, 0.0, 0.0), (1.0, 0.1, 0.0, 0.0)],
                        final_odom=(0.1, 0.0, 0.0), camera=np.zeros((240, 320), np.uint8),
                        camera_encoding="mono8")
    run.bringup = None
    assert run._report(result, simulated=False) == 1
    text = "\n".join(said)
    for name in ("camera.png", "trajectory.png"):
        assert f"artefacts: cannot write {blocked / name}: " in text, text
    assert "camera: no image arrived" not in text, text
