"""The demo's way of making requests (:class:`cozmo_driver.ros.demo_steps.SpinningCaller`)
cannot lose a response: each goal and each service call is made and awaited on the one
thread that spins the executor.

rclpy registers a request's future only after the request went out
(``ActionClient.send_goal_async``, ros2/rclpy#1123): with the executor spinning on
another thread, the response can be taken first and dropped ("Ignoring unexpected goal
response"), and the future never completes. The demo used to do just that; with the
interpreter switching threads every microsecond, the old pattern (executor on a thread,
goals from another, 200 play_audio goals against the driver over the simulator) lost 2
to 6 goals a run here. The same load through the demo's caller loses none.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import wave

import numpy as np
import pytest

from processes import project_executable, stop_process

pytestmark = pytest.mark.ros

ROUNDS = 200


def tiny_wav(path):
    """A 10 ms silent WAV: a play_audio goal that ends at once."""
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(22050)
        wav.writeframes(np.zeros(220, "<i2").tobytes())
    return path


@pytest.fixture
def driver_over_sim(tmp_path):
    """The driver node as a process (as the demo starts it) in namespace /demo_calls,
    over a simulator in this process; its log in tmp_path/driver.log."""
    from cozmo_driver.sim import SimServer

    with SimServer(port=0, seed=4) as sim:
        host, port = sim.address
        log = open(tmp_path / "driver.log", "wb")
        process = subprocess.Popen(
            [project_executable("cozmo_driver_node"), "--ros-args", "-p", f"robot_ip:={host}",
             "-p", f"robot_port:={port}", "-r", "__ns:=/demo_calls"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            stop_process(process, signal.SIGTERM, 10)
            log.close()


def ask_again(calls, handle, index):
    """What a lost result was (for the failure's message): the goal's status as the client
    last heard it on the status topic (4: SUCCEEDED, the driver ended it: the result response
    went missing; 2: EXECUTING, the driver had not ended it), and what a second request for
    the result got within 5 s."""
    from cozmo_driver.ros.demo_steps import action_outcome

    heard = handle.status
    again = calls.result(handle, 5.0)
    second = "no answer either" if again is None else action_outcome(again)[1]
    return f"goal {index}: status heard {heard}, asked again: {second}."


def driver_log_digest(path, last=40):
    """The driver log's warnings and errors (at most 20) and its last ``last`` lines."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(no log: {exc})"
    loud = [line for line in lines if "[WARN]" in line or "[ERROR]" in line or "Traceback" in line][:20]
    return "\n".join(loud + ["..."] + lines[-last:])


class Client:
    """The demo's node side: a node on a SingleThreadedExecutor and the demo's caller,
    all on this thread."""

    def __init__(self, context, namespace):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        from cozmo_driver.ros.demo_steps import SpinningCaller

        self.node = rclpy.create_node("demo_calls_client", namespace=namespace, context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.calls = SpinningCaller(self.executor)

    def close(self):
        self.executor.shutdown(2.0)
        self.node.destroy_node()


@pytest.mark.slow
def test_the_demos_requests_lose_no_goal_and_no_service_answer(rclpy_context, driver_over_sim,
                                                               tmp_path, capfd):
    from cozmo_interfaces.action import PlayAudio
    from cozmo_interfaces.msg import LinkStatus
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from rclpy.action import ActionClient

    from cozmo_driver.ros import qos
    from cozmo_driver.ros.demo_steps import action_outcome
    from ros_timeouts import CONNECT_TIMEOUT, DISCOVERY_TIMEOUT

    client = Client(rclpy_context, "/demo_calls")
    calls = client.calls
    links = []
    client.node.create_subscription(LinkStatus, "link_status", links.append, qos.QOS_LATCHED)
    audio = ActionClient(client.node, PlayAudio, "play_audio")
    parameters = client.node.create_client(SetParameters, "cozmo_driver/set_parameters")
    wav = tiny_wav(tmp_path / "tiny.wav")
    lost_goals, lost_results, lost_answers, failed, lost_why = [], [], [], [], []
    switch = sys.getswitchinterval()
    try:
        assert calls.spin_until(lambda: links and links[-1].state == LinkStatus.CONNECTED,
                                DISCOVERY_TIMEOUT + CONNECT_TIMEOUT), \
            (tmp_path / "driver.log").read_text()
        assert calls.wait_for_server(audio, DISCOVERY_TIMEOUT)
        assert calls.wait_for_service(parameters, DISCOVERY_TIMEOUT)
        started = time.monotonic()
        # other threads of this process are switched to as often as the interpreter can:
        # a response that could overtake its future's registration would, here
        sys.setswitchinterval(1e-6)
        for index in range(ROUNDS):
            handle = calls.send_goal(audio, PlayAudio.Goal(path=str(wav), volume=-1.0), 5.0,
                                     feedback_callback=lambda _message: None)
            if handle is None:
                lost_goals.append(index)
            elif not handle.accepted:
                failed.append((index, "rejected"))
            else:
                wrapped = calls.result(handle, 10.0)
                if wrapped is None:
                    lost_results.append(index)
                    lost_why.append(ask_again(calls, handle, index))
                else:
                    ok, outcome = action_outcome(wrapped)
                    if not ok:
                        failed.append((index, outcome))
            request = SetParameters.Request(parameters=[Parameter(
                name="camera_color",
                value=ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=index % 2 == 0))])
            response = calls.call(parameters, request, 5.0)
            if response is None:
                lost_answers.append(index)
            elif not all(result.successful for result in response.results):
                failed.append((index, "set_parameters refused"))
        elapsed = time.monotonic() - started
    finally:
        sys.setswitchinterval(switch)
        audio.destroy()
        client.close()
    err = capfd.readouterr().err
    print(f"{ROUNDS} play_audio goals and {ROUNDS} set_parameters calls in {elapsed:.1f} s")
    assert (lost_goals, lost_results, lost_answers) == ([], [], []), (
        f"goals not answered {lost_goals}, results lost {lost_results}, calls lost {lost_answers}; "
        f"{' '.join(lost_why)}; other failures {failed}; client's stderr: {err[-2000:]!r}; driver "
        f"{'running' if driver_over_sim.poll() is None else f'ended {driver_over_sim.poll()}'}, its "
        f"log's warnings and last lines:\n{driver_log_digest(tmp_path / 'driver.log')}")
    assert failed == []
    assert "Ignoring unexpected" not in err
    assert driver_over_sim.poll() is None


def test_the_caller_refuses_a_thread_that_does_not_spin(rclpy_context):
    client = Client(rclpy_context, "/demo_calls_thread")
    raised = []

    def other_thread():
        try:
            client.calls.spin_for(0.01)
        except RuntimeError as exc:
            raised.append(str(exc))

    try:
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(5.0)
        client.calls.spin_for(0.01)          # the thread that made it: fine
    finally:
        client.close()
    assert raised and "ros2/rclpy#1123" in raised[0]


def test_the_caller_stops_waiting_when_the_check_raises(rclpy_context):
    from cozmo_driver.ros.demo_steps import SpinningCaller

    client = Client(rclpy_context, "/demo_calls_check")
    deadline = time.monotonic() + 0.2

    def check():
        if time.monotonic() > deadline:
            raise KeyboardInterrupt("stop")

    calls = SpinningCaller(client.executor, check=check)
    try:
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            calls.spin_until(lambda: False, 30.0)
        assert time.monotonic() - t0 < 5.0
        assert calls.spin_until(lambda: True, 0.0)      # already true: no wait, no check
    finally:
        client.close()
