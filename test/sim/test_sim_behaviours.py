"""The simulated robot's behaviours seen through the project's own engine.

Each test drives a :class:`~cozmo_driver.sim.SimulatedRobot` with an engine
:class:`~cozmo_driver.protocol.session.Session` over the in-memory link
(test/sim_harness.py: explicit clock, seeded, no sockets) and checks what the
engine receives against the simulator's ground truth. test/sim/test_sim_model.py
covers the same behaviours on the bare model; here they cross the wire, some
under 20 % loss in both directions.
"""

from __future__ import annotations

import math

import pytest

from cozmo_driver.driver.sensors import imu_to_body
from cozmo_driver.client.robot import turn_message
from cozmo_driver.protocol import messages as m
from cozmo_driver.sim import CHARGER_FACTORY_ID, CUBE_FACTORY_IDS, ModelConfig, RobotConfig, StatusFlag
from cozmo_driver.sim.model import (
    BATTERY_EMPTY_V,
    BATTERY_FULL_V,
    CLIFF_THRESHOLD_RAW,
    HEAD_MAX_RAD,
    HEAD_MIN_RAD,
    LIFT_MAX_MM,
    LIFT_MIN_MM,
    NV_CHUNK_BYTES,
    wrap_angle,
)
from cozmo_driver.transport.memory import Impairment
from sim_harness import Harness

E = m.ENUMS
PATH = E["PathEventType"]
LightState = m.STRUCTS["LightState"]
from cozmo_driver.robot_geometry import reported_lift_height_m  # noqa: E402


def lift_mm(state) -> float:
    """RobotState's lift in mm (the field carries the arm's angle, as Anki's firmware sends it)."""
    return 1000.0 * reported_lift_height_m(state.lift_height_mm)



def quiet(seed: int = 1, **impairments) -> Harness:
    """A harness whose robot reports without sensor noise, initialised like a driver does."""
    h = Harness(seed=seed, config=RobotConfig(seed=seed, model=ModelConfig(seed=seed, noise=False)),
                **impairments)
    h.initialise(timeout=10.0)
    return h


def lossy(seed: int) -> Harness:
    """20 % loss, some duplication and reordering, in both directions."""
    return quiet(seed, a_to_b=Impairment(loss=0.2, duplicate=0.05, reorder=0.1),
                 b_to_a=Impairment(loss=0.2, duplicate=0.05, reorder=0.1))


def path_events(h: Harness) -> list:
    return [(e.event_id, e.event_type) for e in h.received("PathFollowingEvent")]


def wait_for_path_end(h: Harness, event_id: int, timeout: float = 20.0) -> None:
    ends = (PATH.PATH_COMPLETED, PATH.PATH_INTERRUPTED)
    assert h.run_until(lambda: any(i == event_id and t in ends for i, t in path_events(h)), timeout), \
        f"path {event_id} did not end: {path_events(h)}"


def reported(state) -> tuple:
    return state.pose_x_mm, state.pose_y_mm, state.pose_angle_rad


def state_is(h: Harness, flag) -> bool:
    return bool(h.last_state().status & flag)


# --------------------------------------------------------------------------------- paths

def append_line_arc_turn(h: Harness) -> None:
    """100 mm along x, a quarter circle to the left ending at (200, 100) heading +y,
    then a point turn to face -x: three segments, ending at (200, 100, pi)."""
    h.send(m.AppendPathSegLine(from_x_mm=0, from_y_mm=0, to_x_mm=100, to_y_mm=0,
                               speed_mmps=100, accel_mmps2=200, decel_mmps2=200))
    h.send(m.AppendPathSegArc(center_x_mm=100, center_y_mm=100, radius_mm=100,
                              start_angle_rad=-math.pi / 2, sweep_rad=math.pi / 2, speed_mmps=80,
                              accel_mmps2=200, decel_mmps2=200))
    h.send(m.AppendPathSegPointTurn(x_mm=200, y_mm=100, angle_rad=math.pi, angle_tolerance_rad=0.02,
                                    speed_mmps=40, accel_mmps2=200, decel_mmps2=200))


