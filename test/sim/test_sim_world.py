"""Tests of the simulated world and its camera renderer (cozmo_driver.sim.world)."""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import pytest
from PIL import Image

from cozmo_driver.sim import world as W
from cozmo_driver.sim.world import World

pytestmark = pytest.mark.timeout(60)

DEG = math.pi / 180.0
HOME = (-210.0, 0.0, 0.0)   # on the charger, looking along +x at the cubes and the far wall


@pytest.fixture(scope="module")
def world() -> World:
    return World(seed=0)


def grey(world, x, y, yaw, head, **kw):
    kw.setdefault("noise", False)
    return world.render(x, y, yaw, head, color=False, **kw)


def labels(world, x, y, yaw, head, **kw):
    return world.render(x, y, yaw, head, noise=False, return_mask=True, **kw)[1]


# --- shapes, types, determinism ----------------------------------------------

def test_shapes_and_dtypes(world):
    c = world.render(*HOME, 0.0)
    g = world.render(*HOME, 0.0, color=False)
    assert c.shape == (240, 320, 3) and c.dtype == np.uint8
    assert g.shape == (240, 320) and g.dtype == np.uint8
    small = world.render(*HOME, 0.0, width=160, height=120)
    assert small.shape == (120, 160, 3) and small.dtype == np.uint8
    img, lab = world.render(*HOME, 0.0, color=False, return_mask=True)
    assert img.shape == lab.shape == (240, 320) and lab.dtype == np.uint8
    assert set(np.unique(lab)) <= {W.LABEL_SKY, W.LABEL_WALL, W.LABEL_TABLE, W.LABEL_DROP,
                                   W.LABEL_CUBE, W.LABEL_CHARGER, W.LABEL_LIFT}
    # A real picture, not a flat fill.
    assert g.std() > 20 and len(np.unique(g)) > 50


def test_grey_matches_colour_luminance(world):
    c = world.render(*HOME, -10 * DEG, noise=False).astype(np.float32)
    g = grey(world, *HOME, -10 * DEG).astype(np.float32)
    lum = c @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    assert np.abs(lum - g).mean() < 2.0


def test_deterministic_without_noise():
    a, b = World(seed=0), World(seed=0)
    p = (-100.0, 40.0, 0.3, -5 * DEG)
    first = a.render(*p, noise=False)
    assert np.array_equal(first, a.render(*p, noise=False))
    assert np.array_equal(first, b.render(*p, noise=False))
    # Noise in between does not disturb the noiseless image.
    a.render(*p, noise=True)
    assert np.array_equal(first, a.render(*p, noise=False))


def test_noise_is_light_and_seeded():
    p = (-100.0, 40.0, 0.3, -5 * DEG)
    a, b = World(seed=7), World(seed=7)
    n1, n2 = a.render(*p), a.render(*p)
    assert np.array_equal(n1, b.render(*p))          # same seed, same sequence
    assert not np.array_equal(n1, n2)                # frames differ
    clean = a.render(*p, noise=False).astype(np.int16)
    d = np.abs(n1.astype(np.int16) - clean)
    assert 0.3 < d.mean() < 4.0


def test_seed_changes_layout():
    a, b = World(seed=0), World(seed=1)
    assert a.cube_poses != b.cube_poses
    assert a.charger_pose == b.charger_pose
    assert len(a.cube_poses) == 3


# --- the table and the cliff ---------------------------------------------------

def test_cliff_at(world):
    t = world.table_half_size_mm
    assert t == 600.0
    assert not world.cliff_at(0.0, 0.0)
    assert not world.cliff_at(t - 1, -(t - 1))
    assert world.cliff_at(t + 1, 0.0)
    assert world.cliff_at(0.0, -(t + 1))
    assert world.cliff_at(700.0, 700.0)
    small = World(table_half_size_mm=200.0)
    assert small.cliff_at(250.0, 0.0) and not small.cliff_at(150.0, 150.0)
    cx, cy, _ = world.charger_pose
    assert not world.cliff_at(cx, cy)
    assert all(not world.cliff_at(x, y) for x, y, _ in world.cube_poses)


def test_table_edge_from_close_shows_dark_drop(world):
    head = -25 * DEG  # the camera 19.5 mm ahead of the drive centre, 34 mm up
    edge = grey(world, 556.0, 0.0, 0.0, head)
    safe = grey(world, 0.0, 0.0, 0.0, head)
    lab = labels(world, 556.0, 0.0, 0.0, head)
    lower = slice(120, 240)
    assert np.mean(lab[lower] == W.LABEL_DROP) > 0.8
    assert np.mean(labels(world, 0.0, 0.0, 0.0, head)[lower] == W.LABEL_TABLE) > 0.99
    assert edge[lower].mean() < 70
    assert edge[lower].mean() < 0.5 * safe[lower].mean()


