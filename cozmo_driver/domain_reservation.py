"""Keeping ROS traffic on this machine: DDS discovery on loopback
(:func:`keep_discovery_local`), and a ROS_DOMAIN_ID reserved by ament's convention: while
a program holds loopback TCP and UDP port ``RESERVATION_PORT_BASE + id``, no other
program that follows the convention takes that domain. The test runs (test/conftest.py),
the benchmarks (bench/_common.py) and cozmo-demo do both. Pure environment and sockets,
no ROS."""

from __future__ import annotations

import socket
from typing import List, MutableMapping, Optional

__all__ = ["RESERVATION_PORT_BASE", "hold_domain_id", "keep_discovery_local"]


def keep_discovery_local(env: MutableMapping[str, str], force: bool = True) -> None:
    """Set ``env`` (os.environ, or a child's) for DDS discovery on this machine only:
    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (Iron and later) and no static peers; on Humble
    (ROS_DISTRO), which reads only ROS_LOCALHOST_ONLY, that is 1, and elsewhere it is
    removed (later distros warn that it is deprecated; the wheels set no ROS_DISTRO).
    Without ``force``, a discovery range the user set is kept, and nothing is changed:
    ROS_AUTOMATIC_DISCOVERY_RANGE, or ROS_LOCALHOST_ONLY (Humble's only switch; later
    distros still read it when no range is set)."""
    if not force and ("ROS_AUTOMATIC_DISCOVERY_RANGE" in env or "ROS_LOCALHOST_ONLY" in env):
        return
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_STATIC_PEERS", None)
    if env.get("ROS_DISTRO") == "humble":
        env["ROS_LOCALHOST_ONLY"] = "1"
    else:
        env.pop("ROS_LOCALHOST_ONLY", None)

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