def test_path_of_line_arc_and_point_turn_is_followed_and_reported():
    h = quiet()
    append_line_arc_turn(h)
    h.run(0.2)
    assert not state_is(h, StatusFlag.IS_PATHING)          # appending alone starts nothing
    h.clear()
    h.send(m.ExecutePath(event_id=9))
    wait_for_path_end(h, 9)
    assert path_events(h) == [(9, PATH.PATH_STARTED), (9, PATH.PATH_COMPLETED)]
    states = h.received("RobotState")
    pathing = [s for s in states if s.status & StatusFlag.IS_PATHING]
    segments = [s.curr_path_segment for s in pathing]
    assert segments == sorted(segments) and set(segments) == {0, 1, 2}   # in order, each seen
    assert all(s.status & StatusFlag.ARE_WHEELS_MOVING for s in pathing[5:-5])
    assert max(s.gyro_z_radps for s in pathing) > 0.5     # the arc and the turn are to the left
    h.run(0.2)
    state = h.last_state()
    assert not state.status & StatusFlag.IS_PATHING and state.curr_path_segment == 0xFF
    assert not state.status & StatusFlag.ARE_WHEELS_MOVING
    x, y, yaw = h.model.true_pose()
    assert (x, y) == pytest.approx((200.0, 100.0), abs=6.0)
    assert abs(wrap_angle(yaw - math.pi)) < 0.03
    # the reported pose is the odometry of the same motion (SetOrigin at the start pose)
    assert reported(state)[:2] == pytest.approx((x, y), abs=1e-3)
    assert abs(wrap_angle(state.pose_angle_rad - yaw)) < 1e-5


def square(h: Harness, side: float = 100.0) -> None:
    pts = [(0, 0), (side, 0), (side, side), (0, side), (0, 0)]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        h.send(m.AppendPathSegLine(from_x_mm=x0, from_y_mm=y0, to_x_mm=x1, to_y_mm=y1,
                                   speed_mmps=100, accel_mmps2=200, decel_mmps2=200))


def test_trim_path_drops_segments_from_either_end():
    h = quiet()
    square(h)
    h.send(m.TrimPath(head=0, tail=3))                      # keep the first side only
    h.send(m.ExecutePath(event_id=1))
    wait_for_path_end(h, 1)
    assert path_events(h)[-1] == (1, PATH.PATH_COMPLETED)
    assert h.model.true_pose()[:2] == pytest.approx((100.0, 0.0), abs=3.0)
    assert {s.curr_path_segment for s in h.received("RobotState")
            if s.status & StatusFlag.IS_PATHING} == {0}
    # from (100, 0): back to the origin, up the y axis, across; the trim keeps the middle
    for (x0, y0), (x1, y1) in (((100, 0), (0, 0)), ((0, 0), (0, 100)), ((0, 100), (100, 100))):
        h.send(m.AppendPathSegLine(from_x_mm=x0, from_y_mm=y0, to_x_mm=x1, to_y_mm=y1,
                                   speed_mmps=100, accel_mmps2=200, decel_mmps2=200))
    h.send(m.TrimPath(head=1, tail=1))
    h.clear()
    h.send(m.ExecutePath(event_id=2))
    wait_for_path_end(h, 2)
    assert path_events(h) == [(2, PATH.PATH_STARTED), (2, PATH.PATH_COMPLETED)]
    h.run(0.1)
    x, y, _ = h.model.true_pose()
    assert (x, y) == pytest.approx((0.0, 100.0), abs=6.0)  # not (100, 100): the last side was trimmed
    assert reported(h.last_state())[:2] == pytest.approx((x, y), abs=1e-3)


