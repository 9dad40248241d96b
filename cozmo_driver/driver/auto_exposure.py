"""Automatic exposure for Cozmo's camera, computed on the driver: the robot has none.

Cozmo's camera takes the gain and exposure time it is sent (SetCameraParams) and
nothing else; Anki's engine measured every image and sent new values. This does the
same, with the rule of Anki's engine for Cozmo:

* the brightness to reach is a percentile of the image's grey values (the median,
  ``target`` 128 by default); the image is measured from a sample of its pixels;
* the wanted change is ``target / value``, kept within ``1 -+ MAX_CHANGE`` per step;
  an image that is more than 80 % white is halved at once, a black one raised by the
  most a step allows;
* brighter: the gain first (a short exposure blurs less when the robot moves), then
  the exposure; darker: the exposure first, then the gain;
* when both are at their limit and the image is still too dark or too bright, that is
  reported (:attr:`AutoExposure.limit`);
* while the IR head light is on, exposures are whole multiples of 10 ms (10..60 ms;
  :meth:`AutoExposure.set_head_light`): Anki's engine limited them so "to prevent image
  artifacts from mismatched exposure and head light pulsing" (VisionMode::LimitedExposure,
  switched on with the head light); the exposure then moves in steps of 10 ms.

Unlike Anki's engine, a value within ``TOLERANCE`` of the target changes nothing (no
message for sensor noise), a change moves each setting by at least one of the robot's
steps (1 ms, 1/64 of gain) so that a small exposure is not stuck by rounding, and the
``SETTLE_FRAMES`` images after a change, exposed before the robot took it, are not
measured. Once a measurement changes nothing (the image is right, or both settings are
at their limit), one image in ``SETTLED_EVERY`` is measured, about one a second at the
camera's 15 fps: what it costs is then nearly nothing, and a change of light is
followed within a second. Pure: the caller decodes the image and sends what
:meth:`AutoExposure.update` returns.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Tuple, Union

import numpy as np

__all__ = ["AutoExposure", "GAIN_RANGE", "EXPOSURE_RANGE_MS", "HEAD_LIGHT_EXPOSURE_STEP_MS"]

#: the gain the automatic exposure uses: from the sensor's own (1) to what the robot's
#: byte of 1/64 steps holds
GAIN_RANGE = (1.0, 255 / 64)
#: exposure times the robot takes, ms
EXPOSURE_RANGE_MS = (1, 67)
#: while the head light is on, exposures are multiples of this (Anki: kExposureMultiple)
HEAD_LIGHT_EXPOSURE_STEP_MS = 10
#: the most one step changes the brightness by (a factor from 1 - this to 1 + this)
MAX_CHANGE = 0.5
#: a percentile value this close to the target (a fraction of it) is good enough
TOLERANCE = 0.1
#: an image with more than this fraction of white pixels is over-exposed: halved at once
MAX_WHITE_FRACTION = 0.8
#: images after a change that were exposed before the robot took it
SETTLE_FRAMES = 2
#: once a measurement changes nothing, one image in this many is measured
SETTLED_EVERY = 15
_GAIN_STEP = 1 / 64


class AutoExposure:
    """Gain and exposure from the images' brightness (see the module docstring)."""

    def __init__(self, gain: float, exposure_ms: int, target: int = 128,
                 percentile: float = 0.5) -> None:
        self.target = int(target)
        self.percentile = float(percentile)
        self.gain, self.exposure_ms = self._clamped(gain, exposure_ms)
        #: "too dark" / "too bright" while the image is so with both settings at their
        #: limit, else ""
        self.limit = ""
        #: the last measured percentile value (None before the first measurement)
        self.value: Optional[int] = None
        self._skip = SETTLE_FRAMES
        #: the head light is on: exposures in multiples of HEAD_LIGHT_EXPOSURE_STEP_MS
        self.head_light = False

    def _exposure_range(self) -> Tuple[int, int]:
        lo, hi = EXPOSURE_RANGE_MS
        if self.head_light:
            step = HEAD_LIGHT_EXPOSURE_STEP_MS
            return max(lo, step), hi - hi % step
        return lo, hi

    def set_head_light(self, on: bool) -> Optional[Tuple[float, int]]:
        """The head light went on or off. On, the exposure is raised to a multiple of 10 ms
        (at most 60): returns the (gain, exposure_ms) to send if that changed it."""
        self.head_light = bool(on)
        if not self.head_light:
            return None
        step = HEAD_LIGHT_EXPOSURE_STEP_MS
        lo, hi = self._exposure_range()
        exposure = min(hi, max(lo, -(-self.exposure_ms // step) * step))
        if exposure == self.exposure_ms:
            return None
        self.exposure_ms = exposure
        self._skip = SETTLE_FRAMES
        return self.gain, self.exposure_ms

    @staticmethod
    def _clamped(gain: float, exposure_ms: int) -> Tuple[float, int]:
        g = float(gain) if math.isfinite(gain) else GAIN_RANGE[0]
        g = round(min(max(g, GAIN_RANGE[0]), GAIN_RANGE[1]) / _GAIN_STEP) * _GAIN_STEP
        e = min(max(int(exposure_ms), EXPOSURE_RANGE_MS[0]), EXPOSURE_RANGE_MS[1])
        return g, e

    def restart(self) -> None:
        """The robot was sent the current settings again (a new connection): wait for
        images exposed with them."""
        self._skip = SETTLE_FRAMES

    def update(self, luma: Union[np.ndarray, Callable[[], np.ndarray]]
               ) -> Optional[Tuple[float, int]]:
        """The next image: its grey values (any shape, uint8), or a function that gives
        them, called only when the image is measured (decoding costs more than all the
        rest). Returns the new (gain, exposure_ms) to send, or None when nothing is to
        change."""
        if self._skip > 0:
            self._skip -= 1
            return None
        self._skip = SETTLED_EVERY - 1  # unless a change below says otherwise
        if callable(luma):
            luma = luma()
        values = np.asarray(luma, dtype=np.uint8).ravel()
        if values.size == 0:
            return None
        counts = np.bincount(values, minlength=256)
        if counts[255] > MAX_WHITE_FRACTION * values.size:
            self.value = 255
            factor = 0.5
        else:
            rank = min(values.size - 1, int(self.percentile * values.size))
            self.value = value = int(np.searchsorted(np.cumsum(counts), rank, side="right"))
            if abs(value - self.target) <= TOLERANCE * self.target:
                self.limit = ""
                return None
            factor = 1.0 + MAX_CHANGE if value == 0 else self.target / value
            factor = min(max(factor, 1.0 - MAX_CHANGE), 1.0 + MAX_CHANGE)
        return self._apply(factor)

    def _apply(self, factor: float) -> Optional[Tuple[float, int]]:
        gain, exposure = self.gain, self.exposure_ms
        (g_lo, g_hi), (e_lo, e_hi) = GAIN_RANGE, self._exposure_range()
        step = HEAD_LIGHT_EXPOSURE_STEP_MS if self.head_light else 1
        if factor > 1.0:
            if gain < g_hi:
                gain = min(g_hi, max(gain * factor, gain + _GAIN_STEP))
            elif exposure < e_hi:
                exposure = min(e_hi, max(-(-round(exposure * factor) // step) * step, exposure + step))
            else:
                self.limit = "too dark"
                return None
        else:
            if exposure > e_lo:
                exposure = max(e_lo, min(round(exposure * factor) // step * step, exposure - step))
            elif gain > g_lo:
                gain = max(g_lo, min(gain * factor, gain - _GAIN_STEP))
            else:
                self.limit = "too bright"
                return None
        self.limit = ""
        self.gain, self.exposure_ms = self._clamped(gain, exposure)
        self._skip = SETTLE_FRAMES
        return self.gain, self.exposure_ms
