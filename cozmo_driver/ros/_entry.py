"""The shape the nodes' console-script ``main()`` share, and their orderly stop.

``init(args)`` initialises rclpy *without* its SIGINT and SIGTERM handlers (where rclpy
lets us: Humble and later) and puts :class:`StopSignals` in their place, for SIGHUP too (the
terminal of a ``ros2 launch``, ``ros2 run`` or of the node itself closed, an SSH session
dropped: its default action ended the process with the motors running; a SIGHUP ignored
when the process started, as ``nohup`` does, stays ignored). rclpy's own
handlers shut the context down the moment a signal arrives, under whatever still runs:
the driver's I/O thread then published ``joint_states`` into a dead context (an
``[ERROR] event handler failed``), and the description publisher's ``take_message`` hit
a shut-down subscription (``RuntimeError: Unable to convert call argument '0'``,
uncaught). Here a signal only asks the node to stop; the context stays up until the node
has stopped its threads and timers.

``make_node(prog, factory, errors)`` makes the node (a bad parameter or configuration: a
message on stderr, rclpy shut down, and the caller exits with 2). ``spin_node(node, start,
stop)`` (``spin_nodes`` for several nodes of one process) spins it on a single-threaded
executor until SIGINT, SIGTERM, SIGHUP or an external shutdown, then, in this order:
``stop(executor)`` (the node's threads and timers end; the executor and the context
are still up), the executor, the node, rclpy's context. Where the Fast DDS library of
this process can hang forever in the destruction of its DDS participant (the PyPI
wheels), a native timer armed before the last node is destroyed ends the process with
status 0 if that takes more than :data:`TEARDOWN_RESCUE_S`
(:mod:`cozmo_driver.ros.participant_exit`); a node refused while being made is destroyed
under the same timer, with status 2, and the stop deadline below
(:func:`protect_refused_teardown`).

How a signal ends the spin without polling: Python runs a signal handler only when the
main thread is back in Python code, and the executor's wait is C code that nothing but
the node's own entities wakes. So the signal module writes each signal's number to a
socket (``signal.set_wakeup_fd``); a thread blocked on that socket's other end marks the
stop and triggers a guard condition of the node, which wakes the executor's wait; the
spin loop sees the mark and ends. A second signal while the node stops changes nothing
(the stop is bounded); the process exits 0 on SIGINT, SIGTERM and SIGHUP alike. From the first
stop request on, the process has :data:`STOP_DEADLINE_S` to end, or faulthandler's
watchdog prints every thread's stack and ends it with status 1 (:func:`arm_stop_deadline`).

Ctrl-Z (SIGTSTP) in a process whose node drives the robot (``spin_nodes``' ``suspend``: the
driver, ``cozmo_stack`` with the driver): its default action suspended the process with the
robot driving on its last command, the cmd_vel watchdog suspended with it. It comes the same
way (the wake-up socket, the thread, the guard condition), as a request to suspend; the spin
loop, on the executor, calls ``suspend()`` (the driver stops the robot, a moment at most),
then suspends the process as the default action does (``stop_flag.suspend_process``); after
``fg`` (SIGCONT) it calls what ``suspend()`` returned and spins on. A SIGTSTP ignored at the
start stays ignored; the other nodes keep its default action.
"""

from __future__ import annotations

import atexit
import faulthandler
import gc
import os
import re
import signal
import socket
import sys
import threading
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Type

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from ..stop_flag import ctrl_z_taken, suspend_process
from ._compat import InvalidHandle, try_shutdown
from .name_guard import NameGuard
from .participant_exit import arm_teardown_rescue, participant_teardown_can_hang

try:
    from rclpy.executors import ExternalShutdownException
except ImportError:  # pragma: no cover - older rclpy
    class ExternalShutdownException(Exception):
        pass

__all__ = ["DoubleParameters", "STOP_DEADLINE_S", "StopSignals", "arm_stop_deadline", "destroy_waitables", "init",
           "make_node", "parameter_error", "protect_refused_teardown", "refuse", "release_native",
           "spin_node", "spin_nodes"]

