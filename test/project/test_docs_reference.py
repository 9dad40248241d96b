"""The reference tables of docs/ against what the nodes really declare.

The driver (against the simulated robot over UDP on 127.0.0.1, configured and active), the
face node and the behavior node run in-process with real rclpy, in the test's context. Each
``<!-- reference: <node> <kind> -->`` table (test/docs_tables.py) must list exactly what the
node has in the ROS graph, both ways: every row is declared, every declared item has a row,
with its type; parameters with their type and default.

Not listed in the tables, by rule (docs/driver.md, "How these tables are checked"): the
standard ``/rosout`` and ``/parameter_events``; the topics and services of actions
(``.../_action/...``: compared as actions); names under the node's own name
(``/cozmo_driver/...``: parameter, lifecycle and type-description services, the lifecycle
``transition_event``). The driver's interfaces include those of ``_cozmo_driver_cmd_vel``,
the small node on which it serves ``cmd_vel`` with an executor of its own. Nor the
parameters every node has (``use_sim_time``, ``start_type_description_service``) and the ``qos_overrides.*`` parameters.
"""

from __future__ import annotations

from typing import Dict, Set, Tuple

import pytest

from dependencies import require

rclpy = require("rclpy")

from rclpy.action import graph as action_graph  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from docs_tables import KINDS, reference_tables  # noqa: E402
from ros_harness import CONNECT_TIMEOUT, DISCOVERY_TIMEOUT, RosHarness, sim_fixture  # noqa: E402
from cozmo_driver.ros.behavior_node import BehaviorNode  # noqa: E402
from cozmo_driver.ros.driver_node import CozmoDriverNode  # noqa: E402
from cozmo_driver.ros.face_node import FaceNode  # noqa: E402

pytestmark = [pytest.mark.ros]

NODES = ("cozmo_driver", "cozmo_face", "cozmo_behavior")
STANDARD_TOPICS = {"/rosout", "/parameter_events"}
#: nodes that a node makes for itself and whose interfaces are that node's (the driver serves
#: cmd_vel and display/face, the face node face/look_at, on small nodes of their own with
#: their own executors, where rclpy allows)
COMPANIONS = {"cozmo_driver": ("_cozmo_driver_cmd_vel", "_cozmo_driver_display_face"),
              "cozmo_face": ("_cozmo_face_look_at",)}
STANDARD_PARAMETERS = {"use_sim_time", "start_type_description_service"}
TYPE_NAMES = {Parameter.Type.BOOL: "bool", Parameter.Type.INTEGER: "int", Parameter.Type.DOUBLE: "double",
              Parameter.Type.STRING: "string", Parameter.Type.STRING_ARRAY: "string[]",
              Parameter.Type.INTEGER_ARRAY: "int[]", Parameter.Type.DOUBLE_ARRAY: "double[]",
              Parameter.Type.BOOL_ARRAY: "bool[]", Parameter.Type.BYTE_ARRAY: "byte[]"}

sim = sim_fixture(seed=2)

Items = Set[Tuple[str, str]]


def short_type(full: str) -> str:
    """'nav_msgs/msg/Odometry' -> 'nav_msgs/Odometry'."""
    parts = full.split("/")
    return f"{parts[0]}/{parts[-1]}"


def documented(node: str, kind: str) -> Items:
    rows = reference_tables().get((node, kind), [])
    return {(r.name if r.name.startswith("/") else "/" + r.name, r.type) for r in rows}


def in_graph(probe, node: str, kind: str) -> Items:
    """What ``node`` (namespace /) has of ``kind`` in the graph, as (absolute name, pkg/Type)."""
    query = {"published": probe.get_publisher_names_and_types_by_node,
             "subscribed": probe.get_subscriber_names_and_types_by_node,
             "services": probe.get_service_names_and_types_by_node,
             "service-clients": probe.get_client_names_and_types_by_node,
             "actions": lambda n, ns: action_graph.get_action_server_names_and_types_by_node(probe, n, ns),
             "action-clients": lambda n, ns: action_graph.get_action_client_names_and_types_by_node(
                 probe, n, ns)}[kind]
    items: Items = set()
    present = set(probe.get_node_names())
    for member in (node, *COMPANIONS.get(node, ())):
        if member != node and member not in present:
            continue
        for name, types in query(member, "/"):
            if name in STANDARD_TOPICS or "/_action/" in name or name.startswith(f"/{member}/"):
                continue
            for full in types:
                items.add((name, short_type(full)))
    return items


