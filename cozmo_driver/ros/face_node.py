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
* subscribes ``face/expression`` (std_msgs/String: an expression name),
  ``face/params`` (std_msgs/Float32MultiArray: the 43 raw parameters in CLAD
  order, as the service takes them; eased over ``transition_s``) and
  ``face/look_at`` (geometry_msgs/Point: x, y in -1..1, +x right, +y down;
  z unused);
* serves ``set_face_expression`` (cozmo_interfaces/SetFaceExpression: a name,
  or the 43 raw parameters in CLAD order, with a transition time).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import rclpy
from cozmo_interfaces.srv import SetFaceExpression
from geometry_msgs.msg import Point
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import Float32MultiArray, String

from ..face.expressions import EXPRESSIONS, FaceAnimator, expression
from ..face.procedural import FACE_HEIGHT_PX, FACE_WIDTH_PX, NUM_PARAMS, PARAM_NAMES, FaceParams
from ..face.stream import FaceStream
from ..driver.parameters import ParamSpec
from ..lifeline import exit_with_parent
from ._entry import destroyed_if_refused, init, make_node, spin_node
from .usage import answer_help
from .qos import QOS_LATCHED, QOS_QUEUE

__all__ = ["FaceNode", "main", "raw_face"]


#: the node's parameters (read at start-up), declared from this table; ``--help`` lists them
FACE_PARAMETERS = (
    ParamSpec("fps", 30.0, "Frames rendered per second", "1/s", 1.0, 60.0),
    ParamSpec("expression", "neutral", "The expression at start-up"),
    ParamSpec("idle", True, "Idle life: blinks and small eye movements"),
    ParamSpec("seed", 0, "Seed of the idle life (the same seed blinks the same way)"),
    ParamSpec("transition_s", 0.3, "Default time to ease from one expression to the next", "s", 0.0, 10.0),
    ParamSpec("keepalive_s", 1.0, "An unchanged face is published again this often", "s", 0.1, 60.0),
)


def _descriptor(spec: ParamSpec) -> ParameterDescriptor:
    unit = f" [{spec.unit}]" if spec.unit else ""
    descriptor = ParameterDescriptor(description=spec.description + unit)
    if spec.minimum is not None:
        descriptor.floating_point_range = [FloatingPointRange(from_value=float(spec.minimum),
                                                              to_value=float(spec.maximum))]
    return descriptor


def raw_face(values: Sequence[float]) -> Tuple[FaceParams, List[str]]:
    """The face of 43 raw parameters in CLAD order, and what was clamped to its range.

    Raises ValueError saying what is wrong: the number of values, or which are not
    finite numbers (by index and name)."""
    if len(values) != NUM_PARAMS:
        raise ValueError(f"{len(values)} values; a face has {NUM_PARAMS} (CLAD order)")
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        named = ", ".join(f"[{i}] {PARAM_NAMES[i]} = {values[i]}" for i in bad[:3])
        raise ValueError(f"not finite numbers: {named}{' ...' if len(bad) > 3 else ''}")
    return FaceParams.from_array(np.asarray(values, dtype=np.float64)).validated()


