"""Which way up the robot is (cozmo_driver.driver.orientation): the thresholds, the hold
times with injected time, the events, and that the simulator's poses read as meant."""

from __future__ import annotations

import math

import pytest

from cozmo_driver.driver.diagnostics import WARN, robot_report
from cozmo_driver.driver.events import EventType
from cozmo_driver.driver.orientation import (BACK_HOLD_S, HOLD_S, Orientation,
                                             OrientationDetector, classify)
from cozmo_driver.driver.sensors import StatusFlag
from cozmo_driver.protocol import messages as msgs
from cozmo_driver.sim.model import ModelConfig, RobotModel
from cozmo_driver.sim.world import World

DEG = math.radians
G = 9810.0


@pytest.mark.parametrize("pitch_deg, accel_y, flags, expected", [
    (0.0, 0.0, 0, Orientation.ON_TREADS),
    (44.0, 300.0, 0, Orientation.ON_TREADS),
    (8.6, 0.0, StatusFlag.IS_PICKED_UP, Orientation.IN_AIR),
    (74.5, 0.0, 0, Orientation.ON_BACK),
    (60.0, 0.0, 0, Orientation.ON_BACK),
    (89.0, 0.0, StatusFlag.IS_PICKED_UP, Orientation.ON_BACK),
    (58.0, 0.0, 0, Orientation.ON_TREADS),       # neither flat nor on its back: no new state
    (-85.0, 0.0, 0, Orientation.ON_FACE),
    (115.0, 0.0, 0, Orientation.ON_FACE),
    (0.0, 10500.0, 0, Orientation.ON_RIGHT_SIDE),
    (0.0, 7600.0, 0, Orientation.ON_RIGHT_SIDE),
    (0.0, 7400.0, 0, Orientation.ON_TREADS),
    (0.0, -9000.0, 0, Orientation.ON_LEFT_SIDE),
    (74.5, -9810.0, 0, Orientation.ON_LEFT_SIDE),  # a side wins over the back, as in Anki's engine
    (74.5, 0.0, StatusFlag.IS_FALLING, Orientation.FALLING),
    (float("nan"), float("nan"), 0, Orientation.ON_TREADS),
])
def test_classify(pitch_deg, accel_y, flags, expected):
    assert classify(DEG(pitch_deg), accel_y, int(flags)) == expected


def feed(d: OrientationDetector, t0: float, t1: float, pitch_deg: float, accel_y: float = 0.0,
         flags: int = 0, step: float = 0.03):
    """Readings every ``step`` s from t0 to t1 (inclusive): (time, event types) of each event."""
    out = []
    n = int(round((t1 - t0) / step))
    for k in range(n + 1):
        t = t0 + k * step
        out += [(round(t, 3), e.type, e.description) for e in d.update(t, DEG(pitch_deg), accel_y, flags)]
    return out


def test_the_first_reading_is_the_baseline_and_says_nothing():
    d = OrientationDetector()
    assert d.state == Orientation.UNKNOWN and d.describe() is None
    assert d.update(0.0, DEG(74.5), 0.0, 0) == []
    assert d.state == Orientation.ON_BACK and d.lying() and d.describe() == "on its back"
    # standing up from the baseline's back is "on its treads again"
    assert [e.type for e in d.update(0.03, 0.0, 0.0, 0)] == [EventType.ON_TREADS]


def test_back_counts_after_holding_one_second_and_treads_at_once():
    d = OrientationDetector()
    assert feed(d, 0.0, 1.0, 0.0) == []
    events = feed(d, 1.03, 3.0, 74.5)
    assert [kind for _, kind, _ in events] == [EventType.ON_BACK]
    assert BACK_HOLD_S - 1e-9 <= events[0][0] - 1.03 <= BACK_HOLD_S + 0.031  # the next reading
    assert events[0][2] == "on its back" and d.state == Orientation.ON_BACK
    events = feed(d, 3.03, 3.3, 0.0)
    assert [(t, kind, text) for t, kind, text in events] == [(3.03, EventType.ON_TREADS,
                                                              "back on its treads")]
    assert d.state == Orientation.ON_TREADS and not d.lying()


