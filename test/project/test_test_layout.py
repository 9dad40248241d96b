"""The test folders mirror the package's layers, and docs/development.md's table of them
is complete: every folder of test/ that holds tests has a row, every row a folder, and
no test module is left at the top of test/."""

from __future__ import annotations

import re
from pathlib import Path

TEST = Path(__file__).resolve().parents[1]
DOC = TEST.parent / "docs" / "development.md"


def documented_folders():
    text = DOC.read_text()
    table = text.split("<!-- test layout -->", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `test/(\w+)/` \|", table, flags=re.M)


def test_every_test_folder_is_documented_and_every_row_is_a_folder():
    folders = {p.parent.name for p in TEST.glob("*/test_*.py")}
    documented = documented_folders()
    assert len(documented) >= 9
    assert sorted(documented) == sorted(folders)


def test_no_test_module_is_left_at_the_top():
    assert sorted(p.name for p in TEST.glob("test_*.py")) == []
