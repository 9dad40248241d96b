"""Head and lift commands held while the robot calibrates those motors (sans-I/O).

The robot calibrates its head and lift at each connection (the firmware starts it
when the engine's SyncTime brings the body up), and again on StartMotorCalibration
or when a motor was forced. A calibrating motor drives to its low stop and takes no
command: its controller keeps only the latest target, which the head runs after the
calibration and the lift drops. A lift command sent in the first second of a
connection would be lost, and a head or lift goal would wait on a motor that does
not move.

:class:`MotorCalibration` therefore holds the latest head (SetHeadAngle, MoveHead)
and lift (SetLiftHeight, MoveLift) command while its motor calibrates, and releases
it when MotorCalibration reports the end. From SyncTime until a calibration is
reported, each motor is expected to start one: if none starts within
``START_WAIT_S``, the robot is taken not to calibrate and the command goes out then.
A calibration that reports no end within ``CALIBRATION_TIMEOUT_S`` is warned about
and its command goes out. StopAllMotors drops what is held.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

from ..protocol import messages as msgs

__all__ = ["MotorCalibration", "START_WAIT_S", "CALIBRATION_TIMEOUT_S", "HELD_COMMANDS"]

logger = logging.getLogger("cozmo.client.calibration")

#: after SyncTime, how long a motor is expected to start its calibration, s
START_WAIT_S = 1.0
#: how long a calibration may take before its command goes out anyway, s
CALIBRATION_TIMEOUT_S = 5.0
#: the commands held, by the motor they move
HELD_COMMANDS = {"SetHeadAngle": "head", "MoveHead": "head",
                 "SetLiftHeight": "lift", "MoveLift": "lift"}
_MotorID = msgs.ENUMS["MotorID"]
_MOTORS = {int(_MotorID.MOTOR_HEAD): "head", int(_MotorID.MOTOR_LIFT): "lift"}


class MotorCalibration:
    """Which motors calibrate (or are expected to), and the command each holds."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: motor -> when its wait ends (the start is expected, or the end)
        self._deadlines: Dict[str, float] = {}
        self._started: Dict[str, bool] = {}
        self._held: Dict[str, Any] = {}

    def __contains__(self, motor: str) -> bool:
        """Whether ``motor`` calibrates now (or is expected to start)."""
        return motor in self._deadlines

    def reset(self) -> None:
        """A new connection, or none: nothing calibrates, nothing is held."""
        self._deadlines.clear()
        self._started.clear()
        self._held.clear()

    def expect(self, now: float, motors=("head", "lift")) -> None:
        """SyncTime (both motors) or StartMotorCalibration went out: the robot is about to
        calibrate ``motors``."""
        for motor in motors:
            self._deadlines[motor] = now + START_WAIT_S
            self._started[motor] = False

    def hold(self, message: Any) -> bool:
        """Hold ``message`` if it moves a calibrating motor (the latest replaces the one
        held); False when it can go out now. StopAllMotors drops what is held."""
        name = message.NAME
        if name == "StopAllMotors":
            self._held.clear()
            return False
        motor = HELD_COMMANDS.get(name)
        if motor is None or motor not in self._deadlines:
            return False
        if motor not in self._held:
            logger.info("[%s] %s held until the robot has calibrated its %s (it does at each "
                        "connection)", self.name, name, motor)
        self._held[motor] = message
        return True

    def on_message(self, message: Any, now: float) -> List[Any]:
        """A MotorCalibration from the robot; returns the commands to send now."""
        motor = _MOTORS.get(int(message.motor_id))
        if motor is None:
            return []
        if message.calib_started:
            if message.auto_started:
                logger.info("[%s] the robot recalibrates its %s by itself (was it forced or "
                            "blocked?)", self.name, motor)
            else:
                logger.debug("[%s] the robot calibrates its %s", self.name, motor)
            self._deadlines[motor] = now + CALIBRATION_TIMEOUT_S
            self._started[motor] = True
            return []
        return self._release(motor, f"the {motor} is calibrated")

    def due(self) -> Optional[float]:
        return min(self._deadlines.values()) if self._deadlines else None

    def on_timer(self, now: float) -> List[Any]:
        out: List[Any] = []
        for motor, deadline in list(self._deadlines.items()):
            if now < deadline:
                continue
            if self._started.get(motor):
                logger.warning("[%s] the robot reported no end of its %s calibration within "
                               "%.0f s: its commands go out again", self.name, motor,
                               CALIBRATION_TIMEOUT_S)
                out += self._release(motor, f"the {motor} calibration did not end")
            else:
                out += self._release(motor, f"the robot started no {motor} calibration")
        return out

    def _release(self, motor: str, why: str) -> List[Any]:
        self._deadlines.pop(motor, None)
        self._started.pop(motor, None)
        held = self._held.pop(motor, None)
        if held is None:
            logger.debug("[%s] %s", self.name, why)
            return []
        logger.info("[%s] %s: sending the %s that waited", self.name, why, held.NAME)
        return [held]
