"""Cubes, charger and lights through the driver node, against the simulated robot's three
cubes and charger over UDP on 127.0.0.1, with real rclpy (each test: its own context,
simulator and executor; every wait is a bounded spin loop). What reached the robot is read
back from the simulator: its objects' ids, light states, rotation periods and streams."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional

import pytest

from dependencies import require

rclpy = require("rclpy")

from cozmo_interfaces.msg import (BackpackLightPattern, LightState, ObjectAccel,  # noqa: E402
                                  ObjectEvent, ObjectInfo, ObjectLights, ObjectList)
from cozmo_interfaces.srv import (ConnectObject, PlayLightAnimation,  # noqa: E402
                                  SetObjectAccelStream)
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.logging import LoggingSeverity  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import (QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy,  # noqa: E402
                       qos_profile_sensor_data)
from std_msgs.msg import ColorRGBA  # noqa: E402

from ros_harness import CONNECT_TIMEOUT, LogRecorder, RosHarness, closing_all, sim_fixture  # noqa: E402
from cozmo_driver.driver.commands import NOT_CONNECTED_REFUSAL  # noqa: E402
from cozmo_driver.ros.driver_node import CozmoDriverNode  # noqa: E402
from cozmo_driver.sim import SimServer  # noqa: E402
from cozmo_driver.sim.model import CHARGER_FACTORY_ID, CUBE_FACTORY_IDS  # noqa: E402

pytestmark = [pytest.mark.ros]

C1, C2, C3 = CUBE_FACTORY_IDS
CH = CHARGER_FACTORY_ID
LATCHED = QoSProfile(depth=1, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL,
                     reliability=QoSReliabilityPolicy.RELIABLE)
RELIABLE = QoSProfile(depth=100)
# generous bounds for things the simulator does within about a second
WAIT = 10.0


class Rig(RosHarness):
    """A driver node and a probe node on one executor; the simulator on 127.0.0.1."""

    spin_timeout = 0.01

    def __init__(self, context, sim: SimServer, **params: Any) -> None:
        self.sim = sim
        overrides = {"robot_ip": "127.0.0.1", "robot_port": sim.address[1], "camera_enabled": False,
                     "peer_timeout": 1.0, "reconnect_min": 0.2, "reconnect_max": 0.5,
                     "object_reconnect_min": 0.2, "object_reconnect_max": 1.0}
        overrides.update(params)
        self.node = CozmoDriverNode(context=context, parameter_overrides=[
            Parameter(k, value=v) for k, v in overrides.items()])
        super().__init__(context, "probe", nodes=(self.node,))
        self.lists: List[ObjectList] = self.listen(None, ObjectList, "objects", LATCHED)
        self.events: List[ObjectEvent] = self.listen(None, ObjectEvent, "object_events", RELIABLE)
        self.accel: List[ObjectAccel] = self.listen(None, ObjectAccel, "object_accel", qos_profile_sensor_data)
        self.diagnostics: List[DiagnosticArray] = self.listen(None, DiagnosticArray, "/diagnostics", RELIABLE)
        assert self.node.start()
        assert self.spin_until(lambda: self.node.connected, CONNECT_TIMEOUT), "driver did not connect"
        self.log = LogRecorder(self.node._objects._log)
        self.node._objects._log = self.log

    def call(self, srv_type, name: str, request, timeout: float = WAIT):
        return super().call(srv_type, name, request, timeout)

    def connect(self, factory_id: int = 0, object_type: int = 0, connect: bool = True):
        return self.call(ConnectObject, "connect_object", ConnectObject.Request(
            factory_id=factory_id, object_type=object_type, connect=connect))

    def latest(self) -> Dict[str, ObjectInfo]:
        return {o.name: o for o in self.lists[-1].objects} if self.lists else {}

    def wait_list(self, predicate: Callable[[Dict[str, ObjectInfo]], bool],
                  timeout: float = WAIT) -> Dict[str, ObjectInfo]:
        assert self.spin_until(lambda: bool(self.lists) and predicate(self.latest()), timeout), \
            f"objects list never matched; last: {[(o.name, o.connected) for o in self.latest().values()]}"
        return self.latest()

    def wait_event(self, type_: int, name: str, timeout: float = WAIT, after: int = 0) -> ObjectEvent:
        def find() -> Optional[ObjectEvent]:
            for event in self.events[after:]:
                if event.type == type_ and event.name == name:
                    return event
            return None
        assert self.spin_until(lambda: find() is not None, timeout), \
            f"no event {type_} for {name}; got {[(e.type, e.name) for e in self.events[after:]]}"
        return find()

    def objects_diagnostics(self) -> Dict[str, str]:
        def latest() -> Optional[Dict[str, str]]:
            for array in reversed(self.diagnostics):
                for status in array.status:
                    if status.name.endswith(": objects"):
                        return {kv.key: kv.value for kv in status.values} | {"_message": status.message}
            return None
        count = len(self.diagnostics)
        assert self.spin_until(lambda: len(self.diagnostics) > count and latest() is not None, 5.0)
        return latest()


sim = sim_fixture(seed=4)


@pytest.fixture
def make_rig(rclpy_context, sim):
    with closing_all(lambda **params: Rig(rclpy_context, sim, **params)) as make:
        yield make


def rgba(r: float = 0.0, g: float = 0.0, b: float = 0.0) -> ColorRGBA:
    return ColorRGBA(r=r, g=g, b=b, a=1.0)


def word(r: int, g: int, b: int) -> int:
    return (r << 10) | (g << 5) | b


def frames(state) -> tuple:
    return (state.on_color, state.off_color, state.on_frames, state.off_frames,
            state.transition_on_frames, state.transition_off_frames, state.offset)


def is_connected(objects: Dict[str, ObjectInfo], *names: str) -> bool:
    return all(name in objects and objects[name].connected for name in names)


def all_cubes_connected(objects: Dict[str, ObjectInfo]) -> bool:
    return is_connected(objects, "cube1", "cube2", "cube3")


# ----------------------------------------------------------------------------- discovery

def test_discovery_lists_the_advertised_objects_and_ages_out_one_that_leaves(make_rig):
    rig = make_rig(auto_connect_cubes=False, object_timeout=1.5)
    objects = rig.wait_list(lambda o: len(o) == 4)
    assert sorted(objects) == ["charger", "cube1", "cube2", "cube3"]
    expected = {"cube1": (C1, ObjectInfo.TYPE_LIGHT_CUBE_1, -48), "cube2": (C2, ObjectInfo.TYPE_LIGHT_CUBE_2, -54),
                "cube3": (C3, ObjectInfo.TYPE_LIGHT_CUBE_3, -60), "charger": (CH, ObjectInfo.TYPE_CHARGER, -60)}
    now = rig.node.get_clock().now().nanoseconds
    for name, (fid, otype, rssi) in expected.items():
        info = objects[name]
        assert (info.factory_id, info.object_type) == (fid, otype)
        assert abs(info.rssi - rssi) <= 4                      # the simulator's rssi noise
        assert not info.connected and info.object_id == 0 and info.up_axis == ObjectInfo.UP_AXIS_UNKNOWN
        seen = info.last_seen.sec * 10**9 + info.last_seen.nanosec
        assert 0 <= now - seen < 3 * 10**9
    for name in expected:
        assert rig.wait_event(ObjectEvent.APPEARED, name).factory_id == expected[name][0]
    assert rig.sim.object_ids() == {1: None, 2: None, 3: None, 0: None}   # nothing connected
    # cube2 leaves radio range: it stops advertising and ages out of the list
    mark = len(rig.events)
    rig.sim.set_object_in_range(2, False)
    event = rig.wait_event(ObjectEvent.DISAPPEARED, "cube2", after=mark)
    assert event.factory_id == C2 and "not heard of" in event.description
    assert sorted(rig.wait_list(lambda o: "cube2" not in o)) == ["charger", "cube1", "cube3"]
    rig.sim.set_object_in_range(2, True)
    rig.wait_event(ObjectEvent.APPEARED, "cube2", after=mark)
    assert "cube2" in rig.wait_list(lambda o: "cube2" in o)
    assert rig.sim.object_ids()[2] is None


# ----------------------------------------------------------------------------- auto-connect and events

def test_auto_connect_and_every_cube_event(make_rig):
    rig = make_rig()
    objects = rig.wait_list(lambda o: all_cubes_connected(o) and "charger" in o)
    ids = rig.sim.object_ids()
    for n, name in ((1, "cube1"), (2, "cube2"), (3, "cube3")):
        assert ids[n] is not None and objects[name].object_id == ids[n]
        assert rig.wait_event(ObjectEvent.CONNECTED, name).object_type == n
        # once connected, a cube says which face is up (the robot, about 0.5 s later)
        axis = rig.wait_event(ObjectEvent.UP_AXIS_CHANGED, name)
        assert axis.up_axis == ObjectInfo.UP_AXIS_Z_POSITIVE and "+Z up" in axis.description
    assert ids[0] is None and not objects["charger"].connected     # auto_connect_charger is false
    mark = len(rig.events)

    assert rig.sim.tap_cube(1, taps=2)
    tapped = rig.wait_event(ObjectEvent.TAPPED, "cube1", after=mark)
    # published once the tap filter's 75 ms group is over, stamped when the tap arrived
    stamp = tapped.header.stamp.sec * 10**9 + tapped.header.stamp.nanosec
    assert rig.node.get_clock().now().nanoseconds - stamp >= 74_000_000
    assert (tapped.tap_count, tapped.tap_intensity, tapped.factory_id) == (2, 79.0, C1)
    assert tapped.description == "cube1 tapped twice (intensity 79)"

    assert rig.sim.move_cube(2)
    moved = rig.wait_event(ObjectEvent.MOVED, "cube2", after=mark)
    a = moved.acceleration
    # the cube's raw counts (2, -1, 64), 64 to 1 g, in m/s^2
    assert (a.x, a.y, a.z) == pytest.approx((2 * 9.80665 / 64, -9.80665 / 64, 9.80665), abs=1e-6)
    assert rig.wait_list(lambda o: o["cube2"].moving)
    assert rig.sim.stop_cube(2)
    rig.wait_event(ObjectEvent.STOPPED_MOVING, "cube2", after=mark)
    assert rig.wait_list(lambda o: not o["cube2"].moving)

    assert rig.sim.set_cube_up_axis(3, ObjectInfo.UP_AXIS_X_POSITIVE)
    axis = rig.wait_event(ObjectEvent.UP_AXIS_CHANGED, "cube3", after=mark)
    assert axis.up_axis == ObjectInfo.UP_AXIS_X_POSITIVE and "+X up" in axis.description
    assert rig.wait_list(lambda o: o["cube3"].up_axis == ObjectInfo.UP_AXIS_X_POSITIVE)

    rig.sim.set_cube_battery(1, 121)
    assert rig.wait_list(lambda o: o["cube1"].battery_level == 121)
    assert rig.wait_list(lambda o: o["cube1"].battery_voltage == pytest.approx(1.21))   # hundredths of a V

    diag = rig.objects_diagnostics()
    assert diag["cubes connected"] == "3" and diag["events TAPPED"] == "1"
    assert diag["_message"].startswith("3 connected (cube1, cube2, cube3)")


def test_a_disconnected_cubes_battery_is_unknown_until_it_reports_again(make_rig):
    """A cube reports its battery only while connected: a disconnected cube (on request, or
    dropped) was listed with its last level and voltage, as current, for as long as it stayed
    known. Its battery is unknown now (0, NaN, as before its first report), as its up axis
    is, until it reports again once connected."""
    rig = make_rig(object_timeout=30.0)
    rig.wait_list(lambda o: all_cubes_connected(o) and o["cube2"].battery_level and o["cube3"].battery_level)
    assert rig.connect(factory_id=C3, connect=False).success
    rig.sim.set_object_in_range(2, False)     # a drop: the robot keeps its slot
    objects = rig.wait_list(lambda o: not o["cube2"].connected and not o["cube3"].connected)
    for name in ("cube2", "cube3"):
        assert objects[name].battery_level == 0 and math.isnan(objects[name].battery_voltage), objects[name]
        assert objects[name].up_axis == ObjectInfo.UP_AXIS_UNKNOWN
    assert objects["cube1"].battery_level == 148    # connected: as reported (the simulator's 1.48 V)
    rig.sim.set_object_in_range(2, True)
    objects = rig.wait_list(lambda o: o["cube2"].connected and o["cube2"].battery_level == 141)
    assert objects["cube2"].battery_voltage == pytest.approx(1.41)


def test_taps_are_filtered_as_ankis_engine_did_and_all_come_with_the_filter_off(make_rig):
    rig = make_rig()
    rig.wait_list(all_cubes_connected)
    for name in ("cube1", "cube2", "cube3"):
        rig.wait_event(ObjectEvent.UP_AXIS_CHANGED, name)   # (reported after each connection)
    reports = (ObjectEvent.TAPPED, ObjectEvent.MOVED, ObjectEvent.STOPPED_MOVING,
               ObjectEvent.UP_AXIS_CHANGED)   # (not the charger's APPEARED meanwhile)
    mark = len(rig.events)
    # at once: a weak tap, a middling one, and a strong one that shakes its cube (a move
    # and a stop): only the strong tap is published, 75 ms later, and no move
    assert rig.sim.tap_cube(1, intensity=40)
    assert rig.sim.tap_cube(2, intensity=70)
    assert rig.sim.tap_cube(3, intensity=120, jolt=True)
    tapped = rig.wait_event(ObjectEvent.TAPPED, "cube3", after=mark)
    assert tapped.tap_intensity == 120.0 and tapped.factory_id == C3
    # a later event of the robot's marks the end: everything before it has been published
    assert rig.sim.set_cube_up_axis(1, ObjectInfo.UP_AXIS_Y_POSITIVE)
    rig.wait_event(ObjectEvent.UP_AXIS_CHANGED, "cube1", after=mark)
    assert [(e.type, e.name) for e in rig.events[mark:] if e.type in reports] == [
        (ObjectEvent.TAPPED, "cube3"), (ObjectEvent.UP_AXIS_CHANGED, "cube1")]
    diag = rig.objects_diagnostics()
    assert diag["taps not published: intensity 60 or less"] == "1"
    assert diag["taps not published: a stronger one within 75 ms"] == "1"
    assert diag["moves not published: caused by a tap"] == "1"
    # switched off at run time: every tap and move the robot reports, as it comes
    result, = rig.node.set_parameters([Parameter("filter_object_events", value=False)])
    assert result.successful, result.reason
    mark = len(rig.events)
    assert rig.sim.tap_cube(2, intensity=40, jolt=True)
    rig.wait_event(ObjectEvent.STOPPED_MOVING, "cube2", after=mark)
    assert [(e.type, e.name, e.tap_intensity) for e in rig.events[mark:] if e.type in reports] == [
        (ObjectEvent.TAPPED, "cube2", 40.0), (ObjectEvent.MOVED, "cube2", 0.0),
        (ObjectEvent.STOPPED_MOVING, "cube2", 0.0)]


def test_accelerometer_stream_on_and_off(make_rig):
    rig = make_rig(auto_connect_charger=True, frame_prefix="robot1/")
    rig.wait_list(lambda o: all_cubes_connected(o) and is_connected(o, "charger"))
    response = rig.call(SetObjectAccelStream, "set_object_accel_stream",
                        SetObjectAccelStream.Request(object_type=ObjectInfo.TYPE_LIGHT_CUBE_1, enable=True))
    assert response.success, response.message
    assert rig.spin_until(lambda: len([s for s in rig.accel if s.factory_id == C1]) >= 10, WAIT)
    samples = [s for s in rig.accel if s.factory_id == C1]
    assert {s.header.frame_id for s in samples} == {"robot1/cube1"}     # with frame_prefix, as every frame
    for s in samples:           # resting flat: gravity on +z, in m/s^2 (simulator noise 0.015)
        v = s.linear_acceleration
        assert abs(v.x) < 0.1 and abs(v.y) < 0.1 and abs(v.z - 9.81) < 0.1
    assert rig.sim.object_states()[1]["stream_accel"]
    # the robot streams one cube at a time: cube2's stream ends cube1's, and the answer says so
    response = rig.call(SetObjectAccelStream, "set_object_accel_stream",
                        SetObjectAccelStream.Request(factory_id=C2, enable=True))
    assert response.success and response.message == ("cube2 accelerometer stream on; cube1's stream "
                                                     "stopped: the robot streams one cube at a time")
    assert rig.spin_until(lambda: rig.sim.object_states()[2]["stream_accel"]
                          and not rig.sim.object_states()[1]["stream_accel"], WAIT)
    response = rig.call(SetObjectAccelStream, "set_object_accel_stream",
                        SetObjectAccelStream.Request(factory_id=C2, enable=False))
    assert response.success and response.message == "cube2 accelerometer stream off"
    response = rig.call(SetObjectAccelStream, "set_object_accel_stream",
                        SetObjectAccelStream.Request(factory_id=C1, enable=False))
    assert response.success and response.message == "cube1 accelerometer stream off"
    assert rig.spin_until(lambda: not rig.sim.object_states()[1]["stream_accel"], WAIT)
    for request, why in ((SetObjectAccelStream.Request(object_type=ObjectInfo.TYPE_CHARGER, enable=True),
                          "charger has no accelerometer"),
                         (SetObjectAccelStream.Request(factory_id=12345, enable=True), "unknown object"),
                         (SetObjectAccelStream.Request(enable=True), "give factory_id")):
        response = rig.call(SetObjectAccelStream, "set_object_accel_stream", request)
        assert not response.success and why in response.message, response.message
    assert not rig.sim.object_states()[0]["stream_accel"]
    # switched off while its cube is away (it was refused, and the stream came back with the cube)
    response = rig.call(SetObjectAccelStream, "set_object_accel_stream",
                        SetObjectAccelStream.Request(factory_id=C3, enable=True))
    assert response.success, response.message
    mark = len(rig.events)
    rig.sim.set_object_in_range(3, False)
    rig.wait_event(ObjectEvent.DISCONNECTED, "cube3", after=mark)
    response = rig.call(SetObjectAccelStream, "set_object_accel_stream",
                        SetObjectAccelStream.Request(factory_id=C3, enable=False))
    assert response.success and response.message == (
        "cube3 accelerometer stream off: cube3 is not connected, and it is not restarted when it connects")
    sent_before = len(rig.sim.commands())
    rig.sim.set_object_in_range(3, True)
    rig.wait_event(ObjectEvent.CONNECTED, "cube3", after=mark)
    rig.spin_for(0.5)
    assert not [m for _, m in rig.sim.commands()[sent_before:] if m.NAME == "StreamObjectAccel"]


# ----------------------------------------------------------------------------- connect_object

def test_connect_object_by_factory_id_and_by_type_and_its_errors(make_rig):
    rig = make_rig(auto_connect_cubes=False, object_timeout=2.0)
    rig.wait_list(lambda o: len(o) == 4)
    response = rig.connect(object_type=ObjectInfo.TYPE_CHARGER)
    assert response.success and response.factory_id == CH, response.message
    assert rig.sim.object_ids()[0] is not None
    assert response.message == f"charger connected (object id {rig.sim.object_ids()[0]})"
    rig.wait_event(ObjectEvent.CONNECTED, "charger")
    response = rig.connect(factory_id=C3)
    assert response.success and response.factory_id == C3 and rig.sim.object_ids()[3] is not None
    assert rig.wait_list(lambda o: is_connected(o, "cube3", "charger"))
    response = rig.connect(factory_id=C3)
    assert response.success and "already connected" in response.message
    lights = rig.publisher(ObjectLights, "object_lights")
    lights.publish(ObjectLights(factory_id=C3, lights=[LightState(on_color=rgba(b=1.0))]))
    assert rig.spin_until(lambda: rig.sim.object_states()[3]["lights"][0].on_color == word(0, 0, 31), WAIT)
    response = rig.connect(factory_id=C3, connect=False)
    assert response.success and response.message == "cube3 disconnected"
    assert rig.sim.object_ids()[3] is None
    # its lights were turned off first: the cube keeps them across a disconnection
    assert all(st.on_color == 0 for st in rig.sim.object_states()[3]["lights"])
    rig.wait_event(ObjectEvent.DISCONNECTED, "cube3")
    assert rig.wait_list(lambda o: not o["cube3"].connected)
    response = rig.connect(object_type=ObjectInfo.TYPE_CHARGER, connect=False)
    assert response.success and rig.sim.object_ids()[0] is None
    # errors
    response = rig.connect(factory_id=0x12345678)
    assert not response.success and response.message.startswith("unknown object 0x12345678")
    response = rig.connect()
    assert not response.success and "give factory_id" in response.message
    response = rig.connect(object_type=9)
    assert not response.success and "no object of type 9 is advertised" in response.message
    # an object that is out of range: it ages out, then cannot be connected
    rig.sim.set_object_in_range(1, False)
    rig.wait_list(lambda o: "cube1" not in o)
    response = rig.connect(factory_id=C1)
    assert not response.success and "cube1 (0xc0b10001) is not advertised" in response.message
    # without the robot
    rig.sim.set_link_up(False)
    assert rig.spin_until(lambda: not rig.node.connected, WAIT)
    response = rig.connect(factory_id=C2)
    assert not response.success and response.message == NOT_CONNECTED_REFUSAL
    rig.sim.set_link_up(True)
    assert rig.spin_until(lambda: rig.node.connected, CONNECT_TIMEOUT)


def test_connect_object_succeeding_then_failing_logs_each_at_its_severity(make_rig, rclpy_log):
    """connect_object logs a success at INFO and a failure at WARN: once both came from one
    line, where rclpy raised ValueError ("Logger severity cannot be changed between calls")
    on the executor at the first failure after a success, and the driver died. Here the
    driver logs through its own rclpy logger (not the rig's recorder)."""
    rig = make_rig(auto_connect_cubes=False, object_timeout=2.0)
    rig.node._objects._log = rig.log.logger
    rig.wait_list(lambda o: len(o) == 4)
    response = rig.connect(factory_id=C3)
    assert response.success, response.message
    response = rig.connect(factory_id=0x12345678)
    assert not response.success and response.message.startswith("unknown object 0x12345678")
    response = rig.connect(factory_id=C3, connect=False)
    assert response.success and response.message == "cube3 disconnected"
    response = rig.connect(object_type=9)
    assert not response.success
    lines = [(line.severity, line.message) for line in rclpy_log.of(rig.node)
             if line.message.startswith("connect_object")]
    assert [severity for severity, _ in lines] == [LoggingSeverity.INFO, LoggingSeverity.WARN,
                                                    LoggingSeverity.INFO, LoggingSeverity.WARN], lines
    assert lines[0][1].startswith("connect_object (connect): cube3 connected"), lines
    assert lines[1][1].startswith("connect_object (connect): unknown object 0x12345678"), lines
    assert lines[2][1] == "connect_object (disconnect): cube3 disconnected", lines
    assert rig.node.connected


@pytest.mark.parametrize("keep_links", [False, True], ids=["links-dropped", "links-kept"])
def test_losing_the_robot_disconnects_the_cubes_and_its_return_reconnects_them(make_rig, keep_links):
    """Whether the robot drops its cubes' radio links when the driver's connection goes or
    keeps them (the protocol notes do not say): the cubes are connected again. A robot that
    kept them never let them advertise, and the driver waited for adverts that never came,
    until it released them (their radio slots emptied: ObjectConnect with factory id 0) at
    the reconnection."""
    rig = make_rig()
    rig.sim.robot.model.config.keep_object_links = keep_links
    first = rig.wait_list(all_cubes_connected)
    mark = len(rig.events)
    rig.sim.set_link_up(False)
    for name in ("cube1", "cube2", "cube3"):
        event = rig.wait_event(ObjectEvent.DISCONNECTED, name, after=mark)
        assert "lost the robot" in event.description
    rig.sim.set_link_up(True)
    assert rig.spin_until(lambda: rig.node.connected, CONNECT_TIMEOUT)
    for name in ("cube1", "cube2", "cube3"):
        rig.wait_event(ObjectEvent.CONNECTED, name, after=mark)
    objects = rig.wait_list(all_cubes_connected)
    ids = rig.sim.object_ids()
    assert {objects[f"cube{n}"].object_id for n in (1, 2, 3)} == {ids[1], ids[2], ids[3]}
    assert first["cube1"].factory_id == objects["cube1"].factory_id == C1


@pytest.mark.parametrize("keep_links", [False, True], ids=["links-dropped", "links-kept"])
def test_cubes_connect_again_after_a_cleanup_and_configure_while_the_robot_was_away(make_rig, keep_links):
    """Cleaned up while the robot is away, the driver cannot empty its cubes' radio slots; a
    robot that kept their links would not let them advertise to the new registry, which
    waited for adverts that never came. The first connection of a registry empties every
    slot (as a driver started anew does)."""
    rig = make_rig()
    rig.sim.robot.model.config.keep_object_links = keep_links
    rig.wait_list(all_cubes_connected)
    rig.sim.set_link_up(False)
    assert rig.spin_until(lambda: not rig.node.connected, WAIT)
    rig.node.trigger_deactivate()
    rig.node.trigger_cleanup()
    lists = len(rig.lists)
    assert rig.node.start()
    rig.sim.set_link_up(True)
    assert rig.spin_until(lambda: rig.node.connected, CONNECT_TIMEOUT)

    def connected() -> set:
        return {e.name for e in rig.node._objects.registry.connected_cubes()}
    assert rig.spin_until(lambda: connected() == {"cube1", "cube2", "cube3"}, WAIT), connected()
    assert rig.spin_until(lambda: any(all_cubes_connected({o.name: o for o in msg.objects})
                                      for msg in rig.lists[lists:]), WAIT)


def test_the_list_ages_while_the_robot_is_away(make_rig):
    """No robot state comes while the robot is lost: the node's 1 s timer ages the list, and
    the objects leave it once not heard of for object_timeout, as when it is there."""
    rig = make_rig(object_timeout=1.5)
    rig.wait_list(lambda o: all_cubes_connected(o) and "charger" in o)
    mark = len(rig.events)
    rig.sim.set_link_up(False)
    for name in ("cube1", "cube2", "cube3"):
        rig.wait_event(ObjectEvent.DISCONNECTED, name, after=mark)
    for name in ("cube1", "cube2", "cube3", "charger"):
        event = rig.wait_event(ObjectEvent.DISAPPEARED, name, after=mark)
        # not heard of since the robot was lost (the cubes) or before: on one clock, no jump
        # (the description rounds to 0.1 s)
        heard = float(event.description.split("not heard of for ")[1].split(" s")[0])
        assert 1.5 <= heard < 5.0, event.description
    assert rig.wait_list(lambda o: not o) == {}
    assert not rig.node.connected
    rig.sim.set_link_up(True)                 # back: listed and connected again
    assert rig.spin_until(lambda: rig.node.connected, CONNECT_TIMEOUT)
    rig.wait_list(all_cubes_connected)


# ----------------------------------------------------------------------------- lights

def test_lights_reach_cubes_charger_and_backpack_as_exact_words_and_frames(make_rig):
    rig = make_rig(auto_connect_charger=True)
    rig.wait_list(lambda o: all_cubes_connected(o) and is_connected(o, "charger"))
    lights = rig.publisher(ObjectLights, "object_lights")
    pattern = rig.publisher(BackpackLightPattern, "backpack_light_pattern")

    # the lights count 30 ms frames, rounded up from whole milliseconds (Anki's (ms + 29) / 30);
    # offsets go negated (the firmware moves a light ahead by them), a steady colour as both;
    # a cube's colours with red in them have green and blue at 60 % (Anki's white balance)
    four = [LightState(on_color=rgba(r=1.0), off_color=rgba(g=1.0), on_period=0.5, off_period=0.25,
                       transition_on_period=0.1, transition_off_period=0.2, offset=0.0),
            LightState(on_color=rgba(b=1.0), on_period=1.0, offset=0.1),
            LightState(on_color=rgba(r=3 / 31, g=17 / 31, b=30 / 31)),
            LightState(on_color=rgba(1.0, 1.0, 1.0), off_color=rgba(), on_period=7.65, off_period=7.65,
                       offset=-0.99)]
    lights.publish(ObjectLights(object_type=ObjectInfo.TYPE_LIGHT_CUBE_2, lights=four, rotation_period=0.18))
    expected = [(word(31, 0, 0), word(0, 31, 0), 17, 9, 4, 7, 0), (word(0, 0, 31), 0, 34, 0, 0, 0, -4),
                (word(3, 10, 18), word(3, 10, 18), 0, 0, 0, 0, 0), (word(31, 19, 19), 0, 255, 255, 0, 0, 33)]
    assert rig.spin_until(lambda: [frames(s) for s in rig.sim.object_states()[2]["lights"]] == expected, WAIT)
    assert rig.sim.object_states()[2]["rotation_period_frames"] == 6
    # the limits as LightState's float32 carries them (7.65 is 7.650000095): not out of range
    limits = LightState(on_color=rgba(b=1.0), on_period=7.65, transition_off_period=7.65, offset=983.01)
    lights.publish(ObjectLights(factory_id=C3, lights=[limits], rotation_period=7.65))
    assert rig.spin_until(lambda: [frames(s) for s in rig.sim.object_states()[3]["lights"]]
                          == [(word(0, 0, 31), 0, 255, 0, 0, 255, -32767)] * 4, WAIT)
    assert rig.sim.object_states()[3]["rotation_period_frames"] == 255
    assert not [line for line in rig.log.lines if "outside" in line], rig.log.lines

    one = LightState(on_color=rgba(g=1.0), off_color=rgba(g=10 / 31), on_period=0.2, off_period=0.2)
    lights.publish(ObjectLights(factory_id=C1, lights=[one]))
    assert rig.spin_until(lambda: [frames(s) for s in rig.sim.object_states()[1]["lights"]]
                          == [(word(0, 31, 0), word(0, 10, 0), 7, 7, 0, 0, 0)] * 4, WAIT)
    assert rig.sim.object_states()[1]["rotation_period_frames"] == 0

    three = [LightState(on_color=rgba(r=1.0)), LightState(on_color=rgba(g=1.0)), LightState(on_color=rgba(b=1.0))]
    lights.publish(ObjectLights(factory_id=CH, lights=three))
    assert rig.spin_until(lambda: [s.on_color for s in rig.sim.lights()["charger"]]
                          == [word(31, 0, 0), word(0, 31, 0), word(0, 0, 31), 0], WAIT)

    pattern.publish(BackpackLightPattern(
        front=LightState(on_color=rgba(r=1.0), on_period=0.3, off_period=0.3),
        middle=LightState(on_color=rgba(r=1.0), on_period=0.3, off_period=0.3, offset=0.1),
        back=LightState(on_color=rgba(r=1.0), on_period=0.3, off_period=0.3, offset=0.2),
        left=LightState(on_color=rgba(r=20 / 31)), right=LightState(on_color=rgba(r=1.0), transition_on_period=1.0)))
    assert rig.spin_until(lambda: frames(rig.sim.lights()["backpack"]["right"])
                          == (word(31, 0, 0), 0, 0, 0, 34, 0, 0), WAIT)
    backpack = rig.sim.lights()["backpack"]
    assert [frames(backpack[k]) for k in ("front", "middle", "back", "left")] == [
        (word(31, 0, 0), 0, 10, 10, 0, 0, 0), (word(31, 0, 0), 0, 10, 10, 0, 0, -4),
        (word(31, 0, 0), 0, 10, 10, 0, 0, -7), (word(20, 0, 0), word(20, 0, 0), 0, 0, 0, 0, 0)]
    assert rig.node._lights is not None         # re-applied by the node after a reconnection


def test_bad_light_commands_are_refused_or_clamped_with_a_warning(make_rig):
    rig = make_rig()
    rig.wait_list(all_cubes_connected)
    lights = rig.publisher(ObjectLights, "object_lights")
    pattern = rig.publisher(BackpackLightPattern, "backpack_light_pattern")
    refused = rig.node._objects._refused
    before = [frames(s) for s in rig.sim.object_states()[1]["lights"]]
    cases = [
        (lights, ObjectLights(factory_id=C1, lights=[LightState(on_period=math.nan)]),
         "object_lights refused: object_lights.lights[0].on_period is nan: not a finite number"),
        (lights, ObjectLights(factory_id=C1, lights=[LightState(), LightState(offset=math.inf)]),
         "object_lights refused: object_lights.lights[1].offset is inf"),
        (lights, ObjectLights(factory_id=C1, lights=[LightState(on_color=rgba(r=1.5))]),
         "object_lights refused: object_lights.lights[0].on_color.r = 1.5"),
        (lights, ObjectLights(factory_id=C1, lights=[LightState()] * 2),
         "object_lights refused: object_lights.lights has 2 entries"),
        (lights, ObjectLights(factory_id=C1, lights=[LightState()], rotation_period=math.nan),
         "object_lights refused: object_lights.rotation_period is nan"),
        (lights, ObjectLights(object_type=ObjectInfo.TYPE_CHARGER, lights=[LightState()]),
         "object_lights refused: no charger is connected"),
        (lights, ObjectLights(factory_id=77, lights=[LightState()]),
         "object_lights refused: object_lights.factory_id = 0x0000004d: unknown object"),
        (pattern, BackpackLightPattern(back=LightState(off_period=-math.inf)),
         "backpack_light_pattern refused: backpack_light_pattern.back.off_period is -inf"),
    ]
    for n, (pub, msg, text) in enumerate(cases, 1):
        pub.publish(msg)
        assert rig.spin_until(lambda: rig.node._objects._refused == refused + n, WAIT), text
        assert any(line.startswith(text) for line in rig.log.lines), (text, rig.log.lines[-3:])
    rig.spin_for(0.3)
    assert [frames(s) for s in rig.sim.object_states()[1]["lights"]] == before
    # out of range: clamped, with a warning naming the field
    lights.publish(ObjectLights(factory_id=C1, lights=[LightState(on_color=rgba(b=1.0), on_period=12.0,
                                                                  offset=-2000.0)], rotation_period=9.0))
    assert rig.spin_until(lambda: frames(rig.sim.object_states()[1]["lights"][0])
                          == (word(0, 0, 31), 0, 255, 0, 0, 0, 32767), WAIT)
    assert rig.sim.object_states()[1]["rotation_period_frames"] == 255
    for text in ("object_lights.lights[0].on_period = 12 s is outside [0, 7.65] s: clamped to 7.65 s",
                 "object_lights.lights[0].offset = -2000 s is outside",
                 "object_lights.rotation_period = 9 s is outside"):
        assert any(line.startswith(text) for line in rig.log.lines), text
    assert rig.objects_diagnostics()["light commands refused"] == str(len(cases))
    # the same mistake with another value each time (an overshooting colour at 30 Hz): one line
    # of that kind every 2 s, with a count, not a line (and a dict entry) per value
    said = len(rig.log.lines)
    for k in range(20):   # one at a time: the topic keeps only the latest command
        count = rig.node._objects._refused
        lights.publish(ObjectLights(factory_id=C1, lights=[LightState(on_color=rgba(r=1.0 + (k + 1) / 1024))]))
        assert rig.spin_until(lambda: rig.node._objects._refused == count + 1, WAIT)
    assert len([line for line in rig.log.lines[said:] if "on_color.r" in line]) <= 2, rig.log.lines[said:]


def test_light_animations_by_name(make_rig):
    rig = make_rig(auto_connect_charger=True)
    rig.wait_list(lambda o: all_cubes_connected(o) and is_connected(o, "charger"))

    def play(target: str, name: str):
        return rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target=target, name=name))

    response = play("cubes", "red")
    assert response.success and response.message == "red on cube1, cube2, cube3"
    assert {"off", "red", "blink", "breathe", "pulse", "spin", "chase", "rainbow", "alert"} <= set(response.available)
    assert rig.spin_until(lambda: all(s.on_color == word(31, 0, 0) for n in (1, 2, 3)
                                      for s in rig.sim.object_states()[n]["lights"]), WAIT)
    response = play("cube2", "spin")
    assert response.success
    assert rig.spin_until(lambda: rig.sim.object_states()[2]["rotation_period_frames"] == 3, WAIT)
    assert [s.on_color for s in rig.sim.object_states()[2]["lights"]] == [word(0, 31, 0), 0, 0, 0]
    response = play("backpack", "chase")
    assert response.success
    # front, then middle, then back: each 7 frames later (offsets go negated: they delay)
    assert rig.spin_until(lambda: rig.sim.lights()["backpack"]["back"].offset == -14, WAIT)
    backpack = rig.sim.lights()["backpack"]
    assert [frames(backpack[k]) for k in ("front", "middle", "back")] == [
        (0x7FFF, 0, 7, 14, 0, 0, 0), (0x7FFF, 0, 7, 14, 0, 0, -7), (0x7FFF, 0, 7, 14, 0, 0, -14)]
    response = play("charger", "blink")
    assert response.success
    assert rig.spin_until(lambda: [frames(s) for s in rig.sim.lights()["charger"]]
                          == [(0x7FFF, 0, 17, 17, 0, 0, 0)] * 3 + [(0, 0, 0, 0, 0, 0, 0)], WAIT)
    response = play("cubes", "off")
    assert response.success
    assert rig.spin_until(lambda: all(s.on_color == 0 for n in (1, 2, 3)
                                      for s in rig.sim.object_states()[n]["lights"]), WAIT)
    # errors
    response = play("cube1", "disco")
    assert not response.success and response.message.startswith("unknown light animation 'disco'")
    assert "rainbow" in response.available
    response = play("head", "red")
    assert not response.success and response.message.startswith("unknown target 'head'")
    rig.connect(factory_id=C3, connect=False)
    response = play("cube3", "red")
    assert not response.success and response.message == "cube3 is not connected"


