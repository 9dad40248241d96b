"""An unmodified pycozmo 0.8.0 client drives the simulated robot over loopback UDP.

pycozmo is the reference implementation, used here only as an oracle: if its
client reaches "robot ready", receives RobotState at the robot's rate, decodes
the camera frames (grey and colour) and moves the robot, the simulator speaks the
protocol well enough. It is never pointed anywhere but the simulator's loopback address.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from dependencies import require, unavailable

pycozmo = require("pycozmo")
if getattr(pycozmo, "__version__", None) != "0.8.0":  # tools/requirements-dev.txt's
    unavailable(f"needs pycozmo 0.8.0, found {getattr(pycozmo, '__version__', '?')}")

from cozmo_driver.sim import SimServer  # noqa: E402


@pytest.fixture
def sim_and_client(monkeypatch):
    with SimServer(port=0, seed=5) as sim:
        address = sim.address
        assert address[0] == "127.0.0.1"
        # belt and braces: even pycozmo's default target is the simulator
        monkeypatch.setattr(pycozmo.conn, "ROBOT_ADDR", address)
        client = pycozmo.Client(robot_addr=address)
        assert client.conn.robot_addr == address
        client.start()
        try:
            client.connect()
            yield sim, client
        finally:
            try:
                client.disconnect()
            finally:
                client.stop()


def camera_images(client, color: bool, count: int = 10) -> list:
    """Switch pycozmo's camera on and return the first ``count`` images it decodes (within 5 s)."""
    images = []
    got_images = threading.Event()

    def on_image(cli, image):
        images.append(image)
        if len(images) >= count:
            got_images.set()

    client.add_handler(pycozmo.event.EvtNewRawCameraImage, on_image)
    client.enable_camera(enable=True, color=color)
    kind = "colour" if color else "grey"
    assert got_images.wait(5.0), f"only {len(images)} {kind} camera images decoded"
    return images


@pytest.mark.realtime  # the state rate as it comes
def test_pycozmo_client_connects_streams_and_drives(sim_and_client):
    sim, client = sim_and_client
    client.wait_for_robot(timeout=5.0)  # raises pycozmo's ConnectionTimeout after that
    assert client.robot_fw_sig["version"] == 2381 and client.serial_number

    states = []
    client.add_handler(pycozmo.protocol_encoder.RobotState, lambda cli, pkt: states.append(pkt))
    time.sleep(2.0)
    assert len(states) >= 50, f"{len(states) / 2.0:.1f} Hz of RobotState"

    images = camera_images(client, color=False)
    assert images[-1].size == (320, 240)
    extrema = images[-1].convert("L").getextrema()
    assert extrema[1] - extrema[0] > 40          # a real scene, not a flat frame

    client.drive_wheels(60.0, 60.0)
    client.set_head_angle(0.3)
    assert sim.wait_until(lambda s: s.true_pose()[0] > 40.0, 3.0)
    client.stop_all_motors()
    assert sim.wait_until(lambda s: abs(s.head_angle() - 0.3) < 1e-3, 3.0)
    x = sim.true_pose()[0]
    assert sim.wait_until(lambda s: abs(client.pose.position.x - x) < 2.0, 2.0)
    assert abs(client.head_angle.radians - 0.3) < 1e-3

    # pycozmo's animation thread feeds the face and the audio at 30 per second
    sim.rates()
    time.sleep(1.0)
    rates = sim.rates()
    assert rates["display"] >= 20 and rates["audio"] >= 20


def test_pycozmo_client_decodes_colour_camera_frames(sim_and_client):
    """pycozmo's enable_camera(color=True): the half-width colour frames decode and show
    the simulator's scene in colour."""
    sim, client = sim_and_client
    client.wait_for_robot(timeout=5.0)
    images = camera_images(client, color=True)
    assert sim.camera_settings()["color"] is True
    image = images[-1]
    assert image.size == (320, 240) and image.mode == "RGB"
    rgb = np.asarray(image).astype(int)
    assert np.abs(rgb[..., 0] - rgb[..., 2]).mean() > 30     # colour, not grey in three channels

    def truth(robot):
        model = robot.model
        x, y, yaw = model.true_pose()
        return robot.world.render(x, y, yaw, model.head_angle, color=True, noise=False,
                                  lift_height_mm=model.lift_height)

    expected = sim.call(lambda: truth(sim.robot)).astype(int)   # the robot has not moved
    assert np.abs(rgb - expected).mean() < 8.0