def test_table_edge_seen_across_the_table(world):
    # Looking at the edge from 20 cm away: table near, drop beyond, edge in between.
    lab = labels(world, 380.0, 0.0, 0.0, -25 * DEG)
    col = lab[:, 160]
    assert col[-1] == W.LABEL_TABLE
    assert W.LABEL_DROP in col
    # From the top: wall, then the drop, then the table down to the bottom row.
    first_drop = int(np.argmax(col == W.LABEL_DROP))
    first_table = int(np.argmax(col == W.LABEL_TABLE))
    assert np.all(col[:first_drop] == W.LABEL_WALL)
    assert np.all(col[first_drop:first_table] == W.LABEL_DROP)
    assert np.all(col[first_table:] == W.LABEL_TABLE)
    img = grey(world, 380.0, 0.0, 0.0, -25 * DEG).astype(np.float32)[:, 150:170]
    drop_rows = np.nonzero(col == W.LABEL_DROP)[0]
    assert img[drop_rows].mean() < 0.5 * img[first_table + 3:].mean()


# --- motion is visible -----------------------------------------------------------

def _best_shift(a: np.ndarray, b: np.ndarray, max_shift: int) -> int:
    """Shift s (pixels) maximising the correlation of b(x) with a(x - s)."""
    best, best_s = -np.inf, 0
    n = len(a)
    for s in range(-max_shift, max_shift + 1):
        if s >= 0:
            x, y = a[:n - s], b[s:]
        else:
            x, y = a[-s:], b[:n + s]
        x, y = x - x.mean(), y - y.mean()
        score = float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y) + 1e-9))
        if score > best:
            best, best_s = score, s
    return best_s


@pytest.mark.parametrize("start_yaw", [0.0, 1.3, -2.5])
def test_turning_left_moves_wall_pattern_right(world, start_yaw):
    x, y, head = 0.0, 0.0, 8 * DEG          # head up a bit: the band is all wall
    band = slice(10, 60)
    lab = labels(world, x, y, start_yaw, head)
    assert np.all(lab[band] == W.LABEL_WALL)
    a = grey(world, x, y, start_yaw, head)[band].astype(np.float32).mean(axis=0)
    b = grey(world, x, y, start_yaw + 10 * DEG, head)[band].astype(np.float32).mean(axis=0)
    fx = W.camera_intrinsics(320, 240)[0]
    expected = fx * math.tan(10 * DEG)        # ~51 px near the image centre
    s = _best_shift(a, b, 90)
    assert expected - 12 <= s <= expected + 15, s
    # And turning right moves it left.
    c = grey(world, x, y, start_yaw - 10 * DEG, head)[band].astype(np.float32).mean(axis=0)
    assert -expected - 15 <= _best_shift(a, c, 90) <= -expected + 12


def test_driving_forward_changes_floor_not_horizon(world):
    x, y, yaw, head = -200.0, 150.0, 0.0, 0.0
    a = grey(world, x, y, yaw, head).astype(np.float32)
    b = grey(world, x + 40.0, y, yaw, head).astype(np.float32)
    lab = labels(world, x, y, yaw, head)
    top, low = slice(0, 80), slice(170, 240)
    assert np.all(lab[top] == W.LABEL_WALL)
    assert np.all(lab[low] == W.LABEL_TABLE)
    d_top = np.abs(a[top] - b[top]).mean()
    d_low = np.abs(a[low] - b[low]).mean()
    assert d_low > 8.0
    assert d_top < 0.35 * d_low
    # The floor moved as a ground plane seen from a camera 45 mm high should:
    # warping the first image by that motion predicts the second one.
    fx, fy, cx, cy = W.camera_intrinsics(320, 240)
    camz = W.camera_position(x, y, yaw, head)[2]
    rows, cols = np.mgrid[150:240, 0:320] + 0.5
    dist = fy * camz / (rows - cy)                  # ground distance ahead of the camera
    lateral = (cols - cx) * dist / fx
    ra = np.rint(cy + fy * camz / (dist + 40.0) - 0.5).astype(int)
    ca = np.rint(cx + lateral * fx / (dist + 40.0) - 0.5).astype(int)
    warped = np.abs(b[150:240] - a[ra, ca]).mean()
    unwarped = np.abs(b[150:240] - a[150:240]).mean()
    assert warped < 0.25 * unwarped, (warped, unwarped)


def test_tilting_head_down_shows_more_floor(world):
    fractions = []
    for head in (44.5 * DEG, 20 * DEG, 0.0, -25 * DEG):
        lab = labels(world, *HOME, head)
        fractions.append(float(np.mean(lab == W.LABEL_TABLE)))
    assert fractions == sorted(fractions) and fractions[0] < fractions[-1]
    assert fractions[0] == 0.0 and fractions[-1] > 0.9
    up = labels(world, *HOME, 44.5 * DEG)
    assert np.mean(up == W.LABEL_SKY) > 0.3 and np.all(up[0] == W.LABEL_SKY)
    # The horizon of the wall moves down the image as the head goes up.
    level = labels(world, *HOME, 0.0)
    assert np.mean(level == W.LABEL_WALL) > 0.3


