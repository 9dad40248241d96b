"""Every test leaves this process's handling of SIGINT, SIGTERM, SIGHUP and SIGTSTP as it found it.

Some tests run a program's ``main()`` in pytest's own process, and a program may change
how its process handles the stop signals for good (``cozmo-sim`` ends by ignoring SIGINT
and SIGTERM). A signal ignored here is ignored in every process a later test of this
process starts, since an ignored disposition survives fork and exec: once, the children
of test_lifeline's parents then outlived them. The guard below compares the handlers
before and after each test; a test that changed one fails with the signal named, and
the handler is put back, so that the tests after it run as they would alone.
"""

from __future__ import annotations

import signal
from typing import Any, Dict, Iterator

import pytest

#: the stop signals, and Ctrl-Z's, whose handling a test must leave as it was
GUARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP)


def _describe(handler: Any) -> str:
    if isinstance(handler, signal.Handlers):
        return handler.name
    return getattr(handler, "__qualname__", repr(handler))


@pytest.fixture(autouse=True)
def _stop_signals_left_as_found() -> Iterator[None]:
    before: Dict[int, Any] = {sig: signal.getsignal(sig) for sig in GUARDED_SIGNALS}
    yield
    changed = []
    for sig, handler in before.items():
        now = signal.getsignal(sig)
        if now != handler:
            changed.append(f"{signal.Signals(sig).name}: {_describe(handler)} -> {_describe(now)}")
            signal.signal(sig, handler)
    if changed:
        pytest.fail("the test left how this process handles a stop signal changed (put back "
                    "now; restore it in the test): " + "; ".join(changed), pytrace=False)
