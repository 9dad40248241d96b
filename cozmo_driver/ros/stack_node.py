"""``cozmo_stack``: the driver, face, behaviour and description nodes in one process.

Each node stays the node it is in its own executable (its name, namespace, parameter
files and remappings from a ``--ros-args`` section of its own), and all of them spin on
one single-threaded executor in one rclpy context, so they share one interpreter, one
copy of rclpy and the message modules, and one DDS participant; what one node publishes
for another of the process is delivered inside the process by the middleware (rclpy has
no intra-process transport of its own), except the face and the joints: the face node
hands each frame to the driver's display directly, and publishes ``display/face`` only
while something else subscribes to it (where both name the same ``display/face``); the
driver hands the joint positions of every state to the description publisher directly,
which then does not subscribe to ``joint_states``. The bring-up starts it with ``one_process:=true``
(:mod:`cozmo_driver.bringup_plan`); by hand::

    cozmo_stack --node driver --ros-args -p robot_ip:=127.0.0.1 -p robot_port:=5551 -- \\
                --node face --node behavior

A node kind without a ``--ros-args`` section runs with its defaults; ``--ros-args`` before
the first ``--node`` holds what all of them take. rcl takes the logging arguments
(``--log-level``, ``--log-config-file``, the ``--enable-``/``--disable-`` log switches) and
the enclave (``-e``) from there only: in a node's section they are refused (they were
ignored without a word; one node's level: ``--log-level cozmo_driver:=debug`` there).
A rename (``-r __node:=NAME``) belongs in a node's section: before the first ``--node``
it is refused (every node took the name, and each then refused to run beside the others
as another node of its name). Without ``--node``: driver, face and behavior. The
driver's cmd_vel thread stays its own.

Ctrl-C, SIGTERM or SIGHUP stop the process in order: the behaviour engine's goals cancelled
(at most 0.2 s), then the driver (motors stopped, link closed), then the behaviour
node's cancel requests let out, then the others, then rclpy; exit 0. A bad parameter
of any node: a message and exit 2 before anything runs; a node of the same name
elsewhere in the ROS domain, or a robot another program drives: exit 2 with the
reason (as each node's own executable does).
"""

from __future__ import annotations

import logging
import sys
import textwrap
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import ConfigurationError
from ..lifeline import exit_with_parent

__all__ = ["KINDS", "NodeSpec", "parse_stack_arguments", "stack_help", "main"]

PROG = "cozmo_stack"

#: node kind -> (the executable that runs it alone, what it is); in start order
KINDS: Dict[str, Tuple[str, str]] = {
    "driver": ("cozmo_driver_node", "the driver: the robot's link, topics, services and actions"),
    "description_publisher": ("cozmo_description_publisher",
                              "robot_description, /tf_static and /tf from joint_states"),
    "face": ("cozmo_face_node", "the living face on display/face"),
    "behavior": ("cozmo_behavior_node", "the behavior engine"),
}
DEFAULT_KINDS = ("driver", "face", "behavior")
_BEHAVIOR_DRAIN_S = 0.3   # what the behaviour node's own executable gives its cancel requests
#: at a stop, how long the behaviour engine's goals get to end cancelled before the driver
#: stops the motors and aborts what is left, s (a cancel is answered within a spin or two)
_GOALS_CANCEL_S = 0.2


class StackArgumentError(ConfigurationError, ValueError):
    """A command line that cannot be run."""


#: ROS arguments rcl takes only from the process's own (global) arguments: in a node's
#: ``cli_args`` it ignores them (rclpy's Node('a', cli_args=['--ros-args', '--log-level',
#: 'debug']) logs at INFO)
_PROCESS_ONLY = ("--log-level", "--log-config-file", "--log-file-name", "--enable-rosout-logs",
                 "--disable-rosout-logs", "--enable-stdout-logs", "--disable-stdout-logs",
                 "--enable-external-lib-logs", "--disable-external-lib-logs", "-e", "--enclave")
#: ROS arguments followed by a value of theirs
_WITH_VALUE = ("-r", "--remap", "-p", "--param", "--params-file", "--log-level", "--log-config-file",
               "--log-file-name", "-e", "--enclave")
#: remapping rules that rename a node (without a node name before them: every node)
_RENAMES = ("__node:=", "__name:=")
#: each kind's node name, for the hint of a --log-level in its section
_NODE_NAMES = {"driver": "cozmo_driver", "description_publisher": "description_publisher",
               "face": "cozmo_face", "behavior": "cozmo_behavior"}


