"""Parallel test runs (pytest-xdist, ``-n N``; ``./dev test`` runs 2 workers by default),
loaded by conftest.py as a plugin. conftest.py gives each worker a ROS_DOMAIN_ID of its own;
this plugin adds:

* **A realtime test runs alone.** A test marked ``realtime`` measures time or rates as they
  pass (a stream's frame rate, how long a stop takes); beside another worker's test it
  measures the machine's load. In a worker, every test holds the run lock shared and a
  realtime test holds it exclusively, so no other test runs while it does. A test first
  takes the gate, which only a realtime test keeps while it runs: once a realtime test
  waits, no further test starts, and it cannot be starved by the other workers' tests.
  The locks are taken before the test's pytest-timeout starts counting. A test marked
  ``alone`` runs alone in the same way: it watches something of the whole machine that
  another worker's test changes (Fast DDS's shared-memory files of a killed process, which
  were seen gone beside another worker's test; likely a participant starting there).
* **SIGTERM and SIGHUP stop the whole run.** By default they end the controller alone, and
  its workers go on running their tests; here the controller takes them as Ctrl-C (a
  KeyboardInterrupt), and xdist then stops its workers.

Without xdist's ``-n`` (or with ``-n 0``) it does nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import tempfile
from typing import Optional

import pytest

#: the gate and run lock files of a parallel run, joined by os.pathsep: made by the
#: controller before its workers start, which inherit the variable
RUN_LOCKS = "COZMO_TEST_RUN_LOCKS"


def _worker() -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


def _stop_as_interrupted(signum: int, frame) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "realtime: measures time or rates as they pass; in a "
                            "parallel run it runs alone (test/fixtures_parallel.py)")
    config.addinivalue_line("markers", "alone: watches machine-wide state that other tests "
                            "change; in a parallel run it runs alone (test/fixtures_parallel.py)")
    if _worker() or not getattr(config.option, "numprocesses", None):
        return
    paths = []
    for name in ("gate", "run"):
        fd, path = tempfile.mkstemp(prefix=f"cozmo-test-{name}-", suffix=".lock")
        os.close(fd)
        paths.append(path)
    os.environ[RUN_LOCKS] = os.pathsep.join(paths)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_as_interrupted)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _worker() or RUN_LOCKS not in os.environ:
        return
    for path in os.environ.pop(RUN_LOCKS).split(os.pathsep):
        with contextlib.suppress(OSError):
            os.unlink(path)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]):
    locks = os.environ.get(RUN_LOCKS) if _worker() else None
    if not locks:
        yield
        return
    gate_path, run_path = locks.split(os.pathsep)
    alone = any(item.get_closest_marker(name) is not None for name in ("realtime", "alone"))
    with open(gate_path) as gate, open(run_path) as run:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(run, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
            yield
        finally:
            fcntl.flock(run, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
