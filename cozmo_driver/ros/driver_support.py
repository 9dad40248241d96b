"""Small pieces of the driver node that are not about the robot: the lifecycle
callbacks' error reporting, parameter descriptors and declaration, the reader of
serialized cmd_vel messages, the handler that forwards the protocol and client
layers' warnings to the node's logger, and the node's attributes that are the core's.
Imported before the node exists, so it imports no message package at import (start-up:
docs/driver.md)."""

from __future__ import annotations

import gc
import importlib
import logging
import os
import sys
import threading
from typing import Any, Callable, Optional

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.serialization import deserialize_message

from ..driver.commands import ESTOP_REFUSAL, NOT_CONNECTED_REFUSAL
from ..driver.commands import inactive_refusal as node_inactive_refusal
from ..stop_flag import CTRL_Z_STOPPED
from ._entry import bad_qos_overrides, unknown_parameters
from .qos import UNKNOWN_NODE
from .serialized import LayoutError, read_twist, twist_type
from .steady import steady_timer

__all__ = ["transition", "camera_file", "descriptor", "declare_parameters", "twist_reader", "cmd_vel_type_check",
           "RosLogHandler",
           "log_line", "core_attribute", "collector_off", "freeze_start_up", "thaw_released", "refreeze",
           "destroy_state_machine", "release_line", "release_reason",
           "close_link", "flush", "finish_goals", "ESTOP_REFUSAL", "NOT_CONNECTED_REFUSAL",
           "inactive_refusal", "ServerRetirement", "still_retiring", "retire_actions", "withdraw", "destroy_retired",
           "forget_destroyed", "ctrl_z_stop", "lifetime_reports", "RELEASED_PARTS"]


def inactive_refusal(node: Any) -> str:
    """Why a command or goal is refused while ``node`` (the driver) is inactive."""
    return node_inactive_refusal(node.get_fully_qualified_name())


#: Ctrl-Z: how long the driver waits for the robot to acknowledge its stop before the process
#: is suspended, s
CTRL_Z_STOP_S = 0.2
#: why Ctrl-Z ends the motion goals and the animation
CTRL_Z_REASON = "the driver was suspended (Ctrl-Z)"


def ctrl_z_stop(node: Any) -> Optional[Callable[[], None]]:
    """Before Ctrl-Z suspends the driver's process (``spin_nodes``' ``suspend``, on the
    executor): motion commands refused and no watchdog stop pending (``hold_for_ctrl_z``:
    the cmd_vel thread runs until the process stops), every motion goal and the animation
    ended aborted, StopAllMotors sent and acknowledged (:data:`CTRL_Z_STOP_S` at most), one
    line logged. Returns what takes commands again once the process goes on (``fg``);
    nothing moves by itself then."""
    core = node._core
    core.hold_for_ctrl_z(True)
    if node._motion is not None:
        node._motion.abort_all(CTRL_Z_REASON)
    if node._media is not None:
        node._media.abort_animations(CTRL_Z_REASON)
    robot = node._robot
    acknowledged = robot.stop_all_motors_acknowledged(CTRL_Z_STOP_S) if robot is not None and core.connected \
        else None
    then = "fg resumes, and commands are taken again"
    if acknowledged:
        node.get_logger().info(f"{CTRL_Z_STOPPED}; {then}")
    elif acknowledged is None:
        node.get_logger().warning(f"suspended (Ctrl-Z): the robot is not connected, no stop could reach it; {then}")
    else:
        node.get_logger().warning(f"suspended (Ctrl-Z): the robot did not acknowledge the stop within "
                                  f"{CTRL_Z_STOP_S:g} s: it may still be moving; {then}")
    return lambda: core.hold_for_ctrl_z(False)


