"""Bring up one Cozmo: driver, robot description, and optionally the simulator, RViz,
the face and the behaviour nodes.

    ros2 launch cozmo_driver cozmo.launch.py                              # robot at 172.31.1.1
    ros2 launch cozmo_driver cozmo.launch.py use_sim:=true rviz:=true
    ros2 launch cozmo_driver cozmo.launch.py namespace:=robot1 robot_ip:=...
    ros2 launch cozmo_driver cozmo.launch.py use_sim:=true namespace:=robot2 sim_port:=5552
    ros2 launch cozmo_driver cozmo.launch.py use_sim:=true enable_face:=true one_process:=true
    ros2 launch cozmo_driver cozmo.launch.py --show-args

The arguments, their defaults, descriptions and choices, and the processes come from
cozmo_driver/bringup_plan.py, which cozmo_bringup (the same bring-up without
the launch system) reads too. This file only turns plan entries into launch
actions (the one-process stack of one_process:=true: ExecuteProcess of cozmo_stack with a
--ros-args section per node): each node gets the plan's parameter files (bringup_plan.parameter_files),
never a parameter dict for launch_ros to type, and every process the plan's
environment (bringup_plan.child_environment: it ends when the launch dies). The programs
that are not ours (robot_state_publisher, RViz) do not read that environment: they are
started through ``python -m cozmo_driver.lifeline`` (lifeline_prefix), which asks Linux
to end them with the launch too.

``ros2 launch`` sets any ``name:=value`` as a launch configuration, declared or not;
here a name on the command line that is not an argument of the plan is refused
(a misspelt ``use_simm:=true`` would drive the real robot), with a close match
suggested. Only when this file is the one ``ros2 launch`` was given (the one its first
launch description includes): included by another launch file, the command line holds
that file's arguments.

launch and launch_ros are imported inside the functions, so that the module imports
where they are not installed.
"""

import atexit
import os
import re
import shlex
import shutil
import sys

from cozmo_driver import bringup_plan as plan

#: launch configurations that ros2 launch itself puts on the command line
#: (``--launch-prefix``, ``--launch-prefix-filter``)
LAUNCH_OWN_ARGUMENTS = ("launch-prefix", "launch-prefix-filter")
#: the local (context.locals) in which refuse_unknown_arguments leaves launch_setup the
#: names given on the command line, or None when the command line is not ours
GIVEN_LOCAL = "cozmo_launch_given_arguments"


def command_line_arguments(argv):
    """{name: value} of the ``name:=value`` tokens of ``argv``, as ros2 launch parses its
    command line (the first ``:=`` splits, the last of a name wins)."""
    result = {}
    for token in argv:
        name, separator, value = str(token).partition(":=")
        if separator and name:
            result[name] = value
    return result


def given_to_ros2_launch(context):
    """Whether this file is the one ros2 launch was given.

    ros2 launch starts with a launch description that includes the file it was given, the
    command line as its arguments; this file's first action runs while the event that
    brought that description in (launch.events.IncludeLaunchDescription, context.locals.event,
    as launch's own handler of it reads) is handled. A parent launch file that includes this
    one is what that description includes then, whatever the parent passes or declares."""
    from launch.actions import IncludeLaunchDescription
    from launch.events import IncludeLaunchDescription as IncludeEvent

    event = context.get_locals_as_dict().get("event")
    here = globals().get("__file__")
    if not isinstance(event, IncludeEvent) or not here:
        return False
    return any(isinstance(entity, IncludeLaunchDescription)
               and os.path.realpath(entity.launch_description_source.location)
               == os.path.realpath(here)
               for entity in event.launch_description.entities)


def refuse_unknown_arguments(context, *args, **kwargs):
    """Refuse a name on the ros2 launch command line that is not an argument of the plan.

    The first action of this file: when ros2 launch was given this file
    (:func:`given_to_ros2_launch`), its launch configurations then hold exactly the command
    line's. Included by another launch file, the command line holds that file's arguments
    too, and is not ours to judge."""
    given = command_line_arguments(context.argv)
    ours = given_to_ros2_launch(context) and dict(context.launch_configurations) == given
    context.extend_locals({GIVEN_LOCAL: tuple(given) if ours else None})
    if ours:
        plan.check_argument_names(given, also=LAUNCH_OWN_ARGUMENTS)
    return None