#: the signals that stop a node (SIGHUP only where it was not ignored: see StopSignals.install)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: the longest a node's process may take to stop, from the first stop request (a signal,
#: a refusal) or the end of its spin, before :func:`arm_stop_deadline`'s watchdog ends it:
#: before both front-ends' SIGKILL (cozmo_bringup 7 s after SIGINT, ros2 launch 15 s), far
#: above a stop's usual 0.05-1 s
STOP_DEADLINE_S = 6.0
_QUIT = b"\x00"  # what StopSignals.close writes to end its thread (no signal has number 0)


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP as a request to stop (see the module docstring).

    :meth:`install` (main thread only) puts the handlers in place; :meth:`attach` gives it
    the node whose executor it wakes; :attr:`requested` is set once a signal came (or
    :meth:`request` was called); :meth:`close` ends the wake-up thread. The handlers stay
    in place after :meth:`close`: a late signal while the process exits is ignored rather
    than raising KeyboardInterrupt in the middle of the interpreter's shutdown."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        #: a Ctrl-Z came that the spin has not acted on yet (:meth:`take_ctrl_z`)
        self.ctrl_z = threading.Event()
        self.signum: Optional[int] = None
        self._guard: Any = None
        self._node: Any = None
        self._lock = threading.Lock()
        self._sockets: Optional[Tuple[socket.socket, socket.socket]] = None
        self._thread: Optional[threading.Thread] = None
        self._previous_fd: Optional[int] = None

    @property
    def installed(self) -> bool:
        return self._sockets is not None

    def install(self) -> bool:
        """Handle :data:`STOP_SIGNALS` from now on; False (nothing changed) outside the main
        thread, where Python cannot set signal handlers. A SIGHUP that this process started
        with ignored (``nohup``: the user wants it to outlive its terminal) stays ignored."""
        if self.installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            return False
        reader, writer = socket.socketpair()
        writer.setblocking(False)  # the signal module needs that of a wake-up fd
        self._previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        self._sockets = (reader, writer)
        for sig in STOP_SIGNALS:
            if sig != signal.SIGHUP or signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, _noted_elsewhere)
        self._thread = threading.Thread(target=self._wake_on_signals, args=(reader,),
                                        name="stop-signals", daemon=True)
        self._thread.start()
        return True

    def take_ctrl_z(self) -> bool:
        """From now on, Ctrl-Z (SIGTSTP) sets :attr:`ctrl_z` and wakes the executor instead of
        suspending the process; whether it does: not outside the main thread, nor before
        :meth:`install`, nor where SIGTSTP was ignored at the start."""
        if not self.installed or threading.current_thread() is not threading.main_thread() \
                or not ctrl_z_taken():
            return False
        signal.signal(signal.SIGTSTP, _noted_elsewhere)
        return True

    def _wake_on_signals(self, reader: socket.socket) -> None:
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGTSTP in data:
                with self._lock:
                    self.ctrl_z.set()
                    self._wake()
            signals = [b for b in data if b not in (_QUIT[0], signal.SIGTSTP)]
            if signals:
                self.request(signals[0])
            if _QUIT in data:
                return

    def request(self, signum: Optional[int] = None) -> None:
        """Ask the node to stop (what a signal does); wakes its executor. The process
        then has :data:`STOP_DEADLINE_S` to end (:func:`arm_stop_deadline`)."""
        arm_stop_deadline()
        with self._lock:
            if self.signum is None and signum is not None:
                self.signum = signum
            self.requested.set()
            self._wake()

    def _wake(self) -> None:
        """Wake the executor (the lock held)."""
        if self._guard is not None:
            try:
                self._guard.trigger()
            except (InvalidHandle, RuntimeError):  # the node is going: the spin is over
                pass

    def attach(self, node: Any) -> None:
        """Wake ``node``'s executor on a stop request (a guard condition of the node)."""
        guard = node.create_guard_condition(lambda: None)
        with self._lock:
            self._guard, self._node = guard, node
            requested = self.requested.is_set() or self.ctrl_z.is_set()
        if requested:
            guard.trigger()

    def detach(self) -> None:
        """Drop the guard condition (before the node is destroyed)."""
        with self._lock:
            guard, node = self._guard, self._node
            self._guard = self._node = None
        if guard is not None:
            try:
                node.destroy_guard_condition(guard)
            except (InvalidHandle, RuntimeError):
                pass

    def close(self) -> None:
        """End the wake-up thread; signals no longer wake anything (see the class)."""
        self.detach()
        sockets, self._sockets = self._sockets, None
        if sockets is None:
            return
        reader, writer = sockets
        if threading.current_thread() is threading.main_thread():
            signal.set_wakeup_fd(self._previous_fd if self._previous_fd is not None else -1)
        try:
            writer.send(_QUIT)
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(1.0)
        reader.close()
        writer.close()


def _noted_elsewhere(signum: int, frame: Any) -> None:
    """The Python side of the stop signals: nothing. The signal module has written the
    signal's number to the wake-up socket, and StopSignals' thread acts on it; this runs
    later, on the main thread, anywhere in its code, so it takes no lock and raises
    nothing (and a handler is needed: an ignored signal is not written)."""


_deadline_armed = False


def arm_stop_deadline() -> None:
    """From now on, the process ends within :data:`STOP_DEADLINE_S` (read at the call)
    whatever it does; once per process, later calls change nothing.
    faulthandler's watchdog, a C thread that needs no GIL, writes every thread's Python
    stack to standard error (``Timeout (0:00:06)!`` and the stacks) and exits with status
    1: a stop stuck in native code, where neither a second signal nor any Python code can
    run any more, ends with the place it was stuck at instead of waiting for SIGKILL.
    Only for a node's own process (console scripts): a process has one such watchdog."""
    global _deadline_armed
    if not _deadline_armed:
        _deadline_armed = True
        faulthandler.dump_traceback_later(STOP_DEADLINE_S, exit=True)


