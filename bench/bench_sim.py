"""CPU use of the simulated Cozmo at full streams.

The simulator (SimServer on a loopback port) runs in this process; a client in a
child process plays the driver: the project's engine session over UDP, which
initialises the robot, turns the camera on and feeds DisplayImage and
OutputAudio at 30 per second each (the robot's pace). The simulator's CPU is
this process's CPU time (``time.process_time``) over wall time, so the client's
work is not counted.

    PYTHONPATH=. python bench/bench_sim.py [--seconds 10] [--scenarios idle,grey,grey-moving,colour-moving]

Prints one table row per scenario: CPU as a percentage of one core and the rate
of every stream measured at the simulator. Then the state stream as the client gets
it, with the colour camera on and the robot turning, alone and beside busy processes
(``--busy``, default 4), with the camera's frames rendered on the simulator's worker
thread (its default) and on its I/O thread: the rate, the largest and the p99 gap
between two RobotState.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from _common import bench_report, record_table, window_start  # noqa: E402

SCENARIOS = {
    # name: (camera, colour, moving, feed display+audio)
    "idle": (False, False, False, False),
    "state+anim": (False, False, False, True),
    "grey": (True, False, False, True),
    "grey-moving": (True, False, True, True),
    "colour-moving": (True, True, True, True),
}


# ----------------------------------------------------------------------------- the client

def client_main(port: int, seconds: float, scenario: str) -> int:
    import numpy as np

    from cozmo_driver.protocol import messages as m
    from cozmo_driver.protocol.audio import encode_ulaw
    from cozmo_driver.protocol.display import encode_display
    from cozmo_driver.protocol.session import MessageReceived, Role, Session
    from cozmo_driver.transport.udp import UdpTransport

    camera, colour, moving, feed = SCENARIOS[scenario]
    session = Session(Role.ENGINE)
    seen = set()
    states: list = []  # when each RobotState came (the I/O thread appends)

    def on_event(event) -> None:
        if isinstance(event, MessageReceived):
            seen.add(event.message.NAME)
            if event.message.NAME == "RobotState":
                states.append(time.monotonic())

    transport = UdpTransport(session, local_addr=("127.0.0.1", 0), remote_addr=("127.0.0.1", port),
                             on_event=on_event, name="bench-client")
    transport.start()
    try:
        transport.call(lambda: session.connect(time.monotonic()))

        def wait(name: str) -> None:
            deadline = time.monotonic() + 10
            while name not in seen:
                if time.monotonic() > deadline:
                    raise SystemExit(f"bench client: no {name}")
                time.sleep(0.01)

        wait("FirmwareSignature")
        # twice, as the driver: the robot takes the RESET as our packet 0 and drops the first
        transport.call(session.send, m.Enable())
        transport.call(session.send, m.Enable())
        wait("BodyInfo")
        transport.call(session.send, m.SetOrigin(pose_frame_id=0, pose_origin_id=1))
        transport.call(session.send, m.SyncTime(timestamp_ms=0))
        transport.call(session.send, m.EnableAnimationState())
        if camera:
            transport.call(session.send, m.EnableColorImages(enable=colour))
            transport.call(session.send, m.EnableCamera(image_send_mode=1, image_resolution=4))
        if moving:
            transport.call(session.send, m.TurnInPlaceAtSpeed(wheel_speed_mmps=40, wheel_accel_mmps2=200,
                                                              direction=1))
            transport.call(session.send, m.MoveHead(speed_rad_per_sec=0.0))
        tone = (5000 * np.sin(np.arange(744) * 2 * math.pi * 440 / 22320)).astype(np.int16)
        audio = m.OutputAudio(samples=encode_ulaw(tone))
        bits = np.zeros((32, 128), dtype=bool)
        print("ready", flush=True)
        start = time.monotonic()
        k = 0
        while True:
            tick = start + k / 30.0
            if tick > start + seconds:
                break
            delay = tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if feed:
                bits[:] = False
                bits[8:24, (k * 3) % 120:(k * 3) % 120 + 8] = True     # a moving block
                image = m.DisplayImage(image=encode_display(bits))
                transport.call_soon(session.send, audio)
                transport.call_soon(session.send, image)
            k += 1
        transport.call(session.send, m.StopAllMotors())
        time.sleep(0.1)
    finally:
        transport.stop()
    came = [t for t in states if start + 1.0 <= t <= start + seconds]  # after its first second
    gaps = sorted(b - a for a, b in zip(came, came[1:])) or [math.nan]
    print(f"states {len(came)} {came[-1] - came[0] if len(came) > 1 else math.nan} {gaps[-1]} "
          f"{gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]}", flush=True)
    return 0


# ----------------------------------------------------------------------------- the simulator side

def run_scenario(name: str, seconds: float, seed: int, render_thread: bool = True) -> dict:
    from cozmo_driver.sim import RobotConfig, SimServer

    camera, _, _, _ = SCENARIOS[name]
    with SimServer(port=0, seed=seed, config=RobotConfig(camera_render_thread=render_thread)) as sim:
        port = sim.address[1]
        child = subprocess.Popen([sys.executable, __file__, "--client", str(port), "--seconds",
                                  str(seconds + 1.5), "--scenario", name],
                                 stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                 env=dict(os.environ, PYTHONPATH=str(ROOT)))
        try:
            line = child.stdout.readline()
            if line.strip() != "ready":
                raise SystemExit(f"bench client failed to start: {line!r}")
            ok = sim.wait_until(lambda s: s.streaming() and (not camera or s.counters()["camera"] > 2), 10.0)
            if not ok:
                raise SystemExit("simulator never reached full streams")
            time.sleep(0.5)                                  # let the client's feed settle
            sim.rates()
            wall0, cpu0 = time.monotonic(), time.process_time()
            time.sleep(seconds)
            wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
            rates = sim.rates()
            robot = sim.stats()["robot"]
        finally:
            out = child.communicate(timeout=seconds + 30)[0].split()
    count, span, largest, p99 = (float(v) for v in out[1:5]) if out[:1] == ["states"] else (math.nan,) * 4
    return {"scenario": name, "wall_s": wall, "cpu_s": cpu, "cpu_pct": 100.0 * cpu / wall,
            "renders": robot["image_renders"], "skipped": robot["images_skipped"],
            "client_state_hz": (count - 1) / span, "gap_max_ms": 1000 * largest, "gap_p99_ms": 1000 * p99,
            **rates}


def beside_busy_processes(busy: int, seconds: float, seed: int, render_thread: bool) -> dict:
    """colour-moving with ``busy`` processes beside it that spin (each ends by itself)."""
    spin = f"import time\nend = time.monotonic() + {seconds + 40:.0f}\nwhile time.monotonic() < end: pass"
    loads = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(busy)]
    try:
        return run_scenario("colour-moving", seconds, seed, render_thread)
    finally:
        for load in loads:
            load.kill()
            load.wait(5)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--busy", type=int, default=4, help="busy processes beside the state stream's second "
                   "measurement (default 4; 0: that measurement alone, without them)")
    p.add_argument("--client", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--scenario", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.client is not None:
        return client_main(args.client, args.seconds, args.scenario)
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    for n in names:
        if n not in SCENARIOS:
            p.error(f"unknown scenario {n!r}; choose from {', '.join(SCENARIOS)}")
    print(f"simulator CPU over {args.seconds:.0f} s per scenario (Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs); client load in a separate process")
    header = (f"{'scenario':<15} {'wall s':>7} {'CPU s':>7} {'CPU % core':>10} {'state Hz':>9} "
              f"{'camera fps':>10} {'display fps':>11} {'audio fps':>9} {'renders':>8}")
    print(header)
    print("-" * len(header))
    rows = []
    for n in names:
        r = run_scenario(n, args.seconds, args.seed)
        rows.append([r["scenario"], f"{r['wall_s']:.2f}", f"{r['cpu_s']:.2f}", f"{r['cpu_pct']:.1f}",
                     f"{r['state']:.1f}", f"{r['camera']:.1f}", f"{r['display']:.1f}",
                     f"{r['audio']:.1f}", r["renders"]])
        print(f"{r['scenario']:<15} {r['wall_s']:7.2f} {r['cpu_s']:7.2f} {r['cpu_pct']:10.1f} "
              f"{r['state']:9.1f} {r['camera']:10.1f} {r['display']:11.1f} {r['audio']:9.1f} "
              f"{r['renders']:8d}", flush=True)
    record_table(f"Simulator CPU over {args.seconds:.0f} s per scenario, client in another process",
                 ["scenario", "wall s", "CPU s", "CPU % of one core", "state Hz", "camera fps",
                  "display fps", "audio fps", "renders"], rows)
    print(f"\nthe state stream at the client, colour camera, robot turning, over {args.seconds:.0f} s")
    header = (f"{'busy':>4} {'frames rendered on':<19} {'state Hz':>8} {'largest gap ms':>14} "
              f"{'p99 gap ms':>10} {'camera fps':>10} {'skipped':>7}")
    print(header)
    print("-" * len(header))
    for busy in sorted({0, max(0, args.busy)}):
        since, rows = window_start(), []
        for render_thread in (True, False):
            r = beside_busy_processes(busy, args.seconds, args.seed, render_thread)
            where = "the worker thread" if render_thread else "the I/O thread"
            rows.append([where, f"{r['client_state_hz']:.1f}", f"{r['gap_max_ms']:.0f}",
                         f"{r['gap_p99_ms']:.0f}", f"{r['camera']:.1f}", r["skipped"]])
            print(f"{busy:4d} {where:<19} {r['client_state_hz']:8.1f} {r['gap_max_ms']:14.0f} "
                  f"{r['gap_p99_ms']:10.0f} {r['camera']:10.1f} {r['skipped']:7d}", flush=True)
        record_table(f"The state stream at the client over {args.seconds:.0f} s, colour camera, robot turning, "
                     f"{busy} busy processes beside the simulator",
                     ["frames rendered on", "state Hz (client)", "largest gap ms", "p99 gap ms",
                      "camera fps", "frames skipped"], rows, since=since)
    return 0


if __name__ == "__main__":
    if "--client" in sys.argv:      # the load generator, started by the benchmark itself
        sys.exit(main())
    with bench_report("bench_sim"):
        rc = main()
    sys.exit(rc)
