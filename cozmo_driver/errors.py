"""The one error tree of the project, rooted at :class:`CozmoError`.

Everything the project raises on purpose derives from :class:`CozmoError`, and
every error that is raised says who is at fault by deriving from exactly one of
three categories:

* :class:`RemoteError`: the robot, or whatever answers at its address, did
  something wrong (bytes that are not the protocol, an answer that never comes).
  Nothing the caller can fix; the driver counts, reports and recovers.
* :class:`UsageError`: the calling program asked for something that cannot be
  done (a value that does not fit its field, a command out of range, a send on a
  closed session, an unknown name). The caller fixes its call.
* :class:`ConfigurationError`: the set-up is wrong (a file, a parameter, a
  launch argument, an address or port). The user fixes the configuration.

A *family* groups the errors of one layer whatever the fault, so that a caller
can catch every error of that layer: ``ProtocolError``
(:mod:`cozmo_driver.protocol.errors`) and ``TransportError``
(:mod:`cozmo_driver.transport.udp`). A family is never raised itself; each of its
members takes one category. Where an error also derives from a builtin
(``ValueError``, ``LookupError``), that is kept so that code catching the
builtin goes on working. ``test/project/test_errors.py`` checks all of this over every
module of the package.

This module imports nothing, so that every layer can use it.
"""

from __future__ import annotations

__all__ = ["CozmoError", "RemoteError", "UsageError", "ConfigurationError", "CATEGORIES"]


class CozmoError(Exception):
    """Root of every error this project raises on purpose."""


class RemoteError(CozmoError):
    """The robot (or whatever answers at its address) is at fault."""


class UsageError(CozmoError):
    """The calling program asked for something that cannot be done."""


class ConfigurationError(CozmoError):
    """A file, parameter, argument, address or port of the set-up is wrong."""


#: who is at fault: every error that is raised derives from exactly one of these
CATEGORIES = (RemoteError, UsageError, ConfigurationError)
