"""Messages: golden bytes for all 81, property round trips, the decoding policy, encode errors.

The golden packets below were produced ONCE by the independent ``struct`` encoder in this
file (``independent_packet``), driven only by shared/protocol/messages.json, and pasted in
as data: they pin the wire format whatever happens to the code under test. The values of
every field come from ``golden_value``/``golden_array`` (a small table indexed by type and
field position; enums take a declared member), so the instance under test and the bytes
are derived independently from the same rule. ``test_goldens_match_the_verified_table``
re-derives them from messages.json (when ../shared is present) so the data cannot drift
from the table either.
"""

from __future__ import annotations

import json
import pathlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cozmo_driver.protocol import declaration as decl
from cozmo_driver.protocol._table import F, FixedArray, String, VarArray
from cozmo_driver.protocol.errors import LocalProtocolError, RemoteProtocolError
from cozmo_driver.protocol.messages import (
    ENUMS,
    MESSAGES_BY_ID,
    MESSAGES_BY_NAME,
    MESSAGES_BY_PACKET_TYPE,
    STRUCTS,
    UnknownMessage,
    decode_message,
    encode_packet,
    packet_size,
)

SHARED = pathlib.Path(__file__).resolve().parents[2].parent / "shared"
TABLE_PATH = SHARED / "protocol" / "messages.json"

SPECS = {m.name: m for m in decl.MESSAGES}
NAMES = [m.name for m in decl.MESSAGES]
FMT = {"u8": "B", "u16": "H", "u32": "I", "i8": "b", "i16": "h", "i32": "i",
       "f32": "f", "f64": "d", "bool": "?"}
INT_RANGE = {"u8": (0, 0xFF), "u16": (0, 0xFFFF), "u32": (0, 0xFFFFFFFF),
             "i8": (-0x80, 0x7F), "i16": (-0x8000, 0x7FFF), "i32": (-0x80000000, 0x7FFFFFFF)}
PREFIX_LIMIT = {"u8": 0xFF, "u16": 0xFFFF}

# ----------------------------------------------------------------------------- golden values

#: Per type, values chosen to exercise sign, width and byte order; every f32 here is exactly
#: representable, so decode(encode(x)) == x holds with plain equality.
VALUES = {
    "u8": (0x5A, 0xA5, 0x3C, 0xC3, 0x7E, 0x81, 0x12, 0xFE),
    "u16": (0x1234, 0xBEEF, 0x0102, 0xFFFE, 0x8001),
    "u32": (0x12345678, 0xDEADBEEF, 0x00010203, 0xFFFFFFFE, 0x80000001),
    "i8": (-2, 0x7F, -0x80, 0x35, -0x5B),
    "i16": (-1234, 0x7FFE, -0x8000, 0x1357),
    "i32": (-123456789, 0x7FFFFFF0, -0x80000000, 0x13572468),
    "f32": (1.5, -2.25, 1024.125, -0.0078125, 3000000.0, 6.103515625e-05, -65504.0),
    "f64": (1234.5678, -0.001),
    "bool": (True, False),
}
SIGNATURE = '{"version": 2381, "ü": "✓"}'


def golden_value(ftype, pos, enum_values=None):
    """The value of the scalar field at position ``pos`` (enums: a declared member)."""
    if enum_values:
        return enum_values[(pos + 1) % len(enum_values)]
    table = VALUES[ftype]
    return table[pos % len(table)]


def golden_array(kind, element, count, pos, struct_types):
    """Fixed arrays: ``count`` items; variable arrays a few; u8 arrays are bytes."""
    if kind == "string":
        return SIGNATURE
    if kind != "farray":
        count = 5 + pos % 3 if element == "u8" else 3 + pos % 4
    if element == "u8":
        return bytes((pos * 31 + i * 7 + 1) & 0xFF for i in range(count))
    if element.startswith("struct:"):
        types = struct_types[element[7:]]
        return [[golden_value(t, j + k) for k, t in enumerate(types)] for j in range(count)]
    table = VALUES[element]
    return [table[(pos + i) % len(table)] for i in range(count)]


def independent_packet(msg: dict, enums: dict, struct_types: dict) -> bytes:
    """Encode one messages.json entry with golden values, using nothing but ``struct``."""
    body = b""
    for pos, f in enumerate(msg["fields"]):
        kind = f["type"]
        lp = f["length_prefix_type_or_fixed_length"]
        if kind in FMT:
            value = golden_value(kind, pos, enums[f["enum"]] if f.get("enum") else None)
            body += struct.pack("<" + FMT[kind], value)
            continue
        element = f.get("element_type")
        value = golden_array(kind, element, lp, pos, struct_types)
        if kind == "string":
            data = value.encode("utf-8")
            body += struct.pack("<" + FMT[lp], len(data)) + data
            continue
        if kind == "varray":
            body += struct.pack("<" + FMT[lp], len(value))
        if element == "u8":
            body += value
        elif element.startswith("struct:"):
            fmt = "<" + "".join(FMT[t] for t in struct_types[element[7:]])
            body += b"".join(struct.pack(fmt, *item) for item in value)
        else:
            body += struct.pack("<%d%s" % (len(value), FMT[element]), *value)
    if msg["id"] is None:
        return struct.pack("<BH", msg["packet_type_value"], len(body)) + body
    return struct.pack("<BHB", msg["packet_type_value"], len(body) + 1, msg["id"]) + body


