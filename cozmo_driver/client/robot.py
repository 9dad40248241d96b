"""A Cozmo over UDP, for programs and the ROS nodes: :class:`Robot`.

``Robot`` joins a :class:`~cozmo_driver.client.link.RobotLink` to the UDP
adapter. The protocol runs on the adapter's I/O thread; listeners registered
with :meth:`Robot.add_listener` are called there with every event, or with the link's
events and only the messages they name (keep them short: hand work to your own thread
or executor); one event only comes from another thread, after the I/O thread ended: the
DISCONNECTED of a :meth:`Robot.stop` whose time ran out before the robot acknowledged the
disconnect (or that found the I/O thread ended already), or of a :meth:`Robot.start` that
failed once connecting, from the thread that called it. A listener that raises an Exception
is logged and the others still get the event; one that raises SystemExit or KeyboardInterrupt
ends the I/O thread (an error says so): the link ends there as a lost one that is not tried
again, DISCONNECTED to the listeners and the client not ready, until :meth:`Robot.stop`, then
:meth:`Robot.start`.
Commands may be sent from any thread; one that the I/O thread does not take in time (held up
in a listener) raises :class:`~cozmo_driver.transport.udp.CallTimeoutError` and is dropped,
never sent late. Units at this API are the protocol's own (mm, mm/s,
rad); the ROS nodes convert to metres at their boundary.

    with Robot("127.0.0.1", 5551) as robot:
        robot.wait_until_ready(5.0)
        robot.drive_wheels(50.0, 50.0)
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from ..protocol import messages as msgs
from ..protocol.errors import CozmoError, LocalProtocolError, NotConnectedError
from ..protocol.session import MessageReceived, acknowledged, reliable_mark
from ..transport.udp import LOCAL_ADDRESS_HINT, TransportStateError, UdpTransport, resolve_address
from .claim import RobotClaim
from .link import ClientConfig, LinkState, LinkStateChanged, RobotInfo, RobotLink

__all__ = ["Robot", "DEFAULT_ROBOT_ADDRESS", "DEFAULT_ROBOT_PORT", "turn_message"]

logger = logging.getLogger("cozmo.client")

DEFAULT_ROBOT_ADDRESS = "172.31.1.1"
DEFAULT_ROBOT_PORT = 5551

#: the least time a stop gives each of its waits on the I/O thread (a call, the thread's end),
#: and a failed start its wait for the thread's end, seconds: a stop whose timeout is short or
#: spent is not cut short on a busy machine, and one whose I/O thread is held up waits about
#: this much a wait
_IO_WAIT_MIN_S = 0.5


def _finite(**values: float) -> None:
    """Raise LocalProtocolError naming the first of ``values`` (argument name = value) that
    is not a finite number: the robot would take NaN or infinity as a speed or an angle."""
    for name, value in values.items():
        if not math.isfinite(value):
            raise LocalProtocolError(f"{name} must be a finite number, not {value!r}")


def turn_message(heading_rad: float, speed_radps: float, accel_radps2: float,
                 tolerance_rad: float, action_id: int, turn_rad: Optional[float] = None) -> Any:
    """The TurnInPlace that turns the robot to ``heading_rad``, in its pose frame.

    Anki's firmware takes TurnInPlace's angle as the heading to reach, never as a turn
    (its point turn's "target robot orientation in the frame of the current mat"). Its
    last fields are the number of half turns to make (u16: the notes' ``unknown4`` and
    ``unknown5``) and "use the shortest direction" (the notes' ``is_absolute``); without
    the latter, the sign of the speed gives the direction. Without ``turn_rad`` the robot
    takes the short way; with it, it turns that way, by that much (floor(|turn| / pi) half
    turns: several turns work). Values that are not finite are refused (LocalProtocolError)."""
    _finite(heading_rad=heading_rad, speed_radps=speed_radps, accel_radps2=accel_radps2,
           tolerance_rad=tolerance_rad)
    if turn_rad is not None:
        _finite(turn_rad=turn_rad)
    speed = abs(float(speed_radps))
    half_turns = 0
    if turn_rad is not None:
        speed = math.copysign(speed, turn_rad)
        half_turns = min(0xFFFF, int(abs(turn_rad) // math.pi))
    heading = math.remainder(float(heading_rad), 2.0 * math.pi)
    return msgs.TurnInPlace(angle_rad=heading, speed_rad_per_sec=speed,
                            accel_rad_per_sec2=accel_radps2, angle_tolerance_rad=tolerance_rad,
                            unknown4=half_turns & 0xFF, unknown5=half_turns >> 8,
                            is_absolute=turn_rad is None, action_id=action_id)


class Robot:
    """One robot over UDP. See the module docstring."""

    def __init__(self, host: str = DEFAULT_ROBOT_ADDRESS, port: int = DEFAULT_ROBOT_PORT,
                 local_host: str = "0.0.0.0", local_port: int = 0,
                 config: Optional[ClientConfig] = None, name: str = "cozmo") -> None:
        self.link = RobotLink(config, name=name)
        #: (callback, the message names it takes, or None for every message), in order
        self._listeners: List[Tuple[Callable[[Any], None], Optional[FrozenSet[str]]]] = []
        #: message name (None: a link event) -> the callbacks that take it, made on first use
        #: after a change of listeners (replaced whole, so that the I/O thread never sees it
        #: half made)
        self._routes: Dict[Optional[str], Tuple[Callable[[Any], None], ...]] = {}
        #: held by add_listener and remove_listener (called from several threads), so that
        #: neither loses the other's change; the I/O thread reads without it
        self._listeners_lock = threading.Lock()
        self._actions: Dict[int, threading.Event] = {}
        self._actions_lock = threading.Lock()
        self._next_action_id = 0
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._claim = RobotClaim(host, port)  # acquired by start()
        #: what ended the I/O thread by itself (a listener's SystemExit or KeyboardInterrupt, see
        #: :meth:`_io_failed`), set before the listeners hear its DISCONNECTED; None again at a start
        self.io_failure: Optional[BaseException] = None
        self.transport = UdpTransport(self.link, local_addr=(local_host, local_port),
                                      remote_addr=(host, port), peer_policy="fixed",
                                      on_event=self._dispatch, name=name, local_hint=LOCAL_ADDRESS_HINT,
                                      on_failure=self._io_failed)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "Robot":
        """Claim the robot on this machine (:class:`~cozmo_driver.client.claim.RobotBusyError`
        when another program drives it, from the same local address if
        ``local_host`` is a specific one), open the socket and connect. When the connect
        fails (its call to the I/O thread times out, or raises), the I/O thread is stopped,
        the link ended as by :meth:`stop` and the claim given up before that error is raised:
        a start may be tried again. Raises
        :class:`~cozmo_driver.transport.udp.TransportStateError` while the I/O thread of a
        :meth:`stop` that was held up past its waits (see there) has not ended yet, and when
        this client is started already (its claim would otherwise read as another program's).
        After an I/O thread that ended by itself (a listener's SystemExit), a start without a
        :meth:`stop` first connects afresh."""
        if self.transport.running and self._claim.held:
            raise TransportStateError(f"[{self.link.name}] the robot client is started already: stop() it "
                                      "before starting it again")
        if not self.transport.running:
            self.transport.stop()  # an I/O thread that ended after its stop gave up waiting: forgotten
            # the claim of a run whose I/O thread ended by itself (its link ended there): this
            # client's own, not another program's
            self._claim.release()
        self.io_failure = None
        local_host = self.transport.local_addr[0]
        if local_host not in ("", "0.0.0.0"):  # a specific address: the robot as seen from there
            local_host = resolve_address(*self.transport.local_addr, hint=LOCAL_ADDRESS_HINT)[0]
        self._claim = RobotClaim(*resolve_address(*self.transport.remote_addr, destination=True),
                                 local_host=local_host).acquire()
        started = False
        try:
            self.transport.start()
            started = True
            self.transport.call(lambda: self.link.start(self.transport.clock()))
        except BaseException:
            try:
                if started:
                    self._end_io(_IO_WAIT_MIN_S, "start", "the start failed")
            except CozmoError as exc:  # the start's own error is the one raised
                logger.warning("[%s] start failed, and its I/O thread did not stop: %s", self.link.name, exc)
            finally:
                self._ready.clear()
                self._claim.release()
            raise
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the motors, disconnect (waiting up to ``timeout``), stop the I/O thread,
        give up the claim of the robot. The client is then disconnected and not ready, the
        listeners told so (DISCONNECTED) unless it was already: also when the robot did not
        acknowledge the disconnect in time, and when the I/O thread had ended before the stop
        (``transport.stop()`` called directly) with the link not disconnected, so that no stop
        could reach the robot (a warning says so); one that a listener's SystemExit ended has
        ended the link itself (see :meth:`_io_failed`). :meth:`start` connects afresh after.

        Each wait on the I/O thread (a call, its end) takes what is left of ``timeout``, and
        0.5 s at least. An I/O thread held up past that (a listener or a call that blocks) is
        told to stop and left to end by itself (a warning says so): the stop returns, not
        ready, and the link is ended there, its DISCONNECTED handed out, as the thread's last
        work once it is free, after the stop (motors, Disconnect) if the thread had not taken
        it in time; :meth:`start` raises until it has ended.

        Raises :class:`~cozmo_driver.transport.udp.TransportStateError`, and does nothing,
        when called on the I/O thread (from a listener, a :meth:`call_soon` or a
        :meth:`schedule`), whose end it would wait for: call it from another thread."""
        if self.transport.in_io_thread():
            raise TransportStateError("Robot.stop() cannot run on the robot client's I/O thread (a listener, a "
                                      "call_soon or schedule callback): call it from another thread")
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(_IO_WAIT_MIN_S, deadline - time.monotonic())

        self._stopped.clear()
        why = "the I/O thread had ended"  # if no stop reaches the link (see RobotLink.abandon_stop)
        try:
            if self.transport.running:
                # a stop is harmless late: one the I/O thread has not taken in time still goes out once it is free
                self.transport.call(lambda: self.link.stop(self.transport.clock()), timeout=left(), drop_late=False)
                while (not self.transport.call(lambda: self.link.stopped, timeout=left())
                       and time.monotonic() < deadline):
                    self._stopped.wait(0.05)
            elif self.link.state is not LinkState.DISCONNECTED:
                logger.warning("[%s] stop: the I/O thread had ended, the link %s: no stop reached the robot",
                               self.link.name, self.link.state.value)
        except (CozmoError, TimeoutError, concurrent.futures.TimeoutError) as exc:
            why = str(exc) or "the I/O thread did not answer in time"
            logger.warning("[%s] stop: %s", self.link.name, why)
        finally:
            try:
                self._end_io(left(), "stop", why)
            finally:
                self._ready.clear()
                self._claim.release()

    def _end_io(self, timeout: float, what: str, why: str) -> None:
        """Stop the I/O thread, waiting ``timeout`` at most, then end the link here
        (:meth:`_abandon_link`, ``why`` what kept a stop from the link if none reached it);
        ``what`` (start, stop) names the step in the warning. A thread
        still held up then (a listener or a call that blocks) ends by itself once free, the
        stop asked of it: the link is its until then, so its last call, after that stop, ends
        the link."""
        try:
            self.transport.stop(timeout)
        except TransportStateError:
            try:
                self.transport.call_soon(self._abandon_link, why)
            except TransportStateError:  # it was ending already: gone in a moment
                self.transport.stop(timeout)
            else:
                logger.warning("[%s] %s: the I/O thread did not end within %.1f s (held up in a listener or "
                               "a call): it ends the link once free", self.link.name, what, timeout)
                return
        self._abandon_link(why)

    def _abandon_link(self, why: str, last: bool = False) -> None:
        """End the link where no I/O runs it any more (after the I/O thread, or as its last
        call), its DISCONNECTED handed out unless it was disconnected already; ``why``: what
        kept a stop from it (see :meth:`RobotLink.abandon_stop`), ``last``: see
        :meth:`_dispatch`."""
        event = self.link.abandon_stop(why)
        if event is not None:
            self._dispatch(event, last)

    def _io_failed(self, failure: BaseException) -> None:
        """The I/O thread's last work when ``failure``, not an Exception (a listener's
        SystemExit or KeyboardInterrupt), ended it (the transport logged it): the link ends
        as after a stop that found the thread ended (:meth:`_abandon_link`), every listener
        told DISCONNECTED, the client not ready; :meth:`stop`, then :meth:`start`, go on
        from there (:attr:`io_failure` says what ended it)."""
        self._ready.clear()
        self.io_failure = failure
        self._abandon_link(f"the I/O thread ended by {type(failure).__name__}", last=True)

    def __enter__(self) -> "Robot":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ events and state

    def add_listener(self, callback: Callable[[Any], None],
                     messages: Optional[Iterable[str]] = None) -> None:
        """``callback(event)`` on the I/O thread (but see the module's note on a stop whose time
        ran out) for every link event (everything but a
        :class:`MessageReceived`) and for every message, or, with ``messages`` (names, as
        ``message.NAME``), only for the messages named there: a listener that takes few of
        them is then not called for the robot's hundred datagrams a second."""
        names = None if messages is None else frozenset(messages)
        with self._listeners_lock:
            self._listeners = self._listeners + [(callback, names)]
            self._routes = {}

    def remove_listener(self, callback: Callable[[Any], None]) -> None:
        with self._listeners_lock:
            listeners = list(self._listeners)
            for i, (added, _) in enumerate(listeners):
                if added == callback:
                    del listeners[i]
                    break
            else:
                raise ValueError(f"{callback!r} is not a listener")
            self._listeners = listeners
            self._routes = {}

    def _route(self, name: Optional[str]) -> Tuple[Callable[[Any], None], ...]:
        """The callbacks for a message of this name (None: a link event), made once."""
        routes = self._routes
        route = routes.get(name)
        if route is None:
            route = tuple(callback for callback, names in self._listeners
                          if name is None or names is None or name in names)
            routes[name] = route
        return route

    def _dispatch(self, event: Any, last: bool = False) -> None:
        """Hand ``event`` to its listeners; ``last`` (the DISCONNECTED of an I/O thread that a
        listener's SystemExit ended): one that raises anything is logged, the others still
        called."""
        if isinstance(event, MessageReceived):
            name = event.message.NAME
            if name == "AcknowledgeAction":
                # kept (set) for a wait that comes after: the robot acknowledges when it
                # takes the command, often before the sender waits; ids wrap at 255
                with self._actions_lock:
                    done = self._actions.get(event.message.action_id)
                if done is not None:
                    done.set()
        else:
            name = None
            if isinstance(event, LinkStateChanged):
                if event.state is LinkState.READY:
                    self._ready.set()
                else:
                    self._ready.clear()
                if event.state is LinkState.DISCONNECTED:
                    self._stopped.set()
        for callback in self._route(name):  # one that fails keeps no other from the event
            try:
                callback(event)
            except CozmoError as exc:
                logger.warning("[%s] listener %r: %s", self.link.name, callback, exc)
            except Exception:
                self.transport.stats.callback_errors += 1
                logger.exception("[%s] listener %r failed on %r", self.link.name, callback, event)
            except BaseException:
                if not last:
                    raise
                self.transport.stats.callback_errors += 1
                logger.exception("[%s] listener %r failed on %r", self.link.name, callback, event)

    def wait_until_ready(self, timeout: float) -> bool:
        """Block until RobotState streams (True) or ``timeout`` passes (False)."""
        return self._ready.wait(timeout)

    @property
    def state(self) -> LinkState:
        return self.link.state

    @property
    def info(self) -> RobotInfo:
        return self.link.info

    @property
    def robot_state(self):
        """The latest RobotState message, or None."""
        return self.link.robot_state

    def calibrating(self, motor: str) -> bool:
        """Whether the robot calibrates ``motor`` ("head" or "lift") now, or is about to
        (at a connection): commands moving it are held until it is done (see
        :mod:`cozmo_driver.client.calibration`)."""
        return motor in self.link.calibration

    @property
    def stats(self):
        return self.link.session.stats

    # ------------------------------------------------------------------ commands

    def send(self, message) -> None:
        """Send ``message`` now; raises if it cannot be sent (not connected, too large...), and
        :class:`~cozmo_driver.transport.udp.CallTimeoutError` when the I/O thread does not take
        it within 5 s (held up in a listener or a call): it is dropped then, never sent late."""
        self.transport.call(self.link.send, message)

    def post(self, message) -> None:
        """Send ``message`` without waiting; failures are logged, not raised: not connected,
        and also the client not running (before :meth:`start`, during and after :meth:`stop`), as
        posts come from servers and lifecycle steps that may race with a stop. It goes out
        ahead of the datagrams the I/O thread is still working through (see
        :meth:`UdpTransport.call_soon`), in the order posted."""
        try:
            self.transport.call_soon(self.link.send, message, urgent=True)
        except TransportStateError:
            logger.warning("[%s] %s not sent: the robot client is not running", self.link.name, message.NAME)

    def calibrate_motors(self, head: bool = True, lift: bool = True) -> None:
        """Have the robot calibrate its head and/or lift now (StartMotorCalibration): each
        drives to its low stop; the commands to it wait meanwhile, as at a connection."""
        self.transport.call_soon(self._calibrate_motors, head, lift)

    def _calibrate_motors(self, head: bool, lift: bool) -> None:
        motors = [name for name, wanted in (("head", head), ("lift", lift)) if wanted]
        self.link.send(msgs.StartMotorCalibration(head=head, lift=lift))
        self.link.calibration.expect(self.clock(), motors)

    # ------------------------------------------------------------------ the I/O thread's clock

    @staticmethod
    def clock() -> float:
        """The I/O thread's clock: ``time.monotonic()`` seconds."""
        return time.monotonic()

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the I/O thread soon (from any thread); errors are logged."""
        self.transport.call_soon(fn, *args)

    def schedule(self, when: float, fn: Callable[..., Any], *args: Any):
        """Run ``fn(*args)`` on the I/O thread at :meth:`clock` time ``when``, then flush what
        it sent; call it on the I/O thread. Returns a handle with ``cancel()``."""
        return self.transport.call_at(when, fn, *args)

    def drive_wheels(self, left_mmps: float, right_mmps: float,
                     left_accel_mmps2: float = 0.0, right_accel_mmps2: float = 0.0) -> None:
        _finite(left_mmps=left_mmps, right_mmps=right_mmps, left_accel_mmps2=left_accel_mmps2,
               right_accel_mmps2=right_accel_mmps2)
        self.send(msgs.DriveWheels(lwheel_speed_mmps=left_mmps, rwheel_speed_mmps=right_mmps,
                                   lwheel_accel_mmps2=left_accel_mmps2,
                                   rwheel_accel_mmps2=right_accel_mmps2))

    def stop_all_motors(self) -> None:
        self.send(msgs.StopAllMotors())

    def stop_all_motors_acknowledged(self, timeout: float) -> Optional[bool]:
        """StopAllMotors now (from any thread but the I/O thread), then wait, ``timeout`` s in
        all at most, until the robot has acknowledged it (and so every reliable packet sent
        before it; what is queued after it, faces of the animation stream say, is not waited
        for): True once it has, False when it has not in time, None when the stop
        could not be sent (not connected, or the I/O thread not taking it in time: it is
        dropped then, never sent late; one it had begun goes out). For a program about to be
        suspended (Ctrl-Z), whose stop nothing would send again."""
        deadline = time.monotonic() + timeout
        session = self.link.session

        def send_stop():
            self.link.send(msgs.StopAllMotors())
            return reliable_mark(session)

        try:
            mark = self.transport.call(send_stop, timeout=timeout)
        except (CozmoError, TimeoutError, concurrent.futures.TimeoutError):
            return None
        try:
            while not self.transport.call(acknowledged, session, mark,
                                          timeout=max(0.001, deadline - time.monotonic())):
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.005)
        except (CozmoError, TimeoutError, concurrent.futures.TimeoutError):
            return False
        return True

    def new_action_id(self) -> int:
        """An action id (1..255, wrapping) whose AcknowledgeAction :meth:`wait_for_action` can await."""
        with self._actions_lock:
            self._next_action_id = self._next_action_id % 255 + 1
            action_id = self._next_action_id
            self._actions[action_id] = threading.Event()
        return action_id

    def wait_for_action(self, action_id: int, timeout: float) -> bool:
        """Block until the robot acknowledges ``action_id`` (True) or ``timeout`` passes."""
        with self._actions_lock:
            event = self._actions.get(action_id)
        if event is None:
            raise ValueError(f"action {action_id} is not awaited (use new_action_id())")
        acked = event.wait(timeout)
        with self._actions_lock:
            if self._actions.get(action_id) is event:
                del self._actions[action_id]
        return acked

    def turn_in_place(self, angle_rad: float, speed_radps: float = 1.5, accel_radps2: float = 5.0,
                      tolerance_rad: float = 0.02, absolute: bool = False) -> int:
        """Turn by (or to, when ``absolute``, a heading in the robot's pose frame)
        ``angle_rad``; returns the action id, which the robot acknowledges when it takes the
        command (the turn goes on after: watch the state's heading and ARE_WHEELS_MOVING).
        A relative turn needs the robot's state (its heading now)."""
        _finite(angle_rad=angle_rad)
        action_id = self.new_action_id()
        if absolute:
            self.send(turn_message(angle_rad, speed_radps, accel_radps2, tolerance_rad, action_id))
        else:
            state = self.robot_state
            if state is None:
                raise NotConnectedError("a relative turn needs the robot's heading: no RobotState yet")
            self.send(turn_message(float(state.pose_angle_rad) + angle_rad, speed_radps,
                                   accel_radps2, tolerance_rad, action_id, turn_rad=angle_rad))
        return action_id

    def set_head_angle(self, angle_rad: float, max_speed_radps: float = 10.0,
                       accel_radps2: float = 10.0, duration_s: float = 0.0, action_id: int = 0) -> None:
        _finite(angle_rad=angle_rad, max_speed_radps=max_speed_radps, accel_radps2=accel_radps2,
               duration_s=duration_s)
        self.send(msgs.SetHeadAngle(angle_rad=angle_rad, max_speed_rad_per_sec=max_speed_radps,
                                    accel_rad_per_sec2=accel_radps2, duration_sec=duration_s,
                                    action_id=action_id))

    def set_lift_height(self, height_mm: float, max_speed_radps: float = 10.0,
                        accel_radps2: float = 10.0, duration_s: float = 0.0, action_id: int = 0) -> None:
        _finite(height_mm=height_mm, max_speed_radps=max_speed_radps, accel_radps2=accel_radps2,
               duration_s=duration_s)
        self.send(msgs.SetLiftHeight(height_mm=height_mm, max_speed_rad_per_sec=max_speed_radps,
                                     accel_rad_per_sec2=accel_radps2, duration_sec=duration_s,
                                     action_id=action_id))

    def move_head(self, speed_radps: float) -> None:
        _finite(speed_radps=speed_radps)
        self.send(msgs.MoveHead(speed_rad_per_sec=speed_radps))

    def move_lift(self, speed_radps: float) -> None:
        _finite(speed_radps=speed_radps)
        self.send(msgs.MoveLift(speed_rad_per_sec=speed_radps))

    def enable_camera(self, enable: bool = True, color: bool = False) -> None:
        mode = msgs.ENUMS["ImageSendMode"]
        resolution = msgs.ENUMS["ImageResolution"]
        self.send(msgs.EnableColorImages(enable=color))
        self.send(msgs.EnableCamera(image_send_mode=mode.Stream if enable else mode.Off,
                                    image_resolution=resolution.QVGA))

    def set_head_light(self, enable: bool) -> None:
        self.send(msgs.SetHeadLight(enable=enable))

    def set_volume(self, level: int) -> None:
        self.send(msgs.SetRobotVolume(level=level))

    # ---- commands used by the action, media and object servers
    # These post (see :meth:`post`): they return at once, from any thread, go out in the
    # order posted, and a failure to send (not connected, the client not running) is logged,
    # not raised; a value that is not finite is refused (LocalProtocolError), before anything
    # is posted. Units are the protocol's (mm, mm/s, rad, rad/s).

    def post_head_angle(self, angle_rad: float, max_speed_radps: float, accel_radps2: float,
                        duration_s: float = 0.0, action_id: int = 0) -> None:
        """Move the head to ``angle_rad``; the robot acknowledges ``action_id`` when it takes the
        command (not when there)."""
        _finite(angle_rad=angle_rad, max_speed_radps=max_speed_radps, accel_radps2=accel_radps2,
               duration_s=duration_s)
        self.post(msgs.SetHeadAngle(angle_rad=angle_rad, max_speed_rad_per_sec=max_speed_radps,
                                    accel_rad_per_sec2=accel_radps2, duration_sec=duration_s,
                                    action_id=action_id))

    def post_lift_height(self, height_mm: float, max_speed_radps: float, accel_radps2: float,
                         duration_s: float = 0.0, action_id: int = 0) -> None:
        """Move the lift to ``height_mm``; the robot acknowledges ``action_id`` when it takes the
        command (not when there)."""
        _finite(height_mm=height_mm, max_speed_radps=max_speed_radps, accel_radps2=accel_radps2,
               duration_s=duration_s)
        self.post(msgs.SetLiftHeight(height_mm=height_mm, max_speed_rad_per_sec=max_speed_radps,
                                     accel_rad_per_sec2=accel_radps2, duration_sec=duration_s,
                                     action_id=action_id))

    def post_move_head(self, speed_radps: float) -> None:
        """Turn the head at ``speed_radps`` (0 stops it)."""
        _finite(speed_radps=speed_radps)
        self.post(msgs.MoveHead(speed_rad_per_sec=speed_radps))

    def post_move_lift(self, speed_radps: float) -> None:
        """Turn the lift at ``speed_radps`` (0 stops it)."""
        _finite(speed_radps=speed_radps)
        self.post(msgs.MoveLift(speed_rad_per_sec=speed_radps))

    def post_turn_in_place(self, heading_rad: float, speed_radps: float, accel_radps2: float,
                           tolerance_rad: float, action_id: int,
                           turn_rad: Optional[float] = None) -> None:
        """Turn to ``heading_rad`` (the robot's pose frame): the short way, or by ``turn_rad``
        (its sign the direction, beyond half a turn the half turns it makes); acknowledged
        as ``action_id`` when the robot takes it (see :func:`turn_message`)."""
        self.post(turn_message(heading_rad, speed_radps, accel_radps2, tolerance_rad, action_id,
                               turn_rad))

    def post_execute_path(self, segments: Sequence[Any], event_id: int) -> None:
        """Replace the robot's path by ``segments`` (AppendPathSegLine/Arc/PointTurn messages,
        e.g. from :func:`cozmo_driver.driver.motion.segment_message`) and follow it; the
        robot's PathFollowingEvents carry ``event_id``."""
        self.post(msgs.ClearPath(unknown=0))
        for segment in segments:
            self.post(segment)
        self.post(msgs.ExecutePath(event_id=event_id, unknown=False))

    def post_stop_wheels(self) -> None:
        """Stop the treads (DriveWheels at 0 mm/s)."""
        self.post(msgs.DriveWheels(lwheel_speed_mmps=0.0, rwheel_speed_mmps=0.0))

    def post_stop_path(self) -> None:
        """Drop the path being followed and stop the treads."""
        self.post(msgs.ClearPath(unknown=0))
        self.post_stop_wheels()

    def post_volume(self, level: int) -> None:
        """Set the speaker's volume (0..65535)."""
        self.post(msgs.SetRobotVolume(level=level))
