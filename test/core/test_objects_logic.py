"""Cubes, charger and lights without ROS: light programme conversion, the object registry
under an explicit clock, the light animation library, the parameters, and the simulated
cubes going out of range (cozmo_driver.driver.objects, .light_animations, sim.model)."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest

from cozmo_driver.driver.commands import CommandError
from cozmo_driver.driver.diagnostics import OK, WARN
from cozmo_driver.driver.light_animations import (BUILTIN, LightAnimationLibrary, TARGET_KINDS,
                                                  parse_color)
from cozmo_driver.driver.objects import (MAX_OFFSET_S, OFF, Light, ObjectEventType as EV,
                                         ObjectRegistry, ObjectSettings, ObjectType, UpAxis,
                                         backpack_messages, cube_light_messages, known_away, led_count,
                                         light_state, object_light_states, object_name,
                                         rotation_frames, stop_accel_away)
from cozmo_driver.driver.parameters import defaults, validate_all, validate_change
from cozmo_driver.protocol import messages as m
from cozmo_driver.sim.model import (CHARGER_FACTORY_ID, CUBE_FACTORY_IDS, ModelConfig,
                                    RobotModel)

C1, C2, C3 = CUBE_FACTORY_IDS
CH = CHARGER_FACTORY_ID
RED, GREEN, BLUE, WHITE = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (1.0, 1.0, 1.0)


def test_the_modules_import_without_rclpy():
    import subprocess
    import sys
    code = ("import sys, cozmo_driver.driver.objects, cozmo_driver.driver.light_animations; "
            "sys.exit(1 if any(m.split('.')[0] in ('rclpy', 'std_msgs', 'cozmo_interfaces') "
            "for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ----------------------------------------------------------------------------- light programmes

def test_light_state_colours_are_exact_rgb555_and_times_whole_frames():
    warnings: list = []
    s = light_state(Light(on_color=RED, off_color=(3 / 31, 17 / 31, 30 / 31), on_period=0.51,
                          off_period=0.03, transition_on_period=0.09, transition_off_period=7.65,
                          offset=-0.18), "x", warnings)   # the lights' frames are 30 ms
    assert s.on_color == 0x7C00
    assert s.off_color == (3 << 10) | (17 << 5) | 30
    assert (s.on_frames, s.off_frames, s.transition_on_frames, s.transition_off_frames) == (17, 1, 3, 255)
    assert s.offset == 6            # sent negated: the firmware moves a light ahead by it
    assert warnings == []
    # rounded up from whole milliseconds, as Anki's engine does ((ms + 29) / 30): a period
    # too short to show is one frame, not none (float noise does not add a frame: 0.3 s is 10)
    frames = [light_state(Light(on_period=t, offset=-t), "x", []) for t in (0.1, 0.001, 0.3, 0.0304)]
    assert [(f.on_frames, f.offset) for f in frames] == [(4, 4), (1, 1), (10, 10), (1, 1)]
    assert rotation_frames(0.1, "r", []) == 4
    assert light_state(Light(on_color=GREEN), "x", []).on_color == 0x03E0
    assert light_state(Light(on_color=BLUE), "x", []).on_color == 0x001F
    assert light_state(Light(on_color=WHITE), "x", []).on_color == 0x7FFF
    assert light_state(OFF, "x", []).on_color == 0


def test_a_steady_colour_is_sent_as_one_colour_and_the_offset_delays_the_start():
    """Anki's body firmware (Lights::update, CalculateLEDColor): a light holds one colour only
    when on and off colours are the same; otherwise it cycles, starting at frame offset +
    off frames, and a cycle of 0 frames in all would never leave its loop."""
    steady = light_state(Light(on_color=RED, off_color=BLUE, offset=0.5), "x", [])
    assert (steady.on_color, steady.off_color, steady.offset) == (0x7C00, 0x7C00, 0)
    assert (steady.on_frames, steady.off_frames, steady.transition_on_frames,
            steady.transition_off_frames) == (0, 0, 0, 0)
    blink = light_state(Light(on_color=RED, on_period=0.3, off_period=0.3, offset=0.3), "x", [])
    assert (blink.off_color, blink.offset) == (0, -10)   # 10 frames later than offset 0
    # what the firmware then shows, frame by frame: the chase of the built-in "chase" animation
    # runs front to back (LED 0, then 1, then 2)
    def first_on(state) -> int:
        phase, frames = state.offset + state.off_frames, 0
        hold = [state.off_frames, state.on_frames]       # keyframes: off colour, then on colour
        k, on = 0, False
        while not on:                                     # the firmware's HOLD/FADE cycle,
            if phase >= hold[k]:                          # transitions of 0 frames
                phase -= hold[k]
                k = 1 - k
                on = k == 1
                continue
            phase += 1
            frames += 1
        return frames
    chase = BUILTIN["chase"].backpack[:3]
    starts = [first_on(light_state(light, "x", [])) for light in chase]
    assert starts == sorted(starts) and len(set(starts)) == 3


def test_out_of_range_times_are_clamped_with_a_warning_naming_the_field():
    warnings: list = []
    s = light_state(Light(on_period=9.0, off_period=-1.0, offset=5000.0), "object_lights.lights[2]",
                    warnings)
    assert (s.on_frames, s.off_frames, s.offset) == (255, 0, -32767)
    assert len(warnings) == 3
    assert warnings[0].startswith("object_lights.lights[2].on_period = 9 s is outside [0, 7.65] s")
    assert "object_lights.lights[2].off_period" in warnings[1]
    assert "object_lights.lights[2].offset" in warnings[2]
    assert light_state(Light(on_period=1.0, offset=-5000.0), "x", []).offset == 32767
    assert abs(MAX_OFFSET_S - 983.01) < 0.01


def f32(x: float) -> float:
    """``x`` as LightState's float32 fields carry it (7.65 arrives as 7.650000095)."""
    import struct
    return struct.unpack("<f", struct.pack("<f", x))[0]


def test_the_limits_as_float32_carries_them_are_not_out_of_range():
    assert f32(7.65) > 7.65 and f32(983.01) > 983.01
    warnings: list = []
    s = light_state(Light(on_period=f32(7.65), off_period=f32(7.65), transition_on_period=f32(7.65),
                          transition_off_period=f32(7.65), offset=f32(983.01)), "x", warnings)
    assert (s.on_frames, s.off_frames, s.transition_on_frames, s.transition_off_frames, s.offset) == (
        255, 255, 255, 255, -32767)
    assert light_state(Light(on_period=1.0, offset=f32(-983.01)), "x", warnings).offset == 32767
    assert rotation_frames(f32(7.65), "r", warnings) == 255
    assert warnings == []
    # a millisecond more is more frames than the field holds: clamped, with the warning
    assert light_state(Light(on_period=7.651), "x", warnings).on_frames == 255
    assert warnings == ["x.on_period = 7.651 s is outside [0, 7.65] s: clamped to 7.65 s"]


@pytest.mark.parametrize("field, light", [
    ("on_period", Light(on_period=math.nan)),
    ("transition_off_period", Light(transition_off_period=math.inf)),
    ("offset", Light(offset=-math.inf)),
])
def test_nan_or_infinite_times_refuse_the_whole_programme(field, light):
    with pytest.raises(CommandError, match=rf"^object_lights\.lights\[1\]\.{field} is -?(nan|inf)"):
        light_state(light, "object_lights.lights[1]", [])


def test_bad_colours_are_refused_naming_the_channel():
    with pytest.raises(CommandError, match=r"backpack_light_pattern\.left\.on_color\.g = 1\.5"):
        light_state(Light(on_color=(0.0, 1.5, 0.0)), "backpack_light_pattern.left", [])
    with pytest.raises(CommandError, match=r"x\.off_color\.b is nan: not a finite number"):
        light_state(Light(off_color=(0.0, 0.0, math.nan)), "x", [])


def test_object_light_states_one_for_all_or_one_per_led():
    cube = object_light_states([Light(on_color=RED)], 4, "f", "cube1", [])
    assert [s.on_color for s in cube] == [0x7C00] * 4
    charger = object_light_states([Light(on_color=RED), Light(on_color=GREEN), Light(on_color=BLUE)],
                                  3, "f", "charger", [])
    assert [s.on_color for s in charger] == [0x7C00, 0x03E0, 0x001F, 0]   # the 4th, unused, off
    with pytest.raises(CommandError, match=r"object_lights\.lights has 2 entries: give 1 .* or 4"):
        object_light_states([OFF, OFF], 4, "object_lights.lights", "cube1", [])
    with pytest.raises(CommandError, match="give 1 .* or 3"):
        object_light_states([OFF] * 4, 3, "object_lights.lights", "charger", [])


def test_rotation_and_backpack_and_cube_messages():
    warnings: list = []
    assert rotation_frames(0.18, "object_lights.rotation_period", warnings) == 6
    assert rotation_frames(20.0, "object_lights.rotation_period", warnings) == 255
    assert "object_lights.rotation_period = 20 s" in warnings[0]
    with pytest.raises(CommandError, match=r"object_lights\.rotation_period is nan"):
        rotation_frames(math.nan, "object_lights.rotation_period", [])
    lights = [Light(on_color=c) for c in (RED, GREEN, BLUE, WHITE, (1.0, 1.0, 0.0))]
    center, side = backpack_messages(lights, ["front", "middle", "back", "left", "right"], [])
    assert center.NAME == "LightStateCenter" and side.NAME == "LightStateSide"
    assert [s.on_color for s in center.states] == [0x7C00, 0x03E0, 0x001F]
    assert [s.on_color for s in side.states] == [0x7FFF, 0x7FE0]
    cube_id, cube_lights = cube_light_messages(7, object_light_states([OFF], 4, "f", "c", []), 6)
    assert (cube_id.NAME, cube_id.object_id, cube_id.rotation_period_frames) == ("CubeId", 7, 6)
    assert cube_lights.NAME == "CubeLights" and len(cube_lights.states) == 4
    for message in (center, side, cube_id, cube_lights):   # they encode, and decode the same
        assert type(message).decode_body(message.encode_body()) == message


def test_cube_colours_are_white_balanced_as_anki_did():
    """Anki's engine (CubeLightComponent::WhiteBalanceColor): a cube colour with any red has
    its green and blue at 60 %, so that white looks white on a cube; the charger's and the
    backpack's colours are sent as given."""
    from cozmo_driver.driver.objects import CUBE_WHITE_BALANCE
    assert CUBE_WHITE_BALANCE == 0.6
    light = Light(on_color=WHITE, off_color=(0.0, 1.0, 1.0), on_period=0.3, off_period=0.3)
    cube = object_light_states([light], 4, "f", "cube1", [], white_balance=True)[0]
    assert (cube.on_color, cube.off_color) == ((31 << 10) | (19 << 5) | 19, (31 << 5) | 31)
    plain = object_light_states([light], 3, "f", "charger", [])[0]
    assert plain.on_color == 0x7FFF


def test_names_and_led_counts():
    assert [object_name(t, 5) for t in (1, 2, 3, 13, 9)] == ["cube1", "cube2", "cube3", "charger", "object_5"]
    assert [led_count(t) for t in (1, 2, 3, 13, 9)] == [4, 4, 4, 3, 0]


# ----------------------------------------------------------------------------- the registry

