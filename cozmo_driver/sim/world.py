"""The simulated robot's world and its camera renderer.

A small, textured, deterministic world for the simulated Cozmo:

* a square **table** ``|x|, |y| <= table_half_size_mm`` at z = 0, covered with
  50 mm wooden tiles (a checkerboard whose tiles also vary a little in
  brightness, with a fine grain that shows close up, so that translation is
  visible), with a darker trim along its border;
* beyond the table edge a **drop** (a cliff) down to the dark room floor
  ``TABLE_HEIGHT_MM`` below the table top;
* a square **room** of half-size ``ROOM_HALF_SIZE_MM`` whose walls carry
  vertical stripes of distinct colours (so that turning shifts the image
  sideways), a dado rail and a faint horizontal banding (so that tilting the
  head is visible), and are dark below the table's height;
* a **ceiling** that is a soft gradient by elevation with faint panels;
* the **charger** (a low dark platform with a marker plate at its back) and
  three **cubes** (coloured 44 mm boxes with a marker on every face);
* optionally the robot's own **lift**, when raised in front of the camera.

Frames follow REP-103: x forward, y left, z up, yaw counter-clockwise
positive; distances in millimetres, angles in radians.  The world frame's
origin is the table's centre, on the table top.

Rendering is vectorised per-pixel ray casting with numpy: the ray direction
of every pixel in the camera frame is computed once per resolution; per frame
only the head pitch and the robot's yaw are applied.  Because the camera has
no roll, the pitched directions are separable (per row x/z, per column y),
which keeps the per-frame work to a few dozen whole-image float32 operations.
Boxes (charger, cubes) are only intersected inside their projected screen
rectangle.  Colours come from a small palette: every pixel gets a palette
index and a brightness, and a lookup table turns the pair into the final
uint8 grey or RGB value.  A QVGA frame takes about 3-4 ms of one core
(``bench/bench_world.py``).  Distant texture fades to its mean so that it
neither aliases nor bloats the JPEG the caller makes of it.

This module is pure: no sockets, threads or clock reads.  A :class:`World`
keeps a random generator for sensor noise (seeded, so the same sequence of
calls gives the same images) and per-resolution caches, so one instance must
not be used by two threads at once; :meth:`World.snapshot` gives a copy to render
on another thread while the original changes.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "World",
    "Box",
    "camera_position",
    "camera_intrinsics",
    "HEAD_PIVOT_X_MM",
    "HEAD_PIVOT_Z_MM",
    "CAMERA_OFFSET_MM",
    "CAMERA_DROP_MM",
    "camera_in_base",
    "CAMERA_HFOV_RAD",
    "HEAD_ANGLE_MIN_RAD",
    "HEAD_ANGLE_MAX_RAD",
    "LIFT_HEIGHT_MIN_MM",
    "LIFT_HEIGHT_MAX_MM",
    "NOMINAL_EXPOSURE_MS",
    "ROOM_HALF_SIZE_MM",
    "TABLE_HEIGHT_MM",
    "CUBE_SIZE_MM",
    "LABEL_SKY",
    "LABEL_WALL",
    "LABEL_TABLE",
    "LABEL_DROP",
    "LABEL_CUBE",
    "LABEL_CHARGER",
    "LABEL_LIFT",
]

# --- Robot and camera geometry (robot base frame: x forward, z up) ----------
# From Anki's cozmoConfig.h, whose positions are from the robot's origin, 20 mm ahead of
# the drive centre (DRIVE_CENTER_OFFSET = -20), which is this frame's origin (the driver
# asks the robot for the drive centre's pose: SyncTime's offset 0): the neck joint
# (NECK_JOINT_POSITION) at x -13 + 20, z 34.5 + 14.5 (the wheels' radius) ...
HEAD_PIVOT_X_MM = 7.0
HEAD_PIVOT_Z_MM = 49.0
#: ... and the camera 17.52 mm ahead of it and 8 mm below, in the head's frame
#: (HEAD_CAM_POSITION), which tilts with the head
CAMERA_OFFSET_MM = 17.52
CAMERA_DROP_MM = 8.0
CAMERA_HFOV_RAD = math.radians(58.0)
HEAD_ANGLE_MIN_RAD = math.radians(-25.0)
HEAD_ANGLE_MAX_RAD = math.radians(44.5)
NOMINAL_EXPOSURE_MS = 33.0

# The lift (a rough model): an arm of LIFT_ARM_MM turning about a pivot at
# (LIFT_PIVOT_X_MM, LIFT_PIVOT_Z_MM) (Anki's LIFT_BASE_POSITION: x -41 + 20, z
# 30.5 + 14.5); at lift height h the arm's end (the wrist joint) is at z = h and
# the visible part is a crossbar below it, a vertical plate facing the camera,
# 50 mm wide, spanning z in [h - 28.5, h - 20] (LIFT_XBAR_HEIGHT_WRT_WRIST_JOINT
# -20, LIFT_XBAR_HEIGHT 8.5).
LIFT_HEIGHT_MIN_MM = 32.0
LIFT_HEIGHT_MAX_MM = 92.0
LIFT_ARM_MM = 66.0
LIFT_PIVOT_X_MM = -21.0
LIFT_PIVOT_Z_MM = 45.0
LIFT_BAR_HALF_WIDTH_MM = 25.0
LIFT_BAR_TOP_BELOW_MM = 20.0    # crossbar spans [h - 28.5, h - 20]
LIFT_BAR_BOTTOM_BELOW_MM = 28.5

# --- The world ---------------------------------------------------------------
ROOM_HALF_SIZE_MM = 1500.0
TABLE_HEIGHT_MM = 750.0        # room floor is this far below the table top
CEILING_MM = 1250.0            # above the table top
CEILING_PANEL_MM = 500.0
TILE_MM = 50.0
GRAIN_MM = 5.0
TRIM_MM = 12.0
STRIPE_MM = 120.0
WALL_BAND_MM = 250.0
DADO_Z_MM = (280.0, 300.0)
CUBE_SIZE_MM = 44.0

# --- Surface labels (``render(..., return_mask=True)``) ----------------------
LABEL_SKY = 0
LABEL_WALL = 1
LABEL_TABLE = 2
LABEL_DROP = 3
LABEL_CUBE = 4
LABEL_CHARGER = 5
LABEL_LIFT = 6

# --- Palette -----------------------------------------------------------------
_PALETTE = np.array(
    [
        (208, 218, 232),  # 0 ceiling
        (200, 164, 116),  # 1 table wood
        (112, 76, 44),    # 2 table trim
        (62, 58, 56),     # 3 room floor
        (176, 72, 62),    # 4.. wall stripes
        (206, 146, 64),
        (204, 194, 96),
        (86, 156, 86),
        (64, 142, 152),
        (76, 96, 176),
        (134, 86, 156),
        (196, 196, 190),  # 11 .. last stripe colour
        (66, 54, 48),     # 12 dado rail
        (28, 28, 30),     # 13 marker black
        (226, 110, 96),   # 14 cube 1
        (116, 204, 116),  # 15 cube 2
        (108, 148, 232),  # 16 cube 3
        (72, 72, 78),     # 17 charger body
        (236, 236, 230),  # 18 marker white
        (48, 48, 54),     # 19 lift
    ],
    dtype=np.float32,
)
_P_SKY, _P_TABLE, _P_TRIM, _P_ROOMFLOOR = 0, 1, 2, 3
_P_STRIPES = np.arange(4, 12)
_P_DADO, _P_BLACK, _P_CUBES, _P_CHARGER, _P_WHITE, _P_LIFT = 12, 13, (14, 15, 16), 17, 18, 19

# Brightness is quantised to _LEVELS steps per unit (1.0 = palette colour) and
# may reach _MAX_LEVEL / _LEVELS (16x) before clipping.
_LEVELS = 256
_MAX_LEVEL = 16 * _LEVELS - 1
_NOISE_SIGMA_LEVELS = 3.0      # ~1.2 % of the palette colour
_LIGHT = np.array([-0.35, 0.45, 0.82])
_LIGHT = _LIGHT / np.linalg.norm(_LIGHT)
# Corner k of Box.corners() has bits (x, y, z) = (k >> 2, k >> 1, k) & 1; an
# edge joins two corners that differ in one bit.
_BOX_EDGES = np.array([(k, k | bit) for bit in (1, 2, 4) for k in range(8) if not k & bit])


def _build_luts() -> tuple[np.ndarray, np.ndarray]:
    levels = np.arange(_MAX_LEVEL + 1, dtype=np.float32) / _LEVELS
    rgb = _PALETTE[:, None, :] * levels[None, :, None]
    rgb = np.clip(np.rint(rgb), 0, 255).astype(np.uint8).reshape(-1, 3)
    grey_pal = _PALETTE @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    grey = grey_pal[:, None] * levels[None, :]
    grey = np.clip(np.rint(grey), 0, 255).astype(np.uint8).reshape(-1)
    return rgb, grey


_LUT_RGB, _LUT_GREY = _build_luts()


# --- Geometry helpers ---------------------------------------------------------
def camera_position(x_mm: float, y_mm: float, yaw_rad: float,
                    head_angle_rad: float) -> tuple[float, float, float]:
    """World position (mm) of the camera for the robot's pose and head angle."""
    fwd, z = camera_in_base(head_angle_rad)
    return (x_mm + fwd * math.cos(yaw_rad), y_mm + fwd * math.sin(yaw_rad), z)


