"""Message classes compiled from :mod:`cozmo_driver.protocol.declaration` on first use.

Every message of the table becomes a slotted dataclass with one precompiled
``struct.Struct`` for its fixed part; ``encode_body``/``decode_body`` and ``SIZE``
are derived from the declaration, nothing is written by hand per message. A class is
compiled the first time it is asked for (``messages.DriveWheels``, the ``MESSAGES_BY_*``
tables, decoding its id), once per process whatever the thread: compiling all 81 took
about 0.1 s of every program's start-up, of which a driver needs a fifth before its
first robot state.

Decoding policy (what the robot's other firmware versions may send):

* **Longer body** than declared: the declared fields are decoded and the extra
  trailing bytes are ignored (newer firmware appends fields).
* **Shorter body**: accepted only down to the message's ``MIN_SIZE`` (the layout
  of older firmware, e.g. SetHeadAngle without ``action_id``) and only on a field
  boundary; the missing trailing fields take their defaults. Anything shorter
  raises :class:`RemoteProtocolError`.
* **Undeclared enum value**: the field keeps the plain ``int``; declared values
  become members of the enum class (which compare equal to their ints). A good
  frame never becomes undecodable because of an enum.
* **Unknown id**: decodes to :class:`UnknownMessage` holding the raw body.

Byte arrays (``u8`` arrays such as ``DisplayImage.image`` or ``ImageChunk.data``)
are ``bytes``; other arrays are lists.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import struct
import threading
from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type

from . import declaration as _decl
from ._table import F, FixedArray, String, VarArray
from .errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "Message",
    "UnknownMessage",
    "PacketType",
    "MESSAGES_BY_ID",
    "MESSAGES_BY_NAME",
    "MESSAGES_BY_PACKET_TYPE",
    "ANIMATION_STREAM",
    "MessageTable",
    "ENUMS",
    "STRUCTS",
    "decode_message",
    "encode_packet",
    "non_finite",
    "packet_size",
]

_FMT = {"u8": "B", "u16": "H", "u32": "I", "i8": "b", "i16": "h", "i32": "i",
        "f32": "f", "f64": "d", "bool": "?"}
_ZERO = {"f32": 0.0, "f64": 0.0, "bool": False}


class PacketType(enum.IntEnum):
    """The packet type byte that precedes every packet inside a frame."""

    CONNECT = 0x02
    DISCONNECT = 0x03
    COMMAND = 0x04
    EVENT = 0x05
    KEYFRAME = 0x0A
    PING = 0x0B


#: Enum classes by name (``ENUMS["ImageEncoding"].JPEGMinimizedGray``).
ENUMS: Dict[str, Type[enum.IntEnum]] = {
    name: enum.IntEnum(name, list(members)) for name, members in _decl.ENUMS.items()
}
_ENUM_LOOKUP: Dict[str, Dict[int, enum.IntEnum]] = {
    name: {int(m): m for m in cls} for name, cls in ENUMS.items()
}


class Message:
    """Base of every message class. Class attributes describe the message:

    ``NAME``, ``ID`` (``None`` for untyped packets), ``PACKET_TYPE``, ``OOB`` (no
    sequence number: events, pings, keyframes), ``SENDER`` (``"engine"``,
    ``"robot"`` or ``"both"``), ``GROUP``, ``SIZE`` (body bytes, ``None`` when
    variable), ``MIN_SIZE`` (shortest body accepted), ``FIELDS`` (names).
    """

    __slots__ = ()
    NAME: str = ""
    ID: Optional[int] = None
    PACKET_TYPE: PacketType = PacketType.COMMAND
    OOB: bool = False
    SENDER: str = ""
    GROUP: Optional[str] = None
    SIZE: Optional[int] = None
    MIN_SIZE: int = 0
    FIELDS: Tuple[str, ...] = ()
    FLOATS: Tuple[str, ...] = ()

    def encode_body(self) -> bytes:  # replaced per class
        raise NotImplementedError

    @classmethod
    def decode_body(cls, body) -> "Message":  # replaced per class
        raise NotImplementedError

    def to_packet(self) -> bytes:
        """The packet as it stands in a frame: type, length, [id], body."""
        return encode_packet(self)


class UnknownMessage:
    """A packet whose id (or packet type) is not in the table; the body is kept raw."""

    __slots__ = ("packet_type", "id", "body")
    NAME = "UnknownMessage"
    OOB = False

    def __init__(self, packet_type: int, id: Optional[int], body: bytes) -> None:
        self.packet_type = packet_type
        self.id = id
        self.body = bytes(body)

    def encode_body(self) -> bytes:
        return self.body

    def to_packet(self) -> bytes:
        return encode_packet(self)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, UnknownMessage) and other.packet_type == self.packet_type
                and other.id == self.id and other.body == self.body)

    def __hash__(self) -> int:
        return hash((self.packet_type, self.id, self.body))

    def __repr__(self) -> str:
        ident = f"0x{self.id:02x}" if self.id is not None else "-"
        return (f"UnknownMessage(packet_type=0x{self.packet_type:02x}, id={ident}, "
                f"body={self.body.hex()})")


# --------------------------------------------------------------------------- structs

def _make_struct_class(name: str, fields) -> type:
    spec = [(f.name, Any, dataclasses.field(default=f.default if f.default else _ZERO.get(f.type, 0)))
            for f in fields]
    cls = dataclasses.make_dataclass(name, spec, slots=True)
    cls.__doc__ = f"{name}: " + ", ".join(f"{f.name} ({f.type})" for f in fields)
    cls._FORMAT = "".join(_FMT[f.type] for f in fields)
    cls._FIELD_NAMES = tuple(f.name for f in fields)
    return cls


#: Struct classes by name (``STRUCTS["LightState"](on_color=0x7fff)``).
STRUCTS: Dict[str, type] = {name: _make_struct_class(name, fields)
                            for name, fields in _decl.STRUCTS.items()}


# --------------------------------------------------------------------------- compiler

class _Builder:
    """Builds the source of one message's encoder and decoder.

    The fixed part of the body becomes one ``struct.Struct``. A variable field
    (``VarArray``/``String``) may only be the last field, which is true of every
    message in the table; the builder refuses any other layout.
    """

    def __init__(self, spec) -> None:
        self.spec = spec
        self.fmt = "<"
        self.enc_args: List[str] = []   # expressions for pack(...)
        self.dec_parts: List[str] = []  # expressions over tuple v for the constructor
        self.boundaries = [0]           # byte offsets where fields end
        self.tail = None
        self.ns: Dict[str, Any] = {"LocalProtocolError": LocalProtocolError,
                                   "RemoteProtocolError": RemoteProtocolError,
                                   "struct": struct}
        self.defaults: List[Tuple[str, Any]] = []
        i = 0  # index into the unpacked tuple
        fields = spec.fields
        for n, f in enumerate(fields):
            if isinstance(f, (VarArray, String)):
                if n != len(fields) - 1:
                    raise TypeError(f"{spec.name}: variable field {f.name} must be last")
                self.tail = f
                if isinstance(f, String):
                    fld = dataclasses.field(default="")
                elif f.element == "u8":
                    fld = dataclasses.field(default=b"")
                else:
                    fld = dataclasses.field(default_factory=list)
                self.defaults.append((f.name, fld))
                continue
            if isinstance(f, F):
                self.fmt += _FMT[f.type]
                self.enc_args.append(f"self.{f.name}")
                if f.enum:
                    self.ns[f"E_{f.name}"] = _ENUM_LOOKUP[f.enum]
                    self.dec_parts.append(f"E_{f.name}.get(v[{i}], v[{i}])")
                else:
                    self.dec_parts.append(f"v[{i}]")
                default = f.default if f.default else _ZERO.get(f.type, 0)
                if f.enum and default in _ENUM_LOOKUP[f.enum]:
                    default = _ENUM_LOOKUP[f.enum][default]
                self.defaults.append((f.name, dataclasses.field(default=default)))
                i += 1
            elif isinstance(f, FixedArray):
                if f.element == "u8":
                    # struct's "Ns" pads or truncates silently: as_bytes insists on the size
                    self.fmt += f"{f.count}s"
                    self.enc_args.append(f"as_bytes(self.{f.name}, {f.count})")
                    self.dec_parts.append(f"v[{i}]")
                    self.defaults.append((f.name, dataclasses.field(default=bytes(f.count))))
                    i += 1
                elif f.element.startswith("struct:"):
                    sname = f.element[len("struct:"):]
                    scls = STRUCTS[sname]
                    k = len(scls._FIELD_NAMES)
                    self.fmt += scls._FORMAT * f.count
                    self.ns[f"S_{sname}"] = scls
                    getters = ", ".join(f"s.{a}" for a in scls._FIELD_NAMES)
                    self.enc_args.append(f"*[x for s in self.{f.name} for x in ({getters},)]")
                    self.dec_parts.append(
                        f"[S_{sname}(*v[{i} + {k} * j:{i} + {k} * (j + 1)]) for j in range({f.count})]")
                    self.defaults.append((f.name, dataclasses.field(
                        default_factory=lambda scls=scls, c=f.count: [scls() for _ in range(c)])))
                    i += k * f.count
                else:
                    self.fmt += f"{f.count}{_FMT[f.element]}"
                    self.enc_args.append(f"*self.{f.name}")
                    self.dec_parts.append(f"list(v[{i}:{i + f.count}])")
                    zero = _ZERO.get(f.element, 0)
                    self.defaults.append((f.name, dataclasses.field(
                        default_factory=lambda z=zero, c=f.count: [z] * c)))
                    i += f.count
            self.boundaries.append(struct.calcsize(self.fmt))
        self.fixed = struct.Struct(self.fmt)
        self.ns["FIXED"] = self.fixed

    def source(self) -> str:
        spec = self.spec
        name = spec.name
        lines = []
        w = lines.append
        fixed_size = self.fixed.size
        # ----- encoder
        w("def encode_body(self):")
        w("    try:")
        head = f"FIXED.pack({', '.join(self.enc_args)})" if self.enc_args else "b''"
        t = self.tail
        if t is None:
            w(f"        return {head}")
        else:
            pfmt = "<" + _FMT[t.prefix]
            self.ns["PREFIX"] = struct.Struct(pfmt)
            if isinstance(t, String):
                w(f"        data = self.{t.name}.encode('utf-8')")
                w(f"        return {head} + PREFIX.pack(len(data)) + data")
            elif t.element == "u8":
                w(f"        data = as_bytes(self.{t.name})")
                w(f"        return {head} + PREFIX.pack(len(data)) + data")
            else:
                efmt = _FMT[t.element]
                w(f"        items = self.{t.name}")
                w(f"        return ({head} + PREFIX.pack(len(items)) + "
                  f"struct.pack('<%d{efmt}' % len(items), *items))")
        w("    except (struct.error, TypeError, AttributeError, UnicodeError, ValueError,"
          " OverflowError) as exc:")
        w("        raise LocalProtocolError(explain(self, exc)) from None")
        # ----- decoder
        w("def decode_body(cls, body):")
        w("    n = len(body)")
        w(f"    if n < {fixed_size}:")
        if spec.min_body_size is not None and self.tail is None:
            w(f"        if n < {spec.min_body_size} or n not in BOUNDARIES:")
            w(f"            raise RemoteProtocolError('{name}: body of %d bytes, expected {fixed_size}"
              f" (at least {spec.min_body_size} on a field boundary)' % n)")
            w("        body = bytes(body) + DEFAULT_BODY[n:]")
        else:
            w(f"            raise RemoteProtocolError('{name}: body of %d bytes, expected "
              f"{'at least ' if self.tail else ''}{fixed_size}' % n)")
        args = ", ".join(self.dec_parts)
        if fixed_size:
            w("    v = FIXED.unpack_from(body, 0)")
        if t is None:
            w(f"    return cls({args})")
        else:
            psize = struct.calcsize("<" + _FMT[t.prefix])
            w(f"    if n < {fixed_size + psize}:")
            w(f"        raise RemoteProtocolError('{name}: body of %d bytes ends before the "
              f"length of {t.name}' % n)")
            w(f"    (count,) = PREFIX.unpack_from(body, {fixed_size})")
            start = fixed_size + psize
            esize = 1 if isinstance(t, String) else struct.calcsize("<" + _FMT[t.element])
            w(f"    end = {start} + count * {esize}")
            w("    if end > n:")
            w(f"        raise RemoteProtocolError('{name}: {t.name} declares %d items but the body"
              f" holds %d bytes' % (count, n))")
            if isinstance(t, String):
                w("    try:")
                w(f"        tail = bytes(body[{start}:end]).decode('utf-8')")
                w("    except UnicodeDecodeError as exc:")
                w(f"        raise RemoteProtocolError('{name}: {t.name} is not UTF-8: %s' % exc) from None")
            elif t.element == "u8":
                w(f"    tail = bytes(body[{start}:end])")
            else:
                w(f"    tail = list(struct.unpack_from('<%d{_FMT[t.element]}' % count, body, {start}))")
            w(f"    return cls({args + ', ' if args else ''}tail)")
        return "\n".join(lines)


def _as_bytes(value, size: Optional[int] = None) -> bytes:
    """A byte array field's value as bytes: bytes-like, or a sequence of ints 0..255.

    An int is refused (``bytes(5)`` would silently mean five zero bytes), and so
    is a fixed-size array of the wrong length (struct would pad or truncate it).
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    elif isinstance(value, (int, str)) or value is None:
        raise TypeError(f"needs bytes or a sequence of ints 0..255, got {type(value).__name__}")
    else:
        data = bytes(value)  # raises for non-ints or values outside 0..255
    if size is not None and len(data) != size:
        raise ValueError(f"needs exactly {size} bytes, got {len(data)}")
    return data