# Generated once by independent_packet() from messages.json; do not regenerate with the
# code under test. packet = type u8, length u16, [id u8], body.
GOLDEN_PACKETS = {
    "Connect": "020000",
    "Disconnect": "030000",
    "Ping": "0b1100adfa5c6d454a9340efbeadde03020100c3",
    "Keyframe": "0a0000",
    "LightStateCenter": "042000033412efbe3cc37e810080efbe0201c37e811257130201feff7e8112fe2efba5",
    "CubeLights": (
        "042900043412efbe3cc37e810080efbe0201c37e811257130201feff7e8112fe2efbfeff01808112fe5afe7f"
    ),
    "ObjectConnect": "0406000578563412a5",  # the slot (a u8, not pycozmo's bool): 0xa5
    "StreamObjectAccel": "040600087856341200",
    "SetAccessoryDiscovery": "0402000a01",
    "SetHeadLight": "0402000b01",
    "CubeId": "0406001078563412a5",
    "LightStateSide": "041600113412efbe3cc37e810080efbe0201c37e81125713a5",
    "Enable": "04010025",
    "DriveWheels": "041100320000c03f000010c000048044000000bc",
    "TurnInPlaceAtSpeed": "040b00330000c03f000010c00080",
    "MoveLift": "040500340000c03f",
    "MoveHead": "040500350000c03f",
    "SetLiftHeight": "041200360000c03f000010c000048044000000bc7e",
    "SetHeadAngle": "041200370000c03f000010c000048044000000bc7e",
    "TurnInPlace": "041500390000c03f000010c000048044000000bc7e8101fe",
    "StopAllMotors": "0401003b",
    "ClearPath": "0403003c3412",
    "AppendPathSegLine": "041d003d0000c03f000010c000048044000000bc001b374a0000803800e07fc7",
    "AppendPathSegArc": "0421003e0000c03f000010c000048044000000bc001b374a0000803800e07fc70000c03f",
    "AppendPathSegPointTurn": "041e003f0000c03f000010c000048044000000bc001b374a0000803800e07fc700",
    "TrimPath": "040300405aa5",
    "ExecutePath": "04040041341200",
    "SetOrigin": "0419004578563412efbeadde03020100000000bc001b374a78563412",
    "SyncTime": "0409004b78563412efbeadde",
    "EnableCamera": "0403004c0102",
    "SetCameraParams": "040800570000c03fefbe01",
    "StartMotorCalibration": "040300580100",
    "EnableStopOnCliff": "0402006001",
    "SetRobotVolume": "040300643412",
    "EnableColorImages": "0402006601",
    "NvStorageOp": "0413008100001800f0ffff7f03c306007d848b9299a0",
    "AbortAnimation": "0401008d",
    "OutputAudio": (
        "04e9028e01080f161d242b323940474e555c636a71787f868d949ba2a9b0b7bec5ccd3dae1e8eff6fd040b121920272e"
        "353c434a51585f666d747b828990979ea5acb3bac1c8cfd6dde4ebf2f900070e151c232a31383f464d545b626970777e"
        "858c939aa1a8afb6bdc4cbd2d9e0e7eef5fc030a11181f262d343b424950575e656c737a81888f969da4abb2b9c0c7ce"
        "d5dce3eaf1f8ff060d141b222930373e454c535a61686f767d848b9299a0a7aeb5bcc3cad1d8dfe6edf4fb020910171e"
        "252c333a41484f565d646b727980878e959ca3aab1b8bfc6cdd4dbe2e9f0f7fe050c131a21282f363d444b525960676e"
        "757c838a91989fa6adb4bbc2c9d0d7dee5ecf3fa01080f161d242b323940474e555c636a71787f868d949ba2a9b0b7be"
        "c5ccd3dae1e8eff6fd040b121920272e353c434a51585f666d747b828990979ea5acb3bac1c8cfd6dde4ebf2f900070e"
        "151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9e0e7eef5fc030a11181f262d343b424950575e"
        "656c737a81888f969da4abb2b9c0c7ced5dce3eaf1f8ff060d141b222930373e454c535a61686f767d848b9299a0a7ae"
        "b5bcc3cad1d8dfe6edf4fb020910171e252c333a41484f565d646b727980878e959ca3aab1b8bfc6cdd4dbe2e9f0f7fe"
        "050c131a21282f363d444b525960676e757c838a91989fa6adb4bbc2c9d0d7dee5ecf3fa01080f161d242b323940474e"
        "555c636a71787f868d949ba2a9b0b7bec5ccd3dae1e8eff6fd040b121920272e353c434a51585f666d747b828990979e"
        "a5acb3bac1c8cfd6dde4ebf2f900070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9e0e7ee"
        "f5fc030a11181f262d343b424950575e656c737a81888f969da4abb2b9c0c7ced5dce3eaf1f8ff060d141b222930373e"
        "454c535a61686f767d848b9299a0a7aeb5bcc3cad1d8dfe6edf4fb020910171e252c333a41484f565d646b727980878e"
        "959ca3aab1b8bfc6cdd4dbe2e9f0f7fe050c131a21282f363d444b52"
    ),
    "OutputSilence": "0401008f",
    "RecordHeading": "04010091",
    "TurnToRecordedHeading": "04010092",
    "AnimHead": "040400935a7f80",
    "AnimLift": "040400945aa53c",
    "DisplayImage": "04080097050001080f161d",
    "AnimBackpackLights": "040b00983412efbe0201feff0180",
    "AnimBody": "040500992efbfe7f",
    "EndAnimation": "0401009a",
    "StartAnimation": "0402009b5a",
    "EnableAnimationState": "0401009f",
    "ShutdownRobot": "040100a9",
    "WifiOff": "040200ae01",
    "FirmwareUpdate": (
        "040304af341220272e353c434a51585f666d747b828990979ea5acb3bac1c8cfd6dde4ebf2f900070e151c232a31383f"
        "464d545b626970777e858c939aa1a8afb6bdc4cbd2d9e0e7eef5fc030a11181f262d343b424950575e656c737a81888f"
        "969da4abb2b9c0c7ced5dce3eaf1f8ff060d141b222930373e454c535a61686f767d848b9299a0a7aeb5bcc3cad1d8df"
        "e6edf4fb020910171e252c333a41484f565d646b727980878e959ca3aab1b8bfc6cdd4dbe2e9f0f7fe050c131a21282f"
        "363d444b525960676e757c838a91989fa6adb4bbc2c9d0d7dee5ecf3fa01080f161d242b323940474e555c636a71787f"
        "868d949ba2a9b0b7bec5ccd3dae1e8eff6fd040b121920272e353c434a51585f666d747b828990979ea5acb3bac1c8cf"
        "d6dde4ebf2f900070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9e0e7eef5fc030a11181f"
        "262d343b424950575e656c737a81888f969da4abb2b9c0c7ced5dce3eaf1f8ff060d141b222930373e454c535a61686f"
        "767d848b9299a0a7aeb5bcc3cad1d8dfe6edf4fb020910171e252c333a41484f565d646b727980878e959ca3aab1b8bf"
        "c6cdd4dbe2e9f0f7fe050c131a21282f363d444b525960676e757c838a91989fa6adb4bbc2c9d0d7dee5ecf3fa01080f"
        "161d242b323940474e555c636a71787f868d949ba2a9b0b7bec5ccd3dae1e8eff6fd040b121920272e353c434a51585f"
        "666d747b828990979ea5acb3bac1c8cfd6dde4ebf2f900070e151c232a31383f464d545b626970777e858c939aa1a8af"
        "b6bdc4cbd2d9e0e7eef5fc030a11181f262d343b424950575e656c737a81888f969da4abb2b9c0c7ced5dce3eaf1f8ff"
        "060d141b222930373e454c535a61686f767d848b9299a0a7aeb5bcc3cad1d8dfe6edf4fb020910171e252c333a41484f"
        "565d646b727980878e959ca3aab1b8bfc6cdd4dbe2e9f0f7fe050c131a21282f363d444b525960676e757c838a91989f"
        "a6adb4bbc2c9d0d7dee5ecf3fa01080f161d242b323940474e555c636a71787f868d949ba2a9b0b7bec5ccd3dae1e8ef"
        "f6fd040b121920272e353c434a51585f666d747b828990979ea5acb3bac1c8cfd6dde4ebf2f900070e151c232a31383f"
        "464d545b626970777e858c939aa1a8afb6bdc4cbd2d9e0e7eef5fc030a11181f262d343b424950575e656c737a81888f"
        "969da4abb2b9c0c7ced5dce3eaf1f8ff060d141b222930373e454c535a61686f767d848b9299a0a7aeb5bcc3cad1d8df"
        "e6edf4fb020910171e252c333a41484f565d646b727980878e959ca3aab1b8bfc6cdd4dbe2e9f0f7fe050c131a21282f"
        "363d444b525960676e757c838a91989fa6adb4bbc2c9d0d7dee5ecf3fa01080f161d242b323940474e555c636a71787f"
        "868d949ba2a9b0b7bec5ccd3dae1e8eff6fd040b1219"
    ),
    "DebugData": "041500b03412efbe020135030100008078563412efbeadde",
    "ObjectMoved": "041600b478563412efbeadde00048044000000bc001b374a06",
    "ObjectStoppedMoving": "040900b578563412efbeadde",
    "ObjectTapped": "040d00b678563412efbeadde3cc3a5fe",
    "ObjectTapFiltered": "040b00b978563412efbeadde3cc3",
    "AcknowledgeAction": "040200c45a",
    "RobotDelocalized": "040100c2",
    "RobotPoked": "040100c3",
    "PathFollowingEvent": "040400c6341202",
    "HardwareInfo": "040700c978563412a53c",
    "AnimationStarted": "040200ca5a",
    "AnimationEnded": "040200cb5a",
    "NvStorageOpResult": "041300cd00001800f0ffff7f030406007d848b9299a0",
    "ObjectPowerLevel": "040a00ce78563412efbeadde3c",
    "ObjectConnectionState": "040e00d078563412efbeadde0200000000",
    "MotorCalibration": "040400d1010001",
    "ObjectUpAxisChanged": "040a00d778563412efbeadde03",
    "ButtonPressed": "040200db01",
    "FallingStarted": "040500dd78563412",
    "FallingStopped": "040d00de78563412efbeadde00048044",
    "BodyInfo": "040d00ed78563412efbeadde02000000",
    "FirmwareSignature": (
        "042300ee34121e007b2276657273696f6e223a20323338312c2022c3bc223a2022e29c93227d"
    ),
    "FirmwareUpdateResult": "040800ef78563412efbe3c",
    "RobotState": (
        "055c00f078563412efbeadde03020100000000bc001b374a0000803800e07fc70000c03f000010c000048044000000bc"
        "001b374a0000803800e07fc70000c03f000010c000048044000000bc001b374a010000803412efbe0201feffefbe12"
    ),
    "AnimationState": "051000f178563412f0ffff7f00000080c37e81",
    "ImageChunk": "051c00f278563412efbeadde030201000405811202010700f900070e151c23",
    "ObjectAvailable": "050a00f3785634120100000080",
    "ImageImuData": "051200f478563412000010c000048044000000bc7e",
    "ObjectAccel": "051500f578563412efbeadde00048044000000bc001b374a",
}