def test_clear_path_interrupts_a_running_path_and_empties_a_pending_one():
    h = quiet()
    square(h)
    h.send(m.ExecutePath(event_id=4))
    h.run(1.0)
    assert state_is(h, StatusFlag.IS_PATHING) and state_is(h, StatusFlag.ARE_WHEELS_MOVING)
    h.send(m.ClearPath())
    wait_for_path_end(h, 4, timeout=2.0)
    assert path_events(h) == [(4, PATH.PATH_STARTED), (4, PATH.PATH_INTERRUPTED)]
    h.run(0.5)
    state = h.last_state()
    assert not state.status & (StatusFlag.IS_PATHING | StatusFlag.ARE_WHEELS_MOVING)
    assert state.curr_path_segment == 0xFF
    stopped = h.model.true_pose()
    assert 20.0 < stopped[0] < 100.0                       # stopped part-way along the first side
    # segments cleared before ExecutePath: the path is empty and completes at once
    square(h)
    h.send(m.ClearPath())
    h.clear()
    h.send(m.ExecutePath(event_id=5))
    wait_for_path_end(h, 5, timeout=1.0)
    assert path_events(h) == [(5, PATH.PATH_STARTED), (5, PATH.PATH_COMPLETED)]
    h.run(0.5)
    assert h.model.true_pose() == stopped
    assert not any(s.status & StatusFlag.IS_PATHING for s in h.received("RobotState"))


# --------------------------------------------------------------------------------- turns, head, lift

@pytest.mark.parametrize("shortest", [False, True])
def test_turn_in_place_turns_to_its_heading_and_is_acknowledged_when_taken(shortest):
    """As Anki's firmware: the angle is the heading to reach (here 90 degrees, from 0.3 rad);
    the turn is acknowledged when the robot takes it, and goes on."""
    h = quiet()
    h.send(m.TurnInPlace(angle_rad=0.3, speed_rad_per_sec=3.0, accel_rad_per_sec2=10.0,
                         angle_tolerance_rad=math.radians(1), is_absolute=True, action_id=1))
    assert h.run_until(lambda: h.received("AcknowledgeAction"), 3.0)
    h.run(1.0)
    h.clear()
    h.send(m.TurnInPlace(angle_rad=math.pi / 2, speed_rad_per_sec=2.0, accel_rad_per_sec2=10.0,
                         angle_tolerance_rad=math.radians(1), is_absolute=shortest, action_id=42))
    assert h.run_until(lambda: h.received("AcknowledgeAction"), 0.5)
    assert [a.action_id for a in h.received("AcknowledgeAction")] == [42]
    h.run(0.3)
    turning = h.last_state()
    assert turning.status & StatusFlag.ARE_WHEELS_MOVING and turning.gyro_z_radps > 0.5
    assert turning.lwheel_speed_mmps == pytest.approx(-turning.rwheel_speed_mmps)
    assert h.run_until(lambda: not h.last_state().status & StatusFlag.ARE_WHEELS_MOVING, 5.0)
    h.run(0.1)
    target = math.pi / 2
    state = h.last_state()
    assert abs(wrap_angle(state.pose_angle_rad - target)) <= math.radians(1.01)
    assert abs(wrap_angle(h.model.true_pose()[2] - target)) <= math.radians(1.01)
    assert not state.status & StatusFlag.ARE_WHEELS_MOVING
    assert math.hypot(*h.model.true_pose()[:2]) < 1e-6      # on the spot


