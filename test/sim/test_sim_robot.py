"""The simulated robot on the wire, driven by the project's engine session over
an in-memory link with an explicit clock (deterministic). The harness lives in
test/sim_harness.py; test/sim/test_sim_behaviours.py covers the rest of the robot's
behaviour the same way."""

from __future__ import annotations

import json
import math
import re
import struct

import numpy as np
import pytest

from cozmo_driver.protocol import messages as m
from cozmo_driver.protocol.audio import encode_ulaw
from cozmo_driver.protocol.camera import image_to_array
from cozmo_driver.protocol.display import MAX_DISPLAY_BYTES, encode_display
from cozmo_driver.protocol.frames import MAX_FRAME_SIZE, OOB_SEQ, FrameType, decode_frame, encode_frame
from cozmo_driver.protocol.messages import PacketType, encode_packet
from cozmo_driver.protocol.session import (
    Connected,
    ConnectionLost,
    Disconnected,
    PingAnswered,
)
from cozmo_driver.sim import GARBAGE_KINDS, ImpairedEndpoint, RobotConfig, SimulatedRobot, StatusFlag
from cozmo_driver.transport.memory import Impairment
from sim_harness import Harness, collect_images, state_flags

E = m.ENUMS


# --------------------------------------------------------------------------------- connection

def test_connection_sequence_as_the_notes_describe():
    h = Harness()
    assert h.robot.get_timer() is None                 # nothing to do before a client
    h.engine.connect(0.0)
    h.run(0.5)
    names = [x.NAME for x in h.received()]
    assert names == ["HardwareInfo", "FirmwareSignature"]
    sig = json.loads(h.received("FirmwareSignature")[0].signature)
    assert sig["version"] == 2381 and sig["build"] == "DEVELOPMENT"
    assert isinstance(h.robot_events[0], Connected)
    h.send(m.Enable())
    h.send(m.Enable())                                 # pycozmo sends it twice
    h.run(0.5)
    assert [x.NAME for x in h.received()][2:] == ["BodyInfo"]   # no state before SyncTime
    h.send(m.SetOrigin(pose_frame_id=0, pose_origin_id=1))
    h.send(m.SyncTime(timestamp_ms=0))
    h.clear()
    h.run(2.0)
    states = h.received("RobotState")
    assert 64 <= len(states) <= 68                      # ~33 Hz
    assert states[0].pose_origin_id == 1
    assert len({a.factory_id for a in h.received("ObjectAvailable")}) == 4
    assert sum(isinstance(e, PingAnswered) for e in h.events) >= 3


def test_idle_connection_wakes_only_for_the_streams():
    h = Harness()
    h.initialise()
    h.run(0.5)
    wakeups = []
    original = h.robot.handle_timer

    def counting(now):
        wakeups.append(now)
        original(now)

    h.robot.handle_timer = counting
    h.run(1.0)
    # 33 states, 4 object adverts, acks of 2 pings: no busy loop, no 100 Hz physics
    assert 33 <= len(wakeups) <= 45
    assert len(set(wakeups)) == len(wakeups)


def test_client_silence_drops_the_client_after_5_s_and_a_new_one_is_accepted():
    h = Harness()
    h.initialise()
    h.send(m.SetHeadLight(enable=False))                # the client's last datagram, now
    h.link.a_to_b.loss = 1.0                            # the client falls silent
    t0 = h.now
    assert h.run_until(lambda: any(isinstance(e, ConnectionLost) for e in h.robot_events), 8.0)
    assert 4.9 <= h.now - t0 <= 5.1
    assert not h.robot.is_connected and not h.robot.model.streaming
    h.link.a_to_b.loss = 0.0
    h.clear()
    h.robot_events.clear()
    h.initialise()
    assert isinstance(h.robot_events[0], Connected)
    assert [x.NAME for x in h.received()][:3] == ["HardwareInfo", "FirmwareSignature", "BodyInfo"]


def test_disconnect_and_reconnect():
    h = Harness()
    h.initialise()
    h.engine.disconnect(h.now)
    assert h.run_until(lambda: any(isinstance(e, Disconnected) for e in h.robot_events), 2.0)
    assert not h.robot.model.streaming
    h.clear()
    h.initialise()
    assert h.robot.stats.clients_accepted == 2