def close_link(robot: Any, listener: Callable[[Any], None], log: Callable[[int, str], None]) -> None:
    """Stop the robot (its motors first) and close its link, with ``listener`` removed
    first; ``log(level, text)`` says how that went (:func:`release_line`)."""
    from ..errors import CozmoError
    try:
        robot.remove_listener(listener)
    except ValueError:
        pass
    opened = robot.transport.running  # a link that never opened has nothing to stop
    state = robot.state
    try:
        robot.stop()
    except CozmoError as exc:
        log(logging.WARNING, f"stopping the link: {exc}")
    if opened:
        link = robot.link
        closed = link.state_reason if link.state.value == "disconnected" else "no answer in time"
        log(*release_line(state.value, closed, link.session.stats.connects > 0))


#: how long a stopping driver spins for its goals' results to go out, at most, seconds
FINISH_GOALS_S = 0.5


def finish_goals(node: Any, executor: Any, timeout_s: float = FINISH_GOALS_S) -> None:
    """At shutdown, before the node closes: the motors stopped first, every goal ended
    aborted ("the driver is shutting down"), and ``executor`` spun until their results
    went out (at most ``timeout_s``): a client waiting for a result otherwise waits for
    good, as the servers go with the node."""
    import time
    media, motion = node._media, node._motion

    def running() -> bool:
        return ((media is not None and media.goals_running())
                or (motion is not None and motion.goals_running()))
    if not running():
        return  # close() stops the motors first, as ever
    node._core.release()  # the motors first (close() does it again: it is idempotent)
    if media is not None:
        media.deactivate("the driver is shutting down")
    if motion is not None:
        motion.abort_all("the driver is shutting down")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and node.context.ok() and running():
        executor.spin_once(timeout_sec=0.05)
    # an ended goal's result goes to its client from a task of its own, on a later turn
    deadline = min(deadline, time.monotonic() + 0.1)
    while time.monotonic() < deadline and node.context.ok():
        executor.spin_once(timeout_sec=0.02)


def flush(publisher: Any, timeout_s: float = 0.2) -> None:
    """Wait, at most ``timeout_s``, until every reliable subscriber acknowledged what
    ``publisher`` (or None) sent: a message published just before the publisher is
    destroyed may otherwise never reach another process."""
    if publisher is not None:
        from rclpy.duration import Duration
        publisher.wait_for_all_acked(Duration(nanoseconds=int(timeout_s * 1e9)))


def release_line(state: str, reason: str, was_connected: bool = False) -> "tuple[int, str]":
    """The level and line the driver logs when it closed the link: ``state`` the link's
    state before (a LinkState value), ``reason`` why it is closed now
    (RobotLink.state_reason), ``was_connected`` whether the link had reached the robot. The
    motors are said to be stopped only when the robot acknowledged the stop (and the
    goodbye); a robot that may still move is a warning: one whose stop was not acknowledged,
    one no stop was sent to (the reason begins with NO_STOP_SENT: the robot client's I/O
    thread had ended, or did not answer), and one that was lost, also while the link tries
    again (connecting), which is most of the time after a loss. A robot that never answered
    is "lost" between the link's tries too: there was nothing to stop."""
    from ..client.link import DISCONNECT_UNACKNOWLEDGED, NO_STOP_SENT
    if state in ("ready", "initializing"):
        if reason == "disconnected":
            return logging.INFO, "disconnected from the robot (motors stopped)"
        if reason.startswith(NO_STOP_SENT):
            return logging.WARNING, (
                f"disconnected from the robot, but no stop was sent to it ({reason[len(NO_STOP_SENT):-1]}): "
                "it may still be moving; if it does, pick it up or switch it off")
        if reason == DISCONNECT_UNACKNOWLEDGED:  # the session's word for it
            reason = "no answer in time"
        return logging.WARNING, (
            f"disconnected from the robot, but it did not acknowledge the stop ({reason}): "
            "it may still be moving; if it does, pick it up or switch it off")
    if state in ("lost", "connecting") and was_connected:
        return logging.WARNING, ("link closed (the robot was lost: no stop could reach it; if "
                                 "it still moves, pick it up or switch it off)")
    if state == "lost":
        return logging.INFO, "link closed (the robot never answered: nothing to stop)"
    return logging.INFO, f"link closed (the robot was {state}: nothing to stop)"


