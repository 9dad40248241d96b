"""Speech: text to the robot's speaker, synthesised on the driver's computer.

Cozmo has no speech synthesiser of its own: the official SDK's ``say_text`` had the
app make the sound and stream it. Here ``espeak-ng`` (Debian and Ubuntu's
``espeak-ng`` package; offline, small, many languages) makes a WAV of the text, and
the driver plays it like any sound (``play_audio`` with ``text``). The program runs
once per text, with a timeout, its arguments given as a list (no shell), and the
text after ``--`` so that it is never read as an option.

Everything that can go wrong raises :class:`CommandError` saying what to do:
espeak-ng missing (how to install it), an empty or too long text, a text whose speech
would last more than the 10 minutes a WAV file may (CJK text in an English voice, a slow
``speech_speed``), a voice it does not know (its own message), a synthesis that fails or
takes too long.
"""

from __future__ import annotations

import io
import re
import shutil
import struct
import subprocess
from typing import TYPE_CHECKING, Optional, Tuple

from .commands import CommandError

if TYPE_CHECKING:  # the audio codec only when something is spoken: the voice check at the
    import numpy as np  # driver's start-up (parameters.validate_value) needs none of it

    from ..protocol.audio import WavInfo

__all__ = ["speak", "check_voice", "voice_missing", "MAX_TEXT_CHARS", "SPEECH_PROGRAM"]

#: the synthesiser, looked up on PATH
SPEECH_PROGRAM = "espeak-ng"
#: the longest text spoken at once (about two and a half minutes at 150 words a minute)
MAX_TEXT_CHARS = 2000
#: how long one synthesis may take, s (espeak-ng makes minutes of speech in well under one)
SYNTHESIS_TIMEOUT_S = 30.0
_VOICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+\-/.]{0,63}")


def check_voice(voice: str) -> Optional[str]:
    """None if ``voice`` can be an espeak-ng voice name (e.g. ``en-us``, ``en+f3``,
    ``mb-en1``), else what is wrong with it."""
    if not _VOICE.fullmatch(voice):
        return (f"'{voice}' is not a voice name: letters, digits and _ + - / . only, starting "
                "with a letter or digit, at most 64 (list them with: espeak-ng --voices)")
    return None


def _no_voice(voice: str, program: str, where: str = "") -> str:
    return f"{program} has no voice '{voice}' ({where}list them with: {program} --voices)"


def voice_missing(voice: str, program: str = SPEECH_PROGRAM) -> Optional[str]:
    """What is wrong if ``program`` (espeak-ng) has no voice ``voice``; None if it has one, or
    if it is not installed or cannot tell within 5 s (a goal then says what is wrong). It
    speaks one word quietly (``-q``: no sound), about 15 ms."""
    found = shutil.which(program)
    if found is None or check_voice(voice) is not None:
        return None
    try:
        done = subprocess.run([found, "-q", "-v", voice, "--", "a"], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=5.0, check=False)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return None if done.returncode == 0 else _no_voice(voice, program)


def speak(text: str, voice: str = "en-us", speed_wpm: int = 150, pitch: int = 70,
          program: str = SPEECH_PROGRAM) -> Tuple[np.ndarray, WavInfo]:
    """``(mono int16 samples at the robot's rate, info)`` of ``text`` spoken by espeak-ng."""
    spoken = " ".join(text.split())
    if not spoken:
        raise CommandError("text is empty: nothing to say")
    if len(spoken) > MAX_TEXT_CHARS:
        raise CommandError(f"text has {len(spoken)} characters; at most {MAX_TEXT_CHARS} at once "
                           "(split it into several goals)")
    if "\x00" in spoken:
        raise CommandError("text holds a NUL character")
    problem = check_voice(voice)
    if problem is not None:
        raise CommandError(f"voice {problem}")
    found = shutil.which(program)
    if found is None:
        raise CommandError(f"speech needs {program} on the driver's computer, and it is not "
                           f"installed: sudo apt install {SPEECH_PROGRAM}")
    command = [found, "--stdout", "-v", voice, "-s", str(int(speed_wpm)), "-p", str(int(pitch)),
               "--", spoken]
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=SYNTHESIS_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise CommandError(f"{program} took more than {SYNTHESIS_TIMEOUT_S:.0f} s to speak "
                           f"{len(spoken)} characters: gave up") from None
    except OSError as exc:
        raise CommandError(f"{program} could not be run: {exc}") from None
    said = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode != 0 and "voice does not exist" in said:
        raise CommandError(_no_voice(voice, program, "the speech_voice parameter; "))
    if done.returncode != 0 or not done.stdout:
        raise CommandError(f"{program} failed (exit status {done.returncode})"
                           + (f": {said}" if said else ""))
    from ..protocol.audio import MAX_WAV_SECONDS
    from .media import load_audio_file
    seconds = _wav_seconds(done.stdout)
    if seconds is not None and seconds > MAX_WAV_SECONDS:  # (the loader would speak of "<stream>", a WAV file)
        raise CommandError(f"the text's speech lasts {seconds:.0f} s ({seconds / 60:.1f} minutes) at "
                           f"speech_speed {int(speed_wpm)} words a minute; at most {MAX_WAV_SECONDS} s "
                           f"({MAX_WAV_SECONDS // 60} minutes) are played at once: split the text into "
                           "several goals")
    return load_audio_file(io.BytesIO(done.stdout))


def _wav_seconds(wav: bytes) -> Optional[float]:
    """The seconds of sound in ``wav`` as espeak-ng writes it (a 44-byte header, then the
    samples; its data size is not filled in), from its length; None for another layout
    (the loader then says what it finds)."""
    if len(wav) < 44 or wav[:4] != b"RIFF" or wav[8:16] != b"WAVEfmt " or wav[36:40] != b"data":
        return None
    rate, = struct.unpack_from("<I", wav, 24)
    block, = struct.unpack_from("<H", wav, 32)
    return (len(wav) - 44) / (rate * block) if rate and block else None
