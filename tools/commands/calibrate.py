"""``stigmesh calibrate``: camera intrinsics from views of a 9x6 checkerboard.

``--camera ADDRESS`` reads the car's MJPEG stream and guides the capture:
hold the board (9x6 inner corners) in front of the camera, move it across
the picture and tilt it; a view is kept when the board covers a part of the
image no kept view covered, or sits at a new scale, angle or tilt. Progress
is printed for every view considered::

    view 7/15 accepted: board covers new area
    rejected: no board found

``--images DIR`` does the same with the image files of a directory (sorted
by name). With at least ``--views`` (15 or more) views kept,
``cv2.calibrateCamera`` fits fx, fy, cx, cy and (k1, k2, p1, p2; k3 held at
0, which a 320x240 lens cannot pin down). The result is written as a TOML
``[camera]`` table (the format :func:`agents.perception.tagmap.load_intrinsics`
reads) only when the RMS reprojection error is at most 1 px; otherwise, or
with too few views, nothing is written and the reason is printed.

The capture logic is the sans-IO :class:`CalibrationSession`; ``main`` only
reads frames or files and writes the result.
"""

from __future__ import annotations

import argparse
import math
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from agents.perception.tagmap import Intrinsics
from protocol.mjpeg import (
    FrameReason,
    FrameRejected,
    MjpegError,
    MjpegParser,
    jpeg_size,
    parse_frame_headers,
    request,
)

MIN_VIEWS = 15
MAX_PIXELS = 1600 * 1200  # the OV2640's largest frame: anything bigger is refused undecoded
MAX_RMS_PX = 1.0
BOARD = (9, 6)  # inner corners per row, per column
GRID = (4, 3)  # image cells for the coverage test
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")

EXIT_SAVED, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2

GrayImage = npt.NDArray[np.uint8]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    message: str


@dataclass(frozen=True)
class Calibration(Intrinsics):
    """Fitted intrinsics, with the fit's RMS reprojection error and how many views made it."""

    rms_px: float = 0.0
    views: int = 0

    def to_toml(self, board: tuple[int, int]) -> str:
        dist = ", ".join(f"{d:.8g}" for d in self.dist)
        return (
            f"# stigmesh calibrate: {board[0]}x{board[1]} inner corners, {self.views} views,"
            f" RMS {self.rms_px:.3f} px\n"
            "[camera]\n"
            f"width = {self.width}\n"
            f"height = {self.height}\n"
            f"fx = {self.fx:.6f}\n"
            f"fy = {self.fy:.6f}\n"
            f"cx = {self.cx:.6f}\n"
            f"cy = {self.cy:.6f}\n"
            f"dist = [{dist}]\n"
            f"rms_px = {self.rms_px:.6f}\n"
            f"views = {self.views}\n"
        )


@dataclass(frozen=True)
class Refusal:
    reason: str


@dataclass(frozen=True)
class _Shape:
    """Where and how a kept board sits in the image (for the novelty test)."""

    centre: tuple[float, float]  # fraction of width, height
    scale: float  # sqrt(board area) / image diagonal
    angle: float  # in-plane direction of the first row, rad
    tilt: tuple[float, float]  # log ratios of opposite edge lengths (perspective)


def _shape(corners: FloatArray, board: tuple[int, int], size: tuple[int, int]) -> _Shape:
    cols, rows = board
    grid = corners.reshape(rows, cols, 2)
    quad = np.array([grid[0, 0], grid[0, -1], grid[-1, -1], grid[-1, 0]])
    x, y = quad[:, 0], quad[:, 1]
    area = 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))
    w, h = size
    top = float(np.linalg.norm(quad[1] - quad[0]))
    bottom = float(np.linalg.norm(quad[2] - quad[3]))
    left = float(np.linalg.norm(quad[3] - quad[0]))
    right = float(np.linalg.norm(quad[2] - quad[1]))
    d = quad[1] - quad[0]
    return _Shape(
        (float(corners[:, 0].mean()) / w, float(corners[:, 1].mean()) / h),
        math.sqrt(area) / math.hypot(w, h),
        math.atan2(float(d[1]), float(d[0])),
        (math.log(top / bottom), math.log(left / right)),
    )


def _differs(a: _Shape, b: _Shape) -> bool:
    return (
        math.hypot(a.centre[0] - b.centre[0], a.centre[1] - b.centre[1]) > 0.1
        or abs(math.log(a.scale / b.scale)) > 0.15
        or abs(math.remainder(a.angle - b.angle, math.tau)) > math.radians(10.0)
        or abs(a.tilt[0] - b.tilt[0]) > 0.1
        or abs(a.tilt[1] - b.tilt[1]) > 0.1
    )


