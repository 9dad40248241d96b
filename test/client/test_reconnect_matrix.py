"""Reconnection in every case, as a fault matrix (issue #17), in memory with injected time.

The driver's client core (:class:`RobotLink`, the ROS driver's own configuration:
peer_timeout 3 s, back-off 0.5..5 s) talks to the simulated robot
(:class:`SimulatedRobot`) over a :class:`MemoryLink`. Both ends sit behind the UDP
adapter's peer filter (:class:`PeerFilter`, "fixed" for the driver, "reset" for the
robot) with made-up loopback addresses, so that a robot answering from a new source
port, or a RESET from a stranger, is decided by the code the UDP adapter runs.

Faults: the robot down for 1, 2, 5, 10, 30 or 120 s (the network cut with the robot
keeping its session; the robot rebooted, its body kept; a fresh robot object), the
link cut at each handshake step, the robot answering from a new source port, forged
or stray RESET, RESET_ACK and FIN on a connected link. For each: the link reports
LOST or reconnects as it should, READY and fresh RobotStates come within 2 s of the
robot answering again, no command from before the reconnect reaches the robot, and
the driver's RESETs keep coming at least every ``reconnect_max`` (plus the RESET
period) while the robot is away.
"""

from __future__ import annotations

import pytest

from cozmo_driver.client.link import ClientConfig, LinkState, LinkStateChanged, RobotLink
from cozmo_driver.protocol import messages as msgs
from cozmo_driver.protocol.errors import RemoteProtocolError
from cozmo_driver.protocol.frames import OOB_SEQ, FrameType, decode_frame, encode_frame
from cozmo_driver.protocol.messages import PacketType, decode_message
from cozmo_driver.protocol.session import RESET_CONFIRM_S, Connected, Disconnected, MessageReceived, SessionConfig
from cozmo_driver.sim import RobotConfig, SimulatedRobot
from cozmo_driver.transport.memory import MemoryLink
from cozmo_driver.transport.udp import PeerFilter

ROBOT_ADDR = ("127.0.0.5", 5551)
NEW_PORT_ADDR = ("127.0.0.5", 40001)
CLIENT_ADDR = ("127.0.0.1", 50000)
STRANGER_ADDR = ("127.0.0.1", 50999)

#: what the driver uses (config/cozmo.yaml peer_timeout; ClientConfig's back-off)
CLIENT_CONFIG = dict(reconnect_min=0.5, reconnect_max=5.0, ready_timeout=5.0)
#: the bound of the issue: RobotState again within this long of the robot answering
RECOVERY_S = 2.0

RESET = encode_frame(FrameType.RESET, 0, 0, OOB_SEQ)
RESET_ACK = encode_frame(FrameType.RESET_ACK, OOB_SEQ, OOB_SEQ, OOB_SEQ)
FIN = encode_frame(FrameType.FIN, OOB_SEQ, OOB_SEQ, OOB_SEQ)
#: a command the robot must never see after a reconnect (a stale one)
STALE = msgs.DriveWheels(lwheel_speed_mmps=123.0, rwheel_speed_mmps=123.0,
                         lwheel_accel_mmps2=0.0, rwheel_accel_mmps2=0.0)


def message_names(datagram: bytes) -> list:
    """The names of the messages in a datagram (Connect for the greeting)."""
    try:
        frame = decode_frame(datagram)
    except RemoteProtocolError:
        return []
    names = []
    for packet in frame.packets:
        if packet.packet_type == PacketType.CONNECT:
            names.append("Connect")
        elif packet.packet_type in (PacketType.COMMAND, PacketType.EVENT):
            try:
                names.append(decode_message(packet.packet_type, packet.ident, packet.body).NAME)
            except RemoteProtocolError:
                names.append("?")
    return names


class ClientEnd:
    """The driver behind its UDP peer filter: what reaches it from where, where it sends."""

    def __init__(self, link: RobotLink) -> None:
        self.link = link
        self.peers = PeerFilter("fixed", ROBOT_ADDR)
        self.robot: "RobotEnd" = None  # type: ignore[assignment]
        self.wrong_source = 0

    def receive_datagram(self, data, now):
        src = self.robot.source_of_next
        if src != self.peers.source and not self.peers.accept(src, data, self.link.awaiting_connect):
            self.wrong_source += 1
            return
        self.link.receive_datagram(data, now)

    def datagrams_to_send(self, now):
        out = self.link.datagrams_to_send(now)
        dest = self.peers.destination(self.link.awaiting_connect)
        self.robot.inbox.extend((dest, CLIENT_ADDR) for _ in out)
        return out

    def get_timer(self):
        return self.link.get_timer()

    def handle_timer(self, now):
        self.link.handle_timer(now)

    def next_event(self):
        return self.link.next_event()