#: the stop request of this process's node (made by :func:`init`)
_signals: Optional[StopSignals] = None


def stop_requested() -> bool:
    """True once a stop signal came to this process (or :meth:`StopSignals.request`)."""
    return _signals is not None and _signals.requested.is_set()


#: the message generator's module that ``rosidl_generator_py``'s package imports with its
#: ``import_type_support`` (see :func:`leave_out_message_generator`)
_GENERATOR = "rosidl_generator_py.generate_py_impl"


def leave_out_message_generator() -> bool:
    """Import ``rosidl_generator_py`` without its code generator; True if it was left out.

    Every message type's support is imported through the ``rosidl_generator_py`` package,
    whose ``__init__`` also imports, in a ``try`` that takes an ``ImportError`` as "not
    installed", the code generator that builds message packages (``generate_py_impl``, and
    with it rosidl_parser, lark and empy): 35-50 ms of CPU in every node's start-up here, and
    their memory, for a function that no node runs. A ``None`` in ``sys.modules`` makes that
    import fail as the package expects, and is taken out again at once, so that
    ``import rosidl_generator_py.generate_py_impl`` works as before (only the package's
    ``generate_py`` attribute is missing). Nothing changes if the package was imported
    already or is not installed."""
    if "rosidl_generator_py" in sys.modules or _GENERATOR in sys.modules:
        return False
    sys.modules[_GENERATOR] = None  # type: ignore[assignment]
    try:
        import rosidl_generator_py  # noqa: F401
    except ImportError:
        return False  # not installed (or not guarded): rclpy says what is missing
    finally:
        if _GENERATOR in sys.modules and sys.modules[_GENERATOR] is None:
            del sys.modules[_GENERATOR]
    return True


def init(args: Optional[List[str]] = None) -> StopSignals:
    """``rclpy.init(args=args)`` with rclpy's signal handlers left out and
    :class:`StopSignals` in their place, installed first (a signal during start-up is a
    stop request too). On an rclpy without ``signal_handler_options`` (before Humble),
    rclpy keeps its handlers and a signal ends the spin through KeyboardInterrupt."""
    global _signals
    leave_out_message_generator()  # before the first message type: 35-50 ms less start-up
    signals = StopSignals()
    _release_at_exit()
    try:
        from rclpy.signals import SignalHandlerOptions
    except ImportError:  # pragma: no cover - rclpy before Humble
        rclpy.init(args=args)
    else:
        signals.install()
        try:
            rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        except BaseException as exc:
            signals.close()
            _refuse_arguments(exc)
            raise
    _signals = signals
    return signals


def _refuse_arguments(exc: BaseException) -> None:
    """rcl could not take the command line's ROS arguments (a parameter file that is not
    YAML rcl can read, or is missing): one line naming the file and the error, and exit
    status 2 as for any refused parameter, not a traceback and 1."""
    if arguments_error(exc):
        program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "cozmo"
        print(f"{program}: cannot start: {arguments_problem(exc)}", file=sys.stderr)
        raise SystemExit(2) from None


def arguments_error(exc: BaseException) -> bool:
    """Whether ``exc`` is rcl refusing ROS arguments: a parameter file it cannot read, a
    malformed rule (rclpy's RCLError, or its RCLInvalidROSArgsError), or an argument it
    does not know (its UnknownROSArgsError: ``--param-file``)."""
    text = str(exc)
    name = type(exc).__name__
    return name == "UnknownROSArgsError" or \
        name in ("RCLError", "RCLInvalidROSArgsError") and ("params file" in text or "arguments" in text)


#: the ROS arguments rcl knows (those a command line names; ``--ros-args`` and ``--`` aside)
_ROS_ARGUMENTS = ("-r", "--remap", "-p", "--param", "--params-file", "--log-level", "--log-config-file",
                  "--log-file-name", "-e", "--enclave", "--enable-rosout-logs", "--disable-rosout-logs",
                  "--enable-stdout-logs", "--disable-stdout-logs", "--enable-external-lib-logs",
                  "--disable-external-lib-logs")


