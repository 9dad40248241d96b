"""Display, audio and animations through the driver node, against the simulated robot over UDP
on 127.0.0.1, with real rclpy (each test: its own context, simulator and executor; every wait
is bounded). What the robot showed and played is read back from the simulator: its decoded
framebuffer, its decoded audio, its commands and its joints."""

from __future__ import annotations

import gc
import json
import math
import shutil
import struct
import sys
import time
import wave
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

from dependencies import require

rclpy = require("rclpy")

from action_msgs.msg import GoalStatus  # noqa: E402
from cozmo_interfaces.action import PlayAnimation, PlayAudio  # noqa: E402
from cozmo_interfaces.msg import AudioChunk, DisplayImage, HeadAngle  # noqa: E402
from cozmo_interfaces.srv import ListAnimations, SetEmergencyStop  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import Twist  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSDurabilityPolicy, QoSProfile  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from sample_data import app_clip_with_sprite_and_sound  # noqa: E402
from ros_harness import (CONNECT_TIMEOUT, DISCOVERY_TIMEOUT, LogRecorder, RosHarness, closing_all,  # noqa: E402
                         sim_fixture)
from cozmo_driver.anim.clip import TurnToRecordedHeadingKeyframe, load_builtin  # noqa: E402
from cozmo_driver.anim.player import compile_clip, tick_of  # noqa: E402
from cozmo_driver.face.expressions import EXPRESSIONS  # noqa: E402
from cozmo_driver.face.procedural import FaceRenderer  # noqa: E402
from cozmo_driver.protocol.audio import SAMPLE_RATE, SAMPLES_PER_FRAME  # noqa: E402
from cozmo_driver.protocol.display import decode_display, fit_to_frame, image_to_bits  # noqa: E402
from cozmo_driver.ros.animation_goals import CLIFF_HOLD, LIFTED_HOLD, clip_motors  # noqa: E402
from cozmo_driver.protocol.messages import ENUMS  # noqa: E402
from cozmo_driver.ros.driver_node import CozmoDriverNode  # noqa: E402
from cozmo_driver.sim import SimServer  # noqa: E402
from cozmo_driver.sim import body as sim_body  # noqa: E402

pytestmark = [pytest.mark.ros]

FRAME = 1 / 30
RELIABLE = QoSProfile(depth=10)
RENDERER = FaceRenderer()


class Rig(RosHarness):
    """A driver node and a probe node on one executor; the simulator on 127.0.0.1."""

    spin_timeout = 0.005

    def __init__(self, context, sim: SimServer, *, clients_first: Sequence[Tuple[Any, str]] = (),
                 **params: Any) -> None:
        """``clients_first``: (action type, name) of the actions whose clients are discovered
        before the robot connects (the simulator's link held down meanwhile), so that a test of
        the connection's calibration sends its goals without waiting on discovery."""
        self.sim = sim
        overrides = {"robot_ip": "127.0.0.1", "robot_port": sim.address[1], "camera_enabled": False}
        overrides.update(params)
        self.node = CozmoDriverNode(context=context, parameter_overrides=[
            Parameter(k, value=v) for k, v in overrides.items()])
        super().__init__(context, "probe", nodes=(self.node,))
        self.clients: Dict[str, Any] = {}  # one client per action, discovered once (client())
        if clients_first:
            sim.set_link_up(False)
        assert self.node.start()
        if clients_first:
            for action_type, name in clients_first:
                self.client(action_type, name)
            assert not self.node.connected and not sim.is_connected()
            sim.set_link_up(True)
        assert self.spin_until(lambda: self.node.connected, CONNECT_TIMEOUT), "driver did not connect"
        self.diagnostics: List[DiagnosticArray] = self.listen(None, DiagnosticArray, "/diagnostics", RELIABLE)

    def publisher(self, msg_type, topic: str):
        return super().publisher(msg_type, topic, RELIABLE)

    def client(self, action_type, name: str):
        """The probe's client of action ``name``, made and discovered at its first use (or
        when it no longer sees its server, the driver's servers made anew)."""
        client = self.clients.get(name)
        if client is None or not client.server_is_ready():
            if client is not None:
                client.destroy()
            client = self.clients[name] = self.action_client(action_type, name)
        return client

    def send_goal(self, action_type, name: str, goal, feedback: Optional[list] = None):
        future = self.client(action_type, name).send_goal_async(
            goal, feedback_callback=(feedback.append if feedback is not None else None))
        assert self.spin_until(future.done, 5.0)
        handle = future.result()
        assert handle.accepted
        return handle

    def result(self, handle, timeout: float = 10.0):
        future = handle.get_result_async()
        assert self.spin_until(future.done, timeout), "no result"
        return future.result()

    def diag_values(self) -> Dict[str, str]:
        assert self.spin_until(lambda: any(s.name.endswith("display and audio") for a in self.diagnostics[-1:]
                                           for s in a.status), 3.0)
        for status in self.diagnostics[-1].status:
            if status.name.endswith("display and audio"):
                return {kv.key: kv.value for kv in status.values}
        raise AssertionError("no display and audio diagnostics")


sim = sim_fixture(seed=5)


@pytest.fixture
def make_rig(rclpy_context, sim):
    with closing_all(lambda **params: Rig(rclpy_context, sim, **params)) as make:
        yield make


#: how long the head and lift rest at their low stop in the connection's calibration, for the
#: tests of goals that come while it is under way (the simulator's own 0.5 and 0.75 s left
#: about 0.24 and 0.56 s of it after Rig's start-up: a loaded machine took that before the
#: goals came), well within the driver's wait for its end (_CALIBRATION_WAIT_S)
CONNECTION_CALIBRATION_REST_S = 2.5


@pytest.fixture
def long_calibration(monkeypatch):
    """The connection's calibration of a rig made in the test lasts about 3 s."""
    for motor in (ENUMS["MotorID"].MOTOR_HEAD, ENUMS["MotorID"].MOTOR_LIFT):
        monkeypatch.setitem(sim_body.CALIBRATION_REST_S, motor, CONNECTION_CALIBRATION_REST_S)


#: Rig's clients_first for the goals sent during the connection's calibration: their client
#: is discovered before the robot connects, not in the calibration's time (a discovery can
#: take seconds on a loaded machine, and the goal then came after the calibration)
ANIMATION_CLIENT_FIRST = ((PlayAnimation, "play_animation"),)


def image_msg(pixels: np.ndarray, encoding: str) -> Image:
    msg = Image()
    msg.height, msg.width = int(pixels.shape[0]), int(pixels.shape[1])
    msg.encoding = encoding
    msg.step = int(pixels.shape[1] * (pixels.shape[2] if pixels.ndim == 3 else 1))
    msg.data = np.ascontiguousarray(pixels).tobytes()
    return msg


def shown(bits64: np.ndarray) -> np.ndarray:
    """What the simulator's framebuffer holds for a (64, 128) screen image."""
    return fit_to_frame(np.ascontiguousarray(bits64[0::2]))[1]


def face_bits(name: str) -> np.ndarray:
    return shown(RENDERER.render(EXPRESSIONS[name]))


def write_wav(path: Path, pcm: np.ndarray, rate: int, channels: int = 1) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.astype("<i2").tobytes())
    return path


def sine(freq: float, seconds: float, rate: int, amplitude: float = 12000.0) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    return (np.sin(2 * np.pi * freq * t) * amplitude).astype(np.int16)


def loud_segment(pcm: np.ndarray, threshold: float = 2000.0):
    """(onset s, duration s, peak frequency Hz) of the sound in the robot's audio."""
    loud = np.flatnonzero(np.abs(pcm.astype(np.float64)) > threshold)
    assert loud.size, "no sound reached the robot"
    seg = pcm[loud[0]:loud[-1] + 1].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(seg * np.hanning(seg.size)))
    return loud[0] / SAMPLE_RATE, (loud[-1] - loud[0] + 1) / SAMPLE_RATE, np.argmax(spectrum) * SAMPLE_RATE / seg.size


# ----------------------------------------------------------------------------- display

def test_a_picture_reaches_the_framebuffer_fitted_and_dithered(make_rig):
    rig = make_rig()
    pub = rig.publisher(DisplayImage, "display/image")
    rng = np.random.default_rng(2)
    rgb = np.zeros((240, 320, 3), np.uint8)
    rgb[40:200, 60:260] = (255, 200, 40)                   # a bright box
    rgb[100:140, :, 2] = rng.integers(0, 256, (40, 320))   # noise, for the dither
    msg = DisplayImage(image=image_msg(rgb, "rgb8"), duration=0.0)
    expected = shown(image_to_bits(rgb, "dither"))
    before = rig.sim.display_count()
    pub.publish(msg)
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), expected), 3.0)
    assert rig.sim.display_count() > before
    # the driver enabled the robot's playback before the image (it shows nothing without)
    assert rig.sim.playback_enabled() and rig.sim.unplayable() == 0
    # thresholded, as a mono16 image of the same picture; shown until replaced
    rig.node.set_parameters([Parameter("display_dither", value=False)])
    grey16 = (image_to_bits(rgb, "threshold").astype(np.uint16) * 65535)  # already 128 x 64
    msg16 = DisplayImage(image=image_msg(grey16.astype("<u2").view(np.uint8).reshape(64, 256), "mono16"),
                         duration=0.0)
    msg16.image.width, msg16.image.step = 128, 256
    pub.publish(msg16)
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), shown(grey16 > 0)), 3.0)
    rig.spin_for(1.0)
    assert np.array_equal(rig.sim.framebuffer(), shown(grey16 > 0))


def test_timed_images_give_way_to_the_face_and_bad_images_are_refused(make_rig, monkeypatch):
    rig = make_rig()
    durations = []  # what the robot's stream is asked (how long it shows it, on the robot's clock:
    av = rig.node.media.av  # test_media_logic.py)
    show_image = av.show_image

    def asked(data, duration_s=None):
        durations.append(duration_s)
        show_image(data, duration_s)

    monkeypatch.setattr(av, "show_image", asked)
    face = rig.publisher(Image, "display/face")
    pub = rig.publisher(DisplayImage, "display/image")
    raw = rig.publisher(Image, "display/image_raw")
    happy = np.where(RENDERER.render(EXPRESSIONS["happy"]), 255, 0).astype(np.uint8)
    face.publish(image_msg(happy, "mono8"))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("happy")), 3.0)
    box = np.zeros((64, 128), np.uint8)
    box[16:48, 32:96] = 255
    pub.publish(DisplayImage(image=image_msg(box, "mono8"), duration=0.5))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), shown(box > 0)), 2.0)
    assert durations == [0.5]
    # then the face again, by itself
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("happy")), 5.0)
    # image_raw: until replaced (display_default_duration 0); an empty image clears it
    raw.publish(image_msg(box, "mono8"))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), shown(box > 0)), 2.0)
    rig.spin_for(0.8)
    assert np.array_equal(rig.sim.framebuffer(), shown(box > 0))
    raw.publish(Image())
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("happy")), 2.0)
    # wrong step, wrong data size, unknown encoding: refused, counted, nothing shown
    bad = image_msg(box, "mono8")
    bad.step = 64
    pub.publish(DisplayImage(image=bad))
    bad2 = image_msg(box, "mono8")
    bad2.encoding = "yuv422"
    raw.publish(bad2)
    count = rig.sim.display_count()
    assert rig.spin_until(lambda: rig.diag_values().get("display images refused") == "2", 4.0)
    assert rig.sim.display_count() == count
    assert np.array_equal(rig.sim.framebuffer(), face_bits("happy"))


