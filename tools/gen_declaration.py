#!/usr/bin/env python3
"""Regenerate ``cozmo_driver/protocol/declaration.py`` from the verified message table.

The verified table lives outside the package (``../shared/protocol/messages.json``).
The package carries its own declaration so that it needs nothing at run time; this
script is how the two are kept equal, and ``test/protocol/test_declaration.py`` checks that
they still are.

Field names are renamed where the reference name hides the unit (``pose_x`` becomes
``pose_x_mm``); ``RENAMES`` below is the complete list, and the declaration keeps the
reference name of each renamed field so conformance tests can map between the two.
``RETYPES`` lists the fields whose meaning Anki's published source shows to be other
than the reference's, in the same number of bytes: the declaration keeps the reference's
name and type (``ref``, ``ref_type``) beside ours.

Usage: python3 tools/gen_declaration.py [path/to/messages.json]
"""

from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_TABLE = ROOT.parent / "shared" / "protocol" / "messages.json"
OUTPUT = ROOT / "cozmo_driver" / "protocol" / "declaration.py"

# (message, reference field name) -> our field name. Units: mm, mm/s, mm/s^2, rad,
# rad/s, ms, V, as measured by the robot.
RENAMES = {
    ("SetOrigin", "pose_x"): "pose_x_mm",
    ("SetOrigin", "pose_y"): "pose_y_mm",
    ("SyncTime", "timestamp"): "timestamp_ms",
    ("AppendPathSegLine", "from_x"): "from_x_mm",
    ("AppendPathSegLine", "from_y"): "from_y_mm",
    ("AppendPathSegLine", "to_x"): "to_x_mm",
    ("AppendPathSegLine", "to_y"): "to_y_mm",
    ("AppendPathSegArc", "center_x"): "center_x_mm",
    ("AppendPathSegArc", "center_y"): "center_y_mm",
    ("AppendPathSegPointTurn", "x"): "x_mm",
    ("AppendPathSegPointTurn", "y"): "y_mm",
    ("AnimBody", "speed"): "speed_mmps",
    ("RobotState", "timestamp"): "timestamp_ms",
    ("RobotState", "pose_x"): "pose_x_mm",
    ("RobotState", "pose_y"): "pose_y_mm",
    ("RobotState", "pose_z"): "pose_z_mm",
    ("RobotState", "accel_x"): "accel_x_mmps2",
    ("RobotState", "accel_y"): "accel_y_mmps2",
    ("RobotState", "accel_z"): "accel_z_mmps2",
    ("RobotState", "gyro_x"): "gyro_x_radps",
    ("RobotState", "gyro_y"): "gyro_y_radps",
    ("RobotState", "gyro_z"): "gyro_z_radps",
    ("RobotState", "battery_voltage"): "battery_voltage_v",
    ("AnimationState", "timestamp"): "timestamp_ms",
    ("ImageChunk", "frame_timestamp"): "frame_timestamp_ms",
    ("ImageImuData", "rate_x"): "rate_x_radps",
    ("ImageImuData", "rate_y"): "rate_y_radps",
    ("ImageImuData", "rate_z"): "rate_z_radps",
    ("ObjectMoved", "timestamp"): "timestamp_ms",
    ("ObjectStoppedMoving", "timestamp"): "timestamp_ms",
    ("ObjectTapped", "timestamp"): "timestamp_ms",
    ("ObjectTapFiltered", "timestamp"): "timestamp_ms",
    ("ObjectUpAxisChanged", "timestamp"): "timestamp_ms",
    ("ObjectAccel", "timestamp"): "timestamp_ms",
}

# (message, reference field name) -> (our name, our type, why): same size on the wire.
RETYPES = {
    # Anki's engine connects an object with SetPropSlot(factory_id, slot), slot 0..3 (its
    # Robot::ConnectToRequestedObjects), and frees a slot with factory id 0; the body firmware
    # assigns the radio slot (Radio::assignProp). The reference reads the byte as a bool
    # ``connect``: true is slot 1, false slot 0.
    ("ObjectConnect", "connect"): ("slot", "u8"),
}

# Older firmware sends these messages without their last fields (PROTOCOL_NOTES b):
# the decoder accepts bodies down to this many bytes and fills the rest with defaults.
MIN_BODY_SIZES = {
    "SetLiftHeight": 16,   # no action_id before v2381
    "SetHeadAngle": 16,    # no action_id before v2381
    "AnimationState": 14,  # no client_drop_count before v2381
}