def test_play_light_animation_refusals_are_counted_with_the_other_light_commands_refused(make_rig):
    """/diagnostics' "light commands refused" counted object_lights' and backpack_light_pattern's
    refusals but none of play_light_animation's (an unknown name or target, an object not
    connected); an accepted animation counts nothing."""
    rig = make_rig()
    rig.wait_list(all_cubes_connected)
    before = int(rig.objects_diagnostics()["light commands refused"])
    requests = (("cube1", "disco"), ("head", "red"), ("charger", "red"), ("cube1", "red"))
    answers = [rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target=target, name=name)).success
               for target, name in requests]
    assert answers == [False, False, False, True]
    assert rig.objects_diagnostics()["light commands refused"] == str(before + 3)


def test_play_light_animation_logs_a_refusal_as_a_warning_and_a_success_at_info(make_rig, rclpy_log):
    """A refused play_light_animation (an unknown name or target, an object not connected)
    was logged at INFO, where the driver's other refused requests (connect_object,
    set_camera_info, a refused command) are warnings. Here the driver logs through its own
    rclpy logger (not the rig's recorder)."""
    rig = make_rig()
    rig.node._objects._log = rig.log.logger
    rig.wait_list(all_cubes_connected)

    def play(target: str, name: str):
        return rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target=target, name=name))
    assert play("cube1", "red").success
    assert not play("cube1", "disco").success
    assert play("cubes", "off").success
    assert not play("head", "red").success
    lines = [(line.severity, line.message) for line in rclpy_log.of(rig.node)
             if line.message.startswith("play_light_animation")]
    assert [severity for severity, _ in lines] == [LoggingSeverity.INFO, LoggingSeverity.WARN,
                                                    LoggingSeverity.INFO, LoggingSeverity.WARN], lines
    assert lines[0][1] == "play_light_animation: red on cube1", lines
    assert lines[1][1].startswith("play_light_animation refused: unknown light animation 'disco'"), lines
    assert lines[3][1].startswith("play_light_animation refused: unknown target 'head'"), lines


