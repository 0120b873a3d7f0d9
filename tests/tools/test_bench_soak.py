"""`stigmesh bench soak`, briefly: its scenario kills walnut and hazel in turn and never pecan,
its memory walk counts array buffers and stops at classes, and a short soak keeps every
agent's SNAPSHOTs to one peer at least 5 s apart through two restarts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tools.bench.soak import KEPT, SNAPSHOT_GAP, reachable, scenario_text, soak
from tools.experiments.scenario_file import load_scenario
from tools.experiments.schedule import Kill, Restart, timeline

pytestmark = pytest.mark.timeout(240)


def test_the_soak_kills_walnut_and_hazel_in_turn_and_never_pecan(tmp_path: Path) -> None:
    source = tmp_path / "soak.toml"
    source.write_text(scenario_text(140.0), encoding="utf-8")
    ops = timeline(load_scenario(source))
    kills = [(op.t, op.op.agent) for op in ops if isinstance(op.op, Kill)]
    restarts = [(op.t, op.op.agent) for op in ops if isinstance(op.op, Restart)]
    assert kills == [(20.0, "walnut"), (60.0, "hazel"), (100.0, "walnut")]
    assert restarts == [(28.0, "walnut"), (68.0, "hazel"), (108.0, "walnut")]
    assert all(agent != KEPT for _, agent in kills)


class _Holder:
    big = np.zeros(100_000)  # a class attribute: not the instance's state

    def __init__(self) -> None:
        self.samples = np.zeros(1000)
        self.view = self.samples[:10]  # shares the buffer: counted once
        self.table = {"a": [1.0, 2.0, 3.0]}


def test_the_memory_walk_counts_buffers_once_and_stops_at_classes() -> None:
    count, size = reachable(_Holder())
    assert 8000 <= size < 8000 + 4000  # the 1000 floats, once, and small objects
    assert size < _Holder.big.nbytes
    assert count >= 6  # the instance, its dict, two arrays, the table, its list


def test_a_short_soak_keeps_snapshots_apart_through_restarts(tmp_path: Path) -> None:
    result = soak(110.0, tmp_path / "run")  # walnut down at 20-28 s, hazel at 60-68 s
    (t, objects, size), = result["samples"]
    assert t == 100.0 and objects > 1000 and size > 100_000
    for name, (_, gap) in result["snapshots"].items():
        assert gap >= SNAPSHOT_GAP, (name, gap)
    # pecan sent one to each peer that came back as a new process, at least
    assert result["snapshots"][KEPT][0] >= 2
    assert all(0.0 < kbps < 10.0 for kbps in result["kbps"].values())
