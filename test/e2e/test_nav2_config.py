"""config/nav2_params.yaml: Nav2 driving Cozmo through cmd_vel with the driver's odometry and tf.

Nav2 itself is not installable here (no ROS apt repository is reachable, and Nav2 has
no PyPI wheels): the parameter file is checked against the driver (frames, topics,
message type, speed limits, footprint) and against the key names of the Nav2
configuration guide for Jazzy; a test-only pure-pursuit loop then plays Nav2's part of
the contract (read ``odom`` and ``/tf`` in the file's frames, publish plain Twist on
``cmd_vel`` with the file's controller settings) against the driver and the simulated
robot. ``test_nav2_nodes_configure_with_this_file`` runs the real Nav2 nodes when they
are installed (a real ROS 2 install with ros-jazzy-navigation2) and skips otherwise.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from cozmo_driver import robot_geometry as geo
from cozmo_driver.driver.parameters import PARAMETERS_BY_NAME
from dependencies import require
from ros_timeouts import CONNECT_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]
NAV2 = ROOT / "config" / "nav2_params.yaml"


def default(name: str):
    return PARAMETERS_BY_NAME[name].default


@pytest.fixture(scope="module")
def nav2():
    return yaml.safe_load(NAV2.read_text())


def params(doc, node: str) -> dict:
    if node in ("local_costmap", "global_costmap"):
        return doc[node][node]["ros__parameters"]
    return doc[node]["ros__parameters"]


def footprint(text: str):
    return yaml.safe_load(text)


# ----------------------------------------------------------------------------- the driver's side

def test_frames_are_the_drivers(nav2):
    odom, base = default("odom_frame"), default("base_frame")
    assert (odom, base) == ("odom", "base_footprint")
    bt = params(nav2, "bt_navigator")
    assert (bt["global_frame"], bt["robot_base_frame"]) == (odom, base)
    for costmap in ("local_costmap", "global_costmap"):
        p = params(nav2, costmap)
        assert (p["global_frame"], p["robot_base_frame"]) == (odom, base), costmap
    behavior = params(nav2, "behavior_server")
    assert (behavior["local_frame"], behavior["global_frame"], behavior["robot_base_frame"]) == \
        (odom, odom, base)
    # the local costmap must roll in odom: the driver's odom is continuous (re-anchored)
    assert params(nav2, "local_costmap")["rolling_window"] is True


def test_topics_and_message_type_are_the_drivers(nav2):
    # the driver publishes nav_msgs/Odometry on `odom` (relative) and takes plain Twist
    # on `cmd_vel` unless cmd_vel_stamped is set
    for node in ("bt_navigator", "controller_server", "velocity_smoother"):
        assert params(nav2, node)["odom_topic"] == "odom", node
    assert default("cmd_vel_stamped") is False
    for node in ("controller_server", "behavior_server", "velocity_smoother"):
        assert params(nav2, node)["enable_stamped_cmd_vel"] is default("cmd_vel_stamped"), node


def test_speed_limits_fit_the_treads(nav2):
    max_wheel = default("max_wheel_speed")
    assert max_wheel == geo.MAX_WHEEL_SPEED_MPS
    max_turn = 2.0 * max_wheel / geo.TRACK_WIDTH_M          # 8.9 rad/s, in place
    rpp = params(nav2, "controller_server")["FollowPath"]
    assert rpp["plugin"] == "nav2_regulated_pure_pursuit_controller::RegulatedPurePursuitController"
    assert 0 < rpp["regulated_linear_scaling_min_speed"] <= rpp["desired_linear_vel"] <= max_wheel
    assert rpp["min_approach_linear_velocity"] > 0.01       # Nav2's own lower bound
    assert rpp["rotate_to_heading_angular_vel"] <= max_turn
    assert not (rpp["use_rotate_to_heading"] and rpp["allow_reversing"])  # Nav2 refuses both
    smoother = params(nav2, "velocity_smoother")
    vmax, _, wmax = smoother["max_velocity"]
    vmin, _, wmin = smoother["min_velocity"]
    assert vmax <= max_wheel and -vmin <= max_wheel
    assert wmax <= max_turn and -wmin <= max_turn
    # driving at full speed while turning at full rate stays within the treads' limit x 1.5
    # (beyond max_wheel_speed the driver scales both treads, keeping the curvature)
    assert vmax + wmax * geo.TRACK_WIDTH_M / 2.0 <= 1.5 * max_wheel
    assert rpp["desired_linear_vel"] <= vmax
    behavior = params(nav2, "behavior_server")
    assert behavior["min_rotational_vel"] < behavior["max_rotational_vel"] <= max_turn
    # the driver stops the treads when cmd_vel stops for cmd_vel_timeout: Nav2 sends faster
    controller = params(nav2, "controller_server")
    assert 1.0 / controller["controller_frequency"] < default("cmd_vel_timeout") / 2
    assert 1.0 / smoother["smoothing_frequency"] < default("cmd_vel_timeout") / 2
    # the smoother repeats the last command for velocity_timeout when the controller goes
    # quiet, then ramps it down: a controller that dies stops the robot within the driver's
    # own watchdog time (velocity_timeout 1.0 drove on for about 1.2 s, 15-20 cm)
    ramp_down = max(vmax / -smoother["max_decel"][0], wmax / -smoother["max_decel"][2])
    assert smoother["velocity_timeout"] + ramp_down <= default("cmd_vel_timeout")


def _robot_outline():
    """(min x, max x, max |y|) in base_footprint of every collision box of the robot
    description, over the head's and the lift's whole range (the lift's forks reach
    furthest ahead with the arm level)."""
    import itertools
    import xml.etree.ElementTree as ET
    from cozmo_driver.description import Transform, UrdfModel, quaternion_from_rpy, robot_description
    urdf = robot_description(path=ROOT / "cozmo_description" / "urdf" / "cozmo.urdf.xacro")
    model, root = UrdfModel.from_xml(urdf), ET.fromstring(urdf)
    lifts = [geo.LIFT_MIN_ANGLE_RAD + (geo.LIFT_MAX_ANGLE_RAD - geo.LIFT_MIN_ANGLE_RAD) * i / 40
             for i in range(41)] + [0.0]
    heads = (geo.HEAD_MIN_ANGLE_RAD, 0.0, geo.HEAD_MAX_ANGLE_RAD)
    xs, ys = [], []
    for (lift, head), link in itertools.product(itertools.product(lifts, heads), root.findall("link")):
        pose = model.transform("base_footprint", link.get("name"), {"lift_joint": lift, "head_joint": head})
        for collision in link.findall("collision"):
            origin = collision.find("origin")
            box = collision.find("geometry/box")
            assert box is not None, f"{link.get('name')}: only boxes are measured here"
            half = [float(v) / 2.0 for v in box.get("size").split()]
            shape = pose * Transform(tuple(float(v) for v in origin.get("xyz").split()),
                                     quaternion_from_rpy(*(float(v) for v in origin.get("rpy").split())))
            for corner in itertools.product(*((-h, h) for h in half)):
                x, y, _ = shape.apply(corner)
                xs.append(x)
                ys.append(abs(y))
    return min(xs), max(xs), max(ys)


def test_footprint_is_cozmos(nav2):
    rear, front, side = _robot_outline()
    assert front == pytest.approx(0.049, abs=0.002)  # the forks, with the arm level
    assert rear == pytest.approx(-0.033, abs=0.002)  # the treads
    for costmap in ("local_costmap", "global_costmap"):
        p = params(nav2, costmap)
        points = footprint(p["footprint"])
        assert [tuple(point) for point in points] == [tuple(point) for point in geo.FOOTPRINT_M]
        xs, ys = [x for x, _ in points], [y for _, y in points]
        assert len(points) >= 3
        # the robot description's outline (forks included) is inside it, with little to spare
        assert min(xs) <= rear and max(xs) >= front and min(ys) <= -side and max(ys) >= side
        assert rear - min(xs) < 0.005 and max(xs) - front < 0.005 and max(ys) - side < 0.005
        # the treads (track 46 mm) are inside it
        assert min(ys) < -geo.TRACK_WIDTH_M / 2 and max(ys) > geo.TRACK_WIDTH_M / 2
        assert "robot_radius" not in p  # footprint or radius, not both
        assert p["resolution"] <= 0.01  # cells no larger than a sixth of the robot
        assert p["plugins"] == ["cliff_layer", "inflation_layer"]  # no range sensor
    goal = params(nav2, "controller_server")["goal_checker"]
    from cozmo_driver.driver.motion import MIN_HEADING_TOLERANCE_RAD, MIN_POSITION_TOLERANCE_M
    assert goal["xy_goal_tolerance"] >= MIN_POSITION_TOLERANCE_M
    assert goal["yaw_goal_tolerance"] >= MIN_HEADING_TOLERANCE_RAD


def _driver_topics(context) -> dict:
    """{message type name: its topics} of the driver's publishers, as rclpy resolved them for a
    driver in the root namespace, as docs/motion.md starts it (configured, never connected:
    the link is opened at activation)."""
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter

    from cozmo_driver.ros.driver_node import CozmoDriverNode
    node = CozmoDriverNode(context=context, parameter_overrides=[
        Parameter("robot_ip", value="127.0.0.1"), Parameter("camera_enabled", value=False)])
    try:
        assert node.get_namespace() == "/"
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        topics: dict = {}
        for publisher in node.publishers:
            topics.setdefault(publisher.msg_type.__name__, set()).add(publisher.topic_name)
        return topics
    finally:
        node.close()
        node.destroy_node()


def _resolved(context, topic: str, node_name: str, namespace: str) -> str:
    """``topic`` as a node ``node_name`` in ``namespace`` resolves it (rcl's rules: a relative
    name joins the node's namespace, an absolute one stays as it is)."""
    rclpy = require("rclpy")
    node = rclpy.create_node(node_name, namespace=namespace, context=context)
    try:
        return node.resolve_topic_name(topic)
    finally:
        node.destroy_node()


@pytest.mark.ros
def test_the_cliff_layer_keeps_the_edges_the_driver_publishes(nav2, rclpy_context):
    """Each costmap's obstacle layer takes the driver's cliff/points as it publishes them:
    the topic, resolved as Nav2 resolves it, PointCloud2, points on the ground (z 0, within
    both height bands), beyond the footprint (its clearing would erase them), marked and
    never cleared.

    Nav2 runs each costmap as a node of its own in a namespace of its own: controller_server
    (root namespace) makes /local_costmap/local_costmap, planner_server
    /global_costmap/global_costmap. On Humble and Jazzy the obstacle layer subscribes to the
    source's ``topic`` as it is, so that the costmap node resolves it: a relative
    ``cliff/points`` is /local_costmap/cliff/points there, which nothing publishes (only
    Kilted joins it with the server's namespace instead)."""
    driver = _driver_topics(rclpy_context)
    assert driver["PointCloud2"] == {"/cliff/points"}
    for costmap in ("local_costmap", "global_costmap"):
        p = params(nav2, costmap)
        layer = p["cliff_layer"]
        assert layer["plugin"] == "nav2_costmap_2d::ObstacleLayer"
        assert layer["observation_sources"].split() == ["cliff"]
        source = layer["cliff"]
        topic = _resolved(rclpy_context, source["topic"], costmap, f"/{costmap}")
        assert topic in driver["PointCloud2"], (
            f"{costmap}'s cliff source subscribes to {topic}, the driver publishes {driver['PointCloud2']}")
        assert source["data_type"] == "PointCloud2"
        assert source["marking"] is True and source["clearing"] is False
        # nor does the footprint clear them: the padded footprint's corners reach 63 mm from
        # base_footprint, the marks 64-67 mm, in 1 cm cells: a turn at the edge swept them
        assert layer["footprint_clearing_enabled"] is False
        # the inflation's cost reaches beyond the padded footprint's farthest corner, so that the
        # planner prefers to keep the robot's front clear of a mark (lethal only within the
        # inscribed radius: a preference, as docs/motion.md says)
        padding = p["footprint_padding"]
        corner = max(math.hypot(abs(x) + padding, abs(y) + padding) for x, y in footprint(p["footprint"]))
        assert p["inflation_layer"]["inflation_radius"] >= corner + p["resolution"]
        front = max(x for x, _ in footprint(p["footprint"])) + p["footprint_padding"]
        for x, y, z in geo.CLIFF_EDGE_POINTS_M:
            assert x > front
            assert layer["min_obstacle_height"] <= z <= layer["max_obstacle_height"]
            assert source["min_obstacle_height"] <= z <= source["max_obstacle_height"]
            assert math.hypot(x, y) < source["obstacle_max_range"]


@pytest.mark.ros
def test_the_servers_topics_resolve_to_the_drivers_and_the_costmaps(nav2, rclpy_context):
    """Nav2's servers run in the root namespace, as the driver does: a relative name of theirs
    resolves as the driver's does (odom); behavior_server's costmap topics name what each
    costmap node publishes in its own namespace (costmap_raw, published_footprint)."""
    driver = _driver_topics(rclpy_context)
    # odom: bt_navigator and controller_server read it, the smoother with CLOSED_LOOP feedback
    for server in ("bt_navigator", "controller_server", "velocity_smoother"):
        topic = _resolved(rclpy_context, params(nav2, server)["odom_topic"], server, "/")
        assert topic in driver["Odometry"], (server, topic, driver["Odometry"])
    # behavior_server (root namespace) reads what each costmap node publishes in its own
    behavior = params(nav2, "behavior_server")
    for costmap in ("local_costmap", "global_costmap"):
        for key, published in ((f"{costmap.split('_')[0]}_costmap_topic", "costmap_raw"),
                               (f"{costmap.split('_')[0]}_footprint_topic", "published_footprint")):
            assert _resolved(rclpy_context, behavior[key], "behavior_server", "/") == \
                _resolved(rclpy_context, published, costmap, f"/{costmap}"), key


def test_only_navigate_to_pose_is_loaded(nav2):
    """navigate_through_poses would run Nav2's default tree for it, which clears the costmaps
    (every edge met forgotten) and backs up 0.30 m with no cliff sensor at the back: only
    navigate_to_pose is listed (Jazzy loads the navigators listed; Humble loads both anyway)."""
    bt = params(nav2, "bt_navigator")
    assert bt["navigators"] == ["navigate_to_pose"]
    assert "navigate_through_poses" not in bt


# Key names from the Nav2 configuration guide (docs.nav2.org, Jazzy pages): a misspelt key
# is silently ignored by Nav2, so every key of the file must be one of these.
KNOWN_KEYS = {
    "bt_navigator": {"navigators", "default_nav_to_pose_bt_xml", "default_nav_through_poses_bt_xml",
                     "always_reload_bt_xml", "plugin_lib_names", "bt_loop_duration", "filter_duration",
                     "default_server_timeout", "wait_for_service_timeout", "introspection_mode",
                     "transform_tolerance", "global_frame", "robot_base_frame", "odom_topic",
                     "goal_blackboard_id", "path_blackboard_id", "goals_blackboard_id",
                     "use_sim_time", "error_code_names", "bond_heartbeat_period",
                     "navigate_to_pose", "navigate_through_poses"},
    "controller_server": {"controller_frequency", "costmap_update_timeout", "use_realtime_priority",
                          "publish_zero_velocity", "action_server_result_timeout",
                          "controller_plugins", "progress_checker_plugins", "goal_checker_plugins",
                          "min_x_velocity_threshold", "min_y_velocity_threshold",
                          "min_theta_velocity_threshold", "failure_tolerance", "speed_limit_topic",
                          "odom_topic", "enable_stamped_cmd_vel", "bond_heartbeat_period",
                          "use_sim_time", "progress_checker", "goal_checker", "FollowPath"},
    "FollowPath": {"plugin", "desired_linear_vel", "lookahead_dist", "min_lookahead_dist",
                   "max_lookahead_dist", "lookahead_time", "rotate_to_heading_angular_vel",
                   "transform_tolerance", "use_velocity_scaled_lookahead_dist",
                   "min_approach_linear_velocity", "approach_velocity_scaling_dist",
                   "use_collision_detection", "max_allowed_time_to_collision_up_to_carrot",
                   "use_regulated_linear_velocity_scaling", "use_cost_regulated_linear_velocity_scaling",
                   "regulated_linear_scaling_min_radius", "regulated_linear_scaling_min_speed",
                   "use_fixed_curvature_lookahead", "curvature_lookahead_dist", "use_rotate_to_heading",
                   "allow_reversing", "rotate_to_heading_min_angle", "max_angular_accel",
                   "max_robot_pose_search_dist"},
    "progress_checker": {"plugin", "required_movement_radius", "movement_time_allowance"},
    "goal_checker": {"plugin", "xy_goal_tolerance", "yaw_goal_tolerance", "stateful"},
    "costmap": {"always_send_full_costmap", "footprint_padding", "footprint", "global_frame",
                "height", "width", "lethal_cost_threshold", "map_vis_z", "observation_sources",
                "origin_x", "origin_y", "publish_frequency", "resolution", "robot_base_frame",
                "robot_radius", "rolling_window", "track_unknown_space", "transform_tolerance",
                "initial_transform_timeout", "trinary_costmap", "unknown_cost_value",
                "update_frequency", "use_maximum", "plugins", "filters", "use_sim_time",
                "inflation_layer", "static_layer", "cliff_layer"},
    "obstacle_layer": {"plugin", "enabled", "footprint_clearing_enabled", "min_obstacle_height",
                       "max_obstacle_height", "combination_method", "observation_sources"},
    "data_source": {"topic", "sensor_frame", "observation_persistence", "expected_update_rate",
                    "data_type", "min_obstacle_height", "max_obstacle_height", "inf_is_valid",
                    "marking", "clearing", "obstacle_max_range", "obstacle_min_range",
                    "raytrace_max_range", "raytrace_min_range"},
    "inflation_layer": {"plugin", "enabled", "inflation_radius", "cost_scaling_factor",
                        "inflate_unknown", "inflate_around_unknown"},
    "planner_server": {"expected_planner_frequency", "planner_plugins", "use_sim_time", "GridBased"},
    "GridBased": {"plugin", "tolerance", "use_astar", "allow_unknown"},
    "behavior_server": {"local_costmap_topic", "global_costmap_topic", "local_footprint_topic",
                        "global_footprint_topic", "cycle_frequency", "transform_tolerance",
                        "local_frame", "global_frame", "robot_base_frame", "introspection_mode",
                        "behavior_plugins", "simulate_ahead_time", "max_rotational_vel",
                        "min_rotational_vel", "rotational_acc_lim", "enable_stamped_cmd_vel",
                        "bond_heartbeat_period", "use_sim_time", "spin", "backup",
                        "drive_on_heading", "wait"},
    "velocity_smoother": {"use_realtime_priority", "smoothing_frequency", "scale_velocities",
                          "feedback", "max_velocity", "min_velocity", "deadband_velocity",
                          "velocity_timeout", "max_accel", "max_decel", "odom_topic", "odom_duration",
                          "enable_stamped_cmd_vel", "bond_heartbeat_period", "use_sim_time"},
    "lifecycle_manager_navigation": {"autostart", "node_names", "bond_timeout", "use_sim_time"},
}


def test_every_key_is_a_documented_nav2_parameter(nav2):
    def check(found: dict, known: str) -> None:
        unknown = set(found) - KNOWN_KEYS[known]
        assert not unknown, f"{known}: keys not in Nav2's configuration guide: {sorted(unknown)}"

    for node in ("bt_navigator", "controller_server", "planner_server", "behavior_server",
                 "velocity_smoother", "lifecycle_manager_navigation"):
        check(params(nav2, node), node)
    controller = params(nav2, "controller_server")
    for name in ("FollowPath", "progress_checker", "goal_checker"):
        check(controller[name], name)
    for costmap in ("local_costmap", "global_costmap"):
        check(params(nav2, costmap), "costmap")
        check(params(nav2, costmap)["inflation_layer"], "inflation_layer")
        layer = params(nav2, costmap)["cliff_layer"]
        check({k: v for k, v in layer.items() if k not in layer["observation_sources"].split()},
              "obstacle_layer")
        for source in layer["observation_sources"].split():
            check(layer[source], "data_source")
    check(params(nav2, "planner_server")["GridBased"], "GridBased")
    # every plugin list names sections that exist, with Jazzy's "::" plugin names
    behavior = params(nav2, "behavior_server")
    for name in behavior["behavior_plugins"]:
        assert "::" in behavior[name]["plugin"], name
    for name in controller["controller_plugins"] + controller["progress_checker_plugins"] + \
            controller["goal_checker_plugins"]:
        assert "::" in controller[name]["plugin"], name
    bt = params(nav2, "bt_navigator")
    for name in bt["navigators"]:
        assert bt[name]["plugin"].startswith("nav2_bt_navigator::"), name
    planner = params(nav2, "planner_server")
    for name in planner["planner_plugins"]:
        assert "::" in planner[name]["plugin"], name
    manager = params(nav2, "lifecycle_manager_navigation")
    assert set(manager["node_names"]) == {"controller_server", "planner_server", "behavior_server",
                                          "velocity_smoother", "bt_navigator"}
    assert set(manager["node_names"]) <= set(nav2)


# ----------------------------------------------------------------------------- the contract, played

def _pure_pursuit(pose, path, lookahead: float):
    """Index of the lookahead point: the first path point at least ``lookahead`` ahead of
    the point nearest to the robot."""
    x, y, _ = pose
    nearest = min(range(len(path)), key=lambda i: math.hypot(path[i][0] - x, path[i][1] - y))
    for i in range(nearest, len(path)):
        if math.hypot(path[i][0] - x, path[i][1] - y) >= lookahead:
            return i
    return len(path) - 1


@pytest.mark.ros
def test_a_nav2_shaped_controller_drives_the_robot_through_cmd_vel(rclpy_context, nav2):
    """What Nav2's controller_server does with this file, minus Nav2: read odom and tf in the
    file's frames, follow a path with the file's RPP settings at controller_frequency, publish
    plain Twist on cmd_vel, stop within the goal checker's tolerance."""
    rclpy = require("rclpy")
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile
    from tf2_msgs.msg import TFMessage

    from cozmo_driver.ros.driver_node import CozmoDriverNode
    from cozmo_driver.sim import SimServer

    controller = params(nav2, "controller_server")
    rpp, goal_checker = controller["FollowPath"], controller["goal_checker"]
    frames = (params(nav2, "bt_navigator")["global_frame"], params(nav2, "bt_navigator")["robot_base_frame"])
    with SimServer(port=0, seed=11) as sim:
        node = CozmoDriverNode(context=rclpy_context, parameter_overrides=[
            Parameter("robot_ip", value="127.0.0.1"), Parameter("robot_port", value=sim.address[1]),
            Parameter("camera_enabled", value=False)])
        nav = rclpy.create_node("nav2_stand_in", context=rclpy_context)
        executor = SingleThreadedExecutor(context=rclpy_context)
        executor.add_node(node)
        executor.add_node(nav)
        state = {"odom": None, "tf": set()}
        nav.create_subscription(Odometry, controller["odom_topic"],
                                lambda m: state.__setitem__("odom", m), QoSProfile(depth=10))
        nav.create_subscription(TFMessage, "/tf", lambda m: state["tf"].update(
            (t.header.frame_id, t.child_frame_id) for t in m.transforms), QoSProfile(depth=100))
        cmd = nav.create_publisher(Twist, "cmd_vel", 10)

        def spin_until(predicate, timeout):
            deadline = time.monotonic() + timeout
            while not predicate() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.01)
            return predicate()

        try:
            assert node.start()
            # node.start() returns while the link is being made: odom and its tf come once connected
            assert spin_until(lambda: state["odom"] is not None and frames in state["tf"], CONNECT_TIMEOUT), (
                f"within {CONNECT_TIMEOUT:.0f} s of start: odom "
                f"{'came' if state['odom'] is not None else 'never came'}, tf {frames[0]}->{frames[1]} "
                f"{'came' if frames in state['tf'] else 'never came'} (transforms seen: {sorted(state['tf'])})")
            odom = state["odom"]
            assert (odom.header.frame_id, odom.child_frame_id) == frames
            start_truth = sim.true_pose()
            # an L: 0.25 m ahead, then 0.15 m to the left, 1 cm apart (a planner's resolution)
            path = [(0.01 * k, 0.0) for k in range(26)] + [(0.25, 0.01 * k) for k in range(1, 16)]
            goal = path[-1]
            period = 1.0 / controller["controller_frequency"]
            next_t = time.monotonic()
            deadline = time.monotonic() + 20.0
            reached = False
            while time.monotonic() < deadline:
                spin_until(lambda: time.monotonic() >= next_t, 1.0)
                next_t += period
                p = state["odom"].pose.pose
                yaw = 2.0 * math.atan2(p.orientation.z, p.orientation.w)
                pose = (p.position.x, p.position.y, yaw)
                twist = Twist()
                if math.hypot(goal[0] - pose[0], goal[1] - pose[1]) <= goal_checker["xy_goal_tolerance"] / 2:
                    cmd.publish(twist)
                    reached = True
                    break
                tx, ty = path[_pure_pursuit(pose, path, rpp["lookahead_dist"])]
                dx, dy = tx - pose[0], ty - pose[1]
                alpha = math.atan2(dy, dx) - yaw
                alpha = (alpha + math.pi) % (2 * math.pi) - math.pi
                if abs(alpha) > rpp["rotate_to_heading_min_angle"]:
                    twist.angular.z = math.copysign(rpp["rotate_to_heading_angular_vel"], alpha)
                else:
                    distance = math.hypot(dx, dy)
                    v = rpp["desired_linear_vel"]
                    left = math.hypot(goal[0] - pose[0], goal[1] - pose[1])
                    if left < rpp["approach_velocity_scaling_dist"]:
                        v = max(rpp["min_approach_linear_velocity"],
                                v * left / rpp["approach_velocity_scaling_dist"])
                    twist.linear.x = v
                    twist.angular.z = 2.0 * v * math.sin(alpha) / max(distance, 1e-3)
                cmd.publish(twist)
            assert reached, "the stand-in controller did not reach the goal"
            spin_until(lambda: False, 0.5)
            x0, y0, a0 = start_truth
            x, y, _ = sim.true_pose()
            c, s = math.cos(-a0), math.sin(-a0)
            tx, ty = ((x - x0) * c - (y - y0) * s) / 1000.0, ((x - x0) * s + (y - y0) * c) / 1000.0
            assert math.hypot(tx - goal[0], ty - goal[1]) <= goal_checker["xy_goal_tolerance"]
        finally:
            node.close()
            executor.shutdown(timeout_sec=1.0)
            node.destroy_node()
            nav.destroy_node()