def _remap_rules(section: Sequence[str]) -> List[str]:
    """The values of the ``-r``/``--remap`` rules of a ``--ros-args`` section, in order."""
    return [section[k + 1] for k in range(len(section) - 1) if section[k] in ("-r", "--remap")]


def _logger_name(kind: str, section: Sequence[str], common: Sequence[str]) -> str:
    """The rcl logger of ``kind``'s node: ``<namespace>.<name>`` with its namespace and name
    as rcl gives them (the first rule that reaches the node, its own section's before the
    common one's; a rule ``NODE:__ns:=`` reaches only the node first named NODE)."""
    first = _NODE_NAMES[kind]
    found = {"__node": first, "__ns": ""}
    given = set()
    for rule in _remap_rules(section) + _remap_rules(common):
        target, _, value = rule.partition(":=")
        prefix, _, key = target.rpartition(":")
        key = "__node" if key == "__name" else key
        if key in found and key not in given and prefix in ("", first):
            found[key] = value
            given.add(key)
    namespace = found["__ns"].strip("/").replace("/", ".")
    return f"{namespace}.{found['__node']}" if namespace else found["__node"]


def _check_section(section: Sequence[str], kind: Optional[str], common: Sequence[str] = ()) -> None:
    """StackArgumentError for what a ``--ros-args`` section cannot hold: a node's (``kind``)
    an argument of the process only (:data:`_PROCESS_ONLY`), the common one (None) a rename
    of every node. ``common``: the common section, for the logger a hint names."""
    k = 1  # section[0] is --ros-args
    while k < len(section):
        flag = section[k]
        value = section[k + 1] if flag in _WITH_VALUE and k + 1 < len(section) else None
        if kind is not None and flag in _PROCESS_ONLY:
            hint = f"one node's level: --log-level {_logger_name(kind, section, common)}:=debug"
            if flag in ("-e", "--enclave"):
                hint = (f"the process has one enclave: cozmo_stack --ros-args {flag} {value or 'ENCLAVE'} "
                        f"-- --node {kind} ...")
            raise StackArgumentError(
                f"{flag} in the --ros-args of --node {kind} is not applied (rcl takes it from the "
                "process's arguments only): put it in the --ros-args before the first --node, "
                f"which every node takes ({hint})")
        if kind is None and flag in ("-r", "--remap") and value is not None and value.startswith(_RENAMES):
            raise StackArgumentError(
                f"{flag} {value} before the first --node would rename every node of the process: "
                f"rename one in its own section (--node KIND --ros-args {flag} {value})")
        k += 1 if value is None else 2


@dataclass
class NodeSpec:
    """One node of the process: its kind and its own ROS arguments."""

    kind: str
    ros_args: List[str] = field(default_factory=list)   # starts with --ros-args, or empty


def parse_stack_arguments(argv: Sequence[str]) -> Tuple[List[str], List[NodeSpec]]:
    """(the ROS arguments all nodes take, the nodes in start order) of a command line;
    StackArgumentError for an unknown kind, a kind given twice, a stray argument, a logging
    argument in a node's section or a rename of every node (:func:`_check_section`)."""
    argv = list(argv)
    common: List[str] = []
    specs: List[NodeSpec] = []
    current: Optional[List[str]] = None
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--node":
            if i + 1 >= len(argv):
                raise StackArgumentError("--node needs a kind: " + ", ".join(KINDS))
            kind = argv[i + 1]
            if kind not in KINDS:
                raise StackArgumentError(f"unknown node kind {kind!r}: expected one of {', '.join(KINDS)}")
            if any(spec.kind == kind for spec in specs):
                raise StackArgumentError(f"node kind {kind!r} given twice")
            specs.append(NodeSpec(kind))
            current = specs[-1].ros_args
            i += 2
            continue
        if token == "--ros-args":
            target = common if current is None else current
            if target:
                raise StackArgumentError("two --ros-args sections for one node")
            j = i + 1
            while j < len(argv) and argv[j] not in ("--", "--node"):
                j += 1
            _check_section(argv[i:j], None if current is None else specs[-1].kind, common)
            target += argv[i:j]
            i = j + 1 if j < len(argv) and argv[j] == "--" else j
            continue
        raise StackArgumentError(f"unexpected argument {token!r} (node arguments go after "
                         "--node KIND --ros-args)")
    if not specs:
        specs = [NodeSpec(kind) for kind in DEFAULT_KINDS]
    order = list(KINDS)
    specs.sort(key=lambda spec: order.index(spec.kind))  # the driver first
    return common, specs


