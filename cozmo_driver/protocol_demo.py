"""``cozmo-demo --protocol-only`` (also ``cozmo-protocol-demo``): the raw exchange.

No ROS: the robot client API (:class:`cozmo_driver.client.Robot`) talks to the
robot directly. Without ``--robot-ip`` it starts the built-in simulated Cozmo
on 127.0.0.1 and talks to it over real UDP; with ``--robot-ip 172.31.1.1``
(after joining the robot's Wi-Fi) the same run drives a real robot. It prints
the connection handshake as it happens, then drives a small square with head
and lift moves and the camera on, printing one status line per second (link,
RTT, pose, battery, stream rates), and ends with the link statistics and, on
the simulator, the reported pose next to the simulator's ground truth.

Everything is bounded: the run ends by itself after the demonstration (or after
``--duration`` seconds), and the robot is told to stop and disconnected at the end; it is
said stopped only when it acknowledged that stop (a lost link: the robot keeps its last
command; the demo says it may still be moving, and to pick it up or switch it off). The
exit status is 0 when the link stayed up to the end, 1 when it did not (the square
stops where the link went; the robot is still told to stop, and the statistics are
printed), 2 when the robot did not become ready or its address cannot be used, and
128 + the signal's number on Ctrl-C (130) or SIGTERM (143), as ``cozmo-demo``'s.
Ctrl-Z stops the robot (its stop acknowledged, or 0.2 s at most) before the process is
suspended, the square's commands held until ``fg``, which goes on with the demonstration;
the time suspended counts neither against the wait for the robot nor against ``--duration``.
The main demo, through the ROS 2 driver, is :mod:`cozmo_driver.demo`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import math
import signal
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable, Optional

from .client import ClientConfig, LinkState, LinkStateChanged, Robot, RobotReady
from .console import say
from .errors import CozmoError
from .protocol.session import MessageReceived
from .protocol.status import RobotStatusFlag
from .robot_geometry import reported_lift_height_m
from .stop_flag import CTRL_Z_STOPPED, CtrlZ, StopFlag

__all__ = ["main"]

_HANDSHAKE = {"HardwareInfo", "FirmwareSignature", "BodyInfo"}
#: what a command to the robot raises when it cannot be sent (the link went: not connected;
#: the I/O thread did not take it in time)
_SEND_ERRORS = (CozmoError, TimeoutError, concurrent.futures.TimeoutError)
#: Ctrl-Z: how long the stop may take to be acknowledged before the process is suspended, s
CTRL_Z_STOP_S = 0.2
#: at the end: how long the robot may take to acknowledge the stop, s
END_STOP_S = 1.0
#: what the demo says when no stop is known to have reached the robot
MAY_STILL_MOVE = "it may still be moving; if it does, pick it up or switch it off"


class _Ending:
    """How the demonstration left the robot: ``stopped`` None while it has not driven it,
    then whether the robot acknowledged the stop at the end (:data:`END_STOP_S`)."""

    def __init__(self) -> None:
        self.stopped: Optional[bool] = None


class _RunClock:
    """``time.monotonic()`` less the time this process spent suspended (Ctrl-Z until fg, as
    :func:`_suspend` measures it): the deadlines of the wait for the robot and of
    ``--duration`` read it, so that a suspension does not use them up."""

    def __init__(self) -> None:
        self.suspended = 0.0

    def __call__(self) -> float:
        return time.monotonic() - self.suspended


class _Monitor:
    """Counts what arrives (on the I/O thread) and prints the handshake as it happens."""

    def __init__(self, out) -> None:
        self.out = out
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.counts: Counter = Counter()
        self.seen: set = set()
        self.images = 0
        self.last_chunk_frame: Optional[int] = None
        self.state: Optional[LinkState] = None
        #: how often the link went from ready to another state (lost, reconnecting)
        self.losses = 0

    def stamp(self) -> str:
        return f"[{time.monotonic() - self.t0:6.2f} s]"

    def __call__(self, event: Any) -> None:
        if isinstance(event, MessageReceived):
            message = event.message
            name = message.NAME
            with self.lock:
                self.counts[name] += 1
                if name == "ImageChunk" and message.chunk_id == message.image_chunk_count - 1:
                    self.images += 1
            if name not in self.seen:
                self.seen.add(name)
                detail = ""
                if name in _HANDSHAKE:
                    detail = f": {message!r:.110}"
                self.out(f"{self.stamp()} robot -> driver  first {name}{detail}")
        elif isinstance(event, LinkStateChanged):
            with self.lock:
                if self.state is LinkState.READY and event.state is not LinkState.READY:
                    self.losses += 1
                self.state = event.state
            self.out(f"{self.stamp()} link {event.state.value}: {event.reason}")
        elif isinstance(event, RobotReady):
            info = event.info
            self.out(f"{self.stamp()} robot ready: firmware {info.firmware_version} "
                     f"({info.firmware_build}), head serial 0x{info.head_serial or 0:08x}, "
                     f"body serial 0x{info.body_serial or 0:08x}, colour {info.body_color}")

    def snapshot(self) -> Counter:
        with self.lock:
            return Counter(self.counts), self.images


def _status_line(robot: Robot, monitor: _Monitor, previous, elapsed: float) -> tuple:
    counts, images = monitor.snapshot()
    prev_counts, prev_images = previous
    state_hz = (counts["RobotState"] - prev_counts["RobotState"]) / elapsed
    fps = (images - prev_images) / elapsed
    rs = robot.robot_state
    stats = robot.stats
    rtt = f"{stats.srtt_s * 1e3:.1f} ms" if stats.srtt_s is not None else "-"
    if rs is not None:
        pose = (f"x {rs.pose_x_mm:7.1f} mm  y {rs.pose_y_mm:7.1f} mm  "
                f"yaw {math.degrees(rs.pose_angle_rad):6.1f} deg  head {math.degrees(rs.head_angle_rad):5.1f} deg  "
                f"lift {1000.0 * reported_lift_height_m(rs.lift_height_mm):4.1f} mm  "
                f"battery {rs.battery_voltage_v:.2f} V")
    else:
        pose = "no RobotState yet"
    line = (f"{monitor.stamp()} {robot.state.value:<12} rtt {rtt:>8}  state {state_hz:4.1f} Hz  "
            f"camera {fps:4.1f} fps  | {pose}")
    return line, (counts, images)


def _turned(robot: Robot, heading: float, stop: StopFlag, timeout: float = 5.0) -> bool:
    """Wait until the robot faces ``heading`` (within 2 degrees) with its treads still: a
    TurnInPlace is acknowledged when the robot takes it, not when it is done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = robot.robot_state
        if state is not None and not int(state.status) & RobotStatusFlag.ARE_WHEELS_MOVING and \
                abs(math.remainder(float(state.pose_angle_rad) - heading, 2 * math.pi)) < 0.035:
            return True
        if stop.wait(0.03):
            return False
    return False


