"""``python -m tools.experiments.evidence.compare OLD NEW``: two regenerations' lockstep runs,
paired by seed.

Each regeneration keeps every run's metrics in its cache (``runs/evidence-cache/``, or the
directory a worktree ran it in); a change to the agents is judged by running the suite
before and after it and comparing the two caches here: per scene and variant, each
metric's mean over the seeds both have, before and after, the paired Wilcoxon p and how
many seeds got better and worse. The README's "What moved" paragraphs come from this.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tools.experiments.evidence.jobs import cached_results
from tools.experiments.evidence.stats import fp, paired_p

METRICS = (
    "err_p50", "err_p95", "held", "nees4_inside", "nees4_mean", "speed_within_10",
    "pose_heading_p50_deg", "pose_heading_p95_deg", "pose_nees1_mean", "first_detection_s",
    "kbytes_per_s",
)
"""Lower is better for each but ``held``, ``nees4_inside`` and ``speed_within_10``."""
HIGHER_IS_BETTER = frozenset({"held", "nees4_inside", "speed_within_10"})


def _value(result: dict[str, Any], metric: str) -> float | None:
    v = result.get("metrics", {}).get(metric)
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def compare(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]],
            metrics: Sequence[str] = METRICS) -> list[str]:
    """The table's lines: a header per scene and variant, a line per metric."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for key in sorted(set(old) & set(new)):
        groups[(str(old[key].get("scene")), str(old[key].get("variant")))].append(key)
    lines: list[str] = []
    for (scene, variant), keys in sorted(groups.items()):
        lines.append(f"{scene} {variant} ({len(keys)} seeds in both)")
        for metric in metrics:
            pairs = [(a, b) for a, b in ((_value(old[k], metric), _value(new[k], metric))
                                         for k in keys) if a is not None and b is not None]
            if not pairs:
                continue
            before = statistics.fmean(a for a, _ in pairs)
            after = statistics.fmean(b for _, b in pairs)
            sign = 1.0 if metric in HIGHER_IS_BETTER else -1.0
            better = sum(1 for a, b in pairs if sign * (b - a) > 0)
            worse = sum(1 for a, b in pairs if sign * (b - a) < 0)
            p = paired_p([a for a, _ in pairs], [b for _, b in pairs])
            lines.append(f"  {metric:22s} {before:10.4f} -> {after:10.4f}  p {fp(p):>8s}  "
                         f"better {better} / worse {worse}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.experiments.evidence.compare",
        description="Two evidence caches' lockstep runs, paired by seed.")
    parser.add_argument("old", type=Path, help="the cache before (runs/evidence-cache/)")
    parser.add_argument("new", type=Path, help="the cache after")
    args = parser.parse_args(argv)
    caches = []
    for directory in (args.old, args.new):
        results = cached_results(directory)
        if not results:
            print(f"compare: no lockstep results in {directory}/lockstep/ (a regeneration's "
                  "cache, e.g. runs/evidence-cache)", file=sys.stderr)
            return 2
        caches.append(results)
    lines = compare(caches[0], caches[1])
    if not lines:
        print("compare: the two caches have no run in common", file=sys.stderr)
        return 2
    try:
        print("\n".join(lines))
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head` closed the pipe: that is not an error
        from tools.cli import quiet_stdout

        quiet_stdout()
    return 0


if __name__ == "__main__":
    sys.exit(main())
