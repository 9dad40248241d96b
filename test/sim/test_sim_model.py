"""The simulated robot's body (cozmo_driver.sim.model), driven by an explicit clock."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cozmo_driver.client.robot import turn_message
from cozmo_driver.protocol import messages as m
from cozmo_driver.protocol.audio import decode_ulaw, encode_ulaw
from cozmo_driver.protocol.display import encode_display
from cozmo_driver.sim.model import (
    BATTERY_EMPTY_V,
    BATTERY_FULL_V,
    CAMERA_CALIB_SIZE,
    CHARGER_FACTORY_ID,
    CLIFF_THRESHOLD_RAW,
    CUBE_FACTORY_IDS,
    GRAVITY_MMPS2,
    HEAD_MAX_RAD,
    HEAD_MIN_RAD,
    LIFT_MAX_MM,
    LIFT_MIN_MM,
    MAX_WHEEL_SPEED_MMPS,
    NV_CHUNK_BYTES,
    TRACK_WIDTH_MM,
    CameraCalibration,
    ModelConfig,
    RobotModel,
    StatusFlag,
    decode_camera_calibration,
    encode_camera_calibration,
    lift_angle_to_height,
    lift_height_to_angle,
    wrap_angle,
)
from cozmo_driver.protocol.errors import RemoteProtocolError
from cozmo_driver.sim.model import SYNC_TIME_ACK_DELAY_S
from cozmo_driver.sim.motors import HEAD_MAX_SPEED_RADPS
from cozmo_driver.sim.world import World, camera_intrinsics

E = m.ENUMS
from cozmo_driver.robot_geometry import reported_lift_height_m  # noqa: E402


def lift_mm(state) -> float:
    """RobotState's lift in mm (the field carries the arm's angle, as Anki's firmware sends it)."""
    return 1000.0 * reported_lift_height_m(state.lift_height_mm)



class Clock:
    """Runs a model on its own timer, like the front-end does."""

    def __init__(self, model: RobotModel, now: float = 0.0) -> None:
        self.model = model
        self.now = now
        self.out: list = []

    def run(self, duration: float, max_ticks: int = 200_000) -> None:
        end = self.now + duration
        for _ in range(max_ticks):
            tick = self.model.next_tick()
            if tick is None or tick > end:
                break
            self.now = max(self.now, tick)
            self.model.advance(self.now)
            self.out.extend(self.model.pop_outgoing())
        else:
            raise AssertionError("model did not settle")
        self.now = end
        self.model.advance(end)
        self.out.extend(self.model.pop_outgoing())

    def send(self, message) -> None:
        self.model.handle(message, self.now)
        self.out.extend(self.model.pop_outgoing())

    def take(self, name: str | None = None) -> list:
        found = [x for x in self.out if name is None or x.NAME == name]
        self.out = [x for x in self.out if not (name is None or x.NAME == name)]
        return found

    def names(self, exclude=("RobotState", "ObjectAvailable", "AnimationState")) -> list:
        return [x.NAME for x in self.out if x.NAME not in exclude]


def make(connected: bool = True, streaming: bool = True, **kw) -> Clock:
    kw.setdefault("noise", False)
    kw.setdefault("calibrate_at_connection", False)  # the tests of calibration ask for it
    model = RobotModel(World(0), ModelConfig(**kw))
    clock = Clock(model)
    if connected:
        model.on_connected(0.0)
        clock.out.extend(model.pop_outgoing())
        if streaming:
            clock.send(m.Enable())
            clock.send(m.SyncTime())
    clock.out.clear()
    return clock


def last_state(clock: Clock):
    states = clock.take("RobotState")
    assert states, "no RobotState"
    return states[-1]


# ------------------------------------------------------------------------------- connection

def test_greeting_and_body_info_once():
    model = RobotModel(World(0), ModelConfig(noise=False))
    model.on_connected(0.0)
    hw, fw = model.pop_outgoing()
    assert hw.NAME == "HardwareInfo" and hw.serial_number_head
    sig = json.loads(fw.signature)
    assert sig["version"] == 2381 and sig["build"] in ("DEVELOPMENT", "FACTORY")
    model.handle(m.Enable(), 0.0)
    model.handle(m.Enable(), 0.0)
    out = model.pop_outgoing()
    assert [x.NAME for x in out] == ["BodyInfo"]
    assert out[0].body_color == E["BodyColor"].WHITE_v15


def test_state_streams_only_after_enable_and_synctime():
    clock = make(streaming=False)
    clock.run(0.5)
    assert not clock.take("RobotState") and not clock.take("ObjectAvailable")
    clock.send(m.SyncTime(timestamp_ms=0))       # before Enable: clock only
    clock.run(0.5)
    assert not clock.take("RobotState")
    clock.send(m.Enable())
    clock.send(m.SyncTime(timestamp_ms=1000))
    start = clock.now
    clock.run(2.0)
    states = clock.take("RobotState")
    assert 60 <= len(states) <= 68               # every 30 ms
    assert states[0].timestamp_ms == 1000
    assert abs(states[-1].timestamp_ms - (1000 + (clock.now - start) * 1000)) <= 31
    assert {a.object_type for a in clock.take("ObjectAvailable")} == {
        E["ObjectType"].Block_LIGHTCUBE1, E["ObjectType"].Block_LIGHTCUBE2,
        E["ObjectType"].Block_LIGHTCUBE3, E["ObjectType"].Charger_Basic}


def test_the_robot_acknowledges_each_connections_sync_time_once():
    """Anki's firmware sends an empty SyncTimeAck once a connection, a few control ticks
    after SyncTime (the simulator: 0xc2, which the reference client calls RobotDelocalized;
    see client.link.SYNC_TIME_ACK), and again on the next connection only."""
    clock = make(streaming=False)
    clock.send(m.Enable())
    clock.send(m.SyncTime())
    clock.run(SYNC_TIME_ACK_DELAY_S - 0.005)
    assert "RobotDelocalized" not in clock.names()
    clock.run(0.01)
    assert clock.names().count("RobotDelocalized") == 1
    clock.send(m.SyncTime())           # a second SyncTime on the same connection: no ack
    clock.run(0.5)
    assert clock.names().count("RobotDelocalized") == 1
    clock.model.on_disconnected(clock.now)
    clock.model.on_connected(clock.now)
    clock.send(m.Enable())
    clock.send(m.SyncTime())
    clock.model.on_disconnected(clock.now)    # gone before its ack: none is sent
    clock.run(0.1)
    assert clock.names().count("RobotDelocalized") == 1
    clock.model.on_connected(clock.now)
    clock.send(m.Enable())
    clock.send(m.SyncTime())
    clock.run(0.1)
    assert clock.names().count("RobotDelocalized") == 2


def test_a_late_tick_never_sends_two_states_in_one_millisecond():
    # a host that wakes the simulator 29.6 ms late must not make it catch up with a second
    # state 0.4 ms later: the driver drops a state whose robot time is not newer than the last
    clock = make()
    clock.run(0.1)
    clock.take("RobotState")
    due = clock.model.next_tick()
    for late in (0.0296, 0.0101, 0.045, 0.0296):
        clock.now = due + late
        clock.model.advance(clock.now)
        clock.out.extend(clock.model.pop_outgoing())
        due = clock.model.next_tick()
        clock.now = due
        clock.model.advance(clock.now)
        clock.out.extend(clock.model.pop_outgoing())
        due = clock.model.next_tick()
    stamps = [s.timestamp_ms for s in clock.take("RobotState")]
    assert len(stamps) == 8
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert min(gaps) >= 15, gaps


def test_nothing_moves_before_enable():
    """Enable powers the body (the protocol notes, seed 003): motion commands before it are
    ignored. The simulator drove, turned the head and followed paths without it."""
    clock = make(streaming=False)
    for message in (m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100),
                    m.SetHeadAngle(angle_rad=0.3, action_id=1), m.MoveLift(speed_rad_per_sec=1.0),
                    m.TurnInPlace(angle_rad=1.0, speed_rad_per_sec=2.0, is_absolute=False)):
        clock.send(message)
    clock.run(1.0)
    untouched = make(streaming=False).model
    x, y, yaw = clock.model.true_pose()
    assert (x, y, yaw) == pytest.approx(untouched.true_pose())
    assert (clock.model.head_angle, clock.model.lift_height) == pytest.approx(
        (untouched.head_angle, untouched.lift_height))
    assert not clock.take("AcknowledgeAction")
    clock.send(m.Enable())
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    clock.run(1.0)
    assert clock.model.true_pose()[0] > x + 50


def test_held_treads_are_driven_but_neither_move_the_robot_nor_measure_speed():
    """hold_treads: the robot stands, its treads driven on (ARE_WHEELS_MOVING) but still as
    their encoders and its gyro see them; let go, it drives on."""
    clock = make()
    clock.send(m.DriveWheels(lwheel_speed_mmps=60, rwheel_speed_mmps=100))
    clock.run(0.5)
    clock.model.hold_treads(clock.now)
    clock.run(0.1)
    clock.take()
    before = clock.model.true_pose()
    clock.run(1.0)
    assert clock.model.true_pose() == before
    state = last_state(clock)
    assert (state.lwheel_speed_mmps, state.rwheel_speed_mmps, state.gyro_z_radps) == (0.0, 0.0, 0.0)
    assert state.status & StatusFlag.ARE_WHEELS_MOVING
    clock.model.hold_treads(clock.now, held=False)
    clock.run(0.5)
    assert clock.model.true_pose()[0] > before[0] + 20.0
    assert last_state(clock).lwheel_speed_mmps == pytest.approx(60.0)


def test_idle_model_needs_no_ticks():
    clock = make(connected=False)
    assert clock.model.next_tick() is None
    clock.model.handle(m.Enable(), 0.0)
    assert clock.model.next_tick() is None
    clock.model.handle(m.DriveWheels(lwheel_speed_mmps=50, rwheel_speed_mmps=50), 0.0)
    assert clock.model.next_tick() == pytest.approx(0.01)  # 100 Hz physics while moving
    clock.send(m.StopAllMotors())
    clock.run(0.1)
    assert clock.model.next_tick() is None


