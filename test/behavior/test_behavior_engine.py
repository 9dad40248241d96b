"""The behavior engine without ROS: emotions and their decay, reactions (priorities,
cool-downs, conditions), activity choice, the user-command pause, enable/disable,
the charger rule, behaviors that raise, time-outs. Time is injected everywhere."""

from __future__ import annotations

import collections
import random

import pytest

from behavior_fakes import FakeRobot
from cozmo_driver.behavior import (Curve, EmotionEvent, Emotions, EmotionSpec, Engine, Handle,
                                   Outcome, RobotState, parse_config)
from cozmo_driver.behavior.activities import Activity, ActivityChooser, ActivityEntry
from cozmo_driver.behavior.config import merge
from cozmo_driver.behavior.reactions import LowBatteryDetector, Reaction, ReactionTable

TICK = 0.1


# ----------------------------------------------------------------------------- emotions

def test_exponential_decay_is_exact_at_any_time():
    e = Emotions([EmotionSpec("happy", half_life=10.0), EmotionSpec("calm", rest=0.3, half_life=4.0)])
    e.add("happy", 0.8, now=0.0)
    assert e.value("happy", 0.0) == pytest.approx(0.8)
    assert e.value("happy", 10.0) == pytest.approx(0.4)
    assert e.value("happy", 20.0) == pytest.approx(0.2)
    assert e.value("happy", 5.0) == pytest.approx(0.8 * 0.5 ** 0.5)
    # towards the resting value, not towards 0
    e.set("calm", -0.5, now=0.0)
    assert e.value("calm", 4.0) == pytest.approx(0.3 + (-0.5 - 0.3) / 2)
    assert e.value("calm", 400.0) == pytest.approx(0.3)


def test_decay_does_not_depend_on_how_often_it_is_read():
    a = Emotions([EmotionSpec("happy", half_life=7.0)])
    b = Emotions([EmotionSpec("happy", half_life=7.0)])
    a.add("happy", 1.0, 0.0)
    b.add("happy", 1.0, 0.0)
    for i in range(1, 301):
        a.value("happy", i * 0.1)
    assert a.value("happy", 30.0) == b.value("happy", 30.0) == pytest.approx(0.5 ** (30 / 7))


def test_a_change_adds_to_the_decayed_value_and_clamps():
    e = Emotions([EmotionSpec("happy", half_life=10.0)])
    e.add("happy", 0.8, 0.0)
    assert e.add("happy", 0.1, 10.0) == pytest.approx(0.5)   # 0.4 + 0.1, re-anchored at 10 s
    assert e.value("happy", 20.0) == pytest.approx(0.25)
    assert e.add("happy", 5.0, 20.0) == 1.0
    assert e.add("happy", -9.0, 20.0) == -1.0


def test_decay_graph_holds_then_falls():
    spec = EmotionSpec("social", rest=0.0, decay=Curve.of([(0, 1.0), (10, 1.0), (20, 0.0)]))
    e = Emotions([spec])
    e.set("social", 0.6, 0.0)
    assert e.value("social", 10.0) == pytest.approx(0.6)
    assert e.value("social", 15.0) == pytest.approx(0.3)
    assert e.value("social", 25.0) == pytest.approx(0.0)
    no_decay = Emotions([EmotionSpec("x", half_life=0.0)])
    no_decay.set("x", 0.7, 0.0)
    assert no_decay.value("x", 1e6) == pytest.approx(0.7)


def test_repeated_events_are_dampened():
    e = Emotions([EmotionSpec("happy", half_life=0.0)],
                 [EmotionEvent("tap", {"happy": 0.2})],
                 repetition_penalty=Curve.of([(0, 0.0), (10, 1.0)]))
    assert e.apply("tap", 0.0) == {"happy": pytest.approx(0.2)}
    assert e.apply("tap", 5.0) == {"happy": pytest.approx(0.1)}   # half a penalty 5 s later
    assert e.apply("tap", 5.0)["happy"] == pytest.approx(0.0)     # at once again: nothing
    assert e.apply("tap", 100.0) == {"happy": pytest.approx(0.2)}
    assert e.apply("unknown", 100.0) == {}
    assert e.value("happy", 100.0) == pytest.approx(0.5)


def test_curve():
    c = Curve.of([(0, 0.0), (10, 1.0), (20, 3.0)])
    assert (c(-5), c(5), c(15), c(99)) == (0.0, 0.5, 2.0, 3.0)
    with pytest.raises(ValueError, match="increase"):
        Curve.of([(1, 0), (1, 1)])


# ----------------------------------------------------------------------------- reactions

def test_reaction_cooldown_and_conditions():
    table = ReactionTable([Reaction("cliff_detected", "react", 90, cooldown=3.0,
                                    when={"picked_up": False})])
    state = RobotState()
    assert table.select("cliff_detected", 0.0, state)[0] is not None
    table.fired("cliff_detected", 0.0)
    reaction, why = table.select("cliff_detected", 2.0, state)
    assert reaction is None and "cooling down (1.0 s left)" in why
    assert table.select("cliff_detected", 3.0, state)[0] is not None
    state.picked_up = True
    reaction, why = table.select("cliff_detected", 9.0, state)
    assert reaction is None and "picked_up=false" in why
    assert table.select("poked", 0.0, state) == (None, "no reaction")


def test_low_battery_fires_once_with_hysteresis():
    d = LowBatteryDetector(0.15, 0.05)
    assert [d.update(v) for v in (0.5, 0.16, 0.14, 0.10, 0.18, 0.12, 0.21, 0.14)] == \
        [False, False, True, False, False, False, False, True]


# ----------------------------------------------------------------------------- activities

def _activity(**entries) -> Activity:
    return Activity("a", tuple(ActivityEntry(name, **kw) for name, kw in entries.items()))


def test_activity_choice_follows_the_weights_with_a_seeded_rng():
    activity = _activity(a={"weight": 3.0}, b={"weight": 1.0}, c={"weight": 0.0})
    chooser = ActivityChooser([activity], random.Random(42))
    picks = collections.Counter(chooser.choose(activity, {}, {}, 0.0, lambda n: True)
                                for _ in range(4000))
    assert set(picks) == {"a", "b"}
    assert picks["a"] / 4000 == pytest.approx(0.75, abs=0.03)
    # the same seed makes the same choices
    again = ActivityChooser([activity], random.Random(42))
    first = [again.choose(activity, {}, {}, 0.0, lambda n: True) for _ in range(50)]
    chooser2 = ActivityChooser([activity], random.Random(42))
    assert first == [chooser2.choose(activity, {}, {}, 0.0, lambda n: True) for _ in range(50)]


def test_repetition_penalty_and_emotion_scores():
    penalty = Curve.of([(0, 0.1), (30, 1.0)])
    activity = Activity("a", (ActivityEntry("explore", 1.0),
                              ActivityEntry("bored", 1.0, {"stimulated": Curve.of([(-1, 3.0), (0, 1.0)])})),
                        repetition=penalty)
    scores = ActivityChooser.scores(activity, {"stimulated": -0.5}, {"explore": 95.0}, 100.0,
                                    lambda n: True)
    assert scores["explore"] == pytest.approx(0.1 + 0.9 * 5 / 30)
    assert scores["bored"] == pytest.approx(2.0)
    # a behavior that cannot start scores 0; all 0: no choice
    assert ActivityChooser.scores(activity, {}, {}, 0.0, lambda n: n != "bored")["bored"] == 0.0
    assert ActivityChooser([activity]).choose(activity, {}, {}, 0.0, lambda n: False) is None
    # statistics: just after explore ran, bored is chosen about 1 / (1 + 0.1) of the time
    chooser = ActivityChooser([activity], random.Random(7))
    picks = collections.Counter(chooser.choose(activity, {}, {"explore": 0.0}, 0.0, lambda n: True)
                                for _ in range(3000))
    assert picks["bored"] / 3000 == pytest.approx(1 / 1.1, abs=0.03)


def test_the_applicable_activity_of_highest_priority_applies():
    chooser = ActivityChooser([Activity("free", (), when={"on_charger": False}),
                               Activity("charger", (), when={"on_charger": True}, priority=5),
                               Activity("low", (), when={"battery_low": True}, priority=9)])
    state = RobotState()
    assert chooser.current(state).name == "free"
    state.on_charger = True
    assert chooser.current(state).name == "charger"
    state.battery_low = True
    assert chooser.current(state).name == "low"


# ----------------------------------------------------------------------------- the engine

def small_config(**sections):
    """Two emotions, a few behaviors from behavior_fakes and built-ins, no activities
    unless given."""
    data = {
        "emotions": {"happy": {"half_life": 10.0}, "calm": {"rest": 0.3, "half_life": 0.0}},
        "emotion_events": {"poked": {"happy": 0.2}, "behavior_failed": {"calm": -0.1}},
        "behaviors": {
            "forever": {"class": "behavior_fakes:Forever", "max_duration": 30},
            "still": {"class": "behavior_fakes:Forever", "params": {"drive": False}},
            "greet": {"class": "greet", "on_success": {"happy": 0.5}},
            "raiser": {"class": "behavior_fakes:RaisingBehavior"},
            "drive_off_charger": {"class": "drive_off_charger"},
        },
        "reactions": {
            "poked": {"behavior": "greet", "priority": 40, "cooldown": 3.0},
            "picked_up": {"behavior": "still", "priority": 100},
            "button_pressed": {"behavior": "raiser", "priority": 30},
            "cube_tapped": {"behavior": "forever", "priority": 40},
        },
    }
    return parse_config(merge(data, sections))


