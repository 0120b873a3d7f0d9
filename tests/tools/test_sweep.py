"""`stigmesh sweep`: the grid's axes, the camera-footprint overlap, the table, a tiny sweep on
a local Dask cluster, and a running cluster given by its scheduler."""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from agents.faults import LinkFaults
from tools.commands import sweep as sweep_cmd
from tools.experiments import measure, sweep
from tools.replay.metrics import Truth
from worlds.arena import Obstacle, load_arena, shipped_arena

ARENA = load_arena(shipped_arena("two_cars"))


def test_axes_parse_and_refuse() -> None:
    loss = sweep.parse_axis("loss=0,0.5,90%")
    assert loss.name == "loss" and loss.values == (0.0, 0.5, 0.9)
    assert sweep.parse_axis("delay=0,50ms,0.2").values == (0.0, 0.05, 0.2)
    for bad in ("speed=1", "loss=", "loss=1.5", "burst=1", "loss=0.1,0.1", "delay=-5ms"):
        with pytest.raises(sweep.SweepError):
            sweep.parse_axis(bad)


def test_the_gyro_axis_parses_and_refuses() -> None:
    for text in ("gyro=1,0", "gyro=on,off", "GYRO=True,false"):
        axis = sweep.parse_axis(text)
        assert axis.name == "gyro" and axis.values == (1.0, 0.0)
    assert sweep.parse_axis("gyro=0").values == (0.0,)
    for bad, why in (("gyro=2", "'2' is not one of 1, 0, on, off"),
                     ("gyro=0.5", "'0.5' is not one of"), ("gyro=yes", "'yes' is not one of"),
                     ("gyro=1,on", "a value is repeated"), ("gyro=", "no values")):
        with pytest.raises(sweep.SweepError, match=why) as exc:
            sweep.parse_axis(bad)
        assert "\n" not in str(exc.value)
    assert sweep.parse_axis("gyro_angle=1,0").values == (1.0, 0.0)
    # a world setting, not a link fault
    assert sweep.link_faults({"gyro": 0.0}).is_clear
    assert sweep.link_faults({"gyro_angle": 0.0}).is_clear
    assert sweep.link_faults({"gyro": 1.0, "loss": 0.2}) == LinkFaults(drop=0.2)


def test_a_numeric_car_constant_and_an_agent_setting_are_axes(tmp_path: Path) -> None:
    """``gyro_scale`` sets the arena's car constant; a dotted agent setting sets every agent's
    (both refused in one line when the value cannot be given)."""
    from tools.experiments.scenario_file import SCENARIO_DIR

    assert sweep.parse_axis("gyro_scale=0,0.015,0.03").values == (0.0, 0.015, 0.03)
    state = sweep.parse_axis("localizer.gyro_scale_std=0,0.02")
    assert state.name == "localizer.gyro_scale_std" and state.values == (0.0, 0.02)
    for bad, why in (("gyro_scale=0.9", r"must be in \[0, 0.5\]"),
                     ("gyro_scale=a", "'a' is not a number"),
                     ("localizer.gyro_scale_std=-1", "gyro_scale_std must be finite and >= 0"),
                     ("localizer.no_such=1", "unknown setting 'localizer.no_such'"),
                     ("localizer.gyro_scale_std=0,0", "a value is repeated")):
        with pytest.raises(sweep.SweepError, match=why) as exc:
            sweep.parse_axis(bad)
        assert "\n" not in str(exc.value)
    trial = sweep.Trial(str(SCENARIO_DIR / "default.toml"), 2, None,
                        (("gyro_scale", 0.03), ("localizer.gyro_scale_std", 0.0)))
    built = sweep.build(trial)
    assert built.arena.car_model.gyro_scale == 0.03
    assert replace(built.arena.car_model, gyro_scale=ARENA.car_model.gyro_scale) == ARENA.car_model
    for name in built.names:
        assert built.agent_config(name).localizer.gyro_scale_std == 0.0
    assert not built.schedule  # no link fault
    run = built.materialise(tmp_path)
    assert load_arena(tmp_path / "arena.toml").car_model.gyro_scale == 0.03
    assert run.agent_config("walnut").localizer.gyro_scale_std == 0.0


