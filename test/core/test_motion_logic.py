"""The motion actions' logic without ROS: path conversion, planning, goal checks, the
trackers, and the small tf lookup (cozmo_driver/driver/motion.py, transforms.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cozmo_driver.driver import motion as mo
from cozmo_driver.driver.motion import (ABORTED, ARC, LINE, POINT_TURN, SUCCEEDED, MotionError,
                                        Segment, StateSample)
from cozmo_driver.driver.odometry import Pose2D, wrap_angle
from cozmo_driver.driver.sensors import CLIFF_EDGE_HOLD_S, StatusFlag
from cozmo_driver.driver.transforms import TransformBuffer, TransformError, pose_to_2d, transform_point

HALF_PI = math.pi / 2.0


def kinds(segments):
    return [SEGMENT_NAMES[s.type] for s in segments]


SEGMENT_NAMES = {LINE: "L", ARC: "A", POINT_TURN: "T"}


def square(side=0.2, step=0.02):
    """Poses along a square, counter-clockwise from the origin, heading along each side."""
    n = int(round(side / step))
    poses = []
    corners = [(0.0, 0.0, 0.0), (side, 0.0, HALF_PI), (side, side, math.pi), (0.0, side, -HALF_PI)]
    for (x0, y0, yaw) in corners:
        for k in range(n):
            poses.append(Pose2D(x0 + math.cos(yaw) * step * k, y0 + math.sin(yaw) * step * k, yaw))
    poses.append(Pose2D(0.0, 0.0, 0.0))
    return poses


def follow(segments, start: Pose2D) -> Pose2D:
    """Where an ideal robot ends after the segments (points and headings)."""
    return mo.segments_end_pose(segments, start)


# ----------------------------------------------------------------------------- path conversion

def test_square_becomes_four_lines_and_corner_turns():
    segs = mo.path_to_segments(square(), Pose2D(), fit_tolerance=0.005)
    assert kinds(segs) == ["L", "T", "L", "T", "L", "T", "L", "T"]
    corners = [(0.2, 0.0), (0.2, 0.2), (0.0, 0.2), (0.0, 0.0)]
    for line, corner in zip(segs[0::2], corners):
        assert line.end_point() == pytest.approx(corner, abs=1e-9)
        assert line.speed == mo.DEFAULT_SPEED_MPS
    for turn, heading in zip(segs[1::2], (HALF_PI, math.pi, -HALF_PI, 0.0)):
        assert wrap_angle(turn.heading - heading) == pytest.approx(0.0, abs=1e-9)
        assert turn.tolerance == pytest.approx(mo.DEFAULT_TURN_TOLERANCE_RAD)
    end = follow(segs, Pose2D())
    assert (end.x, end.y, end.yaw) == pytest.approx((0.0, 0.0, 0.0), abs=1e-9)


def test_quarter_circle_becomes_one_arc():
    r = 0.15
    poses = [Pose2D(r * math.sin(a), r - r * math.cos(a), a)
             for a in (i * HALF_PI / 30 for i in range(31))]
    segs = mo.path_to_segments(poses, Pose2D(), fit_tolerance=0.002)
    assert kinds(segs) == ["A", "T"]  # the final turn fixes what the path follower leaves
    arc = segs[0]
    assert (arc.center_x, arc.center_y, arc.radius) == pytest.approx((0.0, r, r), abs=1e-6)
    assert arc.sweep == pytest.approx(HALF_PI, abs=1e-6)
    assert arc.start_heading(0.0) == pytest.approx(0.0, abs=1e-6)
    end = follow(segs, Pose2D())
    assert (end.x, end.y, end.yaw) == pytest.approx((r, r, HALF_PI), abs=1e-6)


def test_clockwise_arc_then_line():
    r = 0.1
    poses = [Pose2D(r * math.sin(a), -(r - r * math.cos(a)), -a)
             for a in (i * math.pi / 40 for i in range(41))]          # half circle to the right
    poses += [Pose2D(-0.03 * k, -2 * r, math.pi) for k in range(1, 8)]  # then straight back
    segs = mo.path_to_segments(poses, Pose2D(), fit_tolerance=0.002)
    assert kinds(segs) == ["A", "L", "T"]
    assert segs[0].sweep == pytest.approx(-math.pi, abs=1e-6)
    assert segs[1].end_point() == pytest.approx((-0.21, -0.2), abs=1e-9)


def test_heading_change_in_place_is_a_point_turn():
    segs = mo.path_to_segments([Pose2D(0.0, 0.0, 0.0), Pose2D(0.0, 0.0, 1.2)], Pose2D(),
                               fit_tolerance=0.005, turn_speed=1.0, turn_accel=4.0)
    assert kinds(segs) == ["T"]
    assert segs[0].heading == pytest.approx(1.2)
    assert (segs[0].speed, segs[0].accel, segs[0].decel) == (1.0, 4.0, 4.0)


def test_robot_facing_away_turns_first_and_small_bends_do_not():
    # the robot looks along -y; the path goes along +x: turn to it first
    segs = mo.path_to_segments([Pose2D(0.1, 0.0, 0.0)], Pose2D(0.0, 0.0, -HALF_PI),
                               fit_tolerance=0.005)
    assert kinds(segs) == ["T", "L", "T"]
    assert segs[0].heading == pytest.approx(0.0)
    # a bend of 0.2 rad (< TURN_THRESHOLD_RAD) is left to the path follower
    bend = [Pose2D(0.1, 0.0, 0.0), Pose2D(0.1 + 0.1 * math.cos(0.2), 0.1 * math.sin(0.2), 0.2)]
    segs = mo.path_to_segments(bend, Pose2D(), fit_tolerance=0.001)
    assert kinds(segs) == ["L", "L", "T"]


def test_intermediate_headings_are_ignored_and_the_last_is_honoured():
    # a planner that leaves orientations unset (identity) except the goal's
    poses = [Pose2D(0.02 * k, 0.0, 0.0) for k in range(1, 6)] + [Pose2D(0.1, 0.0, 2.0)]
    segs = mo.path_to_segments(poses, Pose2D(), fit_tolerance=0.005)
    assert kinds(segs) == ["L", "T"]
    assert segs[1].heading == pytest.approx(2.0)
    # after driving, the final turn is always there (a no-op when the robot arrives right)
    segs = mo.path_to_segments([Pose2D(0.1, 0.0, 0.01)], Pose2D(), fit_tolerance=0.005)
    assert kinds(segs) == ["L", "T"]
    # turning in place only: no turn within the tolerance
    assert mo.path_to_segments([Pose2D(0.0, 0.0, 0.01)], Pose2D(), fit_tolerance=0.005) == []


def test_noisy_line_within_the_fit_tolerance_is_one_line():
    poses = [Pose2D(0.01 * k, 0.002 * (-1) ** k, 0.0) for k in range(1, 51)]
    assert kinds(mo.path_to_segments(poses, Pose2D(), fit_tolerance=0.005)) == ["L", "T"]
    # a tighter tolerance than the noise splits it
    assert len(mo.path_to_segments(poses, Pose2D(), fit_tolerance=0.001)) > 2


def test_duplicates_and_a_path_starting_at_the_robot_are_merged():
    poses = [Pose2D(0.0, 0.0, 0.0)] * 3 + [Pose2D(0.05, 0.0, 0.0)] * 2 + [Pose2D(0.1, 0.0, 0.0)]
    segs = mo.path_to_segments(poses, Pose2D(0.0004, 0.0, 0.0), fit_tolerance=0.005)
    assert kinds(segs) == ["L", "T"]
    assert segs[0].length == pytest.approx(0.1, abs=1e-3)


def navfn_path(robot_x, robot_y, cells, goal_yaw=0.0, cell=0.01):
    """A grid planner's path (NavFn's on the 1 cm costmap of config/nav2_params.yaml): the
    centres of ``cells`` (column, row) counted from the cell the robot at (robot_x, robot_y)
    is in, the last pose with the goal's heading."""
    col, row = math.floor(robot_x / cell), math.floor(robot_y / cell)
    assert (col, row) == (0, 0)
    poses = [Pose2D((col + c + 0.5) * cell, (row + r + 0.5) * cell, 0.0) for c, r in cells]
    poses[-1] = Pose2D(poses[-1].x, poses[-1].y, goal_yaw)
    return poses


def turned(segments, yaw: float) -> float:
    """How much the robot turns in place along ``segments`` from the heading ``yaw``, rad."""
    total = 0.0
    for seg in segments:
        if seg.type == POINT_TURN:
            total += abs(wrap_angle(seg.heading - yaw))
        yaw = seg.end_heading(seg.start_heading(yaw))
    return total


