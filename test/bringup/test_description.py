"""The robot description (cozmo_description): xacro output, joints, frames, kinematics.

The URDF is checked against what the rest of the project assumes: the
driver's joint and frame names and its robot_geometry constants, the
simulator's camera and lift geometry, the optical frame convention, and the
RViz configuration. Pure: xacro and xml.etree, no ROS.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from dependencies import require

from cozmo_driver import robot_geometry as geo
from cozmo_driver.description import (DescriptionError, Transform, UrdfModel, package_share,
                                      quaternion_from_rpy, robot_description)
from cozmo_driver.driver.parameters import PARAMETERS
from cozmo_driver.sim import world

ROOT = Path(__file__).resolve().parents[2]
DESCRIPTION = ROOT / "cozmo_description"
XACRO = DESCRIPTION / "urdf" / "cozmo.urdf.xacro"
RVIZ = DESCRIPTION / "rviz" / "cozmo.rviz"

ACTUATED = ("head_joint", "lift_joint")
EXPECTED_LINKS = {"base_footprint", "base_link", "left_tread_link", "right_tread_link",
                  "imu_link", "head_link", "camera_link", "camera_optical_frame", "lift_link",
                  "lift_upper_arm_link", "lift_plate_link"}


@pytest.fixture(scope="module")
def urdf() -> str:
    return robot_description(path=XACRO)


@pytest.fixture(scope="module")
def model(urdf) -> UrdfModel:
    return UrdfModel.from_xml(urdf)


@pytest.fixture(scope="module")
def prefixed() -> UrdfModel:
    return UrdfModel.from_xml(robot_description(prefix="robot1/", path=XACRO))


def _frame_default(name: str) -> str:
    return next(spec.default for spec in PARAMETERS if spec.name == name)


def _close(a, b, tol=1e-9) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b))


def _same_rotation(q1, q2, tol=1e-9) -> bool:
    dot = abs(sum(a * b for a, b in zip(q1, q2)))
    return abs(dot - 1.0) <= tol


# ------------------------------------------------------------------ processing


def test_xacro_makes_a_urdf_with_one_tree(urdf, model):
    root = ET.fromstring(urdf)
    assert root.tag == "robot" and root.get("name") == "cozmo"
    for element in root.iter():  # every macro and expression expanded
        assert "xacro" not in element.tag
        assert not any("${" in v or "$(" in v for v in element.attrib.values()), element.attrib
    assert set(model.links) == EXPECTED_LINKS
    assert model.root == "base_footprint"
    assert set(model.descendants("base_footprint")) == EXPECTED_LINKS - {"base_footprint"}


def test_prefix_goes_on_every_link_and_no_joint(model, prefixed):
    assert set(prefixed.links) == {"robot1/" + link for link in model.links}
    assert set(prefixed.joints) == set(model.joints)
    assert prefixed.root == "robot1/base_footprint"
    for name, joint in prefixed.joints.items():
        assert joint.parent == "robot1/" + model.joints[name].parent
        assert joint.child == "robot1/" + model.joints[name].child
        assert joint.origin == model.joints[name].origin


def test_joint_prefix_renames_joints_and_mimic_references():
    named = UrdfModel.from_xml(robot_description(joint_prefix="c1_", path=XACRO))
    assert "c1_head_joint" in named.joints and "head_joint" not in named.joints
    for joint in named.joints.values():
        assert joint.name.startswith("c1_")
        if joint.mimic is not None:
            assert joint.mimic.joint == "c1_lift_joint"


def test_the_macro_leaves_the_names_of_the_including_description_alone(tmp_path, model):
    """A user's robot xacro that includes cozmo.macro.xacro, has a property and a macro of
    common names of its own (body_mass, track_width, head_mass; box_inertial) and puts two
    Cozmos on a table. The macro file's constants and helper macros were global: the
    include set the user's body_mass to 0.081 and replaced their box_inertial (xacro
    failed: 'Invalid parameter'), and a head_mass of the user's gave Cozmo's head its mass."""
    user = tmp_path / "fleet.urdf.xacro"
    user.write_text(f"""<?xml version="1.0"?>
