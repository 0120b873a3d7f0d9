"""Experiment 8. Real processes against lockstep: one real run of each scene."""

from __future__ import annotations

from typing import Any

from tools.experiments.evidence.figures import pyplot, save
from tools.experiments.evidence.measures import real_agreement
from tools.experiments.evidence.plan import Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fmt

MEASURES = (("err_p50", "error p50 after 20 s (m)", "{:.3f}"), ("held", "held", "{:.3f}"),
            ("nees4_inside", "NEES4 inside", "{:.3f}"), ("kbytes_per_s", "KB/s", "{:.2f}"))


def section(results: Results) -> Section | None:
    """Real processes against lockstep."""
    scenes = [sc for sc in results.suite.scenes if sc.real]
    if not results.real or not scenes:
        return None
    s = Section("8. Real processes against lockstep")
    s.text += [
        "Each scene once as real processes (the world and every agent as its own process, "
        "mDNS discovery, UDP on loopback, real time; seed 1; `stigmesh run "
        "scenarios/FILE.toml --seed 1`) against its lockstep seeds. A measure agrees when the "
        "real run's value lies within the lockstep seeds' range widened by 25 % of its ends; "
        "a scene agrees when all four do. On a liar's scene the measures are the honest "
        "agents' (the liar's logged track mixes the lies it sent with its belief), as in "
        "sections 2 and 4; its second row, every agent's, the measure used until 2026-12-05, "
        "is shown, not judged. Shown: real (lockstep min–max).",
        "",
        "| scene | " + " | ".join(m[1] for m in MEASURES) + " | agrees |",
        "|---|" + "---|" * len(MEASURES) + "---|",
    ]
    data: dict[str, Any] = {}
    for sc in scenes:
        a = real_agreement(results, sc.name)
        data[sc.name] = a
        s.text.append(_row(sc.name, a))
        if a["agents"] is not None:
            every = real_agreement(results, sc.name, every_agent=True)
            data[sc.name] = {**a, "every_agent": every}
            s.text.append(_row(f"{sc.name}, every agent (not judged)", every))
    plt = pyplot()
    fig, ax = plt.subplots(1, len(MEASURES), figsize=(12, 3.4))
    names = [sc.name for sc in scenes]
    for a, (key, title, _) in zip(ax, MEASURES, strict=True):
        for i, name in enumerate(names):  # the measures real_agreement took (judged ones)
            lock = [m[key] for m in data[name]["lockstep"] if m[key] is not None]
            a.scatter([i] * len(lock), lock, s=8, color="0.6")
            real = (data[name]["real"] or {}).get(key)
            if real is not None:
                a.scatter([i], [real], s=30, marker="x", color="tab:red")
        a.set_xticks(range(len(names)), names, rotation=70, fontsize=7)
        a.set_title(title, fontsize=9)
    s.figures.append((save(fig, results.figdir, "modes.png"),
                      "Per scene: the lockstep seeds (grey) and the real-process run (red x); "
                      "on a liar's scene, its honest agents."))
    s.data = data
    return s


def _row(name: str, a: dict[str, Any]) -> str:
    """One scene's row: each measure as real (lockstep min–max), out of range in bold."""
    if not a["measures"]:
        return (f"| {name} | " + " | ".join("–" for _ in MEASURES)
                + f" | no: {str(a.get('why', '')).splitlines()[-1][:80]} |")
    cells = []
    for key, _, f in MEASURES:
        v, lo, hi, inside = a["measures"][key]
        mark = "" if inside else " **out**"
        cells.append(f"{fmt(v, f)} ({fmt(lo, f)}–{fmt(hi, f)}){mark}")
    return f"| {name} | " + " | ".join(cells) + f" | {'yes' if a['agrees'] else '**no**'} |"
