"""The console scripts of the ROS nodes (setup.py): each imports its node's module and
runs its ``main()``, quietly on an early Ctrl-C.

A node installs its own SIGINT and SIGTERM handling (``_entry.init``) once its modules are
imported, which takes a few tenths of a second (rclpy, the message packages). A SIGINT in
that time, which ``ros2 launch`` sends to every process when one of them exits or the user
presses Ctrl-C right after the start, raised KeyboardInterrupt inside some import and
printed its traceback. Nothing has been started then: the process ends with status 0, as
it does on a signal once the node runs.

This module imports nothing but the standard library (it is what the console script
imports first).
"""

from __future__ import annotations

import importlib
from typing import Callable, Optional, Sequence

__all__ = ["driver_node", "face_node", "behavior_node", "description_publisher", "stack"]


def _quiet_start(module: str) -> Callable[[Optional[Sequence[str]]], int]:
    def entry(args: Optional[Sequence[str]] = None) -> int:
        try:
            main = importlib.import_module(module).main
        except KeyboardInterrupt:
            return 0  # Ctrl-C while starting: nothing to stop yet
        try:
            return main(args)
        except KeyboardInterrupt:
            return 0  # before the node's own signal handling was in place
    entry.__name__ = entry.__qualname__ = module.rsplit(".", 1)[-1]
    entry.__doc__ = f"The console script of {module}: its main(), quiet on an early Ctrl-C."
    return entry


driver_node = _quiet_start("cozmo_driver.ros.driver_node")
face_node = _quiet_start("cozmo_driver.ros.face_node")
behavior_node = _quiet_start("cozmo_driver.ros.behavior_node")
description_publisher = _quiet_start("cozmo_driver.ros.description_publisher")
stack = _quiet_start("cozmo_driver.ros.stack_node")