@pytest.mark.parametrize("off, fit", [((0.0049, 0.0049), 0.005), ((0.0045, -0.0035), 0.005),
                                      ((0.0049, 0.0), 0.002), ((0.0045, -0.0035), 0.002)],
                         ids=["7mm_behind_beside", "6mm_behind_beside", "5mm_behind_tight_fit",
                              "6mm_behind_beside_tight_fit"])
def test_a_grid_planners_path_is_followed_from_the_robot_without_turning_round(off, fit):
    """A grid planner's path starts at the centre of the robot's cell, here 5..7 mm behind (and
    beside) the robot (facing +x, the way the path goes): followed from that pose, the robot
    turned to it (up to half a turn), drove a few mm and turned back, at the start of every
    planned path. The poses within PATH_START_RADIUS_M of it are where the robot is. (The line
    fit already absorbed a first pose within fit_tolerance of the line on.)"""
    start = Pose2D(0.005 + off[0], 0.005 + off[1], 0.0)
    poses = navfn_path(start.x, start.y, [(c, 0) for c in range(31)])
    assert 0.0045 <= math.hypot(poses[0].x - start.x, poses[0].y - start.y) <= 0.0071
    segs = mo.path_to_segments(poses, start, fit_tolerance=fit)
    described = [s.describe() for s in segs]
    assert kinds(segs)[-1] == "T" and "T" not in kinds(segs)[:-1], described
    assert segs[0].start_point() == pytest.approx((start.x, start.y), abs=1e-12)
    assert segs[-2].end_point() == pytest.approx((poses[-1].x, poses[-1].y), abs=1e-12)
    assert turned(segs, start.yaw) < 0.05, described
    assert mo.path_start_index(poses, start) >= 1


def _default_fit_tolerance() -> float:
    """FollowPath's default fit_tolerance, as the interface gives it to every client."""
    action = Path(__file__).resolve().parents[2] / "cozmo_interfaces" / "action" / "FollowPath.action"
    (line,) = [ln for ln in action.read_text().splitlines() if ln.startswith("float64 fit_tolerance ")]
    return float(line.split()[-1])


@pytest.mark.parametrize("along, across", [(2, 1), (3, 1), (4, 1), (3, 2), (5, 2)])
def test_a_grid_planners_staircase_is_one_straight_run_at_the_default_fit_tolerance(along, across):
    """A grid planner's path along a slope that is neither an axis nor a diagonal is a
    staircase of cell centres, up to 7 mm off any line through its poses. At the old default
    fit_tolerance (5 mm) a 4:1 one became up to 23 segments and 11.8 rad of turning in place
    over 40 cm, a point turn at every step; at the default it is one straight run from
    anywhere in the robot's cell (docs/motion.md)."""
    fit = _default_fit_tolerance()
    heading = math.atan2(across, along)
    cells = [(c, math.floor(c * across / along + 0.5)) for c in range(41)]
    worst_turn, most = 0.0, 0
    for ox in range(1, 10):
        for oy in range(1, 10):
            start = Pose2D(ox * 0.001, oy * 0.001, heading)
            poses = navfn_path(start.x, start.y, cells, goal_yaw=heading)
            segs = mo.path_to_segments(poses, start, fit_tolerance=fit)
            assert kinds(segs)[-1] == "T" and "T" not in kinds(segs)[:-1], [s.describe() for s in segs]
            worst_turn, most = max(worst_turn, turned(segs, heading)), max(most, len(segs))
    assert most <= 3                # a line (or two) and the final turn
    assert worst_turn < 0.1         # the final turn's few hundredths: no point turn on the way
    if (along, across) == (4, 1):   # the old default, from the cell's centre: turns on the way
        old = mo.path_to_segments(navfn_path(0.005, 0.005, cells, goal_yaw=heading),
                                  Pose2D(0.005, 0.005, heading), fit_tolerance=0.005)
        assert kinds(old)[:-1].count("T") >= 5 and turned(old, heading) > 3.0


def test_a_diagonal_grid_path_turns_only_where_it_bends():
    """NavFn-like: the robot's cell centre 6 mm behind it, then diagonally up and along +x:
    one turn where the path bends (not at the start), and the goal's."""
    start = Pose2D(0.0095, 0.0012, math.pi / 4)
    cells = [(k, k) for k in range(11)] + [(10 + k, 10) for k in range(1, 11)]
    poses = navfn_path(start.x, start.y, cells)
    segs = mo.path_to_segments(poses, start, fit_tolerance=0.005)
    assert segs[0].type != POINT_TURN and kinds(segs).count("T") == 2, [s.describe() for s in segs]
    assert abs(wrap_angle(segs[0].start_heading(start.yaw) - start.yaw)) < mo.TURN_THRESHOLD_RAD
    assert turned(segs, start.yaw) < math.pi / 4 + 0.3


def test_a_path_starting_farther_than_the_radius_is_followed_from_its_first_pose():
    """A first pose beyond PATH_START_RADIUS_M is kept: the robot turns to it (here behind)."""
    poses = [Pose2D(-0.012, 0.0, 0.0), Pose2D(-0.012, 0.1, HALF_PI)]
    assert mo.path_start_index(poses, Pose2D()) == 0
    segs = mo.path_to_segments(poses, Pose2D(), fit_tolerance=0.005)
    assert kinds(segs) == ["T", "L", "T", "L", "T"]
    assert segs[1].end_point() == pytest.approx((-0.012, 0.0))


@pytest.mark.parametrize("x", [0.005, 0.008, 0.012])
def test_a_first_pose_the_robot_is_past_is_taken_as_its_position(x):
    """The robot moved on since the path was planned: its first pose, 10-20 mm away, is behind
    and beside it. Followed from that pose, the robot turned round (2.1 rad), drove back to it
    and turned round again; it now goes on from where it is, turning little."""
    start = Pose2D(x, 0.009, 0.0)
    poses = [Pose2D(0.01 * k, 0.0, 0.0) for k in range(31)]
    assert mo.PATH_START_RADIUS_M < math.hypot(x, 0.009) <= mo.PATH_PASSED_RADIUS_M  # the first pose
    assert mo.path_start_index(poses, start) >= 1
    segs = mo.path_to_segments(poses, start, fit_tolerance=0.008)
    assert turned(segs, 0.0) < 1.2, [s.describe() for s in segs]
    assert segs[-1].end_point() == pytest.approx((0.3, 0.0))


def test_a_first_pose_within_20_mm_that_the_robot_is_not_past_is_followed():
    """Ahead of the robot or beside it (not past), a first pose beyond 10 mm stays, as does one
    past it but farther than 20 mm; past it within 20 mm, it is skipped, up to the pose the
    robot is not past."""
    poses = [Pose2D(0.01 * k, 0.0, 0.0) for k in range(31)]
    cases = [((-0.012, 0.0), 0),     # 12 mm before the path's start: driven to
             ((0.0, 0.015), 0),      # 15 mm beside it: driven to
             ((0.015, 0.015), 0),    # past it, but 21 mm away
             ((0.005, -0.019), 1)]   # past it, 19.6 mm away; the next pose is ahead of the robot
    for (x, y), first in cases:
        assert mo.path_start_index(poses, Pose2D(x, y, 0.0)) == first, (x, y)
    one = [Pose2D(0.0, 0.0, 1.0)]    # the goal alone is never skipped
    assert mo.path_start_index(one, Pose2D(0.005, 0.009, 0.0)) == 0
    # the path's direction at a pose is to the next pose at another place (not 0.5 mm back)
    again = [Pose2D(0.0, 0.0, 0.0), Pose2D(-0.0005, 0.0, 0.0), Pose2D(0.02, 0.0, 0.0), Pose2D(0.03, 0.0, 0.0)]
    assert mo.path_start_index(again, Pose2D(0.005, 0.009, 0.0)) == 2


@pytest.mark.parametrize("last", [(0.006, 0.0), (-0.006, 0.0), (0.0, 0.009)])
def test_the_last_pose_is_never_skipped(last):
    """A goal within the radius, after poses within it too, is still driven to and its
    heading honoured; one pose alone likewise."""
    for poses in ([Pose2D(0.002, 0.0, 0.0), Pose2D(last[0], last[1], 1.0)], [Pose2D(last[0], last[1], 1.0)]):
        assert mo.path_start_index(poses, Pose2D()) == len(poses) - 1
        segs = mo.path_to_segments(poses, Pose2D(), fit_tolerance=0.005)
        assert [s for s in segs if s.type == LINE][0].end_point() == pytest.approx(last)
        assert segs[-1].type == POINT_TURN and segs[-1].heading == pytest.approx(1.0)
        end = follow(segs, Pose2D())
        assert (end.x, end.y, end.yaw) == pytest.approx((last[0], last[1], 1.0), abs=1e-9)


