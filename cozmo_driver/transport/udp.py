"""The one UDP adapter: a sans-I/O protocol object on a socket, on its own thread.

The adapter runs an asyncio event loop on a dedicated I/O thread. The protocol
object is used on that thread, in three situations:

* a datagram arrives: ``receive_datagram(data, now)``;
* its timer expires: ``handle_timer(now)``, the timer being re-armed at
  ``get_timer()`` after every step (one timer, no polling);
* another thread asks for it with :meth:`UdpTransport.call` or
  :meth:`UdpTransport.call_soon`.

After each of them the adapter transmits ``datagrams_to_send(now)`` and hands
every ``next_event()`` to ``on_event``, on the I/O thread. When nothing happens
the thread sleeps in the kernel: zero CPU while idle.

One exception, for commands (``call_soon(..., urgent=True)``, which
``Robot.post`` uses): the I/O thread holds a lock whenever it works, and a
caller that finds it free runs its call and sends the result itself, so that a
command leaves without waiting for the I/O thread to wake up and take the GIL;
the I/O thread then re-arms the timer and hands out events. When the I/O thread
is busy, the command runs there between two datagrams or events.

The socket is the adapter's own, non-blocking, watched by the loop: when it is
readable, every datagram already waiting is read (up to 32) before the
protocol's output and events are handled once. The robot sends a camera frame
as a burst of chunks; reading a burst in one wake-up instead of one datagram
per loop iteration (what asyncio's datagram transport does) saves the loop and
the hand-out per datagram. A datagram longer than the protocol decodes (2048 bytes: no
robot's is) is read one byte longer than that, never cut to a length that decodes, and the
session drops it whole as malformed. A send that would block is dropped and counted as a
send error (UDP: the session's retransmission covers reliable traffic). Send errors are
warned of at most once per 5 s (with the count of the others); the first send that works
after them says so, with their count (at most once per 5 s), and drops the warnings held
back, no longer true.

``protocol`` is anything with ``receive_datagram``, ``datagrams_to_send``,
``get_timer``, ``handle_timer`` and ``next_event``: a
:class:`~cozmo_driver.protocol.session.Session`, the robot client, or the
simulated robot. Time is ``time.monotonic()`` seconds (the loop's clock).

An event handler or a call that raises an Exception is logged and the thread goes on; one
that raises SystemExit or KeyboardInterrupt (which asyncio lets through) ends the thread: the
socket is closed, an error says so and what to do (stop, then start), and ``on_failure``, if
given, is called with it on the thread as its last work (a robot client ends its link there).

Safety switch: with the environment variable ``COZMO_LOOPBACK_ONLY=1`` (set by
the test harness, CI, ``./dev test``, ``./dev bench`` and the benchmarks themselves; not
by the demos, on the simulator or not) the adapter refuses to start with a robot
address outside 127.0.0.0/8, before a single datagram leaves: no test can reach a
real robot or the LAN by mistake.

Peer policy (:class:`PeerFilter`, sans-I/O): ``"fixed"`` (the driver) accepts
datagrams only from the robot's current source, ``remote_addr`` at first; while
the protocol waits for the answer to its RESET (its ``awaiting_connect`` is
true) it also takes the robot's Connect answer from another port of the same
host and follows the robot there (a robot behind a NAT or a relay that answers
from a new source port), and it sends its RESETs to ``remote_addr`` again.
``"reset"`` (the simulated robot) adopts the sender of the latest RESET frame as
its peer (a frame the session takes: a RESET cut short of the frame header moves
nothing), unless the protocol says it holds a link (its ``holds_link`` is true: the
simulator modelling Anki's firmware, which ignores anyone else while a link lives).
Datagrams from any other source are dropped and counted in
:attr:`TransportStats.wrong_source`.
"""

from __future__ import annotations

import asyncio
import contextlib
import concurrent.futures
import errno
import ipaddress
import logging
import math
import os
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Optional, Tuple

