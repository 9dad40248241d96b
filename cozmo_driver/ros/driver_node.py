"""``cozmo_driver_node``: one Cozmo as conventional ROS 2 interfaces.

The node is glue. What the robot does and means lives in the ROS-free driver
core (:class:`cozmo_driver.core.DriverCore`): robot states as odometry, IMU,
joints, status and battery samples in SI units, camera frames and calibration,
re-initialisation after each (re)connection, the emergency stop, the checked
commands and the cmd_vel watchdog. The node declares the parameters, runs the
lifecycle, and maps ROS callbacks to core calls and the core's samples to
messages (:class:`cozmo_driver.ros.driver_streams.DriverStreams`, the core's
output).

Threads. The protocol and the core run on the robot client's I/O thread, which
publishes each robot state (odometry, tf, IMU, joint states, status, battery,
events) and camera frame right there (rclpy publishers may be used from any
thread; an executor wake-up per robot state cost more CPU than publishing),
under the core's lock, which the executor holds while it creates or destroys
publishers. What must run on the executor (a cmd_vel that ends a motion goal,
the fallback when the cmd_vel thread fails) is handed to it through a
:class:`~cozmo_driver.ros.handover.HandOver`. No thread polls. Commands go to
the robot with ``Robot.post`` (queued to the I/O thread, never blocking).

``cmd_vel``, the one command sent many times a second, is served on a thread of
its own (:mod:`cozmo_driver.ros.subscription_thread`: a small node named
``_<driver name>_cmd_vel`` in the same namespace, with its own executor, holding
only that subscription), so it never waits for the main executor's wake-up. Its
watchdog runs in the core on the client's clock; where that thread cannot be
made, the main executor serves cmd_vel. The core's ``drive_lock`` orders what
that thread sends with what stops the treads (emergency stop, deactivation, a
motion goal taking them).

Lifecycle (rclpy.lifecycle, Humble and later): configure creates the robot
client and the ROS interfaces, activate connects (and reconnects by itself with
back-off until cleanup) and publishes, deactivate stops every motor and stops
publishing robot data (commands are refused), cleanup disconnects. With
``autostart`` (the default) the node configures and activates itself, so
``ros2 run cozmo_driver cozmo_driver_node`` just works. ``/diagnostics`` and ``link_status``
keep reporting for as long as the node lives (inactive, unconfigured, finalized).

Names are relative (under the node's namespace) except the standard absolute
``/tf`` and ``/diagnostics``. See docs/driver.md for every topic, service and
parameter.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import rclpy
from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import QoSProfile

# Only what the node needs to exist is imported here: the message packages, the robot
# client and the core (~0.3 s) are imported once the node, and so its DDS participant,
# exists, so that discovery runs meanwhile (docs/driver.md, Start-up).
from ..driver.commands import CommandError, check_cmd_vel_stamp, check_frame
from ..driver.parameters import PARAMETERS, full_frame_id, validate_all, validate_change
from ..errors import ConfigurationError, CozmoError
from ..lifeline import exit_with_parent
from . import qos
from .driver_support import RosLogHandler as _RosLogHandler, core_attribute as _core_attribute, lifetime_reports
from .driver_support import collector_off, declare_parameters, destroy_state_machine, log_line, refreeze, thaw_released
from .driver_support import camera_file, close_link, destroy_retired, finish_goals, flush, retire_actions, withdraw
from .driver_support import import_unless_stopped
from .driver_support import cmd_vel_type_check, ctrl_z_stop, forget_destroyed, transition as _transition, twist_reader
from .handover import HandOver
from .subscription_thread import SubscriptionThread, Unsupported
from ._entry import DoubleParameters, destroyed_if_refused, ignored_qos_overrides, init, make_node, refuse
from ._entry import spin_node, stop_requested
from .usage import answer_help
from .qos import QOS_COMMAND

if TYPE_CHECKING:
    from cozmo_interfaces.msg import RobotInfo
    from geometry_msgs.msg import Twist, TwistStamped
    from .media_interfaces import MediaInterfaces
    from .motion_actions import MotionActions
    from .object_interfaces import ObjectInterfaces

__all__ = ["CozmoDriverNode", "main"]

#: two busy threads (protocol I/O, executor) share the GIL: a waiting one gets it after at most
#: this long (CPython's 5 ms default shows in command and odometry latency)
_GIL_SWITCH_INTERVAL_S = 0.0005
#: start(): configure waits this long at most for the robot's first state before the rest
_FIRST_STATE_WAIT_S = 0.25


class CozmoDriverNode(DoubleParameters, LifecycleNode):
    """The driver of one Cozmo. See the module docstring."""

    _active = _core_attribute("active", "publishing and taking commands")
    _estop = _core_attribute("estop", "the emergency stop is engaged")
    _drive_lock = _core_attribute("drive_lock", "orders tread commands and stops")
    _tracker = _core_attribute("tracker", "the odometry tracker")
    _refused = _core_attribute("refused", "commands refused so far")
    _volume = _core_attribute("volume", "the volume re-applied after a reconnection")
    _lights = _core_attribute("lights", "the backpack lights re-applied after a reconnection")
    _lock = _core_attribute("lock", "what the I/O thread shares with the executor")

    def __init__(self, node_name: str = "cozmo_driver", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        with destroyed_if_refused(self, self._destroy_rcl_node):  # gone from the graph at once
            self._params: Dict[str, Any] = declare_parameters(self, PARAMETERS)
            problem = validate_all(self._params)
            if problem:
                raise ValueError(f"invalid parameters: {problem}")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._robot, self._configured, self._closed = None, False, False
        self._handover: Optional[HandOver] = None  # what must run on the executor
        self._live = False  # the link open and the core active (see _go_live)
        self._link_early = False  # start(): configure opens the link half-way (_go_live)
        from ..core import DriverCore  # after the participant: see the imports above
        from .driver_streams import DriverStreams
        self._streams = DriverStreams(self, self._hand_over)
        self._core = DriverCore(None, self._params, self._streams)
        self._tick: Optional[Callable[[], None]] = None  # the configured driver's 1 s reports (_create_commands)
        lifetime_reports(self)  # /diagnostics while the node lives, configured or not (driver_support)
        self._entities: List[Tuple[Callable[[Any], Any], Any]] = []
        self._pub: Dict[str, Any] = {}
        self._cmd_vel_thread: Optional[SubscriptionThread] = None  # see _create_cmd_vel
        self._cmd_vel_sub = None  # the executor's cmd_vel subscription, when not on a thread
        self._robot_info: Optional[RobotInfo] = None
        #: FaceNode.pull_frame of the face node in this process (cozmo_stack): MediaInterfaces pulls it
        self.local_face_source: Optional[Callable[[float], Any]] = None
        self._media: Optional[MediaInterfaces] = None  # display, audio, animations
        self._motion: Optional[MotionActions] = None  # motion actions (motion_actions.py)
        self._objects: Optional[ObjectInterfaces] = None  # cubes, charger, lights
        self._retiring: list = []  # ServerRetirements of released media and motions, not done

    # ------------------------------------------------------------------ parameters

    #: the autostart parameter
    autostart = property(lambda self: bool(self._params["autostart"]))
    #: True while the robot is connected and streaming
    connected = property(lambda self: self._core.connected)
    #: the display, audio and animation interfaces while configured (else None)
    media = property(lambda self: self._media)
    #: what publishes every state and image (DriverStreams: its templates, local_joints)
    streams = property(lambda self: self._streams)

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        changes = {p.name: p.value for p in parameters if p.name in self._params}
        if not changes:
            return SetParametersResult(successful=True)
        problem = validate_change(self._params, changes, self._configured, self._active, self._closed)
        if problem:
            return SetParametersResult(successful=False, reason=problem)
        old = dict(self._params)
        self._params.update(changes)
        if self._configured:
            self._core.apply_params(old)
        return SetParametersResult(successful=True)

    def _frame(self, name: str) -> str:
        return full_frame_id(self._params["frame_prefix"], self._params[name])

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> bool:
        """Configure and activate (``autostart``); True unless it failed. The link opens half-way through
        configure, as soon as a robot state can be published, and the robot connects while the rest is
        made (docs/driver.md, Start-up). A stop asked for meanwhile (Ctrl-C) leaves it short of active."""
        self._link_early = True
        try:
            if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                return stop_requested()  # (a configure cut short by Ctrl-C: the stop follows)
        finally:
            self._link_early = False
        return stop_requested() or self.trigger_activate() == TransitionCallbackReturn.SUCCESS

    @_transition
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        from ..core import make_robot
        from ..core.driver import WATCHDOG_OFF
        from .object_interfaces import ObjectInterfaces
        p = self._params
        forget_destroyed(self)  # those of the configures before (driver_support.forget_destroyed)
        if not p["cmd_vel_timeout"]:
            self.get_logger().warning(WATCHDOG_OFF)
        self._robot = make_robot(p, self.get_fully_qualified_name())
        core = self._core
        core.attach(self._robot)  # its events held until the activation (core.held_events)
        core.camera_file = camera_file(p["camera_info_url"], self.get_logger(), self.get_namespace())
        self._create_streams()
        self._objects = ObjectInterfaces(self, self._robot, self._params, self._streams.note)  # before RobotReady
        self._robot.add_listener(core.on_robot_event)
        if self._link_early:  # the rest while the robot connects, after its first state (the GIL)
            self._streams.hold_notes()  # and log lines (driver_streams.hold_notes)
            try:
                if self._go_live(report=False):
                    self._streams.first_state.wait(_FIRST_STATE_WAIT_S)
            finally:
                self._streams.release_notes()
        self._create_commands()
        if not import_unless_stopped(self, stop_requested):  # Ctrl-C meanwhile: at once, not after it
            return TransitionCallbackReturn.FAILURE
        from .media_interfaces import MediaInterfaces  # the animation library: after the link
        from .motion_actions import MotionActions
        withdraw(self._retiring)  # released servers of the names made here: the new ones alone answer
        self._media = MediaInterfaces(self, self._robot, self._params, self._hand_over)
        self._motion = core.motion = MotionActions(self, self._robot)
        self._configured = True
        for text in ignored_qos_overrides(self, [getattr(t, "node", None) for t in (
                self._cmd_vel_thread, getattr(self._media, "_face_thread", None))]):
            self.get_logger().warning(text)
        self.get_logger().info(f"configured for the robot at {p['robot_ip']}:{p['robot_port']}")
        return TransitionCallbackReturn.SUCCESS

    @_transition
    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._robot is None or not self._go_live(report=True):
            return TransitionCallbackReturn.FAILURE
        if self._media is not None:
            self._media.activate()
        self._publish_link_status()
        refreeze(activated=True)  # after a cleanup, as start-up's were (driver_support.refreeze)
        self.get_logger().info("activated: robot state published, commands taken" if self._core.connected
                               else "activated: the robot is not connected yet: its state is published, "
                                    "and commands taken, once it answers")
        return super().on_activate(state)

    def _go_live(self, report: bool) -> bool:
        """Open the link unless it is open, activate the core and the object interfaces: robot
        states are published and commands taken from here on. False when the link cannot be
        opened (``report``: logged and kept in ``start_error``; else on_activate tries again)."""
        robot = self._robot
        if not robot.transport.running:
            try:
                robot.start()
            except CozmoError as exc:
                if report:
                    self.start_error, self._core.activation_error = exc, str(exc)  # (/diagnostics)
                    self.get_logger().error(f"cannot open the link to the robot: {exc}")
                return False
            self._streams.note(logging.INFO, "connecting to the robot at "
                               f"{self._params['robot_ip']}:{self._params['robot_port']} from UDP "
                               f"{robot.transport.local_address[0]}:{robot.transport.local_address[1]}")
        if not self._live:
            self._live = True
            self._core.activate()
            if self._objects is not None:
                self._objects.activate()
        return True

    @_transition
    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._live = False
        self._core.deactivate()  # no robot state is published, no cmd_vel sent, once it returns
        self._core.stop_all_motors()  # first: before the cubes' lights and the goals' own stops
        if self._media is not None:
            self._media.deactivate()
        if self._objects is not None:
            self._objects.deactivate()
        if self._motion is not None:
            self._motion.abort_all("the driver was deactivated")
        self.get_logger().info(
            "deactivated: motors stopped, publishing paused, commands refused" if self._core.connected
            else "deactivated: publishing paused, commands refused; the robot is not connected: "
                 "the motors are stopped when it is back")
        return super().on_deactivate(state)

    @_transition
    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release("lifecycle cleanup")
        return TransitionCallbackReturn.SUCCESS

    @_transition
    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.close("lifecycle shutdown")  # finalized: no parameter change takes effect any more (validate_change)
        return TransitionCallbackReturn.SUCCESS

    @_transition
    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release("a transition failed")
        return TransitionCallbackReturn.SUCCESS

    def _release(self, transition: str = "") -> None:
        """Stop the motors (first), disconnect, join the I/O thread, destroy the interfaces (goals: aborted)."""
        core = self._core
        self._live = False
        core.release()
        self._stop_cmd_vel_thread()
        reason = retire_actions(self, transition)  # media, motions: servers retire (driver_support.ServerRetirement)
        if self._objects is not None:
            self._objects.destroy(reason)  # lights off and objects disconnected, before the link stops
            self._objects = None
        robot, self._robot, self._robot_info = self._robot, None, None  # (hardware_id: no longer its serial)
        if robot is not None:
            close_link(robot, core.on_robot_event, self._log)
        from ..client import LinkState
        core.link_state = LinkState.DISCONNECTED
        with core.lock:
            if robot is not None:  # the last link_status: its subscribers see the link closed
                self._publish_link_status()
                flush(self._link)
            self._destroy_interfaces()
            core.robot = None
        self._configured = False
        thaw_released()  # what start-up froze is collected (driver_support.freeze_start_up)

    def _log(self, level: int, text: str) -> None:
        """Log through rclpy, or to stderr once the context is shut down (Ctrl-C)."""
        log_line(self, level, text)

    def close(self, transition: str = "") -> None:
        """Release everything (idempotent); called on shutdown before destroy_node."""
        if not self._closed:
            self._closed = True
            self._release(transition)

    def destroy_node(self) -> None:
        self.close()
        self._retiring = destroy_retired(self._retiring)  # their servers may wait for a timer of this node
        self._destroy_rcl_node()

    def _destroy_rcl_node(self) -> None:
        super().destroy_node()
        destroy_state_machine(self)

    # ------------------------------------------------------------------ ROS interfaces

    def _publisher(self, key: str, msg_type, topic: str, profile: QoSProfile, overridable: bool = True) -> None:
        pub = qos.create_publisher(self, msg_type, topic, profile, overridable)
        self._pub[key] = pub
        self._entities.append((self.destroy_publisher, pub))

    def _subscription(self, msg_type, topic: str, callback, profile: QoSProfile = QOS_COMMAND) -> Any:
        sub = qos.create_subscription(self, msg_type, topic, callback, profile)
        self._entities.append((self.destroy_subscription, sub))
        return sub

    def _create_streams(self) -> None:
        """The publishers and what the I/O thread publishes with: all a robot state needs."""
        from . import driver_topics
        for key, msg_type, topic, profile, overridable in driver_topics.PUBLISHERS:
            self._publisher(key, msg_type, topic, profile, overridable)
        self._streams.build()
        self._handover = HandOver(self, lambda item: item[0](*item[1]))
        self._entities.append((HandOver.destroy, self._handover))

    def _create_commands(self) -> None:
        """The command topics, services, the diagnostics timer and cmd_vel."""
        from . import driver_topics
        for msg_type, topic, callback in driver_topics.command_subscriptions(self._core):
            self._subscription(msg_type, topic, callback)
        for srv_type, name, callback in driver_topics.services(self):
            srv = self.create_service(srv_type, name, callback)
            self._entities.append((self.destroy_service, srv))
        self._tick = cmd_vel_type_check(self, self._on_diagnostics_timer)  # each 1 s turn (lifetime_reports)
        self._create_cmd_vel(own_thread=True)

    def _hand_over(self, fn: Callable[..., None], *args: Any) -> None:
        """Any thread: run ``fn(*args)`` on the executor."""
        handover = self._handover
        if handover is not None:
            handover.put((fn, args))

    def _create_cmd_vel(self, own_thread: bool) -> None:
        """Subscribe to cmd_vel: on a thread of its own (subscription_thread.py), or where
        that cannot be made, on the executor."""
        from .driver_topics import cmd_vel_type
        stamped = self._params["cmd_vel_stamped"]
        msg_type = cmd_vel_type(stamped)
        callback = self._on_cmd_vel_stamped if stamped else self._on_cmd_vel
        if own_thread:  # serialized messages, read by driver_support.twist_reader
            try:
                self._cmd_vel_thread = SubscriptionThread(
                    self, "cmd_vel", lambda node, topic, cb: qos.create_subscription(
                        node, msg_type, topic, cb, QOS_COMMAND, raw=True),
                    twist_reader(stamped, self._core.drive_twist, self._cmd_vel_header_ok, callback),
                    self._on_cmd_vel_thread_failure)
                return
            except Unsupported as exc:
                self.get_logger().info(f"cmd_vel served by the executor: {exc}")
        self._cmd_vel_sub = self._subscription(msg_type, "cmd_vel", callback)

    def _stop_cmd_vel_thread(self) -> None:
        thread, self._cmd_vel_thread = self._cmd_vel_thread, None
        if thread is not None:
            thread.stop()

    def _on_cmd_vel_thread_failure(self, exc: BaseException) -> None:
        """The cmd_vel thread: spinning failed. Stop the treads; the executor takes over."""
        self.get_logger().error(f"cmd_vel thread failed ({exc!r}): treads stopped, cmd_vel "
                                "moves to the executor")
        self._core.stop_treads()
        self._hand_over(self._move_cmd_vel_to_executor)

    def _move_cmd_vel_to_executor(self) -> None:
        if self._cmd_vel_thread is not None and self._robot is not None:
            self._stop_cmd_vel_thread()
            self._create_cmd_vel(own_thread=False)

    def _destroy_interfaces(self) -> None:
        self._stop_cmd_vel_thread()
        self._cmd_vel_sub = self._tick = None
        for destroy, entity in reversed(self._entities):
            destroy(entity)
        self._entities.clear()
        self._pub.clear()
        self._handover = None

    # ------------------------------------------------------------------ reports

    def _publish_link_status(self) -> None:
        self._streams.on_link(self._core.link_sample())

    def _on_diagnostics_timer(self) -> None:
        refreeze()  # after a cleanup: the new configure frozen once the released servers are gone
        self._publish_link_status()
        if self._robot is not None:
            self._streams.publish_reports(self._media, self._objects)

    # ------------------------------------------------------------------ commands

    def _cancel_watchdog(self) -> None:
        self._core.cancel_watchdog()

    def _on_cmd_vel(self, msg: Twist, own_thread: bool = False) -> None:
        lin, ang = msg.linear, msg.angular
        self._core.drive_twist("cmd_vel", (lin.x, lin.y, lin.z), (ang.x, ang.y, ang.z), own_thread)

    def _cmd_vel_header_ok(self, frame_id: str, sec: int, nanosec: int) -> bool:
        allowed = (self._frame("base_link_frame"), self._frame("base_frame"))
        try:  # (any thread: the cmd_vel thread's too) the frame, then the age by the node's clock
            check_frame(frame_id, allowed, "cmd_vel.header.frame_id")
            check_cmd_vel_stamp(sec, nanosec, self.get_clock().now().nanoseconds, self._params["cmd_vel_timeout"])
        except CommandError as exc:
            self._core.refuse_field(f"cmd_vel refused: {exc}")  # throttled per field
            return False
        return True

    def _on_cmd_vel_stamped(self, msg: TwistStamped, own_thread: bool = False) -> None:
        if not self._cmd_vel_header_ok(msg.header.frame_id, msg.header.stamp.sec, msg.header.stamp.nanosec):
            return
        lin, ang = msg.twist.linear, msg.twist.angular
        self._core.drive_twist("cmd_vel.twist", (lin.x, lin.y, lin.z), (ang.x, ang.y, ang.z), own_thread)

    def _on_emergency_stop(self, request, response):
        response.message = self._core.emergency_stop(bool(request.engage))
        response.success = True
        self._publish_link_status()  # and emergency_stop/engaged, which changed
        if self._media is not None:
            self._media.on_emergency_stop(self._core.estop)
        if self._motion is not None and self._core.estop:
            self._motion.abort_all("emergency stop engaged")
        return response

    def _on_reset_odometry(self, request, response):
        response.success, response.message = True, self._core.reset_odometry()
        return response

    def _on_calibrate_motors(self, request, response):
        response.success, response.message = self._core.calibrate_motors()
        return response


# ---------------------------------------------------------------------- entry point

def main(args: Optional[List[str]] = None) -> int:
    """``cozmo_driver_node``: run the driver until Ctrl-C, SIGTERM or SIGHUP."""
    if answer_help("cozmo_driver_node", __doc__, PARAMETERS, args):
        return 0
    exit_with_parent()  # end with the bring-up that started it (cozmo_driver.lifeline)
    sys.setswitchinterval(_GIL_SWITCH_INTERVAL_S)
    resume_collector = collector_off()  # until start() ends (driver_support.collector_off)
    init(args)  # SIGINT, SIGTERM and SIGHUP stop the node before rclpy shuts down
    node = make_node("cozmo_driver_node", CozmoDriverNode, (ValueError, rclpy.exceptions.ParameterException))
    if node is None:
        resume_collector()
        return 2
    handler = _RosLogHandler(node)
    cozmo_logger = logging.getLogger("cozmo")
    cozmo_logger.addHandler(handler)
    cozmo_logger.propagate = False

    def start() -> None:
        try:
            if node.autostart and not node.start():
                if isinstance(getattr(node, "start_error", None), ConfigurationError):
                    return refuse(node, str(node.start_error))  # a bad address, a robot driven already
                node.get_logger().error("could not start; the node stays up for lifecycle transitions")
        finally:
            resume_collector()

    def stop(executor) -> None:
        finish_goals(node, executor)
        node.close()
        cozmo_logger.removeHandler(handler)
        resume_collector()  # (a stop before start() ended)

    return spin_node(node, start, stop, suspend=lambda: ctrl_z_stop(node))  # Ctrl-Z: the robot stopped first


if __name__ == "__main__":
    sys.exit(main())