def run_in_steps(robot, clock, duration, seen, after_step=None):
    """Run ``robot`` on the clock ``clock[0]`` for ``duration`` s in 10 ms steps: its timer,
    then each frame it sends to ``seen(frame)``, then ``after_step()`` if given."""
    end = clock[0] + duration
    while clock[0] < end:
        clock[0] = round(clock[0] + 0.01, 6)
        timer = robot.get_timer()
        if timer is not None and timer <= clock[0]:
            robot.handle_timer(clock[0])
        for datagram in robot.datagrams_to_send(clock[0]):
            seen(decode_frame(datagram))
        if after_step is not None:
            after_step()


def test_acknowledgements_are_cumulative_a_packet_acked_ahead_is_never_sent_again():
    """As the real robot (PROTOCOL_NOTES a, m.1): an ack takes everything up to it out of
    the send window for good. A client that acks packet 6, then keeps acking 4 (it never
    had 5 and 6: the reference client's ack runs ahead over a gap), gets 5 and 6 never
    again and stalls; the driver's session sends such packets again, and so did the
    simulator, which let a driver that acks ahead pass every lossy test."""
    robot = SimulatedRobot()
    clock = [0.0]
    seqs: list = []   # the robot's reliable packets on the wire, by number

    def seen(frame):
        if frame.first_seq != OOB_SEQ:
            seqs.extend(range(frame.first_seq, frame.seq + 1))

    def run(duration):
        run_in_steps(robot, clock, duration, seen)

    def ack(seq):
        robot.receive_datagram(encode_frame(FrameType.ENGINE, OOB_SEQ, OOB_SEQ, seq), clock[0])

    robot.receive_datagram(bytes.fromhex("434f5a0352450101" "0100" "0100" "0000"), 0.0)   # RESET
    run(0.1)
    for _ in range(8):
        robot.poke(clock[0])
        run(0.02)
    assert max(seqs) == 10     # Connect, HardwareInfo, FirmwareSignature, 8 RobotPoked
    ack(6)
    seqs.clear()
    for _ in range(40):
        ack(4)
        run(0.05)
    assert seqs and min(seqs) == 7     # 7..10 are sent again, never 5 or 6
    assert robot.session.stats.ack_regressions == 0 and robot.session.stats.seq_resyncs == 0
    assert robot.is_connected


def test_a_client_that_stops_acknowledging_is_dropped_when_the_robots_queue_fills():
    """Anki's firmware holds 32 reliable messages for the client's acknowledgement; one more
    that it cannot queue makes it end the link with Disconnect. A client that still pings
    but acknowledges nothing loses the link at the 33rd, not after a stall of seconds; one
    that acknowledges keeps it however many the robot sends."""
    def drive(acks):
        robot = SimulatedRobot()
        clock = [0.0]
        packets: dict = {}   # the robot's reliable packets on the wire, by number: (type, id)
        last = [OOB_SEQ]

        def seen(frame):
            if frame.first_seq != OOB_SEQ:
                last[0] = frame.seq
                reliable = [p for p in frame.packets if not p.oob]
                packets.update((frame.first_seq + i, (p.packet_type, p.ident))
                               for i, p in enumerate(reliable))

        def answer():
            ack = last[0] if acks else OOB_SEQ   # a keep-alive either way
            robot.receive_datagram(encode_frame(FrameType.ENGINE, OOB_SEQ, OOB_SEQ, ack), clock[0])

        def run(duration):
            run_in_steps(robot, clock, duration, seen, answer)

        robot.receive_datagram(bytes.fromhex("434f5a0352450101" "0100" "0100" "0000"), 0.0)   # RESET
        run(0.1)
        for _ in range(40):
            robot.poke(clock[0])
            run(0.02)
        return robot, packets

    robot, packets = drive(acks=False)
    assert not robot.is_connected and robot.stats.queue_full_closes == 1
    assert robot.stats.clients_lost == 1
    # Connect, HardwareInfo, FirmwareSignature and 29 RobotPoked, then the Disconnect
    kinds = [packets[seq][0] for seq in sorted(packets)]
    assert kinds == [PacketType.CONNECT] + [PacketType.COMMAND] * 31 + [PacketType.DISCONNECT]
    robot, packets = drive(acks=True)
    assert robot.is_connected and robot.stats.queue_full_closes == 0
    assert robot.stats.sent["RobotPoked"] == 40
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="send_queue"):
            RobotConfig(send_queue=bad)


