"""./dev test stops when it is told to: a SIGTERM (a CI time limit) or SIGINT (Ctrl-C)
during the wheel-venv tests ends those tests and the whole command; it does not go on to
set up and test the kit environment; the same signals during the kit environment's set-up
or tests end that step or run, and the command (its kit stage run from ./dev's functions,
on a stand-in kit). ./dev's own functions run here, in the wheel mode, from a copy of
./dev in a directory of its own (its lint and set-up stubbed, its .venv a stand-in whose
python is this run's: nothing runs in the checkout), on a one-test pytest file that waits
to be stopped, with a stand-in kit whose set-up would only show that the kit stage began.

Before its pytest run, ./dev removes the Fast DDS shared-memory files in /dev/shm that a
process killed with SIGKILL left behind (tools/shm_clean.py, the rule of fastdds shm
clean), and keeps those of a process that still runs: checked with two real rclpy
processes and ./dev test-wheels (in such a copy, with a copy of the script) on a one-test
file, and the script on a directory of such files.

./dev keeps the interpreter a venv was set up with: its choice of interpreter
(``pick_python``, run from a copy of ./dev without its last line, the call of ``main``)
takes $PYTHON, else the one .venv records, else python3, and refuses, saying what to do, a
machine the ROS 2 wheels are not built for."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WAITING_TEST = '''
import os
import time
from pathlib import Path


def test_waits_to_be_stopped():
    Path(os.environ["DEV_TEST_STARTED"]).write_text(str(os.getpid()))
    time.sleep(90)
'''


PASSING_TEST = "def test_passes():\n    pass\n"
#: a Fast DDS shared-memory port's data file (its lock file is the same name + "_el")
_PORT_DATA = re.compile(r"^fastrtps_port\d+$")

RCLPY_NODE = """
import sys
import time
import rclpy
rclpy.init()
node = rclpy.create_node(sys.argv[1])
print("up", flush=True)
time.sleep(120)
"""


def _dev_env(**extra: str) -> dict[str, str]:
    """This run's environment without a sourced distro's or pytest's variables: ./dev in
    the wheel mode, as a developer runs it."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ROS_DISTRO", "AMENT_", "COLCON_", "PYTEST_"))}
    env.update(extra)
    return env


def _open_fast_dds_files(pid: int) -> set[str]:
    """The /dev/shm/fastrtps_* files process ``pid`` has open now (none once it is gone)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    files = set()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/dev/shm/fastrtps_"):
            files.add(target)
    return files


def _fast_dds_files_of(pid: int) -> set[str]:
    """The Fast DDS shared-memory files of process ``pid``: the lock files it holds open
    (``fastrtps_*_el``, locked while it lives) and the segment or port file of each. The
    segments of other processes it maps are not its own."""
    files = set()
    for target in _open_fast_dds_files(pid):
        if target.endswith("_el"):
            files.update((target, target[:-3]))
    return files


def _inode(path: str) -> int | None:
    """The inode of the file at ``path`` (None: no file there)."""
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def _open_in_living_processes() -> set[str]:
    """Every /dev/shm/fastrtps_* file some living process has open now."""
    held = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            held |= _open_fast_dds_files(int(entry))
    return held


def _wait_for_up(proc: subprocess.Popen) -> None:
    """Reads ``proc``'s output up to its "up" line (its DDS participant exists)."""
    seen = []
    for line in proc.stdout:
        if line == "up\n":
            return
        seen.append(line)
    pytest.fail(f"the rclpy process ended before its node was up:\n{''.join(seen)}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stand_in_venv(checkout: Path) -> None:
    """A .venv for a copy of ./dev whose checkout is ``checkout``: its python is this run's
    interpreter (pytest, pytest-xdist), as ./dev's set-up would have left it."""
    bin_dir = checkout / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)


#: ./dev's lint and the set-up of .venv (done: :func:`_stand_in_venv`) stubbed
_SET_UP_DONE = "cmd_lint() { :; }; setup() { :; }; "


