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


#: what rosidl_generator_py's package brings with its code generator (_entry.leave_out_message_generator)
GENERATOR = ("rosidl_generator_py.generate_py_impl", "rosidl_parser.parser", "lark", "em")

#: a node of this process started as every node's main() starts it, publishing one message
NODE_AFTER_INIT = ("import rclpy\n"
                   "from cozmo_driver.ros._entry import init\n"
                   "init([])\n"
                   "node = rclpy.create_node('startup_imports_probe')\n"
                   "from nav_msgs.msg import Odometry\n"
                   "node.create_publisher(Odometry, 'startup_imports_probe', 1).publish(Odometry())\n"
                   "node.destroy_node()\n"
                   "rclpy.try_shutdown()\n")


def test_the_probe_sees_the_message_generator_where_rclpy_alone_loads_it():
    # rclpy's own first message type imports it with rosidl_generator_py (the floor's cost)
    loaded = loaded_after("import rclpy\nrclpy.init()\nrclpy.create_node('startup_imports_probe')\n"
                          "rclpy.try_shutdown()", GENERATOR)
    assert "rosidl_generator_py.generate_py_impl" in loaded and "lark" in loaded


def test_a_node_started_by_init_loads_no_message_generator():
    # 35-50 ms of every node's start-up: the messages still work without it
    assert loaded_after(NODE_AFTER_INIT, GENERATOR) == []


def test_the_message_generator_can_still_be_imported_after_init():
    statement = NODE_AFTER_INIT + ("import rosidl_generator_py.generate_py_impl as gen\n"
                                   "assert callable(gen.generate_py)\n")
    assert "rosidl_generator_py.generate_py_impl" in loaded_after(statement, GENERATOR)


def test_an_imported_generator_package_is_left_as_it_is():
    statement = ("import rosidl_generator_py\n"
                 "from cozmo_driver.ros._entry import leave_out_message_generator as leave_out\n"
                 "assert leave_out() is False\n"
                 "assert rosidl_generator_py.generate_py\n")
    assert "rosidl_generator_py.generate_py_impl" in loaded_after(statement, GENERATOR)
