"""The two front-ends of the bring-up plan, cozmo_bringup and cozmo.launch.py, give each
node its parameters the one way the plan states (bringup_plan.parameter_files), and
refuse what the plan refuses.

Parameters are checked where a node reads them: an rclpy node of its own context gets
the ``--ros-args`` each front-end builds for the entry (cozmo_bringup: Bringup.resolve;
the launch file: its launch_ros Node, whose parameters launch_ros normalises and
evaluates in a LaunchContext and whose command line is expanded as Node.execute expands
it), and every value must arrive with its type, as rcl parsed it. The regression of
issue #15: ``namespace:=robot1 use_sim:=true`` copied the config file's section, with
``animation_dirs: []``, into a parameter dict that launch_ros could not type.

launch, launch_ros and ros2launch are not on PyPI: the tests that need them skip in the
wheel venv with the reason printed, and run in the kit environment (./dev test-kit),
where their absence is a failure (test/ros_tools.py).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Dict, List

import pytest

from cozmo_driver import bringup, bringup_plan as plan
from processes import alive, free_udp_port, generated_parameter_directories
from ros_tools import need_installed_package, need_module, need_ros2
from test_bringup_plan import TYPED_GROUP as PLAN_TYPED_GROUP

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILE = ROOT / "launch" / "cozmo.launch.py"
FRONT_ENDS = ("cozmo_bringup", "cozmo.launch.py")


def load_launch_file():
    """launch/cozmo.launch.py as a module, where launch_ros is installed."""
    # launch_ros first: from the repository root, `import launch` would find the launch/
    # directory as a namespace package where the real launch is not installed
    need_module("launch_ros")
    need_module("launch")
    spec = importlib.util.spec_from_file_location("cozmo_launch_under_test", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bringup_command(entry: plan.ProcessEntry, directories: List[str]) -> List[str]:
    """The command line cozmo_bringup starts for ``entry``."""
    runner = bringup.Bringup([entry], locate=lambda package, exe: Path("/opt/bin", exe),
                             say=lambda text: None)
    ((_, command),) = runner.resolve()
    if runner.parameter_directory:
        directories.append(runner.parameter_directory)
    return command


def launch_command(entry: plan.ProcessEntry, directories: List[str],
                   configurations: Dict[str, str] = None) -> List[str]:
    """The command line ``ros2 launch`` starts for ``entry``: the launch file's action for
    it, substituted in a LaunchContext as launch_ros's Node.execute substitutes it."""
    module = load_launch_file()
    from launch import LaunchContext
    from launch_ros.actions import Node

    context = LaunchContext()
    context.launch_configurations.update(configurations or {})
    directory = module._parameter_directory()
    directories.append(directory)
    action = module.entry_action(entry, context, directory)
    assert isinstance(action, Node)
    return node_command(action, context)


def node_command(action, context) -> List[str]:
    """The command line of launch_ros Node ``action`` in ``context``."""
    from launch.utilities import perform_substitutions

    # Node.execute's first step (launch_ros normalises and evaluates the parameters here),
    # then its ros_specific_arguments, which the command line refers to
    action._perform_substitutions(context)
    name = action.node_name.rsplit("/", 1)[-1]
    specific = {"name": f"__node:={name}"}
    if action.expanded_node_namespace:
        specific["ns"] = f"__ns:={action.expanded_node_namespace}"
    context.extend_locals({"ros_specific_arguments": specific})
    return [perform_substitutions(context, part) for part in action.cmd]


@pytest.fixture(params=FRONT_ENDS)
def front_end(request):
    """``command(entry, **configurations)``: the command line of the front-end."""
    directories: List[str] = []

    def command(entry: plan.ProcessEntry, **configurations: str) -> List[str]:
        if request.param == "cozmo_bringup":
            assert not configurations
            return bringup_command(entry, directories)
        return launch_command(entry, directories, configurations)

    command.name = request.param
    yield command
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)


