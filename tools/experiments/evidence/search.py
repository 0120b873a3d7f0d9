"""Experiment 6. Search: a still target hidden at random places; sharing against not."""

from __future__ import annotations

from typing import Any

from tools.experiments.evidence.figures import pyplot, save
from tools.experiments.evidence.plan import NONE, Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fmt, fp, median, paired_p
from tools.experiments.evidence.targets import SEARCH_RATIO, search_pairs


def section(results: Results) -> Section | None:
    """Search: a still target hidden at random places; sharing against not."""
    scenes = results.scenes("search")
    if not scenes:
        return None
    s = Section("6. Search for a hidden target")
    plt = pyplot()
    data: dict[str, Any] = {}
    for sc in scenes:
        runs = results.runs(sc.name)
        places = [r.get("place") for r in runs]
        keys = [("first_detection_s", "time to first detection (s)", "{:.1f}"),
                ("search_redundancy", "redundancy Σ\\|Aᵢ\\|/\\|∪Aᵢ\\| until then", "{:.2f}"),
                ("search_cells", "cells covered until then", "{:.0f}"),
                ("err_p50", "error p50 after 20 s (m)", "{:.3f}")]
        never = [sum(1 for r in results.runs(sc.name, v) if "metrics" in r
                     and r["metrics"].get("first_detection_s") is None) for v in ("as_file", NONE)]
        s.text += [
            f"**{sc.name}**: {sc.tests}. Seed N hides the target at the N-th place drawn "
            "(`[target] hide_in` of the scenario: uniformly in the room, clear of the crates, "
            "out of both cameras' view at the start), "
            f"{len(places)} places: " + ", ".join(
                f"({p[0]:g}, {p[1]:g})" for p in places if p is not None) + ". "
            "*Sharing*: `ci` as the file says; *no sharing*: `none` (each robot fuses nothing "
            "it receives). The redundancy is over the search: from the start to the swarm's "
            "first detection (the whole run when none came; those runs' time counts as the "
            f"run's length: {never[0]} with sharing, {never[1]} without). Medians over "
            "places, paired Wilcoxon p.",
            "",
            "| measure | sharing (ci) | no sharing (none) | ratio | paired p |",
            "|---|---|---|---|---|",
        ]
        for key, title, f in keys:
            ci, none = search_pairs(results, sc.name, key)
            a, b = median(ci), median(none)
            ratio = a / b if a is not None and b else None
            s.text.append(f"| {title} | {fmt(a, f)} | {fmt(b, f)} | {fmt(ratio, '{:.2f}')} | "
                          f"{fp(paired_p(ci, none))} |")
            data[key] = {"ci": ci, "none": none}
        s.text += ["", f"Target: the median time with sharing ≤ {SEARCH_RATIO}× without, and a "
                   "lower redundancy, each with p < 0.05. Command: `stigmesh sweep "
                   f"scenarios/{sc.file.name} --seeds {len(places)} --fusion ci,none`."]
        fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
        for a, key, title in ((ax[0], "first_detection_s", "time to first detection (s)"),
                              (ax[1], "search_redundancy", "redundancy until then")):
            ci, none = data[key]["ci"], data[key]["none"]
            for x, y in zip(none, ci, strict=True):
                if x is not None and y is not None:
                    a.plot([0, 1], [x, y], "-o", color="0.6", lw=0.7, ms=3)
            a.set_xticks([0, 1], ["no sharing", "sharing (ci)"])
            a.set_title(title, fontsize=9)
        s.figures.append((save(fig, results.figdir, "search.png"),
                          f"{sc.name}, per hiding place (paired): the time to the first "
                          "detection and the footprint redundancy until then, without and "
                          "with sharing."))
    s.data = data
    return s
