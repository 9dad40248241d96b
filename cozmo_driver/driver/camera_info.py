"""Camera intrinsics for sensor_msgs/CameraInfo, from the robot or from a file.

Where the calibration comes from, first match wins:

1. ``camera_info_url`` (or, in its place until the next configure, a calibration sent to
   camera/set_camera_info): a YAML file in the camera_info_manager format
   (``file:///path/cozmo.yaml`` or ``file://${ROS_HOME}/cozmo.yaml``; keys image_width, image_height, camera_name,
   camera_matrix, distortion_model, distortion_coefficients,
   rectification_matrix, projection_matrix); empty, camera_info_manager's default,
   :data:`DEFAULT_URL`, if that file exists (``${NAME}``: :func:`camera_name`, :func:`resolve_url`);
2. the robot's own factory calibration, read from its NV storage
   (NVEntry_CameraCalib, :mod:`cozmo_driver.protocol.nvstorage`);
3. :func:`default_camera_info`: an ideal pinhole for Cozmo's QVGA camera with a
   58 degree horizontal field of view (fx = fy = 160 / tan(29 deg) = 288.6 px,
   centre (160, 120), no distortion).

A calibration made at another resolution is scaled to the image size. The
robot's eight distortion terms are OpenCV's (k1, k2, p1, p2, k3, k4, k5, k6):
``rational_polynomial`` when k4..k6 are used, else ``plumb_bob`` with five.

A calibration sent to the driver (camera/set_camera_info) is checked as a file's is
(:func:`from_fields`) and written to the file of camera_info_url (or its default), in the same format
(:func:`camera_info_yaml`, :func:`save_camera_info_url`). Pure (PyYAML is imported only to
read a file).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat
from dataclasses import dataclass, replace
from typing import List, Sequence, TextIO
from urllib.parse import unquote, urlparse

from ..errors import ConfigurationError
from ..fast_yaml import safe_load
from ..protocol.nvstorage import CameraCalibration
from ..regular_files import NotAFileError, open_regular

__all__ = ["CameraInfoData", "CameraInfoError", "from_calibration", "default_camera_info",
           "parse_camera_info_yaml", "load_camera_info_url", "scaled", "DEFAULT_HFOV_RAD",
           "from_fields", "camera_info_yaml", "camera_info_path", "save_camera_info_url", "CAMERA_NAME",
           "DEFAULT_URL", "camera_name", "resolve_url"]

DEFAULT_HFOV_RAD = math.radians(58.0)
#: the camera's name (a driver in the root namespace): the camera_name of a file the driver writes
CAMERA_NAME = "cozmo_camera"
#: what an empty camera_info_url stands for, as in camera_info_manager (${NAME}: :func:`camera_name`)
DEFAULT_URL = "file://${ROS_HOME}/camera_info/${NAME}.yaml"


class CameraInfoError(ConfigurationError, ValueError):
    """A camera_info file or URL that cannot be used."""


@dataclass(frozen=True)
class CameraInfoData:
    width: int
    height: int
    distortion_model: str
    d: List[float]
    k: List[float]          # 3x3 row-major
    r: List[float]          # 3x3 row-major
    p: List[float]          # 3x4 row-major
    #: where it came from: "robot", "default" or the file's URL
    source: str


_IDENTITY = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]


def _from_intrinsics(width: int, height: int, fx: float, fy: float, cx: float, cy: float,
                     skew: float, dist: Sequence[float], source: str) -> CameraInfoData:
    dist = [float(x) for x in dist] + [0.0] * (8 - len(dist))
    if any(dist[5:8]):
        model, d = "rational_polynomial", dist[:8]
    else:
        model, d = "plumb_bob", dist[:5]
    k = [fx, skew, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]
    p = [fx, skew, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return CameraInfoData(width, height, model, d, k, list(_IDENTITY), p, source)


def from_calibration(calib: CameraCalibration, source: str = "robot") -> CameraInfoData:
    """CameraInfo of the robot's NV calibration (at its own resolution)."""
    values = (calib.focal_length_x, calib.focal_length_y, calib.center_x, calib.center_y,
              calib.skew) + tuple(calib.distortion)
    if not all(math.isfinite(v) for v in values) or calib.focal_length_x <= 0 \
            or calib.focal_length_y <= 0 or calib.image_width <= 0 or calib.image_height <= 0:
        raise CameraInfoError(f"the robot's camera calibration is not usable: {calib}")
    return _from_intrinsics(int(calib.image_width), int(calib.image_height),
                            calib.focal_length_x, calib.focal_length_y,
                            calib.center_x, calib.center_y, calib.skew, calib.distortion, source)


