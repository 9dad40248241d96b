"""The driver node's publishing side: the core's samples as ROS messages.

:class:`DriverStreams` is the :class:`~cozmo_driver.core.DriverOutput` of
:class:`~cozmo_driver.ros.driver_node.CozmoDriverNode`. The core calls it on the
robot client's I/O thread, holding the core's lock, which the node also holds
while it creates or destroys the publishers. The per-state and camera messages
are ready-serialized templates (:mod:`cozmo_driver.ros.serialized`) bound by
field name to the samples' attributes (the ``*_BINDING`` tables below); a
stream nobody subscribes to is neither filled in nor published (the
subscriber counts are asked every 0.2 s, not per message). Rarer things (robot
facts, link changes, events) are published right there too: rclpy publishers
may be used from any thread.
"""

from __future__ import annotations

import logging
import math
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from builtin_interfaces.msg import Time as TimeMsg
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from cozmo_interfaces.msg import LinkStatus, RobotEvent, RobotInfo, RobotStatus
from geometry_msgs.msg import TransformStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import (BatteryState, CameraInfo, CompressedImage, Image, Imu, JointState,
                             PointCloud2, PointField)
from std_msgs.msg import Bool
from tf2_msgs.msg import TFMessage

from .. import robot_geometry as geo
from ..client import LinkState
from ..core import (CameraFrame, DriverOutput, ImuSample, JointSample, LinkSample, OdomSample,
                    StatusSample)
from ..driver.odometry import pose_covariance, twist_covariance
from ..driver.sensors import STATUS_FLAG_NAMES, imu_from_state
from .battery_marker import publish_battery_marker
from .serialized import Template

__all__ = ["DriverStreams", "ODOM_BINDING", "TF_BINDING", "IMU_BINDING", "JOINTS_BINDING",
           "STATUS_BINDING", "STAMP_BINDING", "RAW_IMAGE_BINDING", "RawImage", "STREAMS"]

STAMP_BINDING = {"header.stamp.sec": "sec", "header.stamp.nanosec": "nanosec"}
ODOM_BINDING = {**STAMP_BINDING,
                "pose.pose.position.x": "x_m", "pose.pose.position.y": "y_m",
                "pose.pose.orientation.z": "qz", "pose.pose.orientation.w": "qw",
                "pose.covariance[0]": "pose_var_x", "pose.covariance[7]": "pose_var_y",
                "pose.covariance[35]": "pose_var_yaw",
                "twist.twist.linear.x": "v_mps", "twist.twist.angular.z": "w_radps",
                "twist.covariance[0]": "twist_var_vx", "twist.covariance[7]": "twist_var_vy",
                "twist.covariance[35]": "twist_var_wz"}
TF_BINDING = {"transforms[0].header.stamp.sec": "sec",
              "transforms[0].header.stamp.nanosec": "nanosec",
              "transforms[0].transform.translation.x": "x_m",
              "transforms[0].transform.translation.y": "y_m",
              "transforms[0].transform.rotation.z": "qz", "transforms[0].transform.rotation.w": "qw"}
IMU_BINDING = {**STAMP_BINDING,
               "orientation.x": "qx", "orientation.y": "qy", "orientation.z": "qz",
               "orientation.w": "qw", "angular_velocity.x": "wx_radps",
               "angular_velocity.y": "wy_radps", "angular_velocity.z": "wz_radps",
               "linear_acceleration.x": "ax_mps2", "linear_acceleration.y": "ay_mps2",
               "linear_acceleration.z": "az_mps2", "orientation_covariance[0]": "roll_var",
               "orientation_covariance[4]": "pitch_var", "orientation_covariance[8]": "yaw_var",
               "angular_velocity_covariance[4]": "wy_var",
               "linear_acceleration_covariance[0]": "ax_var",
               "linear_acceleration_covariance[8]": "az_var"}
