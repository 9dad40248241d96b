"""What the benchmark scripts do around their measurements, without measuring anything:
each case imports a script under bench/ in a process of its own (they reserve a ROS
domain and read their command line on import), with the steps that would start
simulators, drivers or installations replaced, and with --no-docs, so that no docs page
is written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Optional

from processes import alive

ROOT = Path(__file__).resolve().parents[2]


def run_script_code(script: str, code: str, timeout: float = 120.0) -> dict:
    """Run ``code`` after importing bench/``script`` as ``b`` (argv: the script, --no-docs);
    the JSON object it prints on its last line."""
    prelude = textwrap.dedent(f"""\
        import json, os, sys
        sys.argv = [{script + '.py'!r}, "--no-docs"]
        sys.path.insert(0, {str(ROOT / 'bench')!r})
        import {script} as b
        """)
    result = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=timeout, cwd=ROOT)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_bench_driver_cleans_up_after_a_driver_that_does_not_stream():
    """A driver that exits before streaming: bench_ours raised UnboundLocalError from its
    finally (``companion`` was set only once the CPU measurements began), hiding the real
    error, and neither stopped the driver nor closed the simulator and its relay."""
    out = run_script_code("bench_driver", """
        import io
        done = []

        class Tap:
            port = 9
            def close(self):
                done.append("tap closed")

        class Proc:
            pid = os.getpid()
            stderr = io.StringIO("the driver said no")
            def poll(self):
                return 3

        b.Tap = Tap
        b.start_driver = lambda port, extra: Proc()
        b.stop_process = lambda proc, *args: done.append("driver stopped")
        try:
            b.bench_ours()
            error = None
        except BaseException as exc:  # noqa: BLE001
            error = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"error": error, "done": done}))
        """)
    assert out["error"] == "RuntimeError: the driver did not stream: the driver said no", out
    assert sorted(out["done"]) == ["driver stopped", "tap closed"], out


def test_bench_driver_starts_the_simulator_and_the_driver_on_a_lifeline():
    """The simulator ran without --duration and neither it nor the driver had the
    parent-death protection: a benchmark that died left them running for ever."""
    out = run_script_code("bench_driver", """
        import io
        import subprocess
        from cozmo_driver.lifeline import PARENT_PID_ENV
        started = []

        class Popen:
            def __init__(self, cmd, **kwargs):
                started.append({"cmd": [str(c) for c in cmd],
                                "parent": (kwargs.get("env") or {}).get(PARENT_PID_ENV)})
                tap = any(str(c).endswith("udp_tap.py") for c in cmd)
                self.stdout = io.StringIO("ready 6\\n" if tap else "cozmo-sim on udp://127.0.0.1:5\\n")
                self.stdin = io.StringIO()
                self.pid = 1

        subprocess.Popen = Popen
        b.Tap()
        b.start_driver(5, {})
        print(json.dumps({"started": started, "pid": str(os.getpid())}))
        """)
    sim, _tap, driver = out["started"]
    assert "cozmo_driver.sim.cli" in sim["cmd"] and "--duration" in sim["cmd"], sim
    assert float(sim["cmd"][sim["cmd"].index("--duration") + 1]) > 0, sim
    assert sim["parent"] == out["pid"], sim
    assert driver["parent"] == out["pid"], driver



def test_bench_stack_starts_its_bring_ups_on_a_lifeline():
    """cozmo_bringup was started without COZMO_PARENT_PID: after a SIGKILL of the benchmark
    (timeout -s KILL, the OOM killer) the bring-up and its nodes ran for ever."""
    out = run_script_code("bench_stack", """
        import io
        from cozmo_driver.lifeline import PARENT_PID_ENV
        started = []

        class Popen:
            def __init__(self, cmd, **kwargs):
                started.append({"cmd": [str(c) for c in cmd],
                                "parent": (kwargs.get("env") or {}).get(PARENT_PID_ENV)})

        class Sim:
            address = ("127.0.0.1", 5)

        b.subprocess.Popen = Popen
        run = b.Bringup(Sim(), "one_process:=true")
        os.unlink(run.log.name)
        print(json.dumps({"started": started, "pid": str(os.getpid())}))
        """)
    (bringup,) = out["started"]
    assert any("bringup" in c for c in bringup["cmd"]), bringup
    assert bringup["parent"] == out["pid"], bringup


def test_bench_stack_helpers_end_when_the_benchmark_is_killed():
    """The consumer, the face changer and pycozmo's session (``python -c`` helpers, which
    call no exit_with_parent) outlived a benchmark killed with SIGKILL."""
    code = textwrap.dedent(f"""\
        import os, signal, sys
        sys.argv = ["bench_stack.py", "--no-docs"]
        sys.path.insert(0, {str(ROOT / 'bench')!r})
        import bench_stack as b
        helper = b._script_process("import time; print('ready', flush=True); time.sleep(120)")
        print(helper.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """)
    bench = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           cwd=ROOT)
    assert bench.returncode == -signal.SIGKILL, (bench.stdout[-3000:], bench.stderr[-3000:])
    helper = int(bench.stdout.split()[-1])
    try:
        for _ in range(100):   # SIGTERM is on its way: a moment for it to land
            if not alive(helper):
                break
            time.sleep(0.1)
        assert not alive(helper), "the helper outlived the benchmark killed with SIGKILL"
    finally:
        if alive(helper):
            os.kill(helper, signal.SIGKILL)



def test_bench_driver_readme_quote_says_its_cpu_is_the_driver_process_alone():
    """The README's "CPU % of one core while the robot streams its state and camera: 4.1
    against 6.9" set the driver process alone (its subscriber, the benchmark, not counted)
    against pycozmo's whole program, and said nothing of it. The README's block carries the
    generator's words, so the next run writes the same."""
    out = run_script_code("bench_driver", """
        import contextlib, io
        ms = [0.001, 0.002]
        ours = {"cmd": ms, "odom": ms, "image": ms, "cpu odom + compressed": {"cpu": 4.0, "pycozmo": 7.0}}
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            b.readme_quote(ours, {"cmd": ms, "odom": ms, "image": ms})
        rows = printed.getvalue().strip().splitlines()[3:]   # after the title, the header and its rule
        print(json.dumps({"labels": [row.strip().split("  ")[0] for row in rows]}))
        """)
    cpu = [label for label in out["labels"] if label.startswith("CPU %")]
    assert len(cpu) == 1 and "the driver process alone" in cpu[0], out
    assert "the program that subscribes not counted" in cpu[0] and "bench_stack" in cpu[0], cpu
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- bench_driver: begin -->")[1].split("<!-- bench_driver: end -->")[0]
    written = [line.split(" | ")[0].lstrip("| ") for line in block.splitlines() if line.startswith("| ")]
    assert written[1:] == out["labels"], (written, out["labels"])   # the header row first



#: bench_stack's face round with what would start simulators, bring-ups and helper processes
#: replaced (each test gives b._script_process and b._cpu_window): a simulator whose display
#: count grows 40 a call, a bring-up of one process (pid 101), processes with a pid only
FACE_ROUND_STUBS = """
        import time

        class Sim:
            address = ("127.0.0.1", 5)
            shown = 0
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return False
            def display_count(self):
                self.shown += 40
                return self.shown

        class Bringup:
            def __init__(self, sim, *args):
                pass
            def children(self):
                return {"stack": 101}
            def close(self):
                pass

        class Proc:
            def __init__(self, pid):
                self.pid = pid
            def kill(self):
                pass
            def wait(self):
                pass

        b.SimServer = lambda **kwargs: Sim()
        b.Bringup = Bringup
        b._check_reference = lambda *args, **kwargs: None
        time.sleep = lambda s: None
"""

def test_bench_stack_counts_the_face_changer_in_ours():
    """The face rounds summed only the bring-up's processes into "ours": the program that
    moves the gaze 30 times a second (what makes the face change every frame) was left out,
    while pycozmo's figure includes its own gaze moves and the consumer rounds count the
    consumer. Here every process's CPU is given: the stack 6 %, the changer 3 %, pycozmo 8 %."""
    out = run_script_code("bench_stack", FACE_ROUND_STUBS + """
        cpu_of = {101: 6.0, 202: 3.0, 303: 8.0}
        b._script_process = lambda source, *args: Proc(202 if args[0] == "changer" else 303)
        b._cpu_window = lambda pids, seconds: {k: cpu_of[pid] for k, pid in pids.items()}
        ratios = {}
        row = b._face_round(20.0, "one process", ["one_process:=true"], 1, ratios)
        print(json.dumps({"row": row, "ratios": ratios}))
        """)
    row, ratios = out["row"], out["ratios"]
    assert "changer 3.0" in row[2] and row[3] == "9.0", row   # CPU % by process; ours
    assert row[7] == "1.12" and row[8] == "9.0" and row[10] == "1.12", row   # 9 / 8, same window and alone
    assert ratios == {"face changing every frame, one process, same window": [9.0 / 8.0],
                      "face changing every frame, one process, each alone": [9.0 / 8.0]}, ratios


def test_bench_stack_moves_the_face_with_a_changer_on_each_executor():
    """The face rounds ran their changer (a plain 30 Hz rclpy timer: the user's program) on
    the SingleThreadedExecutor only, while the consumer rounds are measured on both
    executors: where rclpy has the EventsExecutor, a third set-up runs the one-process
    stack with the changer spinning on it, its ratios under a name of their own."""
    out = run_script_code("bench_stack", FACE_ROUND_STUBS + """
        changers = []

        def script_process(source, *args):
            if args[0] == "changer":
                changers.append(list(args[2:]))
                return Proc(202)
            return Proc(303)

        b._script_process = script_process
        b._cpu_window = lambda pids, seconds: {k: {101: 5.0, 202: 2.0, 303: 8.0}[p] for k, p in pids.items()}
        b._has_events_executor = lambda: True
        ratios = {}
        rows = b.face_cpu(20.0, 1, ratios, [])
        print(json.dumps({"setups": [r[0] for r in rows], "changers": changers, "ratios": sorted(ratios)}))
        """)
    assert out["setups"] == ["one process per node", "one process", "one process, changer on the EventsExecutor"], out
    assert out["changers"] == [[], [], ["events"]], out   # HELPER's third argument: its executor
    assert "face changing every frame, one process, changer on the EventsExecutor, same window" in out["ratios"]
    assert "face changing every frame, one process, same window" in out["ratios"]


STOP_CYCLES = """
    import contextlib, io, tempfile
    from pathlib import Path
    import _common

    scratch = tempfile.TemporaryDirectory()
    tempfile.tempdir = scratch.name   # the run's log directory too (kept after an interrupt)
    docs = Path(tempfile.mkdtemp()) / "benchmarks.md"
    docs.write_text("".join(f"<!-- stop_cycles_{m}: begin -->\\nold\\n<!-- stop_cycles_{m}: end -->\\n"
                            for m in ("bringup", "launch")))
    _common.WRITE_DOCS = True   # into the page above only
    real_report = b.bench_report
    b.bench_report = lambda name, **kwargs: real_report(name, docs=docs)
    # ros2 launch installed: the mode auto would take it
    b.choose_mode = lambda mode: "bringup" if mode == "bringup" else "launch"

    def run_cycle(index, mode, options, logs, last_domain):
        if index == INTERRUPT_AT:
            raise KeyboardInterrupt
        return b.Cycle(index, 7, 5000 + index, logs / "cycle.log", exit_code=0, first_odom_s=1.5, stop_s=0.5)

    b.run_cycle = run_cycle
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = b.main(ARGV)
    text = docs.read_text()
    scratch.cleanup()
    written = [m for m in ("bringup", "launch") if f"stop_cycles_{m}: begin -->\\nold" not in text]
    print(json.dumps({"code": code, "printed": printed.getvalue(), "written": written}))
    """


def test_stop_cycles_writes_the_block_of_the_mode_it_ran():
    """--mode=bringup (one argument) fell through to the mode auto, whose block is
    stop_cycles_launch where ros2 launch is installed: cozmo_bringup's cycles overwrote
    the launch block."""
    out = run_script_code("stop_cycles", STOP_CYCLES.replace("INTERRUPT_AT", "-1")
                          .replace("ARGV", '["--mode=bringup", "-n", "2"]'))
    assert out["code"] == 0, out
    assert out["written"] == ["bringup"], out


def test_stop_cycles_writes_no_block_after_an_interrupt():
    """Ctrl-C was caught and the run ended as if complete: the partial run replaced the
    recorded one in docs/benchmarks.md."""
    out = run_script_code("stop_cycles", STOP_CYCLES.replace("INTERRUPT_AT", "2")
                          .replace("ARGV", '["--mode", "bringup", "-n", "5"]'))
    assert out["written"] == [], out
    assert out["code"] != 0, out
    assert "cycles run, clean" in out["printed"] and "2, 2" in out["printed"], out["printed"]
    assert "not written" in out["printed"], out["printed"]


def test_bench_setup_judges_the_goal_on_the_median_and_prints_every_run():
    """The 60 s goal was judged on the fastest set-up (one in three under it read "met"),
    and the table only went to docs/benchmarks.md: with --no-docs nothing was printed."""
    out = run_script_code("bench_setup", """
        import contextlib, io
        walls = iter([50.0, 70.0, 80.0])

        def one_round(installer, base_env):
            steps = {"building cozmo_interfaces into .venv": 30.0}
            return {"fresh": {"wall": next(walls), "steps": steps, "lines": []},
                    "again": {"wall": 0.3, "steps": {}, "lines": []}}

        b.one_round = one_round
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = b.main(["--rounds", "3", "--installers", "uv"])
        print(json.dumps({"code": code, "printed": printed.getvalue()}))
        """)
    printed = out["printed"]
    assert "building cozmo_interfaces into .venv" in printed and "70.0 (50.0-80.0)" in printed, printed
    goal = [line for line in printed.splitlines() if line.lstrip().startswith("uv")]
    assert goal, printed
    assert "50.0, 70.0, 80.0" in goal[-1] and "1/3" in goal[-1], printed
    assert goal[-1].split()[-2:] == ["no", "no"], printed   # met at the median, in every run
    assert " met by uv" not in printed, printed


def test_bench_setup_timeout_ends_every_process_of_the_set_up():
    """On its timeout subprocess.run killed ./dev (bash) only: uv, colcon, cmake and the
    generators it started went on building. Here a ./dev that starts a child and hangs."""
    out = run_script_code("bench_setup", """
        import pathlib, shutil, stat, tempfile
        work = pathlib.Path(tempfile.mkdtemp())
        dev = work / "dev"
        dev.write_text("#!/bin/bash\\nsleep 120 &\\necho $! > child.pid\\nwait\\n")
        dev.chmod(dev.stat().st_mode | stat.S_IXUSR)
        b.TIMEOUT_S = 1.0
        try:
            b.run_setup(work, dict(os.environ))
            error = None
        except BaseException as exc:  # noqa: BLE001
            error = f"{type(exc).__name__}: {exc}"
        child = int((work / "child.pid").read_text())
        shutil.rmtree(work)
        print(json.dumps({"error": error, "child": child}))
        """)
    child = out["child"]
    try:
        for _ in range(100):   # SIGKILL is on its way: a moment for it to land
            if not alive(child):
                break
            time.sleep(0.1)
        assert not alive(child), "the set-up's child outlived the timeout"
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
    assert "did not finish within 1 s" in out["error"] and "killed" in out["error"], out


def test_bench_av_refuses_a_window_too_short_for_two_diagnostics_reports():
    """--seconds 0 meant the default 10 s, negative windows were taken, and --seconds 1
    usually saw one /diagnostics report (1 Hz) and ended blaming another stack in the
    ROS domain: under 2 s is a usage error saying why; 2 s and over are measured."""
    out = run_script_code("bench_av", """
        import contextlib, io
        measured = []
        b.bench_face_node = lambda probe, seconds: measured.append(seconds)
        b.bench_driver = lambda probe, seconds: None
        outcome = {}
        for value in ("0", "-5", "1", "1.9", "nan", "inf", "2", "7.5"):
            sys.argv = ["bench_av.py", "--seconds", value]
            errors = io.StringIO()
            try:
                with contextlib.redirect_stderr(errors):
                    b.main()
                outcome[value] = ["ran", measured[-1]]
            except SystemExit as exc:
                outcome[value] = ["exit", exc.code, errors.getvalue().strip().splitlines()[-1:]]
        print(json.dumps(outcome))
        """)
    for value in ("0", "-5", "1", "1.9", "nan", "inf"):
        assert out[value][:2] == ["exit", 2], (value, out[value])
        assert "at least 2" in out[value][2][0] and "/diagnostics" in out[value][2][0], (value, out[value])
    assert out["2"] == ["ran", 2.0] and out["7.5"] == ["ran", 7.5], out


def test_bench_scale_readme_quote_says_whether_the_camera_was_on():
    """With --camera the README's quote kept the title "one subscriber of every robot's
    odom" over figures measured with every robot streaming its camera."""
    out = run_script_code("bench_scale", """
        import contextlib, io
        result = {"n": 1, "startup_s": [0.5], "active_s": [1.0], "cpu_pct": [3.0], "odom_hz": [33.3],
                  "pss_mib": [70.0], "odom_age_ms": {"median": 1.0, "p99": 1.5}, "camera_fps": [14.9]}
        titles = {}
        for camera in (False, True):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                b.readme_quote([dict(result, camera_fps=result["camera_fps"] if camera else None)], camera)
            titles[str(camera)] = printed.getvalue().strip().splitlines()
        print(json.dumps(titles))
        """)
    off, on = out["False"], out["True"]
    assert "one subscriber of every robot's odom (" in off[0] and "camera" not in off[0] + off[1], off
    assert "one subscriber of every robot's odom and compressed camera" in on[0], on
    assert "camera fps" in on[1] and "14.9" in on[3], on


# ----------------------------------------------------------------------------- the load of each table

#: a prelude for :func:`run_script_code`: every report's load average is 1.0 but in a sample
#: that a measurement stubbed below takes with ``busy(load)``; no thread samples, and
#: ``titles()`` gives the first line (title and load) of every table of every report
LOADS = """\
import _common
state = {"load": 1.0}
reports = []

class Report(_common.BenchReport):
    def __init__(self, name):
        super().__init__(name, load=lambda: state["load"], every=None)
        reports.append(self)

_common.BenchReport = Report

def busy(load):
    state["load"] = load
    _common._report.sample()
    state["load"] = 1.0

def titles():
    return [t.splitlines()[0] for r in reports for t in r.tables]
"""


def load_max(title: str) -> Optional[str]:
    """The highest load average a table's title gives (None: it gives none)."""
    found = re.search(r"\(load average \(1 min\) while measured: mean [0-9.]+, max ([0-9.]+) on \d+ cores\)$",
                      title)
    return found.group(1) if found else None


def test_bench_report_gives_each_table_the_load_of_its_window():
    """A table had only the samples since the previous table: one added after another of the
    same measurement had the load of an instant. Every sample is now kept with its time, and
    a table's window is since the previous table, or since the ``since`` it is given."""
    out = run_script_code("_common", """
        times = iter(range(100))
        loads = iter([1.0, 3.0, 1.0, 5.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0])
        report = b.BenchReport("x", clock=lambda: float(next(times)), load=lambda: next(loads), every=None)
        report.sample()                                  # t 1: 3.0
        report.add("A", ["h"], [["1"]])                  # t 2: since the start (t 0)
        report.sample()                                  # t 3: 5.0
        report.add("B", ["h"], [["1"]])                  # t 4: since A
        report.add("C", ["h"], [["1"]], since=0.0)       # t 5: the whole run
        report.add("D", ["h"], [["1"]], measured=False)  # t 6: no load
        report.sample()                                  # t 7: 2.0
        report.add("E", ["h"], [["1"]])                  # t 8: since D
        report.add("F", ["h"], [["1"]], since=3.0)       # t 9: since t 3, samples before A, B and C too
        print(json.dumps({"titles": [t.splitlines()[0] for t in report.tables],
                          "thread": report._thread is not None}))
        """)
    a, b_, c, d, e, f = out["titles"]
    assert "mean 1.67, max 3.00 on" in a and a.startswith("**A** (load average (1 min) while measured: "), a
    assert "mean 2.33, max 5.00 on" in b_, b_   # the sample that ended A starts B
    assert "mean 2.00, max 5.00 on" in c, c
    assert d == "**D**", d
    assert "mean 1.33, max 2.00 on" in e, e
    assert "mean 1.71, max 5.00 on" in f, f   # t 3 to 9: 5, 1, 1, 1, 2, 1, 1
    assert not out["thread"], out


def test_bench_report_keeps_what_its_thread_sampled():
    """The thread's samples (every ``every`` s) go into the windows with the others."""
    out = run_script_code("_common", """
        import threading
        calls = []
        sampled = threading.Event()

        def load():   # 7.0 in the thread's samples, 1.0 in the others (the first, the table's)
            if threading.current_thread() is threading.main_thread():
                return 1.0
            calls.append(None)
            if len(calls) >= 3:
                sampled.set()
            return 7.0

        report = b.BenchReport("x", load=load, every=0.01)
        waited = sampled.wait(30.0)
        report.add("A", ["h"], [["1"]])
        report.markdown()   # stops the thread
        print(json.dumps({"waited": waited, "title": report.tables[0].splitlines()[0],
                          "alive": report._thread.is_alive()}))
        """)
    assert out["waited"], "the thread took no samples in 30 s"
    assert "max 7.00 on" in out["title"], out
    assert not out["alive"], out


def run_with_loads(script: str, code: str) -> list:
    """The first line (title and load) of every table that ``code`` made, run after importing
    bench/``script`` and :data:`LOADS`."""
    out = run_script_code(script, LOADS + textwrap.dedent(code) + "print(json.dumps({'titles': titles()}))\n")
    return out["titles"]


def test_bench_driver_gives_both_tables_the_load_of_both_measurements():
    """The latency and CPU tables are added once both measurements are over: the CPU table
    had the load of the moment it was added."""
    titles = run_with_loads("bench_driver", """
        label_cases = [label for label, _ in b.CPU_CASES]
        ours = {f"cpu {label}": {"cpu": 5.0, "pycozmo": 6.0, "rss": 50.0, "state_hz": 30.0, "fps": 15.0}
                for label in label_cases}
        b.pycozmo = None   # pycozmo's own measurement left out
        b.bench_ours = lambda companion: busy(9.0) or ours
        with b.bench_report("bench_driver"):
            b.main()
        """)
    assert len(titles) == 2 and [load_max(t) for t in titles] == ["9.00", "9.00"], titles


def test_bench_face_frames_gives_both_tables_the_load_of_the_run():
    """The frames and CPU tables come from the same window: the CPU table had the load of the
    moment it was added."""
    titles = run_with_loads("bench_face_frames", """
        b.isolate_ros = lambda: ""
        b.run = lambda seconds, warmup: busy(9.0) or ([["frames published", "1"]], [["driver", "1.0"]])
        b.main()
        """)
    assert len(titles) == 2 and [load_max(t) for t in titles] == ["9.00", "9.00"], titles


def test_bench_startup_gives_every_table_the_load_of_the_rounds():
    """The three tables are added after every round: the second and third had the load of the
    moment they were added (and the first counted the warm-up round, which is not measured)."""
    titles = run_with_loads("bench_startup", """
        sys.argv = ["bench_startup.py", "--runs", "2"]
        args = b._arguments()

        def one_round(k, args, env, logs, programs):
            busy(20.0 if k == 0 else 9.0)   # k 0: the warm-up
            return {p: {"first_s": 0.4, "matched_s": 0.2, "cpu_s": 0.3, "phases": [["imports", 0.1]]}
                    for p in programs}

        b.one_round = one_round
        with b.bench_report("bench_startup"):
            b.main(args)
        """)
    assert len(titles) == 3 and [load_max(t) for t in titles] == ["9.00"] * 3, titles


def test_bench_scale_gives_every_table_the_load_of_every_n():
    """The tables, a row per N, are added after the last N: the second and third had the load
    of the moment they were added."""
    titles = run_with_loads("bench_scale", """
        import contextlib, io
        sys.argv = ["bench_scale.py", "--counts", "1,2"]

        def run_n(n, args, tmp):
            busy({1: 9.0, 2: 7.0}[n])
            return {"n": n, "startup_s": [0.5] * n, "startup_cpu_s": [0.3] * n, "active_s": [1.0] * n,
                    "active_cpu_s": [0.6] * n, "cpu_pct": [3.0] * n, "rss_mib": [80.0] * n,
                    "pss_mib": [70.0] * n, "odom_hz": [33.3] * n, "odom_age_ms": {"median": 1.0, "p99": 1.5},
                    "load1": {"mean": 1.0, "max": 1.0}, "machine_busy_pct": 20.0, "sims_cpu_pct": 5.0,
                    "subscriber_cpu_pct": 2.0, "driver_stop_s": 0.4, "stopped": [],
                    "checks": {"every robot streamed": True}}

        b.run_n = run_n
        with b.bench_report("bench_scale"), contextlib.redirect_stdout(io.StringIO()):
            b.main()
        """)
    assert len(titles) == 3 and [load_max(t) for t in titles] == ["9.00"] * 3, titles


def test_bench_setup_gives_both_tables_the_load_of_the_rounds():
    """The set-up's steps and the goal's table come from the same rounds: the goal's table
    had the load of the moment it was added."""
    titles = run_with_loads("bench_setup", """
        def one_round(installer, base_env):
            busy(9.0)
            return {"fresh": {"wall": 50.0, "steps": {"building": 30.0}, "lines": []},
                    "again": {"wall": 0.3, "steps": {}, "lines": []}}

        b.one_round = one_round
        with b.bench_report("bench_setup"):
            b.main(["--rounds", "2", "--installers", "uv"])
        """)
    assert len(titles) == 2 and [load_max(t) for t in titles] == ["9.00", "9.00"], titles


def test_fuzz_stack_gives_every_table_the_load_of_the_run():
    """Every table is added once the run is over: all but the first had the load of the moment
    they were added."""
    titles = run_with_loads("fuzz_stack", """
        import contextlib, io
        b.run_stack = lambda options: busy(9.0) or {"windows": [], "fuzz": None, "seconds": 1.0, "seed": 1,
                                                     "count": 1, "logs": "-"}
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            b.main(["--count", "1", "--seconds", "1"])
        """)
    assert len(titles) == 2 and [load_max(t) for t in titles] == ["9.00", "9.00"], titles


def test_bench_stack_gives_the_tables_of_the_rounds_their_load():
    """"Attempts not counted" and the ratio table are made of the face and consumer rounds but
    had the load of the moment they were added; the tables measured one after the other keep
    the load since the table before."""
    titles = run_with_loads("bench_stack", """
        import argparse

        def rows(load, columns):
            busy(load)
            return [["x"] * columns]

        def face_cpu(seconds, rounds, ratios, stalled):
            ratios["face"] = [0.9]
            stalled.append(["face, round 1", "1", "frames 10 %"])
            return rows(9.0, 11)

        b.memory = lambda settle, rounds: rows(2.0, 4)
        b.where_memory_goes = lambda: rows(3.0, 3)
        b.face_cpu = face_cpu
        b.driver_consumer_cpu = lambda seconds, rounds, ratios, stalled: rows(8.0, 10)
        b.measure(argparse.Namespace(seconds=20.0, settle=10.0, rounds=1))
        """)
    assert [load_max(t) for t in titles] == ["2.00", "3.00", "9.00", "8.00", "9.00", "9.00"], titles
