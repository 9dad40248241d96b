"""The media steps of ``cozmo-demo`` (show a face, play an animation, play a sound) and
the way every request of the demo is made: :class:`SpinningCaller`.

:class:`MediaSteps` runs the steps for a :class:`~cozmo_driver.ros.demo_node.Demonstration`
(its node, options, output and result) through whatever the ROS graph offers:
the face node's ``set_face_expression`` service or ``face/expression`` topic, else
a rendered face on a display topic of the driver; the driver's
``play_animation`` and ``play_audio`` actions. Interfaces are found by name and
their requests filled by field name and type (the helpers below), so nothing
here needs an interface package beyond the driver's. Each step records what
went wrong in the result's ``failures``: a goal not answered or rejected, no
result, a failed result, a refused or unanswered service call, an interface
that should be there and is not.

:class:`SpinningCaller` makes each service call and action goal on the one thread
that spins the executor, and awaits it there by spinning. rclpy registers the
future of a request only after the request is sent (``ActionClient.send_goal_async``,
``get_result_async`` and ``cancel_goal_async`` in Humble and Jazzy, ros2/rclpy#1123):
an executor spinning on another thread may take the response first, log "Ignoring
unexpected goal response" and drop it, and the future never completes. With one thread
doing both, no response can arrive between the send and the registration.
"""

from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np
from sensor_msgs.msg import Image

from . import qos

__all__ = ["MediaSteps", "SpinningCaller", "action_outcome", "fill_audio_goal",
           "interface_class", "set_text"]

_RELIABLE = qos.profile(10)
#: message types of a display topic of the driver, the preferred first
_DISPLAY_TYPES = ("cozmo_interfaces/msg/DisplayImage", "sensor_msgs/msg/Image")
#: how long the driver's (or the face node's) interfaces may take to show in the graph and
#: to match a client (an upper bound: each wait ends as soon as they do; on a loaded
#: machine discovery has been seen to take more than 5 s)
DISCOVERY_S = 10.0
#: how long a goal or a service call may take to be answered
ANSWER_S = 5.0


class SpinningCaller:
    """Requests made and awaited on the thread that spins ``executor`` (see the module
    docstring). Every method must be called from the thread that created this object;
    any other raises RuntimeError. Waits spin the executor in steps of ``step_s`` and
    call ``check()`` between steps (it may raise, e.g. to stop the run), so that the
    node's subscriptions keep being served while a request is awaited."""

    def __init__(self, executor: Any, check: Callable[[], None] = lambda: None,
                 step_s: float = 0.02) -> None:
        self.executor = executor
        self.check = check
        self.step_s = step_s
        self._owner = threading.get_ident()

    def _own(self) -> None:
        if threading.get_ident() != self._owner:
            raise RuntimeError(
                "SpinningCaller used from a thread that does not spin its executor: a response "
                "could be taken before its future is registered (ros2/rclpy#1123)")

    # --- waiting

    def spin_for(self, seconds: float) -> None:
        """Spin for ``seconds``."""
        self._own()
        end = time.monotonic() + seconds
        while True:
            self.check()
            left = end - time.monotonic()
            if left <= 0:
                return
            self.executor.spin_once(timeout_sec=min(self.step_s, left))

    def spin_until(self, predicate: Callable[[], Any], timeout: float) -> bool:
        """Spin until ``predicate()`` is true (True) or ``timeout`` s passed (False)."""
        self._own()
        end = time.monotonic() + timeout
        while True:
            if predicate():
                return True
            self.check()
            left = end - time.monotonic()
            if left <= 0:
                return bool(predicate())
            self.executor.spin_once(timeout_sec=min(self.step_s, left))

    def wait_for_service(self, client: Any, timeout: float) -> bool:
        return self.spin_until(client.service_is_ready, timeout)

    def wait_for_server(self, client: Any, timeout: float) -> bool:
        return self.spin_until(client.server_is_ready, timeout)

    # --- requests

    def call(self, client: Any, request: Any, timeout: float = ANSWER_S) -> Optional[Any]:
        """The response of service ``client`` to ``request``; None if none came in time."""
        self._own()
        future = client.call_async(request)
        if self.spin_until(future.done, timeout):
            return future.result()
        future.cancel()             # forgotten: a late answer is dropped
        return None

    def send_goal(self, client: Any, goal: Any, timeout: float = ANSWER_S,
                  feedback_callback: Optional[Callable[[Any], None]] = None) -> Optional[Any]:
        """The goal handle (accepted or not) of ``goal`` sent by action ``client``; None if
        the server did not answer in time. Feedback goes to ``feedback_callback`` on this
        thread, while this caller spins."""
        self._own()
        future = client.send_goal_async(goal, feedback_callback=feedback_callback)
        if self.spin_until(future.done, timeout):
            return future.result()
        future.cancel()
        return None

    def result_future(self, handle: Any) -> Any:
        """The future of an accepted goal's result (await it with :meth:`spin_until`)."""
        self._own()
        return handle.get_result_async()

    def result(self, handle: Any, timeout: float) -> Optional[Any]:
        """The wrapped result (``status`` and ``result``) of an accepted goal; None if it
        did not come in time."""
        future = self.result_future(handle)
        return future.result() if self.spin_until(future.done, timeout) else None

    def cancel(self, handle: Any, timeout: float = ANSWER_S) -> Optional[Any]:
        """Cancel an accepted goal; the cancel response, or None."""
        self._own()
        future = handle.cancel_goal_async()
        return future.result() if self.spin_until(future.done, timeout) else None