@dataclass
class CalibrationSession:
    """Keeps the views worth keeping, then calibrates or refuses."""

    board: tuple[int, int] = BOARD
    square: float = 0.025
    min_views: int = MIN_VIEWS
    max_rms: float = MAX_RMS_PX
    image_size: tuple[int, int] | None = None  # (width, height), fixed by the first image
    corners: list[FloatArray] = field(default_factory=list)
    _shapes: list[_Shape] = field(default_factory=list)
    _covered: set[tuple[int, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.min_views < MIN_VIEWS:
            raise ValueError(f"at least {MIN_VIEWS} views are needed, got {self.min_views}")
        if not 0.0 < self.max_rms <= MAX_RMS_PX:
            raise ValueError(f"max_rms must be in (0, {MAX_RMS_PX}] px")
        if self.board[0] < 2 or self.board[1] < 2 or self.square <= 0:
            raise ValueError("the board needs at least 2x2 inner corners and a square > 0")

    @property
    def views(self) -> int:
        return len(self.corners)

    @property
    def done(self) -> bool:
        return self.views >= self.min_views

    def offer(self, gray: GrayImage) -> Verdict:
        """Look for the board in one image; keep the view if it adds something new."""
        if gray.ndim != 2:
            return Verdict(False, "rejected: not a grey image")
        size = (int(gray.shape[1]), int(gray.shape[0]))
        if self.image_size is None:
            self.image_size = size
        elif size != self.image_size:
            w, h = self.image_size
            return Verdict(False, f"rejected: image is {size[0]}x{size[1]}, the others {w}x{h}")
        flags = cv2.CALIB_CB_ADAPTIVE_THRESH | cv2.CALIB_CB_NORMALIZE_IMAGE
        found, raw = cv2.findChessboardCorners(gray, self.board, flags=flags)
        if not found or raw is None:
            return Verdict(False, "rejected: no board found")
        criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 40, 0.01)
        refined = cv2.cornerSubPix(gray, raw, (5, 5), (-1, -1), criteria)
        corners = np.asarray(refined, dtype=np.float64).reshape(-1, 2)
        cells = {
            (min(int(x * GRID[0] / size[0]), GRID[0] - 1),
             min(int(y * GRID[1] / size[1]), GRID[1] - 1))
            for x, y in corners
        }  # fmt: skip
        shape = _shape(corners, self.board, size)
        new_cells = cells - self._covered
        if new_cells:
            why = "board covers new area"
        else:
            similar = [k for k, s in enumerate(self._shapes) if not _differs(shape, s)]
            if similar:
                return Verdict(False, f"rejected: same place and pose as view {similar[0] + 1}")
            why = "board at a new distance, angle or tilt"
        self.corners.append(corners)
        self._shapes.append(shape)
        self._covered |= cells
        count = f"{self.views}/{self.min_views}" if self.views <= self.min_views else self.views
        return Verdict(True, f"view {count} accepted: {why}")

    def calibrate(self) -> Calibration | Refusal:
        """Fit the intrinsics, or say why not (too few views, too large an error)."""
        if self.views < self.min_views or self.image_size is None:
            return Refusal(
                f"too few views: {self.views} accepted, {self.min_views} needed "
                "(move the board to parts of the picture not yet covered, and tilt it)"
            )
        cols, rows = self.board
        obj = np.zeros((cols * rows, 3), np.float32)
        obj[:, :2] = np.indices((cols, rows)).T.reshape(-1, 2) * self.square
        objects = [obj] * self.views
        images = [c.astype(np.float32).reshape(-1, 1, 2) for c in self.corners]
        flags = cv2.CALIB_FIX_K3
        try:
            rms, K, dist, _, _ = cv2.calibrateCamera(
                objects, images, self.image_size, None, None, flags=flags
            )
        except cv2.error as exc:
            return Refusal(f"calibration failed: {str(exc).strip().splitlines()[-1]}")
        K = np.asarray(K, dtype=np.float64)
        d = np.asarray(dist, dtype=np.float64).ravel()
        if not (math.isfinite(rms) and np.all(np.isfinite(K)) and np.all(np.isfinite(d))):
            return Refusal("calibration gave non-finite values")
        if rms > self.max_rms:
            return Refusal(
                f"RMS reprojection error {rms:.3f} px is above {self.max_rms:g} px: not saved "
                "(blurred or mis-detected views, a board that is not flat, or images "
                "from different cameras or zoom settings)"
            )
        w, h = self.image_size
        return Calibration(
            w, h, float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2]),
            tuple(float(x) for x in d[:5]), float(rms), self.views,
        )  # fmt: skip


# --------------------------------------------------------------------------- I/O


