"""``--help`` and ``-h`` for the ROS 2 node executables, answered before anything starts.

A node's ``main`` calls :func:`answer_help` first: if the program's own arguments (those
before ``--ros-args``) ask for help, it prints the usage, the ROS arguments every node
takes and the node's parameters (type, default, unit, range and description, from the
same table the node declares them from) and returns True; the node then exits 0 without
initialising rclpy, opening a socket or reaching for a robot.
"""

from __future__ import annotations

import sys
import textwrap
from typing import Iterable, List, Optional, Sequence, TextIO

__all__ = ["HELP_FLAGS", "wants_help", "help_text", "answer_help"]

HELP_FLAGS = ("-h", "--help")

_ROS_ARGUMENTS = """\
ROS arguments (after --ros-args):
  -r __ns:=/NAMESPACE        run in a namespace (several robots: one namespace each)
  -r __node:=NAME            rename the node
  -r FROM:=TO                remap a topic, service or action name
  -p NAME:=VALUE             set a parameter (below)
  --params-file FILE         parameters from a YAML file (e.g. config/cozmo.yaml)
  --log-level LEVEL          debug, info, warn, error or fatal
Environment: ROS_DOMAIN_ID separates ROS graphs on one network;
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (on Humble
ROS_LOCALHOST_ONLY=1) keeps the graph on this machine."""


def wants_help(args: Optional[Sequence[str]] = None) -> bool:
    """Whether the program's own arguments (before ``--ros-args``) hold -h or --help."""
    argv = list(sys.argv[1:] if args is None else args)
    if "--ros-args" in argv:
        argv = argv[:argv.index("--ros-args")]
    return any(a in HELP_FLAGS for a in argv)


def _default(value) -> str:
    if isinstance(value, str):
        return repr(value) if value else "''"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def help_text(prog: str, summary: str, parameters: Iterable, width: int = 79) -> str:
    """The help of node executable ``prog``: ``summary`` is a sentence or the node module's
    docstring (its first paragraph is used); parameters are ParamSpec-like objects (name,
    default, description, unit, minimum, maximum, type_name, dynamic)."""
    out: List[str] = [f"usage: {prog} [-h] [--ros-args ...]", ""]
    # a module docstring will do: its first paragraph, without the leading ``prog``:
    first = summary.strip().split("\n\n", 1)[0].replace("``", "")
    if first.startswith(prog + ":"):
        first = first[len(prog) + 1:]
    first = " ".join(first.split())
    out += textwrap.wrap(first[:1].upper() + first[1:], width, break_on_hyphens=False)
    out += ["", _ROS_ARGUMENTS, "", "Parameters (name: type, default [unit], range):"]
    for spec in parameters:
        unit = f" {spec.unit}" if getattr(spec, "unit", "") else ""
        line = f"  {spec.name}: {spec.type_name}, default {_default(spec.default)}{unit}"
        lo, hi = getattr(spec, "minimum", None), getattr(spec, "maximum", None)
        if lo is not None or hi is not None:
            line += f", {_default(lo) if lo is not None else '-inf'} .. {_default(hi) if hi is not None else 'inf'}"
        if getattr(spec, "dynamic", False):
            line += ", may change while running"
        out.append(line)
        out += textwrap.wrap(" ".join(str(spec.description).split()), width,
                             initial_indent="      ", subsequent_indent="      ",
                             break_on_hyphens=False)
    return "\n".join(out) + "\n"


def answer_help(prog: str, summary: str, parameters: Iterable,
                args: Optional[Sequence[str]] = None, stream: Optional[TextIO] = None) -> bool:
    """Print :func:`help_text` and return True if the arguments ask for help."""
    if not wants_help(args):
        return False
    (stream or sys.stdout).write(help_text(prog, summary, parameters))
    return True
