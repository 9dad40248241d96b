"""The SIGINT/SIGTERM handlers of the programs without ROS take no lock; the protocol demo,
which drives the robot itself, stops it on Ctrl-Z (SIGTSTP) before it is suspended.

Python runs a handler in the main thread between two bytecodes, also while that thread
holds a ``threading`` lock (inside ``Event.wait``, ``Queue.get``...); a handler that asks
for that lock waits forever and the program never stops. The check: run each program's
real handler under ``sys.setprofile`` and list every call that takes a lock. The
detector itself is checked first on ``Event.set`` and ``Queue.put``, the calls the
handlers made before.
"""

from __future__ import annotations

import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace
from typing import Callable, List

import pytest

from fixtures_signals import GUARDED_SIGNALS
from cozmo_driver import bringup, protocol_demo
from cozmo_driver.sim import SimServer
from cozmo_driver.sim import cli as sim_cli
from cozmo_driver.stop_flag import CTRL_Z_STOPPED, CtrlZ, StopFlag

_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))
_LOCKING_MODULES = ("threading.py", "queue.py")


def lock_calls(call: Callable[[], None]) -> List[str]:
    """Run ``call()`` under a profiler; return the calls it made that take a lock: a
    method of a lock object, or any Python function of the threading or queue module
    (their Event, Condition, Queue all take one)."""
    seen: List[str] = []

    def profile(frame, event, arg) -> None:
        if event == "c_call" and isinstance(getattr(arg, "__self__", None), _LOCK_TYPES):
            seen.append(repr(arg))
        elif event == "call" and frame.f_code.co_filename.endswith(_LOCKING_MODULES):
            seen.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_the_detector_sees_the_locks_of_event_set_and_queue_put():
    assert lock_calls(threading.Event().set)
    assert lock_calls(lambda: queue.Queue().put(1))
    assert lock_calls(lambda: threading.Lock().acquire())
    assert not lock_calls(lambda: [].append(1))


def test_stop_flag_handler_takes_no_lock_and_sets_the_flag():
    with StopFlag() as flag:
        assert not flag.is_set() and flag.signum is None
        assert not flag.wait(0.01)
        assert lock_calls(lambda: flag.handle(signal.SIGTERM, None)) == []
        assert lock_calls(lambda: flag.handle(signal.SIGINT, None)) == []
        assert flag.is_set() and flag.signum == signal.SIGTERM
        assert flag.signals == [signal.SIGTERM, signal.SIGINT]
        assert flag.wait(0) and flag.wait(None) and flag.wait(-1)   # stays set
    assert flag.wait(1) and flag.is_set()   # closed: still set, no wait
    flag.handle(signal.SIGTERM)             # a late signal after close: no error
    assert flag.signals[-1] == signal.SIGTERM


def test_ctrl_z_handler_takes_no_lock_and_wakes_the_stop_flags_wait():
    """The Ctrl-Z handler of the programs that drive the robot without ROS: no lock, and a
    Ctrl-Z is taken once however often the handler ran, and wakes ``StopFlag.wait``
    without setting the flag."""
    with StopFlag() as flag:
        ctrl_z = CtrlZ()
        try:
            assert not ctrl_z.take()
            assert lock_calls(lambda: ctrl_z.handle(signal.SIGTSTP, None)) == []
            ctrl_z.handle(signal.SIGTSTP)
            t0 = time.monotonic()
            assert not flag.wait(30, also=ctrl_z)
            assert time.monotonic() - t0 < 10, "a Ctrl-Z did not wake the wait"
            assert ctrl_z.take() and not ctrl_z.take()
            assert not flag.is_set()
        finally:
            ctrl_z.close()
        assert not ctrl_z.take()
        ctrl_z.handle(signal.SIGTSTP)   # closed: no error