#: action_msgs/GoalStatus values a result can end with
_ENDED = {4: "succeeded", 5: "canceled", 6: "aborted"}


def action_outcome(wrapped: Any) -> Tuple[bool, str]:
    """(succeeded, "succeeded (message)" / "aborted (message)" / ...) of an action's wrapped
    result: success needs the SUCCEEDED status and a result without ``success=False``."""
    outcome = wrapped.result
    ok = bool(getattr(outcome, "success", True)) and wrapped.status == 4  # SUCCEEDED
    message = getattr(outcome, "message", "")
    if ok:
        text = "succeeded"
    elif wrapped.status == 4:
        text = "failed (succeeded with success=false)"
    else:
        text = _ENDED.get(wrapped.status, f"failed (status {wrapped.status})")
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
    a path, file name or URI string; or the file's bytes; returns how, or None. Any other
    field keeps its default: the robot's volume in particular, which play_audio would keep
    after the sound (its default leaves the volume as it is)."""
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
    return how


class MediaSteps:
    """The face, animation and sound steps of one demonstration ``demo`` (its ``node``,
    ``calls``, ``options``, ``result``, ``out``, ``sleep`` and ``failed``)."""

    def __init__(self, demo: Any) -> None:
        self.demo = demo
        self._sound: Optional[Tuple[Any, Any, str]] = None    # client, result future, name

    def _note(self, step: str, how: str) -> None:
        """``how`` the step went, printed; the result keeps it."""
        setattr(self.demo.result, f"{step}_how", how)
        self.demo.out(f"{step}: {how}")

    def _fail(self, step: str, how: str) -> None:
        """The step failed: ``how``, printed and kept in the result's failures."""
        setattr(self.demo.result, f"{step}_how", how)
        self.demo.failed(step, how)

    def _find_action(self, suffix: str) -> Optional[Tuple[str, str]]:
        """(name, type) of the action ``<namespace>/<suffix>``, waiting for the graph to
        show it (the driver runs: its interfaces come with it, but discovery takes a
        moment); None if it did not show within :data:`DISCOVERY_S`."""
        from rclpy.action import get_action_names_and_types

        wanted = f"{self.demo.prefix}/{suffix}"
        found: list = []

        def look() -> bool:
            for name, types in get_action_names_and_types(self.demo.node):
                if name == wanted and types:
                    found.append((name, types[0]))
                    return True
            return False

        self.demo.calls.spin_until(look, DISCOVERY_S)
        return found[0] if found else None

    # --- face

    def _find_face(self, display: bool = True) -> Optional[Tuple[str, str, str]]:
        """(kind, name, type) of the first way to show a face that the graph offers: the
        face node's service or topic, else (``display``) a display topic of the driver."""
        node = self.demo.node
        ns = self.demo.prefix           # "" or "/robot1": the face node's names are ns + "/..."
        for name, types in node.get_service_names_and_types():
            # exactly this namespace's: not another stack's under a namespace of its own
            if name == f"{ns}/set_face_expression" and types:
                return "service", name, types[0]
        for name, types in node.get_topic_names_and_types():
            if name == f"{ns}/face/expression" and types:
                return "topic", name, types[0]
        if not display:
            return None
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
        calls = self.demo.calls
        face_node = self.demo.face_node_running()
        found: list = []

        def look(display: bool) -> bool:
            way = self._find_face(display)
            if way is not None:
                found.append(way)
            return way is not None

        if face_node:
            # the face node started with the stack: its interfaces, once discovered (it
            # may start after the driver, whose display topic must not be taken instead)
            calls.spin_until(lambda: look(False) or not self.demo.face_node_running(),
                             DISCOVERY_S)
            face_node = self.demo.face_node_running()
        if not found and not face_node:
            calls.spin_until(lambda: look(True), 1.0)
        result = self.demo.result
        if not found:
            if face_node:
                self._fail("face", "the face node runs but offers no set_face_expression "
                                   f"service or face/expression topic after {DISCOVERY_S:g} s")
            else:   # nothing was started that shows a face: a note, not a failure
                self._note("face", "skipped: nothing offers a set_face_expression service, a "
                                   "face/expression topic or a display topic of the driver")
            return
        kind, name, type_name = found[0]
        expression = self.demo.options.expression
        try:
            if kind == "service":
                result.face_shown = self._face_by_service(name, type_name, expression)
            elif kind == "topic":
                result.face_shown = self._face_by_topic(name, type_name, expression)
            else:
                result.face_shown = self._face_by_display(name, type_name, expression)
        except (ValueError, TypeError, AttributeError, AssertionError, KeyError) as exc:
            self._fail("face", f"{kind} {name} ({type_name}) could not be used: {exc}")

    def _face_by_service(self, name: str, type_name: str, expression: str) -> bool:
        srv = interface_class(type_name)
        if srv is None:
            self._fail("face", f"service {name}: type {type_name} not importable")
            return False
        request = srv.Request()
        used = set_text(request, expression, ("expression", "name", "face", "data"))
        if used is None:
            self._fail("face", f"service {name} ({type_name}) has no expression field")
            return False
        calls = self.demo.calls
        client = self.demo.node.create_client(srv, name)
        try:
            if not calls.wait_for_service(client, DISCOVERY_S):
                self._fail("face", f"service {name} did not become available within "
                                   f"{DISCOVERY_S:g} s")
                return False
            self.demo.out(f"face: {used}='{expression}' -> service {name}")
            response = calls.call(client, request, ANSWER_S)
            if response is None:
                self._fail("face", f"service {name} did not answer within {ANSWER_S:g} s")
                return False
            ok = bool(getattr(response, "success", True))
            message = getattr(response, "message", "")
            how = f"'{expression}' via service {name}" + (f" ({message})" if message else "")
            if not ok:
                self._fail("face", f"service {name} refused '{expression}'"
                           + (f": {message}" if message else ""))
                return False
            self.demo.result.face_how = how
            return True
        finally:
            self.demo.node.destroy_client(client)

    def _publish_when_matched(self, msg_type: Any, name: str, msg: Any, qos: Any) -> bool:
        """Publish ``msg`` on ``name`` once a subscriber matched (within :data:`DISCOVERY_S`);
        whether one did."""
        publisher = self.demo.node.create_publisher(msg_type, name, qos)
        try:
            matched = self.demo.calls.spin_until(
                lambda: publisher.get_subscription_count() > 0, DISCOVERY_S)
            if matched:
                publisher.publish(msg)
                self.demo.sleep(0.3)           # let a reliable sample reach the subscriber
            return matched
        finally:
            self.demo.node.destroy_publisher(publisher)

    def _face_by_topic(self, name: str, type_name: str, expression: str) -> bool:
        msg_type = interface_class(type_name)
        if msg_type is None:
            self._fail("face", f"topic {name}: type {type_name} not importable")
            return False
        msg = msg_type()
        used = set_text(msg, expression, ("expression", "name", "face", "data"))
        if used is None:
            self._fail("face", f"topic {name} ({type_name}) has no expression field")
            return False
        self.demo.out(f"face: {used}='{expression}' -> topic {name}")
        if not self._publish_when_matched(msg_type, name, msg, _RELIABLE):
            self._fail("face", f"nothing subscribed to topic {name} within {DISCOVERY_S:g} s")
            return False
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
        if not self._publish_when_matched(msg_type, name, msg, _RELIABLE):
            self._fail("face", f"the driver did not subscribe to {name} within {DISCOVERY_S:g} s")
            return False
        self.demo.result.face_how = f"a rendered '{expression}' face on the display topic {name}"
        return True

    def _estop_skips(self, step: str, name: str) -> bool:
        """Whether ``step`` (which moves the robot) is skipped, with a note: the emergency
        stop was engaged during the run, or when it began (released since or not)."""
        if not self.demo.estop_latched():
            return False
        self._note(step, f"'{name}': skipped: the emergency stop was engaged (emergency_stop/engaged)")
        return True

    # --- animation

    def animation(self) -> None:
        """Play ``options.animation`` through the ``play_animation`` action, showing its
        progress in the status line, and wait for the result."""
        self.demo.activity = "animation"
        result = self.demo.result
        name = self.demo.options.animation
        calls = self.demo.calls
        if self._estop_skips("animation", name):
            return
        found = self._find_action("play_animation")
        if found is None:
            self._fail("animation", f"the driver offers no {self.demo.prefix}/play_animation "
                                    f"action (not in the ROS graph after {DISCOVERY_S:g} s)")
            return
        action_name, type_name = found
        action = interface_class(type_name)
        goal = action.Goal() if action is not None else None
        if goal is None or set_text(goal, name, ("name", "animation", "clip")) is None:
            self._fail("animation", f"action {action_name} ({type_name}) takes no animation "
                                    "name the demo knows how to fill")
            return
        from rclpy.action import ActionClient

        client = ActionClient(self.demo.node, action, action_name)
        try:
            if not calls.wait_for_server(client, DISCOVERY_S):
                self._fail("animation", f"action server {action_name} did not answer")
                return
            truth = self.demo.truth_source
            before = truth.animations_ended() if truth is not None else None

            def on_feedback(message: Any) -> None:      # this thread, while it spins
                progress = float(getattr(message.feedback, "progress", 0.0))
                result.animation_progress.append(progress)
                self.demo.activity = f"animation {name} {progress * 100:3.0f} %"

            if self._estop_skips("animation", name):    # engaged while the action was looked for
                return
            self.demo.out(f"animation: name='{name}' -> action {action_name}")
            self.demo.activity = f"animation {name}   0 %"
            handle = calls.send_goal(client, goal, ANSWER_S, feedback_callback=on_feedback)
            if handle is None:
                self._fail("animation", f"action {action_name}: the goal was not answered "
                                        f"within {ANSWER_S:g} s")
                return
            if not handle.accepted:
                self._fail("animation", f"action {action_name}: the goal name='{name}' was "
                                        "rejected (the driver's log says why)")
                return
            wrapped = calls.result(handle, 30.0)
            if wrapped is None:
                calls.cancel(handle, 2.0)
                self._fail("animation", f"action {action_name}: no result within 30 s "
                                        "(cancelled)")
                return
            ok, outcome = action_outcome(wrapped)
            result.animation_played = ok
            progress = result.animation_progress
            seen = (f"; {len(progress)} progress feedbacks, {progress[0] * 100:.0f} % .. "
                    f"{progress[-1] * 100:.0f} %" if progress else "; no progress feedback")
            how = f"'{name}' via action {action_name}: {outcome}{seen}"
            if not ok:
                self._fail("animation", how)
                return
            self._note("animation", how)
            if before is not None:
                # the robot reports AnimationEnded once it has played what it buffered, which
                # can be a few frames after the driver sent the last one: wait for it, bounded
                # (asked every 0.1 s: each question is a call into the simulator's thread)
                end = time.monotonic() + 3.0
                after = truth.animations_ended()
                while after is not None and after == before and time.monotonic() < end:
                    self.demo.sleep(0.1)
                    after = truth.animations_ended()
                result.animations_ended = None if after is None else after - before
                if result.animations_ended is not None and result.animations_ended < 1:
                    self.demo.failed("animation", "the simulated robot did not report the "
                                                  "animation ended (AnimationEnded) within 3 s")
        finally:
            client.destroy()
            self.demo.activity = "animation done"

    # --- sound

    def sound(self) -> None:
        """Send the sound's goal and wait for it to be accepted; its result is awaited at
        the end (:meth:`sound_result`), the square being driven meanwhile."""
        self.demo.activity = "sound"
        wav = self.demo.options.sound
        calls = self.demo.calls
        if wav is None:
            self._note("sound", "skipped: no sound file")
            return
        found = self._find_action("play_audio")
        if found is None:
            self._fail("sound", f"the driver offers no {self.demo.prefix}/play_audio action "
                                f"(not in the ROS graph after {DISCOVERY_S:g} s)")
            return
        name, type_name = found
        action = interface_class(type_name)
        if action is None:
            self._fail("sound", f"action {name}: type {type_name} not importable")
            return
        goal = action.Goal()
        how = fill_audio_goal(goal, wav)
        if how is None:
            self._fail("sound", f"action {name} ({type_name}) takes no file path or WAV bytes "
                                "the demo knows how to fill")
            return
        from rclpy.action import ActionClient

        client = ActionClient(self.demo.node, action, name)
        keep = False
        try:
            if not calls.wait_for_server(client, DISCOVERY_S):
                self._fail("sound", f"action server {name} did not answer")
                return
            self.demo.out(f"sound: {wav.name} -> action {name} ({how})")
            self.demo.result.sound_sent = True
            handle = calls.send_goal(client, goal, ANSWER_S)
            if handle is None:
                self._fail("sound", f"action {name}: the goal was not answered within "
                                    f"{ANSWER_S:g} s")
                return
            if not handle.accepted:
                self._fail("sound", f"action {name}: the goal {wav.name} was rejected (the "
                                    "driver's log says why)")
                return
            self._sound = (client, calls.result_future(handle), name)
            keep = True
        finally:
            if not keep:
                client.destroy()

    def sound_result(self) -> None:
        """Wait for the result of the sound's goal (bounded) and check it."""
        if self._sound is None:
            return
        client, future, name = self._sound
        # kept while it is waited for: a run stopped in the wait (DemoAbort) leaves it to
        # sound_unawaited, which says so
        done = self.demo.calls.spin_until(future.done, 10.0)
        self._sound = None
        try:
            if not done:
                self._fail("sound", f"action {name}: no result within 10 s")
                return
            self._sound_outcome(future, name)
        finally:
            client.destroy()

    def sound_unawaited(self) -> None:
        """The run stopped before :meth:`sound_result` (the link lost, the deadline, a
        process exited): the sound's result if it came meanwhile, checked, else that it was
        not awaited; nothing is waited for."""
        if self._sound is None:
            return
        client, future, name = self._sound
        self._sound = None
        try:
            if future.done():
                self._sound_outcome(future, name)
            else:
                self._note("sound", f"{self.demo.options.sound.name} via action {name}: sent; "
                                    "result not awaited (the run stopped)")
        finally:
            client.destroy()

    def _sound_outcome(self, future: Any, name: str) -> None:
        """Check the sound's result (``future`` done) and say how it went."""
        ok, outcome = action_outcome(future.result())
        self.demo.result.sound_played = ok
        how = f"{self.demo.options.sound.name} via action {name}: {outcome}"
        if ok:
            self._note("sound", how)
        else:
            self._fail("sound", how)