def test_a_gyro_trial_builds_its_arena(tmp_path: Path) -> None:
    from agents.transport import Direction
    from tools.experiments.scenario_file import SCENARIO_DIR
    from tools.experiments.schedule import ActionKind

    def trial(point: tuple[tuple[str, float], ...], name: str = "default") -> sweep.Trial:
        return sweep.Trial(str(SCENARIO_DIR / f"{name}.toml"), 3, "naive", point)

    assert sweep.build(trial(())).arena.car_model.gyro  # the arena's own: with a gyro
    assert sweep.build(trial(())).arena_text() is None
    off = sweep.build(trial((("loss", 0.5), ("gyro", 0.0))))
    on = sweep.build(trial((("gyro", 1.0), ("loss", 0.5))))
    assert not off.arena.car_model.gyro and on.arena.car_model.gyro
    for s in (off, on):  # the other axes and the trial's settings still hold
        assert s.seed == 3 and {a.fusion for a in s.agents} == {"naive"}
        assert [(a.kind, a.direction, a.faults) for a in s.schedule] == [
            (ActionKind.FAULTS, Direction.IN, LinkFaults(drop=0.5))]
        assert replace(s.arena.car_model, gyro=True) == ARENA.car_model  # nothing else
        assert s.agent_config("walnut") is not None
    both = sweep.build(trial((("gyro", 1.0), ("gyro_angle", 0.0))))
    assert both.arena.car_model.gyro and not both.arena.car_model.gyro_angle
    # the run directory's arena file says it (the world log and a replay read that file)
    run = off.materialise(tmp_path)
    assert run.arena.source == str(tmp_path / "arena.toml") and not run.arena.car_model.gyro
    assert not load_arena(tmp_path / "arena.toml").car_model.gyro
    # an arena without a [car_model] table, and a hidden target's arena file
    eight = sweep.build(trial((("gyro", 0.0),), "eight_robots"))
    assert not eight.arena.car_model.gyro
    hidden = sweep.build(trial((("gyro", 0.0),), "hidden_search"))
    assert hidden.target_place is not None and not hidden.arena.car_model.gyro
    hidden.materialise(tmp_path)
    again = load_arena(tmp_path / "arena.toml")
    assert not again.car_model.gyro and again.target == hidden.arena.target
    # what the trial ships to a worker is the built scenario: it survives pickling
    import pickle

    assert not pickle.loads(pickle.dumps(off)).arena.car_model.gyro


def test_grid_points_become_inbound_faults() -> None:
    assert sweep.link_faults({}).is_clear
    assert sweep.link_faults({"loss": 0.2, "delay": 0.05}) == LinkFaults(drop=0.2, delay=0.05)
    burst = sweep.link_faults({"burst": 0.3}, burst_length=8.0).burst
    assert burst is not None
    assert math.isclose(burst.stationary_loss, 0.3) and math.isclose(burst.mean_burst_length, 8)


def truth_of(poses: dict[str, tuple[float, float, float]]) -> Truth:
    t = np.array([0.0, 10.0])
    cars = {n: np.array([p, p], dtype=float) for n, p in poses.items()}
    return Truth(t, np.zeros((2, 4)), cars)


