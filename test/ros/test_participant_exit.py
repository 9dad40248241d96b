"""How a node's process ends: its DDS participant where Fast DDS can hang destroying it,
and the stop deadline (cozmo_driver/ros/participant_exit.py, cozmo_driver/ros/_entry.py).

The hang itself (rmw_fastrtps' ``set_listener(nullptr)`` spinning forever, GIL held,
while a discovery callback runs: about 1 stop in 70 of a driver and a description
publisher stopped together) cannot be made to happen on demand; these tests check the
pieces: which library has the flaw, that the rescue ends a process stuck in native code
with the GIL held, that a node's process still ends at once and cleanly (its node off the
graph, its shared memory gone), and that a stop that hangs anyway is ended by the
deadline with the stacks of its threads.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from typing import List

import pytest

from cozmo_driver.ros import participant_exit as pe

pytestmark = pytest.mark.ros

#: a process must have ended this long after SIGINT
STOP_TIMEOUT_S = 5.0


# --------------------------------------------------------------------------- the pieces


def test_a_library_without_clockwait_is_the_one_whose_waits_can_spin(tmp_path):
    flawed = tmp_path / "libfastrtps.so.2.14.5"
    flawed.write_bytes(b"\x7fELF...pthread_cond_timedwait\x00pthread_cond_wait\x00")
    sound = tmp_path / "libfastrtps.so.2.14.9"
    sound.write_bytes(b"\x7fELF...pthread_cond_clockwait\x00pthread_cond_wait\x00")
    assert pe.waits_without_clockwait(str(flawed))
    assert not pe.waits_without_clockwait(str(sound))


def test_the_loaded_fast_dds_library_is_found_in_the_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n"
        "7f01-7f02 r-xp 00000000 08:01 2 /opt/ros/lib/libfastrtps.so.2.14.5\n"
        "7f02-7f03 rw-p 00000000 00:00 0 \n")
    assert pe.loaded_fastdds_library(str(maps)) == "/opt/ros/lib/libfastrtps.so.2.14.5"
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 3 /opt/ros/lib/libfastdds.so.3.1.0\n")
    assert pe.loaded_fastdds_library(str(maps)) == "/opt/ros/lib/libfastdds.so.3.1.0"
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n")
    assert pe.loaded_fastdds_library(str(maps)) is None
    assert pe.loaded_fastdds_library(str(tmp_path / "absent")) is None


RESCUED = textwrap.dedent("""
    import ctypes, sys
    from cozmo_driver.ros.participant_exit import arm_teardown_rescue

    assert arm_teardown_rescue(0.5, "probe: stuck in native code, ending the process",
                               status=int(sys.argv[1]))
    print("stuck", flush=True)
    # a C call that keeps the GIL (PyDLL) for 60 s: no Python code of this process runs
    ctypes.PyDLL(None).sleep(60)
    sys.exit(3)
""")


@pytest.mark.parametrize("status", [0, 2])
def test_the_rescue_ends_a_process_stuck_in_native_code_with_the_gil_held(tmp_path, status):
    script = tmp_path / "stuck.py"
    script.write_text(RESCUED)
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script), str(status)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=30.0)
    took = time.monotonic() - started
    assert done.stdout.strip() == "stuck", done.stderr
    assert done.returncode == status, done.stderr
    assert "probe: stuck in native code, ending the process: Success" in done.stderr
    assert took < 20.0, f"ended {took:.1f} s after the start (the rescue: 0.5 s; the C call: 60 s)"


FREED = textwrap.dedent("""
    import ctypes, gc
    from cozmo_driver.ros import participant_exit

    assert participant_exit.arm_teardown_rescue(0.5, "probe: ending the process")
    # what the interpreter's own end does before a stuck teardown: it frees the objects
    # of the modules, and their memory is used again
    participant_exit._armed.clear()
    gc.collect()
    reused = [bytes([0xff]) * n for n in range(1, 4000)]
    ctypes.PyDLL(None).sleep(60)