def test_a_pose_passed_through_does_not_count():
    d = OrientationDetector()
    feed(d, 0.0, 0.1, 0.0)
    # rolled over the back for 0.9 s, then onto the treads: no event at all
    assert feed(d, 0.13, 1.03, 74.5) == []
    assert feed(d, 1.06, 1.5, 0.0) == []
    # the hold restarts when the reading changes: face 0.2 s, side 0.2 s, face 0.2 s
    assert feed(d, 1.53, 1.71, -90.0) == []
    assert feed(d, 1.74, 1.92, 0.0, accel_y=G) == []
    assert feed(d, 1.95, 2.13, -90.0) == []
    events = feed(d, 2.16, 2.4, -90.0)
    assert [kind for _, kind, _ in events] == [EventType.ON_FACE]
    assert events[0][0] - 1.95 >= HOLD_S


def test_sides_face_and_the_air():
    d = OrientationDetector()
    feed(d, 0.0, 0.1, 0.0)
    right = feed(d, 0.13, 0.6, 0.0, accel_y=G)
    left = feed(d, 0.63, 1.2, 0.0, accel_y=-G)
    assert [(k, text) for _, k, text in right + left] == [
        (EventType.ON_RIGHT_SIDE, "on its right side"), (EventType.ON_LEFT_SIDE, "on its left side")]
    # picked up from its side and put down: in the air says nothing (PICKED_UP does), the
    # treads say it is upright again
    assert feed(d, 1.23, 1.5, 5.0, flags=StatusFlag.IS_PICKED_UP) == []
    assert d.state == Orientation.IN_AIR
    assert [k for _, k, _ in feed(d, 1.53, 1.6, 0.0)] == [EventType.ON_TREADS]
    # picked up and put down without lying anywhere: no ON_TREADS
    assert feed(d, 1.63, 1.8, 5.0, flags=StatusFlag.IS_PICKED_UP) == []
    assert feed(d, 1.83, 2.0, 0.0) == []
    # falling counts at once, and says nothing (FALLING_STARTED does)
    assert feed(d, 2.03, 2.03, 0.0, flags=StatusFlag.IS_FALLING) == []
    assert d.state == Orientation.FALLING


def test_readings_while_the_head_calibrates_are_not_used():
    """Anki's firmware resets its IMU filter while the head calibrates (pitch 0): a robot on
    its back would seem to stand up and lie down again."""
    from cozmo_driver.driver.events import RobotEventData

    d = OrientationDetector()
    feed(d, 0.0, 0.1, 0.0)
    assert [k for _, k, _ in feed(d, 0.13, 1.3, 74.5)] == [EventType.ON_BACK]
    d.on_calibration([RobotEventData(EventType.HEAD_CALIBRATION_STARTED, "head calibration started")])
    assert feed(d, 1.33, 2.5, 0.0) == [] and d.state == Orientation.ON_BACK
    d.on_calibration([RobotEventData(EventType.HEAD_CALIBRATION_ENDED, "head calibrated")])
    assert feed(d, 2.53, 3.0, 74.5) == [] and d.state == Orientation.ON_BACK
    assert [k for _, k, _ in feed(d, 3.03, 3.1, 0.0)] == [EventType.ON_TREADS]


def test_the_first_reading_is_the_baseline_even_while_the_head_calibrates():
    """The robot calibrates its head at each connection, from before its first state: the
    detector is held from its first reading, which still sets the baseline (the status's
    orientation is UNKNOWN only before the first state). A robot lying on its back, read
    on its treads meanwhile (pitch 0), is reported once the calibration has ended."""
    d = OrientationDetector()
    d.held = True
    assert feed(d, 0.0, 0.9, 0.0) == [] and d.state == Orientation.ON_TREADS
    d.held = False
    assert [k for _, k, _ in feed(d, 0.93, 2.0, 74.5)] == [EventType.ON_BACK]