class _Gated:
    """The robot as the square sees it: each of its commands waits while ``gate`` is held
    (by :func:`_suspend`, from its stop of the robot until the process goes on after
    Ctrl-Z), so that none follows that stop while the process is being suspended."""

    _COMMANDS = frozenset({"drive_wheels", "turn_in_place", "set_head_angle", "set_lift_height",
                           "stop_all_motors"})

    def __init__(self, robot: Robot, gate: threading.Lock) -> None:
        self._robot, self._gate = robot, gate

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._robot, name)
        if name not in self._COMMANDS:
            return attribute

        def gated(*args: Any, **kwargs: Any) -> Any:
            with self._gate:
                return attribute(*args, **kwargs)
        return gated


def _square(robot: Robot, stop: StopFlag, out, gate: Optional[threading.Lock] = None) -> None:
    """A 10 cm square (:func:`_drive_square`), the thread ``demo-square``: it ends, saying
    why, when a command cannot be sent (the link to the robot went). Its commands wait
    while ``gate`` is held (:class:`_Gated`)."""
    try:
        _drive_square(robot if gate is None else _Gated(robot, gate), stop, out)
    except _SEND_ERRORS as exc:
        out(f"  the square stops: {exc}")


def _drive_square(robot: Robot, stop: StopFlag, out) -> None:
    """A 10 cm square: straight sides by wheel speed, corners by the robot's own
    TurnInPlace (acknowledged when taken; done when the state shows the heading reached and
    the treads still), head and lift moving at the corners."""
    speed = 50.0  # mm/s
    for side in range(4):
        if stop.is_set():
            return
        out(f"  driver -> robot  DriveWheels {speed:.0f} mm/s (side {side + 1} of 4)")
        robot.drive_wheels(speed, speed, 250.0, 250.0)
        if stop.wait(100.0 / speed):
            return
        robot.drive_wheels(0.0, 0.0, 250.0, 250.0)
        out("  driver -> robot  TurnInPlace +90 deg")
        state = robot.robot_state
        if state is None:   # the link was reset (a reconnect): no heading to turn from
            out("  the square stops: no RobotState since the link was reset")
            return
        heading = float(state.pose_angle_rad) + math.pi / 2
        action = robot.turn_in_place(math.pi / 2, speed_radps=1.5, accel_radps2=5.0)
        acknowledged = robot.wait_for_action(action, 2.0)
        turned = acknowledged and _turned(robot, heading, stop)
        if stop.is_set():   # the end came meanwhile: no time-out to tell, no command to send
            return
        if not acknowledged:
            out("  the turn was not acknowledged within 2 s")
        elif not turned:
            out("  the turn did not end within 5 s")
        head = math.radians(30.0 if side % 2 == 0 else -10.0)
        lift = 80.0 if side % 2 == 0 else 35.0
        out(f"  driver -> robot  SetHeadAngle {math.degrees(head):.0f} deg, SetLiftHeight {lift:.0f} mm")
        robot.set_head_angle(head)
        robot.set_lift_height(lift)
        if stop.wait(0.4):
            return
    robot.stop_all_motors()


