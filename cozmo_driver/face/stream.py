"""What a face publisher sends, frame by frame: :class:`FaceStream`. Pure: time is an argument.

The face node asks :meth:`FaceStream.frame` at its frame rate (30 a second).
The animator's face parameters are compared with the last rendered ones and
the face is rendered only when they changed (blinks, saccades, gaze and
expression changes; nothing while the face rests); a rendered image is sent
only when its pixels changed, and the last one is sent again every
``keepalive_s`` so that a subscriber that joins (or restarts) late gets it.

Where only the robot's display takes the frames (the face node handing them to
the driver of its own process, with no subscriber to ``display/face``),
``frame(now, display_rows=True)`` renders the 32 rows the robot shows (the even
rows of the screen, :meth:`FaceRenderer.render_display`): half the drawing.
:attr:`FaceStream.image`, the whole screen, is then rendered when asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .expressions import FaceAnimator
from .procedural import FaceRenderer

__all__ = ["FaceStream", "FaceStreamStats"]


@dataclass
class FaceStreamStats:
    frames: int = 0
    rendered: int = 0
    published: int = 0
    keepalives: int = 0


class FaceStream:
    """See the module docstring."""

    def __init__(self, animator: FaceAnimator, renderer: Optional[FaceRenderer] = None,
                 keepalive_s: float = 1.0) -> None:
        self.animator = animator
        self.renderer = renderer or FaceRenderer()
        self.keepalive_s = float(keepalive_s)
        self.stats = FaceStreamStats()
        self._params: Optional[np.ndarray] = None
        self._image: Optional[np.ndarray] = None  # the last frame, in the form of _rows
        self._rows = False  # whether the last frame was the display rows alone
        self._sent_at = -np.inf

    @property
    def image(self) -> Optional[np.ndarray]:
        """The last face rendered: ``(64, 128)`` uint8, 0 or 255 (None before the first)."""
        if self._rows and self._params is not None:
            return self._screen(self._params)
        return self._image

    def _screen(self, params: np.ndarray) -> np.ndarray:
        return np.where(self.renderer.render(params), np.uint8(255), np.uint8(0))

    def frame(self, now: float, display_rows: bool = False) -> Optional[np.ndarray]:
        """The image to publish at ``now``, or None: nothing new. ``(64, 128)`` uint8 0/255;
        with ``display_rows``, the ``(32, 128)`` bool rows the robot's display shows."""
        self.stats.frames += 1
        params = self.animator.frame(now).to_array()
        changed = False
        if display_rows != self._rows:  # the other form: render again, and send it
            self._rows, self._params, self._image = display_rows, None, None
        if self._params is None or params.tobytes() != self._params.tobytes():  # (cheaper than array_equal)
            self._params = params
            image = self.renderer.render_display(params) if display_rows else self._screen(params)
            self.stats.rendered += 1
            if self._image is None or image.tobytes() != self._image.tobytes():  # (same shape and dtype)
                self._image = image
                changed = True
        if changed:
            self.stats.published += 1
        elif self._image is not None and now - self._sent_at >= self.keepalive_s:
            self.stats.keepalives += 1
        else:
            return None
        self._sent_at = now
        return self._image
