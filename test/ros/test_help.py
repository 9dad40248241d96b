"""Every executable of the project answers --help and -h without starting anything: it
prints its usage (for the nodes: the ROS arguments and every parameter with its default)
and exits 0 at once, with no robot address reached for and no node in the ROS graph."""

from __future__ import annotations

import os
import subprocess

import pytest

from cozmo_driver.behavior.parameters import BEHAVIOR_PARAMETERS
from cozmo_driver.driver.parameters import PARAMETERS
from cozmo_driver.ros.description_publisher import DESCRIPTION_PARAMETERS
from cozmo_driver.ros.face_node import FACE_PARAMETERS
from processes import project_executable

NODES = {
    "cozmo_driver_node": PARAMETERS,
    "cozmo_face_node": FACE_PARAMETERS,
    "cozmo_behavior_node": BEHAVIOR_PARAMETERS,
    "cozmo_description_publisher": DESCRIPTION_PARAMETERS,
    # the nodes of one process: every parameter of each kind, under a heading of its own
    "cozmo_stack": (*PARAMETERS, *FACE_PARAMETERS, *BEHAVIOR_PARAMETERS, *DESCRIPTION_PARAMETERS),
}
PROGRAMS = ("cozmo-demo", "cozmo-protocol-demo", "cozmo-sim", "cozmo_bringup")


def run_help(name, flag, *extra):
    env = dict(os.environ, COZMO_LOOPBACK_ONLY="1")
    return subprocess.run([project_executable(name), flag, *extra], capture_output=True, text=True,
                          timeout=60, env=env, stdin=subprocess.DEVNULL)


def test_every_console_script_is_covered():
    import re
    from pathlib import Path

    setup = (Path(__file__).resolve().parents[2] / "setup.py").read_text()
    scripts = set(re.findall(r'"([\w-]+) = cozmo_driver', setup))
    assert scripts == set(NODES) | set(PROGRAMS)


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("name", sorted(NODES))
def test_a_node_answers_help_with_its_parameters_and_starts_nothing(name, flag):
    done = run_help(name, flag)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"usage: {name} [-h] [--ros-args ...]")
    assert "-r __ns:=/NAMESPACE" in out and "--params-file FILE" in out and "ROS_DOMAIN_ID" in out
    # Humble ignores ROS_AUTOMATIC_DISCOVERY_RANGE: its switch is told too
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (on Humble\nROS_LOCALHOST_ONLY=1)" in out, out
    for spec in NODES[name]:
        assert f"\n  {spec.name}: {spec.type_name}, default " in out, spec.name
    # nothing started: no log line of a node, no connection attempt
    assert "[INFO]" not in done.stderr and "connecting to" not in out + done.stderr


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_cozmo_stack_answers_help_on_one_node_kind_with_its_parameters(flag):
    """`cozmo_stack --node driver --help` was a usage error (exit 2: unexpected argument
    '--help'); it is the help, with the parameters of the kinds named before it only."""
    done = run_help("cozmo_stack", "--node", "driver", flag)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("usage: cozmo_stack [-h] [--ros-args ...] [--node KIND"), out
    assert "Parameters of --node driver" in out and "Parameters of --node face" not in out, out
    for spec in PARAMETERS:
        assert f"\n  {spec.name}: {spec.type_name}, default " in out, spec.name
    assert "[INFO]" not in done.stderr and "connecting to" not in out + done.stderr
    both = run_help("cozmo_stack", "--node", "face", "--ros-args", "-p", "fps:=10.0", "--", "--node", "behavior",
                    flag)
    assert both.returncode == 0, both.stderr
    assert "Parameters of --node face" in both.stdout and "Parameters of --node behavior" in both.stdout
    assert "Parameters of --node driver" not in both.stdout
    # inside a node's --ros-args it is not the program's: rcl's (the node would start; with
    # a bad parameter here, so that it stops at once with status 2 instead)
    inside = run_help("cozmo_stack", "--node", "face", "--ros-args", "-p", "fps:=-1.0", flag)
    assert inside.returncode == 2 and "usage:" not in inside.stdout, inside.stdout


@pytest.mark.parametrize("name", ["cozmo_description_publisher", "cozmo_stack"])
def test_the_robot_description_example_gives_the_parameter_after_ros_args(name):
    """robot_description's help said `e.g. -p robot_description:="$(xacro cozmo.urdf.xacro)"`:
    a -p with no --ros-args before it is not a ROS argument (the node ignored it and said the
    parameter was empty), and no cozmo.urdf.xacro is where the user runs it. The example is the whole
    command, -p after --ros-args, with the xacro file under cozmo_description, and cozmo_stack's
    section of the node, as the node's error says (where_to_give_the_description)."""
    out = " ".join(run_help(name, "--help").stdout.split())   # (the help wraps its lines)
    assert ('cozmo_description_publisher --ros-args -p robot_description:='
            '"$(xacro .../cozmo_description/urdf/cozmo.urdf.xacro)"') in out, out
    assert "--node description_publisher --ros-args -p robot_description:=" in out, out
    examples = out.split("-p robot_description:=")[:-1]
    assert examples and all(before.endswith("--ros-args ") for before in examples), out


def test_help_after_ros_arguments_is_not_the_programs():
    # `--ros-args ... -h` is not the program's -h: the node would start (with a bad
    # parameter here, so that it stops at once with status 2 instead)
    done = run_help("cozmo_face_node", "--ros-args", "-p", "fps:=-1.0")
    assert done.returncode == 2 and "usage:" not in done.stdout


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_a_program_answers_help(name, flag):
    done = run_help(name, flag)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {name}")
    assert "connecting to" not in done.stdout + done.stderr and "Traceback" not in done.stderr