# --------------------------------------------------------------------------------- commands

def test_drive_and_head_change_the_true_pose_and_the_reports():
    h = Harness()
    h.initialise()
    h.send(m.DriveWheels(lwheel_speed_mmps=100, rwheel_speed_mmps=100))
    h.send(m.SetHeadAngle(angle_rad=0.4, action_id=7))
    h.run(1.0)
    h.send(m.StopAllMotors())
    h.run(0.3)
    x, y, yaw = h.robot.model.true_pose()
    assert 95.0 < x < 110.0 and y == 0.0
    assert h.robot.model.head_angle == pytest.approx(0.4, abs=1e-6)
    state = h.received("RobotState")[-1]
    assert state.pose_x_mm == pytest.approx(x, abs=1e-3) and state.head_angle_rad == pytest.approx(0.4)
    assert [a.action_id for a in h.received("AcknowledgeAction")] == [7]


def test_reliable_traffic_survives_20_percent_loss_both_ways():
    lossy = Impairment(loss=0.2, duplicate=0.05, reorder=0.1)
    h = Harness(seed=11, a_to_b=lossy, b_to_a=Impairment(loss=0.2, duplicate=0.05, reorder=0.1))
    h.initialise(timeout=10.0)
    for k in range(1, 61):
        h.send(m.SetHeadAngle(angle_rad=-0.3 + 0.01 * k, action_id=k))
        h.run(0.02)
    assert h.run_until(lambda: len(h.received("AcknowledgeAction")) >= 60, 15.0)
    assert [a.action_id for a in h.received("AcknowledgeAction")] == list(range(1, 61))
    h.run(1.0)
    assert h.robot.model.head_angle == pytest.approx(0.3, abs=1e-6)
    h.clear()
    h.run(2.0)
    assert len(h.received("RobotState")) >= 40              # 80 % of ~66
    assert h.engine.is_connected and h.robot.is_connected
    assert h.link.dropped > 50


def test_impaired_endpoint_wrapper():
    wrap = lambda r: ImpairedEndpoint(r, up=Impairment(loss=0.2, delay=0.02),  # noqa: E731
                                      down=Impairment(loss=0.2, duplicate=0.1, delay=0.03), seed=4)
    h = Harness(seed=2, wrap=wrap)
    h.initialise(timeout=10.0)
    for k in range(1, 31):
        h.send(m.SetLiftHeight(height_mm=40 + k, action_id=k))
    assert h.run_until(lambda: len(h.received("AcknowledgeAction")) >= 30, 15.0)
    assert [a.action_id for a in h.received("AcknowledgeAction")] == list(range(1, 31))
    h.run(1.0)
    ep = h.endpoint
    assert ep.dropped_up > 0 and ep.dropped_down > 0 and ep.duplicated > 0
    rtts = [e.rtt_s for e in h.events if isinstance(e, PingAnswered)]
    assert min(rtts) == pytest.approx(0.05, abs=0.002)       # 20 ms up + 30 ms down


def test_scripted_events_reach_the_engine():
    h = Harness()
    h.initialise()
    h.clear()
    h.robot.pick_up(h.now)
    h.run(0.15)
    assert state_flags(h) & StatusFlag.IS_PICKED_UP
    h.robot.put_down(h.now)
    h.robot.press_button(h.now)
    h.robot.poke(h.now)
    h.robot.fall(h.now, duration=0.3)
    h.robot.delocalize(h.now)
    h.robot.set_on_charger(True, h.now)
    h.run(0.5)
    names = [x.NAME for x in h.received() if x.NAME not in ("RobotState", "ObjectAvailable")]
    assert names == ["ButtonPressed", "RobotPoked", "FallingStarted", "RobotDelocalized", "ButtonPressed",
                     "FallingStopped"]
    assert state_flags(h) & StatusFlag.IS_ON_CHARGER
    for slot, fid in enumerate(a.factory_id for a in h.received("ObjectAvailable")[:3]):
        h.send(m.ObjectConnect(factory_id=fid, slot=slot))
    h.run(0.2)
    ids = [s.object_id for s in h.received("ObjectConnectionState")]
    assert len(ids) == 3
    assert h.robot.tap_cube(1, h.now, taps=3)
    h.run(0.2)
    tapped = h.received("ObjectTapped")
    assert len(tapped) == 1 and tapped[0].num_taps == 3


