"""The behavior engine's configuration: the defaults, merging, errors that name the key,
plug-in behavior classes, the node's parameter table against config/cozmo.yaml and
docs/behavior.md, and the loader of the Cozmo app's JSON definitions (fixtures written for these
tests in test/app_resources, in the shape the loader documents)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from behavior_fakes import FakeRobot
from cozmo_driver.behavior import ConfigError, Engine, load_config, parse_config
from cozmo_driver.behavior.app_resources import (emotion_name, load_app_resources,
                                                 strip_json_comments)
from cozmo_driver.behavior.behaviors import BUILTIN_BEHAVIORS
from cozmo_driver.behavior.config import default_config_data, merge
from cozmo_driver.behavior.parameters import BEHAVIOR_PARAMETERS, defaults

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).resolve().parents[1] / "app_resources"


def test_the_defaults_load_and_hold_the_issue_behaviors():
    config = load_config()
    assert {e.name for e in config.emotions} == {"happy", "confident", "social", "stimulated", "calm"}
    assert len(config.behaviors) >= 10
    classes = {spec.class_name for spec in config.behaviors.values()}
    assert {"look_around", "explore", "react_to_cliff", "react_to_pickup", "celebrate_cube",
            "sleep_on_charger", "drive_off_charger", "greet", "get_bored",
            "low_battery_sad"} <= classes
    triggers = {r.trigger: r for r in config.reactions}
    assert {"cliff_detected", "picked_up", "put_down", "falling", "poked", "button_pressed",
            "cube_tapped", "on_charger", "low_battery", "face_seen"} <= set(triggers)
    assert triggers["picked_up"].priority > triggers["cliff_detected"].priority > triggers["poked"].priority
    assert [a.name for a in config.activities] == ["charger", "low_battery", "freeplay"]
    for cls in BUILTIN_BEHAVIORS.values():
        assert cls.description, cls


def test_merge_replaces_merges_and_removes():
    base = {"a": {"x": 1, "y": 2}, "b": [1, 2], "c": 3}
    assert merge(base, {"a": {"y": 5, "z": 6}, "b": [9], "c": None}) == {"a": {"x": 1, "y": 5, "z": 6}, "b": [9]}
    assert base == {"a": {"x": 1, "y": 2}, "b": [1, 2], "c": 3}


def test_a_user_file_is_merged_over_the_defaults(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("""
reactions:
  poked: null                       # no reaction to pokes
  button_pressed: {cooldown: 1.0}   # the rest kept
behaviors:
  wave: {class: behavior_fakes:Forever, params: {drive: false}, max_duration: 5}
activities:
  freeplay: {behaviors: {wave: {weight: 2.0}}}