def test_disconnect_stops_the_streams_and_with_stop_motors_on_link_end_the_motors():
    clock = make(stop_motors_on_link_end=True)
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    clock.send(m.MoveHead(speed_rad_per_sec=0.5))
    clock.run(0.2)
    clock.model.on_disconnected(clock.now)
    assert not clock.model.is_moving
    clock.out.clear()
    clock.run(1.0)
    assert clock.out == []


@pytest.mark.parametrize("link_change", ["on_disconnected", "on_connected"])
def test_by_default_a_link_that_ends_or_begins_leaves_the_motors_on_their_last_command(link_change):
    """The notes do not say what a robot does with its motors when a link ends: by default
    the simulator keeps them on their last command, as a robot whose stop was lost with the
    link does, so that only the driver's own StopAllMotors at a new connection stops them
    (the simulator stopped every motor, and a driver without that stop passed). Treads an
    animation drove stop with its stream, as when it starves."""
    clock = make()
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    clock.send(m.MoveHead(speed_rad_per_sec=0.5))
    clock.run(0.2)
    getattr(clock.model, link_change)(clock.now)
    x, head = clock.model.true_pose()[0], clock.model.head_angle
    clock.out.clear()
    clock.run(1.0)
    assert clock.model.true_pose()[0] == pytest.approx(x + 100.0, abs=1e-6)
    assert clock.model.is_moving and clock.model.head_angle == pytest.approx(head + 0.5)
    if link_change == "on_disconnected":
        assert not clock.take("RobotState")
    clock = make()
    clock.send(m.EnableAnimationState())
    clock.send(m.OutputSilence())
    clock.send(m.AnimBody(speed_mmps=50, unknown=32767))
    for _ in range(20):
        clock.send(m.OutputSilence())
    clock.run(0.3)
    assert clock.model.true_pose()[0] > 5.0
    getattr(clock.model, link_change)(clock.now)
    clock.run(0.5)
    x = clock.model.true_pose()[0]
    clock.run(0.5)
    assert clock.model.true_pose()[0] == x


# ------------------------------------------------------------------------------- base

def test_drive_straight_with_acceleration_and_limit():
    clock = make()
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100,
                             lwheel_accel_mmps2=500, rwheel_accel_mmps2=500))
    clock.run(0.1)
    lw, rw = clock.model.wheels
    assert lw.speed == pytest.approx(50.0, abs=1e-6) and rw.speed == pytest.approx(50.0, abs=1e-6)
    clock.run(1.9)
    x, y, yaw = clock.model.true_pose()
    # 0.2 s ramp (10 mm) then 1.8 s at 100 mm/s
    assert x == pytest.approx(190.0, abs=0.5) and y == pytest.approx(0.0, abs=1e-6) and yaw == 0.0
    state = last_state(clock)
    assert state.lwheel_speed_mmps == pytest.approx(100.0)
    assert state.status & StatusFlag.ARE_WHEELS_MOVING and state.status & StatusFlag.IS_MOVING
    clock.send(m.DriveWheels(lwheel_speed_mmps=500, rwheel_speed_mmps=-500))
    clock.run(0.4)  # 300 mm/s of change at the default 1000 mm/s^2
    assert clock.model.wheels[0].speed == MAX_WHEEL_SPEED_MMPS
    assert clock.model.wheels[1].speed == -MAX_WHEEL_SPEED_MMPS


def test_accelerometer_and_gyro_agree_with_motion():
    """In the IMU's axes, which the head turns: level with the head at 0 here."""
    clock = make()
    clock.send(m.SetHeadAngle(angle_rad=0.0, max_speed_rad_per_sec=10.0, accel_rad_per_sec2=50.0))
    clock.run(1.0)
    flat = last_state(clock)
    assert flat.accel_z_mmps2 == pytest.approx(GRAVITY_MMPS2)
    assert flat.accel_x_mmps2 == pytest.approx(0.0, abs=1e-9) and flat.gyro_z_radps == 0.0
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100,
                             lwheel_accel_mmps2=400, rwheel_accel_mmps2=400))
    clock.run(0.1)
    accel = last_state(clock)
    assert accel.accel_x_mmps2 == pytest.approx(400.0, rel=0.01)
    clock.send(m.DriveWheels(lwheel_speed_mmps=-45, rwheel_speed_mmps=45))
    clock.run(0.5)
    spin = last_state(clock)
    assert spin.gyro_z_radps == pytest.approx(90.0 / TRACK_WIDTH_MM, rel=1e-6)
    before = clock.model.true_pose()[2]
    clock.run(0.5)
    turned = wrap_angle(clock.model.true_pose()[2] - before)
    assert turned == pytest.approx(0.5 * 90.0 / TRACK_WIDTH_MM, rel=0.02)


def test_the_imu_reads_in_the_heads_axes():
    """The IMU sits in the head: standing flat with the head 25 deg down, gravity's reaction
    leans back in its axes (x = g sin(-25 deg)), and a turn shows partly on its x axis; the
    driver's imu_to_body turns both back into the body's axes."""
    from cozmo_driver.driver.sensors import imu_to_body

    clock = make()
    clock.send(m.SetHeadAngle(angle_rad=math.radians(-25.0), max_speed_rad_per_sec=10.0,
                              accel_rad_per_sec2=50.0))
    clock.send(m.DriveWheels(lwheel_speed_mmps=-45, rwheel_speed_mmps=45))
    clock.run(1.0)
    s = last_state(clock)
    head = s.head_angle_rad
    assert head == pytest.approx(math.radians(-25.0), abs=0.01)
    assert (s.accel_x_mmps2, s.accel_z_mmps2) == pytest.approx(
        (GRAVITY_MMPS2 * math.sin(head), GRAVITY_MMPS2 * math.cos(head)), abs=1.0)
    assert s.gyro_z_radps == pytest.approx(90.0 / TRACK_WIDTH_MM * math.cos(head), rel=1e-3)
    ax, ay, az = imu_to_body(s.accel_x_mmps2, s.accel_y_mmps2, s.accel_z_mmps2, head)
    assert (ax, az) == pytest.approx((0.0, GRAVITY_MMPS2), abs=1.0)
    gx, gy, gz = imu_to_body(s.gyro_x_radps, s.gyro_y_radps, s.gyro_z_radps, head)
    assert (gx, gz) == pytest.approx((0.0, 90.0 / TRACK_WIDTH_MM), abs=1e-3)


def test_noise_is_seeded():
    def states(seed):
        clock = make(noise=True, seed=seed)
        clock.run(0.5)
        return [(s.gyro_z_radps, s.accel_x_mmps2, s.battery_voltage_v, tuple(s.cliff_data_raw))
                for s in clock.take("RobotState")]

    a, b, c = states(5), states(5), states(6)
    assert a == b and a != c
    gyro = np.array([s[0] for s in a])
    assert 0 < gyro.std() < 0.01


def test_arc_drive_integrates_exactly():
    clock = make()
    clock.send(m.DriveWheels(lwheel_speed_mmps=50, rwheel_speed_mmps=100,
                             lwheel_accel_mmps2=1e6, rwheel_accel_mmps2=1e6))
    w = 50.0 / TRACK_WIDTH_MM
    v = 75.0
    clock.run(1.0)
    x, y, yaw = clock.model.true_pose()
    r = v / w
    assert yaw == pytest.approx(wrap_angle(w), abs=1e-3)
    assert x == pytest.approx(r * math.sin(w), abs=1.0)
    assert y == pytest.approx(r * (1 - math.cos(w)), abs=1.0)


@pytest.mark.parametrize("turn,start", [
    (None, 0.3),                     # the short way to -pi/2
    (math.pi / 2, 0.0),              # a quarter turn anticlockwise
    (2 * math.pi + 0.5, 0.0),        # one turn and a bit more (two half turns and 0.5 rad)
    (-3 * math.pi / 2, 0.0),         # three quarters clockwise, the long way to pi/2
    (3 * math.pi / 2, 0.0),          # three quarters anticlockwise, the long way to -pi/2
])
def test_turn_in_place_turns_to_a_heading_the_way_and_as_far_as_told(turn, start):
    """As Anki's firmware: the angle is the heading to reach (pose frame), the speed's sign
    the direction, unknown4/unknown5 the half turns, is_absolute the short way; the robot
    acknowledges when it takes the command (turn_message builds it as the driver does)."""
    clock = make()
    clock.model.teleport(0.0, 0.0, 0.0, start)
    clock.send(m.SetOrigin(pose_frame_id=1, pose_origin_id=1))   # engine heading 0 == world `start`
    heading = -math.pi / 2 if turn is None else turn
    clock.send(turn_message(heading, 3.0, 10.0, math.radians(1), 42, turn_rad=turn))
    clock.run(0.05)
    assert [a.action_id for a in clock.take("AcknowledgeAction")] == [42]   # taken
    clock.run(0.25)
    assert last_state(clock).status & StatusFlag.ARE_WHEELS_MOVING
    clock.run(5.0)
    _, _, reported = clock.model.reported_pose()
    assert wrap_angle(reported - heading) == pytest.approx(0.0, abs=math.radians(1.01))
    turned = clock.model.yaw_u - start
    expected = wrap_angle(heading - 0.0) if turn is None else turn
    assert turned == pytest.approx(expected, abs=math.radians(1.01))
    assert not clock.model.is_moving
    x, y, _ = clock.model.true_pose()
    assert math.hypot(x, y) < 1e-6     # turned on the spot


def test_turn_in_place_at_speed_direction():
    clock = make()
    clock.send(m.TurnInPlaceAtSpeed(wheel_speed_mmps=45, wheel_accel_mmps2=1000, direction=-1))
    clock.run(0.5)
    lw, rw = clock.model.wheels
    assert lw.speed == 45 and rw.speed == -45
    assert clock.model.true_pose()[2] < 0


def test_stop_all_motors():
    clock = make()
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    clock.send(m.MoveHead(speed_rad_per_sec=0.3))
    clock.send(m.MoveLift(speed_rad_per_sec=0.3))
    clock.run(0.2)
    clock.send(m.StopAllMotors())
    clock.run(0.05)
    state = last_state(clock)
    assert state.lwheel_speed_mmps == 0 and not state.status & StatusFlag.IS_MOVING
    assert clock.model.next_tick() <= clock.now + 0.031  # only the state stream remains


# ------------------------------------------------------------------------------- head, lift

