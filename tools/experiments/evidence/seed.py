"""Experiment 6. The seed's own figures on its own setup."""

from __future__ import annotations

import numpy as np

from tools.experiments.evidence.plan import SETTLE, Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import ms, vals


def section(results: Results) -> Section:
    """The seed's own figures on its own setup."""
    res, seeds = results.lockstep, results.seeds
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
