"""The face display: 128x32 one-bit images in the robot's run-length code.

Screen and protocol image
-------------------------
The OLED has 128x64 pixels, but a ``DisplayImage`` carries 128 columns x 32
rows.  The robot interleaves successive images on the physical rows to limit
burn-in, so a 128x64 picture is sent as its even rows (0, 2, ..., 62);
:func:`screen_to_display` does that, :func:`display_to_screen` doubles rows
back for viewing.

Run-length code
---------------
The image is walked column by column (x = 0..127), each column from the top
(y = 0) down.  The decoder keeps a cursor (x, y).  Every byte is one opcode;
its top two bits select the kind:

``00nnnnnn``  skip n+1 columns (1..64).  If the current column was partly
              written (y > 0) it is closed first, so the skip starts at the
              next column.  The skipped columns stay dark.
``01nnnnnn``  repeat the previous column n+1 times (1..64), closing a partly
              written column first, like a skip.
``10nnnnff``  a vertical run of n+1 pixels (1..16) down the current column.
``11nnnnff``  the same with n+17 pixels (17..32).
              ``ff`` != 0 means lit, 00 means dark.  When a run reaches the
              bottom row the cursor moves to the top of the next column.

Columns not reached by the end of the data stay dark.  The encoder here emits
what pycozmo's encoder (which reproduces the Cozmo app's captures) emits: an
all-dark column becomes a skip, a column equal to the previous emitted one a
repeat, a dark run right before a skip or repeat is dropped, and lit runs use
flag ``01`` except a lit run ending at the column bottom, which uses ``10``
(the app uses ``10`` more often; both mean lit).  So a blank screen is
``3f 3f`` (skip 64 + 64) and a fully lit one ``fe 7f 7e``.

A ``DisplayImage`` must fit one frame. Anki's engine packs a packet into a frame
while ``used + 4 + body < 1037`` (strict; PROTOCOL_NOTES), so alone in a frame a
DisplayImage, 4 bytes of packet header (type, length, id) and a body of a u16 length
prefix and the image, carries at most 1037 - 1 - 4 - 2 = 1030 bytes of image: never
more was sent to a robot, so ``MAX_DISPLAY_BYTES`` = 1030.
:func:`fit_to_frame` simplifies images that would not fit.

Decoding differs from pycozmo's ``ImageDecoder`` on purpose: that decoder
closes a partly written column before a skip only after a *short* run, and
also advances a column after a short lit run that already ended the column
(notes m.11).  Both disagree with its own encoder; this decoder follows the
encoder.  Malformed data (a run crossing the column bottom, drawing or
repeating past column 127, a repeat with no previous column) raises
:class:`RemoteProtocolError`.
"""

from __future__ import annotations

import heapq
from typing import Literal

import numpy as np

from .errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "DISPLAY_WIDTH",
    "DISPLAY_HEIGHT",
    "SCREEN_HEIGHT",
    "MAX_DISPLAY_BYTES",
    "BLANK_IMAGE",
    "encode_display",
    "decode_display",
    "fit_to_frame",
    "screen_to_display",
    "display_to_screen",
    "image_to_bits",
    "fitted_size",
]

DISPLAY_WIDTH = 128  # columns in a DisplayImage and on the OLED
DISPLAY_HEIGHT = 32  # rows in a DisplayImage
SCREEN_HEIGHT = 64  # physical OLED rows
#: Largest DisplayImage.image sent: the engine packs a packet while 4 + body < 1037 (strict),
#: so 1037 - 1 - 4 packet header - 2 length prefix.
MAX_DISPLAY_BYTES = 1030
#: Encoding of an all-dark image.
BLANK_IMAGE = b"\x3f\x3f"

_RUN_SHORT = 0x80
_RUN_LONG = 0xC0
_FLAG_LIT = 0x01
_FLAG_LIT_AT_BOTTOM = 0x02
_SKIP = 0x00
_REPEAT = 0x40
_PIXELS = DISPLAY_WIDTH * DISPLAY_HEIGHT


