"""The search comparison: its hidden places, one trial of each variant, and the oracle's
looks (handed over by lockstep, not sent) replayed bit for bit from the logs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from agents.config import AgentConfig
from agents.core import AgentCore
from agents.node import replay_inputs
from protocol.runlog import log_path, read_run_log
from protocol.swarm import swarm_id_from_name
from tools.agent_config import agent_config
from tools.experiments.lockstep import Lockstep
from tools.experiments.search_compare import (
    ARENA,
    arena_with_target,
    hidden_places,
    run_trial,
    seen_cells,
    summarise,
)
from worlds.arena import load_arena


def test_hidden_places_are_clear_and_out_of_every_starting_view() -> None:
    arena = load_arena(ARENA)
    places = hidden_places(arena, 12, 4)
    assert len(set(places)) == 12 and places == hidden_places(arena, 12, 4)
    for x, y in places:
        for car in arena.cars:
            for k in range(16):
                pose = (car.x, car.y, k * np.pi / 8)
                assert not seen_cells(arena, pose, np.array([x]), np.array([y])).size
        for ob in arena.obstacles:
            assert abs(x - ob.x) > ob.size_x / 2 + 0.35 or abs(y - ob.y) > ob.size_y / 2 + 0.35


def test_one_trial_of_each_variant_measures_the_search() -> None:
    place = (4.9, 4.47)
    results = [run_trial(0, place, v, 3, 40.0) for v in ("share", "none", "oracle")]
    for r in results:
        assert r["first_detection_s"] is not None and 0.0 < r["first_detection_s"] < 40.0
        assert 1.0 <= r["redundancy"] <= 2.0
        assert r["looks"]["walnut"]["looks_made"] > 0
    share, none, oracle = results
    assert share["bytes_per_s"]["walnut"].get("look", 0) > 0
    assert "look" not in none["bytes_per_s"]["walnut"]
    assert "look" not in oracle["bytes_per_s"]["walnut"]
    assert none["looks"]["walnut"]["looks_applied"] == 0
    assert oracle["looks"]["walnut"]["looks_applied"] > 0
    summary = summarise(results, 40.0)
    assert summary["places"] == 1 and set(summary["variants"]) == {"share", "none", "oracle"}


def test_oracle_looks_replay_bit_for_bit(tmp_path: Path) -> None:
    arena = arena_with_target(load_arena(ARENA), (6.4, 2.5))

    def config(name: str) -> AgentConfig:
        c = agent_config(arena, name)
        return replace(c, search=replace(c.search, share=False))

    ls = Lockstep(arena, 5, tmp_path, config=config, oracle_looks=True)
    t0 = ls.t0
    ls.run(8.0)
    ls.close()
    for name in ("walnut", "hazel"):
        lines = list(read_run_log(log_path(tmp_path, name)))
        assert any(line.get("event") == "oracle_look" for line in lines)
        recorded = {line["t"]: line["digest"] for line in lines if line.get("event") == "belief"}
        core = AgentCore(config(name), t0)
        replayed = list(replay_inputs(core, lines, swarm_id_from_name("lockstep")))
        assert len(replayed) >= 7
        assert all(recorded[t] == digest for t, digest in replayed)
