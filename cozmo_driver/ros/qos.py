"""The QoS profiles of the nodes' topics, named once (sensor streams published reliable and
subscribed best effort, as REP-2003 asks of sensor drivers; state reliable; facts latched),
and publisher/subscription factories that let a
topic's QoS be overridden by ``qos_overrides.<topic>...`` parameters where rclpy supports
it (Galactic and later; elsewhere the topic keeps its plain QoS).

QoS events: rclpy gives every publisher and subscription default handlers (an
incompatible-QoS and an incompatible-type warning), each an entity that the
executor adds to its wait set and checks on every wake-up; for the driver's ~30
topics they made up a third of its executor's CPU, paid on every ``cmd_vel``.
The factories create none: a node that publishes or subscribes with an
incompatible QoS is told so by its own handlers, and ``ros2 topic info -v``
shows both sides' QoS."""

from __future__ import annotations

import copy
from typing import Any, Dict

from rclpy.qos import (QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy,
                       qos_profile_sensor_data)

try:  # Galactic and later; the fallback keeps plain QoS
    from rclpy.qos_overriding_options import QoSOverridingOptions
except ImportError:  # pragma: no cover - depends on the ROS 2 release
    QoSOverridingOptions = None

try:  # Iron and later
    from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
except ImportError:  # pragma: no cover - Humble
    from rclpy.qos_event import PublisherEventCallbacks, SubscriptionEventCallbacks


def _no_event_handlers(callbacks_type: Any) -> Dict[str, Any]:
    """``event_callbacks=`` without rclpy's default handlers, where rclpy has that switch."""
    try:
        return {"event_callbacks": callbacks_type(use_default_callbacks=False)}
    except TypeError:  # pragma: no cover - an rclpy without default QoS event callbacks
        return {}


__all__ = ["profile", "QOS_SENSOR", "QOS_SENSOR_OUT", "QOS_STATE", "QOS_QUEUE", "QOS_EVENTS",
           "QOS_STREAM", "QOS_TF", "QOS_LATCHED", "QOS_COMMAND", "QOS_LATEST", "QOS_FRAMES", "QOS_WATCH",
           "create_publisher", "create_subscription", "UNKNOWN_NODE"]

#: the node name of a graph endpoint (get_publishers_info_by_topic, ...) whose node is not
#: discovered whole yet: rmw's placeholder
UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"


def profile(depth: int, reliable: bool = True, latched: bool = False) -> QoSProfile:
    """Keep the last ``depth``; reliable or best effort; transient local or volatile."""
    return QoSProfile(
        history=QoSHistoryPolicy.KEEP_LAST, depth=depth,
        reliability=QoSReliabilityPolicy.RELIABLE if reliable else QoSReliabilityPolicy.BEST_EFFORT,
        durability=QoSDurabilityPolicy.TRANSIENT_LOCAL if latched else QoSDurabilityPolicy.VOLATILE)


#: sensor streams taken in (display images): best effort, the latest few (sensor data QoS,
#: which matches reliable and best-effort publishers)
QOS_SENSOR = qos_profile_sensor_data
#: sensor streams published (camera, IMU, cube accelerometers): reliable, the latest 5, as
#: REP-2003 asks of sensor drivers. A reliable publisher serves reliable subscribers (a
#: display added in RViz, ``create_subscription(Imu, "imu/data", cb, 10)``) and best-effort
#: ones (sensor data QoS) alike, the latter without acknowledgements; a best-effort one
#: would leave a reliable subscriber with nothing and no message on the driver's side
QOS_SENSOR_OUT = profile(5)
#: state at a steady rate: reliable, depth 10
QOS_STATE = profile(10)
#: commands of which each counts, maybe from several publishers or for several objects
#: (face expressions, object_lights): reliable, depth 10
QOS_QUEUE = profile(10)
#: events: reliable, depth 100
QOS_EVENTS = profile(100)
#: a stream of which no piece may be lost (audio chunks): reliable, depth 100
QOS_STREAM = profile(100)
#: the standard tf QoS (what tf2_ros's TransformBroadcaster uses)
QOS_TF = profile(100)
#: facts, for late subscribers too (robot info, link status, object list, the face): reliable,
#: transient local, depth 1
QOS_LATCHED = profile(1, latched=True)
#: commands of which only the latest matters: reliable, depth 1
QOS_COMMAND = profile(1)
#: only the latest, from any publisher (best effort matches reliable and best-effort ones)
QOS_LATEST = profile(1, reliable=False)
#: frames of which each is shown in order, from any publisher (the face): best effort, depth 10,
#: so that frames arriving while the executor is busy wait for it instead of replacing each other
QOS_FRAMES = profile(10, reliable=False)
#: watching others' commands, whatever their publishers' reliability: best effort, depth 10
QOS_WATCH = profile(10, reliable=False)


def _overriding(overridable: bool) -> Dict[str, Any]:
    if overridable and QoSOverridingOptions is not None:
        return {"qos_overriding_options": QoSOverridingOptions.with_default_policies()}
    return {}


def create_publisher(node: Any, msg_type: Any, topic: str, qos: QoSProfile,
                     overridable: bool = True) -> Any:
    """``node.create_publisher`` with a copy of ``qos`` (QoS overrides are applied to the
    profile object in place), overridable by parameters unless ``overridable`` is False;
    without QoS event handlers (see the module docstring)."""
    return node.create_publisher(msg_type, topic, copy.copy(qos), **_overriding(overridable),
                                 **_no_event_handlers(PublisherEventCallbacks))


def create_subscription(node: Any, msg_type: Any, topic: str, callback: Any,
                        qos: QoSProfile, callback_group: Any = None, raw: bool = False,
                        overridable: bool = True) -> Any:
    """``node.create_subscription`` with a copy of ``qos``, overridable by parameters unless
    ``overridable`` is False, without QoS event handlers (see the module docstring).
    ``raw``: the callback gets the serialized message (bytes)."""
    return node.create_subscription(msg_type, topic, callback, copy.copy(qos),
                                    **_overriding(overridable),
                                    **_no_event_handlers(SubscriptionEventCallbacks),
                                    callback_group=callback_group, raw=raw)
