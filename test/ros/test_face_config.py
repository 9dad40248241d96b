"""config/cozmo.yaml's ``cozmo_face:`` section against what cozmo_face_node declares, and
the bring-up handing that section to the node, with and without a namespace.

In-process rclpy (nodes are created, never spun): the parameters are the node's own, read
back through its parameter API.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

from dependencies import require

rclpy = require("rclpy")

from rclpy.parameter import Parameter  # noqa: E402

from cozmo_driver import bringup, bringup_plan as plan  # noqa: E402
from cozmo_driver.ros.face_node import FaceNode  # noqa: E402

pytestmark = [pytest.mark.ros]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config" / "cozmo.yaml"


def own_parameters(node, context) -> Dict[str, Any]:
    """{name: value} of the parameters ``node`` declares itself (not every node's, such as
    use_sim_time)."""
    plain = rclpy.create_node("plain", context=context)
    try:
        common = set(plain.get_parameters_by_prefix(""))
    finally:
        plain.destroy_node()
    # every declared parameter by its full name (list_parameters, Jazzy's only, gives the same)
    names = [name for name in node.get_parameters_by_prefix("") if name not in common]
    return {p.name: p.value for p in node.get_parameters(names)}


def face_section_comments() -> Dict[str, str]:
    """{parameter: the comment lines above it} in the cozmo_face section of the file."""
    lines = CONFIG.read_text().splitlines()
    start = lines.index("cozmo_face:")
    comments: Dict[str, str] = {}
    pending: List[str] = []
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):
            break                                       # the next node's section
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("# "))
        elif re.match(r"^    \w+:", line):
            comments[stripped.split(":", 1)[0]] = " ".join(pending)
            pending = []
    return comments


def test_config_yaml_lists_every_face_node_parameter_with_its_default(rclpy_context):
    node = FaceNode(context=rclpy_context)
    try:
        declared = own_parameters(node, rclpy_context)
        descriptors = dict(zip(declared, node.describe_parameters(list(declared))))
    finally:
        node.destroy_node()
    doc = yaml.safe_load(CONFIG.read_text())
    assert doc["cozmo_face"]["ros__parameters"] == declared
    assert {"fps", "expression", "idle", "seed", "transition_s", "keepalive_s"} <= set(declared)
    # each is commented, with its range where the node declares one
    comments = face_section_comments()
    assert set(comments) == set(declared)
    for name, descriptor in descriptors.items():
        assert len(comments[name]) > 20, name
        assert comments[name].endswith("(static)"), name   # read at start-up only
        for bounds in descriptor.floating_point_range:
            assert f"Range {bounds.from_value!r}..{bounds.to_value!r}." in comments[name], name


def test_an_unknown_start_expression_is_refused_naming_the_parameter(rclpy_context):
    """expression:=hapy was refused as "unknown expression 'hapy'; known: ...; and blink (...)",
    naming no parameter and offering blink, which the parameter refuses: it names the
    parameter, and the expressions and aliases only."""
    for value in ("hapy", "blink"):
        with pytest.raises(ValueError) as refused:
            FaceNode(node_name="misspelt_face", context=rclpy_context,
                     parameter_overrides=[Parameter("expression", value=value)])
        text = str(refused.value)
        if value == "hapy":
            assert text.startswith("expression: unknown expression 'hapy'; known: "), text
            assert "aliases: afraid (fearful)" in text and "blink" not in text, text
        else:  # said not to be one
            assert text.startswith("expression: 'blink' is not an expression"), text


def test_fps_beyond_the_thirty_frames_a_second_the_robot_shows_is_refused(rclpy_context):
    """The driver takes one face a tick of the robot's 30 a second: a face node rendering 60
    filled the driver's queue and lost frames unsaid; now it does not start, naming the range."""
    from rclpy.exceptions import InvalidParameterValueException
    with pytest.raises(InvalidParameterValueException, match=r"fps out of range Min: 1\.0, Max: 30\.0"):
        FaceNode(node_name="fast_face", context=rclpy_context,
                 parameter_overrides=[Parameter("fps", value=31.0)])
    node = FaceNode(node_name="full_speed_face", context=rclpy_context,
                    parameter_overrides=[Parameter("fps", value=30.0), Parameter("idle", value=False)])
    try:
        assert node.get_parameter("fps").value == 30.0
        (descriptor,) = node.describe_parameters(["fps"])
        assert descriptor.floating_point_range[0].to_value == 30.0
        assert "at most 30: the robot shows 30 a second" in descriptor.description
    finally:
        node.destroy_node()
    # the face node's table in docs/media.md says the same range
    row = next(line for line in (ROOT / "docs" / "media.md").read_text().splitlines()
               if line.startswith("| `fps` | double |"))
    assert "(1..30:" in row, row


def _face_command(config: Path, namespace: str):
    """The face node's command line as cozmo_bringup builds it from the plan."""
    args = plan.resolve_arguments({"enable_face": "true", "namespace": namespace,
                                   "config": str(config)})
    entries = plan.make_plan(args, description=lambda prefix: "<robot name='cozmo'/>")
    face = next(entry for entry in entries if entry.name == "face")
    runner = bringup.Bringup([face], locate=lambda package, exe: Path("/opt/bin", exe),
                             say=lambda text: None)
    ((_, command),) = runner.resolve()
    return command, runner.parameter_directory


@pytest.mark.parametrize("namespace, fqn", [("", "/cozmo_face"), ("robot1", "/robot1/cozmo_face")])
def test_the_bringup_gives_the_face_node_its_section(rclpy_context, tmp_path, namespace, fqn):
    doc = yaml.safe_load(CONFIG.read_text())
    mine = {"fps": 12.0, "expression": "happy", "idle": False, "seed": 7, "transition_s": 0.0,
            "keepalive_s": 2.5}
    assert set(mine) == set(doc["cozmo_face"]["ros__parameters"])
    doc["cozmo_face"]["ros__parameters"] = mine
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump(doc))
    command, generated = _face_command(config, namespace)
    try:
        assert command[0] == "/opt/bin/cozmo_face_node" and command[1] == "--ros-args"
        node = FaceNode(context=rclpy_context, cli_args=command[1:])
        try:
            assert node.get_fully_qualified_name() == fqn
            assert own_parameters(node, rclpy_context) == mine
        finally:
            node.destroy_node()
    finally:
        if generated:
            shutil.rmtree(generated)


def test_a_namespaced_face_node_misses_the_plain_key_by_itself(rclpy_context, tmp_path):
    # why the plan copies the section: `cozmo_face:` does not reach /robot1/cozmo_face
    doc = yaml.safe_load(CONFIG.read_text())
    doc["cozmo_face"]["ros__parameters"]["fps"] = 12.0
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump(doc))
    node = FaceNode(context=rclpy_context, cli_args=["--ros-args", "-r", "__ns:=/robot1",
                                                     "--params-file", str(config)])
    try:
        assert node.get_parameter("fps").value == 30.0
    finally:
        node.destroy_node()
