"""The report directory: ``report.md`` (summary tables and figures) and ``metrics.json``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tools.replay.faults import Faults, faults_summary
from tools.replay.metrics import (
    CONFIDENT_SPREAD,
    SETTLE,
    STAGES,
    Analysis,
    jsonable,
    nees_bounds,
    run_metrics,
)

FIGURE_CAPTIONS = {
    "uncertainty": "Uncertainty over time: the grid's mean var (dashed) and the track's "
    "trace(P)/4 (solid). The dotted line is the seed's 0.15.",
    "speed": "Track speed against the true target speed (dotted); dots are the speed "
    "in the TRACK each agent sent right after an accepted detection.",
    "trajectories": "True paths of the target and the cars; each agent's track estimates "
    "coloured by their uncertainty trace(P)/4 (green: low).",
    "error": "Position and velocity error against the truth, and the distance between "
    "the agents' track positions at the same times.",
    "nees": "Normalised estimation error squared of the track (4-state and position) "
    "with the two-sided 95 % chi-square bounds.",
    "coverage": "Cells searched (var below the threshold) now and ever, and the overlap "
    "of the cells the agents count as searched (intersection over union).",
    "wire": "KB each agent sent per second (a start-up burst beyond the scale is marked with "
    "its peak), and by message kind over the run.",
    "reputation": "Each agent's score of each peer over time (a TRACK or PATCH that fails the "
    "agent's own check lowers it); below the dotted threshold the peer is refused. Dashed: "
    "the moment the agent first refused the peer.",
    "rerun": "Open-loop re-run: recorded (log), re-run with the recorded configuration, "
    "and re-run with the variant.",
}


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.0f}" if 1e4 <= abs(value) < 1e9 else f"{value:.{digits}g}"
    return str(value)


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100.0 * value:.0f} %"


def _get(d: Mapping[str, Any], path: str) -> Any:
    cur: Any = d
    for key in path.split("."):
        if not isinstance(cur, Mapping) or key not in cur:
            return None
        cur = cur[key]
    return cur


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def _pair(m: Mapping[str, Any], a: str, b: str, digits: int = 3) -> str:
    x, y = _get(m, a), _get(m, b)
    return f"{fmt(x, digits)} / {fmt(y, digits)}"


def _agent_rows(agents: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    def row(label: str, cell: Any) -> list[str]:
        return [label, *(cell(m) for m in agents.values())]

    late = f"after {SETTLE:.0f} s"
    return [
        row(
            "active (s after the start)",
            lambda m: f"{fmt(_get(m, 'active_s')[0], 2)} – {fmt(_get(m, 'active_s')[1])}",
        ),
        row("time to first detection (s)", lambda m: fmt(m.get("time_to_first_detection_s"))),
        row(
            f"time to a confident track (s; position σ ≤ {CONFIDENT_SPREAD:.2f} m by default,"
            " or the target just seen)",
            lambda m: fmt(m.get("time_to_confident_track_s")),
        ),
        row(
            "detections (accepted)",
            lambda m: f"{m.get('detections', 0)} ({_get(m, 'verdicts.accepted') or 0})",
        ),
        row(
            "position error median / p95 (m)",
            lambda m: _pair(m, "errors.position_error_m.median", "errors.position_error_m.p95"),
        ),
        row(
            f"position error {late}: median / p95 (m)",
            lambda m: _pair(
                m,
                "errors.position_error_after_settle_m.median",
                "errors.position_error_after_settle_m.p95",
            ),
        ),
        row(
            f"velocity error {late}: median / p95 (m/s)",
            lambda m: _pair(
                m,
                "errors.velocity_error_after_settle_mps.median",
                "errors.velocity_error_after_settle_mps.p95",
            ),
        ),
        row(
            f"track uncertainty {late}: median / p95",
            lambda m: _pair(
                m, "errors.uncertainty_after_settle.median", "errors.uncertainty_after_settle.p95"
            ),
        ),
        row(
            f"time {late} with track uncertainty < 0.15",
            lambda m: pct(_get(m, "errors.uncertainty_after_settle_below_0_15")),
        ),
        row(
            "speed at detection: median abs. relative error",
            lambda m: pct(_get(m, "speed_at_detection.abs_relative_error.median")),
        ),
        row(
            "speed at detection within 10 %",
            lambda m: (
                f"{pct(_get(m, 'speed_at_detection.within_10_percent'))} "
                f"of {_get(m, 'speed_at_detection.n') or 0}"
            ),
        ),
        row(
            "NEES 4-state: mean / inside 95 % bounds",
            lambda m: (
                f"{fmt(_get(m, 'errors.nees4.mean'))} / "
                f"{pct(_get(m, 'errors.nees4.fraction_inside'))}"
            ),
        ),
        row(
            "NEES position: mean / inside 95 % bounds",
            lambda m: (
                f"{fmt(_get(m, 'errors.nees2.mean'))} / "
                f"{pct(_get(m, 'errors.nees2.fraction_inside'))}"
            ),
        ),
        row(
            "NEES 4-state predicted as a peer predicts it: mean / inside",
            lambda m: (
                f"{fmt(_get(m, 'errors.peer_nees4.mean'))} / "
                f"{pct(_get(m, 'errors.peer_nees4.fraction_inside'))}"
            ),
        ),
        *(
            [row(
                "NEES 4-state of its own filter fed a matched sensor: mean / inside",
                lambda m: (
                    f"{fmt(_get(m, 'matched_sensor.nees4.mean'))} / "
                    f"{pct(_get(m, 'matched_sensor.nees4.fraction_inside'))}"
                ),
            )] if any(_get(m, "matched_sensor") for m in agents.values()) else []
        ),
        row(
            "grid mean var: median / last",
            lambda m: _pair(m, "grid_mean_var.median", "grid_mean_var_last"),
        ),
        row(
            "grid peak error, median (m; peaks with mu ≥ 0.5)",
            lambda m: (
                f"{fmt(_get(m, 'grid_peak_error_m.median'))} "
                f"(n = {_get(m, 'grid_peak_error_m.n') or 0})"
            ),
        ),
        row("own pose error, median (m)", lambda m: fmt(_get(m, "pose_error_m.median"))),
        row(
            "own heading error: median / p95 (deg)",
            lambda m: _pair(m, "pose.heading_error_deg.median", "pose.heading_error_deg.p95"),
        ),
        row(
            "own pose NEES (3 dof): mean / inside 95 % bounds",
            lambda m: (
                f"{fmt(_get(m, 'pose.nees3.mean'))} / "
                f"{pct(_get(m, 'pose.nees3.fraction_inside'))}"
            ),
        ),
        *(
            row(
                f"{kind} sightings of the target: NIS (2 dof) mean / inside 95 % bounds (n)",
                lambda m, kind=kind: (
                    f"{fmt(_get(m, f'detection_nis.{kind}.mean'))} / "
                    f"{pct(_get(m, f'detection_nis.{kind}.inside'))} "
                    f"({_get(m, f'detection_nis.{kind}.n') or 0})"
                ),
            )
            for kind in ("live", "placed")
        ),
        row(
            "searched ever (m²; share of the room)",
            lambda m: (
                f"{fmt(_get(m, 'coverage.searched_ever_m2'))} "
                f"({pct(_get(m, 'coverage.searched_ever_room_fraction'))})"
            ),
        ),
        row(
            "datagrams sent (per s)",
            lambda m: f"{_get(m, 'wire.tx_datagrams')} ({fmt(_get(m, 'wire.tx_datagrams_per_s'))})",
        ),
        row(
            "bytes sent (per s)",
            lambda m: f"{_get(m, 'wire.tx_bytes')} ({fmt(_get(m, 'wire.tx_bytes_per_s'), 4)})",
        ),
        row("datagrams received and accepted", lambda m: fmt(_get(m, "wire.rx_accepted"))),
        row("datagrams received and rejected", lambda m: fmt(_get(m, "wire.rx_rejected_total"))),
    ]


def _wire_rows(agents: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    kinds = sorted({k for m in agents.values() for k in (_get(m, "wire.tx_by_kind") or {})})
    rows = []
    for kind in kinds:
        cells = []
        for m in agents.values():
            entry = (_get(m, "wire.tx_by_kind") or {}).get(kind)
            cells.append(f"{entry['datagrams']} / {entry['bytes']}" if entry else "–")
        rows.append([kind, *cells])
    return rows


def _latency_lines(lat: Mapping[str, Any]) -> list[str]:
    out = ["## Latency budget", ""]
    stages = lat.get("stages") or {}
    if stages:
        out.append(f"Per-stage timestamps from {lat.get('stage_records')} records:")
        out.append("")
        out += table(
            ["stage", "n", "median (ms)", "p95 (ms)"],
            [[k, str(v["n"]), fmt(v["median_ms"]), fmt(v["p95_ms"])] for k, v in stages.items()],
        )
    else:
        out.append(
            "The agent logs carry no per-stage timestamps (" + ", ".join(STAGES) + "; "
            "camera mode), so there is no per-stage budget for this run."
        )
    derived = lat.get("derived") or {}
    if derived:
        out += ["", "Intervals derived from the events every run logs:", ""]
        out += table(
            ["interval", "n", "median (ms)", "p95 (ms)"],
            [[k, str(v["n"]), fmt(v["median_ms"]), fmt(v["p95_ms"])] for k, v in derived.items()],
        )
    return [*out, ""]


def rerun_table(rerun: Mapping[str, Any]) -> list[str]:
    """The re-run's comparison, recorded configuration against the variant, per agent (the
    report's table; ``stigmesh replay --fusion X`` prints it too)."""
    names = list((rerun.get("agents") or {}).keys())
    header = ["metric"] + [f"{n}: recorded config / variant" for n in names]
    late = f"after {SETTLE:.0f} s"
    specs = [
        (f"position error {late}, median (m)", "errors.position_error_after_settle_m.median"),
        (f"position error {late}, p95 (m)", "errors.position_error_after_settle_m.p95"),
        (f"track uncertainty {late}, median", "errors.uncertainty_after_settle.median"),
        ("NEES 4-state inside 95 % bounds", "errors.nees4.fraction_inside"),
        ("speed at detection within 10 %", "speed_at_detection.within_10_percent"),
        ("grid mean var, median", "grid_mean_var.median"),
        ("own pose held", "pose.held"),
        (f"own heading error {late}, p95 (deg)", "pose.heading_error_after_settle_deg.p95"),
        ("own heading NEES inside 95 % bounds", "pose.nees1.fraction_inside"),
        ("own heading NEES, mean (ideal 1)", "pose.nees1.mean"),
        ("own pose NEES inside 95 % bounds", "pose.nees3.fraction_inside"),
    ]
    rows = []
    for label, path in specs:
        cells = []
        for n in names:
            r = rerun["agents"][n]
            a, b = _get(r["recorded_config"], path), _get(r["variant"], path)
            if "fraction" in path or "within" in path or path == "pose.held":
                cells.append(f"{pct(a)} / {pct(b)}")
            else:
                cells.append(f"{fmt(a)} / {fmt(b)}")
        rows.append([label, *cells])
    return table(header, rows)


