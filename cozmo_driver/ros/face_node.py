"""``cozmo_face_node``: Cozmo's procedural face, alive, as an image for the driver's display.

The node animates the face (:class:`~cozmo_driver.face.expressions.FaceAnimator`:
eased expression changes, gaze, blinks and saccades while idle) and renders it
(:class:`~cozmo_driver.face.procedural.FaceRenderer`) at ``fps`` frames a
second, publishing ``display/face`` (sensor_msgs/Image, mono8, 128 x 64, 0 or
255) only when the picture changes, and again every ``keepalive_s``
(:class:`~cozmo_driver.face.stream.FaceStream`). The driver shows it as its
face layer, below animations and timed images, so this node never needs to
know what else is on the screen: it keeps publishing and the driver's pacer
decides.

Interfaces (names relative to the node's namespace, like the driver's):

* publishes ``display/face`` (reliable, transient local, depth 1: a late
  subscriber gets the current face);
* subscribes ``face/expression`` (std_msgs/String: an expression name, or ``blink``: one
  blink, the expression kept),
  ``face/params`` (std_msgs/Float32MultiArray: the 43 raw parameters in CLAD
  order, as the service takes them; eased over ``transition_s``) and
  ``face/look_at`` (geometry_msgs/Point: x, y in -1..1; +x: towards the robot's
  left (the screen's right as seen from the front), so from the robot's camera image
  x = -(2u/width - 1); +y: down (on the screen and in the camera image: y = 2v/height - 1);
  z unused);
* serves ``set_face_expression`` (cozmo_interfaces/SetFaceExpression: a name,
  or the 43 raw parameters in CLAD order, with a transition time).

Threads: the frames are rendered and published on a thread of the node's own,
paced by the monotonic clock, not by a timer of the executor: every executor
wake-up rebuilds its wait set of every entity it spins, which in one process
with the driver (``cozmo_stack``) is every entity of the stack. ``face/look_at``,
which a gaze tracker sends at its camera's rate, is served like the driver's
``cmd_vel`` (:class:`~cozmo_driver.ros.subscription_thread.ThreadedSubscription`:
a companion node ``_<node name>_look_at`` with an executor of its own, where
rclpy allows). The animator is shared under a lock.

In one process with the driver (``cozmo_stack``), the stack hands each frame
to the driver's display directly (:meth:`FaceNode.show_locally`), and the node
publishes ``display/face`` only while something else subscribes to it (asked
every ``_COUNT_EVERY_S``: a new subscriber gets the current face within that time,
and no older one first: when nothing else subscribes, the publisher is made anew,
so that its history holds no face that would go stale).
Until then the driver pulls the frames (:meth:`FaceNode.pull_frame`, on its
I/O thread at each tick of its display): each is rendered at the tick that
sends it, and the frame thread only asks for subscribers. ``face/look_at`` is
then read at each frame, before it is rendered, instead of on a thread
(:class:`~cozmo_driver.ros.subscription_thread.PolledSubscription`): the
messages that came since the last frame are applied in order, each from when it
was received (at most a frame back), with no wake-up of their own.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
import rclpy
from cozmo_interfaces.srv import SetFaceExpression
from geometry_msgs.msg import Point
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import Float32MultiArray, String

from ..face.expressions import BLINK, EXPRESSIONS, FaceAnimator, expression
from ..face.procedural import FACE_HEIGHT_PX, FACE_WIDTH_PX, NUM_PARAMS, PARAM_NAMES, FaceParams
from ..face.stream import FaceStream
from ..driver.parameters import ParamSpec
from ..face.parameters import FACE_PARAMETERS
from ..lifeline import exit_with_parent
from ..log_throttle import LogThrottle
from ._entry import DoubleParameters, destroyed_if_refused, init, make_node, spin_node, unknown_parameters
from . import qos
from .subscription_thread import PolledSubscription, ThreadedSubscription, Unsupported, end_at_exit
from .usage import answer_help
from .qos import QOS_LATCHED, QOS_QUEUE

__all__ = ["FaceNode", "main", "raw_face"]

#: how long destroy_node waits for the frame thread to end, seconds
_JOIN_S = 2.0
#: in one process with the driver: how often display/face's subscriber count is asked, seconds
_COUNT_EVERY_S = 0.2
#: the longest transition a command may ask for (the transition_s parameter's range), s
_MAX_TRANSITION_S = 10.0
#: a refused name longer than this is quoted cut (its log line and the service's answer)
_MAX_QUOTED = 64
#: the warnings of face/expression and face/look_at repeat at most this often, s
_WARN_PERIOD_S = 2.0
#: the throttle's kind of the info lines of face/expression (the same expression again)
_SAID_EXPRESSION = "expression said"
#: with nothing subscribed to display/face this long from the start, the node says what it waits for, s
NO_SUBSCRIBER_S = 5.0


@dataclass
class LocalDisplay:
    """A display in this process that takes the face frames directly (the driver's, in
    ``cozmo_stack``): ``show(screen, stamp_ns)`` with the ``(64, 128)`` bool screen, or
    only its even rows, ``(32, 128)``, the ones the robot shows (while nothing else
    subscribes to ``display/face``), and ``subscriptions()``: how many of
    ``display/face``'s subscriptions are its own."""

    show: Callable[[np.ndarray, int], None]
    subscriptions: Callable[[], int]


