"""The engine's configuration: YAML in, a checked :class:`EngineConfig` out.

The defaults are ``default_config.yaml`` next to this module (every key is
commented there). A user's file (the node's ``config_file`` parameter) and the
Cozmo app's definitions (``app_resources_dir``, see :mod:`.app_resources`) are
merged over them with :func:`merge`: mappings merge key by key, a key set to
``null`` is removed, anything else replaces. :func:`parse_config` then checks
every value; a wrong one raises :class:`ConfigError` naming its key, e.g.
``behaviors.explore.max_duration: expected a number > 0, got 'long'``.

Behavior classes are named by ``class:``: a built-in name (``look_around``,
``play_animation``, ...; :data:`~.behaviors.BUILTIN_BEHAVIORS`) or
``package.module:ClassName`` for one of your own (a subclass of
:class:`~.behavior.Behavior`, imported when the configuration is loaded). Pure
(PyYAML only).
"""

from __future__ import annotations

import copy
import importlib
import math
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

from ..face.expressions import expression
from ..fast_yaml import safe_load
from ..regular_files import NotAFileError, read_regular_text
from .activities import Activity, ActivityEntry
from .behavior import STATE_FLAGS, Behavior, BehaviorError, ConfigError
from .emotions import Curve, EmotionEvent, EmotionSpec
from .reactions import Reaction

__all__ = [
    "ConfigError",
    "BehaviorSpec",
    "EngineConfig",
    "DEFAULT_CONFIG_PATH",
    "load_yaml",
    "merge",
    "default_config_data",
    "parse_config",
    "load_config",
    "resolve_behavior_class",
    "builtin_still_animations",
]

DEFAULT_CONFIG_PATH = Path(__file__).with_name("default_config.yaml")

TOP_LEVEL_KEYS = ("idle_expression", "charger_safe_animations", "low_battery", "emotions",
                  "repetition_penalty", "emotion_events", "reactions", "behaviors", "activities")


#: an emotion event's ``min_interval`` when it gives none (s): the trigger of its name arriving
#: sooner after it last applied it does not apply it again (a trigger posted with every camera
#: frame moves the mood at most once a second)
EVENT_MIN_INTERVAL_S = 1.0

#: what on_success / on_failure hold: an emotion event's name, or {emotion: change}
OutcomeChange = Union[str, Mapping[str, float], None]


@dataclass(frozen=True)
class BehaviorSpec:
    """One configured behavior: its class, parameters and engine settings."""

    name: str
    factory: Callable[..., Behavior]
    params: Mapping[str, Any] = field(default_factory=dict)
    max_duration: float = 60.0
    on_success: OutcomeChange = None
    on_failure: OutcomeChange = None
    class_name: str = ""

    def create(self) -> Behavior:
        try:
            behavior = self.factory(self.name, dict(self.params))
        except BehaviorError as exc:
            raise ConfigError(str(exc)) from None
        except Exception as exc:  # a class of one's own that fails when made: exit 2, not a traceback
            raise ConfigError(f"behaviors.{self.name}.class: {self.class_name}(...) raised {_raised(exc)}") from None
        if not isinstance(behavior, Behavior):
            raise ConfigError(f"behaviors.{self.name}.class: {self.class_name} did not make a Behavior")
        return behavior


@dataclass(frozen=True)
class EngineConfig:
    emotions: Tuple[EmotionSpec, ...]
    emotion_events: Mapping[str, EmotionEvent]
    repetition_penalty: Optional[Curve]
    reactions: Tuple[Reaction, ...]
    behaviors: Mapping[str, BehaviorSpec]
    activities: Tuple[Activity, ...]
    idle_expression: str = "neutral"
    charger_safe_animations: Tuple[str, ...] = ()
    low_battery_threshold: float = 0.15
    low_battery_hysteresis: float = 0.05


# ---------------------------------------------------------------------------- YAML and merging