def make_engine(config=None, auto=True, **kw):
    robot = FakeRobot(auto=auto)
    log = []
    engine = Engine(config or small_config(), robot, now=0.0, log=lambda lvl, text: log.append((lvl, text)),
                    **kw)
    engine.on_connected(True, 0.0)
    return engine, robot, log


def run(engine, start, end):
    t = start
    for _ in range(int(round((end - start) / TICK)) + 1):
        engine.tick(t)
        t = round(t + TICK, 6)
    return t


def test_a_reaction_runs_its_behavior_and_applies_emotions():
    engine, robot, log = make_engine()
    engine.on_trigger("poked", 0.0)
    assert engine.emotions.value("happy", 0.0) == pytest.approx(0.2)
    engine.tick(0.0)
    assert engine.running == "greet"
    assert engine.status(0.0).reason == "reaction to poked"
    run(engine, 0.1, 3.0)
    assert engine.running is None
    assert engine.last_outcome == "succeeded" and engine.last_behavior == "greet"
    assert "play_animation" in robot.names() and robot.face == "neutral"   # face put back
    # on_success {happy: 0.5}
    assert engine.emotions.value("happy", engine.now) > 0.5


def test_only_the_robots_own_triggers_change_its_state():
    """picked_up from the driver's events marks the robot picked up; the same name posted
    by a user (from_robot=False) runs the reaction but leaves the state to the driver."""
    engine, robot, log = make_engine(auto=False)
    engine.on_trigger("picked_up", 0.0, from_robot=False)
    assert not engine.state.picked_up and engine.knows("picked_up")
    engine.tick(0.0)
    assert engine.running == "still"  # the reaction ran
    engine.on_trigger("picked_up", 0.1)
    assert engine.state.picked_up
    assert not engine.knows("nosuch_trigger")


def test_a_reaction_that_cannot_start_says_what_the_robot_is_doing():
    """A user's on_charger trigger while the robot is off its charger: the reaction's
    behavior (sleep_on_charger) cannot start, and the log line says what the robot's state
    is, so the user sees why ("cannot start now" alone left them guessing)."""
    from cozmo_driver.behavior import load_config
    engine, robot, log = make_engine(load_config(), auto=False)
    engine.on_trigger("on_charger", 0.0, from_robot=False)
    engine.tick(0.0)
    assert engine.running != "sleep_on_charger"
    lines = [text for _, text in log if text.startswith("trigger on_charger")]
    assert lines == ["trigger on_charger: sleep_on_charger cannot start now (the robot: not on "
                     "the charger, not picked up, no cliff, battery not low)"], lines


def test_priorities_preempt_and_cooldowns_hold():
    engine, robot, log = make_engine(auto=False)
    engine.on_trigger("cube_tapped", 0.0)
    engine.tick(0.0)
    assert engine.running == "forever"
    drive = robot.handles[0]
    assert drive.what == "drive_straight" and not drive.done
    engine.on_trigger("poked", 0.1)      # the same priority (40): does not preempt
    engine.tick(0.1)
    assert engine.running == "forever"
    engine.on_trigger("picked_up", 0.2)  # 100: preempts; the drive is cancelled
    engine.tick(0.2)
    assert engine.running == "still" and drive.status == Handle.CANCELED
    assert engine.last_outcome == "interrupted: preempted by the reaction to picked_up"
    engine.on_trigger("put_down", 0.3)
    engine.set_enabled(False, 0.4)
    engine.set_enabled(True, 0.5)
    engine.on_trigger("poked", 0.5)
    engine.tick(0.5)
    assert engine.running == "greet"
    engine.set_enabled(False, 0.6)
    engine.set_enabled(True, 0.7)
    engine.on_trigger("poked", 1.0)      # cool-down of 3 s from 0.5
    engine.tick(1.0)
    assert engine.running is None
    engine.on_trigger("poked", 3.6)
    engine.tick(3.6)
    assert engine.running == "greet"


def test_user_commands_pause_the_engine():
    engine, robot, log = make_engine(auto=False, user_pause=5.0)
    engine.on_trigger("cube_tapped", 0.0)
    engine.tick(0.0)
    drive = robot.handles[0]
    engine.on_user_command("cmd_vel", 1.0)
    assert engine.running is None and drive.status == Handle.CANCELED
    assert engine.last_outcome == "interrupted: paused by a user command (cmd_vel)"
    status = engine.status(1.0)
    assert status.paused and status.pause_remaining == pytest.approx(5.0) and status.pause_reason == "cmd_vel"
    calls = len(robot.calls)
    engine.on_trigger("poked", 2.0)      # no reaction while paused
    run(engine, 1.0, 5.9)
    assert engine.running is None and len(robot.calls) == calls
    engine.on_user_command("action drive_straight", 4.0)   # extends to 9 s
    run(engine, 6.0, 8.9)
    assert engine.running is None and engine.status(8.9).paused
    engine.on_trigger("poked", 9.5)
    run(engine, 9.0, 9.5)
    assert engine.running == "greet" and not engine.status(9.5).paused
    assert any("paused for 5 s" in text for _, text in log)


def test_a_new_user_pause_applies_to_the_pause_in_progress():
    """user_pause lowered at run time ends a pause already begun at the new length after the
    last command (an hour's pause set by mistake ended only with a restart); raised, it
    lengthens it."""
    engine, robot, log = make_engine(auto=False, user_pause=3600.0)
    engine.on_user_command("cmd_vel", 1.0)
    assert engine.status(2.0).pause_remaining == pytest.approx(3599.0)
    engine.set_user_pause(2.0, 2.0)
    assert engine.status(2.0).paused and engine.status(2.0).pause_remaining == pytest.approx(1.0)
    engine.on_trigger("poked", 3.5)
    run(engine, 3.5, 4.0)
    assert not engine.status(4.0).paused and engine.running == "greet"
    engine.on_user_command("cmd_vel", 5.0)
    engine.set_user_pause(10.0, 5.5)
    assert engine.status(5.5).pause_remaining == pytest.approx(9.5)


@pytest.mark.parametrize("user_pause", [0.0, 3.0])
def test_a_users_goal_holds_the_engine_while_it_runs_whatever_user_pause_is(user_pause):
    """The node tells the engine of a user's goal at every tick, with the tick's own time:
    with user_pause 0 (in its range) the pause ended as it began, and a reaction or an
    activity started during the user's go_to_pose (and preempted it). A goal holds the
    engine while it runs; user_pause counts from its end."""
    engine, robot, log = make_engine(auto=False, user_pause=user_pause)
    engine.on_trigger("cube_tapped", 0.0)
    engine.tick(0.0)
    drive = robot.handles[0]
    engine.on_user_goal("action go_to_pose", 0.5)
    assert engine.running is None and drive.status == Handle.CANCELED
    calls = len(robot.calls)
    t = 0.5
    for _ in range(50):   # 5 s of the user's goal, a trigger at every tick
        engine.on_user_goal("action go_to_pose", t)
        engine.on_trigger("poked", t)
        engine.tick(t)
        status = engine.status(t)
        assert status.paused and status.pause_reason == "action go_to_pose", status
        assert status.pause_remaining == 0.0, status  # until the goal ends, not user_pause
        t = round(t + TICK, 6)
    assert engine.running is None and len(robot.calls) == calls
    assert engine.behaviors_started == 1
    ended = t
    engine.on_user_goal("", ended)          # the goal ended
    if user_pause:
        engine.tick(ended)
        assert engine.status(ended).paused
        assert engine.status(ended).pause_remaining == pytest.approx(user_pause)
    later = ended + user_pause
    engine.on_trigger("poked", later)
    engine.tick(later)
    assert engine.running == "greet" and not engine.status(later).paused
    assert ("info", f"paused by a user's goal (action go_to_pose) while it runs, and "
                    f"{user_pause:g} s after") in log


def test_disabled_and_disconnected_engines_start_nothing():
    engine, robot, log = make_engine(enabled=False)
    engine.on_trigger("poked", 0.0)
    assert engine.emotions.value("happy", 0.0) == pytest.approx(0.2)   # emotions still follow
    run(engine, 0.0, 1.0)
    assert engine.running is None and not robot.calls and not engine.status(1.0).enabled
    engine.set_enabled(True, 1.0)
    engine.on_connected(False, 1.0)
    engine.on_trigger("poked", 5.0)
    run(engine, 5.0, 6.0)
    assert engine.running is None
    engine.on_connected(True, 6.0)
    engine.on_trigger("poked", 6.0)
    engine.tick(6.1)
    assert engine.running == "greet"


