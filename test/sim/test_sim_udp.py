"""The simulated robot on a loopback UDP port (SimServer), driven by the project's
engine session on the UDP adapter, and the cozmo-sim command. Real time, bounded waits."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cozmo_driver.protocol import messages as m
from cozmo_driver.protocol.camera import ImageAssembler, image_to_array
from cozmo_driver.protocol.session import ConnectionLost, Disconnected, MessageReceived, Role, Session
from cozmo_driver.sim import NonLoopbackAddressError, RobotConfig, SimServer, StatusFlag
from cozmo_driver.sim.cli import STOP_GRACE_S
from cozmo_driver.sim.world import World
from cozmo_driver.transport.memory import Impairment
from cozmo_driver.transport.udp import UdpTransport
from sim_harness import calibrated

E = m.ENUMS
ROOT = Path(__file__).resolve().parents[2]


class UdpEngine:
    """The project's engine session on a loopback UDP socket, with bounded waits."""

    def __init__(self, address) -> None:
        assert address[0].startswith("127."), address
        self.session = Session(Role.ENGINE)
        self.events: list = []
        self.cond = threading.Condition()
        self.transport = UdpTransport(self.session, local_addr=("127.0.0.1", 0), remote_addr=address,
                                      peer_policy="fixed", on_event=self._on_event, name="test-engine")

    def _on_event(self, event) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def __enter__(self) -> "UdpEngine":
        self.transport.start()
        return self

    def __exit__(self, *exc) -> None:
        self.transport.stop()

    def connect(self) -> None:
        self.transport.call(lambda: self.session.connect(time.monotonic()))

    def send(self, message) -> None:
        self.transport.call(self.session.send, message)

    def received(self, name: str | None = None) -> list:
        with self.cond:
            return [e.message for e in self.events
                    if isinstance(e, MessageReceived) and (name is None or e.message.NAME == name)]

    def wait(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.1))
        return True

    def has(self, name: str):
        return lambda: any(isinstance(e, MessageReceived) and e.message.NAME == name for e in self.events)

    def initialise(self, timeout: float = 5.0) -> None:
        self.connect()
        assert self.wait(self.has("FirmwareSignature"), timeout), "no FirmwareSignature"
        self.send(m.Enable())  # twice: the robot drops our first packet (see sim_harness)
        self.send(m.Enable())
        assert self.wait(self.has("BodyInfo"), timeout), "no BodyInfo"
        self.send(m.SetOrigin(pose_frame_id=0, pose_origin_id=1))
        self.send(m.SyncTime(timestamp_ms=0))
        assert self.wait(self.has("RobotState"), timeout), "no RobotState"
        assert self.wait(lambda: calibrated(self.received("MotorCalibration")), timeout), \
            "head and lift not calibrated"

    def states_after(self, robot_ms: int) -> list:
        """The RobotStates received that the robot stamped after ``robot_ms`` (its own clock)."""
        return [s for s in self.received("RobotState") if s.timestamp_ms > robot_ms]

    def last_state_ms(self) -> int:
        """The robot's time (ms, its own clock) of the latest RobotState received."""
        return self.received("RobotState")[-1].timestamp_ms


def state_spacing_ms(states: list) -> float:
    """The median gap between consecutive RobotStates on the robot's own clock (their
    timestamps), ms: its state period (30 ms), whatever the load on this machine did to when
    they were read here (a state slot the robot skipped while late is one long gap)."""
    stamps = [s.timestamp_ms for s in states]
    return float(np.median(np.diff(stamps)))


@pytest.fixture
def sim():
    with SimServer(port=0, seed=7) as server:
        assert server.address[0] == "127.0.0.1"
        yield server


def test_engine_over_udp_full_session(sim):
    with UdpEngine(sim.address) as engine:
        engine.initialise()
        assert sim.is_connected() and sim.streaming()
        # about 33 states a second, counted on the robot's clock (not this machine's, whose
        # load decides when they are read here)
        since = engine.last_state_ms()
        assert engine.wait(lambda: len(engine.states_after(since)) >= 50, 10.0), "the states stopped"
        spacing = state_spacing_ms(engine.states_after(since))
        assert 25.0 <= spacing <= 35.0, f"a state every {spacing} ms"
        engine.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
        engine.send(m.SetHeadAngle(angle_rad=0.3, action_id=4))
        assert sim.wait_until(lambda s: s.true_pose()[0] > 60.0, 3.0)
        engine.send(m.StopAllMotors())
        assert sim.wait_until(lambda s: not s.status() & StatusFlag.IS_MOVING, 2.0)
        assert sim.head_angle() == pytest.approx(0.3, abs=1e-6)
        assert engine.wait(lambda: engine.received("AcknowledgeAction"), 2.0)
        x = sim.true_pose()[0]
        assert engine.wait(lambda: abs(engine.received("RobotState")[-1].pose_x_mm - x) < 1.0, 2.0)
        # camera
        engine.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Stream))
        assembler = ImageAssembler()
        images: list = []

        seen = 0

        def ten_images() -> bool:
            nonlocal seen
            chunks = engine.received("ImageChunk")
            for chunk in chunks[seen:]:
                image = assembler.push_chunk(chunk)
                if image is not None:
                    images.append(image)
            seen = len(chunks)
            return len(images) >= 10

        assert engine.wait(ten_images, 5.0)
        pixels = image_to_array(images[-1])
        assert pixels.shape == (240, 320) and 10 < pixels.mean() < 245
        # scripted event, seen by the engine
        sim.pick_up()
        assert engine.wait(lambda: engine.received("RobotState")[-1].status & StatusFlag.IS_PICKED_UP, 2.0)
        sim.put_down()
        assert sim.commands()[-1][1].NAME == "EnableCamera"
        counts = sim.command_counts()
        assert counts["Enable"] == 1 and counts["SyncTime"] == 1


