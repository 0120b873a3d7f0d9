"""Experiment 6. Search: a still target hidden at random places; sharing against not, and
against the oracle that hands every look to every robot at once."""

from __future__ import annotations

from typing import Any

from tools.experiments.evidence.figures import pyplot, save
from tools.experiments.evidence.limits import SEARCH_RATIO
from tools.experiments.evidence.measures import search_values
from tools.experiments.evidence.plan import AS_FILE, NONE, ORACLE_LOOKS, Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fmt, fp, median, paired_p


def section(results: Results) -> Section | None:
    """Search: a still target hidden at random places; sharing against not and the oracle."""
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
                     and r["metrics"].get("first_detection_s") is None)
                 for v in (AS_FILE, NONE, ORACLE_LOOKS)]
        s.text += [
            f"**{sc.name}**: {sc.tests}. Seed N hides the target at the N-th place drawn "
            "(`[target] hide_in` of the scenario: uniformly in the room, clear of the crates, "
            "out of both cameras' view at the start), "
            f"{len(places)} places: " + ", ".join(
                f"({p[0]:g}, {p[1]:g})" for p in places if p is not None) + ". "
            "*Sharing*: `ci` as the file says; *no sharing*: `none` (each robot fuses nothing "
            "it receives); *oracle*: no LOOK sent, but every robot's look handed at once to "
            "every other robot's search map (lockstep only): the search as if each robot knew "
            "every view, what perfect sharing could give. The redundancy is over the search: "
            "from the start to the swarm's first detection (the whole run when none came; "
            f"those runs' time counts as the run's length: {never[0]} with sharing, "
            f"{never[1]} without, {never[2]} with the oracle). Medians over places, paired "
            "Wilcoxon p.",
            "",
            "| measure | sharing (ci) | no sharing (none) | oracle | sharing / none | paired p "
            "| sharing / oracle | paired p |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for key, title, f in keys:
            ci, none, oracle = search_values(results, sc.name, key,
                                             (AS_FILE, NONE, ORACLE_LOOKS))
            a, b, c = median(ci), median(none), median(oracle)
            ratio = a / b if a is not None and b else None
            to_oracle = a / c if a is not None and c else None
            s.text.append(f"| {title} | {fmt(a, f)} | {fmt(b, f)} | {fmt(c, f)} | "
                          f"{fmt(ratio, '{:.2f}')} | {fp(paired_p(ci, none))} | "
                          f"{fmt(to_oracle, '{:.2f}')} | {fp(paired_p(ci, oracle))} |")
            data[key] = {"ci": ci, "none": none, "oracle": oracle}
        s.text += ["", f"Target: the median time with sharing ≤ {SEARCH_RATIO}× without, and a "
                   "lower redundancy, each with p < 0.05. Commands: `stigmesh sweep "
                   f"scenarios/{sc.file.name} --seeds {len(places)} --fusion ci,none`; the "
                   f"oracle: `stigmesh run --lockstep scenarios/{sc.file.name} --seed N "
                   "--oracle-looks`."]
        fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
        for a, key, title in ((ax[0], "first_detection_s", "time to first detection (s)"),
                              (ax[1], "search_redundancy", "redundancy until then")):
            d = data[key]
            for place in zip(d["none"], d["ci"], d["oracle"], strict=True):
                xs = [i for i, v in enumerate(place) if v is not None]
                a.plot(xs, [place[i] for i in xs], "-o", color="0.6", lw=0.7, ms=3)
            a.set_xticks([0, 1, 2], ["no sharing", "sharing (ci)", "oracle"])
            a.set_title(title, fontsize=9)
        s.figures.append((save(fig, results.figdir, "search.png"),
                          f"{sc.name}, per hiding place (paired): the time to the first "
                          "detection and the footprint redundancy until then, without "
                          "sharing, with it, and with the oracle."))
    s.data = data
    return s
