"""Experiment 4. Graceful degradation: error against inbound loss; re-convergence after a
partition."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

import numpy as np

from tools.experiments.evidence.figures import FLOOR, mean_curve, pyplot, save
from tools.experiments.evidence.plan import PARTITION, Results, loss_key
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import ms, recovered_after, rolling_median, vals


def section(results: Results) -> Section:
    """Graceful degradation: error against inbound loss; re-convergence after a partition."""
    res, plan, seeds, figdir = results.lockstep, results.plan, results.few, results.figdir
    s = Section("4. Graceful degradation")
    rows = []
    for loss in plan.losses:
        runs = [res[loss_key(loss, k)] for k in seeds]
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
    plt = pyplot()
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
        t, agree = mean_curve(runs, lambda r: list(r["series"]["agree"].values()))
        t2, herr_c = mean_curve(runs, lambda r: [r["series"]["err"]["hazel"]])
        ax[i].plot(t, agree, label="distance between the tracks")
        ax[i].plot(t2, herr_c, label="hazel's error")
        ax[i].axvspan(*PARTITION, color="0.9")
        ax[i].set_yscale("log")
        ax[i].set_ylim(bottom=FLOOR)
        ax[i].set_title(scen)
        ax[i].set_xlabel("time (s)")
        ax[i].set_ylabel("m (median over seeds)")
        ax[i].legend(fontsize=8)
    s.figures.append((save(fig, figdir, "partition.png"),
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
    s.figures.append((save(fig, figdir, "loss.png"),
                      "Track error against the inbound loss rate (mean ± std over seeds)."))
    s.data = {"loss": {f"{loss:g}": vals(r, "err_after_20_m") for loss, r, _ in rows},
              "partition": part_data}
    return s


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
