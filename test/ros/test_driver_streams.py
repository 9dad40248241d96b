"""ros/driver_streams.py's DriverStreams with a stand-in node: when it asks for the subscriber
counts, and the camera-on-demand hold it derives from them."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import List

import pytest

from dependencies import require

require("rclpy")

from cozmo_driver.ros import driver_streams as ds  # noqa: E402

MS = 1_000_000


class _Publisher:
    def __init__(self) -> None:
        self.subscribers = 0
        self.asked = 0

    def get_subscription_count(self) -> int:
        self.asked += 1
        return self.subscribers


class _Core:
    def __init__(self) -> None:
        self.calls: List[tuple] = []  # (host time, wanted) of every set_camera_wanted

    def set_camera_wanted(self, wanted: bool) -> None:
        self.calls.append((_HostClock.now, wanted))


class _HostClock:
    """The module's ``time`` with a monotonic clock the test moves; the wall clock is the
    robot's stamps' (far from it, as they are)."""

    now = 0

    @classmethod
    def monotonic_ns(cls) -> int:
        return cls.now

    @classmethod
    def time_ns(cls) -> int:
        return 1_700_000_000 * 10**9 + cls.now


@pytest.fixture
def streams(monkeypatch):
    monkeypatch.setattr(ds, "time", _HostClock)
    _HostClock.now = 1_000 * MS
    node = SimpleNamespace(_pub={key: _Publisher() for key in ds.STREAMS}, _core=_Core(),
                           _params={"publish_tf": True, "camera_with_state": False})
    return ds.DriverStreams(node, None), node


@pytest.mark.parametrize("leave_ms", range(3000, 3300, 61))
def test_the_camera_stays_on_for_the_hold_though_images_carry_older_stamps_than_states(streams,
                                                                                       leave_ms):
    """A camera viewer leaves: the camera stays on for CAMERA_HOLD_NS and then goes off, once.
    The robot's states are stamped about when they arrive, its images with their capture,
    some 80 ms before the last chunk arrives: an image coming after a state carries an older
    stamp. Timed by the stamps, that read as the clock going back, the counts were asked
    again, and the hold (measured from a newer stamp) did not apply: the camera went off at
    once (EnableCamera Off) and on again at the next state, in most departures; and the
    counts were asked at every image, not every RECHECK_NS."""
    streams, node = streams
    streams.eager_until = 0  # start-up is over
    node._pub["image"].subscribers = 1
    events = sorted([(t, "state", t - 3) for t in range(0, 6000, 30)]
                    + [(t + 85, "image", t) for t in range(0, 6000, 66)])
    start = _HostClock.now
    robot_ms = 1_700_000_000_000 + 5_000  # the stamps' clock, the robot's mapped to the wall's
    for arrival_ms, kind, stamp_ms in events:
        _HostClock.now = start + arrival_ms * MS
        if arrival_ms >= leave_ms:
            node._pub["image"].subscribers = 0
        stamp_ns = (robot_ms + stamp_ms) * MS
        if kind == "state":
            streams.on_state(SimpleNamespace(odom=SimpleNamespace(stamp_ns=stamp_ns)))
        else:
            streams.on_image(SimpleNamespace(stamp_ns=stamp_ns, pixels=lambda: None))
    changes = []
    for when, wanted in node._core.calls:
        if not changes or changes[-1][1] != wanted:
            changes.append((when - start, wanted))
    assert [w for _, w in changes] == [True, False], changes
    # the counts are asked every RECHECK_NS: the hold starts at the last asking that saw the
    # viewer, at most that much before it left
    hold_ms, recheck_ms = ds.CAMERA_HOLD_NS / MS, ds.RECHECK_NS / MS
    assert leave_ms - recheck_ms + hold_ms <= changes[1][0] / MS <= leave_ms + hold_ms + 2 * recheck_ms, changes
    # and asked every RECHECK_NS, not again at every image (an older stamp than the state's)
    assert node._pub["image"].asked <= 6000 / recheck_ms + 1


class _EstopPublisher(_Publisher):
    def __init__(self) -> None:
        super().__init__()
        self.sent: List[bool] = []

    def publish(self, msg) -> None:
        self.sent.append(msg.data)


class _Clock:
    def now(self):
        return SimpleNamespace(to_msg=lambda: ds.TimeMsg())


class _Watched:
    """A lock that says when a thread other than ``owner`` comes for it."""

    def __init__(self, lock, owner, coming) -> None:
        self._lock, self._owner, self._coming = lock, owner, coming

    def __enter__(self):
        if threading.current_thread() is not self._owner:
            self._coming.set()
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)


def test_emergency_stop_engaged_ends_on_the_current_value_when_two_threads_publish(streams):
    """emergency_stop/engaged (latched) is published from the I/O thread (the core's link
    changes) and from the executor (the emergency_stop service, the 1 s timer), each reading the
    core's flag, comparing it with the last published and publishing. The I/O thread read
    "released", the service engaged the stop and published "engaged", then the I/O thread
    published its "released": the latched topic said the opposite of the flag until the next
    timer. The read, compare and publish are one step: the last published is the flag's value.
    The service comes right after the I/O thread's read (another thread, as it runs)."""
    streams, node = streams
    node._link = SimpleNamespace(publish=lambda msg: None)
    node._pub["estop"] = estop_pub = _EstopPublisher()
    node.get_clock = _Clock
    coming = threading.Event()  # the service's thread ended, or waits for the streams
    service: List[threading.Thread] = []

    def publish_link_status() -> None:  # the service's: the flag set, then the link status
        core.engaged = True
        streams.on_link(sample)
        coming.set()

    class _EstopCore(_Core):
        active = True
        engaged = False

        @property
        def estop(self) -> bool:
            read = self.engaged
            if not service:  # the I/O thread's read: the service comes now
                service.append(threading.Thread(target=publish_link_status))
                service[0].start()
                assert coming.wait(10.0), "the service's thread neither ended nor waited"
            return read

    core = node._core = _EstopCore()
    if hasattr(streams, "_estop_lock"):
        streams._estop_lock = _Watched(streams._estop_lock, threading.current_thread(), coming)
    sample = ds.LinkSample(ds.LinkState.READY)
    streams.on_link(sample)  # on the I/O thread
    service[0].join(10.0)
    assert not service[0].is_alive()
    assert estop_pub.sent and estop_pub.sent[-1] is True, estop_pub.sent


