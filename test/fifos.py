"""Calling what may wait for a writer of a FIFO (named pipe), bounded: a call that waits is
let go (a writer opens the FIFO and closes it at once) and the test fails, rather than
hanging the run."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Callable, Union

#: how long a call may take before it counts as waiting for a writer, s (the bound of a call
#: that waits for ever, not of one that works)
WAIT_BOUND_S = 10.0


def without_waiting_for(fifo: Union[str, "os.PathLike[str]"], call: Callable[[], Any]) -> Any:
    """What ``call()`` returns, or raises, run in a thread; AssertionError if it was still
    waiting after :data:`WAIT_BOUND_S` (for a writer of ``fifo``, which then lets it go)."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            outcome["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WAIT_BOUND_S)
    blocked = thread.is_alive()
    if blocked:  # let its open end, so that the test ends
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(WAIT_BOUND_S)
    assert not blocked, f"waited for a writer of the FIFO {fifo}"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
