"""cozmo_behavior_node with the full stack in one process: the simulated Cozmo, the
driver node and the behavior node on one executor, talking through ROS only.

Each scripted event of the simulator leads to its reaction (seen on behavior/status)
and to what that reaction does reaching the simulated robot (its commands and ground
truth); emotions are published and decay; user commands (cmd_vel, a goal of a driver
action) pause the engine, stop its behavior and keep it quiet; the behavior/enable
service; a behavior that raises is reported and the engine goes on; the console
script starts and stops cleanly. Every wait is bounded; deadlines are generous upper
bounds, never timings."""

from __future__ import annotations

import gc
import math
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

from dependencies import require
from processes import TellsItsLog, project_executable, stop_process
import yaml

rclpy = require("rclpy")

from action_msgs.msg import GoalStatus, GoalStatusArray  # noqa: E402
from cozmo_interfaces.action import TurnInPlace  # noqa: E402
from cozmo_interfaces.msg import BehaviorStatus, EmotionState, LinkStatus  # noqa: E402
from cozmo_interfaces.srv import SetEmergencyStop  # noqa: E402
from geometry_msgs.msg import Twist  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.logging import LoggingSeverity  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import (QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy,  # noqa: E402
                       qos_profile_action_status_default)
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import SetBool  # noqa: E402

from ros_harness import CONNECT_TIMEOUT, DISCOVERY_TIMEOUT, RosHarness, qos_event_handlers  # noqa: E402
from cozmo_driver.ros import behavior_node  # noqa: E402
from cozmo_driver.ros.behavior_node import BehaviorNode  # noqa: E402
from cozmo_driver.ros.driver_node import CozmoDriverNode  # noqa: E402
from cozmo_driver.sim import SimServer  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: bound on waiting for a reaction and its effect on the robot (they take 0.1-3 s)
REACTION_TIMEOUT = 20.0
#: no activities: only reactions run, so that each one can be told apart
QUIET = {"activities": None}


def red(state) -> int:
    """The red channel (0..31) of a protocol LightState's on colour (RGB555)."""
    return (int(state.on_color) >> 10) & 31


def green(state) -> int:
    return (int(state.on_color) >> 5) & 31