class _TfPublisher(_Publisher):
    def __init__(self) -> None:
        super().__init__()
        self.subscribers = 1
        self.stamps: List[int] = []

    def publish(self, odom) -> None:
        self.stamps.append(odom.stamp_ns)


def test_a_transform_is_not_sent_again_with_the_stamp_of_the_last(streams):
    """Under ROS time the states are stamped with the ROS clock as they come: a /clock slower
    than the robot's ~33 Hz states (Gazebo's 10 Hz), or paused, stamped several states alike,
    and odom -> base_footprint went out again at the same stamp, which tf2 ignores with a
    TF_REPEATED_DATA warning in every listener, at every state. The first state of a stamp
    is sent (the nearest to that instant), the others not; a stamp that goes back (the clock
    restarted: listeners clear their buffers) is sent."""
    streams, node = streams
    streams.eager_until = 0  # start-up is over
    node._pub["tf"] = tf = _TfPublisher()
    streams.templates = {key: SimpleNamespace(pack=lambda sample: sample) for key in ds.STREAMS}
    for stamp_ms in (0, 0, 0, 100, 100, 100, 200, 200, 50, 50, 60):
        streams.on_state(SimpleNamespace(odom=SimpleNamespace(stamp_ns=stamp_ms * MS)))
    assert tf.stamps == [stamp_ms * MS for stamp_ms in (0, 100, 200, 50, 60)]


