"""Named light animations for the backpack, the cubes and the charger. Pure.

A light animation is a set of LED programmes (:class:`~cozmo_driver.driver.objects.Light`:
colours, on/off/transition periods, offset) that the robot, a cube or the
charger then runs by itself, until another light command replaces it: one
programme per LED of a cube (four, plus a rotation period that turns the
pattern around the cube), of the charger (three) and of the backpack (five:
front, middle, back, left, right; the side LEDs show only red).

The built-in ones (:data:`BUILTIN`): ``off``; steady colours ``white``,
``red``, ``green``, ``blue``, ``yellow``, ``cyan``, ``magenta``, ``orange``,
``purple``; ``blink`` (white, 0.5 s on, 0.5 s off) and ``blink_red``;
``breathe`` (cyan fading in and out over 3 s) and ``pulse`` (blue, 1 s);
``spin`` (one green LED going round a cube, 0.09 s per LED; a green dot
running along the charger's and the backpack's LEDs); ``chase`` (white light
running front to back on the backpack and round the cube and charger);
``rainbow`` (the colours of the rainbow fading from LED to LED and turning
round the cube); ``alert`` (fast red blinking).

More can come from a YAML file (the driver's ``light_animation_file``): a
mapping from names to definitions, for example::

    glow_green:
      description: slow green glow
      light: {on_color: "#00ff40", off_color: [0.0, 0.1, 0.0], on_period: 0.5,
              off_period: 0.5, transition_on_period: 0.8, transition_off_period: 0.8}
    police:
      cube: [{on_color: "#ff0000"}, {on_color: "#0000ff"}, {on_color: "#ff0000"},
             {on_color: "#0000ff"}]
      rotation_period: 0.2
      backpack: [{on_color: "#0000ff", off_color: "#ff0000", on_period: 0.2, off_period: 0.2}]

Keys of a definition: ``description``; ``light`` (one programme for every LED
of every target); ``cube`` (1 or 4 programmes), ``charger`` (1 or 3) and
``backpack`` (1 or 5, front, middle, back, left, right), each overriding
``light`` for that target; ``rotation_period`` (s, cubes). Keys of a programme
are those of cozmo_interfaces/LightState (``on_color``, ``off_color``,
``on_period``, ``off_period``, ``transition_on_period``,
``transition_off_period``, ``offset``; times in seconds); a colour is
``"#rrggbb"`` or ``[r, g, b]`` with channels 0..1. A definition without a
programme for a target cannot play there. Unknown keys and bad values are
errors: that definition is skipped with a warning naming the file and why, the
others load; a name that exists replaces the built-in one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..fast_yaml import safe_load
from ..regular_files import NotAFileError, read_regular_text
from .commands import CommandError
from .objects import (BACKPACK_LEDS, CHARGER_LEDS, CUBE_LEDS, MAX_PERIOD_S, OFF, RGB, Light,
                      light_range_problem, light_state, range_problem)

__all__ = ["LightAnimation", "LightAnimationLibrary", "BUILTIN", "TARGET_KINDS", "parse_color", "quoted"]

#: what an animation can play on
TARGET_KINDS = ("cube", "charger", "backpack")
_LEDS = {"cube": CUBE_LEDS, "charger": CHARGER_LEDS, "backpack": len(BACKPACK_LEDS)}
_LIGHT_KEYS = ("on_color", "off_color", "on_period", "off_period", "transition_on_period",
               "transition_off_period", "offset")
_DEFINITION_KEYS = ("description", "light", "rotation_period") + TARGET_KINDS
#: a name or target longer than this is quoted cut (:func:`quoted`)
_LONGEST_QUOTED = 100


def quoted(text: str) -> str:
    """``text`` quoted, cut after 40 characters when it is longer than :data:`_LONGEST_QUOTED`
    (no name is): a refusal that quotes a name or target sent by mistake (a file's contents)
    stays one readable line, not one of its size."""
    if len(text) <= _LONGEST_QUOTED:
        return repr(text)
    return f"{text[:40]!r}... ({len(text)} characters)"


@dataclass(frozen=True)
class LightAnimation:
    name: str
    description: str
    cube: Optional[Tuple[Light, ...]] = None        # 4 programmes
    charger: Optional[Tuple[Light, ...]] = None     # 3
    backpack: Optional[Tuple[Light, ...]] = None    # 5: front, middle, back, left, right
    rotation_period: float = 0.0                    # s, cubes only

    def lights_for(self, kind: str) -> Tuple[Light, ...]:
        """The programmes for a target kind ("cube", "charger", "backpack"); raises
        CommandError when the animation has none for it."""
        lights = getattr(self, kind, None) if kind in TARGET_KINDS else None
        if lights is None:
            raise CommandError(f"light animation {self.name!r} has no programme for the {kind}")
        return lights


# ----------------------------------------------------------------------------- built-ins

_W: RGB = (1.0, 1.0, 1.0)
_R: RGB = (1.0, 0.0, 0.0)
_G: RGB = (0.0, 1.0, 0.0)
_B: RGB = (0.0, 0.0, 1.0)
_COLOURS: Dict[str, RGB] = {
    "white": _W, "red": _R, "green": _G, "blue": _B, "yellow": (1.0, 1.0, 0.0),
    "cyan": (0.0, 1.0, 1.0), "magenta": (1.0, 0.0, 1.0), "orange": (1.0, 0.5, 0.0),
    "purple": (0.5, 0.0, 1.0),
}


def _all(name: str, description: str, light: Light, rotation: float = 0.0) -> LightAnimation:
    return LightAnimation(name, description, (light,) * CUBE_LEDS, (light,) * CHARGER_LEDS,
                          (light,) * len(BACKPACK_LEDS), rotation)


def _steady(c: RGB) -> Light:
    return Light(on_color=c, off_color=c)


def _running(n: int, colour: RGB, step: float) -> Tuple[Light, ...]:
    """n LEDs lit one after the other, each for ``step`` seconds (offsets make the chase; a
    whole number of the lights' 30 ms frames keeps the steps even)."""
    return tuple(Light(on_color=colour, on_period=step, off_period=step * (n - 1),
                       offset=i * step) for i in range(n))


def _fading(colours: Sequence[RGB], hold: float, fade: float) -> Tuple[Light, ...]:
    """Each LED fades from its colour to the next one's and back."""
    n = len(colours)
    return tuple(Light(on_color=colours[i], off_color=colours[(i + 1) % n], on_period=hold,
                       off_period=hold, transition_on_period=fade, transition_off_period=fade)
                 for i in range(n))


def _builtin() -> Dict[str, LightAnimation]:
    out: Dict[str, LightAnimation] = {"off": _all("off", "every LED off", OFF)}
    for name, c in _COLOURS.items():
        out[name] = _all(name, f"steady {name}", _steady(c))
    out["blink"] = _all("blink", "white, 0.5 s on and 0.5 s off",
                        Light(on_color=_W, on_period=0.5, off_period=0.5))
    out["blink_red"] = _all("blink_red", "red, 0.5 s on and 0.5 s off",
                            Light(on_color=_R, on_period=0.5, off_period=0.5))
    out["breathe"] = _all("breathe", "cyan fading in and out over 3 s",
                          Light(on_color=(0.0, 0.8, 1.0), on_period=0.5, off_period=0.5,
                                transition_on_period=1.0, transition_off_period=1.0))
    out["pulse"] = _all("pulse", "blue pulsing once a second",
                        Light(on_color=_B, on_period=0.1, off_period=0.3, transition_on_period=0.3,
                              transition_off_period=0.3))
    dot = Light(on_color=_G, off_color=_G)
    out["spin"] = LightAnimation(
        "spin", "one green LED going round the cube (0.09 s per LED); a green dot running "
        "along the charger and the backpack",
        cube=(dot, OFF, OFF, OFF), charger=_running(CHARGER_LEDS, _G, 0.09),
        backpack=_running(3, _G, 0.09) + (OFF, OFF), rotation_period=0.09)
    out["chase"] = LightAnimation(
        "chase", "white light running front to back on the backpack, round the cube and the charger",
        cube=_running(CUBE_LEDS, _W, 0.21), charger=_running(CHARGER_LEDS, _W, 0.21),
        backpack=_running(3, _W, 0.21) + (Light(on_color=_R, on_period=0.3, off_period=0.3),
                                         Light(on_color=_R, on_period=0.3, off_period=0.3, offset=0.3)))
    rainbow = [(1.0, 0.0, 0.0), (1.0, 0.6, 0.0), (0.0, 1.0, 0.0), (0.0, 0.3, 1.0), (0.6, 0.0, 1.0)]
    out["rainbow"] = LightAnimation(
        "rainbow", "the colours of the rainbow fading from LED to LED, turning round the cube",
        cube=_fading(rainbow[:4], 0.3, 0.7), charger=_fading(rainbow[:3], 0.3, 0.7),
        backpack=_fading(rainbow[:3], 0.3, 0.7) + (Light(on_color=_R, on_period=0.5, off_period=0.5,
                                                         transition_on_period=0.5,
                                                         transition_off_period=0.5),) * 2,
        rotation_period=0.5)
    out["alert"] = _all("alert", "fast red blinking", Light(on_color=_R, on_period=0.15, off_period=0.15))
    return out


BUILTIN: Mapping[str, LightAnimation] = _builtin()


# ----------------------------------------------------------------------------- YAML

def parse_color(value: Any, where: str) -> RGB:
    """``"#rrggbb"`` or ``[r, g, b]`` (0..1) as channels 0..1; raises CommandError."""
    if isinstance(value, str):
        text = value.strip()
        if len(text) == 7 and text.startswith("#"):
            try:
                return tuple(int(text[i:i + 2], 16) / 255.0 for i in (1, 3, 5))  # type: ignore[return-value]
            except ValueError:
                pass
        raise CommandError(f"{where} = {value!r}: a colour is \"#rrggbb\" or [r, g, b] with channels 0..1")
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(
            isinstance(c, (int, float)) and not isinstance(c, bool) for c in value):
        rgb = tuple(float(c) for c in value)
        if all(math.isfinite(c) and 0.0 <= c <= 1.0 for c in rgb):
            return rgb  # type: ignore[return-value]
    raise CommandError(f"{where} = {value!r}: a colour is \"#rrggbb\" or [r, g, b] with channels 0..1")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CommandError(f"{where} = {value!r}: not a finite number")
    return float(value)


def _parse_light(spec: Any, where: str) -> Light:
    if not isinstance(spec, dict):
        raise CommandError(f"{where}: a light programme is a mapping of {', '.join(_LIGHT_KEYS)}")
    unknown = sorted(set(map(str, spec)) - set(_LIGHT_KEYS))
    if unknown:
        raise CommandError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(_LIGHT_KEYS)})")
    kwargs: Dict[str, Any] = {}
    for key, value in spec.items():
        kwargs[key] = parse_color(value, f"{where}.{key}") if key.endswith("color") \
            else _number(value, f"{where}.{key}")
    light = Light(**kwargs)
    light_state(light, where, [])  # the same checks as a message's (colours)
    problem = light_range_problem(light, where)  # which a message's are clamped for
    if problem:
        raise CommandError(problem)
    return light


