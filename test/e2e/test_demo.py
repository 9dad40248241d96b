"""The main job, ``cozmo-demo``, and the pieces it is made of.

* the pictures and the sound it writes (pure: numpy and Pillow);
* its command line (``robot_ip:=...`` as well as ``--robot-ip ...``);
* how it fills face and audio requests it finds in the ROS graph;
* a real robot's face picture: the face node's ``display/face`` converted as the
  driver converts it (the robot's screen cannot be read back), against a face
  node in this process;
* end to end on the simulator: the simulator in this process, the driver and
  the description publisher as processes from the bring-up plan, the
  demonstration through ROS only; its output and artefacts are checked;
* the truth: steps that fail (an animation the driver does not have, a sound
  file it cannot play) are each listed at the end and the exit status is 1,
  the other steps done; a report with failures exits 1;
* a robot that does not answer, and a driver that refuses to run (an address
  that does not resolve): exit status 2, with what the node said;
* an earlier run's artefacts removed (and said), other files left alone;
* one artefacts directory and one ROS domain per demo on a machine (the
  claims; two whole demos at once are in test_demo_twice.py);
* the protocol-level demo (``--protocol-only``), unchanged.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import re
import signal
import threading
import time
import wave
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cozmo_driver import bringup_plan as plan
from cozmo_driver import demo
from cozmo_driver import demo_artifacts as art
from dependencies import require
from processes import alive, free_udp_port, project_executable


def colour_count(image: Image.Image, rgb) -> int:
    pixels = np.asarray(image.convert("RGB")).reshape(-1, 3)
    return int(np.all(pixels == np.array(rgb, dtype=np.uint8), axis=1).sum())


# ------------------------------------------------------------------ artefacts (pure)


def test_poses_are_aligned_into_the_odometry_frame():
    # the robot stood at (100, 50) facing +y in the world when odometry said (0, 0, 0)
    truth_start = (100.0, 50.0, math.pi / 2)
    moved = [(100.0, 80.0, math.pi / 2), (70.0, 50.0, math.pi)]
    aligned = art.align_poses(moved, truth_start, (0.0, 0.0, 0.0))
    assert aligned[0] == pytest.approx((30.0, 0.0, 0.0), abs=1e-9)
    assert aligned[1][:2] == pytest.approx((0.0, 30.0), abs=1e-9)
    assert math.remainder(aligned[1][2] - math.pi / 2, 2 * math.pi) == pytest.approx(0.0, abs=1e-9)
    a = (3.0, -2.0, 0.7)
    assert art.compose(a, art.inverse(a)) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)


def test_face_screen_interleaves_the_rows_as_the_robot_does():
    current = np.zeros((32, 128), dtype=bool)
    current[5, 10] = True
    previous = np.zeros((32, 128), dtype=bool)
    previous[7, 20] = True
    screen = art.face_screen(current, previous)
    assert screen.shape == (64, 128)
    assert screen[10, 10] and not screen[11, 10]          # the latest on the even rows
    assert screen[15, 20] and not screen[14, 20]          # the one before on the odd rows
    doubled = art.face_screen(current)
    assert doubled[10, 10] and doubled[11, 10]
    with pytest.raises(ValueError):
        art.face_screen(np.zeros((64, 128), dtype=bool))


def test_face_png_is_the_screen_enlarged_with_lit_pixels(tmp_path):
    from cozmo_driver.face.expressions import expression
    from cozmo_driver.face.procedural import FaceRenderer

    display = FaceRenderer().render_display(expression("happy"))
    lit = art.write_face_png(display, tmp_path / "face.png")
    image = Image.open(tmp_path / "face.png")
    assert image.size == (128 * 4 + 32, 64 * 4 + 32)
    assert lit == 2 * int(display.sum()) > 200
    # each lit screen pixel is a 3 x 3 dot of the OLED colour
    assert colour_count(image, art.FACE_LIT_RGB) == 9 * lit
    assert art.write_face_png(np.zeros((32, 128), bool), tmp_path / "blank.png") == 0
    assert colour_count(Image.open(tmp_path / "blank.png"), art.FACE_LIT_RGB) == 0


def mono8(screen: np.ndarray) -> dict:
    """The sensor_msgs/Image fields of a (64, 128) bool screen, as the face node sends it."""
    height, width = screen.shape
    return dict(width=width, height=height, encoding="mono8", step=width, is_bigendian=0,
                data=(screen.astype(np.uint8) * 255).tobytes())


def test_a_face_image_becomes_what_the_robot_shows():
    from cozmo_driver.face.expressions import expression
    from cozmo_driver.face.procedural import FaceRenderer
    from cozmo_driver.protocol.display import fit_to_frame

    renderer = FaceRenderer()
    face = expression("happy")
    display = art.face_display_of_image(**mono8(renderer.render(face)))
    # the even rows, fitted to a frame: what the driver sends, and a simulator's framebuffer holds
    assert display.shape == (32, 128) and display.dtype == bool
    assert np.array_equal(display, fit_to_frame(renderer.render_display(face))[1])
    assert display.sum() > 100
    assert not art.face_display_of_image(0, 0, "mono8", 0, 0, b"").any()   # the face cleared
    with pytest.raises(ValueError, match="encoding"):
        art.face_display_of_image(128, 64, "yuv422", 256, 0, bytes(256 * 64))


def test_trajectory_png_shows_both_curves_with_a_legend(tmp_path):
    square = []
    x = y = yaw = 0.0
    for _ in range(4):
        for _ in range(40):
            x += 2.5 * math.cos(yaw)
            y += 2.5 * math.sin(yaw)
            square.append((x, y, yaw))
        yaw += math.pi / 2
        square.append((x, y, yaw))
    truth = [(px + 0.8, py - 0.5, pyaw) for px, py, pyaw in square]
    art.write_trajectory_png(tmp_path / "t.png", square, truth, title="test", note="a note")
    image = Image.open(tmp_path / "t.png")
    assert image.size == (760, 760)
    assert colour_count(image, art.ODOMETRY_RGB) > 1000
    assert colour_count(image, art.TRUTH_RGB) > 1000
    # odometry only (a real robot): no ground-truth colour
    art.write_trajectory_png(tmp_path / "o.png", square)
    only = Image.open(tmp_path / "o.png")
    assert colour_count(only, art.TRUTH_RGB) == 0 and colour_count(only, art.ODOMETRY_RGB) > 1000
    with pytest.raises(ValueError):
        art.write_trajectory_png(tmp_path / "none.png", [])


@pytest.mark.parametrize("span, step", [(100.0, 20.0), (118.0, 20.0), (1000.0, 200.0),
                                        (23.6, 5.0), (3.0, 0.5), (0.0, 1.0)])
def test_tick_steps_are_round_numbers(span, step):
    assert art.nice_step(span) == pytest.approx(step)


def test_the_sound_is_a_short_wav(tmp_path):
    duration = art.write_chirp_wav(tmp_path / "s.wav")
    with wave.open(str(tmp_path / "s.wav")) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 22050)
        assert wav.getnframes() / 22050 == pytest.approx(duration)
        samples = np.frombuffer(wav.readframes(wav.getnframes()), "<i2")
    assert 0.5 < duration < 2.0 and np.abs(samples).max() > 10000


def test_camera_png_keeps_grey_and_colour(tmp_path):
    grey = (np.arange(240 * 320) % 251).astype(np.uint8).reshape(240, 320)
    assert art.write_camera_png(grey, tmp_path / "g.png") == (320, 240)
    assert np.array_equal(np.asarray(Image.open(tmp_path / "g.png")), grey)
    colour = np.dstack([grey, grey[::-1], grey[:, ::-1]])
    art.write_camera_png(colour, tmp_path / "c.png")
    assert np.array_equal(np.asarray(Image.open(tmp_path / "c.png")), colour)


def test_an_earlier_runs_artefacts_are_removed_and_other_files_kept(tmp_path):
    for name in ("camera.png", "trajectory.png", "sound.wav"):
        (tmp_path / name).write_bytes(b"from an earlier run")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "face.png").mkdir()                  # not a file: left alone
    removed, kept = art.remove_earlier_artefacts(tmp_path)
    assert removed == ["camera.png", "sound.wav", "trajectory.png"] and kept == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["face.png", "notes.txt"]
    assert art.remove_earlier_artefacts(tmp_path) == ([], [])
    assert set(art.DEMO_ARTEFACTS) == {"bringup.log", "camera.png", "face.png", "sound.wav",
                                       "trajectory.png"}


# ------------------------------------------------------------------ one demo per directory and domain


def test_one_demo_per_artefacts_directory(tmp_path):
    first, second = demo.Holdings(), demo.Holdings()
    try:
        demo.hold_artifacts(first, tmp_path / "artifacts")
        with pytest.raises(demo.Refused) as refused:
            demo.hold_artifacts(second, tmp_path / "artifacts" / ".." / "artifacts")
        message = str(refused.value)
        assert f"process {os.getpid()}" in message and "--artifacts DIR" in message
        demo.hold_artifacts(second, tmp_path / "elsewhere")          # another one: fine
        first.release()
        demo.hold_artifacts(second, tmp_path / "artifacts")          # released: fine
    finally:
        first.release()
        second.release()


def test_a_demo_takes_a_free_domain_or_refuses_one_another_demo_holds():
    first, second, third = demo.Holdings(), demo.Holdings(), demo.Holdings()
    try:
        domain, how = demo.choose_domain(first, {})
        # ROS_DOMAIN_ID set to the domain the first demo holds: refused, naming it
        with pytest.raises(demo.Refused) as refused:
            demo.choose_domain(second, {"ROS_DOMAIN_ID": str(domain)})
        message = str(refused.value)
        assert f"another cozmo-demo runs in ROS domain {domain}" in message
        assert f"process {os.getpid()}" in message and "unset ROS_DOMAIN_ID" in message
        # not set: another domain, free (not reserved by this test run's conftest either)
        other, how_other = demo.choose_domain(third, {})
        assert other not in (domain, 0) and other in demo.FREE_DOMAINS
        assert other != int(os.environ["ROS_DOMAIN_ID"])
        assert "used by another cozmo-demo" in how_other
        assert f"export ROS_DOMAIN_ID={other}" in how_other
        if domain == 0:
            assert how == "the default"
        for bad in ("abc", "-1", "233"):
            with pytest.raises(demo.Refused, match="is not a ROS domain id"):
                demo.choose_domain(demo.Holdings(), {"ROS_DOMAIN_ID": bad})
    finally:
        for holdings in (first, second, third):
            holdings.release()
    # released: the domain is free again for a demo that sets it
    again = demo.Holdings()
    try:
        assert demo.choose_domain(again, {"ROS_DOMAIN_ID": str(domain)}) == (domain, "set here")
    finally:
        again.release()


# ------------------------------------------------------------------ command line


@pytest.mark.parametrize("argv", [["robot_ip:=127.0.0.9", "robot_port:=5551"],
                                  ["--robot-ip", "127.0.0.9", "--robot-port", "5551"],
                                  ["--robot_ip", "127.0.0.9", "robot_port:=5551"]])
def test_both_argument_styles(argv):
    args = demo.parse_arguments(argv)
    assert (args.robot_ip, args.robot_port) == ("127.0.0.9", "5551")


@pytest.mark.parametrize("argv, message", [
    (["use_sim:=true"], "unknown argument 'use_sim'"),
    (["robot_ip:=1.2.3.4", "--robot-ip", "1.2.3.4"], "robot_ip given twice"),
    (["--duration", "-1"], "--duration must be a positive number"),
    (["--robot-ip", " "], "robot_ip is empty"),
    (["--seed", "-1"], "argument --seed: -1 is not a seed: a whole number, 0 or more"),
    (["--seed", "x"], "argument --seed: x is not a seed: a whole number, 0 or more"),
    # without robot_ip the demo starts its own simulator, on a free port: the port given went
    # unused, silently (a cozmo-sim started on it was never driven)
    (["--robot-port", "5600"], "robot_port without robot_ip: the built-in simulator"),
    (["robot_port:=5600"], "--robot-ip 127.0.0.1 --robot-port N"),
])
def test_bad_arguments_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        demo.parse_arguments(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("protocol_only", [False, True], ids=["cozmo-demo", "--protocol-only"])
def test_a_negative_seed_is_refused_as_cozmo_sim_refuses_it(protocol_only, capsys):
    """`--seed -1` ended both demos with a numpy traceback (ValueError: expected non-negative
    integer, from the simulator) and status 1, which says a step failed. cozmo-sim's --seed
    type refuses it: a usage error, status 2, as for any other bad option."""
    from cozmo_driver.sim import cli as sim_cli

    with pytest.raises(SystemExit) as exited:
        demo.main((["--protocol-only"] if protocol_only else []) + ["--seed", "-1", "--duration", "1"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --seed: -1 is not a seed: a whole number, 0 or more" in err, err
    with pytest.raises(SystemExit):
        sim_cli.build_parser().parse_args(["--seed", "-1"])
    assert capsys.readouterr().err.splitlines()[-1].endswith(err.splitlines()[-1].split(": ", 1)[1])
    assert (demo.parse_arguments(["--seed", "7"]).seed, demo.parse_arguments([]).seed) == (7, 1)


def _run_without_processes(monkeypatch, argv) -> tuple:
    """cozmo-demo's run() with ``argv``, the stack's processes left out (a run that gets as
    far as starting them is refused by the test): (the exit status, what the run said)."""
    require("rclpy")
    from cozmo_driver import bringup

    class NotStarted:
        def __init__(self, entries, say, output):
            self.children = []

        def start(self):
            raise OSError("the test starts no process")

        def stop(self):
            pass

        def remove_parameter_files(self):
            pass

    monkeypatch.setattr(bringup, "Bringup", NotStarted)
    run = demo._Demo(demo.parse_arguments(list(argv)))
    said = []
    run.say = said.append
    return run.run(), "\n".join(said)


@pytest.mark.parametrize("setting, message", [
    ({"argv": ["--config", "nosuch.yaml"]}, "config:=nosuch.yaml: no such parameter file"),
    ({"argv": ["--robot-port", "70000"]}, "robot_port:='70000': expected a UDP port number"),
    ({"env": "abc"}, "ROS_DOMAIN_ID='abc' is not a ROS domain id"),
    # the driver exited 2 after everything had started (docs/demo.md)
    ({"config_text": "cozmo_driver:\n  ros__parameters:\n    local_ip: 999.1.1.1\n"},
     "the driver's local_ip '999.1.1.1': '999.1.1.1' is not an IPv4 address of four numbers 0-255"),
], ids=["config", "robot_port", "ROS_DOMAIN_ID", "config_local_ip"])
def test_a_refused_run_leaves_the_earlier_runs_artefacts(tmp_path, monkeypatch, setting, message):
    """The earlier run's files were removed before the arguments and the ROS domain were
    checked: `cozmo-demo --config nosuch.yaml` wiped the last run's pictures, then was
    refused (2). They are removed only once this run is going to write its own."""
    earlier = tmp_path / "artifacts"
    earlier.mkdir()
    (earlier / "camera.png").write_bytes(b"from an earlier run")
    if "env" in setting:
        monkeypatch.setenv("ROS_DOMAIN_ID", setting["env"])
    argv = setting.get("argv", [])
    if "config_text" in setting:
        (tmp_path / "mine.yaml").write_text(setting["config_text"])
        argv = ["--config", str(tmp_path / "mine.yaml")]
    status, said = _run_without_processes(
        monkeypatch, ["robot_ip:=127.0.0.9", "--artifacts", str(earlier)] + argv)
    assert status == 2 and message in said, said
    assert (earlier / "camera.png").read_bytes() == b"from an earlier run"
    assert "removed the artefacts of an earlier run" not in said


@pytest.mark.parametrize("where", ["a directory in the way", "a directory nobody may write into"])
def test_an_artefacts_directory_it_cannot_write_into_is_a_bring_up_failure(tmp_path, monkeypatch, where):
    """cozmo-demo opened bringup.log (and wrote sound.wav) outside any except: a directory
    it could not write into ended it with a traceback and status 1. It is refused (2),
    saying so. /proc: a directory in which no one may create a file, root included."""
    if where == "a directory in the way":
        directory = tmp_path / "artifacts"
        (directory / "bringup.log").mkdir(parents=True)
        (directory / "bringup.log" / "mine").write_text("not an artefact")
        blocked = directory / "bringup.log"
    else:
        directory = Path("/proc")
        blocked = directory
    status, said = _run_without_processes(monkeypatch, ["robot_ip:=127.0.0.9", "--artifacts", str(directory)])
    assert status == 2, said
    assert f"{demo.PROG}: FAILED: cannot write into {directory}: " in said, said
    assert str(blocked) in said.splitlines()[-1], said
    assert "Traceback" not in said


def test_defaults_run_the_simulator_into_artifacts():
    args = demo.parse_arguments([])
    assert args.robot_ip is None and args.artifacts == "artifacts" and not args.grey


# ------------------------------------------------------------------ what the demo drives with


def run_up_to_the_demonstration(tmp_path, monkeypatch, argv):
    """cozmo-demo's run() with the stack's processes and the demonstration left out (the
    demonstration stops at once, a bring-up failure): (the DemoOptions it was given, the
    exit status, what the run said)."""
    require("rclpy")
    from cozmo_driver import bringup
    from cozmo_driver.ros import demo_node

    given = []

    class NoProcesses:
        def __init__(self, entries, say, output):
            self.children = []

        def start(self):
            pass

        def stop(self):
            pass

        def remove_parameter_files(self):
            pass

    class StopsAtOnce:
        def __init__(self, options, *args, **kwargs):
            given.append(options)
            self.result = demo_node.DemoResult()

        def run(self):
            raise demo_node.DemoAbort("stopped by the test", 2)

    monkeypatch.setattr(bringup, "Bringup", NoProcesses)
    monkeypatch.setattr(plan, "make_plan", lambda args, **kwargs: [])     # no xacro needed
    monkeypatch.setattr(demo_node, "Demonstration", StopsAtOnce)
    run = demo._Demo(demo.parse_arguments(list(argv) + ["--artifacts", str(tmp_path)]))
    said = []
    run.say = said.append
    status = run.run()
    assert len(given) == 1, said
    return given[0], status, "\n".join(said)


@pytest.mark.parametrize("port", ["05551", " 5551", "5551"])
def test_the_robots_address_is_the_one_the_driver_names(tmp_path, monkeypatch, port):
    """The driver names its robot with the port it parsed (its link report on /diagnostics,
    by which the demo knows its own driver): robot_port:=05551 is 5551 there, not another
    stack's robot."""
    options, status, said = run_up_to_the_demonstration(
        tmp_path, monkeypatch, ["robot_ip:=127.0.0.9", f"robot_port:={port}"])
    assert options.robot_address == "127.0.0.9:5551", said
    assert "a real Cozmo at 127.0.0.9:5551" in said
    assert status == 2 and "stopped by the test" in said