def test_a_disabled_engine_neither_pauses_for_a_user_command_nor_says_a_stale_pause_over():
    """Disabled, each user command logged 'paused for 10 s by a user command' and the status
    said paused, though nothing could run anyway; enabled much later, the engine logged
    'pause over: the engine goes on' of a pause long ended. Disabled, a user command pauses
    nothing that is seen or said; enabled within its user_pause, the engine still waits for
    it to end, and the enable says so."""
    engine, robot, log = make_engine(auto=False, enabled=False, user_pause=10.0)
    engine.on_user_command("cmd_vel", 1.0)
    run(engine, 1.0, 2.0)
    status = engine.status(2.0)
    assert not status.enabled and not status.paused, status
    assert (status.pause_remaining, status.pause_reason) == (0.0, ""), status
    assert not [text for _, text in log if "pause" in text], log
    count = len(log)
    assert engine.set_enabled(True, 100.0) == "enabled"
    engine.on_trigger("poked", 100.0)
    run(engine, 100.0, 101.0)
    assert engine.running == "greet" and not engine.status(101.0).paused
    assert log[count:count + 1] == [("info", "enabled")], log[count:]
    assert not [text for _, text in log[count:] if "pause" in text], log[count:]
    # a command shortly before the enable: the pause is kept (the user comes first) and said
    engine.set_enabled(False, 102.0)
    engine.on_user_command("cmd_vel", 103.0)
    assert not engine.status(103.0).paused
    count = len(log)
    said = "enabled, but a user command (cmd_vel) pauses it for 6.0 s more"
    assert engine.set_enabled(True, 107.0) == said
    assert log[count:] == [("info", said)], log[count:]
    status = engine.status(107.0)
    assert status.paused and status.pause_reason == "cmd_vel" and status.pause_remaining == pytest.approx(6.0)
    engine.on_trigger("poked", 112.0)
    run(engine, 107.0, 112.9)
    assert engine.running is None
    engine.on_trigger("poked", 113.0)
    run(engine, 113.0, 113.2)
    assert engine.running == "greet"
    assert log[count + 1:].count(("info", "pause over: the engine goes on")) == 1, log[count:]
    # a user's goal that runs while the engine is disabled holds it once enabled, until it ends
    engine.set_enabled(False, 114.0)
    engine.on_user_goal("action go_to_pose", 115.0)
    assert not engine.status(115.0).paused
    said = "enabled, but a user's goal (action go_to_pose) pauses it while it runs, and 10 s after"
    assert engine.set_enabled(True, 116.0) == said
    assert engine.status(116.0).paused and engine.status(116.0).pause_remaining == 0.0


HOLDS = {"the driver inactive": (lambda e, t: e.on_driver_active(False, t),
                                 lambda e, t: e.on_driver_active(True, t), "the driver is inactive (lifecycle)"),
         "the robot lost": (lambda e, t: e.on_connected(False, t),
                            lambda e, t: e.on_connected(True, t), "the robot is not connected"),
         "the emergency stop": (lambda e, t: e.on_emergency_stop(True, t),
                                lambda e, t: (e.on_emergency_stop(False, t), e.set_enabled(True, t)),
                                "the emergency stop is engaged")}


@pytest.mark.parametrize("hold", sorted(HOLDS))
def test_a_pause_that_runs_out_while_the_engine_is_held_is_said_then(hold):
    """A user's pause that ran out while the engine was held (the driver inactive, the robot
    lost, the emergency stop) logged 'pause over: the engine goes on' when the hold ended, a
    minute late, as if the pause had lasted until then. It is said as it runs out, with what
    still holds the engine, and not again once the hold ends."""
    start, end, reason = HOLDS[hold]
    engine, robot, log = make_engine(user_pause=10.0)
    engine.on_user_command("cmd_vel", 1.0)
    start(engine, 2.0)
    run(engine, 2.0, 10.9)
    assert not [text for _, text in log if text.startswith("pause over")], log
    run(engine, 11.0, 11.1)                  # the pause ran out at 11 s
    said = f"pause over, but {reason}: nothing runs until that ends"
    assert [text for _, text in log if text.startswith("pause over")] == [said], log
    status = engine.status(11.1)
    assert status.paused and status.pause_reason == reason and status.pause_remaining == 0.0, status
    count = len(log)
    run(engine, 11.2, 60.0)
    end(engine, 60.0)
    engine.on_trigger("poked", 60.0)
    run(engine, 60.0, 60.5)
    assert engine.running == "greet"
    assert not [text for _, text in log[count:] if "pause" in text], log[count:]


def test_the_robots_connection_and_its_loss_are_said_once_each():
    """The engine held still while the robot was not connected and said nothing of it (the
    emergency stop and an inactive driver are said): a node started before its robot
    connected, or whose robot was lost, printed its start line and did nothing. Each
    change is said (info), the first report too, and not repeated; nothing once shut down."""
    robot = FakeRobot()
    log = []
    engine = Engine(small_config(), robot, now=0.0, log=lambda lvl, text: log.append((lvl, text)))
    lost = ("info", "the robot is not connected: nothing runs until it connects")
    back = ("info", "the robot is connected: the engine goes on")
    for connected, now in ((False, 0.5), (False, 1.0), (True, 2.0), (True, 3.0), (False, 4.0),
                           (False, 5.0), (True, 6.0)):
        engine.on_connected(connected, now)
    assert [entry for entry in log if "connected" in entry[1]] == [lost, back, lost, back], log
    engine.on_connected(False, 7.0, said=True)  # the caller said why (a driver gone): not again
    assert log[-1] == back, log
    engine.on_connected(True, 8.0)
    engine.shutdown(9.0)
    count = len(log)
    engine.on_connected(False, 10.0)  # a stopping driver's last link_status
    assert not engine.state.connected and log[count:] == [], log[count:]


def _held_from(engine, robot, hold, reason: str) -> None:
    """A behavior runs; ``hold(now)`` at 1.0 stops it (its goal cancelled) and holds the
    engine: paused for ``reason`` until that ends, nothing started or failed up to 5.0."""
    engine.on_trigger("cube_tapped", 0.0)
    engine.tick(0.0)
    drive = robot.handles[0]
    hold(1.0)
    assert engine.running is None and drive.status == Handle.CANCELED
    assert engine.last_outcome == f"interrupted: {reason}"
    status = engine.status(1.0)
    assert status.paused and status.pause_remaining == 0.0 and status.pause_reason == reason
    failed, calls = engine.behaviors_failed, len(robot.calls)
    engine.on_trigger("poked", 2.0)
    run(engine, 1.0, 5.0)
    assert engine.running is None and len(robot.calls) == calls
    assert engine.behaviors_failed == failed


def _goes_on(engine, log, now: float, said, start_delay: float = 0.0) -> None:
    """Released at ``now``: not paused, the hold's two lines ``said`` (among the log's),
    and a trigger after ``start_delay`` starts its reaction."""
    assert not engine.status(now).paused
    assert [text for _, text in log if text in said] == said
    later = now + start_delay + 0.1
    engine.on_trigger("poked", later)
    engine.tick(later)
    assert engine.running == "greet"


def test_the_emergency_stop_holds_the_engine_still_and_the_status_says_why():
    """While the driver's emergency stop is engaged the engine starts nothing (every motion
    would be refused: before, it started behaviors that failed at once, over and over);
    the running one is stopped. The status says paused and why, as while disconnected.
    Released, it holds on until enabled (see the test after this one)."""
    engine, robot, log = make_engine(auto=False, start_delay=2.0)
    _held_from(engine, robot, lambda now: engine.on_emergency_stop(True, now),
               "the emergency stop is engaged")
    engine.on_emergency_stop(False, 5.0)
    engine.set_enabled(True, 5.0)
    _goes_on(engine, log, 5.0, [
        "emergency stop engaged: nothing runs until it is released and behavior/enable true is called",
        "emergency stop released: nothing starts until behavior/enable true is called (or the "
        "enabled parameter is set to true)",
        LIFTED])
    # not connected: paused, the reason said, until it is back
    engine.on_connected(False, 6.0)
    engine.tick(6.0)
    status = engine.status(6.0)
    assert status.paused and status.pause_reason == "the robot is not connected"
    assert engine.last_outcome == "interrupted: the robot is not connected"
    engine.on_connected(True, 7.0)
    assert not engine.status(7.0).paused


def _roaming_engine():
    """An engine whose one activity drives (``forever``), start_delay 2 s, idle_between 1 s,
    the robot's commands left running; it runs one behavior from 0 to 3 s, when the
    emergency stop is engaged (and stops it), then released at 4 s."""
    config = small_config(activities={"free": {"idle_between": 1.0,
                                               "behaviors": {"forever": {"weight": 1.0}}}})
    engine, robot, log = make_engine(config, auto=False, start_delay=2.0)
    run(engine, 0.0, 3.0)
    assert engine.running == "forever" and engine.behaviors_started == 1
    engine.on_emergency_stop(True, 3.0)
    assert engine.running is None and engine.last_outcome == "interrupted: the emergency stop is engaged"
    run(engine, 3.0, 4.0)
    engine.on_emergency_stop(False, 4.0)
    return engine, robot, log


RELEASED = "the emergency stop was released: call behavior/enable true to start behaviors again"
#: what set_enabled(True) logs and returns under the stop (it does not count), and after a release
UNDER_THE_STOP = ("enabled, but the emergency stop is engaged: nothing runs; once it is released, "
                  "call behavior/enable true again to start behaviors")
LIFTED = "enabled: the emergency stop's release holds the engine no more"


def _still_after_the_release(engine, robot, start: float, end: float) -> None:
    """From ``start`` to ``end`` nothing starts, no activity (the first 10 s) and no
    reaction (a poke then), nor is the robot commanded; the status says paused and why;
    the mood still follows events."""
    started, calls = engine.behaviors_started, len(robot.calls)
    run(engine, start, start + 10.0)
    assert robot.calls[calls:] == [], robot.calls[calls:]   # before: drive_straight, 2 s after the release
    happy = engine.emotions.value("happy", start + 10.0)
    engine.on_trigger("poked", start + 10.0)
    assert engine.emotions.value("happy", start + 10.0) > happy   # the mood follows
    run(engine, start + 10.0, end)
    assert robot.calls[calls:] == [], robot.calls[calls:]
    assert engine.running is None and engine.behaviors_started == started
    status = engine.status(end)
    assert status.enabled and status.paused and status.pause_remaining == 0.0
    assert status.pause_reason == RELEASED