class Stack(RosHarness):
    """SimServer + driver + behavior node + a probe node on one executor."""

    spin_timeout = 0.01

    def __init__(self, context, tmp_path: Path, config: Optional[Dict[str, Any]] = None,
                 params: Optional[Dict[str, Any]] = None, seed: int = 1) -> None:
        self.context = context
        self.sim = SimServer(port=0, seed=seed).start()
        self.driver = self.behavior = self.probe = None
        try:
            self.driver = CozmoDriverNode(context=context, parameter_overrides=[
                Parameter("robot_ip", value="127.0.0.1"), Parameter("robot_port", value=self.sim.address[1]),
                Parameter("camera_enabled", value=False)])
            overrides = [Parameter("start_delay", value=0.0), Parameter("seed", value=seed)]
            if config is not None:
                path = tmp_path / "behavior.yaml"
                path.write_text(yaml.safe_dump(config))
                overrides.append(Parameter("config_file", value=str(path)))
            for name, value in (params or {}).items():
                overrides.append(Parameter(name, value=value))
            self.behavior = BehaviorNode(context=context, parameter_overrides=overrides)
            super().__init__(context, "behavior_probe", nodes=(self.driver, self.behavior))
            self.statuses: List[BehaviorStatus] = self.listen(None, BehaviorStatus, "behavior/status", QoSProfile(
                depth=100, reliability=QoSReliabilityPolicy.RELIABLE,
                durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
            self.emotions: List[EmotionState] = self.listen(None, EmotionState, "behavior/emotions", 100)
            assert self.driver.start()
            assert self.until(lambda: self.driver.connected and self.behavior.engine.state.connected,
                              CONNECT_TIMEOUT), "the driver or the behavior engine did not connect"
        except BaseException:
            self.close()
            raise

    def until(self, predicate: Callable[[], Any], timeout: float) -> bool:
        return self.spin_until(predicate, timeout)

    def last(self) -> BehaviorStatus:
        """The latest status received (an empty one before the first)."""
        return self.statuses[-1] if self.statuses else BehaviorStatus()

    def saw(self, behavior: str, reason: str) -> bool:
        return any(s.behavior == behavior and s.reason == reason for s in self.statuses)

    def reaction(self, behavior: str, trigger: str, effect: Callable[[], Any], what: str) -> None:
        """Wait (bounded) for ``behavior`` to run as the reaction to ``trigger`` and for its
        effect on the simulated robot."""
        assert self.until(lambda: self.saw(behavior, f"reaction to {trigger}"), REACTION_TIMEOUT), \
            f"{trigger}: {behavior} did not start; last status {self.last()}"
        assert self.until(effect, REACTION_TIMEOUT), f"{trigger} -> {behavior}: {what} did not reach the robot"
        assert self.until(lambda: self.behavior.engine.running != behavior, REACTION_TIMEOUT), \
            f"{behavior} did not end"
        assert self.statuses and not self.behavior.engine.errors, list(self.behavior.engine.errors)

    def count(self, command: str) -> int:
        return self.sim.command_counts().get(command, 0)

    def trigger_publisher(self):
        """A publisher of behavior/trigger that the behavior node takes from."""
        pub = self.probe.create_publisher(String, "behavior/trigger", 10)
        assert self.until(lambda: pub.get_subscription_count() > 0, DISCOVERY_TIMEOUT)
        return pub

    def wait_service(self, client) -> None:
        assert self.until(client.service_is_ready, DISCOVERY_TIMEOUT), "service not available"

    def close(self) -> None:
        if self.probe is not None:         # the harness is up: it closes and destroys the nodes
            super().close()
        else:
            for node in (self.behavior, self.driver):
                if node is not None:
                    node.close()
                    node.destroy_node()
        self.sim.stop()


def test_robot_events_lead_to_their_reactions(rclpy_context, tmp_path):
    stack = Stack(rclpy_context, tmp_path, QUIET)
    sim = stack.sim
    try:
        assert stack.until(lambda: stack.emotions, DISCOVERY_TIMEOUT)
        # poke: a happy wiggle (calm is at rest, above grumpy)
        anims = stack.count("StartAnimation")
        sim.poke()
        stack.reaction("react_to_poke", "poked", lambda: stack.count("StartAnimation") > anims,
                       "an animation")
        # the backpack button: greet, head up
        anims = stack.count("StartAnimation")
        sim.press_button()
        stack.reaction("greet", "button_pressed",
                       lambda: stack.count("StartAnimation") > anims and sim.head_angle() > 0.4,
                       "the head up and the greet animation")
        # picked up: the lift rises and the head looks up; put down: a nod
        sim.pick_up()
        assert stack.until(lambda: stack.saw("react_to_pickup", "reaction to picked_up"), REACTION_TIMEOUT)
        assert stack.until(lambda: sim.lift_height() > 50.0 and sim.head_angle() > 0.4, REACTION_TIMEOUT), \
            "picked up: the lift and head did not move"
        assert not stack.saw("react_to_cliff", "reaction to cliff_detected")   # a lifted robot's cliff
        assert stack.behavior.engine.running == "react_to_pickup"               # it waits while held
        anims = stack.count("StartAnimation")
        sim.put_down()
        stack.reaction("react_to_put_down", "put_down", lambda: stack.count("StartAnimation") > anims,
                       "the nod")
        assert any(s.last_behavior == "react_to_pickup" and s.last_outcome == "succeeded"
                   for s in stack.statuses)
        # a fall: an alarm sound through audio/pcm
        audio = stack.count("OutputAudio")
        sim.fall(duration=0.5)
        stack.reaction("react_to_fall", "falling", lambda: stack.count("OutputAudio") > audio + 5,
                       "the alarm sound")
        # a face seen (posted by a detector on behavior/trigger): greet again
        pub = stack.trigger_publisher()
        anims = stack.count("StartAnimation")
        pub.publish(String(data="face_seen"))
        stack.reaction("greet", "face_seen", lambda: stack.count("StartAnimation") > anims, "the greeting")
        # the emotions moved with all that
        last = {e.name: e.value for e in stack.emotions[-1].emotions}
        assert set(last) == {"happy", "confident", "social", "stimulated", "calm"}
        assert last["social"] > 0.2 and last["calm"] < 0.3
    finally:
        stack.close()


def test_cliff_charger_and_low_battery_reactions(rclpy_context, tmp_path):
    stack = Stack(rclpy_context, tmp_path, QUIET)
    sim = stack.sim
    try:
        # at the table's edge (x 600 mm), facing it: the front cliff sensors see the drop
        sim.teleport(575.0, 0.0, 0.0)
        paths = stack.count("ExecutePath")
        stack.reaction("react_to_cliff", "cliff_detected",
                       lambda: stack.count("ExecutePath") > paths and sim.true_pose()[0] < 560.0,
                       "the back-off")
        assert sim.true_pose()[0] > 450.0   # backed off a few centimetres, still on the table
        # on the charger: it goes to sleep, head down, breathing blue backpack
        sim.set_on_charger(True)
        assert stack.until(lambda: stack.saw("sleep_on_charger", "reaction to on_charger"), REACTION_TIMEOUT)
        assert stack.until(lambda: sim.head_angle() < -0.3, REACTION_TIMEOUT), "the head did not go down"
        assert stack.until(lambda: sim.lights()["backpack"]["middle"].on_color & 0x1F > 0, REACTION_TIMEOUT), \
            "no blue backpack light"
        middle = sim.lights()["backpack"]["middle"]   # breathing: fading in and out, 1 s each
        assert (middle.transition_on_frames, middle.transition_off_frames) == (34, 34), middle
        assert (middle.on_frames, middle.off_frames) == (0, 0), middle
        assert stack.behavior.engine.running == "sleep_on_charger"
        # no driving on the charger: nothing that moves the treads reached the robot
        wheels = stack.count("DriveWheels") + stack.count("ExecutePath") + stack.count("TurnInPlace")
        stack.spin_for(1.0)
        assert stack.count("ExecutePath") + stack.count("TurnInPlace") + stack.count("DriveWheels") == wheels
        # off the charger: it wakes
        sim.set_on_charger(False)
        assert stack.until(lambda: stack.behavior.engine.running is None, REACTION_TIMEOUT)
        # a low battery: sad, red backpack
        sim.call(lambda: setattr(sim.robot.model, "soc", 0.05))
        stack.reaction("low_battery_sad", "low_battery",
                       lambda: red(sim.lights()["backpack"]["front"]) > 10, "the red backpack lights")
        assert stack.behavior.engine.state.battery_low
    finally:
        stack.close()


def test_light_periods_stay_within_what_the_lights_take():
    """A blink or breath of a long period keeps each half at 7.65 s, the longest a LightState
    takes (the driver would clamp it with a warning at every command); a breath fades."""
    from cozmo_driver.ros.behavior_node import _light

    blink = _light((0.0, 0.0, 1.0), 20.0)
    assert (blink.on_period, blink.off_period) == (pytest.approx(7.65), pytest.approx(7.65))
    assert blink.transition_on_period == blink.transition_off_period == 0.0
    breath = _light((0.0, 0.0, 1.0), 2.0, fade=True)
    assert (breath.on_period, breath.off_period) == (0.0, 0.0)
    assert breath.transition_on_period == breath.transition_off_period == pytest.approx(1.0)
    assert _light(None, 2.0) == _light(None, 0.0)   # off is off


def test_a_tapped_cube_is_celebrated(rclpy_context, tmp_path):
    stack = Stack(rclpy_context, tmp_path, QUIET)
    sim = stack.sim
    try:
        assert stack.until(lambda: sim.object_ids().get(1) is not None, REACTION_TIMEOUT), \
            "cube1 was not connected by the driver"
        anims = stack.count("StartAnimation")
        assert sim.tap_cube(1)
        stack.reaction("celebrate_cube", "cube_tapped",
                       lambda: stack.count("StartAnimation") > anims
                       and any(green(s) > 20 for s in sim.lights()["cubes"][1]),
                       "the cube's green lights and the celebration")
        assert stack.behavior.engine.state.last_tap.name == "cube1"
        # its lights are put out when the celebration ends
        assert stack.until(lambda: all(int(s.on_color) == 0 for s in sim.lights()["cubes"][1]),
                           REACTION_TIMEOUT)
    finally:
        stack.close()


def test_emotions_are_published_and_decay(rclpy_context, tmp_path):
    config = {"activities": None,
              "emotions": {"social": {"half_life": 2.0}},
              "emotion_events": {"poked": {"social": 0.8}}}
    stack = Stack(rclpy_context, tmp_path, config, {"emotions_rate": 10.0})
    try:
        assert stack.until(lambda: stack.emotions, DISCOVERY_TIMEOUT)
        stack.sim.poke()

        def social(msg):
            return {e.name: e.value for e in msg.emotions}["social"]

        assert stack.until(lambda: social(stack.emotions[-1]) > 0.5, REACTION_TIMEOUT)
        peak = max(stack.emotions, key=social)
        t_peak = peak.header.stamp.sec + peak.header.stamp.nanosec * 1e-9
        assert stack.until(lambda: social(stack.emotions[-1]) < 0.2, REACTION_TIMEOUT), "social did not decay"
        later = stack.emotions[-1]
        dt = later.header.stamp.sec + later.header.stamp.nanosec * 1e-9 - t_peak
        # exponential with a half-life of 2 s (stamps of the publisher; 0.1 tolerance)
        assert social(later) == pytest.approx(social(peak) * 0.5 ** (dt / 2.0), abs=0.1)
    finally:
        stack.close()


def test_user_commands_pause_the_engine(rclpy_context, tmp_path):
    stack = Stack(rclpy_context, tmp_path, None, {"user_pause": 6.0})
    sim = stack.sim
    engine = stack.behavior.engine
    try:
        # the activities run behaviors that use the driver's actions: its own goals never pause it
        assert stack.until(lambda: engine.behaviors_started >= 2, 3 * REACTION_TIMEOUT)
        assert not any(s.paused and s.pause_reason != "the robot is not connected" for s in stack.statuses)
        assert stack.until(lambda: engine.running is not None, REACTION_TIMEOUT)
        running = engine.running
        pub = stack.probe.create_publisher(Twist, "cmd_vel", 1)
        assert stack.until(lambda: pub.get_subscription_count() >= 2, DISCOVERY_TIMEOUT)
        pub.publish(Twist())
        assert stack.until(lambda: stack.last().paused, REACTION_TIMEOUT)
        status = stack.last()
        assert status.pause_reason == "cmd_vel" and status.behavior == ""
        assert status.last_behavior == running
        assert status.last_outcome == "interrupted: paused by a user command (cmd_vel)"
        # nothing from the engine during the pause (after the stop of what it started)
        stack.spin_for(1.0)
        before = {k: v for k, v in sim.command_counts().items() if k != "DriveWheels"}
        started = engine.behaviors_started
        # watched for 3 s, the counts first, then the pause: the pause (6 s) ends by itself, and
        # a machine that stalled through it legitimately started a behavior before the counts
        # were read; counts read while the engine is still paused are ones it cannot have moved
        checks = 0
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            stack.spin_for(0.1)
            after = {k: v for k, v in sim.command_counts().items() if k != "DriveWheels"}
            now_started = engine.behaviors_started
            if not engine.paused(time.monotonic()):
                break
            assert after == before and now_started == started, "the engine acted during the pause"
            checks += 1
        assert checks >= 5, f"the pause was watched {checks} times only"
        # then it goes on by itself
        assert stack.until(lambda: engine.behaviors_started > started, REACTION_TIMEOUT)
        assert not stack.last().paused or stack.until(lambda: not stack.last().paused, 5.0)
        # a goal of a driver action that is not the engine's pauses it too, as long as it runs
        client = ActionClient(stack.probe, TurnInPlace, "turn_in_place")
        assert stack.until(client.server_is_ready, DISCOVERY_TIMEOUT)
        future = client.send_goal_async(TurnInPlace.Goal(angle=math.pi, speed=1.0))
        assert stack.until(lambda: stack.last().paused, REACTION_TIMEOUT)
        assert stack.last().pause_reason == "action turn_in_place"
        assert engine.running is None
        assert stack.until(future.done, REACTION_TIMEOUT)
        result = future.result().get_result_async()
        assert stack.until(result.done, REACTION_TIMEOUT)
        assert result.result().result.success, "the user's turn was disturbed"
        client.destroy()
    finally:
        stack.close()


#: behavior/status's pause_reason after the emergency stop's release, until behavior/enable true
RELEASED = "the emergency stop was released: call behavior/enable true to start behaviors again"
#: behavior/enable true's answer (and log line) under the emergency stop: the call does not count
UNDER_THE_STOP = ("enabled, but the emergency stop is engaged: nothing runs; once it is released, "
                  "call behavior/enable true again to start behaviors")


def test_the_emergency_stop_holds_the_engine_still(rclpy_context, tmp_path, rclpy_log):
    """The driver's emergency stop (its service, from another node): the engine stops what
    runs and starts nothing while it is engaged, nor after its release until behavior/enable
    true (or the parameter enabled set to true, although it is true); behavior/status says
    why. Before, the activities went on starting behaviors whose goals the driver refused,
    every few seconds, and went on driving start_delay after the release. behavior/enable's
    answer says what the call did: one under the stop sets the parameter but does not count
    (before, it answered a bare "enabled"), one after the release lifts the hold."""
    stack = Stack(rclpy_context, tmp_path, None)
    engine = stack.behavior.engine

    def stop(engage: bool) -> None:
        assert stack.call(SetEmergencyStop, "emergency_stop", SetEmergencyStop.Request(engage=engage)).success

    try:
        assert stack.until(lambda: engine.behaviors_started >= 1, 3 * REACTION_TIMEOUT)
        stop(True)
        assert stack.until(lambda: stack.last().pause_reason == "the emergency stop is engaged",
                           REACTION_TIMEOUT), stack.last()
        assert stack.last().paused and stack.last().pause_remaining == 0.0
        assert engine.running is None
        started, failed = engine.behaviors_started, engine.behaviors_failed
        stack.spin_for(6.0)   # three times freeplay's idle_between
        assert (engine.behaviors_started, engine.behaviors_failed) == (started, failed)
        answer = stack.call(SetBool, "behavior/enable", SetBool.Request(data=True))
        assert (answer.success, answer.message) == (True, UNDER_THE_STOP)
        assert rclpy_log.said(stack.behavior, LoggingSeverity.INFO, UNDER_THE_STOP)
        stop(False)
        assert stack.until(lambda: stack.last().pause_reason == RELEASED, REACTION_TIMEOUT), stack.last()
        assert stack.last().paused and stack.last().enabled
        assert rclpy_log.said(stack.behavior, LoggingSeverity.INFO, "emergency stop released: nothing "
                              "starts until behavior/enable true is called")
        stack.spin_for(4.0)   # past start_delay and twice freeplay's idle_between
        assert (engine.behaviors_started, engine.behaviors_failed) == (started, failed)
        answer = stack.call(SetBool, "behavior/enable", SetBool.Request(data=True))
        assert (answer.success, answer.message) == (True, "enabled: the emergency stop's release holds "
                                                          "the engine no more")
        assert stack.until(lambda: engine.behaviors_started > started, REACTION_TIMEOUT)
        assert not stack.last().paused or stack.until(lambda: not stack.last().paused, 5.0)
        # the parameter set to true again (ros2 param set) lifts it too
        stop(True)
        assert stack.until(lambda: stack.last().pause_reason == "the emergency stop is engaged",
                           REACTION_TIMEOUT), stack.last()
        stop(False)
        assert stack.until(lambda: stack.last().pause_reason == RELEASED, REACTION_TIMEOUT), stack.last()
        started = engine.behaviors_started
        assert stack.behavior.set_parameters([Parameter("enabled", value=True)])[0].successful
        assert stack.until(lambda: engine.behaviors_started > started, REACTION_TIMEOUT)
        # switched off, so that the goals it sent end before the stack closes
        assert stack.call(SetBool, "behavior/enable", SetBool.Request(data=False)).success
        assert stack.until(lambda: engine.running is None, REACTION_TIMEOUT)
        stack.spin_for(1.0)
    finally:
        stack.close()


def test_an_inactive_driver_holds_the_engine_still(rclpy_context, tmp_path):
    """The driver deactivated (as `ros2 lifecycle set /cozmo_driver deactivate` does): it
    refuses every command, and link_status says so; the engine stops what runs and starts
    nothing until the driver is active again. Before, a behavior started and failed at
    every idle_between, each failure warned about and counted against the mood."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    stack = Stack(rclpy_context, tmp_path, None)
    engine = stack.behavior.engine
    links = stack.listen("links", LinkStatus, "link_status", QoSProfile(
        depth=10, reliability=QoSReliabilityPolicy.RELIABLE,
        durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))

    def change(transition: int) -> None:
        request = ChangeState.Request()
        request.transition.id = transition
        assert stack.call(ChangeState, "cozmo_driver/change_state", request).success

    try:
        # deactivated while a goal of the engine's runs: the driver aborts it ("the driver was
        # deactivated"), after link_status said driver_active false: the behavior is
        # interrupted, not failed (nor counted against the mood)
        assert stack.until(lambda: links and engine.robot.goals_in_flight() > 0, 3 * REACTION_TIMEOUT)
        assert links[-1].driver_active
        failed = engine.behaviors_failed
        change(Transition.TRANSITION_DEACTIVATE)
        assert stack.until(lambda: not links[-1].driver_active, REACTION_TIMEOUT)
        assert links[-1].state == LinkStatus.CONNECTED   # the link is kept
        assert stack.until(
            lambda: stack.last().pause_reason == "the driver is inactive (lifecycle)",
            REACTION_TIMEOUT), stack.last()
        assert stack.last().paused and engine.running is None
        stack.spin_for(0.5)   # the aborted goal's result is in
        assert engine.behaviors_failed == failed, engine.last_outcome
        started = engine.behaviors_started
        stack.spin_for(6.0)   # three times freeplay's idle_between
        assert (engine.behaviors_started, engine.behaviors_failed) == (started, failed)
        change(Transition.TRANSITION_ACTIVATE)
        assert stack.until(lambda: links[-1].driver_active, REACTION_TIMEOUT)
        assert stack.until(lambda: engine.behaviors_started > started, REACTION_TIMEOUT)
        assert engine.behaviors_failed == failed
        # switched off, so that the goals it sent end before the stack closes
        assert stack.call(SetBool, "behavior/enable", SetBool.Request(data=False)).success
        assert stack.until(lambda: engine.running is None, REACTION_TIMEOUT)
        stack.spin_for(1.0)
    finally:
        stack.close()


def test_posted_triggers_run_reactions_but_change_no_robot_state(rclpy_context, tmp_path,
                                                                  rclpy_log):
    """A name posted on behavior/trigger runs its reaction, but only the driver says whether
    the robot is picked up: a posted picked_up held the engine idle until a put_down that
    the robot never sent. An unknown name is refused with a warning naming the known ones
    (it was ignored without a word)."""
    stack = Stack(rclpy_context, tmp_path, QUIET)
    engine = stack.behavior.engine
    try:
        pub = stack.trigger_publisher()
        pub.publish(String(data="picked_up"))
        assert stack.until(lambda: stack.saw("react_to_pickup", "reaction to picked_up"),
                           REACTION_TIMEOUT), stack.last()
        assert not engine.state.picked_up
        pub.publish(String(data="nosuch_trigger"))
        assert stack.until(lambda: rclpy_log.said(
            stack.behavior, LoggingSeverity.WARN, "behavior/trigger: 'nosuch_trigger' is no "
            "reaction's trigger and no emotion event: ignored (known: "), 5.0)
        line = next(line.message for line in rclpy_log.of(stack.behavior, LoggingSeverity.WARN)
                    if "nosuch_trigger" in line.message)
        assert "face_seen" in line and "picked_up" in line, line
        # an empty name, over and over: one warning every 2 s (it was one per message)
        for _ in range(5):
            pub.publish(String(data=""))
        empty = lambda: [m for m in rclpy_log.of(stack.behavior, LoggingSeverity.WARN)  # noqa: E731
                         if "an empty trigger name is ignored" in m.message]
        assert stack.until(empty, 5.0)
        stack.spin_for(0.5)
        assert len(empty()) == 1, empty()
        # the reaction's goals end before the stack closes (an execute coroutine left pending
        # at the close is a RuntimeWarning)
        assert stack.until(lambda: engine.running is None, REACTION_TIMEOUT)
        stack.spin_for(0.5)
    finally:
        stack.close()


def test_enable_disable_and_a_behavior_that_raises(rclpy_context, tmp_path):
    config = {"activities": None,
              "behaviors": {"raiser": {"class": "behavior_fakes:RaisingBehavior"}},
              "reactions": {"explode": {"behavior": "raiser", "priority": 30}}}
    stack = Stack(rclpy_context, tmp_path, config)
    engine = stack.behavior.engine
    try:
        pub = stack.trigger_publisher()
        pub.publish(String(data="explode"))
        assert stack.until(lambda: stack.last().last_outcome == "error: RuntimeError: boom in tick",
                           REACTION_TIMEOUT), stack.last()
        assert stack.last().last_behavior == "raiser" and stack.last().behaviors_failed == 1
        assert "behavior_fakes.py" in engine.errors[-1]
        # the engine goes on
        anims = stack.count("StartAnimation")
        stack.sim.poke()
        assert stack.until(lambda: stack.saw("react_to_poke", "reaction to poked"), REACTION_TIMEOUT)
        assert stack.until(lambda: stack.count("StartAnimation") > anims, REACTION_TIMEOUT)
        # disabled: what runs stops, nothing starts; enabled again: reactions are back
        client = stack.probe.create_client(SetBool, "behavior/enable")
        stack.wait_service(client)
        future = client.call_async(SetBool.Request(data=False))
        assert stack.until(future.done, REACTION_TIMEOUT) and future.result().success
        assert stack.until(lambda: not stack.last().enabled, REACTION_TIMEOUT)
        assert stack.behavior.get_parameter("enabled").value is False
        assert engine.running is None
        stack.sim.press_button()
        stack.spin_for(1.5)
        assert not stack.saw("greet", "reaction to button_pressed")
        future = client.call_async(SetBool.Request(data=True))
        assert stack.until(future.done, REACTION_TIMEOUT) and future.result().success
        stack.sim.press_button()
        assert stack.until(lambda: stack.saw("greet", "reaction to button_pressed"), REACTION_TIMEOUT)
        # the parameter does the same
        stack.behavior.set_parameters([Parameter("enabled", value=False)])
        assert stack.until(lambda: not stack.last().enabled, REACTION_TIMEOUT)
        refused = stack.behavior.set_parameters([Parameter("tick_rate", value=20.0)])[0]
        assert not refused.successful and "read-only" in refused.reason  # read at start-up
    finally:
        stack.close()


def test_the_console_script_stops_what_it_started(rclpy_context, tmp_path):
    """The node as its own process drives the simulated robot through the in-process
    driver; SIGTERM cancels its goal (the treads stop long before the drive would
    have ended) and the process exits 0. A bad configuration exits 2 naming the key."""
    exe = project_executable("cozmo_behavior_node")
    bad = tmp_path / "bad.yaml"
    bad.write_text("behaviors: {explore: {max_duration: soon}}\n")
    failed = subprocess.run([str(exe), "--ros-args", "-p", f"config_file:={bad}"],
                            capture_output=True, text=True, timeout=60)
    assert failed.returncode == 2
    assert "behaviors.explore.max_duration: expected a number, got 'soon'" in failed.stderr
    # one long slow drive: 30 cm at 2 cm/s
    config = tmp_path / "drive.yaml"
    config.write_text(yaml.safe_dump({"activities": {"freeplay": {"behaviors": {
        "look_around": None, "get_bored": None, "happy_dance": None}}},
        "behaviors": {"explore": {"params": {"legs": 1, "leg_m": 0.3, "speed": 0.02}}}}))
    sim = SimServer(port=0, seed=2).start()
    # a namespace of its own: the nodes of the tests before it (and the refused process
    # above) may linger in the ROS graph for a moment, and the node's name guard refuses to
    # run beside a /cozmo_behavior
    ns = "console_script"
    driver = CozmoDriverNode(context=rclpy_context, namespace=ns, parameter_overrides=[
        Parameter("robot_ip", value="127.0.0.1"), Parameter("robot_port", value=sim.address[1]),
        Parameter("camera_enabled", value=False)])
    probe = rclpy.create_node("behavior_script_probe", namespace=ns, context=rclpy_context)
    statuses: List[BehaviorStatus] = []
    probe.create_subscription(BehaviorStatus, "behavior/status", statuses.append, QoSProfile(
        depth=10, reliability=QoSReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(driver)
    executor.add_node(probe)

    def until(predicate, timeout):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return False
            executor.spin_once(timeout_sec=0.02)
        return True

    proc = subprocess.Popen([str(exe), "--ros-args", "-r", f"__ns:=/{ns}",
                             "-p", f"config_file:={config}", "-p", "start_delay:=0.0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    try:
        with TellsItsLog(proc, "the behavior node"):
            assert driver.start()
            assert until(lambda: driver.connected, CONNECT_TIMEOUT)
            assert until(lambda: statuses and statuses[-1].behavior == "explore", DISCOVERY_TIMEOUT), \
                statuses[-1] if statuses else "no status"
            assert until(lambda: min(sim.wheel_speeds()) > 10.0, REACTION_TIMEOUT), "it did not drive"
        start_x = sim.true_pose()[0]
        proc.send_signal(signal.SIGTERM)
        assert until(lambda: proc.poll() is not None, 20.0), "the node did not exit"
        out, err = proc.communicate(timeout=10.0)
        assert proc.returncode == 0 and "Traceback" not in err, err
        assert until(lambda: sim.wheel_speeds() == (0.0, 0.0), 5.0), "the treads did not stop"
        assert sim.true_pose()[0] - start_x < 150.0   # far from the 30 cm of the goal
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        driver.close()
        executor.shutdown(timeout_sec=1.0)
        driver.destroy_node()
        probe.destroy_node()
        sim.stop()


class _LinkStandIn:
    """A stand-in for a driver's link_status (latched), published every second as the driver
    does (a silent one is taken for a gone driver); ``gone()``: what the graph shows of a
    crashed driver."""

    def __init__(self, spin) -> None:
        self.probe = spin.probe
        self.pub = spin.probe.create_publisher(LinkStatus, "link_status", QoSProfile(
            depth=1, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
        self.timer = spin.probe.create_timer(1.0, self.publish)
        self.publish()

    def publish(self) -> None:
        self.pub.publish(LinkStatus(state=LinkStatus.CONNECTED, driver_active=True))

    def gone(self) -> None:
        self.probe.destroy_timer(self.timer)
        self.probe.destroy_publisher(self.pub)


def test_a_node_with_no_driver_says_so_once_and_then_says_the_robot_connected(rclpy_context, rclpy_log,
                                                                            monkeypatch):
    """Started without a driver (or in another namespace than the driver's), the node printed
    its start line and nothing else while nothing ran. After a short while with no
    link_status it says so, once; the connection that follows is said too."""
    monkeypatch.setattr(behavior_node, "NO_LINK_STATUS_S", 0.5)
    behavior = BehaviorNode(context=rclpy_context, namespace="nowhere", parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False)])
    spin = RosHarness(rclpy_context, "link_stand_in", namespace="nowhere", nodes=(behavior,))
    said = "the robot is not connected (no /nowhere/link_status from the driver yet: is cozmo_driver running"
    try:
        assert spin.spin_until(lambda: rclpy_log.said(behavior, LoggingSeverity.WARN, said), 3.0)
        spin.spin_for(1.5)
        assert sum(said in line.message for line in rclpy_log.of(behavior)) == 1
        link = spin.probe.create_publisher(LinkStatus, "link_status", QoSProfile(
            depth=1, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
        link.publish(LinkStatus(state=LinkStatus.CONNECTED, driver_active=True))
        assert spin.spin_until(lambda: behavior.engine.state.connected, DISCOVERY_TIMEOUT)
        assert rclpy_log.said(behavior, LoggingSeverity.INFO, "the robot is connected: the engine goes on")
    finally:
        spin.close()


def test_a_driver_gone_without_a_word_stops_the_engine(rclpy_context, rclpy_log):
    """A driver that crashed says nothing on link_status: the engine takes its publisher's
    going (the graph) for the link's end, within about its status period, instead of
    starting behaviours that time out or fail one after the other."""
    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False)])
    spin = RosHarness(rclpy_context, "link_stand_in", nodes=(behavior,))
    try:
        link = _LinkStandIn(spin)
        assert spin.spin_until(lambda: behavior.engine.state.connected, DISCOVERY_TIMEOUT)
        spin.spin_for(1.5)
        assert behavior.engine.state.connected  # a publisher that is there keeps it so
        link.gone()
        assert spin.spin_until(lambda: not behavior.engine.state.connected, 5.0)
        assert rclpy_log.said(behavior, LoggingSeverity.WARN, "/link_status has no publisher any more")
    finally:
        spin.close()


def test_a_killed_drivers_goals_are_given_up_and_the_next_driver_is_taken(rclpy_context, rclpy_log, tmp_path):
    """A driver process killed while the engine's goal ran on it (a slow explore drive): the
    node kept waiting on the goal's handle, its behavior 'running', for as long as the graph
    still listed the dead process's publishers (its DDS lease, about 20 s), and kept the handle
    for good afterwards. Its link_status, which a live driver publishes every second, now
    stopping is enough: the goal is given up, with a warning saying so, and a driver started
    again is taken, the engine driving the robot through it."""
    exe = project_executable("cozmo_driver_node")
    config = tmp_path / "drive.yaml"
    config.write_text(yaml.safe_dump({"activities": {"freeplay": {"behaviors": {
        "look_around": None, "get_bored": None, "happy_dance": None}}},
        "behaviors": {"explore": {"params": {"legs": 1, "leg_m": 0.3, "speed": 0.02}}}}))
    sim = SimServer(port=0, seed=2).start()
    ns = "killed_driver"   # (a namespace of its own, as the console script's test)
    behavior = BehaviorNode(context=rclpy_context, namespace=ns, parameter_overrides=[
        Parameter("start_delay", value=2.0), Parameter("config_file", value=str(config))])
    spin = RosHarness(rclpy_context, "killed_driver_probe", namespace=ns, nodes=(behavior,))
    engine, robot = behavior.engine, behavior.robot
    logs: List[Path] = []

    def driver() -> subprocess.Popen:
        logs.append(tmp_path / f"driver{len(logs)}.log")
        with open(logs[-1], "w") as out:
            return subprocess.Popen([str(exe), "--ros-args", "-r", f"__ns:=/{ns}", "-p", "robot_ip:=127.0.0.1",
                                     "-p", f"robot_port:={sim.address[1]}", "-p", "camera_enabled:=false"],
                                    stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))

    def driving() -> bool:
        return engine.running == "explore" and robot.goals_in_flight() > 0 and min(sim.wheel_speeds()) > 10.0

    procs = [driver()]
    try:
        assert spin.spin_until(driving, CONNECT_TIMEOUT + REACTION_TIMEOUT), \
            (engine.status(time.monotonic()), logs[-1].read_text())
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(timeout=10.0)
        gone = f"no /{ns}/link_status for 5 s (the driver publishes it every second): the driver is gone"
        assert spin.spin_until(lambda: rclpy_log.said(behavior, LoggingSeverity.WARN, gone), 30.0), \
            [line.message for line in rclpy_log.of(behavior)]
        assert rclpy_log.said(behavior, LoggingSeverity.WARN, "1 goal(s) given up, their results will not "
                                                              "come (drive_straight)")
        assert robot.goals_in_flight() == 0
        assert spin.spin_until(lambda: engine.running is None, 1.0)
        assert not engine.state.connected and engine.last_behavior == "explore"
        # a driver again: the engine drives the robot through it
        procs.append(driver())
        assert spin.spin_until(lambda: engine.state.connected, CONNECT_TIMEOUT), logs[-1].read_text()
        assert rclpy_log.said(behavior, LoggingSeverity.INFO, f"/{ns}/link_status is back")
        assert spin.spin_until(driving, CONNECT_TIMEOUT + REACTION_TIMEOUT), \
            (engine.status(time.monotonic()), logs[-1].read_text())
        assert not engine.errors, list(engine.errors)
    finally:
        spin.close()
        for proc in procs:
            stop_process(proc)
        sim.stop()


#: only explore in free play: it drives (head, lift, then a drive_straight goal)
EXPLORE_ONLY = {"activities": {"freeplay": {"behaviors": {"look_around": None, "get_bored": None,
                                                          "happy_dance": None}}},
                "behaviors": {"explore": {"params": {"legs": 1, "leg_m": 0.3, "speed": 0.02}}}}


def test_the_first_goals_wait_for_the_drivers_action_servers(rclpy_context, rclpy_log, tmp_path):
    """With start_delay 0, a node started beside a connected driver (another process) began its
    first behavior as soon as the driver's link_status came, often before it had discovered
    the driver's action servers (some 100s of ms later): each goal failed at once ("the driver's
    action server is not available"), and explore with them (counted failed, not chosen again for
    5 s). (Sent then, a goal is lost: no answer ever comes.) The goals now wait for their server
    and go out once it is there: the first behavior drives the robot, nothing failed. A node is
    started again (at most 5 times) until one had to wait, the case this is about."""
    exe = project_executable("cozmo_driver_node")
    config = tmp_path / "drive.yaml"
    config.write_text(yaml.safe_dump(EXPLORE_ONLY))
    sim = SimServer(port=0, seed=2).start()
    ns = "early_goals"
    with open(tmp_path / "driver.log", "w") as out:
        proc = subprocess.Popen([str(exe), "--ros-args", "-r", f"__ns:=/{ns}", "-p", "robot_ip:=127.0.0.1",
                                 "-p", f"robot_port:={sim.address[1]}", "-p", "camera_enabled:=false"],
                                stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
    watch = None
    try:
        watch = RosHarness(rclpy_context, "early_goals_watch", namespace=ns)
        links = watch.listen(None, LinkStatus, "link_status", QoSProfile(
            depth=1, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
        connected = watch.spin_until(lambda: links and links[-1].state == LinkStatus.CONNECTED, CONNECT_TIMEOUT)
        # the goals of a node before: the next would take one still running for a user's, and pause
        statuses = [watch.listen(None, GoalStatusArray, f"{action}/_action/status", qos_profile_action_status_default)
                    for action in ("drive_straight", "set_head_angle", "set_lift_height")]

        def goals_over() -> bool:
            return not any(status.status in (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING,
                                             GoalStatus.STATUS_CANCELING)
                           for box in statuses if box for status in box[-1].status_list)

        assert connected, (tmp_path / "driver.log").read_text()
        for _ in range(5):
            assert watch.spin_until(goals_over, REACTION_TIMEOUT), statuses
            behavior = BehaviorNode(context=rclpy_context, namespace=ns, parameter_overrides=[
                Parameter("start_delay", value=0.0), Parameter("config_file", value=str(config))])
            spin = RosHarness(rclpy_context, "early_goals_probe", namespace=ns, nodes=(behavior,))
            engine, robot = behavior.engine, behavior.robot

            def driving() -> bool:
                return engine.running == "explore" and robot.goals_in_flight() > 0 and min(sim.wheel_speeds()) > 10.0

            try:
                assert spin.spin_until(lambda: driving() or engine.behaviors_failed,
                                       CONNECT_TIMEOUT + REACTION_TIMEOUT), engine.status(time.monotonic())
                messages = [line.message for line in rclpy_log.of(behavior)]
                assert engine.behaviors_failed == 0 and engine.behaviors_started == 1, messages
                assert not any("not available" in m or "did not appear" in m for m in messages), messages
                assert not engine.errors, list(engine.errors)
            finally:
                spin.close()
            if any("waiting for the driver's action server" in m for m in messages):
                break
    finally:
        if watch is not None:
            watch.close()
        stop_process(proc)
        sim.stop()


def _holding_server(probe, action_type, name: str):
    """A stand-in for one of the driver's action servers: it accepts every goal and holds it."""
    from rclpy.action import ActionServer
    from rclpy.task import Future

    async def hold(goal_handle):
        await Future()   # never done: the goal runs until the server goes
        return action_type.Result()

    return ActionServer(probe, action_type, name, execute_callback=hold)


def _looking_around(rclpy_context, tmp_path, ns: str):
    """A behavior node in ``ns`` (start_delay 0, freeplay without explore, get_bored and
    happy_dance) and a harness spinning it, no driver: (node, harness)."""
    config = tmp_path / "look.yaml"
    config.write_text(yaml.safe_dump({"activities": {"freeplay": {"behaviors": {
        "explore": None, "get_bored": None, "happy_dance": None}}}}))
    behavior = BehaviorNode(context=rclpy_context, namespace=ns, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("config_file", value=str(config))])
    return behavior, RosHarness(rclpy_context, f"{ns}_probe", namespace=ns, nodes=(behavior,))

def test_a_goal_waits_for_its_server_and_is_given_up_when_the_server_goes(rclpy_context, rclpy_log, tmp_path):
    """A goal for an action server the node has not discovered waits for it (said once), and
    goes out once it is there. An action server gone while the driver's link_status goes on
    left the goals sent to it waiting for good: they are given up, said, at the node's next
    check (every second)."""
    from cozmo_interfaces.action import SetHeadAngle

    ns = "server_goes"
    behavior, spin = _looking_around(rclpy_context, tmp_path, ns)
    robot = behavior.robot
    try:
        _LinkStandIn(spin)
        waits = f"set_head_angle: waiting for the driver's action server /{ns}/set_head_angle (not discovered yet)"
        assert spin.spin_until(lambda: rclpy_log.said(behavior, LoggingSeverity.INFO, waits), DISCOVERY_TIMEOUT), \
            [line.message for line in rclpy_log.of(behavior)]
        assert behavior.engine.running == "look_around" and robot.goals_sent() == 1
        server = _holding_server(spin.probe, SetHeadAngle, "set_head_angle")
        assert spin.spin_until(lambda: robot.goals_in_flight() == 1, DISCOVERY_TIMEOUT), \
            [line.message for line in rclpy_log.of(behavior)]
        assert sum(waits in line.message for line in rclpy_log.of(behavior)) == 1
        server.destroy()
        gone = (f"the driver's action server /{ns}/set_head_angle is gone (no longer on the graph): 1 goal(s) "
                "given up, their results will not come (set_head_angle)")
        assert spin.spin_until(lambda: rclpy_log.said(behavior, LoggingSeverity.WARN, gone), DISCOVERY_TIMEOUT), \
            [line.message for line in rclpy_log.of(behavior)]
        assert robot.goals_in_flight() == 0
        assert behavior.engine.state.connected   # the driver is not taken for gone
        assert not behavior.engine.errors, list(behavior.engine.errors)
    finally:
        spin.close()


def test_a_goal_whose_server_never_comes_fails_saying_so(rclpy_context, rclpy_log, tmp_path, monkeypatch):
    """A goal whose action server is not there within SERVER_WAIT_S fails, with a warning that
    says which server and what to look at; nothing of it is left waiting."""
    monkeypatch.setattr(behavior_node, "SERVER_WAIT_S", 0.5)
    ns = "no_server"
    behavior, spin = _looking_around(rclpy_context, tmp_path, ns)
    try:
        _LinkStandIn(spin)
        failed = (f"set_head_angle: the driver's action server /{ns}/set_head_angle did not appear within 0.5 s "
                  "(is the driver running, in this namespace?): the goal failed")
        assert spin.spin_until(lambda: rclpy_log.said(behavior, LoggingSeverity.WARN, failed), DISCOVERY_TIMEOUT), \
            [line.message for line in rclpy_log.of(behavior)]
        assert spin.spin_until(lambda: behavior.robot.goals_sent() == 0, REACTION_TIMEOUT)
        assert not behavior.engine.errors, list(behavior.engine.errors)
    finally:
        spin.close()


def test_the_node_runs_under_use_sim_time_with_no_clock(rclpy_context):
    """use_sim_time set and no /clock published: ROS time stands still, and the node's
    timers (the engine's ticks, behavior/emotions, behavior/status), made on its clock,
    never fired. They run on the steady clock, as the engine's own time does; the stamps
    stay ROS time."""
    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False),
        Parameter("emotions_rate", value=10.0), Parameter("use_sim_time", value=True)])
    spin = RosHarness(rclpy_context, "sim_time_probe", nodes=(behavior,))
    try:
        emotions = spin.listen(None, EmotionState, "behavior/emotions", QoSProfile(depth=100))
        assert spin.spin_until(lambda: len(emotions) >= 5, DISCOVERY_TIMEOUT), len(emotions)
        assert all(m.header.stamp.sec == 0 and m.header.stamp.nanosec == 0 for m in emotions)
    finally:
        spin.close()


