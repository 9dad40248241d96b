"""The simulated Cozmo's camera settings: what the engine asked of the camera.

:class:`CameraControl` answers EnableCamera, EnableColorImages, SetCameraParams
and SetHeadLight by updating :class:`CameraSettings`; the front-end
(:class:`~cozmo_driver.sim.robot.SimulatedRobot`) streams frames rendered by
:mod:`cozmo_driver.sim.world` as those settings say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from .firmware import finite

__all__ = ["CameraControl", "CameraSettings"]


@dataclass
class CameraSettings:
    """What the engine asked of the camera (the robot front-end streams it)."""

    mode: int = 0               # ImageSendMode: Off, Stream, SingleShot
    resolution: int = 4         # ImageResolution (QVGA)
    color: bool = False
    gain: float = 1.0
    exposure_ms: Optional[float] = None
    auto_exposure: bool = True
    head_light: bool = False
    #: bumped on every change (the front-end restarts its schedule)
    generation: int = 0


class CameraControl:
    """The camera's settings and the head light."""

    def __init__(self) -> None:
        self.boot()

    def boot(self) -> None:
        self.settings = CameraSettings()
        self.head_light = False

    def reset_link(self) -> None:
        """No engine: the camera stops streaming."""
        self.settings.mode = 0
        self.settings.generation += 1

    def handlers(self) -> Dict[str, Callable[[Any, float], None]]:
        return {"SetHeadLight": self._on_SetHeadLight, "EnableCamera": self._on_EnableCamera,
                "EnableColorImages": self._on_EnableColorImages,
                "SetCameraParams": self._on_SetCameraParams}

    def _on_SetHeadLight(self, m: Any, now: float) -> None:
        self.head_light = bool(m.enable)
        self.settings.head_light = self.head_light

    def _on_EnableCamera(self, m: Any, now: float) -> None:
        self.settings.mode = int(m.image_send_mode)
        self.settings.resolution = int(m.image_resolution)
        self.settings.generation += 1

    def _on_EnableColorImages(self, m: Any, now: float) -> None:
        self.settings.color = bool(m.enable)

    def _on_SetCameraParams(self, m: Any, now: float) -> None:
        if m.auto_exposure_enabled:
            # Anki's firmware reads this flag as "send your default parameters", and then
            # applies neither gain nor exposure (the reply is not modelled)
            self.settings.auto_exposure = True
            return
        self.settings.gain = max(0.0, finite(m.gain, 1.0, limit=64.0))
        self.settings.exposure_ms = float(m.exposure_ms) or None
        self.settings.auto_exposure = bool(m.auto_exposure_enabled)