def test_set_head_angle_ack_flags_and_duration():
    clock = make()
    clock.run(0.05)
    assert last_state(clock).status & StatusFlag.HEAD_IN_POS
    clock.send(m.SetHeadAngle(angle_rad=0.5, max_speed_rad_per_sec=10, accel_rad_per_sec2=10,
                              duration_sec=1.0, action_id=9))
    assert [a.action_id for a in clock.take("AcknowledgeAction")] == [9]   # on acceptance
    clock.run(0.5)
    mid = last_state(clock)
    assert not mid.status & StatusFlag.HEAD_IN_POS
    assert HEAD_MIN_RAD < mid.head_angle_rad < 0.5
    clock.run(0.45)
    assert clock.model.head_angle < 0.5                       # not before the duration
    clock.run(0.1)
    assert clock.model.head_angle == pytest.approx(0.5, abs=1e-6)
    assert last_state(clock).status & StatusFlag.HEAD_IN_POS


def test_a_duration_overrides_the_max_speed():
    """Anki's (later) firmware: SetHeadAngle with a duration moves by the duration and
    ignores max_speed and accel."""
    clock = make()
    clock.run(0.05)
    start = clock.model.head_angle
    clock.send(m.SetHeadAngle(angle_rad=0.6, max_speed_rad_per_sec=0.2, accel_rad_per_sec2=10,
                              duration_sec=0.5, action_id=3))
    clock.run(0.55)          # at 0.2 rad/s the move would take several seconds
    assert clock.model.head_angle == pytest.approx(0.6, abs=1e-6), start


def test_head_max_speed_and_limits():
    clock = make()
    clock.send(m.SetHeadAngle(angle_rad=3.0, max_speed_rad_per_sec=0.5, accel_rad_per_sec2=100))
    travel = HEAD_MAX_RAD - HEAD_MIN_RAD
    clock.run(travel / 0.5 - 0.1)
    assert clock.model.head_angle < HEAD_MAX_RAD - 0.03
    clock.run(0.3)
    assert clock.model.head_angle == pytest.approx(HEAD_MAX_RAD)   # clamped at the limit
    clock.send(m.MoveHead(speed_rad_per_sec=-2.0))
    clock.run(1.0)
    assert clock.model.head_angle == pytest.approx(HEAD_MIN_RAD)
    assert last_state(clock).status & StatusFlag.HEAD_IN_POS      # stopped at the limit


def test_a_head_or_lift_speed_near_zero_is_the_firmwares_full_speed():
    """Anki's firmware (SetMaxSpeedAndAccel) takes a speed nearer zero than 1e-5 rad/s for
    its fastest, in MoveHead/MoveLift too, the sign giving the way; the simulator does so,
    which is why the driver never sends one (client.link.firmware_safe_speeds)."""
    clock = make()
    clock.send(m.MoveHead(speed_rad_per_sec=1e-6))
    clock.send(m.MoveLift(speed_rad_per_sec=1e-7))
    clock.run(0.3)  # at 1e-6 rad/s it would not have moved
    assert clock.model.head_angle == pytest.approx(HEAD_MAX_RAD)
    assert clock.model.lift_height == pytest.approx(LIFT_MAX_MM)
    clock.send(m.SetHeadAngle(angle_rad=0.0, max_speed_rad_per_sec=1e-6, accel_rad_per_sec2=500.0))
    clock.run(0.3)
    assert clock.model.head_angle == pytest.approx(0.0, abs=1e-3)


def test_lift_height_through_the_arm():
    assert lift_angle_to_height(lift_height_to_angle(60.0)) == pytest.approx(60.0)
    clock = make()
    clock.send(m.SetLiftHeight(height_mm=70.0, max_speed_rad_per_sec=2, accel_rad_per_sec2=20,
                               action_id=3))
    assert [a.action_id for a in clock.take("AcknowledgeAction")] == [3]
    clock.run(0.1)
    assert not last_state(clock).status & StatusFlag.LIFT_IN_POS
    clock.run(1.5)
    state = last_state(clock)
    assert lift_mm(state) == pytest.approx(70.0, abs=1e-3)
    assert state.status & StatusFlag.LIFT_IN_POS
    clock.send(m.MoveLift(speed_rad_per_sec=3.0))
    clock.run(1.0)
    assert clock.model.lift_height == pytest.approx(LIFT_MAX_MM)
    clock.send(m.SetLiftHeight(height_mm=0.0))
    clock.run(2.0)
    assert clock.model.lift_height == pytest.approx(LIFT_MIN_MM)


# ------------------------------------------------------------------------------- frames

def test_set_origin_reanchors_the_reported_pose():
    clock = make()
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    clock.run(1.0)
    clock.send(m.StopAllMotors())
    true_before = clock.model.true_pose()
    clock.send(m.SetOrigin(pose_frame_id=4, pose_origin_id=7, pose_x_mm=10.0, pose_y_mm=-5.0))
    clock.run(0.05)
    state = last_state(clock)
    assert (state.pose_frame_id, state.pose_origin_id) == (4, 7)
    assert (state.pose_x_mm, state.pose_y_mm) == pytest.approx((10.0, -5.0), abs=1e-3)
    assert clock.model.true_pose() == pytest.approx(true_before)
    clock.send(m.DriveWheels(lwheel_speed_mmps=50, rwheel_speed_mmps=50, lwheel_accel_mmps2=1e6,
                             rwheel_accel_mmps2=1e6))
    clock.run(1.0)
    assert last_state(clock).pose_x_mm == pytest.approx(60.0, abs=1.5)


def test_hand_placement_is_not_seen_by_odometry():
    clock = make()
    clock.model.pick_up(clock.now)
    clock.model.put_down(clock.now, pose=(200.0, 100.0, 1.0))
    clock.run(0.05)
    assert clock.model.true_pose() == pytest.approx((200.0, 100.0, 1.0))
    state = last_state(clock)
    assert (state.pose_x_mm, state.pose_y_mm, state.pose_angle_rad) == pytest.approx((0, 0, 0), abs=1e-6)


# ------------------------------------------------------------------------------- paths

def square_path(clock: Clock, side: float = 100.0, speed: float = 100.0) -> None:
    pts = [(0, 0), (side, 0), (side, side), (0, side), (0, 0)]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        clock.send(m.AppendPathSegLine(from_x_mm=x0, from_y_mm=y0, to_x_mm=x1, to_y_mm=y1,
                                       speed_mmps=speed, accel_mmps2=200, decel_mmps2=200))
    clock.send(m.AppendPathSegPointTurn(x_mm=0, y_mm=0, angle_rad=0.0, angle_tolerance_rad=0.01,
                                        speed_mmps=40, accel_mmps2=200, decel_mmps2=200))


HALF_PI = math.pi / 2


@pytest.mark.parametrize("speed, shortest, turned", [
    (1.0, True, -HALF_PI),          # the flag: the shorter way, whatever the sign
    (-1.0, True, -HALF_PI),
    (1.0, False, 3 * HALF_PI),      # no flag: the speed's sign says which way, the long way too
    (-1.0, False, -HALF_PI)])
def test_point_turns_read_the_body_rate_and_the_way_round(speed, shortest, turned):
    """A point turn's speed is the body's rad/s and its flag (pycozmo's 'unknown') asks for
    the shorter way, as Anki's firmware reads them."""
    clock = make()
    clock.send(m.AppendPathSegPointTurn(x_mm=0, y_mm=0, angle_rad=-HALF_PI, angle_tolerance_rad=0.01,
                                        speed_mmps=speed, accel_mmps2=10.0, decel_mmps2=10.0,
                                        unknown=shortest))
    clock.send(m.ExecutePath(event_id=3))
    rates, yaw, last = [], 0.0, 0.0
    for _ in range(240):
        clock.run(0.05)
        rates += [st.gyro_z_radps for st in clock.take("RobotState")]
        now = clock.model.true_pose()[2]
        yaw += math.remainder(now - last, 2 * math.pi)   # unwrapped: less than pi a step
        last = now
        if any(e.event_type != E["PathEventType"].PATH_STARTED for e in clock.take("PathFollowingEvent")):
            break
    else:
        pytest.fail("the turn did not end in 12 s")
    assert yaw == pytest.approx(turned, abs=0.05)
    assert max(abs(rate) for rate in rates) == pytest.approx(1.0, abs=0.1)   # 1 rad/s, not 1 mm/s


def test_path_square_completes():
    clock = make()
    square_path(clock)
    clock.send(m.ExecutePath(event_id=5))
    events = clock.take("PathFollowingEvent")
    assert [(e.event_id, e.event_type) for e in events] == [(5, E["PathEventType"].PATH_STARTED)]
    segments = set()
    for _ in range(150):
        clock.run(0.1)
        states = clock.take("RobotState")
        segments.update(s.curr_path_segment for s in states if s.status & StatusFlag.IS_PATHING)
        if clock.take("PathFollowingEvent"):
            break
    else:
        pytest.fail("path did not complete in 15 s")
    assert segments == {0, 1, 2, 3, 4}
    x, y, yaw = clock.model.reported_pose()
    assert math.hypot(x, y) < 6.0 and abs(yaw) < 0.02
    clock.run(0.1)
    state = last_state(clock)
    assert not state.status & StatusFlag.IS_PATHING and state.curr_path_segment == 0xFF
    assert not clock.model.is_moving


def test_path_completed_event_type_and_arc():
    clock = make()
    clock.send(m.AppendPathSegArc(center_x_mm=0, center_y_mm=100, radius_mm=100,
                                  start_angle_rad=-math.pi / 2, sweep_rad=math.pi, speed_mmps=80,
                                  accel_mmps2=200, decel_mmps2=200))
    clock.send(m.ExecutePath(event_id=2))
    clock.run(8.0)
    kinds = [e.event_type for e in clock.take("PathFollowingEvent")]
    assert kinds == [E["PathEventType"].PATH_STARTED, E["PathEventType"].PATH_COMPLETED]
    x, y, yaw = clock.model.true_pose()
    assert (x, y) == pytest.approx((0.0, 200.0), abs=6.0)
    assert abs(wrap_angle(yaw - math.pi)) < 0.25