def test_a_goal_a_few_cm_away_is_driven_to_from_a_cell_centre_behind():
    start = Pose2D(0.0093, 0.0048, 0.0)
    poses = navfn_path(start.x, start.y, [(0, 0), (1, 0), (2, 0), (3, 0)])
    segs = mo.path_to_segments(poses, start, fit_tolerance=0.005)
    assert kinds(segs) == ["L", "T"]
    assert segs[0].end_point() == pytest.approx((0.035, 0.005)) and turned(segs, 0.0) < 0.05


def test_a_path_coming_back_near_the_start_is_not_cut_there():
    """Only the leading poses are skipped: a loop that passes the start again (within the
    radius) is followed through it, as is its end at the start."""
    start = Pose2D(0.0, 0.0, 0.0)
    poses = [Pose2D(-0.004, 0.0, 0.0)] + square(side=0.1, step=0.02)[1:]
    poses[-1] = Pose2D(0.003, 0.004, 0.0)  # back near the start
    poses += [Pose2D(0.05, 0.0, 0.0)]  # and on again
    assert mo.path_start_index(poses, start) == 1
    segs = mo.path_to_segments(poses, start, fit_tolerance=0.002)
    ends = [s.end_point() for s in segs if s.type == LINE]
    assert ends[0] == pytest.approx((0.1, 0.0)) and ends[1] == pytest.approx((0.1, 0.1))
    assert ends[-2:] == [pytest.approx((0.003, 0.004)), pytest.approx((0.05, 0.0))], [s.describe() for s in segs]


def test_nothing_to_drive_gives_no_segments():
    assert mo.path_to_segments([Pose2D(0.0, 0.0, 0.0)], Pose2D(), fit_tolerance=0.005) == []


def test_a_long_dense_path_converts_to_a_line_and_a_turn():
    import time
    poses = [Pose2D(0.001 * k, 0.0, 0.0) for k in range(1, 5001)]
    t0 = time.perf_counter()
    segs = mo.path_to_segments(poses, Pose2D(), fit_tolerance=0.002)
    assert kinds(segs) == ["L", "T"]
    print(f"5000 poses converted in {time.perf_counter() - t0:.3f} s")


@pytest.mark.parametrize("poses, match", [
    ([], "no poses"),
    ([Pose2D(math.nan, 0.0, 0.0)], r"path.poses\[0\].x is nan"),
    ([Pose2D(0.1, 0.0, math.inf)], r"path.poses\[0\].yaw is inf"),
])
def test_bad_paths_are_refused(poses, match):
    with pytest.raises(MotionError, match=match):
        mo.path_to_segments(poses, Pose2D(), fit_tolerance=0.005)


def test_fit_tolerance_zero_is_refused():
    with pytest.raises(MotionError, match="fit_tolerance = 0 m cannot be reached"):
        mo.path_to_segments([Pose2D(0.1, 0.0, 0.0)], Pose2D(), fit_tolerance=0.0)


def test_too_many_segments_are_refused():
    zigzag = [Pose2D(0.01 * k, 0.02 * (k % 2), 0.0) for k in range(1, 400)]
    with pytest.raises(MotionError, match=r"^the path as segments: (\d+) segments; the robot follows at "
                                          r"most 128 at once \(.*\); raise fit_tolerance or shorten "
                                          "the path$"):
        mo.path_to_segments(zigzag, Pose2D(), fit_tolerance=0.001)


def test_the_robot_counts_an_arcs_pieces():
    """Anki's firmware splits an arc where its centre angle passes 0 or pi, each piece a
    segment in curr_path_segment: a limit on the robot's count, and a map from the robot's
    index to ours (feedback: current_segment, distance_remaining, segments_completed)."""
    arc = Segment.arc(0, 0, 0.1, -1.57, 5.95)           # passes 0 and pi: 3 pieces
    assert mo.robot_segments(arc, arc.start_angle) == 3
    assert mo.robot_segments(Segment.arc(0, 0, 0.1, 0.0, 1.0), 0.0) == 1   # from 0: no split
    assert mo.robot_segments(Segment.arc(0, 0, 0.1, 0.5, -1.0), 0.5) == 2  # through 0
    assert mo.robot_segments(arc) == 3                    # the most, in any frame
    assert mo.robot_segment_owners([arc, Segment.point_turn(0, 0, 1.0)]) == [0, 0, 0, 1]
    tracker = mo.PathTracker(deadline=100.0, event_id=4,
                             segments=[arc, Segment.point_turn(0, 0, 1.0)])
    tracker.on_path_event(4, 0)
    for t, (robot_index, ours) in enumerate(((0, 0), (2, 0), (3, 1))):
        tracker.on_state(sample(0.1 * t, path_segment=robot_index, flags=StatusFlag.IS_PATHING))
        assert tracker.current == ours
    # 65 arcs of up to 2 pieces each (in some frame) are more than the robot numbers
    halves = [Segment.arc(0, 0, 0.1, 0.0, math.pi - 1e-3)] * 65
    with pytest.raises(MotionError, match=r"segments: 65 segments, up to 130 on the robot \(it splits "
                                          r"an arc .*\); the robot follows at most 128"):
        mo.check_robot_size(halves, "segments")
    mo.check_robot_size(halves[:64], "segments")


# ----------------------------------------------------------------------------- planning

def test_go_to_pose_ahead_and_turned_is_one_arc():
    # the circle tangent to the heading through (0.1, 0.1) arrives heading +pi/2
    segs = mo.plan_go_to_pose(Pose2D(), Pose2D(0.1, 0.1, HALF_PI), 0.01, 0.05)
    assert kinds(segs) == ["A", "T"]
    end = follow(segs, Pose2D())
    assert (end.x, end.y, end.yaw) == pytest.approx((0.1, 0.1, HALF_PI), abs=1e-9)


def test_go_to_pose_elsewhere_is_turn_line_turn():
    start, goal = Pose2D(0.5, 0.5, 1.0), Pose2D(0.2, 0.1, -2.0)
    segs = mo.plan_go_to_pose(start, goal, 0.01, 0.05, speed=0.15)
    assert kinds(segs) == ["T", "L", "T"]
    assert segs[1].speed == 0.15
    end = follow(segs, start)
    assert (end.x, end.y) == pytest.approx((0.2, 0.1), abs=1e-9)
    assert wrap_angle(end.yaw - goal.yaw) == pytest.approx(0.0, abs=1e-9)
    assert segs[0].tolerance == pytest.approx(math.radians(2.0))  # not 0.025: turns stop within 2 deg


def test_go_to_pose_straight_ahead_needs_no_turn_and_already_there_needs_nothing():
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.3, 0.0, 0.0), 0.01, 0.05)) == ["L", "T"]
    assert mo.plan_go_to_pose(Pose2D(), Pose2D(0.004, 0.0, 0.01), 0.005, 0.05) == []
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.004, 0.0, 1.0), 0.005, 0.05)) == ["T"]


def test_go_to_pose_leaves_out_the_final_turn_a_loose_heading_tolerance_does_not_need():
    # heading_tolerance pi: any heading will do, the robot does not turn to the pose's yaw
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.3, 0.0, 2.0), 0.01, math.pi)) == ["L"]
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(-0.3, 0.0, 1.0), 0.01, math.pi)) == ["T", "L"]
    # 0.5 rad: an arrival 0.3 rad off is within it (less the path follower's 0.05 rad), 0.5 is not
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.3, 0.0, 0.3), 0.01, 0.5)) == ["L"]
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.3, 0.0, 0.5), 0.01, 0.5)) == ["L", "T"]
    # the arc arrives on the pose's yaw: with a loose tolerance, no turn after it
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.1, 0.1, HALF_PI), 0.01, 0.5)) == ["A"]
    # tight tolerances (up to the default 0.05) keep the final turn, which corrects the path
    # follower's arrival, as before
    for tol in (mo.MIN_HEADING_TOLERANCE_RAD, 0.05):
        assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.3, 0.0, 0.0), 0.01, tol)) == ["L", "T"]
        assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.1, 0.1, HALF_PI), 0.01, tol)) == ["A", "T"]