""")


def test_the_rescues_message_outlives_what_python_frees(tmp_path):
    """A process whose interpreter ended past the rescue's time wrote freed memory as its
    last line (bytes that are not UTF-8: a kit run's test that read the output as text
    failed on them)."""
    script = tmp_path / "freed.py"
    script.write_text(FREED)
    done = subprocess.run([sys.executable, str(script)], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=30.0)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"probe: ending the process: Success\n"


def test_this_process_has_a_verdict_that_matches_its_library(rclpy_context):
    import rclpy

    node = rclpy.create_node("participant_exit_probe", context=rclpy_context)
    try:
        path = pe.loaded_fastdds_library()
        if path is None:
            pytest.skip("the middleware here is not Fast DDS: nothing of this applies")
        with open(path, "rb") as library:
            flawed = b"pthread_cond_clockwait" not in library.read()
        assert pe.participant_teardown_can_hang() == flawed
        print(f"{path}: teardown can hang: {flawed}")
    finally:
        node.destroy_node()


# --------------------------------------------------------------------------- a node's process


def _own_segments(pid: int) -> List[str]:
    """The shared-memory segments process ``pid`` holds (their ``_el`` lock open)."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        match = re.match(r"^(/dev/shm/fastrtps_[0-9a-f]+)_el$", target)
        if match:
            found.append(match.group(1))
    return found


def _node_names(node) -> List[str]:
    return [name for name, _ns in node.get_node_names_and_namespaces()]


def test_a_node_process_ends_at_once_and_destroys_its_participant(rclpy_context, tmp_path):
    import rclpy

    from cozmo_driver import bringup_plan as plan
    from cozmo_driver.bringup import Bringup

    args = plan.resolve_arguments({"use_sim": "true", "start_sim": "false", "sim_port": "5999"})
    bringup = Bringup(plan.make_plan(args), say=lambda text: None)
    commands = {entry.name: command for entry, command in bringup.resolve()}
    watcher = rclpy.create_node("participant_exit_watcher", context=rclpy_context)
    log = tmp_path / "description_publisher.log"
    try:
        with open(log, "wb") as out:
            process = subprocess.Popen(
                commands["description_publisher"], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            try:
                deadline = time.monotonic() + 30.0
                while "description_publisher" not in _node_names(watcher):
                    assert process.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, f"never on the graph: {log.read_text()}"
                    time.sleep(0.1)
                segments = _own_segments(process.pid)
                assert segments, "the node's process holds no shared-memory segment"
                started = time.monotonic()
                process.send_signal(signal.SIGINT)
                code = process.wait(timeout=STOP_TIMEOUT_S)
                took = time.monotonic() - started
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        output = log.read_text(errors="replace")
        assert code == 0, output
        assert not [line for line in output.splitlines()
                    if "ERROR" in line or "Traceback" in line or "Timeout" in line], output
        # its node is announced gone
        deadline = time.monotonic() + 5.0
        while "description_publisher" in _node_names(watcher):
            assert time.monotonic() < deadline, f"still on the graph: {_node_names(watcher)}"
            time.sleep(0.1)
        # and its participant was destroyed: Fast DDS removed its shared memory
        left = [path for path in segments if os.path.exists(path) or os.path.exists(path + "_el")]
        assert not left, f"left in /dev/shm: {left}"
        print(f"stopped {took:.2f} s after SIGINT; segments removed: {segments}")
    finally:
        watcher.destroy_node()
        bringup.remove_parameter_files()


# --------------------------------------------------------------------------- the deadline

HANGING_STOP = textwrap.dedent("""
    import sys, time
    from rclpy.node import Node
    from cozmo_driver.ros import _entry

    _entry.STOP_DEADLINE_S = 1.0

    def stop_that_hangs(executor):
        time.sleep(60.0)

    _entry.init(sys.argv[1:])
    node = Node("stop_deadline_probe")
    print("spinning", flush=True)
    sys.exit(_entry.spin_node(node, stop=stop_that_hangs, guard_name=False))
""")


def test_a_stop_that_hangs_is_ended_by_the_deadline_with_its_stacks(tmp_path):
    script = tmp_path / "hanging_stop.py"
    script.write_text(HANGING_STOP)
    process = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert process.stdout.readline().strip() == "spinning", process.stderr.read()
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=20.0)
        took = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 1, err
    assert took < 10.0, f"ended {took:.1f} s after SIGINT, its deadline is 1 s"
    assert "Timeout (0:00:01)!" in err, err
    assert "stop_that_hangs" in err, err  # the line it was stuck at


