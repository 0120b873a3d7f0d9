"""The evidence: the phase's claims measured, ``python -m tools.evidence [--quick]``.

Runs the experiments of docs/evidence.md in lockstep (parallel on the cores)
and, for the agreement between the modes, as real processes; measures every
run with ``tools.replay`` (and the cameras' footprints from the truth); writes
``docs/evidence.md``, ``docs/evidence.json`` and the figures under
``docs/evidence/``. Every lockstep run is deterministic: the command named in
each row reproduces its numbers bit for bit. Numbers are reported as measured,
misses included; nothing here is tuned to pass.

1. Fusion improves accuracy: fusion "none" (no sharing) against "ci".
2. CI is consistent (NEES inside its 95 % bounds), naive fusion is overconfident.
3. Stigmergy and coverage: a target hidden at the start; sharing against not.
4. Graceful degradation: error against inbound loss; re-convergence after a partition.
5. A Byzantine peer, with and without reputation.
6. The seed's own figures on its own setup.
7. Lockstep against real processes on the default scenario.

``--quick`` runs fewer seeds, shorter runs and one short real run (a smoke test
of the whole pipeline in a couple of minutes; its numbers are not the evidence)
and writes to ``runs/evidence-quick/`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import pickle
import random
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tools.experiments.measure import analysis_of, camera_footprints, trial_metrics
from tools.experiments.progress import progress_bar
from tools.experiments.scenario import Scenario
from tools.experiments.scenario_file import load_scenario
from tools.experiments.sweep import Trial, build

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
SETTLE = 20.0
ACCURATE = 0.5  # m: a track this close to the truth counts as knowing where the target is
BYZANTINE_ONSET = 20.0
PARTITION = (20.0, 40.0)
FIGURE_DPI = 110
SMOOTH = 10  # samples (1 s) of rolling median on the time-series figures
FLOOR = 1e-3  # m: the bottom of the log-scale figures


@dataclass(frozen=True)
class Plan:
    seeds: int  # for experiments 1-3
    few_seeds: int  # for 4, 5 and the real runs of 7
    duration: float | None  # None: as the scenario files say (60 s)
    losses: tuple[float, ...]
    real_runs: int
    real_duration: float | None


FULL = Plan(10, 5, None, (0.0, 0.25, 0.5, 0.75, 0.9), 5, None)
QUICK = Plan(2, 1, 40.0, (0.0, 0.5, 0.9), 1, 30.0)


# ---------------------------------------------------------------- one run


@dataclass(frozen=True)
class Job:
    key: str
    scenario: str  # file under scenarios/
    seed: int
    fusion: str | None = None
    loss: float = 0.0
    duration: float | None = None
    search: bool = False  # measure the camera footprints of the search phase
    liar: str | None = None  # the Byzantine agent, whose fusion by the others is traced

    @property
    def trial(self) -> Trial:
        point = (("loss", self.loss),) if self.loss else ()
        return Trial(str(SCENARIOS / self.scenario), self.seed, self.fusion, point)

    def scenario_of(self) -> Scenario:
        s = build(self.trial)
        return replace(s, duration=self.duration) if self.duration is not None else s


def _series(an: Any) -> dict[str, Any]:
    """Per agent: run-relative times, position error, uncertainty; agreement per pair."""
    out: dict[str, Any] = {"t": (an.times - an.t_start).round(3).tolist(), "err": {}, "unc": {},
                           "agree": {}}
    for name, ag in an.agents.items():
        if ag.errors is not None:
            out["err"][name] = ag.errors.pos_err.tolist()
        out["unc"][name] = ag.series.uncertainty.tolist()
    for (a, b), d in an.agreement.items():
        out["agree"][f"{a}-{b}"] = d.tolist()
    return out


def _search_metrics(an: Any, arena: Any, first: float | None) -> dict[str, Any]:
    """Camera coverage while nobody has seen the target, and when everyone knows where it is."""
    names = sorted(an.agents)
    end = first if first is not None else an.run.t_end - an.t_start
    times = an.t_start + np.arange(0.0, end, 0.5)
    sets = {n: set(np.concatenate(camera_footprints(an.truth, arena, n, times)).tolist())
            if times.size else set() for n in names}
    union = set().union(*sets.values())
    overlap = None
    if len(names) == 2 and union:
        overlap = len(sets[names[0]] & sets[names[1]]) / len(union)
    cells = math.ceil(arena.room.size_x / 0.1 - 1e-9) * math.ceil(arena.room.size_y / 0.1 - 1e-9)
    t15 = an.t_start + np.arange(0.0, 15.0, 0.5)
    seen15 = set().union(*(np.concatenate(camera_footprints(an.truth, arena, n, t15)).tolist()
                           for n in names))
    aware: dict[str, float | None] = {}
    rel = an.times - an.t_start
    for name in names:
        err = an.agents[name].errors.pos_err
        ok = np.flatnonzero(np.nan_to_num(err, nan=np.inf) <= ACCURATE)
        aware[name] = float(rel[ok[0]]) if ok.size else None
    known = [v for v in aware.values() if v is not None]
    return {
        "search_overlap": overlap,
        "search_union_fraction": len(union) / cells,
        "union_15s_fraction": len(seen15) / cells,
        "all_accurate_s": max(known) if len(known) == len(names) else None,
        "accurate_s": aware,
    }


def _liar_trace(an: Any, liar: str) -> dict[str, Any]:
    """When each honest agent stopped fusing the liar's TRACKs (after the onset)."""
    out: dict[str, Any] = {}
    for name, log in an.run.agents.items():
        if name == liar:
            continue
        events = [e for e in log.events("peer_track") if e.get("peer") == liar]
        after = [e for e in events if e["t"] - an.t_start >= BYZANTINE_ONSET]
        # TRACKs that carried new measurements: fused, or refused by reputation (the
        # ones with nothing new are skipped whoever sends them).
        after = [e for e in after if e.get("outcome", "fused") in ("fused", "distrusted")]
        refused = [e["t"] - an.t_start for e in after if e.get("outcome") == "distrusted"]
        out[name] = {
            "tracks_after_onset": len(after),
            "fused_after_onset": sum(1 for e in after if e.get("fused")),
            "first_refused_s": refused[0] if refused else None,
            "score_end": after[-1].get("score") if after else None,
        }
    return out


