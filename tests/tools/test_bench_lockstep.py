"""The lockstep benchmark's parts (tools/bench/lockstep.py) on a short run: shapes only."""

from __future__ import annotations

import math

from tools.bench.lockstep import (
    _lockstep_rtf,
    _longest_service_cold,
    _room,
    _where_time_goes,
    _world_rtf,
)


def test_a_short_lockstep_run_reports_its_speed_and_where_the_time_went() -> None:
    rtf, agents = _lockstep_rtf("two_cars", 0.5)
    world_rtf, physics_rtf = _world_rtf("two_cars", 0.5)
    assert agents == 2 and rtf > 0 and world_rtf > 0 and physics_rtf > 0
    shares = _where_time_goes("two_cars", 0.3)
    assert math.isclose(sum(shares.values()), 1.0, abs_tol=0.01)
    assert shares["agents"] > 0 and shares["worlds"] > 0


def test_rooms_of_profiled_files() -> None:
    assert _room("/repo/agents/core.py") == "agents"
    assert _room("/repo/.venv/lib/python3.11/site-packages/numpy/x.py") == "libraries"
    assert _room("~") == "C (pybullet, numpy, builtins)"


def test_the_longest_service_call_is_timed_from_a_cold_start() -> None:
    took, who, at = _longest_service_cold("two_cars", 1.5)
    assert who in ("walnut", "hazel") and 0.0 < took < 10.0 and 0.0 <= at <= 1.5