def test_audio_chunks_while_the_robot_is_not_connected_are_refused_saying_so(make_rig):
    """A chunk on audio/pcm while the link is down vanished: no warning, no refusal counted,
    only the stream's dropped seconds grew (motion commands and play_audio say "not
    connected" then)."""
    rig = make_rig(peer_timeout=0.5)
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    pcm = rig.publisher(AudioChunk, "audio/pcm")
    rig.sim.set_link_up(False)
    assert rig.spin_until(lambda: not rig.node.connected, 5.0)
    pcm.publish(AudioChunk(sample_rate=8000, channels=1, samples=[100] * 800))
    assert rig.spin_until(lambda: rig.diag_values().get("audio chunks refused") == "1", 4.0), rig.diag_values()
    assert any(line.startswith("audio/pcm refused: not connected to the robot") for line in log.lines), log.lines
    rig.sim.set_link_up(True)


def test_images_while_the_robot_is_not_connected_are_refused_saying_so(make_rig):
    """An image on display/image or display/image_raw while the link was down was taken
    without a word and shown once the robot was back, though images do not survive a lost
    robot and an audio/pcm chunk is refused then."""
    rig = make_rig(peer_timeout=0.5)
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    box = np.zeros((64, 128), np.uint8)
    box[16:48, 32:96] = 255
    pub = rig.publisher(DisplayImage, "display/image")
    pub.publish(DisplayImage(image=image_msg(255 - box, "mono8")))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), shown(box == 0)), 3.0)  # not the box
    rig.sim.set_link_up(False)
    assert rig.spin_until(lambda: not rig.node.connected, 5.0)
    pub.publish(DisplayImage(image=image_msg(box, "mono8")))
    rig.publisher(Image, "display/image_raw").publish(image_msg(box, "mono8"))
    assert rig.spin_until(lambda: rig.diag_values().get("display images refused") == "2", 4.0), rig.diag_values()
    for topic in ("display/image", "display/image_raw"):
        assert any(line.startswith(f"{topic} refused: not connected to the robot") for line in log.lines), log.lines
    rig.sim.set_link_up(True)
    assert rig.spin_until(lambda: rig.node.connected, CONNECT_TIMEOUT)
    rig.spin_for(0.5)
    assert not np.array_equal(rig.sim.framebuffer(), shown(box > 0))  # nothing shown after it came back


def test_a_face_of_the_wrong_size_and_an_empty_audio_chunk_are_refused_and_counted(make_rig):
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    face = rig.publisher(Image, "display/face")
    pcm = rig.publisher(AudioChunk, "audio/pcm")
    happy = np.where(RENDERER.render(EXPRESSIONS["happy"]), 255, 0).astype(np.uint8)
    face.publish(image_msg(happy, "mono8"))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("happy")), 3.0)
    sad = np.where(RENDERER.render(EXPRESSIONS["sad"]), 255, 0).astype(np.uint8)
    face.publish(image_msg(sad[::2, ::2].copy(), "mono8"))  # 64 x 32: not scaled up
    pcm.publish(AudioChunk(sample_rate=16000, channels=1, samples=[]))
    assert rig.spin_until(lambda: rig.diag_values().get("display images refused") == "1"
                          and rig.diag_values().get("audio chunks refused") == "1", 4.0)
    assert np.array_equal(rig.sim.framebuffer(), face_bits("happy"))
    assert any("display/face refused: display/face is 64 x 32: a face must be 128 x 64" in line
               for line in log.lines), log.lines
    assert any("audio/pcm refused: audio/pcm.samples is empty" in line for line in log.lines), log.lines
    # another mistake on the same topic within the 2 s of the throttle is said too (a refusal
    # of another field: it was counted into the next line of the first kind, unsaid)
    pcm.publish(AudioChunk(sample_rate=4000, channels=1, samples=[1, 2]))
    pcm.publish(AudioChunk(sample_rate=16000, channels=1, samples=[]))       # the first kind: held
    assert rig.spin_until(lambda: rig.diag_values().get("audio chunks refused") == "3", 4.0)
    said = [line for line in log.lines if line.startswith("audio/pcm refused")]
    assert len(said) == 2 and "audio/pcm.sample_rate = 4000 Hz" in said[1], said
    # a duration beyond an hour (the 30 fps stream runs while a timed image shows) is
    # clamped with a warning, as display_default_duration's range is; it was taken as it came
    box = np.zeros((64, 128), np.uint8)
    box[16:48, 32:96] = 255
    rig.publisher(DisplayImage, "display/image").publish(
        DisplayImage(image=image_msg(box, "mono8"), duration=1e9))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), shown(box > 0)), 3.0)
    assert any("display/image.duration = 1e+09 s is beyond 3600 s: shown for 3600 s (0: until "
               "replaced, sent once)" in line for line in log.lines), log.lines


def test_an_infinite_duration_is_clamped_as_a_long_one_and_nan_is_refused_saying_so(make_rig):
    """duration = +inf was refused with "must be >= 0 s", while the docs clamp durations
    beyond an hour: it is clamped as they are, and NaN is refused saying it is not a number."""
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    pub = rig.publisher(DisplayImage, "display/image")
    box = np.zeros((64, 128), np.uint8)
    box[16:48, 32:96] = 255
    pub.publish(DisplayImage(image=image_msg(box, "mono8"), duration=math.inf))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), shown(box > 0)), 3.0)
    assert ("display/image.duration = inf s is beyond 3600 s: shown for 3600 s (0: until "
            "replaced, sent once)") in log.lines, log.lines
    # not a number, or below 0: refused (counted), saying what is wrong; the box stays (one
    # at a time: the subscription keeps the latest command only; the second refusal of the
    # field within 2 s is held back by the throttle)
    pub.publish(DisplayImage(image=image_msg(255 - box, "mono8"), duration=math.nan))
    assert rig.spin_until(lambda: rig.diag_values().get("display images refused") == "1", 4.0)
    assert ("display/image refused: display/image.duration = nan: not a number of seconds; give "
            "the seconds to show it, >= 0 (0: until replaced)") in log.lines, log.lines
    pub.publish(DisplayImage(image=image_msg(255 - box, "mono8"), duration=-math.inf))
    assert rig.spin_until(lambda: rig.diag_values().get("display images refused") == "2", 4.0)
    assert np.array_equal(rig.sim.framebuffer(), shown(box > 0))


def test_an_image_and_a_chunk_refused_while_inactive_are_both_counted(make_rig):
    """Refused while the driver is inactive, an audio/pcm chunk was counted in /diagnostics
    and a display/image was not."""
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    rig.node.trigger_deactivate()
    box = np.zeros((64, 128), np.uint8)
    rig.publisher(DisplayImage, "display/image").publish(DisplayImage(image=image_msg(box, "mono8")))
    rig.publisher(AudioChunk, "audio/pcm").publish(AudioChunk(sample_rate=16000, channels=1,
                                                              samples=[0] * 160))
    assert rig.spin_until(lambda: rig.diag_values().get("display images refused") == "1"
                          and rig.diag_values().get("audio chunks refused") == "1", 4.0), \
        rig.diag_values()
    inactive = "the driver is not active (activate it: ros2 lifecycle set /cozmo_driver activate)"
    assert f"display/image refused: {inactive}" in log.lines, log.lines  # (it said no way out)
    assert f"audio/pcm refused: {inactive}" in log.lines, log.lines


def test_display_refusals_for_the_drivers_state_come_every_10_s_and_before_activated(make_rig):
    """display/image refused while the driver was inactive: a line every 2 s (the core's
    refusals for its state come every 10 s), and the one held back was said by the 1 s timer
    after "activated", as if the driver still refused. Now every 10 s, and said before it."""
    rig = make_rig()
    lines: List[str] = []
    rig.node._media._log = LogRecorder(rig.node._media._log, lines)
    node_log = LogRecorder(rig.node.get_logger(), lines)
    rig.node.get_logger = lambda: node_log
    rig.node.trigger_deactivate()
    pub = rig.publisher(DisplayImage, "display/image")
    box = np.zeros((64, 128), np.uint8)
    for n in range(1, 5):  # over 2.4 s
        pub.publish(DisplayImage(image=image_msg(box, "mono8")))
        assert rig.spin_until(lambda: rig.diag_values().get("display images refused") == str(n), 4.0)
        rig.spin_for(0.8 if n < 4 else 1.2)
    refusals = [line for line in lines if line.startswith("display/image refused")]
    assert refusals == ["display/image refused: the driver is not active (activate it: ros2 lifecycle set "
                        "/cozmo_driver activate)"], refusals
    rig.node.trigger_activate()
    activated = next(i for i, line in enumerate(lines) if line.startswith("activated"))
    assert lines[activated] == "activated: robot state published, commands taken", lines  # connected
    held = [i for i, line in enumerate(lines) if line.startswith("display/image refused: the driver is not "
                                                                    "active (activate it: ros2 lifecycle set "
                                                                    "/cozmo_driver activate) (and 2 more like it")]
    assert held and held[0] < activated, lines


def test_faces_published_back_to_back_are_each_shown_once_in_order(make_rig):
    """Four faces published at once, before the executor takes any: the subscription keeps
    them all (it is deeper than one) and the driver sends each on a tick of its own, in order;
    the same face again (a keep-alive) sends nothing."""
    rig = make_rig()
    face = rig.publisher(Image, "display/face")
    names = ["happy", "sad", "angry", "surprised"]
    frames = [np.where(RENDERER.render(EXPRESSIONS[n]), 255, 0).astype(np.uint8) for n in names]

    def displayed():
        return [decode_display(bytes(msg.image)) for _, msg in rig.sim.commands() if msg.NAME == "DisplayImage"]

    before = len(displayed())
    for pixels in frames + frames[-1:]:
        face.publish(image_msg(pixels, "mono8"))
    assert rig.spin_until(lambda: len(displayed()) >= before + len(names), 3.0), "not every face was shown"
    rig.spin_for(0.3)
    shown_now = displayed()[before:]
    assert len(shown_now) == len(names)
    assert all(np.array_equal(got, face_bits(n)) for got, n in zip(shown_now, names))
    assert rig.diag_values()["face frames dropped (queue full)"] == "0"


def test_the_face_is_served_on_a_thread_of_its_own_and_the_executor_takes_over_if_it_fails(make_rig):
    """display/face comes 30 times a second: a companion node ``<driver>_display_face``
    serves it on its own thread (docs/driver.md, Threads), not the main executor. If that
    thread's spin fails, the executor takes the topic over, said in the log, and faces
    still reach the robot."""
    rig = make_rig()
    media = rig.node._media
    thread = media._face_thread
    assert thread is not None and thread.thread.is_alive()
    assert thread.node.get_name() == "_cozmo_driver_display_face"
    assert not [s for s in media._entities if s.topic_name.endswith("/display/face")]
    face = rig.publisher(Image, "display/face")
    face.publish(image_msg(np.where(RENDERER.render(EXPRESSIONS["happy"]), 255, 0).astype(np.uint8),
                           "mono8"))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("happy")), 3.0)

    class BrokenExecutor:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError("the executor broke")
    log = media._log = LogRecorder(media._log)
    executor, thread._executor = thread._executor, BrokenExecutor()
    assert rig.spin_until(lambda: media._face_thread is None, 3.0)
    assert not thread.thread.is_alive()
    executor.shutdown(timeout_sec=0.0)
    assert any("display/face thread failed" in line and "moves to the executor" in line
               for line in log.lines), log.lines
    assert [s for s in media._entities if s.topic_name.endswith("/display/face")]
    face = rig.publisher(Image, "display/face")
    face.publish(image_msg(np.where(RENDERER.render(EXPRESSIONS["sad"]), 255, 0).astype(np.uint8),
                           "mono8"))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("sad")), 3.0)


