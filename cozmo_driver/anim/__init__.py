"""Animations: clips, their files, the 30 fps player and the audio/display pacer.

Pure (but for :mod:`.av_stream`): no clock and no I/O beyond reading clip files
when asked.

* :mod:`.clip`: the clip model, our YAML/JSON format, Cozmo's FlatBuffers
  ``.bin`` clips (reader and writer), synthesised sounds, animation groups and
  the built-in animations (``builtin/*.yaml``);
* :mod:`.player`: clips compiled onto the robot's 30 fps tick grid and an
  :class:`AnimationPlayer` that paces them;
* :mod:`.av_pacer`: the :class:`AVPacer` for streamed audio and images;
* :mod:`.library`: the :class:`AnimationLibrary` a driver plays from (built-in
  clips, clip directories, groups);
* :mod:`.av_stream`: the one module here that runs on a clock, the
  :class:`~.av_stream.AVStream` that ticks an :class:`AVPacer` on the I/O thread
  of a :class:`~cozmo_driver.client.Robot` (it sits above the client and is not
  imported here, so that ``cozmo_driver.anim`` stays pure: import it from
  :mod:`cozmo_driver.anim.av_stream`).
"""

from .av_pacer import AVPacer, PacerStats
from .clip import (
    AnimationError,
    AnimationGroup,
    Clip,
    ClipFormatError,
    GroupChooser,
    Tracks,
    list_builtin,
    load_animation_groups,
    load_builtin,
    load_clip_file,
    load_clips_dir,
    read_anim_bin,
    synthesize,
    write_anim_bin,
)
from .library import AnimationLibrary
from .player import AnimationPlayer, CompiledClip, PlayerStats, compile_clip

__all__ = [
    "AVPacer",
    "PacerStats",
    "AnimationError",
    "AnimationGroup",
    "Clip",
    "ClipFormatError",
    "GroupChooser",
    "Tracks",
    "list_builtin",
    "load_animation_groups",
    "load_builtin",
    "load_clip_file",
    "load_clips_dir",
    "read_anim_bin",
    "synthesize",
    "write_anim_bin",
    "AnimationLibrary",
    "AnimationPlayer",
    "CompiledClip",
    "PlayerStats",
    "compile_clip",
]
