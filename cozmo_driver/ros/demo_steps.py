"""The media steps of ``cozmo-demo``: show a face, play an animation, play a sound.

:class:`MediaSteps` runs them for a :class:`~cozmo_driver.ros.demo_node.Demonstration`
(its node, options, output and result) through whatever the ROS graph offers:
the face node's ``set_face_expression`` service or ``face/expression`` topic, else
a rendered face on a display topic of the driver; the driver's
``play_animation`` and ``play_audio`` actions. Interfaces are found by name and
their requests filled by field name and type (the helpers below), so nothing
here needs an interface package beyond the driver's.
"""

from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
from sensor_msgs.msg import Image

from . import qos

__all__ = ["MediaSteps", "action_outcome", "fill_audio_goal", "interface_class", "set_text", "wait_future"]

_RELIABLE = qos.profile(10)
#: message types of a display topic of the driver, the preferred first
_DISPLAY_TYPES = ("cozmo_interfaces/msg/DisplayImage", "sensor_msgs/msg/Image")


def wait_future(future, timeout: float) -> bool:
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    return done.wait(timeout) and future.done()


def action_outcome(wrapped: Any) -> Tuple[bool, str]:
    """(succeeded, "succeeded (message)" / "failed (status N)...") of an action's wrapped
    result: success needs the SUCCEEDED status and a result without ``success=False``."""
    outcome = wrapped.result
    ok = bool(getattr(outcome, "success", True)) and wrapped.status == 4  # SUCCEEDED
    message = getattr(outcome, "message", "")
    text = "succeeded" if ok else f"failed (status {wrapped.status})"
    return ok, text + (f" ({message})" if message else "")


def _fields(msg: Any) -> Dict[str, str]:
    return dict(msg.get_fields_and_field_types())


def interface_class(type_name: str) -> Any:
    """``pkg/srv/Name`` -> the Python class (rosidl's layout), or None."""
    try:
        package, kind, name = type_name.split("/")
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ValueError, ImportError, AttributeError):
        return None


def set_text(msg: Any, value: str, preferred: Sequence[str]) -> Optional[str]:
    """Put ``value`` into the string field of ``msg`` named first in ``preferred`` (else its
    only string field); returns the field's name, or None if there is no such field."""
    strings = [name for name, kind in _fields(msg).items() if kind.startswith("string")]
    for name in list(preferred) + (strings if len(strings) == 1 else []):
        if name in strings:
            setattr(msg, name, value)
            return name
    return None


def fill_audio_goal(goal: Any, wav: Path) -> Optional[str]:
    """Fill a play-audio goal with the WAV file ``wav`` by what its fields look like:
    a path, file name or URI string; or the file's bytes; returns how, or None."""
    kinds = _fields(goal)
    for name, kind in kinds.items():
        if kind.startswith("string") and any(k in name for k in ("path", "file", "uri", "url")):
            setattr(goal, name, wav.resolve().as_uri() if ("uri" in name or "url" in name)
                    else str(wav.resolve()))
            how = f"{name}={getattr(goal, name)}"
            break
    else:
        for name, kind in kinds.items():
            if kind == "sequence<uint8>" and name in ("data", "wav", "audio", "wav_data",
                                                      "file_data", "content"):
                setattr(goal, name, wav.read_bytes())
                how = f"{name}=<{wav.stat().st_size} bytes of WAV>"
                break
        else:
            return None
    for name, kind in kinds.items():
        if name == "volume" and kind in ("float", "double", "float32", "float64"):
            setattr(goal, name, 1.0)
    return how