def run_job(job: Job, keep: str | None = None) -> dict[str, Any]:
    """Run one job in lockstep and measure it; an exception becomes an ``error``."""
    from tools.experiments.lockstep import run_scenario

    began = time.perf_counter()
    out: dict[str, Any] = {"key": job.key, "job": job}
    try:
        scenario = job.scenario_of()
        with tempfile.TemporaryDirectory(prefix="stigmesh-evidence-") as tmp:
            run_dir = Path(tmp) if keep is None else Path(keep) / job.key
            run_dir.mkdir(parents=True, exist_ok=True)
            run_scenario(scenario, run_dir)
            an = analysis_of(run_dir, scenario.arena)
            m = trial_metrics(run_dir, scenario.arena, an)
            out["metrics"] = m
            out["series"] = _series(an)
            if job.search:
                m.update(_search_metrics(an, scenario.arena, m["first_detection_s"]))
            if job.liar is not None:
                out["liar"] = _liar_trace(an, job.liar)
    except Exception:
        out["error"] = traceback.format_exc(limit=8)
    out["seconds"] = time.perf_counter() - began
    return out


def run_jobs(jobs: Sequence[Job], workers: int, keep: str | None) -> dict[str, dict[str, Any]]:
    began = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(run_job, job, keep): job for job in jobs}
        for n, future in enumerate(as_completed(futures), start=1):
            result = future.result()
            results[result["key"]] = result
            if "error" in result:
                print(f"\n{result['key']} FAILED:\n{result['error']}", file=sys.stderr)
            print("\r" + progress_bar(n, len(jobs), began), end="", flush=True)
    print(flush=True)
    return results


# ---------------------------------------------------------------- statistics


def ms(values: Iterable[float | None], fmt: str = "{:.3f}") -> str:
    """``mean ± std (n)`` of the values that exist."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return "–"
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    return f"{fmt.format(statistics.fmean(v))} ± {fmt.format(sd)}"


def vals(results: Sequence[Mapping[str, Any]], key: str) -> list[float | None]:
    return [r["metrics"].get(key) if "metrics" in r else None for r in results]


def paired_p(a: Sequence[float | None], b: Sequence[float | None]) -> float | None:
    """Two-sided Wilcoxon signed-rank p for paired values (same seeds); None if too few."""
    from scipy.stats import wilcoxon

    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    diffs = [x - y for x, y in pairs]
    if len(pairs) < 5 or all(d == 0 for d in diffs):
        return None
    return float(wilcoxon([p[0] for p in pairs], [p[1] for p in pairs]).pvalue)


def unpaired_p(a: Sequence[float | None], b: Sequence[float | None]) -> float | None:
    from scipy.stats import mannwhitneyu

    x = [v for v in a if v is not None]
    y = [v for v in b if v is not None]
    if len(x) < 2 or len(y) < 2:
        return None
    return float(mannwhitneyu(x, y, alternative="two-sided").pvalue)


def fp(p: float | None) -> str:
    return "–" if p is None else f"{p:.3g}"


def rolling_median(x: np.ndarray, n: int) -> np.ndarray:
    out = np.full(x.size, np.nan)
    for k in range(x.size):
        w = x[max(0, k - n + 1): k + 1]
        w = w[np.isfinite(w)]
        if w.size:
            out[k] = np.median(w)
    return out


def recovered_after(
    t: np.ndarray, excess: np.ndarray, start: float, hold: float = 2.0
) -> float | None:
    """Seconds from ``start`` to the last time ``excess`` > 0 (0.0 if never): from then on
    it stays <= 0 to the end of the run. None when it is still > 0 within the last ``hold``
    seconds (not recovered by the end). NaN counts as > 0."""
    after = t >= start
    bad = after & ~(np.nan_to_num(excess, nan=np.inf) <= 0.0)
    if not bad.any():
        return 0.0
    last = float(t[np.flatnonzero(bad)[-1]])
    if last > float(t[-1]) - hold:
        return None
    return max(0.0, last - start)


# ---------------------------------------------------------------- the experiments


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def md(self) -> str:
        out = [f"## {self.title}", "", *self.text, ""]
        for name, caption in self.figures:
            out += [f"![{caption}](evidence/{name})", "", f"*{caption}*", ""]
        return "\n".join(out)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, figdir: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(figdir / name, dpi=FIGURE_DPI)
    _plt().close(fig)
    return name


def _mean_curve(results: Sequence[Mapping[str, Any]], pick: Callable[[Mapping[str, Any]],
                                                                      list[np.ndarray]]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per time, the median over runs (and over the arrays ``pick`` returns per run)."""
    rows = []
    t = None
    for r in results:
        if "series" not in r:
            continue
        tt = np.asarray(r["series"]["t"])
        t = tt if t is None or tt.size < t.size else t
        rows += pick(r)
    if t is None or not rows:
        return np.zeros(0), np.zeros(0)
    stack = np.vstack([np.asarray(x[: t.size], dtype=float) for x in rows])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a time where no run has a value
        curve = np.nanmedian(stack, axis=0)
    return t, rolling_median(curve, SMOOTH)


