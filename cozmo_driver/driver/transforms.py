"""A small tf lookup without tf2_ros: the latest transform of every frame, and chains of them.

The wheel venv (ROS 2 from PyPI) has no tf2_ros, and the driver needs only one
thing from tf: where a goal given in some frame (``map``, ``base_link`` of
another robot, a marker...) lies in its ``odom`` frame. :class:`TransformBuffer`
keeps, for every child frame, the latest transform to its parent as it came on
``/tf`` or ``/tf_static`` (feed it with :meth:`TransformBuffer.set`), and
:meth:`TransformBuffer.lookup` composes the chain between two frames through
their common ancestor.

Differences from tf2, chosen for what the driver needs (a goal is converted
once, when it arrives):

* the latest transform is used whatever the requested time; there is no
  interpolation and no history (tf2 would wait for, or interpolate at, the
  stamp). Fine for static and slowly changing frames such as ``map -> odom``;
* ``/tf`` transforms older than ``max_age`` seconds (if given) are treated as
  missing, so a frame whose publisher stopped does not linger for ever; static
  ones never age;
* a frame has one parent: a later transform with another parent replaces the
  earlier one (tf2 would warn about it).

Transforms are full 3D rigid transforms (translation, unit quaternion x, y, z,
w) so that a chain through tilted frames is right; :func:`pose_to_2d` projects
a result onto the ground plane. Pure: no ROS, no clock of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from typing import Dict, List, Optional, Tuple

from ..errors import UsageError

__all__ = ["Transform", "TransformBuffer", "TransformError", "compose", "invert",
           "transform_point", "pose_to_2d", "yaw_of_quaternion", "quaternion_from_rpy"]

Quaternion = Tuple[float, float, float, float]
Vector = Tuple[float, float, float]


class TransformError(UsageError, LookupError):
    """No chain of known transforms links the two frames; the message says which is missing
    (or too old)."""


@dataclass(frozen=True)
class Transform:
    """Pose of a child frame in its parent frame: ``p_parent = R * p_child + t``. Also the
    robot description's joint and link transforms (:mod:`cozmo_driver.description`)."""

    translation: Vector = (0.0, 0.0, 0.0)
    rotation: Quaternion = (0.0, 0.0, 0.0, 1.0)

    def __mul__(self, other: "Transform") -> "Transform":
        """Composition: ``(a * b)(p) == a(b(p))`` (:func:`compose`)."""
        return compose(self, other)

    def inverse(self) -> "Transform":
        return invert(self)

    def apply(self, point: Vector) -> Vector:
        """A point of the child frame in the parent frame (:func:`transform_point`)."""
        return transform_point(self, point)

    def rotate(self, vector: Vector) -> Vector:
        """A direction of the child frame in the parent frame."""
        return _rotate(self.rotation, vector)


IDENTITY = Transform()


def _qmul(a: Quaternion, b: Quaternion) -> Quaternion:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


def _normalized(q: Quaternion) -> Quaternion:
    n = math.sqrt(sum(c * c for c in q))
    if not math.isfinite(n) or n < 1e-9:
        raise ValueError(f"quaternion {q} has no orientation (norm {n})")
    return (q[0] / n, q[1] / n, q[2] / n, q[3] / n)


def _rotate(q: Quaternion, v: Vector) -> Vector:
    x, y, z, w = q
    vx, vy, vz = v
    # v' = v + 2 w (q x v) + 2 q x (q x v)
    cx, cy, cz = y * vz - z * vy, z * vx - x * vz, x * vy - y * vx
    ccx, ccy, ccz = y * cz - z * cy, z * cx - x * cz, x * cy - y * cx
    return (vx + 2.0 * (w * cx + ccx), vy + 2.0 * (w * cy + ccy), vz + 2.0 * (w * cz + ccz))


def compose(a: Transform, b: Transform) -> Transform:
    """``a * b``: ``b`` (child in a middle frame) seen from ``a``'s parent."""
    r = _rotate(a.rotation, b.translation)
    t = (a.translation[0] + r[0], a.translation[1] + r[1], a.translation[2] + r[2])
    return Transform(t, _qmul(a.rotation, b.rotation))


def invert(a: Transform) -> Transform:
    x, y, z, w = a.rotation
    q = (-x, -y, -z, w)
    t = _rotate(q, a.translation)
    return Transform((-t[0], -t[1], -t[2]), q)


def transform_point(a: Transform, p: Vector) -> Vector:
    r = _rotate(a.rotation, p)
    return (a.translation[0] + r[0], a.translation[1] + r[1], a.translation[2] + r[2])


def quaternion_from_rpy(roll: float, pitch: float, yaw: float) -> Quaternion:
    """(x, y, z, w) of fixed-axis roll (x), pitch (y), yaw (z), applied in that order
    (REP-103 and URDF's rpy: R = Rz(yaw) Ry(pitch) Rx(roll))."""
    cr, sr = math.cos(roll / 2.0), math.sin(roll / 2.0)
    cp, sp = math.cos(pitch / 2.0), math.sin(pitch / 2.0)
    cy, sy = math.cos(yaw / 2.0), math.sin(yaw / 2.0)
    return (sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
            cr * cp * cy + sr * sp * sy)


def yaw_of_quaternion(q: Quaternion) -> float:
    """Heading (rad) of the frame's x axis projected on the ground plane."""
    x, y, z, w = q
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def pose_to_2d(a: Transform) -> Tuple[float, float, float]:
    """(x, y, yaw) of a 3D pose on the ground plane."""
    return a.translation[0], a.translation[1], yaw_of_quaternion(a.rotation)


@dataclass
class _Entry:
    parent: str
    transform: Transform
    stamp: float
    static: bool


class TransformBuffer:
    """The latest transform of every child frame. See the module docstring."""

    def __init__(self, max_age: Optional[float] = None, max_depth: int = 64) -> None:
        self.max_age = max_age
        self.max_depth = max_depth
        self._frames: Dict[str, _Entry] = {}

    @staticmethod
    def _name(frame: str) -> str:
        return frame.lstrip("/")

    def set(self, parent: str, child: str, translation: Vector, rotation: Quaternion,
            now: float = 0.0, static: bool = False) -> bool:
        """Record ``child``'s pose in ``parent``; False (ignored) if it is unusable."""
        parent, child = self._name(parent), self._name(child)
        if not parent or not child or parent == child:
            return False
        if not all(math.isfinite(c) for c in translation):
            return False
        try:
            q = _normalized(tuple(float(c) for c in rotation))  # type: ignore[arg-type]
        except ValueError:
            return False
        self._frames[child] = _Entry(parent, Transform(tuple(float(c) for c in translation), q),
                                     now, static)
        return True

    def frames(self) -> List[str]:
        """Every frame known, parents included, sorted."""
        names = set(self._frames)
        names.update(e.parent for e in self._frames.values())
        return sorted(names)

    def _usable(self, entry: _Entry, now: Optional[float]) -> bool:
        return entry.static or self.max_age is None or now is None or now - entry.stamp <= self.max_age

    def _chain(self, frame: str, now: Optional[float],
               stale: Optional[List[Tuple[str, _Entry]]] = None) -> List[Tuple[str, Transform]]:
        """[(frame, its pose in the root)] from ``frame`` up to the root of its tree (or up
        to a transform older than ``max_age``, appended to ``stale`` as (child, entry))."""
        out = [(frame, IDENTITY)]
        seen = {frame}
        pose = IDENTITY
        current = frame
        for _ in range(self.max_depth):
            entry = self._frames.get(current)
            if entry is None:
                return out
            if not self._usable(entry, now):
                if stale is not None:
                    stale.append((current, entry))
                return out
            # pose of `frame` in entry.parent = T(parent<-current) * pose(current)
            pose = compose(entry.transform, pose)
            current = entry.parent
            if current in seen:
                return out  # a loop: stop at the last good ancestor
            seen.add(current)
            out.append((current, pose))
        return out

    def _linked(self, target: str, source: str) -> bool:
        """Whether a chain links the two frames when no transform is too old."""
        try:
            self.lookup(target, source)
        except TransformError:
            return False
        return True

    def lookup(self, target: str, source: str, now: Optional[float] = None) -> Transform:
        """The pose of frame ``source`` in frame ``target`` (maps ``source`` coordinates
        into ``target``), or :class:`TransformError`."""
        target, source = self._name(target), self._name(source)
        if target == source:
            return IDENTITY
        stale: List[Tuple[str, _Entry]] = []
        up_source = self._chain(source, now, stale)
        up_target = self._chain(target, now, stale)
        in_root_of_source = {name: pose for name, pose in up_source}
        for name, target_in_ancestor in up_target:
            source_in_ancestor = in_root_of_source.get(name)
            if source_in_ancestor is not None:
                return compose(invert(target_in_ancestor), source_in_ancestor)
        if stale and self._linked(target, source):
            # the chain exists but for a transform whose publisher may have stopped
            child, entry = stale[0]
            raise TransformError(f"the transform '{entry.parent}' -> '{child}' on /tf is "
                                 f"{now - entry.stamp:.1f} s old (older than {self.max_age:g} s): "
                                 f"has its publisher stopped?")
        known = ", ".join(self.frames()) or "none"
        if source not in self._frames and source not in {e.parent for e in self._frames.values()}:
            raise TransformError(f"frame '{source}' is unknown (no transform on /tf or /tf_static "
                                 f"names it; known frames: {known})")
        raise TransformError(f"no chain of transforms links frame '{source}' to '{target}' "
                             f"(known frames: {known})")