def _board(text: str) -> tuple[int, int]:
    cols, sep, rows = text.lower().partition("x")
    if not (sep and cols.isdigit() and rows.isdigit()):
        raise argparse.ArgumentTypeError(f"expected COLSxROWS of inner corners, got {text!r}")
    return int(cols), int(rows)


def _views(text: str) -> int:
    n = int(text)
    if n < MIN_VIEWS:
        raise argparse.ArgumentTypeError(f"at least {MIN_VIEWS} views, got {n}")
    return n


def _max_rms(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= MAX_RMS_PX:
        raise argparse.ArgumentTypeError(f"must be in (0, {MAX_RMS_PX}] px")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--camera", metavar="ADDRESS", help="the car's address: read its stream")
    src.add_argument("--images", metavar="DIR", type=Path, help="a directory of board images")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("camera.toml"),
        help="where to write the calibration (default camera.toml)",
    )
    p.add_argument(
        "--board",
        type=_board,
        default=BOARD,
        metavar="COLSxROWS",
        help="inner corners of the checkerboard (default 9x6)",
    )
    p.add_argument("--square", type=float, default=0.025, help="square edge, m (default 0.025)")
    p.add_argument(
        "--views", type=_views, default=MIN_VIEWS, help=f"views to collect (at least {MIN_VIEWS})"
    )
    p.add_argument(
        "--max-rms",
        type=_max_rms,
        default=MAX_RMS_PX,
        help=f"refuse to save above this RMS reprojection error (<= {MAX_RMS_PX} px)",
    )
    p.add_argument("--port", type=int, default=8080, help="camera port (default 8080)")
    p.add_argument(
        "--interval",
        type=float,
        default=0.5,
        help="seconds between views considered from the camera (default 0.5)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="give up on the camera after this many seconds (default 300)",
    )


def camera_frames(address: str, port: int, interval: float, timeout: float) -> Iterator[GrayImage]:
    """Grey frames from a car's stream, at most one per ``interval`` s, for ``timeout`` s."""
    deadline = time.monotonic() + timeout
    next_at = 0.0
    with socket.create_connection((address, port), timeout=5.0) as sock:
        sock.settimeout(5.0)
        sock.sendall(request(address))
        parser = MjpegParser()
        size: tuple[int, int] | None = None  # every frame must have the first one's size
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                return
            for part in parser.feed(data):
                now = time.monotonic()
                if now < next_at:
                    continue
                try:
                    frame = parse_frame_headers(part, size)
                    if size is None:  # the first frame's size, read before any decoding
                        size = jpeg_size(frame.jpeg)
                        if size[0] * size[1] > MAX_PIXELS:
                            raise FrameRejected(FrameReason.FRAME_SIZE, f"{size} is no camera's")
                except FrameRejected:
                    size = None if size is None or size[0] * size[1] > MAX_PIXELS else size
                    continue
                image = cv2.imdecode(np.frombuffer(frame.jpeg, np.uint8), cv2.IMREAD_GRAYSCALE)
                if image is None:
                    continue
                next_at = now + interval
                yield np.asarray(image, dtype=np.uint8)


def _image_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def main(args: argparse.Namespace) -> int:
    session = CalibrationSession(
        board=args.board, square=args.square, min_views=args.views, max_rms=args.max_rms
    )
    if args.images is not None:
        directory: Path = args.images
        if not directory.is_dir():
            print(f"stigmesh calibrate: error: {directory} is not a directory", file=sys.stderr)
            return EXIT_USAGE
        for path in _image_files(directory):
            image = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
            if image is None:
                print(f"{path.name}: rejected: not an image OpenCV can read", flush=True)
                continue
            print(f"{path.name}: {session.offer(np.asarray(image, np.uint8)).message}", flush=True)
    else:
        print(
            f"hold the {args.board[0]}x{args.board[1]} board in front of {args.camera}; "
            "move it across the picture and tilt it",
            flush=True,
        )
        try:
            for image in camera_frames(args.camera, args.port, args.interval, args.timeout):
                print(session.offer(image).message, flush=True)
                if session.done:
                    break
        except (OSError, MjpegError) as exc:
            print(f"camera stream ended: {exc}", file=sys.stderr)
    result = session.calibrate()
    if isinstance(result, Refusal):
        print(f"refused: {result.reason}", file=sys.stderr)
        return EXIT_REFUSED
    args.out.write_text(result.to_toml(args.board), encoding="utf-8")
    print(
        f"saved {args.out}: fx {result.fx:.2f} fy {result.fy:.2f} cx {result.cx:.2f} "
        f"cy {result.cy:.2f} dist {[round(d, 5) for d in result.dist]} "
        f"RMS {result.rms_px:.3f} px over {result.views} views",
        flush=True,
    )
    return EXIT_SAVED
