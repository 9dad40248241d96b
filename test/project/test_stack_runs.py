"""bench/stack_runs.py reads bench_stack's runs back from the blocks the benchmark wrote:
each run's row carries its summary's ratios to the right goal, and the table of runs in
docs/benchmarks.md starts with the run whose block is on the page (bench_stack writes both
at once, so a stale table shows here). Pure: no rclpy, no benchmark run."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import stack_runs  # noqa: E402

NOW = """Run on 2026-11-25 20:04 by `bench/bench_stack.py`: 2 cores, AMD EPYC, Python 3.11.7, Linux 6.

**Memory of the stack with the face and behavior nodes on (MiB)** (load)

| set-up | process | RSS MiB | PSS MiB |
|---|---|---|---|
| one process per node | **the stack: driver + description_publisher + face + behavior** | **332.0** | **210.8** |
| one process (one_process:=true) | stack | 110.3 | 99.3 |
| one process (one_process:=true) | **the stack: stack** | **110.3** | **99.3** |
| reference | a bare rclpy node (rclpy.create_node, spinning) | 61.0 | 52.6 |

**Driver + a consumer of odom and the compressed camera, 20 s windows** (load)

| set-up | round | CPU % by process | ours CPU % | pycozmo CPU % | ours / pycozmo | received in the window |
|---|---|---|---|---|---|---|
| driver (stack) + consumer (SingleThreadedExecutor) | 1 | stack 2.8 + consumer 4.0 | 6.9 | 6.3 | 1.09 | x |
| no driver: a bare rclpy publisher | 1 | consumer 4.1 (with it 5.3, 0.79x pycozmo) | 4.1 | 6.7 | 0.62 | x |
| no driver: a bare relay | 1 | consumer 4.7 (the relay 1.4; with it 6.1, 0.80x pycozmo) | 4.7 | 7.6 | 0.62 | x |
| no driver: a bare relay | 2 | consumer 4.1 (the relay 1.2; with it 5.4, 0.82x pycozmo) | 4.1 | 6.6 | 0.63 | x |
| driver (stack) + consumer (EventsExecutor) | 1 | stack 3.0 + consumer 2.1 | 5.1 | 7.7 | 0.77 | x |

**CPU against pycozmo over the paired rounds above** (load)

| measurement | rounds | ours / pycozmo, median | lowest - highest | goal met in every round |
|---|---|---|---|---|
| face changing every frame, one process per node, same window | 3 | 1.42 | 1.41 - 1.46 | no |
| face changing every frame, one process, same window | 3 | 0.84 | 0.84 - 0.85 | yes |
| face changing every frame, one process, each alone | 3 | 0.94 | 0.91 - 1.13 | no |
| driver (one-process stack) + a consumer on the SingleThreadedExecutor, same window | 3 | 1.06 | 1.06 - 1.09 | no |
| driver (one-process stack, camera_with_state) + a consumer on the SingleThreadedExecutor, same window | 3 | 0.95 | 0.93 - 0.97 | yes |
| driver (one-process stack) + a consumer on the EventsExecutor, same window | 3 | 0.77 | 0.76 - 0.79 | yes |
"""  # noqa: E501 - a row as bench_stack writes it

#: a run from before the executors were named and the windows each alone existed
OLD = """Run on 2026-11-24 21:11 by `bench/bench_stack.py`: 2 cores, AMD EPYC, Python 3.11.7, Linux 6.

| measurement | rounds | ours / pycozmo, median | lowest - highest | goal met in every round |
|---|---|---|---|---|
| face changing every frame, one process | 3 | 1.04 | 1.04 - 1.05 | no |
| driver (one-process stack) + a consumer | 3 | 1.34 | 1.33 - 1.35 | no |
"""


def test_a_run_is_one_row_of_its_goals_floor_and_pycozmo():
    row = stack_runs.summarize(NOW)
    assert row == {
        "run": "2026-11-25 20:04", "cpu": "AMD EPYC",
        "memory": "110.3",                               # the one-process stack's total
        stack_runs.FACE: "0.84-0.85; 0.91-1.13",        # per node is not the goal's
        stack_runs.SINGLE: "1.06-1.09",                 # not the camera_with_state row's
        stack_runs.WITH_STATE: "0.93-0.97",
        stack_runs.EVENTS: "0.76-0.79",
        "floor": "0.80-0.82",                            # the relay's rows, not the publisher's
        "pycozmo": "6.3-7.7",                            # beside the driver only
    }


def test_an_older_run_without_executor_names_counts_as_single_threaded():
    row = stack_runs.summarize(OLD)
    assert row[stack_runs.FACE] == "1.04-1.05"
    assert row[stack_runs.SINGLE] == "1.33-1.35"
    assert row[stack_runs.EVENTS] == "-" and row["floor"] == "-" and row["pycozmo"] == "-"
    assert row[stack_runs.WITH_STATE] == "-"
    assert row["memory"] == "-"


def test_a_block_without_a_summary_is_no_run():
    assert stack_runs.summarize(NOW.split("**CPU against")[0]) is None
    assert stack_runs.summarize("no run line") is None


def test_the_table_of_runs_starts_with_the_run_on_the_page():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    latest = stack_runs.RUN_LINE.search(stack_runs.block_text(page)).group(1)
    rows = [r for _, rows in stack_runs.tables(stack_runs.block_text(page, "bench_stack_runs"))
            for r in rows]
    assert rows and rows[0][0] == latest, (latest, rows[:1])
    assert len(rows) == len({r[0] for r in rows}), "a run is listed twice"
