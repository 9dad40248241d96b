"""``cozmo_behavior_node``: the behavior engine as a ROS 2 node (node ``cozmo_behavior``).

Glue between :class:`~cozmo_driver.behavior.engine.Engine` and the driver's
public interfaces only (topics, services, actions; names relative to the
node's namespace, like the driver's), so it may run in another process or on
another machine.

Inputs:

* ``events`` (RobotEvent) -> triggers (``cliff_detected``, ``picked_up``, ...)
  and the robot's state after them; ``status`` (RobotStatus) -> the robot's
  state once per connection (it streams at ~33 Hz: the node unsubscribes after
  the first message, the events report every change after it); ``battery_state``
  (BatteryState: ``percentage``) -> ``low_battery``; ``link_status`` -> whether
  the robot is connected and the driver active (lifecycle), and, silent for
  ``LINK_SILENT_S`` or without a publisher, that the driver is gone (its goals given up); ``emergency_stop/engaged``
  (std_msgs/Bool) -> nothing runs while the driver's emergency stop is engaged, nor after its
  release until ``behavior/enable`` true (or the ``enabled`` parameter set to true, again);
  ``object_events`` (ObjectEvent TAPPED) -> ``cube_tapped``; ``behavior/trigger``
  (std_msgs/String) -> any named trigger (``face_seen`` from a face detector);
* user commands, which pause the engine for ``user_pause``: every message on
  ``cmd_vel``, ``head/angle``, ``lift/height``, ``head/velocity`` and
  ``lift/velocity`` (the engine never publishes on them), and every active goal
  of the driver's actions that is not one of the engine's own (read from each
  action's ``<action>/_action/status``; the engine sends its goals with goal
  ids it chose, so it knows them): paused while it runs, and ``user_pause`` after;
  forgotten when that status has no publisher any more, or the driver is gone (it crashed).

Outputs: goals of the driver's actions (``drive_straight``, ``turn_in_place``,
``set_head_angle``, ``set_lift_height``, ``play_animation``; each sent once its server is
discovered, up to ``SERVER_WAIT_S``, and given up when that server leaves the graph),
``face/expression``
and ``face/look_at`` (for ``cozmo_face_node``), ``backpack_light_pattern`` (or
``backpack_lights`` where no driver subscribes to patterns), ``object_lights``,
the ``play_light_animation`` service, synthesized sounds on ``audio/pcm`` (a few chunks
at each tick, up to ``_AUDIO_LEAD_S`` ahead of their playing);
``behavior/emotions`` (EmotionState, at ``emotions_rate`` and on every change),
``behavior/status`` (BehaviorStatus, transient local, on every change and at
1 Hz); the ``behavior/enable`` service (std_srvs/SetBool).

Everything runs on one executor thread (timers, subscriptions, goal futures),
so the engine needs no lock. On shutdown the running behavior is stopped and
its goals cancelled (which stops the motors they move).
"""

from __future__ import annotations

import math
import sys
import time
import uuid
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Sequence, Set, Tuple

import rclpy
from action_msgs.msg import GoalStatus, GoalStatusArray
from cozmo_interfaces.action import (DriveStraight, PlayAnimation, SetHeadAngle, SetLiftHeight,
                                     TurnInPlace)
from cozmo_interfaces.msg import (AudioChunk, BackpackLightPattern, BackpackLights,
                                  BehaviorStatus, Emotion, EmotionState, HeadAngle, LiftHeight,
                                  LightState, LinkStatus, ObjectEvent, ObjectLights, RobotEvent,
                                  RobotStatus)
from cozmo_interfaces.srv import PlayLightAnimation
from geometry_msgs.msg import Point, Twist, TwistStamped
from rcl_interfaces.msg import (FloatingPointRange, IntegerRange, ParameterDescriptor,
                                SetParametersResult)
from rclpy.action import ActionClient
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_action_status_default
from sensor_msgs.msg import BatteryState
from std_msgs.msg import Bool, ColorRGBA, Float64, String
from std_srvs.srv import SetBool
from unique_identifier_msgs.msg import UUID

from ..behavior.behavior import Handle, RobotInterface
from ..behavior.config import ConfigError, builtin_still_animations, load_config
from ..behavior.engine import Engine
from ..behavior.parameters import BEHAVIOR_PARAMETERS, USER_ACTIONS, USER_TOPICS
from ..behavior.reactions import ROBOT_EVENT_TRIGGERS, TRIGGERS
from ..lifeline import exit_with_parent
from ..log_throttle import LogThrottle
from ._entry import (DoubleParameters, destroy_waitables, destroyed_if_refused, init, make_node, spin_node,
                     unknown_parameters)
from .usage import answer_help
from . import qos
from .qos import QOS_EVENTS, QOS_LATCHED, QOS_LATEST, QOS_QUEUE, QOS_STATE, QOS_STREAM, QOS_WATCH, UNKNOWN_NODE
from .serialized import twist_type
from .steady import steady_timer

__all__ = ["BehaviorNode", "RosRobot", "main", "state_flags"]

#: RobotStatus orientations in which the robot lies (RobotState.lying)
_LYING = (RobotStatus.ORIENTATION_ON_BACK, RobotStatus.ORIENTATION_ON_FACE,
          RobotStatus.ORIENTATION_ON_LEFT_SIDE, RobotStatus.ORIENTATION_ON_RIGHT_SIDE)

