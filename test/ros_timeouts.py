"""Bounds for waits on DDS discovery and on the driver's first connection in tests.

These are upper bounds, not expected durations: every wait returns as soon as its
condition holds, so a healthy run never pays them. On a loaded two-core CI machine
discovery between two participants has been seen to take more than 5 s, so the
bounds are generous; a test that reaches one has found a real failure (a server
that never appears), not a slow machine.
"""

# Until a publisher sees a subscriber, an action/service client sees its server.
DISCOVERY_TIMEOUT = 30.0
# Until a freshly started driver node reports that it is connected to the simulator.
CONNECT_TIMEOUT = 20.0


def discovered(spin_until, make, is_ready, destroy, what: str):
    """An entity from ``make()`` once ``is_ready(entity)``; made again if it is not after a while.

    On these machines a client has now and then (about 1 in 100 stress runs) never seen
    a server that was there all along, in the same participant, for the whole 30 s:
    a middleware flake, not our server, since a new client finds it at once. So the
    wait is cut in three and the entity made anew after each part, with a note on
    stderr; an entity that none of the three sees is a failure."""
    import sys

    attempts = 3
    for attempt in range(1, attempts + 1):
        entity = make()
        if spin_until(lambda: is_ready(entity), DISCOVERY_TIMEOUT / attempts):
            return entity
        destroy(entity)
        print(f"{what}: not discovered within {DISCOVERY_TIMEOUT / attempts:.0f} s "
              f"(attempt {attempt} of {attempts})", file=sys.stderr)
    raise AssertionError(f"{what}: not discovered within {DISCOVERY_TIMEOUT:.0f} s in {attempts} attempts")