def _seed(text: str) -> int:
    """``--seed``: cozmo-sim's own type (a whole number, 0 or more), its refusal a usage
    error (status 2); imported when a seed is given (the simulator imports numpy)."""
    from .sim.cli import _seed as sim_seed

    return sim_seed(text)


#: the refusal of a robot port without a robot address, here and in cozmo-demo: the port
#: would go unused (without robot_ip the demos start a simulator of their own)
PORT_WITHOUT_IP = ("robot_port without robot_ip: the built-in simulator, which runs without "
                   "robot_ip, takes a free port of its own. A simulator you started (cozmo-sim "
                   "--port N): --robot-ip 127.0.0.1 --robot-port N; a real robot: --robot-ip "
                   "172.31.1.1")
#: the arguments also taken as name:=value (and --name), as cozmo-demo takes them
_NAME_VALUE = ("robot_ip", "robot_port")


def parse_arguments(argv: Optional[list] = None, prog: str = "cozmo-protocol-demo") -> argparse.Namespace:
    """The options; ``robot_ip:=...`` and ``robot_port:=...`` count as ``--robot-ip ...``
    and ``--robot-port ...``, as in cozmo-demo (whose ``--protocol-only`` hands its
    arguments here)."""
    from .bringup import split_launch_style

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Bring a Cozmo up over its UDP protocol, without ROS, and show what the "
                    "link carries. Without --robot-ip, a simulated Cozmo runs on 127.0.0.1. "
                    f"Also taken as name:=value: {', '.join(_NAME_VALUE)}.")
    parser.add_argument("--robot-ip", "--robot_ip", dest="robot_ip",
                        help="a real robot's address (join its Wi-Fi first; usually 172.31.1.1). "
                             "Default: the built-in simulator")
    parser.add_argument("--robot-port", "--robot_port", dest="robot_port", type=int, default=None,
                        help="a real robot's UDP port, with --robot-ip (default 5551)")
    parser.add_argument("--duration", type=float, default=20.0,
                        help="upper bound of the run in seconds, the time suspended (Ctrl-Z) not counted "
                             "(default 20)")
    parser.add_argument("--seed", type=_seed, default=1,
                        help="simulator random seed: a whole number, 0 or more (default 1)")
    # the same switch as cozmo-demo's: colour by default, --grey for grey
    parser.add_argument("--grey", action="store_true", help="grey camera images (default: colour)")
    parser.add_argument("--color", action="store_true", help=argparse.SUPPRESS)  # the default; kept for old scripts
    parser.add_argument("-v", "--verbose", action="store_true", help="log every message (debug)")
    launch, rest = split_launch_style(parser, list(sys.argv[1:] if argv is None else argv), _NAME_VALUE)
    args = parser.parse_args(rest)
    for name, value in launch.items():
        if getattr(args, name) is not None:
            parser.error(f"{name} given twice")
        if name == "robot_port":
            try:
                value = int(value)
            except ValueError:
                parser.error(f"robot_port:={value!r}: expected a port number")
        setattr(args, name, value)
    if args.robot_port is not None and args.robot_ip is None:
        parser.error(PORT_WITHOUT_IP)
    if args.robot_port is None:
        args.robot_port = 5551
    if args.duration <= 0 or not math.isfinite(args.duration):
        parser.error("--duration must be a positive number of seconds")
    return args


