"""The simulated Cozmo's path follower: AppendPathSeg*, ExecutePath, ClearPath, TrimPath.

:class:`PathFollower` keeps the segments the engine appended (lines, arcs, point
turns, in the engine's odometry frame) and, once ExecutePath starts them, owns
the :class:`~cozmo_driver.sim.body.Body`'s wheels as its base controller: lines
and arcs are followed by steering at a point 20 mm ahead on the segment, point
turns by the same controller as TurnInPlace. It reports PathFollowingEvent
(started, completed, interrupted); ``RobotState.curr_path_segment`` is the index
of the segment being followed (:attr:`PathFollower.segment_index`), an arc counted by
its pieces, as the firmware splits it (:func:`arc_pieces`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..protocol import messages as msgs
from .body import BaseController, Body
from .motors import MAX_WHEEL_SPEED_MMPS, TRACK_WIDTH_MM, Turn, turn_the_way, wrap_angle

__all__ = ["PathFollower", "PathRun", "Segment", "PATH_CAPACITY", "arc_pieces"]

logger = logging.getLogger("cozmo.sim")

_PathEvent = msgs.ENUMS["PathEventType"]
#: how far ahead on a line or arc the follower steers (mm)
_LOOK_AHEAD_MM = 20.0
#: the most segments the robot holds: Anki's firmware numbers them in a signed byte (its
#: curr_path_segment), and drops a segment appended past its path's size
PATH_CAPACITY = 128


def arc_pieces(start: float, sweep: float) -> List[Tuple[float, float]]:
    """(start angle, sweep) of the arcs Anki's firmware makes of one: it splits an arc
    where its centre angle passes 0 or pi (Planning::Path::AppendArc), so that each is a
    function of x."""
    pieces: List[Tuple[float, float]] = []
    way = 1.0 if sweep > 0 else -1.0
    current, left = wrap_angle(start), abs(sweep)
    for _ in range(PATH_CAPACITY + 1):  # more pieces would not fit a path anyway
        if left <= 1e-9:
            break
        k = math.floor(current / math.pi) + 1 if way > 0 else math.ceil(current / math.pi) - 1
        boundary = k * math.pi               # the next multiple of pi ahead
        step = abs(boundary - current)
        if step >= left:
            pieces.append((current, way * left))
            break
        pieces.append((current, way * step))
        current, left = boundary, left - step
    return pieces


@dataclass
class Segment:
    kind: str                    # line | arc | turn
    msg: Any                     # the AppendPathSeg* message as received (engine frame)


@dataclass
class PathRun:
    """A path being followed."""

    event_id: int
    segments: List[Segment]
    index: int = 0
    v: float = 0.0               # commanded linear speed, mm/s
    turn: Optional[Turn] = None
    arc_progress: Optional[float] = None  # rad along the current arc's sweep


class PathFollower(BaseController):
    """The appended segments and the path being followed, if any."""

    follows_path = True

    def __init__(self, body: Body) -> None:
        self.body = body
        self.fw = body.fw
        self.boot()

    def boot(self) -> None:
        self.segments: List[Segment] = []
        self.run: Optional[PathRun] = None

    def handlers(self) -> Dict[str, Callable[[Any, float], None]]:
        return {"AppendPathSegLine": lambda m, now: self._append("line", m),
                "AppendPathSegArc": lambda m, now: self._append("arc", m),
                "AppendPathSegPointTurn": lambda m, now: self._append("turn", m),
                "ClearPath": self._on_ClearPath, "TrimPath": self._on_TrimPath,
                "ExecutePath": self._on_ExecutePath}

    @property
    def segment_index(self) -> Optional[int]:
        """The index of the segment being followed, or None when no path runs."""
        return self.run.index if self.run is not None else None

    def forget(self) -> None:
        """Drop the appended segments (a running path keeps its own)."""
        self.segments = []

    # ------------------------------------------------------------------ commands

    def _append(self, kind: str, m: Any) -> None:
        values = [getattr(m, f) for f in m.FIELDS]
        if any(isinstance(v, float) and not (math.isfinite(v) and abs(v) <= 1e6) for v in values):
            logger.warning("path segment with an impossible value ignored: %r", m)
            return
        if kind == "arc":  # as the firmware, in pieces that do not pass the angles 0 or pi
            parts = [Segment(kind, replace(m, start_angle_rad=start, sweep_rad=sweep))
                     for start, sweep in arc_pieces(float(m.start_angle_rad), float(m.sweep_rad))]
        else:
            parts = [Segment(kind, m)]
        for part in parts:
            if len(self.segments) >= PATH_CAPACITY:
                logger.warning("path segment dropped: the path holds %d already", PATH_CAPACITY)
                return
            self.segments.append(part)

    def _on_ClearPath(self, m: Any, now: float) -> None:
        if self.run is not None:
            self.body.halt_base(now, "ClearPath")
        self.segments = []

    def _on_TrimPath(self, m: Any, now: float) -> None:
        segs = self.segments
        head, tail = int(m.head), int(m.tail)
        segs[:] = segs[head:len(segs) - tail] if tail else segs[head:]
        if self.run is not None:
            self.run.index = max(0, self.run.index - head)

    def _on_ExecutePath(self, m: Any, now: float) -> None:
        body = self.body
        body.end_base_mode(now, "new path")
        event_id = int(m.event_id)
        self.fw.emit(msgs.PathFollowingEvent(event_id=event_id, event_type=_PathEvent.PATH_STARTED))
        if body.picked_up:
            self.fw.emit(msgs.PathFollowingEvent(event_id=event_id,
                                                 event_type=_PathEvent.PATH_INTERRUPTED))
            return
        segments = self.segments  # shared: segments appended while running extend the path
        lw, rw = body.wheels
        self.run = PathRun(event_id, segments, v=(lw.speed + rw.speed) / 2)
        body.controller = self
        if not segments:
            self._finish()

    # ------------------------------------------------------------------ base controller

    def interrupt(self, reason: str) -> None:
        run = self.run
        if run is not None:
            self.fw.emit(msgs.PathFollowingEvent(event_id=run.event_id,
                                                 event_type=_PathEvent.PATH_INTERRUPTED))
            logger.debug("path %d interrupted: %s", run.event_id, reason)
            self.run = None

    def _finish(self) -> None:
        run = self.run
        self.run = None
        self.body.controller = None
        self.body.set_wheels_direct(0.0, 0.0)
        self.segments = []
        if run is not None:
            self.fw.emit(msgs.PathFollowingEvent(event_id=run.event_id,
                                                 event_type=_PathEvent.PATH_COMPLETED))

    def step(self, dt: float) -> None:
        run = self.run
        if run is None:
            return
        while run.index < len(run.segments):
            if not self._segment_step(run, run.segments[run.index], dt):
                return
            run.index += 1
            run.turn = None
            run.arc_progress = None
        self._finish()

    def _segment_step(self, run: PathRun, seg: Segment, dt: float) -> bool:
        """Drive one substep along ``seg``; True when the segment is finished."""
        if seg.kind == "turn":
            return self._point_turn_step(run, seg.msg, dt)
        # lines and arcs: steer towards a point a little ahead on the segment
        target = self._line_target(seg.msg) if seg.kind == "line" else self._arc_target(run, seg.msg)
        if target is None:
            return True
        return self._steer(run, seg.msg, target, dt)

    def _point_turn_step(self, run: PathRun, m: Any, dt: float) -> bool:
        body = self.body
        if run.turn is None:
            # rad/s and rad/s^2 of the body; the flag (pycozmo's "unknown") asks for the
            # shorter way round, else the speed's sign says which way (docs/simulator.md)
            target_world = float(m.angle_rad) + body.anchor[2]
            turn = wrap_angle(target_world - body.yaw_u)
            speed, tol = float(m.speed_mmps), abs(float(m.angle_tolerance_rad))
            if not m.unknown and abs(turn) > tol:
                turn = turn_the_way(turn, speed)
            run.turn = Turn(body.yaw_u + turn, abs(speed) or 2.0, abs(float(m.accel_mmps2)) or 10.0,
                            tol)
        w = run.turn.step(body.yaw_u, dt)
        if w is None:
            body.set_wheels_direct(0.0, 0.0)
            run.v = 0.0
            return True
        r = w * TRACK_WIDTH_MM / 2.0
        body.set_wheels_direct(-r, r)
        return False

    def _line_target(self, m: Any) -> Optional[Tuple[float, float, float]]:
        """(x, y) to steer at in the world and the mm left, or None when the line is done."""
        body = self.body
        ax_, ay_ = body.engine_to_world(float(m.from_x_mm), float(m.from_y_mm))
        bx, by = body.engine_to_world(float(m.to_x_mm), float(m.to_y_mm))
        dx, dy = bx - ax_, by - ay_
        length = math.hypot(dx, dy)
        if length < 1e-6:
            return None
        ux, uy = dx / length, dy / length
        along = (body.x - ax_) * ux + (body.y - ay_) * uy
        remaining = length - along
        if remaining <= 1.0:
            return None
        look = along + min(_LOOK_AHEAD_MM, remaining)
        return ax_ + ux * look, ay_ + uy * look, remaining

    def _arc_target(self, run: PathRun, m: Any) -> Optional[Tuple[float, float, float]]:
        """As :meth:`_line_target`, for an arc."""
        body = self.body
        cx, cy = body.engine_to_world(float(m.center_x_mm), float(m.center_y_mm))
        radius = abs(float(m.radius_mm))
        sweep = float(m.sweep_rad)
        start = float(m.start_angle_rad) + body.anchor[2]
        if radius < 1e-6 or abs(sweep) < 1e-9:
            return None
        d = 1.0 if sweep > 0 else -1.0
        phi = math.atan2(body.y - cy, body.x - cx)
        progress = wrap_angle(phi - start) * d
        if progress < -0.5:
            progress += 2.0 * math.pi
        # keep progress monotonic across the +-pi seam for sweeps beyond pi
        prev = run.arc_progress
        while prev is not None and progress + math.pi < prev:
            progress += 2.0 * math.pi
        run.arc_progress = progress
        remaining = (abs(sweep) - progress) * radius
        if remaining <= 1.0:
            return None
        ahead = start + d * (progress + min(_LOOK_AHEAD_MM, remaining) / radius)
        return cx + radius * math.cos(ahead), cy + radius * math.sin(ahead), remaining

    def _steer(self, run: PathRun, m: Any, target: Tuple[float, float, float], dt: float) -> bool:
        """Set the wheels to drive at ``target``, slowing to stop at the path's end."""
        body = self.body
        tx, ty, remaining = target
        speed = float(m.speed_mmps)
        sign = -1.0 if speed < 0 else 1.0
        vmax = min(abs(speed) or 100.0, MAX_WHEEL_SPEED_MMPS)
        accel = abs(float(m.accel_mmps2)) or 200.0
        decel = abs(float(m.decel_mmps2)) or 200.0
        heading = math.atan2(ty - body.y, tx - body.x)
        facing = body.yaw_u if sign > 0 else body.yaw_u + math.pi
        err = wrap_angle(heading - facing)
        nxt = run.segments[run.index + 1] if run.index + 1 < len(run.segments) else None
        stop_at_end = nxt is None or nxt.kind == "turn"
        if abs(err) > math.radians(50) and abs(run.v) < 20.0:
            # turn towards the segment before driving along it
            run.v = 0.0
            w = math.copysign(min(4.0, 3.0 * abs(err) + 0.3), err)
            r = w * TRACK_WIDTH_MM / 2.0
            body.set_wheels_direct(-r, r)
            return False
        vdes = vmax
        if stop_at_end:
            vdes = min(vdes, math.sqrt(2.0 * decel * remaining))
        if abs(err) > math.radians(20):
            vdes = min(vdes, 30.0)
        v = abs(run.v)
        v = min(vdes, v + accel * dt) if v < vdes else max(vdes, v - decel * dt)
        run.v = sign * v
        w = max(-6.0, min(6.0, 4.0 * err))
        half = w * TRACK_WIDTH_MM / 2.0
        left, right = sign * v - half, sign * v + half
        scale = max(abs(left), abs(right)) / MAX_WHEEL_SPEED_MMPS
        if scale > 1.0:
            left /= scale
            right /= scale
        body.set_wheels_direct(left, right)
        return False
