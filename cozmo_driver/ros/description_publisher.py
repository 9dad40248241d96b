"""``cozmo_description_publisher``: robot_state_publisher's job, for set-ups without it.

robot_state_publisher (C++, KDL) is not on PyPI. This node does what the
bring-up needs of it, from a URDF given as the ``robot_description``
parameter (``cozmo_bringup`` passes the xacro output):

* ``robot_description`` (std_msgs/String), reliable, transient local, depth 1,
  published once: late subscribers (RViz) get it;
* ``/tf_static`` (tf2_msgs/TFMessage): every fixed joint, in one message,
  reliable, transient local, depth 1, as tf2's static broadcaster does;
* ``/tf``: the moving joints (revolute, continuous, prismatic) for every
  ``joint_states`` message, stamped with its header stamp (now, if zero);
  mimic joints follow their master (position * multiplier + offset). Joints
  the message does not name are not published; unknown names are ignored.
  A joint's transform is not published again with the stamp it last went out
  with (under ROS time, while ``/clock`` is slower than the states, paused or
  not started, several states have one stamp, and tf2 would ignore the repeats
  with a TF_REPEATED_DATA warning in every listener); one with an earlier
  stamp is (the clock restarted), as robot_state_publisher publishes only
  joint updates it has not published. When the count of ``/tf`` subscribers
  has risen (a new tf listener: RViz restarted, tf2_echo, Nav2), the stamps
  sent are forgotten and the next state's transforms go out even at the stamp
  last sent, so the new listener has them while ``/clock`` stands still (from
  a state at most ``_COUNT_EVERY_S`` after its match when others listened
  already: see below); a listener that had them may warn TF_REPEATED_DATA once.
  Only while ``/tf`` has subscribers: ``joint_states`` is taken serialized and
  read only then (the warning about names the description does not have comes
  then too). The count is asked every ``_COUNT_EVERY_S``, to see listeners come
  or go; in the first ``_EAGER_S`` after the first ``joint_states`` and while
  ``/tf`` has none yet, at every one (a listener started with the robot gets
  the transforms from the state after its subscription matched). A listener that
  comes later gets them at most ``_COUNT_EVERY_S`` after its match, as it gets the
  driver's ``odom`` -> ``base_footprint``: asking at every state (30 a second,
  tens of microseconds each) for nobody is not done.

``joint_states`` comes with every robot state (30 Hz), so it is served like the
driver's ``cmd_vel``, on a companion node ``_<node name>_joint_states`` with an
executor of its own on a thread of its own, where rclpy allows
(:class:`~cozmo_driver.ros.subscription_thread.ThreadedSubscription`): the node's
own executor is not woken for it. In one process with the driver (``cozmo_stack``)
the node subscribes to nothing: the driver hands it the joint positions of every
state directly (:meth:`DescriptionPublisher.take_joints_directly`).

Parameters: ``robot_description`` (the URDF, required) and ``frame_prefix``
(prepended to every frame id, like robot_state_publisher's; default empty:
the bring-up puts the prefix into the URDF's link names instead). Both are
read at start-up. The kinematics are :class:`cozmo_driver.description.UrdfModel`.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from ..description import (DESCRIPTION_PACKAGE, XACRO_RELATIVE_PATH, DescriptionError, Joint, Transform,
                           UrdfModel, xacro_path)
from ..driver.parameters import ParamSpec
from ..lifeline import exit_with_parent
from ..log_throttle import LogThrottle
from . import qos
from ._entry import destroyed_if_refused, init, make_node, spin_node, unknown_parameters
from .subscription_thread import ThreadedSubscription
from .usage import answer_help
from .qos import QOS_LATCHED, QOS_TF

__all__ = ["DescriptionPublisher", "DESCRIPTION_PARAMETERS", "QOS_LATCHED", "QOS_TF", "where_to_give_the_description",
           "main"]

SUMMARY = ("Publishes the robot description (robot_description), /tf_static for its fixed joints "
           "and /tf for its moving joints from joint_states: robot_state_publisher's job, for "
           "set-ups without it.")

#: the node's parameters, both read at start-up (declared read-only from this table)
DESCRIPTION_PARAMETERS = (
    ParamSpec("robot_description", "", "The robot's URDF (XML text), required, given after --ros-args, e.g. "
              "cozmo_description_publisher --ros-args -p robot_description:="
              "\"$(xacro .../cozmo_description/urdf/cozmo.urdf.xacro)\" (in cozmo_stack, in the node's own "
              "section: --node description_publisher --ros-args -p robot_description:=...); read at start-up"),
    ParamSpec("frame_prefix", "", "Prepended to every frame id (default empty); read at start-up"),
)

#: how often /tf's subscriber count is asked, seconds
_COUNT_EVERY_S = 0.2
#: from the first joint positions on, for this long and while /tf has no subscriber, the
#: count is asked at every one (as the driver asks its streams' counts), seconds
_EAGER_S = 5.0

# robot_description and /tf_static: QOS_LATCHED (late joiners get the last message);
# /tf: QOS_TF, as tf2's TransformBroadcaster (both from ros/qos.py)


def where_to_give_the_description(node: str) -> str:
    """What to do when the ``robot_description`` parameter of the node ``node`` (its fully
    qualified name) is missing or bad: where the parameter goes, on each command line and in
    a parameter file."""
    try:
        xacro = str(xacro_path())
    except DescriptionError:
        xacro = f"{DESCRIPTION_PACKAGE}/{XACRO_RELATIVE_PATH}"
    return ("give it the robot's URDF (XML text): on the command line after --ros-args "
            f"(cozmo_description_publisher --ros-args -p robot_description:=\"$(xacro {xacro})\"; "
            "in cozmo_stack in the node's own section: cozmo_stack --node description_publisher "
            "--ros-args -p robot_description:=...), or in a --params-file, in the node's section "
            f"({node}: {{ros__parameters: {{robot_description: '<robot ...>'}}}}); cozmo_bringup and "
            "ros2 launch cozmo_driver cozmo.launch.py give it the description")


def _fill(msg: TransformStamped, transform: Transform) -> TransformStamped:
    t = msg.transform.translation
    t.x, t.y, t.z = transform.translation
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = transform.rotation
    return msg


class DescriptionPublisher(Node):
    """Publishes the robot description and the transforms of its joints."""

    def __init__(self, node_name: str = "description_publisher", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        with destroyed_if_refused(self):  # refused: gone from the graph at once
            for spec in DESCRIPTION_PARAMETERS:
                self.declare_parameter(spec.name, spec.default, ParameterDescriptor(
                    description=spec.description, read_only=True))
            for text in unknown_parameters(self, [spec.name for spec in DESCRIPTION_PARAMETERS]):
                self.get_logger().warning(text)
            urdf = self.get_parameter("robot_description").value
            if not urdf or not str(urdf).strip():
                raise DescriptionError("the robot_description parameter is empty: "
                                       + where_to_give_the_description(self.get_fully_qualified_name()))
            try:
                self.model = UrdfModel.from_xml(urdf)
            except DescriptionError as exc:
                raise DescriptionError(
                    f"the robot_description parameter is not a URDF this node can use ({exc}): "
                    + where_to_give_the_description(self.get_fully_qualified_name())) from exc
        self._prefix = str(self.get_parameter("frame_prefix").value).lstrip("/")
        self._moving: List[Joint] = self.model.moving_joints()
        self._warned_unknown = False
        self._throttle = LogThrottle(2.0)
        self._tf_wanted, self._counted_at, self._tf_count = True, -math.inf, 0
        self._eager_until: Optional[float] = None  # (monotonic) set by the first joints
        self._sent_at: Dict[str, Tuple[int, int]] = {}  # moving joint -> stamp of its last /tf

        self._description_pub = qos.create_publisher(self, String, "robot_description", QOS_LATCHED,
                                                     overridable=False)
        self._static_pub = qos.create_publisher(self, TFMessage, "/tf_static", QOS_LATCHED,
                                                overridable=False)
        self._tf_pub = qos.create_publisher(self, TFMessage, "/tf", QOS_TF, overridable=False)
        self._joints = ThreadedSubscription(self, JointState, "joint_states", self._on_raw_joints,
                                            qos_profile_sensor_data, suffix="joint_states", raw=True)

        self._description_pub.publish(String(data=urdf))
        self._publish_static()
        actuated = ", ".join(j.name for j in self.model.actuated_joints()) or "none"
        self.get_logger().info(
            f"robot {self.model.name!r}: {len(self.model.links)} links, "
            f"{len(self.model.fixed_joints())} fixed joints on /tf_static, moving joints on /tf "
            f"from joint_states ({actuated}, and their mimic joints); "
            f"root {self._frame(self.model.root)}")

    def _frame(self, link: str) -> str:
        return self._prefix + link

    def _stamped(self, joint: Joint, transform: Transform, stamp) -> TransformStamped:
        msg = TransformStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = self._frame(joint.parent)
        msg.child_frame_id = self._frame(joint.child)
        return _fill(msg, transform)

    def _publish_static(self) -> None:
        stamp = self.get_clock().now().to_msg()
        transforms = [self._stamped(j, j.transform(), stamp) for j in self.model.fixed_joints()]
        self._static_pub.publish(TFMessage(transforms=transforms))

    def _on_raw_joints(self, data: bytes) -> None:
        """A joint_states message as it came (serialized): read only while /tf has
        subscribers, as nothing else is done with it."""
        if self._tf_subscribed():
            self._on_joints(deserialize_message(data, JointState))

    def _on_joints(self, msg: JointState) -> None:
        self._publish_joints(msg.name, msg.position, msg.header.stamp)

    def take_joints_directly(self) -> Callable[[Sequence[str], Sequence[float], int, int], None]:
        """In one process with the driver (``cozmo_stack``): stop subscribing to
        ``joint_states`` and return what takes the joint positions from the driver instead,
        ``fn(names, positions, sec, nanosec)`` (called on the driver's I/O thread;
        ``DriverStreams.local_joints``). /tf is published from them as from the messages,
        and only while it has subscribers; the driver publishes ``joint_states`` only for
        other subscribers then."""
        self._joints.unsubscribe()
        return self._on_local_joints

    def _on_local_joints(self, names: Sequence[str], positions: Sequence[float], sec: int,
                         nanosec: int) -> None:
        if self._tf_subscribed():
            self._publish_joints(names, positions, Time(sec=sec, nanosec=nanosec))

    def _publish_joints(self, names: Sequence[str], values: Sequence[float], stamp: Time) -> None:
        """/tf for the moving joints at these positions (unknown names warned of once; a
        position that is not a finite number is left out, warned of every 2 s at most: tf
        listeners reject a NaN transform; one held back is said with the positions that
        come once the 2 s are over; a joint already sent with this stamp is left out)."""
        now = time.monotonic()
        for _, line, _ in self._throttle.overdue(now):
            self.get_logger().warning(line)
        given: Dict[str, float] = {}
        for name, position in zip(names, values):
            if name in self.model.joints and not math.isfinite(position):
                line = self._throttle.line("nan", f"joint_states: {name} = {position} is not a "
                                           "finite number: its transform is left out", now)
                if line is not None:
                    self.get_logger().warning(line)
            elif name in self.model.joints:
                given[name] = position
            elif not self._warned_unknown:
                self._warned_unknown = True
                self.get_logger().warning(
                    f"joint_states names {name!r}, which the robot description does not have "
                    "(ignored; reported once)")
        if not given:
            return
        positions = self.model.with_mimics(given)
        if stamp.sec == 0 and stamp.nanosec == 0:
            stamp = self.get_clock().now().to_msg()
        # a joint's transform not again at the stamp it last went out with (under ROS time the
        # states repeat a stamp while /clock is slower than them, paused or not started): tf2
        # ignores it, warning TF_REPEATED_DATA; a stamp that goes back (a clock restart) goes;
        # forgotten when /tf has more subscribers (_tf_subscribed): a new listener needs them
        at, sent = (stamp.sec, stamp.nanosec), self._sent_at
        transforms = []
        for j in self._moving:
            if j.name in positions and sent.get(j.name) != at:
                sent[j.name] = at
                transforms.append(self._stamped(j, j.transform(positions[j.name]), stamp))
        if transforms:
            self._tf_pub.publish(TFMessage(transforms=transforms))

    def _tf_subscribed(self) -> bool:
        """Whether /tf has subscribers: asked at most every _COUNT_EVERY_S; at every message
        in the first _EAGER_S while it has none (the module's docstring). More than at the
        last count: the stamps sent are forgotten, so a new listener gets the next state's
        transforms even at the stamp last sent (/clock paused or not started)."""
        now = time.monotonic()
        if self._eager_until is None:
            self._eager_until = now + _EAGER_S
        eager = not self._tf_wanted and now < self._eager_until
        if eager or now - self._counted_at >= _COUNT_EVERY_S:
            self._counted_at = now
            count = self._tf_pub.get_subscription_count()
            if count > self._tf_count:
                self._sent_at.clear()
            self._tf_count, self._tf_wanted = count, count > 0
        return self._tf_wanted

    def destroy_node(self):
        """End the joint_states thread, then destroy the node."""
        joints = getattr(self, "_joints", None)
        if joints is not None:
            joints.close()
        return super().destroy_node()



def main(args: Optional[List[str]] = None) -> int:
    """``cozmo_description_publisher``: run until Ctrl-C, SIGTERM or SIGHUP (which stop the node
    before rclpy shuts down: ``_entry.init``)."""
    if answer_help("cozmo_description_publisher", SUMMARY, DESCRIPTION_PARAMETERS, args):
        return 0
    exit_with_parent()  # end with the bring-up that started it (cozmo_driver.lifeline)
    init(args)
    from rclpy.exceptions import ParameterException  # a value of the wrong type, out of range
    node = make_node("cozmo_description_publisher", DescriptionPublisher, (DescriptionError, ParameterException))
    if node is None:
        return 2
    return spin_node(node)


if __name__ == "__main__":
    sys.exit(main())
