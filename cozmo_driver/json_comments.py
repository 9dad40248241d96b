"""JSON with ``//`` and ``/* */`` comments, as the Cozmo app's resource files are written.

Shared by the readers of the app's resources: the behavior engine's
(:mod:`cozmo_driver.behavior.app_resources`) and the animation groups'
(:func:`cozmo_driver.anim.clip.load_animation_groups`). Pure.
"""

from __future__ import annotations

from typing import List

__all__ = ["strip_json_comments"]


def strip_json_comments(text: str) -> str:
    """Remove ``//`` line and ``/* */`` block comments outside strings."""
    out: List[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)
