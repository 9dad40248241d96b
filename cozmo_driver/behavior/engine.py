"""The behavior engine: one scheduler for reactions, activities and the user.

Inputs (all with the time ``now`` as an argument; nothing here reads a clock):

* :meth:`Engine.on_trigger` (a robot event or any named trigger, with data),
  :meth:`Engine.on_cube_tap`, :meth:`Engine.on_battery`, :meth:`Engine.on_state`
  (level flags from the robot's status), :meth:`Engine.on_connected`,
  :meth:`Engine.on_emergency_stop`, :meth:`Engine.on_driver_active`;
* :meth:`Engine.on_user_command`: the user commanded the robot; :meth:`Engine.on_user_goal`:
  a user's goal runs (or none any more);
* :meth:`Engine.set_enabled`;
* :meth:`Engine.tick`, about ten times a second.

Outputs: the commands its behaviors give through the :class:`RobotInterface`,
:meth:`Engine.status` and the :attr:`Engine.emotions`.

Rules, in the order :meth:`tick` applies them:

1. Disabled, the robot not connected, the driver's emergency stop engaged (or released
   since, with no :meth:`Engine.set_enabled` true after the release: a release starts
   nothing), or the driver inactive (lifecycle):
   nothing runs (the running behavior is stopped, INTERRUPTED), and the status
   says ``paused`` with the reason (``pause_remaining`` 0: until that ends). The lights
   off its end sent then (which an inactive driver, or one without the robot, refuses) are
   sent again once the driver is active and the robot back, the emergency stop or not.
2. A user command pauses the engine for ``user_pause`` seconds (every further
   command extends it), a user's goal for as long as it runs (``pause_remaining`` 0:
   until it ends) and ``user_pause`` after it ended (whatever ``user_pause`` is, 0
   included): the running behavior
   is stopped at once (INTERRUPTED; its commands cancelled, which stops the
   motors it moved) and nothing starts, reactions included, until the pause is over;
   the triggers that came are dropped, but the robot's ``on_charger`` while it is still on
   its charger and ``cliff_detected`` while it still sees the cliff (:data:`KEPT_THROUGH_PAUSE`):
   their reactions (going to sleep, backing off the edge) start at the end.
   Disabled, the pause is kept but not said nor shown in the status; an enable during it
   says it, and one after it says no 'pause over'. Held (rule 1), its end is said as it
   runs out ('pause over, but <the hold>'), not when the hold ends.
3. Triggers that arrived since the last tick start their reaction's behavior
   when the reaction is not cooling down, its ``when`` conditions hold, the
   behavior can start, and what runs has a lower priority (it is then stopped,
   INTERRUPTED). Activity behaviors run at priority 0. A trigger that loses to
   a running behavior of the same or a higher priority waits up to 1.5 s for
   it to end (a put-down ends the pick-up reaction, then gets its own); one of the
   robot's that says where it is (``on_charger``, ``picked_up``, ``cliff_detected``,
   ``falling``, ``charging_started``, ``on_back``/``on_face``/``on_side``) waits for as
   long as that still holds (set on the charger while the pick-up reaction runs, the
   robot still goes to sleep once it ends). Of a trigger's copies that wait only the
   newest does; one dropped so is logged at info once per running behavior (then at debug).
4. The running behavior is ticked. The charger rule is enforced (tread
   commands are cancelled while on the charger unless the behavior drives off
   it), and ``max_duration`` too (FAILED, "timed out").
5. Idle for the activity's ``idle_between``: the current activity chooses the
   next behavior (not while the robot is picked up or falling), not one that failed
   within :data:`FAIL_BACKOFF_S` (doubled at each failure in a row, at most
   :data:`FAIL_BACKOFF_MAX_S`; a success, or the engine switched on, starts it again).

A behavior that raises (in start, tick, stop or can_start) is stopped, its
outcome is ``error: <exception>``, the error is logged with where it was raised
and counted (``behaviors_failed``, :attr:`Engine.errors`), and the engine goes
on; so does a step of the clean-up at a behavior's end that raises (logged, the rest
still done). Emotions follow every trigger (the emotion event of the trigger's name, not
again within the event's ``min_interval``) even while paused or disabled; behaviors' outcomes apply their ``on_success``
and ``on_failure`` changes. Pure.
"""

from __future__ import annotations