def test_display_and_audio_at_30_fps():
    h = Harness()
    h.initialise()
    h.send(m.EnableAnimationState())
    bits = np.zeros((32, 128), dtype=bool)
    tone = (6000 * np.sin(np.arange(744) * 0.3)).astype(np.int16)
    for k in range(60):
        bits[:, k % 128] = True
        h.send(m.OutputAudio(samples=encode_ulaw(tone)))
        h.send(m.DisplayImage(image=encode_display(bits)))
        h.run(1.0 / 30.0)
    h.send(m.OutputSilence())  # the robot plays a frame once the next one is there
    h.run(0.3)                 # and starts once 7 frames wait
    model = h.robot.model
    assert np.array_equal(model.framebuffer, bits)
    assert model.display_images_shown == 60 and model.audio_frames_played == 60
    assert len(model.audio_pcm()) == 60 * 744
    anim = h.received("AnimationState")
    assert anim[-1].num_audio_frames_played == 60
    assert not any(s.status & StatusFlag.IS_ANIM_BUFFER_FULL for s in h.received("RobotState"))


def _engine_frame(pings: int, acks: int) -> bytes:
    """An ENGINE frame of out-of-band packets only: ``pings`` Pings (20 B each) and
    ``acks`` explicit acknowledgements (3 B each)."""
    payload = encode_packet(m.Ping(counter=7)) * pings + struct.pack("<BH", PacketType.KEYFRAME, 0) * acks
    return encode_frame(FrameType.ENGINE, OOB_SEQ, OOB_SEQ, OOB_SEQ, payload)


def test_a_frame_beyond_the_robots_limit_is_dropped_unacknowledged():
    """The robot drops a frame with more than 1037 B of payload (PROTOCOL_NOTES; pycozmo's
    client sends an oversized DisplayImage anyway, and it goes unanswered for good); the
    simulator took any size. Now it drops them too, counted; 1051 B (1037 of payload) is
    still taken."""
    h = Harness()
    h.initialise()
    largest, too_large = _engine_frame(49, 19), _engine_frame(48, 26)
    assert (len(largest), len(too_large)) == (MAX_FRAME_SIZE, MAX_FRAME_SIZE + 1) == (1051, 1052)
    session = h.robot.session.stats
    before = (session.datagrams_received, session.oob_packets_received, h.robot.stats.datagrams_in)
    h.robot.receive_datagram(too_large, h.now)
    assert (session.datagrams_received, session.oob_packets_received, h.robot.stats.datagrams_in) == before
    assert h.robot.stats.dropped_oversized_in == 1
    h.robot.receive_datagram(largest, h.now)
    assert session.datagrams_received == before[0] + 1
    assert session.oob_packets_received == before[1] + 49 + 19
    assert h.robot.stats.dropped_oversized_in == 1
    assert h.engine.is_connected


def test_the_engines_own_traffic_stays_within_the_robots_frame_limit():
    """What the driver's session sends at its busiest (the largest display images, audio and
    a burst of commands in one flush) is packed into frames the robot takes: none dropped."""
    h = Harness(seed=5)
    h.initialise()
    delivered = h.robot.session.stats.reliable_packets_delivered
    h.send(m.EnableAnimationState())
    rng = np.random.default_rng(5)
    sizes = []
    for _ in range(30):
        bits = rng.random((32, 128)) < 0.5
        image = encode_display(bits)
        blank = 0
        while len(image) > MAX_DISPLAY_BYTES:          # as large as the driver sends
            blank += 1
            bits[:, :blank] = False
            image = encode_display(bits)
        sizes.append(len(image))
        for _ in range(40):
            h.engine.send(m.DriveWheels(lwheel_speed_mmps=10.0, rwheel_speed_mmps=10.0))
        h.engine.send(m.OutputAudio(samples=encode_ulaw(np.zeros(744, dtype=np.int16))))
        h.engine.send(m.DisplayImage(image=image))
        h.link.flush()
        h.run(1.0 / 30.0)
    h.send(m.OutputSilence())  # the robot plays a frame once the next one is there
    h.run(0.5)
    assert max(sizes) > MAX_DISPLAY_BYTES - 60
    assert h.robot.stats.dropped_oversized_in == 0
    assert h.robot.session.stats.reliable_packets_delivered - delivered == 1 + 30 * 42 + 1
    assert h.robot.model.display_images_shown == 30


