"""The end of a node's process where destroying its DDS participant can hang forever.

What hangs. rmw_fastrtps destroys a context's DDS participant when the context's last
node is destroyed (``rcl_node_fini``), and first calls Fast DDS's
``DomainParticipant::set_listener(nullptr)``, which waits, with no time limit, until no
discovery callback of the participant is running. Fast DDS builds its waits on
``std::condition_variable::wait_until`` with ``steady_clock::time_point::max()``; where
the C++ library was built without ``pthread_cond_clockwait`` (the Fast DDS 2.14.5 of the
ROS 2 Jazzy wheels on PyPI), libstdc++ converts that deadline to the system clock, the
sum overflows to a time before 1970, and ``pthread_cond_timedwait`` refuses it
(EINVAL) at once *without releasing the mutex*. So if a discovery callback is under way
at that moment (another process's node appearing or going: every node of a ``ros2
launch`` stops at once on Ctrl-C), the callback can never take the mutex to say it is
done, and ``set_listener`` spins on its CPU forever, holding the mutex and, as rclpy
does not release it there, the Python GIL: the process answers neither SIGINT nor
SIGTERM. Seen in CI (``ros2 launch``: the description publisher killed by SIGKILL 15 s
after Ctrl-C) and reproduced here: about 1 stop in 100 of a description publisher and a
driver stopped together, the main thread at 100 % CPU in ``set_listener`` under
``rcl_node_fini``, a receive thread waiting for the mutex in ``onReaderDiscovery``.
Where ``pthread_cond_clockwait`` is used (apt's builds), the wait is a real wait and
nothing of this applies.

What is done instead, only where the loaded Fast DDS library has that flaw
(:func:`participant_teardown_can_hang`): before the process destroys its nodes, a hidden
node (``_cozmo_exit_<pid>``: no parameter services, no rosout) is made in the same
context (:func:`keep_participant`), so destroying the nodes announces that each is gone
(the ROS graph, their topics and services) but never destroys the participant; once
rclpy is shut down (which flushes its log files), the process ends with ``os._exit``
(:func:`end_process`), without the interpreter's finalization, which would otherwise
destroy the last node and the participant with it. The operating system releases the
participant's sockets; other processes forget the participant, which by then has no
node but the hidden one and no topic, after its discovery lease (20 s in Fast DDS).
Before that exit the participant's shared-memory segment is removed
(:func:`release_shared_memory`): Fast DDS removes it when it destroys the participant,
and nothing would remove it after a process that did not (``/dev/shm/fastrtps_<id>``
and its ``_el`` lock file, about 0.4 MB of memory per process). The ports' segments
(``fastrtps_port<N>``) are shared and reused, and stay.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any, Optional

__all__ = ["KEEPER_PREFIX", "end_process", "keep_participant", "participant_teardown_can_hang",
           "release_shared_memory"]

#: the hidden node's name, before the process id (a leading underscore hides a node from
#: ``ros2 node list``)
KEEPER_PREFIX = "_cozmo_exit_"

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
        except Exception:  # noqa: BLE001 - no verdict: the ordinary teardown
            _verdict = False
    return _verdict


def keep_participant(context: Any) -> Optional[Any]:
    """Where :func:`participant_teardown_can_hang`: a hidden node of ``context`` that holds
    the participant while the process's own nodes are destroyed (never destroy it: end
    the process with :func:`end_process`). None elsewhere, or if it cannot be made."""
    if not participant_teardown_can_hang():
        return None
    try:
        from rclpy.node import Node

        return Node(f"{KEEPER_PREFIX}{os.getpid()}", context=context,
                    start_parameter_services=False, enable_rosout=False,
                    use_global_arguments=False)
    except Exception:  # noqa: BLE001 - the ordinary teardown then
        return None


#: a participant's own segment's lock file, held open by its process (not a port's)
_OWN_SEGMENT_LOCK = re.compile(r"^(/dev/shm/fastrtps_[0-9a-f]+)_el$")


def release_shared_memory(fd_dir: str = "/proc/self/fd") -> list:
    """Remove the shared-memory segments of this process's own DDS participants: those
    whose ``_el`` lock file the process holds open (a segment of another process's is
    mapped only, never held so). The mappings stay valid until the process ends. Returns
    the paths removed."""
    removed = []
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return removed
    for fd in fds:
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        match = _OWN_SEGMENT_LOCK.match(target)
        if match is None:
            continue
        for path in (match.group(1), target):
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def end_process(status: int) -> None:
    """End the process now with ``status``, after flushing what Python buffers (standard
    output and error, the ``logging`` handlers) and removing the participant's
    shared-memory segment. For the end of a console script's ``main()`` once its nodes
    are destroyed and rclpy is shut down; never returns."""
    release_shared_memory()
    try:
        logging.shutdown()
    except Exception:  # noqa: BLE001 - the exit matters more than a handler
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream
            pass
    os._exit(status)
