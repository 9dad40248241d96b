"""config/teleop_joy.yaml, the gamepad configuration docs/real-robot.md gives to
teleop_twist_joy: it parses, it sets only parameters teleop_twist_joy has, and at regular
and turbo speed no stick position asks the treads for more than the driver's max_wheel_speed."""

from __future__ import annotations

from pathlib import Path

import yaml

from cozmo_driver.driver.parameters import PARAMETERS_BY_NAME
from cozmo_driver.robot_geometry import TRACK_WIDTH_M

CONFIG = Path(__file__).resolve().parents[2] / "config" / "teleop_joy.yaml"

#: teleop_twist_joy's parameters (docs.ros.org, teleop_twist_joy README, Humble to Rolling)
KNOWN = {"require_enable_button", "enable_button", "enable_turbo_button", "publish_stamped_twist",
         "frame", "inverted_reverse"}
KNOWN_MAPS = {"axis_linear", "scale_linear", "scale_linear_turbo", "axis_angular", "scale_angular",
              "scale_angular_turbo"}


def params():
    data = yaml.safe_load(CONFIG.read_text())
    assert list(data) == ["/**"], "for whatever name the launch file gives the node"
    return data["/**"]["ros__parameters"]


def test_only_teleop_twist_joy_parameters_are_set():
    p = params()
    assert set(p) <= KNOWN | KNOWN_MAPS, set(p) - KNOWN - KNOWN_MAPS
    assert set(p["axis_linear"]) == set(p["scale_linear"]) == set(p["scale_linear_turbo"]) == {"x"}
    assert set(p["axis_angular"]) == set(p["scale_angular"]) == set(p["scale_angular_turbo"]) == {"yaw"}
    assert p["require_enable_button"] is True  # nothing moves unless a button is held
    assert p["enable_button"] != p["enable_turbo_button"]


def test_regular_speed_stays_within_the_treads_limit():
    p = params()
    limit = PARAMETERS_BY_NAME["max_wheel_speed"].default
    # the fastest tread at full stick in both axes: v + w * track / 2
    fastest = p["scale_linear"]["x"] + p["scale_angular"]["yaw"] * TRACK_WIDTH_M / 2
    assert fastest <= limit
    assert p["scale_linear_turbo"]["x"] <= limit
    assert all(isinstance(v, float) for v in (p["scale_linear"]["x"], p["scale_angular"]["yaw"],
                                               p["scale_linear_turbo"]["x"], p["scale_angular_turbo"]["yaw"]))


def test_turbo_speed_stays_within_the_treads_limit():
    """The turbo button gave 0.2 m/s and 4.0 rad/s: at full stick forwards and sideways the
    outer tread was asked for 0.292 m/s, which the driver scaled down with a warning, though
    the file said its speeds stayed within the driver's limits."""
    p = params()
    limit = PARAMETERS_BY_NAME["max_wheel_speed"].default
    fastest = p["scale_linear_turbo"]["x"] + p["scale_angular_turbo"]["yaw"] * TRACK_WIDTH_M / 2
    assert fastest <= limit, fastest
    # faster than the regular speed in both axes, or the button would be pointless
    assert p["scale_linear_turbo"]["x"] > p["scale_linear"]["x"]
    assert p["scale_angular_turbo"]["yaw"] > p["scale_angular"]["yaw"]


def test_the_turbo_button_is_said_to_drive_on_its_own():
    """teleop_twist_joy takes the turbo button without the enable button (its joy callback
    checks the turbo button first): RB alone drives at 0.14 m/s. The file read as if LB were
    the one dead-man button and RB only sped it up."""
    text = CONFIG.read_text()
    turbo_line = next(line for line in text.splitlines() if line.strip().startswith("enable_turbo_button"))
    assert "alone" in turbo_line, turbo_line
    assert "either one alone drives" in text
    guide = (CONFIG.parents[1] / "docs" / "real-robot.md").read_text()
    assert "either one alone drives" in guide
