"""Synthetic checkerboard views through a known lens (OpenCV radial model), for calibration."""

from __future__ import annotations

import cv2
import numpy as np

from agents.perception.tagmap import Intrinsics, rot_x, rot_y, rot_z

SUPERSAMPLE = 2
TEXTURE_PX = 24  # texture pixels per board square


def board_texture(board: tuple[int, int], px: int = TEXTURE_PX) -> np.ndarray:
    """Squares (cols+1) x (rows+1), first one black, with a one-square white margin."""
    cols, rows = board[0] + 1, board[1] + 1
    tex = np.full(((rows + 2) * px, (cols + 2) * px), 255, np.uint8)
    for r in range(rows):
        for c in range(cols):
            if (r + c) % 2 == 0:
                tex[(r + 1) * px : (r + 2) * px, (c + 1) * px : (c + 2) * px] = 0
    return tex


class BoardCamera:
    """Renders a planar checkerboard at a given pose through ``camera``'s lens."""

    def __init__(self, camera: Intrinsics, board: tuple[int, int], square: float) -> None:
        self.camera, self.board, self.square = camera, board, square
        self.texture = board_texture(board)
        s = SUPERSAMPLE
        w, h = camera.width * s, camera.height * s
        us, vs = np.meshgrid((np.arange(w) + 0.5) / s - 0.5, (np.arange(h) + 0.5) / s - 0.5)
        pts = np.stack([us.ravel(), vs.ravel()], axis=1).reshape(-1, 1, 2)
        crit = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 40, 1e-9)
        und = cv2.undistortPoints(pts, camera.matrix, camera.dist_coeffs, criteria=crit)
        self.rays = np.concatenate([und.reshape(-1, 2), np.ones((und.shape[0], 1))], axis=1)
        self.shape = (h, w)

    def _plane(self, R: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Board coordinates (X, Y) of every ray on the plane (R, t), and which hit behind."""
        H = np.column_stack([R[:, 0], R[:, 1], t])
        board = self.rays @ np.linalg.inv(H).T
        w = board[:, 2]
        behind = w <= 0
        safe = np.where(behind, 1.0, w)
        return board[:, 0] / safe, board[:, 1] / safe, behind

    def render(
        self, R: np.ndarray, t: np.ndarray, rng: np.random.Generator, fold: float = 0.0
    ) -> np.ndarray:
        """The grey image of the board whose frame is (R, t) in the camera frame.

        ``fold`` (rad) bends the board's right half about its middle column: a
        board that is not flat, which no pinhole calibration can explain.
        """
        X, Y, behind = self._plane(R, t)
        if fold:
            mid = np.array([(self.board[0] - 1) * self.square / 2, 0.0, 0.0])
            Rf = rot_y(fold)
            X2, Y2, behind2 = self._plane(R @ Rf, t + R @ (mid - Rf @ mid))
            right = mid[0] <= X2
            X, Y = np.where(right, X2, X), np.where(right, Y2, Y)
            behind = np.where(right, behind2, behind)
        px = TEXTURE_PX / self.square
        mx = (X * px + TEXTURE_PX).astype(np.float32)
        my = (Y * px + TEXTURE_PX).astype(np.float32)
        mx[behind] = -1e4
        big = cv2.remap(
            self.texture, mx.reshape(self.shape), my.reshape(self.shape), cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT, borderValue=170,
        )  # fmt: skip
        size = (self.camera.width, self.camera.height)
        image = cv2.resize(big, size, interpolation=cv2.INTER_AREA)
        noisy = image.astype(np.float64) + rng.normal(0.0, 2.0, image.shape)
        image = np.clip(noisy, 0, 255).astype(np.uint8)
        ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 85])
        assert ok
        decoded = cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE)
        assert decoded is not None
        return np.asarray(decoded, np.uint8)


def random_pose(
    rng: np.random.Generator, board: tuple[int, int], square: float, camera: Intrinsics
) -> tuple[np.ndarray, np.ndarray]:
    """A board pose that keeps the whole board in view: 0.3-0.55 m away, tilted up to 35°."""
    width, height = (board[0] + 1) * square, (board[1] + 1) * square
    R = rot_z(rng.uniform(-0.4, 0.4)) @ rot_y(rng.uniform(-0.6, 0.6))
    R = R @ rot_x(rng.uniform(-0.6, 0.6))
    depth = rng.uniform(0.3, 0.55)
    half_w = depth * camera.width / 2 / camera.fx
    half_h = depth * camera.height / 2 / camera.fy
    cx = rng.uniform(-0.55, 0.55) * max(half_w - width / 2, 0.0)
    cy = rng.uniform(-0.55, 0.55) * max(half_h - height / 2, 0.0)
    centre = np.array([cx, cy, depth])
    # the board frame's origin is its first inner corner; put the board's middle at `centre`
    middle = np.array([(board[0] - 1) * square / 2, (board[1] - 1) * square / 2, 0.0])
    return R, centre - R @ middle


def views(
    camera: Intrinsics,
    n: int,
    seed: int,
    *,
    board: tuple[int, int] = (9, 6),
    square: float = 0.025,
    fold: float = 0.0,
) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    cam = BoardCamera(camera, board, square)
    return [cam.render(*random_pose(rng, board, square, camera), rng, fold) for _ in range(n)]
