"""The simulated Cozmo's accessories: three light cubes and the charger, over the radio.

:class:`Accessories` holds the radio's 4 slots as Anki's body firmware does
(Radio::assignProp, onAdvertisePacket, transmitHandshake): ObjectConnect is Anki's
SetPropSlot, a factory id and a slot. It gives the slot to that object (what held it
leaves) and the object connects as soon as it is heard, the slot then its object id;
a factory id of 0 empties the slot. The robot keeps the slot of an object that goes
silent (out of radio range): it reports the object disconnected and connects it again
by itself when it is heard again, without a new ObjectConnect. Only objects that hold no
slot advertise (ObjectAvailable, while discovery is on); one put in a slot while out of
range connects when it comes back, and nothing is said meanwhile.
It also reports the objects' power level, streams a cube's accelerometer (ObjectAccel)
on request (the charger has none: StreamObjectAccel for it is ignored; a cube's stream
ends when it leaves its slot or radio range, and starts again only when asked), keeps
their lights (CubeId, CubeLights) and plays what is done to them (taps, moves, turning
over, battery, going out of radio range and back).
Physical state (lights, battery, up axis, in range) survives a reboot; the
slots do not.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..protocol import messages as msgs
from .firmware import Firmware

__all__ = ["Accessories", "Accessory", "CUBE_FACTORY_IDS", "CHARGER_FACTORY_ID", "CUBE_ACCEL_1G",
           "RADIO_SLOTS", "UP_AXIS_REPORT_S"]

#: the cube accelerometer's raw counts per 1 g (Anki's firmware: "64 is approx 1g")
CUBE_ACCEL_1G = 64.0

#: the robot's three light cubes, then the charger (factory ids as advertised)
CUBE_FACTORY_IDS: Tuple[int, int, int] = (0xC0B10001, 0xC0B10002, 0xC0B10003)
CHARGER_FACTORY_ID = 0xC4A20001
#: the body firmware's radio slots (MAX_ACCESSORIES); a connected object's id is its slot
RADIO_SLOTS = 4
#: a cube reports which face is up this long after it connects (Anki's body firmware: an
#: object (re)connected starts with the up axis unknown and reports one that held for 15 of
#: its handshakes, about 28 a second)
UP_AXIS_REPORT_S = 0.5

_ObjectType = msgs.ENUMS["ObjectType"]
#: the axes a cube can report up: each UpAxis but NumAxes (a count, not an axis)
_UP_AXES = {axis.name: int(axis) for axis in msgs.ENUMS["UpAxis"] if axis.name != "NumAxes"}
_LightState = msgs.STRUCTS["LightState"]


def _whole(value: Any) -> Optional[int]:
    """``value`` as a whole number (an int, an IntEnum, a numpy integer), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


