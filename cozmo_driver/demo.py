"""``cozmo-demo``: the main job, through ROS 2. ``./dev demo`` runs it.

Without a robot address it starts the simulated Cozmo in this process (so that
its ground truth can be read: true pose, face display, sound), then the whole
ROS stack from the bring-up plan (:mod:`cozmo_driver.bringup_plan`, the one the
launch file and ``cozmo_bringup`` use) as child processes pointed at that
simulator: ``cozmo_driver_node``, the robot description publisher, and the face
node if it is installed. With ``--robot-ip 172.31.1.1`` (or ``robot_ip:=...``)
the same run drives a real robot, after this machine joined its Wi-Fi.

It then drives a short demonstration through ROS interfaces only (see
:mod:`cozmo_driver.ros.demo_node`): a built-in animation, a square on
``cmd_vel`` with head and lift moves, a face, a sound, the camera on; prints a
status line every second; stops the robot and every process; and writes into
``artifacts/``: a camera snapshot, the face display (the simulator's
framebuffer; on a real robot, whose screen cannot be read back, the face
node's latest ``display/face`` image converted as the driver converts it for
the screen: the same picture), the driven path (odometry against the ground
truth on the simulator) and the processes' log. It ends by itself in about
30 s; the exit status is 0 when everything worked, 1 when the demonstration
failed, 2 when the robot or the stack could not be brought up, 130 on Ctrl-C, 143 on SIGTERM.

Every step's outcome is checked (the action results, the service answers, the
camera frames, the head and lift, on the simulator the pose error against the
ground truth, the face shown and the sound played), and every failed step is
listed at the end. The simulator, the driver or the one-process stack exiting before
the robot answered is a bring-up failure (2), reported with the last lines of its log;
another node that exits (the face node, say) is noted, and the run goes on without it
(a failed step, 1).

The files an earlier run left in the artefacts directory (the names this demo
writes) are removed once the run's ROS domain and arguments were found good (a
refused run leaves them), and the run says so: the directory then holds this
run's files only. Two demos at once on one machine do not interfere: the
artefacts directory is held by one run at a time (a second one on the same
directory is refused, status 2), and so is a ROS domain. When ``ROS_DOMAIN_ID``
is not set and the default domain 0 is held by another demo, this one takes a
free domain of its own (1..100, not reserved by anyone else through ament's
domain_coordinator ports) and says which; when it is set to a domain another
demo holds, the demo refuses to run (status 2), naming that demo.

``cozmo-demo --protocol-only`` (also ``cozmo-protocol-demo``) is the older
demo without ROS, showing the raw protocol exchange
(:mod:`cozmo_driver.protocol_demo`).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple

from .bringup import split_launch_style
from .client.claim import claims_supported, holder
from .console import say
from .domain_reservation import hold_domain_id, keep_discovery_local
from .lifeline import exit_with_parent
from .protocol.errors import ConfigurationError
from .stop_flag import StopFlag

if TYPE_CHECKING:  # numpy is imported where the pictures are made
    import numpy as np

__all__ = ["main", "parse_arguments", "read_face_display"]

PROG = "cozmo-demo"
#: how long the demo waits for the face node's display/face image at the end (real robot)
FACE_TIMEOUT_S = 5.0
#: how long the log is read for what a process that exited said (a name guard's refusal
#: stops the run) before the demo goes on without it, s
EXIT_SAID_WAIT_S = 1.0
#: bring-up arguments the demo takes in either form (robot_ip:=... or --robot-ip ...)
_PASSED = ("robot_ip", "robot_port", "namespace", "config")
#: on the simulator, the most the odometry may be off the ground truth at the end
POSE_TOLERANCE_MM = 5.0
POSE_TOLERANCE_DEG = 2.0
#: the ROS domain a demo runs in when ROS_DOMAIN_ID is not set: ROS 2's own default
DEFAULT_DOMAIN = 0
#: the ROS domains a demo may take when ROS_DOMAIN_ID is not set and DEFAULT_DOMAIN is held
FREE_DOMAINS = range(1, 101)
#: ament's domain_coordinator: a domain is reserved by binding 127.0.0.1:(base + id),
#: TCP and UDP (the test suite reserves its domains so)


def _seed(text: str) -> int:
    """``--seed``: cozmo-sim's own type (a whole number, 0 or more), its refusal a usage
    error (status 2); imported when a seed is given (the simulator imports numpy)."""
    from .sim.cli import _seed as sim_seed

    return sim_seed(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Bring up a Cozmo and the ROS 2 driver, drive a short demonstration "
                    "through ROS topics, services and actions, print a live status and write "
                    "pictures into artifacts/. Without a robot address a simulated Cozmo runs "
                    "in this process. Bring-up arguments may also be given as name:=value "
                    f"({', '.join(_PASSED)}).")
    parser.add_argument("--robot-ip", "--robot_ip", dest="robot_ip", default=None,
                        help="a real robot's address (join its Wi-Fi first; it is at "
                             "172.31.1.1). Default: the built-in simulator")
    parser.add_argument("--robot-port", "--robot_port", dest="robot_port", default=None,
                        help="a real robot's UDP port, with --robot-ip (default: the config "
                             "file's, 5551)")
    parser.add_argument("--namespace", default=None, help="ROS namespace of the robot's nodes")
    parser.add_argument("--config", default=None, help="the driver's parameter file")
    parser.add_argument("--artifacts", default="artifacts", metavar="DIR",
                        help="where to write the pictures and logs (default: ./artifacts)")
    parser.add_argument("--duration", type=float, default=90.0, metavar="SECONDS",
                        help="upper bound of the whole run (default 90; it takes about 30)")
    parser.add_argument("--connect-timeout", type=float, default=20.0, metavar="SECONDS",
                        help="how long the robot may take to answer once the driver runs "
                             "(default 20)")
    parser.add_argument("--seed", type=_seed, default=1,
                        help="simulator random seed: a whole number, 0 or more (default 1)")
    parser.add_argument("--grey", action="store_true",
                        help="grey camera images (default: colour)")
    parser.add_argument("--protocol-only", action="store_true",
                        help="run the demo of the raw protocol exchange instead, without ROS "
                             "(cozmo-protocol-demo; see its --help)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The options; ``name:=value`` tokens of :data:`_PASSED` count as ``--name value``."""
    parser = _parser()
    launch, rest = split_launch_style(parser, argv, list(_PASSED))
    args = parser.parse_args(rest)
    for name, value in launch.items():
        if getattr(args, name) is not None:
            parser.error(f"{name} given twice")
        setattr(args, name, value)
    if not (args.duration > 0 and math.isfinite(args.duration)):
        parser.error("--duration must be a positive number of seconds")
    if not (args.connect_timeout > 0 and math.isfinite(args.connect_timeout)):
        parser.error("--connect-timeout must be a positive number of seconds")
    if args.robot_ip is not None and not args.robot_ip.strip():
        parser.error("robot_ip is empty")
    if args.robot_port is not None and args.robot_ip is None:
        from .protocol_demo import PORT_WITHOUT_IP  # the protocol demo refuses it so too

        parser.error(PORT_WITHOUT_IP)
    return args