def test_set_object_accel_stream_logs_a_refusal_as_a_warning_and_a_success_at_info(make_rig, rclpy_log):
    """A refused set_object_accel_stream (an object with no accelerometer, one not known,
    no object named) logged nothing, where connect_object and play_light_animation log a
    refusal as a warning. Through the driver's own rclpy logger, accepted and refused calls
    alternating (rclpy raises when one call site logs at two severities)."""
    rig = make_rig(auto_connect_charger=True)
    rig.node._objects._log = rig.log.logger
    rig.wait_list(lambda o: all_cubes_connected(o) and is_connected(o, "charger"))

    def stream(**fields):
        return rig.call(SetObjectAccelStream, "set_object_accel_stream", SetObjectAccelStream.Request(**fields))
    assert stream(factory_id=C1, enable=True).success
    assert not stream(object_type=ObjectInfo.TYPE_CHARGER, enable=True).success
    assert stream(factory_id=C1, enable=False).success
    assert not stream(factory_id=12345, enable=True).success
    assert not stream(enable=True).success
    lines = [(line.severity, line.message) for line in rclpy_log.of(rig.node)
             if line.message.startswith("set_object_accel_stream")]
    assert [severity for severity, _ in lines] == [LoggingSeverity.INFO, LoggingSeverity.WARN,
                                                    LoggingSeverity.INFO, LoggingSeverity.WARN,
                                                    LoggingSeverity.WARN], lines
    assert lines[0][1] == "set_object_accel_stream: cube1 accelerometer stream on", lines
    assert lines[1][1] == "set_object_accel_stream refused: charger has no accelerometer: only cubes stream one", \
        lines
    # the request's fields by their names: the line names the service once (it said
    # "set_object_accel_stream refused: set_object_accel_stream.factory_id = ...")
    assert lines[3][1].startswith("set_object_accel_stream refused: factory_id = 0x00003039: unknown object"), lines
    assert lines[4][1] == "set_object_accel_stream refused: give factory_id, or object_type (ObjectInfo.TYPE_*)", \
        lines
    assert all(text.count("set_object_accel_stream") == 1 for _, text in lines), lines