def arguments_problem(exc: BaseException) -> str:
    """What to say of :func:`arguments_error`'s ``exc``: rcl's words, or, for arguments it
    does not know (rclpy gives only their list), those arguments, the one meant where one
    is close, and the ROS arguments there are."""
    text = str(exc).strip()
    if type(exc).__name__ != "UnknownROSArgsError":
        return text
    import ast
    import difflib

    try:
        unknown = [str(arg) for arg in ast.literal_eval(text)]
    except (ValueError, SyntaxError, TypeError):
        unknown = [text]
    meant = [close[0] for arg in unknown if arg.startswith("-")
             for close in [difflib.get_close_matches(arg, _ROS_ARGUMENTS, n=1, cutoff=0.7)] if close]
    hint = f"did you mean {', '.join(meant)}? " if meant else ""
    return (f"unknown ROS arguments: {' '.join(unknown)} ({hint}ROS arguments are -r, -p, --params-file, "
            "--log-level, --log-config-file, -e and the --enable-/--disable- log switches)")


#: parameters every rclpy node has, which a parameter file may set
_EVERY_NODES = ("use_sim_time", "start_type_description_service")
#: parameters given to every node of this process (``cozmo_stack``'s ``-p`` before the first
#: ``--node``) that another node of it takes, for the node made next: not warned of
_taken_by_another_node: frozenset = frozenset()


def taken_by_another_node(names: Sequence[str]) -> None:
    """The parameters that :func:`unknown_parameters` does not warn of from now on (for the
    node made next): given to every node of the process, another node of it takes them."""
    global _taken_by_another_node
    _taken_by_another_node = frozenset(names)


def given_parameters(node: Any) -> dict:
    """The parameters a parameter file or ``-p`` gave ``node`` (name -> rclpy Parameter):
    rclpy's record of the node's overrides, which every rclpy from Humble on keeps (else
    empty)."""
    return getattr(node, "_parameter_overrides", None) or {}


def unknown_parameters(node: Any, known: Sequence[str], qos: bool = False) -> List[str]:
    """A warning for each parameter that a parameter file or ``-p`` gave this node and that
    it does not have (a misspelt ``max_wheel_sped`` left the limit at its default without a
    word), with the closest name; ``qos``: the node takes QoS overrides (checked later, by
    :func:`ignored_qos_overrides`), else each ``qos_overrides.`` one is warned about. Reads
    rclpy's record of the node's overrides (every rclpy from Humble on keeps it; without
    it, nothing is said)."""
    import difflib

    given = given_parameters(node)
    warnings = []
    for name in sorted(given):
        if name in known or name in _EVERY_NODES or name in _taken_by_another_node:
            continue
        if name.startswith("qos_overrides."):
            if not qos:
                warnings.append(f"parameter {name!r} is ignored: {node.get_name()} takes no QoS "
                                "overrides")
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        warnings.append(f"parameter {name!r} is not a parameter of {node.get_name()}: ignored"
                        + (f" (did you mean {close[0]!r}?)" if close else ""))
    return warnings


#: the largest depth rmw takes (rclpy's TypeError from pybind beyond it)
_MAX_QOS_DEPTH = 2 ** 31 - 1


def _qos_values(policy: str) -> Tuple[str, ...]:
    """The values rclpy takes for ``policy`` (reliability, history) of a topic's QoS
    overrides, case aside: the names of its enum in rclpy.qos (``ReliabilityPolicy``), so
    each distribution's own (Jazzy's best_available), but unknown, which no topic takes."""
    from rclpy import qos

    values = getattr(qos, f"{policy.capitalize()}Policy")
    return tuple(value.name.lower() for value in values if value.name != "UNKNOWN")


def bad_qos_overrides(node: Any) -> List[str]:
    """What is wrong with each ``qos_overrides.`` parameter given to ``node`` whose value
    rclpy cannot take (it raised when the topic was made: a bare RuntimeError that named
    neither the parameter nor the values it takes, or pybind's TypeError for a depth rmw
    cannot hold)."""
    given = given_parameters(node)
    problems = []
    for name in sorted(given):
        if not name.startswith("qos_overrides."):
            continue
        policy, value = name.rsplit(".", 1)[-1], given[name].value
        if policy == "depth" and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value <= _MAX_QOS_DEPTH):
            problems.append(f"{name} = {value!r}: a depth is a whole number from 0 to {_MAX_QOS_DEPTH}")
        elif policy in ("reliability", "history") and (not isinstance(value, str)
                                                       or value.lower() not in _qos_values(policy)):
            problems.append(f"{name} = {value!r}: use {', '.join(_qos_values(policy))}")
    return problems


def ignored_qos_overrides(node: Any, companions: Sequence[Any] = ()) -> List[str]:
    """A warning for each ``qos_overrides.`` parameter given to ``node`` that none of its
    publishers and subscriptions, nor those of its ``companions`` (the nodes of its
    subscription threads), took: rclpy declares those it takes as they are made, and
    ignores the rest without a word (a topic without overrides, a policy other than
    reliability, history and depth, a misspelt topic)."""
    given = given_parameters(node)
    nodes = [n for n in (node, *companions) if n is not None]
    return [f"parameter {name!r} is ignored: " + (_namespaced_hint(name, node, nodes) or (
            f"no topic of {node.get_name()} takes it (only reliability, history and depth, "
            "and not on /tf or /diagnostics: see QoS in docs/driver.md)"))
            for name in sorted(given)
            if name.startswith("qos_overrides.") and not any(n.has_parameter(name) for n in nodes)]


