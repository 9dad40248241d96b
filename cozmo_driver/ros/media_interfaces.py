"""The driver's display, audio and animation interfaces (glue; part of ``cozmo_driver_node``).

:class:`MediaInterfaces` is made by the driver node at configure and owns:

* subscriptions ``display/image`` (cozmo_interfaces/DisplayImage: an image and
  how long to show it), ``display/image_raw`` (sensor_msgs/Image, shown for
  ``display_default_duration``), ``display/face`` (sensor_msgs/Image: the face
  layer, e.g. from ``cozmo_face_node``: every frame shown, in order, one a tick;
  the same face again is a keep-alive and not queued; served on a thread of its
  own, see below) and ``audio/pcm``
  (cozmo_interfaces/AudioChunk: a PCM stream);
* actions ``play_audio`` (cozmo_interfaces/PlayAudio: a WAV file) and
  ``play_animation`` (cozmo_interfaces/PlayAnimation: a clip by name or group;
  an unknown name or group is rejected when the goal comes, the reason logged),
  one goal at a time each (a new goal preempts: the old one ends aborted with
  the reason), with feedback about ten times a second and cancel;
* the service ``list_animations`` (cozmo_interfaces/ListAnimations).

Everything reaches the robot through one :class:`~cozmo_driver.anim.av_stream.AVStream`,
which paces audio and display together at 30 frames a second on the robot
client's I/O thread; priorities on the screen: an animation, then a timed
image, then the face. Images are converted (fitted, thresholded or dithered,
run-length coded to fit one frame) in the executor before they cross to the I/O
thread; ``audio/pcm`` chunks are resampled on the I/O thread, one resampler a
stream (:meth:`~cozmo_driver.anim.av_stream.AVStream.stream_audio_at`: no seams
between chunks, and the samples it holds back go out at the stream's end).
``display/face``, which comes 30 times a second while the face changes, is not served by the main executor, whose every
wake-up rebuilds a wait set of the driver's hundred entities: like ``cmd_vel``, it
has a small node of its own, ``_<driver name>_display_face``, spun on its own thread
(:class:`~cozmo_driver.ros.subscription_thread.SubscriptionThread`; the executor
where that cannot be made), and its frames are converted there. A face node in the
same process (``cozmo_stack``) hands its frames over directly
(:meth:`MediaInterfaces.show_local_face`), without DDS between them, or, while
nothing else takes them, the display pulls them from it at each of its ticks
(:meth:`MediaInterfaces.pull_local_face`). Reports come back through a
:class:`~cozmo_driver.ros.handover.HandOver`, as the node's own data does. The
logic lives in :mod:`cozmo_driver.driver.media`, :mod:`cozmo_driver.anim` and
:mod:`cozmo_driver.anim.av_stream`; the ``play_animation`` goals (and how they share the
motors with the motion actions and the topic commands) in
:mod:`cozmo_driver.ros.animation_goals`.

Action execute callbacks are coroutines awaiting an rclpy Future that the guard
condition's callback completes, so a single-threaded executor serves them.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from cozmo_interfaces.action import PlayAnimation, PlayAudio
from cozmo_interfaces.msg import AudioChunk, DisplayImage
from cozmo_interfaces.srv import ListAnimations
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.qos import QoSProfile
from rclpy.task import Future
from sensor_msgs.msg import Image

from ..anim.library import AnimationLibrary
from ..anim.av_stream import AVReport, AVStream
from ..client.link import LinkState
from ..core.notes import STATE_WARN_PERIOD_S
from ..driver.commands import CommandError, volume_level
from ..driver.diagnostics import DiagnosticReport, av_report
from ..driver.parameters import PARAMETERS_BY_NAME
from ..log_throttle import LogThrottle, field_kind
from ..driver.speech import speak
from ..driver.media import (audio_chunk_samples, face_to_screen, image_to_screen,
                            is_empty_image, load_audio_file, screen_to_frame)
from . import qos
from .driver_support import ESTOP_REFUSAL, NOT_CONNECTED_REFUSAL, ServerRetirement, inactive_refusal
from .animation_goals import AnimationGoals
from .goal_log import goal_refusal
from .handover import HandOver
from .subscription_thread import SubscriptionThread, Unsupported
from .qos import QOS_COMMAND, QOS_FRAMES, QOS_SENSOR, QOS_STREAM

__all__ = ["MediaInterfaces"]

_WARN_PERIOD_S = 2.0
#: the longest a display/image is shown for (display_default_duration's range), s
_MAX_IMAGE_S = float(PARAMETERS_BY_NAME["display_default_duration"].maximum)


#: how many stamps of in-process face frames are remembered (their DDS copies are skipped)
_LOCAL_STAMPS = 16

@dataclass
class _Goal:
    kind: str  # "audio" or "animation"
    token: int
    handle: Any
    future: Future
    success: bool = False
    message: str = ""
    clip: str = ""
    motors: frozenset = frozenset()  # an animation's: the motion actions' resources it moves

    def resolve(self, success: bool, message: str) -> None:
        if not self.future.done():
            self.success, self.message = success, message
            self.future.set_result(True)


#: a play_audio path longer than this (Linux's PATH_MAX) names no file
_LONGEST_PATH = 4096


def _settle(future: Future, outcome: Any) -> None:
    """``future``'s result, unless it has one already (a goal ended while its file was read)."""
    if not future.done():
        future.set_result(outcome)