SCALARS = {"u8", "u16", "u32", "i8", "i16", "i32", "f32", "f64", "bool"}


def field_tuple(msg_name: str, f: dict) -> str:
    name = RENAMES.get((msg_name, f["name"]), f["name"])
    kind = f["type"]
    ref_type = None
    if (msg_name, f["name"]) in RETYPES:
        name, ours = RETYPES[(msg_name, f["name"])]
        ref_type, kind = kind, ours
    ref = f["name"] if name != f["name"] else None
    n = f["length_prefix_type_or_fixed_length"]
    default = f.get("default")
    if kind in SCALARS:
        enum = f.get("enum")
        parts = [repr(name), repr(kind)]
        extra = []
        if ref_type:
            extra.append(f"ref_type={ref_type!r}")
        if enum:
            extra.append(f"enum={enum!r}")
        if default not in (None, 0, 0.0, False):
            extra.append(f"default={default!r}")
        if ref:
            extra.append(f"ref={ref!r}")
        return f"F({', '.join(parts + extra)})"
    if kind == "farray":
        elem = f["element_type"]
        extra = [f"ref={ref!r}"] if ref else []
        return f"FixedArray({', '.join([repr(name), repr(elem), str(n)] + extra)})"
    if kind == "varray":
        elem = f["element_type"]
        extra = [f"ref={ref!r}"] if ref else []
        return f"VarArray({', '.join([repr(name), repr(elem), repr(n)] + extra)})"
    if kind == "string":
        extra = [f"ref={ref!r}"] if ref else []
        return f"String({', '.join([repr(name), repr(n)] + extra)})"
    raise SystemExit(f"unknown field type {kind!r} in {msg_name}")


def main() -> int:
    table_path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_TABLE
    table = json.loads(table_path.read_text())
    out = []
    w = out.append
    w('"""The Cozmo wire protocol as data: every message, enum and struct (firmware v2381).\n')
    w("Generated by tools/gen_declaration.py from the verified table in")
    w("shared/protocol/messages.json; edit the generator, not this file.")
    w("Field order is wire order; integers little-endian, packed; bool is one byte.")
    w("Field names carry their units (mm, mmps = mm/s, mmps2 = mm/s^2, rad, radps, ms, v).")
    w('"""\n')
    w("from __future__ import annotations\n")
    w("from ._table import F, FixedArray, Message, String, VarArray\n")
    w("__all__ = ['ENUMS', 'STRUCTS', 'MESSAGES', 'FRAME']\n")
    fr = table["frame"]
    w("FRAME = {")
    w(f"    'magic': bytes.fromhex({fr['magic']!r}),")
    for k in ("header_size", "max_frame_size", "max_frame_payload_size", "first_robot_packet_id",
              "max_seq", "oob_seq"):
        w(f"    {k!r}: {fr[k]!r},")
    w(f"    'frame_types': {fr['frame_types']!r},")
    w(f"    'packet_types': {fr['packet_types']!r},")
    w("}\n")
    w("ENUMS = {")
    for e in table["enums"]:
        w(f"    {e['name']!r}: (")
        for m in e["members"]:
            w(f"        ({m['name']!r}, {m['value']!r}),")
        w("    ),")
    w("}\n")
    w("STRUCTS = {")
    for s in table["structs"]:
        w(f"    {s['name']!r}: (")
        for f in s["fields"]:
            w(f"        {field_tuple(s['name'], f)},")
        w("    ),")
    w("}\n")
    w("MESSAGES = (")
    for m in table["messages"]:
        args = [repr(m["name"]), repr(m["packet_type"]),
                "None" if m["id"] is None else f"0x{m['id']:02x}",
                repr("robot" if m["direction"] == "robot->engine" else
                     "engine" if m["direction"] == "engine->robot" else "both")]
        kw = []
        if m["group"]:
            kw.append(f"group={m['group']!r}")
        if m["name"] in MIN_BODY_SIZES:
            kw.append(f"min_body_size={MIN_BODY_SIZES[m['name']]}")
        if not m["fields"]:
            w(f"    Message({', '.join(args + kw)}),")
            continue
        w(f"    Message({', '.join(args + kw)}, fields=(")
        for f in m["fields"]:
            w(f"        {field_tuple(m['name'], f)},")
        w("    )),")
    w(")")
    OUTPUT.write_text("\n".join(out) + "\n")
    print(f"wrote {OUTPUT.relative_to(ROOT)}: {len(table['messages'])} messages, "
          f"{len(table['enums'])} enums, {len(table['structs'])} structs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