class HeldWorld(World):
    """A world whose renders wait until the test lets them go (at most 20 s): a camera frame
    that takes as long as the test likes."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.started = threading.Event()
        self.release = threading.Event()

    def render(self, *args, **kwargs):
        self.started.set()
        self.release.wait(20.0)
        return super().render(*args, **kwargs)


@contextlib.contextmanager
def a_frame_held():
    """``(world, sim, engine)``: a simulator streaming its camera to an initialised client, the
    render of its first frame held until ``world.release`` is set (at the block's end at the
    latest, whatever happened)."""
    world = HeldWorld(7)
    with SimServer(port=0, seed=7, world=world) as sim, UdpEngine(sim.address) as engine:
        try:
            engine.initialise()
            engine.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Stream))
            assert world.started.wait(10.0), "no frame was rendered"
            yield world, sim, engine
        finally:
            world.release.set()


def test_the_state_stream_keeps_its_pace_while_a_camera_frame_renders():
    """A real Cozmo's camera does not delay its states; the simulator renders and encodes a
    frame off its I/O thread (RobotConfig.camera_render_thread), so that a slow frame (a
    loaded machine, a Raspberry Pi) does not stop the states. Counted, not timed: 30 states
    arrive while one frame's render is held."""
    with a_frame_held() as (world, sim, engine):
        held = len(engine.received("RobotState"))
        assert engine.wait(lambda: len(engine.received("RobotState")) >= held + 30, 10.0), \
            f"the states stopped while a camera frame rendered: {len(engine.received('RobotState')) - held}"
        assert not engine.received("ImageChunk")
        robot = sim.stats()["robot"]
        # the frames due meanwhile were skipped, not queued behind it
        assert robot["images_sent"] == 0 and robot["images_skipped"] >= 1
        during = engine.received("RobotState")[held + 29].timestamp_ms
        world.release.set()
        assert engine.wait(lambda: any(c.image_chunk_count for c in engine.received("ImageChunk")), 10.0)
        last = next(c for c in engine.received("ImageChunk") if c.image_chunk_count)
        # stamped with when it was captured (before the states that came while it rendered)
        assert 0 < last.frame_timestamp_ms < during
        assert sim.wait_until(lambda s: s.stats()["robot"]["images_sent"] >= 3, 10.0), "the stream stopped"


@pytest.mark.parametrize("how", ["camera_off", "reboot"])
def test_a_frame_whose_render_ends_after_the_camera_or_the_link_changed_is_not_sent(how):
    """The frame in flight belongs to the camera's settings and the link it was captured
    for: once the client turned the camera off, or the robot rebooted, it is dropped
    (counted), and the worker is free for the next frames."""
    with a_frame_held() as (world, sim, engine):
        if how == "camera_off":
            engine.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Off))
            assert sim.wait_until(lambda s: s.camera_settings()["mode"] == E["ImageSendMode"].Off, 5.0)
        else:
            sim.reboot()
        world.release.set()
        assert sim.wait_until(lambda s: s.stats()["robot"].get("images_dropped") == 1, 10.0), \
            f"the stale frame was not dropped: {sim.stats()['robot']}"
        robot = sim.stats()["robot"]
        assert robot["images_sent"] == 0 and robot["image_renders"] == 1
        assert not engine.received("ImageChunk")
        if how == "reboot":
            assert engine.wait(lambda: any(isinstance(e, ConnectionLost) for e in engine.events), 6.0)
            with engine.cond:
                engine.events.clear()
            engine.initialise()
        engine.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Stream))
        assert engine.wait(lambda: any(c.image_chunk_count for c in engine.received("ImageChunk")), 10.0)


def test_a_single_shot_asked_for_while_a_frame_renders_comes_after_it():
    """SingleShot while the worker still renders a frame of the stream: that frame is
    dropped (the camera was set anew), and the single shot is taken once the worker is free."""
    with a_frame_held() as (world, sim, engine):
        engine.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].SingleShot))
        assert sim.wait_until(lambda s: s.stats()["robot"]["images_skipped"] >= 1, 5.0)
        world.release.set()
        assert engine.wait(lambda: any(c.image_chunk_count for c in engine.received("ImageChunk")), 10.0), \
            f"no single shot: {sim.stats()['robot']}"
        assert sim.wait_until(lambda s: s.camera_settings()["mode"] == E["ImageSendMode"].Off, 5.0)
        robot = sim.stats()["robot"]
        assert (robot["images_sent"], robot["images_dropped"]) == (1, 1)


def test_without_the_render_thread_the_server_has_no_camera_worker():
    with SimServer(port=0, config=RobotConfig(camera_render_thread=False)) as sim:
        assert sim.camera_worker is None and sim.robot.camera_worker is None
    with SimServer(port=0) as sim:
        assert sim.robot.camera_worker is sim.camera_worker and sim.camera_worker.running
    assert not sim.camera_worker.running