def load_yaml(path: Union[str, Path]) -> Dict[str, Any]:
    """A YAML mapping from a file; ConfigError naming the file when it is not one."""
    import yaml

    path = Path(path).expanduser()
    try:
        text = read_regular_text(path, "config_file")
    except NotAFileError as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the behavior configuration {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # (a ValueError: make_node would show a traceback)
        line = exc.object[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path} is not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset "
                          f"{exc.start} (line {line}); save it as UTF-8") from None
    try:
        data = safe_load(text, unique_keys=True)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top (emotions:, reactions:, ...)")
    return data


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> Dict[str, Any]:
    """``over`` merged into a copy of ``base``: mappings key by key, None removes a key,
    anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def default_config_data() -> Dict[str, Any]:
    return load_yaml(DEFAULT_CONFIG_PATH)


# ---------------------------------------------------------------------------- checks

def _mapping(value: Any, key: str, allow_none: bool = True) -> Mapping[str, Any]:
    if value is None and allow_none:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a mapping, got {value!r}")
    for k in value:
        if not isinstance(k, str):
            raise ConfigError(f"{key}: keys must be names, got {k!r}")
    return value


def _keys(value: Mapping[str, Any], key: str, allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    for k in value:
        if k not in allowed:
            raise ConfigError(f"{key}.{k}: unknown key (known: {', '.join(allowed)})")


def _number(value: Any, key: str, minimum: Optional[float] = None, maximum: Optional[float] = None,
            above: Optional[float] = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    value = float(value)
    if above is not None and not value > above:
        raise ConfigError(f"{key}: expected a number > {above:g}, got {value:g}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{key}: expected a number >= {minimum:g}, got {value:g}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{key}: expected a number <= {maximum:g}, got {value:g}")
    return value


def _integer(value: Any, key: str) -> int:
    number = _number(value, key)
    if not number.is_integer():
        raise ConfigError(f"{key}: expected a whole number, got {value!r}")
    return int(number)


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def _string(value: Any, key: str, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value.strip() and not allow_empty):
        raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
    return value.strip()


def _face(value: Any, key: str) -> str:
    """An expression of cozmo_face_node (its names, aliases, any case), which the engine
    publishes on face/expression: one it does not have is refused here, at the start, not
    by the face node in its own log each time it is sent."""
    name = _string(value, key)
    try:
        expression(name)
    except KeyError as exc:
        raise ConfigError(f"{key}: {exc.args[0]}") from None
    return name


def _curve(value: Any, key: str) -> Curve:
    """A number (constant), or a list of [x, y] pairs with increasing x."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Curve.constant(_number(value, key))
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{key}: expected a number or a list of [x, y] points, got {value!r}")
    points = []
    for i, point in enumerate(value):
        if isinstance(point, Mapping) and set(point) == {"x", "y"}:
            point = (point["x"], point["y"])
        if not isinstance(point, (list, tuple)) or len(point) != 2:
            raise ConfigError(f"{key}[{i}]: expected a point [x, y], got {point!r}")
        points.append((_number(point[0], f"{key}[{i}][0]"), _number(point[1], f"{key}[{i}][1]")))
    try:
        return Curve(tuple(points))
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def _when(value: Any, key: str) -> Dict[str, bool]:
    out = {}
    for flag, wanted in _mapping(value, key).items():
        if flag not in STATE_FLAGS:
            raise ConfigError(f"{key}.{flag}: unknown robot state flag (known: {', '.join(STATE_FLAGS)})")
        out[flag] = _bool(wanted, f"{key}.{flag}")
    return out


def _raised(exc: BaseException) -> str:
    """``exc`` as ``Type: message (file, line N)``: where a SyntaxError is, else the last frame
    of its traceback outside importlib's own and this module's (none: no place)."""
    if isinstance(exc, SyntaxError):
        text, place = f"{type(exc).__name__}: {exc.msg}", (exc.filename, exc.lineno)
    else:
        text = f"{type(exc).__name__}: {exc}"
        frames = [f for f in traceback.extract_tb(exc.__traceback__)  # (this file's: the call, no place)
                  if not f.filename.startswith("<frozen ") and f.filename != __file__]
        place = (frames[-1].filename, frames[-1].lineno) if frames else (None, None)
    return f"{text} ({place[0]}, line {place[1]})" if place[0] and place[1] else text