def _user_goal_status(spin, action: str = "go_to_pose"):
    """A stand-in for a driver's ``<action>/_action/status`` (latched, as an action
    server's) that says a goal of the user's (an id the engine did not send) is EXECUTING."""
    from action_msgs.msg import GoalInfo, GoalStatus, GoalStatusArray
    from rclpy.qos import qos_profile_action_status_default
    from unique_identifier_msgs.msg import UUID

    pub = spin.probe.create_publisher(GoalStatusArray, f"{action}/_action/status",
                                      qos_profile_action_status_default)
    goal = GoalStatus(goal_info=GoalInfo(goal_id=UUID(uuid=list(os.urandom(16)))),
                      status=GoalStatus.STATUS_EXECUTING)
    pub.publish(GoalStatusArray(status_list=[goal]))
    return pub


def test_a_users_goal_holds_the_engine_and_is_forgotten_when_its_driver_is_gone(rclpy_context):
    """A user's goal holds the engine while it runs, even with user_pause 0 (an activity's
    behavior started during it before: the node told the engine at every tick with the tick's
    own time, and a pause of 0 s ended as it began). A driver that crashed during the goal
    never says it ended, and a driver started again says nothing of it (its action server
    publishes a status only when its own goals change): the goal is forgotten once its
    status has no publisher (and at once when link_status loses its publisher), where the
    engine stayed paused ("action go_to_pose") for good."""
    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("user_pause", value=0.0)])
    spin = RosHarness(rclpy_context, "goal_stand_in", nodes=(behavior,))
    engine = behavior.engine

    def user_paused() -> bool:
        return engine.paused(time.monotonic()) and engine.status(time.monotonic()).pause_reason == \
            "action go_to_pose"
    try:
        link = _LinkStandIn(spin)
        assert spin.spin_until(lambda: engine.state.connected, DISCOVERY_TIMEOUT)
        status = _user_goal_status(spin)
        assert spin.spin_until(user_paused, DISCOVERY_TIMEOUT), engine.status(time.monotonic())
        for _ in range(3):   # behaviors would start (and fail: no driver here) if it were not held
            behavior._on_trigger(String(data="poked"))
            spin.spin_for(1.0)
        assert user_paused() and engine.behaviors_started == 0, engine.status(time.monotonic())
        # the status's publisher gone (the link's kept): the goal is forgotten
        spin.probe.destroy_publisher(status)
        assert spin.spin_until(lambda: not engine.paused(time.monotonic()), 5.0), \
            engine.status(time.monotonic())
        # the driver crashed: link_status has no publisher; its status publisher is back at once
        status = _user_goal_status(spin)
        assert spin.spin_until(user_paused, DISCOVERY_TIMEOUT)
        link.gone()
        assert spin.spin_until(lambda: not engine.state.connected, 5.0)
        assert spin.spin_until(lambda: not engine.paused(time.monotonic()), 1.0), \
            engine.status(time.monotonic())   # at the next tick
        # the driver started again: the engine goes on
        started = engine.behaviors_started
        link = _LinkStandIn(spin)
        assert spin.spin_until(lambda: engine.state.connected, DISCOVERY_TIMEOUT)
        assert spin.spin_until(lambda: engine.behaviors_started > started, 5.0), \
            engine.status(time.monotonic())
    finally:
        spin.close()