def test_an_arc_through_the_angle_0_is_two_segments_and_the_path_holds_128():
    """As Anki's firmware (Planning::Path::AppendArc): an arc is split where its centre
    angle passes 0 or pi, and curr_path_segment counts the pieces; the path holds 128
    segments (a signed byte numbers them), more are dropped."""
    clock = make()
    clock.send(m.AppendPathSegArc(center_x_mm=0, center_y_mm=100, radius_mm=100,
                                  start_angle_rad=-math.pi / 2, sweep_rad=math.pi, speed_mmps=80,
                                  accel_mmps2=200, decel_mmps2=200))
    assert len(clock.model.path.segments) == 2           # -pi/2..0 and 0..pi/2
    clock.send(m.ExecutePath(event_id=2))
    seen = set()
    for _ in range(80):
        clock.run(0.1)
        seen |= {st.curr_path_segment for st in clock.take("RobotState")}
    assert {0, 1} <= seen
    for _ in range(130):
        clock.send(m.AppendPathSegLine(from_x_mm=0, from_y_mm=0, to_x_mm=10, to_y_mm=0,
                                       speed_mmps=50, accel_mmps2=200, decel_mmps2=200))
    assert len(clock.model.path.segments) == 128


def test_path_interrupted_by_pick_up_and_clear_path():
    clock = make()
    square_path(clock)
    clock.send(m.ExecutePath(event_id=1))
    clock.run(0.5)
    clock.model.pick_up(clock.now)
    clock.run(0.25)     # the firmware reads a robot lifted while driving as picked up in 0.205 s
    kinds = [e.event_type for e in clock.take("PathFollowingEvent")]
    assert kinds == [E["PathEventType"].PATH_STARTED, E["PathEventType"].PATH_INTERRUPTED]
    clock.model.put_down(clock.now)
    square_path(clock)
    clock.send(m.ExecutePath(event_id=2))
    clock.run(0.3)
    clock.send(m.ClearPath())
    clock.run(0.3)
    kinds = [e.event_type for e in clock.take("PathFollowingEvent")]
    assert kinds == [E["PathEventType"].PATH_STARTED, E["PathEventType"].PATH_INTERRUPTED]
    assert not last_state(clock).status & StatusFlag.IS_PATHING


def test_a_turn_in_place_during_a_path_leaves_the_path_to_go_on_after_it():
    """Anki's firmware: a point turn takes the steering without clearing the path and hands
    it back when done; IS_PATHING stays set and DriveWheels is ignored meanwhile. A
    ClearPath during the turn ends both (PATH_INTERRUPTED)."""
    clock = make()
    square_path(clock)
    clock.send(m.ExecutePath(event_id=1))
    clock.run(0.4)
    clock.send(m.TurnInPlace(angle_rad=HALF_PI, speed_rad_per_sec=3.0, accel_rad_per_sec2=20.0,
                             angle_tolerance_rad=0.02, is_absolute=True, action_id=4))
    clock.run(0.1)
    assert last_state(clock).status & StatusFlag.IS_PATHING
    clock.send(m.DriveWheels(lwheel_speed_mmps=-80, rwheel_speed_mmps=-80))   # ignored
    clock.run(1.0)
    assert [e.event_type for e in clock.take("PathFollowingEvent")] == [E["PathEventType"].PATH_STARTED]
    assert last_state(clock).status & StatusFlag.IS_PATHING     # the path goes on
    x_before = clock.model.true_pose()[0]
    clock.run(0.3)
    assert clock.model.true_pose()[0] > x_before + 5.0          # along its first side again
    clock.send(m.TurnInPlace(angle_rad=HALF_PI, speed_rad_per_sec=3.0, accel_rad_per_sec2=20.0,
                             angle_tolerance_rad=0.02, is_absolute=True, action_id=5))
    clock.run(0.1)
    clock.send(m.ClearPath())
    clock.run(1.0)
    assert [e.event_type for e in clock.take("PathFollowingEvent")] == \
        [E["PathEventType"].PATH_INTERRUPTED]
    assert not last_state(clock).status & StatusFlag.IS_PATHING


def test_a_point_turn_slower_than_the_robot_turns_is_sped_up():
    """Anki's firmware (steeringController, ExecutePointTurn) speeds a point turn slower than
    0.4 rad/s up to that: a quarter turn asked at 0.1 rad/s takes about 4 s, not 16."""
    clock = make()
    clock.send(m.TurnInPlace(angle_rad=HALF_PI, speed_rad_per_sec=0.1, accel_rad_per_sec2=10.0,
                             angle_tolerance_rad=0.02, is_absolute=True, action_id=6))
    clock.run(1.0)
    before = clock.model.yaw_u
    clock.run(1.0)
    assert clock.model.yaw_u - before == pytest.approx(0.4, abs=0.02)   # rad in 1 s
    clock.run(2.5)
    assert clock.model.yaw_u == pytest.approx(HALF_PI, abs=0.03)
    assert not clock.model.is_moving


def test_trim_path():
    clock = make()
    square_path(clock)
    clock.send(m.TrimPath(head=0, tail=4))        # keep the first line only
    clock.send(m.ExecutePath(event_id=3))
    clock.run(4.0)
    assert [e.event_type for e in clock.take("PathFollowingEvent")][-1] == E["PathEventType"].PATH_COMPLETED
    x, y, _ = clock.model.true_pose()
    assert (x, y) == pytest.approx((100.0, 0.0), abs=3.0)


@pytest.mark.parametrize("angle,before", [
    (math.pi / 2, "turned"), (1.0, "turned"), (-1.0, "turned"), (2.0, "turned"),
    (1.0, "re-anchored"),       # SetOrigin(120, -40, 0.7 rad) first: the path in a rotated frame
    (1.5, "still turning"),     # ExecutePath while the TurnInPlace is still running
    (1.0, "driving"),           # DriveWheels(60, 80) between the turn and the path
])
def test_path_after_a_turn_leaves_its_first_segment(angle, before):
    """Issue #7: a line built, as the driver builds it, from the pose reported after a turn
    (float32 in RobotState and in AppendPathSegLine) is off the robot's heading by ~1e-8 rad.
    The follower steers that out and its yaw rate decays through |w| <= 1e-9 rad/s, where
    the odometry used to skip the translation: the robot stood still on segment 0 with its
    treads turning. All but "still turning" and "driving" (which converge from a moving
    start) stuck before the fix."""
    clock = make()
    if before == "re-anchored":
        heading = int(np.float32(0.7).view(np.uint32))
        clock.send(m.SetOrigin(pose_frame_id=1, pose_origin_id=2, pose_x_mm=120.0, pose_y_mm=-40.0,
                               unknown5=heading))
    clock.send(m.TurnInPlace(angle_rad=angle, speed_rad_per_sec=2.0, accel_rad_per_sec2=10.0,
                             angle_tolerance_rad=0.016, action_id=1))
    clock.run(0.3 if before == "still turning" else 2.0)
    assert [a.action_id for a in clock.take("AcknowledgeAction")] == [1]   # taken at once
    if before == "driving":
        clock.send(m.DriveWheels(lwheel_speed_mmps=60, rwheel_speed_mmps=80))
        clock.run(0.2)
    state = last_state(clock)
    assert bool(state.status & StatusFlag.ARE_WHEELS_MOVING) == (before in ("still turning", "driving"))
    x, y, yaw = state.pose_x_mm, state.pose_y_mm, state.pose_angle_rad
    end = (x + 100.0 * math.cos(yaw), y + 100.0 * math.sin(yaw))
    clock.send(m.ClearPath())
    clock.send(m.AppendPathSegLine(from_x_mm=x, from_y_mm=y, to_x_mm=end[0], to_y_mm=end[1],
                                   speed_mmps=150, accel_mmps2=200, decel_mmps2=200))
    clock.send(m.ExecutePath(event_id=7))
    kinds = []
    for _ in range(50):                       # the line takes about 1.2 s
        clock.run(0.1)
        kinds += [e.event_type for e in clock.take("PathFollowingEvent")]
        if E["PathEventType"].PATH_COMPLETED in kinds:
            break
    assert kinds == [E["PathEventType"].PATH_STARTED, E["PathEventType"].PATH_COMPLETED], \
        f"path stuck on segment {clock.model.path.segment_index} " \
        f"at {clock.model.reported_pose()}, treads {[w.speed for w in clock.model.wheels]}"
    rx, ry, _ = clock.model.reported_pose()
    assert (rx, ry) == pytest.approx(end, abs=3.0)


def test_nearly_straight_drive_integrates_its_translation():
    """Odometry with a yaw rate of 1e-12 rad/s: the arc is a straight line to 1e-9 mm
    (the former (v/w)(sin(yaw + w dt) - sin(yaw)) form dropped it for |w| <= 1e-9)."""
    clock = make()
    clock.model.teleport(0.0, 0.0, 0.0, 1.0)
    lw, rw = clock.model.wheels
    for wheel, speed in ((lw, 100.0), (rw, 100.0 + TRACK_WIDTH_MM * 1e-12)):
        wheel.speed = wheel.target = speed
    clock.run(0.5)
    x, y, yaw = clock.model.true_pose()
    assert (x, y) == pytest.approx((50.0 * math.cos(1.0), 50.0 * math.sin(1.0)), abs=1e-6)
    assert yaw == pytest.approx(1.0, abs=1e-9)


# ------------------------------------------------------------------------------- cliffs, events

def test_stop_on_cliff_at_the_table_edge():
    clock = make()
    clock.send(m.EnableStopOnCliff(enable=True))
    clock.model.teleport(clock.now, 450.0, 0.0, 0.0)
    clock.send(m.DriveWheels(lwheel_speed_mmps=150, rwheel_speed_mmps=150))
    clock.run(3.0)
    x, _, _ = clock.model.true_pose()
    assert 560.0 < x < 600.0                              # stopped before the centre crossed
    state = last_state(clock)
    assert state.status & StatusFlag.CLIFF_DETECTED and not state.status & StatusFlag.ARE_WHEELS_MOVING
    # one sensor, under the front: its reading in each of RobotState's four values
    assert max(state.cliff_data_raw) < CLIFF_THRESHOLD_RAW
    # backing away is allowed
    clock.send(m.DriveWheels(lwheel_speed_mmps=-50, rwheel_speed_mmps=-50))
    clock.run(1.0)
    assert not last_state(clock).status & StatusFlag.CLIFF_DETECTED


