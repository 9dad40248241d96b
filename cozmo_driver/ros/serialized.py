"""Ready-serialized messages for the driver's high-rate streams.

Publishing an rclpy message object converts it field by field to C and then
serializes it; publishing ``bytes`` (``Publisher.publish`` of a serialized
message) skips both. The driver publishes up to seven messages per robot state
(33 Hz) and per camera frame (15 fps) in which only a few numbers change, so it
keeps each as a :class:`Template`: the message serialized once (CDR, as every
ROS 2 middleware exchanges it) plus the byte offsets of the fields that change,
which :meth:`Template.pack` writes with one precompiled ``struct``. A message
whose last field is a byte sequence (images) gets its bytes appended.

The layout is computed here from the message class's field types (plain CDR,
little-endian: each primitive aligned to its size, at most 8, counted from the
end of the 4-byte encapsulation header; strings and sequences as a ``uint32``
count then the elements). Every template checks itself when built: the bytes
must deserialize (``rclpy.serialization``) to the prototype it was made from.
Where that check fails, or the rclpy in use cannot publish serialized
messages, the template works on the prototype message instead, setting the
same fields and handing back the message object; the caller cannot tell the
difference, and the topic carries the same messages either way.
"""

from __future__ import annotations

import operator
import re
import struct
from types import SimpleNamespace

from ..errors import UsageError
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

__all__ = ["Template", "LayoutError", "serialized_publish_supported", "cdr_layout", "read_twist", "twist_type"]

#: rosidl primitive type -> struct code (all sizes are the alignments, as in CDR)
_PRIMITIVES = {
    "boolean": "?", "octet": "B", "char": "B", "uint8": "B", "int8": "b",
    "uint16": "H", "int16": "h", "uint32": "I", "int32": "i",
    "uint64": "Q", "int64": "q", "float": "f", "double": "d",
}
_ARRAY = re.compile(r"^(.+)\[(\d+)\]$")
_SEQUENCE = re.compile(r"^sequence<([^,>]+)(?:, *\d+)?>$")
_ENCAPSULATION = b"\x00\x01\x00\x00"  # CDR, little-endian
_COUNT = struct.Struct("<I")


class LayoutError(UsageError, ValueError):
    """A message type or field this module does not lay out."""


def serialized_publish_supported() -> bool:
    """Whether this rclpy publishes serialized messages (``publish(bytes)``). Asked of
    public API only: ``Publisher.publish`` declares ``msg: Union[MsgType, bytes]`` in every
    rclpy that takes bytes (Humble on). Where it does not say so, the templates work on
    message objects, which every rclpy publishes."""
    import inspect
    try:
        from rclpy.publisher import Publisher
        annotation = inspect.signature(Publisher.publish).parameters["msg"].annotation
    except (ImportError, KeyError, TypeError, ValueError):  # pragma: no cover
        return False
    return "bytes" in str(annotation)


class _Writer:
    """Plain CDR into a bytearray; records where each primitive went."""

    def __init__(self) -> None:
        self.out = bytearray(_ENCAPSULATION)
        self.fields: Dict[str, Tuple[int, str]] = {}
        self.lengths: Dict[str, int] = {}
        self.padding: set = set()

    def _align(self, size: int) -> None:
        pad = -(len(self.out) - 4) % min(size, 8)
        self.padding.update(range(len(self.out), len(self.out) + pad))
        self.out += b"\x00" * pad

    def primitive(self, path: str, code: str, value: Any) -> None:
        size = struct.calcsize(code)
        self._align(size)
        self.fields[path] = (len(self.out), code)
        self.out += struct.pack("<" + code, value)

    def count(self, path: str, n: int) -> None:
        self._align(4)
        self.lengths[path] = len(self.out)
        self.out += struct.pack("<I", n)

    def string(self, value: str) -> None:
        data = value.encode("utf-8") + b"\x00"
        self._align(4)
        self.out += struct.pack("<I", len(data)) + data

    def message(self, path: str, msg: Any) -> None:
        for name, type_name in msg.get_fields_and_field_types().items():
            self.value(f"{path}.{name}" if path else name, type_name, getattr(msg, name))

    def value(self, path: str, type_name: str, value: Any) -> None:
        code = _PRIMITIVES.get(type_name)
        if code is not None:
            if type_name == "octet" and isinstance(value, (bytes, bytearray)):
                value = value[0]
            self.primitive(path, code, value)
            return
        if type_name == "string" or type_name.startswith("string<"):
            self.string(value)
            return
        array = _ARRAY.match(type_name)
        sequence = _SEQUENCE.match(type_name)
        if array is None and sequence is None:
            if "/" in type_name:
                self.message(path, value)
                return
            raise LayoutError(f"{path}: type {type_name!r} is not laid out here")
        element = (array or sequence).group(1)
        items = list(value)
        if sequence is not None:
            self.count(path, len(items))
        for i, item in enumerate(items):
            self.value(f"{path}[{i}]", element, item)


