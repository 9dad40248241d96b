"""ros/serialized.py: ready-serialized templates for the driver's high-rate messages.

The reference is rclpy's own serialization (the middleware's): the layout must put every
byte where ``serialize_message`` puts it, and a template's bytes must deserialize to the
message that setting the same fields on a message object gives."""

from __future__ import annotations

import math
import os
import random
import struct

import pytest

from dependencies import require

require("rclpy")

from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402

from types import SimpleNamespace  # noqa: E402

from cozmo_driver.core import (CameraFrame, ImuSample, JointSample, OdomSample,  # noqa: E402
                               StatusSample)
from cozmo_driver.ros import driver_streams as ds  # noqa: E402
from cozmo_driver.ros.serialized import (LayoutError, Template, cdr_layout,  # noqa: E402
                                         serialized_publish_supported)
from cozmo_interfaces.msg import ObjectList, RobotStatus  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue  # noqa: E402
from geometry_msgs.msg import TransformStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, Imu, JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

# rclpy's serialize_message and deserialize_message are the middleware's (its rmw library)
pytestmark = [pytest.mark.ros]

STAMP = ds.STAMP_BINDING


def _odom() -> Odometry:
    m = Odometry()
    m.header.frame_id = "robot1/odom"
    m.child_frame_id = "robot1/base_footprint"
    m.pose.covariance[14] = 1e6
    return m


def _tf() -> TFMessage:
    t = TransformStamped()
    t.header.frame_id = "odom"
    t.child_frame_id = "base_footprint"
    return TFMessage(transforms=[t])


def _imu() -> Imu:
    m = Imu()
    m.header.frame_id = "imu_link"
    m.orientation_covariance = [0.01, 0.0, 0.0, 0.0, 0.02, 0.0, 0.0, 0.0, 0.03]
    return m


def _joints() -> JointState:
    m = JointState()
    m.name = ["head_joint", "lift_joint"]
    m.position = [0.0, 0.0]
    return m


def _status() -> RobotStatus:
    m = RobotStatus()
    m.header.frame_id = "base_link"
    return m


def _compressed() -> CompressedImage:
    m = CompressedImage()
    m.header.frame_id = "camera_optical_frame"
    m.format = "jpeg"
    return m


def _image(encoding: str) -> Image:
    m = Image()
    m.header.frame_id = "cam"
    m.encoding = encoding
    return m


def _info() -> CameraInfo:
    m = CameraInfo()
    m.header.frame_id = "camera_optical_frame"
    m.width, m.height = 320, 240
    m.distortion_model = "plumb_bob"
    m.d = [0.1, -0.2, 0.0, 0.0, 0.0]
    m.k = [290.0, 0.0, 160.0, 0.0, 290.0, 120.0, 0.0, 0.0, 1.0]
    return m


#: every template the driver builds, with its binding and sample type (driver_streams)
DRIVER_TEMPLATES = [
    ("odom", _odom, ds.ODOM_BINDING, OdomSample, None),
    ("tf", _tf, ds.TF_BINDING, OdomSample, None),
    ("imu", _imu, ds.IMU_BINDING, ImuSample, None),
    ("joints", _joints, ds.JOINTS_BINDING, JointSample, None),
    ("status", _status, ds.STATUS_BINDING, StatusSample, None),
    ("camera_info", _info, STAMP, CameraFrame, None),
    ("compressed", _compressed, STAMP, CameraFrame, "data"),
    ("mono8", lambda: _image("mono8"), ds.RAW_IMAGE_BINDING, ds.RawImage, "data"),
    ("rgb8", lambda: _image("rgb8"), ds.RAW_IMAGE_BINDING, ds.RawImage, "data"),
]

_RANGES = {"?": None, "b": (-128, 127), "B": (0, 255), "h": (-32768, 32767), "H": (0, 65535),
           "i": (-2 ** 31, 2 ** 31 - 1), "I": (0, 2 ** 32 - 1)}


def _random_value(rng: random.Random, code: str):
    if code == "?":
        return rng.random() < 0.5
    if code == "f":
        return float(rng.choice([0.0, -1.5, 3.75, 0.125, 12.5]))  # exact in float32
    if code == "d":
        return rng.uniform(-1e3, 1e3)
    lo, hi = _RANGES[code]
    return rng.randint(lo, hi)


def _values(rng: random.Random, template: Template, codes, tail):
    sample = SimpleNamespace(**{template.bind[path]: _random_value(rng, codes[path])
                                for path in template.fields})
    data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) if tail else None
    return sample, data


def test_this_rclpy_publishes_serialized_messages():
    # every supported distro's rclpy has Publisher.publish(bytes); the fallback is for others
    assert serialized_publish_supported()


@pytest.mark.parametrize("name,make,bind,sample_type,tail", DRIVER_TEMPLATES,
                         ids=[t[0] for t in DRIVER_TEMPLATES])
