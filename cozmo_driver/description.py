"""The robot description: where it is, xacro to URDF, and its kinematics. Pure.

* :func:`package_share` finds a package's share directory: through the ament
  index (a real install, or the wheel venv with ``AMENT_PREFIX_PATH`` set),
  then ``<sys.prefix>/share/<package>`` (the wheel venv, nothing set), then
  the source checkout (this repository's layout mirrors the share layout:
  ``config/`` at the root, ``cozmo_description/urdf``).
* :func:`robot_description` runs xacro on ``cozmo_description/urdf/cozmo.urdf.xacro``.
* :class:`UrdfModel` parses a URDF (``xml.etree``) into links and joints with
  their origins, axes, limits and mimic relations, and computes joint
  transforms (:class:`Transform`: translation and unit quaternion x, y, z, w).
  The description publisher (:mod:`cozmo_driver.ros.description_publisher`)
  and the tests use it; it does what robot_state_publisher does with KDL, for
  the joint types a URDF has (fixed, revolute, continuous, prismatic).

No ROS imports except the optional ament index lookup.
"""

from __future__ import annotations

import math
import os
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from .driver.transforms import Quaternion, Transform, Vector, quaternion_from_rpy
from .errors import ConfigurationError

__all__ = [
    "DESCRIPTION_PACKAGE",
    "XACRO_RELATIVE_PATH",
    "DescriptionError",
    "package_share",
    "xacro_path",
    "robot_description",
    "parent_links",
    "Transform",
    "Mimic",
    "Joint",
    "UrdfModel",
    "quaternion_from_rpy",
    "quaternion_from_axis_angle",
]

DESCRIPTION_PACKAGE = "cozmo_description"
XACRO_RELATIVE_PATH = "urdf/cozmo.urdf.xacro"

#: the repository root when running from a source checkout (editable install)
_SOURCE_ROOT = Path(__file__).resolve().parent.parent
#: where each package's share layout lives in the source checkout
_SOURCE_SHARE = {"cozmo_driver": _SOURCE_ROOT,
                 DESCRIPTION_PACKAGE: _SOURCE_ROOT / DESCRIPTION_PACKAGE}


class DescriptionError(ConfigurationError):
    """The description cannot be found, processed or parsed."""


# ---------------------------------------------------------------------------- locating files

def _ament_share(package: str) -> Optional[Path]:
    if not os.environ.get("AMENT_PREFIX_PATH"):
        return None
    try:
        from ament_index_python.packages import (PackageNotFoundError,
                                                 get_package_share_directory)
    except ImportError:
        return None
    try:
        return Path(get_package_share_directory(package))
    except (PackageNotFoundError, ValueError, LookupError):
        return None


def _is_package_dir(path: Path, package: str) -> bool:
    manifest = path / "package.xml"
    if not manifest.is_file():
        return False
    try:
        name = ET.parse(manifest).getroot().findtext("name")
    except ET.ParseError:
        return False
    return (name or "").strip() == package


def package_share(package: str) -> Path:
    """The share directory of ``package`` (see the module docstring for the order)."""
    found = _ament_share(package)
    if found is not None:
        return found
    candidates = [Path(sys.prefix) / "share" / package]
    if package in _SOURCE_SHARE:
        candidates.append(_SOURCE_SHARE[package])
    for candidate in candidates:
        if _is_package_dir(candidate, package):
            return candidate
    raise DescriptionError(
        f"package {package!r} not found: not in the ament index (AMENT_PREFIX_PATH), "
        f"not in {candidates[0]}, not in a source checkout; run ./dev setup, or source "
        "install/setup.bash on a ROS 2 install")


def xacro_path() -> Path:
    """The top-level xacro file of the robot description."""
    path = package_share(DESCRIPTION_PACKAGE) / XACRO_RELATIVE_PATH
    if not path.is_file():
        raise DescriptionError(f"{path} is missing (is cozmo_description built and installed?)")
    return path


