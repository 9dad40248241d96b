"""A line for the user on an output that may be gone.

A program's terminal can close under it (an SSH session dropped: SIGHUP, then every write
fails with EIO) and the reader of its pipe can leave (``cozmo-sim | head -2``: EPIPE). A
program that says what it does while it stops, or as it serves on, must not die of saying
it: :func:`say` drops a line that cannot be written, and the program goes on.
"""

from __future__ import annotations

import sys
from typing import Optional, TextIO

__all__ = ["say"]


def say(text: str, file: Optional[TextIO] = None) -> bool:
    """Print ``text`` on ``file`` (default: ``sys.stdout``) and flush it; whether it was written.

    An output that is gone (OSError: a closed pipe, a terminal hung up; ValueError: the file
    closed) drops the line, and nothing is raised."""
    try:
        print(text, file=sys.stdout if file is None else file, flush=True)
    except (OSError, ValueError):
        return False
    return True
