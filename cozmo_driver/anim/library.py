"""The animations a driver can play: built-in clips, clip directories and groups.

Reads files when asked (:meth:`AnimationLibrary.load`); otherwise pure.

* Clips: the built-in ones (``builtin/*.yaml``), then every clip file under
  each directory given (our YAML/JSON, the app's JSON or FlatBuffers ``.bin``,
  searched recursively, sorted). A clip of a directory replaces a built-in one
  of the same name; a name defined twice within the directories keeps the
  first. A file that cannot be read is skipped with a warning naming it: one
  bad file does not take the others down. Body motion beyond the treads' limit is
  noted (it plays scaled down: :func:`~cozmo_driver.anim.player.body_speed_notes`).
  Each built-in clip replaced is said (a warning naming the file); one that drives
  the treads under the name of a built-in one that keeps them still is noted in
  ``drives_unlike_builtin`` (the driver refuses it on the charger, where behaviors
  play that name trusting the built-in clip).
* Groups: a directory of the app's ``animationGroups`` JSON files (one group per
  file, named by the file's stem; each file read on its own, so a bad one is
  skipped with a warning naming it and the others load), or one JSON file:
  either one group (``{"Animations": [...]}``, named by the stem) or several
  (``{"group name": {"Animations": [...]}, ...}``; each read on its own, so a bad
  one is skipped with a warning naming it and the others load). ``//`` and ``/* */``
  comments are ignored, as in the app's files. Members naming unknown clips
  are left out with a warning.
* :meth:`AnimationLibrary.check` tells whether a goal's name or group is known
  (without choosing anything), so that an unknown one is refused when the goal
  comes, naming close names (or the field that takes it, or why its clip was
  skipped); :meth:`AnimationLibrary.resolve` turns a goal's name or group into a
  clip; a group picks a member by weight and cool-down (:class:`GroupChooser`).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .clip import (
    MAX_CLIP_MS,
    AnimationError,
    AnimationGroup,
    Clip,
    ClipFormatError,
    GroupChooser,
    clear_sprite_cache,
    load_animation_groups,
    load_builtin,
    load_clip_file,
    read_group_file,
)
from ..regular_files import NotAFileError, read_regular_text
from .player import body_speed_notes

__all__ = ["AnimationLibrary", "CLIP_SUFFIXES", "load_audio_map"]

CLIP_SUFFIXES = (".yaml", ".yml", ".json", ".bin")
PathLike = Union[str, os.PathLike]


def load_audio_map(path: PathLike) -> Dict[int, Path]:
    """The WAV file of each Wwise event id, from a YAML or JSON mapping ``{event id: WAV
    path}`` (ids as numbers or digit strings; relative paths from the file's folder).
    Raises :class:`ClipFormatError` naming what is wrong."""
    from ..fast_yaml import safe_load

    p = Path(path).expanduser()
    try:
        doc = safe_load(read_regular_text(p, "animation_audio_map"), unique_keys=True)
    except NotAFileError as exc:
        raise ClipFormatError(str(exc)) from None
    except OSError as exc:
        raise ClipFormatError(f"audio map {p}: cannot read ({exc})") from None
    except Exception as exc:  # a YAML (or JSON) syntax error, whichever parser says it
        raise ClipFormatError(f"audio map {p}: not YAML or JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ClipFormatError(f"audio map {p}: expected a mapping {{Wwise event id: WAV file}}")
    out: Dict[int, Path] = {}
    keys: Dict[int, Any] = {}  # event id -> its key in the file
    for key, value in doc.items():
        text = str(key).strip()
        if not text.isdigit() or not 0 <= int(text) < 1 << 32:
            raise ClipFormatError(f"audio map {p}: {key!r} is not a Wwise event id (0..4294967295)")
        if int(text) in keys:  # 1234 and '1234': one event, and the second would replace the first
            raise ClipFormatError(f"audio map {p}: {keys[int(text)]!r} and {key!r} are both the event "
                                  f"{int(text)}; give it once")
        keys[int(text)] = key
        if not isinstance(value, str) or not value:
            raise ClipFormatError(f"audio map {p}: event {text}: {value!r} is not a file name")
        wav = Path(value).expanduser()
        out[int(text)] = wav if wav.is_absolute() else p.parent / wav
    return out


def _why_not_a_directory(path: Path, param: str, takes: str) -> str:
    """Why ``path``, given as the directory of parameter ``param``, is none: a file, or not there."""
    if path.is_file():
        return f"is a file, not a directory ({param} takes {takes})"
    return "does not exist" if not path.exists() else "is not a directory"


def _load_groups(path: Path, warn: Callable[[str], None]) -> Dict[str, AnimationGroup]:
    if path.is_dir():
        return load_animation_groups(path, warn)
    doc = read_group_file(path, warn)
    if isinstance(doc, dict) and "Animations" in doc:
        return {path.stem: AnimationGroup.from_json(path.stem, doc, str(path))}
    if isinstance(doc, dict) and any(isinstance(v, dict) for v in doc.values()):
        groups: Dict[str, AnimationGroup] = {}
        for name, value in doc.items():  # each on its own: a bad one costs itself only
            try:
                groups[str(name)] = AnimationGroup.from_json(str(name), value, str(path))
            except ClipFormatError as exc:
                warn(f"{exc}: skipped")
        return groups
    raise ClipFormatError(f"{path}: expected {{'Animations': [...]}} or {{'group': {{'Animations': [...]}}}}")


@dataclass
class AnimationLibrary:
    """Clips and groups by name. See the module docstring."""

    clips: Dict[str, Clip] = field(default_factory=dict)
    groups: Dict[str, AnimationGroup] = field(default_factory=dict)
    #: problems met while loading (skipped files, unknown group members), one line each
    warnings: List[str] = field(default_factory=list)
    #: clips that came from the directories (not built in)
    loaded_from_dirs: int = 0
    #: built-in clips replaced by a clip of the same name from a directory
    overridden_builtins: List[str] = field(default_factory=list)
    #: name -> file of the clips that drive the treads under the name of a built-in one
    #: that keeps them still (which behaviors play on the charger, trusting it)
    drives_unlike_builtin: Dict[str, str] = field(default_factory=dict)
    #: why a clip of the directories was skipped, by the clip's name and by its file's stem
    #: (a file that is not even valid YAML names no clip), for check() to say
    unloaded: Dict[str, str] = field(default_factory=dict)
    #: the clip files of which a clip, or the whole file, was skipped
    files_skipped: List[str] = field(default_factory=list)
    chooser: GroupChooser = field(default_factory=GroupChooser)

    @classmethod
    def load(cls, directories: Sequence[PathLike] = (), groups_path: Optional[PathLike] = None,
             builtin: bool = True, seed: int = 0, audio_map_path: Optional[PathLike] = None,
             sprite_dir: Optional[PathLike] = None) -> "AnimationLibrary":
        """``audio_map_path`` (:func:`load_audio_map`) and ``sprite_dir`` (one folder of PNG
        frames per sequence name) give app clips their sounds and sprite faces."""
        lib = cls(chooser=GroupChooser(seed))
        audio_map = None
        if audio_map_path:
            try:
                audio_map = load_audio_map(audio_map_path)
            except ClipFormatError as exc:
                lib.warnings.append(f"{exc}: app clips play without their sounds")
        if sprite_dir:
            sprite_dir = Path(sprite_dir).expanduser()
            if not sprite_dir.is_dir():
                why = _why_not_a_directory(sprite_dir, "animation_sprite_dir", "the directory of sprite folders")
                lib.warnings.append(f"sprite directory {sprite_dir} {why}: app clips play without their sprite faces")
                sprite_dir = None
        clear_sprite_cache()
        if builtin:
            lib.clips.update(load_builtin())
            lib.warnings.extend(w for clip in lib.clips.values() for w in (*clip.mended, *body_speed_notes(clip)))
        builtin_names = set(lib.clips)
        still_builtins = {name for name, clip in lib.clips.items() if not clip.tracks.moves_treads}
        seen_in_dirs: Dict[str, str] = {}
        for directory in directories:
            root = Path(directory).expanduser()
            if not root.is_dir():
                why = _why_not_a_directory(root, "animation_dirs", "directories of clip files")
                lib.warnings.append(f"animation directory {root} {why}: skipped")
                continue
            files = sorted(f for f in root.rglob("*") if f.is_file() and f.suffix.lower() in CLIP_SUFFIXES)
            for f in files:
                try:
                    clips = load_clip_file(f, audio_map=audio_map, sprite_dir=sprite_dir)
                except ClipFormatError as exc:
                    lib._not_loaded(str(exc), exc.clip, f)
                    continue
                except Exception as exc:  # noqa: BLE001 - a reader's bug: one file, not the driver's start
                    lib._not_loaded(f"{f}: cannot read ({exc!r})", None, f)
                    continue
                for clip in clips:
                    if not clip.end_s <= MAX_CLIP_MS / 1000.0:  # it would fail every goal
                        lib._not_loaded(f"{f} [{clip.name}]: lasts {clip.end_s:g} s, more than "
                                        f"{MAX_CLIP_MS / 1000:g} s (a keyframe's time plus its duration)",
                                        clip.name, f)
                        continue
                    if clip.name in seen_in_dirs:
                        lib.warnings.append(f"clip {clip.name!r} of {f} is already defined in "
                                            f"{seen_in_dirs[clip.name]}: the first is kept")
                        continue
                    seen_in_dirs[clip.name] = str(f)
                    lib.warnings.extend(clip.mended)  # values of our format mended, each named
                    lib.warnings.extend(body_speed_notes(clip, f"{f} [{clip.name}]"))  # played scaled down
                    lib.clips[clip.name] = clip
                    lib.loaded_from_dirs += 1
        if groups_path:
            path = Path(groups_path).expanduser()
            try:
                groups = _load_groups(path, lib.warnings.append)
            except ClipFormatError as exc:
                lib.warnings.append(f"{exc}: no groups loaded")
                groups = {}
            for name, group in groups.items():
                missing = [m.name for m in group.members if m.name not in lib.clips]
                if missing:
                    lib.warnings.append(f"animation group {name!r} names unknown clips "
                                        f"({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}): "
                                        "left out")
                    group = AnimationGroup(name, [m for m in group.members if m.name in lib.clips])
                lib.groups[name] = group
        lib.overridden_builtins = sorted(builtin_names & set(seen_in_dirs))
        for name in lib.overridden_builtins:
            where = seen_in_dirs[name]
            note = f"clip {name!r} of {where} replaces the built-in one: behaviors playing {name!r} play it"
            if name in still_builtins and lib.clips[name].tracks.moves_treads:
                lib.drives_unlike_builtin[name] = where
                note += ("; it drives the treads, which the built-in one keeps still, so it is refused while the "
                         "robot is on its charger (where behaviors play it as a clip that keeps the treads still)")
            lib.warnings.append(note)
        return lib

    def _not_loaded(self, why: str, clip: Optional[str], path: Path) -> None:
        """A clip file, or one clip of it, skipped for ``why``: said, and kept for check()."""
        self.warnings.append(f"{why}: skipped")
        if str(path) not in self.files_skipped:
            self.files_skipped.append(str(path))
        for name in (clip, path.stem):
            if name:
                self.unloaded.setdefault(name, why)

    def names(self) -> List[str]:
        return sorted(self.clips)

    def group_names(self) -> List[str]:
        return sorted(self.groups)

    def clips_with_warnings(self) -> List[Tuple[str, List[str]]]:
        """Clips that cannot play every part (e.g. app sounds or sprites without their assets)."""
        return [(name, clip.warnings) for name, clip in sorted(self.clips.items()) if clip.warnings]

    @staticmethod
    def _hint(wanted: str, known: List[str], what: str) -> str:
        """What to say of the ``known`` names after an unknown ``wanted``: up to 5 close ones
        (spelled alike, or containing it), or all of them when there are few."""
        close = difflib.get_close_matches(wanted, known, n=5, cutoff=0.6)
        low = wanted.lower()
        close += [n for n in known if low and low in n.lower() and n not in close]
        if close:
            return f"did you mean {', '.join(close[:5])}? {len(known)} {what} known (list_animations)"
        if len(known) <= 5:
            return f"known {what}: {', '.join(known)} (list_animations)"
        return f"{len(known)} {what} known (list_animations)"

    def check(self, name: str = "", group: str = "") -> None:
        """Raise :class:`AnimationError` unless the goal names a known group (when ``group``
        is given) or a known clip; the message names what is unknown and suggests close
        names and the ``list_animations`` service, or says that the name is one of the other
        kind (a group given as the clip, a clip as the group), or why its clip was skipped
        when loaded (:attr:`unloaded`). Chooses nothing."""
        if group:
            if group not in self.groups:
                if group in self.clips:  # a clip's name given as the group
                    raise AnimationError(f"no animation group {group!r}; {group!r} is a clip: give it as the "
                                         "goal's name, with group empty")
                known = self.group_names()
                if not known:
                    raise AnimationError(f"no animation group {group!r}: no groups are loaded "
                                         "(animation_groups_file)")
                raise AnimationError(f"no animation group {group!r}; "
                                     f"{self._hint(group, known, 'groups')}")
            return
        if not name:
            raise AnimationError("give an animation name or a group (see the list_animations service)")
        if name not in self.clips:
            if name in self.groups:  # a group's name given as the clip's
                raise AnimationError(f"no animation {name!r}; {name!r} is an animation group: give it as "
                                     "the goal's group")
            if name in self.unloaded:  # its file was skipped when the driver loaded it (one line: YAML's are not)
                raise AnimationError(f"no animation {name!r}: it was skipped when the clips were loaded "
                                     f"({' '.join(self.unloaded[name].split())}); mend it, then configure the "
                                     "driver again")
            skipped = len(self.files_skipped)  # it may be another clip of a file skipped whole
            raise AnimationError(f"no animation {name!r}; {self._hint(name, self.names(), 'clips')}" + (
                f"; clips of {skipped} file{'s' if skipped > 1 else ''} were skipped when loaded (the "
                "configure log says why)" if skipped else ""))

    def resolve(self, name: str = "", group: str = "", now: float = 0.0,
                head_angle_deg: Optional[float] = None, record: bool = True) -> Clip:
        """The clip a goal asks for: ``group`` (a member chosen at ``now``) if given, else ``name``.
        ``record`` false: a group's member is not recorded as played (its cool-down not
        started) until :meth:`played` says it is.

        Raises :class:`AnimationError` saying what is known (see :meth:`check`).
        """
        self.check(name, group)
        if group:
            g = self.groups[group]
            chosen = self.chooser.choose(g, now, head_angle_deg=head_angle_deg, record=record)
            if chosen is None:
                raise AnimationError(f"animation group {group!r} has no playable member now: "
                                     f"{self.chooser.unplayable(g, head_angle_deg)}")
            return self.clips[chosen]
        return self.clips[name]

    def played(self, group: str, name: str, now: float) -> None:
        """Clip ``name``, chosen from ``group`` (:meth:`resolve` with ``record`` false), plays
        at ``now``: its cool-down in the group starts. Nothing for a group not known."""
        if group in self.groups:
            self.chooser.played(group, name, now)