def camera_in_base(head_angle_rad: float) -> tuple[float, float]:
    """(x forward, z up) of the camera in the robot's base frame (mm): its place in the
    head turned by the head's angle (positive looks up) about the head's pivot."""
    c, s = math.cos(head_angle_rad), math.sin(head_angle_rad)
    return (HEAD_PIVOT_X_MM + CAMERA_OFFSET_MM * c + CAMERA_DROP_MM * s,
            HEAD_PIVOT_Z_MM + CAMERA_OFFSET_MM * s - CAMERA_DROP_MM * c)


def camera_intrinsics(width: int = 320, height: int = 240) -> tuple[float, float, float, float]:
    """Pinhole intrinsics ``(fx, fy, cx, cy)`` in pixels of the rendered images.

    Square pixels; the horizontal field of view is ``CAMERA_HFOV_RAD``
    (about 45 deg vertically at 4:3).  Pixel (u, v) has its centre at
    (u + 0.5, v + 0.5); ``cx, cy`` is the image centre.
    """
    fx = (width / 2.0) / math.tan(CAMERA_HFOV_RAD / 2.0)
    return fx, fx, width / 2.0, height / 2.0


@dataclass(frozen=True)
class Box:
    """An upright box standing in the world (a cube, the charger's parts)."""

    x_mm: float            # centre of the footprint
    y_mm: float
    yaw_rad: float
    half_x_mm: float
    half_y_mm: float
    z0_mm: float
    z1_mm: float
    palette: int           # face colour (palette index)
    label: int
    glyph: tuple | None = None       # 3x3 marker bits (1 = black), or None
    marker_faces: tuple = (0, 1, 2, 3, 4, 5)  # faces: +x -x +y -y +z -z

    def corners(self) -> np.ndarray:
        c, s = math.cos(self.yaw_rad), math.sin(self.yaw_rad)
        out = []
        for dx in (-self.half_x_mm, self.half_x_mm):
            for dy in (-self.half_y_mm, self.half_y_mm):
                for z in (self.z0_mm, self.z1_mm):
                    out.append((self.x_mm + c * dx - s * dy, self.y_mm + s * dx + c * dy, z))
        return np.array(out, dtype=np.float64)