def test_reversing_off_the_edge_is_not_stopped():
    """The protocol documents one cliff sensor, at the front: backwards, stop-on-cliff sees
    nothing, and the robot falls (the simulator modelled rear sensors that stopped it)."""
    clock = make()
    clock.run(SYNC_TIME_ACK_DELAY_S)   # past the connection's SyncTimeAck (0xc2)
    clock.out.clear()
    clock.send(m.EnableStopOnCliff(enable=True))
    clock.model.teleport(clock.now, 550.0, 0.0, math.pi)   # its back to the edge
    clock.send(m.DriveWheels(lwheel_speed_mmps=-100, rwheel_speed_mmps=-100))
    clock.run(2.0)
    assert clock.names() == ["FallingStarted", "FallingStopped"]
    assert clock.model.on_floor


def test_without_stop_on_cliff_the_robot_falls_off():
    clock = make()
    clock.run(SYNC_TIME_ACK_DELAY_S)   # past the connection's SyncTimeAck (0xc2)
    clock.out.clear()
    assert clock.model.stop_on_cliff      # the firmware's default
    clock.send(m.EnableStopOnCliff(enable=False))
    clock.model.teleport(clock.now, 550.0, 0.0, 0.0)
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    clock.run(2.0)
    assert clock.names() == ["FallingStarted", "FallingStopped"]
    assert clock.model.on_floor and not clock.model.is_moving


def test_pick_up_and_put_down_read_as_the_firmware_detects_them():
    """The cliff sensor loses and finds the floor at once; IS_PICKED_UP follows after the
    firmware's detection times (IMUFilter::DetectPickup: > 20 ticks of 5 ms with the motors
    idle, > 40 while they drive; > 40 calm ticks to put down)."""
    def flags_after(seconds, left_wheel=None):
        clock.run(seconds)
        state = last_state(clock)
        if left_wheel is not None:
            assert state.lwheel_speed_mmps == left_wheel
        return (bool(state.status & StatusFlag.CLIFF_DETECTED),
                bool(state.status & StatusFlag.IS_PICKED_UP))

    clock = make()
    clock.run(0.1)
    clock.model.pick_up(clock.now)
    assert flags_after(0.06) == (True, False)       # the floor lost first
    assert flags_after(0.09) == (True, True)
    clock.model.put_down(clock.now)
    assert flags_after(0.06) == (False, True)       # the floor back, still held
    assert flags_after(0.09) == (False, True)
    assert flags_after(0.09) == (False, False)
    # lifted and set down again at once: one lift, no put-down between
    clock.model.pick_up(clock.now)
    flags_after(0.15)
    clock.model.put_down(clock.now)
    flags_after(0.06)
    clock.model.pick_up(clock.now)
    for _ in range(5):
        assert flags_after(0.06)[1]
    # lifted while driving backwards: detected later, and the treads run on (Anki's shipped
    # firmware has no pick-up reaction of its own: a driver stops them)
    clock.model.put_down(clock.now)
    flags_after(0.3)
    drive = dict(lwheel_accel_mmps2=1e6, rwheel_accel_mmps2=1e6)
    clock.send(m.DriveWheels(lwheel_speed_mmps=-50, rwheel_speed_mmps=-50, **drive))
    clock.run(0.2)
    clock.model.pick_up(clock.now)
    assert flags_after(0.15, left_wheel=-50) == (True, False)
    assert flags_after(0.09, left_wheel=-50) == (True, True)
    clock.send(m.DriveWheels(**drive))
    # lifted while driving forwards: the drop stops the treads at once (stop on cliff), and
    # with the treads still the lift is read in 0.105 s
    clock.model.put_down(clock.now)
    flags_after(0.3)
    clock.send(m.DriveWheels(lwheel_speed_mmps=50, rwheel_speed_mmps=50, **drive))
    clock.run(0.2)
    clock.model.pick_up(clock.now)
    assert flags_after(0.06, left_wheel=0) == (True, False)
    assert flags_after(0.09, left_wheel=0) == (True, True)


def test_scripted_events():
    clock = make()
    clock.run(SYNC_TIME_ACK_DELAY_S)   # past the connection's SyncTimeAck (0xc2)
    clock.out.clear()
    model = clock.model
    model.pick_up(clock.now)
    clock.run(0.15)
    state = last_state(clock)
    assert state.status & StatusFlag.IS_PICKED_UP and state.accel_z_mmps2 != GRAVITY_MMPS2
    model.put_down(clock.now)
    model.fall(clock.now, duration=0.3, impact=700.0)
    clock.run(0.1)
    assert last_state(clock).status & StatusFlag.IS_FALLING
    clock.run(0.3)
    model.poke(clock.now)
    model.press_button(clock.now, duration=0.2)
    model.delocalize(clock.now)
    clock.run(0.3)
    events = [x for x in clock.out if x.NAME not in ("RobotState", "ObjectAvailable")]
    assert [e.NAME for e in events] == ["FallingStarted", "FallingStopped", "RobotPoked", "ButtonPressed",
                                        "RobotDelocalized", "ButtonPressed"]
    assert events[1].duration_ms == 300 and events[1].impact_intensity == 700.0
    assert [e.pressed for e in events if e.NAME == "ButtonPressed"] == [True, False]
    assert not last_state(clock).status & (StatusFlag.IS_FALLING | StatusFlag.IS_PICKED_UP)


def test_battery_drains_while_moving_and_charges_on_charger():
    clock = make()
    clock.run(0.1)
    v0 = last_state(clock).battery_voltage_v
    assert BATTERY_EMPTY_V <= v0 <= BATTERY_FULL_V
    soc0 = clock.model.soc
    clock.run(30.0)
    idle = soc0 - clock.model.soc
    clock.send(m.DriveWheels(lwheel_speed_mmps=20, rwheel_speed_mmps=-20))
    soc1 = clock.model.soc
    clock.run(30.0)
    moving = soc1 - clock.model.soc
    assert moving > 2 * idle > 0
    assert last_state(clock).battery_voltage_v < v0
    clock.send(m.StopAllMotors())
    clock.model.set_on_charger(True, clock.now)
    assert clock.model.true_pose() == pytest.approx(clock.model.world.charger_pose)
    clock.run(30.0)
    state = last_state(clock)
    assert state.status & StatusFlag.IS_ON_CHARGER and state.status & StatusFlag.IS_CHARGING
    assert clock.model.soc > soc1
    clock.model.soc = 1.0
    clock.run(0.1)
    state = last_state(clock)
    assert state.status & StatusFlag.IS_ON_CHARGER and not state.status & StatusFlag.IS_CHARGING
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    clock.run(1.0)
    assert not last_state(clock).status & StatusFlag.IS_ON_CHARGER   # drove off


@pytest.mark.parametrize("lift", ["pick_up", "back", "left"])
def test_a_robot_lifted_off_the_charger_loses_its_contacts_until_put_back(lift):
    clock = make()
    model = clock.model
    model.set_on_charger(True, clock.now)
    model.soc = 0.5
    clock.run(0.2)
    charging = StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING
    assert last_state(clock).status & charging == charging
    model.pick_up(clock.now) if lift == "pick_up" else model.lay(clock.now, lift)
    soc = model.soc
    clock.run(5.0)
    state = last_state(clock)
    assert not state.status & charging                   # off the contacts: neither flag
    assert model.soc < soc                                # and no charge
    assert state.battery_voltage_v == pytest.approx(model.body.battery_voltage())
    assert model.body.battery_voltage() < BATTERY_EMPTY_V + (BATTERY_FULL_V - BATTERY_EMPTY_V) * soc
    model.put_down(clock.now)                             # back where it was: on the contacts
    soc = model.soc
    clock.run(1.0)
    assert last_state(clock).status & charging == charging and model.soc > soc


def test_motor_calibration():
    clock = make()
    clock.send(m.SetHeadAngle(angle_rad=0.3))
    clock.run(1.0)
    clock.send(m.StartMotorCalibration(head=True, lift=False))
    clock.run(1.5)
    cal = clock.take("MotorCalibration")
    assert [(c.motor_id, c.calib_started) for c in cal] == [(E["MotorID"].MOTOR_HEAD, True),
                                                            (E["MotorID"].MOTOR_HEAD, False)]
    assert clock.model.head_angle == pytest.approx(HEAD_MIN_RAD)


def test_the_reported_heading_restarts_when_the_head_calibrates():
    """Anki's firmware: the heading is the IMU filter's rotation plus an offset kept from
    the last SetOrigin, and the rotation goes back to 0 while the head is not calibrated
    (IMUFilter::Update, Reset). A turned robot's reported heading goes back to the
    SetOrigin's when the head calibrates; x and y stay, and turns count from there."""
    clock = make()
    clock.send(m.SetOrigin(pose_frame_id=2, pose_origin_id=1))
    clock.send(m.DriveWheels(lwheel_speed_mmps=-30, rwheel_speed_mmps=30))
    clock.run(0.8)
    clock.send(m.DriveWheels(lwheel_speed_mmps=60, rwheel_speed_mmps=60))
    clock.run(0.5)
    clock.send(m.DriveWheels())
    clock.run(0.3)
    x, y, yaw = clock.model.reported_pose()
    assert yaw > 0.8 and math.hypot(x, y) > 20.0
    clock.send(m.StartMotorCalibration(head=True, lift=False))
    clock.run(0.05)
    assert clock.model.reported_pose() == pytest.approx((x, y, 0.0), abs=1e-6)
    restarted_at = clock.model.yaw_u
    clock.run(1.5)                                    # calibrated again: turns count from 0
    clock.send(m.DriveWheels(lwheel_speed_mmps=-30, rwheel_speed_mmps=30))
    clock.run(0.5)
    clock.send(m.DriveWheels())
    clock.run(0.3)
    assert clock.model.reported_pose()[2] == pytest.approx(clock.model.yaw_u - restarted_at, abs=1e-6)
    clock.model.teleport(clock.now, 0.0, 0.0, 2.0)    # by hand: unseen, the offset kept
    clock.send(m.StartMotorCalibration(head=True, lift=False))
    clock.run(0.05)
    assert clock.model.reported_pose()[2] == pytest.approx(0.0, abs=1e-6)


