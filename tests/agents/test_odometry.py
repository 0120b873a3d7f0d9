"""The odometry hands the localizer each telemetry as a sample, even one that repeats."""

from __future__ import annotations

import numpy as np

from agents.backfill import Backfill
from agents.config import AgentConfig
from agents.gyro_bias import GyroBias, GyroBiasParams
from agents.localization import PoseEKF
from agents.odometry import Odometry
from agents.room import Room

CONFIG = AgentConfig(name="walnut", room=Room(5.0, 5.0), landmarks={0: (0.0, 2.5)},
                     target_tag=100)


def test_a_repeated_reading_is_a_new_sample() -> None:
    """Two telemetries 0.1 s apart reading the same rate (a quantized gyro): the second
    is a sample taken at its own time, so the first is ramped to it, not held on."""
    localizer = PoseEKF(CONFIG.landmarks, CONFIG.drive, CONFIG.localizer, t0=0.0)
    localizer.set_pose(2.5, 2.5, 0.0, np.diag([1e-4, 1e-4, 1e-4]))
    odometry = Odometry(CONFIG, localizer, GyroBias(GyroBiasParams(enabled=False)),
                        Backfill(CONFIG.search.backfill, CONFIG.drive, CONFIG.localizer))
    for k, rate in enumerate([0.0, 1.0, 0.5, 0.5, 0.5], start=1):
        odometry.car_status(k * 0.1, 0.5, 0.5, rate)
    odometry.advance(0.55)
    held = localizer.held  # the newest telemetry's, taken at 0.5 s (by value: at 0.3 s)
    assert held is not None and held.gyro_z == 0.5
    assert held.sampled_at == 0.5