class Rig:
    """A registry under an explicit clock, active, with the robot connected."""

    def __init__(self, ready: bool = True, **settings) -> None:
        settings.setdefault("object_timeout", 3.0)
        settings.setdefault("connect_timeout", 2.0)
        settings.setdefault("reconnect_min", 1.0)
        settings.setdefault("reconnect_max", 8.0)
        self.reg = ObjectRegistry(ObjectSettings(**settings))
        self.reg.active = True
        self.now = 100.0
        self.slot_of: dict = {}  # factory id -> the radio slot the registry put it in
        if ready:
            self.reg.on_robot_ready(self.now)
            # its first connection empties every radio slot (what an earlier driver left)
            assert self.connects() == [("slot 0", False), ("slot 1", False), ("slot 2", False),
                                       ("slot 3", False)]

    def advance(self, dt: float) -> None:
        self.now += dt
        self.reg.tick(self.now)

    def advertise(self, *objects) -> None:
        for fid, otype, rssi in objects:
            self.reg.on_message(m.ObjectAvailable(factory_id=fid, object_type=otype, rssi=rssi), self.now)

    def all_advertise(self) -> None:
        self.advertise((C1, 1, -50), (C2, 2, -55), (C3, 3, -60), (CH, 13, -62))

    def connects(self) -> list:
        """The ObjectConnects sent (Anki's SetPropSlot) as (factory id, True) for an object put
        in a slot, (the factory id that slot held, False) for a slot emptied (factory id 0),
        ("slot <n>", False) for one emptied that no object was put in here."""
        out = []
        for x in self.reg.pop_messages():
            if x.NAME != "ObjectConnect":
                continue
            if x.factory_id:
                self.slot_of[x.factory_id] = x.slot
                out.append((x.factory_id, True))
            else:
                out.append((next((f for f, s in self.slot_of.items() if s == x.slot), f"slot {x.slot}"), False))
        return out

    def answer(self, fid: int, otype: int, connected: bool, object_id: int | None = None) -> int:
        if object_id is None:  # the robot answers with the slot as the object id
            object_id = self.slot_of.get(fid, 0)
        self.reg.on_message(m.ObjectConnectionState(object_id=object_id, factory_id=fid,
                                                    object_type=otype, connected=connected), self.now)
        return object_id

    def events(self) -> list:
        return [(e.type, e.name) for e in self.reg.pop_events()]

    def connect_one(self, fid: int, otype: int) -> int:
        """``fid`` advertised, connected by auto-connect and answered: its object id."""
        self.advertise((fid, otype, -50))
        self.advance(0.1)
        assert (fid, True) in self.connects()
        return self.answer(fid, otype, True)

    def results(self) -> list:
        return [(r.token, r.success, r.message) for r in self.reg.pop_results()]


def test_discovery_lists_advertised_objects_once_and_ages_them_out():
    rig = Rig()
    rig.all_advertise()
    assert rig.events() == [(EV.APPEARED, "cube1"), (EV.APPEARED, "cube2"), (EV.APPEARED, "cube3"),
                            (EV.APPEARED, "charger")]
    assert rig.reg.take_changed() and not rig.reg.take_changed()
    listed = rig.reg.objects()
    assert [(e.name, e.factory_id, e.object_type, e.rssi, e.connected) for e in listed] == [
        ("charger", CH, 13, -62, False), ("cube1", C1, 1, -50, False),
        ("cube2", C2, 2, -55, False), ("cube3", C3, 3, -60, False)]
    rig.advertise((C1, 1, -44))          # again: no new event, rssi and last_seen follow
    assert rig.events() == [] and not rig.reg.take_changed()
    assert rig.reg.entry(C1).rssi == -44
    rig.reg.settings.auto_connect_cubes = False
    rig.advance(2.9)
    rig.advertise((C1, 1, -45))
    assert rig.events() == []
    rig.advance(0.2)                      # 3.1 s since the others were heard of
    assert sorted(rig.events()) == [(EV.DISAPPEARED, "charger"), (EV.DISAPPEARED, "cube2"),
                                    (EV.DISAPPEARED, "cube3")]
    assert [e.name for e in rig.reg.objects()] == ["cube1"]
    rig.advertise((C2, 2, -55))           # back: it appears again
    assert rig.events() == [(EV.APPEARED, "cube2")]


def test_a_flood_of_advertised_objects_never_holds_more_than_64_and_keeps_the_connected_one():
    from cozmo_driver.driver.objects import _MAX_KNOWN
    rig = Rig()
    rig.all_advertise()
    rig.advance(0.25)
    assert (C1, True) in rig.connects()
    rig.answer(C1, 1, True)
    rig.events()
    for k in range(2000):                 # ever new factory ids, all fresh (listed)
        rig.now += 0.0005
        rig.advertise((0x20000000 + k, 1, -70))
    assert len(rig.reg._entries) <= _MAX_KNOWN
    assert rig.reg.entry(C1) is not None and rig.reg.entry(C1).connected
    # all heard of within object_timeout: the newcomers beyond 64 are ignored, none forgotten
    assert rig.reg.entry(0x20000000 + 1999) is None
    assert EV.DISAPPEARED not in [e.type for e in rig.reg.pop_events()]
    assert rig.reg.counters["advertisements ignored (more than 64 objects)"] == 2000 - (_MAX_KNOWN - 4)
    # once the kept ones are not heard of for object_timeout, newcomers take their places
    rig.now += 3.5                        # (no tick: the stale ones are still listed)
    for k in range(2000, 2100):
        rig.now += 0.0005
        rig.advertise((0x20000000 + k, 1, -70))
    assert len(rig.reg._entries) <= _MAX_KNOWN and rig.reg.entry(C1).connected
    assert rig.reg.entry(0x20000000 + 2060) is not None and rig.reg.entry(0x20000000 + 2061) is None
    forgotten = [e for e in rig.reg.pop_events() if e.type == EV.DISAPPEARED]
    assert len(forgotten) == _MAX_KNOWN - 3        # not cube1, nor cube2 and cube3, being connected
    assert forgotten[-1].description.startswith("cube1 (0x2000003b) forgotten: not heard of for 4.")


def test_more_than_64_objects_advertising_again_and_again_list_64_and_ignore_the_others():
    """66 objects advertising once a second: the 64 kept are each heard of within
    object_timeout, so the other two are ignored (counted, and warned of at most every 10 s)
    rather than let in by forgetting the one heard of longest ago, 1 s ago, whose next
    advertisement pushed out another: a DISAPPEARED, an APPEARED and a list published at
    every advertisement. One of the 64 silent for object_timeout makes room for one of them."""
    rig = Rig()
    ids = [0x20000000 + k for k in range(66)]
    changes = 0

    def second(s: int, who) -> None:
        nonlocal changes
        for k, fid in enumerate(who):
            rig.now = 100.0 + s + k / len(ids)
            rig.advertise((fid, 1 + (fid - ids[0]) % 3, -70))
            rig.reg.tick(rig.now)
            changes += rig.reg.take_changed()

    for s in range(30):
        second(s, ids)
    events = rig.reg.pop_events()
    assert [e.type for e in events] == [EV.APPEARED] * 64 and {e.factory_id for e in events} == set(ids[:64])
    assert changes == 64 and len(rig.reg.objects()) == 64
    assert rig.reg.entry(ids[64]) is None and rig.reg.entry(ids[65]) is None
    assert rig.reg.counters["advertisements ignored (more than 64 objects)"] == 60
    warnings = rig.reg.pop_warnings()
    assert len(warnings) == 3                # at once, then at most one every 10 s
    assert warnings[0] == ("more than 64 objects advertise: 1 advertisement ignored, the last from "
                           "cube2 (0x20000040): at most 64 are listed, and a new one only "
                           "once one of them is not heard of for object_timeout (3 s)")
    assert re.match(r"more than 64 objects advertise: 2\d advertisements ignored in the last \d+\.\d s, the last "
                    r"from cube[23] \(0x2000004[01]\): at most 64 are listed", warnings[1])
    # ids[0] falls silent: once it has not been heard of for object_timeout it leaves the
    # list, and the next newcomer takes its place
    for s in range(30, 35):
        second(s, ids[1:])
    events = rig.events()
    assert events == [(EV.DISAPPEARED, "cube1"), (EV.APPEARED, "cube2")]
    assert rig.reg.entry(ids[0]) is None and rig.reg.entry(ids[64]).listed and rig.reg.entry(ids[65]) is None
    # the ignored ones left unsaid are said at a tick once 10 s have passed, without another
    rig.reg.pop_warnings()
    for s in range(35, 50):
        second(s, ids[1:65])
    rig.advance(0.0)
    warnings = rig.reg.pop_warnings()
    assert len(warnings) == 1 and "advertisements ignored in the last" in warnings[0]
    rig.advance(20.0)
    assert rig.reg.pop_warnings() == []


def test_auto_connect_connects_the_three_cubes_once_then_events_flow():
    rig = Rig()
    rig.all_advertise()
    rig.advance(0.25)
    assert sorted(rig.connects()) == sorted([(C1, True), (C2, True), (C3, True)])   # not the charger
    rig.advance(0.25)
    assert rig.connects() == []             # pending: not sent twice
    ids = {fid: rig.answer(fid, t, True) for fid, t in ((C1, 1), (C2, 2), (C3, 3))}
    events = [e for e in rig.reg.pop_events() if e.type != EV.APPEARED]
    assert [(e.type, e.name) for e in events] == [
        (EV.CONNECTED, "cube1"), (EV.CONNECTED, "cube2"), (EV.CONNECTED, "cube3")]
    assert events[0].description == "cube1 (0xc0b10001) connected (object id 0)"
    # each in a radio slot of its own (Anki's SetPropSlot), the slot its object id
    assert sorted(rig.slot_of.values()) == [0, 1, 2] and ids == rig.slot_of
    assert rig.reg.entry(C1).connected and rig.reg.entry(C1).object_id == ids[C1]
    cube2 = ids[C2]
    rig.reg.on_message(m.ObjectTapped(timestamp_ms=1, object_id=cube2, num_taps=2, tap_time=12,
                                      tap_neg=-38, tap_pos=41), rig.now)
    rig.advance(0.5)    # the tap published after its group's 75 ms; moves now are not the tap's
    rig.reg.on_message(m.ObjectMoved(timestamp_ms=2, object_id=cube2, active_accel_x=2.0,
                                     active_accel_y=-1.0, active_accel_z=64.0, axis_of_accel=5), rig.now)
    rig.reg.on_message(m.ObjectMoved(timestamp_ms=3, object_id=cube2, active_accel_x=1.0,
                                     active_accel_y=1.0, active_accel_z=1.0, axis_of_accel=5), rig.now)
    assert rig.reg.entry(C2).moving
    rig.reg.on_message(m.ObjectStoppedMoving(timestamp_ms=4, object_id=cube2), rig.now)
    rig.reg.on_message(m.ObjectStoppedMoving(timestamp_ms=5, object_id=cube2), rig.now)
    rig.reg.on_message(m.ObjectUpAxisChanged(timestamp_ms=6, object_id=cube2, axis=1), rig.now)
    rig.reg.on_message(m.ObjectUpAxisChanged(timestamp_ms=7, object_id=cube2, axis=1), rig.now)
    rig.reg.on_message(m.ObjectTapFiltered(timestamp_ms=8, object_id=cube2, time=3, intensity=40), rig.now)
    events = rig.reg.pop_events()
    assert [e.type for e in events] == [EV.TAPPED, EV.MOVED, EV.STOPPED_MOVING, EV.UP_AXIS_CHANGED]
    tap, moved, _, axis = events
    assert (tap.tap_count, tap.tap_intensity, tap.description) == (2, 79.0, "cube2 tapped twice (intensity 79)")
    g = 9.80665                       # the cube's counts, 64 to 1 g, in m/s^2
    assert moved.acceleration == pytest.approx((2 * g / 64, -g / 64, g))
    assert (axis.up_axis, axis.description) == (UpAxis.X_POSITIVE, "cube2 now rests with +X up")
    assert rig.reg.entry(C2).up_axis == UpAxis.X_POSITIVE and not rig.reg.entry(C2).moving
    assert rig.reg.counters["filtered taps (not published)"] == 1
    rig.reg.take_changed()
    rig.reg.on_message(m.ObjectPowerLevel(object_id=ids[C3], missed_packets=4, battery_level=77), rig.now)
    assert (rig.reg.entry(C3).battery_level, rig.reg.entry(C3).missed_packets) == (77, 4)
    assert rig.reg.take_changed()
    rig.reg.on_message(m.ObjectAccel(timestamp_ms=9, object_id=ids[C1], accel_x=0.0, accel_y=-64.0,
                                     accel_z=32.0), rig.now)
    sample, = rig.reg.pop_accel()
    assert (sample.name, sample.factory_id) == ("cube1", C1)
    assert sample.acceleration == pytest.approx((0.0, -9.80665, 4.903325))
    rig.reg.on_message(m.ObjectTapped(timestamp_ms=1, object_id=99, num_taps=1, tap_time=1, tap_neg=0,
                                      tap_pos=0), rig.now)
    assert rig.reg.counters["messages from unknown object ids"] == 1 and rig.reg.pop_events() == []
    # connected objects never age out (they are not advertised; the robot reports a drop)
    rig.advance(30.0)
    assert {e.name for e in rig.reg.objects() if e.connected} == {"cube1", "cube2", "cube3"}
    report = dict(rig.reg.report(True).values)
    assert report["cubes connected"] == "3" and report["events TAPPED"] == "1"


