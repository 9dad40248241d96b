"""A test dependency that cannot be imported fails a test in ./dev's runs
(``COZMO_REQUIRE_TEST_DEPS=1``) and skips it, naming the ImportError, in a pytest run by
hand (test/dependencies.py). Each place a test imports one is checked by an inner pytest
run with that module blocked (a directory first on PYTHONPATH whose package of that name
raises ImportError): rclpy_context, rclpy_log and six tests skipped there although ./dev
said they fail. And no test file skips on an import of its own: pytest.importorskip, or
pytest.skip where an import raised ImportError, outside test/dependencies.py and
test/ros_tools.py (the ROS 2 tools not on PyPI), but for the modules in OPTIONAL."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from processes import TEST_DIR, inner_pytest_env

ROOT = TEST_DIR.parent

#: a module a test may skip without, where an ImportError is caught -> why it may be absent
OPTIONAL = {"chunk": "the stdlib module Python 3.13 removed (test/chunk_shim.py stands in)"}

#: where a skip on an import is the rule (the test dependencies; the ROS 2 tools)
HELPERS = {"dependencies.py", "ros_tools.py"}

#: (test file, -k expression or None: all of it, the module blocked)
SITES = [
    ("test/project/test_fast_yaml.py", None, "yaml"),
    ("test/bringup/test_description.py", "test_rviz_config_shows_the_robot", "yaml"),
    ("test/ros/test_battery_marker.py", None, "visualization_msgs"),
    ("test/core/test_driver_logic.py", "test_a_package_url_is_read_from_the_package_share_directory",
     "ament_index_python"),
    ("test/ros/test_ros_environment.py", "test_message_fields_are_type_checked_here_and_in_started_processes",
     "geometry_msgs"),
    ("test/ros/test_ros_environment.py", "test_context_uses_the_reserved_domain", "rclpy"),  # rclpy_context
]

#: a test of the rclpy_log fixture (test/fixtures_logging.py), loaded as a plugin
USES_RCLPY_LOG = "def test_logs(rclpy_log):\n    pass\n"


def run_blocked(tmp_path: Path, blocked: str, args: list, required: bool,
                cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """pytest ``args`` with ``blocked`` not importable, ``COZMO_REQUIRE_TEST_DEPS=1`` if
    ``required`` (neither variable of test/dependencies.py otherwise), without entry-point
    plugins (a launch_testing plugin would import what is blocked)."""
    blocker = tmp_path / "blocked"
    (blocker / blocked).mkdir(parents=True)
    (blocker / blocked / "__init__.py").write_text(f"raise ImportError('{blocked} is blocked by the test')\n")
    env = inner_pytest_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), env["PYTHONPATH"]])
    for name in ("COZMO_REQUIRE_TEST_DEPS", "COZMO_REQUIRE_ROS_TOOLS"):
        env.pop(name, None)
    if required:
        env["COZMO_REQUIRE_TEST_DEPS"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "pytest_timeout", "-p", "no:cacheprovider",
                           "-q", "-rA", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=100)


def site_args(path: str, name: Optional[str]) -> list:
    return [path] + (["-k", name] if name else [])


@pytest.mark.slow
@pytest.mark.parametrize("path, name, blocked", SITES, ids=[f"{p}-{m}" for p, _, m in SITES])
def test_a_required_dependency_that_cannot_be_imported_fails_the_test(tmp_path, path, name, blocked):
    result = run_blocked(tmp_path, blocked, site_args(path, name), required=True)
    out = result.stdout + result.stderr
    assert result.returncode in (1, 2), out  # a failure, or an error collecting the file
    assert f"cannot import {blocked}" in out and f"{blocked} is blocked by the test" in out, out
    assert "./dev's test runs install every test dependency" in out, out
    assert "skipped" not in result.stdout.splitlines()[-1], out


@pytest.mark.slow
def test_the_rclpy_log_fixture_fails_without_rclpy(tmp_path):
    (tmp_path / "test_case.py").write_text(USES_RCLPY_LOG)
    result = run_blocked(tmp_path, "rclpy", ["-p", "fixtures_logging", "test_case.py"], required=True,
                         cwd=tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "cannot import rclpy" in out and "./dev's test runs install every test dependency" in out, out


@pytest.mark.slow
def test_in_a_run_by_hand_it_skips_naming_the_import_error(tmp_path):
    result = run_blocked(tmp_path, "yaml", ["test/project/test_fast_yaml.py"], required=False)
    out = result.stdout + result.stderr
    assert result.returncode in (0, 5), out  # 5: the module skipped, no test collected
    assert "skipped" in result.stdout.splitlines()[-1], out
    assert "cannot import yaml" in out and "yaml is blocked by the test" in out, out


def _is_pytest_call(node: ast.AST, names: tuple) -> bool:
    """Is ``node`` a call of pytest.NAME (or of NAME imported from pytest) for one of ``names``?"""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in names and isinstance(func.value, ast.Name) and func.value.id == "pytest"
    return isinstance(func, ast.Name) and func.id in names


def _imported(body: list) -> set:
    """The top-level modules imported in ``body``: import statements and
    importlib.import_module / __import__ of a constant name ("?" where not a constant)."""
    modules = set()
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                modules.add((node.module or "?").split(".")[0] if node.level == 0 else "?")
            elif isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                    or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))):
                arg = node.args[0] if node.args else None
                modules.add(arg.value.split(".")[0] if isinstance(arg, ast.Constant)
                            and isinstance(arg.value, str) else "?")
    return modules


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(kind, ast.Name) and kind.id in ("ImportError", "ModuleNotFoundError") for kind in kinds)


def skips_on_imports(source: str, filename: str) -> list:
    """Where ``source`` skips on an import: "LINE: what" for each pytest.importorskip, and
    each pytest.skip in a handler of ImportError whose try imports a module not in OPTIONAL."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if _is_pytest_call(node, ("importorskip",)):
            found.append(f"{node.lineno}: pytest.importorskip (use dependencies.require)")
        elif isinstance(node, ast.Try):
            modules = _imported(node.body)
            for handler in node.handlers:
                if handler.type is None or not _catches_import_error(handler):
                    continue
                if any(_is_pytest_call(n, ("skip",)) for n in ast.walk(handler)) and modules - set(OPTIONAL):
                    found.append(f"{handler.lineno}: pytest.skip on an ImportError of "
                                 f"{', '.join(sorted(modules - set(OPTIONAL)))} (use dependencies.require)")
    return found


