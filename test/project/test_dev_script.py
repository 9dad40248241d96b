"""./dev test stops when it is told to: a SIGTERM (a CI time limit) or SIGINT (Ctrl-C)
during the wheel-venv tests ends those tests and the whole command; it does not go on to
set up and test the kit environment. The real ./dev runs here, in the wheel mode, on a
one-test pytest file that waits to be stopped, with a stand-in kit directory whose
install.sh would only show that the kit step began."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WAITING_TEST = '''
import os
import time
from pathlib import Path


def test_waits_to_be_stopped():
    Path(os.environ["DEV_TEST_STARTED"]).write_text(str(os.getpid()))
    time.sleep(90)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_during_the_wheel_tests_ends_the_whole_run(tmp_path, sig):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_waiting.py").write_text(WAITING_TEST)
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "install.sh").write_text("echo 'the kit step began' >&2\nexit 1\n")
    started = tmp_path / "started"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ROS_DISTRO", "AMENT_", "COLCON_", "PYTEST_"))}
    env.update(COZMO_ROS_UPSTREAM=str(kit), DEV_TEST_STARTED=str(started))
    proc = subprocess.Popen(
        ["bash", str(ROOT / "dev"), "test", str(tmp_path / "test_waiting.py"), "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
        # SIGINT at its default disposition, as in a terminal, whatever this run has (a run
        # in the background of a non-interactive shell inherits it ignored, and a shell
        # started with a signal ignored cannot trap it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    inner = None
    try:
        deadline = time.monotonic() + 100.0   # a set-up of .venv if it is missing or stale
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), proc.communicate(timeout=10)[0] if proc.poll() is not None else "no start"
        time.sleep(0.2)
        inner = int(started.read_text())
        proc.send_signal(sig)   # to ./dev alone, as a CI runner's time limit does
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode != 0, out
    assert f"dev: stopped by {sig.name} during the wheel-venv tests" in out, out
    assert "setup: kit environment" not in out and "the kit step began" not in out, out
    assert not _alive(inner), "the wheel-venv pytest still runs"