def test_udp_with_20_percent_loss_both_ways():
    lossy = Impairment(loss=0.2)
    with SimServer(port=0, seed=9, up=lossy, down=Impairment(loss=0.2)) as sim, \
            UdpEngine(sim.address) as engine:
        engine.initialise(timeout=10.0)
        for k in range(1, 31):
            engine.send(m.SetHeadAngle(angle_rad=-0.2 + 0.01 * k, action_id=k))
        assert engine.wait(lambda: len(engine.received("AcknowledgeAction")) >= 30, 15.0)
        assert [a.action_id for a in engine.received("AcknowledgeAction")] == list(range(1, 31))
        assert sim.wait_until(lambda s: abs(s.head_angle() - 0.1) < 1e-6, 3.0)
        # about 80 % of the states get through: counted against the robot's own timestamps
        # (a state every 30 ms), not the wall clock, so a loaded machine does not matter
        before = len(engine.received("RobotState"))
        # (80 states: at 40, more than 95 % got through in about one run in 200)
        assert engine.wait(lambda: len(engine.received("RobotState")) >= before + 80, 15.0)
        states = engine.received("RobotState")[before:]
        sent = (states[-1].timestamp_ms - states[0].timestamp_ms) / 30 + 1
        assert 0.6 <= len(states) / sent <= 0.95, (len(states), sent)
        stats = sim.stats()["impairment"]
        assert stats["dropped_up"] > 0 and stats["dropped_down"] > 0


def test_reboot_over_udp_and_reconnect(sim):
    with UdpEngine(sim.address) as engine:
        engine.initialise()
        sim.reboot()
        assert engine.wait(lambda: any(isinstance(e, ConnectionLost) for e in engine.events), 6.0)
        with engine.cond:
            engine.events.clear()
        engine.initialise()
        assert sim.stats()["robot"]["reboots"] == 1


@pytest.mark.parametrize("how", ["killed", "disconnected"])
def test_a_second_client_waits_until_the_first_lets_go(how):
    """Anki's firmware (link_policy "firmware", the default) ignores anyone else while a
    link lives: a second program's RESETs go unanswered until the first disconnects, or,
    killed without a word, until the robot's timeout has passed without hearing it.

    The first holds the link by its pings (every 0.5 s, from a thread in this process): the
    robot's peer_timeout is 2 s so that a thread starved for a while on a loaded machine does
    not lose the link during the 1.5 s the second is refused."""
    config = RobotConfig(seed=4, peer_timeout=2.0)
    with SimServer(host="127.0.0.1", port=0, config=config) as sim, \
            UdpEngine(sim.address) as first, UdpEngine(sim.address) as second:
        first.initialise()
        holder = sim.peer()
        second.connect()
        assert not second.wait(second.has("FirmwareSignature"), 1.5), "the robot answered a second client"
        assert sim.peer() == holder and sim.transport.stats.wrong_source >= 3
        assert not second.session.is_connected
        let_go = time.monotonic()
        if how == "killed":
            first.transport.stop()
            # the robot's timeout counts from the last datagram it heard from the first (a
            # ping, up to 0.5 s before it was killed), not from the kill
            let_go = sim.call(lambda: sim.robot.session._last_rx)
        else:
            first.transport.call(lambda: first.session.disconnect(time.monotonic()))
        second.connect()  # a new attempt (the first gave up after its connect_timeout)
        assert second.wait(second.has("FirmwareSignature"), config.peer_timeout + 3), \
            "the second client never got the robot"
        waited = time.monotonic() - let_go
        # how the robot let the first go: a link it gave up on, silent for its peer_timeout,
        # is counted lost; one the first ended with its Disconnect is not (it let go at once,
        # and the second's next RESET took it)
        lost = sim.stats()["session"]["connections_lost"]
        if how == "killed":
            assert waited >= config.peer_timeout  # not before the robot gave the link up
            assert lost == 1, "the robot let the killed client go before its peer_timeout"
        else:
            assert lost == 0, "the robot held the link until the client's silence timed out, not its Disconnect"
        assert sim.peer() != holder


def test_with_the_latest_reset_policy_a_second_client_takes_the_robot_at_once():
    with SimServer(host="127.0.0.1", port=0, config=RobotConfig(seed=4, link_policy="latest_reset")) as sim, \
            UdpEngine(sim.address) as first, UdpEngine(sim.address) as second:
        first.initialise()
        holder = sim.peer()
        second.connect()
        assert second.wait(second.has("FirmwareSignature"), 2.0)
        assert sim.peer() != holder


def test_garbage_over_udp_is_survived(sim):
    with UdpEngine(sim.address) as engine:
        engine.initialise()
        sim.send_garbage(count=8)
        engine.send(m.SetLiftHeight(height_mm=60.0, action_id=2))
        assert engine.wait(lambda: engine.received("AcknowledgeAction"), 2.0)
        assert engine.transport.call(lambda: engine.session.stats.malformed_datagrams) >= 4
        assert sim.wait_until(lambda s: abs(s.lift_height() - 60.0) < 1e-3, 3.0)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1"])
def test_refuses_non_loopback_addresses(host):
    with pytest.raises(NonLoopbackAddressError):
        SimServer(host=host, port=0)


def test_localhost_name_is_loopback():
    with SimServer(host="localhost", port=0) as sim:
        assert sim.address[0] == "127.0.0.1"


