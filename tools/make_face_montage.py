#!/usr/bin/env python3
"""Draw every golden expression render into one picture, for the README.

    .venv/bin/python tools/make_face_montage.py      # -> docs/images/face_expressions.png

The golden renders (``test/golden/face/<expression>.png``, 128 x 64, white =
lit) are what ``test/media/test_face_procedural.py`` compares the renderer against,
pixel for pixel. This montage shows them all at once, each pixel an OLED dot
as in the demo's ``face.png`` (:func:`cozmo_driver.demo_artifacts.face_picture`),
named underneath, in the order of the expression library, so that a change to
a golden can be reviewed by eye in the README's diff. Run it after updating
the goldens (``COZMO_UPDATE_GOLDEN=1``); the test ``test_the_montage_shows_the_goldens``
says when it is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "test" / "golden" / "face"
TARGET = ROOT / "docs" / "images" / "face_expressions.png"

COLUMNS = 4
SCALE = 3           # screen pixel -> SCALE x SCALE dot (one of them the gap)
BORDER = 6          # the black bezel around each screen
LABEL_H = 22        # the name under each screen
MARGIN = 10         # around and between the tiles
BACKGROUND = (0, 0, 0)
LABEL_RGB = (220, 220, 220)


def golden_screens(directory: Path = GOLDEN) -> List[Tuple[str, np.ndarray]]:
    """(name, (64, 128) bool) of every golden, in the expression library's order."""
    from cozmo_driver.face.expressions import EXPRESSIONS

    files: Dict[str, Path] = {p.stem: p for p in sorted(directory.glob("*.png"))}
    order = [n for n in EXPRESSIONS if n in files] + sorted(set(files) - set(EXPRESSIONS))
    return [(n, np.asarray(Image.open(files[n]).convert("L")) >= 128) for n in order]


def tile_size() -> Tuple[int, int]:
    """(width, height) of one screen picture, without its label."""
    return 128 * SCALE + 2 * BORDER, 64 * SCALE + 2 * BORDER


def tile_origin(index: int) -> Tuple[int, int]:
    """(x, y) of the top-left corner of the ``index``-th screen picture in the montage."""
    w, h = tile_size()
    row, col = divmod(index, COLUMNS)
    return MARGIN + col * (w + MARGIN), MARGIN + row * (h + LABEL_H + MARGIN)


def montage(screens: List[Tuple[str, np.ndarray]]) -> Image.Image:
    from cozmo_driver.demo_artifacts import face_picture

    w, h = tile_size()
    rows = -(-len(screens) // COLUMNS)
    image = Image.new("RGB", (MARGIN + COLUMNS * (w + MARGIN), MARGIN + rows * (h + LABEL_H + MARGIN)),
                      BACKGROUND)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=16)
    for i, (name, screen) in enumerate(screens):
        x, y = tile_origin(i)
        image.paste(face_picture(screen, scale=SCALE, border=BORDER), (x, y))
        text_w = draw.textlength(name, font=font)
        draw.text((x + (w - text_w) / 2, y + h + 2), name, fill=LABEL_RGB, font=font)
    return image


def main() -> int:
    screens = golden_screens()
    if not screens:
        print(f"no golden renders in {GOLDEN}")
        return 1
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    montage(screens).save(TARGET, optimize=True)
    print(f"{TARGET.relative_to(ROOT)}: {len(screens)} expressions, {TARGET.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