def transition(method):
    """Log an exception of a lifecycle callback (rclpy would turn it into a bare ERROR). That of
    ``on_configure`` is kept in the node's ``configure_error`` too, until a configure succeeds:
    /diagnostics says it meanwhile (:func:`lifetime_reports`); so is an ``on_configure`` that
    returns FAILURE or ERROR without raising (:func:`configure_returned`)."""
    configure = method.__name__ == "on_configure"

    def wrapper(self, state):
        try:
            result = method(self, state)
        except Exception as exc:  # noqa: BLE001 - reported, and the transition fails
            self.get_logger().error(f"{method.__name__} failed: {exc!r}")
            if configure:
                self.configure_error = repr(exc)
            return TransitionCallbackReturn.ERROR
        if configure:
            self.configure_error = "" if result == TransitionCallbackReturn.SUCCESS else configure_returned(result)
        return result
    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


def configure_returned(result: TransitionCallbackReturn) -> str:
    """Why /diagnostics says the last configure failed when ``on_configure`` returned ``result``
    (FAILURE or ERROR) rather than raising: the reason is in what the driver logged."""
    return f"configure returned {getattr(result, 'name', result)}: see the driver's log"


#: what the driver's configure imports after the link opened (the animation library, the
#: motion actions: about 0.6 s of CPU here, seconds on a loaded machine or a Raspberry Pi)
CONFIGURE_IMPORTS = ("cozmo_driver.ros.media_interfaces", "cozmo_driver.ros.motion_actions")
#: how often a configure that imports looks whether a stop was asked for meanwhile, s
_STOP_POLL_S = 0.05


def import_unless_stopped(node: Any, stopped: Callable[[], bool], modules: Optional[tuple] = None) -> bool:
    """Import ``modules`` on a thread of their own while this one looks, every 50 ms, whether
    ``stopped()``: True once imported; False, saying so in ``node``'s log, as soon as a stop is
    asked for, or at once if it was already (Ctrl-C while the driver starts: it stops at once
    rather than after the import, which goes on in the background). What the import raised is
    raised here. ``modules``: :data:`CONFIGURE_IMPORTS` by default."""
    modules = CONFIGURE_IMPORTS if modules is None else modules
    if not stopped() and all(name in sys.modules for name in modules):
        return True
    failed: list = []

    def run() -> None:
        try:
            for name in modules:
                importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - raised again on the configure's thread
            failed.append(exc)

    worker = threading.Thread(target=run, name="configure-imports", daemon=True)
    if not stopped():
        worker.start()
    while worker.is_alive() and not stopped():  # (ends with the import, or with a stop)
        worker.join(_STOP_POLL_S)
    if stopped():
        node.get_logger().info("a stop was asked for while the driver configured: it stops without "
                               "configuring the rest")
        return False
    if failed:
        raise failed[0]
    return True


def descriptor(spec) -> ParameterDescriptor:
    unit = f" [{spec.unit}]" if spec.unit else ""
    change = ("changeable at run time" if spec.dynamic else
              "read when the node starts" if spec.startup else "takes effect at configure")
    desc = ParameterDescriptor(description=f"{spec.description}{unit} ({change})")
    if isinstance(spec.default, list):  # ros2 param set and load send [] as an empty bool array
        desc.dynamic_typing = True  # (validate_value takes an empty list of any type, no other)
    elif isinstance(spec.default, float):
        desc.floating_point_range = [FloatingPointRange(from_value=float(spec.minimum),
                                                        to_value=float(spec.maximum), step=0.0)]
    elif isinstance(spec.default, int) and not isinstance(spec.default, bool) \
            and spec.minimum is not None:
        desc.integer_range = [IntegerRange(from_value=int(spec.minimum),
                                           to_value=int(spec.maximum), step=1)]
    return desc


