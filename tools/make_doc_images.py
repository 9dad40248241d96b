#!/usr/bin/env python3
"""Regenerate the README's pictures in docs/images/ from a run of the demo.

    .venv/bin/python tools/make_doc_images.py        # after ./dev setup

Runs ``cozmo-demo`` on the simulator (in this process, artefacts into a
temporary directory) and copies its camera snapshot, face display and
trajectory plot to ``docs/images/``, each made small enough (< 100 kB) to
commit. A face display without a lit pixel (no face node installed, so the
demo showed no face) does not replace the committed one: the script says so.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "images"
LIMIT = 100_000


def small_png(source: Path, target: Path) -> int:
    """Copy a PNG, as a palette image if that is what keeps it under LIMIT."""
    image = Image.open(source)
    image.load()
    for colours in (None, 256, 128, 64):
        candidate = image if colours is None else image.convert("RGB").quantize(colours)
        buffer = io.BytesIO()
        candidate.save(buffer, "PNG", optimize=True)
        if buffer.tell() < LIMIT:
            target.write_bytes(buffer.getvalue())
            return buffer.tell()
    raise SystemExit(f"{source} does not fit in {LIMIT} bytes")


def main() -> int:
    from cozmo_driver.domain_reservation import keep_discovery_local
    keep_discovery_local(os.environ, force=False)
    from cozmo_driver import demo
    from cozmo_driver.demo_artifacts import FACE_LIT_RGB

    DOCS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cozmo_doc_images_") as tmp:
        status = demo.main(["--artifacts", tmp])
        if status != 0:
            print(f"the demo failed (status {status}): docs/images/ left as it was")
            return status
        print()
        for name in ("camera.png", "trajectory.png", "face.png"):
            source = Path(tmp) / name
            if name == "face.png":
                pixels = np.asarray(Image.open(source).convert("RGB"))
                if not np.all(pixels == FACE_LIT_RGB, axis=2).any():
                    print("face.png: the demo showed no face (is cozmo_face_node installed?): "
                          "docs/images/face.png kept as it was")
                    continue
            size = small_png(source, DOCS / name)
            print(f"docs/images/{name}: {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