def _parameter_tables() -> Dict[str, Sequence[Any]]:
    from ..behavior.parameters import BEHAVIOR_PARAMETERS
    from ..driver.parameters import PARAMETERS
    from .description_publisher import DESCRIPTION_PARAMETERS
    from .face_node import FACE_PARAMETERS

    return {"driver": PARAMETERS, "description_publisher": DESCRIPTION_PARAMETERS,
            "face": FACE_PARAMETERS, "behavior": BEHAVIOR_PARAMETERS}


def stack_help(kinds: Sequence[str] = ()) -> str:
    """The help: usage, what the process is, the ROS arguments, the parameters of each kind
    of ``kinds`` (default: every kind; the tables of :mod:`cozmo_driver.ros.usage`, as each
    node's own --help shows them)."""
    from .usage import help_text

    marker = "Parameters (name: type, default [unit], range):"
    tables = _parameter_tables()
    head = help_text(PROG, __doc__ or "", ())
    head = head.replace(f"usage: {PROG} [-h] [--ros-args ...]",
                        f"usage: {PROG} [-h] [--ros-args ...] "
                        "[--node KIND [--ros-args ... [--]]] ...", 1)
    head = head.split(marker, 1)[0].rstrip() + "\n\n" + "\n".join(textwrap.wrap(
        "In cozmo_stack the ROS arguments before the first --node go to every node; --log-level, "
        "--log-config-file, the --enable-/--disable- log switches and -e work only before the "
        "first --node (one node's level: --log-level cozmo_driver:=debug); -r __node:=NAME goes "
        "in a node's own section.", 79, break_on_hyphens=False)) + "\n"
    out = [head, "Node kinds (--node KIND; without --node: " + ", ".join(DEFAULT_KINDS) + "):"]
    out += [f"  {kind:<22} {exe}: {what}" for kind, (exe, what) in KINDS.items()]
    for kind, (exe, _) in KINDS.items():
        if kinds and kind not in kinds:
            continue
        section = help_text(exe, "", tables[kind]).split(marker, 1)[1]
        out += ["", f"Parameters of --node {kind} (name: type, default [unit], range):"
                + section.rstrip("\n")]
    return "\n".join(out) + "\n"


def _help_wanted(argv: Sequence[str]) -> Optional[List[str]]:
    """None, or the node kinds whose help -h or --help asks for: one outside every
    ``--ros-args`` section (inside one it is not the program's), at the start (every kind) or
    after ``--node KIND`` (``cozmo_stack --node driver --help``: the kinds named before it)."""
    kinds: List[str] = []
    in_ros_args = False
    for k, token in enumerate(argv):
        if token == "--node":
            in_ros_args = False
            if k + 1 < len(argv) and argv[k + 1] in KINDS:
                kinds.append(argv[k + 1])
        elif token == "--ros-args":
            in_ros_args = True
        elif token == "--":
            in_ros_args = False
        elif token in ("-h", "--help") and not in_ros_args:
            return kinds
    return None


# ---------------------------------------------------------------------------- the nodes

@dataclass
class _Running:
    """The nodes of the process and what starts and stops them."""

    nodes: List[Any] = field(default_factory=list)
    by_kind: Dict[str, Any] = field(default_factory=dict)
    log_handler: Optional[logging.Handler] = None


def _factory(kind: str) -> Tuple[Callable[..., Any], Tuple[type, ...]]:
    """The node class of ``kind`` (imported only when it runs) and the errors that mean
    a bad parameter or configuration."""
    import rclpy.exceptions

    param = rclpy.exceptions.ParameterException
    if kind == "driver":
        from .driver_node import CozmoDriverNode
        return CozmoDriverNode, (ValueError, param)
    if kind == "face":
        from .face_node import FaceNode
        return FaceNode, (ValueError, param)
    if kind == "behavior":
        from ..behavior.config import ConfigError
        from .behavior_node import BehaviorNode
        return BehaviorNode, (ConfigError, param)
    from ..description import DescriptionError
    from .description_publisher import DescriptionPublisher
    return DescriptionPublisher, (DescriptionError, param)


def _given(section: Sequence[str]) -> List[str]:
    """The names of the parameters a ``--ros-args`` section sets with ``-p``/``--param``."""
    return [section[k + 1].partition(":=")[0] for k in range(len(section) - 1)
            if section[k] in ("-p", "--param")]


