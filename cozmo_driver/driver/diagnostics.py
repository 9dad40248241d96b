"""The driver's health as diagnostic key/value pairs (for /diagnostics). Pure.

Levels are diagnostic_msgs/DiagnosticStatus's: OK 0, WARN 1, ERROR 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from .sensors import BATTERY_EMPTY_V, BATTERY_LOW_V, volts_text

__all__ = ["OK", "WARN", "ERROR", "DiagnosticReport", "link_report", "robot_report", "av_report",
           "released_report"]

OK, WARN, ERROR = 0, 1, 2


@dataclass(frozen=True)
class DiagnosticReport:
    level: int
    message: str
    values: List[Tuple[str, str]]


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def link_report(state: str, active: bool, robot: str, session: Any, transport: Any,
                state_rate_hz: float, images: Any = None, camera: str = "",
                frames_on_arrival: Optional[int] = None, hint: str = "",
                images_unconverted: int = 0, activation_error: str = "") -> DiagnosticReport:
    """Connection state and link quality. ``state`` is the client's LinkState value
    ('ready', 'lost', ...); ``session``/``transport`` their stats objects (or None);
    ``images``: the camera assembler's stats; ``images_unconverted``: of its completed
    images, those dropped as they did not convert (not counted completed);
    ``camera``: what the camera does, in words; ``frames_on_arrival``: camera images
    stamped with their arrival, not their capture time; ``hint``: what to check, given as a
    value "what to check" while the level is not OK. Inactive, the level is OK (the driver
    was told to rest) and the message says the link's state all the same, unless
    ``activation_error`` says why the last activation failed: then it is an ERROR saying so
    (the driver was told to work and cannot)."""
    if state == "ready" and state_rate_hz > 0.0:
        level, message = OK, f"connected to {robot}"
    elif state == "ready":  # a stall of the Wi-Fi, or the robot gone: lost after peer_timeout
        level, message = WARN, f"connected to {robot}, but no robot state since the last report"
    elif state in ("connecting", "initializing"):
        level, message = WARN, f"connecting to {robot}"
    elif state == "lost":
        level, message = ERROR, f"robot {robot} lost, reconnecting"
    else:
        level, message = ERROR, f"not connected ({state})"
    if not active:
        level, message = (ERROR, f"inactive: the last activation failed: {activation_error}") \
            if activation_error else (OK, f"inactive (lifecycle); {message}")
    values: List[Tuple[str, str]] = [("state", state), ("robot", robot),
                                     ("robot state rate (Hz)", _fmt(state_rate_hz))]
    if hint and level != OK:
        values.insert(2, ("what to check", hint))
    if session is not None:
        sent = session.reliable_packets_sent
        # not the datagram loss: a loss resends every packet in flight behind the lost one,
        # and a lost ack resends what arrived, so this is several times the loss rate
        resent = session.retransmissions / sent if sent else 0.0
        values += [
            ("rtt (s)", _fmt(session.rtt_s)),
            ("smoothed rtt (s)", _fmt(session.srtt_s)),
            ("datagrams sent", _fmt(session.datagrams_sent)),
            ("datagrams received", _fmt(session.datagrams_received)),
            ("reliable packets sent", _fmt(sent)),
            ("retransmissions", _fmt(session.retransmissions)),
            ("retransmission timeouts", _fmt(session.retransmission_timeouts)),
            ("resent share (retransmitted / reliable sent, not the loss rate)", _fmt(resent)),
            ("malformed datagrams dropped", _fmt(session.malformed_datagrams)),
            ("malformed packets dropped", _fmt(session.malformed_packets)),
            ("unknown messages", _fmt(session.unknown_messages)),
            ("duplicate packets", _fmt(session.duplicate_packets)),
            ("out-of-window packets", _fmt(session.out_of_window_packets)),
            ("unexpected frames dropped (out of place, or of an earlier connection)",
             _fmt(session.unexpected_frames)),
            ("ping echoes unmatched (duplicates, or of an earlier connection)",
             _fmt(session.unmatched_ping_echoes)),
            ("connections", _fmt(session.connects)),
            ("connections lost", _fmt(session.connections_lost)),
            ("connection attempts unanswered", _fmt(session.connect_timeouts)),
            ("connections answered without robot state", _fmt(session.connections_without_state)),
            ("stale links ended", _fmt(session.stale_link_disconnects)),
        ]
        bad = [what for what, count in (("datagrams", session.malformed_datagrams),
                                        ("packets", session.malformed_packets)) if count]
        if active and state == "ready" and bad:
            message += f" (malformed {' and '.join(bad)} dropped)"
    if transport is not None:
        errors = transport.callback_errors  # a fault of the driver's own handling
        values += [
            ("wrong-source datagrams dropped", _fmt(transport.wrong_source)),
            ("send errors", _fmt(transport.send_errors)),
            ("errors handling datagrams (see the log)", _fmt(errors)),
        ]
        if errors and active:
            level = max(level, WARN)
            message += f" ({errors} errors handling datagrams: see the log)"
    if camera:
        values.append(("camera", camera))
    if images is not None:
        values += [
            ("camera images completed", _fmt(images.completed_images - images_unconverted)),
            ("camera images dropped incomplete", _fmt(images.dropped_images)),
            ("camera images cut off by switching the camera off", _fmt(images.discarded_images)),
            ("camera images dropped unconverted (see the log)", _fmt(images_unconverted)),
            ("camera chunks invalid", _fmt(images.invalid_chunks)),
        ]
    if frames_on_arrival is not None:
        values.append(("camera images stamped on arrival", _fmt(frames_on_arrival)))
    return DiagnosticReport(level, message, values)


def robot_report(connected: bool, battery_v: Optional[float], percentage: Optional[float],
                 emergency_stop: bool, yaw_rate_disagreement: Optional[float],
                 reanchors: int, refused_commands: int, orientation: Optional[str] = None,
                 lying: bool = False, active: bool = True, on_charger: bool = False) -> DiagnosticReport:
    """The robot's own condition as the driver sees it. ``orientation``: which way up it is,
    in words (None: not known); ``lying``: on its back, face or side, where it cannot drive;
    ``on_charger``: its last state says it is on its charger (or charging), where a low or
    empty battery is being charged: said, but neither a warning nor an error.
    Every problem is said (an error first); inactive (``active`` false), the level is OK
    (the driver was told to rest), as the link's."""
    volts = battery_v if battery_v is not None and math.isfinite(battery_v) else None
    level, said = OK, []
    charging = connected and on_charger and volts is not None and volts < BATTERY_LOW_V
    if charging:
        volts = None  # judged below as charging, not as a problem
    if connected and volts is not None and volts < BATTERY_EMPTY_V:
        level = ERROR
        said.append(f"battery empty ({volts_text(volts)}): the robot switches itself off after a "
                    f"minute below {BATTERY_EMPTY_V:.2f} V; put it on its charger")
    if emergency_stop:
        said.append("emergency stop engaged")
    if not connected:
        said.append("no data: not connected")
    elif lying:
        said.append(f"the robot lies {orientation}: it cannot drive until it is set upright")
    if connected and volts is not None and BATTERY_EMPTY_V <= volts < BATTERY_LOW_V:
        said.append(f"battery low ({volts_text(volts)}): put the robot on its charger")
    level = max(level, WARN) if said else OK
    if charging:
        said.append(f"battery low ({volts_text(battery_v)}), charging on its charger")
    message = "; ".join(said) or "ok"
    if not active:
        level, message = OK, "inactive (lifecycle)" + (f"; {message}" if said else "")
    values = [
        ("battery voltage (V)", _fmt(battery_v)),
        ("battery percentage estimate", _fmt(percentage)),
        ("emergency stop", "engaged" if emergency_stop else "released"),
        ("tread vs gyro yaw rate, mean |difference| (rad/s)", _fmt(yaw_rate_disagreement)),
        ("odometry re-anchorings", _fmt(reanchors)),
        ("commands refused", _fmt(refused_commands)),
        ("orientation", orientation or "unknown"),
    ]
    return DiagnosticReport(level, message, values)