REFUSED = textwrap.dedent("""
    import sys
    import rclpy.node
    from cozmo_driver.ros import _entry

    said = []
    _entry.participant_teardown_can_hang = lambda: True
    _entry.arm_stop_deadline = lambda: said.append("deadline")
    _entry.arm_teardown_rescue = lambda seconds, message, status=0: said.append(f"rescue {status}") or True
    destroy = rclpy.node.Node.destroy_node

    def destroy_node(node):
        said.append("destroy " + node.get_name())
        return destroy(node)

    rclpy.node.Node.destroy_node = destroy_node
    if sys.argv[1] == "stack":
        from cozmo_driver.ros.stack_node import main
    else:
        from cozmo_driver.ros.driver_node import main
    status = main(sys.argv[2:])
    print(" | ".join(said), flush=True)
    sys.exit(status)
""")


@pytest.mark.parametrize("program, argv", [
    ("driver", ["--ros-args", "-p", "qos_overrides./odom.publisher.depth:=-3"]),
    ("stack", ["--node", "driver", "--node", "face", "--ros-args", "--param-file", "cozmo.yaml"]),
], ids=["refused-in-its-constructor", "stack-refused-after-a-node-was-made"])
def test_a_node_refused_while_made_is_protected_before_it_is_destroyed(tmp_path, program, argv):
    """A node refused while being made is destroyed at once (and its DDS participant with
    the process's last node): the teardown that can hang (see the module) ran without the
    rescue and the stop deadline, which only the spin armed, while SIGINT and SIGTERM were
    already in init's hands, which do nothing then. Now both are armed, the rescue with
    the refusal's status 2, before the first node is destroyed."""
    script = tmp_path / "refused.py"
    script.write_text(REFUSED)
    env = dict(os.environ, COZMO_LOOPBACK_ONLY="1")
    done = subprocess.run([sys.executable, str(script), program, *argv], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60.0, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout.strip().splitlines()[-1].split(" | ")
    destroyed = [i for i, event in enumerate(said) if event.startswith("destroy ")]
    assert destroyed, said
    assert "deadline" in said[:destroyed[0]] and said.count("rescue 2") == 1, said
    assert said.index("rescue 2") < destroyed[0], said


FAILED_CALLBACK = textwrap.dedent("""
    import sys
    import rclpy
    from rclpy.node import Node
    from cozmo_driver.ros import _entry

    armed = []
    _entry.participant_teardown_can_hang = lambda: True
    _entry.arm_stop_deadline = lambda: None
    _entry.arm_teardown_rescue = lambda seconds, message, status=0: armed.append((status, message)) or True
    rclpy.init()
    node = Node("teardown_status_probe")

    def fail():
        raise (KeyboardInterrupt() if sys.argv[1] == "ctrl-c" else ValueError("boom in a callback"))

    node.create_timer(0.01, fail)
    try:
        _entry.spin_node(node, guard_name=False)
    except ValueError:
        pass
    ((status, message),) = armed
    print(f"rescue {status}", flush=True)
    print(message, flush=True)
""")


@pytest.mark.parametrize("how, status", [("exception", 1), ("ctrl-c", 0)])
def test_the_rescue_of_a_failed_spin_ends_with_its_traceback_and_status_1(tmp_path, how, status):
    """An uncaught exception in a callback was in flight while the teardown rescue was armed
    with status 0: a rescued teardown (1 stop in 70 on the PyPI Fast DDS) ended the process
    with 0 and the traceback never printed. The rescue now says the traceback and ends with
    1; a Ctrl-C is a normal stop (0, no traceback)."""
    script = tmp_path / "failed_callback.py"
    script.write_text(FAILED_CALLBACK)
    env = dict(os.environ, COZMO_LOOPBACK_ONLY="1")
    done = subprocess.run([sys.executable, str(script), how], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60.0, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"rescue {status}", done.stdout
    message = "\n".join(lines[1:])
    assert ("Traceback (most recent call last)" in message) == (status == 1), message
    if status == 1:
        assert "ValueError: boom in a callback" in message, message
        assert message.rstrip().endswith("ending the process"), message