# --------------------------------------------------------------------------------- camera

def test_camera_streams_grey_qvga_at_15_fps_from_the_true_pose():
    h = Harness(seed=3)
    h.initialise()
    h.send(m.SetHeadAngle(angle_rad=0.0))
    h.run(0.5)
    h.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Stream,
                          image_resolution=E["ImageResolution"].QVGA))
    h.clear()
    h.run(2.0)
    images = collect_images(h)
    assert 29 <= len(images) <= 31
    first = images[0]
    assert first.encoding == E["ImageEncoding"].JPEGMinimizedGray
    assert first.resolution == E["ImageResolution"].QVGA
    chunks = [c for c in h.received("ImageChunk") if c.image_id == first.image_id]
    # as the robot's firmware: the count and the capture time in the last chunk only
    assert [c.chunk_id for c in chunks] == list(range(chunks[-1].image_chunk_count))
    assert len(chunks) > 1 and all(c.image_chunk_count == 0 and c.frame_timestamp_ms == 0
                                   for c in chunks[:-1])
    assert chunks[-1].frame_timestamp_ms == first.frame_timestamp_ms > 0
    assert all(len(c.data) <= 1000 for c in chunks)
    imu = h.received("ImageImuData")
    assert {i.image_id for i in imu} >= {img.image_id for img in images}
    # payloads are padded with 0xFF up to a multiple of 4 bytes (receivers drop it; what
    # the padding is: test_codec_camera's test_padding_is_ignored; a still scene gives
    # images of one size, which may need none)
    assert all(len(img.data) % 4 == 0 for img in images)
    pixels = image_to_array(images[-1])
    assert pixels.shape == (240, 320)
    x, y, yaw = h.robot.model.true_pose()
    truth = h.robot.world.render(x, y, yaw, 0.0, color=False, noise=False,
                                 lift_height_mm=h.robot.model.lift_height)
    assert np.abs(pixels.astype(int) - truth.astype(int)).mean() < 6.0
    stamps = [img.frame_timestamp_ms for img in images]
    assert all(60 <= b - a <= 72 for a, b in zip(stamps, stamps[1:]))


def test_the_rooms_light_scales_the_images_as_gain_does():
    h = Harness(seed=4)
    h.initialise()
    h.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Stream))
    h.run(0.5)
    lit = image_to_array(collect_images(h)[-1]).mean()
    h.robot.set_light(0.25, h.now)
    h.clear()
    h.run(0.5)
    dim = image_to_array(collect_images(h)[-1]).mean()
    assert dim == pytest.approx(lit * 0.25, rel=0.15)
    h.send(m.SetCameraParams(gain=2.0, exposure_ms=66, auto_exposure_enabled=False))
    h.clear()
    h.run(0.5)
    assert image_to_array(collect_images(h)[-1]).mean() == pytest.approx(dim * 4, rel=0.15)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="positive number"):
            h.robot.set_light(bad, h.now)


def test_camera_colour_gain_and_single_shot():
    h = Harness(seed=4)
    h.initialise()
    h.send(m.EnableColorImages(enable=True))
    h.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Stream))
    h.run(0.5)
    colour = collect_images(h)
    # tagged encoding 8 like grey frames (the reference client expects that); the flag says colour
    assert colour and colour[-1].encoding == E["ImageEncoding"].JPEGMinimizedGray
    assert colour[-1].data[0] != 0
    rgb = image_to_array(colour[-1])
    assert rgb.shape == (240, 320, 3)
    dark_mean = rgb.mean()
    h.send(m.SetCameraParams(gain=2.0, exposure_ms=33, auto_exposure_enabled=False))
    h.clear()
    h.run(0.5)
    bright = image_to_array(collect_images(h)[-1])
    assert bright.mean() > dark_mean * 1.3
    # the third field asks for the defaults (Anki's firmware): nothing is applied
    h.send(m.SetCameraParams(gain=0.2, exposure_ms=2, auto_exposure_enabled=True))
    h.clear()
    h.run(0.5)
    assert image_to_array(collect_images(h)[-1]).mean() == pytest.approx(bright.mean(), rel=0.05)
    h.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].SingleShot))
    h.run(0.1)
    h.clear()
    h.run(1.0)
    assert collect_images(h) == []                      # one shot, then off
    h.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].SingleShot))
    h.run(1.0)
    assert len(collect_images(h)) == 1