class MediaInterfaces(AnimationGoals):
    """See the module docstring. ``params`` is the node's parameter dict (kept up to date
    by the node, so run-time changes apply at once); ``hand_over(fn, *args)``, any thread,
    runs ``fn(*args)`` on the node's executor."""

    def __init__(self, node: Any, robot: Any, params: Dict[str, Any],
                 hand_over: Callable[..., None]) -> None:
        self.node = node
        self._hand_over = hand_over  # the node's: hand_over(fn, *args) runs fn on the executor
        self.robot = robot
        self.params = params
        self._log = node.get_logger()
        self._active = False
        self._stopped: Optional[str] = None  # why the last deactivation came (shutting down, ...)
        self._estop = bool(getattr(node, "_estop", False))  # kept by on_emergency_stop()
        self._entities: List[Any] = []
        self._goals: Dict[int, _Goal] = {}
        self._next_token = 0
        #: play_audio goals whose file is being read: (handle, the future of its outcome)
        self._loading: List[Tuple[Any, Future]] = []
        self._waiting = []  # play_animation goals waiting for the motors' calibration
        self.retirement: Optional[ServerRetirement] = None  # the servers, once released
        self._audio_loads = 0  # play_audio goals that began reading their file
        self._animation_goals = 0  # play_animation goals that got as far as their clip
        self._throttle = LogThrottle(_WARN_PERIOD_S)  # one line per kind per period, counted
        self._images_rejected = 0
        self._rejected_lock = threading.Lock()  # (the face thread counts too)
        self._chunks_rejected = 0
        self._underruns_seen = 0
        self._last_face: Optional[bytes] = None
        self._face_lock = threading.Lock()  # the face thread and a face node in this process
        #: stamps of the frames a face node of this process handed over (show_local_face)
        self._local_stamps: Deque[int] = deque(maxlen=_LOCAL_STAMPS)

        self.library = AnimationLibrary.load(list(params.get("animation_dirs") or ()),
                                             params.get("animation_groups_file") or None,
                                             audio_map_path=params.get("animation_audio_map") or None,
                                             sprite_dir=params.get("animation_sprite_dir") or None)
        for warning in self.library.warnings:
            self._log.warning(f"animations: {warning}")
        unplayable = self.library.clips_with_warnings()
        if unplayable:
            example = unplayable[0][1][0]
            self._log.info(f"animations: {len(unplayable)} clips have parts that are skipped "
                           f"(e.g. {example})")
        self._log.info(f"animations: {len(self.library.clips)} clips "
                       f"({self.library.loaded_from_dirs} from animation_dirs), "
                       f"{len(self.library.groups)} groups")

        self._handover = HandOver(node, self._on_report)  # the stream's reports, from its thread
        self.av = AVStream(robot, self._handover.put,
                           stream_prebuffer_s=float(params.get("audio_stream_buffer", 0.1)),
                           tread_hold=self.tread_hold)  # its timeout and gap follow the buffer
        node._core.animation = self  # cmd_vel and the head and lift topics preempt a clip
        # Commands: only the latest matters. The face: every frame, in order, from any
        # publisher (AVStream shows one a tick). Audio chunks: none may be lost.
        self._subscribe(DisplayImage, "display/image", self._on_display_image, QOS_COMMAND)
        self._subscribe(Image, "display/image_raw", self._on_display_image_raw, QOS_SENSOR)
        self._face_thread: Optional[SubscriptionThread] = None
        self._subscribe_face(own_thread=True)
        source = getattr(node, "local_face_source", None)
        if source is not None:
            self.pull_local_face(source)
        self._subscribe(AudioChunk, "audio/pcm", self._on_audio_pcm, QOS_STREAM)
        self._audio_server = ActionServer(
            node, PlayAudio, "play_audio", execute_callback=self._execute_audio,
            goal_callback=self._accept_goal, cancel_callback=self._cancel_goal)
        self._animation_server = ActionServer(
            node, PlayAnimation, "play_animation", execute_callback=self._execute_animation,
            goal_callback=self._accept_animation, cancel_callback=self._cancel_goal)
        self._list_service = node.create_service(ListAnimations, "list_animations", self._on_list_animations)

    # ------------------------------------------------------------------ lifecycle

    def activate(self) -> None:
        """Start pacing (the robot client's I/O thread runs)."""
        self._active = True
        self._stopped = None
        self.av.start()

    def deactivate(self, reason: str = "the driver was deactivated") -> None:
        """Stop pacing; goals end aborted with ``reason``."""
        self._active = False
        self._stopped = reason  # for goals that wait to start (a calibration, a file)
        self.av.stop(reason)
        for goal in list(self._goals.values()):
            goal.resolve(False, reason)
        self._end_loading(reason)

    def _end_loading(self, reason: str) -> None:
        """play_audio goals still waiting for their file (a FIFO no one writes, a slow disk)
        end now with ``reason``; their reading threads finish unheeded (one waiting for a
        FIFO's writer within 0.1 s, reading nothing: driver.media.open_fifo)."""
        for _, loaded in list(self._loading):
            _settle(loaded, (None, None, reason))

    def goals_running(self) -> bool:
        """Whether a goal's execute callback has not returned its result yet."""
        return bool(self._goals or self._loading or self._waiting)

    def destroy(self, reason: str = "the driver is shutting down") -> None:
        """Release everything (before the robot client stops); goals end aborted with ``reason``."""
        self.deactivate(reason)
        node = self.node
        if node._core.animation is self:
            node._core.animation = None
        face_thread, self._face_thread = self._face_thread, None
        if face_thread is not None:
            face_thread.stop()
        for sub in self._entities:
            node.destroy_subscription(sub)
        self._entities.clear()
        # destroyed once the aborted goals' results are out (a cleanup right after the
        # deactivation lost them)
        self.retirement = ServerRetirement(node, [self._audio_server, self._animation_server],
                                           self.goals_running)
        node.destroy_service(self._list_service)
        self._handover.destroy()

    def on_emergency_stop(self, engaged: bool) -> None:
        """Engaged: the animation playing is aborted (its frames stop at once), and so is one
        waiting for the motors' calibration (a release before that ends must not start it)."""
        self._estop = bool(engaged)
        if engaged:
            self.abort_animations("emergency stop engaged")

    def abort_animations(self, reason: str) -> None:
        """The animation playing ends aborted with ``reason`` (its frames stop at once), and
        so does one waiting for the motors' calibration."""
        for goal in list(self._goals.values()):
            if goal.kind == "animation":
                self.av.cancel_clip(goal.token, reason)
        for waiting in self._waiting:
            if waiting.preempted is None:
                waiting.preempted = reason

    # ------------------------------------------------------------------ helpers

    def _subscribe_face(self, own_thread: bool) -> None:
        if own_thread:
            try:
                self._face_thread = SubscriptionThread(
                    self.node, "display/face", lambda node, topic, cb: qos.create_subscription(
                        node, Image, topic, cb, QOS_FRAMES),
                    self._on_display_face, self._on_face_thread_failure, suffix="display_face")
                return
            except Unsupported as exc:
                self._log.info(f"display/face served by the executor: {exc}")
        self._subscribe(Image, "display/face", self._on_display_face, QOS_FRAMES)

    def _on_face_thread_failure(self, exc: BaseException) -> None:
        """The face thread: spinning failed; the executor takes display/face over."""
        self._log.error(f"display/face thread failed ({exc!r}): display/face moves to the executor")
        self._hand_over(self._move_face_to_executor)

    def _move_face_to_executor(self) -> None:
        thread, self._face_thread = self._face_thread, None
        if thread is not None:
            thread.stop()
            self._subscribe_face(own_thread=False)

    def _rejected(self) -> None:
        with self._rejected_lock:
            self._images_rejected += 1

    def _subscribe(self, msg_type, topic: str, callback, profile: QoSProfile) -> None:
        sub = qos.create_subscription(self.node, msg_type, topic, callback, profile)
        self._entities.append(sub)

    def _warn(self, key: str, text: str, period: Optional[float] = None) -> None:
        # one kind per field a refusal names ("display/image refused: display/image.image.step
        # = ..."): a user who mends one field and gets another wrong hears of it at once
        if " refused: " in text:
            key = field_kind(text)
        line = self._throttle.line(key, text, time.monotonic(), period)
        if line is not None:
            self._log.warning(line)

    def _refuse_for_state(self, key: str, text: str) -> None:
        """A refusal for the driver's state (not active, not connected), which a publisher
        repeats for as long as that lasts: every STATE_WARN_PERIOD_S, as the core's."""
        self._warn(key, text, STATE_WARN_PERIOD_S)

    def say_overdue(self) -> None:
        """The warnings held back of each kind that then fell quiet (the node's 1 s timer)."""
        for _, line, _ in self._throttle.overdue(time.monotonic()):
            self._log.warning(line)

    def say_held_back(self) -> None:
        """Every warning held back, now: before "activated" or "connected again" (the core
        calls it through DriverStreams.say_held_back), not a second after it."""
        for _, line, _ in self._throttle.flush(time.monotonic()):
            self._log.warning(line)

    def _connected(self) -> bool:
        return self.robot.state is LinkState.READY

    def _axes(self) -> Optional[Tuple[float, float]]:
        """(head rad, lift m) where the driver shows them (each held while its motor
        calibrates: the robot's own reading means nothing then), or None before a state."""
        if self.robot.robot_state is None:
            return None
        return self.node._core.shown_axes()

    def _refusal(self, motion: bool = False) -> Optional[str]:
        if not self._active:
            return inactive_refusal(self.node)
        if motion and self._estop:
            return ESTOP_REFUSAL
        if not self._connected():
            return NOT_CONNECTED_REFUSAL
        return None

    def _after_wait(self, motion: bool = False) -> Optional[str]:
        """Why a goal that waited to start (for a calibration, for its file) cannot: a
        deactivation meanwhile gives its own reason ("the driver is shutting down")."""
        if not self._active and self._stopped:
            return self._stopped
        return self._refusal(motion)

    # ------------------------------------------------------------------ display

    def _show(self, image: Image, duration: float, topic: str, duration_field: Optional[str]) -> None:
        if not self._active:
            self._rejected()
            self._refuse_for_state("display_inactive", f"{topic} refused: {inactive_refusal(self.node)}")
            return
        if not self._connected():  # it would be shown after a reconnection, which no image survives
            self._rejected()
            self._refuse_for_state("display_link", f"{topic} refused: {NOT_CONNECTED_REFUSAL}")
            return
        if duration_field is not None and not duration >= 0.0:  # NaN, below 0 or -inf
            what = "not a number of seconds" if math.isnan(duration) else "below 0 s"
            self._rejected()
            self._warn(topic, f"{topic} refused: {duration_field} = {duration}: {what}; give the "
                       "seconds to show it, >= 0 (0: until replaced)")
            return
        # beyond an hour (+inf too) is clamped: a timed image keeps the 30 fps stream running
        if duration > _MAX_IMAGE_S:
            self._warn(f"{duration_field} long", f"{duration_field} = {duration:g} s is beyond "
                       f"{_MAX_IMAGE_S:g} s: shown for {_MAX_IMAGE_S:g} s (0: until replaced, "
                       "sent once)")
            duration = _MAX_IMAGE_S
        if is_empty_image(image.width, image.height):
            self.av.show_image(None)
            return
        field = f"{topic}.image" if duration_field is not None else topic
        try:
            screen = image_to_screen(image.width, image.height, image.encoding, image.step,
                                     image.is_bigendian, image.data, bool(self.params["display_dither"]),
                                     field)
        except CommandError as exc:
            self._rejected()
            self._warn(topic, f"{topic} refused: {exc}")
            return
        data, _ = screen_to_frame(screen)
        self.av.show_image(data, float(duration) or None)

    def _on_display_image(self, msg: DisplayImage) -> None:
        self._show(msg.image, float(msg.duration), "display/image", "display/image.duration")

    def _on_display_image_raw(self, msg: Image) -> None:
        self._show(msg, float(self.params["display_default_duration"]), "display/image_raw", None)

    def show_local_face(self, screen: Any, stamp_ns: int) -> None:
        """A face frame of a face node in this process (``cozmo_stack``), handed over without
        DDS: the ``(64, 128)`` bool screen, or the ``(32, 128)`` rows of it the robot shows,
        and the frame's stamp (ns). The copy of it that comes on ``display/face`` when that
        node also publishes (for another subscriber) is known by its stamp and not shown
        again. Any thread."""
        data, _ = screen_to_frame(screen)
        with self._face_lock:
            self._local_stamps.append(int(stamp_ns))
            self._set_face(data)

    def pull_local_face(self, source: Optional[Callable[[float], Any]]) -> None:
        """Pull the frames of a face node in this process (``cozmo_stack``;
        ``FaceNode.pull_frame``) at each tick of the display, on the I/O thread:
        ``source(now)`` gives a screen as :meth:`show_local_face` takes it, or None (nothing
        new); the frame goes out on the tick that pulled it. None: stop pulling."""
        if source is None:
            self.av.set_face_source(None)
            return

        def pull(now: float) -> Optional[bytes]:
            screen = source(now)
            if screen is None:
                return None
            data, _ = screen_to_frame(screen)
            with self._face_lock:
                if data == self._last_face:
                    return None  # the same face again (a keep-alive)
                self._last_face = data
            return data

        self.av.set_face_source(pull)

    def _set_face(self, data: Optional[bytes]) -> None:
        """(under the face lock) The face layer's next frame, unless it is the same again."""
        if data == self._last_face:
            return  # the same face again (a keep-alive)
        self._last_face = data
        self.av.set_face(data)

    def _on_display_face(self, msg: Image) -> None:
        stamp = msg.header.stamp
        with self._face_lock:
            if self._local_stamps and stamp.sec * 10**9 + stamp.nanosec in self._local_stamps:
                return  # handed over in this process already
        if is_empty_image(msg.width, msg.height):
            data = None
        else:
            try:
                screen = face_to_screen(msg.width, msg.height, msg.encoding, msg.step, msg.is_bigendian,
                                        msg.data, "display/face")
            except CommandError as exc:
                self._rejected()
                self._warn("display/face", f"display/face refused: {exc}")
                return
            data, _ = screen_to_frame(screen)
        with self._face_lock:
            self._set_face(data)

    # ------------------------------------------------------------------ audio stream

    def _on_audio_pcm(self, msg: AudioChunk) -> None:
        if not self._active:
            self._chunks_rejected += 1
            self._refuse_for_state("audio_inactive", f"audio/pcm refused: {inactive_refusal(self.node)}")
            return
        if not self._connected():  # it would vanish: nothing plays it
            self._chunks_rejected += 1
            self._refuse_for_state("audio_link", f"audio/pcm refused: {NOT_CONNECTED_REFUSAL}")
            return
        try:
            mono = audio_chunk_samples(msg.sample_rate, msg.channels, msg.samples,
                                       max_s=self.av.max_queue_s)
        except CommandError as exc:
            self._chunks_rejected += 1
            self._warn("audio/pcm", f"audio/pcm refused: {exc}")
            return
        self.av.stream_audio_at(mono, int(msg.sample_rate))

    # ------------------------------------------------------------------ goals

    def _accept_goal(self, goal_request) -> GoalResponse:
        return GoalResponse.ACCEPT  # checked when it runs, so that the result can say why

    def _cancel_goal(self, goal_handle) -> CancelResponse:
        if self._cancel_waiting(goal_handle):
            return CancelResponse.ACCEPT
        for handle, loaded in self._loading:
            if handle is goal_handle:
                _settle(loaded, (None, None, "cancelled"))  # now, not once its file is read
                return CancelResponse.ACCEPT
        for goal in self._goals.values():
            if goal.handle is goal_handle:
                if goal.kind == "audio":
                    self.av.cancel_audio(goal.token, "cancelled")
                else:
                    self.av.cancel_clip(goal.token, "cancelled")
                return CancelResponse.ACCEPT
        return CancelResponse.REJECT

    def _new_goal(self, kind: str, handle: Any) -> _Goal:
        for old in list(self._goals.values()):
            if old.kind == kind:
                old.resolve(False, f"preempted by a new {'play_audio' if kind == 'audio' else 'play_animation'} goal")
        self._next_token += 1
        goal = _Goal(kind, self._next_token, handle, Future())
        self._goals[goal.token] = goal
        return goal

    def _refused(self, handle: Any, result: Any, action: str, message: str) -> Any:
        """A goal that cannot run ends aborted with the reason, which the log says too (the
        first of a kind at once, the others counted: goal_log)."""
        self._goal_warning(action, "aborted", message)
        return self._end(handle, result, False, message)

    def _goal_warning(self, action: str, verdict: str, reason: str) -> None:
        line = goal_refusal(self._throttle, self.node, action, verdict, reason)
        if line is not None:
            self._log.warning(line)

    @staticmethod
    def _end(handle: Any, result: Any, success: bool, message: str) -> Any:
        result.success = bool(success)
        result.message = message
        try:
            if success:
                handle.succeed()
            elif handle.is_cancel_requested:
                handle.canceled()
            else:
                handle.abort()
        except Exception:  # noqa: BLE001 - the server is gone (shutting down): the result stands
            pass
        return result

    async def _run(self, goal: _Goal, result: Any) -> Any:
        try:
            await goal.future
        finally:
            self._goals.pop(goal.token, None)
        # The end is in the log as the motion goals' is: an abort (preempted, e-stop, lost
        # robot) as a warning, with its reason.
        action = "play_audio" if goal.kind == "audio" else "play_animation"
        if goal.success:
            self._log.info(f"{action}: succeeded: {goal.message}")
        elif goal.handle.is_cancel_requested:  # ends CANCELED (_end), whatever ended it
            said = "" if goal.message.startswith("cancel") else f" ({goal.message})"
            self._log.info(f"{action}: canceled{said}")
        else:
            self._log.warning(f"{action}: aborted: {goal.message}")
        return self._end(goal.handle, result, goal.success, goal.message)

    async def _execute_audio(self, handle) -> PlayAudio.Result:
        request = handle.request
        result = PlayAudio.Result()
        problem = self._refusal()
        if problem is None and math.isnan(request.volume):  # +-inf: above 1, below 0 (PlayAudio.action)
            problem = f"volume = {request.volume}: not a number (0..1 sets the volume, < 0 leaves it as it is)"
        if problem is None and len(request.path) > _LONGEST_PATH:
            problem = (f"path {request.path[:40]!r}... has {len(request.path)} characters: no "
                       f"file's path is longer than {_LONGEST_PATH}")
        if problem is None and bool(request.path) == bool(request.text):
            problem = ("give either path (a WAV file) or text (words to say), not both"
                       if request.path else "give path (a WAV file) or text (words to say)")
        if problem is not None:
            return self._refused(handle, result, "play_audio", problem)
        self._audio_loads += 1
        mine = self._audio_loads
        loaded = Future()
        self._end_loading("preempted by a new play_audio goal (while this one's file was read)")
        entry = (handle, loaded)
        self._loading.append(entry)
        speech = None if request.path else (request.text, self.params["speech_voice"],
                                             self.params["speech_speed"], self.params["speech_pitch"])
        try:  # read (or spoken), decoded and resampled on a thread: the executor serves the
            # emergency stop meanwhile
            threading.Thread(target=self._load_audio, args=(request.path, loaded, speech),
                             name="play_audio file", daemon=True).start()
            pcm, info, error = await loaded
        finally:
            self._loading.remove(entry)
        if error is None and mine != self._audio_loads:
            error = "preempted by a new play_audio goal (while this one's file was read)"
        if handle.is_cancel_requested:  # while its file was read or its text spoken: logged as _run does
            self._log.info("play_audio: canceled")
            return self._end(handle, result, False, "cancelled")
        error = error or self._after_wait()  # the driver may have been deactivated meanwhile
        if error is not None:
            return self._refused(handle, result, "play_audio", error)
        if request.volume >= 0.0:  # < 0, -inf too, leaves the volume as it is
            volume = float(request.volume)
            if volume > 1.0:  # +inf too
                self._log.warning(f"play_audio goal volume = {volume:.4g} is outside [0, 1]: clamped to 1")
                volume = 1.0
            level, _ = volume_level(volume)
            self.robot.post_volume(level)
            # Keep the driver's own record, which it re-applies after a reconnection.
            if hasattr(self.node, "_volume"):
                self.node._volume = level
        goal = self._new_goal("audio", handle)
        if speech is not None:
            words = " ".join(request.text.split())
            self._log.info(f"play_audio: saying {words[:60]!r}{'...' if len(words) > 60 else ''} "
                           f"({info.duration_s:.2f} s, voice {speech[1]})")
        else:
            self._log.info(f"play_audio: {request.path} ({info.duration_s:.2f} s, "
                           f"{info.sample_rate_hz} Hz, {info.channels} "
                           f"channel{'s' if info.channels > 1 else ''})")
            if info.unfinished_header:
                self._log.warning(f"play_audio: {request.path}: its header says it holds no samples, but "
                                  f"{info.duration_s:.2f} s of them follow it (a recording whose header was "
                                  "never finished?): they are played")
        self.av.play_audio(goal.token, pcm)
        return await self._run(goal, result)

    def _load_audio(self, path: str, loaded: Future, speech: Optional[tuple] = None) -> None:
        """A thread of its own: reading, decoding and resampling a long file (or waiting on a
        FIFO), or speaking ``speech`` (text, voice, speed, pitch), must not hold the
        executor. ``loaded`` gets (pcm, info, None) or (None, None, the reason), set on the
        executor."""
        try:
            pcm, info = speak(*speech) if speech is not None else load_audio_file(path, loaded.done)
            outcome = (pcm, info, None)
        except CommandError as exc:
            outcome = (None, None, str(exc))
        except Exception as exc:  # noqa: BLE001 - reported as the goal's end, never lost
            outcome = (None, None, f"{path}: {exc!r}")
        self._hand_over(_settle, loaded, outcome)

    # ------------------------------------------------------------------ reports (I/O -> executor)

    def _on_report(self, report: AVReport) -> None:
        """A report of the stream, handed over to the executor: feedback or the goal's end."""
        goal = self._goals.get(report.token)
        if goal is None or goal.future.done():
            return  # a goal already ended (preempted, deactivated)
        if report.done:
            goal.resolve(report.success, report.message)
            return
        handle = goal.handle
        if not handle.is_active:
            return
        if goal.kind == "audio":
            feedback = PlayAudio.Feedback()
            feedback.progress = float(report.progress)
            feedback.elapsed = float(report.elapsed_s)
        else:
            feedback = PlayAnimation.Feedback()
            feedback.progress = float(report.progress)
            feedback.clip = report.clip
        handle.publish_feedback(feedback)

    # ------------------------------------------------------------------ services and diagnostics

    def _on_list_animations(self, request, response):
        response.names = self.library.names()
        response.groups = self.library.group_names()
        return response

    def report(self) -> DiagnosticReport:
        counters = self.av.counters()
        underruns = int(counters["underruns (ticks sent late)"])
        new, self._underruns_seen = underruns - self._underruns_seen, underruns
        playing = []
        for goal in self._goals.values():
            playing.append(f"animation {goal.clip}" if goal.kind == "animation" else "audio file")
        if not playing:
            playing.append("idle" if not counters["audio queued (s)"] else "audio stream")
        return av_report(self._active, self._connected(), counters, max(0, new), ", ".join(playing),
                         len(self.library.clips), len(self.library.groups), self._images_rejected,
                         self._chunks_rejected)