def test_auto_connect_picks_the_strongest_cube_and_the_charger_when_asked():
    rig = Rig(auto_connect_charger=True)
    other = 0xC0B1FFFF
    rig.advertise((C1, 1, -70), (other, 1, -40), (CH, 13, -62))
    rig.advance(0.1)
    assert sorted(rig.connects()) == sorted([(other, True), (CH, True)])


def test_the_robots_rssi_is_the_radios_magnitude_and_the_closest_cube_is_connected():
    """Anki's body firmware sends the nRF radio's RSSISAMPLE: the signal's magnitude, a
    positive number of -dBm (lower is closer). It is published as dBm (higher is closer),
    and the cube picked is the closest, not the farthest."""
    rig = Rig()
    other = 0xC0B1FFFF
    rig.advertise((C1, 1, 70), (other, 1, 40))
    assert (rig.reg.entry(C1).rssi, rig.reg.entry(other).rssi) == (-70, -40)
    rig.advance(0.1)
    assert rig.connects() == [(other, True)]


def test_nothing_is_connected_while_inactive_or_from_adverts_older_than_the_robots_connection():
    rig = Rig(ready=False)
    rig.all_advertise()
    rig.advance(0.1)
    assert rig.connects() == []             # the robot is not ready
    rig.reg.on_robot_ready(rig.now)
    rig.advance(0.1)
    assert rig.connects() == [(f"slot {n}", False) for n in range(4)]   # only its slots emptied:
    # adverts from before this connection of the robot connect nothing
    rig.reg.active = False
    rig.all_advertise()
    rig.advance(0.1)
    assert rig.connects() == []             # inactive
    rig.reg.active = True
    rig.advance(0.1)
    assert len(rig.connects()) == 3


def test_a_dropped_cube_is_reconnected_with_back_off_once_it_advertises_again():
    rig = Rig(object_timeout=10.0)
    cube1 = rig.connect_one(C1, 1)
    rig.events()
    rig.reg.set_lights(rig.reg.entry(C1), object_light_states([Light(on_color=RED)], 4, "f", "c", []), 6)
    rig.reg.set_accel_stream(rig.reg.entry(C1), True)
    rig.reg.pop_messages()
    rig.advance(0.5)
    rig.answer(C1, 1, False, object_id=cube1)        # it dropped
    assert rig.events() == [(EV.DISCONNECTED, "cube1")]
    assert rig.reg.counters["connections dropped"] == 1
    assert not rig.reg.entry(C1).connected and rig.reg.entry(C1).listed
    rig.advertise((C1, 1, -50))
    rig.advance(0.9)
    assert rig.connects() == []                      # back-off: 1 s
    rig.advance(0.2)
    assert rig.connects() == [(C1, True)]
    rig.advance(2.1)                                 # no answer within connect_timeout (2 s)
    assert rig.connects() == []
    assert rig.reg.counters["connection failures"] == 1
    rig.advertise((C1, 1, -50))
    rig.advance(1.9)                                 # second failure: 2 s
    assert rig.connects() == []
    rig.advertise((C1, 1, -50))
    rig.advance(0.2)
    assert rig.connects() == [(C1, True)]
    rig.answer(C1, 1, False)                         # the robot could not connect: 4 s
    rig.advertise((C1, 1, -50))
    rig.advance(2.0)
    rig.advertise((C1, 1, -50))
    rig.advance(1.9)
    assert rig.connects() == []
    rig.advance(0.2)
    assert rig.connects() == [(C1, True)]
    new_id = rig.answer(C1, 1, True)
    assert rig.events() == [(EV.CONNECTED, "cube1")]
    restored = rig.reg.pop_messages()                # its lights and accelerometer stream again
    assert [x.NAME for x in restored] == ["CubeId", "CubeLights", "StreamObjectAccel"]
    # (to the slot it was given again: its object id)
    assert restored[0].object_id == new_id == rig.slot_of[C1] and restored[0].rotation_period_frames == 6
    assert restored[1].states[0].on_color == 0x7C00 and restored[2].object_id == new_id
    # a connection that lasted reconnect_max resets the back-off
    rig.advance(8.0)
    rig.answer(C1, 1, False, object_id=new_id)
    assert rig.reg.entry(C1).retry_at == pytest.approx(rig.now + 1.0)


@pytest.mark.parametrize("lowered", [{"reconnect_max": 1.0}, {"reconnect_min": 1.0}])
def test_a_lower_reconnect_max_or_min_shortens_a_wait_already_scheduled(lowered):
    """object_reconnect_max or _min lowered at run time: a wait scheduled with the old values
    ends when the new ones would have it end, counted from the failure (or drop)."""
    rig = Rig(object_timeout=10.0, reconnect_min=5.0, reconnect_max=8.0)
    cube1 = rig.connect_one(C1, 1)
    rig.advance(0.5)
    rig.answer(C1, 1, False, object_id=cube1)        # dropped: the next attempt in 5 s
    rig.advance(0.5)
    for name, value in lowered.items():
        setattr(rig.reg.settings, name, value)
    rig.advertise((C1, 1, -50))
    rig.advance(0.4)
    assert rig.connects() == []                      # 0.9 s after the drop
    rig.advance(0.2)
    assert rig.connects() == [(C1, True)]            # 1.1 s after it, not 5


def off_sent(messages: list, object_id: int) -> bool:
    """``messages`` are a CubeId for ``object_id`` and a CubeLights putting every LED out."""
    return [(x.NAME, getattr(x, "object_id", object_id)) for x in messages] == [
        ("CubeId", object_id), ("CubeLights", object_id)] and all(
        st.on_color == st.off_color == 0 for st in messages[1].states)


def test_lights_put_out_while_the_cube_is_away_are_put_out_when_it_connects_again():
    """A behavior ending while the robot was lost put its cube's lights out once the robot was
    back, before the cube was: that off was refused ("not connected") and the cube, connected
    again, got the behavior's colour back, for good. Then it was taken and nothing was sent,
    not even on the cube's return, and the cube (which keeps its programme across a drop)
    stayed lit. owe_lights_off takes the off for a cube that is away: sent when it connects."""
    rig = Rig(object_timeout=10.0)
    cube1 = rig.connect_one(C1, 1)
    rig.reg.set_lights(rig.reg.entry(C1), object_light_states([Light(on_color=RED)], 4, "f", "c", []), 0)
    rig.reg.pop_messages()
    assert rig.reg.owe_lights_off(C1) is None          # connected: the off is sent as any command
    assert rig.reg.owe_lights_off(0xC0B1FFFF) is None  # unknown
    rig.answer(C1, 1, False, object_id=cube1)        # it dropped
    assert rig.reg.owe_lights_off(C1) is rig.reg.entry(C1)
    assert rig.reg.pop_messages() == []              # nothing to send it now
    rig.advertise((C1, 1, -50))
    rig.advance(1.1)
    assert rig.connects() == [(C1, True)]
    rig.answer(C1, 1, True)
    assert off_sent(rig.reg.pop_messages(), cube1)   # the off, not the old programme


def test_lights_put_out_while_the_robot_is_away_are_put_out_when_it_returns():
    """With the robot lost every cube is known and not connected: an off for one (or, by
    play_light_animation, for "cubes" or a name: known_away) is taken, and the off, not the
    cube's programme, is sent when it connects on the robot's return; the others' programmes
    are sent again."""
    rig = Rig(object_timeout=10.0)
    ids = {fid: rig.connect_one(fid, t) for fid, t in ((C1, 1), (C2, 2))}
    for fid in ids:
        rig.reg.set_lights(rig.reg.entry(fid), object_light_states([Light(on_color=RED)], 4, "f", "c", []), 0)
    rig.reg.pop_messages()
    assert known_away(rig.reg, "cubes") == [] and known_away(rig.reg, "cube1") == []
    rig.reg.on_robot_lost(rig.now)
    assert [e.factory_id for e in known_away(rig.reg, "cubes")] == [C1, C2]
    assert [e.factory_id for e in known_away(rig.reg, "cube1")] == [C1] and known_away(rig.reg, "charger") == []
    assert rig.reg.owe_lights_off(C1) is rig.reg.entry(C1)
    rig.advance(1.0)
    rig.reg.on_robot_ready(rig.now)
    rig.connects()
    rig.advertise((C1, 1, -50), (C2, 2, -50))
    rig.advance(0.1)
    rig.connects()
    cube1 = rig.answer(C1, 1, True)
    assert off_sent(rig.reg.pop_messages(), cube1)
    cube2 = rig.answer(C2, 2, True)
    assert [(x.NAME, getattr(x, "object_id", None)) for x in rig.reg.pop_messages()] == [
        ("CubeId", cube2), ("CubeLights", None)]


def test_lights_put_out_while_the_robot_is_away_reach_a_cube_the_robot_connects_by_itself():
    """A robot back that connects a cube again by itself (no ObjectConnect asked: a robot that
    kept the link, or the slot given back) gets the off owed to it at that connection too, and
    a cube whose off was sent keeps getting the off, not an old programme, at later connections."""
    rig = Rig(object_timeout=10.0)
    rig.connect_one(C1, 1)
    rig.reg.set_lights(rig.reg.entry(C1), object_light_states([Light(on_color=RED)], 4, "f", "c", []), 0)
    rig.reg.pop_messages()
    rig.reg.on_robot_lost(rig.now)
    assert rig.reg.owe_lights_off(C1) is rig.reg.entry(C1)
    rig.advance(1.0)
    rig.reg.on_robot_ready(rig.now)
    assert [(x.NAME, x.factory_id, x.slot) for x in rig.reg.pop_messages()] == [("ObjectConnect", 0, 0)]
    rig.answer(C1, 1, True, object_id=2)
    assert off_sent(rig.reg.pop_messages(), 2)
    rig.answer(C1, 1, False, object_id=2)            # it drops, and the robot connects it again
    assert rig.reg.pop_messages() == []
    rig.answer(C1, 1, True, object_id=2)
    assert off_sent(rig.reg.pop_messages(), 2)


def test_an_accelerometer_stream_switched_off_while_its_cube_is_away_is_not_restarted():
    """set_object_accel_stream off for a cube that dropped out was refused (not connected) and
    the stream was switched on again when the cube came back: stop_accel_away takes it, by
    factory id or by type while none of that type is connected, and nothing is restarted."""
    rig = Rig(object_timeout=10.0)
    cube1 = rig.connect_one(C1, 1)
    cube2 = rig.connect_one(C2, 2)
    for fid in (C1, C2):
        rig.reg.set_accel_stream(rig.reg.entry(fid), True)
    rig.reg.pop_messages()
    assert stop_accel_away(rig.reg, C1, 0) is None and stop_accel_away(rig.reg, 0, 1) is None  # connected
    assert stop_accel_away(rig.reg, 0xC0B1FFFF, 0) is None                                    # unknown
    rig.answer(C1, 1, False, object_id=cube1)        # both drop
    rig.answer(C2, 2, False, object_id=cube2)
    assert stop_accel_away(rig.reg, C1, 0) is rig.reg.entry(C1)
    assert stop_accel_away(rig.reg, 0, 2) is rig.reg.entry(C2)
    assert stop_accel_away(rig.reg, 0, 13) is None                                             # no charger
    for fid, otype in ((C1, 1), (C2, 2)):
        rig.advertise((fid, otype, -50))
    rig.advance(1.1)
    rig.connects()
    rig.answer(C1, 1, True)
    rig.answer(C2, 2, True)
    assert [x.NAME for x in rig.reg.pop_messages()] == ["CubeId", "CubeLights"] * 2   # (lights out)


def test_the_back_off_after_a_thousand_drops_is_the_longest_wait_not_an_overflow():
    """The doubling raised OverflowError past 1024 failures in a row (some hours of a cube at
    the radio's edge that the robot pairs again every few seconds), on the I/O thread."""
    rig = Rig(object_timeout=10.0)
    cube1 = rig.connect_one(C1, 1)
    rig.reg.entry(C1).failures = 1500
    rig.events()
    rig.answer(C1, 1, False, object_id=cube1)        # it dropped
    assert rig.events() == [(EV.DISCONNECTED, "cube1")]
    assert rig.reg.entry(C1).retry_at == pytest.approx(rig.now + 8.0)   # reconnect_max


