"""The demos when their terminal closes (an SSH session dropped): SIGHUP, then every write
to the terminal fails (EIO). docs/demo.md: 129, after stopping the robot (and, for
cozmo-demo, every process). Each demo runs as its own process on a pseudo-terminal whose
master end the test closes before it sends SIGHUP, as a terminal's closing does."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dependencies import require
from processes import alive, project_executable

ROOT = Path(__file__).resolve().parents[2]


def started_on_a_terminal(argv, tmp_path: Path):
    """(the process ``python -m <argv>`` with its stdout on a pseudo-terminal, the
    terminal's master end): its stderr a pipe, TMPDIR a directory of its own."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", *argv], stdin=subprocess.DEVNULL, stdout=slave,
            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))  # (this test under nohup)
    finally:
        os.close(slave)
    return proc, master


def read_until(master: int, proc, wanted: str, timeout: float) -> str:
    """What the process wrote on its terminal up to the first line holding ``wanted``."""
    text = b""
    deadline = time.monotonic() + timeout
    while wanted.encode() not in text:
        left = deadline - time.monotonic()
        assert left > 0 and proc.poll() is None, f"no {wanted!r} (exit {proc.poll()}): {text[-3000:]!r}"
        if select.select([master], [], [], min(left, 1.0))[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:     # EIO: the process closed the terminal
                chunk = b""
            assert chunk, f"the terminal closed: {text[-3000:]!r}"
            text += chunk
    return text.decode(errors="replace")


def hang_up(proc, master: int, timeout: float) -> str:
    """Close the terminal, then SIGHUP the process; what it said on stderr, once it exited."""
    os.close(master)
    proc.send_signal(signal.SIGHUP)
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    return err


@pytest.mark.slow
def test_the_protocol_demo_whose_terminal_closed_stops_the_robot_and_exits_129(tmp_path):
    """It exited 1 with a traceback (an OSError of printing "interrupted (SIGHUP): ..." on the
    hung-up terminal), and the status line after the signal was printed still."""
    proc, master = started_on_a_terminal(["cozmo_driver.protocol_demo", "--duration", "30"], tmp_path)
    read_until(master, proc, "DriveWheels", 20.0)          # the square is being driven
    err = hang_up(proc, master, 15.0)
    assert (proc.returncode, err) == (128 + signal.SIGHUP, ""), (proc.returncode, err[-3000:])


@pytest.mark.ros
@pytest.mark.slow
def test_cozmo_demo_whose_terminal_closed_stops_everything_and_exits_129(tmp_path):
    """It exited 1 with a traceback (a line printed on the hung-up terminal), its shutdown cut
    short: the bring-up's parameter files (cozmo_bringup_* in TMPDIR) were left behind. Its
    output gone, it stops the robot and every process, removes them and exits 129."""
    require("rclpy")
    for name in ("cozmo_driver_node", "cozmo_description_publisher"):
        project_executable(name)
    proc, master = started_on_a_terminal(
        ["cozmo_driver.demo", "--artifacts", str(tmp_path / "artifacts"), "--duration", "80"], tmp_path)
    said = read_until(master, proc, "side 1 of 4", 60.0)   # the square is being driven
    pids = [int(p) for p in re.findall(r"started \S+ \(\S+, pid (\d+)\)", said)]
    assert pids, said
    err = hang_up(proc, master, 40.0)
    assert proc.returncode == 128 + signal.SIGHUP and "Traceback" not in err, (proc.returncode, err[-3000:])
    assert not list((tmp_path / "tmp").glob("cozmo_bringup_*"))
    assert not [pid for pid in pids if alive(pid)]
