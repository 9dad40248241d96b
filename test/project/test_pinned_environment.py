"""The wheel venvs hold exactly the pinned closure: every `name==version` line of
tools/requirements-ros-jazzy.txt and tools/requirements-dev.txt (and, in the kit
environment, tools/requirements-kit.txt) whose environment marker applies to this
interpreter is the version installed here, whichever installer `./dev setup` used (uv by
default, pip with DEV_INSTALLER=pip)."""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from packaging.markers import Marker
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;]+)\s*(?:;(?P<marker>.*))?$")


def pins(path: Path) -> List[Tuple[str, str]]:
    """The (name, version) pins of a requirements file that apply to this interpreter."""
    out = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = PIN.match(line)
        assert m, f"{path.name}: not a plain pin: {raw!r}"
        if m["marker"] and not Marker(m["marker"].strip()).evaluate():
            continue
        out.append((canonicalize_name(m["name"]), m["version"]))
    return out


def installed(name: str):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


#: the directories of ./dev's wheel venvs (the ROS mode's .venv-ros sits on a distro's Python)
WHEEL_VENVS = (".venv", ".venv-kit")


def in_wheel_venv() -> bool:
    """This interpreter is one of ./dev's wheel venvs (.venv or .venv-kit), not a distro's:
    known by the venv's directory, not by a package installed in it (a pin, which may be the
    one missing)."""
    return sys.prefix != sys.base_prefix and Path(sys.prefix).name in WHEEL_VENVS


def test_pins_parse():
    for name in ("requirements-ros-jazzy.txt", "requirements-dev.txt", "requirements-kit.txt",
                 "requirements-uv.txt"):
        assert pins(TOOLS / name), name


def test_the_venv_holds_the_pinned_versions():
    if not in_wheel_venv():
        pytest.skip(f"not one of ./dev's wheel venvs ({sys.prefix}): a distro's ROS 2 pins "
                    "its own versions")
    files = ["requirements-ros-jazzy.txt", "requirements-dev.txt"]
    if installed("colcon-core") is not None and Path(sys.prefix).name == ".venv-kit":
        files.append("requirements-kit.txt")
    wrong = []
    for f in files:
        for name, version in pins(TOOLS / f):
            have = installed(name)
            if have is None or Version(have) != Version(version):
                wrong.append(f"{f}: {name}=={version}, installed {have or 'nothing'}")
    assert wrong == []


def test_rosidl_generators_run_with_the_pinned_empy():
    if not in_wheel_venv():
        pytest.skip(f"not one of ./dev's wheel venvs ({sys.prefix})")
    import em
    assert em.__version__ == dict(pins(TOOLS / "requirements-ros-jazzy.txt"))["empy"]


@pytest.mark.parametrize("prefix, wheel_venv", [("/src/cozmo/.venv", True), ("/src/cozmo/.venv-kit", True),
                                                ("/src/cozmo/.venv-ros", False), ("/usr", False)])
def test_a_wheel_venv_is_known_by_its_directory_not_by_a_pinned_package(monkeypatch, prefix, wheel_venv):
    """in_wheel_venv() asked whether ros-wheels-bootstrapper, itself a pin, was installed: a
    wheel venv without it was taken for a distro's Python and the pins went unchecked (the
    test skipped) exactly when one was missing."""
    monkeypatch.setattr(sys, "prefix", prefix)
    monkeypatch.setattr(sys, "base_prefix", "/usr" if prefix != "/usr" else prefix)

    def nothing_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", nothing_installed)
    assert in_wheel_venv() is wheel_venv