def test_the_status_snapshot_takes_no_cliff_from_a_robot_off_its_treads(rclpy_context):
    """The status's cliff flag is set while the robot is picked up or lies (no floor under
    the sensor); the driver's cliff events come only from an edge under a robot on its
    treads, so after a snapshot of a lifted robot no CLIFF_CLEARED came once it was put
    down, and explore never started (its can_start refuses at a cliff)."""
    from cozmo_interfaces.msg import RobotStatus
    from cozmo_driver.behavior.behaviors import Explore
    from cozmo_driver.behavior.behavior import BehaviorContext

    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False)])
    engine = behavior.engine
    try:
        behavior._on_status(RobotStatus(cliff_detected=True, is_picked_up=True,
                                        orientation=RobotStatus.ORIENTATION_IN_AIR))
        assert engine.state.picked_up and not engine.state.cliff
        engine.on_trigger("put_down", 1.0)    # the driver's event once it is put down
        explore = Explore("explore")
        assert explore.can_start(BehaviorContext(explore, behavior.robot, engine.state,
                                                 lambda name: 0.0, 1.0, random.Random(0)))
        behavior._on_status(RobotStatus(cliff_detected=True, orientation=RobotStatus.ORIENTATION_ON_BACK))
        assert engine.state.lying and not engine.state.cliff
        behavior._on_status(RobotStatus(cliff_detected=True, is_picked_up=True,
                                        orientation=RobotStatus.ORIENTATION_ON_TREADS))
        assert not engine.state.cliff
        # on its treads, set down: the flag is the edge of the floor
        behavior._on_status(RobotStatus(cliff_detected=True, orientation=RobotStatus.ORIENTATION_ON_TREADS))
        assert engine.state.cliff and not engine.state.lying and not engine.state.picked_up
    finally:
        behavior.close()
        behavior.destroy_node()