def ros_arguments(command: List[str]) -> List[str]:
    return command[command.index("--ros-args"):]


#: every kind of parameter value, and those YAML or launch_ros would retype if written
#: carelessly (test_bringup_plan's group, without its nested one: given apart below)
TYPED_GROUP = {name: value for name, value in PLAN_TYPED_GROUP.items() if name != "nested"}


def received(node, expected: Dict[str, object]) -> Dict[str, tuple]:
    """{name: (type, value)} of ``node``'s parameters, each declared with the type of its
    expected value (an override of another type is an error)."""
    from rclpy.parameter import Parameter

    result = {}
    for name, value in expected.items():
        if isinstance(value, list) and not value:
            kind = Parameter.Type.STRING_ARRAY   # the driver's animation_dirs
        else:
            kind = Parameter.Type.from_parameter_value(value)
        parameter = node.declare_parameter(name, kind)
        result[name] = (parameter.type_, parameter.value)
    return result


def test_every_type_reaches_a_namespaced_node(front_end, rclpy_context, tmp_path):
    import rclpy
    from rclpy.parameter import Parameter

    # a user's file whose `probe:` key does not reach /fleet/robot1/probe, and a `/**` one
    # that does; then the plan's group, which comes last and wins
    config = tmp_path / "mine.yaml"
    config.write_text("probe:\n  ros__parameters:\n    port: 1\n"
                      "/**:\n  ros__parameters:\n    port: 2\n    from_file: 7\n")
    entry = plan.ProcessEntry(
        name="probe", package=plan.PACKAGE, executable="cozmo_driver_node", enabled=True,
        condition="always", node_name="probe", namespace="fleet/robot1",
        parameters=(plan.ParamFile(str(config)), TYPED_GROUP, {"nested": {"inner": 3}}))
    node = rclpy.create_node("probe", context=rclpy_context,
                             cli_args=ros_arguments(front_end(entry)))
    try:
        assert node.get_fully_qualified_name() == "/fleet/robot1/probe"
        got = received(node, {**TYPED_GROUP, "from_file": 7, "nested.inner": 3})
    finally:
        node.destroy_node()
    expected = {name: (Parameter.Type.from_parameter_value(value), value)
                for name, value in TYPED_GROUP.items() if value != []}
    expected.update({"from_file": (Parameter.Type.INTEGER, 7),
                     "nested.inner": (Parameter.Type.INTEGER, 3)})
    # rcl reads `[]` of any parameter file as "not set": the node's declared type and
    # default apply (the driver declares animation_dirs a string array, default [])
    expected["empty_list"] = (Parameter.Type.NOT_SET, None)
    assert got == expected


def _driver_node(context, cli_args):
    from cozmo_driver.ros.driver_node import CozmoDriverNode
    return CozmoDriverNode(context=context, cli_args=cli_args)


def _driver_parameters(context, cli_args) -> Dict[str, tuple]:
    from cozmo_driver.driver.parameters import PARAMETERS
    from cozmo_driver.ros.driver_node import CozmoDriverNode

    node = CozmoDriverNode(context=context, cli_args=cli_args)
    try:
        return {spec.name: (node.get_parameter(spec.name).type_,
                            node.get_parameter(spec.name).value) for spec in PARAMETERS}
    finally:
        node.destroy_node()


