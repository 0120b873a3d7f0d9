"""Experiment 7. Lockstep against real processes on the default scenario."""

from __future__ import annotations

from tools.experiments.evidence.figures import pyplot, save
from tools.experiments.evidence.plan import Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fp, ms, unpaired_p, vals


def section(results: Results) -> Section | None:
    """Lockstep against real processes on the default scenario."""
    res, real, seeds, figdir = results.lockstep, results.real, results.seeds, results.figdir
    if not results.real:
        return None
    s = Section("7. Lockstep against real processes")
    lock = [res[f"default-ci-{k}"] for k in seeds[: len(real)]]
    keys = [("err_after_20_m", "median track error after 20 s (m)", "{:.3f}"),
            ("kbytes_per_s", "sent per agent (KB/s)", "{:.2f}"),
            ("detections_per_s", "detections per agent per second", "{:.2f}"),
            ("nees2_inside", "NEES2 inside 95 % bounds", "{:.3f}"),
            ("first_detection_s", "first detection (s)", "{:.2f}")]
    s.text += [
        f"The default scenario, {len(real)} seeds each: in lockstep (one process, virtual "
        "time) and as real processes (the world and two agents, mDNS discovery, UDP on "
        "loopback, real time). The real runs' clock starts when the agents are launched, so "
        "their first second goes to process start-up. p: two-sided Mann–Whitney U.",
        "",
        "| measure | lockstep | real processes | p |",
        "|---|---|---|---|",
    ]
    data = {}
    for key, title, f in keys:
        a = vals(lock, key)
        b = [r["metrics"].get(key) if "metrics" in r else None for r in real]
        data[key] = {"lockstep": a, "real": b}
        s.text.append(f"| {title} | {ms(a, f)} | {ms(b, f)} | {fp(unpaired_p(a, b))} |")
    s.text += ["", "Commands: `stigmesh run --lockstep scenarios/default.toml --seed N` and "
               f"`stigmesh run scenarios/default.toml --seed N`, N = {seeds[0]}.."
               f"{seeds[len(real) - 1]}."]
    failed = [r for r in real if "error" in r]
    if failed:
        s.text.append(f"{len(failed)} real run(s) failed: " + "; ".join(
            r["error"].splitlines()[-1] for r in failed))
    s.data = data
    plt = pyplot()
    fig, ax = plt.subplots(1, 3, figsize=(10, 3.2))
    for a, (key, title, _) in zip(ax, keys[:3], strict=True):
        for i, label in enumerate(("lockstep", "real")):
            v = [x for x in data[key][label] if x is not None]
            a.scatter([i] * len(v), v)
        a.set_xticks([0, 1], ["lockstep", "real"])
        a.set_title(title, fontsize=9)
    s.figures.append((save(fig, figdir, "modes.png"),
                      "Default scenario, per seed: lockstep against real processes."))
    return s