# --------------------------------------------------------------------------------- cozmo-sim

def run_cli(*args: str, timeout: float = 20.0) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "cozmo_driver.sim.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


def test_cli_runs_for_a_duration_and_prints_status():
    """A status line comes after each wait of up to 1 s, so their number is the load's: a
    run held up longer than its --duration (a SIGSTOP of 3 s just after its start showed it)
    prints one, and this test asked for two. That the run did not stop early is checked on
    the time from before its start to its end, which load can only lengthen: the simulator
    stops once its own clock (CLOCK_MONOTONIC, as this one) has passed the 2.5 s."""
    started = time.monotonic()
    done = run_cli("--port", "0", "--duration", "2.5", "--seed", "3", "--loss-down", "0.1")
    ran = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("cozmo-sim: simulated Cozmo on udp://127.0.0.1:")
    status = [ln for ln in lines if "state" in ln and "camera" in ln]
    assert status and "no client" in status[0], done.stdout
    assert lines[-1] == "cozmo-sim: stopped"
    assert ran >= 2.5, f"a --duration 2.5 run ended after {ran:.2f} s:\n{done.stdout}"


def test_cli_refuses_non_loopback():
    done = run_cli("--host", "0.0.0.0", "--port", "0", "--duration", "0")
    assert done.returncode == 2 and "loopback" in done.stderr


SIM_HINT = "(the simulator serves a loopback address of this computer, such as 127.0.0.1 (the default) or localhost)"


@pytest.mark.parametrize("args, said", [
    (["--seed", "-3"], "argument --seed: -3 is not a seed: a whole number, 0 or more"),
    (["--duration", "nan"], "argument --duration: nan is not a time >= 0 s"),
    (["--duration", "-5"], "argument --duration: -5 is not a time >= 0 s"),
    (["--log-level", "bogus"], "argument --log-level: 'bogus' is not a logging level: use one of DEBUG, "
                               "INFO, WARNING, ERROR, CRITICAL (in any case)"),
    (["--port", "70000"], "argument --port: 70000 is not a UDP port: 1..65535, or 0 for a free one"),
    (["--host", "127.0.1"], "argument --host: '127.0.1' is not an IPv4 address of four numbers 0-255 "
                            "separated by dots: check the address " + SIM_HINT),
    (["--loss-up", "10%"], "argument --loss-up: 10% is not a probability within 0..1"),
    (["--delay-down", "5ms"], "argument --delay-down: 5ms is not a delay >= 0 ms"),
    (["--battery", "1.5"], "argument --battery: 1.5 is not a charge within 0..1 (0: empty, 1: full)"),
    (["--battery", "full"], "argument --battery: full is not a charge within 0..1 (0: empty, 1: full)"),
], ids=["negative-seed", "nan-duration", "negative-duration", "log-level", "port", "host-shortened",
        "percent-loss", "delay-with-unit", "battery-over-full", "battery-word"])
def test_cli_refuses_a_bad_value_with_a_usage_error_saying_what_is_allowed(args, said):
    """--seed -3 ended in a numpy traceback; --duration nan or -5 ran and stopped at once with
    status 0; --log-level bogus was WARNING without a word; --host 127.0.1 served on
    127.0.0.1; --loss-up 10% and --delay-down 5ms were "invalid _probability value" and
    "invalid _milliseconds value", naming private functions. Each is now a usage error,
    status 2, before anything is bound (a host name that does not resolve: the next test)."""
    done = run_cli("--port", "0", "--duration", "5", *args)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith("usage: cozmo-sim"), done.stderr
    assert done.stderr.splitlines()[-1] == "cozmo-sim: error: " + said, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_cli_refuses_a_host_name_that_does_not_resolve(monkeypatch, capsys):
    """--host of a name that does not resolve got the real robot's hint (172.31.1.1 on its
    Wi-Fi); it is now a usage error, status 2, with the simulator's. Run in this process with
    the resolver answering "unknown name", so that no DNS query leaves this machine."""
    from cozmo_driver.sim import cli

    asked = []

    def unknown(host, *args, **kwargs):
        asked.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    monkeypatch.setattr(cli, "exit_with_parent", lambda: None)  # nothing of the bring-up's here
    with pytest.raises(SystemExit) as ended:
        cli.main(["--port", "0", "--duration", "0", "--host", "nosuchhost.invalid"])
    out, err = capsys.readouterr()
    assert ended.value.code == 2 and asked == ["nosuchhost.invalid"], (ended.value.code, asked, out, err)
    assert err.startswith("usage: cozmo-sim"), err
    assert err.splitlines()[-1] == ("cozmo-sim: error: argument --host: cannot resolve 'nosuchhost.invalid' to "
                                    "an IPv4 address (Name or service not known): check the address " + SIM_HINT)
    assert "Traceback" not in err and out == ""


def test_cli_on_a_port_another_simulator_holds_says_how_to_use_that_one():
    """A cozmo-sim started by hand, then `cozmo_bringup use_sim:=true`, which starts one of
    its own on the same port: that one failed with only "Address already in use". It now
    says what holds the port and how to drive it (start_sim:=false sim_port:=N) or to
    choose another port."""
    with SimServer(host="127.0.0.1", port=0, seed=1) as first:
        port = first.address[1]
        done = run_cli("--port", str(port), "--duration", "5", "--quiet")
        assert first.running
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        f"cozmo-sim: cannot bind UDP 127.0.0.1:{port}: [Errno 98] Address already in use; another "
        "program holds that port, maybe a simulator you started: to drive that one, give the bring-up "
        f"use_sim:=true start_sim:=false sim_port:={port}; else choose a free port (sim_port:=N, or "
        "cozmo-sim --port N; --port 0 picks one)"], done.stderr