def test_a_very_long_light_animation_name_or_target_is_refused_without_being_quoted_whole(make_rig):
    """A 100 000-character name or target (a file's contents sent by mistake): refused, and
    the answer and the log line quote 40 characters of it and its length, not all of it (one
    line of 100 kB a call before, as play_animation's was)."""
    rig = make_rig()
    for target, name, quoted in (("cube1", "x" * 100_000, "unknown light animation 'xxxx"),
                                 ("y" * 100_000, "red", "unknown target 'yyyy")):
        response = rig.call(PlayLightAnimation, "play_light_animation",
                            PlayLightAnimation.Request(target=target, name=name))
        assert not response.success and response.message.startswith(quoted), response.message[:300]
        assert "... (100000 characters)" in response.message and len(response.message) < 400, \
            response.message[:300]
        line = rig.log.lines[-1]
        assert line == f"play_light_animation refused: {response.message}", line[:300]
    # a name of ordinary length is quoted whole, as before
    response = rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target="cube1", name="blink-red"))
    assert response.message.startswith("unknown light animation 'blink-red' (available: alert, "), \
        response.message


def test_a_light_animation_file_adds_animations(make_rig, tmp_path):
    path = tmp_path / "lights.yaml"
    path.write_text('glow_green:\n  light: {on_color: "#00ff00", on_period: 0.5, off_period: 0.5}\n'
                    'broken:\n  light: {on_colour: "#00ff00"}\n')
    rig = make_rig(light_animation_file=str(path))
    rig.wait_list(all_cubes_connected)
    response = rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target="cube1", name="glow_green"))
    assert response.success and "glow_green" in response.available and "broken" not in response.available
    assert rig.spin_until(lambda: [frames(s) for s in rig.sim.object_states()[1]["lights"]]
                          == [(word(0, 31, 0), 0, 17, 17, 0, 0, 0)] * 4, WAIT)


