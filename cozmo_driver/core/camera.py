"""The driver core's camera: frames joined and converted on demand, and the calibration
read from the robot's NV storage (a part of :class:`~cozmo_driver.core.DriverCore`)."""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np

from ..driver import camera_info as caminfo
from ..driver.auto_exposure import AutoExposure
from ..protocol import messages as msgs
from ..protocol.camera import (check_image, coded_size, decode_to_bytes, encode_jpeg, image_to_jpeg,
                               is_half_width_color, luma_sample)
from ..protocol.errors import RemoteProtocolError
from ..protocol.nvstorage import NV_TAG_CAMERA_CALIB, decode_camera_calibration
from .samples import CameraFrame

__all__ = ["CameraMixin", "COLOR_JPEG_QUALITY", "SET_CAMERA_INFO"]

#: JPEG quality of colour frames, which are rebuilt at full width (the robot sends half)
COLOR_JPEG_QUALITY = 90
#: the source of a calibration sent to camera/set_camera_info and saved nowhere
SET_CAMERA_INFO = "set_camera_info"


_ImageSendMode = msgs.ENUMS["ImageSendMode"]
_ImageResolution = msgs.ENUMS["ImageResolution"]
_NvResult = msgs.ENUMS["NvResult"]


def _nv_result_name(value: int) -> str:
    """An NvResult's name (NV_BUSY), or its number where the protocol names none."""
    try:
        return _NvResult(value).name
    except ValueError:
        return f"NvResult {value}"