def test_a_cube_that_goes_out_of_range_disappears_and_reconnects_when_back():
    rig = Rig()
    rig.advertise((C3, 3, -60))
    rig.advance(0.1)
    rig.connects()
    cube3 = rig.answer(C3, 3, True)
    rig.events()
    rig.advance(1.0)
    rig.answer(C3, 3, False, object_id=cube3)
    assert rig.events() == [(EV.DISCONNECTED, "cube3")]
    for _ in range(13):                             # it does not advertise: no attempt, then gone
        rig.advance(0.25)
    assert rig.connects() == [] and rig.events() == [(EV.DISAPPEARED, "cube3")]
    rig.advertise((C3, 3, -60))                      # back
    assert rig.events() == [(EV.APPEARED, "cube3")]
    rig.advance(0.25)
    assert rig.connects() == [(C3, True)]
    rig.answer(C3, 3, True)
    assert rig.events() == [(EV.CONNECTED, "cube3")]


def test_requests_connect_and_disconnect_by_factory_id_and_by_type():
    rig = Rig(auto_connect_cubes=False)
    other = 0xC0B1FFFF
    rig.advertise((C1, 1, -60), (other, 1, -40), (C2, 2, -50))
    assert rig.reg.request(1, C2, 0, True, rig.now) == C2
    assert rig.connects() == [(C2, True)] and rig.results() == []
    assert rig.reg.request(2, C2, 0, True, rig.now) == C2          # joins the pending request
    assert rig.connects() == []
    rig.answer(C2, 2, True)
    assert rig.results() == [(1, True, "cube2 connected (object id 0)"), (2, True, "cube2 connected (object id 0)")]
    assert rig.reg.request(3, 0, 1, True, rig.now) == other        # by type: the strongest signal
    assert rig.connects() == [(other, True)]
    rig.answer(other, 1, True)
    rig.results()
    assert rig.reg.request(4, 0, 1, True, rig.now) == other        # by type: that one is connected
    assert rig.results() == [(4, True, "cube1 was already connected (object id 1)")]
    assert rig.reg.request(5, 0, 1, False, rig.now) == other
    assert rig.connects() == [(other, False)]
    rig.answer(other, 1, False, object_id=2)
    assert rig.results() == [(5, True, "cube1 disconnected")]
    assert rig.events()[-1] == (EV.DISCONNECTED, "cube1")
    assert rig.reg.request(6, C3, 0, False, rig.now) == C3
    [(token, ok, text)] = rig.results()
    assert not ok and text.startswith("unknown object 0xc0b10003: the robot has not advertised it")
    assert rig.reg.request(7, C1, 0, False, rig.now) == C1
    assert rig.results() == [(7, True, "cube1 was not connected")]
    rig.reg.request(8, 0, 0, True, rig.now)
    assert rig.results() == [(8, False, "give factory_id, or object_type (ObjectInfo.TYPE_*)")]
    rig.reg.request(9, 0, 13, True, rig.now)
    [(_, ok, text)] = rig.results()
    assert not ok and text.startswith("no charger is advertised")
    rig.reg.request(10, 0, 3, False, rig.now)
    assert rig.results() == [(10, True, "no cube3 was connected")]
    # a connection that the robot refuses, or does not answer
    rig.reg.request(11, C1, 0, True, rig.now)
    rig.connects()
    rig.answer(C1, 1, False)
    [(_, ok, text)] = rig.results()
    assert not ok and text.startswith("the robot could not connect to cube1 (0xc0b10001)")
    rig.reg.request(12, C1, 0, True, rig.now)
    rig.advance(2.5)
    assert rig.results() == [(12, False, "no answer from the robot within 2 s")]
    # an object not heard of for object_timeout can't be connected
    rig.advance(5.0)
    rig.reg.request(13, C1, 0, True, rig.now)
    [(_, ok, text)] = rig.results()
    assert not ok and "cube1 (0xc0b10001) is not advertised: last heard of" in text


def test_a_cube_disconnected_on_request_has_its_lights_turned_off_first():
    """connect_object with connect false emptied the cube's slot and forgot its programme,
    but sent no off: the cube stayed lit (the firmware keeps its lights across a
    disconnection), a later all-off found it not connected and sent nothing, and connected
    again it showed the old programme. Its lights are turned off before its slot is emptied,
    as at cleanup; one not connected (held) has no object id to address and gets none."""
    rig = Rig(auto_connect_cubes=False)
    rig.advertise((C1, 1, -50))
    rig.reg.request(1, C1, 0, True, rig.now)
    rig.connects()
    cube1 = rig.answer(C1, 1, True)
    rig.results()
    rig.reg.set_lights(rig.reg.entry(C1), object_light_states([Light(on_color=RED)], 4, "f", "c", []), 0)
    rig.reg.pop_messages()
    rig.reg.request(2, C1, 0, False, rig.now)
    out = rig.reg.pop_messages()
    assert [x.NAME for x in out] == ["CubeId", "CubeLights", "ObjectConnect"]
    assert out[0].object_id == cube1 and all(s.on_color == 0 and s.off_color == 0 for s in out[1].states)
    assert (out[2].factory_id, out[2].slot) == (0, cube1)
    rig.answer(C1, 1, False, object_id=cube1)
    assert rig.results() == [(2, True, "cube1 disconnected")]
    cube1 = _held_cube1(rig)                              # held: nothing to address
    rig.reg.request(3, C1, 0, False, rig.now)
    assert [(x.NAME, x.factory_id, x.slot) for x in rig.reg.pop_messages()] == [("ObjectConnect", 0, cube1)]


def test_a_late_answer_to_a_disconnection_is_a_disconnection_on_request_not_a_drop():
    """The robot's "not connected" after the disconnection's request timed out, or was failed
    by a deactivation: the object was disconnected on request; no drop is counted, no back-off
    starts, and no slot is taken as kept for it (the robot has just emptied it)."""
    for late in ("timed out", "deactivated"):
        rig = Rig(auto_connect_cubes=False)
        rig.advertise((C1, 1, -50))
        rig.reg.request(1, C1, 0, True, rig.now)
        rig.connects()
        cube1 = rig.answer(C1, 1, True)
        rig.results()
        rig.events()
        rig.reg.request(2, C1, 0, False, rig.now)
        assert rig.connects() == [(C1, False)]
        if late == "timed out":
            rig.advance(2.5)
            assert rig.results() == [(2, False, "no answer from the robot within 2 s")]
        else:
            rig.reg.fail_pending("the driver was deactivated")
            assert rig.results() == [(2, False, "the driver was deactivated")]
        rig.answer(C1, 1, False, object_id=cube1)              # the answer, late
        events = rig.reg.pop_events()
        assert [(e.type, e.description) for e in events] == [(EV.DISCONNECTED, "cube1 disconnected: on request")], late
        entry = rig.reg.entry(C1)
        assert not entry.connected and not entry.held and entry.slot is None, late
        assert entry.failures == 0 and entry.retry_at == -math.inf, late
        assert rig.reg.counters["connections dropped"] == 0, late


def test_a_request_without_an_answer_quotes_the_timeout_it_was_given_not_a_later_one():
    """object_connect_timeout changed while a request waits: the request keeps the deadline
    it was made with, and its failure says that timeout."""
    rig = Rig(auto_connect_cubes=False)                 # (connect_timeout 2 s)
    rig.all_advertise()
    rig.reg.request(7, C1, 0, True, rig.now)
    rig.reg.settings.connect_timeout = 5.0
    rig.advance(2.1)
    assert rig.results() == [(7, False, "no answer from the robot within 2 s")]


def test_requests_are_refused_without_the_robot_or_while_inactive():
    rig = Rig(ready=False)
    rig.reg.request(1, C1, 0, True, rig.now)
    assert rig.results() == [(1, False, "not connected to the robot")]
    rig.reg.active = False
    rig.reg.request(2, C1, 0, True, rig.now)
    assert rig.results() == [(2, False, "the driver is not active")]


def test_a_cube_disconnected_on_request_stays_disconnected_until_connected_on_request():
    rig = Rig()
    rig.all_advertise()
    rig.advance(0.1)
    rig.connects()
    cube1 = rig.answer(C1, 1, True)
    rig.reg.request(1, C1, 0, False, rig.now)
    rig.connects()
    rig.answer(C1, 1, False, object_id=cube1)
    for _ in range(20):
        rig.all_advertise()
        rig.advance(0.5)
        assert (C1, True) not in rig.connects()
    rig.reg.request(2, 0, 1, True, rig.now)
    assert rig.connects() == [(C1, True)]
    cube1 = rig.answer(C1, 1, True)
    rig.advance(1.0)
    rig.answer(C1, 1, False, object_id=cube1)        # connected on request: reconnected when it drops
    rig.all_advertise()
    rig.advance(1.1)
    assert (C1, True) in rig.connects()


def test_a_lost_robot_disconnects_everything_and_its_return_reconnects():
    rig = Rig()
    rig.all_advertise()
    rig.advance(0.1)
    rig.connects()
    for fid, t in ((C1, 1), (C2, 2), (C3, 3)):
        rig.answer(fid, t, True)
    rig.reg.request(1, CH, 0, True, rig.now)
    assert rig.connects() == [(CH, True)]
    rig.events()
    rig.reg.on_robot_lost(rig.now, "lost the robot (silent)")
    events = rig.reg.pop_events()
    assert sorted((e.type, e.name) for e in events) == [(EV.DISCONNECTED, "cube1"), (EV.DISCONNECTED, "cube2"),
                                                       (EV.DISCONNECTED, "cube3")]
    assert events[0].description.endswith("disconnected: lost the robot (silent)")
    assert rig.results() == [(1, False, "lost the robot (silent)")]
    assert not any(e.connected for e in rig.reg.objects())
    rig.advance(1.0)
    rig.reg.on_robot_ready(rig.now)
    rig.advance(0.1)
    # the cubes connected before are released (a robot that kept their links would not let
    # them advertise), then it waits for adverts on this connection; so is the charger, whose
    # connection was under way (the robot may have taken it in, as one that gets no answer)
    assert sorted(rig.connects()) == [(C1, False), (C2, False), (C3, False), (CH, False)]
    rig.all_advertise()
    rig.advance(0.1)
    assert sorted(rig.connects()) == sorted([(C1, True), (C2, True), (C3, True), (CH, True)])


def test_release_all_turns_lights_off_then_disconnects():
    """cube1 connected, cube2 and cube3 connecting (no answer yet): every slot the robot may
    fill is emptied, those of the connections under way too (the robot would connect them
    when it hears them, and they would stay connected with the driver gone), whether or not
    the cleanup failed their requests first (it does: deactivation fails them)."""
    rig = Rig()
    rig.all_advertise()
    rig.advance(0.1)
    rig.connects()
    cube1 = rig.answer(C1, 1, True)
    slots = sorted(rig.slot_of[f] for f in (C1, C2, C3))
    for fail_first in (False, True):
        if fail_first:
            rig.reg.fail_pending("the driver is shutting down")
            assert rig.reg.entry(C2).held and rig.reg.entry(C3).held   # the robot keeps their slots
        out = rig.reg.release_all()
        assert [x.NAME for x in out] == ["CubeId", "CubeLights", "ObjectConnect"] * 3
        assert out[0].object_id == cube1 and all(s.on_color == 0 for s in out[1].states)
        assert (out[2].factory_id, out[2].slot) == (0, cube1)   # its slot emptied
        assert sorted(x.slot for x in out if x.NAME == "ObjectConnect") == slots
        assert all(x.factory_id == 0 for x in out if x.NAME == "ObjectConnect")


