"""No rclpy API newer than Humble's without a fallback (the brief's targets: Humble to
Lyrical from apt; CI runs Jazzy only).

The names below are the rclpy modules and the public methods of rclpy's classes that
Jazzy's rclpy has and Humble's has not, read off the two branches of ros2/rclpy
(``humble`` and ``jazzy``: modules that exist in one only; methods of Node, Publisher,
Subscription, Client, Service, Executor, Context, the lifecycle and action classes that
one defines and the other does not; ``rclpy.experimental`` came with Jazzy's events
executor). The check reads the AST of the package, the launch files, the tests, the benches
and tools/ (./dev runs the tests and benches against a sourced Humble): an import of
such a module must sit in a ``try`` whose handlers take ImportError, and a use of such a
method in a ``try`` (of any handler: an rclpy without it raises AttributeError), or be
reached through ``getattr``/``hasattr``, which this check does not flag. Names that are
also ours (``callback``, ``service_name``) are left out: they would flag our own code.

The ``ros2`` command is not rclpy: the tests give ``ros2 topic echo`` its ``--timeout``
(Iron and later) only where its help lists it, checked here with both helps.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List, Tuple

from ros_tools import echo_timeout_options

ROOT = Path(__file__).resolve().parents[2]

NEW_MODULES = frozenset({
    "rclpy.clock_type", "rclpy.destroyable", "rclpy.event_handler", "rclpy.experimental",
    "rclpy.logging_service", "rclpy.parameter_client", "rclpy.parameter_event_handler",
    "rclpy.service_introspection", "rclpy.type_description_service", "rclpy.type_hash",
})
NEW_METHODS = frozenset({
    "add_post_set_parameters_callback", "add_pre_set_parameters_callback", "configure_introspection",
    "count_clients", "count_services", "get_fully_qualified_node_names", "get_publisher_count",
    "list_parameters", "remove_post_set_parameters_callback", "remove_pre_set_parameters_callback",
    "wait_for_node",
})


def _takes_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type
    if kinds is None:
        return True
    names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError", "Exception")
               for n in names)


def _walk(node: ast.AST, guarded_import: bool, guarded_use: bool) -> Iterator[Tuple[ast.AST, bool, bool]]:
    yield node, guarded_import, guarded_use
    if isinstance(node, ast.Try):
        body_import = guarded_import or any(_takes_import_error(h) for h in node.handlers)
        body_use = guarded_use or bool(node.handlers)
        for child in node.body:
            yield from _walk(child, body_import, body_use)
        for child in node.handlers + node.orelse + node.finalbody:
            yield from _walk(child, guarded_import, guarded_use)
        return
    for child in ast.iter_child_nodes(node):
        yield from _walk(child, guarded_import, guarded_use)


def unguarded(source: str, name: str = "<source>") -> List[str]:
    """Where ``source`` imports a NEW_MODULE or uses a NEW_METHOD without a fallback."""
    found = []
    for node, guarded_import, guarded_use in _walk(ast.parse(source, name), False, False):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        new = [m for m in modules if any(m == n or m.startswith(n + ".") for n in NEW_MODULES)]
        if new and not guarded_import:
            found.append(f"{name}:{node.lineno}: imports {new[0]} (not in Humble's rclpy) "
                         "outside a try that takes ImportError")
        if isinstance(node, ast.Attribute) and node.attr in NEW_METHODS and not guarded_use:
            found.append(f"{name}:{node.lineno}: .{node.attr} (not in Humble's rclpy) outside a try")
    return found


#: what ``ros2 topic echo --help`` prints first, shortened: with Humble's options (ros2topic
#: 0.18: no --timeout) and with Jazzy's
ECHO_USAGE_HUMBLE = """usage: ros2 topic echo [-h] [--spin-time SPIN_TIME] [--no-daemon]
                       [--qos-profile PROFILE] [--qos-depth N] [--qos-history HISTORY]
                       [--qos-reliability RELIABILITY] [--qos-durability DURABILITY]
                       [--csv] [--field FIELD] [--full-length]
                       [--truncate-length TRUNCATE_LENGTH] [--no-arr] [--no-str]
                       [--flow-style] [--lost-messages] [--no-lost-messages] [--raw]
                       [--filter FILTER_EXPR] [--once]
                       topic_name [message_type]
"""
ECHO_USAGE_JAZZY = """usage: ros2 topic echo [-h] [--spin-time SPIN_TIME] [-s] [--no-daemon]
                       [--csv] [--field FIELD] [--full-length] [--no-arr] [--no-str]
                       [--flow-style] [--no-lost-messages] [--raw]
                       [--filter FILTER_EXPR] [--once] [--timeout N]
                       [--include-message-info]
                       topic_name [message_type]
"""


def sources() -> List[Path]:
    files = sorted((ROOT / "cozmo_driver").rglob("*.py")) + sorted((ROOT / "launch").glob("*.py"))
    assert len(files) > 50
    others = [path for folder in ("test", "bench", "tools") for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(others) > 100
    return files + others


def test_the_check_flags_what_it_should_and_passes_a_fallback():
    assert unguarded("from rclpy.event_handler import PublisherEventCallbacks\n")
    assert unguarded("import rclpy.type_hash\n")
    assert unguarded("def f(node):\n    return node.count_services('x')\n")
    assert not unguarded("try:\n    from rclpy.event_handler import X\nexcept ImportError:\n    X = None\n")
    assert unguarded("try:\n    from rclpy.event_handler import X\nexcept KeyError:\n    X = None\n")
    assert not unguarded("try:\n    n = node.count_services('x')\nexcept AttributeError:\n    n = None\n")
    assert not unguarded("f = getattr(node, 'count_services', None)\n")
    assert not unguarded("from rclpy.qos import QoSProfile\nnode.count_publishers('x')\n")


def test_echo_gets_timeout_only_where_its_help_lists_it():
    assert echo_timeout_options(ECHO_USAGE_JAZZY, 15) == ["--timeout", "15"]
    assert echo_timeout_options(ECHO_USAGE_JAZZY, 2.5) == ["--timeout", "2.5"]
    assert echo_timeout_options(ECHO_USAGE_HUMBLE, 15) == []
    assert echo_timeout_options("[--timeout-ms N] [--no-timeout] (a timeout)", 15) == []


def test_nothing_newer_than_humble_is_used_without_a_fallback():
    found = []
    for path in sources():
        found += unguarded(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []
