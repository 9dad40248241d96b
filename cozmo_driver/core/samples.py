"""What the driver core hands out: typed samples in SI units, and the output interface.

Every sample is a slotted dataclass (cheap to make: the core makes a few per
robot state, 33 a second per robot) whose attribute names say their unit, and
which carries its stamp both as nanoseconds and as ROS's (sec, nanosec) pair.
Conventions are REP-103: metres, radians, x forward, y left, z up.

:class:`DriverOutput` is what a front-end (the ROS node) implements to receive
them; :class:`RecordingOutput` keeps everything, for tests and scripts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Any, Callable, List, Optional, Tuple

from ..client import LinkState
from ..driver.events import RobotEventData
from ..driver.sensors import STATUS_FLAG_NAMES

__all__ = ["OdomSample", "ImuSample", "JointSample", "StatusSample", "StateSample",
           "BatterySample", "LinkSample", "CameraFrame", "DriverOutput", "RecordingOutput"]


@dataclass(slots=True)
class OdomSample:
    """The continuous odometry pose and the body twist, with their diagonal covariances
    (the x, y and yaw entries: indices 0, 7 and 35 of the 6x6 matrices)."""

    stamp_ns: int
    sec: int
    nanosec: int
    x_m: float
    y_m: float
    yaw_rad: float
    qz: float
    qw: float
    pose_var_x: float
    pose_var_y: float
    pose_var_yaw: float
    v_mps: float
    w_radps: float
    twist_var_vx: float
    twist_var_vy: float
    twist_var_wz: float


@dataclass(slots=True)
class ImuSample:
    """Orientation (quaternion x, y, z, w; yaw the odometry's), angular velocity (rad/s)
    and specific force (m/s^2), body axes."""

    sec: int
    nanosec: int
    qx: float
    qy: float
    qz: float
    qw: float
    wx_radps: float
    wy_radps: float
    wz_radps: float
    ax_mps2: float
    ay_mps2: float
    az_mps2: float
    yaw_var: float  # rad^2: the odometry yaw's (OdomSample.pose_var_yaw)
    roll_var: float  # rad^2 (orientation_variances)
    pitch_var: float
    wy_var: float  # (rad/s)^2, (m/s^2)^2: large while the head moves (imu_from_state)
    ax_var: float
    az_var: float


@dataclass(slots=True)
class JointSample:
    sec: int
    nanosec: int
    head_rad: float
    lift_rad: float


#: The robot's status: one bool per flag (the names of cozmo_interfaces/RobotStatus), the
#: raw flag word, the raw cliff and touch sensors, the path segment (-1: none), the
#: battery voltage and the orientation (cozmo_driver.driver.orientation.Orientation).
StatusSample = make_dataclass(
    "StatusSample",
    [("sec", int), ("nanosec", int)] + [(name, bool) for name, _ in STATUS_FLAG_NAMES]
    + [("status_flags", int), ("cliff_0", int), ("cliff_1", int), ("cliff_2", int),
       ("cliff_3", int), ("backpack_touch", int), ("path_segment", int), ("battery_v", float),
       ("orientation", int)],
    slots=True)
StatusSample.__module__ = __name__


class _MadeOnRead:
    """A part of a :class:`StateSample`: made by ``parts.<name>()`` when first read, then
    kept in the slot ``_<name>``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, "_" + name

    def __get__(self, sample: Any, owner: Optional[type] = None) -> Any:
        if sample is None:
            return self
        value = getattr(sample, self.slot)
        if value is None:
            value = getattr(sample._parts, self.name)()
            setattr(sample, self.slot, value)
        return value


class StateSample:
    """Everything one robot state means. ``odom`` is made with the sample; ``imu``,
    ``joints`` and ``status`` when first read, by ``parts`` (anything with ``imu()``,
    ``joints()`` and ``status()`` methods), for a front-end reads only those its
    subscribers want. Each is made at most once."""

    __slots__ = ("odom", "_parts", "_imu", "_joints", "_status")
    imu = _MadeOnRead()      # ImuSample
    joints = _MadeOnRead()   # JointSample
    status = _MadeOnRead()   # StatusSample

    def __init__(self, odom: OdomSample, parts: Any) -> None:
        self.odom = odom
        self._parts = parts
        self._imu = self._joints = self._status = None

    def __repr__(self) -> str:
        return (f"StateSample(odom={self.odom!r}, imu={self.imu!r}, joints={self.joints!r}, "
                f"status={self.status!r})")


@dataclass(slots=True)
class BatterySample:
    stamp_ns: int
    voltage_v: float
    percentage: float          # 0..1, NaN when the voltage is not finite
    supply_status: str         # CHARGING, FULL, NOT_CHARGING or DISCHARGING


@dataclass(slots=True)
class LinkSample:
    """The link's state and counters (rtt NaN when unknown)."""

    state: LinkState
    rtt_s: float = float("nan")
    datagrams_sent: int = 0
    datagrams_received: int = 0
    retransmissions: int = 0
    malformed_dropped: int = 0
    wrong_source_dropped: int = 0


@dataclass(slots=True)
class CameraFrame:
    """One camera frame; what it is converted to is computed on first use and kept.

    :meth:`jpeg` is the frame as a JPEG at its nominal size (a colour frame, which the
    robot codes at half width, is rebuilt at full width); :meth:`pixels` is it decoded:
    ``(bytes, width, height, channels)``. Either returns None when the frame does not
    convert (the core has warned)."""

    stamp_ns: int
    sec: int
    nanosec: int
    image_id: int
    width: int
    height: int
    _convert: Callable[["CameraFrame", bool, bool], None]
    _image: Any = None  # what the robot sent (the core's, for _convert)
    _coded: Optional[bytes] = None  # the JPEG as coded by the robot
    _jpeg: Optional[bytes] = None
    _pixels: Optional[Tuple[bytes, int, int, int]] = None
    _tried: int = 0  # bit 1: jpeg attempted, bit 2: pixels attempted

    def jpeg(self) -> Optional[bytes]:
        if not self._tried & 1:
            self._convert(self, True, False)
        return self._jpeg

    def pixels(self) -> Optional[Tuple[bytes, int, int, int]]:
        if not self._tried & 2:
            self._convert(self, False, True)
        return self._pixels


class DriverOutput:
    """What the driver core calls (from the robot client's I/O thread, except where
    said). Every method has a default that ignores the call: implement what you use."""

    def stamp_ns(self) -> int:
        """The time to stamp samples with, in nanoseconds."""
        import time
        return time.time_ns()

    def robot_time(self) -> bool:
        """Whether samples are stamped with the robot's own times mapped to
        :meth:`stamp_ns`'s clock (:mod:`cozmo_driver.driver.stamps`); False: with
        :meth:`stamp_ns` as they arrive."""
        return True

    def on_state(self, sample: StateSample) -> None:
        """One robot state (only while the core is active)."""

    def on_battery(self, sample: BatterySample) -> None:
        """Once a second while active."""

    def on_events(self, stamp_ns: int, events: List[RobotEventData]) -> None:
        """Robot events (status-flag edges, pokes, falls, button), while active; those that came
        between a new robot client's link opening and the activation, at it (held_events)."""

    def on_cliff_edge(self, stamp_ns: int, edge: bool) -> None:
        """The cliff sensor found an edge of the floor the robot stands on (True; stamped
        as the state that showed it), or no longer sees one (False: the floor again, or
        the robot off its treads); while active, on each change."""

    def on_image(self, frame: CameraFrame) -> None:
        """A complete camera frame (while active and the camera is enabled)."""

    def on_camera_info_changed(self) -> None:
        """The calibration changed: camera info made before is stale."""

    def on_robot_info(self, info: Any) -> None:
        """The robot's facts (client RobotInfo), at each connection."""

    def on_link(self, sample: LinkSample) -> None:
        """The link changed state (also called by the front-end's own reports)."""

    def hand_over(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the front-end's own thread (its executor); the default
        runs it at once."""
        fn(*args)

    def note(self, level: int, text: str) -> None:
        """A line for the operator, at ``logging`` level ``level``."""

    def say_held_back(self) -> None:
        """Say the front-end's own lines held back by a throttle, now: the core calls it
        where it says its own, before a line that changes what they describe ("activated",
        "connected again", "lost the robot")."""


@dataclass
class RecordingOutput(DriverOutput):
    """Keeps every sample, event, image and log line (tests, scripts)."""

    states: List[StateSample] = field(default_factory=list)
    batteries: List[BatterySample] = field(default_factory=list)
    events: List[RobotEventData] = field(default_factory=list)
    images: List[CameraFrame] = field(default_factory=list)
    cliff_edges: List[Tuple[int, bool]] = field(default_factory=list)
    infos: List[Any] = field(default_factory=list)
    links: List[LinkSample] = field(default_factory=list)
    lines: List[Tuple[int, str]] = field(default_factory=list)
    camera_info_changes: int = 0
    clock_ns: Optional[Callable[[], int]] = None

    def stamp_ns(self) -> int:
        return self.clock_ns() if self.clock_ns is not None else DriverOutput.stamp_ns(self)

    def on_state(self, sample: StateSample) -> None:
        self.states.append(sample)

    def on_battery(self, sample: BatterySample) -> None:
        self.batteries.append(sample)

    def on_events(self, stamp_ns: int, events: List[RobotEventData]) -> None:
        self.events.extend(events)

    def on_cliff_edge(self, stamp_ns: int, edge: bool) -> None:
        self.cliff_edges.append((stamp_ns, edge))

    def on_image(self, frame: CameraFrame) -> None:
        self.images.append(frame)

    def on_camera_info_changed(self) -> None:
        self.camera_info_changes += 1

    def on_robot_info(self, info: Any) -> None:
        self.infos.append(info)

    def on_link(self, sample: LinkSample) -> None:
        self.links.append(sample)

    def note(self, level: int, text: str) -> None:
        self.lines.append((level, text))

    def said(self, text: str, level: Optional[int] = None) -> bool:
        return any(text in line and (level is None or lvl == level) for lvl, line in self.lines)

