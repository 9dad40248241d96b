"""cozmo_bringup end to end: real processes (simulator, driver, description publisher),
real DDS on loopback, bounded in time.

A test node (its own rclpy context) checks the topics of a namespaced robot and
composes its transform tree from /tf and /tf_static; two robots in two
namespaces run at once without interfering; the bring-up stops everything on
SIGINT, after --duration, and when the driver exits; and nothing it started
outlives it when it is killed (SIGKILL) or fails after starting the simulator.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from cozmo_driver import bringup, bringup_plan as plan
from cozmo_driver.description import Transform, UrdfModel
from cozmo_driver.sim import world
from processes import alive, free_udp_port, generated_parameter_directories, project_executable
from ros_timeouts import DISCOVERY_TIMEOUT

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: started processes must be up and publishing within this (typically 2-3 s)
STARTUP_TIMEOUT_S = 40.0
#: the bring-up must have stopped everything within this after SIGINT
STOP_TIMEOUT_S = 25.0
#: a child must be gone this long after the bring-up was killed (Linux sends it SIGTERM)
ORPHAN_TIMEOUT_S = 10.0
CAMERA_CHAIN = ["odom", "base_footprint", "base_link", "head_link", "camera_link",
                "camera_optical_frame"]


def _require_executables() -> None:
    for name in ("cozmo_bringup", "cozmo_driver_node", "cozmo_description_publisher", "cozmo-sim"):
        project_executable(name)


class BringupProcess:
    """One cozmo_bringup, its output in a file; cleaned up however the test ends."""

    def __init__(self, log: Path, *args: str) -> None:
        self.log = log
        self._stream = open(log, "wb")
        self.process = subprocess.Popen([str(project_executable("cozmo_bringup")), *args],
                                        stdout=self._stream, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def children(self) -> Dict[str, int]:
        """{entry name: pid} from the 'started ...' lines."""
        return {m.group(1): int(m.group(2)) for m in
                re.finditer(r"started (\S+) \(\S+, pid (\d+)\)", self.output())}

    def wait_for_children(self, names, timeout_s: float = 15.0) -> Dict[str, int]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.children()
            if set(names) <= set(found):
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"not started: {set(names) - set(self.children())}\n{self.output()}")

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=STOP_TIMEOUT_S)

    def cleanup(self) -> None:
        """Never leave a process behind, whatever happened."""
        pids = self.children()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pid in pids.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self._stream.close()


@pytest.fixture
def start_bringup(tmp_path):
    _require_executables()
    started: List[BringupProcess] = []

    def start(*args: str) -> BringupProcess:
        run = BringupProcess(tmp_path / f"bringup_{len(started)}.log", *args)
        started.append(run)
        return run

    yield start
    for run in started:
        run.cleanup()


class Observer:
    """A test node: subscriptions to one robot's topics and to /tf, /tf_static."""

    def __init__(self, context, namespaces) -> None:
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage

        latched = QoSProfile(depth=1, reliability=QoSReliabilityPolicy.RELIABLE,
                             durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
        self.node = Node("bringup_observer", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.odom: Dict[str, list] = {ns: [] for ns in namespaces}
        self.joints: Dict[str, list] = {ns: [] for ns in namespaces}
        self.description: Dict[str, Optional[str]] = {ns: None for ns in namespaces}
        self.tf: Dict[str, object] = {}          # child frame -> latest TransformStamped
        self.tf_history: Dict[str, Dict[tuple, object]] = {}  # child frame -> {stamp: transform}
        self.tf_static: Dict[str, object] = {}
        for ns in namespaces:
            self.node.create_subscription(Odometry, f"/{ns}/odom", self.odom[ns].append, 10)
            self.node.create_subscription(JointState, f"/{ns}/joint_states",
                                          self.joints[ns].append, 100)
            self.node.create_subscription(
                String, f"/{ns}/robot_description",
                lambda msg, ns=ns: self.description.update({ns: msg.data}), latched)
        self.node.create_subscription(TFMessage, "/tf", self._on_tf, QoSProfile(depth=100))
        static = QoSProfile(depth=10, reliability=QoSReliabilityPolicy.RELIABLE,
                            durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(TFMessage, "/tf_static", self._on_tf_static, static)

    def _on_tf(self, msg) -> None:
        for t in msg.transforms:
            self.tf[t.child_frame_id] = t
            self.tf_history.setdefault(t.child_frame_id, {})[_stamp(t)] = t

    def _on_tf_static(self, msg) -> None:
        for t in msg.transforms:
            self.tf_static[t.child_frame_id] = t

    def spin_until(self, condition, timeout_s: float = STARTUP_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.executor.spin_once(timeout_sec=min(0.1, remaining))
        return True

    def spin_for(self, seconds: float) -> None:
        self.spin_until(lambda: False, seconds)

    def lookup(self, child: str):
        return self.tf.get(child) or self.tf_static.get(child)

    def chain(self, frame: str) -> List[str]:
        """Frames from the root of the tree down to ``frame``."""
        frames = [frame]
        while self.lookup(frames[-1]) is not None:
            frames.append(self.lookup(frames[-1]).header.frame_id)
            assert len(frames) < 50, frames
        return list(reversed(frames))

    def compose(self, ancestor: str, frame: str) -> Transform:
        chain = self.chain(frame)
        result = Transform()
        for child in chain[chain.index(ancestor) + 1:]:
            t = self.lookup(child).transform
            result = result * Transform((t.translation.x, t.translation.y, t.translation.z),
                                        (t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w))
        return result

    def close(self) -> None:
        self.executor.remove_node(self.node)
        self.node.destroy_node()
        self.executor.shutdown(timeout_sec=1.0)


@pytest.fixture
def observer(rclpy_context):
    made: List[Observer] = []

    def make(*namespaces: str) -> Observer:
        made.append(Observer(rclpy_context, namespaces))
        return made[-1]

    yield make
    for obs in made:
        obs.close()


def _stamp(msg) -> tuple:
    return (msg.header.stamp.sec, msg.header.stamp.nanosec)


def test_one_namespaced_robot_in_the_simulator(start_bringup, observer):
    port = free_udp_port()
    run = start_bringup("use_sim:=true", f"sim_port:={port}", "namespace:=robot1",
                        "--duration", "90")
    obs = observer("robot1")
    names = run.wait_for_children(["simulator", "driver", "description_publisher"])
    out = run.output()
    assert "cozmo_description_publisher publishes the robot description instead" in out
    assert f"simulated Cozmo on udp://127.0.0.1:{port}" in out

    prefixed = [f"robot1/{frame}" for frame in CAMERA_CHAIN]
    ok = obs.spin_until(lambda: obs.odom["robot1"] and obs.joints["robot1"]
                        and obs.description["robot1"] and prefixed[-1] in obs.tf_static
                        and "robot1/head_link" in obs.tf and "robot1/base_footprint" in obs.tf)
    assert ok, f"missing topics or transforms\n{run.output()}"

    odom = obs.odom["robot1"][-1]
    assert (odom.header.frame_id, odom.child_frame_id) == ("robot1/odom", "robot1/base_footprint")
    assert list(obs.joints["robot1"][-1].name) == ["head_joint", "lift_joint"]
    model = UrdfModel.from_xml(obs.description["robot1"])
    assert model.root == "robot1/base_footprint"

    # the transform chain, from /tf (driver: odom; description: head) and /tf_static
    assert obs.chain("robot1/camera_optical_frame") == prefixed
    assert "robot1/base_footprint" in obs.tf and "robot1/base_footprint" not in obs.tf_static
    assert "robot1/camera_optical_frame" in obs.tf_static
    assert "robot1/lift_plate_link" in obs.tf  # mimic joints follow lift_joint

    # the camera is where the URDF puts it, at the head angle of the matching joint_states
    # (the observer may match the driver's volatile joint_states after the description
    # publisher did: wait until both streams overlap)
    heads = obs.tf_history["robot1/head_link"]

    def common():
        return sorted({_stamp(m) for m in obs.joints["robot1"]} & set(heads))

    assert obs.spin_until(lambda: common(), 10.0), \
        "head transforms carry the stamps of joint_states"
    states = {_stamp(m): m for m in obs.joints["robot1"]}
    common = common()
    obs.tf["robot1/head_link"] = heads[common[-1]]
    head = states[common[-1]].position[0]
    camera = obs.compose("robot1/base_footprint", "robot1/camera_optical_frame")
    expected = model.transform("robot1/base_footprint", "robot1/camera_optical_frame",
                               {"head_joint": head})
    assert camera.translation == pytest.approx(expected.translation, abs=1e-6)
    assert abs(abs(sum(a * b for a, b in zip(camera.rotation, expected.rotation))) - 1) < 1e-6
    x_mm, _, z_mm = world.camera_position(0.0, 0.0, 0.0, head)
    assert camera.translation == pytest.approx((x_mm / 1000, 0.0, z_mm / 1000), abs=1e-6)
    world_camera = obs.compose("robot1/odom", "robot1/camera_optical_frame")
    assert all(abs(v) < 10 for v in world_camera.translation)

    # SIGINT stops everything
    assert run.stop() == 0, run.output()
    assert "all processes stopped" in run.output()
    for name, pid in names.items():
        assert not alive(pid), f"{name} (pid {pid}) still running"


def test_two_robots_in_two_namespaces_do_not_interfere(start_bringup, observer):
    from geometry_msgs.msg import Twist

    ports = free_udp_port(), free_udp_port()
    runs = [start_bringup("use_sim:=true", f"sim_port:={port}", f"namespace:={ns}",
                          "--duration", "90")
            for port, ns in zip(ports, ("robot1", "robot2"))]
    obs = observer("robot1", "robot2")
    pids = [run.wait_for_children(["simulator", "driver", "description_publisher"])
            for run in runs]
    ok = obs.spin_until(lambda: all(obs.odom[ns] and obs.description[ns]
                                    and f"{ns}/camera_optical_frame" in obs.tf_static
                                    and f"{ns}/head_link" in obs.tf
                                    and f"{ns}/base_footprint" in obs.tf
                                    for ns in ("robot1", "robot2")))
    assert ok, "\n".join(run.output() for run in runs)

    # one tf tree, two disjoint robots
    for ns in ("robot1", "robot2"):
        assert obs.chain(f"{ns}/camera_optical_frame") == [f"{ns}/{f}" for f in CAMERA_CHAIN]
        assert UrdfModel.from_xml(obs.description[ns]).root == f"{ns}/base_footprint"
    assert obs.odom["robot2"][-1].header.frame_id == "robot2/odom"

    # drive robot1 only: robot1 moves, robot2 stays where it was
    start = {ns: obs.odom[ns][-1].pose.pose.position.x for ns in ("robot1", "robot2")}
    cmd = obs.node.create_publisher(Twist, "/robot1/cmd_vel", 1)
    assert obs.spin_until(lambda: cmd.get_subscription_count() > 0, DISCOVERY_TIMEOUT), \
        "robot1's driver never subscribed to /robot1/cmd_vel\n" + "\n".join(run.output() for run in runs)

    def moved() -> Dict[str, float]:
        return {ns: obs.odom[ns][-1].pose.pose.position.x - start[ns] for ns in start}

    twist = Twist()
    twist.linear.x = 0.05
    # driven until it has moved 3 cm (at 5 cm/s: 0.6 s), however long a loaded machine takes
    end = time.monotonic() + STARTUP_TIMEOUT_S
    while moved()["robot1"] <= 0.03 and time.monotonic() < end:
        cmd.publish(twist)
        obs.spin_for(0.1)
    cmd.publish(Twist())
    obs.spin_for(0.5)
    assert moved()["robot1"] > 0.03, moved()
    assert abs(moved()["robot2"]) < 0.005, moved()

    for run, names in zip(runs, pids):
        assert run.stop() == 0, run.output()
        assert not any(alive(pid) for pid in names.values())


def test_duration_ends_the_bringup(start_bringup):
    run = start_bringup("use_sim:=true", f"sim_port:={free_udp_port()}", "--duration", "4")
    names = run.wait_for_children(["simulator", "driver", "description_publisher"])
    assert run.process.wait(timeout=4 + STOP_TIMEOUT_S) == 0, run.output()
    assert "4 s are over: stopping" in run.output()
    assert not any(alive(pid) for pid in names.values())


def test_the_bringup_ends_when_the_driver_exits(start_bringup):
    run = start_bringup("use_sim:=true", f"sim_port:={free_udp_port()}", "--duration", "90")
    names = run.wait_for_children(["simulator", "driver", "description_publisher"])
    time.sleep(1.0)
    os.kill(names["driver"], signal.SIGKILL)
    assert run.process.wait(timeout=STOP_TIMEOUT_S) == 1, run.output()
    assert re.search(r"driver \(cozmo_driver_node, pid \d+\) exited with status -9: stopping",
                     run.output())
    assert not any(alive(pid) for pid in names.values())


def test_a_simulator_that_cannot_start_fails_the_bringup(start_bringup):
    """The simulator's port is taken: it exits 2 saying so, and the bring-up stops with its
    status, as ros2 launch exits 1 (it used to exit 0: a script saw success)."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        run = start_bringup("use_sim:=true", f"sim_port:={port}", "--duration", "90")
        assert run.process.wait(timeout=STARTUP_TIMEOUT_S) == 2, run.output()
    assert re.search(r"simulator \(cozmo-sim, pid \d+\) exited with status 2: stopping",
                     run.output()), run.output()
    assert "cannot bind" in run.output()


def _all_gone(pids, timeout_s: float) -> List[int]:
    """The pids still running after ``timeout_s`` (none: all gone)."""
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def test_nothing_outlives_a_killed_bringup(start_bringup):
    # issue #15: a bring-up that dies without stopping its children (SIGKILL, a crash)
    # left the simulator running with parent 1
    run = start_bringup("use_sim:=true", f"sim_port:={free_udp_port()}", "namespace:=orphans",
                        "--duration", "90")
    names = run.wait_for_children(["simulator", "driver", "description_publisher"])
    time.sleep(2.0)  # every child is past its start-up
    assert all(alive(pid) for pid in names.values()), run.output()
    generated = generated_parameter_directories(names.values())
    assert generated, "the driver's command line names no generated parameter file"
    run.process.kill()
    run.process.wait(timeout=5)
    left = _all_gone(names.values(), ORPHAN_TIMEOUT_S)
    for directory in generated:          # the killed bring-up could not remove them
        shutil.rmtree(directory, ignore_errors=True)
    assert not left, (f"still running {ORPHAN_TIMEOUT_S} s after the bring-up was killed: "
                      f"{[name for name, pid in names.items() if pid in left]}\n{run.output()}")


def test_a_driver_that_fails_at_start_stops_the_simulator(start_bringup, tmp_path):
    config = tmp_path / "broken.yaml"
    config.write_text("cozmo_driver:\n  ros__parameters:\n    cmd_vel_timeout: -5.0\n")
    run = start_bringup("use_sim:=true", f"sim_port:={free_udp_port()}", f"config:={config}",
                        "--duration", "90")
    names = run.wait_for_children(["simulator", "driver"])
    assert run.process.wait(timeout=STOP_TIMEOUT_S) == 2, run.output()
    assert "cmd_vel_timeout" in run.output()
    assert not any(alive(pid) for pid in names.values()), run.output()


def test_a_bringup_that_cannot_start_a_process_stops_what_it_started(tmp_path):
    # the simulator starts, then the driver cannot be executed: run() raises, and the
    # simulator is stopped on the way out (cozmo_bringup exits 1)
    _require_executables()
    broken = tmp_path / "cozmo_driver_node"
    broken.write_text("#!/bin/sh\n")            # not executable
    entries = plan.make_plan(plan.resolve_arguments({"use_sim": "true",
                                                     "sim_port": str(free_udp_port())}),
                             description=lambda prefix: "<robot name='cozmo'/>")

    def locate(package, executable):
        if executable == "cozmo_driver_node":
            return broken
        return plan.locate_executable(package, executable)

    said: List[str] = []
    runner = bringup.Bringup(entries, stop_timeout=5.0, locate=locate, say=said.append)
    with pytest.raises(PermissionError):
        runner.run(duration=60)
    (simulator,) = [child for child in runner.children if child.entry.name == "simulator"]
    assert simulator.process.returncode is not None and not alive(simulator.process.pid), said
    assert runner.parameter_directory is None   # removed
    assert "all processes stopped" in said


def test_the_behavior_engine_comes_up_with_its_robot(start_bringup, rclpy_context):
    """enable_behavior:=true under a namespace: cozmo_behavior_node finds its driver there
    and starts behaviors on the simulated robot; SIGINT stops it with the rest."""
    from cozmo_interfaces.msg import BehaviorStatus
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy

    project_executable("cozmo_behavior_node")
    run = start_bringup("use_sim:=true", f"sim_port:={free_udp_port()}", "namespace:=robot3",
                        "enable_behavior:=true", "--duration", "90")
    node = Node("behavior_observer", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    statuses: List[BehaviorStatus] = []
    node.create_subscription(BehaviorStatus, "/robot3/behavior/status", statuses.append, QoSProfile(
        depth=10, reliability=QoSReliabilityPolicy.RELIABLE,
        durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
    try:
        names = run.wait_for_children(["simulator", "driver", "behavior"])
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not (statuses and statuses[-1].behaviors_started >= 1) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        assert statuses and statuses[-1].enabled and statuses[-1].behaviors_started >= 1, \
            f"no behavior started\n{run.output()}"
        assert run.stop() == 0, run.output()
        for name, pid in names.items():
            assert not alive(pid), f"{name} (pid {pid}) still running"
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