def test_go_to_pose_within_both_tolerances_does_not_turn_and_any_heading_needs_no_final_turn():
    """Already within position_tolerance, the plan turned when the heading was off by more
    than half heading_tolerance, though the goal succeeds within the whole of it: a goal
    within both tolerances turned; with heading_tolerance pi ("any heading") it turned to
    the pose's yaw, and a drive arriving within 0.05 rad of the opposite heading added a
    final turn as well."""
    # already there: within the whole tolerance, nothing to do; beyond it, a turn
    assert mo.plan_go_to_pose(Pose2D(), Pose2D(0.002, 0.0, 2.0), 0.01, math.pi) == []
    assert mo.plan_go_to_pose(Pose2D(), Pose2D(0.004, 0.0, 0.04), 0.005, 0.05) == []
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.004, 0.0, 0.06), 0.005, 0.05)) == ["T"]
    # heading_tolerance pi: whatever heading the robot arrives on will do
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(-0.3, 0.0, 0.0), 0.01, math.pi)) == ["T", "L"]
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.3, 0.0, math.pi - 0.02), 0.01, math.pi)) == ["L"]
    # a tolerance just under pi keeps the margin for the path follower's arrival
    assert kinds(mo.plan_go_to_pose(Pose2D(), Pose2D(0.3, 0.0, math.pi - 0.02), 0.01, 3.1)) == ["L", "T"]


def test_drive_straight_backwards_is_a_line_with_negative_speed():
    seg = mo.plan_drive_straight(Pose2D(0.1, 0.2, HALF_PI), -0.05, 0.08, 0.3)
    assert seg.type == LINE and seg.speed == -0.08
    assert seg.end_point() == pytest.approx((0.1, 0.15), abs=1e-12)
    assert seg.start_heading(0.0) == pytest.approx(HALF_PI)  # it faces away from where it goes


def test_segments_move_with_a_frame():
    seg = Segment.arc(0.0, 0.1, 0.1, -HALF_PI, HALF_PI)
    moved = seg.transformed(Pose2D(1.0, 2.0, HALF_PI))
    assert moved.start_point() == pytest.approx((1.0, 2.0), abs=1e-12)
    assert (moved.center_x, moved.center_y) == pytest.approx((0.9, 2.0), abs=1e-12)
    assert moved.start_heading(0.0) == pytest.approx(HALF_PI, abs=1e-12)
    turn = Segment.point_turn(0.1, 0.0, 0.5).transformed(Pose2D(0.0, 0.0, 1.0))
    assert turn.heading == pytest.approx(1.5)
    assert turn.start_point() == pytest.approx((math.cos(1) * 0.1, math.sin(1) * 0.1))


def test_segment_messages_are_in_millimetres_and_point_turns_in_radians():
    line = mo.segment_message(Segment.line(0.01, 0.02, 0.11, 0.02, 0.1, 0.2, 0.3))
    assert line.NAME == "AppendPathSegLine"
    assert (line.from_x_mm, line.from_y_mm, line.to_x_mm, line.to_y_mm) == pytest.approx((10, 20, 110, 20))
    assert (line.speed_mmps, line.accel_mmps2, line.decel_mmps2) == pytest.approx((100, 200, 300))
    arc = mo.segment_message(Segment.arc(0.0, 0.15, 0.15, -HALF_PI, 1.0, -0.05, 0.2, 0.2))
    assert (arc.center_y_mm, arc.radius_mm, arc.sweep_rad, arc.speed_mmps) == \
        pytest.approx((150, 150, 1.0, -50))
    turn = mo.segment_message(Segment.point_turn(0.05, 0.0, 4.0, 0.02, 2.0, 10.0, 10.0))
    assert turn.NAME == "AppendPathSegPointTurn"
    assert turn.angle_rad == pytest.approx(4.0 - 2 * math.pi)
    # the body's rad/s and rad/s^2, as Anki's firmware reads them (not tread mm/s: 22.5 times
    # too fast there), and the flag for the shorter way round (was False: the robot would
    # turn the way of the speed's sign, always counter-clockwise)
    assert (turn.speed_mmps, turn.accel_mmps2, turn.decel_mmps2, turn.x_mm) == \
        pytest.approx((2.0, 10.0, 10.0, 50.0))
    assert turn.unknown is True
    # signed the way it turns from the heading it starts at: 4.0 rad is -2.28, reached
    # clockwise from 0 and counter-clockwise from -3
    assert mo.segment_message(Segment.point_turn(0.0, 0.0, 4.0, 0.02, 2.0), 0.0).speed_mmps == -2.0
    assert mo.segment_message(Segment.point_turn(0.0, 0.0, 4.0, 0.02, 2.0), -3.0).speed_mmps == 2.0
    # a path's turns, each from the heading the segment before it leaves
    path = [Segment.point_turn(0.0, 0.0, HALF_PI, 0.02, 1.0), Segment.line(0.0, 0.0, 0.0, -0.1, 0.05),
            Segment.point_turn(0.0, -0.1, 0.0, 0.02, 1.0)]
    first, _, last = mo.path_messages(path, 0.0)
    assert first.speed_mmps == 1.0     # 0 -> pi/2: counter-clockwise
    assert last.speed_mmps == 1.0      # facing -pi/2 along the line -> 0: counter-clockwise
    first, _, last = mo.path_messages(path, 3.0)
    assert first.speed_mmps == -1.0    # 3.0 -> pi/2: clockwise


# ----------------------------------------------------------------------------- goal checks

def test_a_path_drives_forwards_only_with_a_line_or_arc_at_a_positive_speed():
    back = mo.Segment.line(0.0, 0.0, -0.05, 0.0, speed=-0.05)
    turn = mo.Segment(mo.POINT_TURN, heading=1.0, speed=1.0)
    assert not mo.drives_forwards([back, turn]) and not mo.drives_forwards([])
    assert mo.drives_forwards([back, mo.Segment.line(-0.05, 0.0, 0.0, 0.0, speed=0.05)])
    assert mo.drives_forwards([mo.Segment(mo.ARC, radius=0.1, sweep=1.0, speed=0.05)])
    # go_to_pose: only a point turn when the robot stands within the position tolerance
    here = mo.Pose2D(0.1, 0.2, 0.0)
    assert not mo.drives_forwards(mo.plan_go_to_pose(here, mo.Pose2D(0.1, 0.2, 1.5), 0.01, 0.05))
    assert mo.drives_forwards(mo.plan_go_to_pose(here, mo.Pose2D(0.3, 0.2, 0.0), 0.01, 0.05))


def test_speeds_zero_default_clamped_and_negative_refused():
    assert mo.check_speed(0.0, "speed", 0.1, 0.2, "m/s") == (0.1, None)
    # the default is at most the limit too (max_wheel_speed lowered below it)
    assert mo.check_speed(0.0, "speed", 0.1, 0.05, "m/s") == (0.05, None)
    speed, warning = mo.check_speed(0.5, "speed", 0.1, 0.2, "m/s")
    assert speed == 0.2 and "clamped to 0.2 m/s" in warning
    assert mo.check_speed(-0.5, "speed", 0.1, 0.2, "m/s", allow_negative=True)[0] == -0.2
    with pytest.raises(MotionError, match="speed = -0.1 m/s: must not be negative"):
        mo.check_speed(-0.1, "speed", 0.1, 0.2, "m/s")
    with pytest.raises(MotionError, match="; it is a magnitude: a negative distance drives backwards$"):
        mo.check_speed(-0.1, "speed", 0.1, 0.2, "m/s", direction="a negative distance drives backwards")
    with pytest.raises(MotionError, match="; it is a magnitude: negative angles turn clockwise$"):
        mo.check_turn_speed(-1.0, "speed", 1.0, direction="negative angles turn clockwise")
    with pytest.raises(MotionError, match="not a finite number"):
        mo.check_speed(math.nan, "speed", 0.1, 0.2, "m/s")


def test_unreachable_tolerances_are_refused():
    with pytest.raises(MotionError, match="position_tolerance = 0 m cannot be reached.*0.005 m"):
        mo.check_tolerance(0.0, "position_tolerance", mo.MIN_POSITION_TOLERANCE_M, 1.0, "m")
    with pytest.raises(MotionError, match="larger than"):
        mo.check_tolerance(2.0, "position_tolerance", mo.MIN_POSITION_TOLERANCE_M, 1.0, "m")
    assert mo.check_tolerance(0.02, "t", 0.01, 1.0, "rad") == 0.02


