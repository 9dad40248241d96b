"""The vocabulary of the declaration table: field and message specifications.

These are inert descriptions; :mod:`cozmo_driver.protocol.messages` compiles them
into message classes with precompiled ``struct`` codecs at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

__all__ = ["F", "FixedArray", "VarArray", "String", "Message", "FieldSpec"]


@dataclass(frozen=True)
class F:
    """A scalar field: ``u8 u16 u32 i8 i16 i32 f32 f64 bool``, optionally an enum."""

    name: str
    type: str
    enum: Optional[str] = None
    default: Union[int, float, bool] = 0
    ref: Optional[str] = None  # the reference implementation's name, where ours differs
    #: the reference's type, where Anki's source shows the same bytes to mean another
    ref_type: Optional[str] = None


@dataclass(frozen=True)
class FixedArray:
    """``count`` elements with no length prefix; element is a scalar or ``struct:Name``."""

    name: str
    element: str
    count: int
    ref: Optional[str] = None


@dataclass(frozen=True)
class VarArray:
    """Elements preceded by an element count of type ``prefix`` (``u8`` or ``u16``)."""

    name: str
    element: str
    prefix: str
    ref: Optional[str] = None


@dataclass(frozen=True)
class String:
    """UTF-8 text preceded by a byte count of type ``prefix``."""

    name: str
    prefix: str
    ref: Optional[str] = None


FieldSpec = Union[F, FixedArray, VarArray, String]


@dataclass(frozen=True)
class Message:
    """One message: its packet type, id (``None`` for the untyped packets) and fields.

    ``sender`` is ``"engine"``, ``"robot"`` or ``"both"``. ``min_body_size`` is the
    shortest body accepted from older firmware (see the decoding policy in
    :mod:`cozmo_driver.protocol.messages`); ``None`` means the full size.
    """

    name: str
    packet_type: str
    id: Optional[int]
    sender: str
    group: Optional[str] = None
    min_body_size: Optional[int] = None
    fields: Tuple[FieldSpec, ...] = ()
