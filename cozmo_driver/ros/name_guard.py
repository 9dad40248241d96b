"""A node refuses to run beside another node of the same fully qualified name.

Two nodes called ``/cozmo_driver`` in one ROS domain (two stacks started on one machine,
or on one network with the default discovery range) answer each other's services and
parameter calls, mix their topics, and command whatever robot each holds from the other's
commands; nothing in ROS 2 stops it. :class:`NameGuard` looks at the ROS graph a few times
in the first seconds of a node's life (discovery takes a moment) and, if the node's name
is there twice, calls ``on_duplicate`` with a message that says what is already running
and how to separate the two. The node that was there first has stopped looking by then:
the newcomer is the one refused.
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Sequence

from .steady import steady_timer

__all__ = ["NameGuard", "CHECKS_S", "DUPLICATE_MARK", "duplicate_message"]

#: when the graph is looked at, seconds after the guard starts
CHECKS_S: Sequence[float] = (0.5, 1.5, 3.0)


def _fqn(name: str, namespace: str) -> str:
    return namespace.rstrip("/") + "/" + name


#: the words of every :func:`duplicate_message` (what a program that quotes a node's
#: refusal can look for)
DUPLICATE_MARK = "already run(s) in ROS domain"


def duplicate_message(fqn: str, count: int) -> str:
    domain = os.environ.get("ROS_DOMAIN_ID", "0") or "0"
    others = "another node" if count == 2 else f"{count - 1} other nodes"
    return (f"{others} named {fqn} {DUPLICATE_MARK} {domain}: two stacks would answer "
            "each other's commands. Stop the other one, or separate the two: a namespace each "
            "(ros2 launch ... namespace:=robot2, or --ros-args -r __ns:=/robot2), or a ROS_DOMAIN_ID "
            "each (export ROS_DOMAIN_ID=<0..101> before starting), and "
            "ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (on Humble ROS_LOCALHOST_ONLY=1) to keep a stack "
            "on its machine")


class NameGuard:
    """Watches ``node``'s name in the graph at :data:`CHECKS_S`; see the module docstring."""

    def __init__(self, node: Any, on_duplicate: Callable[[str], None],
                 checks_s: Sequence[float] = CHECKS_S) -> None:
        self.node = node
        self.on_duplicate = on_duplicate
        self.fqn = _fqn(node.get_name(), node.get_namespace())
        self.found = False
        self._timers: List[Any] = []
        for delay in checks_s:
            self._timers.append(steady_timer(node, delay, self._make_check(len(self._timers))))

    def _make_check(self, index: int) -> Callable[[], None]:
        def check() -> None:
            timer = self._timers[index]
            timer.cancel()
            if self.found:
                return
            count = self.count()
            if count > 1:
                self.found = True
                self.cancel()
                self.on_duplicate(duplicate_message(self.fqn, count))
        return check

    def count(self) -> int:
        """How many nodes of the graph have this node's fully qualified name (itself included)."""
        return sum(1 for name, namespace in self.node.get_node_names_and_namespaces()
                   if _fqn(name, namespace) == self.fqn)

    def cancel(self) -> None:
        """Stop looking (and free the timers)."""
        timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()
            self.node.destroy_timer(timer)