def _rerun_lines(rerun: Mapping[str, Any], figures: Mapping[str, Path]) -> list[str]:
    out = [
        "## Re-run with another configuration",
        "",
        "**Open loop.** Each agent's core was re-run on its recorded inputs, in the log's "
        "time: its own motion, its sightings and its peers' messages are as recorded, so "
        "the comparison shows what the core would have believed from the same inputs; "
        "it cannot show how a different belief would have changed where the robots drove "
        "or what the peers sent. The re-runs are sampled from the core after every tick "
        "(10 Hz), the recorded figures from the tracks the agent published (TRACK at 5 Hz "
        "and after detections), so compare the variant with the recorded-config re-run.",
        "",
    ]
    for name, r in (rerun.get("agents") or {}).items():
        changes = ", ".join(f"`{k}`: {v[0]} → {v[1]}" for k, v in r["changes"].items())
        out.append(f"- **{name}**: {changes or 'no setting changed'}.")
        rec, rep = r["recorded_digests"], r["reproduced_digests"]
        faithful = (
            "The recorded configuration reproduces every recorded belief digest"
            if rec and rep == rec
            else f"The recorded configuration reproduces {rep} of {rec} recorded belief "
            "digests (the code or a setting the log does not record has changed since the "
            "run, so the re-run is compared with its own recorded-config re-run)"
        )
        out.append(f"  {faithful}; the variant's beliefs differ at "
                   f"{r['variant_digests_differing']} of its belief records.")  # fmt: skip
        for which, errs in (r.get("input_errors") or {}).items():
            if errs.get("count"):
                listed = "; ".join(f"{k} (×{n})" for k, n in errs["by_kind"].items())
                out.append(
                    f"  In the {which.replace('_', ' ')} re-run, {errs['count']} input(s) raised "
                    f"in the core and were skipped, as the running agent skips them: {listed}."
                )
    out.append("")
    out += rerun_table(rerun)
    if "rerun" in figures:
        out += ["", f"![re-run]({figures['rerun'].name})", "", FIGURE_CAPTIONS["rerun"]]
    return [*out, ""]