def test_explicit_segments_are_checked():
    good = [Segment.line(0, 0, 0.1, 0), Segment.point_turn(0.1, 0, HALF_PI),
            Segment.arc(0.0, 0.0, 0.1, 0.0, HALF_PI, speed=0.5)]
    out, warnings = mo.check_segments(good, 0.2)
    assert out[2].speed == 0.2 and "clamped" in warnings[0]
    cases = [
        ([], "empty"),
        ([Segment(7)], r"segments\[0\].type = 7"),
        ([Segment.line(0, 0, math.nan, 0)], r"segments\[0\].end_x is nan"),
        ([Segment.line(0, 0, 0, 0)], r"^segments\[0\]: a LINE of 0.0000 m"),
        ([Segment.arc(0, 0, 0.0, 0, 1)], r"radius = 0 m"),
        ([Segment.arc(0, 0, 0.1, 0, 7.0)], r"sweep = 7 rad"),
        ([Segment.point_turn(0, 0, 1.0, tolerance=0.001)], "tolerance = 0.001 rad cannot be reached"),
        ([Segment.line(0, 0, 0.1, 0, accel=-1)], "accel = -1"),
        ([Segment.line(0, 0, 0.1, 0), Segment.line(0.2, 0, 0.3, 0)],
         r"^segments\[1\]: starts 100.0 mm from where segments\[0\] ends"),
        # Anki's firmware refuses the whole path, silently, for a join of 1 mm or more
        ([Segment.line(0, 0, 0.1, 0), Segment.line(0.101, 0, 0.3, 0)],
         r"starts 1.0 mm from where segments\[0\] ends \(segments must join within 0.5 mm: "
         r"the robot refuses a path with a gap of 1 mm\)"),
        ([Segment.line(0, 0, 0.1, 0)] * 129, "at most 128"),
    ]
    for segments, match in cases:
        with pytest.raises(MotionError, match=match):
            mo.check_segments(segments, 0.2)


def test_a_segments_own_accelerations_are_clamped_with_a_warning():
    """Anki's firmware keeps a line's or arc's accelerations as whole mm/s^2 in 16 bits:
    a segment's own accel/decel beyond the goals' limits is clamped, saying so."""
    out, warnings = mo.check_segments([Segment.line(0, 0, 0.1, 0, accel=100.0),
                                       Segment.point_turn(0.1, 0, 1.0, decel=500.0)], 0.2)
    assert (out[0].accel, out[0].decel) == (mo.MAX_ACCEL_MPS2, 0.0)
    assert out[1].decel == mo.MAX_TURN_ACCEL_RADPS2
    assert warnings == ["segments[0].accel = 100 m/s^2 is beyond 2 m/s^2: clamped to 2 m/s^2",
                        "segments[1].decel = 500 rad/s^2 is beyond 50 rad/s^2: clamped to "
                        "50 rad/s^2"]


def test_path_speeds_the_robot_would_take_for_zero_are_refused():
    """Anki's firmware keeps a path's speed and accelerations as whole mm/s and mm/s^2
    (speedController: s16, u16): 0.0005 m/s is 0 there and the robot would not move."""
    with pytest.raises(MotionError, match=r"segments\[0\]\.speed = 0.0005 m/s: the robot takes "
                                          r"whole mm/s and mm/s\^2 on a path, so below 0.001 it is 0"):
        mo.check_segments([Segment.line(0, 0, 0.1, 0, speed=0.0005)], 0.2)
    with pytest.raises(MotionError, match=r"segments\[0\]\.accel = 0.0002 m/s\^2"):
        mo.check_segments([Segment.arc(0, 0, 0.1, 0, 1.0, accel=0.0002)], 0.2)
    assert mo.check_path_rate(0.0, "speed", "m/s") == 0.0          # 0: the default
    assert mo.check_path_rate(-0.05, "speed", "m/s") == -0.05      # backwards
    # rad/s, a float there, and the robot speeds a point turn that slow up (check_turn_speed)
    out, warnings = mo.check_segments([Segment.point_turn(0, 0, 1.0, speed=0.0005)], 0.2)
    assert out[0].speed == mo.MIN_TURN_SPEED_RADPS and len(warnings) == 1


def test_a_turn_slower_than_the_robot_turns_is_raised_with_a_warning():
    """Anki's firmware speeds a point turn slower than 0.4 rad/s up to that (steeringController,
    ExecutePointTurn): the driver says so and plans with what the robot will do."""
    assert mo.check_turn_speed(0.0, "speed", 2.0) == (2.0, None)       # 0: the default
    assert mo.check_turn_speed(0.4, "speed", 2.0) == (0.4, None)
    speed, warning = mo.check_turn_speed(0.1, "speed", 2.0)
    assert speed == 0.4 and warning == ("speed = 0.1 rad/s: the robot turns in place no slower "
                                        "than 0.4 rad/s (its steering speeds a slower point turn "
                                        "up): raised to 0.4 rad/s")
    speed, warning = mo.check_turn_speed(9.0, "turn_speed", 2.0)
    assert speed == mo.MAX_TURN_SPEED_RADPS and "clamped" in warning
    assert mo.check_turn_speed(0.0, "segments[0].speed", 0.0) == (0.0, None)  # the goal's
    out, warnings = mo.check_segments([Segment.point_turn(0, 0, 1.0, speed=0.2)], 0.2)
    assert out[0].speed == 0.4 and warnings == [
        "segments[0].speed = 0.2 rad/s: the robot turns in place no slower than 0.4 rad/s (its "
        "steering speeds a slower point turn up): raised to 0.4 rad/s"]


def test_defaults_fill_zero_fields():
    seg = mo.apply_defaults(Segment.line(0, 0, 1, 0), 0.1, 0.2, 0.3, 2.0, 10.0, 0.02)
    assert (seg.speed, seg.accel, seg.decel) == (0.1, 0.2, 0.3)
    turn = mo.apply_defaults(Segment.point_turn(0, 0, 1.0, speed=1.0), 0.1, 0.2, 0.3, 2.0, 10.0, 0.02)
    assert (turn.speed, turn.accel, turn.tolerance) == (1.0, 10.0, 0.02)


def test_distance_remaining_and_duration():
    segs = [Segment.line(0, 0, 0.2, 0, 0.1), Segment.point_turn(0.2, 0, HALF_PI, 0.02, 2.0, 10.0),
            Segment.arc(0.1, 0.0, 0.1, 0.0, HALF_PI, 0.1)]
    assert mo.distance_remaining(segs, -1, 0, 0) == pytest.approx(0.2 + 0.1 * HALF_PI)
    assert mo.distance_remaining(segs, 0, 0.05, 0.01) == pytest.approx(0.15 + 0.1 * HALF_PI)
    assert mo.distance_remaining(segs, 2, 0.1 + 0.1 * math.cos(0.5), 0.1 * math.sin(0.5)) == \
        pytest.approx(0.1 * (HALF_PI - 0.5))
    assert mo.distance_remaining(segs, 3, 0, 0) == 0.0
    # 0.2 m at 0.1 m/s, pi/2 at 2 rad/s, 0.157 m at 0.1 m/s, each plus 2 x speed / accel
    expected = (2.0 + 1.0) + (HALF_PI / 2.0 + 0.4) + (0.1 * HALF_PI / 0.1 + 1.0)
    assert mo.path_duration(segs, 0.0) == pytest.approx(expected)


@pytest.mark.parametrize("sweep", [6.0, -6.0, 4.0, -HALF_PI])
def test_distance_remaining_along_an_arc_of_any_sweep(sweep):
    """follow_path's distance_remaining near the end of a long arc: its progress, wrapped
    to -pi..pi, read 5.9 rad along a 6 rad arc as 0.38 rad short of its start, and said
    0.638 m left instead of 0.01. Progress is now read the arc's way round, 0..sweep;
    a robot a little before the start has all of it left, one past the end none."""
    arc = Segment.arc(0.0, 0.0, 0.1, 0.0, sweep)
    way = math.copysign(1.0, sweep)

    def left(along: float) -> float:
        a = along * way
        return mo.distance_remaining([arc], 0, 0.1 * math.cos(a), 0.1 * math.sin(a))
    for along in (0.0, 0.5, 1.5, abs(sweep) - 0.1, abs(sweep)):
        assert left(along) == pytest.approx(0.1 * (abs(sweep) - along), abs=1e-9), along
    assert left(-0.05) == pytest.approx(0.1 * abs(sweep))     # not yet at its start
    assert left(abs(sweep) + 0.05) == pytest.approx(0.0, abs=1e-12)  # just past its end