def _run_code_table() -> np.ndarray:
    """Run opcodes by [length, lit, row after the run % 32] (0 there: the run ends the column)."""
    table = np.zeros((DISPLAY_HEIGHT + 1, 2, DISPLAY_HEIGHT), dtype=np.uint8)
    for length in range(1, DISPLAY_HEIGHT + 1):
        code = _RUN_SHORT | ((length - 1) << 2) if length <= 16 else _RUN_LONG | ((length - 17) << 2)
        table[length, 0, :] = code
        table[length, 1, :] = code | _FLAG_LIT
        table[length, 1, 0] = code | _FLAG_LIT_AT_BOTTOM
    return table


def _count_codes(opcode: int) -> tuple[bytes, ...]:
    """Skip or repeat opcodes for 0..128 columns, at most 64 a byte."""
    codes = []
    for count in range(DISPLAY_WIDTH + 1):
        full, rest = divmod(count, 64)
        codes.append(bytes([opcode | 63] * full + ([opcode | (rest - 1)] if rest else [])))
    return tuple(codes)


_RUN_CODES = _run_code_table()
_SKIPS = _count_codes(_SKIP)
_REPEATS = _count_codes(_REPEAT)
#: the first run of an all-dark column: a dark run of 32 rows
_BLANK_COLUMN = _RUN_LONG | ((DISPLAY_HEIGHT - 17) << 2)
#: index in the flattened columns of each column's top, and of the end
_COLUMN_TOPS = np.arange(0, _PIXELS + 1, DISPLAY_HEIGHT)


