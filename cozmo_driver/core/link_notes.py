"""The driver core's word on the link and the battery: the state ``link_status`` reports, the
log lines of a link change (what to check for a robot lost or not answering), and the
warning of a low battery, which is named as the likely cause when the robot is then lost
(neither while the robot is on its charger) (a part of :class:`~cozmo_driver.core.DriverCore`)."""

from __future__ import annotations

import logging
import math
from typing import Any, Optional

from .. import robot_geometry as geo
from ..client import LinkState, LinkStateChanged
from ..client.link import RETRY_SEPARATOR
from ..driver.sensors import BATTERY_LOW_V, StatusFlag, volts_text
from ..log_throttle import counted
from ..protocol.session import ROBOT_CLOSED_LINK
from ..transport.udp import is_loopback

__all__ = ["LinkNotesMixin", "NO_ANSWER_HINT", "SIM_NO_ANSWER_HINT", "NO_STATE_HINT", "LOST_HINT",
           "SIM_LOST_HINT", "CLOSED_HINT", "SIM_CLOSED_HINT", "GONE_HINT", "SIM_GONE_HINT",
           "BATTERY_RECOVERED_MARGIN_V", "CONNECT_KINDS", "STATE_GAP_S", "STATE_GAP_PERIOD_S", "no_answer_hint",
           "forget_connect_lines"]

NO_ANSWER_HINT = ("Is it switched on, and this computer on its Wi-Fi (the robot's own access "
                  "point)? Are robot_ip and robot_port right? It answers one program at a time: "
                  "close the Cozmo app, and stop a driver on another computer; a driver stopped "
                  "without disconnecting holds it until its link times out, a few seconds")
#: the same for a robot on this computer (robot_ip a loopback address: the simulator)
SIM_NO_ANSWER_HINT = ("Is the simulator running on that port (cozmo-sim --port N; or launch with "
                      "use_sim:=true start_sim:=true)? It answers one program at a time, as the "
                      "robot does: is another one (a driver, a pycozmo script) connected to it?")
#: what a lost robot is told (connected a moment ago: nothing to check about the address)
LOST_HINT = "Is the robot switched on, and this computer on its Wi-Fi?"
SIM_LOST_HINT = "Is the simulator still running (it was stopped, or its process ended)?"
#: what a robot that closed a ready link itself (Disconnect) is told: it answered until then,
#: so nothing about its being on or in reach applies; Anki's firmware ends the link when its
#: queue of messages awaiting our acknowledgement is full
CLOSED_HINT = ("It closed the link itself, as it does when our acknowledgements and messages do "
               "not reach it in time: the Wi-Fi link towards it is poor or congested (bring this "
               "computer nearer the robot). The driver reconnects by itself")
SIM_CLOSED_HINT = ("The simulator closed the link itself, as the robot does when our acknowledgements "
                   "and messages do not reach it in time. The driver reconnects by itself")
#: what the attempts that go unanswered after a loss are told: the robot was there
GONE_HINT = ("It was connected before: it is gone (switched off, its battery ran out, or out of "
             "Wi-Fi range, or this computer left its Wi-Fi); the driver reconnects by itself once it "
             "answers")
SIM_GONE_HINT = ("It was connected before: the simulator was stopped, or its process ended; the "
                 "driver reconnects by itself once one runs on that port again")
#: the same for a robot that took the handshake but never streamed its state
NO_STATE_HINT = ("The driver tries again; if this goes on, switch the robot off and on (or "
                 "restart the simulator)")
#: the throttle kinds of the lines of a robot that does not come up (LinkNotesMixin)
CONNECT_KINDS = ("connect", "no state")
#: no robot state for this long while connected (active) is warned of: odom and tf pause,
#: though the link is not lost before peer_timeout (3 s) or ready_timeout (5 s); the robot
#: streams its state every 33 ms, and a Wi-Fi stall under 1 s is common and not worth a line, s
STATE_GAP_S = 1.0
#: such a warning is said at most once per this many seconds (the next one counts the others), s
STATE_GAP_PERIOD_S = 10.0
#: a low battery is warned of again only after its voltage came back this far above
#: BATTERY_LOW_V (charged): driving sags it by a few hundredths of a volt, V
BATTERY_RECOVERED_MARGIN_V = 0.05


def io_ended_line(where: str, reason: str, failure: BaseException, node: str) -> str:
    """What the driver says when its robot client's I/O thread ended by ``failure`` (not an
    Exception: a SystemExit or KeyboardInterrupt where it runs the driver's code, a bug) and
    the link with it (``reason``), the driver node being ``node``."""
    return (f"{type(failure).__name__} ended the robot client's I/O thread (see the error before), and the "
            f"link to the robot at {where} with it ({reason}): the driver no longer hears the robot nor sends "
            "it anything, and does not reconnect by itself. If the robot still moves, pick it up or switch it "
            f"off. To connect again: ros2 lifecycle set {node} deactivate, then activate (the robot answers once it "
            "has let the old link go, a few seconds), or restart the driver")