def test_move_head_and_lift_run_at_speed_to_the_limits_and_stop():
    h = quiet()
    h.run(0.2)
    start = h.last_state()
    assert start.head_angle_rad == pytest.approx(HEAD_MIN_RAD)
    assert lift_mm(start) == pytest.approx(LIFT_MIN_MM)
    h.send(m.MoveHead(speed_rad_per_sec=0.5))
    h.send(m.MoveLift(speed_rad_per_sec=0.5))
    h.run(0.4)
    moving = h.last_state()
    assert not moving.status & (StatusFlag.HEAD_IN_POS | StatusFlag.LIFT_IN_POS)
    assert moving.status & StatusFlag.IS_MOVING
    assert moving.head_angle_rad == pytest.approx(HEAD_MIN_RAD + 0.5 * 0.4, abs=0.02)
    assert LIFT_MIN_MM + 5.0 < lift_mm(moving) < LIFT_MAX_MM
    # stop both half-way with speed 0: they stay where they are
    h.send(m.MoveHead(speed_rad_per_sec=0.0))
    h.send(m.MoveLift(speed_rad_per_sec=0.0))
    h.run(0.1)
    held = (h.model.head_angle, h.model.lift_height)
    h.run(0.5)
    state = h.last_state()
    assert (h.model.head_angle, h.model.lift_height) == held
    assert (state.head_angle_rad, lift_mm(state)) == pytest.approx(held, abs=1e-4)
    assert state.status & StatusFlag.HEAD_IN_POS and state.status & StatusFlag.LIFT_IN_POS
    # full speed up: each stops at its upper limit
    h.send(m.MoveHead(speed_rad_per_sec=10.0))
    h.send(m.MoveLift(speed_rad_per_sec=10.0))
    h.run(2.0)
    state = h.last_state()
    assert state.head_angle_rad == pytest.approx(HEAD_MAX_RAD, abs=1e-5)
    assert lift_mm(state) == pytest.approx(LIFT_MAX_MM, abs=1e-3)
    assert state.status & StatusFlag.HEAD_IN_POS and state.status & StatusFlag.LIFT_IN_POS
    assert not state.status & StatusFlag.IS_MOVING
    # and down to the lower limits
    h.send(m.MoveHead(speed_rad_per_sec=-10.0))
    h.send(m.MoveLift(speed_rad_per_sec=-10.0))
    h.run(2.0)
    state = h.last_state()
    assert state.head_angle_rad == pytest.approx(HEAD_MIN_RAD, abs=1e-5)
    assert lift_mm(state) == pytest.approx(LIFT_MIN_MM, abs=1e-3)
    assert h.model.head_angle == pytest.approx(HEAD_MIN_RAD)
    assert h.model.lift_height == pytest.approx(LIFT_MIN_MM)


# --------------------------------------------------------------------------------- cliff, battery

def test_stop_on_cliff_stops_at_the_table_edge():
    h = quiet()
    h.send(m.EnableStopOnCliff(enable=True))
    h.robot.teleport(h.now, 450.0, 0.0, 0.0)               # 150 mm from the edge, facing it
    h.clear()
    h.send(m.DriveWheels(lwheel_speed_mmps=150, rwheel_speed_mmps=150))
    h.run(3.0)
    x, _, _ = h.model.true_pose()
    assert 560.0 < x < 600.0                                # the front sensor saw the edge first
    state = h.last_state()
    assert state.status & StatusFlag.CLIFF_DETECTED
    assert not state.status & StatusFlag.ARE_WHEELS_MOVING
    assert (state.lwheel_speed_mmps, state.rwheel_speed_mmps) == (0.0, 0.0)
    assert max(state.cliff_data_raw) < CLIFF_THRESHOLD_RAW      # one sensor, its reading four times
    assert not h.received("FallingStarted") and not h.model.on_floor
    # backing away is allowed, and the sensors see the table again
    h.send(m.DriveWheels(lwheel_speed_mmps=-50, rwheel_speed_mmps=-50))
    h.run(1.0)
    state = h.last_state()
    assert not state.status & StatusFlag.CLIFF_DETECTED
    assert min(state.cliff_data_raw) > CLIFF_THRESHOLD_RAW
    # with the stop disabled the robot drives off the table and falls
    h.send(m.EnableStopOnCliff(enable=False))
    h.send(m.DriveWheels(lwheel_speed_mmps=150, rwheel_speed_mmps=150))
    assert h.run_until(lambda: h.received("FallingStopped"), 3.0)
    assert [x.NAME for x in h.received() if x.NAME.startswith("Falling")] == ["FallingStarted",
                                                                             "FallingStopped"]
    assert h.model.on_floor