class RobotEnd:
    """The robot behind the robot's peer filter, on a network that can be cut, with a
    robot object that can be swapped (a fresh robot) and a source port that can change.

    It listens on ROBOT_ADDR and (once moved) NEW_PORT_ADDR, like a relay would.
    ``cut_after``: (message name, deliver it or not): the network is cut when the robot
    sends that message (the handshake faults)."""

    def __init__(self, robot: SimulatedRobot) -> None:
        self.robot = robot
        self.peers = PeerFilter("reset")
        self.network_up = True
        self.source = ROBOT_ADDR          # where the robot's datagrams come from
        self.listen = {ROBOT_ADDR}
        self.inbox: list = []              # (destination, source) of the client's datagrams in flight
        self.cut_after = None
        self.cut_at = None
        self.sent_log: list = []           # (time, names) of every datagram that reached the client

    @property
    def source_of_next(self):
        return self.source

    def inject(self, data: bytes, now: float, source) -> None:
        """A datagram from anyone (a forger, a stray copy) arriving at the robot."""
        if self.network_up and (source == self.peers.source or self._accept(source, data)):
            self.robot.receive_datagram(data, now)

    def _accept(self, source, data: bytes) -> bool:
        """The UDP adapter's decision (it asks the robot whether it holds a link)."""
        return self.peers.accept(source, data, holds_link=self.robot.holds_link)

    def receive_datagram(self, data, now):
        dest, src = self.inbox.pop(0) if self.inbox else (ROBOT_ADDR, CLIENT_ADDR)
        if not self.network_up or dest not in self.listen:
            return
        if src != self.peers.source and not self._accept(src, data):
            return
        self.robot.receive_datagram(data, now)

    def datagrams_to_send(self, now):
        out = self.robot.datagrams_to_send(now)
        if not self.network_up or self.peers.source != CLIENT_ADDR:
            return []
        if self.cut_after is not None:
            name, deliver = self.cut_after
            for k, data in enumerate(out):
                if name in message_names(data):
                    out = out[:k + 1] if deliver else out[:k]
                    self.network_up = False
                    self.cut_after = None
                    self.cut_at = now
                    break
        self.sent_log.extend((now, message_names(d)) for d in out)
        return out

    def get_timer(self):
        return self.robot.get_timer()

    def handle_timer(self, now):
        self.robot.handle_timer(now)

    def next_event(self):
        return self.robot.next_event()


