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


#: how long the test waits for a process it ends, and for cozmo-demo's stack to follow it (s)
END_WAIT_S = 15.0


class OnATerminal:
    """The process ``python -m <argv>`` with its stdout on a pseudo-terminal (``master``, the
    terminal's master end), its stderr a pipe, TMPDIR a directory of its own. :meth:`close`
    ends whatever is left of it, however the test went."""

    def __init__(self, argv, tmp_path: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   TMPDIR=str(tmp_path / "tmp"))
        (tmp_path / "tmp").mkdir()
        self.said = b""                     # what it wrote on its terminal, as read so far
        self.master, slave = os.openpty()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *argv], stdin=subprocess.DEVNULL, stdout=slave,
                stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))  # (this test under nohup)
        except BaseException:
            os.close(self.master)
            raise
        finally:
            os.close(slave)

    def read_until(self, wanted: str, timeout: float) -> str:
        """What the process wrote on its terminal up to the first line holding ``wanted``."""
        proc, master = self.proc, self.master
        deadline = time.monotonic() + timeout
        while wanted.encode() not in self.said:
            left = deadline - time.monotonic()
            assert left > 0 and proc.poll() is None, \
                f"no {wanted!r} (exit {proc.poll()}): {self.said[-3000:]!r}"
            if select.select([master], [], [], min(left, 1.0))[0]:
                try:
                    chunk = os.read(master, 4096)
                except OSError:     # EIO: the process closed the terminal
                    chunk = b""
                assert chunk, f"the terminal closed: {self.said[-3000:]!r}"
                self.said += chunk
        return self.said.decode(errors="replace")

    def started(self) -> list:
        """The pids of the processes cozmo-demo said it started (its stack), as read so far."""
        return [int(p) for p in re.findall(rb"started \S+ \(\S+, pid (\d+)\)", self.said)]

    def close_terminal(self) -> None:
        if self.master is not None:
            os.close(self.master)
            self.master = None

    def hang_up(self, timeout: float) -> str:
        """Close the terminal, then SIGHUP the process; what it said on stderr, once it exited."""
        self.close_terminal()
        self.proc.send_signal(signal.SIGHUP)
        _, err = self.proc.communicate(timeout=timeout)
        return err

    def close(self) -> None:
        """The terminal closed, the process killed if it still runs (it shares this test's
        process group, so it alone), and then cozmo-demo's stack: each node in a session of
        its own, sent SIGTERM by Linux when the demo died (cozmo_driver.lifeline), is killed
        if it still runs after END_WAIT_S."""
        self.close_terminal()
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(END_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + END_WAIT_S
        while [pid for pid in self.started() if alive(pid)] and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in self.started():
            try:
                if alive(pid) and os.getsid(pid) == pid:    # (not a pid taken by another process)
                    os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.mark.slow
def test_the_protocol_demo_whose_terminal_closed_stops_the_robot_and_exits_129(tmp_path):
    """It exited 1 with a traceback (an OSError of printing "interrupted (SIGHUP): ..." on the
    hung-up terminal), and the status line after the signal was printed still."""
    demo = OnATerminal(["cozmo_driver.protocol_demo", "--duration", "30"], tmp_path)
    try:
        demo.read_until("DriveWheels", 20.0)                # the square is being driven
        err = demo.hang_up(15.0)
        assert (demo.proc.returncode, err) == (128 + signal.SIGHUP, ""), (demo.proc.returncode, err[-3000:])
    finally:
        demo.close()


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.heavy  # the whole stack: driver, simulator, face and behavior nodes
def test_cozmo_demo_whose_terminal_closed_stops_everything_and_exits_129(tmp_path):
    """It exited 1 with a traceback (a line printed on the hung-up terminal), its shutdown cut
    short: the bring-up's parameter files (cozmo_bringup_* in TMPDIR) were left behind. Its
    output gone, it stops the robot and every process, removes them and exits 129."""
    require("rclpy")
    for name in ("cozmo_driver_node", "cozmo_description_publisher"):
        project_executable(name)
    demo = OnATerminal(
        ["cozmo_driver.demo", "--artifacts", str(tmp_path / "artifacts"), "--duration", "80"], tmp_path)
    try:
        said = demo.read_until("side 1 of 4", 60.0)   # the square is being driven
        pids = demo.started()
        assert pids, said
        err = demo.hang_up(40.0)
        assert demo.proc.returncode == 128 + signal.SIGHUP and "Traceback" not in err, \
            (demo.proc.returncode, err[-3000:])
        assert not list((tmp_path / "tmp").glob("cozmo_bringup_*"))
        assert not [pid for pid in pids if alive(pid)]
    finally:
        demo.close()
