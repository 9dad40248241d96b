"""Make the CMake export files of the ROS 2 PyPI wheels usable on this machine.

The message wheels (std_msgs, geometry_msgs, ...) ship CMake export files,
``<prefix>/share/<pkg>/cmake/export_<pkg>__rosidl_generator_pyExport.cmake``,
that name include directories of the machine the wheels were built on:

    /opt/python/cp311-cp311/include/python3.11
    /opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include

CMake refuses to build anything against a target whose include directory does
not exist, so building our own interface packages fails until these paths are
rewritten to this interpreter's header directory and the venv's site-packages.

Run with the venv's Python (``.venv/bin/python tools/fix_wheel_cmake_exports.py``).
It is idempotent: files that are already correct are left untouched. It exits
with status 2 and says so when the Python headers are missing.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

# A wheel-build interpreter prefix, e.g. /opt/python/cp311-cp311.
_BUILD_PREFIX = r"/opt/python/cp3\d+-cp3\d+"
_INCLUDE_RE = re.compile(_BUILD_PREFIX + r"/include/python3\.\d+t?")
_SITE_PACKAGES_RE = re.compile(_BUILD_PREFIX + r"/lib/python3\.\d+t?/site-packages")


def rewrite(text: str, include_dir: str, site_packages: str) -> str:
    """Return ``text`` with the wheel build machine's Python paths replaced."""
    text = _INCLUDE_RE.sub(include_dir, text)
    return _SITE_PACKAGES_RE.sub(site_packages, text)


def main() -> int:
    prefix = Path(sys.prefix)
    include_dir = sysconfig.get_paths()["include"]
    site_packages = sysconfig.get_paths()["purelib"]
    if not (Path(include_dir) / "Python.h").is_file():
        print(
            f"fix_wheel_cmake_exports: no Python.h in {include_dir}: install the "
            "Python development headers (python3-dev on Debian/Ubuntu)",
            file=sys.stderr,
        )
        return 2
    changed = 0
    for path in sorted(prefix.glob("share/*/cmake/export_*__rosidl_generator_pyExport.cmake")):
        text = path.read_text()
        new_text = rewrite(text, include_dir, site_packages)
        if new_text != text:
            path.write_text(new_text)
            changed += 1
    print(f"fix_wheel_cmake_exports: rewrote {changed} file(s) under {prefix}/share")
    return 0


if __name__ == "__main__":
    sys.exit(main())
