"""Test-run isolation for every test under test/.

Imported by pytest before any test module, hence before anything imports
rclpy. At import it:

* keeps DDS discovery on this machine: ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST,
  ROS_STATIC_PEERS removed, and ROS_LOCALHOST_ONLY=1 on Humble (which reads only
  that) or removed elsewhere (the Jazzy wheels ignore it; the default range would
  multicast on the LAN): cozmo_driver.domain_reservation.keep_discovery_local;
* gives the run a ROS_DOMAIN_ID of its own, so that concurrent runs on one
  machine never see each other's topics. A caller that already set
  ROS_DOMAIN_ID keeps it in a serial run. Otherwise a free id is reserved by
  binding a loopback TCP and UDP port derived from it (32768 + id, the convention of
  ament's domain_coordinator, so runs of both schemes avoid each other); the
  sockets stay bound until the run ends;
* sets ROS_PYTHON_CHECK_FIELDS=1: every generated message class checks its
  fields' types on assignment (an int in a float64 field is an error), in this
  process and in the processes the tests start;
* sets ROS_HOME to a temporary directory of the run's own (ROS_LOG_DIR to where the
  logs went before): no driver a test starts reads or saves a camera calibration in
  the user's ~/.ros/camera_info.

In a parallel run (pytest-xdist, ``./dev test``'s default) each worker reserves a
ROS_DOMAIN_ID of its own, also when the caller set one; test/fixtures_parallel.py has
the rest of what such a run needs.

It also makes the test-only reference implementation, pycozmo 0.8.0,
importable on Python 3.13, which removed the stdlib module ``chunk`` that
pycozmo imports: test/chunk_shim.py stands in for it there.

It provides the ``rclpy_context`` fixture (one ``rclpy.Context`` per test) and
``ros_domain_id``. Other fixtures live in their own ``test/fixtures_*.py``
files, which are loaded here as plugins.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dependencies import require  # this directory is on sys.path (no __init__.py here)

from cozmo_driver.domain_reservation import RESERVATION_PORT_BASE, hold_domain_id, keep_discovery_local

# ----------------------------------------------------------------------------
# Environment: must run before rclpy is imported anywhere.

keep_discovery_local(os.environ)
# The UDP transport (and every driver process a test starts, which inherits this)
# refuses any robot address outside 127.0.0.0/8: no test can reach a real robot.
os.environ["COZMO_LOOPBACK_ONLY"] = "1"
# rclpy's generated message classes check every field's type on assignment: an int put
# into a float64 field raises here (in this process and in every process a test starts),
# where a colcon build with C asserts on aborts the process and a Release build sends
# garbage (an int 3 arrives as 5e-324). Read by each message module when it is imported.
os.environ["ROS_PYTHON_CHECK_FIELDS"] = "1"
# ${ROS_HOME}, where a driver without camera_info_url reads and saves its camera calibration
# (camera_info/cozmo_camera.yaml), is a directory of this run's own, removed at its end: no
# test takes a calibration the user saved in ~/.ros for the robot's, nor saves one there.
# ROS's log files stay where they were ($ROS_LOG_DIR, else the user's ROS_HOME's log/).
_USER_ROS_HOME = os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")
os.environ.setdefault("ROS_LOG_DIR", os.path.join(_USER_ROS_HOME, "log"))
os.environ["ROS_HOME"] = tempfile.mkdtemp(prefix="cozmo-test-ros-home-")
atexit.register(shutil.rmtree, os.environ["ROS_HOME"], True)

# Domain ids 1..100 keep Fast DDS's ports (7400 + 250 * id + offsets) below the
# reservation ports, and 0 is everyone's default domain.
DOMAIN_ID_RANGE = range(1, 101)


@dataclass
class DomainReservation:
    """The ROS_DOMAIN_ID of this run and how it was obtained."""

    domain_id: int
    # Empty when the caller chose the id through the environment.
    sockets: list[socket.socket] = field(default_factory=list)

    @property
    def reserved_here(self) -> bool:
        return bool(self.sockets)

    @property
    def port(self) -> int:
        return RESERVATION_PORT_BASE + self.domain_id

    def describe(self) -> str:
        if self.reserved_here:
            return f"ROS_DOMAIN_ID={self.domain_id} (reserved: 127.0.0.1:{self.port} tcp+udp)"
        return f"ROS_DOMAIN_ID={self.domain_id} (set by the caller)"

    def release(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()



#: set beside ROS_DOMAIN_ID when this conftest reserved the id (not the caller)
_RESERVED_BY = "COZMO_TEST_DOMAIN_RESERVED_BY"


def reserve_domain_id() -> DomainReservation:
    """Return the caller's ROS_DOMAIN_ID, or reserve a free one and export it. A worker of
    a parallel run reserves one of its own whoever set the run's: the workers' tests use
    the same node and action names, and in one domain a test's action client took the
    other worker's servers for its own."""
    preset = os.environ.get("ROS_DOMAIN_ID", "").strip()
    skip: tuple = ()
    if preset and os.environ.get("PYTEST_XDIST_WORKER"):
        if not os.environ.get(_RESERVED_BY):
            skip = (int(preset),)  # the caller's, which nothing here holds
        preset = ""
    if preset:
        return DomainReservation(int(preset))
    # Start at a per-process offset so that runs started together do not all
    # race for the same first id.
    reservation = hold_free_domain_id(start=os.getpid(), skip=skip)
    os.environ["ROS_DOMAIN_ID"] = str(reservation.domain_id)
    os.environ[_RESERVED_BY] = str(os.getpid())
    return reservation


