"""The package's declaration equals the verified table, shared/protocol/messages.json.

Every message (id, packet type, sender, out-of-band flag, group, field order, types, enums,
array lengths and prefixes, defaults; names equal after mapping through ``ref``), every
enum and struct, and the frame constants. ``tools/gen_declaration.py`` must regenerate
the committed file byte for byte, so nobody edits the generated file by hand.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from cozmo_driver.protocol import declaration as decl
from cozmo_driver.protocol._table import F, FixedArray, String, VarArray
from cozmo_driver.protocol.messages import (
    ENUMS,
    MESSAGES_BY_ID,
    MESSAGES_BY_NAME,
    MESSAGES_BY_PACKET_TYPE,
    STRUCTS,
    PacketType,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(__file__).resolve().parents[2].parent / "shared"
TABLE_PATH = SHARED / "protocol" / "messages.json"
SCALARS = {"u8", "u16", "u32", "i8", "i16", "i32", "f32", "f64", "bool"}
SENDER = {"engine->robot": "engine", "robot->engine": "robot", "both": "both"}
_SIZE = {"u8": 1, "i8": 1, "bool": 1, "u16": 2, "i16": 2, "u32": 4, "i32": 4, "f32": 4, "f64": 8}


@pytest.fixture(scope="module")
def table():
    if not TABLE_PATH.exists():
        pytest.skip(f"the verified table {TABLE_PATH} is absent (../shared not checked out)")
    return json.loads(TABLE_PATH.read_text())


def field_matches(owner: str, ours, ref: dict) -> None:
    """One field of ours against one field of the table (``ref``)."""
    where = f"{owner}.{ours.name}"
    ref_name = ours.ref if ours.ref is not None else ours.name
    assert ref_name == ref["name"], f"{where}: reference name {ref_name!r} != {ref['name']!r}"
    if ours.ref is not None:
        assert ours.ref != ours.name, f"{where}: ref set although the name is unchanged"
    kind = ref["type"]
    n = ref["length_prefix_type_or_fixed_length"]
    if kind in SCALARS:
        assert isinstance(ours, F), where
        if ours.ref_type is not None:  # a retype (tools/gen_declaration.py RETYPES): same size
            assert ours.ref_type == kind, where
            assert _SIZE[ours.type] == _SIZE[kind], f"{where}: a retype must keep the size"
        else:
            assert ours.type == kind, where
        assert ours.enum == ref.get("enum"), f"{where}: enum {ours.enum!r} != {ref.get('enum')!r}"
        assert ours.default == ref["default"], f"{where}: default {ours.default!r} != {ref['default']!r}"
    elif kind == "farray":
        assert isinstance(ours, FixedArray), where
        assert (ours.element, ours.count) == (ref["element_type"], n), where
    elif kind == "varray":
        assert isinstance(ours, VarArray), where
        assert (ours.element, ours.prefix) == (ref["element_type"], n), where
    elif kind == "string":
        assert isinstance(ours, String), where
        assert ours.prefix == n and ref["encoding"] == "utf-8", where
    else:  # pragma: no cover - the table has no other kinds
        pytest.fail(f"{where}: unknown kind {kind!r} in the table")


def test_counts(table):
    assert len(decl.MESSAGES) == len(table["messages"]) == 81
    ids = [m.id for m in decl.MESSAGES if m.id is not None]
    assert len(ids) == len(set(ids)) == 77
    assert len(decl.ENUMS) == len(table["enums"]) == 11
    assert len(decl.STRUCTS) == len(table["structs"]) == 2
    # the compiled registry is complete too
    assert len(MESSAGES_BY_NAME) == 81 and len(MESSAGES_BY_ID) == 77
    assert len(MESSAGES_BY_PACKET_TYPE) == 4
    assert len(ENUMS) == 11 and len(STRUCTS) == 2


def test_message_order_and_names(table):
    assert [m.name for m in decl.MESSAGES] == [m["name"] for m in table["messages"]]


@pytest.mark.parametrize("index", range(81))
def test_message_equals_table(table, index):
    ref = table["messages"][index]
    ours = decl.MESSAGES[index]
    name = ours.name
    assert ours.name == ref["name"]
    assert ours.id == ref["id"], name
    if ref["id"] is not None:
        assert int(ref["id_hex"], 16) == ours.id
    assert ours.packet_type == ref["packet_type"], name
    assert PacketType[ours.packet_type] == ref["packet_type_value"], name
    assert ours.sender == SENDER[ref["direction"]], name
    assert ours.group == ref["group"], name
    assert len(ours.fields) == len(ref["fields"]), name
    for f, rf in zip(ours.fields, ref["fields"]):
        field_matches(name, f, rf)
    our_names = [f.name for f in ours.fields]
    assert len(set(our_names)) == len(our_names), f"{name}: duplicate field names"

    cls = MESSAGES_BY_NAME[name]
    assert cls.OOB is ref["oob"], name
    assert cls.ID == ref["id"] and int(cls.PACKET_TYPE) == ref["packet_type_value"]
    assert cls.FIELDS == tuple(our_names)
    if ref["id"] is not None:
        assert MESSAGES_BY_ID[ref["id"]] is cls
        # the direction rule of the table: ids below 0xb0 go to the robot
        first_robot = table["frame"]["first_robot_packet_id"]
        assert (ref["id"] >= first_robot) == (ours.sender == "robot"), name
    else:
        assert MESSAGES_BY_PACKET_TYPE[ref["packet_type_value"]] is cls


@pytest.mark.parametrize("index", range(81))
def test_compiled_defaults_equal_table(table, index):
    ref = table["messages"][index]
    msg = MESSAGES_BY_NAME[ref["name"]]()
    for f, rf in zip(decl.MESSAGES[index].fields, ref["fields"]):
        value = getattr(msg, f.name)
        if rf["type"] in SCALARS:
            assert value == rf["default"], f"{ref['name']}.{f.name}"
            if not f.enum and f.ref_type is None:  # a float field defaults to a float, a bool to a bool
                assert type(value) is type(rf["default"]), f"{ref['name']}.{f.name}: {value!r}"
            if f.enum and rf["default"] in [m["value"] for e in table["enums"] if e["name"] == f.enum
                                            for m in e["members"]]:
                assert isinstance(value, ENUMS[f.enum])
        elif rf["type"] == "farray":
            assert len(value) == rf["length_prefix_type_or_fixed_length"]
            if rf["element_type"] == "u8":
                assert value == bytes(len(value))
            elif rf["element_type"].startswith("struct:"):
                assert all(s == STRUCTS[rf["element_type"][7:]]() for s in value)
            else:
                assert list(value) == [0] * len(value)
        else:
            assert len(value) == 0, f"{ref['name']}.{f.name}"


def test_min_body_sizes_are_the_older_layouts(table):
    """Only the three messages that grew a last field in v2381 accept a shorter body."""
    shorter = {m.name: m.min_body_size for m in decl.MESSAGES if m.min_body_size is not None}
    assert shorter == {"SetLiftHeight": 16, "SetHeadAngle": 16, "AnimationState": 14}
    for name, size in shorter.items():
        # exactly the last field (a u8) is missing from the older layout
        assert MESSAGES_BY_NAME[name].SIZE == size + 1
        assert decl.MESSAGES[[m.name for m in decl.MESSAGES].index(name)].fields[-1].type == "u8"


def test_enums_equal_table(table):
    assert list(decl.ENUMS) == [e["name"] for e in table["enums"]]
    for e in table["enums"]:
        members = tuple((m["name"], m["value"]) for m in e["members"])
        assert decl.ENUMS[e["name"]] == members, e["name"]
        compiled = ENUMS[e["name"]]
        assert [(m.name, int(m)) for m in compiled] == list(members), e["name"]


def test_enum_fields_fit_their_storage(table):
    ranges = {"u8": (0, 0xFF), "u32": (0, 0xFFFFFFFF), "i8": (-0x80, 0x7F), "i32": (-0x80000000, 0x7FFFFFFF)}
    for m in decl.MESSAGES:
        for f in m.fields:
            if isinstance(f, F) and f.enum:
                lo, hi = ranges[f.type]
                assert all(lo <= v <= hi for _, v in decl.ENUMS[f.enum]), f"{m.name}.{f.name}"


def test_structs_equal_table(table):
    assert list(decl.STRUCTS) == [s["name"] for s in table["structs"]]
    for s in table["structs"]:
        ours = decl.STRUCTS[s["name"]]
        assert len(ours) == len(s["fields"])
        for f, rf in zip(ours, s["fields"]):
            field_matches(s["name"], f, rf)
        assert STRUCTS[s["name"]]._FIELD_NAMES == tuple(f.name for f in ours)


def test_frame_constants_equal_table(table):
    fr = table["frame"]
    assert decl.FRAME["magic"] == bytes.fromhex(fr["magic"]) == b"COZ\x03RE\x01"
    for key in ("header_size", "max_frame_size", "max_frame_payload_size", "first_robot_packet_id",
                "max_seq", "oob_seq", "frame_types", "packet_types"):
        assert decl.FRAME[key] == fr[key], key
    assert fr["max_frame_size"] == fr["header_size"] + fr["max_frame_payload_size"] == 1051


def test_renamed_fields_carry_units():
    """Every rename exists to add a unit: the new name extends the reference name."""
    renamed = [(m.name, f) for m in decl.MESSAGES for f in m.fields
               if f.ref is not None and getattr(f, "ref_type", None) is None]
    assert len(renamed) == 34
    units = ("_mm", "_ms", "_mmps", "_mmps2", "_radps", "_v")
    for owner, f in renamed:
        assert f.name.startswith(f.ref + "_") and f.name.endswith(units), f"{owner}.{f.name}"


def test_generator_reproduces_the_committed_file(tmp_path, table):
    """Run tools/gen_declaration.py into a scratch tree and compare with the committed file."""
    (tmp_path / "tools").mkdir()
    (tmp_path / "cozmo_driver" / "protocol").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "gen_declaration.py", tmp_path / "tools" / "gen_declaration.py")
    result = subprocess.run(
        [sys.executable, str(tmp_path / "tools" / "gen_declaration.py"), str(TABLE_PATH)],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "81 messages, 11 enums, 2 structs" in result.stdout
    generated = (tmp_path / "cozmo_driver" / "protocol" / "declaration.py").read_text()
    committed = (ROOT / "cozmo_driver" / "protocol" / "declaration.py").read_text()
    assert generated == committed, "declaration.py differs from what tools/gen_declaration.py makes"


def test_the_only_retype_is_object_connects_slot():
    """ObjectConnect's second byte is the radio slot (Anki's engine: SetPropSlot(factory_id,
    slot); the body firmware: Radio::assignProp), not the reference's bool."""
    retyped = [(m.name, f.name, f.ref, f.ref_type) for m in decl.MESSAGES
               for f in m.fields if isinstance(f, F) and f.ref_type is not None]
    assert retyped == [("ObjectConnect", "slot", "connect", "bool")]
    packet = MESSAGES_BY_NAME["ObjectConnect"](factory_id=0x12345678, slot=3).to_packet()
    assert packet[-5:] == bytes.fromhex("7856341203")
