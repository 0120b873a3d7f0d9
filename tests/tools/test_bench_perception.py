"""The perception benchmark runs and reports ms per frame against its decode floor."""

from __future__ import annotations

from tools.bench.perception import run


def test_quick_run_reports_every_stage():
    cases = {c["case"]: c for c in run(quick=True)}
    assert set(cases) == {"decode", "detect", "pose", "frame"}
    for case in cases.values():
        assert case["ms_per_frame"] > 0 and case["ratio"] > 0
    assert cases["decode"]["ratio"] == 1.0
    frame = cases["frame"]
    assert frame["ms_per_frame"] >= cases["detect"]["ms_per_frame"]
    assert frame["fps_one_core"] > 12  # the camera's own rate, with room to spare
    assert frame["pose_fixes"] >= 1
