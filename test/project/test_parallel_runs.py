"""Parallel test runs (test/fixtures_parallel.py, conftest.py): real pytest-xdist runs of
small test files in a temporary directory, with the project's plugin (and, for the
domain ids, its conftest) loaded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from processes import alive as _alive
from processes import inner_pytest_env

RECORDING = '''
import json, os, time
from pathlib import Path
import pytest

def record(name):
    start = time.monotonic()
    time.sleep(0.6)
    Path(os.environ["INTERVALS"], name).write_text(json.dumps([start, time.monotonic()]))
'''


def _pytest(tmp_path: Path, *args: str, workers: int = 2) -> list:
    return [sys.executable, "-m", "pytest", "-p", "fixtures_parallel", "-p", "no:cacheprovider",
            "-n", str(workers), *args, str(tmp_path)]


def _recorded_run(tmp_path: Path, intervals: Path, tests: int, workers: int = 2) -> dict:
    """A parallel run (``--dist load``) of the RECORDING tests in ``tmp_path``, all ``tests``
    passing: each test's [start, end] by its name."""
    result = subprocess.run(_pytest(tmp_path, "--dist", "load", workers=workers),
                            env=inner_pytest_env(INTERVALS=str(intervals)),
                            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=100)
    assert result.returncode == 0, result.stdout
    assert f"{tests} passed" in result.stdout, result.stdout
    spans = {p.name: json.loads(p.read_text()) for p in intervals.iterdir()}
    assert len(spans) == tests, spans
    return spans


def _overlap(x, y) -> bool:
    return x[0] < y[1] and y[0] < x[1]

@pytest.mark.parametrize("marker", ["realtime", "alone"])
def test_a_realtime_or_alone_test_runs_with_no_other_test_beside_it(tmp_path, marker):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    intervals = tmp_path / "intervals"
    intervals.mkdir()
    # the marked test is collected first: each worker starts on one of the first tests,
    # so that without the lock the other worker's tests would run beside it
    (tmp_path / "test_a.py").write_text(
        RECORDING + f"\n@pytest.mark.{marker}\ndef test_alone():\n    record('alone')\n")
    for name in ("b", "c"):
        (tmp_path / f"test_{name}.py").write_text(RECORDING + "".join(
            f"\ndef test_{name}{i}():\n    record('{name}{i}')\n" for i in range(4)))
    spans = _recorded_run(tmp_path, intervals, 9)
    alone = spans.pop("alone")
    assert not [n for n, s in spans.items() if _overlap(s, alone)], (alone, spans)
    # the others did run two at a time: it is a parallel run
    assert any(_overlap(s, t) for n, s in spans.items() for m, t in spans.items() if n < m), spans



