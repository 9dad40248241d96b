"""Display images and audio chunks from ROS messages: checked, then converted. Pure.

Images
------
:func:`image_to_screen` takes the fields of a ``sensor_msgs/Image`` (any
size; ``mono8``, ``mono16``, ``rgb8``, ``bgr8``, ``rgba8``, ``bgra8``) and
returns the ``(64, 128)`` one-bit screen image: the picture is turned grey
(ITU-R 601 luma, as Pillow's ``L``; alpha darkens towards black; ``mono16``
keeps its high byte), scaled to fit the screen keeping its aspect ratio
(a picture 16 times the size it takes on the screen along a side, or more, is
first sampled at every n-th pixel, down to 8-15 pixels per screen pixel: a
large image costs no more than one of 16 times the screen's size), centred on
black, then thresholded at 128 or dithered (Floyd-Steinberg) by
:func:`cozmo_driver.protocol.display.image_to_bits`. :func:`screen_to_frame`
makes the ``DisplayImage`` bytes (even rows, simplified by ``fit_to_frame``
until they fit one frame: never oversized).

A field that does not describe the data (step shorter than a row, data not
``step x height`` bytes, an unknown encoding, a size of zero in one
dimension only or beyond 4096) raises :class:`CommandError` naming the field.
An image of 0 x 0 is no picture: :func:`is_empty_image` tells the caller,
which takes it as "clear".

The face layer (``display/face``) is the screen itself: :func:`face_to_screen`
takes only 128 x 64 images (what ``cozmo_face_node`` publishes) and refuses any
other size, naming the size expected and the one that came, rather than
scaling a picture that was meant to fill the screen pixel for pixel.

Audio
-----
:func:`audio_chunk_samples` checks an ``AudioChunk`` (rate 8000..48000 Hz, 1
or 2 channels, at least one sample, length a multiple of the channels) and
returns mono int16
samples at the chunk's rate (stereo averaged), which
:meth:`cozmo_driver.anim.av_stream.AVStream.stream_audio_at` brings to the robot's
rate (:data:`SAMPLE_RATE`) as a stream, and :func:`load_audio_file` reads a WAV file
at that rate (a FIFO once its writer has written, giving up when its goal ends first:
:func:`open_fifo`).

Motors
------
:func:`motor_stops` makes the messages that stop the head and lift motors an
animation moved, for the pacer to send when it stops the animation early.
"""

from __future__ import annotations

import math
import os
import select
import stat
from typing import Any, BinaryIO, Callable, List, Optional, Tuple, Union

import numpy as np

from ..protocol import messages as msgs
from ..protocol.audio import MAX_WAV_RATE, MIN_WAV_RATE, SAMPLE_RATE, WavInfo, load_wav, mix_down
from ..protocol.display import (DISPLAY_HEIGHT, DISPLAY_WIDTH, SCREEN_HEIGHT, fit_to_frame, fitted_size,
                                image_to_bits)
from ..protocol.errors import LocalProtocolError
from .commands import CommandError

__all__ = ["IMAGE_ENCODINGS", "MAX_IMAGE_SIDE", "SAMPLES_PER_SCREEN_PIXEL", "SAMPLE_RATE", "is_empty_image",
           "image_to_screen", "face_to_screen",
           "screen_to_frame", "audio_chunk_samples", "load_audio_file", "WavInfo",
           "motor_stops"]

#: encoding -> (bytes per pixel, channel order); "mono16" is 2 bytes of one channel.
IMAGE_ENCODINGS = {
    "mono8": (1, "L"),
    "8UC1": (1, "L"),
    "mono16": (2, "L16"),
    "16UC1": (2, "L16"),
    "rgb8": (3, "RGB"),
    "bgr8": (3, "BGR"),
    "rgba8": (4, "RGBA"),
    "bgra8": (4, "BGRA"),
}
#: Largest width or height accepted (a 4096 x 4096 rgba8 image is 64 MiB).
MAX_IMAGE_SIDE = 4096
#: A larger picture is sampled down to this many pixels (at least, fewer than twice as many)
#: per screen pixel along each side before it is converted (see :func:`image_to_screen`).
SAMPLES_PER_SCREEN_PIXEL = 8
_LUMA = np.array([299, 587, 114], dtype=np.uint32)  # ITU-R 601-2, x 1000 (Pillow's "L")


def is_empty_image(width: int, height: int) -> bool:
    """0 x 0: no picture (the display layer is cleared)."""
    return int(width) == 0 and int(height) == 0


def _pixels(width: int, height: int, encoding: str, step: int, data: Any,
            field: str) -> Tuple[np.ndarray, str]:
    """``(the (height, width, bytes per pixel) uint8 view of the data, the channel order)``
    of an Image's fields, checked (nothing is copied)."""
    if encoding not in IMAGE_ENCODINGS:
        raise CommandError(f"{field}.encoding {encoding!r} is not supported (use one of "
                           f"{', '.join(IMAGE_ENCODINGS)})")
    for name, value in (("width", width), ("height", height)):
        if not 1 <= value <= MAX_IMAGE_SIDE:
            raise CommandError(f"{field}.{name} = {value}: must be 1..{MAX_IMAGE_SIDE} "
                               "(0 x 0 clears the display)")
    bpp, order = IMAGE_ENCODINGS[encoding]
    row = width * bpp
    if step < row:
        raise CommandError(f"{field}.step = {step} is shorter than a row of {width} {encoding} "
                           f"pixels ({row} bytes)")
    buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    if buf.size != step * height:
        raise CommandError(f"{field}.data has {buf.size} bytes, but step x height = "
                           f"{step} x {height} = {step * height}")
    return buf.reshape(height, step)[:, :row].reshape(height, width, bpp), order