class FaceNode(Node):
    """See the module docstring."""

    def __init__(self, node_name: str = "cozmo_face", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        with destroyed_if_refused(self):  # refused: gone from the graph at once
            p = {spec.name: self.declare_parameter(spec.name, spec.default, _descriptor(spec)).value
                 for spec in FACE_PARAMETERS}
            fps, start, idle, seed = p["fps"], p["expression"], p["idle"], p["seed"]
            self.transition_s = float(p["transition_s"])
            keepalive = p["keepalive_s"]
            try:
                base = expression(str(start))
            except KeyError as exc:
                raise ValueError(str(exc.args[0])) from None
        now = time.monotonic()
        self.animator = FaceAnimator(seed=int(seed), base=base, now=now, idle=bool(idle))
        self.stream = FaceStream(self.animator, keepalive_s=float(keepalive))
        self._msg = Image()
        self._msg.height, self._msg.width = FACE_HEIGHT_PX, FACE_WIDTH_PX
        self._msg.encoding = "mono8"
        self._msg.is_bigendian = 0
        self._msg.step = FACE_WIDTH_PX
        self._publisher = self.create_publisher(Image, "display/face", QOS_LATCHED)
        self.create_subscription(String, "face/expression", self._on_expression, QOS_QUEUE)
        self.create_subscription(Float32MultiArray, "face/params", self._on_params, QOS_QUEUE)
        self.create_subscription(Point, "face/look_at", self._on_look_at, QOS_QUEUE)
        self.create_service(SetFaceExpression, "set_face_expression", self._on_set_expression)
        self._timer = self.create_timer(1.0 / float(fps), self._on_timer)
        self.get_logger().info(f"face '{start}' at {fps:g} fps on {self._publisher.topic_name}"
                               f"{' with idle life' if idle else ''}")

    # ------------------------------------------------------------------ commands

    def set_expression(self, name: str, transition_s: Optional[float] = None) -> str:
        """Ease to the named expression; raises KeyError naming the known ones."""
        face = expression(name)
        duration = self.transition_s if transition_s is None or transition_s < 0 else transition_s
        self.animator.set_expression(face, time.monotonic(), duration)
        return f"face '{name}' in {duration:g} s"

    def _on_expression(self, msg: String) -> None:
        try:
            self.get_logger().info(self.set_expression(msg.data.strip()))
        except KeyError as exc:
            self.get_logger().warning(f"face/expression refused: {exc.args[0]}")

    def set_params(self, values: Sequence[float], transition_s: Optional[float] = None) -> Tuple[str, bool]:
        """Ease to the raw face ``values``; returns what was done and whether values were
        clamped (raises ValueError from :func:`raw_face`, the face unchanged)."""
        face, clamped = raw_face(values)
        duration = self.transition_s if transition_s is None or transition_s < 0 else transition_s
        self.animator.set_expression(face, time.monotonic(), duration)
        return f"raw face in {duration:g} s" + (f"; clamped: {'; '.join(clamped)}" if clamped else ""), bool(clamped)

    def _on_params(self, msg: Float32MultiArray) -> None:
        try:
            text, clamped = self.set_params(list(msg.data))
        except ValueError as exc:
            self.get_logger().warning(f"face/params refused: {exc}; the face is unchanged")
            return
        # one call per severity: rclpy raises when one source line logs at two
        if clamped:
            self.get_logger().warning(f"face/params: {text}")
        else:
            self.get_logger().info(f"face/params: {text}")

    def _on_look_at(self, msg: Point) -> None:
        if not (math.isfinite(msg.x) and math.isfinite(msg.y)):
            self.get_logger().warning(f"face/look_at refused: x = {msg.x}, y = {msg.y} must be finite")
            return
        self.animator.look_at(msg.x, msg.y, time.monotonic())

    def _on_set_expression(self, request, response):
        transition = float(request.transition_s)
        if not math.isfinite(transition):
            response.success, response.message = False, f"transition_s = {transition}: not a finite number"
            return response
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
            response.message = f"give an expression ({', '.join(EXPRESSIONS)}) or {NUM_PARAMS} parameters"
            return response
        try:
            response.message = self.set_expression(name, transition)
            response.success = True
        except KeyError as exc:
            response.success, response.message = False, str(exc.args[0])
        return response

    # ------------------------------------------------------------------ frames

    def _on_timer(self) -> None:
        image = self.stream.frame(time.monotonic())
        if image is None:
            return
        msg = self._msg
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.data = image.tobytes()
        self._publisher.publish(msg)



def main(args: Optional[List[str]] = None) -> int:
    """``cozmo_face_node``: publish the face until Ctrl-C or SIGTERM."""
    if answer_help("cozmo_face_node", __doc__, FACE_PARAMETERS, args):
        return 0
    exit_with_parent()  # end with the bring-up that started it (cozmo_driver.lifeline)
    init(args)  # SIGINT and SIGTERM stop the node before rclpy shuts down
    node = make_node("cozmo_face_node", FaceNode, (ValueError, rclpy.exceptions.ParameterException))
    if node is None:
        return 2
    return spin_node(node)


if __name__ == "__main__":
    sys.exit(main())
