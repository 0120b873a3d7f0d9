"""One-line status and the end-of-run summary an agent prints (from its status dict)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def _kb(n: float, seconds: float) -> str:
    return f"{n / 1000.0 / max(seconds, 1e-9):.1f}KB/s"


def status_line(s: Mapping[str, Any], elapsed: float) -> str:
    """``walnut 12s TRACK pose (1.20, 3.40, 45°) track (2.10, 2.20) ±0.05 peers 1/1 …``."""
    pose = s.get("pose")
    where = "pose ?" if pose is None else (
        f"pose ({pose[0]:.2f}, {pose[1]:.2f}, {math.degrees(pose[2]):.0f}°)"
    )
    track = s.get("track")
    seen = "track -" if track is None else (
        f"track ({track['x'][0]:.2f}, {track['x'][1]:.2f}) ±{math.sqrt(track['uncertainty']):.2f}"
    )
    peers = s.get("peers", {})
    alive = sum(1 for p in peers.values() if not p.get("lost"))
    b = s.get("bytes", {})
    rejected = sum(s.get("rejected", {}).values()) + sum(
        v for k, v in s.get("core_counters", {}).items()
        if k.startswith(("implausible", "stale_epoch", "peer_table_full", "internal_error"))
    )
    car = s.get("car") or {}
    return (
        f"{s.get('agent')} {elapsed:4.0f}s {str(s.get('mode') or '-').upper():9s} {where} "
        f"{seen} peers {alive}/{len(peers)} car {car.get('state', '-')} "
        f"out {_kb(b.get('out', 0), elapsed)} in {_kb(b.get('in', 0), elapsed)} "
        f"rejected {rejected}" + (f" warnings {len(s['warnings'])}" if s.get("warnings") else "")
    )


def summary_text(s: Mapping[str, Any], elapsed: float, warned: Sequence[str]) -> str:
    """What happened in this run, for the console when the agent stops."""
    b, d = s.get("bytes", {}), s.get("datagrams", {})
    rejected = {**s.get("rejected", {})}
    for k, v in s.get("core_counters", {}).items():
        if k.startswith(("implausible", "stale_epoch", "peer_table_full", "internal_error")):
            rejected[k] = rejected.get(k, 0) + v
    lines = [
        f"{s.get('agent')} (epoch {s.get('epoch')}) ran {elapsed:.0f} s: "
        f"sent {d.get('out', 0)} datagrams ({_kb(b.get('out', 0), elapsed)}), "
        f"received {d.get('in', 0)} ({_kb(b.get('in', 0), elapsed)})",
        "  peers: " + (", ".join(
            f"{n}{' (lost)' if p.get('lost') else ''} score {p.get('score', 0):.2f}"
            for n, p in sorted(s.get("peers", {}).items())) or "none"),
        "  rejected: " + (", ".join(f"{k} {v}" for k, v in sorted(rejected.items())) or "none"),
    ]
    if warned:
        lines.append("  warnings during the run:")
        lines += [f"    {w}" for w in dict.fromkeys(warned)]
    return "\n".join(lines)