def exp_fusion(res: dict[str, dict[str, Any]], seeds: list[int], figdir: Path) -> Section:
    s = Section("1. Fusion improves accuracy")
    ci = [res[f"default-ci-{k}"] for k in seeds]
    none = [res[f"default-none-{k}"] for k in seeds]
    e_ci, e_none = vals(ci, "err_after_20_m"), vals(none, "err_after_20_m")
    wins = sum(1 for a, b in zip(e_ci, e_none, strict=True) if a is not None and b is not None
               and a < b)
    peak_ci = [_grid_peak(r) for r in ci]
    peak_none = [_grid_peak(r) for r in none]
    s.text += [
        "Two robots on the default scenario (the two-car room, target orbiting at 1.0 m/s), "
        f"{len(seeds)} seeds. *Individual*: fusion `none`, each robot keeps its own grid and "
        "track and fuses nothing it receives (the no-sharing baseline). *Fused*: covariance "
        "intersection (`ci`). Errors are each agent's track against the ground truth, median "
        "over the run after 20 s, then averaged over the two agents; mean ± std over seeds. "
        "The grid peak error is the distance from each agent's grid peak cell (mu ≥ 0.5) to the "
        "target, median over the run.",
        "",
        "| rule | median track error after 20 s (m) | p-value (paired, vs none) | grid peak "
        "error (m) | command |",
        "|---|---|---|---|---|",
        f"| none (individual) | {ms(e_none)} | – | {ms(peak_none)} | "
        f"`stigmesh sweep scenarios/default.toml --seeds {len(seeds)} --fusion none` |",
        f"| ci (fused) | {ms(e_ci)} | {fp(paired_p(e_ci, e_none))} | {ms(peak_ci)} | "
        f"`stigmesh sweep scenarios/default.toml --seeds {len(seeds)} --fusion ci` |",
        "",
        f"Fused beats individual on {wins} of {len(seeds)} seeds (paired by seed: the same "
        "world, noise and target for both rules).",
    ]
    s.data = {"ci": e_ci, "none": e_none, "wins": wins, "peak_ci": peak_ci,
              "peak_none": peak_none}
    plt = _plt()
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
    for a, b in zip(e_none, e_ci, strict=True):
        if a is not None and b is not None:
            ax[0].plot([0, 1], [a, b], "-o", color="0.6" if b < a else "tab:red", lw=1)
    ax[0].set_xticks([0, 1], ["none (individual)", "ci (fused)"])
    ax[0].set_ylabel("median track error after 20 s (m)")
    ax[0].set_yscale("log")
    ax[0].set_title("per seed")
    t, m_none = _mean_curve(none, lambda r: list(r["series"]["err"].values()))
    t2, m_ci = _mean_curve(ci, lambda r: list(r["series"]["err"].values()))
    ax[1].plot(t, m_none, label="none (individual)")
    ax[1].plot(t2, m_ci, label="ci (fused)")
    ax[1].set_yscale("log")
    ax[1].set_xlabel("time (s)")
    ax[1].set_ylabel("track error (m), median over seeds and agents", fontsize=8)
    ax[1].legend()
    s.figures.append((_save(fig, figdir, "fusion.png"),
                      "Track error of individual (no sharing) and fused (CI) robots."))
    return s


def _grid_peak(r: Mapping[str, Any]) -> float | None:
    return r.get("metrics", {}).get("grid_peak_m")