def _check_bits(bits: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    arr = np.asarray(bits)
    if arr.shape != shape:
        raise LocalProtocolError(f"display image must have shape {shape}, got {arr.shape}")
    if arr.dtype != np.bool_:
        arr = arr != 0
    return arr


def _encode_columns(cols: np.ndarray) -> bytes:
    """Run-length code of ``(128, 32)`` bool columns.

    The runs of all columns come from a few numpy calls on the columns laid end to end;
    the Python loop then goes over the stretches of equal columns (a face has about 25,
    blank or repeated columns most of its 128), not over the columns one by one.
    """
    # one byte of 0 or 1 a pixel (a bool array may hold another byte for True: Pillow's 255)
    flat = cols.reshape(-1).view(np.uint8) != 0
    # a run starts at each column's top and where a pixel differs from the one above it;
    # the end is marked too, so that each run ends where the next starts
    edge = np.empty(_PIXELS + 1, dtype=bool)
    np.not_equal(flat[1:], flat[:-1], out=edge[1:_PIXELS])
    edge[::DISPLAY_HEIGHT] = True
    starts = np.flatnonzero(edge)
    begin = starts[:-1]
    end = starts[1:]
    codes = _RUN_CODES[end - begin, flat.view(np.uint8)[begin], end % DISPLAY_HEIGHT].tobytes()
    # column x's runs: codes[first_run[x] : first_run[x + 1]]
    first_run = np.searchsorted(starts, _COLUMN_TOPS).tolist()
    # the last column of each stretch of equal columns: a column's 32 bytes are 4 uint64,
    # and the 4 bools saying which of them differ from the previous column's, one uint32
    words = flat.view(np.uint64).reshape(DISPLAY_WIDTH, -1)
    lasts = np.flatnonzero((words[1:] != words[:-1]).view(np.uint32)).tolist()
    lasts.append(DISPLAY_WIDTH - 1)

    out = bytearray()
    owed = b""  # skip or repeat opcodes not yet written
    x = 0
    for last in lasts:
        if owed:
            # a dark run that ends the column just written is left out before a skip or repeat
            if out and (out[-1] & 0xC3) in (_RUN_SHORT, _RUN_LONG):
                del out[-1]
            out += owed
        run = first_run[x]
        if codes[run] == _BLANK_COLUMN:  # dark columns: skipped
            owed = _SKIPS[last + 1 - x]
        else:
            out += codes[run : first_run[x + 1]]
            owed = _REPEATS[last - x]
        x = last + 1
    if owed:
        if out and (out[-1] & 0xC3) in (_RUN_SHORT, _RUN_LONG):
            del out[-1]
        out += owed
    return bytes(out)


def encode_display(bits: np.ndarray) -> bytes:
    """Run-length encode a ``(32, 128)`` image (truthy = lit) for ``DisplayImage.image``.

    The result may exceed :data:`MAX_DISPLAY_BYTES`; use :func:`fit_to_frame`
    to get something that is guaranteed to fit.
    """
    arr = _check_bits(bits, (DISPLAY_HEIGHT, DISPLAY_WIDTH))
    return _encode_columns(np.ascontiguousarray(arr.T))


def decode_display(data: bytes) -> np.ndarray:
    """Decode ``DisplayImage.image`` bytes into a ``(32, 128)`` bool array (True = lit).

    Raises :class:`RemoteProtocolError` on malformed data, never anything else.
    """
    cols = np.zeros((DISPLAY_WIDTH, DISPLAY_HEIGHT), dtype=bool)
    x = 0
    y = 0
    for offset, op in enumerate(bytes(data)):
        kind = op >> 6
        if kind >= 2:
            length = ((op >> 2) & 0x0F) + (1 if kind == 2 else 17)
            if x >= DISPLAY_WIDTH:
                raise RemoteProtocolError(f"display image byte {offset}: run after the last column")
            if y + length > DISPLAY_HEIGHT:
                raise RemoteProtocolError(
                    f"display image byte {offset}: run of {length} from row {y} crosses the column bottom"
                )
            if op & 0x03:
                cols[x, y : y + length] = True
            y += length
            if y == DISPLAY_HEIGHT:
                x += 1
                y = 0
            continue
        count = (op & 0x3F) + 1
        if y:
            x += 1
            y = 0
        if kind == 1:
            if x == 0:
                raise RemoteProtocolError(f"display image byte {offset}: repeat with no previous column")
            if x + count > DISPLAY_WIDTH:
                raise RemoteProtocolError(f"display image byte {offset}: repeat past the last column")
            cols[x : x + count] = cols[x - 1]
        elif x + count > DISPLAY_WIDTH:
            raise RemoteProtocolError(f"display image byte {offset}: skip past the last column")
        x += count
    return np.ascontiguousarray(cols.T)


# --------------------------------------------------------------------------------------------
# Fitting into one frame
# --------------------------------------------------------------------------------------------


def _min_run_columns(cols: np.ndarray, k: int) -> np.ndarray:
    """Closest columns (fewest changed pixels) whose runs are all at least ``k`` long.

    Dynamic programme over rows, for all columns at once.  State: colour of the
    current run and its length so far, capped at ``k``.  A run may change colour
    only once it is ``k`` long, and the last run must be ``k`` long too.  Every
    column then has at most ``32 // k`` runs, i.e. at most that many bytes.
    """
    if not 2 <= k <= cols.shape[1]:
        raise LocalProtocolError(f"minimum run length must be in 2..{cols.shape[1]}, got {k}")
    n, height = cols.shape
    inf = np.iinfo(np.int32).max // 4
    pix = cols.astype(np.int32)
    cost = np.full((n, 2, k), inf, dtype=np.int32)
    cost[:, 0, 0] = pix[:, 0]
    cost[:, 1, 0] = 1 - pix[:, 0]
    # stay[i][col, c] True: at row i the full-length state (c, k-1) came from (c, k-1), else from (c, k-2).
    stay = np.zeros((height, n, 2), dtype=bool)
    for i in range(1, height):
        mismatch = np.stack((pix[:, i], 1 - pix[:, i]), axis=1)  # cost of colour 0 / 1 here
        new = np.empty_like(cost)
        new[:, :, 0] = cost[:, ::-1, k - 1]
        if k > 2:
            new[:, :, 1 : k - 1] = cost[:, :, 0 : k - 2]
        s = cost[:, :, k - 1] <= cost[:, :, k - 2]
        stay[i] = s
        new[:, :, k - 1] = np.where(s, cost[:, :, k - 1], cost[:, :, k - 2])
        cost = np.minimum(new + mismatch[:, :, None], inf)
    out = np.empty((n, height), dtype=bool)
    idx = np.arange(n)
    colour = np.argmin(cost[:, :, k - 1], axis=1)
    level = np.full(n, k - 1)
    for i in range(height - 1, -1, -1):
        out[:, i] = colour.astype(bool)
        if i == 0:
            break
        full = level == k - 1
        from_full = full & stay[i][idx, colour]
        first = level == 0
        colour = np.where(first, 1 - colour, colour)
        level = np.where(first, k - 1, np.where(full, np.where(from_full, k - 1, k - 2), level - 1))
    return out


def _runs_per_column(cols: np.ndarray) -> np.ndarray:
    return 1 + np.count_nonzero(cols[:, 1:] != cols[:, :-1], axis=1)


_FIT_LEVELS = (2, 3, 4, 6, 8, 11, 16, 32)


def fit_to_frame(bits: np.ndarray, max_bytes: int = MAX_DISPLAY_BYTES) -> tuple[bytes, np.ndarray]:
    """Encode a ``(32, 128)`` image so that it fits in ``max_bytes``.

    Returns ``(data, bits_sent)``.  If the plain encoding fits, ``bits_sent`` is
    the input.  Otherwise columns are simplified, most expensive first: each
    column may be replaced by the closest column whose runs are all at least k
    pixels long (k = 2, 3, 4, ...), choosing the replacements that save the most
    bytes per changed pixel, and the smallest set of replacements that fits is
    used.  A column with runs of at least 4 costs at most 8 bytes, so with the
    default limit (1030 >= 128 x 8 = 1024) a fitting image always exists.
    Raises :class:`LocalProtocolError` only if ``max_bytes`` is below 2.
    """
    arr = _check_bits(bits, (DISPLAY_HEIGHT, DISPLAY_WIDTH))
    if max_bytes < len(BLANK_IMAGE):
        raise LocalProtocolError(f"max_bytes={max_bytes} cannot hold any display image")
    cols = np.ascontiguousarray(arr.T)
    data = _encode_columns(cols)
    if len(data) <= max_bytes:
        return data, arr

    # Candidate columns per level; the run count bounds each column's bytes.
    levels = [cols]
    runs = [_runs_per_column(cols)]
    changed = [np.zeros(DISPLAY_WIDTH, dtype=np.int64)]
    for k in _FIT_LEVELS:
        cand = _min_run_columns(cols, k)
        levels.append(cand)
        runs.append(_runs_per_column(cand))
        changed.append(np.count_nonzero(cand != cols, axis=1))
        if int(runs[-1].sum()) <= max_bytes:
            break

    # Greedy upgrade order: best bytes saved per pixel changed first.
    n_levels = len(levels)
    current = [0] * DISPLAY_WIDTH
    heap: list[tuple[float, int, int]] = []

    def push_next(x: int) -> None:
        here = current[x]
        for nxt in range(here + 1, n_levels):
            saved = int(runs[here][x] - runs[nxt][x])
            if saved > 0:
                cost = max(int(changed[nxt][x] - changed[here][x]), 0) + 0.5
                heapq.heappush(heap, (-saved / cost, x, nxt))
                return

    for x in range(DISPLAY_WIDTH):
        push_next(x)
    upgrades: list[tuple[int, int]] = []
    bound = int(sum(runs[0]))
    bound_fit = None
    while heap:
        _, x, nxt = heapq.heappop(heap)
        bound -= int(runs[current[x]][x] - runs[nxt][x])
        current[x] = nxt
        upgrades.append((x, nxt))
        if bound <= max_bytes and bound_fit is None:
            bound_fit = len(upgrades)
        push_next(x)

    def columns_after(count: int) -> np.ndarray:
        out = cols.copy()
        for x, lvl in upgrades[:count]:
            out[x] = levels[lvl][x]
        return out

    # Smallest prefix of upgrades whose real encoding fits (the run bound over-estimates:
    # skips and repeats are cheaper), by bisection; then check it.
    hi = bound_fit if bound_fit is not None else len(upgrades)
    lo = 0
    best = None
    while lo < hi:
        mid = (lo + hi) // 2
        cand_cols = columns_after(mid)
        cand_data = _encode_columns(cand_cols)
        if len(cand_data) <= max_bytes:
            hi = mid
            best = (cand_data, cand_cols)
        else:
            lo = mid + 1
    if best is None or hi != lo:
        cand_cols = columns_after(hi)
        best = (_encode_columns(cand_cols), cand_cols)
    data, cand_cols = best
    if len(data) > max_bytes:
        # Only reachable for tiny max_bytes: all-dark always fits.
        return BLANK_IMAGE, np.zeros_like(arr)
    return data, np.ascontiguousarray(cand_cols.T)


# --------------------------------------------------------------------------------------------
# Image helpers
# --------------------------------------------------------------------------------------------


def screen_to_display(screen: np.ndarray) -> np.ndarray:
    """``(64, 128)`` screen image -> ``(32, 128)`` protocol image (even rows, as the robot expects)."""
    arr = _check_bits(screen, (SCREEN_HEIGHT, DISPLAY_WIDTH))
    return np.ascontiguousarray(arr[0::2])


def display_to_screen(bits: np.ndarray) -> np.ndarray:
    """``(32, 128)`` protocol image -> ``(64, 128)`` for viewing (each row doubled)."""
    arr = _check_bits(bits, (DISPLAY_HEIGHT, DISPLAY_WIDTH))
    return np.repeat(arr, 2, axis=0)


def fitted_size(width: int, height: int) -> tuple[int, int]:
    """``(width, height)`` of a ``width`` x ``height`` picture scaled to fit the ``128 x 64``
    screen keeping its aspect ratio (at least one pixel each way)."""
    scale = min(DISPLAY_WIDTH / width, SCREEN_HEIGHT / height)
    return (max(1, min(DISPLAY_WIDTH, round(width * scale))),
            max(1, min(SCREEN_HEIGHT, round(height * scale))))


def image_to_bits(
    image: np.ndarray,
    mode: Literal["threshold", "dither"] = "threshold",
    threshold: int = 128,
    size: tuple[int, int] | None = None,
) -> np.ndarray:
    """Fit any grey ``(H, W)`` or RGB(A) ``(H, W, 3|4)`` image onto the ``(64, 128)`` screen.

    The image is scaled to fit, keeping its aspect ratio (to ``size``, ``(width, height)``,
    when given: that of the picture ``image`` was sampled from), and centred on a dark
    background (letterbox).  ``mode='threshold'`` lights pixels whose luminance
    is at least ``threshold``; ``mode='dither'`` uses Floyd-Steinberg error
    diffusion (Pillow's, in C).  Accepts ``uint8``, ``bool`` or floats in [0, 1].
    """
    from PIL import Image  # (Image.Resampling and Image.Dither: Pillow 9.1 on; Ubuntu 22.04 has 9.0)

    arr = np.asarray(image)
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)) or 0 in arr.shape:
        raise LocalProtocolError(f"image must be (H, W), (H, W, 3) or (H, W, 4), got shape {arr.shape}")
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8) * 255
    elif np.issubdtype(arr.dtype, np.floating):
        arr = (np.clip(arr, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    elif arr.dtype != np.uint8:
        raise LocalProtocolError(f"image dtype must be uint8, bool or float in [0, 1], got {arr.dtype}")
    if mode not in ("threshold", "dither"):
        raise LocalProtocolError(f"mode must be 'threshold' or 'dither', got {mode!r}")
    src = Image.fromarray(np.ascontiguousarray(arr))
    if src.mode != "L":
        src = src.convert("L")
    h, w = arr.shape[:2]
    if size is None:
        size = fitted_size(w, h)
    elif not (1 <= size[0] <= DISPLAY_WIDTH and 1 <= size[1] <= SCREEN_HEIGHT):
        raise LocalProtocolError(f"size must fit the {DISPLAY_WIDTH} x {SCREEN_HEIGHT} screen, got {size}")
    size = (int(size[0]), int(size[1]))
    if size != (w, h):
        src = src.resize(size, getattr(Image, "Resampling", Image).LANCZOS)
    canvas = Image.new("L", (DISPLAY_WIDTH, SCREEN_HEIGHT), 0)
    # centred from an even row: the robot shows the even rows only, and an image one row high
    # must land on one of them
    canvas.paste(src, ((DISPLAY_WIDTH - size[0]) // 2, ((SCREEN_HEIGHT - size[1]) // 2) & ~1))
    if mode == "dither":
        # diffused over the rows that are shown (the even ones), each then doubled: dithered
        # at 64 rows, most of a shown row's error went to a row the robot never shows, and
        # greys came out far too dark or light (25 % grey showed 11 % lit)
        shown = Image.fromarray(np.ascontiguousarray(np.asarray(canvas)[0::2]))
        bits = np.array(shown.convert("1", dither=getattr(Image, "Dither", Image).FLOYDSTEINBERG), dtype=bool)
        return np.repeat(bits, 2, axis=0)
    return np.asarray(canvas) >= threshold