def test_cli_log_level_takes_any_case():
    from cozmo_driver.sim.cli import build_parser
    assert build_parser().parse_args(["--log-level", "debug"]).log_level == "DEBUG"
    assert build_parser().parse_args([]).log_level == "WARNING"


def test_cli_light_sets_the_rooms_light_and_refuses_what_is_not_one():
    from cozmo_driver.sim.cli import build_parser
    assert build_parser().parse_args([]).light == 1.0
    assert build_parser().parse_args(["--light", "0.25"]).light == 0.25
    for bad in ("0", "-1", "nan", "inf"):
        done = run_cli("--port", "0", "--duration", "0", "--light", bad)
        assert done.returncode == 2 and "is not a light > 0" in done.stderr, (bad, done.stderr)


def test_cli_link_policy_reaches_the_robot_and_refuses_an_unknown_one():
    from cozmo_driver.sim.cli import build_parser, robot_config
    assert robot_config(build_parser().parse_args([])).link_policy == "firmware"
    chosen = robot_config(build_parser().parse_args(["--link-policy", "latest_reset", "--light", "2"]))
    assert (chosen.link_policy, chosen.camera_light) == ("latest_reset", 2.0)
    done = run_cli("--port", "0", "--duration", "0", "--link-policy", "any")
    assert done.returncode == 2 and "--link-policy" in done.stderr, done.stderr


def test_cli_battery_and_on_charger_reach_the_robots_first_state():
    """The battery started at 0.8 and drained in about half an hour of driving, and nothing
    of cozmo-sim set the charge or put the robot on the charger: --battery and --on-charger."""
    from cozmo_driver.sim.cli import build_parser, robot_config
    default = robot_config(build_parser().parse_args([])).model
    assert (default.battery_soc, default.start_on_charger) == (0.8, False)
    for argv, soc, on_charger in ((["--battery", "0.25"], 0.25, False), (["--battery", "1", "--on-charger"], 1.0, True),
                                  (["--battery", "0.5", "--on-charger"], 0.5, True)):
        with SimServer(port=0, config=robot_config(build_parser().parse_args(["--seed", "2", *argv]))) as sim, \
                UdpEngine(sim.address) as engine:
            engine.connect()
            assert engine.wait(engine.has("FirmwareSignature"), 5.0)
            engine.send(m.Enable())
            engine.send(m.Enable())
            engine.send(m.SyncTime(timestamp_ms=0))
            # the first with the motors still (they calibrate first: a running motor sags the voltage)
            still = lambda: [s for s in engine.received("RobotState") if not s.status & StatusFlag.IS_MOVING]  # noqa: E731
            assert engine.wait(still, 5.0)
            state = still()[0]
        charging = on_charger and soc < 1.0
        volts = 3.45 + 0.6 * soc + (0.03 if charging else 0.0)
        assert state.battery_voltage_v == pytest.approx(min(volts, 4.05), abs=0.01), argv
        assert bool(state.status & StatusFlag.IS_ON_CHARGER) == on_charger, argv
        assert bool(state.status & StatusFlag.IS_CHARGING) == charging, argv


