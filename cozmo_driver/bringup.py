"""``cozmo_bringup``: the launch file's job, for set-ups without the launch system.

Starts what :mod:`cozmo_driver.bringup_plan` lists, as ``launch/cozmo.launch.py``
does, from the same plan, with the same arguments in either form::

    cozmo_bringup use_sim:=true namespace:=robot1
    cozmo_bringup --use-sim true --namespace robot1 --duration 20

Each process is a child with ``--ros-args`` built from its entry: ``-r __node:=``,
``-r __ns:=/<namespace>``, ``--params-file`` for each of the plan's parameter
files (:func:`~cozmo_driver.bringup_plan.parameter_files`: the config file, and
the plan's own values written to a temporary directory under the node's name),
``-r from:=to``. With ``one_process:=true`` the driver, description, face and
behavior nodes are one child, ``cozmo_stack``, with one such ``--ros-args``
section per node (:func:`~cozmo_driver.bringup_plan.stack_arguments`). Where
robot_state_publisher is not installed, its fallback
``cozmo_description_publisher`` is started instead; an enabled entry that is
not installed at all is skipped with a message.

Ctrl-C (SIGINT), SIGTERM or SIGHUP stop every child: SIGINT in reverse start
order, then SIGTERM and SIGKILL for those still running after
``--stop-timeout``. The bring-up also stops when a required process (the
driver, the simulator) exits, and after ``--duration`` seconds if given; a
failure while starting (a process that cannot be started) stops what was
started. Its exit status is that of the driver, the one-process stack or the
simulator when it failed, else 0.
Children run in their own sessions, so a Ctrl-C in the terminal reaches them
once, through the bring-up; and they end when the bring-up dies, even by
SIGKILL (:mod:`cozmo_driver.lifeline`: SIGTERM from Linux).
"""

from __future__ import annotations

import argparse
import math
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import bringup_plan as plan
from .console import say
from .lifeline import exit_with_parent, parent_death_preexec

__all__ = ["parse_command_line", "effective_arguments", "Bringup", "Child", "main"]

PROG = "cozmo_bringup"
_LAUNCH_STYLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):=(.*)$", re.DOTALL)
_TERM_GRACE_S = 2.0
#: lines of each generated parameter file that --dry-run shows
_DRY_RUN_LINES = 12
#: what stops the bring-up in order (SIGHUP: its terminal closed; the children, in
#: sessions of their own, would not get it), SIGHUP only where the bring-up did not start
#: with it ignored (``nohup``: meant to outlive its terminal), as the nodes do
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _say(text: str) -> None:
    say(f"{PROG}: {text}")  # stdout gone (a closed pipe): the bring-up still stops


# ---------------------------------------------------------------------------- command line

def _parser() -> argparse.ArgumentParser:
    descriptions = plan.argument_descriptions()
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Start the Cozmo driver, its robot description and optional nodes (and "
                    "the simulator), as `ros2 launch cozmo_driver cozmo.launch.py` does. "
                    "Arguments are given as name:=value (as ros2 launch takes them) or "
                    "--name value.",
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
        epilog="The processes and the argument defaults come from cozmo_driver/bringup_plan.py.")
    group = parser.add_argument_group("launch arguments (name:=value or --name value)")
    for arg in plan.ARGUMENTS:
        flags = [f"--{arg.name.replace('_', '-')}"]
        if "_" in arg.name:
            flags.append(f"--{arg.name}")
        group.add_argument(*flags, dest=arg.name, default=None, metavar="VALUE",
                           help=f"{descriptions[arg.name]} [default: {arg.default!r}]")
    parser.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                        help="stop everything after this many seconds (default: run until "
                             "Ctrl-C, SIGTERM or the driver exits)")
    parser.add_argument("--stop-timeout", type=float, default=5.0, metavar="SECONDS",
                        help="how long the children get to exit after SIGINT before SIGTERM "
                             "and SIGKILL (default: 5)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the command of every process and exit")
    return parser