def test_a_face_node_in_the_same_process_hands_its_frames_to_the_driver_without_dds(make_rig):
    """One process (``cozmo_stack``, docs/bringup.md): the face node gives each frame to the
    driver's display directly. While nothing else subscribes to display/face, the display
    pulls the frames at its ticks and the face node's frame thread renders none; a
    subscriber that comes gets the current face at once; from then on the frames are
    published and handed over, not pulled, and a display/face message stamped like a frame
    handed over already is taken for its copy and not shown again (only a newer one is)."""
    from cozmo_driver.ros.face_node import FaceNode
    from cozmo_driver.ros.stack_node import _face_to_driver, _Running

    rig = make_rig()
    face = FaceNode(context=rig.context, parameter_overrides=[
        Parameter("idle", value=False), Parameter("expression", value="happy"),
        Parameter("transition_s", value=0.0), Parameter("keepalive_s", value=60.0)])
    try:
        _face_to_driver(_Running(nodes=[rig.node, face], by_kind={"driver": rig.node, "face": face}))
        assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("happy")), 3.0)
        rig.spin_for(0.5)  # a frame under way when it was wired is out
        media = rig.node.media
        published, pulled = face.frames_published, media.av.stats.faces_pulled
        face.set_expression("sad", 0.0)
        assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("sad")), 3.0)
        rig.spin_for(0.5)
        assert face.frames_published == published, "display/face published with no other subscriber"
        assert media.av.stats.faces_pulled == pulled + 1  # sad, pulled at a tick of the display
        # the face is asked for a frame at the display's ticks (30 a second) and by nothing
        # else: the frame thread, asking as often, would double it
        asked, since = face.stream.stats.frames, time.monotonic()
        rig.spin_for(1.0)
        asked, elapsed = face.stream.stats.frames - asked, time.monotonic() - since
        assert 1 <= asked <= 30 * elapsed + 3, (asked, elapsed)

        sad = np.where(RENDERER.render(EXPRESSIONS["sad"]), 255, 0).astype(np.uint8).tobytes()
        got = rig.listen(None, Image, "display/face", QoSProfile(
            depth=10, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
        # the face shown when it came (sad was never published before), though unchanged
        assert rig.spin_until(lambda: any(bytes(m.data) == sad for m in got), 5.0), \
            "the new subscriber did not get the current face"
        assert face.frames_published > published

        joy = np.where(RENDERER.render(EXPRESSIONS["joy"]), 255, 0).astype(np.uint8).tobytes()
        face.set_expression("joy", 0.0)
        assert rig.spin_until(lambda: any(bytes(m.data) == joy for m in got), 3.0)
        assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("joy")), 3.0)
        assert face.pull_frame(time.monotonic() + 30.0) is None  # published now: not pulled
        stamp = next(m for m in got if bytes(m.data) == joy).header.stamp
        assert stamp.sec * 10**9 + stamp.nanosec in media._local_stamps
        happy = np.where(RENDERER.render(EXPRESSIONS["happy"]), 255, 0).astype(np.uint8)
        probe_face = rig.publisher(Image, "display/face")
        as_copy = image_msg(happy, "mono8")
        as_copy.header.stamp = stamp
        probe_face.publish(as_copy)
        rig.spin_for(0.6)
        assert np.array_equal(rig.sim.framebuffer(), face_bits("joy")), "a copy was shown again"
        newer = image_msg(happy, "mono8")
        newer.header.stamp = rig.node.get_clock().now().to_msg()
        probe_face.publish(newer)
        assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("happy")), 3.0)
    finally:
        face.destroy_node()
    assert not face._frames.is_alive()


def test_a_face_node_remapped_off_the_drivers_topic_is_not_handed_to_the_driver(make_rig):
    """cozmo_stack --node face --ros-args -r display/face:=face_raw (a mux between it and
    the driver): the stack hands the driver nothing, and the face node publishes face_raw
    for its subscribers. It handed every frame to the driver, which showed the face past
    the mux, and counted the driver's subscription to display/face among face_raw's, so
    with the mux alone on face_raw it published nothing there."""
    from cozmo_driver.ros.face_node import FaceNode
    from cozmo_driver.ros.stack_node import _face_to_driver, _Running

    rig = make_rig()
    face = FaceNode(context=rig.context, cli_args=["--ros-args", "-r", "display/face:=face_raw"],
                    parameter_overrides=[
                        Parameter("idle", value=False), Parameter("expression", value="happy"),
                        Parameter("transition_s", value=0.0), Parameter("keepalive_s", value=60.0)])
    log = LogRecorder(face.get_logger())
    face.get_logger = lambda: log
    try:
        _face_to_driver(_Running(nodes=[rig.node, face], by_kind={"driver": rig.node, "face": face}))
        assert face._local is None and rig.node.local_face_source is None
        assert any("publishes /face_raw, the driver shows /display/face" in line for line in log.lines), log.lines
        mux = rig.listen(None, Image, "face_raw", QoSProfile(depth=10, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL))
        assert rig.spin_until(lambda: mux, 3.0), "the mux got no face on face_raw"
        face.set_expression("sad", 0.0)
        sad = np.where(RENDERER.render(EXPRESSIONS["sad"]), 255, 0).astype(np.uint8).tobytes()
        assert rig.spin_until(lambda: any(bytes(m.data) == sad for m in mux), 3.0), \
            "the face node did not publish its face for the mux"
        rig.spin_for(0.5)
        assert not np.array_equal(rig.sim.framebuffer(), face_bits("sad")), "the driver showed the face past the mux"
    finally:
        face.destroy_node()


# ----------------------------------------------------------------------------- audio

def audio_frames_sent(rig: Rig) -> int:
    """The audio frames the driver has sent the robot (its AV stream's count)."""
    return int(rig.node.media.av.counters()["audio frames sent"])


@pytest.mark.realtime  # its progress feedback comes as it plays
def test_play_audio_plays_a_wav_at_the_right_pitch_and_length(make_rig, tmp_path):
    rig = make_rig()
    wav = write_wav(tmp_path / "tone.wav", sine(1000.0, 1.0, 16000), 16000)
    feedback: list = []
    frames0, sent0 = rig.sim.audio_frames(), audio_frames_sent(rig)
    handle = rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(wav), volume=0.8), feedback)
    result = rig.result(handle)
    # the goal ends once the whole second of sound went to the robot, not when it was queued
    sent = audio_frames_sent(rig) - sent0
    assert result.status == GoalStatus.STATUS_SUCCEEDED and result.result.success, result.result.message
    assert sent >= round(SAMPLE_RATE / SAMPLES_PER_FRAME), sent
    assert rig.sim.volume() == round(0.8 * 65535)
    # the robot plays it all (the last frame waits for a next one: it may not)
    assert rig.spin_until(lambda: rig.sim.audio_frames() - frames0 >= sent - 1, 5.0)
    rig.spin_for(0.1)
    played = rig.sim.audio_frames() - frames0
    pcm = rig.sim.audio_pcm()[-played * SAMPLES_PER_FRAME:]
    onset, duration, freq = loud_segment(pcm)
    print(f"audio: {duration:.4f} s at {freq:.1f} Hz, {played} frames, feedback {len(feedback)}")
    assert duration == pytest.approx(1.0, abs=FRAME)
    assert freq == pytest.approx(1000.0, abs=5.0)
    progress = [f.feedback.progress for f in feedback]
    assert len(progress) >= 5 and progress == sorted(progress) and progress[-1] > 0.8
    elapsed = [f.feedback.elapsed for f in feedback]
    assert elapsed == sorted(elapsed) and elapsed[-1] > 0.7


def test_play_audio_cancel_preempt_and_bad_files(make_rig, tmp_path):
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    long = write_wav(tmp_path / "long.wav", np.repeat(sine(440.0, 10.0, 22050)[:, None], 2, axis=1), 22050, 2)
    frames0 = rig.sim.audio_frames()
    handle = rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(long), volume=-1.0))
    assert rig.spin_until(lambda: rig.sim.audio_frames() - frames0 >= 10, 5.0), "the robot played nothing"
    cancel = handle.cancel_goal_async()
    assert rig.spin_until(cancel.done, 3.0)
    played_by_cancel = rig.sim.audio_frames() - frames0  # (read once the cancel was taken)
    result = rig.result(handle)
    assert result.status == GoalStatus.STATUS_CANCELED and not result.result.success
    sent = audio_frames_sent(rig)
    rig.spin_for(0.5)
    assert audio_frames_sent(rig) == sent, "audio sent after the cancel"
    played = rig.sim.audio_frames() - frames0
    onset, duration, _ = loud_segment(rig.sim.audio_pcm()[-played * SAMPLES_PER_FRAME:])
    # stopped at the cancel, not after 10 s: the robot played on only what it held (its
    # buffer, 7 frames, and those on their way), counted in its frames, not this machine's time
    assert round((onset + duration) / FRAME) <= played_by_cancel + 12, (onset, duration, played_by_cancel)
    # a new goal preempts the one playing
    first = rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(long), volume=-1.0))
    rig.spin_for(0.3)
    second = rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(
        path=str(write_wav(tmp_path / "short.wav", sine(800.0, 0.3, 8000), 8000)), volume=-1.0))
    r1, r2 = rig.result(first), rig.result(second)
    assert r1.status == GoalStatus.STATUS_ABORTED and "preempted" in r1.result.message
    assert r2.status == GoalStatus.STATUS_SUCCEEDED
    # the cancel and the preemption are in the log, the preemption as a warning with its reason
    assert "play_audio: canceled" in log.lines, log.lines
    assert f"play_audio: aborted: {r1.result.message}" in log.lines, log.lines
    # files that are not plain PCM WAV: the loader's message
    (tmp_path / "notes.wav").write_text("not audio")
    (tmp_path / "hi.txt").write_text("hi")
    (tmp_path / "nothing.wav").write_bytes(b"")
    for path, words in ((tmp_path / "notes.wav", "not a plain PCM WAV file"),
                        (tmp_path / "missing.wav", "cannot read WAV file"),
                        # an empty file, a file shorter than a header: they were "truncated WAV file"
                        (tmp_path / "hi.txt", f"{tmp_path / 'hi.txt'}: not a plain PCM WAV file (file "
                                              "does not start with RIFF id)"),
                        (tmp_path / "nothing.wav", f"{tmp_path / 'nothing.wav'}: not a plain PCM WAV "
                                                   "file (the file is empty)")):
        r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(path), volume=-1.0)))
        assert r.status == GoalStatus.STATUS_ABORTED and words in r.result.message, r.result.message
    with wave.open(str(tmp_path / "hi.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(96000)
        w.writeframes(b"\0\0" * 100)
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(tmp_path / "hi.wav"))))
    assert "96000 Hz is not supported" in r.result.message
    # a file with no samples is refused (its goal succeeded, playing nothing); one whose
    # header was never finished (data size 0, the samples after it) plays, with a warning
    empty = tmp_path / "empty.wav"
    with wave.open(str(empty), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(empty), volume=-1.0)))
    assert r.status == GoalStatus.STATUS_ABORTED and r.result.message == f"{empty}: no samples", r.result.message
    raw = bytearray(write_wav(tmp_path / "rec.wav", sine(500.0, 0.3, 16000), 16000).read_bytes())
    raw[4:8], raw[40:44] = struct.pack("<I", 36), struct.pack("<I", 0)
    (tmp_path / "rec.wav").write_bytes(bytes(raw))
    frames0 = rig.sim.audio_frames()
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(tmp_path / "rec.wav"),
                                                                          volume=-1.0)))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    assert rig.spin_until(lambda: rig.sim.audio_frames() - frames0 >= 9, 2.0)  # 0.3 s: 9 frames
    assert f"play_audio: {tmp_path / 'rec.wav'}: its header says it holds no samples, but 0.30 s of them " \
        "follow it (a recording whose header was never finished?): they are played" in log.lines, log.lines