def test_battery_drains_faster_while_moving_and_charges_on_the_charger():
    h = quiet()
    h.run(0.1)

    def volts() -> float:
        return h.last_state().battery_voltage_v

    v0 = volts()
    assert BATTERY_EMPTY_V < v0 < BATTERY_FULL_V
    h.run(30.0)
    idle_drop = v0 - volts()
    h.send(m.TurnInPlaceAtSpeed(wheel_speed_mmps=40, wheel_accel_mmps2=1000, direction=1))
    h.run(0.5)
    assert v0 - volts() > 0.03                              # sag under load
    h.run(29.5)
    h.send(m.StopAllMotors())
    h.run(0.2)
    moving_drop = (v0 - idle_drop) - volts()
    assert moving_drop > 2.5 * idle_drop > 0
    h.robot.set_on_charger(True, h.now)
    h.run(0.1)
    on = h.last_state()
    assert on.status & StatusFlag.IS_ON_CHARGER and on.status & StatusFlag.IS_CHARGING
    assert h.model.true_pose() == pytest.approx(h.model.world.charger_pose)
    h.run(30.0)
    assert volts() > on.battery_voltage_v + 0.005           # charging
    assert h.last_state().status & StatusFlag.IS_CHARGING
    # driving off the charger ends charging
    h.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    h.run(1.0)
    assert not h.last_state().status & (StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING)


# --------------------------------------------------------------------------------- animation stream

def test_record_heading_anim_body_and_turn_to_recorded_heading():
    h = quiet()
    h.send(m.EnableAnimationState())
    h.send(m.TurnInPlace(angle_rad=0.4, speed_rad_per_sec=3.0, accel_rad_per_sec2=10.0,
                         angle_tolerance_rad=math.radians(0.5), is_absolute=True, action_id=1))
    assert h.run_until(lambda: h.received("AcknowledgeAction") and not h.model.is_moving, 3.0)
    recorded = h.model.true_pose()[2]

    def frames(n: int, *keyframes) -> None:
        """n frames of the stream: each an audio message first, the keyframes in the first."""
        h.send(m.OutputSilence())
        for k in keyframes:
            h.send(k)
        for _ in range(n - 1):
            h.send(m.OutputSilence())

    # AnimBody straight (radius 32767) for half a second ...
    frames(20, m.RecordHeading(), m.AnimBody(speed_mmps=60, unknown=32767))
    h.run(0.6)
    assert h.model.recorded_heading == pytest.approx(recorded)
    state = h.last_state()
    assert state.lwheel_speed_mmps == state.rwheel_speed_mmps == pytest.approx(60.0)
    x, y, _ = h.model.true_pose()
    assert math.hypot(x, y) > 20.0 and math.atan2(y, x) == pytest.approx(recorded, abs=1e-3)
    # ... then in place (radius 0) to the left at 90 deg/s, away from the recorded heading
    frames(20, m.AnimBody(speed_mmps=90, unknown=0))
    h.run(0.6)
    state = h.last_state()
    tread = math.pi / 2 * 23.0                                     # mm/s, on a 46 mm track
    assert (state.lwheel_speed_mmps, state.rwheel_speed_mmps) == pytest.approx((-tread, tread))
    yaw_rate = imu_to_body(state.gyro_x_radps, state.gyro_y_radps, state.gyro_z_radps,
                           state.head_angle_rad)[2]      # the IMU is in the head
    assert yaw_rate == pytest.approx(math.pi / 2, rel=0.02)
    turned = h.model.true_pose()[2]
    assert wrap_angle(turned - recorded) > 0.5
    # TurnToRecordedHeading turns back and stops there
    frames(3, m.TurnToRecordedHeading())
    h.run(2.0)
    state = h.last_state()
    assert abs(wrap_angle(h.model.true_pose()[2] - recorded)) < math.radians(2.01)
    assert abs(wrap_angle(state.pose_angle_rad - recorded)) < math.radians(2.01)
    assert not state.status & StatusFlag.ARE_WHEELS_MOVING