def _parse_definition(name: str, spec: Any, where: str) -> LightAnimation:
    if not isinstance(spec, dict):
        raise CommandError(f"{where}: a light animation is a mapping of {', '.join(_DEFINITION_KEYS)}")
    unknown = sorted(set(map(str, spec)) - set(_DEFINITION_KEYS))
    if unknown:
        raise CommandError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(_DEFINITION_KEYS)})")
    common = _parse_light(spec["light"], f"{where}.light") if "light" in spec else None
    per_kind: Dict[str, Optional[Tuple[Light, ...]]] = {}
    for kind in TARGET_KINDS:
        leds = _LEDS[kind]
        if kind in spec:
            items = spec[kind]
            if isinstance(items, dict):
                items = [items]
            if not isinstance(items, list) or len(items) not in (1, leds):
                raise CommandError(f"{where}.{kind}: give 1 programme (every LED) or {leds} "
                                   f"(one per LED)")
            lights = tuple(_parse_light(item, f"{where}.{kind}[{i}]") for i, item in enumerate(items))
            per_kind[kind] = lights * leds if len(lights) == 1 else lights
        else:
            per_kind[kind] = (common,) * leds if common is not None else None
    if all(v is None for v in per_kind.values()):
        raise CommandError(f"{where}: no programme (give light, cube, charger or backpack)")
    rotation = _number(spec.get("rotation_period", 0.0), f"{where}.rotation_period")
    problem = range_problem(rotation, 0.0, MAX_PERIOD_S, f"{where}.rotation_period")
    if problem:
        raise CommandError(problem)
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise CommandError(f"{where}.description: must be text")
    return LightAnimation(name, description or f"from {where.split(':')[0]}", per_kind["cube"],
                          per_kind["charger"], per_kind["backpack"], rotation)


