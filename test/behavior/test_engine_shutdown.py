"""A behavior engine that was shut down starts nothing again (issue #17).

A node going down calls :meth:`Engine.shutdown` and then lets its executor run a little
longer (its goal cancellations go out): ticks, triggers and an enable request still
arrive meanwhile, while the driver they would command may be gone already. The
engine's running behavior ends (interrupted) and no behavior starts after that: no
reaction, no activity, whatever comes."""

from __future__ import annotations

from behavior_fakes import FakeRobot
from cozmo_driver.behavior import Engine, Handle, parse_config

TICK = 0.1


def _engine(auto: bool = True):
    config = parse_config({
        "emotions": {"happy": {"half_life": 10.0}},
        "behaviors": {
            "forever": {"class": "behavior_fakes:Forever", "max_duration": 30},
            "greet": {"class": "greet"},
            "nod": {"class": "play_animation", "params": {"animation": "nod_yes"}},
        },
        "reactions": {"poked": {"behavior": "greet", "priority": 40},
                      "cube_tapped": {"behavior": "forever", "priority": 40}},
        "activities": {"free": {"idle_between": 0.0, "behaviors": {"nod": {"weight": 1.0}}}},
    })
    robot = FakeRobot(auto=auto)
    log = []
    engine = Engine(config, robot, now=0.0, log=lambda level, text: log.append((level, text)))
    engine.on_connected(True, 0.0)
    return engine, robot, log


def test_shutdown_ends_the_running_behavior_and_nothing_starts_after():
    engine, robot, log = _engine(auto=False)
    engine.on_trigger("cube_tapped", 0.0)
    engine.tick(0.0)
    assert engine.running == "forever"
    drive = robot.handles[0]
    engine.on_trigger("poked", 0.05)     # queued before the stop: dropped with it
    engine.shutdown(0.1)
    assert engine.shut_down
    assert engine.running is None and drive.status == Handle.CANCELED
    assert engine.last_outcome == "interrupted: the engine is shutting down"
    started, calls = engine.behaviors_started, len(robot.calls)
    # what still reaches a node while it stops: ticks, triggers, enabling, a connection
    engine.on_trigger("poked", 0.2)
    engine.set_enabled(False, 0.3)
    engine.set_enabled(True, 0.4)
    engine.on_connected(False, 0.5)
    engine.on_connected(True, 0.6)
    t = 0.2
    for _ in range(100):                 # 10 s of ticks: activities would fill them
        engine.tick(t)
        t = round(t + TICK, 6)
    assert engine.running is None
    assert engine.behaviors_started == started and len(robot.calls) == calls
    assert not any(text.startswith("start ") for _, text in log[-50:] if "forever" not in text)


def test_an_idle_engine_that_is_shut_down_chooses_no_activity():
    engine, robot, log = _engine()
    engine.shutdown(0.0)
    for step in range(50):
        engine.tick(step * TICK)
    assert engine.behaviors_started == 0 and not robot.calls
    # and before the shutdown the same engine would have chosen one at once
    fresh, fresh_robot, _ = _engine()
    fresh.tick(0.0)
    assert fresh.behaviors_started == 1


def test_the_driver_going_inactive_after_the_shutdown_is_not_told():
    """A stop of the one-process stack: the engine is shut down, the driver closed, and the
    driver's last link_status (driver_active false) reaches the engine while the behavior
    node lets its cancel requests out. Every normal stop then ended with "the driver is
    inactive (lifecycle): nothing runs until it is activated", said of a stack going down.
    Before the shutdown the engine says it (the driver deactivated by a user)."""
    engine, robot, log = _engine()
    engine.on_driver_active(False, 0.0)
    assert ("info", "the driver is inactive (lifecycle): nothing runs until it is activated") in log
    engine.on_driver_active(True, 0.1)
    engine.shutdown(0.2)
    del log[:]
    engine.on_driver_active(False, 0.3)
    engine.on_emergency_stop(True, 0.4)
    engine.on_driver_active(True, 0.5)
    engine.on_emergency_stop(False, 0.6)
    assert log == []
