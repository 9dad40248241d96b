"""The ``ros2`` command lines that README.md and docs/*.md give as examples (in code blocks and
in inline code) are ones the ``ros2`` command takes, without running them:

* ``ros2 topic pub``, ``ros2 service call``, ``ros2 action send_goal``: the options exist, the
  type is ``pkg/msg|srv|action/Name`` of the verb's kind, and its YAML fills the message (the
  topic's message, the request, the goal) as the ``ros2`` command fills it
  (rosidl_runtime_py's ``set_message_fields``: a field the message lacks, a text where a number
  goes, a value outside the field's range are refused), and a bool only from a YAML bool (the
  command takes ``'false'`` as true); for a topic, service or action that one of the nodes takes
  (the reference tables, test/docs_tables.py) the type is the one its table gives;
* ``ros2 param set``: the node's parameter table has the parameter, and the value is of its
  type as ``ros2 param set`` reads it (``0`` is an integer, which a double parameter takes as
  0.0; ``fast``, a string, it refuses);
* ``ros2 lifecycle set``: a transition of a lifecycle node.

The message classes check each value as it is set (test/conftest.py sets
ROS_PYTHON_CHECK_FIELDS=1, which the command's own run leaves to the middleware's conversion).
An example whose values are left out (``...``), or a command named in prose without arguments
(``ros2 param set`` refuses ...), is not checked. The messages are the Python classes of the
installed interfaces (no DDS); the fields of one of a package the project does not depend on
(package.xml; nav2_msgs) are not checked where it is not installed, its YAML is. What the commands do against
the running nodes is test/e2e/test_ros2_cli.py's."""

from __future__ import annotations

import array
import importlib
import importlib.util
import re
import shlex
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import yaml

from dependencies import require
from docs_tables import reference_tables

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: the options of each command that take a value, and those that take none (Jazzy's, as Humble's)
OPTIONS = {
    ("topic", "pub"): ({"-r", "--rate", "-p", "--print", "-t", "--times", "-w",
                        "--wait-matching-subscriptions", "--max-wait-time-secs", "--keep-alive",
                        "-n", "--node-name", "--qos-profile", "--qos-depth", "--qos-history",
                        "--qos-reliability", "--qos-durability", "--qos-liveliness",
                        "--qos-liveliness-lease-duration-seconds", "--spin-time"},
                       {"-1", "--once", "--stdin", "-s", "--use-sim-time"}),
    ("service", "call"): ({"-r", "--rate"}, set()),
    ("action", "send_goal"): (set(), {"-f", "--feedback"}),
    ("param", "set"): ({"--spin-time"}, {"-s", "--use-sim-time", "--include-hidden-nodes", "--no-daemon"}),
    ("lifecycle", "set"): ({"--spin-time"}, {"-s", "--use-sim-time", "--include-hidden-nodes", "--no-daemon"}),
}
#: the kind of interface each command takes, and the reference table kind of the names it serves
INTERFACE = {("topic", "pub"): ("msg", "subscribed"), ("service", "call"): ("srv", "services"),
             ("action", "send_goal"): ("action", "actions")}
TRANSITIONS = {"configure", "cleanup", "activate", "deactivate", "shutdown"}
LIFECYCLE_NODES = {"cozmo_driver"}
SHELL_ENDS = {"&", "&&", "|", "||", ";"}
PARAMETER_TYPES = {"bool": (bool,), "int": (int,), "double": (float, int), "string": (str,)}


# ----------------------------------------------------------------------------- extraction


def example_commands(text: str) -> Iterator[Tuple[int, str]]:
    """(line, command) of each ``ros2 ...`` line of ``text``'s code blocks (backslash
    continuations joined) and of each inline code span that starts with ``ros2 `` (its line
    breaks taken for spaces)."""
    lines = text.split("\n")
    fenced = False
    held: List[str] = []
    start = 0
    outside: List[str] = []
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            outside.append("")
            continue
        if not fenced:
            outside.append(line)
            continue
        outside.append("")
        if not held:
            start = number
        held.append(line.rstrip()[:-1] if line.rstrip().endswith("\\") else line)
        if line.rstrip().endswith("\\"):
            continue
        command = " ".join(part.strip() for part in held)
        held = []
        if command.startswith("$ "):
            command = command[2:]
        if command.startswith("ros2 "):
            yield start, command
    prose = "\n".join(outside)
    for match in re.finditer(r"`(ros2 [^`]+)`", prose):
        yield prose.count("\n", 0, match.start()) + 1, " ".join(match.group(1).split())


