#!/usr/bin/env python3
"""Remove the Fast DDS shared-memory files that dead processes left in /dev/shm.

Fast DDS (the middleware of the ROS 2 wheels, and Jazzy's default) keeps each
shared-memory segment and port of a process as a file in /dev/shm, with a lock file
beside it (the same name + ``_el`` or ``_sl``) that the process holds locked (flock)
while it lives; a port also has a semaphore file, ``sem.<port>_mutex``. A process
killed with SIGKILL leaves them behind, and later processes then failed to open the
port ("open_and_lock_file failed"). A lock file that can be locked exclusively at once
belongs to no living process: it goes, with its data file and its port's semaphore,
removed while the lock is held so that no process starting meanwhile takes the port
being removed. The rule of ``fastdds shm clean``, whose script the PyPI wheels of
ros-fastrtps for Python 3.10 do not ship.

Usage: ``shm_clean.py [DIRECTORY]`` (default /dev/shm). Prints the number of files
removed; a file it cannot open or remove is left alone. Stdlib only: ./dev runs it
with the test run's interpreter before each pytest run.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
from typing import List

#: a lock file of a port (fastrtps_port7001_el) or of a segment (16 lowercase letters or
#: digits); group 1 is its data file's name
LOCK_FILE = re.compile(r"^(fastrtps_(?:port\d{1,5}|[0-9a-z]{16}))_(?:el|sl)$")


def _remove(path: str, removed: List[str]) -> None:
    try:
        os.remove(path)
    except OSError:  # gone already, or not ours to remove
        return
    removed.append(path)


def clean(directory: str = "/dev/shm") -> List[str]:
    """Remove the files of every lock in ``directory`` that no process holds; return the
    paths removed."""
    removed: List[str] = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return removed
    for name in names:
        match = LOCK_FILE.match(name)
        if match is None:
            continue
        lock = os.path.join(directory, name)
        try:
            handle = open(lock, "ab")  # appends nothing; opens without truncating
        except OSError:
            continue
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a living process holds it
            data = match.group(1)
            _remove(os.path.join(directory, data), removed)
            if data.startswith("fastrtps_port"):
                _remove(os.path.join(directory, f"sem.{data}_mutex"), removed)
            _remove(lock, removed)
    return removed


def main(argv: List[str]) -> int:
    print(len(clean(*argv[:1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