def declare_parameters(node: Any, specs) -> dict:
    """Declare every parameter of ``specs`` on ``node`` (typed, with its descriptor) and
    return their values by name. A list default may be empty, which has no type: such a
    parameter is declared as a string array, with dynamic typing, since ``ros2 param set
    ... "[]"`` and ``ros2 param load`` send an empty list as a bool array, which a typed one
    refuses ("Wrong parameter type"): a list of strings was then never emptied at run time,
    and loading config/cozmo.yaml or a dump of the node failed for it. Other types are
    refused by :func:`~cozmo_driver.driver.parameters.validate_value`."""
    for spec in specs:
        if isinstance(spec.default, list):
            node.declare_parameter(spec.name, list(spec.default), descriptor(spec))
            value = node.get_parameter_or(spec.name)
            if value.type_ != Parameter.Type.STRING_ARRAY and not value.value:  # rcl: [] is not set
                node.set_parameters([Parameter(spec.name, Parameter.Type.STRING_ARRAY, [])])
            continue
        node.declare_parameter(spec.name, spec.default, descriptor(spec))
    for text in unknown_parameters(node, [spec.name for spec in specs], qos=True):
        node.get_logger().warning(text)
    problems = bad_qos_overrides(node)
    if problems:
        raise ValueError("; ".join(problems))
    return {spec.name: node.get_parameter(spec.name).value for spec in specs}


def camera_file(url: str, log: Any, namespace: str = "/") -> Any:
    """The CameraInfo of the ``camera_info_url`` parameter of a driver in ``namespace``
    (``${NAME}``: its camera's name); None: not usable, which ``log`` warns about, and the
    robot's own calibration is used. Empty: camera_info_manager's default file
    (caminfo.DEFAULT_URL) if it exists (None, quietly, if not)."""
    from ..driver import camera_info as caminfo
    resolved = caminfo.resolve_url(url, caminfo.camera_name(namespace))
    try:
        path = caminfo.camera_info_path(resolved)
        if not url and not os.path.lexists(path):
            return None
        data = caminfo.load_camera_info_url(resolved)
    except caminfo.CameraInfoError as exc:
        log.warning(f"{exc}; using the robot's calibration instead")
        return None
    log.info(f"camera calibration from {resolved}" if url else
             f"camera calibration from {path} (camera_info_url is empty: {resolved})")
    return data


def twist_reader(stamped: bool, drive: Callable[..., None], header_ok: Callable[[str, int, int], bool],
                 on_message: Callable[[Any, bool], None]) -> Callable[[bytes], None]:
    """The callback of a ``raw`` cmd_vel subscription on the cmd_vel thread: reads the six
    numbers (and a TwistStamped's frame id and stamp, which ``header_ok(frame, sec, nanosec)``
    checks) from the serialized message (serialized.read_twist) and calls
    ``drive(field, linear, angular, True)``. A
    message it cannot read so (another encapsulation) is deserialized by rclpy and goes to
    ``on_message(msg, True)``, the message callback."""
    from .driver_topics import cmd_vel_type

    msg_type = cmd_vel_type(stamped)
    field = "cmd_vel.twist" if stamped else "cmd_vel"

    def on_bytes(data: bytes) -> None:
        try:
            frame, stamp, values = read_twist(data, stamped)
        except LayoutError:
            on_message(deserialize_message(data, msg_type), True)
            return
        if stamped and not header_ok(frame, *stamp):
            return
        drive(field, values[:3], values[3:], True)
    return on_bytes


#: what a publisher of the other cmd_vel type is told to set (the driver's setting, then its own)
_OTHER_SIDE = {"geometry_msgs/msg/TwistStamped": "Nav2: enable_stamped_cmd_vel: false",
               "geometry_msgs/msg/Twist": "Nav2: enable_stamped_cmd_vel: true"}