def resolve_behavior_class(name: str, key: str) -> Callable[..., Behavior]:
    """A built-in behavior class by name, or ``package.module:ClassName``."""
    from .behaviors import BUILTIN_BEHAVIORS

    if name in BUILTIN_BEHAVIORS:
        return BUILTIN_BEHAVIORS[name]
    if ":" not in name:
        raise ConfigError(f"{key}: unknown behavior class {name!r} (built-in: "
                          f"{', '.join(sorted(BUILTIN_BEHAVIORS))}; or package.module:ClassName)")
    module_name, _, attr = name.partition(":")
    if not (attr.isidentifier() and all(part.isidentifier() for part in module_name.split("."))):
        # importlib would raise ValueError (":Wave") or TypeError (".behaviors:Wave"): a traceback
        raise ConfigError(f"{key}: {name!r} is no package.module:ClassName (nor a built-in class: "
                          f"{', '.join(sorted(BUILTIN_BEHAVIORS))})")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name.split(".")[0] or exc.name == module_name:  # not there: no location
            raise ConfigError(f"{key}: cannot import {module_name}: {exc}") from None
        raise ConfigError(f"{key}: cannot import {module_name}: {_raised(exc)}") from None
    except Exception as exc:  # anything a module's code raises (SyntaxError, NameError, ...): exit 2, not a traceback
        raise ConfigError(f"{key}: cannot import {module_name}: {_raised(exc)}") from None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Behavior)):
        raise ConfigError(f"{key}: {name} is not a Behavior subclass")
    return cls


# ---------------------------------------------------------------------------- sections

_EMOTION_KEYS = ("min", "max", "rest", "initial", "half_life", "decay")
_REACTION_KEYS = ("behavior", "priority", "cooldown", "when", "enabled")
_BEHAVIOR_KEYS = ("class", "params", "max_duration", "on_success", "on_failure")
_ACTIVITY_KEYS = ("when", "priority", "idle_between", "repetition", "behaviors")
_ENTRY_KEYS = ("weight", "emotions", "repetition")


def _emotions(section: Mapping[str, Any]) -> Tuple[EmotionSpec, ...]:
    out = []
    for name, item in _mapping(section, "emotions").items():
        key = f"emotions.{name}"
        item = _mapping(item, key)
        _keys(item, key, _EMOTION_KEYS)
        lo = _number(item.get("min", -1.0), f"{key}.min")
        hi = _number(item.get("max", 1.0), f"{key}.max")
        if not lo < hi:
            raise ConfigError(f"{key}: min ({lo:g}) must be below max ({hi:g})")
        rest = _number(item.get("rest", 0.0), f"{key}.rest", lo, hi)
        initial = _number(item["initial"], f"{key}.initial", lo, hi) if "initial" in item else None
        half_life = _number(item.get("half_life", 60.0), f"{key}.half_life", minimum=0.0)
        decay = _curve(item["decay"], f"{key}.decay") if item.get("decay") is not None else None
        out.append(EmotionSpec(name, lo, hi, rest, initial, half_life, decay))
    return tuple(out)


def _changes(value: Any, key: str, emotions: Sequence[str]) -> Dict[str, float]:
    out = {}
    for emotion, delta in _mapping(value, key).items():
        if emotion not in emotions:
            raise ConfigError(f"{key}.{emotion}: unknown emotion (configured: {', '.join(emotions)})")
        out[emotion] = _number(delta, f"{key}.{emotion}")
    return out


def _emotion_events(section: Mapping[str, Any], emotions: Sequence[str]) -> Dict[str, EmotionEvent]:
    out = {}
    for name, item in _mapping(section, "emotion_events").items():
        key = f"emotion_events.{name}"
        item = dict(_mapping(item, key))
        penalty = None
        if "repetition_penalty" in item:
            penalty = _curve(item.pop("repetition_penalty"), f"{key}.repetition_penalty")
        min_interval = _number(item.pop("min_interval", EVENT_MIN_INTERVAL_S), f"{key}.min_interval",
                               minimum=0.0)
        out[name] = EmotionEvent(name, _changes(item, key, emotions), penalty, min_interval)
    return out