def test_the_robots_port_comes_from_the_drivers_key_in_the_config_file(tmp_path, monkeypatch):
    """Without robot_port:=, the port the driver gets from the file: the key of its own
    name under the namespace counts, as for the driver."""
    config = tmp_path / "robot1.yaml"
    config.write_text("cozmo_driver:\n  ros__parameters:\n    robot_port: 6001\n"
                      "/robot1/cozmo_driver:\n  ros__parameters:\n    robot_port: 6002\n")
    options, _, said = run_up_to_the_demonstration(
        tmp_path, monkeypatch, ["robot_ip:=127.0.0.9", "namespace:=robot1", f"config:={config}"])
    assert options.robot_address == "127.0.0.9:6002", said
    options, _, said = run_up_to_the_demonstration(
        tmp_path, monkeypatch, ["robot_ip:=127.0.0.9", f"config:={config}"])
    assert options.robot_address == "127.0.0.9:6001", said


@pytest.mark.parametrize("simulated", [True, False])
def test_the_demo_drives_with_the_drivers_cmd_vel_type(tmp_path, monkeypatch, simulated):
    """cmd_vel_stamped: true in --config: the driver subscribes TwistStamped, so the demo
    publishes TwistStamped (a Twist would never reach it, and the robot would not move)."""
    config = tmp_path / "stamped.yaml"
    text = (plan.default_config_path().read_text()
            .replace("cmd_vel_stamped: false", "cmd_vel_stamped: true", 1))
    assert "cmd_vel_stamped: true" in text
    config.write_text(text)
    where = [] if simulated else ["robot_ip:=127.0.0.9"]
    options, _, said = run_up_to_the_demonstration(
        tmp_path, monkeypatch, where + ["--config", str(config)])
    assert options.cmd_vel_stamped is True, said
    assert "cmd_vel as geometry_msgs/TwistStamped" in said
    options, _, said = run_up_to_the_demonstration(tmp_path, monkeypatch, where)
    assert options.cmd_vel_stamped is False, said
    assert "TwistStamped" not in said