# ----------------------------------------------------------------------------- out of range and back

def test_a_cube_that_disappears_and_comes_back_is_reconnected_with_its_lights(make_rig):
    rig = make_rig(object_timeout=1.5)
    rig.wait_list(all_cubes_connected)
    lights = rig.publisher(ObjectLights, "object_lights")
    lights.publish(ObjectLights(factory_id=C1, lights=[LightState(on_color=rgba(b=1.0))], rotation_period=0.1))
    assert rig.spin_until(lambda: rig.sim.object_states()[1]["lights"][0].on_color == word(0, 0, 31), WAIT)
    old_id = rig.sim.object_ids()[1]
    rig.wait_event(ObjectEvent.UP_AXIS_CHANGED, "cube1")   # (reported after its connection)
    mark, lists = len(rig.events), len(rig.lists)
    rig.sim.set_object_in_range(1, False)
    dropped = rig.wait_event(ObjectEvent.DISCONNECTED, "cube1", after=mark)
    assert "dropped the connection" in dropped.description
    rig.wait_event(ObjectEvent.DISAPPEARED, "cube1", after=mark)
    objects = rig.wait_list(lambda o: "cube1" not in o)
    assert objects["cube2"].connected and objects["cube3"].connected
    # while it was listed and away, which face is up was unknown
    away = [o for msg in rig.lists[lists:] for o in msg.objects if o.name == "cube1" and not o.connected]
    assert away and all(o.up_axis == ObjectInfo.UP_AXIS_UNKNOWN for o in away)
    assert rig.sim.object_states()[1]["slot"] == old_id      # the robot keeps its slot
    sent_before = len(rig.sim.commands())
    rig.sim.set_object_in_range(1, True)
    rig.wait_event(ObjectEvent.APPEARED, "cube1", after=mark)
    connected = rig.wait_event(ObjectEvent.CONNECTED, "cube1", after=mark)
    new_id = rig.sim.object_ids()[1]
    # its id is its radio slot: the one the robot kept for it, which connected it by itself
    assert new_id == old_id == 0 and f"object id {new_id}" in connected.description
    assert not [m for _, m in rig.sim.commands()[sent_before:] if m.NAME == "ObjectConnect"]
    assert rig.wait_list(lambda o: "cube1" in o and o["cube1"].connected)["cube1"].object_id == new_id
    # its light programme was sent again, to its object id, after it came back
    assert rig.spin_until(lambda: any(m.NAME == "CubeId" and m.object_id == new_id
                                      and m.rotation_period_frames == 4
                                      for _, m in rig.sim.commands()[sent_before:]), WAIT)
    rig.wait_event(ObjectEvent.UP_AXIS_CHANGED, "cube1", after=mark)   # reported again
    order = [e.type for e in rig.events[mark:] if e.name == "cube1"]
    assert order == [ObjectEvent.DISCONNECTED, ObjectEvent.DISAPPEARED, ObjectEvent.APPEARED,
                     ObjectEvent.CONNECTED, ObjectEvent.UP_AXIS_CHANGED]


