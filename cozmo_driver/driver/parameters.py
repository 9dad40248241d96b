"""Every parameter of the driver node, declared once: name, default, unit, range,
description, and whether it may change while the node is configured.

The node declares its ROS parameters from :data:`PARAMETERS` (descriptions and
ranges go into the ParameterDescriptor), validates every change with
:func:`validate_change`, and the table of docs/driver.md and ``config/cozmo.yaml`` list the
same entries (a test keeps them in step). "Static" parameters take effect at
the next ``configure`` and are refused while the node is configured; "dynamic"
ones apply at once. Pure.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["ParamSpec", "PARAMETERS", "PARAMETERS_BY_NAME", "defaults", "validate_value",
           "validate_all", "validate_change", "full_frame_id"]


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: Any
    description: str
    unit: str = ""
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    #: may change while the node is configured (else: only while unconfigured)
    dynamic: bool = False
    #: the value names a frame (checked for REP-105 form)
    frame: bool = False
    #: read once, when the node starts (a change later is refused: it would do nothing)
    startup: bool = False

    @property
    def type_name(self) -> str:
        return {bool: "bool", int: "int", float: "double", str: "string",
                list: "string[]"}[type(self.default)]


PARAMETERS: Tuple[ParamSpec, ...] = (
    # --- connection
    ParamSpec("robot_ip", "172.31.1.1",
              "IPv4 address or host name of the robot (its Wi-Fi access point puts it at 172.31.1.1)"),
    ParamSpec("robot_port", 5551, "UDP port of the robot", minimum=1, maximum=65535),
    ParamSpec("local_ip", "0.0.0.0", "Local address the UDP socket binds to (0.0.0.0: every interface)"),
    ParamSpec("local_port", 0, "Local UDP port (0: any free port)", minimum=0, maximum=65535),
    ParamSpec("peer_timeout", 3.0, "Silence after which the robot is declared lost", "s", 0.5, 60.0),
    ParamSpec("ready_timeout", 5.0, "A connection whose robot does not stream its state this long "
              "after answering, or stops streaming it this long later, is dropped and retried "
              "(a robot that dropped the link still answers pings)", "s", 0.5, 60.0),
    ParamSpec("reconnect_min", 0.5, "Wait before the first reconnection attempt after a loss; "
              "doubled after every failed attempt", "s", 0.05, 60.0),
    ParamSpec("reconnect_max", 5.0, "Longest wait between reconnection attempts", "s", 0.05, 300.0),
    ParamSpec("autostart", True, "Configure and activate by itself at start-up (false: wait for "
              "lifecycle transitions)", startup=True),
    # --- frames
    ParamSpec("frame_prefix", "", "Prepended to every frame id as it is, e.g. 'robot1/' for "
              "several robots; the bring-up sets it from its frame_prefix argument (auto: the "
              "namespace and '/'), which the description's frames follow too", frame=True),
    ParamSpec("odom_frame", "odom", "Odometry frame (parent of base_frame)", frame=True),
    ParamSpec("base_frame", "base_footprint", "Robot frame on the ground (child of odom_frame)", frame=True),
    ParamSpec("base_link_frame", "base_link", "Robot body frame, used in status and events headers "
              "and accepted as a cmd_vel frame", frame=True),
    ParamSpec("imu_frame", "imu_link", "Frame of imu/data", frame=True),
    ParamSpec("camera_frame", "camera_optical_frame", "Frame of the camera images (optical "
              "convention: z forward, x right, y down)", frame=True),
    ParamSpec("publish_tf", True, "Broadcast odom_frame -> base_frame on /tf"),
    # --- motion
    ParamSpec("cmd_vel_stamped", False, "cmd_vel is geometry_msgs/TwistStamped (newer Nav2) instead of Twist; "
              "one stamped more than cmd_vel_timeout before or after the driver's clock is refused as "
              "stale (a zero stamp is taken)"),
    ParamSpec("cmd_vel_timeout", 0.5, "Stop the treads when no cmd_vel came for this long (0.0: "
              "never; a change applies to the drive in progress)", "s", 0.0, 10.0, dynamic=True),
    ParamSpec("max_wheel_speed", 0.2, "Fastest tread speed for cmd_vel, faster commands scaled down "
              "keeping their curvature; also the fastest speed of drive_straight, go_to_pose and "
              "follow_path goals (and segments), faster ones clamped with a warning", "m/s", 0.01, 0.2,
              dynamic=True),
    ParamSpec("wheel_acceleration", 0.0, "Tread acceleration for cmd_vel (0: none, the robot takes "
              "the new speed at once, as fast as the treads go)",
              "m/s^2", 0.0, 10.0, dynamic=True),
    ParamSpec("head_max_speed", 10.0, "Head speed of head/angle commands without max_speed, and the "
              "limit of every head speed (a change applies to a velocity motion in progress: one "
              "faster than a lowered limit is sent again at it, with a warning; a position move keeps "
              "the speed it was sent with)", "rad/s", 0.1, 15.0, dynamic=True),
    ParamSpec("head_acceleration", 20.0, "Head acceleration of head/angle commands", "rad/s^2",
              1.0, 100.0, dynamic=True),
    ParamSpec("lift_max_speed", 3.0, "Lift arm speed of lift/height commands without max_speed, "
              "and the limit of every lift speed (a change applies to a velocity motion in progress: "
              "one faster than a lowered limit is sent again at it, with a warning; a position move "
              "keeps the speed it was sent with)", "rad/s", 0.1, 10.0, dynamic=True),
    ParamSpec("lift_acceleration", 20.0, "Lift arm acceleration of lift/height commands", "rad/s^2",
              1.0, 100.0, dynamic=True),
    ParamSpec("stop_on_cliff", True, "Let the robot stop its treads by itself when its cliff sensor "
              "(one, under the front) loses the floor while it drives forwards, and hold cmd_vel's "
              "forward motion and refuse forward goals and animations while it sees no floor (an "
              "animation driving forwards then ends); nothing stops it reversing off an edge",
              dynamic=True),
    ParamSpec("stop_when_picked_up", True, "Stop the treads when the robot reports it is picked up "
              "(or falling), and hold cmd_vel until it is put down on them (an animation that drives "
              "them ends, and is refused meanwhile; tread goals end, and are refused, either way); "
              "Anki's firmware would keep driving them in the air", dynamic=True),
    # --- camera
    ParamSpec("camera_enabled", True, "Stream camera images (QVGA, about 15 per second)", dynamic=True),
    ParamSpec("camera_on_demand", True, "Have the robot stream its camera only while camera/image_raw, "
              "its compressed form or camera/camera_info has a subscriber (false: whenever "
              "camera_enabled)", dynamic=True),
    ParamSpec("camera_with_state", False, "Publish each camera image right after the odom of the "
              "robot state that follows it, so that a program taking odom and the camera wakes "
              "once for both (less CPU for it); images then come up to one state period (about "
              "30 ms, 15 ms on average) later. Their stamps do not change", dynamic=True),
    ParamSpec("camera_color", False, "Colour images (rgb8) instead of grey (mono8)", dynamic=True),
    ParamSpec("camera_auto_exposure", True, "The driver sets gain and exposure from each image's "
              "brightness, as Anki's engine did (Cozmo has no automatic exposure of its own), "
              "starting from camera_gain and camera_exposure_ms; false: those two, fixed",
              dynamic=True),
    ParamSpec("camera_auto_exposure_target", 128, "Median grey value camera_auto_exposure aims for "
              "(0 black, 255 white)", "", 16, 240, dynamic=True),
    ParamSpec("camera_gain", 1.0, "Sensor gain: fixed with camera_auto_exposure false, else where "
              "the automatic exposure starts (it uses 1..3.98); the robot keeps it in 1/64 steps",
              "", 0.1, 3.98, dynamic=True),
    ParamSpec("camera_exposure_ms", 30, "Exposure time: fixed with camera_auto_exposure false, else "
              "where it starts", "ms", 1, 67, dynamic=True),
    ParamSpec("camera_info_url", "", "camera_info_manager YAML (file:///path.yaml; ${NAME}: the camera's "
              "name, cozmo_camera after the namespace, e.g. robot1_cozmo_camera) overriding the robot's own "
              "calibration, and where camera/set_camera_info saves one; empty: camera_info_manager's "
              "default, file://${ROS_HOME}/camera_info/${NAME}.yaml (read if it exists, else the robot's "
              "calibration is used)"),
    # --- display, audio and animations
    ParamSpec("display_dither", True, "Dither images of display/image and display/image_raw "
              "(Floyd-Steinberg) when fitting them to the one-bit screen; false: threshold at "
              "half brightness", dynamic=True),
    ParamSpec("display_default_duration", 0.0, "How long an image of display/image_raw is shown "
              "(0: until the next one replaces it)", "s", 0.0, 3600.0, dynamic=True),
    ParamSpec("audio_stream_buffer", 0.1, "Audio of audio/pcm buffered before a stream starts to "
              "play: the lateness of chunks it absorbs, and the delay it adds", "s", 0.0, 2.0),
    ParamSpec("speech_voice", "en-us", "espeak-ng voice of play_audio's text (espeak-ng --voices "
              "lists them: en-gb, de, fr, en+f3, ...; set at run time, one espeak-ng does not "
              "have is refused)", dynamic=True),
    ParamSpec("speech_speed", 150, "Speed of play_audio's text", "words/min", 80, 450,
              dynamic=True),
    ParamSpec("speech_pitch", 70, "Pitch of play_audio's text (espeak-ng's 0..99; 50 is its "
              "normal voice, higher sounds more like Cozmo)", "", 0, 99, dynamic=True),
    ParamSpec("animation_dirs", [], "Directories of animation clips (our YAML/JSON, the Cozmo "
              "app's .bin or JSON), searched recursively, besides the built-in ones"),
    ParamSpec("animation_groups_file", "", "Animation groups: a JSON file, or a directory of the "
              "app's animationGroups files; empty: none"),
    ParamSpec("animation_sprite_dir", "", "The app's sprite faces: a directory with one folder of "
              "PNG frames per sequence (cozmo_resources/assets/faceAnimations), for the "
              "FaceAnimation keyframes of app clips; empty: those are skipped"),
    ParamSpec("animation_audio_map", "", "Sounds for app clips: a YAML or JSON file mapping Wwise "
              "event ids to WAV files ({1234567: beep.wav}, relative to the file), for their "
              "RobotAudio keyframes; empty: those are skipped"),
    ParamSpec("animation_body_in_stream", False, "Clips drive the treads with AnimBody in the "
              "animation stream, in step with their face and sound, as Anki's engine did (false: "
              "DriveWheels, which acts at once and so leads the face and sound by the frames the "
              "robot has buffered, up to 0.23 s)", dynamic=True),
    # --- cubes, charger and lights
    ParamSpec("auto_connect_cubes", True, "Connect the three light cubes by themselves (one of each "
              "type, the strongest signal) and reconnect them when they drop; false: only the "
              "connect_object service connects (turning it off disconnects nothing: a cube it "
              "connected is let go when it drops, its radio slot emptied)", dynamic=True),
    ParamSpec("auto_connect_charger", False, "Connect the charger by itself like the cubes (it has "
              "only lights to offer); false: as auto_connect_cubes false, for the charger", dynamic=True),
    ParamSpec("object_timeout", 5.0, "An object neither connected nor advertised for this long leaves "
              "the objects list (DISAPPEARED)", "s", 1.0, 600.0, dynamic=True),
    ParamSpec("object_connect_timeout", 3.0, "A connection or disconnection of an object that the robot "
              "has not confirmed this long after the request has failed", "s", 0.5, 60.0, dynamic=True),
    ParamSpec("object_reconnect_min", 1.0, "Wait before reconnecting an object after a failed attempt "
              "or a drop; doubled after every further failure", "s", 0.1, 60.0, dynamic=True),
    ParamSpec("object_reconnect_max", 10.0, "Longest wait between attempts to reconnect an object",
              "s", 0.1, 600.0, dynamic=True),
    ParamSpec("filter_object_events", True, "Publish the cubes' taps and moves as Anki's engine "
              "did: taps of intensity 60 or less dropped, of the taps within 75 ms only the "
              "strongest (75 ms later), a cube's moves for 0.5 s after a tap dropped (the tap shook "
              "it), the charger's moves dropped; false: all the robot reports, at once", dynamic=True),
    ParamSpec("light_animation_file", "", "YAML file of more light animations for "
              "play_light_animation (format in docs/objects.md); empty: the built-in ones only"),
)

PARAMETERS_BY_NAME: Dict[str, ParamSpec] = {p.name: p for p in PARAMETERS}


def defaults() -> Dict[str, Any]:
    return {p.name: list(p.default) if isinstance(p.default, list) else p.default for p in PARAMETERS}


def _check_frame(value: str) -> Optional[str]:
    if value.startswith("/"):
        return "frame ids must not start with '/' (tf2 rejects them)"
    if any(c.isspace() for c in value):
        return "frame ids must not contain white space"
    return None


def validate_value(name: str, value: Any) -> Optional[str]:
    """Why ``value`` is not acceptable for parameter ``name``, or None."""
    spec = PARAMETERS_BY_NAME.get(name)
    if spec is None:
        return None  # not ours (e.g. qos_overrides.*, use_sim_time)
    expected = type(spec.default)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if expected is list and isinstance(value, (tuple, array)):  # rclpy's arrays of numbers
        value = list(value)
    if type(value) is not expected:
        return f"{name} must be a {spec.type_name}, got {type(value).__name__}"
    if expected in (int, float):
        if not math.isfinite(value):
            return f"{name} must be finite"
        if spec.minimum is not None and value < spec.minimum or \
                spec.maximum is not None and value > spec.maximum:
            unit = f" {spec.unit}" if spec.unit else ""
            return f"{name} = {value} is outside [{spec.minimum}, {spec.maximum}]{unit}"
    if spec.frame:
        problem = _check_frame(value)
        if problem:
            return f"{name} = {value!r}: {problem}"
        if name != "frame_prefix" and not value:
            return f"{name} must not be empty"
    if expected is list and not all(isinstance(v, str) for v in value):
        return f"{name} must be a list of strings"
    if name in ("robot_ip", "local_ip") and not value.strip():
        return f"{name} must not be empty"
    if name == "speech_voice":
        from .speech import check_voice
        problem = check_voice(value)
        if problem:
            return f"{name}: {problem}"
    return None


def validate_all(values: Mapping[str, Any]) -> Optional[str]:
    """Per-value checks, then the checks that involve several parameters."""
    for name, value in values.items():
        problem = validate_value(name, value)
        if problem:
            return problem
    for lo_name, hi_name in _MIN_MAX_PAIRS:
        lo, hi = values.get(lo_name), values.get(hi_name)
        if lo is not None and hi is not None and lo > hi:
            return f"{lo_name} ({lo} s) must not exceed {hi_name} ({hi} s)"
    odom = values.get("odom_frame")
    for name in _ROBOT_FRAMES:
        if odom is not None and values.get(name) == odom:
            return (f"odom_frame and {name} are both {odom!r}: odom_frame stays where the robot "
                    f"started, {name} moves with the robot (tf2 refuses a transform from a frame "
                    "to itself, and a tree through which a frame is its own ancestor): give them "
                    "different names")
    return None


#: the frames on the robot: none may be odom_frame, which the robot moves in
_ROBOT_FRAMES = ("base_frame", "base_link_frame", "imu_frame", "camera_frame")

#: parameters whose first must not exceed the second
_MIN_MAX_PAIRS = (("reconnect_min", "reconnect_max"), ("object_reconnect_min", "object_reconnect_max"))


def _pair_hint(problem: str, changes: Mapping[str, Any]) -> str:
    """``problem`` with, if it is a min/max pair's and only one of them changes, which to
    change first: rclpy checks each parameter of a SetParameters call (ros2 param set, ros2 param
    load) on its own, so a new min above the old max is refused even with its max in the call."""
    for lo, hi in _MIN_MAX_PAIRS:
        if problem.startswith(f"{lo} (") and (lo in changes) != (hi in changes):
            first = f"raise {hi}" if lo in changes else f"lower {lo}"
            return (f"{problem} ({first} first: ros2 param set and ros2 param load have each parameter "
                    "checked on its own, a file's in its order; or set both in one call of the node's "
                    "set_parameters_atomically service, or give both at start)")
    return problem


def _address_change_problem(current: Mapping[str, Any], changes: Mapping[str, Any]) -> Optional[str]:
    """Why an address set at run time (robot_ip, local_ip, after a clean-up) is refused, or None:
    judged as the link judges it when it opens (nothing resolved), so that a mistyped one is
    refused when set, not first at activate. (At start the link's own checks refuse them.)"""
    from ..addresses import address_problem
    for name in ("robot_ip", "local_ip"):
        value = changes.get(name)
        if not isinstance(value, str) or value == current.get(name) or not value.strip():
            continue  # unchanged, or the per-value checks say what is wrong
        if value != value.strip():
            return f"{name} = {value!r}: no spaces around an address"
        problem = address_problem(value, destination=name == "robot_ip")
        if problem:
            return f"{name}: {problem}"
    return None


def validate_change(current: Mapping[str, Any], changes: Mapping[str, Any],
                    configured: bool, active: bool = True, finalized: bool = False) -> Optional[str]:
    """Why a set of changes is refused (None: accepted). Static parameters may
    change only while the node is not configured (``active``: it is active too); start-up
    ones never; none once the node is shut down (``finalized``: it configures no more)."""
    if finalized:
        for name, value in changes.items():
            if name in PARAMETERS_BY_NAME and value != current.get(name):
                return (f"{name}: the node is shut down (lifecycle finalized) and takes no new value: "
                        "restart it with the new one")
    for name, value in changes.items():
        spec = PARAMETERS_BY_NAME.get(name)
        if spec is not None and spec.startup and value != current.get(name):
            return (f"{name} is read once, when the node starts: give it there (-p {name}:="
                    f"{str(value).lower()}, or the parameter file)")
    if configured:
        for name, value in changes.items():
            spec = PARAMETERS_BY_NAME.get(name)
            if spec is not None and not spec.dynamic and value != current.get(name):
                steps = "deactivate and clean up the node" if active else "clean up the node"
                return (f"{name} takes effect at configure: {steps} first (or restart it with "
                        "the new value)")
    problem = _address_change_problem(current, changes)
    if problem:
        return problem
    merged = dict(current)
    merged.update(changes)
    problem = validate_all({k: merged[k] for k in merged if k in PARAMETERS_BY_NAME})
    voice = changes.get("speech_voice")
    if problem is None and voice is not None and voice != current.get("speech_voice"):
        # a voice espeak-ng does not have is refused when set, not at the next text said
        from .speech import voice_missing
        missing = voice_missing(voice)
        if missing:
            return f"speech_voice: {missing}"
    return problem if problem is None else _pair_hint(problem, changes)


def full_frame_id(prefix: str, frame: str) -> str:
    """The frame id with the prefix (no leading '/')."""
    return (prefix + frame).lstrip("/")