def test_play_audio_expands_a_home_path_and_says_where_a_relative_one_was_looked_for(make_rig, tmp_path,
                                                                                    monkeypatch):
    """A path of "~/beep.wav" was read as a file in a directory named "~", and a relative
    path with no file there failed with only "No such file or directory: 'sounds/beep.wav'";
    one with a newline at its end is quoted, saying so."""
    rig = make_rig()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    write_wav(home / "beep.wav", sine(600.0, 0.2, 16000), 16000)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)

    def play(path: str):
        return rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=path, volume=-1.0)))

    frames0 = rig.sim.audio_frames()
    r = play("~/beep.wav")
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    assert rig.spin_until(lambda: rig.sim.audio_frames() - frames0 >= 6, 2.0)  # 0.2 s: played
    r = play("sounds/beep.wav")
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == (
        f"sounds/beep.wav: cannot read WAV file: no such file (a relative path is read from the "
        f"driver's working directory, {work}: {work / 'sounds' / 'beep.wav'} was tried); give the "
        "file's absolute path"), r.result.message
    r = play("~/missing.wav")
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == f"~/missing.wav ({home / 'missing.wav'}): cannot read WAV file: no such file"
    # a path read as a line, its newline kept: quoted on one line, saying what is wrong (it was
    # "<path>\n: cannot read WAV file: no such file", the file's name and the reason two lines)
    for path, there in ((f"{home / 'beep.wav'}\n", f", and {home / 'beep.wav'} is a file: send the path without it"),
                        (" ~/missing.wav", "")):
        r = play(path)
        assert r.status == GoalStatus.STATUS_ABORTED
        assert r.result.message == (f"{path!r}: cannot read WAV file: no such file; the path begins or ends "
                                    f"with white space (a line read with its newline?){there}"), r.result.message
    # a relative path that is there plays
    (work / "sounds").mkdir()
    (work / "sounds" / "beep.wav").write_bytes((home / "beep.wav").read_bytes())
    assert play("sounds/beep.wav").status == GoalStatus.STATUS_SUCCEEDED


ESPEAK = shutil.which("espeak-ng")


@pytest.mark.skipif(ESPEAK is None, reason="espeak-ng is not installed (an optional system "
                    "package: sudo apt install espeak-ng; ./dev setup installs it)")
def test_play_audio_says_a_text_in_the_voice_of_the_parameters(make_rig):
    """play_audio with text: espeak-ng speaks it, the robot's speaker plays it (the SDK's
    say_text had no counterpart); the speech parameters change the sound; a goal with both
    or neither of path and text, an empty text or an unknown voice is refused saying so."""
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)

    def say(text: str):
        frames0 = rig.sim.audio_frames()
        result = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(text=text)))
        rig.spin_for(0.3)
        played = rig.sim.audio_frames() - frames0
        return result, rig.sim.audio_pcm()[-played * SAMPLES_PER_FRAME:] if played else np.zeros(0)

    result, pcm = say("Hello, I am Cozmo.")
    assert result.status == GoalStatus.STATUS_SUCCEEDED and result.result.success, result.result.message
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > 1000)
    assert loud.size and 0.6 < (loud[-1] - loud[0]) / SAMPLE_RATE < 3.0   # a second or so of speech
    assert any(line.startswith("play_audio: saying 'Hello, I am Cozmo.' (") and "voice en-us" in line
               for line in log.lines), log.lines
    # faster speech is shorter
    rig.node.set_parameters([Parameter("speech_speed", value=400)])
    _, fast = say("Hello, I am Cozmo.")
    fast_loud = np.flatnonzero(np.abs(fast.astype(np.int32)) > 1000)
    assert 0 < fast_loud[-1] - fast_loud[0] < 0.7 * (loud[-1] - loud[0])
    refused = rig.node.set_parameters([Parameter("speech_voice", value="-x; rm")])[0]
    assert not refused.successful and "is not a voice name" in refused.reason
    for goal, words in ((PlayAudio.Goal(path="/tmp/a.wav", text="hi"), "either path (a WAV file) "
                         "or text (words to say), not both"),
                        (PlayAudio.Goal(), "give path (a WAV file) or text (words to say)"),
                        (PlayAudio.Goal(text="   "), "text is empty: nothing to say")):
        r = rig.result(rig.send_goal(PlayAudio, "play_audio", goal))
        assert r.status == GoalStatus.STATUS_ABORTED and words in r.result.message, r.result.message
    # a voice espeak-ng does not have: refused when set, saying so (it was taken, and every
    # text after it failed with espeak-ng's words, which did not name the parameter)
    refused = rig.node.set_parameters([Parameter("speech_voice", value="zz-nosuch")])[0]
    assert not refused.successful
    assert refused.reason == ("speech_voice: espeak-ng has no voice 'zz-nosuch' (list them with: "
                              "espeak-ng --voices)"), refused.reason
    assert rig.node.get_parameter("speech_voice").value == "en-us"
    assert rig.node.set_parameters([Parameter("speech_voice", value="en+f3")])[0].successful


@pytest.mark.skipif(ESPEAK is None, reason="espeak-ng is not installed (an optional system "
                    "package: sudo apt install espeak-ng; ./dev setup installs it)")
def test_a_text_whose_speech_lasts_more_than_ten_minutes_is_refused_in_words_of_speech(make_rig):
    """2000 characters (the most a goal may give) of Japanese in the English voice at
    speech_speed 80 make about 18 minutes of speech: the goal ended aborted with the WAV
    loader's words, "<stream>: 1113 s of sound ...; a WAV file may hold at most 600 s ...: cut
    it into shorter files", which named neither the text nor what to do with it."""
    rig = make_rig(speech_speed=80)
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    frames0 = rig.sim.audio_frames()
    text = "日本語のテキスト" * 250
    assert len(text) == 2000
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(text=text)), 30.0)
    assert r.status == GoalStatus.STATUS_ABORTED and not r.result.success
    message = r.result.message
    assert message.startswith("the text's speech lasts ") and "<stream>" not in message, message
    seconds = float(message.split()[4])
    assert seconds > 600, message
    assert message.endswith(f"s ({seconds / 60:.1f} minutes) at speech_speed 80 words a minute; at "
                            "most 600 s (10 minutes) are played at once: split the text into several "
                            "goals"), message
    assert f"play_audio goal aborted: {message}" in log.lines, log.lines
    rig.spin_for(0.3)
    assert rig.sim.audio_frames() == frames0  # nothing played


def test_a_file_that_is_slow_to_read_holds_up_no_other_command(make_rig, tmp_path):
    """play_audio reads its file on a thread of its own: while the file does not come (here a
    FIFO nobody writes to yet; a long file on a slow disk alike), every other service and
    action of the driver is served, the emergency stop among them. A cancel, a new
    play_audio goal or a deactivation ends the waiting goal at once (a FIFO no one writes
    to used to hold it for good, and at shutdown it got no result); a bad file ends it
    aborted with the reader's reason. The cancel is in the log, as every goal's end (it
    returned without a line)."""
    import os
    import threading
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    fifo = tmp_path / "slow.wav"
    os.mkfifo(fifo)
    listed = rig.probe.create_client(ListAnimations, "list_animations")
    done = threading.Event()

    def unblock_after(seconds: float) -> None:
        # a reader that holds the executor (and this test's thread) gets its file all the
        # same, so that such a test fails instead of hanging
        if not done.wait(seconds):
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: nobody reads
            except OSError:
                return
            os.write(writer, b"not audio")
            os.close(writer)

    def feed_the_reader() -> None:
        with open(fifo, "wb") as writer:  # the reader waits for a writer: here it is
            writer.write(b"not audio")

    def waiting_goal():
        handle = rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(fifo), volume=-1.0))
        ended = handle.get_result_async()
        rig.spin_for(0.3)
        future = listed.call_async(ListAnimations.Request())
        assert rig.spin_until(future.done, 5.0), "no answer while the file was read"
        assert not ended.done(), "the goal ended before its file came"
        return handle, ended

    guard = threading.Thread(target=unblock_after, args=(20.0,), daemon=True)
    guard.start()
    # a bad file: aborted with the reader's reason, once it came
    handle, _ = waiting_goal()
    feed_the_reader()
    r = rig.result(handle)
    assert r.status == GoalStatus.STATUS_ABORTED
    assert "not a plain PCM WAV file" in r.result.message, r.result.message
    # a cancel: cancelled at once, the file still not there
    handle, ended = waiting_goal()
    cancel = handle.cancel_goal_async()
    assert rig.spin_until(cancel.done, 5.0) and cancel.result().goals_canceling
    assert rig.spin_until(ended.done, 3.0), "the cancelled goal waited for its file"
    assert ended.result().status == GoalStatus.STATUS_CANCELED, ended.result().result.message
    assert log.lines.count("play_audio: canceled") == 1, log.lines
    # (its reader gave up, reading nothing: no writer is needed to let it go)
    # a new goal: the waiting one is preempted at once
    first, ended = waiting_goal()
    second, _ = waiting_goal()
    assert ended.done() and ended.result().status == GoalStatus.STATUS_ABORTED
    assert "preempted by a new play_audio goal" in ended.result().result.message
    # a deactivation (as at shutdown): the waiting goal ends with its reason
    rig.node.trigger_deactivate()
    r = rig.result(second)
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == "the driver was deactivated", r.result.message
    done.set()
    guard.join(5.0)