def test_footprint_overlap_from_truth() -> None:
    same = truth_of({"a": (2.5, 2.5, 0.0), "b": (2.5, 2.5, 0.0)})
    assert measure.footprint_overlap(same, ARENA, ["a", "b"], 0.0, 5.0)["overlap"] == 1.0
    away = truth_of({"a": (2.5, 2.5, 0.0), "b": (2.5, 2.5, math.pi)})
    fp = measure.footprint_overlap(away, ARENA, ["a", "b"], 0.0, 5.0)
    assert fp["overlap"] == 0.0 and 0.1 < fp["union_fraction"] < 0.6
    # a tall box one metre ahead hides what is behind it; a low one hides nothing
    t = np.array([0.0])
    open_view = measure.camera_footprints(same, ARENA, "a", t)[0].size
    tall = replace(ARENA, site=replace(ARENA.site, obstacles=(Obstacle(3.6, 2.5, 0.2, 1.0, 0.6),)))
    low = replace(ARENA, site=replace(ARENA.site, obstacles=(Obstacle(3.6, 2.5, 0.2, 1.0, 0.1),)))
    assert measure.camera_footprints(same, tall, "a", t)[0].size < 0.8 * open_view
    assert measure.camera_footprints(same, low, "a", t)[0].size == open_view


def test_aggregate_and_tables() -> None:
    axes = [sweep.parse_axis("loss=0,0.5")]
    results = [
        {"point": {"loss": 0.0}, "fusion": "ci", "metrics": {"err_after_20_m": 0.1,
                                                            "kbytes_per_s": 4.0}},
        {"point": {"loss": 0.0}, "fusion": "ci", "metrics": {"err_after_20_m": 0.3,
                                                            "kbytes_per_s": 4.0}},
        {"point": {"loss": 0.5}, "fusion": "ci", "error": "boom"},
        {"point": {"loss": 0.5}, "fusion": "ci", "metrics": {"err_after_20_m": None,
                                                            "kbytes_per_s": 3.0}},
    ]
    rows = sweep.aggregate(results, axes, ["ci"])
    assert [r["trials"] for r in rows] == [2, 2] and [r["failed"] for r in rows] == [0, 1]
    err = rows[0]["err_after_20_m"]
    assert math.isclose(err["mean"], 0.2) and math.isclose(err["std"], math.sqrt(0.02))
    table = sweep.markdown(rows, axes)
    assert "| 0 | ci | 2 | 0.200 ± 0.141 |" in table
    assert "| 0.5 | ci | 1 (1 failed) | – |" in table
    csv_text = sweep.to_csv(rows, axes)
    assert csv_text.splitlines()[0].startswith("loss,fusion,trials,failed,err_after_20_m_mean")