def test_stop_flag_wakes_the_threads_that_wait():
    with StopFlag() as flag:
        woken: List[bool] = []
        waiters = [threading.Thread(target=lambda: woken.append(flag.wait(60)), daemon=True)
                   for _ in range(3)]
        for thread in waiters:
            thread.start()
        flag.set()
        for thread in waiters:
            thread.join(10)
        assert not any(t.is_alive() for t in waiters), "set() did not wake every waiter"
        assert woken == [True, True, True]
        assert flag.signum is None      # set() is not a signal


def test_stop_flag_install_puts_the_earlier_handlers_back():
    before = signal.getsignal(signal.SIGTERM)
    with StopFlag() as flag:
        restore = flag.install((signal.SIGTERM,))
        try:
            assert signal.getsignal(signal.SIGTERM) == flag.handle
        finally:
            restore()
    assert signal.getsignal(signal.SIGTERM) is before


class _RecordHandlers:
    """Records every handler a program installs with signal.signal (and installs it)."""

    def __init__(self, monkeypatch) -> None:
        self.handlers: List[tuple] = []
        real = signal.signal

        def record(sig, handler):
            self.handlers.append((sig, handler))
            return real(sig, handler)

        monkeypatch.setattr(signal, "signal", record)

    def own(self, signals) -> List[Callable]:
        """The program's own handlers of ``signals`` (not the earlier ones it put back)."""
        return [h for s, h in self.handlers
                if s in signals and getattr(h, "__module__", "").startswith("cozmo_driver.")]


@pytest.fixture
def recorder(monkeypatch):
    """A :class:`_RecordHandlers`; afterwards this process's stop signals are handled as
    before. The programs run here in pytest's process, and cozmo-sim ends by ignoring
    SIGINT and SIGTERM: left so, every process a later test of this worker starts
    inherited SIGTERM ignored (test_lifeline's children outlived their parents)."""
    before = {sig: signal.getsignal(sig) for sig in GUARDED_SIGNALS}
    real = signal.signal
    try:
        yield _RecordHandlers(monkeypatch)
    finally:
        for sig, handler in before.items():
            real(sig, handler)


def _check_handlers(handlers: List[Callable], expected: int) -> None:
    assert len(handlers) >= expected, f"the program installed {handlers}"
    for handler in handlers:
        assert lock_calls(lambda: handler(signal.SIGTERM, None)) == [], handler


def test_cozmo_sim_handler_takes_no_lock(monkeypatch, recorder):
    monkeypatch.setattr(sim_cli, "exit_with_parent", lambda: None)  # not pytest's lifeline
    assert sim_cli.main(["--port", "0", "--duration", "0.2", "--quiet"]) == 0
    _check_handlers(recorder.own((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)), 3)


def test_protocol_demo_handler_takes_no_lock(recorder, capsys):
    assert protocol_demo.main(["--duration", "1"]) == 0
    assert "done." in capsys.readouterr().out
    _check_handlers(recorder.own((signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP)), 4)
    assert recorder.own((signal.SIGTSTP,)), "no SIGTSTP (Ctrl-Z) handler"


def test_protocol_demo_keeps_a_sigtstp_ignored_at_its_start(recorder, capsys):
    """A SIGTSTP the demo started with ignored (a parent that wants no Ctrl-Z) stays so."""
    signal.signal(signal.SIGTSTP, signal.SIG_IGN)  # the recorder puts it back
    assert protocol_demo.main(["--duration", "1"]) == 0
    assert "done." in capsys.readouterr().out
    assert not recorder.own((signal.SIGTSTP,))
    assert signal.getsignal(signal.SIGTSTP) == signal.SIG_IGN


