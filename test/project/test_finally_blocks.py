"""No test asserts in a ``finally`` block: where the ``try`` had failed, a failing assert
there replaces its error, and the report shows the clean-up's failure instead of the
test's. test_ros2_cli.py asserted that restoring a parameter worked in the ``finally`` of
the check that had changed it; test_codec_camera.py's fuzz test asserted the assembler's
bound in the ``finally`` of a push, hiding any unexpected exception of the push. A clean-up
keeps its outcome and the test checks it after the ``try``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def asserts_in_finally(source: str, filename: str) -> list:
    """The lines of the assert statements in a ``finally`` block of ``source``."""
    return sorted(node.lineno for tree in ast.walk(ast.parse(source, filename))
                  if isinstance(tree, ast.Try) for statement in tree.finalbody
                  for node in ast.walk(statement) if isinstance(node, ast.Assert))


def test_the_check_sees_an_assert_in_finally():
    assert asserts_in_finally("try:\n    f()\nfinally:\n    if x:\n        assert g()\n", "x") == [5]
    assert asserts_in_finally("try:\n    assert f()\nfinally:\n    ok = g()\nassert ok\n", "x") == []


def test_no_test_asserts_in_a_finally_block():
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / "test").rglob("*.py"))
             for line in asserts_in_finally(path.read_text(), str(path))]
    assert found == [], "an assert in a finally block hides the error of its try: " + ", ".join(found)