def _namespaced_hint(name: str, node: Any, nodes: Sequence[Any]) -> Optional[str]:
    """For ``qos_overrides./<topic>.<entity>.<policy>`` that leaves out ``node``'s
    namespace, where the namespaced topic is one of ``nodes``': the name meant."""
    namespace = node.get_namespace()
    topic, _, rest = name[len("qos_overrides."):].rpartition(".")
    topic, _, entity = topic.rpartition(".")
    if namespace == "/" or not topic.startswith("/") or topic.startswith(namespace + "/"):
        return None
    full = namespace + topic
    for n in nodes:
        for entity_of in (*n.publishers, *n.subscriptions):
            if getattr(entity_of, "topic_name", None) == full:
                meant = f"qos_overrides.{full}.{entity}.{rest}"
                return f"did you mean {meant!r}? (a topic is named in full, with the namespace)"
    return None


_release_registered = False


def _release_at_exit() -> None:
    """Register :func:`release_native` with atexit (once per process)."""
    global _release_registered
    if not _release_registered:
        _release_registered = True
        atexit.register(release_native)


def release_native() -> None:
    """Free what is left of rclpy's native objects while the interpreter is whole.

    A node's Python objects reference each other (callbacks bound to the node, entities
    that name it), and a node may have moved them to the permanent generation
    (``gc.freeze()``, as the driver does after start-up): then neither a node's
    ``destroy_node`` nor ``rclpy.shutdown`` frees the native node and context, and the
    DDS participant, with its receive threads, outlives ``main()``. The process then
    exits while those threads still deliver samples into rmw objects that the
    interpreter's finalization and the C++ static destructors take apart under them: a
    SIGSEGV after a clean stop, now and then, while another node publishes or
    subscribes. Collecting here (atexit: ``main()`` has returned, its frame and the
    node are gone, every Python thread of ours has ended) finalises the native node and
    context, which deletes the participant and joins its threads, before any of that."""
    gc.unfreeze()
    gc.collect()


@contextmanager
def destroyed_if_refused(node: Any, destroy: Optional[Callable[[], None]] = None) -> Iterator[None]:
    """Around the part of a node's constructor that may refuse it (bad parameters, a bad
    configuration): on any exception the node is destroyed (``destroy``, by default its
    waitables and rclpy's own ``Node.destroy_node``, as the subclass is only half made)
    before the exception goes on. Otherwise the half-made node stays in the ROS graph for
    as long as something (the exception's traceback, a frozen garbage collector) holds it,
    and a node started next with its name is refused as a duplicate. In a node's own
    process, the destruction is protected as a stop's is (:func:`protect_refused_teardown`)."""
    try:
        yield
    except BaseException:
        try:
            protect_refused_teardown(node.get_name())
        except Exception:  # noqa: BLE001 - the refusal is what the caller must see
            pass
        try:
            if destroy is None:
                destroy_waitables(node)
                Node.destroy_node(node)
            else:
                destroy()
        except Exception:  # noqa: BLE001 - the refusal is what the caller must see
            pass
        raise


def destroy_waitables(node: Any) -> None:
    """Destroy the node's action clients and servers, before the node itself. rclpy's
    ``Node.destroy_node`` leaves them alone, and each keeps the node's rcl handle alive:
    the node stayed in the ROS graph, without its publishers, until a garbage collection
    freed them (a ``/cozmo_behavior`` seen by the next test of a process for more than
    30 s). rclpy.action is not imported for it: it imports numpy (through its goal ids),
    which the driver's start-up defers (docs/driver.md, Start-up), and a node cannot have
    an action client or server before rclpy.action is imported."""
    action = sys.modules.get("rclpy.action")
    if action is None:
        return
    for waitable in list(getattr(node, "waitables", ())):
        if isinstance(waitable, (action.ActionClient, action.ActionServer)):
            waitable.destroy()


#: rclpy's words for an integer given to a double parameter (Humble's and later; its type
#: names with or without "Type.")
_INTEGER_FOR_DOUBLE = re.compile(r"parameter '([^']+)' to '(-?\d+)' of type '(?:Type\.)?INTEGER', "
                                 r"expecting type '(?:Type\.)?DOUBLE'")


def parameter_error(exc: BaseException) -> str:
    """What to print for a node that could not be made: the error, and for an integer given
    to a double parameter (``-p peer_timeout:=2``), what to write instead (a node without
    :class:`DoubleParameters`, or an rclpy that keeps no record of its overrides)."""
    match = _INTEGER_FOR_DOUBLE.search(str(exc))
    if match is None:
        return str(exc)
    name, value = match.groups()
    return (f"{name} is a double parameter: write {value}.0 (-p {name}:={value}.0); ROS reads "
            f"{value} as an integer ({exc})")


