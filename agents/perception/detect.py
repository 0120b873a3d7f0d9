"""tag36h11 detection with pupil-apriltags, and the gates a detection must pass.

A detection is kept only with Hamming distance 0 (no corrected bits), a
decision margin of at least 20 and a mean edge of at least 20 px; anything
else is returned as a :class:`Rejection` with a named reason. The same id
seen twice in one frame is refused for a wall tag (which of the two is the
real one cannot be told); the target carries its tag on four faces, so
callers pass its id in ``multi_ids``.

Corners are returned in the order ``cv2.SOLVEPNP_IPPE_SQUARE`` expects for a
tag frame with x to the viewer's right and y down: bottom-left, bottom-right,
top-right, top-left as a viewer facing the tag sees them. (pupil-apriltags
reports them starting at the top-right corner; checked on rendered tags.)
"""

from __future__ import annotations

import weakref
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pupil_apriltags

FloatArray = npt.NDArray[np.float64]

HAMMING = "hamming"
LOW_MARGIN = "low_margin"
SMALL_TAG = "small_tag"
DUPLICATE_TAG = "duplicate_tag"

# pupil-apriltags corner k -> IPPE_SQUARE point: pupil starts top-right and runs
# top-left, bottom-left, bottom-right; IPPE wants bottom-left, bottom-right, top-right, top-left
_TO_IPPE = (2, 3, 0, 1)


@dataclass(frozen=True)
class DetectParams:
    max_hamming: int = 0
    min_margin: float = 20.0
    min_edge_px: float = 20.0
    quad_decimate: float = 1.0  # 320x240 frames: decimating loses the small tags
    quad_sigma: float = 0.0
    refine_edges: bool = True
    decode_sharpening: float = 0.25
    nthreads: int = 1

    def __post_init__(self) -> None:
        if self.max_hamming < 0 or self.min_margin < 0 or self.min_edge_px < 0:
            raise ValueError("gates must be >= 0")
        if self.quad_decimate < 1.0 or self.nthreads < 1:
            raise ValueError("quad_decimate must be >= 1 and nthreads >= 1")


@dataclass(frozen=True, eq=False)
class TagDetection:
    """One decoded tag; ``corners`` is 4x2 pixels in IPPE_SQUARE order."""

    tag_id: int
    corners: FloatArray
    hamming: int
    margin: float
    edge_px: float

    @property
    def centre(self) -> FloatArray:
        return np.asarray(self.corners.mean(axis=0), dtype=np.float64)


@dataclass(frozen=True)
class Rejection:
    tag_id: int
    reason: str
    value: float = 0.0  # the measured quantity that failed its gate


@dataclass(frozen=True)
class DetectResult:
    accepted: tuple[TagDetection, ...]
    rejected: tuple[Rejection, ...]


class _Detector(pupil_apriltags.Detector):
    """The library's Detector without its ``__del__``: :func:`safe_detector` frees it."""

    def __del__(self) -> None:
        pass


def _destroy(libc: Any, detector_ptr: Any, families: dict[str, Any]) -> None:
    """Free the detector, then its tag families (which its destruction still reads)."""
    libc.apriltag_detector_destroy.restype = None
    libc.apriltag_detector_destroy(detector_ptr)
    for name, family in families.items():
        destroy = getattr(libc, f"{name}_destroy")
        destroy.restype = None
        destroy(family)


def mean_edge(corners: FloatArray) -> float:
    """Mean length of the quad's four edges, px."""
    edges = np.roll(corners, -1, axis=0) - corners
    return float(np.mean(np.hypot(edges[:, 0], edges[:, 1])))


def safe_detector(**options: Any) -> pupil_apriltags.Detector:
    """A tag36h11 pupil-apriltags ``Detector`` without the library's two known defects.

    pupil-apriltags 1.0.4 stores ``int(decode_sharpening)`` (0 for 0.25), and its
    ``__del__`` frees the tag families before the detector, whose destruction then
    reads them (an intermittent segfault). Here one finalizer frees both, in that
    order, holding the C pointers rather than the object: a weak reference's callback
    and ``__del__`` run in either order (the cyclic collector calls the callbacks
    first), so splitting the work between them crashed under the collector. Use this,
    never ``Detector`` directly.
    """
    sharpening = float(options.get("decode_sharpening", 0.25))
    detector = _Detector(families="tag36h11", **options)
    detector.tag_detector_ptr.contents.decode_sharpening = sharpening
    weakref.finalize(detector, _destroy, detector.libc, detector.tag_detector_ptr,
                     dict(detector.tag_families))
    return detector


class TagDetector:
    """A pupil-apriltags ``Detector`` for tag36h11 plus the gates."""

    def __init__(self, params: DetectParams | None = None) -> None:
        self.params = params or DetectParams()
        p = self.params
        self._detector = safe_detector(
            nthreads=p.nthreads,
            quad_decimate=p.quad_decimate,
            quad_sigma=p.quad_sigma,
            refine_edges=int(p.refine_edges),
            decode_sharpening=p.decode_sharpening,
        )

    def detect(self, gray: npt.NDArray[np.uint8], multi_ids: Collection[int] = ()) -> DetectResult:
        """Detect and gate the tags in a grey ``uint8`` image."""
        if gray.ndim != 2 or gray.dtype != np.uint8:
            raise ValueError("detect() needs a 2-D uint8 grey image")
        p = self.params
        raw = self._detector.detect(np.ascontiguousarray(gray))
        accepted: list[TagDetection] = []
        rejected: list[Rejection] = []
        for d in raw:
            tag_id = int(d.tag_id)
            corners = np.asarray(d.corners, dtype=np.float64)[list(_TO_IPPE)]
            edge = mean_edge(corners)
            if int(d.hamming) > p.max_hamming:
                rejected.append(Rejection(tag_id, HAMMING, float(d.hamming)))
            elif float(d.decision_margin) < p.min_margin:
                rejected.append(Rejection(tag_id, LOW_MARGIN, float(d.decision_margin)))
            elif edge < p.min_edge_px:
                rejected.append(Rejection(tag_id, SMALL_TAG, edge))
            else:
                accepted.append(
                    TagDetection(tag_id, corners, int(d.hamming), float(d.decision_margin), edge)
                )
        counts: dict[int, int] = {}
        for det in accepted:
            counts[det.tag_id] = counts.get(det.tag_id, 0) + 1
        kept: list[TagDetection] = []
        for det in accepted:
            if counts[det.tag_id] > 1 and det.tag_id not in multi_ids:
                rejected.append(Rejection(det.tag_id, DUPLICATE_TAG, float(counts[det.tag_id])))
            else:
                kept.append(det)
        return DetectResult(tuple(kept), tuple(rejected))
