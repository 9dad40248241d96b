"""Whether a text is an IPv4 address or a host name, judged without resolving anything
(:func:`address_problem`): what the robot link judges when it opens (the transport) and what
the driver's parameters judge when an address is set at run time. Pure; standard library only."""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Optional

__all__ = ["address_problem", "NO_DESTINATION"]

_NUMERIC = re.compile(r"[0-9.]+")
#: addresses nothing can be sent to: the unspecified one and the limited broadcast
NO_DESTINATION = {"0.0.0.0": "the unspecified address (a socket binds it; no host has it)",
                  "255.255.255.255": "the broadcast address (every host of the network)"}


def address_problem(host: str, destination: bool = False) -> Optional[str]:
    """Why ``host`` is not an IPv4 address or a host name, or None. The C library takes a
    string of digits and dots for an address even when it is not four numbers 0-255:
    '172.31.1' for 172.31.0.1, '172.31.11' for 172.31.0.11, '172.031.1.1' (octal) for
    172.25.1.1. A mistyped address must not become another one, so what the library reads
    as an address (or what is made of digits and dots only) must be a dotted quad. A
    ``destination`` (where datagrams go) must not be the unspecified or the broadcast
    address. Pure: resolves nothing."""
    numeric = bool(_NUMERIC.fullmatch(host))
    if not numeric:
        try:
            socket.inet_aton(host)
            numeric = True
        except (OSError, ValueError):
            pass
    if not numeric:
        return None  # a host name
    try:
        canonical = str(ipaddress.IPv4Address(host)) == host
    except ValueError:
        canonical = False
    if not canonical:
        return f"{host!r} is not an IPv4 address of four numbers 0-255 separated by dots"
    if destination and host in NO_DESTINATION:
        return f"{host} is {NO_DESTINATION[host]}, not a robot's"
    return None