def _outcome_change(value: Any, key: str, emotions: Sequence[str],
                    events: Mapping[str, EmotionEvent]) -> OutcomeChange:
    if value is None:
        return None
    if isinstance(value, str):
        if value not in events:
            raise ConfigError(f"{key}: unknown emotion event {value!r} (see emotion_events)")
        return value
    return _changes(value, key, emotions)


def _behaviors(section: Mapping[str, Any], emotions: Sequence[str],
               events: Mapping[str, EmotionEvent]) -> Dict[str, BehaviorSpec]:
    out = {}
    for name, item in _mapping(section, "behaviors").items():
        key = f"behaviors.{name}"
        item = _mapping(item, key)
        _keys(item, key, _BEHAVIOR_KEYS)
        class_name = _string(item.get("class", name), f"{key}.class")
        factory = resolve_behavior_class(class_name, f"{key}.class")
        spec = BehaviorSpec(
            name=name, factory=factory, params=dict(_mapping(item.get("params"), f"{key}.params")),
            max_duration=_number(item.get("max_duration", 60.0), f"{key}.max_duration", above=0.0),
            on_success=_outcome_change(item.get("on_success"), f"{key}.on_success", emotions, events),
            on_failure=_outcome_change(item.get("on_failure"), f"{key}.on_failure", emotions, events),
            class_name=class_name)
        spec.create()  # checks the parameters now, naming the key
        out[name] = spec
    return out


def _reactions(section: Mapping[str, Any], behaviors: Mapping[str, BehaviorSpec]) -> Tuple[Reaction, ...]:
    out = []
    for trigger, item in _mapping(section, "reactions").items():
        key = f"reactions.{trigger}"
        item = _mapping(item, key)
        _keys(item, key, _REACTION_KEYS)
        if "behavior" not in item:
            raise ConfigError(f"{key}.behavior: missing (the behavior to start)")
        behavior = _string(item["behavior"], f"{key}.behavior")
        if behavior not in behaviors:
            raise ConfigError(f"{key}.behavior: unknown behavior {behavior!r} (see behaviors)")
        out.append(Reaction(
            trigger=trigger, behavior=behavior,
            priority=_integer(item.get("priority", 50), f"{key}.priority"),
            cooldown=_number(item.get("cooldown", 0.0), f"{key}.cooldown", minimum=0.0),
            when=_when(item.get("when"), f"{key}.when"),
            enabled=_bool(item.get("enabled", True), f"{key}.enabled")))
        if out[-1].priority <= 0:
            raise ConfigError(f"{key}.priority: expected a whole number > 0 (activities run at 0), "
                              f"got {out[-1].priority}")
    return tuple(out)


def _activities(section: Mapping[str, Any], behaviors: Mapping[str, BehaviorSpec],
                emotions: Sequence[str]) -> Tuple[Activity, ...]:
    out = []
    for name, item in _mapping(section, "activities").items():
        key = f"activities.{name}"
        item = _mapping(item, key)
        _keys(item, key, _ACTIVITY_KEYS)
        entries = []
        for behavior, entry in _mapping(item.get("behaviors"), f"{key}.behaviors").items():
            ekey = f"{key}.behaviors.{behavior}"
            if behavior not in behaviors:
                raise ConfigError(f"{ekey}: unknown behavior (see behaviors)")
            entry = _mapping(entry, ekey)
            _keys(entry, ekey, _ENTRY_KEYS)
            scores = {}
            for emotion, curve in _mapping(entry.get("emotions"), f"{ekey}.emotions").items():
                if emotion not in emotions:
                    raise ConfigError(f"{ekey}.emotions.{emotion}: unknown emotion "
                                      f"(configured: {', '.join(emotions)})")
                scores[emotion] = _curve(curve, f"{ekey}.emotions.{emotion}")
            entries.append(ActivityEntry(
                behavior=behavior,
                weight=_number(entry.get("weight", 1.0), f"{ekey}.weight", minimum=0.0),
                emotions=scores,
                repetition=(_curve(entry["repetition"], f"{ekey}.repetition")
                            if entry.get("repetition") is not None else None)))
        out.append(Activity(
            name=name, entries=tuple(entries), when=_when(item.get("when"), f"{key}.when"),
            priority=_integer(item.get("priority", 0), f"{key}.priority"),
            idle_between=_number(item.get("idle_between", 2.0), f"{key}.idle_between", minimum=0.0),
            repetition=(_curve(item["repetition"], f"{key}.repetition")
                        if item.get("repetition") is not None else None)))
    return tuple(out)


