"""The protocol layer's errors: the family :class:`ProtocolError` of the one
error tree (:mod:`cozmo_driver.errors`, re-exported here).

* :class:`RemoteProtocolError` (a :class:`RemoteError`): the peer sent something
  that does not follow the protocol: a bad magic, a truncated packet, an
  impossible length. Decoders raise this and nothing else on any input; callers
  count and drop the datagram; it is never fatal.
* :class:`LocalProtocolError` (a :class:`UsageError`): the caller misused the
  API: a value that does not fit its field (the message names the field), a
  packet too large for any frame, a send on a closed session.
"""

from __future__ import annotations

from ..errors import CATEGORIES, ConfigurationError, CozmoError, RemoteError, UsageError

__all__ = [
    "CozmoError",
    "RemoteError",
    "UsageError",
    "ConfigurationError",
    "CATEGORIES",
    "ProtocolError",
    "RemoteProtocolError",
    "LocalProtocolError",
    "PacketTooLargeError",
    "NotConnectedError",
]


class ProtocolError(CozmoError):
    """Family: something about the wire protocol went wrong."""


class RemoteProtocolError(ProtocolError, RemoteError):
    """The peer sent bytes that are not valid protocol.

    Decoders raise this and nothing else on any input; the session counts and
    drops the offending datagram or packet.
    """


class LocalProtocolError(ProtocolError, UsageError):
    """The caller asked for something the protocol cannot carry."""


class PacketTooLargeError(LocalProtocolError):
    """A single packet does not fit into one frame's payload (1037 bytes)."""


class NotConnectedError(LocalProtocolError):
    """A reliable send was attempted on a session that is not connected."""
