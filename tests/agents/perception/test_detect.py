"""tag36h11 detection and its gates, on drawn tags."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from agents.perception.detect import (
    DUPLICATE_TAG,
    HAMMING,
    LOW_MARGIN,
    SMALL_TAG,
    DetectParams,
    TagDetector,
    mean_edge,
)
from worlds.camera import tag_image

CELL = 6  # px per tag cell: the black square is 8 cells = 48 px


def _canvas(*placed: tuple[int, int, int, int]) -> np.ndarray:
    """A white 320x240 image with tags (id, x, y, cell px) drawn upright."""
    canvas = np.full((240, 320), 255, np.uint8)
    for tag_id, x, y, cell in placed:
        im = tag_image(tag_id, cell)
        canvas[y : y + im.shape[0], x : x + im.shape[1]] = im
    return canvas


@pytest.fixture(scope="module")
def detector() -> TagDetector:
    return TagDetector()


def test_detects_and_orders_corners_for_ippe(detector: TagDetector):
    result = detector.detect(_canvas((7, 40, 50, CELL)))
    assert result.rejected == ()
    (det,) = result.accepted
    assert det.tag_id == 7 and det.hamming == 0 and det.margin >= 20
    bl, br, tr, tl = det.corners
    # bottom-left, bottom-right, top-right, top-left (image y grows downwards)
    assert bl[0] < br[0] and tl[0] < tr[0] and tl[1] < bl[1] and tr[1] < br[1]
    assert det.edge_px == pytest.approx(8 * CELL, abs=1.0)
    np.testing.assert_allclose(det.centre, [40 + 5 * CELL, 50 + 5 * CELL], atol=1.0)


def test_gates_reject_with_named_reasons(detector: TagDetector):
    small = detector.detect(_canvas((7, 40, 50, 2)))  # a 16 px tag
    assert [(r.tag_id, r.reason) for r in small.rejected] == [(7, SMALL_TAG)]
    assert small.rejected[0].value < 20
    canvas = _canvas((7, 40, 50, CELL))
    faint = (128 + (canvas.astype(np.float64) - 128) * 18 / 255).astype(np.uint8)
    low = detector.detect(faint)
    assert [r.reason for r in low.rejected] == [LOW_MARGIN] and low.rejected[0].value < 20
    flipped = canvas.copy()
    y0, x0 = 50 + CELL * 3, 40 + CELL * 3  # one data cell of the 6x6 payload, inverted
    flipped[y0 : y0 + CELL, x0 : x0 + CELL] = 255 - flipped[y0 : y0 + CELL, x0 : x0 + CELL]
    bit = detector.detect(flipped)
    assert [(r.tag_id, r.reason, r.value) for r in bit.rejected] == [(7, HAMMING, 1.0)]
    assert bit.accepted == ()


def test_the_same_id_twice_is_refused_unless_it_may_repeat(detector: TagDetector):
    canvas = _canvas((7, 20, 50, CELL), (7, 200, 120, CELL))
    twice = detector.detect(canvas)
    assert twice.accepted == () and [r.reason for r in twice.rejected] == [DUPLICATE_TAG] * 2
    target = detector.detect(canvas, multi_ids=(7,))
    assert len(target.accepted) == 2 and target.rejected == ()


def test_params_are_validated_and_edge_is_the_mean():
    with pytest.raises(ValueError):
        DetectParams(quad_decimate=0.5)
    square = np.array([[0.0, 10.0], [10.0, 10.0], [10.0, 0.0], [0.0, 0.0]])
    assert mean_edge(square) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        TagDetector().detect(np.zeros((10, 10, 3), np.uint8))


_COLLECTED_IN_A_CYCLE = """
import gc
import os
import subprocess
import sys

import numpy as np
from agents.perception.detect import TagDetector
for _ in range(40):
    d = TagDetector()
    d.detect(np.zeros((48, 64), np.uint8))
    holder = {"d": d}
    holder["self"] = holder  # a cycle: only the cyclic collector frees the detector
    del d, holder
    gc.collect()
"""


def test_a_detector_freed_by_the_cyclic_collector_does_not_crash() -> None:
    # The collector runs weak-reference callbacks before __del__: a detector whose families
    # were freed by one and read by the other crashed a whole test run (freed memory is
    # filled by MALLOC_PERTURB_ so a read of it cannot pass unnoticed).
    env = {**os.environ, "MALLOC_PERTURB_": "165"}
    done = subprocess.run([sys.executable, "-c", _COLLECTED_IN_A_CYCLE], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