# --------------------------------------------------------------------------------- objects

def connect_cubes(h: Harness) -> dict:
    """Connect the three cubes as advertised; cube number (1..3) -> object id."""
    assert h.run_until(lambda: {a.factory_id for a in h.received("ObjectAvailable")}
                       >= set(CUBE_FACTORY_IDS), 5.0)
    for slot, fid in enumerate(CUBE_FACTORY_IDS):
        h.send(m.ObjectConnect(factory_id=fid, slot=slot))
    assert h.run_until(lambda: len(h.received("ObjectConnectionState")) >= 3, 5.0)
    by_factory = {s.factory_id: s.object_id for s in h.received("ObjectConnectionState") if s.connected}
    ids = {n + 1: by_factory[fid] for n, fid in enumerate(CUBE_FACTORY_IDS)}
    assert ids == {n: oid for n, oid in h.model.object_ids().items() if n}
    return ids


def test_cube_id_and_cube_lights_are_recorded_per_cube():
    h = quiet()
    ids = connect_cubes(h)
    red = LightState(on_color=0x7C00, off_color=0, on_frames=5, off_frames=5)
    green = LightState(on_color=0x03E0)
    h.send(m.CubeId(object_id=ids[2], rotation_period_frames=6))
    h.send(m.CubeLights(states=[red, green, red, green]))
    h.send(m.CubeId(object_id=ids[3], rotation_period_frames=0))
    h.send(m.CubeLights(states=[green] * 4))
    h.run(0.2)
    cubes = h.model.lights()["cubes"]
    assert cubes[2] == [red, green, red, green]
    assert cubes[3] == [green] * 4
    assert [s.on_color for s in cubes[1]] == [0] * 4            # cube 1 untouched
    states = h.model.object_states()
    assert states[2]["rotation_period_frames"] == 6 and states[3]["rotation_period_frames"] == 0


def test_stream_object_accel_follows_the_cube_up_axis():
    h = quiet()
    ids = connect_cubes(h)
    h.clear()
    h.send(m.StreamObjectAccel(object_id=ids[1], enable=True))
    h.run(1.0)
    # each cube says which face is up once connected (the firmware, about 0.5 s after)
    assert sorted((u.object_id, u.axis) for u in h.received("ObjectUpAxisChanged")) == [
        (i, E["UpAxis"].ZPositive) for i in sorted(ids.values())]
    h.clear()
    h.run(1.0)
    accel = h.received("ObjectAccel")
    assert 28 <= len(accel) <= 36 and {a.object_id for a in accel} == {ids[1]}
    last = accel[-1]
    assert (last.accel_x, last.accel_y, last.accel_z) == pytest.approx((0.0, 0.0, 64.0))  # counts: 1 g
    stamps = [a.timestamp_ms for a in accel]
    assert stamps == sorted(stamps)
    h.robot.set_cube_up_axis(1, E["UpAxis"].XPositive, h.now)
    h.run(0.2)
    [changed] = h.received("ObjectUpAxisChanged")
    assert (changed.object_id, changed.axis) == (ids[1], E["UpAxis"].XPositive)
    assert h.model.object_states()[1]["up_axis"] == E["UpAxis"].XPositive
    last = h.received("ObjectAccel")[-1]
    assert (last.accel_x, last.accel_y, last.accel_z) == pytest.approx((64.0, 0.0, 0.0))
    h.send(m.StreamObjectAccel(object_id=ids[1], enable=False))
    h.run(0.1)
    h.clear()
    h.run(0.5)
    assert not h.received("ObjectAccel")