def robot_description(prefix: str = "", joint_prefix: str = "",
                      path: Optional[os.PathLike] = None) -> str:
    """The URDF (XML text) of the robot, from xacro, with the given name prefixes."""
    try:
        import xacro
    except ImportError as exc:
        raise DescriptionError(
            f"xacro is not installed ({exc}): pip install xacro, or apt install "
            "ros-$ROS_DISTRO-xacro") from exc
    source = Path(path) if path is not None else xacro_path()
    try:
        document = xacro.process_file(str(source), mappings={"prefix": prefix,
                                                             "joint_prefix": joint_prefix})
    except Exception as exc:  # xacro raises XacroException and plain errors alike
        raise DescriptionError(f"xacro failed on {source}: {exc}") from exc
    return document.toprettyxml(indent="  ")


def parent_links(urdf: str) -> Dict[str, str]:
    """{child link: parent link} of every joint of a URDF (XML text): the frames to which the
    description's publisher (robot_state_publisher) gives a parent in tf. Only the joints
    are read (a description without links or joints has none)."""
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise DescriptionError(f"the robot description is not XML: {exc}") from exc
    parents: Dict[str, str] = {}
    for joint in root.findall("joint"):
        parent, child = joint.find("parent"), joint.find("child")
        if parent is not None and child is not None and parent.get("link") and child.get("link"):
            parents[child.get("link")] = parent.get("link")
    return parents


# ---------------------------------------------------------------------------- rigid transforms

# Transform and quaternion_from_rpy are the driver's (driver/transforms.py): full 3D, unit
# quaternion x, y, z, w, composed with *.


def quaternion_from_axis_angle(axis: Vector, angle: float) -> Quaternion:
    """Rotation by ``angle`` about the unit vector ``axis``."""
    s = math.sin(angle / 2.0)
    return (axis[0] * s, axis[1] * s, axis[2] * s, math.cos(angle / 2.0))


# ---------------------------------------------------------------------------- URDF model

@dataclass(frozen=True)
class Mimic:
    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class Joint:
    name: str
    type: str
    parent: str
    child: str
    origin: Transform
    axis: Vector = (1.0, 0.0, 0.0)
    lower: Optional[float] = None
    upper: Optional[float] = None
    velocity: Optional[float] = None
    effort: Optional[float] = None
    mimic: Optional[Mimic] = None

    @property
    def moving(self) -> bool:
        return self.type in ("revolute", "continuous", "prismatic")

    def transform(self, position: float = 0.0) -> Transform:
        """Parent-link to child-link transform at the joint ``position`` (rad or m)."""
        if self.type in ("revolute", "continuous"):
            return self.origin * Transform(rotation=quaternion_from_axis_angle(self.axis, position))
        if self.type == "prismatic":
            a = self.axis
            return self.origin * Transform(translation=(a[0] * position, a[1] * position,
                                                        a[2] * position))
        return self.origin


def _floats(text: Optional[str], count: int, default: float, what: str) -> Tuple[float, ...]:
    if text is None or not text.strip():
        return (default,) * count
    parts = text.split()
    if len(parts) != count:
        raise DescriptionError(f"{what}: expected {count} numbers, got {text!r}")
    try:
        return tuple(float(p) for p in parts)
    except ValueError as exc:
        raise DescriptionError(f"{what}: {exc}") from exc


def _origin(element: Optional[ET.Element], what: str) -> Transform:
    if element is None:
        return Transform()
    xyz = _floats(element.get("xyz"), 3, 0.0, f"{what} origin xyz")
    rpy = _floats(element.get("rpy"), 3, 0.0, f"{what} origin rpy")
    return Transform(xyz, quaternion_from_rpy(*rpy))