def cmd_vel_type_check(node: Any, tick: Callable[[], None]) -> Callable[[], None]:
    """``tick`` (the driver's 1 s timer), then a look at who publishes on the driver's cmd_vel:
    a node that publishes it in another type than the driver takes (``cmd_vel_stamped``: Nav2's
    TwistStamped with enable_stamped_cmd_vel, say, to a driver taking Twist), or best effort to
    the driver's reliable subscription, is never matched by DDS, and the driver heard nothing of
    it: the robot stands still. Each such node and type (or QoS) is warned of once."""
    from rclpy.qos import QoSReliabilityPolicy

    said = set()
    best_effort = QoSReliabilityPolicy.BEST_EFFORT

    def check() -> None:
        tick()
        stamped = bool(node._params["cmd_vel_stamped"])
        ours = twist_type(stamped)
        topic = node.resolve_topic_name("cmd_vel")
        name, namespace = node.get_name(), node.get_namespace()
        reliable = any(i.qos_profile.reliability != best_effort for i in node.get_subscriptions_info_by_topic(topic)
                       if i.node_namespace == namespace and i.node_name in (name, f"_{name}_cmd_vel"))
        for info in node.get_publishers_info_by_topic(topic):
            mismatch = info.topic_type if info.topic_type != ours else (
                "best effort" if reliable and info.qos_profile.reliability == best_effort else None)
            key = (info.node_namespace, info.node_name, mismatch)
            if mismatch is None or info.node_name == UNKNOWN_NODE or key in said:
                continue  # (a node not discovered whole yet: the next check names it)
            said.add(key)
            who = info.node_namespace.rstrip("/") + "/" + info.node_name
            node.get_logger().warning(_cmd_vel_mismatch(topic, who, mismatch, ours, stamped))
    return check


def _cmd_vel_mismatch(topic: str, who: str, mismatch: str, ours: str, stamped: bool) -> str:
    """The warning of a cmd_vel publisher DDS does not match with the driver: ``mismatch`` is
    its type, or "best effort" (its reliability, the driver's subscription reliable)."""
    if mismatch == "best effort":
        return (f"{topic}: {who} publishes best effort, but the driver subscribes reliable: none of its "
                f"commands reach the robot; have that node publish reliable, or start the driver with "
                f"-p \"qos_overrides.{topic}.subscription.reliability:=best_effort\"")
    other_side = _OTHER_SIDE.get(mismatch)
    flip = str(not stamped).lower()
    fix = (f"start the driver with cmd_vel_stamped {flip} (a configure-time parameter: -p cmd_vel_stamped:={flip}, "
           f"or the parameter file), or have that node publish {ours} ({other_side})"
           if other_side else f"have that node publish {ours}")
    return (f"{topic}: {who} publishes {mismatch}, but the driver takes {ours} (cmd_vel_stamped "
            f"{str(stamped).lower()}): none of its commands reach the robot, and DDS says nothing of it; {fix}")


#: loggers of the layers below whose info lines the node's log shows too (the rest: from
#: warnings on); the driver says itself what their other info lines say
INFO_LOGGERS = ("cozmo.client.calibration",)


class RosLogHandler(logging.Handler):
    """Forwards warnings of the protocol and client layers to the node's logger, and the
    info lines of :data:`INFO_LOGGERS` (whose level it sets to INFO); not the session's
    lines of a link that changed state, which the driver says in its own words."""

    def __init__(self, node: Any) -> None:
        super().__init__(logging.INFO)
        self.node = node
        # "[cozmo.transport] text", then the traceback when the record has exc_info
        # (logger.exception on the I/O thread) and the stack when it has stack_info
        self.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        for name in INFO_LOGGERS:
            if logging.getLogger(name).getEffectiveLevel() > logging.INFO:
                logging.getLogger(name).setLevel(logging.INFO)

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING and record.name not in INFO_LOGGERS:
            return
        if getattr(record, "cozmo_link_change", False):
            return  # the driver says it itself, with what to do (session.LINK_CHANGE)
        try:
            text = self.format(record)  # with the traceback of exc_info, if any
            logger = self.node.get_logger()
            # one call per severity: rclpy raises when one source line logs at two
            if record.levelno >= logging.ERROR:
                logger.error(text)
            elif record.levelno >= logging.WARNING:
                logger.warning(text)
            else:
                logger.info(text)
        except Exception:  # a log line must never break the I/O thread
            self.handleError(record)


