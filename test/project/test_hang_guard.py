"""The hang guard (test/fixtures_hang_guard.py) ends a run whose test is stuck where
pytest-timeout cannot stop it, printing where it was stuck, with a summary last; where
the stuck call holds the GIL, faulthandler's C watchdog ends it. A test that pytest-timeout
does stop leaves the run going. Each case is a pytest run of its own, in a subprocess,
with a 1 s timeout and a 1 s grace."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import pytest

from processes import inner_pytest_env

STUCK = '''
import signal
import time


def test_stuck_where_no_alarm_reaches():
    # SIGALRM blocked: pytest-timeout's alarm never runs, as in a call into C that never
    # returns to the interpreter
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(60)


def test_after():
    pass
'''

# a C call that keeps the GIL and that no signal interrupts: a mutex locked twice by one
# thread (a deadlock); no Python thread runs again
HOLDS_THE_GIL = '''
import ctypes


def test_stuck_holding_the_gil():
    libc = ctypes.PyDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeros: PTHREAD_MUTEX_INITIALIZER of glibc
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


def test_after():
    pass
'''

STOPPED = '''
import time


def test_stopped_by_pytest_timeout():
    time.sleep(60)


def test_after():
    pass
'''

# after the last test, longer than the guard gives a test: it must have been cancelled
SLOW_FINISH = '''
import time


def pytest_sessionfinish(session):
    time.sleep(2.5)
'''


def inner_env(**extra: str) -> dict:
    """An inner pytest run's environment (processes.inner_pytest_env) without entry-point
    plugins: no launch_testing plugin, only those named with -p."""
    return inner_pytest_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", **extra)


def run_pytest(tmp_path: Path, source: str, conftest: Optional[str] = SLOW_FINISH,
               ini: str = "timeout_method = signal\nhang_guard_grace = 1\n",
               args: Sequence[str] = (), timeout: float = 50) -> tuple[subprocess.CompletedProcess, float]:
    """(the result, its seconds) of pytest with the guard on ``source`` as a test file, the
    ``conftest`` beside it (None: none), and ``timeout = 1`` plus ``ini`` as its settings."""
    (tmp_path / "test_case.py").write_text(source)
    if conftest is not None:
        (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 1\n" + ini)
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_timeout", "-p", "fixtures_hang_guard",
         "-p", "no:cacheprovider", "-q", *args, str(tmp_path / "test_case.py")],
        cwd=tmp_path, env=inner_env(), capture_output=True, text=True, timeout=timeout)
    return result, time.monotonic() - start


def test_a_test_stuck_out_of_pytest_timeouts_reach_ends_the_run_with_its_stack(tmp_path):
    result, took = run_pytest(tmp_path, STUCK)
    assert result.returncode == 1, result.stdout + result.stderr
    assert took < 30.0   # not the 60 s of the stuck call
    # on the real standard error: the guard's header, every thread's stack, and last the
    # summary, naming the test's line as the main thread's innermost call
    err = result.stderr
    assert ("+++ hang guard: test_case.py::test_stuck_where_no_alarm_reaches still running "
            "after 2 s") in err, err
    assert 'File "' in err and "in test_stuck_where_no_alarm_reaches" in err  # the dump
    last = err.strip().splitlines()[-3:]
    assert last[0] == ("+++ hang guard: where each thread of "
                       "test_case.py::test_stuck_where_no_alarm_reaches was (innermost call last) +++"), err
    assert last[1].startswith("  MainThread: "), err
    assert last[1].endswith("test_case.py:10 test_stuck_where_no_alarm_reaches"), err
    assert last[2] == "+++ hang guard: ended this test process (status 1) +++", err
    assert "Timeout (" not in err  # faulthandler's fallback was not needed
    # the run ended there: the next test never ran
    assert "passed" not in result.stdout


def test_a_test_stuck_holding_the_gil_is_ended_by_faulthandlers_fallback(tmp_path):
    result, took = run_pytest(tmp_path, HOLDS_THE_GIL)
    assert result.returncode == 1, result.stdout + result.stderr
    assert took < 30.0   # not the 60 s of the stuck call
    # the guard's thread never ran; faulthandler's C watchdog dumped at limit + FALLBACK_S
    err = result.stderr
    assert "+++ hang guard" not in err, err
    assert "Timeout (0:00:07)!" in err, err
    assert "in test_stuck_holding_the_gil" in err, err
    assert "passed" not in result.stdout


def test_a_test_pytest_timeout_stops_leaves_the_run_going(tmp_path):
    result, _ = run_pytest(tmp_path, STOPPED)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout, result.stdout
    assert "Timeout" in result.stdout   # pytest-timeout's failure
    # the guard was re-armed for the next test and called off after it
    assert "hang guard" not in result.stderr and "Timeout (" not in result.stderr, result.stderr


# a test file whose collection never ends: no test's limit runs (a worker stuck so kept
# xdist's controller waiting for ever)
HANGS_IN_COLLECTION = '''
import time
time.sleep(60)


def test_never_collected():
    pass
'''


@pytest.mark.parametrize("workers", [[], ["-p", "xdist.plugin", "-n", "2"]], ids=["serial", "xdist"])
def test_a_run_over_its_limit_is_interrupted_with_every_threads_stack(tmp_path, workers):
    result, took = run_pytest(tmp_path, HANGS_IN_COLLECTION, conftest=None,
                              ini="hang_guard_run_limit = 3\n", args=workers, timeout=100)
    err = result.stderr
    assert result.returncode == 2, result.stdout + err   # pytest's "interrupted"
    assert took < 40.0   # not the 60 s of the stuck collection
    assert "KeyboardInterrupt" in result.stdout, result.stdout  # pytest's own report of it
    assert "+++ hang guard: the test run still going after 3 s" in err, err
    last = err.strip().splitlines()
    assert last[-1] == ("+++ hang guard: 3 s is the run's limit (ini option hang_guard_run_limit; "
                        "COZMO_TEST_RUN_LIMIT_S=0 lifts it): interrupting the run +++"), err
    # where the run's main thread waited: in the stuck import, or for the stuck worker
    main = next(line for line in last if line.startswith("  MainThread: "))
    if workers:   # xdist's controller, waiting for its workers' news
        assert "dsession.py" in main and "loop_once" in main, err
    else:
        assert main.endswith("test_case.py:3 <module>"), err


# what a run does after its interruption instead of ending: waits (a thread of the guard
# can run), or sits in a C call that holds the GIL (none can: only faulthandler's C watchdog)
NEVER_ENDS = {
    "waits": """