def test_lights_put_out_while_a_cube_is_away_stay_out_when_it_comes_back(make_rig, rclpy_log):
    """An all-off on object_lights for a cube that dropped out (a behavior's end after a robot
    loss sends it so) was refused as "not connected", and the cube got its old programme back
    when it came back; then it was taken and nothing sent, and the cube, which keeps its
    programme across a drop, stayed lit: it is taken, said, and the off is sent when it comes back."""
    rig = make_rig(object_timeout=1.5)
    rig.wait_list(all_cubes_connected)
    lights = rig.publisher(ObjectLights, "object_lights")
    lights.publish(ObjectLights(factory_id=C1, lights=[LightState(on_color=rgba(b=1.0))]))
    assert rig.spin_until(lambda: rig.sim.object_states()[1]["lights"][0].on_color == word(0, 0, 31), WAIT)
    mark = len(rig.events)
    rig.sim.set_object_in_range(1, False)
    rig.wait_event(ObjectEvent.DISCONNECTED, "cube1", after=mark)
    lights.publish(ObjectLights(factory_id=C1, lights=[]))              # no LEDs given: refused as ever
    assert rig.spin_until(lambda: any(line.message.startswith("object_lights refused: cube1")
                                      for line in rclpy_log.of(rig.node)), WAIT), \
        [line.message for line in rclpy_log.of(rig.node)]
    lights.publish(ObjectLights(factory_id=C1, lights=[LightState()]))
    said = "object_lights: cube1 is not connected: its lights stay off when it connects again"
    assert rig.spin_until(lambda: any(line.message == said for line in rclpy_log.of(rig.node)), WAIT), \
        [line.message for line in rclpy_log.of(rig.node)]
    sent_before = len(rig.sim.commands())
    rig.sim.set_object_in_range(1, True)
    rig.wait_event(ObjectEvent.CONNECTED, "cube1", after=mark)
    assert rig.spin_until(lambda: [m.NAME for _, m in rig.sim.commands()[sent_before:]
                                   if m.NAME in ("CubeId", "CubeLights")] == ["CubeId", "CubeLights"], WAIT)
    assert all(s.on_color == s.off_color == 0 for s in rig.sim.object_states()[1]["lights"])   # out
    assert rig.sim.object_states()[2]["lights"][0].on_color == 0   # (never lit: nothing sent)


