"""The console scripts of the tools that are not ROS nodes (cozmo_driver/tool_scripts.py)
end quietly, with the status each tool documents for a Ctrl-C, on a SIGINT that comes while
their modules are still being imported: a Ctrl-C right after the start, which
``cozmo_bringup use_sim:=true`` and ``ros2 launch ... use_sim:=true`` pass on to the
simulator they just started (it printed a KeyboardInterrupt traceback, and the bring-up
said the simulator exited with status -2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from processes import sigint_while_importing

ROOT = Path(__file__).resolve().parents[2]

#: (console script, its arguments, its documented status on a Ctrl-C); every run is bounded
#: by its own arguments, and every robot it talks to is its own simulator on 127.0.0.1
CASES = [
    ("cozmo-sim", ["--port", "0", "--quiet", "--duration", "20"], 0),
    ("cozmo-protocol-demo", ["--duration", "5"], 130),
    ("cozmo-demo", ["--protocol-only", "--duration", "5"], 130),
    ("cozmo_bringup", ["--help"], 0),   # its status on a Ctrl-C, and --help's, are 0
]


def console_script(name: str, directory: Path) -> Path:
    """``name``'s console script as pip writes it from setup.py's entry point (the one
    installed in the venv is the main checkout's, made from its own setup.py)."""
    setup = (ROOT / "setup.py").read_text()
    found = re.search(rf'"{re.escape(name)} = ([\w.]+):(\w+)"', setup)
    assert found, f"setup.py has no console script {name}"
    module, function = found.groups()
    path = directory / name
    path.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\n"
                    f"if __name__ == '__main__':\n    sys.exit({function}())\n")
    path.chmod(0o755)
    return path


def test_imported_elsewhere_it_leaves_sigint_alone():
    """A program (or a test) that imports every module keeps its own Ctrl-C handling."""
    code = ("import signal, cozmo_driver.tool_scripts; "
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    assert subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT).returncode == 0


@pytest.mark.parametrize("name, args, status", CASES, ids=[case[0] for case in CASES])
def test_a_sigint_during_the_imports_ends_the_tool_with_its_status_and_no_traceback(name, args, status,
                                                                                       tmp_path):
    script = console_script(name, tmp_path)
    # the first module of the package under the tool's (cozmo_driver itself and this module
    # aside) says the tool's imports have begun, and most of them are still to come
    code, err = sigint_while_importing(
        [str(script), *args], lambda m: m.startswith("cozmo_driver.") and m != "cozmo_driver.tool_scripts",
        f"{name} imported no module of the package", env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert code == status, (code, err)
