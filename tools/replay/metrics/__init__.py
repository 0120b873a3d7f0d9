"""What a run's logs say about convergence, measured against the world's ground truth.

Everything here takes a loaded :class:`~tools.replay.load.RunDir` (or arrays)
and returns numbers; figures and the report only present them.

Sources, per agent (protocol/RUNLOG.md):

- the track: every TRACK datagram the agent sent (``tx``, 5 Hz and at once
  after a fused detection: mean, covariance and the time they refer to) plus
  the track of each ``belief`` record (1 Hz);
- the grid: the ``belief`` records (1 Hz): mu and var arrays, mean var, pose;
- the wire: ``tx`` (every datagram sent, with its kind) and ``rx`` (``ok``
  false with a ``reason`` for every rejected one);
- the world's ``truth`` (20 Hz), interpolated to the agent's times: both logs
  are written on CLOCK_MONOTONIC, so their times compare directly.

The agent's belief at time t is its newest track known at t (by log time),
predicted to t with the agent's own track model (its settings: its log's start
event, else the scenario's or the arena's); that gives every agent a value on one
common 10 Hz time base, on which errors, NEES, agreement and "fraction of time" are
computed. An agent holds a track from the first one it logs until it drops it
(``track_dropped``); where it holds none its series is NaN, so every error and NEES is
"while a track is held", and the held fraction is measured on its own.

One module per metric family — :mod:`.truth`, :mod:`.track`, :mod:`.detections`,
:mod:`.grid`, :mod:`.pose` (each agent's own pose), :mod:`.wire`, :mod:`.latency`,
:mod:`.footprint` (what the cameras could see, from the truth and the arena),
:mod:`.reputation` (when an agent distrusted a peer), :mod:`.matched` (the agent's own
filter fed a matched sensor: what its model alone allows)
— on :mod:`.common`'s time base;
:mod:`.analysis` is the one place that composes them into a run's numbers.
This face hands their public names on.
"""

from tools.replay.metrics.analysis import (
    AgentAnalysis,
    Analysis,
    analyse,
    analyse_agent,
    own_config,
    run_metrics,
)
from tools.replay.metrics.common import SETTLE, STEP, FloatArray, jsonable, summary
from tools.replay.metrics.detections import (
    DETECTION_TRACK_WINDOW,
    SPEED_TOLERANCE,
    DetectionSpeed,
    detection_speeds,
    detection_summary,
)
from tools.replay.metrics.footprint import (
    camera_footprints,
    covered,
    redundancy,
    target_visible,
    windowed,
)
from tools.replay.metrics.grid import (
    COVERAGE_VAR,
    GridRecord,
    cell_keys,
    coverage,
    coverage_overlap,
    grid_peak_errors,
    grid_records,
    room_cells_of,
    room_mean_var,
    window_inside,
    window_mean_var,
)
from tools.replay.metrics.latency import STAGES, Latency, latency, latency_summary
from tools.replay.metrics.pose import (
    PoseSeries,
    localizer_errors,
    localizer_summary,
    logged_poses,
)
from tools.replay.metrics.reputation import distrust_times, first_distrust, liar_trace
from tools.replay.metrics.track import (
    CONFIDENT_SPREAD,
    NEES_CONFIDENCE,
    TRACK_MAX_AGE,
    TrackErrors,
    TrackSamples,
    TrackSeries,
    agreement,
    error_summary,
    fraction_inside,
    nees_bounds,
    outside_room,
    recorded_track,
    resample,
    track_errors,
)
from tools.replay.metrics.truth import Truth, truth_of
from tools.replay.metrics.wire import Wire, wire_of, wire_summary

__all__ = [
    "CONFIDENT_SPREAD",
    "COVERAGE_VAR",
    "DETECTION_TRACK_WINDOW",
    "NEES_CONFIDENCE",
    "SETTLE",
    "SPEED_TOLERANCE",
    "STAGES",
    "STEP",
    "TRACK_MAX_AGE",
    "AgentAnalysis",
    "Analysis",
    "DetectionSpeed",
    "FloatArray",
    "GridRecord",
    "Latency",
    "PoseSeries",
    "TrackErrors",
    "TrackSamples",
    "TrackSeries",
    "Truth",
    "Wire",
    "agreement",
    "analyse",
    "analyse_agent",
    "camera_footprints",
    "cell_keys",
    "coverage",
    "coverage_overlap",
    "covered",
    "detection_speeds",
    "detection_summary",
    "distrust_times",
    "error_summary",
    "first_distrust",
    "fraction_inside",
    "grid_peak_errors",
    "grid_records",
    "jsonable",
    "latency",
    "latency_summary",
    "liar_trace",
    "localizer_errors",
    "localizer_summary",
    "logged_poses",
    "nees_bounds",
    "outside_room",
    "own_config",
    "recorded_track",
    "redundancy",
    "resample",
    "room_cells_of",
    "room_mean_var",
    "run_metrics",
    "summary",
    "target_visible",
    "track_errors",
    "truth_of",
    "window_inside",
    "window_mean_var",
    "windowed",
    "wire_of",
    "wire_summary",
]