<robot name="fleet" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:property name="body_mass" value="5.0"/>
  <xacro:property name="track_width" value="0.5"/>
  <xacro:macro name="box_inertial" params="mass size">
    <inertial><mass value="${{mass}}"/>
      <inertia ixx="${{mass * size * size / 6}}" ixy="0" ixz="0" iyy="${{mass * size * size / 6}}" iyz="0"
               izz="${{mass * size * size / 6}}"/></inertial>
  </xacro:macro>
  <link name="table"><xacro:box_inertial mass="${{body_mass}}" size="1.0"/></link>
  <xacro:include filename="{XACRO.parent / 'cozmo.macro.xacro'}"/>
  <xacro:property name="head_mass" value="2.0"/>
  <xacro:cozmo prefix="robot1/" joint_prefix="robot1_"/>
  <xacro:cozmo prefix="robot2/" joint_prefix="robot2_"/>
  <joint name="robot1_mount" type="fixed"><parent link="table"/><child link="robot1/base_footprint"/>
    <origin xyz="0 ${{track_width}} 0.8"/></joint>
  <joint name="robot2_mount" type="fixed"><parent link="table"/><child link="robot2/base_footprint"/>
    <origin xyz="0 ${{-track_width}} 0.8"/></joint>
  <link name="crate"><xacro:box_inertial mass="${{body_mass}}" size="0.3"/></link>
  <joint name="crate_joint" type="fixed"><parent link="table"/><child link="crate"/></joint>
