"""Fixtures that capture log output whatever the loggers' configuration (loaded by
conftest.py as a plugin).

``log_records``: the records of one Python logger, taken by a handler attached to that
logger itself. pytest's ``caplog`` handler sits on the root logger and sees only the
records that propagate to it, and importing the ``launch`` package (which the
launch_testing pytest plugin of a ROS install does when pytest starts) calls
``logging.setLoggerClass(LaunchLogger)``: every logger created afterwards has
``propagate = False``, and ``caplog`` sees nothing of it.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator, List

import pytest


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