def log_line(node: Any, level: int, text: str) -> None:
    """Log through ``node``'s rclpy logger, or to stderr once the context is shut down."""
    if node.context.ok():
        # one call per severity: rclpy raises when one source line logs at two
        if level >= logging.ERROR:
            node.get_logger().error(text)
        elif level >= logging.WARNING:
            node.get_logger().warning(text)
        elif level >= logging.INFO:
            node.get_logger().info(text)
        else:
            node.get_logger().debug(text)
    else:
        print(f"[{logging.getLevelName(level)}] [{node.get_name()}]: {text}", file=sys.stderr)


def core_attribute(name: str, doc: str) -> property:
    """A node attribute that is the core's (motion, media and object interfaces use them)."""
    def get(self):
        return getattr(self._core, name)

    def set_(self, value):
        setattr(self._core, name, value)
    return property(get, set_, doc=doc)


def collector_off() -> Callable[[], None]:
    """Turn the cyclic garbage collector off for start-up, whose objects live as long as the
    process (a configure's: until its cleanup) and whose collector passes cost it about a
    tenth. The function returned (once is enough, more is harmless) freezes what start-up
    allocated (:func:`freeze_start_up`), so that the collector's full passes, which would
    pause both threads for milliseconds, leave it out, and turns the collector back on if it
    was on; first it collects the few cycles start-up left (about a thousand objects, some
    50 ms after the first robot state)."""
    was_on = gc.isenabled()
    gc.disable()
    done = []

    def resume() -> None:
        if not done:
            done.append(True)
            freeze_start_up()
            if was_on:
                gc.enable()
    return resume