def default_camera_info(width: int = 320, height: int = 240) -> CameraInfoData:
    f = (width / 2.0) / math.tan(DEFAULT_HFOV_RAD / 2.0)
    return _from_intrinsics(width, height, f, f, width / 2.0, height / 2.0, 0.0, (), "default")


def scaled(info: CameraInfoData, width: int, height: int) -> CameraInfoData:
    """The same calibration for images of ``width`` x ``height`` pixels."""
    if (info.width, info.height) == (width, height) or not info.width or not info.height:
        return info
    sx, sy = width / info.width, height / info.height
    k, p = list(info.k), list(info.p)
    k[0] *= sx
    k[1] *= sx
    k[2] *= sx
    k[4] *= sy
    k[5] *= sy
    p[0] *= sx
    p[1] *= sx
    p[2] *= sx
    p[3] *= sx
    p[5] *= sy
    p[6] *= sy
    p[7] *= sy
    return replace(info, width=width, height=height, k=k, p=p)


def _matrix(doc: dict, key: str, rows: int, cols: int) -> List[float]:
    entry = doc.get(key)
    if not isinstance(entry, dict) or "data" not in entry:
        raise CameraInfoError(f"{key}: missing, or without 'data'")
    data = entry["data"]
    if not isinstance(data, list) or len(data) != rows * cols:
        raise CameraInfoError(f"{key}.data: needs {rows * cols} numbers")
    return _numbers(key, data)


def _numbers(key: str, data: list) -> List[float]:
    """``data`` (the list of ``key``'s 'data') as finite floats (raises CameraInfoError)."""
    try:
        values = [float(x) for x in data]
    except (TypeError, ValueError):
        raise CameraInfoError(f"{key}.data: not all numbers") from None
    except OverflowError:  # an integer beyond a float's range
        raise CameraInfoError(f"{key}.data: not all finite") from None
    if not all(math.isfinite(v) for v in values):
        raise CameraInfoError(f"{key}.data: not all finite")
    return values


#: the largest image size a CameraInfo holds (its width and height are uint32)
MAX_SIZE = 2 ** 32 - 1


def _size(doc: dict, key: str) -> int:
    """``doc[key]`` (image_width or image_height) as a positive integer (raises CameraInfoError)."""
    if key not in doc:
        raise CameraInfoError("image_width and image_height must be integers")
    value = doc[key]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise CameraInfoError(f"{key}: {value!r} is not a positive integer")
    if value > MAX_SIZE:
        raise CameraInfoError(f"{key}: {value} is more than a CameraInfo holds ({MAX_SIZE})")
    return value