def test_object_moved_stopped_and_power_level_reach_the_engine():
    h = quiet()
    ids = connect_cubes(h)
    h.run(0.6)                                               # the first power report after connecting
    first = {p.object_id: p.battery_level for p in h.received("ObjectPowerLevel")}
    assert first == {ids[n]: h.model.object_states()[n]["battery_level"] for n in (1, 2, 3)}
    h.clear()
    t0 = h.now
    assert h.robot.move_cube(2, h.now)
    h.run(0.3)
    assert h.robot.stop_cube(2, h.now)
    h.robot.set_cube_battery(3, 17, h.now)
    h.run(0.2)
    names = [x.NAME for x in h.received() if x.NAME.startswith("Object") and x.NAME != "ObjectAvailable"]
    assert names == ["ObjectMoved", "ObjectStoppedMoving", "ObjectPowerLevel"]
    [moved], [stopped] = h.received("ObjectMoved"), h.received("ObjectStoppedMoving")
    assert moved.object_id == stopped.object_id == ids[2]
    assert moved.active_accel_z == pytest.approx(64.0)    # raw counts: 1 g
    assert stopped.timestamp_ms - moved.timestamp_ms == pytest.approx(300, abs=1)
    assert moved.timestamp_ms == pytest.approx(t0 * 1000.0, abs=1)       # SyncTime(0) at t = 0
    [power] = h.received("ObjectPowerLevel")
    assert (power.object_id, power.battery_level) == (ids[3], 17)
    # and every 10 s for each connected cube
    h.clear()
    h.run(10.5)
    assert sorted(p.object_id for p in h.received("ObjectPowerLevel")) == sorted(ids.values())


# --------------------------------------------------------------------------------- head light, NV

def test_set_head_light_is_recorded_in_order():
    h = quiet()
    assert h.model.lights()["head_light"] is False
    h.send(m.SetHeadLight(enable=True))
    h.run(0.1)
    assert h.model.lights()["head_light"] is True and h.model.camera.head_light
    h.send(m.SetHeadLight(enable=False))
    h.send(m.SetHeadLight(enable=True))
    h.send(m.SetHeadLight(enable=False))
    h.run(0.1)
    assert h.model.lights()["head_light"] is False and not h.model.camera.head_light
    assert h.model.command_counts["SetHeadLight"] == 4


def nv(h: Harness, op, tag, data: bytes = b"", length: int = 0, replies: int = 1) -> list:
    h.clear()
    h.send(m.NvStorageOp(tag=tag, length=length, op=op, data=data))
    assert h.run_until(lambda: len(h.received("NvStorageOpResult")) >= replies, 3.0)
    h.run(0.05)
    return h.received("NvStorageOpResult")


def test_nv_storage_write_in_parts_read_back_and_erase():
    h = quiet()
    op, tag, res = E["NvOperation"], E["NvEntryTag"].NVEntry_GameSkillLevels, E["NvResult"]
    assert [r.result for r in nv(h, op.NVOP_READ, tag)] == [res.NV_NOT_FOUND]
    blob = bytes((7 * i) & 0xFF for i in range(2500))       # three parts of at most 1000 B
    results = []
    for start in range(0, len(blob), NV_CHUNK_BYTES):
        results += nv(h, op.NVOP_WRITE, tag, blob[start:start + NV_CHUNK_BYTES], length=len(blob))
    assert [r.result for r in results] == [res.NV_MORE, res.NV_MORE, res.NV_OKAY]
    assert [r.length for r in results] == [1000, 2000, 2500]
    assert h.model.nv_store[int(tag)] == blob
    parts = nv(h, op.NVOP_READ, tag, replies=3)
    assert [p.result for p in parts] == [res.NV_MORE, res.NV_MORE, res.NV_OKAY]
    assert b"".join(bytes(p.data) for p in parts) == blob and {p.length for p in parts} == {len(blob)}
    # a short write replaces the entry in one go
    assert [r.result for r in nv(h, op.NVOP_WRITE, tag, b"skill", length=5)] == [res.NV_OKAY]
    assert h.model.nv_store[int(tag)] == b"skill"
    assert [r.result for r in nv(h, op.NVOP_ERASE, tag)] == [res.NV_OKAY]
    assert int(tag) not in h.model.nv_store
    assert [r.result for r in nv(h, op.NVOP_READ, tag)] == [res.NV_NOT_FOUND]
    assert [r.result for r in nv(h, op.NVOP_ERASE, tag)] == [res.NV_NOT_FOUND]
    # the factory camera calibration survives
    calib = nv(h, op.NVOP_READ, E["NvEntryTag"].NVEntry_CameraCalib)
    assert calib[-1].result == res.NV_OKAY and bytes(calib[-1].data) == \
        h.model.nv_store[int(E["NvEntryTag"].NVEntry_CameraCalib)]