@pytest.mark.ros
@pytest.mark.parametrize("stamped", [True, False])
def test_the_demo_node_publishes_cmd_vel_of_the_type_asked(rclpy_context, stamped):
    from geometry_msgs.msg import Twist, TwistStamped
    from rclpy.executors import SingleThreadedExecutor

    from cozmo_driver.ros.demo_node import DemoNode

    node = DemoNode(stamped=stamped, context=rclpy_context)
    received = []
    node.create_subscription(TwistStamped if stamped else Twist, "cmd_vel", received.append, 10)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    try:
        deadline = time.monotonic() + 10
        while not received and time.monotonic() < deadline:
            node.drive(0.05, -0.25)
            executor.spin_once(timeout_sec=0.05)
    finally:
        executor.shutdown(2.0)
        node.destroy_node()
    assert received, "nothing arrived on cmd_vel"
    twist = received[0].twist if stamped else received[0]
    assert (twist.linear.x, twist.angular.z) == (0.05, -0.25)
    if stamped:
        assert received[0].header.frame_id == ""      # the robot's own base (the driver's rule)
        assert received[0].header.stamp.sec > 0


# ------------------------------------------------------------------ requests found in the graph


class FakeRequest:
    """Stands for a generated ROS message: fields and their types."""

    def __init__(self, **fields):
        self._fields = fields
        for name, kind in fields.items():
            setattr(self, name, "" if kind == "string" else 0.0)

    def get_fields_and_field_types(self):
        return dict(self._fields)


def test_face_and_audio_requests_are_filled_by_field():
    require("rclpy")
    from cozmo_driver.ros import demo_steps

    request = FakeRequest(expression="string", parameters="sequence<float>", transition_s="float")
    assert demo_steps.set_text(request, "happy", ("expression", "name")) == "expression"
    assert request.expression == "happy"
    only = FakeRequest(load_namespace="string")            # one string field: that one
    assert demo_steps.set_text(only, "happy", ("expression",)) == "load_namespace"
    assert demo_steps.set_text(FakeRequest(a="string", b="string"), "x", ("expression",)) is None

    wav = Path(__file__)
    goal = FakeRequest(path="string", volume="float")       # cozmo_interfaces/action/PlayAudio
    goal.volume = -1.0                                       # its default: the volume as it is
    assert demo_steps.fill_audio_goal(goal, wav).startswith("path=/")
    # the volume is left alone: play_audio keeps a volume it sets after the sound
    assert goal.path == str(wav.resolve()) and goal.volume == -1.0
    uri = FakeRequest(uri="string")
    demo_steps.fill_audio_goal(uri, wav)
    assert uri.uri.startswith("file:///")
    assert demo_steps.fill_audio_goal(FakeRequest(loops="uint32"), wav) is None


class GraphOf:
    """Stands for the demo's node as far as finding a face is concerned: the services and
    topics the graph shows, no driver."""

    def __init__(self, services=(), topics=()):
        self.services, self.topics = list(services), list(topics)

    def get_service_names_and_types(self):
        return self.services

    def get_topic_names_and_types(self):
        return self.topics

    def get_subscriber_names_and_types_by_node(self, name, namespace):
        raise RuntimeError("no such node")


