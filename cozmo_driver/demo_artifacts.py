"""What ``cozmo-demo`` leaves behind: pictures and a sound, made with numpy and Pillow.

Pure: no ROS, no sockets, no clock. Each writer takes plain arrays and a path:

* :func:`write_camera_png`: a ``mono8`` or ``rgb8`` camera frame;
* :func:`face_screen` and :func:`write_face_png`: the face display as the
  robot shows it (the 32-row protocol image on the 64 physical rows of the
  OLED, see :mod:`cozmo_driver.protocol.display`), enlarged, in the OLED's
  colour on a dark panel;
* :func:`face_display_of_image`: that protocol image for a ``display/face``
  picture, converted as the driver converts it (how a real robot's face is
  saved: its screen cannot be read back);
* :func:`write_trajectory_png`: a plot of the driven path, odometry against
  the simulator's ground truth when there is one, with millimetre ticks and a
  legend (Pillow only: matplotlib is not a dependency);
* :func:`write_chirp_wav`: a short synthesized sound (three rising notes);
* :func:`align_poses`: ground truth moved into the odometry frame;
* :data:`DEMO_ARTEFACTS` and :func:`remove_earlier_artefacts`: the files the demo
  writes, and the removal of an earlier run's before a run writes its own.

Poses are ``(x, y, yaw)`` tuples in millimetres and radians.
"""

from __future__ import annotations

import math
import wave
from pathlib import Path
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .driver.media import image_to_screen, is_empty_image, screen_to_frame
from .protocol.display import DISPLAY_HEIGHT, DISPLAY_WIDTH

__all__ = [
    "DEMO_ARTEFACTS",
    "remove_earlier_artefacts",
    "Pose",
    "compose",
    "inverse",
    "align_poses",
    "write_camera_png",
    "face_screen",
    "face_picture",
    "write_face_png",
    "face_display_of_image",
    "FACE_LIT_RGB",
    "nice_step",
    "write_trajectory_png",
    "ODOMETRY_RGB",
    "TRUTH_RGB",
    "write_chirp_wav",
]

Pose = Tuple[float, float, float]

#: every file ``cozmo-demo`` may write into its artefacts directory
DEMO_ARTEFACTS = ("bringup.log", "camera.png", "face.png", "sound.wav", "trajectory.png")


def remove_earlier_artefacts(directory: Path) -> Tuple[List[str], List[Tuple[str, str]]]:
    """Remove the files of :data:`DEMO_ARTEFACTS` that ``directory`` holds (an earlier
    run's: this one has not written yet); other files are left alone. Returns the names
    removed, and (name, why) of those that could not be."""
    removed: List[str] = []
    kept: List[Tuple[str, str]] = []
    for name in DEMO_ARTEFACTS:
        path = Path(directory) / name
        if not (path.is_file() or path.is_symlink()):
            continue
        try:
            path.unlink()
        except OSError as exc:
            kept.append((name, exc.strerror or str(exc)))
        else:
            removed.append(name)
    return removed, kept


# ---------------------------------------------------------------------------- poses

def compose(a: Pose, b: Pose) -> Pose:
    """``a * b``: the pose ``b`` (given in frame ``a``) in ``a``'s parent frame."""
    c, s = math.cos(a[2]), math.sin(a[2])
    return (a[0] + c * b[0] - s * b[1], a[1] + s * b[0] + c * b[1], a[2] + b[2])


def inverse(a: Pose) -> Pose:
    c, s = math.cos(a[2]), math.sin(a[2])
    return (-(c * a[0] + s * a[1]), s * a[0] - c * a[1], -a[2])


def align_poses(truth: Sequence[Pose], truth_at_start: Pose, odom_at_start: Pose) -> List[Pose]:
    """The ground-truth poses in the odometry frame, given one instant (the start, standing
    still) at which the robot was at ``truth_at_start`` (world) and ``odom_at_start`` (odom)."""
    world_to_odom = compose(odom_at_start, inverse(truth_at_start))
    return [compose(world_to_odom, pose) for pose in truth]


# ---------------------------------------------------------------------------- camera