# --------------------------------------------------------------------------------- under 20 % loss

def test_path_under_20_percent_loss_both_ways():
    h = lossy(seed=21)
    append_line_arc_turn(h)
    h.send(m.ExecutePath(event_id=3))
    wait_for_path_end(h, 3, timeout=30.0)
    assert path_events(h) == [(3, PATH.PATH_STARTED), (3, PATH.PATH_COMPLETED)]   # once each, in order
    x, y, yaw = h.model.true_pose()
    assert (x, y) == pytest.approx((200.0, 100.0), abs=6.0) and abs(wrap_angle(yaw - math.pi)) < 0.03
    h.run(1.0)
    state = h.last_state()                                  # states are unreliable: some were lost
    assert reported(state)[:2] == pytest.approx((x, y), abs=1e-3)
    assert not state.status & StatusFlag.IS_PATHING
    assert h.link.dropped > 20


def test_turn_in_place_acks_under_20_percent_loss_both_ways():
    h = lossy(seed=22)
    for k in range(1, 7):
        # 60 degrees more each time, counter-clockwise: the heading to reach
        h.send(turn_message(k * math.pi / 3, 3.0, 20.0, math.radians(1), k, turn_rad=math.pi / 3))
        assert h.run_until(lambda k=k: len(h.received("AcknowledgeAction")) >= k, 10.0), f"turn {k}"
        assert h.run_until(lambda: abs(wrap_angle(h.model.yaw_u - k * math.pi / 3)) < math.radians(1.01)
                           and not h.model.is_moving, 10.0), f"turn {k} did not end"
    assert [a.action_id for a in h.received("AcknowledgeAction")] == list(range(1, 7))
    # six turns of 60 degrees: once round, each within its tolerance
    assert h.model.yaw_u == pytest.approx(2 * math.pi, abs=6 * math.radians(1.01))
    assert h.link.dropped > 10


def test_cube_lights_under_20_percent_loss_both_ways():
    h = lossy(seed=23)
    ids = connect_cubes(h)
    for step in range(20):
        for n in (1, 2, 3):
            colour = (step * 3 + n) & 0x7FFF
            h.send(m.CubeId(object_id=ids[n], rotation_period_frames=step))
            h.send(m.CubeLights(states=[LightState(on_color=colour, off_color=k) for k in range(4)]))
        h.run(0.05)
    assert h.run_until(lambda: h.engine.send_queue_length == 0, 10.0)
    h.run(0.5)
    cubes = h.model.lights()["cubes"]
    for n in (1, 2, 3):                                     # the last state of each, never another's
        last_colour = (19 * 3 + n) & 0x7FFF
        assert [(s.on_color, s.off_color) for s in cubes[n]] == [(last_colour, k) for k in range(4)]
        assert h.model.object_states()[n]["rotation_period_frames"] == 19
    assert h.model.command_counts["CubeLights"] == 60       # each delivered exactly once
    assert h.link.dropped > 20
    assert CHARGER_FACTORY_ID not in {s.factory_id for s in h.received("ObjectConnectionState")}