def main(argv: Optional[list] = None, prog: str = "cozmo-protocol-demo") -> int:
    args = parse_arguments(argv, prog)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")

    def out(text: str) -> None:
        say(text)   # an output that is gone (the terminal closed) drops the line: the robot still stops

    sim = None
    if args.robot_ip is None:
        from .sim import SimServer

        sim = SimServer(host="127.0.0.1", port=0, seed=args.seed)
        sim.start()
        host, port = sim.address
        out(f"simulated Cozmo listening on {host}:{port} (seed {args.seed})")
    else:
        host, port = args.robot_ip, args.robot_port
        out(f"connecting to the robot at {host}:{port}")

    stop = StopFlag()   # SIGINT/SIGTERM set it; its handler takes no lock
    restore_handlers = stop.install()
    ctrl_z = CtrlZ()    # Ctrl-Z: the main thread stops the robot, then suspends the process
    restore_ctrl_z = ctrl_z.install()
    monitor = _Monitor(out)
    robot: Optional[Robot] = None
    clock = _RunClock()
    deadline = clock() + args.duration
    exit_code = 2
    ending = _Ending()
    try:  # from here on, whatever fails: the robot and the simulator stop, the handlers go back
        robot = Robot(host, port, local_host="127.0.0.1" if sim is not None else "0.0.0.0",
                      config=ClientConfig(), name="demo")
        robot.add_listener(monitor)
        robot.start()
        out(f"{monitor.stamp()} driver -> robot  RESET (connect)")
        if _wait_ready(robot, stop, min(10.0, args.duration), ctrl_z, out, clock):
            exit_code = _demonstrate(robot, sim, monitor, stop, args, deadline, out, ctrl_z, clock,
                                     ending=ending)
        elif not stop.is_set():
            out("the robot did not become ready: is the robot on, and is this machine on the "
                "robot's Wi-Fi?")
    except CozmoError as exc:  # an address or port that cannot be used, a robot claimed by another
        say(f"{prog}: {exc}", file=sys.stderr)
    finally:
        if robot is not None:
            robot.stop()
        if sim is not None:
            sim.stop()
        restore_handlers()
        restore_ctrl_z()
        stop.close()
        ctrl_z.close()
    if stop.signum is not None:     # as cozmo-demo: 128 + the signal's number
        name = signal.Signals(stop.signum).name
        if ending.stopped is None:
            out(f"interrupted ({name}) before the robot was driven: disconnected.")
        elif ending.stopped:
            out(f"interrupted ({name}): the robot is stopped and disconnected.")
        else:
            out(f"interrupted ({name}): disconnected, but no stop is known to have reached the "
                f"robot: {MAY_STILL_MOVE}.")
        return 128 + stop.signum
    if exit_code != 2:
        out("done.")
    return exit_code


def _wait_ready(robot: Robot, stop: StopFlag, timeout: float, ctrl_z: Optional[CtrlZ] = None,
                out: Callable[[str], None] = print, clock: Optional[_RunClock] = None) -> bool:
    """Whether the robot became ready within ``timeout`` s (of ``clock``: the time suspended
    does not count); False at once on a signal. A Ctrl-Z meanwhile (``ctrl_z``, looked at
    every 0.1 s) suspends the process (:func:`_suspend`)."""
    clock = clock or _RunClock()
    deadline = clock() + timeout
    while not robot.wait_until_ready(0.1):
        if ctrl_z is not None and ctrl_z.take():
            _suspend(robot, threading.Lock(), ctrl_z, out, clock)
        if stop.is_set() or clock() >= deadline:
            return False
    return True


def _suspend(robot: Robot, gate: threading.Lock, ctrl_z: CtrlZ, out, clock: Optional[_RunClock] = None) -> None:
    """Ctrl-Z came (:meth:`CtrlZ.take`): the robot stopped, its stop acknowledged
    (:data:`CTRL_Z_STOP_S` at most), what was done said, and the process suspended, with
    ``gate`` held from the stop until the process goes on (``fg``): no command of the
    square follows the stop meanwhile. The time suspended is added to ``clock``'s."""
    with gate:
        acknowledged = robot.stop_all_motors_acknowledged(CTRL_Z_STOP_S)
        if acknowledged:
            out(f"{CTRL_Z_STOPPED}; fg goes on with the demonstration")
        elif acknowledged is None:
            out("suspended (Ctrl-Z): the robot is not connected, no stop was sent; fg goes on")
        else:
            out(f"suspended (Ctrl-Z): the robot did not acknowledge the stop within {CTRL_Z_STOP_S:g} s: "
                "it may still be moving; fg goes on with the demonstration")
        suspended = time.monotonic()
        ctrl_z.suspend()
        if clock is not None:
            clock.suspended += time.monotonic() - suspended