def given_arguments(context, values):
    """The names of the plan's arguments the user gave: those of the command line
    (refuse_unknown_arguments), else, included by another launch file, those whose value is
    not the default (a parent may pass on its own arguments' defaults)."""
    given = context.get_locals_as_dict().get(GIVEN_LOCAL)
    if given is not None:
        return given
    defaults = plan.argument_defaults()
    return [name for name, value in values.items() if value != defaults[name]]


def _installed(entry):
    return plan.ament_executable(entry.package, entry.executable) is not None


def _node_namespace(context, entry):
    """The namespace launch_ros gives the entry's node: the entry's, under the namespace of
    a parent's PushRosNamespace (launch configuration ``ros_namespace``)."""
    from launch_ros.utilities import make_namespace_absolute, prefix_namespace

    namespace = make_namespace_absolute(prefix_namespace(
        context.launch_configurations.get("ros_namespace"), entry.namespace or None))
    return (namespace or "").strip("/")


def required_exit(entry):
    """What a required process's exit does: the whole bring-up stops (Shutdown); when it
    failed on its own (a status other than 0 while the launch was not stopping already,
    e.g. the driver refusing a parameter file), the launch fails with it: ros2 launch says
    so and exits 1 (an error raised in an event handler is what makes it do that)."""
    from launch.actions import Shutdown

    def on_exit(event, context):
        code = event.returncode
        if code != 0 and not getattr(context, "is_shutdown", False):
            raise RuntimeError(f"{entry.executable} exited with status {code}, which stops the "
                               "bring-up (its reason is in its output above)")
        return [Shutdown(reason=f"{entry.executable} exited")]
    return on_exit


def lifeline_prefix(context, entry):
    """The launch prefix of an entry that is not ours: this Python running
    ``cozmo_driver.lifeline``, which sets the parent-death signal (launch sets none, and
    a program not ours does not read COZMO_PARENT_PID) and execs the program, so that a
    ``ros2 launch`` killed with SIGTERM (Jazzy's has no handler for it) or SIGKILL no
    longer leaves robot_state_publisher and RViz running. launch forks its processes on
    the thread of its event loop, the main thread of ``ros2 launch``, so the signal comes
    when the launch process dies. A prefix given here replaces the user's own
    (``ros2 launch --launch-prefix``, filtered by ``--launch-prefix-filter`` as launch
    does): that one follows, as the program the lifeline execs."""
    own = context.launch_configurations.get("launch-prefix", "") or ""
    pattern = context.launch_configurations.get("launch-prefix-filter", "") or ""
    if own and re.match(pattern, os.path.basename(entry.executable)) is None:
        own = ""
    return " ".join([shlex.quote(sys.executable), "-m", "cozmo_driver.lifeline", own]).strip()


def _with_launch_globals(context, entry):
    """The stack entry with a parent's SetRemap and SetParameter given to every member, as
    launch_ros gives them to each Node (ExecuteProcess, which starts the stack, ignores
    them): its remappings first (rcl takes the first rule that matches, as with a Node),
    its parameters before each member's own (which win)."""
    import dataclasses

    remaps = tuple(tuple(rule) for rule in context.launch_configurations.get("ros_remaps") or ())
    files, values = [], {}
    for item in context.launch_configurations.get("global_params") or ():
        if isinstance(item, tuple):
            values[item[0]] = item[1]
        else:
            files.append(plan.ParamFile(os.path.abspath(item)))
    first = tuple(files) + ((values,) if values else ())
    if not remaps and not first:
        return entry
    return dataclasses.replace(entry, members=tuple(
        dataclasses.replace(member, remappings=remaps + tuple(member.remappings),
                            parameters=first + tuple(member.parameters))
        for member in entry.members))