def test_cli_stops_cleanly_on_sigint_and_sigterm():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = subprocess.Popen([sys.executable, "-m", "cozmo_driver.sim.cli", "--port", "0", "--quiet"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        try:
            first = proc.stdout.readline()
            assert "udp://127.0.0.1:" in first
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        assert proc.returncode == 0, err
        assert out.strip().endswith("cozmo-sim: stopped")


def _started_cli(*args: str) -> "tuple[subprocess.Popen, int]":
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "cozmo_driver.sim.cli", "--port", "0", "--quiet", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    first = proc.stdout.readline()
    assert "udp://127.0.0.1:" in first, first
    return proc, int(first.split("udp://127.0.0.1:")[1].split()[0])


def _grace_said(proc: subprocess.Popen, timeout: float = 10.0) -> str:
    """The line a signalled cozmo-sim says before it serves its client on (bounded wait).
    Read a byte at a time: a buffered readline could take the line after it too, which
    communicate() (reading the pipe itself) would then never see."""
    fd, line = proc.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0 and select.select([fd], [], [], left)[0], f"no word of the grace: {line!r}"
        byte = os.read(fd, 1)
        assert byte, f"cozmo-sim closed its output: {line!r}"
        line += byte
    return line.decode().rstrip("\n")


@pytest.mark.parametrize("client", ["says goodbye", "says goodbye 3 s later", "stays"])
def test_cli_stopped_with_a_client_serves_it_until_it_disconnects(client):
    """A terminal's Ctrl-C reaches the simulator and the driver of `ros2 launch ...
    use_sim:=true` at once. A simulator that stopped at once left the driver's stop and
    goodbye unanswered, and the driver said the robot "may still be moving" at every
    Ctrl-C. Signalled with a client connected, it serves it on until the client says
    goodbye, or for --stop-grace seconds if it does not. What it did is read from the robot
    (its answers, and its states stamped on its own clock), not from this machine's clock:
    one that ended with the goodbye has a grace that would not end for an hour.

    The default grace was 2 s. Under load (a CI run), a driver still configuring when the
    Ctrl-C came took 3 s to send its stop, and the robot was gone: "may still be moving".
    By default the grace now lasts until ros2 launch's SIGTERM would come (5 s): a goodbye
    3 s late is answered."""
    grace = {"says goodbye": 3600.0, "stays": 0.8}.get(client)
    proc, port = _started_cli(*(["--stop-grace", f"{grace:g}"] if grace is not None else []))
    grace = STOP_GRACE_S if grace is None else grace
    try:
        with UdpEngine(("127.0.0.1", port)) as engine:
            engine.initialise()
            signalled_ms = engine.last_state_ms()  # the robot's clock, before the signal
            proc.send_signal(signal.SIGINT)
            said = _grace_said(proc)
            # still the robot: it streams, stamped after the signal
            assert engine.wait(lambda: len(engine.states_after(signalled_ms)) >= 4, 5.0), \
                "no states after the signal"
            if client.startswith("says goodbye"):
                if client.endswith("later"):  # the robot's clock: 3 s after the signal, still there
                    assert engine.wait(lambda: engine.states_after(signalled_ms + 3000), 10.0), \
                        f"it stopped streaming {(engine.last_state_ms() - signalled_ms) / 1000:.1f} s after the signal"
                # and it answers a command (as a driver's stop as it stops), then its goodbye
                engine.send(m.SetHeadAngle(angle_rad=0.1, action_id=9))
                assert engine.wait(lambda: [a for a in engine.received("AcknowledgeAction")
                                            if a.action_id == 9], 5.0), "a command in the grace went unanswered"
                assert proc.poll() is None
                engine.transport.call(lambda: engine.session.disconnect(time.monotonic()))
                assert engine.wait(lambda: any(isinstance(e, Disconnected) for e in engine.events), 5.0), \
                    engine.events[-3:]
                out, err = proc.communicate(timeout=10)  # ended by the goodbye: the grace is an hour
            else:
                out, err = proc.communicate(timeout=10)  # ended by the grace, the client still there
                # it streamed on through the grace, on its own clock (half of it at least: the
                # state taken for the signal's time may have been read here late)
                assert engine.wait(lambda: engine.states_after(signalled_ms + 1000 * grace / 2), 5.0), \
                    (signalled_ms, engine.last_state_ms())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    assert said == (f"cozmo-sim: stopping once the client has disconnected (at most {grace:g} s; "
                    "Ctrl-C again or SIGTERM stops at once)"), said
    assert out.splitlines() == ["cozmo-sim: stopped"], out


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_cli_a_second_signal_ends_the_stop_grace_at_once(second):
    """With a client that stays, a second Ctrl-C (or a SIGTERM) during --stop-grace was
    ignored: the simulator served on for the whole grace, and its message did not say how to
    stop sooner. Now the message says it, and a second signal ends the grace at once; one that
    comes within moments of the first (the copy of a terminal's Ctrl-C that a launch without
    a terminal forwards) does not."""
    from cozmo_driver.sim.cli import SIGNAL_COPY_S
    proc, port = _started_cli("--stop-grace", "3600")  # ended by a signal, never by the grace
    try:
        with UdpEngine(("127.0.0.1", port)) as engine:
            engine.initialise()
            signalled_ms = engine.last_state_ms()  # the robot's clock, before the signals
            proc.send_signal(signal.SIGINT)
            proc.send_signal(signal.SIGINT)  # the copy
            assert _grace_said(proc) == (
                "cozmo-sim: stopping once the client has disconnected (at most 3600 s; Ctrl-C again "
                "or SIGTERM stops at once)")
            # still the robot SIGNAL_COPY_S and more after the signals, on its own clock
            served_ms = signalled_ms + 1000 * (SIGNAL_COPY_S + 0.5)
            assert engine.wait(lambda: engine.states_after(served_ms), 10.0), \
                "the copy of the first signal ended the grace"
            assert proc.poll() is None, "the copy of the first signal ended the grace"
            proc.send_signal(second)
            out, err = proc.communicate(timeout=20)  # (the client is still there)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    assert out.splitlines() == ["cozmo-sim: stopped"], out


@pytest.mark.parametrize("output", ["pipe", "terminal"])
def test_cli_whose_output_went_away_serves_its_client_on_and_exits_0(output):
    """`cozmo-sim ... | head -2` died at the next status line (BrokenPipeError, exit 1), and
    one whose terminal closed (SIGHUP; its terminal then fails every write with EIO) died on
    the grace's notice, within moments, its client's stop and goodbye unanswered. Its output
    gone, it serves on: through the grace, until the client says goodbye; exit 0, nothing
    said on stderr. (Loopback; an hour's grace, so it ends with the goodbye only.)"""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if output == "pipe":  # its status lines fail, then the notice, then "stopped"
        reader, writer = os.pipe()
        sig, quiet = signal.SIGTERM, []
    else:  # the first write after the SIGHUP is the grace's notice
        reader, writer = os.openpty()  # (the terminal's master end, its slave end)
        sig, quiet = signal.SIGHUP, ["--quiet"]  # as the terminal's closing sends it
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cozmo_driver.sim.cli", "--port", "0", "--stop-grace", "3600", *quiet],
            stdin=subprocess.DEVNULL, stdout=writer, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))  # (this test under nohup)
    finally:
        os.close(writer)
    try:
        first = b""
        while not first.endswith(b"\n"):
            assert select.select([reader], [], [], 10.0)[0], f"no first line: {first!r}"
            byte = os.read(reader, 1)
            assert byte, f"cozmo-sim closed its output: {first!r}"
            first += byte
        port = int(first.decode().split("udp://127.0.0.1:")[1].split()[0])
        os.close(reader)  # `head` has its lines; the terminal closed
        reader = None
        with UdpEngine(("127.0.0.1", port)) as engine:
            engine.initialise()
            # (a status line a second went into the void meanwhile, on its own clock)
            since = engine.last_state_ms()
            assert engine.wait(lambda: engine.states_after(since + 1500), 10.0), "it stopped serving"
            signalled_ms = engine.last_state_ms()
            proc.send_signal(sig)
            # the grace's notice went nowhere; still the robot, answering a command, then the goodbye
            assert engine.wait(lambda: len(engine.states_after(signalled_ms)) >= 4, 5.0), \
                "no states after the signal"
            engine.send(m.SetHeadAngle(angle_rad=0.1, action_id=9))
            assert engine.wait(lambda: [a for a in engine.received("AcknowledgeAction") if a.action_id == 9], 5.0), \
                "a command in the grace went unanswered"
            assert proc.poll() is None
            engine.transport.call(lambda: engine.session.disconnect(time.monotonic()))
            assert engine.wait(lambda: any(isinstance(e, Disconnected) for e in engine.events), 5.0), \
                engine.events[-3:]
            _, err = proc.communicate(timeout=10)
    finally:
        if reader is not None:
            os.close(reader)
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert (proc.returncode, err) == (0, "")


