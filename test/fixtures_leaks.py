"""Processes a test left running (loaded by conftest.py as a plugin).

Every test that starts a program (a node, the simulator, ``ros2 launch``) must stop it.
One that outlives its test joins the run's ROS domain for the tests after it: a
leftover driver serves the same action names as the next test's driver and answers
its goals, a leftover node with the same name is refused by the next one's name guard.
Such failures show up tests later, far from the cause.

After each test, every process of this user that carries this run's ROS_DOMAIN_ID in
its environment (the test run's children and their children, however they were
started) and is still alive after a grace period is a leak: it is named in the test's
report (the test fails: a program that does not stop by itself is a defect) and killed,
so that the tests after it run in a clean domain.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

GRACE_S = 5.0   # a program stopping by itself (its lifeline, a shutdown) gets this long


def _run_processes(domain_id: str) -> Dict[int, str]:
    """pid -> command line of this user's processes in this run's ROS domain, other than
    this process (it reads /proc: Linux; nothing elsewhere)."""
    found: Dict[int, str] = {}
    me, uid = os.getpid(), os.getuid()
    marker = f"ROS_DOMAIN_ID={domain_id}".encode()
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            if stat[stat.rindex(")") + 2] == "Z":  # exited, not yet reaped by its parent
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return found


@pytest.fixture(autouse=True)
def no_leftover_processes(request: pytest.FixtureRequest, ros_domain_id: int) -> Iterator[None]:
    domain = str(ros_domain_id)
    before = set(_run_processes(domain))   # e.g. a session-wide simulator: not this test's
    yield
    deadline = time.monotonic() + GRACE_S
    left = {pid: cmd for pid, cmd in _run_processes(domain).items() if pid not in before}
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {pid: cmd for pid, cmd in _run_processes(domain).items() if pid not in before}
    if not left:
        return
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    names = "; ".join(f"pid {pid}: {cmd[:160]}" for pid, cmd in sorted(left.items()))
    pytest.fail(f"{request.node.nodeid} left {len(left)} process(es) running "
                f"{GRACE_S:.0f} s after it ended (killed now): {names}", pytrace=False)
