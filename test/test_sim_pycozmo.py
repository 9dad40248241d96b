"""An unmodified pycozmo 0.8.0 client drives the simulated robot over loopback UDP.

pycozmo is the reference implementation, used here only as an oracle: if its
client reaches "robot ready", receives RobotState at the robot's rate, decodes
the camera frames and moves the robot, the simulator speaks the protocol well
enough. It is never pointed anywhere but the simulator's loopback address.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

if sys.version_info >= (3, 13):
    pytest.skip("pycozmo 0.8.0 imports the stdlib module 'chunk', which Python 3.13 removed",
                allow_module_level=True)

pycozmo = pytest.importorskip("pycozmo")
if getattr(pycozmo, "__version__", None) != "0.8.0":
    pytest.skip(f"needs pycozmo 0.8.0, found {getattr(pycozmo, '__version__', '?')}",
                allow_module_level=True)

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


def test_pycozmo_client_connects_streams_and_drives(sim_and_client):
    sim, client = sim_and_client
    started = time.monotonic()
    client.wait_for_robot(timeout=5.0)
    assert time.monotonic() - started < 3.0
    assert client.robot_fw_sig["version"] == 2381 and client.serial_number

    states = []
    client.add_handler(pycozmo.protocol_encoder.RobotState, lambda cli, pkt: states.append(pkt))
    time.sleep(2.0)
    assert len(states) >= 50, f"{len(states) / 2.0:.1f} Hz of RobotState"

    images = []
    got_images = threading.Event()

    def on_image(cli, image):
        images.append(image)
        if len(images) >= 10:
            got_images.set()

    client.add_handler(pycozmo.event.EvtNewRawCameraImage, on_image)
    client.enable_camera(enable=True, color=False)
    assert got_images.wait(5.0), f"only {len(images)} camera images decoded"
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