_ACTIVE_GOAL = (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING, GoalStatus.STATUS_CANCELING)
#: own goal ids remembered (the oldest forgotten first)
_OWN_GOALS_KEPT = 512
_AUDIO_CHUNK_S = 0.1
#: how far ahead of its playing a sound's chunks go out (s), a few at each tick: more than a
#: tick at the slowest tick_rate (1 Hz), and a burst (20 chunks) well within audio/pcm's depth
#: of 100, which a sound sent in one go (300 chunks for 30 s) overflowed
_AUDIO_LEAD_S = 2.0
_SOUND_CACHE = 32
#: the largest value of a uint32 goal field (PlayAnimation.loops)
_UINT32_MAX = 2**32 - 1
#: with no link_status for this long from the start, the node says that it has no driver, s
NO_LINK_STATUS_S = 5.0
#: a driver publishes link_status every second for as long as it lives: silent this long, it
#: is taken for gone (killed, crashed), sooner than the graph says so (a killed process's
#: publishers stay in it for its DDS lease, about 20 s), s
LINK_SILENT_S = 5.0
#: a goal whose action server this node has not discovered yet waits for it this long, then
#: fails (a request sent before then is lost: no answer ever comes); the driver's servers are
#: discovered some 100s of ms after its link_status, s
SERVER_WAIT_S = 10.0


def _publisher(node: Node, msg_type: Any, topic: str, profile: Any) -> Any:
    """A publisher without rclpy's default QoS event handlers (:mod:`.qos`: each is an entity
    that every executor wake-up checks; in one process with the driver, every wake-up of
    the stack's executor). Not overridable: this node declares no ``qos_overrides``."""
    return qos.create_publisher(node, msg_type, topic, profile, overridable=False)


#: how often the node looks whether cmd_vel has another type on the graph than its own, s
TYPE_CHECK_S = 5.0


def _subscription(node: Node, msg_type: Any, topic: str, callback: Any, profile: Any) -> Any:
    """A subscription without QoS event handlers (see :func:`_publisher`)."""
    return qos.create_subscription(node, msg_type, topic, callback, profile, overridable=False)


def _color(rgb: Optional[Sequence[float]]) -> ColorRGBA:
    if rgb is None:
        return ColorRGBA()
    r, g, b = (min(1.0, max(0.0, float(c))) for c in rgb)
    return ColorRGBA(r=r, g=g, b=b, a=1.0)


#: the longest period of a LightState (255 frames of 30 ms: LightState.msg)
_LIGHT_PERIOD_MAX_S = 7.65


def _light(rgb: Optional[Sequence[float]], blink_period: float, fade: bool = False) -> LightState:
    """An LED steady in ``rgb``, or on and off over ``blink_period`` (s): each half at most
    the longest period the lights have; ``fade``: fading in and out (breathing) instead."""
    state = LightState(on_color=_color(rgb), off_color=ColorRGBA())
    if rgb is not None and blink_period > 0:
        half = float(min(_LIGHT_PERIOD_MAX_S, blink_period / 2.0))
        if fade:
            state.transition_on_period = state.transition_off_period = half
        else:
            state.on_period = state.off_period = half
    return state


def state_flags(msg: RobotStatus) -> Dict[str, bool]:
    """The engine's level flags (:meth:`Engine.on_state`) from the driver's status. ``cliff``
    is the edge of the floor under a robot on its treads, as the driver's CLIFF_DETECTED and
    CLIFF_CLEARED events say: the status's flag is also set while the robot is picked up or
    lies, and no CLIFF_CLEARED would follow it once it is put down (``explore`` would never
    start)."""
    on_treads = msg.orientation == RobotStatus.ORIENTATION_ON_TREADS and not msg.is_picked_up
    return {"on_charger": msg.is_on_charger, "charging": msg.is_charging,
            "cliff": msg.cliff_detected and on_treads, "picked_up": msg.is_picked_up,
            "falling": msg.is_falling, "lying": msg.orientation in _LYING}


def misspelt_triggers(config: Any) -> List[str]:
    """A warning for each reaction whose trigger is not one the node produces but is close
    to one (``pickedup``, ``cube_taped``): it would fire only when posted on behavior/trigger.
    Names of one's own, or the app's, are far from them and pass without a word."""
    import difflib

    out = []
    for reaction in config.reactions:
        name = reaction.trigger
        close = [] if name in TRIGGERS else difflib.get_close_matches(name, list(TRIGGERS), 1, 0.8)
        if close:
            out.append(f"reactions.{name}: {name!r} is no trigger of the robot's events (did you "
                       f"mean {close[0]!r}?): only a post on behavior/trigger starts it")
    return out


def cmd_vel_type_warning(node: Node, stamped: bool) -> Optional[str]:
    """What to say when cmd_vel has another type on the graph than ``node``'s (TwistStamped
    when ``stamped``), or None: the driver's subscription of another type (the driver is
    the node publishing link_status, its cmd_vel on its ``_<name>_cmd_vel`` thread node or
    itself) is for the engine's cmd_vel_stamped to follow; a publisher of another type, as
    the bring-up gives the engine the driver's setting, for that publisher or the driver's."""
    topic = node.resolve_topic_name("cmd_vel")
    ours = twist_type(stamped)
    links = node.get_publishers_info_by_topic(node.resolve_topic_name("link_status"))
    subscriptions = [i for i in node.get_subscriptions_info_by_topic(topic) if i.topic_type != ours]
    if any(i.node_name == UNKNOWN_NODE for i in links + subscriptions):
        return None  # not discovered whole yet: the next check tells
    drivers = {(i.node_namespace, name): i.node_name for i in links
               for name in (i.node_name, f"_{i.node_name}_cmd_vel")}
    for info in subscriptions:
        driver = drivers.get((info.node_namespace, info.node_name))
        if driver:
            return (f"{topic}: the driver {info.node_namespace.rstrip('/')}/{driver} takes "
                    f"{info.topic_type}, and this node {ours} (cmd_vel_stamped {stamped}): it cannot "
                    "see a user drive. Set cmd_vel_stamped as the driver's, in the cozmo_behavior section")
    other = sorted({i.topic_type for i in node.get_publishers_info_by_topic(topic) if i.topic_type != ours})
    if not other:
        return None
    counterpart = twist_type(not stamped)
    driver_side = (f", or cmd_vel_stamped {not stamped} on the driver (the bring-up gives this node the "
                   "driver's)") if other == [counterpart] else ""
    return (f"{topic} has a publisher of {', '.join(other)}, which neither this node takes (cmd_vel_stamped "
            f"{stamped}: {ours}) nor a driver of the same setting: it cannot see that user drive. "
            f"Set that publisher to {ours}{driver_side}")


class RosRobot(RobotInterface):
    """The engine's commands as the driver's actions, topics and services."""

    def __init__(self, node: Node, still_animations: Sequence[str]) -> None:
        self.node = node
        self.still_animations = set(still_animations)
        self._clients: Dict[str, ActionClient] = {
            "drive_straight": ActionClient(node, DriveStraight, "drive_straight"),
            "turn_in_place": ActionClient(node, TurnInPlace, "turn_in_place"),
            "set_head_angle": ActionClient(node, SetHeadAngle, "set_head_angle"),
            "set_lift_height": ActionClient(node, SetLiftHeight, "set_lift_height"),
            "play_animation": ActionClient(node, PlayAnimation, "play_animation"),
        }
        self._own: Set[bytes] = set()
        self._own_order: Deque[bytes] = deque()
        self._goal_handles: Dict[int, Any] = {}     # id(handle) -> rclpy ClientGoalHandle
        #: the goals sent whose result has not come, and those waiting for their action server
        #: to be discovered: id(handle) -> handle (give_up_goals)
        self._sent: Dict[int, Handle] = {}
        #: (handle, action, goal, since when) of the goals waiting for their action server (send_waiting)
        self._waiting: List[Tuple[Handle, str, Any, float]] = []
        #: the actions whose server a goal was said to wait for, until it is there
        self._waited: Set[str] = set()
        self._sounds: List[Tuple[Handle, float]] = []
        #: (handle, chunk, last of its sound) of the sounds not published yet, in order; when
        #: the published ones end playing (time.monotonic(), as if the driver played them as
        #: they came). A sound is in _sounds, to be done at its end, once its last chunk is out.
        self._backlog: Deque[Tuple[Handle, Any, bool]] = deque()
        self._published_end = -math.inf
        self._sound_cache: Dict[str, Any] = {}
        self._face = _publisher(node, String, "face/expression", QOS_QUEUE)
        self._look = _publisher(node, Point, "face/look_at", QOS_QUEUE)
        self._backpack = _publisher(node, BackpackLights, "backpack_lights", QOS_QUEUE)
        self._pattern = _publisher(node, BackpackLightPattern, "backpack_light_pattern", QOS_QUEUE)
        self._object_lights = _publisher(node, ObjectLights, "object_lights", QOS_QUEUE)
        self._audio = _publisher(node, AudioChunk, "audio/pcm", QOS_STREAM)
        self._light_service = node.create_client(PlayLightAnimation, "play_light_animation")
        self._warned: Set[str] = set()

    # ------------------------------------------------------------------ own goals

    def is_own_goal(self, goal_id: bytes) -> bool:
        return goal_id in self._own

    def _remember(self, goal_id: bytes) -> None:
        self._own.add(goal_id)
        self._own_order.append(goal_id)
        while len(self._own_order) > _OWN_GOALS_KEPT:
            self._own.discard(self._own_order.popleft())

    def _warn_once(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.node.get_logger().warning(text)

    # ------------------------------------------------------------------ goals

    def _goal(self, action: str, goal: Any, kind: str) -> Handle:
        handle = Handle(action, kind, canceller=self._cancel)
        self._sent[id(handle)] = handle
        if self._clients[action].server_is_ready():
            self._send(handle, action, goal)
            return handle
        # sent now, before the server is discovered, the request would be lost: it waits
        self._waiting.append((handle, action, goal, time.monotonic()))
        if action not in self._waited:
            self._waited.add(action)
            self.node.get_logger().info(
                f"{action}: waiting for the driver's action server {self.node.resolve_topic_name(action)} "
                f"(not discovered yet): the goal goes out once it is there (at most {SERVER_WAIT_S:g} s)")
        return handle

    def _send(self, handle: Handle, action: str, goal: Any) -> None:
        goal_id = UUID(uuid=list(uuid.uuid4().bytes))
        self._remember(bytes(goal_id.uuid))
        future = self._clients[action].send_goal_async(goal, goal_uuid=goal_id)
        future.add_done_callback(lambda f, h=handle: self._on_goal_response(h, f))

    def send_waiting(self, now: float) -> None:
        """At each tick: the goals waiting for their action server go out once it is there;
        one cancelled meanwhile is dropped, one that waited SERVER_WAIT_S fails."""
        waiting, self._waiting = self._waiting, []
        for handle, action, goal, since in waiting:
            if handle.done:
                self._sent.pop(id(handle), None)
            elif self._clients[action].server_is_ready():
                self._waited.discard(action)
                self._warned.discard(f"server {action}")
                self._send(handle, action, goal)
            elif now - since >= SERVER_WAIT_S:
                self._sent.pop(id(handle), None)
                name = self.node.resolve_topic_name(action)
                text = (f"{action}: the driver's action server {name} did not appear within {SERVER_WAIT_S:g} s "
                        "(is the driver running, in this namespace?): the goal failed")
                handle.fail(text)
                self._warn_once(f"server {action}", text)
            else:
                self._waiting.append((handle, action, goal, since))

    def _on_goal_response(self, handle: Handle, future) -> None:
        try:
            goal_handle = future.result()
        except Exception as exc:  # noqa: BLE001 - rclpy sets whatever failed; reported on the handle
            self._sent.pop(id(handle), None)
            handle.fail(f"{handle.what}: sending the goal failed: {exc}")
            return
        if goal_handle is None or not goal_handle.accepted:
            self._sent.pop(id(handle), None)
            handle.fail(f"{handle.what}: the driver rejected the goal (its log says why)")
            return
        if handle.done and not handle.cancel_requested:
            return
        handle.accepted()
        self._goal_handles[id(handle)] = goal_handle
        if handle.cancel_requested:
            goal_handle.cancel_goal_async()
        result = goal_handle.get_result_async()
        result.add_done_callback(lambda f, h=handle: self._on_result(h, f))

    def _on_result(self, handle: Handle, future) -> None:
        self._goal_handles.pop(id(handle), None)
        self._sent.pop(id(handle), None)
        try:
            response = future.result()
        except Exception as exc:  # noqa: BLE001 - reported on the handle
            handle.fail(f"{handle.what}: no result: {exc}")
            return
        message = getattr(response.result, "message", "")
        if response.status == GoalStatus.STATUS_SUCCEEDED and getattr(response.result, "success", True):
            handle.succeed(message)
        elif response.status == GoalStatus.STATUS_CANCELED:
            handle.canceled(message or "canceled")
        else:
            handle.fail(f"{handle.what}: {message or 'aborted'}")

    def _cancel(self, handle: Handle) -> None:
        goal_handle = self._goal_handles.get(id(handle))
        if goal_handle is not None:
            goal_handle.cancel_goal_async()
        # a goal not yet accepted is cancelled when its acceptance arrives (cancel_requested)
        handle.canceled("canceled by the behavior engine")

    def cancel_all(self) -> None:
        for goal_handle in list(self._goal_handles.values()):
            goal_handle.cancel_goal_async()

    def goals_in_flight(self) -> int:
        """Goals accepted by the driver whose result has not come yet."""
        return len(self._goal_handles)

    def goals_sent(self) -> int:
        """Goals sent to the driver whose result has not come yet (accepted or not yet), or
        waiting for their action server."""
        return len(self._sent)

    def give_up_goals(self, why: str) -> List[str]:
        """The driver is gone (``why``): the results of the goals sent to it will never come.
        Each goal still running fails with ``why`` (its behavior goes on without waiting), a
        cancel is sent to those accepted (a driver only stalled stops their motion when it
        wakes), and one accepted after this is cancelled then (``cancel_requested``). Returns
        the goals' actions, sorted."""
        self._waiting.clear()
        return self._give_up(list(self._sent), why)

    def _give_up(self, keys: List[int], why: str) -> List[str]:
        actions = []
        for key in keys:
            handle = self._sent.pop(key)
            actions.append(handle.what)
            handle.cancel_requested = True
            goal_handle = self._goal_handles.pop(key, None)
            if goal_handle is not None:
                goal_handle.cancel_goal_async()
            handle.fail(f"{handle.what}: {why}: given up")
        return sorted(actions)

    def give_up_goals_of_gone_servers(self) -> List[Tuple[str, List[str]]]:
        """The goals sent to an action server that is no longer there (off the graph while
        the driver's link_status goes on): their results will never come. Given up as in
        :meth:`give_up_goals`; returns (the server's name, the goals' actions) of each."""
        waiting = {id(entry[0]) for entry in self._waiting}
        by_action: Dict[str, List[int]] = {}
        for key, handle in self._sent.items():
            if key not in waiting:
                by_action.setdefault(handle.what, []).append(key)
        gone = []
        for action, keys in sorted(by_action.items()):
            if not self._clients[action].server_is_ready():
                name = self.node.resolve_topic_name(action)
                gone.append((name, self._give_up(keys, f"the driver's action server {name} is gone")))
        return gone

    # ------------------------------------------------------------------ RobotInterface

    def drive_straight(self, distance: float, speed: float) -> Handle:
        return self._goal("drive_straight", DriveStraight.Goal(distance=float(distance),
                                                               speed=float(speed)), "treads")

    def turn_in_place(self, angle: float, speed: float) -> Handle:
        return self._goal("turn_in_place", TurnInPlace.Goal(angle=float(angle), speed=float(speed)),
                          "treads")

    def set_head_angle(self, angle: float, duration: float = 0.0) -> Handle:
        return self._goal("set_head_angle", SetHeadAngle.Goal(angle=float(angle),
                                                              duration=float(duration)), "head")

    def set_lift_height(self, height: float, duration: float = 0.0) -> Handle:
        return self._goal("set_lift_height", SetLiftHeight.Goal(height=float(height),
                                                                duration=float(duration)), "lift")

    def play_animation(self, name: str = "", group: str = "", loops: int = 1) -> Handle:
        # the goal's field is a uint32: more would wrap (2**32 + 5 played 5 loops) or fail to send;
        # the driver clamps beyond 1000, with its warning
        return self._goal("play_animation", PlayAnimation.Goal(
            name=name, group=group, loops=max(0, min(int(loops), _UINT32_MAX))), "animation")

    def animation_drives(self, name: str, group: str) -> bool:
        return (group or name) not in self.still_animations

    def play_sound(self, spec: str, volume: float = 1.0) -> Handle:
        handle = Handle(f"sound {spec}", "sound")
        pcm = self._sound_cache.get(spec)
        if pcm is None:
            from ..anim.clip import synthesize  # numpy only; imported when first needed

            try:
                pcm = synthesize(spec)
            except ValueError as exc:
                # a behavior may not look at its sound's outcome: said here, once a spec
                self._warn_once(f"sound {spec}", f"sound {spec!r} not played: {exc}")
                handle.fail(str(exc))
                return handle
            if len(self._sound_cache) >= _SOUND_CACHE:
                self._sound_cache.pop(next(iter(self._sound_cache)))
            self._sound_cache[spec] = pcm
        from ..anim.clip import SAMPLE_RATE  # the robot's audio rate

        samples = pcm if volume >= 1.0 else (pcm * max(0.0, float(volume))).astype(pcm.dtype)
        step = int(SAMPLE_RATE * _AUDIO_CHUNK_S)
        starts = range(0, len(samples), step)
        if not starts:  # (synthesize makes none; a sound of no samples has played)
            handle.succeed("played")
            return handle
        self._backlog.extend((handle, samples[start:start + step], start == starts[-1]) for start in starts)
        handle.accepted()
        self._stream(time.monotonic())
        return handle

    def _stream(self, now: float) -> None:
        """Publish the sounds' chunks up to ``_AUDIO_LEAD_S`` ahead of their playing; those
        of a sound cancelled (its behavior ended) are dropped."""
        if not self._backlog:
            return
        from ..anim.clip import SAMPLE_RATE

        while self._backlog and self._published_end - now < _AUDIO_LEAD_S:
            handle, chunk, last = self._backlog.popleft()
            if handle.done:  # cancelled: what is out plays, the rest is not sent
                continue
            self._audio.publish(AudioChunk(sample_rate=SAMPLE_RATE, channels=1, samples=chunk.tolist()))
            self._published_end = max(self._published_end, now) + len(chunk) / SAMPLE_RATE
            if last:
                self._sounds.append((handle, self._published_end))

    def finish_sounds(self, now: float) -> None:
        """At each tick: the sounds' next chunks go out, and sounds are done when their time
        has passed (the driver plays the stream)."""
        self._stream(now)
        if not self._sounds:
            return
        keep = []
        for handle, end in self._sounds:
            if now >= end:
                handle.succeed("played")
            elif not handle.done:
                keep.append((handle, end))
        self._sounds = keep

    def set_face(self, expression: str) -> None:
        self._face.publish(String(data=str(expression)))

    def look_at(self, x: float, y: float) -> None:
        self._look.publish(Point(x=float(x), y=float(y), z=0.0))

    def set_backpack_lights(self, colors, blink_period: float = 0.0, fade: bool = False) -> None:
        colors = list(colors) if colors is not None else [None] * 5
        if self._pattern.get_subscription_count() > 0:
            msg = BackpackLightPattern(front=_light(colors[0], blink_period, fade),
                                       middle=_light(colors[1], blink_period, fade),
                                       back=_light(colors[2], blink_period, fade),
                                       left=_light(colors[3], blink_period, fade),
                                       right=_light(colors[4], blink_period, fade))
            self._pattern.publish(msg)
        else:
            self._backpack.publish(BackpackLights(front=_color(colors[0]), middle=_color(colors[1]),
                                                  back=_color(colors[2]), left=_color(colors[3]),
                                                  right=_color(colors[4])))

    def set_cube_lights(self, factory_id: int, color, blink_period: float = 0.0) -> None:
        self._object_lights.publish(ObjectLights(factory_id=int(factory_id),
                                                 lights=[_light(color, blink_period)]))

    def play_light_animation(self, target: str, name: str) -> Handle:
        handle = Handle(f"light animation {name} on {target}", "lights")
        if not self._light_service.service_is_ready():
            handle.fail("play_light_animation: the driver's service is not available")
            return handle
        future = self._light_service.call_async(PlayLightAnimation.Request(target=target, name=name))
        handle.accepted()

        def done(f, h=handle):
            try:
                reply = f.result()
            except Exception as exc:  # noqa: BLE001 - reported on the handle
                h.fail(str(exc))
                return
            (h.succeed if reply.success else h.fail)(reply.message)
        future.add_done_callback(done)
        return handle


def _descriptor(param) -> ParameterDescriptor:
    text = param.description + (f" [{param.unit}]" if param.unit else "")
    # read-only where read at start-up only: `ros2 param describe` says so, as the face node's
    descriptor = ParameterDescriptor(description=text + ("" if param.dynamic else "; read at start-up"),
                                     read_only=not param.dynamic)
    if param.minimum is not None:
        if isinstance(param.default, float):
            descriptor.floating_point_range = [FloatingPointRange(
                from_value=float(param.minimum), to_value=float(param.maximum), step=0.0)]
        elif isinstance(param.default, int) and not isinstance(param.default, bool):
            descriptor.integer_range = [IntegerRange(
                from_value=int(param.minimum), to_value=int(param.maximum), step=0)]
    return descriptor


class BehaviorNode(DoubleParameters, Node):
    """See the module docstring."""

    def __init__(self, node_name: str = "cozmo_behavior", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        with destroyed_if_refused(self):  # refused: gone from the graph at once
            p: Dict[str, Any] = {}
            for param in BEHAVIOR_PARAMETERS:
                p[param.name] = self.declare_parameter(param.name, param.default, _descriptor(param)).value
            self._params = p
            log = self.get_logger()
            for text in unknown_parameters(self, [param.name for param in BEHAVIOR_PARAMETERS]):
                log.warning(text)
            warnings: List[str] = []
            self.config = load_config([p["config_file"]] if p["config_file"] else [],
                                      app_resources=p["app_resources_dir"] or None,
                                      warn=warnings.append)
            for text in warnings[:20]:
                log.warning(text)
            if len(warnings) > 20:
                log.warning(f"... and {len(warnings) - 20} more app resources skipped")
            for text in misspelt_triggers(self.config):
                log.warning(text)
            self.robot = RosRobot(self, builtin_still_animations() + self.config.charger_safe_animations)
            now = time.monotonic()
            self.engine = Engine(self.config, self.robot, now, seed=int(p["seed"]),
                                 user_pause=float(p["user_pause"]), enabled=bool(p["enabled"]),
                                 start_delay=float(p["start_delay"]), log=self._engine_log)
        self._closed = False
        self._user_goals: Dict[str, Set[bytes]] = {action: set() for action in USER_ACTIONS}
        self.user_commands = 0
        self._throttle = LogThrottle(2.0)  # warnings of a kind a publisher may repeat
        self._warned_once: Set[str] = set()
        #: what the engine said of the last ``enabled`` set (behavior/enable answers with it)
        self._enabled_said = ""
        #: when the node started (monotonic), until a link_status comes or the node said it
        #: has none (NO_LINK_STATUS_S)
        self._no_link_since: Optional[float] = time.monotonic()
        #: when the last link_status came (monotonic; None before the first), whether the
        #: driver was since taken for gone (_check_driver), and the last tick (_on_tick)
        self._link_heard_at: Optional[float] = None
        self._driver_gone = False
        self._last_tick = time.monotonic()
        # inputs
        _subscription(self, RobotEvent, "events", self._on_event, QOS_EVENTS)
        # the status streams at ~33 Hz; the engine needs one snapshot per connection (the
        # driver's events report every change after it), so it subscribes only until then
        self._status_sub: Optional[Any] = None
        self._status_seen = False
        self._watch_status()
        _subscription(self, BatteryState, "battery_state", self._on_battery, QOS_STATE)
        self._link_sub = _subscription(self, LinkStatus, "link_status", self._on_link, QOS_LATCHED)
        _subscription(self, Bool, "emergency_stop/engaged",
                      lambda msg: self.engine.on_emergency_stop(msg.data, time.monotonic()), QOS_LATCHED)
        _subscription(self, ObjectEvent, "object_events", self._on_object_event, QOS_EVENTS)
        _subscription(self, String, "behavior/trigger", self._on_trigger, QOS_QUEUE)
        cmd_vel_type = TwistStamped if p["cmd_vel_stamped"] else Twist
        topic_types = {"cmd_vel": cmd_vel_type, "head/angle": HeadAngle, "lift/height": LiftHeight,
                       "head/velocity": Float64, "lift/velocity": Float64}
        self._cmd_vel_type = cmd_vel_type
        self._types_checked_at = -math.inf  # see _check_cmd_vel_type
        for topic in USER_TOPICS:
            _subscription(self, topic_types[topic], topic,
                          lambda msg, t=topic: self._on_user_topic(t), QOS_WATCH)
        for action in USER_ACTIONS:
            _subscription(self, GoalStatusArray, f"{action}/_action/status",
                          lambda msg, a=action: self._on_goal_status(a, msg),
                          qos_profile_action_status_default)
        # outputs
        self._emotions_pub = _publisher(self, EmotionState, "behavior/emotions", QOS_STATE)
        self._status_pub = _publisher(self, BehaviorStatus, "behavior/status", QOS_LATCHED)
        self.create_service(SetBool, "behavior/enable", self._on_enable)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        steady_timer(self, 1.0 / float(p["tick_rate"]), self._on_tick)  # the engine's time: monotonic
        steady_timer(self, 1.0 / float(p["emotions_rate"]), self._publish_emotions)
        steady_timer(self, 1.0, self._publish_status)
        log.info(f"behavior engine: {len(self.config.behaviors)} behaviors, "
                 f"{len(self.config.reactions)} reactions, {len(self.config.activities)} activities, "
                 f"{len(self.config.emotions)} emotions; "
                 f"{'enabled' if p['enabled'] else 'disabled'}, user_pause {p['user_pause']:g} s")

    # ------------------------------------------------------------------ engine glue

    def _engine_log(self, level: str, text: str) -> None:
        if not self.context.ok():
            print(f"[{level.upper()}] [{self.get_name()}]: {text}", file=sys.stderr)
            return
        # one call site per severity: rclpy refuses two severities from one line
        log = self.get_logger()
        if level == "debug":
            log.debug(text)
        elif level == "warning":
            log.warning(text)
        elif level == "error":
            log.error(text)
        else:
            log.info(text)

    def _on_tick(self) -> None:
        now = time.monotonic()
        if self._link_heard_at is not None and now - self._last_tick > 1.0:
            # this node stood still (a loaded machine): the link_status that came meanwhile
            # waits in its subscription, and the driver is not blamed for the silence
            self._link_heard_at = max(self._link_heard_at, now)
        self._last_tick = now
        if self._status_seen and self._status_sub is not None:
            self.destroy_subscription(self._status_sub)
            self._status_sub = None
        active = [a for a, goals in self._user_goals.items() if goals]
        self.engine.on_user_goal(f"action {active[0]}" if active else "", now)
        self.robot.finish_sounds(now)
        self.robot.send_waiting(now)
        self.engine.tick(now)
        if self.engine.take_changed():
            self._publish_status()
        if self.engine.emotions.take_changed():
            self._publish_emotions()

    def _on_event(self, msg: RobotEvent) -> None:
        trigger = ROBOT_EVENT_TRIGGERS.get(int(msg.type))
        if trigger is not None:
            self.engine.on_trigger(trigger, time.monotonic(), {"description": msg.description,
                                                              "value": float(msg.value)})

    def _watch_status(self) -> None:
        if self._status_sub is None:
            self._status_seen = False
            self._status_sub = _subscription(self, RobotStatus, "status", self._on_status,
                                             QOS_LATEST)

    def _on_status(self, msg: RobotStatus) -> None:
        self.engine.on_state(**state_flags(msg))
        self._status_seen = True   # unsubscribed at the next tick, not inside its own callback

    def _on_battery(self, msg: BatteryState) -> None:
        if math.isfinite(msg.percentage):
            self.engine.on_battery(float(msg.percentage), time.monotonic())

    def _on_link(self, msg: LinkStatus) -> None:
        self._no_link_since = None
        self._link_heard_at = time.monotonic()
        if self._driver_gone:
            self._driver_gone = False
            self.get_logger().info(f"{self._link_sub.topic_name} is back: a driver is there again")
        connected = msg.state == LinkStatus.CONNECTED
        if connected and not self.engine.state.connected:
            self._watch_status()   # a snapshot of the robot's state for the new connection
        self.engine.on_connected(connected, time.monotonic())
        self.engine.on_driver_active(msg.driver_active, time.monotonic())

    def _on_object_event(self, msg: ObjectEvent) -> None:
        if msg.type == ObjectEvent.TAPPED:
            self.engine.on_cube_tap(msg.name or f"object_{msg.factory_id}", int(msg.factory_id),
                                    int(msg.tap_count), time.monotonic())

    def _on_trigger(self, msg: String) -> None:
        name = msg.data.strip()
        if name and self.engine.knows(name):
            self.engine.on_trigger(name, time.monotonic(), from_robot=False)
            return
        if not name:
            kind, text = "empty trigger", "behavior/trigger: an empty trigger name is ignored"
        else:
            known = sorted(set(self.engine.reactions.reactions) | set(self.engine.emotions.events))
            shown = name if len(name) <= 64 else f"{name[:64]}... ({len(name)} characters)"
            kind, text = "trigger", (f"behavior/trigger: {shown!r} is no reaction's trigger and no "
                                     f"emotion event: ignored (known: {', '.join(known)})")
        line = self._throttle.line(kind, text, time.monotonic())  # a publisher may repeat it
        if line is not None:
            self.get_logger().warning(line)

    def _on_user_topic(self, topic: str) -> None:
        self.user_commands += 1
        self.engine.on_user_command(topic, time.monotonic())

    def _on_goal_status(self, action: str, msg: GoalStatusArray) -> None:
        active = set()
        for status in msg.status_list:
            goal_id = bytes(bytearray(status.goal_info.goal_id.uuid))
            if status.status in _ACTIVE_GOAL and not self.robot.is_own_goal(goal_id):
                active.add(goal_id)
        new = active - self._user_goals[action]
        self._user_goals[action] = active
        if new:
            self.user_commands += 1
            self.engine.on_user_goal(f"action {action}", time.monotonic())

    # ------------------------------------------------------------------ publishing

    def _publish_emotions(self) -> None:
        now = time.monotonic()
        msg = EmotionState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.emotions = [Emotion(name=name, value=float(value))
                        for name, value in self.engine.emotions.values(now).items()]
        self._emotions_pub.publish(msg)

    def _publish_status(self) -> None:
        for _, line, _ in self._throttle.overdue(time.monotonic()):  # a warning held back, said
            self.get_logger().warning(line)
        if not self._closed:
            self._check_driver(time.monotonic())
            self._check_action_servers()
            self._forget_gone_goals()
        self._say_no_driver(time.monotonic())
        self._check_cmd_vel_type(time.monotonic())
        s = self.engine.status(time.monotonic())
        msg = BehaviorStatus(enabled=s.enabled, paused=s.paused, pause_remaining=float(s.pause_remaining),
                             pause_reason=s.pause_reason, activity=s.activity, behavior=s.behavior,
                             reason=s.reason, last_behavior=s.last_behavior, last_outcome=s.last_outcome,
                             behaviors_started=s.behaviors_started, behaviors_failed=s.behaviors_failed)
        msg.header.stamp = self.get_clock().now().to_msg()
        self._status_pub.publish(msg)

    def _check_driver(self, now: float) -> None:
        """A driver that crashed, or was killed, says nothing on link_status: its silence (it
        publishes every second, LINK_SILENT_S), or its publisher's going from the graph, is all
        there is. It is then taken for gone: nothing runs until a link_status comes again, the
        user's goals are forgotten, and the engine's goals given up (their results will never
        come), each said."""
        heard = self._link_heard_at
        if self._driver_gone or heard is None or not (self.engine.state.connected or self.robot.goals_sent()):
            return  # (a driver that stopped said DISCONNECTED: nothing more to say)
        topic = self._link_sub.topic_name
        if now - heard >= LINK_SILENT_S:
            why = (f"no {topic} for {LINK_SILENT_S:g} s (the driver publishes it every second): the "
                   "driver is gone (killed, crashed?) or stalled")
        elif self.engine.state.connected and not self.count_publishers(topic):
            why = f"{topic} has no publisher any more: the driver stopped without saying so (it crashed?)"
        else:
            return
        self._driver_gone = True
        self.engine.on_connected(False, now, said=True)
        self._user_goals = {action: set() for action in USER_ACTIONS}  # they went with it
        given_up = self.robot.give_up_goals("the driver is gone")
        goals = (f"; {len(given_up)} goal(s) given up, their results will not come "
                 f"({', '.join(given_up)})") if given_up else ""
        self.get_logger().warning(f"{why}{goals}; nothing runs until it is back")

    def _check_action_servers(self) -> None:
        """An action server of the driver that left the graph while its link_status goes on
        (the driver is not taken for gone): the goals sent to it are given up, said."""
        if self._driver_gone:
            return
        for name, given_up in self.robot.give_up_goals_of_gone_servers():
            self.get_logger().warning(
                f"the driver's action server {name} is gone (no longer on the graph): {len(given_up)} goal(s) "
                f"given up, their results will not come ({', '.join(given_up)})")

    def _say_no_driver(self, now: float) -> None:
        """No link_status NO_LINK_STATUS_S after the start: no driver, or one in another
        namespace, and nothing runs. Said once; the first link_status, whenever it comes, says
        the robot's connection (the engine)."""
        since = self._no_link_since
        if since is not None and now - since >= NO_LINK_STATUS_S and not self._closed:
            self._no_link_since = None
            self.get_logger().warning(
                f"the robot is not connected (no {self._link_sub.topic_name} from the driver yet: is "
                "cozmo_driver running, in this namespace?): nothing runs")

    def _forget_gone_goals(self) -> None:
        """The user's goals of an action whose status has no publisher any more (its driver
        crashed, or stopped): a driver started again says nothing of them (its action server
        publishes a status only when one of its own goals changes), and they would hold the
        engine paused for good."""
        for action, goals in self._user_goals.items():
            if goals and not self.count_publishers(f"{action}/_action/status"):
                goals.clear()

    def _check_cmd_vel_type(self, now: float) -> None:
        """Every TYPE_CHECK_S: a warning (once) when the driver's cmd_vel or a publisher of
        it has another type than this node's: the engine would never see that user drive,
        and would drive against them."""
        if now - self._types_checked_at < TYPE_CHECK_S or "cmd_vel_type" in self._warned_once:
            return
        self._types_checked_at = now
        line = cmd_vel_type_warning(self, bool(self._params["cmd_vel_stamped"]))
        if line:
            self._warned_once.add("cmd_vel_type")
            self.get_logger().warning(line)

    # ------------------------------------------------------------------ control

    def _on_enable(self, request, response):
        """Success when the parameter is set; the message says what that did, as the log does
        (true under the emergency stop sets it, but nothing runs: the answer says so)."""
        self._enabled_said = ""
        result = self.set_parameters([Parameter("enabled", value=bool(request.data))])[0]
        response.success = result.successful
        response.message = ((self._enabled_said or ("enabled" if request.data else "disabled"))
                            if result.successful else result.reason)
        return response

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        # those read at start-up only are read-only (_descriptor): rclpy refuses them first
        for param in parameters:
            if param.name == "enabled":
                self._enabled_said = self.engine.set_enabled(bool(param.value), time.monotonic())
                self._publish_status()
            elif param.name == "user_pause":
                self.engine.set_user_pause(float(param.value), time.monotonic())
        return SetParametersResult(successful=True)

    def close(self) -> None:
        """Stop the running behavior and cancel its goals (idempotent). Needs the context:
        ``main`` keeps it up until this has run."""
        if self._closed:
            return
        self._closed = True
        if not self.context.ok():
            print(f"[WARN] [{self.get_name()}]: the ROS context is already shut down: the running "
                  "behavior's goals cannot be cancelled", file=sys.stderr)
            return
        self.engine.shutdown(time.monotonic())
        self.robot.cancel_all()

    def destroy_node(self) -> None:
        self.close()
        destroy_waitables(self)     # its action clients: rclpy's destroy_node leaves them
        super().destroy_node()


def main(args: Optional[List[str]] = None) -> int:
    """``cozmo_behavior_node``: run the engine until Ctrl-C, SIGTERM or SIGHUP.

    A signal does not shut the context down (``_entry.init``): the node first cancels
    the goals it started, and lets the cancel requests go out, then rclpy shuts down."""
    if answer_help("cozmo_behavior_node", __doc__, BEHAVIOR_PARAMETERS, args):
        return 0
    exit_with_parent()  # end with the bring-up that started it (cozmo_driver.lifeline)
    init(args)
    node = make_node("cozmo_behavior_node", BehaviorNode,
                     (ConfigError, rclpy.exceptions.ParameterException))
    if node is None:
        return 2

    def stop(executor) -> None:
        node.close()
        # let the cancel requests and the last messages go out
        deadline = time.monotonic() + 0.3
        while node.context.ok() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)

    return spin_node(node, stop=stop)


if __name__ == "__main__":
    sys.exit(main())
