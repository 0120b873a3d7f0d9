"""Experiment 9. The kit as sold: every fault-free scene again with cars without a gyro."""

from __future__ import annotations

from typing import Any

from tools.experiments.evidence.limits import ERR_MEDIAN, ERR_P95, HELD
from tools.experiments.evidence.plan import AS_FILE, NO_GYRO, SETTLE, Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fmt, fp, ms, paired_p, percentile, pooled, vals


def section(results: Results) -> Section | None:
    """The fault-free scenes with and without the cars' gyro."""
    scenes = [sc.name for sc in results.scenes("fault_free")
              if results.runs(sc.name, NO_GYRO)]
    if not scenes:
        return None
    s = Section("9. Without a gyro (the kit as sold)")
    s.text += [
        "The Freenove FNK0053 has no gyro; every other scene here runs cars with one (an "
        "MPU-6050 added: firmware/README.md, \"A gyro\"). The same fault-free scenes and "
        "seeds, in lockstep, every car without it (`[car_model] gyro = false`: telemetry's "
        "`gyro_z` and `gyro_angle` null, the localizer turns the heading by the wheels' "
        "speed difference with a 30 % error for their slip; `stigmesh sweep "
        "scenarios/FILE.toml --over gyro=1,0`). Errors after 20 s while held, every agent "
        "and seed pooled; held: a track, from the first detection; pose held: the robot's "
        "own pose; p: paired Wilcoxon over the seeds (p95 error, track held). Bold: a miss "
        f"of the fault-free targets (median ≤ {ERR_MEDIAN} m, p95 ≤ {ERR_P95} m, held ≥ "
        f"{HELD:.0%}).",
        "",
        "| scene | gyro | error p50 / p95 / max (m) | track held | pose held | "
        "heading error p95 (°) | 1st detection (s) | p (p95, held) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    data: dict[str, Any] = {}
    for name in scenes:
        with_, without = results.runs(name, AS_FILE), results.runs(name, NO_GYRO)
        p = (paired_p(vals(with_, "err_p95"), vals(without, "err_p95")),
             paired_p(vals(with_, "held"), vals(without, "held")))
        data[name] = {"p_err_p95": p[0], "p_held": p[1]}
        for label, runs in (("yes", with_), ("**no**", without)):
            e = pooled(runs, after=SETTLE)
            p50, p95 = percentile(e, 50), percentile(e, 95)
            held = [v for v in vals(runs, "held") if v is not None]
            mean_held = sum(held) / len(held) if held else None

            def bold(text: str, miss: bool) -> str:
                return f"**{text}**" if miss else text

            cells = [
                bold(fmt(p50), p50 is not None and p50 > ERR_MEDIAN) + " / "
                + bold(fmt(p95), p95 is not None and p95 > ERR_P95) + " / "
                + fmt(percentile(e, 100), "{:.2f}"),
                bold(fmt(mean_held), mean_held is not None and mean_held < HELD),
                ms(vals(runs, "pose_held"), "{:.2f}"),
                ms(vals(runs, "pose_heading_p95_deg"), "{:.1f}"),
                ms(vals(runs, "first_detection_s"), "{:.1f}"),
            ]
            data[name][label.strip("*")] = {"err_p50": p50, "err_p95": p95, "held": mean_held}
            tail = f"{fp(p[0])}, {fp(p[1])}" if label == "yes" else ""
            s.text.append(f"| {name} | {label} | " + " | ".join(cells) + f" | {tail} |")
    s.data = data
    return s