def test_play_audio_goals_ended_while_their_fifo_waited_for_a_writer_leave_no_reader_behind(make_rig, tmp_path):
    """A play_audio goal on a FIFO no one writes to yet leaves, once ended (cancelled here;
    preempted or deactivated alike), no thread waiting on it: its reader gives up within a
    tenth of a second, reading nothing. Five cancelled goals used to leave five readers
    blocked for good, and a sixth goal's writer then fed all six: the live goal got a part
    of the file and ended aborted, "truncated WAV file"."""
    import os
    import threading
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    fifo = tmp_path / "say.wav"
    os.mkfifo(fifo)
    data = write_wav(tmp_path / "tone.wav", sine(800.0, 0.5, 16000), 16000).read_bytes()

    def readers() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "play_audio file")

    before = readers()
    try:
        for _ in range(5):
            handle = rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(fifo), volume=-1.0))
            rig.spin_for(0.2)
            cancel = handle.cancel_goal_async()
            assert rig.spin_until(cancel.done, 5.0) and cancel.result().goals_canceling
            assert rig.result(handle).status == GoalStatus.STATUS_CANCELED
        assert rig.spin_until(lambda: readers() == before, 2.0), f"{readers() - before} readers left"
        sent0 = audio_frames_sent(rig)
        handle = rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(fifo), volume=-1.0))
        rig.spin_for(0.2)

        def write() -> None:
            with open(fifo, "wb") as writer:
                writer.write(data)
        threading.Thread(target=write, daemon=True).start()
        r = rig.result(handle)
        assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
        assert any(f"{fifo} (0.50 s, 16000 Hz" in line for line in log.lines), log.lines
        assert audio_frames_sent(rig) - sent0 >= round(0.5 * SAMPLE_RATE / SAMPLES_PER_FRAME)
        assert rig.spin_until(lambda: readers() == before, 2.0)
    finally:  # readers left blocked (before the fix) let go, so that nothing hangs
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def test_play_audio_volume_default_leaves_the_volume_and_above_one_is_clamped_with_a_warning(make_rig, tmp_path):
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    short = write_wav(tmp_path / "short.wav", sine(800.0, 0.1, 8000), 8000)
    assert PlayAudio.Goal().volume == -1.0          # the field's default: leave the volume as it is
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(short), volume=0.25)))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    assert rig.sim.volume() == round(0.25 * 65535)
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(short))))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    rig.spin_for(0.2)
    assert rig.sim.volume() == round(0.25 * 65535)  # not muted by a goal that named no volume
    assert not any("volume" in line for line in log.lines if "play_audio goal" in line)
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(short), volume=1.7)))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    assert rig.spin_until(lambda: rig.sim.volume() == 65535, 2.0)
    assert any("play_audio goal volume = 1.7 is outside [0, 1]: clamped to 1" in line for line in log.lines), log.lines
    # +inf is above 1 and -inf below 0, as the interface says: they aborted the goal, as NaN does
    rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(short), volume=0.25)))
    assert rig.spin_until(lambda: rig.sim.volume() == round(0.25 * 65535), 2.0)
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(short), volume=-math.inf)))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    rig.spin_for(0.2)
    assert rig.sim.volume() == round(0.25 * 65535)  # left as it is
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(short), volume=math.inf)))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    assert rig.spin_until(lambda: rig.sim.volume() == 65535, 2.0)
    assert any("play_audio goal volume = inf is outside [0, 1]: clamped to 1" in line for line in log.lines), log.lines
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(short), volume=float("nan"))))
    assert r.status == GoalStatus.STATUS_ABORTED and "volume = nan: not a number" in r.result.message
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(tmp_path / "none.wav"))))
    assert r.status == GoalStatus.STATUS_ABORTED
    # the reason of a goal that could not run is in the log too, not only in its result
    assert any(line.startswith("play_audio goal aborted: volume = nan: not a number")
               for line in log.lines), log.lines
    assert any(line.startswith("play_audio goal aborted: ") and "none.wav" in line for line in log.lines)


@pytest.mark.realtime  # its chunks are published as they would play: a late one starves the stream
def test_a_pcm_stream_on_audio_pcm_is_played(make_rig):
    rig = make_rig()
    pub = rig.publisher(AudioChunk, "audio/pcm")
    rate, chunk_s = 16000, 0.05
    signal = sine(500.0, 0.6, rate)
    chunks = [signal[i:i + int(rate * chunk_s)] for i in range(0, signal.size, int(rate * chunk_s))]
    frames0 = rig.sim.audio_frames()
    sent = []

    def publish_next() -> None:
        if len(sent) < len(chunks):
            pub.publish(AudioChunk(sample_rate=rate, channels=1, samples=chunks[len(sent)].tolist()))
            sent.append(1)

    rig.spin_until(lambda: len(sent) == len(chunks), 5.0, every=publish_next, period=chunk_s)
    rig.spin_for(1.0)
    played = rig.sim.audio_frames() - frames0
    onset, duration, freq = loud_segment(rig.sim.audio_pcm()[-played * SAMPLES_PER_FRAME:])
    assert duration == pytest.approx(0.6, abs=FRAME)
    assert freq == pytest.approx(500.0, abs=5.0)
    # the diagnostics come once a second: wait for the ones after the stream's end
    assert rig.spin_until(lambda: rig.diag_values()["audio stream ran dry"] != "0", 4.0), rig.diag_values()
    values = rig.diag_values()
    assert values["audio stream chunks"] == str(len(chunks)) and values["audio stream starved ticks"] == "0"
    assert values["audio stream ran dry"] == "1"                      # at its end only
    bad = AudioChunk(sample_rate=4000, channels=1, samples=[0] * 10)
    pub.publish(bad)
    assert rig.spin_until(lambda: rig.diag_values().get("audio chunks refused") == "1", 4.0)
    # a chunk of more than the driver queues (30 s) is refused as it comes, not resampled
    pub.publish(AudioChunk(sample_rate=8000, channels=1, samples=[0] * (31 * 8000)))
    assert rig.spin_until(lambda: rig.diag_values().get("audio chunks refused") == "2", 4.0)
    assert rig.diag_values()["audio stream chunks"] == str(len(chunks))


def test_pcm_chunks_queue_behind_a_play_audio_goal_longer_than_the_stream_limit(make_rig, tmp_path,
                                                                                log_records):
    """The 30 s the driver keeps of an audio/pcm stream counted the play_audio goal's own
    audio it waits behind: behind a 40 s file every chunk was dropped, with a warning that
    blamed the stream ("is the stream faster than real time?")."""
    rig = make_rig()
    logged = log_records("cozmo.anim.av", "WARNING")
    long = write_wav(tmp_path / "long.wav", sine(440.0, 40.0, 8000), 8000)
    handle = rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(long), volume=-1.0))
    assert rig.spin_until(lambda: float(rig.diag_values()["audio queued (s)"]) > 35.0, 5.0)
    pub = rig.publisher(AudioChunk, "audio/pcm")
    chunk = sine(500.0, 0.2, 16000).tolist()
    for _ in range(5):
        pub.publish(AudioChunk(sample_rate=16000, channels=1, samples=chunk))
        rig.spin_for(0.05)
    assert rig.spin_until(lambda: rig.diag_values()["audio stream chunks"] == "5", 4.0), rig.diag_values()
    values = rig.diag_values()
    assert float(values["audio stream dropped (s)"]) == 0.0, values
    assert float(values["audio queued (s)"]) > 35.0 + 1.0 - 2.0, values    # goal + stream, less played
    assert logged.messages == []
    # the stream's own 30 s still hold behind the goal: 1 s + 20 s + 20 s keeps 30 s of it
    big = sine(500.0, 20.0, 8000).tolist()
    for _ in range(2):
        pub.publish(AudioChunk(sample_rate=8000, channels=1, samples=big))
        rig.spin_for(0.2)
    assert rig.spin_until(lambda: rig.diag_values()["audio stream chunks"] == "7"
                          and float(rig.diag_values()["audio stream dropped (s)"]) > 10.0, 6.0), rig.diag_values()
    assert float(rig.diag_values()["audio stream dropped (s)"]) == pytest.approx(11.0, abs=0.3)
    (said,) = logged.messages
    assert said.startswith("audio/pcm: sound dropped: the stream would queue more than 30 s, the most "
                           "the driver keeps; it waits behind a play_audio goal with "), said
    assert said.endswith(" s still to play (nothing is mixed; cancel the goal to hear the stream now)"), said
    cancel = handle.cancel_goal_async()
    assert rig.spin_until(cancel.done, 3.0)
    assert rig.result(handle).status == GoalStatus.STATUS_CANCELED
    # as the warning says, the stream is heard now: the cancel dropped the goal's sound only
    # (it emptied the whole queue, and the stream's 30 s went with it)
    assert rig.spin_until(lambda: 25.0 < float(rig.diag_values()["audio queued (s)"]) < 30.5, 4.0), \
        rig.diag_values()
    frames0 = rig.sim.audio_frames()
    assert rig.spin_until(lambda: rig.sim.audio_frames() - frames0 >= 15, 3.0)
    _, _, freq = loud_segment(rig.sim.audio_pcm()[-10 * SAMPLES_PER_FRAME:])
    assert freq == pytest.approx(500.0, abs=10.0)                            # the stream's, not the file's 440 Hz