def _explain(msg, exc: Exception) -> str:
    """Name the field that cannot be encoded, for a clear LocalProtocolError."""
    cls = type(msg)
    for spec in cls._SPEC.fields:
        value = getattr(msg, spec.name)
        try:
            if isinstance(spec, F):
                struct.pack("<" + _FMT[spec.type], value)
            elif isinstance(spec, FixedArray):
                if spec.element.startswith("struct:"):
                    scls = STRUCTS[spec.element[7:]]
                    if len(value) != spec.count:
                        raise ValueError(f"needs exactly {spec.count} {scls.__name__}, got {len(value)}")
                    for s in value:
                        struct.pack("<" + scls._FORMAT, *(getattr(s, a) for a in scls._FIELD_NAMES))
                elif spec.element == "u8":
                    _as_bytes(value, spec.count)
                else:
                    if len(value) != spec.count:
                        raise ValueError(f"needs exactly {spec.count} items, got {len(value)}")
                    struct.pack(f"<{spec.count}{_FMT[spec.element]}", *value)
            elif isinstance(spec, VarArray):
                limit = (1 << (8 * struct.calcsize(_FMT[spec.prefix]))) - 1
                if len(value) > limit:
                    raise ValueError(f"holds {len(value)} items, at most {limit} fit its length prefix")
                if spec.element == "u8":
                    _as_bytes(value)
                else:
                    struct.pack(f"<{len(value)}{_FMT[spec.element]}", *value)
            elif isinstance(spec, String):
                data = value.encode("utf-8")
                if len(data) > 0xFFFF:
                    raise ValueError(f"is {len(data)} bytes long, at most 65535 fit")
        except (struct.error, TypeError, AttributeError, ValueError, UnicodeError,
                OverflowError) as field_exc:
            return f"{cls.NAME}.{spec.name} = {value!r:.80}: {field_exc}"
    return f"{cls.NAME}: cannot encode: {exc}"