# ----------------------------------------------------------------------------- helpers

DECL_STRUCT_TYPES = {name: [f.type for f in fields] for name, fields in decl.STRUCTS.items()}
DECL_ENUM_VALUES = {name: [v for _, v in members] for name, members in decl.ENUMS.items()}


def golden_instance(name: str):
    """The instance whose packet is GOLDEN_PACKETS[name], built from OUR declaration."""
    spec = SPECS[name]
    kwargs = {}
    for pos, f in enumerate(spec.fields):
        if isinstance(f, F):
            kwargs[f.name] = golden_value(f.type, pos, DECL_ENUM_VALUES[f.enum] if f.enum else None)
        elif isinstance(f, FixedArray):
            value = golden_array("farray", f.element, f.count, pos, DECL_STRUCT_TYPES)
            if f.element.startswith("struct:"):
                value = [STRUCTS[f.element[7:]](*item) for item in value]
            kwargs[f.name] = value
        elif isinstance(f, VarArray):
            kwargs[f.name] = golden_array("varray", f.element, f.prefix, pos, DECL_STRUCT_TYPES)
        else:
            kwargs[f.name] = golden_array("string", None, f.prefix, pos, DECL_STRUCT_TYPES)
    return MESSAGES_BY_NAME[name](**kwargs)