class _Frozen:
    """Whether start-up's objects were frozen (:func:`freeze_start_up`), and since when a
    cleanup has thawed them (:func:`thaw_released`), for :func:`refreeze`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.used = False     # start-up's objects were frozen: this process keeps its own out
        self.thawed = False   # a cleanup unfroze them
        self.due = False      # and an activation came since: to freeze again
        self.quiet = 0        # timer turns since with no released action server left
        self.retiring = 0     # ServerRetirements whose servers are not destroyed yet


_FROZEN = _Frozen()
#: the driver's timer turns (1 s) with no released action server left before an activation
#: after a cleanup freezes its objects: the executor's wait of the turn that destroyed the
#: last of them may still hold them (rclpy's wait set), and would have them frozen too
_QUIET_TURNS = 2


def freeze_start_up(collect: bool = True) -> None:
    """Collect the few cycles start-up left (``collect``), then freeze the rest
    (``gc.freeze()``): the objects a configure makes live until its cleanup, and the
    collector's full passes, which would pause both threads for milliseconds, leave them out.
    A cleanup thaws them (:func:`thaw_released`); those of the configure after it are frozen
    in turn (:func:`refreeze`)."""
    if collect:
        gc.collect()
    gc.freeze()
    with _FROZEN.lock:
        _FROZEN.used, _FROZEN.thawed, _FROZEN.due = True, False, False


def thaw_released() -> None:
    """A cleanup released the interfaces of a configure whose objects may be frozen
    (:func:`freeze_start_up`): unfreeze, so that the collector frees their reference cycles
    (the media, the animation library, the link and robot, the motions: tens of MB with a
    large library), which it would otherwise keep for the rest of the process."""
    with _FROZEN.lock:
        if not _FROZEN.used or _FROZEN.thawed:
            return
        _FROZEN.thawed, _FROZEN.due = True, False
    gc.unfreeze()


def refreeze(activated: bool = False) -> None:
    """After a cleanup thawed start-up's objects (:func:`thaw_released`), freeze the next
    configure's as start-up's were: ``activated`` at its activation; then, called by the
    driver's 1 s timer, once the released action servers (:class:`ServerRetirement`), which
    hold the released interfaces, are destroyed and :data:`_QUIET_TURNS` turns have passed."""
    with _FROZEN.lock:
        if activated:
            _FROZEN.due, _FROZEN.quiet = _FROZEN.thawed, 0
            return
        if not _FROZEN.due:
            return
        _FROZEN.quiet = 0 if _FROZEN.retiring else _FROZEN.quiet + 1
        if _FROZEN.quiet < _QUIET_TURNS:
            return
        _FROZEN.due = False
    freeze_start_up()


def destroy_state_machine(node: Any) -> None:
    """rclpy's LifecycleNode never destroys its state machine, whose native object holds the
    rcl node (so the DDS participant) until the node is collected: after gc.freeze(), never."""
    machine = getattr(node, "_state_machine", None)
    if machine is not None:
        try:
            machine.destroy_when_not_in_use()
        except Exception:  # noqa: BLE001 - an rclpy without it: collected with the node
            pass


class ServerRetirement:
    """Action servers released at a cleanup, destroyed once their goals' results are out.

    An aborted goal's result is sent by a done callback that the executor runs on a later
    turn than the end of the goal's execute callback; a server destroyed before that loses
    the result (rcl: "action server pointer is invalid", and the client never gets it). So
    the servers are destroyed after two turns of a 0.2 s timer with no execute callback
    pending (``busy``), at once only when the context is shut down (nothing spins any
    more), and by :meth:`destroy_now` when the node goes. Until then they answer goals
    as their closed owner does (the motions refuse them, the media end them aborted),
    until a configure makes new servers of their names: :meth:`withdraw`."""

    PERIOD_S = 0.2
    QUIET_TURNS = 2

    def __init__(self, node: Any, servers: list, busy: Callable[[], bool]) -> None:
        self._node, self._servers, self._busy = node, list(servers), busy
        self._quiet, self._timer, self._withdrawn = 0, None, False
        self._counted = True
        with _FROZEN.lock:
            _FROZEN.retiring += 1
        if node.context.ok():
            self._timer = steady_timer(node, self.PERIOD_S, self._turn)
        else:
            self.destroy_now()

    def _turn(self) -> None:
        self._quiet = 0 if self._busy() else self._quiet + 1
        if self._quiet >= self.QUIET_TURNS:
            self.destroy_now()

    @property
    def done(self) -> bool:
        """The servers and the timer are destroyed."""
        return not self._servers and self._timer is None

    def withdraw(self) -> None:
        """New servers of the same names are made (configure): these take no request any more,
        as a goal, cancel or result request reaches every server of its name and the client
        keeps the first answer (the new server's accepted goal ran, unknown to the client).
        Out of the executor's wait set they still send what they owe: the results of their
        goals go out from the executor's tasks, which run on. Destroyed as before; idempotent."""
        waitables = list(self._node.waitables)
        for server in self._servers:
            if server in waitables:
                self._node.remove_waitable(server)
        self._withdrawn = True

    def destroy_now(self) -> None:
        """Destroy the servers (and the timer) now; idempotent."""
        for server in self._servers:
            if self._withdrawn:  # ActionServer.destroy removes it from the node's waitables
                self._node.add_waitable(server)
            server.destroy()
        self._servers = []
        self._busy = _idle  # (it holds the released media or motions)
        if self._timer is not None:
            self._node.destroy_timer(self._timer)
            self._timer = None
        if self._counted:
            self._counted = False
            with _FROZEN.lock:
                _FROZEN.retiring -= 1


def _idle() -> bool:
    return False


def still_retiring(retirements: list, released: Any) -> list:
    """``retirements`` not yet done, and that of ``released`` (a media or motions object
    just destroyed): what the node still has to destroy when it goes."""
    return [r for r in retirements if not r.done] + [released.retirement]


def release_reason(transition: str) -> str:
    """Why the goals (and connection requests) still running end when the driver releases its
    interfaces: the lifecycle ``transition`` that does it ("lifecycle shutdown"), if any."""
    return f"the driver is shutting down ({transition})" if transition else "the driver is shutting down"


def retire_actions(node: Any, transition: str = "") -> str:
    """Cleanup: the node's media and motions (``_media``, ``_motion``, the core's motions)
    destroyed, their goals ended aborted, their action servers retiring
    (:func:`still_retiring`). Returns the goals' reason (:func:`release_reason`)."""
    reason = release_reason(transition)
    for name in ("_media", "_motion"):
        released = getattr(node, name)
        if released is not None:
            released.destroy(reason)
            node._retiring = still_retiring(node._retiring, released)
            setattr(node, name, None)
    node._core.motion = None
    return reason


def withdraw(retirements: list) -> None:
    """Configure: the released servers of ``retirements`` take no request any more, as new
    servers of their names are made (:meth:`ServerRetirement.withdraw`)."""
    for retirement in retirements:
        retirement.withdraw()


def forget_destroyed(node: Any) -> None:
    """Configure: the entries of entities gone from ``node``'s default callback group are
    dropped. rclpy's callback group keeps a weak reference to every entity ever made in it,
    and drops none when the entity is destroyed (Humble to Jazzy): each cleanup and configure
    of the driver left about thirty dead ones in it, for the rest of the process."""
    entities = getattr(node.default_callback_group, "entities", None)
    if isinstance(entities, set):
        entities.difference_update([ref for ref in list(entities) if ref() is None])


def destroy_retired(retirements: list) -> list:
    """The node goes: destroy the servers of ``retirements`` now (their timer is the node's:
    nothing will run their callbacks any more); returns the empty list that is left."""
    for retirement in retirements:
        retirement.destroy_now()
    return []


#: the parts of the driver's /diagnostics (``<node>: link`` ...), each reported while configured
RELEASED_PARTS = ("link", "robot", "display and audio", "objects")


def lifetime_reports(node: Any) -> None:
    """The driver's ``/diagnostics`` and ``link_status`` publishers and 1 s timer, made once
    for as long as ``node`` lives (not per configure): a diagnostic aggregator otherwise marked
    the driver stale after a cleanup, and never heard of one started with ``autostart`` false;
    a ``link_status`` subscriber heard nothing. Each turn runs ``node._tick`` (the configured
    driver's reports, set by its configure); without one, every part of
    :data:`RELEASED_PARTS` says the driver is unconfigured or finalized
    (:func:`~cozmo_driver.driver.diagnostics.released_report`), an ERROR after a configure that
    failed (``node.configure_error``, set by :func:`transition`), and ``link_status`` says
    DISCONNECTED, inactive (``DriverStreams.publish_released_link``)."""
    from cozmo_interfaces.msg import LinkStatus
    from diagnostic_msgs.msg import DiagnosticArray
    from ..driver.diagnostics import released_report
    from .qos import QOS_LATCHED, QOS_STATE, create_publisher

    node._diagnostics = create_publisher(node, DiagnosticArray, "/diagnostics", QOS_STATE, overridable=False)
    node._link = create_publisher(node, LinkStatus, "link_status", QOS_LATCHED)
    node.configure_error = ""  # why the last configure failed ("": it did not)

    def turn() -> None:
        tick = node._tick
        if tick is not None:
            tick()
            return
        p = node._params
        where = f"{p['robot_ip']}:{p['robot_port']}"
        report = released_report(node._closed, node.get_fully_qualified_name(), where, node.configure_error)
        node._streams.publish_diagnostics([(part, report) for part in RELEASED_PARTS], f"cozmo@{where}")
        node._streams.publish_released_link()  # DISCONNECTED, inactive
    steady_timer(node, 1.0, turn)  # not ROS time