class MediaSteps:
    """The face, animation and sound steps of one demonstration ``demo``."""

    def __init__(self, demo: Any) -> None:
        self.demo = demo
        self._sound_future = None

    # --- face

    def _find_face(self) -> Optional[Tuple[str, str, str]]:
        """(kind, name, type) of the first way to show a face that the graph offers."""
        node = self.demo.node
        ns = self.demo.prefix
        for name, types in node.get_service_names_and_types():
            if name.endswith("/set_face_expression") and name.startswith(ns + "/") and types:
                return "service", name, types[0]
        for name, types in node.get_topic_names_and_types():
            if name == f"{ns}/face/expression" and types:
                return "topic", name, types[0]
        driver_ns = ns or "/"
        try:
            subscribed = node.get_subscriber_names_and_types_by_node("cozmo_driver", driver_ns)
        except RuntimeError:        # NodeNameNonExistentError: no driver, no display topic
            subscribed = []
        displays = [(name, types[0]) for name, types in subscribed
                    if types and "display" in name and types[0] in _DISPLAY_TYPES]
        displays.sort(key=lambda item: _DISPLAY_TYPES.index(item[1]))
        if displays:
            return ("display", *displays[0])
        return None

    def face(self) -> None:
        self.demo.activity = "face"
        found = self._find_face()
        # a face node that was started may take a moment to offer its interfaces
        wait_until = time.monotonic() + (8.0 if self.demo.face_node_running() else 1.0)
        while found is None and time.monotonic() < wait_until:
            self.demo.sleep(0.2)
            found = self._find_face()
            if found is None and not self.demo.face_node_running():
                wait_until = min(wait_until, time.monotonic() + 0.5)
        result = self.demo.result
        if found is None:
            result.face_how = ("skipped: nothing offers a set_face_expression service, a "
                               "face/expression topic or a display topic of the driver")
            self.demo.out(f"face: {result.face_how}")
            return
        kind, name, type_name = found
        expression = self.demo.options.expression
        try:
            if kind == "service":
                result.face_shown = self._face_by_service(name, type_name, expression)
            elif kind == "topic":
                result.face_shown = self._face_by_topic(name, type_name, expression)
            else:
                result.face_shown = self._face_by_display(name, type_name, expression)
        except (ValueError, TypeError, AttributeError, AssertionError, KeyError) as exc:
            # an interface of another shape than expected: a note, not a failure
            result.face_how = f"{kind} {name} ({type_name}) could not be used: {exc}"
            self.demo.out(f"face: {result.face_how}")

    def _face_by_service(self, name: str, type_name: str, expression: str) -> bool:
        srv = interface_class(type_name)
        if srv is None:
            self.demo.result.face_how = f"service {name}: type {type_name} not importable"
            self.demo.out(f"face: {self.demo.result.face_how}")
            return False
        request = srv.Request()
        used = set_text(request, expression, ("expression", "name", "face", "data"))
        if used is None:
            self.demo.result.face_how = f"service {name} ({type_name}) has no expression field"
            self.demo.out(f"face: {self.demo.result.face_how}")
            return False
        client = self.demo.node.create_client(srv, name)
        try:
            if not client.wait_for_service(timeout_sec=3.0):
                self.demo.result.face_how = f"service {name} did not become available"
                self.demo.out(f"face: {self.demo.result.face_how}")
                return False
            self.demo.out(f"face: {used}='{expression}' -> service {name}")
            future = client.call_async(request)
            if not wait_future(future, 5.0):
                self.demo.result.face_how = f"service {name} did not answer within 5 s"
                self.demo.out(f"face: {self.demo.result.face_how}")
                return False
            response = future.result()
            ok = bool(getattr(response, "success", True))
            message = getattr(response, "message", "")
            self.demo.result.face_how = f"'{expression}' via service {name}" + \
                (f" ({message})" if message else "")
            if not ok:
                self.demo.out(f"face: refused: {message}")
            return ok
        finally:
            self.demo.node.destroy_client(client)

    def _publish_when_matched(self, msg_type: Any, name: str, msg: Any, qos: Any) -> None:
        publisher = self.demo.node.create_publisher(msg_type, name, qos)
        try:
            end = time.monotonic() + 3.0
            while publisher.get_subscription_count() == 0 and time.monotonic() < end:
                self.demo.sleep(0.05)
            publisher.publish(msg)
            self.demo.sleep(0.3)           # let a reliable sample reach the subscriber
        finally:
            self.demo.node.destroy_publisher(publisher)

    def _face_by_topic(self, name: str, type_name: str, expression: str) -> bool:
        msg_type = interface_class(type_name)
        if msg_type is None:
            self.demo.result.face_how = f"topic {name}: type {type_name} not importable"
            self.demo.out(f"face: {self.demo.result.face_how}")
            return False
        msg = msg_type()
        used = set_text(msg, expression, ("expression", "name", "face", "data"))
        if used is None:
            self.demo.result.face_how = f"topic {name} ({type_name}) has no expression field"
            self.demo.out(f"face: {self.demo.result.face_how}")
            return False
        self.demo.out(f"face: {used}='{expression}' -> topic {name}")
        self._publish_when_matched(msg_type, name, msg, _RELIABLE)
        self.demo.result.face_how = f"'{expression}' via topic {name}"
        return True

    def _face_by_display(self, name: str, type_name: str, expression: str) -> bool:
        from ..face.expressions import expression as face_expression
        from ..face.procedural import render_face

        screen = render_face(face_expression(expression))          # (64, 128) bool
        image = Image()
        image.header.stamp = self.demo.node.get_clock().now().to_msg()
        image.height, image.width = screen.shape
        image.encoding = "mono8"
        image.step = image.width
        image.data = (screen.astype(np.uint8) * 255).tobytes()
        msg_type = interface_class(type_name)
        if msg_type is None:
            raise ValueError(f"type {type_name} is not importable")
        if msg_type is Image:
            msg = image
        else:                       # a message around the image (and a duration: 0, for good)
            msg = msg_type()
            fields = [n for n, kind in _fields(msg).items() if kind == "sensor_msgs/Image"]
            if not fields:
                raise ValueError(f"{type_name} has no sensor_msgs/Image field")
            setattr(msg, fields[0], image)
        self.demo.out(f"face: a rendered '{expression}' face, 128x64 mono8 -> topic {name} "
                 f"({type_name})")
        self._publish_when_matched(msg_type, name, msg, _RELIABLE)
        self.demo.result.face_how = f"a rendered '{expression}' face on the display topic {name}"
        return True

    # --- animation

    def animation(self) -> None:
        """Play ``options.animation`` through the ``play_animation`` action, showing its
        progress in the status line, and wait for the result."""
        self.demo.activity = "animation"
        result = self.demo.result
        name = self.demo.options.animation
        from rclpy.action import ActionClient, get_action_names_and_types

        found = None
        for action_name, types in get_action_names_and_types(self.demo.node):
            if action_name == f"{self.demo.prefix}/play_animation" and types:
                found = (action_name, types[0])
                break
        if found is None:
            result.animation_how = "skipped: nothing offers a play_animation action"
            self.demo.out(f"animation: {result.animation_how}")
            return
        action_name, type_name = found
        action = interface_class(type_name)
        goal = action.Goal() if action is not None else None
        if goal is None or set_text(goal, name, ("name", "animation", "clip")) is None:
            result.animation_how = (f"skipped: action {action_name} ({type_name}) takes no "
                                    "animation name the demo knows how to fill")
            self.demo.out(f"animation: {result.animation_how}")
            return
        client = ActionClient(self.demo.node, action, action_name)
        try:
            if not client.wait_for_server(timeout_sec=3.0):
                result.animation_how = f"skipped: action server {action_name} did not answer"
                self.demo.out(f"animation: {result.animation_how}")
                return
            before = self.demo.truth_source.animations_ended() if self.demo.truth_source else None

            def on_feedback(message: Any) -> None:      # executor thread
                progress = float(getattr(message.feedback, "progress", 0.0))
                result.animation_progress.append(progress)
                self.demo.activity = f"animation {name} {progress * 100:3.0f} %"

            self.demo.out(f"animation: name='{name}' -> action {action_name}")
            self.demo.activity = f"animation {name}   0 %"
            goal_future = client.send_goal_async(goal, feedback_callback=on_feedback)
            self._wait_for(goal_future, 5.0)
            handle = goal_future.result() if goal_future.done() else None
            if handle is None or not handle.accepted:
                result.animation_how = (f"action {action_name}: the goal was "
                                        f"{'rejected' if handle is not None else 'not answered'}")
                return
            result_future = handle.get_result_async()
            self._wait_for(result_future, 30.0)
            if not result_future.done():
                handle.cancel_goal_async()
                result.animation_how = f"action {action_name}: no result within 30 s (cancelled)"
                return
            ok, outcome = action_outcome(result_future.result())
            result.animation_played = ok
            progress = result.animation_progress
            seen = (f"; {len(progress)} progress feedbacks, {progress[0] * 100:.0f} % .. "
                    f"{progress[-1] * 100:.0f} %" if progress else "; no progress feedback")
            result.animation_how = f"'{name}' via action {action_name}: {outcome}{seen}"
            if before is not None:
                # the robot reports AnimationEnded once it has played what it buffered, which
                # can be a few frames after the driver sent the last one: wait for it, bounded
                after = self.demo.truth_source.animations_ended()
                end = time.monotonic() + 3.0
                while after is not None and after == before and time.monotonic() < end:
                    self.demo.sleep(0.1)
                    after = self.demo.truth_source.animations_ended()
                result.animations_ended = None if after is None else after - before
        finally:
            if result.animation_how and not result.animation_how.startswith("skipped"):
                self.demo.out(f"animation: {result.animation_how}")
            client.destroy()
            self.demo.activity = "animation done"

    def _wait_for(self, future: Any, timeout: float) -> None:
        """Wait until ``future`` is done or ``timeout`` s pass, checking the run meanwhile."""
        end = time.monotonic() + timeout
        while not future.done() and time.monotonic() < end:
            self.demo.sleep(0.02)

    # --- sound

    def sound(self) -> None:
        self.demo.activity = "sound"
        result = self.demo.result
        wav = self.demo.options.sound
        from rclpy.action import ActionClient, get_action_names_and_types

        found = None
        for name, types in get_action_names_and_types(self.demo.node):
            if name.endswith("/play_audio") and name.startswith(self.demo.prefix + "/") and types:
                found = (name, types[0])
                break
        if found is None or wav is None:
            result.sound_how = "skipped: nothing offers a play_audio action" \
                if found is None else "skipped: no sound file"
            self.demo.out(f"sound: {result.sound_how}")
            return
        name, type_name = found
        action = interface_class(type_name)
        if action is None:
            result.sound_how = f"skipped: action {name}: type {type_name} not importable"
            self.demo.out(f"sound: {result.sound_how}")
            return
        goal = action.Goal()
        how = fill_audio_goal(goal, wav)
        if how is None:
            result.sound_how = (f"skipped: action {name} ({type_name}) takes no file path or "
                                "WAV bytes the demo knows how to fill")
            self.demo.out(f"sound: {result.sound_how}")
            return
        client = ActionClient(self.demo.node, action, name)
        if not client.wait_for_server(timeout_sec=3.0):
            result.sound_how = f"skipped: action server {name} did not answer"
            self.demo.out(f"sound: {result.sound_how}")
            return
        self.demo.out(f"sound: {wav.name} -> action {name} ({how})")
        self._sound_future = (client, client.send_goal_async(goal), name)
        result.sound_sent = True

    def sound_result(self) -> None:
        if self._sound_future is None:
            return
        client, goal_future, name = self._sound_future
        result = self.demo.result
        try:
            if not wait_future(goal_future, 3.0):
                result.sound_how = f"action {name}: the goal was not answered"
                return
            handle = goal_future.result()
            if not handle.accepted:
                result.sound_how = f"action {name}: the goal was rejected"
                return
            result_future = handle.get_result_async()
            if not wait_future(result_future, 10.0):
                result.sound_how = f"action {name}: no result within 10 s"
                return
            ok, outcome = action_outcome(result_future.result())
            result.sound_played = ok
            result.sound_how = f"{self.demo.options.sound.name} via action {name}: {outcome}"
        finally:
            self.demo.out(f"sound: {result.sound_how}")
            client.destroy()
