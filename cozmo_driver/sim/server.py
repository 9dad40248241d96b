"""The simulated Cozmo on a UDP port: :class:`SimServer`.

    with SimServer(port=0, seed=3) as sim:
        host, port = sim.address
        ...                       # point the driver (or pycozmo) at (host, port)
        sim.pick_up()
        assert sim.true_pose()[0] > 100.0

The robot (:class:`~cozmo_driver.sim.robot.SimulatedRobot`, behind an optional
:class:`~cozmo_driver.sim.robot.ImpairedEndpoint`) runs on the I/O thread of a
:class:`~cozmo_driver.transport.udp.UdpTransport` with the robot's peer policy:
the sender of a RESET becomes the client, when no other client holds the link
(``RobotConfig.link_policy``; "latest_reset": at once). Every scripting call and
every ground-truth read is marshalled onto that thread, so they are safe from
any thread. Camera frames are rendered and encoded on a
:class:`~cozmo_driver.sim.camera_worker.CameraWorker` the server starts and stops with
the transport, so that the I/O thread keeps the state stream's pace
(``RobotConfig.camera_render_thread=False``: on the I/O thread).

The server binds only to the address it is given and refuses any address that
is not loopback unless ``allow_non_loopback=True``: a simulator must not answer
a real network by accident.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..errors import ConfigurationError
from ..transport.memory import Impairment
from ..transport.udp import TransportStateError, UdpTransport, is_loopback, resolve_address
from .camera_worker import CameraWorker
from .robot import ImpairedEndpoint, RobotConfig, SimulatedRobot

__all__ = ["SimServer", "SimError", "NonLoopbackAddressError", "DEFAULT_PORT"]

logger = logging.getLogger("cozmo.sim")

DEFAULT_PORT = 5551
#: what an address the simulator cannot serve on is told (resolve_address's hint)
SIM_ADDRESS_HINT = ("the simulator serves a loopback address of this computer, such as 127.0.0.1 "
                    "(the default) or localhost")


class SimError(ConfigurationError):
    """The simulator was configured or used wrongly."""


class NonLoopbackAddressError(SimError):
    """The simulator was asked to bind a non-loopback address without permission."""


class SimServer:
    """A simulated robot serving UDP. See the module docstring.

    ``up``/``down`` impair datagrams from/to the client (seeded by ``seed``).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, seed: int = 0,
                 world: Any = None, config: Optional[RobotConfig] = None,
                 up: Optional[Impairment] = None, down: Optional[Impairment] = None,
                 allow_non_loopback: bool = False, name: str = "cozmo-sim") -> None:
        numeric_host, port = resolve_address(host, port, hint=SIM_ADDRESS_HINT)
        if not is_loopback(numeric_host) and not allow_non_loopback:
            raise NonLoopbackAddressError(
                f"refusing to serve on {host} ({numeric_host}): not a loopback address; "
                "pass allow_non_loopback=True (cozmo-sim --force-non-loopback) to do it anyway")
        self.host = numeric_host
        self.port = port
        self.name = name
        if config is None:
            config = RobotConfig(seed=seed)
        self.robot = SimulatedRobot(world, config, now=time.monotonic(), name=name)
        self.endpoint: Any = self.robot
        if (up is not None and up != Impairment()) or (down is not None and down != Impairment()):
            self.endpoint = ImpairedEndpoint(self.robot, up, down, seed=seed * 31 + 7)
        self._changed = threading.Condition()
        self.transport = UdpTransport(self.endpoint, local_addr=(self.host, port), peer_policy="reset",
                                      on_event=self._on_event, name=name)
        self._rate_mark: Optional[Tuple[float, Dict[str, int]]] = None
        self.camera_worker: Optional[CameraWorker] = None
        if config.camera_render_thread:
            self.camera_worker = CameraWorker(name, wake=self._frame_ready)
            self.robot.camera_worker = self.camera_worker

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "SimServer":
        if self.camera_worker is not None:
            self.camera_worker.start()
        try:
            self.transport.start()
        except BaseException:
            if self.camera_worker is not None:
                self.camera_worker.stop()
            raise
        logger.info("[%s] simulated Cozmo on udp://%s:%d", self.name, *self.address)
        return self

    def stop(self) -> None:
        try:
            self.transport.stop()
        finally:
            if self.camera_worker is not None:
                self.camera_worker.stop()

    def __enter__(self) -> "SimServer":
        return self.start() if not self.transport.running else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def address(self) -> Tuple[str, int]:
        """(host, port) the robot listens on (the real port when started with port 0)."""
        return self.transport.local_address

    @property
    def running(self) -> bool:
        return self.transport.running

    def _frame_ready(self) -> None:
        """(The camera worker's thread) a frame is done: the I/O thread sends it."""
        transport = self.transport
        try:
            transport.call_soon(lambda: self.robot.frame_ready(transport.clock()))
        except TransportStateError:  # stopping: the frame goes with it
            pass

    def _on_event(self, event: Any) -> None:
        with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------------ plumbing

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 5.0) -> Any:
        """Run ``fn(*args)`` on the I/O thread (the robot is not thread-safe)."""
        return self.transport.call(fn, *args, timeout=timeout)

    def _script(self, method: str, *args: Any, **kwargs: Any) -> Any:
        robot = self.robot
        return self.call(lambda: getattr(robot, method)(*args, now=time.monotonic(), **kwargs))

    def wait_until(self, predicate: Callable[["SimServer"], bool], timeout: float) -> bool:
        """Wait (bounded) until ``predicate(self)`` holds; re-checked on every robot event
        and at least every 50 ms. Returns whether it held."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate(self):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._changed:
                self._changed.wait(min(0.05, left))

    # ------------------------------------------------------------------ scripting

    def pick_up(self) -> None:
        self._script("pick_up")

    def put_down(self, pose: Optional[Tuple[float, float, float]] = None) -> None:
        self._script("put_down", pose=pose)

    def lay(self, side: str) -> None:
        """Set the robot down on its "back", "face", "left" or "right" side; put_down()
        stands it up."""
        self._script("lay", side=side)

    def fall(self, duration: float = 0.4, impact: float = 600.0) -> None:
        self._script("fall", duration=duration, impact=impact)

    def poke(self) -> None:
        self._script("poke")

    def press_button(self, duration: float = 0.2) -> None:
        self._script("press_button", duration=duration)

    def delocalize(self) -> None:
        self._script("delocalize")

    def set_on_charger(self, on: bool, move: bool = True) -> None:
        self._script("set_on_charger", on, move=move)

    def teleport(self, x: float, y: float, yaw: float) -> None:
        self._script("teleport", x=x, y=y, yaw=yaw)

    def hold_treads(self, held: bool = True) -> None:
        """Hold the robot where it stands (its treads stall, driven on; they measure 0) or let
        it go."""
        self._script("hold_treads", held=held)

    def tap_cube(self, n: int, taps: int = 1, intensity: int = 79, jolt: bool = False) -> bool:
        """Cube ``n`` (1..3) tapped (tap_pos - tap_neg = ``intensity``); ``jolt``: the tap
        also shakes it (a move and a stop)."""
        return self._script("tap_cube", n, taps=taps, intensity=intensity, jolt=jolt)

    def move_cube(self, n: int) -> bool:
        return self._script("move_cube", n)

    def stop_cube(self, n: int) -> bool:
        return self._script("stop_cube", n)

    def set_cube_up_axis(self, n: int, axis: int) -> bool:
        return self._script("set_cube_up_axis", n, axis)

    def set_cube_battery(self, n: int, level: int) -> None:
        self._script("set_cube_battery", n, level)

    def set_object_in_range(self, n: int, in_range: bool) -> None:
        """Cube ``n`` (1..3; 0: the charger) leaves radio range (stops advertising, drops its
        connection) or comes back (advertises again)."""
        self._script("set_object_in_range", n, in_range)

    def reboot(self, downtime: float = 0.0) -> None:
        self._script("reboot", downtime=downtime)

    def close_link(self) -> bool:
        """The robot ends the link with Disconnect, as its firmware does when its queue of
        messages awaiting the client's acknowledgement is full. Whether a client was connected."""
        return self._script("close_link")

    def set_silent(self, silent: bool) -> None:
        self._script("set_silent", silent)

    def set_light(self, light: float) -> None:
        """The room's light: images scale with it (1 as drawn, 0.25 a dim room)."""
        self._script("set_light", light)

    def set_link_up(self, up: bool) -> None:
        self._script("set_link_up", up)

    def send_garbage(self, count: int = 1, kind: Optional[str] = None) -> List[bytes]:
        return self._script("send_garbage", count=count, kind=kind)

    # ------------------------------------------------------------------ ground truth

    def _model(self, fn: Callable[[Any], Any]) -> Any:
        robot = self.robot
        return self.call(lambda: fn(robot.model))

    def true_pose(self) -> Tuple[float, float, float]:
        """World pose (x mm, y mm, yaw rad)."""
        return self._model(lambda m: m.true_pose())

    def reported_pose(self) -> Tuple[float, float, float]:
        """The pose the robot reports (odometry in the engine's frame)."""
        return self._model(lambda m: m.reported_pose())

    def head_angle(self) -> float:
        return self._model(lambda m: m.head_angle)

    def lift_height(self) -> float:
        return self._model(lambda m: m.lift_height)

    def wheel_speeds(self) -> Tuple[float, float]:
        return self._model(lambda m: (m.wheels[0].speed, m.wheels[1].speed))

    def status(self) -> int:
        """RobotState status flags as they are now."""
        return self._model(lambda m: m.status())

    def battery_voltage(self) -> float:
        return self._model(lambda m: m.battery_voltage())

    def framebuffer(self) -> np.ndarray:
        """The face display, (32, 128) bool, as last drawn."""
        return self._model(lambda m: m.framebuffer.copy())

    def display_count(self) -> int:
        return self._model(lambda m: m.display_images_shown)

    def playback_enabled(self) -> bool:
        """Whether the robot took EnableAnimationState on this connection (after Enable; it then
        plays its animation stream and reports AnimationState)."""
        return self._model(lambda m: m.anim_state_enabled)

    def buffer_clears(self) -> int:
        """Times the robot cleared its animation stream because a frame did not start with
        an audio message (an engine that sends a tick's messages in the wrong order)."""
        return self._model(lambda m: m.buffer_clears)

    def starvations(self) -> int:
        """Times the robot's animation buffer ran down to its last frame while playing: a gap in
        sound and face, unless the stream had ended."""
        return self._model(lambda m: m.starvations)

    def unplayable(self) -> int:
        """Messages of the animation stream that came before EnableAnimationState was taken: not played."""
        return self._model(lambda m: m.unplayable)

    def audio_pcm(self) -> np.ndarray:
        """Every audio frame played (silence as zeros), int16 at 22 320 Hz."""
        return self._model(lambda m: m.audio_pcm())

    def audio_frames(self) -> int:
        return self._model(lambda m: m.audio_frames_played)

    def volume(self) -> int:
        return self._model(lambda m: m.volume)

    def lights(self) -> Dict[str, Any]:
        return self._model(lambda m: m.lights())

    def camera_settings(self) -> Any:
        return self._model(lambda m: asdict(m.camera))

    def object_ids(self) -> Dict[int, Optional[int]]:
        return self._model(lambda m: m.object_ids())

    def object_states(self) -> Dict[int, Dict[str, Any]]:
        """Per object (1..3 cubes, 0 charger): ids, range, lights, rotation, accel stream..."""
        return self._model(lambda m: m.object_states())

    def nv_store(self) -> Dict[int, bytes]:
        return self._model(lambda m: dict(m.nv_store))

    def commands(self) -> List[Tuple[float, Any]]:
        """Recent commands received as (time, message)."""
        return self._model(lambda m: m.commands())

    def command_counts(self) -> Dict[str, int]:
        return self._model(lambda m: dict(m.command_counts))

    def is_connected(self) -> bool:
        return self.call(lambda: self.robot.is_connected)

    def streaming(self) -> bool:
        """True once the client sent Enable and SyncTime (RobotState flows)."""
        return self._model(lambda m: m.connected and m.streaming)

    def peer(self) -> Optional[Tuple[str, int]]:
        return self.transport.peer

    def stats(self) -> Dict[str, Any]:
        """Counters: the robot front-end, its session, the socket, the impairments."""
        def snapshot() -> Dict[str, Any]:
            robot = self.robot
            out = {"robot": asdict(robot.stats), "session": asdict(robot.session.stats),
                   "transport": asdict(self.transport.stats)}
            if isinstance(self.endpoint, ImpairedEndpoint):
                ep = self.endpoint
                out["impairment"] = {"dropped_up": ep.dropped_up, "dropped_down": ep.dropped_down,
                                     "duplicated": ep.duplicated, "delayed": ep.delayed}
            return out
        return self.call(snapshot)

    def counters(self) -> Dict[str, int]:
        """Cumulative stream counters (for rates)."""
        def read() -> Dict[str, int]:
            robot, model = self.robot, self.robot.model
            return {"state": robot.stats.sent["RobotState"], "camera": robot.stats.images_sent,
                    "display": model.display_images_shown, "audio": model.audio_frames_played,
                    "audio_sound": model.audio_frames_with_sound,
                    "commands": sum(model.command_counts.values())}
        return self.call(read)

    def rates(self) -> Dict[str, float]:
        """Per-second rates of each stream since the previous call (zeros on the first)."""
        now = time.monotonic()
        counts = self.counters()
        mark = self._rate_mark
        self._rate_mark = (now, counts)
        if mark is None or now <= mark[0]:
            return {k: 0.0 for k in counts}
        dt = now - mark[0]
        return {k: (counts[k] - mark[1].get(k, 0)) / dt for k in counts}