def test_the_reported_heading_holds_for_the_whole_head_calibration():
    """Anki's firmware resets its IMU filter at every tick while the head is not calibrated
    (IMUFilter::Update: Reset, no update): its rotation stays 0, so the reported heading holds
    at the offset for the whole calibration, however the robot turns, and x and y go along
    that held heading; nor is a pick-up detected then. The simulator restarted the heading
    once, at the start, and then counted the turns: a driver steering by it saw nothing wrong."""
    clock = make()
    clock.model.body.head.pos = HEAD_MAX_RAD               # a calibration of over a second
    clock.send(m.SetOrigin(pose_frame_id=2, pose_origin_id=1))
    clock.send(m.StartMotorCalibration(head=True, lift=False))
    clock.run(0.05)
    assert clock.model.body.head.calibrating
    x0, y0, yaw0 = clock.model.reported_pose()
    true0 = clock.model.yaw_u
    clock.send(m.DriveWheels(lwheel_speed_mmps=-30, rwheel_speed_mmps=30))
    clock.run(0.3)
    assert clock.model.yaw_u - true0 > 0.3                 # it turned
    assert clock.model.reported_pose()[2] == pytest.approx(yaw0, abs=1e-9)
    clock.send(m.DriveWheels(lwheel_speed_mmps=50, rwheel_speed_mmps=50))
    clock.run(0.2)
    clock.send(m.DriveWheels())
    clock.run(0.05)
    assert clock.model.body.head.calibrating
    x, y, yaw = clock.model.reported_pose()
    assert yaw == pytest.approx(yaw0, abs=1e-9)
    assert x - x0 > 5.0 and abs(y - y0) < 0.5             # along the held heading
    clock.run(1.0)
    assert not clock.model.body.head.calibrating
    clock.model.body.head.pos = HEAD_MAX_RAD               # again: a pick-up is not detected
    clock.send(m.StartMotorCalibration(head=True, lift=False))
    clock.model.pick_up(clock.now)
    clock.run(0.4)
    assert clock.model.body.head.calibrating
    assert not last_state(clock).status & StatusFlag.IS_PICKED_UP
    clock.model.put_down(clock.now)
    clock.run(1.5)                                         # calibrated: turns count again
    assert not clock.model.body.head.calibrating
    start_true, start_yaw = clock.model.yaw_u, clock.model.reported_pose()[2]
    clock.send(m.DriveWheels(lwheel_speed_mmps=-30, rwheel_speed_mmps=30))
    clock.run(0.4)
    clock.send(m.DriveWheels())
    clock.run(0.2)
    assert clock.model.reported_pose()[2] - start_yaw == pytest.approx(clock.model.yaw_u - start_true, abs=1e-6)


# ------------------------------------------------------------------------------- animation stream

def _calibration_events(clock: Clock) -> list:
    return [(c.motor_id, c.calib_started, c.auto_started, round(clock.now, 3))
            for c in clock.take("MotorCalibration")]


def test_head_and_lift_calibrate_at_each_connection_and_take_no_command_meanwhile():
    head_id, lift_id = E["MotorID"].MOTOR_HEAD, E["MotorID"].MOTOR_LIFT
    clock = make(calibrate_at_connection=True, streaming=False)
    clock.model.body.head.pos = HEAD_MAX_RAD          # left up at the last power-off
    clock.send(m.Enable())
    assert not clock.take("MotorCalibration")        # Enable alone does not calibrate
    clock.send(m.SyncTime())
    started = clock.take("MotorCalibration")
    assert [(c.motor_id, c.calib_started, c.auto_started) for c in started] == [
        (head_id, True, False), (lift_id, True, False)]
    # meanwhile: the head keeps the latest command for later, the lift drops it
    clock.send(m.SetHeadAngle(angle_rad=0.5, max_speed_rad_per_sec=10.0))
    clock.send(m.SetHeadAngle(angle_rad=0.3, max_speed_rad_per_sec=10.0))
    clock.send(m.SetLiftHeight(height_mm=70.0, max_speed_rad_per_sec=10.0))
    ends = {}
    at_stop = None
    for _ in range(150):
        clock.run(0.02)
        if at_stop is None and clock.model.head_angle == pytest.approx(HEAD_MIN_RAD):
            at_stop = clock.now
        for c in clock.take("MotorCalibration"):
            assert not c.calib_started and not c.auto_started
            ends[c.motor_id] = clock.now
    assert set(ends) == {head_id, lift_id}
    # the head went down to its stop at a third of its speed, rested, then to 0.3 rad
    travel = (HEAD_MAX_RAD - HEAD_MIN_RAD) / (0.35 * HEAD_MAX_SPEED_RADPS)
    assert travel <= at_stop <= 2 * travel
    assert 0.5 <= ends[head_id] - at_stop <= 0.5 + travel
    assert clock.model.head_angle == pytest.approx(0.3)
    assert 0.75 <= ends[lift_id] <= 1.0                 # the lift was down already
    assert clock.model.lift_height == pytest.approx(LIFT_MIN_MM, abs=0.01)


def test_stop_all_motors_drops_the_waiting_command_and_a_new_connection_the_calibration():
    head_id = E["MotorID"].MOTOR_HEAD
    clock = make(calibrate_at_connection=True)
    clock.take("MotorCalibration")
    clock.send(m.SetHeadAngle(angle_rad=0.3, max_speed_rad_per_sec=10.0))
    clock.send(m.StopAllMotors())
    clock.run(1.0)
    assert [(c.motor_id, c.calib_started) for c in clock.take("MotorCalibration")] == [
        (head_id, False), (E["MotorID"].MOTOR_LIFT, False)]
    assert clock.model.head_angle == pytest.approx(HEAD_MIN_RAD)   # the command was dropped
    # a connection that ends mid-calibration: no end for it, a new calibration for the next
    clock.model.on_connected(clock.now)
    clock.send(m.Enable())
    clock.send(m.SyncTime())
    assert len(clock.take("MotorCalibration")) == 2
    clock.run(0.2)
    clock.model.on_connected(clock.now)
    clock.run(2.0)
    assert not clock.take("MotorCalibration")
    assert not clock.model.body.head.calibrating and not clock.model.body.lift.calibrating
    clock.send(m.SetHeadAngle(angle_rad=0.3, max_speed_rad_per_sec=10.0))  # not enabled yet:
    clock.send(m.Enable())                                                 # motion ignored
    clock.send(m.SyncTime())
    clock.run(1.0)
    assert [c.calib_started for c in clock.take("MotorCalibration")] == [True, True, False, False]


def test_audio_is_played_at_30_per_second_and_decoded():
    clock = make()
    tone = (8000 * np.sin(np.arange(744 * 45) * 2 * math.pi * 440 / 22320)).astype(np.int16)
    frames = [encode_ulaw(tone[i:i + 744]) for i in range(0, len(tone), 744)]
    clock.send(m.EnableAnimationState())
    clock.send(m.SetRobotVolume(level=50000))
    for f in frames:
        clock.send(m.OutputAudio(samples=f))
    clock.run(0.05)
    assert last_state(clock).status & StatusFlag.IS_ANIM_BUFFER_FULL   # 45 x 748 B queued
    clock.run(0.95)
    played = clock.model.audio_frames_played
    assert 29 <= played <= 32
    assert clock.model.anim_queue_length == 45 - played
    clock.run(1.0)
    assert clock.model.audio_frames_played == 44     # the last one waits for the next (firmware)
    clock.send(m.OutputSilence())
    clock.run(0.1)
    assert clock.model.audio_frames_played == 45
    assert not last_state(clock).status & StatusFlag.IS_ANIM_BUFFER_FULL
    pcm = clock.model.audio_pcm()
    expected = decode_ulaw(b"".join(frames))
    assert np.array_equal(pcm[:len(expected)], expected)
    assert clock.model.volume == 50000


def test_nothing_of_the_stream_plays_before_enable_animation_state():
    clock = make()
    bits = np.zeros((32, 128), dtype=bool)
    bits[0:8, 0:8] = True
    clock.send(m.DisplayImage(image=encode_display(bits)))
    clock.send(m.OutputSilence())
    clock.run(0.2)
    assert clock.model.unplayable == 2 and clock.model.anim_queue_length == 0
    assert not clock.model.framebuffer.any() and clock.model.display_images_shown == 0
    assert clock.take("AnimationState") == []
    clock.send(m.EnableAnimationState())
    clock.send(m.OutputSilence())             # a frame: its audio first, then its image
    clock.send(m.DisplayImage(image=encode_display(bits)))
    for _ in range(6):                        # playback starts once 7 frames wait (firmware)
        clock.send(m.OutputSilence())
    clock.run(0.2)
    assert np.array_equal(clock.model.framebuffer, bits)
    assert clock.model.unplayable == 2 and clock.model.display_images_shown == 1
    assert 5 <= len(clock.take("AnimationState")) <= 7  # one per 30 Hz tick


def test_enable_animation_state_before_enable_is_ignored_and_nothing_of_the_stream_plays():
    """The notes: EnableAnimationState "requires Enable" (the body is not powered before
    it). Taken before Enable, the simulator played the stream: the head and treads moved
    and AnimationState came. Now it is ignored, the stream after it is not played
    (``unplayable``), and after Enable a new EnableAnimationState starts playback."""
    clock = make(streaming=False)

    def stream():
        clock.send(m.OutputSilence())
        clock.send(m.AnimHead(duration_ms=200, variability_deg=0, angle_deg=20))
        clock.send(m.AnimBody(speed_mmps=50, unknown=32767))
        for _ in range(8):
            clock.send(m.OutputSilence())

    head = clock.model.head_angle
    clock.send(m.EnableAnimationState())
    stream()
    clock.run(0.5)
    assert not clock.model.anim_state_enabled
    assert clock.model.unplayable == 11 and clock.model.anim_queue_length == 0
    assert clock.model.audio_frames_played == 0 and clock.take("AnimationState") == []
    assert clock.model.head_angle == head and clock.model.true_pose()[0] == 0.0
    clock.send(m.Enable())
    clock.send(m.EnableAnimationState())
    stream()
    clock.run(0.5)
    assert clock.model.unplayable == 11 and clock.model.audio_frames_played >= 8
    assert clock.model.head_angle == pytest.approx(math.radians(20))
    assert clock.model.true_pose()[0] > 5.0
    assert clock.take("AnimationState")


