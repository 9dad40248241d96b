"""A static check: every rclpy logger call site in cozmo_driver/ logs at one severity.

rclpy's ``RcutilsLogger.log`` keeps, per logger and per calling source position
(function, file, line, bytecode offset), the severity of the first message logged
there, and raises ``ValueError('Logger severity cannot be changed between calls.')``
when that same position later logs at another severity. A line such as
``(log.info if ok else log.warning)(text)`` therefore works once and raises the
second time round, in whatever callback reaches it (this killed the driver
process). The throttle and once filters of rclpy are per call site too.

So a log call must name its severity where it is made. This test parses every
``.py`` under ``cozmo_driver/`` and reports, with file:line:

* a call whose callee is a conditional expression, a boolean expression or a
  subscript that yields a logger method (``(log.info if c else log.warning)(t)``,
  ``{...: log.info}[level](t)``);
* a logger severity method (debug, info, warn, warning, error, fatal, log)
  referenced without being called right there (``warn = log.warning``,
  ``callback=log.info``): the call is then made elsewhere, with no telling at what
  severity;
* a ``.log(message, severity)`` call whose severity is not a constant;
* ``getattr(<logger>, <not a constant>)``, and ``getattr(<logger>, "info")`` not
  called right there.

An rclpy logger is recognised by its expression: a ``get_logger()`` or
``get_child()`` call, a name or attribute called ``log``, ``logger``, ``_log``,
``..._logger`` and so on, or one assigned from such an expression in the same
file. A name assigned only from ``logging.getLogger()`` is a Python logger, which
keeps no state per call site (the driver forwards its records to rclpy from one
handler, whose own call sites are checked here): it is left alone.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path
from typing import List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cozmo_driver"

#: the methods of rclpy's RcutilsLogger (and of logging.Logger) that log at one severity
SEVERITY_METHODS = frozenset({"debug", "info", "warn", "warning", "error", "fatal", "critical",
                              "exception"})
#: the method that takes the severity as an argument
LOG_METHOD = "log"
#: names of severity constants: LoggingSeverity.WARN, logging.WARNING, ...
SEVERITY_CONSTANTS = frozenset({"UNSET", "NOTSET", "DEBUG", "INFO", "WARN", "WARNING", "ERROR",
                                "FATAL", "CRITICAL"})
#: a name or attribute that holds a logger
LOGGER_NAME = re.compile(r"(?i)(^|_)(log|logger)$")
#: calls that return an rclpy logger (Node.get_logger, rclpy.logging.get_logger, get_child)
LOGGER_FACTORIES = frozenset({"get_logger", "get_child"})
#: calls that return a Python logger
PYTHON_LOGGER_FACTORIES = frozenset({"getLogger", "getChild"})
#: modules whose .log() is a logarithm, and the logging module itself (getattr on it
#: gives a level or a module function, not a logger's method)
NOT_LOGGERS = frozenset({"math", "cmath", "np", "numpy", "torch", "logging"})


def _last_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_constant_severity(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    return isinstance(node, ast.Attribute) and node.attr in SEVERITY_CONSTANTS


class _Checker(ast.NodeVisitor):
    def __init__(self, tree: ast.AST) -> None:
        self.findings: List[Tuple[int, str]] = []
        self.loggers: Set[str] = set()
        self.python_loggers: Set[str] = set()
        self._covered: Set[int] = set()  # ids of nodes already reported as part of a call
        self._called: Set[int] = set()   # ids of nodes that are the callee of a call
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                self._called.add(id(node.func))
        self._collect_loggers(tree)

    # --- what is a logger

    def _collect_loggers(self, tree: ast.AST) -> None:
        """Names and attributes assigned from a logger in this file (to a fixed point), and
        those assigned only from ``logging.getLogger()``."""
        assignments = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                assignments += [(target, node.value) for target in node.targets]
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                assignments.append((node.target, node.value))
        assignments = [(ast.unparse(target), value) for target, value in assignments
                       if isinstance(target, (ast.Name, ast.Attribute))]
        python = {key for key, value in assignments if isinstance(value, ast.Call)
                  and _last_name(value.func) in PYTHON_LOGGER_FACTORIES}
        rclpy = {key for key, value in assignments if isinstance(value, ast.Call)
                 and _last_name(value.func) in LOGGER_FACTORIES}
        self.python_loggers = python - rclpy
        changed = True
        while changed:
            changed = False
            for key, value in assignments:
                if key not in self.loggers and self.is_logger(value):
                    self.loggers.add(key)
                    changed = True

    def is_logger(self, node: ast.AST) -> bool:
        """``node`` is (or may be) an rclpy logger."""
        if isinstance(node, ast.Call):
            return _last_name(node.func) in LOGGER_FACTORIES
        if isinstance(node, (ast.Name, ast.Attribute)):
            key, name = ast.unparse(node), _last_name(node)
            if name in NOT_LOGGERS or key in self.python_loggers:
                return False
            return bool(LOGGER_NAME.search(name)) or key in self.loggers
        return False

    def _is_method_ref(self, node: ast.AST) -> bool:
        """``node`` is ``<logger>.<severity method>`` (or ``.log``)."""
        return (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
                and (node.attr in SEVERITY_METHODS or node.attr == LOG_METHOD)
                and self.is_logger(node.value))

    def _is_getattr(self, node: ast.AST) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "getattr" and len(node.args) >= 2
                and self.is_logger(node.args[0]))

    def _report(self, node: ast.AST, what: str) -> None:
        self.findings.append((node.lineno, f"{what}: {ast.unparse(node)[:100]}"))

    # --- the rules

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, (ast.IfExp, ast.BoolOp, ast.Subscript)):
            inner = [n for n in ast.walk(func) if self._is_method_ref(n) or self._is_getattr(n)]
            if inner:
                self._report(node, "the logger method is chosen at the call site "
                                   f"({type(func).__name__}): one severity per call site")
                self._covered.update(id(n) for n in inner)
        if isinstance(func, ast.Attribute) and func.attr == LOG_METHOD \
                and _last_name(func.value) not in NOT_LOGGERS \
                and ast.unparse(func.value) not in self.python_loggers:
            severity = next((k.value for k in node.keywords if k.arg == "severity"), None)
            if severity is None and len(node.args) >= 2 and not _is_constant_severity(node.args[0]):
                severity = node.args[1]  # rclpy: log(message, severity)
            if severity is not None and not _is_constant_severity(severity):
                self._report(node, ".log() with a severity that is not a constant")
        if self._is_getattr(node) and id(node) not in self._covered:
            name = node.args[1]
            if not isinstance(name, ast.Constant):
                self._report(node, "getattr() of a logger with a name that is not a constant")
            elif id(node) not in self._called and name.value in SEVERITY_METHODS | {LOG_METHOD}:
                self._report(node, "a logger method taken with getattr() and not called there")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if self._is_method_ref(node) and id(node) not in self._called \
                and id(node) not in self._covered:
            self._report(node, "a logger method referenced without being called there")
        self.generic_visit(node)


def find_variable_severity_sites(source: str, filename: str = "<snippet>") -> List[Tuple[int, str]]:
    """(line, what) of each log call site of ``source`` whose severity may vary."""
    tree = ast.parse(source, filename)
    checker = _Checker(tree)
    checker.visit(tree)
    return sorted(checker.findings)


# ------------------------------------------------------------------------------ the project

def test_every_log_call_site_of_the_package_has_one_severity():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50, files  # the package is there
    problems = []
    for path in files:
        for line, what in find_variable_severity_sites(path.read_text(encoding="utf-8"), str(path)):
            problems.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not problems, (
        "rclpy raises 'Logger severity cannot be changed between calls' when one source "
        "position logs at two severities; write one call per severity (if/else):\n"
        + "\n".join(problems))


# ------------------------------------------------------------------------------ the checker

#: each bad pattern, its site marked "# <-"
BAD = {
    "conditional expression": """
        def f(self, ok, text):
            (self.get_logger().info if ok else self.get_logger().warning)(text)  # <-
    """,
    "conditional expression, logger in a variable": """
        def f(self, clamped, text):
            log = self.get_logger()
            (log.warning if clamped else log.info)(f"face/params: {text}")  # <-
    """,
    "conditional expression over an attribute logger, call on two lines": """
        def f(self, result):
            (self._log.info if result.success else self._log.warning)(  # <-
                result.message)
    """,
    "boolean expression": """
        def f(logger, bad, text):
            (bad and logger.error or logger.warning)(text)  # <-
    """,
    "subscript of a dict of methods": """
        def f(self, level, text):
            log = self.node.get_logger()
            {"info": log.info, "warning": log.warning}[level](text)  # <-
    """,
    "method stored in a variable": """
        def f(self, ok, text):
            say = self.get_logger().info  # <-
            say(text)
    """,
    "method passed as a callback": """
        def f(self, path):
            load(path, warn=self._logger.warning)  # <-
    """,
    "helper taking a level: .log with a variable severity": """
        def _log(self, severity, text):
            self.get_logger().log(text, severity)  # <-
    """,
    "helper taking a level: .log with a keyword severity": """
        def _log(self, level, text):
            self.get_logger().log(text, severity=level)  # <-
    """,
    "helper taking a level: getattr": """
        def _log(self, level, text):
            getattr(self.get_logger(), level)(text)  # <-
    """,
    "getattr of a fixed method, not called there": """
        def f(self, text):
            method = getattr(self.get_logger(), "warning")  # <-
            method(text)
    """,
    "method as a default callback": """
        def load(self, warn=None):
            report = warn if warn is not None else self.get_logger().warning  # <-
            report("skipped")
    """,
    "a logger assigned to a name that does not say so": """
        def f(node, ok, text):
            out = node.get_logger()
            (out.info if ok else out.error)(text)  # <-
    """,
}


@pytest.mark.parametrize("snippet", BAD.values(), ids=list(BAD))
def test_the_checker_finds_each_bad_pattern_once_at_its_line(snippet):
    source = textwrap.dedent(snippet)
    marked = [i for i, text in enumerate(source.splitlines(), 1) if text.endswith("# <-")]
    found = find_variable_severity_sites(source)
    assert [line for line, _ in found] == marked, found


def test_the_checker_names_the_line_of_each_bad_pattern():
    source = textwrap.dedent("""\
        import logging
        def f(self, ok, text, level):
            log = self.get_logger()
            (log.info if ok else log.warning)(text)
            say = log.info
            log.log(text, level)
            getattr(log, level)(text)
            (ok and log.error or log.warning)(text)
            {1: log.info}[level](text)
    """)
    assert [line for line, _ in find_variable_severity_sites(source)] == [4, 5, 6, 7, 8, 9]


GOOD = """
    import logging
    import math
    import numpy as np
    from rclpy.logging import LoggingSeverity

    logger = logging.getLogger("cozmo.sim")

    class Node:
        def __init__(self, node):
            self._log = node.get_logger()

        def f(self, ok, text, event, x, base, args, warn):
            if ok:
                self.get_logger().info(text)
            else:
                self.get_logger().warning(text)
            self._log.info(text) if ok else self._log.warning(text)  # two call sites
            log = self.get_logger()
            log.debug(text)
            log.log(text, LoggingSeverity.WARN)
            log.log(text, severity=LoggingSeverity.INFO)
            logger.log(logging.INFO, text)
            logger.log(logging.WARNING, "%s", text)
            logger.log(args.level, text)      # Python's logging: no state per call site
            getattr(log, "info")(text)
            info = event.info                 # a data attribute, not a logger's
            y = math.log(x, base) + np.log(x)
            level = getattr(logging, str(args.log_level).upper(), logging.WARNING)
            ctx.log(f"message: {text}")       # a behaviour's log: one argument
            self._engine_log("info" if ok else "warning", text)  # a helper of ours
            report = warn if warn is not None else logger.warning  # a Python logger's
            return info, y, level, report
"""


def test_the_checker_leaves_single_severity_sites_alone():
    assert find_variable_severity_sites(textwrap.dedent(GOOD)) == []