def test_protocol_demo_does_not_count_a_suspension_against_the_wait_for_the_robot(monkeypatch):
    """The wait for the robot fixed its deadline before it began, so the time suspended
    (Ctrl-Z until fg) counted against it: after fg the demo said "the robot did not become
    ready" and exited 2, though docs/demo.md says fg goes on. A fake clock: each wait of the
    robot takes its 0.1 s, the suspension 100 s; the robot is ready at its fifth wait."""
    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(protocol_demo, "time", SimpleNamespace(monotonic=lambda: clock.now, sleep=time.sleep))

    class Robot:
        waits = 0

        def wait_until_ready(self, timeout):
            clock.now += timeout
            self.waits += 1
            return self.waits >= 5

        def stop_all_motors_acknowledged(self, timeout):
            return True

    class Suspending:
        came = [True]

        def take(self):
            return self.came.pop() if self.came else False

        def suspend(self):
            clock.now += 100.0        # fg 100 s later

    robot, said = Robot(), []
    with StopFlag() as stop:
        assert protocol_demo._wait_ready(robot, stop, 1.0, Suspending(), said.append), said
    assert robot.waits == 5
    assert said and said[0].startswith(CTRL_Z_STOPPED), said


def test_protocol_demo_does_not_count_a_suspension_against_its_duration(monkeypatch, recorder, capsys):
    """--duration is the demonstration's, not the suspension's: after a Ctrl-Z that lasted
    longer than the rest of the run, fg went on with nothing (the run was over). The demo's
    clock jumps 100 s at the suspension (no real one), which comes at the demonstration's
    first look at Ctrl-Z (after 1 s of it); status lines follow it until its 3 s are up."""
    jump = [0.0]
    monkeypatch.setattr(protocol_demo, "time",
                        SimpleNamespace(monotonic=lambda: time.monotonic() + jump[0], sleep=time.sleep))
    demonstrating, taken = [], []
    demonstrate = protocol_demo._demonstrate

    def marked(*args, **kwargs):
        demonstrating.append(True)
        return demonstrate(*args, **kwargs)

    def take(self):
        if demonstrating and not taken:
            taken.append(True)
            return True
        return False

    monkeypatch.setattr(protocol_demo, "_demonstrate", marked)
    monkeypatch.setattr(CtrlZ, "take", take)
    monkeypatch.setattr(CtrlZ, "suspend", lambda self: jump.__setitem__(0, jump[0] + 100.0))
    assert protocol_demo.main(["--duration", "3"]) == 0
    out = capsys.readouterr().out
    assert taken and CTRL_Z_STOPPED in out, out
    after = out.split(CTRL_Z_STOPPED, 1)[1]
    assert [line for line in after.splitlines() if " fps  | " in line], out
    assert "done." in after


#: the demo must be stopped (its /proc state T) this long after SIGTSTP at most: its stop of
#: the robot takes 0.2 s at most
SUSPEND_TIMEOUT_S = 3.0
#: how far the robot may move while the demo is stopped, mm (it drives at 50 mm/s)
STILL_MM = 2.0


def _state(pid: int) -> str:
    """A process's state letter in /proc (R, S, T: stopped...), "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(") ", 1)[-1][:1]
    except OSError:
        return ""


def _own_group() -> None:
    """In the child: SIGINT and SIGTSTP at their defaults, and a process group of its own in
    this session (Linux discards a SIGTSTP that would stop a process of an orphaned group,
    and the group of a test run in a session of its own may be one; this one is not)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTSTP, signal.SIG_DFL)
    os.setpgrp()


def _moved_mm(sim: SimServer, seconds: float) -> float:
    x0, y0, _ = sim.true_pose()
    time.sleep(seconds)
    x1, y1, _ = sim.true_pose()
    return math.hypot(x1 - x0, y1 - y0)


