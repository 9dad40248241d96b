"""No rclpy API newer than Humble's without a fallback (the brief's targets: Humble to
Lyrical from apt; CI runs Jazzy only).

The names below are the rclpy modules and the public methods of rclpy's classes that
Jazzy's rclpy has and Humble's has not, read off the two branches of ros2/rclpy
(``humble`` and ``jazzy``: modules that exist in one only; methods of Node, Publisher,
Subscription, Client, Service, Executor, Context, the lifecycle and action classes that
one defines and the other does not; ``rclpy.experimental`` came with Jazzy's events
executor). The check reads the AST of the package and the launch files: an import of
such a module must sit in a ``try`` whose handlers take ImportError, and a use of such a
method in a ``try`` (of any handler: an rclpy without it raises AttributeError), or be
reached through ``getattr``/``hasattr``, which this check does not flag. Names that are
also ours (``callback``, ``service_name``) are left out: they would flag our own code.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List, Tuple

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


def sources() -> List[Path]:
    files = sorted((ROOT / "cozmo_driver").rglob("*.py")) + sorted((ROOT / "launch").glob("*.py"))
    assert len(files) > 50
    return files


def test_the_check_flags_what_it_should_and_passes_a_fallback():
    assert unguarded("from rclpy.event_handler import PublisherEventCallbacks\n")
    assert unguarded("import rclpy.type_hash\n")
    assert unguarded("def f(node):\n    return node.count_services('x')\n")
    assert not unguarded("try:\n    from rclpy.event_handler import X\nexcept ImportError:\n    X = None\n")
    assert unguarded("try:\n    from rclpy.event_handler import X\nexcept KeyError:\n    X = None\n")
    assert not unguarded("try:\n    n = node.count_services('x')\nexcept AttributeError:\n    n = None\n")
    assert not unguarded("f = getattr(node, 'count_services', None)\n")
    assert not unguarded("from rclpy.qos import QoSProfile\nnode.count_publishers('x')\n")


def test_the_package_uses_nothing_newer_than_humble_without_a_fallback():
    found = []
    for path in sources():
        found += unguarded(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []
