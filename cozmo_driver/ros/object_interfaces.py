"""The driver's cube, charger and light interfaces (glue; part of ``cozmo_driver_node``).

:class:`ObjectInterfaces` is made by the driver node at configure and owns:

* publishers ``objects`` (cozmo_interfaces/ObjectList: what the robot advertises
  or is connected to; reliable, transient local, depth 1; at 1 Hz while connected and on every
  change), ``object_events`` (cozmo_interfaces/ObjectEvent; reliable, depth 100)
  and ``object_accel`` (cozmo_interfaces/ObjectAccel; reliable, depth 5, the cubes'
  accelerometer streams: a sensor stream, published as REP-2003 asks);
* subscriptions ``object_lights`` (cozmo_interfaces/ObjectLights: a cube's four
  LEDs or the charger's three) and ``backpack_light_pattern``
  (cozmo_interfaces/BackpackLightPattern: programmes of the backpack's five LEDs);
* services ``connect_object`` (cozmo_interfaces/ConnectObject: answered when the
  robot confirms, or fails after ``object_connect_timeout``),
  ``set_object_accel_stream`` (cozmo_interfaces/SetObjectAccelStream) and
  ``play_light_animation`` (cozmo_interfaces/PlayLightAnimation).

The logic lives in :mod:`cozmo_driver.driver.objects` (the registry: list,
ageing, auto-connect with back-off, events; light programme conversion) and
:mod:`cozmo_driver.driver.light_animations`. The registry is fed where the
robot's messages arrive, on the robot client's I/O thread, as the node's robot
states are: a listener hands it the object messages and link changes, and every
robot state (about 30 Hz while connected) is the clock that runs its timeouts,
ageing and auto-connect at 4 Hz; what it has to publish is published there. While
the robot is away the node's 1 s timer ages the list (:meth:`ObjectInterfaces.age_list`),
on the same clock (host monotonic).
This costs the executor no wake-up, timer or wait-set entry, so that ROS
callbacks (``cmd_vel`` first) are not delayed by cube traffic. A lock guards
the registry against the executor's subscriptions and services.
``connect_object`` is a coroutine awaiting an rclpy Future that the registry's
answer completes; answers go to the executor through a HandOver (rare:
one per request), in a reentrant callback group of its own (a service callback
holds its group until it returns, and the node's default group must stay free
for the guard condition that delivers the answer), so a single-threaded
executor serves it.

When the driver is cleaned up or shut down, every connected object's lights
are turned off and it is disconnected, so that the cubes go back to sleep
rather than drain their batteries; deactivating leaves them as they are. With
the robot away then, nothing can be sent: the next registry's first connection
to the robot empties every radio slot.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from builtin_interfaces.msg import Time as TimeMsg
from cozmo_interfaces.msg import (BackpackLightPattern, ObjectAccel, ObjectEvent, ObjectInfo,
                                  ObjectLights, ObjectList)
from cozmo_interfaces.srv import ConnectObject, PlayLightAnimation, SetObjectAccelStream
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import QoSProfile
from rclpy.task import Future

from ..client import LinkState, LinkStateChanged, MessageReceived, RobotReady
from ..core.held_events import EventHold
from ..core.notes import STATE_WARN_PERIOD_S
from ..driver.commands import CommandError
from ..driver.diagnostics import DiagnosticReport
from ..driver.light_animations import LightAnimationLibrary, quoted
from ..driver.objects import (BACKPACK_LEDS, CUBE_LEDS, Light, ObjectEntry, ObjectRegistry,
                              ObjectSettings, backpack_messages, is_cube, known_away, led_count,
                              light_state, object_light_states, rotation_frames, stop_accel_away)
from ..driver.parameters import full_frame_id
from ..log_throttle import LogThrottle, field_kind
from . import qos
from .driver_support import NOT_CONNECTED_REFUSAL, inactive_refusal
from .handover import HandOver
from .qos import QOS_COMMAND, QOS_EVENTS, QOS_LATCHED, QOS_QUEUE, QOS_SENSOR_OUT

__all__ = ["ObjectInterfaces", "OBJECT_MESSAGES"]

#: The robot's messages about its objects (everything else is the node's business).
OBJECT_MESSAGES = frozenset((
    "ObjectAvailable", "ObjectConnectionState", "ObjectTapped", "ObjectTapFiltered", "ObjectMoved",
    "ObjectStoppedMoving", "ObjectUpAxisChanged", "ObjectPowerLevel", "ObjectAccel"))
TICK_PERIOD_S = 0.25
LIST_PERIOD_S = 1.0
_WARN_PERIOD_S = 2.0
_TARGETS = ("backpack", "cube1", "cube2", "cube3", "cubes", "charger")
_STAY_OFF = "its lights stay off when it connects again"


def _light(msg: Any) -> Light:
    """A cozmo_interfaces/LightState as a pure Light."""
    on, off = msg.on_color, msg.off_color
    return Light(on_color=(float(on.r), float(on.g), float(on.b)),
                 off_color=(float(off.r), float(off.g), float(off.b)),
                 on_period=float(msg.on_period), off_period=float(msg.off_period),
                 transition_on_period=float(msg.transition_on_period),
                 transition_off_period=float(msg.transition_off_period), offset=float(msg.offset))



def _is_off(light: Light) -> bool:
    """A programme that lights nothing: both colours black."""
    return not any(light.on_color) and not any(light.off_color)


def _set_past(stamp: TimeMsg, now_ns: int, age_s: float) -> None:
    """``stamp`` := the node clock's time ``age_s`` seconds (host monotonic; none if negative)
    before its ``now_ns``, in integer nanoseconds: rclpy's Time and Duration arithmetic cost
    more than the rest of an object's entry."""
    stamp.sec, stamp.nanosec = divmod(max(0, now_ns - int(max(0.0, age_s) * 1e9)), 1_000_000_000)