def _split(command: str) -> Tuple[Tuple[str, str], List[str], Dict[str, Optional[str]]]:
    """((group, verb), positional arguments, options) of a ``ros2 group verb ...`` command;
    ValueError for what the shell or the command would not take."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError as exc:
        raise ValueError(f"the shell cannot split it: {exc}") from None
    for i, word in enumerate(words):
        if word in SHELL_ENDS:
            words = words[:i]
            break
    key = (words[1], words[2]) if len(words) > 2 else ("", "")
    with_value, flags = OPTIONS[key]
    positional: List[str] = []
    options: Dict[str, Optional[str]] = {}
    rest = iter(words[3:])
    for word in rest:
        if word in with_value:
            options[word] = next(rest, None)
            if options[word] is None:
                raise ValueError(f"{word} needs a value")
        elif word in flags:
            options[word] = None
        elif word.startswith("-") and not re.match(r"^-\d", word):
            raise ValueError(f"ros2 {key[0]} {key[1]} has no option {word}")
        else:
            positional.append(word)
    return key, positional, options


# ----------------------------------------------------------------------------- checks


def _message_class(pkg: str, kind: str, name: str) -> Any:
    module = importlib.import_module(f"{pkg}.{kind}")
    interface = getattr(module, name)
    return {"msg": interface, "srv": getattr(interface, "Request", None),
            "action": getattr(interface, "Goal", None)}[kind]


def _element_class(type_text: str) -> Optional[Any]:
    """The message class of a sequence's or an array's elements, None for plain values."""
    match = re.search(r"([a-z][a-z0-9_]*)/([A-Z]\w*)", type_text)
    nested = type_text.startswith("sequence<") or type_text.endswith("]")
    return _message_class(match.group(1), "msg", match.group(2)) if match and nested else None


def fill(message: Any, values: Any, path: str = "") -> None:
    """Set ``values`` (a mapping) into ``message`` as rosidl_runtime_py's
    ``set_message_fields`` does for the ros2 command; raise ValueError naming the field."""
    if not isinstance(values, dict):
        raise ValueError(f"{path.rstrip('.') or 'the message'}: {values!r} is not a mapping of fields")
    fields = message.get_fields_and_field_types()
    for name, value in values.items():
        where = f"{path}{name}"
        if name not in fields:
            raise ValueError(f"{where}: {type(message).__name__} has no such field "
                             f"(it has: {', '.join(fields)})")
        current = getattr(message, name)
        kind = type(current)
        element = _element_class(fields[name])
        if hasattr(current, "get_fields_and_field_types") and type(value) is not kind:
            new = kind()
            fill(new, value, f"{where}.")
        elif element is not None:
            if not isinstance(value, list):
                raise ValueError(f"{where} ({fields[name]}): {value!r} is not a list")
            new = []
            for i, item in enumerate(value):
                new.append(element())
                fill(new[-1], item, f"{where}[{i}].")
        elif kind is bool and not isinstance(value, bool):
            raise ValueError(f"{where} (boolean): {value!r} is not a YAML bool (true, false); "
                             "the command takes any text as true")
        elif kind is array.array:
            new = _converted(where, fields[name], value, lambda v: array.array(current.typecode, v))
        elif kind.__module__ == "numpy":
            import numpy
            new = _converted(where, fields[name], value, lambda v: numpy.array(v, dtype=current.dtype))
        else:
            new = value if type(value) is kind else _converted(where, fields[name], value, kind)
        _converted(where, fields[name], value, lambda _: setattr(message, name, new))


def _converted(where: str, type_text: str, value: Any, convert: Any) -> Any:
    try:
        return convert(value)
    except (TypeError, ValueError, AssertionError, OverflowError) as exc:
        raise ValueError(f"{where} ({type_text}) cannot take {value!r}: {exc}") from None


def _interface_packages() -> Set[str]:
    """The interface packages the project depends on (package.xml), which must be installed."""
    text = (ROOT / "package.xml").read_text()
    return {name for name in re.findall(r"<(?:exec_)?depend>([a-z0-9_]+)</", text)
            if name.endswith(("_msgs", "_srvs", "_interfaces"))}


def problems(command: str, tables: Dict[Tuple[str, str], list]) -> Optional[List[str]]:
    """What the ``ros2`` command ``command`` would refuse or do otherwise than meant; None
    when it is not one of the commands checked here, or its values are left out."""
    words = command.split()
    if len(words) < 3 or (words[1], words[2]) not in OPTIONS:
        return None
    try:
        key, positional, _options = _split(command)
    except ValueError as exc:
        return [str(exc)]
    if not positional or any("..." in word for word in positional):
        return None  # the command named in prose, or an example with its values left out
    if key in INTERFACE:
        return _interface_problems(key, positional, tables)
    if key == ("param", "set"):
        return _parameter_problems(positional, tables)
    if len(positional) != 2:
        return [f"ros2 lifecycle set takes a node and a transition, not {positional}"]
    node, transition = positional
    found = []
    if node.rsplit("/", 1)[-1] not in LIFECYCLE_NODES:
        found.append(f"{node} is no lifecycle node")
    if transition not in TRANSITIONS:
        found.append(f"{transition!r} is no transition (known: {', '.join(sorted(TRANSITIONS))})")
    return found


def _interface_problems(key: Tuple[str, str], positional: List[str],
                        tables: Dict[Tuple[str, str], list]) -> List[str]:
    kind, table_kind = INTERFACE[key]
    if len(positional) not in (2, 3):
        return [f"takes a name, a type and the values, not {positional}"]
    name, type_text = positional[:2]
    parts = type_text.split("/")
    if len(parts) != 3 or parts[1] != kind:
        return [f"{type_text}: not a {kind} type (pkg/{kind}/Name)"]
    pkg, _, type_name = parts
    found = []
    served = {row.name: row.type for (_, k), rows in tables.items() if k == table_kind for row in rows}
    if name.lstrip("/") in served:
        if served[name.lstrip("/")] != f"{pkg}/{type_name}":
            found.append(f"{name} is {served[name.lstrip('/')]} (its reference table), not {type_text}")
    elif pkg == "cozmo_interfaces":
        found.append(f"no reference table names {name} among the {table_kind}")
    try:
        values = yaml.safe_load(positional[2]) if len(positional) == 3 else {}
    except yaml.YAMLError as exc:
        return found + [f"the values are not YAML: {' '.join(str(exc).split())}"]
    if pkg not in _interface_packages() and importlib.util.find_spec(pkg) is None:
        return found  # a package the project does not depend on (nav2_msgs), not installed here
    try:
        message = _message_class(pkg, kind, type_name)()
    except (ImportError, AttributeError) as exc:
        return found + [f"{type_text}: no such interface ({exc})"]
    try:
        fill(message, values)
    except ValueError as exc:
        found.append(str(exc))
    return found


def _parameter_problems(positional: List[str], tables: Dict[Tuple[str, str], list]) -> List[str]:
    if len(positional) != 3:
        return [f"ros2 param set takes a node, a name and a value, not {positional}"]
    node, name, text = positional
    rows = {row.name: row for row in tables.get((node.rsplit("/", 1)[-1], "parameters"), [])}
    if not rows:
        return [f"no parameter table of {node}"]
    if name not in rows:
        return [f"{node} has no parameter {name}"]
    value = yaml.safe_load(text)
    wanted = PARAMETER_TYPES.get(rows[name].type)
    if wanted is None:
        return []  # arrays: not given on a command line in the docs
    if isinstance(value, bool) and bool not in wanted or not isinstance(value, wanted):
        return [f"{name} is a {rows[name].type} parameter: ros2 param set reads {text!r} as "
                f"{type(value).__name__} and refuses it"]
    return []


def _checked_examples() -> Tuple[int, Dict[str, List[str]]]:
    tables = reference_tables()
    checked = 0
    found: Dict[str, List[str]] = {}
    for page in PAGES:
        for number, command in example_commands(page.read_text()):
            result = problems(command, tables)
            if result is None:
                continue
            checked += 1
            if result:
                found[f"{page.name}:{number}: {command}"] = result
    return checked, found


# ----------------------------------------------------------------------------- tests


def test_every_ros2_example_of_the_docs_is_one_the_command_takes():
    require("cozmo_interfaces.msg", "the interfaces the examples fill")
    checked, found = _checked_examples()
    assert found == {}
    # the pub, call and send_goal examples of behavior.md, motion.md, media.md, README, real-robot.md
    # and driver.md, the param set and lifecycle set ones: more than a dozen
    assert checked >= 15


def test_the_example_check_finds_what_the_command_would_refuse():
    require("cozmo_interfaces.msg", "the interfaces the examples fill")
    tables = reference_tables()

    def check(command: str) -> Optional[List[str]]:
        return problems(command, tables)

    assert check('ros2 action send_goal /drive_straight cozmo_interfaces/action/DriveStraight '
                 '"{distance: -0.05}"') == []
    assert check('ros2 action send_goal /drive_straight cozmo_interfaces/action/DriveStraight '
                 '"{distance: -0.05, speed: 0.1, accel: 0}"') == []
    assert check("ros2 topic pub -r 10 /cmd_vel ...") is None
    assert check("ros2 topic echo /odom") is None
    # YAML that does not parse, a field the goal lacks, a text for a number, a mapping for a number
    assert "not YAML" in check('ros2 action send_goal /turn_in_place cozmo_interfaces/action/TurnInPlace '
                               '"{angle: [1.5}"')[0]
    assert "has no such field" in check('ros2 action send_goal /turn_in_place '
                                        'cozmo_interfaces/action/TurnInPlace "{angel: 1.5}"')[0]
    assert "angle" in check('ros2 action send_goal /turn_in_place cozmo_interfaces/action/TurnInPlace '
                            '"{angle: ninety}"')[0]
    assert "has no such field" in check(
        'ros2 action send_goal /go_to_pose cozmo_interfaces/action/GoToPose '
        '"{pose: {header: {frame_id: odom}, pose: {position: {x: 0.2, yaw: 1}}}}"')[0]
    assert "segments[1].heading" in check(
        'ros2 action send_goal /follow_path cozmo_interfaces/action/FollowPath '
        '"{segments: [{type: 0, end_x: 0.1}, {type: 2, heading: {z: 1}}]}"')[0]
    # the YAML of an interface that is not installed here (Nav2's) is still parsed
    assert "not YAML" in check('ros2 action send_goal /navigate_to_pose nav2_msgs/action/NavigateToPose '
                               '"{pose: {header: {frame_id: odom}}"')[0]
    # a value outside the field's range, a text for a bool, a message that is no mapping
    assert "type" in check('ros2 action send_goal /follow_path cozmo_interfaces/action/FollowPath '
                           '"{segments: [{type: 300}]}"')[0]
    assert "YAML bool" in check('ros2 service call /emergency_stop cozmo_interfaces/srv/SetEmergencyStop '
                                '"{engage: \'false\'}"')[0]
    assert "not a mapping" in check('ros2 topic pub --once /head_light std_msgs/msg/Bool "true"')[0]
    # the type's kind, and the type the node takes
    assert "not a srv type" in check('ros2 service call /emergency_stop cozmo_interfaces/SetEmergencyStop '
                                     '"{engage: true}"')[0]
    assert "std_msgs/Bool (its reference table)" in check(
        'ros2 topic pub --once /head_light std_msgs/msg/Float32 "{data: 1.0}"')[0]
    assert "no reference table" in check('ros2 service call /emergency_stopp '
                                         'cozmo_interfaces/srv/SetEmergencyStop "{engage: true}"')[0]
    # options, parameters and transitions
    assert "no option" in check('ros2 topic pub --one /head_light std_msgs/msg/Bool "{data: true}"')[0]
    assert check("ros2 param set /cozmo_driver cmd_vel_timeout 0.0") == []
    assert check("ros2 param set /cozmo_driver cmd_vel_timeout 0") == []  # taken as 0.0
    assert "reads 'fast' as str" in check("ros2 param set /cozmo_driver cmd_vel_timeout fast")[0]
    assert check("ros2 param set /cozmo_behavior enabled false") == []
    assert "reads '1' as int" in check("ros2 param set /cozmo_behavior enabled 1")[0]
    assert "no parameter" in check("ros2 param set /robot1/cozmo_driver camera_auto_exposur true")[0]
    assert check("ros2 lifecycle set /cozmo_driver activate") == []
    assert "no transition" in check("ros2 lifecycle set /cozmo_driver active")[0]


def test_examples_are_found_in_code_blocks_and_inline_code():
    text = ("run\n```bash\nros2 action send_goal /a pkg/action/A \\\n  \"{x: 1}\"   # a goal\n"
            "echo ros2 topic pub\n```\nor `ros2 service call /b\npkg/srv/B \"{y: 2}\"` and `ros2`.\n")
    assert list(example_commands(text)) == [
        (3, 'ros2 action send_goal /a pkg/action/A "{x: 1}"   # a goal'),
        (7, 'ros2 service call /b pkg/srv/B "{y: 2}"')]