def _optional_float(element: Optional[ET.Element], name: str, what: str) -> Optional[float]:
    if element is None or element.get(name) is None:
        return None
    try:
        return float(element.get(name))
    except ValueError as exc:
        raise DescriptionError(f"{what}: {name}: {exc}") from exc


@dataclass
class UrdfModel:
    """Links, joints and the tree of a URDF."""

    name: str
    links: Tuple[str, ...]
    joints: Dict[str, Joint]
    materials: Dict[str, Tuple[float, ...]] = field(default_factory=dict)
    masses: Dict[str, float] = field(default_factory=dict)
    inertias: Dict[str, Tuple[float, ...]] = field(default_factory=dict)

    @classmethod
    def from_xml(cls, text: str) -> "UrdfModel":
        try:
            root = ET.fromstring(text)
        except ET.ParseError as exc:
            raise DescriptionError(f"the robot description is not XML: {exc}") from exc
        if root.tag != "robot":
            raise DescriptionError(f"the root element is <{root.tag}>, not <robot>")
        links: List[str] = []
        masses: Dict[str, float] = {}
        inertias: Dict[str, Tuple[float, ...]] = {}
        for link in root.findall("link"):
            name = link.get("name")
            if not name:
                raise DescriptionError("a <link> has no name")
            if name in links:
                raise DescriptionError(f"link {name!r} is defined twice")
            links.append(name)
            inertial = link.find("inertial")
            if inertial is not None:
                mass = _optional_float(inertial.find("mass"), "value", f"link {name} mass")
                if mass is not None:
                    masses[name] = mass
                inertia = inertial.find("inertia")
                if inertia is not None:
                    inertias[name] = tuple(float(inertia.get(k, "0"))
                                           for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
        joints: Dict[str, Joint] = {}
        for element in root.findall("joint"):
            name = element.get("name")
            kind = element.get("type")
            if not name or not kind:
                raise DescriptionError("a <joint> has no name or no type")
            if name in joints:
                raise DescriptionError(f"joint {name!r} is defined twice")
            if kind not in ("fixed", "revolute", "continuous", "prismatic"):
                raise DescriptionError(f"joint {name}: type {kind!r} is not supported")
            parent = element.find("parent")
            child = element.find("child")
            if parent is None or child is None or not parent.get("link") or not child.get("link"):
                raise DescriptionError(f"joint {name}: parent or child link missing")
            axis_element = element.find("axis")
            axis = (1.0, 0.0, 0.0) if axis_element is None else \
                _floats(axis_element.get("xyz"), 3, 0.0, f"joint {name} axis")
            norm = math.sqrt(sum(a * a for a in axis))
            if kind != "fixed":
                if norm == 0.0:
                    raise DescriptionError(f"joint {name}: zero axis")
                axis = (axis[0] / norm, axis[1] / norm, axis[2] / norm)
            limit = element.find("limit")
            mimic_element = element.find("mimic")
            mimic = None
            if mimic_element is not None:
                if not mimic_element.get("joint"):
                    raise DescriptionError(f"joint {name}: <mimic> names no joint")
                multiplier = _optional_float(mimic_element, "multiplier", f"joint {name} mimic")
                offset = _optional_float(mimic_element, "offset", f"joint {name} mimic")
                mimic = Mimic(mimic_element.get("joint"),
                              1.0 if multiplier is None else multiplier,
                              0.0 if offset is None else offset)
            joints[name] = Joint(
                name=name, type=kind, parent=parent.get("link"), child=child.get("link"),
                origin=_origin(element.find("origin"), f"joint {name}"), axis=axis,
                lower=_optional_float(limit, "lower", f"joint {name} limit"),
                upper=_optional_float(limit, "upper", f"joint {name} limit"),
                velocity=_optional_float(limit, "velocity", f"joint {name} limit"),
                effort=_optional_float(limit, "effort", f"joint {name} limit"),
                mimic=mimic)
        materials: Dict[str, Tuple[float, ...]] = {}
        for material in root.iter("material"):
            color = material.find("color")
            if material.get("name") and color is not None and color.get("rgba"):
                materials[material.get("name")] = _floats(color.get("rgba"), 4, 1.0, "material")
        model = cls(root.get("name", ""), tuple(links), joints, materials, masses, inertias)
        model._check()
        return model

    # --- structure

    def _check(self) -> None:
        link_set = set(self.links)
        children: Dict[str, str] = {}
        for joint in self.joints.values():
            for end in (joint.parent, joint.child):
                if end not in link_set:
                    raise DescriptionError(f"joint {joint.name} refers to unknown link {end!r}")
            if joint.child in children:
                raise DescriptionError(f"link {joint.child!r} has two parent joints")
            children[joint.child] = joint.name
            if joint.mimic is not None:
                master = self.joints.get(joint.mimic.joint)
                if master is None:
                    raise DescriptionError(f"joint {joint.name} mimics unknown joint "
                                           f"{joint.mimic.joint!r}")
                if master.mimic is not None:
                    raise DescriptionError(f"joint {joint.name} mimics {master.name}, "
                                           "itself a mimic joint")
        roots = [link for link in self.links if link not in children]
        if len(roots) != 1:
            raise DescriptionError(f"the description must have one root link, found {roots}")
        # every link reachable from the root (no cycles)
        reached = set(self.descendants(roots[0])) | {roots[0]}
        if reached != link_set:
            raise DescriptionError(
                f"links not connected to {roots[0]}: {sorted(link_set - reached)}")

    @property
    def root(self) -> str:
        child_links = {j.child for j in self.joints.values()}
        return next(link for link in self.links if link not in child_links)

    def parent_joint(self, link: str) -> Optional[Joint]:
        for joint in self.joints.values():
            if joint.child == link:
                return joint
        return None

    def descendants(self, link: str) -> List[str]:
        found: List[str] = []
        frontier = [link]
        while frontier:
            current = frontier.pop()
            for joint in self.joints.values():
                if joint.parent == current:
                    if joint.child in found:
                        raise DescriptionError(f"the joints form a cycle at {joint.child!r}")
                    found.append(joint.child)
                    frontier.append(joint.child)
        return found

    def chain(self, ancestor: str, link: str) -> List[Joint]:
        """The joints from ``ancestor`` down to ``link``, in order."""
        joints: List[Joint] = []
        current = link
        while current != ancestor:
            joint = self.parent_joint(current)
            if joint is None:
                raise DescriptionError(f"{link!r} is not below {ancestor!r}")
            joints.append(joint)
            current = joint.parent
        return list(reversed(joints))

    def fixed_joints(self) -> List[Joint]:
        return [j for j in self.joints.values() if not j.moving]

    def moving_joints(self) -> List[Joint]:
        return [j for j in self.joints.values() if j.moving]

    def actuated_joints(self) -> List[Joint]:
        """Moving joints that are not mimic joints: what joint_states must carry."""
        return [j for j in self.moving_joints() if j.mimic is None]

    # --- kinematics

    def with_mimics(self, positions: Mapping[str, float]) -> Dict[str, float]:
        """``positions`` plus the position of every mimic joint whose master is given."""
        result = {name: float(value) for name, value in positions.items() if name in self.joints}
        for joint in self.joints.values():
            if joint.mimic is not None and joint.mimic.joint in result:
                result[joint.name] = (result[joint.mimic.joint] * joint.mimic.multiplier
                                      + joint.mimic.offset)
        return result

    def transform(self, ancestor: str, link: str,
                  positions: Optional[Mapping[str, float]] = None) -> Transform:
        """Pose of ``link`` in ``ancestor`` (joints not given are at 0, mimics follow)."""
        values = self.with_mimics(positions or {})
        result = Transform()
        for joint in self.chain(ancestor, link):
            result = result * joint.transform(values.get(joint.name, 0.0))
        return result
