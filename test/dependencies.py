"""The test dependencies every set-up installs: rclpy (the ROS 2 Jazzy wheels, or the
distro's), and what tools/requirements-dev.txt pins, pycozmo (the test-only reference, the
oracle of the protocol, codec and simulator tests) and flatbuffers (pycozmo's dependency,
with which the tests write .bin clips) among them.

:func:`require` imports one. Where it cannot be imported the test is skipped, the reason
naming the ImportError, in a run of pytest by hand; in ./dev's runs, which installed them
all (``COZMO_REQUIRE_TEST_DEPS=1``, and ``COZMO_REQUIRE_ROS_TOOLS=1`` of the kit and ROS runs), it
fails instead: a broken install cannot pass there by skipping the tests that need it.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

import pytest

__all__ = ["REQUIRED", "require", "unavailable"]

#: whether every test dependency must be there: set by ./dev's test runs
REQUIRED = "1" in (os.environ.get("COZMO_REQUIRE_TEST_DEPS"), os.environ.get("COZMO_REQUIRE_ROS_TOOLS"))


def unavailable(reason: str) -> None:
    """Fail where the test dependencies must be there (:data:`REQUIRED`), else skip (also
    at a module's level)."""
    if REQUIRED:
        pytest.fail(f"{reason}; ./dev's test runs install every test dependency (./dev setup; "
                    "tools/requirements-dev.txt)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require(name: str, why: str = "") -> ModuleType:
    """Import module ``name``, a test dependency (``why``: what it is to the test), or
    :func:`unavailable`. Warnings of its import are not shown (as pytest.importorskip: pycozmo's
    import of the stdlib module ``chunk`` is deprecated on Python 3.11 and 3.12)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except ImportError as exc:
        unavailable(f"cannot import {name}{f' ({why})' if why else ''}: {type(exc).__name__}: {exc}")
    raise AssertionError("unreachable")  # pragma: no cover - unavailable() does not return