def test_driver_templates_serialize_what_message_objects_would(name, make, bind, sample_type, tail):
    template = Template(make(), bind, sample_type, tail)
    assert template.serialized, template.failure
    reference = Template(make(), bind, sample_type, tail, serialized=False)
    assert not reference.serialized
    _, offsets, _, _ = cdr_layout(make())
    codes = {path: offsets[path][1] for path in bind}
    rng = random.Random(name)
    for _ in range(50):
        sample, data = _values(rng, template, codes, tail)
        packed = template.pack(sample, data)
        assert isinstance(packed, bytes)
        expected = reference.pack(sample, data)
        assert deserialize_message(packed, type(expected)) == expected
        # and what the middleware makes of the message object deserializes the same way
        assert deserialize_message(serialize_message(expected), type(expected)) == expected


def _odom_sample(**values):
    fields = {name: 0.0 for name in OdomSample.__slots__}
    fields.update(values)
    return OdomSample(**fields)


def test_templates_change_only_their_fields():
    template = Template(_odom(), ds.ODOM_BINDING, OdomSample)
    sample = _odom_sample(sec=7, nanosec=8, x_m=0.25, y_m=1.25, qz=2.25, qw=3.25, pose_var_x=4.25,
                          pose_var_y=5.25, pose_var_yaw=6.25, v_mps=7.25, w_radps=8.25,
                          twist_var_vx=9.25, twist_var_vy=10.25, twist_var_wz=11.25)
    got = deserialize_message(template.pack(sample), Odometry)
    assert got.header.stamp.sec == 7 and got.header.stamp.nanosec == 8
    assert got.header.frame_id == "robot1/odom" and got.child_frame_id == "robot1/base_footprint"
    assert got.pose.pose.position.x == 0.25 and got.pose.pose.position.y == 1.25
    assert got.pose.pose.position.z == 0.0 and got.pose.pose.orientation.x == 0.0
    assert got.pose.pose.orientation.z == 2.25 and got.pose.pose.orientation.w == 3.25
    assert got.pose.covariance[14] == 1e6  # a constant between two written fields survives
    assert list(got.pose.covariance[[0, 7, 35]]) == [4.25, 5.25, 6.25]
    assert got.twist.twist.linear.x == 7.25 and got.twist.twist.angular.z == 8.25
    assert list(got.twist.covariance[[0, 7, 35]]) == [9.25, 10.25, 11.25]


def test_image_tails_of_every_length_keep_their_bytes():
    template = Template(_compressed(), STAMP, CameraFrame, tail="data")
    for n in range(0, 18):
        data = bytes(range(n))
        got = deserialize_message(template.pack(SimpleNamespace(sec=1, nanosec=2), data),
                                  CompressedImage)
        assert bytes(got.data) == data and got.format == "jpeg"
        assert got.header.frame_id == "camera_optical_frame" and got.header.stamp.sec == 1


@pytest.mark.parametrize("make", [_odom, _tf, _imu, _joints, _status, _info, _compressed,
                                  lambda: _image("rgb8"), ObjectList,
                                  lambda: DiagnosticArray(status=[DiagnosticStatus(
                                      name="cozmo: link", values=[KeyValue(key="rtt", value="3 ms")])])])
def test_layout_puts_every_byte_where_the_middleware_does(make):
    msg = make()
    if isinstance(msg, CompressedImage):
        msg.data = b"\x01\x02\x03\x04\x05"
    data, offsets, lengths, padding = cdr_layout(msg)  # LayoutError unless it matches
    reference = serialize_message(msg)
    # the middleware may leave slack at the end (see cdr_layout), never less than this
    assert len(data) <= len(reference) and len(padding) < len(data) // 2
    # alignment padding is left uninitialised by some serializers: compare everything else
    assert [b for i, b in enumerate(data) if i not in padding] == \
        [b for i, b in enumerate(reference[:len(data)]) if i not in padding]
    assert deserialize_message(data, type(msg)) == msg


def test_a_wrong_field_or_name_is_an_error_when_the_template_is_built():
    with pytest.raises(LayoutError, match="no_such_field"):
        Template(_odom(), {"pose.no_such_field": "x_m"}, OdomSample)
    with pytest.raises(LayoutError, match="'x_mm'"):
        Template(_odom(), {"pose.pose.position.x": "x_mm"}, OdomSample)
    with pytest.raises(LayoutError, match="'x_mm'"):
        Template(_odom(), {"pose.pose.position.x": "x_mm"}, OdomSample, serialized=False)


def test_the_binding_order_does_not_matter():
    # listed against serialization order: the same bytes, each value to its named field
    forward = Template(_joints(), {"position[0]": "head_rad", "position[1]": "lift_rad"}, JointSample)
    backward = Template(_joints(), {"position[1]": "lift_rad", "position[0]": "head_rad"}, JointSample)
    fallback = Template(_joints(), {"position[1]": "lift_rad", "position[0]": "head_rad"},
                        JointSample, serialized=False)
    assert forward.serialized and backward.serialized
    sample = JointSample(sec=1, nanosec=2, head_rad=0.5, lift_rad=-0.5)
    assert forward.pack(sample) == backward.pack(sample)
    assert list(deserialize_message(backward.pack(sample), JointState).position) == [0.5, -0.5]
    assert list(fallback.pack(sample).position) == [0.5, -0.5]


