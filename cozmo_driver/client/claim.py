"""One program per robot on a machine: :class:`RobotClaim`.

A Cozmo takes one controller: two drivers (or a driver and a demo) talking to the same
robot take its connection from each other and both steer it. So before a client opens
its socket it claims the robot's address and port on this machine, and a second claim
fails with :class:`RobotBusyError`, which names the program that holds the robot (its
pid and command line) and says how to separate the two.

Every Cozmo answers at 172.31.1.1:5551 on its own Wi-Fi, so one host with a Wi-Fi
adapter per robot runs a driver per adapter, each bound to its adapter's address
(``local_ip``): the same robot address is then another robot. A claim made with a
specific local address counts as the robot seen from that address: two claims of
172.31.1.1:5551 from different local addresses both succeed, two from the same local
address conflict, and so do two with no local address (or the unspecified 0.0.0.0,
every interface). A claim from a local address is refused while one from no local address
holds the robot; the other way round they do not see each other (the names of claims
from local addresses cannot be listed).

How: the claim is a listening Unix socket in Linux's abstract namespace, named after
the robot's address (``cozmo_driver robot 127.0.0.1:5551``), and the local address when
one is given (``cozmo_driver robot 172.31.1.1:5551 from 172.31.1.100``). The kernel lets
one socket hold a name and frees it when the socket closes, including when its process
dies, so no stale lock is ever left behind. The holder is found by connecting to the
name and asking the kernel for the peer's credentials (``SO_PEERCRED``); nothing has to
answer. Where abstract sockets do not exist (not Linux), claims always succeed: the
check is skipped, not faked.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
from typing import Optional, Tuple

from ..errors import ConfigurationError

__all__ = ["RobotBusyError", "RobotClaim", "claims_supported", "holder"]

#: local addresses that name no interface: a claim made with one is a claim of the robot alone
_UNSPECIFIED_LOCAL = ("", "0.0.0.0")


class RobotBusyError(ConfigurationError):
    """Another program on this machine already talks to this robot."""


def claims_supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(socket, "AF_UNIX")


def _name(host: str, port: int, local_host: Optional[str] = None) -> bytes:
    local = f" from {local_host}" if local_host else ""
    return f"\0cozmo_driver robot {host}:{int(port)}{local}".encode()


def holder(name: bytes) -> Tuple[Optional[int], str]:
    """(pid, command line) of the process listening on the abstract socket ``name``, as far
    as it can be read ((None, "") when nobody answers)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(name)
        creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid = struct.unpack("3i", creds)[0]
    except OSError:
        return None, ""
    finally:
        probe.close()
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = " ".join(part.decode(errors="replace") for part in f.read().split(b"\0") if part)
    except OSError:
        cmdline = ""
    return pid, cmdline


class RobotClaim:
    """The claim of one robot address on this machine, from ``local_host`` when that is a
    specific address (see the module docstring); :meth:`acquire`, :meth:`release`."""

    def __init__(self, host: str, port: int, local_host: Optional[str] = None) -> None:
        self.host = host
        self.port = int(port)
        #: the local address the claim is made from, or None (none given, or 0.0.0.0)
        self.local_host = None if local_host in _UNSPECIFIED_LOCAL else local_host
        self._sock: Optional[socket.socket] = None

    @property
    def held(self) -> bool:
        return self._sock is not None

    def acquire(self) -> "RobotClaim":
        """Claim the robot, or raise RobotBusyError naming the program that holds it. A claim
        from a specific local address is refused too while one from no local address (every
        interface) holds the robot."""
        if self._sock is not None or not claims_supported():
            return self
        if self.local_host is not None:
            everywhere = _name(self.host, self.port)
            if holder(everywhere)[0] is not None:
                raise self._busy(everywhere, " from every local address (a driver with no local_ip)")
        name = _name(self.host, self.port, self.local_host)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(name)
            sock.listen(8)
        except OSError:
            sock.close()
            local = f" from the same local address {self.local_host}" if self.local_host else ""
            raise self._busy(name, local) from None
        sock.setblocking(False)
        self._sock = sock
        return self

    def _busy(self, name: bytes, local: str) -> RobotBusyError:
        """The refusal of this claim: the program holding ``name`` (``local``: from where)."""
        pid, cmdline = holder(name)
        who = "another program"
        if pid is not None:
            who = f"process {pid}" + (f" ({cmdline})" if cmdline else "")
            if pid == os.getpid():
                who = "this process (another client or driver node in it)"
        return RobotBusyError(
            f"the robot at {self.host}:{self.port} is already driven by {who} on this machine{local}: "
            "a Cozmo takes one controller, and two would steer it at once. Stop the other one, "
            "or give this one another robot (robot_ip / robot_port); for several robots give "
            "each stack its own namespace, and, on one host with a Wi-Fi adapter per robot (every "
            "Cozmo is 172.31.1.1), each driver the address of its own adapter (local_ip)")

    def release(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> "RobotClaim":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