def entry_action(entry, context, directory):
    """The launch action of a plan entry: launch_ros's Node with the plan's parameter files,
    or ExecuteProcess; both with the plan's environment (they end when this process dies)."""
    from launch.actions import ExecuteProcess
    from launch_ros.actions import Node
    from launch_ros.substitutions import ExecutableInPackage

    on_exit = required_exit(entry) if entry.required else None
    environment = plan.child_environment()
    # a program that is not ours: through the lifeline (the label stays the executable's)
    lifeline = {} if entry.package == plan.PACKAGE else {"prefix": lifeline_prefix(context, entry)}
    if entry.members:  # one_process: the nodes in one cozmo_stack, each its own --ros-args
        namespace = _node_namespace(context, entry)
        entry = _with_launch_globals(context, entry)
        arguments = plan.stack_arguments(
            entry, lambda member: plan.parameter_files(member, directory, namespace=namespace),
            namespace=namespace)
        return ExecuteProcess(
            cmd=[ExecutableInPackage(entry.executable, entry.package), *arguments],
            name=entry.name, output="screen", on_exit=on_exit, additional_env=environment)
    if entry.node_name is None:
        return ExecuteProcess(
            cmd=[ExecutableInPackage(entry.executable, entry.package), *entry.arguments],
            name=entry.name, output="screen", on_exit=on_exit, additional_env=environment, **lifeline)
    files = plan.parameter_files(entry, directory, namespace=_node_namespace(context, entry))
    if lifeline:
        lifeline["exec_name"] = entry.executable
    return Node(
        package=entry.package, executable=entry.executable, name=entry.node_name,
        namespace=entry.namespace or None, parameters=files,
        remappings=list(entry.remappings), arguments=list(entry.arguments),
        output="screen", on_exit=on_exit, additional_env=environment, **lifeline)


def _parameter_directory():
    """A directory for the plan's parameter files (the nodes read their files when they
    start), removed when this process exits normally; killed by a signal (Jazzy's ros2
    launch has no SIGTERM handler), it runs no atexit, and the next launch removes the
    directory (plan.parameter_directory: named with this process's id)."""
    directory = plan.parameter_directory("cozmo_launch_")
    atexit.register(shutil.rmtree, directory, True)
    return directory


def launch_setup(context, *args, **kwargs):
    """The launch actions of the plan's enabled entries, for the arguments in ``context``."""
    from launch.actions import LogInfo
    from launch.logging import get_logger
    from launch.substitutions import LaunchConfiguration

    values = {arg.name: LaunchConfiguration(arg.name).perform(context) for arg in plan.ARGUMENTS}
    # a parent's PushRosNamespace: the nodes end up under it, so the frame prefix, the config
    # file's sections and RViz's topics must name it too (launch_ros adds it to the nodes)
    pushed = context.launch_configurations.get("ros_namespace") or ""
    directory = None
    actions = []
    args = plan.resolve_arguments(values, outer_namespace=pushed,
                                  given=given_arguments(context, values))
    for warning in plan.unreached_config_sections(args):
        get_logger("launch.user").warning(warning)
    for note in plan.config_sections_of_other_namespaces(args):
        get_logger("launch.user").info(note)
    for entry in plan.make_plan(args, warn=get_logger("launch.user").warning):
        if not entry.enabled:
            continue
        chosen = entry
        if not _installed(entry):
            chosen = entry.fallback if entry.fallback is not None and _installed(entry.fallback) \
                else None
        if chosen is None:
            if entry.required:
                raise RuntimeError(f"{entry.executable} (package {entry.package}) is not "
                                   "installed: cannot bring up the robot")
            actions.append(LogInfo(msg=plan.skip_message(entry)))
            continue
        if chosen is not entry:
            actions.append(LogInfo(msg=f"{entry.executable} is not installed: "
                                       f"{chosen.executable} publishes the robot description"))
        if directory is None:
            directory = _parameter_directory()
        actions.append(entry_action(chosen, context, directory))
    return actions


def generate_launch_description():
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    # launch appends the choices to the description by itself
    declared = [DeclareLaunchArgument(arg.name, default_value=arg.default,
                                      description=arg.description,
                                      choices=list(arg.choices) if arg.choices else None)
                for arg in plan.ARGUMENTS]
    return LaunchDescription([OpaqueFunction(function=refuse_unknown_arguments), *declared,
                              OpaqueFunction(function=launch_setup)])
