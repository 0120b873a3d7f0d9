"""Experiment 1. Fusion improves accuracy: fusion "none" (no sharing) against "ci"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.experiments.evidence.figures import mean_curve, pyplot, save
from tools.experiments.evidence.plan import Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fp, ms, paired_p, vals


def section(results: Results) -> Section:
    """Fusion improves accuracy: fusion "none" (no sharing) against "ci"."""
    res, seeds, figdir = results.lockstep, results.seeds, results.figdir
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
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
    for a, b in zip(e_none, e_ci, strict=True):
        if a is not None and b is not None:
            ax[0].plot([0, 1], [a, b], "-o", color="0.6" if b < a else "tab:red", lw=1)
    ax[0].set_xticks([0, 1], ["none (individual)", "ci (fused)"])
    ax[0].set_ylabel("median track error after 20 s (m)")
    ax[0].set_yscale("log")
    ax[0].set_title("per seed")
    t, m_none = mean_curve(none, lambda r: list(r["series"]["err"].values()))
    t2, m_ci = mean_curve(ci, lambda r: list(r["series"]["err"].values()))
    ax[1].plot(t, m_none, label="none (individual)")
    ax[1].plot(t2, m_ci, label="ci (fused)")
    ax[1].set_yscale("log")
    ax[1].set_xlabel("time (s)")
    ax[1].set_ylabel("track error (m), median over seeds and agents", fontsize=8)
    ax[1].legend()
    s.figures.append((save(fig, figdir, "fusion.png"),
                      "Track error of individual (no sharing) and fused (CI) robots."))
    return s


def _grid_peak(r: Mapping[str, Any]) -> float | None:
    return r.get("metrics", {}).get("grid_peak_m")