def _marker_table(glyph, face_palette: int) -> np.ndarray:
    """7x7 palette indices of a marker: face margin, black ring, 3x3 bits."""
    t = np.full((7, 7), face_palette, dtype=np.int32)
    t[1:6, 1:6] = _P_BLACK
    bits = np.array(glyph, dtype=bool).reshape(3, 3)
    t[2:5, 2:5] = np.where(bits, _P_BLACK, _P_WHITE)
    return t.reshape(-1)


class _ResCache:
    """Per-resolution constants: camera-frame rays, vignetting, noise bank."""

    def __init__(self, width: int, height: int, rng: np.random.Generator):
        self.width, self.height = width, height
        fx, fy, cx, cy = camera_intrinsics(width, height)
        self.fx, self.fy, self.cx, self.cy = fx, fy, cx, cy
        # Camera frame: forward = 1, left = b (per column), up = c (per row).
        self.b = (-(np.arange(width, dtype=np.float64) + 0.5 - cx) / fx).astype(np.float32)
        self.c = (-(np.arange(height, dtype=np.float64) + 0.5 - cy) / fy)
        bb = self.b.astype(np.float64)[None, :] ** 2
        cc = self.c[:, None] ** 2
        inv_norm = 1.0 / np.sqrt(1.0 + bb + cc)
        self.inv_norm = inv_norm.astype(np.float32)
        # Lens vignetting (cos^3-ish falloff, mild).
        vignette = 0.55 + 0.45 * inv_norm ** 3
        self.vignette = (vignette / vignette.max()).astype(np.float32)
        # Noise bank: a long run of N(0, sigma) samples; each frame takes a
        # slice at a random offset.
        n = width * height
        self.noise = rng.normal(0.0, _NOISE_SIGMA_LEVELS, size=2 * n).astype(np.float32)


class _Rays:
    """One frame's camera pose and ray directions (world frame, not normalised):
    per row ``dxb``/``dzb`` in the robot's base frame, per pixel ``wx``/``wy``, per row ``wz_row``."""

    __slots__ = ("camx", "camy", "camz", "cpsi", "spsi", "cth", "sth", "theta",
                 "dxb", "dzb", "wx", "wy", "wz_row")

    def __init__(self, rc: _ResCache, x_mm: float, y_mm: float, yaw_rad: float,
                 head_angle_rad: float) -> None:
        f32 = np.float32
        psi, theta = float(yaw_rad), float(head_angle_rad)
        self.theta = theta
        self.cpsi, self.spsi = cpsi, spsi = math.cos(psi), math.sin(psi)
        self.cth, self.sth = cth, sth = math.cos(theta), math.sin(theta)
        camx, camy, camz = camera_position(float(x_mm), float(y_mm), psi, theta)
        # Keep the camera inside the room and above the table top (a robot
        # that drove off the table is drawn as if hovering at the edge of
        # the room; the caller decides what a fall means).
        lim = ROOM_HALF_SIZE_MM - 1.0
        self.camx, self.camy = min(max(camx, -lim), lim), min(max(camy, -lim), lim)
        self.camz = max(camz, 1.0)
        # Ray directions: base frame per row (x, z), per column (y).
        self.dxb = dxb = cth - rc.c * sth                      # (H,) float64
        self.dzb = dzb = sth + rc.c * cth                      # (H,)
        self.wx = (cpsi * dxb).astype(f32)[:, None] - f32(spsi) * rc.b[None, :]
        self.wy = (spsi * dxb).astype(f32)[:, None] + f32(cpsi) * rc.b[None, :]
        self.wz_row = dzb.astype(f32)