def _taken_by_others(spec: NodeSpec, specs: Sequence[NodeSpec], common: Sequence[str]) -> List[str]:
    """The parameters given to every node (``-p`` in ``common``) that another node of
    ``specs`` takes and ``spec``'s own section does not set: ``spec``'s node does not warn
    of them (``-p robot_ip:=...`` before the first --node is the driver's)."""
    if len(specs) < 2 or not _given(common):
        return []  # (the tables import every node's module)
    tables = _parameter_tables()
    others = {entry.name for other in specs if other.kind != spec.kind for entry in tables[other.kind]}
    own = set(_given(spec.ros_args))
    return [name for name in _given(common) if name in others and name not in own]


def _make_nodes(specs: Sequence[NodeSpec], common: Sequence[str] = ()) -> Optional[_Running]:
    """Every node, in order; on a bad parameter, or ROS arguments of a node that rcl refuses
    (its parameter file unreadable): the message, the nodes made so far destroyed, rclpy
    shut down, None. ``common``: the ROS arguments all nodes take (:func:`_taken_by_others`)."""
    from ._compat import try_shutdown
    from ._entry import (_close_signals, arguments_error, arguments_problem, parameter_error, protect_refused_teardown,
                         taken_by_another_node)

    running = _Running()
    for spec in specs:
        cls, errors = _factory(spec.kind)
        taken_by_another_node(_taken_by_others(spec, specs, common))
        try:
            node = cls(cli_args=list(spec.ros_args) or None)
        except Exception as exc:  # noqa: BLE001 - rcl's refusal of a node's own arguments too
            if not isinstance(exc, errors) and not arguments_error(exc):
                raise
            text = parameter_error(exc) if isinstance(exc, errors) else f"cannot start: {arguments_problem(exc)}"
            print(f"{PROG}: {KINDS[spec.kind][0]}: {text}", file=sys.stderr)
            if running.nodes:  # (a node refused in its constructor protected it already)
                protect_refused_teardown(running.nodes[-1].get_name())
            for made in reversed(running.nodes):
                made.destroy_node()
            _close_signals()
            try_shutdown()
            return None
        running.nodes.append(node)
        running.by_kind[spec.kind] = node
    return running


def _face_to_driver(running: _Running) -> None:
    """The face node's frames straight to the driver's display, without DDS between two
    nodes of this process (rclpy has no intra-process transport): ``FaceNode.show_locally``
    and ``MediaInterfaces.show_local_face``; while nothing else subscribes to display/face,
    the display pulls them at its ticks (``FaceNode.pull_frame``, the driver's
    ``local_face_source``, ``MediaInterfaces.pull_local_face``). Only where both nodes
    name the same ``display/face`` topic (the same namespace and remappings) and rclpy
    can say so: a face remapped elsewhere (to a mux before the driver) is published there
    as by its own executable, and the driver shows what its topic brings."""
    face, driver = running.by_kind.get("face"), running.by_kind.get("driver")
    if face is None or driver is None or not hasattr(driver, "resolve_topic_name"):
        return  # rclpy before Humble has no resolve_topic_name: display/face stays a topic
    published, shown = face.resolve_topic_name("display/face"), driver.resolve_topic_name("display/face")
    if published != shown:
        face.get_logger().info(f"the face node publishes {published}, the driver shows {shown}: "
                               "its frames go by topic, not straight to the driver")
        return
    from .face_node import LocalDisplay

    def show(screen: Any, stamp_ns: int) -> None:
        media = driver.media  # None while the driver is not configured
        if media is not None:
            media.show_local_face(screen, stamp_ns)

    face.show_locally(LocalDisplay(show, lambda: 0 if driver.media is None else 1), pulled=True)
    driver.local_face_source = face.pull_frame  # taken by each MediaInterfaces the driver makes
    if driver.media is not None:
        driver.media.pull_local_face(face.pull_frame)


def _joints_to_description(running: _Running) -> None:
    """The driver's joint positions straight to the description publisher, which then
    subscribes to nothing (``DriverStreams.local_joints``,
    ``DescriptionPublisher.take_joints_directly``): where both name the same
    ``joint_states`` topic (the same namespace and remappings) and rclpy can say so."""
    description, driver = running.by_kind.get("description_publisher"), running.by_kind.get("driver")
    if description is None or driver is None or not hasattr(driver, "resolve_topic_name"):
        return  # rclpy before Humble has no resolve_topic_name: joint_states stays a topic
    if description.resolve_topic_name("joint_states") == driver.resolve_topic_name("joint_states"):
        driver.streams.local_joints = description.take_joints_directly()