def driver_robot_address(bringup_args) -> str:
    """``ip:port`` of the real robot the driver of the bring-up ``bringup_args`` drives, as
    the driver names it in its link report on /diagnostics (by which the demo knows its own
    driver): the port parsed (``robot_port:=05551`` is 5551), or where none was given, the
    one the config file gives the driver (its ``cozmo_driver`` key under the namespace, or
    the section copied to it), else 5551."""
    from . import bringup_plan as plan

    port = bringup_args.robot_port
    if port is None:
        port = plan.driver_file_value(bringup_args, "robot_port", 5551)
    return f"{bringup_args.robot_ip}:{port}"


class Refused(ConfigurationError):
    """The demo cannot run now (another demo holds what it needs, or ROS_DOMAIN_ID is not
    a domain id): exit status 2."""


def _holder(name: bytes) -> str:
    """Who listens on the abstract socket ``name``: "process N (command line)"."""
    pid, cmdline = holder(name)
    if pid is None:
        return "another process"
    return f"process {pid}" + (f" ({cmdline})" if cmdline else "")


class Holdings:
    """What this run holds on the machine, released by :meth:`release` (and by the kernel
    when the process ends, however it ends): names (listening sockets in Linux's abstract
    namespace, as :mod:`cozmo_driver.client.claim` holds a robot) and reservation ports."""

    def __init__(self) -> None:
        self.sockets: List[socket.socket] = []

    def hold(self, name: str) -> Tuple[Optional[socket.socket], str]:
        """(the socket now holding ``name``, "") or (None, who holds it). Where abstract
        sockets do not exist (not Linux) nothing is held and everything succeeds."""
        if not claims_supported():
            return None, ""
        address = f"\0cozmo-demo {name}".encode()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(address)
            sock.listen(8)
        except OSError:
            sock.close()
            return None, _holder(address)
        self.sockets.append(sock)
        return sock, ""

    def reserve_domain(self, domain: int) -> bool:
        """Reserve ROS domain ``domain`` by ament's convention (kept), or False if taken."""
        bound = hold_domain_id(domain)
        if bound is None:
            return False
        self.sockets.extend(bound)
        return True

    def drop(self, sock: Optional[socket.socket]) -> None:
        if sock is not None and sock in self.sockets:
            self.sockets.remove(sock)
            sock.close()

    def release(self) -> None:
        sockets, self.sockets = self.sockets, []
        for sock in sockets:
            sock.close()