def test_distance_remaining_is_a_float_when_nothing_is_left_to_drive():
    # it goes into float64 feedback fields: an int 0 there (sum([]) on a path whose last
    # segment is a point turn) aborts a C-asserts build of the interfaces
    segs = [Segment.line(0.0, 0.0, 0.2, 0.0, 0.1), Segment.point_turn(0.2, 0.0, HALF_PI)]
    for value in (mo.distance_remaining(segs, 1, 0.2, 0.0),
                  mo.distance_remaining([Segment.point_turn(0.0, 0.0, 1.0)], 0, 0.0, 0.0),
                  mo.distance_remaining([Segment.point_turn(0.0, 0.0, 1.0)], -1, 0.0, 0.0),
                  mo.distance_remaining([], -1, 0.0, 0.0)):
        assert type(value) is float and value == 0.0


# ----------------------------------------------------------------------------- trackers

def sample(t, **kw):
    kw.setdefault("flags", StatusFlag.HEAD_IN_POS | StatusFlag.LIFT_IN_POS)
    return StateSample(t=t, **kw)


@pytest.mark.parametrize("off, said", [
    (0.06, "interrupted by the robot, 60 mm off its path: it gives a path up 50 mm off it"),
    (0.01, "interrupted by the robot"),
])
def test_a_path_given_up_off_the_path_says_so(off, said):
    """Anki's firmware abandons a path it is 50 mm off (PATH_INTERRUPTED, no flag to read):
    the goal's reason says how far off the robot was, not just 'interrupted'."""
    tracker = mo.PathTracker(deadline=100.0, event_id=3, segments=[Segment.line(0, 0, 1.0, 0)])
    tracker.on_path_event(3, 0)
    outcome = tracker.on_state(sample(0.0, x=0.3, y=off, path_segment=0, flags=StatusFlag.IS_PATHING))
    tracker.on_path_event(3, 1)
    for k in range(1, 10):
        outcome = tracker.on_state(sample(0.03 * k, x=0.3, y=off, path_segment=0))
        if outcome is not None:
            break
    assert outcome.status == mo.ABORTED and outcome.message.startswith(said), outcome.message
    assert Segment.arc(0, 0, 0.1, 0, 1).distance_to(0.0, 0.13) == pytest.approx(0.03)
    assert Segment.point_turn(0.1, 0, 1).distance_to(0.1, 0.02) == pytest.approx(0.02)


def test_head_tracker_needs_ack_or_motion_then_in_position():
    tr = mo.AxisTracker(deadline=10.0, name="head", target=0.3, tolerance=0.035,
                        flag=StatusFlag.HEAD_IN_POS, action_id=7)
    # a state from before the command: in position at the old angle, no ack yet
    assert tr.on_state(sample(0.0, head_angle=-0.4)) is None
    tr.on_ack(6)                                       # someone else's action
    assert not tr.acked
    tr.on_ack(7)
    assert tr.on_state(sample(0.1, head_angle=-0.4)) is None    # acked, not there yet
    assert tr.on_state(sample(0.2, head_angle=0.0, flags=0)) is None  # moving
    out = tr.on_state(sample(0.3, head_angle=0.29))
    assert out.status == SUCCEEDED and "head at 0.290 rad" in out.message


def test_head_tracker_blocked_and_silent_and_timeout():
    blocked = mo.AxisTracker(deadline=10.0, target=0.5, action_id=1)
    blocked.on_ack(1)
    outs = [blocked.on_state(sample(0.03 * k, head_angle=0.1)) for k in range(mo.SETTLE_STATES)]
    assert outs[-1].status == ABORTED and "stopped at 0.100 rad" in outs[-1].message
    silent = mo.AxisTracker(deadline=100.0, target=0.5, action_id=1)
    outs = [silent.on_state(sample(0.03 * k, head_angle=0.1)) for k in range(mo.NO_START_STATES)]
    assert outs[-1].status == ABORTED and "neither acknowledged nor moved" in outs[-1].message
    slow = mo.AxisTracker(deadline=1.0, target=0.5, action_id=1)
    assert slow.on_state(sample(0.5, head_angle=0.2, flags=0)) is None
    out = slow.on_state(sample(1.5, head_angle=0.3, flags=0))
    assert out.status == ABORTED and out.message.startswith("safety timeout")


def test_head_tracker_waits_while_the_motor_calibrates():
    # the command is held while the robot calibrates the head (2 s here, longer than
    # NO_START_STATES and the deadline): the head drives down meanwhile, nothing counts
    calibrating = [True]
    tr = mo.AxisTracker(deadline=1.0, target=0.5, action_id=1, calibrating=lambda: calibrating[0])
    for k in range(67):
        assert tr.on_state(sample(0.03 * k, head_angle=-0.2, flags=0 if k < 20 else
                                  StatusFlag.HEAD_IN_POS)) is None
    assert not tr.seen_moving and tr.deadline == pytest.approx(1.0 + 0.03 * 66)
    calibrating[0] = False                              # done: the held command goes out
    tr.on_ack(1)
    assert tr.on_state(sample(2.01, head_angle=0.1, flags=0)) is None
    assert tr.on_state(sample(2.5, head_angle=0.5)).status == SUCCEEDED


def test_lift_tracker_reads_the_lift():
    tr = mo.AxisTracker(deadline=10.0, name="lift", target=0.06, tolerance=0.004,
                        flag=StatusFlag.LIFT_IN_POS, action_id=3, unit="m")
    tr.on_ack(3)
    assert tr.on_state(sample(0.0, lift_height=0.05, flags=StatusFlag.HEAD_IN_POS)) is None
    assert tr.on_state(sample(0.1, lift_height=0.0595)).status == SUCCEEDED


def test_turn_tracker_counts_beyond_half_a_turn():
    tr = mo.TurnTracker(deadline=10.0, action_id=2, start_yaw=0.0, angle=3.0 * math.pi / 2.0,
                        tolerance=0.02)
    moving = StatusFlag.ARE_WHEELS_MOVING
    for k, yaw in enumerate([1.0, 2.0, 3.0, -2.5, -1.6]):   # through +-pi
        assert tr.on_state(sample(0.1 * k, yaw=yaw, flags=moving)) is None
    tr.on_ack(2)
    out = tr.on_state(sample(1.0, yaw=-HALF_PI + 0.01))
    assert out.status == SUCCEEDED
    assert tr.turned == pytest.approx(3.0 * HALF_PI + 0.01)


def test_turn_tracker_counts_a_turn_past_half_a_revolution_between_two_states():
    """No state for 1.65 s of a 2 rad/s turn (a Wi-Fi hiccup, shorter than the link's
    timeout): the heading moved 3.3 rad, which wrapped to -2.98; the turn counted
    backwards and ended "stopped 6.283 rad short". A gap that allows more than pi at the
    turn's speed is now counted in the turn's direction."""
    moving = StatusFlag.ARE_WHEELS_MOVING
    for direction in (1.0, -1.0):
        tr = mo.TurnTracker(deadline=100.0, action_id=2, start_yaw=0.0, angle=6.0 * direction,
                            speed=2.0, start_t=0.0)
        tr.on_ack(2)
        states = [(0.1 * k, 0.2 * k) for k in range(1, 11)]        # 2.0 rad by 1.0 s
        states += [(2.65, 5.3), (2.75, 5.5), (2.9, 5.8), (3.15, 6.0)]  # 3.3 rad unseen
        for t, turned in states:
            assert tr.on_state(sample(t, yaw=wrap_angle(turned * direction), flags=moving)) is None
        assert tr.turned == pytest.approx(6.0 * direction)
        out = tr.on_state(sample(3.2, yaw=wrap_angle(6.0 * direction)))
        assert out.status == SUCCEEDED, out.message
    # a gap near the end, in which the robot eased back: not a whole turn more
    tr = mo.TurnTracker(deadline=100.0, action_id=2, start_yaw=0.0, angle=1.0, speed=4.0,
                        start_t=0.0)
    tr.on_ack(2)
    assert tr.on_state(sample(0.3, yaw=1.02, flags=moving)) is None
    assert tr.on_state(sample(2.5, yaw=1.0)) is not None and tr.turned == pytest.approx(1.0)
    # without the turn's speed (or its start time), states are taken as close together
    tr = mo.TurnTracker(deadline=100.0, action_id=2, start_yaw=0.0, angle=6.0)
    tr.on_state(sample(2.0, yaw=wrap_angle(3.3), flags=moving))
    assert tr.turned == pytest.approx(wrap_angle(3.3))


