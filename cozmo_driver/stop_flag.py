"""A stop request that a signal handler can make without taking a lock.

Python runs a signal handler in the main thread between two bytecodes, also while that
thread is inside ``threading.Event.wait``, ``queue.Queue.get`` or any other code that
holds a ``threading`` lock for a moment. A handler that then calls ``Event.set()`` or
``Queue.put()`` asks for the same lock, which its own thread holds and will never
release: the program hangs instead of stopping. (The likeliest reason why a ``cozmo-sim``
once outlived its killed bring-up, on a loaded machine.)

:class:`StopFlag` has the part of ``threading.Event`` that a stop needs (``set``,
``is_set``, ``wait``) and a handler, :meth:`StopFlag.handle`, that takes no lock: it
appends the signal's number to a list and writes one byte to a socket pair, whose other
end :meth:`StopFlag.wait` watches with ``select``. The byte is never read, so once set
the flag stays set and wakes every waiter, present and future.

The ROS nodes use :class:`cozmo_driver.ros._entry.StopSignals`, which also wakes their
executor; this module needs nothing but the standard library.
"""

from __future__ import annotations

import select
import signal
import socket
from typing import Any, Callable, Iterable, List, Optional, Tuple

__all__ = ["StopFlag", "stop_signals"]


def stop_signals() -> Tuple[int, ...]:
    """The signals that ask a program to stop: SIGINT, SIGTERM and SIGHUP (its terminal
    closed, an SSH session dropped: by default it ended the program at once, a robot it
    drove driving on its last command), but SIGHUP not where the program started with it
    ignored (``nohup``: it is to outlive its terminal)."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        return (signal.SIGINT, signal.SIGTERM)
    return (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopFlag:
    """Set once, by a signal handler (:meth:`handle`) or any thread (:meth:`set`); read
    with :meth:`is_set`; waited for with :meth:`wait`. :meth:`close` (or the ``with``
    block's end) frees its two sockets; after it, :meth:`set` and :meth:`handle` still
    mark the flag and :meth:`wait` returns at once. Close it only once no thread waits on
    it any more."""

    def __init__(self) -> None:
        self._set = False
        #: the numbers of the signals :meth:`handle` received, in order
        self.signals: List[int] = []
        self._reader, self._writer = socket.socketpair()
        self._writer.setblocking(False)
        self._closed = False

    # --- what a signal handler and the other threads call

    def handle(self, signum: int, frame: Any = None) -> None:
        """The signal handler: note ``signum`` and set the flag. It calls nothing that
        takes a lock (a test checks that under ``sys.setprofile``)."""
        self.signals.append(signum)     # list.append is atomic and lock-free in CPython
        self.set()

    def set(self) -> None:
        """Set the flag and wake every :meth:`wait`."""
        self._set = True
        try:
            self._writer.send(b"\0")
        except OSError:     # full (the waiters were woken already) or closed
            pass

    def is_set(self) -> bool:
        return self._set

    @property
    def signum(self) -> Optional[int]:
        """The first signal :meth:`handle` received, None if none did."""
        return self.signals[0] if self.signals else None

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the flag is set or ``timeout`` seconds (None: no limit) have
        passed; return whether it is set, as ``threading.Event.wait`` does."""
        if self._set or self._closed:
            return self._set
        try:
            select.select([self._reader], [], [], None if timeout is None else max(0.0, timeout))
        except (OSError, ValueError):   # closed meanwhile
            pass
        return self._set

    # --- set-up

    def install(self, signals: Optional[Iterable[int]] = None) -> Callable[[], None]:
        """Make :meth:`handle` the handler of ``signals`` (from the main thread; default:
        :func:`stop_signals`); return a function that puts the earlier handlers back."""
        previous = {sig: signal.signal(sig, self.handle) for sig in (stop_signals() if signals is None else signals)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._reader.close()
        self._writer.close()

    def __enter__(self) -> "StopFlag":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
