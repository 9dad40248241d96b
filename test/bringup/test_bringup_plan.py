"""The bring-up plan, and its two front-ends reading it: cozmo_bringup and cozmo.launch.py.

Pure: no process is started, no ROS is needed (the launch file is checked
statically and imported without launch).
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
from pathlib import Path

import pytest

from cozmo_driver import bringup, bringup_plan as plan
from cozmo_driver.client.robot import DEFAULT_ROBOT_ADDRESS
from cozmo_driver.description import UrdfModel

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILE = ROOT / "launch" / "cozmo.launch.py"
BRINGUP_DOC = ROOT / "docs" / "bringup.md"
#: the repository's parameter file; the plan's default is the installed package's copy
#: (the same file in the wheel venv's editable install, a copy in a plain colcon install)
REPO_CONFIG = ROOT / "config" / "cozmo.yaml"

ARGUMENT_NAMES = ["robot_ip", "robot_port", "namespace", "use_sim", "sim_port", "start_sim",
                  "config", "frame_prefix", "rviz", "enable_face", "enable_behavior", "one_process"]


def entries_by_name(entries):
    return {entry.name: entry for entry in entries}


def make(**values):
    return entries_by_name(plan.make_plan(plan.resolve_arguments(values)))


def default_config() -> Path:
    """The plan's default parameter file, checked to hold the repository's config/cozmo.yaml."""
    config = plan.default_config_path()
    assert config.read_bytes() == REPO_CONFIG.read_bytes(), \
        f"{config} differs from {REPO_CONFIG}: rebuild the package"
    return config


def merged_parameters(entry):
    """The parameter dicts of an entry merged in order (files skipped)."""
    result = {}
    for group in entry.parameters:
        if not isinstance(group, plan.ParamFile):
            result.update(group)
    return result


# ------------------------------------------------------------------ arguments


def test_arguments_are_declared_once_with_descriptions():
    assert [arg.name for arg in plan.ARGUMENTS] == ARGUMENT_NAMES
    descriptions = plan.argument_descriptions()
    assert set(descriptions) == set(ARGUMENT_NAMES)
    assert all(len(text) > 20 for text in descriptions.values())
    assert plan.argument_defaults()["use_sim"] == "false"
    assert all(isinstance(arg.default, str) for arg in plan.ARGUMENTS)
    for name in ("use_sim", "start_sim", "rviz", "enable_face", "enable_behavior", "one_process"):
        assert "(true|false)" in descriptions[name]


def test_defaults_resolve_to_a_robot_without_namespace():
    args = plan.resolve_arguments()
    assert args.namespace == "" and args.frame_prefix == ""
    assert not (args.use_sim or args.rviz or args.enable_face or args.enable_behavior)
    assert args.robot_ip == "" and args.robot_port is None
    assert args.config == default_config()
    assert args.sim_port == 5551


@pytest.mark.parametrize("given, namespace, prefix", [
    ("robot1", "robot1", "robot1/"),
    ("/robot1/", "robot1", "robot1/"),
    ("fleet/robot_2", "fleet/robot_2", "fleet/robot_2/"),
])
def test_namespace_sets_the_frame_prefix(given, namespace, prefix):
    args = plan.resolve_arguments({"namespace": given})
    assert (args.namespace, args.frame_prefix) == (namespace, prefix)


@pytest.mark.parametrize("outer, given, full, prefix", [
    ("/robotA", "", "robotA", "robotA/"),
    ("fleet", "robot1", "fleet/robot1", "fleet/robot1/"),
    ("", "robot1", "robot1", "robot1/")])
def test_a_namespace_pushed_by_a_parent_launch_file_counts_for_the_prefix_and_the_config(
        outer, given, full, prefix, tmp_path):
    config = tmp_path / "fleet.yaml"
    config.write_text("cozmo_driver:\n  ros__parameters:\n    max_wheel_speed: 0.1\n")
    args = plan.resolve_arguments({"namespace": given, "config": str(config)}, outer_namespace=outer)
    assert (args.namespace, args.full_namespace, args.frame_prefix) == (given, full, prefix)
    driver = {entry.name: entry for entry in plan.make_plan(
        args, description=lambda prefix: "<robot name='cozmo'/>")}["driver"]
    assert driver.namespace == given                    # launch_ros adds the pushed one
    assert {"max_wheel_speed": 0.1} in driver.parameters  # the section, copied for the node


def test_an_explicit_frame_prefix_wins():
    assert plan.resolve_arguments({"namespace": "robot1", "frame_prefix": ""}).frame_prefix == ""
    assert plan.resolve_arguments({"frame_prefix": "/c1/"}).frame_prefix == "c1/"


@pytest.mark.parametrize("values, message", [
    ({"use_sim": "maybe"}, "use_sim"),
    ({"use_sim": "true", "sim_port": "0"}, "sim_port:='0': expected a UDP port number"),
    # meant for the simulator, but the driver would drive the robot
    ({"sim_port": "5600"}, "sim_port:=5600: only for the simulator, and use_sim is false, so "
                           "the driver would drive the robot .* add use_sim:=true"),
    ({"start_sim": "false"}, "start_sim:=false: only for the simulator"),
    ({"use_sim": "false", "sim_port": "5600", "start_sim": "false"},
     "sim_port:=5600 and start_sim:=false: only for the simulator"),
    # given, a default value is meant for the simulator all the same (docs/bringup.md's
    # own example spells out sim_port:=5551)
    ({"sim_port": "5551", "namespace": "robot1"}, "sim_port:=5551: only for the simulator"),
    ({"start_sim": "true"}, "start_sim:=true: only for the simulator"),
    ({"robot_port": "http"}, "robot_port"),
    # the port went on, and the driver was then configured for "172.31.1.1:5551:5551"
    ({"robot_ip": "172.31.1.1:5551"},
     r"robot_ip:='172.31.1.1:5551': robot_ip is the address only; give the port as robot_port:=5551"),
    ({"robot_ip": " cozmo.local:5552 "}, r"robot_port:=5552"),
    ({"namespace": "1robot"}, "namespace"),
    ({"namespace": "robot-1"}, "namespace"),
    ({"frame_prefix": "a b/"}, "frame_prefix:='a b/': frame ids must not contain white space"),
    ({"config": "/nonexistent/cozmo.yaml"}, "no such parameter file"),
    # a directory was said to be no such file, which the user saw was there
    ({"config": "/"}, "config:=/: a directory, not a parameter file: give the path of the YAML file"),
    ({"robot": "x"}, "unknown argument"),
])
def test_bad_arguments_are_refused_with_the_reason(values, message):
    with pytest.raises(plan.PlanError, match=message):
        plan.resolve_arguments(values)


@pytest.fixture
def hosts_file(tmp_path, monkeypatch):
    """The plan reads this hosts file (``127.0.0.1 localhost`` and the robots of the tests),
    and no host name is resolved: a name server asked fails the test."""
    import socket

    path = tmp_path / "hosts"
    path.write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost  # IPv6 only\n"
                    "192.0.2.7 cozmo.local cozmo-1\t My_Host\n# 192.0.2.8 commented-out\n"
                    "0.0.0.0 blocked.example\n")
    monkeypatch.setattr(plan, "HOSTS_FILE", path, raising=False)

    def no_name_server(*args, **kwargs):
        raise AssertionError(f"a host name was resolved: {args}")

    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex"):
        monkeypatch.setattr(socket, name, no_name_server)
    return path


@pytest.mark.parametrize("address", ["172.31.1.1", "127.0.0.1", "cozmo.local", "cozmo.local.", "cozmo-1",
                                     "my_host", "localhost", "LocalHost.", "robot.localhost", "pi.local",
                                     "cozmo-sim.local"])
def test_an_ipv4_address_or_a_host_name_goes_to_the_driver(address, hosts_file):
    # a host name of the hosts file (any case, a trailing dot or not), localhost, or a multicast
    # DNS name (pi.local and cozmo-sim.local are not in the hosts file: no name server knows them)
    assert plan.resolve_arguments({"robot_ip": f" {address} "}).robot_ip == address


SIMULATOR_HINT = ("to drive the simulator give use_sim:=true (the bring-up starts cozmo-sim on "
                  "127.0.0.1:<sim_port> and points the driver at it; no robot_ip needed), or "
                  "robot_ip:=127.0.0.1 for a cozmo-sim you started on this computer")


@pytest.mark.parametrize("address, problem", [
    # a valid host name, so the driver started and then failed to resolve it (exit 2), after
    # the simulator-less bring-up had started everything else: the user meant use_sim:=true
    ("sim", "'sim' is no robot's address: " + SIMULATOR_HINT),
    ("Simulator", "'Simulator' is no robot's address: " + SIMULATOR_HINT),
    ("cozmo-sim", "'cozmo-sim' is no robot's address: " + SIMULATOR_HINT),
    ("cozmo_sim.", "'cozmo_sim.' is no robot's address"),
    # localhost mistyped
    ("locahost", "'locahost' is not localhost (a typo?) nor a name of {hosts}: " + SIMULATOR_HINT),
    ("localhots", "is not localhost (a typo?)"),
    ("local", "is not localhost (a typo?)"),
    # a name only a name server could resolve (none answers on the robot's Wi-Fi), or none can
    ("cozmo", "'cozmo' is neither an IPv4 address, nor localhost, nor a host name of {hosts}: the "
              "bring-up takes no name only a name server knows (none answers on the robot's own Wi-Fi, "
              "and the driver would fail to resolve it once started); add the name to {hosts}, or "
              + SIMULATOR_HINT + "; to drive a Cozmo give its address"),
    ("robot.example.com", "is neither an IPv4 address, nor localhost, nor a host name of {hosts}"),
    ("commented-out", "is neither an IPv4 address, nor localhost, nor a host name of {hosts}"),
    ("127.0.0.l", "is neither an IPv4 address, nor localhost"),
    # the hosts file gives it nothing the driver can send to
    ("ip6-localhost", "{hosts} gives 'ip6-localhost' no IPv4 address (::1); the driver reaches the robot "
                      "over IPv4 only"),
    ("blocked.example", "{hosts} gives 'blocked.example' 0.0.0.0, the unspecified address"),
])
def test_a_robot_host_name_that_resolves_to_no_robot_is_refused_before_anything_starts(
        address, problem, hosts_file):
    with pytest.raises(plan.PlanError) as refused:
        plan.resolve_arguments({"robot_ip": address})
    message = str(refused.value)
    assert message.startswith(f"robot_ip:={address!r}: ") and problem.format(hosts=hosts_file) in message, \
        message
    assert message.endswith("(a Cozmo answers at 172.31.1.1 on its own Wi-Fi: robot_ip:=172.31.1.1)")


def test_cozmo_bringup_refuses_robot_ip_sim_before_anything_starts(hosts_file, capsys):
    assert bringup.main(["robot_ip:=sim", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert "cozmo_driver_node" not in out, out
    assert "robot_ip:='sim': 'sim' is no robot's address: to drive the simulator give use_sim:=true" in err


def _dry_run(argv, capsys):
    """cozmo_bringup ``argv`` --dry-run: its stderr (the files it keeps removed)."""
    assert bringup.main([*argv, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    for line in out.splitlines():
        if line.startswith("# parameter files"):
            shutil.rmtree(line.split()[-2], ignore_errors=True)
    return err


def test_robot_ip_and_robot_port_given_with_use_sim_are_said_to_be_ignored(hosts_file, capsys):
    """robot_ip and robot_port with use_sim:=true were ignored in silence: the driver drove the
    simulator, and the user thought it drove the robot they named."""
    warnings = []
    args = plan.resolve_arguments({"use_sim": "true", "sim_port": "5612", "robot_ip": "10.0.0.9",
                                   "robot_port": "1234"})
    plan.make_plan(args, description=lambda prefix: "<robot name='r'/>", warn=warnings.append)
    assert warnings == [
        "robot_ip:=10.0.0.9 and robot_port:=1234 ignored with use_sim:=true: the driver drives the "
        "simulator the bring-up starts on 127.0.0.1:5612, the simulator's own address; to drive the robot "
        "there, leave out use_sim:=true; the simulator's port is given as sim_port:= (sim_port:=1234)"]
    # a name the driver could not resolve is not refused: it goes nowhere
    err = _dry_run(["use_sim:=true", "robot_ip:=sim"], capsys)
    assert ("cozmo_bringup: warning: robot_ip:=sim ignored with use_sim:=true: the driver drives the "
            "simulator the bring-up starts on 127.0.0.1:5551, the simulator's own address; to drive the "
            "robot there, leave out use_sim:=true\n") in err, err
    err = _dry_run(["use_sim:=true", "start_sim:=false", "sim_port:=5600", "robot_port:=5551"], capsys)
    assert ("cozmo_bringup: warning: robot_port:=5551 ignored with use_sim:=true: the driver drives the "
            "simulator already serving 127.0.0.1:5600 (start_sim:=false), the simulator's own address") in err
    # nothing ignored, nothing said
    for argv in (["use_sim:=true"], ["robot_ip:=10.0.0.9", "robot_port:=1234"]):
        assert "ignored" not in _dry_run(argv, capsys)


@pytest.mark.parametrize("address, problem", [
    # the driver refused these once the bring-up had started its other processes (exit 2),
    # or tried to resolve them as host names first
    ("::1", "an IPv6 address; the driver reaches the robot over IPv4 only"),
    ("fe80::1%wlan0", "an IPv6 address"),
    ("[::1]:5551", "an IPv6 address"),
    ("172.31.1", "'172.31.1' is not an IPv4 address of four numbers 0-255 separated by dots"),
    ("172.031.1.1", "is not an IPv4 address of four numbers"),
    ("172.31.1.1 5551", "is not an IPv4 address of four numbers"),
    ("0.0.0.0", "0.0.0.0 is the unspecified address"),
    ("255.255.255.255", "the broadcast address"),
    ("172. 31.1.1", "'172. 31.1.1' is neither an IPv4 address nor a host name"),
    ("http://172.31.1.1", "neither an IPv4 address nor a host name"),
    ("172.31.1.1/24", "neither an IPv4 address nor a host name"),
    ("172.31.1.1:", "neither an IPv4 address nor a host name"),
    ("cozmo..local", "neither an IPv4 address nor a host name"),
])
def test_a_robot_address_the_driver_would_refuse_is_refused_before_anything_starts(address, problem):
    with pytest.raises(plan.PlanError) as refused:
        plan.resolve_arguments({"robot_ip": address})
    message = str(refused.value)
    assert message.startswith(f"robot_ip:={address!r}: ") and problem in message, message
    assert message.endswith("(a Cozmo answers at 172.31.1.1 on its own Wi-Fi: robot_ip:=172.31.1.1)")


def _driver_section(tmp_path, key="cozmo_driver", **values):
    """A config file with the section ``key`` of the driver's ``values`` (written as given)."""
    config = tmp_path / "mine.yaml"
    config.write_text(f"{key}:\n  ros__parameters:\n" +
                      "".join(f"    {name}: {value}\n" for name, value in values.items()))
    return str(config)