def test_turn_tracker_absolute_short_and_picked_up():
    tr = mo.TurnTracker(deadline=10.0, action_id=2, start_yaw=0.0, angle=1.0, absolute=True,
                        tolerance=0.02)
    tr.on_ack(2)
    outs = [tr.on_state(sample(0.03 * k, yaw=0.5)) for k in range(mo.NO_MOTION_STATES)]
    assert outs[-1].status == ABORTED and "0.500 rad short" in outs[-1].message
    up = mo.TurnTracker(deadline=10.0, action_id=2, angle=1.0)
    out = up.on_state(sample(0.0, flags=StatusFlag.IS_PICKED_UP))
    assert out.status == ABORTED and out.message == "interrupted: the robot was picked up"


def test_a_turn_that_stops_past_its_target_says_past_not_short():
    """A turn that overshot ended "the robot stopped -0.080 rad short of the target": the
    remaining angle against the turn's way is past the target, and said as a size."""
    moving = StatusFlag.ARE_WHEELS_MOVING
    for direction in (1.0, -1.0):
        for absolute in (False, True):
            tr = mo.TurnTracker(deadline=100.0, action_id=2, start_yaw=0.0, angle=1.0 * direction,
                                absolute=absolute, tolerance=0.035)
            tr.on_ack(2)
            assert tr.on_state(sample(0.0, yaw=0.5 * direction, flags=moving)) is None
            out = None
            for k in range(1, mo.SETTLE_STATES + 1):
                out = tr.on_state(sample(0.03 * k, yaw=1.08 * direction))
            assert out is not None and out.status == ABORTED
            assert out.message == "the robot stopped 0.080 rad past the target (tolerance 0.035 rad)"
            tr = mo.TurnTracker(deadline=100.0, action_id=2, start_yaw=0.0, angle=1.0 * direction,
                                absolute=absolute, tolerance=0.035)
            tr.on_ack(2)
            assert tr.on_state(sample(0.0, yaw=0.5 * direction, flags=moving)) is None
            for k in range(1, mo.SETTLE_STATES + 1):
                out = tr.on_state(sample(0.03 * k, yaw=0.92 * direction))
            assert out.message == "the robot stopped 0.080 rad short of the target (tolerance 0.035 rad)"


def path_tracker(**kw):
    return mo.PathTracker(deadline=kw.pop("deadline", 10.0), event_id=5,
                          segments=[Segment.line(0, 0, 0.1, 0), Segment.point_turn(0.1, 0, 1.0)], **kw)


def test_path_tracker_completes_on_the_event_after_the_treads_stop():
    tr = path_tracker()
    tr.on_path_event(5, 0)
    assert tr.phase == "running"
    moving = StatusFlag.ARE_WHEELS_MOVING | StatusFlag.IS_PATHING
    assert tr.on_state(sample(0.0, path_segment=0, flags=moving)) is None
    assert tr.on_state(sample(0.1, path_segment=1, flags=moving)) is None
    tr.on_path_event(4, 2)                   # another path's event
    assert tr.phase == "running"
    tr.on_path_event(5, 2)
    assert tr.on_state(sample(0.2, path_segment=1, flags=StatusFlag.ARE_WHEELS_MOVING)) is None
    out = tr.on_state(sample(0.3))
    assert out.status == SUCCEEDED and tr.completed_segments == 2


@pytest.mark.parametrize("flags, reason, after", [
    (StatusFlag.CLIFF_DETECTED, "interrupted: cliff detected", CLIFF_EDGE_HOLD_S),
    (0, "interrupted by the robot", 0.03 * (mo.REASON_STATES - 1)),
])
def test_path_tracker_interrupted_reason_from_the_states_that_follow(flags, reason, after):
    tr = path_tracker()
    tr.on_path_event(5, 0)
    tr.on_path_event(5, 1)
    assert tr.on_state(sample(0.0)) is None  # a state from before the stop
    outs = [(round(0.03 * k, 3), tr.on_state(sample(0.03 * k, flags=flags))) for k in range(1, 30)]
    t, out = next((t, o) for t, o in outs if o is not None)
    assert out.status == ABORTED and out.message.startswith(reason)
    assert t == pytest.approx(0.03 + after, abs=0.031)


def test_a_path_stopped_by_a_lift_is_picked_up_not_a_cliff():
    """A lifted robot's cliff sensor loses the floor first (it stops its treads for it),
    and the robot reports the pick-up 0.1-0.2 s later: the goal says picked up."""
    tr = path_tracker()
    tr.on_path_event(5, 0)
    tr.on_path_event(5, 1)
    drop = StatusFlag.CLIFF_DETECTED
    assert [tr.on_state(sample(0.03 * k, flags=drop)) for k in range(1, 8)] == [None] * 7
    out = tr.on_state(sample(0.24, flags=drop | StatusFlag.IS_PICKED_UP))
    assert out.status == ABORTED and out.message == "interrupted: the robot was picked up"


def test_path_tracker_pick_up_and_fall_abort_at_once():
    for flag, text in ((StatusFlag.IS_PICKED_UP, "picked up"), (StatusFlag.IS_FALLING, "falling")):
        tr = path_tracker()
        out = tr.on_state(sample(0.0, flags=flag | StatusFlag.IS_PATHING))
        assert out.status == ABORTED and text in out.message


def test_path_tracker_without_events_falls_back_on_is_pathing():
    tr = path_tracker()
    tr.on_state(sample(0.0, flags=StatusFlag.IS_PATHING))
    outs = [tr.on_state(sample(0.1 + 0.03 * k)) for k in range(mo.NO_EVENT_STATES)]
    assert outs[-1].status == SUCCEEDED and "no PathFollowingEvent" in outs[-1].message
    never = path_tracker(deadline=100.0)
    outs = [never.on_state(sample(0.03 * k)) for k in range(mo.NO_START_STATES)]
    assert outs[-1].status == ABORTED and "did not start the path" in outs[-1].message
    late = path_tracker(deadline=1.0)
    late.on_path_event(5, 0)
    out = late.on_state(sample(2.0, flags=StatusFlag.IS_PATHING | StatusFlag.ARE_WHEELS_MOVING))
    assert out.status == ABORTED and out.message.startswith("safety timeout")


def test_a_path_whose_robot_stands_still_on_it_ends_as_blocked():
    """A robot held against something (its treads stalled) while it follows a path reports
    IS_PATHING, its treads still and its pose unchanged: the goal ran to the safety deadline
    (twice the path's time and 3 s, 12 s for 0.3 m at 0.08 m/s, the path follower pushing all
    along) and said "safety timeout: ... the robot reported no completion in time". It ends
    ABORTED as blocked after STALLED_STATES such states (about 1.5 s), saying where."""
    tr = mo.PathTracker(deadline=100.0, event_id=5, segments=[Segment.line(0, 0, 0.3, 0)])
    tr.on_path_event(5, 0)
    moving = StatusFlag.ARE_WHEELS_MOVING | StatusFlag.IS_PATHING
    for k in range(10):   # it drives 0.05 m, then stands (the flag set all along, as for driven treads)
        assert tr.on_state(sample(0.03 * k, x=0.005 * k, path_segment=0, flags=moving,
                                  left_speed=0.08, right_speed=0.08)) is None
    outs = [(0.03 * k, tr.on_state(sample(0.3 + 0.03 * k, x=0.05, path_segment=0, flags=moving)))
            for k in range(70)]   # 2.1 s of the robot's states
    stood, out = next(((t, o) for t, o in outs if o is not None), (None, None))
    assert out is not None, "the goal went on"
    assert stood == pytest.approx(1.5, abs=0.05) and out.status == ABORTED
    assert out.message == ("blocked: the robot has not moved for about 1.5 s on its path, its treads "
                           "still (held, or stalled), on segment 0, 0.250 m from its end")
    # a slow path is not still: its treads turn, and a pause between segments is short
    slow = mo.PathTracker(deadline=100.0, event_id=5, segments=[Segment.line(0, 0, 0.3, 0)])
    outs = [slow.on_state(sample(0.03 * k, x=0.00003 * k, path_segment=0, flags=StatusFlag.IS_PATHING,
                                 left_speed=0.001, right_speed=0.001)) for k in range(150)]
    outs += [slow.on_state(sample(5.0 + 0.03 * k, x=0.005, path_segment=0, flags=StatusFlag.IS_PATHING))
             for k in range(40)]   # 1.2 s
    outs += [slow.on_state(sample(7.0, x=0.0052, path_segment=0, flags=StatusFlag.IS_PATHING,
                                  left_speed=0.001, right_speed=0.001))]
    assert outs == [None] * len(outs)
    # nor is a robot whose firmware reports no tread speeds but whose pose moves
    blind = mo.PathTracker(deadline=100.0, event_id=5, segments=[Segment.line(0, 0, 0.3, 0)])
    outs = [blind.on_state(sample(0.03 * k, x=0.0025 * k, path_segment=0, flags=StatusFlag.IS_PATHING))
            for k in range(150)]
    assert outs == [None] * len(outs)