def split_launch_style(parser: argparse.ArgumentParser, argv: Sequence[str],
                       known: Optional[Sequence[str]] = None
                       ) -> Tuple[Dict[str, str], List[str]]:
    """({name: value} of the ``name:=value`` tokens, the other tokens); a name that is not
    in ``known`` (default: the plan's arguments) is a usage error of ``parser``, with the
    plan's message (:func:`~cozmo_driver.bringup_plan.check_argument_names`)."""
    launch_style: Dict[str, str] = {}
    rest: List[str] = []
    for token in argv:
        match = _LAUNCH_STYLE.match(token)
        if match:
            name, value = match.groups()
            launch_style[name] = value
        else:
            rest.append(token)
    try:
        plan.check_argument_names(launch_style, known=known)
    except plan.PlanError as exc:
        parser.error(str(exc))
    return launch_style, rest


def _refuse_unrecognized(parser: argparse.ArgumentParser, extra: Sequence[str]) -> None:
    """A usage error for what argparse did not recognise: an option close to a launch
    argument (``--use-simm``) or a node's parameter (``--local-port``) gets the plan's message."""
    names = [token[2:].split("=", 1)[0].replace("-", "_") for token in extra
             if token.startswith("--") and len(token) > 2]
    try:
        plan.check_argument_names([name for name in names
                                   if plan.closest_name(name) or plan.node_parameter_owners(name)])
    except plan.PlanError as exc:
        parser.error(str(exc))
    parser.error(f"unrecognized arguments: {' '.join(extra)}")


def parse_command_line(argv: Sequence[str]) -> Tuple[Dict[str, str], argparse.Namespace]:
    """({launch argument: value} as given, the other options). ``name:=value`` and
    ``--name value`` may be mixed; an unknown name is an error (as in the launch file,
    with a close match suggested), and so is an abbreviated option."""
    parser = _parser()
    known = {arg.name for arg in plan.ARGUMENTS}
    launch_style, rest = split_launch_style(parser, argv)
    options, extra = parser.parse_known_args(rest)
    if extra:
        _refuse_unrecognized(parser, extra)
    values = {name: getattr(options, name) for name in known if getattr(options, name) is not None}
    both = sorted(set(values) & set(launch_style))
    if both:
        parser.error(f"given twice: {', '.join(both)}")
    values.update(launch_style)
    # NaN passes both comparisons; an infinite wait overflows (threading's timeout)
    if options.duration is not None and not (0 < options.duration < math.inf):
        parser.error(f"--duration must be a positive number of seconds, not {options.duration:g}")
    if not 0 <= options.stop_timeout < math.inf:
        parser.error(f"--stop-timeout must be a number of seconds, 0 or more, not {options.stop_timeout:g}")
    return values, options


def effective_arguments(argv: Sequence[str]) -> Dict[str, str]:
    """Every launch argument's value for this command line (the plan's default where not given)."""
    values, _ = parse_command_line(argv)
    result = plan.argument_defaults()
    result.update(values)
    return result


# ---------------------------------------------------------------------------- processes

@dataclass
class Child:
    """A started process of an entry."""

    entry: plan.ProcessEntry
    command: List[str]
    process: subprocess.Popen

    @property
    def label(self) -> str:
        return f"{self.entry.name} ({self.entry.executable}, pid {self.process.pid})"


