"""The per-scene measures the targets judge, from the suite's results: the liar's effect
against its oracle, the time to distrust it and to recover from it, the search's values
per hiding place, and whether a real run agrees with its scene's lockstep seeds.
:mod:`.targets` turns them into verdicts; the sections that draw them use them too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tools.experiments.evidence.limits import RECOVER_HOLD, RECOVER_LIMIT
from tools.experiments.evidence.plan import AS_FILE, NONE, ORACLE, SETTLE, Results
from tools.experiments.evidence.stats import back_under, ok, percentile, pooled, recovery
from tools.replay.metrics import fraction_inside, nees_bounds


def _honest(run: dict[str, Any]) -> list[str]:
    liar = run.get("liar", {}).get("name")
    return [n for n in run["series"]["err"] if n != liar]


def liar_ratios(res: Results, scene: str) -> list[tuple[int, float | None]]:
    """Per seed: the honest agents' median error from the onset (while held) over the
    oracle's (the liar's datagrams dropped from the onset), same seed."""
    _, onset = res.liar(scene)
    out: list[tuple[int, float | None]] = []
    oracles = {r["seed"]: r for r in ok(res.runs(scene, ORACLE))}
    for r in res.runs(scene):
        o = oracles.get(r["seed"])
        if "series" not in r or o is None:
            out.append((r["seed"], None))
            continue
        honest = _honest(r)
        a = percentile(pooled([r], after=onset, agents=honest), 50)
        b = percentile(pooled([o], after=onset, agents=honest), 50)
        out.append((r["seed"], a / b if a is not None and b else None))
    return out


def distrust(res: Results, scene: str) -> list[float | None]:
    """Per honest agent-seed: seconds from the onset to its first distrust of the liar."""
    out: list[float | None] = []
    for r in res.runs(scene):
        if "liar" not in r:
            out.append(None)
            continue
        out += [a["distrust_s"] for a in r["liar"]["agents"].values()]
    return out


def recoveries(res: Results, scene: str, variant: str = AS_FILE, *,
               for_good: bool = False) -> list[float | None]:
    """Per honest agent-seed of ``variant``: seconds from the onset until its error is back
    under 0.3 m for at least ``RECOVER_HOLD`` s (:func:`~.stats.back_under`), or with
    ``for_good`` until the end of the run (:func:`~.stats.recovery`). "For good" measures
    the scene as well: on liar_only the oracle, which never hears a lie, takes 29-36 s by
    it, since pecan alone sees the target again from 35.8 s and any honest track coasts."""
    liar, onset = res.liar(scene)
    out: list[float | None] = []
    for r in res.runs(scene, variant):
        if "series" not in r:
            out.append(None)
            continue
        t = np.asarray(r["series"]["t"], dtype=float)
        for name in r["series"]["err"]:
            if name == liar:
                continue
            err = np.asarray(r["series"]["err"][name], dtype=float)
            out.append(recovery(t, err, onset, RECOVER_LIMIT) if for_good
                       else back_under(t, err, onset, RECOVER_LIMIT, hold=RECOVER_HOLD))
    return out


def search_values(res: Results, scene: str, key: str,
                  variants: Sequence[str] = (AS_FILE, NONE)) -> list[list[float | None]]:
    """Per place (seed, every seed any of ``variants`` ran), ``key`` in each variant, in
    the order given; a time to first detection that never came counts as the run's
    duration (censored)."""
    duration = max((r["series"]["t"][-1] for r in ok(res.runs(scene))), default=60.0)

    def value(r: dict[str, Any]) -> float | None:
        if "metrics" not in r:
            return None
        v = r["metrics"].get(key)
        if key == "first_detection_s" and v is None:
            return float(duration)
        return float(v) if v is not None else None

    by_seed = [{r["seed"]: value(r) for r in res.runs(scene, v)} for v in variants]
    seeds = sorted(set().union(*by_seed))
    return [[values.get(k) for k in seeds] for values in by_seed]


def search_pairs(res: Results, scene: str, key: str) -> tuple[list[float | None],
                                                             list[float | None]]:
    """Per place, ``key`` with sharing (ci, as the file says) and without (none)."""
    ci, none = search_values(res, scene, key)
    return ci, none


AGREE = ("err_p50", "held", "nees4_inside", "kbytes_per_s")
"""The measures on which a real run agrees with its scene's lockstep seeds."""


def agreement_measures(run: dict[str, Any], agents: Sequence[str] | None) -> dict[str, Any]:
    """A run's :data:`AGREE` measures over ``agents`` (None: the run's own, every agent):
    the median error after 20 s and NEES4 inside pooled over their held samples, the held
    fraction and KB/s their means."""
    m = run["metrics"]
    if agents is None:
        return {key: m.get(key) for key in AGREE}
    per = [m.get("agents", {}).get(n, {}) for n in agents]

    def mean(key: str) -> float | None:
        v = [a[key] for a in per if a.get(key) is not None]
        return float(np.mean(v)) if v else None

    return {"err_p50": percentile(pooled([run], after=SETTLE, agents=agents), 50),
            "held": mean("held"),
            "nees4_inside": fraction_inside(pooled([run], "nees4", agents=agents),
                                            nees_bounds(4)),
            "kbytes_per_s": mean("kbytes_per_s")}


def real_agreement(res: Results, scene: str, *, every_agent: bool = False) -> dict[str, Any]:
    """The real run against the scene's lockstep seeds: each measure agrees when it lies
    within the lockstep values' range widened by 25 % of its ends. On a liar's scene the
    measures are the honest agents' (the liar's logged track mixes the lies it sent with its
    belief), as the page's other columns are; ``every_agent``: every agent's, the measure
    used until 2026-12-05. Also returns each run's measures (``lockstep``, ``real``)."""
    real = res.real.get(scene)
    runs = ok(res.runs(scene))
    agents = None if every_agent else res.honest(scene)
    theirs = [agreement_measures(r, agents) for r in runs]
    mine = agreement_measures(real, agents) if real is not None and "metrics" in real else None
    out: dict[str, Any] = {"measures": {}, "agrees": False, "ran": real is not None,
                           "agents": agents, "lockstep": theirs, "real": mine}
    if mine is None or not runs:
        out["why"] = "no real run" if real is None else real.get("error", "no lockstep run")
        return out
    agree = True
    for key in AGREE:
        lock = [m[key] for m in theirs if m[key] is not None]
        v = mine[key]
        if not lock or v is None:
            out["measures"][key] = (v, None, None, None)
            agree = False
            continue
        lo, hi = min(lock) - 0.25 * abs(min(lock)), max(lock) + 0.25 * abs(max(lock))
        inside = lo <= v <= hi
        agree &= inside
        out["measures"][key] = (v, min(lock), max(lock), inside)
    out["agrees"] = agree
    return out


__all__ = ["AGREE", "agreement_measures", "distrust", "liar_ratios", "real_agreement",
           "recoveries", "search_pairs", "search_values"]