def hold_free_domain_id(start: int = 0, skip: tuple = ()) -> DomainReservation:
    """Reserve the first free id of DOMAIN_ID_RANGE (not in ``skip``), looking from the
    one at index ``start`` (modulo the range's length) on, round."""
    ids = list(DOMAIN_ID_RANGE)
    start %= len(ids)
    for domain_id in ids[start:] + ids[:start]:
        if domain_id in skip:
            continue
        sockets = hold_domain_id(domain_id)
        if sockets is not None:
            return DomainReservation(domain_id, sockets)
    raise RuntimeError(
        f"no free ROS_DOMAIN_ID in {DOMAIN_ID_RANGE.start}..{DOMAIN_ID_RANGE.stop - 1}: "
        f"ports {RESERVATION_PORT_BASE + DOMAIN_ID_RANGE.start}.."
        f"{RESERVATION_PORT_BASE + DOMAIN_ID_RANGE.stop - 1} on 127.0.0.1 are all taken"
    )


DOMAIN = reserve_domain_id()

# ----------------------------------------------------------------------------
# pycozmo (the test-only oracle) imports `chunk`, gone since Python 3.13.

import chunk_shim  # noqa: E402  (this directory is on sys.path: no __init__.py here)

chunk_shim.install()

# ----------------------------------------------------------------------------
# Fixture modules of other areas: test/fixtures_*.py, loaded as plugins.

pytest_plugins = sorted(path.stem for path in Path(__file__).parent.glob("fixtures_*.py"))


# ----------------------------------------------------------------------------
# Hooks and fixtures.


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [
        f"ros isolation: {DOMAIN.describe()}, "
        f"ROS_AUTOMATIC_DISCOVERY_RANGE={os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE']}"
    ]


def pytest_unconfigure(config: pytest.Config) -> None:
    DOMAIN.release()


@pytest.fixture(scope="session")
def ros_domain_id() -> int:
    """The ROS_DOMAIN_ID every rclpy context of this run uses."""
    return DOMAIN.domain_id


@pytest.fixture(scope="session")
def ros_domain_reservation() -> DomainReservation:
    """How this run's ROS_DOMAIN_ID was obtained (for the isolation tests)."""
    return DOMAIN


@pytest.fixture
def private_rclpy_context():
    """An initialised ``rclpy.Context`` on a ROS_DOMAIN_ID of its own, reserved as the
    run's is and released after the test: a graph with nothing of the other tests in it
    (a node an earlier test left behind may linger in the run's graph for a while), and
    never another run's or another worker's domain."""
    import rclpy
    reservation = hold_free_domain_id(skip=(DOMAIN.domain_id,))
    context = rclpy.Context()
    try:
        rclpy.init(context=context, domain_id=reservation.domain_id)
        yield context
    finally:
        context.try_shutdown()
        reservation.release()


@pytest.fixture
def rclpy_context():
    """A fresh, initialised ``rclpy.Context`` for one test, shut down after it.

    Where rclpy cannot be imported the test fails in ./dev's runs and skips in a run by
    hand, naming the ImportError (test/dependencies.py); any other failure to initialise
    is a test error.
    """
    rclpy = require("rclpy")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=DOMAIN.domain_id)
    try:
        yield context
    finally:
        context.try_shutdown()
