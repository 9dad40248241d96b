"""The end of a node's process where destroying its DDS participant can hang forever.

What hangs. rmw_fastrtps destroys a context's DDS participant when the context's last
node is destroyed (``rcl_node_fini``), and first calls Fast DDS's
``DomainParticipant::set_listener(nullptr)``, which waits, with no time limit, until no
discovery callback of the participant is running. Fast DDS builds that wait on
``std::condition_variable::wait_until`` with ``steady_clock::time_point::max()``; where
the C++ library was built without ``pthread_cond_clockwait`` (the Fast DDS 2.14.5 of the
ROS 2 Jazzy wheels on PyPI), libstdc++ converts that deadline to the system clock, the
sum overflows to a time before 1970, and ``pthread_cond_timedwait`` refuses it
(EINVAL) at once *without releasing the mutex*. So if a discovery callback is under way
at that moment (another process's node appearing or going: every node of a ``ros2
launch`` stops at once on Ctrl-C), the callback can never take the mutex to say it is
done, and ``set_listener`` spins on its CPU forever, holding the mutex and, as rclpy
does not release it there, the Python GIL: the process answers neither SIGINT nor
SIGTERM, and no Python code of it runs again. Seen in CI (``ros2 launch``: the
description publisher killed by SIGKILL 15 s after Ctrl-C) and reproduced here in about
1 stop in 70 of a description publisher and a driver stopped together: the main thread
at 100 % CPU in ``set_listener`` under ``rcl_node_fini``, a receive thread waiting for
the mutex in ``onReaderDiscovery``. Where ``pthread_cond_clockwait`` is used (apt's
builds), the wait is a real wait and none of this applies.

What is done. The participant is destroyed as usual (so it announces that it is gone:
not destroying it at all, and ending the process, left the other processes sending to a
participant nobody read, and their own stops then stalled for 2 s now and then). Only
where the loaded library has the flaw (:func:`participant_teardown_can_hang`), a rescue
is armed first (:func:`arm_teardown_rescue`): a native timer of the C library
(``timer_create`` with ``SIGEV_THREAD``, which calls a C function on a thread of its
own, so that neither the GIL nor any Python code is needed) that, if the process still
runs when it expires, writes one line to standard error and ends the process with
``_exit`` and the status it was going to exit with. By then the nodes have stopped
everything and each has been announced gone from the ROS graph (rmw_fastrtps does that
before it destroys the participant); what is lost is only the participant's own
farewell, which other processes replace by its discovery lease running out.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any, Optional

__all__ = ["arm_teardown_rescue", "loaded_fastdds_library", "participant_teardown_can_hang",
           "waits_without_clockwait"]

#: what the library must import for its waits to be real waits
_CLOCKWAIT = b"pthread_cond_clockwait"

_verdict: Optional[bool] = None


def loaded_fastdds_library(maps: str = "/proc/self/maps") -> Optional[str]:
    """The path of the Fast DDS library this process has loaded (``libfastrtps`` up to
    2.x, ``libfastdds`` from 3.0), or None (none loaded, or no /proc)."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                path = line.rsplit(" ", 1)[-1].strip()
                name = os.path.basename(path)
                if name.startswith(("libfastrtps.so", "libfastdds.so")):
                    return path
    except OSError:
        return None
    return None


def waits_without_clockwait(path: str) -> bool:
    """Whether the shared library at ``path`` does not import ``pthread_cond_clockwait``
    (its name is then absent from the library's dynamic string table): its waits on a
    steady-clock deadline go through the system clock (see the module docstring)."""
    with open(path, "rb") as library:
        return _CLOCKWAIT not in library.read()


def participant_teardown_can_hang() -> bool:
    """Whether destroying this process's DDS participant can spin forever (see the module
    docstring): the middleware is rmw_fastrtps and the Fast DDS it loaded was built
    without ``pthread_cond_clockwait``. Asked once per process (after rclpy made a node,
    so that the library is loaded)."""
    global _verdict
    if _verdict is None:
        _verdict = False
        try:
            from rclpy.utilities import get_rmw_implementation_identifier

            if get_rmw_implementation_identifier().startswith("rmw_fastrtps"):
                path = loaded_fastdds_library()
                _verdict = path is not None and waits_without_clockwait(path)
        except Exception:  # noqa: BLE001 - no verdict: nothing is armed
            _verdict = False
    return _verdict


# --------------------------------------------------------------------------- the rescue

_SIGEV_THREAD = 2
_CLOCK_MONOTONIC = 1


class _Sigval(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]


class _SigevThread(ctypes.Structure):
    _fields_ = [("function", ctypes.c_void_p), ("attribute", ctypes.c_void_p)]


class _SigevUnion(ctypes.Union):
    _fields_ = [("pad", ctypes.c_int * 12), ("thread", _SigevThread)]


class _Sigevent(ctypes.Structure):  # struct sigevent of Linux (64 bytes)
    _fields_ = [("value", _Sigval), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("un", _SigevUnion)]


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("interval", _Timespec), ("value", _Timespec)]


#: what an armed rescue holds (its timers and their events)
_armed: list = []


def _c_function(libraries: Any, name: str) -> Any:
    for library in libraries:
        function = getattr(library, name, None)
        if function is not None:
            return function
    raise OSError(f"the C library has no {name}")


def _at(seconds: float, function: Any, value: _Sigval, libraries: Any) -> None:
    """Have the C library call ``function(value)`` on a thread of its own in ``seconds``."""
    timer_create = _c_function(libraries, "timer_create")
    timer_settime = _c_function(libraries, "timer_settime")
    event = _Sigevent()
    event.notify = _SIGEV_THREAD
    event.value = value
    event.un.thread.function = ctypes.cast(function, ctypes.c_void_p).value
    timer = ctypes.c_void_p()
    if timer_create(_CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)) != 0:
        raise OSError(ctypes.get_errno(), "timer_create failed")
    due = _Itimerspec()
    due.value.tv_sec = int(seconds)
    due.value.tv_nsec = int((seconds - int(seconds)) * 1e9)
    if timer_settime(timer, 0, ctypes.byref(due), None) != 0:
        raise OSError(ctypes.get_errno(), "timer_settime failed")
    _armed.append((timer, event))


def arm_teardown_rescue(seconds: float, message: str, status: int = 0) -> bool:
    """If this process still runs ``seconds`` from now, write ``message`` to standard error
    (as C's ``perror`` does: followed by ``: Success``) and end the process with ``status``,
    whatever it is doing, GIL held or not. For the last moments of a node's process, once
    its nodes have stopped everything and only their destruction is left. Returns whether
    it was armed (False where the C library has no such timers)."""
    try:
        libraries = [ctypes.CDLL(None, use_errno=True)]
        rt = ctypes.util.find_library("rt")  # timer_create lived in librt before glibc 2.34
        if rt:
            libraries.append(ctypes.CDLL(rt, use_errno=True))
        # C memory of its own, never freed: a Python buffer is freed as the interpreter ends,
        # which is when the rescue fires, and perror then wrote whatever lay there
        strdup = _c_function(libraries, "strdup")
        strdup.restype, strdup.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
        text = strdup(message.encode("utf-8", "replace"))
        if not text:
            return False
        _at(seconds, _c_function(libraries, "perror"), _Sigval(sival_ptr=text), libraries)
        _at(seconds + 0.05, _c_function(libraries, "_exit"), _Sigval(sival_int=int(status)),
            libraries)
        return True
    except (OSError, AttributeError, ValueError):
        return False
