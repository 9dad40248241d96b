"""The driver's ``camera/set_camera_info`` service (sensor_msgs/SetCameraInfo), as camera
drivers offer it through camera_info_manager: camera_calibration's cameracalibrator calls it
on COMMIT.

The calibration sent is checked as a ``camera_info_url`` file is (sizes of 4:3 images,
finite numbers: :func:`cozmo_driver.driver.camera_info.from_fields`); a refused one changes
nothing. Else ``camera/camera_info`` uses it from the next image on, over the robot's own
calibration, and it is written to the file of ``camera_info_url`` (the same resolution of
``~``, ``${ROS_HOME}``, ``${NAME}`` and ``package://`` as its reading; empty:
camera_info_manager's default, ``file://${ROS_HOME}/camera_info/${NAME}.yaml``), which the
driver then reads at every configure. One that cannot be written lasts until the next
configure, which the answer (a failure) and the log say. Made with the driver's other
services (docs/driver.md, Start-up).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..core.camera import SET_CAMERA_INFO
from ..driver import camera_info as caminfo

__all__ = ["SERVICE", "set_camera_info"]

#: the service's name, relative to the node as the camera topics are (camera/image_raw,
#: camera/camera_info): where cameracalibrator looks by default (camera/set_camera_info)
SERVICE = "camera/set_camera_info"


def set_camera_info(node: Any, request: Any, response: Any) -> Any:
    """The service's callback on ``node`` (the driver node, configured): see the module."""
    msg = request.camera_info
    log = node.get_logger()
    try:
        info = caminfo.from_fields(msg.width, msg.height, msg.distortion_model, msg.d, msg.k, msg.r,
                                   msg.p, source=SET_CAMERA_INFO)
    except caminfo.CameraInfoError as exc:
        response.success = False
        response.status_message = f"refused, camera_info unchanged: {exc}"
        log.warning(f"set_camera_info {response.status_message}")
        return response
    what = (f"fx {info.k[0]:.1f} fy {info.k[4]:.1f} cx {info.k[2]:.1f} cy {info.k[5]:.1f} px at "
            f"{info.width}x{info.height}")
    name = caminfo.camera_name(node.get_namespace())
    url = caminfo.resolve_url(str(node._params["camera_info_url"]), name)
    try:
        path = caminfo.save_camera_info_url(url, info, name)
    except caminfo.CameraInfoError as exc:
        node._core.set_camera_file(info)
        response.success = False
        response.status_message = (f"camera_info uses it ({what}) until the driver is configured again, but "
                                   f"it was not saved: {exc}")
        log.warning(f"set_camera_info: {response.status_message}")
        return response
    node._core.set_camera_file(replace(info, source=url))
    response.success = True
    response.status_message = f"saved to {path}; camera_info uses it ({what})"
    log.info(f"set_camera_info: camera calibration {response.status_message}")
    return response