def test_cli_stopped_without_a_client_stops_at_once():
    proc, _ = _started_cli()  # the default grace, 2 s
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    # no grace for a client that is not there: no word of it (it says so before waiting)
    assert out.splitlines() == ["cozmo-sim: stopped"], out


def test_cli_stop_grace_refuses_what_is_not_a_time():
    from cozmo_driver.sim.cli import build_parser
    assert build_parser().parse_args(["--stop-grace", "0"]).stop_grace == 0.0
    assert build_parser().parse_args([]).stop_grace == STOP_GRACE_S == 5.0
    for bad in ("-1", "nan", "inf", "soon"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["--stop-grace", bad])


def test_cli_ignores_a_signal_that_comes_while_it_exits():
    # A terminal's Ctrl-C reaches every process of `ros2 launch ... use_sim:=true`, and the
    # launch then forwards a SIGINT of its own: the second one reached a simulator that had
    # already stopped and put Python's handlers back, which killed it (exit -2, which the
    # launch reported as "[ERROR] ... process has died"). Once stopped it ignores them, with
    # SIG_IGN: the interpreter resets a Python handler to the default as it finalizes.
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = ("import os, signal, time\n"
              "from cozmo_driver.sim import cli\n"
              "assert cli.main(['--port', '0', '--duration', '0', '--quiet']) == 0\n"
              "for sig in (signal.SIGINT, signal.SIGTERM):\n"
              "    assert signal.getsignal(sig) is signal.SIG_IGN, (sig, signal.getsignal(sig))\n"
              "    os.kill(os.getpid(), sig)\n"
              "time.sleep(0.2)\n"
              "print('still running')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=20, env=env, cwd=ROOT)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.splitlines()[-2:] == ["cozmo-sim: stopped", "still running"], done.stdout


def test_cli_serves_a_client():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "cozmo_driver.sim.cli", "--port", "0", "--duration", "6"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        first = proc.stdout.readline()
        port = int(first.split("udp://127.0.0.1:")[1].split()[0])
        with UdpEngine(("127.0.0.1", port)) as engine:
            engine.initialise()
            since = engine.last_state_ms()
            assert engine.wait(lambda: len(engine.states_after(since)) >= 25, 10.0), "the states stopped"
            spacing = state_spacing_ms(engine.states_after(since))  # ~33 a second, on its clock
            assert 25.0 <= spacing <= 35.0, f"a state every {spacing} ms"
            engine.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Stream))
            # a second of the camera's stream (15 images), so that a status line counts it
            assert engine.wait(lambda: len({c.image_id for c in engine.received("ImageChunk")}) >= 15, 10.0)
        out, _ = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    status = [ln for ln in out.splitlines() if "client 127.0.0.1" in ln]
    assert status, out
    rates = [float(ln.split("state")[1].split("Hz")[0]) for ln in status]
    cams = [float(ln.split("camera")[1].split("fps")[0]) for ln in status]
    assert max(rates) >= 25.0 and max(cams) >= 10.0