@pytest.fixture
def like_the_console_script():
    """The process settings cozmo_driver_node's main() makes: a 0.5 ms GIL switch interval and
    start-up objects kept out of the collector's full passes."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        sys.setswitchinterval(interval)


@pytest.mark.slow
@pytest.mark.realtime  # the stream's pacing as it passes
def test_twenty_seconds_of_streaming_are_paced_at_30_frames_a_second(make_rig, like_the_console_script):
    rig = make_rig()
    pub = rig.publisher(AudioChunk, "audio/pcm")
    rate, chunk_s, seconds = 16000, 0.1, 20.0
    n = int(rate * chunk_s)
    signal = sine(300.0, seconds, rate, 6000.0)
    state = {"i": 0}
    lead = 3                                    # chunks ahead of real time, as a TTS engine would be:
    #                                             this test's thread may stall; the driver must not
    frames = math.ceil(seconds * SAMPLE_RATE / SAMPLES_PER_FRAME)
    played0 = rig.sim.counters()["audio_sound"]

    def publish_next() -> None:
        for _ in range(lead if state["i"] == 0 else 1):
            i = state["i"]
            if i * n < signal.size:
                pub.publish(AudioChunk(sample_rate=rate, channels=1,
                                       samples=signal[i * n:(i + 1) * n].tolist()))
                state["i"] = i + 1

    rig.spin_until(lambda: state["i"] * n >= signal.size, seconds + 5.0, every=publish_next, period=chunk_s)
    # the robot plays every frame of the sound (the last waits for a next one: it may not)
    assert rig.spin_until(lambda: rig.sim.counters()["audio_sound"] - played0 >= frames - 1, 5.0), \
        "the robot did not play every frame"
    # Received by the robot (the driver's pacing), on the robot's clock: the simulator's, which
    # stamps each command as it takes it. Played by the robot at its own 30 fps: a frame a tick
    # while its buffer holds more than one (starvations below), so not measured here.
    audio_at = np.array([t for t, msg in rig.sim.commands() if msg.NAME == "OutputAudio"])
    whole = np.arange(math.ceil(audio_at[0]) + 1, math.floor(audio_at[-1]) - 1)
    received = [int(np.count_nonzero((audio_at >= t) & (audio_at < t + 1.0))) for t in whole]
    print(f"received per whole second: {min(received)}..{max(received)} over {len(received)} s")
    assert len(audio_at) == frames
    assert all(abs(r - 30) <= 2 for r in received)
    published = len(rig.diagnostics)  # the driver's counters as of after the end
    assert rig.spin_until(lambda: len(rig.diagnostics) > published, 5.0), "no /diagnostics"
    values = rig.diag_values()
    print({k: v for k, v in values.items() if "frames" in k or "underrun" in k or "lateness" in k
           or "starved" in k})
    print("robot buffer ran down:", rig.sim.starvations(), "times")
    # What a listener hears: the robot's buffer never ran down while the stream played (its last
    # frame waits once, at the end), nor overflowed (a cleared buffer: a gap). A tick the driver
    # sent late ("underruns") is not asserted: the robot's buffered frames cover it, and how
    # often one comes depends on the machine's load.
    assert rig.sim.starvations() == 1
    assert rig.sim.call(lambda: rig.sim.robot.model.anim_overflows) == 0
    assert values["audio stream starved ticks"] == "0" and values["audio stream ran dry"] == "1"
    assert int(values["audio frames sent"]) == math.ceil(seconds * SAMPLE_RATE / SAMPLES_PER_FRAME)


# ----------------------------------------------------------------------------- animations

def sampler(rig: Rig, box: list) -> Callable[[], None]:
    def sample() -> None:
        box.append((time.monotonic(), rig.sim.head_angle(), rig.sim.lift_height(),
                    tuple(rig.sim.lights()["anim_backpack"])))
    return sample


@pytest.mark.realtime  # each keyframe on its tick, as it plays
def test_a_builtin_animation_plays_on_time(make_rig):
    rig = make_rig()
    listed = rig.probe.create_client(ListAnimations, "list_animations")
    assert listed.wait_for_service(timeout_sec=DISCOVERY_TIMEOUT)
    future = listed.call_async(ListAnimations.Request())
    assert rig.spin_until(future.done, 5.0)
    assert "celebrate" in future.result().names and future.result().groups == []

    clip = load_builtin("celebrate")
    compiled = compile_clip(clip)
    feedback: list = []
    samples: list = []
    robot = rig.node._robot            # not behind the motor calibration
    assert rig.spin_until(lambda: not robot.calibrating("head") and not robot.calibrating("lift"), 5.0)
    finished0 = rig.node.media.av.counters()["animations finished"]
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="celebrate"), feedback)
    result_future = handle.get_result_async()
    assert rig.spin_until(result_future.done, compiled.duration_s + 5.0, every=sampler(rig, samples), period=0.005)
    result = result_future.result()
    assert result.status == GoalStatus.STATUS_SUCCEEDED and result.result.success, result.result.message
    # the goal ends once the driver has sent the clip to its end (its every tick: below), not
    # when it was queued
    counters = rig.node.media.av.counters()
    assert counters["animations finished"] == finished0 + 1, counters
    # the last tick's EndAnimation and the result leave at once, by different ways: the result
    # can come first
    assert rig.spin_until(lambda: any(msg.NAME == "EndAnimation" for _, msg in rig.sim.commands()), 2.0)

    # what the robot received, relative to StartAnimation: each keyframe on its tick
    cmds = [(t, msg) for t, msg in rig.sim.commands() if msg.NAME in (
        "StartAnimation", "AnimHead", "AnimLift", "AnimBackpackLights", "DriveWheels", "EndAnimation",
        "OutputAudio", "OutputSilence")]
    start = next(t for t, msg in cmds if msg.NAME == "StartAnimation")
    first = {}
    for t, msg in cmds:
        first.setdefault(msg.NAME, []).append(t - start)
    heads = first["AnimHead"]                        # 0 ms; 2600 ms (400 ms: two chained steps)
    assert heads[0] == pytest.approx(0.0, abs=2 * FRAME)
    assert heads[1] == pytest.approx(tick_of(2600) * FRAME, abs=2 * FRAME)
    assert heads[2] == pytest.approx(tick_of(2800) * FRAME, abs=2 * FRAME)
    lifts = first["AnimLift"]
    for kf, got in zip(sorted(clip.tracks.lift, key=lambda k: k.time_ms), lifts):
        assert got == pytest.approx(tick_of(kf.time_ms) * FRAME, abs=2 * FRAME), ("lift", kf.time_ms, got)
    light_times = first["AnimBackpackLights"][:4]
    for kf, got in zip(clip.tracks.lights, light_times):
        assert got == pytest.approx(tick_of(kf.time_ms) * FRAME, abs=2 * FRAME), ("lights", kf.time_ms, got)
    wheels = first["DriveWheels"][0]
    assert wheels == pytest.approx(tick_of(1300) * FRAME, abs=2 * FRAME)
    assert first["EndAnimation"][0] == pytest.approx((compiled.num_ticks - 1) * FRAME, abs=2 * FRAME)
    audio = [t for t in first["OutputAudio"] + first["OutputSilence"] if -0.01 < t < compiled.duration_s]
    assert len(audio) == compiled.num_ticks                          # one audio frame per tick

    # what the robot did: the lift leaves at 200 ms after the first lights, within two frames
    lights_on = next(t for t, _, _, lights in samples if any(lights))
    lift0 = samples[0][2]
    lift_moves = next(t for t, _, lift, _ in samples if abs(lift - lift0) > 1.0)
    assert lift_moves - lights_on == pytest.approx(0.2, abs=2 * FRAME + 0.025)   # sampled every ~5 ms
    rig.spin_for(0.4)                                                  # the last head move ends at 3.0 s
    assert rig.sim.head_angle() == pytest.approx(math.radians(15), abs=math.radians(2))
    progress = [f.feedback.progress for f in feedback]
    assert progress == sorted(progress) and len(progress) > 10 and feedback[0].feedback.clip == "celebrate"


LONG_CLIP = """
name: long_dance
duration_ms: 4000
tracks:
  head:
    - {time_ms: 0, duration_ms: 2000, angle_deg: 40}
  body:
    - {time_ms: 100, duration_ms: 3800, speed_mmps: 60}
  lights:
    - {time_ms: 0, duration_ms: 3900, all: "#00ff00"}
  face:
    - {time_ms: 0, expression: surprised}
"""


def test_animation_body_in_stream_drives_the_clip_with_anim_body(make_rig, tmp_path):
    """animation_body_in_stream: the clip's treads go in the animation stream (AnimBody), in
    step with its face and sound, instead of as DriveWheels that act at once."""
    (tmp_path / "anims").mkdir()
    (tmp_path / "anims" / "long.yaml").write_text(LONG_CLIP)
    rig = make_rig(animation_dirs=[str(tmp_path / "anims")], animation_body_in_stream=True)
    before = len(rig.sim.commands())
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="long_dance"))
    assert rig.spin_until(lambda: rig.sim.wheel_speeds()[0] > 30.0, 3.0)
    names = [msg.NAME for _, msg in rig.sim.commands()[before:]]
    assert "AnimBody" in names and "DriveWheels" not in names
    handle.cancel_goal_async()
    assert rig.spin_until(lambda: max(abs(v) for v in rig.sim.wheel_speeds()) < 1.0, 3.0)


def test_cancel_aborts_on_the_robot_and_the_face_comes_back(make_rig, tmp_path):
    (tmp_path / "anims").mkdir()
    (tmp_path / "anims" / "long.yaml").write_text(LONG_CLIP)
    (tmp_path / "groups.json").write_text('{"dances": {"Animations": [{"Name": "long_dance"}]}}')
    rig = make_rig(animation_dirs=[str(tmp_path / "anims")],
                   animation_groups_file=str(tmp_path / "groups.json"))
    face = rig.publisher(Image, "display/face")
    face.publish(image_msg(np.where(RENDERER.render(EXPRESSIONS["neutral"]), 255, 0).astype(np.uint8), "mono8"))
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("neutral")), 3.0)
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(group="dances"))
    assert rig.spin_until(lambda: rig.sim.wheel_speeds()[0] > 30.0, 3.0)
    # the clip's face: its treads' DriveWheels act at once, its first face when the robot
    # plays that frame from its buffer (up to ~0.23 s later)
    assert rig.spin_until(lambda: not np.array_equal(rig.sim.framebuffer(), face_bits("neutral")), 3.0)
    cancel = handle.cancel_goal_async()
    assert rig.spin_until(cancel.done, 3.0)
    result = rig.result(handle)
    assert result.status == GoalStatus.STATUS_CANCELED
    # aborted on the robot (that the abort goes out at once: on the robot's clock, test_media_logic.py)
    assert rig.spin_until(lambda: abs(rig.sim.wheel_speeds()[0]) < 1.0 and not any(
        rig.sim.lights()["anim_backpack"]), 3.0)
    assert rig.sim.command_counts().get("AbortAnimation", 0) >= 1
    head = rig.sim.head_angle()
    assert rig.spin_until(lambda: np.array_equal(rig.sim.framebuffer(), face_bits("neutral")), 3.0)
    rig.spin_for(0.5)
    assert rig.sim.head_angle() == pytest.approx(head, abs=0.05)      # the head stopped too


def test_an_app_clip_plays_its_sprite_face_and_sound_from_the_parameters(make_rig, tmp_path):
    """animation_sprite_dir and animation_audio_map: an app clip's sprite sequence reaches the
    robot's screen and its Wwise event's WAV its speaker (both were skipped)."""
    clips, sprites, audio_map = app_clip_with_sprite_and_sound(tmp_path)
    rig = make_rig(animation_dirs=[str(clips)], animation_sprite_dir=str(sprites),
                   animation_audio_map=str(audio_map))
    frames = rig.node._media.library.resolve("anim_sprite_and_sound").tracks.sprite[0].frames
    wanted = [shown(frame) for frame in frames]
    seen: List[int] = []

    def watch() -> None:
        shown_now = rig.sim.framebuffer()
        seen.extend(k for k, f in enumerate(wanted) if np.array_equal(shown_now, f) and k not in seen)

    loud_before = int(np.abs(rig.sim.audio_pcm()).max(initial=0))
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="anim_sprite_and_sound"))
    future = handle.get_result_async()
    assert rig.spin_until(future.done, 10.0, every=watch, period=0.005), "no result"
    assert future.result().status == GoalStatus.STATUS_SUCCEEDED, future.result().result.message
    # the robot shows a tick's frame after the frames in its buffer (up to 7, 0.23 s): the
    # goal ends when its last tick is sent, and its last frames are shown after that
    rig.spin_until(lambda: len(seen) == len(wanted), 1.0, every=watch, period=0.005)
    assert len(seen) >= 2, seen                     # the sprite's frames, on the robot's screen
    assert loud_before < 100 < int(np.abs(rig.sim.audio_pcm()).max())   # the chirp was played


def test_loops_beyond_a_thousand_are_clamped_with_a_warning(make_rig):
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    handle = rig.send_goal(PlayAnimation, "play_animation",
                           PlayAnimation.Goal(name="nod_yes", loops=4294967295))
    assert rig.spin_until(lambda: any("nod_yes" in line and "1000 times" in line
                                      for line in log.lines), 5.0), log.lines
    assert "play_animation goal loops = 4294967295 is beyond 1000: clamped" in log.lines
    cancel = handle.cancel_goal_async()
    assert rig.spin_until(cancel.done, 5.0)
    assert rig.result(handle).status == GoalStatus.STATUS_CANCELED


@pytest.mark.parametrize("loops", [2**32 + 5, 10**20])
def test_a_behaviors_loops_beyond_the_goal_field_reach_the_driver_clamped(make_rig, loops):
    """A behavior config's play_animation loops beyond the goal's uint32: 2**32 + 5 wrapped to
    5 loops, and 10**20 failed to send (SystemError; an AssertionError with the field checks
    on). The behavior node's robot sends the most the field holds, which the driver clamps."""
    from cozmo_driver.ros.behavior_node import RosRobot

    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    robot = RosRobot(rig.probe, [])
    assert rig.spin_until(robot._clients["play_animation"].server_is_ready, DISCOVERY_TIMEOUT)
    handle = robot.play_animation(name="nod_yes", loops=loops)
    assert rig.spin_until(lambda: handle.status == handle.ACTIVE, 5.0), handle
    assert "play_animation goal loops = 4294967295 is beyond 1000: clamped" in log.lines, log.lines
    handle.cancel()
    assert rig.spin_until(lambda: handle.done, 5.0), handle


def test_a_very_long_name_or_path_is_refused_without_being_quoted_whole(make_rig):
    """A 100 000-character animation name or audio path: refused, and the log line (and the
    result) quote 40 characters of it, not all (one line of 100 kB per goal before)."""
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    future = rig.action_client(PlayAnimation, "play_animation").send_goal_async(
        PlayAnimation.Goal(name="x" * 100_000))
    assert rig.spin_until(future.done, 5.0) and not future.result().accepted
    line = next(line for line in log.lines if "play_animation goal rejected" in line)
    assert "has 100000 characters" in line and len(line) < 300, line[:300]
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path="/" + "y" * 50_000)))
    assert r.status == GoalStatus.STATUS_ABORTED
    assert "has 50001 characters" in r.result.message and len(r.result.message) < 300


