"""Benchmark of the procedural face: render and encode per frame, ours beside the reference.

Run:  PYTHONPATH=. python bench/bench_face.py [--quick]

Prints the median and 90th-percentile wall time per frame in microseconds for
rendering (the full 128x64 screen, and only the even rows the protocol carries),
run-length encoding into a DisplayImage, both together, a whole animation tick
(interpolate two faces, render, encode), and the face animator's frame.  The
reference column (pycozmo's ``ProceduralFace.render()`` and its
``ImageEncoder``, on its default face, with the same even-row reduction it does
itself) is filled only when pycozmo is installed; it is imported here and
nowhere in the package.  Numbers only: nothing is asserted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from _common import bench_report, comparison, measure

from cozmo_driver.face.expressions import EXPRESSIONS, FaceAnimator
from cozmo_driver.face.procedural import FaceParams, FaceRenderer, interpolate_arrays
from cozmo_driver.protocol.display import encode_display, fit_to_frame



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    reps, secs = (50, 0.1) if args.quick else (500, 1.0)

    try:
        import pycozmo.image_encoder as ref_encoder
        import pycozmo.procedural_face as ref_face
        from PIL import Image
    except ImportError:
        ref_face = ref_encoder = None
        print("pycozmo not installed: reference column skipped")

    renderer = FaceRenderer()
    rows: list[tuple[str, tuple[float, float, int], tuple[float, float, int] | None]] = []

    def bench(name: str, ours: Callable[[], object], ref: Callable[[], object] | None = None) -> None:
        rows.append((name, measure(ours, reps, secs), measure(ref, reps, secs) if ref else None))

    default = FaceParams()
    angry = EXPRESSIONS["angry"]
    ref_default = ref_face.ProceduralFace() if ref_face else None

    def ref_even_rows():
        im = ref_default.render()
        return Image.fromarray(np.array(im)[::2])  # what pycozmo's face generator does

    ref_small = ref_even_rows() if ref_face else None
    bits_default = renderer.render_display(default)
    bits_angry = renderer.render_display(angry)
    print(f"DisplayImage bytes: default face {len(encode_display(bits_default))} B, "
          f"angry {len(encode_display(bits_angry))} B"
          + (f", pycozmo default {len(ref_encoder.ImageEncoder(ref_small).encode())} B" if ref_face else ""))

    bench("render 128x64, default face", lambda: renderer.render(default),
          (lambda: ref_default.render()) if ref_face else None)
    bench("render even rows (128x32), default face", lambda: renderer.render_display(default),
          ref_even_rows if ref_face else None)
    bench("render even rows, angry (lids, angles)", lambda: renderer.render_display(angry))
    bench("encode DisplayImage (fit_to_frame), default face", lambda: fit_to_frame(bits_default),
          (lambda: ref_encoder.ImageEncoder(ref_small).encode()) if ref_face else None)
    bench("render even rows + encode, default face", lambda: fit_to_frame(renderer.render_display(default)),
          (lambda: ref_encoder.ImageEncoder(ref_even_rows()).encode()) if ref_face else None)
    a, b = EXPRESSIONS["neutral"].to_array(), EXPRESSIONS["surprised"].to_array()
    bench("animation tick: interpolate + render + encode",
          lambda: fit_to_frame(renderer.render_display(interpolate_arrays(a, b, 0.37))))
    animator = FaceAnimator(seed=1)
    clock = iter(np.arange(0.0, 1e6, 1 / 30))
    bench("FaceAnimator.frame (blinks, saccades)", lambda: animator.frame(next(clock)))

    comparison(rows, "per frame", "times in microseconds per frame; median and 90th percentile; "
               "the budget at 30 fps is 33 333 us")


if __name__ == "__main__":
    with bench_report("bench_face"):
        main()