FILE_HINT = ("(a Cozmo answers at 172.31.1.1 on its own Wi-Fi: robot_ip: 172.31.1.1 in the file, "
             "or robot_ip:=172.31.1.1)")


@pytest.mark.parametrize("name, value, problem", [
    # the driver exited 2 once the bring-up had started everything else
    ("robot_ip", "'172.31.1'", "'172.31.1' is not an IPv4 address of four numbers 0-255 separated by dots; "
                               "check the address " + FILE_HINT),
    ("robot_ip", "'999.1.1.1'", "'999.1.1.1' is not an IPv4 address of four numbers"),
    ("robot_ip", "'0.0.0.0'", "0.0.0.0 is the unspecified address"),
    ("robot_ip", "sim", "'sim' is no robot's address: " + SIMULATOR_HINT + "; to drive a Cozmo give its "
                        "address " + FILE_HINT),
    ("robot_ip", "cozmo", "'cozmo' is neither an IPv4 address, nor localhost, nor a host name of {hosts}"),
    ("robot_ip", "'172.31.1.1:5551'", "robot_ip is the address only; give the port as robot_port: 5551 "
                                      "(robot_ip: 172.31.1.1 and robot_port: 5551 in the file)"),
    ("robot_ip", "'::1'", "an IPv6 address; the driver reaches the robot over IPv4 only"),
    ("robot_ip", "' 172.31.1.1'", "no spaces around an address"),
    ("robot_ip", "http://172.31.1.1", "neither an IPv4 address nor a host name"),
    ("robot_ip", "''", "must not be empty"),
    ("robot_ip", "172.31", "must be a string, got float (the file gives 172.31)"),
    ("robot_port", "70000", "robot_port = 70000 is outside [1, 65535] (a Cozmo answers at UDP port 5551)"),
    ("robot_port", "0", "robot_port = 0 is outside [1, 65535]"),
    ("robot_port", "'5551'", "robot_port must be a int, got str (the file gives '5551')"),
    ("local_ip", "'999.1.1.1'", "'999.1.1.1' is not an IPv4 address of four numbers 0-255 separated by dots; "
                                "check the address (give local_ip an address of this computer, or 0.0.0.0 "
                                "for every interface)"),
    ("local_ip", "'::'", "an IPv6 address; the driver binds an IPv4 one only"),
    ("local_port", "-1", "local_port = -1 is outside [0, 65535]"),
])
@pytest.mark.parametrize("key, values", [
    ("cozmo_driver", {}),
    ("/**", {}),                                            # every node's section reaches the driver
    ("cozmo_driver", {"namespace": "robot1"}),              # copied to /robot1/cozmo_driver by the plan
    ("/**/cozmo_driver", {"namespace": "robot1"}),
    ("/robot1/cozmo_driver", {"namespace": "robot1", "enable_face": "true"}),
])
def test_a_config_files_address_the_driver_would_refuse_is_refused_before_anything_starts(
        name, value, problem, key, values, tmp_path, hosts_file):
    """Without robot_ip:= the driver took the config file's robot_ip (robot_port, local_ip,
    local_port), which the plan did not judge: everything started, then the driver exited 2."""
    config = _driver_section(tmp_path, key, **{name: value})
    with pytest.raises(plan.PlanError) as refused:
        plan.resolve_arguments({**values, "config": config})
    message = str(refused.value)
    assert message.startswith(f"config:={config}: the driver's {name}") and \
        problem.format(hosts=hosts_file) in message, message


@pytest.mark.parametrize("key, file_values, values", [
    # an argument overrides it, or the driver drives the simulator
    ("cozmo_driver", {"robot_ip": "sim"}, {"robot_ip": "172.31.1.1"}),
    ("cozmo_driver", {"robot_port": 0}, {"robot_port": "5551"}),
    ("cozmo_driver", {"robot_ip": "sim", "robot_port": 70000}, {"use_sim": "true"}),
    ("/**", {"robot_ip": "'172.31.1'"}, {"use_sim": "true", "start_sim": "false"}),
    # not the driver the plan starts, nor the section copied to it
    ("/robot2/cozmo_driver", {"robot_ip": "sim", "local_ip": "'999.1.1.1'"}, {"namespace": "robot1"}),
    ("cozmo_face", {"robot_ip": "sim"}, {}),
    # what the driver takes: a host name of the hosts file, localhost, a multicast DNS name
    ("cozmo_driver", {"robot_ip": "cozmo-1", "robot_port": 5552, "local_ip": "'127.0.0.1'", "local_port": 0}, {}),
    ("cozmo_driver", {"robot_ip": "localhost"}, {}),
    ("/**/cozmo_driver", {"robot_ip": "pi.local"}, {"namespace": "robot1"}),
])
def test_a_config_files_address_the_driver_does_not_take_is_not_judged(key, file_values, values, tmp_path,
                                                                         hosts_file):
    plan.resolve_arguments({**values, "config": _driver_section(tmp_path, key, **file_values)})


