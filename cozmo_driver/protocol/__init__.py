"""The pure Cozmo protocol: frames, messages, the ARQ session and the codecs.

Nothing here touches a socket, a thread or a clock: time is always an argument.
"""
