"""Camera frames rendered off the simulator's I/O thread: :class:`CameraWorker`.

Rendering and JPEG-encoding a frame takes about 15 ms of a core for a colour QVGA
image. On the I/O thread that also sends RobotState every 30 ms, a loaded machine (a
Raspberry Pi running the simulator beside the stack) then sees the state stream stall,
while a real Cozmo's camera never delays its states. :class:`SimServer
<cozmo_driver.sim.server.SimServer>` therefore gives its
:class:`~cozmo_driver.sim.robot.SimulatedRobot` one of these (unless
``RobotConfig.camera_render_thread`` is False).

The worker is bounded: it holds at most one frame, from :meth:`~CameraWorker.submit`
until the robot collects it with :meth:`~CameraWorker.take` on the I/O thread; a frame
due meanwhile is skipped by the robot (counted), never queued. The robot hands over a
callable that renders a snapshot it took on the I/O thread (pose, head, lift, camera
settings, light and the world's objects), so the worker reads nothing the I/O thread
changes. When a frame is done, ``wake()`` asks the I/O thread to collect it; the robot
also looks at every turn of its loop.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional, Tuple

__all__ = ["CameraWorker"]

logger = logging.getLogger("cozmo.sim")


class CameraWorker:
    """One thread that renders one frame at a time. See the module docstring.

    ``wake`` is called on the worker's thread after a frame is done (the server: a
    ``call_soon`` onto its I/O thread); what it raises is logged.
    """

    def __init__(self, name: str = "cozmo-sim", wake: Optional[Callable[[], None]] = None) -> None:
        self.name = name
        self.wake = wake
        self._cond = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._stopping = False
        #: the frame handed over and not yet taken back: (token, render), then its result
        self._job: Optional[Tuple[Any, Callable[[], bytes]]] = None
        self._result: Optional[Tuple[Any, Optional[bytes]]] = None

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._stopping

    @property
    def busy(self) -> bool:
        """A frame was submitted and not yet taken back (rendering, or done and waiting)."""
        with self._cond:
            return self._job is not None or self._result is not None

    def start(self) -> "CameraWorker":
        with self._cond:
            if self._thread is not None and self._thread.is_alive():
                return self
            self._stopping = False
            self._job = self._result = None
            self._thread = threading.Thread(target=self._run, name=f"{self.name}-camera", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread (a frame in flight is finished and thrown away)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._cond:
            self._job = self._result = None

    def submit(self, token: Any, render: Callable[[], bytes]) -> bool:
        """Render ``render()`` on the worker; False (nothing done) while a frame is in
        flight or the worker is not running."""
        with self._cond:
            if not self.running or self._job is not None or self._result is not None:
                return False
            self._job = (token, render)
            self._cond.notify_all()
            return True

    def take(self) -> Optional[Tuple[Any, Optional[bytes]]]:
        """The frame done, as ``(token, payload)`` (payload None when its render failed),
        once; None while it renders or when there is none. Frees the worker."""
        with self._cond:
            result, self._result = self._result, None
            return result

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._job is None and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                token, render = self._job
            try:
                payload: Optional[bytes] = render()
            except Exception:  # a renderer bug: that frame is lost, the stream goes on
                logger.exception("[%s] rendering a camera frame failed", self.name)
                payload = None
            with self._cond:
                self._job = None
                if self._stopping:
                    return
                self._result = (token, payload)
            wake = self.wake
            if wake is not None:
                try:
                    wake()
                except Exception:
                    logger.exception("[%s] waking the I/O thread for a camera frame failed", self.name)