#: the counters of AVStream.counters() that count the stream's failures: its ticks' and its
#: inputs' (goals' starts and cancels, faces, images, audio) that raised (driver bugs,
#: cozmo_driver.anim.av_stream._stream_failed)
AV_STREAM_FAILURES = ("stream ticks failed (driver bug, see the log)", "stream inputs failed (driver bug, see the log)")


def av_report(active: bool, connected: bool, counters: Mapping[str, Any], new_underruns: int,
              playing: str, animations: int, groups: int, images_rejected: int,
              chunks_rejected: int) -> DiagnosticReport:
    """Display, audio and animations: what plays, and the 30 fps stream's counters.

    ``counters`` are the stream's (frames sent, underruns, ...); ``new_underruns`` the
    ticks sent late since the previous report (WARN when any). Once a tick or an input of the
    stream failed (``AV_STREAM_FAILURES``, a driver bug), WARN while active, saying so first.
    """
    if not active:
        level, message = OK, "inactive (lifecycle)"
    elif not connected:
        level, message = WARN, "not connected: nothing plays"
    elif new_underruns:
        level, message = WARN, f"{new_underruns} frames sent late since the last report ({playing})"
    else:
        level, message = OK, playing
    failures = sum(int(counters.get(key, 0)) for key in AV_STREAM_FAILURES)
    if active and failures:
        level = max(level, WARN)
        message = (f"the display/audio stream failed {failures} time{'s' if failures != 1 else ''} (a driver bug: "
                   f"see the log); {message}")
    values = [(key, _fmt(value)) for key, value in counters.items()]
    values += [
        ("animations known", _fmt(animations)),
        ("animation groups known", _fmt(groups)),
        ("display images refused", _fmt(images_rejected)),
        ("audio chunks refused", _fmt(chunks_rejected)),
    ]
    return DiagnosticReport(level, message, values)


def released_report(finalized: bool, node_name: str, robot: str, configure_error: str = "") -> DiagnosticReport:
    """Each of the driver's reports while it holds no robot client: unconfigured (at start with
    ``autostart`` false, after a cleanup) or ``finalized`` (after a shutdown). OK, as while
    inactive: the driver was told to rest; the message says how to have it drive again. Unless
    ``configure_error`` says why the last configure failed (what the driver logged): then it is
    an ERROR saying so and what to do (the driver was told to work and cannot), until a
    configure succeeds, or the shutdown."""
    level, values = OK, [("robot_ip:robot_port", robot)]
    if finalized:
        state, message = "finalized", ("finalized (lifecycle shutdown): not connected to the robot; restart the "
                                       "node to drive it")
    elif configure_error:
        state, level = "unconfigured", ERROR
        message = (f"unconfigured: the last configure failed: {configure_error}; not connected to the robot; "
                   f"fix that (the driver's log says more), then configure again: ros2 lifecycle set {node_name} "
                   "configure, then activate")
        values.append(("last configure", f"failed: {configure_error}"))
    else:
        state, message = "unconfigured", (f"unconfigured (lifecycle): not connected to the robot; configure and "
                                          f"activate it: ros2 lifecycle set {node_name} configure, then activate")
    # not "robot", which the link's report gives for the robot it drives (demo_node reads it)
    return DiagnosticReport(level, message, [("lifecycle state", state)] + values)
