"""The simulated car camera: tag textures, pinhole rendering, lens distortion, JPEG.

Rendering uses PyBullet's CPU renderer (``ER_TINY_RENDERER``) with a
projection built from the arena's intrinsics, on an image large enough that
the distorted output never samples outside it. The lens is OpenCV's radial
model (k1, k2): output pixel (u, v) shows the scene ray whose undistorted
normalised coordinates distort to ((u-cx)/fx, (v-cy)/fy), so an agent that
undistorts with the same K and (k1, k2, 0, 0) recovers a pinhole image.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pybullet as p

from worlds.arena import Camera

TAG_CELLS = 8  # tag36h11: 6x6 data cells plus a one-cell black border
TEXTURE_CELL_PX = 16
NEAR, FAR = 0.02, 30.0
NOISE_BANK = 8  # pre-drawn noise images, picked at random per frame


def frame_rng(seed: int) -> np.random.Generator:
    """The stream a world's camera noise is drawn from (its renderer's and its worker's)."""
    return np.random.default_rng([seed, 0xCA])


def tag_image(tag_id: int, cell_px: int = TEXTURE_CELL_PX) -> np.ndarray:
    """The tag's canonical image (grey, uint8) with a one-cell white quiet zone."""
    dictionary = cv2.aruco.getPredefinedDictionary(cv2.aruco.DICT_APRILTAG_36h11)
    marker = cv2.aruco.generateImageMarker(dictionary, tag_id, TAG_CELLS * cell_px)
    return cv2.copyMakeBorder(
        marker, cell_px, cell_px, cell_px, cell_px, cv2.BORDER_CONSTANT, value=255
    )


def write_tag_texture(tag_id: int, directory: Path) -> Path:
    """Write the tag's texture as a PNG for ``loadTexture``; returns its path.

    The image is written as it should look to a viewer facing the tag; the
    quads in :mod:`worlds.bodies` give texture coordinate v = 0 to the quad's
    bottom edge, which is how the tiny renderer reads PNG rows, so no extra
    mirroring is needed (a test renders tags and decodes them to prove it).
    """
    path = directory / f"tag36h11_{tag_id:03d}.png"
    if not path.exists():
        cv2.imwrite(str(path), cv2.cvtColor(tag_image(tag_id), cv2.COLOR_GRAY2BGR))
    return path


class Lens:
    """Intrinsics, distortion and the pinhole render that the distorted image is cut from."""

    def __init__(self, spec: Camera) -> None:
        self.spec = spec
        self.K = np.array([[spec.fx, 0, spec.cx], [0, spec.fy, spec.cy], [0, 0, 1]], np.float64)
        self.dist = np.array([spec.k1, spec.k2, 0.0, 0.0], np.float64)
        w, h = spec.width, spec.height
        us, vs = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
        pts = np.stack([us.ravel(), vs.ravel()], axis=1).reshape(-1, 1, 2)
        undist = cv2.undistortPoints(
            pts,
            self.K,
            self.dist,
            criteria=(cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 40, 1e-9),
        ).reshape(h, w, 2)
        xu = undist[..., 0] * spec.fx
        yu = undist[..., 1] * spec.fy
        # the render keeps the output's focal lengths and covers every ray used
        self.render_cx = math.ceil(-float(xu.min())) + 1.0
        self.render_cy = math.ceil(-float(yu.min())) + 1.0
        self.render_w = math.ceil(self.render_cx + float(xu.max())) + 2
        self.render_h = math.ceil(self.render_cy + float(yu.max())) + 2
        self.map_x = (xu + self.render_cx).astype(np.float32)
        self.map_y = (yu + self.render_cy).astype(np.float32)
        # OpenGL pixel i spans [i, i+1) with its centre at i + 0.5; OpenCV puts it at i
        cxf, cyf = self.render_cx + 0.5, self.render_cy + 0.5
        self.projection = p.computeProjectionMatrix(
            left=-cxf * NEAR / spec.fx,
            right=(self.render_w - cxf) * NEAR / spec.fx,
            bottom=-(self.render_h - cyf) * NEAR / spec.fy,
            top=cyf * NEAR / spec.fy,
            nearVal=NEAR,
            farVal=FAR,
        )

    def distort(self, pinhole: np.ndarray) -> np.ndarray:
        return cv2.remap(
            pinhole, self.map_x, self.map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )

    def project(self, points_cam: np.ndarray) -> np.ndarray:
        """Pixel coordinates of points in the camera frame (x right, y down, z forward)."""
        pts, _ = cv2.projectPoints(
            points_cam.reshape(-1, 1, 3).astype(np.float64),
            np.zeros(3),
            np.zeros(3),
            self.K,
            self.dist,
        )
        return pts.reshape(-1, 2)


def view_matrix(eye: tuple[float, float, float], yaw: float) -> Any:
    """A level camera at ``eye`` looking along heading ``yaw`` with +z up."""
    target = (eye[0] + math.cos(yaw), eye[1] + math.sin(yaw), eye[2])
    return p.computeViewMatrix(eye, target, (0.0, 0.0, 1.0))


class CameraRenderer:
    """Renders one camera view of a PyBullet world into a distorted, noisy JPEG."""

    def __init__(self, client: int, spec: Camera, rng: np.random.Generator) -> None:
        self.client = client
        self.spec = spec
        self.lens = Lens(spec)
        self._rng = rng
        shape = (spec.height, spec.width, 3)
        self._noise = [
            np.clip(rng.normal(0.0, spec.noise, shape), -127, 127).astype(np.int16)
            for _ in range(NOISE_BANK if spec.noise > 0 else 0)
        ]

    def render_pinhole(self, eye: tuple[float, float, float], yaw: float) -> np.ndarray:
        """The undistorted render (RGB, uint8) of size ``lens.render_w`` x ``lens.render_h``."""
        lens = self.lens
        _, _, rgba, _, _ = p.getCameraImage(
            lens.render_w,
            lens.render_h,
            view_matrix(eye, yaw),
            lens.projection,
            renderer=p.ER_TINY_RENDERER,
            flags=p.ER_NO_SEGMENTATION_MASK,
            shadow=0,
            lightDirection=(0.3, -0.5, 1.0),
            lightAmbientCoeff=0.65,
            lightDiffuseCoeff=0.35,
            lightSpecularCoeff=0.0,
            physicsClientId=self.client,
        )
        image = np.asarray(rgba, dtype=np.uint8).reshape(lens.render_h, lens.render_w, 4)
        return np.ascontiguousarray(image[:, :, :3])

    def render(self, eye: tuple[float, float, float], yaw: float) -> np.ndarray:
        """The camera image as the car's sensor gives it (BGR, uint8, distorted, noisy)."""
        rgb = self.render_pinhole(eye, yaw)
        image = self.lens.distort(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        if self._noise:
            noise = self._noise[int(self._rng.integers(len(self._noise)))]
            image = np.clip(image.astype(np.int16) + noise, 0, 255).astype(np.uint8)
        return image

    def encode(self, image: np.ndarray) -> bytes:
        ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, self.spec.jpeg_quality])
        if not ok:
            raise RuntimeError("JPEG encoding failed")
        return bytes(buf)
