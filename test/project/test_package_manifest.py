"""package.xml declares what the driver imports, so that `rosdep install` gives a user on
ROS 2 from apt everything it needs: action_msgs, builtin_interfaces, rcl_interfaces,
unique_identifier_msgs and ament_index_python were imported but came only through rclpy.
Pure: reads the sources and the manifest."""

from __future__ import annotations

import ast
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: a Python module the driver imports -> its rosdep key, where the two names differ
ROSDEP_KEYS = {"numpy": "python3-numpy", "PIL": "python3-pil", "yaml": "python3-yaml"}
#: imported only for an optional feature, with a clear error without it
OPTIONAL = {"flatbuffers": "writing the Cozmo app's .bin clips (anim/clip.py)"}


def imported_modules() -> set:
    modules = set()
    for path in (ROOT / "cozmo_driver").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return {m for m in modules if m not in sys.stdlib_module_names and m != "cozmo_driver"}


def test_every_package_the_driver_imports_is_an_exec_depend():
    manifest = ET.parse(ROOT / "package.xml").getroot()
    declared = {e.text for e in manifest.iter("exec_depend")}
    wanted = {ROSDEP_KEYS.get(m, m) for m in imported_modules() if m not in OPTIONAL}
    assert wanted - declared == set(), f"imported but not declared in package.xml: {sorted(wanted - declared)}"
    assert {"rclpy", "numpy", "action_msgs"} <= imported_modules()  # the scan sees imports


#: a ROS 2 tool the tests import (ros_tools.need_module) -> its rosdep key, where they differ
TOOL_KEYS = {"tf2_ros": "tf2_ros_py"}
#: a `ros2` verb -> the package of that verb, where it is not "ros2" + the verb
VERB_KEYS = {"daemon": "ros2cli"}
#: the verbs of `ros2 VERB ...` as the tests write them: ros2("topic", ...),
#: Background("topic", ...), command = ("service", ...), args = ["action", ...] (test_ros2_cli.py),
#: [ROS2, "run", ...], [need_ros2(), "launch", ...]
_VERB = re.compile(r'(?:\bros2\(|\bBackground\(|\bcommand = \(|\bargs = \[|\bROS2, |\bros2, |need_ros2\(\), )'
                   r'"([a-z]+)"')


def ros_tools_of_the_tests() -> dict:
    """rosdep key -> where the tests use it: the modules given to need_module, the `ros2`
    command (ros2cli) and the packages of its verbs."""
    keys = {"ros2cli": "the ros2 command (ros_tools.need_ros2)"}
    for path in sorted((ROOT / "test").rglob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source, str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "need_module"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                name = node.args[0].value.split(".")[0]
                keys.setdefault(TOOL_KEYS.get(name, name), f"need_module in {path.relative_to(ROOT)}")
        for verb in _VERB.findall(source):
            keys.setdefault(VERB_KEYS.get(verb, f"ros2{verb}"), f"`ros2 {verb}` in {path.relative_to(ROOT)}")
    return keys


def test_every_ros_tool_the_tests_run_is_a_dependency():
    """`rosdep install` (docs/development.md, With a real ROS 2 install) gives the ROS mode
    of ./dev test every tool its tests need, which fail there without one
    (COZMO_REQUIRE_ROS_TOOLS=1): teleop_twist_keyboard, tf2_ros_py and the ros2 verbs were
    not declared, so their tests skipped after a rosdep install."""
    manifest = ET.parse(ROOT / "package.xml").getroot()
    declared = {e.text for tag in ("depend", "exec_depend", "test_depend") for e in manifest.iter(tag)}
    wanted = ros_tools_of_the_tests()
    assert {"launch_testing", "teleop_twist_keyboard", "ros2launch", "ros2topic", "ros2param",
            "ros2service"} <= set(wanted)
    undeclared = {key: where for key, where in wanted.items() if key not in declared}
    assert undeclared == {}, f"used by the tests but not declared in package.xml: {undeclared}"
