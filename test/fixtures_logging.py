"""Fixtures that capture log output whatever the loggers' configuration (loaded by
conftest.py as a plugin).

``log_records``: the records of one Python logger, taken by a handler attached to that
logger itself. pytest's ``caplog`` handler sits on the root logger and sees only the
records that propagate to it, and importing the ``launch`` package (which the
launch_testing pytest plugin of a ROS install does when pytest starts) calls
``logging.setLoggerClass(LaunchLogger)``: every logger created afterwards has
``propagate = False``, and ``caplog`` sees nothing of it.

``rclpy_log``: every line an rclpy logger of this process writes, taken where
``RcutilsLogger.log`` hands it to rcutils, after all its checks: the node under test
logs through its own rclpy logger, unchanged, so a call site that would raise
("Logger severity cannot be changed between calls") still raises in the test.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional

import pytest
from dependencies import require


class LogCapture(logging.Handler):
    """The records one logger handled while attached (see ``log_records``)."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.records: List[logging.LogRecord] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    @property
    def messages(self) -> List[str]:
        """Each record's message, arguments merged."""
        return [record.getMessage() for record in self.records]

    @property
    def text(self) -> str:
        """The records formatted one after the other, with their tracebacks."""
        return "\n".join(self.format(record) for record in self.records)


@pytest.fixture
def log_records() -> Iterator[Callable[..., LogCapture]]:
    """``log_records(name, level=logging.DEBUG)``: a :class:`LogCapture` attached to the
    logger ``name`` itself, which logs from ``level`` on for the test (both undone after
    it). It does not depend on propagation, unlike ``caplog``."""
    attached: List[Any] = []

    def capture(name: str, level: int | str = logging.DEBUG) -> LogCapture:
        logger = logging.getLogger(name)
        level = logging.getLevelName(level) if isinstance(level, str) else level
        handler = LogCapture(level)
        attached.append((logger, handler, logger.level))
        logger.addHandler(handler)
        logger.setLevel(level)
        return handler

    try:
        yield capture
    finally:
        for logger, handler, level in reversed(attached):
            logger.removeHandler(handler)
            logger.setLevel(level)


@dataclass(frozen=True)
class RclpyLine:
    severity: int        # a rclpy.logging.LoggingSeverity (DEBUG 10 ... FATAL 50)
    logger: str          # the logger's name: a node's is its fully qualified name, no "/"
    message: str
    function: str        # where it was logged from
    file: str
    line: int


class RclpyLog:
    """The lines rclpy's loggers wrote while the fixture was active."""

    def __init__(self) -> None:
        self.lines: List[RclpyLine] = []

    def of(self, logger: Any, severity: Optional[int] = None) -> List[RclpyLine]:
        """The lines of ``logger`` (a name, an rclpy logger or a node), of ``severity``
        if given."""
        if hasattr(logger, "get_logger"):
            logger = logger.get_logger()
        name = getattr(logger, "name", logger)
        return [line for line in self.lines if line.logger == name
                and (severity is None or int(line.severity) == int(severity))]

    def said(self, logger: Any, severity: int, text: str) -> bool:
        """Did ``logger`` write a line of ``severity`` that contains ``text``?"""
        return any(text in line.message for line in self.of(logger, severity))


@pytest.fixture
def rclpy_log(monkeypatch) -> RclpyLog:
    """An :class:`RclpyLog` of every line rclpy logs during the test (still written out)."""
    rcutils_logger = require("rclpy.impl.rcutils_logger")
    implementation = rcutils_logger._rclpy
    write = implementation.rclpy_logging_rcutils_log
    log = RclpyLog()

    def tap(severity, name, message, function, file, line):
        log.lines.append(RclpyLine(severity, name, message, function, file, line))
        return write(severity, name, message, function, file, line)

    monkeypatch.setattr(implementation, "rclpy_logging_rcutils_log", tap)
    return log