class Bench:
    def __init__(self, seed: int = 3, link_policy: str = "firmware") -> None:
        self.seed = seed
        self.link_policy = link_policy
        self.client = RobotLink(ClientConfig(session=SessionConfig(peer_timeout=3.0), **CLIENT_CONFIG))
        self.client_end = ClientEnd(self.client)
        self.robot_end = RobotEnd(self.new_robot(0.0))
        self.client_end.robot = self.robot_end
        self.link = MemoryLink(self.client_end, self.robot_end, seed=seed)
        self.link.trace = []
        self.events: list = []       # (time, event) of the client
        self.robot_events: list = []  # (time, event) of the robot
        self.link.on_event_a = lambda e: self.events.append((self.link.now, e))
        self.link.on_event_b = lambda e: self.robot_events.append((self.link.now, e))

    def new_robot(self, now: float) -> SimulatedRobot:
        return SimulatedRobot(config=RobotConfig(seed=self.seed, camera_noise=False,
                                                 link_policy=self.link_policy), now=now)

    @property
    def now(self) -> float:
        return self.link.now

    @property
    def robot(self) -> SimulatedRobot:
        return self.robot_end.robot

    def run(self, duration: float) -> None:
        self.link.run_until(self.now + duration)

    def start(self) -> None:
        self.client.start(self.now)
        assert self.link.run_while(lambda: self.client.state is not LinkState.READY, 3.0)
        self.run(0.5)

    # ---- observations

    def states_after(self, t: float) -> list:
        """(time, RobotState) delivered to the client's user after ``t``."""
        return [(when, e.message) for when, e in self.events
                if when >= t and isinstance(e, MessageReceived) and e.message.NAME == "RobotState"]

    def link_states(self, after: float = -1.0) -> list:
        return [(when, e.state, e.reason) for when, e in self.events
                if when >= after and isinstance(e, LinkStateChanged)]

    def robot_got(self, after: float, name: str) -> list:
        return [e.message for when, e in self.robot_events
                if when >= after and isinstance(e, MessageReceived) and e.message.NAME == name]

    def resets_sent(self, after: float) -> list:
        return [when for when, way, data in self.link.trace
                if when >= after and way == "a->b" and len(data) > 7 and data[7] == FrameType.RESET]

    def first_answer(self, after: float, connect: bool = False) -> float:
        """When the robot's first datagram (a Connect greeting if ``connect``) reached the
        client after ``after``."""
        for when, names in self.robot_end.sent_log:
            if when >= after and (not connect or "Connect" in names):
                return when
        raise AssertionError(f"the robot never answered after {after:.2f} s")

    def recover(self, answered_from: float, connect: bool = False, limit: float = 140.0) -> dict:
        """Run until fresh RobotStates stream after the robot answers; check the bounds."""
        t_from = answered_from
        self.link.run_while(lambda: not (self.client.state is LinkState.READY
                                         and len(self.states_after(t_from)) >= 3
                                         and self._answered(t_from, connect)), limit)
        answered = self.first_answer(t_from, connect)
        fresh = [(when, s) for when, s in self.states_after(answered)]
        assert len(fresh) >= 3, f"no RobotState after the robot answered at {answered:.2f} s"
        assert self.client.state is LinkState.READY
        first = fresh[0][0]
        assert first - answered <= RECOVERY_S, (
            f"RobotState came {first - answered:.2f} s after the robot answered (limit {RECOVERY_S} s)")
        # fresh: the robot's clock moves on, and the user's latest state is one of them
        assert all(b.timestamp_ms > a.timestamp_ms for (_, a), (_, b) in zip(fresh, fresh[1:]))
        assert self.client.robot_state is fresh[-1][1]
        return {"answered": answered, "first_state": first, "recovery": first - answered}

    def _answered(self, after: float, connect: bool) -> bool:
        try:
            self.first_answer(after, connect)
        except AssertionError:
            return False
        return True

    def reconnected_since(self, t: float) -> bool:
        return any(isinstance(e, Connected) for when, e in self.events if when >= t) or any(
            state is LinkState.CONNECTING for _, state, _ in self.link_states(t))

    def check_no_stale_replay(self, sent_at: float) -> None:
        """The command sent while the robot was away: dropped with the old connection when
        the link was re-established, delivered once (the same connection) otherwise."""
        got = [m for m in self.robot_got(sent_at, "DriveWheels") if m.lwheel_speed_mmps == 123.0]
        if self.reconnected_since(sent_at):
            assert got == [], "a command from before the reconnect reached the robot"
        else:
            assert len(got) == 1

    def check_backoff(self, t0: float, t1: float) -> None:
        """While the robot is away the driver keeps trying: never more than reconnect_max
        (plus one RESET period) between two RESETs, each LOST announcing at most that."""
        cfg = self.client.config
        resets = self.resets_sent(t0)
        resets = [t for t in resets if t <= t1]
        gaps = [b - a for a, b in zip(resets, resets[1:])]
        bound = cfg.reconnect_max + cfg.session.reset_interval + 0.01
        if t1 - t0 > cfg.session.peer_timeout + cfg.reconnect_max + 1.0:
            assert resets, "no RESET while the robot was away"
            assert max(gaps + [resets[0] - t0 - cfg.session.peer_timeout]) <= bound, gaps
            assert t1 - resets[-1] <= bound
        for _, state, reason in self.link_states(t0):
            if state is LinkState.LOST:
                seconds = float(reason.rsplit("reconnecting in ", 1)[1].split(" s")[0])
                assert seconds <= cfg.reconnect_max


# ------------------------------------------------------------------ the robot away for a while

#: 4 s: the driver has given the link up (after 3 s), the robot not yet (after 5 s)
DOWNTIMES = (1, 2, 4, 5, 10, 30, 120)


