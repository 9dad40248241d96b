"""package.xml declares what the driver imports, so that `rosdep install` gives a user on
ROS 2 from apt everything it needs: action_msgs, builtin_interfaces, rcl_interfaces,
unique_identifier_msgs and ament_index_python were imported but came only through rclpy.
Pure: reads the sources and the manifest."""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: a Python module the driver imports -> its rosdep key, where the two names differ
ROSDEP_KEYS = {"numpy": "python3-numpy", "PIL": "python3-pil", "yaml": "python3-yaml"}
#: imported only for an optional feature, with a clear error without it
OPTIONAL = {"flatbuffers": "writing the Cozmo app's .bin clips (anim/clip.py)"}


def imported_modules() -> set:
    modules = set()
    for path in (ROOT / "cozmo_driver").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return {m for m in modules if m not in sys.stdlib_module_names and m != "cozmo_driver"}


def test_every_package_the_driver_imports_is_an_exec_depend():
    manifest = ET.parse(ROOT / "package.xml").getroot()
    declared = {e.text for e in manifest.iter("exec_depend")}
    wanted = {ROSDEP_KEYS.get(m, m) for m in imported_modules() if m not in OPTIONAL}
    assert wanted - declared == set(), f"imported but not declared in package.xml: {sorted(wanted - declared)}"
    assert {"rclpy", "numpy", "action_msgs"} <= imported_modules()  # the scan sees imports
