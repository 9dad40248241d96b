"""The last guard against a test that hangs where pytest-timeout cannot stop it (loaded
by conftest.py as a plugin).

pytest-timeout (``timeout = 120`` in setup.cfg, signal method) fails a test that runs too
long by raising from a SIGALRM handler. Python runs that handler only when the main
thread comes back to the interpreter: a test stuck inside a C call (a DDS call that never
returns, a deadlock on a mutex, with the GIL held or not) is never stopped, and the run
hangs, printing nothing, until whoever started it gives up. A CI run ended that way once:
the wheel run stopped inside ``test_behavior_node`` and was killed after 90 minutes.

For every test this guard sets a limit: the test's own timeout plus a margin (ini option
``hang_guard_grace``, seconds). When a test is still running at its limit, a watchdog
thread of this guard writes, to the run's real standard error (not to pytest's capture,
which would be lost), the Python stack of every thread, then one line per thread with the
innermost calls, and ends the process with status 1. The summary comes last because a CI
log is often read from its end, and a stack dump ends with the outermost calls (a CI run
showed only the pytest and execnet frames at the bottom of a stuck test's main thread).

A thread needs the GIL to run, and a C call that holds it (Fast DDS's teardown spin of
the PyPI wheels, docs/driver.md) stops every thread. So :func:`faulthandler.dump_traceback_later`
is armed as well, FALLBACK_S after the limit: its watchdog is a C thread that needs no GIL;
it writes every thread's stack (under ``Timeout (h:mm:ss)!``) and ends the process with
status 1. A dump with that header and no summary after it therefore means the GIL was held.

The run then fails at once, showing the test and the line it was stuck on, instead of
hanging. In a parallel run the process is a worker: xdist reports the test failed and a
new worker runs the rest (test/fixtures_parallel.py).

A run can also hang between tests, where no test's limit runs: a worker stuck in its
collection or at its exit, or xdist's controller waiting for a worker that will never
report (a CI run's kit suite, whose tests take about 12 minutes, was still waiting after
77 minutes, when it was killed). So
the whole run has a limit too (ini option ``hang_guard_run_limit``, seconds, 0 for none;
the environment variable RUN_LIMIT_ENV overrides it): when it is up, the guard writes
every thread's stack and the summary of where each was, then interrupts the run as Ctrl-C
does (pytest reports what ran, xdist stops its workers), and ends the process with status
1 if it still runs ``hang_guard_grace`` seconds later. Its thread may not get to that: a C
call that holds the GIL stops it as it stops a test's watchdog, and so does the
interpreter's exit, where a daemon thread is never run again. So faulthandler's C watchdog
is armed at the interruption too, FALLBACK_S after that grace, and no later step of the
guard calls it off (the interpreter does, late in its own clean-up at exit).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
import traceback
from typing import IO, Optional

import pytest

GRACE_DEFAULT_S = 60.0
#: seconds after a test's limit at which faulthandler's C watchdog ends the process, if
#: the guard's own thread could not (the GIL held)
FALLBACK_S = 5.0
#: innermost calls per thread in the summary
SUMMARY_FRAMES = 4
#: the environment variable that overrides ini option hang_guard_run_limit (seconds)
RUN_LIMIT_ENV = "COZMO_TEST_RUN_LIMIT_S"

_stream: Optional[IO[str]] = None
_lock = threading.Condition()
#: the test under watch: (node id, its limit in s, monotonic deadline), or None
_watched: Optional[tuple] = None
_watchdog: Optional[threading.Thread] = None
_run_timer: Optional[threading.Timer] = None
#: the run's limit is up: the guard leaves faulthandler's watchdog armed and the stream open
_interrupted = False


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("hang_guard_grace", "seconds after a test's pytest-timeout before the hang "
                  "guard dumps every thread's stack and ends the run (test/fixtures_hang_guard.py)",
                  default=str(GRACE_DEFAULT_S))
    parser.addini("hang_guard_run_limit", "seconds a whole test run may last before the hang "
                  f"guard interrupts it (0: no limit; {RUN_LIMIT_ENV} overrides it; "
                  "test/fixtures_hang_guard.py)", default="0")


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
    limit = _run_limit(config)
    if limit > 0 and not os.environ.get("PYTEST_XDIST_WORKER"):  # the run's own process
        global _run_timer
        grace = float(config.getini("hang_guard_grace"))
        _run_timer = threading.Timer(limit, _interrupt_the_run, (limit, grace))
        _run_timer.name = "hang-guard-run-limit"
        _run_timer.daemon = True
        _run_timer.start()


def _run_limit(config: pytest.Config) -> float:
    """The run's limit in seconds (0: none): RUN_LIMIT_ENV, else the ini option."""
    text = os.environ.get(RUN_LIMIT_ENV, "").strip() or str(config.getini("hang_guard_run_limit"))
    try:
        limit = float(text)
    except ValueError:
        raise pytest.UsageError(f"{RUN_LIMIT_ENV} (or ini option hang_guard_run_limit) must be "
                                f"a number of seconds, 0 for no limit, not {text!r}") from None
    return limit if limit > 0 else 0.0