def test_a_namespaced_simulated_driver_gets_the_config_file_with_its_types(front_end,
                                                                          rclpy_context):
    # issue #15: namespace:=robot1 use_sim:=true did not start under ros2 launch
    entries = {entry.name: entry for entry in plan.make_plan(
        plan.resolve_arguments({"namespace": "robot1", "use_sim": "true", "sim_port": "5612"}),
        description=lambda prefix: "<robot name='cozmo'/>")}
    driver = entries["driver"]
    got = _driver_parameters(rclpy_context, ros_arguments(front_end(driver)))
    # the reference: an un-namespaced driver given the package's file directly, which its
    # `cozmo_driver:` key reaches
    reference = _driver_parameters(rclpy_context, [
        "--ros-args", "--params-file", str(plan.default_config_path())])
    from rclpy.parameter import Parameter
    reference.update({"robot_ip": (Parameter.Type.STRING, "127.0.0.1"),
                      "robot_port": (Parameter.Type.INTEGER, 5612),
                      "frame_prefix": (Parameter.Type.STRING, "robot1/")})
    assert got == reference
    assert got["animation_dirs"] == (Parameter.Type.STRING_ARRAY, [])
    assert got["cmd_vel_timeout"] == (Parameter.Type.DOUBLE, 0.5)


def test_a_namespaced_face_node_gets_its_section(front_end, rclpy_context):
    from cozmo_driver.ros.face_node import FaceNode

    entries = {entry.name: entry for entry in plan.make_plan(
        plan.resolve_arguments({"namespace": "robot1", "enable_face": "true"}),
        description=lambda prefix: "<robot name='cozmo'/>")}
    node = FaceNode(context=rclpy_context, cli_args=ros_arguments(front_end(entries["face"])))
    try:
        assert node.get_fully_qualified_name() == "/robot1/cozmo_face"
        assert node.get_parameter("expression").value == "neutral"
        assert node.get_parameter("fps").value == 30.0
    finally:
        node.destroy_node()


def test_a_pushed_namespace_is_in_the_launch_files_node_key(rclpy_context):
    # a parent launch file's PushRosNamespace('fleet') puts the node at /fleet/robot1/...:
    # the plan's file must name that node
    import rclpy

    entry = plan.ProcessEntry(name="probe", package=plan.PACKAGE, executable="cozmo_driver_node",
                              enabled=True, condition="always", node_name="probe",
                              namespace="robot1", parameters=({"port": 5},))
    directories: List[str] = []
    try:
        command = launch_command(entry, directories, {"ros_namespace": "/fleet"})
        node = rclpy.create_node("probe", context=rclpy_context,
                                 cli_args=ros_arguments(command))
        try:
            assert node.get_fully_qualified_name() == "/fleet/robot1/probe"
            assert node.declare_parameter("port", 0).value == 5
        finally:
            node.destroy_node()
    finally:
        for directory in directories:
            shutil.rmtree(directory, ignore_errors=True)


def test_a_namespace_pushed_by_a_parent_launch_file_prefixes_the_frames_and_keys_the_config(
        rclpy_context, tmp_path):
    """Two robots a fleet launch file puts in namespaces with PushRosNamespace (the usual way)
    had no frame prefix: both drivers published odom -> base_footprint on /tf, and a tf
    consumer saw the robot jump between the two poses. Their config sections were ignored
    too. The pushed namespace now counts as namespace:= does."""
    module = load_launch_file()
    from launch import LaunchContext
    from launch_ros.actions import Node

    config = tmp_path / "fleet.yaml"
    config.write_text("cozmo_driver:\n  ros__parameters:\n    max_wheel_speed: 0.1\n"
                      "    cmd_vel_timeout: 0.3\n")
    context = LaunchContext()
    context.launch_configurations.update(plan.argument_defaults())
    context.launch_configurations.update({"use_sim": "true", "config": str(config),
                                          "ros_namespace": "/robotA"})
    driver = next(action for action in module.launch_setup(context)
                  if isinstance(action, Node) and action.node_executable == "cozmo_driver_node")
    node = _driver_node(rclpy_context, ros_arguments(node_command(driver, context)))
    try:
        assert node.get_fully_qualified_name() == "/robotA/cozmo_driver"
        assert node.get_parameter("frame_prefix").value == "robotA/"
        assert node.get_parameter("max_wheel_speed").value == 0.1
        assert node.get_parameter("cmd_vel_timeout").value == 0.3
    finally:
        node.destroy_node()