def hold_artifacts(holdings: Holdings, directory: Path) -> None:
    """Hold the artefacts directory for this run; :class:`Refused` when another demo does."""
    path = str(directory.resolve())
    digest = hashlib.sha256(path.encode()).hexdigest()[:40]
    sock, who = holdings.hold(f"artifacts {digest}")
    if sock is None and who:
        raise Refused(f"another cozmo-demo writes into {directory} now: {who}. Wait for it to "
                      "end, or give this run a directory of its own (--artifacts DIR)")


def choose_domain(holdings: Holdings, environ=os.environ) -> Tuple[int, str]:
    """(the ROS domain of this run, a sentence saying how it was chosen), the domain held
    for this run; :class:`Refused` when ``ROS_DOMAIN_ID`` names a domain another demo
    holds, or no domain is free. Does not change ``environ``."""
    preset = (environ.get("ROS_DOMAIN_ID") or "").strip()
    if preset:
        try:
            domain = int(preset)
        except ValueError:
            domain = -1
        if not 0 <= domain <= 232:
            raise Refused(f"ROS_DOMAIN_ID={preset!r} is not a ROS domain id (0..232)")
        sock, who = holdings.hold(f"ros-domain {domain}")
        if sock is None and who:
            raise Refused(
                f"another cozmo-demo runs in ROS domain {domain} (ROS_DOMAIN_ID={preset} is set "
                f"here): {who}. Two demos in one domain would command each other's nodes. Wait "
                "for it to end, or run this one in another domain: export ROS_DOMAIN_ID=<another "
                "id>, or unset ROS_DOMAIN_ID and the demo takes a free one")
        return domain, "set here"
    default = DEFAULT_DOMAIN
    sock, who = holdings.hold(f"ros-domain {default}")
    if sock is not None or not who:
        return default, "the default"
    for domain in FREE_DOMAINS:
        if domain == default:
            continue
        mine, _ = holdings.hold(f"ros-domain {domain}")
        if mine is None:
            continue
        if not holdings.reserve_domain(domain):
            holdings.drop(mine)     # reserved by someone else (a test run, ament's tools)
            continue
        return domain, (f"of its own: ROS domain {default} is used by another cozmo-demo, {who}; "
                        f"to see this run's topics from another shell: "
                        f"export ROS_DOMAIN_ID={domain}")
    raise Refused(f"ROS domain {default} is used by another cozmo-demo ({who}) and no domain of "
                  f"{FREE_DOMAINS.start}..{FREE_DOMAINS.stop - 1} is free: set ROS_DOMAIN_ID")


class _SimTruth:
    """The in-process simulator as :class:`~cozmo_driver.ros.demo_node.GroundTruth`."""

    def __init__(self, sim) -> None:
        self.sim = sim

    def pose(self) -> Tuple[float, float, float]:
        return self.sim.true_pose()

    def sound_frames(self) -> int:
        return self.sim.counters()["audio_sound"]

    def animations_ended(self) -> int:
        robot = self.sim.robot
        return self.sim.call(lambda: robot.stats.sent["AnimationEnded"])


def _tenths(value: float) -> float:
    """Rounded to 0.1, without a negative zero."""
    return round(value, 1) + 0.0


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


