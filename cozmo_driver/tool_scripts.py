"""The console scripts of the tools that are not ROS nodes (setup.py): ``cozmo-sim``,
``cozmo-demo``, ``cozmo-protocol-demo`` and ``cozmo_bringup``. Each imports its tool's
module and runs its ``main()``, quietly on an early Ctrl-C.

A tool installs its own SIGINT handling once its modules are imported and its arguments
read, which takes a few tenths of a second (numpy and the simulator, the bring-up plan;
more on a loaded machine). A SIGINT in that time, a Ctrl-C right after the start (which
``cozmo_bringup use_sim:=true`` and ``ros2 launch ... use_sim:=true`` pass on to the
simulator they just started), raised KeyboardInterrupt inside some import and printed its
traceback, and the bring-up reported the simulator dead with status -2. Nothing has been
started then: the process ends at once with the status the tool documents for a Ctrl-C:
0 for ``cozmo-sim`` and ``cozmo_bringup``, 130 (128 + SIGINT) for the two demos. The
nodes' console scripts do the same (:mod:`cozmo_driver.ros.entry_points`).

Importing this module in one of those console scripts (``sys.argv[0]`` names it) sets
that SIGINT handler, which the tool's own replaces; imported anywhere else (a test
importing every module) it sets nothing, and a SIGINT ignored at the start (a background
job of a shell without job control) stays ignored. It imports nothing but the standard
library (it is what the console script imports first).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any, Callable, Optional, Sequence

__all__ = ["sim", "demo", "protocol_demo", "bringup", "SCRIPTS", "entry"]

#: console script: (its tool's module, the exit status of a SIGINT before the tool handles it)
SCRIPTS = {
    "cozmo-sim": ("cozmo_driver.sim.cli", 0),
    "cozmo-demo": ("cozmo_driver.demo", 128 + signal.SIGINT),
    "cozmo-protocol-demo": ("cozmo_driver.protocol_demo", 128 + signal.SIGINT),
    "cozmo_bringup": ("cozmo_driver.bringup", 0),
}

_SCRIPT = os.path.basename(sys.argv[0] if sys.argv else "")


def _while_starting(signum: int, frame: Any) -> None:
    """SIGINT before the tool handles signals itself: nothing runs yet, nothing to stop."""
    os._exit(SCRIPTS[_SCRIPT][1])


if _SCRIPT in SCRIPTS and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _while_starting)


def entry(module: str, script: str) -> Callable[[Optional[Sequence[str]]], int]:
    """The function of the console script ``script``: ``module``'s ``main(args)``, the module
    imported at the call, under the early SIGINT handling the script's first import set (here,
    and for the nodes :mod:`cozmo_driver.ros.entry_points`)."""
    def run(args: Optional[Sequence[str]] = None) -> int:
        return importlib.import_module(module).main(args)
    run.__name__ = run.__qualname__ = module.rsplit(".", 1)[-1]
    run.__doc__ = f"The console script {script}: {module}'s main(), quiet on an early Ctrl-C."
    return run


sim = entry(SCRIPTS["cozmo-sim"][0], "cozmo-sim")
demo = entry(SCRIPTS["cozmo-demo"][0], "cozmo-demo")
protocol_demo = entry(SCRIPTS["cozmo-protocol-demo"][0], "cozmo-protocol-demo")
bringup = entry(SCRIPTS["cozmo_bringup"][0], "cozmo_bringup")
