"""Helpers of the tests that start whole programs (the bring-up, the demo): a free UDP
port on 127.0.0.1, whether a process is still running, and where the project's own
executables are installed."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

__all__ = ["alive", "free_udp_port", "project_executable"]


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