class World:
    """The simulated table-top world and a camera renderer for it.

    ``seed`` fixes the layout details (cube positions, wall stripe colours,
    tile shades) and the sensor-noise sequence.
    """

    def __init__(self, seed: int = 0, table_half_size_mm: float = 600.0):
        self.seed = int(seed)
        self.table_half_size_mm = float(table_half_size_mm)
        layout = np.random.default_rng([self.seed, 1])
        self._noise_rng = np.random.default_rng([self.seed, 2])
        self._caches: dict[tuple[int, int], _ResCache] = {}

        t = self.table_half_size_mm
        # The charger: back of the table's -x half, facing +x (a robot docked
        # on it has its origin at charger_pose and looks along its yaw).
        self._charger_pose: tuple[float, float, float] = (-0.35 * t, 0.0, 0.0)
        # Three cubes in front of the charger, jittered by the seed.
        base = [(0.05 * t, -0.25 * t), (0.30 * t, 0.20 * t), (0.55 * t, -0.05 * t)]
        self._cube_poses: list[tuple[float, float, float]] = []
        for bx, by in base:
            jx, jy = layout.uniform(-0.06, 0.06, size=2) * t
            self._cube_poses.append((float(bx + jx), float(by + jy),
                                     float(layout.uniform(-math.pi / 4, math.pi / 4))))
        self._cube_z = [0.0, 0.0, 0.0]

        # Wall stripes: a seeded sequence of colours, no two neighbours alike.
        n_stripes = int(math.ceil(8 * ROOM_HALF_SIZE_MM / STRIPE_MM)) + 2
        seq = [int(layout.integers(len(_P_STRIPES)))]
        for _ in range(n_stripes - 1):
            k = int(layout.integers(len(_P_STRIPES) - 1))
            seq.append(k if k < seq[-1] else k + 1)
        self._stripe_pal = _P_STRIPES[np.array(seq)].astype(np.int32)
        self._stripe_shade = layout.uniform(0.85, 1.1, size=n_stripes).astype(np.float32)
        # Table tiles: tile (i, j) has relative brightness _tiles[(65 i + j) & 4095]
        # (65 is odd, so the table's parity is the checkerboard's): checker
        # +-13 % plus a per-tile variation of up to +-7 %.
        k = np.arange(4096)
        self._tiles = (np.where(k & 1, 0.13, -0.13)
                       + 0.07 * layout.uniform(-1.0, 1.0, size=4096)).astype(np.float32)
        # Fine speckle (grain) of the table surface: cell (i, j) has
        # _grain[(129 i + j) & 16383], in -1..1.
        self._grain = layout.uniform(-1.0, 1.0, size=128 * 128).astype(np.float32)

        self.boxes: list[Box] = self._make_boxes()
        self._update_box_caches()

    # ------------------------------------------------------------------ world
    def _update_box_caches(self) -> None:
        self._marker_tables = [
            _marker_table(b.glyph, b.palette) if b.glyph is not None else None for b in self.boxes
        ]
        self._box_corners = [b.corners() for b in self.boxes]
        self._box_face_shades = [self._face_shades(b) for b in self.boxes]

    @property
    def charger_pose(self) -> tuple[float, float, float]:
        """``(x_mm, y_mm, yaw_rad)`` of the charger: a robot docked on it has
        its origin there and faces along the yaw (the marker plate is behind
        it).  Assignable."""
        return self._charger_pose

    @charger_pose.setter
    def charger_pose(self, pose) -> None:
        x, y, yaw = pose
        self._charger_pose = (float(x), float(y), float(yaw))
        self.boxes = self._make_boxes()
        self._update_box_caches()

    @property
    def cube_poses(self) -> tuple[tuple[float, float, float], ...]:
        """``(x_mm, y_mm, yaw_rad)`` of the three cubes' centres (footprint);
        change them with :meth:`set_cube_pose`."""
        return tuple(self._cube_poses)

    def set_cube_pose(self, index: int, x_mm: float, y_mm: float, yaw_rad: float,
                      z_mm: float = 0.0) -> None:
        """Move cube ``index`` (0..2); ``z_mm`` (>= 0) is the height of its bottom
        above the table top, e.g. while it is carried on the lift."""
        self._cube_poses[index] = (float(x_mm), float(y_mm), float(yaw_rad))
        self._cube_z[index] = max(0.0, float(z_mm))
        self.boxes = self._make_boxes()
        self._update_box_caches()

    def _make_boxes(self) -> list[Box]:
        boxes = []
        cx, cy, cyaw = self.charger_pose
        c, s = math.cos(cyaw), math.sin(cyaw)

        def at(dx: float, dy: float) -> tuple[float, float]:
            return cx + c * dx - s * dy, cy + s * dx + c * dy

        # Low platform the robot sits on, and the marker plate at its back.
        px, py = at(-10.0, 0.0)
        boxes.append(Box(px, py, cyaw, 45.0, 40.0, 0.0, 6.0, _P_CHARGER, LABEL_CHARGER))
        px, py = at(-62.0, 0.0)
        boxes.append(Box(px, py, cyaw, 6.0, 42.0, 0.0, 80.0, _P_CHARGER, LABEL_CHARGER,
                         glyph=(1, 0, 1, 0, 1, 0, 1, 1, 1), marker_faces=(0,)))
        glyphs = [(1, 0, 0, 0, 1, 0, 0, 0, 1),      # 3x3 marker bits of cubes 1..3
                  (0, 1, 0, 1, 1, 1, 0, 1, 0),
                  (1, 1, 0, 1, 0, 0, 0, 0, 1)]
        h = CUBE_SIZE_MM / 2.0
        for (x, y, yaw), z, pal, glyph in zip(self._cube_poses, self._cube_z, _P_CUBES, glyphs):
            boxes.append(Box(x, y, yaw, h, h, z, z + CUBE_SIZE_MM, pal, LABEL_CUBE, glyph=glyph))
        return boxes

    def snapshot(self) -> "World":
        """The world as it is now, to render on another thread while this one changes
        (the simulator's camera worker): the charger and the cubes are the snapshot's own;
        what never changes (textures, per-resolution caches) and the noise generator are
        shared, so that its images continue this world's seeded noise. Render one at a time."""
        snap = copy.copy(self)
        snap._cube_poses = list(self._cube_poses)
        snap._cube_z = list(self._cube_z)
        snap.boxes = list(self.boxes)
        snap._marker_tables = list(self._marker_tables)
        snap._box_corners = list(self._box_corners)
        snap._box_face_shades = list(self._box_face_shades)
        return snap

    def cliff_at(self, x_mm: float, y_mm: float) -> bool:
        """True where there is no table under the point (a drop)."""
        t = self.table_half_size_mm
        return not (abs(x_mm) <= t and abs(y_mm) <= t)

    def _cache(self, width: int, height: int) -> _ResCache:
        key = (width, height)
        cache = self._caches.get(key)
        if cache is None:
            rng = np.random.default_rng([self.seed, 3, width, height])
            cache = self._caches[key] = _ResCache(width, height, rng)
        return cache

    # ----------------------------------------------------------------- render
    def render(self, x_mm: float, y_mm: float, yaw_rad: float, head_angle_rad: float,
               width: int = 320, height: int = 240, color: bool = True,
               gain: float = 1.0, exposure_ms: float | None = None,
               lift_height_mm: float | None = None, noise: bool = True,
               return_mask: bool = False):
        """Render the robot's camera view.

        Returns a ``(height, width, 3)`` uint8 RGB image when ``color``, else a
        ``(height, width)`` uint8 grey image.  ``gain`` multiplies brightness
        and ``exposure_ms`` scales it relative to ``NOMINAL_EXPOSURE_MS``
        (values clip at 255).  ``lift_height_mm`` (32..92), when given, draws
        the lift's crossbar where it is in view.  ``noise`` adds light seeded
        sensor noise; without it the image is a pure function of the
        arguments.  With ``return_mask`` the result is ``(image, labels)``
        where ``labels`` is a ``(height, width)`` uint8 array of ``LABEL_*``.
        """
        width, height = int(width), int(height)
        if width <= 0 or height <= 0:
            raise ValueError("width and height must be positive")
        # Rays parallel to a plane give inf / nan by design; they are masked.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self._render(float(x_mm), float(y_mm), float(yaw_rad), float(head_angle_rad),
                                width, height, bool(color), float(gain), exposure_ms,
                                lift_height_mm, bool(noise), bool(return_mask))

    def _render(self, x_mm, y_mm, yaw_rad, head_angle_rad, width, height, color, gain,
                exposure_ms, lift_height_mm, noise, return_mask):
        rc = self._cache(width, height)
        r = _Rays(rc, x_mm, y_mm, yaw_rad, head_angle_rad)
        # Back to front: walls, then ceiling and room floor where no wall is hit,
        # then the table top, then what stands on it (boxes) and the lift.
        idx, shade, zw = self._draw_walls(r)
        sky = self._draw_sky_and_floor(rc, r, zw, idx, shade)
        on_table = self._draw_table(rc, r, idx, shade)
        labels = None
        if return_mask:
            labels = np.where(sky, np.uint8(LABEL_SKY), np.uint8(LABEL_WALL))
            np.copyto(labels, np.uint8(LABEL_DROP), where=zw < 0)   # beyond the edge, below the top
            np.copyto(labels, np.uint8(LABEL_TABLE), where=on_table)
        self._draw_boxes(rc, r, idx, shade, labels)
        if lift_height_mm is not None:
            self._draw_lift(float(lift_height_mm), rc, r.dxb, r.dzb, r.theta, idx, shade, labels)
        img = self._expose(rc, idx, shade, gain, exposure_ms, noise, color)
        if return_mask:
            return img, labels
        return img

    def _draw_walls(self, r: "_Rays"):
        """Palette index, shade and height (mm) where each ray meets the room's walls."""
        f32 = np.float32
        camx, camy, camz, wx, wy = r.camx, r.camy, r.camz, r.wx, r.wy
        R = f32(ROOM_HALF_SIZE_MM)
        # Distance (in ray units) to the wall ahead along x and along y; a ray
        # parallel to a wall gets +inf (the camera is always inside the room).
        tx = np.where(wx > 0, R - f32(camx), R + f32(camx))
        tx /= np.abs(wx)
        ty = np.where(wy > 0, R - f32(camy), R + f32(camy))
        ty /= np.abs(wy)
        xwall = tx < ty
        tw = np.minimum(tx, ty)
        zw = tw * r.wz_row[:, None]
        zw += f32(camz)
        # Coordinate along the room's perimeter (walls in CCW order: +x, +y, -x, -y).
        hx = wx * tw
        hx += f32(camx)
        hy = wy * tw
        hy += f32(camy)
        L = 2 * R
        s_x = np.where(wx > 0, hy + R, (R - hy) + 2 * L)
        s_y = np.where(wy > 0, (R - hx) + L, (hx + R) + 3 * L)
        s = np.where(xwall, s_x, s_y)
        stripe = (s * f32(1.0 / STRIPE_MM)).astype(np.int32)
        wall_idx = np.take(self._stripe_pal, stripe, mode="clip")
        wall_shade = np.take(self._stripe_shade, stripe, mode="clip")
        band = (np.floor(zw * f32(1.0 / WALL_BAND_MM)).astype(np.int32) & 1).astype(f32)
        wall_shade *= f32(0.93) + f32(0.09) * band
        dado = (zw >= f32(DADO_Z_MM[0])) & (zw < f32(DADO_Z_MM[1]))
        np.copyto(wall_idx, np.int32(_P_DADO), where=dado)
        below = zw < 0
        # Below the table top the walls are in the table's shadow.
        dim = zw * f32(0.25 / TABLE_HEIGHT_MM)
        dim += f32(0.32)
        np.clip(dim, f32(0.1), f32(0.35), out=dim)
        np.multiply(wall_shade, dim, out=wall_shade, where=below)
        return wall_idx, wall_shade, zw

    @staticmethod
    def _draw_sky_and_floor(rc: _ResCache, r: "_Rays", zw, idx, shade):
        """The ceiling and the room's floor where the rays pass above or below the walls;
        returns where the ceiling is seen."""
        f32 = np.float32
        dzb, camz = r.dzb, r.camz
        sky = zw > f32(CEILING_MM)
        # Only rows looking upwards (a prefix: no roll) can see the ceiling.
        n_up = int(np.count_nonzero(dzb > 1e-9))
        drop = zw < f32(-TABLE_HEIGHT_MM)
        # Room floor: dark, a bit darker further away (per-row depth approx).
        down = dzb < -1e-9
        with np.errstate(divide="ignore", invalid="ignore"):
            t_rf = np.where(down, (-TABLE_HEIGHT_MM - camz) / np.where(down, dzb, -1.0), np.inf)
            rf_dist = t_rf * np.abs(r.dxb)
        rf_shade_row = np.clip(0.75 - rf_dist * 1.5e-4, 0.45, 0.75).astype(f32)
        if n_up:
            # Ceiling: a gradient by elevation with large faint panels.
            up_w = r.wz_row[:n_up, None]
            sky_up = sky[:n_up]
            tc = f32(CEILING_MM - camz) / up_w
            cx_ = np.floor((r.wx[:n_up] * tc + f32(r.camx)) * f32(1.0 / CEILING_PANEL_MM))
            cy_ = np.floor((r.wy[:n_up] * tc + f32(r.camy)) * f32(1.0 / CEILING_PANEL_MM))
            np.clip(cx_, -1e6, 1e6, out=cx_)
            np.clip(cy_, -1e6, 1e6, out=cy_)
            panel = ((cx_.astype(np.int32) + cy_.astype(np.int32)) & 1).astype(f32)
            sky_shade = rc.inv_norm[:n_up] * up_w      # sin(elevation)
            sky_shade *= f32(0.2)
            sky_shade += f32(0.84)
            sky_shade += panel * f32(0.06)
            np.copyto(shade[:n_up], sky_shade, where=sky_up)
            np.copyto(idx[:n_up], np.int32(_P_SKY), where=sky_up)
        np.copyto(idx, np.int32(_P_ROOMFLOOR), where=drop)
        np.copyto(shade, np.broadcast_to(rf_shade_row[:, None], shade.shape), where=drop)
        return sky

    def _draw_table(self, rc: _ResCache, r: "_Rays", idx, shade):
        """The table top (plane z = 0): checker tiles with per-tile variation, fading with
        the pixel's ground footprint to avoid aliasing, grain near the camera, a trim at
        the border; returns where the table is seen."""
        f32 = np.float32
        dzb, camz = r.dzb, r.camz
        down = dzb < -1e-9
        with np.errstate(divide="ignore", invalid="ignore"):
            t0_row = np.where(down, -camz / np.where(down, dzb, -1.0), np.inf).astype(f32)
        px = r.wx * t0_row[:, None]
        px += f32(r.camx)
        py = r.wy * t0_row[:, None]
        py += f32(r.camy)
        T = f32(self.table_half_size_mm)
        cheb = np.maximum(np.abs(px), np.abs(py))     # Chebyshev distance from the centre
        on_table = cheb <= T                           # nan / inf rows compare False
        fdist = t0_row * np.abs(r.dxb).astype(f32)
        footprint = fdist * fdist / f32(max(camz, 1.0) * rc.fy)
        contrast_row = np.clip(f32(1.3) - footprint * f32(1.0 / TILE_MM), 0.0, 1.0).astype(f32)
        ix = np.floor(px * f32(1.0 / TILE_MM))
        iy = np.floor(py * f32(1.0 / TILE_MM))
        # Only table pixels matter; elsewhere (inf / huge) clamp before casting.
        np.clip(ix, -1e6, 1e6, out=ix)
        np.clip(iy, -1e6, 1e6, out=iy)
        ix *= f32(65.0)
        ix += iy
        k = ix.astype(np.int32)
        k &= 4095                     # (np.take's mode="wrap" loops: slow for big values)
        table_shade = np.take(self._tiles, k, mode="clip")
        table_shade *= contrast_row[:, None]
        table_shade += f32(1.0)
        # Grain, only in the rows near enough to show it (a suffix of rows:
        # without roll, ground distance shrinks down the image).
        grain_row = np.clip(f32(1.3) - footprint * f32(1.0 / GRAIN_MM), 0.0, 1.0)
        near = np.nonzero(grain_row > 0)[0]
        if len(near):
            n = int(near[0])
            gx = np.floor(px[n:] * f32(1.0 / GRAIN_MM))
            gx *= f32(129.0)
            gx += np.floor(py[n:] * f32(1.0 / GRAIN_MM))
            k = gx.astype(np.int32)
            k &= 16383
            grain = np.take(self._grain, k, mode="clip")
            grain *= (grain_row[n:] * f32(0.05))[:, None]
            table_shade[n:] += grain
        trim = cheb > T - f32(TRIM_MM)
        trim &= on_table
        np.copyto(idx, np.int32(_P_TABLE), where=on_table)
        np.copyto(shade, table_shade, where=on_table)
        np.copyto(idx, np.int32(_P_TRIM), where=trim)
        np.copyto(shade, f32(1.0), where=trim)
        return on_table

    def _draw_boxes(self, rc: _ResCache, r: "_Rays", idx, shade, labels) -> None:
        """The charger and the cubes, each within its projected rectangle. They stand on
        the table, so neither the table nor the walls can hide them: only other boxes
        can, hence a depth buffer once two boxes are in view."""
        rects = []
        for k in range(len(self.boxes)):
            rect = self._box_rect(self._box_corners[k], rc, r.camx, r.camy, r.camz,
                                  r.cpsi, r.spsi, r.cth, r.sth)
            if rect is not None:
                rects.append((k, rect))
        depth = (np.full((rc.height, rc.width), np.inf, dtype=np.float32)
                 if len(rects) > 1 else None)
        for k, rect in rects:
            self._draw_box(k, rect, r.wx, r.wy, r.wz_row, r.camx, r.camy, r.camz, depth, idx,
                           shade, labels)

    def _expose(self, rc: _ResCache, idx, shade, gain, exposure_ms, noise, color):
        """Exposure, vignetting, sensor noise and the palette lookup: the image."""
        f32 = np.float32
        height, width = shade.shape
        scale = float(gain)
        if exposure_ms is not None:
            scale *= float(exposure_ms) / NOMINAL_EXPOSURE_MS
        scale = min(max(scale, 0.0), 64.0)
        shade *= rc.vignette
        shade *= f32(scale * _LEVELS)
        if noise:
            n = width * height
            off = int(self._noise_rng.integers(0, n))
            shade += rc.noise[off:off + n].reshape(height, width) * f32(min(scale, 16.0))
        np.clip(shade, 0.0, f32(_MAX_LEVEL), out=shade)
        code = shade.astype(np.int32)
        idx *= _MAX_LEVEL + 1
        code += idx
        if color:
            return np.take(_LUT_RGB, code, axis=0)
        return np.take(_LUT_GREY, code)

    # --------------------------------------------------------------- helpers
    @staticmethod
    def _box_rect(p: np.ndarray, rc: _ResCache, camx, camy, camz, cpsi, spsi, cth, sth):
        """Pixel rectangle (r0, r1, c0, c1) that may show a box, or None.

        ``p`` is the box's 8 corners (8 x 3, world frame)."""
        rx, ry, rz = p[:, 0] - camx, p[:, 1] - camy, p[:, 2] - camz
        bx = cpsi * rx + spsi * ry          # robot base frame
        by = -spsi * rx + cpsi * ry
        fwd = cth * bx + sth * rz           # camera frame
        up = -sth * bx + cth * rz
        left = by
        near = 0.5
        ahead = fwd >= near
        if not ahead.any():
            return None                     # entirely behind the camera
        if not ahead.all():
            # Clip the box's edges against the near plane: the corners in
            # front plus the edges' crossing points bound what can be seen.
            i, j = _BOX_EDGES[:, 0], _BOX_EDGES[:, 1]
            cross = ahead[i] != ahead[j]
            i, j = i[cross], j[cross]
            a = (near - fwd[i]) / (fwd[j] - fwd[i])
            left = np.concatenate([left[ahead], left[i] + a * (left[j] - left[i])])
            up = np.concatenate([up[ahead], up[i] + a * (up[j] - up[i])])
            fwd = np.concatenate([fwd[ahead], np.full(len(i), near)])
        w, h = rc.width, rc.height
        u = rc.cx - rc.fx * left / fwd
        v = rc.cy - rc.fy * up / fwd
        c0 = max(int(math.floor(u.min())) - 1, 0)
        c1 = min(int(math.ceil(u.max())) + 1, w)
        r0 = max(int(math.floor(v.min())) - 1, 0)
        r1 = min(int(math.ceil(v.max())) + 1, h)
        if c0 >= c1 or r0 >= r1:
            return None
        return r0, r1, c0, c1

    @staticmethod
    def _face_shades(box: Box) -> np.ndarray:
        c, s = math.cos(box.yaw_rad), math.sin(box.yaw_rad)
        normals = [(c, s, 0.0), (-c, -s, 0.0), (-s, c, 0.0), (s, -c, 0.0),
                   (0.0, 0.0, 1.0), (0.0, 0.0, -1.0)]
        return np.array([0.55 + 0.5 * max(0.0, float(np.dot(n, _LIGHT))) for n in normals],
                        dtype=np.float32)

    def _draw_box(self, k: int, rect, wx, wy, wz_row, camx, camy, camz,
                  depth, idx, shade, labels) -> None:
        """Ray-box intersection (slab method) inside the box's screen rectangle."""
        box, mtable = self.boxes[k], self._marker_tables[k]
        f32 = np.float32
        r0, r1, c0, c1 = rect
        cy_, sy_ = math.cos(box.yaw_rad), math.sin(box.yaw_rad)
        c, s = f32(cy_), f32(sy_)
        sx, sy = wx[r0:r1, c0:c1], wy[r0:r1, c0:c1]
        # Ray in the box's frame (origin at the box's centre).
        lx = sx * c
        lx += sy * s
        ly = sy * c
        ly -= sx * s
        lz_row = wz_row[r0:r1]
        ox0, oy0 = camx - box.x_mm, camy - box.y_mm
        ox = cy_ * ox0 + sy_ * oy0
        oy = -sy_ * ox0 + cy_ * oy0
        oz = camz - 0.5 * (box.z0_mm + box.z1_mm)
        hz = 0.5 * (box.z1_mm - box.z0_mm)
        # Slabs.  A direction component of 0 gives +-inf (a ray parallel to a
        # slab: (-inf, inf) inside it, an empty interval outside), never nan
        # unless the camera lies exactly on a face plane.
        inv = f32(1.0) / lx
        ta = inv * f32(-box.half_x_mm - ox)
        tb = inv * f32(box.half_x_mm - ox)
        tn = np.minimum(ta, tb)
        tf = np.maximum(ta, tb)
        inv = f32(1.0) / ly
        np.multiply(inv, f32(-box.half_y_mm - oy), out=ta)
        np.multiply(inv, f32(box.half_y_mm - oy), out=tb)
        lo_y = np.minimum(ta, tb)
        np.maximum(ta, tb, out=ta)
        np.minimum(tf, ta, out=tf)
        inv_z = f32(1.0) / lz_row
        za = inv_z * f32(-hz - oz)
        zb = inv_z * f32(hz - oz)
        lo_z = np.minimum(za, zb)[:, None]
        np.minimum(tf, np.maximum(za, zb)[:, None], out=tf)
        tn_xy = tn
        tn = np.maximum(tn_xy, lo_y)
        np.maximum(tn, lo_z, out=tn)
        hit = tn <= tf
        hit &= tn > 0
        if depth is not None:
            hit &= tn < depth[r0:r1, c0:c1]
        if not hit.any():
            return
        # Shade the whole rectangle with contiguous array operations (much
        # faster per pixel than gathering the hit pixels), then copy the hits.
        # The slab the ray entered last is the face it hit.
        is_x = tn == tn_xy
        is_z = tn == lo_z
        is_z &= ~is_x
        is_y = ~(is_x | is_z)
        lz = np.broadcast_to(lz_row[:, None], lx.shape)
        # Face id: 2*axis + (0 for the + face, 1 for the - face); a ray enters
        # through the + face when it travels towards -.
        face = np.where(is_x, lx > 0, np.where(is_y, ly > 0, lz > 0)).astype(np.int32)
        face += np.where(is_x, 0, np.where(is_y, 2, 4)).astype(np.int32)
        fs = np.take(self._box_face_shades[k], face)
        if mtable is not None:
            # Face coordinates: u across the face, v up it (along y on the top).
            hx_ = lx * tn
            hx_ += f32(ox)
            hy_ = ly * tn
            hy_ += f32(oy)
            hz_ = tn * lz_row[:, None]
            hz_ += f32(oz)
            u = np.where(is_x, hy_, hx_)
            v = np.where(is_z, hy_, hz_)
            mu = 0.92 * min(box.half_y_mm, hz)     # marker half-size on x faces
            mv = 0.92 * min(box.half_x_mm, hz)     # on y faces
            mz = 0.92 * min(box.half_x_mm, box.half_y_mm)
            m = np.where(is_x, f32(mu), np.where(is_y, f32(mv), f32(mz)))
            inside = np.abs(u) < m
            inside &= np.abs(v) < m
            if len(box.marker_faces) < 6:
                inside &= np.isin(face, np.array(box.marker_faces))
            scale = f32(3.5) / m
            gu = ((u + m) * scale).astype(np.int32)
            gv = ((m - v) * scale).astype(np.int32)
            np.clip(gu, 0, 6, out=gu)
            np.clip(gv, 0, 6, out=gv)
            gv *= 7
            gv += gu
            pal = np.where(inside, np.take(mtable, gv), np.int32(box.palette))
        else:
            pal = np.int32(box.palette)
        np.copyto(idx[r0:r1, c0:c1], pal, where=hit)
        np.copyto(shade[r0:r1, c0:c1], fs, where=hit)
        if depth is not None:
            np.copyto(depth[r0:r1, c0:c1], tn, where=hit)
        if labels is not None:
            np.copyto(labels[r0:r1, c0:c1], np.uint8(box.label), where=hit)

    @staticmethod
    def _draw_lift(h: float, rc: _ResCache, dxb, dzb, theta, idx, shade, labels) -> None:
        h = min(max(h, LIFT_HEIGHT_MIN_MM), LIFT_HEIGHT_MAX_MM)
        a = math.asin(max(-1.0, min(1.0, (h - LIFT_PIVOT_Z_MM) / LIFT_ARM_MM)))
        bar_x = LIFT_PIVOT_X_MM + LIFT_ARM_MM * math.cos(a)
        z_lo, z_hi = h - LIFT_BAR_BOTTOM_BELOW_MM, h - LIFT_BAR_TOP_BELOW_MM
        cam_x, cam_z = camera_in_base(theta)
        if bar_x <= cam_x + 1.0:
            return
        ahead = dxb > 1e-6
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(ahead, (bar_x - cam_x) / np.where(ahead, dxb, 1.0), np.inf)
        z = cam_z + t * dzb
        rows = ahead & (z >= z_lo) & (z <= z_hi)
        if not rows.any():
            return
        half_b = np.where(rows, LIFT_BAR_HALF_WIDTH_MM / t, 0.0).astype(np.float32)
        mask = np.abs(rc.b)[None, :] <= half_b[:, None]
        idx[mask] = _P_LIFT
        # Slight vertical shading across the bar.
        frac = np.clip((z - z_lo) / (z_hi - z_lo), 0.0, 1.0).astype(np.float32)
        np.copyto(shade, np.broadcast_to((0.8 + 0.4 * frac)[:, None], shade.shape), where=mask)
        if labels is not None:
            labels[mask] = LABEL_LIFT