@pytest.mark.parametrize("downtime", DOWNTIMES)
@pytest.mark.parametrize("kind", ["network_cut", "rebooted", "fresh_robot"])
def test_robot_away_then_back(kind, downtime):
    """``network_cut``: the robot keeps everything, its session times out on its own after
    5 s; ``rebooted``: the same robot object (body, pose) forgets the session and its
    firmware state; ``fresh_robot``: a new robot object, clock from zero, new session."""
    bench = Bench()
    bench.start()
    t_down = bench.now
    bench.robot_end.network_up = False
    bench.client.send(STALE)  # in flight when the robot went away: never acknowledged
    bench.run(downtime)
    t_back = bench.now
    if kind == "rebooted":
        bench.robot.reboot(t_back)
    elif kind == "fresh_robot":
        bench.robot_end.robot = bench.new_robot(t_back)
    bench.robot_end.network_up = True
    result = bench.recover(t_back)
    bench.check_backoff(t_down, t_back)
    lost = [s for _, s, _ in bench.link_states(t_down) if s is LinkState.LOST]
    peer_timeout = bench.client.config.session.peer_timeout
    if kind == "network_cut" and downtime < peer_timeout:
        assert lost == []            # ARQ and keepalive rode it out: nothing to report
    else:
        assert lost, "the loss was not reported"
    held = kind == "network_cut" and downtime < bench.robot.config.peer_timeout
    # a robot that still held the old link when it came back was told to end it, once
    assert bench.client.session.stats.stale_link_disconnects == (1 if held and lost else 0)
    # the robot answered at most one back-off (and a RESET period) after it came back
    assert result["answered"] - t_back <= bench.client.config.reconnect_max + 0.51
    bench.run(1.5)  # long enough for a retransmission of the command, if there is one
    assert bench.client.state is LinkState.READY
    bench.check_no_stale_replay(t_down)


# ------------------------------------------------------------------ the link lost mid-handshake

@pytest.mark.parametrize("away", [1.0, 6.0])
@pytest.mark.parametrize("step, deliver", [
    ("Connect", False),            # the robot took the RESET; its answer is lost
    ("FirmwareSignature", True),   # the greeting arrived; the driver's Enables are lost
    ("BodyInfo", True),            # BodyInfo arrived; SetOrigin and SyncTime are lost
    ("RobotState", False),         # SyncTime arrived; the first RobotState is lost
], ids=["reset-answered", "greeted", "body-info", "synced"])
def test_link_lost_mid_handshake(step, deliver, away):
    """The network goes down at a step of the handshake (the robot's Connect, HardwareInfo
    and FirmwareSignature travel in one frame): after 1 s the same connection finishes its
    handshake, after 6 s both ends have given it up and a new one is made."""
    bench = Bench()
    bench.robot_end.cut_after = (step, deliver)
    bench.client.start(bench.now)
    assert bench.link.run_while(lambda: bench.robot_end.cut_at is None, 3.0)
    t_cut = bench.robot_end.cut_at
    assert bench.client.state is not LinkState.READY
    bench.run(t_cut + away - bench.now)
    t_back = bench.now
    bench.robot_end.network_up = True
    result = bench.recover(t_back)
    assert result["recovery"] <= RECOVERY_S
    syncs = bench.robot_got(0.0, "SyncTime")
    assert syncs, "the robot was never synchronised"
    bench.run(1.0)
    assert bench.client.state is LinkState.READY


# ------------------------------------------------------------------ a new source port

def test_robot_restarted_answering_from_a_new_source_port():
    """The robot comes back behind a relay that answers from another port: the driver
    takes the Connect answer to its RESET from there and follows it."""
    bench = Bench()
    bench.start()
    t_down = bench.now
    bench.robot_end.network_up = False
    bench.run(2.0)
    t_back = bench.now
    bench.robot.reboot(t_back)
    bench.robot_end.source = NEW_PORT_ADDR
    bench.robot_end.listen = {ROBOT_ADDR, NEW_PORT_ADDR}
    bench.robot_end.network_up = True
    bench.recover(t_back, connect=True)
    assert bench.client_end.peers.source == NEW_PORT_ADDR
    assert bench.client_end.peers.moves == 1
    bench.check_backoff(t_down, t_back)


