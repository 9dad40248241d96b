"""cozmo_driver/fast_yaml.py: libyaml's parser where PyYAML has it, the same documents.

Every YAML file the package ships (the built-in animations, the behavior defaults, the
parameter file) reads into the same objects as with ``yaml.safe_load``; a document that
is not YAML raises ``yaml.YAMLError`` with the line; a tag that safe_load refuses is
refused too (the constructor is the same).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dependencies import require

yaml = require("yaml", "PyYAML, an exec_depend of package.xml")

from cozmo_driver.fast_yaml import safe_load  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def shipped_files():
    files = sorted((ROOT / "cozmo_driver").rglob("*.yaml")) + sorted((ROOT / "config").glob("*.yaml"))
    assert len(files) >= 14
    return files


def test_libyaml_is_used_where_this_pyyaml_has_it(monkeypatch):
    used = []
    real_load = yaml.load

    def load(stream, Loader):  # noqa: N803 - PyYAML's keyword
        used.append(Loader)
        return real_load(stream, Loader=Loader)

    monkeypatch.setattr(yaml, "load", load)
    assert safe_load("a: [1, 2]") == {"a": [1, 2]}
    assert used == [getattr(yaml, "CSafeLoader", yaml.SafeLoader)]
    if yaml.__with_libyaml__:
        assert used == [yaml.CSafeLoader]


@pytest.mark.parametrize("path", shipped_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_file_reads_as_with_safe_load(path):
    text = path.read_text(encoding="utf-8")
    assert safe_load(text) == yaml.safe_load(text)


def test_a_stream_reads_as_its_text(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("node:\n  ros__parameters:\n    x: 1.5\n")
    with open(path) as stream:
        assert safe_load(stream) == {"node": {"ros__parameters": {"x": 1.5}}}


def test_not_yaml_raises_yaml_error_with_the_line():
    with pytest.raises(yaml.YAMLError) as info:
        safe_load("a: 1\nb: [2, 3\nc: 4\n")
    mark = getattr(info.value, "problem_mark", None)
    assert mark is not None and mark.line >= 1


def test_python_tags_are_refused():
    with pytest.raises(yaml.YAMLError):
        safe_load("!!python/object/apply:os.system ['true']")
