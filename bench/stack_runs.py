"""bench_stack's runs, one row each, read from what the benchmark itself wrote.

Every run of ``bench/bench_stack.py`` replaced its block in docs/benchmarks.md, and the
repository's history keeps each block it committed. This module reads them back (``git
show`` of every commit that changed the page, and the page as it is now), keeps each run
once (by its "Run on" line), and reduces each to one row: when and on which CPU it ran,
the driver code it measured, the one-process stack's memory, and the ratios to pycozmo
that its summary table gave for issue #18's CPU goals, with the floor that its
bare-relay rows measured and pycozmo's own CPU in its consumer rounds. So the figures of
runs on different machines stand side by side without being copied by hand, and
:func:`goal_rows` tallies over them how many runs met each goal.
Runs before 2026-11-29 21:26 left the changer (the program that moves the gaze, and so
makes the face change every frame) out of their face rounds, while pycozmo's figure has
its own gaze moves: a run's row says whether its face rounds counted it, the table of
runs marks the face figures of a run that did not, and the face goal is tallied over the
runs that counted it only.
``bench_stack.py`` writes the table after each run; ``bench_stack.py --runs-only``
writes it without measuring.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from _common import block_markers

BLOCK = "bench_stack"
PAGE = "docs/benchmarks.md"
RUN_LINE = re.compile(r"^Run on (\d{4}-\d\d-\d\d \d\d:\d\d) by `[^`]*`: \d+ cores, ([^,]+),", re.M)
RELAY = re.compile(r"with it [\d.]+, ([\d.]+)x pycozmo")

#: issue #18's CPU goals, as the table's columns after the run's own
FACE = "face changing every frame, one process"
#: the same with the changer on rclpy's EventsExecutor (runs from 2026-11-30 on)
FACE_EVENTS = "face changing every frame, one process, changer on the EventsExecutor"
SINGLE = "driver + consumer (SingleThreadedExecutor)"
WITH_STATE = "driver with camera_with_state + consumer (SingleThreadedExecutor)"
EVENTS = "driver + consumer (EventsExecutor)"
GOALS = (FACE, FACE_EVENTS, SINGLE, WITH_STATE, EVENTS)
#: issue #18's memory goal, as the tally of the runs names it
MEMORY_GOAL = "one-process stack with face and behavior, RSS at most 120 MiB"
MEMORY_LIMIT_MIB = 120.0


def goal_of(name: str) -> Optional[str]:
    """The goal a row of a run's summary table measures, or None (one process per node).
    Runs before 2026-11-25 named no executor: their consumer spun a SingleThreadedExecutor."""
    if name.startswith(FACE_EVENTS):
        return FACE_EVENTS
    if name.startswith(FACE) and "per node" not in name:
        return FACE
    if "camera_with_state" in name:  # runs from 2026-11-28 on
        return WITH_STATE
    if "SingleThreadedExecutor" in name or name == "driver (one-process stack) + a consumer":
        return SINGLE
    if "EventsExecutor" in name:
        return EVENTS
    return None


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout


def block_text(page: str, name: str = BLOCK) -> Optional[str]:
    """The lines between the markers of benchmark block ``name``, or None."""
    begin, end = block_markers(name)
    match = re.search(rf"{re.escape(begin)}\n(.*?){re.escape(end)}", page, re.S)
    return match.group(1) if match else None


def tables(block: str) -> Iterator[Tuple[List[str], List[List[str]]]]:
    """(header, rows) of each markdown table in a block."""
    lines = block.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            header = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("| "):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            yield header, rows
            continue
        i += 1


def _span(values: List[float], digits: int = 2) -> str:
    """"lowest-highest" of ``values`` ("-" for none)."""
    if not values:
        return "-"
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}-{high}"


def counts_changer(header: List[str], rows: List[List[str]]) -> bool:
    """Whether a face table's one-process rounds counted the changer: each names it in
    "CPU % by process" ("stack 7.4 + changer 2.8")."""
    at = header.index("CPU % by process")
    own = [r for r in rows if r[0].startswith("one process") and "per node" not in r[0]]
    return bool(own) and all("changer" in r[at] for r in own)


def summarize(block: str) -> Optional[Dict[str, str]]:
    """One run's row: {"run", "cpu", "memory" (the one-process stack's RSS, lowest-highest
    over its rounds), each goal of
    GOALS: "same window; each alone", "floor", "pycozmo", "changer" ("counted" when its
    face rounds counted the changer in ours, else "not counted")}; None for a block
    without the per-goal summary (runs before --rounds)."""
    head = RUN_LINE.search(block)
    if head is None:
        return None
    row = {"run": head.group(1), "cpu": head.group(2).strip()}
    summary = relay = pycozmo = None
    row["memory"] = "-"
    row["changer"] = "not counted"
    for header, rows in tables(block):
        if "frames/s at the robot" in header and "CPU % by process" in header:  # the face rounds
            if counts_changer(header, rows):
                row["changer"] = "counted"
        elif "RSS MiB" in header and "set-up" in header:  # the one-process stack's total
            at = header.index("RSS MiB")
            row["memory"] = _span([float(r[at].strip("*")) for r in rows  # each round's
                                   if r[0].startswith("one process (") and "the stack" in r[1]], 1)
        elif "goal met in every round" in header:
            summary = rows
        elif "pycozmo CPU %" in header and "received in the window" in header:
            at = header.index("pycozmo CPU %")
            relay = [float(m.group(1)) for r in rows
                     if "bare relay" in r[0] and (m := RELAY.search(r[2]))]
            pycozmo = [float(r[at]) for r in rows if r[0].startswith("driver")]
    if summary is None:
        return None
    spans: Dict[Tuple[str, bool], str] = {}
    for r in summary:
        goal = goal_of(r[0])
        if goal is not None:  # "lowest - highest" of the ratios over the rounds
            spans[goal, r[0].endswith(", each alone")] = r[3].replace(" ", "")
    for goal in GOALS:
        same, alone = spans.get((goal, False), "-"), spans.get((goal, True))
        row[goal] = same if alone is None else f"{same}; {alone}"
    row["floor"] = _span(relay or [])
    row["pycozmo"] = _span(pycozmo or [], 1)
    return row


def _driver_commit(root: Path, rev: Optional[str]) -> str:
    """The last commit of cozmo_driver/ at ``rev`` (None: the working tree, marked
    '+ changes' when it differs from HEAD there)."""
    commit = _git(root, "log", "-1", "--format=%h", rev or "HEAD", "--", "cozmo_driver").strip()
    if rev is None and _git(root, "status", "--porcelain", "--", "cozmo_driver").strip():
        commit += " + changes"
    return commit


def runs(root: Path) -> List[Dict[str, str]]:
    """Every run's row, newest first: the page as it is now, then each commit of it."""
    revs: List[Optional[str]] = [None]
    try:
        revs += _git(root, "log", "--format=%H", "--", PAGE).split()
    except (OSError, subprocess.CalledProcessError):
        pass  # not a git checkout: this run only
    pages: List[Tuple[Optional[str], str]] = []
    for rev in revs:
        try:
            pages.append((rev, (root / PAGE).read_text() if rev is None
                          else _git(root, "show", f"{rev}:{PAGE}")))
        except (OSError, subprocess.CalledProcessError):
            continue

    def code(rev: Optional[str]) -> str:
        try:
            return _driver_commit(root, rev)
        except (OSError, subprocess.CalledProcessError):
            return "-"
    return rows_of(pages, code)