def test_releasing_the_emergency_stop_starts_nothing_until_the_engine_is_enabled():
    """README's safety section says releasing the emergency stop starts nothing, but the
    engine went on start_delay (2 s) after the release: an activity drove the robot with no
    new command. Now it stays held after the release until a person enables it (even when
    it is enabled already: the behavior/enable service and the enabled parameter both call
    set_enabled); the log says so once, at the release."""
    engine, robot, log = _roaming_engine()
    _still_after_the_release(engine, robot, 4.0, 30.0)   # well past start_delay and idle_between
    released = [text for _, text in log if text.startswith("emergency stop released")]
    assert released == ["emergency stop released: nothing starts until behavior/enable true is "
                        "called (or the enabled parameter is set to true)"], log
    engine.set_enabled(True, 30.0)
    assert ("info", LIFTED) in log
    assert not engine.status(30.0).paused
    run(engine, 30.0, 30.5)
    assert engine.running == "forever" and engine.behaviors_started == 2
    assert robot.calls[-1][0] == "drive_straight"
    # enabled (the parameter set to true again) once more: nothing changes, nothing said
    count = len(log)
    engine.set_enabled(True, 31.0)
    assert engine.running == "forever" and log[count:] == []


def test_after_the_release_off_and_on_lifts_the_hold_but_an_enable_under_the_stop_does_not():
    """Disabled after the release, then enabled, the engine goes on. Enabled while the stop
    is engaged, it still waits for an enable after the release (the log says so): a
    release must start nothing."""
    engine, robot, log = _roaming_engine()
    engine.set_enabled(False, 5.0)
    assert engine.status(5.0).pause_reason == RELEASED and not engine.status(5.0).enabled
    engine.set_enabled(True, 6.0)
    run(engine, 6.0, 6.5)
    assert engine.running == "forever" and engine.behaviors_started == 2
    engine.on_emergency_stop(True, 7.0)
    engine.set_enabled(True, 7.5)
    assert ("info", UNDER_THE_STOP) in log
    engine.on_emergency_stop(False, 8.0)
    _still_after_the_release(engine, robot, 8.0, 20.0)
    engine.set_enabled(True, 20.0)
    run(engine, 20.0, 20.5)
    assert engine.running == "forever" and engine.behaviors_started == 3


def test_an_enable_under_the_stop_after_an_earlier_release_says_only_that_it_does_not_count():
    """Engaged, released, engaged again, then enabled: the enable does not count, and the log
    said so but also that the release held the engine no more (it had lifted the first
    release's hold). Now it says the one thing, and set_enabled returns what it said (the
    behavior/enable answer); enabled after the second release, it says the hold is lifted."""
    engine, robot, log = _roaming_engine()
    engine.on_emergency_stop(True, 5.0)
    count = len(log)
    assert engine.set_enabled(True, 6.0) == UNDER_THE_STOP
    assert log[count:] == [("info", UNDER_THE_STOP)], log[count:]
    assert engine.set_enabled(True, 6.5) == UNDER_THE_STOP   # said at each call
    assert log[count:] == [("info", UNDER_THE_STOP)] * 2, log[count:]
    engine.on_emergency_stop(False, 7.0)
    _still_after_the_release(engine, robot, 7.0, 20.0)
    count = len(log)
    assert engine.set_enabled(True, 20.0) == LIFTED
    assert log[count:] == [("info", LIFTED)], log[count:]
    run(engine, 20.0, 20.5)
    assert engine.running == "forever" and engine.behaviors_started == 2
    # nothing held any more: an enable changes nothing, says nothing, answers "enabled"
    count = len(log)
    assert engine.set_enabled(True, 21.0) == "enabled" and log[count:] == []
    assert engine.set_enabled(False, 22.0) == "disabled"
    assert ("info", "disabled") in log[count:] and engine.running is None


def test_an_engine_that_starts_under_the_emergency_stop_waits_for_an_enable_after_its_release():
    """A node started while the stop is engaged (its latched emergency_stop/engaged says so
    first): the same rule; a stop that was never engaged holds nothing (the driver's first
    emergency_stop/engaged, false, at every configure)."""
    config = small_config(activities={"free": {"idle_between": 1.0,
                                               "behaviors": {"forever": {"weight": 1.0}}}})
    engine, robot, log = make_engine(config, auto=False, start_delay=2.0)
    engine.on_emergency_stop(False, 0.0)     # released, as it was: no hold
    engine.on_emergency_stop(True, 0.0)
    run(engine, 0.0, 3.0)
    engine.on_emergency_stop(False, 3.0)
    _still_after_the_release(engine, robot, 3.0, 20.0)
    assert engine.behaviors_started == 0
    engine.set_enabled(True, 20.0)
    run(engine, 20.0, 20.5)
    assert engine.running == "forever"
    fresh, fresh_robot, _ = make_engine(config, auto=False, start_delay=2.0)
    fresh.on_emergency_stop(False, 0.0)
    run(fresh, 0.0, 2.5)
    assert fresh.running == "forever"


def test_an_inactive_driver_holds_the_engine_still_and_the_status_says_why():
    """While the driver is inactive (lifecycle) it refuses every command: the engine starts
    nothing (before, a behavior started and failed every idle_between, and each failure
    counted against the mood); the running one is stopped. Active again, it goes on after
    start_delay. With the emergency stop engaged too, releasing one still holds."""
    engine, robot, log = make_engine(auto=False, start_delay=2.0)

    def deactivate(now: float) -> None:
        engine.on_driver_active(True, now)     # as it was: nothing changes
        assert engine.running is not None
        engine.on_driver_active(False, now)
    _held_from(engine, robot, deactivate, "the driver is inactive (lifecycle)")
    engine.on_emergency_stop(True, 5.0)
    engine.on_driver_active(True, 5.5)
    assert engine.status(5.5).pause_reason == "the emergency stop is engaged"
    engine.on_emergency_stop(False, 6.0)
    engine.set_enabled(True, 6.0)   # a release holds until then (see above)
    _goes_on(engine, log, 6.0, [
        "the driver is inactive (lifecycle): nothing runs until it is activated",
        "the driver is active again: the engine goes on"], start_delay=2.0)


def test_a_behavior_that_failed_because_a_command_failed_says_which_and_why():
    engine, robot, log = make_engine(auto=False)
    engine.on_trigger("poked", 0.0)
    t = 0.0
    for _ in range(100):
        for handle in robot.active():
            if handle.kind == "animation":
                handle.fail(f"{handle.what}: the driver rejected the goal (its log says why)")
            else:
                handle.succeed("done")
        engine.tick(t)
        t = round(t + TICK, 6)
        if engine.running is None and engine.last_behavior:
            break
    assert engine.last_behavior == "greet"
    assert engine.last_outcome == "failed: play_animation: the driver rejected the goal (its log says why)"
    assert any(lvl == "warning" and "end greet: failed: play_animation: the driver rejected" in text
               for lvl, text in log), log


def test_an_activity_does_not_choose_again_and_again_a_behavior_that_fails_every_time():
    """A clip the driver does not have (a misspelt name, the app's behaviors without its
    animations): every goal refused. The activity chose the behavior again at every
    idle_between, 2 s, each failure a warning (and the driver's own): 286 in 10 minutes. A
    behavior that failed now waits 5 s before an activity chooses it again, twice as long at
    each failure in a row (at most 5 minutes), as its warning says; a success starts the
    count again, and so does switching the engine off and on. Reactions are not held back."""
    config = small_config(
        behaviors={"dance": {"class": "play_animation", "params": {"animation": "no_such_clip"}}},
        activities={"free": {"idle_between": 2.0, "behaviors": {"dance": {"weight": 1.0}}}})
    engine, robot, log = make_engine(config, auto=False)
    clock = {"t": 0.0}

    def live(seconds, ok=False):
        """Tick for ``seconds``, the driver refusing (or, ``ok``, playing) every goal."""
        for _ in range(int(round(seconds / TICK))):
            for handle in robot.active():
                handle.succeed("played") if ok else handle.fail(
                    f"{handle.what}: the driver rejected the goal (its log says why)")
            engine.tick(clock["t"])
            clock["t"] = round(clock["t"] + TICK, 6)

    live(600.0)   # 10 minutes
    ends = [text for lvl, text in log if text.startswith("end dance: failed")]
    assert engine.behaviors_started == len(ends) == engine.behaviors_failed
    # 5 + 10 + 20 + 40 + 80 + 160 + 300 s of waits in 10 minutes: 7 failures, where the old
    # engine failed it at every idle_between
    assert len(ends) == 7, ends
    assert ends[0].endswith("no activity chooses it again for 5 s"), ends[0]
    assert ends[2].endswith("failed 3 times in a row; no activity chooses it again for 20 s"), ends[2]
    assert ends[-1].endswith("failed 7 times in a row; no activity chooses it again for 300 s"), ends[-1]
    assert all(lvl == "warning" for lvl, text in log if text.startswith("end dance"))
    # off and on: chosen again at once (idle_between is long over), the wait from 5 s again
    engine.set_enabled(False, clock["t"])
    engine.set_enabled(True, clock["t"])
    live(4.5)
    assert engine.behaviors_started == 8
    assert log[-1][1].endswith("s; no activity chooses it again for 5 s"), log[-1]
    # a success ends the count: chosen again after idle_between, and a failure waits 5 s, not 10
    live(2.0, ok=True)   # chosen again within a second of the 5 s (choices are retried each second)
    assert engine.behaviors_started == 9 and engine.last_outcome == "succeeded", log[-4:]
    live(2.5)
    assert engine.behaviors_started == 10
    assert log[-1][1].endswith("s; no activity chooses it again for 5 s"), log[-1]
    # a reaction's behavior is not held back (its trigger and cool-down pace it), nor said to be
    live(5.0)
    engine.on_trigger("button_pressed", clock["t"])
    live(0.5)
    ended = [text for lvl, text in log if text.startswith("end raiser")]
    assert ended and "no activity" not in ended[-1], ended


