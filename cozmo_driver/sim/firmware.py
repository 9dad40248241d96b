"""What the parts of the simulated Cozmo share: configuration, clock, outbox, timers.

:class:`Firmware` is the hub every part of :class:`~cozmo_driver.sim.model.RobotModel`
is built on: the :class:`ModelConfig`, one seeded random generator (so the same
inputs give the same outputs), the queue of robot->engine messages
(:meth:`Firmware.emit`), one-shot timers (:meth:`Firmware.at`), the robot clock
(zeroed at boot, set by SyncTime) and the state of the link to the engine. It
never reads a clock: every ``now`` comes from the caller.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

__all__ = [
    "Firmware",
    "ModelConfig",
    "finite",
    "amount",
    "FIRMWARE_VERSION",
    "AUDIO_FRAMES_PER_SECOND",
    "AUDIO_SAMPLES_PER_FRAME",
]

FIRMWARE_VERSION = 2381
AUDIO_FRAMES_PER_SECOND = 30
AUDIO_SAMPLES_PER_FRAME = 744


def finite(value: Any, default: float = 0.0, limit: float = 1e6) -> float:
    """A field value as a finite float within +-limit (NaN and infinities become ``default``)."""
    x = float(value)
    if not math.isfinite(x):
        return default
    return max(-limit, min(limit, x))


def amount(caller: str, name: str, value: Any, unit: str = "") -> float:
    """A scripting call's ``value`` as a float, finite and >= 0; else ValueError naming it
    ("fall: duration must be a finite number >= 0 (s), got nan"), raised before the call
    changes anything."""
    try:
        number = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number >= 0):
        raise ValueError(f"{caller}: {name} must be a finite number >= 0{unit}, got {value!r}")
    return number


@dataclass
class ModelConfig:
    """Tunables of the model; times in seconds."""

    seed: int = 0
    #: world pose (x mm, y mm, yaw rad) at boot; None: the table centre
    start_pose: Optional[Tuple[float, float, float]] = None
    start_on_charger: bool = False
    physics_dt: float = 0.01
    state_period: float = 0.030
    anim_period: float = 1.0 / AUDIO_FRAMES_PER_SECOND
    object_available_period: float = 1.0
    object_accel_period: float = 0.030
    power_level_period: float = 10.0
    anim_buffer_full_bytes: int = 12_000
    anim_buffer_max_bytes: int = 48_000
    #: ground-truth audio kept, in samples (oldest dropped first)
    audio_history_samples: int = AUDIO_SAMPLES_PER_FRAME * AUDIO_FRAMES_PER_SECOND * 60
    display_history: int = 64
    command_log: int = 20_000
    battery_soc: float = 0.8
    #: state-of-charge change per second
    battery_drain_idle: float = 1.0 / 7200.0
    battery_drain_moving: float = 1.0 / 2400.0
    battery_charge: float = 1.0 / 1800.0
    battery_sag_v: float = 0.04
    noise: bool = True
    gyro_noise_radps: float = 0.002
    accel_noise_mmps2: float = 15.0
    battery_noise_v: float = 0.001
    cliff_noise_raw: float = 4.0
    serial_number_head: int = 0x45A1C0DE
    body_serial_number: int = 0x0B0D1E55
    body_hw_version: int = 5
    body_color: int = 2  # BodyColor.WHITE_v15
    firmware_build: str = "DEVELOPMENT"  # as real signatures say (DEVELOPMENT or FACTORY)
    #: the cubes' and charger's radio links (and object ids) outlast a new engine
    #: connection or a lost one; the protocol notes do not say which a robot does, and
    #: the driver must work with either (False: every link is dropped)
    keep_object_links: bool = False
    #: the head and lift calibrate at each connection's SyncTime, as a robot's do (False:
    #: they start calibrated, for tests of something else that want no wait)
    calibrate_at_connection: bool = True
    #: RobotState's lift field (``lift_height_mm``) carries the lift's angle in radians, as
    #: Anki's robot firmware fills it (False: its height in mm, as the protocol notes read it)
    lift_field_is_angle: bool = True
    #: every motor stops when a link ends and when a new one begins (False: the robot keeps
    #: its last command, as when a stop was lost with the link: the protocol notes do not say
    #: what a robot does, and the driver stops it first thing at every connection, see
    #: docs/driver.md)
    stop_motors_on_link_end: bool = False

    def __post_init__(self) -> None:
        for name in ("physics_dt", "state_period", "anim_period", "object_available_period",
                     "object_accel_period", "power_level_period"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")



class Firmware:
    """The services the model's parts share; times in seconds on the caller's clock."""

    def __init__(self, config: ModelConfig, now: float) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.out: List[Any] = []
        self.timers: List[Tuple[float, int, Callable[[float], None]]] = []
        self._timer_seq = itertools.count()
        self.reset_link()
        self.boot(now)

    def boot(self, now: float) -> None:
        """Power-up: the robot clock restarts at zero."""
        self.t = now                 # how far the model has run
        self.boot_time = now
        self._sync_at = now
        self._sync_ts = 0

    def reset_link(self) -> None:
        """No engine connected: nothing enabled, nothing streaming."""
        self.connected = False
        self.enabled = False
        self.body_info_sent = False
        self.streaming = False
        self.connection = getattr(self, "connection", 0) + 1  # which engine link this is

    def emit(self, message: Any) -> None:
        """Queue one robot->engine message."""
        self.out.append(message)

    def pop_outgoing(self) -> List[Any]:
        out = self.out
        self.out = []
        return out

    def at(self, when: float, fn: Callable[[float], None]) -> None:
        """Call ``fn(when)`` once the model has run up to ``when``: a finite time (else
        ValueError: a NaN timer would never come due and hold back every later one)."""
        if not math.isfinite(when):
            raise ValueError(f"a timer at {when!r} s would never run, and no timer after it: a timer's "
                             "time must be a finite number (the call that set it must refuse such a value)")
        heapq.heappush(self.timers, (when, next(self._timer_seq), fn))

    def next_timer(self) -> Optional[float]:
        return self.timers[0][0] if self.timers else None

    def run_timer(self, now: float) -> None:
        """Pop the earliest timer and run it at ``now``."""
        _, _, fn = heapq.heappop(self.timers)
        fn(now)

    def sync_time(self, timestamp_ms: int, now: float) -> None:
        """SyncTime: the robot clock reads ``timestamp_ms`` at ``now``."""
        self._sync_at = now
        self._sync_ts = int(timestamp_ms)

    def timestamp_ms(self, now: float) -> int:
        """The robot clock (ms): zeroed at boot, set by SyncTime."""
        return int(self._sync_ts + (now - self._sync_at) * 1000.0) & 0xFFFFFFFF

    def signature(self) -> str:
        """The FirmwareSignature JSON."""
        return json.dumps({
            "version": FIRMWARE_VERSION,
            "git-rev": "5f1c7e2d9a4b3c6e8f0a1b2c3d4e5f6a7b8c9d0e",
            "date": "Mon Jan 22 16:40:11 2018",
            "time": 1516639211,
            "build": self.config.firmware_build,
        }, separators=(",", ":"))