def test_one_process_takes_a_parents_set_remap_and_set_parameter(rclpy_context):
    """one_process:=true under a parent's SetRemap(cmd_vel -> nav_cmd_vel) and
    SetParameter(use_sim_time): the nodes of the one process kept /cmd_vel and use_sim_time
    false (ExecuteProcess ignores both), so a Nav2 set-up stopped reaching the robot when
    one_process was switched on. Each node of the stack gets them, as each Node does."""
    module = load_launch_file()
    from launch import LaunchContext
    from launch.utilities import perform_substitutions

    context = LaunchContext()
    context.launch_configurations.update({"ros_remaps": [("cmd_vel", "nav_cmd_vel")],
                                          "global_params": [("use_sim_time", True)]})
    stack = next(entry for entry in plan.make_plan(
        plan.resolve_arguments({"use_sim": "true", "one_process": "true"}),
        description=lambda prefix: "<robot name='cozmo'/>") if entry.members)
    directory = module._parameter_directory()
    try:
        action = module.entry_action(stack, context, directory)
        cmd = [perform_substitutions(context, part) for part in action.cmd]
        groups = " ".join(cmd).split("--node ")[1:]
        assert len(groups) == len(stack.members)
        for group in groups:
            assert "-r cmd_vel:=nav_cmd_vel" in group, group
            files = [part for part in group.split() if part.endswith(".yaml")]
            name = next(part for part in group.split() if part.startswith("__node:="))[8:]
            import rclpy
            node = rclpy.create_node(name, context=rclpy_context, cli_args=["--ros-args"] + [
                arg for path in files for arg in ("--params-file", path)])
            try:
                assert node.get_parameter("use_sim_time").value is True, group
            finally:
                node.destroy_node()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_every_process_of_the_launch_file_ends_with_the_launch():
    from cozmo_driver.lifeline import PARENT_PID_ENV
    module = load_launch_file()
    from launch import LaunchContext
    from launch.utilities import perform_substitutions

    context = LaunchContext()
    entries = plan.make_plan(plan.resolve_arguments({"use_sim": "true"}),
                             description=lambda prefix: "<robot name='cozmo'/>")
    directory = module._parameter_directory()
    try:
        for entry in entries:
            action = module.entry_action(entry, context, directory)
            env = {perform_substitutions(context, name): perform_substitutions(context, value)
                   for name, value in action.additional_env}
            assert env == plan.child_environment(), entry.name
            assert PARENT_PID_ENV in env
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("configurations, theirs", [
    ({}, {"robot_state_publisher": "", "rviz2": ""}),
    # a user's own launch prefix still reaches them, after the lifeline, filtered as launch
    # filters it for the others
    ({"launch-prefix": "xterm -e"}, {"robot_state_publisher": "xterm -e", "rviz2": "xterm -e"}),
    ({"launch-prefix": "xterm -e", "launch-prefix-filter": "rv"}, {"robot_state_publisher": "", "rviz2": "xterm -e"}),
])
def test_the_programs_not_ours_are_started_through_the_lifeline(configurations, theirs):
    """robot_state_publisher and RViz neither read COZMO_PARENT_PID nor get a parent-death
    signal from launch: a ``ros2 launch`` killed with SIGTERM or SIGKILL left them running.
    They are started through ``python -m cozmo_driver.lifeline`` (the process keeps their
    label); the project's own programs keep launch's own prefix handling."""
    import shlex
    import sys

    module = load_launch_file()
    from launch import LaunchContext
    from launch.utilities import perform_substitutions

    context = LaunchContext()
    context.launch_configurations.update(configurations)
    entries = plan.make_plan(plan.resolve_arguments({"use_sim": "true", "rviz": "true"}),
                             description=lambda prefix: "<robot name='cozmo'/>")
    lifeline = [sys.executable, "-m", "cozmo_driver.lifeline"]
    directory = module._parameter_directory()
    seen = set()
    try:
        for entry in entries:
            if not entry.enabled:
                continue
            action = module.entry_action(entry, context, directory)
            description = action.process_description
            prefix = shlex.split(perform_substitutions(context, description.prefix))
            if entry.package == plan.PACKAGE:
                assert prefix == shlex.split(configurations.get("launch-prefix", "")), entry.name
                continue
            seen.add(entry.executable)
            assert prefix == lifeline + shlex.split(theirs[entry.executable]), entry.name
            assert perform_substitutions(context, description.name) == entry.executable
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert seen == set(theirs)