def test_heavy_tests_run_one_at_a_time_beside_the_others(tmp_path):
    """Two whole stacks at once, beside the other workers' tests, starved their simulators on
    a 2-core machine (no robot state for 3 s): a heavy test never runs beside another heavy
    one, but does beside a plain one."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    intervals = tmp_path / "intervals"
    intervals.mkdir()
    # heavy tests first, in two files: without the lock the first workers would take them at once
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(RECORDING + "".join(
            f"\n@pytest.mark.heavy\ndef test_heavy_{name}{i}():\n    record('heavy_{name}{i}')\n"
            for i in range(2)))
    (tmp_path / "test_c.py").write_text(RECORDING + "".join(
        f"\ndef test_c{i}():\n    record('c{i}')\n" for i in range(4)))
    spans = _recorded_run(tmp_path, intervals, 8, workers=3)
    heavy = {n: s for n, s in spans.items() if n.startswith("heavy")}
    plain = {n: s for n, s in spans.items() if not n.startswith("heavy")}
    assert len(heavy) == 4 and len(plain) == 4, spans
    assert not [(n, m) for n, s in heavy.items() for m, t in heavy.items() if n < m and _overlap(s, t)], heavy
    assert any(_overlap(s, t) for s in heavy.values() for t in plain.values()), spans

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_to_the_run_stops_its_workers(tmp_path, sig):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    started = tmp_path / "started"
    (tmp_path / "test_waiting.py").write_text(
        "import os, time\nfrom pathlib import Path\n\n"
        "def test_waits():\n"
        f"    Path({str(started)!r}).write_text(str(os.getpid()))\n"
        "    time.sleep(60)\n")
    log = tmp_path / "run.log"
    # output to a file, not a pipe: a pipe's reader would wait for the worker too (it
    # inherits the run's standard error), not for the run alone
    with open(log, "w") as out:
        proc = subprocess.Popen(_pytest(tmp_path), env=inner_pytest_env(), cwd=tmp_path,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    worker = None
    try:
        deadline = time.monotonic() + 60.0
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), log.read_text()
        time.sleep(0.2)
        worker = int(started.read_text())
        assert worker != proc.pid
        proc.send_signal(sig)   # to the controller alone
        proc.wait(timeout=30)
        out = log.read_text()
        assert proc.returncode != 0, out
        # by the time the run has ended: a worker that ends later (it notices its lost
        # controller when its test is done) outlives the run that the user saw end
        assert not _alive(worker), f"the run ended, its worker still runs its test\n{out}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if worker is not None and _alive(worker):
            os.kill(worker, signal.SIGKILL)


def test_each_worker_has_a_domain_of_its_own_when_the_caller_set_one(tmp_path):
    """A ROS_DOMAIN_ID set by the caller (a ROS user's shell often has one) was kept by every
    worker: the workers' tests met in one domain, and an action client took the other
    worker's server for its own (rclpy: "Ignoring unexpected goal response")."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    seen = tmp_path / "seen"
    seen.mkdir()
    for name in "abcd":
        (tmp_path / f"test_{name}.py").write_text(
            "import os, time\nfrom pathlib import Path\n\n"
            f"def test_{name}():\n"
            "    time.sleep(0.5)\n"
            f"    Path({str(seen)!r}, {name!r}).write_text("
            "os.environ['PYTEST_XDIST_WORKER'] + ' ' + os.environ['ROS_DOMAIN_ID'])\n")
    callers = os.environ["ROS_DOMAIN_ID"]  # held by this run: free for no one else either
    env = inner_pytest_env(ROS_DOMAIN_ID=callers)
    env.pop("COZMO_TEST_DOMAIN_RESERVED_BY", None)  # the caller set it, not a conftest
    result = subprocess.run(_pytest(tmp_path, "-p", "conftest", "--dist", "loadfile"), env=env,
                            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=100)
    assert result.returncode == 0, result.stdout
    assert "4 passed" in result.stdout, result.stdout
    domains = {}
    for path in seen.iterdir():
        worker, domain = path.read_text().split()
        domains.setdefault(worker, set()).add(domain)
    assert len(domains) == 2, domains  # both workers ran tests
    ids = [d for ds in domains.values() for d in ds]
    assert all(len(ds) == 1 for ds in domains.values()), domains
    assert len(set(ids)) == 2 and callers not in ids, (callers, domains)


# Files for --dist loadfile whose tests end their worker process (a crash, or the hang
# guard's exit): (test lines per file); "die" ends the worker, "ok" passes.
DEAD_WORKER_SUITES = {
    # the new worker gets the dead worker's file with one test left, and the rest of the
    # queue after it (xdist 3.8.0 alone: it waited for ever for a second test)
    "one_test_left": [["ok", "die", "ok"], ["ok", "ok"], ["ok", "ok"], ["ok", "ok"],
                      ["ok", "ok"]],
    # the worker dies in the last test of its file, then in a file's only test
    "last_and_only": [["ok", "ok", "die"], ["die"], ["ok"], ["ok", "ok", "ok"], ["ok"]],
    # two deaths in one file, one after the other, and another file's first test
    "twice_in_a_file": [["die", "die", "ok", "ok"], ["ok", "die"], ["ok", "ok", "ok"],
                        ["ok"], ["ok", "ok"], ["ok", "ok", "ok", "ok"]],
}


@pytest.mark.parametrize("suite", sorted(DEAD_WORKER_SUITES))
def test_a_worker_that_dies_fails_its_test_and_the_run_goes_on_to_the_end(tmp_path, suite):
    files = DEAD_WORKER_SUITES[suite]
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for number, tests in enumerate(files):
        (tmp_path / f"test_f{number}.py").write_text("import os\n" + "".join(
            f"\ndef test_{kind}{index}():\n    {'os._exit(3)' if kind == 'die' else 'pass'}\n"
            for index, kind in enumerate(tests)))
    died = sum(tests.count("die") for tests in files)
    passed = sum(tests.count("ok") for tests in files)
    # a few seconds; xdist 3.8.0 alone hung in each suite (killed here after 60 s)
    result = subprocess.run(_pytest(tmp_path, "--dist", "loadfile", "-rf"), env=inner_pytest_env(),
                            capture_output=True, text=True, timeout=60)
    output = result.stdout + result.stderr
    # every test ran once: the one a worker died in is failed and not run again (xdist
    # alone ran it again, killing the next worker), and every other test passed
    assert result.returncode == 1, output
    assert f"{died} failed, {passed} passed" in output, output
    assert output.count("crashed while running") == died, output
