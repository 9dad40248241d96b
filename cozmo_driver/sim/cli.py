"""``cozmo-sim``: run the simulated Cozmo on a UDP port until Ctrl-C (or --duration).

    cozmo-sim --port 5551 --seed 3 --loss-down 0.1 --duration 60

Prints one status line per second: whether a client is connected, the true pose,
head and lift, and the rate of each stream (RobotState sent, camera frames sent,
face images shown, audio frames played); a line its output no longer takes (a closed pipe,
a terminal hung up) is dropped. Exits cleanly on SIGINT, SIGTERM and SIGHUP
(unless started under nohup); with a
client connected, once it has disconnected or --stop-grace seconds later (a terminal's
Ctrl-C reaches the driver too, whose stop and goodbye the robot must still answer), or
at a second SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import errno
import logging
import math
import signal
import sys
import time
from typing import List, Optional

from ..console import say
from ..lifeline import exit_with_parent
from ..protocol.errors import CozmoError
from ..stop_flag import StopFlag, stop_signals
from ..transport.memory import Impairment
from ..transport.udp import AddressError, resolve_address
from .model import ModelConfig
from .robot import LINK_POLICIES, RobotConfig, room_light
from .server import DEFAULT_PORT, SIM_ADDRESS_HINT, SimServer

__all__ = ["main", "build_parser", "robot_config", "format_status", "STOP_GRACE_S"]

#: how long a signalled simulator serves a connected client on, at most, s (--stop-grace):
#: ros2 launch's SIGTERM comes 5 s after its SIGINT. A driver still starting when the Ctrl-C
#: came takes seconds to stop on a loaded machine: with 2 s its stop went unanswered
STOP_GRACE_S = 5.0
#: a signal this soon after the one that began the grace is taken for a copy of it, not for a
#: second Ctrl-C, s: a launch that has no terminal (ros2 launch --noninteractive, or stdin not
#: a tty) forwards the Ctrl-C its terminal's process group got as well, moments later
SIGNAL_COPY_S = 0.5


def _number(text: str) -> float:
    """``text`` as a float; NaN when it is not a number (each option's check then refuses it)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def _probability(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a probability within 0..1")
    return value


def _milliseconds(text: str) -> float:
    value = _number(text)
    if value < 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not a delay >= 0 ms")
    return value


def _charge(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a charge within 0..1 (0: empty, 1: full)")
    return value


def _seconds(text: str) -> float:
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text} is not a time >= 0 s")
    return value


def _whole(what: str, highest: float = math.inf):
    """An option type: a whole number within 0..``highest``, else a usage error saying
    ``text is not <what>``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if not 0 <= value <= highest:
            raise argparse.ArgumentTypeError(f"{text} is not {what}")
        return value
    return parse


_seed = _whole("a seed: a whole number, 0 or more")
_port = _whole("a UDP port: 1..65535, or 0 for a free one", 65535)


def _host(text: str) -> str:
    """An address the simulator can bind (resolved here to say at once what is wrong with
    it; whether it is loopback is SimServer's check)."""
    try:
        resolve_address(text, 0, hint=SIM_ADDRESS_HINT)
    except CozmoError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


#: the logging levels --log-level takes (in any case)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a logging level: use one of "
                                         f"{', '.join(LOG_LEVELS)} (in any case)")
    return text.upper()


def _light(text: str) -> float:
    try:
        return room_light(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not a light > 0 (1: as the room is drawn)") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cozmo-sim", description=(
        "Simulated Anki Cozmo speaking the robot's UDP protocol (loopback only by default)."))
    p.add_argument("--host", type=_host, default="127.0.0.1",
                   help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help=f"UDP port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--seed", type=_seed, default=0,
                   help="seed of the world, noise and impairments: a whole number, 0 or more")
    p.add_argument("--duration", type=_seconds, default=None, metavar="S",
                   help="stop after this many seconds, 0 or more (default: run until Ctrl-C)")
    p.add_argument("--stop-grace", type=_seconds, default=STOP_GRACE_S, metavar="S",
                   help="on SIGINT, SIGTERM or SIGHUP with a client connected, serve it until it "
                        "disconnects, for at most this many seconds, so that its stop and "
                        f"goodbye are answered (default {STOP_GRACE_S:g}; 0: stop at once); a "
                        "second SIGINT or SIGTERM ends it")
    for direction, what in (("up", "client to robot"), ("down", "robot to client")):
        p.add_argument(f"--loss-{direction}", type=_probability, default=0.0,
                       help=f"probability of losing a datagram {what}")
        p.add_argument(f"--dup-{direction}", type=_probability, default=0.0,
                       help=f"probability of duplicating a datagram {what}")
        p.add_argument(f"--reorder-{direction}", type=_probability, default=0.0,
                       help=f"probability of holding a datagram {what} back by up to 20 ms")
        p.add_argument(f"--delay-{direction}", type=_milliseconds, default=0.0, metavar="MS",
                       help=f"fixed delay {what}, in milliseconds")
    colour = p.add_mutually_exclusive_group()
    colour.add_argument("--color", dest="color", action="store_const", const=True, default=None,
                        help="always stream colour images (default: as the client asks)")
    colour.add_argument("--grey", "--gray", dest="color", action="store_const", const=False,
                        help="always stream grey images")
    p.add_argument("--light", type=_light, default=1.0,
                   help="how much light the room has: the camera's images scale with it "
                        "(default 1; 0.25 a dim room, 4 a sunny one)")
    p.add_argument("--battery", type=_charge, default=ModelConfig.battery_soc, metavar="CHARGE",
                   help="the battery's charge at start, 0..1 (0: empty, 3.45 V; 1: full, 4.05 V; "
                        f"default {ModelConfig.battery_soc:g}); driving drains a full one in 40 min")
    p.add_argument("--on-charger", action="store_true",
                   help="start on the charger, where it charges (empty to full in 30 min)")
    p.add_argument("--link-policy", choices=LINK_POLICIES, default="firmware",
                   help="firmware (default): as the robot does, a client keeps the robot until it "
                        "disconnects or is silent for 5 s, and anyone else is ignored meanwhile; "
                        "latest_reset: any client's RESET takes the robot at once")
    p.add_argument("--force-non-loopback", action="store_true",
                   help="allow binding an address that is not loopback")
    p.add_argument("--quiet", action="store_true", help="no status lines")
    p.add_argument("--log-level", type=_log_level, default="WARNING",
                   help=f"logging level: {', '.join(LOG_LEVELS)} (default WARNING)")
    return p


def robot_config(args: argparse.Namespace) -> RobotConfig:
    """The simulated robot's configuration from the command line."""
    return RobotConfig(seed=args.seed, camera_color=args.color, camera_light=args.light,
                       link_policy=args.link_policy,
                       model=ModelConfig(battery_soc=args.battery, start_on_charger=args.on_charger))


def format_status(sim: SimServer, rates: dict) -> str:
    connected = sim.is_connected()
    peer = sim.peer() if connected else None
    x, y, yaw = sim.true_pose()
    who = f"client {peer[0]}:{peer[1]}" if peer else "no client"
    return (f"{who:<24} pose ({x:7.1f}, {y:7.1f}) mm {math.degrees(yaw):7.1f} deg  "
            f"head {math.degrees(sim.head_angle()):5.1f} deg  lift {sim.lift_height():5.1f} mm  | "
            f"state {rates['state']:4.1f} Hz  camera {rates['camera']:4.1f} fps  "
            f"display {rates['display']:4.1f} fps  audio {rates['audio']:4.1f} fps")


def _serve_until_disconnected(sim: SimServer, grace: float, stop: StopFlag) -> None:
    """Signalled: a connected client is served on until it disconnects, ``grace`` s at most,
    or until another SIGINT or SIGTERM (one within :data:`SIGNAL_COPY_S` of the grace's start
    is taken for a copy of the first)."""
    if grace <= 0 or not sim.is_connected():
        return
    say(f"cozmo-sim: stopping once the client has disconnected (at most {grace:g} s; "
        "Ctrl-C again or SIGTERM stops at once)")
    start = time.monotonic()
    deadline = start + grace
    seen = len(stop.signals)
    while sim.is_connected() and time.monotonic() < deadline:
        if len(stop.signals) > seen:
            if time.monotonic() - start >= SIGNAL_COPY_S:
                return
            seen = len(stop.signals)
        time.sleep(0.01)


def _port_taken_hint(exc: CozmoError, port: int) -> str:
    """What to do when the port is taken (a simulator started by hand, then a bring-up with
    use_sim:=true, which starts one of its own on the same port), else ""."""
    if not (isinstance(exc, AddressError) and exc.errno == errno.EADDRINUSE):
        return ""
    return (f"; another program holds that port, maybe a simulator you started: to drive that "
            f"one, give the bring-up use_sim:=true start_sim:=false sim_port:={port}; else "
            "choose a free port (sim_port:=N, or cozmo-sim --port N; --port 0 picks one)")


def main(argv: Optional[List[str]] = None) -> int:
    exit_with_parent()  # end with the bring-up that started it (cozmo_driver.lifeline)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    up = Impairment(loss=args.loss_up, duplicate=args.dup_up, reorder=args.reorder_up,
                    delay=args.delay_up / 1000.0)
    down = Impairment(loss=args.loss_down, duplicate=args.dup_down, reorder=args.reorder_down,
                      delay=args.delay_down / 1000.0)
    # SIGINT/SIGTERM/SIGHUP end the loop below; the handler takes no lock (see StopFlag).
    stop = StopFlag()
    signals = stop_signals()  # SIGHUP too, unless started under nohup
    restore = stop.install(signals)
    try:
        sim = SimServer(args.host, args.port, seed=args.seed,
                        config=robot_config(args),
                        up=up, down=down, allow_non_loopback=args.force_non_loopback)
        sim.start()
    except CozmoError as exc:
        say(f"cozmo-sim: {exc}{_port_taken_hint(exc, args.port)}", file=sys.stderr)
        restore()
        stop.close()
        return 2
    host, port = sim.address
    say(f"cozmo-sim: simulated Cozmo on udp://{host}:{port} (seed {args.seed}); Ctrl-C stops")
    end = None if args.duration is None else time.monotonic() + args.duration
    try:
        sim.rates()
        while not stop.is_set():
            wait = 1.0 if end is None else min(1.0, end - time.monotonic())
            if wait > 0 and stop.wait(wait):
                break
            if not args.quiet:
                say(format_status(sim, sim.rates()))
            if end is not None and time.monotonic() >= end:
                break
        if stop.is_set():
            _serve_until_disconnected(sim, args.stop_grace, stop)
    finally:
        sim.stop()
        # Stopped: a SIGINT or SIGTERM that comes while the process exits is ignored. A
        # terminal's Ctrl-C reaches every process of `ros2 launch ... use_sim:=true`, and
        # the launch forwards one more; with Python's handler put back (or ours, which the
        # interpreter resets to the default as it finalizes; it leaves SIG_IGN alone), that
        # one killed the simulator: exit -2, an ERROR in the launch's output.
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        stop.close()
    say("cozmo-sim: stopped")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