def exp_consistency(res: dict[str, dict[str, Any]], seeds: list[int], figdir: Path) -> Section:
    s = Section("2. Covariance intersection is consistent; naive fusion is overconfident")
    ci = [res[f"default-ci-{k}"] for k in seeds]
    naive = [res[f"default-naive-{k}"] for k in seeds]
    rows = []
    for label, runs in (("ci", ci), ("naive", naive)):
        n4, n2 = vals(runs, "nees4_inside"), vals(runs, "nees2_inside")
        rows.append((label, runs, n4, n2, vals(runs, "nees4_mean"), vals(runs, "err_after_20_m")))
    ci_n4 = [v for v in rows[0][2] if v is not None]
    ci_n2 = [v for v in rows[0][3] if v is not None]
    s.text += [
        f"The same {len(seeds)} seeds of the default scenario with `ci` and with `naive` "
        "(information-form fusion that treats peers as independent). NEES is the track's "
        "normalised estimation error squared against the truth, on the 10 Hz time base over "
        "the whole run; the fraction of time it lies inside the two-sided 95 % χ² bounds "
        "(4 dof: [0.48, 11.1]; position, 2 dof: [0.05, 7.38]); a consistent filter is inside "
        "about 95 % of the time and its mean NEES is the dof (4 or 2). Mean ± std over seeds "
        "(and agents).",
        "",
        "| rule | NEES4 inside 95 % bounds | NEES4 below / above | NEES2 inside | NEES2 below "
        "/ above | mean NEES4 (ideal 4) | median error after 20 s (m) | command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, runs, n4, n2, mean4, err in rows:
        tails = [f"{ms(vals(runs, f'{k}_below'), '{:.3f}')} / "
                 f"{ms(vals(runs, f'{k}_above'), '{:.3f}')}" for k in ("nees4", "nees2")]
        s.text.append(
            f"| {label} | {ms(n4, '{:.3f}')} | {tails[0]} | {ms(n2, '{:.3f}')} | {tails[1]} | "
            f"{ms(mean4, '{:.2f}')} | {ms(err)} | `stigmesh sweep scenarios/default.toml "
            f"--seeds {len(seeds)} --fusion {label}` |"
        )
    above = [v for v in vals(rows[0][1], "nees4_above") if v is not None]
    below = [v for v in vals(rows[0][1], "nees4_below") if v is not None]
    verdict = []
    if ci_n4:
        m4, m2 = statistics.fmean(ci_n4), statistics.fmean(ci_n2) if ci_n2 else math.nan
        verdict.append(
            f"With CI the 4-state NEES is inside its bounds {100 * m4:.1f} % of the time on "
            f"average (worst seed {100 * min(ci_n4):.1f} %): "
            + ("the 90 % target is met." if m4 >= 0.9 else
               f"the 90 % target is MISSED by {100 * (0.9 - m4):.1f} points.")
            + f" The position NEES is inside {100 * m2:.1f} % (worst seed "
            f"{100 * min(ci_n2):.1f} %)"
            + (", above 90 %." if m2 >= 0.9 else f", {100 * (0.9 - m2):.1f} points short of 90 %.")
        )
    nv4 = [v for v in rows[1][2] if v is not None]
    nm = [v for v in rows[1][4] if v is not None]
    cm = [v for v in rows[0][4] if v is not None]
    if nv4 and nm and cm:
        verdict.append(
            f"Naive fusion on the same runs: NEES4 inside {100 * statistics.fmean(nv4):.1f} %, "
            f"mean NEES4 {statistics.fmean(nm):.2f} against {statistics.fmean(cm):.2f} with CI "
            f"(paired p = {fp(paired_p(rows[1][2], rows[0][2]))} for the fraction inside). "
            + ("Naive is measurably overconfident here." if statistics.fmean(nm) >
               statistics.fmean(cm) and statistics.fmean(nv4) < statistics.fmean(ci_n4) else
               "On these runs naive is NOT measurably more overconfident than CI.")
        )
    if above and below:
        verdict.append(
            f"Where CI's 4-state NEES leaves its bounds, it is above the upper bound (error "
            f"larger than the covariance claims) {100 * statistics.fmean(above):.1f} % of the "
            f"time and below the lower bound (more cautious than needed) "
            f"{100 * statistics.fmean(below):.1f} % of the time."
        )
    s.text += ["", *verdict]
    s.data = {r[0]: {"nees4_inside": r[2], "nees2_inside": r[3], "nees4_mean": r[4],
                     "nees4_below": vals(r[1], "nees4_below"),
                     "nees4_above": vals(r[1], "nees4_above")} for r in rows}
    plt = _plt()
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
    for i, (label, _, n4, n2, *_rest) in enumerate(rows):
        ax[0].scatter([i] * len(n4), [v for v in n4], label=label)
        ax[1].scatter([i] * len(n2), [v for v in n2], label=label)
    for a, title in zip(ax, ("NEES4 (x, y, vx, vy)", "NEES2 (position)"), strict=True):
        a.axhline(0.95, ls=":", color="0.4")
        a.axhline(0.9, ls="--", color="tab:red", lw=0.8)
        a.set_xticks([0, 1], ["ci", "naive"])
        a.set_ylabel("fraction of time inside 95 % bounds")
        a.set_title(title)
    s.figures.append((_save(fig, figdir, "nees.png"),
                      "Per seed: fraction of time the NEES lies in its 95 % bounds (dotted: "
                      "0.95, dashed: the 0.9 target)."))
    return s


def exp_coverage(res: dict[str, dict[str, Any]], seeds: list[int], figdir: Path) -> Section:
    s = Section("3. Stigmergy and coverage")
    ci = [res[f"search-ci-{k}"] for k in seeds]
    none = [res[f"search-none-{k}"] for k in seeds]
    keys = [
        ("first_detection_s", "time to first detection (s)", "{:.1f}"),
        ("all_accurate_s", f"time until both tracks are within {ACCURATE} m (s)", "{:.1f}"),
        ("search_overlap", "overlap of camera footprints until the first detection", "{:.3f}"),
        ("union_15s_fraction", "room covered by either camera in the first 15 s", "{:.3f}"),
        ("footprint_overlap", "overlap per 10 s window, whole run", "{:.3f}"),
        ("err_after_20_m", "median track error after 20 s (m)", "{:.3f}"),
    ]
    s.text += [
        "`scenarios/search.toml`: an 8 m × 6 m room; the target wanders at 0.5 m/s (random "
        "walk) in the east end behind two crates taller than the cameras, so no camera sees it "
        "at the start (the cameras reach 3 m). The two cars start back to back at the west "
        "end, walnut looking north and hazel south, so that what one has already seen is what "
        "the other would look at next if it knew nothing of it. *Sharing*: `ci` (PATCH cells "
        "with their variance are fused, the navigator's exploration bonus sees the partner's "
        "searched cells as searched). *No sharing*: `none`. The overlap is |A∩B| / |A∪B| of the "
        "room cells each camera covered (range, field of view and line of sight past the "
        "crates, from the ground truth poses), over the search phase (start to the first "
        "detection by any robot); the per-window overlap is the same over 10 s windows of the "
        "whole run. The target path is the arena's (a fixed random walk); the seeds change the "
        "sensor noise, car clocks and boot states.",
        "",
        "| measure | no sharing (none) | sharing (ci) | paired p |",
        "|---|---|---|---|",
    ]
    data = {}
    for key, title, f in keys:
        a, b = vals(none, key), vals(ci, key)
        data[key] = {"none": a, "ci": b}
        missing = sum(1 for v in a if v is None), sum(1 for v in b if v is None)
        note = f" ({missing[0]}/{len(a)} never)" if missing[0] else ""
        note_b = f" ({missing[1]}/{len(b)} never)" if missing[1] else ""
        s.text.append(f"| {title} | {ms(a, f)}{note} | {ms(b, f)}{note_b} | "
                      f"{fp(paired_p(b, a))} |")
    identical = sum(
        1 for a, b in zip(data["first_detection_s"]["none"], data["first_detection_s"]["ci"],
                          strict=True) if a is not None and a == b
    )
    s.text += [
        "",
        f"Commands: `stigmesh sweep scenarios/search.toml --seeds {len(seeds)} --fusion "
        "ci,none`.",
        "",
        f"On {identical} of {len(seeds)} seeds the first detection happens at the very same "
        "instant with and without sharing, i.e. up to that moment both rules drove the same "
        "paths.",
    ]
    if identical * 2 >= len(seeds):
        s.text += [
            "",
            "Why (read from the decisions in the logs): the navigator's search utility "
            "(variance bonus minus 0.2 per metre of path minus 0.1 per radian of turn) picks "
            "the best cell near the robot, usually just beyond its own camera footprint; the "
            "partner's searched cells are rarely among those, so the shared variance, although "
            "fused, seldom changes a goal before the target is seen. Stigmergic spreading of "
            "the search is therefore NOT shown by this experiment.",
        ]
    aware_none, aware_ci = data["all_accurate_s"]["none"], data["all_accurate_s"]["ci"]
    pairs = [(a, b) for a, b in zip(aware_none, aware_ci, strict=True)
             if a is not None and b is not None]
    if pairs:
        gain = statistics.fmean(a - b for a, b in pairs)
        s.text += [
            "",
            f"After the first detection sharing does act: both robots hold an accurate track "
            f"{gain:.1f} s sooner on average with sharing (paired p = "
            f"{fp(paired_p(aware_ci, aware_none))}). Over the whole run the per-window footprint "
            "overlap is higher with sharing, because both robots then pursue the one target "
            "and look at the same place, while without sharing the robot that has not seen it "
            "keeps searching elsewhere.",
        ]
    s.data = data
    plt = _plt()
    fig, ax = plt.subplots(1, 3, figsize=(11, 3.4))
    for a, (key, title, _) in zip(ax, (keys[0], keys[1], keys[2]), strict=True):
        for i, label in enumerate(("none", "ci")):
            v = [x for x in data[key][label] if x is not None]
            a.scatter([i] * len(v), v)
        for x, y in zip(data[key]["none"], data[key]["ci"], strict=True):
            if x is not None and y is not None:
                a.plot([0, 1], [x, y], color="0.7", lw=0.8)
        a.set_xticks([0, 1], ["no sharing", "sharing (ci)"])
        a.set_title(title, fontsize=9)
    s.figures.append((_save(fig, figdir, "coverage.png"),
                      "Search scenario, per seed: first detection, time until both robots hold "
                      "an accurate track, and the overlap of what the cameras covered before "
                      "the first detection."))
    return s


def exp_degradation(res: dict[str, dict[str, Any]], plan: Plan, seeds: list[int],
                    figdir: Path) -> Section:
    s = Section("4. Graceful degradation")
    rows = []
    for loss in plan.losses:
        runs = [res[_loss_key(loss, k)] for k in seeds]
        failed = sum(1 for r in runs if "error" in r)
        rows.append((loss, runs, failed))
    none = [res[f"default-none-{k}"] for k in seeds]
    s.text += [
        f"**Packet loss.** The default scenario with `ci`, every agent dropping each inbound "
        f"datagram with probability p from t = 0 ({len(seeds)} seeds per level). The "
        "no-sharing baseline (`none`, no loss) is the level a robot reaches alone.",
        "",
        "| inbound loss | runs (crashed) | median track error after 20 s (m) | NEES2 inside | "
        "sent per agent (KB/s) | command |",
        "|---|---|---|---|---|---|",
    ]
    for loss, runs, failed in rows:
        s.text.append(
            f"| {loss:g} | {len(runs)} ({failed}) | {ms(vals(runs, 'err_after_20_m'))} | "
            f"{ms(vals(runs, 'nees2_inside'), '{:.3f}')} | "
            f"{ms(vals(runs, 'kbytes_per_s'), '{:.2f}')} | `stigmesh sweep "
            f"scenarios/default.toml --over loss={loss:g} --seeds {len(seeds)} --fusion ci` |"
        )
    s.text.append(f"| no sharing (none), no loss | {len(none)} | "
                  f"{ms(vals(none, 'err_after_20_m'))} | {ms(vals(none, 'nees2_inside'), '{:.3f}')}"
                  " | – | see experiment 1 |")
    crashed = sum(f for _, _, f in rows)
    s.text += ["", f"Runs that raised: {crashed} of {sum(len(r) for _, r, _ in rows)}."]
    # partitions
    s.text += [
        "",
        "**A 20 s partition that heals.** From t = 20 s to 40 s no datagram crosses between "
        "walnut and hazel. Two rooms: the default one (both robots see the target, so their "
        "beliefs hardly diverge), and the divided room (`scenarios/partition_divided.toml`: a "
        "wall lets only walnut see the target; hazel's track comes from walnut's messages "
        "alone). Re-convergence: from the heal, the time until the 1 s rolling median of the "
        "distance between the two agents' tracks is back within 1.5× its median of t = 10–20 s "
        "(plus 5 cm) for good (to the end of the run); the same for hazel's error against the "
        "truth.",
        "",
        "| scenario | agreement before (m) | during (m) | re-converged after the heal (s) | "
        "hazel's error during (m) | hazel's error re-converged (s) | command |",
        "|---|---|---|---|---|---|---|",
    ]
    part_data: dict[str, Any] = {}
    plt = _plt()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    for i, scen in enumerate(("partition", "partition_divided")):
        runs = [res[f"{scen}-{k}"] for k in seeds[: plan.few_seeds]]
        stats = [_partition_stats(r) for r in runs if "series" in r]
        part_data[scen] = stats
        before = [x["agree_before"] for x in stats]
        during = [x["agree_during"] for x in stats]
        rec = [x["agree_back_s"] for x in stats]
        herr = [x["hazel_err_during"] for x in stats]
        hrec = [x["hazel_back_s"] for x in stats]
        never = sum(1 for v in rec if v is None)
        s.text.append(
            f"| {scen} | {ms(before)} | {ms(during)} | {ms(rec, '{:.1f}')}"
            + (f" ({never} never)" if never else "")
            + f" | {ms(herr)} | {ms(hrec, '{:.1f}')} | `stigmesh run --lockstep "
            f"scenarios/{scen}.toml --seed N` (N = {seeds[0]}..{seeds[plan.few_seeds - 1]}) |"
        )
        t, agree = _mean_curve(runs, lambda r: list(r["series"]["agree"].values()))
        t2, herr_c = _mean_curve(runs, lambda r: [r["series"]["err"]["hazel"]])
        ax[i].plot(t, agree, label="distance between the tracks")
        ax[i].plot(t2, herr_c, label="hazel's error")
        ax[i].axvspan(*PARTITION, color="0.9")
        ax[i].set_yscale("log")
        ax[i].set_ylim(bottom=FLOOR)
        ax[i].set_title(scen)
        ax[i].set_xlabel("time (s)")
        ax[i].set_ylabel("m (median over seeds)")
        ax[i].legend(fontsize=8)
    s.figures.append((_save(fig, figdir, "partition.png"),
                      "Partition from 20 s to 40 s (grey): the distance between the agents' "
                      "tracks and hazel's error, median over seeds, 1 s rolling median."))
    fig, ax = plt.subplots(figsize=(5, 3.4))
    xs = [loss for loss, _, _ in rows]
    mean = [statistics.fmean([v for v in vals(r, "err_after_20_m") if v is not None] or [math.nan])
            for _, r, _ in rows]
    sd = [statistics.stdev(v) if len(v := [x for x in vals(r, "err_after_20_m")
                                           if x is not None]) > 1 else 0.0 for _, r, _ in rows]
    ax.errorbar(xs, mean, yerr=sd, fmt="-o", label="ci, inbound loss")
    nv = [v for v in vals(none, "err_after_20_m") if v is not None]
    if nv:
        ax.axhline(statistics.fmean(nv), ls="--", color="tab:red", label="no sharing (none)")
    ax.set_xlabel("inbound loss probability")
    ax.set_ylabel("median track error after 20 s (m)")
    ax.legend()
    s.figures.append((_save(fig, figdir, "loss.png"),
                      "Track error against the inbound loss rate (mean ± std over seeds)."))
    s.data = {"loss": {f"{loss:g}": vals(r, "err_after_20_m") for loss, r, _ in rows},
              "partition": part_data}
    return s


def _loss_key(loss: float, seed: int) -> str:
    return f"default-ci-{seed}" if loss == 0 else f"default-loss{loss:g}-{seed}"


def _partition_stats(r: Mapping[str, Any]) -> dict[str, Any]:
    t = np.asarray(r["series"]["t"])
    agree = np.asarray(next(iter(r["series"]["agree"].values())), dtype=float)
    herr = np.asarray(r["series"]["err"]["hazel"], dtype=float)
    out: dict[str, Any] = {}
    for label, x in (("agree", agree), ("hazel", herr)):
        before = x[(t >= 10) & (t < PARTITION[0])]
        during = x[(t >= PARTITION[0]) & (t < PARTITION[1])]
        level = float(np.nanmedian(before)) if np.isfinite(before).any() else math.nan
        limit = 1.5 * level + 0.05
        back = recovered_after(t, rolling_median(x, 10) - limit, PARTITION[1])
        key = "agree" if label == "agree" else "hazel_err"
        out[f"{key}_before"] = level
        out[f"{key}_during"] = float(np.nanmedian(during)) if np.isfinite(during).any() else None
        out["agree_back_s" if label == "agree" else "hazel_back_s"] = back
    return out


def exp_byzantine(res: dict[str, dict[str, Any]], seeds: list[int], figdir: Path) -> Section:
    s = Section("5. A Byzantine peer")
    honest = ("walnut", "hazel")
    variants = (("three_agents", "fault-free"), ("byzantine", "liar, reputation on"),
                ("byzantine_norep", "liar, reputation off"))
    s.text += [
        "`scenarios/byzantine.toml`: three agents in the three-car room (target on a waypoint "
        "loop at 1.0 m/s); from t = 20 s pecan broadcasts every TRACK and PATCH moved by "
        "(2, 0) m, its own belief staying honest. The honest agents are walnut and hazel. "
        "Fault-free level L: the honest agent's median error over t = 30–60 s in the same "
        "seed without the liar (`scenarios/three_agents.toml`). With the liar, M: its median "
        "error over t = 30–60 s (from 10 s after the onset). Recovered within 10 s when "
        "M ≤ 1.2 L. Recovery time: from the onset to the last moment the 2 s rolling median of "
        "the error exceeds 1.2× the fault-free run's 2 s rolling median at the same time (plus "
        "2 cm); after it the error stays within that bound to the end of the run (\"never\": "
        "still above it in the run's last 2 s).",
        "",
        "| variant | honest error t = 30–60 s (m) | M ≤ 1.2 L (agent-seeds) | recovery time (s) | "
        "liar's TRACKs fused after onset | first refused (s) | command |",
        "|---|---|---|---|---|---|---|",
    ]
    base = {k: res[f"three_agents-{k}"] for k in seeds}
    data: dict[str, Any] = {}
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for scen, label in variants:
        runs = {k: res[f"{scen}-{k}"] for k in seeds}
        late, ok, rec, fused, refused, total = [], 0, [], [], [], 0
        for k, r in runs.items():
            if "series" not in r or "series" not in base[k]:
                continue
            t = np.asarray(r["series"]["t"])
            tb = np.asarray(base[k]["series"]["t"])
            for name in honest:
                err = np.asarray(r["series"]["err"][name], dtype=float)
                berr = np.asarray(base[k]["series"]["err"][name], dtype=float)
                n = min(t.size, tb.size)
                m = float(np.nanmedian(err[(t >= 30)]))
                level = float(np.nanmedian(berr[(tb >= 30)]))
                late.append(m)
                total += 1
                ok += m <= 1.2 * level
                if scen != "three_agents":
                    limit = 1.2 * rolling_median(berr[:n], 20) + 0.02
                    excess = rolling_median(err[:n], 20) - limit
                    rec.append(recovered_after(t[:n], excess, BYZANTINE_ONSET))
                if "liar" in r and name in r["liar"]:
                    fused.append(r["liar"][name]["fused_after_onset"] /
                                 max(1, r["liar"][name]["tracks_after_onset"]))
                    refused.append(r["liar"][name]["first_refused_s"])
        never = sum(1 for v in rec if v is None)
        cmd = f"`stigmesh run --lockstep scenarios/{scen}.toml --seed N`"
        s.text.append(
            f"| {label} | {ms(late)} | {ok}/{total} | "
            + ("–" if scen == "three_agents" else ms(rec, "{:.1f}")
               + (f" ({never} never)" if never else ""))
            + f" | {ms(fused, '{:.2f}') if fused else '–'} | "
            f"{ms([x - BYZANTINE_ONSET for x in refused if x is not None], '{:.1f}')}"
            + (f" ({sum(1 for x in refused if x is None)} never)" if refused and
               any(x is None for x in refused) else "")
            + f" | {cmd} (N = {seeds[0]}..{seeds[-1]}) |"
        )
        data[scen] = {"late": late, "ok": ok, "total": total, "recovery": rec, "fused": fused,
                      "refused": refused}
        t, curve = _mean_curve(list(runs.values()),
                               lambda r: [r["series"]["err"][n] for n in honest])
        ax.plot(t, curve, label=label)
    ax.axvline(BYZANTINE_ONSET, ls=":", color="0.3")
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("honest agents' track error (m), median")
    ax.legend(fontsize=8)
    s.figures.append((_save(fig, figdir, "byzantine.png"),
                      "Honest agents' error (median over seeds and the two honest agents, 1 s "
                      "rolling median); the liar starts at 20 s (dotted)."))
    s.text += ["", "Recovery time is counted from the onset (20 s); \"first refused\" is when "
               "an honest agent's reputation first refused one of the liar's TRACKs, after the "
               "onset; the fused share counts only TRACKs that carried new measurements."]
    on, off = data.get("byzantine", {}), data.get("byzantine_norep", {})
    if on.get("total"):
        met = on["ok"] == on["total"]
        s.text += ["", (
            f"Claim \"with reputation on, the honest agents' error returns to within 1.2× its "
            f"fault-free level within 10 s of the onset\": met for {on['ok']} of {on['total']} "
            f"honest agent-seeds ({'met' if met else 'NOT met'}). With reputation the honest "
            f"error over t = 30–60 s is {ms(on['late'])} m against {ms(off.get('late', []))} m "
            "without it and "
            f"{ms(data.get('three_agents', {}).get('late', []))} m with no liar at all."
        )]
    s.data = data
    return s


def exp_seed(res: dict[str, dict[str, Any]], seeds: list[int], figdir: Path) -> Section:
    s = Section("6. The seed's own figures on its own setup")
    ci = [res[f"default-ci-{k}"] for k in seeds]
    unc = vals(ci, "unc_below_0_15")
    speed = vals(ci, "speed_within_10")
    med = vals(ci, "err_after_20_m")
    lo, hi = [], []
    for r in ci:
        if "series" not in r:
            continue
        t = np.asarray(r["series"]["t"])
        for e in r["series"]["err"].values():
            x = np.asarray(e, dtype=float)[t >= SETTLE]
            x = x[np.isfinite(x)]
            if x.size:
                lo.append(float(np.percentile(x, 5)))
                hi.append(float(np.percentile(x, 95)))
    under = sum(1 for v in med if v is not None and v < 0.5)
    s.text += [
        "Two robots, target at 1.0 m/s (the default scenario), CI, the "
        f"{len(seeds)} seeds of experiment 1; command "
        f"`stigmesh sweep scenarios/default.toml --seeds {len(seeds)} --fusion ci`.",
        "",
        "| figure | the seed | ours | target |",
        "|---|---|---|---|",
        f"| track uncertainty trace(P)/4 after 20 s | stays in 0.05–0.15 | below 0.15 "
        f"{ms([100 * v for v in unc if v is not None], '{:.1f}')} % of the time | below 0.15 |",
        f"| speed at detections | within 10 % (0.97 and 1.10 m/s logged) | within 10 % at "
        f"{ms([100 * v for v in speed if v is not None], '{:.1f}')} % of accepted detections | "
        "within 10 % |",
        f"| position error | 0.4 to 3.0 m | 5th–95th percentile after 20 s: {ms(lo)} to "
        f"{ms(hi)} m | – |",
        f"| median error after 20 s | (not given) | {ms(med)} m; under 0.5 m on {under} of "
        f"{len(med)} seeds | under 0.5 m |",
    ]
    s.data = {"unc_below_0_15": unc, "speed_within_10": speed, "median": med, "p5": lo, "p95": hi}
    return s


def exp_modes(res: dict[str, dict[str, Any]], real: list[dict[str, Any]], seeds: list[int],
              figdir: Path) -> Section:
    s = Section("7. Lockstep against real processes")
    lock = [res[f"default-ci-{k}"] for k in seeds[: len(real)]]
    keys = [("err_after_20_m", "median track error after 20 s (m)", "{:.3f}"),
            ("kbytes_per_s", "sent per agent (KB/s)", "{:.2f}"),
            ("detections_per_s", "detections per agent per second", "{:.2f}"),
            ("nees2_inside", "NEES2 inside 95 % bounds", "{:.3f}"),
            ("first_detection_s", "first detection (s)", "{:.2f}")]
    s.text += [
        f"The default scenario, {len(real)} seeds each: in lockstep (one process, virtual "
        "time) and as real processes (the world and two agents, mDNS discovery, UDP on "
        "loopback, real time). The real runs' clock starts when the agents are launched, so "
        "their first second goes to process start-up. p: two-sided Mann–Whitney U.",
        "",
        "| measure | lockstep | real processes | p |",
        "|---|---|---|---|",
    ]
    data = {}
    for key, title, f in keys:
        a = vals(lock, key)
        b = [r["metrics"].get(key) if "metrics" in r else None for r in real]
        data[key] = {"lockstep": a, "real": b}
        s.text.append(f"| {title} | {ms(a, f)} | {ms(b, f)} | {fp(unpaired_p(a, b))} |")
    s.text += ["", "Commands: `stigmesh run --lockstep scenarios/default.toml --seed N` and "
               f"`stigmesh run scenarios/default.toml --seed N`, N = {seeds[0]}.."
               f"{seeds[len(real) - 1]}."]
    failed = [r for r in real if "error" in r]
    if failed:
        s.text.append(f"{len(failed)} real run(s) failed: " + "; ".join(
            r["error"].splitlines()[-1] for r in failed))
    s.data = data
    plt = _plt()
    fig, ax = plt.subplots(1, 3, figsize=(10, 3.2))
    for a, (key, title, _) in zip(ax, keys[:3], strict=True):
        for i, label in enumerate(("lockstep", "real")):
            v = [x for x in data[key][label] if x is not None]
            a.scatter([i] * len(v), v)
        a.set_xticks([0, 1], ["lockstep", "real"])
        a.set_title(title, fontsize=9)
    s.figures.append((_save(fig, figdir, "modes.png"),
                      "Default scenario, per seed: lockstep against real processes."))
    return s


# ---------------------------------------------------------------- real runs


def run_real_default(seed: int, duration: float | None, work: Path) -> dict[str, Any]:
    from tools.experiments.progress import Progress
    from tools.experiments.realrun import run_real

    out: dict[str, Any] = {"seed": seed}
    scenario = load_scenario(SCENARIOS / "default.toml").with_seed(seed)
    if duration is not None:
        scenario = replace(scenario, duration=duration)
    run_dir = work / f"real-default-{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    try:
        _, codes = run_real(scenario, run_dir, random.randint(30000, 40000),
                            Progress(scenario.duration, quiet=True, every=10.0))
        out["codes"] = codes
        out["metrics"] = trial_metrics(run_dir, scenario.arena)
    except Exception:
        out["error"] = traceback.format_exc(limit=6)
    return out


# ---------------------------------------------------------------- the whole


def jobs_for(plan: Plan) -> list[Job]:
    seeds = list(range(1, plan.seeds + 1))
    few = seeds[: plan.few_seeds]
    d = plan.duration
    jobs = []
    for k in seeds:
        for fusion in ("ci", "none", "naive"):
            jobs.append(Job(f"default-{fusion}-{k}", "default.toml", k, fusion, duration=d))
        for fusion in ("ci", "none"):
            jobs.append(Job(f"search-{fusion}-{k}", "search.toml", k, fusion, duration=d,
                            search=True))
    for k in few:
        for loss in plan.losses:
            if loss:
                jobs.append(Job(_loss_key(loss, k), "default.toml", k, "ci", loss, d))
        for scen in ("partition", "partition_divided"):
            jobs.append(Job(f"{scen}-{k}", f"{scen}.toml", k))  # the partition needs 60 s
        for scen in ("three_agents", "byzantine", "byzantine_norep"):
            jobs.append(Job(f"{scen}-{k}", f"{scen}.toml", k, duration=d, liar="pecan"))
    return jobs


def write(sections: Sequence[Section], out: Path, plan: Plan, *, quick: bool,
          measured: str, extra: dict[str, Any]) -> Path:
    md = out / "evidence.md"
    head = [
        "# Evidence",
        "",
        *(["**QUICK RUN** (`--quick`): few seeds and short runs, a smoke test of the "
           "pipeline; these numbers are not the evidence.", ""] if quick else []),
        "Written by `python -m tools.evidence" + (" --quick" if quick else "") + f"`: {measured}."
        " Every lockstep run is deterministic: the "
        "command in each row reproduces its numbers exactly. Errors are against the world's "
        "ground truth, measured by `tools.replay` from the run logs (tracks predicted to a "
        "10 Hz time base). \"After 20 s\" is run time. Mean ± std over seeds unless said; "
        "p-values are two-sided (Wilcoxon signed-rank when paired by seed).",
        "",
        "A note on what \"track error\" includes: an agent's track is counted wherever it "
        "holds one, including while it is only predicted after the target was lost; an agent "
        "drops its track after 6 s without any new measurement (its own or a peer's), and "
        "then nothing is counted until it has a track again. Those predicted stretches "
        "dominate the larger errors below.",
        "",
    ]
    text = "\n".join(head) + "\n" + "\n".join(s.md() for s in sections)
    md.write_text(text, encoding="utf-8")
    data = {"plan": plan.__dict__, "sections": {s.title: s.data for s in sections}, **extra}
    (out / "evidence.json").write_text(json.dumps(data, indent=1, default=str) + "\n",
                                       encoding="utf-8")
    return md


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.evidence", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a couple of minutes, not evidence")
    parser.add_argument("--out", type=Path, default=None,
                        help="where evidence.md and the figures go (default docs/, or "
                        "runs/evidence-quick/ with --quick)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="lockstep runs at once (default: the cores)")
    parser.add_argument("--no-real", action="store_true",
                        help="skip the real-process runs of experiment 7")
    parser.add_argument("--keep-runs", type=Path, default=None,
                        help="keep every lockstep run directory under this one")
    parser.add_argument("--reuse", action="store_true",
                        help="write the report from the last run's measurements (runs/evidence"
                        "[-quick].pickle) instead of running again")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    out: Path = args.out or (ROOT / "runs" / "evidence-quick" if args.quick else ROOT / "docs")
    figdir = out / "evidence"
    figdir.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    jobs = jobs_for(plan)
    print(f"evidence: {len(jobs)} lockstep runs on {args.jobs} worker(s)"
          + ("" if args.no_real else f", then {plan.real_runs} real run(s)"), flush=True)
    keep = str(args.keep_runs) if args.keep_runs is not None else None
    cache = ROOT / "runs" / ("evidence-quick.pickle" if args.quick else "evidence.pickle")
    if args.reuse:
        with cache.open("rb") as f:
            saved = pickle.load(f)  # our own file, written below by this tool
        res, real = saved[0], saved[1]
        measured = (saved[2] if len(saved) > 2 else "measured by an earlier run") + \
            f"; report redrawn {time.strftime('%Y-%m-%d %H:%M')}"
    else:
        res = run_jobs(jobs, args.jobs, keep)
        real = []
        if not args.no_real:
            work = ROOT / "runs" / ("evidence-quick-real" if args.quick else "evidence-real")
            for k in range(1, plan.real_runs + 1):
                print(f"evidence: real run {k}/{plan.real_runs} (seed {k})", flush=True)
                real.append(run_real_default(k, plan.real_duration or plan.duration, work))
        measured = (f"measured in {(time.perf_counter() - began) / 60:.1f} min on "
                    f"{os.cpu_count()} cores ({time.strftime('%Y-%m-%d %H:%M')})")
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("wb") as f:
            pickle.dump((res, real, measured), f)
    seeds = list(range(1, plan.seeds + 1))
    few = seeds[: plan.few_seeds]
    sections = [
        exp_fusion(res, seeds, figdir),
        exp_consistency(res, seeds, figdir),
        exp_coverage(res, seeds, figdir),
        exp_degradation(res, plan, few, figdir),
        exp_byzantine(res, few, figdir),
        exp_seed(res, seeds, figdir),
    ]
    if real:
        sections.append(exp_modes(res, real, seeds, figdir))
    failed = [k for k, r in res.items() if "error" in r]
    extra = {"failed_runs": failed, "seconds": {k: r["seconds"] for k, r in res.items()},
             "real": [{k: v for k, v in r.items() if k != "series"} for r in real]}
    md = write(sections, out, plan, quick=args.quick, measured=measured, extra=extra)
    print(f"evidence: wrote {md} ({len(failed)} failed run(s)) in "
          f"{(time.perf_counter() - began) / 60:.1f} min", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