def cdr_layout(msg: Any) -> Tuple[bytes, Dict[str, Tuple[int, str]], Dict[str, int], set]:
    """``msg`` in plain CDR, with each primitive field's (offset, struct code) and each
    sequence's count offset, by path (``pose.covariance[7]``, ``transforms[0].header``...),
    and the offsets of the alignment padding.

    Checked against the middleware in use (``rclpy.serialization.serialize_message``):
    every byte but the padding (which some leave uninitialised) must be where it puts it.
    Its output may be longer: Fast DDS sizes its buffer by an estimate that pads empty
    sequences of 8-byte numbers and leaves the slack at the end, which readers ignore.
    :class:`LayoutError` if not."""
    from rclpy.serialization import serialize_message

    writer = _Writer()
    writer.message("", msg)
    data, padding = bytes(writer.out), writer.padding
    reference = serialize_message(msg)
    if len(data) > len(reference) or any(
            a != b for i, (a, b) in enumerate(zip(data, reference)) if i not in padding):
        raise LayoutError(f"{type(msg).__name__}: the computed layout is not this middleware's")
    return data, writer.fields, writer.lengths, padding


def _sample(code: str, i: int) -> Any:
    """A value for a field of struct ``code``, different for each ``i``."""
    if code == "?":
        return i % 2 == 0
    if code in "fd":
        return i + 0.5
    return i % 100 + 1


def _conversion(type_name: str) -> Optional[Callable[[Any], Any]]:
    """How a Python number becomes a value of the rosidl field type ``type_name`` (or of
    its elements), as ``struct`` converts it when it packs one: float, int, bool, or None
    (not a primitive number)."""
    match = _ARRAY.match(type_name) or _SEQUENCE.match(type_name)
    element = match.group(1) if match else type_name
    code = _PRIMITIVES.get(element)
    if code is None:
        return None
    if code in "fd":
        return float
    return bool if code == "?" else int


def _resolve(msg: Any, path: str) -> Tuple[Any, str, Optional[int]]:
    """(object, attribute, index or None) that ``path`` names inside ``msg``."""
    parts = path.split(".")
    obj = msg
    try:
        for part in parts[:-1]:
            name, _, index = part.partition("[")
            obj = getattr(obj, name)
            if index:
                obj = obj[int(index[:-1])]
        name, _, index = parts[-1].partition("[")
        target = getattr(obj, name)
        if index:
            target[int(index[:-1])]
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        raise LayoutError(f"{type(msg).__name__} has no field {path!r}") from exc
    return obj, name, int(index[:-1]) if index else None