def test_cube_lies_where_the_pinhole_model_projects_it(world):
    fx, fy, cx, cy = W.camera_intrinsics(320, 240)
    for head in (0.0, -15 * DEG):
        x, y, yaw = HOME
        lab = labels(world, x, y, yaw, head)
        camx, camy, camz = W.camera_position(x, y, yaw, head)
        hits = 0
        for bx, by, _ in world.cube_poses:
            # Cube centre in the camera frame (forward, left, up).
            rx, ry, rz = bx - camx, by - camy, W.CUBE_SIZE_MM / 2 - camz
            fwd = math.cos(yaw) * rx + math.sin(yaw) * ry
            left = -math.sin(yaw) * rx + math.cos(yaw) * ry
            f = math.cos(head) * fwd + math.sin(head) * rz
            up = -math.sin(head) * fwd + math.cos(head) * rz
            u, v = cx - fx * left / f, cy - fy * up / f
            if 2 <= u < 318 and 2 <= v < 238:
                assert lab[int(v), int(u)] == W.LABEL_CUBE
                hits += 1
        assert hits >= 2


def test_box_culling_matches_brute_force():
    # Boxes are ray-cast only inside their projected screen rectangle (clipped
    # at the camera plane when the camera is close): casting over the whole
    # image must give the same picture, also from very close by.
    culled, brute = World(seed=2), World(seed=2)
    brute._box_rect = lambda p, rc, *a: (0, rc.height, 0, rc.width)
    rng = np.random.default_rng(11)
    for _ in range(40):
        box = culled.boxes[int(rng.integers(len(culled.boxes)))]
        x, y = box.x_mm + rng.uniform(-120, 120), box.y_mm + rng.uniform(-120, 120)
        yaw = rng.uniform(-math.pi, math.pi)
        head = rng.uniform(W.HEAD_ANGLE_MIN_RAD, W.HEAD_ANGLE_MAX_RAD)
        a, la = culled.render(x, y, yaw, head, noise=False, return_mask=True)
        b, lb = brute.render(x, y, yaw, head, noise=False, return_mask=True)
        assert np.array_equal(la, lb) and np.array_equal(a, b)


def test_moving_cubes_and_charger():
    w = World(seed=0)
    before = labels(w, *HOME, 0.0)
    # Put cube 0 straight ahead, 20 cm away: it covers the image centre.
    w.set_cube_pose(0, HOME[0] + 200.0, HOME[1], 0.3)
    assert w.cube_poses[0] == (HOME[0] + 200.0, HOME[1], 0.3)
    lab = labels(w, *HOME, -5 * DEG)
    assert lab[140, 160] == W.LABEL_CUBE
    assert not np.array_equal(lab, before)
    # Lifted 40 mm: it is seen higher in the image.
    w.set_cube_pose(0, HOME[0] + 200.0, HOME[1], 0.3, z_mm=40.0)
    lifted = labels(w, *HOME, -5 * DEG)
    def rows(m):
        return np.nonzero((m == W.LABEL_CUBE)[:, 150:170].any(axis=1))[0]

    assert rows(lifted).mean() < rows(lab).mean() - 10
    # The charger follows its pose.
    w.charger_pose = (300.0, 300.0, math.pi / 2)
    assert w.charger_pose == (300.0, 300.0, math.pi / 2)
    lab = labels(w, 300.0, 50.0, math.pi / 2, 0.0)     # 25 cm in front, looking at its back
    assert np.mean(lab == W.LABEL_CHARGER) > 0.01
    # Nothing left where it was (seen from 21 cm in front of the old place).
    assert not np.any(labels(w, 0.0, 0.0, math.pi, 0.0) == W.LABEL_CHARGER)


def test_a_snapshot_keeps_the_scene_while_the_world_changes():
    """The simulator's camera worker renders a snapshot taken on the I/O thread, which goes
    on moving cubes and the charger: the snapshot shows the world as it was."""
    w = World(seed=0)
    snap = w.snapshot()
    before = labels(w, *HOME, -5 * DEG)
    w.set_cube_pose(0, HOME[0] + 200.0, HOME[1], 0.3)
    w.charger_pose = (300.0, 300.0, math.pi / 2)
    assert labels(w, *HOME, -5 * DEG)[140, 160] == W.LABEL_CUBE
    assert np.array_equal(labels(snap, *HOME, -5 * DEG), before)
    assert snap.charger_pose == HOME and snap.cube_poses != w.cube_poses
    # noise continues the world's seeded sequence
    a, b = World(seed=3), World(seed=3)
    first = a.render(*HOME, 0.0, color=False)
    assert np.array_equal(b.snapshot().render(*HOME, 0.0, color=False), first)
    assert np.array_equal(a.render(*HOME, 0.0, color=False), b.render(*HOME, 0.0, color=False))