""")
    config = load_config([path])
    triggers = {r.trigger: r for r in config.reactions}
    assert "poked" not in triggers
    assert triggers["button_pressed"].cooldown == 1.0 and triggers["button_pressed"].behavior == "greet"
    freeplay = [a for a in config.activities if a.name == "freeplay"][0]
    assert {e.behavior: e.weight for e in freeplay.entries}["wave"] == 2.0
    assert config.behaviors["wave"].max_duration == 5.0


@pytest.mark.parametrize("change, message", [
    ({"behaviors": {"explore": {"max_duration": "long"}}},
     "behaviors.explore.max_duration: expected a number, got 'long'"),
    ({"behaviors": {"explore": {"max_duration": 0}}},
     "behaviors.explore.max_duration: expected a number > 0"),
    ({"behaviors": {"explore": {"speeed": 1}}}, "behaviors.explore.speeed: unknown key"),
    ({"behaviors": {"explore": {"params": {"leg": 0.1}}}},
     "behaviors.explore.params.leg: unknown parameter of Explore (known: back_off_m"),
    ({"behaviors": {"explore": {"params": {"legs": 2.5}}}},
     "behaviors.explore.params.legs: expected a whole number"),
    ({"behaviors": {"x": {"class": "no_such_class"}}}, "behaviors.x.class: unknown behavior class 'no_such_class'"),
    ({"behaviors": {"x": {"class": "no_such_module:Thing"}}}, "behaviors.x.class: cannot import no_such_module"),
    # a malformed name was a traceback (ValueError, TypeError from importlib), not this line
    ({"behaviors": {"x": {"class": ":Wave"}}},
     "behaviors.x.class: ':Wave' is no package.module:ClassName (nor a built-in class"),
    ({"behaviors": {"x": {"class": ".behaviors:Wave"}}},
     "behaviors.x.class: '.behaviors:Wave' is no package.module:ClassName"),
    ({"behaviors": {"x": {"class": "behavior_fakes:"}}},
     "behaviors.x.class: 'behavior_fakes:' is no package.module:ClassName"),
    ({"behaviors": {"x": {"class": "behavior_fakes:FakeRobot"}}}, "behaviors.x.class: behavior_fakes:FakeRobot is not a Behavior subclass"),
    ({"behaviors": {"explore": {"on_success": "no_event"}}}, "behaviors.explore.on_success: unknown emotion event 'no_event'"),
    ({"reactions": {"poked": {"behavior": "nobody"}}}, "reactions.poked.behavior: unknown behavior 'nobody'"),
    ({"reactions": {"poked": {"priority": 0}}}, "reactions.poked.priority: expected a whole number > 0"),
    ({"reactions": {"poked": {"when": {"sleeping": True}}}}, "reactions.poked.when.sleeping: unknown robot state flag"),
    ({"reactions": {"poked": {"cooldown": -1}}}, "reactions.poked.cooldown: expected a number >= 0"),
    ({"reactions": {"new": {"priority": 5}}}, "reactions.new.behavior: missing"),
    ({"emotions": {"happy": {"min": 1.0}}}, "emotions.happy: min (1) must be below max (1)"),
    ({"emotions": {"happy": {"rest": 3.0}}}, "emotions.happy.rest: expected a number <= 1"),
    ({"emotions": {"happy": {"decay": [[0, 1], [0, 0.5]]}}}, "emotions.happy.decay: the x values of a curve must increase"),
    ({"emotions": {"happy": {"decay": [[0, 1, 2]]}}}, "emotions.happy.decay[0]: expected a point [x, y]"),
    ({"emotion_events": {"poked": {"joy": 0.1}}}, "emotion_events.poked.joy: unknown emotion"),
    ({"emotion_events": {"poked": {"min_interval": -1}}},
     "emotion_events.poked.min_interval: expected a number >= 0, got -1"),
    ({"activities": {"freeplay": {"behaviors": {"ghost": {}}}}}, "activities.freeplay.behaviors.ghost: unknown behavior"),
    ({"activities": {"freeplay": {"behaviors": {"explore": {"emotions": {"calm": "high"}}}}}},
     "activities.freeplay.behaviors.explore.emotions.calm: expected a number or a list"),
    ({"low_battery": {"threshold": 2}}, "low_battery.threshold: expected a number <= 1"),
    ({"moods": {}}, "moods: unknown key"),
    # a list as long as the default, of its element types (a run failed at every start)
    ({"behaviors": {"low_battery_sad": {"params": {"lights": [1.0, 0.0]}}}},
     "behaviors.low_battery_sad.params.lights: expected a list of 3 like the default [0.6, 0.0, 0.0], "
     "got [1.0, 0.0]"),
    ({"behaviors": {"celebrate_cube": {"params": {"cube_color": [0.0, 1.0]}}}},
     "behaviors.celebrate_cube.params.cube_color: expected a list of 3 like the default"),
    ({"behaviors": {"celebrate_cube": {"params": {"lights": [1.0, "gold", 0.0]}}}},
     "behaviors.celebrate_cube.params.lights[1]: expected a number, got 'gold'"),
    # a duration of 0 in a loop sent its commands 50 times a tick
    ({"behaviors": {"sleep_on_charger": {"params": {"snore_s": 0}}}},
     "behaviors.sleep_on_charger.params.snore_s: expected a duration > 0 s, got 0"),
    ({"behaviors": {"react_to_pickup": {"params": {"glance_s": -1.5}}}},
     "behaviors.react_to_pickup.params.glance_s: expected a duration > 0 s, got -1.5"),
])
def test_a_bad_value_is_an_error_that_names_the_key(change, message):
    with pytest.raises(ConfigError) as exc:
        parse_config(merge(default_config_data(), change))
    assert message in str(exc.value)


@pytest.mark.parametrize("module, source, why", [
    ("broken_syntax_behaviors", "from cozmo_driver.behavior import Behavior\n\nclass Wave(Behavior:\n    pass\n",
     "SyntaxError: {msg} ({path}, line 3)"),
    ("broken_name_behaviors", "from cozmo_driver.behavior import Behavior\n\nclass Wave(Behaviour):\n    pass\n",
     "NameError: name 'Behaviour' is not defined ({path}, line 3)"),
    ("broken_import_behaviors", "import no_such_library_here\n",
     "ModuleNotFoundError: No module named 'no_such_library_here' ({path}, line 1)"),
    ("broken_zero_behaviors", "SPEED = 1 / 0\n", "ZeroDivisionError: division by zero ({path}, line 1)"),
])
def test_a_behavior_module_that_fails_on_import_is_an_error_that_names_the_key(tmp_path, monkeypatch, module, source,
                                                                                why):
    """A module of behaviors of one's own that raised anything but an ImportError when imported
    (a SyntaxError, a NameError, ...) went out of the config's checks: a traceback and exit 1
    where docs/behavior.md promises exit 2 with a message naming the key. It is that message
    now, with the exception and where it was raised (the file and line)."""
    path = tmp_path / f"{module}.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    msg = ""
    if "{msg}" in why:
        try:
            compile(source, str(path), "exec")
        except SyntaxError as exc:
            msg = exc.msg
    with pytest.raises(ConfigError) as error:
        parse_config(merge(default_config_data(), {"behaviors": {"wave": {"class": f"{module}:Wave"}}}))
    assert str(error.value) == (f"behaviors.wave.class: cannot import {module}: "
                                + why.format(msg=msg, path=path))


def test_list_parameters_take_the_defaults_shape():
    """Nested lists are checked element by element; an empty default takes any list (the
    app's animation groups); a list of the right shape is taken, its numbers as floats."""
    from cozmo_driver.behavior import Behavior, BehaviorError

    class Paint(Behavior):
        PARAMS = {"colors": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], "names": [], "hold_s": 1.0}

    paint = Paint("paint", {"colors": [[1, 0, 0], [0, 0, 1]], "names": ["a", 2], "hold_s": 0.1})
    assert paint.params["colors"] == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    assert all(isinstance(c, float) for color in paint.params["colors"] for c in color)
    assert paint.params["names"] == ["a", 2]
    with pytest.raises(BehaviorError, match=r"behaviors.paint.params.colors\[1\]: expected a list of 3 "):
        Paint("paint", {"colors": [[1, 0, 0], [0, 1]]})
    with pytest.raises(BehaviorError, match=r"behaviors.paint.params.colors\[0\]: expected a list, got 1"):
        Paint("paint", {"colors": [1, 0]})
    with pytest.raises(BehaviorError, match=r"behaviors.paint.params.hold_s: expected a duration > 0 s"):
        Paint("paint", {"hold_s": 0.0})