class Template:
    """A message of which the fields named in ``bind`` change; see the module docstring.

    ``bind`` maps each changing field's path in the message (``pose.pose.position.x``,
    ``pose.covariance[7]``...) to the name of the attribute of ``sample_type`` that holds
    its value; :meth:`pack` reads them from a sample with one precompiled
    ``operator.attrgetter``. A path the message does not have, or a name ``sample_type``
    does not have, is a :class:`LayoutError` here, when the template is built. ``tail``
    names a last byte-sequence field (``data`` of an image), given to :meth:`pack` apart.
    Not thread-safe: one template per publishing thread."""

    def __init__(self, msg: Any, bind: Mapping[str, str], sample_type: Any,
                 tail: Optional[str] = None, serialized: Optional[bool] = None) -> None:
        self.msg = msg
        self.bind = dict(bind)
        self.sample_type = sample_type
        self.tail = tail
        missing = [name for name in self.bind.values() if not hasattr(sample_type, name)]
        if missing:
            raise LayoutError(f"{getattr(sample_type, '__name__', sample_type)} has no "
                              f"attribute {', '.join(map(repr, missing))}")
        if serialized is None:
            serialized = serialized_publish_supported()
        self.failure: Optional[str] = None
        self._serialized = False
        self._runs: List[Tuple[Any, int, int, int]] = []
        self._order(list(self.bind))
        if tail is not None:
            obj, name, index = _resolve(msg, tail)
            if index is not None:
                raise LayoutError(f"tail {tail!r} must be a field, not an element")
            self._tail_setter = (obj, name)
        if serialized:
            try:
                self._compile()
            except (LayoutError, struct.error, TypeError, ValueError, AttributeError,
                    RuntimeError) as exc:  # RuntimeError: rclpy could not deserialize
                self.failure = f"{type(msg).__name__}: {exc}"
                self._serialized = False
                self._order(list(self.bind))

    def _order(self, paths: List[str]) -> None:
        """Write the fields in this order (the serialization order, once known)."""
        self.fields = tuple(paths)
        self._setters = [_resolve(self.msg, path) for path in self.fields]
        # the message path converts each value as struct does on the serialized path (an
        # int for a float64 field becomes a float): both paths make the same message, and
        # a message object never holds an int in a float field (ROS_PYTHON_CHECK_FIELDS)
        self._conversions = [_conversion(obj.get_fields_and_field_types()[name])
                             for obj, name, _ in self._setters]
        names = [self.bind[path] for path in self.fields]
        if len(names) == 1:
            name = names[0]
            self._values: Callable[[Any], Tuple[Any, ...]] = lambda sample: (getattr(sample, name),)
        elif names:
            self._values = operator.attrgetter(*names)
        else:
            self._values = lambda sample: ()

    @property
    def serialized(self) -> bool:
        """True when :meth:`pack` returns bytes, False when it returns the message."""
        return self._serialized

    def _compile(self) -> None:
        msg = self.msg
        if self.tail is not None:
            setattr(*self._tail_setter, b"")
        data, offsets, lengths, padding = cdr_layout(msg)
        for path in self.fields:
            if path not in offsets:
                raise LayoutError(f"{path!r} is not a primitive field of {type(msg).__name__}")
        self._order(sorted(self.fields, key=lambda path: offsets[path][0]))
        # runs of fields with nothing but alignment padding between them: one struct each
        runs: List[Tuple[int, List[str], int]] = []  # (start offset, codes, number of values)
        position = -1
        for path in self.fields:
            offset, code = offsets[path]
            if runs and all(b in padding for b in range(position, offset)):
                start, codes, n = runs[-1]
                codes.append("x" * (offset - position) + code)
                runs[-1] = (start, codes, n + 1)
            else:
                runs.append((offset, [code], 1))
            position = offset + struct.calcsize(code)
        if self.tail is not None:
            if lengths.get(self.tail) != len(data) - 4:
                raise LayoutError(f"{self.tail!r} is not the last field")
            data = data[:-4]  # its count, written with the bytes
        self._buffer = bytearray(data)
        self._runs = []
        first = 0
        for start, codes, n in runs:
            self._runs.append((struct.Struct("<" + "".join(codes)).pack_into, start, first, first + n))
            first += n
        self._serialized = True
        self._check(offsets)

    def _check(self, offsets: Dict[str, Tuple[int, str]]) -> None:
        """The bytes :meth:`pack` makes must deserialize to the message the message path
        makes, for values that differ field by field."""
        from rclpy.serialization import deserialize_message, serialize_message
        sample = SimpleNamespace(**{self.bind[path]: _sample(offsets[path][1], i)
                                    for i, path in enumerate(self.fields)})
        tail = b"\x01\x02\x03" if self.tail is not None else None
        got = deserialize_message(self.pack(sample, tail), type(self.msg))
        reference = Template(deserialize_message(serialize_message(self.msg), type(self.msg)),
                             self.bind, self.sample_type, self.tail, serialized=False)
        if got != reference.pack(sample, tail):
            raise LayoutError("the computed bytes do not deserialize to the same message")

    def pack(self, sample: Any, tail: Optional[bytes] = None) -> Any:
        """What to publish for ``sample`` (and the tail's bytes, if there is a tail):
        serialized bytes, or the prototype message with the fields set. A value may be any
        Python number the field's type takes: on either path it is converted as ``struct``
        converts it (float fields hold floats)."""
        values = self._values(sample)
        if self._serialized:
            buffer = self._buffer
            for pack_into, offset, first, end in self._runs:
                pack_into(buffer, offset, *values[first:end])
            if self.tail is None:
                return bytes(buffer)
            return b"".join((buffer, _COUNT.pack(len(tail)), tail))
        if self.tail is not None:
            setattr(*self._tail_setter, tail)
        for (obj, name, index), convert, value in zip(self._setters, self._conversions, values):
            if convert is not None:
                value = convert(value)
            if index is None:
                setattr(obj, name, value)
            else:
                getattr(obj, name)[index] = value
        return self.msg