def test_scripting_refuses_values_it_cannot_take_and_changes_nothing(sim):
    """teleport(nan, 0, 0) and put_down(pose=(nan, ...)) made the true pose NaN (and every
    RobotState after it); tap_cube(1, intensity=999) and set_cube_up_axis(1, 99) were taken
    without a word (intensity 255, the most it took, made a tap_pos of 128, which no signed
    byte holds). Each raises ValueError saying what is allowed, as lay("top") and
    tap_cube(5) did, and nothing changes; the extremes allowed reach the client."""
    from cozmo_driver.sim import CUBE_FACTORY_IDS

    nan, inf = float("nan"), float("inf")
    with UdpEngine(sim.address) as engine:
        engine.initialise()
        for slot, factory_id in enumerate(CUBE_FACTORY_IDS):
            engine.send(m.ObjectConnect(factory_id=factory_id, slot=slot))
        assert sim.wait_until(lambda s: None not in [s.object_ids()[n] for n in (1, 2, 3)], 3.0)
        sim.teleport(100.0, 50.0, 0.5)
        for x, y, yaw, bad in ((nan, 0.0, 0.0, "x = nan"), (0.0, inf, 0.0, "y = inf"),
                               (0.0, 0.0, "north", "yaw = 'north'")):
            with pytest.raises(ValueError, match=f"^teleport: {bad} is not a finite number "
                                                 r"\(x and y in mm, yaw in rad\)$"):
                sim.teleport(x, y, yaw)
        sim.pick_up()
        with pytest.raises(ValueError, match=r"^put_down: yaw = nan is not a finite number"):
            sim.put_down(pose=(0.0, 0.0, nan))
        with pytest.raises(ValueError, match=r"^put_down: pose = \(1.0, 2.0\) is not \(x mm, y mm, yaw rad\)$"):
            sim.put_down(pose=(1.0, 2.0))
        assert sim.true_pose() == pytest.approx((100.0, 50.0, 0.5))
        # the refused put-downs did not put it down: it is still found picked up
        assert sim.wait_until(lambda s: s.status() & StatusFlag.IS_PICKED_UP, 2.0)
        sim.put_down(pose=(0.0, 0.0, 0.0))
        for kwargs, said in (({"intensity": 999}, "intensity must be a whole number 0..255, got 999"),
                             ({"intensity": -1}, "intensity must be a whole number 0..255, got -1"),
                             ({"intensity": 79.5}, "intensity must be a whole number 0..255, got 79.5"),
                             ({"taps": 0}, "taps must be a whole number 1..255, got 0")):
            with pytest.raises(ValueError, match=f"^tap_cube: {re.escape(said)}$"):
                sim.tap_cube(1, **kwargs)
        for axis in (99, 6, -1):
            with pytest.raises(ValueError, match=r"^set_cube_up_axis: axis must be an UpAxis: one of 0 "
                               r"\(XNegative\), .*, 5 \(ZPositive\), 7 \(UnknownAxis\); got " + str(axis)):
                sim.set_cube_up_axis(1, axis)
        assert sim.object_states()[1]["up_axis"] == E["UpAxis"].ZPositive
        assert engine.received("ObjectTapped") == [] and engine.received("ObjectUpAxisChanged") == []
        assert sim.tap_cube(1, taps=255, intensity=255)
        assert sim.set_cube_up_axis(1, E["UpAxis"].XPositive)
        assert engine.wait(lambda: engine.received("ObjectTapped") and engine.received("ObjectUpAxisChanged"),
                           2.0)
        tap = engine.received("ObjectTapped")[0]
        assert (tap.num_taps, tap.tap_pos - tap.tap_neg) == (255, 255)
        assert engine.received("ObjectUpAxisChanged")[0].axis == E["UpAxis"].XPositive


def test_ground_truth_readers(sim):
    from cozmo_driver.protocol.audio import encode_ulaw
    from cozmo_driver.protocol.display import encode_display
    from cozmo_driver.sim import CUBE_FACTORY_IDS, decode_camera_calibration

    with UdpEngine(sim.address) as engine:
        engine.initialise()
        engine.send(m.EnableAnimationState())
        bits = np.zeros((32, 128), dtype=bool)
        bits[10:20, 30:90] = True
        tone = (4000 * np.sin(np.arange(744) * 0.2)).astype(np.int16)
        ls = m.STRUCTS["LightState"]
        engine.send(m.OutputAudio(samples=encode_ulaw(tone)))   # a frame: audio, then image
        engine.send(m.DisplayImage(image=encode_display(bits)))
        for _ in range(7):                 # the robot plays once 7 frames wait, up to the last
            engine.send(m.OutputSilence())
        engine.send(m.SetRobotVolume(level=30000))
        engine.send(m.LightStateSide(states=[ls(on_color=0x7C00), ls(on_color=0x001F)]))
        engine.send(m.ObjectConnect(factory_id=CUBE_FACTORY_IDS[2], slot=0))
        engine.send(m.EnableColorImages(enable=True))
        assert sim.wait_until(lambda s: s.display_count() >= 1 and s.audio_frames() >= 1
                              and s.object_ids()[3] is not None, 3.0)
        assert np.array_equal(sim.framebuffer(), bits)
        assert np.abs(sim.audio_pcm()[:744]).max() > 1000 and sim.volume() == 30000
        assert sim.lights()["backpack"]["left"].on_color == 0x7C00
        assert sim.camera_settings()["color"] is True
        calib = decode_camera_calibration(sim.nv_store()[m.ENUMS["NvEntryTag"].NVEntry_CameraCalib])
        assert calib.image_width == 320
        assert sim.tap_cube(3)
        assert engine.wait(lambda: engine.received("ObjectTapped"), 2.0)
        left, right = sim.wheel_speeds()
        assert left == right == 0.0
        assert 3.5 <= sim.battery_voltage() <= 4.25
        assert sim.reported_pose() == pytest.approx((0.0, 0.0, 0.0), abs=1e-6)
        assert sim.peer()[0] == "127.0.0.1"