def test_an_unknown_trigger_held_back_is_said_when_no_other_comes(rclpy_context, rclpy_log):
    """Two unknown trigger names within 2 s: the second, held back by the first's warning,
    is said by the node's 1 s status timer once the 2 s are over (it waited for a next
    unknown name, which may never come)."""
    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False)])
    spin = RosHarness(rclpy_context, "trigger_probe", nodes=(behavior,))
    try:
        behavior._on_trigger(String(data="nosuch_one"))
        behavior._on_trigger(String(data="nosuch_two"))

        def warned():
            return [line.message for line in rclpy_log.of(behavior, LoggingSeverity.WARN)
                    if "is no reaction's trigger" in line.message]
        assert len(warned()) == 1 and "'nosuch_one'" in warned()[0], warned()
        assert spin.spin_until(lambda: len(warned()) == 2, 5.0), warned()
        assert "'nosuch_two'" in warned()[1], warned()
    finally:
        spin.close()


def test_a_misspelt_trigger_and_a_bad_sound_are_said(rclpy_context, rclpy_log, tmp_path):
    """A reaction to `pickedup` (picked_up meant) would fire only from behavior/trigger: said
    at start-up with the name meant; a name of one's own is not. A sound whose synth spec is
    wrong is said once, by the spec: the behavior playing it may not look at its outcome."""
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump({"reactions": {
        "pickedup": {"behavior": "greet"}, "my_own_signal": {"behavior": "greet"}}}))
    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False),
        Parameter("config_file", value=str(config))])
    try:
        said = [line.message for line in rclpy_log.of(behavior, LoggingSeverity.WARN)]
        assert said == ["reactions.pickedup: 'pickedup' is no trigger of the robot's events (did "
                        "you mean 'picked_up'?): only a post on behavior/trigger starts it"], said
        for _ in range(2):
            handle = behavior.robot.play_sound("synth:chrip(600, 1200, 0.3)")
            assert handle.done and handle.status == handle.FAILED
        said = [line.message for line in rclpy_log.of(behavior, LoggingSeverity.WARN)]
        assert len(said) == 2 and said[1].startswith(
            "sound 'synth:chrip(600, 1200, 0.3)' not played: "), said
    finally:
        behavior.close()
        behavior.destroy_node()