def parse_config(data: Mapping[str, Any]) -> EngineConfig:
    """Check a merged configuration mapping; ConfigError names the first wrong key."""
    data = _mapping(data, "(top level)", allow_none=False)
    for k in data:
        if k not in TOP_LEVEL_KEYS:
            raise ConfigError(f"{k}: unknown key (known: {', '.join(TOP_LEVEL_KEYS)})")
    emotions = _emotions(data.get("emotions"))
    names = [e.name for e in emotions]
    events = _emotion_events(data.get("emotion_events"), names)
    behaviors = _behaviors(data.get("behaviors"), names, events)
    low = _mapping(data.get("low_battery"), "low_battery")
    _keys(low, "low_battery", ("threshold", "hysteresis"))
    safe = data.get("charger_safe_animations") or []
    if not isinstance(safe, list):
        raise ConfigError(f"charger_safe_animations: expected a list of animation names, got {safe!r}")
    return EngineConfig(
        emotions=emotions,
        emotion_events=events,
        repetition_penalty=(_curve(data["repetition_penalty"], "repetition_penalty")
                            if data.get("repetition_penalty") is not None else None),
        reactions=_reactions(data.get("reactions"), behaviors),
        behaviors=behaviors,
        activities=_activities(data.get("activities"), behaviors, names),
        idle_expression=_face(data.get("idle_expression", "neutral"), "idle_expression"),
        charger_safe_animations=tuple(_string(s, f"charger_safe_animations[{i}]")
                                      for i, s in enumerate(safe)),
        low_battery_threshold=_number(low.get("threshold", 0.15), "low_battery.threshold", 0.0, 1.0),
        low_battery_hysteresis=_number(low.get("hysteresis", 0.05), "low_battery.hysteresis", 0.0, 1.0))


def load_config(files: Sequence[Union[str, Path]] = (), app_resources: Optional[Union[str, Path]] = None,
                overrides: Optional[Mapping[str, Any]] = None,
                warn: Optional[Callable[[str], None]] = None) -> EngineConfig:
    """The defaults, then the app's definitions (if a directory is given), then each
    file, then ``overrides``, merged and checked."""
    data = default_config_data()
    if app_resources:
        from .app_resources import load_app_resources

        data = merge(data, load_app_resources(app_resources, warn=warn).config)
    for path in files:
        if path:
            data = merge(data, load_yaml(path))
    if overrides:
        data = merge(data, overrides)
    try:
        return parse_config(data)
    except ConfigError as exc:
        sources = ([f"the app's resources in {app_resources}"] if app_resources else []) + [str(p) for p in files if p]
        where = ", ".join(sources) or "the defaults"
        raise ConfigError(f"{exc} (in {where})") from None


def builtin_still_animations() -> Tuple[str, ...]:
    """The built-in animation clips without a body track (they keep the treads still),
    read from ``cozmo_driver/anim/builtin/*.yaml``."""
    import yaml

    directory = Path(__file__).resolve().parents[1] / "anim" / "builtin"
    still = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            doc = safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        tracks = doc.get("tracks") or {}
        if isinstance(doc, dict) and not tracks.get("body"):
            still.append(str(doc.get("name", path.stem)))
    return tuple(still)