@pytest.mark.parametrize("prefix, services, found", [
    # no namespace: another stack's face node under /robot1 is not this one's
    ("", ["/robot1/set_face_expression"], None),
    ("", ["/robot1/set_face_expression", "/set_face_expression"], "/set_face_expression"),
    ("/robot1", ["/robot1/set_face_expression"], "/robot1/set_face_expression"),
    # deeper, another namespace's
    ("/robot1", ["/robot1/fleet/set_face_expression"], None),
    ("/robot1", ["/robot10/set_face_expression", "/set_face_expression"], None),
])
def test_the_face_step_takes_the_face_node_of_its_own_namespace_only(prefix, services, found):
    require("rclpy")
    from types import SimpleNamespace

    from cozmo_driver.ros import demo_steps

    srv = "cozmo_interfaces/srv/SetFaceExpression"
    graph = GraphOf(services=[(name, [srv]) for name in services])
    steps = demo_steps.MediaSteps(SimpleNamespace(node=graph, prefix=prefix))
    way = steps._find_face(display=False)
    assert way == (None if found is None else ("service", found, srv))


# ------------------------------------------------------------------ a real robot's face


class FaceNodeRunning:
    """cozmo_face_node in this process, spun on a thread, in the test's rclpy context."""

    def __init__(self, context, namespace: str, expression: str) -> None:
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter

        from cozmo_driver.ros.face_node import FaceNode

        self.node = FaceNode(context=context, namespace=namespace, parameter_overrides=[
            Parameter("idle", value=False), Parameter("expression", value=expression)])
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.executor.shutdown(2.0)
        self.node.destroy_node()
        self.thread.join(2.0)


@pytest.mark.ros
def test_a_real_robots_face_is_read_from_the_face_node(rclpy_context):
    from cozmo_driver.face.expressions import expression
    from cozmo_driver.face.procedural import FaceRenderer
    from cozmo_driver.protocol.display import fit_to_frame

    face = FaceNodeRunning(rclpy_context, "robot1", "sad")
    try:
        time.sleep(0.3)       # it has published: the demo subscribes late, as at its end
        display = demo.read_face_display("/robot1/", 15.0)
        # another namespace has no face node: nothing, after the timeout
        t0 = time.monotonic()
        assert demo.read_face_display("robot2", 0.5) is None
        assert time.monotonic() - t0 < 5.0
        # nor once the demo is asked to stop (a signal while it closes)
        t0 = time.monotonic()
        assert demo.read_face_display("robot2", 60.0, stopped=lambda: True) is None
        assert time.monotonic() - t0 < 5.0
    finally:
        face.close()
    assert display is not None, "no display/face image from the face node"
    assert np.array_equal(display, fit_to_frame(FaceRenderer().render_display(expression("sad")))[1])