def test_lights_put_out_while_the_robot_is_away_stay_out_when_it_comes_back(make_rig, rclpy_log):
    """An all-off on object_lights, or play_light_animation off, while the robot was lost was
    refused ("not connected to the robot"), and every cube got its old programme back with the
    robot; then it was taken and nothing sent, and the cubes, which keep their programme, stayed
    lit: it is taken for a known object as for a cube that is away, and the off is sent when the
    cube connects again. Other commands are still refused."""
    rig = make_rig()
    rig.wait_list(all_cubes_connected)
    response = rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target="cubes", name="blue"))
    assert response.success, response.message
    assert rig.spin_until(lambda: all(rig.sim.object_states()[n]["lights"][0].on_color == word(0, 0, 31)
                                      for n in (1, 2, 3)), WAIT)
    mark = len(rig.events)
    rig.sim.set_link_up(False)
    for name in ("cube1", "cube2", "cube3"):
        rig.wait_event(ObjectEvent.DISCONNECTED, name, after=mark)
    lights = rig.publisher(ObjectLights, "object_lights")
    lights.publish(ObjectLights(factory_id=C1, lights=[LightState(on_color=rgba(r=1.0))]))
    assert rig.spin_until(lambda: any(line.message == f"object_lights refused: {NOT_CONNECTED_REFUSAL}"
                                      for line in rclpy_log.of(rig.node)), WAIT)
    lights.publish(ObjectLights(factory_id=C1, lights=[LightState()]))
    said = "object_lights: cube1 is not connected: its lights stay off when it connects again"
    assert rig.spin_until(lambda: any(line.message == said for line in rclpy_log.of(rig.node)), WAIT), \
        [line.message for line in rclpy_log.of(rig.node)]
    response = rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target="cube2", name="off"))
    assert response.success and response.message == (
        "off: cube2 is not connected: its lights stay off when it connects again"), response.message
    response = rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target="cube3", name="red"))
    assert not response.success and response.message == NOT_CONNECTED_REFUSAL
    rig.sim.set_link_up(True)
    assert rig.spin_until(lambda: rig.node.connected, CONNECT_TIMEOUT)
    for name in ("cube1", "cube2", "cube3"):
        rig.wait_event(ObjectEvent.CONNECTED, name, after=mark)

    def lit() -> dict:
        return {n: rig.sim.object_states()[n]["lights"][0].on_color for n in (1, 2, 3)}
    assert rig.spin_until(lambda: lit() == {1: 0, 2: 0, 3: word(0, 0, 31)}, WAIT), lit()
    rig.spin_for(0.5)
    assert lit() == {1: 0, 2: 0, 3: word(0, 0, 31)}         # cube3's programme back, the others out