def test_a_long_sound_reaches_the_driver_whole_and_ahead_of_its_playing(rclpy_context):
    """A synth sound of 30 s (the longest a part may be) went out in one go: 300 chunks of
    0.1 s on audio/pcm, reliable with depth 100, of which a subscriber taking them after
    the burst (the driver in one process with this node, on one executor) kept the last 100:
    the robot played 10 s of it, and the handle said played. The chunks go out at each tick
    instead, a little ahead of their playing: every sample arrives, in bursts well within
    the depth and never behind the robot's playing; the handle is done when the sound is."""
    from cozmo_driver.anim.clip import SAMPLE_RATE, synthesize
    from cozmo_driver.ros.qos import QOS_STREAM

    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False)])
    try:
        robot = behavior.robot
        bursts: List[List[Any]] = [[]]

        class Recorder:
            def publish(self, msg) -> None:
                bursts[-1].append(msg)

        robot._audio = Recorder()
        spec = "synth:tone(440, 30)"
        start = time.monotonic()
        handle = robot.play_sound(spec)
        t, ahead = start, []
        while t < start + 31.0:       # ticks at 10 Hz (their time given: none waited for)
            t += 0.1
            bursts.append([])
            robot.finish_sounds(t)
            sent = sum(len(msg.samples) for burst in bursts for msg in burst) / SAMPLE_RATE
            if sent < 30.0:
                ahead.append(start + sent - t)   # queued beyond what the robot has played
            if t < start + 29.9:
                assert not handle.done, (t - start, handle)
        assert handle.ok
        assert max(len(burst) for burst in bursts) <= QOS_STREAM.depth // 4, [len(b) for b in bursts]
        assert [s for burst in bursts for msg in burst for s in msg.samples] == synthesize(spec).tolist()
        assert min(ahead) >= 0.5, min(ahead)
    finally:
        behavior.close()
        behavior.destroy_node()


