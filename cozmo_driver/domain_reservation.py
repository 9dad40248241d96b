"""Reserving a ROS_DOMAIN_ID on this machine, ament's convention: while a program holds
loopback TCP and UDP port ``RESERVATION_PORT_BASE + id``, no other program that follows
the convention takes that domain. The test runs (test/conftest.py), the benchmarks
(bench/_common.py) and cozmo-demo reserve their domains this way. Pure sockets, no ROS."""

from __future__ import annotations

import socket
from typing import List, Optional

__all__ = ["RESERVATION_PORT_BASE", "hold_domain_id"]

#: the reservation port of domain ``id`` is this + id (domain ids 1..99 keep Fast DDS's
#: own ports, 7400 + 250 * id + offsets, below it)
RESERVATION_PORT_BASE = 32768


def hold_domain_id(domain_id: int) -> Optional[List[socket.socket]]:
    """Bind 127.0.0.1:``RESERVATION_PORT_BASE + domain_id``, TCP and UDP: the bound sockets
    (closing them releases the id), or None (and nothing bound) if either is taken."""
    bound: List[socket.socket] = []
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        sock = socket.socket(socket.AF_INET, kind)
        try:
            sock.bind(("127.0.0.1", RESERVATION_PORT_BASE + domain_id))
        except OSError:
            sock.close()
            for other in bound:
                other.close()
            return None
        bound.append(sock)
    return bound