def _fault_lines(faults: Mapping[str, Any]) -> list[str]:
    """The faults section: the windows shaded on the figures, who refused whom and when."""
    if not faults:
        return []
    out = ["## Faults and refusals", ""]
    windows = faults.get("windows") or []
    if windows:
        out += [f"Fault windows (from {faults.get('windows_from')}; shaded on every plot over "
                "time):", ""]
        out += table(["from (s)", "to (s)", "kind", "what"],
                     [[fmt(w["start_s"]), fmt(w["end_s"]), w["kind"], f"`{w['what']}`"]
                      for w in windows])
    else:
        out.append(f"No fault was set in this run (from {faults.get('windows_from')}).")
    out.append("")
    for liar in faults.get("liars") or []:
        out += [f"**{liar}** lied: the trajectories figure shows what it published (its TRACK "
                "datagrams) apart from its private track (its belief records), and the error "
                "figure the error of each.", ""]
    firsts = faults.get("first_refused_s") or {}
    counts = faults.get("refused_tracks") or {}
    refused = [(pair, t) for pair, t in firsts.items() if t is not None]
    if refused:
        out += ["Peers refused (receiver → peer: first refused, peer TRACKs refused):", ""]
        out += table(["receiver → peer", "first refused (s)", "TRACKs refused"],
                     [[pair.replace("->", " → "), fmt(t), str(counts.get(pair, 0))]
                      for pair, t in sorted(refused, key=lambda p: p[1])])
    else:
        out.append("No agent refused a peer.")
    return [*out, ""]