def test_the_check_finds_skips_on_imports():
    assert skips_on_imports("import pytest\nyaml = pytest.importorskip('yaml')\n", "x") == \
        ["2: pytest.importorskip (use dependencies.require)"]
    assert skips_on_imports("from pytest import importorskip\nimportorskip('yaml')\n", "x") != []
    caught = "try:\n    import rclpy\nexcept (OSError, ImportError) as exc:\n    pytest.skip(str(exc))\n"
    assert skips_on_imports(caught, "x") == ["3: pytest.skip on an ImportError of rclpy (use dependencies.require)"]
    assert skips_on_imports(caught.replace("import rclpy", "m = importlib.import_module('a.b')"), "x") != []
    assert skips_on_imports(caught.replace("import rclpy", "import chunk"), "x") == []
    assert skips_on_imports(caught.replace("pytest.skip", "print"), "x") == []
    assert skips_on_imports(caught.replace("ImportError", "ValueError"), "x") == []


def test_no_test_skips_on_an_import_of_its_own():
    found = []
    for path in sorted(TEST_DIR.rglob("*.py")):
        if path.name in HELPERS and path.parent == TEST_DIR:
            continue
        found += [f"{path.relative_to(ROOT)}:{where}" for where in skips_on_imports(path.read_text(), str(path))]
    assert found == [], "\n".join(found)
