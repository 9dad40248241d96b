"""Light cubes, the charger and lights, without ROS: the object registry and the light
programmes. Pure (no rclpy, no clock: every input takes ``now``, seconds on any
monotonic origin).

Objects
-------
:class:`ObjectRegistry` follows what the robot says about its objects and decides
what to send it. Inputs: the robot's object messages (:meth:`~ObjectRegistry.on_message`:
ObjectAvailable, ObjectConnectionState, ObjectTapped, ObjectMoved,
ObjectStoppedMoving, ObjectUpAxisChanged, ObjectPowerLevel, ObjectAccel), the
robot's link (:meth:`~ObjectRegistry.on_robot_ready`, :meth:`~ObjectRegistry.on_robot_lost`),
requests (:meth:`~ObjectRegistry.request`, :meth:`~ObjectRegistry.set_lights`,
:meth:`~ObjectRegistry.set_accel_stream`) and time (:meth:`~ObjectRegistry.tick`).
Outputs, drained by the caller: protocol messages to send (:meth:`~ObjectRegistry.pop_messages`),
events (:meth:`~ObjectRegistry.pop_events`), accelerometer samples
(:meth:`~ObjectRegistry.pop_accel`), the answers to requests
(:meth:`~ObjectRegistry.pop_results`) and whether the list changed
(:meth:`~ObjectRegistry.take_changed`).

* **The list.** An object appears (APPEARED) with its first advertisement
  (ObjectAvailable) or connection, and leaves the list (DISAPPEARED) when it is
  neither connected nor being connected and has not been heard of for
  ``object_timeout``. A connected object stays listed: the robot reports its
  loss itself (ObjectConnectionState with ``connected`` false), and the robot
  does not advertise connected objects. At most :data:`_MAX_KNOWN` objects are kept: a new
  one while each is heard of within ``object_timeout`` is ignored (:func:`forget_one`).
* **Connections.** An object connects into one of the robot's 4 radio slots, which
  is its object id (:data:`RADIO_SLOTS`: ObjectConnect is Anki's SetPropSlot); the
  registry gives each the lowest slot free and empties its slot (factory id 0) to
  disconnect it, a connected one's lights turned off first (the cube keeps them otherwise).
  Object ids are per connection of the robot: a lost robot disconnects every object
  (DISCONNECTED).
  The robot keeps the slot of an object that drops (goes silent) and of one whose
  connection got no answer, and connects it by itself when it hears it again (Anki's body
  firmware: a slot's object is re-paired from its advertisement, and an object that holds a
  slot is not advertised): such an object is ``held``; other objects get its slot only
  when no other is free, and disconnecting it, shutdown and the robot's own reconnection
  empty it (and the slot of a connection under way when the robot was lost or the
  requests failed, :meth:`~ObjectRegistry.fail_pending`). A held object the robot connects
  again while another of its type, connected meanwhile by auto-connect once it had left the
  list, is connected: one of them is let go (:func:`surplus`). The
  registry's first connection to the robot empties every slot: an earlier driver, or this
  one before a cleanup while the robot was away, may have left objects in them.
  Auto-connect (``auto_connect_cubes``, ``auto_connect_charger``) keeps one
  object of each wanted type connected: the one it connected before if it is
  still listed, else the advertised one with the strongest signal. Objects
  are connected only once they have advertised since the robot's current
  connection, since their last disconnection and within ``object_timeout``. A connection request that gets no
  answer within ``connect_timeout`` (its value at the request) fails. A connection requested while a disconnection of
  the same object waits for its answer takes the robot's next "not connected" as that
  answer (DISCONNECTED on request), not as its own failure; so is a late answer to a
  disconnection whose request failed, on request or letting a :func:`surplus` object go
  (not a drop). After a failure or a drop the next attempt for that object waits
  ``reconnect_min`` doubling up to
  ``reconnect_max`` (a connection that lasted ``reconnect_max`` resets the
  back-off; lowered, either shortens a wait under way: :func:`retry_due`). An object
  connected by request is reconnected like the automatic ones; one disconnected by
  request is left alone by auto-connect until it is connected by request again. With its
  type's auto-connect turned off, an object auto-connect connected (not since by request)
  that drops is not held: its slot is emptied (at once, or at the next tick for one held
  already).
* **Restored on reconnection.** The last light programme of each object and its
  accelerometer stream are sent again when it connects again after a drop or
  after the robot's own reconnection; an object with no programme known (none set since
  the registry began) has its lights put out when it connects: a cube keeps its programme
  across a disconnection, and one an earlier driver left lit would show it for ever.
* **Events.** TAPPED (count, intensity = tap_pos - tap_neg), MOVED (once when a
  cube starts moving, with its acceleration), STOPPED_MOVING, UP_AXIS_CHANGED
  (when the axis differs; the robot reports it after each connection, and it is
  unknown while the object is not connected), CONNECTED, DISCONNECTED, APPEARED, DISAPPEARED.
  ObjectTapFiltered is counted, not published (ObjectTapped reports the same taps).
  With ``filter_object_events`` (the default) taps and moves pass :mod:`.tap_filter`
  as in Anki's engine: weak taps and the echoes of one shock are dropped, the strongest
  tap of a group is published :data:`~.tap_filter.TAP_GROUP_S` after its first
  (:meth:`~ObjectRegistry.release_taps`, at :attr:`~ObjectRegistry.taps_due_at`; its
  ``received`` is when the robot reported it; at once, before its DISCONNECTED, when a
  cube whose tap the group holds disconnects first), and moves a tap caused and the
  charger's moves are dropped.

Units. The cubes' accelerations (ObjectMoved, ObjectAccel) are the cube
accelerometer's raw counts, 64 to 1 g (Anki's firmware passes them on as the cube
sends them: "magnitude of 64 is approx 1g"), turned into m/s^2 here; the
protocol notes give no unit.
Battery levels are hundredths of a volt (Anki's body firmware), passed on as reported.

Lights
------
A :class:`Light` is one LED's programme in seconds and colours with channels
0..1, as in cozmo_interfaces/LightState. :func:`light_state` makes the robot's
LightState: colours in RGB555 (:func:`~cozmo_driver.driver.commands.rgb555`:
round(c x 31) per channel, bit 15 clear), periods rounded up to the LEDs' 30 ms frames
from whole milliseconds, as Anki's engine converts them ((ms + 29) / 30, on the robot, the
cubes and the charger). The offset is sent negated: Anki's body firmware starts a light at
frame offset + off frames of its cycle (Lights::update), so a positive frame count moves
it ahead, and LightState's offset delays it. With every period 0 (a steady colour) the
off colour sent is the on colour: the firmware holds a colour only when both are the same,
and two colours with no frame to show either would keep its light loop turning. A
period outside 0..7.65 s (255 frames) or an offset outside +-983 s (a signed
16-bit frame count) is clamped and a warning names the field (compared in whole
milliseconds: LightState's float32 7.65 s, 7.650000095, is not outside); a NaN or
infinite value, or a colour channel outside 0..1, raises :class:`CommandError`
naming the field, and nothing is sent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..protocol import messages as msgs
from .commands import CommandError, clamp, require_finite, rgb555
from .diagnostics import OK, WARN, DiagnosticReport
from .tap_filter import TapFilter

__all__ = [
    "ObjectType", "UpAxis", "ObjectEventType", "LED_FRAME_S", "MAX_PERIOD_S", "MAX_OFFSET_S",
    "CUBE_LEDS", "CHARGER_LEDS", "BACKPACK_LEDS", "object_name", "is_cube", "led_count",
    "Light", "OFF", "light_state", "range_problem", "light_range_problem", "object_light_states",
    "rotation_frames", "backpack_messages", "lights_off_messages", "known_away",
    "stop_accel_away", "find_connected", "surplus",
    "cube_light_messages", "ObjectSettings", "ObjectEntry", "ObjectEventRecord", "AccelSample",
    "RequestResult", "ObjectRegistry", "CUBE_ACCEL_COUNTS_PER_G", "CUBE_WHITE_BALANCE",
    "white_balanced",
    "MPS2_PER_COUNT",
]


class ObjectType:
    """cozmo_interfaces/ObjectInfo TYPE_* (the robot's ObjectType numbers)."""

    UNKNOWN = 0
    LIGHT_CUBE_1 = 1
    LIGHT_CUBE_2 = 2
    LIGHT_CUBE_3 = 3
    CHARGER = 13
    INVALID = -1  # the robot's answer for an object it does not know


CUBE_TYPES = (ObjectType.LIGHT_CUBE_1, ObjectType.LIGHT_CUBE_2, ObjectType.LIGHT_CUBE_3)


class UpAxis:
    """cozmo_interfaces/ObjectInfo UP_AXIS_* (the robot's UpAxis numbers)."""

    X_NEGATIVE = 0
    X_POSITIVE = 1
    Y_NEGATIVE = 2
    Y_POSITIVE = 3
    Z_NEGATIVE = 4
    Z_POSITIVE = 5
    UNKNOWN = 7


_AXIS_TEXT = {0: "-X", 1: "+X", 2: "-Y", 3: "+Y", 4: "-Z", 5: "+Z"}


class ObjectEventType:
    """cozmo_interfaces/ObjectEvent type constants."""

    UNKNOWN = 0
    CONNECTED = 1
    DISCONNECTED = 2
    TAPPED = 3
    MOVED = 4
    STOPPED_MOVING = 5
    UP_AXIS_CHANGED = 6
    APPEARED = 7
    DISAPPEARED = 8


_EVENT_NAMES = {v: k for k, v in vars(ObjectEventType).items() if not k.startswith("_")}

#: an LED frame, s: the lights count 30 ms frames (not 1/30 s)
LED_FRAME_S = 0.030
MAX_PERIOD_S = round(255 * LED_FRAME_S, 6)     # 7.65 s: a u8 frame count
MAX_OFFSET_S = round(32767 * LED_FRAME_S, 6)   # 983.01 s: an i16 frame count
CUBE_LEDS = 4
CHARGER_LEDS = 3
#: the robot's radio slots for objects (Anki's body firmware: MAX_ACCESSORIES). ObjectConnect
#: is Anki's SetPropSlot: a factory id puts that object in a slot, 0 empties the slot, and
#: a connected object's id is its slot (the engine's Robot::ConnectToRequestedObjects, the
#: firmware's Radio::assignProp)
RADIO_SLOTS = 4
BACKPACK_LEDS = ("front", "middle", "back", "left", "right")
#: the cubes' accelerometer counts per 1 g, and m/s^2 per count
CUBE_ACCEL_COUNTS_PER_G = 64.0
MPS2_PER_COUNT = 9.80665 / CUBE_ACCEL_COUNTS_PER_G
#: known objects kept (listed or not) at most; the oldest unlisted ones are forgotten first,
#: and a new object is ignored while each one kept is heard of within object_timeout
_MAX_KNOWN = 64
#: s: the warning that new objects are ignored (more than _MAX_KNOWN advertise) is said at
#: most once in this long
_CROWD_WARN_PERIOD_S = 10.0
#: the registry's counters (/diagnostics), in order
_COUNTERS = ("advertisements", f"advertisements ignored (more than {_MAX_KNOWN} objects)",
             "object messages", "messages from unknown object ids",
             "accelerometer samples", "filtered taps (not published)", "connection attempts",
             "connection failures", "connections dropped")

_LightStateStruct = msgs.STRUCTS["LightState"]


def object_name(object_type: int, factory_id: int) -> str:
    """"cube1".."cube3", "charger", or "object_<factory_id>" (decimal) for other types."""
    t = int(object_type)
    if t in CUBE_TYPES:
        return f"cube{t}"
    if t == ObjectType.CHARGER:
        return "charger"
    return f"object_{int(factory_id)}"


def is_cube(object_type: int) -> bool:
    return int(object_type) in CUBE_TYPES


def led_count(object_type: int) -> int:
    """LEDs of an object with lights: 4 on a cube, 3 on the charger (0: none known)."""
    t = int(object_type)
    if t in CUBE_TYPES:
        return CUBE_LEDS
    if t == ObjectType.CHARGER:
        return CHARGER_LEDS
    return 0


# ----------------------------------------------------------------------------- lights

RGB = Tuple[float, float, float]
_BLACK: RGB = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Light:
    """One LED's programme: colours with channels 0..1, times in seconds (see LightState.msg)."""

    on_color: RGB = _BLACK
    off_color: RGB = _BLACK
    on_period: float = 0.0
    off_period: float = 0.0
    transition_on_period: float = 0.0
    transition_off_period: float = 0.0
    offset: float = 0.0


OFF = Light()

#: Anki's engine white-balanced the cubes' colours: a colour with any red had its green and
#: blue scaled by this (CubeLightComponent::WhiteBalanceColor, kWhiteBalanceScale)
CUBE_WHITE_BALANCE = 0.6


def white_balanced(light: Light) -> Light:
    """``light`` with the cubes' white balance (:data:`CUBE_WHITE_BALANCE`) on both colours."""
    def balanced(c: RGB) -> RGB:
        r, g, b = c
        return (r, g * CUBE_WHITE_BALANCE, b * CUBE_WHITE_BALANCE) if r > 0 else c
    return replace(light, on_color=balanced(light.on_color), off_color=balanced(light.off_color))


_PERIODS = ("on_period", "off_period", "transition_on_period", "transition_off_period")


def _within(seconds: float, lo: float, hi: float) -> bool:
    """``seconds`` within [lo, hi] once in whole milliseconds, the unit the frames are counted
    from: LightState's float32 fields hold the limit 7.65 s as 7.650000095 (and 983.01 s as
    983.0100098), which is no more frames than 7.65 s and is not out of range."""
    return math.isfinite(seconds) and round(lo * 1000.0) <= round(seconds * 1000.0) <= round(hi * 1000.0)


def _frames(seconds: float, lo: float, hi: float, field_name: str, warnings: List[str]) -> int:
    value = float(seconds)
    if not _within(value, lo, hi):
        value, warning = clamp(value, lo, hi, field_name, "s")
        if warning:
            warnings.append(warning)
    # Anki's engine: whole milliseconds, rounded up to frames ((ms + 29) / 30), so that a
    # period the LEDs cannot show is made longer, never dropped to 0 (a negative offset:
    # the same, away from 0)
    ms = int(round(abs(value) * 1000.0))
    frame_ms = int(round(LED_FRAME_S * 1000.0))
    return int(math.copysign((ms + frame_ms - 1) // frame_ms, value))


def light_state(light: Light, field_name: str, warnings: List[str]) -> Any:
    """The robot's LightState for ``light``; clamping warnings are appended to ``warnings``.
    Raises CommandError (naming ``field_name``.<field>) for NaN, infinities and bad colours."""
    for name in _PERIODS + ("offset",):  # any NaN refuses the whole command, before anything else
        require_finite(field_name, **{name: float(getattr(light, name))})
    on = rgb555(*light.on_color, f"{field_name}.on_color")
    off = rgb555(*light.off_color, f"{field_name}.off_color")
    frames = {name: _frames(getattr(light, name), 0.0, MAX_PERIOD_S, f"{field_name}.{name}", warnings)
              for name in _PERIODS}
    # Anki's body firmware starts a light's cycle at frame offset + off_frames (Lights::update):
    # a positive offset would move it ahead; sent negated, it delays the start, as documented
    offset = -_frames(light.offset, -MAX_OFFSET_S, MAX_OFFSET_S, f"{field_name}.offset", warnings)
    if not any(frames.values()):
        # a steady colour: the firmware shows one only when both colours are the same; two
        # colours and no frame to spend in either would keep its light loop turning for ever
        off, offset = on, 0
    return _LightStateStruct(on_color=on, off_color=off, on_frames=frames["on_period"],
                             off_frames=frames["off_period"],
                             transition_on_frames=frames["transition_on_period"],
                             transition_off_frames=frames["transition_off_period"], offset=offset)


def range_problem(seconds: float, lo: float, hi: float, field_name: str) -> Optional[str]:
    """None if ``seconds`` is within [lo, hi] (in whole milliseconds, as :func:`light_state`
    takes it), else "<field_name> = 20 s: must be within 0..7.65 s"."""
    if _within(float(seconds), lo, hi):
        return None
    return f"{field_name} = {float(seconds):g} s: must be within {lo:g}..{hi:g} s"


def light_range_problem(light: Light, field_name: str) -> Optional[str]:
    """The first period of ``light`` outside 0..7.65 s or offset outside +-983.01 s, said as
    :func:`range_problem` does (None: all within): what a light animation definition may not
    hold, where a message's are clamped (:func:`light_state`)."""
    for name in _PERIODS + ("offset",):
        lo, hi = (-MAX_OFFSET_S, MAX_OFFSET_S) if name == "offset" else (0.0, MAX_PERIOD_S)
        problem = range_problem(getattr(light, name), lo, hi, f"{field_name}.{name}")
        if problem:
            return problem
    return None


def object_light_states(lights: Sequence[Light], leds: int, field_name: str, what: str,
                        warnings: List[str], white_balance: bool = False) -> List[Any]:
    """The four LightStates of a CubeLights message for an object with ``leds`` LEDs:
    one entry for every LED, or exactly one per LED; the unused fourth (charger) is off.
    ``white_balance``: the cubes' (:func:`white_balanced`)."""
    if white_balance:
        lights = [white_balanced(light) for light in lights]
    n = len(lights)
    if n == 1:
        one = light_state(lights[0], f"{field_name}[0]", warnings)
        states = [one] * leds
    elif n == leds:
        states = [light_state(light, f"{field_name}[{i}]", warnings) for i, light in enumerate(lights)]
    else:
        raise CommandError(f"{field_name} has {n} entries: give 1 (every LED) or {leds} "
                           f"(one per LED of {what})")
    while len(states) < CUBE_LEDS:
        states.append(_LightStateStruct())
    return [_copy_state(s) for s in states]


def _copy_state(s: Any) -> Any:
    return _LightStateStruct(on_color=s.on_color, off_color=s.off_color, on_frames=s.on_frames,
                             off_frames=s.off_frames, transition_on_frames=s.transition_on_frames,
                             transition_off_frames=s.transition_off_frames, offset=s.offset)


def rotation_frames(seconds: float, field_name: str, warnings: List[str]) -> int:
    """CubeId.rotation_period_frames for a rotation period in seconds (0: none)."""
    return _frames(seconds, 0.0, MAX_PERIOD_S, field_name, warnings)


def backpack_messages(lights: Sequence[Light], field_names: Sequence[str],
                      warnings: List[str]) -> Tuple[Any, Any]:
    """(LightStateCenter, LightStateSide) for the five backpack LEDs in BACKPACK_LEDS order."""
    if len(lights) != len(BACKPACK_LEDS):
        raise CommandError(f"the backpack has {len(BACKPACK_LEDS)} LEDs, got {len(lights)} programmes")
    states = [light_state(light, name, warnings) for light, name in zip(lights, field_names)]
    return (msgs.LightStateCenter(states=states[:3], unknown=0),
            msgs.LightStateSide(states=states[3:], unknown=0))


def cube_light_messages(object_id: int, states: Sequence[Any], rotation: int) -> List[Any]:
    """CubeId (selects the object) then CubeLights: what sets one object's LEDs."""
    return [msgs.CubeId(object_id=int(object_id), rotation_period_frames=int(rotation)),
            msgs.CubeLights(states=[_copy_state(s) for s in states])]


# ----------------------------------------------------------------------------- registry records

@dataclass
class ObjectSettings:
    """The registry's tunables (the node's parameters); times in seconds."""

    auto_connect_cubes: bool = True
    auto_connect_charger: bool = False
    object_timeout: float = 5.0
    connect_timeout: float = 3.0
    reconnect_min: float = 1.0
    reconnect_max: float = 10.0
    #: publish taps and moves as Anki's engine did (:mod:`.tap_filter`); false: all of them
    filter_object_events: bool = True


@dataclass
class _Pending:
    connect: bool
    deadline: float
    tokens: List[int] = field(default_factory=list)
    #: a connection that superseded a disconnection the robot has not answered yet: its
    #: next "not connected" is that answer (the robot answers in order), not this one's
    disconnect_due: bool = False
    #: the connect_timeout it was given (``deadline`` is the request's time plus it)
    timeout: float = 0.0
    #: a disconnection's, completing "cube1 disconnected: ..." when the robot answers it
    reason: str = "on request"


@dataclass
class ObjectEntry:
    """What is known of one object (see cozmo_interfaces/ObjectInfo)."""

    factory_id: int
    object_type: int
    name: str
    rssi: int = 0
    last_seen: float = 0.0                  # last advertisement or message (registry time)
    advertised_at: Optional[float] = None   # last ObjectAvailable
    listed: bool = False
    object_id: Optional[int] = None
    #: the radio slot asked for while connecting (the object id once connected), and the
    #: one the robot keeps while ``held``
    slot: Optional[int] = None
    #: not connected, but the robot keeps its radio slot and connects it by itself when it
    #: hears it again (after a drop, or a connection that got no answer)
    held: bool = False
    connected_since: Optional[float] = None
    battery_level: int = 0
    missed_packets: int = 0
    up_axis: int = UpAxis.UNKNOWN
    moving: bool = False
    #: the user's wish from a request: True connect, False leave disconnected, None: auto decides
    wanted: Optional[bool] = None
    #: connected by auto-connect (it is the one auto-connect restores after a drop)
    auto: bool = False
    #: connected and its slot emptied (on request, or let go: the reason completing its
    #: DISCONNECTED), the robot's answer still to come, also once the request has failed: that
    #: late "not connected" is the disconnection, not a drop
    released: Optional[str] = None
    pending: Optional[_Pending] = None
    failures: int = 0
    #: when its last connection failed or dropped, and when auto-connect may try it again
    #: (sooner if the back-off is lowered since: :func:`retry_due`)
    failed_at: float = -math.inf
    retry_at: float = -math.inf
    #: last light programme (four LightStates, rotation frames), restored on reconnection (an
    #: off taken while it was away too: :meth:`ObjectRegistry.owe_lights_off`); None: none
    #: known, its lights put out when it connects (:func:`restore_messages`)
    lights: Optional[Tuple[List[Any], int]] = None
    accel_stream: bool = False

    @property
    def connected(self) -> bool:
        return self.object_id is not None

    @property
    def connecting(self) -> bool:
        return self.pending is not None and self.pending.connect


@dataclass(frozen=True)
class ObjectEventRecord:
    """One cozmo_interfaces/ObjectEvent, without its header."""

    type: int
    factory_id: int
    object_type: int
    name: str
    description: str
    tap_count: int = 0
    tap_intensity: float = 0.0
    up_axis: int = UpAxis.UNKNOWN
    acceleration: Tuple[float, float, float] = (0.0, 0.0, 0.0)   # m/s^2
    #: when the robot's report arrived (registry time), for an event published later (TAPPED,
    #: held by the tap filter); None: it arrived as it is published
    received: Optional[float] = None


@dataclass(frozen=True)
class AccelSample:
    factory_id: int
    object_type: int
    name: str
    acceleration: Tuple[float, float, float]   # m/s^2, the cube's axes


@dataclass(frozen=True)
class RequestResult:
    token: int
    success: bool
    message: str
    factory_id: int


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _hex(factory_id: int) -> str:
    return f"0x{int(factory_id):08x}"


# ----------------------------------------------------------------------------- registry

def free_slot(entries: Iterable[ObjectEntry], entry: ObjectEntry) -> Optional[int]:
    """The radio slot ``entry`` takes among ``entries`` (the registry's): its own, else the
    lowest no other object holds or is being connected to, one the robot keeps for a silent
    object last (None: all are taken)."""
    if entry.object_id is not None:
        return entry.object_id
    others = [e for e in entries if e is not entry]
    taken = {e.object_id if e.connected else e.slot for e in others if e.connected or e.connecting}
    if entry.slot is not None and entry.slot not in taken:
        return entry.slot
    kept = {e.slot for e in others if e.held}
    free = [s for s in range(RADIO_SLOTS) if s not in taken]
    return next((s for s in free if s not in kept), free[0] if free else None)


def backoff_delay(failures: int, settings: ObjectSettings) -> float:
    """The wait before the next attempt after ``failures`` failures (or drops) in a row (the
    doubling capped: 2.0 ** 1024 overflows, after some hours of a cube at the radio's edge)."""
    return min(settings.reconnect_max, settings.reconnect_min * 2.0 ** min(failures - 1, 64))


def retry_due(entry: ObjectEntry, settings: ObjectSettings, now: float) -> bool:
    """``entry``'s wait after its last failure is over: the one set then or, if shorter, the
    one the back-off's values give now (lowered at run time, it shortens a wait under way)."""
    return now >= min(entry.retry_at, entry.failed_at + backoff_delay(entry.failures, settings))


def auto_types(settings: ObjectSettings) -> Tuple[int, ...]:
    """The object types auto-connect connects (``auto_connect_cubes``, ``auto_connect_charger``)."""
    return (CUBE_TYPES if settings.auto_connect_cubes else ()) + \
        ((ObjectType.CHARGER,) if settings.auto_connect_charger else ())


def let_go(entry: ObjectEntry, settings: ObjectSettings) -> bool:
    """``entry`` was connected by auto-connect, not on request, and auto-connect is now off for
    its type: not left a radio slot when it drops (the robot would connect it again)."""
    return entry.auto and entry.wanted is not True and entry.object_type not in auto_types(settings)


def surplus(entries: Iterable[ObjectEntry], entry: ObjectEntry) -> Optional[Tuple[ObjectEntry, str]]:
    """``entry``, held, was connected again by the robot itself (``entries``: the registry's):
    of it and another object of its type connected or being connected meanwhile (auto-connect
    took another once ``entry`` left the list), the one to let go and why ("released: ..."):
    the other if only ``entry`` was connected on request, else ``entry`` (the other is the one
    in use since). None: there is no other, or both were connected on request."""
    others = [e for e in entries if e is not entry and e.object_type == entry.object_type
              and (e.connected or e.connecting)]
    loose = [e for e in others if e.wanted is not True] if entry.wanted is True else [entry] * bool(others)
    if not loose:
        return None
    kept = others[0] if loose[0] is entry else entry
    return loose[0], (f"released: {kept.name} ({_hex(kept.factory_id)}) is connected too, and "
                      "auto-connect keeps one object of a type")


def _programme_left(entry: ObjectEntry) -> Optional[Tuple[List[Any], int]]:
    """The light programme of ``entry`` disconnected on request: none if it is connected (its
    lights are turned off before its slot is emptied) or had none; else, away and lit, the off,
    sent when it connects again (the cube keeps its programme across the disconnection)."""
    if entry.connected or entry.lights is None:
        return None
    return [_LightStateStruct() for _ in range(CUBE_LEDS)], 0


def restore_messages(entry: ObjectEntry) -> List[Any]:
    """What sends a (re)connected object its light programme and accelerometer stream again;
    one with no programme known gets its lights put out: the cube keeps a programme across a
    disconnection (Anki's firmware keeps it per radio slot), and one an earlier driver, or a
    cleanup while the robot was away, left lit would show it for ever."""
    out: List[Any] = []
    if entry.lights is None:
        out.extend(lights_off_messages(entry.object_id))
    else:
        states, rotation = entry.lights
        out.extend(cube_light_messages(entry.object_id, states, rotation))
    if entry.accel_stream:
        out.append(msgs.StreamObjectAccel(object_id=entry.object_id, enable=True))
    return out


def lights_off_messages(object_id: int) -> List[Any]:
    """What turns every LED of object ``object_id`` off (before its slot is emptied: the
    firmware keeps an object's lights across a disconnection, and a cube asleep unlit spares
    its battery)."""
    return cube_light_messages(object_id, [_LightStateStruct() for _ in range(CUBE_LEDS)], 0)


def release_messages(entries: Iterable[ObjectEntry]) -> List[Any]:
    """See :meth:`ObjectRegistry.release_all` (``entries``: the registry's)."""
    out: List[Any] = []
    for entry in entries:
        slot = entry.object_id if entry.connected else (
            entry.slot if entry.held or entry.connecting else None)
        if slot is not None:
            out.extend(lights_off_messages(slot))
            out.append(msgs.ObjectConnect(factory_id=0, slot=slot))
    return out


def forget_one(registry: "ObjectRegistry", now: float) -> bool:
    """Make room in ``registry`` for one more object: forget, of those neither connected, being
    connected nor held (which the robot bounds), one not listed, else one listed but not heard
    of for object_timeout (it leaves the list: DISAPPEARED), the one heard of longest ago.
    False: every other one is heard of within object_timeout, and none is forgotten (the new
    one is ignored: forgetting one still there would make room for it only until that one
    advertised again and pushed out another, the list changing at every advertisement)."""
    timeout = registry.settings.object_timeout
    stale = [e for e in registry._entries.values() if not e.connected and e.pending is None
             and not e.held and (not e.listed or now - e.last_seen > timeout)]
    if not stale:
        return False
    oldest = min(stale, key=lambda e: (e.listed, e.last_seen))
    del registry._entries[oldest.factory_id]
    if oldest.listed:
        registry._changed = True
        registry._event(ObjectEventType.DISAPPEARED, oldest, f"{oldest.name} ({_hex(oldest.factory_id)}) "
                        f"forgotten: not heard of for {now - oldest.last_seen:.1f} s, and more than "
                        f"{_MAX_KNOWN} objects were heard of")
    return True


class _Crowd:
    """The advertisements of new objects ignored because the registry keeps :data:`_MAX_KNOWN`
    objects, each heard of within object_timeout (:func:`forget_one`): a warning at the first,
    then at most one every :data:`_CROWD_WARN_PERIOD_S` with the count since (said at a tick
    once that is over, if none comes after)."""

    def __init__(self) -> None:
        self.unsaid = 0
        self.first_at = self.said_at = -math.inf
        self.last = ""

    def ignored(self, object_type: int, factory_id: int, now: float, settings: ObjectSettings,
                warnings: List[str]) -> None:
        if not self.unsaid:
            self.first_at = now
        self.unsaid += 1
        self.last = f"{object_name(object_type, factory_id)} ({_hex(factory_id)})"
        self.say(now, settings, warnings)

    def say(self, now: float, settings: ObjectSettings, warnings: List[str]) -> None:
        if not self.unsaid or now - self.said_at < _CROWD_WARN_PERIOD_S:
            return
        n, self.unsaid, self.said_at = self.unsaid, 0, now
        since = f" in the last {now - self.first_at:.1f} s" if n > 1 else ""
        warnings.append(f"more than {_MAX_KNOWN} objects advertise: {n} advertisement{'s' if n > 1 else ''} "
                        f"ignored{since}, the last from {self.last}: at most {_MAX_KNOWN} are listed, and a "
                        f"new one only once one of them is not heard of for object_timeout "
                        f"({settings.object_timeout:g} s)")


class ObjectRegistry:
    """Objects the robot advertises or is connected to. See the module docstring."""

    def __init__(self, settings: Optional[ObjectSettings] = None) -> None:
        self.settings = settings or ObjectSettings()
        #: commands are sent only while active (the node's lifecycle)
        self.active = False
        self._entries: Dict[int, ObjectEntry] = {}
        self._by_object_id: Dict[int, ObjectEntry] = {}
        self._robot_ready = False
        self._robot_ready_at = -math.inf
        #: radio slots to empty at the robot's next connection (at the registry's first: all)
        self._release: List[int] = list(range(RADIO_SLOTS))
        self._messages: List[Any] = []
        self._events: List[ObjectEventRecord] = []
        self._accel: List[AccelSample] = []
        self._results: List[RequestResult] = []
        self._warnings: List[str] = []
        self._crowd = _Crowd()
        self._changed = False
        self.counters: Dict[str, int] = dict.fromkeys(_COUNTERS, 0)
        self.event_counts: Dict[int, int] = {t: 0 for t in _EVENT_NAMES if t}
        self.taps = TapFilter()

    # ------------------------------------------------------------------ outputs

    def pop_messages(self) -> List[Any]:
        out, self._messages = self._messages, []
        return out

    def pop_events(self) -> List[ObjectEventRecord]:
        out, self._events = self._events, []
        return out

    def pop_accel(self) -> List[AccelSample]:
        out, self._accel = self._accel, []
        return out

    def pop_results(self) -> List[RequestResult]:
        out, self._results = self._results, []
        return out

    def pop_warnings(self) -> List[str]:
        out, self._warnings = self._warnings, []
        return out

    def take_changed(self) -> bool:
        """True once after anything in the list changed except rssi and last_seen."""
        changed, self._changed = self._changed, False
        return changed

    @property
    def robot_ready(self) -> bool:
        return self._robot_ready

    def objects(self) -> List[ObjectEntry]:
        """The listed objects, by name then factory id."""
        return sorted((e for e in self._entries.values() if e.listed),
                      key=lambda e: (e.name, e.factory_id))

    def entry(self, factory_id: int) -> Optional[ObjectEntry]:
        return self._entries.get(int(factory_id))

    # ------------------------------------------------------------------ helpers

    def _event(self, type_: int, entry: ObjectEntry, description: str, **fields: Any) -> None:
        self._emit(ObjectEventRecord(type_, entry.factory_id, entry.object_type, entry.name,
                                     description, **fields))

    def _emit(self, record: ObjectEventRecord) -> None:
        self.event_counts[record.type] = self.event_counts.get(record.type, 0) + 1
        self._events.append(record)

    def _resolve(self, entry: ObjectEntry, success: bool, message: str) -> None:
        pending, entry.pending = entry.pending, None
        if pending is not None:
            for token in pending.tokens:
                self._results.append(RequestResult(token, success, message, entry.factory_id))

    def _fail_now(self, token: int, message: str, factory_id: int = 0) -> int:
        self._results.append(RequestResult(token, False, message, factory_id))
        return factory_id

    def _backoff(self, entry: ObjectEntry, now: float) -> float:
        entry.failures += 1
        delay = backoff_delay(entry.failures, self.settings)
        entry.failed_at, entry.retry_at = now, now + delay
        return delay

    def _get(self, factory_id: int, object_type: int, now: float) -> ObjectEntry:
        entry = self._entries.get(factory_id)
        if entry is None:
            if len(self._entries) >= _MAX_KNOWN:
                forget_one(self, now)  # (a connected object is kept all the same)
            entry = ObjectEntry(factory_id, object_type, object_name(object_type, factory_id),
                                last_seen=now)
            self._entries[factory_id] = entry
        elif object_type not in (ObjectType.UNKNOWN, ObjectType.INVALID) and object_type != entry.object_type:
            entry.object_type = object_type
            entry.name = object_name(object_type, factory_id)
            self._changed = True
        return entry

    def _list(self, entry: ObjectEntry, why: str) -> None:
        if not entry.listed:
            entry.listed = True
            self._changed = True
            self._event(ObjectEventType.APPEARED, entry, f"{entry.name} ({_hex(entry.factory_id)}) "
                        f"appeared: {why}")

    def _fresh(self, entry: ObjectEntry, now: float) -> bool:
        """Advertised since the robot's current connection and within object_timeout."""
        at = entry.advertised_at
        return (at is not None and at >= self._robot_ready_at
                and now - at <= self.settings.object_timeout)

    def _send_connect(self, entry: ObjectEntry, connect: bool, now: float,
                      token: Optional[int] = None) -> None:
        disconnect_due = connect and entry.pending is not None and not entry.pending.connect
        if entry.pending is not None:  # a request in the other direction is superseded
            self._resolve(entry, False, "superseded by a later request")
        slot = free_slot(self._entries.values(), entry) if connect else (
            entry.object_id if entry.connected else entry.slot)
        if slot is None:
            if token is not None:
                self._results.append(RequestResult(token, False, (
                    f"all {RADIO_SLOTS} of the robot's radio slots hold objects: disconnect one "
                    f"first ({self._listing()})"), entry.factory_id))
            return
        timeout = self.settings.connect_timeout
        entry.pending = _Pending(connect, now + timeout, [token] if token is not None else [],
                                 disconnect_due, timeout)
        if connect:
            self.counters["connection attempts"] += 1
            entry.slot = slot
            for other in self._entries.values():  # the robot gives the slot away
                if other.held and other.slot == slot and other is not entry:
                    other.held, other.slot = False, None
        self._messages.append(msgs.ObjectConnect(factory_id=entry.factory_id if connect else 0,
                                                 slot=slot))

    def _disconnected(self, entry: ObjectEntry, now: float, why: str, held: bool = False) -> None:
        """The object's connection ended (``why`` completes "cube1 disconnected: ...");
        ``held``: the robot keeps its slot (:attr:`ObjectEntry.held`)."""
        if entry.object_id is not None:
            self._by_object_id.pop(entry.object_id, None)
        entry.slot = entry.object_id if held else None
        entry.held = entry.slot is not None
        entry.object_id = None
        entry.released = None
        entry.connected_since = None
        entry.moving = False
        entry.up_axis = UpAxis.UNKNOWN  # (the robot reports it again after a connection)
        entry.battery_level = 0  # unknown (ObjectInfo: 0 V, NaN): a cube reports it only while connected
        tapped = self.taps.forget(entry.factory_id)
        if tapped is not None:  # a tap it reported before it went: published before DISCONNECTED
            self._emit(tapped)
        entry.last_seen = now
        entry.advertised_at = None  # reconnected only once it advertises again
        self._changed = True
        self._event(ObjectEventType.DISCONNECTED, entry, f"{entry.name} disconnected: {why}")

    # ------------------------------------------------------------------ the robot's link

    def on_robot_ready(self, now: float) -> None:
        """The robot (re)connected: object ids of an earlier connection are void. The radio
        slots held in its last connection (objects connected, kept for silent ones, given to a
        connection under way when it was lost), and every slot at the registry's first, are
        emptied (ObjectConnect, factory id 0): a robot that kept the links (the protocol notes
        do not say; ``ModelConfig.keep_object_links``) would not let those objects advertise,
        and they would never be connected again. Answers about empty slots are ignored."""
        for entry in self._entries.values():
            self._end_link(entry, now, "the robot reconnected")
        self._messages.extend(msgs.ObjectConnect(factory_id=0, slot=slot) for slot in sorted(set(self._release)))
        self._release.clear()
        self._robot_ready, self._robot_ready_at = True, now

    def on_robot_lost(self, now: float, reason: str = "lost the robot") -> None:
        """The robot is gone (lost or disconnected): every object is disconnected."""
        if not self._robot_ready:
            return
        self._robot_ready = False
        held = self.taps.flush()  # a tap the robot reported: published now, not after its return
        if held is not None:
            self._emit(held)
        for entry in self._entries.values():
            self._end_link(entry, now, reason)

    def _end_link(self, entry: ObjectEntry, now: float, why: str) -> None:
        """The robot's link ended or began again (``why``): ``entry``'s request fails, and its
        slot (connected, held, or being connected to) is emptied at the next connection."""
        if entry.connecting and not entry.connected and entry.slot is not None:
            entry.held = True
        if entry.pending is not None:
            self._resolve(entry, False, why)
        if entry.connected:
            self._release.append(entry.object_id)
            self._disconnected(entry, now, why)
        elif entry.held:
            self._release.append(entry.slot)
            entry.held, entry.slot = False, None

    # ------------------------------------------------------------------ the robot's messages

    def on_message(self, message: Any, now: float) -> None:
        name = message.NAME
        if name == "ObjectAvailable":
            self._on_available(message, now)
            return
        if name == "ObjectConnectionState":
            self._on_connection_state(message, now)
            return
        self.counters["object messages"] += 1
        entry = self._by_object_id.get(int(getattr(message, "object_id", -1)))
        if entry is None:
            self.counters["messages from unknown object ids"] += 1
            return
        entry.last_seen = now
        if name == "ObjectAccel":
            self.counters["accelerometer samples"] += 1
            self._accel.append(AccelSample(entry.factory_id, entry.object_type, entry.name,
                                           (float(message.accel_x) * MPS2_PER_COUNT,
                                            float(message.accel_y) * MPS2_PER_COUNT,
                                            float(message.accel_z) * MPS2_PER_COUNT)))
        elif name == "ObjectTapped":
            count = int(message.num_taps)
            intensity = float(int(message.tap_pos) - int(message.tap_neg))
            record = ObjectEventRecord(ObjectEventType.TAPPED, entry.factory_id, entry.object_type,
                                       entry.name, f"{entry.name} tapped {_times(count)} "
                                       f"(intensity {intensity:.0f})", tap_count=count,
                                       tap_intensity=intensity, received=now)
            if self.settings.filter_object_events:  # published by release_taps
                self.release_taps(now)  # a group over (no robot state since): not this tap's
                self.taps.tap(entry.factory_id, intensity, record, entry.moving, now)
            else:
                self.release_taps(now)  # one held before the filter was switched off: first
                self._emit(record)
        elif name == "ObjectTapFiltered":
            self.counters["filtered taps (not published)"] += 1
        elif name == "ObjectMoved":
            if not entry.moving and (not self.settings.filter_object_events or self.taps.move(
                    entry.factory_id, entry.object_type == ObjectType.CHARGER, now)):
                entry.moving = True
                self._changed = True
                accel = (float(message.active_accel_x) * MPS2_PER_COUNT,
                         float(message.active_accel_y) * MPS2_PER_COUNT,
                         float(message.active_accel_z) * MPS2_PER_COUNT)
                self._event(ObjectEventType.MOVED, entry, f"{entry.name} started moving "
                            f"(acceleration {accel[0]:.2f}, {accel[1]:.2f}, {accel[2]:.2f} m/s^2)",
                            acceleration=accel)
        elif name == "ObjectStoppedMoving":
            if entry.moving:
                entry.moving = False
                self._changed = True
                self._event(ObjectEventType.STOPPED_MOVING, entry, f"{entry.name} stopped moving")
        elif name == "ObjectUpAxisChanged":
            axis = int(message.axis)
            if axis not in _AXIS_TEXT:
                axis = UpAxis.UNKNOWN
            if axis != entry.up_axis:
                entry.up_axis = axis
                self._changed = True
                text = f"{_AXIS_TEXT[axis]} up" if axis in _AXIS_TEXT else "up axis unknown"
                self._event(ObjectEventType.UP_AXIS_CHANGED, entry, f"{entry.name} now rests with {text}",
                            up_axis=axis)
        elif name == "ObjectPowerLevel":
            level, missed = int(message.battery_level), int(message.missed_packets)
            if (level, missed) != (entry.battery_level, entry.missed_packets):
                entry.battery_level, entry.missed_packets = level, missed
                self._changed = True

    def _on_available(self, message: Any, now: float) -> None:
        self.counters["advertisements"] += 1
        factory_id, object_type = int(message.factory_id), int(message.object_type)
        if factory_id not in self._entries and len(self._entries) >= _MAX_KNOWN and not forget_one(self, now):
            self.counters[_COUNTERS[1]] += 1
            self._crowd.ignored(object_type, factory_id, now, self.settings, self._warnings)
            return
        entry = self._get(factory_id, object_type, now)
        # Anki's body firmware sends the nRF radio's RSSISAMPLE, the signal's magnitude in -dBm
        # (lower is closer): published as dBm, higher is closer (a negative value is taken as
        # dBm already)
        entry.rssi = -abs(int(message.rssi))
        entry.last_seen = now
        entry.advertised_at = now
        entry.held = False  # advertised: the robot holds no slot for it (any more)
        self._list(entry, f"advertised, rssi {entry.rssi}")

    def _on_connection_state(self, message: Any, now: float) -> None:
        factory_id, object_type = int(message.factory_id), int(message.object_type)
        entry = self._entries.get(factory_id)
        if entry is None and not factory_id and not message.connected:
            # the answer to emptying a slot that held nothing by then names no object
            entry = next((e for e in self._entries.values() if e.pending is not None
                          and (not e.pending.connect or e.pending.disconnect_due)
                          and int(message.object_id) in (e.object_id, e.slot)), None)
        if entry is None:
            if not message.connected:
                return  # about an object never heard of, and not connected: nothing to do
            entry = self._get(factory_id, object_type, now)
        elif object_type not in (ObjectType.UNKNOWN, ObjectType.INVALID):
            self._get(factory_id, object_type, now)  # the type, if it was not known
        entry.last_seen = now
        pending = entry.pending
        if message.connected:
            object_id = int(message.object_id)
            was = entry.object_id
            if was is not None and was != object_id:
                self._by_object_id.pop(was, None)
            entry.object_id = entry.slot = object_id
            was_held, entry.held = entry.held, False
            self._by_object_id[object_id] = entry
            self._list(entry, "connected")
            if pending is not None and pending.connect:
                self._resolve(entry, True, f"{entry.name} connected (object id {object_id})")
            if was is None:
                entry.connected_since, entry.released = now, None
                entry.moving = False
                self._changed = True
                self._event(ObjectEventType.CONNECTED, entry,
                            f"{entry.name} ({_hex(factory_id)}) connected (object id {object_id})")
                extra = surplus(self._entries.values(), entry) if was_held else None
                if extra is None or extra[0] is not entry:
                    self._messages.extend(restore_messages(entry))
                if extra is not None:  # two of a type, not both on request: one goes
                    self._let_go(extra[0], now, reason=extra[1])
            return
        # not connected: an answer to a request, a failed attempt, or a drop
        was_connected = entry.connected
        if pending is not None and pending.disconnect_due:  # the superseded disconnection's answer
            pending.disconnect_due, slot = False, entry.slot
            if was_connected:
                self._disconnected(entry, now, "on request")
            entry.held, entry.slot = False, slot  # (the connection, to that slot, still waits)
            return
        if pending is not None and not pending.connect:
            self._resolve(entry, True, f"{entry.name} disconnected")
            if was_connected:
                self._disconnected(entry, now, pending.reason)
            entry.held, entry.slot, entry.released = False, None, None
            return
        if pending is not None and pending.connect:
            self.counters["connection failures"] += 1
            if not was_connected:
                entry.slot = None
            delay = self._backoff(entry, now)
            if object_type == ObjectType.INVALID:
                why = f"the robot does not know object {_hex(factory_id)}"
            else:
                why = f"the robot could not connect to {entry.name} ({_hex(factory_id)})"
            self._resolve(entry, False, f"{why}; next automatic attempt in {delay:.1f} s"
                          if entry.auto or entry.wanted else why)
            if was_connected:
                self._disconnected(entry, now, "the connection failed")
            return
        if was_connected and (entry.wanted is False or entry.released):  # a disconnection's late answer
            self._disconnected(entry, now, entry.released or "on request")
        elif was_connected:
            self.counters["connections dropped"] += 1
            s = self.settings
            if entry.connected_since is not None and now - entry.connected_since >= s.reconnect_max:
                entry.failures = 0
            self._backoff(entry, now)
            gone = let_go(entry, s)
            self._disconnected(entry, now, "it dropped the connection (out of range, or its battery is empty?); " + (
                f"auto_connect_{'charger' if entry.object_type == ObjectType.CHARGER else 'cubes'} is off: its "
                "radio slot is emptied" if gone else "the robot connects it again when it hears it"), held=True)
            if gone and self.active:
                self._send_connect(entry, False, now)

    # ------------------------------------------------------------------ time

    @property
    def taps_due_at(self) -> float:
        """When :meth:`release_taps` has a tap to publish (inf: none is held)."""
        return self.taps.due_at

    def release_taps(self, now: float) -> None:
        """Publish the tap the filter chose, once its group is over (or at once, the filter
        switched off); call it at :attr:`taps_due_at`."""
        record = self.taps.due(now) if self.settings.filter_object_events else self.taps.flush()
        if record is not None:
            self._emit(record)

    def tick(self, now: float) -> None:
        """Timeouts, ageing and auto-connect; call it often (a few times a second)."""
        s = self.settings
        self.release_taps(now)
        self._crowd.say(now, s, self._warnings)
        for entry in list(self._entries.values()):
            pending = entry.pending
            if pending is not None and now >= pending.deadline:
                if pending.connect:
                    self.counters["connection failures"] += 1
                    self._backoff(entry, now)
                    # the robot keeps the slot and connects the object once it hears it
                    entry.held = not entry.connected
                self._resolve(entry, False, f"no answer from the robot within {pending.timeout:g} s")
            if (entry.listed and not entry.connected and entry.pending is None
                    and now - entry.last_seen > s.object_timeout):
                entry.listed = False
                self._changed = True
                self._event(ObjectEventType.DISAPPEARED, entry, f"{entry.name} ({_hex(entry.factory_id)}) "
                            f"disappeared: not heard of for {now - entry.last_seen:.1f} s")
        if self.active and self._robot_ready:
            self._auto_connect(now)

    def _auto_connect(self, now: float) -> None:
        s = self.settings
        idle = [e for e in self._entries.values()
                if e.listed and not e.connected and e.pending is None]
        for entry in idle:  # connected by request before: restore
            if entry.wanted is True and self._fresh(entry, now) and retry_due(entry, s, now):
                self._send_connect(entry, True, now)
        for entry in self._entries.values():  # auto-connect turned off since it dropped
            if entry.held and entry.pending is None and let_go(entry, s):
                self._send_connect(entry, False, now)
        for object_type in auto_types(s):
            same = [e for e in self._entries.values() if e.object_type == object_type]
            if any(e.connected or e.connecting or (e.held and e.listed) for e in same):
                continue  # (one the robot keeps a slot for: it connects it when it hears it)
            candidates = [e for e in same if e.listed and e.wanted is not False and e.pending is None]
            ours = [e for e in candidates if e.auto]
            if ours:  # the one connected before is still listed: wait for it
                candidates = ours
            candidates = [e for e in candidates if self._fresh(e, now) and retry_due(e, s, now)]
            if candidates:
                best = max(candidates, key=lambda e: (e.rssi, -e.factory_id))
                best.auto = True
                self._send_connect(best, True, now)

    # ------------------------------------------------------------------ requests

    def _not_ready(self) -> Optional[str]:
        if not self.active:
            return "the driver is not active"
        if not self._robot_ready:
            return "not connected to the robot"
        return None

    def request(self, token: int, factory_id: int, object_type: int, connect: bool, now: float) -> int:
        """Connect or disconnect an object (ConnectObject); the answer comes as a
        :class:`RequestResult` with ``token``. Returns the factory id acted on (0: none)."""
        problem = self._not_ready()
        if problem:
            return self._fail_now(token, problem, int(factory_id))
        entry = self._find_for_request(token, int(factory_id), int(object_type), connect, now)
        if entry is None:
            return 0 if factory_id == 0 else int(factory_id)
        if connect:
            entry.wanted = True
            if entry.connecting:
                entry.pending.tokens.append(token)
            elif entry.connected and entry.pending is None:
                self._results.append(RequestResult(token, True, f"{entry.name} was already connected "
                                                   f"(object id {entry.object_id})", entry.factory_id))
            else:  # not connected, or a disconnection under way (superseded)
                entry.retry_at = -math.inf
                entry.failures = 0
                self._send_connect(entry, True, now, token)
            return entry.factory_id
        entry.wanted = False
        entry.auto, entry.lights, entry.accel_stream = False, _programme_left(entry), False
        if entry.pending is not None and not entry.pending.connect:
            entry.pending.tokens.append(token)
        elif entry.connected or entry.connecting or entry.held:
            self._let_go(entry, now, token)
        else:
            self._results.append(RequestResult(token, True, f"{entry.name} was not connected",
                                               entry.factory_id))
        return entry.factory_id

    def _let_go(self, entry: ObjectEntry, now: float, token: Optional[int] = None,
                reason: str = "on request") -> None:
        """Empty ``entry``'s slot (``reason`` completes its DISCONNECTED), its lights off first if
        it is connected (the cube keeps them), its programme and stream forgotten (an off owed
        to one lit while away: :func:`_programme_left`)."""
        if entry.connected:
            self._messages.extend(lights_off_messages(entry.object_id))
            entry.released = reason
        entry.auto, entry.lights, entry.accel_stream = False, _programme_left(entry), False
        self._send_connect(entry, False, now, token)
        if entry.pending is not None:
            entry.pending.reason = reason

    def _find_for_request(self, token: int, factory_id: int, object_type: int, connect: bool,
                          now: float) -> Optional[ObjectEntry]:
        if factory_id:
            entry = self._entries.get(factory_id)
            if entry is None:
                self._fail_now(token, f"unknown object {_hex(factory_id)}: the robot has not "
                               f"advertised it (advertised: {self._listing()})", factory_id)
                return None
            if connect and not entry.connected and not entry.listed:
                kept = (f"; the robot keeps its radio slot {entry.slot} and connects it when it "
                        "hears it" if entry.held else "")
                self._fail_now(token, f"{entry.name} ({_hex(factory_id)}) is not advertised: last "
                               f"heard of {now - entry.last_seen:.1f} s ago{kept}", factory_id)
                return None
            return entry
        if not object_type:
            self._fail_now(token, "give factory_id, or object_type (ObjectInfo.TYPE_*)")
            return None
        what = object_name(object_type, 0) if led_count(object_type) else f"object of type {object_type}"
        same = [e for e in self._entries.values() if e.object_type == object_type]
        busy = [e for e in same if e.connected or e.connecting]
        if busy:
            return busy[0]
        if not connect:
            # one whose slot the robot keeps, or whose connection is still wanted: given up
            kept = [e for e in same if e.held or e.wanted]
            if kept:
                return kept[0]
            self._results.append(RequestResult(token, True, f"no {what} was connected", 0))
            return None
        listed = [e for e in same if e.listed]
        if not listed:
            self._fail_now(token, f"no {what} is advertised (advertised: {self._listing()})")
            return None
        return max(listed, key=lambda e: (e.rssi, -e.factory_id))

    def _listing(self) -> str:
        listed = self.objects()
        return ", ".join(f"{e.name} {_hex(e.factory_id)}" for e in listed) if listed else "none"

    def find_connected(self, factory_id: int, object_type: int, field_prefix: str) -> ObjectEntry:
        """The connected object that a command targets (factory_id, else object_type);
        raises CommandError saying why there is none (:func:`find_connected`)."""
        return find_connected(self, factory_id, object_type, field_prefix)

    def connected_cubes(self) -> List[ObjectEntry]:
        return [e for e in self.objects() if e.connected and is_cube(e.object_type)]

    def connected_named(self, name: str) -> Optional[ObjectEntry]:
        for entry in self.objects():
            if entry.connected and entry.name == name:
                return entry
        return None

    def set_lights(self, entry: ObjectEntry, states: Sequence[Any], rotation: int) -> None:
        """Send ``entry`` (connected) its LEDs' programmes; they are restored on reconnection."""
        entry.lights = ([_copy_state(s) for s in states], int(rotation))
        self._messages.extend(cube_light_messages(entry.object_id, states, rotation))

    def owe_lights_off(self, factory_id: int) -> Optional[ObjectEntry]:
        """Lights off for a known object not connected: nothing to send now; its programme
        becomes the off, sent when it connects again (:func:`restore_messages`: the cube keeps
        its old one across the disconnection); the object (None: unknown, or connected)."""
        entry = self._entries.get(int(factory_id))
        if entry is None or entry.connected:
            return None
        entry.lights = ([_LightStateStruct() for _ in range(CUBE_LEDS)], 0)
        return entry

    def set_accel_stream(self, entry: ObjectEntry, enable: bool) -> List[str]:
        """Switch ``entry``'s accelerometer stream; the names of the cubes whose stream this
        ends: the robot streams one cube at a time (Anki's body firmware keeps one slot), so
        switching one on switches any other off."""
        stopped = []
        if enable:
            for other in self._entries.values():
                if other is not entry and other.accel_stream:
                    other.accel_stream = False
                    stopped.append(other.name)
        entry.accel_stream = bool(enable)
        self._messages.append(msgs.StreamObjectAccel(object_id=entry.object_id, enable=bool(enable)))
        return stopped

    def release_all(self) -> List[Any]:
        """What to send before the driver stops: every connected object's lights off, then
        a disconnection (the cubes go back to sleep and spare their batteries); the slots the
        robot keeps for silent objects, and those of connections under way, emptied too."""
        return release_messages(self._entries.values())

    def fail_pending(self, reason: str) -> None:
        """Every request waiting for the robot's answer fails (``reason``); the robot keeps
        the slot of a connection under way (it connects the object when it hears it), so
        that object is ``held``, and disconnecting it or :meth:`release_all` empties it."""
        for entry in self._entries.values():
            if entry.pending is not None:
                if entry.connecting and not entry.connected and entry.slot is not None:
                    entry.held = True
                self._resolve(entry, False, reason)

    # ------------------------------------------------------------------ diagnostics

    def report(self, active: bool) -> DiagnosticReport:
        """The objects' /diagnostics (``active``: the node's lifecycle)."""
        return registry_report(self, active)


def find_connected(registry: ObjectRegistry, factory_id: int, object_type: int,
                   field_prefix: str) -> ObjectEntry:
    """See :meth:`ObjectRegistry.find_connected`. ``field_prefix``: the topic whose message names
    the object ("object_lights": "object_lights.factory_id = ..."); empty for a service's request,
    whose refusal the log line names already ("set_object_accel_stream refused: factory_id = ...")."""
    factory_id, object_type = int(factory_id), int(object_type)
    field = f"{field_prefix}." if field_prefix else ""
    if factory_id:
        entry = registry.entry(factory_id)
        if entry is None:
            raise CommandError(f"{field}factory_id = {_hex(factory_id)}: unknown object "
                               f"(advertised: {registry._listing()})")
        if not entry.connected:
            why = (f": the robot keeps its radio slot {entry.slot} and connects it again by itself "
                   "when it hears it" if entry.held else " (connect it with the connect_object service)")
            raise CommandError(f"{entry.name} ({_hex(factory_id)}) is not connected{why}")
        return entry
    if not object_type:
        raise CommandError(f"{field_prefix}: give factory_id, or object_type (ObjectInfo.TYPE_*)" if field_prefix
                           else "give factory_id, or object_type (ObjectInfo.TYPE_*)")
    for _, entry in sorted(registry._entries.items()):
        if entry.object_type == object_type and entry.connected:
            return entry
    what = object_name(object_type, 0) if led_count(object_type) else f"object of type {object_type}"
    raise CommandError(f"no {what} is connected (connect one with the connect_object service)")


def known_away(registry: ObjectRegistry, name: str) -> List[ObjectEntry]:
    """The known objects not connected named ``name`` ("cubes": every cube), by factory id:
    those a lights-off for ``name`` is taken for (:meth:`~ObjectRegistry.owe_lights_off`)."""
    return [e for _, e in sorted(registry._entries.items()) if not e.connected
            and (is_cube(e.object_type) if name == "cubes" else e.name == name)]


def stop_accel_away(registry: ObjectRegistry, factory_id: int, object_type: int) -> Optional[ObjectEntry]:
    """Accelerometer stream off for a known cube not connected (by ``factory_id``, else the
    cubes of ``object_type`` when none of them is connected): nothing to send, and it is not
    restarted when it connects (:func:`restore_messages`). The cube (the one that streamed
    first); None: unknown, connected, not a cube, or one of ``object_type`` is connected."""
    if factory_id:
        away = [registry.entry(factory_id)]
    else:
        away = [e for _, e in sorted(registry._entries.items()) if e.object_type == int(object_type)]
        away = [] if any(e.connected for e in away) else away
    away = [e for e in away if e is not None and not e.connected and is_cube(e.object_type)]
    away.sort(key=lambda e: not e.accel_stream)
    for entry in away:
        entry.accel_stream = False
    return away[0] if away else None


def registry_report(registry: ObjectRegistry, active: bool) -> DiagnosticReport:
    """See :meth:`ObjectRegistry.report`."""
    listed = registry.objects()
    connected = [e for e in listed if e.connected]
    s = registry.settings
    if not active:
        level, message = OK, "inactive (lifecycle)"
    elif not registry.robot_ready:  # active: as the robot's and the display's reports, a warning
        level, message = WARN, "not connected to the robot: no object can be connected"
    else:
        names = ", ".join(e.name for e in connected) or "none"
        level, message = OK, f"{len(connected)} connected ({names}), {len(listed)} listed"
        types = auto_types(s)
        # what auto-connect would connect: not the charger it leaves alone, nor a cube
        # disconnected on request
        wanted = [e for e in listed if e.object_type in types and e.wanted is not False]
        if not connected and wanted:
            level, message = WARN, ("auto-connect on but nothing connected (listed for it: "
                                    f"{', '.join(e.name for e in wanted)})")
    values: List[Tuple[str, str]] = [
        ("objects listed", str(len(listed))),
        ("objects connected", ", ".join(f"{e.name} {_hex(e.factory_id)}" for e in connected) or "none"),
        ("cubes connected", str(sum(1 for e in connected if is_cube(e.object_type)))),
        ("slots the robot keeps for silent objects",
         ", ".join(f"{e.name} (slot {e.slot})" for e in registry._entries.values() if e.held) or "none"),
    ]
    values += [(k, str(v)) for k, v in registry.counters.items()]
    values += [(k, str(v)) for k, v in registry.taps.counters.items()]
    values += [(f"events {_EVENT_NAMES[t]}", str(n)) for t, n in sorted(registry.event_counts.items())]
    return DiagnosticReport(level, message, values)