class CameraMixin:
    """DriverCore's camera methods (they use its lock, output, params, assembler, NV reader,
    calibration and camera file)."""

    #: gain and exposure from the images while camera_auto_exposure (None: fixed); replaced
    #: under the lock
    exposure: Optional[AutoExposure] = None
    #: complete frames dropped as they do not convert (the diagnostics' "camera images dropped
    #: unconverted"); counted under the lock
    images_unconverted: int = 0
    #: replaced by a new object each time EnableCamera Off is sent (any thread); the I/O
    #: thread keeps the one it saw last (``_chunks_camera_off``), and at its first chunk while
    #: the camera streams after another, discards the part-frames the switch-off cut short
    _camera_off: object = None
    _chunks_camera_off: object = None

    def camera_streaming(self) -> bool:
        """Whether the robot is to stream its camera (while it is connected: what EnableCamera
        asks): ``camera_enabled``, while the driver is active (inactive, it publishes no
        image), and, with ``camera_on_demand``, while a camera topic has a subscriber."""
        p = self.params
        return bool(p["camera_enabled"]) and self.active and (
            not p["camera_on_demand"] or self.camera_wanted)

    def set_camera_wanted(self, wanted: bool) -> None:
        """Whether a camera topic has a subscriber now; with ``camera_on_demand`` the camera
        is switched on or off when that changes. Any thread."""
        wanted = bool(wanted)
        if wanted == self.camera_wanted:
            return
        before = self.camera_streaming()
        self.camera_wanted = wanted
        if self.camera_streaming() != before:
            self._send_camera_mode()

    def _send_camera_mode(self) -> None:
        mode = _ImageSendMode.Stream if self.camera_streaming() else _ImageSendMode.Off
        if mode == _ImageSendMode.Off:
            self._camera_off = object()
        self.post_if_ready(msgs.EnableCamera(image_send_mode=mode,
                                             image_resolution=_ImageResolution.QVGA))

    def send_camera_config(self, restart_exposure: bool = False) -> None:
        """Send the camera's mode, colour, gain and exposure. With camera_auto_exposure the
        gain and exposure are the automatic exposure's, which starts again from
        camera_gain and camera_exposure_ms on ``restart_exposure`` (else it goes on from
        where it is: a new connection)."""
        p = self.params
        self.post_if_ready(msgs.EnableColorImages(enable=bool(p["camera_color"])))
        self._send_camera_mode()
        with self.lock:
            if not p["camera_auto_exposure"]:
                self.exposure = None
                gain, exposure_ms = float(p["camera_gain"]), int(p["camera_exposure_ms"])
            else:
                if self.exposure is None or restart_exposure:
                    self.exposure = AutoExposure(float(p["camera_gain"]), int(p["camera_exposure_ms"]),
                                                 int(p["camera_auto_exposure_target"]))
                    self.exposure.set_head_light(bool(getattr(self, "head_light", False)))
                else:
                    self.exposure.restart()
                gain, exposure_ms = self.exposure.gain, self.exposure.exposure_ms
            self._send_exposure(gain, exposure_ms)

    def _send_exposure(self, gain: float, exposure_ms: int) -> None:
        # the third field is "send me your default parameters" in Anki's firmware, which then
        # applies nothing, so it is always false; and one revision applies one change per
        # message (exposure, else gain): sent twice, both take effect
        params = msgs.SetCameraParams(gain=float(gain), exposure_ms=int(exposure_ms),
                                      auto_exposure_enabled=False)
        self.post_if_ready(params)
        self.post_if_ready(params)

    def head_light_changed(self, on: bool) -> None:
        """The head light went on or off: while it is on the automatic exposure keeps to
        multiples of 10 ms (AutoExposure.set_head_light), sent at once if that changes it."""
        with self.lock:
            ae = self.exposure
            change = ae.set_head_light(on) if ae is not None else None
            if change is not None:
                self._send_exposure(*change)

    def _expose(self, image: Any) -> None:
        """(I/O thread) Measure a frame for the automatic exposure; send what it changes."""
        ae = self.exposure
        if ae is None:
            return
        with self.lock:
            if self.exposure is not ae:
                return
            try:  # decoded only when this image is measured
                change = ae.update(lambda: luma_sample(image_to_jpeg(image)))
            except RemoteProtocolError:
                return  # the frame's conversion warns
            if change is not None:
                self._send_exposure(*change)

    def camera_status(self) -> str:
        """What the camera does, in words, for the diagnostics."""
        p = self.params
        if not p["camera_enabled"]:
            return "off (camera_enabled is false)"
        if not self.active:
            return "off while the driver is inactive (lifecycle)"
        if not self.connected:  # lost, or not connected yet: the robot streams nothing
            return "off: the robot is not connected"
        if self.camera_streaming():
            return ("streaming" + (" (a camera topic has a subscriber)" if p["camera_on_demand"] else "")
                    + "; " + self.exposure_status())
        return "off until a camera topic has a subscriber (camera_on_demand)"

    def exposure_status(self) -> str:
        """The camera's gain and exposure, in words, for the diagnostics."""
        ae = self.exposure
        if ae is None:
            p = self.params
            return f"gain {float(p['camera_gain']):.2f}, exposure {int(p['camera_exposure_ms'])} ms (fixed)"
        seen = "" if ae.value is None else f", median grey {ae.value} (target {ae.target})"
        limit = f": {ae.limit} at the limit of both" if ae.limit else ""
        return f"gain {ae.gain:.2f}, exposure {ae.exposure_ms} ms (automatic{seen}){limit}"

    def _on_nv_result(self, message: Any) -> None:
        try:
            result = self._nv.push(message)
        except RemoteProtocolError as exc:
            self.warn_throttled("nv_storage", f"NV storage read: {exc}")
            return
        if result is None or result.tag != NV_TAG_CAMERA_CALIB:
            return
        if not result.ok:
            name = _nv_result_name(result.result)
            self._no_calibration("the robot has no camera calibration (NV_NOT_FOUND)"
                                 if name == "NV_NOT_FOUND" else
                                 f"the robot's camera calibration could not be read ({name})")
            return
        try:
            info = caminfo.from_calibration(decode_camera_calibration(result.data))
        except (RemoteProtocolError, caminfo.CameraInfoError) as exc:
            self._no_calibration(f"camera calibration from the robot unusable ({exc})")
            return
        with self.lock:
            self.calibration = info
            self.output.on_camera_info_changed()
        used = f"; {self._file_calibration('camera_info_url')} takes precedence" if self.camera_file is not None \
            else ""
        self._log(logging.INFO,
                  f"camera calibration read from the robot: fx {info.k[0]:.1f} fy {info.k[4]:.1f} "
                  f"cx {info.k[2]:.1f} cy {info.k[5]:.1f} px at {info.width}x{info.height}{used}")

    def _no_calibration(self, why: str) -> None:
        """The read of the robot's calibration failed: camera_info no longer uses one read
        before (an earlier connection's, maybe another robot's); warn ``why`` and what it uses."""
        with self.lock:
            if self.calibration is not None:
                self.calibration = None
                self.output.on_camera_info_changed()
        used = self._file_calibration("the file of camera_info_url") if self.camera_file is not None \
            else "the default intrinsics"
        self._log(logging.WARNING, f"{why}: camera_info uses {used}")

    def _file_calibration(self, url_words: str) -> str:
        """What camera_file is, in words: ``url_words`` (the file of camera_info_url), or the
        calibration sent to set_camera_info and saved nowhere."""
        file = self.camera_file
        return ("the calibration sent to set_camera_info" if file is not None and file.source == SET_CAMERA_INFO
                else url_words)

    def set_camera_file(self, info: caminfo.CameraInfoData) -> None:
        """camera_info uses ``info`` from its next image on, over the robot's calibration
        (camera/set_camera_info; ``info.source`` is the file it was written to, else
        :data:`SET_CAMERA_INFO`), until the next configure reads camera_info_url. Any thread."""
        with self.lock:
            self.camera_file = info
            self.output.on_camera_info_changed()

    def camera_info(self, width: int, height: int) -> caminfo.CameraInfoData:
        """The intrinsics for frames of this size: from camera_info_url, else the robot's
        calibration, else the defaults; scaled to the size."""
        data = self.camera_file or self.calibration or caminfo.default_camera_info(width, height)
        return caminfo.scaled(data, width, height)

    def _on_chunk(self, message: Any) -> None:
        off = self._camera_off
        if off is not self._chunks_camera_off and self.camera_streaming():
            # streaming again after the camera was switched off: a frame it cut short (the
            # robot sends no more of it) is no loss, counted apart from those dropped incomplete
            self._chunks_camera_off = off
            self.assembler.discard_pending()
        try:
            image = self.assembler.push_chunk(message)
        except RemoteProtocolError:
            return  # counted by the assembler, shown in the diagnostics
        if image is None:
            return
        with self.lock:
            if not self.active or not self.params["camera_enabled"]:
                return
            try:  # what is known without decoding: its encoding, a plain JPEG's header
                check_image(image)
            except RemoteProtocolError as exc:
                self._drop_image(image.image_id, exc)  # published on no topic, camera_info neither
                return
            stamp_ns = self.output.stamp_ns()
            if self.output.robot_time():
                stamp_ns = self.robot_clock.frame_stamp(stamp_ns, image.frame_timestamp_ms)
            sec, nsec = divmod(stamp_ns, 1_000_000_000)
            frame = CameraFrame(stamp_ns, sec, nsec, image.image_id, image.width, image.height,
                                self._convert, image)
            self.output.on_image(frame)
        self._expose(image)

    def _drop_image(self, image_id: int, why: RemoteProtocolError) -> None:
        """(under the lock) A complete frame is dropped: it does not convert."""
        self.images_unconverted += 1
        self.warn_throttled("image", f"camera image {image_id} dropped: {why}")

    def _convert(self, frame: CameraFrame, jpeg: bool, pixels: bool) -> None:
        """Fill in ``frame``'s JPEG and/or pixels (CameraFrame.jpeg/pixels)."""
        image = frame._image
        half_width = is_half_width_color(image)
        try:
            if frame._coded is None:
                frame._coded = image_to_jpeg(image)
                if half_width:
                    # the robot codes colour at half width: rebuild at the nominal size, which
                    # camera_info describes and image_transport consumers expect
                    frame._tried |= 2
                    frame._pixels = decode_to_bytes(frame._coded, True, coded_size(image))
            if jpeg and not frame._tried & 1:
                frame._tried |= 1
                if half_width:
                    data, width, height, _ = frame._pixels
                    frame._jpeg = encode_jpeg(np.frombuffer(data, np.uint8).reshape(height, width, 3),
                                              COLOR_JPEG_QUALITY)
                else:
                    frame._jpeg = frame._coded
        except RemoteProtocolError as exc:
            frame._tried = 3
            frame._jpeg = frame._pixels = None
            self._drop_image(frame.image_id, exc)
            return
        if pixels and not frame._tried & 2:
            frame._tried |= 2
            try:
                frame._pixels = decode_to_bytes(frame._coded, False, coded_size(image))
            except RemoteProtocolError as exc:
                self.warn_throttled("decode", f"camera image {frame.image_id} does not decode: {exc}")
