"""Parallel test runs (pytest-xdist, ``-n N``; ``./dev test`` runs 4 workers by default),
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
* **One heavy test at a time.** A test marked ``heavy`` starts a whole stack (cozmo-demo's
  driver, simulator, face and behavior processes, or several of them): it runs beside other
  tests, but never beside another heavy one. Two of them at once, beside the other workers,
  starved their simulators of the CPU on a 2-core machine for seconds (no robot state for
  3 s: the driver took the robot for lost). A heavy test takes the heavy lock before the
  gate, and lets it go last.
* **SIGTERM and SIGHUP stop the whole run.** By default they end the controller alone, and
  its workers go on running their tests; here the controller takes them as Ctrl-C (a
  KeyboardInterrupt), and xdist then stops its workers.
* **A worker that dies does not hang the run.** When a worker process ends in the middle
  of a test (a crash, or the hang guard of test/fixtures_hang_guard.py ending a stuck
  test), xdist reports that test failed and starts a new worker. Its ``--dist loadfile``
  scheduler (3.8.0) then went wrong in three ways, and the run hung until whoever started
  it gave up (a CI run did, after 90 minutes; pytest-xdist issues 784 and 1378):

  - it put the dead worker's files back on the queue whole: the test it died in ran again
    (and killed the next worker, for a test that always crashes), and finished files came
    back as work with nothing left to run;
  - a worker runs a test only once it has the next one (or the end of the run): given the
    one test left of a file and nothing after it, the new worker waited for ever;
  - it gave work to a new worker still collecting (lost, with the dead worker's failed
    test) and stopped the run when it sent work to a worker that had just died.

  The scheduler here is xdist's own with those steps changed: it puts back only the tests
  the dead worker did not reach, gives a worker files until it has two tests or the queue
  is empty, and gives none to a worker that is still collecting or gone.

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
    config.addinivalue_line("markers", "heavy: starts a whole stack of processes; in a parallel "
                            "run no other heavy test runs beside it (test/fixtures_parallel.py)")
    if _worker() or not getattr(config.option, "numprocesses", None):
        return
    paths = []
    for name in ("gate", "run", "heavy"):
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
    gate_path, run_path, heavy_path = locks.split(os.pathsep)
    alone = any(item.get_closest_marker(name) is not None for name in ("realtime", "alone"))
    heavy = item.get_closest_marker("heavy") is not None
    with contextlib.ExitStack() as held:  # let go in reverse: the run lock, the gate, the heavy lock
        gate, run, heavy_lock = (held.enter_context(open(path)) for path in (gate_path, run_path, heavy_path))
        if heavy:  # before the gate: a heavy test waiting for another holds up no one
            _hold(held, heavy_lock, fcntl.LOCK_EX)
        _hold(held, gate, fcntl.LOCK_EX)
        _hold(held, run, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield


def _hold(held: contextlib.ExitStack, lock_file, mode: int) -> None:
    """``flock`` ``lock_file`` in ``mode`` until ``held`` ends."""
    fcntl.flock(lock_file, mode)
    held.callback(fcntl.flock, lock_file, fcntl.LOCK_UN)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile``'s scheduler, which survives a worker that dies (module docstring);
    None (xdist's own) for every other distribution mode."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class DeadWorkerSafeScheduling(LoadFileScheduling):

        def remove_node(self, node):
            """Forget ``node``; if it died with tests left, give the ones after the test it
            died in to the other workers, and return that test (reported failed by xdist,
            not run again)."""
            workload = self.assigned_work.pop(node)
            left = [(scope, nodeid) for scope, unit in workload.items()
                    for nodeid, done in unit.items() if not done]
            if not left:
                return None
            # the worker runs its tests in the order given: the first one not done is the
            # one it was running
            scope, died_in = left[0]
            workload[scope][died_in] = True
            for scope, unit in workload.items():
                if not all(unit.values()):
                    self.workqueue[scope] = unit
            for other in self.assigned_work:
                self._reschedule(other)
            return died_in

        def _reschedule(self, node):
            # A new worker that has not finished collecting gets its work when it has
            # (``schedule``). xdist gave it work at once when another worker died: the
            # unit was lost, and so was the dead worker's failed test (a KeyError that
            # xdist takes for "not a node of the scheduler").
            if node not in self.registered_collections:
                return
            super()._reschedule(node)
            # A worker starts a test only once it has the one after it (or the end of the
            # run): a new worker given a file with one test left, and no more, would wait
            # for ever while the rest of the queue waits for it.
            while (self.workqueue and not node.shutting_down
                   and self._pending_of(self.assigned_work[node]) < 2):
                if not self._assign_work_unit(node):
                    return

        def _assign_work_unit(self, node):
            """Send ``node`` the next file's tests; False if it is gone."""
            try:
                super()._assign_work_unit(node)
            except OSError:
                # It died after its last report: the news of its death, still queued,
                # puts the file back with the rest of its work (``remove_node``). xdist
                # stopped the whole run with an internal error here.
                return False
            return True

    return DeadWorkerSafeScheduling(config, log)