def _compile(spec) -> Type[Message]:
    builder = _Builder(spec)
    cls = dataclasses.make_dataclass(
        spec.name, [(name, Any, fld) for name, fld in builder.defaults],
        bases=(Message,), slots=True, eq=True, repr=True)
    ptype = PacketType[spec.packet_type]
    cls.NAME = spec.name
    cls.ID = spec.id
    cls.PACKET_TYPE = ptype
    cls.OOB = ptype >= PacketType.EVENT
    cls.SENDER = spec.sender
    cls.GROUP = spec.group
    cls.SIZE = builder.fixed.size if builder.tail is None else None
    cls.MIN_SIZE = spec.min_body_size if spec.min_body_size is not None else builder.fixed.size
    cls.FIELDS = tuple(f.name for f in spec.fields)
    cls.FLOATS = tuple(f.name for f in spec.fields if isinstance(f, F) and f.type in ("f32", "f64"))
    cls._SPEC = spec
    source = builder.source()
    ns = dict(builder.ns)
    ns["explain"] = _explain
    ns["as_bytes"] = _as_bytes
    ns["BOUNDARIES"] = frozenset(builder.boundaries)
    exec(compile(source, f"<cozmo message {spec.name}>", "exec"), ns)
    cls.encode_body = ns["encode_body"]
    cls.decode_body = classmethod(ns["decode_body"])
    if spec.min_body_size is not None and builder.tail is None:
        ns["DEFAULT_BODY"] = cls().encode_body()
    units = ", ".join(f.name for f in spec.fields) or "no fields"
    ident = f"0x{spec.id:02x}" if spec.id is not None else spec.packet_type
    cls.__doc__ = (f"{spec.name} ({ident}, {'out of band' if cls.OOB else 'reliable'}, "
                   f"sent by {spec.sender}): {units}.")
    cls.__module__ = __name__
    return cls