def test_the_demo_saves_a_real_robots_face(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from cozmo_driver.face.expressions import expression
    from cozmo_driver.face.procedural import FaceRenderer

    shown = FaceRenderer().render_display(expression("happy"))
    asked = []

    def read_face_display(namespace, timeout, stopped=lambda: False):
        asked.append(namespace)
        return shown

    monkeypatch.setattr(demo, "read_face_display", read_face_display)
    args = demo.parse_arguments(["robot_ip:=127.0.0.9", "--artifacts", str(tmp_path)])
    run = demo._Demo(args)
    run.namespace = "robot1"
    running = SimpleNamespace(poll=lambda: None)
    run.bringup = SimpleNamespace(children=[SimpleNamespace(entry=SimpleNamespace(name="face"),
                                                            process=running)],
                                  stop=lambda: None, remove_parameter_files=lambda: None)
    require("rclpy")
    from cozmo_driver.ros.demo_node import DemoResult

    result = DemoResult(camera=np.zeros((240, 320), np.uint8), camera_encoding="mono8",
                        face_shown=True, face_how="'happy' via service")
    lines = []
    run.say = lines.append
    assert run._report(result, simulated=False) == 0
    assert asked == ["robot1"]
    face = Image.open(tmp_path / "face.png")
    assert face.size == (544, 288)
    assert colour_count(face, art.FACE_LIT_RGB) == 9 * 2 * int(shown.sum())
    assert any("face.png" in line and "sent to the robot (display/face)" in line for line in lines)
    # without a running face node there is no picture, and it says so
    (tmp_path / "face.png").unlink()
    running.poll = lambda: 0
    run.bringup = SimpleNamespace(children=[SimpleNamespace(entry=SimpleNamespace(name="face"),
                                                            process=running)],
                                  stop=lambda: None, remove_parameter_files=lambda: None)
    lines.clear()
    assert run._report(result, simulated=False) == 0
    assert not (tmp_path / "face.png").exists() and asked == ["robot1"]
    assert any("no face.png" in line for line in lines)


def test_a_report_with_failed_steps_lists_them_all_and_exits_1(tmp_path):
    from types import SimpleNamespace

    require("rclpy")
    from cozmo_driver.ros.demo_node import DemoResult

    args = demo.parse_arguments(["robot_ip:=127.0.0.9", "--artifacts", str(tmp_path)])
    run = demo._Demo(args)
    run.bringup = SimpleNamespace(children=[], stop=lambda: None,
                                  remove_parameter_files=lambda: None)
    run.process_failures = ["face: face (cozmo_face_node, pid 12) exited with status 1 during "
                            "the run"]
    (tmp_path / "bringup.log").write_text("[ERROR] [1.0] [cozmo_face]: it broke\n")
    run.written.append((tmp_path / "bringup.log", "the log"))
    result = DemoResult(camera=np.zeros((240, 320), np.uint8), camera_encoding="mono8",
                        failures=["animation: action /play_animation: the goal was not answered "
                                  "within 5 s", "sound: action /play_audio: the goal was rejected"],
                        final_odom=(0.0, 0.0, 0.0))
    lines = []
    run.say = lines.append
    assert run._report(result, simulated=False) == 1
    out = "\n".join(lines)
    tail = out[out.index("cozmo-demo: FAILED"):]
    assert "(3 steps failed)" in tail
    for failure in result.failures + run.process_failures:
        assert f"  - {failure}" in tail
    assert "it broke" in tail                  # a process exited: the log's last lines
    assert "done in" not in out
    # the same without failures: 0
    lines.clear()
    result.failures, run.process_failures = [], []
    assert run._report(result, simulated=False) == 0
    assert any("done in" in line for line in lines)


_LOST = ("[WARN] [1795437903.07] [robot1.cozmo_driver]: link closed (the robot was lost: no stop "
         "could reach it; if it still moves, pick it up or switch it off)")
_STOPPED = "[INFO] [1795437903.07] [robot1.cozmo_driver]: disconnected from the robot (motors stopped)"


@pytest.mark.parametrize("log, failures, stopped", [
    ([_LOST], ["stopped: the link to the robot stayed LOST for 6 s"], False),
    ([], ["stopped: cozmo_driver_node exited with status -9"], False),      # killed: nothing logged
    (["[INFO] [1.0] [cozmo_face]: disconnected from the robot (motors stopped)"], [], False),  # not the driver
    ([_LOST, "[INFO] [2.0] [robot1.cozmo_driver]: link CONNECTED again", _STOPPED], [], True),
    ([_STOPPED], ["sound: action /play_audio: the goal was rejected"], True),
], ids=["robot lost", "driver killed", "another node's line", "lost, then back and stopped", "stopped"])
def test_the_last_line_says_the_robot_is_stopped_only_when_the_driver_stopped_it(tmp_path, log, failures,
                                                                                  stopped):
    """The robot lost at the end (or the driver killed): the last line said "the robot is
    stopped and every process has exited", the driver's log right above it "no stop could
    reach it". The robot keeps its last motor command when its link ends: the robot is said
    stopped only when the driver logged it acknowledged the stop, else what to do."""
    from types import SimpleNamespace

    require("rclpy")
    from cozmo_driver.ros.demo_node import DemoResult

    args = demo.parse_arguments(["robot_ip:=127.0.0.9", "--artifacts", str(tmp_path)])
    run = demo._Demo(args)
    driver = SimpleNamespace(entry=SimpleNamespace(name="driver", node_name="cozmo_driver"),
                             process=SimpleNamespace(poll=lambda: 0))
    run.bringup = SimpleNamespace(children=[driver], stop=lambda: None, remove_parameter_files=lambda: None)
    (tmp_path / "bringup.log").write_text("".join(line + "\n" for line in log))
    result = DemoResult(final_odom=(0.0, 0.0, 0.0), failures=list(failures),
                        aborted=failures[0] if failures and failures[0].startswith("stopped") else "")
    lines = []
    run.say = lines.append
    assert run._report(result, simulated=False) == (1 if failures else 0)
    last = [line for line in lines if line.startswith(f"\n{demo.PROG}: ")][-1]
    assert last.startswith(f"\n{demo.PROG}: {'FAILED after' if failures else 'done in'}"), last
    assert ("the robot is stopped and every process has exited" in last) is stopped, last
    assert ("it may still be moving; if it does, pick it up or switch it off" in last) is not stopped, last


@pytest.mark.parametrize("signum, failed", [(2, False), (15, True)])
def test_a_signal_while_the_demo_closes_ends_it_with_128_plus_the_signal(tmp_path, monkeypatch,
                                                                        signum, failed):
    """Ctrl-C (SIGTERM) after the demonstration, while the demo stops the stack and writes
    its report: the face image is not waited for (up to FACE_TIMEOUT_S), the report is still
    made, and the exit status is 130 (143), not 0 or 1."""
    from types import SimpleNamespace

    require("rclpy")
    from cozmo_driver.ros.demo_node import DemoResult

    asked = []
    monkeypatch.setattr(demo, "read_face_display",
                        lambda namespace, timeout, stopped=None: asked.append(namespace))
    args = demo.parse_arguments(["robot_ip:=127.0.0.9", "--artifacts", str(tmp_path)])
    run = demo._Demo(args)
    running = SimpleNamespace(poll=lambda: None)
    run.bringup = SimpleNamespace(children=[SimpleNamespace(entry=SimpleNamespace(name="face"),
                                                            process=running)],
                                  stop=lambda: None, remove_parameter_files=lambda: None)
    result = DemoResult(camera=np.zeros((240, 320), np.uint8), camera_encoding="mono8",
                        face_shown=True, final_odom=(0.0, 0.0, 0.0),
                        failures=["sound: no result within 10 s"] if failed else [])
    lines = []
    run.say = lines.append
    try:
        run.stop.handle(signum)             # as the signal handler does
        assert run._report(result, simulated=False) == 128 + signum
    finally:
        run.stop.close()
    out = "\n".join(lines)
    assert asked == [], "the face image was waited for after the signal"
    assert (tmp_path / "camera.png").is_file()          # the report was made
    assert "done in" not in out
    name = "SIGINT" if signum == 2 else "SIGTERM"
    assert f"cozmo-demo: interrupted ({name})" in out, out
    assert ("  - sound: no result within 10 s" in out) is failed


# ------------------------------------------------------------------ end to end


def _face_node_installed() -> bool:
    return (plan.locate_executable("cozmo_driver", "cozmo_face_node") is not None
            and importlib.util.find_spec("cozmo_driver.ros.face_node") is not None)


class StandInFaceNode:
    """Where cozmo_face_node is not installed: a node with its ``face/expression`` topic
    (std_msgs/String) that draws the named expression on the simulated robot's display,
    so that the demo's face path and the face picture are exercised end to end."""

    def __init__(self, sims) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import String

        self.sims = sims
        self.received = []
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("stand_in_face", context=self.context)
        self.node.create_subscription(String, "face/expression", self._on_expression, 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _on_expression(self, msg) -> None:
        from cozmo_driver.face.expressions import expression
        from cozmo_driver.face.procedural import FaceRenderer
        from cozmo_driver.protocol import messages as msgs

        self.received.append(msg.data)
        image = msgs.DisplayImage(image=FaceRenderer().encode(expression(msg.data)))
        sim = self.sims[-1]
        sim.call(lambda: sim.robot.model.handle(image, time.monotonic()))

    def close(self) -> None:
        self.executor.shutdown(2.0)
        self.node.destroy_node()
        self.context.try_shutdown()
        self.thread.join(2.0)


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.heavy  # the whole stack: driver, simulator, face and behavior nodes
def test_the_demo_drives_the_simulated_robot_through_ros(tmp_path, capsys, monkeypatch):
    for name in ("cozmo_driver_node", "cozmo_description_publisher"):
        project_executable(name)
    import cozmo_driver.sim as sim_module

    sims = []

    class RecordingSimServer(sim_module.SimServer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            sims.append(self)

    monkeypatch.setattr(sim_module, "SimServer", RecordingSimServer)
    # each status line with what the demo and the simulated robot had counted by then
    from cozmo_driver.ros.demo_node import Demonstration
    shown = []
    status_line = Demonstration.status_line

    def counted_status_line(self, rates):
        with self.node.lock:
            counts = dict(self.node.counts)
        shown.append((time.monotonic(), dict(rates), counts, sims[-1].counters()))
        return status_line(self, rates)

    monkeypatch.setattr(Demonstration, "status_line", counted_status_line)
    stand_in = None if _face_node_installed() else StandInFaceNode(sims)
    artifacts = tmp_path / "artifacts"
    try:  # past its --duration the demo aborts, and its status is not 0
        status = demo.main(["--artifacts", str(artifacts), "--duration", "80"])
    finally:
        if stand_in is not None:
            stand_in.close()
    out = capsys.readouterr().out
    assert status == 0, out[-3000:]

    # the whole stack came from the bring-up plan, and every process is gone
    pids = {m.group(1): int(m.group(2))
            for m in re.finditer(r"started (\S+) \(\S+, pid (\d+)\)", out)}
    assert {"driver", "description_publisher"} <= set(pids), out[:2000]
    assert "start_sim:=false" in out
    assert not [name for name, pid in pids.items() if alive(pid)]
    assert "all processes stopped" in out

    # a live status: link from link_status, pose from odom, battery, rates measured here
    status_lines = [line for line in out.splitlines() if re.search(r"\| odom +\d+ Hz", line)]
    assert len(status_lines) >= 15 and len(shown) == len(status_lines)
    assert re.search(r"CONNECTED rtt +[\d.]+ ms \| x +[-+][\d.]+ y +[-+][\d.]+ mm yaw +[-+][\d.]+ deg "
                     r"\| battery \d\.\d\d V \d+ % \| odom +\d+ Hz, camera +\d+ fps, "
                     r"joint_states +\d+ Hz \| square", out), "\n".join(status_lines[:5])
    # The rates are the streams' (counted, not timed: how fast they come is the machine's
    # load's). From the first line with the stream's messages (the demo's subscription
    # discovered) to the last, the demo got an odom and a joint_states for each state the
    # robot sent and (best effort) the robot's images, and the rates shown add up to them.
    for stream, robot_count, share in (("odom", "state", 0.95), ("joint_states", "state", 0.95),
                                       ("camera", "camera", 0.8)):
        since = [entry for entry in shown if entry[2][stream] > 0]
        assert len(since) >= 5, (stream, len(since))
        (_, _, demo0, robot0), (_, _, demo1, robot1) = since[0], since[-1]
        got, sent = demo1[stream] - demo0[stream], robot1[robot_count] - robot0[robot_count]
        assert share * sent <= got <= sent + 10, (stream, got, sent)
        added = sum(rates[stream] * (t - before) for (before, *_), (t, rates, *_) in zip(since, since[1:]))
        assert added == pytest.approx(got, rel=0.05, abs=5), (stream, added, got)
    assert out.count("cmd_vel turn +90 deg") == 4

    # a built-in animation through the driver's play_animation action, its progress in the
    # live status, its result, and the simulated robot playing it from start to end
    assert "animation: name='nod_yes' -> action /play_animation" in out
    progress = [int(p) for p in re.findall(r"\| animation nod_yes +(\d+) %$", out, re.M)]
    assert progress and all(0 <= p <= 100 for p in progress), "\n".join(status_lines[:5])
    played = re.search(r"^animation: 'nod_yes' via action /play_animation: succeeded "
                       r"\(played nod_yes\); (\d+) progress "
                       r"feedbacks, (\d+) % \.\. (\d+) %; the simulated robot reported 1 animation "
                       r"ended \(AnimationEnded\)$", out, re.M)
    assert played, out[-2500:]
    feedbacks, first, last = map(int, played.groups())
    assert feedbacks >= 5 and first < last and last >= 80
    robot_sent = sims[-1].robot.stats.sent
    assert robot_sent["AnimationStarted"] == 1 and robot_sent["AnimationEnded"] == 1
    assert "head/angle +20 deg, lift/height 70 mm" in out
    assert "camera_enabled=true, camera_color=true" in out

    error = re.search(r"pose error at the end \(odometry - ground truth\): ([\d.]+) mm, "
                      r"([-+][\d.]+) deg", out)
    assert error, out[-2000:]
    assert float(error.group(1)) < 5.0 and abs(float(error.group(2))) < 2.0
    final = re.search(r"pose at the end: odometry x (-?[\d.]+) mm, y (-?[\d.]+) mm", out)
    assert abs(float(final.group(1))) < 10.0 and abs(float(final.group(2))) < 10.0  # closed

    # the artefacts, with their paths printed
    for name in ("camera.png", "face.png", "trajectory.png", "bringup.log"):
        assert (artifacts / name).is_file(), name
        assert str(artifacts / name) in out
    camera = Image.open(artifacts / "camera.png")
    assert camera.size == (320, 240) and camera.mode == "RGB"
    assert float(np.asarray(camera).std()) > 20.0                         # not blank
    face = Image.open(artifacts / "face.png")
    assert face.size == (544, 288)
    # a face node runs here (the stack's, or the stand-in where none is installed): the face
    # goes through it, by its service or its topic, not by the driver's display topic (the
    # demo's way when no face node runs) nor skipped
    assert re.search(r"^face: 'happy' via (service /set_face_expression|topic /face/expression)\b",
                     out, re.M), out[-2500:]
    if stand_in is not None:
        assert stand_in.received == ["happy"], out[-2500:]
    assert colour_count(face, art.FACE_LIT_RGB) > 9 * 200                 # lit pixels
    trajectory = Image.open(artifacts / "trajectory.png")
    assert trajectory.size == (760, 760)
    assert colour_count(trajectory, art.ODOMETRY_RGB) > 500
    assert colour_count(trajectory, art.TRUTH_RGB) > 500
    if "sound: skipped" not in out:
        assert (artifacts / "sound.wav").is_file()
    assert "the robot is stopped and every process has exited" in out


@pytest.mark.ros
@pytest.mark.slow
def test_a_robot_that_does_not_answer_fails_with_a_clear_message(tmp_path, capsys):
    project_executable("cozmo_driver_node")
    port = free_udp_port()                       # nobody listens there
    status = demo.main(["robot_ip:=127.0.0.1", f"robot_port:={port}", "--connect-timeout", "4",
                        "--artifacts", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 2, out[-2000:]
    assert f"no answer from the robot at 127.0.0.1:{port}" in out
    assert "is this machine on the robot's Wi-Fi?" in out
    # the reason comes last, after everything was stopped
    assert out.index("all processes stopped") < out.index("cozmo-demo: FAILED: no answer")
    pids = [int(p) for p in re.findall(r"started \S+ \(\S+, pid (\d+)\)", out)]
    assert pids and not [pid for pid in pids if alive(pid)]


@pytest.mark.ros
@pytest.mark.slow
def test_a_driver_that_refuses_to_run_is_a_bring_up_failure(tmp_path, capsys):
    """The driver exits 2 before the robot answered (a local address of its parameter file
    that is no address of this computer, which it cannot bind: the bring-up plan judges the
    form of an address, 999.1.1.1 refused before anything starts, not which computer has it):
    the demo exits 2 too, saying what the node said. An earlier run's files are removed (the demo's own
    checks passed: the driver refuses later), and the run says so; other files stay."""
    project_executable("cozmo_driver_node")
    config = tmp_path.parent / f"{tmp_path.name}_local_ip.yaml"
    config.write_text("cozmo_driver:\n  ros__parameters:\n    local_ip: 192.0.2.1\n")
    for name in ("camera.png", "face.png", "trajectory.png", "sound.wav", "bringup.log"):
        (tmp_path / name).write_bytes(b"an earlier run")
    (tmp_path / "notes.txt").write_text("mine")
    status = demo.main(["--robot-ip", "127.0.0.9", f"config:={config}", "--artifacts", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 2, out[-3000:]
    assert (f"removed the artefacts of an earlier run from {tmp_path}: bringup.log, camera.png, "
            "face.png, sound.wav, trajectory.png") in out
    failed = out[out.index("cozmo-demo: FAILED:"):]
    assert failed.startswith("cozmo-demo: FAILED: cozmo_driver_node exited with status 2, saying "
                             '"cozmo_driver: refusing to run: '), failed[:500]
    assert "cannot bind UDP 192.0.2.1:0" in failed.splitlines()[0], failed[:500]
    assert f"last lines of {tmp_path / 'bringup.log'}" in failed
    # only this run's files (its log) and the user's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bringup.log", "notes.txt"]
    assert b"an earlier run" not in (tmp_path / "bringup.log").read_bytes()
    pids = [int(p) for p in re.findall(r"started \S+ \(\S+, pid (\d+)\)", out)]
    assert pids and not [pid for pid in pids if alive(pid)]


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.heavy  # the whole stack: driver, simulator, face and behavior nodes
def test_every_failed_step_is_listed_and_the_demo_exits_1(tmp_path, capsys, monkeypatch):
    """An animation the driver does not have and a sound file it cannot play: both steps
    fail, the others are done, and the end lists both; exit status 1."""
    for name in ("cozmo_driver_node", "cozmo_description_publisher"):
        project_executable(name)
    from cozmo_driver.ros import demo_node

    monkeypatch.setattr(demo_node, "DemoOptions",
                        functools.partial(demo_node.DemoOptions, animation="no_such_clip"))

    def not_a_wav(path):
        Path(path).write_bytes(b"this is not a WAV file")
        return 1.0

    monkeypatch.setattr(art, "write_chirp_wav", not_a_wav)
    status = demo.main(["--artifacts", str(tmp_path), "--duration", "80"])
    out = capsys.readouterr().out
    assert status == 1, out[-3000:]
    assert "animation: FAILED: " in out and "sound: FAILED: " in out, out[-3000:]
    failed = out[out.index("cozmo-demo: FAILED after"):]
    assert "(2 steps failed)" in failed.splitlines()[0], failed
    listed = [line[4:] for line in failed.splitlines() if line.startswith("  - ")]
    assert len(listed) == 2, failed
    assert listed[0].startswith("animation: ") and "no_such_clip" in listed[0]
    assert listed[1].startswith("sound: ") and "/play_audio" in listed[1]
    # the rest was done and checked: the square, the camera, the pose
    assert out.count("cmd_vel turn +90 deg") == 4
    assert "pose error at the end" in out and (tmp_path / "camera.png").is_file()
    assert "done in" not in out


def _the_driver_dies_once_the_camera_is_on(monkeypatch, then_signal=None) -> list:
    """The demo's driver killed once the camera is on (and then ``then_signal`` handled, as
    its handler does, with no signal sent); returns the list the killed pid goes into."""
    for name in ("cozmo_driver_node", "cozmo_description_publisher"):
        project_executable(name)
    from cozmo_driver.ros import demo_node

    camera_on = demo_node.Demonstration._camera_on
    killed = []

    def camera_on_then_the_driver_dies(self):
        camera_on(self)
        run = self.processes_alive.__self__            # the demo's _Demo
        driver = next(c for c in run.bringup.children if c.entry.name == "driver")
        driver.process.kill()
        killed.append(driver.process.pid)
        if then_signal is not None:
            run.stop.handle(then_signal)

    monkeypatch.setattr(demo_node.Demonstration, "_camera_on", camera_on_then_the_driver_dies)
    return killed


@pytest.mark.ros
@pytest.mark.slow
def test_a_driver_that_dies_during_the_run_fails_the_demonstration(tmp_path, capsys, monkeypatch):
    """The driver is killed after the robot answered: the demonstration failed (1), not
    the bring-up (2); the run stops there, lists it with the log's last lines, and still
    reports and saves what was done."""
    killed = _the_driver_dies_once_the_camera_is_on(monkeypatch)
    status = demo.main(["--artifacts", str(tmp_path), "--duration", "80"])
    out = capsys.readouterr().out
    assert killed and status == 1, out[-3000:]
    failed = out[out.index("cozmo-demo: FAILED after"):]
    listed = [line[4:] for line in failed.splitlines() if line.startswith("  - ")]
    assert listed[-1].startswith("stopped: cozmo_driver_node exited with status -9"), failed
    # the driver died: nothing stopped the robot
    assert "no stop is known to have reached the robot" in failed.splitlines()[0], failed
    assert "the robot is stopped" not in failed
    assert f"last lines of {tmp_path / 'bringup.log'}" in failed
    assert "animation: 'nod_yes' via action /play_animation: succeeded" in out
    # what is there is this run's, and listed
    written = sorted(path.name for path in tmp_path.iterdir())
    assert "bringup.log" in written
    listing = out[out.index("\nartefacts:"):out.index("cozmo-demo: FAILED after")]
    assert sorted(re.findall(r"^  \S+/(\S+) ", listing, re.M)) == written, listing
    pids = [int(p) for p in re.findall(r"started \S+ \(\S+, pid (\d+)\)", out)]
    assert pids and not [pid for pid in pids if alive(pid)]


@pytest.mark.ros
@pytest.mark.slow
def test_ctrl_c_after_the_driver_died_does_not_say_the_robot_is_stopped(tmp_path, capsys, monkeypatch):
    """Ctrl-C (the 130 path) said only "interrupted", after "stopping the robot and every
    process", whether or not a stop reached the robot; with the driver dead none did, and the
    last line says so."""
    killed = _the_driver_dies_once_the_camera_is_on(monkeypatch, then_signal=signal.SIGINT)
    status = demo.main(["--artifacts", str(tmp_path), "--duration", "80"])
    out = capsys.readouterr().out
    assert killed and status == 128 + signal.SIGINT, out[-3000:]
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("cozmo-demo: interrupted; every process has exited, but no stop is known to have "
                           "reached the robot"), out[-3000:]
    assert "may still be moving" in last and "the robot is stopped" not in out


@pytest.mark.ros
@pytest.mark.slow
def test_ctrl_c_before_the_robot_answered_does_not_say_it_may_still_be_moving(tmp_path, capsys, monkeypatch):
    """Ctrl-C while the demo waited for the driver to connect ended in "no stop is known to
    have reached the robot ...: it may still be moving; if it does, pick it up or switch it
    off", of a robot the demo never commanded: it says it was not driven."""
    for name in ("cozmo_driver_node", "cozmo_description_publisher"):
        project_executable(name)
    from cozmo_driver.ros import demo_node

    wait_connected = demo_node.Demonstration._wait_connected

    def interrupted_while_waiting(self):
        self.processes_alive.__self__.stop.handle(signal.SIGINT)   # as the demo's handler does
        wait_connected(self)

    monkeypatch.setattr(demo_node.Demonstration, "_wait_connected", interrupted_while_waiting)
    status = demo.main(["--artifacts", str(tmp_path), "--duration", "80"])
    out = capsys.readouterr().out
    assert status == 128 + signal.SIGINT, out[-3000:]
    last = out.rstrip().splitlines()[-1]
    assert last == "cozmo-demo: interrupted before the robot was driven; every process has exited", out[-3000:]
    assert "may still be moving" not in out
    pids = [int(p) for p in re.findall(r"started \S+ \(\S+, pid (\d+)\)", out)]
    assert pids and not [pid for pid in pids if alive(pid)]


# ------------------------------------------------------------------ the protocol-level demo


@pytest.mark.slow
@pytest.mark.realtime  # the rates it reports
def test_protocol_only_drives_the_simulated_robot_and_reports_matching_poses(capsys):
    assert demo.main(["--protocol-only", "--duration", "40", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "robot ready: firmware 2381" in out
    assert "EnableCamera (QVGA, colour)" in out  # colour by default, as cozmo-demo
    assert re.search(r"ready\s+rtt\s+[\d.]+ ms\s+state\s+3\d\.\d Hz\s+camera\s+1[3-7]\.\d fps", out)
    assert out.count("TurnInPlace +90 deg") == 4
    assert "was not acknowledged" not in out and "did not end" not in out
    reported = re.search(r"reported pose x (-?[\d.]+) mm, y (-?[\d.]+) mm, yaw (-?[\d.]+) deg; "
                         r"simulator truth x (-?[\d.]+) mm, y (-?[\d.]+) mm, yaw (-?[\d.]+) deg", out)
    assert reported, out[-2000:]
    rx, ry, ryaw, tx, ty, tyaw = map(float, reported.groups())
    assert abs(rx - tx) < 2.0 and abs(ry - ty) < 2.0 and abs(ryaw - tyaw) < 2.0
    assert abs(tx) < 30.0 and abs(ty) < 30.0  # the square closes
    images = int(re.search(r"camera images completed: (\d+)", out).group(1))
    assert images > 100
    assert "malformed dropped 0" in out
    assert out.rstrip().endswith("done.")


class LinkGoes:
    """Stands for the robot of the protocol demo's square: its commands go until the
    link goes (NotConnectedError, as a send on a session that is not connected), or its
    RobotState is gone (None: the link was reset by a reconnect)."""

    def __init__(self, sends_before_the_loss=None):
        from types import SimpleNamespace

        self.left = sends_before_the_loss
        self.robot_state = SimpleNamespace(pose_angle_rad=0.0, status=0)
        self.sent = []

    def _send(self, name):
        from cozmo_driver.protocol.errors import NotConnectedError

        if self.left is not None:
            if self.left <= 0:
                raise NotConnectedError(f"cannot send {name}: session is connecting")
            self.left -= 1
        self.sent.append(name)

    def drive_wheels(self, *args):
        self._send("DriveWheels")
        if len(self.sent) == 2 and self.left is None:
            self.robot_state = None         # reset after the first side

    def turn_in_place(self, *args, **kwargs):
        self._send("TurnInPlace")
        return 1

    def wait_for_action(self, action, timeout):
        return True

    def set_head_angle(self, angle):
        self._send("SetHeadAngle")

    def set_lift_height(self, height):
        self._send("SetLiftHeight")

    def stop_all_motors(self):
        self._send("StopAllMotors")


@pytest.mark.parametrize("sends, why", [
    (0, "cannot send DriveWheels: session is connecting"),
    (3, "cannot send SetHeadAngle: session is connecting"),       # at the first corner
    (None, "no RobotState since the link was reset"),
], ids=["at once", "at a corner", "state reset"])
def test_protocol_only_square_ends_when_the_link_goes(sends, why):
    """The protocol demo's square (its thread demo-square) ends saying why when the link
    is lost, instead of a traceback in that thread."""
    from types import SimpleNamespace

    from cozmo_driver import protocol_demo

    robot = LinkGoes(sends)
    said = []
    never = SimpleNamespace(is_set=lambda: False, wait=lambda timeout: False)
    protocol_demo._square(robot, never, said.append)        # no exception
    assert said[-1] == f"  the square stops: {why}", said
    assert len(robot.sent) == (2 if sends is None else sends)


class StopsDuringTheTurn(LinkGoes):
    """The square's robot whose first turn is never seen done (its heading stays), and
    the demo's stop flag, set while the square waits for that turn (``--duration`` over):
    for its end, or, when the robot does not acknowledge it, for the acknowledgement."""

    def __init__(self, acknowledged: bool):
        super().__init__(sends_before_the_loss=100)     # the link stays
        self.acknowledged = acknowledged
        self.stopped = False
        self.waits = 0

    def wait_for_action(self, action, timeout):
        if not self.acknowledged:
            self.stopped = True
        return self.acknowledged

    # the stop flag
    def is_set(self):
        return self.stopped

    def wait(self, timeout):
        self.waits += 1
        if self.waits > 1:          # the wait for the turn's end (the first: the side)
            self.stopped = True
        return self.stopped


@pytest.mark.parametrize("acknowledged", [True, False], ids=["turn taken", "turn not acknowledged"])
def test_protocol_only_square_says_no_timeout_and_sends_nothing_once_stopped(acknowledged):
    """The end decided (--duration over, a signal) while the square waited for a turn:
    it said "the turn did not end within 5 s", which was not so, and went on to send
    SetHeadAngle and SetLiftHeight after the demo had stopped the square. It ends there."""
    from cozmo_driver import protocol_demo

    robot = StopsDuringTheTurn(acknowledged)
    said = []
    protocol_demo._square(robot, robot, said.append)
    assert robot.sent == ["DriveWheels", "DriveWheels", "TurnInPlace"], (robot.sent, said)
    assert not [line for line in said if "did not end" in line or "not acknowledged" in line
                or "SetHeadAngle" in line], said


class LosesItsLink:
    """The protocol demo's simulator, whose link goes down for good once the robot is
    ready (the robot out of the Wi-Fi's reach)."""

    def __new__(cls, *args, **kwargs):
        from cozmo_driver.sim.server import SimServer     # the real one

        sim = SimServer(*args, **kwargs)

        def cut():
            deadline = time.monotonic() + 10
            while not sim.running and time.monotonic() < deadline:    # started by the demo
                time.sleep(0.02)
            sim.wait_until(lambda s: s.is_connected() and s.streaming(), 10.0)
            time.sleep(1.0)
            sim.set_link_up(False)

        threading.Thread(target=cut, daemon=True).start()
        return sim


@pytest.mark.slow
def test_protocol_only_losing_the_robot_exits_1_with_the_statistics(capsys, monkeypatch):
    """The link goes mid-run: the square stops saying why (no traceback), the robot is
    still told to stop and the link statistics are printed; the exit status is 1 (the link
    did not stay up), not 2 (as if the robot had never become ready)."""
    import cozmo_driver.sim
    from cozmo_driver import protocol_demo
    from cozmo_driver.client import ClientConfig

    monkeypatch.setattr(cozmo_driver.sim, "SimServer", LosesItsLink)
    # a robot silent for 0.5 s is lost (5 s by default): the test takes less time
    monkeypatch.setattr(protocol_demo, "ClientConfig",
                        functools.partial(ClientConfig, state_timeout=0.5))
    status = protocol_demo.main(["--duration", "8"])
    out, err = capsys.readouterr()
    assert status == 1, out[-3000:] + err
    assert "the square stops: " in out, out[-3000:]
    assert "link statistics:" in out and "link lost 1 time during the run" in out, out[-3000:]
    assert "could not stop the robot: it is not connected: it may still be moving; if it does, pick it up " \
        "or switch it off" in out, out[-3000:]
    assert "Traceback" not in out + err
    assert out.rstrip().endswith("done.")


def _kept_stop_flags(monkeypatch, protocol_demo) -> list:
    """The protocol demo's stop flags, each kept in the list returned as it is made, so that a
    test can raise one as its signal handler would, with no signal sent."""
    from cozmo_driver.stop_flag import StopFlag

    flags = []

    class Kept(StopFlag):
        def __init__(self):
            super().__init__()
            flags.append(self)

    monkeypatch.setattr(protocol_demo, "StopFlag", Kept)
    return flags


def test_protocol_only_interrupted_after_the_robot_was_lost_does_not_say_it_is_stopped(capsys, monkeypatch):
    """Ctrl-C after the link went: "could not stop the robot: ...", then "interrupted
    (SIGINT): the robot is stopped and disconnected." No stop reached it: it says so, and
    what to do."""
    import signal

    import cozmo_driver.sim
    from cozmo_driver import protocol_demo
    from cozmo_driver.client import ClientConfig

    flags = _kept_stop_flags(monkeypatch, protocol_demo)
    status_line = protocol_demo._status_line

    def sigint_once_the_link_went(robot, monitor, *args):
        if monitor.losses:
            flags[0].handle(signal.SIGINT)      # as the handler does, with no signal sent
        return status_line(robot, monitor, *args)

    monkeypatch.setattr(cozmo_driver.sim, "SimServer", LosesItsLink)
    monkeypatch.setattr(protocol_demo, "ClientConfig", functools.partial(ClientConfig, state_timeout=0.5))
    monkeypatch.setattr(protocol_demo, "_status_line", sigint_once_the_link_went)
    status = protocol_demo.main(["--duration", "20"])
    out = capsys.readouterr().out
    assert status == 128 + signal.SIGINT, out[-3000:]
    assert "the robot is stopped" not in out, out[-3000:]
    assert out.rstrip().endswith("interrupted (SIGINT): disconnected, but no stop is known to have reached "
                                 "the robot: it may still be moving; if it does, pick it up or switch it off."), \
        out[-3000:]


def test_protocol_only_a_signal_stops_it_with_128_plus_the_signal(capsys, monkeypatch):
    """Ctrl-C (SIGINT) or SIGTERM: the robot is stopped, the statistics printed, and the
    exit status is 128 + the signal's number, as cozmo-demo's."""
    import signal

    from cozmo_driver import protocol_demo

    flags = _kept_stop_flags(monkeypatch, protocol_demo)
    status_line = protocol_demo._status_line

    def first_status_then_sigterm(*args):      # the robot is ready, the square driven
        flags[0].handle(signal.SIGTERM)         # as the handler does, with no signal sent
        return status_line(*args)

    monkeypatch.setattr(protocol_demo, "_status_line", first_status_then_sigterm)
    t0 = time.monotonic()
    status = protocol_demo.main(["--duration", "30"])
    out = capsys.readouterr().out
    assert status == 128 + signal.SIGTERM, out[-3000:]
    assert time.monotonic() - t0 < 15
    assert "link statistics:" in out
    assert out.rstrip().endswith("interrupted (SIGTERM): the robot is stopped and disconnected."), out[-2000:]


def test_protocol_only_takes_the_demos_colour_switch():
    from cozmo_driver import protocol_demo

    # colour by default and --grey for grey, as cozmo-demo (it was --color, the inverse)
    assert not protocol_demo.parse_arguments([]).grey
    assert protocol_demo.parse_arguments(["--grey"]).grey
    assert demo.parse_arguments(["--grey"]).grey and not demo.parse_arguments([]).grey


@pytest.mark.parametrize("argv", [["robot_ip:=127.0.0.1", "robot_port:=5552"],
                                  ["--robot_ip", "127.0.0.1", "--robot_port", "5552"],
                                  ["--robot-ip=127.0.0.1", "robot_port:=5552"]])
def test_protocol_only_takes_the_argument_forms_the_demo_takes(argv, monkeypatch):
    """cozmo-demo --help gives robot_ip:=... and --robot_ip as its forms; with --protocol-only
    they went to the protocol demo's parser, which refused them (unrecognized arguments)."""
    from cozmo_driver import protocol_demo

    parsed = []
    monkeypatch.setattr(protocol_demo, "main",
                        lambda argv, prog: parsed.append(protocol_demo.parse_arguments(argv, prog)) or 0)
    assert demo.main(["--protocol-only"] + argv) == 0
    assert (parsed[0].robot_ip, parsed[0].robot_port) == ("127.0.0.1", 5552)
    assert protocol_demo.parse_arguments([]).robot_port == 5551


@pytest.mark.parametrize("argv, message", [
    (["robot_ip:=127.0.0.1", "--robot-ip", "127.0.0.1"], "robot_ip given twice"),
    (["robot_port:=x"], "robot_port:='x': expected a port number"),
    (["namespace:=cozmo"], "unknown argument 'namespace'; the arguments are: robot_ip, robot_port"),
    # the built-in simulator's port is a free one: the port given went unused, silently
    (["robot_port:=5600"], "robot_port without robot_ip: the built-in simulator"),
    (["--robot-port", "5600", "--duration", "1"], "--robot-ip 127.0.0.1 --robot-port N"),
])
def test_protocol_only_refuses_bad_name_value_arguments(argv, message, capsys):
    from cozmo_driver import protocol_demo

    with pytest.raises(SystemExit):
        protocol_demo.parse_arguments(argv, "cozmo-demo --protocol-only")
    err = capsys.readouterr().err
    assert message in err and "cozmo-demo --protocol-only" in err, err


def test_protocol_only_says_why_an_address_cannot_be_used(capsys):
    """A port out of range ends the run with status 2 and the reason, not a traceback;
    the signal handlers go back (the autouse guard of fixtures_signals checks that)."""
    assert demo.main(["--protocol-only", "--robot-ip", "127.0.0.1", "--robot-port", "70000",
                      "--duration", "5"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "cozmo-demo --protocol-only: port 70000 is outside 0..65535", err


def test_protocol_only_rejects_a_bad_duration(capsys):
    with pytest.raises(SystemExit):
        demo.main(["--protocol-only", "--duration", "-1"])
    err = capsys.readouterr().err
    assert "--duration must be a positive number" in err
    assert "cozmo-demo --protocol-only" in err
