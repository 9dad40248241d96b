"""The console scripts of the ROS nodes (setup.py): each imports its node's module and
runs its ``main()``, quietly on an early Ctrl-C.

A node installs its own SIGINT, SIGTERM and SIGHUP handling (``_entry.init``) once its modules are
imported, which takes a few tenths of a second (rclpy, the message packages). A SIGINT in
that time, which ``ros2 launch`` sends to every process when one of them exits or the user
presses Ctrl-C right after the start, raised KeyboardInterrupt inside some import and
printed its traceback (also in the console script's own lines, between this module's
import and the call of its function). Nothing has been started then: the process ends at
once with status 0, as it does on a signal once the node runs.

Importing this module in one of those console scripts (``sys.argv[0]`` names it) sets
that SIGINT handler, which the node's own replaces (``_entry.init``); imported anywhere
else (a test importing every module) it sets nothing. It imports nothing but the
standard library and :mod:`cozmo_driver.tool_scripts` (the same, for the tools that are not
nodes; stdlib only) (it is what the console script imports first).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from ..tool_scripts import entry

__all__ = ["driver_node", "face_node", "behavior_node", "description_publisher", "stack"]


def _while_starting(signum: int, frame: Any) -> None:
    """SIGINT before the node handles signals itself: nothing runs yet, nothing to stop."""
    os._exit(0)


#: the console scripts of this module (setup.py)
SCRIPTS = ("cozmo_driver_node", "cozmo_face_node", "cozmo_behavior_node", "cozmo_description_publisher",
           "cozmo_stack")

if os.path.basename(sys.argv[0] if sys.argv else "") in SCRIPTS:
    signal.signal(signal.SIGINT, _while_starting)


driver_node = entry("cozmo_driver.ros.driver_node", "cozmo_driver_node")
face_node = entry("cozmo_driver.ros.face_node", "cozmo_face_node")
behavior_node = entry("cozmo_driver.ros.behavior_node", "cozmo_behavior_node")
description_publisher = entry("cozmo_driver.ros.description_publisher", "cozmo_description_publisher")
stack = entry("cozmo_driver.ros.stack_node", "cozmo_stack")
