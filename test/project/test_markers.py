"""A test that needs DDS is marked ``ros`` (setup.cfg: needs rclpy and a working DDS
middleware), so that ``./dev test -m "not ros"`` leaves it out: test_duplicates.py,
test_serialized.py, test_name_guard.py, test_entry_points.py's node processes and the
description test's node were not, nor test_launch.py (a whole stack under launch_testing).

Checked from the sources: a test function that, in its body or in a module-level function
or fixture it calls or takes (on down), initialises rclpy, makes a node, takes the
``rclpy_context`` fixture, starts a node executable or ``ros2``, or serializes through the
middleware, has the ``ros`` marker (its own or its module's ``pytestmark``); a launch_testing
module has it on ``generate_test_description``, whose marks launch_testing's plugin applies."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set

ROOT = Path(__file__).resolve().parents[2]
TEST_DIR = ROOT / "test"

#: calls (the name called) that need DDS, or the middleware
DDS_CALLS = {"init", "create_node", "Node", "RosLaunch", "ros2", "need_ros2", "serialize_message",
             "deserialize_message", "project_executable"}
#: fixtures that give an initialised rclpy context
DDS_FIXTURES = {"rclpy_context", "private_rclpy_context"}
#: test files that call one of them without DDS -> why
EXEMPT = {"test/ros/test_help.py": "runs the executables with --help only: nothing starts",
          "test/project/test_markers.py": "names them"}


def _marks(decorators: list) -> Set[str]:
    """The pytest.mark.NAME names among ``decorators`` (or in a pytestmark value)."""
    names = set()
    for decorator in decorators:
        for node in ast.walk(decorator):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "mark":
                names.add(node.attr)
    return names


def _called(node: ast.AST) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def unmarked_dds_tests(source: str, filename: str) -> list:
    """The test functions of ``source`` that need DDS without the ``ros`` marker."""
    tree = ast.parse(source, filename)
    functions: Dict[str, ast.AST] = {}
    module_marks: Set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                  for t in node.targets):
            module_marks |= _marks([node.value])

    def needs_dds(function: ast.AST, seen: set) -> bool:
        uses = {a.arg for a in function.args.args}
        if uses & DDS_FIXTURES:
            return True
        for node in (n for statement in function.body for n in ast.walk(statement)):
            if isinstance(node, ast.Call):
                name = _called(node)
                if name in DDS_CALLS and not (name == "init" and "rclpy" not in ast.unparse(node.func)):
                    return True
                uses.add(name)
        return any(needs_dds(functions[name], seen | {name}) for name in uses - seen if name in functions)

    found = []
    for name, function in functions.items():
        if name == "generate_test_description":
            if "ros" not in _marks(function.decorator_list):
                found.append(f"{name} (launch_testing applies its marks only)")
        elif name.startswith("test_") and "ros" not in module_marks | _marks(function.decorator_list) \
                and needs_dds(function, {name}):
            found.append(name)
    return found


def test_the_check_sees_a_test_that_needs_dds():
    fixture = "@pytest.fixture\ndef rig(rclpy_context):\n    return 1\n\n"
    assert unmarked_dds_tests(fixture + "def test_a(rig):\n    pass\n", "x") == ["test_a"]
    assert unmarked_dds_tests(fixture + "@pytest.mark.ros\ndef test_a(rig):\n    pass\n", "x") == []
    assert unmarked_dds_tests("pytestmark = [pytest.mark.ros]\n" + fixture + "def test_a(rig):\n    pass\n",
                              "x") == []
    started = "def start():\n    return Popen([project_executable('cozmo_face_node')])\n\n"
    assert unmarked_dds_tests(started + "def test_a():\n    start()\n", "x") == ["test_a"]
    assert unmarked_dds_tests("def test_a():\n    rclpy.init(context=c)\n", "x") == ["test_a"]
    assert unmarked_dds_tests("def test_a():\n    hypothesis.init()\n", "x") == []
    assert unmarked_dds_tests("def test_a():\n    assert 1\n", "x") == []
    assert unmarked_dds_tests("@pytest.mark.launch_test\ndef generate_test_description():\n    pass\n",
                              "x") == ["generate_test_description (launch_testing applies its marks only)"]


def test_every_test_that_needs_dds_is_marked_ros():
    found = []
    for path in sorted(TEST_DIR.rglob("test_*.py")):
        name = str(path.relative_to(ROOT))
        if name not in EXEMPT:
            found += [f"{name}: {test}" for test in unmarked_dds_tests(path.read_text(), name)]
    assert found == [], "\n".join(found)