@pytest.mark.parametrize("phase", ["start", "tick", "stop"])
def test_a_behavior_that_raises_is_stopped_reported_and_the_engine_goes_on(phase):
    config = small_config(behaviors={"raiser": {"params": {"raise_in": phase}}})
    engine, robot, log = make_engine(config, auto=False)
    engine.on_trigger("button_pressed", 0.0)
    run(engine, 0.0, 0.5)
    assert engine.running is None
    assert engine.last_behavior == "raiser"
    assert engine.last_outcome == f"error: RuntimeError: boom in {phase}"
    assert engine.behaviors_failed == 1 and engine.behaviors_started == 1
    assert len(engine.errors) == 1 and f"raiser.{phase} raised RuntimeError" in engine.errors[0]
    assert "behavior_fakes.py" in engine.errors[0]
    errors = [text for lvl, text in log if lvl == "error"]
    assert len(errors) == 1 and f"raiser.{phase} raised RuntimeError: boom in {phase}" in errors[0]
    # a behavior that fails to stop is stopped already: its log says no more than that
    assert ("the behavior is stopped and the engine goes on" in errors[0]) == (phase != "stop")
    assert all(h.done for h in robot.handles)         # its head move was cancelled
    assert engine.emotions.value("calm", 1.0) == pytest.approx(0.2)   # behavior_failed
    # and the engine goes on
    engine.on_trigger("poked", 1.0)
    engine.tick(1.0)
    assert engine.running == "greet"


def _lighter(cube, robot=None):
    config = small_config(behaviors={"lighter": {"class": "behavior_fakes:CubeLighter",
                                                 "params": {"cube": cube}}},
                          reactions={"button_pressed": {"behavior": "lighter"}})
    engine, fake, log = make_engine(config, auto=False)
    if robot is not None:
        engine.robot = robot
    return engine, engine.robot, log


def test_a_cube_named_instead_of_its_factory_id_is_an_error_of_the_behavior():
    """ctx.cube_lights("cube1", ...): the node's int("cube1") raised in the behavior (caught),
    then again in the end's clean-up, which put out the cubes recorded before the call: that
    one escaped Engine.tick and took the node down. The context refuses the name itself."""
    engine, robot, log = _lighter("cube1")
    engine.on_trigger("button_pressed", 0.0)
    run(engine, 0.0, 0.5)
    assert engine.running is None and engine.last_behavior == "lighter"
    assert engine.last_outcome.startswith("error: BehaviorError: cube_lights: 'cube1' is no "
                                          "factory id"), engine.last_outcome
    assert robot.backpack is None and not robot.cubes    # the backpack put out; no cube lit
    engine.on_trigger("poked", 1.0)
    engine.tick(1.0)
    assert engine.running == "greet"


def test_a_clean_up_that_raises_is_reported_and_the_engine_goes_on():
    """The robot side raising while the engine puts a behavior's lights out: reported, the
    rest of the clean-up done, and the engine goes on (as docs/behavior.md promises of a
    behavior that raises)."""
    class Breaking(FakeRobot):
        def set_backpack_lights(self, colors, blink_period=0.0, fade=False):
            if colors is None:
                raise RuntimeError("no lights today")
            super().set_backpack_lights(colors, blink_period, fade)

    engine, robot, log = _lighter(0xC0B10001, Breaking(auto=False))
    engine.on_trigger("button_pressed", 0.0)
    engine.tick(0.0)
    assert engine.running == "lighter" and robot.cubes[0xC0B10001]
    engine.on_user_command("cmd_vel", 0.5)   # ends it
    assert engine.running is None and robot.cubes[0xC0B10001] is None
    assert engine.last_outcome == "interrupted: paused by a user command (cmd_vel)"
    assert any("putting out the backpack lights" in text and "no lights today" in text
               for text in engine.errors), list(engine.errors)
    assert any(lvl == "error" and "no lights today" in text for lvl, text in log)
    engine.on_trigger("poked", 11.0)
    run(engine, 10.5, 11.0)
    assert engine.running == "greet"


def test_a_behavior_that_returns_nonsense_is_an_error():
    config = small_config(behaviors={"weird": {"class": "behavior_fakes:Forever"}})
    engine, robot, log = make_engine(config)
    behavior = engine.behaviors["weird"]
    behavior.tick = lambda ctx, now: "done"
    engine.on_trigger("cube_tapped", 0.0)
    engine.reactions.reactions["cube_tapped"] = Reaction("cube_tapped", "weird", 40)
    engine.tick(0.0)
    assert engine.last_outcome.startswith("error: TypeError: tick returned 'done'")


def test_max_duration_fails_a_behavior():
    engine, robot, log = make_engine(auto=True)
    engine.on_trigger("cube_tapped", 0.0)    # forever, max_duration 30
    run(engine, 0.0, 31.0)
    assert engine.last_outcome == "failed: timed out after 30 s"


def test_the_charger_rule():
    config = small_config(reactions={"on_charger": {"behavior": "drive_off_charger", "priority": 60}})
    engine, robot, log = make_engine(config, auto=False)
    engine.on_state(on_charger=True)
    # a behavior that does not drive off the charger: drive refused, animations that drive too
    engine.on_trigger("cube_tapped", 0.0)
    engine.tick(0.0)
    ctx = engine._running.ctx
    assert "drive_straight" not in robot.names()
    assert engine.charger_refusals == 1
    assert ctx.turn(1.0).status == Handle.FAILED
    assert "on its charger" in ctx.animate("celebrate").message
    assert ctx.animate("nod_yes").status == Handle.ACTIVE      # keeps the treads still
    assert ctx.head(0.3).status == Handle.ACTIVE
    # taken off the charger, it drives; put back on, its tread commands are cancelled
    engine.on_state(on_charger=False)
    drive = ctx.drive(0.1)
    assert drive.status == Handle.ACTIVE
    engine.on_state(on_charger=True)
    engine.tick(0.1)
    assert drive.status == Handle.CANCELED
    # a behavior that means to drive off may
    engine.on_trigger("on_charger", 0.2)
    engine.tick(0.2)
    assert engine.running == "drive_off_charger"
    robot.finish()   # face, head and lift done
    engine.tick(0.3)
    assert robot.calls[-1][0] == "drive_straight" and robot.active()[0].what == "drive_straight"
    assert not robot.active()[0].done


def test_outcome_changes_and_generic_events():
    engine, robot, log = make_engine()
    engine.on_trigger("poked", 0.0)
    run(engine, 0.0, 3.0)
    assert engine.last_outcome == "succeeded"
    assert engine.emotions.value("happy", 3.0) == pytest.approx(
        (0.2 * 0.5 ** (engine._last_ended["greet"] / 10) + 0.5) * 0.5 ** ((3.0 - engine._last_ended["greet"]) / 10))


def test_activities_fill_idle_time_and_wait_between():
    config = small_config(
        behaviors={"nod": {"class": "play_animation", "params": {"animation": "nod_yes"}}},
        activities={"free": {"idle_between": 2.0, "behaviors": {"nod": {"weight": 1.0}}}})
    engine, robot, log = make_engine(config, start_delay=1.0)
    engine.tick(0.5)
    assert engine.running is None                  # start_delay
    engine.tick(1.0)
    assert engine.status(1.0).reason == "chosen by free" and engine.status(1.0).activity == "free"
    engine.tick(1.1)
    assert engine.running is None and engine.last_outcome == "succeeded"
    engine.tick(2.0)
    assert engine.running is None                  # idle_between
    engine.tick(3.1)
    assert engine.running == "nod"
    # not while picked up
    engine.tick(3.2)
    engine.on_state(picked_up=True)
    run(engine, 3.3, 10.0)
    assert engine.behaviors_started == 2
    # nor while it lies on its back (the driver's on_back event), until it is on its treads
    engine.on_state(picked_up=False)
    engine.on_trigger("on_back", 10.0)
    assert engine.state.lying
    run(engine, 10.0, 20.0)
    assert engine.behaviors_started == 2
    engine.on_trigger("on_treads", 20.0)
    assert not engine.state.lying
    run(engine, 20.0, 25.0)
    assert engine.behaviors_started > 2


def test_switching_the_engine_on_keeps_the_wait_it_owes():
    """Enabled during start_delay after a connection, or during an activity's idle_between,
    the engine still waits them out: switching it on is no reason to move at once."""
    config = small_config(
        behaviors={"nod": {"class": "play_animation", "params": {"animation": "nod_yes"}}},
        activities={"free": {"idle_between": 2.0, "behaviors": {"nod": {"weight": 1.0}}}})
    engine, robot, log = make_engine(config, enabled=False, start_delay=1.0)  # connected at 0.0
    engine.set_enabled(True, 0.1)
    engine.tick(0.5)
    assert engine.running is None                  # start_delay still owed
    engine.tick(1.0)
    assert engine.running == "nod"
    engine.tick(1.1)
    assert engine.running is None and engine.last_outcome == "succeeded"   # idle_between from 1.1
    engine.set_enabled(False, 1.5)
    engine.set_enabled(True, 1.6)
    engine.tick(2.0)
    assert engine.running is None                  # idle_between still owed
    engine.tick(3.1)
    assert engine.running == "nod"
    engine.tick(3.2)
    engine.set_enabled(False, 3.3)                 # long after the waits: on again, it goes on at once
    engine.set_enabled(True, 20.0)
    engine.tick(20.0)
    assert engine.running == "nod"


