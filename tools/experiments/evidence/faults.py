"""Experiment 7. Network faults: 30 % burst loss against the loss-free run; a partition that
heals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tools.experiments.evidence.figures import FLOOR, mean_curve, pyplot, save
from tools.experiments.evidence.limits import LOSS_KBPS, LOSS_RATIO
from tools.experiments.evidence.plan import SETTLE, Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import (
    fmt,
    median,
    ms,
    ok,
    percentile,
    pooled,
    recovered_after,
    rolling_median,
    vals,
)


def section(results: Results) -> Section | None:
    """Network faults: burst loss and a partition."""
    loss, part = results.scenes("loss"), results.scenes("partition")
    if not loss and not part:
        return None
    s = Section("7. Network faults")
    plt = pyplot()
    data: dict[str, Any] = {}
    for sc in loss:
        assert sc.reference is not None
        lossy, clean = ok(results.runs(sc.name)), ok(results.runs(sc.reference))
        s.text += [
            f"**{sc.name}**: {sc.tests}; against {sc.reference}, the same seeds without loss.",
            "",
            "| run | error p50 / p95 after 20 s (m) | held | NEES4 inside | KB/s per agent "
            "(mean / max) |",
            "|---|---|---|---|---|",
        ]
        for label, runs in ((sc.name, lossy), (sc.reference, clean)):
            e = pooled(runs, after=SETTLE)
            rates = [a["kbytes_per_s"] for r in runs for a in r["metrics"]["agents"].values()]
            s.text.append(
                f"| {label} | {fmt(percentile(e, 50))} / {fmt(percentile(e, 95))} | "
                f"{ms(vals(runs, 'held'), '{:.3f}')} | {ms(vals(runs, 'nees4_inside'))} | "
                f"{fmt(float(np.mean(rates)) if rates else None, '{:.2f}')} / "
                f"{fmt(max(rates) if rates else None, '{:.2f}')} |")
        s.text += ["", f"Targets: error within {LOSS_RATIO}× of the loss-free run; under "
                   f"{LOSS_KBPS:g} KB/s sent per agent."]
        fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
        for label, runs in ((sc.reference, clean), (sc.name, lossy)):
            t, curve = mean_curve(runs, lambda r: list(r["series"]["err"].values()))
            ax[0].plot(t, curve, label=label)
        ax[0].set_yscale("log")
        ax[0].set_ylim(bottom=FLOOR)
        ax[0].set_xlabel("time (s)")
        ax[0].set_ylabel("error while held (m), median")
        ax[0].legend(fontsize=8)
        for i, runs in enumerate((clean, lossy)):
            rates = [a["kbytes_per_s"] for r in runs for a in r["metrics"]["agents"].values()]
            ax[1].scatter(i + np.linspace(-0.15, 0.15, len(rates)), rates, s=10)
        ax[1].axhline(LOSS_KBPS, ls="--", color="tab:red", lw=0.8)
        ax[1].set_xticks([0, 1], [sc.reference, sc.name])
        ax[1].set_ylabel("KB/s sent, per agent and seed")
        s.figures.append((save(fig, results.figdir, "loss.png"),
                          f"{sc.name} against {sc.reference}: the error (median over seeds and "
                          "agents, 1 s rolling median) and what each agent sent (dashed: "
                          "the target)."))
    for sc in part:
        runs = ok(results.runs(sc.name))
        stats = [_partition(r) for r in runs]
        rec = [x["back_s"] for x in stats]
        s.text += [
            "",
            f"**{sc.name}**: {sc.tests}. The distance between the two agents' tracks, and "
            "how long after the heal (40 s) until its 1 s rolling median is back within 1.5× "
            "its median of 10–20 s (plus 5 cm) for good.",
            "",
            "| agreement before (m) | during (m) | back after the heal (s) | held during |",
            "|---|---|---|---|",
            f"| {fmt(median([x['before'] for x in stats]))} | "
            f"{fmt(median([x['during'] for x in stats]))} | {fmt(median(rec), '{:.1f}')} "
            f"(median; {sum(1 for v in rec if v is None)} of {len(rec)} never) | "
            f"{fmt(median([x['held_during'] for x in stats]), '{:.1%}')} |",
        ]
        fig, ax = plt.subplots(figsize=(6, 3.4))
        t, agree = mean_curve(runs, lambda r: list(r["series"]["agree"].values()))
        ax.plot(t, agree, label="distance between the tracks")
        t, err = mean_curve(runs, lambda r: list(r["series"]["err"].values()))
        ax.plot(t, err, label="error while held")
        ax.axvspan(20, 40, color="0.9")
        ax.set_yscale("log")
        ax.set_ylim(bottom=FLOOR)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("m (median over seeds)")
        ax.legend(fontsize=8)
        s.figures.append((save(fig, results.figdir, "partition.png"),
                          f"{sc.name}: partition from 20 s to 40 s (grey)."))
        data[sc.name] = stats
    s.data = data
    return s


def _partition(r: Mapping[str, Any], start: float = 20.0, end: float = 40.0) -> dict[str, Any]:
    t = np.asarray(r["series"]["t"])
    agree = np.asarray(next(iter(r["series"]["agree"].values())), dtype=float)
    before = agree[(t >= 10) & (t < start)]
    during = agree[(t >= start) & (t < end)]
    level = float(np.nanmedian(before)) if np.isfinite(before).any() else float("nan")
    errs = [np.asarray(v, dtype=float) for v in r["series"]["err"].values()]
    window = (t >= start) & (t < end)
    held = float(np.mean([np.isfinite(e[window[: e.size]]).mean() for e in errs])) if errs \
        else None
    return {
        "before": level,
        "during": float(np.nanmedian(during)) if np.isfinite(during).any() else None,
        "back_s": recovered_after(t, rolling_median(agree, 10) - (1.5 * level + 0.05), end),
        "held_during": held,
    }