@dataclass
class Accessory:
    index: int                   # 1..3 cubes, 0 charger
    factory_id: int
    object_type: int
    object_id: Optional[int] = None
    lights: List[Any] = field(default_factory=lambda: [_LightState() for _ in range(4)])
    rotation_period_frames: int = 0
    #: ObjectPowerLevel's battery_level: hundredths of a volt (Anki's body firmware)
    battery_level: int = 150
    up_axis: int = 5             # ZPositive
    stream_accel: bool = False
    #: what the robot reports: the radio's RSSISAMPLE, a magnitude in -dBm (lower is closer)
    rssi_base: int = 55
    next_available: float = 0.0
    next_power: float = 0.0
    #: within radio range: advertises, can connect (see set_in_range)
    in_range: bool = True

    def gravity(self) -> Tuple[float, float, float]:
        """What the cube's accelerometer reads at rest (raw counts, 64 to 1 g)."""
        axis = int(self.up_axis)
        vec = [0.0, 0.0, 0.0]
        if axis < 6:
            vec[axis // 2] = CUBE_ACCEL_1G if axis % 2 else -CUBE_ACCEL_1G
        else:
            vec[2] = CUBE_ACCEL_1G
        return vec[0], vec[1], vec[2]


class Accessories:
    """The cubes (``objects[0:3]``, numbered 1..3) and the charger (``objects[3]``, number 0)."""

    def __init__(self, fw: Firmware) -> None:
        self.fw = fw
        objs = [Accessory(i + 1, fid, int(getattr(_ObjectType, f"Block_LIGHTCUBE{i + 1}")),
                          rssi_base=48 + 6 * i, battery_level=148 - 7 * i)
                for i, fid in enumerate(CUBE_FACTORY_IDS)]
        objs.append(Accessory(0, CHARGER_FACTORY_ID, int(_ObjectType.Charger_Basic),
                              lights=[_LightState() for _ in range(4)], rssi_base=60,
                              battery_level=150))
        self.objects: List[Accessory] = objs
        self.reset_link(fw.t)

    def reset_link(self, now: float, keep_links: bool = False) -> None:
        """No engine: discovery on, every slot emptied (``keep_links``: the slots and the
        connections stay, as a robot might keep them from one engine connection to the
        next: ``ModelConfig.keep_object_links``)."""
        self.discovery = True
        self._next_accel = now
        self._selected: Optional[int] = None
        if keep_links:
            return
        #: the factory id each radio slot is given to (the firmware's allocated slots)
        self.slots: List[Optional[int]] = [None] * RADIO_SLOTS
        for obj in self.objects:
            obj.object_id = None
            obj.stream_accel = False
            obj.rotation_period_frames = 0

    def slot_of(self, obj: Accessory) -> Optional[int]:
        """The slot given to ``obj`` (connected or not), or None."""
        return next((i for i, fid in enumerate(self.slots) if fid == obj.factory_id), None)

    def handlers(self) -> Dict[str, Callable[[Any, float], None]]:
        return {"ObjectConnect": self._on_ObjectConnect,
                "SetAccessoryDiscovery": self._on_SetAccessoryDiscovery,
                "CubeId": self._on_CubeId, "CubeLights": self._on_CubeLights,
                "StreamObjectAccel": self._on_StreamObjectAccel}

    # ------------------------------------------------------------------ time

    def start_streams(self, now: float) -> None:
        """The robot's streams start: the objects advertise one after the other."""
        for k, obj in enumerate(self.objects):
            obj.next_available = now + 0.05 + 0.2 * k

    def due(self, times: List[float]) -> None:
        """Add to ``times`` when the objects next need the model to run."""
        fw = self.fw
        if fw.connected and fw.streaming:
            times.extend(o.next_available for o in self.objects if o.object_id is None
                         and (self.discovery or self.slot_of(o) is not None))
            times.extend(o.next_power for o in self.objects if o.object_id is not None)
        if fw.connected and any(o.stream_accel and o.object_id is not None for o in self.objects):
            times.append(self._next_accel)  # the streams periodic() sends

    def periodic(self, now: float) -> None:
        """ObjectAvailable, ObjectPowerLevel and ObjectAccel that are due at ``now``."""
        fw = self.fw
        cfg = fw.config
        rng = fw.rng
        if fw.streaming:
            for obj in self.objects:
                if obj.object_id is None:
                    slot = self.slot_of(obj)
                    if slot is not None:  # heard again: it connects in the slot it holds
                        if now >= obj.next_available:
                            self._connect(obj, slot, now)
                    elif self.discovery and now >= obj.next_available:
                        rssi = obj.rssi_base + (rng.randint(-4, 4) if cfg.noise else 0)
                        fw.emit(msgs.ObjectAvailable(factory_id=obj.factory_id,
                                                     object_type=obj.object_type, rssi=rssi))
                        obj.next_available = now + cfg.object_available_period
                elif now >= obj.next_power:
                    fw.emit(msgs.ObjectPowerLevel(object_id=obj.object_id, missed_packets=0,
                                                  battery_level=obj.battery_level))
                    obj.next_power = now + cfg.power_level_period
        streams = [o for o in self.objects if o.stream_accel and o.object_id is not None]
        if streams and now >= self._next_accel:
            ts = fw.timestamp_ms(now)
            for obj in streams:
                ax, ay, az = obj.gravity()
                # the robot's accelerometer noise, in the cube's counts (64 to 1 g)
                n = cfg.accel_noise_mmps2 * CUBE_ACCEL_1G / 9810.0 if cfg.noise else 0.0
                fw.emit(msgs.ObjectAccel(timestamp_ms=ts, object_id=obj.object_id,
                                         accel_x=ax + rng.gauss(0, n) if n else ax,
                                         accel_y=ay + rng.gauss(0, n) if n else ay,
                                         accel_z=az + rng.gauss(0, n) if n else az))
            self._next_accel += cfg.object_accel_period
            if self._next_accel <= now:
                self._next_accel = now + cfg.object_accel_period

    # ------------------------------------------------------------------ commands

    def _by_factory(self, factory_id: int) -> Optional[Accessory]:
        for obj in self.objects:
            if obj.factory_id == factory_id:
                return obj
        return None

    def _by_id(self, object_id: int) -> Optional[Accessory]:
        for obj in self.objects:
            if obj.object_id is not None and obj.object_id == object_id:
                return obj
        return None

    def _connection_state(self, obj: Accessory, object_id: int, connected: bool) -> None:
        self.fw.emit(msgs.ObjectConnectionState(object_id=object_id, factory_id=obj.factory_id,
                                                object_type=obj.object_type, connected=connected))

    def _leave(self, obj: Accessory, now: float) -> None:
        """``obj`` lost its slot (the caller gave it away): disconnected if it was, and it
        advertises again."""
        if obj.object_id is not None:
            slot, obj.object_id = obj.object_id, None
            self._connection_state(obj, slot, False)
        obj.stream_accel = False
        obj.next_available = now + self.fw.config.object_available_period if obj.in_range else math.inf

    def _connect(self, obj: Accessory, slot: int, now: float) -> None:
        obj.object_id = slot
        obj.next_power = now + 0.5
        self._connection_state(obj, slot, True)
        if obj.index:  # a cube (the charger has no accelerometer here)
            def report(t: float, obj: Accessory = obj) -> None:
                if obj.object_id == slot and self.fw.connected:
                    self.fw.emit(msgs.ObjectUpAxisChanged(timestamp_ms=self.fw.timestamp_ms(t),
                                                          object_id=slot, axis=obj.up_axis))
            self.fw.at(now + UP_AXIS_REPORT_S, report)

    def _on_ObjectConnect(self, m: Any, now: float) -> None:
        """SetPropSlot(factory_id, slot), as Anki's body firmware takes it (Radio::assignProp):
        a slot beyond the radio's is ignored. Factory id 0 empties the slot, answered "not
        connected" with the factory id it was given to (0: none). Another factory id is
        given the slot: an object connected there that is another leaves ("not connected"),
        the same one is confirmed ("connected"); the object connects once it is heard (at
        once here if it is in range, else when it comes back), and an unknown factory id
        is never heard."""
        factory_id, slot = int(m.factory_id), int(m.slot)
        if slot >= RADIO_SLOTS:
            return
        holder = self._by_id(slot)
        given, self.slots[slot] = self.slots[slot], None
        if not factory_id:
            if holder is not None:
                self._leave(holder, now)
            else:
                was = self._by_factory(given) if given else None
                if was is not None:
                    self._leave(was, now)
                self.fw.emit(msgs.ObjectConnectionState(
                    object_id=slot, factory_id=given or 0, connected=False,
                    object_type=was.object_type if was is not None else _ObjectType.InvalidObject))
            return
        if holder is not None and holder.factory_id == factory_id:
            self.slots[slot] = factory_id
            self._connection_state(holder, slot, True)
            return
        given_to = self._by_factory(given) if given else None
        for other in (holder, given_to if given_to is not holder else None):
            if other is not None and other.factory_id != factory_id:
                self._leave(other, now)
        obj = self._by_factory(factory_id)
        if obj is not None and self.slot_of(obj) is not None:  # given another slot before: moves
            self.slots[self.slot_of(obj)] = None
            self._leave(obj, now)
        self.slots[slot] = factory_id
        if obj is not None and obj.in_range:
            self._connect(obj, slot, now)

    def _on_SetAccessoryDiscovery(self, m: Any, now: float) -> None:
        self.discovery = bool(m.enable)

    def _on_CubeId(self, m: Any, now: float) -> None:
        obj = self._by_id(int(m.object_id))
        self._selected = int(m.object_id) if obj is not None else None
        if obj is not None:
            obj.rotation_period_frames = int(m.rotation_period_frames)

    def _on_CubeLights(self, m: Any, now: float) -> None:
        if self._selected is None:
            return
        obj = self._by_id(self._selected)
        if obj is not None:
            obj.lights = list(m.states)

    def _on_StreamObjectAccel(self, m: Any, now: float) -> None:
        """A cube's accelerometer stream on or off; the charger has no accelerometer here: ignored."""
        obj = self._by_id(int(m.object_id))
        if obj is not None and obj.index:
            if m.enable and not any(o.stream_accel for o in self.objects):
                self._next_accel = now
            if m.enable:  # one slot in Anki's body firmware: one cube streams at a time
                for other in self.objects:
                    other.stream_accel = False
            obj.stream_accel = bool(m.enable)

    # ------------------------------------------------------------------ things done to the objects

    def cube(self, n: int) -> Accessory:
        if _whole(n) not in range(1, 4):
            raise ValueError(f"cube number must be 1..3, got {n!r}")
        return self.objects[int(n) - 1]

    def _connected_cube(self, n: int) -> Optional[Accessory]:
        obj = self.cube(n)
        return obj if obj.object_id is not None and self.fw.connected else None

    def tap(self, n: int, now: float, taps: int, intensity: int = 79, jolt: bool = False) -> bool:
        """ObjectTapped of ``taps`` (1..255) and ``intensity`` (tap_pos - tap_neg, 0..255; each
        a signed byte); ``jolt``: the tap shook the cube, which also reports a move and its end
        (as real cubes often do). False if the cube is not connected; ValueError for a value
        outside those ranges."""
        for name, value, low in (("taps", taps, 1), ("intensity", intensity, 0)):
            if _whole(value) not in range(low, 256):
                raise ValueError(f"tap_cube: {name} must be a whole number {low}..255, got {value!r}")
        obj = self._connected_cube(n)
        if obj is None:
            return False
        stamp = self.fw.timestamp_ms(now)
        self.fw.emit(msgs.ObjectTapped(timestamp_ms=stamp, object_id=obj.object_id,
                                       num_taps=taps, tap_time=12,
                                       tap_neg=-((intensity + 1) // 2), tap_pos=intensity // 2))
        if jolt:
            self.fw.emit(msgs.ObjectMoved(timestamp_ms=stamp, object_id=obj.object_id,
                                          active_accel_x=20.0, active_accel_y=-9.0,
                                          active_accel_z=70.0, axis_of_accel=obj.up_axis))
            self.fw.emit(msgs.ObjectStoppedMoving(timestamp_ms=stamp, object_id=obj.object_id))
        return True

    def move(self, n: int, now: float, accel: Tuple[float, float, float], axis: int) -> bool:
        obj = self._connected_cube(n)
        if obj is None:
            return False
        self.fw.emit(msgs.ObjectMoved(timestamp_ms=self.fw.timestamp_ms(now), object_id=obj.object_id,
                                      active_accel_x=accel[0], active_accel_y=accel[1],
                                      active_accel_z=accel[2], axis_of_accel=axis))
        return True

    def stop(self, n: int, now: float) -> bool:
        obj = self._connected_cube(n)
        if obj is None:
            return False
        self.fw.emit(msgs.ObjectStoppedMoving(timestamp_ms=self.fw.timestamp_ms(now),
                                              object_id=obj.object_id))
        return True

    def set_up_axis(self, n: int, axis: int, now: float) -> bool:
        """Cube ``n`` turned over: ``axis`` (an UpAxis: 0..5, or 7 for UnknownAxis) points up
        (ValueError for another value). False if it is not connected."""
        if _whole(axis) not in _UP_AXES.values():
            named = ", ".join(f"{value} ({name})" for name, value in _UP_AXES.items())
            raise ValueError(f"set_cube_up_axis: axis must be an UpAxis: one of {named}; got {axis!r}")
        self.cube(n).up_axis = int(axis)
        obj = self._connected_cube(n)
        if obj is None:
            return False
        self.fw.emit(msgs.ObjectUpAxisChanged(timestamp_ms=self.fw.timestamp_ms(now),
                                              object_id=obj.object_id, axis=axis))
        return True

    def set_battery(self, n: int, level: int, now: float) -> None:
        """Cube ``n``'s battery: ``level`` as ObjectPowerLevel sends it, a whole number 0..255 of
        hundredths of a volt (ValueError for another value), reported at once if it is connected."""
        obj = self.cube(n)
        if _whole(level) not in range(256):
            raise ValueError("set_cube_battery: level must be a whole number 0..255 (hundredths of a volt: "
                             f"150 is 1.50 V), got {level!r}")
        obj.battery_level = int(level)
        obj.next_power = now

    def set_in_range(self, n: int, in_range: bool, now: float) -> None:
        """Take cube ``n`` (1..3; 0: the charger) out of radio range or bring it back."""
        if _whole(n) not in range(4):
            raise ValueError(f"object number must be 0 (charger) or 1..3, got {n!r}")
        obj = self.objects[int(n) - 1] if n else self.objects[3]
        if bool(in_range) == obj.in_range:
            return
        obj.in_range = bool(in_range)
        if in_range:
            obj.next_available = now  # it advertises, or connects in the slot it holds
            return
        obj.next_available = math.inf
        obj.stream_accel = False  # its stream ends, as when it leaves its slot (_leave)
        if obj.object_id is not None:  # the robot keeps its slot (slots), and says it dropped
            object_id, obj.object_id = obj.object_id, None
            if self.fw.connected:
                self._connection_state(obj, object_id, False)

    # ------------------------------------------------------------------ ground truth

    def lights(self) -> Dict[str, Any]:
        return {"cubes": {obj.index: list(obj.lights) for obj in self.objects if obj.index},
                "charger": list(self.objects[3].lights)}

    def object_ids(self) -> Dict[int, Optional[int]]:
        """Cube number (1..3, 0 for the charger) -> object id, or None if not connected."""
        return {obj.index: obj.object_id for obj in self.objects}

    def object_states(self) -> Dict[int, Dict[str, Any]]:
        """Cube number (1..3, 0 for the charger) -> factory id, object id (connected), the slot
        it holds (connected or not), in range, light states, rotation period (frames),
        accelerometer stream, battery level, up axis."""
        return {obj.index: {"factory_id": obj.factory_id, "object_id": obj.object_id,
                            "slot": self.slot_of(obj),
                            "in_range": obj.in_range, "lights": list(obj.lights),
                            "rotation_period_frames": obj.rotation_period_frames,
                            "stream_accel": obj.stream_accel, "battery_level": obj.battery_level,
                            "up_axis": obj.up_axis}
                for obj in self.objects}
