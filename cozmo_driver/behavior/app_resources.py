"""The Cozmo app's behavior, reaction-trigger and emotion definitions, as
configuration of this engine.

Give the directory that holds the app's ``cozmo_resources`` (or that directory
itself). What is read, relative to ``cozmo_resources/``::

    config/engine/mood_config.json                      decay graphs and the default repetition penalty
    config/engine/emotionevents/**/*.json               emotion events
    config/engine/behaviorSystem/behaviors/**/*.json    behaviors (one per file)
    config/engine/behaviorSystem/reactionTrigger_behavior_map.json   reaction triggers
    assets/animationGroupMaps/AnimationTriggerMap.json  animation trigger -> animation group

Fields understood (every other field is ignored; the files may hold ``//`` and
``/* */`` comments, as the app's do):

* mood_config.json: ``decayGraphs`` [{``emotionType``, ``nodes`` [{``x``, ``y``}]}]
  (``emotionType`` ``default`` applies to emotion types without a graph of
  their own) and ``defaultRepetitionPenalty`` {``nodes``}. A decay graph is read
  as seconds since the emotion last changed -> the fraction of its distance
  from rest still held; the repetition penalty as seconds since the same event
  -> the factor of its changes. Beyond the last node a graph stays at its last
  value (it is not extended linearly).
* emotion events: a file holds ``emotionEvents`` [{``name``, ``emotionAffectors``
  [{``emotionType``, ``value``}], optional ``repetitionPenalty`` {``nodes``}}],
  or one such event. Emotion types become emotion names in snake case
  (``WantToPlay`` -> ``want_to_play``); a type this engine does not have is
  added (range -1..1, rest 0) with its decay graph.
* behaviors: ``behaviorID``, ``behaviorClass``, ``animTriggers``. ``PlayAnim``
  plays its animation triggers in turn and ``PlayArbitraryAnim`` one of them
  (:class:`~.behaviors.app.AppPlayAnimations`; each trigger is played as the
  animation group the trigger map names, so point the driver's
  ``animation_groups_file`` at the app's ``assets/animationGroups``);
  ``ReactToCliff`` and ``DriveOffCharger`` become this engine's behaviors of
  those kinds (``extraDistanceToDrive_mm`` is added to the distance driven).
  Any other class with ``animTriggers`` plays them like PlayAnim; the rest are
  skipped with a warning (the app's other classes need its vision and planning).
* reaction triggers: ``reactionTriggerBehaviorMap`` [{``reactionTrigger``,
  ``behaviorID``}]. ``CliffDetected``, ``RobotPickedUp``, ``RobotFalling``,
  ``PlacedOnCharger``, ``FacePositionUpdate``, ``RobotOnBack``, ``RobotOnFace``,
  ``RobotOnSide`` and ``ReturnedToTreads`` are this engine's ``cliff_detected``,
  ``picked_up``, ``falling``, ``on_charger``, ``face_seen``, ``on_back``,
  ``on_face``, ``on_side`` and ``on_treads``
  (their priority, cool-down and conditions are kept, the behavior replaced);
  any other trigger keeps its app name (priority 50), and fires when a node
  posts that name on ``behavior/trigger``.

Not read: activities (their choosers depend on the app's objectives, sparks and
unlocks), animations (the driver loads those), sounds. The result is a mapping
in the shape of the engine's YAML (:attr:`AppResources.config`), merged over
the defaults before a user's file. Pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from ..json_comments import loads as json_loads
from ..json_comments import strip_json_comments
from .behavior import ConfigError
from .emotions import Curve

__all__ = ["AppResources", "load_app_resources", "APP_TRIGGERS", "strip_json_comments",
           "emotion_name"]

#: the app's reaction trigger -> this engine's trigger
APP_TRIGGERS: Mapping[str, str] = {
    "CliffDetected": "cliff_detected",
    "RobotPickedUp": "picked_up",
    "RobotFalling": "falling",
    "PlacedOnCharger": "on_charger",
    "FacePositionUpdate": "face_seen",
    "RobotOnBack": "on_back",
    "RobotOnFace": "on_face",
    "RobotOnSide": "on_side",
    "ReturnedToTreads": "on_treads",
}

_ENGINE = Path("config") / "engine"
_BEHAVIORS = _ENGINE / "behaviorSystem" / "behaviors"
_REACTIONS = _ENGINE / "behaviorSystem" / "reactionTrigger_behavior_map.json"
_EVENTS = _ENGINE / "emotionevents"
_MOOD = _ENGINE / "mood_config.json"
_TRIGGER_MAP = Path("assets") / "animationGroupMaps" / "AnimationTriggerMap.json"
_MAX_FILES = 10_000


@dataclass
class AppResources:
    """What was loaded: ``config`` (engine YAML shape), counts and warnings."""

    root: Path
    config: Dict[str, Any] = field(default_factory=dict)
    behaviors: int = 0
    reactions: int = 0
    emotion_events: int = 0
    decay_graphs: int = 0
    skipped: List[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.behaviors} behaviors, {self.reactions} reaction triggers, "
                f"{self.emotion_events} emotion events, {self.decay_graphs} decay graphs "
                f"from {self.root}" + (f"; {len(self.skipped)} skipped" if self.skipped else ""))


def _read_json(path: Path, warn: Callable[[str], None]) -> Any:
    """The document of ``path``; a key given twice in one object is said to ``warn`` (the
    app's files are its format, and JSON readers keep the last copy, as this one does)."""
    try:
        doc, twice = json_loads(path.read_text(encoding="utf-8"))
    except OSError as exc:  # (the callers name the file)
        raise ValueError(f"cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if twice:
        warn(f"app resources: {path}: key {', '.join(map(repr, twice))} given twice in one object: only "
             "the last is read")
    return doc


def _json_files(directory: Path) -> List[Path]:
    if not directory.is_dir():
        return []
    files = sorted(p for p in directory.rglob("*.json") if p.is_file())
    return files[:_MAX_FILES]


def emotion_name(app_type: str) -> str:
    """``WantToPlay`` -> ``want_to_play``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", str(app_type).strip()).lower()


def _nodes(graph: Any, where: str) -> List[List[float]]:
    if not isinstance(graph, Mapping) or not isinstance(graph.get("nodes"), list) or not graph["nodes"]:
        raise ValueError(f"{where}: expected {{\"nodes\": [{{\"x\": ..., \"y\": ...}}, ...]}}")
    points = []
    for node in graph["nodes"]:
        if not isinstance(node, Mapping) or "x" not in node or "y" not in node:
            raise ValueError(f"{where}: a node without x and y: {node!r}")
        points.append([float(node["x"]), float(node["y"])])
    try:  # checked here, so that a bad curve skips its file (named) instead of stopping the engine
        Curve.of(points)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return points


def _find_root(path: Path) -> Path:
    if (path / "cozmo_resources").is_dir():
        return path / "cozmo_resources"
    if (path / "config" / "engine").is_dir() or (path / "assets").is_dir():
        return path
    raise ConfigError(f"app_resources_dir: {path} holds neither cozmo_resources/ nor "
                      "config/engine/ (see docs/behavior.md, Loading the Cozmo app's resources)")


def load_app_resources(path: Union[str, Path], warn: Optional[Callable[[str], None]] = None
                       ) -> AppResources:
    """Read the app's definitions under ``path`` (see the module docstring)."""
    warn = warn or (lambda text: None)
    path = Path(path).expanduser()
    if not path.is_dir():
        raise ConfigError(f"app_resources_dir: {path} is not a directory")
    root = _find_root(path)
    res = AppResources(root=root)

    def skip(text: str) -> None:
        res.skipped.append(text)
        warn(f"app resources: {text}")

    emotions: Dict[str, Dict[str, Any]] = {}
    config: Dict[str, Any] = {}

    # decay graphs
    graphs: Dict[str, List[List[float]]] = {}
    mood = root / _MOOD
    if mood.is_file():  # a file is taken whole or skipped whole (what is read goes in at its end)
        try:
            data = _read_json(mood, warn)
            read = {str(graph.get("emotionType", "")): _nodes(graph, f"decayGraphs[{i}]")
                    for i, graph in enumerate(data.get("decayGraphs", []) or [])}
            penalty = (_nodes(data["defaultRepetitionPenalty"], "defaultRepetitionPenalty")
                       if data.get("defaultRepetitionPenalty") is not None else None)
        except (ValueError, AttributeError, TypeError) as exc:
            skip(f"{mood}: {exc}")
        else:
            graphs.update(read)
            if penalty is not None:
                config["repetition_penalty"] = penalty
    for app_type, points in graphs.items():
        if app_type and app_type != "default":
            emotions.setdefault(emotion_name(app_type), {})["decay"] = points
            res.decay_graphs += 1

    # emotion events
    events: Dict[str, Dict[str, Any]] = {}
    for file in _json_files(root / _EVENTS):
        try:
            data = _read_json(file, warn)
            items = data.get("emotionEvents", [data]) if isinstance(data, Mapping) else None
            if not isinstance(items, list):
                raise ValueError("expected emotionEvents: [...] or one event")
            file_events: Dict[str, Dict[str, Any]] = {}
            affected: List[str] = []
            for item in items:
                name = str(item["name"])
                changes: Dict[str, Any] = {}
                for affector in item.get("emotionAffectors", []) or []:
                    emotion = emotion_name(affector["emotionType"])
                    changes[emotion] = float(affector["value"])
                    affected.append(emotion)
                if item.get("repetitionPenalty") is not None:
                    changes["repetition_penalty"] = _nodes(item["repetitionPenalty"],
                                                           f"{name} repetitionPenalty")
                file_events[name] = changes
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            skip(f"{file}: {exc}")
            continue
        for emotion in affected:  # the whole file read: it goes in
            emotions.setdefault(emotion, {})
        events.update(file_events)
        res.emotion_events += len(file_events)
    default_graph = graphs.get("default")
    for item in emotions.values():
        if "decay" not in item and default_graph is not None:
            item["decay"] = default_graph
    if emotions:
        config["emotions"] = emotions
    if events:
        config["emotion_events"] = events

    # animation trigger -> group
    trigger_groups: Dict[str, str] = {}
    trigger_map = root / _TRIGGER_MAP
    if trigger_map.is_file():
        try:
            pairs = {str(pair["CladEvent"]): str(pair["AnimName"])
                     for pair in _read_json(trigger_map, warn).get("Pairs", [])}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            skip(f"{trigger_map}: {exc}")
        else:
            trigger_groups.update(pairs)

    # behaviors
    behaviors: Dict[str, Dict[str, Any]] = {}
    for file in _json_files(root / _BEHAVIORS):
        try:
            data = _read_json(file, warn)
            behavior_id = str(data["behaviorID"])
            app_class = str(data.get("behaviorClass", ""))
            triggers = [str(t) for t in (data.get("animTriggers") or [])]
            groups = [trigger_groups.get(t, t) for t in triggers]
            if app_class == "ReactToCliff":
                entry: Dict[str, Any] = {"class": "react_to_cliff"}
            elif app_class == "DriveOffCharger":
                extra = float(data.get("extraDistanceToDrive_mm", 0.0)) / 1000.0
                entry = {"class": "drive_off_charger", "params": {"distance_m": round(0.12 + extra, 4)}}
            elif app_class in ("PlayAnim", "PlayArbitraryAnim") or groups:
                if not groups:
                    raise ValueError(f"{app_class} without animTriggers")
                entry = {"class": "app_play_animations",
                         "params": {"groups": groups, "arbitrary": app_class == "PlayArbitraryAnim"}}
            else:
                skip(f"{file}: behavior {behavior_id}: class {app_class or '(none)'} is not supported")
                continue
            entry["max_duration"] = 60.0
            behaviors[behavior_id] = entry
            res.behaviors += 1
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            skip(f"{file}: {exc}")
    if behaviors:
        config["behaviors"] = behaviors

    # reaction triggers
    reactions: Dict[str, Dict[str, Any]] = {}
    reaction_file = root / _REACTIONS
    if reaction_file.is_file():
        try:
            mapped = [(str(item["reactionTrigger"]), str(item["behaviorID"]))
                      for item in _read_json(reaction_file, warn).get("reactionTriggerBehaviorMap", [])]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            skip(f"{reaction_file}: {exc}")
            mapped = []
        for app_trigger, behavior_id in mapped:  # the whole file read: it goes in
            if behavior_id not in behaviors:
                skip(f"{reaction_file}: trigger {app_trigger}: behavior {behavior_id} was not loaded")
                continue
            reactions[APP_TRIGGERS.get(app_trigger, app_trigger)] = {"behavior": behavior_id}
            res.reactions += 1
    if reactions:
        config["reactions"] = reactions
    res.config = config
    return res