def parse_camera_info_yaml(text: str, source: str = "file") -> CameraInfoData:
    """Parse camera_info_manager YAML text (raises CameraInfoError)."""
    try:
        import yaml
    except ImportError:
        raise CameraInfoError("PyYAML is needed to read camera_info_url (python3-yaml)") from None
    try:
        doc = safe_load(text, unique_keys=True)  # (a key given twice: YAML would keep the last)
    except yaml.YAMLError as exc:
        raise CameraInfoError(f"not YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise CameraInfoError("not a camera_info_manager YAML mapping")
    return _from_document(doc, source)


def _from_document(doc: dict, source: str) -> CameraInfoData:
    """The calibration of a camera_info_manager document (raises CameraInfoError)."""
    width, height = _size(doc, "image_width"), _size(doc, "image_height")
    k = _matrix(doc, "camera_matrix", 3, 3)
    dist = doc.get("distortion_coefficients", {"data": []})
    d_data = dist.get("data", []) if isinstance(dist, dict) else None
    if not isinstance(d_data, list):
        raise CameraInfoError("distortion_coefficients.data: not a list")
    d = _numbers("distortion_coefficients", d_data)
    r = _matrix(doc, "rectification_matrix", 3, 3) if "rectification_matrix" in doc else list(_IDENTITY)
    if "projection_matrix" in doc:
        p = _matrix(doc, "projection_matrix", 3, 4)
    else:
        p = [k[0], k[1], k[2], 0.0, k[3], k[4], k[5], 0.0, k[6], k[7], k[8], 0.0]
    model = str(doc.get("distortion_model") or ("plumb_bob" if len(d) <= 5 else "rational_polynomial"))
    return CameraInfoData(width, height, model, d, k, r, p, source)


def _shape_problem(info: CameraInfoData) -> str:
    """Why ``info`` is no calibration of the robot's 4:3 images ("" when it is one)."""
    if abs(info.width * 3 / (info.height * 4) - 1.0) <= 0.02:
        return ""
    # scaled() would stretch it onto the camera's images: not a calibration of them
    return (f"is for {info.width}x{info.height} images ({info.width / info.height:.2f}:1); the robot's camera "
            "takes 4:3 images (320x240): it is another camera's calibration, or one of cropped images")


def from_fields(width: int, height: int, distortion_model: str, d: Sequence[float], k: Sequence[float],
                r: Sequence[float], p: Sequence[float], source: str) -> CameraInfoData:
    """The calibration of a sensor_msgs/CameraInfo's fields, checked as a file's is (sizes,
    numbers, 4:3 images; raises CameraInfoError, named by the file's keys)."""
    doc = {"image_width": width, "image_height": height, "distortion_model": distortion_model,
           "camera_matrix": {"data": list(k)}, "distortion_coefficients": {"data": list(d)},
           "rectification_matrix": {"data": list(r)}, "projection_matrix": {"data": list(p)}}
    info = _from_document(doc, source)
    problem = _shape_problem(info)
    if problem:
        raise CameraInfoError(f"the calibration {problem}")
    return info


def _number(value: float) -> str:
    """``value`` as YAML reads it back as that float (PyYAML's floats have a point)."""
    text = repr(float(value))
    mantissa, e, exponent = text.partition("e")
    if e and "." not in mantissa:
        text = f"{mantissa}.0e{exponent}"
    return text


def _yaml_matrix(key: str, rows: int, cols: int, data: Sequence[float]) -> str:
    return (f"{key}:\n  rows: {rows}\n  cols: {cols}\n"
            f"  data: [{', '.join(_number(v) for v in data)}]\n")


def camera_info_yaml(info: CameraInfoData, camera_name: str = CAMERA_NAME) -> str:
    """``info`` as camera_calibration_parsers' YAML (what :func:`parse_camera_info_yaml` reads)."""
    def scalar(text: str) -> str:  # plain where it is a plain word, else quoted (JSON is YAML)
        return text if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", text) else json.dumps(text)
    return (f"image_width: {info.width}\nimage_height: {info.height}\ncamera_name: {scalar(camera_name)}\n"
            + _yaml_matrix("camera_matrix", 3, 3, info.k)
            + f"distortion_model: {scalar(info.distortion_model)}\n"
            + _yaml_matrix("distortion_coefficients", 1, len(info.d), info.d)
            + _yaml_matrix("rectification_matrix", 3, 3, info.r)
            + _yaml_matrix("projection_matrix", 3, 4, info.p))


def camera_name(namespace: str = "/") -> str:
    """The name of the camera of a driver in ``namespace``: :data:`CAMERA_NAME`, after the
    namespace's parts joined by ``_`` (``/robot1``: ``robot1_cozmo_camera``), so that robots in
    namespaces of their own keep a calibration each in :data:`DEFAULT_URL`'s file."""
    return "_".join([part for part in namespace.split("/") if part] + [CAMERA_NAME])


def resolve_url(url: str, name: str) -> str:
    """``url`` (empty: :data:`DEFAULT_URL`) with ``${NAME}`` replaced by the camera's ``name``,
    as camera_info_manager takes it (``${ROS_HOME}`` is left for :func:`camera_info_path`)."""
    return (url or DEFAULT_URL).replace("${NAME}", name)


def _ros_home() -> str:
    """What camera_info_manager puts for ``${ROS_HOME}``: $ROS_HOME, else ~/.ros."""
    return os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")


def _package_file(url: str, package: str, rest: str) -> str:
    """The path of ``package://package/rest``: ``rest`` in the package's share directory,
    as camera_info_manager takes it."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        raise CameraInfoError(f"camera_info_url {url!r}: package:// URLs need ament_index_python "
                              "(python3-ament-index-python); give a file:///absolute/path.yaml") from None
    try:
        share = get_package_share_directory(package)
    except (PackageNotFoundError, ValueError, LookupError):
        raise CameraInfoError(f"camera_info_url {url!r}: no package {package!r} is installed where this "
                              "process looks (its workspace sourced?)") from None
    except OSError:  # AMENT_PREFIX_PATH unset: rclpy from PyPI, or no setup sourced
        raise CameraInfoError(f"camera_info_url {url!r}: package:// URLs are looked up in AMENT_PREFIX_PATH, "
                              "which is not set (source the workspace's setup, or give "
                              "file:///absolute/path.yaml)") from None
    return os.path.join(share, rest.lstrip("/"))


def camera_info_path(url: str) -> str:
    """The file of a ``file:///`` or ``package://`` URL (or a plain absolute path, or one
    starting with ``~``); ``${ROS_HOME}`` is resolved as camera_info_manager does. A file URL
    with a host (``file://~/x.yaml``, ``file://tmp/x.yaml``: two slashes) is refused, as it
    does, and so is a relative path (a launched node's working directory is not the user's):
    CameraInfoError."""
    resolved = url.replace("${ROS_HOME}", _ros_home())
    parsed = urlparse(resolved)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise CameraInfoError(f"camera_info_url {url!r}: a file:// URL takes an absolute path after three "
                                  "slashes (file:///absolute/path.yaml, or file://${ROS_HOME}/path.yaml)")
        path = unquote(parsed.path)
    elif parsed.scheme == "package" and parsed.netloc and parsed.path.strip("/"):
        path = _package_file(url, parsed.netloc, unquote(parsed.path))
    elif parsed.scheme == "" and resolved.startswith(("/", "~")):
        path = os.path.expanduser(resolved)
    elif parsed.scheme == "":
        raise CameraInfoError(f"camera_info_url {url!r}: a relative path; give an absolute one "
                              "(/path.yaml, ~/path.yaml or file:///absolute/path.yaml)")
    else:
        raise CameraInfoError(f"camera_info_url {url!r}: only file:// and package:// URLs and absolute "
                              "paths are supported (file:///absolute/path.yaml, package://pkg/path.yaml)")
    if "\0" in path:  # (open() raises ValueError for it)
        raise CameraInfoError(f"camera_info_url {url!r}: a path cannot contain a NUL character")
    return path


def _open_text(url: str, path: str) -> TextIO:
    """``path`` opened to read as UTF-8 text, without waiting: a FIFO (named pipe) or a
    device is refused (CameraInfoError), as reading it would wait for a writer, or forever
    (the open of a FIFO itself waited for one: configure hung; regular_files.open_regular).
    OSError as open() raises it (a directory: IsADirectoryError)."""
    try:
        return open_regular(path, f"camera_info_url {url!r}")
    except NotAFileError as exc:
        raise CameraInfoError(f"{exc}; give the path of a calibration YAML file") from None


def load_camera_info_url(url: str) -> CameraInfoData:
    """Read the file of ``url`` (:func:`camera_info_path`) in camera_info_manager format
    (raises CameraInfoError; a FIFO or a device is refused at once: :func:`_open_text`)."""
    path = camera_info_path(url)
    try:
        with _open_text(url, path) as f:
            text = f.read()
    except OSError as exc:
        raise CameraInfoError(f"camera_info_url {url!r}: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        named = "" if path == url else f"{path} is "  # a URL's file
        raise CameraInfoError(
            f"camera_info_url {url!r}: {named}not a YAML text file (not UTF-8: byte "
            f"0x{exc.object[exc.start]:02x} at offset {exc.start}); a calibration tarball (camera_calibration's "
            "calibrationdata.tar.gz): extract ost.yaml from it (tar xzf calibrationdata.tar.gz ost.yaml) and "
            "name that; a YAML file in another encoding: save it as UTF-8") from None
    try:
        info = parse_camera_info_yaml(text, source=url)
    except CameraInfoError as exc:
        raise CameraInfoError(f"camera_info_url {url!r}: {exc}") from None
    problem = _shape_problem(info)
    if problem:
        raise CameraInfoError(f"camera_info_url {url!r} {problem}")
    return info


def save_camera_info_url(url: str, info: CameraInfoData, camera_name: str = CAMERA_NAME) -> str:
    """Write ``info`` to the file of ``url`` (:func:`camera_info_path`; its directories made
    as needed) as :func:`camera_info_yaml`, whole or not at all (a file beside it, renamed
    over it, with the mode the file had; a symlink's target is written, the link kept), and
    return the file's path. A file there that is not text (a calibration tarball) is left as
    it is, and so is a FIFO or a device (:func:`_open_text`). Raises CameraInfoError."""
    path = camera_info_path(url)
    try:
        with _open_text(url, path) as f:
            f.read()
    except UnicodeDecodeError:
        raise CameraInfoError(f"camera_info_url {url!r}: {path} is not a YAML text file (a calibration "
                              "tarball?): it is left as it is") from None
    except OSError:
        pass  # none yet (or unreadable: the write says why)
    real = os.path.realpath(path)  # a symlink's target is written, the link kept
    temporary = f"{real}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(real) or ".", exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(camera_info_yaml(info, camera_name))
        with contextlib.suppress(FileNotFoundError):  # the mode the file had (none yet: the umask's)
            os.chmod(temporary, stat.S_IMODE(os.stat(real).st_mode))
        os.replace(temporary, real)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise CameraInfoError(f"camera_info_url {url!r}: cannot write {path}: {exc.strerror}") from None
    return path