def test_camera_follows_the_head():
    h = Harness(seed=5)
    h.initialise()
    h.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Stream))
    h.send(m.SetHeadAngle(angle_rad=math.radians(-25)))
    h.run(1.0)
    down = image_to_array(collect_images(h)[-1]).astype(int)
    h.send(m.SetHeadAngle(angle_rad=math.radians(44)))
    h.clear()
    h.run(1.0)
    up = image_to_array(collect_images(h)[-1]).astype(int)
    assert np.abs(up - down).mean() > 15


# --------------------------------------------------------------------------------- faults

def test_silent_robot_is_lost_and_found_again():
    h = Harness()
    h.initialise()
    h.robot.set_silent(True, h.now)
    assert h.run_until(lambda: any(isinstance(e, ConnectionLost) for e in h.events), 5.0)
    assert h.robot.stats.dropped_silent_out > 0
    h.robot.set_silent(False, h.now)
    h.clear()
    h.initialise()
    assert h.engine.is_connected


def test_link_down_and_up():
    h = Harness()
    h.initialise()
    h.robot.set_link_up(False, h.now)
    h.run(1.0)
    assert h.robot.stats.dropped_link_down_in > 0 and h.robot.stats.dropped_link_down_out > 0
    h.clear()
    h.robot.set_link_up(True, h.now)
    h.run(1.0)
    assert len(h.received("RobotState")) > 25           # the session survived a short outage
    assert h.engine.is_connected


def test_reboot_needs_a_new_reset():
    h = Harness()
    h.initialise()
    h.send(m.DriveWheels(lwheel_speed_mmps=50, rwheel_speed_mmps=50))
    h.run(0.5)
    h.robot.reboot(h.now)
    assert not h.robot.is_connected and not h.robot.model.is_moving
    h.send(m.SetHeadAngle(angle_rad=0.2, action_id=1))   # the robot no longer knows this link
    assert h.run_until(lambda: any(isinstance(e, ConnectionLost) for e in h.events), 6.0)
    assert h.robot.session.stats.unexpected_frames > 0
    h.clear()
    h.initialise()
    assert h.robot.stats.reboots == 1
    assert h.received("RobotState")[-1].pose_x_mm == pytest.approx(0.0, abs=1e-6)   # odometry restarted


def test_garbage_is_counted_by_the_engine_and_harmless():
    h = Harness()
    h.initialise()
    before = h.engine.stats.malformed_datagrams
    made = h.robot.send_garbage(h.now, count=len(GARBAGE_KINDS))
    assert len(made) == len(GARBAGE_KINDS)
    h.run(0.2)
    # every kind is rejected or harmless; the link and the streams go on
    assert h.engine.stats.malformed_datagrams - before >= 4
    assert h.engine.stats.unknown_messages >= 1
    h.send(m.SetHeadAngle(angle_rad=0.1, action_id=5))
    h.clear()
    h.run(0.5)
    assert [a.action_id for a in h.received("AcknowledgeAction")] == [5]
    assert h.engine.is_connected
    with pytest.raises(ValueError):
        h.robot.send_garbage(h.now, kind="nonsense")


@pytest.mark.parametrize("encoding", ["JPEGMinimizedGray", "JPEGMinimizedColor"])
def test_forced_colour_camera(encoding):
    h = Harness(config=RobotConfig(seed=1, camera_color=True,
                                   color_image_encoding=int(E["ImageEncoding"][encoding])))
    h.initialise()
    h.send(m.EnableCamera(image_send_mode=E["ImageSendMode"].Stream))
    h.run(0.4)
    images = collect_images(h)
    assert images and all(i.encoding == E["ImageEncoding"][encoding] and i.data[0] != 0 for i in images)
    assert image_to_array(images[-1]).shape == (240, 320, 3)
    with pytest.raises(ValueError):
        RobotConfig(color_image_encoding=5)


