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
