"""Items handed from the robot client's I/O thread to the rclpy executor.

:class:`HandOver` is a thread-safe deque and a guard condition
(``Node.create_guard_condition``, present since Dashing): :meth:`HandOver.put`
appends on any thread and triggers the guard; the guard's callback, on the
executor, passes every waiting item in order to ``handle``. Nothing polls. The
driver node, its motion actions, its media interfaces and its object interfaces
each use one for what the I/O thread does not publish itself.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Deque, Iterable

from ._compat import InvalidHandle

__all__ = ["HandOver"]


class HandOver:
    """See the module docstring. Made on the executor's side (it creates an entity of
    ``node``); :meth:`destroy` releases the guard condition, after which items are kept but
    nothing is handed over any more (also an item put on another thread as it is destroyed:
    dropped quietly)."""

    def __init__(self, node: Any, handle: Callable[[Any], None]) -> None:
        self._node = node
        self._handle = handle
        self._items: Deque[Any] = deque()
        self._guard = node.create_guard_condition(self.drain)

    def put(self, item: Any) -> None:
        """Any thread: hand ``item`` over."""
        self._items.append(item)
        self._trigger()

    def extend(self, items: Iterable[Any]) -> None:
        """Any thread: hand ``items`` over, in order."""
        self._items.extend(items)
        self._trigger()

    def _trigger(self) -> None:
        guard = self._guard
        if guard is not None:
            try:
                guard.trigger()
            except (InvalidHandle, RuntimeError):  # destroyed meanwhile: nothing to hand it to
                pass

    def drain(self) -> None:
        """On the executor (the guard's callback, or a direct call): handle every item."""
        items = self._items
        while items:
            try:
                item = items.popleft()
            except IndexError:  # taken by a concurrent drain
                return
            self._handle(item)

    def destroy(self) -> None:
        guard, self._guard = self._guard, None
        if guard is not None:
            self._node.destroy_guard_condition(guard)
