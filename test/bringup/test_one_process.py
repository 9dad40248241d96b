"""The whole stack in one process (``one_process:=true``, ``cozmo_stack``), end to end:
real processes, real DDS on loopback, the simulated Cozmo in this process (its ground
truth readable here), bounded in time.

The bring-up starts one child, ``cozmo_stack``, which runs the driver, the description
publisher, the face and the behavior nodes under a namespace: odom streams, the robot
description is published, the face reaches the robot (DisplayImage frames counted by the
simulator), the behavior engine starts behaviors; SIGINT or SIGTERM stop it with exit 0,
the motors stopped before anything else of the teardown reaches the robot, and no
process left. ``cozmo_stack`` started by hand stops the same way (on SIGHUP too), and refuses a bad
parameter of any of its nodes with exit 2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from dependencies import require

rclpy = require("rclpy")

from cozmo_driver.sim import SimServer  # noqa: E402
from processes import alive, project_executable  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: the stack must be up and streaming within this (typically 3-6 s; a loaded machine)
STARTUP_TIMEOUT_S = 60.0
#: everything must have stopped within this after the signal (a clean-up bound)
STOP_TIMEOUT_S = 25.0
#: what a driver sends when it tears its robot down: none of it before the motor stop
TEARDOWN = {"CubeLights", "CubeId", "ObjectConnect", "SetBackpackLights"}


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(host="127.0.0.1", port=0, seed=7) as server:
        yield server


class Program:
    """One process (a bring-up or cozmo_stack), its output in a file; killed with its
    process group however the test ends."""

    def __init__(self, command: List[str], log: Path) -> None:
        self.log = log
        self._stream = open(log, "wb")
        self.process = subprocess.Popen(command, stdout=self._stream, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        self.pids = {self.process.pid}

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def note_tree(self) -> None:
        """Add the program's descendants (as /proc shows them now) to :attr:`pids`."""
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid in self.pids:
                self.pids.add(int(entry))

    def cleanup(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pid in self.pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self._stream.close()


class Watcher:
    """A test node: a robot's odom, robot description and behavior status, and cmd_vel."""

    def __init__(self, context, namespace: str) -> None:
        from cozmo_interfaces.msg import BehaviorStatus
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage

        latched = QoSProfile(depth=1, reliability=QoSReliabilityPolicy.RELIABLE,
                             durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
        self.node = Node("one_process_watcher", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.odom: list = []
        self.description: list = []
        self.status: list = []
        prefix = f"/{namespace}" if namespace else ""
        self.node.create_subscription(Odometry, f"{prefix}/odom", self.odom.append, 10)
        self.tf: list = []
        self.node.create_subscription(TFMessage, "/tf", self.tf.append, QoSProfile(depth=100))
        self.node.create_subscription(String, f"{prefix}/robot_description",
                                      self.description.append, latched)
        self.node.create_subscription(BehaviorStatus, f"{prefix}/behavior/status",
                                      self.status.append, QoSProfile(
                                          depth=10, reliability=QoSReliabilityPolicy.RELIABLE,
                                          durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
        self.cmd_vel = self.node.create_publisher(Twist, f"{prefix}/cmd_vel", 10)
        self._twist = Twist()
        self._twist.linear.x = 0.05

    def spin_until(self, condition, timeout_s: float, drive: bool = False) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                return False
            if drive:
                self.cmd_vel.publish(self._twist)
            self.executor.spin_once(timeout_sec=0.05)
        return True

    def close(self) -> None:
        self.executor.remove_node(self.node)
        self.node.destroy_node()
        self.executor.shutdown(timeout_sec=1.0)


def _children(tf_messages: list) -> set:
    return {t.child_frame_id for msg in tf_messages for t in msg.transforms}


def _treads_turn(sim: SimServer) -> bool:
    left, right = sim.wheel_speeds()
    return abs(left) > 1.0 and abs(right) > 1.0


def _check_stop(program: Program, sim: SimServer, sig: int, since: float) -> None:
    """Exit 0 within the bound; StopAllMotors reached the robot before any teardown
    message; no process of the tree left; no error in the output."""
    try:
        code = program.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {STOP_TIMEOUT_S} s after {signal.Signals(sig).name}:\n"
                    f"{program.output()}")
    assert code == 0, program.output()
    after = [msg.NAME for when, msg in sim.commands() if when >= since]
    assert "StopAllMotors" in after, f"no StopAllMotors after the signal: {after}"
    first_stop = after.index("StopAllMotors")
    assert not TEARDOWN & set(after[:first_stop]), \
        f"teardown reached the robot before the motor stop: {after[:first_stop + 1]}"
    assert sim.wait_until(lambda s: s.wheel_speeds() == (0.0, 0.0), 5.0), sim.wheel_speeds()
    deadline = time.monotonic() + 10.0
    while any(alive(pid) for pid in program.pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in program.pids if alive(pid)], "processes left"
    out = program.output()
    assert "Traceback" not in out and "[ERROR]" not in out, out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_bringup_runs_the_stack_in_one_process(sig, sim, rclpy_context, tmp_path):
    port = sim.address[1]
    command = [str(project_executable("cozmo_bringup")), "use_sim:=true", "start_sim:=false",
               f"sim_port:={port}", "namespace:=solo", "enable_face:=true",
               "enable_behavior:=true", "one_process:=true", "--duration", "120"]
    project_executable("cozmo_stack")
    program = Program(command, tmp_path / "bringup.log")
    watcher = Watcher(rclpy_context, "solo")
    try:
        shown = sim.display_count()
        assert watcher.spin_until(lambda: watcher.odom and watcher.description, STARTUP_TIMEOUT_S), \
            f"no odom or robot_description from the stack:\n{program.output()}"
        out = program.output()
        started = [line for line in out.splitlines() if " started " in line]
        assert len(started) == 1 and "started stack (cozmo_stack, pid" in started[0], out
        assert "driver, description_publisher, face, behavior in one process" in started[0]
        odom = watcher.odom[-1]
        assert (odom.header.frame_id, odom.child_frame_id) == ("solo/odom", "solo/base_footprint")
        # the head and lift on /tf: the description publisher takes the joint positions from
        # the driver directly, and subscribes to no joint_states (nor does anyone else here)
        assert watcher.spin_until(lambda: "solo/head_link" in _children(watcher.tf), 20.0), \
            f"no head transform on /tf:\n{program.output()}"
        assert watcher.spin_until(
            lambda: watcher.node.count_subscribers("/solo/joint_states") == 0, 10.0), \
            watcher.node.get_subscriptions_info_by_topic("/solo/joint_states")
        # the face reaches the robot's display; the behavior engine runs
        assert watcher.spin_until(lambda: sim.display_count() > shown + 10, STARTUP_TIMEOUT_S), \
            f"no face frames at the robot:\n{program.output()}"
        assert watcher.spin_until(lambda: watcher.status and watcher.status[-1].behaviors_started >= 1,
                                  STARTUP_TIMEOUT_S), f"no behavior started:\n{program.output()}"
        # the user drives (the engine pauses); then the signal
        assert watcher.spin_until(lambda: _treads_turn(sim), 20.0, drive=True), \
            f"the treads did not turn:\n{program.output()}"
        program.note_tree()
        assert len(program.pids) == 2, f"more than the bring-up and its stack: {program.pids}"
        t0 = time.monotonic()
        program.process.send_signal(sig)
        _check_stop(program, sim, sig, t0)
        assert "all processes stopped" in program.output()
    finally:
        watcher.close()
        program.cleanup()


def _stack_command(sim: SimServer, namespace: str, other: str) -> List[str]:
    """``cozmo_stack`` by hand: the driver of ``sim`` and the node kind ``other``, both
    under ``namespace``."""
    return [str(project_executable("cozmo_stack")),
            "--node", "driver", "--ros-args", "-r", f"__ns:=/{namespace}",
            "-p", "robot_ip:=127.0.0.1", "-p", f"robot_port:={sim.address[1]}", "--",
            "--node", other, "--ros-args", "-r", f"__ns:=/{namespace}"]


def test_a_stop_while_a_behavior_drives_is_told_as_a_stop(sim, rclpy_context, tmp_path):
    """Ctrl-C while the behavior engine's goal drives the robot: the behavior node cancels
    its goals before the driver stops. When the driver went first, it aborted them, and
    the behavior node logged the goal's end as a failure ("failed: drive_straight: the
    driver is shutting down") and, at its next status, "/link_status has no publisher any
    more: the driver stopped without saying so (it crashed?)". Nor does the stop end with
    the engine saying that the driver is inactive."""
    program = Program(_stack_command(sim, "busy", "behavior"), tmp_path / "stack.log")
    watcher = Watcher(rclpy_context, "busy")
    try:
        # a behavior of the engine's drives the treads (no one else commands them here)
        assert watcher.spin_until(lambda: watcher.status and watcher.status[-1].behavior
                                  and _treads_turn(sim), STARTUP_TIMEOUT_S), program.output()
        t0 = time.monotonic()
        program.process.send_signal(signal.SIGINT)
        _check_stop(program, sim, signal.SIGINT, t0)
        warnings = [line for line in program.output().splitlines()
                    if "[WARN]" in line and ("shutting down" in line or "crashed" in line)]
        assert not warnings, program.output()
        # the driver's last link_status (inactive) reached the engine after its shutdown, and
        # every stop ended with "the driver is inactive (lifecycle): nothing runs until ..."
        assert "the driver is inactive" not in program.output(), program.output()
    finally:
        watcher.close()
        program.cleanup()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_cozmo_stack_by_hand_stops_on_sigterm_and_sighup(sig, sim, rclpy_context, tmp_path):
    # SIGHUP: the terminal that runs it closed; the stack used to die of it, motors running
    program = Program(_stack_command(sim, "byhand", "face"), tmp_path / "stack.log")
    watcher = Watcher(rclpy_context, "byhand")
    try:
        shown = sim.display_count()
        assert watcher.spin_until(lambda: watcher.odom and sim.display_count() > shown + 10,
                                  STARTUP_TIMEOUT_S), program.output()
        assert watcher.spin_until(lambda: _treads_turn(sim), 20.0, drive=True), program.output()
        t0 = time.monotonic()
        program.process.send_signal(sig)
        _check_stop(program, sim, sig, t0)
    finally:
        watcher.close()
        program.cleanup()


def test_a_bad_parameter_of_any_node_is_refused(tmp_path):
    command = [str(project_executable("cozmo_stack")),
               "--node", "driver", "--ros-args", "-p", "robot_ip:=127.0.0.1", "--",
               "--node", "face", "--ros-args", "-p", "fps:=-1.0"]
    env = dict(os.environ, COZMO_LOOPBACK_ONLY="1")
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cozmo_stack: cozmo_face_node:" in done.stderr and "Traceback" not in done.stderr
    # a string for a double: what to write instead, as each node's own executable says
    command[-1] = "fps:=fast"
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("cozmo_stack: cozmo_face_node: Wrong parameter type: fps is a double parameter, e.g. "
            "-p fps:=30.0 (a whole number is taken too); got 'fast', a string" in done.stderr), done.stderr


def test_a_parameter_given_to_every_node_is_not_said_ignored_by_those_another_node_takes_it_for():
    """``cozmo_stack --ros-args -p robot_port:=...``, the help's "before the first --node go to
    every node": the face node said "parameter 'robot_port' is not a parameter of cozmo_face:
    ignored" (and the driver of the face's fps), of parameters the stack's other node took.
    Those are no longer warned of; a misspelt one still is, by every node, and so is one that
    a node's own section sets. The behavior node's bad value ends the stack once the driver
    and the face are made (exit 2), with nothing started."""
    command = [str(project_executable("cozmo_stack")),
               "--ros-args", "-p", "robot_ip:=127.0.0.1", "-p", "robot_port:=9", "-p", "fps:=10.0",
               "-p", "max_wheel_sped:=0.1", "--",
               "--node", "driver", "--node", "face", "--ros-args", "-p", "robot_ip:=127.0.0.1", "--",
               "--node", "behavior", "--ros-args", "-p", "tick_rate:=0.0"]
    env = dict(os.environ, COZMO_LOOPBACK_ONLY="1")
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "cozmo_stack: cozmo_behavior_node:" in done.stderr, out
    assert "'robot_port' is not a parameter of cozmo_face" not in out, out
    assert "'fps' is not a parameter of cozmo_driver" not in out, out
    assert "'max_wheel_sped' is not a parameter of cozmo_driver: ignored (did you mean 'max_wheel_speed'?)" in out
    assert "'max_wheel_sped' is not a parameter of cozmo_face" in out, out
    assert "'robot_ip' is not a parameter of cozmo_face" in out, out  # the face's own section


#: cozmo_stack with the face and the behavior node, whose METHOD (a callback of its 10 Hz
#: engine timer, or the timer's callback itself) raises at every call
_FAILING_CALLBACK = """
import sys
from cozmo_driver.ros import behavior_node, stack_node

def failing(self):
    raise RuntimeError("the status went wrong")

behavior_node.BehaviorNode.METHOD = failing
sys.argv[0] = "cozmo_stack"
sys.exit(stack_node.main(["--ros-args", "-r", "__ns:=/failing", "--", "--node", "face", "--node", "behavior"]))
"""


def _run_failing_stack(method: str) -> subprocess.CompletedProcess:
    import sys

    env = dict(os.environ, COZMO_LOOPBACK_ONLY="1")
    return subprocess.run([sys.executable, "-c", _FAILING_CALLBACK.replace("METHOD", method)],
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)


def test_an_exception_in_one_nodes_callback_says_which_node_before_the_stop():
    """An uncaught exception in a callback stops every node of the stack and exits 1, as
    docs/bringup.md says; the stack said nothing of it until the traceback at the very end,
    after every node's stop lines (the behavior engine "interrupted: the engine is shutting
    down"), and the traceback named no node. The node is now named in an error line before
    the stop."""
    done = _run_failing_stack("_publish_status")
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "RuntimeError: the status went wrong" in done.stderr, out
    said = "RuntimeError uncaught in a callback of /failing/cozmo_behavior: the status went wrong; " \
           "stopping every node of this process"
    assert said in done.stderr, out
    assert done.stderr.index(said) < done.stderr.index("Traceback"), out


def test_a_callback_that_raises_at_every_call_does_not_break_the_stop_it_caused():
    """The stop after a callback's exception spins the executor (the behavior node's last
    requests let out, the driver's goals ended), and a callback that raises at every call
    raised there again: the stop was cut short (the driver's close left to its destroy_node)
    and the exception printed twice ("During handling of the above exception, another
    exception occurred"). The stop now spins no more after a callback raised in it, and
    the process ends with the one traceback, status 1."""
    done = _run_failing_stack("_on_tick")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert done.stderr.count("Traceback (most recent call last)") == 1, out
    assert "During handling of the above exception" not in done.stderr, out
    assert done.stderr.rstrip().endswith("RuntimeError: the status went wrong"), out


def test_a_parameter_file_rcl_cannot_read_is_refused_as_by_each_nodes_own_executable(tmp_path):
    """In the stack, rcl reads a node's --params-file when the node is made (not at rclpy's
    init, as in a node's own executable): a file it cannot parse is still one line and exit
    2, not a traceback and 1."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("cozmo_driver:\n  ros__parameters:\n    robot_ip: [127.0.0.1\n")
    command = [str(project_executable("cozmo_stack")),
               "--node", "driver", "--ros-args", "-p", "robot_ip:=127.0.0.1", "--params-file", str(broken)]
    env = dict(os.environ, COZMO_LOOPBACK_ONLY="1")
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cozmo_stack: cozmo_driver_node: cannot start:" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("where", ["node", "common"])
def test_an_unknown_ros_argument_is_refused_as_by_each_nodes_own_executable(where):
    """--param-file (a misspelt --params-file) among a node's ROS arguments (rcl reads them
    when the node is made) or the process's (read at rclpy's init): UnknownROSArgsError
    was a traceback and status 1; now one line and 2, as cozmo_driver_node says it."""
    command = [str(project_executable("cozmo_stack"))]
    if where == "node":
        command += ["--node", "driver", "--ros-args", "-p", "robot_ip:=127.0.0.1", "--param-file", "cozmo.yaml"]
    else:
        command += ["--ros-args", "--param-file", "cozmo.yaml"]
    env = dict(os.environ, COZMO_LOOPBACK_ONLY="1")
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if "cannot start:" in line]
    assert len(said) == 1, done.stderr
    assert "unknown ROS arguments: --param-file cozmo.yaml (did you mean --params-file?" in said[0], said
    assert said[0].startswith("cozmo_stack: cozmo_driver_node: cannot start:" if where == "node"
                              else "cozmo_stack: cannot start:"), said
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("argv, error", [
    (["--node", "camera"], "unknown node kind 'camera'"),
    (["--node", "face", "--node", "face"], "given twice"),
    (["robot_ip:=1.2.3.4"], "unexpected argument"),
    # rcl takes the logging arguments (and the enclave) from the process's arguments only: in
    # a node's section they were ignored without a word (the driver stayed at INFO)
    (["--node", "driver", "--ros-args", "-p", "robot_ip:=127.0.0.1", "--log-level", "debug"],
     "--log-level in the --ros-args of --node driver is not applied"),
    (["--node", "face", "--ros-args", "--disable-rosout-logs", "--", "--node", "driver"],
     "--disable-rosout-logs in the --ros-args of --node face is not applied"),
    (["--node", "behavior", "--ros-args", "-e", "/cozmo"], "-e in the --ros-args of --node behavior"),
    # a rename for every node: each then found the others under its name, and the name guard
    # refused the stack with "another node ... Stop the other one"
    (["--ros-args", "-r", "__node:=robot", "--", "--node", "driver"], "-r __node:=robot before the first --node"),
    (["--ros-args", "--remap", "__name:=robot"], "--remap __name:=robot before the first --node"),
])
def test_a_wrong_command_line_is_a_usage_error(argv, error):
    done = subprocess.run([str(project_executable("cozmo_stack")), *argv], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and error in done.stderr, done.stderr
    assert done.stderr.startswith("usage: cozmo_stack"), done.stderr


def test_logging_arguments_go_before_the_first_node_and_names_into_a_nodes_section():
    from cozmo_driver.ros.stack_node import parse_stack_arguments

    common, specs = parse_stack_arguments([
        "--ros-args", "--log-level", "cozmo_driver:=debug", "--disable-stdout-logs", "-r", "__ns:=/solo",
        "-r", "cozmo_face:__node:=face", "--",
        "--node", "driver", "--ros-args", "-r", "__node:=wheels", "-p", "log_level:=1", "-p", "x:=--log-level"])
    assert common == ["--ros-args", "--log-level", "cozmo_driver:=debug", "--disable-stdout-logs", "-r",
                      "__ns:=/solo", "-r", "cozmo_face:__node:=face"]
    assert [(spec.kind, spec.ros_args) for spec in specs] == [
        ("driver", ["--ros-args", "-r", "__node:=wheels", "-p", "log_level:=1", "-p", "x:=--log-level"])]


@pytest.mark.parametrize("flag", ["-e", "--enclave"])
def test_an_enclave_in_a_nodes_section_gets_a_hint_of_its_own(flag):
    """-e in a node's section was refused with the hint of a node's log level, unrelated to it."""
    from cozmo_driver.ros.stack_node import StackArgumentError, parse_stack_arguments

    with pytest.raises(StackArgumentError) as refused:
        parse_stack_arguments(["--node", "driver", "--ros-args", flag, "/cozmo"])
    text = str(refused.value)
    assert "--log-level" not in text, text
    assert f"the process has one enclave: cozmo_stack --ros-args {flag} /cozmo -- --node driver ..." in text, text


@pytest.mark.parametrize("argv, logger", [
    (["--node", "face", "--ros-args", "--log-level", "warn", "-r", "__ns:=/r1"], "r1.cozmo_face"),
    (["--ros-args", "-r", "__ns:=/fleet/r2", "--", "--node", "driver", "--ros-args", "-r", "__node:=wheels",
      "--log-level", "warn"], "fleet.r2.wheels"),
    (["--ros-args", "-r", "cozmo_face:__node:=face", "-r", "cozmo_driver:__ns:=/x", "--",
      "--node", "face", "--ros-args", "--log-level", "warn"], "face"),
    (["--node", "behavior", "--ros-args", "--log-level", "warn"], "cozmo_behavior"),
])
def test_the_hint_of_a_log_level_in_a_nodes_section_names_that_nodes_logger(argv, logger):
    """The hint said --log-level cozmo_face:=debug whatever the node's namespace or name: in
    /r1 the node's logger is r1.cozmo_face, and the level the hint gave applied to nothing."""
    from cozmo_driver.ros.stack_node import StackArgumentError, parse_stack_arguments

    with pytest.raises(StackArgumentError) as refused:
        parse_stack_arguments(argv)
    assert f"one node's level: --log-level {logger}:=debug" in str(refused.value), str(refused.value)


def test_the_help_says_where_the_logging_arguments_and_a_rename_go():
    from cozmo_driver.ros.stack_node import stack_help

    text = " ".join(stack_help().split())
    assert "only before the first --node" in text and "--log-level cozmo_driver:=debug" in text, text
    assert "-r __node:=NAME goes in a node's own section" in text, text