def test_a_frame_that_does_not_start_with_audio_clears_the_stream():
    """Anki's firmware: the robot plays a frame as an audio message and what follows it;
    when the next message is anything else, it clears its whole buffer. An image sent before
    its frame's audio (into an empty buffer: at the start, after an animation) is lost with
    everything queued behind it, again and again."""
    clock = make()
    clock.send(m.EnableAnimationState())
    bits = np.zeros((32, 128), dtype=bool)
    bits[0:8, 0:8] = True
    for _ in range(10):                        # image first: the wrong order
        clock.send(m.DisplayImage(image=encode_display(bits)))
        clock.send(m.OutputSilence())
    clock.run(0.5)
    assert clock.model.buffer_clears == 1 and clock.model.display_images_shown == 0
    assert clock.model.audio_frames_played == 0 and clock.model.anim_queue_length == 0
    for _ in range(10):                        # audio first: played
        clock.send(m.OutputSilence())
        clock.send(m.DisplayImage(image=encode_display(bits)))
    clock.run(0.5)
    assert clock.model.buffer_clears == 1 and clock.model.display_images_shown == 9
    assert np.array_equal(clock.model.framebuffer, bits)


def test_anim_buffer_overflow_clears_the_queue_and_counts_it_played():
    """As Anki's firmware (messages.cpp Process_anim: a keyframe that does not fit clears the
    buffer; animationController.cpp Clear counts what it held as played)."""
    clock = make(anim_buffer_max_bytes=10 * 748)
    clock.send(m.EnableAnimationState())
    for _ in range(12):
        clock.send(m.OutputSilence())
        clock.send(m.OutputAudio(samples=bytes(744)))
    assert clock.model.anim_overflows == 1  # cleared when a frame did not fit, then filled again
    clock.run(0.04)
    model = clock.model
    played = clock.take("AnimationState")[-1].num_audio_frames_played
    assert played >= 19  # the frames waiting when one did not fit, counted as played
    # the counters start again when the stream is enabled anew (a new connection)
    model.animation.reset_link()
    clock.send(m.EnableAnimationState())
    clock.run(0.04)
    assert clock.take("AnimationState")[-1].num_audio_frames_played == 0


def test_a_stream_that_runs_dry_while_playing_is_counted_as_starved():
    clock = make()
    clock.send(m.EnableAnimationState())
    for _ in range(8):
        clock.send(m.OutputSilence())
    clock.run(0.5)
    assert clock.model.animation.starvations == 1  # the last frame waits for the next


def test_display_framebuffer_and_history():
    clock = make()
    bits = np.zeros((32, 128), dtype=bool)
    bits[4:10, 20:60] = True
    bits[20, :] = True
    clock.send(m.EnableAnimationState())
    clock.send(m.OutputSilence())
    clock.send(m.DisplayImage(image=encode_display(bits)))
    clock.send(m.OutputSilence())
    clock.send(m.DisplayImage(image=b"\x3f\x3f"))
    clock.send(m.DisplayImage(image=b"\x40"))   # malformed (repeat of no column): counted, ignored
    for _ in range(6):
        clock.send(m.OutputSilence())
    clock.run(0.5)
    assert not clock.model.framebuffer.any()
    assert clock.model.display_images_shown == 3 and clock.model.display_errors == 1
    history = clock.model.display_history()
    assert len(history) == 2 and np.array_equal(history[0], bits)


def test_animation_start_end_paced_by_audio_and_state_stream():
    clock = make()
    clock.send(m.EnableAnimationState())
    clock.send(m.OutputSilence())              # each frame: its audio, then its keyframes
    clock.send(m.StartAnimation(anim_id=3))
    clock.send(m.AnimHead(duration_ms=200, variability_deg=0, angle_deg=20))
    clock.send(m.AnimLift(duration_ms=200, variability_mm=0, height_mm=60))
    clock.send(m.AnimBackpackLights(colors=[0x7C00, 0x03E0, 0x001F, 0x7FFF, 0]))
    clock.send(m.RecordHeading())
    clock.send(m.AnimBody(speed_mmps=50, unknown=32767))
    for _ in range(14):
        clock.send(m.OutputSilence())
    clock.send(m.OutputSilence())
    clock.send(m.AnimBody(speed_mmps=0, unknown=32767))
    clock.send(m.TurnToRecordedHeading())
    clock.send(m.EndAnimation())
    clock.run(0.1)
    assert [x.anim_id for x in clock.take("AnimationStarted")] == [3]
    assert last_state(clock).status & StatusFlag.IS_ANIMATING
    assert clock.model.anim_backpack_colors == [0x7C00, 0x03E0, 0x001F, 0x7FFF, 0]
    clock.run(0.3)
    assert clock.take("AnimationEnded") == []           # 16 audio frames take 0.53 s
    clock.run(0.8)
    assert [x.anim_id for x in clock.take("AnimationEnded")] == [3]
    assert clock.model.head_angle == pytest.approx(math.radians(20))
    assert clock.model.lift_height == pytest.approx(60.0)
    assert clock.model.anim_backpack_colors == [0] * 5   # the user's lights again when it ends
    assert 15.0 < clock.model.true_pose()[0] < 30.0       # ~0.5 s at 50 mm/s
    anim_states = clock.take("AnimationState")
    assert 30 <= len(anim_states) <= 36                   # one per 30 Hz tick
    assert anim_states[-1].num_audio_frames_played == 17  # and the EndAnimation, as the firmware counts
    assert anim_states[-1].num_anim_bytes_played > 16 * 3
    assert not last_state(clock).status & StatusFlag.IS_ANIMATING


def test_abort_animation():
    clock = make()
    clock.send(m.EnableAnimationState())
    clock.send(m.OutputSilence())
    clock.send(m.StartAnimation(anim_id=8))
    for _ in range(29):
        clock.send(m.OutputSilence())
    clock.run(0.2)
    clock.send(m.AbortAnimation())
    clock.run(0.1)
    assert [x.NAME for x in clock.take() if x.NAME in ("AnimationStarted", "AnimationEnded")] \
        == ["AnimationStarted", "AnimationEnded"]
    assert clock.model.anim_queue_length == 0


# ------------------------------------------------------------------------------- lights, objects

def test_lights_are_recorded():
    clock = make()
    ls = m.STRUCTS["LightState"]
    clock.send(m.LightStateCenter(states=[ls(on_color=0x7C00), ls(on_color=0x03E0), ls(on_color=0x001F)]))
    clock.send(m.LightStateSide(states=[ls(on_color=0x4000), ls(on_color=0x2000)]))
    clock.send(m.SetHeadLight(enable=True))
    lights = clock.model.lights()
    assert [lights["backpack"][k].on_color for k in ("front", "middle", "back", "left", "right")] == [
        0x7C00, 0x03E0, 0x001F, 0x4000, 0x2000]
    assert lights["head_light"] is True


def test_objects_connect_lights_and_sensors():
    clock = make()
    clock.run(1.2)
    avail = {a.factory_id: a for a in clock.take("ObjectAvailable")}
    assert set(avail) == set(CUBE_FACTORY_IDS) | {CHARGER_FACTORY_ID}
    assert all(0 < a.rssi <= 127 for a in avail.values())   # the radio's magnitude, -dBm
    for slot, fid in enumerate(CUBE_FACTORY_IDS):   # ObjectConnect is Anki's SetPropSlot
        clock.send(m.ObjectConnect(factory_id=fid, slot=slot))
    states = clock.take("ObjectConnectionState")
    assert [s.connected for s in states] == [True] * 3
    ids = [s.object_id for s in states]
    assert ids == [0, 1, 2]                              # the slot is the object id
    assert [s.object_type for s in states] == [1, 2, 3]
    clock.send(m.ObjectConnect(factory_id=0x1234, slot=3))  # never heard: no answer (firmware)
    assert clock.take("ObjectConnectionState") == []
    clock.send(m.ObjectConnect(factory_id=0, slot=3))       # emptied: names what it was given to
    gone = clock.take("ObjectConnectionState")[0]
    assert (gone.factory_id, gone.object_id, gone.connected) == (0x1234, 3, False)
    clock.send(m.ObjectConnect(factory_id=CUBE_FACTORY_IDS[0], slot=4))  # beyond the radio's 4: ignored
    assert clock.take("ObjectConnectionState") == []
    ls = m.STRUCTS["LightState"]
    clock.send(m.CubeId(object_id=ids[1], rotation_period_frames=5))
    clock.send(m.CubeLights(states=[ls(on_color=0x7FFF)] * 4))
    assert clock.model.lights()["cubes"][2][0].on_color == 0x7FFF
    assert clock.model.lights()["cubes"][1][0].on_color == 0
    assert clock.model.tap_cube(2, clock.now, taps=2)
    assert clock.model.move_cube(1, clock.now)
    assert clock.model.stop_cube(1, clock.now)
    assert clock.model.set_cube_up_axis(3, E["UpAxis"].XPositive, clock.now)
    clock.out.extend(clock.model.pop_outgoing())
    tap = clock.take("ObjectTapped")[0]
    assert (tap.object_id, tap.num_taps) == (ids[1], 2)
    assert clock.take("ObjectMoved")[0].object_id == ids[0]
    assert clock.take("ObjectStoppedMoving")[0].object_id == ids[0]
    assert clock.take("ObjectUpAxisChanged")[0].axis == E["UpAxis"].XPositive
    clock.send(m.StreamObjectAccel(object_id=ids[2], enable=True))
    clock.run(1.0)
    accel = clock.take("ObjectAccel")
    assert 30 <= len(accel) <= 35 and accel[-1].accel_x == pytest.approx(64.0)  # raw counts: 1 g
    power = clock.take("ObjectPowerLevel")
    assert {p.object_id for p in power} == set(ids)
    clock.take("ObjectAvailable")
    clock.run(2.0)
    assert {a.factory_id for a in clock.take("ObjectAvailable")} == {CHARGER_FACTORY_ID}
    clock.send(m.ObjectConnect(factory_id=0, slot=ids[0]))          # slot 0 emptied: cube1 leaves
    left = clock.take("ObjectConnectionState")[0]
    assert (left.object_id, left.factory_id, left.connected) == (ids[0], CUBE_FACTORY_IDS[0], False)
    assert not clock.model.tap_cube(1, clock.now)
    clock.send(m.ObjectConnect(factory_id=CUBE_FACTORY_IDS[0], slot=ids[1]))  # into cube2's slot
    pushed, took = clock.take("ObjectConnectionState")
    assert (pushed.factory_id, pushed.connected) == (CUBE_FACTORY_IDS[1], False)   # cube2 out
    assert (took.factory_id, took.object_id, took.connected) == (CUBE_FACTORY_IDS[0], ids[1], True)
    clock.send(m.ObjectConnect(factory_id=0, slot=ids[0]))          # an empty slot: names none
    empty = clock.take("ObjectConnectionState")[0]
    assert (empty.object_id, empty.factory_id, empty.connected) == (ids[0], 0, False)


