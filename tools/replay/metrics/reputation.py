"""The reputation family: when an agent stopped trusting a peer (a liar), from its own log.

An agent distrusts a peer at the moments its log says so: a ``peer_track`` event from
that peer whose outcome is ``distrusted`` (reputation refused to fuse it), or a
``belief`` record (1 Hz) in which the peer's score is below the agent's reputation
threshold. :func:`liar_trace` measures, after a liar's onset, how soon each honest agent
first distrusted it and how much of what it sent was still fused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tools.replay.load import ProcessLog
from tools.replay.metrics.common import FloatArray

DISTRUSTED = "distrusted"


def distrust_times(log: ProcessLog, peer: str, threshold: float) -> FloatArray:
    """Log times at which the agent distrusted ``peer``, sorted."""
    out: list[float] = []
    for line in log.events("peer_track", "belief"):
        if line["event"] == "peer_track":
            if line.get("peer") == peer and line.get("outcome") == DISTRUSTED:
                out.append(float(line["t"]))
            continue
        peers = line.get("peers")
        entry = peers.get(peer) if isinstance(peers, dict) else None
        score = entry.get("score") if isinstance(entry, dict) else None
        if isinstance(score, int | float) and not isinstance(score, bool) and score < threshold:
            out.append(float(line["t"]))
    return np.sort(np.asarray(out, dtype=np.float64))


def first_distrust(log: ProcessLog, peer: str, after: float, threshold: float) -> float | None:
    """The first log time at or after ``after`` at which the agent distrusted ``peer``."""
    times = distrust_times(log, peer, threshold)
    later = times[times >= after]
    return float(later[0]) if later.size else None


def liar_trace(log: ProcessLog, liar: str, onset: float, threshold: float) -> dict[str, Any]:
    """What one honest agent made of the liar from ``onset`` (absolute time) on: seconds
    from the onset to its first distrust (None: never), the liar's TRACKs that carried new
    measurements (fused or refused) and how many were fused, and the liar's last score."""
    after = [e for e in log.events("peer_track")
             if e.get("peer") == liar and float(e["t"]) >= onset
             and e.get("outcome", "fused") in ("fused", DISTRUSTED)]
    first = first_distrust(log, liar, onset, threshold)
    scores = [e.get("score") for e in after if isinstance(e.get("score"), int | float)]
    return {
        "distrust_s": None if first is None else first - onset,
        "tracks_after_onset": len(after),
        "fused_after_onset": sum(1 for e in after if e.get("outcome", "fused") == "fused"),
        "score_end": scores[-1] if scores else None,
    }
