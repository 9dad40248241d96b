"""The battery as text above the robot in RViz: ``battery_marker`` (visualization_msgs/Marker).

RViz has no stock display for sensor_msgs/BatteryState. The driver therefore
also publishes its battery once a second as a ``TEXT_VIEW_FACING`` marker,
e.g. ``Battery 3.92 V 71 % charging``, a few centimetres above the robot's
head in ``base_link``, which a stock Marker display shows
(``cozmo_description/rviz/cozmo.rviz`` has one).

:func:`battery_marker` is pure (messages in, a message out; no rclpy);
:func:`publish_battery_marker` publishes it only when someone subscribes, so
the marker costs nothing otherwise. The marker lives :data:`LIFETIME_S`
seconds: once the driver stops publishing it (robot disconnected, node
deactivated) it disappears from RViz by itself.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

from builtin_interfaces.msg import Duration
from sensor_msgs.msg import BatteryState
from visualization_msgs.msg import Marker

__all__ = ["MARKER_NAMESPACE", "HEIGHT_M", "TEXT_HEIGHT_M", "LIFETIME_S", "battery_text",
           "battery_colour", "battery_marker", "publish_battery_marker"]

#: ``Marker.ns`` of the battery text (one marker, id 0)
MARKER_NAMESPACE = "battery"
#: height of the text's centre above ``base_link`` [m]: the head's top is about 5 cm above it
HEIGHT_M = 0.09
#: height of a capital letter [m]
TEXT_HEIGHT_M = 0.012
#: a marker not refreshed this long disappears [s] (the driver refreshes it every second)
LIFETIME_S = 3

_STATUS_WORDS = {
    BatteryState.POWER_SUPPLY_STATUS_CHARGING: "charging",
    BatteryState.POWER_SUPPLY_STATUS_DISCHARGING: "discharging",
    BatteryState.POWER_SUPPLY_STATUS_NOT_CHARGING: "not charging",
    BatteryState.POWER_SUPPLY_STATUS_FULL: "full",
}

_GREEN = (0.3, 0.9, 0.3)
_AMBER = (1.0, 0.75, 0.1)
_RED = (1.0, 0.25, 0.2)
_GREY = (0.8, 0.8, 0.8)


def battery_text(battery: BatteryState) -> str:
    """``Battery 3.92 V 71 % charging``; what is unknown (NaN, status UNKNOWN) is left out."""
    parts = ["Battery"]
    if math.isfinite(battery.voltage):
        parts.append(f"{battery.voltage:.2f} V")
    if math.isfinite(battery.percentage):
        parts.append(f"{round(100.0 * battery.percentage):d} %")
    status = _STATUS_WORDS.get(battery.power_supply_status)
    if status:
        parts.append(status)
    if len(parts) == 1:
        parts.append("unknown")
    return " ".join(parts)


def battery_colour(percentage: float) -> Tuple[float, float, float]:
    """RGB of the text: green from 50 %, amber from 20 %, red below, grey when unknown
    (``percentage`` is 0..1, as in BatteryState)."""
    if not math.isfinite(percentage):
        return _GREY
    if percentage >= 0.5:
        return _GREEN
    if percentage >= 0.2:
        return _AMBER
    return _RED


def battery_marker(battery: BatteryState, frame_id: str) -> Marker:
    """A ``TEXT_VIEW_FACING`` marker of ``battery`` :data:`HEIGHT_M` above ``frame_id``
    (the robot's ``base_link``), stamped like ``battery``, locked to the frame."""
    marker = Marker()
    marker.header.frame_id = frame_id
    marker.header.stamp = battery.header.stamp
    marker.ns = MARKER_NAMESPACE
    marker.id = 0
    marker.type = Marker.TEXT_VIEW_FACING
    marker.action = Marker.ADD
    marker.pose.position.z = HEIGHT_M
    marker.pose.orientation.w = 1.0
    marker.scale.z = TEXT_HEIGHT_M
    marker.color.r, marker.color.g, marker.color.b = battery_colour(battery.percentage)
    marker.color.a = 1.0
    marker.lifetime = Duration(sec=LIFETIME_S, nanosec=0)
    marker.frame_locked = True
    marker.text = battery_text(battery)
    return marker


def publish_battery_marker(publisher: Any, battery: Optional[BatteryState], frame_id: str) -> bool:
    """Publish :func:`battery_marker` on ``publisher`` if there is a battery reading and the
    topic has a subscriber (``get_subscription_count``); returns whether it published."""
    if battery is None or publisher.get_subscription_count() == 0:
        return False
    publisher.publish(battery_marker(battery, frame_id))
    return True
