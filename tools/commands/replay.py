"""``stigmesh replay RUN_DIR``: measure a run's convergence, and compare it under another rule."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

# Kept here, not imported, so that building the CLI's parser stays light (no numpy, scipy,
# matplotlib); tests check they equal overrides.FUSION_CHOICES and metrics.COVERAGE_VAR.
FUSION_CHOICES = ("ci", "naive", "max_confidence", "none")
COVERAGE_VAR = 0.5

EXIT_OK, EXIT_USAGE, EXIT_NOT_A_RUN = 0, 2, 3
PROG = "stigmesh replay"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    parser.add_argument(
        "--out", type=Path, default=None, help="report directory (default RUN_DIR/report)"
    )
    parser.add_argument(
        "--fusion",
        choices=FUSION_CHOICES,
        default=None,
        help="re-run every agent's core with this fusion rule and compare (open loop)",
    )
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="re-run with an agent setting changed, e.g. grid.q_drift=0.1 (repeatable)",
    )
    parser.add_argument(
        "--arena",
        default=None,
        help="arena file or shipped arena name, when the run does not record it "
        "(needed for a re-run; bounds the coverage to the room)",
    )
    parser.add_argument(
        "--matched-sensor",
        action="store_true",
        help="also judge each agent's own track filter fed a perfectly matched sensor (the "
        "truth plus noise of each detection's own covariance, no peers): the NEES its model "
        "alone allows (needs the world's truth)",
    )
    parser.add_argument(
        "--coverage-var",
        type=float,
        default=COVERAGE_VAR,
        help=f"a cell counts as searched while its var is below this (default {COVERAGE_VAR})",
    )


def _say(message: str) -> None:
    print(f"replay: {message}", flush=True)


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


def _print_latency(lat: dict[str, Any]) -> None:
    from tools.replay.report import fmt

    if lat["stages"]:
        _say("latency budget (median / p95 ms):")
        for name, v in lat["stages"].items():
            _say(f"  {name}: {fmt(v['median_ms'])} / {fmt(v['p95_ms'])} (n={v['n']})")
    else:
        _say("latency budget: the logs carry no per-stage timestamps (camera mode only)")
    for name, v in lat["derived"].items():
        _say(f"  derived {name}: {fmt(v['median_ms'])} / {fmt(v['p95_ms'])} ms (n={v['n']})")


def main(args: argparse.Namespace) -> int:
    from agents.belief.params import GridParams
    from tools.replay import figures
    from tools.replay.faults import faults_of
    from tools.replay.load import NotARunError, find_arena, load_run
    from tools.replay.metrics import analyse, latency_summary, room_cells_of
    from tools.replay.overrides import OverrideError, parse_sets, variant_sets
    from tools.replay.report import fmt, rerun_table, write_report
    from tools.replay.rerun import RerunError, agent_configs, rerun_metrics, rerun_run
    from worlds.arena import ArenaError

    began = time.perf_counter()
    if not args.coverage_var > 0.0:
        return _fail("--coverage-var must be > 0", EXIT_USAGE)
    try:
        sets = variant_sets(args.fusion, parse_sets(args.sets))
    except OverrideError as e:
        return _fail(str(e), EXIT_USAGE)
    try:
        run = load_run(args.run_dir, progress=_say)
    except NotARunError as e:
        return _fail(str(e), EXIT_NOT_A_RUN)
    try:
        arena, arena_note = find_arena(run, args.arena)
    except ArenaError as e:
        return _fail(f"--arena: {e}", EXIT_USAGE)
    if sets:  # agents that logged their site re-run without an arena (a real robot's run)
        try:
            agent_configs(run, arena, sets)  # refuse a bad setting before any work
        except (OverrideError, RerunError) as e:
            hint = "" if arena is not None else f" ({arena_note}; pass --arena FILE_OR_NAME)"
            return _fail(f"{e}{hint}", EXIT_USAGE)
    cell = GridParams().cell_size
    room = room_cells_of(arena.room.size_x, arena.room.size_y, cell) if arena else None
    for note in run.notes:
        _say(f"note: {note}")
    if run.skipped:
        _say(f"skipped {run.skipped} damaged line(s) in all")
    an = analyse(run, cell_size=cell, coverage_var=args.coverage_var, room_cells=room,
                 progress=_say, matched=args.matched_sensor)  # fmt: skip
    reruns = None
    rerun_summary = None
    if sets:
        try:
            reruns = rerun_run(run, arena, sets, room_cells=room, progress=_say)
        except (OverrideError, RerunError) as e:
            return _fail(str(e), EXIT_USAGE)
        rerun_summary = rerun_metrics(reruns, an.truth, an.t_start)
    out = args.out if args.out is not None else run.path / "report"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return _fail(f"cannot create {out}: {e.strerror or e}", EXIT_USAGE)
    faults = faults_of(run, {n: ag.wire.rejected for n, ag in an.agents.items()})
    drawn = figures.draw_all(an, out, reruns, faults)
    _say(f"drew {len(drawn)} figures")
    md, js = write_report(an, out, drawn, rerun=rerun_summary, arena_note=arena_note,
                          faults=faults)
    _print_latency(latency_summary(an.latency))
    for name, ag in an.agents.items():
        errors = ag.metrics.get("errors", {})
        whole = errors.get("position_error_m", {})
        late = errors.get("position_error_after_settle_m", {})
        _say(
            f"{name}: position error median {fmt(whole.get('median'))} m "
            f"(after 20 s: median {fmt(late.get('median'))}, p95 {fmt(late.get('p95'))} m); "
            f"sent {ag.metrics['wire']['tx_datagrams']} datagrams"
        )
    if rerun_summary is not None:
        _say("re-run, recorded configuration / variant:")
        for line in rerun_table(rerun_summary):
            _say(f"  {line}")
    _say(f"wrote {md} and {js} in {time.perf_counter() - began:.1f} s")
    return EXIT_OK