def _type_refusal(name: str, value: Any, expected: Any, example: Any, given: Any, start: bool = False) -> str:
    """Why ``value`` (of rclpy type ``given``) is refused for the parameter ``name`` of rclpy
    type ``expected``, with ``example`` (its default or value) written as ROS reads it, as
    ``-p`` gives it at ``start``."""
    if example is None:  # (a parameter declared without a value)
        example = {"DOUBLE": 1.0, "INTEGER": 1, "BOOL": True, "STRING": "text"}.get(expected.name, "...")
    if isinstance(example, bool):
        example = str(example).lower()
    elif isinstance(example, str):
        example = repr(example)
    kind = {"DOUBLE": "double", "INTEGER": "integer", "BOOL": "bool", "STRING": "string"}.get(
        expected.name, expected.name.lower())
    whole = " (a whole number is taken too)" if expected.name == "DOUBLE" else ""
    shown = f"{value[:40]!r}" if isinstance(value, str) else repr(value)
    example = f"-p {name}:={example}" if start else example
    got = given.name.lower().replace("_", " ")
    return (f"Wrong parameter type: {name} is {_a(kind)} parameter, e.g. {example}{whole}; "
            f"got {shown}, {_a(got)}")


def _a(words: str) -> str:
    return ("an " if words[0] in "aeiou" else "a ") + words


class DoubleParameters:
    """Mixed into a node before rclpy's Node (or LifecycleNode): a whole number given to a
    parameter declared as a double (``ros2 param set /cozmo_driver cmd_vel_timeout 1``,
    ``-p cmd_vel_timeout:=1``, ``cmd_vel_timeout: 1`` in a parameter file) is taken as that
    double, and the parameter stays a double; rclpy refused it ("Wrong parameter type,
    expected 'Type.DOUBLE'") before the node's own checks. A value of another wrong type (a
    string for a double) is refused saying the type expected, with an example. Humble's
    rclpy and later: the three public methods every way in goes through are overridden
    (the parameter services call ``set_parameters_atomically``), no pre-set callback
    (Iron and later) is needed."""

    def _wrong_type(self, param: Any) -> Optional[Any]:
        """The refusal (SetParametersResult) of ``param`` for its type, or None."""
        from rcl_interfaces.msg import SetParametersResult
        from rclpy.parameter import Parameter
        if not self.has_parameter(param.name) or param.type_ == Parameter.Type.NOT_SET:
            return None
        descriptor = self.describe_parameter(param.name)
        if descriptor.dynamic_typing or descriptor.read_only or param.type_.value == descriptor.type:
            return None
        return SetParametersResult(successful=False, reason=_type_refusal(
            param.name, param.value, Parameter.Type(descriptor.type), self.get_parameter_or(param.name).value,
            param.type_))

    def _as_declared(self, params: Sequence[Any]) -> List[Any]:
        """``params``, an integer for a declared double made that double."""
        from rclpy.parameter import Parameter
        out = []
        for param in params:
            if param.type_ == Parameter.Type.INTEGER and self.has_parameter(param.name):
                descriptor = self.describe_parameter(param.name)
                if descriptor.type == Parameter.Type.DOUBLE.value and not descriptor.dynamic_typing:
                    param = Parameter(param.name, Parameter.Type.DOUBLE, float(param.value))
            out.append(param)
        return out

    def set_parameters_atomically(self, parameter_list: Sequence[Any]) -> Any:
        parameter_list = self._as_declared(parameter_list)
        for param in parameter_list:
            refused = self._wrong_type(param)
            if refused is not None:
                return refused
        return super().set_parameters_atomically(parameter_list)

    def set_parameters(self, parameter_list: Sequence[Any]) -> List[Any]:
        parameter_list = self._as_declared(parameter_list)
        refusals = [self._wrong_type(p) for p in parameter_list]
        if not any(refusals):
            return super().set_parameters(parameter_list)
        return [refused or super(DoubleParameters, self).set_parameters([p])[0]
                for p, refused in zip(parameter_list, refusals)]

    def declare_parameter(self, name: str, value: Any = None, descriptor: Any = None,
                          ignore_override: bool = False) -> Any:
        from rclpy.exceptions import InvalidParameterTypeException
        from rclpy.parameter import Parameter
        given = given_parameters(self)
        override = None if ignore_override or descriptor is not None and descriptor.dynamic_typing \
            else given.get(name)
        if override is not None and isinstance(value, (bool, int, float, str)):
            expected = Parameter.Type.from_parameter_value(value)
            if expected == Parameter.Type.DOUBLE and override.type_ == Parameter.Type.INTEGER:
                given[name] = Parameter(name, Parameter.Type.DOUBLE, float(override.value))
            elif override.type_ not in (expected, Parameter.Type.NOT_SET):
                refusal = InvalidParameterTypeException(override, expected.name)
                refusal.args = (_type_refusal(name, override.value, expected, value, override.type_, True),)
                raise refusal
        return super().declare_parameter(name, value, descriptor, ignore_override)


