"""The one error tree (cozmo_driver/errors.py), checked over every module of the package.

Every exception class the package defines derives from CozmoError; none derives from
two of the fault categories (remote, usage, configuration); every class that some
module raises derives from exactly one of them, so that a caller can tell who has to
act. Families (ProtocolError, TransportError) take no category and are never raised.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import cozmo_driver
from cozmo_driver.errors import CATEGORIES, ConfigurationError, CozmoError, RemoteError, UsageError

PACKAGE = Path(cozmo_driver.__file__).resolve().parent

#: stand-ins that cozmo_driver.ros._entry defines only where an old rclpy lacks its own
RCLPY_STAND_INS = {"ExternalShutdownException", "InvalidHandle"}


def _modules():
    names = [cozmo_driver.__name__]
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="cozmo_driver."):
        names.append(info.name)
    return sorted(names)


def _exception_classes():
    found = {}
    for name in _modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BaseException)
                    and value.__module__ == name and value.__name__ not in RCLPY_STAND_INS):
                found[f"{name}.{value.__qualname__}"] = value
    return found


def _raised_names():
    """Names of the classes in `raise Name(...)` / `raise Name` over the package's source."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name):
                    names.add(exc.id)
                elif isinstance(exc, ast.Attribute):
                    names.add(exc.attr)
    return names


CLASSES = _exception_classes()


def test_the_package_defines_its_errors():
    # the scan sees the errors of every layer, not an empty list
    for expected in ("RemoteProtocolError", "AddressError", "CommandError", "PlanError",
                     "ClipFormatError", "ConfigError", "NonLoopbackAddressError"):
        assert any(path.endswith("." + expected) for path in CLASSES), expected


@pytest.mark.parametrize("path", sorted(CLASSES))
def test_every_error_derives_from_cozmo_error_and_at_most_one_category(path):
    cls = CLASSES[path]
    assert issubclass(cls, CozmoError), f"{path} does not derive from CozmoError"
    categories = [c.__name__ for c in CATEGORIES if issubclass(cls, c)]
    assert len(categories) <= 1, f"{path} is in two fault categories: {categories}"


def test_every_raised_error_says_who_is_at_fault():
    raised = _raised_names()
    by_name = {}
    for cls in CLASSES.values():
        by_name.setdefault(cls.__name__, []).append(cls)
    checked = 0
    for name in sorted(raised & set(by_name)):
        for cls in by_name[name]:
            categories = [c for c in CATEGORIES if issubclass(cls, c)]
            assert len(categories) == 1, (
                f"{cls.__module__}.{name} is raised but is in {len(categories)} fault categories "
                "(remote, usage, configuration): give it exactly one")
            checked += 1
    assert checked >= 10


def test_the_fault_categories_split_the_known_errors():
    from cozmo_driver.driver.commands import CommandError
    from cozmo_driver.protocol.errors import LocalProtocolError, RemoteProtocolError
    from cozmo_driver.transport.udp import AddressError, TransportError, TransportStateError

    assert issubclass(RemoteProtocolError, RemoteError)
    assert issubclass(LocalProtocolError, UsageError)
    assert issubclass(CommandError, UsageError) and issubclass(CommandError, ValueError)
    assert issubclass(AddressError, ConfigurationError) and issubclass(AddressError, TransportError)
    assert issubclass(TransportStateError, UsageError)
    # a family takes no category of its own
    assert not any(issubclass(TransportError, c) for c in CATEGORIES)


def test_a_refused_address_is_a_configuration_error_that_names_it():
    from cozmo_driver.transport.udp import resolve_address

    with pytest.raises(ConfigurationError, match="port 70000 is outside"):
        resolve_address("127.0.0.1", 70000)
