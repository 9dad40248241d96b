"""The one error tree of the Cozmo protocol layer.

Everything this package raises on purpose derives from :class:`CozmoError`.

* :class:`RemoteProtocolError`: the peer (robot or engine) sent something that
  does not follow the protocol: a bad magic, a truncated packet, an impossible
  length.  Callers count and drop the datagram; it is never fatal.
* :class:`LocalProtocolError`: the caller misused the API: a value that does not
  fit its field, a packet too large for any frame, a send on a closed session.
"""

from __future__ import annotations

__all__ = [
    "CozmoError",
    "ProtocolError",
    "RemoteProtocolError",
    "LocalProtocolError",
    "PacketTooLargeError",
    "NotConnectedError",
]


class CozmoError(Exception):
    """Root of every error this project raises on purpose."""


class ProtocolError(CozmoError):
    """Something about the wire protocol went wrong."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that are not valid protocol.

    Decoders raise this and nothing else on any input; the session counts and
    drops the offending datagram or packet.
    """


class LocalProtocolError(ProtocolError):
    """The caller asked for something the protocol cannot carry."""


class PacketTooLargeError(LocalProtocolError):
    """A single packet does not fit into one frame's payload (1037 bytes)."""


class NotConnectedError(LocalProtocolError):
    """A reliable send was attempted on a session that is not connected."""
