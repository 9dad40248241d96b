"""A process the bring-up starts ends when the bring-up ends, however the bring-up ends.

Both front-ends of the bring-up (``cozmo_bringup`` and ``cozmo.launch.py``) put
their own process id into :data:`PARENT_PID_ENV` of every process they start
(:func:`cozmo_driver.bringup_plan.child_environment`). Each of the project's
executables calls :func:`exit_with_parent` first: it asks Linux to send the
process SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``), SIGKILL
included, so that the nodes and the simulator stop as on any SIGTERM (in order,
exit 0) instead of running on with parent 1, as the simulator did after a
failed launch under launch_testing (issue #15). ``cozmo_bringup`` also sets the
signal in every child between fork and exec (:func:`parent_death_preexec`),
which covers executables that are not ours (robot_state_publisher, RViz); the launch
file starts those through this module (``python -m cozmo_driver.lifeline PROGRAM
ARGS``, :func:`main`), which sets the signal and then becomes the program (exec): launch
sets none, so a ``ros2 launch`` killed with SIGTERM or SIGKILL left them running.

Linux sends the signal when the *thread* that started the process ends, not
when its whole process does. Both front-ends start their children from their
main thread (``cozmo_bringup``'s run loop; launch's asyncio loop, which
launch_testing also runs on the main thread), so the two are the same here.

The parent may have died before the call: the process is then an orphan
already, and ends at once. The variable is removed from the environment, so
that a process started by this one does not take this one's parent for its own.
Elsewhere than on Linux nothing happens.

``ros2 run`` is the third way users start the executables, and it sets no variable:
it starts the executable from its main thread and waits for it, and it has no
handler for SIGTERM, so a SIGTERM (or SIGKILL) sent to it alone ended it and left
the driver running, holding the robot's link. :func:`exit_with_parent` therefore
also takes a direct parent whose command line is ``ros2 run`` for the bring-up.
(Ctrl-C in a terminal reaches both processes, as their process group; a SIGINT to
``ros2 run`` alone is passed on by nobody, and ``ros2 run`` waits on.)
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Callable, List, MutableMapping, Optional

__all__ = ["PARENT_PID_ENV", "set_parent_death_signal", "exit_with_parent", "is_ros2_run",
           "parent_death_preexec", "main"]


def _before_the_exec(signum: int, frame: object) -> None:
    """SIGINT before ``python -m cozmo_driver.lifeline`` becomes its program: nothing runs
    yet, nothing to stop (as the nodes' console scripts, cozmo_driver.ros.entry_points)."""
    os._exit(0)


# Run as a program (python -m), a Ctrl-C before the exec (the interpreter's first tenth of a
# second) ends it quietly, with status 0, instead of a KeyboardInterrupt traceback; the exec
# gives the program SIGINT at its default again. SIGTERM and SIGHUP are at their default
# (they print nothing). A SIGINT ignored at the start stays ignored; imported (every node
# imports this module) nothing is set.
if __name__ == "__main__" and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _before_the_exec)

#: The environment variable holding the pid of the bring-up that started the process.
PARENT_PID_ENV = "COZMO_PARENT_PID"

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _load_prctl() -> Optional[Callable[..., int]]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None


# Looked up once, at import: parent_death_preexec's function runs between fork and exec,
# where it must not load anything.
_PRCTL = _load_prctl()


def set_parent_death_signal(signum: int = signal.SIGTERM) -> bool:
    """Have Linux send ``signum`` to this process when the thread that started it ends;
    False where that is not available."""
    if _PRCTL is None:
        return False
    return _PRCTL(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0


def _ancestors(limit: int = 64):
    """The pids of this process's parent, its parent, and so on up to init."""
    pid = os.getppid()
    for _ in range(limit):
        if pid <= 1:
            return
        yield pid
        try:
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rsplit(") ", 1)[-1].split()[1])
        except (OSError, ValueError, IndexError):
            return


def exit_with_parent(signum: int = signal.SIGTERM,
                     environ: Optional[MutableMapping[str, str]] = None) -> bool:
    """If the bring-up started this process (:data:`PARENT_PID_ENV`), or ``ros2 run``
    did, end it with ``signum`` when that parent dies, and at once if it is already
    gone. Call it first thing in ``main()``, before any thread is started. Whether the
    signal was set."""
    env = os.environ if environ is None else environ
    value = env.pop(PARENT_PID_ENV, None)
    if not value:
        return _exit_with_ros2_run(signum)
    try:
        parent = int(value)
    except ValueError:
        return False
    if not set_parent_death_signal(signum):
        return False
    # Set after the parent died, no signal will come: the parent is gone when it is no
    # longer an ancestor of this process (this one was handed to init or a subreaper).
    # It need not be the direct parent: a launch prefix such as gdb may sit between.
    if parent not in _ancestors():
        os.kill(os.getpid(), signum)
    return True


def is_ros2_run(pid: int) -> bool:
    """Whether process ``pid`` is ``ros2 run`` (``[python] .../ros2 [options] run ...``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            argv = [arg.decode(errors="replace") for arg in stream.read().split(b"\0")]
    except OSError:
        return False
    for index, arg in enumerate(argv[:3]):
        if os.path.basename(arg) == "ros2":
            return "run" in argv[index + 1:index + 4]
    return False


def _exit_with_ros2_run(signum: int) -> bool:
    """The ``ros2 run`` case of :func:`exit_with_parent` (module docstring)."""
    parent = os.getppid()
    if parent <= 1 or not is_ros2_run(parent) or not set_parent_death_signal(signum):
        return False
    if os.getppid() != parent:  # it died before the signal was set: none will come
        os.kill(os.getpid(), signum)
    return True


def parent_death_preexec(signum: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child gets ``signum`` when the
    thread calling Popen ends (and exits at once if that already happened). Only a
    system call runs in the child between fork and exec."""
    parent = os.getpid()

    def preexec() -> None:
        set_parent_death_signal(signum)
        if os.getppid() != parent:
            os._exit(128 + int(signum))

    return preexec


#: the signals the Python interpreter ignores at its start (a program exec'd from it would
#: inherit them ignored: robot_state_publisher writing to a closed pipe lived on)
_IGNORED_BY_PYTHON = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ")
                           if hasattr(signal, name))


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m cozmo_driver.lifeline PROGRAM [ARGUMENT ...]``: :func:`exit_with_parent`,
    then PROGRAM in place of this process (same pid, environment without
    :data:`PARENT_PID_ENV`; Linux keeps the parent-death signal across exec). The launch
    file's prefix for the programs that are not ours; a user's own launch prefix
    (``ros2 launch --launch-prefix``) comes after it, as PROGRAM. Exit status 2 without a
    program, 127 for one that cannot be run, 0 (quietly) on a SIGINT before the exec."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("usage: python -m cozmo_driver.lifeline PROGRAM [ARGUMENT ...]", file=sys.stderr)
        return 2
    exit_with_parent()
    for signum in _IGNORED_BY_PYTHON:
        signal.signal(signum, signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"cozmo_driver.lifeline: cannot run {argv[0]}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main())