class Bringup:
    """Starts plan entries as child processes, watches them and stops them."""

    def __init__(self, entries: Sequence[plan.ProcessEntry], stop_timeout: float = 5.0,
                 locate: Callable[[str, str], Optional[Path]] = plan.locate_executable,
                 say: Callable[[str], None] = _say, output: Optional[IO[bytes]] = None) -> None:
        """``output``: a file that gets the children's stdout and stderr (default: this
        process's own)."""
        self.entries = list(entries)
        self.stop_timeout = stop_timeout
        self.locate = locate
        self.say = say
        self.output = output
        self.children: List[Child] = []
        # SimpleQueue: its put() may run in a signal handler (_on_signal) that interrupts
        # the main thread inside a get(); Queue's lock is not reentrant and would deadlock
        self._events: "queue.SimpleQueue[Tuple[str, Any]]" = queue.SimpleQueue()
        self._tmpdir: Optional[str] = None
        self._running: Dict[int, Child] = {}

    @property
    def parameter_directory(self) -> Optional[str]:
        """The temporary directory of generated parameter files, if any."""
        return self._tmpdir

    # --- commands

    def _parameter_files(self, entry: plan.ProcessEntry) -> List[str]:
        """The plan's parameter files of ``entry`` (its groups of values written to this
        bring-up's temporary directory)."""
        if entry.node_name is None:
            return []
        if self._tmpdir is None and any(not isinstance(group, plan.ParamFile)
                                        for group in entry.parameters):
            self._tmpdir = tempfile.mkdtemp(prefix="cozmo_bringup_")
        return plan.parameter_files(entry, self._tmpdir or ".")

    def resolve(self) -> List[Tuple[plan.ProcessEntry, List[str]]]:
        """(entry, command) of every enabled entry that is installed, fallbacks applied;
        prints what is skipped. Raises PlanError when a required entry is missing."""
        chosen: List[Tuple[plan.ProcessEntry, List[str]]] = []
        for entry in self.entries:
            if not entry.enabled:
                continue
            candidate: Optional[plan.ProcessEntry] = entry
            path = self.locate(entry.package, entry.executable)
            if path is None and entry.fallback is not None:
                fallback_path = self.locate(entry.fallback.package, entry.fallback.executable)
                if fallback_path is not None:
                    self.say(f"{entry.executable} is not installed: {entry.fallback.executable} "
                             "publishes the robot description instead")
                    candidate, path = entry.fallback, fallback_path
            if path is None or candidate is None:
                if entry.required:
                    raise plan.PlanError(f"{entry.executable} (package {entry.package}) is not "
                                         "installed: cannot bring up the robot")
                self.say(plan.skip_message(entry))
                continue
            if candidate.members:  # one process: each node with its own --ros-args
                command = [str(path), *plan.stack_arguments(candidate, self._parameter_files)]
            else:
                command = [str(path), *candidate.arguments,
                           *candidate.ros_arguments(self._parameter_files(candidate))]
            chosen.append((candidate, command))
        return chosen

    # --- running

    def _watch(self, child: Child) -> None:
        code = child.process.wait()
        self._events.put(("exit", (child, code)))

    def start(self) -> None:
        """Start every entry of :meth:`resolve`, in order (from the main thread: a child's
        parent-death signal follows the thread that started it, see
        :mod:`cozmo_driver.lifeline`). A failure leaves the started ones in
        :attr:`children` for :meth:`stop`."""
        environment = {**os.environ, **plan.child_environment()}
        for entry, command in self.resolve():
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, start_new_session=True, stdout=self.output,
                stderr=None if self.output is None else subprocess.STDOUT, env=environment,
                preexec_fn=parent_death_preexec())
            child = Child(entry, command, process)
            self.children.append(child)
            self._running[process.pid] = child
            threading.Thread(target=self._watch, args=(child,), name=f"wait-{entry.name}",
                             daemon=True).start()
            note = f" - {entry.note}" if entry.note else ""
            self.say(f"started {child.label}{note}")

    def _on_signal(self, signum: int, frame: Any) -> None:
        # A queue.SimpleQueue: its put is C code that takes no Python lock and may
        # interrupt a get of the same thread (the queue module says so), which a signal
        # handler does. A queue.Queue's put would wait for a lock its thread may hold.
        self._events.put(("signal", signum))

    def run(self, duration: Optional[float] = None) -> int:
        """Start everything, then wait for a signal, the end of ``duration`` or the exit of a
        required child; stop everything and return the exit status."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _STOP_SIGNALS
                    if sig != signal.SIGHUP or signal.getsignal(sig) != signal.SIG_IGN}
        status = 0
        try:
            self.start()
            deadline = None if duration is None else time.monotonic() + duration
            while True:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    kind, payload = self._events.get(timeout=timeout)
                except queue.Empty:
                    self.say(f"{duration:g} s are over: stopping")
                    break
                if kind == "signal":
                    self.say(f"{signal.Signals(payload).name}: stopping")
                    break
                child, code = payload
                self._running.pop(child.process.pid, None)
                if child.entry.required:
                    self.say(f"{child.label} exited with status {code}: stopping")
                    if code != 0:  # the driver's, the stack's or the simulator's failure
                        status = code if code > 0 else 1
                    break
                self.say(f"{child.label} exited with status {code}")
        finally:
            try:
                self.stop()
            finally:
                self.kill_remaining()
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                self.remove_parameter_files()
        return status

    def kill_remaining(self) -> None:
        """SIGKILL every child still running: the last resort when :meth:`stop` could not
        finish (it raised)."""
        for child in self.children:
            if child.process.returncode is None and child.process.poll() is None:
                try:
                    child.process.kill()
                except ProcessLookupError:
                    pass

    def remove_parameter_files(self) -> None:
        """Delete the generated parameter files (after the children have stopped)."""
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def _wait_exits(self, deadline: float, pids: Optional[set] = None) -> None:
        """Consume exit events until the children ``pids`` (default: all) have exited or
        the deadline passed."""
        while self._running and (pids is None or pids & set(self._running)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                kind, payload = self._events.get(timeout=remaining)
            except queue.Empty:
                return
            if kind == "exit":
                child, code = payload
                self._running.pop(child.process.pid, None)
                if code != 0:  # a child should stop with 0 on SIGINT: say when it did not
                    self.say(f"{child.label} exited with status {code}")

    def _send(self, sig: int, children: Sequence[Child]) -> None:
        for child in reversed(children):
            if child.process.pid in self._running and child.process.returncode is None:
                try:
                    child.process.send_signal(sig)
                except ProcessLookupError:
                    pass

    def _stop_wave(self, children: Sequence[Child]) -> None:
        pids = {c.process.pid for c in children}

        def running() -> List[Child]:
            return [c for c in children if c.process.pid in self._running]

        if not running():
            return
        self._send(signal.SIGINT, children)
        self._wait_exits(time.monotonic() + self.stop_timeout, pids)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not running():
                return
            names = ", ".join(c.label for c in running())
            self.say(f"still running, sending {signal.Signals(sig).name}: {names}")
            self._send(sig, children)
            self._wait_exits(time.monotonic() + _TERM_GRACE_S, pids)

    def stop(self) -> None:
        """SIGINT every running child in reverse start order, the simulator last (after
        the others exited: the driver stops the motors first); a child still running
        stop_timeout later gets SIGTERM, and 2 s later SIGKILL."""
        if not self._running:
            return
        self._stop_wave([c for c in self.children if not c.entry.stop_last])
        self._stop_wave([c for c in self.children if c.entry.stop_last])
        if not self._running:
            self.say("all processes stopped")
        else:  # pragma: no cover - SIGKILL did not end them (zombie, uninterruptible sleep)
            self.say("could not stop: " + ", ".join(c.label for c in self._running.values()))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``cozmo_bringup``."""
    if argv is None:  # the command: end with a `ros2 run` that started it (lifeline)
        exit_with_parent()
    values, options = parse_command_line(sys.argv[1:] if argv is None else argv)
    try:
        args = plan.resolve_arguments(values)
        for warning in plan.unreached_config_sections(args):
            print(f"{PROG}: warning: {warning}", file=sys.stderr, flush=True)
        for note in plan.config_sections_of_other_namespaces(args):
            print(f"{PROG}: {note}", file=sys.stderr, flush=True)
        entries = plan.make_plan(
            args, warn=lambda text: print(f"{PROG}: warning: {text}", file=sys.stderr, flush=True))
        bringup = Bringup(entries, stop_timeout=options.stop_timeout)
        if options.dry_run:
            for entry, command in bringup.resolve():
                print(f"# {entry.name} ({entry.condition})")
                print(shlex.join(command))
            if bringup.parameter_directory is not None:
                print(f"# parameter files written to {bringup.parameter_directory} (kept):")
                for path in sorted(Path(bringup.parameter_directory).iterdir()):
                    lines = path.read_text(encoding="utf-8").splitlines()
                    print(f"# --- {path.name}")
                    for line in lines[:_DRY_RUN_LINES]:
                        print(f"#     {line[:160]}{' ...' if len(line) > 160 else ''}")
                    if len(lines) > _DRY_RUN_LINES:
                        print(f"#     ... ({len(lines) - _DRY_RUN_LINES} more lines)")
            return 0
    except plan.PlanError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    try:
        return bringup.run(options.duration)
    except plan.PlanError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an executable that cannot be started (permissions, format)
        print(f"{PROG}: error: cannot start a process: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
