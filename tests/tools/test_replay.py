"""`stigmesh replay` on a short recorded lockstep run: reading run directories (damaged,
hostile or missing logs), metrics against the truth, open-loop re-runs, the command."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from agents.core import AgentCore
from protocol.runlog import RunLog, dumps, log_path, read_run_log
from tools.agent_config import agent_config
from tools.commands import replay as replay_main
from tools.experiments.lockstep import Lockstep
from tools.replay.load import NotARunError, find_arena, load_run, swarm_id_of
from tools.replay.metrics import analyse, logged_poses, resample, room_cells_of, track_errors
from tools.replay.overrides import OverrideError, apply_overrides, parse_sets, variant_sets
from tools.replay.rerun import rerun_agent, rerun_run
from worlds.arena import load_arena, shipped_arena

DURATION = 22.0
ARENA = load_arena(shipped_arena("two_cars"))
ROOM = room_cells_of(ARENA.room.size_x, ARENA.room.size_y, 0.1)
# A command's re-run of both agents took 15-20 s beside other tests (load 11-14 on two
# cores), and the first test also makes the module's lockstep run: over the default 60 s.
pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def lockstep_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple]]:
    """A short two-agent lockstep run, and each node's own traffic counters."""
    run_dir = tmp_path_factory.mktemp("run")
    ls = Lockstep(ARENA, seed=1, run_dir=run_dir)
    try:
        ls.run(DURATION)
        counters = {
            name: (a.node.bytes_out, a.node.datagrams_out, a.node.datagrams_in)
            for name, a in ls.agents.items()
        }
    finally:
        ls.close()
    return run_dir, counters