def test_find_connected_says_why_not():
    rig = Rig(auto_connect_cubes=False)
    rig.all_advertise()
    with pytest.raises(CommandError, match=r"cube1 \(0xc0b10001\) is not connected"):
        rig.reg.find_connected(C1, 0, "object_lights")
    with pytest.raises(CommandError, match=r"object_lights\.factory_id = 0x00000005: unknown object"):
        rig.reg.find_connected(5, 0, "object_lights")
    with pytest.raises(CommandError, match="no charger is connected"):
        rig.reg.find_connected(0, 13, "object_lights")
    with pytest.raises(CommandError, match="give factory_id"):
        rig.reg.find_connected(0, 0, "object_lights")
    rig.reg.request(1, 0, 13, True, rig.now)
    rig.answer(CH, 13, True)
    assert rig.reg.find_connected(0, ObjectType.CHARGER, "x").name == "charger"
    assert rig.reg.connected_named("charger").factory_id == CH and rig.reg.connected_cubes() == []
    # one whose slot the robot keeps: connect_object would be refused; the robot connects it
    cube1 = _held_cube1(rig)
    with pytest.raises(CommandError) as refused:
        rig.reg.find_connected(C1, 0, "object_lights")
    assert str(refused.value) == (f"cube1 (0xc0b10001) is not connected: the robot keeps its radio slot "
                                  f"{cube1} and connects it again by itself when it hears it")


# ----------------------------------------------------------------------------- light animations

def test_builtin_animations_convert_for_every_target_without_warnings():
    names = set(BUILTIN)
    assert {"off", "white", "red", "green", "blue", "blink", "breathe", "pulse", "spin", "chase",
            "rainbow", "alert"} <= names
    for animation in BUILTIN.values():
        for kind in TARGET_KINDS:
            warnings: list = []
            lights = animation.lights_for(kind)
            if kind == "backpack":
                backpack_messages(lights, ["front", "middle", "back", "left", "right"], warnings)
            else:
                object_light_states(lights, led_count(13 if kind == "charger" else 1), kind, kind, warnings)
            rotation_frames(animation.rotation_period, "rotation_period", warnings)
            assert warnings == [], (animation.name, kind)
    assert light_state(BUILTIN["red"].cube[0], "x", []).on_color == 0x7C00
    assert rotation_frames(BUILTIN["spin"].rotation_period, "x", []) == 3


def test_yaml_animations_extend_and_replace_and_bad_ones_are_skipped(tmp_path: Path):
    path = tmp_path / "lights.yaml"
    path.write_text("""
glow_green:
  description: slow green glow
  light: {on_color: "#00ff40", off_color: [0.0, 0.1, 0.0], on_period: 0.5, off_period: 0.5}
police:
  cube: [{on_color: "#ff0000"}, {on_color: "#0000ff"}, {on_color: "#ff0000"}, {on_color: "#0000ff"}]
  rotation_period: 0.2
red:
  backpack: [{on_color: [0.5, 0.0, 0.0]}]
bad_key:
  light: {on_colour: "#ffffff"}
bad_colour:
  light: {on_color: "#ggffff"}
bad_count:
  charger: [{}, {}]
bad_time:
  light: {on_period: .nan}
too_long:
  light: {on_period: 20}
too_late:
  cube: [{offset: -1000}]
too_slow:
  cube: [{on_color: "#ff0000"}]
  rotation_period: 9
float_limits:
  light: {on_period: 7.6500001, offset: 983.0100001}
nothing:
  description: no lights
""")
    library = LightAnimationLibrary.load(str(path))
    assert library.loaded_from_file == 4
    assert {"glow_green", "police"} <= set(library.names()) and "bad_key" not in library.names()
    glow = library.get("glow_green")
    state = light_state(glow.lights_for("charger")[0], "x", [])
    assert (state.on_color, state.off_color, state.on_frames) == ((0 << 10) | (31 << 5) | 8, 3 << 5, 17)
    assert glow.description == "slow green glow"
    police = library.get("police")
    assert police.rotation_period == 0.2 and police.charger is None and police.backpack is None
    with pytest.raises(CommandError, match="has no programme for the backpack"):
        police.lights_for("backpack")
    red = library.get("red")                   # replaced: only a backpack programme now
    assert red.cube is None and light_state(red.backpack[4], "x", []).on_color == 16 << 10
    warnings = "\n".join(library.warnings)
    for name, why in (("bad_key", "unknown key 'on_colour'"), ("bad_colour", "'#ggffff'"),
                      ("bad_count", "give 1 programme"), ("bad_time", "on_period = nan"),
                      ("nothing", "no programme")):
        assert f"{name}" in warnings and why in warnings, (name, why)
    # out of range: the value must be within the range, and the animation is skipped (not
    # clamped, as a message's are)
    for name, why in (("too_long", "too_long.light.on_period = 20 s: must be within 0..7.65 s"),
                      ("too_late", "too_late.cube[0].offset = -1000 s: must be within -983.01..983.01 s"),
                      ("too_slow", "too_slow.rotation_period = 9 s: must be within 0..7.65 s")):
        warning, = [w for w in library.warnings if f"{name}." in w]
        assert warning == f"{path}: {why}; light animation {name!r} skipped", warning
    assert "clamped" not in warnings and "float_limits" in library.names()
    with pytest.raises(CommandError, match="unknown light animation 'nope' \\(available: alert, "):
        library.get("nope")


def test_the_readme_example_file_loads(tmp_path: Path):
    section = (Path(__file__).resolve().parents[2] / "docs" / "objects.md").read_text()
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "lights.yaml"
    path.write_text(example)
    library = LightAnimationLibrary.load(str(path))
    assert library.warnings == [] and library.loaded_from_file == 2
    assert library.get("police").rotation_period == 0.2
    assert light_state(library.get("police").backpack[0], "x", []).off_color == 0x7C00


@pytest.mark.parametrize("text, why", [
    (None, "cannot read it"), ("a: [", "not valid YAML"), ("- 1\n- 2\n", "expected a mapping")])
def test_an_unusable_animation_file_leaves_the_builtins(tmp_path: Path, text, why):
    path = tmp_path / "lights.yaml"
    if text is not None:
        path.write_text(text)
    library = LightAnimationLibrary.load(str(path))
    assert set(library.names()) == set(BUILTIN)
    assert len(library.warnings) == 1 and why in library.warnings[0]


def test_a_light_animation_file_with_a_name_given_twice_leaves_the_builtins_naming_it(tmp_path: Path):
    """Two animations of one name: YAML kept the second, and the first was lost without a
    word. Now the file is not taken (as one that is not YAML), the warning naming the name
    and both lines."""
    path = tmp_path / "lights.yaml"
    path.write_text("police:\n  backpack: {on_color: '#ff0000'}\nglow:\n  backpack: {on_color: '#00ff00'}\n"
                    "police:\n  backpack: {on_color: '#0000ff'}\n")
    library = LightAnimationLibrary.load(str(path))
    assert set(library.names()) == set(BUILTIN) and library.loaded_from_file == 0
    (warning,) = library.warnings
    assert warning.startswith(f"{path}: not valid YAML") and "found duplicate key 'police' (first given on " \
        "line 1)" in warning and "line 5" in warning and "only the built-in light animations" in warning, warning


def test_parse_color():
    assert parse_color("#ff0080", "c") == (1.0, 0.0, 128 / 255)
    assert parse_color([0, 0.5, 1], "c") == (0.0, 0.5, 1.0)
    for bad in ("red", "#ff00", [0, 0, 2], [0, 0], [True, 0, 0], 5):
        with pytest.raises(CommandError, match="a colour is"):
            parse_color(bad, "c")


# ----------------------------------------------------------------------------- parameters

def test_object_parameters_are_validated():
    values = defaults()
    assert values["auto_connect_cubes"] is True and values["auto_connect_charger"] is False
    assert "object_reconnect_min" in validate_all({**values, "object_reconnect_min": 20.0})
    assert validate_change(values, {"auto_connect_charger": True, "object_timeout": 2.0}, configured=True) is None
    assert "configure" in validate_change(values, {"light_animation_file": "x.yaml"}, configured=True)
    assert "outside" in validate_change(values, {"object_timeout": 0.1}, configured=True)


# ----------------------------------------------------------------------------- the simulated cubes

class Sim:
    def __init__(self) -> None:
        self.model = RobotModel(config=ModelConfig(noise=False, seed=1))
        self.now = 0.0
        self.model.on_connected(0.0)
        self.model.handle(m.Enable(), 0.0)
        self.model.handle(m.SyncTime(timestamp_ms=0), 0.0)
        self.model.pop_outgoing()

    def run(self, seconds: float) -> list:
        end = self.now + seconds
        while self.now < end:
            self.now = min(end, self.now + 0.01)
            self.model.advance(self.now)
        return [x for x in self.model.pop_outgoing() if x.NAME != "RobotState"]

    def send(self, message) -> list:
        self.model.handle(message, self.now)
        return self.model.pop_outgoing()


def test_sim_cube_out_of_range_keeps_its_slot_and_reconnects_by_itself_as_the_firmware_does():
    """Anki's body firmware (Radio): a silent object is reported disconnected but keeps its
    slot, is not advertised while it holds one, and is connected again from its next
    advertisement without a new ObjectConnect; one given a slot while out of range
    connects when it comes back, and nothing is said meanwhile."""
    sim = Sim()
    assert {x.factory_id for x in sim.run(1.1) if x.NAME == "ObjectAvailable"} == {C1, C2, C3, CH}
    state, = sim.send(m.ObjectConnect(factory_id=C2, slot=1))
    assert state.connected
    sim.model.set_object_in_range(2, False, sim.now)
    dropped, = sim.model.pop_outgoing()
    assert (dropped.NAME, dropped.object_id, dropped.factory_id, dropped.connected) == (
        "ObjectConnectionState", 1, C2, False)
    assert not sim.model.tap_cube(2, sim.now)
    assert sim.model.object_states()[2]["slot"] == 1                       # kept
    out = sim.run(3.0)
    assert C2 not in {x.factory_id for x in out if x.NAME == "ObjectAvailable"}
    assert not [x for x in out if x.NAME == "ObjectConnectionState"]
    assert sim.model.next_tick() is not None and sim.model.next_tick() < math.inf
    sim.model.set_object_in_range(2, True, sim.now)                        # back: connected
    back = [x for x in sim.run(0.05) if x.NAME in ("ObjectConnectionState", "ObjectAvailable")]
    assert [(x.NAME, x.factory_id, x.object_id, x.connected) for x in back] == [
        ("ObjectConnectionState", C2, 1, True)]
    # emptied, it advertises again; given a slot out of range, it is silent until it is back
    sim.send(m.ObjectConnect(factory_id=0, slot=1))
    assert C2 in {x.factory_id for x in sim.run(1.1) if x.NAME == "ObjectAvailable"}
    sim.model.set_object_in_range(2, False, sim.now)
    assert sim.send(m.ObjectConnect(factory_id=C2, slot=2)) == []
    out = sim.run(2.0)
    assert not [x for x in out if x.NAME == "ObjectConnectionState"]
    assert C2 not in {x.factory_id for x in out if x.NAME == "ObjectAvailable"}
    sim.model.set_object_in_range(2, True, sim.now)
    state, = [x for x in sim.run(0.05) if x.NAME == "ObjectConnectionState"]
    assert (state.factory_id, state.object_id, state.connected) == (C2, 2, True)
    assert sim.model.object_states()[2]["in_range"] and sim.model.object_states()[2]["object_id"] == 2
    # a slot given to a silent object, emptied: answered with that object's factory id
    sim.model.set_object_in_range(2, False, sim.now)
    sim.model.pop_outgoing()
    state, = sim.send(m.ObjectConnect(factory_id=0, slot=2))
    assert (state.factory_id, state.object_id, state.connected) == (C2, 2, False)
    assert sim.model.object_states()[2]["slot"] is None
    sim.model.set_object_in_range(0, False, sim.now)                      # the charger too
    assert CH not in {x.factory_id for x in sim.run(2.0) if x.NAME == "ObjectAvailable"}
    with pytest.raises(ValueError):
        sim.model.set_object_in_range(4, False, sim.now)