from ..addresses import NO_DESTINATION, address_problem
from ..errors import ConfigurationError, CozmoError, UsageError
from ..log_throttle import LogThrottle
from ..protocol.errors import RemoteProtocolError
from ..protocol.frames import MAGIC, MAX_DATAGRAM_SIZE, FrameType, decode_frame
from ..protocol.messages import PacketType

__all__ = ["UdpTransport", "PeerFilter", "is_reset", "TransportStats", "TransportError", "AddressError",
           "TransportStateError", "CallTimeoutError", "resolve_address", "address_problem", "is_loopback",
           "LOOPBACK_ONLY_ENV", "ROBOT_ADDRESS_HINT", "local_address_gone", "send_failure_hint"]

#: When this environment variable is "1", only loopback robot addresses are allowed.
LOOPBACK_ONLY_ENV = "COZMO_LOOPBACK_ONLY"

logger = logging.getLogger("cozmo.transport")

Address = Tuple[str, int]
#: bytes read per datagram: one more than the longest the protocol decodes, so that a longer
#: datagram, which the kernel cuts to the buffer without a word, reaches the protocol longer
#: than that and is dropped whole as malformed, instead of its first packets taken as a datagram
_RECV_BUFFER = MAX_DATAGRAM_SIZE + 1
#: datagrams read per wake-up at most, so that timers and calls from other threads still run
_READ_BATCH = 32


class TransportError(CozmoError):
    """Family: the socket could not be opened, or the adapter was used wrongly."""


class AddressError(TransportError, ConfigurationError):
    """An address or port that cannot be used: out of range, unresolvable, refused or busy."""

    #: the operating system's error number when the socket could not bind (errno.EADDRINUSE:
    #: another socket holds the port), else None
    errno: Optional[int] = None


class TransportStateError(TransportError, UsageError):
    """The adapter was used in a state that does not allow it (not started, started twice,
    called from the wrong thread), or its I/O thread did not start or stop in time."""


class CallTimeoutError(TransportStateError, TimeoutError):
    """:meth:`UdpTransport.call` waited its timeout for the I/O thread (held up in a listener
    or a call). ``dropped`` True: the thread had not begun the call, and never runs it (a
    command is not sent seconds late); False: it had begun it and finishes it, or (asked
    for) runs it when it gets to it. A TimeoutError, for code that catches that."""

    def __init__(self, message: str, dropped: bool) -> None:
        super().__init__(message)
        #: whether the call was dropped, never to run (else it runs, or finishes, unwaited for)
        self.dropped = dropped


@dataclass
class TransportStats:
    datagrams_in: int = 0
    datagrams_out: int = 0
    wrong_source: int = 0
    send_errors: int = 0
    callback_errors: int = 0


#: what resolve_address adds to an address it refuses: where a robot answers
ROBOT_ADDRESS_HINT = "a Cozmo answers at 172.31.1.1 on its own Wi-Fi"
#: what a robot client adds to a local address it cannot resolve or bind (the driver's parameters)
LOCAL_ADDRESS_HINT = ("local_ip: an address of this computer to bind, 0.0.0.0 for every interface; "
                      "local_port: a free port, 0 for any")