_compiling = threading.RLock()  # reentrant: a class compiled while compiling another
_SPECS: Dict[str, Any] = {spec.name: spec for spec in _decl.MESSAGES}


def _message_class(name: str) -> Type[Message]:
    """The class of message ``name``, compiled on first use (once: under a lock)."""
    cls = globals().get(name)
    if cls is None:
        with _compiling:
            cls = globals().get(name)
            if cls is None:
                cls = globals()[name] = _compile(_SPECS[name])
    return cls


class MessageTable(Mapping):
    """A read-only mapping of message classes (``MESSAGES_BY_ID`` etc.), each compiled the
    first time it is looked up; iterating its values or items compiles them all."""

    __slots__ = ("_names", "classes")

    def __init__(self, names: Dict[Any, str]) -> None:
        self._names = names
        #: the classes looked up so far, by key (what decoding reads first)
        self.classes: Dict[Any, Type[Message]] = {}

    def __getitem__(self, key: Any) -> Type[Message]:
        cls = self.classes.get(key)
        if cls is None:
            cls = self.classes[key] = _message_class(self._names[key])
        return cls

    def get(self, key: Any, default: Any = None) -> Any:
        cls = self.classes.get(key)
        if cls is not None:
            return cls
        return self[key] if key in self._names else default

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[Any]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"MessageTable({list(self._names)})"