def test_the_default_configuration_lives_an_hour_with_a_fake_robot():
    """The default configuration, every trigger, an hour of fake time: no errors, every
    reaction behavior ran, activities alternate."""
    from cozmo_driver.behavior import load_config

    engine, robot, log = make_engine(load_config(), auto=True, seed=3)
    robot.duration, robot.clock = 0.8, lambda: engine.now   # every command takes 0.8 s
    engine.on_battery(0.8, 0.0)
    started = collections.Counter()
    t = 0.0
    script = {10.0: ("poked", {}), 30.0: ("picked_up", {}), 33.0: ("put_down", {}),
              60.0: ("cliff_detected", {}), 61.0: ("cliff_cleared", {}),
              90.0: ("cube_tapped", {"factory_id": 7, "cube": "cube1", "tap_count": 1}),
              120.0: ("falling", {}), 120.5: ("fall_ended", {}), 150.0: ("button_pressed", {}),
              160.0: ("face_seen", {}), 200.0: ("on_charger", {}), 1200.0: ("off_charger", {})}
    for _ in range(int(3600 / TICK)):
        key = round(t, 1)
        if key in script:
            name, data = script[key]
            engine.on_trigger(name, t, data)
        if key == 1300.0:
            engine.on_battery(0.1, t)
        if key == 1500.0:
            engine.on_battery(0.5, t)
        engine.tick(t)
        t = round(t + TICK, 6)
    for _level, text in log:
        if text.startswith("start "):
            started[text.split()[1]] += 1
    assert not engine.errors, list(engine.errors)
    for name in ("react_to_poke", "react_to_pickup", "react_to_put_down", "react_to_cliff",
                 "celebrate_cube", "react_to_fall", "greet", "sleep_on_charger", "low_battery_sad",
                 "look_around", "explore", "get_bored", "drive_off_charger"):
        assert started[name] >= 1, (name, started)
    assert robot.cubes[7] is None     # the celebrated cube's lights were put out


# ----------------------------------------------------------------------------- behaviors

def default_engine(auto=True):
    from cozmo_driver.behavior import load_config

    engine, robot, log = make_engine(load_config(), auto=auto)
    return engine, robot, log


def test_every_builtin_sound_is_a_valid_synth_spec():
    from cozmo_driver.anim.clip import synthesize
    from cozmo_driver.behavior import load_config

    specs = set()
    for spec in load_config().behaviors.values():
        for value in spec.create().params.values():
            if isinstance(value, str) and value.startswith("synth:"):
                specs.add(value)
    import inspect
    from cozmo_driver.behavior.behaviors import charger, idle, reactive
    for module in (charger, idle, reactive):
        for line in inspect.getsource(module).splitlines():
            if '"synth:' in line:
                specs.add("synth:" + line.split('"synth:', 1)[1].split('"', 1)[0])
    assert len(specs) >= 8
    for spec in specs:
        assert len(synthesize(spec)) > 0, spec


def test_react_to_pickup_waits_until_put_down():
    engine, robot, log = default_engine()
    engine.on_trigger("picked_up", 0.0)
    run(engine, 0.0, 10.0)
    assert engine.running == "react_to_pickup" and robot.face == "worried"
    assert ("set_lift_height", 0.06) in robot.calls and any(c[0] == "look_at" for c in robot.calls)
    engine.on_trigger("put_down", 10.0)
    run(engine, 10.0, 11.0)
    assert engine.last_behavior in ("react_to_pickup", "react_to_put_down")
    assert any("end react_to_pickup: succeeded" in text for _, text in log)
    assert any("start react_to_put_down (reaction to put_down)" in text for _, text in log)


@pytest.mark.parametrize("order", ["same tick", "on_charger first", "put_down first"])
@pytest.mark.parametrize("seed", range(8))
def test_a_robot_put_down_on_its_charger_goes_to_sleep_and_stays_on_it(order, seed):
    """Picked up, then set on the charger (the status clears picked-up and sets on-charger, in
    one tick or two): the robot goes to sleep (the reaction to on_charger), it does not nod
    first (put_down reacts only off the charger) and never drives off the charger at once.
    The put-down reaction (80) used to win over on_charger (60), which waited 1.5 s for it and
    was dropped: the charger activity then drove the robot off in about 4 runs of 10."""
    from cozmo_driver.behavior import load_config

    engine, robot, log = make_engine(load_config(), auto=True, seed=seed)
    robot.duration, robot.clock = 0.8, lambda: engine.now
    engine.on_battery(0.8, 0.0)
    t = run(engine, 0.0, 20.0)
    engine.on_trigger("picked_up", t)
    t = run(engine, t, t + 3.0)
    first, second = ("on_charger", "put_down") if order == "on_charger first" else ("put_down", "on_charger")
    engine.on_trigger(first, t)
    if order != "same tick":
        engine.tick(t)
        t = round(t + TICK, 6)
    engine.on_trigger(second, t)
    run(engine, t, t + 15.0)
    since = [text for _, text in log if text.startswith("start ")]
    since = since[since.index("start react_to_pickup (reaction to picked_up)") + 1:]
    assert "start sleep_on_charger (reaction to on_charger)" in since, since
    assert not any("drive_off_charger" in text for text in since), since
    assert engine.running == "sleep_on_charger"
    if order != "put_down first":
        assert not any("react_to_put_down" in text for text in since), since


def user_drives(engine: Engine, t: float, user: str, trigger: str, goal: str, then: str = "") -> float:
    """A user drives the robot for 2 s from ``t`` (``user``: "cmd_vel", one every tick, or
    "goal", the user's goal ``goal`` from start to end), the robot's ``trigger`` after 1 s
    and ``then``, if given, half a second later; the time at the end."""
    if user == "goal":
        engine.on_user_goal(goal, t)
    for i in range(20):
        now = round(t + i * TICK, 6)
        if user == "cmd_vel":
            engine.on_user_command("cmd_vel", now)
        if i == 10:
            engine.on_trigger(trigger, now)
        if i == 15 and then:
            engine.on_trigger(then, now)
        engine.tick(now)
    t = round(t + 2.0, 6)
    if user == "goal":
        engine.on_user_goal("", t)
    return t


@pytest.mark.parametrize("user", ["cmd_vel", "goal"])
@pytest.mark.parametrize("seed", range(8))
def test_a_robot_driven_onto_its_charger_goes_to_sleep_after_the_pause(user, seed):
    """Driven onto its charger by a user (cmd_vel, or a user's goal), the robot's on_charger
    came during the user's pause, which dropped it: once the pause was over the charger
    activity chose, and drove the robot off its charger in 5 runs of 10. The trigger now
    waits for the pause's end while the robot is on its charger, and the robot goes to sleep
    as when set on it; taken off the charger during the pause, nothing is owed."""
    from cozmo_driver.behavior import load_config

    engine, robot, log = make_engine(load_config(), auto=True, seed=seed, user_pause=10.0)
    robot.duration, robot.clock = 0.8, lambda: engine.now
    engine.on_battery(0.8, 0.0)
    t = run(engine, 0.0, 5.0)
    t = user_drives(engine, t, user, "on_charger", "action go_to_pose")   # onto the charger
    count = len(log)
    run(engine, t, t + 9.5)                  # the pause ends 10 s after the last command
    assert engine.running is None and engine.status(t + 9.5).paused
    run(engine, t + 9.6, t + 30.0)
    since = [text for _, text in log[count:] if text.startswith("start ")]
    assert since[:1] == ["start sleep_on_charger (reaction to on_charger)"], since
    assert not any("drive_off_charger" in text for text in since), since
    assert engine.running == "sleep_on_charger"
    # taken off the charger during a pause: its on_charger is dropped
    engine.on_user_command("cmd_vel", t + 31.0)
    engine.on_trigger("off_charger", t + 31.0)
    engine.on_trigger("on_charger", t + 32.0)
    engine.on_trigger("off_charger", t + 33.0)
    count = len(log)
    run(engine, t + 31.0, t + 45.0)
    assert not [text for _, text in log[count:] if "on_charger" in text], log[count:]


@pytest.mark.parametrize("user", ["cmd_vel", "goal"])
@pytest.mark.parametrize("seed", range(8))
def test_a_robot_driven_to_a_cliff_backs_off_it_after_the_pause(user, seed):
    """Driven to an edge by a user (cmd_vel, or a user's goal), the robot's cliff_detected came
    during the user's pause, which dropped it: once the pause was over the robot stood at the
    edge, the reaction that backs it off never ran, and free play chose look_around (turns of
    the body at the edge) or happy_dance there, explore refused until a cliff_cleared that
    never came. The trigger now waits for the pause's end while the robot still sees the
    cliff, and the robot backs off and turns away as without a pause; backed off the edge by
    the user during the pause (cliff_cleared), nothing is owed."""
    from cozmo_driver.behavior import load_config

    engine, robot, log = make_engine(load_config(), auto=True, seed=seed, user_pause=10.0)
    robot.duration, robot.clock = 0.8, lambda: engine.now
    engine.on_battery(0.8, 0.0)
    t = run(engine, 0.0, 5.0)
    t = user_drives(engine, t, user, "cliff_detected", "action drive_straight")   # to the edge
    count = len(log)
    run(engine, t, t + 9.5)                  # the pause ends 10 s after the last command
    assert engine.running is None and engine.status(t + 9.5).paused
    calls = len(robot.calls)
    run(engine, t + 9.6, t + 30.0)
    since = [text for _, text in log[count:] if text.startswith("start ")]
    assert since[:1] == ["start react_to_cliff (reaction to cliff_detected)"], since
    moves = [(what, args) for what, args in robot.calls[calls:] if what in ("drive_straight", "turn_in_place")]
    assert moves and moves[0][0] == "drive_straight" and moves[0][1][0] < 0, moves   # backs off first
    # backed off the edge during a pause: its cliff_detected is dropped
    engine.on_trigger("cliff_cleared", t + 30.0)
    t = user_drives(engine, t + 40.0, user, "cliff_detected", "action drive_straight", then="cliff_cleared")
    count = len(log)
    run(engine, t, t + 30.0)
    assert not [text for _, text in log[count:] if "react_to_cliff" in text], log[count:]