def test_a_cancelled_sound_sends_no_more_and_the_next_plays_whole(rclpy_context):
    """A behavior's end cancels its sound: what is out plays, the rest is not sent; a sound
    played after it goes out whole and is done when it has played."""
    from cozmo_driver.anim.clip import SAMPLE_RATE, synthesize

    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False)])
    try:
        robot = behavior.robot
        sent: List[Any] = []

        class Recorder:
            def publish(self, msg) -> None:
                sent.append(msg)

        robot._audio = Recorder()
        start = time.monotonic()
        long = robot.play_sound("synth:tone(440, 20)")
        robot.finish_sounds(start + 1.0)
        long.cancel()
        out = sum(len(msg.samples) for msg in sent)
        assert 2.0 * SAMPLE_RATE <= out <= 3.1 * SAMPLE_RATE, out / SAMPLE_RATE
        short = robot.play_sound("synth:tone(880, 0.5)")
        t = start + 1.0
        while t < start + 25.0:
            t += 0.1
            robot.finish_sounds(t)
        after = [s for msg in sent for s in msg.samples][out:]
        assert after == synthesize("synth:tone(880, 0.5)").tolist()       # none of the rest of the long one
        assert long.done and not long.ok and short.ok
    finally:
        behavior.close()
        behavior.destroy_node()


def test_cmd_vel_of_another_type_is_said(rclpy_context, rclpy_log):
    """A TwistStamped teleop where the engine takes Twist (no driver seen): the engine (and a
    driver of its setting) never sees that user drive; said once, with what to set: the
    publisher, or the driver's cmd_vel_stamped (the bring-up gives the engine the driver's)."""
    from geometry_msgs.msg import TwistStamped

    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False)])
    spin = RosHarness(rclpy_context, "cmd_vel_typer", nodes=(behavior,))
    # another process's publisher (one participant takes a topic name of one type only)
    other = rclpy.Context()
    rclpy.init(context=other)
    try:
        spin.spin_for(1.5)   # its own Twist subscription alone: nothing said
        assert not rclpy_log.of(behavior, LoggingSeverity.WARN)
        teleop = rclpy.create_node("stamped_teleop", context=other)
        teleop.create_publisher(TwistStamped, "cmd_vel", 10)

        def said():  # (but that no link_status came, NO_LINK_STATUS_S after the start)
            return [line.message for line in rclpy_log.of(behavior, LoggingSeverity.WARN)
                    if not line.message.startswith("the robot is not connected (no /link_status")]
        assert spin.spin_until(lambda: said(), 3.0 + behavior_node.TYPE_CHECK_S), said()
        assert said() == ["/cmd_vel has a publisher of geometry_msgs/msg/TwistStamped, which neither "
                          "this node takes (cmd_vel_stamped False: geometry_msgs/msg/Twist) nor a "
                          "driver of the same setting: it cannot see that user drive. Set that "
                          "publisher to geometry_msgs/msg/Twist, or cmd_vel_stamped True on the "
                          "driver (the bring-up gives this node the driver's)"]
        spin.spin_for(behavior_node.TYPE_CHECK_S + 1.0)
        assert len(said()) == 1
    finally:
        spin.close()
        other.try_shutdown()