def _log_problems(path: Path, lines: int = 5) -> str:
    """The last ``lines`` ``[WARN]``, ``[ERROR]`` and ``[FATAL]`` lines of a log, indented."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    problems = [line for line in text if any(f"[{level}]" in line
                                             for level in ("WARN", "ERROR", "FATAL"))]
    return "\n".join("    " + line for line in problems[-lines:])


def _last_error(path: Path, node: Optional[str] = None) -> str:
    """What node ``node`` (any node if None) said last about an error in the log: its last
    ``[ERROR]`` or ``[FATAL]`` line, or a line saying ``refusing to run``, without the
    stamp; "" if none."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    # "[ERROR] [1795436964.09] [robot1.cozmo_driver]: text", or "cozmo_driver: text"
    mine = re.compile(rf"\[(?:[\w.]*\.)?{re.escape(node)}\]|^{re.escape(node)}:") if node else None
    for line in reversed(lines):
        if not ("[ERROR]" in line or "[FATAL]" in line or "refusing to run" in line):
            continue
        if mine is not None and not mine.search(line):
            continue
        return re.sub(r"^\[(ERROR|FATAL)\] \[[\d.]+\] \[([^\]]*)\]: ", r"\2: ", line).strip()
    return ""


def read_face_display(namespace: str, timeout: float,
                      stopped: Callable[[], bool] = lambda: False) -> Optional["np.ndarray"]:
    """The face the face node shows now, as the robot's screen shows it: its latest
    ``display/face`` image (latched: a subscriber that comes late still gets it), converted
    by :func:`~cozmo_driver.demo_artifacts.face_display_of_image` to the ``(32, 128)``
    protocol image the driver sends, i.e. what a simulator's framebuffer would hold. None
    when no image came within ``timeout`` seconds (or before ``stopped()``), or the driver
    would refuse it."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy
    from sensor_msgs.msg import Image

    from .demo_artifacts import face_display_of_image

    ns = namespace.strip("/")
    topic = f"/{ns}/display/face" if ns else "/display/face"
    latched = QoSProfile(depth=1, reliability=QoSReliabilityPolicy.RELIABLE,
                         durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
    received: List[Image] = []
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    try:
        node = rclpy.create_node("cozmo_demo_face", context=context)
        executor = SingleThreadedExecutor(context=context)
        try:
            executor.add_node(node)
            node.create_subscription(Image, topic, received.append, latched)
            deadline = time.monotonic() + timeout
            while not received and time.monotonic() < deadline and not stopped():
                executor.spin_once(timeout_sec=0.05)
        finally:
            executor.shutdown(1.0)
            node.destroy_node()
    finally:
        context.try_shutdown()
    if not received:
        return None
    msg = received[-1]
    try:
        return face_display_of_image(msg.width, msg.height, msg.encoding, msg.step,
                                     msg.is_bigendian, msg.data)
    except ValueError:
        return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    if argv is None:  # the command: end with a `ros2 run` that started it (lifeline)
        exit_with_parent()
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--protocol-only" in argv:
        from . import protocol_demo

        argv.remove("--protocol-only")
        return protocol_demo.main(argv, prog=f"{PROG} --protocol-only")
    args = parse_arguments(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    # A demo keeps its ROS traffic on this machine unless told otherwise.
    keep_discovery_local(os.environ, force=False)
    return _Demo(args).run()


class _Demo:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.t0 = time.monotonic()
        # SIGINT or SIGTERM: stop (the robot first, then every process); the exit status
        # will be 128 + the signal's number, as a shell reports a program it interrupted.
        # The handler takes no lock (see StopFlag).
        self.stop = StopFlag()
        self.sim = None
        self.bringup = None
        self.log_file = None
        self.artifacts = Path(args.artifacts)
        self.written: List[Tuple[Path, str]] = []
        self.failure = ""
        self.namespace = ""
        self.reported_exits: set = set()
        self.exits_seen: dict = {}  # pid: when its exit was first seen (_processes_alive)
        self.process_failures: List[str] = []   # nodes (not required) that exited meanwhile
        self.holdings = Holdings()
        self.domain_changed = False

    def say(self, text: str) -> None:
        """Print a line; an output that is gone (the terminal closed: SIGHUP, then every
        write fails) drops it, and the demo goes on stopping the robot and the stack."""
        say(text)

    def fail(self, message: str, code: int) -> int:
        """Keep the failure to print last, once every process has stopped."""
        self.failure = f"\n{PROG}: FAILED: {message}"
        return code

    # --- the run

    def run(self) -> int:
        try:
            import rclpy  # noqa: F401 - only to say clearly what is missing
            from .ros import demo_node  # noqa: F401
        except ImportError as exc:
            self.say(f"{PROG}: FAILED: ROS 2 is not available here ({exc}). Run ./dev demo, "
                     "which sets it up, or source a ROS 2 install and build this workspace; the "
                     "demo without ROS is `cozmo-demo --protocol-only`.")
            self.stop.close()
            return 2
        restore_handlers = self.stop.install()
        try:
            return self._run()
        finally:
            self._shutdown()
            self.holdings.release()
            if self.domain_changed:
                os.environ.pop("ROS_DOMAIN_ID", None)
            restore_handlers()
            self.stop.close()
            if self.failure:
                self.say(self.failure)

    @property
    def signum(self) -> Optional[int]:
        """The signal that stopped the demo, None if none did."""
        return self.stop.signum

    def _prepare(self) -> None:
        """Hold the artefacts directory and choose (and hold) the ROS domain;
        :class:`Refused` when another demo holds either. An earlier run's files are removed
        later (:meth:`_remove_earlier`), once the arguments were found good."""
        hold_artifacts(self.holdings, self.artifacts)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        domain, how = choose_domain(self.holdings)
        if not (os.environ.get("ROS_DOMAIN_ID") or "").strip() and domain != 0:
            os.environ["ROS_DOMAIN_ID"] = str(domain)   # this process and the stack's
            self.domain_changed = True
        discovery = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") or \
            f"ROS_LOCALHOST_ONLY={os.environ.get('ROS_LOCALHOST_ONLY', '')}"  # (the user's, kept)
        self.say(f"{PROG}: ROS_DOMAIN_ID={domain} ({how}), discovery {discovery}")

    def _remove_earlier(self) -> None:
        """Remove an earlier run's files from the artefacts directory, saying so: this run
        is going to write its own (a refused run leaves them)."""
        from .demo_artifacts import remove_earlier_artefacts

        removed, kept = remove_earlier_artefacts(self.artifacts)
        if removed:
            self.say(f"{PROG}: removed the artefacts of an earlier run from {self.artifacts}: "
                     f"{', '.join(removed)}")
        for name, why in kept:
            self.say(f"{PROG}: {self.artifacts / name} is from an earlier run (stale): it "
                     f"could not be removed ({why})")

    def _run(self) -> int:
        from . import bringup_plan as plan
        from .bringup import Bringup
        from .ros.demo_node import DemoAbort, Demonstration, DemoOptions

        args = self.args
        try:
            self._prepare()
        except Refused as exc:
            return self.fail(str(exc), 2)
        except OSError as exc:
            return self.fail(f"cannot write into {self.artifacts}: {exc}", 2)
        values = {"enable_face": "true"}
        for name in ("robot_port", "namespace", "config"):
            if getattr(args, name) is not None:
                values[name] = getattr(args, name)
        truth = None
        if args.robot_ip is None:
            from .sim import SimServer

            self.sim = SimServer(host="127.0.0.1", port=0, seed=args.seed).start()
            host, port = self.sim.address
            values.update(use_sim="true", start_sim="false", sim_port=str(port))
            address = f"{host}:{port}"
            self.say(f"{PROG}: simulated Cozmo in this process on udp://{address} "
                     f"(seed {args.seed})")
            truth = _SimTruth(self.sim)
        else:
            values["robot_ip"] = args.robot_ip.strip()
        try:
            bringup_args = plan.resolve_arguments(values)
            entries = plan.make_plan(bringup_args, warn=lambda text: self.say(f"{PROG}: warning: {text}"))
            if truth is None:
                address = driver_robot_address(bringup_args)
            # the driver's cmd_vel type (a Twist would not reach a driver that takes
            # TwistStamped, and the robot would not move)
            stamped = bool(plan.driver_file_value(bringup_args, "cmd_vel_stamped", False))
        except plan.PlanError as exc:
            return self.fail(str(exc), 2)
        if truth is None:
            self.say(f"{PROG}: a real Cozmo at {address}")
        if stamped:
            self.say(f"{PROG}: cmd_vel as geometry_msgs/TwistStamped (cmd_vel_stamped is true "
                     f"for the driver in {bringup_args.config})")
        self.namespace = bringup_args.namespace
        self._remove_earlier()
        log_path = self.artifacts / "bringup.log"
        try:
            self.log_file = open(log_path, "wb")
        except OSError as exc:
            return self.fail(f"cannot write into {self.artifacts}: {exc}", 2)
        self.written.append((log_path, "the output of the driver and the other nodes"))
        self.bringup = Bringup(entries, say=lambda text: self.say(f"{PROG}: {text}"),
                               output=self.log_file)
        launch_text = " ".join(f"{k}:={v}" for k, v in values.items())
        self.say(f"{PROG}: bring-up plan ({launch_text}); their output goes to {log_path}")
        try:
            self.bringup.start()
        except (plan.PlanError, OSError) as exc:
            return self.fail(f"cannot start the ROS stack: {exc}", 2)
        face = [c for c in self.bringup.children if c.entry.name == "face"]

        from .demo_artifacts import write_chirp_wav

        wav = self.artifacts / "sound.wav"
        try:
            write_chirp_wav(wav)
        except OSError as exc:
            return self.fail(f"cannot write into {self.artifacts}: {exc}", 2)
        options = DemoOptions(
            namespace=bringup_args.namespace, color=not args.grey,
            connect_timeout_s=args.connect_timeout, deadline=self.t0 + args.duration,
            sound=wav, robot_address=address, cmd_vel_stamped=stamped)
        demo = Demonstration(options, self.say, ground_truth=truth,
                             processes_alive=self._processes_alive, stop=self.stop,
                             face_node_running=lambda: any(c.process.poll() is None
                                                           for c in face))
        demo.t0 = self.t0
        try:
            result = demo.run()
        except DemoAbort as exc:
            if not demo.result.sound_sent:
                wav.unlink(missing_ok=True)     # nothing played it: not an artefact
            if exc.code == 130:
                name = signal.Signals(self.signum or signal.SIGINT).name
                self.say(f"\n{PROG}: interrupted ({name}): stopping the robot and every process")
                driver = self._driver_name()
                self._shutdown()   # then the driver's log says whether its stop reached the robot
                if not demo.connected_once:     # the demo commanded nothing: nothing to stop
                    self.failure = (f"{PROG}: interrupted before the robot was driven; every "
                                    "process has exited")
                else:
                    self.failure = f"{PROG}: interrupted; {self._ending(self._stop_known(driver))}"
                return 128 + (self.signum or signal.SIGINT)
            message = str(exc)
            tail = _log_tail(log_path)
            if tail:
                message += f"\n  last lines of {log_path}:\n{tail}"
            return self.fail(message, exc.code)
        if result.sound_sent:
            self.written.append((wav, "the sound sent to play_audio"))
        else:
            wav.unlink(missing_ok=True)
        return self._report(result, bool(truth))

    def _robot_face(self) -> Optional["np.ndarray"]:
        """A real robot's face, from the face node (its screen cannot be read back); None
        without a running face node, or once a signal asked the demo to stop (not waited
        for then)."""
        running = self.bringup is not None and any(
            child.entry.name == "face" and child.process.poll() is None
            for child in self.bringup.children)
        if not running or self.stop.is_set():
            return None
        return read_face_display(self.namespace, FACE_TIMEOUT_S, stopped=self.stop.is_set)

    def _processes_alive(self) -> Optional[str]:
        if self.bringup is None:
            return None
        from .ros.name_guard import DUPLICATE_MARK
        for child in self.bringup.children:
            code = child.process.poll()
            if code is None:
                continue
            pid = child.process.pid
            if pid in self.reported_exits:
                continue
            said = _last_error(self.artifacts / "bringup.log", child.entry.node_name)
            # a node's name guard refusing (another stack of these names) stops the run as
            # the driver's would: the demo names the other stack (demo_node._check)
            if child.entry.required or DUPLICATE_MARK in said:
                return (f"{child.entry.executable} exited with status {code}"
                        + (f", saying \"{said}\"" if said else "")
                        + f" (its output is in {self.artifacts / 'bringup.log'})")
            # what it said may reach the log just after its exit: looked for a while longer
            first_seen = self.exits_seen.setdefault(pid, time.monotonic())
            if time.monotonic() - first_seen >= EXIT_SAID_WAIT_S:
                self.reported_exits.add(pid)
                self.process_failures.append(
                    f"{child.entry.name}: {child.label} exited with status {code} during the run")
                self.say(f"{PROG}: {child.label} exited with status {code} (its output is in "
                         f"{self.artifacts / 'bringup.log'}); going on without it")
        if self.sim is not None and not self.sim.running:
            return "the simulator stopped"
        return None

    def _shutdown(self) -> None:
        if self.bringup is not None:
            self.bringup.stop()
            self.bringup.remove_parameter_files()
            self.bringup = None
        if self.sim is not None:
            self.sim.stop()
            self.sim = None
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None

    # --- the results

    def _report(self, result, simulated: bool) -> int:
        from .demo_artifacts import (align_poses, write_camera_png, write_face_png,
                                     write_trajectory_png)

        # everything stopped first: the numbers and pictures below are final
        if self.sim is not None:
            framebuffer, face_source = self.sim.framebuffer(), "as the simulated robot shows it"
        else:
            framebuffer, face_source = self._robot_face(), "sent to the robot (display/face)"
        driver = self._driver_name()
        self._shutdown()
        ending = self._ending(self._stop_known(driver))
        say = self.say
        say("")
        failures = list(result.failures) + self.process_failures
        odometry_mm = [(x * 1e3, y * 1e3, yaw) for _, x, y, yaw in result.odometry]
        truth_mm = None
        error_text = ""
        if (simulated and result.truth and result.truth_at_start and result.odom_at_start
                and result.final_truth is not None and result.final_odom is not None):
            start = result.odom_at_start
            odom0 = (start[0] * 1e3, start[1] * 1e3, start[2])
            truth_mm = align_poses([p[1:] for p in result.truth], result.truth_at_start, odom0)
            final_odom = result.final_odom
            final_truth = align_poses([result.final_truth], result.truth_at_start, odom0)[0]
            fx, fy = final_odom[0] * 1e3, final_odom[1] * 1e3
            tx, ty, tyaw = final_truth
            say(f"pose at the end: odometry x {_tenths(fx):.1f} mm, y {_tenths(fy):.1f} mm, yaw "
                f"{_tenths(math.degrees(final_odom[2])):.1f} deg; simulator ground truth x "
                f"{_tenths(tx):.1f} mm, y {_tenths(ty):.1f} mm, yaw "
                f"{_tenths(math.degrees(tyaw)):.1f} deg")
            error = math.hypot(fx - tx, fy - ty)
            yaw_error = math.degrees(math.atan2(math.sin(final_odom[2] - tyaw),
                                                math.cos(final_odom[2] - tyaw)))
            error_text = f"{error:.1f} mm, {round(yaw_error, 2) + 0.0:+.2f} deg"
            say(f"pose error at the end (odometry - ground truth): {error_text}")
            if error > POSE_TOLERANCE_MM or abs(yaw_error) > POSE_TOLERANCE_DEG:
                down = (f"; the link was down {result.link_down_s:.1f} s during the run"
                        if result.link_down_s > 0.05 else "")
                failures.append(f"pose: the odometry ends {error_text} off the simulator's "
                                f"ground truth (at most {POSE_TOLERANCE_MM:g} mm, "
                                f"{POSE_TOLERANCE_DEG:g} deg){down}")
        elif result.final_odom is not None:
            fo = result.final_odom
            say(f"pose at the end: odometry x {_tenths(fo[0] * 1e3):.1f} mm, y "
                f"{_tenths(fo[1] * 1e3):.1f} mm, yaw {_tenths(math.degrees(fo[2])):.1f} deg"
                + (" (a real robot: no ground truth)" if not simulated else ""))
        animation_line = f"animation: {result.animation_how or 'not played'}"
        if result.animations_ended is not None:
            animation_line += (f"; the simulated robot reported {result.animations_ended} "
                               "animation ended (AnimationEnded)")
        say(animation_line)
        say(f"face: {result.face_how or 'not shown'}")
        sound_line = f"sound: {result.sound_how or 'not played'}"
        if simulated and result.sound_played:
            sound_line += f"; the simulated speaker played {result.sound_frames} frames with sound"
            if result.sound_frames <= 0:
                failures.append("sound: the simulated speaker played no frame with sound")
        say(sound_line)

        def written(path, write):
            """(True, what ``write()`` returned), or (False, None) with a failure that names the
            file (a full disk, say): the report goes on."""
            try:
                return True, write()
            except OSError as exc:
                failures.append(f"artefacts: cannot write {path}: {exc}")
                return False, None

        camera_written = False
        if result.camera is not None:
            path = self.artifacts / "camera.png"
            camera_written, size = written(path, lambda: write_camera_png(result.camera, path))
        if camera_written:
            w, h = size
            kind = "colour" if result.camera.ndim == 3 else "grey"
            count = result.camera_frames
            frames = (f"; {count} frame{'' if count == 1 else 's'} since the camera was turned "
                      "on" if result.camera_requested else "")
            self.written.append((path, f"camera snapshot at the end, {w}x{h} {kind} "
                                       f"(camera/image_raw, {result.camera_encoding}{frames})"))
        elif result.camera is None:
            say("camera: no image arrived on camera/image_raw (no camera.png)")
        if framebuffer is not None:
            path = self.artifacts / "face.png"
            face_written, lit = written(path, lambda: write_face_png(framebuffer, path))
            if face_written:
                self.written.append((path, f"the face display {face_source}, "
                                           f"128x64 x4, {lit} pixels lit"))
            if simulated and result.face_shown and lit == 0:
                failures.append("face: the simulated robot's display stayed dark")
        elif self.stop.is_set() and not simulated:
            say("face display: not read, the demo was interrupted (no face.png)")
        else:
            say("face display: no display/face image from the face node (no face.png)")
        if odometry_mm:
            path = self.artifacts / "trajectory.png"
            title = ("Driven path: odometry vs simulator ground truth" if truth_mm
                     else "Driven path: odometry")
            note = f"odometry - ground truth at the end: {error_text}" if error_text else ""
            if written(path, lambda: write_trajectory_png(path, odometry_mm, truth_mm, title=title,
                                                          note=note))[0]:
                self.written.append((path, "the driven square: " + (
                    "odometry (blue) over the simulator's ground truth (orange)" if truth_mm
                    else "odometry")))
        say("\nartefacts:")
        width = max((len(str(p)) for p, _ in self.written), default=0)
        for path, what in sorted(self.written, key=lambda item: str(item[0])):
            say(f"  {str(path):<{width}}  {what}")
        elapsed = time.monotonic() - self.t0
        signum = self.signum    # a signal while the demo closed: 128 + its number, as before
        if not failures and signum is None:
            say(f"\n{PROG}: done in {elapsed:.0f} s; {ending}.")
            return 0
        if failures:
            self._say_failures(failures, elapsed, result.aborted, ending)
        if signum is not None:
            say(f"\n{PROG}: interrupted ({signal.Signals(signum).name}) while it closed, after "
                f"{elapsed:.0f} s; {ending}.")
            return 128 + signum
        return 1

    def _driver_name(self) -> str:
        """The driver's node name (as its log lines carry it), while the stack runs."""
        driver = next((child.entry.node_name for child in self.bringup.children
                       if child.entry.name == "driver"), None) if self.bringup else None
        return driver or "cozmo_driver"

    def _stop_known(self, driver: str) -> bool:
        """Whether the robot is known to be stopped: the driver (its node name ``driver``)
        logged, as it closed the link, that the robot acknowledged its stop. Not after a
        driver that died, nor with a robot lost at the end: the robot keeps its last motor
        command when its link ends (docs/driver.md)."""
        from .ros.driver_support import release_line

        _, stopped = release_line("ready", "disconnected")   # the line of an acknowledged stop
        try:
            lines = (self.artifacts / "bringup.log").read_text(errors="replace").splitlines()
        except OSError:
            return False
        mine = re.compile(rf"\[(?:[\w.]*\.)?{re.escape(driver)}\]")
        return any(stopped in line and mine.search(line) for line in lines)

    @staticmethod
    def _ending(stopped: bool) -> str:
        """How the run left the robot and the stack, for the last line."""
        if stopped:
            return "the robot is stopped and every process has exited"
        return ("every process has exited, but no stop is known to have reached the robot (the "
                "driver did not log that it stopped the motors; see the end of its log): it may "
                "still be moving; if it does, pick it up or switch it off")

    def _say_failures(self, failures: List[str], elapsed: float, aborted: str,
                      ending: str) -> None:
        """The failed steps, listed, with the log's last lines (a run stopped before its end,
        a process that exited) or its last warnings and errors."""
        say = self.say
        count = f"{len(failures)} step{'s' if len(failures) > 1 else ''} failed"
        say(f"\n{PROG}: FAILED after {elapsed:.0f} s ({count}); {ending}:")
        for failure in failures:
            say(f"  - {failure}")
        log_path = self.artifacts / "bringup.log"
        if aborted or self.process_failures:
            tail = _log_tail(log_path)
            if tail:
                say(f"  last lines of {log_path}:\n{tail}")
        else:
            said = _log_problems(log_path)
            if said:
                say(f"  the last warnings and errors in {log_path}:\n{said}")


if __name__ == "__main__":
    sys.exit(main())