def write_camera_png(pixels: np.ndarray, path: Path) -> Tuple[int, int]:
    """A camera frame, ``(h, w)`` grey or ``(h, w, 3)`` RGB uint8, as a PNG; returns (w, h)."""
    array = np.ascontiguousarray(pixels, dtype=np.uint8)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    mode = "L" if array.ndim == 2 else "RGB"
    image = Image.fromarray(array, mode)
    image.save(path, optimize=True)
    return image.size


# ---------------------------------------------------------------------------- face

#: Cozmo's OLED draws its face in a light cyan.
FACE_LIT_RGB = (92, 214, 255)
_FACE_DARK_RGB = (12, 17, 23)      # an unlit pixel
_FACE_GAP_RGB = (4, 6, 8)          # between pixels
_FACE_BEZEL_RGB = (0, 0, 0)


def face_screen(display: np.ndarray, previous: Optional[np.ndarray] = None) -> np.ndarray:
    """The ``(64, 128)`` OLED from ``(32, 128)`` protocol images, as the robot shows them.

    The robot draws successive images on alternate physical rows (to limit burn-in): the
    latest one on the even rows, the one before it on the odd rows. Without ``previous``
    (or while the same image stays up) both fields show the same picture."""
    current = np.asarray(display, dtype=bool)
    if current.shape != (32, 128):
        raise ValueError(f"a protocol display image is (32, 128), not {current.shape}")
    before = current if previous is None else np.asarray(previous, dtype=bool)
    screen = np.empty((64, 128), dtype=bool)
    screen[0::2] = current
    screen[1::2] = before
    return screen


def face_picture(screen: np.ndarray, scale: int = 4, border: int = 16) -> Image.Image:
    """An RGB picture of a ``(64, 128)`` screen: each pixel a ``scale`` x ``scale`` dot with
    a one-pixel gap (the OLED's grid), lit ones in :data:`FACE_LIT_RGB`, on a black bezel."""
    if scale < 2:
        raise ValueError("scale must be at least 2 (a dot and its gap)")
    lit = np.kron(np.asarray(screen, dtype=np.uint8), np.ones((scale, scale), dtype=np.uint8))
    h, w = lit.shape
    rgb = np.empty((h, w, 3), dtype=np.uint8)
    rgb[:] = _FACE_DARK_RGB
    rgb[lit.astype(bool)] = FACE_LIT_RGB
    gap = np.zeros((h, w), dtype=bool)
    gap[scale - 1::scale, :] = True
    gap[:, scale - 1::scale] = True
    rgb[gap] = _FACE_GAP_RGB
    framed = np.empty((h + 2 * border, w + 2 * border, 3), dtype=np.uint8)
    framed[:] = _FACE_BEZEL_RGB
    framed[border:border + h, border:border + w] = rgb
    return Image.fromarray(framed, "RGB")


def write_face_png(display: np.ndarray, path: Path, scale: int = 4,
                   previous: Optional[np.ndarray] = None) -> int:
    """The face display (``(32, 128)`` protocol image) as a PNG; returns the number of lit
    screen pixels (of the 128 x 64)."""
    screen = face_screen(display, previous)
    face_picture(screen, scale).save(path, optimize=True)
    return int(screen.sum())


def face_display_of_image(width: int, height: int, encoding: str, step: int, is_bigendian: int,
                          data: Any) -> np.ndarray:
    """The ``(32, 128)`` protocol image that the driver sends the robot for a ``display/face``
    image (the fields of a sensor_msgs/Image): thresholded, not dithered, fitted to a frame,
    as :class:`~cozmo_driver.ros.media_interfaces.MediaInterfaces` does; so the picture that a
    simulated robot's framebuffer holds. An empty (0 x 0) image clears the face: all dark.
    Raises ValueError for an image the driver would refuse."""
    if is_empty_image(width, height):
        return np.zeros((DISPLAY_HEIGHT, DISPLAY_WIDTH), dtype=bool)
    screen = image_to_screen(width, height, encoding, step, is_bigendian, data, False, "display/face")
    return screen_to_frame(screen)[1]


# ---------------------------------------------------------------------------- trajectory