import math
import random
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Set, Tuple

from .activities import ActivityChooser
from .behavior import Behavior, BehaviorContext, CubeTap, Handle, Outcome, RobotInterface, RobotState
from .config import BehaviorSpec, EngineConfig
from .emotions import Emotions
from .reactions import STATE_CHANGES, LowBatteryDetector, ReactionTable

__all__ = ["Engine", "EngineStatus"]

#: how many triggers may wait for the next tick (older ones are dropped)
MAX_PENDING = 64
#: the wait before choosing again when no behavior of the activity could start (s)
RETRY_CHOICE_S = 1.0
#: a trigger whose reaction loses to a running behavior of higher priority waits this long
#: for it to end (s): the put-down that ends a pick-up reaction still gets its own (a robot
#: state trigger waits for as long as its state holds, see :meth:`Engine._still_holds`)
TRIGGER_WAIT_S = 1.5
#: a behavior that failed is not chosen by an activity for this long (s), doubled at each
#: failure in a row up to FAIL_BACKOFF_MAX_S: one whose goal the driver refuses every time (an
#: animation it does not have) would otherwise fail, and be logged, at every idle_between
FAIL_BACKOFF_S = 5.0
FAIL_BACKOFF_MAX_S = 300.0
#: the robot's triggers a user's pause keeps for its end while their state holds: driven onto its
#: charger, the robot goes to sleep once the pause is over, as when set on it (the charger
#: activity, which chooses otherwise, may drive it off); driven to an edge, it backs off and
#: turns away (free play would turn it, or dance, at the edge)
KEPT_THROUGH_PAUSE = ("on_charger", "cliff_detected")
#: why the engine holds still after the emergency stop's release (until :meth:`Engine.set_enabled`)
RELEASED = "the emergency stop was released: call behavior/enable true to start behaviors again"
#: what an enable while the emergency stop is engaged says (log and answer): it does not count
ENABLED_UNDER_THE_STOP = ("enabled, but the emergency stop is engaged: nothing runs; once it is released, "
                          "call behavior/enable true again to start behaviors")


@dataclass(frozen=True)
class EngineStatus:
    """What cozmo_interfaces/BehaviorStatus publishes."""

    enabled: bool
    paused: bool
    pause_remaining: float
    pause_reason: str
    activity: str
    behavior: str
    reason: str
    last_behavior: str
    last_outcome: str
    behaviors_started: int
    behaviors_failed: int


@dataclass
class _Run:
    behavior: Behavior
    spec: BehaviorSpec
    ctx: BehaviorContext
    priority: int
    reason: str
    started: float
    #: the triggers whose reaction was dropped because this behavior ran (said at info once)
    refused: Set[str] = field(default_factory=set)


def _failure(ctx: BehaviorContext) -> str:
    """Why a behavior that returned FAILED without saying why failed: the last of its
    commands that failed (an action's result or refusal, the charger rule), else ""."""
    failed = [handle for handle in ctx.handles if handle.status == Handle.FAILED and handle.message]
    return failed[-1].message if failed else ""


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name})"