def test_each_object_takes_a_radio_slot_of_its_own_and_a_disconnection_empties_it():
    """ObjectConnect is Anki's SetPropSlot (engine: Robot::ConnectToRequestedObjects; body
    firmware: Radio::assignProp): a factory id puts the object in one of the radio's 4 slots,
    the slot is then its object id, and factory id 0 empties a slot. Slots are not shared:
    an object put in a held slot would push out the one there."""
    rig = Rig(auto_connect_charger=True)
    rig.all_advertise()
    rig.advance(0.1)
    rig.connects()
    assert sorted(rig.slot_of.values()) == [0, 1, 2, 3]           # cube1-3 and the charger
    ids = {fid: rig.answer(fid, t, True) for fid, t in ((C1, 1), (C2, 2), (C3, 3), (CH, 13))}
    assert ids == rig.slot_of
    other = 0xC0B10999                                            # a second cube1: no slot left
    rig.advertise((other, 1, -40))
    rig.reg.request(1, other, 0, True, rig.now)
    assert rig.connects() == []
    (result,) = rig.results()
    assert result[:2] == (1, False) and "all 4 of the robot's radio slots hold objects" in result[2]
    rig.reg.request(2, C2, 0, False, rig.now)                     # cube2 out: its slot emptied
    (emptied,) = [x for x in rig.reg.pop_messages() if x.NAME == "ObjectConnect"]
    assert (emptied.factory_id, emptied.slot) == (0, ids[C2])
    # the robot's answer names no object when the slot held none by then (firmware): it counts
    rig.reg.on_message(m.ObjectConnectionState(object_id=ids[C2], factory_id=0, object_type=-1,
                                               connected=False), rig.now)
    assert rig.results() == [(2, True, "cube2 disconnected")]
    assert not rig.reg.entry(C2).connected
    rig.reg.request(3, other, 0, True, rig.now)                   # its slot is free again
    (taken,) = [x for x in rig.reg.pop_messages() if x.NAME == "ObjectConnect"]
    assert (taken.factory_id, taken.slot) == (other, ids[C2])


# ----------------------------------------------------------------------------- taps and moves filtered

def connected_rig(**settings) -> tuple:
    """A Rig with the three cubes and the charger connected; their object ids by factory id."""
    rig = Rig(auto_connect_charger=True, **settings)
    rig.all_advertise()
    rig.advance(0.25)
    assert len(rig.connects()) == 4
    ids = {fid: rig.answer(fid, t, True) for fid, t in ((C1, 1), (C2, 2), (C3, 3), (CH, 13))}
    assert sorted(ids.values()) == [0, 1, 2, 3]
    rig.reg.pop_events()
    return rig, ids