def golden(name: str) -> bytes:
    return bytes.fromhex(GOLDEN_PACKETS[name])


def split_packet(packet: bytes):
    """(packet_type, id or None, body) of a packet, parsed by hand."""
    ptype, length = struct.unpack_from("<BH", packet)
    assert len(packet) == 3 + length, "length field disagrees with the packet"
    if ptype in (0x04, 0x05):
        return ptype, packet[3], packet[4:]
    return ptype, None, packet[3:]


def decode_packet(packet: bytes):
    ptype, ident, body = split_packet(packet)
    return decode_message(ptype, ident, body)


def fields_equal(spec, a, b) -> None:
    """Field-wise equality; every float compared by its bits (NaN, -0.0)."""
    for f in spec.fields:
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(f, F) and f.type in ("f32", "f64"):
            fmt = "<" + FMT[f.type]
            assert struct.pack(fmt, x) == struct.pack(fmt, y), f"{spec.name}.{f.name}: {x!r} != {y!r}"
        else:
            assert x == y, f"{spec.name}.{f.name}: {x!r} != {y!r}"


def load_table():
    if not TABLE_PATH.exists():
        pytest.skip(f"the verified table {TABLE_PATH} is absent (../shared not checked out)")
    return json.loads(TABLE_PATH.read_text())


# ----------------------------------------------------------------------------- golden bytes

def test_goldens_cover_the_whole_registry():
    assert len(GOLDEN_PACKETS) == 81
    assert list(GOLDEN_PACKETS) == NAMES
    assert set(GOLDEN_PACKETS) == set(MESSAGES_BY_NAME)


def test_goldens_match_the_verified_table():
    table = load_table()
    enums = {e["name"]: [m["value"] for m in e["members"]] for e in table["enums"]}
    struct_types = {s["name"]: [f["type"] for f in s["fields"]] for s in table["structs"]}
    derived = {m["name"]: independent_packet(m, enums, struct_types).hex() for m in table["messages"]}
    # ObjectConnect's last byte is the slot, a u8 (tools/gen_declaration.py RETYPES), which
    # takes the u8 sample 0xa5 where the table's bool takes false: the rest is the table's
    assert derived.pop("ObjectConnect")[:-2] == GOLDEN_PACKETS["ObjectConnect"][:-2]
    assert derived == {k: v for k, v in GOLDEN_PACKETS.items() if k != "ObjectConnect"}


