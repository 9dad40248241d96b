"""Transports: the UDP adapter and the in-memory link used by tests and the simulator."""

from .memory import Impairment, MemoryLink
from .udp import TransportError, TransportStats, UdpTransport, is_loopback, resolve_address

__all__ = ["Impairment", "MemoryLink", "TransportError", "TransportStats", "UdpTransport",
           "is_loopback", "resolve_address"]