def tap(rig, object_id: int, intensity: int) -> None:
    rig.reg.on_message(m.ObjectTapped(timestamp_ms=1, object_id=object_id, num_taps=1, tap_time=3,
                                      tap_neg=-(intensity // 2), tap_pos=intensity - intensity // 2),
                       rig.now)


def move(rig, object_id: int) -> None:
    rig.reg.on_message(m.ObjectMoved(timestamp_ms=2, object_id=object_id, active_accel_x=20.0,
                                     active_accel_y=-9.0, active_accel_z=70.0, axis_of_accel=5), rig.now)


def stop(rig, object_id: int) -> None:
    rig.reg.on_message(m.ObjectStoppedMoving(timestamp_ms=3, object_id=object_id), rig.now)


def published(rig) -> list:
    return [(e.type, e.name, e.tap_intensity) for e in rig.reg.pop_events()]


def test_weak_taps_are_dropped_and_of_a_75_ms_group_only_the_strongest_is_published():
    from cozmo_driver.driver.tap_filter import TAP_GROUP_S, TAP_INTENSITY_MIN
    assert (TAP_INTENSITY_MIN, TAP_GROUP_S) == (60, 0.075)   # Anki's BlockTapFilterComponent
    rig, ids = connected_rig()
    tap(rig, ids[C1], 60)                 # not above the minimum: dropped, opens no group
    assert rig.reg.taps_due_at == math.inf
    t0 = rig.now
    tap(rig, ids[C1], 61)                 # the first kept: the group is due 75 ms later
    assert rig.reg.taps_due_at == pytest.approx(t0 + 0.075)
    rig.now += 0.03
    tap(rig, ids[C2], 90)                 # any cube's tap joins it
    rig.now += 0.03
    tap(rig, ids[C3], 90)                 # as strong: the first of equals is kept
    rig.reg.release_taps(t0 + 0.074)
    assert published(rig) == []
    rig.reg.release_taps(t0 + 0.075)
    assert published(rig) == [(EV.TAPPED, "cube2", 90.0)]
    rig.reg.release_taps(t0 + 1.0)        # once
    assert published(rig) == [] and rig.reg.taps_due_at == math.inf
    rig.advance(0.5)
    tap(rig, ids[C3], 100)                # a tap alone: published by the tick after its 75 ms
    rig.advance(0.05)
    assert published(rig) == []
    rig.advance(0.05)
    assert published(rig) == [(EV.TAPPED, "cube3", 100.0)]
    tap(rig, ids[C2], 70)                 # the robot lost meanwhile: published at once, first
    rig.reg.on_robot_lost(rig.now)
    assert published(rig)[:2] == [(EV.TAPPED, "cube2", 70.0), (EV.DISCONNECTED, "cube1", 0.0)]
    report = dict(rig.reg.report(True).values)
    assert report["taps not published: intensity 60 or less"] == "1"
    assert report["taps not published: a stronger one within 75 ms"] == "2"
    assert report["events TAPPED"] == "3"


def test_a_tap_after_the_group_is_over_opens_a_group_of_its_own_before_any_robot_state():
    """The group is released at the next robot state (or tick); a tap that comes after its
    75 ms but before then is not the same shock: the group's tap is published as it comes,
    and the new tap opens a group of its own."""
    rig, ids = connected_rig()
    t0 = rig.now
    tap(rig, ids[C1], 80)
    rig.now = t0 + 0.08                   # no robot state meanwhile: nothing released the group
    tap(rig, ids[C2], 90)
    assert published(rig) == [(EV.TAPPED, "cube1", 80.0)]
    assert rig.reg.taps_due_at == pytest.approx(t0 + 0.08 + 0.075)
    rig.reg.release_taps(t0 + 0.08 + 0.075)
    assert published(rig) == [(EV.TAPPED, "cube2", 90.0)]
    assert dict(rig.reg.report(True).values)["taps not published: a stronger one within 75 ms"] == "0"


def test_a_move_a_tap_caused_is_dropped_for_half_a_second_and_the_chargers_always():
    rig, ids = connected_rig()
    tap(rig, ids[C1], 80)
    move(rig, ids[C1])                    # the tap shook cube1: not a move
    stop(rig, ids[C1])                    # nor is the end of it
    move(rig, ids[C2])                    # another cube's move is its own
    rig.advance(0.1)
    assert published(rig) == [(EV.MOVED, "cube2", 0.0), (EV.TAPPED, "cube1", 80.0)]
    assert not rig.reg.entry(C1).moving and rig.reg.entry(C2).moving
    rig.now += 0.39                       # 0.49 s after the tap: still the tap's
    move(rig, ids[C1])
    assert published(rig) == []
    rig.now += 0.02                       # 0.51 s: a move of its own
    move(rig, ids[C1])
    stop(rig, ids[C1])
    assert [e[:2] for e in published(rig)] == [(EV.MOVED, "cube1"), (EV.STOPPED_MOVING, "cube1")]
    # a weak tap shook nothing worth a report; a tap of a moving cube does not hide its moves
    tap(rig, ids[C3], 50)
    move(rig, ids[C3])
    assert [e[:2] for e in published(rig)] == [(EV.MOVED, "cube3")]
    tap(rig, ids[C2], 80)                 # cube2 is moving
    stop(rig, ids[C2])
    move(rig, ids[C2])
    assert [e[:2] for e in published(rig)] == [(EV.STOPPED_MOVING, "cube2"), (EV.MOVED, "cube2")]
    # the charger reports moves that are noise (Anki's engine drops them)
    move(rig, ids[CH])
    stop(rig, ids[CH])
    rig.advance(0.1)
    assert [e[:2] for e in published(rig)] == [(EV.TAPPED, "cube2")]
    assert not rig.reg.entry(CH).moving
    report = dict(rig.reg.report(True).values)
    assert report["moves not published: caused by a tap"] == "2"
    assert report["moves not published: the charger's"] == "1"
    # a disconnection ends a tap's quiet time: the cube's next connection starts afresh
    tap(rig, ids[C3], 80)
    rig.reg.on_message(m.ObjectConnectionState(object_id=ids[C3], factory_id=C3, object_type=3,
                                               connected=False), rig.now)
    assert rig.reg.taps._quiet_until.get(C3) is None


def test_with_the_filter_off_every_tap_and_move_is_published_at_once():
    rig, ids = connected_rig(filter_object_events=False)
    tap(rig, ids[C1], 40)
    move(rig, ids[C1])
    stop(rig, ids[C1])
    move(rig, ids[CH])
    assert [e[:2] for e in published(rig)] == [(EV.TAPPED, "cube1"), (EV.MOVED, "cube1"),
                                               (EV.STOPPED_MOVING, "cube1"), (EV.MOVED, "charger")]
    # switched off while a group is held: the held tap is published at the next tick
    rig.reg.settings.filter_object_events = True
    tap(rig, ids[C2], 90)
    rig.reg.settings.filter_object_events = False
    rig.advance(0.01)
    assert published(rig) == [(EV.TAPPED, "cube2", 90.0)]
    assert rig.reg.taps_due_at == math.inf


def test_a_tap_after_the_filter_is_switched_off_comes_after_the_tap_it_held():
    """filter_object_events switched off while the filter holds a tap, and a tap arrives
    before the next tick: the held one is published first, then the new one (it came out
    after it, published at once, the held one only at the tick)."""
    rig, ids = connected_rig()
    tap(rig, ids[C2], 90)                                 # held for its group
    rig.reg.settings.filter_object_events = False
    rig.now += 0.01
    tap(rig, ids[C1], 40)
    assert published(rig) == [(EV.TAPPED, "cube2", 90.0), (EV.TAPPED, "cube1", 40.0)]
    assert rig.reg.taps_due_at == math.inf


def test_a_tap_held_by_the_filter_is_published_before_its_cube_disconnects():
    """A cube tapped and then dropped (out of range, an empty battery) within the filter's
    75 ms: its tap comes before its DISCONNECTED, as one reported before the robot is lost
    does, not after it (a subscriber that forgets a cube at DISCONNECTED would get a tap of a
    cube it had put away). Another cube's disconnection leaves a group alone."""
    rig, ids = connected_rig()
    tap(rig, ids[C1], 80)
    rig.now += 0.01
    rig.reg.on_message(m.ObjectConnectionState(object_id=ids[C2], factory_id=C2, object_type=2,
                                               connected=False), rig.now)
    assert [e[:2] for e in published(rig)] == [(EV.DISCONNECTED, "cube2")]
    rig.now += 0.01
    rig.reg.on_message(m.ObjectConnectionState(object_id=ids[C1], factory_id=C1, object_type=1,
                                               connected=False), rig.now)
    assert [e[:2] for e in published(rig)] == [(EV.TAPPED, "cube1"), (EV.DISCONNECTED, "cube1")]
    assert rig.reg.taps_due_at == math.inf
    rig.advance(0.1)
    assert published(rig) == []           # once


# ----------------------------------------------------------------------------- slots the robot keeps

def test_the_robot_keeps_a_dropped_cubes_slot_and_reconnects_it_by_itself():
    """Anki's body firmware keeps the radio slot of an object that goes silent (it reports it
    disconnected), does not advertise an object that holds a slot, and connects it again
    from its next advertisement: the driver keeps that slot for it, takes the robot's own
    reconnection, and gives the slot to another object only when no other is free."""
    rig = Rig(object_timeout=1.0)
    rig.advertise((C1, 1, -50), (C2, 2, -55))
    rig.advance(0.1)
    rig.connects()
    ids = {fid: rig.answer(fid, t, True) for fid, t in ((C1, 1), (C2, 2))}
    rig.reg.set_lights(rig.reg.entry(C1), object_light_states([Light(on_color=RED)], 4, "f", "c", []), 6)
    rig.reg.pop_messages()
    rig.events()
    rig.answer(C1, 1, False, object_id=ids[C1])           # it dropped
    entry = rig.reg.entry(C1)
    assert rig.events() == [(EV.DISCONNECTED, "cube1")]
    assert entry.held and entry.slot == ids[C1] and not entry.connected
    assert dict(rig.reg.report(True).values)["slots the robot keeps for silent objects"] == \
        f"cube1 (slot {ids[C1]})"
    rig.advance(1.5)                                      # not advertised (it holds a slot): gone
    assert rig.events() == [(EV.DISAPPEARED, "cube1")] and rig.connects() == []
    # another object takes a free slot, not the one kept for cube1
    rig.advertise((C3, 3, -60))
    rig.advance(0.1)
    assert rig.connects() == [(C3, True)] and rig.slot_of[C3] not in (ids[C1], ids[C2])
    rig.answer(C3, 3, True)
    rig.events()
    rig.reg.pop_messages()                                # (cube3's lights put out)
    # the robot hears cube1 again and connects it in its slot; its lights go to that slot
    rig.answer(C1, 1, True, object_id=ids[C1])
    assert rig.events() == [(EV.APPEARED, "cube1"), (EV.CONNECTED, "cube1")]
    assert entry.connected and entry.object_id == ids[C1] and not entry.held
    cube_id, lights = rig.reg.pop_messages()
    assert (cube_id.NAME, cube_id.object_id, lights.NAME) == ("CubeId", ids[C1], "CubeLights")


def _held_cube1(rig) -> int:
    """cube1 connected on request, then dropped out: the robot keeps its slot (its object id)."""
    rig.all_advertise()
    rig.reg.request(1, C1, 0, True, rig.now)
    rig.connects()
    cube1 = rig.answer(C1, 1, True)
    rig.answer(C1, 1, False, object_id=cube1)             # dropped: held
    rig.results()
    rig.reg.pop_messages()                                # (its lights put out at the connection)
    assert rig.reg.entry(C1).held
    return cube1


def test_a_kept_slot_is_emptied_on_a_disconnect_by_type_too():
    """connect_object by object_type with connect false: a cube that dropped out, whose
    slot the robot keeps, is disconnected as by its factory id (it was answered 'no cube1
    was connected' and kept, and the robot paired it again when it heard it); one whose
    connection is wanted but not made is no longer wanted."""
    rig = Rig(auto_connect_cubes=False)
    cube1 = _held_cube1(rig)
    assert rig.reg.request(2, 0, 1, False, rig.now) == C1
    assert rig.connects() == [(C1, False)]
    rig.answer(C1, 1, False, object_id=cube1)
    assert rig.results() == [(2, True, "cube1 disconnected")]
    assert not rig.reg.entry(C1).held and not rig.reg.entry(C1).wanted


def test_a_kept_slot_is_emptied_on_request_at_shutdown_and_given_away_when_none_is_free():
    rig = Rig(auto_connect_cubes=False)
    cube1 = _held_cube1(rig)
    # shutdown empties it (lights off, then the slot)
    assert [(x.NAME, getattr(x, "object_id", getattr(x, "slot", None))) for x in rig.reg.release_all()] == [
        ("CubeId", cube1), ("CubeLights", None), ("ObjectConnect", cube1)]
    # disconnecting it on request empties it, answered with its factory id
    rig.reg.request(2, C1, 0, False, rig.now)
    assert rig.connects() == [(C1, False)]
    rig.answer(C1, 1, False, object_id=cube1)
    assert rig.results() == [(2, True, "cube1 disconnected")]
    assert not rig.reg.entry(C1).held and rig.reg.entry(C1).slot is None
    # held again; three more objects fill the other slots; a fourth... takes the kept one
    rig.all_advertise()
    rig.reg.request(3, C1, 0, True, rig.now)
    rig.connects()
    rig.answer(C1, 1, True)
    rig.answer(C1, 1, False, object_id=cube1)
    for token, (fid, t) in enumerate(((C2, 2), (C3, 3), (CH, 13)), 10):
        rig.reg.request(token, fid, 0, True, rig.now)
        rig.connects()
        rig.answer(fid, t, True)
    assert cube1 not in (rig.slot_of[C2], rig.slot_of[C3], rig.slot_of[CH])
    other = 0xC0B10999
    rig.advertise((other, 1, -40))
    rig.reg.request(20, other, 0, True, rig.now)
    assert rig.connects() == [(other, True)] and rig.slot_of[other] == cube1
    assert not rig.reg.entry(C1).held                     # the robot gave its slot away


def test_a_connection_without_an_answer_is_kept_by_the_robot_and_a_lost_robot_releases_it():
    rig = Rig(connect_timeout=2.0, reconnect_min=0.1, reconnect_max=0.5)
    rig.advertise((C1, 1, -50))
    rig.advance(0.1)
    assert rig.connects() == [(C1, True)]
    rig.advance(2.1)                                      # no answer: failed, but the robot
    entry = rig.reg.entry(C1)                             # keeps the slot
    assert entry.held and entry.slot == rig.slot_of[C1]
    assert rig.reg.counters["connection failures"] == 1
    rig.answer(C1, 1, True)                               # it heard the cube after all
    assert (EV.CONNECTED, "cube1") in rig.events() and not entry.held
    rig.answer(C1, 1, False)                              # dropped: held; the robot is lost
    assert entry.held
    rig.reg.on_robot_lost(rig.now)
    assert not entry.held
    rig.reg.on_robot_ready(rig.now)                       # its slot emptied at the return
    assert rig.connects() == [(C1, False)]
    # a held object that advertises holds no slot any more: connected again as usual
    rig.advertise((C1, 1, -50))
    rig.advance(1.1)
    rig.connects()
    rig.answer(C1, 1, True)
    rig.answer(C1, 1, False)
    assert entry.held
    rig.advertise((C1, 1, -50))
    assert not entry.held
    rig.advance(0.6)
    assert rig.connects() == [(C1, True)]


def test_auto_connect_waits_for_a_kept_cube_while_it_is_listed():
    rig = Rig(object_timeout=1.0)
    slot = rig.connect_one(C1, 1)
    rig.answer(C1, 1, False, object_id=slot)              # dropped: the robot keeps it
    other = 0xC0B10999                                    # another cube1 is advertised
    rig.advertise((other, 1, -40))
    rig.advance(0.5)
    assert rig.connects() == []                           # cube1 is still listed: wait for it
    rig.advertise((other, 1, -40))
    rig.advance(0.6)                                      # cube1 gone from the list
    assert rig.connects() == [(other, True)] and rig.slot_of[other] != slot


def _two_cube1s(rig, wanted_first: bool) -> tuple:
    """cube1 connected (on request if ``wanted_first``, else by auto-connect), dropped and gone
    from the list; another cube1 auto-connected meanwhile; then the robot, which kept the
    first one's slot, connects it again by itself. Their object ids."""
    if wanted_first:
        rig.advertise((C1, 1, -50))
        rig.reg.request(1, C1, 0, True, rig.now)
        rig.connects()
        first = rig.answer(C1, 1, True)
    else:
        first = rig.connect_one(C1, 1)
    rig.reg.set_lights(rig.reg.entry(C1), object_light_states([Light(on_color=BLUE)], 4, "f", "c", []), 0)
    rig.answer(C1, 1, False, object_id=first)             # dropped: the robot keeps its slot
    other = 0xC0B10999
    rig.advertise((other, 1, -40))
    rig.advance(1.1)                                      # the first gone from the list
    rig.advertise((other, 1, -40))
    rig.advance(0.1)
    assert rig.connects() == [(other, True)]
    second = rig.answer(other, 1, True)
    rig.reg.set_lights(rig.reg.entry(other), object_light_states([Light(on_color=RED)], 4, "f", "c", []), 0)
    rig.reg.pop_messages()
    rig.events()
    rig.answer(C1, 1, True, object_id=first)              # heard again: the robot connects it
    return first, second


def test_a_kept_cube_the_robot_connects_again_while_another_of_its_type_is_connected_is_let_go():
    """A kept cube that left the list no longer held auto-connect back: it connected another
    cube of that type, and when the robot heard the first one again it connected it by itself,
    two cube1s connected. Auto-connect keeps one of a type: the one that came back is let go
    (lights off, slot emptied, nothing restored), unless it was connected on request and the
    other was not: then the other is."""
    rig = Rig(object_timeout=1.0)
    other = 0xC0B10999
    first, second = _two_cube1s(rig, wanted_first=False)
    out = rig.reg.pop_messages()
    assert [(x.NAME, getattr(x, "object_id", getattr(x, "slot", None))) for x in out] == [
        ("CubeId", first), ("CubeLights", None), ("ObjectConnect", first)]
    assert out[2].factory_id == 0 and all(s.on_color == 0 for s in out[1].states)
    rig.answer(C1, 1, False, object_id=first)
    events = rig.reg.pop_events()
    assert [(e.type, e.factory_id) for e in events] == [(EV.APPEARED, C1), (EV.CONNECTED, C1), (EV.DISCONNECTED, C1)]
    assert events[2].description == (f"cube1 disconnected: released: cube1 (0x{other:08x}) is connected "
                                      "too, and auto-connect keeps one object of a type")
    assert not rig.reg.entry(C1).held and rig.reg.entry(other).connected
    for _ in range(8):                                    # and it stays so
        rig.advertise((C1, 1, -30), (other, 1, -40))
        rig.advance(0.5)
        assert rig.connects() == []
    # the one connected on request is kept: the other goes
    rig = Rig(object_timeout=1.0)
    first, second = _two_cube1s(rig, wanted_first=True)
    out = rig.reg.pop_messages()                          # (its own programme restored first)
    assert [(x.NAME, getattr(x, "object_id", getattr(x, "slot", None))) for x in out] == [
        ("CubeId", first), ("CubeLights", None), ("CubeId", second), ("CubeLights", None),
        ("ObjectConnect", second)]
    rig.answer(other, 1, False, object_id=second)
    assert rig.reg.entry(C1).connected and not rig.reg.entry(other).connected
    assert not rig.reg.entry(other).held


def test_a_late_answer_to_letting_go_of_a_second_cube_of_a_type_is_not_a_drop():
    """The robot's "not connected" for a cube let go as a second one of its type, after that
    release had timed out or been failed by a deactivation, was taken as a drop: counted,
    the back-off grown, "it dropped the connection (out of range, ...)" said, and a slot taken
    as kept for it that the robot had just emptied. It is the release's answer, said so."""
    for late in ("timed out", "deactivated"):
        rig = Rig(object_timeout=1.0)
        other = 0xC0B10999
        first, _ = _two_cube1s(rig, wanted_first=False)
        assert [x.NAME for x in rig.reg.pop_messages()][-1] == "ObjectConnect"    # let go
        entry = rig.reg.entry(C1)
        dropped, failures, retry_at = rig.reg.counters["connections dropped"], entry.failures, entry.retry_at
        rig.events()
        if late == "timed out":
            rig.advance(2.5)
        else:
            rig.reg.fail_pending("the driver was deactivated")
        rig.answer(C1, 1, False, object_id=first)                          # the answer, late
        assert [(e.type, e.description) for e in rig.reg.pop_events()] == [(EV.DISCONNECTED, (
            f"cube1 disconnected: released: cube1 (0x{other:08x}) is connected too, and auto-connect "
            "keeps one object of a type"))], late
        assert not entry.connected and not entry.held and entry.slot is None, late
        assert (entry.failures, entry.retry_at) == (failures, retry_at), late
        assert rig.reg.counters["connections dropped"] == dropped, late
        assert dict(rig.reg.report(True).values)["slots the robot keeps for silent objects"] == "none", late
        # and a later drop of a cube connected again is a drop
        rig.advertise((C1, 1, -50))
        rig.reg.request(1, C1, 0, True, rig.now)
        rig.connects()
        rig.answer(C1, 1, True)
        rig.events()
        rig.answer(C1, 1, False, object_id=entry.object_id)
        assert "it dropped the connection" in rig.reg.pop_events()[0].description, late
        assert entry.held and rig.reg.counters["connections dropped"] == dropped + 1, late


def test_with_auto_connect_turned_off_a_cube_it_connected_is_let_go_when_it_drops():
    """auto_connect_cubes false at run time disconnects nothing, but a cube auto-connect had
    connected that then drops is not left its radio slot (the robot would pair it again, with
    its lights, by itself): the slot is emptied, as is that of one that dropped before; a cube
    connected on request is kept as ever."""
    rig = Rig(object_timeout=10.0)
    cube1 = rig.connect_one(C1, 1)
    rig.reg.set_lights(rig.reg.entry(C1), object_light_states([Light(on_color=RED)], 4, "f", "c", []), 0)
    cube2 = rig.connect_one(C2, 2)
    rig.answer(C2, 2, False, object_id=cube2)            # cube2 dropped: the robot keeps its slot
    rig.advance(10.5)                                    # (silent: it leaves the list)
    assert rig.reg.entry(C2).held and not rig.reg.entry(C2).listed
    rig.reg.pop_messages()
    rig.events()
    rig.reg.settings.auto_connect_cubes = False
    rig.advance(0.25)
    assert rig.connects() == [(C2, False)]               # the slot kept for cube2 emptied
    rig.answer(C2, 2, False, object_id=cube2)
    assert not rig.reg.entry(C2).held and rig.reg.entry(C1).connected and rig.events() == []
    rig.answer(C1, 1, False, object_id=cube1)            # cube1 drops: its slot emptied at once
    event, = rig.reg.pop_events()
    assert event.type == EV.DISCONNECTED and "auto_connect_cubes is off" in event.description
    assert rig.connects() == [(C1, False)]
    rig.answer(C1, 1, False, object_id=cube1)
    entry = rig.reg.entry(C1)
    assert not entry.held and entry.slot is None and rig.results() == []
    rig.advertise((C1, 1, -50), (C2, 2, -50))
    rig.advance(20.0)                                    # not connected again
    assert rig.connects() == [] and not entry.connected
    rig.advertise((C1, 1, -50))
    rig.reg.settings.auto_connect_cubes = True           # back on: connected again
    rig.advance(0.1)
    assert (C1, True) in rig.connects()
    # one connected on request is kept with the flag off
    rig = Rig(auto_connect_cubes=False)
    _held_cube1(rig)
    rig.advance(0.25)
    assert rig.connects() == [] and rig.reg.entry(C1).held


# ----------------------------------------------------------------------------- slots left by an earlier driver

def test_a_new_registry_empties_every_radio_slot_so_a_cube_an_earlier_driver_left_connects():
    """A robot may keep its objects' radio links while no driver talks to it (the simulator's
    ``keep_object_links``), and does not advertise an object that holds a slot: a driver
    restarted, or configured again, while the robot was away would wait for ever for cubes
    that the one before left connected. Its first connection empties every slot; the
    robot's answers about slots that held nothing name no object and change nothing."""
    sim = Sim()
    sim.send(m.ObjectConnect(factory_id=C1, slot=2))            # left by the driver before
    assert sim.model.object_states()[1]["object_id"] == 2
    rig = Rig(ready=False)
    rig.reg.on_robot_ready(rig.now)
    sent = rig.reg.pop_messages()
    assert [(x.NAME, x.factory_id, x.slot) for x in sent] == [("ObjectConnect", 0, n) for n in range(4)]

    def feed(messages) -> None:
        for x in messages:
            if x.NAME.startswith("Object"):
                rig.reg.on_message(x, rig.now)

    for x in sent:
        feed(sim.send(x))
    assert rig.events() == [] and rig.results() == [] and rig.reg.objects() == []
    feed(sim.run(1.1))                                           # cube1 advertises again
    rig.advance(0.1)
    connects = [x for x in rig.reg.pop_messages() if x.NAME == "ObjectConnect"]
    assert sorted(x.factory_id for x in connects) == sorted([C1, C2, C3])
    for x in connects:
        feed(sim.send(x))
    assert rig.reg.entry(C1).connected and (EV.CONNECTED, "cube1") in rig.events()
    rig.reg.pop_messages()                                       # (their lights put out)
    # the next connection of the robot empties only the slots held in this one
    rig.reg.on_robot_lost(rig.now)
    rig.reg.on_robot_ready(rig.now)
    assert sorted(x.slot for x in rig.reg.pop_messages()) == sorted(x.slot for x in connects)
    rig.reg.on_robot_lost(rig.now)
    rig.reg.on_robot_ready(rig.now)
    assert rig.reg.pop_messages() == []


def test_a_cube_an_earlier_driver_left_lit_has_its_lights_put_out_when_it_connects():
    """A cube lit by a driver that never put it out (cleanup with the robot away, the process
    killed) keeps its programme: the next driver emptied its slot and connected it, and sent
    no light, since it knew no programme for it; the cube showed the old colours for ever
    while the driver took it for unlit. An object with no programme known has its lights put
    out when it connects."""
    sim = Sim()
    sim.send(m.ObjectConnect(factory_id=C1, slot=0))            # the driver before lit cube1
    sim.send(m.CubeId(object_id=0, rotation_period_frames=0))
    sim.send(m.CubeLights(states=object_light_states([Light(on_color=RED)], 4, "f", "c", [])))
    assert sim.model.lights()["cubes"][1][0].on_color != 0
    sim.model.on_connected(sim.now)                              # this driver's connection
    sim.send(m.Enable())
    sim.send(m.SyncTime(timestamp_ms=0))
    rig = Rig(ready=False)
    rig.reg.on_robot_ready(rig.now)

    def feed(messages) -> None:
        for x in messages:
            if x.NAME.startswith("Object"):
                rig.reg.on_message(x, rig.now)

    for x in rig.reg.pop_messages():
        feed(sim.send(x))
    feed(sim.run(1.1))
    rig.advance(0.1)
    for x in rig.reg.pop_messages():                             # the cubes connected
        feed(sim.send(x))
    assert rig.reg.entry(C1).connected and rig.reg.entry(C1).lights is None
    sent = rig.reg.pop_messages()
    assert [x.NAME for x in sent] == ["CubeId", "CubeLights"] * 3
    for x in sent:
        sim.send(x)
    assert all(st.on_color == st.off_color == 0 for cube in sim.model.lights()["cubes"].values() for st in cube)


# ----------------------------------------------------------------------------- diagnostics

def test_diagnostics_warn_only_when_auto_connect_has_something_it_would_connect():
    """Nothing connected is a warning when auto-connect would connect something listed: not
    for the charger it leaves alone, nor for a cube disconnected on request."""
    rig = Rig()
    rig.advertise((CH, 13, -60))
    report = rig.reg.report(True)
    assert (report.level, report.message) == (OK, "0 connected (none), 1 listed")
    cube1 = rig.connect_one(C1, 1)
    rig.reg.request(1, C1, 0, False, rig.now)
    assert rig.connects() == [(C1, False)]
    rig.answer(C1, 1, False, object_id=cube1)
    rig.advertise((C1, 1, -50))
    report = rig.reg.report(True)
    assert (report.level, report.message) == (OK, "0 connected (none), 2 listed")
    rig.advertise((C2, 2, -55))
    report = rig.reg.report(True)
    assert (report.level, report.message) == (WARN, "auto-connect on but nothing connected "
                                                    "(listed for it: cube2)")
    rig.reg.settings.auto_connect_cubes = False
    assert rig.reg.report(True).level == OK
    rig.reg.settings.auto_connect_charger = True
    assert rig.reg.report(True).message == "auto-connect on but nothing connected (listed for it: charger)"


def test_diagnostics_warn_while_the_robot_is_not_connected_and_say_ok_while_inactive():
    """A robot lost (or not connected yet) left the objects' status OK ("not connected to the
    robot") while the link was an error and the robot's and the display's statuses warnings:
    a monitor showed the cubes fine that none could be connected. It is a warning now; an
    inactive driver's is OK, as the others'."""
    rig = Rig()
    rig.connect_one(C1, 1)
    assert rig.reg.report(True).level == OK
    rig.reg.on_robot_lost(rig.now)
    report = rig.reg.report(True)
    assert (report.level, report.message) == (WARN, "not connected to the robot: no object can be connected")
    assert dict(report.values)["objects connected"] == "none"
    assert (rig.reg.report(False).level, rig.reg.report(False).message) == (OK, "inactive (lifecycle)")
    never = Rig(ready=False)
    assert never.reg.report(True).level == WARN


# ----------------------------------------------------------------------------- a disconnection superseded

def test_a_connection_asked_while_a_disconnection_waits_takes_its_answer_as_the_disconnections():
    """connect_object(connect=false) then (connect=true) at once: the robot answers the
    disconnection ("not connected") before the connection; that answer is the
    disconnection's, not the connection failing."""
    rig = Rig(auto_connect_cubes=False)
    rig.advertise((C1, 1, -50))
    rig.reg.request(1, C1, 0, True, rig.now)
    rig.connects()
    cube1 = rig.answer(C1, 1, True)
    rig.results()
    rig.events()
    rig.reg.request(2, C1, 0, False, rig.now)
    rig.reg.request(3, C1, 0, True, rig.now)
    assert rig.connects() == [(C1, False), (C1, True)] and rig.slot_of[C1] == cube1
    assert rig.results() == [(2, False, "superseded by a later request")]
    rig.answer(C1, 1, False, object_id=cube1)                 # the disconnection's answer
    assert rig.results() == []
    events = rig.reg.pop_events()
    assert [(e.type, e.description) for e in events] == [(EV.DISCONNECTED, "cube1 disconnected: on request")]
    assert rig.reg.entry(C1).connecting
    rig.answer(C1, 1, True)                                   # the connection's
    assert rig.results() == [(3, True, f"cube1 connected (object id {cube1})")]
    assert rig.events() == [(EV.CONNECTED, "cube1")]
    assert rig.reg.counters["connection failures"] == 0
    # the robot's answer for a slot that held nothing by then names no object: the same
    rig.reg.request(4, C1, 0, False, rig.now)
    rig.reg.request(5, C1, 0, True, rig.now)
    rig.connects()
    rig.results()
    rig.reg.on_message(m.ObjectConnectionState(object_id=cube1, factory_id=0, object_type=-1,
                                               connected=False), rig.now)
    assert rig.results() == [] and rig.reg.entry(C1).connecting
    # only one answer is the disconnection's: a second "not connected" is the connection failing
    rig.answer(C1, 1, False)
    [(token, ok, text)] = rig.results()
    assert (token, ok) == (5, False) and text.startswith("the robot could not connect to cube1")
    assert rig.reg.counters["connection failures"] == 1


# ----------------------------------------------------------------------------- a tap's time

def test_a_tap_held_by_the_filter_keeps_the_time_it_arrived():
    rig, ids = connected_rig()
    t0 = rig.now
    tap(rig, ids[C1], 90)
    rig.advance(0.05)
    rig.advance(0.05)                     # published now, 100 ms after it arrived
    event, = rig.reg.pop_events()
    assert event.type == EV.TAPPED and event.received == t0
    rig.advance(0.1)
    move(rig, ids[C2])                    # an event published as it arrives: no time of its own
    event, = rig.reg.pop_events()
    assert event.type == EV.MOVED and event.received is None


def test_a_lit_cube_disconnected_on_request_while_away_is_put_out_when_it_connects_again():
    """connect_object with connect false for a lit cube that had dropped out (held: no object
    id to address an off to) forgot its programme, and the cube, which keeps it across the
    disconnection, showed it again when it was connected later: the off is owed instead."""
    rig = Rig(auto_connect_cubes=False)
    cube1 = _held_cube1(rig)
    rig.reg.entry(C1).lights = (object_light_states([Light(on_color=RED)], 4, "f", "c", []), 0)
    rig.reg.request(2, C1, 0, False, rig.now)
    assert [(x.NAME, x.factory_id, x.slot) for x in rig.reg.pop_messages()] == [("ObjectConnect", 0, cube1)]
    rig.answer(C1, 1, False, object_id=cube1)
    rig.results()
    rig.advertise((C1, 1, -50))
    rig.reg.request(3, C1, 0, True, rig.now)
    rig.connects()
    cube1 = rig.answer(C1, 1, True)
    assert off_sent(rig.reg.pop_messages(), cube1)   # the off, not the old programme


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_as_light_animation_file_is_refused_without_waiting(tmp_path):
    """A FIFO (named pipe) as light_animation_file: the driver's configure waited for a program
    to write to it, for good. It is refused at once, naming the parameter; the built-ins stay."""
    from fifos import without_waiting_for

    fifo = tmp_path / "lights.yaml"
    os.mkfifo(fifo)
    library = without_waiting_for(fifo, lambda: LightAnimationLibrary.load(str(fifo)))
    assert library.warnings == [f"light_animation_file: {fifo} is a FIFO (named pipe), not a file: reading it would "
                                "wait for a writer (or never end); only the built-in light animations are available"]
    assert set(BUILTIN) <= set(library.names()) and library.loaded_from_file == 0