def test_a_tiny_sweep_in_parallel(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text('name = "tiny"\narena = "two_cars"\nduration = 3.0\nseed = 5\n')
    parser = argparse.ArgumentParser()
    sweep_cmd.add_arguments(parser)
    out = tmp_path / "table.md"
    args = parser.parse_args([str(scenario), "--over", "loss=0,1", "--seeds", "1", "--fusion",
                              "ci", "--jobs", "2", "--out", str(out), "--quiet"])
    assert sweep_cmd.main(args) == 0, capsys.readouterr().err
    table = out.read_text()
    assert "| loss | fusion | runs |" in table and "| 1 | ci | 1 |" in table
    data = json.loads(out.with_suffix(".json").read_text())
    assert [t["point"] for t in data["trials"]] == [{"loss": 0.0}, {"loss": 1.0}]
    deaf, hearing = data["trials"][1]["metrics"], data["trials"][0]["metrics"]
    assert deaf["kbytes_per_s"] > 0 and hearing["kbytes_per_s"] > 0
    assert out.with_suffix(".csv").exists()
    bad = parser.parse_args([str(scenario), "--over", "loss=2", "--out", str(out)])
    assert sweep_cmd.main(bad) == 2
    capsys.readouterr()
    bad = parser.parse_args([str(scenario), "--over", "gyro=2", "--out", str(out)])
    assert sweep_cmd.main(bad) == 2
    err = capsys.readouterr().err
    assert err == ("stigmesh sweep: --over 'gyro=2': '2' is not one of 1, 0, on, off, true, "
                   "false\n")
    blocked = tmp_path / "a-file"  # an --out it cannot write: said before any run, not after
    blocked.write_text("not a folder\n")
    bad = parser.parse_args([str(scenario), "--over", "loss=0", "--out", str(blocked / "t.md")])
    assert sweep_cmd.main(bad) == 2
    captured = capsys.readouterr()
    assert captured.err == f"stigmesh sweep: --out {blocked / 't.md'}: {blocked} is a file, " \
        "not a folder\n" and "lockstep runs" not in captured.out


def test_a_gyro_free_trial_runs_without_gyro(tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    """A real (short) lockstep trial of --over gyro=0 on a worker: no car has a gyro (the
    world's boot records no gyro bias, the agents' car status no gyro rate) and the kept
    run directory's arena file says so; gyro=1 has both."""
    from protocol.runlog import process_logs, read_run_log

    scenario = tmp_path / "tiny.toml"
    scenario.write_text('name = "tiny"\narena = "two_cars"\nduration = 3.0\nseed = 5\n')
    parser = argparse.ArgumentParser()
    sweep_cmd.add_arguments(parser)
    out, keep = tmp_path / "table.md", tmp_path / "runs"
    args = parser.parse_args([str(scenario), "--over", "gyro=off,on", "--over", "loss=0.2",
                              "--seeds", "1", "--jobs", "2", "--out", str(out),
                              "--keep-runs", str(keep), "--quiet"])
    assert sweep_cmd.main(args) == 0, capsys.readouterr().err
    assert "| gyro | loss | fusion | runs |" in out.read_text()
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["axes"] == {"gyro": [0.0, 1.0], "loss": [0.2]}
    for trial, gyro in zip(data["trials"], (False, True), strict=True):
        assert trial["point"] == {"gyro": float(gyro), "loss": 0.2} and "metrics" in trial
        run_dir = Path(trial["run_dir"])
        assert load_arena(run_dir / "arena.toml").car_model.gyro is gyro
        logs = process_logs(run_dir)
        world = list(read_run_log(logs["world"]))
        start = next(e for e in world if e["event"] == "start")
        assert start["source"] == str(run_dir / "arena.toml")
        boots = [e for e in world if e["event"] == "boot"]
        assert len(boots) == 2 and all((e["gyro_bias"] is not None) is gyro for e in boots)
        for name in ("walnut", "hazel"):
            cars = [e for e in read_run_log(logs[name]) if e["event"] == "car"]
            assert len(cars) > 10 and all((e["gyro"] is not None) is gyro for e in cars)


def _square(x: int) -> int:
    return x * x


def _lost(x: int, exc: BaseException) -> int:
    return -1


def test_a_scheduler_runs_the_tasks_and_refuses_workers_of_other_code(tmp_path: Path) -> None:
    """--scheduler: a running cluster's workers do the work when they run this checkout's
    code, and are refused before anything is submitted when one runs other code."""
    import shutil
    import subprocess
    import sys

    from dask.distributed import Client, LocalCluster

    from tools.experiments.cluster import ROOT, SOURCES, Cluster, ClusterError

    # A scheduler on loopback with one worker thread in this process: this checkout's code.
    local = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                         host="127.0.0.1", dashboard_address="127.0.0.1:0")
    with local, Cluster(local.scheduler_address) as cluster:
        assert cluster.workers == 1 and "1 worker" in cluster.describe()
        assert sorted(cluster.map(_square, [1, 2, 3], _lost)) == [(0, 1), (1, 4), (2, 9)]
    # A scheduler whose only worker is a process started from a copy of the sources in
    # which one file differs.
    copy = tmp_path / "other"
    for d in SOURCES:
        shutil.copytree(ROOT / d, copy / d, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "tools" / "experiments" / "__init__.py").write_text('"""Another checkout."""\n')
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as remote:
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", remote.scheduler_address,
             "--nthreads", "1", "--nworkers", "1", "--host", "127.0.0.1", "--no-dashboard"],
            cwd=copy, env={**os.environ, "PYTHONPATH": str(copy)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            with Client(remote.scheduler_address) as client:
                client.wait_for_workers(1, timeout=120)
            with pytest.raises(ClusterError, match=r"1 of 1 worker.* run other code"), \
                    Cluster(remote.scheduler_address):
                pass
        finally:
            worker.terminate()
            worker.wait(timeout=30)