@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_as_config_file_is_refused_without_waiting(tmp_path):
    """A FIFO (named pipe) as the behavior node's config_file: its start-up waited for a
    program to write to it, for good. It is refused at once, naming the parameter."""
    from fifos import without_waiting_for

    fifo = tmp_path / "behavior.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as refused:
        without_waiting_for(fifo, lambda: load_config([fifo]))
    assert str(refused.value) == (f"config_file: {fifo} is a FIFO (named pipe), not a file: reading it would wait "
                                  "for a writer (or never end)")

def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the behavior configuration .*missing.yaml"):
        load_config([tmp_path / "missing.yaml"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("reactions: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml is not valid YAML"):
        load_config([bad])
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("behaviors: {explore: {max_duration: -3}}\n")
    with pytest.raises(ConfigError, match=r"behaviors.explore.max_duration: .* \(in .*wrong.yaml\)"):
        load_config([wrong])
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="expected a mapping at the top"):
        load_config([listed])


def test_a_file_that_is_not_utf8_is_refused_naming_the_file_and_the_byte(tmp_path):
    """A config_file saved in Latin-1 (a comment's é): the UnicodeDecodeError escaped
    load_config, and the node stopped with a traceback instead of the message that names the
    file (make_node turns a ConfigError into one line and exit status 2)."""
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("# caf\u00e9\nreactions: {poked: null}\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin.yaml is not UTF-8 text: byte 0xe9 at offset 5 "
                                          r"\(line 1\)"):
        load_config([latin])


# ----------------------------------------------------------------------------- node parameters

def test_config_yaml_lists_every_behavior_node_parameter_with_its_default():
    doc = yaml.safe_load((ROOT / "config" / "cozmo.yaml").read_text())
    assert doc["cozmo_behavior"]["ros__parameters"] == defaults()


def test_readme_documents_the_behavior_engine():
    section = (ROOT / "docs" / "behavior.md").read_text()
    for param in BEHAVIOR_PARAMETERS:
        assert f"| `{param.name}` |" in section, param.name
    config = load_config()
    for spec in config.behaviors.values():
        assert f"`{spec.name}`" in section, spec.name
    for reaction in config.reactions:
        assert f"`{reaction.trigger}`" in section, reaction.trigger
    for name in BUILTIN_BEHAVIORS:
        assert f"`{name}`" in section, name
    for topic in ("behavior/emotions", "behavior/status", "behavior/enable", "behavior/trigger"):
        assert f"`{topic}`" in section, topic


# ----------------------------------------------------------------------------- app resources

def test_json_comments_are_stripped_outside_strings():
    text = '{"a": "x // y", /* b */ "c": 1 // end\n}'
    assert strip_json_comments(text) == '{"a": "x // y",  "c": 1 \n}'
    assert emotion_name("WantToPlay") == "want_to_play" and emotion_name("Happy") == "happy"


def test_app_resources_are_read_into_the_engines_shape():
    warnings = []
    res = load_app_resources(APP, warn=warnings.append)
    assert (res.behaviors, res.reactions, res.emotion_events, res.decay_graphs) == (4, 3, 3, 1)
    assert any("StackBlocks" in w and "not supported" in w for w in warnings)
    assert any("broken.json" in w for w in warnings)
    assert any("PlacedOnCharger" in w and "not loaded" in w for w in warnings)
    cfg = res.config
    assert cfg["behaviors"]["ReactToPickup"]["params"] == {"groups": ["anim_react_pickup_group"],
                                                           "arbitrary": False}
    assert cfg["behaviors"]["Fidget"]["params"] == {"groups": ["anim_idle_a", "IdleB"], "arbitrary": True}
    assert cfg["behaviors"]["DriveOffCharger"] == {"class": "drive_off_charger",
                                                   "params": {"distance_m": 0.15}, "max_duration": 60.0}
    assert cfg["reactions"] == {"cliff_detected": {"behavior": "ReactToCliff"},
                                "picked_up": {"behavior": "ReactToPickup"},
                                "Hiccup": {"behavior": "Fidget"}}
    assert cfg["emotion_events"]["Greeted"] == {"social": 0.3}
    assert cfg["repetition_penalty"] == [[0.0, 0.0], [30.0, 1.0]]
    # the same directory given as cozmo_resources itself
    assert load_app_resources(APP / "cozmo_resources").behaviors == 4
    with pytest.raises(ConfigError, match="holds neither cozmo_resources"):
        load_app_resources(APP / "cozmo_resources" / "assets" / "animationGroupMaps")
    with pytest.raises(ConfigError, match="is not a directory"):
        load_app_resources(APP / "nothing_here")


def test_an_app_file_with_a_bad_part_is_skipped_whole_with_its_name(tmp_path):
    """A decay graph or repetition penalty whose x values do not increase (or are not finite)
    skips the file that holds it, with a warning naming the file, as an unreadable file does;
    the engine's configuration loads without it (it used to stop, blaming the defaults)."""
    engine_dir = tmp_path / "cozmo_resources" / "config" / "engine"
    (engine_dir / "emotionevents").mkdir(parents=True)
    (engine_dir / "mood_config.json").write_text(json.dumps({"decayGraphs": [
        {"emotionType": "Calm", "nodes": [{"x": 0, "y": 1}, {"x": 10, "y": 0.5}]},
        {"emotionType": "Happy", "nodes": [{"x": 0, "y": 1}, {"x": 0, "y": 0.5}]}]}))
    (engine_dir / "emotionevents" / "events.json").write_text(json.dumps({"emotionEvents": [
        {"name": "Tickled", "emotionAffectors": [{"emotionType": "Giddy", "value": 0.3}]},
        {"name": "Greeted", "emotionAffectors": [{"emotionType": "Social", "value": 0.3}],
         "repetitionPenalty": {"nodes": [{"x": 5, "y": 0}, {"x": 1, "y": 1}]}}]}))
    (engine_dir / "emotionevents" / "good.json").write_text(json.dumps(
        {"name": "Poked", "emotionAffectors": [{"emotionType": "Happy", "value": 0.1}]}))
    warnings = []
    config = load_config(app_resources=tmp_path, warn=warnings.append)
    assert any("mood_config.json" in w and "must increase" in w for w in warnings), warnings
    assert any("events.json" in w and "Greeted repetitionPenalty" in w and "must increase" in w
               for w in warnings), warnings
    events = set(config.emotion_events)
    assert "Poked" in events and "Greeted" not in events
    # a file skipped is skipped whole: nothing read before its bad part is taken
    assert "Tickled" not in events and "giddy" not in {e.name for e in config.emotions}
    calm = {e.name: e for e in config.emotions}["calm"]
    assert calm.decay is None or calm.decay(10.0) != 0.5
    # the same for the animation trigger map and the reaction triggers
    (tmp_path / "cozmo_resources" / "assets" / "animationGroupMaps").mkdir(parents=True)
    (tmp_path / "cozmo_resources" / "assets" / "animationGroupMaps" / "AnimationTriggerMap.json").write_text(
        json.dumps({"Pairs": [{"CladEvent": "Happy", "AnimName": "anim_happy"}, {"CladEvent": "Broken"}]}))
    behaviors_dir = engine_dir / "behaviorSystem" / "behaviors"
    behaviors_dir.mkdir(parents=True)
    (behaviors_dir / "fidget.json").write_text(json.dumps(
        {"behaviorID": "Fidget", "behaviorClass": "PlayAnim", "animTriggers": ["Happy"]}))
    (engine_dir / "behaviorSystem" / "reactionTrigger_behavior_map.json").write_text(json.dumps(
        {"reactionTriggerBehaviorMap": [{"reactionTrigger": "RobotPickedUp", "behaviorID": "Fidget"},
                                        {"reactionTrigger": "CliffDetected"}]}))
    (behaviors_dir / "broken.json").write_text('{"behaviorID": "Broken",}')
    warnings.clear()
    res = load_app_resources(tmp_path, warn=warnings.append)
    assert any("broken.json: not JSON" in w for w in warnings), warnings
    assert res.config["behaviors"]["Fidget"]["params"]["groups"] == ["Happy"]   # the map not taken
    assert "reactions" not in res.config and res.reactions == 0
    assert any("AnimationTriggerMap.json" in w for w in warnings), warnings
    assert any("reactionTrigger_behavior_map.json" in w for w in warnings), warnings
    # each warning names its file once
    assert all(w.count(str(tmp_path)) == 1 for w in warnings), warnings


def test_an_app_file_with_a_key_given_twice_is_read_with_a_warning_naming_it(tmp_path):
    """JSON keeps the last copy of a key given twice: a behavior's first animTriggers were
    dropped without a word. The app's files are its format, not refused here (JSON
    readers commonly keep the last): the file is still read, with a warning naming the file and the key."""
    behaviors_dir = tmp_path / "cozmo_resources" / "config" / "engine" / "behaviorSystem" / "behaviors"
    behaviors_dir.mkdir(parents=True)
    path = behaviors_dir / "fidget.json"
    path.write_text('{"behaviorID": "Fidget", "behaviorClass": "PlayAnim",\n'
                    ' "animTriggers": ["Happy"], // the first\n "animTriggers": ["Sad"]}\n')
    warnings = []
    res = load_app_resources(tmp_path, warn=warnings.append)
    assert res.config["behaviors"]["Fidget"]["params"]["groups"] == ["Sad"]
    assert warnings == [f"app resources: {path}: key 'animTriggers' given twice in one object: only the "
                        "last is read"]


def test_app_definitions_run_in_the_engine():
    config = load_config(app_resources=APP)
    triggers = {r.trigger: r for r in config.reactions}
    # the app's behavior with this engine's priority, cool-down and conditions
    assert triggers["picked_up"].behavior == "ReactToPickup" and triggers["picked_up"].priority == 100
    assert triggers["cliff_detected"].when == {"picked_up": False, "falling": False, "on_charger": False}
    assert triggers["Hiccup"].priority == 50
    emotions = {e.name: e for e in config.emotions}
    assert "want_to_play" in emotions and emotions["happy"].decay is not None
    robot = FakeRobot(auto=True)
    engine = Engine(config, robot, now=0.0)
    engine.on_connected(True, 0.0)
    engine.on_trigger("picked_up", 0.0)
    engine.tick(0.0)
    engine.tick(0.1)
    assert ("play_animation", "anim_react_pickup_group") in robot.calls
    assert engine.last_behavior == "ReactToPickup" and engine.last_outcome == "succeeded"
    # an app trigger that only a node can post
    engine.on_trigger("Hiccup", 5.0)
    engine.tick(5.0)
    engine.tick(5.1)
    assert engine.last_behavior == "Fidget"
    # app emotion events and decay graphs: happy's own graph halves it in 10 s
    engine.emotions.apply("PlayedWithCube", 10.0)
    assert engine.emotions.value("want_to_play", 10.0) == pytest.approx(0.5)
    assert engine.emotions.value("happy", 20.0) == pytest.approx(0.5 * engine.emotions.value("happy", 10.0))
    # the app's default graph for the others: held for 60 s, gone at 120 s
    assert engine.emotions.value("want_to_play", 70.0) == pytest.approx(0.5)
    assert engine.emotions.value("want_to_play", 130.0) == pytest.approx(0.0)
    # an event's own repetition penalty
    first = engine.emotions.apply("Startled", 200.0)["calm"]
    second = engine.emotions.apply("Startled", 200.0)["calm"]
    assert second == pytest.approx(first / 2)


def test_the_clips_the_engine_trusts_on_the_charger_are_those_the_driver_calls_still():
    """The engine reads which built-in clips keep the treads still from the package's files
    (builtin_still_animations); the driver refuses on the charger a user's clip driving the
    treads under one of those names (AnimationLibrary.drives_unlike_builtin), deciding by
    the loaded clips. Both must name the same clips, or a built-in one the engine trusts
    could drive on the charger unnoticed."""
    from cozmo_driver.anim.library import AnimationLibrary
    from cozmo_driver.behavior.config import builtin_still_animations

    clips = AnimationLibrary.load().clips
    assert sorted(builtin_still_animations()) == sorted(
        name for name, clip in clips.items() if not clip.tracks.moves_treads) == ["nod_yes", "sleepy_yawn"]


def test_a_face_the_face_node_does_not_have_is_an_error_that_names_the_key():
    """idle_expression and play_animation's face name an expression of cozmo_face_node:
    a misspelt one loaded without a word, and the face node refused it (in its own log)
    each time a behavior ended or the clip played. Now the node does not start, naming the
    key and the known names; case, spaces and aliases are the face node's."""
    refused = {
        "idle_expression": ({"idle_expression": "hapy"},
                            "idle_expression: unknown expression 'hapy'; known: angry, "),
        "idle_blink": ({"idle_expression": "blink"},
                       "idle_expression: 'blink' is not an expression: it blinks once"),
        "clip_face": ({"behaviors": {"happy_dance": {"params": {"face": "grumpyish"}}}},
                      "behaviors.happy_dance.params.face: unknown expression 'grumpyish'; known: "),
    }
    for case, (change, message) in refused.items():
        with pytest.raises(ConfigError) as exc:
            parse_config(merge(default_config_data(), change))
        assert message in str(exc.value), (case, str(exc.value))
        assert case == "idle_blink" or "aliases: afraid (fearful)" in str(exc.value), case
    config = parse_config(merge(default_config_data(), {
        "idle_expression": " Sleepy ",
        "behaviors": {"happy_dance": {"params": {"face": "Scared"}},
                      "blinker": {"class": "play_animation", "params": {"animation": "nod_yes",
                                                                         "face": "blink"}}}}))
    assert config.idle_expression == "Sleepy"
    assert config.behaviors["happy_dance"].params["face"] == "Scared"


def test_a_key_given_twice_is_an_error_that_names_it_and_its_line(tmp_path):
    """YAML keeps only the last of a key given twice: a second `reactions:` section dropped
    the first whole (poked: null was lost, and the robot still reacted to pokes) without a
    word. Now the file is refused naming the key and the lines; a merge key (<<) may still
    be overridden."""
    path = tmp_path / "mine.yaml"
    path.write_text("reactions:\n  poked: null\nbehaviors:\n  explore: {max_duration: 30}\n"
                    "reactions:\n  button_pressed: {cooldown: 1.0}\n")
    with pytest.raises(ConfigError) as exc:
        load_config([path])
    text = str(exc.value)
    assert f"{path} is not valid YAML" in text and "found duplicate key 'reactions'" in text, text
    assert "line 5" in text, text
    path.write_text("behaviors:\n  explore: {max_duration: 30, max_duration: 40}\n")
    with pytest.raises(ConfigError, match="found duplicate key 'max_duration'"):
        load_config([path])
    path.write_text("reactions:\n  poked: &base {cooldown: 1.0, priority: 45}\n"
                    "  button_pressed: {<<: *base, cooldown: 2.0}\n")
    merged = {r.trigger: r for r in load_config([path]).reactions}
    assert (merged["button_pressed"].cooldown, merged["button_pressed"].priority) == (2.0, 45)


@pytest.mark.parametrize("source, why", [
    ("class Wave(Behavior):\n    def __init__(self):\n        pass\n",
     "TypeError: Wave.__init__() takes 1 positional argument but 3 were given"),
    ("class Wave(Behavior):\n    def __init__(self, name, params=None):\n        super().__init__(name, params)\n"
     "        raise RuntimeError('no arm')\n", "RuntimeError: no arm ({path}, line 6)"),
])
def test_a_behavior_class_that_fails_when_made_is_an_error_that_names_the_key(tmp_path, monkeypatch, source, why):
    """A class of one's own that raised anything but a BehaviorError when made (a wrong
    __init__ signature, a failing check of its own) went out of the config's checks: a
    traceback and exit 1 where docs/behavior.md promises exit 2 with a message naming the
    key. It is that message now, with the exception and where it was raised."""
    module = f"made_behaviors_{len(why)}"   # one module a case (imported once a process)
    path = tmp_path / f"{module}.py"
    path.write_text("from cozmo_driver.behavior import Behavior\n\n" + source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as error:
        parse_config(merge(default_config_data(), {"behaviors": {"wave": {"class": f"{module}:Wave"}}}))
    assert str(error.value) == f"behaviors.wave.class: {module}:Wave(...) raised {why.format(path=path)}"