class LightAnimationLibrary:
    """The built-in light animations, plus those of a YAML file. See the module docstring."""

    def __init__(self, animations: Mapping[str, LightAnimation], warnings: Sequence[str] = (),
                 loaded_from_file: int = 0) -> None:
        self.animations: Dict[str, LightAnimation] = dict(animations)
        self.warnings: List[str] = list(warnings)
        self.loaded_from_file = loaded_from_file

    @classmethod
    def load(cls, path: Optional[str] = None) -> "LightAnimationLibrary":
        """The built-ins, then the definitions of ``path`` (YAML; empty or None: none).
        Problems become :attr:`warnings`; nothing raises."""
        animations = dict(BUILTIN)
        warnings: List[str] = []
        loaded = 0
        if path:
            try:
                import yaml
            except ImportError:
                return cls(animations, [f"{path}: PyYAML is needed to read it (python3-yaml); only "
                                        "the built-in light animations are available"])
            try:
                document = safe_load(read_regular_text(path, "light_animation_file"), unique_keys=True)
            except NotAFileError as exc:
                return cls(animations, [f"{exc}; only the built-in light animations are available"])
            except (OSError, UnicodeDecodeError) as exc:
                return cls(animations, [f"{path}: cannot read it ({exc}); only the built-in light "
                                        "animations are available"])
            except yaml.YAMLError as exc:
                return cls(animations, [f"{path}: not valid YAML ({exc}); only the built-in light "
                                        "animations are available"])
            if document is None:
                document = {}
            if not isinstance(document, dict):
                return cls(animations, [f"{path}: expected a mapping of animation names to "
                                        "definitions; only the built-in light animations are available"])
            for name, spec in document.items():
                if not isinstance(name, str) or not name.strip():
                    warnings.append(f"{path}: {name!r} is not a name: skipped")
                    continue
                try:
                    animations[name] = _parse_definition(name, spec, f"{path}: {name}")
                    loaded += 1
                except CommandError as exc:
                    warnings.append(f"{exc}; light animation {name!r} skipped")
        return cls(animations, warnings, loaded)

    def names(self) -> List[str]:
        return sorted(self.animations)

    def get(self, name: str) -> LightAnimation:
        animation = self.animations.get(name)
        if animation is None:
            raise CommandError(f"unknown light animation {quoted(name)} (available: {', '.join(self.names())})")
        return animation
