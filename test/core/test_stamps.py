"""Stamps from the robot's own clock (cozmo_driver.driver.stamps), with made-up delays."""

from __future__ import annotations

import random

from cozmo_driver.driver.stamps import RobotClock

MS = 1_000_000
HOST0 = 1_700_000_000 * 10**9   # the host's clock when the robot's read 0


def feed(clock, robot_ms, delays_ms):
    """State stamps of states sampled at ``robot_ms`` that arrived ``delays_ms`` later."""
    return [clock.state_stamp(HOST0 + round((t + d) * MS), t) for t, d in zip(robot_ms, delays_ms)]


def test_stamps_keep_the_robots_spacing_through_the_delays_jitter():
    rng = random.Random(1)
    times = list(range(0, 6000, 30))
    delays = [3 + rng.expovariate(1 / 8) for _ in times]     # 3 ms and up, tens now and then
    delays[100:110] = [60 + 30 * k for k in range(10)]       # this computer stood still 0.3 s
    stamps = feed(RobotClock(), times, delays)
    arrivals = [HOST0 + round((t + d) * MS) for t, d in zip(times, delays)]
    assert all(s <= a for s, a in zip(stamps, arrivals))     # never after the arrival
    # once the fastest state of the first ones came, every stamp is the robot's time plus
    # 3 ms (to rounding): the spacing is the robot's, whatever the delays
    settled = [s - (HOST0 + t * MS) for s, t in zip(stamps[40:], times[40:])]
    assert max(settled) - min(settled) < 0.2 * MS and abs(min(settled) - 3 * MS) < 0.2 * MS
    assert all(b > a for a, b in zip(stamps, stamps[1:]))


def test_a_drift_is_followed_and_a_clock_that_went_back_starts_again():
    clock = RobotClock(window_s=2.0)
    # the robot's crystal runs 0.1 % slow: its 30 ms are 30.03 of the host's
    stamps = [clock.state_stamp(HOST0 + int(t * 1.001 * MS) + 4 * MS, t) for t in range(0, 20000, 30)]
    lag = (HOST0 + int(19980 * 1.001 * MS) + 4 * MS) - stamps[-1]
    assert 0 <= lag < 2.1 * MS          # at most the drift over one window behind
    # the robot's clock went back to 500 ms (a reboot the link followed): no stamp from
    # before the jump's offset, and the spacing is the robot's again
    base = HOST0 + 30 * 10**9
    after = [clock.state_stamp(base + (t - 500) * MS + 5 * MS, t) for t in range(500, 2000, 30)]
    assert after[0] >= stamps[-1] and after[-1] - after[0] == (1970 - 500) * MS


def test_a_host_clock_stepped_back_is_followed_at_once():
    """This computer's clock set back 5 s (NTP, or a manual change): the stamps stood at the
    last one plus 1 ns a state for 5 s, in the future of every arrival, and tf lookups at
    now() failed meanwhile. They follow the host's clock back at once, the robot's spacing
    kept."""
    clock = RobotClock()
    before = [clock.state_stamp(HOST0 + t * MS + 3 * MS, t) for t in range(0, 3000, 30)]
    back = HOST0 - 5 * 10**9
    arrivals = [back + t * MS + 3 * MS for t in range(3000, 4500, 30)]
    after = [clock.state_stamp(a, t) for a, t in zip(arrivals, range(3000, 4500, 30))]
    assert all(s <= a for s, a in zip(after, arrivals)), "a stamp later than its arrival"
    assert after[0] < before[-1]
    assert [b - a for a, b in zip(after, after[1:])] == [30 * MS] * (len(after) - 1)


def test_a_frame_timestamp_of_0_is_no_time_once_the_robots_clock_is_past_it():
    """A firmware said to send frame_timestamp 0 (no capture time): a frame that came 600 ms
    into the connection was stamped as captured at robot time 0, 600 ms early (within 1 s of
    its arrival, so it fit). A 0 is a capture time only while the robot's clock is just past
    0 (a frame captured at SyncTime, as the simulator sends one); later the frame gets its
    arrival, counted."""
    clock = RobotClock()
    feed(clock, [0, 30], [4, 4])
    assert clock.frame_stamp(HOST0 + 40 * MS, 0) == HOST0 + 4 * MS      # captured at SyncTime
    feed(clock, range(60, 630, 30), [4] * 19)
    assert clock.frames_from_arrival == 0
    assert clock.frame_stamp(HOST0 + 610 * MS, 0) == HOST0 + 610 * MS   # no time: its arrival
    assert clock.frame_stamp(HOST0 + 610 * MS, 540) == HOST0 + 544 * MS  # a time: its capture
    assert clock.frames_from_arrival == 1
    # robot time 0 again at the clock's 32-bit wrap (49 days on): a capture time
    clock.reset()
    top = 1 << 32
    feed(clock, [top - 60, top - 30], [4, 4])
    assert clock.frame_stamp(HOST0 + (top + 10) * MS, 0) == HOST0 + (top + 4) * MS
    assert clock.frames_from_arrival == 1


def test_the_robots_clock_wraps_after_49_days():
    clock = RobotClock()
    top = (1 << 32) - 90
    stamps = [clock.state_stamp(HOST0 + k * 30 * MS + 2 * MS, (top + 30 * k) % (1 << 32)) for k in range(6)]
    assert [b - a for a, b in zip(stamps, stamps[1:])] == [30 * MS] * 5


def test_camera_frames_get_their_capture_time_or_their_arrival():
    clock = RobotClock()
    assert clock.frame_stamp(HOST0 + 100 * MS, 30) == HOST0 + 100 * MS  # no state yet
    feed(clock, range(0, 3000, 30), [4] * 100)
    # captured at 2900 ms (robot), its last chunk in at 3010: stamped at capture (+4 ms)
    assert clock.frame_stamp(HOST0 + 3010 * MS, 2900) == HOST0 + 2904 * MS
    assert clock.frame_stamp(HOST0 + 3010 * MS, 3008) == HOST0 + 3010 * MS  # faster than states
    assert clock.frame_stamp(HOST0 + 3010 * MS, 500) == HOST0 + 3010 * MS   # 2.5 s old: no
    assert clock.frame_stamp(HOST0 + 3010 * MS, 3500) == HOST0 + 3010 * MS  # in the future: no
    assert clock.frames_from_arrival == 3
    clock.reset()
    assert clock.frame_stamp(HOST0 + 3100 * MS, 3000) == HOST0 + 3100 * MS