def test_a_new_tf_listener_gets_the_transform_at_the_stamp_already_sent(streams):
    """/clock standing still (every state stamped alike): the transform went out once, at the
    first state, and a tf listener that came later (RViz restarted, tf2_echo, Nav2) got none
    until /clock moved. When /tf's subscriber count, asked every RECHECK_NS, has risen, the
    next state's goes out even at that stamp; not when it fell; after a configure (a new /tf
    publisher) its subscribers are new. The count is not asked per state."""
    streams, node = streams
    streams.eager_until = 0  # start-up is over
    node._pub["tf"] = tf = _TfPublisher()
    node._frame = lambda name: name
    stamp = 5_000 * MS

    def states(subscribers: int) -> None:  # three states, the first at the next count
        tf.subscribers = subscribers
        _HostClock.now += ds.RECHECK_NS
        for _ in range(3):
            streams.on_state(SimpleNamespace(odom=SimpleNamespace(stamp_ns=stamp)))

    streams.templates = {key: SimpleNamespace(pack=lambda sample: sample) for key in ds.STREAMS}
    states(1)
    states(1)
    assert tf.stamps == [stamp]
    states(2)  # a new listener
    assert tf.stamps == [stamp, stamp]
    states(1)  # one went
    states(1)
    assert tf.stamps == [stamp, stamp]
    states(2)  # another came
    states(2)
    assert tf.stamps == [stamp] * 3
    streams.build()  # configure again: a new /tf publisher, the listeners still there
    streams.templates = {key: SimpleNamespace(pack=lambda sample: sample) for key in ds.STREAMS}
    states(2)
    states(2)
    assert tf.stamps == [stamp] * 4
    assert tf.asked == 9, "the count was asked other than once a RECHECK_NS"  # 27 states


class _CameraPublisher(_Publisher):
    def __init__(self) -> None:
        super().__init__()
        self.sent: List = []

    def publish(self, msg) -> None:
        self.sent.append(msg)


@pytest.mark.ros  # the middleware reads the serialized messages
def test_camera_info_goes_with_the_images_of_a_frame_not_with_one_that_does_not_convert(streams):
    """A frame that did not convert (warned "camera image N dropped") was published on no
    image topic, but its camera_info went out, an orphan at its stamp, for subscribers of all
    three topics. camera_info goes with the images that go out; while no image topic has a
    subscriber, with every frame (which is then not converted)."""
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import CameraInfo, CompressedImage, Image

    from cozmo_driver.core import CameraFrame
    from cozmo_driver.driver import camera_info as caminfo

    types = {"compressed": CompressedImage, "image": Image, "camera_info": CameraInfo}

    streams, node = streams
    pub = node._pub = {key: _CameraPublisher() for key in ds.STREAMS}
    node._frame = lambda name: "camera_optical_frame"
    node._core.camera_info = caminfo.default_camera_info

    def convert(frame, jpeg, pixels):  # the core's: frame 2 does not convert
        frame._tried = 3
        if frame.image_id != 2:
            frame._jpeg, frame._pixels = b"\xff\xd8", (bytes(320 * 240), 320, 240, 1)

    def frame(image_id):
        return CameraFrame(image_id * MS, 1, image_id, image_id, 320, 240, convert)

    for subscribed in (("compressed", "image", "camera_info"), ("image", "camera_info"), ("camera_info",)):
        for key in ds.STREAMS:
            pub[key].subscribers = int(key in subscribed)
            pub[key].sent.clear()
        streams.wanted_until = 0  # the counts asked again
        for image_id in (1, 2, 3):
            streams.on_image(frame(image_id))
        stamps = {key: [deserialize_message(m, types[key]).header.stamp.nanosec for m in pub[key].sent]
                  for key in ds.CAMERA_STREAMS}  # (the templates' serialized messages)
        images = [1, 3] if len(subscribed) > 1 else []
        assert stamps == {"compressed": images if "compressed" in subscribed else [],
                          "image": images, "camera_info": images or [1, 2, 3]}, subscribed


def test_a_reconnection_forgets_the_robots_facts_until_the_next_robots_come(streams):
    """/diagnostics' hardware_id is the robot's head serial from its facts (robot_info): a
    reconnection, which may find another robot, forgets them, so that the address is said
    until the robot that answers gives its own."""
    from cozmo_driver.client import LinkState, RobotInfo
    from cozmo_driver.core.samples import LinkSample
    s, node = streams
    node._core.active = True
    s.on_robot_info(RobotInfo(firmware_version=2381, head_serial=0x45A1C0DE))
    assert node._robot_info.head_serial == 0x45A1C0DE
    s.on_link(LinkSample(LinkState.LOST))
    assert node._robot_info is not None                     # the lost robot's, while lost
    s.on_link(LinkSample(LinkState.CONNECTING))
    assert node._robot_info is None
    s.on_robot_info(RobotInfo(firmware_version=2381, head_serial=0x1234))
    s.on_link(LinkSample(LinkState.READY))
    assert node._robot_info.head_serial == 0x1234
