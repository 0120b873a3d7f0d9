"""Experiment 2. CI is consistent (NEES inside its 95 % bounds), naive fusion is overconfident."""

from __future__ import annotations

import math
import statistics

from tools.experiments.evidence.figures import pyplot, save
from tools.experiments.evidence.plan import Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fp, ms, paired_p, vals


def section(results: Results) -> Section:
    """CI is consistent (NEES inside its 95 % bounds), naive fusion is overconfident."""
    res, seeds, figdir = results.lockstep, results.seeds, results.figdir
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
    plt = pyplot()
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
    s.figures.append((save(fig, figdir, "nees.png"),
                      "Per seed: fraction of time the NEES lies in its 95 % bounds (dotted: "
                      "0.95, dashed: the 0.9 target)."))
    return s