def test_an_animation_at_connection_waits_for_the_motor_calibration(make_rig, long_calibration, tmp_path):
    # the robot calibrates head and lift at each connection and takes no keyframe meanwhile
    # (the lift drops them): a clip moving them starts once it is done, and whole
    (tmp_path / "long.yaml").write_text(LONG_CLIP)
    rig = make_rig(animation_dirs=[str(tmp_path)], clients_first=ANIMATION_CLIENT_FIRST)
    robot = rig.node._robot
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    first = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="long_dance"))
    rig.spin_for(0.1)
    second = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="nod_yes"))
    # read once both goals were accepted, not before the first was sent: it held when they came
    assert robot.calibrating("head") and robot.calibrating("lift")
    r1, r2 = rig.result(first), rig.result(second)
    assert r1.status == GoalStatus.STATUS_ABORTED and r1.result.message.startswith(
        "preempted by a new play_animation goal (while this one waited")
    assert r2.status == GoalStatus.STATUS_SUCCEEDED, r2.result.message
    synced = max(t for t, msg in rig.sim.commands() if msg.NAME == "SyncTime")
    started = [t for t, msg in rig.sim.commands() if msg.NAME == "StartAnimation"]
    heads = [t for t, msg in rig.sim.commands() if msg.NAME == "AnimHead"]
    # (the simulator's lift rests at its stop before it reports the end)
    assert len(started) == 1 and heads and min(heads) >= started[0] >= synced + CONNECTION_CALIBRATION_REST_S
    assert not robot.calibrating("head") and not robot.calibrating("lift")
    assert sum("waits for the robot to calibrate its head" in line for line in log.lines) == 2, log.lines
    assert f"play_animation: aborted: {r1.result.message}" in log.lines, log.lines


def test_a_goal_waiting_for_the_motor_calibration_can_be_cancelled_or_preempted(make_rig, long_calibration,
                                                                               tmp_path):
    """A goal waiting for the calibration was in none of the driver's lists: its cancel was
    rejected (it played once the calibration ended), a command that took its motor missed
    it, and the node did not count it as running. Now the cancel is taken (CANCELED, nothing
    sent) and a head command preempts it, as it would a clip playing."""
    (tmp_path / "long.yaml").write_text(LONG_CLIP)
    rig = make_rig(animation_dirs=[str(tmp_path)], clients_first=ANIMATION_CLIENT_FIRST)
    robot, media = rig.node._robot, rig.node._media
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="nod_yes"))
    assert robot.calibrating("head")   # read once the goal was accepted: it held when it came
    rig.spin_for(0.05)
    assert media.goals_running() and media.moves("head") and not media.moves("wheels")
    cancel = handle.cancel_goal_async()
    assert rig.spin_until(cancel.done, 2.0)
    assert len(cancel.result().goals_canceling) == 1
    r = rig.result(handle, 2.0)
    assert r.status == GoalStatus.STATUS_CANCELED and r.result.message == "canceled before it started"
    assert not media.goals_running()
    second = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="long_dance"))
    rig.spin_for(0.05)
    assert robot.calibrating("head") and media.moves("wheels")
    rig.node._core.set_head(0.1)             # what head/angle's callback does, on the executor
    r = rig.result(second, 2.0)
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == ("preempted by a head/angle command, which moves the head (while this "
                                "one waited for the robot to calibrate its motors)")
    assert rig.spin_until(lambda: not robot.calibrating("head") and not robot.calibrating("lift"), 5.0)
    rig.spin_for(0.3)
    assert not [msg for _, msg in rig.sim.commands() if msg.NAME == "StartAnimation"]


def test_an_emergency_stop_aborts_a_goal_waiting_for_the_motor_calibration(make_rig, long_calibration, tmp_path):
    """The emergency stop aborted the clips playing only: a goal waiting for the calibration
    went on waiting, and when the stop was released before the calibration ended the clip
    played and drove the treads. Now engaging the stop aborts the waiting goal too, with
    nothing sent, released or not."""
    (tmp_path / "long.yaml").write_text(LONG_CLIP)
    rig = make_rig(animation_dirs=[str(tmp_path)], clients_first=ANIMATION_CLIENT_FIRST)
    robot, media, node = rig.node._robot, rig.node._media, rig.node
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="long_dance"))
    assert robot.calibrating("head")   # read once the goal was accepted: it held when it came
    rig.spin_for(0.05)
    assert media.moves("wheels")
    node._on_emergency_stop(SetEmergencyStop.Request(engage=True), SetEmergencyStop.Response())
    node._on_emergency_stop(SetEmergencyStop.Request(engage=False), SetEmergencyStop.Response())
    assert robot.calibrating("head") and not media.moves("wheels")
    r = rig.result(handle, 2.0)
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == ("emergency stop engaged (while this one waited for the robot to "
                                "calibrate its motors)")
    assert rig.spin_until(lambda: not robot.calibrating("head") and not robot.calibrating("lift"), 5.0)
    rig.spin_for(0.3)
    assert not [msg for _, msg in rig.sim.commands() if msg.NAME == "StartAnimation"]
    assert treads_still(rig)


def test_a_goal_refused_when_it_comes_does_not_abort_one_waiting_for_the_calibration(make_rig, long_calibration,
                                                                                     tmp_path):
    """A goal was counted before its refusals (the treads held, a compile error): a clip
    refused at once still aborted the goal waiting for the calibration as "preempted by a
    new play_animation goal", and nothing played. And a group goal recorded its member as
    played when it was chosen, so a refused one started that member's cool-down (the next
    goal chose another). Now a goal refused when it comes touches neither: the waiting clip
    plays, and the group chooses the same member again."""
    (tmp_path / "groups.json").write_text(json.dumps({"drives": {"Animations": [
        {"Name": "two_drives", "Weight": 1, "CooldownTime_Sec": 60},
        {"Name": "spin_round", "Weight": 0}]}}))
    rig = make_rig(animation_dirs=[clip_dir(tmp_path)], animation_groups_file=str(tmp_path / "groups.json"),
                   clients_first=ANIMATION_CLIENT_FIRST)
    robot, core = rig.node._robot, rig.node._core
    rig.sim.pick_up()          # the cliff sensor loses the floor at once (stop_on_cliff)
    assert rig.spin_until(lambda: any(core.tread_holds()), 2.0)
    waiting = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="nod_yes"))
    assert robot.calibrating("head")   # read once the goal was accepted: it held when it came
    rig.spin_for(0.05)
    for goal in (PlayAnimation.Goal(name="two_drives"), PlayAnimation.Goal(group="drives"),
                 PlayAnimation.Goal(group="drives")):
        r = rig.result(rig.send_goal(PlayAnimation, "play_animation", goal), 2.0)
        assert r.status == GoalStatus.STATUS_ABORTED and r.result.message.startswith("'two_drives' drives"), \
            r.result.message
    assert robot.calibrating("head") or robot.calibrating("lift")
    r = rig.result(waiting)
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    assert len([msg for _, msg in rig.sim.commands() if msg.NAME == "StartAnimation"]) == 1


TWO_DRIVES = """
name: two_drives
duration_ms: 2600
tracks:
  body:
    - {time_ms: 0, duration_ms: 1000, speed_mmps: 80}
    - {time_ms: 1400, duration_ms: 1000, speed_mmps: 80}
  face:
    - {time_ms: 0, expression: surprised}
"""
BACK_OFF = """
name: back_off
duration_ms: 3000
tracks:
  body:
    - {time_ms: 0, duration_ms: 2900, speed_mmps: -60}
"""
SPIN = """
name: spin_round
duration_ms: 600
tracks:
  body:
    - {time_ms: 0, duration_ms: 500, speed_dps: 60}
"""


def clip_dir(tmp_path: Path) -> str:
    for name, text in (("long", LONG_CLIP), ("drives", TWO_DRIVES), ("back", BACK_OFF), ("spin", SPIN)):
        (tmp_path / f"{name}.yaml").write_text(text)
    return str(tmp_path)


def treads_still(rig: Rig) -> bool:
    return max(abs(v) for v in rig.sim.wheel_speeds()) < 1.0


def test_an_animation_does_not_drive_the_treads_of_a_robot_picked_up(make_rig, tmp_path):
    """stop_when_picked_up held cmd_vel's treads only: a clip drove them in the air (the
    simulator's wheels ran at 60 mm/s) and succeeded. A clip playing when the robot is
    lifted is stopped; while it is held, a clip that drives the treads is refused with
    nothing sent, and one that does not plays. Without the parameter the clip drives."""
    rig = make_rig(animation_dirs=[clip_dir(tmp_path)])
    robot = rig.node._robot
    assert rig.spin_until(lambda: not robot.calibrating("head") and not robot.calibrating("lift"), 5.0)
    # backwards: a lifted robot's cliff sensor loses the floor first, which stops a clip
    # driving forwards (below) before the pick-up is reported
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="back_off"))
    assert rig.spin_until(lambda: rig.sim.wheel_speeds()[0] < -30.0, 3.0)
    rig.sim.pick_up()
    r = rig.result(handle, 2.0)
    assert r.status == GoalStatus.STATUS_ABORTED and r.result.message == f"interrupted: {LIFTED_HOLD}"
    assert rig.spin_until(lambda: treads_still(rig), 1.0)
    before = len(rig.sim.commands())
    r = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="spin_round")))
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == f"'spin_round' drives the treads, and {LIFTED_HOLD}"
    assert not [msg for _, msg in rig.sim.commands()[before:] if msg.NAME in ("StartAnimation", "DriveWheels")]
    r = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="nod_yes")))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    rig.spin_for(0.4)   # the robot plays what it buffered (about 0.23 s); its end stops the treads
    rig.node.set_parameters([Parameter("stop_when_picked_up", value=False)])
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="back_off"))
    assert rig.spin_until(lambda: rig.sim.wheel_speeds()[0] < -30.0, 3.0)
    rig.spin_for(0.3)
    assert rig.sim.wheel_speeds()[0] < -30.0
    assert rig.spin_until(handle.cancel_goal_async().done, 2.0)
    assert rig.spin_until(lambda: treads_still(rig), 1.0)


def test_an_animation_does_not_drive_the_robot_on_over_a_table_edge(make_rig, tmp_path):
    """stop_on_cliff: the robot stops its treads when the drop appears, once; a clip's later
    body keyframe drove it on over the edge, as a cmd_vel forwards would. The clip is
    stopped once the driver sees the drop; at the edge a clip that drives forwards is
    refused, and one that turns in place plays."""
    rig = make_rig(animation_dirs=[clip_dir(tmp_path)])
    edge = rig.sim._model(lambda m: m.world.table_half_size_mm)
    rig.sim.teleport(edge - 80.0, 0.0, 0.0)          # the cliff sensor 48 mm short of the edge
    rig.spin_for(0.3)
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="two_drives"))
    r = rig.result(handle, 3.0)
    assert r.status == GoalStatus.STATUS_ABORTED and r.result.message == f"interrupted: {CLIFF_HOLD}"
    rig.spin_for(1.5)                                # past the clip's second drive
    assert rig.sim.true_pose()[0] < edge - 10.0 and treads_still(rig)
    r = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="two_drives")))
    assert r.status == GoalStatus.STATUS_ABORTED and r.result.message.startswith(
        f"'two_drives' drives forwards, and {CLIFF_HOLD}. Back away first")
    r = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="spin_round")))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message