def test_changes_while_not_publishing_are_reported_when_publishing_again():
    """While the node is inactive the state follows the robot but nothing is said; the
    first reading published again reports the net change (as the status flags do)."""
    d = OrientationDetector()
    feed(d, 0.0, 0.1, 0.0)
    # laid on its back while inactive: the state follows, no event
    assert [d.update(0.13 + 0.03 * k, DEG(74.5), 0.0, 0, publish=False) for k in range(40)] \
        == [[]] * 40
    assert d.state == Orientation.ON_BACK
    assert [e.type for e in d.update(1.5, DEG(74.5), 0.0, 0)] == [EventType.ON_BACK]
    assert feed(d, 1.53, 2.0, 74.5) == []
    # stood up and laid on its back again while inactive: nothing changed, nothing said
    assert d.update(2.03, 0.0, 0.0, 0, publish=False) == [] and d.state == Orientation.ON_TREADS
    for k in range(40):
        d.update(2.06 + 0.03 * k, DEG(74.5), 0.0, 0, publish=False)
    assert feed(d, 3.5, 3.6, 74.5) == []
    # stood up while inactive: back on its treads once published
    assert d.update(3.63, 0.0, 0.0, 0, publish=False) == []
    assert [e.type for e in d.update(3.66, 0.0, 0.0, 0)] == [EventType.ON_TREADS]


def test_orientations_match_the_status_message():
    from pathlib import Path
    import re

    text = (Path(__file__).resolve().parents[2] / "cozmo_interfaces/msg/RobotStatus.msg").read_text()
    declared = dict(re.findall(r"^uint8 ORIENTATION_([A-Z_]+)=(\d+)$", text, re.M))
    ours = {k: str(v) for k, v in vars(Orientation).items() if k.isupper()}
    assert ours == declared and len(ours) == 8


def test_the_robot_diagnostic_says_it_lies():
    report = robot_report(True, 4.0, 0.8, False, 0.01, 0, 0, "on its back", True)
    assert report.level == WARN
    assert report.message == "the robot lies on its back: it cannot drive until it is set upright"
    assert dict(report.values)["orientation"] == "on its back"
    upright = robot_report(True, 4.0, 0.8, False, 0.01, 0, 0, "on its treads", False)
    assert upright.message == "ok" and dict(upright.values)["orientation"] == "on its treads"
    assert dict(robot_report(False, None, None, False, None, 0, 0).values)["orientation"] == "unknown"


@pytest.mark.parametrize("side, expected", [
    ("back", Orientation.ON_BACK), ("face", Orientation.ON_FACE),
    ("left", Orientation.ON_LEFT_SIDE), ("right", Orientation.ON_RIGHT_SIDE)])
def test_the_simulators_poses_read_as_meant(side, expected):
    """The simulated robot laid on its back, face or a side sends RobotStates the detector
    reads as that pose (with the simulator's sensor noise), and put down, as on its treads."""
    model = RobotModel(World(0), ModelConfig(noise=True, calibrate_at_connection=False))
    model.on_connected(0.0)
    model.handle(msgs.Enable(), 0.0)
    model.handle(msgs.SyncTime(), 0.0)
    d = OrientationDetector()
    now = [0.0]

    def run(seconds: float) -> list:
        events = []
        for _ in range(int(round(seconds / 0.01))):
            now[0] += 0.01
            model.advance(now[0])
            for s in model.pop_outgoing():
                if s.NAME == "RobotState":
                    events += [e.type for e in d.update(now[0], s.pose_pitch_rad,
                                                        s.accel_y_mmps2, int(s.status))]
        return events

    assert run(0.3) == [] and d.state == Orientation.ON_TREADS
    model.lay(now[0], side)
    assert run(1.5) == [expected - Orientation.ON_BACK + EventType.ON_BACK]
    assert d.state == expected
    model.put_down(now[0])
    assert run(0.3) == [EventType.ON_TREADS]
    with pytest.raises(ValueError, match="not one of"):
        model.lay(now[0], "top")