def test_light_refusals_while_the_robot_is_away_come_every_10_s_and_before_connected_again(make_rig):
    """object_lights refused while the robot was away: a line every 2 s (the core's refusals
    for the driver's state come every 10 s), and the one held back was said by the 1 s timer
    after "connected again", as if the driver still refused. Now every 10 s, and said before it."""
    rig = make_rig()
    rig.wait_list(all_cubes_connected)
    node_log = LogRecorder(rig.node.get_logger(), rig.log.lines)
    rig.node.get_logger = lambda: node_log
    lights = rig.publisher(ObjectLights, "object_lights")
    rig.sim.set_link_up(False)
    assert rig.spin_until(lambda: not rig.node.connected, WAIT)
    for n in range(1, 5):  # over 2.4 s
        count = rig.node._objects._refused
        lights.publish(ObjectLights(factory_id=C1, lights=[LightState(on_color=rgba(b=1.0))]))
        assert rig.spin_until(lambda: rig.node._objects._refused == count + 1, WAIT)
        rig.spin_for(0.8 if n < 4 else 1.2)
    refusals = [line for line in rig.log.lines if line.startswith("object_lights refused")]
    assert refusals == [f"object_lights refused: {NOT_CONNECTED_REFUSAL}"], refusals
    rig.sim.set_link_up(True)
    assert rig.spin_until(lambda: rig.node.connected, CONNECT_TIMEOUT)
    lines = rig.log.lines
    again = next(i for i, line in enumerate(lines) if line.startswith("connected again"))
    held = [i for i, line in enumerate(lines)
            if line.startswith(f"object_lights refused: {NOT_CONNECTED_REFUSAL} (and 2 more like it")]
    assert held and held[0] < again, lines


# ----------------------------------------------------------------------------- lifecycle

def test_deactivate_leaves_the_objects_and_cleanup_turns_their_lights_off(make_rig):
    rig = make_rig()
    rig.wait_list(all_cubes_connected)
    response = rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target="cubes", name="red"))
    assert response.success, response.message
    assert rig.spin_until(lambda: all(rig.sim.object_states()[n]["lights"][0].on_color == word(31, 0, 0)
                                      for n in (1, 2, 3)), WAIT)
    assert rig.node.trigger_deactivate() is not None
    response = rig.connect(factory_id=C1, connect=False)
    inactive = "the driver is not active (activate it: ros2 lifecycle set /cozmo_driver activate)"
    assert not response.success and response.message == inactive, response.message  # (it said no way out)
    response = rig.call(PlayLightAnimation, "play_light_animation",
                        PlayLightAnimation.Request(target="backpack", name="blue"))
    assert not response.success and response.message == inactive, response.message
    response = rig.call(SetObjectAccelStream, "set_object_accel_stream",
                        SetObjectAccelStream.Request(factory_id=C1, enable=True))
    assert not response.success and response.message == inactive, response.message
    rig.spin_for(0.5)
    assert all(rig.sim.object_ids()[n] is not None for n in (1, 2, 3))
    assert all(rig.sim.object_states()[n]["lights"][0].on_color == word(31, 0, 0) for n in (1, 2, 3))
    before = len(rig.sim.commands())
    rig.node.close()                      # cleanup: lights off, objects disconnected, link closed
    assert rig.sim.wait_until(lambda s: all(st.on_color == 0 for n in (1, 2, 3)
                                            for st in s.object_states()[n]["lights"]), WAIT)
    # their slots emptied (ObjectConnect, Anki's SetPropSlot, with factory id 0): the three
    # cubes' own, each once
    slots = {m.factory_id: m.slot for _, m in rig.sim.commands() if m.NAME == "ObjectConnect" and m.factory_id}
    released = [m.slot for _, m in rig.sim.commands()[before:] if m.NAME == "ObjectConnect" and not m.factory_id]
    assert sorted(released) == sorted(slots[c] for c in (C1, C2, C3)) and len(set(released)) == 3
