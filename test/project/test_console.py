"""cozmo_driver.console: a line for the user on an output that may be gone."""

from __future__ import annotations

import io

from cozmo_driver.console import say


class _Gone(io.StringIO):
    """An output whose reader left (EPIPE) or whose terminal hung up (EIO)."""

    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


def test_say_writes_a_line_and_drops_one_its_output_no_longer_takes():
    out = io.StringIO()
    assert say("cozmo-sim: stopped", file=out) is True
    assert out.getvalue() == "cozmo-sim: stopped\n"
    assert say("lost", file=_Gone(BrokenPipeError(32, "Broken pipe"))) is False
    assert say("lost", file=_Gone(OSError(5, "Input/output error"))) is False
    out.close()
    assert say("lost", file=out) is False  # ValueError: I/O operation on closed file
