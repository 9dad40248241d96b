"""ROS 2 driver for the Anki Cozmo robot over its Wi-Fi UDP protocol.

Layers, each importable on its own: ``protocol`` (pure wire format and
session), ``transport`` (the UDP adapter), ``client`` (typed robot API), the
ROS 2 nodes on top, and ``sim`` (a simulated robot for tests and demos).
"""

__version__ = "0.1.0"