def test_robot_source_port_changes_mid_connection():
    """The robot's datagrams suddenly come from another port (a relay's new socket): the
    driver does not take un-greeted datagrams from a new source, reports the loss once the
    old source has been silent for peer_timeout, and its RESET (to the configured
    address) is answered from the new port, which it then follows."""
    bench = Bench()
    bench.start()
    t_move = bench.now
    bench.robot_end.source = NEW_PORT_ADDR
    bench.robot_end.listen = {ROBOT_ADDR, NEW_PORT_ADDR}
    bench.run(0.5)
    assert bench.client_end.wrong_source > 0
    result = bench.recover(t_move, connect=True)
    assert bench.client_end.peers.source == NEW_PORT_ADDR
    lost = [when for when, s, _ in bench.link_states(t_move) if s is LinkState.LOST]
    assert len(lost) == 1
    peer_timeout = bench.client.config.session.peer_timeout
    assert lost[0] - t_move == pytest.approx(peer_timeout, abs=0.05)
    assert result["first_state"] - t_move <= peer_timeout + bench.client.config.reconnect_min + RECOVERY_S


def test_a_stranger_cannot_take_the_driver_with_a_connect_from_another_host():
    bench = Bench()
    bench.start()
    connect_answer = bench.robot_end.sent_log[0]
    assert "Connect" in connect_answer[1]
    # a Connect answer from another host is never taken, even while a RESET is out
    peers = PeerFilter("fixed", ROBOT_ADDR)
    greeting = [d for t, w, d in bench.link.trace if w == "b->a" and "Connect" in message_names(d)][0]
    assert not peers.accept(("127.0.0.9", 5551), greeting, awaiting_connect=True)
    assert not peers.accept(NEW_PORT_ADDR, greeting, awaiting_connect=False)
    assert not peers.accept(NEW_PORT_ADDR, RESET, awaiting_connect=True)
    assert peers.accept(NEW_PORT_ADDR, greeting, awaiting_connect=True)
    assert peers.destination(awaiting_connect=True) == ROBOT_ADDR
    assert peers.destination(awaiting_connect=False) == NEW_PORT_ADDR


# ------------------------------------------------------------------ forged and stray frames

@pytest.mark.parametrize("source", ["client", "stranger"])
def test_forged_reset_at_the_robot(source):
    """A RESET the driver did not send reaches a robot that takes a RESET on a live link
    (``link_policy="latest_reset"``; Anki's firmware does not, see the next test), from the
    driver's own address (forged, or a stray late copy) or from a stranger (whom the robot
    then answers). The robot forgets the link and waits for a handshake; the driver must
    notice and reconnect, and the robot's answer to the driver's RESET brings RobotState
    back."""
    bench = Bench(link_policy="latest_reset")
    bench.start()
    t_forge = bench.now
    bench.client.send(STALE)
    bench.robot_end.inject(RESET, t_forge, CLIENT_ADDR if source == "client" else STRANGER_ADDR)
    # the robot greets whoever reset it: the driver (forged from its address) or the stranger
    result = bench.recover(t_forge + 1e-9, connect=True)
    lost = [(when, reason) for when, s, reason in bench.link_states(t_forge) if s is LinkState.LOST]
    assert lost, "the driver never reported the link lost"
    if source == "client":
        assert "reset the link" in lost[0][1]
        # when nothing acknowledges the driver's packets within RESET_CONFIRM_S of the
        # robot's new greeting (not after the stall timeout)
        assert lost[0][0] - t_forge <= RESET_CONFIRM_S + 0.1
        assert result["first_state"] - t_forge <= RECOVERY_S
        assert bench.client.session.stats.peer_resets == 1
    else:
        assert "nothing heard" in lost[0][1]           # the robot talks to the stranger now
    assert result["recovery"] <= RECOVERY_S
    bench.run(1.5)
    bench.check_no_stale_replay(t_forge)


@pytest.mark.parametrize("source", ["client", "stranger"])
def test_a_robot_with_the_firmware_link_policy_keeps_its_link_through_a_forged_reset(source):
    """Anki's firmware (client.c, reliableTransport.c) ignores other addresses while a
    link lives and drops a RESET from the client's own address as a duplicate: a forged
    or stray RESET changes nothing, and the command sent before it arrives once."""
    bench = Bench()
    bench.start()
    t_forge = bench.now
    bench.client.send(STALE)
    bench.robot_end.inject(RESET, t_forge, CLIENT_ADDR if source == "client" else STRANGER_ADDR)
    bench.run(2.0)
    assert bench.link_states(t_forge) == []
    assert bench.client.state is LinkState.READY
    assert len(bench.states_after(t_forge + 1.5)) >= 10
    assert bench.robot.session.stats.resets_refused == (1 if source == "client" else 0)
    assert bench.robot_end.peers.source == CLIENT_ADDR
    bench.check_no_stale_replay(t_forge)