@pytest.mark.parametrize("name", NAMES)
def test_golden_encode(name):
    msg = golden_instance(name)
    assert encode_packet(msg) == golden(name)
    assert msg.to_packet() == golden(name)


@pytest.mark.parametrize("name", NAMES)
def test_golden_decode(name):
    cls = MESSAGES_BY_NAME[name]
    decoded = decode_packet(golden(name))
    assert type(decoded) is cls
    assert decoded == golden_instance(name)
    for f in SPECS[name].fields:
        value = getattr(decoded, f.name)
        if isinstance(f, F) and f.enum:
            assert isinstance(value, ENUMS[f.enum]), f"{name}.{f.name} should decode to {f.enum}"
        elif isinstance(f, (FixedArray, VarArray)) and f.element == "u8":
            assert type(value) is bytes
        elif isinstance(f, String):
            assert value == SIGNATURE


@pytest.mark.parametrize("name", NAMES)
def test_golden_sizes(name):
    cls = MESSAGES_BY_NAME[name]
    msg = golden_instance(name)
    packet = golden(name)
    _, ident, body = split_packet(packet)
    assert ident == cls.ID
    assert packet_size(msg) == len(packet)
    variable = any(isinstance(f, (VarArray, String)) for f in SPECS[name].fields)
    if variable:
        assert cls.SIZE is None
        assert cls.MIN_SIZE < len(body)
    else:
        assert cls.SIZE == len(body)
        assert cls.MIN_SIZE <= cls.SIZE


# Hand-checked against PROTOCOL_NOTES (sections a, b, c), independent of the table above.

def test_robot_state_packet_header():
    packet = golden("RobotState")
    assert packet[:4] == bytes.fromhex("055c00f0")
    assert len(packet) == 95
    assert MESSAGES_BY_NAME["RobotState"].SIZE == 91
    assert encode_packet(MESSAGES_BY_NAME["RobotState"]())[:4] == bytes.fromhex("055c00f0")


def test_robot_state_field_offsets():
    rs = MESSAGES_BY_NAME["RobotState"](timestamp_ms=0x01020304, battery_voltage_v=4.0, status=0x1001,
                                        cliff_data_raw=[1, 2, 3, 4], backpack_touch_sensor_raw=0xABCD,
                                        curr_path_segment=0x7F)
    body = rs.encode_body()
    assert body[0:4] == bytes.fromhex("04030201")
    assert body[72:76] == bytes.fromhex("00008040")  # battery_voltage f32 4.0 at 72
    assert body[76:80] == bytes.fromhex("01100000")  # status u32 at 76
    assert body[80:88] == bytes.fromhex("0100020003000400")
    assert body[88:91] == bytes.fromhex("cdab7f")


def test_ping_packet():
    ping = MESSAGES_BY_NAME["Ping"](time_sent_ms=1.0, counter=2, last=3, unknown=4)
    assert encode_packet(ping) == bytes.fromhex("0b1100" "000000000000f03f" "02000000" "03000000" "04")
    assert decode_message(0x0B, None, ping.encode_body()) == ping


def test_display_image_blank():
    image = MESSAGES_BY_NAME["DisplayImage"](image=b"\x3f\x3f")
    assert encode_packet(image) == bytes.fromhex("0405009702003f3f")
    assert decode_message(0x04, 0x97, bytes.fromhex("02003f3f")).image == b"\x3f\x3f"


def test_set_origin_defaults():
    origin = MESSAGES_BY_NAME["SetOrigin"]()
    assert origin.pose_origin_id == 1 and origin.unknown5 == 0x80000000
    assert encode_packet(origin) == bytes.fromhex(
        "041900" "45" "00000000" "00000000" "01000000" "00000000" "00000000" "00000080")


def test_other_declared_defaults():
    cls = MESSAGES_BY_NAME
    assert encode_packet(cls["Enable"]()) == bytes.fromhex("04010025")
    assert encode_packet(cls["Connect"]()) == bytes.fromhex("020000")
    assert encode_packet(cls["EnableCamera"]()) == bytes.fromhex("0403004c0104")
    assert encode_packet(cls["SetHeadAngle"]()) == bytes.fromhex(
        "041200" "37" "00000000" "00007041" "0000a041" "00000000" "00")
    assert encode_packet(cls["SetLiftHeight"]()) == bytes.fromhex(
        "041200" "36" "00000000" "00004040" "0000a041" "00000000" "00")
    assert cls["NvStorageOp"]().encode_body() == bytes.fromhex("ffffffff" "00000000" "0000" "0000")
    assert cls["BodyInfo"]().encode_body()[8:] == bytes.fromhex("ffffffff")
    assert cls["ObjectMoved"]().encode_body()[-1:] == b"\x07"


# ----------------------------------------------------------------------------- property round trips

def scalar_strategy(f: F):
    if f.type == "bool":
        return st.booleans()
    if f.type == "f32":
        return st.floats(width=32)  # includes inf, -inf, nan, -0.0
    if f.type == "f64":
        return st.floats()
    lo, hi = INT_RANGE[f.type]
    ints = st.integers(lo, hi)
    if f.enum:
        return st.one_of(st.sampled_from(DECL_ENUM_VALUES[f.enum]), ints)
    return ints