import time


def pytest_unconfigure(config):
    time.sleep(60)
""",
    "holds_the_gil": """
import ctypes


def pytest_unconfigure(config):
    libc = ctypes.PyDLL(None)
    mutex = ctypes.create_string_buffer(64)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)
"""}


@pytest.mark.parametrize("end", sorted(NEVER_ENDS))
def test_a_run_that_does_not_end_after_its_interruption_is_ended(tmp_path, end):
    """hang_guard_grace seconds after the interruption the guard's thread ends the process;
    where the GIL is held, faulthandler's watchdog does, FALLBACK_S later."""
    # a grace of 3 s: the interrupted run's report (KeyboardInterrupt, at its session's end)
    # took more than 1 s on a loaded 2-core machine, and the guard ended it unprinted
    result, took = run_pytest(tmp_path, HANGS_IN_COLLECTION, conftest=NEVER_ENDS[end],
                              ini="hang_guard_run_limit = 3\nhang_guard_grace = 3\n", timeout=100)
    err = result.stderr
    assert result.returncode == 1, result.stdout + err
    assert took < 30.0   # not the 60 s of the sleep or the stuck call
    assert "KeyboardInterrupt" in result.stdout, result.stdout  # the run was interrupted
    assert "+++ hang guard: 3 s is the run's limit" in err, err
    if end == "waits":
        assert err.strip().splitlines()[-1] == ("+++ hang guard: the run did not end 3 s after "
                                                "the interruption: ended it (status 1) +++"), err
        assert "Timeout (" not in err, err
    else:   # the guard's thread never ran again; faulthandler dumped at 3 + FALLBACK_S
        assert "Timeout (0:00:08)!" in err, err
        assert "in pytest_unconfigure" in err and "did not end" not in err, err


def test_the_run_limit_must_be_a_number(tmp_path):
    (tmp_path / "test_case.py").write_text("def test_nothing():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "fixtures_hang_guard", "-p", "no:cacheprovider",
         "-q", str(tmp_path / "test_case.py")],
        cwd=tmp_path, env=inner_env(COZMO_TEST_RUN_LIMIT_S="forty minutes"), capture_output=True,
        text=True, timeout=60)
    assert result.returncode == 4, result.stdout + result.stderr   # a usage error
    assert ("COZMO_TEST_RUN_LIMIT_S (or ini option hang_guard_run_limit) must be a number of "
            "seconds, 0 for no limit, not 'forty minutes'") in result.stderr, result.stderr
