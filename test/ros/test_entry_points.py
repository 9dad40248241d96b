"""The nodes' console scripts (cozmo_driver/ros/entry_points.py) end quietly on a SIGINT
that comes while their modules are still being imported, as ``ros2 launch`` sends one to
every process when another exits right after the start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from cozmo_driver.bringup_plan import PACKAGE, locate_executable

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


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cozmo_driver_node", "cozmo_face_node"])
def test_a_sigint_during_the_imports_ends_the_node_with_status_0_and_no_traceback(name):
    exe = locate_executable(PACKAGE, name)
    if exe is None:
        pytest.skip(f"{name} is not installed as a console script here")
    # Python prints each module's import time to stderr when it is done (PYTHONPROFILEIMPORTTIME):
    # the line of the cozmo_driver package says the interpreter runs our code and the node's
    # own imports (rclpy, the message packages) are still to come
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.Popen([str(exe), "--ros-args", "-p", "robot_ip:=127.0.0.1", "-p", "robot_port:=9"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        deadline = time.monotonic() + 30.0
        seen = False
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            if line.rstrip().endswith("| cozmo_driver.ros.entry_points"):
                seen = True
                break
        assert seen, "the console script never imported cozmo_driver.ros.entry_points"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = "\n".join(line for line in err.splitlines() if not line.startswith("import time:"))
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert proc.returncode == 0, (proc.returncode, err)
