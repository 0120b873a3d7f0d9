"""Experiment 3. Accuracy on the fault-free scenes: error while held, how long a track is held,
estimates outside the room, speed at detection."""

from __future__ import annotations

import numpy as np

from tools.experiments.evidence.figures import pyplot, save
from tools.experiments.evidence.limits import ERR_MEDIAN, ERR_P95, HELD, SPEED
from tools.experiments.evidence.plan import SETTLE, Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fmt, ok, percentile, pooled


def section(results: Results) -> Section:
    """Accuracy on the fault-free scenes."""
    s = Section("3. Accuracy: error while held, holding a track, speed at detection")
    scenes = [sc.name for sc in results.scenes("fault_free")]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    data = []
    for name in scenes:
        e = pooled(results.runs(name), after=SETTLE)
        data.append(e if e.size else np.array([np.nan]))
    ax.boxplot(data, whis=(5, 95), showfliers=False)
    ax.set_xticks(range(1, len(scenes) + 1), scenes, fontsize=8)
    for y, style, label in ((ERR_MEDIAN, "--", "median target"), (ERR_P95, ":", "p95 target")):
        ax.axhline(y, ls=style, color="tab:red", lw=0.8, label=label)
    ax.set_yscale("log")
    ax.set_ylabel("error while held, after 20 s (m)")
    ax.legend(fontsize=8)
    s.figures.append((save(fig, results.figdir, "errors.png"),
                      "Track error while held, after 20 s, every agent and seed pooled per "
                      "scene (box: quartiles; whiskers: 5th-95th percentile)."))
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    for i, name in enumerate(scenes):
        held = [a["held"] for r in ok(results.runs(name))
                for a in r["metrics"]["agents"].values() if a.get("held") is not None]
        ax.scatter(i + np.linspace(-0.2, 0.2, len(held)) if held else [], held, s=10)
    ax.axhline(HELD, ls="--", color="tab:red", lw=0.8)
    ax.set_xticks(range(len(scenes)), scenes, fontsize=8)
    ax.set_ylabel("fraction of time a track is held\nafter the first detection", fontsize=8)
    s.figures.append((save(fig, results.figdir, "hold.png"),
                      "Per agent and seed: the fraction of time it held a track after the "
                      "swarm's first detection (dashed: the 90 % target)."))
    rows = []
    for name in scenes:
        e = pooled(results.runs(name), after=SETTLE)
        outside = sum(r["metrics"].get("outside") or 0 for r in ok(results.runs(name)))
        rows.append(f"| {name} | {fmt(percentile(e, 50))} | {fmt(percentile(e, 95))} | "
                    f"{fmt(percentile(e, 100), '{:.2f}')} | {outside} |")
    s.text += [
        "Errors count only while an agent holds a track: an agent holds one from its first "
        "(its own detection or a peer's track) until it drops it after 6 s without news; a "
        "dropped track has no error, and the held fraction says how long that was.",
        "",
        "| fault-free scene | error p50 (m) | p95 (m) | max (m) | estimates outside the room |",
        "|---|---|---|---|---|",
        *rows,
    ]
    speed_scenes = [sc.name for sc in results.suite.scenes if sc.speed]
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for name in speed_scenes:
        rel = np.array([v for r in ok(results.runs(name))
                        for vs in r["series"].get("speed_rel", {}).values() for v in vs],
                       dtype=float)
        rel = np.abs(rel[np.isfinite(rel)])
        if rel.size:
            ax.hist(np.minimum(rel, 1.0), bins=50, alpha=0.7, label=name)
            within = float(np.mean(rel <= 0.1))
            s.text += ["", f"Speed at detection on {name}: within 10 % of the truth at "
                       f"{within:.1%} of {rel.size} accepted detections (target "
                       f"{SPEED:.0%}); median relative error {np.median(rel):.1%}."]
    ax.axvline(0.1, ls="--", color="tab:red", lw=0.8)
    ax.set_xlabel("|track speed − true speed| / true speed at detections (clipped at 1)")
    ax.set_ylabel("detections")
    ax.legend(fontsize=8)
    s.figures.append((save(fig, results.figdir, "speed.png"),
                      "Relative speed error of the TRACK sent with each accepted detection "
                      "(dashed: 10 %)."))
    return s