def _descriptor(spec: ParamSpec) -> ParameterDescriptor:
    """Read at start-up only: read-only, so that ``ros2 param set`` says so instead of
    reporting a change that nothing applies."""
    unit = f" [{spec.unit}]" if spec.unit else ""
    descriptor = ParameterDescriptor(description=f"{spec.description}{unit}; read at start-up",
                                     read_only=True)
    if spec.minimum is not None:
        descriptor.floating_point_range = [FloatingPointRange(from_value=float(spec.minimum),
                                                              to_value=float(spec.maximum))]
    return descriptor


def _quoted(name: str) -> str:
    """``name``, cut if it is longer than any expression's may be (so that a refusal that
    quotes it stays one readable line)."""
    return name if len(name) <= _MAX_QUOTED else f"{name[:_MAX_QUOTED]}... ({len(name)} characters)"


def raw_face(values: Sequence[float]) -> Tuple[FaceParams, List[str]]:
    """The face of 43 raw parameters in CLAD order, and what was clamped to its range.

    Raises ValueError saying what is wrong: the number of values, or which are not
    finite numbers (by index and name)."""
    if len(values) != NUM_PARAMS:
        raise ValueError(f"{len(values)} value{'' if len(values) == 1 else 's'}; a face has "
                         f"{NUM_PARAMS} (CLAD order)")
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        named = ", ".join(f"[{i}] {PARAM_NAMES[i]} = {values[i]}" for i in bad[:3])
        raise ValueError(f"not finite numbers: {named}{' ...' if len(bad) > 3 else ''}")
    return FaceParams.from_array(np.asarray(values, dtype=np.float64)).validated()


