"""Smoke test of the belief benchmark (tools/bench/belief.py): shape of the results only."""

from __future__ import annotations

import math

from tools.bench.belief import run

CASES = {
    "grid_tick_64",
    "grid_tick_256",
    "grid_tick_64_sliding",
    "grid_fuse_patch_500",
    "track_predict_update",
    "ci_matrix_4x4",
    "patch_datagram_encode_mac_decode",
}


def test_quick_run_reports_every_case_with_a_floor_and_a_ratio() -> None:
    results = run(quick=True)
    size = [r for r in results if r["case"] == "bytes_per_cell"]
    timed = [r for r in results if r["case"] != "bytes_per_cell"]
    assert {r["case"] for r in timed} == CASES
    (bpc,) = size
    assert bpc["value"] == bpc["datagram_bytes"] / bpc["cells"] and bpc["datagram_bytes"] <= 1200
    assert bpc["meets_target"] == (bpc["value"] <= 8.5)
    for r in timed:
        assert r["median_s"] > 0 and r["floor_s"] > 0 and r["min_s"] <= r["median_s"]
        assert math.isclose(r["ratio"], r["median_s"] / r["floor_s"])
        assert r["reps"] >= 1 and r["inner"] >= 1
        if r["target_s"] is None:
            assert r["meets_target"] is None
        else:
            assert r["meets_target"] == (r["median_s"] <= r["target_s"])