def pytest_unconfigure(config: pytest.Config) -> None:
    global _stream
    if _run_timer is not None:
        _run_timer.cancel()
    _watch(None)
    if _interrupted:  # the interruption's fallback ends the process if it does not end
        return
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


def _watch(nodeid: Optional[str], limit: float = 0.0) -> None:
    """Watch test ``nodeid`` for ``limit`` seconds from now, or nothing (None); starts the
    watchdog thread once."""
    global _watched, _watchdog
    with _lock:
        _watched = None if nodeid is None else (nodeid, limit, time.monotonic() + limit)
        if _watchdog is None and nodeid is not None:
            _watchdog = threading.Thread(target=_watch_forever, name="hang-guard", daemon=True)
            _watchdog.start()
        _lock.notify()


def _watch_forever() -> None:
    """The watchdog thread: waits for the watched test's deadline; ends the process there.
    A daemon: it ends with the process."""
    with _lock:
        while _watched is None or time.monotonic() < _watched[2]:
            _lock.wait(None if _watched is None else _watched[2] - time.monotonic())
        nodeid, limit, _ = _watched
    _report_and_exit(nodeid, limit)


def _innermost_calls(frame) -> str:
    calls = traceback.extract_stack(frame)[-SUMMARY_FRAMES:]
    return " > ".join(f"{os.path.basename(c.filename)}:{c.lineno} {c.name}" for c in calls)


def _report(stream: IO[str], what: str, headline: str) -> None:
    """Every thread's stack under ``headline``, then where each thread of ``what`` was."""
    stream.write(f"\n+++ hang guard: {headline}: every thread's stack, innermost call first +++\n")
    stream.flush()
    faulthandler.dump_traceback(file=stream, all_threads=True)
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    stream.write(f"+++ hang guard: where each thread of {what} was (innermost call last) +++\n")
    for ident, frame in sys._current_frames().items():
        if ident != threading.get_ident():
            stream.write(f"  {names.get(ident, ident)}: {_innermost_calls(frame)}\n")
    stream.flush()


def _report_and_exit(nodeid: str, limit: float) -> None:
    try:
        if _stream is not None:
            _report(_stream, nodeid, f"{nodeid} still running after {limit:g} s")
            _stream.write("+++ hang guard: ended this test process (status 1) +++\n")
            _stream.flush()
    finally:
        os._exit(1)


def _interrupt_the_run(limit: float, grace: float) -> None:
    """The run's limit is up: report, interrupt the run, end it ``grace`` s later if that
    did not (this thread, or faulthandler's if this one cannot run then)."""
    global _interrupted
    stream = _stream
    try:
        if stream is not None:
            _report(stream, "the test run", f"the test run still going after {limit:g} s")
            stream.write(f"+++ hang guard: {limit:g} s is the run's limit (ini option "
                         f"hang_guard_run_limit; {RUN_LIMIT_ENV}=0 lifts it): interrupting the "
                         "run +++\n")
            stream.flush()
            _interrupted = True
            faulthandler.dump_traceback_later(grace + FALLBACK_S, repeat=False, file=stream,
                                              exit=True)
        # to the main thread itself: a signal sent to the process may be taken by another
        # thread (faulthandler's new watchdog, before it blocks signals), and the main
        # thread, asleep in a call, would then not be woken to run the handler
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(grace)
        if stream is not None:
            stream.write(f"+++ hang guard: the run did not end {grace:g} s after the "
                         "interruption: ended it (status 1) +++\n")
            stream.flush()
    finally:
        os._exit(1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]):
    timeout = _timeout_of(item)
    if timeout <= 0 or _stream is None:
        yield
        return
    limit = timeout + float(item.config.getini("hang_guard_grace"))
    _stream.write("")  # fail here, not in the watchdog, if the stream is unusable
    _watch(item.nodeid, limit)
    faulthandler.dump_traceback_later(limit + FALLBACK_S, repeat=False, file=_stream, exit=True)
    try:
        yield
    finally:
        if not _interrupted:  # else the interruption's fallback, which replaced this one
            faulthandler.cancel_dump_traceback_later()
        _watch(None)