JOINTS_BINDING = {**STAMP_BINDING, "position[0]": "head_rad", "position[1]": "lift_rad"}
STATUS_BINDING = {**STAMP_BINDING, **{name: name for name, _ in STATUS_FLAG_NAMES},
                  "status_flags": "status_flags", "cliff_data_raw[0]": "cliff_0",
                  "cliff_data_raw[1]": "cliff_1", "cliff_data_raw[2]": "cliff_2",
                  "cliff_data_raw[3]": "cliff_3", "backpack_touch_sensor_raw": "backpack_touch",
                  "curr_path_segment": "path_segment", "battery_voltage": "battery_v",
                  "orientation": "orientation"}
RAW_IMAGE_BINDING = {**STAMP_BINDING, "height": "height", "width": "width", "step": "step"}
#: joint_states' names, in the order of a JointSample's positions (head, lift)
JOINT_NAMES = ["head_joint", "lift_joint"]
#: the streams filled in only for subscribers
STREAMS = ("odom", "tf", "imu", "joints", "status", "compressed", "image", "camera_info")
#: how often the subscriber counts and whether ROS time is active are asked again, ns
RECHECK_NS = 200_000_000
#: start-up: for this long from the first robot state after configure, and while no stream has a
#: subscriber yet, the counts are asked at every state (eight calls, about 20 us), so that the
#: first subscriber discovered gets the next state, not one up to RECHECK_NS later; ns
EAGER_NS = 5_000_000_000
#: the streams made of camera images: with camera_on_demand, the robot streams its camera only
#: while one of them has a subscriber (DriverCore.set_camera_wanted)
CAMERA_STREAMS = ("compressed", "image", "camera_info")
#: the camera stays on this long after its last subscriber went (a viewer restarting); ns
CAMERA_HOLD_NS = 2_000_000_000
#: LinkStatus' counters (kept in the released link_status: publish_released_link)
_LINK_COUNTERS = ("datagrams_sent", "datagrams_received", "retransmissions", "malformed_dropped",
                  "wrong_source_dropped")
_LINK_STATUS = {LinkState.DISCONNECTED: LinkStatus.DISCONNECTED,
                LinkState.CONNECTING: LinkStatus.CONNECTING,
                LinkState.INITIALIZING: LinkStatus.CONNECTING,
                LinkState.READY: LinkStatus.CONNECTED, LinkState.LOST: LinkStatus.LOST}


@dataclass(slots=True)
class RawImage:
    """A decoded frame's stamp and geometry, for the camera/image_raw template."""

    sec: int
    nanosec: int
    height: int
    width: int
    step: int


def time_msg(ns: int) -> TimeMsg:
    msg = TimeMsg()
    msg.sec, msg.nanosec = divmod(ns, 1_000_000_000)
    return msg


def _publish_all(messages: List[Tuple[Any, Any]]) -> None:
    for publisher, msg in messages:
        publisher.publish(msg)


class _Level:
    """A robot state standing level and still (every field 0): the IMU's constant parts."""

    def __getattr__(self, name: str) -> float:
        return 0.0