def test_scripting_refuses_a_time_or_number_it_cannot_take_and_changes_nothing():
    """press_button(duration=nan) and fall(duration=nan) were taken without a word: their
    NaN timer sat first in the timer heap for ever, never due, and held back every later
    timer; RobotState fell from 33 a second to 1 (the NaN handed on as the next tick).
    tap_cube(1.0) raised TypeError (list indices must be integers). Each now raises
    ValueError naming the value and what it takes, before anything changes; and no path
    can set a timer at a time that is not finite without an error."""
    nan, inf = float("nan"), float("inf")
    h = Harness()
    h.initialise()
    for slot, fid in enumerate(a.factory_id for a in h.received("ObjectAvailable")[:3]):
        h.send(m.ObjectConnect(factory_id=fid, slot=slot))
    assert h.run_until(lambda: len(h.received("ObjectConnectionState")) == 3, 1.0)
    h.clear()
    for call, said in (
            (lambda: h.robot.press_button(h.now, duration=nan), "press_button: duration must be a finite "
                                                               "number >= 0 (s), got nan"),
            (lambda: h.robot.press_button(h.now, duration=-0.2), "press_button: duration must be a finite "
                                                                "number >= 0 (s), got -0.2"),
            (lambda: h.robot.fall(h.now, duration=nan), "fall: duration must be a finite number >= 0 (s), got nan"),
            (lambda: h.robot.fall(h.now, duration=inf), "fall: duration must be a finite number >= 0 (s), got inf"),
            (lambda: h.robot.fall(h.now, impact=nan), "fall: impact must be a finite number >= 0, got nan"),
            (lambda: h.robot.fall(h.now, impact=-600.0), "fall: impact must be a finite number >= 0, got -600.0"),
            (lambda: h.robot.fall(h.now, duration="soon"), "fall: duration must be a finite number >= 0 (s), "
                                                          "got 'soon'"),
            (lambda: h.robot.reboot(h.now, downtime=nan), "reboot: downtime must be a finite number >= 0 (s), "
                                                         "got nan"),
            (lambda: h.robot.reboot(h.now, downtime=-1.0), "reboot: downtime must be a finite number >= 0 (s), "
                                                          "got -1.0"),
            (lambda: h.robot.send_garbage(h.now, count=1.5), "send_garbage: count must be a whole number >= 0, "
                                                            "got 1.5"),
            (lambda: h.robot.set_light(None, h.now), "the room's light must be a positive number, not None"),
            (lambda: h.robot.set_light("bright", h.now), "the room's light must be a positive number, not bright"),
            (lambda: h.robot.tap_cube(1.0, h.now), "cube number must be 1..3, got 1.0"),
            (lambda: h.robot.move_cube(2.0, h.now), "cube number must be 1..3, got 2.0"),
            (lambda: h.robot.set_cube_battery(True, 150, h.now), "cube number must be 1..3, got True"),
            (lambda: h.robot.set_object_in_range(1.0, False, h.now), "object number must be 0 (charger) or "
                                                                    "1..3, got 1.0")):
        with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
            call()
    # nothing changed: no event, no timer that never comes due, no reboot, the cubes in range,
    # the states at 33 a second
    assert all(math.isfinite(when) for when, *_ in h.model.fw.timers)
    assert h.robot.stats.reboots == 0 and h.robot.stats.garbage_sent == 0 and h.robot.light == 1.0
    assert all(state["in_range"] for state in h.model.object_states().values())
    h.run(1.0)
    scripted = ("ButtonPressed", "FallingStarted", "FallingStopped", "ObjectTapped", "ObjectMoved",
                "ObjectConnectionState")
    assert [x.NAME for x in h.received() if x.NAME in scripted] == []
    assert len(h.received("RobotState")) >= 30
    # what it takes still works, and a press's release comes on time
    h.robot.press_button(h.now, duration=0.0)
    h.robot.tap_cube(1, h.now)
    h.run(0.1)
    assert [x.NAME for x in h.received() if x.NAME in ("ButtonPressed", "ObjectTapped")] == [
        "ButtonPressed", "ButtonPressed", "ObjectTapped"]
    # a timer at a time that is not finite is refused, loudly, whoever sets it
    for when in (nan, inf):
        with pytest.raises(ValueError, match=r"^a timer at (nan|inf) s would never run, and no timer after it"):
            h.model.fw.at(when, lambda t: None)
    assert all(math.isfinite(when) for when, *_ in h.model.fw.timers)