def test_the_launch_files_parameter_directory_clears_those_of_killed_launches():
    """ros2 launch ends by SIGTERM (Jazzy's has no handler of it) or SIGKILL without running
    its atexit clean-up: the next launch removes the directories of launches that are gone."""
    import subprocess
    import sys
    import tempfile

    module = load_launch_file()
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    stale = Path(tempfile.gettempdir(), f"cozmo_launch_{gone.pid}_test_stl")
    stale.mkdir()
    (stale / "driver_1.yaml").write_text("x: 1\n")
    directory = None
    try:
        directory = module._parameter_directory()
        assert Path(directory).name.startswith(f"cozmo_launch_{os.getpid()}_")
        assert not stale.exists()
    finally:
        shutil.rmtree(stale, ignore_errors=True)
        if directory:
            shutil.rmtree(directory, ignore_errors=True)


# ------------------------------------------------------------------ launch arguments


class LaunchRun:
    """What one in-process run of ros2 launch's code path gave."""

    def __init__(self, code: int, args, messages: List[str]) -> None:
        self.code = code
        self.args = args            # the plan's arguments as the launch file resolved them
        self.messages = messages    # what launch logged

    @property
    def output(self) -> str:
        return "\n".join(self.messages)


@pytest.fixture
def launch_a_file(monkeypatch):
    """``run(path, *arguments)``: ros2 launch's own code path (ros2launch's
    launch_a_launch_file) in this process, with the plan making no process: a
    :class:`LaunchRun` (``args`` None: the launch file never resolved its arguments)."""
    import logging

    need_module("ros2launch")
    load_launch_file()
    from ros2launch.api import launch_a_launch_file
    make_plan = plan.make_plan

    def run(path, *arguments) -> LaunchRun:
        seen = []
        messages: List[str] = []

        def no_processes(args, description=None, warn=None):
            seen.append(args)
            make_plan(args, description, warn)  # its checks and warnings, nothing started
            return []

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                messages.append(record.getMessage())

        # launch's loggers do not propagate; its own screen handler writes to the stdout
        # of its first use, which pytest's capture does not see
        # (launch.user: the launch file's own messages, as LogInfo's)
        handler = Collect()
        loggers = [logging.getLogger(name) for name in ("launch", "launch.user")]
        for logger in loggers:
            logger.addHandler(handler)
        monkeypatch.setattr(plan, "make_plan", no_processes)
        try:
            code = launch_a_launch_file(launch_file_path=str(path),
                                        launch_file_arguments=list(arguments),
                                        noninteractive=True)
        finally:
            monkeypatch.undo()
            for logger in loggers:
                logger.removeHandler(handler)
        return LaunchRun(code, seen[0] if seen else None, messages)

    return run


def test_ros2_launch_takes_the_plans_arguments(launch_a_file):
    run = launch_a_file(LAUNCH_FILE, "use_sim:=true", "namespace:=robot1")
    assert run.code == 0, run.output
    assert run.args.use_sim and run.args.namespace == "robot1"


@pytest.mark.parametrize("given, suggestion", [("use_simm:=true", "use_sim"),
                                                ("namspace:=robot1", "namespace"),
                                                ("enable_fac:=true", "enable_face")])