def element_strategy(element: str):
    if element.startswith("struct:"):
        scls = STRUCTS[element[7:]]
        return st.builds(scls, *[scalar_strategy(f) for f in decl.STRUCTS[element[7:]]])
    return scalar_strategy(F("_", element))


def field_strategy(f):
    if isinstance(f, F):
        return scalar_strategy(f)
    if isinstance(f, FixedArray):
        if f.element == "u8":
            return st.binary(min_size=f.count, max_size=f.count)
        return st.lists(element_strategy(f.element), min_size=f.count, max_size=f.count)
    if isinstance(f, VarArray):
        limit = min(PREFIX_LIMIT[f.prefix], 1200)  # up to the prefix limit, bounded
        if f.element == "u8":
            return st.binary(max_size=limit)
        return st.lists(element_strategy(f.element), max_size=limit)
    return st.text(st.characters(codec="utf-8"), max_size=300)


def message_strategy(name: str):
    spec = SPECS[name]
    return st.builds(MESSAGES_BY_NAME[name], **{f.name: field_strategy(f) for f in spec.fields})


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_property(name):
    spec = SPECS[name]

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(message_strategy(name))
    def check(msg):
        packet = encode_packet(msg)
        assert packet_size(msg) == len(packet)
        decoded = decode_packet(packet)
        assert type(decoded) is type(msg)
        fields_equal(spec, msg, decoded)
        assert encode_packet(decoded) == packet  # NaN payloads and -0.0 survive bit for bit

    check()


def test_round_trip_extremes():
    """Bounds of every integer type, infinities and NaN, in one message per type."""
    cls = MESSAGES_BY_NAME
    cases = [
        cls["RobotState"](timestamp_ms=0xFFFFFFFF, pose_x_mm=float("inf"), pose_y_mm=float("-inf"),
                          pose_z_mm=float("nan"), pose_angle_rad=-0.0, cliff_data_raw=[0, 0xFFFF, 1, 0x8000],
                          curr_path_segment=0xFF),
        cls["ObjectTapped"](timestamp_ms=0, object_id=0xFFFFFFFF, tap_neg=-128, tap_pos=127),
        cls["AnimBody"](speed_mmps=-32768, unknown=32767),
        cls["BodyInfo"](body_color=-0x80000000),
        cls["Ping"](time_sent_ms=float("nan"), counter=0xFFFFFFFF),
        cls["DebugData"](args=list(range(255))),
        cls["FirmwareSignature"](signature=""),
        cls["DisplayImage"](image=bytes(range(256)) * 4),
    ]
    for msg in cases:
        packet = encode_packet(msg)
        decoded = decode_packet(packet)
        fields_equal(SPECS[msg.NAME], msg, decoded)
        assert encode_packet(decoded) == packet


# ----------------------------------------------------------------------------- decoding policy

@pytest.mark.parametrize("name", NAMES)
def test_longer_body_ignores_the_tail(name):
    ptype, ident, body = split_packet(golden(name))
    decoded = decode_message(ptype, ident, body + b"\x00\xff\x5a\xa5")
    assert decoded == golden_instance(name)


@pytest.mark.parametrize("name, min_size, dropped", [
    ("SetHeadAngle", 16, "action_id"),
    ("SetLiftHeight", 16, "action_id"),
    ("AnimationState", 14, "client_drop_count"),
])
def test_older_shorter_layouts_accepted(name, min_size, dropped):
    cls = MESSAGES_BY_NAME[name]
    assert cls.MIN_SIZE == min_size and cls.SIZE == min_size + 1
    ptype, ident, body = split_packet(golden(name))
    decoded = decode_message(ptype, ident, body[:min_size])
    expected = golden_instance(name)
    setattr(expected, dropped, getattr(cls(), dropped))  # the missing field takes its default
    assert decoded == expected
    assert getattr(decoded, dropped) == 0


@pytest.mark.parametrize("name, length", [
    ("SetHeadAngle", 15),    # not on a field boundary
    ("SetHeadAngle", 12),    # a field boundary, but shorter than any firmware's layout
    ("SetHeadAngle", 0),
    ("SetLiftHeight", 13),
    ("SetLiftHeight", 8),
    ("AnimationState", 13),
    ("AnimationState", 12),  # a field boundary below MIN_SIZE
])
def test_too_short_for_an_older_layout_rejected(name, length):
    ptype, ident, body = split_packet(golden(name))
    with pytest.raises(RemoteProtocolError, match=name):
        decode_message(ptype, ident, body[:length])


