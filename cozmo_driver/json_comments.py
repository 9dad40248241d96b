"""JSON with ``//`` and ``/* */`` comments, as the Cozmo app's resource files are written.

Shared by the readers of the app's resources: the behavior engine's
(:mod:`cozmo_driver.behavior.app_resources`) and the animation groups'
(:func:`cozmo_driver.anim.clip.load_animation_groups`). :func:`loads` also says which keys
an object gives twice, of which ``json`` keeps the last without a word. Pure.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

__all__ = ["loads", "strip_json_comments"]


def loads(text: str, comments: bool = True) -> Tuple[Any, List[str]]:
    """The JSON document of ``text`` (its comments removed first, unless ``comments`` is
    false), and each key an object of it gives twice, in the order found (``json.loads``
    keeps the last copy). Raises what ``json.loads`` raises."""
    twice: List[str] = []

    def mapping(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
        result: Dict[str, Any] = {}
        for key, value in pairs:
            if key in result and key not in twice:
                twice.append(key)
            result[key] = value
        return result

    return json.loads(strip_json_comments(text) if comments else text, object_pairs_hook=mapping), twice


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
