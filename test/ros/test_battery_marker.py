"""battery_marker: the battery as a text marker for RViz, built from sensor_msgs/BatteryState.

Pure: the message classes only, no rclpy.init(), no DDS.
"""

from __future__ import annotations

import math

import pytest
from dependencies import require

require("visualization_msgs.msg", "an exec_depend of package.xml")

from builtin_interfaces.msg import Time  # noqa: E402
from sensor_msgs.msg import BatteryState  # noqa: E402
from visualization_msgs.msg import Marker  # noqa: E402

from cozmo_driver.ros.battery_marker import (HEIGHT_M, LIFETIME_S, battery_colour,  # noqa: E402
                                             battery_marker, battery_text,
                                             publish_battery_marker)


def battery(voltage=3.92, percentage=0.71, status=BatteryState.POWER_SUPPLY_STATUS_CHARGING):
    msg = BatteryState()
    msg.header.stamp = Time(sec=12, nanosec=345)
    msg.header.frame_id = "base_link"
    msg.voltage = voltage
    msg.percentage = percentage
    msg.power_supply_status = status
    return msg


@pytest.mark.parametrize("voltage, percentage, status, text", [
    (3.92, 0.71, BatteryState.POWER_SUPPLY_STATUS_CHARGING, "Battery 3.92 V 71 % charging"),
    (3.6, 0.1, BatteryState.POWER_SUPPLY_STATUS_DISCHARGING, "Battery 3.60 V 10 % discharging"),
    (4.1, 1.0, BatteryState.POWER_SUPPLY_STATUS_FULL, "Battery 4.10 V 100 % full"),
    (4.0, 0.005, BatteryState.POWER_SUPPLY_STATUS_NOT_CHARGING, "Battery 4.00 V 0 % not charging"),
    (3.92, math.nan, BatteryState.POWER_SUPPLY_STATUS_CHARGING, "Battery 3.92 V charging"),
    (3.92, math.nan, BatteryState.POWER_SUPPLY_STATUS_UNKNOWN, "Battery 3.92 V"),
    (math.nan, math.nan, BatteryState.POWER_SUPPLY_STATUS_UNKNOWN, "Battery unknown"),
])
def test_text_says_what_is_known(voltage, percentage, status, text):
    assert battery_text(battery(voltage, percentage, status)) == text


def test_marker_is_text_facing_the_viewer_above_the_robot():
    msg = battery()
    marker = battery_marker(msg, "robot1/base_link")
    assert marker.type == Marker.TEXT_VIEW_FACING and marker.action == Marker.ADD
    assert marker.text == "Battery 3.92 V 71 % charging"
    assert marker.header.frame_id == "robot1/base_link"
    assert (marker.header.stamp.sec, marker.header.stamp.nanosec) == (12, 345)
    assert (marker.ns, marker.id) == ("battery", 0)
    # a few centimetres above the head (its top is about 5 cm above base_link), unrotated
    p = marker.pose.position
    assert (p.x, p.y) == (0.0, 0.0) and 0.07 <= p.z <= 0.12 and p.z == HEIGHT_M
    assert marker.pose.orientation.w == 1.0
    # TEXT_VIEW_FACING uses only scale.z, the letters' height: readable next to a 6 cm robot
    assert 0.005 <= marker.scale.z <= 0.03
    assert marker.color.a == 1.0
    # follows the robot, and vanishes a few seconds after the driver stops refreshing it
    assert marker.frame_locked
    assert (marker.lifetime.sec, marker.lifetime.nanosec) == (LIFETIME_S, 0) and LIFETIME_S > 1


def test_colour_follows_the_charge():
    full, half, low, empty = (battery_colour(p) for p in (1.0, 0.5, 0.3, 0.1))
    assert full == half and full[1] > full[0]          # green
    assert low != full and low[0] > low[2]              # amber
    assert empty not in (full, low) and empty[0] > empty[1]   # red
    grey = battery_colour(math.nan)
    assert grey[0] == grey[1] == grey[2]
    marker = battery_marker(battery(percentage=math.nan), "base_link")
    assert (marker.color.r, marker.color.g, marker.color.b) == pytest.approx(grey)


class FakePublisher:
    def __init__(self, subscribers: int) -> None:
        self.subscribers = subscribers
        self.published = []

    def get_subscription_count(self) -> int:
        return self.subscribers

    def publish(self, msg) -> None:
        self.published.append(msg)


def test_published_only_with_a_reading_and_a_subscriber():
    nobody = FakePublisher(0)
    assert not publish_battery_marker(nobody, battery(), "base_link")
    assert nobody.published == []
    viewer = FakePublisher(1)
    assert not publish_battery_marker(viewer, None, "base_link")   # not connected
    assert viewer.published == []
    assert publish_battery_marker(viewer, battery(), "base_link")
    (marker,) = viewer.published
    assert marker.text == "Battery 3.92 V 71 % charging"