@pytest.mark.parametrize("name", NAMES)
def test_shorter_than_min_size_rejected(name):
    cls = MESSAGES_BY_NAME[name]
    ptype, ident, body = split_packet(golden(name))
    if cls.MIN_SIZE == 0 and cls.SIZE == 0:
        assert decode_message(ptype, ident, b"") == cls()
        return
    for length in sorted({0, cls.MIN_SIZE - 1, len(body) // 2} - {cls.MIN_SIZE}):
        if length >= cls.MIN_SIZE:
            continue
        with pytest.raises(RemoteProtocolError, match=name):
            decode_message(ptype, ident, body[:length])
    if cls.SIZE is not None and cls.MIN_SIZE == cls.SIZE:
        with pytest.raises(RemoteProtocolError, match=name):
            decode_message(ptype, ident, body[:-1])


VARIABLE = [n for n in NAMES if SPECS[n].fields and isinstance(SPECS[n].fields[-1], (VarArray, String))]


@pytest.mark.parametrize("name", VARIABLE)
def test_variable_part_overrunning_the_body_rejected(name):
    assert len(VARIABLE) == 6
    cls = MESSAGES_BY_NAME[name]
    ptype, ident, body = split_packet(golden(name))
    with pytest.raises(RemoteProtocolError, match=f"{name}: .* declares"):
        decode_message(ptype, ident, body[:-1])  # the count now exceeds what is there
    prefix = struct.calcsize("<" + FMT[SPECS[name].fields[-1].prefix])
    with pytest.raises(RemoteProtocolError, match=f"{name}: .* ends before the length"):
        decode_message(ptype, ident, body[:cls.MIN_SIZE + prefix - 1])  # the count itself is cut
    with pytest.raises(RemoteProtocolError, match=name):
        decode_message(ptype, ident, body[:cls.MIN_SIZE - 1])


def test_invalid_utf8_signature_rejected():
    with pytest.raises(RemoteProtocolError, match="FirmwareSignature"):
        decode_message(0x04, 0xEE, bytes.fromhex("0000" "0200" "c328"))


ENUM_FIELDS = [(m.name, pos, f) for m in decl.MESSAGES for pos, f in enumerate(m.fields)
               if isinstance(f, F) and f.enum]


@pytest.mark.parametrize("name, pos, field", ENUM_FIELDS,
                         ids=[f"{n}.{f.name}" for n, _, f in ENUM_FIELDS])
def test_undeclared_enum_value_stays_int(name, pos, field):
    declared = set(DECL_ENUM_VALUES[field.enum])
    lo, hi = INT_RANGE[field.type]
    undeclared = next(v for v in (99, 100, 126, -100, lo, hi, 0x7FFF) if lo <= v <= hi and v not in declared)
    msg = golden_instance(name)
    setattr(msg, field.name, undeclared)
    packet = encode_packet(msg)
    decoded = decode_packet(packet)
    value = getattr(decoded, field.name)
    assert type(value) is int and value == undeclared
    assert decoded == msg  # the rest of the packet still decodes


def test_unknown_ids_give_unknown_message():
    unknown_ids = [i for i in range(256) if i not in MESSAGES_BY_ID]
    assert len(unknown_ids) == 256 - 77
    for ident in unknown_ids:
        for ptype in (0x04, 0x05):
            body = bytes([ident, 0xAA, 0x55])
            msg = decode_message(ptype, ident, body)
            assert isinstance(msg, UnknownMessage)
            assert (msg.packet_type, msg.id, msg.body) == (ptype, ident, body)
            # and it re-encodes to the packet it came from
            assert encode_packet(msg) == struct.pack("<BHB", ptype, 4, ident) + body
            assert packet_size(msg) == 7


def test_id_under_the_wrong_packet_type_is_unknown():
    body = split_packet(golden("RobotState"))[2]
    msg = decode_message(0x04, 0xF0, body)  # RobotState is an EVENT, not a COMMAND
    assert isinstance(msg, UnknownMessage) and msg.body == body
    msg = decode_message(0x05, 0x4B, bytes(8))  # SyncTime is a COMMAND
    assert isinstance(msg, UnknownMessage)


def test_unknown_untyped_packet_type_is_unknown():
    for ptype in (0x00, 0x01, 0x06, 0x07, 0x0C, 0xFF):
        assert ptype not in MESSAGES_BY_PACKET_TYPE
        msg = decode_message(ptype, None, b"\x01\x02")
        assert msg == UnknownMessage(ptype, None, b"\x01\x02")
        assert encode_packet(msg) == bytes([ptype, 2, 0, 1, 2])


# ----------------------------------------------------------------------------- encoding errors

def _refusal_problem(msg, field_name):
    """None when encoding ``msg`` raises LocalProtocolError naming ``Message.field``; else what went wrong."""
    where = f"{msg.NAME}.{field_name}"
    try:
        msg.encode_body()
    except LocalProtocolError as exc:
        if where not in str(exc):
            return f"{where}: LocalProtocolError does not name the field: {exc}"
    except Exception as exc:  # noqa: BLE001 - report whatever escaped instead of LocalProtocolError
        return f"{where}: {type(exc).__name__} escaped: {exc}"
    else:
        return f"{where} = {getattr(msg, field_name)!r:.40}: encoded without error"
    try:
        encode_packet(msg)
    except LocalProtocolError:
        return None
    return f"{where}: encode_packet did not refuse it"


def _raises_naming(msg, field_name):
    problem = _refusal_problem(msg, field_name)
    assert problem is None, problem


@pytest.mark.parametrize("name", [n for n in NAMES if SPECS[n].fields])
def test_encoding_errors_name_the_field(name):
    """Out-of-range ints, wrong array lengths and non-numbers raise LocalProtocolError naming the
    field (bool fields take any truth value, as ``struct`` does)."""
    spec = SPECS[name]
    checked, problems = 0, []
    for f in spec.fields:
        bad_values = []
        if isinstance(f, F) and f.type in INT_RANGE:
            lo, hi = INT_RANGE[f.type]
            bad_values = [hi + 1, lo - 1, "7", None, 1.5]
        elif isinstance(f, F) and f.type in ("f32", "f64"):
            bad_values = ["1.0", None, [1.0]]
        elif isinstance(f, FixedArray):
            good = getattr(golden_instance(name), f.name)
            bad_values = [good[:-1], good + good[:1], None, 3]
            if f.element != "u8" and not f.element.startswith("struct:"):
                lo, hi = INT_RANGE[f.element]
                bad_values.append([hi + 1] * f.count)
        elif isinstance(f, VarArray):
            limit = PREFIX_LIMIT[f.prefix]
            bad_values = [bytes(limit + 1) if f.element == "u8" else [0] * (limit + 1), None, 5]
            bad_values.append([-1] if f.element != "u8" else [1, 2, 256])
        elif isinstance(f, String):
            bad_values = ["x" * 0x10000, "\ud800", 5, None]
        for bad in bad_values:
            msg = golden_instance(name)
            setattr(msg, f.name, bad)
            problem = _refusal_problem(msg, f.name)
            if problem:
                problems.append(problem)
            checked += 1
    assert not problems, f"{len(problems)} of {checked} bad values: " + "; ".join(problems)
    if any(not (isinstance(f, F) and f.type == "bool") for f in spec.fields):
        assert checked


F32_FIELDS = [(m.name, f.name) for m in decl.MESSAGES for f in m.fields
              if isinstance(f, F) and f.type == "f32"]


def test_f32_overflow_names_the_field():
    """1e39 is a float but has no f32 encoding (inf has one): refused by name, like any bad value."""
    assert len(F32_FIELDS) == 71
    problems = []
    for name, field_name in F32_FIELDS:
        msg = golden_instance(name)
        setattr(msg, field_name, -1e39)
        problems.append(_refusal_problem(msg, field_name))
    problems = [p for p in problems if p]
    assert not problems, f"{len(problems)} f32 fields: " + "; ".join(problems[:3])
    inf = golden_instance("MoveHead")
    inf.speed_rad_per_sec = float("inf")
    assert inf.encode_body() == bytes.fromhex("0000807f")


def test_light_state_element_out_of_range_names_the_field():
    msg = golden_instance("CubeLights")
    msg.states[2].offset = 40000
    _raises_naming(msg, "states")


def test_byte_array_given_as_a_list():
    """A u8 fixed array given as a list of ints: either encoded like bytes or refused by name."""
    samples = list(range(256)) * 2 + list(range(232))
    msg = MESSAGES_BY_NAME["OutputAudio"](samples=samples)
    try:
        body = msg.encode_body()
    except LocalProtocolError as exc:
        assert "OutputAudio.samples" in str(exc), str(exc)
    else:
        assert body == bytes(samples)


# ----------------------------------------------------------------------------- compiled on first use


def _fresh_messages_module():
    """A second, untouched copy of the messages module: nothing of it compiled yet."""
    import importlib.util

    from cozmo_driver.protocol import messages

    spec = importlib.util.spec_from_file_location("cozmo_driver.protocol._messages_copy", messages.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_message_class_is_compiled_on_first_use_and_only_once():
    """No class is compiled at import; one asked for by name, id, attribute or a decode is
    the same class whichever way and whichever of several threads asks first."""
    import threading

    names = [spec.name for spec in decl.MESSAGES]
    fresh = _fresh_messages_module()
    assert not [name for name in names if name in vars(fresh)]
    assert len(fresh.MESSAGES_BY_NAME) == 81 and len(fresh.MESSAGES_BY_ID) == 77
    assert "DriveWheels" in fresh.MESSAGES_BY_NAME and "NoSuchMessage" not in fresh.MESSAGES_BY_NAME
    start, seen = threading.Barrier(8), []

    def ask() -> None:
        start.wait()
        seen.append(fresh.MESSAGES_BY_NAME["RobotState"])

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10.0)
    cls = seen[0]
    assert len(seen) == 8 and all(s is cls for s in seen)
    assert fresh.RobotState is cls and fresh.MESSAGES_BY_ID[cls.ID] is cls
    assert [name for name in names if name in vars(fresh)] == ["RobotState"]
    body = cls(timestamp_ms=7).encode_body()
    assert type(fresh.decode_message(cls.PACKET_TYPE, cls.ID, body)) is cls
    assert fresh.MESSAGES_BY_NAME.get("NoSuchMessage") is None
    with pytest.raises(AttributeError):
        fresh.NoSuchMessage  # noqa: B018
    assert sorted(fresh.MESSAGES_BY_NAME.values(), key=lambda c: c.NAME) == sorted(
        (getattr(fresh, name) for name in names), key=lambda c: c.NAME)