def test_ros2_launch_refuses_a_misspelt_argument(launch_a_file, given, suggestion):
    run = launch_a_file(LAUNCH_FILE, given, "use_sim:=true")
    assert run.code != 0 and run.args is None, run.output
    # the plan's message, as cozmo_bringup prints it
    with pytest.raises(plan.PlanError) as expected:
        plan.check_argument_names([given.split(":=")[0]])
    assert str(expected.value) in run.output
    assert f"did you mean {suggestion!r}?" in run.output


def test_ros2_launch_refuses_a_value_outside_the_choices(launch_a_file):
    run = launch_a_file(LAUNCH_FILE, "enable_face:=maybe")
    assert run.code != 0 and run.args is None, run.output
    assert "enable_face" in run.output and "maybe" in run.output


@pytest.mark.parametrize("arguments", [["sim_port:=5551", "namespace:=robot1"],
                                       ["start_sim:=true"]])
def test_ros2_launch_refuses_a_simulator_argument_without_use_sim(launch_a_file, arguments):
    # sim_port:=5551, its default, without use_sim:=true started the driver for the robot
    run = launch_a_file(LAUNCH_FILE, *arguments)
    assert run.code != 0 and run.args is None, run.output
    assert "only for the simulator, and use_sim is false" in run.output


def test_ros2_launch_warns_of_a_config_section_that_reaches_no_node(launch_a_file, tmp_path):
    config = tmp_path / "mine.yaml"
    config.write_text("cozmo_drivr:\n  ros__parameters:\n    max_wheel_speed: 0.05\n")
    run = launch_a_file(LAUNCH_FILE, f"config:={config}")
    assert run.code == 0, run.output
    (warning,) = plan.unreached_config_sections(run.args)
    assert warning in run.output and "did you mean '/cozmo_driver'?" in warning


def test_ros2_launch_warns_of_a_base_frame_the_description_has_not(launch_a_file, tmp_path):
    config = tmp_path / "mine.yaml"
    config.write_text("cozmo_driver:\n  ros__parameters:\n    base_frame: my_base\n")
    run = launch_a_file(LAUNCH_FILE, f"config:={config}", "namespace:=robot1")
    assert run.code == 0, run.output
    assert (f"config:={config}: the driver's base_frame 'my_base' (tf frame 'robot1/my_base', frame_prefix "
            "'robot1/') is not a frame of the robot description (its root: robot1/base_footprint)") \
        in run.output, run.output


def test_ros2_launch_refuses_robot_ip_sim_and_warns_of_it_with_use_sim(launch_a_file):
    # robot_ip:=sim started everything, then the driver failed to resolve 'sim' (exit 2);
    # with use_sim:=true it was ignored in silence
    run = launch_a_file(LAUNCH_FILE, "robot_ip:=sim")
    assert run.code != 0 and run.args is None, run.output
    assert "robot_ip:='sim': 'sim' is no robot's address: to drive the simulator give use_sim:=true" \
        in run.output, run.output
    run = launch_a_file(LAUNCH_FILE, "robot_ip:=sim", "use_sim:=true")
    assert run.code == 0, run.output
    assert ("robot_ip:=sim ignored with use_sim:=true: the driver drives the simulator the bring-up starts "
            "on 127.0.0.1:5551, the simulator's own address") in run.output, run.output


def test_ros2_launch_keeps_its_own_launch_prefix(launch_a_file):
    # what `ros2 launch --launch-prefix env ...` appends to the command line
    run = launch_a_file(LAUNCH_FILE, "launch-prefix:=env", "use_sim:=true")
    assert run.code == 0, run.output


PARENT_LAUNCH_FILE = """
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, GroupAction, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("fleet_name", default_value="fleet"),
        DeclareLaunchArgument("simulated", default_value="true"),
        GroupAction([IncludeLaunchDescription(
            PythonLaunchDescriptionSource({path!r}),
            launch_arguments={{"namespace": LaunchConfiguration("fleet_name"),
                              "use_sim": LaunchConfiguration("simulated")}}.items())]),
    ])
"""


