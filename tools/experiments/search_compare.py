"""Search with and without shared looks: ``python -m tools.experiments.search_compare``.

The target is hidden (standing still) at ``--places`` random places of the search
arena (``scenarios/arenas/search.toml``: an 8 m x 6 m room, two crates, two cars
started back to back at its west end, mirror images of each other), none of
them in a camera's view at the start. Each place is searched three times, in
lockstep, with the world seed of that place:

- ``share``: the agents send and apply LOOKs (``search.share`` on, the default);
- ``none``: no LOOK sent or applied (``search.share`` off): each robot searches
  on its own looks only;
- ``oracle``: no LOOKs, but every look is applied by every robot at once
  (:class:`~tools.experiments.lockstep.Lockstep` ``oracle_looks``).

Per run: the time to the first detection by any robot (the run stops there, or
at ``--duration``: then it counts as ``--duration``, and is reported as a miss),
and the footprint redundancy Σ|Aᵢ| / |∪Aᵢ| of the true camera footprints until
then (room cells of 0.1 m, every 0.25 s, line of sight through the crates
blocked): 1 when no cell was seen by two robots, 2 when both saw the same.
Bytes sent per agent per second, by kind, over the search.

Medians with Mann-Whitney U (one-sided: sharing faster / less redundant than
none) and the paired Wilcoxon signed-rank test over the places.

Measured (commit 377bcd1, ``--places 30 --duration 90 --jobs 1``; 2.5 min of CPU,
9-13 min of wall time on a busy 2-core machine), places of ``--seed 1`` and of
``--seed 101``; no trial reached 90 s:

| | share | none | oracle | share / none | p time (Wilcoxon; Mann-Whitney) | p redundancy |
|---|---|---|---|---|---|---|
| median time to first detection, seed 1 | 10.4 s | 13.6 s | 10.7 s | 0.77 | 0.00055; 0.0039 | |
| same, seed 101 | 10.9 s | 13.9 s | 10.9 s | 0.79 | 0.00013; 0.031 | |
| median redundancy, seed 1 | 1.32 | 1.69 | 1.37 | | | 4.2e-09 |
| same, seed 101 | 1.30 | 1.75 | 1.27 | | | 4.5e-11 |

The issue's target, sharing ≤ 0.7 × no sharing, is missed by 0.07-0.09. The oracle
(every look everywhere at once) is no faster than LOOKs (share / oracle 0.97 and
1.00): the gap is not in the sharing but in what both searches must do anyway.
Every place lies 3.1 m or more from both starts (x >= 3.8 m); with sharing
the first robot leaves its start after 2.5 s (median of 6 places) instead of
4.85 s (each needs to turn through only half the start's surroundings), and from
there the two searches take about as long (the drive east and a pose lost for a
while when a camera faces the far wall, out of tag range).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tools.replay.metrics.footprint import camera_of, lattice, redundancy, sees
from worlds.arena import Arena, Waypoints, load_arena

ARENA = Path(__file__).resolve().parents[2] / "scenarios" / "arenas" / "search.toml"
VARIANTS = ("share", "none", "oracle")
SAMPLE = 0.25  # s between footprints
CHECK = 0.05  # s between checks for a detection
TARGET_SPEED = 0.5  # m/s, declared in the site (the target itself stands still)


def seen_cells(arena: Arena, pose: tuple[float, float, float],
               px: np.ndarray, py: np.ndarray) -> np.ndarray:
    """Flat indices of the points the camera of a car at ``pose`` sees (range, field of
    view, line of sight past obstacles at least as tall as the camera: the footprint
    metric's rules, :func:`tools.replay.metrics.footprint.sees`)."""
    return np.flatnonzero(sees(arena, camera_of(arena, *pose), px, py))


def hidden_places(arena: Arena, n: int, seed: int) -> list[tuple[float, float]]:
    """``n`` places 0.35 m clear of walls and obstacles that no camera could see from where
    the cars start, whichever way it turned (out of range, or behind a crate)."""
    rng = np.random.default_rng(seed)
    room = arena.room
    out: list[tuple[float, float]] = []
    starts = [(c.x, c.y, c.heading) for c in arena.cars]
    while len(out) < n:
        x = float(rng.uniform(0.35, room.size_x - 0.35))
        y = float(rng.uniform(0.35, room.size_y - 0.35))
        clear = all(
            abs(x - ob.x) > ob.size_x / 2 + 0.35 or abs(y - ob.y) > ob.size_y / 2 + 0.35
            for ob in arena.obstacles
        )
        px, py = np.array([x]), np.array([y])
        around = [(sx, sy, h + k * math.pi / 4) for sx, sy, h in starts for k in range(8)]
        if clear and not any(seen_cells(arena, p, px, py).size for p in around):
            out.append((round(x, 3), round(y, 3)))
    return out


def arena_with_target(arena: Arena, place: tuple[float, float]) -> Arena:
    """The arena with its target standing at ``place`` (declared max speed 0.5 m/s)."""
    assert arena.target is not None
    site = arena.site
    assert site.target is not None
    site = replace(site, target=replace(site.target, max_speed=TARGET_SPEED))
    target = replace(arena.target, motion=Waypoints((place, place), 0.0, False))
    return replace(arena, site=site, target=target)


def run_trial(place_index: int, place: tuple[float, float], variant: str, seed: int,
              duration: float) -> dict[str, Any]:
    from tools.agent_config import agent_config
    from tools.experiments.lockstep import Lockstep

    base = load_arena(ARENA)
    arena = arena_with_target(base, place)
    share = variant == "share"

    def config(name: str) -> Any:
        c = agent_config(arena, name)
        return replace(c, search=replace(c.search, share=share))

    ls = Lockstep(arena, seed, None, config=config, oracle_looks=variant == "oracle")
    sent: dict[str, Counter[str]] = {name: Counter() for name in ls.agents}
    for name, la in ls.agents.items():
        original = la.agent.datagrams_to_send

        def counting(now: float, _orig: Any = original, _tally: Counter[str] = sent[name]) -> Any:
            out = _orig(now)
            for o in out:
                if not o.car:
                    _tally[o.kind] += len(o.data)
            return out

        la.agent.datagrams_to_send = counting  # type: ignore[method-assign]
    px, py, n_cells = lattice(arena)
    covered: dict[str, set[int]] = {name: set() for name in ls.agents}
    first: float | None = None
    finder: str | None = None
    began = time.perf_counter()
    next_sample = 0.0
    try:
        while ls.t - ls.t0 < duration - 1e-9:
            elapsed = ls.t - ls.t0
            if elapsed >= next_sample - 1e-9:
                for name, la in ls.agents.items():
                    pose = ls.world.scene.cars[la.car_id].pose()
                    covered[name].update(seen_cells(arena, pose, px, py).tolist())
                next_sample += SAMPLE
            for name, la in ls.agents.items():
                if la.core.stats["detections"] > 0:
                    first, finder = elapsed, name
                    break
            if first is not None:
                break
            ls.run_until(ls.t0 + elapsed + CHECK)
        end = ls.t - ls.t0
        union = set().union(*covered.values())
        return {
            "place": place_index, "x": place[0], "y": place[1], "variant": variant, "seed": seed,
            "first_detection_s": first, "finder": finder, "searched_s": end,
            "redundancy": redundancy(covered),
            "union_fraction": len(union) / n_cells,
            "bytes_per_s": {name: {k: v / max(end, 1e-9) for k, v in c.items()}
                            for name, c in sent.items()},
            "looks": {name: dict(la.core.seeker.stats) for name, la in ls.agents.items()},
            "wall_s": time.perf_counter() - began,
        }
    finally:
        ls.close()


def _job(args: tuple[int, tuple[float, float], str, int, float]) -> dict[str, Any]:
    return run_trial(*args)


def summarise(results: list[dict[str, Any]], duration: float) -> dict[str, Any]:
    from scipy.stats import mannwhitneyu, wilcoxon

    by: dict[str, dict[int, dict[str, Any]]] = {v: {} for v in VARIANTS}
    for r in results:
        by[r["variant"]][r["place"]] = r
    places = sorted(set.intersection(*(set(by[v]) for v in VARIANTS)))

    def times(v: str) -> np.ndarray:
        return np.array([by[v][p]["first_detection_s"] if by[v][p]["first_detection_s"]
                         is not None else duration for p in places])

    def redundancy(v: str) -> np.ndarray:
        return np.array([by[v][p]["redundancy"] for p in places], dtype=np.float64)

    out: dict[str, Any] = {"places": len(places), "duration_s": duration, "variants": {}}
    for v in VARIANTS:
        t, red = times(v), redundancy(v)
        sent = [sum(per.values()) for p in places for per in by[v][p]["bytes_per_s"].values()]
        look = [per.get("look", 0.0) for p in places for per in by[v][p]["bytes_per_s"].values()]
        out["variants"][v] = {
            "median_s": float(np.median(t)), "mean_s": float(np.mean(t)),
            "q25_s": float(np.percentile(t, 25)), "q75_s": float(np.percentile(t, 75)),
            "misses": int(sum(by[v][p]["first_detection_s"] is None for p in places)),
            "redundancy_median": float(np.nanmedian(red)),
            "redundancy_mean": float(np.nanmean(red)),
            "bytes_per_s_mean": float(np.mean(sent)), "look_bytes_per_s_mean": float(np.mean(look)),
        }
    tests: dict[str, Any] = {}
    for a, b in (("share", "none"), ("oracle", "none"), ("share", "oracle")):
        ta, tb = times(a), times(b)
        ra, rb = redundancy(a), redundancy(b)
        entry: dict[str, Any] = {
            "median_ratio": float(np.median(ta) / np.median(tb)),
            "time_mannwhitney_p": float(mannwhitneyu(ta, tb, alternative="less").pvalue),
            "redundancy_mannwhitney_p": float(mannwhitneyu(ra, rb, alternative="less").pvalue),
        }
        diff = ta - tb
        entry["time_wilcoxon_p"] = (float(wilcoxon(ta, tb, alternative="less").pvalue)
                                    if np.any(diff != 0) else None)
        entry["faster_places"] = int(np.sum(diff < 0))
        entry["slower_places"] = int(np.sum(diff > 0))
        tests[f"{a}_vs_{b}"] = entry
    out["tests"] = tests
    return out


def table(summary: dict[str, Any]) -> str:
    lines = [f"{summary['places']} hidden places, {summary['duration_s']:.0f} s at most "
             "(a miss counts as that)", "",
             "| variant | median s | IQR s | misses | redundancy median | mean | B/s per agent | "
             "LOOK B/s |", "|---|---|---|---|---|---|---|---|"]
    for v, s in summary["variants"].items():
        lines.append(f"| {v} | {s['median_s']:.1f} | {s['q25_s']:.1f}-{s['q75_s']:.1f} | "
                     f"{s['misses']} | {s['redundancy_median']:.3f} | {s['redundancy_mean']:.3f} "
                     f"| {s['bytes_per_s_mean']:.0f} | {s['look_bytes_per_s_mean']:.0f} |")
    lines += ["", "| comparison | median ratio | time p (Mann-Whitney, less) | time p (Wilcoxon "
              "paired) | faster / slower places | redundancy p (Mann-Whitney, less) |",
              "|---|---|---|---|---|---|"]
    for k, t in summary["tests"].items():
        w = "-" if t["time_wilcoxon_p"] is None else f"{t['time_wilcoxon_p']:.2g}"
        lines.append(f"| {k} | {t['median_ratio']:.2f} | {t['time_mannwhitney_p']:.2g} | {w} | "
                     f"{t['faster_places']} / {t['slower_places']} | "
                     f"{t['redundancy_mannwhitney_p']:.2g} |")
    return "\n".join(lines)


def compare(places: int = 30, seed: int = 1, duration: float = 90.0, jobs: int = 2, *,
            variants: tuple[str, ...] = VARIANTS,
            progress: Callable[[int, int, dict[str, Any], float], None] | None = None,
            ) -> dict[str, Any]:
    """Every variant at ``places`` hidden places (drawn from ``seed``; world seeds
    ``seed + k``): ``{"places": [(x, y)], "results": [one dict per trial],
    "summary": summarise(...) (when every variant ran), "wall_s": seconds}``.
    ``progress(n, total, result, elapsed)`` is called after each trial."""
    hidden = hidden_places(load_arena(ARENA), places, seed)
    jobs_list = [(k, place, v, seed + k, duration)
                 for k, place in enumerate(hidden) for v in variants]
    results: list[dict[str, Any]] = []
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for n, r in enumerate(pool.map(_job, jobs_list), start=1):
            results.append(r)
            if progress is not None:
                progress(n, len(jobs_list), r, time.perf_counter() - began)
    out: dict[str, Any] = {"places": hidden, "results": results}
    if set(variants) == set(VARIANTS):
        out["summary"] = summarise(results, duration)
    out["wall_s"] = time.perf_counter() - began
    return out


def _print_progress(n: int, total: int, r: dict[str, Any], elapsed: float) -> None:
    t = r["first_detection_s"]
    print(f"[{n}/{total} {elapsed:.0f}s] place {r['place']} {r['variant']}: "
          f"{'miss' if t is None else f'{t:.1f} s'} redundancy {r['redundancy']}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--places", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1, help="places and world seeds start here")
    parser.add_argument("--duration", type=float, default=90.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", type=Path, default=Path("runs/search-compare.json"))
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if not set(variants) <= set(VARIANTS):
        parser.error(f"--variants: of {', '.join(VARIANTS)}")
    out = compare(args.places, args.seed, args.duration, args.jobs, variants=tuple(variants),
                  progress=_print_progress)
    if "summary" in out:
        print(table(out["summary"]))
    print(f"{len(out['results'])} trials in {out['wall_s']:.0f} s of wall time")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