def test_a_robot_state_trigger_waits_while_its_state_holds():
    """A trigger that loses to a running behavior waits 1.5 s for it to end; one of the
    robot's that says the robot is somewhere (on_charger, picked_up, cliff_detected, ...)
    waits for as long as that still holds, and is dropped once it does not."""
    config = small_config(behaviors={"still": {"max_duration": 5}, "sleep": {"class": "sleep_on_charger"}},
                          reactions={"on_charger": {"behavior": "sleep", "priority": 60}})
    engine, robot, log = make_engine(config)
    engine.on_trigger("picked_up", 0.0)
    engine.tick(0.0)
    assert engine.running == "still"
    engine.on_trigger("on_charger", 0.1)
    engine.on_trigger("poked", 0.1)          # no state: waits 1.5 s, then is dropped
    run(engine, 0.1, 5.0)
    assert engine.running == "still"
    assert any(text.startswith("trigger poked: greet not started") for _, text in log)
    run(engine, 5.1, 5.5)                    # still times out: on_charger still holds
    assert engine.running == "sleep" and engine.status(5.5).reason == "reaction to on_charger"
    # taken off the charger while the trigger waits: dropped
    engine.on_trigger("picked_up", 6.0)
    engine.on_trigger("on_charger", 6.1)
    engine.on_trigger("off_charger", 6.2)
    run(engine, 6.0, 14.0)
    assert engine.status(14.0).reason != "reaction to on_charger"
    assert any(text.startswith("trigger on_charger: sleep not started: still ran") for _, text in log)


def test_a_trigger_posted_every_frame_is_said_once_and_moves_the_mood_a_little():
    """A face detector posting face_seen with every frame (30 a second) while a behavior of a
    higher priority runs: one copy waits (the newest), it is said at most once, and the mood
    moves by face_seen's event at most once every min_interval (10 s). Every copy used to be
    queued, logged at info when dropped (25 lines a second) and applied: happy and social
    reached 1.0 within a second."""
    from cozmo_driver.behavior import load_config

    engine, robot, log = make_engine(load_config(), auto=True)
    robot.duration, robot.clock = 0.5, lambda: engine.now
    engine.on_state(on_charger=True)
    engine.on_trigger("on_charger", 0.0)
    for i in range(100):                     # 10 s
        t = round(i * TICK, 6)
        for k in range(3):
            engine.on_trigger("face_seen", t + k * 0.033, from_robot=False)
        engine.tick(t)
    assert engine.running == "sleep_on_charger"
    said = [text for level, text in log if "face_seen" in text and level != "debug"]
    assert len(said) <= 1, said
    assert len(engine._pending) <= 1
    values = engine.emotions.values(10.0)
    assert values["social"] < 0.5 and values["happy"] < 0.25, values


def test_a_trigger_that_waits_in_vain_is_said_once_per_running_behavior():
    """poked every 2 s while a behavior of a higher priority runs: each copy waits 1.5 s and is
    dropped; that is said at info once for that behavior, the repeats at debug."""
    engine, robot, log = make_engine(auto=False)
    engine.on_trigger("picked_up", 0.0)
    engine.tick(0.0)
    assert engine.running == "still"
    t = 0.1
    for _ in range(10):
        engine.on_trigger("poked", t)
        t = run(engine, t, t + 2.0)
    assert engine.running == "still"
    lines = [(level, text) for level, text in log if text.startswith("trigger poked: greet not started")]
    assert [level for level, _ in lines] == ["info"] + ["debug"] * 9, lines
    engine.on_user_command("cmd_vel", t)                     # another running behavior next
    engine.set_user_pause(0.0, t)
    engine.on_trigger("picked_up", t + 0.2)
    engine.tick(t + 0.2)
    engine.on_trigger("poked", t + 0.3)
    run(engine, t + 0.3, t + 2.5)
    lines = [level for level, text in log if text.startswith("trigger poked: greet not started")]
    assert lines[-1] == "info", lines


def test_sleep_on_the_charger_and_wake_up():
    engine, robot, log = default_engine()
    engine.on_trigger("on_charger", 0.0)
    run(engine, 0.0, 20.0)
    assert engine.running == "sleep_on_charger"
    assert ("play_animation", "sleepy_yawn") in robot.calls and robot.face == "closed"
    assert robot.backpack and robot.backpack[0][2] > 0.3     # blue
    assert robot.backpack_fade                               # breathing
    assert not {"drive_straight", "turn_in_place"} & set(robot.names())
    assert sum(1 for c in robot.calls if c[0] == "play_sound") >= 2   # snores
    engine.on_trigger("off_charger", 20.0)
    run(engine, 20.0, 21.0)
    assert engine.last_behavior == "sleep_on_charger" and engine.last_outcome == "succeeded"
    assert robot.face == "neutral" and robot.backpack is None   # put back by the engine


@pytest.mark.parametrize("phase", ["yawn", "head down"])
def test_taken_off_the_charger_while_falling_asleep_it_wakes_at_once(phase):
    """Taken off the charger during the yawn (or while the head and lift went down), the
    robot slept on until the yawn, then the head and lift, were done, closed its eyes and
    lit its backpack blue, and only then woke. It now wakes at the next tick: the behavior
    ends, the clip (or the head and lift) cancelled, the eyes never closed."""
    engine, robot, log = default_engine(auto=False)
    engine.on_state(on_charger=True)
    engine.on_trigger("on_charger", 0.0)
    engine.tick(0.0)
    assert engine.running == "sleep_on_charger"
    assert robot.names() == ["face", "play_animation"], robot.calls
    if phase == "head down":
        robot.finish()
        run(engine, 0.1, 0.5)
        assert robot.names()[2:] == ["set_head_angle", "set_lift_height"], robot.calls
    waiting = robot.active()
    assert waiting and engine.running == "sleep_on_charger"
    engine.on_trigger("off_charger", 1.0)
    run(engine, 1.0, 1.1)
    assert engine.running is None
    assert engine.last_behavior == "sleep_on_charger" and engine.last_outcome == "succeeded"
    assert all(handle in robot.cancelled for handle in waiting), robot.handles
    assert ("face", "closed") not in robot.calls and robot.backpack == "unset", robot.calls
    assert robot.face == "neutral"


def test_drive_off_the_charger_needs_a_battery():
    engine, robot, log = default_engine(auto=False)
    behavior = engine.behaviors["drive_off_charger"]
    engine.on_state(on_charger=True)
    engine.on_battery(0.2, 0.0)
    ctx = engine._context(behavior, 0.0, {})
    assert not behavior.can_start(ctx)                  # below min_battery 0.3
    engine.on_battery(0.9, 0.0)
    assert behavior.can_start(ctx)
    engine._start(behavior, ctx, 0, "test", 0.0)
    robot.finish()
    engine.tick(0.1)
    assert robot.calls[-1] == ("drive_straight", (0.12, 0.05))   # allowed on the charger
    robot.finish()
    engine.on_state(on_charger=False)
    run(engine, 0.2, 1.0)
    assert engine.last_outcome == "succeeded"


def test_explore_backs_off_at_a_cliff():
    engine, robot, log = default_engine(auto=False)
    behavior = engine.behaviors["explore"]
    engine._start(behavior, engine._context(behavior, 0.0, {}), 0, "test", 0.0)
    robot.finish()                        # head and lift
    engine.tick(0.1)
    assert robot.calls[-1][0] == "drive_straight" and robot.calls[-1][1][0] > 0
    engine.on_state(cliff=True)
    robot.finish(ok=False, message="drive_straight: interrupted: cliff detected (the robot stopped at an edge)")
    engine.tick(0.2)
    assert robot.calls[-1][0] == "drive_straight" and robot.calls[-1][1][0] < 0   # backs off
    engine.on_state(cliff=False)
    robot.finish()
    engine.tick(0.3)
    assert robot.calls[-1][0] == "turn_in_place" and abs(robot.calls[-1][1][0]) > 2.0   # turns away


def test_a_cliff_met_while_exploring_ends_with_the_robot_turned_away():
    """The cliff reaction (priority 90) preempts explore at the tick after the cliff, so
    explore's own back-off and turn rarely run: the reaction itself backs off and turns away
    (by about its turn_deg), and the next forward leg does not head straight back at the edge."""
    engine, robot, log = default_engine()
    behavior = engine.behaviors["explore"]
    engine._start(behavior, engine._context(behavior, 0.0, {}), 0, "test", 0.0)
    engine.tick(0.1)
    n = len(robot.calls)
    engine.on_trigger("cliff_detected", 0.2)
    engine.tick(0.2)
    assert engine.running == "react_to_cliff"
    engine.on_trigger("cliff_cleared", 0.3)
    run(engine, 0.3, 5.0)
    assert engine.last_behavior == "react_to_cliff" and engine.last_outcome == "succeeded"
    moves = [c for c in robot.calls[n:] if c[0] in ("drive_straight", "turn_in_place")]
    assert moves[0] == ("drive_straight", (-0.05, 0.06))                 # backs off
    assert moves[1][0] == "turn_in_place" and abs(moves[1][1][0]) > 2.0  # turns away (135 deg)