class DriverStreams(DriverOutput):
    """See the module docstring. ``node`` is the driver node (publishers in ``node._pub``,
    frames from ``node._frame``, logging through ``node._log``)."""

    def __init__(self, node: Any, hand_over: Callable[..., None]) -> None:
        self.node = node
        self._hand_over = hand_over
        self.templates: Dict[str, Template] = {}
        self.image_templates: Dict[str, Template] = {}
        self.info_cache: Dict[Tuple[int, int], Template] = {}
        self.battery_msg: Optional[BatteryState] = None  # the latest, for battery_marker
        self._wanted: Dict[str, bool] = {}
        # on time.monotonic_ns (see wanted): the counts' next asking, start-up's end, and when
        # a camera stream last had a subscriber
        self.wanted_until = 0
        self.eager_until: Optional[int] = None  # see EAGER_NS
        self._camera_seen_ns: Optional[int] = None
        #: with camera_with_state: the camera frame's (publisher, message) pairs waiting for
        #: the next robot state
        self._image_waiting: Optional[List[Tuple[Any, Any]]] = None
        #: set once a robot state has been handed to the publishers since build()
        self.first_state = threading.Event()
        self._estop_sent: Optional[bool] = None  # what emergency_stop/engaged last said
        self._link_msg: Optional[LinkStatus] = None  # the last link_status (publish_released_link)
        #: on_link runs on the I/O thread and the executor: its read of the emergency stop, the
        #: comparison and the publishing are one step (the last published is the flag's value)
        self._estop_lock = threading.Lock()
        self._held: Optional[List[Tuple[int, str]]] = None  # log lines held back (hold_notes)
        self._notes_lock = threading.Lock()
        self._ros_time = False
        self._clock_checked_until = 0
        self._tf_stamp_ns: Optional[int] = None  # the last odom -> base_footprint's
        self._tf_count = 0  # /tf's subscribers at the last count (wanted)
        #: a consumer of the joint positions in this process (``cozmo_stack``'s description
        #: publisher), called with every state on the I/O thread: ``fn(JOINT_NAMES,
        #: (head_rad, lift_rad), sec, nanosec)``; joint_states is still published for
        #: subscribers (it then has none of this process)
        self.local_joints: Optional[Callable[[Sequence[str], Sequence[float], int, int], None]] = None

    # ------------------------------------------------------------------ set-up

    def template(self, msg: Any, bind: Dict[str, str], sample_type: Any,
                 tail: Optional[str] = None) -> Template:
        """A Template; a warning if it falls back to message objects."""
        template = Template(msg, bind, sample_type, tail)
        if template.failure is not None:
            self.node.get_logger().warning(
                f"publishing {template.failure}; falling back to message objects")
        return template

    def build(self) -> None:
        """The per-state messages, with their constant fields set (configure)."""
        frame = self.node._frame
        self.wanted_until = 0
        self.eager_until = None
        self._tf_count = 0  # a new /tf publisher: its first subscribers are new listeners
        self.first_state.clear()
        with self._estop_lock:  # (on_link may run on the I/O thread)
            self._estop_sent = None
        self.info_cache.clear()  # the frame names may have changed since the last configure
        self.image_templates.clear()
        self._image_waiting = None
        odom = Odometry()
        odom.header.frame_id = frame("odom_frame")
        odom.child_frame_id = frame("base_frame")
        odom.pose.covariance = pose_covariance(0.0, 0.0)
        odom.twist.covariance = twist_covariance(0.0, geo.TRACK_WIDTH_M, False)
        tf = TransformStamped()
        tf.header.frame_id = odom.header.frame_id
        tf.child_frame_id = odom.child_frame_id
        imu = Imu()
        imu.header.frame_id = frame("imu_frame")
        reading = imu_from_state(_Level(), 0.0)
        imu.orientation_covariance = reading.orientation_covariance
        imu.angular_velocity_covariance = reading.angular_velocity_covariance
        imu.linear_acceleration_covariance = reading.linear_acceleration_covariance
        joints = JointState()
        joints.name = list(JOINT_NAMES)
        joints.position = [0.0, 0.0]
        status = RobotStatus()
        status.header.frame_id = frame("base_link_frame")
        self.templates = {
            "odom": self.template(odom, ODOM_BINDING, OdomSample),
            "tf": self.template(TFMessage(transforms=[tf]), TF_BINDING, OdomSample),
            "imu": self.template(imu, IMU_BINDING, ImuSample),
            "joints": self.template(joints, JOINTS_BINDING, JointSample),
            "status": self.template(status, STATUS_BINDING, StatusSample),
        }

    # ------------------------------------------------------------------ time, subscribers

    def stamp_ns(self) -> int:
        """The node's clock, in nanoseconds: read from the system directly unless ROS time
        (use_sim_time) is active, which is what the clock itself would do, at a fraction of
        the cost. Whether ROS time is active is asked of the clock every 0.2 s."""
        now = time.time_ns()
        if now >= self._clock_checked_until:  # asking the clock costs more than reading it
            self._ros_time = self.node.get_clock().ros_time_is_active
            self._clock_checked_until = now + RECHECK_NS
        if self._ros_time:
            return self.node.get_clock().now().nanoseconds
        return now

    def robot_time(self) -> bool:
        """Stamps from the robot's clock, except under ROS time (use_sim_time), whose clock
        the stamps follow as they are (as of the latest :meth:`stamp_ns`)."""
        return not self._ros_time

    def wanted(self) -> Dict[str, bool]:
        """Which streams have subscribers: asked every RECHECK_NS, not per message; at
        start-up at every state until one has (EAGER_NS). Timed on this computer's monotonic
        clock, not by the messages' stamps: an image's (its capture, some 70 ms before its
        last chunk) is older than that of the robot state before it, and ROS time
        (use_sim_time) may stand still (no /clock yet: every stamp 0). More /tf subscribers
        than at the last count: the last transform's stamp is forgotten, so that a new tf
        listener gets the next state's even at that stamp (/clock standing still)."""
        now_ns = time.monotonic_ns()
        if now_ns >= self.wanted_until:
            pub = self.node._pub
            counts = {key: pub[key].get_subscription_count() for key in STREAMS if key in pub}
            self._wanted = wanted = {key: count > 0 for key, count in counts.items()}
            tf_count = counts.get("tf", 0)
            if tf_count > self._tf_count:
                self._tf_stamp_ns = None
            self._tf_count = tf_count
            if self.eager_until is None:
                self.eager_until = now_ns + EAGER_NS
            eager = now_ns < self.eager_until and not any(wanted.values())
            self.wanted_until = now_ns if eager else now_ns + RECHECK_NS
            self._camera_subscribers(now_ns, any(wanted.get(key) for key in CAMERA_STREAMS))
        return self._wanted

    def _camera_subscribers(self, now_ns: int, now: bool) -> None:
        """Tell the core whether the camera is wanted: while a camera stream has a
        subscriber, and for CAMERA_HOLD_NS after the last one went (``now_ns``: the
        monotonic clock)."""
        seen = self._camera_seen_ns
        if now:
            self._camera_seen_ns = now_ns
        elif seen is not None and now_ns - seen < CAMERA_HOLD_NS:
            now = True
        core = getattr(self.node, "_core", None)
        if core is not None:
            core.set_camera_wanted(now)

    # ------------------------------------------------------------------ DriverOutput

    def on_state(self, sample) -> None:
        pub = self.node._pub
        if not pub:
            return
        tpl = self.templates
        odom = sample.odom
        wanted = self.wanted()
        if wanted["odom"]:
            pub["odom"].publish(tpl["odom"].pack(odom))
        waiting = self._image_waiting
        if waiting is not None:  # camera_with_state: right after odom, for one wake-up of both
            self._image_waiting = None
            _publish_all(waiting)
        # not again at the last one's stamp (ROS time, stamped as states come, repeats it while
        # /clock is slower than the states or paused): tf2 ignores it, warning TF_REPEATED_DATA;
        # forgotten when /tf has more subscribers (wanted): a new listener needs the transform
        if self.node._params["publish_tf"] and wanted["tf"] and odom.stamp_ns != self._tf_stamp_ns:
            self._tf_stamp_ns = odom.stamp_ns
            pub["tf"].publish(tpl["tf"].pack(odom))
        if wanted["imu"]:
            pub["imu"].publish(tpl["imu"].pack(sample.imu))
        if wanted["joints"]:
            pub["joints"].publish(tpl["joints"].pack(sample.joints))
        if wanted["status"]:
            pub["status"].publish(tpl["status"].pack(sample.status))
        if not self.first_state.is_set():
            self.first_state.set()
        local = self.local_joints
        if local is not None:
            joints = sample.joints
            local(JOINT_NAMES, (joints.head_rad, joints.lift_rad), joints.sec, joints.nanosec)

    def on_battery(self, sample) -> None:
        pub = self.node._pub
        if not pub:
            return
        nan = math.nan
        msg = BatteryState()
        msg.header.stamp = time_msg(sample.stamp_ns)
        msg.header.frame_id = self.node._frame("base_link_frame")
        msg.voltage = sample.voltage_v
        msg.temperature = msg.current = msg.charge = msg.capacity = msg.design_capacity = nan
        msg.percentage = sample.percentage
        msg.power_supply_status = getattr(BatteryState,
                                          "POWER_SUPPLY_STATUS_" + sample.supply_status)
        msg.power_supply_health = BatteryState.POWER_SUPPLY_HEALTH_UNKNOWN
        msg.power_supply_technology = BatteryState.POWER_SUPPLY_TECHNOLOGY_LIPO
        msg.present = True
        msg.cell_voltage = [sample.voltage_v] * geo.BATTERY_CELLS
        msg.cell_temperature = [nan] * geo.BATTERY_CELLS
        msg.location = "body"
        pub["battery"].publish(msg)
        self.battery_msg = msg

    def on_cliff_edge(self, stamp_ns: int, edge: bool) -> None:
        """cliff/points: a row of points beyond the robot's front where the cliff sensor
        found an edge (robot_geometry.CLIFF_EDGE_POINTS_M, in base_frame), for a costmap's
        obstacle layer; an empty cloud once it sees none."""
        pub = self.node._pub.get("cliff")
        if pub is None:
            return
        points = geo.CLIFF_EDGE_POINTS_M if edge else ()
        msg = PointCloud2()
        msg.header.stamp = time_msg(stamp_ns)
        msg.header.frame_id = self.node._frame("base_frame")
        msg.height, msg.width = 1, len(points)
        msg.fields = [PointField(name=axis, offset=4 * i, datatype=PointField.FLOAT32, count=1)
                      for i, axis in enumerate("xyz")]
        msg.is_bigendian = False
        msg.point_step = 12
        msg.row_step = 12 * len(points)
        msg.data = b"".join(struct.pack("<3f", *p) for p in points)
        msg.is_dense = True
        pub.publish(msg)

    def on_events(self, stamp_ns: int, events) -> None:
        pub = self.node._pub.get("events")
        if pub is None:
            return
        header_stamp = time_msg(stamp_ns)
        frame = self.node._frame("base_link_frame")
        for event in events:
            msg = RobotEvent()
            msg.header.stamp = header_stamp
            msg.header.frame_id = frame
            msg.type = event.type
            msg.description = event.description
            msg.value = float(event.value)
            pub.publish(msg)
            self.note(logging.INFO, f"robot event: {event.description}")  # held at start-up

    def on_image(self, frame: CameraFrame) -> None:
        pub = self.node._pub
        if not pub:
            return
        waiting, self._image_waiting = self._image_waiting, None
        if waiting is not None:  # two frames without a robot state between them
            _publish_all(waiting)
        messages = self._image_messages(pub, frame)
        if self.node._params["camera_with_state"]:
            self._image_waiting = messages  # published with the next robot state (on_state)
        else:
            _publish_all(messages)

    def _image_messages(self, pub: Dict[str, Any], frame: CameraFrame) -> List[Tuple[Any, Any]]:
        """(publisher, message) of ``frame`` for each camera stream that has a subscriber,
        made ready so that publishing them takes no more than the publish calls."""
        wanted = self.wanted()
        out: List[Tuple[Any, Any]] = []
        if wanted["compressed"]:
            jpeg = frame.jpeg()
            if jpeg is not None:
                out.append((pub["compressed"], self._image_template("compressed").pack(frame, jpeg)))
        if wanted["image"]:
            pixels = frame.pixels()
            if pixels is not None:
                data, width, height, channels = pixels
                template = self._image_template("mono8" if channels == 1 else "rgb8")
                out.append((pub["image"], template.pack(
                    RawImage(frame.sec, frame.nanosec, height, width, width * channels), data)))
        # with every image that goes out (none of a frame that does not convert), or with
        # every frame while no image topic has a subscriber
        if wanted["camera_info"] and (out or not (wanted["compressed"] or wanted["image"])):
            out.append((pub["camera_info"],
                        self._camera_info_for(frame.width, frame.height).pack(frame)))
        return out

    def on_camera_info_changed(self) -> None:
        self.info_cache.clear()

    def _camera_info_for(self, width: int, height: int) -> Template:
        cached = self.info_cache.get((width, height))
        if cached is not None:
            return cached
        data = self.node._core.camera_info(width, height)
        msg = CameraInfo()
        msg.header.frame_id = self.node._frame("camera_frame")
        msg.width, msg.height = data.width, data.height
        msg.distortion_model = data.distortion_model
        msg.d, msg.k, msg.r, msg.p = list(data.d), list(data.k), list(data.r), list(data.p)
        template = self.info_cache[(width, height)] = self.template(msg, STAMP_BINDING,
                                                                    CameraFrame)
        return template

    def _image_template(self, key: str) -> Template:
        """The template of ``compressed`` images or of raw ones in encoding ``key``."""
        template = self.image_templates.get(key)
        if template is None:
            if key == "compressed":
                msg, bind, sample_type = CompressedImage(), STAMP_BINDING, CameraFrame
                msg.format = "jpeg"
            else:
                msg, bind, sample_type = Image(), RAW_IMAGE_BINDING, RawImage
                msg.encoding = key
            msg.header.frame_id = self.node._frame("camera_frame")
            template = self.image_templates[key] = self.template(msg, bind, sample_type, "data")
        return template

    def on_robot_info(self, info: Any) -> None:
        msg = RobotInfo()
        msg.firmware_version = str(info.firmware_version) if info.firmware_version is not None else ""
        msg.firmware_build_type = info.firmware_build or ""
        msg.firmware_signature_json = info.firmware_signature or ""
        msg.head_serial = int(info.head_serial or 0)
        msg.body_serial = int(info.body_serial or 0)
        msg.body_hw_version = int(info.body_hw_version or 0)
        msg.body_color = info.body_color or "UNKNOWN"
        self.node._robot_info = msg
        pub = self.node._pub.get("info")
        if pub is not None:
            pub.publish(msg)

    def on_link(self, sample: LinkSample) -> None:
        if sample.state is LinkState.CONNECTING:
            # a (re)connection may find another robot: /diagnostics' hardware_id says the
            # address again until its facts come (on_robot_info)
            self.node._robot_info = None
        if sample.state is not LinkState.READY or not self.node._core.active:
            # camera_with_state: no robot state comes to publish an image waiting for one; the
            # first after activation or reconnection would have carried it, its stamp old
            self._image_waiting = None
        pub = getattr(self.node, "_link", None)  # the node's, for as long as it lives (lifetime_reports)
        if pub is None:
            return
        msg = self._link_msg = LinkStatus()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.state = _LINK_STATUS[sample.state]
        msg.driver_active = bool(self.node._core.active)
        msg.rtt_s = sample.rtt_s
        msg.datagrams_sent = sample.datagrams_sent
        msg.datagrams_received = sample.datagrams_received
        msg.retransmissions = sample.retransmissions
        msg.malformed_dropped = sample.malformed_dropped
        msg.wrong_source_dropped = sample.wrong_source_dropped
        pub.publish(msg)
        # emergency_stop/engaged (latched): when it changed, and once after each configure
        estop_pub = self.node._pub.get("estop")
        if estop_pub is None:
            return
        with self._estop_lock:
            engaged = bool(self.node._core.estop)
            if engaged is not self._estop_sent:
                self._estop_sent = engaged
                estop_pub.publish(Bool(data=engaged))

    def publish_released_link(self) -> None:
        """link_status while the driver holds no robot client (unconfigured, finalized: the 1 s
        timer of lifetime_reports): DISCONNECTED, inactive, no RTT; the counters are those of
        the last configure's link, as its last link_status said them (none before the first)."""
        msg = LinkStatus()
        for field in _LINK_COUNTERS:
            setattr(msg, field, getattr(self._link_msg, field, 0))
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.state, msg.driver_active, msg.rtt_s = LinkStatus.DISCONNECTED, False, math.nan
        self.node._link.publish(msg)

    def publish_reports(self, media: Any, objects: Any) -> None:
        """/diagnostics and the battery marker (the node's 1 s timer)."""
        node, core = self.node, self.node._core
        p = node._params
        where = f"{p['robot_ip']}:{p['robot_port']}"
        info = node._robot_info
        hardware_id = f"cozmo-{info.head_serial:08x}" if info is not None else f"cozmo@{where}"
        publish_battery_marker(node._pub["battery_marker"], self.battery_msg
                               if core.connected and core.active else None,
                               node._frame("base_link_frame"))
        core.say_overdue()  # a refusal held back is said once its kind falls quiet
        for part in (media, objects, getattr(node, "_motion", None)):
            if part is not None:
                part.say_overdue()
        if objects is not None:  # no robot state ticks its list while the robot is away
            objects.age_list()
        link, robot = core.reports(where)
        reports = [("link", link), ("robot", robot)]
        if media is not None:
            reports.append(("display and audio", media.report()))
        if objects is not None:
            reports.append(("objects", objects.report()))
        self.publish_diagnostics(reports, hardware_id)

    def publish_diagnostics(self, reports, hardware_id: str) -> None:
        """``reports``: (name suffix, DiagnosticReport) pairs, as one DiagnosticArray."""
        array = DiagnosticArray()
        array.header.stamp = self.node.get_clock().now().to_msg()
        name = self.node.get_fully_qualified_name().lstrip("/")
        for suffix, report in reports:
            status = DiagnosticStatus()
            status.level = bytes([report.level])
            status.name = f"{name}: {suffix}"
            status.message = report.message
            status.hardware_id = hardware_id
            status.values = [KeyValue(key=k, value=v) for k, v in report.values]
            array.status.append(status)
        self.node._diagnostics.publish(array)  # the node's, for as long as it lives (lifetime_reports)

    def hand_over(self, fn: Callable[..., None], *args: Any) -> None:
        self._hand_over(fn, *args)

    def note(self, level: int, text: str) -> None:
        if self._held is not None:
            with self._notes_lock:
                if self._held is not None:
                    self._held.append((level, text))
                    return
        self.node._log(level, text)

    def say_held_back(self) -> None:
        """The media's, the objects' and the motion goals' refusals held back, before the
        core's line that changes what they describe ("activated", "connected again")."""
        for part in (getattr(self.node, "_media", None), getattr(self.node, "_objects", None),
                     getattr(self.node, "_motion", None)):
            if part is not None:
                part.say_held_back()

    def hold_notes(self) -> None:
        """Start-up: keep :meth:`note`'s lines back until :meth:`release_notes`. rclpy's first
        log call in a process takes some 50 ms (it looks its caller's source up among every
        module loaded), which would stand between the robot's first state and its odom."""
        with self._notes_lock:
            if self._held is None:
                self._held = []

    def release_notes(self) -> None:
        """Log the lines held back, in order; from now on each at once."""
        with self._notes_lock:  # held: a line said meanwhile waits for these
            for level, text in self._held or ():
                self.node._log(level, text)
            self._held = None