@pytest.mark.timeout(240)  # pytest's start and its workers', on a loaded machine
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_during_the_wheel_tests_ends_the_whole_run(tmp_path, sig):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_waiting.py").write_text(WAITING_TEST)
    _stand_in_venv(tmp_path)
    started = tmp_path / "started"
    env = _dev_env(COZMO_ROS_UPSTREAM=str(_kit(tmp_path)), DEV_TEST_STARTED=str(started))
    # ./dev test with the real wheel-venv run, and the kit stage it would go on to found
    # (a stand-in kit) but its set-up steps only saying that it began
    stubs = (f'{_SET_UP_DONE}clean_stale_shm() {{ :; }}; '
             'setup_kit_steps() { echo "the kit stage began" >&2; exit 1; }; ')
    script = f'{stubs}main test "{tmp_path / "test_waiting.py"}" -p no:cacheprovider'
    proc = subprocess.Popen(
        _sourced_command(tmp_path, script, workdir=tmp_path), env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        # SIGINT at its default disposition, as in a terminal, whatever this run has (a run
        # in the background of a non-interactive shell inherits it ignored, and a shell
        # started with a signal ignored cannot trap it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    inner = None
    try:
        # pytest's start and its two workers' (with ./dev's lint before them, 100 s at a load of
        # 8 to 10 on 2 cores)
        deadline = time.monotonic() + 150.0
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), proc.communicate(timeout=10)[0] if proc.poll() is not None else "no start"
        time.sleep(0.2)
        inner = int(started.read_text())
        proc.send_signal(sig)   # to ./dev alone, as a CI runner's time limit does
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode != 0, out
    assert f"dev: stopped by {sig.name} during the wheel-venv tests" in out, out
    assert "setup: kit environment" not in out and "the kit stage began" not in out, out
    assert not _alive(inner), "the wheel-venv pytest still runs"


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.alone  # another worker's new participant may remove the killed process's files
def test_the_test_run_removes_the_shared_memory_files_of_killed_processes_only(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_passing.py").write_text(PASSING_TEST)
    # In this run's own ROS_DOMAIN_ID (conftest), inherited.
    procs = {name: subprocess.Popen([sys.executable, "-c", RCLPY_NODE, f"shm_{name}"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name in ("killed", "living")}
    try:
        files = {}
        for name, proc in procs.items():
            _wait_for_up(proc)
            files[name] = _fast_dds_files_of(proc.pid)
            assert files[name], f"{name}: no /dev/shm/fastrtps_*_el open: not on the SHM transport?"
        procs["killed"].kill()
        procs["killed"].wait(timeout=10)
        assert all(os.path.exists(path) for path in files["killed"]), "SIGKILL left nothing behind"
        # the killed process's files are these very files: one of their names made again
        # later is another process's (seen in a kit run: a port's lock file back after the
        # clean-up, held by no one at the check)
        inodes = {path: os.stat(path).st_ino for path in files["killed"]}
        # ./dev test-wheels with the real clean-up (a copy of tools/shm_clean.py) and pytest run
        _stand_in_venv(tmp_path)
        (tmp_path / "tools").mkdir()
        shutil.copy2(ROOT / "tools" / "shm_clean.py", tmp_path / "tools" / "shm_clean.py")
        script = f'{_SET_UP_DONE}main test-wheels "{tmp_path / "test_passing.py"}" -p no:cacheprovider'
        result = subprocess.run(
            _sourced_command(tmp_path, script, workdir=tmp_path), env=_dev_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=100)
        assert result.returncode == 0, result.stdout
        assert "stale Fast DDS shared-memory files of dead processes (tools/shm_clean.py)" in result.stdout, \
            result.stdout
        assert "test: warning" not in result.stdout, result.stdout
        # The killed process's locks and segments are gone. Not its ports' data files: a
        # participant still alive (the other process, the suite's own) goes on sending to a
        # dead one's port until its lease ends, and opens the port's file again to do so
        # (seen on CI: fastrtps_port<N> back, its lock file gone); what made ports unusable
        # was the lock file a dead process left.
        # A lock file that another living process holds open is that process's too (a
        # shared-memory port two participants use, e.g. one of a parallel test run's other
        # workers): kept, rightly.
        held = _open_in_living_processes()
        left = sorted(path for path in files["killed"]
                      if _inode(path) == inodes[path] and not _PORT_DATA.match(os.path.basename(path))
                      and path not in held)
        assert not left, f"left behind: {left}\n{result.stdout}"
        assert any(_PORT_DATA.match(os.path.basename(path)[:-3]) for path in files["killed"]
                   if path.endswith("_el")), f"no port lock of the killed process: {files['killed']}"
        gone = sorted(path for path in files["living"] if not os.path.exists(path))
        assert not gone, f"removed from a running process: {gone}\n{result.stdout}"
        living = procs["living"]
        assert living.poll() is None, living.stdout.read()
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()


def _picked_python(checkout: Path, recorded: str | None, **env: str) -> str:
    """The interpreter ./dev's pick_python chooses in a checkout at ``checkout`` whose .venv
    records ``recorded`` (None: no record), with no PYTHON but the one in ``env``."""
    proc = _pick_python(checkout, recorded, **env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _pick_python(checkout: Path, recorded: str | None, **env: str) -> subprocess.CompletedProcess:
    """./dev's pick_python run as :func:`_picked_python` says."""
    text = (ROOT / "dev").read_text().rstrip()
    assert text.endswith('\nmain "$@"')
    checkout.mkdir(exist_ok=True)
    (checkout / "dev").write_text(text[:-len('main "$@"')])
    if recorded is not None:
        (checkout / ".venv" / ".dev").mkdir(parents=True, exist_ok=True)
        (checkout / ".venv" / ".dev" / "python").write_text(recorded + "\n")
    run_env = _dev_env()
    run_env.pop("PYTHON", None)
    run_env.update(env)
    return subprocess.run(["bash", "-c", f'source "{checkout / "dev"}" && pick_python && echo "$PY"'],
                          env=run_env, capture_output=True, text=True, timeout=60)


def test_dev_keeps_the_interpreter_its_venv_was_set_up_with(tmp_path):
    """Set up with PYTHON=python3.X, a venv stays on it when the next ./dev command is run
    without PYTHON (pick_python took python3, and the set-up replaced the whole venv)."""
    other = tmp_path / "bin" / "python3.x"
    other.parent.mkdir()
    other.symlink_to(sys.executable)
    recorded = tmp_path / "recorded"
    assert _picked_python(recorded, str(other)) == str(other)
    assert _picked_python(recorded, str(other), PYTHON=sys.executable) == sys.executable
    # no record (a venv set up before ./dev kept one), or its interpreter gone: python3
    assert _picked_python(tmp_path / "unrecorded", None) == "python3"
    assert _picked_python(tmp_path / "gone", str(tmp_path / "nowhere" / "python3.x")) == "python3"


def test_dev_says_what_to_do_on_a_machine_the_wheels_are_not_built_for(tmp_path):
    """The ROS 2 wheels on PyPI are built for Linux x86_64 only. On a Raspberry Pi (aarch64)
    with no ROS 2 sourced, ./dev went on to install them, for the installer to fail on
    wheels it cannot resolve; it now stops before and says how to set up there instead.
    (The interpreter here takes itself for an aarch64 one: a sitecustomize on its path.)"""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import platform\nplatform.machine = lambda: 'aarch64'\n")
    proc = _pick_python(tmp_path / "checkout", None, PYTHON=sys.executable, PYTHONPATH=str(site))
    assert proc.returncode != 0 and proc.stdout == "", proc.stdout
    assert ("this machine is linux aarch64, but the ROS 2 Jazzy wheels on PyPI are built for "
            "Linux x86_64 only: install ROS 2 from its packages (on a Raspberry Pi: Ubuntu 24.04 "
            "with ROS 2 Jazzy") in proc.stderr, proc.stderr
    assert "source /opt/ros/<distro>/setup.bash, and run ./dev setup again" in proc.stderr
    # the same interpreter as what it is: taken
    assert _picked_python(tmp_path / "checkout", None, PYTHON=sys.executable) == sys.executable


def test_shm_clean_removes_the_files_of_locks_no_process_holds(tmp_path):
    """tools/shm_clean.py on a directory of Fast DDS's files: a port and a segment whose
    locks nobody holds go (a port with its semaphore), a port whose lock is held stays, and
    so does every file of another name. It replaced the wheels' fastdds script, which the
    ros-fastrtps wheels for Python 3.10 do not ship (./dev warned and cleaned nothing)."""
    names = ["fastrtps_port7001", "fastrtps_port7001_el", "sem.fastrtps_port7001_mutex",
             "fastrtps_port7003", "fastrtps_port7003_sl", "sem.fastrtps_port7003_mutex",
             "fastrtps_0123456789abcdef", "fastrtps_0123456789abcdef_el",
             "fastrtps_portx_el", "fast_datasharing_01.0f", "other"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    with open(tmp_path / "fastrtps_port7001_el", "ab") as held:  # a living process's port
        fcntl.flock(held, fcntl.LOCK_SH)
        result = subprocess.run([sys.executable, str(ROOT / "tools" / "shm_clean.py"), str(tmp_path)],
                                capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["fast_datasharing_01.0f", "fastrtps_port7001", "fastrtps_port7001_el",
                    "fastrtps_portx_el", "other", "sem.fastrtps_port7001_mutex"], left
    assert result.stdout.strip() == "5"


def _sourced_command(tmp_path: Path, script: str, workdir: Path = ROOT) -> list[str]:
    """The command that runs ``script`` in bash with ./dev's functions defined (its ``main``
    not run), in a copy of the checkout's ./dev in ``tmp_path`` (its ROOT), in ``workdir``
    (by default the checkout, beside the real bench/)."""
    text = (ROOT / "dev").read_text().rstrip()
    assert text.endswith('\nmain "$@"')
    copy = tmp_path / "dev"
    copy.write_text(text[:-len('main "$@"')])
    return ["bash", "-c", f'source "{copy}" && cd "{workdir}" && {script}']


def _sourced(tmp_path: Path, script: str, **env: str) -> subprocess.CompletedProcess:
    """``script`` run as :func:`_sourced_command` says, to its end."""
    run_env = _dev_env()
    run_env.update(env)
    return subprocess.run(_sourced_command(tmp_path, script), env=run_env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("cores, workers, args, expected", [
    ("2", "", "test", "-n 4 --dist loadfile"),      # the default on a 2-core machine (CI's)
    ("16", "", "test", "-n 4 --dist loadfile"),     # at most 4
    ("1", "", "test", ""),                          # one at a time on one core
    ("2", "3", "test", "-n 3 --dist loadfile"),     # COZMO_TEST_WORKERS chosen
    ("2", "1", "test", ""),
    ("2", "", "-n 2 test", ""),                     # the arguments choose
    ("2", "", "--pdb test", ""),
])
def test_the_suite_runs_four_workers_unless_told_otherwise(tmp_path, cores, workers, args, expected):
    """Four workers on two cores or more: with two, a 2-core machine was about three
    quarters idle and the fresh-clone CI run went over its 40 minutes (docs/development.md)."""
    script = (f'nproc() {{ echo {cores}; }}; COZMO_TEST_WORKERS="{workers}"; '
              f'parallel_args {args} 2>/dev/null; echo "[${{PARALLEL[*]}}]"')
    proc = _sourced(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"[{expected}]"


def test_a_worker_count_that_is_no_number_is_refused(tmp_path):
    proc = _sourced(tmp_path, 'COZMO_TEST_WORKERS=four; parallel_args test')
    assert proc.returncode != 0
    assert "COZMO_TEST_WORKERS must be a number of processes (1 = one at a time), not 'four'" in proc.stderr

def test_bench_runs_only_the_files_given(tmp_path):
    """./dev bench bench/bench_driver.py ran all twelve benchmarks, bench_setup's fresh
    set-ups with empty caches among them."""
    stubs = 'setup() { :; }; run_in_env() { echo "RAN $2"; }; '
    proc = _sourced(tmp_path, stubs + "cmd_bench bench/bench_driver.py")
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("RAN")] == \
        ["RAN bench/bench_driver.py"]
    proc = _sourced(tmp_path, stubs + "cmd_bench bench/nothing.py")
    assert proc.returncode == 1 and "bench: no such file: bench/nothing.py" in proc.stderr
    everything = _sourced(tmp_path, stubs + "cmd_bench")
    assert everything.stdout.count("RAN bench/bench_") == len(list((ROOT / "bench").glob("bench_*.py")))


def test_bench_passes_no_docs_to_every_benchmark_it_runs(tmp_path):
    """docs/benchmarks.md gives --no-docs after ./dev bench, which took it for a file
    ("bench: no such file: --no-docs"); another option is refused, saying which it takes."""
    stubs = 'setup() { :; }; run_in_env() { echo "RAN ${*:2}"; }; '
    proc = _sourced(tmp_path, stubs + "cmd_bench --no-docs bench/bench_driver.py")
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("RAN")] == \
        ["RAN bench/bench_driver.py --no-docs"]
    everything = _sourced(tmp_path, stubs + "cmd_bench --no-docs")
    ran = [line for line in everything.stdout.splitlines() if line.startswith("RAN")]
    assert len(ran) == len(list((ROOT / "bench").glob("bench_*.py")))
    assert all(line.endswith(".py --no-docs") for line in ran), ran
    proc = _sourced(tmp_path, stubs + "cmd_bench --quick")
    assert proc.returncode == 1 and "bench: unknown option --quick (it takes --no-docs)" in proc.stderr


def test_the_clock_of_the_set_up_steps_works_without_epochrealtime(tmp_path):
    """bash before 5 (macOS's /bin/bash) has no EPOCHREALTIME: ./dev died with 'unbound
    variable' before it could say that the machine needs another set-up."""
    proc = _sourced(tmp_path, 'unset EPOCHREALTIME; start="$(now)"; echo "$start $(elapsed "$start")"')
    assert proc.returncode == 0, proc.stderr
    start, took = proc.stdout.split()
    assert int(start) > 1_700_000_000 and float(took) >= 0.0


def test_ros_mode_without_numpy_gives_the_rosdep_command_of_the_readme(tmp_path):
    """rosdep's --from-paths . stops at the root package.xml: the command ./dev gave found
    neither cozmo_interfaces nor cozmo_description, and installed nothing."""
    fake = tmp_path / "python3"
    fake.write_text('#!/bin/sh\ncase "$*" in *numpy*) exit 1 ;; esac\nexit 0\n')
    fake.chmod(0o755)
    proc = _sourced(tmp_path, "setup_ros", ROS_DISTRO="jazzy", AMENT_PREFIX_PATH="/opt/ros/jazzy",
                    PYTHON=str(fake))
    assert proc.returncode == 1
    command = "rosdep install --from-paths . cozmo_interfaces cozmo_description --ignore-src -y"
    assert command in proc.stderr, proc.stderr
    assert command in (ROOT / "README.md").read_text()


def test_without_apt_a_missing_espeak_ng_is_said_not_fatal(tmp_path):
    """On a machine without apt-get (Fedora, Arch) the set-up died for espeak-ng, which only
    speaks play_audio's text (optional; its tests skip without it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cmake", "c++", "make", "dirname", "cat", "sha256sum", "cut"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    script = f'PY="{sys.executable}"; PY_VERSION=x; PATH="{bin_dir}"; ensure_system_packages; echo DONE'
    proc = _sourced(tmp_path, script)
    assert proc.returncode == 0 and "DONE" in proc.stdout, proc.stderr
    assert "espeak-ng is not installed (and no apt-get here)" in proc.stderr


def _without_root_or_sudo(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    """``script`` run on a PATH with the build tools and apt-get but no espeak-ng and no sudo,
    as a user who is not root."""
    bin_dir = tmp_path / "bin"
    if bin_dir.exists():
        shutil.rmtree(bin_dir)
    bin_dir.mkdir()
    for tool in ("cmake", "c++", "make", "dirname", "cat", "sha256sum", "cut", "mkdir", "date", "tail", "awk"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    for tool, text in (("apt-get", "exit 0"), ("id", "echo 1000")):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{text}\n")
        (bin_dir / tool).chmod(0o755)
    return _sourced(tmp_path, f'PY="{sys.executable}"; PY_VERSION=x; STATE="{tmp_path}/state"; '
                              f'LOG="$STATE/setup.log"; PATH="{bin_dir}"; {script}')


def test_without_root_or_sudo_a_missing_espeak_ng_is_said_and_others_are_named(tmp_path):
    """On Debian/Ubuntu without root or sudo, a missing espeak-ng (optional) stopped the
    set-up in its "apt-get update" step, whose log said only "need root to run: env
    DEBIAN_FRONTEND=noninteractive apt-get update -q", naming neither package nor what to
    do. Now espeak-ng is only said, as where there is no apt-get; a required package stops
    the set-up, named with the command to run."""
    proc = _without_root_or_sudo(tmp_path, "ensure_system_packages; echo DONE")
    assert proc.returncode == 0 and "DONE" in proc.stdout, proc.stderr
    assert ("espeak-ng is not installed (and no root or sudo here to install it): play_audio cannot "
            "speak text and its tests skip") in proc.stderr, proc.stderr
    assert "apt-get update" not in proc.stderr, proc.stderr
    proc = _without_root_or_sudo(tmp_path, "apt_install cmake espeak-ng python3.12-dev; echo DONE")
    assert proc.returncode == 1 and "DONE" not in proc.stdout, proc.stderr
    assert ("dev: error: missing system packages (cmake python3.12-dev), and no root or sudo here to "
            "install them: run `sudo apt-get install cmake python3.12-dev`") in proc.stderr, proc.stderr


def test_the_parallel_set_up_steps_work_without_epochrealtime(tmp_path):
    """step_bg wrote and steps_wait read $EPOCHREALTIME with no default: under set -u on
    bash before 5 every parallel step failed with 'unbound variable'."""
    script = ('unset EPOCHREALTIME; step_bg one one "the first step" true; '
              'step_bg two two "the second step" true; steps_wait; echo DONE; cat "$STATE/one.stamp"')
    proc = _sourced(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["DONE", "one"], proc.stdout
    assert "setup: the first step ... done (" in proc.stderr
    assert "setup: the second step ... done (" in proc.stderr
    assert "unbound" not in proc.stderr


def _group_gone(pgid: int, within: float) -> bool:
    """Whether process group ``pgid`` has no process left, waiting up to ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT to the group", "SIGTERM to dev"])
def test_a_stop_during_the_parallel_set_up_steps_ends_them_and_goes_no_further(tmp_path, sig):
    """step_bg's steps ran as bash's background jobs, SIGINT ignored, and steps_wait had no
    trap: a Ctrl-C (SIGINT to the terminal's process group) during the builds was ignored,
    and ./dev demo went on to run the demo once they were done; a SIGTERM to ./dev alone
    ended it and left the steps running, holding the set-up lock. Now the steps end, and
    ./dev with them, 128 + the signal's number, going no further."""
    step = tmp_path / "step.sh"
    step.write_text('echo "$$" >"$1"\nexec sleep 60\n')
    started = [tmp_path / "started1", tmp_path / "started2"]
    script = (f'step_bg one one "the first step" sh "{step}" "{started[0]}"; '
              f'step_bg two two "the second step" sh "{step}" "{started[1]}"; steps_wait; echo WENT_ON')
    proc = subprocess.Popen(_sourced_command(tmp_path, script), env=_dev_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            # SIGINT at its default disposition, as in a terminal
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 20.0
        while not all(path.exists() for path in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(path.exists() for path in started), "the steps did not start"
        time.sleep(0.2)
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)   # Ctrl-C: the terminal's whole foreground group
        else:
            proc.send_signal(sig)      # to ./dev alone
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"./dev did not stop on {sig.name}")
        assert _group_gone(proc.pid, 10.0), "a step still runs"
    finally:
        if proc.poll() is None or not _group_gone(proc.pid, 0.0):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == 128 + sig, out
    assert "WENT_ON" not in out, out
    assert f"setup: stopped by {sig.name}: the steps running side by side were ended" in out, out


def _kit_stage_command(tmp_path: Path, kit_waits: bool) -> tuple[list[str], Path]:
    """``cmd_test`` of ./dev with the lint and the wheel stage stubbed, its kit stage real:
    the real set-up of .venv-kit in a stand-in (its venv and wheels up to date, its kit's
    install.sh waiting if ``kit_waits``), then a real parallel pytest run (two workers) of
    a test that waits. Returns the command and the file the waiting process writes its pid
    to."""
    kit = tmp_path / "kit"
    kit.mkdir()
    started = tmp_path / "started"
    (kit / "install.sh").write_text(f'echo "$$" >"{started}"\nexec sleep 90\n' if kit_waits else "exit 0\n")
    venv = tmp_path / "venv-kit"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "bin" / "pytest").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pytest "$@"\n')
    (venv / "bin" / "pytest").chmod(0o755)
    (venv / "colcon" / "install").mkdir(parents=True)
    (venv / "colcon" / "install" / "setup.bash").write_text("")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_waiting.py").write_text(WAITING_TEST)
    stubs = (f'KVENV="{venv}"; KSTATE="{venv}/.dev"; KCOLCON="{venv}/colcon"; MODE=wheels; '
             'cmd_lint() { :; }; cmd_test_wheels() { :; }; clean_stale_shm() { :; }; '
             'ensure_system_packages() { :; }; check_kit_env() { :; }; stamp_ok() { [[ "$1" != kit-all ]]; }; ')
    script = f'{stubs}cmd_test "{tmp_path / "test_waiting.py"}" -p no:cacheprovider'
    return _sourced_command(tmp_path, script), started


@pytest.mark.parametrize(("sig", "kit_waits"), [(signal.SIGTERM, True), (signal.SIGTERM, False),
                                                 (signal.SIGHUP, False)],
                         ids=["SIGTERM in the kit's set-up", "SIGTERM in the kit's tests", "SIGHUP in the kit's tests"])
def test_a_stop_signal_during_the_kit_stage_ends_it_and_the_whole_run(tmp_path, sig, kit_waits):
    """./dev test ran its kit stage in a plain subshell, and its main shell had no trap
    there: a SIGTERM or SIGHUP to ./dev (a CI time limit) ended ./dev alone, and the kit's
    set-up (install.sh, colcon build) and the whole kit suite ran on without it, with no
    "stopped by" line. Now the signal reaches the step or the pytest run (as SIGINT to a
    parallel one, whose workers then stop), and the run ends, saying so."""
    command, started = _kit_stage_command(tmp_path, kit_waits)
    env = _dev_env(COZMO_ROS_UPSTREAM=str(tmp_path / "kit"), DEV_TEST_STARTED=str(tmp_path / "started"),
                   PYTHON=sys.executable, COZMO_TEST_WORKERS="2")
    proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60.0
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), proc.communicate(timeout=10)[0] if proc.poll() is not None else "no start"
        time.sleep(0.2)
        inner = int(started.read_text())
        proc.send_signal(sig)   # to ./dev alone, as a CI runner's time limit does
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"./dev did not end on {sig.name}")
        assert _group_gone(proc.pid, 10.0), "a process of the kit stage still runs"
    finally:
        if proc.poll() is None or not _group_gone(proc.pid, 0.0):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode != 0, out
    assert not _alive(inner)
    assert f"dev: stopped by {sig.name} during the kit environment's set-up or tests" in out, out
    if kit_waits:
        assert f"setup: stopped by {sig.name}: the step was ended" in out, out
        assert "tests in the kit environment" not in out, out


def _ros_mode_set_up(tmp_path: Path, has_venv: bool, has_espeak: bool) -> subprocess.CompletedProcess:
    """setup_ros with a stand-in interpreter (rclpy, numpy and Pillow import; ensurepip only
    if ``has_venv``), on a PATH with apt-get and, if ``has_espeak``, espeak-ng; apt_install
    and step only say what they were given, and step ends the run (before any venv)."""
    fake = tmp_path / "python3"
    fake.write_text('#!/bin/sh\ncase "$*" in\n'
                    f'  *ensurepip*) exit {0 if has_venv else 1} ;;\n'
                    '  *version_info*) echo 3.12 ;;\n'
                    '  *sys.version*) echo "3.12.3 (fake)" ;;\nesac\nexit 0\n')
    fake.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cat", "sha256sum", "cut", "find", "sort", "xargs", "mkdir", "rm", "sh"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    for tool in ("apt-get",) + (("espeak-ng",) if has_espeak else ()):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / tool).chmod(0o755)
    stubs = 'apt_install() { echo "APT $*"; }; step() { echo "STEP $1"; exit 0; }; '
    return _sourced(tmp_path, f'{stubs}PATH="{bin_dir}"; setup_ros', ROS_DISTRO="jazzy",
                    AMENT_PREFIX_PATH="/opt/ros/jazzy", PYTHON=str(fake))


def test_ros_mode_installs_the_venv_module_and_espeak_ng_where_missing(tmp_path):
    """The ROS mode made .venv-ros with python -m venv without checking for ensurepip: on
    Ubuntu with ROS 2 from apt but no python3.12-venv, ./dev stopped with 'ensurepip is not
    available', and espeak-ng was never installed."""
    proc = _ros_mode_set_up(tmp_path, has_venv=False, has_espeak=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["APT python3.12-venv espeak-ng",
                                        "STEP creating .venv-ros (--system-site-packages)"]


def test_ros_mode_installs_nothing_where_the_venv_module_and_espeak_ng_are(tmp_path):
    proc = _ros_mode_set_up(tmp_path, has_venv=True, has_espeak=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["STEP creating .venv-ros (--system-site-packages)"]


def _test_run_requires(tmp_path: Path, mode: str) -> str:
    """What cmd_test_wheels requires of the pytest run in ``mode`` (its set-up and pytest
    stubbed): "TOOLS=... DEPS=..." of COZMO_REQUIRE_ROS_TOOLS and COZMO_REQUIRE_TEST_DEPS."""
    stubs = ('unset COZMO_REQUIRE_ROS_TOOLS COZMO_REQUIRE_TEST_DEPS; setup() { :; }; clean_stale_shm() { :; }; '
             'run_in_env() { echo "TOOLS=${COZMO_REQUIRE_ROS_TOOLS:-} DEPS=${COZMO_REQUIRE_TEST_DEPS:-}"; }; ')
    proc = _sourced(tmp_path, f"{stubs}MODE={mode}; COZMO_TEST_WORKERS=1 cmd_test_wheels test/x.py")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_with_a_real_ros_2_install_a_missing_ros_tool_fails_the_tests(tmp_path):
    """The ROS mode (a sourced distro, rosdep's packages: package.xml's test_depends among
    them) set COZMO_REQUIRE_TEST_DEPS only, and ros_tools reads COZMO_REQUIRE_ROS_TOOLS: the
    launch, ros2 CLI, tf2_ros and teleop tests skipped there, though test_launch.py says a
    missing launch_testing is a failure on a real install. The wheel venv has none of them."""
    assert _test_run_requires(tmp_path, "ros") == "TOOLS=1 DEPS=1"
    assert _test_run_requires(tmp_path, "wheels") == "TOOLS= DEPS=1"


@pytest.mark.parametrize("command", ["setup", "setup-kit", "lint"])
def test_commands_without_arguments_refuse_them_before_any_work(tmp_path, command):
    """./dev setup --help (or lint --fix, lint FILE) ignored its arguments and did the whole
    work: on a fresh machine `./dev setup --help` installed apt packages. Now --help shows the
    usage and anything else is refused, naming it; neither does any work."""
    stubs = 'setup() { echo WORKED; }; setup_kit() { echo WORKED; }; cmd_lint() { echo WORKED; }; '
    for help_arg in ("--help", "-h"):
        proc = _sourced(tmp_path, f"{stubs}main {command} {help_arg}")
        assert proc.returncode == 0 and "WORKED" not in proc.stdout, proc.stdout + proc.stderr
        assert proc.stdout.startswith(_USAGE_LINE[command]), proc.stdout
    proc = _sourced(tmp_path, f"{stubs}main {command} --fix cozmo_driver")
    assert proc.returncode == 2 and "WORKED" not in proc.stdout, proc.stdout + proc.stderr
    assert (f"dev: error: {command} takes no arguments, but was given --fix: run ./dev {command} alone"
            in proc.stderr), proc.stderr
    proc = _sourced(tmp_path, f"{stubs}main {command}")
    assert proc.returncode == 0 and proc.stdout == "WORKED\n", proc.stdout + proc.stderr


#: the first line of each command of ./dev in its usage (the header)
_USAGE_LINE = {
    "setup": "  ./dev setup          install everything this checkout needs (idempotent)\n",
    "test": "  ./dev test [ARGS]    set up, lint, then run the tests (ARGS go to pytest;\n",
    "lint": "  ./dev lint           ruff over the project (configuration: ruff.toml)\n",
    "test-wheels": "  ./dev test-wheels [ARGS]  set up, then run the tests in the wheel venv only (no\n",
    "test-kit": "  ./dev test-kit [ARGS]     set up the kit environment, then run the tests there\n",
    "setup-kit": "  ./dev setup-kit      set up the kit environment only (the kit: the project's\n",
    "demo": "  ./dev demo [ARGS]    set up, then run the demo (ARGS go to cozmo-demo; --help\n",
    "bench": "  ./dev bench [--no-docs] [FILES]  set up, then run every bench/bench_*.py in\n",
}

#: what the help of ./dev setup, setup-kit and lint prints: the command's lines of the usage
_NO_ARGS_HELP = {
    "setup": _USAGE_LINE["setup"],
    "lint": _USAGE_LINE["lint"],
    "setup-kit": _USAGE_LINE["setup-kit"]
    + "                       CI copy of ROS 2's own tools, shared/ beside the checkout;\n"
      "                       refused with a ROS 2 distro sourced, as test-kit is)\n",
}


def _unusable_checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the real ./dev, whole, alone in a directory, and an environment in which
    any set-up it began would stop at its first step: $PYTHON is no program (the wheel
    set-up, and the lint's, pick it first) and the ros-upstream kit is nowhere (the kit's
    set-up looks for it first; with a distro sourced it refuses before); with ROS_DISTRO
    added, AMENT_PREFIX_PATH is unset (the ROS mode's set-up checks it first)."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy2(ROOT / "dev", checkout / "dev")
    env = _dev_env(PYTHON=str(tmp_path / "no-python" / "python3"), COZMO_ROS_UPSTREAM=str(tmp_path / "no-kit"))
    return checkout, env


@pytest.mark.parametrize("distro", [None, "jazzy"], ids=["wheel mode", "a distro sourced"])
@pytest.mark.parametrize("command", list(_USAGE_LINE))
def test_each_command_help_shows_its_own_lines_of_the_usage(tmp_path, command, distro):
    """`./dev setup --help`, `./dev setup-kit --help` and `./dev lint --help` printed the
    whole usage of ./dev, where `./dev test --help` and the other commands print their own
    lines. Now each command's --help (or -h) starts with its own lines and shows no other
    command's (setup-kit's, with a distro sourced, then says that a run refuses there).
    The real ./dev runs, in a copy alone in a directory, where a real run of any command
    stops at its first set-up step (shown at the end): nothing is created there."""
    checkout, env = _unusable_checkout(tmp_path)
    if distro:
        env["ROS_DISTRO"] = distro
    for help_arg in ("--help", "-h"):
        proc = subprocess.run(["bash", str(checkout / "dev"), command, help_arg], cwd=checkout, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr
        assert proc.stdout.startswith(_USAGE_LINE[command]), proc.stdout
        others = [line for other, line in _USAGE_LINE.items() if other != command and line in proc.stdout]
        assert not others, proc.stdout
        assert "./dev - the one entry point" not in proc.stdout, proc.stdout
        if command in _NO_ARGS_HELP:
            if command == "setup-kit" and distro:
                assert proc.stdout.startswith(_NO_ARGS_HELP[command] + "\nThe kit environment is for machines "
                                              "without a sourced ROS 2 distro"), proc.stdout
            else:
                assert proc.stdout == _NO_ARGS_HELP[command], proc.stdout
    assert [path.name for path in checkout.iterdir()] == ["dev"]
    # a real run stops at once here (with a distro sourced, setup-kit refuses it)
    if command in _NO_ARGS_HELP:
        proc = subprocess.run(["bash", str(checkout / "dev"), command], cwd=checkout, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and proc.stderr.startswith("dev: error: "), proc.stdout + proc.stderr
        assert [path.name for path in checkout.iterdir()] == ["dev"]


@pytest.mark.parametrize("args", [[], ["help"], ["--help"], ["-h"]], ids=["nothing", "help", "--help", "-h"])
def test_the_help_of_dev_itself_shows_the_whole_usage(tmp_path, args):
    """./dev alone, ./dev help, --help and -h show the whole usage: every command's lines."""
    checkout, env = _unusable_checkout(tmp_path)
    proc = subprocess.run(["bash", str(checkout / "dev"), *args], cwd=checkout, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr
    assert proc.stdout.startswith("./dev - the one entry point for set-up, tests, the demo and the benchmarks.\n")
    assert all(line in proc.stdout for line in _USAGE_LINE.values()), proc.stdout
    assert all(help_text in proc.stdout for help_text in _NO_ARGS_HELP.values()), proc.stdout
    assert "Two modes" not in proc.stdout, proc.stdout
    assert [path.name for path in checkout.iterdir()] == ["dev"]


#: set-up stubs that fail loudly: a help that runs any part of the set-up (or the lint) ends with 97
_NO_SET_UP = ('setup() { echo "SET-UP RAN" >&2; exit 97; }; setup_kit() { setup; }; cmd_lint() { setup; }; '
              'step_run() { setup; }; ')


@pytest.mark.parametrize("command", ["demo", "test"])
def test_demo_and_test_help_set_up_nothing_before_the_venv_is_built(tmp_path, command):
    """On a fresh machine the README sends users to `./dev demo --help` to list the demo's
    options, and it (like `./dev test --help`) ran the whole set-up first: sudo, apt-get and
    a minute of builds before the help. Now, with no venv yet, they print ./dev's lines of
    the command and say that the program's options are listed once the first real run has
    set up, and where they are described meanwhile; nothing is set up."""
    described = {"demo": "cozmo-demo's options", "test": "pytest's options (ARGS)"}[command]
    doc = {"demo": "docs/demo.md", "test": "docs/development.md (Testing)"}[command]
    for args in ("--help", "-h", "test/x.py -v --help"):
        proc = _sourced(tmp_path, f"{_NO_SET_UP}main {command} {args}")
        assert proc.returncode == 0 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
        assert f"  ./dev {command} [ARGS]    set up, " in proc.stdout, proc.stdout
        assert "./dev setup          install everything" not in proc.stdout, proc.stdout
        said = (f"{described} are listed here once the set-up (.venv) is done; it is not yet.\n"
                f"The first real run (./dev {command}, or ./dev setup) does it: about a minute")
        assert said in proc.stdout, proc.stdout
        assert f"described in {doc}." in proc.stdout, proc.stdout
    assert not (tmp_path / ".venv").exists()
    # without a help, the command sets up as before
    proc = _sourced(tmp_path, f"{_NO_SET_UP}main {command} --robot-ip 127.0.0.2")
    assert proc.returncode == 97 and "SET-UP RAN" in proc.stderr, proc.stdout + proc.stderr


def test_demo_and_test_help_come_from_the_programs_once_built_without_setting_up(tmp_path):
    """With the venv built, the help is the program's own (cozmo-demo's, pytest's), given
    every argument, and the set-up is not run for it either (./dev test --help ran the lint,
    then pytest --help twice: in .venv and, after setting it up, in the kit environment)."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("cozmo-demo", "python", "pytest"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} was given: $*"\n')
        (bin_dir / name).chmod(0o755)
    proc = _sourced(tmp_path, f"{_NO_SET_UP}main demo --robot-ip 127.0.0.2 --help")
    assert proc.returncode == 0 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
    assert proc.stdout.startswith("  ./dev demo [ARGS]    set up, then run the demo"), proc.stdout
    assert proc.stdout.endswith("\ncozmo-demo was given: --robot-ip 127.0.0.2 --help\n"), proc.stdout
    proc = _sourced(tmp_path, f"{_NO_SET_UP}main test test/x.py -h")
    assert proc.returncode == 0 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
    assert proc.stdout.startswith("  ./dev test [ARGS]    set up, lint, then run the tests"), proc.stdout
    assert proc.stdout.endswith("\npython was given: -m pytest test/x.py -h\n"), proc.stdout


def _kit(tmp_path: Path) -> Path:
    """A stand-in ros-upstream kit: a directory with an install.sh (never run here)."""
    kit = tmp_path / "kit"
    kit.mkdir(exist_ok=True)
    (kit / "install.sh").write_text("echo 'the kit step began' >&2\nexit 1\n")
    return kit


@pytest.mark.parametrize("command", ["test-wheels", "test-kit"])
def test_one_environment_test_help_sets_up_nothing_before_it_is_built(tmp_path, command):
    """`./dev test-wheels --help` ran the wheel venv's set-up first, and `./dev test-kit
    --help` the kit environment's (its install.sh and colcon build: minutes), to show
    pytest's options, as ./dev test --help did. Now, with nothing built, they print ./dev's
    lines of the command, what the first real run sets up and how long it takes, and where
    pytest's options are described meanwhile; nothing is set up."""
    made, setup_cmd, takes = {"test-wheels": (".venv", "setup", "about a minute"),
                              "test-kit": (".venv-kit, its colcon install", "setup-kit", "about four minutes")}[command]
    kit = str(_kit(tmp_path))
    for args in ("--help", "-h", "test/x.py -v --help"):
        proc = _sourced(tmp_path, f"{_NO_SET_UP}main {command} {args}", COZMO_ROS_UPSTREAM=kit)
        assert proc.returncode == 0 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
        assert proc.stdout.startswith(f"  ./dev {command} [ARGS]  "), proc.stdout
        assert "ARGS go to pytest; --help sets up nothing" in proc.stdout, proc.stdout
        assert "./dev setup          install everything" not in proc.stdout, proc.stdout
        said = (f"pytest's options (ARGS) are listed here once the set-up ({made}) is done; it is not yet.\n"
                f"The first real run (./dev {command}, or ./dev {setup_cmd}) does it: {takes} on a\n")
        assert said in proc.stdout, proc.stdout
        assert proc.stdout.endswith("described in docs/development.md (Testing).\n"), proc.stdout
    assert not list(tmp_path.glob(".venv*"))
    # without a help, the command sets up as before
    proc = _sourced(tmp_path, f"{_NO_SET_UP}main {command} test/x.py -v", COZMO_ROS_UPSTREAM=kit)
    assert proc.returncode == 97 and "SET-UP RAN" in proc.stderr, proc.stdout + proc.stderr


def test_test_kit_help_without_the_kit_says_the_set_up_needs_it(tmp_path):
    """Where there is no ros-upstream kit, the first real `./dev test-kit` cannot set up:
    its --help says so, and what to do, rather than only that the run sets up."""
    (tmp_path / "no-kit").mkdir()
    proc = _sourced(tmp_path, f"{_NO_SET_UP}main test-kit --help", COZMO_ROS_UPSTREAM=str(tmp_path / "no-kit"))
    assert proc.returncode == 0 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
    assert proc.stdout.endswith(
        "described in docs/development.md (Testing).\nThat set-up needs the ros-upstream kit, not found: "
        "put shared/ beside the checkout or set COZMO_ROS_UPSTREAM.\n"), proc.stdout


#: the kit's set-up steps and every other set-up stubbed to fail loudly (97), setup_kit itself
#: not: its refusal with a distro sourced (kit_refuses_a_distro, the one check of setup-kit
#: and test-kit) comes before any step
_NO_KIT_STEPS = ('setup() { echo "SET-UP RAN" >&2; exit 97; }; setup_ros() { setup; }; step_run() { setup; }; '
                 'setup_kit_steps() { setup; }; ')


def test_test_kit_help_with_a_distro_sourced_shows_the_usage_and_what_to_run_instead(tmp_path):
    """With a ROS 2 distro sourced, `./dev test-kit --help` ended with the refusal of a real
    run ("the kit environment is for machines without a sourced ROS 2 distro", status 1)
    instead of its usage. Now it shows the usage and says that the kit environment is for
    machines without a sourced distro and that ./dev test runs the tests with one; it sets
    up nothing (the ROS mode's checks of the sourced distro neither) and runs no pytest,
    not even a built kit environment's. A real run refuses as before (in setup_kit, not
    stubbed here, before its steps)."""
    kit_bin = tmp_path / ".venv-kit" / "bin"
    install = tmp_path / ".venv-kit" / "colcon" / "install"
    for directory in (kit_bin, install):
        directory.mkdir(parents=True)
    (kit_bin / "pytest").write_text('#!/bin/sh\necho "the kit\'s pytest was given: $*"\n')
    (kit_bin / "pytest").chmod(0o755)
    (install / "setup.bash").write_text("")
    stubs = _NO_KIT_STEPS
    kit = str(_kit(tmp_path))
    for args in ("--help", "-h", "test/x.py -v --help"):
        proc = _sourced(tmp_path, f"{stubs}main test-kit {args}", ROS_DISTRO="jazzy", COZMO_ROS_UPSTREAM=kit)
        assert proc.returncode == 0 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
        assert proc.stderr == "", proc.stderr
        assert proc.stdout.startswith("  ./dev test-kit [ARGS]     set up the kit environment, then run the tests"), \
            proc.stdout
        said = ("\nThe kit environment is for machines without a sourced ROS 2 distro, and ROS 2 jazzy\n"
                "is sourced here: a run of ./dev test-kit refuses. With the distro sourced, ./dev test\n"
                "sets up and runs the tests against it")
        assert said in proc.stdout, proc.stdout
        assert "pytest was given" not in proc.stdout, proc.stdout
    proc = _sourced(tmp_path, f"{stubs}main test-kit test/x.py -v", ROS_DISTRO="jazzy", COZMO_ROS_UPSTREAM=kit)
    assert proc.returncode == 1 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
    assert proc.stderr == _KIT_REFUSED, proc.stderr
    assert proc.stdout == "", proc.stdout
    # without a distro the same run goes on to the kit's set-up steps
    proc = _sourced(tmp_path, f"{stubs}main test-kit test/x.py -v", COZMO_ROS_UPSTREAM=kit)
    assert proc.returncode == 97 and "SET-UP RAN" in proc.stderr, proc.stdout + proc.stderr


#: what ./dev test-kit and ./dev setup-kit say with a ROS 2 distro (jazzy) sourced, where they refuse
_KIT_REFUSED = ("dev: error: the kit environment is for machines without a sourced ROS 2 distro, and ROS 2 jazzy "
                "is sourced here: set it up and test it from a shell where no distro is sourced (with the distro "
                "sourced, ./dev setup and ./dev test set up and test against it)\n")


def test_setup_kit_with_a_distro_sourced_refuses_before_any_set_up(tmp_path):
    """With a ROS 2 distro sourced, `./dev test-kit` refused (the kit environment is for
    machines without one), but `./dev setup-kit` went on to build .venv-kit, the kit's
    tools and colcon with the distro still sourced. Now it refuses as test-kit does, saying
    why and to run it from a shell without the distro, before any set-up step (the kit's
    steps stubbed to fail loudly); its --help still shows the usage. Without a distro it
    sets up as before."""
    stubs = _NO_KIT_STEPS
    kit = str(_kit(tmp_path))
    proc = _sourced(tmp_path, f"{stubs}main setup-kit", ROS_DISTRO="jazzy", COZMO_ROS_UPSTREAM=kit)
    assert proc.returncode == 1 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
    assert proc.stderr == _KIT_REFUSED, proc.stderr
    assert proc.stdout == "", proc.stdout
    assert not (tmp_path / ".venv-kit").exists()
    for help_arg in ("--help", "-h"):
        proc = _sourced(tmp_path, f"{stubs}main setup-kit {help_arg}", ROS_DISTRO="jazzy", COZMO_ROS_UPSTREAM=kit)
        assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr
        assert "  ./dev setup-kit      set up the kit environment only" in proc.stdout, proc.stdout
    proc = _sourced(tmp_path, f"{stubs}main setup-kit", COZMO_ROS_UPSTREAM=kit)
    assert proc.returncode == 97 and "SET-UP RAN" in proc.stderr, proc.stdout + proc.stderr


def test_setup_kit_help_with_a_distro_sourced_says_that_a_run_refuses_and_what_to_run_instead(tmp_path):
    """With a ROS 2 distro sourced, `./dev setup-kit --help` showed the usage only, where a
    real run refuses (as `./dev test-kit --help` says for test-kit). Now, after the usage,
    it says that the kit environment is for machines without a sourced distro, that a run
    of setup-kit refuses here, and that ./dev setup sets up against the distro; it sets up
    nothing. Without a distro the help is the usage alone, as before."""
    stubs = _NO_KIT_STEPS
    kit = str(_kit(tmp_path))
    said = ("\n\nThe kit environment is for machines without a sourced ROS 2 distro, and ROS 2 jazzy\n"
            "is sourced here: a run of ./dev setup-kit refuses. With the distro sourced, ./dev\n"
            "setup sets up against it (colcon's install/ and .venv-ros); the kit environment is\n"
            "set up from a shell where no distro is sourced.\n")
    for help_arg in ("--help", "-h"):
        proc = _sourced(tmp_path, f"{stubs}main setup-kit {help_arg}", ROS_DISTRO="jazzy", COZMO_ROS_UPSTREAM=kit)
        assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr
        assert "  ./dev setup-kit      set up the kit environment only" in proc.stdout, proc.stdout
        assert proc.stdout.endswith(said), proc.stdout
        proc = _sourced(tmp_path, f"{stubs}main setup-kit {help_arg}", COZMO_ROS_UPSTREAM=kit)
        assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr
        assert "  ./dev setup-kit      set up the kit environment only" in proc.stdout, proc.stdout
        assert "The kit environment is for machines" not in proc.stdout, proc.stdout
    # the other commands without arguments say nothing of it
    for command in ("setup", "lint"):
        proc = _sourced(tmp_path, f"{stubs}main {command} --help", ROS_DISTRO="jazzy", COZMO_ROS_UPSTREAM=kit)
        assert proc.returncode == 0 and "The kit environment is for machines" not in proc.stdout, proc.stdout
    assert not (tmp_path / ".venv-kit").exists()


def test_bench_help_shows_its_usage_and_sets_up_nothing(tmp_path):
    """`./dev bench --help` stopped with "bench: unknown option --help (it takes --no-docs)"
    (status 1), where every other command answers --help with its usage. Now --help or -h,
    among bench's other arguments too, shows ./dev's lines of bench and where the
    benchmarks are described; nothing is set up and no benchmark runs."""
    stubs = f'{_NO_SET_UP}run_in_env() {{ echo "RAN $2"; }}; '
    for args in ("--help", "-h", "--no-docs bench/bench_driver.py --help"):
        proc = _sourced(tmp_path, f"{stubs}main bench {args}")
        assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr
        assert proc.stdout.startswith(
            "  ./dev bench [--no-docs] [FILES]  set up, then run every bench/bench_*.py in\n"), proc.stdout
        assert "--no-docs goes to each" in proc.stdout and "--help sets up nothing" in proc.stdout, proc.stdout
        assert "./dev setup          install everything" not in proc.stdout, proc.stdout
        assert proc.stdout.endswith("which also shows how to run one alone (with --help, each\n"
                                    "lists its own options).\n"), proc.stdout
        assert "docs/benchmarks.md" in proc.stdout.split("\n\n", 1)[1], proc.stdout
        assert "RAN" not in proc.stdout, proc.stdout
    # without a help, bench sets up as before
    proc = _sourced(tmp_path, f"{stubs}main bench bench/bench_driver.py")
    assert proc.returncode == 97 and "SET-UP RAN" in proc.stderr, proc.stdout + proc.stderr


def test_one_environment_test_help_comes_from_its_pytest_once_built_without_setting_up(tmp_path):
    """With the environment built, the help is its own pytest's, given every argument: the
    wheel venv's for test-wheels, the kit environment's (its colcon install sourced) for
    test-kit; neither is set up for it."""
    bin_dir = tmp_path / ".venv" / "bin"
    kit_bin = tmp_path / ".venv-kit" / "bin"
    install = tmp_path / ".venv-kit" / "colcon" / "install"
    for directory in (bin_dir, kit_bin, install):
        directory.mkdir(parents=True)
    for name in ("python", "pytest"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} was given: $*"\n')
        (bin_dir / name).chmod(0o755)
    (kit_bin / "pytest").write_text('#!/bin/sh\necho "the kit\'s pytest ($KIT_INSTALL) was given: $*"\n')
    (kit_bin / "pytest").chmod(0o755)
    (install / "setup.bash").write_text("export KIT_INSTALL=sourced\n")
    kit = str(_kit(tmp_path))
    proc = _sourced(tmp_path, f"{_NO_SET_UP}main test-wheels test/x.py -h", COZMO_ROS_UPSTREAM=kit)
    assert proc.returncode == 0 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
    assert proc.stdout.startswith("  ./dev test-wheels [ARGS]  set up, then run the tests in the wheel venv"), \
        proc.stdout
    assert proc.stdout.endswith("\npython was given: -m pytest test/x.py -h\n"), proc.stdout
    proc = _sourced(tmp_path, f"{_NO_SET_UP}main test-kit --help -v", COZMO_ROS_UPSTREAM=kit)
    assert proc.returncode == 0 and "SET-UP RAN" not in proc.stderr, proc.stdout + proc.stderr
    assert proc.stdout.startswith("  ./dev test-kit [ARGS]     set up the kit environment, then run the tests"), \
        proc.stdout
    assert proc.stdout.endswith("\nthe kit's pytest (sourced) was given: --help -v\n"), proc.stdout


def _fake_system_python(tmp_path: Path, *, ensurepip: bool, venv_works: bool = True) -> Path:
    """A stand-in for a stock Debian/Ubuntu python3: no pip module, ensurepip (python3.X-venv)
    only if ``ensurepip``; its ``-m venv DIR`` (logged to venv_calls) makes, if ``venv_works``,
    a venv whose python's ``-m pip install ... --target DIR`` (logged to pip_calls) puts a
    working uv into DIR/bin."""
    venv_python = tmp_path / "venv_python"
    venv_python.write_text(
        f'#!/bin/sh\necho "$*" >>"{tmp_path}/pip_calls"\n'
        'while [ $# -gt 0 ]; do [ "$1" = --target ] && target="$2"; shift; done\n'
        'mkdir -p "$target/bin"\nprintf \'#!/bin/sh\\necho "uv 0.13.9"\\n\' >"$target/bin/uv"\n'
        'chmod 755 "$target/bin/uv"\n')
    venv_python.chmod(0o755)
    fake = tmp_path / "python3"
    make_venv = (f'mkdir -p "$3/bin" && cp "{venv_python}" "$3/bin/python"; exit 0' if venv_works
                 else 'echo "Error: ensurepip failed" >&2; exit 1')
    fake.write_text('#!/bin/sh\ncase "$*" in\n'
                    '  "-m pip --version") echo "No module named pip" >&2; exit 1 ;;\n'
                    f'  *ensurepip*) exit {0 if ensurepip else 1} ;;\n'
                    f'  "-m venv "*) echo "$*" >>"{tmp_path}/venv_calls"; {make_venv} ;;\n'
                    '  *platform.machine*) echo "3.12.3 (fake) x86_64" ;;\n'
                    'esac\nexit 0\n')
    fake.chmod(0o755)
    return fake


def _ensure_uv(tmp_path: Path, python: Path) -> subprocess.CompletedProcess:
    """ensure_uv of a ./dev whose checkout is ``tmp_path`` (its .dev-tools there), with
    ``python`` for the system's interpreter; prints "UV=" and the uv it chose (none: pip)."""
    return _sourced(tmp_path, f'PY="{python}"; ensure_uv; echo "UV=$UV"', DEV_INSTALLER="uv")


def test_uv_is_installed_with_a_throwaway_venv_where_the_system_python_has_no_pip(tmp_path):
    """ensure_uv installed uv only with the system Python's own pip, which stock Ubuntu 24.04
    and Debian 12 do not ship (python3-pip): there ./dev said "has no pip module ... instead
    of uv" and installed everything with pip (a set-up of about 73 s against 45 s). Now the
    pip of a venv made with the venv module (which ./dev ensures) installs uv, and the venv
    is removed; the next run finds uv and makes no venv."""
    python = _fake_system_python(tmp_path, ensurepip=True)
    proc = _ensure_uv(tmp_path, python)
    uv = tmp_path / ".dev-tools" / "uv" / "bin" / "uv"
    assert proc.returncode == 0 and proc.stdout == f"UV={uv}\n", proc.stdout + proc.stderr
    assert "instead of uv" not in proc.stderr, proc.stderr
    assert f"setup: making a throwaway venv whose pip installs uv ({python} has no pip module) ... done" \
        in proc.stderr, proc.stderr
    assert "setup: installing uv (tools/requirements-uv.txt) into .dev-tools ... done" in proc.stderr
    throwaway = tmp_path / ".dev-tools" / "uv-installer-venv"
    assert (tmp_path / "venv_calls").read_text() == f"-m venv {throwaway}\n"
    pip_calls = (tmp_path / "pip_calls").read_text().splitlines()
    assert len(pip_calls) == 1 and pip_calls[0].startswith("-m pip install "), pip_calls
    assert f"--target {uv.parent.parent} -r tools/requirements-uv.txt" in pip_calls[0], pip_calls
    assert not throwaway.exists()
    again = _ensure_uv(tmp_path, python)   # a re-run: uv is there, no venv is made
    assert again.returncode == 0 and again.stdout == f"UV={uv}\n", again.stdout + again.stderr
    assert again.stderr == "", again.stderr
    assert (tmp_path / "venv_calls").read_text().count("-m venv") == 1


@pytest.mark.parametrize("ensurepip", [False, True], ids=["no ensurepip", "the venv fails"])
def test_without_pip_or_a_venv_to_install_uv_with_the_set_up_keeps_pip(tmp_path, ensurepip):
    """Where no venv with pip can be made either, ./dev installs with pip, saying why."""
    python = _fake_system_python(tmp_path, ensurepip=ensurepip, venv_works=False)
    proc = _ensure_uv(tmp_path, python)
    assert proc.returncode == 0 and proc.stdout == "UV=\n", proc.stdout + proc.stderr
    if ensurepip:
        assert ("has no pip module, and no venv could be made to install uv with (see .venv/.dev/setup.log): "
                "installing with pip inside the venv instead of uv") in proc.stderr, proc.stderr
        assert not (tmp_path / ".dev-tools" / "uv-installer-venv").exists()
    else:
        assert (f"setup: {python} has no pip module (nor ensurepip, to make a venv with pip): installing "
                "with pip inside the venv instead of uv") in proc.stderr, proc.stderr
        assert not (tmp_path / "venv_calls").exists()
    assert not (tmp_path / "pip_calls").exists()
