"""Experiment 5. A Byzantine peer, with and without reputation."""

from __future__ import annotations

from typing import Any

import numpy as np

from tools.experiments.evidence.figures import mean_curve, pyplot, save
from tools.experiments.evidence.plan import BYZANTINE_ONSET, Results
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import ms, recovered_after, rolling_median


def section(results: Results) -> Section:
    """A Byzantine peer, with and without reputation."""
    res, seeds, figdir = results.lockstep, results.few, results.figdir
    s = Section("5. A Byzantine peer")
    honest = ("walnut", "hazel")
    variants = (("three_agents", "fault-free"), ("byzantine", "liar, reputation on"),
                ("byzantine_norep", "liar, reputation off"))
    s.text += [
        "`scenarios/byzantine.toml`: three agents in the three-car room (target on a waypoint "
        "loop at 1.0 m/s); from t = 20 s pecan broadcasts every TRACK and PATCH moved by "
        "(2, 0) m, its own belief staying honest. The honest agents are walnut and hazel. "
        "Fault-free level L: the honest agent's median error over t = 30–60 s in the same "
        "seed without the liar (`scenarios/three_agents.toml`). With the liar, M: its median "
        "error over t = 30–60 s (from 10 s after the onset). Recovered within 10 s when "
        "M ≤ 1.2 L. Recovery time: from the onset to the last moment the 2 s rolling median of "
        "the error exceeds 1.2× the fault-free run's 2 s rolling median at the same time (plus "
        "2 cm); after it the error stays within that bound to the end of the run (\"never\": "
        "still above it in the run's last 2 s).",
        "",
        "| variant | honest error t = 30–60 s (m) | M ≤ 1.2 L (agent-seeds) | recovery time (s) | "
        "liar's TRACKs fused after onset | first refused (s) | command |",
        "|---|---|---|---|---|---|---|",
    ]
    base = {k: res[f"three_agents-{k}"] for k in seeds}
    data: dict[str, Any] = {}
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for scen, label in variants:
        runs = {k: res[f"{scen}-{k}"] for k in seeds}
        late, ok, rec, fused, refused, total = [], 0, [], [], [], 0
        for k, r in runs.items():
            if "series" not in r or "series" not in base[k]:
                continue
            t = np.asarray(r["series"]["t"])
            tb = np.asarray(base[k]["series"]["t"])
            for name in honest:
                err = np.asarray(r["series"]["err"][name], dtype=float)
                berr = np.asarray(base[k]["series"]["err"][name], dtype=float)
                n = min(t.size, tb.size)
                m = float(np.nanmedian(err[(t >= 30)]))
                level = float(np.nanmedian(berr[(tb >= 30)]))
                late.append(m)
                total += 1
                ok += m <= 1.2 * level
                if scen != "three_agents":
                    limit = 1.2 * rolling_median(berr[:n], 20) + 0.02
                    excess = rolling_median(err[:n], 20) - limit
                    rec.append(recovered_after(t[:n], excess, BYZANTINE_ONSET))
                if "liar" in r and name in r["liar"]:
                    fused.append(r["liar"][name]["fused_after_onset"] /
                                 max(1, r["liar"][name]["tracks_after_onset"]))
                    refused.append(r["liar"][name]["first_refused_s"])
        never = sum(1 for v in rec if v is None)
        cmd = f"`stigmesh run --lockstep scenarios/{scen}.toml --seed N`"
        s.text.append(
            f"| {label} | {ms(late)} | {ok}/{total} | "
            + ("–" if scen == "three_agents" else ms(rec, "{:.1f}")
               + (f" ({never} never)" if never else ""))
            + f" | {ms(fused, '{:.2f}') if fused else '–'} | "
            f"{ms([x - BYZANTINE_ONSET for x in refused if x is not None], '{:.1f}')}"
            + (f" ({sum(1 for x in refused if x is None)} never)" if refused and
               any(x is None for x in refused) else "")
            + f" | {cmd} (N = {seeds[0]}..{seeds[-1]}) |"
        )
        data[scen] = {"late": late, "ok": ok, "total": total, "recovery": rec, "fused": fused,
                      "refused": refused}
        t, curve = mean_curve(list(runs.values()),
                               lambda r: [r["series"]["err"][n] for n in honest])
        ax.plot(t, curve, label=label)
    ax.axvline(BYZANTINE_ONSET, ls=":", color="0.3")
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("honest agents' track error (m), median")
    ax.legend(fontsize=8)
    s.figures.append((save(fig, figdir, "byzantine.png"),
                      "Honest agents' error (median over seeds and the two honest agents, 1 s "
                      "rolling median); the liar starts at 20 s (dotted)."))
    s.text += ["", "Recovery time is counted from the onset (20 s); \"first refused\" is when "
               "an honest agent's reputation first refused one of the liar's TRACKs, after the "
               "onset; the fused share counts only TRACKs that carried new measurements."]
    on, off = data.get("byzantine", {}), data.get("byzantine_norep", {})
    if on.get("total"):
        met = on["ok"] == on["total"]
        s.text += ["", (
            f"Claim \"with reputation on, the honest agents' error returns to within 1.2× its "
            f"fault-free level within 10 s of the onset\": met for {on['ok']} of {on['total']} "
            f"honest agent-seeds ({'met' if met else 'NOT met'}). With reputation the honest "
            f"error over t = 30–60 s is {ms(on['late'])} m against {ms(off.get('late', []))} m "
            "without it and "
            f"{ms(data.get('three_agents', {}).get('late', []))} m with no liar at all."
        )]
    s.data = data
    return s