def test_message_path_holds_floats_in_float_fields():
    # ints for float64 fields: struct packs them as doubles; the message path converts them
    # the same way, so that a message object never holds an int in a float field (which
    # ROS_PYTHON_CHECK_FIELDS=1 refuses and a C-asserts build aborts on)
    assert os.environ.get("ROS_PYTHON_CHECK_FIELDS") == "1"
    sample = _odom_sample(sec=7, nanosec=8, **{name: i for i, name in enumerate(
        ("x_m", "y_m", "qz", "qw", "pose_var_x"), start=1)})
    serialized = Template(_odom(), ds.ODOM_BINDING, OdomSample)
    fallback = Template(_odom(), ds.ODOM_BINDING, OdomSample, serialized=False)
    assert serialized.serialized and not fallback.serialized
    msg = fallback.pack(sample)
    assert type(msg.pose.pose.position.x) is float and msg.pose.pose.position.x == 1.0
    assert type(msg.header.stamp.sec) is int
    assert deserialize_message(serialized.pack(sample), Odometry) == msg
    status = Template(_status(), ds.STATUS_BINDING, StatusSample, serialized=False)
    flags = {name: (i + 1) % 2 for i, name in enumerate(
        n for n in StatusSample.__slots__ if n.startswith(("is_", "lift_", "head_", "cliff_d",
                                                             "are_")))}
    msg = status.pack(StatusSample(sec=1, nanosec=2, **flags, status_flags=5, cliff_0=1, cliff_1=2,
                                   cliff_2=3, cliff_3=4, backpack_touch=9, path_segment=-1,
                                   battery_v=4, orientation=6))
    assert msg.is_moving is True and msg.is_carrying_block is False
    assert type(msg.battery_voltage) is float and msg.battery_voltage == 4.0
    assert msg.orientation == 6


# ----------------------------------------------------------------------------- read_twist


def _twist(values):
    from geometry_msgs.msg import Twist
    msg = Twist()
    (msg.linear.x, msg.linear.y, msg.linear.z,
     msg.angular.x, msg.angular.y, msg.angular.z) = values
    return msg


@pytest.mark.parametrize("frame_id", ["", "b", "base", "base_lin", "base_link",
                                      "robot2/base_footprint", "ü/ä"])
def test_read_twist_reads_what_rclpy_serializes(frame_id):
    """The serialized bytes of real messages (rclpy's serializer, the middleware's CDR):
    read_twist gets the same six numbers and frame id, for frame ids of every length
    modulo 8 (the doubles' alignment after the string)."""
    from geometry_msgs.msg import TwistStamped
    from rclpy.serialization import serialize_message

    from cozmo_driver.ros.serialized import read_twist
    values = (0.25, -1.5e-3, 3.0, float("nan"), float("-inf"), -0.75)
    frame, stamp, got = read_twist(serialize_message(_twist(values)), stamped=False)
    assert frame == "" and stamp == (0, 0) and got[:3] == values[:3] and got[5] == values[5]
    assert math.isnan(got[3]) and got[4] == float("-inf")   # refused later, by the driver
    stamped = TwistStamped()
    stamped.header.frame_id = frame_id
    stamped.twist = _twist((1.0, 2.0, 3.0, 4.0, 5.0, 6.0))
    # the stamp as it is: a negative second (before 1970) and the largest nanosecond field too
    for sec, nanosec in ((17, 5), (1_763_000_000, 999_999_999), (-3, 4_294_967_295), (0, 0)):
        stamped.header.stamp.sec, stamped.header.stamp.nanosec = sec, nanosec
        frame, stamp, got = read_twist(serialize_message(stamped), stamped=True)
        assert frame == frame_id and stamp == (sec, nanosec) and got == (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)


def test_read_twist_reads_big_endian_and_refuses_what_it_cannot_read():
    from cozmo_driver.ros.serialized import LayoutError, read_twist
    values = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    big = b"\x00\x00\x00\x00" + struct.pack(">6d", *values)
    assert read_twist(big, stamped=False) == ("", (0, 0), values)
    header = struct.pack(">iiI", 1, 2, 5) + b"base\x00"      # stamp, frame_id "base"
    pad = b"\x00" * (-(len(header)) % 8)
    assert read_twist(b"\x00\x00\x00\x00" + header + pad + struct.pack(">6d", *values),
                      stamped=True) == ("base", (1, 2), values)
    with pytest.raises(LayoutError, match="encapsulation"):
        read_twist(b"\x00\x07\x00\x00" + struct.pack("<6d", *values), stamped=False)  # XCDR2
    with pytest.raises(LayoutError, match="too short"):
        read_twist(b"\x00\x01\x00\x00" + b"\x00" * 40, stamped=False)
    with pytest.raises(LayoutError, match="frame_id length"):
        read_twist(b"\x00\x01\x00\x00" + struct.pack("<iiI", 1, 2, 999) + b"\x00" * 60, stamped=True)
