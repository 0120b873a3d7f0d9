"""Experiment 5. Liars: one among several observers against its oracle baseline; one who is
the only observer, and how soon it is distrusted."""

from __future__ import annotations

from typing import Any

import numpy as np

from tools.experiments.evidence.figures import FLOOR, mean_curve, pyplot, save
from tools.experiments.evidence.limits import (
    DISTRUST_MEDIAN,
    DISTRUST_WORST,
    LIAR_RATIO,
    RECOVER_HOLD,
    RECOVER_LIMIT,
    RECOVER_WITHIN,
)
from tools.experiments.evidence.measures import distrust, liar_ratios, recoveries
from tools.experiments.evidence.plan import ORACLE, Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fmt, median, ok


def _worst(values: list[float | None]) -> str:
    """The largest of the values that came (the "never" column counts the others)."""
    return fmt(max((v for v in values if v is not None), default=None), "{:.1f}")


def _honest_curve(runs: list[dict[str, Any]], liar: str) -> tuple[np.ndarray, np.ndarray]:
    return mean_curve(runs, lambda r: [v for n, v in r["series"]["err"].items() if n != liar])


def section(results: Results) -> Section | None:
    """Liars: among several observers, and the only observer."""
    among, only = results.scenes("liar_among"), results.scenes("liar_only")
    if not among and not only:
        return None
    s = Section("5. Liars")
    plt = pyplot()
    data: dict[str, Any] = {}
    for sc in among:
        liar, onset = results.liar(sc.name)
        ratios = liar_ratios(results, sc.name)
        s.text += [
            f"**{sc.name}**: {sc.tests}. The oracle baseline is the same run (same seed: "
            f"identical up to the onset) in which the others drop {liar}'s datagrams from "
            f"t = {onset:g} s instead of hearing its lies. Honest error: the median over the "
            "honest agents' held samples from the onset to the end.",
            "",
            "| seed | honest error / oracle | distrusted after (s), per honest agent |",
            "|---|---|---|",
        ]
        by_seed = {r["seed"]: r for r in results.runs(sc.name)}
        for seed, ratio in ratios:
            agents = by_seed.get(seed, {}).get("liar", {}).get("agents", {})
            times = ", ".join(f"{n} {fmt(a['distrust_s'], '{:.1f}')}"
                              for n, a in sorted(agents.items()))
            mark = "" if ratio is not None and ratio <= LIAR_RATIO else " **over**"
            s.text.append(f"| {seed} | {fmt(ratio, '{:.2f}')}×{mark} | {times or '–'} |")
        fig, ax = plt.subplots(figsize=(6.5, 3.4))
        for label, some in (("liar", results.runs(sc.name)),
                            ("oracle (liar cut off)", results.runs(sc.name, ORACLE))):
            t, curve = _honest_curve(ok(some), liar)
            ax.plot(t, curve, label=label)
        ax.axvline(onset, ls=":", color="0.3")
        ax.set_yscale("log")
        ax.set_ylim(bottom=FLOOR)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("honest agents' error (m), median")
        ax.legend(fontsize=8)
        s.figures.append((save(fig, results.figdir, "liar_among.png"),
                          f"{sc.name}: the honest agents' error (median over seeds and agents, "
                          f"1 s rolling median) with the liar and in its oracle baseline; the "
                          f"liar starts at {onset:g} s (dotted)."))
        data[sc.name] = {"ratios": ratios}
    for sc in only:
        liar, onset = results.liar(sc.name)
        runs = ok(results.runs(sc.name))
        distrusted, rec = distrust(results, sc.name), recoveries(results, sc.name)
        sees = [r["liar"].get("honest_sees_s") for r in runs if "liar" in r]
        alone = [r["liar"].get("liar_only_s") for r in runs if "liar" in r]
        never = sum(1 for v in distrusted if v is None)
        s.text += [
            "",
            f"**{sc.name}**: {sc.tests}. From the onset ({onset:g} s) an honest camera could "
            f"first see the target after {fmt(median(sees), '{:.1f}')} s (median over seeds, "
            "from the truth: range, field of view, the wall); over the run, after the onset, "
            f"{liar} alone could see it for {fmt(median(alone), '{:.1f}')} s. Distrusted: the "
            f"first time after the onset an honest agent refused a TRACK of {liar}'s by "
            "reputation, or logged its score below its threshold. Back under the limit: from "
            "the onset until the honest agent holds a track whose held error (1 s rolling "
            f"median) is under {RECOVER_LIMIT} m and stays under it for {RECOVER_HOLD:g} s "
            "(no track held neither breaks nor makes it). For good: ... and stays under it "
            f"to the end of the run; that measures the scene too ({liar} alone sees the "
            "target again later, and an honest track coasts out of the limit): the oracle, "
            "which never hears a lie, is given beside each.",
            "",
            "| | median | worst | never | oracle: median, worst | target |",
            "|---|---|---|---|---|---|",
            f"| distrusted after (s) | {fmt(median(distrusted), '{:.1f}')} | "
            f"{_worst(distrusted)} | {never} of {len(distrusted)} | – | median ≤ "
            f"{DISTRUST_MEDIAN:g}, worst ≤ {DISTRUST_WORST:g} |",
        ]
        for label, values, floor, target in (
                (f"error back under {RECOVER_LIMIT} m after (s)", rec,
                 recoveries(results, sc.name, ORACLE), f"≤ {RECOVER_WITHIN:g}"),
                (f"error under {RECOVER_LIMIT} m for good after (s)",
                 recoveries(results, sc.name, for_good=True),
                 recoveries(results, sc.name, ORACLE, for_good=True), "–")):
            s.text.append(
                f"| {label} | {fmt(median(values), '{:.1f}')} | {_worst(values)} | "
                f"{sum(1 for v in values if v is None)} of {len(values)} | "
                f"{fmt(median(floor), '{:.1f}')}, {_worst(floor)} | {target} |")
        fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
        for label, some in (("liar", runs), ("oracle (liar cut off)",
                                             ok(results.runs(sc.name, ORACLE)))):
            t, curve = _honest_curve(some, liar)
            ax[0].plot(t, curve, label=label)
        ax[0].axvline(onset, ls=":", color="0.3")
        ax[0].axhline(RECOVER_LIMIT, ls="--", color="tab:red", lw=0.8)
        ax[0].set_yscale("log")
        ax[0].set_ylim(bottom=FLOOR)
        ax[0].set_xlabel("time (s)")
        ax[0].set_ylabel("honest agents' error while held (m)")
        ax[0].legend(fontsize=8)
        finite = [v for v in (*distrusted, *rec) if v is not None]
        cap = float(np.ceil(max([*finite, DISTRUST_WORST, RECOVER_WITHIN]) + 5))  # "never"
        for i, (values, limit) in enumerate(((distrusted, DISTRUST_WORST),
                                             (rec, RECOVER_WITHIN))):
            shown = [cap if v is None else min(v, cap) for v in values]
            ax[1].scatter(i + np.linspace(-0.15, 0.15, len(shown)), shown, s=12)
            ax[1].plot([i - 0.3, i + 0.3], [limit, limit], "--", color="tab:red", lw=0.8)
        ax[1].set_xticks([0, 1], ["distrusted", f"error < {RECOVER_LIMIT} m"])
        ax[1].set_ylabel(f"s after the onset (never: {cap:g})")
        s.figures.append((save(fig, results.figdir, "liar_only.png"),
                          f"{sc.name}: left, the honest agents' held error (median over seeds "
                          "and agents, 1 s rolling median), with the liar and cut off; right, "
                          "per honest agent and seed, when it distrusted the liar and when its "
                          "error was back under the limit (dashed: the targets)."))
        data[sc.name] = {"distrust": distrusted, "recovery": rec, "honest_sees": sees,
                         "liar_only": alone}
    s.data = data
    return s