@pytest.fixture
def run_copy(lockstep_run, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(lockstep_run[0], dst)
    return dst


# ---------------------------------------------------------------- reading


def _as_jsonl(run_dir: Path, name: str) -> Path:
    """``name``'s MCAP log rewritten as the JSON lines of older runs (``stigmesh log export
    --jsonl``), the MCAP file removed: the JSON reader's damage handling is tested on it."""
    mcap = log_path(run_dir, name)
    jsonl = mcap.with_suffix(".jsonl")
    jsonl.write_text("".join(dumps(e) + "\n" for e in read_run_log(mcap)), encoding="utf-8")
    mcap.unlink()
    return jsonl


def test_a_killed_writers_last_chunk_and_unknown_events_are_survived(
    lockstep_run, run_copy: Path
) -> None:
    clean = analyse(load_run(lockstep_run[0]), room_cells=ROOM)
    walnut = log_path(run_copy, "walnut")
    log = RunLog(walnut, "walnut", lambda: 1005.0, idle_flush=False)  # appends to the log
    log.log("gizmo", odd=[1, 2])
    log.flush()
    whole = walnut.stat().st_size
    log.log("tick")  # the chunk a killed writer was writing: half of it reached the disk
    log.flush()
    torn = (whole + walnut.stat().st_size) // 2
    log.close()
    with walnut.open("r+b") as f:
        f.truncate(torn)
    run = load_run(run_copy)
    assert run.agents["walnut"].stats.bad_lines == 1
    assert any("walnut.mcap: 1 damaged line" in n for n in run.notes)
    assert run.agents["walnut"].first("gizmo") == {
        "t": 1005.0, "proc": "walnut", "event": "gizmo", "odd": [1, 2]}
    damaged = analyse(run, room_cells=ROOM)
    a, b = clean.agents["walnut"], damaged.agents["walnut"]
    assert damaged.agents["walnut"].metrics["damaged_lines"] == 1
    assert a.metrics["wire"] == b.metrics["wire"]
    np.testing.assert_array_equal(a.series.x, b.series.x)


def test_truncated_last_line_of_an_old_json_lines_log(lockstep_run, run_copy: Path) -> None:
    clean = analyse(load_run(lockstep_run[0]), room_cells=ROOM)
    walnut = _as_jsonl(run_copy, "walnut")
    text = walnut.read_text(encoding="utf-8")
    extra = '{"t": 1005.0, "proc": "walnut", "event": "gizmo", "odd": [1, 2]}\n'
    last = text.splitlines(keepends=True)[-1]
    walnut.write_text(text + extra + last[: len(last) // 2], encoding="utf-8")
    run = load_run(run_copy)
    assert run.agents["walnut"].stats.bad_lines == 1
    assert any("walnut.jsonl: 1 damaged line" in n for n in run.notes)
    damaged = analyse(run, room_cells=ROOM)
    a, b = clean.agents["walnut"], damaged.agents["walnut"]
    assert a.metrics["wire"] == b.metrics["wire"]
    np.testing.assert_array_equal(a.series.x, b.series.x)


def test_hostile_lines_are_skipped_counted_and_reported(
    run_copy: Path, tmp_path: Path, capsys
) -> None:
    world = _as_jsonl(run_copy, "world")
    lines = world.read_text(encoding="utf-8").splitlines(keepends=True)
    boot = next(i for i, line in enumerate(lines) if '"event":"boot"' in line)
    lines[boot] = lines[boot].replace('"car":1,', '"car":"one",', 1)  # a non-integer car id
    assert '"car":"one"' in lines[boot]
    world.write_text("".join([*lines,
        "[" * 100_000 + "]" * 100_000 + "\n",  # RecursionError in json.loads
        '{"t": 1e308, "proc": "world", "event": "rtf", "rtf": 1.0}\n',  # time base to 1e308
        '{"t": ' + "9" * 400 + ', "proc": "world", "event": "rtf"}\n',  # no float holds it
        '{"t": 1005.0, "proc": "world", "event": "truth", "cars": 7, "target": null}\n',
        '{"t": 1005.0, "proc": "world", "event": "truth", "cars": [{"id": 1.5}], "target": null}\n',
    ]), encoding="utf-8")  # fmt: skip
    walnut = _as_jsonl(run_copy, "walnut")
    with walnut.open("a", encoding="utf-8") as f:  # core inputs the re-run could not parse
        f.write('{"t": 1005.0, "proc": "walnut", "event": "car", "duty": "x", "gyro": null}\n')
        f.write('{"t": 1005.0, "proc": "walnut", "event": "car", "duty": [0, 0], "gyro": 0.1, '
                '"angle": [1, 2]}\n')  # fmt: skip
        f.write('{"t": 1005.0, "proc": "walnut", "event": "rx", "ok": true, "src": ["a", 1], '
                '"raw": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}\n')  # fmt: skip
        f.write('{"t": 1005.0, "proc": "walnut", "event": "obs", "t_capture": "soon", '
                '"synchronized": true, "tags": [], "target": null}\n')  # fmt: skip
        f.write('{"t": 1005.0, "proc": "walnut", "event": "rx", "ok": true, "raw": null}\n')
        f.write('{"t": 1005.0, "proc": "walnut", "event": "belief", "pose": [1, "a", 2]}\n')
    run = load_run(run_copy)
    assert run.world is not None and run.world.stats.bad_lines == 6
    assert run.agents["walnut"].stats.bad_lines == 6 and run.skipped == 12
    assert run.car_names() == {1: "walnut", 2: "hazel"}
    out = tmp_path / "report"
    rc = replay_main.main(
        _args(str(run_copy), "--out", str(out), "--arena", "two_cars", "--fusion", "naive")
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "skipped 12 damaged line(s) in all" in printed
    assert "world.jsonl: 6 damaged line(s)" in printed and (out / "metrics.json").exists()


def test_missing_agent_and_missing_world(run_copy: Path) -> None:
    log_path(run_copy, "hazel").unlink()
    run = load_run(run_copy)
    assert sorted(run.agents) == ["walnut"]
    an = analyse(run)
    assert an.agreement == {} and an.truth is not None
    log_path(run_copy, "world").unlink()
    run = load_run(run_copy)
    assert run.world is None and any("no ground truth" in n for n in run.notes)
    an = analyse(run)
    assert an.truth is None and "errors" not in an.agents["walnut"].metrics
    assert an.agents["walnut"].metrics["wire"]["tx_datagrams"] > 0


def test_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(NotARunError, match="does not exist"):
        load_run(tmp_path / "nowhere")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(NotARunError, match="not a directory"):
        load_run(tmp_path / "file.txt")
    with pytest.raises(NotARunError, match="holds no process log"):
        load_run(tmp_path)
    log_path(tmp_path, "walnut").write_text('not json\n{"event": "tick"}\n[1, 2]\n')
    with pytest.raises(NotARunError, match="holds a run event"):
        load_run(tmp_path)


# ---------------------------------------------------------------- metrics on a real run


def test_wire_counts_match_the_nodes_own_counters(lockstep_run) -> None:
    run_dir, counters = lockstep_run
    an = analyse(load_run(run_dir))
    for name, (bytes_out, datagrams_out, datagrams_in) in counters.items():
        wire = an.agents[name].metrics["wire"]
        assert wire["tx_bytes"] == bytes_out
        assert wire["tx_datagrams"] == datagrams_out
        assert sum(k["datagrams"] for k in wire["tx_by_kind"].values()) == datagrams_out
        assert wire["rx_accepted"] + wire["rx_rejected_total"] == datagrams_in


def test_errors_agree_with_the_truth_log_read_directly(lockstep_run) -> None:
    run = load_run(lockstep_run[0])
    an = analyse(run, room_cells=ROOM)
    truth_lines = run.world.events("truth") if run.world else []
    t_truth = np.array([line["t"] for line in truth_lines])
    x_truth = np.array([line["target"]["x"] for line in truth_lines])
    y_truth = np.array([line["target"]["y"] for line in truth_lines])
    assert an.truth is not None
    for name, ag in an.agents.items():
        tracks = [r["track"] for r in run.agents[name].events("belief") if r.get("track")]
        assert len(tracks) >= 10
        times = np.array([tr["t"] for tr in tracks])
        direct = np.hypot(
            np.array([tr["x"][0] for tr in tracks]) - np.interp(times, t_truth, x_truth),
            np.array([tr["x"][1] for tr in tracks]) - np.interp(times, t_truth, y_truth),
        )
        # the published tracks (TRACK datagrams and belief records), looked up at those times
        measured = track_errors(resample(ag.samples, times), an.truth).pos_err
        np.testing.assert_allclose(measured, direct, atol=1e-9)
    # the target orbits at 1 m/s: the truth seen at every detection says so
    speeds = [s for ag in an.agents.values() for s in ag.speeds]
    assert speeds and all(s.true_speed == pytest.approx(1.0, abs=0.02) for s in speeds)
    for ag in an.agents.values():
        m = ag.metrics
        assert 0.0 < m["time_to_first_detection_s"] < DURATION
        assert m["errors"]["position_error_m"]["median"] < 0.5
        assert 0.0 <= m["errors"]["nees4"]["fraction_inside"] <= 1.0
        assert 0 < m["coverage"]["searched_ever_cells"] <= ROOM[0] * ROOM[1]
        # each robot's own pose, logged with its time and covariance, against the truth
        assert m["pose_error_m"]["n"] >= DURATION - 5 and m["pose_error_m"]["median"] < 0.2
        assert m["pose"]["nees3"]["mean"] is not None and m["pose"]["held"] > 0.5
        assert m["pose"]["heading_error_deg"]["median"] < 10.0
    assert an.swarm["agreement_m"]["hazel-walnut"]["all"]["n"] > 0


def test_the_matched_sensor_reference_is_judged_where_the_agent_holds_a_track(
        lockstep_run) -> None:
    run = load_run(lockstep_run[0])
    assert not analyse(run, room_cells=ROOM).agents["walnut"].matched  # only when asked
    an = analyse(run, room_cells=ROOM, matched=True)
    for ag in an.agents.values():
        ref = ag.matched["nees4"]
        assert ref.shape == an.times.shape
        assert np.isnan(ref[~ag.series.valid]).all()
        assert np.isfinite(ref).sum() >= 0.5 * ag.series.valid.sum() > 0
        m = ag.metrics["matched_sensor"]["nees4"]
        assert m["mean"] == pytest.approx(float(np.nanmean(ref)))
        assert 0.0 < m["fraction_inside"] <= 1.0


# ---------------------------------------------------------------- re-runs


def test_overrides() -> None:
    base = agent_config(ARENA, "walnut")
    sets = parse_sets(["grid.q_drift=0.2", "rates.patch=4", "use_reputation=no",
                       "patch_max_cells=50"])  # fmt: skip
    config = apply_overrides(base, variant_sets("naive", sets))
    assert config.grid.q_drift == 0.2 and config.rates.patch == 4.0
    assert config.use_reputation is False and config.patch_max_cells == 50
    assert config.fusion == "naive" and config.grid.r_hit == base.grid.r_hit
    for bad, match in (
        (["grid"], "KEY=VALUE"),
        (["grid.nope=1"], "unknown setting"),
        (["grid.q_drift=-1"], "q_drift must be"),
        (["patch_max_cells=1.5"], "integer"),
        (["use_reputation=maybe"], "true or false"),
        (["room=1"], "cannot be set"),
    ):
        with pytest.raises(OverrideError, match=match):
            apply_overrides(base, parse_sets(bad))
    with pytest.raises(OverrideError, match="one of"):
        variant_sets("average", {})
    # A setting whose None means "derived from the others" takes a number, or none again.
    derived = apply_overrides(base, parse_sets(["track_confident_spread=0.4",
                                                "nav.standoff=1.5"]))
    assert derived.confident_spread == 0.4 and derived.nav.standoff == 1.5
    again = apply_overrides(derived, parse_sets(["track_confident_spread=none"]))
    assert again.track_confident_spread is None
    assert again.confident_spread == base.confident_spread
    for bad, match in ((["nav.standoff=far"], "expected a number"),
                       (["track_confident_spread=-1"], "must be a positive")):
        with pytest.raises(OverrideError, match=match):
            apply_overrides(base, parse_sets(bad))


def test_rerun_reproduces_the_recording_and_the_variant_differs(lockstep_run) -> None:
    run = load_run(lockstep_run[0])
    reruns = rerun_run(run, ARENA, {"fusion": "none"}, room_cells=ROOM)
    assert sorted(reruns) == ["hazel", "walnut"]
    for r in reruns.values():
        assert r.recorded_digests >= int(DURATION) - 2
        assert r.reproduced == r.recorded_digests  # the replay is faithful, bit for bit
        assert r.variant_differs > 0
        assert r.changes == {"fusion": ("ci", "none")}
        assert r.baseline.t.size == r.variant.t.size >= 10 * (DURATION - 1)
        assert not r.baseline.input_errors
    # The re-run's own pose, sampled after every tick, is the one each belief record logged:
    # the pose, the time it refers to and its covariance.
    walnut = reruns["walnut"].baseline.pose
    records = [float(b["t"]) for b in run.agents["walnut"].events("belief")]
    logged = logged_poses(run.agents["walnut"])
    held = np.flatnonzero(np.isfinite(logged.pose).all(axis=1))
    assert held.size >= DURATION - 5
    for i in held:
        k = int(np.searchsorted(reruns["walnut"].baseline.t, records[i]))
        assert reruns["walnut"].baseline.t[k] == records[i]
        assert walnut.t[k] == logged.t[i] <= records[i]
        assert walnut.pose[k] == pytest.approx(logged.pose[i], abs=1e-9)
        assert walnut.P[k] == pytest.approx(logged.P[i], abs=1e-12)


def test_rerun_follows_the_agent_on_a_failing_input(lockstep_run, monkeypatch) -> None:
    """A message that raises inside the core is counted and the core goes on, as live; a
    failure of the agent's own loop (a tick) ends the re-run there, as it ends the agent."""
    log = load_run(lockstep_run[0]).agents["walnut"]
    sid = swarm_id_of(log)
    assert sid is not None
    calls = {"n": 0}
    original = AgentCore._on_message

    def flaky(self, msg, src, now):
        calls["n"] += 1
        if calls["n"] == 3:
            raise np.linalg.LinAlgError("made up")
        original(self, msg, src, now)

    monkeypatch.setattr(AgentCore, "_on_message", flaky)
    trace = rerun_agent(log, agent_config(ARENA, "walnut"), sid, "x")
    assert trace.input_errors == [] and trace.t.size >= 10 * (DURATION - 1)
    monkeypatch.undo()
    ticks = {"n": 0}
    original_tick = AgentCore.tick

    def dies(self, now, **kw):
        ticks["n"] += 1
        if ticks["n"] == 20:
            raise FloatingPointError("made up")
        original_tick(self, now, **kw)

    monkeypatch.setattr(AgentCore, "tick", dies)
    trace = rerun_agent(log, agent_config(ARENA, "walnut"), sid, "x")
    assert len(trace.input_errors) == 1 and trace.input_errors[0][1] == "tick"
    assert "made up" in trace.input_errors[0][2] and trace.t.size == 19


# ---------------------------------------------------------------- the command


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    replay_main.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_command_writes_the_report(lockstep_run, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    rc = replay_main.main(
        _args(str(lockstep_run[0]), "--out", str(out), "--arena", "two_cars", "--fusion", "naive",
              "--matched-sensor")
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "re-ran walnut" in printed and "no per-stage timestamps" in printed
    # the console shows the comparison the report writes, not only how many beliefs differ
    table = printed[printed.index("recorded configuration / variant"):].splitlines()
    assert any("position error after 20 s, median (m)" in line and line.count("/") == 2
               for line in table), printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert sorted(metrics["agents"]) == ["hazel", "walnut"]
    assert metrics["rerun"]["open_loop"] is True
    report = (out / "report.md").read_text()
    assert "Open loop" in report and "## Summary" in report
    assert "own filter fed a matched sensor" in report
    assert all(m["matched_sensor"]["nees4"]["mean"] > 0 for m in metrics["agents"].values())
    for name in ("uncertainty", "speed", "trajectories", "error", "rerun"):
        png = out / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png.name})" in report
    assert len(list(out.glob("grid_*.png"))) >= 1


def _rewrite(path: Path, events: list[dict]) -> None:
    """The log at ``path`` written anew with ``events`` (as a reader yields them)."""
    path.unlink()
    log = RunLog(path, path.stem, lambda: 0.0, idle_flush=False)
    for e in events:
        fields = {k: v for k, v in e.items() if k not in ("t", "proc", "event")}
        log.log(e["event"], t=e["t"], **fields)
    log.close()


def _without_world_start(run_dir: Path) -> None:
    world = log_path(run_dir, "world")
    _rewrite(world, [e for e in read_run_log(world) if e["event"] != "start"])


def test_command_errors(run_copy: Path, tmp_path: Path, capsys) -> None:
    assert replay_main.main(_args(str(tmp_path / "nowhere"))) == replay_main.EXIT_NOT_A_RUN
    assert "not a run directory" in capsys.readouterr().err
    _without_world_start(run_copy)  # the arena is not recorded: a re-run needs --arena
    rc = replay_main.main(_args(str(run_copy), "--out", str(tmp_path / "r"), "--fusion", "naive"))
    assert rc == replay_main.EXIT_USAGE and "--arena" in capsys.readouterr().err
    rc = replay_main.main(_args(str(run_copy), "--arena", "two_cars", "--set", "grid.x=1"))
    assert rc == replay_main.EXIT_USAGE and "unknown setting" in capsys.readouterr().err
    assert not (run_copy / "report").exists()  # refused before anything was written


def test_find_arena(run_copy: Path) -> None:
    _without_world_start(run_copy)
    run = load_run(run_copy)
    assert find_arena(run) == (None, "the run does not record its arena (no world start event)")
    arena, note = find_arena(run, "two_cars")
    assert arena is not None and arena.name == "two_cars" and note == "--arena two_cars"
    world = log_path(run_copy, "world")
    start = {"t": 999.0, "proc": "world", "event": "start", "arena": "two_cars",
             "source": "no/such/file.toml"}  # fmt: skip
    _rewrite(world, [start, *read_run_log(world)])
    arena, note = find_arena(load_run(run_copy))
    assert arena is not None and arena.name == "two_cars" and note.startswith("recorded: ")


def test_the_light_parser_constants_match_the_modules() -> None:
    from tools.replay import metrics, overrides

    assert set(replay_main.FUSION_CHOICES) == set(overrides.FUSION_CHOICES)
    assert replay_main.COVERAGE_VAR == metrics.COVERAGE_VAR