def test_the_cliff_reactions_turn_is_a_parameter():
    from cozmo_driver.behavior import load_config

    config = load_config(overrides={"behaviors": {"react_to_cliff": {"params": {"turn_deg": 0}}},
                                    "activities": None})   # nothing after it
    engine, robot, log = make_engine(config)
    engine.on_trigger("cliff_detected", 0.0)
    run(engine, 0.0, 5.0)
    assert engine.last_outcome == "succeeded" and "turn_in_place" not in robot.names()
    with pytest.raises(ValueError, match="behaviors.react_to_cliff.params.turn_deg: expected a number"):
        load_config(overrides={"behaviors": {"react_to_cliff": {"params": {"turn_deg": "left"}}}})


def test_celebrate_lights_the_tapped_cube_and_puts_it_out():
    engine, robot, log = default_engine()
    engine.on_cube_tap("cube2", 0xC0B10002, 2, 0.0)
    engine.tick(0.0)
    assert engine.running == "celebrate_cube"
    assert robot.cubes[0xC0B10002] == (0.0, 1.0, 0.2)
    assert ("play_animation", "celebrate") in robot.calls
    run(engine, 0.1, 3.0)
    assert engine.last_outcome == "succeeded" and robot.cubes[0xC0B10002] is None
    assert engine.state.last_tap.count == 2


@pytest.mark.parametrize("hold", ["inactive", "disconnected"])
def test_lights_a_behavior_left_on_while_the_engine_was_held_are_put_out_when_it_ends(hold):
    """The driver deactivated, or the robot lost, while celebrate_cube's lights are on: the
    engine stops it and sends the lights off, which the driver refuses (it re-posts its last
    pattern when it is active or connected again). Once nothing holds the engine, the lights
    and the cube go off, before anything else is sent (they stayed on until a behavior
    changed them again)."""
    engine, robot, log = default_engine(auto=False)
    engine.on_cube_tap("cube2", 0xC0B10002, 2, 0.0)
    engine.tick(0.0)
    assert engine.running == "celebrate_cube" and robot.backpack and robot.cubes[0xC0B10002]
    robot.refuse_lights = True
    if hold == "inactive":
        engine.on_driver_active(False, 1.0)
    else:
        engine.on_connected(False, 1.0)
    run(engine, 1.0, 3.0)
    assert engine.running is None and engine.last_outcome.startswith("interrupted")
    assert robot.backpack and robot.cubes[0xC0B10002]   # refused: still on
    robot.refuse_lights = False
    mark = len(robot.calls)
    if hold == "inactive":
        engine.on_driver_active(True, 3.0)
    else:
        engine.on_connected(True, 3.0)
    engine.on_cube_tap("cube2", 0xC0B10002, 1, 3.0)
    run(engine, 3.0, 3.5)
    assert robot.calls[mark:mark + 2] == [("backpack_lights", None),
                                          ("cube_lights", (0xC0B10002, None))], robot.calls[mark:]
    assert engine.running == "celebrate_cube"    # then the new one, and no other "off" (once)
    assert ("backpack_lights", None) not in robot.calls[mark + 2:], robot.calls[mark:]


def test_lights_put_out_under_the_emergency_stop_are_not_put_out_again_at_its_release():
    """The driver takes lights under its emergency stop: the end's off went out; a user's lights
    set during the stop are not put out when it is released."""
    engine, robot, log = default_engine(auto=False)
    engine.on_cube_tap("cube2", 0xC0B10002, 2, 0.0)
    engine.tick(0.0)
    assert engine.running == "celebrate_cube" and robot.backpack
    engine.on_emergency_stop(True, 1.0)
    run(engine, 1.0, 2.0)
    assert engine.running is None and not robot.backpack and not robot.cubes.get(0xC0B10002)
    mark = len(robot.calls)
    engine.on_emergency_stop(False, 2.0)
    run(engine, 2.0, 2.5)
    assert ("backpack_lights", None) not in robot.calls[mark:], robot.calls[mark:]
    assert ("cube_lights", (0xC0B10002, None)) not in robot.calls[mark:], robot.calls[mark:]


def test_lights_owed_after_a_robot_loss_go_out_when_it_is_back_under_the_emergency_stop_too():
    """Owed after a robot loss, the lights off waited for the emergency stop's release too,
    though the driver takes lights under it: the behavior's lights stayed on through the
    stop, and the off at its release put out lights a user set during it."""
    engine, robot, log = default_engine(auto=False)
    engine.on_cube_tap("cube2", 0xC0B10002, 2, 0.0)
    engine.tick(0.0)
    assert engine.running == "celebrate_cube" and robot.backpack
    robot.refuse_lights = True
    engine.on_connected(False, 1.0)
    run(engine, 1.0, 2.0)
    engine.on_emergency_stop(True, 2.0)
    robot.refuse_lights = False
    engine.on_connected(True, 2.5)
    run(engine, 2.5, 3.0)
    assert not robot.backpack and not robot.cubes.get(0xC0B10002)   # out under the stop
    mark = len(robot.calls)
    engine.on_emergency_stop(False, 3.0)
    run(engine, 3.0, 3.5)
    assert ("backpack_lights", None) not in robot.calls[mark:], robot.calls[mark:]


def test_on_the_charger_animations_that_drive_fall_back():
    engine, robot, log = default_engine()
    engine.on_state(on_charger=True)
    engine.on_trigger("poked", 0.0)
    run(engine, 0.0, 2.0)
    played = [args for name, args in robot.calls if name == "play_animation"]
    assert played == ["nod_yes"]          # happy_wiggle refused on the charger
    assert engine.charger_refusals == 1


def test_script_behavior_steps():
    from cozmo_driver.behavior import BehaviorContext, ScriptBehavior
    from cozmo_driver.behavior.behavior import Wait

    class Steps(ScriptBehavior):
        def run(self, ctx):
            a, b = ctx.head(0.1), ctx.lift(0.05)
            done = yield [a, b]
            assert done == [a, b]
            yield None
            waited = yield ctx.wait(1.0)
            assert waited.ok
            return Outcome.FAILED

    robot = FakeRobot(auto=False)
    behavior = Steps("steps")
    ctx = BehaviorContext(behavior, robot, RobotState(), lambda n: 0.0, 0.0, random.Random(0))
    behavior.start(ctx)
    assert behavior.tick(ctx, 0.0) is None
    robot.finish()
    assert behavior.tick(ctx, 0.1) is None      # the list is done: on to `yield None`
    assert behavior.tick(ctx, 0.2) is None      # the wait starts
    ctx.now = 1.5
    assert behavior.tick(ctx, 1.5) is Outcome.FAILED
    assert Wait("w", lambda: 0.0, 1.0, until=lambda: False).status == Handle.ACTIVE


@pytest.mark.parametrize("interrupt", ["disable", "user_command", "shutdown", "success"])
def test_the_gaze_a_behavior_set_is_centred_when_it_ends_however_it_ends(interrupt):
    engine, robot, log = default_engine()
    engine.on_trigger("picked_up", 0.0)
    run(engine, 0.0, 10.0)
    assert engine.running == "react_to_pickup"
    gazes = [c[1] for c in robot.calls if c[0] == "look_at"]
    assert gazes and gazes[-1] != (0.0, 0.0)  # the eyes are off centre while it runs
    mark = len(robot.calls)
    if interrupt == "disable":
        engine.set_enabled(False, 10.0)
    elif interrupt == "user_command":
        engine.on_user_command("cmd_vel", 10.0)
    elif interrupt == "shutdown":
        engine.shutdown(10.0)
    else:
        engine.on_trigger("put_down", 10.0)
        engine.tick(10.0)
    ended = "interrupted" if interrupt != "success" else "succeeded"
    assert any(f"end react_to_pickup: {ended}" in text for _, text in log), log[-5:]
    assert ("look_at", (0.0, 0.0)) in robot.calls[mark:], robot.calls[mark:]


def test_a_cancel_that_raises_leaves_the_behaviors_other_commands_cancelled():
    """The robot side raising while the engine cancels one of a behavior's commands: the
    commands after it were left running (cancel_all stopped at the first); each is
    cancelled, the error reported."""
    class Breaking(FakeRobot):
        def _cancel(self, handle):
            if handle.kind == "treads":
                raise RuntimeError("no cancel today")
            super()._cancel(handle)

    robot = Breaking(auto=False)
    engine = Engine(small_config(), robot, now=0.0, log=lambda lvl, text: None)
    engine.on_connected(True, 0.0)
    engine.on_trigger("cube_tapped", 0.0)    # forever: drives, then waits
    run(engine, 0.0, 0.5)
    ctx = engine._running.ctx
    ctx.head(0.2)                            # a second command in flight, after the drive
    drive, head = ctx.handles
    assert drive.kind == "treads" and not head.done
    engine.on_user_command("cmd_vel", 1.0)   # ends it
    assert engine.running is None
    assert head.done and head in robot.cancelled, (head, robot.cancelled)
    assert any("no cancel today" in text for text in engine.errors), list(engine.errors)
