"""The simulated robot driven by the project's engine session over an in-memory link.

Shared by the simulator's engine-level tests: one :class:`Harness` joins an engine
:class:`~cozmo_driver.protocol.session.Session` and a
:class:`~cozmo_driver.sim.SimulatedRobot` with a
:class:`~cozmo_driver.transport.memory.MemoryLink` under an explicit clock, so every
run is deterministic (seeded impairments, no wall clock, no sockets).
"""

from __future__ import annotations

from cozmo_driver.protocol import messages as m
from cozmo_driver.protocol.camera import ImageAssembler
from cozmo_driver.protocol.session import MessageReceived, Role, Session
from cozmo_driver.sim import RobotConfig, SimulatedRobot
from cozmo_driver.transport.memory import Impairment, MemoryLink

__all__ = ["Harness", "state_flags", "collect_images", "calibrated"]


class Harness:
    def __init__(self, seed: int = 0, a_to_b: Impairment | None = None, b_to_a: Impairment | None = None,
                 config: RobotConfig | None = None, wrap=None) -> None:
        self.robot = SimulatedRobot(config=config or RobotConfig(seed=seed))
        self.endpoint = wrap(self.robot) if wrap else self.robot
        self.engine = Session(Role.ENGINE)
        self.link = MemoryLink(self.engine, self.endpoint, a_to_b, b_to_a, seed=seed)
        self.events: list = []
        self.robot_events: list = []
        self.link.on_event_a = self.events.append
        self.link.on_event_b = self.robot_events.append

    @property
    def now(self) -> float:
        return self.link.now

    @property
    def model(self):
        """The robot's body: ground truth."""
        return self.robot.model

    def run(self, duration: float) -> None:
        self.link.run_until(self.link.now + duration)

    def run_until(self, predicate, timeout: float) -> bool:
        return self.link.run_while(lambda: not predicate(), timeout)

    def send(self, message) -> None:
        self.engine.send(message)
        self.link.flush()

    def received(self, name: str | None = None) -> list:
        return [e.message for e in self.events
                if isinstance(e, MessageReceived) and (name is None or e.message.NAME == name)]

    def last_state(self):
        states = self.received("RobotState")
        assert states, "no RobotState received"
        return states[-1]

    def clear(self) -> None:
        self.events.clear()

    def connect(self, timeout: float = 3.0) -> None:
        self.engine.connect(self.now)
        assert self.run_until(lambda: self.engine.is_connected and self.received("FirmwareSignature"),
                              timeout), "no connection"

    def initialise(self, timeout: float = 3.0) -> None:
        """What a driver does: Enable, then SetOrigin and SyncTime on BodyInfo, then wait
        for the head and lift calibration that SyncTime starts (they take no command
        meanwhile)."""
        self.connect(timeout)
        # twice, as the app and the driver: the robot takes the RESET as our packet 0 and
        # drops our first packet, numbered 0 too, as a duplicate (Anki's firmware)
        self.send(m.Enable())
        self.send(m.Enable())
        assert self.run_until(lambda: self.received("BodyInfo"), timeout)
        self.send(m.SetOrigin(pose_frame_id=0, pose_origin_id=1))
        self.send(m.SyncTime(timestamp_ms=0))
        assert self.run_until(lambda: self.received("RobotState"), timeout)
        assert self.run_until(lambda: calibrated(self.received("MotorCalibration")), timeout)


def calibrated(reports: list) -> bool:
    """Whether MotorCalibration ``reports`` show the head and lift calibrated."""
    ended = {r.motor_id for r in reports if not r.calib_started}
    return {m.ENUMS["MotorID"].MOTOR_HEAD, m.ENUMS["MotorID"].MOTOR_LIFT} <= ended


def state_flags(h: Harness) -> int:
    return h.received("RobotState")[-1].status


def collect_images(h: Harness):
    assembler = ImageAssembler()
    images = []
    for chunk in h.received("ImageChunk"):
        image = assembler.push_chunk(chunk)
        if image is not None:
            images.append(image)
    return images