def render(
    metrics: Mapping[str, Any], figures: Mapping[str, Path], arena_note: str | None = None
) -> str:
    run = metrics["run"]
    agents = metrics["agents"]
    names = list(agents)
    out = [f"# Replay of `{run['dir']}`", ""]
    facts = [
        f"- duration: {fmt(run['duration_s'])} s; agents: {', '.join(names) or 'none'}",
        f"- arena: {run.get('arena') or 'not recorded'}; sensing: {run.get('sensing') or '–'}; "
        f"seed: {fmt(run.get('seed'))}",
        f"- ground truth: {'yes' if run['ground_truth'] else 'no'}",
    ]
    if arena_note:
        facts.append(f"- arena for room and re-run: {arena_note}")
    out += facts
    out += [f"- note: {n}" for n in run.get("notes") or []]
    out.append("")
    if names:
        out += ["## Summary", ""]
        out += table(["", *names], _agent_rows(agents))
        b4, b2 = nees_bounds(4), nees_bounds(2)
        out += [
            "",
            f"Errors are on a common {run['time_step_s']:g} s time base: each agent's newest "
            "published track, predicted to that time, against the truth interpolated to it. "
            "NEES judges that newest published state at its own time, against the truth "
            "then (the agent's own filter); the peer row judges its prediction (constant "
            "velocity with the agent's `accel_psd`, as a peer predicts a received track). "
            f"NEES bounds (two-sided 95 %): 4-state [{b4[0]:.2f}, {b4[1]:.2f}], position "
            f"[{b2[0]:.3f}, {b2[1]:.2f}]. Coverage counts cells with var below "
            f"{fmt(_get(agents[names[0]], 'coverage.var_below'))} "
            f"(over the {_get(agents[names[0]], 'coverage.over')}).",
            "",
        ]
    swarm = metrics.get("swarm") or {}
    pair_rows = []
    for pair, a in (swarm.get("agreement_m") or {}).items():
        ov = (swarm.get("coverage_overlap") or {}).get(pair, {})
        pair_rows.append(
            [
                pair,
                _pair(a, "after_settle.median", "after_settle.p95"),
                pct(a.get("time_both_tracking_fraction")),
                fmt(_get(ov, "jaccard_now.median")),
                fmt(ov.get("ever_jaccard")),
            ]
        )
    if pair_rows:
        out += ["## Between agents", ""]
        out += table(
            [
                "pair",
                f"track distance after {SETTLE:.0f} s: median / p95 (m)",
                "time both tracking",
                "searched-cell overlap now (median)",
                "ever",
            ],
            pair_rows,
        )
        out += [
            "",
            f"First detection by any agent: {fmt(swarm.get('time_to_first_detection_s'))} s "
            f"after the start. Area searched by any agent: "
            f"{fmt(swarm.get('searched_ever_by_any_m2'))} m²"
            + (
                f" ({pct(swarm['searched_ever_by_any_room_fraction'])} of the room)."
                if swarm.get("searched_ever_by_any_room_fraction") is not None
                else "."
            ),
            "",
        ]
    if names:
        out += ["## On the wire", "", "Datagrams / bytes sent, by kind:", ""]
        out += table(["kind", *names], _wire_rows(agents))
        out.append("")
        faults = metrics.get("faults") or {}
        rejected = {n: (_get(faults, "rejected") or {}).get(n, _get(m, "wire.rx_rejected") or {})
                    for n, m in agents.items()}
        if any(rejected.values()):
            out += ["Received datagrams rejected, by reason (`reputation`: a peer's TRACK "
                    "refused because the receiver distrusts its sender):", ""]
            reasons = sorted({r for v in rejected.values() for r in v})
            out += table(
                ["reason", *names], [[r, *(str(rejected[n].get(r, 0)) for n in names)]
                                     for r in reasons]
            )  # fmt: skip
        else:
            out.append("No received datagram was rejected, and no peer was refused.")
        out.append("")
    out += _fault_lines(metrics.get("faults") or {})
    out += ["## Figures", ""]
    for key, path in figures.items():
        if key == "rerun":
            continue
        caption = FIGURE_CAPTIONS.get(key)
        if key.startswith("grid"):
            caption = (
                "Grid snapshot: mu (top) and var (bottom) of each agent side by side, in the "
                "world frame; the green cross is the target, dots are the cars (truth)."
            )
        out += [f"![{key}]({path.name})", "", caption or "", ""]
    out += _latency_lines(metrics.get("latency") or {})
    if metrics.get("rerun"):
        out += _rerun_lines(metrics["rerun"], figures)
    return "\n".join(out).rstrip() + "\n"


def write_report(
    an: Analysis,
    out: Path,
    figures: Mapping[str, Path],
    *,
    rerun: Mapping[str, Any] | None = None,
    arena_note: str | None = None,
    faults: Faults | None = None,
) -> tuple[Path, Path]:
    """Write ``report.md`` and ``metrics.json`` into ``out``; return their paths."""
    metrics = run_metrics(an)
    metrics["run"]["arena_used"] = arena_note
    if faults is not None:
        metrics["faults"] = faults_summary(faults, an.t_start)
    if rerun is not None:
        metrics["rerun"] = rerun
    metrics = jsonable(metrics)
    json_path = out / "metrics.json"
    json_path.write_text(json.dumps(metrics, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    md_path = out / "report.md"
    md_path.write_text(render(metrics, figures, arena_note), encoding="utf-8")
    return md_path, json_path
