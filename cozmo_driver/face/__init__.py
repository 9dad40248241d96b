"""Cozmo's procedural face: parameters, rendering, expressions and idle life.

Pure: no clock, no I/O.  :mod:`.procedural` renders the 43 parameters;
:mod:`.expressions` names faces, moves the gaze and animates them over time.
"""

from .procedural import (
    ANKI_GEOMETRY,
    EYE_PARAM_NAMES,
    FACE_HEIGHT_PX,
    FACE_PARAM_NAMES,
    FACE_WIDTH_PX,
    NUM_PARAMS,
    PARAM_NAMES,
    PYCOZMO_GEOMETRY,
    EyeParams,
    FaceGeometry,
    FaceParams,
    FaceRenderer,
    interpolate,
    render_face,
)

__all__ = [
    "ANKI_GEOMETRY",
    "EYE_PARAM_NAMES",
    "FACE_HEIGHT_PX",
    "FACE_PARAM_NAMES",
    "FACE_WIDTH_PX",
    "NUM_PARAMS",
    "PARAM_NAMES",
    "PYCOZMO_GEOMETRY",
    "EyeParams",
    "FaceGeometry",
    "FaceParams",
    "FaceRenderer",
    "interpolate",
    "render_face",
]