def resolve_address(host: str, port: int, destination: bool = False,
                    hint: str = ROBOT_ADDRESS_HINT) -> Address:
    """Resolve ``host`` to a numeric IPv4 address (raises :class:`AddressError`, whose text
    ends with ``hint``). A string of digits and dots must be four numbers 0-255, and a
    ``destination`` (where datagrams go) neither the unspecified nor the broadcast address
    (:func:`address_problem`), whether given or resolved, and its port not 0 (a socket binds
    port 0 to take any free one; nothing can be sent to it)."""
    if not 0 <= int(port) <= 65535:
        raise AddressError(f"port {port} is outside 0..65535")
    if destination and int(port) == 0:
        raise AddressError("port 0 is no port to send to (a socket binds it to take any free one), not "
                           "a robot's: check the port (a Cozmo answers at UDP port 5551)")
    problem = address_problem(host, destination)
    if problem is not None:
        raise AddressError(f"{problem}: check the address ({hint})")
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise AddressError(f"cannot resolve {host!r} to an IPv4 address ({exc.strerror or exc}): check "
                           f"the address ({hint})") from None
    numeric = infos[0][4][0]
    if destination and numeric in NO_DESTINATION:  # a host name that stands for one of those
        raise AddressError(f"{host!r} resolves to {numeric}, {NO_DESTINATION[numeric]}, not a "
                           f"robot's: check the address ({hint})")
    return numeric, int(port)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_address_gone(host: str) -> bool:
    """Whether ``host``, a specific local address (not 0.0.0.0, which is every interface),
    is not an address of this computer now: a throwaway UDP socket cannot bind it
    (EADDRNOTAVAIL), as while the Wi-Fi is disconnected (NetworkManager removes the address
    until it joins again) or after it came back with another address. Sends nothing."""
    if not host or host == "0.0.0.0":
        return False
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind((host, 0))
    except OSError as exc:
        return exc.errno == errno.EADDRNOTAVAIL
    return False


def send_failure_hint(host: str) -> str:
    """What a failed send is told, for a socket bound to the local address ``host``. An
    address gone may come back (the socket stays bound to it, and sends go out again), so a
    restart is asked for only if it came back another."""
    if local_address_gone(host):
        return (f"local_ip {host} is not an address of this computer now (the Wi-Fi disconnected, or came "
                f"back with another address): the driver goes on by itself once it is back with {host}; "
                "if it came back with another address, restart the driver with that local_ip, or use "
                "local_ip 0.0.0.0")
    return "is the robot's Wi-Fi joined?"


def is_connect_answer(data: bytes) -> bool:
    """Whether ``data`` is a robot's answer to a RESET: a ROBOT frame whose first reliable
    packet, number 0, is Connect."""
    if len(data) < 8 or data[:7] != MAGIC or data[7] != FrameType.ROBOT:
        return False
    try:
        frame = decode_frame(data)
    except RemoteProtocolError:
        return False
    return (frame.first_seq == 0 and bool(frame.packets)
            and frame.packets[0].packet_type == PacketType.CONNECT)


def is_reset(data: bytes) -> bool:
    """Whether ``data`` is a RESET frame a session takes: the magic, the RESET type and the
    whole frame header (a shorter one is dropped as malformed)."""
    if len(data) < 8 or data[:7] != MAGIC or data[7] != FrameType.RESET:
        return False
    try:
        decode_frame(data)
    except RemoteProtocolError:
        return False
    return True


class PeerFilter:
    """Which source a datagram may come from, and where datagrams go (sans-I/O).

    ``"fixed"``: the robot's source is ``remote_addr`` until, while the protocol awaits the
    answer to its RESET, a Connect answer comes from another port of the same host: that
    port becomes the source and the destination. While awaiting that answer datagrams
    (the RESETs) go to ``remote_addr``, so that a reconnect reaches the address the user
    gave even after the robot was followed elsewhere. ``"reset"``: the sender of the latest
    RESET frame (a whole one: :func:`is_reset`) is the peer, both ways, except while the
    protocol holds a link.
    """

    def __init__(self, policy: str, remote_addr: Optional[Address] = None) -> None:
        if policy not in ("fixed", "reset"):
            raise TransportStateError(f"peer_policy must be 'fixed' or 'reset', not {policy!r}")
        if policy == "fixed" and remote_addr is None:
            raise TransportStateError("peer_policy 'fixed' needs remote_addr")
        self.policy = policy
        self.remote_addr = remote_addr
        #: where the peer's datagrams come from (None: nobody yet)
        self.source: Optional[Address] = remote_addr if policy == "fixed" else None
        #: times the source moved to another address
        self.moves = 0

    def accept(self, addr: Address, data: bytes, awaiting_connect: bool = False,
               holds_link: bool = False) -> bool:
        """Whether a datagram from ``addr`` is the peer's (adopting a new source if it may)."""
        if addr == self.source:
            return True
        if self.policy == "reset":
            if not holds_link and is_reset(data):
                self._move(addr)
                return True
            return False
        remote = self.remote_addr
        if (awaiting_connect and remote is not None and addr[0] == remote[0]
                and is_connect_answer(data)):
            self._move(addr)
            return True
        return False

    def destination(self, awaiting_connect: bool = False) -> Optional[Address]:
        """Where the protocol's datagrams go now."""
        if self.policy == "fixed" and awaiting_connect:
            return self.remote_addr
        return self.source

    def _move(self, addr: Address) -> None:
        if self.source is not None:
            logger.info("new peer %s:%d (was %s:%d)", addr[0], addr[1], *self.source)
            self.moves += 1
        self.source = addr