def test_a_users_clip_driving_the_treads_under_a_still_builtins_name_is_refused_on_the_charger(make_rig, tmp_path):
    """The behavior engine plays the built-in clips without body motion on the charger
    (SleepOnCharger: sleepy_yawn), trusting the package's files; a user's sleepy_yawn with
    a body track replaced the built-in one silently and drove the treads on the charger.
    Now the library says of each built-in replaced (logged at configure), and on the
    charger the driver refuses a clip that drives the treads under the name of a built-in
    one that keeps them still, whoever asks; off the charger it plays."""
    path = tmp_path / "yawn.yaml"
    path.write_text("name: sleepy_yawn\nduration_ms: 400\ntracks:\n  body:\n"
                    "    - {time_ms: 0, duration_ms: 300, speed_dps: 40}\n")
    rig = make_rig(animation_dirs=[str(tmp_path)])
    assert any(w.startswith(f"clip 'sleepy_yawn' of {path} replaces the built-in one")
               for w in rig.node._media.library.warnings), rig.node._media.library.warnings
    rig.sim.set_on_charger(True, move=False)
    assert rig.spin_until(lambda: rig.node._core.battery_on_charger, 3.0)
    before = len(rig.sim.commands())
    r = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="sleepy_yawn")))
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == (f"'sleepy_yawn' (of {path}) drives the treads, unlike the built-in clip it "
                                "replaces, and the robot is on its charger, where behaviors play 'sleepy_yawn' "
                                "as a clip that keeps the treads still: give your clip another name to play it there")
    assert not [msg for _, msg in rig.sim.commands()[before:] if msg.NAME in ("StartAnimation", "DriveWheels")]
    r = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="nod_yes")))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    rig.sim.set_on_charger(False, move=False)
    assert rig.spin_until(lambda: not rig.node._core.battery_on_charger, 3.0)
    r = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="sleepy_yawn")))
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message


def test_cmd_vel_and_a_head_command_take_their_motor_from_an_animation(make_rig, tmp_path):
    """A teleop's zero Twist sent DriveWheels(0) and the clip's next body keyframe started
    the treads again: cmd_vel preempts the clip that drives the treads (docs/motion.md: the
    newer command wins), head/angle the one that moves the head. A clip taking the treads
    from a teleop stops them, and the teleop's watchdog stop does not cut the clip's drive."""
    rig = make_rig(animation_dirs=[clip_dir(tmp_path)])
    robot = rig.node._robot
    cmd_vel = rig.publisher(Twist, "cmd_vel")
    head = rig.publisher(HeadAngle, "head/angle")
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="two_drives"))
    assert rig.spin_until(lambda: rig.sim.wheel_speeds()[0] > 30.0, 3.0)
    cmd_vel.publish(Twist())
    r = rig.result(handle, 2.0)
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == "preempted by a cmd_vel command, which moves the treads"
    rig.spin_for(1.6)                                # past the clip's second drive (1.4 s)
    assert treads_still(rig)
    backwards = Twist()
    backwards.linear.x = -0.05
    rig.client(PlayAnimation, "play_animation")      # sees its server still: the goal comes at once
    cmd_vel.publish(backwards)                       # once: its watchdog stops it 0.5 s later
    assert rig.spin_until(lambda: rig.sim.wheel_speeds()[0] < -30.0, 2.0)
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="two_drives"))
    assert rig.spin_until(lambda: rig.sim.wheel_speeds()[0] > 30.0, 1.0)
    rig.spin_for(0.6)                                # past the teleop's watchdog
    assert rig.sim.wheel_speeds()[0] > 30.0          # the clip's first drive (1 s) goes on
    assert rig.spin_until(handle.cancel_goal_async().done, 2.0)
    assert rig.spin_until(lambda: not robot.calibrating("head") and not robot.calibrating("lift"), 5.0)
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="long_dance"))
    rig.spin_for(0.3)
    head.publish(HeadAngle(angle=0.2, max_speed=0.0))
    r = rig.result(handle, 2.0)
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == "preempted by a head/angle command, which moves the head"
    assert rig.spin_until(lambda: treads_still(rig), 1.0)


def test_a_clip_turning_to_a_recorded_heading_takes_the_treads():
    clip = load_builtin("nod_yes")
    assert clip_motors(clip) == {"head"}
    clip.tracks.turn_to_recorded_heading.append(TurnToRecordedHeadingKeyframe(0, 500))
    assert clip_motors(clip) == {"head", "wheels"}


def test_a_group_at_connection_chooses_by_the_head_angle_the_driver_shows(make_rig, long_calibration, tmp_path):
    """Members of an animation group can ask for a head angle range. While the head
    calibrates at connection the robot counts its angle from 0 (where it was at power-up);
    the driver holds it at the low stop (-25 deg), where the calibration leaves it. The
    group's member is chosen by the driver's angle, not by the robot's count."""
    for name in ("low_look", "level_look"):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\nduration_ms: 300\ntracks:\n  face:\n"
            "    - {time_ms: 0, expression: surprised}\n")
    (tmp_path / "groups.json").write_text(json.dumps({"looks": {"Animations": [
        {"Name": "level_look", "UseHeadAngle": True, "HeadAngleMin_Deg": -5, "HeadAngleMax_Deg": 5},
        {"Name": "low_look", "UseHeadAngle": True, "HeadAngleMin_Deg": -30, "HeadAngleMax_Deg": -20}]},
        "highs": {"Animations": [
            {"Name": "level_look", "UseHeadAngle": True, "HeadAngleMin_Deg": 30, "HeadAngleMax_Deg": 44}]}}))
    rig = make_rig(animation_dirs=[str(tmp_path)], animation_groups_file=str(tmp_path / "groups.json"),
                   clients_first=ANIMATION_CLIENT_FIRST)
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    assert rig.node._robot.calibrating("head")
    assert rig.node._robot.robot_state.head_angle_rad == pytest.approx(0.0, abs=1e-6)  # its count
    r = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(group="looks")))
    # read once the clip (0.3 s, the face only) ended: the calibration held when its member
    # was chosen (after it, the robot's count too is at the low stop, and any choice passes)
    assert rig.node._robot.calibrating("head")
    assert r.status == GoalStatus.STATUS_SUCCEEDED, r.result.message
    assert any(line.startswith("play_animation: low_look (") for line in log.lines), log.lines
    # a group no member of which may play with the head where it is ends aborted, saying why
    r = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(group="highs")))
    assert r.status == GoalStatus.STATUS_ABORTED
    assert r.result.message == ("animation group 'highs' has no playable member now: the head is at -25.0 deg, "
                                "outside the head-angle range of every member (level_look: 30..44 deg); move "
                                "the head into one (head/angle) and try again")
    assert f"play_animation goal aborted: {r.result.message}" in log.lines, log.lines


def test_a_new_animation_preempts_and_deactivation_aborts(make_rig, tmp_path):
    (tmp_path / "long.yaml").write_text(LONG_CLIP)
    rig = make_rig(animation_dirs=[str(tmp_path)])
    robot = rig.node._robot                            # the first clip plays at once (below)
    assert rig.spin_until(lambda: not robot.calibrating("head") and not robot.calibrating("lift"), 5.0)
    first = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="long_dance"))
    rig.spin_for(0.3)
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    second = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="nod_yes", loops=2))
    r1 = rig.result(first)
    assert r1.status == GoalStatus.STATUS_ABORTED and "preempted" in r1.result.message
    r2 = rig.result(second)
    assert r2.status == GoalStatus.STATUS_SUCCEEDED and "2 times" in r2.result.message
    # each goal's end is in the log, the preempted one's as a warning with its reason
    assert f"play_animation: aborted: {r1.result.message}" in log.lines, log.lines
    assert f"play_animation: succeeded: {r2.result.message}" in log.lines, log.lines
    # an unknown name or group is rejected when the goal comes, the log naming close names
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    client = rig.action_client(PlayAnimation, "play_animation")
    for goal, said in ((PlayAnimation.Goal(name="nod_yess"), "no animation 'nod_yess'; did you mean nod_yes?"),
                       (PlayAnimation.Goal(group="happy"), "no animation group 'happy': no groups are loaded")):
        future = client.send_goal_async(goal)
        assert rig.spin_until(future.done, 5.0)
        assert not future.result().accepted
        assert any(f"play_animation goal rejected: {said}" in line for line in log.lines), log.lines
    assert "list_animations" in log.lines[0]
    third = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="long_dance"))
    rig.spin_for(0.3)
    rig.node.trigger_deactivate()
    r3 = rig.result(third)
    assert r3.status == GoalStatus.STATUS_ABORTED and "deactivated" in r3.result.message
    refused = rig.result(rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="nod_yes")))
    assert "not active" in refused.result.message


def test_a_cleanup_right_after_deactivation_still_gives_the_running_goals_result(make_rig, tmp_path):
    """deactivate then cleanup with no turn of the executor between them (a lifecycle
    manager's two calls, or Ctrl-C): the animation's result still reaches the client that
    asked for it; a server destroyed before the executor sends it loses it."""
    (tmp_path / "long.yaml").write_text(LONG_CLIP)
    rig = make_rig(animation_dirs=[str(tmp_path)])
    robot = rig.node._robot
    assert rig.spin_until(lambda: not robot.calibrating("head") and not robot.calibrating("lift"), 5.0)
    handle = rig.send_goal(PlayAnimation, "play_animation", PlayAnimation.Goal(name="long_dance"))
    result = handle.get_result_async()     # asked for at once, as clients do
    rig.spin_for(0.3)
    rig.node.trigger_deactivate()
    rig.node.trigger_cleanup()
    assert rig.spin_until(result.done, 10.0), "the result never came"
    assert result.result().status == GoalStatus.STATUS_ABORTED
    assert "deactivated" in result.result().result.message


def test_goals_refused_again_and_again_are_said_once_with_the_count_of_the_others(make_rig, tmp_path):
    """A client retrying a goal that cannot run (a file that is not there, a clip that is
    not known) had every refusal logged: a line per goal, at the client's rate. The first of
    a kind (the action and its reason, whatever the values in it) is said at once, the
    others are counted into the next line of that kind, or the last one held back once the
    2 s are over; another kind is said at once."""
    rig = make_rig()
    log = rig.node._media._log = LogRecorder(rig.node._media._log)
    client = rig.action_client(PlayAnimation, "play_animation")
    for _ in range(4):
        r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(tmp_path / "none.wav"))))
        assert r.status == GoalStatus.STATUS_ABORTED
        future = client.send_goal_async(PlayAnimation.Goal(name="no_such_clip"))
        assert rig.spin_until(future.done, 5.0)
        assert not future.result().accepted
    r = rig.result(rig.send_goal(PlayAudio, "play_audio", PlayAudio.Goal(path=str(tmp_path / "none.wav"),
                                                                         volume=math.nan)))
    assert r.status == GoalStatus.STATUS_ABORTED
    aborted = [line for line in log.lines if line.startswith("play_audio goal aborted: ")]
    rejected = [line for line in log.lines if line.startswith("play_animation goal rejected: ")]
    assert len(aborted) == 2 and "none.wav" in aborted[0] and "volume = nan" in aborted[1], aborted
    assert len(rejected) == 1 and "no_such_clip" in rejected[0], rejected
    assert rig.spin_until(lambda: sum("(and 2 more like it" in line for line in log.lines) == 2, 5.0), log.lines
    held = [line for line in log.lines if "(and 2 more like it" in line]
    assert any(line.startswith("play_audio goal aborted: ") and "none.wav" in line for line in held), held
    assert any(line.startswith("play_animation goal rejected: ") and "no_such_clip" in line for line in held), held
