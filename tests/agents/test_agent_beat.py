"""The agent's beat carries what news does not: it decides only when nothing was decided
on since the last beat, so decisions are neither doubled nor more than two beats apart."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from tools.experiments.lockstep import Lockstep
from worlds.arena import load_arena, shipped_arena


def test_a_beat_decides_only_when_no_decision_was_made_since_the_last_beat() -> None:
    ls = Lockstep(load_arena(shipped_arena("two_cars")), seed=3)
    agent = ls.agents["walnut"].agent
    node = agent.node
    calls: list[tuple[str, float, bool]] = []  # what, when, decided
    tick, decide = node.tick, node.decide

    def on_tick(now: float, *, decide: bool = True) -> Any:
        calls.append(("beat", now, decide))
        return tick(now, decide=decide)

    def on_decide(now: float) -> Any:
        calls.append(("news", now, True))
        return decide(now)

    node.tick = on_tick  # type: ignore[method-assign]
    node.decide = on_decide  # type: ignore[method-assign]
    try:
        ls.run(8.0)
    finally:
        ls.close()
    beats = [k for k, c in enumerate(calls) if c[0] == "beat"]
    news = sum(1 for c in calls if c[0] == "news")
    assert len(beats) > 70 and news > 30  # 8 s at 10 Hz, and observations deciding
    for previous, k in pairwise(beats):
        since = any(c[2] for c in calls[previous + 1:k])  # news after the previous beat
        assert calls[k][2] is not since, (calls[previous:k + 1])
    decided = [c[1] for c in calls if c[2]]
    period = agent.period
    assert max(b - a for a, b in pairwise(decided)) <= 2 * period + 1e-9