class Engine:
    """See the module docstring."""

    def __init__(self, config: EngineConfig, robot: RobotInterface, now: float, seed: int = 0,
                 user_pause: float = 10.0, enabled: bool = True, start_delay: float = 0.0,
                 log: Optional[Callable[[str, str], None]] = None) -> None:
        self.config = config
        self.robot = robot
        self.now = now
        self.state = RobotState()
        self.emotions = Emotions(config.emotions, config.emotion_events.values(),
                                 config.repetition_penalty, now)
        self.reactions = ReactionTable(config.reactions)
        self.rng = random.Random(seed)
        self.chooser = ActivityChooser(config.activities, random.Random(seed + 1))
        self.behaviors: Dict[str, Behavior] = {}
        self.specs: Dict[str, BehaviorSpec] = dict(config.behaviors)
        for name, spec in self.specs.items():
            self.behaviors[name] = spec.create()
        self.user_pause = float(user_pause)
        #: seconds after the robot connects before the first activity
        self.start_delay = float(start_delay)
        self._log = log or (lambda level, text: None)
        self._enabled = bool(enabled)
        #: set by :meth:`shutdown`: nothing starts any more
        self._shut_down = False
        self._pause_until = -math.inf
        self._last_user_command = -math.inf
        self._pause_reason = ""
        #: the user's goal that runs ("action go_to_pose"), "" when none: it holds the pause
        self._user_goal = ""
        #: what keeps the engine still: {"estop": reason, "inactive": reason, "released": RELEASED}
        #: ("released": the emergency stop was, and no one enabled the engine since)
        self._driver_holds: Dict[str, str] = {}
        #: whether the robot was last said to be connected (None: nothing said yet)
        self._connection_said: Optional[bool] = None
        #: (trigger, data, arrived, from_robot)
        self._pending: Deque[Tuple[str, Dict[str, Any], float, bool]] = deque(maxlen=MAX_PENDING)
        self._running: Optional[_Run] = None
        #: lights a behavior's end put out while the engine was held (the driver inactive or
        #: the robot lost: it refused them, and re-posts its last pattern when back): the
        #: backpack's, and the cubes' factory ids; put out again once the driver takes lights
        self._lights_owed = False
        self._cubes_owed: List[int] = []
        self._last_ended: Dict[str, float] = {}
        #: behavior -> (failures in a row, when an activity may choose it again)
        self._failing: Dict[str, Tuple[int, float]] = {}
        #: the behaviors an activity may choose (the others, reactions', are not held back)
        self._in_activities = {entry.behavior for activity in config.activities for entry in activity.entries}
        #: trigger -> when it last applied the emotion event of its name
        self._trigger_emotion_at: Dict[str, float] = {}
        self._next_choice = now
        self._low_battery = LowBatteryDetector(config.low_battery_threshold,
                                               config.low_battery_hysteresis)
        self.last_behavior = ""
        self.last_outcome = ""
        self.behaviors_started = 0
        self.behaviors_failed = 0
        self.charger_refusals = 0
        #: the latest errors raised by behaviors, newest last
        self.errors: Deque[str] = deque(maxlen=20)
        self._changed = True

    # ------------------------------------------------------------------ reading

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def running(self) -> Optional[str]:
        return self._running.behavior.name if self._running is not None else None

    def paused(self, now: float) -> bool:
        """Whether a user command keeps the engine quiet (see :meth:`held` for the rest).
        Disabled, the pause is kept (enabling during it starts nothing until it ends) but
        neither said nor shown in the status."""
        return bool(self._user_goal) or now < self._pause_until

    def held(self) -> str:
        """What keeps the engine still until it ends ("" when nothing does): the robot not
        connected, the driver's emergency stop (engaged, or released with no enable since),
        or the driver inactive."""
        if not self.state.connected:
            return "the robot is not connected"
        holds = self._driver_holds
        return holds.get("estop") or holds.get("inactive") or holds.get("released") or ""

    def status(self, now: float) -> EngineStatus:
        run = self._running
        activity = self.chooser.current(self.state)
        held = self.held()
        paused = self._enabled and self.paused(now)  # disabled: no user pause to see
        return EngineStatus(
            enabled=self._enabled,
            paused=bool(held) or paused,
            pause_remaining=max(0.0, self._pause_until - now)
            if paused and not held and not self._user_goal else 0.0,  # 0: until it ends
            pause_reason=held or (self._pause_reason if paused else ""),
            activity=activity.name if activity is not None else "",
            behavior=run.behavior.name if run else "",
            reason=run.reason if run else "",
            last_behavior=self.last_behavior,
            last_outcome=self.last_outcome,
            behaviors_started=self.behaviors_started,
            behaviors_failed=self.behaviors_failed)

    def take_changed(self) -> bool:
        """Whether the status changed (a behavior started or ended, paused, enabled) since
        the last call."""
        changed, self._changed = self._changed, False
        return changed

    # ------------------------------------------------------------------ inputs

    def on_trigger(self, name: str, now: float, data: Optional[Mapping[str, Any]] = None,
                   from_robot: bool = True) -> None:
        """Something happened: update the state, apply the emotion event of that name and
        queue the trigger for the next tick. A trigger not ``from_robot`` (a name posted on
        behavior/trigger) changes no robot state: only the driver knows whether the robot
        is picked up or on its charger, and a posted ``picked_up`` would otherwise hold the
        engine until a ``put_down`` that the robot never sends."""
        change = STATE_CHANGES.get(name) if from_robot else None
        if change is not None:
            setattr(self.state, change[0], change[1])
        if name == "face_seen":
            self.state.face_seen_at = now
        event, last = self.emotions.events.get(name), self._trigger_emotion_at.get(name)
        if event is not None and (last is None or now - last >= event.min_interval):
            self._trigger_emotion_at[name] = now   # a trigger in a flood: its event once an interval
            self.emotions.apply(name, now)
        if self._enabled and not self._shut_down:
            if any(pending[0] == name for pending in self._pending):   # only the newest copy waits
                self._pending = deque((p for p in self._pending if p[0] != name), maxlen=MAX_PENDING)
            self._pending.append((name, dict(data or {}), now, bool(from_robot)))

    def knows(self, name: str) -> bool:
        """Whether a trigger of that name does anything: a reaction, an emotion event."""
        return name in self.reactions.reactions or name in self.emotions.events

    def on_cube_tap(self, cube: str, factory_id: int, count: int, now: float) -> None:
        self.state.last_tap = CubeTap(cube, int(factory_id), int(count), now)
        self.on_trigger("cube_tapped", now, {"cube": cube, "factory_id": int(factory_id),
                                             "tap_count": int(count)})

    def on_battery(self, fraction: float, now: float) -> None:
        """The battery's charge 0..1; ``low_battery`` when it falls below the threshold."""
        if fraction != fraction:
            return
        self.state.battery = float(fraction)
        became_low = self._low_battery.update(fraction)
        self.state.battery_low = self._low_battery.low
        if became_low:
            self.on_trigger("low_battery", now, {"battery": float(fraction)})

    def on_state(self, **flags: bool) -> None:
        """Level flags from the robot's status (on_charger, charging, cliff, picked_up,
        falling, lying): the state at a connection, which the events then keep up to date."""
        for key, value in flags.items():
            if not hasattr(self.state, key):
                raise AttributeError(f"RobotState has no field {key!r}")
            setattr(self.state, key, bool(value))

    def on_connected(self, connected: bool, now: float, said: bool = False) -> None:
        """Whether the robot is connected: while it is not nothing runs; connected, the engine
        goes on after ``start_delay``. The first report and each change are said (info; not
        once shut down), unless ``said``: the caller said why already."""
        if connected != self.state.connected:
            self.state.connected = bool(connected)
            self._changed = True
            if connected:
                self._next_choice = max(self._next_choice, now + self.start_delay)
        if bool(connected) != self._connection_said and not self._shut_down:
            self._connection_said = bool(connected)
            if said:
                return
            if connected:
                self._log("info", "the robot is connected: the engine goes on")
            else:
                self._log("info", "the robot is not connected: nothing runs until it connects")

    def on_emergency_stop(self, engaged: bool, now: float) -> None:
        """The driver's emergency stop: while engaged nothing runs (the driver would refuse
        every motion), as while the robot is not connected. Its release starts nothing: the
        engine stays held (:data:`RELEASED`) until a person enables it, :meth:`set_enabled`
        true (even when it is enabled already). The mood still follows events."""
        if not engaged and "estop" in self._driver_holds and not self._shut_down:
            self._driver_holds["released"] = RELEASED
        self._driver_hold("estop", engaged, now, "the emergency stop is engaged",
                          "emergency stop engaged: nothing runs until it is released and "
                          "behavior/enable true is called",
                          "emergency stop released: nothing starts until behavior/enable true "
                          "is called (or the enabled parameter is set to true)")

    def on_driver_active(self, active: bool, now: float) -> None:
        """The driver's lifecycle state: while it is inactive nothing runs (it refuses every
        command), as while its emergency stop is engaged; active again, the engine goes on
        after ``start_delay``."""
        self._driver_hold("inactive", not active, now, "the driver is inactive (lifecycle)",
                          "the driver is inactive (lifecycle): nothing runs until it is "
                          "activated", "the driver is active again: the engine goes on")

    def _driver_hold(self, kind: str, on: bool, now: float, reason: str, said_on: str,
                     said_off: str) -> None:
        if bool(on) == (kind in self._driver_holds) or self._shut_down:
            return  # shut down: nothing runs either way (the driver's last link_status of a stop)
        self._changed = True
        self._pending.clear()
        self._log("info", said_on if on else said_off)
        if on:
            self._driver_holds[kind] = reason
            if self._running is not None:
                self._end(Outcome.INTERRUPTED, reason, now)
        else:
            del self._driver_holds[kind]
            self._next_choice = max(self._next_choice, now + self.start_delay)

    def on_user_command(self, reason: str, now: float) -> None:
        """The user commanded the robot: stop what runs and keep quiet for ``user_pause``."""
        self._user_command(reason, now, f"paused for {self.user_pause:g} s by a user command ({reason})")

    def _user_command(self, reason: str, now: float, said: str) -> None:
        was_paused = self.paused(now)
        self._last_user_command = now
        self._pause_until = max(self._pause_until, now + self.user_pause)
        if self._enabled and (not was_paused or reason != self._pause_reason):
            self._changed = True
        self._pause_reason = reason
        self._drop_pending_for_pause()
        if self._running is not None:
            self._end(Outcome.INTERRUPTED, f"paused by a user command ({reason})", now)
        if not was_paused and self._enabled:  # disabled: nothing to pause (set_enabled says it)
            self._log("info", said)
        self._next_choice = max(self._next_choice, self._pause_until)

    def on_user_goal(self, reason: str, now: float) -> None:
        """A user's goal runs (``reason``: ``action go_to_pose``; as :meth:`on_user_command`),
        or none any more (""): the engine stays paused for as long as one runs, and
        ``user_pause`` after it ended, whatever ``user_pause`` is (0 included)."""
        if reason:
            self._user_command(reason, now, f"paused by a user's goal ({reason}) while it runs, "
                                            f"and {self.user_pause:g} s after")
            self._user_goal = reason
        elif self._user_goal:
            self._user_goal = ""
            self._last_user_command = now
            self._pause_until = max(self._pause_until, now + self.user_pause)
            self._next_choice = max(self._next_choice, self._pause_until)
            self._changed = True

    def set_user_pause(self, seconds: float, now: float) -> None:
        """A new ``user_pause``; a pause in progress ends ``seconds`` after the last user
        command (sooner or later than it was to), as if it had been the value all along."""
        self.user_pause = float(seconds)
        if self.paused(now):
            shorter = self._last_user_command + self.user_pause
            if shorter < self._pause_until:
                self._next_choice = min(self._next_choice, max(shorter, now))
            self._pause_until = shorter
            self._changed = True

    def set_enabled(self, enabled: bool, now: float) -> str:
        """On or off. True, also when it is on already, lifts the hold after the emergency
        stop's release (a person's say-so); one while the stop is engaged does not. Returns
        what the call did, as the log says it (the line it logs, or "enabled"/"disabled" when
        nothing changed), for the ``behavior/enable`` answer."""
        enabled = bool(enabled)
        engaged = enabled and "estop" in self._driver_holds and not self._shut_down
        # under the stop the hold stays: its release sets it again, and only an enable after counts
        lifted = enabled and not engaged and self._driver_holds.pop("released", None) is not None
        if engaged:
            said = ENABLED_UNDER_THE_STOP
        elif lifted:
            said = "enabled: the emergency stop's release holds the engine no more"
        else:
            said = "enabled" if enabled else "disabled"
        if enabled == self._enabled and not lifted:
            if engaged:   # said at each call: the person expects the robot to move, and it will not
                self._log("info", said)
            return said
        switched_on, self._enabled = enabled and not self._enabled, enabled
        self._changed = True
        self._pending.clear()
        if enabled:   # a person's say-so: behaviors that failed may be chosen again at once
            self._failing.clear()
        if not enabled and self._running is not None:
            self._end(Outcome.INTERRUPTED, "the engine was disabled", now)
        if enabled:  # a wait still owed (start_delay after a connection, idle_between) is kept
            self._next_choice = max(self._next_choice, now)
            if not self.paused(now):
                self._pause_reason = ""  # one that ended while disabled was never said: no 'pause over'
            elif switched_on and not engaged:
                said += f", but {self._pause_words(now)}"
        self._log("info", said)
        return said

    def _pause_words(self, now: float) -> str:
        """The user's pause in progress, in words, for an enable during it."""
        if self._user_goal:
            return (f"a user's goal ({self._user_goal}) pauses it while it runs, "
                    f"and {self.user_pause:g} s after")
        return f"a user command ({self._pause_reason}) pauses it for {self._pause_until - now:.1f} s more"

    def shutdown(self, now: float) -> None:
        """Stop the running behavior (its commands cancelled) and start nothing from now on,
        whatever comes (a trigger, a tick, enabling): for a node going down, whose ticks may
        go on while it stops and whose driver may already be gone."""
        self._shut_down = True
        self._pending.clear()
        if self._running is not None:
            self._end(Outcome.INTERRUPTED, "the engine is shutting down", now)

    @property
    def shut_down(self) -> bool:
        """Whether :meth:`shutdown` was called (the engine then starts nothing)."""
        return self._shut_down

    # ------------------------------------------------------------------ the tick

    def tick(self, now: float) -> None:
        self.now = now
        run = self._running
        if run is not None:
            run.ctx.now = now
        held = self.held()
        if (self._lights_owed or self._cubes_owed) and self._lights_taken():
            self._put_out_owed_lights()
        if not self._enabled or self._shut_down:
            return
        if held:
            self._pending.clear()
            if run is not None:
                self._end(Outcome.INTERRUPTED, held, now)
            if self._pause_reason and not self.paused(now):  # said as it runs out, not when the hold ends
                self._pause_reason = ""
                self._changed = True
                self._log("info", f"pause over, but {held}: nothing runs until that ends")
            return
        if self.paused(now):
            self._drop_pending_for_pause()
            return
        if self._pause_reason:
            self._pause_reason = ""
            self._changed = True
            self._log("info", "pause over: the engine goes on")
        self._react(now)
        self._tick_running(now)
        if self._running is None and now >= self._next_choice:
            self._choose(now)

    def _drop_pending_for_pause(self) -> None:
        """A user's pause drops the triggers that wait, but a robot's :data:`KEPT_THROUGH_PAUSE`
        whose state still holds: its reaction starts once the pause is over."""
        self._pending = deque((p for p in self._pending if p[3] and p[0] in KEPT_THROUGH_PAUSE
                               and self._still_holds(p[0])), maxlen=MAX_PENDING)

    def _lights_taken(self) -> bool:
        """Whether the driver takes lights: active, with the robot (under its emergency stop too)."""
        return self.state.connected and "inactive" not in self._driver_holds

    def _put_out_owed_lights(self) -> None:
        lights, self._lights_owed = self._lights_owed, False
        cubes, self._cubes_owed = self._cubes_owed, []
        self._log("info", "the lights a behavior left on while the engine was held are put out")
        robot, name = self.robot, "lights left on while held"
        if lights:
            self._clean_up(name, "putting out the backpack lights", lambda: robot.set_backpack_lights(None))
        for factory_id in cubes:
            self._clean_up(name, f"putting out cube {factory_id}",
                           lambda f=factory_id: robot.set_cube_lights(f, None))

    def _react(self, now: float) -> None:
        for _ in range(len(self._pending)):
            trigger, data, arrived, from_robot = self._pending.popleft()
            reaction, why = self.reactions.select(trigger, now, self.state)
            if reaction is None:
                if why != "no reaction":
                    self._log("debug", f"trigger {trigger}: no reaction: {why}")
                continue
            behavior = self.behaviors[reaction.behavior]
            run = self._running
            if run is not None and run.priority >= reaction.priority:
                if now - arrived < TRIGGER_WAIT_S or (from_robot and self._still_holds(trigger)):
                    self._pending.append((trigger, data, arrived, from_robot))   # again next tick
                else:   # said once for this running behavior, again at debug
                    self._log("debug" if trigger in run.refused else "info",
                              f"trigger {trigger}: {reaction.behavior} not started: "
                              f"{run.behavior.name} ran with priority {run.priority} "
                              f">= {reaction.priority} for {now - arrived:.1f} s")
                    run.refused.add(trigger)
                continue
            ctx = self._context(behavior, now, {"name": trigger, **data})
            if not self._can_start(behavior, ctx):
                self._log("info", f"trigger {trigger}: {reaction.behavior} cannot start now "
                                  f"(the robot: {_state_summary(self.state)})")
                continue
            if run is not None:
                self._end(Outcome.INTERRUPTED, f"preempted by the reaction to {trigger}", now)
            self.reactions.fired(trigger, now)
            self._start(behavior, ctx, reaction.priority, f"reaction to {trigger}", now)

    def _still_holds(self, trigger: str) -> bool:
        """Whether the robot state a robot's trigger set (to true: on the charger, picked up,
        at a cliff, ...) still holds: its reaction may then wait for as long as it does."""
        change = STATE_CHANGES.get(trigger)
        return change is not None and change[1] and bool(getattr(self.state, change[0]))

    def _tick_running(self, now: float) -> None:
        run = self._running
        if run is None:
            return
        refused = run.ctx.enforce_charger_rule()
        if refused:
            self.charger_refusals += refused
        if now - run.started > run.spec.max_duration:
            self._end(Outcome.FAILED, f"timed out after {run.spec.max_duration:g} s", now)
            return
        try:
            outcome = run.behavior.tick(run.ctx, now)
        except Exception as exc:  # noqa: BLE001 - a behavior's bug: reported, the engine goes on
            self._end(None, "", now, error=exc, phase="tick")
            return
        if outcome is not None:
            if not isinstance(outcome, Outcome):
                self._end(None, "", now, error=TypeError(
                    f"tick returned {outcome!r}, not an Outcome or None"), phase="tick")
                return
            self._end(outcome, "", now)

    def _choose(self, now: float) -> None:
        if self.state.picked_up or self.state.falling or self.state.lying:
            return
        activity = self.chooser.current(self.state)
        if activity is None:
            self._next_choice = now + RETRY_CHOICE_S
            return
        contexts: Dict[str, BehaviorContext] = {}

        def can_start(name: str) -> bool:
            if now < self._failing.get(name, (0, -math.inf))[1]:
                return False   # failed lately: not again yet
            behavior = self.behaviors[name]
            contexts[name] = self._context(behavior, now, {})
            return self._can_start(behavior, contexts[name])

        name = self.chooser.choose(activity, self.emotions.values(now), self._last_ended, now,
                                   can_start)
        if name is None:
            self._next_choice = now + RETRY_CHOICE_S
            return
        behavior = self.behaviors[name]
        ctx = contexts.get(name) or self._context(behavior, now, {})
        self._start(behavior, ctx, 0, f"chosen by {activity.name}", now)

    # ------------------------------------------------------------------ running behaviors

    def _context(self, behavior: Behavior, now: float, trigger: Mapping[str, Any]) -> BehaviorContext:
        return BehaviorContext(
            behavior, self.robot, self.state, lambda name: self.emotions.value(name, self.now),
            now, self.rng, trigger=trigger, log=lambda text: self._log("info", text),
            charger_refusals=self._on_charger_refusal)

    def _on_charger_refusal(self, text: str) -> None:
        self.charger_refusals += 1
        self._log("warning", text)

    def _can_start(self, behavior: Behavior, ctx: BehaviorContext) -> bool:
        try:
            return bool(behavior.can_start(ctx))
        except Exception as exc:  # noqa: BLE001 - reported, counted, the behavior skipped
            text = f"{behavior.name}.can_start raised {type(exc).__name__}: {exc}{_where(exc)}"
            self.errors.append(text)
            self.behaviors_failed += 1
            self._log("error", text)
            return False

    def _start(self, behavior: Behavior, ctx: BehaviorContext, priority: int, reason: str,
               now: float) -> None:
        self._running = _Run(behavior, self.specs[behavior.name], ctx, priority, reason, now)
        self.behaviors_started += 1
        self._changed = True
        self._log("info", f"start {behavior.name} ({reason})")
        try:
            behavior.start(ctx)
        except Exception as exc:  # noqa: BLE001 - a behavior's bug: reported, the engine goes on
            self._end(None, "", now, error=exc, phase="start")

    def _end(self, outcome: Optional[Outcome], message: str, now: float,
             error: Optional[BaseException] = None, phase: str = "") -> None:
        run = self._running
        if run is None:
            return
        self._running = None
        behavior, ctx, spec = run.behavior, run.ctx, run.spec
        ctx.now = now
        if error is not None:
            text = f"error: {type(error).__name__}: {error}"
            self.errors.append(f"{behavior.name}.{phase} raised {type(error).__name__}: "
                               f"{error}{_where(error)}")
            self._log("error", f"{behavior.name}.{phase} raised {type(error).__name__}: {error}"
                               f"{_where(error)}; the behavior is stopped and the engine goes on")
        else:
            assert outcome is not None
            if outcome is Outcome.FAILED and not message:
                message = _failure(ctx)
            text = str(outcome) + (f": {message}" if message else "")
        try:
            behavior.stop(ctx, text)
        except Exception as exc:  # noqa: BLE001 - reported; the clean-up below still runs
            self.errors.append(f"{behavior.name}.stop raised {type(exc).__name__}: {exc}{_where(exc)}")
            self._log("error", f"{behavior.name}.stop raised {type(exc).__name__}: {exc}{_where(exc)}")
            if error is None:
                error = exc
                text = f"error: {type(exc).__name__}: {exc}"
        end = f"{behavior.name}'s end"
        cancelled = self._clean_up(end, "cancelling its commands", ctx.cancel_all) or 0
        robot = self.robot
        if ctx.face_changed:
            self._clean_up(end, "putting the face back",
                           lambda: robot.set_face(self.config.idle_expression))
        if ctx.gaze_changed:  # an expression does not move the eyes back: centre them
            self._clean_up(end, "centring the eyes", lambda: robot.look_at(0.0, 0.0))
        # the driver refuses lights while inactive or without the robot (not under its emergency
        # stop, whose lights a user may set): sent again once it takes them
        refused = not self._lights_taken()
        if ctx.lights_changed:
            self._clean_up(end, "putting out the backpack lights",
                           lambda: robot.set_backpack_lights(None))
            self._lights_owed = self._lights_owed or refused
        for factory_id in ctx.cubes_lit:
            self._clean_up(end, f"putting out cube {factory_id}",
                           lambda f=factory_id: robot.set_cube_lights(f, None))
            if refused and factory_id not in self._cubes_owed:
                self._cubes_owed.append(factory_id)
        failed = error is not None or outcome is Outcome.FAILED
        backoff = ""
        if failed and behavior.name in self._in_activities:
            count = self._failing.get(behavior.name, (0, 0.0))[0] + 1
            wait = min(FAIL_BACKOFF_MAX_S, FAIL_BACKOFF_S * 2.0 ** min(count - 1, 16))
            self._failing[behavior.name] = (count, now + wait)
            backoff = (f"; failed {count} times in a row" if count > 1 else "") + \
                f"; no activity chooses it again for {wait:g} s"
        if failed:
            self.behaviors_failed += 1
            self.emotions.apply("behavior_failed", now)
            self._apply_outcome(spec.on_failure, f"{behavior.name}.failed", now)
        elif outcome is Outcome.SUCCEEDED:
            self._failing.pop(behavior.name, None)
            self.emotions.apply("behavior_succeeded", now)
            self._apply_outcome(spec.on_success, f"{behavior.name}.succeeded", now)
        self._last_ended[behavior.name] = now
        self.last_behavior = behavior.name
        self.last_outcome = text
        self._changed = True
        activity = self.chooser.current(self.state)
        idle = activity.idle_between if activity is not None else RETRY_CHOICE_S
        self._next_choice = max(self._next_choice, now + idle)
        extra = f", {cancelled} command(s) cancelled" if cancelled else ""
        self._log("info" if not failed else "warning",
                  f"end {behavior.name}: {text} after {now - run.started:.1f} s{extra}{backoff}")

    def _clean_up(self, name: str, what: str, call: Callable[[], Any]) -> Any:
        """One step of a clean-up (the robot side's call; ``name``: whose): an exception is
        logged and kept in :attr:`errors`, and the rest of the clean-up still runs."""
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - reported; the engine goes on
            text = f"{name}: {what} raised {type(exc).__name__}: {exc}{_where(exc)}"
            self.errors.append(text)
            self._log("error", text)
            return None

    def _apply_outcome(self, change: Any, key: str, now: float) -> None:
        if not change:
            return
        if isinstance(change, str):
            self.emotions.apply(change, now)
        else:
            self.emotions.apply_changes(change, now, key=key)


def _state_summary(state: RobotState) -> str:
    """What the built-in behaviors' start conditions look at, in words (a refused start's
    log line: the behaviors say only yes or no)."""
    return ", ".join((
        "on the charger" if state.on_charger else "not on the charger",
        "picked up" if state.picked_up else "not picked up",
        *(("falling",) if state.falling else ()),
        "at a cliff" if state.cliff else "no cliff",
        "battery low" if state.battery_low else "battery not low"))
