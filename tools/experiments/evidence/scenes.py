"""Experiment 2. The suite: every scene, what it tests, and every metric on it."""

from __future__ import annotations

from tools.experiments.evidence.plan import AS_FILE, SETTLE, Results, seeds_of, variants_of
from tools.experiments.evidence.report import Section
from tools.experiments.evidence.stats import fmt, ms, ok, percentile, pooled, vals
from tools.replay.metrics import nees_bounds


def section(results: Results) -> Section:
    """The suite: every scene, what it tests, and every metric on it."""
    s = Section("2. The suite")
    s.text += [
        "`scenarios/suite.toml` lists the scenes; each is a scenario file run in lockstep "
        "(deterministic: the command reproduces every number) over seeds 1..N. Variants: "
        "`naive` (every agent with naive fusion), `oracle` (the liar's datagrams dropped from "
        "its onset instead of its lies), `none` (no sharing), `oracle_looks` (no LOOK sent: "
        "every look handed at once to every robot's search map, section 6), `no_gyro` "
        "(every car without its gyro, section 9).",
        "",
        "| scene | what it tests | seeds | variants | command |",
        "|---|---|---|---|---|",
    ]
    for sc in results.suite.scenes:
        seeds = seeds_of(sc, results.plan)
        s.text.append(
            f"| {sc.name} | {sc.tests} | {len(seeds)} | {', '.join(variants_of(sc))} | "
            f"`stigmesh run --lockstep scenarios/{sc.file.name} --seed N` |")
    b4, b2 = nees_bounds(4), nees_bounds(2)
    s.text += [
        "",
        "Every metric on every scene (as the file says; mean ± std over seeds unless said). "
        "Errors: every held sample of every agent after 20 s, pooled over agents and seeds "
        "(median / p95 / max). Held: the fraction of time an agent holds a track from the "
        "swarm's first detection (mean over agents and seeds). NEES with each agent's own "
        "track model (its settings; the published state predicted as the agents predict a "
        f"received track), pooled: fraction inside [{b4[0]:.2f}, {b4[1]:.1f}] (4 dof) / "
        f"[{b2[0]:.2f}, {b2[1]:.2f}] (2 dof) and the mean. Speed: the share of accepted "
        "detections whose TRACK's speed is within 10 % of the truth's (pooled). Detection: "
        "time to the swarm's first detection (a frame seen before the robot had a pose counts "
        "when the pose came and placed it). Redundancy: Σ|Aᵢ|/|∪Aᵢ| of the cells the "
        "cameras covered per 10 s window (1: no two robots looked at the same cell; N: all "
        "looked at the same ones). KB/s: bytes each agent sent per second (1 KB = 1000 B). "
        "Outside: logged estimates outside the room, over all seeds. On a liar's scene the "
        "error, NEES and outside columns are the honest agents' (the liar's logged track mixes "
        "its lies with its own belief); a search's target stands still (no speed to judge).",
        "",
        "| scene | runs (failed) | error p50 / p95 / max (m) | held | NEES4 inside / mean | "
        "NEES2 inside / mean | speed within 10 % | 1st detection (s) | redundancy | "
        "KB/s per agent | outside |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    data = {}
    for sc in results.suite.scenes:
        runs = results.runs(sc.name, AS_FILE)
        good = ok(runs)
        honest = results.honest(sc.name)
        err = pooled(good, after=SETTLE, agents=honest)
        row = {"p50": percentile(err, 50), "p95": percentile(err, 95),
               "max": percentile(err, 100)}
        cells = []
        for dof, (lo, hi) in ((4, b4), (2, b2)):
            v = pooled(good, f"nees{dof}", agents=honest)
            inside = float(((v >= lo) & (v <= hi)).mean()) if v.size else None
            mean = float(v.mean()) if v.size else None
            row[f"nees{dof}_inside"], row[f"nees{dof}_mean"] = inside, mean
            cells.append(f"{fmt(inside, '{:.1%}')} / {fmt(mean, '{:.2f}')}")
        n = sum(r["metrics"].get("speed_n") or 0 for r in good)
        within = sum((r["metrics"].get("speed_within_10") or 0) * (r["metrics"].get("speed_n")
                                                                  or 0) for r in good)
        row["speed"] = within / n if n and sc.kind != "search" else None
        outside = sum(a.get("outside") or 0 for r in good
                      for name, a in r["metrics"]["agents"].items()
                      if honest is None or name in honest)
        data[sc.name] = row
        s.text.append(
            f"| {sc.name} | {len(runs)} ({len(runs) - len(good)}) | {fmt(row['p50'])} / "
            f"{fmt(row['p95'])} / {fmt(row['max'], '{:.2f}')} | "
            f"{ms(vals(good, 'held'), '{:.3f}')} | {cells[0]} | {cells[1]} | "
            f"{fmt(row['speed'], '{:.1%}')} | {ms(vals(good, 'first_detection_s'), '{:.1f}')} | "
            f"{ms(vals(good, 'redundancy'), '{:.2f}')} | "
            f"{ms(vals(good, 'kbytes_per_s'), '{:.2f}')} | {outside} |")
    s.text += ["", f"\"After 20 s\" is run time ({SETTLE:g} s from the world's start)."]
    s.data = data
    return s
