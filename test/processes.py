"""Helpers of the tests that start whole programs (the bring-up, the demo): a free UDP
port on 127.0.0.1, whether a process is still running, where the project's own
executables are installed, and the parameter files a bring-up generated for them."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

__all__ = ["alive", "free_udp_port", "project_executable", "generated_parameter_directories"]


def project_executable(name: str) -> Path:
    """Where the project's console script ``name`` is installed: ``lib/cozmo_driver/`` of
    the ament index (a colcon install), else the directory of this Python (the wheel
    venv's ``bin``). Every set-up installs them all, so a missing one fails the test."""
    from cozmo_driver import bringup_plan as plan

    path = plan.locate_executable(plan.PACKAGE, name)
    if path is None:
        pytest.fail(f"{name} is not installed: run ./dev setup (or colcon build)", pytrace=False)
    return path


def free_udp_port() -> int:
    """A UDP port on 127.0.0.1 that nobody had bound a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs: a zombie (exited, not yet reaped by its parent)
    does not, and neither does a pid now taken by somebody else's process."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except OSError:
        return True


def generated_parameter_directories(pids) -> set:
    """The directories of the parameter files a bring-up generated (cozmo_bringup's
    ``cozmo_bringup_*``, the launch file's ``cozmo_launch_*``) named on the command lines
    of the processes ``pids``: a bring-up killed with SIGKILL cannot remove them itself."""
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                args = [arg.decode(errors="replace") for arg in stream.read().split(b"\0")]
        except OSError:
            continue
        for option, value in zip(args, args[1:]):
            directory = Path(value).parent
            if option == "--params-file" and directory.name.startswith(("cozmo_bringup_",
                                                                        "cozmo_launch_")):
                found.add(directory)
    return found


class TellsItsLog:
    """``with TellsItsLog(proc, "the driver"):`` around assertions on a running program: an
    assertion that fails kills the program and adds the end of what it wrote to stderr,
    which is where the reason is (a name guard refusing, a lost connection...)."""

    def __init__(self, proc, who: str, tail: int = 4000) -> None:
        self.proc, self.who, self.tail = proc, who, tail

    def __enter__(self) -> "TellsItsLog":
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is None or not issubclass(kind, AssertionError):
            return False
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            _, err = self.proc.communicate(timeout=10.0)
        except Exception as comm_exc:  # noqa: BLE001 - the assertion is what matters
            err = f"(its log could not be read: {comm_exc})"
        raise AssertionError(f"{exc}\n--- {self.who} wrote (exit {self.proc.returncode}):\n"
                             f"{(err or '')[-self.tail:]}") from None
