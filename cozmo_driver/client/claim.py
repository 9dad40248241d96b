"""One program per robot on a machine: :class:`RobotClaim`.

A Cozmo takes one controller: of two drivers (or a driver and a demo) talking to the same
robot, it answers one and ignores the other while that one's link lives (Anki's firmware,
as the simulator models it), so the other sees a robot that does not answer, and gets it
whenever the first one's link ends (a Wi-Fi drop), the two then steering it by turns.
So before a client opens its socket it claims the robot's address and port on this
machine, and a second claim fails with :class:`RobotBusyError`, which names the program
that holds the robot (its pid and command line) and says how to separate the two.

Every Cozmo answers at 172.31.1.1:5551 on its own Wi-Fi, so one host with a Wi-Fi
adapter per robot runs a driver per adapter, each bound to its adapter's address
(``local_ip``): the same robot address is then another robot. A claim made with a
specific local address counts as the robot seen from that address: two claims of
172.31.1.1:5551 from different local addresses both succeed, two from the same local
address conflict, and so do two with no local address (or the unspecified 0.0.0.0,
every interface). A claim from a local address and one from no local address conflict
too, whichever comes first: the one with no local address may reach the robot through
the other's adapter. That cross-check reads the names held from ``/proc/net/unix``: where
it cannot be read (Linux always has it; a container with a restricted ``/proc`` may not)
it is skipped, and only claims of the same name (the same local address, or none) refuse
each other.

How: the claim is a Unix socket bound in Linux's abstract namespace, named after the
robot's address (``cozmo_driver robot 127.0.0.1:5551``), and the local address when one
is given (``cozmo_driver robot 172.31.1.1:5551 from 172.31.1.100``). The kernel lets one
socket hold a name and frees it when the socket closes, including when its process dies,
so no stale lock is ever left behind. The names held are read from ``/proc/net/unix``
(which lists them, and the socket's inode), the holder by finding that socket among the
processes' open files (``/proc/PID/fd``, readable for one's own processes, or as root);
nobody is asked, so that no check leaves anything behind (a held name whose holder cannot
be found still counts as held). A claim is bound first and the claims it conflicts with
looked for after, so that of two made at once at least one sees the other; nothing binds
another claim's name to look for it, which would refuse that claim meanwhile. Where abstract
sockets do not exist (not Linux), claims always succeed: the check is skipped, not faked.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Dict, Optional, Set, Tuple

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


def _listed(prefix: bytes) -> Optional[Dict[bytes, Set[int]]]:
    """The abstract names bound now (in this network namespace, as the names are) that start
    with ``prefix`` -> the inodes of the sockets showing them (a listening socket's accepted
    connections show its name too); None when ``/proc/net/unix`` cannot be read."""
    shown = b"@" + prefix[1:]  # the leading NUL reads as "@"
    try:
        with open("/proc/net/unix", "rb") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return None
    found: Dict[bytes, Set[int]] = {}
    for line in lines:
        # Num RefCount Protocol Flags Type St Inode Path (the path may hold spaces)
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith(shown):
            found.setdefault(b"\0" + fields[7][1:], set()).add(int(fields[6]))
    return found


def _held(name: bytes) -> Optional[bool]:
    """Whether a socket holds the abstract name ``name``; None when ``/proc/net/unix`` cannot
    be read (binding the name to find out would refuse its claim meanwhile)."""
    listed = _listed(name)
    return None if listed is None else name in listed


def _process_of(inodes: Set[int]) -> Optional[int]:
    """The pid of a process with one of the sockets ``inodes`` open (this one looked at first),
    or None when none can be seen (another user's processes, unless root)."""
    targets = {f"socket:[{inode}]" for inode in inodes}
    own = str(os.getpid())
    try:
        pids = sorted((entry for entry in os.listdir("/proc") if entry.isdigit()), key=lambda pid: pid != own)
    except OSError:
        return None
    for pid in pids:
        try:
            with os.scandir(f"/proc/{pid}/fd") as fds:
                for fd in fds:
                    try:
                        if os.readlink(fd.path) in targets:
                            return int(pid)
                    except OSError:
                        continue
        except OSError:
            continue
    return None


def holder(name: bytes) -> Tuple[Optional[int], str]:
    """(pid, command line) of the process holding the abstract socket name ``name``, as far
    as it can be read ((None, "") when nobody holds it or its process cannot be found)."""
    inodes = (_listed(name) or {}).get(name)
    pid = _process_of(inodes) if inodes else None
    if pid is None:
        return None, ""
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
        from a specific local address and one from no local address (every interface) refuse
        each other too, where ``/proc/net/unix`` can be read."""
        if self._sock is not None or not claims_supported():
            return self
        name = _name(self.host, self.port, self.local_host)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(name)  # held until closed; nobody connects to it
        except OSError:
            sock.close()
            local = f" from the same local address {self.local_host}" if self.local_host else ""
            raise self._busy(name, local) from None
        conflict = self._conflict()  # looked for once bound: of two claims at once, one sees the other
        if conflict is not None:
            sock.close()
            raise self._busy(*conflict)
        self._sock = sock
        return self

    def _conflict(self) -> Optional[Tuple[bytes, str]]:
        """(name, from where) of a claim of this robot from every local address when this one
        is from a local address, or of one from a local address when this one is not; None
        also when ``/proc/net/unix`` cannot be read (the check is skipped)."""
        everywhere = _name(self.host, self.port)
        if self.local_host is not None:
            if _held(everywhere):
                return everywhere, " from every local address (a driver with no local_ip)"
            return None
        prefix = everywhere + b" from "
        names = sorted(_listed(prefix) or {})  # (None: not readable)
        if not names:
            return None
        local = names[0][len(prefix):].decode(errors="replace")
        return names[0], f" from the local address {local} (a driver with local_ip {local})"

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
            "a Cozmo answers one controller at a time, and two would get it by turns. Stop the other one, "
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
