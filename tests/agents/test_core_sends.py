"""What the core broadcasts and when: a TRACK goes out at once after a new detection, and
again only when nothing was sent for a period (protocol/SWARM.md §rates)."""

from __future__ import annotations

import math

import numpy as np

from agents.config import AgentConfig
from agents.core import AgentCore
from agents.observations import ObservationBatch, PoseFix, TagSighting
from agents.room import Room
from protocol.swarm import Track

TARGET = 100
POSE = (1.0, 2.5, 0.0)  # the robot looks along +x at the target
TARGET_XY = (2.5, 2.5)


def _frame(t: float) -> ObservationBatch:
    rng = math.hypot(TARGET_XY[0] - POSE[0], TARGET_XY[1] - POSE[1])
    bearing = math.atan2(TARGET_XY[1] - POSE[1], TARGET_XY[0] - POSE[0]) - POSE[2]
    fix = PoseFix(*POSE, np.diag([1e-4, 1e-4, 1e-4]))
    return ObservationBatch(t, True, target=TagSighting(TARGET, rng, bearing, 0.02, 0.01),
                            pose_fix=fix)


def _track_times(core: AgentCore, now: float) -> list[float]:
    return [now for s in core.take_outputs().sends if isinstance(s.body, Track)]


def test_a_track_goes_out_on_each_detection_and_is_resent_only_after_a_quiet_period() -> None:
    core = AgentCore(AgentConfig(name="walnut", room=Room(5.0, 5.0), landmarks={0: (0.0, 2.5)},
                                 target_tag=TARGET), t0=0.0)
    period = 1.0 / core.config.rates.track
    sent: list[float] = []
    t = 0.0
    for k in range(1, 41):  # 4 s: frames at 8 Hz for 2 s, then none; beats at 10 Hz
        t = round(k * 0.025, 6)
        if t <= 2.0 and k % 5 == 0:
            core.on_observations(_frame(t), t)
        if k % 4 == 0:
            core.tick(t)
        sent += _track_times(core, t)
    for k in range(41, 161):
        t = round(k * 0.025, 6)
        if k % 4 == 0:
            core.tick(t)
        sent += _track_times(core, t)
    assert sent, "the target was detected and tracked"
    while_seen = [s for s in sent if s <= 2.0]
    quiet = [s for s in sent if s > 2.1]
    # with a detection every 125 ms nothing is resent in between: one TRACK per frame
    assert len(while_seen) <= round(2.0 * 8) + 1
    gaps = np.diff(quiet)
    assert len(quiet) >= 8 and np.all(gaps >= period - 1e-9) and np.all(gaps <= period + 0.1)