@pytest.mark.slow
def test_protocol_demo_stops_the_robot_on_ctrl_z(tmp_path):
    """Ctrl-Z (SIGTSTP) suspended cozmo-protocol-demo, which drives the robot itself, with
    the robot driving on its last DriveWheels for as long as the demo stayed suspended. It
    now stops the robot first, says so, and is then suspended (state T); fg (SIGCONT) goes
    on, and a Ctrl-C still ends it as before."""
    log = tmp_path / "demo.log"
    with SimServer(host="127.0.0.1", port=0, seed=3) as sim, open(log, "wb") as output:
        demo = subprocess.Popen(
            [sys.executable, "-m", "cozmo_driver.protocol_demo", "--robot-ip", "127.0.0.1",
             "--robot-port", str(sim.address[1]), "--duration", "60"],
            stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, preexec_fn=_own_group)
        try:
            deadline = time.monotonic() + 30.0
            while "DriveWheels 50 mm/s (side 1 of 4)" not in log.read_text():
                assert demo.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            time.sleep(0.5)   # a side takes 2 s
            assert _moved_mm(sim, 0.2) > 3.0, f"the robot does not drive:\n{log.read_text()}"
            demo.send_signal(signal.SIGTSTP)
            deadline = time.monotonic() + SUSPEND_TIMEOUT_S
            while _state(demo.pid) != "T":
                assert time.monotonic() < deadline, \
                    f"not stopped {SUSPEND_TIMEOUT_S} s after SIGTSTP:\n{log.read_text()}"
                time.sleep(0.02)
            time.sleep(0.3)
            moved = _moved_mm(sim, 1.0)
            assert _state(demo.pid) == "T"
            assert moved < STILL_MM, \
                f"the robot drove {moved:.0f} mm in 1 s while the demo was suspended:\n{log.read_text()}"
            assert "suspended (Ctrl-Z): the robot was stopped" in log.read_text()
            demo.send_signal(signal.SIGCONT)
            time.sleep(0.5)
            demo.send_signal(signal.SIGINT)
            assert demo.wait(15.0) == 128 + signal.SIGINT, log.read_text()
            assert "interrupted (SIGINT)" in log.read_text()
            assert "Traceback" not in log.read_text()
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()


def test_bringup_handler_takes_no_lock_and_reaches_the_loop(recorder):
    """cozmo_bringup's handler puts into a queue.SimpleQueue, whose put is C code that
    takes no Python lock and is reentrant (the queue documentation says so): the event
    still reaches the loop, and the queue is not a queue.Queue."""
    said: List[str] = []
    runner = bringup.Bringup([], say=said.append)
    assert runner.run(duration=0.05) == 0
    handlers = recorder.own(bringup._STOP_SIGNALS)
    _check_handlers(handlers, len(bringup._STOP_SIGNALS))
    assert not isinstance(runner._events, queue.Queue)
    assert runner._events.get_nowait() == ("signal", signal.SIGTERM)


def test_cozmo_demo_handler_takes_no_lock(monkeypatch, recorder):
    """cozmo-demo's run() with its body (which starts the stack) left out: the handlers
    it installs around it, and the exit status a signal gives."""
    from cozmo_driver import demo

    runner = demo._Demo(demo.parse_arguments([]))
    monkeypatch.setattr(runner, "_run", lambda: 0)
    assert runner.run() == 0, "rclpy or the demo node does not import here"
    _check_handlers(recorder.own((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)), 3)
    assert runner.signum == signal.SIGTERM      # what _check_handlers sent


def test_the_stop_flag_takes_sighup_unless_it_was_ignored_at_the_start(recorder):
    """SIGHUP (the terminal closed, an SSH session dropped) killed cozmo-protocol-demo, which
    drives the robot itself, cozmo-demo and cozmo-sim at once: the robot drove on its last
    command. It stops them as SIGTERM does, unless the program started under ``nohup``."""
    with StopFlag() as flag:
        restore = flag.install()
        try:
            assert all(signal.getsignal(sig) == flag.handle
                       for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
        finally:
            restore()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the recorder puts it back
    with StopFlag() as flag:
        restore = flag.install()
        try:
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == flag.handle
        finally:
            restore()


def test_bringup_keeps_a_sighup_ignored_at_its_start(recorder):
    """``nohup cozmo_bringup ...``: the SIGHUP it started with ignored stays so (the
    bring-up outlives its terminal, as asked), SIGINT and SIGTERM are handled."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the recorder puts it back
    runner = bringup.Bringup([], say=lambda text: None)
    assert runner.run(duration=0.05) == 0
    assert {sig for sig, _ in recorder.handlers if sig != signal.SIGHUP} == {signal.SIGINT, signal.SIGTERM}
    assert [h for s, h in recorder.handlers if s == signal.SIGHUP] == [signal.SIG_IGN]
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