def test_a_config_file_read_by_another_namespaces_driver_is_not_judged_for_this_one(tmp_path, hosts_file):
    """The section the plan's driver reads is the file's /robot1/cozmo_driver: the plain
    cozmo_driver: one is neither read nor copied (it reaches no node, and is warned of)."""
    config = tmp_path / "fleet.yaml"
    config.write_text("cozmo_driver:\n  ros__parameters:\n    robot_ip: sim\n"
                      "/robot1/cozmo_driver:\n  ros__parameters:\n    robot_ip: 192.0.2.7\n")
    assert plan.resolve_arguments({"namespace": "robot1", "config": str(config)}).namespace == "robot1"
    with pytest.raises(plan.PlanError, match="the driver's robot_ip 'sim': 'sim' is no robot's address"):
        plan.resolve_arguments({"config": str(config)})


def test_cozmo_bringup_refuses_a_config_files_robot_ip_before_anything_starts(tmp_path, hosts_file, capsys):
    config = _driver_section(tmp_path, robot_ip="sim")
    assert bringup.main([f"config:={config}", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert "cozmo_driver_node" not in out, out
    assert f"config:={config}: the driver's robot_ip 'sim': 'sim' is no robot's address: to drive the " \
           "simulator give use_sim:=true" in err, err
    # the simulator's address is used: nothing to refuse, nothing said of the file's
    err = _dry_run([f"config:={config}", "use_sim:=true"], capsys)
    assert "robot_ip" not in err, err


def test_the_simulators_arguments_are_judged_by_the_names_given():
    # a front-end that has every argument's value (the launch file) says which were given
    every = plan.argument_defaults()
    assert not plan.resolve_arguments(every, given=["namespace"]).use_sim
    with pytest.raises(plan.PlanError, match="sim_port:=5551: only for the simulator"):
        plan.resolve_arguments(every, given=["sim_port"])
    assert plan.resolve_arguments({**every, "use_sim": "true"}, given=["use_sim", "sim_port"]).use_sim


@pytest.mark.parametrize("argv", [["sim_port:=5551", "namespace:=robot1"],
                                  ["--sim-port", "5551"], ["start_sim:=true"]])
def test_cozmo_bringup_refuses_a_simulator_argument_without_use_sim(argv, capsys):
    # sim_port:=5551 namespace:=robot1 --dry-run planned the driver for the real robot
    assert bringup.main([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "only for the simulator, and use_sim is false" in err and "add use_sim:=true" in err


@pytest.mark.parametrize("text, value", [("true", True), ("false", False)])
def test_booleans_are_true_or_false(text, value):
    assert plan.resolve_arguments({"rviz": text}).rviz is value


@pytest.mark.parametrize("text", ["True", "1", "yes", "no", "", " true"])
def test_a_boolean_outside_its_choices_is_refused_as_launch_refuses_it(text):
    # DeclareLaunchArgument(choices=["true", "false"]) compares exactly: so does the plan
    with pytest.raises(plan.PlanError, match=r"rviz:=.*expected one of true, false"):
        plan.resolve_arguments({"rviz": text})


def test_every_boolean_argument_declares_its_choices():
    for arg in plan.ARGUMENTS:
        if arg.default in ("true", "false"):
            assert arg.choices == ("true", "false"), arg.name
        if arg.choices:
            assert arg.default in arg.choices, arg.name


@pytest.mark.parametrize("names, expected", [
    (["use_simm"], "unknown argument 'use_simm' (did you mean 'use_sim'?)"),
    (["namspace"], "unknown argument 'namspace' (did you mean 'namespace'?)"),
    (["robotip", "xyzzy"], "unknown arguments 'robotip' (did you mean 'robot_ip'?), 'xyzzy';"),
])
def test_unknown_argument_names_are_refused_with_a_suggestion(names, expected):
    with pytest.raises(plan.PlanError) as exc:
        plan.check_argument_names(["use_sim", *names])
    message = str(exc.value)
    assert message.startswith(expected)
    assert message.endswith("the arguments are: " + ", ".join(ARGUMENT_NAMES))
    plan.check_argument_names(ARGUMENT_NAMES)                       # all known: fine
    plan.check_argument_names(["launch-prefix"], also=["launch-prefix"])


# ------------------------------------------------------------------ entries


def test_default_plan_starts_the_driver_and_the_description():
    entries = plan.make_plan(plan.resolve_arguments())
    assert [e.name for e in entries] == ["simulator", "stack", "driver", "robot_state_publisher",
                                         "face", "behavior", "rviz"]
    enabled = [e.name for e in entries if e.enabled]
    assert enabled == ["driver", "robot_state_publisher"]
    by_name = entries_by_name(entries)
    driver = by_name["driver"]
    assert (driver.package, driver.executable, driver.node_name) == \
        ("cozmo_driver", "cozmo_driver_node", "cozmo_driver")
    assert driver.required and driver.namespace == ""
    assert driver.parameters[0] == plan.ParamFile(str(default_config()))
    # robot_ip and robot_port stay the config file's; the frame prefix is the plan's
    assert merged_parameters(driver) == {"frame_prefix": ""}


def test_robot_state_publisher_gets_the_xacro_output_and_a_fallback():
    rsp = make(namespace="robot1")["robot_state_publisher"]
    assert (rsp.package, rsp.executable, rsp.namespace) == \
        ("robot_state_publisher", "robot_state_publisher", "robot1")
    (group,) = rsp.parameters
    model = UrdfModel.from_xml(group["robot_description"])
    assert model.root == "robot1/base_footprint"
    fallback = rsp.fallback
    assert (fallback.package, fallback.executable) == ("cozmo_driver",
                                                       "cozmo_description_publisher")
    assert fallback.parameters == rsp.parameters and fallback.namespace == "robot1"


def test_use_sim_starts_the_simulator_and_points_the_driver_at_it():
    entries = make(use_sim="true", sim_port="5612", robot_ip="10.0.0.9", robot_port="1234")
    sim = entries["simulator"]
    assert sim.enabled and sim.required and sim.stop_last and sim.node_name is None
    assert (sim.package, sim.executable) == ("cozmo_driver", "cozmo-sim")
    assert sim.arguments == ("--host", "127.0.0.1", "--port", "5612", "--quiet")
    params = merged_parameters(entries["driver"])
    assert params["robot_ip"] == "127.0.0.1" and params["robot_port"] == 5612


def test_a_running_simulator_is_reused_without_starting_another():
    entries = make(use_sim="true", start_sim="false", sim_port="40123")
    assert not entries["simulator"].enabled
    params = merged_parameters(entries["driver"])
    assert params["robot_ip"] == "127.0.0.1" and params["robot_port"] == 40123
    # without use_sim, start_sim:= is refused (test_bad_arguments_are_refused_with_the_reason)


def test_robot_address_overrides_the_config_file():
    params = merged_parameters(make(robot_ip="192.0.2.7", robot_port="5555")["driver"])
    assert params == {"robot_ip": "192.0.2.7", "robot_port": 5555, "frame_prefix": ""}


def test_a_namespaced_driver_still_gets_the_config_files_values(tmp_path):
    # config/cozmo.yaml says `cozmo_driver:`, which does not reach /robot1/cozmo_driver
    driver = make(namespace="robot1")["driver"]
    assert driver.namespace == "robot1"
    copied = driver.parameters[1]
    assert copied["camera_exposure_ms"] == 30 and copied["robot_ip"] == DEFAULT_ROBOT_ADDRESS
    assert merged_parameters(driver)["frame_prefix"] == "robot1/"
    # a file written for any namespace applies by itself: nothing copied
    wildcard = tmp_path / "fleet.yaml"
    wildcard.write_text("/**/cozmo_driver:\n  ros__parameters:\n    camera_color: true\n")
    driver = make(namespace="robot1", config=str(wildcard))["driver"]
    assert len(driver.parameters) == 2 and driver.parameters[0].path == str(wildcard)
    # a key for every node (use_sim_time for all) does not name the driver: the section
    # `cozmo_driver:` is still copied, and it comes after the file
    for every in ("/**", "/robot1/*"):
        mine = tmp_path / "mine.yaml"
        mine.write_text(f"{every}:\n  ros__parameters:\n    use_sim_time: true\n"
                        "cozmo_driver:\n  ros__parameters:\n    local_ip: 127.0.0.5\n")
        driver = make(namespace="robot1", config=str(mine))["driver"]
        assert driver.parameters[1]["local_ip"] == "127.0.0.5", every


@pytest.mark.parametrize("key, fqn, matches", [
    ("cozmo_driver", "/cozmo_driver", True),
    ("cozmo_driver", "/robot1/cozmo_driver", False),
    ("/robot1/cozmo_driver", "/robot1/cozmo_driver", True),
    ("robot1/cozmo_driver", "/robot1/cozmo_driver", True),
    ("/**", "/robot1/cozmo_driver", True),
    ("/**/cozmo_driver", "/robot1/cozmo_driver", True),
    ("/**/cozmo_driver", "/cozmo_driver", True),
    ("/*/cozmo_driver", "/robot1/cozmo_driver", True),
    ("/*/cozmo_driver", "/a/b/cozmo_driver", False),
    ("/robot1/*", "/robot1/cozmo_driver", True),
    ("/robot2/*", "/robot1/cozmo_driver", False),
])
def test_parameter_file_node_keys_follow_rcl(key, fqn, matches):
    assert plan._key_matches(key, fqn) is matches


def test_optional_nodes_follow_their_flags():
    entries = make(enable_face="true", namespace="r2")
    assert entries["face"].enabled and not entries["behavior"].enabled
    assert (entries["face"].executable, entries["face"].namespace) == ("cozmo_face_node", "r2")
    entries = make(enable_behavior="true")
    assert entries["behavior"].enabled and entries["behavior"].executable == "cozmo_behavior_node"


def test_the_behavior_node_gets_its_section_of_the_config_file(tmp_path):
    entry = make(enable_behavior="true")["behavior"]
    assert (entry.node_name, entry.condition) == ("cozmo_behavior", "enable_behavior")
    # the file, then the driver's cmd_vel type (see the next test)
    assert [type(group) for group in entry.parameters] == [plan.ParamFile, dict]
    assert entry.parameters[0].path == str(default_config())
    # under a namespace the `cozmo_behavior:` key does not reach it: its values are copied
    entry = make(enable_behavior="true", namespace="robot1")["behavior"]
    assert entry.namespace == "robot1"
    copied = merged_parameters(entry)
    assert copied["user_pause"] == 10.0 and copied["enabled"] is True
    wildcard = tmp_path / "fleet.yaml"
    wildcard.write_text("/**/cozmo_behavior:\n  ros__parameters:\n    user_pause: 3.0\n")
    entry = make(enable_behavior="true", namespace="robot1", config=str(wildcard))["behavior"]
    assert len(entry.parameters) == 2 and "user_pause" not in merged_parameters(entry)


def _config(tmp_path, text):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text, values, suggestion", [
    ("cozmo_drivr:\n  ros__parameters:\n    max_wheel_speed: 0.05\n", {}, "/cozmo_driver"),
    # a misspelt node under another namespace reaches nothing anywhere
    ("/robot2/cozmo_drivr:\n  ros__parameters:\n    max_wheel_speed: 0.05\n", {"namespace": "robot1"},
     "/robot1/cozmo_driver"),
    ("/robot1/cozmo_fase:\n  ros__parameters:\n    fps: 10.0\n", {"namespace": "robot1"},
     "/robot1/cozmo_face"),
    ("robot_state_publisher:\n  ros__parameters:\n    publish_frequency: 5.0\n", {}, None),
])
def test_a_config_section_that_reaches_no_node_is_warned_of(tmp_path, text, values, suggestion):
    """A section whose key names no node of the bring-up was applied to nothing, and nothing
    said so: max_wheel_speed stayed the default."""
    config = _config(tmp_path, "cozmo_driver:\n  ros__parameters:\n    cmd_vel_timeout: 0.3\n" + text)
    key = text.split(":", 1)[0]
    (warning,) = plan.unreached_config_sections(plan.resolve_arguments({**values, "config": config}))
    assert warning.startswith(f"config:={config}: the section {key!r} reaches no node of the bring-up")
    assert "its parameters are not applied" in warning
    assert warning.endswith(f"did you mean {suggestion!r}?" if suggestion else "applied")


@pytest.mark.parametrize("text, values", [
    ("/robot1/cozmo_driver:\n  ros__parameters:\n    max_wheel_speed: 0.05\n", {"namespace": "robot1"}),
    ("cozmo_driver:\n  ros__parameters:\n    max_wheel_speed: 0.05\n", {"namespace": "robot1"}),
    ("/**:\n  ros__parameters:\n    use_sim_time: true\n/**/cozmo_drivr:\n  ros__parameters:\n"
     "    x: 1\n/robot1/*:\n  ros__parameters:\n    y: 2\n", {}),
    # the section of a node that is not started is for when it is
    ("cozmo_face:\n  ros__parameters:\n    fps: 10.0\n", {}),
])
def test_sections_that_reach_a_node_or_are_wildcards_are_not_warned_of(tmp_path, text, values):
    args = plan.resolve_arguments({**values, "config": _config(tmp_path, text)})
    assert plan.unreached_config_sections(args) == []


@pytest.mark.parametrize("values", [{}, {"namespace": "robot1", "enable_face": "true",
                                         "enable_behavior": "true"}])
def test_the_packages_config_file_reaches_its_nodes(values):
    assert plan.unreached_config_sections(plan.resolve_arguments(values)) == []
    assert plan.config_sections_of_other_namespaces(plan.resolve_arguments(values)) == []


_FLEET = ("/robot1/cozmo_driver:\n  ros__parameters:\n    max_wheel_speed: 0.05\n"
          "/robot2/cozmo_driver:\n  ros__parameters:\n    max_wheel_speed: 0.1\n"
          "robot2/cozmo_face:\n  ros__parameters:\n    fps: 10.0\n")


@pytest.mark.parametrize("values, other", [
    ({"namespace": "robot1"}, ["/robot2/cozmo_driver", "robot2/cozmo_face"]),
    ({}, ["/robot1/cozmo_driver", "/robot2/cozmo_driver", "robot2/cozmo_face"]),
])
def test_a_section_of_our_node_under_another_namespace_is_noted_not_warned_of(tmp_path, values, other):
    """A fleet file shared by several robots: /robot2/cozmo_driver is for robot2's bring-up, not
    a section that reaches nothing, and no 'did you mean' another robot's node."""
    args = plan.resolve_arguments({**values, "config": _config(tmp_path, _FLEET)})
    assert plan.unreached_config_sections(args) == []
    notes = plan.config_sections_of_other_namespaces(args)
    assert len(notes) == len(other)
    for key, note in zip(other, notes):
        namespace = "/" + key.lstrip("/").rsplit("/", 1)[0]
        assert note.startswith(f"config:={args.config}: the section {key!r} is for the namespace {namespace}, "
                               "not this bring-up's"), note
        assert "did you mean" not in note and "not applied" not in note


def test_cozmo_bringup_notes_a_section_for_another_namespace_without_a_warning(tmp_path, capsys):
    config = _config(tmp_path, _FLEET)
    assert bringup.main([f"config:={config}", "namespace:=robot1", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    for line in out.splitlines():
        if line.startswith("# parameter files"):
            shutil.rmtree(line.split()[-2], ignore_errors=True)
    assert "warning" not in err, err
    assert f"cozmo_bringup: config:={config}: the section '/robot2/cozmo_driver' is for the namespace /robot2" in err


def test_cozmo_bringup_warns_of_a_config_section_that_reaches_no_node(tmp_path, capsys):
    config = _config(tmp_path, "cozmo_drivr:\n  ros__parameters:\n    max_wheel_speed: 0.05\n")
    assert bringup.main([f"config:={config}", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    for line in out.splitlines():
        if line.startswith("# parameter files"):
            shutil.rmtree(line.split()[-2], ignore_errors=True)
    assert f"cozmo_bringup: warning: config:={config}: the section 'cozmo_drivr' reaches no node" in err
    assert "did you mean '/cozmo_driver'?" in err


_ROS = "cozmo_driver:\n  ros__parameters:\n"


@pytest.mark.parametrize("text, message", [
    # rcl refuses each of these (the driver exited 2 once the simulator had started), or
    # crashed the plan with a TypeError (ros__parameters not a mapping)
    (_ROS[:-1] + " [1, 2]\n", r"the ros__parameters of 'cozmo_driver' hold a list, not the node's "
                              r"parameters: write them under it as name: value lines"),
    (_ROS[:-1] + " 5\n", "the ros__parameters of 'cozmo_driver' hold the value 5"),
    (_ROS[:-1] + " abc\n", "the ros__parameters of 'cozmo_driver' hold the value 'abc'"),
    (_ROS, r"the ros__parameters of 'cozmo_driver' hold nothing \(an empty value\).*ros__parameters: \{\}"),
    ("cozmo_driver: 5\n", "'cozmo_driver' holds the value 5 where a node's section is expected"),
    ("cozmo_driver:\n  max_wheel_speed: 0.1\n",
     r"'max_wheel_speed' under 'cozmo_driver' holds the value 0.1 outside ros__parameters: .*"
     r"\(cozmo_driver: ros__parameters: max_wheel_speed: ...\)"),
    ("ros__parameters:\n  max_wheel_speed: 0.1\n", "ros__parameters: at the top names no node"),
    (_ROS + "    max_wheel_speed: [0.1\n", r"(?s)cannot read the parameter file .*mine.yaml: .*line 3"),
    # rcl reads these as no parameters at all: the user's file was silently not applied
    ("- cozmo_driver\n- cozmo_face\n", "is not a ROS 2 parameter file: it holds a list where node names "
                                       "are expected"),
    ("max_wheel_speed = 0.1\n", "is not a ROS 2 parameter file: it holds the value 'max_wheel_speed = 0.1'"),
])
@pytest.mark.parametrize("namespace", ["", "robot1"])
def test_a_config_file_that_is_no_parameter_file_is_refused_before_anything_starts(
        tmp_path, text, message, namespace):
    config = _config(tmp_path, text)
    with pytest.raises(plan.PlanError, match=message):
        plan.resolve_arguments({"config": config, "namespace": namespace})


@pytest.mark.parametrize("text", [_ROS[:-1] + " [1, 2]\n", "- cozmo_driver\n"])
def test_cozmo_bringup_refuses_a_config_file_that_is_no_parameter_file(tmp_path, capsys, text):
    config = _config(tmp_path, text)
    assert bringup.main([f"config:={config}", "use_sim:=true", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"cozmo_bringup: error: {config}") and "Traceback" not in err, err
    assert out == ""


@pytest.mark.parametrize("text", ["", "{}\n", "cozmo_driver: {}\n", _ROS[:-1] + " {}\n"])
def test_a_config_file_without_parameters_is_taken(tmp_path, text):
    args = plan.resolve_arguments({"config": _config(tmp_path, text), "namespace": "robot1"})
    assert plan.unreached_config_sections(args) == []


def _rcl_parameters(config: str, name: str) -> dict:
    """The parameters real rcl gives the node ``name`` from the parameter file ``config``."""
    from ros_tools import need_module
    rclpy = need_module("rclpy")
    from rclpy.context import Context
    from rclpy.node import Node

    context = Context()
    rclpy.init(args=["test", "--ros-args", "--params-file", config], context=context)
    try:
        node = Node(name, context=context, automatically_declare_parameters_from_overrides=True)
        try:
            return {key: value.value for key, value in node._parameters.items()
                    if key not in ("use_sim_time", "start_type_description_service")}
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


_TWICE = _ROS + "    local_ip: 127.0.0.5\n    frame_rate: 5\n" + _ROS + "    camera_color: true\n"
_GROUP_TWICE = _ROS + "    g:\n      a: 1\n    g:\n      b: 2\n"


def test_a_config_section_given_twice_is_read_as_rcl_reads_it(tmp_path):
    """rcl gives a node the parameters of both of its sections in a file (test_rcl_reads_...
    below); YAML, read by the plan, kept only the second: a namespaced driver got only
    camera_color of the copied cozmo_driver: section, and its local_ip was silently lost."""
    copied = make(namespace="robot1", config=_config(tmp_path, _TWICE))["driver"].parameters[1]
    assert copied == {"local_ip": "127.0.0.5", "frame_rate": 5, "camera_color": True}
    typo = _config(tmp_path, "cozmo_drivr:\n  ros__parameters:\n    a: 1\n"
                   "cozmo_drivr:\n  ros__parameters:\n    b: 1\n")
    (warning,) = plan.unreached_config_sections(plan.resolve_arguments({"config": typo}))  # once
    assert "the section 'cozmo_drivr' reaches no node" in warning, warning
    # a group of parameters given twice is one group, as rcl reads it
    config = Path(_config(tmp_path, _GROUP_TWICE))
    assert plan.node_parameters_in_file(config, "cozmo_driver", "robot1")[1] == {"g": {"a": 1, "b": 2}}


_REFUSED_TWICE = [
    (_ROS + "    frame_rate: 5\n    frame_rate: 2.5\n",
     "the parameter 'frame_rate' of 'cozmo_driver' is given twice, on lines 3 and 4: the node would get "
     "one of them, not always the last"),
    (_ROS + "    frame_rate: 5\n" + _ROS + "    frame_rate: 2.5\n",
     "the parameter 'frame_rate' of 'cozmo_driver' is given twice, on lines 3 and 6"),
    (_ROS + "    g:\n      a: 1\n    g:\n      a: 2\n", "the parameter 'g.a' of 'cozmo_driver' is given twice, "
                                                       "on lines 4 and 6"),
    ("cozmo_driver:\n  ros__parameters:\n    a: 1\n  ros__parameters:\n    b: 2\n",
     "ros__parameters: is given twice under 'cozmo_driver', on lines 2 and 4, which rcl refuses"),
]


@pytest.mark.parametrize("text, message", _REFUSED_TWICE)
def test_a_parameter_given_twice_is_refused_naming_it_and_its_lines(tmp_path, text, message):
    """YAML keeps the last of a key given twice; rcl gives the node one of the two values of
    a parameter given twice, by their types rather than their order (5 then 2.5: 5), and
    refuses a second ros__parameters: under one node. The plan took each file, silently."""
    config = _config(tmp_path, text)
    with pytest.raises(plan.PlanError, match=f"^{config}: " + message.replace("(", r"\(").replace(")", r"\)")):
        plan.resolve_arguments({"config": config})


@pytest.mark.ros  # a node: a DDS participant
def test_rcl_reads_a_section_or_a_parameter_given_twice_as_the_plan_says(tmp_path):
    """What the two tests above say of rcl, with the real one: a node's sections given twice
    (and a group) give it all of their parameters; of a parameter given twice the node gets
    5 of 5 and 2.5, neither YAML's last nor the second section's; a second ros__parameters:
    under one node is refused."""
    assert _rcl_parameters(_config(tmp_path, _TWICE), "cozmo_driver") == {
        "local_ip": "127.0.0.5", "frame_rate": 5, "camera_color": True}
    assert _rcl_parameters(_config(tmp_path, _GROUP_TWICE), "cozmo_driver") == {"g.a": 1, "g.b": 2}
    for text, _ in _REFUSED_TWICE[:2]:
        assert _rcl_parameters(_config(tmp_path, text), "cozmo_driver") == {"frame_rate": 5}
    with pytest.raises(Exception, match="ros__parameters"):  # "no node names before ros__parameters"
        _rcl_parameters(_config(tmp_path, _REFUSED_TWICE[3][0]), "cozmo_driver")


_NESTED = ("robot1:\n  cozmo_driver:\n    ros__parameters:\n      cmd_vel_stamped: true\n"
           "      max_wheel_speed: 0.05\n")


def test_a_config_section_under_nested_namespace_keys_is_read_as_rcl_reads_it(tmp_path):
    """``robot1:`` then ``cozmo_driver:`` is the node key robot1/cozmo_driver for rcl: it reaches
    /robot1/cozmo_driver. The plan read only the top keys, warned that 'robot1' reached no node
    and its parameters were not applied, and gave the behavior engine the wrong cmd_vel type."""
    config = _config(tmp_path, _NESTED)
    args = plan.resolve_arguments({"config": config, "namespace": "robot1", "enable_behavior": "true"})
    assert plan.unreached_config_sections(args) == []
    assert plan.config_sections_of_other_namespaces(args) == []
    entries = entries_by_name(plan.make_plan(args, description=lambda prefix: "<robot/>"))
    assert merged_parameters(entries["behavior"])["cmd_vel_stamped"] is True
    assert "max_wheel_speed" not in merged_parameters(entries["driver"])   # reaches it by itself
    # without the namespace, it is another namespace's section
    args = plan.resolve_arguments({"config": config})
    assert plan.unreached_config_sections(args) == []
    (note,) = plan.config_sections_of_other_namespaces(args)
    assert note.startswith(f"config:={config}: the section 'robot1/cozmo_driver' is for the namespace /robot1")


def test_a_tool_that_is_not_installed_is_skipped_saying_how_to_get_it(monkeypatch):
    rviz = make(rviz="true")["rviz"]
    monkeypatch.setenv("ROS_DISTRO", "jazzy")
    assert plan.skip_message(rviz) == ("rviz2 is not installed (package rviz2; with ROS 2 from "
                                       "apt: sudo apt install ros-jazzy-rviz2): skipped")
    monkeypatch.delenv("ROS_DISTRO")
    assert "ros-<distro>-robot-state-publisher" in plan.skip_message(
        make()["robot_state_publisher"])
    assert plan.skip_message(make()["driver"]) == "cozmo_driver_node is not installed yet: skipped"


def test_the_behavior_node_takes_the_drivers_cmd_vel_type(tmp_path):
    """The engine watches the driver's cmd_vel: with a type of its own it would never see a
    user drive (and would drive against them), so it gets the driver's cmd_vel_stamped."""
    assert merged_parameters(make(enable_behavior="true")["behavior"])["cmd_vel_stamped"] is False
    mine = tmp_path / "mine.yaml"
    mine.write_text("cozmo_driver:\n  ros__parameters:\n    cmd_vel_stamped: true\n"
                    "cozmo_behavior:\n  ros__parameters:\n    cmd_vel_stamped: false\n")
    for namespace in ("", "robot1"):
        entry = make(enable_behavior="true", config=str(mine), namespace=namespace)["behavior"]
        assert merged_parameters(entry)["cmd_vel_stamped"] is True, namespace
    # a file for the namespaced driver: its own key, and a later one wins
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("/robot1/cozmo_driver:\n  ros__parameters:\n    cmd_vel_stamped: true\n"
                     "/**/cozmo_driver:\n  ros__parameters:\n    camera_color: true\n")
    entry = make(enable_behavior="true", config=str(fleet), namespace="robot1")["behavior"]
    assert merged_parameters(entry)["cmd_vel_stamped"] is True
    entry = make(enable_behavior="true", config=str(fleet), namespace="robot2")["behavior"]
    assert merged_parameters(entry)["cmd_vel_stamped"] is False
    # a key for every node reaches the driver too, and its own section wins over it
    every = tmp_path / "every.yaml"
    every.write_text("/**:\n  ros__parameters:\n    cmd_vel_stamped: true\n")
    entry = make(enable_behavior="true", config=str(every), namespace="robot1")["behavior"]
    assert merged_parameters(entry)["cmd_vel_stamped"] is True
    every.write_text("/**:\n  ros__parameters:\n    cmd_vel_stamped: true\n"
                     "cozmo_driver:\n  ros__parameters:\n    cmd_vel_stamped: false\n")
    entry = make(enable_behavior="true", config=str(every), namespace="robot1")["behavior"]
    assert merged_parameters(entry)["cmd_vel_stamped"] is False


def _driver_config(tmp_path, key="cozmo_driver", **values):
    config = tmp_path / "frames.yaml"
    lines = "".join(f"    {name}: {value}\n" for name, value in values.items())
    config.write_text(f"{key}:\n  ros__parameters:\n{lines}")
    return str(config)


@pytest.mark.parametrize("namespace, frame_prefix, key, tf_frame, parent", [
    ("", "auto", "cozmo_driver", "base_link", "base_footprint"),
    ("robot1", "auto", "cozmo_driver", "robot1/base_link", "robot1/base_footprint"),
    ("robot1", "auto", "/robot1/cozmo_driver", "robot1/base_link", "robot1/base_footprint"),
    ("robot1", "r1_", "cozmo_driver", "r1_base_link", "r1_base_footprint"),
])
def test_a_base_frame_the_description_gives_a_parent_is_refused(tmp_path, namespace, frame_prefix,
                                                                 key, tf_frame, parent):
    """The driver publishes odom -> base_frame, robot_state_publisher base_footprint ->
    base_link: base_frame:=base_link gave base_link two parents in tf. The plan sees both
    (the description with its prefix, the driver's frames with the same) and refuses it,
    naming the frames and the root to give instead, before anything starts."""
    config = _driver_config(tmp_path, key, base_frame="base_link")
    args = plan.resolve_arguments({"namespace": namespace, "frame_prefix": frame_prefix,
                                   "config": config})
    with pytest.raises(plan.PlanError) as refused:
        plan.make_plan(args)
    message = str(refused.value)
    assert "base_frame 'base_link'" in message and "two parents in tf" in message, message
    assert f"{parent} -> {tf_frame}" in message, message
    assert "give the driver base_frame: base_footprint" in message, message
    # any frame the description hangs below another
    for frame in ("imu_link", "camera_optical_frame", "lift_plate_link"):
        config = _driver_config(tmp_path, key, base_frame=frame)
        with pytest.raises(plan.PlanError, match=f"base_frame '{frame}'"):
            plan.make_plan(plan.resolve_arguments({"namespace": namespace, "frame_prefix": frame_prefix,
                                                   "config": config}))


@pytest.mark.parametrize("namespace, frame_prefix, key, prefix", [
    ("", "auto", "cozmo_driver", ""),
    ("robot1", "auto", "/robot1/cozmo_driver", "robot1/"),
    ("robot1", "r1_", "cozmo_driver", "r1_"),
])
def test_an_odom_frame_of_the_description_is_refused(tmp_path, namespace, frame_prefix, key, prefix):
    """odom_frame is the fixed frame the robot moves in; one that names a frame of the
    robot description (with the plan's prefix, as base_frame) was taken: odom_frame:
    head_link put the driver's head_link -> base_footprint under the description's
    base_footprint -> base_link -> head_link, a loop in tf, and odom_frame: base_footprint
    with another base_frame hung it below the robot's own frame. The plan refuses it before
    anything starts, naming the frames and what to give."""
    def refused(**values) -> str:
        args = plan.resolve_arguments({"namespace": namespace, "frame_prefix": frame_prefix,
                                       "config": _driver_config(tmp_path, key, **values)})
        with pytest.raises(plan.PlanError) as caught:
            plan.make_plan(args)
        message = str(caught.value)
        assert "give the driver odom_frame: odom (a frame the description has not" in message, message
        assert message.endswith("or publish_tf: false"), message
        return message
    message = refused(odom_frame="head_link")
    assert "the driver's odom_frame 'head_link'" in message, message
    assert (f"the driver's {prefix}head_link -> {prefix}base_footprint on /tf and the description's "
            f"{prefix}base_footprint -> {prefix}base_link -> {prefix}head_link would make a loop in tf") \
        in message, message
    message = refused(odom_frame="base_footprint", base_frame="my_base")
    assert "is a frame of the robot description (its root)" in message, message
    assert f"the driver's {prefix}base_footprint -> {prefix}my_base on /tf would hang" in message, message
    message = refused(odom_frame="camera_link", base_frame="my_base")
    assert f"the child of '{prefix}head_link'" in message and "two parents in tf" in message, message
    # base_frame is checked first, as before
    args = plan.resolve_arguments({"namespace": namespace, "frame_prefix": frame_prefix, "config": _driver_config(
        tmp_path, key, odom_frame="head_link", base_frame="base_link")})
    with pytest.raises(plan.PlanError, match="the driver's base_frame 'base_link'"):
        plan.make_plan(args)


@pytest.mark.parametrize("values, namespace, frame_prefix", [
    ({"odom_frame": "robot1/head_link"}, "robot1", ""),       # not the description's head_link
    ({"odom_frame": "head_link", "publish_tf": "false"}, "", "auto"),  # the driver sends no tf
    ({"odom_frame": "world_odom", "base_frame": "my_base"}, "robot1", "auto"),
    ({"base_frame": "base_footprint"}, "robot1", "auto"),   # the description's root
    ({"base_frame": "my_base"}, "", "auto"),                # a frame the description has not
    ({"base_frame": "base_link", "publish_tf": "false"}, "", "auto"),  # the driver sends no tf
    ({"base_frame": "robot1/base_link"}, "robot1", ""),     # not the description's base_link
])
def test_driver_frames_that_make_no_loop_nor_second_parent_are_taken(tmp_path, values, namespace,
                                                                     frame_prefix):
    config = _driver_config(tmp_path, **values)
    entries = make(namespace=namespace, frame_prefix=frame_prefix, config=config)
    assert entries["driver"].enabled


@pytest.mark.parametrize("namespace, frame_prefix, key, prefix", [
    ("", "auto", "cozmo_driver", ""),
    ("robot1", "auto", "/robot1/cozmo_driver", "robot1/"),
    ("robot1", "r1_", "cozmo_driver", "r1_"),
])
def test_a_base_frame_the_description_has_not_is_warned_of(tmp_path, namespace, frame_prefix, key, prefix):
    """A driver base_frame the description lacks (a typo, another robot's frame name) was taken
    without a word: the driver's odom -> my_base on /tf and the description's tree from
    base_footprint were two trees, RViz showed no robot model and tf had no odom ->
    base_footprint. The plan now warns, naming the frame, the parameter and what to give."""
    config = _driver_config(tmp_path, key, base_frame="my_base")
    said = []
    args = plan.resolve_arguments({"namespace": namespace, "frame_prefix": frame_prefix, "config": config})
    entries = entries_by_name(plan.make_plan(args, warn=said.append))
    assert entries["driver"].enabled  # started all the same: a frame of the user's may join them
    assert len(said) == 1, said
    text = said[0]
    assert text.startswith(f"config:={config}: the driver's base_frame 'my_base'"), text
    assert f"is not a frame of the robot description (its root: {prefix}base_footprint)" in text, text
    assert f"the driver's {prefix}odom -> {prefix}my_base on /tf leaves the description's frames " \
           f"unconnected to {prefix}odom" in text, text
    assert "give the driver base_frame: base_footprint" in text, text
    assert f"a transform of yours ({prefix}my_base -> {prefix}base_footprint" in text, text


@pytest.mark.parametrize("values", [{}, {"base_frame": "base_footprint"},
                                    {"base_frame": "my_base", "publish_tf": "false"}])
def test_a_base_frame_of_the_description_or_no_tf_is_not_warned_of(tmp_path, values):
    said = []
    config = _driver_config(tmp_path, **values) if values else str(default_config())
    plan.make_plan(plan.resolve_arguments({"namespace": "robot1", "config": config}), warn=said.append)
    assert said == []


def test_cozmo_bringup_warns_of_a_base_frame_the_description_has_not(tmp_path, capsys):
    config = _driver_config(tmp_path, base_frame="my_base")
    assert bringup.main([f"config:={config}", "use_sim:=true", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert f"cozmo_bringup: warning: config:={config}: the driver's base_frame 'my_base' is not a frame " \
           "of the robot description" in err, err
    assert "# driver" in out


def test_cozmo_bringup_refuses_base_frame_base_link_before_anything_starts(tmp_path, capsys):
    config = _driver_config(tmp_path, base_frame="base_link")
    assert bringup.main([f"config:={config}", "use_sim:=true", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"cozmo_bringup: error: config:={config}: the driver's base_frame 'base_link'"), err
    assert "Traceback" not in err and out == ""


def test_the_face_node_gets_its_section_of_the_config_file(tmp_path):
    entry = make(enable_face="true")["face"]
    assert (entry.node_name, entry.condition) == ("cozmo_face", "enable_face")
    assert [type(group) for group in entry.parameters] == [plan.ParamFile]
    assert entry.parameters[0].path == str(default_config())
    # under a namespace the `cozmo_face:` key does not reach it: its values are copied
    entry = make(enable_face="true", namespace="robot1")["face"]
    assert entry.namespace == "robot1"
    copied = merged_parameters(entry)
    _, section = plan.node_parameters_in_file(default_config(), "cozmo_face", "")
    assert copied == section and copied["fps"] == 30.0 and copied["expression"] == "neutral"
    # only its own section: nothing of the driver's or the behavior engine's
    assert "robot_ip" not in copied and "user_pause" not in copied
    wildcard = tmp_path / "fleet.yaml"
    wildcard.write_text("/**/cozmo_face:\n  ros__parameters:\n    fps: 10.0\n")
    entry = make(enable_face="true", namespace="robot1", config=str(wildcard))["face"]
    assert len(entry.parameters) == 1
    # a disabled node's section is not read
    assert len(make(namespace="robot1")["face"].parameters) == 1


def test_rviz_shows_the_namespaced_robot():
    rviz = make(rviz="true", namespace="robot1")["rviz"]
    assert rviz.enabled and (rviz.package, rviz.executable) == ("rviz2", "rviz2")
    config = Path(rviz.arguments[1])
    assert rviz.arguments[0] == "-d" and config.name == "cozmo.rviz" and config.is_file()
    assert rviz.arguments[2:] == ("-f", "robot1/odom")
    remaps = dict(rviz.remappings)
    assert remaps["/robot_description"] == "/robot1/robot_description"
    assert remaps["/odom"] == "/robot1/odom"
    assert remaps["/camera/image_raw"] == "/robot1/camera/image_raw"
    assert remaps["/battery_marker"] == "/robot1/battery_marker"   # the battery display
    # every topic the configuration shows is remapped, and only those
    import yaml
    displays = yaml.safe_load(config.read_text())["Visualization Manager"]["Displays"]
    shown = {d[key]["Value"] for d in displays for key in ("Topic", "Description Topic")
             if key in d}
    assert shown == set(remaps)
    assert make(rviz="true")["rviz"].remappings == ()


@pytest.mark.parametrize("namespace, frame_prefix, key, fixed", [
    ("", "auto", "cozmo_driver", "world"),
    ("robot1", "auto", "/robot1/cozmo_driver", "robot1/world"),
    ("robot1", "auto", "cozmo_driver", "robot1/world"),   # the section copied under the namespace
    ("robot1", "r1_", "cozmo_driver", "r1_world"),
])
def test_rvizs_fixed_frame_is_the_drivers_odom_frame(tmp_path, namespace, frame_prefix, key, fixed):
    """RViz was started with the fixed frame {prefix}odom whatever the driver's odom_frame:
    with odom_frame: world in the config file the driver's odom -> base_footprint was
    world -> base_footprint, no frame odom existed, and RViz showed nothing."""
    config = _driver_config(tmp_path, key, odom_frame="world")
    rviz = make(rviz="true", namespace=namespace, frame_prefix=frame_prefix, config=config)["rviz"]
    assert rviz.arguments[2:] == ("-f", fixed)
    # the launch file and cozmo_bringup start RViz from this entry
    commands = dict((entry.name, command) for entry, command in bringup.Bringup(
        [rviz], locate=lambda package, executable: Path("/bin") / executable).resolve())
    command = commands["rviz"]
    assert command[command.index("-f") + 1] == fixed, command


# ------------------------------------------------------------------ command lines


def test_ros_arguments_of_the_driver(tmp_path):
    driver = make(use_sim="true", sim_port="5600", namespace="robot1")["driver"]
    files = plan.parameter_files(driver, tmp_path)
    args = driver.ros_arguments(files)
    assert args[:5] == ["--ros-args", "-r", "__node:=cozmo_driver", "-r", "__ns:=/robot1"]
    assert args[5:] == ["--params-file", str(default_config()),
                        "--params-file", str(tmp_path / "driver_1.yaml"),   # the copied section
                        "--params-file", str(tmp_path / "driver_2.yaml")]   # the plan's values
    import yaml
    assert yaml.safe_load((tmp_path / "driver_2.yaml").read_text()) == {
        "/robot1/cozmo_driver": {"ros__parameters": {
            "robot_ip": "127.0.0.1", "robot_port": 5600, "frame_prefix": "robot1/"}}}
    simulator = make(use_sim="true")["simulator"]
    assert plan.parameter_files(simulator, tmp_path) == [] and simulator.ros_arguments([]) == []


#: a group of every kind of value a parameter can have, and those that YAML or launch_ros
#: would retype if written carelessly
TYPED_GROUP = {
    "empty_list": [], "strings": ["a", "5551", "true", ""], "floats": [0.5, 2.0],
    "integers": [1, -2], "booleans": [True, False], "flag": True, "off": False,
    "port": 5551, "ratio": 0.25, "whole_float": 2.0, "tiny": 1e-05,
    "number_text": "5551", "float_text": "0.5", "bool_text": "true", "yes_text": "yes",
    "null_text": "null", "empty_text": "", "spaced_text": " x ", "colon_text": "a: b",
    "xml": "<robot name='r'>\n  <link name=\"a\"/>\n</robot>\n", "unicode": "Käfer",
    "nested": {"inner": {"depth": 3}},
}


def test_parameter_files_keep_every_type(tmp_path):
    import yaml
    entry = plan.ProcessEntry(name="probe", package="cozmo_driver", executable="x", enabled=True,
                              condition="always", node_name="probe", namespace="fleet/r1",
                              parameters=(plan.ParamFile("/some/file.yaml"), TYPED_GROUP,
                                          {"tuple": ("a", "b")}))
    files = plan.parameter_files(entry, tmp_path)
    assert files == ["/some/file.yaml", str(tmp_path / "probe_1.yaml"),
                     str(tmp_path / "probe_2.yaml")]
    (key, section), = yaml.safe_load(Path(files[1]).read_text()).items()
    assert key == "/fleet/r1/probe"                      # exactly this node
    values = section["ros__parameters"]
    assert values == TYPED_GROUP
    assert {name: type(value) for name, value in values.items()} == \
        {name: type(value) for name, value in TYPED_GROUP.items()}
    assert yaml.safe_load(Path(files[2]).read_text())["/fleet/r1/probe"] == \
        {"ros__parameters": {"tuple": ["a", "b"]}}
    # a namespace given by the front-end (a parent's PushRosNamespace) names the node
    files = plan.parameter_files(entry, tmp_path, namespace="/outer/fleet/r1")
    assert list(yaml.safe_load(Path(files[1]).read_text())) == ["/outer/fleet/r1/probe"]


@pytest.mark.parametrize("value", [None, [1, 2.5], ["a", 1], [[1]], object()])
def test_parameter_files_refuse_what_is_no_parameter_value(tmp_path, value):
    entry = plan.ProcessEntry(name="probe", package="p", executable="x", enabled=True,
                              condition="always", node_name="probe",
                              parameters=({"bad": value},))
    with pytest.raises(plan.PlanError, match="parameter bad"):
        plan.parameter_files(entry, tmp_path)


def _dead_pid() -> int:
    import subprocess
    import sys
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def test_parameter_directories_a_killed_front_end_left_are_removed_by_the_next(tmp_path):
    """ros2 launch killed by SIGTERM or SIGKILL runs no atexit: its directory of parameter
    files stayed in /tmp (27 of them on one machine). The next front-end removes those whose
    process is gone, and only those of that exact name."""
    import os
    dead, alive = _dead_pid(), os.getpid()
    stale = tmp_path / f"cozmo_launch_{dead}_ab3_x9zq"
    stale.mkdir()
    (stale / "driver_1.yaml").write_text("x: 1\n")
    kept = [tmp_path / f"cozmo_launch_{alive}_ab3_x9zq",   # a running front-end's
            tmp_path / "cozmo_launch_ab3_x9zq",             # no process named: not ours to judge
            tmp_path / f"cozmo_launch_{dead}_short",
            tmp_path / f"cozmo_bringup_{dead}_ab3_x9zq",    # another prefix
            tmp_path / f"cozmo_launch_{dead}_ab3_x9zq_"]
    for path in kept:
        path.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / f"cozmo_launch_{dead}_linklink"
    link.symlink_to(elsewhere)
    not_a_directory = tmp_path / f"cozmo_launch_{dead}_filefile"
    not_a_directory.write_text("")
    kept += [link, elsewhere, not_a_directory]
    assert plan.remove_stale_parameter_directories("cozmo_launch_", tmp_path) == [str(stale)]
    assert not stale.exists() and all(os.path.lexists(path) for path in kept)


def test_a_parameter_directory_names_its_front_end(tmp_path, monkeypatch):
    import os
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stale = tmp_path / f"cozmo_launch_{_dead_pid()}_ab3_x9zq"
    stale.mkdir()
    directory = Path(plan.parameter_directory("cozmo_launch_"))
    assert directory.parent == tmp_path and directory.is_dir()
    assert directory.name.startswith(f"cozmo_launch_{os.getpid()}_")
    assert not stale.exists()
    # it is not taken for a stale one while this process runs
    assert plan.remove_stale_parameter_directories("cozmo_launch_", tmp_path) == []


def test_every_process_gets_the_front_ends_pid():
    from cozmo_driver.lifeline import PARENT_PID_ENV
    import os
    assert plan.child_environment() == {PARENT_PID_ENV: str(os.getpid())}


# ------------------------------------------------------------------ cozmo_bringup's command line


@pytest.mark.parametrize("argv", [
    ["use_sim:=true", "namespace:=robot1", "sim_port:=5600"],
    ["--use-sim", "true", "--namespace", "robot1", "--sim-port", "5600"],
    ["--use_sim=true", "namespace:=robot1", "--sim_port", "5600"],
])
def test_both_argument_styles(argv):
    values, options = bringup.parse_command_line(argv + ["--duration", "3"])
    assert values == {"use_sim": "true", "namespace": "robot1", "sim_port": "5600"}
    assert options.duration == 3.0


def test_cli_defaults_are_the_plans():
    assert bringup.effective_arguments([]) == plan.argument_defaults()
    values, options = bringup.parse_command_line([])
    assert values == {} and options.duration is None and not options.dry_run
    # and the help shows the plan's defaults and descriptions
    parser = bringup._parser()
    for arg in plan.ARGUMENTS:
        action = next(a for a in parser._actions if a.dest == arg.name)
        assert action.default is None
        assert plan.argument_descriptions()[arg.name] in action.help
        assert f"[default: {arg.default!r}]" in action.help


@pytest.mark.parametrize("argv", [["robot:=x"], ["--robot", "x"], ["rviz:=true", "--rviz", "false"],
                                  ["--duration", "0"], ["--use-si", "true"], ["--dry-runn"]])
def test_cli_refuses_unknown_or_repeated_arguments(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        bringup.main(argv)
    assert exc.value.code == 2


@pytest.mark.parametrize("argv, said", [
    (["--duration", "nan"], "--duration must be a positive number of seconds, not nan"),
    (["--duration", "inf"], "--duration must be a positive number of seconds, not inf"),
    (["--duration", "-1"], "--duration must be a positive number of seconds, not -1"),
    (["--stop-timeout", "nan"], "--stop-timeout must be a number of seconds, 0 or more, not nan"),
    (["--stop-timeout", "inf"], "--stop-timeout must be a number of seconds, 0 or more, not inf"),
    (["--stop-timeout", "-0.5"], "--stop-timeout must be a number of seconds, 0 or more, not -0.5"),
])
def test_cli_refuses_times_that_are_not_finite_or_out_of_range(argv, said, capsys):
    """A NaN stop timeout made the stop wait raise and SIGKILL the driver before it stopped
    the robot; an infinite duration overflowed the first wait."""
    with pytest.raises(SystemExit) as exc:
        bringup.parse_command_line(argv)
    assert exc.value.code == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("name, nodes", [
    ("local_port", "cozmo_driver"), ("use_sim_time", "every node"), ("fps", "cozmo_face"),
    ("tick_rate", "cozmo_behavior"), ("cmd_vel_stamped", "cozmo_driver and cozmo_behavior"),
])
def test_a_node_parameter_is_said_to_be_one_with_no_suggestion(name, nodes):
    """local_port:=6000 was offered 'robot_port', use_sim_time:=true 'use_sim' (close names
    that would do something else): a node's parameter is said to be one, for the
    parameter file."""
    with pytest.raises(plan.PlanError) as exc:
        plan.check_argument_names(["use_sim", name])
    message = str(exc.value)
    assert message.startswith(f"unknown argument {name!r} (a parameter of {nodes}, not an argument "
                              "of the bring-up: set it in the parameter file given with config:=); "
                              "the arguments are: "), message
    assert "did you mean" not in message


@pytest.mark.parametrize("argv", [["local_port:=6000"], ["--local-port", "6000"]])
def test_cli_says_a_node_parameter_is_one(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        bringup.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "'local_port' (a parameter of cozmo_driver, not an argument of the bring-up" in err, err


@pytest.mark.parametrize("argv, name, suggestion", [
    (["use_simm:=true"], "use_simm", "use_sim"),
    (["namspace:=robot1", "use_sim:=true"], "namspace", "namespace"),
    (["--use-simm", "true"], "use_simm", "use_sim"),
    (["--enable_fase=true"], "enable_fase", "enable_face"),
])
def test_cli_refuses_a_misspelt_argument_as_the_launch_file_does(argv, name, suggestion, capsys):
    with pytest.raises(SystemExit) as exc:
        bringup.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    # the plan's message: the same words as ros2 launch prints for cozmo.launch.py
    with pytest.raises(plan.PlanError) as expected:
        plan.check_argument_names([name])
    assert str(expected.value) in err
    assert f"did you mean {suggestion!r}?" in err


def test_missing_executables_are_skipped_with_a_message():
    entries = plan.make_plan(plan.resolve_arguments({"enable_face": "true",
                                                     "enable_behavior": "true", "rviz": "true"}))
    installed = {"cozmo_driver_node", "cozmo_description_publisher"}
    said = []
    runner = bringup.Bringup(
        entries, locate=lambda pkg, exe: Path("/opt/bin", exe) if exe in installed else None,
        say=said.append)
    try:
        commands = runner.resolve()
    finally:
        if runner.parameter_directory:
            shutil.rmtree(runner.parameter_directory)
    assert [entry.executable for entry, _ in commands] == ["cozmo_driver_node",
                                                           "cozmo_description_publisher"]
    assert "cozmo_face_node is not installed yet: skipped" in said
    assert "cozmo_behavior_node is not installed yet: skipped" in said
    assert any(s.startswith("rviz2 is not installed") for s in said)
    assert any("robot_state_publisher is not installed" in s for s in said)
    # the description goes into a parameter file, not onto the command line
    _, command = commands[1]
    assert command[0] == "/opt/bin/cozmo_description_publisher"
    assert "--params-file" in command and not any("<robot" in part for part in command)


def test_a_missing_driver_is_an_error():
    entries = plan.make_plan(plan.resolve_arguments())
    runner = bringup.Bringup(entries, locate=lambda pkg, exe: None, say=lambda s: None)
    with pytest.raises(plan.PlanError, match="cozmo_driver_node .* is not installed"):
        runner.resolve()


def test_dry_run_prints_the_commands(capsys):
    assert bringup.main(["use_sim:=true", "sim_port:=5611", "namespace:=robot7", "--dry-run"]) == 0
    out = capsys.readouterr().out
    kept = [line.split()[-2] for line in out.splitlines() if line.startswith("# parameter files")]
    for directory in kept:
        shutil.rmtree(directory, ignore_errors=True)
    assert "cozmo-sim --host 127.0.0.1 --port 5611 --quiet" in out
    assert "cozmo_driver_node --ros-args -r __node:=cozmo_driver -r __ns:=/robot7" in out
    # the plan's values, in the parameter files it shows
    assert "#     /robot7/cozmo_driver:" in out and "#         frame_prefix: robot7/" in out


@pytest.mark.parametrize("argv", [["use_sim:=perhaps"], ["use_sim:=True"], ["--use-sim", "1"]])
def test_bad_argument_values_exit_with_status_2(argv, capsys):
    assert bringup.main(argv) == 2
    assert "use_sim:=" in capsys.readouterr().err


# ------------------------------------------------------------------ one source of truth


def _launch_tree() -> ast.Module:
    return ast.parse(LAUNCH_FILE.read_text(), filename=str(LAUNCH_FILE))


def test_launch_file_takes_everything_from_the_plan():
    tree = _launch_tree()
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert any(node.module == "cozmo_driver" and [a.name for a in node.names] == ["bringup_plan"]
               for node in imports)
    attributes = {node.attr for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id == "plan"}
    assert {"ARGUMENTS", "resolve_arguments", "make_plan", "skip_message", "parameter_files",
            "child_environment", "check_argument_names"} <= attributes
    # DeclareLaunchArgument only with the plan's values, never a literal default
    declares = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "DeclareLaunchArgument"]
    assert len(declares) == 1
    keywords = {k.arg: k.value for k in declares[0].keywords}
    assert ast.unparse(keywords["default_value"]) == "arg.default"
    assert ast.unparse(keywords["description"]) == "arg.description"
    assert "arg.choices" in ast.unparse(keywords["choices"])
    assert not isinstance(declares[0].args[0], ast.Constant)
    # no argument default, executable or package name spelled in the launch file
    constants = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                 and isinstance(node.value, str)}
    spelled = {arg.name for arg in plan.ARGUMENTS} | {
        arg.default for arg in plan.ARGUMENTS if arg.default}
    spelled |= {"cozmo_driver_node", "cozmo-sim", "robot_state_publisher", "rviz2",
                "cozmo_description_publisher", "cozmo_face_node", "cozmo_behavior_node",
                "127.0.0.1", "cozmo_description"}
    assert not constants & spelled


def test_launch_file_imports_without_launch():
    spec = importlib.util.spec_from_file_location("cozmo_launch_under_test", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.plan is plan
    assert callable(module.generate_launch_description)
    # nothing of launch, launch_ros or launch_testing at the top: loading the module above
    # cannot tell, since from the repository root `import launch` finds the launch/
    # directory as a namespace package where the real launch is not installed
    imported = []
    for node in _launch_tree().body:
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imported.append(node.module or "")
    assert imported and not [name for name in imported if name.split(".")[0].startswith("launch")]


def test_launch_file_builds_a_description_where_launch_is_installed():
    # launch_ros first: from the repository root, `import launch` would find the launch/
    # directory as a namespace package where the real launch is not installed
    from ros_tools import need_module
    need_module("launch_ros")
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    spec = importlib.util.spec_from_file_location("cozmo_launch_real", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    declared = {e.name: e for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    assert list(declared) == ARGUMENT_NAMES
    for arg in plan.ARGUMENTS:
        assert declared[arg.name].choices == (list(arg.choices) if arg.choices else None)
        assert declared[arg.name].description.startswith(arg.description)
    # the command line is checked first, before the arguments take their defaults
    first = description.entities[0]
    assert isinstance(first, OpaqueFunction)


def test_readme_table_lists_every_argument_with_its_default():
    # the argument table of its section (other tables name parameters such as frame_prefix)
    section = BRINGUP_DOC.read_text().split("## One plan, two front-ends", 1)[1].split("\n## ", 1)[0]
    table = section.split("| argument | default | meaning |", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    for arg in plan.ARGUMENTS:
        assert arg.name in rows, arg.name
        assert rows[arg.name] == (f"`{arg.default}`" if arg.default else "(empty)"), arg.name


# ------------------------------------------------------------------ one process


def test_one_process_runs_the_enabled_nodes_in_one_stack_entry():
    entries = plan.make_plan(plan.resolve_arguments({
        "namespace": "r9", "use_sim": "true", "enable_face": "true", "one_process": "true"}))
    by_name = entries_by_name(entries)
    stack = by_name["stack"]
    assert [e.name for e in entries if e.enabled] == ["simulator", "stack"]
    assert (stack.executable, stack.required, stack.namespace) == ("cozmo_stack", True, "r9")
    # the description by its Python publisher; behavior is off
    assert [m.name for m in stack.members] == ["driver", "description_publisher", "face"]
    assert stack.members[0] == plan.replace(by_name["driver"], enabled=True, condition="always")
    for name in ("driver", "robot_state_publisher", "face", "behavior"):
        assert not by_name[name].enabled and by_name[name].condition.endswith("not one_process")


def test_stack_arguments_give_each_node_its_own_ros_arguments(tmp_path):
    stack = make(namespace="r9", use_sim="true", enable_behavior="true",
                 one_process="true")["stack"]
    args = plan.stack_arguments(stack, lambda m: plan.parameter_files(m, tmp_path))
    assert args[-1] == "--"
    sections, current = [], []
    for token in args:
        if token == "--":
            sections.append(current)
            current = []
        else:
            current.append(token)
    assert [section[1] for section in sections] == ["driver", "description_publisher",
                                                    "behavior"]
    for section, member in zip(sections, stack.members):
        files = plan.parameter_files(member, tmp_path)
        assert section == ["--node", member.name, *member.ros_arguments(files)]
    # a namespace given by the launch file (a parent's PushRosNamespace) names every node
    pushed = plan.stack_arguments(stack, lambda m: [], namespace="fleet/r9")
    assert pushed.count("__ns:=/fleet/r9") == 3 and "__ns:=/r9" not in pushed


def test_without_one_process_the_stack_is_off():
    entries = plan.make_plan(plan.resolve_arguments({"enable_face": "true"}))
    assert [e.name for e in entries if e.enabled] == ["driver", "robot_state_publisher", "face"]
    with pytest.raises(plan.PlanError, match="one_process"):
        plan.resolve_arguments({"one_process": "yes"})


def test_every_example_of_the_launch_files_docstring_is_accepted_by_the_plan():
    """The usage lines at the top of cozmo.launch.py are what users copy: each one's
    ``name:=value`` arguments (a ``...`` placeholder filled in with an address) resolve."""
    doc = ast.get_docstring(ast.parse(LAUNCH_FILE.read_text()))
    examples = [line.split("cozmo.launch.py", 1)[1].split("#")[0].split()
                for line in doc.splitlines() if line.strip().startswith("ros2 launch")]
    examples = [[word for word in words if ":=" in word] for words in examples]
    assert len([words for words in examples if words]) >= 3, doc
    for words in examples:
        values = dict(word.split(":=", 1) for word in words)
        values = {name: "127.0.0.1" if value == "..." else value for name, value in values.items()}
        plan.resolve_arguments(values)  # raises PlanError for a refused example