class FaceNode(DoubleParameters, Node):
    """See the module docstring."""

    def __init__(self, node_name: str = "cozmo_face", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        with destroyed_if_refused(self):  # refused: gone from the graph at once
            p = {spec.name: self.declare_parameter(spec.name, spec.default, _descriptor(spec)).value
                 for spec in FACE_PARAMETERS}
            for text in unknown_parameters(self, [spec.name for spec in FACE_PARAMETERS]):
                self.get_logger().warning(text)
            fps, start, idle, seed = p["fps"], p["expression"], p["idle"], p["seed"]
            self.transition_s = float(p["transition_s"])
            keepalive = p["keepalive_s"]
            try:
                base = expression(str(start))
            except KeyError as exc:
                raise ValueError(f"expression: {exc.args[0]}") from None
        now = time.monotonic()
        #: held by whoever reads or changes the animator (the frame thread, the callbacks)
        self._lock = threading.Lock()
        self._throttle = LogThrottle(_WARN_PERIOD_S)
        self._overdue_at = -math.inf
        #: when display/face's subscribers are next looked at (monotonic; None: no more)
        self._subscriber_check_at: Optional[float] = now + NO_SUBSCRIBER_S
        self._no_subscriber_said = False   # see _say_no_subscriber
        self._said_expression: Optional[str] = None  # the last name taken on face/expression
        self.animator = FaceAnimator(seed=int(seed), base=base, now=now, idle=bool(idle))
        self.stream = FaceStream(self.animator, keepalive_s=float(keepalive))
        self._msg = Image()
        self._msg.height, self._msg.width = FACE_HEIGHT_PX, FACE_WIDTH_PX
        self._msg.encoding = "mono8"
        self._msg.is_bigendian = 0
        self._msg.step = FACE_WIDTH_PX
        self._publisher = self._make_publisher()
        self._latched = False     # a face was published by this publisher (see _drop_latched)
        qos.create_subscription(self, String, "face/expression", self._on_expression, QOS_QUEUE,
                                overridable=False)
        qos.create_subscription(self, Float32MultiArray, "face/params", self._on_params, QOS_QUEUE,
                                overridable=False)
        self._look_at = ThreadedSubscription(self, Point, "face/look_at", self._on_look_at,
                                             QOS_QUEUE, suffix="look_at")
        self.create_service(SetFaceExpression, "set_face_expression", self._on_set_expression)
        self._period = 1.0 / float(fps)
        self._local: Optional[LocalDisplay] = None  # see show_locally
        #: frames published on display/face (with a local display, fewer than were shown)
        self.frames_published = 0
        self._others = True       # display/face has subscribers besides the local display
        self._counted_at = -math.inf
        self._pulled = False      # see show_locally
        self._pull_due = -math.inf
        self._look_at_polled: Optional[PolledSubscription] = None  # while pulled
        self._stop = threading.Event()
        self._frames = threading.Thread(target=self._run_frames, name="cozmo-face-frames", daemon=True)
        self._frames.start()
        end_at_exit(self.stop_frames)  # a node never destroyed: see subscription_thread
        self.get_logger().info(f"face '{start}' at {fps:g} fps on {self._publisher.topic_name}"
                               f"{' with idle life' if idle else ''}")

    # ------------------------------------------------------------------ commands

    def set_expression(self, name: str, transition_s: Optional[float] = None) -> str:
        """Ease to the named expression, or (``blink``) blink once, the expression kept;
        what was done. Raises KeyError naming the known ones."""
        key = name.strip().lower()
        if key == BLINK:
            with self._lock:
                self.animator.blink(time.monotonic())
            return f"face '{BLINK}': one blink, the expression kept"
        face = expression(name, blink_taken=True)
        duration = self.transition_s if transition_s is None or transition_s < 0 else transition_s
        with self._lock:
            self.animator.set_expression(face, time.monotonic(), duration)
        return f"face '{key}' in {duration:g} s"

    def _on_expression(self, msg: String) -> None:
        name = _quoted(msg.data.strip())
        try:
            text = self.set_expression(name)
        except KeyError as exc:
            self._warn("expression", f"face/expression refused: {exc.args[0]}")
            return
        self._say_expression(name.lower(), text)

    def _say_expression(self, name: str, text: str) -> None:
        """The info line of a face/expression: a change of name said at once (after the
        repeats held back of the one before, counted); the same name again (a publisher
        may send it 30 times a second) throttled as :meth:`_say`."""
        now = time.monotonic()
        if name != self._said_expression:
            self._said_expression = name
            for _, line, _ in self._throttle.flush(now, key=_SAID_EXPRESSION):
                self.get_logger().info(line)
            self._throttle.forget(_SAID_EXPRESSION)
        self._say(_SAID_EXPRESSION, text)

    def _warn(self, key: str, text: str) -> None:
        """A warning of a kind that a publisher may repeat 30 times a second: at most one
        per _WARN_PERIOD_S, which counts those left unsaid (said by :meth:`_say_overdue`
        if no other comes)."""
        line = self._throttle.line(key, text, time.monotonic())
        if line is not None:
            self.get_logger().warning(line)

    def _say(self, key: str, text: str) -> None:
        """An info line of a command that may come 30 times a second, throttled as _warn."""
        line = self._throttle.line(key, text, time.monotonic(), level=logging.INFO)
        if line is not None:
            self.get_logger().info(line)

    def _say_overdue(self, now: float) -> None:
        """(the frame thread, about once a second) The lines held back of each kind that
        then fell quiet."""
        if now < self._overdue_at:
            return
        self._overdue_at = now + 1.0
        for _, line, level in self._throttle.overdue(now):
            if level == logging.INFO:
                self.get_logger().info(line)
            else:
                self.get_logger().warning(line)

    def _say_no_subscriber(self, now: float) -> None:
        """(the frame thread) Nothing subscribed to display/face NO_SUBSCRIBER_S after the start
        (no driver, or one in another namespace): the face goes nowhere. Said once (then looked
        at every second), and once more when a subscriber comes; nothing in one process with
        the driver, which takes the frames directly (:meth:`show_locally`)."""
        due = self._subscriber_check_at
        if due is None or now < due:
            return
        if self._local is not None:
            self._subscriber_check_at = None
            return
        topic = self._publisher.topic_name
        if self._publisher.get_subscription_count() > 0:
            self._subscriber_check_at = None
            if self._no_subscriber_said:
                self.get_logger().info(f"{topic} has a subscriber now: the face goes to it")
            return
        self._subscriber_check_at = now + 1.0
        if not self._no_subscriber_said:
            self._no_subscriber_said = True
            self.get_logger().warning(
                f"nothing subscribes to {topic} yet (is cozmo_driver running, in this namespace?): the "
                "face is shown nowhere; it is published all the same, and a driver that comes gets it")

    def set_params(self, values: Sequence[float],
                   transition_s: Optional[float] = None) -> Tuple[str, List[str]]:
        """Ease to the raw face ``values``; returns what was done and what was clamped
        (raises ValueError from :func:`raw_face`, the face unchanged)."""
        face, clamped = raw_face(values)
        duration = self.transition_s if transition_s is None or transition_s < 0 else transition_s
        with self._lock:
            self.animator.set_expression(face, time.monotonic(), duration)
        return f"raw face in {duration:g} s" + (f"; clamped: {'; '.join(clamped)}" if clamped else ""), clamped

    def _on_params(self, msg: Float32MultiArray) -> None:
        try:
            text, clamped = self.set_params(list(msg.data))
        except ValueError as exc:
            # a kind per problem: a wrong count, or the first value that is not finite
            reason = str(exc)
            kind = "count" if reason[:1].isdigit() else reason.partition(": ")[2].split(" ", 1)[0]
            self._warn(f"params refused {kind}", f"face/params refused: {reason}; the face is unchanged")
            return
        if clamped:
            fields = ",".join(entry.split(" ", 1)[0] for entry in clamped)  # the fields' names
            self._warn(f"params clamped {fields}", f"face/params: {text}")
        else:
            self._say("params", f"face/params: {text}")

    def _on_look_at(self, msg: Point) -> None:
        if self._look_at_valid(msg):
            with self._lock:
                self.animator.look_at(msg.x, msg.y, time.monotonic())

    def _look_at_valid(self, msg: Point) -> bool:
        if math.isfinite(msg.x) and math.isfinite(msg.y):
            if abs(msg.x) > 1.0 or abs(msg.y) > 1.0:
                self._warn("look_at range", f"face/look_at: x = {msg.x:g}, y = {msg.y:g} beyond "
                           "-1..1 (the edges of the image): clamped")
            return True
        self._warn("look_at", f"face/look_at refused: x = {msg.x}, y = {msg.y} must be finite")
        return False

    def _take_look_at(self, now: float) -> None:
        """(under the lock) While pulled, the face/look_at messages that came since the last
        frame, applied in order, each from when it was received (no earlier than a frame
        before ``now``, the frame's monotonic time): no wake-up per message."""
        polled = self._look_at_polled
        if polled is None:
            return
        try:
            msgs = polled.take()
        except Exception as exc:  # noqa: BLE001 - the context went under it
            self._look_at_polled = None
            polled.close()
            self.get_logger().warning(f"face/look_at: taking messages failed ({exc!r}); no longer read")
            return
        wall_ns = time.time_ns()
        for msg, info in msgs:
            if self._look_at_valid(msg):
                received = info.get("received_timestamp") if isinstance(info, dict) else None
                age = (wall_ns - received) * 1e-9 if received else 0.0
                self.animator.look_at(msg.x, msg.y, now - min(max(age, 0.0), self._period))

    def _on_set_expression(self, request, response):
        transition = float(request.transition_s)
        if not math.isfinite(transition):
            response.success, response.message = False, f"transition_s = {transition}: not a finite number"
            return response
        if transition > _MAX_TRANSITION_S:
            self.get_logger().warning(f"set_face_expression: transition_s = {transition:g} s is "
                                      f"beyond {_MAX_TRANSITION_S:g} s: clamped")
            transition = _MAX_TRANSITION_S
        values = list(request.parameters)
        if values:
            try:
                response.message, _ = self.set_params(values, transition)
            except ValueError as exc:
                response.success, response.message = False, f"parameters: {exc}"
                return response
            response.success = True
            return response
        name = request.expression.strip()
        if not name:
            response.success = False
            response.message = (f"give an expression ({', '.join(EXPRESSIONS)}), {BLINK} (one blink) "
                                f"or {NUM_PARAMS} parameters")
            return response
        try:
            response.message = self.set_expression(_quoted(name), transition)
            response.success = True
        except KeyError as exc:
            response.success, response.message = False, str(exc.args[0])
        return response

    # ------------------------------------------------------------------ frames

    def _run_frames(self) -> None:
        """The frame thread: a frame every period, on a schedule that does not drift (after
        a stall longer than a period it starts again from now, without a burst); ends on
        :meth:`destroy_node` or when the context is shut down under it."""
        period = self._period
        due = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                self._say_overdue(now)
                self._say_no_subscriber(now)
            except Exception:  # noqa: BLE001 - the context went under the thread (a log call)
                if not self.context.ok():
                    return
            local = self._local
            if self._pulled and local is not None and not self._others_subscribe(now, local):
                # the driver pulls the frames: only look for another subscriber
                if self._stop.wait(_COUNT_EVERY_S):
                    return
                due = time.monotonic()
                continue
            if now < due:
                if self._stop.wait(due - now):
                    return
                now = time.monotonic()
            due = due + period if now - due < period else now + period
            try:
                self.publish_frame(now)
            except Exception as exc:  # noqa: BLE001 - the context went under the thread
                if not self.context.ok():
                    return
                self.get_logger().error(f"face frame failed: {exc!r}")
                self._stop.wait(1.0)

    def show_locally(self, display: Optional[LocalDisplay], pulled: bool = False) -> None:
        """Hand every frame to ``display`` in this process besides (or, while nothing else
        subscribes to ``display/face``, instead of) publishing it; None: publish only. With
        ``pulled``, while nothing else subscribes, the display pulls the frames instead
        (:meth:`pull_frame`) and the frame thread renders none."""
        self._local, self._others, self._counted_at = display, True, -math.inf
        self._pulled, self._pull_due = bool(pulled) and display is not None, -math.inf
        self._read_look_at(polled=self._pulled)

    def _read_look_at(self, polled: bool) -> None:
        """face/look_at on a thread of its own, or (``polled``) taken at each frame
        (:class:`~cozmo_driver.ros.subscription_thread.PolledSubscription`) where rclpy allows."""
        if polled == (self._look_at_polled is not None):
            return
        make = lambda owner, name, cb: qos.create_subscription(  # noqa: E731
            owner, Point, name, cb, QOS_QUEUE, overridable=False)
        with self._lock:
            if polled:
                self._look_at.unsubscribe()
                try:
                    self._look_at_polled = PolledSubscription(self, "face/look_at", make, "look_at")
                    return
                except Unsupported as exc:
                    self.get_logger().info(f"face/look_at stays on its thread: {exc}")
            else:
                self._look_at_polled.close()
                self._look_at_polled = None
            self._look_at = ThreadedSubscription(self, Point, "face/look_at", self._on_look_at,
                                                 QOS_QUEUE, suffix="look_at")

    def pull_frame(self, now: float) -> Optional[np.ndarray]:
        """The display's pull (any thread; the driver's I/O thread at each tick of its
        display, monotonic time ``now``): the ``(32, 128)`` bool rows the robot shows when
        a frame is due at ``fps`` and the face changed (or its keep-alive is due), else
        None; always None while the node publishes (another subscriber to ``display/face``:
        the frames are handed over as they are published) or is not pulled
        (:meth:`show_locally`)."""
        if not self._pulled or self._others or self._stop.is_set():
            return None
        period = self._period
        if now < self._pull_due - period / 2:  # ticks come on a grid of their own: half a frame
            return None
        self._pull_due = self._pull_due + period if now - self._pull_due < period else now + period
        with self._lock:
            self._take_look_at(now)
            return self.stream.frame(now, display_rows=True)

    def _others_subscribe(self, now: float, local: LocalDisplay) -> bool:
        """Whether display/face has subscribers besides ``local``'s (counted every
        _COUNT_EVERY_S)."""
        if now - self._counted_at >= _COUNT_EVERY_S:
            self._counted_at = now
            others = self._publisher.get_subscription_count() > local.subscriptions()
            if not others and self._latched:
                self._drop_latched()
            self._others = others
        return self._others

    def _make_publisher(self) -> Any:
        return qos.create_publisher(self, Image, "display/face", QOS_LATCHED, overridable=False)

    def _drop_latched(self) -> None:
        """(the frame thread) A new display/face publisher, with no face in its history,
        when nothing else subscribes any more: the last face published (the start-up
        face, before cozmo_stack wired the node; or the last one a subscriber gone since
        was given) stays in the publisher's history while the frames go to the local
        display unpublished, and a subscriber that came got that stale face first
        (transient local), before the current one (published as it comes)."""
        old = self._publisher
        try:
            self._publisher = self._make_publisher()
        except Exception as exc:  # noqa: BLE001 - keep the old one: a stale face, not none
            if self.context.ok():
                self.get_logger().warning(f"display/face: a new publisher failed ({exc!r}); a "
                                          "subscriber that comes may first get an older face")
            return
        self._latched = False
        self.destroy_publisher(old)

    def publish_frame(self, now: float) -> bool:
        """Render the face at monotonic time ``now``; if it changed (or its keep-alive is
        due), hand it to the local display (:meth:`show_locally`) and publish it (with a
        local display: while something else subscribes; until then only the rows the
        robot shows are rendered). Whether a frame went out. A subscriber that comes gets
        the face at once: the stream's change from rows to the whole screen is a frame."""
        local = self._local
        others = True if local is None else self._others_subscribe(now, local)
        if self._pulled and not others:
            return False  # the display pulls them (pull_frame)
        with self._lock:
            self._take_look_at(now)
            image = self.stream.frame(now, display_rows=not others)
        if image is None:
            return False
        stamp = self.get_clock().now()
        if local is not None:
            local.show(image if not others else image >= 128, stamp.nanoseconds)
            if not others:
                return True
        msg = self._msg
        msg.header.stamp = stamp.to_msg()
        msg.data = image.tobytes()
        self._publisher.publish(msg)
        self._latched = True
        self.frames_published += 1
        return True

    def stop_frames(self) -> None:
        """End the frame thread (idempotent; no frame is published after it returns)."""
        frames = getattr(self, "_frames", None)
        if frames is not None:
            self._stop.set()
            if frames.is_alive() and frames is not threading.current_thread():
                frames.join(_JOIN_S)

    def destroy_node(self) -> Any:
        """Stop the frame thread and the look_at thread, then destroy the node (also when
        the constructor refused before they were made)."""
        self.stop_frames()
        look_at = getattr(self, "_look_at", None)
        if look_at is not None:
            look_at.close()
        polled = getattr(self, "_look_at_polled", None)
        if polled is not None:
            with self._lock:
                polled.close()
        return super().destroy_node()



def main(args: Optional[List[str]] = None) -> int:
    """``cozmo_face_node``: publish the face until Ctrl-C, SIGTERM or SIGHUP."""
    if answer_help("cozmo_face_node", __doc__, FACE_PARAMETERS, args):
        return 0
    exit_with_parent()  # end with the bring-up that started it (cozmo_driver.lifeline)
    init(args)  # SIGINT, SIGTERM and SIGHUP stop the node before rclpy shuts down
    node = make_node("cozmo_face_node", FaceNode, (ValueError, rclpy.exceptions.ParameterException))
    if node is None:
        return 2
    return spin_node(node)


if __name__ == "__main__":
    sys.exit(main())