class UdpTransport:
    """Runs ``protocol`` on a UDP socket. See the module docstring."""

    def __init__(self, protocol: Any, local_addr: Address = ("0.0.0.0", 0),
                 remote_addr: Optional[Address] = None, peer_policy: str = "fixed",
                 on_event: Optional[Callable[[Any], None]] = None, name: str = "udp",
                 local_hint: str = "", on_failure: Optional[Callable[[BaseException], None]] = None) -> None:
        PeerFilter(peer_policy, remote_addr)  # checks the policy before anything starts
        self.protocol = protocol
        self.local_addr = local_addr
        #: what a local address that cannot be resolved or bound is told (a robot client:
        #: LOCAL_ADDRESS_HINT); empty: ROBOT_ADDRESS_HINT for the first, nothing for the bind
        self.local_hint = local_hint
        self.remote_addr = remote_addr
        self.peer_policy = peer_policy
        self.on_event = on_event
        #: called on the I/O thread as its last work, with the exception, when one that is not
        #: an Exception (SystemExit, KeyboardInterrupt) of an event handler or a call ended it
        #: (see the module docstring); what it raises is logged
        self.on_failure = on_failure
        self.name = name
        self.stats = TransportStats()
        #: what a failed send is told (send_failure_hint), and until when that holds
        self._hint, self._hint_until = "", -math.inf
        self._peers: Optional[PeerFilter] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._sock: Optional[socket.socket] = None
        self._thread: Optional[threading.Thread] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._timer_at: Optional[float] = None
        self._started = threading.Event()
        self._start_error: Optional[BaseException] = None
        self._throttle = LogThrottle(5.0)  # the send-failure warning: once per 5 s, with a count
        #: sends failed since the last that worked, and (loop time) when the first of them did
        self._failed, self._failed_since = 0, 0.0
        #: calls from other threads that jump the queue (see call_soon(urgent=True))
        self._urgent: Deque[Tuple[Callable[..., Any], tuple]] = deque()
        #: held by the I/O thread whenever it works (never while it waits in select), so
        #: that another thread holding it may use the protocol engine (see call_soon)
        self._busy = threading.RLock()
        #: set (under _scheduling) once the I/O thread ends its run: from then on calls are
        #: refused (TransportStateError), though ``running`` holds until the thread is gone;
        #: what was scheduled before still runs, and the socket closes under _busy
        self._closing = False
        self._scheduling = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def local_address(self) -> Address:
        """The bound (host, port), once started."""
        if self._sock is None:
            raise TransportStateError("transport is not started")
        return self._sock.getsockname()[:2]

    @property
    def peer(self) -> Optional[Address]:
        """The peer's address (where its datagrams come from), once known."""
        return self._peers.source if self._peers is not None else None

    def _awaiting_connect(self) -> bool:
        return bool(getattr(self.protocol, "awaiting_connect", False))

    def _holds_link(self) -> bool:
        return bool(getattr(self.protocol, "holds_link", False))

    def start(self, timeout: float = 5.0) -> "UdpTransport":
        """Bind the socket and start the I/O thread (:class:`AddressError` when the address
        cannot be used). A stopped transport, or one whose start failed, may start again.

        A thread that has not come up within ``timeout`` (a machine too busy to run it) is given
        up: TransportStateError, and the transport is left as before the start, free to start
        again; that thread, if it comes up later, finds itself given up and ends, closing its
        socket, without touching the transport."""
        if self._thread is not None:
            raise TransportStateError("transport already started")
        host, port = resolve_address(*self.local_addr, hint=self.local_hint or ROBOT_ADDRESS_HINT)
        if self.remote_addr is not None:
            self.remote_addr = resolve_address(*self.remote_addr, destination=True)
            if os.environ.get(LOOPBACK_ONLY_ENV) == "1" and not is_loopback(self.remote_addr[0]):
                raise AddressError(
                    f"{LOOPBACK_ONLY_ENV}=1 is set: refusing to send to {self.remote_addr[0]}, which "
                    "is not a loopback address (tests and CI talk only to the simulator on 127.0.0.1)")
        self._peers = PeerFilter(self.peer_policy, self.remote_addr)
        # a start after a stop or a failed bind: nothing of the earlier run may be taken for
        # this one's (its closed socket and loop, its error, its timer)
        self._started = threading.Event()
        self._start_error = None
        self._sock = self._loop = self._timer = self._timer_at = None
        self._urgent.clear()
        self._closing = False
        self._thread = threading.Thread(target=self._run, args=((host, port),),
                                        name=f"cozmo-io-{self.name}", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            with self._scheduling:  # (as the thread takes it to come up: one of the two wins)
                given_up = not self._started.is_set()
                if given_up:
                    self._thread = None
            if given_up:
                raise TransportStateError(
                    f"the I/O thread did not start within {timeout} s (the machine too busy?): the start "
                    "is given up, nothing is bound, and the transport may be started again")
        if self._start_error is not None:
            self._thread.join(timeout)
            self._thread = None
            hint = f" ({self.local_hint})" if self.local_hint else ""
            error = AddressError(f"cannot bind UDP {host}:{port}: {self._start_error}{hint}")
            error.errno = getattr(self._start_error, "errno", None)
            raise error from None
        logger.info("[%s] UDP bound to %s:%d%s", self.name, *self.local_address,
                    f", robot {self.remote_addr[0]}:{self.remote_addr[1]}" if self.remote_addr else "")
        return self

    def _run(self, local: Address) -> None:
        loop = asyncio.new_event_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        error: Optional[OSError] = None
        try:
            sock.setblocking(False)
            sock.bind(local)
        except OSError as exc:
            error = exc
        else:
            loop.add_reader(sock.fileno(), self._on_readable)
            loop.call_soon(self._locked_pump)
        with self._scheduling:  # come up, unless the start gave this thread up (see start)
            mine = self._thread is threading.current_thread()
            if mine:
                self._loop = loop
                if error is None:
                    self._sock = sock
                else:
                    self._start_error, self._closing = error, True
                self._started.set()
        if not mine or error is not None:
            sock.close()
            loop.close()
            return
        failure: Optional[BaseException] = None
        try:
            loop.run_forever()
        except BaseException as exc:  # noqa: BLE001 - asyncio lets SystemExit and KeyboardInterrupt through
            failure = exc
        try:
            self._end_calls()
            if self._timer is not None:
                self._timer.cancel()
            loop.remove_reader(sock.fileno())
            loop.run_until_complete(asyncio.sleep(0))  # what was scheduled before the end
        except BaseException as exc:  # noqa: BLE001 - one of those again: the socket closes all the same
            failure = failure or exc
        finally:
            with self._busy:  # no urgent call sends on the socket as it closes
                loop.close()
                sock.close()
        if failure is not None:
            self._failed_by(failure)

    def _failed_by(self, failure: BaseException) -> None:
        """The I/O thread's run ended by ``failure`` (not by a stop): say so, then tell
        :attr:`on_failure`, on this thread, as its last work."""
        logger.error("[%s] the I/O thread ended: %s raised in an event handler or a call on it, where only "
                     "an Exception is caught: nothing is sent or received any more; call stop(), then "
                     "start() to go on (to end the program from there, tell its main thread instead)",
                     self.name, type(failure).__name__, exc_info=failure)
        if self.on_failure is not None:
            try:
                self.on_failure(failure)
            except BaseException:  # noqa: BLE001 - the thread ends here all the same
                logger.exception("[%s] on_failure failed", self.name)

    def _end_calls(self) -> None:
        """The I/O thread ends: calls are refused from now on (see :meth:`_schedule`)."""
        with self._scheduling:
            self._closing = True

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the I/O thread (the protocol object is left as it is)."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if thread.is_alive():
            with self._scheduling:
                if not self._closing:  # else the thread ends already (another stop)
                    loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
            if thread.is_alive():
                raise TransportStateError(f"I/O thread did not stop within {timeout} s")
        self._thread = None

    def __enter__(self) -> "UdpTransport":
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ cross-thread calls

    def in_io_thread(self) -> bool:
        """Whether the calling thread is this transport's I/O thread (an event handler, a
        call): there a call that waits for the thread (a stop, say) would wait for itself."""
        return threading.current_thread() is self._thread

    def clock(self) -> float:
        """The I/O thread's clock, the ``now`` the protocol is given (``time.monotonic()``
        seconds); TransportStateError before the first start."""
        loop = self._loop
        if loop is None:
            raise TransportStateError("transport is not started")
        return loop.time()

    def _schedule(self, loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any,
                  urgent: Optional[Tuple[Callable[..., Any], tuple]] = None) -> None:
        """Have the I/O thread run ``callback(*args)`` (after queuing ``urgent``, a call for
        it to run first), or raise TransportStateError once it ends its run: its loop may be
        closed, or about to be, while ``running`` still holds."""
        with self._scheduling:
            if self._closing:
                raise TransportStateError("transport is stopping")
            if urgent is not None:
                self._urgent.append(urgent)
            loop.call_soon_threadsafe(callback, *args)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 5.0, drop_late: bool = True) -> Any:
        """Run ``fn(*args)`` on the I/O thread, flush, and return its result (or raise);
        TransportStateError when the transport is not running or is stopping, and
        :class:`CallTimeoutError` when ``timeout`` s pass first: a call the I/O thread has not
        begun then is dropped and never runs (a command that timed out is not sent seconds
        later), unless ``drop_late`` is False (a stop, harmless late: it runs when the
        thread gets to it); one begun already finishes there. The error says which."""
        if self.in_io_thread():
            try:
                return fn(*args)
            finally:
                self._pump()
        if not self.running or self._loop is None:
            raise TransportStateError("transport is not running")
        future: concurrent.futures.Future = concurrent.futures.Future()

        def runner() -> None:
            if not future.set_running_or_notify_cancel():
                return  # dropped: its caller's wait ran out first
            with self._busy:
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed to the caller's thread, not swallowed
                    future.set_exception(exc)
                finally:
                    self._pump()

        self._schedule(self._loop, runner)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            waited = f"within {timeout:.3g} s (the I/O thread held up in a listener or a call)"
            if drop_late and future.cancel():  # not begun: runner() will not run it
                raise CallTimeoutError(f"the call was not taken {waited}: it was dropped, not run",
                                       dropped=True) from None
            if not future.done():  # else it finished as the wait ran out, or raised TimeoutError itself
                raise CallTimeoutError(f"the call did not finish {waited}: " + (
                    "it had begun and finishes there" if drop_late else "it runs there once the thread is free")
                    + ", not waited for", dropped=False) from None
        return future.result()

    def call_soon(self, fn: Callable[..., Any], *args: Any, urgent: bool = False) -> None:
        """Run ``fn(*args)`` on the I/O thread without waiting; errors are logged, and
        TransportStateError is raised when the transport is not running or is stopping (its
        I/O thread ending: nothing is sent then).

        ``urgent`` (a command to send): when the I/O thread is idle, the call runs on the
        calling thread at once, with the I/O thread kept out, and what it queues is sent
        from there: no wake-up of the I/O thread stands between a ROS callback and the
        datagram. When the I/O thread is busy (a burst of datagrams: a camera frame, whose
        last chunk is decoded and published), the call runs between two of them and what
        it queues is sent right away, instead of after the whole burst. Either way urgent
        calls keep their order among themselves."""
        loop = self._loop
        if not self.running or loop is None:
            raise TransportStateError("transport is not running")
        if not urgent:
            self._schedule(loop, self._guarded, fn, args)
            return
        if not self.in_io_thread() and self._busy.acquire(blocking=False):
            try:
                if self._closing:  # its socket closes, or is closed (under _busy)
                    raise TransportStateError("transport is stopping")
                self._run_urgent()  # any earlier urgent calls first
                self._call(fn, args)
                self._transmit(loop.time())  # what they all queued, in one go
            finally:
                self._busy.release()
            with contextlib.suppress(TransportStateError):  # sent: the rest ends with the thread
                self._schedule(loop, self._locked_pump)  # events, the retransmission timer
            return
        self._schedule(loop, self._locked_pump, urgent=(fn, args))  # which runs the urgent calls first

    def call_at(self, when: float, fn: Callable[..., Any], *args: Any) -> asyncio.TimerHandle:
        """Run ``fn(*args)`` on the I/O thread at ``when`` (``time.monotonic()`` seconds, the
        loop's clock), then flush; errors are logged. Call it on the I/O thread (from
        :meth:`call_soon`, a listener or an earlier ``call_at``); the handle's ``cancel()``
        stops it. The loop wakes within about a millisecond of ``when``."""
        if not self.in_io_thread() or self._loop is None:
            raise TransportStateError("call_at must be called on the I/O thread (use call_soon first)")
        return self._loop.call_at(when, self._guarded, fn, args)

    def _guarded(self, fn: Callable[..., Any], args: tuple) -> None:
        """Run a scheduled call on the I/O thread: log its errors, then flush."""
        with self._busy:
            try:
                self._call(fn, args)
            finally:
                self._pump()

    def _call(self, fn: Callable[..., Any], args: tuple) -> None:
        try:
            fn(*args)
        except CozmoError as exc:
            logger.warning("[%s] %s", self.name, exc)
        except Exception:
            self.stats.callback_errors += 1
            logger.exception("[%s] call of %r failed", self.name, fn)

    def _locked_pump(self) -> None:
        """The loop's own call of :meth:`_pump` (start, urgent calls, after a direct send)."""
        with self._busy:
            self._pump()

    def _run_urgent(self) -> None:
        """Run the urgent calls waiting (the thread holding _busy; it sends what they queued)."""
        urgent = self._urgent
        while urgent:
            self._call(*urgent.popleft())

    # ------------------------------------------------------------------ I/O thread

    def _on_readable(self) -> None:
        """The socket is readable: feed the protocol every datagram waiting, then flush."""
        with self._busy:
            sock, loop, protocol, stats = self._sock, self._loop, self.protocol, self.stats
            peers = self._peers
            fed = False
            for _ in range(_READ_BATCH):
                try:
                    data, addr = sock.recvfrom(_RECV_BUFFER)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:  # an ICMP error reported for an earlier send
                    self._on_send_error(exc)
                    break
                if addr != peers.source and not peers.accept(addr, data, self._awaiting_connect(),
                                                                 self._holds_link()):
                    stats.wrong_source += 1
                    continue
                stats.datagrams_in += 1
                try:
                    protocol.receive_datagram(data, loop.time())
                except Exception:  # a protocol bug: never the end of the I/O thread
                    stats.callback_errors += 1
                    logger.exception("[%s] the protocol failed on a datagram of %d bytes",
                                     self.name, len(data))
                fed = True
                if self._urgent:
                    break  # the rest waits in the socket: the command first (see call_soon)
            if fed:
                self._pump()

    def _on_timer(self) -> None:
        with self._busy:
            self._timer = None
            self._timer_at = None
            try:
                self.protocol.handle_timer(self._loop.time())
            except Exception:  # a protocol bug: the timer is armed again below all the same
                self.stats.callback_errors += 1
                logger.exception("[%s] the protocol's timer failed", self.name)
            # lines held back: failures (said after those of sends that worked again while
            # sends fail again now)
            lines = self._throttle.overdue(time.monotonic())
            for _, line, level in sorted(lines, key=lambda held: self._failed > 0 and held[0] == "send"):
                logger.log(level, "%s", line)
            self._pump()

    def _on_send_error(self, exc: Exception) -> None:
        self.stats.send_errors += 1
        now = time.monotonic()
        if not self._failed:
            self._failed_since = now
        self._failed += 1
        if now >= self._hint_until:  # (a bind of a throwaway socket: once a second at most)
            self._hint, self._hint_until = send_failure_hint(str(self.local_addr[0])), now + 1.0
        line = self._throttle.line("send", f"[{self.name}] UDP send failed: {exc} ({self._hint})", now)
        if line is not None:
            logger.warning("%s", line)

    def _transmit(self, now: float) -> None:
        """Send the datagrams the protocol has due."""
        datagrams = self.protocol.datagrams_to_send(now)
        if datagrams:
            peer, sock = self._peers.destination(self._awaiting_connect()), self._sock
            if peer is not None and sock is not None:
                for data in datagrams:
                    try:
                        sock.sendto(data, peer)
                    except OSError as exc:  # includes a full send buffer (would block)
                        self._on_send_error(exc)
                    else:
                        self.stats.datagrams_out += 1
                        if self._failed:
                            self._sent_again()

    def _sent_again(self) -> None:
        """A send worked after some failed: said (at most once per 5 s, the others counted),
        and the failures held back, no longer true, dropped (counted in this line)."""
        now = time.monotonic()
        failed, self._failed = self._failed, 0
        self._throttle.drop("send")  # (its 5 s kept: a failure again soon is held back)
        line = self._throttle.line("sent", f"[{self.name}] UDP sends work again ({failed} failed in the last "
                                   f"{now - self._failed_since:.1f} s)", now, level=logging.INFO)
        if line is not None:
            logger.info("%s", line)

    def _pump(self) -> None:
        """Transmit what is due, hand out events, re-arm the one timer."""
        loop = self._loop
        protocol = self.protocol
        callback = self.on_event
        now = loop.time()
        urgent = self._urgent
        try:
            for _ in range(64):  # an event handler may queue more to send: bounded rounds
                self._transmit(now)
                handled = False
                while True:
                    if urgent:
                        self._run_urgent()
                        self._transmit(loop.time())
                    event = protocol.next_event()
                    if event is None:
                        break
                    handled = True
                    if callback is not None:
                        try:
                            callback(event)
                        except CozmoError as exc:
                            logger.warning("[%s] event handler: %s", self.name, exc)
                        except Exception:
                            self.stats.callback_errors += 1
                            logger.exception("[%s] event handler failed on %r", self.name, event)
                if not handled:
                    break
                now = loop.time()
        except Exception:  # a protocol bug: the timer is armed again below all the same
            self.stats.callback_errors += 1
            logger.exception("[%s] the protocol failed while sending or handing out events", self.name)
            now = loop.time()
        deadline = protocol.get_timer()
        if deadline != self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._timer_at = deadline
            if deadline is not None:
                self._timer = loop.call_at(max(deadline, now), self._on_timer)