def test_cmd_vel_of_the_driver_of_another_type_is_said(rclpy_context, rclpy_log):
    """cmd_vel_stamped set on the driver only (the engine started without the bring-up): the
    driver's cmd_vel subscription (on its cmd_vel thread's node) has another type than the
    engine's, which then never sees a user drive: the engine's cmd_vel_stamped is to be set."""
    from geometry_msgs.msg import TwistStamped

    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False)])
    spin = RosHarness(rclpy_context, "cmd_vel_driver_typer", nodes=(behavior,))
    other = rclpy.Context()
    rclpy.init(context=other)
    try:
        driver = rclpy.create_node("cozmo_driver", context=other)
        driver.create_publisher(LinkStatus, "link_status", 1)
        thread_node = rclpy.create_node("_cozmo_driver_cmd_vel", context=other)
        thread_node.create_subscription(TwistStamped, "cmd_vel", lambda _: None, 10)

        def said():  # (but that no link_status came, NO_LINK_STATUS_S after the start)
            return [line.message for line in rclpy_log.of(behavior, LoggingSeverity.WARN)
                    if not line.message.startswith("the robot is not connected (no /link_status")]
        assert spin.spin_until(lambda: said(), 3.0 + behavior_node.TYPE_CHECK_S), said()
        assert said() == ["/cmd_vel: the driver /cozmo_driver takes geometry_msgs/msg/TwistStamped, and "
                          "this node geometry_msgs/msg/Twist (cmd_vel_stamped False): it cannot see a "
                          "user drive. Set cmd_vel_stamped as the driver's, in the cozmo_behavior "
                          "section"]
    finally:
        spin.close()
        other.try_shutdown()


def test_start_up_parameters_are_read_only_for_the_parameter_tools(rclpy_context):
    """`ros2 param describe` shows which parameters change at run time: those read at
    start-up only are read-only (as the face node's), so a user learns it before a set is
    refused; the run-time ones are not."""
    from cozmo_driver.behavior.parameters import BEHAVIOR_PARAMETERS
    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0), Parameter("enabled", value=False)])
    try:
        for spec in BEHAVIOR_PARAMETERS:
            descriptor = behavior.describe_parameter(spec.name)
            assert descriptor.read_only is (not spec.dynamic), spec.name
            assert descriptor.description.endswith("; read at start-up") is (not spec.dynamic), \
                (spec.name, descriptor.description)
        refused = behavior.set_parameters([Parameter("tick_rate", value=20.0)])[0]
        assert not refused.successful and "read-only" in refused.reason, refused.reason
        assert behavior.get_parameter("tick_rate").value == 10.0
        assert behavior.set_parameters([Parameter("user_pause", value=5.0)])[0].successful
    finally:
        behavior.close()
        behavior.destroy_node()


def test_a_whole_number_for_a_double_parameter_is_taken_as_that_double(rclpy_context):
    """ros2 param set /cozmo_behavior user_pause 5 (or -p tick_rate:=20) was refused by rclpy
    ("Wrong parameter type, expected 'Type.DOUBLE'"): a whole number is now taken as that
    double, the parameter staying a double; a string for it says what it takes."""
    from rcl_interfaces.msg import Parameter as ParameterMsg, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from rclpy.exceptions import ParameterException
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0), Parameter("tick_rate", value=20), Parameter("enabled", value=False)])
    probe = Node("whole_numbers_probe", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    try:
        assert behavior.get_parameter("tick_rate").type_ == Parameter.Type.DOUBLE
        assert behavior.get_parameter("tick_rate").value == 20.0
        executor.add_node(behavior)
        executor.add_node(probe)
        client = probe.create_client(SetParameters, "/cozmo_behavior/set_parameters")
        results = []
        for value in (ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=5),
                      ParameterValue(type=ParameterType.PARAMETER_STRING, string_value="long")):
            future = client.call_async(SetParameters.Request(parameters=[ParameterMsg(name="user_pause", value=value)]))
            executor.spin_until_future_complete(future, timeout_sec=10.0)
            assert future.done(), "no answer from /cozmo_behavior/set_parameters"
            results.append(future.result().results[0])
        assert results[0].successful, results[0].reason
        assert behavior.get_parameter("user_pause").type_ == Parameter.Type.DOUBLE
        assert behavior.get_parameter("user_pause").value == 5.0
        assert not results[1].successful and results[1].reason == (
            "Wrong parameter type: user_pause is a double parameter, e.g. 5.0 (a whole number is taken "
            "too); got 'long', a string"), results[1].reason
    finally:
        executor.shutdown()
        probe.destroy_node()
        behavior.close()
        behavior.destroy_node()
    with pytest.raises(ParameterException) as refused:
        BehaviorNode(context=rclpy_context, parameter_overrides=[Parameter("tick_rate", value="fast")])
    assert str(refused.value).startswith("Wrong parameter type: tick_rate is a double parameter, e.g. "
                                         "-p tick_rate:=10.0"), str(refused.value)


def test_no_qos_event_handlers_burden_the_executor(rclpy_context):
    """The behavior node's ~20 publishers and subscriptions come without rclpy's default QoS
    event handlers (entities that every executor wake-up checks: in one process with the
    driver, every wake-up of the stack's executor): it has no more of them than a bare node
    (rclpy's own /rosout publisher ...)."""
    import rclpy

    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0)])
    bare = rclpy.create_node("bare", context=rclpy_context)
    try:
        assert len(list(behavior.subscriptions)) >= 10 and len(list(behavior.publishers)) >= 8
        assert qos_event_handlers(behavior) == qos_event_handlers(bare)
    finally:
        behavior.close()
        behavior.destroy_node()
        bare.destroy_node()


def _gone_from_graph(watcher, name: str, timeout: float) -> bool:
    """Whether ``name`` leaves ``watcher``'s view of the graph within ``timeout``."""
    executor = SingleThreadedExecutor(context=watcher.context)
    executor.add_node(watcher)
    try:
        deadline = time.monotonic() + timeout
        while name in {n for n, _ in watcher.get_node_names_and_namespaces()}:
            if time.monotonic() > deadline:
                return False
            executor.spin_once(timeout_sec=0.05)
        return True
    finally:
        executor.shutdown(timeout_sec=1.0)


def test_a_destroyed_behavior_node_leaves_the_graph_at_once(rclpy_context):
    """Its action clients go with it. rclpy's destroy_node leaves a node's action clients,
    each holds the node's rcl handle, and with them the node stayed in the graph without
    its publishers until a garbage collection: 30 s and more for the tests after it,
    whose by-node queries found nothing. The collector is off here, as it may be then."""
    watcher = rclpy.create_node("graph_watch", context=rclpy_context)
    behavior = BehaviorNode(context=rclpy_context, parameter_overrides=[
        Parameter("start_delay", value=0.0)])
    assert len(list(behavior.waitables)) >= 5, "the test needs the node's action clients"
    assert not _gone_from_graph(watcher, "cozmo_behavior", 0.2), "the node never showed"
    gc.disable()
    try:
        behavior.destroy_node()
        del behavior
        assert _gone_from_graph(watcher, "cozmo_behavior", 5.0), "destroyed, still in the graph"
    finally:
        gc.enable()
        watcher.destroy_node()


def test_a_refused_node_takes_its_action_clients_with_it(rclpy_context):
    """destroyed_if_refused: the half-made node leaves the graph at once, action clients
    made before the refusal included."""
    from rclpy.node import Node

    from cozmo_driver.ros._entry import destroyed_if_refused

    watcher = rclpy.create_node("graph_watch", context=rclpy_context)
    gc.disable()
    try:
        node = Node("refused_with_a_client", context=rclpy_context)
        with pytest.raises(RuntimeError, match="refused"):
            with destroyed_if_refused(node):
                ActionClient(node, TurnInPlace, "turn_in_place")
                raise RuntimeError("refused")
        del node
        assert _gone_from_graph(watcher, "refused_with_a_client", 5.0), "refused, still in the graph"
    finally:
        gc.enable()
        watcher.destroy_node()
