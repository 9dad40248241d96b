"""What a bring-up starts: the one source of truth of both front-ends.

``launch/cozmo.launch.py`` (``ros2 launch cozmo_driver cozmo.launch.py``) and
``cozmo_bringup`` (:mod:`cozmo_driver.bringup`, for set-ups without the launch
system) declare the arguments of :data:`ARGUMENTS`, with these defaults and
descriptions, resolve them with :func:`resolve_arguments` and start the
enabled entries of :func:`make_plan`, in order. Neither has defaults or entries
of its own.

The entries::

    simulator              cozmo-sim on 127.0.0.1:<sim_port>       only with use_sim (and
                                                                    start_sim, the default)
    driver                 cozmo_driver_node                        always; the bring-up ends
                                                                    when it exits
    robot_state_publisher  robot_state_publisher (robot_description from xacro);
                           fallback: cozmo_description_publisher    always
    face                   cozmo_face_node                          only with enable_face
    behavior               cozmo_behavior_node                      only with enable_behavior
    rviz                   rviz2 -d cozmo_description/rviz/cozmo.rviz   only with rviz

With ``one_process:=true`` an entry ``stack`` (``cozmo_stack``, started where the
driver was) runs the driver, the description publisher (cozmo_description_publisher:
robot_state_publisher is a C++ program of its own) and the enabled face and behavior
nodes as separate nodes of one process on one executor (:mod:`cozmo_driver.ros.stack_node`);
those entries are then disabled (condition ``... and not one_process``) and become the
stack's :attr:`ProcessEntry.members`, each with its own name, namespace, parameter files
and remappings (:func:`stack_arguments`).

An entry whose executable is not installed is skipped with a message
(:func:`skip_message`), unless it has a fallback that is installed.

Parameters reach a node one way, whichever front-end starts it:
:func:`parameter_files` gives the ``--params-file`` files of an entry, in order
(the config file, then the plan's own groups of values, each written as YAML
under the node's fully qualified name). YAML keeps every value's type as rcl
reads it; launch_ros's typing of parameter dicts is never involved (it cannot
type an empty list, and reads a string such as ``'5551'`` as a number).

Both front-ends refuse an argument name that is not one of :data:`ARGUMENTS`
(:func:`check_argument_names`, with a close match suggested), a value
outside an argument's ``choices``, a ``robot_ip`` host name that is neither localhost nor
one of the hosts file (read, no name server asked; ``robot_ip:=sim`` is told to use
use_sim:=true), the same of the config file's driver ``robot_ip`` / ``robot_port`` the
arguments leave to it, and a ``local_ip`` / ``local_port`` the driver would refuse
(:func:`check_config_addresses`), a driver ``base_frame`` to which the robot
description gives a parent (two parents in tf) and a driver ``odom_frame`` that is a frame
of the description (a loop in tf, or a robot model no odometry moves)
(:func:`check_driver_frames`); they warn of a driver ``base_frame`` the description has not
(its frames unconnected to odom, :func:`check_driver_frames` too), of a ``robot_ip`` or
``robot_port`` given with use_sim:=true (ignored, :func:`ignored_with_sim`), of
each section of the config file that reaches no node (:func:`unreached_config_sections`),
and note those of another namespace (:func:`config_sections_of_other_namespaces`); and they start every process with
:func:`child_environment`, which makes the project's executables end when the
front-end does (:mod:`cozmo_driver.lifeline`).

Pure: no launch, no rclpy; it reads the parameter file, runs xacro, and writes
the parameter files it is asked for.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .addresses import NO_DESTINATION, address_problem
from .description import (DESCRIPTION_PACKAGE, DescriptionError, package_share, parent_links,
                          robot_description)
from .errors import ConfigurationError
from .fast_yaml import loader
from .lifeline import PARENT_PID_ENV

__all__ = [
    "PACKAGE",
    "Argument",
    "ARGUMENTS",
    "argument_defaults",
    "argument_descriptions",
    "PlanError",
    "BringupArgs",
    "closest_name",
    "check_argument_names",
    "node_parameter_owners",
    "resolve_arguments",
    "ParamFile",
    "Parameters",
    "ProcessEntry",
    "node_key",
    "parameter_files",
    "stack_arguments",
    "child_environment",
    "parameter_directory",
    "remove_stale_parameter_directories",
    "make_plan",
    "check_driver_frames",
    "ignored_with_sim",
    "check_config_addresses",
    "hosts_file_addresses",
    "default_config_path",
    "rviz_config_path",
    "rviz_fixed_frame",
    "node_parameters_in_file",
    "unreached_config_sections",
    "config_sections_of_other_namespaces",
    "locate_executable",
    "ament_executable",
    "skip_message",
]

PACKAGE = "cozmo_driver"

DRIVER_NODE = "cozmo_driver"
FACE_NODE = "cozmo_face"
BEHAVIOR_NODE = "cozmo_behavior"
SIM_HOST = "127.0.0.1"
RVIZ_CONFIG = "rviz/cozmo.rviz"
AUTO = "auto"


# ---------------------------------------------------------------------------- arguments

@dataclass(frozen=True)
class Argument:
    """A launch argument: name, default (a string, as launch has them), description."""

    name: str
    default: str
    description: str
    choices: Optional[Tuple[str, ...]] = None


_BOOL = ("true", "false")

#: Every argument of the bring-up, in the order they are shown.
ARGUMENTS: Tuple[Argument, ...] = (
    Argument("robot_ip", "",
             "IPv4 address of the robot, or localhost, a name.local or a host name of /etc/hosts (empty: the "
             "config file's robot_ip; ignored, with a warning, with use_sim:=true)"),
    Argument("robot_port", "",
             "UDP port of the robot (empty: the config file's robot_port; ignored, with a "
             "warning, with use_sim)"),
    Argument("namespace", "",
             "ROS namespace of every node, e.g. robot1 (empty: none); sets the frame prefix"),
    Argument("use_sim", "false",
             "start the simulated Cozmo (cozmo-sim) on 127.0.0.1:<sim_port> and drive it",
             _BOOL),
    Argument("sim_port", "5551", "UDP port of the simulator on 127.0.0.1 (with use_sim)"),
    Argument("start_sim", "true",
             "with use_sim: start cozmo-sim; false: a simulator already serves "
             "127.0.0.1:<sim_port> (a cozmo-sim with impairments, cozmo-demo's own) and the "
             "driver is pointed at it", _BOOL),
    Argument("config", "",
             "parameter file of the nodes (empty: the package's config/cozmo.yaml)"),
    Argument("frame_prefix", AUTO,
             "prefix of every frame id of the driver and of the robot description; "
             "'auto': '<namespace>/' with a namespace, else none"),
    Argument("rviz", "false", "start RViz with cozmo_description/rviz/cozmo.rviz", _BOOL),
    Argument("enable_face", "false", "start the face node (cozmo_face_node)", _BOOL),
    Argument("enable_behavior", "false", "start the behaviour node (cozmo_behavior_node)", _BOOL),
    Argument("one_process", "false",
             "run the driver, the description publisher and the enabled face and behaviour "
             "nodes as separate nodes in one process (cozmo_stack) instead of one process each",
             _BOOL),
)


def argument_defaults() -> Dict[str, str]:
    """{name: default} of every argument."""
    return {arg.name: arg.default for arg in ARGUMENTS}


def argument_descriptions() -> Dict[str, str]:
    """{name: description} of every argument (the default and choices appended)."""
    result = {}
    for arg in ARGUMENTS:
        text = arg.description
        if arg.choices:
            text += f" ({'|'.join(arg.choices)})"
        result[arg.name] = text
    return result


class PlanError(ConfigurationError, ValueError):
    """An argument value or a file the plan needs is wrong; the message says which."""


@dataclass(frozen=True)
class BringupArgs:
    """The arguments, checked and typed."""

    robot_ip: str
    robot_port: Optional[int]
    namespace: str              # without leading or trailing '/', may be nested: fleet/robot1
    use_sim: bool
    sim_port: int
    start_sim: bool             # with use_sim: start the simulator (else one already runs)
    config: Path
    frame_prefix: str           # 'auto' resolved; no leading '/'
    rviz: bool
    enable_face: bool
    enable_behavior: bool
    one_process: bool = False   # driver, description, face, behavior in one process
    #: the namespace a parent launch file pushed (PushRosNamespace), under which launch_ros
    #: puts every node on top of ``namespace``: it counts for the frame prefix, the config
    #: file's sections and RViz's topics, not for the entries' own namespace
    outer_namespace: str = ""

    @property
    def full_namespace(self) -> str:
        """Where the nodes end up: ``outer_namespace/namespace``."""
        return "/".join(part for part in (self.outer_namespace, self.namespace) if part)


_NAME_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: what the driver's messages say of the robot's address (transport.udp's ROBOT_ADDRESS_HINT)
ROBOT_ADDRESS_HINT = "a Cozmo answers at 172.31.1.1 on its own Wi-Fi"
#: host:port (one colon: an IPv6 address has more, and is the driver's to refuse)
_HOST_AND_PORT = re.compile(r"^([^:]+):([0-9]+)$")
#: the hosts file: a robot_ip host name must be one of its names (or localhost), read from it
#: here without asking a name server (:func:`_check_robot_name`)
HOSTS_FILE = Path("/etc/hosts")


def closest_name(name: str, known: Optional[Sequence[str]] = None) -> Optional[str]:
    """The argument name (of ``known``, default the plan's) closest to a misspelt ``name``,
    if one is close."""
    known = [arg.name for arg in ARGUMENTS] if known is None else list(known)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return close[0] if close else None


def node_parameter_owners(name: str) -> Optional[str]:
    """The nodes of which ``name`` is a parameter (``cozmo_driver``, ``cozmo_face``,
    ``cozmo_behavior``, or every node's ``use_sim_time``), said as words, or None."""
    from .behavior.parameters import BEHAVIOR_PARAMETERS
    from .driver.parameters import PARAMETERS
    from .face.parameters import FACE_PARAMETERS
    if name == "use_sim_time":
        return "every node"
    owners = [node for node, table in ((DRIVER_NODE, PARAMETERS), (FACE_NODE, FACE_PARAMETERS),
                                       (BEHAVIOR_NODE, BEHAVIOR_PARAMETERS))
              if any(spec.name == name for spec in table)]
    return " and ".join(owners) or None


def check_argument_names(names: Iterable[str], also: Iterable[str] = (),
                         known: Optional[Sequence[str]] = None) -> None:
    """Refuse every name that is not an argument of the bring-up (nor one of ``also``):
    a PlanError that names each, with the closest argument where one is close (a
    misspelt ``use_simm:=true`` would otherwise drive the real robot), and lists the
    arguments; a node's parameter (``local_port``, ``use_sim_time``) is said to be one, for
    the parameter file, with no suggestion (a close argument would do something else).
    ``known``: other argument names than the plan's (cozmo-demo's), with no such saying."""
    plans = known is None
    known = [arg.name for arg in ARGUMENTS] if known is None else list(known)
    also = set(also)
    unknown = [name for name in dict.fromkeys(names) if name not in known and name not in also]
    if not unknown:
        return
    described = []
    for name in unknown:
        owners = node_parameter_owners(name) if plans else None
        close = closest_name(name, known)
        if owners:
            described.append(f"{name!r} (a parameter of {owners}, not an argument of the bring-up: "
                             "set it in the parameter file given with config:=)")
        else:
            described.append(f"{name!r} (did you mean {close!r}?)" if close else repr(name))
    noun = "argument" if len(unknown) == 1 else "arguments"
    raise PlanError(f"unknown {noun} {', '.join(described)}; the arguments are: "
                    f"{', '.join(known)}")


def _parse_port(name: str, value: str, allow_empty: bool) -> Optional[int]:
    text = str(value).strip()
    if not text and allow_empty:
        return None
    try:
        port = int(text)
    except ValueError:
        raise PlanError(f"{name}:={value!r}: expected a UDP port number 1..65535") from None
    if not 1 <= port <= 65535:
        raise PlanError(f"{name}:={value!r}: expected a UDP port number 1..65535")
    return port


def _is_ipv6(text: str) -> bool:
    """Whether ``text`` is an IPv6 address (``[::1]``, ``fe80::1%wlan0``, ``[::1]:5551`` too)."""
    host = text[1:].split("]", 1)[0] if text.startswith("[") else text
    try:
        ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _setting(name: str, value: Any, in_file: bool) -> str:
    """How a message shows a setting: ``name:=value`` (an argument), ``name: value`` (the file)."""
    return f"{name}: {value}" if in_file else f"{name}:={value}"


def _robot_hint(in_file: bool) -> str:
    """Where a robot answers, said for an argument or for the config file's robot_ip."""
    if in_file:
        return f"{ROBOT_ADDRESS_HINT}: robot_ip: 172.31.1.1 in the file, or robot_ip:=172.31.1.1"
    return f"{ROBOT_ADDRESS_HINT}: robot_ip:=172.31.1.1"


def _parse_robot_ip(value: str, said: Optional[str] = None, in_file: bool = False) -> str:
    """robot_ip, judged as the driver's link judges it when it opens (nothing resolved), and
    as a host name, so that an address the driver would refuse, or could not resolve, is
    refused before anything starts. ``said``: how the message names it (default
    ``robot_ip:='...'``); ``in_file``: it is the config file's (the hints say so)."""
    said = f"robot_ip:={value!r}" if said is None else said
    text = str(value).strip()
    match = _HOST_AND_PORT.match(text)
    if match:  # the driver would be configured for the robot at <host>:<port>:<robot_port>
        host, port = match.group(1), match.group(2)
        both = (f"robot_ip: {host} and robot_port: {port} in the file" if in_file
                else f"robot_ip:={host} robot_port:={port}")
        raise PlanError(f"{said}: robot_ip is the address only; give the port as "
                        f"{_setting('robot_port', port, in_file)} ({both})")
    if not text:
        return text
    hint = _robot_hint(in_file)
    if _is_ipv6(text):
        raise PlanError(f"{said}: an IPv6 address; the driver reaches the robot over "
                        f"IPv4 only ({hint})")
    problem = address_problem(text, destination=True)
    labels = text[:-1].split(".") if text.endswith(".") else text.split(".")
    if problem is None and not all(label and label[0] != "-" and label[-1] != "-" and
                                   all(c.isalnum() or c in "-_" for c in label) for label in labels):
        problem = (f"{text!r} is neither an IPv4 address nor a host name (letters, digits, '-' "
                   "and '_', in parts separated by dots)")
    if problem is not None:
        raise PlanError(f"{said}: {problem}; check the address ({hint})")
    return text


def hosts_file_addresses(name: str, path: Optional[Path] = None) -> List[str]:
    """The addresses the hosts file (``path``, default :data:`HOSTS_FILE`) gives the host name
    ``name`` (case-insensitive, a trailing dot ignored), in its order; none when the file
    lists it not, or cannot be read. Reads the file: no look-up, no name server asked."""
    wanted = name.rstrip(".").lower()
    try:
        text = Path(HOSTS_FILE if path is None else path).read_text(errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and wanted in (field.rstrip(".").lower() for field in fields[1:]):
            found.append(fields[0])
    return found


def _is_ipv4(text: str) -> bool:
    try:
        return str(ipaddress.IPv4Address(text)) == text
    except ValueError:
        return False


def _check_robot_name(host: str, value: str, said: Optional[str] = None,
                      in_file: bool = False) -> None:
    """Refuse a robot_ip host name the driver could resolve only by asking a name server, or
    not at all: one that is neither localhost (``localhost``, ``*.localhost``: the loopback
    address, whatever the hosts file says), nor a multicast DNS name (``*.local``: a computer
    of the network, say one running cozmo-sim, answers for it), nor a name the hosts file gives
    an IPv4 address (nor one it gives the unspecified or broadcast address). No name server is asked: the
    robot's own Wi-Fi has none, and ``sim`` (the user meant use_sim:=true) would otherwise be
    refused only by the driver, after the bring-up started. A name meant for the simulator
    (``sim``, ``cozmo-sim``) or close to localhost is told to use use_sim:=true. ``said`` and
    ``in_file``: as for :func:`_parse_robot_ip`."""
    said = f"robot_ip:={value!r}" if said is None else said
    if _is_ipv4(host):
        return
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return
    if name.endswith(".local") and not name[:1].isdigit():
        return  # multicast DNS: the computers of the network answer for it, no name server
    hint = _robot_hint(in_file)
    listed = hosts_file_addresses(name)
    ipv4 = [address for address in listed if _is_ipv4(address)]
    if ipv4:
        if ipv4[0] in NO_DESTINATION:
            raise PlanError(f"{said}: {HOSTS_FILE} gives {host!r} {ipv4[0]}, "
                            f"{NO_DESTINATION[ipv4[0]]}, not a robot's; check the address ({hint})")
        return
    if listed:
        raise PlanError(f"{said}: {HOSTS_FILE} gives {host!r} no IPv4 address "
                        f"({', '.join(listed)}); the driver reaches the robot over IPv4 only ({hint})")
    simulator = ("to drive the simulator give use_sim:=true (the bring-up starts cozmo-sim on "
                 "127.0.0.1:<sim_port> and points the driver at it; no robot_ip needed), or "
                 "robot_ip:=127.0.0.1 for a cozmo-sim you started on this computer")
    if "sim" in name:
        raise PlanError(f"{said}: {host!r} is no robot's address: {simulator}; "
                        f"to drive a Cozmo give its address ({hint})")
    if difflib.get_close_matches(name, ["localhost"], n=1, cutoff=0.7):
        raise PlanError(f"{said}: {host!r} is not localhost (a typo?) nor a name of "
                        f"{HOSTS_FILE}: {simulator}; to drive a Cozmo give its address ({hint})")
    raise PlanError(f"{said}: {host!r} is neither an IPv4 address, nor localhost, nor "
                    f"a host name of {HOSTS_FILE}: the bring-up takes no name only a name server "
                    f"knows (none answers on the robot's own Wi-Fi, and the driver would fail to "
                    f"resolve it once started); add the name to {HOSTS_FILE}, or {simulator}; to "
                    f"drive a Cozmo give its address ({hint})")


def ignored_with_sim(args: BringupArgs) -> List[str]:
    """The warning of a robot_ip or robot_port given with use_sim:=true: the driver is pointed
    at the simulator's address (127.0.0.1:<sim_port>), not at these. Empty without use_sim."""
    given = [f"{name}:={value}" for name, value in (("robot_ip", args.robot_ip),
                                                   ("robot_port", args.robot_port))
             if args.use_sim and value not in ("", None)]
    if not given:
        return []
    simulator = (f"the simulator the bring-up starts on {SIM_HOST}:{args.sim_port}" if args.start_sim
                 else f"the simulator already serving {SIM_HOST}:{args.sim_port} (start_sim:=false)")
    text = (f"{' and '.join(given)} ignored with use_sim:=true: the driver drives {simulator}, "
            f"the simulator's own address; to drive the robot there, leave out use_sim:=true")
    if args.robot_port is not None:
        text += f"; the simulator's port is given as sim_port:= (sim_port:={args.robot_port})"
    return [text]


_UNSET = object()


def check_config_addresses(args: BringupArgs) -> None:
    """Refuse, before anything starts, the addresses the config file gives the driver (its
    section that reaches the driver the plan starts, :func:`driver_file_value`) that the driver
    would refuse at start (exit status 2, after the bring-up started everything else): its
    ``robot_ip`` and ``robot_port`` judged as the arguments are (:func:`_parse_robot_ip`,
    :func:`_check_robot_name`: a host name is looked for in the hosts file, no name server is
    asked), unless ``robot_ip:=`` / ``robot_port:=`` override them or use_sim:=true points the
    driver at the simulator; its ``local_ip`` (an IPv4 address, not an IPv6 one) and
    ``local_port`` always. A PlanError names the file and the parameter; the driver's own
    checks of a value (its type, range, emptiness) come first, worded as the driver words them."""
    from .driver.parameters import validate_value
    names = [name for name, overridden in (("robot_ip", bool(args.robot_ip)),
                                           ("robot_port", args.robot_port is not None))
             if not args.use_sim and not overridden] + ["local_ip", "local_port"]
    for name in names:
        value = driver_file_value(args, name, _UNSET)
        if value is _UNSET:
            continue  # the driver's default
        said = f"config:={args.config}: the driver's {name} {value!r}"
        problem = validate_value(name, value)
        if problem is not None:
            if repr(value) not in problem and str(value) not in problem:
                problem += f" (the file gives {value!r})"
            if name.endswith("_port"):
                problem += (" (a Cozmo answers at UDP port 5551)" if name == "robot_port"
                            else " (0: any free port)")
            raise PlanError(f"config:={args.config}: the driver's {problem}")
        if name.endswith("_port"):
            continue
        if value != value.strip():
            raise PlanError(f"{said}: no spaces around an address (the driver refuses it)")
        if name == "robot_ip":
            _check_robot_name(_parse_robot_ip(value, said, in_file=True), value, said, in_file=True)
            continue
        hint = "give local_ip an address of this computer, or 0.0.0.0 for every interface"
        if _is_ipv6(value):
            raise PlanError(f"{said}: an IPv6 address; the driver binds an IPv4 one only ({hint})")
        problem = address_problem(value)
        if problem is not None:
            raise PlanError(f"{said}: {problem}; check the address ({hint})")


def _parse_namespace(value: str) -> str:
    text = str(value).strip().strip("/")
    if not text:
        return ""
    for token in text.split("/"):
        if not _NAME_TOKEN.match(token):
            raise PlanError(f"namespace:={value!r}: each part must start with a letter or '_' "
                            "and hold only letters, digits and '_'")
    return text


def default_config_path() -> Path:
    """The package's parameter file, config/cozmo.yaml."""
    try:
        return package_share(PACKAGE) / "config" / "cozmo.yaml"
    except DescriptionError as exc:
        raise PlanError(str(exc)) from exc


def rviz_config_path() -> Path:
    """cozmo_description/rviz/cozmo.rviz."""
    try:
        return package_share(DESCRIPTION_PACKAGE) / RVIZ_CONFIG
    except DescriptionError as exc:
        raise PlanError(str(exc)) from exc


def resolve_arguments(values: Optional[Mapping[str, Any]] = None,
                      outer_namespace: str = "",
                      given: Optional[Iterable[str]] = None) -> BringupArgs:
    """Check and type the arguments; missing ones take their default, unknown ones and
    values outside an argument's choices are refused. ``outer_namespace``: the namespace a
    parent launch file pushed (see :class:`BringupArgs`). ``given``: the names the user
    gave (default: those of ``values``); ``sim_port`` or ``start_sim`` given without
    ``use_sim:=true`` is refused, whatever its value (the user meant the simulator)."""
    values = dict(values or {})
    check_argument_names(values)
    given_names = set(values if given is None else given)
    raw = argument_defaults()
    raw.update({k: "" if v is None else str(v) for k, v in values.items()})
    for arg in ARGUMENTS:  # as DeclareLaunchArgument(choices=...) does in ros2 launch
        if arg.choices and raw[arg.name] not in arg.choices:
            raise PlanError(f"{arg.name}:={raw[arg.name]!r}: expected one of "
                            f"{', '.join(arg.choices)}")
    stray = [f"{name}:={raw[name]}" for name in ("sim_port", "start_sim")
             if raw["use_sim"] != "true" and name in given_names]
    if stray:  # the user meant the simulator, and the driver would reach for the robot
        raise PlanError(f"{' and '.join(stray)}: only for the simulator, and use_sim is false, "
                        "so the driver would drive the robot at the config file's robot_ip "
                        "(or robot_ip:=); add use_sim:=true to drive the simulator")
    namespace = _parse_namespace(raw["namespace"])
    outer = str(outer_namespace or "").strip("/")
    full = "/".join(part for part in (outer, namespace) if part)
    frame_prefix = raw["frame_prefix"].strip()
    if frame_prefix == AUTO:
        frame_prefix = f"{full}/" if full else ""
    frame_prefix = frame_prefix.lstrip("/")
    if any(c.isspace() for c in frame_prefix):  # as the driver refuses it, before anything starts
        raise PlanError(f"frame_prefix:={raw['frame_prefix']!r}: frame ids must not contain "
                        "white space")
    config = Path(raw["config"]).expanduser() if raw["config"].strip() else default_config_path()
    if config.is_dir():
        raise PlanError(f"config:={raw['config'] or config}: a directory, not a parameter file: "
                        "give the path of the YAML file itself, e.g. config/cozmo.yaml")
    if not config.is_file():
        raise PlanError(f"config:={raw['config'] or config}: no such parameter file")
    _parameter_sections(config)  # a file rcl would refuse, or read as none: before anything starts
    robot_ip = _parse_robot_ip(raw["robot_ip"])
    if robot_ip and raw["use_sim"] != "true":  # with use_sim it is ignored (ignored_with_sim)
        _check_robot_name(robot_ip, raw["robot_ip"])
    args = BringupArgs(
        robot_ip=robot_ip,
        robot_port=_parse_port("robot_port", raw["robot_port"], allow_empty=True),
        namespace=namespace,
        use_sim=raw["use_sim"] == "true",
        sim_port=_parse_port("sim_port", raw["sim_port"], allow_empty=False),
        start_sim=raw["start_sim"] == "true",
        config=config,
        frame_prefix=frame_prefix,
        rviz=raw["rviz"] == "true",
        enable_face=raw["enable_face"] == "true",
        enable_behavior=raw["enable_behavior"] == "true",
        one_process=raw["one_process"] == "true",
        outer_namespace=outer,
    )
    check_config_addresses(args)  # the driver's addresses the arguments leave to the file
    return args


# ---------------------------------------------------------------------------- entries

@dataclass(frozen=True)
class ParamFile:
    """A ROS 2 parameter file (``--params-file``)."""

    path: str


#: a parameter file, or a {name: value} group of parameters
Parameters = Union[ParamFile, Mapping[str, Any]]


@dataclass(frozen=True)
class ProcessEntry:
    """One process of the bring-up."""

    name: str                                   # what it is: "driver", "simulator", ...
    package: str
    executable: str
    enabled: bool                               # the condition, evaluated
    condition: str                              # why: "always", "use_sim", ...
    node_name: Optional[str] = None             # None: not a ROS node (no --ros-args)
    namespace: str = ""                         # without leading '/'
    parameters: Tuple[Parameters, ...] = ()
    remappings: Tuple[Tuple[str, str], ...] = ()
    arguments: Tuple[str, ...] = ()             # command-line arguments before --ros-args
    required: bool = False                      # the bring-up stops when this one exits
    fallback: Optional["ProcessEntry"] = None   # started instead when not installed
    stop_last: bool = False                     # stopped after the others (the simulator)
    members: Tuple["ProcessEntry", ...] = ()    # the nodes of a one-process stack, in order
    note: str = field(default="", compare=False)

    def ros_arguments(self, parameter_files: Sequence[str]) -> List[str]:
        """``--ros-args ...`` for a command line, with ``parameter_files`` (those of
        :func:`parameter_files`) as ``--params-file``."""
        if self.node_name is None:
            return []
        args = ["--ros-args", "-r", f"__node:={self.node_name}"]
        if self.namespace:
            args += ["-r", f"__ns:=/{self.namespace}"]
        for path in parameter_files:
            args += ["--params-file", str(path)]
        for source, target in self.remappings:
            args += ["-r", f"{source}:={target}"]
        return args


def stack_arguments(entry: ProcessEntry, files_of: Callable[[ProcessEntry], Sequence[str]],
                    namespace: Optional[str] = None) -> List[str]:
    """The command-line arguments of a stack entry (``cozmo_stack``): for each member
    ``--node <member name> --ros-args ... --``, the member's own ROS arguments
    (:meth:`ProcessEntry.ros_arguments`) with ``files_of(member)`` as its parameter files
    (:func:`parameter_files`); ``namespace``: the one the nodes get instead of the
    members' own (the launch file's, with a parent's PushRosNamespace)."""
    args: List[str] = []
    for member in entry.members:
        placed = member if namespace is None else replace(member, namespace=namespace)
        args += ["--node", member.name, *placed.ros_arguments(files_of(member)), "--"]
    return args


def node_key(namespace: str, node_name: str) -> str:
    """The fully qualified name of node ``node_name`` in ``namespace``: the node key of a
    parameter file that reaches that node and no other."""
    namespace = namespace.strip("/")
    return f"/{namespace}/{node_name}" if namespace else f"/{node_name}"


def _parameter_value(name: str, value: Any) -> Any:
    """``value`` as it goes into a parameter file: a bool, int, float or str, a list of
    one of these, or a mapping of such (nested names); anything else is a PlanError."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = list(value)
        kinds = {type(item) for item in items}
        if len(kinds) > 1 or not kinds <= {bool, int, float, str}:
            raise PlanError(f"parameter {name}: {value!r} is not a ROS parameter value "
                            "(an array holds bools, integers, floats or strings, one kind)")
        return items
    if isinstance(value, Mapping):
        return {str(key): _parameter_value(f"{name}.{key}", item) for key, item in value.items()}
    raise PlanError(f"parameter {name}: {value!r} is not a ROS parameter value")


def parameter_files(entry: ProcessEntry, directory: Union[str, os.PathLike],
                    namespace: Optional[str] = None) -> List[str]:
    """The parameter files of ``entry``'s node, in order, for ``--params-file``: each
    ParamFile as it is; each group of values written to ``<directory>/<entry>_<n>.yaml``
    under the node's fully qualified name (:func:`node_key` of ``namespace``, default the
    entry's own; the launch file passes the namespace a parent's PushRosNamespace adds).

    The one way the plan's parameters reach a node, from either front-end. YAML keeps
    each value's type as rcl reads it: ``'5551'`` and ``'true'`` stay strings (quoted),
    ``''`` an empty string, ``2.0`` a double, ``[]`` an empty array (which rcl reads as
    not set, as from any parameter file: the driver declares its string arrays typed)."""
    import yaml

    if entry.node_name is None:
        return []
    key = node_key(entry.namespace if namespace is None else namespace, entry.node_name)
    files: List[str] = []
    for index, group in enumerate(entry.parameters):
        if isinstance(group, ParamFile):
            files.append(group.path)
            continue
        values = {str(name): _parameter_value(str(name), value) for name, value in group.items()}
        path = Path(directory) / f"{entry.name}_{index}.yaml"
        with open(path, "w", encoding="utf-8") as stream:
            # width: a long string (the robot description) stays on one line
            yaml.safe_dump({key: {"ros__parameters": values}}, stream, width=1 << 30,
                           default_flow_style=False, sort_keys=False, allow_unicode=True)
        files.append(str(path))
    return files


def parameter_directory(prefix: str) -> str:
    """A new temporary directory for a front-end's parameter files, ``<prefix><pid>_<8
    random characters>`` with this process's id, after removing those of ``prefix`` that a
    front-end now gone left behind (:func:`remove_stale_parameter_directories`)."""
    remove_stale_parameter_directories(prefix)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}_")


def remove_stale_parameter_directories(prefix: str,
                                       directory: Union[str, os.PathLike, None] = None) -> List[str]:
    """Remove the directories of :func:`parameter_directory` in ``directory`` (default: the
    temporary directory) whose front-end is gone: killed, it could not remove its own (an
    atexit clean-up does not run on SIGTERM or SIGKILL). Only a directory of this user
    named exactly so, its process id no longer running; returns the paths removed."""
    base = Path(tempfile.gettempdir() if directory is None else directory)
    pattern = re.compile(re.escape(prefix) + r"([1-9][0-9]*)_[a-z0-9_]{8}")
    removed = []
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return removed
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or _process_runs(int(match.group(1))):
            continue
        path = base / name
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def _process_runs(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie, another user's too)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone; a number no process id can be
        return False
    except PermissionError:  # another user's
        return True
    return True


def child_environment() -> Dict[str, str]:
    """Environment variables for every process a front-end starts: this process's id in
    :data:`~cozmo_driver.lifeline.PARENT_PID_ENV`, so that the project's executables end
    when the front-end dies (:func:`cozmo_driver.lifeline.exit_with_parent`)."""
    return {PARENT_PID_ENV: str(os.getpid())}


def _key_matches(key: str, fqn: str) -> bool:
    """Whether a node key of a parameter file addresses the node ``fqn`` (rcl's rules:
    a name without leading '/' is absolute, '*' is one token, '**' any number)."""
    key = key if key.startswith("/") else "/" + key
    pattern = ""
    for token in key.strip("/").split("/"):
        if token == "**":
            pattern += r"(/[^/]+)*"
        else:
            pattern += "/" + re.escape(token).replace(r"\*", "[^/]*")
    return re.fullmatch(pattern or "/", fqn) is not None


def node_parameters_in_file(path: Path, node_name: str, namespace: str
                            ) -> Tuple[bool, Dict[str, Any]]:
    """(whether the file addresses the node at ``/<namespace>/<node_name>``, the parameters
    it gives the node ``node_name`` without namespace).

    A parameter file written for one robot says ``cozmo_driver:`` (i.e. ``/cozmo_driver``),
    which does not reach ``/robot1/cozmo_driver``; the plan then passes that section's
    values as parameters of its own. Only a key that names the node (``/robot1/cozmo_driver``,
    ``/**/cozmo_driver``) says the file was written for it under a namespace: one for every
    node (``/**``, ``/robot1/*``), as for ``use_sim_time``, does not."""
    fqn = node_key(namespace, node_name)
    sections = _parameter_sections(path)
    applies = any(_key_matches(key, fqn) and "*" not in key.rstrip("/").split("/")[-1]
                  for key, _ in sections)
    values: Dict[str, Any] = {}
    for key, section in sections:
        if _key_matches(key, f"/{node_name}"):
            values.update(section)
    return applies, values


def unreached_config_sections(args: BringupArgs) -> List[str]:
    """A warning for each section of the config file that reaches none of the nodes that
    read it (the driver, the face and behavior nodes, at ``args.full_namespace``; with a
    namespace also a ``cozmo_driver:`` section the plan copies), with the closest node
    name where one is close: ``cozmo_drivr:`` would otherwise be applied to nothing,
    silently. A key with ``*`` is meant for any number of nodes, the section of a node not
    started is for when it is, and one of these nodes under another namespace
    (``/robot2/cozmo_driver:`` in a file shared by several robots) is for that namespace's
    bring-up (:func:`config_sections_of_other_namespaces`): none is warned of. A file the
    plan cannot read gives none (resolve_arguments refuses it)."""
    nodes = _bringup_nodes(args)
    warnings = []
    for key, namespace in _unreached_sections(args):
        if namespace is not None:
            continue
        close = difflib.get_close_matches("/" + key.lstrip("/"), nodes, n=1, cutoff=0.6)
        warnings.append(f"config:={args.config}: the section {key!r} reaches no node of the "
                        f"bring-up ({', '.join(nodes)}): its parameters are not applied"
                        + (f"; did you mean {close[0]!r}?" if close else ""))
    return warnings


def config_sections_of_other_namespaces(args: BringupArgs) -> List[str]:
    """A note (not a warning) for each section of the config file that names the driver,
    face or behavior node under a namespace other than the bring-up's (``/robot2/cozmo_driver:``
    run with namespace:=robot1): a file shared by several robots holds those for the other
    robots' bring-ups."""
    nodes = ", ".join(_bringup_nodes(args))
    return [f"config:={args.config}: the section {key!r} is for the namespace {namespace}, "
            f"not this bring-up's ({nodes}): it is left to that namespace's bring-up"
            for key, namespace in _unreached_sections(args) if namespace is not None]


def _bringup_nodes(args: BringupArgs) -> List[str]:
    return [node_key(args.full_namespace, name) for name in (DRIVER_NODE, FACE_NODE, BEHAVIOR_NODE)]


def _unreached_sections(args: BringupArgs) -> List[Tuple[str, Optional[str]]]:
    """(key, the namespace it names one of the bring-up's nodes under, else None) of each
    section of the config file without ``*`` that reaches none of the bring-up's nodes."""
    try:
        keys = list(dict.fromkeys(key for key, _ in _parameter_sections(args.config)))
    except PlanError:
        return []
    names = (DRIVER_NODE, FACE_NODE, BEHAVIOR_NODE)
    targets = _bringup_nodes(args)
    if args.full_namespace:  # a section the plan copies where it does not reach the node
        targets += [f"/{name}" for name in names
                    if not node_parameters_in_file(args.config, name, args.full_namespace)[0]]
    unreached: List[Tuple[str, Optional[str]]] = []
    for key in keys:
        if "*" in key or any(_key_matches(key, target) for target in targets):
            continue
        namespace, _, name = ("/" + key.strip("/")).rpartition("/")
        unreached.append((key, (namespace or "/") if name in names else None))
    return unreached


_PARAMETERS_KEY = "ros__parameters"


def _what(value: Any) -> str:
    """How a message names a YAML value that is not where it should be."""
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return f"the value {text if len(text) <= 40 else text[:37] + '...'}"


def _parameter_sections(path: Path) -> List[Tuple[str, Dict[str, Any]]]:
    """(node key, its ros__parameters) of a parameter file, in the file's order; PlanError
    for a file that cannot be read or is not a parameter file.

    Read as rcl reads it: the keys above a ``ros__parameters:`` are the node's name, nested
    ones joined with '/' (``robot1:`` then ``cozmo_driver:`` is ``robot1/cozmo_driver``);
    a value that is not a mapping there, or a ``ros__parameters:`` that is not one, is
    refused, as rcl refuses it (a file that holds no mapping at all, which rcl reads as no
    parameters, too: the user's parameters would be silently not applied). A node's (or a
    namespace's) section given twice is two sections of that key, whose parameters rcl
    gives the node together, and a group of parameters given twice is one; a second
    ``ros__parameters:`` under one node is refused, as rcl refuses it, and so is a parameter
    given twice for one node: rcl gives the node one of the two, not always the last
    (``a: 1`` then ``a: 2.5`` gives it 1), where YAML would keep the last."""
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - PyYAML is a dependency of xacro
        raise PlanError(f"PyYAML is needed to read {path}: {exc}") from exc
    try:
        with open(path, encoding="utf-8") as stream:
            reader = loader()(stream)
            try:
                root = reader.get_single_node()
                return [] if root is None else _sections_of(path, reader, root)
            finally:
                reader.dispose()
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PlanError(f"cannot read the parameter file {path}: {exc}") from exc


def _sections_of(path: Path, reader: Any, root: Any) -> List[Tuple[str, Dict[str, Any]]]:
    """:func:`_parameter_sections` of the YAML node ``root`` (``reader`` constructs its values)."""
    import yaml

    example = "as in the package's config/cozmo.yaml"
    if not isinstance(root, yaml.MappingNode):
        data = reader.construct_document(root)
        if data is None:  # null: no parameters
            return []
        raise PlanError(f"{path} is not a ROS 2 parameter file: it holds {_what(data)} where node "
                        f"names are expected (cozmo_driver:, with ros__parameters: under it, {example})")
    sections: List[Tuple[str, Dict[str, Any]]] = []
    given: Dict[str, Dict[str, Tuple[int, bool]]] = {}  # node key -> parameter -> (line, a group)

    def pairs(node: Any) -> List[Tuple[Any, int, Any]]:
        reader.flatten_mapping(node)  # (a << merge, which rcl refuses anyway)
        return [(reader.construct_object(key, deep=True), key.start_mark.line + 1, value)
                for key, value in node.value]

    def value_of(node: Any) -> Any:
        return reader.construct_object(node, deep=True)

    def parameters(node: Any, prefix: str, group: str, into: Dict[Any, Any]) -> None:
        for key, line, value in pairs(node):
            name = f"{group}.{key}" if group else str(key)
            is_group = isinstance(value, yaml.MappingNode)
            first = given.setdefault(prefix, {}).get(name)
            if first is not None and not (first[1] and is_group):
                raise PlanError(
                    f"{path}: the parameter {name!r} of {prefix!r} is given twice, on lines {first[0]} "
                    f"and {line}: the node would get one of them, not always the last (rcl gives "
                    "a: 1 then a: 2.5 as 1); give it once")
            given[prefix][name] = (line, is_group)
            if is_group:
                parameters(value, prefix, name, into.setdefault(key, {}))
            else:
                into[key] = value_of(value)

    def walk(node: Any, prefix: str) -> None:
        parameters_line = 0
        for key, line, value in pairs(node):
            if key == _PARAMETERS_KEY:
                if not prefix:
                    raise PlanError(f"{path}: ros__parameters: at the top names no node: put it "
                                    f"under the node's name (cozmo_driver:), {example}")
                if not isinstance(value, yaml.MappingNode):
                    raise PlanError(
                        f"{path}: the ros__parameters of {prefix!r} hold {_what(value_of(value))}, not the "
                        "node's parameters: write them under it as name: value lines (none: "
                        f"ros__parameters: {{}}), {example}")
                if parameters_line:
                    raise PlanError(f"{path}: ros__parameters: is given twice under {prefix!r}, on lines "
                                    f"{parameters_line} and {line}, which rcl refuses: put the "
                                    "parameters under one")
                parameters_line = line
                values: Dict[str, Any] = {}
                parameters(value, prefix, "", values)
                sections.append((prefix, values))
            elif not isinstance(value, yaml.MappingNode):
                shown = _what(value_of(value))
                where = (f"{key!r} under {prefix!r} holds {shown} outside ros__parameters: a "
                         f"node's parameters go under its ros__parameters: ({prefix}: ros__parameters: "
                         f"{key}: ...)" if prefix else
                         f"{key!r} holds {shown} where a node's section is expected "
                         "(ros__parameters: with the node's parameters under it)")
                raise PlanError(f"{path}: {where}, {example}")
            else:
                walk(value, f"{prefix}/{str(key).strip('/')}" if prefix else str(key))

    walk(root, "")
    return sections


def _sim_entry(args: BringupArgs) -> ProcessEntry:
    return ProcessEntry(
        name="simulator", package=PACKAGE, executable="cozmo-sim",
        enabled=args.use_sim and args.start_sim, condition="use_sim and start_sim",
        arguments=("--host", SIM_HOST, "--port", str(args.sim_port), "--quiet"),
        required=True, stop_last=True,
        note=f"simulated Cozmo on udp://{SIM_HOST}:{args.sim_port}")


def _driver_entry(args: BringupArgs) -> ProcessEntry:
    parameters: List[Parameters] = [ParamFile(str(args.config))]
    if args.full_namespace:
        applies, section = node_parameters_in_file(args.config, DRIVER_NODE, args.full_namespace)
        if not applies and section:
            parameters.append(dict(section))
    overrides: Dict[str, Any] = {}
    if args.use_sim:
        overrides["robot_ip"] = SIM_HOST
        overrides["robot_port"] = args.sim_port
    else:
        if args.robot_ip:
            overrides["robot_ip"] = args.robot_ip
        if args.robot_port is not None:
            overrides["robot_port"] = args.robot_port
    overrides["frame_prefix"] = args.frame_prefix
    parameters.append(overrides)
    if args.use_sim:
        where = f"the simulator at {SIM_HOST}:{args.sim_port}"
    else:
        where = f"the robot at {overrides.get('robot_ip', 'the config file robot_ip')}"
    return ProcessEntry(
        name="driver", package=PACKAGE, executable="cozmo_driver_node", enabled=True,
        condition="always", node_name=DRIVER_NODE, namespace=args.namespace,
        parameters=tuple(parameters), required=True, note=f"drives {where}")


def _description_entries(args: BringupArgs, description: str) -> ProcessEntry:
    parameters = ({"robot_description": description},)
    fallback = ProcessEntry(
        name="description_publisher", package=PACKAGE, executable="cozmo_description_publisher",
        enabled=True, condition="always (robot_state_publisher is not installed)",
        node_name="description_publisher", namespace=args.namespace, parameters=parameters,
        note="robot_description, /tf_static and /tf from joint_states")
    return ProcessEntry(
        name="robot_state_publisher", package="robot_state_publisher",
        executable="robot_state_publisher", enabled=True, condition="always",
        node_name="robot_state_publisher", namespace=args.namespace, parameters=parameters,
        fallback=fallback, note="robot_description, /tf_static and /tf from joint_states")


def _optional_node(args: BringupArgs, name: str, executable: str, node_name: str,
                   enabled: bool, condition: str, note: str = "") -> ProcessEntry:
    """A node started on a flag, with the config file's section of ``node_name`` (copied as
    parameters of its own under a namespace, which a key ``node_name:`` does not reach; the
    file is read only when the node is enabled)."""
    parameters: List[Parameters] = [ParamFile(str(args.config))]
    if args.full_namespace and enabled:
        applies, section = node_parameters_in_file(args.config, node_name, args.full_namespace)
        if not applies and section:
            parameters.append(dict(section))
    return ProcessEntry(
        name=name, package=PACKAGE, executable=executable, enabled=enabled, condition=condition,
        node_name=node_name, namespace=args.namespace, parameters=tuple(parameters), note=note)


def _face_entry(args: BringupArgs) -> ProcessEntry:
    """The face node with the config file's ``cozmo_face:`` section."""
    return _optional_node(
        args, "face", "cozmo_face_node", FACE_NODE, args.enable_face, "enable_face",
        note="the living face on display/face, shown by the driver")


def _behavior_entry(args: BringupArgs) -> ProcessEntry:
    """The behavior engine with the config file's ``cozmo_behavior:`` section, and the
    driver's ``cmd_vel_stamped``: the engine watches the driver's cmd_vel, of the driver's
    type (with another it would never see a user drive, and would drive against them)."""
    entry = _optional_node(
        args, "behavior", "cozmo_behavior_node", BEHAVIOR_NODE, args.enable_behavior,
        "enable_behavior",
        note="the behavior engine: reactions, moods and idle activities through the driver's "
             "topics and actions")
    if not args.enable_behavior:
        return entry
    stamped = driver_file_value(args, "cmd_vel_stamped", False)
    return replace(entry, parameters=entry.parameters + ({"cmd_vel_stamped": bool(stamped)},))


def driver_file_value(args: BringupArgs, name: str, default: Any) -> Any:
    """The value the config file gives the driver's parameter ``name`` as the plan starts
    it (its keys that reach the driver in the file's order, then the copy of its
    ``cozmo_driver:`` section where that does not reach it), or ``default``."""
    applies, section = node_parameters_in_file(args.config, DRIVER_NODE, args.full_namespace)
    fqn = node_key(args.full_namespace, DRIVER_NODE)
    value = default
    for key, values in _parameter_sections(args.config):
        if _key_matches(key, fqn):
            value = values.get(name, value)
    return value if applies else section.get(name, value)


def _rviz_entry(args: BringupArgs) -> ProcessEntry:
    remappings: Tuple[Tuple[str, str], ...] = ()
    if args.full_namespace:
        # the configuration names the topics of a robot without namespace
        remappings = tuple((f"/{topic}", f"/{args.full_namespace}/{topic}")
                           for topic in ("robot_description", "odom", "camera/image_raw",
                                         "battery_marker"))
    config = rviz_config_path() if args.rviz else Path(RVIZ_CONFIG)
    return ProcessEntry(
        name="rviz", package="rviz2", executable="rviz2", enabled=args.rviz, condition="rviz",
        node_name="rviz2", namespace=args.namespace,
        arguments=("-d", str(config), "-f", rviz_fixed_frame(args)),
        remappings=remappings)


def rviz_fixed_frame(args: BringupArgs) -> str:
    """RViz's fixed frame: the driver's ``odom_frame`` as the config file gives it, with the
    plan's frame prefix (the frame the driver's odometry is in; the RViz configuration's own
    ``odom`` is only the default's)."""
    from .driver.parameters import PARAMETERS_BY_NAME, full_frame_id
    odom = driver_file_value(args, "odom_frame", PARAMETERS_BY_NAME["odom_frame"].default)
    if not isinstance(odom, str) or not odom.strip("/"):
        odom = PARAMETERS_BY_NAME["odom_frame"].default  # the driver refuses it, saying why
    return full_frame_id(args.frame_prefix, odom)


def make_plan(args: BringupArgs,
              description: Optional[Callable[[str], str]] = None,
              warn: Optional[Callable[[str], None]] = None) -> List[ProcessEntry]:
    """Every entry of the bring-up, in start order, with its condition evaluated.

    ``description(prefix)`` makes the robot description (default: xacro on
    cozmo_description with that link prefix). ``warn(text)`` gets each warning of
    :func:`ignored_with_sim` and :func:`check_driver_frames` (a front-end prints it)."""
    for warning in ignored_with_sim(args):
        if warn is not None:
            warn(warning)
    make_description = description or (lambda prefix: robot_description(prefix=prefix))
    try:
        urdf = make_description(args.frame_prefix)
    except DescriptionError as exc:
        raise PlanError(str(exc)) from exc
    for warning in check_driver_frames(args, urdf):
        if warn is not None:
            warn(warning)
    nodes = [_driver_entry(args), _description_entries(args, urdf), _face_entry(args),
             _behavior_entry(args)]
    return [_sim_entry(args), _stack_entry(args, nodes),
            *(_in_stack(entry) if args.one_process else entry for entry in nodes),
            _rviz_entry(args)]


def check_driver_frames(args: BringupArgs, urdf: str) -> List[str]:
    """Refuse driver frames (as the config file gives them, with the plan's frame prefix)
    that make a broken tf tree with the robot description ``urdf``: a ``base_frame`` the
    description gives a parent (the driver's odom -> base_frame on /tf and the description's
    parent -> base_frame would give it two parents), and an ``odom_frame`` that is a frame
    of the description (a loop when base_frame is above it; otherwise no odometry moves the
    description's frames, and a localization's map -> odom_frame would give one with a
    parent a second). A PlanError names the frames and what to give instead. Returns the
    warnings: a ``base_frame`` the description has not (its frames then hang in tf
    unconnected to odom_frame). Nothing to check when the driver publishes no tf
    (``publish_tf: false``)."""
    from .driver.parameters import PARAMETERS_BY_NAME, full_frame_id
    if driver_file_value(args, "publish_tf", PARAMETERS_BY_NAME["publish_tf"].default) is not True:
        return []
    base = driver_file_value(args, "base_frame", PARAMETERS_BY_NAME["base_frame"].default)
    odom = driver_file_value(args, "odom_frame", PARAMETERS_BY_NAME["odom_frame"].default)
    if not isinstance(base, str) or not isinstance(odom, str):
        return []  # the driver refuses it, saying why
    try:
        parents = parent_links(urdf)
    except DescriptionError as exc:
        raise PlanError(str(exc)) from exc
    prefix = args.frame_prefix
    frame, odom_frame = full_frame_id(prefix, base), full_frame_id(prefix, odom)

    def shown(name: str, value: str, tf_frame: str) -> str:
        return (f"{name} {value!r}" if tf_frame == value
                else f"{name} {value!r} (tf frame {tf_frame!r}, frame_prefix {prefix!r})")

    def up_from(link: str) -> List[str]:
        """``link`` and its ancestors in the description, up to its root (a cycle ends it)."""
        chain = [link]
        while chain[-1] in parents and len(chain) <= len(parents):
            chain.append(parents[chain[-1]])
        return chain

    if frame in parents:
        root = up_from(frame)[-1]
        given = root[len(prefix):] if prefix and root.startswith(prefix) else root
        raise PlanError(
            f"config:={args.config}: the driver's {shown('base_frame', base, frame)} is a frame of the "
            f"robot description, the child of {parents[frame]!r}: the driver's {odom_frame} -> {frame} on "
            f"/tf and the description's {parents[frame]} -> {frame} would give {frame} two parents in tf; "
            f"give the driver base_frame: {given} (the description's root, which the driver's "
            "odometry moves), or publish_tf: false")
    frames = set(parents) | set(parents.values())
    if odom_frame == frame:
        return []  # the driver refuses it, naming both
    if odom_frame not in frames:
        return _unconnected_base_frame(args, shown("base_frame", base, frame), frame, odom_frame, parents)
    chain = up_from(odom_frame)
    if frame in chain:
        what = (f"the driver's {odom_frame} -> {frame} on /tf and the description's "
                f"{' -> '.join(reversed(chain[:chain.index(frame) + 1]))} would make a loop in tf")
    else:
        what = (f"the driver's {odom_frame} -> {frame} on /tf would hang {frame} below the robot's own "
                f"{odom_frame}, and no odometry would move the description's frames")
        if odom_frame in parents:
            what += f" (and a localization's map -> {odom_frame} would give {odom_frame} two parents in tf)"
    where = f"the child of {parents[odom_frame]!r}" if odom_frame in parents else "its root"
    raise PlanError(
        f"config:={args.config}: the driver's {shown('odom_frame', odom, odom_frame)} is a frame of the "
        f"robot description ({where}): {what}; give the driver odom_frame: "
        f"{PARAMETERS_BY_NAME['odom_frame'].default} (a frame the description has not: the fixed frame "
        "the robot moves in), or publish_tf: false")


def _unconnected_base_frame(args: BringupArgs, shown: str, frame: str, odom_frame: str,
                            parents: Mapping[str, str]) -> List[str]:
    """The warning of a driver ``base_frame`` the description has not (a description without
    joints, whose frames cannot be told, gets none)."""
    roots = sorted(set(parents.values()) - set(parents))
    if frame in set(parents.values()) or not roots:
        return []  # the root (a frame with a parent is refused before)
    prefix = args.frame_prefix
    given = [root[len(prefix):] if prefix and root.startswith(prefix) else root for root in roots]
    return [
        f"config:={args.config}: the driver's {shown} is not a frame of the robot description "
        f"(its root: {', '.join(roots)}): the driver's {odom_frame} -> {frame} on /tf leaves the "
        f"description's frames unconnected to {odom_frame} (RViz shows no robot model in "
        f"{odom_frame}, and tf has no {odom_frame} -> {roots[0]}); give the driver base_frame: "
        f"{given[0]} (the description's root, which the driver's odometry moves), or join them "
        f"with a transform of yours ({frame} -> {roots[0]}, e.g. a static_transform_publisher)"]


def _stack_entry(args: BringupArgs, nodes: Sequence[ProcessEntry]) -> ProcessEntry:
    """The one process of ``one_process``: the enabled node entries as members, the
    description by its Python publisher (robot_state_publisher cannot join)."""
    members = tuple(entry.fallback if entry.fallback is not None else entry
                    for entry in nodes if entry.enabled)
    names = ", ".join(member.name for member in members)
    return ProcessEntry(
        name="stack", package=PACKAGE, executable="cozmo_stack", enabled=args.one_process,
        condition="one_process", namespace=args.namespace, required=True, members=members,
        note=f"{names} in one process")


def _in_stack(entry: ProcessEntry) -> ProcessEntry:
    """A node entry whose node runs in the stack: not started on its own."""
    return replace(entry, enabled=False, condition=f"{entry.condition} and not one_process")


# ---------------------------------------------------------------------------- executables

def ament_executable(package: str, executable: str) -> Optional[Path]:
    """``<prefix>/lib/<package>/<executable>`` of a package in the ament index, if there."""
    if not os.environ.get("AMENT_PREFIX_PATH"):
        return None
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError:
        return None
    try:
        prefix = Path(get_package_prefix(package))
    except (PackageNotFoundError, ValueError, LookupError):
        return None
    path = prefix / "lib" / package / executable
    return path if path.is_file() and os.access(path, os.X_OK) else None


def locate_executable(package: str, executable: str,
                      search: Sequence[Path] = ()) -> Optional[Path]:
    """Where an entry's executable is: the ament index (``lib/<package>/``), the
    directories in ``search``, the directory of this Python (a venv's ``bin``), PATH."""
    found = ament_executable(package, executable)
    if found is not None:
        return found
    for directory in (*search, Path(sys.executable).parent):
        path = Path(directory) / executable
        if path.is_file() and os.access(path, os.X_OK):
            return path
    which = shutil.which(executable)
    return Path(which) if which else None


def skip_message(entry: ProcessEntry) -> str:
    """What a front-end prints for an enabled entry that is not installed."""
    if entry.package == PACKAGE:
        return f"{entry.executable} is not installed yet: skipped"
    distro = os.environ.get("ROS_DISTRO") or "<distro>"
    return (f"{entry.executable} is not installed (package {entry.package}; with ROS 2 from "
            f"apt: sudo apt install ros-{distro}-{entry.package.replace('_', '-')}): skipped")
