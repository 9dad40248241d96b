"""ROS 2 driver for the Anki Cozmo robot over its Wi-Fi UDP protocol.

Layers, each importable on its own: ``protocol`` (pure wire format and
session), ``transport`` (the UDP adapter), ``client`` (typed robot API), the
ROS 2 nodes on top, and ``sim`` (a simulated robot for tests and demos).
"""

import os as _os

# The camera and display codecs do many small numpy products. OpenBLAS's worker
# threads spin while idle and, measured on a 2-core machine, tripled the CPU a
# colour frame costs. One thread is the right default for a robot driver; a
# value the user sets is kept. (Effective only where numpy is not yet imported.)
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
