"""A test's own time limits lie within its pytest-timeout: a limit at or above it never
says what it waited for, pytest-timeout stops the test first (its own message, with the
program's output, never shown). test_stop_signals.py waited up to 120 s for a program to
drive, test_bench_scale.py and test_fuzz_stack.py up to 300 s and 240 s for their script,
under setup.cfg's ``timeout = 120``.

Checked from the sources: a module constant in seconds (``NAME_S = ...``), or a number
given as a ``timeout``, read by a test or by a module-level function it calls (on down),
against the test's ``timeout`` marker, else its module's, else setup.cfg's."""

from __future__ import annotations

import ast
import configparser
import operator
from pathlib import Path
from typing import Dict, Optional

ROOT = Path(__file__).resolve().parents[2]
TEST_DIR = ROOT / "test"

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _number(node: ast.AST, constants: Dict[str, float]) -> Optional[float]:
    """The value of ``node``, a number, a constant's name or arithmetic of them (else None)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _number(node.left, constants), _number(node.right, constants)
        if left is not None and right is not None:
            return _OPERATORS[type(node.op)](left, right)
    return None


def _timeout_mark(node: ast.AST, constants: Dict[str, float]) -> Optional[float]:
    """The seconds of ``pytest.mark.timeout(...)`` in ``node`` (a decorator, a pytestmark)."""
    for call in ast.walk(node):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "timeout"
                and isinstance(call.func.value, ast.Attribute) and call.func.value.attr == "mark"):
            arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "timeout"), None)
            return None if arg is None else _number(arg, constants)
    return None


def ini_timeout() -> float:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return float(config["tool:pytest"]["timeout"])


def limits_over_timeouts(source: str, filename: str, default: float) -> list:
    """"test: what (s) >= its timeout (s)" for each test of ``source`` whose own limit is
    not within its pytest-timeout."""
    tree = ast.parse(source, filename)
    constants: Dict[str, float] = {}
    functions: Dict[str, ast.AST] = {}
    module_timeout = default
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        if target is not None:
            number = _number(value, constants)
            if number is not None:
                constants[target] = number
            if target == "pytestmark":
                module_timeout = _timeout_mark(value, constants) or module_timeout
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node

    def limits(function: ast.AST, seen: set) -> Dict[str, float]:
        """what -> seconds: the limits ``function`` and the functions it calls read."""
        found: Dict[str, float] = {}
        for node in (n for statement in function.body for n in ast.walk(statement)):
            if isinstance(node, ast.Name) and node.id.endswith("_S") and node.id in constants:
                found[node.id] = constants[node.id]
            elif isinstance(node, ast.keyword) and node.arg in ("timeout", "timeout_s", "timeout_sec"):
                number = _number(node.value, {})
                if number is not None:
                    found[f"timeout={number:g}"] = number
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions \
                    and node.func.id not in seen:
                seen.add(node.func.id)
                found.update(limits(functions[node.func.id], seen))
        return found

    over = []
    for name, function in functions.items():
        if not name.startswith("test_"):
            continue
        marks = [_timeout_mark(d, constants) for d in function.decorator_list]
        timeout = next((m for m in marks if m is not None), module_timeout)
        for what, seconds in sorted(limits(function, {name}).items()):
            if seconds >= timeout:
                over.append(f"{name}: {what} ({seconds:g} s) >= its timeout ({timeout:g} s)")
    return over


def test_the_check_sees_a_limit_over_the_timeout():
    helper = "LIMIT_S = 200.0\n\ndef run():\n    wait(LIMIT_S)\n\n"
    assert limits_over_timeouts(helper + "def test_a():\n    run()\n", "x", 120) == \
        ["test_a: LIMIT_S (200 s) >= its timeout (120 s)"]
    assert limits_over_timeouts(helper + "@pytest.mark.timeout(LIMIT_S + 30)\ndef test_a():\n    run()\n",
                                "x", 120) == []
    assert limits_over_timeouts(helper + "pytestmark = [pytest.mark.timeout(LIMIT_S * 2)]\n"
                                "def test_a():\n    run()\n", "x", 120) == []
    assert limits_over_timeouts("def test_a():\n    subprocess.run(x, timeout=150)\n", "x", 120) == \
        ["test_a: timeout=150 (150 s) >= its timeout (120 s)"]
    assert limits_over_timeouts("def test_a():\n    subprocess.run(x, timeout=60)\n", "x", 120) == []
    # the limit of the marker is not one the test waits for
    assert limits_over_timeouts("T_S = 200.0\n\n@pytest.mark.timeout(T_S)\ndef test_a():\n    pass\n",
                                "x", 120) == []


def test_no_test_waits_longer_than_its_timeout():
    default = ini_timeout()
    over = []
    for path in sorted(TEST_DIR.rglob("test_*.py")):
        over += [f"{path.relative_to(ROOT)}: {line}"
                 for line in limits_over_timeouts(path.read_text(), str(path), default)]
    assert over == [], "\n".join(over)
