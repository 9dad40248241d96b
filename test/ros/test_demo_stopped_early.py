"""cozmo-demo stopped before its end (:meth:`cozmo_driver.ros.demo_node.Demonstration.run`
with a step that raises :class:`DemoAbort`, as a link lost for 6 s, ``--duration`` over, a
picked-up robot or a driver that died do): what the report says of the steps done.

The steps before the square are stand-ins (no driver runs); the run itself, its node and
its abort path are the demo's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from dependencies import require

rclpy = require("rclpy")

from cozmo_driver.ros.demo_node import DemoAbort, DemoOptions, Demonstration  # noqa: E402

pytestmark = pytest.mark.ros

LOST = "the link to the robot stayed LOST for 6 s: is the robot on and this machine still on its Wi-Fi?"


class Goal:
    """A stand-in for the play_audio goal's client and result future."""

    def __init__(self, wrapped=None) -> None:
        self.wrapped = wrapped
        self.destroyed = False

    def done(self) -> bool:
        return self.wrapped is not None

    def result(self):
        return self.wrapped

    def destroy(self) -> None:
        self.destroyed = True


def stopped_during_the_square(monkeypatch, goal: Goal) -> Demonstration:
    """A run whose sound goal was accepted (``goal``), then stopped during the square."""
    def connected(self):
        self.connected_once = True

    def sound(self):
        self.demo.result.sound_sent = True
        self._sound = (goal, goal, "/play_audio")

    def square(self):
        raise DemoAbort(LOST, 1)

    monkeypatch.setattr(Demonstration, "_wait_connected", connected)
    monkeypatch.setattr(Demonstration, "_camera_on", lambda self: None)
    monkeypatch.setattr(Demonstration, "_square", square)
    run = Demonstration(DemoOptions(robot_address="127.0.0.1:5551", sound=Path("sound.wav")),
                        lambda line: None)
    for step in ("animation", "face"):
        monkeypatch.setattr(run.media, step, lambda: None)
    monkeypatch.setattr(run.media, "sound", sound.__get__(run.media))
    return run


def test_a_sound_played_before_the_run_stopped_is_reported_played(monkeypatch):
    """The driver logged "play_audio: succeeded: played" at 6.7 s; the run stopped later
    (the link lost); the report said "sound: not played": the sound's result was read only
    at the normal end. It is read where the run stops too."""
    played = SimpleNamespace(status=4, result=SimpleNamespace(success=True, message="played"))
    goal = Goal(played)
    result = stopped_during_the_square(monkeypatch, goal).run()
    assert result.aborted == LOST
    assert result.sound_how == "sound.wav via action /play_audio: succeeded (played)", result.sound_how
    assert result.sound_played and goal.destroyed
    assert result.failures == [f"stopped: {LOST}"], result.failures


def test_a_sound_whose_result_had_not_come_when_the_run_stopped_is_said_so(monkeypatch):
    goal = Goal(None)
    result = stopped_during_the_square(monkeypatch, goal).run()
    assert result.sound_how == ("sound.wav via action /play_audio: sent; result not awaited (the run "
                                "stopped)"), result.sound_how
    assert not result.sound_played and goal.destroyed
    assert result.failures == [f"stopped: {LOST}"], result.failures


def test_a_sound_that_failed_before_the_run_stopped_is_listed_before_the_stop(monkeypatch):
    """docs/demo.md: what stopped the run is the last failure of the list; the sound's failed
    result, read where the run stops, was listed after it."""
    aborted = SimpleNamespace(status=6, result=SimpleNamespace(success=False, message="lost the robot"))
    result = stopped_during_the_square(monkeypatch, Goal(aborted)).run()
    assert len(result.failures) == 2 and result.failures[-1] == f"stopped: {LOST}", result.failures
    assert result.failures[0].startswith("sound: sound.wav via action /play_audio: aborted"), result.failures


def test_a_run_stopped_while_it_waits_for_the_sound_says_the_result_was_not_awaited(monkeypatch):
    """The run stopped inside sound_result's wait (the deadline, a process exited): the goal
    was already taken out of the way, so the report said "sound: not played"."""
    from cozmo_driver.ros import demo_steps

    goal = Goal(None)
    run = stopped_during_the_square(monkeypatch, goal)
    monkeypatch.setattr(Demonstration, "_square", lambda self: None)
    monkeypatch.setattr(Demonstration, "_finish", lambda self: self.media.sound_result())
    spin_until = demo_steps.SpinningCaller.spin_until

    def stopped_in_the_wait(self, predicate, timeout):
        if predicate == goal.done:
            raise DemoAbort(LOST, 1)
        return spin_until(self, predicate, timeout)

    monkeypatch.setattr(demo_steps.SpinningCaller, "spin_until", stopped_in_the_wait)
    result = run.run()
    assert result.aborted == LOST
    assert result.sound_how == ("sound.wav via action /play_audio: sent; result not awaited (the run "
                                "stopped)"), result.sound_how
    assert goal.destroyed and result.failures == [f"stopped: {LOST}"], result.failures
