"""The last guard against a test that hangs where pytest-timeout cannot stop it (loaded
by conftest.py as a plugin).

pytest-timeout (``timeout = 120`` in setup.cfg, signal method) fails a test that runs too
long by raising from a SIGALRM handler. Python runs that handler only when the main
thread comes back to the interpreter: a test stuck inside a C call (a DDS call that never
returns, a deadlock on a mutex, with the GIL held or not) is never stopped, and the run
hangs, printing nothing, until whoever started it gives up. A CI run ended that way once:
the wheel run stopped inside ``test_behavior_node`` and was killed after 90 minutes.

For every test this guard arms :func:`faulthandler.dump_traceback_later` for the test's
own timeout plus a margin (ini option ``hang_guard_grace``, seconds). Its watchdog is a
C thread that needs no GIL: when the time is up it writes the Python stack of every
thread to the run's real standard error (not to pytest's capture, which would be lost)
and ends the process with status 1. The run then fails at once, showing the test and the
line it was stuck on, instead of hanging. In a parallel run the process is a worker: xdist
reports the test failed and a new worker runs the rest (test/fixtures_parallel.py).
"""

from __future__ import annotations

import faulthandler
import os
import sys
from typing import IO, Optional

import pytest

GRACE_DEFAULT_S = 60.0

_stream: Optional[IO[str]] = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("hang_guard_grace", "seconds after a test's pytest-timeout before the hang "
                  "guard dumps every thread's stack and ends the run (test/fixtures_hang_guard.py)",
                  default=str(GRACE_DEFAULT_S))


def pytest_configure(config: pytest.Config) -> None:
    global _stream
    capman = config.pluginmanager.getplugin("capturemanager")
    # A duplicate of the real standard error, taken while pytest's capture is off: during
    # a test, file descriptor 2 is pytest's capture file, which an _exit throws away.
    if capman is not None:
        with capman.global_and_fixture_disabled():
            fd = os.dup(sys.stderr.fileno())
    else:  # pragma: no cover - pytest always has its capture manager
        fd = os.dup(sys.stderr.fileno())
    _stream = os.fdopen(fd, "w")


def pytest_unconfigure(config: pytest.Config) -> None:
    global _stream
    faulthandler.cancel_dump_traceback_later()
    if _stream is not None:
        _stream.close()
        _stream = None


def _timeout_of(item: pytest.Item) -> float:
    """The pytest-timeout limit of ``item`` in seconds (0: none), as pytest-timeout reads
    it: the test's ``timeout`` marker, else the ini option."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
        if value is not None:
            return float(value)
    try:
        return float(item.config.getini("timeout") or 0)
    except ValueError:  # pytest-timeout absent: the option is unknown
        return 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]):
    timeout = _timeout_of(item)
    if timeout <= 0 or _stream is None:
        yield
        return
    limit = timeout + float(item.config.getini("hang_guard_grace"))
    _stream.write("")  # fail here, not in the watchdog, if the stream is unusable
    faulthandler.dump_traceback_later(limit, repeat=False, file=_stream, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