def forget_connect_lines(throttle: Any) -> None:
    """The robot is ready: the "does not answer" and "answered, but sent no robot state"
    lines held back are no longer true (dropped), and the next is said at once."""
    for key in CONNECT_KINDS:
        throttle.forget(key)


def no_answer_hint(robot: Any, robot_ip: str, lost: bool = False) -> str:
    """What a robot that does not answer is told (``lost``: one that was connected before,
    lost since): the simulator's hint when the address robot_ip resolved to (the transport's
    remote_addr, resolved when it started: localhost is 127.0.0.1) is a loopback one, else
    the real robot's. No look-up here (this runs on the I/O thread): before a start, robot_ip
    as given."""
    remote = getattr(getattr(robot, "transport", None), "remote_addr", None)
    sim = is_loopback(remote[0] if remote else robot_ip)
    if lost:
        return SIM_GONE_HINT if sim else GONE_HINT
    return SIM_NO_ANSWER_HINT if sim else NO_ANSWER_HINT


class LinkNotesMixin:
    """Needs the NotesMixin's log calls, ``params``, ``robot``, ``output``, ``lock``,
    ``link_state``, ``robot_lost``, ``battery_v``, ``active``, ``throttle``, ``clock``,
    ``cancel_watchdog`` and ``link_sample``."""

    #: a low battery was warned of, and its voltage has not recovered since
    battery_low_said = False
    #: the latest robot state said it is on its charger, or charging
    battery_on_charger = False
    #: the latest loss of a ready robot was the robot closing the link itself (Disconnect)
    robot_closed_link = False
    #: robot clock s of the latest robot state (or of the connection's start)
    _state_at = 0.0
    #: robot clock s of the latest state before a gap seen (None: none), and if it was said
    _gap_from: Optional[float] = None
    _gap_said = False
    #: the connection the pending gap check watches (a check of another one ends)
    _gap_watch: Any = None

    def watch_state_gaps(self) -> None:
        """The robot is ready (I/O thread): check for gaps in its state stream from now on
        (:data:`STATE_GAP_S`), by one check a second on the client's scheduler, no polling."""
        self._gap_watch = token = object()
        self._state_at, self._gap_from = self.robot.clock(), None
        self.robot.schedule(self._state_at + STATE_GAP_S, self._check_state_gap, token)

    def state_came(self, now: float) -> None:
        """A robot state came at ``now`` (robot clock, I/O thread): a gap warned of is over."""
        self._state_at = now
        if self._gap_from is not None:
            gap, self._gap_from = now - self._gap_from, None
            if self._gap_said:
                self._log(logging.INFO, f"robot state again after {gap:.1f} s: odometry and tf go on")

    def _check_state_gap(self, token: Any) -> None:
        """I/O thread: warn of a robot state missing for STATE_GAP_S (throttled; one held
        back is only counted into the next, never said late), then check again."""
        if token is not self._gap_watch or self.link_state is not LinkState.READY:
            return  # another connection's, or lost: the next RobotReady watches again
        now = self.robot.clock()
        due = self._state_at + STATE_GAP_S
        if now >= due:
            due = now + STATE_GAP_S  # (in a gap: once a second until it ends or the link does)
            if self._gap_from is None and self.active:  # (counted once a gap)
                said = self.throttle.due("state gap", self.clock(), STATE_GAP_PERIOD_S)
                self._gap_from, self._gap_said = self._state_at, said is not None
                if said is not None:
                    p = self.params
                    self._log(logging.WARNING, counted(
                        f"no robot state for {now - self._state_at:.1f} s: odometry, tf and the robot's "
                        f"topics pause; the robot is declared lost after {p['peer_timeout']:g} s of "
                        f"silence (peer_timeout) or {p['ready_timeout']:g} s without a state "
                        "(ready_timeout)", *said))
        self.robot.schedule(due, self._check_state_gap, token)

    def reported_state(self) -> LinkState:
        """The link's state as told: LOST from the loss of a ready robot until it is ready
        again, through the reconnection attempts (LinkStatus: it stopped answering after
        having been connected); a robot that never answered is still being connected to."""
        state = self.link_state
        if state is LinkState.READY or state is LinkState.DISCONNECTED:
            return state
        return LinkState.LOST if self.robot_lost else \
            (LinkState.CONNECTING if state is LinkState.LOST else state)

    def watch_battery(self, volts: float, flags: int) -> None:
        """The latest robot state's battery voltage and status flags: one warning when the
        voltage drops below BATTERY_LOW_V, again only once it recovered
        (BATTERY_RECOVERED_MARGIN_V above it); none while the robot is on its charger or
        charging (taken off still low, it is warned of)."""
        self.battery_v = volts
        self.battery_on_charger = bool(flags & (StatusFlag.IS_ON_CHARGER | StatusFlag.IS_CHARGING))
        if not math.isfinite(volts):
            return
        if self.battery_low_said:
            self.battery_low_said = volts < BATTERY_LOW_V + BATTERY_RECOVERED_MARGIN_V
        elif volts < BATTERY_LOW_V and not self.battery_on_charger:
            self.battery_low_said = True
            self._log(logging.WARNING,
                      f"battery low ({volts_text(volts)}, below {BATTERY_LOW_V:.2f} V): put the robot on its "
                      f"charger; it switches itself off after a minute below {geo.BATTERY_EMPTY_V:.2f} V")

    def link_hint(self) -> str:
        """What to check, for the link's diagnostics: of a lost robot as its loss was told
        (:meth:`loss_hint`; of one that closed the link itself, that alone, which says that the
        driver reconnects), of one being connected to that never answered as its attempts are
        (:func:`no_answer_hint`); else nothing."""
        state = self.reported_state()
        if state is LinkState.LOST:
            if self.robot_closed_link:  # (it answers: not "once it answers")
                return f"{self.loss_hint()}."
            return f"{self.loss_hint()} The driver reconnects by itself once it answers."
        if state is LinkState.CONNECTING:
            return no_answer_hint(self.robot, self.params["robot_ip"])
        return ""

    def loss_hint(self) -> str:
        """What a robot lost from a ready link is told: that it closed the link itself, when it
        did (Disconnect: it answered, so nothing about its being on or reachable applies);
        else its low battery as the likely cause when its last state said so (and not that it
        was on its charger, or charging), else what else to check (of the simulator on a
        loopback address)."""
        sim = no_answer_hint(self.robot, self.params["robot_ip"]) is SIM_NO_ANSWER_HINT
        if self.robot_closed_link:
            return SIM_CLOSED_HINT if sim else CLOSED_HINT
        volts = self.battery_v
        if volts is not None and math.isfinite(volts) and volts < BATTERY_LOW_V and not self.battery_on_charger:
            return (f"Its battery was low ({volts_text(volts)} in its last state), the likely cause: the "
                    f"robot switches itself off after a minute below {geo.BATTERY_EMPTY_V:.2f} V; put "
                    "it on its charger.")
        return SIM_LOST_HINT if sim else LOST_HINT

    def _on_link_state(self, event: LinkStateChanged) -> None:
        if event.state is LinkState.READY:
            # ready once the robot is brought up (RobotReady, next): its first StopAllMotors
            # must go out before any command is taken (it would stop it, or drop one held
            # for the motor calibration), and the front-end hears of it then
            return
        previous, self.link_state = self.link_state, event.state
        where = f"{self.params['robot_ip']}:{self.params['robot_port']}"
        if event.state is LinkState.LOST:
            if previous is LinkState.READY:
                self.robot_lost = True
                self.robot_closed_link = event.reason.split(RETRY_SEPARATOR)[0] == ROBOT_CLOSED_LINK
                self.cancel_watchdog()
                self.say_held_back()
                self._log(logging.WARNING,
                          f"lost the robot at {where} ({event.reason}). Odometry, camera and "
                          f"status pause until it is back. {self.loss_hint()}")
            else:  # once each 10 s per problem; one said late leaves out the retry's time
                reason = event.reason
                late = reason.split(RETRY_SEPARATOR)[0]
                if previous is LinkState.INITIALIZING:  # it took the handshake
                    key, text = "no state", f"the robot at {where} answered, but sent no robot state"
                    hint = NO_STATE_HINT
                else:
                    key, text = "connect", f"the robot at {where} does not answer"
                    hint = no_answer_hint(self.robot, self.params["robot_ip"], self.robot_lost)
                self.log_throttled(logging.WARNING, key, f"{text} ({reason}). {hint}", 10.0,
                                   later=f"{text} ({late}). {hint}")
        elif event.state is LinkState.DISCONNECTED:
            self.battery_low_said = False  # the next robot's is told of again
            # the driver stops listening before it closes the link: a DISCONNECTED it hears is
            # one it did not ask for; after an I/O thread's end, nothing tries again
            failure = getattr(self.robot, "io_failure", None)
            if failure is None:
                self._log(logging.INFO, f"disconnected from the robot at {where}: {event.reason}")
            else:
                self._log(logging.ERROR, io_ended_line(where, event.reason, failure, self.robot.link.name))
        else:
            self._log(logging.DEBUG, f"link {event.state.value}: {event.reason}")
        with self.lock:  # (the front-end destroys its publishers under it)
            self.output.on_link(self.link_sample())
