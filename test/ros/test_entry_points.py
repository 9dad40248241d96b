"""The nodes' console scripts (cozmo_driver/ros/entry_points.py) end quietly on a SIGINT
that comes while their modules are still being imported, as ``ros2 launch`` sends one to
every process when another exits right after the start."""

from __future__ import annotations

import subprocess
import sys

import pytest

from processes import project_executable, sigint_while_importing

NODES = ["cozmo_driver_node", "cozmo_face_node", "cozmo_behavior_node", "cozmo_description_publisher",
         "cozmo_stack"]


def test_every_node_console_script_goes_through_entry_points():
    from pathlib import Path
    setup = (Path(__file__).resolve().parents[2] / "setup.py").read_text()
    for name in NODES:
        assert f"{name} = cozmo_driver.ros.entry_points:" in setup, name


def test_imported_elsewhere_it_leaves_sigint_alone():
    """A program (or a test) that imports every module keeps its own Ctrl-C handling."""
    code = ("import signal, cozmo_driver.ros.entry_points as e; "
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler; "
            "assert set(e.SCRIPTS) == set(%r)" % (NODES,))
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.ros  # the node executables, rclpy and its middleware loaded
@pytest.mark.slow
@pytest.mark.parametrize("name", ["cozmo_driver_node", "cozmo_face_node"])
def test_a_sigint_during_the_imports_ends_the_node_with_status_0_and_no_traceback(name):
    exe = project_executable(name)
    # the line of cozmo_driver.driver says the node's module is being imported (entry_points is
    # loaded, its SIGINT handler set) and the rest of its imports are still to come. The marker
    # is a module the node's module imports: entry_points itself, and the node's module, are
    # loaded with importlib.import_module where a colcon install's script loads its entry
    # point, which Python's import timing does not print
    code, err = sigint_while_importing(
        [str(exe), "--ros-args", "-p", "robot_ip:=127.0.0.1", "-p", "robot_port:=9"],
        lambda m: m == "cozmo_driver.driver", "the node's module never imported cozmo_driver.driver")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert code == 0, (code, err)