def _start(running: _Running) -> None:
    """The driver's start, as its own executable does it (autostart, a refusal on a bad
    address or a robot driven already), then the start-up's objects out of the collector."""
    from ..core import ConfigurationError
    from ._entry import refuse
    from .driver_support import freeze_start_up

    driver = running.by_kind.get("driver")
    if driver is not None and driver.autostart and not driver.start():
        if isinstance(getattr(driver, "start_error", None), ConfigurationError):
            refuse(driver, str(driver.start_error))
            return
        driver.get_logger().error("could not start; the node stays up for lifecycle transitions")
    freeze_start_up(collect=False)  # (the collector ran all along)


def _stop(running: _Running, executor: Any) -> None:
    """The behaviour engine's goals cancelled (their cancels stop what they move, at
    most _GOALS_CANCEL_S), then the driver (motors stopped, link closed), then the
    behaviour node's cancel requests let out, then the others (by destroy_node). The
    driver first aborted the engine's goals, which the engine then logged as failures."""
    driver = running.by_kind.get("driver")
    behavior = running.by_kind.get("behavior")
    failed: List[BaseException] = []  # what a callback raised while the stop spun
    try:
        if behavior is not None:
            behavior.close()  # its running behavior ends, its goals' cancels are sent
            deadline = time.monotonic() + _GOALS_CANCEL_S
            while (driver is not None and behavior.context.ok() and time.monotonic() < deadline
                   and behavior.robot.goals_in_flight() and _spun(executor, 0.02, failed)):
                pass
        if driver is not None:
            from .driver_support import finish_goals
            if not failed:
                try:
                    finish_goals(driver, executor)
                except Exception as exc:  # noqa: BLE001 - a callback's: the motors stop all the same
                    failed.append(exc)
            driver.close()
    finally:
        if running.log_handler is not None:
            logging.getLogger("cozmo").removeHandler(running.log_handler)
        if behavior is not None:
            behavior.close()
            deadline = time.monotonic() + _BEHAVIOR_DRAIN_S
            while behavior.context.ok() and time.monotonic() < deadline and _spun(executor, 0.05, failed):
                pass
    if failed and sys.exc_info()[1] is None:
        raise failed[0]  # the stop's first failure; one that stopped the spin is in flight already


def _spun(executor: Any, timeout_s: float, failed: List[BaseException]) -> bool:
    """One turn of the executor in the stop; False, without a turn, once a callback raised
    (kept in ``failed``): a callback that raises at every turn, whose exception stopped
    the spin, otherwise raised again in the stop, cut it short (the driver's close left to
    its destroy_node) and printed a second traceback."""
    if failed:
        return False
    try:
        executor.spin_once(timeout_sec=timeout_s)
    except Exception as exc:  # noqa: BLE001 - raised after the stop, or the one in flight is
        failed.append(exc)
        return False
    return True


def main(args: Optional[List[str]] = None) -> int:
    """``cozmo_stack``: run the nodes until Ctrl-C, SIGTERM or SIGHUP."""
    argv = list(sys.argv[1:] if args is None else args)
    kinds = _help_wanted(argv)
    if kinds is not None:
        sys.stdout.write(stack_help(kinds))
        return 0
    try:
        common, specs = parse_stack_arguments(argv)
    except StackArgumentError as exc:
        print(f"usage: {PROG} [-h] [--ros-args ...] [--node KIND [--ros-args ... [--]]] ...\n"
              f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    exit_with_parent()  # end with the bring-up that started it (cozmo_driver.lifeline)
    from ._entry import init, spin_nodes, taken_by_another_node

    if any(spec.kind == "driver" for spec in specs):
        from .driver_node import _GIL_SWITCH_INTERVAL_S
        sys.setswitchinterval(_GIL_SWITCH_INTERVAL_S)
    init([PROG, *common])  # SIGINT, SIGTERM and SIGHUP stop the nodes before rclpy shuts down
    running = _make_nodes(specs, common)
    taken_by_another_node(())
    if running is None:
        return 2
    _face_to_driver(running)
    _joints_to_description(running)
    driver = running.by_kind.get("driver")
    if driver is not None:
        from .driver_support import RosLogHandler
        running.log_handler = RosLogHandler(driver)
        cozmo_logger = logging.getLogger("cozmo")
        cozmo_logger.addHandler(running.log_handler)
        cozmo_logger.propagate = False
    suspend = None
    if driver is not None:  # Ctrl-Z: the robot stopped before the process is suspended
        from functools import partial

        from .driver_support import ctrl_z_stop
        suspend = partial(ctrl_z_stop, driver)
    return spin_nodes(running.nodes, lambda: _start(running),
                      lambda executor: _stop(running, executor), suspend=suspend)


if __name__ == "__main__":
    sys.exit(main())