#: a parent that passes no launch_arguments (this file's arguments reach the included one
#: through the launch configurations), or passes on its own ``use_sim``
NAV_LAUNCH_FILE = """
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("use_nav", default_value="false"),
        DeclareLaunchArgument("use_sim", default_value="false"),
        IncludeLaunchDescription(PythonLaunchDescriptionSource({path!r}){passed}),
    ])
"""


@pytest.mark.parametrize("arguments", [["fleet_name:=robots", "simulated:=true"],
                                       ["fleet_name:=robots"], []])
def test_an_including_launch_files_own_arguments_are_not_refused(launch_a_file, tmp_path,
                                                                  arguments):
    parent = tmp_path / "fleet.launch.py"
    parent.write_text(PARENT_LAUNCH_FILE.format(path=str(LAUNCH_FILE)))
    run = launch_a_file(parent, *arguments)
    assert run.code == 0, run.output
    assert run.args.namespace == ("robots" if arguments else "fleet") and run.args.use_sim


@pytest.mark.parametrize("passed", ["", ', launch_arguments={"use_sim": LaunchConfiguration("use_sim")}.items()'])
def test_an_including_launch_files_own_arguments_are_not_refused_whatever_it_passes(
        launch_a_file, tmp_path, passed):
    # the launch configurations the included file saw first were the command line's, and it
    # took the command line for its own: "unknown argument 'use_nav'"
    parent = tmp_path / "nav.launch.py"
    parent.write_text(NAV_LAUNCH_FILE.format(path=str(LAUNCH_FILE), passed=passed))
    run = launch_a_file(parent, "use_nav:=true", "use_sim:=true")
    assert run.code == 0, run.output
    assert run.args.use_sim


# ------------------------------------------------------------------ ros2 launch, end to end


def _describe_process(pid: int) -> str:
    """A process's command line and state, for a failure message."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(") ", 1)[1].split()[0]
        return f"{command} (state {state})"
    except OSError as exc:
        return f"({exc})"


@pytest.mark.slow
def test_a_namespaced_simulated_launch_runs_and_nothing_outlives_its_kill(rclpy_context):
    """``ros2 launch cozmo_driver cozmo.launch.py namespace:=... use_sim:=true`` (issue #15:
    it did not start) streams odometry; SIGKILL of ros2 launch (no clean-up of its own)
    leaves no process of it running a few seconds later."""
    need_ros2()
    need_installed_package()
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from ros_tools import RosLaunch, _session_pids, wait_for

    node = rclpy.create_node("killed_launch_observer", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    odom: list = []
    node.create_subscription(Odometry, "/killed/odom", odom.append, 10)
    try:
        with RosLaunch("use_sim:=true", f"sim_port:={free_udp_port()}",
                       "namespace:=killed") as launch:
            deadline = time.monotonic() + 40.0
            while not odom and launch.running() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.1)
            assert odom, f"no odometry; {launch.describe()}"
            assert odom[-1].header.frame_id == "killed/odom"
            children = [pid for pid in _session_pids(launch.process.pid)
                        if pid != launch.process.pid]
            assert len(children) >= 3, launch.describe()     # simulator, driver, description
            generated = generated_parameter_directories(children)
            os.kill(launch.process.pid, signal.SIGKILL)
            launch.process.wait(timeout=5)
            # each child stops in order on its SIGTERM (about 1.5 s when idle); 20 s leaves
            # room for a loaded machine, and is still no orphan running on for minutes
            gone = wait_for(lambda: not any(alive(pid) for pid in children), 20.0)
            left = [f"{pid}: {_describe_process(pid)}" for pid in children if alive(pid)]
            for pid in children:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
            for directory in generated:      # the killed launch could not remove them
                shutil.rmtree(directory, ignore_errors=True)
            assert gone, f"still running 20 s after ros2 launch was killed: {left}"
    finally:
        executor.shutdown()
        node.destroy_node()