class ObjectInterfaces:
    """See the module docstring. ``params`` is the node's parameter dict (kept up to date by
    the node, so run-time changes apply at the next tick). ``note(level, text)`` logs the
    objects' events (the driver's, which holds them back while the robot connects, in
    order with its own lines); by default the node's logger."""

    def __init__(self, node: Any, robot: Any, params: Dict[str, Any],
                 note: Optional[Callable[[int, str], None]] = None) -> None:
        self.node = node
        self.robot = robot
        self.params = params
        self._log = node.get_logger()
        self._note = note or self._log_line
        self._active = False
        #: the objects' events while inactive: held from here (configure) to the activation (core.held_events)
        self._held = EventHold(self._note, "object event")
        self.registry = ObjectRegistry(self._settings())
        # the registry and the publishers, shared by the I/O thread and the executor
        self._lock = threading.RLock()
        self._last_tick = -math.inf
        self._requests: Dict[int, Future] = {}
        self._tokens = itertools.count(1)
        self._throttle = LogThrottle(_WARN_PERIOD_S)
        self._refused = 0
        self._last_list = -math.inf

        self.library = LightAnimationLibrary.load(params.get("light_animation_file") or None)
        for warning in self.library.warnings:
            self._log.warning(f"light animations: {warning}")
        if params.get("light_animation_file"):
            self._log.info(f"light animations: {len(self.library.animations)} "
                           f"({self.library.loaded_from_file} from {params['light_animation_file']})")

        self._entities: List[Tuple[Any, Any]] = []
        self._pub_list = self._publisher(ObjectList, "objects", QOS_LATCHED)
        self._pub_events = self._publisher(ObjectEvent, "object_events", QOS_EVENTS)
        self._pub_accel = self._publisher(ObjectAccel, "object_accel", QOS_SENSOR_OUT)
        # object_lights addresses several objects: keep a few, so that one object's command
        # is not dropped by the next object's. The backpack: only the latest matters.
        self._subscribe(ObjectLights, "object_lights", self._locked(self._on_object_lights),
                        QOS_QUEUE)
        self._subscribe(BackpackLightPattern, "backpack_light_pattern", self._on_backpack_pattern,
                        QOS_COMMAND)
        # connect_object awaits the robot's answer: in a group of its own, so that the node's
        # default (mutually exclusive) group stays free for the guard condition that delivers
        # that answer; reentrant, so that several requests can wait at once.
        self._connect_group = ReentrantCallbackGroup()
        self._closed = False
        for srv_type, name, callback, group in (
                (ConnectObject, "connect_object", self._on_connect_object, self._connect_group),
                (SetObjectAccelStream, "set_object_accel_stream",
                 self._locked(self._on_set_accel_stream), None),
                (PlayLightAnimation, "play_light_animation",
                 self._locked(self._on_play_light_animation), None)):
            self._entities.append((node.destroy_service,
                                   node.create_service(srv_type, name, callback, callback_group=group)))
        self._answers = HandOver(node, self._answer)  # the registry's answers, for the executor
        self._entities.append((HandOver.destroy, self._answers))
        robot.add_listener(self._on_robot_event, messages=OBJECT_MESSAGES | {"RobotState"})

    def _log_line(self, level: int, text: str) -> None:
        if level >= logging.WARNING:
            self._log.warning(text)
        else:
            self._log.info(text)

    # ------------------------------------------------------------------ lifecycle

    def activate(self) -> None:
        with self._lock:
            self._active = True
            self.registry.active = True
            self._held.release(self._publish_events)  # those since the link opened, first and in order
            self._tick(time.monotonic())
            self._publish_list()

    def deactivate(self, reason: str = "the driver was deactivated") -> None:
        with self._lock:
            self._active = False
            self._held.disarm()  # a user's choice (or the end): events are logged, not published
            self.registry.active = False
            self.registry.fail_pending(reason)
            self._flush()
        self._answers.drain()

    def destroy(self, reason: str = "the driver is shutting down") -> None:
        """Lights off and disconnect every object, then release everything (before the robot
        client stops); connection requests waiting fail with ``reason``."""
        self.deactivate(reason)
        try:
            self.robot.remove_listener(self._on_robot_event)
        except ValueError:
            pass
        with self._lock:  # an event already on its way is dropped from here on
            self._closed = True
            if self._robot_ready():
                for message in self.registry.release_all():
                    self.robot.post(message)
        for future in self._requests.values():
            if not future.done():
                future.set_result(None)
        self._requests.clear()
        for destroy, entity in reversed(self._entities):
            destroy(entity)
        self._entities.clear()

    # ------------------------------------------------------------------ helpers

    def _settings(self) -> ObjectSettings:
        p = self.params
        return ObjectSettings(auto_connect_cubes=bool(p.get("auto_connect_cubes", True)),
                              auto_connect_charger=bool(p.get("auto_connect_charger", False)),
                              object_timeout=float(p.get("object_timeout", 5.0)),
                              connect_timeout=float(p.get("object_connect_timeout", 3.0)),
                              reconnect_min=float(p.get("object_reconnect_min", 1.0)),
                              reconnect_max=float(p.get("object_reconnect_max", 10.0)),
                              filter_object_events=bool(p.get("filter_object_events", True)))

    def _locked(self, callback):
        """``callback`` holding the lock (an executor callback that uses the registry)."""
        def locked(*args):
            with self._lock:
                return callback(*args)
        return locked

    def _publisher(self, msg_type, topic: str, profile: QoSProfile):
        pub = qos.create_publisher(self.node, msg_type, topic, profile)
        self._entities.append((self.node.destroy_publisher, pub))
        return pub

    def _subscribe(self, msg_type, topic: str, callback, profile: QoSProfile) -> None:
        sub = qos.create_subscription(self.node, msg_type, topic, callback, profile)
        self._entities.append((self.node.destroy_subscription, sub))

    def _warn(self, text: str, period: Optional[float] = None) -> None:
        """A warning, at most one of a kind every 2 s (``period``) with the count of those left
        unsaid: a kind is the field it names ("object_lights refused: object_lights.lights[0].
        on_color.r = ..."), not the whole text, whose values may differ every time."""
        line = self._throttle.line(field_kind(text), text, time.monotonic(), period)
        if line is not None:
            self._log.warning(line)

    def say_overdue(self) -> None:
        """The warnings held back of each kind that then fell quiet (the node's 1 s timer)."""
        for _, line, _ in self._throttle.overdue(time.monotonic()):
            self._log.warning(line)

    def say_held_back(self) -> None:
        """Every warning held back, now: before "activated" or "connected again" (the core
        calls it through DriverStreams.say_held_back), not a second after it."""
        for _, line, _ in self._throttle.flush(time.monotonic()):
            self._log.warning(line)

    def _refuse(self, text: str, period: Optional[float] = None) -> None:
        self._refused += 1
        self._warn(text, period)

    def _refuse_for_state(self, topic: str, problem: str) -> None:
        """A command refused for the driver's state (:meth:`_problem`), which a publisher
        repeats for as long as that lasts: said every STATE_WARN_PERIOD_S, as the core's."""
        self._refuse(f"{topic} refused: {problem}", STATE_WARN_PERIOD_S)

    def _robot_ready(self) -> bool:
        return self.robot.state is LinkState.READY

    def _problem(self) -> Optional[str]:
        if not self._active:
            return inactive_refusal(self.node)
        if not self._robot_ready() or not self.registry.robot_ready:
            return NOT_CONNECTED_REFUSAL
        return None

    def _now_msg(self) -> TimeMsg:
        return self.node.get_clock().now().to_msg()

    # ------------------------------------------------------------------ I/O thread

    def _on_robot_event(self, event: Any) -> None:
        """On the robot client's I/O thread: feed the registry, tick it, publish."""
        if isinstance(event, MessageReceived):
            name = event.message.NAME
            if name == "RobotState":
                now = time.monotonic()
                if now - self._last_tick >= TICK_PERIOD_S:
                    with self._lock:
                        if not self._closed:
                            self._tick(now)
                elif now >= self.registry.taps_due_at:  # a tap chosen, at the next state
                    with self._lock:
                        if not self._closed:
                            self.registry.release_taps(now)
                            self._flush()
                return
            if name not in OBJECT_MESSAGES:
                return
            with self._lock:
                if not self._closed:
                    if name != "ObjectAccel":  # run-time parameters apply to the next report
                        self.registry.settings = self._settings()
                    self.registry.on_message(event.message, time.monotonic())
                    self._flush()
        elif isinstance(event, LinkStateChanged):
            if event.state is LinkState.READY:
                return  # RobotReady follows
            with self._lock:
                if not self._closed:
                    self.registry.on_robot_lost(
                        time.monotonic(), f"lost the robot ({event.reason})"
                        if event.state is LinkState.LOST
                        else f"the robot's link is {event.state.value}")
                    self._flush()
        elif isinstance(event, RobotReady):
            with self._lock:
                if not self._closed:
                    self.registry.on_robot_ready(time.monotonic())
                    self._flush()

    def _tick(self, now: float) -> None:
        """Timeouts, ageing, auto-connect; the list at 1 Hz (lock held)."""
        self._last_tick = now
        self._age(now)
        if self._active and now - self._last_list >= LIST_PERIOD_S:
            self._publish_list()

    def _age(self, now: float) -> None:
        """The registry's timeouts, ageing and auto-connect at ``now`` (host monotonic), with
        the parameters as they are; what it has to send or publish goes (lock held)."""
        self.registry.settings = self._settings()
        self.registry.tick(now)
        self._flush()

    def _answer(self, result: Any) -> None:
        """On the executor: complete the request the registry answered."""
        future = self._requests.pop(result.token, None)
        if future is not None and not future.done():
            future.set_result(result)

    def _flush(self, stamp: Optional[TimeMsg] = None) -> None:
        """Send what the registry wants sent, hand its answers to the executor, publish
        events and samples (either thread; lock held)."""
        registry = self.registry
        messages = registry.pop_messages()
        if messages and self._robot_ready():
            for message in messages:
                self.robot.post(message)
        results = registry.pop_results()
        if results:
            self._answers.extend(results)
        for warning in registry.pop_warnings():  # (said at most once every 10 s by the registry)
            self._note(logging.WARNING, warning)
        events = registry.pop_events()
        samples = registry.pop_accel()
        if stamp is None and (events or samples):
            stamp = self._now_msg()
        for record in events:  # inactive: held for the activation, or logged only (held_events)
            (self._publish_events if self._active else self._held.came)(
                stamp if record.received is None else self._stamp_of(record.received), [record])
        if not self._active:
            registry.take_changed()
            return
        prefix = self.params.get("frame_prefix", "")
        for sample in samples:
            msg = ObjectAccel()
            msg.header.stamp = stamp
            msg.header.frame_id = full_frame_id(prefix, sample.name)
            msg.factory_id = sample.factory_id
            msg.object_type = sample.object_type
            a = msg.linear_acceleration
            a.x, a.y, a.z = sample.acceleration
            self._pub_accel.publish(msg)
        if registry.take_changed():
            self._publish_list()

    def _publish_events(self, stamp: TimeMsg, records: List[Any]) -> None:
        for record in records:
            msg = ObjectEvent()
            msg.header.stamp = stamp
            msg.type = record.type
            msg.factory_id = record.factory_id
            msg.object_type = record.object_type
            msg.name = record.name
            msg.tap_count = max(0, min(255, record.tap_count))
            msg.tap_intensity = float(record.tap_intensity)
            msg.up_axis = record.up_axis
            msg.acceleration.x, msg.acceleration.y, msg.acceleration.z = record.acceleration
            msg.description = record.description
            self._pub_events.publish(msg)
            self._note(logging.INFO, f"object event: {record.description}")

    def _stamp_of(self, received: float) -> TimeMsg:
        """The node clock's time when the registry's ``received`` (host monotonic) was: a
        TAPPED event, published after the tap filter's hold, is stamped on arrival."""
        stamp = TimeMsg()
        _set_past(stamp, self.node.get_clock().now().nanoseconds, time.monotonic() - received)
        return stamp

    def age_list(self) -> None:
        """While the robot is away no robot state ticks the registry: the node's 1 s timer
        ages the list then (an object not heard of for ``object_timeout`` leaves it,
        DISAPPEARED), on the registry's clock (host monotonic), and publishes it if it changed."""
        with self._lock:
            if self._closed or self.registry.robot_ready:
                return
            self._age(time.monotonic())

    def _publish_list(self) -> None:
        if not self._active:
            return
        now_ros = self.node.get_clock().now()
        now = time.monotonic()
        self._last_list = now
        msg = ObjectList()
        msg.header.stamp = now_ros.to_msg()
        for entry in self.registry.objects():
            msg.objects.append(self._info(entry, now_ros, now))
        self._pub_list.publish(msg)

    @staticmethod
    def _info(entry: ObjectEntry, now_ros: Any, now: float) -> ObjectInfo:
        info = ObjectInfo()
        info.factory_id = entry.factory_id & 0xFFFFFFFF
        info.object_type = int(entry.object_type)
        info.name = entry.name
        info.rssi = max(-128, min(127, int(entry.rssi)))
        _set_past(info.last_seen, now_ros.nanoseconds, now - entry.last_seen)
        info.connected = entry.connected
        info.object_id = int(entry.object_id or 0) & 0xFFFFFFFF
        info.battery_level = max(0, min(255, int(entry.battery_level)))
        info.battery_voltage = info.battery_level / 100.0 if info.battery_level else math.nan
        info.missed_packets = int(entry.missed_packets) & 0xFFFFFFFF
        info.up_axis = int(entry.up_axis)
        info.moving = bool(entry.moving)
        return info

    # ------------------------------------------------------------------ lights

    def _on_object_lights(self, msg: ObjectLights) -> None:
        topic = "object_lights"
        warnings: List[str] = []
        try:
            lights = [_light(item) for item in msg.lights]
            for i, light in enumerate(lights):  # values first: NaN, colours
                light_state(light, f"{topic}.lights[{i}]", [])
            if not math.isfinite(msg.rotation_period):
                raise CommandError(f"{topic}.rotation_period is {msg.rotation_period}: "
                                   "not a finite number")
            known = self.registry.entry(msg.factory_id) if msg.factory_id and self._active else None
            if known is not None and len(lights) in (1, led_count(known.object_type) or CUBE_LEDS) \
                    and all(_is_off(light) for light in lights):  # (a count of LEDs it has: else refused below)
                # (a behavior's end while the cube, or the robot, was away: put out when it connects)
                away = self.registry.owe_lights_off(msg.factory_id)
                if away is not None:
                    self._log.info(f"{topic}: {away.name} is not connected: {_STAY_OFF}")
                    return
            problem = self._problem()
            if problem:
                self._refuse_for_state(topic, problem)
                return
            entry = self.registry.find_connected(msg.factory_id, msg.object_type, topic)
            leds = led_count(entry.object_type) or CUBE_LEDS
            states = object_light_states(lights, leds, f"{topic}.lights", entry.name, warnings,
                                         white_balance=is_cube(entry.object_type))
            rotation = 0
            if is_cube(entry.object_type):
                rotation = rotation_frames(msg.rotation_period, f"{topic}.rotation_period", warnings)
            elif msg.rotation_period != 0.0:
                warnings.append(f"{topic}.rotation_period = {msg.rotation_period:g} s ignored: only "
                                f"cubes rotate their lights ({entry.name})")
        except CommandError as exc:
            self._refuse(f"{topic} refused: {exc}")
            return
        for warning in warnings:
            self._warn(warning)
        self.registry.set_lights(entry, states, rotation)
        self._flush()

    def _on_backpack_pattern(self, msg: BackpackLightPattern) -> None:
        topic = "backpack_light_pattern"
        warnings: List[str] = []
        try:
            lights = [_light(getattr(msg, name)) for name in BACKPACK_LEDS]
            center, side = backpack_messages(lights, [f"{topic}.{n}" for n in BACKPACK_LEDS], warnings)
            problem = self._problem()
            if problem:
                self._refuse_for_state(topic, problem)
                return
        except CommandError as exc:
            self._refuse(f"{topic} refused: {exc}")
            return
        for warning in warnings:
            self._warn(warning)
        self._send_backpack(center, side)

    def _send_backpack(self, center: Any, side: Any) -> None:
        self.robot.post(center)
        self.robot.post(side)
        # the node re-applies the latest backpack lights after a reconnection
        if hasattr(self.node, "_lights"):
            self.node._lights = (center, side)

    # ------------------------------------------------------------------ services

    async def _on_connect_object(self, request, response):
        verb = "connect" if request.connect else "disconnect"
        problem = self._problem()
        if problem:  # (the registry would say it without the way out)
            response.success, response.message = False, problem
            response.factory_id = int(request.factory_id) & 0xFFFFFFFF
            self._log.warning(f"connect_object ({verb}) refused: {problem}")
            return response
        token = next(self._tokens)
        future = Future()
        self._requests[token] = future
        with self._lock:
            factory_id = self.registry.request(token, int(request.factory_id),
                                               int(request.object_type), bool(request.connect),
                                               time.monotonic())
            self._flush()
        result = await future
        if result is None:
            response.success, response.message = False, "the driver is shutting down"
            response.factory_id = factory_id & 0xFFFFFFFF
            return response
        response.success = bool(result.success)
        response.message = result.message
        response.factory_id = int(result.factory_id or factory_id) & 0xFFFFFFFF
        # one call per severity: rclpy raises when one source line logs at two
        if result.success:
            self._log.info(f"connect_object ({verb}): {result.message}")
        else:
            self._log.warning(f"connect_object ({verb}): {result.message}")
        return response

    def _on_set_accel_stream(self, request, response):
        try:
            problem = self._problem()
            away = None if request.enable or not self._active else stop_accel_away(
                self.registry, int(request.factory_id), int(request.object_type))
            if away is not None:  # (also with the robot away: not restarted when it connects)
                response.success, response.message = True, (
                    f"{away.name} accelerometer stream off: {away.name} is not connected, and it is "
                    "not restarted when it connects")
                self._log.info(f"set_object_accel_stream: {response.message}")
                return response
            if problem:
                raise CommandError(problem)
            entry = self.registry.find_connected(request.factory_id, request.object_type, "")
            if not is_cube(entry.object_type):
                raise CommandError(f"{entry.name} has no accelerometer: only cubes stream one")
        except CommandError as exc:
            response.success, response.message = False, str(exc)
            self._log.warning(f"set_object_accel_stream refused: {exc}")
            return response
        stopped = self.registry.set_accel_stream(entry, bool(request.enable))
        self._flush()
        response.success = True
        response.message = f"{entry.name} accelerometer stream {'on' if request.enable else 'off'}"
        if stopped:
            response.message += (f"; {', '.join(stopped)}'s stream stopped: the robot streams one "
                                 "cube at a time")
        self._log.info(f"set_object_accel_stream: {response.message}")
        return response

    def _on_play_light_animation(self, request, response):
        response.available = self.library.names()
        target, name = request.target.strip(), request.name.strip()
        try:
            if target not in _TARGETS:
                raise CommandError(f"unknown target {quoted(request.target)}: one of {', '.join(_TARGETS)}")
            animation = self.library.get(name)
            problem = self._problem()
            if problem and (target == "backpack" or not self._active):
                raise CommandError(problem)
            warnings: List[str] = []
            field = f"light animation {name!r}"
            away: List[ObjectEntry] = []
            if target == "backpack":
                center, side = backpack_messages(animation.lights_for("backpack"),
                                                 [f"{field} {n}" for n in BACKPACK_LEDS], warnings)
                self._send_backpack(center, side)
                done = ["backpack"]
            else:
                entries = [] if problem else self.registry.connected_cubes() if target == "cubes" else [
                    e for e in (self.registry.connected_named(target),) if e is not None]
                # an off for objects not connected (or with the robot away): taken, as on object_lights
                kind = "charger" if target == "charger" else "cube"
                if all(_is_off(light) for light in animation.lights_for(kind)):
                    away = known_away(self.registry, target)
                if not entries and not away:
                    raise CommandError(problem or ("no cube is connected" if target == "cubes"
                                                   else f"{target} is not connected"))
                planned = []
                for entry in entries:
                    kind = "cube" if is_cube(entry.object_type) else "charger"
                    leds = led_count(entry.object_type)
                    states = object_light_states(animation.lights_for(kind), leds, f"{field} {kind}",
                                                 entry.name, warnings, white_balance=kind == "cube")
                    rotation = rotation_frames(animation.rotation_period, f"{field} rotation_period",
                                               warnings) if kind == "cube" else 0
                    planned.append((entry, states, rotation))
                for entry, states, rotation in planned:
                    self.registry.set_lights(entry, states, rotation)
                for entry in away:
                    self.registry.owe_lights_off(entry.factory_id)
                self._flush()
                done = [entry.name for entry in entries]
        except CommandError as exc:
            response.success, response.message = False, str(exc)
            self._refused += 1  # a light command, as object_lights' and backpack_light_pattern's
            self._log.warning(f"play_light_animation refused: {exc}")
            return response
        response.success = True
        response.message = f"{name} on {', '.join(done)}" if done else name
        names = sorted({entry.name for entry in away} - set(done))
        if names:
            response.message += ("; " if done else ": ") + (
                f"{names[0]} is not connected: {_STAY_OFF}" if len(names) == 1 else
                f"{', '.join(names)} are not connected: their lights stay off when they connect again")
        self._log.info(f"play_light_animation: {response.message}")
        return response

    # ------------------------------------------------------------------ diagnostics

    def report(self) -> DiagnosticReport:
        with self._lock:
            report = self.registry.report(self._active)
        values = list(report.values) + [("light commands refused", str(self._refused))]
        return DiagnosticReport(report.level, report.message, values)