def _sampled(px: np.ndarray, size: Tuple[int, int]) -> np.ndarray:
    """Every n-th pixel of a picture that is to take ``size`` (width, height) on the screen,
    n along each side the most that keeps :data:`SAMPLES_PER_SCREEN_PIXEL` pixels per screen
    pixel (the middle one of each n; fewer than twice as many are kept): a view, so that
    converting a large picture costs what converting a picture of the screen's size does."""
    step_y = max(1, px.shape[0] // (SAMPLES_PER_SCREEN_PIXEL * size[1]))
    step_x = max(1, px.shape[1] // (SAMPLES_PER_SCREEN_PIXEL * size[0]))
    if step_y == 1 and step_x == 1:
        return px
    return px[step_y // 2::step_y, step_x // 2::step_x]


def _to_grey(px: np.ndarray, order: str, is_bigendian: int) -> np.ndarray:
    """The ``(height, width)`` uint8 grey picture of ``(height, width, bytes per pixel)``
    pixels in channel ``order``."""
    if order == "L":
        return np.ascontiguousarray(px[:, :, 0])
    if order == "L16":
        return np.ascontiguousarray(px[:, :, 0 if is_bigendian else 1])  # the high byte
    red, blue = (2, 0) if order.startswith("BGR") else (0, 2)
    grey = px[:, :, red].astype(np.uint32) * _LUMA[0]
    grey += px[:, :, 1].astype(np.uint32) * _LUMA[1]
    grey += px[:, :, blue].astype(np.uint32) * _LUMA[2]
    grey = (grey + 500) // 1000
    if px.shape[2] == 4:
        grey = (grey * px[:, :, 3] + 127) // 255
    return grey.astype(np.uint8)


def image_to_screen(width: int, height: int, encoding: str, step: int, is_bigendian: int, data: Any,
                    dither: bool, field: str = "image") -> np.ndarray:
    """The ``(64, 128)`` bool screen image of an Image's fields (see the module docstring).

    A ``mono8`` image of exactly 128 x 64 is thresholded as it is (no scaling). A picture
    ``2 x SAMPLES_PER_SCREEN_PIXEL`` times or more the size it takes on the screen (along
    a side) is sampled first (:func:`_sampled`): the work is bounded by the screen's size,
    not the image's (a 4096 x 4096 ``rgba8`` image took 0.7 s and 450 MiB converted whole).
    """
    px, order = _pixels(int(width), int(height), str(encoding), int(step), data, field)
    size = fitted_size(int(width), int(height))
    grey = _to_grey(_sampled(px, size), order, int(is_bigendian))
    if grey.shape == (SCREEN_HEIGHT, DISPLAY_WIDTH) and not dither:
        return grey >= 128
    return image_to_bits(grey, "dither" if dither else "threshold", size=size)


def face_to_screen(width: int, height: int, encoding: str, step: int, is_bigendian: int, data: Any,
                   field: str = "display/face") -> np.ndarray:
    """The ``(64, 128)`` bool screen image of a face layer image: exactly 128 x 64 (any
    encoding of :data:`IMAGE_ENCODINGS`), thresholded; another size raises
    :class:`CommandError` saying which size is expected and which came."""
    if (int(width), int(height)) != (DISPLAY_WIDTH, SCREEN_HEIGHT):
        raise CommandError(f"{field} is {int(width)} x {int(height)}: a face must be "
                           f"{DISPLAY_WIDTH} x {SCREEN_HEIGHT} (width x height, as cozmo_face_node "
                           "publishes; 0 x 0 clears it); use display/image for pictures of "
                           "other sizes")
    return image_to_screen(width, height, encoding, step, is_bigendian, data, False, field)


def screen_to_frame(screen: np.ndarray) -> Tuple[bytes, np.ndarray]:
    """``(DisplayImage.image bytes, the (32, 128) bits they show)`` for a ``(64, 128)`` screen
    image (its even rows are shown), or for the ``(32, 128)`` rows themselves."""
    bits = np.asarray(screen, dtype=bool)
    if bits.shape[0] != DISPLAY_HEIGHT:
        bits = np.ascontiguousarray(bits[0::2])
    return fit_to_frame(bits)


def audio_chunk_samples(sample_rate: int, channels: int, samples: Any,
                        field: str = "audio/pcm", max_s: float = math.inf) -> np.ndarray:
    """Mono int16 samples of an AudioChunk's fields, at ``sample_rate`` (raises CommandError);
    a chunk of more than ``max_s`` seconds is refused before it is converted."""
    if not MIN_WAV_RATE <= int(sample_rate) <= MAX_WAV_RATE:
        raise CommandError(f"{field}.sample_rate = {sample_rate} Hz: must be "
                           f"{MIN_WAV_RATE}..{MAX_WAV_RATE}")
    if int(channels) not in (1, 2):
        raise CommandError(f"{field}.channels = {channels}: must be 1 (mono) or 2 (stereo)")
    seconds = len(samples) / int(channels) / int(sample_rate)
    if seconds > max_s:
        raise CommandError(f"{field}.samples hold {seconds:.1f} s of sound; a chunk may hold at "
                           f"most {max_s:g} s (what the driver queues): publish the sound in "
                           "chunks as it plays, e.g. 0.1 s each")
    arr = np.asarray(samples, dtype=np.int16)
    if arr.ndim != 1:
        raise CommandError(f"{field}.samples must be a flat list")
    if arr.size == 0:
        raise CommandError(f"{field}.samples is empty: a chunk needs at least one sample "
                           f"({int(channels)} value{'s' if int(channels) > 1 else ''} per sample)")
    if arr.size % int(channels):
        raise CommandError(f"{field}.samples has {arr.size} values: not a multiple of "
                           f"channels = {channels}")
    if int(channels) == 2:
        return mix_down(arr.reshape(-1, 2))
    return arr


#: s: how often a reader waiting for a FIFO's writer looks whether its goal has ended
FIFO_POLL_S = 0.1


def load_audio_file(source: Union[str, os.PathLike, BinaryIO],
                    ended: Optional[Callable[[], bool]] = None) -> Tuple[np.ndarray, WavInfo]:
    """``(mono int16 samples at SAMPLE_RATE, info)`` of a PCM WAV file; a file that cannot
    be read or played, or holds no samples, raises :class:`CommandError` saying why. A
    path's ``~`` is expanded; a relative path is read from the process's working directory,
    and when no file is there the message says so, with the absolute path tried. A path
    that is a FIFO is read once a writer has written to it (:func:`open_fifo`); with
    ``ended`` (its goal's), the wait gives up, reading nothing, once ``ended()``."""
    given = path = opened = None
    if isinstance(source, (str, os.PathLike)):
        given = os.fspath(source)
        source = path = os.path.expanduser(given)
        if ended is not None and _is_fifo(path):
            source = opened = open_fifo(path, ended)
    try:
        pcm, info = load_wav(source)
    except LocalProtocolError as exc:
        if path is not None and isinstance(exc.__cause__, FileNotFoundError):
            raise CommandError(_no_file(given, path)) from None
        raise CommandError(str(exc)) from None
    finally:
        if opened is not None:
            opened.close()
    if not pcm.size:  # (it succeeded, playing nothing)
        raise CommandError(f"{given if given is not None else getattr(source, 'name', '<stream>')}: no samples")
    return pcm, info


def _is_fifo(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False  # (said by the reader)


def open_fifo(path: str, ended: Callable[[], bool]) -> BinaryIO:
    """The FIFO at ``path`` opened for reading, once a writer has written to it (or come and
    gone), without blocking meanwhile: every :data:`FIFO_POLL_S` the wait looks at
    ``ended()``, and once it is true it closes the FIFO, having read nothing (so that what a
    writer sends goes to a reader that wants it), and raises :class:`CommandError`. A reader
    blocked in ``open()`` until a writer came could not be let go: each play_audio goal ended
    while it waited left one for good, and the next writer fed them all, each a part."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # (a FIFO's reader opens without a writer)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not ended() and not poller.poll(FIFO_POLL_S * 1000.0):
            pass
        if ended():
            raise CommandError(f"{path}: the goal ended before a writer came")
        os.set_blocking(fd, True)
        return open(path, "rb", opener=lambda _path, _flags: fd)
    except BaseException:
        os.close(fd)
        raise


def _no_file(given: str, path: str) -> str:
    """What to say of a WAV path ``given`` (``path`` once ``~`` is expanded) with no file."""
    if given != given.strip():  # (a line read with its newline): quoted, not split over two lines
        stripped = given.strip()
        there = f", and {stripped} is a file: send the path without it" \
            if os.path.isfile(os.path.expanduser(stripped)) else ""
        return (f"{given!r}: cannot read WAV file: no such file; the path begins or ends with white "
                f"space (a line read with its newline?){there}")
    if os.path.isabs(path):
        tried = "" if path == given else f" ({path})"
        return f"{given}{tried}: cannot read WAV file: no such file"
    return (f"{given}: cannot read WAV file: no such file (a relative path is read from the "
            f"driver's working directory, {os.getcwd()}: {os.path.abspath(path)} was tried); "
            "give the file's absolute path")


def motor_stops(head: bool, lift: bool) -> List[Any]:
    """The messages that stop the head (MoveHead at 0) and/or the lift (MoveLift at 0)."""
    stops: List[Any] = []
    if head:
        stops.append(msgs.MoveHead(speed_rad_per_sec=0.0))
    if lift:
        stops.append(msgs.MoveLift(speed_rad_per_sec=0.0))
    return stops