_TWIST = {1: struct.Struct("<6d"), 0: struct.Struct(">6d")}
_U32 = {1: struct.Struct("<I"), 0: struct.Struct(">I")}
_STAMP = {1: struct.Struct("<iI"), 0: struct.Struct(">iI")}


def twist_type(stamped: bool) -> str:
    """The ROS type name of a cmd_vel of ``stamped`` (TwistStamped) or not (Twist), as the graph
    gives it (``get_publishers_info_by_topic``'s ``topic_type``)."""
    return "geometry_msgs/msg/" + ("TwistStamped" if stamped else "Twist")


def read_twist(data: bytes, stamped: bool) -> Tuple[str, Tuple[int, int], Tuple[float, ...]]:
    """The frame id ("" for a Twist), the stamp (sec, nanosec; (0, 0) for a Twist) and the
    six numbers (linear x, y, z, angular x, y, z) of a serialized ``geometry_msgs/Twist`` or
    ``TwistStamped``: what a ``raw`` subscription hands over, read with a few ``struct``
    calls instead of rclpy building the message objects (the cmd_vel path; see
    docs/driver.md). Plain CDR, either byte order: a TwistStamped's header is a stamp (an
    ``int32`` and a ``uint32``) and the frame id (a ``uint32`` length counting its NUL, then
    the bytes), and the doubles that follow are aligned to 8 counted from the end of the
    encapsulation header. Raises :class:`LayoutError` for another encapsulation or a
    message too short."""
    if len(data) < 4 or data[0] != 0 or data[1] not in (0, 1):
        raise LayoutError(f"not a plain CDR encapsulation: {bytes(data[:4])!r}")
    order = data[1]
    offset = 4
    frame = ""
    stamp = (0, 0)
    try:
        if stamped:
            stamp = _STAMP[order].unpack_from(data, 4)
            (length,) = _U32[order].unpack_from(data, 12)
            if length < 1 or 16 + length > len(data):
                raise LayoutError(f"frame_id length {length} does not fit the message")
            frame = bytes(data[16:15 + length]).decode("utf-8", errors="replace")
            offset = 16 + length
            offset += -(offset - 4) % 8
        return frame, stamp, _TWIST[order].unpack_from(data, offset)
    except struct.error as exc:
        raise LayoutError(f"message too short for a {'TwistStamped' if stamped else 'Twist'}: "
                          f"{len(data)} bytes") from exc