#: Every message class, by name.
MESSAGES_BY_NAME = MessageTable({spec.name: spec.name for spec in _decl.MESSAGES})
#: Messages with an id, by id.
MESSAGES_BY_ID = MessageTable({spec.id: spec.name for spec in _decl.MESSAGES if spec.id is not None})
#: The untyped packets (Connect, Disconnect, Ping, Keyframe), by packet type.
MESSAGES_BY_PACKET_TYPE = MessageTable({int(PacketType[spec.packet_type]): spec.name
                                        for spec in _decl.MESSAGES if spec.id is None})
#: The robot's animation stream: keyframes, face images and sound, which it queues and plays
#: at 30 frames a second. The robot plays them only once EnableAnimationState has enabled
#: playback (which also starts its AnimationState events, 30 a second).
ANIMATION_STREAM = frozenset((
    "OutputAudio", "OutputSilence", "DisplayImage", "AnimHead", "AnimLift", "AnimBody",
    "AnimBackpackLights", "RecordHeading", "TurnToRecordedHeading", "StartAnimation",
    "EndAnimation"))
__all__ += list(_SPECS)
for _name, _cls in list(ENUMS.items()) + list(STRUCTS.items()):
    globals()[_name] = _cls
    __all__.append(_name)
del _name, _cls


