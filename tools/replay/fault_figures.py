"""The faults on the report's figures: fault windows shaded on a time plot, the reputation
figure (each receiver's score of each peer, the moment it first refused it), and a liar's
published track beside its private one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from agents.belief.params import ReputationParams
from tools.replay.faults import Faults, Published
from tools.replay.metrics import Analysis

KIND_COLOURS = {"byzantine": "tab:red", "faults": "tab:orange", "kill": "0.4",
                "world": "tab:purple"}
SHADE_ALPHA = 0.13


def shade(ax: Axes, an: Analysis, faults: Faults | None, *, legend: bool = True) -> list[
        tuple[float, float]]:
    """Shade every fault window on a plot over run time; one legend entry per kind. Returns
    the shaded spans (run-relative seconds), for tests."""
    if faults is None:
        return []
    spans = []
    labelled: set[str] = set()
    for w in faults.windows:
        a, b = float(w.start - an.t_start), float(w.end - an.t_start)
        label = None
        if legend and w.kind not in labelled:
            labelled.add(w.kind)
            label = f"fault: {w.kind}"
        ax.axvspan(a, b, color=KIND_COLOURS.get(w.kind, "0.5"), alpha=SHADE_ALPHA, lw=0,
                   label=label, zorder=0)
        spans.append((a, b))
    return spans


def reputation(an: Analysis, faults: Faults, out: Path,
               save: Callable[[Figure, Path], Path]) -> Path | None:
    """Per receiver: its score of each peer over time, the refusal threshold, and a marker
    where it first refused the peer; fault windows shaded."""
    receivers = sorted({r for r, _ in faults.trust})
    if not receivers:
        return None
    fig = Figure(figsize=(9, 2.4 * len(receivers) + 0.8))
    peers = sorted({p for _, p in faults.trust})
    colour = {p: f"C{k % 10}" for k, p in enumerate(peers)}
    axes = [fig.add_subplot(len(receivers), 1, k + 1) for k in range(len(receivers))]
    for ax, receiver in zip(axes, receivers, strict=True):
        ag = an.agents.get(receiver)
        threshold = (ag.config.reputation.threshold if ag is not None and ag.config is not None
                     else ReputationParams().threshold)
        shade(ax, an, faults)
        for (r, peer), trust in sorted(faults.trust.items()):
            if r != receiver:
                continue
            ax.step(an.rel(trust.t), trust.score, where="post", color=colour[peer], lw=1.2,
                    label=f"score of {peer}")
            if trust.first_refused is not None:
                t = float(trust.first_refused - an.t_start)
                ax.axvline(t, color=colour[peer], ls="--", lw=1.0)
                ax.annotate(f"{peer} first refused, {t:.1f} s", (t, 0.05), fontsize=7,
                            rotation=90, va="bottom", ha="right", color=colour[peer])
        ax.axhline(threshold, color="k", ls=":", lw=0.9, label=f"threshold {threshold:g}")
        ax.set_ylim(0.0, 1.02)
        ax.set_ylabel(f"{receiver}: trust")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left", ncol=2)
    axes[0].set_title("Reputation: each agent's score of each peer (dashed: first refused)")
    axes[-1].set_xlabel("time (s)")
    return save(fig, out / "reputation.png")


def draw_published(ax: Axes, liar: Published) -> None:
    """A liar's published positions (crosses) over its private track (dots), on a map."""
    if liar.private_xy.size:
        ax.plot(liar.private_xy[:, 0], liar.private_xy[:, 1], ".", color="tab:blue", ms=3,
                zorder=4, label=f"{liar.agent} private track")
    if liar.published_xy.size:
        lying = np.zeros(liar.published_t.size, dtype=bool)
        for w in liar.lying:
            lying |= (liar.published_t >= w.start) & (liar.published_t <= w.end)
        if lying.any():
            ax.plot(liar.published_xy[lying, 0], liar.published_xy[lying, 1], "x",
                    color="tab:red", ms=3, zorder=5, label=f"{liar.agent} published (lie)")

