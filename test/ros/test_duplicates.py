"""Two stacks must not drive one robot or answer to one name: the executables refuse to
run beside a node of their fully qualified name in the ROS domain (ros/name_guard.py) and
beside another program that drives their robot on this machine (client/claim.py), with
exit status 2 and a message that says what runs and how to separate the two; the first
one goes on undisturbed."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from cozmo_driver.sim import SimServer
from processes import project_executable

# driver and face node processes in the ROS domain, each case up to tens of seconds
pytestmark = [pytest.mark.ros, pytest.mark.slow]


class Started:
    """A node executable's process, its output in a log file; killed if still running."""

    def __init__(self, command, log_path):
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log,
                                        stderr=subprocess.STDOUT,
                                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def output(self):
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text, timeout):
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, f"no {text!r} within {timeout} s:\n{self.output()}"
            time.sleep(0.05)

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._log.close()


def test_a_second_driver_of_the_same_robot_exits_2_naming_the_first(tmp_path):
    with SimServer(port=0, seed=11) as sim:
        host, port = sim.address
        command = [project_executable("cozmo_driver_node"), "--ros-args", "-p", f"robot_ip:={host}",
                   "-p", f"robot_port:={port}"]
        first = Started(command + ["-r", "__ns:=/claim_a"], tmp_path / "first.log")
        second = None
        try:
            first.wait_for("connected to Cozmo", 30)
            second = Started(command + ["-r", "__ns:=/claim_b"], tmp_path / "second.log")
            assert second.process.wait(timeout=30) == 2
            text = second.output()
            assert f"refusing to run: the robot at {host}:{port} is already driven by process " \
                   f"{first.process.pid}" in text
            assert "disconnected from the robot" not in text  # it never was connected
            assert first.process.poll() is None
            first.process.send_signal(signal.SIGINT)
            assert first.process.wait(timeout=20) == 0
        finally:
            first.close()
            if second is not None:
                second.close()


def test_a_second_node_process_of_the_same_name_is_refused_and_the_first_goes_on(tmp_path):
    from cozmo_driver.ros.name_guard import CHECKS_S  # (imports rclpy)
    command = [project_executable("cozmo_face_node"), "--ros-args", "-r", "__ns:=/guard_proc"]
    first = Started(command, tmp_path / "first.log")
    second = None
    try:
        # the face node says this in its constructor, before its NameGuard is made (its start-up,
        # rclpy's and numpy's imports, took more than a second on a loaded machine); then past
        # the guard's last check, so that the first's checks are over when the second comes
        first.wait_for(" fps on ", 30)
        time.sleep(CHECKS_S[-1] + 1.0)
        assert first.process.poll() is None, first.output()
        second = Started(command, tmp_path / "second.log")
        assert second.process.wait(timeout=30) == 2
        text = second.output()
        assert "refusing to run: another node named /guard_proc/cozmo_face" in text
        assert "ROS_DOMAIN_ID" in text
        assert first.process.poll() is None             # the first one goes on
        first.process.send_signal(signal.SIGINT)
        assert first.process.wait(timeout=20) == 0
        assert "refusing" not in first.output()
    finally:
        first.close()
        if second is not None:
            second.close()