@pytest.mark.parametrize("frame", ["RESET", "RESET_ACK", "FIN"], ids=str)
def test_stray_frames_at_the_driver_change_nothing(frame):
    """RESET, RESET_ACK or FIN from the robot's address on a connected link: the driver
    ignores them; RobotState keeps streaming without a gap."""
    bench = Bench()
    bench.start()
    t0 = bench.now
    data = {"RESET": RESET, "RESET_ACK": RESET_ACK, "FIN": FIN}[frame]
    for _ in range(5):
        bench.client_end.receive_datagram(data, bench.now)
        bench.run(0.1)
    bench.run(1.0)
    assert bench.link_states(t0) == []
    assert bench.client.state is LinkState.READY
    times = [t0] + [when for when, _ in bench.states_after(t0)]
    assert max(b - a for a, b in zip(times, times[1:])) < 0.1
    assert bench.client.session.stats.unexpected_frames >= 5


def test_forged_fin_at_the_robot():
    """A FIN the driver did not send: the robot drops the client and falls silent; the
    driver reports the loss after peer_timeout and the robot answers its next RESET."""
    bench = Bench()
    bench.start()
    t_fin = bench.now
    bench.client.send(STALE)
    bench.robot_end.inject(FIN, t_fin, CLIENT_ADDR)
    bench.run(0.2)
    assert not bench.robot.is_connected
    result = bench.recover(t_fin, connect=True)
    lost = [when for when, s, _ in bench.link_states(t_fin) if s is LinkState.LOST]
    assert len(lost) == 1
    assert result["recovery"] <= RECOVERY_S
    assert result["first_state"] - t_fin <= 3.0 + 0.5 + RECOVERY_S
    bench.run(1.5)
    bench.check_no_stale_replay(t_fin)


def test_forged_reset_every_few_seconds_never_keeps_odometry_away_for_long():
    """Ten forged RESETs, 3 s apart, at a robot that takes them: each one costs well under
    the 2 s bound."""
    bench = Bench(link_policy="latest_reset")
    bench.start()
    for _ in range(10):
        t_forge = bench.now
        bench.robot_end.inject(RESET, t_forge, CLIENT_ADDR)
        result = bench.recover(t_forge + 1e-9, connect=True)
        assert result["first_state"] - t_forge <= RECOVERY_S
        bench.run(3.0 - (bench.now - t_forge))
    assert bench.client.session.stats.peer_resets == 10


def test_a_connection_that_never_becomes_ready_is_ended_at_the_robot_before_the_next(monkeypatch):
    """The robot takes the handshake and SyncTime but streams no RobotState (once): after
    ready_timeout the driver ends that link at the robot with the farewell's stop and
    Disconnect, as it does a ready link gone quiet, so that the next attempt's RESET is taken
    at once. A link only dropped on our side stays alive at a robot with Anki's link policy,
    each RESET refused and keeping it so: the robot answered again only after about 30 s,
    while the driver reported it as not answering."""
    from cozmo_driver.sim.model import RobotModel

    real = RobotModel._on_SyncTime
    mute = {"syncs": 1}   # how many SyncTimes start no stream

    def sync_time(model, message, now):
        if mute["syncs"] > 0:
            mute["syncs"] -= 1
            return
        real(model, message, now)

    monkeypatch.setattr(RobotModel, "_on_SyncTime", sync_time)
    bench = Bench()
    bench.client.start(bench.now)
    assert bench.link.run_while(lambda: bench.client.state is not LinkState.LOST, 8.0)
    given_up = bench.now
    assert bench.client.state_reason.startswith("the robot did not become ready within 5.0 s")
    bench.run(0.2)
    assert bench.robot_got(given_up - 0.01, "StopAllMotors"), "no stop sent with the give-up"
    ended = [e.reason for when, e in bench.robot_events if when >= given_up - 0.01 and isinstance(e, Disconnected)]
    assert ended == ["the engine sent Disconnect"], "the link was not ended at the robot"
    # the next attempt (after reconnect_min) is taken by the robot: streaming well within
    # the back-off's next step, not after the robot's own 5 s timeout of the old link
    assert bench.link.run_while(lambda: bench.client.state is not LinkState.READY, 3.0)
    assert bench.robot.session.stats.resets_refused == 0
