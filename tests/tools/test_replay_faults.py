"""The replay report shows the faults: windows shaded as scheduled, the liar's published
track apart from its private one, refusals and first-refusal times named."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from tools.commands import replay as replay_main
from tools.commands.run import write_schedule
from tools.experiments.lockstep import run_scenario
from tools.experiments.scenario_file import find_scenario, load_scenario
from tools.experiments.schedule import describe, timeline
from tools.replay.fault_figures import shade
from tools.replay.faults import FaultWindow, faults_of, windows_of_ops
from tools.replay.figures import wire_scale
from tools.replay.load import load_run
from tools.replay.metrics import analyse

DURATION = 32.0  # the liar starts at 20 s; walnut refused it 1.7 s later (seed 1)
pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def liar_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scenarios/byzantine.toml (pecan lies from 20 s), shortened, in lockstep."""
    run_dir = tmp_path_factory.mktemp("byz")
    scenario = replace(load_scenario(find_scenario("byzantine")), duration=DURATION)
    applied = run_scenario(scenario, run_dir)
    write_schedule(run_dir, scenario, "lockstep", applied, timeline(scenario))
    return run_dir


def test_windows_of_operations() -> None:
    ops = [(1.0, "a: faults both drop=0.3"), (4.0, "a: faults both clear"),
           (2.0, "b: kill"), (5.0, "b: restart"), (3.0, "world: drop_link car 1 2 s"),
           (6.0, "c: byzantine bias=2,0"), (7.0, "a: faults in delay=50ms")]
    got = windows_of_ops(ops, t_end=10.0)
    assert got == [
        FaultWindow(1.0, 4.0, "faults", "a: faults both drop=0.3"),
        FaultWindow(2.0, 5.0, "kill", "b: kill"),
        FaultWindow(3.0, 5.0, "world", "world: drop_link car 1 2 s"),
        FaultWindow(6.0, 10.0, "byzantine", "c: byzantine bias=2,0"),
        FaultWindow(7.0, 10.0, "faults", "a: faults in delay=50ms"),
    ]


def test_wire_scale_is_not_squashed_by_a_burst() -> None:
    steady = np.full(60, 3.0)
    burst = steady.copy()
    burst[0] = 70.0
    assert wire_scale([burst]) < 10.0  # the steady rate fills the plot
    assert wire_scale([steady]) >= 3.0  # nothing is off scale without a burst


def test_the_report_shows_the_liar_and_its_refusal(liar_run: Path, tmp_path: Path) -> None:
    run = load_run(liar_run)
    faults = faults_of(run)
    # the shaded windows are the schedule's: pecan lies from 20 s to the end
    planned = describe(timeline(replace(load_scenario(find_scenario("byzantine")),
                                        duration=DURATION)))
    assert [(p["t"], p["text"]) for p in planned] == [(20.0, "pecan: byzantine bias=2,0")]
    assert faults.source == "schedule.json"
    assert [(w.start - run.t_start, w.end, w.kind) for w in faults.windows] == [
        (20.0, run.t_end, "byzantine")]
    an = analyse(run)
    ax = Figure().add_subplot()
    assert shade(ax, an, faults) == [(20.0, run.t_end - run.t_start)]
    # its published track is its private one moved by the lie (bias 2 m along x)
    liar = faults.liars["pecan"]
    lying = liar.published_t >= run.t_start + 20.0
    assert lying.sum() > 20
    own_x = np.interp(liar.published_t[lying], liar.private_t, liar.private_xy[:, 0])
    assert abs(float(np.median(liar.published_xy[lying, 0] - own_x)) - 2.0) < 0.3
    # the refusals the agents logged, counted and named in the report
    refused = sum(1 for e in run.agents["walnut"].events("peer_track")
                  if e.get("outcome") == "distrusted")
    assert refused > 0
    out = tmp_path / "report"
    parser = argparse.ArgumentParser()
    replay_main.add_arguments(parser)
    assert replay_main.main(parser.parse_args([str(liar_run), "--out", str(out)])) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["faults"]["rejected"]["walnut"]["reputation"] == refused
    first = metrics["faults"]["first_refused_s"]["walnut->pecan"]
    assert first is not None and first >= 20.0
    report = (out / "report.md").read_text()
    assert "No received datagram was rejected" not in report
    assert f"| walnut → pecan | {first:.3g} |" in report
    assert "| reputation |" in report and "`pecan: byzantine bias=2,0`" in report
    assert (out / "reputation.png").read_bytes()[:4] == b"\x89PNG"
    assert "](reputation.png)" in report
