"""What importing the driver node's module loads (docs/driver.md, Start-up; issue #18).

The node, and with it its DDS participant, is made before the message packages, the
robot client, the protocol and the core are imported, so that discovery runs while they
load; numpy (some 70 ms here) comes later still, with the animation library and the
action servers. An import added at the top of a module that the driver node's module
reaches undoes that without failing anything else: the stop-32 helper
``_entry.destroy_waitables`` imported ``rclpy.action`` at module level, which imports
numpy through its goal ids, and start-up lost about 0.1 s unnoticed. Each check runs in
a fresh interpreter, since this one has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dependencies import require

require("rclpy")

pytestmark = pytest.mark.ros

#: modules the driver node's start-up loads only after its node is made (or later)
DEFERRED = (
    "numpy",
    "rclpy.action",
    "nav_msgs",
    "sensor_msgs",
    "geometry_msgs",
    "cozmo_interfaces",
    "cozmo_driver.client",
    "cozmo_driver.core",
    "cozmo_driver.transport",
    "cozmo_driver.anim",
)


def loaded_after(statement: str, deferred: tuple = DEFERRED) -> list:
    """The modules (of ``deferred``, and their submodules) loaded after ``statement`` in a
    fresh interpreter of this venv."""
    code = (f"import json, sys\n{statement}\n"
            f"deferred = {deferred!r}\n"
            "print(json.dumps(sorted(m for m in sys.modules\n"
            "                        if any(m == d or m.startswith(d + '.') for d in deferred))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_probe_sees_a_deferred_module_that_is_imported():
    # the check itself: a statement that imports one of them is seen to
    assert "rclpy.action" in loaded_after("import rclpy.action")
    assert "numpy" in loaded_after("import numpy")


def test_importing_the_driver_node_loads_none_of_what_start_up_defers():
    assert loaded_after("import cozmo_driver.ros.driver_node") == []


def test_the_entry_helpers_load_none_of_it_either():
    # _entry is shared by every node's main(); destroy_waitables works without rclpy.action
    assert loaded_after("from cozmo_driver.ros._entry import destroy_waitables, spin_node") == []


def test_checking_the_parameters_loads_no_audio_codec():
    # the node checks every parameter before anything else (speech_voice's name among
    # them); the audio codec (its 65536-entry tables built at import) and the media
    # conversions wait until something is played or spoken
    media = ("cozmo_driver.protocol.audio", "cozmo_driver.driver.media", "numpy")
    assert loaded_after("from cozmo_driver.driver.parameters import PARAMETERS, validate_all\n"
                        "assert validate_all({p.name: p.default for p in PARAMETERS}) is None",
                        media) == []
    assert "cozmo_driver.protocol.audio" in loaded_after("import cozmo_driver.driver.media", media)