def test_a_turn_whose_robot_says_its_treads_move_but_stands_ends_as_blocked():
    """A firmware may set ARE_WHEELS_MOVING for the treads it drives: a turn whose robot is held
    (its treads stalled, their speeds 0, its heading unchanged) with the flag set ran on to the
    safety deadline ("safety timeout: still turning, ..."). It ends ABORTED as blocked after
    about 1.5 s of such states; a turn whose treads turn is not."""
    tr = mo.TurnTracker(deadline=100.0, action_id=2, start_yaw=0.0, angle=3.0, tolerance=0.035, speed=1.0)
    tr.on_ack(2)
    moving = StatusFlag.ARE_WHEELS_MOVING
    for k in range(1, 17):   # it turns 0.5 rad, then stands, the flag set
        assert tr.on_state(sample(0.03 * k, yaw=0.5 * k / 16, flags=moving,
                                  left_speed=-0.02, right_speed=0.02)) is None
    outs = [(0.03 * k, tr.on_state(sample(0.5 + 0.03 * k, yaw=0.5, flags=moving))) for k in range(70)]
    stood, out = next(((t, o) for t, o in outs if o is not None), (None, None))
    assert out is not None, "the goal went on"
    assert stood == pytest.approx(1.5, abs=0.05) and out.status == ABORTED
    assert out.message == ("blocked: the robot has not moved for about 1.5 s, its treads still (held, or "
                           "stalled), 2.500 rad from the target")
    slow = mo.TurnTracker(deadline=100.0, action_id=2, start_yaw=0.0, angle=3.0, tolerance=0.035, speed=0.4)
    slow.on_ack(2)
    outs = [slow.on_state(sample(0.03 * k, yaw=0.012 * k, flags=moving, left_speed=-0.009, right_speed=0.009))
            for k in range(150)]
    assert outs == [None] * len(outs)


# ----------------------------------------------------------------------------- tf lookup

def q_yaw(yaw):
    return (0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0))


def test_tf_chain_through_a_common_ancestor():
    buf = TransformBuffer()
    assert buf.set("map", "odom", (1.0, 0.0, 0.0), q_yaw(HALF_PI), static=True)
    assert buf.set("odom", "base_footprint", (0.5, 0.0, 0.0), q_yaw(0.0))
    assert buf.set("map", "marker", (0.0, 2.0, 0.0), q_yaw(math.pi))
    # the marker's pose in odom: odom sits at (1, 0) facing +y in map
    x, y, yaw = pose_to_2d(buf.lookup("odom", "marker"))
    assert (x, y) == pytest.approx((2.0, 1.0)) and wrap_angle(yaw - HALF_PI) == pytest.approx(0.0)
    # a point 1 m ahead of the robot, in map
    p = transform_point(buf.lookup("map", "base_footprint"), (1.0, 0.0, 0.0))
    assert p == pytest.approx((1.0, 1.5, 0.0))
    assert buf.lookup("odom", "odom").translation == (0.0, 0.0, 0.0)
    assert buf.frames() == ["base_footprint", "map", "marker", "odom"]


def test_tf_tilted_frames_compose_in_3d():
    buf = TransformBuffer()
    roll = (math.sin(HALF_PI / 2.0), 0.0, 0.0, math.cos(HALF_PI / 2.0))  # 90 deg about x
    buf.set("odom", "tilted", (0.0, 0.0, 1.0), roll)
    buf.set("tilted", "child", (0.0, 1.0, 0.0), q_yaw(0.0))
    # y of the tilted frame points up (z of odom)
    assert buf.lookup("odom", "child").translation == pytest.approx((0.0, 0.0, 2.0))


def test_tf_unknown_and_unlinked_frames_name_the_frame():
    buf = TransformBuffer(max_age=1.0)
    buf.set("odom", "base_footprint", (0, 0, 0), q_yaw(0), now=0.0)
    buf.set("world", "table", (0, 0, 0), q_yaw(0), now=0.0, static=True)
    with pytest.raises(TransformError, match="frame 'map' is unknown"):
        buf.lookup("odom", "map")
    with pytest.raises(TransformError, match="no chain of transforms links frame 'table' to 'odom'"):
        buf.lookup("odom", "table", now=0.5)
    # /tf transforms age out, static ones do not
    assert buf.lookup("odom", "base_footprint", now=0.5) is not None
    with pytest.raises(TransformError, match="'odom' -> 'base_footprint' on /tf is 2.0 s old"):
        buf.lookup("odom", "base_footprint", now=2.0)
    assert buf.lookup("world", "table", now=100.0) is not None
    # unusable transforms are ignored
    assert not buf.set("odom", "bad", (math.nan, 0, 0), q_yaw(0))
    assert not buf.set("odom", "bad", (0, 0, 0), (0, 0, 0, 0))
    assert not buf.set("odom", "odom", (0, 0, 0), q_yaw(0))
    assert buf.set("/odom", "/leading_slash", (0, 0, 0), q_yaw(0))
    assert buf.lookup("odom", "leading_slash") is not None


def test_tf_a_stale_transform_is_named_with_its_age_not_as_a_missing_chain():
    # e.g. a tag detector that publishes map -> odom only while it sees the tag
    buf = TransformBuffer(max_age=10)
    buf.set("map", "odom", (1, 0, 0), (0, 0, 0, 1), now=0)
    buf.set("odom", "base_footprint", (0, 0, 0), q_yaw(0), now=19.5)
    buf.set("world", "table", (0, 0, 0), q_yaw(0), now=0.0, static=True)
    for target, source in (("odom", "map"), ("map", "odom"), ("map", "base_footprint")):
        with pytest.raises(TransformError) as err:
            buf.lookup(target, source, now=20.2)
        assert str(err.value) == ("the transform 'map' -> 'odom' on /tf is 20.2 s old (older than 10 s): "
                                  "has its publisher stopped?")
    # frames that no chain links even counting old transforms are still said to be unlinked
    with pytest.raises(TransformError, match="no chain of transforms links frame 'table' to 'map'"):
        buf.lookup("map", "table", now=20.2)
    assert buf.lookup("odom", "map", now=10.0).translation == pytest.approx((-1.0, 0.0, 0.0))


def test_state_sample_converts_a_robot_state_to_si_units():
    from cozmo_driver.protocol import messages as msgs

    state = msgs.RobotState(pose_x_mm=120.0, pose_y_mm=-40.0, pose_angle_rad=0.5, head_angle_rad=0.25,
                            lift_height_mm=45.0, lwheel_speed_mmps=30.0, rwheel_speed_mmps=-20.0,
                            status=int(StatusFlag.HEAD_IN_POS), curr_path_segment=2)
    s = mo.state_sample(state, 3.0)
    assert (s.t, s.flags, s.path_segment) == (3.0, int(StatusFlag.HEAD_IN_POS), 2)
    assert (s.x, s.y, s.yaw) == pytest.approx((0.12, -0.04, 0.5))
    assert (s.head_angle, s.lift_height) == pytest.approx((0.25, 0.045))
    assert (s.left_speed, s.right_speed) == pytest.approx((0.03, -0.02))
    # the head and lift the driver shows (held while a motor calibrates), instead of the state's
    held = mo.state_sample(state, 3.0, axes=(-0.4, 0.032))
    assert (held.head_angle, held.lift_height) == (-0.4, 0.032)
    assert (held.x, held.yaw, held.flags) == (s.x, s.yaw, s.flags)
    # 0xFF (or -1) is "no path segment"
    for none in (0xFF, -1):
        assert mo.state_sample(msgs.RobotState(curr_path_segment=none), 0.0).path_segment == -1


def test_the_feedback_pacer_gives_one_feedback_in_each_period_of_states():
    """States 30 ms apart: one feedback in each 0.1 s (30 of 100 states), not every 4th (25);
    after a gap, the ticks start again from the state after it, with no burst."""
    pacer = mo.FeedbackPacer()
    assert sum(pacer.due(0.03 * k) for k in range(100)) == 30
    assert pacer.due(10.0)  # a gap of 7 s: one feedback, then on from there
    assert [pacer.due(10.0 + 0.03 * k) for k in range(1, 8)] == [False, False, False, True, False, False, True]