</robot>
""")
    fleet = UrdfModel.from_xml(robot_description(path=user))
    assert fleet.masses["table"] == fleet.masses["crate"] == 5.0
    assert fleet.inertias["crate"][0] == pytest.approx(5.0 * 0.09 / 6)
    assert fleet.transform("table", "robot1/base_footprint").translation == pytest.approx((0, 0.5, 0.8))
    for prefix in ("robot1/", "robot2/"):
        for link in model.links:
            assert fleet.masses.get(prefix + link) == model.masses.get(link), prefix + link
            assert fleet.inertias.get(prefix + link) == model.inertias.get(link), prefix + link
            placed = fleet.transform(prefix + "base_footprint", prefix + link)
            assert placed.translation == pytest.approx(model.transform("base_footprint", link).translation,
                                                       abs=1e-12), prefix + link

def test_installed_copy_equals_the_source():
    # what the bring-up processes (ament index / venv share / checkout) is this file
    installed = package_share("cozmo_description") / "urdf" / "cozmo.urdf.xacro"
    stale = f"{installed} differs from the source: run ./dev setup (or colcon build)"
    assert installed.read_text() == XACRO.read_text(), stale
    assert (installed.parent / "cozmo.macro.xacro").read_text() == \
        (XACRO.parent / "cozmo.macro.xacro").read_text(), stale


@pytest.mark.ros  # a node: a DDS participant
def test_the_urdf_passes_as_a_command_line_parameter(urdf):
    """``--ros-args -p robot_description:="$(xacro cozmo.urdf.xacro)"`` (the description
    publisher's help, robot_state_publisher's usual recipe): rcl reads a ``-p`` value as
    YAML, in which ": " and " #" are syntax, so the URDF and its comments must hold none."""
    rclpy = require("rclpy")
    from rclpy.context import Context

    context = Context()
    rclpy.init(args=["test", "--ros-args", "-p", f"robot_description:={urdf}"], context=context)
    try:
        node = rclpy.create_node("urdf_on_the_command_line", context=context)
        try:
            given = node.declare_parameter("robot_description", "").value
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    # YAML folds the lines of a plain scalar: other white space, the same elements
    def elements(text):
        return [(e.tag, sorted(e.attrib.items())) for e in ET.fromstring(text).iter()]

    assert elements(given) == elements(urdf)


def test_a_broken_description_is_reported(tmp_path):
    broken = tmp_path / "broken.urdf.xacro"
    broken.write_text('<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="x">'
                      '<xacro:undefined_macro/></robot>')
    with pytest.raises(DescriptionError, match="xacro failed"):
        robot_description(path=broken)
    with pytest.raises(DescriptionError, match="one root"):
        UrdfModel.from_xml('<robot name="x"><link name="a"/><link name="b"/></robot>')
    with pytest.raises(DescriptionError, match="unknown link"):
        UrdfModel.from_xml('<robot name="x"><link name="a"/><joint name="j" type="fixed">'
                           '<parent link="a"/><child link="c"/></joint></robot>')


# ------------------------------------------------------------------ the driver's names


def test_actuated_joints_are_what_the_driver_publishes(model):
    assert {j.name for j in model.actuated_joints()} == set(ACTUATED)
    # the driver's joint_states names (checked in its source: the module that publishes
    # joint_states names them literally)
    source = (ROOT / "cozmo_driver" / "ros" / "driver_streams.py").read_text()
    assert re.search(r'\[\s*"head_joint"\s*,\s*"lift_joint"\s*\]', source)


def test_frames_are_the_driver_defaults(model):
    for parameter in ("base_frame", "base_link_frame", "imu_frame", "camera_frame"):
        assert _frame_default(parameter) in model.links, parameter
    assert model.parent_joint(_frame_default("base_link_frame")).parent == \
        _frame_default("base_frame")
    # the odometry frame is the driver's, not the robot's
    assert _frame_default("odom_frame") not in model.links


def test_fixed_joints_are_fixed_and_treads_do_not_turn(model):
    fixed = {j.name for j in model.fixed_joints()}
    assert {"base_joint", "left_tread_joint", "right_tread_joint", "imu_joint",
            "camera_joint", "camera_optical_joint"} == fixed


# ------------------------------------------------------------------ robot_geometry constants


def test_head_joint_limits_and_axis(model):
    head = model.joints["head_joint"]
    assert head.type == "revolute"
    assert head.lower == pytest.approx(geo.HEAD_MIN_ANGLE_RAD, abs=1e-12)
    assert head.upper == pytest.approx(geo.HEAD_MAX_ANGLE_RAD, abs=1e-12)
    assert head.velocity == pytest.approx(geo.HEAD_MAX_SPEED_RADPS)
    # positive = looking up: the camera's forward axis gains +z
    up = model.transform("base_link", "camera_link", {"head_joint": 0.3}).rotate((1, 0, 0))
    assert up[2] == pytest.approx(math.sin(0.3))


def test_lift_joint_limits_are_robot_geometry_angles(model):
    lift = model.joints["lift_joint"]
    assert lift.type == "revolute"
    assert lift.lower == pytest.approx(geo.LIFT_MIN_ANGLE_RAD, abs=1e-12)
    assert lift.upper == pytest.approx(geo.LIFT_MAX_ANGLE_RAD, abs=1e-12)
    assert lift.velocity == pytest.approx(geo.LIFT_MAX_SPEED_RADPS)


def test_lift_pivot_and_arm_are_robot_geometry_dimensions(model):
    pivot = model.transform("base_footprint", "lift_link")
    assert pivot.translation[2] == pytest.approx(geo.LIFT_PIVOT_HEIGHT_M, abs=1e-12)
    plate = model.joints["lift_plate_joint"]
    assert plate.parent == "lift_link"
    assert plate.origin.translation == pytest.approx((geo.LIFT_ARM_LENGTH_M, 0.0, 0.0), abs=1e-12)


@pytest.mark.parametrize("height", [geo.LIFT_MIN_HEIGHT_M, 0.05, 0.07, geo.LIFT_MAX_HEIGHT_M])
def test_lift_height_relation_is_robot_geometrys(model, height):
    angle = geo.lift_height_to_angle(height)
    plate = model.transform("base_footprint", "lift_plate_link", {"lift_joint": angle})
    assert plate.translation[2] == pytest.approx(height, abs=1e-12)
    assert plate.translation[2] == pytest.approx(geo.lift_angle_to_height(angle), abs=1e-12)
    # the forks stay level (mimic multiplier -1) ...
    assert _same_rotation(plate.rotation, (0.0, 0.0, 0.0, 1.0))
    # ... and the parallel arm's end meets the plate's top: the linkage closes
    upper = model.transform("base_footprint", "lift_upper_arm_link", {"lift_joint": angle})
    upper_end = upper.apply((geo.LIFT_ARM_LENGTH_M, 0.0, 0.0))
    spacing = upper.translation[2] - model.transform("base_footprint", "lift_link").translation[2]
    assert spacing > 0
    assert upper_end == pytest.approx(
        (plate.translation[0], plate.translation[1], plate.translation[2] + spacing), abs=1e-12)


def test_mimic_joints_follow_lift_joint(model):
    mimics = {j.name: j.mimic for j in model.joints.values() if j.mimic is not None}
    assert set(mimics) == {"lift_upper_arm_joint", "lift_plate_joint"}
    assert all(m.joint == "lift_joint" for m in mimics.values())
    assert mimics["lift_upper_arm_joint"].multiplier == 1.0
    assert mimics["lift_plate_joint"].multiplier == -1.0
    assert all(m.offset == 0.0 for m in mimics.values())
    plate = model.joints["lift_plate_joint"]
    assert (plate.lower, plate.upper) == pytest.approx((-geo.LIFT_MAX_ANGLE_RAD,
                                                        -geo.LIFT_MIN_ANGLE_RAD))


def test_treads_are_the_track_width_apart(model):
    left = model.transform("base_footprint", "left_tread_link").translation
    right = model.transform("base_footprint", "right_tread_link").translation
    assert left[1] - right[1] == pytest.approx(geo.TRACK_WIDTH_M, abs=1e-12)
    assert left[1] == pytest.approx(-right[1])
    # centred on base_footprint, the point the robot turns about and reports the pose of
    # (the driver's SyncTime sends a drive-centre offset of 0: docs/driver.md, Connection)
    assert left[0] == right[0] == pytest.approx(0.0, abs=1e-12)
    # the treads touch the ground: their half height is base_link's height
    assert left[2] == pytest.approx(model.transform("base_footprint", "base_link").translation[2])


# ------------------------------------------------------------------ the simulator's camera


@pytest.mark.parametrize("head", [world.HEAD_ANGLE_MIN_RAD, -0.1, 0.0, 0.35,
                                  world.HEAD_ANGLE_MAX_RAD])
def test_camera_is_where_the_simulator_renders_from(model, head):
    camera = model.transform("base_footprint", "camera_optical_frame", {"head_joint": head})
    x_mm, y_mm, z_mm = world.camera_position(0.0, 0.0, 0.0, head)
    assert camera.translation == pytest.approx((x_mm / 1000.0, y_mm / 1000.0, z_mm / 1000.0),
                                               abs=1e-12)
    pivot = model.transform("base_footprint", "head_link")
    assert pivot.translation == pytest.approx((world.HEAD_PIVOT_X_MM / 1000.0, 0.0,
                                               world.HEAD_PIVOT_Z_MM / 1000.0), abs=1e-12)


@pytest.mark.parametrize("page", [DESCRIPTION / "urdf" / "cozmo.macro.xacro", ROOT / "docs" / "bringup.md"])
def test_the_camera_offset_the_frame_trees_quote_is_the_joints(model, page):
    line = next(line for line in page.read_text().splitlines() if re.search(r"camera_link\s+fixed,", line))
    found = re.search(r"([\d.]+) mm ahead of the pivot.*?([\d.]+) mm below", line)
    assert found, f"{page.name}: the frame tree's camera_link line gives no offset and drop: {line!r}"
    ahead, below = (float(v) / 1000.0 for v in found.groups())
    camera = model.transform("head_link", "camera_link").translation
    assert camera == pytest.approx((ahead, 0.0, -below), abs=1e-12), f"{page.name}: {line!r}"


def test_lift_pivot_is_the_simulators(model):
    pivot = model.transform("base_footprint", "lift_link").translation
    assert pivot[0] == pytest.approx(world.LIFT_PIVOT_X_MM / 1000.0, abs=1e-12)
    assert pivot[2] == pytest.approx(world.LIFT_PIVOT_Z_MM / 1000.0, abs=1e-12)
    assert world.LIFT_ARM_MM / 1000.0 == pytest.approx(geo.LIFT_ARM_LENGTH_M)


def test_camera_optical_frame_is_optical(model):
    joint = model.joints["camera_optical_joint"]
    assert joint.parent == "camera_link"
    assert _same_rotation(joint.origin.rotation, quaternion_from_rpy(-math.pi / 2, 0, -math.pi / 2))
    optical = model.transform("base_link", "camera_optical_frame")  # head level
    assert optical.rotate((0, 0, 1)) == pytest.approx((1, 0, 0), abs=1e-12)   # z forward
    assert optical.rotate((1, 0, 0)) == pytest.approx((0, -1, 0), abs=1e-12)  # x right
    assert optical.rotate((0, 1, 0)) == pytest.approx((0, 0, -1), abs=1e-12)  # y down


def test_imu_has_base_link_axes(model):
    imu = model.transform("base_link", "imu_link")
    assert _same_rotation(imu.rotation, Transform().rotation)


def test_imu_sits_at_the_head_pivot(model):
    # the IMU is in the head (cozmo_driver/driver/sensors.py): the head's pivot is the point
    # of the head that does not move as it tilts
    imu = model.transform("base_link", "imu_link")
    pivot = model.transform("base_link", "head_link")
    assert imu.translation == pytest.approx(pivot.translation, abs=1e-12)


# ------------------------------------------------------------------ mass, inertia, looks


def test_mass_and_inertia_are_plausible(model):
    assert sum(model.masses.values()) == pytest.approx(0.150, abs=0.005)
    for link, (ixx, ixy, ixz, iyy, iyz, izz) in model.inertias.items():
        assert ixy == ixz == iyz == 0.0, link
        assert min(ixx, iyy, izz) > 0, link
        # triangle inequality of principal moments: a physical body
        assert ixx + iyy >= izz and iyy + izz >= ixx and ixx + izz >= iyy, link
    massless = {"base_footprint", "imu_link", "camera_optical_frame"}
    assert set(model.masses) == set(model.links) - massless


def test_every_visual_link_has_collision_and_colours(urdf):
    root = ET.fromstring(urdf)
    for link in root.findall("link"):
        if link.find("visual") is not None and link.get("name") != "camera_link":
            assert link.find("collision") is not None, link.get("name")
    colours = {m.get("name") for m in root.iter("material")}
    assert {"cozmo_white", "cozmo_grey", "cozmo_red", "cozmo_black"} <= colours
    face = [v for v in root.find("link[@name='head_link']").findall("visual")
            if v.find("material").get("name") == "cozmo_black"]
    assert face, "the face plate is black"


def test_overall_size_is_plausible(model, urdf):
    # height of the head's top with the head level, from the head box
    head = ET.fromstring(urdf).find("link[@name='head_link']/visual")
    size = [float(v) for v in head.find("geometry/box").get("size").split()]
    centre = [float(v) for v in head.find("origin").get("xyz").split()]
    top = model.transform("base_footprint", "head_link").translation[2] + centre[2] + size[2] / 2
    assert 0.055 <= top <= 0.065


# ------------------------------------------------------------------ install rules, RViz


def test_cmake_installs_urdf_meshes_and_rviz():
    text = (DESCRIPTION / "CMakeLists.txt").read_text()
    assert re.search(r"install\(\s*DIRECTORY\s+urdf\s+meshes\s+rviz", text)
    for directory in ("urdf", "meshes", "rviz"):
        assert any((DESCRIPTION / directory).iterdir()), directory


def test_rviz_config_shows_the_robot():
    yaml = require("yaml", "PyYAML, an exec_depend of package.xml")
    config = yaml.safe_load(RVIZ.read_text())
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "odom"
    displays = {d["Class"]: d for d in manager["Displays"]}
    assert {"rviz_default_plugins/RobotModel", "rviz_default_plugins/TF",
            "rviz_default_plugins/Odometry", "rviz_default_plugins/Image",
            "rviz_default_plugins/Marker"} <= set(displays)
    robot = displays["rviz_default_plugins/RobotModel"]
    assert robot["Description Source"] == "Topic"
    assert robot["Description Topic"]["Value"] == "/robot_description"
    # robot_description is latched: a volatile subscriber would miss it
    assert robot["Description Topic"]["Durability Policy"] == "Transient Local"
    odom = displays["rviz_default_plugins/Odometry"]
    assert odom["Topic"]["Value"] == "/odom" and odom["Keep"] == 100
    image = displays["rviz_default_plugins/Image"]
    assert image["Topic"]["Value"] == "/camera/image_raw"
    # the driver publishes images best effort (sensor data QoS)
    assert image["Topic"]["Reliability Policy"] == "Best Effort"
    # the battery: the driver's text marker (RViz has no display for BatteryState)
    battery = displays["rviz_default_plugins/Marker"]
    assert battery["Topic"]["Value"] == "/battery_marker" and battery["Enabled"]
    # the driver publishes it reliable, volatile: the display must not ask for more
    assert battery["Topic"]["Reliability Policy"] == "Reliable"
    assert battery["Topic"]["Durability Policy"] == "Volatile"
    assert all(d["Class"].startswith("rviz_default_plugins/") for d in manager["Displays"])