ODOMETRY_RGB = (31, 100, 200)       # blue, drawn on top
TRUTH_RGB = (255, 150, 40)          # orange, wide underneath
_AXIS_RGB = (60, 60, 60)
_GRID_RGB = (228, 228, 228)
_TEXT_RGB = (30, 30, 30)


def _font(size: int) -> ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)        # Pillow 10.1 and later: scalable
    except TypeError:  # pragma: no cover - older Pillow (a distro's): the bitmap font
        return ImageFont.load_default()


def _text_size(draw: ImageDraw.ImageDraw, text: str, font) -> Tuple[int, int]:
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    return right - left, bottom - top


def nice_step(span: float, ticks: int = 6) -> float:
    """A tick spacing of 1, 2, 2.5 or 5 x 10^k that gives about ``ticks`` ticks over ``span``."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(1, ticks)
    power = 10.0 ** math.floor(math.log10(raw))
    for factor in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= factor * power:
            return factor * power
    return 10.0 * power  # pragma: no cover - the loop always returns


def _tick_label(value: float, step: float) -> str:
    if step >= 1.0 and abs(value - round(value)) < 1e-6:
        return f"{int(round(value))}"
    decimals = max(0, -int(math.floor(math.log10(step))))
    return f"{value:.{decimals}f}"


def write_trajectory_png(path: Path, odometry: Sequence[Pose],
                         truth: Optional[Sequence[Pose]] = None,
                         title: str = "Driven path", note: str = "",
                         size: Tuple[int, int] = (760, 760)) -> None:
    """Plot the driven path (mm, x to the right, y up, same scale on both axes): the
    odometry in :data:`ODOMETRY_RGB` over the ground truth in :data:`TRUTH_RGB` (if any),
    a start circle and an end arrow, millimetre ticks, a grid, a legend, and ``note`` in
    the bottom left corner."""
    if not odometry:
        raise ValueError("no odometry to plot")
    width, height = size
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    title_font, font, small = _font(20), _font(15), _font(13)

    curves = [list(odometry)] + ([list(truth)] if truth else [])
    xs = [p[0] for curve in curves for p in curve]
    ys = [p[1] for curve in curves for p in curve]
    x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), min(ys), max(ys)
    span = max(x_hi - x_lo, y_hi - y_lo, 20.0) * 1.18
    cx, cy = (x_lo + x_hi) / 2, (y_lo + y_hi) / 2
    x_lo, x_hi, y_lo, y_hi = cx - span / 2, cx + span / 2, cy - span / 2, cy + span / 2

    left, right, top, bottom = 92, 30, 92, 96
    side = min(width - left - right, height - top - bottom)
    plot_left = left + (width - left - right - side) // 2
    plot_top = top
    scale = side / span

    def px(x: float, y: float) -> Tuple[float, float]:
        return plot_left + (x - x_lo) * scale, plot_top + side - (y - y_lo) * scale

    # title and legend above the plot
    tw, _ = _text_size(draw, title, title_font)
    draw.text(((width - tw) / 2, 14), title, fill=_TEXT_RGB, font=title_font)
    legend = [("odometry (odom)", ODOMETRY_RGB, 3)]
    if truth:
        legend.insert(0, ("simulator ground truth", TRUTH_RGB, 9))
    entries_width = sum(_text_size(draw, text, font)[0] + 48 + 28 for text, _, _ in legend) - 28
    x = (width - entries_width) / 2
    y = 56
    for text, colour, line_width in legend:
        draw.line([(x, y), (x + 36, y)], fill=colour, width=line_width)
        draw.text((x + 46, y - 9), text, fill=_TEXT_RGB, font=font)
        x += _text_size(draw, text, font)[0] + 48 + 28

    # grid, ticks and tick labels
    step = nice_step(span, 6)
    for axis in ("x", "y"):
        lo, hi = (x_lo, x_hi) if axis == "x" else (y_lo, y_hi)
        value = math.ceil(lo / step) * step
        while value <= hi + 1e-9:
            label = _tick_label(value, step)
            lw, lh = _text_size(draw, label, small)
            if axis == "x":
                gx, _ = px(value, y_lo)
                draw.line([(gx, plot_top), (gx, plot_top + side)], fill=_GRID_RGB, width=1)
                draw.line([(gx, plot_top + side), (gx, plot_top + side + 6)], fill=_AXIS_RGB)
                draw.text((gx - lw / 2, plot_top + side + 10), label, fill=_TEXT_RGB, font=small)
            else:
                _, gy = px(x_lo, value)
                draw.line([(plot_left, gy), (plot_left + side, gy)], fill=_GRID_RGB, width=1)
                draw.line([(plot_left - 6, gy), (plot_left, gy)], fill=_AXIS_RGB)
                draw.text((plot_left - 10 - lw, gy - lh / 2 - 2), label, fill=_TEXT_RGB, font=small)
            value += step
    draw.rectangle([plot_left, plot_top, plot_left + side, plot_top + side], outline=_AXIS_RGB)

    # axis labels (the y one turned by 90 degrees)
    xlabel = "x (mm)"
    lw, _ = _text_size(draw, xlabel, font)
    draw.text((plot_left + side / 2 - lw / 2, plot_top + side + 34), xlabel, fill=_TEXT_RGB,
              font=font)
    ylabel = "y (mm)"
    lw, lh = _text_size(draw, ylabel, font)
    label_image = Image.new("RGB", (lw + 4, lh + 8), "white")
    ImageDraw.Draw(label_image).text((2, 0), ylabel, fill=_TEXT_RGB, font=font)
    label_image = label_image.rotate(90, expand=True)
    image.paste(label_image, (plot_left - 78, int(plot_top + side / 2 - label_image.height / 2)))

    # the curves: ground truth wide underneath, odometry on top
    def polyline(curve: Iterable[Pose], colour, line_width: int) -> None:
        points = [px(p[0], p[1]) for p in curve]
        if len(points) == 1:
            points = points * 2
        draw.line(points, fill=colour, width=line_width, joint="curve")

    if truth:
        polyline(truth, TRUTH_RGB, 9)
    polyline(odometry, ODOMETRY_RGB, 3)

    # start (a dot) and end (an arrow along the final heading) of the odometry
    sx, sy = px(*odometry[0][:2])
    draw.ellipse([sx - 7, sy - 7, sx + 7, sy + 7], outline=_AXIS_RGB, width=2)
    ex, ey = px(*odometry[-1][:2])
    yaw = odometry[-1][2]
    tip = (ex + 28 * math.cos(yaw), ey - 28 * math.sin(yaw))
    back = [(tip[0] - 12 * math.cos(yaw + a), tip[1] + 12 * math.sin(yaw + a))
            for a in (0.45, -0.45)]
    draw.line([(ex, ey), tip], fill=_AXIS_RGB, width=2)
    draw.polygon([tip, *back], fill=_AXIS_RGB)
    key = "circle: start; arrow: end and heading"
    kw, _ = _text_size(draw, key, small)
    draw.text((width - right - kw, height - 24), key, fill=(110, 110, 110), font=small)
    if note:
        draw.text((plot_left, height - 24), note, fill=(110, 110, 110), font=small)
    image.save(path, optimize=True)


# ---------------------------------------------------------------------------- sound

def write_chirp_wav(path: Path, sample_rate: int = 22050, volume: float = 0.6) -> float:
    """Three rising notes (C5, E5, G5, then the octave), 16-bit mono; returns the duration (s)."""
    notes = [(523.25, 0.16), (659.25, 0.16), (783.99, 0.16), (1046.5, 0.36)]
    pieces = []
    for frequency, duration in notes:
        t = np.arange(int(sample_rate * duration)) / sample_rate
        attack = np.minimum(1.0, t / 0.01)
        decay = np.exp(-3.0 * t / duration)
        tone = np.sin(2 * np.pi * frequency * t) + 0.25 * np.sin(4 * np.pi * frequency * t)
        pieces.append(tone * attack * decay / 1.25)
    signal = np.concatenate(pieces) * volume
    samples = np.round(np.clip(signal, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(samples.tobytes())
    return len(samples) / sample_rate