def test_charger_visible_when_facing_it(world):
    cx, cy, cyaw = world.charger_pose
    # 25 cm in front of the charger, facing back at it.
    x, y = cx + 250 * math.cos(cyaw), cy + 250 * math.sin(cyaw)
    lab = labels(world, x, y, cyaw + math.pi, 0.0)
    assert np.mean(lab == W.LABEL_CHARGER) > 0.01


def test_lift_occludes_when_raised_in_front(world):
    none = labels(world, *HOME, 0.0)
    assert not np.any(none == W.LABEL_LIFT)
    down = labels(world, *HOME, 0.0, lift_height_mm=W.LIFT_HEIGHT_MIN_MM)
    assert not np.any(down == W.LABEL_LIFT)
    # Anki's geometry: the crossbar (28.5..20 mm below the wrist) crosses a level view
    # (the camera 41 mm up) with the lift at about 65 mm
    mid = labels(world, *HOME, 0.0, lift_height_mm=65.0)
    assert np.mean(mid == W.LABEL_LIFT) > 0.3
    assert mid[120, 160] == W.LABEL_LIFT and not np.any(mid[:40] == W.LABEL_LIFT)
    low_view = labels(world, *HOME, -25 * DEG, lift_height_mm=W.LIFT_HEIGHT_MIN_MM)
    assert np.any(low_view[200:] == W.LABEL_LIFT)


# --- exposure ------------------------------------------------------------------------

def test_gain_and_exposure_are_monotonic(world):
    p = (*HOME, -5 * DEG)
    gains = [grey(world, *p, gain=g).mean() for g in (0.25, 0.5, 1.0, 1.5)]
    assert all(a < b for a, b in zip(gains, gains[1:])), gains
    exps = [grey(world, *p, exposure_ms=e).mean() for e in (5, 15, 33, 50)]
    assert all(a < b for a, b in zip(exps, exps[1:])), exps
    assert np.array_equal(grey(world, *p, exposure_ms=33.0), grey(world, *p))
    assert grey(world, *p, gain=0.0).max() == 0
    assert grey(world, *p, gain=100.0).min() >= 250          # clipped, not wrapped
    colour = [world.render(*p, gain=g, noise=False).mean() for g in (0.5, 1.0, 2.0)]
    assert colour[0] < colour[1] < colour[2]
    with_noise = [world.render(*p, gain=g, color=False).mean() for g in (0.5, 1.0, 2.0)]
    assert with_noise[0] < with_noise[1] < with_noise[2]


# --- real images -----------------------------------------------------------------

def test_saves_example_frames_and_jpeg_size(world, tmp_path):
    c = world.render(*HOME, -10 * DEG)
    g = world.render(*HOME, -10 * DEG, color=False)
    Image.fromarray(c).save(tmp_path / "world_colour.png")
    Image.fromarray(g).save(tmp_path / "world_grey.png")
    rc = Image.open(tmp_path / "world_colour.png")
    rg = Image.open(tmp_path / "world_grey.png")
    assert rc.mode == "RGB" and rc.size == (320, 240)
    assert rg.mode == "L" and rg.size == (320, 240)
    assert np.array_equal(np.asarray(rc), c) and np.array_equal(np.asarray(rg), g)
    buf = io.BytesIO()
    Image.fromarray(g).save(buf, "JPEG", quality=50)
    assert 2_000 < len(buf.getvalue()) < 16_000


def test_any_pose_renders_without_warnings(world):
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(40):
            x, y = rng.uniform(-650, 650, size=2)
            yaw = rng.uniform(-math.pi, math.pi)
            head = rng.uniform(W.HEAD_ANGLE_MIN_RAD, W.HEAD_ANGLE_MAX_RAD)
            img = world.render(x, y, yaw, head, lift_height_mm=rng.uniform(32, 92),
                               color=bool(rng.integers(2)))
            assert img.dtype == np.uint8
        # Axis-aligned rays (exact zeros in the direction) and standing on a cube.
        for yaw in (0.0, math.pi / 2, math.pi, -math.pi / 2):
            world.render(0.0, 0.0, yaw, 0.0)
        bx, by, _ = world.cube_poses[0]
        world.render(bx, by, 0.0, -25 * DEG)
        # Far off the table and even outside the room: still an image.
        for x, y in ((800.0, 0.0), (5000.0, -5000.0)):
            assert world.render(x, y, 1.0, 0.0, color=False).shape == (240, 320)
