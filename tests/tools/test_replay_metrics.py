"""The replay's metrics on made-up data: the truth interpolated, a track resampled and judged
by NEES at its own time, the localizer by its own covariance, coverage overlap, stage
latencies; each detection counted from when it became known and judged with the covariance
it was logged with."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from agents.belief.models import cv_predict
from protocol.runlog import ReadStats
from tools.replay.load import ProcessLog
from tools.replay.metrics import (
    GridRecord,
    PoseSeries,
    TrackSamples,
    TrackSeries,
    Truth,
    coverage_overlap,
    detection_summary,
    fraction_inside,
    latency,
    localizer_errors,
    localizer_summary,
    nees_bounds,
    resample,
    track_errors,
)
from tools.replay.metrics.detections import detection_nis, detection_nis_values, seen_ages


def _truth_moving_east() -> Truth:
    t = np.arange(0.0, 10.0001, 0.05)
    target = np.stack([t * 1.0, np.zeros_like(t), np.ones_like(t), np.zeros_like(t)], axis=1)
    return Truth(t, target, {})


def test_truth_interpolates_and_refuses_to_extrapolate() -> None:
    truth = _truth_moving_east()
    at = truth.target_at([1.234, 11.0, -1.0])
    assert at[0] == pytest.approx([1.234, 0.0, 1.0, 0.0])
    assert np.isnan(at[1]).all() and np.isnan(at[2]).all()


def test_resample_predicts_the_newest_sample_and_stops_when_stale() -> None:
    samples = TrackSamples(
        t_log=np.array([1.0]), t=np.array([1.0]),
        x=np.array([[1.0, 0.0, 1.0, 0.0]]), P=np.eye(4)[None] * 0.01,
    )  # fmt: skip
    series = resample(samples, np.array([0.5, 1.5, 3.9, 4.5, 5.0]), max_age=3.0, until=4.8)
    assert np.isnan(series.x[0]).all()  # before the first sample
    assert series.x[1] == pytest.approx([1.5, 0.0, 1.0, 0.0])
    assert series.P[1, 0, 0] > 0.01  # the prediction added process noise
    assert series.valid.tolist() == [False, True, True, False, False]  # stale, then stopped
    errors = track_errors(series, _truth_moving_east())
    assert errors.pos_err[1] == pytest.approx(0.0, abs=1e-12)


def test_nees_and_its_bounds() -> None:
    lo, hi = nees_bounds(2)
    assert (lo, hi) == pytest.approx((0.0506, 7.378), abs=1e-3)
    t = np.array([1.0, 2.0])
    truth = _truth_moving_east()
    x = truth.target_at(t) + np.array([[0.3, 0.4, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    series = TrackSeries(t, x, np.stack([np.eye(4), np.eye(4)]))
    e = track_errors(series, truth)
    assert e.nees4 == pytest.approx([0.25, 9.0])
    assert e.nees2 == pytest.approx([0.25, 9.0])
    assert fraction_inside(e.nees2, (lo, hi)) == 0.5


def test_nees_judges_the_published_state_at_its_own_time() -> None:
    """Between two published states the series predicts the newest one (constant velocity,
    the agent's accel_psd, as a peer would); NEES judges the state at the time it refers to
    against the truth then, and peer_nees the prediction against the truth at the time
    base's time."""
    truth = _truth_moving_east()
    x = truth.target_at([1.0])[0] + np.array([0.0, 0.0, 0.1, 0.0])  # 0.1 m/s too fast
    P = np.eye(4) * 0.01
    samples = TrackSamples(t_log=np.array([1.0]), t=np.array([1.0]), x=x[None], P=P[None])
    series = resample(samples, np.array([1.0, 1.5]), accel_psd=2.5)
    e = track_errors(series, truth)
    assert e.nees4 == pytest.approx([1.0, 1.0])  # 0.1² / 0.01, at t = 1 both times
    assert e.nees2 == pytest.approx([0.0, 0.0], abs=1e-12)
    x_p, P_p = cv_predict(x, P, 0.5, 2.5)
    d = x_p - truth.target_at([1.5])[0]
    assert d[0] == pytest.approx(0.05)
    assert e.peer_nees4[1] == pytest.approx(float(d @ np.linalg.solve(P_p, d)))
    assert e.peer_nees4[1] < 0.5 * e.nees4[1]  # the extrapolation's noise hides the error
    assert e.peer_nees4[0] == pytest.approx(1.0)


def test_the_localizer_is_judged_by_its_own_covariance() -> None:
    """Errors drawn from each sample's covariance give NEES means near 1 (heading) and 3
    (pose), 95 % inside the bounds; a heading error across ±π is the short way round; the
    same errors with a covariance four times too small fail."""
    rng = np.random.default_rng(4)
    n = 4000
    t = np.linspace(0.0, 40.0, n)
    true = np.column_stack([np.full(n, 1.0), np.full(n, 2.0), np.full(n, math.pi - 0.01)])
    truth = Truth(t, np.zeros((n, 4)), {"walnut": true})
    P = np.array([[0.02**2, 0.0001 * 0.5, 0.0], [0.0001 * 0.5, 0.01**2, 0.0],
                  [0.0, 0.0, 0.05**2]])
    pose = true + rng.multivariate_normal(np.zeros(3), P, n)
    pose[:, 2] = np.remainder(pose[:, 2] + math.pi, 2 * math.pi) - math.pi  # wrapped, as logged
    pose[:10] = np.nan  # no pose yet
    series = PoseSeries(t, pose, np.broadcast_to(P, (n, 3, 3)).copy())
    e = localizer_errors(series, truth, "walnut")
    assert np.nanmax(np.abs(e["heading"])) < 0.3  # not 2π − 0.3
    m = localizer_summary(series, truth, "walnut", t_start=0.0)
    assert m["held"] == pytest.approx(1 - 10 / n)
    assert m["nees1"]["mean"] == pytest.approx(1.0, abs=0.1)
    assert m["nees3"]["mean"] == pytest.approx(3.0, abs=0.2)
    assert m["nees3"]["fraction_inside"] == pytest.approx(0.95, abs=0.02)
    assert m["heading_error_deg"]["median"] == pytest.approx(
        math.degrees(0.05 * 0.6745), rel=0.1)
    tight = PoseSeries(t, pose, series.P / 4.0)
    assert localizer_summary(tight, truth, "walnut", 0.0)["nees3"]["fraction_inside"] < 0.8
    assert localizer_summary(series, truth, "hazel", 0.0)["nees1"]["mean"] is None
    damaged = series.P.copy()
    damaged[20] = 0.0  # a singular covariance (a damaged log): no NEES there, no exception
    e = localizer_errors(PoseSeries(t, pose, damaged), truth, "walnut")
    assert np.isnan(e["nees3"][20]) and np.isfinite(e["position"][20])


def test_coverage_overlap_in_the_room() -> None:
    var_a = np.ones((4, 4))
    var_a[0, :2] = 0.1  # cells (0,0), (1,0)
    var_b = np.ones((4, 4))
    var_b[0, 1:3] = 0.1  # cells (1,0), (2,0) of a window shifted by -1 in x: (0,0), (1,0)
    a = GridRecord(10.0, (0, 0), np.zeros((4, 4)), var_a, 0.0, None)
    b = GridRecord(10.2, (-1, 0), np.zeros((4, 4)), var_b, 0.0, None)
    ov = coverage_overlap([a], [b], 0.5)
    assert ov["both"].tolist() == [2] and ov["jaccard"].tolist() == [1.0]
    ov = coverage_overlap([a], [b], 0.5, room_cells=(1, 4))
    assert ov["both"].tolist() == [1] and ov["either"].tolist() == [1]


def test_latency_from_stage_timestamps_and_their_absence() -> None:
    lines = [
        {"t": 1.0, "event": "frame", "t_capture": 1.0, "t_receipt": 1.02, "t_decision": 1.05},
        {"t": 2.0, "event": "frame", "stages": {"capture": 2.0, "receipt": 2.04, "decision": 2.1}},
        {"t": 3.0, "event": "obs", "t_capture": 2.9, "synchronized": True, "target": None},
    ]
    lat = latency([ProcessLog("a", Path("a.jsonl"), lines, ReadStats())])
    assert lat.records == 2
    assert lat.stages["capture→receipt"] == pytest.approx([0.02, 0.04])
    assert lat.stages["receipt→decision"] == pytest.approx([0.03, 0.06])
    assert lat.derived["capture→receipt (synchronized obs)"] == pytest.approx([0.1])
    none = latency([ProcessLog("a", Path("a.jsonl"), lines[2:], ReadStats())])
    assert none.records == 0 and none.stages == {}


def test_a_detection_placed_late_counts_from_when_it_became_known() -> None:
    lines = [  # seen at 0.4 s without a pose, placed when the pose came at 1.0 s; then live
        {"t": 1.0, "event": "detection", "t_det": 0.4, "placed_at": 1.0, "accepted": True,
         "reason": "initialised"},
        {"t": 1.6, "event": "detection", "t_det": 1.5, "accepted": True, "reason": "accepted"},
    ]
    log = ProcessLog("a", Path("a.jsonl"), lines, ReadStats())
    assert detection_summary(log, 0.0, [])["time_to_first_detection_s"] == 1.0
    live = ProcessLog("a", Path("a.jsonl"), lines[1:], ReadStats())
    assert detection_summary(live, 0.0, [])["time_to_first_detection_s"] == 1.5


def test_the_age_of_the_newest_own_sighting_is_what_the_log_knew_then() -> None:
    """A sighting placed late counts from when it was logged, with its capture time; a gated
    one does not count; an older capture logged later does not make the newest one older."""
    lines = [
        {"t": 1.0, "event": "detection", "t_det": 0.4, "placed_at": 1.0, "accepted": True},
        {"t": 1.6, "event": "detection", "t_det": 1.5, "accepted": True},
        {"t": 1.7, "event": "detection", "t_det": 1.6, "accepted": False},
        {"t": 1.8, "event": "detection", "t_det": 1.2, "placed_at": 1.8, "accepted": True},
    ]
    log = ProcessLog("a", Path("a.jsonl"), lines, ReadStats())
    ages = seen_ages(log, np.array([0.9, 1.0, 1.5, 1.6, 2.0]))
    assert ages[0] == math.inf
    assert ages[1:] == pytest.approx([0.6, 1.1, 0.1, 0.5])


def test_each_detection_is_judged_against_the_truth_with_the_covariance_it_was_logged_with(
) -> None:
    """NIS = dᵀ C⁻¹ d at the capture time; live and placed apart; a line this reader does
    not understand is skipped, not raised."""
    truth = Truth(np.array([0.0, 10.0]), np.array([[1.0, 1.0, 0.0, 0.0]] * 2), {})
    cov = [[0.01, 0.0], [0.0, 0.01]]
    lines = [
        {"t": 1.0, "event": "detection", "t_det": 0.9, "x": 1.1, "y": 1.0, "cov": cov},
        {"t": 1.1, "event": "detection", "t_det": 1.0, "x": 1.0, "y": 1.0, "cov": cov},
        {"t": 2.0, "event": "detection", "t_det": 0.5, "x": 1.0, "y": 1.3, "cov": cov,
         "placed_at": 2.0},
        {"t": 2.1, "event": "detection", "t_det": 2.0, "x": "east", "y": 1.0, "cov": cov},
        {"t": 2.2, "event": "detection", "t_det": 2.1, "x": 1.0, "y": 1.0, "cov": [[1.0]]},
    ]
    nis = detection_nis(detection_nis_values(ProcessLog("a", Path("a.jsonl"), lines,
                                                         ReadStats()), truth))
    assert nis["live"]["n"] == 2 and nis["live"]["mean"] == pytest.approx(0.5)
    assert nis["live"]["inside"] == 0.5  # 0 is below the lower bound, 1 inside
    assert nis["placed"] == {"n": 1, "mean": pytest.approx(9.0), "inside": 0.0}
    assert nis["bounds"] == pytest.approx([0.0506, 7.378], abs=1e-3)