def test_a_streaming_cube_that_leaves_radio_range_stops_streaming_and_the_model_settles():
    clock = make()
    clock.run(1.2)
    clock.send(m.ObjectConnect(factory_id=CUBE_FACTORY_IDS[0], slot=1))
    clock.send(m.StreamObjectAccel(object_id=1, enable=True))
    clock.run(0.5)
    assert clock.take("ObjectAccel")
    clock.model.set_object_in_range(1, False, clock.now)
    assert not clock.model.object_states()[1]["stream_accel"]     # its stream ends, as when it leaves a slot
    tick = clock.model.next_tick()
    assert tick is None or tick > clock.now                        # no wake-up left in the past
    clock.run(2.0)                                                 # settles (it spun for ever)
    assert clock.take("ObjectAccel") == []
    clock.model.set_object_in_range(1, True, clock.now)
    clock.run(1.0)
    assert clock.model.object_ids()[1] == 1 and clock.take("ObjectAccel") == []   # back: streams when asked
    clock.send(m.StreamObjectAccel(object_id=1, enable=True))
    clock.run(0.5)
    assert clock.take("ObjectAccel")


def test_the_charger_has_no_accelerometer_to_stream():
    clock = make()
    clock.run(1.2)
    clock.send(m.ObjectConnect(factory_id=CHARGER_FACTORY_ID, slot=0))
    assert clock.model.object_ids()[0] == 0
    clock.send(m.StreamObjectAccel(object_id=0, enable=True))
    clock.run(1.0)
    assert clock.take("ObjectAccel") == [] and not clock.model.object_states()[0]["stream_accel"]


def test_set_cube_battery_takes_whole_hundredths_of_a_volt_and_refuses_what_it_cannot_send():
    """The level goes out as ObjectPowerLevel's battery_level, a byte of hundredths of a volt:
    1.45 (meant as volts) became 1, 300 became 255 and NaN raised "cannot convert float NaN to
    integer"; a value outside 0..255 or not whole raises ValueError saying what it takes, and
    changes nothing."""
    clock = make()
    clock.run(1.2)
    clock.send(m.ObjectConnect(factory_id=CUBE_FACTORY_IDS[0], slot=0))
    clock.model.set_cube_battery(1, 121, clock.now)
    clock.run(0.1)
    assert [p.battery_level for p in clock.take("ObjectPowerLevel") if p.object_id == 0][-1] == 121
    for level in (1.45, 300, -1, math.nan, True, "120"):
        with pytest.raises(ValueError) as refused:
            clock.model.set_cube_battery(1, level, clock.now)
        assert str(refused.value) == ("set_cube_battery: level must be a whole number 0..255 (hundredths "
                                      f"of a volt: 150 is 1.50 V), got {level!r}")
    assert clock.model.object_states()[1]["battery_level"] == 121


# ------------------------------------------------------------------------------- NV storage

def nv(clock: Clock, op, tag, data=b"", length=0):
    clock.send(m.NvStorageOp(tag=tag, length=length, op=op, data=data))
    return clock.take("NvStorageOpResult")


def test_camera_calibration_entry_matches_the_renderer():
    clock = make()
    [res] = nv(clock, E["NvOperation"].NVOP_READ, E["NvEntryTag"].NVEntry_CameraCalib)
    assert res.result == E["NvResult"].NV_OKAY and res.length == CAMERA_CALIB_SIZE == len(res.data)
    calib = decode_camera_calibration(res.data)
    fx, fy, cx, cy = camera_intrinsics(320, 240)
    assert (calib.focal_length_x, calib.focal_length_y, calib.center_x, calib.center_y) == pytest.approx(
        (fx, fy, cx, cy), rel=1e-6)
    assert (calib.image_width, calib.image_height) == (320, 240)
    original = CameraCalibration(300.5, 301.0, 161.0, 119.0, 0.1, 240, 320, (0.1, -0.2, 0.0, 0.0, 0.01))
    assert decode_camera_calibration(encode_camera_calibration(original)).distortion[:2] == pytest.approx(
        (0.1, -0.2))
    with pytest.raises(RemoteProtocolError):
        decode_camera_calibration(b"\x00" * 10)


def test_nv_write_read_erase():
    clock = make()
    op, tag = E["NvOperation"], E["NvEntryTag"].NVEntry_GameSkillLevels
    assert nv(clock, op.NVOP_READ, tag)[0].result == E["NvResult"].NV_NOT_FOUND
    blob = bytes(range(256)) * 10                        # 2560 B: three parts
    first = nv(clock, op.NVOP_WRITE, tag, blob[:1000], length=len(blob))
    assert first[0].result == E["NvResult"].NV_MORE
    nv(clock, op.NVOP_WRITE, tag, blob[1000:2000], length=len(blob))
    assert nv(clock, op.NVOP_WRITE, tag, blob[2000:], length=len(blob))[0].result == E["NvResult"].NV_OKAY
    parts = nv(clock, op.NVOP_READ, tag)
    assert [p.result for p in parts] == [E["NvResult"].NV_MORE] * 2 + [E["NvResult"].NV_OKAY]
    assert all(len(p.data) <= NV_CHUNK_BYTES and p.length == len(blob) for p in parts)
    assert b"".join(p.data for p in parts) == blob
    assert nv(clock, op.NVOP_WRITE, tag, b"small")[0].result == E["NvResult"].NV_OKAY
    assert nv(clock, op.NVOP_READ, tag)[0].data == b"small"
    assert nv(clock, op.NVOP_ERASE, tag)[0].result == E["NvResult"].NV_OKAY
    assert nv(clock, op.NVOP_READ, tag)[0].result == E["NvResult"].NV_NOT_FOUND
    nv(clock, op.NVOP_WRITE, tag, b"x")
    nv(clock, op.NVOP_WIPEALL, tag)
    assert nv(clock, op.NVOP_READ, tag)[0].result == E["NvResult"].NV_NOT_FOUND
    assert nv(clock, op.NVOP_READ, E["NvEntryTag"].NVEntry_CameraCalib)[0].result == E["NvResult"].NV_OKAY


def test_commands_are_logged():
    clock = make()
    clock.send(m.SetHeadLight(enable=True))
    clock.send(m.MoveLift(speed_rad_per_sec=0.0))
    names = [c.NAME for _, c in clock.model.commands()]
    assert names[-2:] == ["SetHeadLight", "MoveLift"]
    assert clock.model.command_counts["Enable"] == 1


def test_reboot_keeps_the_body_and_forgets_the_rest():
    clock = make()
    clock.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    clock.run(1.0)
    clock.send(m.SetOrigin(pose_frame_id=3, pose_origin_id=3))
    pose = clock.model.true_pose()
    clock.model.reboot(clock.now)
    assert clock.model.true_pose() == pytest.approx(pose)
    assert clock.model.reported_pose() == pytest.approx((0.0, 0.0, 0.0))
    assert not clock.model.is_moving and not clock.model.streaming and clock.model.reboots == 1
    assert clock.model.timestamp_ms(clock.now) == 0


# ------------------------------------------------------------------------------- robustness

def random_engine_message(rng, cls):
    """Any engine->robot message with random field values (NaN, infinities and
    undeclared enum values included), made by decoding random bytes."""
    import struct as _struct

    fixed = len(cls().encode_body()) - (2 if cls.SIZE is None else 0)
    body = bytes(rng.randrange(256) for _ in range(fixed))
    if cls.SIZE is None:
        n = rng.choice([0, 1, 5, 60, 744, 1000])
        body += _struct.pack("<H", n) + bytes(rng.randrange(256) for _ in range(n))
    return cls.decode_body(body)


def test_random_commands_never_break_the_model():
    import random

    rng = random.Random(1234)
    engine_messages = [c for c in m.MESSAGES_BY_NAME.values() if c.SENDER == "engine" and c.ID is not None]
    clock = make(noise=True)
    clock.send(m.EnableAnimationState())
    for k in range(3000):
        clock.send(random_engine_message(rng, rng.choice(engine_messages)))
        if k % 10 == 0:
            clock.run(rng.random() * 0.05)
        for out in clock.take():
            out.encode_body()                      # everything the robot says stays encodable
        x, y, yaw = clock.model.true_pose()
        assert all(math.isfinite(v) for v in (x, y, yaw, clock.model.head_angle, clock.model.lift_height))
    clock.send(m.StopAllMotors())
    clock.run(2.0)
    for out in clock.take():
        out.encode_body()
    assert HEAD_MIN_RAD <= clock.model.head_angle <= HEAD_MAX_RAD
    assert LIFT_MIN_MM - 1e-9 <= clock.model.lift_height <= LIFT_MAX_MM + 1e-9


def test_each_command_has_one_part_that_handles_it():
    # RobotModel merges its parts' handler tables: a name in two tables would be handled
    # by one part only, silently; every name must be an engine->robot message.
    from cozmo_driver.sim.model import RobotModel as Model
    model = Model(config=ModelConfig(noise=False))
    parts = (model.body, model.path, model.animation, model.accessories, model.nv,
             model.camera_control)
    tables = [part.handlers() for part in parts]
    seen: dict = {}
    for part, table in zip(parts, tables):
        for name in table:
            assert name not in seen, f"{name} handled by {type(seen[name]).__name__} and {type(part).__name__}"
            seen[name] = part
            assert m.MESSAGES_BY_NAME[name].SENDER == "engine", name
    for name in ("Enable", "SyncTime", "StopAllMotors", "ShutdownRobot"):  # the model's own
        assert name not in seen
    assert {"DriveWheels", "ExecutePath", "OutputAudio", "ObjectConnect", "NvStorageOp",
            "EnableCamera"} <= set(seen)
