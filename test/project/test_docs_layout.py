"""docs/architecture.md's repository layout names every part of the package: each
subpackage, each top-level module and each module of ros/ (the nodes' glue, where most
files are), so that a new module cannot go unexplained; and every path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cozmo_driver"


def layout_block() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Repository layout", 1)[1]
    return section.split("```", 2)[1]


def test_every_part_of_the_package_is_in_the_layout():
    block = layout_block()
    missing = []
    for sub in sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        if sub != "ros" and not re.search(rf"(^|[\s,]){sub}/", block, flags=re.M):
            missing.append(f"{sub}/")
    for module in sorted(PACKAGE.glob("*.py")) + sorted((PACKAGE / "ros").glob("*.py")):
        if module.name == "__init__.py":
            continue
        name = module.relative_to(PACKAGE).as_posix()
        if not re.search(rf"(^|[\s,]){re.escape(name)}\b", block, flags=re.M):
            missing.append(name)
    assert not missing, f"not in docs/architecture.md's repository layout: {missing}"


def test_every_module_path_in_the_layout_exists():
    block = layout_block()
    named = set(re.findall(r"\b((?:ros|sim|core|client|transport)/\w+\.py)\b", block))
    assert len(named) >= 20
    gone = sorted(path for path in named if not (PACKAGE / path).is_file())
    assert not gone, gone