def make_node(prog: str, factory: Callable[[], Any],
              errors: Tuple[Type[BaseException], ...]) -> Optional[Any]:
    """``factory()``; on one of ``errors`` print ``prog: error`` (:func:`parameter_error`)
    to stderr, shut rclpy down and return None."""
    try:
        return factory()
    except errors as exc:
        protect_refused_teardown(prog)
        print(f"{prog}: {parameter_error(exc)}", file=sys.stderr)
        _close_signals()
        try_shutdown()
        return None


def _close_signals() -> None:
    global _signals
    signals, _signals = _signals, None
    if signals is not None:
        signals.close()


#: what ``spin_nodes``' ``suspend`` is: stops what the nodes drive before Ctrl-Z suspends
#: the process, and returns what to call once it goes on (or None)
Suspend = Callable[[], Optional[Callable[[], None]]]


def _spin(executor: SingleThreadedExecutor, context: Any,
          signals: Optional[StopSignals], suspend: Optional[Suspend] = None) -> None:
    while context.ok() and not (signals is not None and signals.requested.is_set()):
        try:
            executor.spin_once()
        except (RuntimeError, InvalidHandle):
            # a take on an entity of a context shut down from outside meanwhile (an
            # rclpy that kept its own signal handlers): the spin is over, nothing failed
            if context.ok():
                raise
            return
        if suspend is not None and signals is not None and signals.ctrl_z.is_set() \
                and not signals.requested.is_set():
            _suspend(signals, suspend)


def _suspend(signals: StopSignals, suspend: Suspend) -> None:
    """Ctrl-Z: ``suspend()``, then the process suspended as by SIGTSTP's default action;
    once it goes on (``fg``), what ``suspend()`` returned, and Ctrl-Z taken again (one that
    came meanwhile is forgotten)."""
    resume = suspend()
    try:
        suspend_process(_noted_elsewhere)
    finally:
        signals.ctrl_z.clear()
        if resume is not None:
            resume()


def spin_node(node: Any, start: Optional[Callable[[], None]] = None,
              stop: Optional[Callable[[SingleThreadedExecutor], None]] = None,
              guard_name: bool = True, suspend: Optional[Suspend] = None) -> int:
    """Spin ``node`` until SIGINT, SIGTERM, SIGHUP or an external shutdown; ``start()`` runs first
    (inside the interruptible part), ``stop(executor)`` after, with the executor still up
    and the context still valid (the signals of :func:`init` do not shut it down), then
    the executor, the node and rclpy are shut down. Returns the exit status: 0, or 2
    when ``guard_name`` found another node of the same name in the ROS domain in the
    node's first seconds (:class:`~cozmo_driver.ros.name_guard.NameGuard`: the node
    then says so and stops as on a signal). ``suspend``: the node drives the robot, and
    Ctrl-Z calls it before the process is suspended (see the module docstring)."""
    return spin_nodes([node], start, stop, guard_name, suspend)


def spin_nodes(nodes: Sequence[Any], start: Optional[Callable[[], None]] = None,
               stop: Optional[Callable[[SingleThreadedExecutor], None]] = None,
               guard_name: bool = True, suspend: Optional[Suspend] = None) -> int:
    """:func:`spin_node` for several nodes of one context on one single-threaded executor
    (the whole stack in one process: ``cozmo_stack``). Each node's name is guarded; a
    refusal of any stops them all. After the spin: ``stop(executor)`` (the caller's
    order: the driver's motors first), the executor, each node in the order given,
    rclpy."""
    nodes = list(nodes)
    signals = _signals
    context = nodes[0].context
    executor = SingleThreadedExecutor(context=context)
    for node in nodes:
        executor.add_node(node)
    del _refusals[:]
    guards = [NameGuard(node, lambda text, node=node: refuse(node, text))
              for node in nodes] if guard_name else []
    try:
        if signals is not None:
            signals.attach(nodes[0])  # one guard condition wakes the executor of them all
            if suspend is not None:
                signals.take_ctrl_z()  # kept to the end: a Ctrl-Z while the nodes stop is ignored
        if start is not None and not (signals is not None and signals.requested.is_set()):
            start()
        _spin(executor, context, signals, suspend)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception as exc:
        if len(nodes) > 1:  # which node of the process, before the stop's lines of every node
            _say_which_failed(nodes, exc)
        raise
    finally:
        arm_stop_deadline()
        for guard in guards:
            guard.cancel()
        try:
            if stop is not None:
                stop(executor)
        finally:
            if signals is not None:
                signals.detach()
            executor.shutdown(timeout_sec=1.0)
            for node in nodes[:-1]:
                node.destroy_node()
            failure = _failure_in_flight()
            _rescue_the_teardown(f"{nodes[-1].get_name()}: its DDS participant",
                                 "its nodes had stopped and left the graph",
                                 1 if failure else 2 if _refusals else 0, failure)
            nodes[-1].destroy_node()  # the last node: the DDS participant goes with it
            try_shutdown()
            _close_signals()
    if _refusals:
        name, text = _refusals[0]
        print(f"{name}: refusing to run: {text}", file=sys.stderr)
        return 2
    return 0