def declared_parameters(node) -> Dict[str, Tuple[str, object]]:
    names = list(node.get_parameters_by_prefix(""))  # every one by its full name (Humble has no list_parameters)
    out = {}
    for name in names:
        if name in STANDARD_PARAMETERS or name.startswith("qos_overrides."):
            continue
        param = node.get_parameter(name)
        out[name] = (TYPE_NAMES.get(param.type_, str(param.type_)), param.value)
    return out


def diff(doc: Items, real: Items) -> str:
    return (f"documented but not declared: {sorted(doc - real)}; "
            f"declared but not documented: {sorted(real - doc)}")


@pytest.fixture
def stack(private_rclpy_context, sim):
    # a domain of its own: the graph must hold these nodes' interfaces and nothing else (a
    # node of the same name an earlier test left may linger in the run's graph; the by-node
    # queries then read that one)
    rclpy_context = private_rclpy_context
    driver = CozmoDriverNode(context=rclpy_context, parameter_overrides=[
        Parameter("robot_ip", value="127.0.0.1"), Parameter("robot_port", value=sim.address[1])])
    # the driver's defaults, as it declares them: a second driver node, never started, with
    # no overrides (it opens no socket before configure)
    bare = CozmoDriverNode(node_name="cozmo_driver_defaults", context=rclpy_context)
    face = FaceNode(context=rclpy_context)
    behavior = BehaviorNode(context=rclpy_context)
    harness = RosHarness(rclpy_context, "docs_probe", nodes=(driver, bare, face, behavior))
    try:
        assert driver.start()
        assert harness.spin_until(lambda: driver.connected, CONNECT_TIMEOUT), "driver did not connect"
        yield harness, {"cozmo_driver": bare, "cozmo_face": face, "cozmo_behavior": behavior}
    finally:
        harness.close()


def test_every_reference_table_names_a_node_and_kind_that_this_test_checks():
    tables = reference_tables()
    assert {node for node, _ in tables} == set(NODES)
    for node in NODES:
        assert (node, "parameters") in tables and (node, "published") in tables, node
    assert all(kind in KINDS for _, kind in tables)


def test_interface_tables_match_the_running_nodes(stack):
    harness, _ = stack
    for node in NODES:
        for kind in KINDS:
            if kind == "parameters":
                continue
            doc = documented(node, kind)
            # bounded: discovery is asynchronous, and the behavior node holds its one-shot
            # `status` subscription only until the first message
            harness.spin_until(lambda: in_graph(harness.probe, node, kind) == doc, DISCOVERY_TIMEOUT)
            real = in_graph(harness.probe, node, kind)
            assert doc == real, f"{node} {kind}: {diff(doc, real)}"


def test_parameter_tables_match_the_declared_parameters_and_defaults(stack):
    _, nodes = stack
    tables = reference_tables()
    for node_name, node in nodes.items():
        real = declared_parameters(node)
        rows = {r.name: r for r in tables[(node_name, "parameters")]}
        assert set(rows) == set(real), (f"{node_name}: documented but not declared: "
                                        f"{sorted(set(rows) - set(real))}; declared but not "
                                        f"documented: {sorted(set(real) - set(rows))}")
        for name, (type_name, value) in real.items():
            row = rows[name]
            assert row.type == type_name, f"{row.where}: {name} is {type_name}, not {row.type}"
            assert row.default == value and type(row.default) is type(value), \
                f"{row.where}: {name} defaults to {value!r}, not {row.default!r}"