def _command(out, what: str, command: Callable[[], None]) -> bool:
    """Send a command to the robot; a link that went is said, not raised."""
    try:
        command()
        return True
    except _SEND_ERRORS as exc:
        out(f"could not {what}: {exc}")
        return False


def _stop_at_the_end(robot: Robot, out) -> bool:
    """Stop the robot; whether it acknowledged the stop (:data:`END_STOP_S`), else said."""
    acknowledged = robot.stop_all_motors_acknowledged(END_STOP_S)
    if acknowledged is None:
        out(f"could not stop the robot: it is not connected: {MAY_STILL_MOVE}")
    elif not acknowledged:
        out(f"the robot did not acknowledge the stop within {END_STOP_S:g} s: {MAY_STILL_MOVE}")
    return bool(acknowledged)


def _demonstrate(robot: Robot, sim, monitor: _Monitor, stop: StopFlag, args,
                 deadline: float, out, ctrl_z: Optional[CtrlZ] = None, clock: Optional[_RunClock] = None,
                 ending: Optional[_Ending] = None) -> int:
    """The demonstration on a ready robot until ``deadline`` (of ``clock``, which the time
    suspended does not advance), then its statistics: 0 when the link stayed up to the end,
    else 1. A Ctrl-Z (``ctrl_z``) suspends the process meanwhile (:func:`_suspend`), the
    square's commands held. ``ending`` gets whether the robot acknowledged the stop at the
    end."""
    ending = ending or _Ending()
    ending.stopped = False
    clock = clock or _RunClock()
    gate = threading.Lock()     # the square's commands wait while it is held (_suspend)
    if _command(out, "turn the camera on", lambda: robot.enable_camera(True, color=not args.grey)):
        out(f"{monitor.stamp()} driver -> robot  EnableCamera (QVGA, "
            f"{'grey' if args.grey else 'colour'})")
    mover = threading.Thread(target=_square, args=(robot, stop, out, gate), name="demo-square", daemon=True)
    mover.start()
    previous = monitor.snapshot()
    last = time.monotonic()
    while not stop.is_set() and clock() < deadline:
        stop.wait(last + 1.0 - time.monotonic(), also=ctrl_z)
        if ctrl_z is not None and ctrl_z.take():
            _suspend(robot, gate, ctrl_z, out, clock)
            previous, last = monitor.snapshot(), time.monotonic()  # rates of the time it ran
            continue
        if stop.is_set():       # a signal: no status line, the robot is stopped at once
            break
        now = time.monotonic()
        line, previous = _status_line(robot, monitor, previous, now - last)
        last = now
        out(line)
        if not mover.is_alive():
            break
    stop.set()
    mover.join(2.0)
    ending.stopped = _stop_at_the_end(robot, out)
    _command(out, "turn the camera off", lambda: robot.enable_camera(False))
    stats = robot.stats
    counts, images = monitor.snapshot()
    out("\nlink statistics:")
    out(f"  datagrams sent {stats.datagrams_sent}, received {stats.datagrams_received}; "
        f"retransmissions {stats.retransmissions}; malformed dropped {stats.malformed_datagrams}; "
        f"pings answered {stats.pings_answered}/{stats.pings_sent}")
    out("  messages received: " + ", ".join(f"{name} {n}" for name, n in counts.most_common()))
    out(f"  camera images completed: {images}")
    rs = robot.robot_state
    if sim is not None and rs is not None:
        truth = sim.true_pose()
        out(f"  reported pose x {rs.pose_x_mm:.1f} mm, y {rs.pose_y_mm:.1f} mm, "
            f"yaw {math.degrees(rs.pose_angle_rad):.1f} deg; simulator truth x {truth[0]:.1f} mm, "
            f"y {truth[1]:.1f} mm, yaw {math.degrees(truth[2]):.1f} deg")
    with monitor.lock:
        losses = monitor.losses
    if losses:
        out(f"  link lost {losses} time{'' if losses == 1 else 's'} during the run")
    if losses or robot.state is not LinkState.READY:
        out(f"the link did not stay up (now {robot.state.value})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