def _failed_node(nodes: Sequence[Any], exc: BaseException) -> Optional[Any]:
    """The node of ``nodes`` whose callback raised ``exc``: the innermost frame of its
    traceback whose ``self`` is one of them, or an object of one of them (its ``node``)."""
    tb, found = exc.__traceback__, None
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        for candidate in (owner, getattr(owner, "node", None), getattr(owner, "_node", None)):
            if any(candidate is node for node in nodes):
                found = candidate
        tb = tb.tb_next
    return found


def _say_which_failed(nodes: Sequence[Any], exc: BaseException) -> None:
    """Log, as the node whose callback raised ``exc`` (or the first node, not knowing which),
    that the exception stops every node of the process: in ``cozmo_stack`` the stop's lines
    of every node came first, and the traceback at the very end named no node."""
    try:
        node = _failed_node(nodes, exc)
        whose = f"a callback of {node.get_fully_qualified_name()}" if node is not None else "a callback"
        (node or nodes[0]).get_logger().error(
            f"{type(exc).__name__} uncaught in {whose}: {exc}; stopping every node of this "
            "process, then exiting with status 1 after the traceback")
    except Exception:  # noqa: BLE001 - the failure is what the process must end with
        pass


#: how long the destruction of a node process's last node (and its DDS participant) and
#: the process's exit may take where it can hang forever (participant_exit), seconds; it
#: takes about 0.01 s. Short enough that a rescued process still ends within the 2 s from a
#: stop signal that every program keeps (issue #17): at 2.0 a hang ended it at 2.15 s
TEARDOWN_RESCUE_S = 1.0


_rescue_armed = False


def _failure_in_flight() -> str:
    """The traceback of the exception this process is ending with (one raised by a callback
    or by the stop, in flight through the ``finally`` that calls this), or "" for none, a
    Ctrl-C or an external shutdown (a normal stop)."""
    exc = sys.exc_info()[1]
    if exc is None or isinstance(exc, (KeyboardInterrupt, ExternalShutdownException)):
        return ""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def _rescue_the_teardown(whose: str, state: str, status: int, failure: str = "") -> None:
    """Where destroying the DDS participant can hang forever (the PyPI Fast DDS:
    :mod:`cozmo_driver.ros.participant_exit`), end the process with the status it exits
    with (0, 2 after a refusal, 1 after an uncaught exception) if it still runs
    :data:`TEARDOWN_RESCUE_S` from now, saying why on standard error (``whose``
    participant, and the ``state`` of its nodes), after ``failure``, the traceback the
    interpreter would have printed. Once per process: later calls change nothing."""
    global _rescue_armed
    if not _rescue_armed and participant_teardown_can_hang():
        _rescue_armed = arm_teardown_rescue(
            TEARDOWN_RESCUE_S,
            f"{failure}{whose} was not destroyed within {TEARDOWN_RESCUE_S:g} s (a known hang of Fast DDS "
            f"from PyPI, docs/driver.md, Lifecycle); {state}; ending the process", status=status)


def protect_refused_teardown(name: str) -> None:
    """A node of this process refused while being made (a bad parameter, ROS arguments rcl
    refuses) is about to be destroyed, and with the process's last node its DDS
    participant: as at the end of a spin, the process has :data:`STOP_DEADLINE_S` from now
    to end (the stop signals, in :func:`init`'s hands, do nothing once its nodes are
    refused) and, where that destruction can hang, the rescue ends it with the refusal's
    status 2. Only in a node's own process (its console script: :func:`init` ran), not for
    a node made in a program of one's own or a test."""
    if _signals is None:
        return
    arm_stop_deadline()
    _rescue_the_teardown(f"{name}: the DDS participant of a refused node",
                         "its nodes were refused and left the graph", 2)


#: why the node of this process refused to run (see :func:`refuse`)
_refusals: List[Tuple[str, str]] = []


def refuse(node: Any, text: str) -> None:
    """The node cannot run beside what it found (another node of its name, a robot that
    another program drives): log ``text`` as an error and stop as on a signal;
    :func:`spin_node` then returns 2 and prints it on stderr."""
    _refusals.append((node.get_name(), text))
    node.get_logger().error(f"refusing to run: {text}")
    if _signals is not None:
        _signals.request()
