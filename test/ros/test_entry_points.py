"""The nodes' console scripts (cozmo_driver/ros/entry_points.py) end quietly on a SIGINT
that comes while their modules are still being imported, as ``ros2 launch`` sends one to
every process when another exits right after the start."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from processes import project_executable

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
    # Python prints each module's import time to stderr when it is done (PYTHONPROFILEIMPORTTIME):
    # the line of cozmo_driver.driver says the node's module is being imported (entry_points
    # is loaded, its SIGINT handler set) and the rest of its imports are still to come
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.Popen([str(exe), "--ros-args", "-p", "robot_ip:=127.0.0.1", "-p", "robot_port:=9"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    lines: "queue.Queue[str]" = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True)
    reader.start()
    seen, err_lines = False, []
    try:
        deadline = time.monotonic() + 30.0
        while not seen and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            err_lines.append(line)
            # "import time: self | cumulative | <indent>module". The marker is a module the
            # node's module imports: entry_points itself, and the node's module, are loaded
            # with importlib.import_module where a colcon install's script loads its entry
            # point, which Python's import timing does not print
            seen = line.rsplit("|", 1)[-1].strip() == "cozmo_driver.driver"
        assert seen, "the node's module never imported cozmo_driver.driver: " + "".join(err_lines)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30.0)
        reader.join(10.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    while not lines.empty():
        err_lines.append(lines.get())
    err = "".join(line for line in err_lines if not line.startswith("import time:"))
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert proc.returncode == 0, (proc.returncode, err)
