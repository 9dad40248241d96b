"""One program per robot on a machine (cozmo_driver/client/claim.py): a second client of
the same robot address is refused at start with a message naming the holder, and the
claim is gone as soon as the holder stops or dies."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from cozmo_driver.client import Robot
from cozmo_driver.client.claim import RobotBusyError, RobotClaim, claims_supported
from cozmo_driver.errors import ConfigurationError
from cozmo_driver.sim import SimServer
from processes import free_udp_port

pytestmark = pytest.mark.skipif(not claims_supported(), reason="robot claims need Linux abstract sockets")

HOLDER = ("import sys, time\n"
          "from cozmo_driver.client.claim import RobotClaim\n"
          "claim = RobotClaim('127.0.0.1', int(sys.argv[1])).acquire()\n"
          "print('held', flush=True)\n"
          "time.sleep(60)\n")


def test_a_claim_held_by_another_process_is_refused_naming_it():
    port = free_udp_port()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RobotBusyError) as refused:
            RobotClaim("127.0.0.1", port).acquire()
        text = str(refused.value)
        assert f"127.0.0.1:{port} is already driven by process {holder.pid}" in text
        assert "cozmo_driver.client.claim" in text          # its command line
        assert "Stop the other one" in text and "namespace" in text
        assert isinstance(refused.value, ConfigurationError)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    # the kernel freed the name with the process: no stale lock
    claim = RobotClaim("127.0.0.1", port).acquire()
    assert claim.held
    claim.release()


def test_claims_are_per_address_and_port_and_end_with_release():
    port = free_udp_port()
    a = RobotClaim("127.0.0.1", port).acquire()
    b = RobotClaim("127.0.0.2", port).acquire()      # another robot
    c = RobotClaim("127.0.0.1", port + 1).acquire()  # another robot
    with pytest.raises(RobotBusyError, match="pid|this process"):
        RobotClaim("127.0.0.1", port).acquire()
    for claim in (a, b, c):
        claim.release()
        assert not claim.held
    with RobotClaim("127.0.0.1", port) as again:
        assert again.held


@pytest.fixture
def sim_server():
    with SimServer(port=0, seed=5) as server:
        yield server


def test_a_second_client_of_the_same_robot_is_refused_at_start(sim_server):
    first = Robot(*sim_server.address, local_host="127.0.0.1", name="first").start()
    try:
        assert first.wait_until_ready(10.0)
        second = Robot(*sim_server.address, local_host="127.0.0.1", name="second")
        with pytest.raises(RobotBusyError, match="already driven by this process"):
            second.start()
        assert not second.transport.running                 # no socket was opened
        assert first.wait_until_ready(1.0)  # the first one goes on
    finally:
        first.stop()
    # after a stop the robot is free again
    third = Robot(*sim_server.address, local_host="127.0.0.1", name="third").start()
    try:
        assert third.wait_until_ready(10.0)
    finally:
        third.stop()


def test_one_host_with_an_adapter_per_robot_claims_each_robot_from_its_local_address():
    # every Cozmo is 172.31.1.1:5551 on its own Wi-Fi: a driver per adapter, bound to the
    # adapter's address (local_ip), drives another robot at the same address
    port = free_udp_port()
    a = RobotClaim("127.0.0.1", port, local_host="10.0.0.5").acquire()
    b = RobotClaim("127.0.0.1", port, local_host="10.0.1.5").acquire()
    try:
        assert a.held and b.held
        with pytest.raises(RobotBusyError) as refused:  # the same adapter: the same robot
            RobotClaim("127.0.0.1", port, local_host="10.0.0.5").acquire()
        text = str(refused.value)
        assert f"127.0.0.1:{port} is already driven by this process" in text
        assert "from the same local address 10.0.0.5" in text
        assert "local_ip" in text and "namespace" in text
    finally:
        a.release()
        b.release()
    # no local address, or the unspecified one (every interface), is one claim of the robot
    c = RobotClaim("127.0.0.1", port, local_host="0.0.0.0").acquire()
    try:
        for local in (None, "", "0.0.0.0"):
            with pytest.raises(RobotBusyError, match="local_ip"):
                RobotClaim("127.0.0.1", port, local_host=local).acquire()
    finally:
        c.release()


def test_a_claim_from_a_local_address_is_refused_while_one_from_every_address_holds_the_robot():
    # a driver with no local_ip talks to the robot through whichever interface routes there:
    # a second one bound to an adapter's address may be on the same robot
    port = free_udp_port()
    everywhere = RobotClaim("127.0.0.1", port).acquire()
    try:
        with pytest.raises(RobotBusyError) as refused:
            RobotClaim("127.0.0.1", port, local_host="10.0.0.5").acquire()
        text = str(refused.value)
        assert f"127.0.0.1:{port} is already driven by this process" in text
        assert "from every local address (a driver with no local_ip)" in text
    finally:
        everywhere.release()
    alone = RobotClaim("127.0.0.1", port, local_host="10.0.0.5").acquire()  # released: free again
    assert alone.held
    alone.release()


def test_clients_bound_to_different_local_addresses_both_start_and_the_same_one_is_refused():
    port = free_udp_port()  # nothing answers there: the clients only claim, bind and send
    first = Robot("127.0.0.1", port, local_host="127.0.0.1", name="first").start()
    second = None
    try:
        second = Robot("127.0.0.1", port, local_host="127.0.0.2", name="second").start()
        assert second.transport.running
        same = Robot("127.0.0.1", port, local_host="localhost", name="same")  # resolved: 127.0.0.1
        with pytest.raises(RobotBusyError, match="from the same local address 127.0.0.1"):
            same.start()
        assert not same.transport.running
    finally:
        first.stop(timeout=0.2)
        if second is not None:
            second.stop(timeout=0.2)


def test_refused_claims_leave_the_robot_held_and_its_holder_named():
    # finding out who holds the robot must leave nothing behind: once, each refusal queued a
    # connection on the holder's socket, and a full queue read as "nobody holds it", so that
    # the sixth attempt from a local address took the robot from a running driver
    port = free_udp_port()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for local in ("10.0.0.5", None):
            for _ in range(10):
                with pytest.raises(RobotBusyError) as refused:
                    RobotClaim("127.0.0.1", port, local_host=local).acquire()
                assert f"127.0.0.1:{port} is already driven by process {holder.pid}" in str(refused.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)


def test_a_claim_from_every_local_address_is_refused_while_one_from_a_local_address_holds_the_robot():
    # a driver with no local_ip may reach the robot through the adapter another driver is bound to
    port = free_udp_port()
    adapter = RobotClaim("127.0.0.1", port, local_host="10.0.0.5").acquire()
    try:
        for local in (None, "0.0.0.0"):
            with pytest.raises(RobotBusyError) as refused:
                RobotClaim("127.0.0.1", port, local_host=local).acquire()
            text = str(refused.value)
            assert f"127.0.0.1:{port} is already driven by this process" in text
            assert "from the local address 10.0.0.5 (a driver with local_ip 10.0.0.5)" in text
        other = RobotClaim("127.0.0.1", port + 1).acquire()  # another robot
        other.release()
    finally:
        adapter.release()
    everywhere = RobotClaim("127.0.0.1", port).acquire()  # released: free again
    assert everywhere.held
    everywhere.release()


def test_without_the_list_of_names_the_same_claims_conflict_and_no_other_name_is_bound(monkeypatch):
    """Where /proc/net/unix cannot be read a claim from a local address probed for one from
    every address by binding that name for a moment, so a driver with no local_ip binding
    it at that moment was refused as "already driven by another program", and a claim from
    every address never saw one from a local address, against the docstring's "whichever
    comes first". The cross-check needs the list: without it it is skipped (no name but the
    claim's own is bound), and only claims of the same name refuse each other."""
    import socket
    from types import SimpleNamespace

    from cozmo_driver.client import claim as claim_module

    bound = []

    class Recording(socket.socket):
        def bind(self, address):
            bound.append(address)
            return super().bind(address)

    monkeypatch.setattr(claim_module, "_listed", lambda prefix: None)  # /proc/net/unix unreadable
    monkeypatch.setattr(claim_module, "socket", SimpleNamespace(
        socket=Recording, AF_UNIX=socket.AF_UNIX, SOCK_STREAM=socket.SOCK_STREAM))
    port = free_udp_port()
    for first, second in ((None, "10.0.0.5"), ("10.0.0.5", None)):
        held = RobotClaim("127.0.0.1", port, local_host=first).acquire()
        bound.clear()
        try:
            other = RobotClaim("127.0.0.1", port, local_host=second).acquire()
            assert other.held
            assert bound == [claim_module._name("127.0.0.1", port, second)], bound  # its own name only
            with pytest.raises(RobotBusyError):
                RobotClaim("127.0.0.1", port, local_host=second).acquire()  # the same name
            other.release()
        finally:
            held.release()