def rows_of(pages: List[Tuple[Optional[str], str]],
            driver_code: Callable[[Optional[str]], str]) -> List[Dict[str, str]]:
    """Every run's row, newest first, from ``pages``: (revision, the page's text), newest
    first. A run's driver code is the one its own table of runs gave (bench_stack writes
    that table right after measuring, with the code it measured), in the oldest page
    listing it; a run no table lists yet gets ``driver_code`` of the oldest revision holding
    its block (the block can be committed with later code, so this is the fallback)."""
    found: Dict[str, List] = {}  # "Run on" line -> [its block, the oldest revision holding it]
    written: Dict[str, str] = {}  # run -> the driver code its oldest table of runs gave
    for rev, page in pages:
        block = block_text(page)
        head = RUN_LINE.search(block or "")
        if head is not None:
            found.setdefault(head.group(0), [block, rev])[1] = rev
        for header, rows in tables(block_text(page, "bench_stack_runs") or ""):
            if header[:3] == HEADER[:3]:
                written.update((r[0], r[2]) for r in rows if len(r) > 2)
    out = []
    for block, rev in found.values():
        row = summarize(block)
        if row is None:
            continue
        row["code"] = written.get(row["run"]) or driver_code(rev)
        out.append(row)
    return sorted(out, key=lambda r: r["run"], reverse=True)