def _nav2_installed() -> bool:
    try:
        from ament_index_python.packages import get_package_share_directory
        get_package_share_directory("nav2_controller")
    except Exception:  # noqa: BLE001 - PackageNotFoundError, or no ament index at all
        return False
    return shutil.which("ros2") is not None


@pytest.mark.ros
@pytest.mark.skipif(not _nav2_installed(),
                    reason="Nav2 is not installed: it has no PyPI wheels and no ROS apt repository is "
                           "reachable here. On a real ROS 2 Jazzy install: apt install "
                           "ros-jazzy-navigation2, then run this test (docs/motion.md, 'Nav2')")
def test_nav2_nodes_configure_with_this_file(tmp_path):
    """Each Nav2 node of the file starts with it and configures (lifecycle) without error."""
    env = dict(os.environ)
    procs = []
    try:
        for package, executable in (("nav2_controller", "controller_server"),
                                    ("nav2_planner", "planner_server"),
                                    ("nav2_behaviors", "behavior_server"),
                                    ("nav2_velocity_smoother", "velocity_smoother"),
                                    ("nav2_bt_navigator", "bt_navigator")):
            log = open(tmp_path / f"{executable}.log", "w")
            procs.append((executable, log, subprocess.Popen(
                ["ros2", "run", package, executable, "--ros-args", "--params-file", str(NAV2)],
                stdout=log, stderr=subprocess.STDOUT, env=env)))
        for executable, _, _ in procs:
            deadline = time.monotonic() + 30.0
            while True:
                out = subprocess.run(["ros2", "lifecycle", "set", f"/{executable}", "configure"],
                                     capture_output=True, text=True, env=env, timeout=30)
                if "successful" in out.stdout.lower():
                    break
                assert time.monotonic() < deadline, \
                    f"{executable} did not configure: {out.stdout} {out.stderr} " \
                    f"{(tmp_path / f'{executable}.log').read_text()[-2000:]}"
                time.sleep(1.0)
    finally:
        for _, log, proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
