"""Lockstep runs: bit-identical for a seed, faults acting as in the live runtime, the schedule
applied at its times, kill and restart, and ``stigmesh run --lockstep`` end to end."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from agents.faults import LinkFaults
from agents.transport import Direction
from protocol.runlog import log_path, read_run_log
from tests.support.files import FullDisk
from tools.commands import run as run_cmd
from tools.experiments.lockstep import Lockstep, run_scenario
from tools.experiments.scenario_file import parse_scenario
from worlds.arena import load_arena, shipped_arena

T0 = 1000.0  # Lockstep's start
SCHEDULE = """
arena = "two_cars"
duration = 9.0
seed = 2
[[schedule]]
at = 1.0
partition = "walnut|hazel"
duration = 1.5
[[schedule]]
at = 3.0
agent = "walnut"
faults = {drop = 0.3, delay = "20ms", jitter = "5ms", dup = 0.1, reorder = 0.1}
direction = "both"
[[schedule]]
at = 4.0
agent = "hazel"
byzantine = {bias = [1, 0], noise = 0.1}
[[schedule]]
at = 5.0
agent = "hazel"
kill = true
duration = 1.5
[[schedule]]
at = 7.0
world = {drop_link = {car = "walnut", duration = 0.5}}
"""


def hashes(run_dir: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.glob("*.mcap"))}


def events(run_dir: Path, name: str, *kinds: str) -> list[dict]:
    return [line for line in read_run_log(log_path(run_dir, name)) if line["event"] in kinds]


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    run_dir = tmp_path_factory.mktemp("scheduled")
    scenario = parse_scenario(SCHEDULE, "s.toml", Path("."))
    return run_dir, run_scenario(scenario, run_dir)


def test_same_seed_same_bytes_other_seed_other_bytes(scheduled, tmp_path: Path) -> None:
    run_dir, _ = scheduled
    scenario = parse_scenario(SCHEDULE, "s.toml", Path("."))
    run_scenario(scenario, tmp_path / "again")
    run_scenario(scenario.with_seed(3), tmp_path / "other")
    first, again, other = hashes(run_dir), hashes(tmp_path / "again"), hashes(tmp_path / "other")
    assert set(first) == {"walnut.mcap", "hazel.mcap", "world.mcap"}
    assert first == again
    assert all(first[name] != other[name] for name in first)
    # the faulty link really lost, delayed, duplicated and reordered datagrams
    kinds = {line["kind"] for line in events(run_dir, "walnut", "fault")}
    assert {"partition", "drop", "duplicate", "reorder", "spec"} <= kinds


def test_schedule_applies_at_its_times(scheduled) -> None:
    run_dir, applied = scheduled
    assert [(a["t"], a["text"]) for a in applied][:3] == [
        (1.0, "walnut: faults in partition=walnut|hazel"),
        (1.0, "hazel: faults in partition=walnut|hazel"),
        (2.5, "walnut: faults in clear"),
    ]
    assert all(abs(a["at"] - a["t"]) < 1e-6 for a in applied)
    walnut = [(round(e["t"] - T0, 6), e["direction"], e["spec"])
              for e in events(run_dir, "walnut", "faults_set")]
    assert walnut == [
        (1.0, "in", {"partition": [["walnut"], ["hazel"]]}),
        (2.5, "in", {}),
        (3.0, "both", LinkFaults.from_mapping(
            {"drop": 0.3, "delay": "20ms", "jitter": "5ms", "dup": 0.1, "reorder": 0.1}
        ).to_mapping()),
    ]
    byz = events(run_dir, "hazel", "byzantine")
    assert [(round(e["t"] - T0, 6), e["spec"]) for e in byz] == [
        (4.0, {"bias": [1.0, 0.0], "noise": 0.1})
    ]
    world = events(run_dir, "world", "fault")
    assert [(round(e["t"] - T0, 6), e["kind"], e["car"]) for e in world] == [
        (7.0, "drop_link", 1)
    ]


def test_partition_blocks_then_heals(scheduled) -> None:
    run_dir, _ = scheduled
    rx = [e["t"] - T0 for e in events(run_dir, "walnut", "rx")]
    assert rx and not [t for t in rx if 1.01 < t < 2.5]
    assert [t for t in rx if 2.5 < t < 3.0]


def test_kill_stops_the_agent_and_its_car_restart_has_a_new_epoch(scheduled) -> None:
    run_dir, _ = scheduled
    hazel = list(read_run_log(log_path(run_dir, "hazel")))
    starts = [e for e in hazel if e["event"] == "start"]
    assert [round(e["t"] - T0, 6) for e in starts] == [0.0, 6.5]
    assert starts[0]["epoch"] != starts[1]["epoch"]
    assert {e["fusion"] for e in starts} == {"ci"} and all(e["reputation"] for e in starts)
    assert not [e for e in hazel if 5.0 < e["t"] - T0 < 6.5]  # dead: nothing at all
    assert [e for e in hazel if e["event"] == "tick" and e["t"] - T0 > 6.5]
    world = list(read_run_log(log_path(run_dir, "world")))
    stop = [e["t"] - T0 for e in world if e["event"] == "disarm" and e["car"] == 2]
    assert stop and 5.0 < stop[0] <= 5.35  # the firmware watchdog, not a STOP
    assert next(e for e in world if e["event"] == "disarm" and e["car"] == 2)["reason"] == (
        "watchdog"
    )
    assert [e for e in world if e["event"] == "arm" and e["car"] == 2 and e["t"] - T0 > 6.5]
    # the other agent saw the new epoch and sent it a snapshot
    joined = [e for e in events(run_dir, "walnut", "peer_joined") if e["peer"] == "hazel"]
    assert [j["epoch"] for j in joined] == [s["epoch"] for s in starts]
    start = next(e for e in world if e["event"] == "start")
    assert start["source"].endswith("two_cars.toml") and start["seed"] == 2


def test_inbound_and_outbound_faults_act_like_the_runtime(tmp_path: Path) -> None:
    ls = Lockstep(load_arena(shipped_arena("two_cars")), seed=1, run_dir=tmp_path)
    try:
        ls.run(1.0)
        ls.set_faults("walnut", LinkFaults(drop=1.0), Direction.OUT)
        ls.set_faults("hazel", LinkFaults(drop=1.0), Direction.IN)
        before = ls.agents["walnut"].node.datagrams_in, ls.agents["hazel"].node.datagrams_in
        ls.run(1.0)
        assert ls.agents["hazel"].node.datagrams_in == before[1]  # nothing reaches hazel
        assert ls.agents["walnut"].node.datagrams_in > before[0]  # hazel still sends
        counters = ls.agents["walnut"].agent.faults.status()["counters_out"]
        assert counters["drop"] == counters["routed"] > 0
        ls.set_faults("walnut", LinkFaults(delay=0.25), Direction.OUT)
        ls.set_faults("hazel", LinkFaults(), Direction.IN)
        ls.run(1.0)
    finally:
        ls.close()
    rx = [e for e in events(tmp_path, "hazel", "rx") if e["t"] > T0 + 2.0]
    assert rx and min(e["t"] for e in rx) >= T0 + 2.0 + 0.25 + 0.002 - 1e-9


def test_run_command_lockstep_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    scenario = tmp_path / "short.toml"
    scenario.write_text(
        'name = "short"\narena = "two_cars"\nduration = 6.0\nseed = 9\n'
        '[[schedule]]\nat = 2.0\nagent = "hazel"\nfaults = {drop = 0.5}\ndirection = "in"\n'
    )
    run_dir = tmp_path / "run"
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    code = run_cmd.main(parser.parse_args([str(scenario), "--lockstep", "--run-dir",
                                           str(run_dir)]))
    out = capsys.readouterr().out
    assert code == 0, out
    assert (run_dir / "scenario.toml").read_text() == scenario.read_text()
    schedule = json.loads((run_dir / "schedule.json").read_text())
    assert schedule["mode"] == "lockstep" and schedule["applied"][0]["t"] == 2.0
    metrics = json.loads((run_dir / "report" / "metrics.json").read_text())
    assert set(metrics["agents"]) == {"walnut", "hazel"}
    assert (run_dir / "report" / "report.md").exists()
    assert "line 5: hazel: faults in drop=0.5" in out and "summary" in out
    # a second run into the same directory is refused
    again = run_cmd.main(parser.parse_args([str(scenario), "--lockstep", "--run-dir",
                                            str(run_dir)]))
    assert again == 2


def test_a_scenarios_oracle_looks_hand_every_look_over_and_send_none(tmp_path: Path) -> None:
    from dataclasses import replace

    from tools.experiments.scenario_file import load_scenario

    shipped = load_scenario(Path(__file__).resolve().parents[2] / "scenarios/hidden_search.toml")
    shared = replace(shipped.with_seed(3), duration=6.0)
    scenario = shared.with_oracle_looks()
    assert scenario.oracle_looks and all(("search.share", "false") in a.sets
                                         for a in scenario.agents)
    for run, variant in ((tmp_path / "shared", shared), (tmp_path / "oracle", scenario)):
        run_scenario(variant, run)
    for name in scenario.names:
        handed = events(tmp_path / "oracle", name, "oracle_look")
        sent = {line.get("kind") for line in events(tmp_path / "oracle", name, "tx")}
        assert handed and "look" not in sent and "heartbeat" in sent, (name, sent)
        assert not events(tmp_path / "shared", name, "oracle_look")
        assert "look" in {line.get("kind") for line in events(tmp_path / "shared", name, "tx")}


def test_oracle_looks_need_lockstep(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    code = run_cmd.main(parser.parse_args(["default", "--oracle-looks", "--run-dir",
                                           str(tmp_path / "run")]))
    assert code == 2 and "--oracle-looks needs --lockstep" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_log_that_could_not_be_written_fails_the_run_at_its_close(tmp_path: Path) -> None:
    """A full disk under a lockstep run: the run goes on (the agents' loops never see it)
    and closing it raises, naming the log, so no run directory passes for whole."""
    ls = Lockstep(load_arena(shipped_arena("two_cars")), seed=1, run_dir=tmp_path)
    try:
        ls.run(0.5)
        log = ls.agents["hazel"].log
        assert log is not None and log._file is not None
        log._file._file = FullDisk(log._file._file)  # type: ignore[assignment]
        ls.run(3.0)  # chunks close every 2 s of the log's clock
        assert log.error is not None
    except BaseException:
        with contextlib.suppress(OSError):
            ls.close()
        raise
    with pytest.raises(OSError, match=r"a log was not written whole: .*hazel\.mcap"):
        ls.close()


def test_a_car_link_whose_round_trip_exceeds_the_clock_limit_never_arms() -> None:
    """MZ01.md's claim, measured: the ARM waits for a clock bound of 25 ms, half the best
    probe's round trip, so at 30 ms each way (60 ms round trip) no car is ever armed, while
    at 15 ms each way every car drives."""
    for latency, drives in ((0.03, False), (0.015, True)):
        ls = Lockstep(load_arena(shipped_arena("two_cars")), seed=1, car_latency=latency)
        try:
            ls.run(4.0)
            for name, agent in ls.agents.items():
                session = agent.agent.session
                assert session.synchronized_at_time(ls.t) is drives, (latency, name)
                assert (session.state.value == "driving") is drives, (latency, name)
        finally:
            ls.close()


def test_telemetry_reaches_the_localizer_stamped_when_the_car_took_it() -> None:
    """Over a car link of 15 ms each way, each telemetry is placed at the car's uptime
    through the car clock, 15 ms before it arrived (within the clock's error and the
    uptime's millisecond); before the clock converges, at its arrival (None)."""
    ls = Lockstep(load_arena(shipped_arena("two_cars")), seed=1, car_latency=0.015)
    seen: list[tuple[float, float | None]] = []
    try:
        for member in ls.agents.values():
            node = member.agent.node
            original = node.car_status

            def spy(now: float, *args: Any, original: Any = original, **kw: Any) -> None:
                seen.append((now, kw["sampled_at"]))
                original(now, *args, **kw)

            node.car_status = spy  # type: ignore[method-assign]
        ls.run(3.0)
    finally:
        ls.close()
    stamped = [now - at for now, at in seen if at is not None]
    assert seen[0][1] is None and len(stamped) > 40, (len(seen), len(stamped))
    assert all(0.013 <= lag <= 0.017 for lag in stamped), (min(stamped), max(stamped))


def test_a_scenarios_car_link_delays_every_car_datagram(tmp_path: Path) -> None:
    """``car_link = "delay=10ms"`` adds 10 ms to the 2 ms car latency, both ways: each
    telemetry arrives 12 ms after the car took it (the car clock then says so, within its
    error and the uptime's millisecond), and the run is the same again with the same seed."""
    body = ('arena = "two_cars"\nduration = 4.0\nseed = 3\ncar_link = "delay=10ms"\n')
    scenario = parse_scenario(body, "link.toml", Path("."))
    run_scenario(scenario, tmp_path / "a")
    run_scenario(scenario, tmp_path / "b")
    assert hashes(tmp_path / "a") == hashes(tmp_path / "b")
    lags = [e["t"] - e["at"] for e in events(tmp_path / "a", "walnut", "car")
            if e["at"] is not None]
    assert len(lags) > 20 and all(0.010 <= lag <= 0.014 for lag in lags), (
        len(lags), min(lags), max(lags))
    assert not events(tmp_path / "a", "world", "car_link_fault")  # a delay is no fault


def test_a_car_links_losses_are_in_the_world_log(tmp_path: Path) -> None:
    body = 'arena = "two_cars"\nduration = 2.0\nseed = 3\ncar_link = "drop=0.3"\n'
    run_scenario(parse_scenario(body, "lossy.toml", Path(".")), tmp_path)
    lost = events(tmp_path, "world", "car_link_fault")
    assert lost and {e["kind"] for e in lost} == {"drop"}
    arrived = len(events(tmp_path, "walnut", "car")) + len(events(tmp_path, "hazel", "car"))
    assert 0.15 < len(lost) / (len(lost) + arrived) < 0.6  # both ways: commands lost too


def test_each_direction_of_each_car_link_has_its_own_burst_state(tmp_path: Path) -> None:
    """SCENARIO.md's claim: a car link's Gilbert–Elliott state is kept per direction of each
    car. Each of the four links (two cars, both ways) enters and leaves its bad state on its
    own: its starts and ends alternate, whatever the other links do."""
    body = ('arena = "two_cars"\nduration = 3.0\nseed = 4\n'
            'car_link = "burst=0.2,0.3,1.0"\n')
    run_scenario(parse_scenario(body, "bursty.toml", Path(".")), tmp_path)
    marks: dict[str, list[str]] = {}
    for e in events(tmp_path, "world", "car_link_fault"):
        if e["kind"] in ("burst_start", "burst_end"):
            marks.setdefault(json.dumps([e["src"], e["dst"]]), []).append(e["kind"])
    assert len(marks) == 4, sorted(marks)
    for link, kinds in marks.items():
        assert kinds[0] == "burst_start", link
        assert all(a != b for a, b in itertools.pairwise(kinds)), (link, kinds)


def test_a_real_run_refuses_a_car_link(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    scenario = tmp_path / "link.toml"
    scenario.write_text('arena = "two_cars"\nduration = 4.0\ncar_link = "delay=10ms"\n')
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    assert run_cmd.main(parser.parse_args([str(scenario), "--run-dir",
                                           str(tmp_path / "run")])) == 2
    assert "car_link can only be applied in --lockstep" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