HEADER = ["run", "CPU", "driver code (last commit of cozmo_driver/)",
          f"one-process stack with face and behavior, RSS MiB (goal: at most {MEMORY_LIMIT_MIB:g})"] + \
    [f"{goal}: same window; each alone" for goal in GOALS] + \
    ["floor: bare relay + consumer (SingleThreadedExecutor)", "pycozmo CPU % beside the driver + consumer"]


def _highest(span: str) -> float:
    """The highest ratio of a "lowest-highest" span (or of a single value)."""
    return float(span.split("-")[-1])


def goal_rows(rows: List[Dict[str, str]]) -> List[List[str]]:
    """Issue #18's goals tallied over the runs (rows of :func:`runs`, newest first): [goal,
    runs that measured it, runs that met it (every round) in the same window, the same each
    alone (of the runs that measured that), the runs that missed it with their figure]. The
    face goal counts only the runs whose face rounds counted the changer, and its goal cell
    says how many runs were left out for that."""
    memory = [(r["run"], _highest(r["memory"])) for r in rows if r["memory"] != "-"]
    missed = [f"{run} ({mib:.1f})" for run, mib in memory if mib > MEMORY_LIMIT_MIB]
    out = [[MEMORY_GOAL, str(len(memory)), f"{len(memory) - len(missed)} of {len(memory)}", "-",
            ", ".join(missed) or "none"]]
    for goal in GOALS:
        measured = same_met = alone_runs = alone_met = left_out = 0
        missed = []
        for r in rows:
            if r.get(goal, "-") == "-":  # not measured (a row made before the goal was)
                continue
            if goal == FACE and r.get("changer") != "counted":
                left_out += 1  # its "ours" lacks the gaze moves that pycozmo's figure has
                continue
            same, _, alone = r[goal].partition("; ")
            measured += 1
            why = []
            if _highest(same) <= 1.0:
                same_met += 1
            else:
                why.append(f"{_highest(same):.2f}")
            if alone:
                alone_runs += 1
                if _highest(alone) <= 1.0:
                    alone_met += 1
                else:
                    why.append(f"each alone {_highest(alone):.2f}")
            if why:
                missed.append(f"{r['run']} ({'; '.join(why)})")
        name = goal
        if goal == FACE:
            runs_out = f"{left_out}{' earlier' if measured else ''} run{'s' if left_out != 1 else ''}"
            name += f" (the changer counted; {runs_out} left it out, not tallied)" if left_out else \
                " (the changer counted)"
        out.append([name, str(measured), f"{same_met} of {measured}" if measured else "-",
                    f"{alone_met} of {alone_runs}" if alone_runs else "-",
                    ", ".join(missed) or ("none" if measured else "-")])
    return out


GOAL_HEADER = ["goal", "runs that measured it", "met (every round), same window",
               "met (every round), each alone", "runs that missed it (highest)"]


def table_rows(rows: List[Dict[str, str]]) -> List[List[str]]:
    """The cells of the table of runs, for rows of :func:`runs`."""
    return [[r["run"], r["cpu"], r["code"], r["memory"]] + [_cell(r, goal) for goal in GOALS]
            + [r["floor"], r["pycozmo"]] for r in rows]


def _cell(row: Dict[str, str], goal: str) -> str:
    """A run's figures for ``goal``, its face figures marked when its rounds left the changer out."""
    if goal == FACE and row[goal] != "-" and row.get("changer") != "counted":
        return f"{row[goal]} (changer not counted)"
    return row[goal]
