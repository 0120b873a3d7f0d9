"""`stigmesh bench replay`, quickly: a short lockstep run tiled to a longer one holds its events
again and again, shifted in time; replay's peak memory is measured on it; the belief grids
the metrics keep take one byte a cell (what bounds a long run's replay memory)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from protocol.runlog import process_logs, read_run_log
from tools.bench.replay import peak_mb, tile
from tools.experiments.lockstep import Lockstep
from tools.replay.load import float32_grid, load_run
from tools.replay.metrics import grid_records
from worlds.arena import load_arena, shipped_arena

pytestmark = pytest.mark.timeout(240)


def test_tiled_run_and_its_replay_memory(tmp_path: Path) -> None:
    base = tmp_path / "base"
    ls = Lockstep(load_arena(shipped_arena("two_cars")), seed=1, run_dir=base)
    try:
        ls.run(6.0)
    finally:
        ls.close()
    span = tile(base, tmp_path / "tiled", 0.3)  # 18 s: three tiles
    before = {n: list(read_run_log(p)) for n, p in process_logs(base).items()}
    after = {n: list(read_run_log(p)) for n, p in process_logs(tmp_path / "tiled").items()}
    assert sorted(after) == sorted(before) == ["hazel", "walnut", "world"]
    one = before["walnut"][-1]["t"] - min(e["t"] for e in before["world"]) + 0.1
    assert span == pytest.approx(3 * one, abs=0.2)
    for name, events in before.items():
        tiled = after[name]
        starts = sum(1 for e in events if e["event"] == "start")
        assert len(tiled) == 3 * len(events) - 2 * starts
        assert sum(1 for e in tiled if e["event"] == "start") == starts
        assert np.all(np.diff([e["t"] for e in tiled if e["event"] == "tick"]) > 0)
    # the grids a replay keeps are the logged levels, one byte a cell, read back exactly
    log = load_run(tmp_path / "tiled").agents["walnut"]
    grids = grid_records(log)
    beliefs = [b for b in log.events("belief") if "var_f32" in b]  # one in two (RUNLOG.md)
    assert 0 < len(grids) == len(beliefs) < len(list(log.events("belief")))
    for g, b in zip(grids, beliefs, strict=True):
        assert g.mu_cells.dtype == g.var_cells.dtype == np.uint8
        shape = (int(b["shape"][0]), int(b["shape"][1]))
        logged = float32_grid(b["var_f32"], shape)
        assert logged is not None and np.array_equal(g.var, logged)
    peak, wall = peak_mb([sys.executable, "-m", "tools.cli", "replay", str(tmp_path / "tiled"),
                          "--out", str(tmp_path / "report")])
    floor, _ = peak_mb([sys.executable, "-c", "import numpy"])
    assert peak > floor > 0.0 and wall > 0.0
    assert (tmp_path / "report" / "report.md").exists()