def __getattr__(name: str) -> Any:
    """``messages.DriveWheels`` (and ``from ... import DriveWheels``): compiled on first use."""
    if name in _SPECS:
        return _message_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_HEAD_ID = struct.Struct("<BHB")
_HEAD = struct.Struct("<BH")


def non_finite(msg) -> Optional[str]:
    """``"Name.field = value"`` for the first float field of ``msg`` that holds NaN or an
    infinity, which struct encodes without complaint and the robot would take as a speed,
    an angle or a distance; None when there is none (or the message has no float fields)."""
    for name in getattr(type(msg), "FLOATS", ()):
        value = getattr(msg, name)
        if isinstance(value, float) and not math.isfinite(value):
            return f"{msg.NAME}.{name} = {value!r}"
    return None


def encode_packet(msg) -> bytes:
    """Encode a message as a packet: ``type u8, length u16, [id u8], body``."""
    body = msg.encode_body()
    if isinstance(msg, UnknownMessage):
        ptype, ident = msg.packet_type, msg.id
    else:
        ptype, ident = msg.PACKET_TYPE, msg.ID
    if ident is not None:
        if len(body) + 1 > 0xFFFF:
            raise LocalProtocolError(f"{msg.NAME}: body of {len(body)} bytes exceeds a packet")
        return _HEAD_ID.pack(ptype, len(body) + 1, ident) + body
    if len(body) > 0xFFFF:
        raise LocalProtocolError(f"{msg.NAME}: body of {len(body)} bytes exceeds a packet")
    return _HEAD.pack(ptype, len(body)) + body


def packet_size(msg) -> int:
    """Bytes the message takes in a frame, header included."""
    if isinstance(msg, UnknownMessage):
        return len(msg.body) + (4 if msg.id is not None else 3)
    size = msg.SIZE
    if size is None:
        size = len(msg.encode_body())
    return size + (4 if msg.ID is not None else 3)


def decode_message(packet_type: int, ident: Optional[int], body) -> Any:
    """Decode one packet's body. Raises only :class:`RemoteProtocolError`.

    ``ident`` is the id byte for COMMAND and EVENT packets, else ``None``.
    """
    if ident is None:
        cls = MESSAGES_BY_PACKET_TYPE.classes.get(packet_type) or MESSAGES_BY_PACKET_TYPE.get(packet_type)
    else:
        cls = MESSAGES_BY_ID.classes.get(ident) or MESSAGES_BY_ID.get(ident)
        if cls is not None and cls.PACKET_TYPE != packet_type:
            cls = None
    if cls is None:
        return UnknownMessage(packet_type, ident, body)
    try:
        return cls.decode_body(body)
    except RemoteProtocolError:
        raise
    except (struct.error, ValueError, TypeError, IndexError) as exc:  # defensive: a bug, named
        raise RemoteProtocolError(f"{cls.NAME}: undecodable body ({exc})") from None
