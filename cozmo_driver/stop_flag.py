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

Ctrl-Z (SIGTSTP) is no stop: its default action suspends the process at once, and a program
that drives the robot left it driving on its last command for as long as it stayed suspended
(the robot keeps a motor command, also once its link ends). Such a program handles it
itself: :class:`CtrlZ`'s handler, which takes no lock either, only asks; the program's main
thread then stops the robot (a moment at most) and suspends the process for real
(:func:`suspend_process`, as the default action would have), and goes on after ``fg``.

The ROS nodes use :class:`cozmo_driver.ros._entry.StopSignals`, which also wakes their
executor; this module needs nothing but the standard library.
"""

from __future__ import annotations

import os
import select
import signal
import socket
from typing import Any, Callable, Iterable, List, Optional, Tuple

__all__ = ["CTRL_Z_STOPPED", "CtrlZ", "StopFlag", "ctrl_z_taken", "stop_signals", "suspend_process"]

#: what a program that stopped the robot on Ctrl-Z says before it is suspended (then what
#: ``fg`` does: the driver's "commands are taken again", the demos' own)
CTRL_Z_STOPPED = "suspended (Ctrl-Z): the robot was stopped"


def stop_signals() -> Tuple[int, ...]:
    """The signals that ask a program to stop: SIGINT, SIGTERM and SIGHUP (its terminal
    closed, an SSH session dropped: by default it ended the program at once, a robot it
    drove driving on its last command), but SIGHUP not where the program started with it
    ignored (``nohup``: it is to outlive its terminal)."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        return (signal.SIGINT, signal.SIGTERM)
    return (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def ctrl_z_taken() -> bool:
    """Whether a program that drives the robot is to handle Ctrl-Z (SIGTSTP) itself: not
    where it started with SIGTSTP ignored (its parent wants no suspension)."""
    return signal.getsignal(signal.SIGTSTP) != signal.SIG_IGN


def suspend_process(handler: Any) -> None:
    """Main thread: suspend this process as Ctrl-Z's default action does (SIGTSTP sent to
    itself at its default disposition: the shell says "Stopped" and ``fg`` continues it;
    Linux discards it, as it would the terminal's, in an orphaned process group, which no
    shell could continue), and once it goes on (SIGCONT), make ``handler`` SIGTSTP's
    handler again."""
    signal.signal(signal.SIGTSTP, signal.SIG_DFL)
    try:
        os.kill(os.getpid(), signal.SIGTSTP)   # returns once the process is continued
    finally:
        signal.signal(signal.SIGTSTP, handler)


class CtrlZ:
    """Ctrl-Z (SIGTSTP) for a program whose main thread waits with :meth:`StopFlag.wait`:
    :meth:`handle`, the handler, takes no lock; it writes one byte to a socket pair that
    ``StopFlag.wait(timeout, also=ctrl_z)`` watches too. The main thread then calls
    :meth:`take` (whether a Ctrl-Z came since, each taken once) and, for one, stops what
    it drives and calls :meth:`suspend`. :meth:`close` frees the sockets."""

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    def handle(self, signum: int, frame: Any = None) -> None:
        """The handler: one byte (a full socket already holds one; a closed one: nothing)."""
        try:
            self._writer.send(b"\0")
        except OSError:
            pass

    def fileno(self) -> int:
        return self._reader.fileno()

    def take(self) -> bool:
        """Whether Ctrl-Z came since the last call (the bytes read: none is lost to a
        handler that runs meanwhile, it is taken by the next call)."""
        came = False
        while True:
            try:
                data = self._reader.recv(64)
            except (BlockingIOError, InterruptedError):
                return came
            except OSError:   # closed
                return False
            if not data:
                return came
            came = True

    def install(self) -> Callable[[], None]:
        """Make :meth:`handle` SIGTSTP's handler (main thread), unless SIGTSTP was ignored
        (:func:`ctrl_z_taken`); return a function that puts the earlier handler back."""
        if not ctrl_z_taken():
            return lambda: None
        previous = signal.signal(signal.SIGTSTP, self.handle)
        return lambda: signal.signal(signal.SIGTSTP, previous)

    def suspend(self) -> None:
        """Main thread: :func:`suspend_process`, this handler back after ``fg``."""
        suspend_process(self.handle)

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


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

    def wait(self, timeout: Optional[float] = None, also: Optional[CtrlZ] = None) -> bool:
        """Block until the flag is set or ``timeout`` seconds (None: no limit) have
        passed, or ``also`` has a Ctrl-Z to take; return whether the flag is set, as
        ``threading.Event.wait`` does."""
        if self._set or self._closed:
            return self._set
        try:
            select.select([self._reader] + ([also] if also is not None else []), [], [],
                          None if timeout is None else max(0.0, timeout))
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
