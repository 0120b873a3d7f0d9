"""The report's figures (PNG), drawn with matplotlib's Agg canvas and no pyplot state.

Each function takes the analysis, writes one file into ``out`` and returns its
path, or None when the run holds nothing to draw. Times are run-relative
seconds (0 = the world's first log line).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from tools.replay.fault_figures import draw_published, shade
from tools.replay.fault_figures import reputation as reputation_figure
from tools.replay.faults import Faults
from tools.replay.metrics import (
    SETTLE,
    Analysis,
    FloatArray,
    GridRecord,
    nees_bounds,
    track_errors,
)
from tools.replay.rerun import AgentRerun

DPI = 90
UNCERTAINTY_CMAP = "RdYlGn_r"  # green = confident, as in the seed's trajectory plots
UNCERTAINTY_MAX = 0.5


def _colour(index: int) -> str:
    return f"C{index % 10}"


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI, format="png")
    return path


def _room(ax: Axes, an: Analysis) -> None:
    if an.room_cells is None:
        return
    w, h = an.room_cells[0] * an.cell_size, an.room_cells[1] * an.cell_size
    ax.add_patch(Rectangle((0, 0), w, h, fill=False, edgecolor="0.3", linewidth=1.0))


def _span(an: Analysis) -> float:
    """A length that bounds any sensible position error: the room's (or the truth's) diagonal."""
    if an.room_cells is not None:
        return float(np.hypot(*an.room_cells) * an.cell_size)
    if an.truth is not None and an.truth.t.size:
        xy = an.truth.target[:, :2]
        return float(np.hypot(*(np.nanmax(xy, axis=0) - np.nanmin(xy, axis=0)))) + 2.0
    return 10.0


def _cap(ax: Axes, top: float) -> None:
    """Keep a diverged estimate from flattening the rest of the plot (its values run off)."""
    _, hi = ax.get_ylim()
    ax.set_ylim(0.0, min(hi, top))


def _frame(ax: Axes, an: Analysis) -> None:
    """The plot area of the room (or of the truth), whatever the estimates claim."""
    if an.room_cells is not None:
        w, h = an.room_cells[0] * an.cell_size, an.room_cells[1] * an.cell_size
        ax.set_xlim(-0.3, w + 0.3)
        ax.set_ylim(-0.3, h + 0.3)
    elif an.truth is not None and an.truth.t.size:
        pts = [an.truth.target[:, :2], *(c[:, :2] for c in an.truth.cars.values())]
        xy = np.concatenate(pts)
        lo, hi = np.nanmin(xy, axis=0), np.nanmax(xy, axis=0)
        ax.set_xlim(lo[0] - 1.0, hi[0] + 1.0)
        ax.set_ylim(lo[1] - 1.0, hi[1] + 1.0)


def _over_time(
    an: Analysis, rows: int, height: float, *, truth: bool = False
) -> tuple[Figure, list[Axes]] | None:
    """A figure of ``rows`` plots over run time, one above the other; None when there are no
    agents (or, with ``truth``, no ground truth to plot against)."""
    if not an.agents or (truth and an.truth is None):
        return None
    fig = Figure(figsize=(9, height))
    return fig, [fig.add_subplot(rows, 1, k + 1) for k in range(rows)]


def uncertainty(an: Analysis, out: Path, faults: Faults | None = None) -> Path | None:
    """Grid mean var (dashed) and track trace(P)/4 (solid) over time, per agent."""
    figure = _over_time(an, 1, 4.5)
    if figure is None:
        return None
    fig, (ax,) = figure
    for i, (name, ag) in enumerate(an.agents.items()):
        c = _colour(i)
        ax.plot(an.rel(an.times), ag.series.uncertainty, color=c, lw=1.2, label=f"{name} track")
        if ag.grids:
            t = an.rel([g.t for g in ag.grids])
            ax.plot(t, ag.grid_var, color=c, lw=1.2, ls="--", label=f"{name} grid mean var")
    shade(ax, an, faults)
    ax.axhline(0.15, color="0.5", ls=":", lw=1.0, label="0.15 (seed: track after 20 s)")
    ax.axvline(SETTLE, color="0.8", lw=0.8)
    ax.set_ylim(0.0, 1.1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("uncertainty: trace(P)/4, grid var")
    ax.set_title("Uncertainty of the grid (dashed) and of the track (solid)")
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    ax.grid(alpha=0.3)
    return _save(fig, out / "uncertainty.png")


def speed(an: Analysis, out: Path, faults: Faults | None = None) -> Path | None:
    """Track speed over time, the speed at the moments of detection, and the true speed."""
    figure = _over_time(an, 1, 4.5)
    if figure is None:
        return None
    fig, (ax,) = figure
    for i, (name, ag) in enumerate(an.agents.items()):
        c = _colour(i)
        v = np.hypot(ag.series.x[:, 2], ag.series.x[:, 3])
        ax.plot(an.rel(an.times), v, color=c, lw=0.8, alpha=0.6, label=f"{name} track speed")
        if ag.speeds:
            ax.plot(
                an.rel([s.t for s in ag.speeds]),
                [s.speed for s in ag.speeds],
                ".",
                color=c,
                ms=4,
                label=f"{name} at detections",
            )
    if an.truth is not None:
        ax.plot(
            an.rel(an.truth.t),
            np.hypot(an.truth.target[:, 2], an.truth.target[:, 3]),
            "k:",
            lw=1.5,
            label="true speed",
        )
    shade(ax, an, faults)
    _cap(ax, 3.0)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("speed (m/s)")
    ax.set_title("Speed estimates against the truth")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    return _save(fig, out / "speed.png")


def trajectories(an: Analysis, out: Path, faults: Faults | None = None) -> Path | None:
    """Per agent: the true paths of the target and the cars, estimates coloured by uncertainty."""
    if not an.agents:
        return None
    n = len(an.agents)
    fig = Figure(figsize=(4.6 * n + 1.0, 4.8))
    axes = [fig.add_subplot(1, n, k + 1) for k in range(n)]
    scatter = None
    for ax, (name, ag) in zip(axes, an.agents.items(), strict=True):
        _room(ax, an)
        if an.truth is not None:
            ax.plot(an.truth.target[:, 0], an.truth.target[:, 1], color="0.6", lw=1.0,
                    label="target (truth)")  # fmt: skip
            for j, (car, xy) in enumerate(sorted(an.truth.cars.items())):
                ax.plot(xy[:, 0], xy[:, 1], color=_colour(j), lw=0.8, alpha=0.7,
                        label=f"{car} (truth)")  # fmt: skip
        liar = faults.liars.get(name) if faults is not None else None
        if liar is not None:  # its series mixes the lies it sent with its own belief
            draw_published(ax, liar)
            _frame(ax, an)
            ax.set_aspect("equal")
            ax.set_title(f"{name}: private and published track")
            ax.set_xlabel("x (m)")
            ax.set_ylabel("y (m)")
            ax.legend(fontsize=7, loc="upper right")
            continue
        ok = ag.series.valid
        scatter = ax.scatter(
            ag.series.x[ok, 0],
            ag.series.x[ok, 1],
            c=ag.series.uncertainty[ok],
            cmap=UNCERTAINTY_CMAP,
            vmin=0.0,
            vmax=UNCERTAINTY_MAX,
            s=5,
            zorder=3,
        )
        _frame(ax, an)
        ax.set_aspect("equal")
        ax.set_title(f"{name}: track estimates")
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.legend(fontsize=7, loc="upper right")
    if scatter is not None:
        fig.colorbar(scatter, ax=axes, label="trace(P)/4", shrink=0.8)
    return _save(fig, out / "trajectories.png")


def errors(an: Analysis, out: Path, faults: Faults | None = None) -> Path | None:
    """Position and velocity error over time per agent, and the agents' disagreement."""
    figure = _over_time(an, 3, 7.5, truth=True)
    if figure is None:
        return None
    fig, axes = figure
    t = an.rel(an.times)
    for i, (name, ag) in enumerate(an.agents.items()):
        if ag.errors is None:
            continue
        axes[0].plot(t, ag.errors.pos_err, color=_colour(i), lw=1.0, label=name)
        axes[1].plot(t, ag.errors.vel_err, color=_colour(i), lw=1.0, label=name)
        liar = faults.liars.get(name) if faults is not None else None
        if liar is not None and an.truth is not None:
            for tt, xy, style, what in ((liar.private_t, liar.private_xy, "-.", "private"),
                                        (liar.published_t, liar.published_xy, ":", "published")):
                if tt.size:
                    err = np.hypot(*(xy - an.truth.target_at(tt)[:, :2]).T)
                    axes[0].plot(an.rel(tt), err, ls=style, color=_colour(i), lw=1.0,
                                 label=f"{name} {what} track")
    for k, ((a, b), d) in enumerate(an.agreement.items()):
        axes[2].plot(t, d, color=_colour(k), lw=1.0, label=f"{a} – {b}")
    labels = ("position error (m)", "velocity error (m/s)", "distance between tracks (m)")
    for ax, label, top in zip(axes, labels, (_span(an), 5.0, _span(an)), strict=True):
        shade(ax, an, faults, legend=ax is axes[0])
        _cap(ax, top)
        ax.set_ylabel(label)
        ax.axvline(SETTLE, color="0.8", lw=0.8)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8, loc="upper right")
    axes[0].set_title("Estimation error against the truth, and agreement between agents")
    axes[2].set_xlabel("time (s)")
    return _save(fig, out / "error.png")


def nees(an: Analysis, out: Path, faults: Faults | None = None) -> Path | None:
    """NEES of each track (4-state and position) with the two-sided 95 % chi-square bounds."""
    figure = _over_time(an, 2, 6.0, truth=True)
    if figure is None:
        return None
    fig, axes = figure
    t = an.rel(an.times)
    for ax, dof in zip(axes, (4, 2), strict=True):
        lo, hi = nees_bounds(dof)
        for i, (name, ag) in enumerate(an.agents.items()):
            if ag.errors is not None:
                values = ag.errors.nees4 if dof == 4 else ag.errors.nees2
                ax.plot(t, values, color=_colour(i), lw=0.8, label=name)
        shade(ax, an, faults, legend=dof == 4)
        ax.axhline(lo, color="k", ls="--", lw=0.8)
        ax.axhline(hi, color="k", ls="--", lw=0.8, label="95 % bounds")
        ax.set_yscale("log")
        lo_y, hi_y = ax.get_ylim()
        ax.set_ylim(max(lo_y, 1e-4), min(hi_y, 1e4))
        ax.set_ylabel(f"NEES ({'x, y, vx, vy' if dof == 4 else 'x, y'})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
    axes[0].set_title("Track consistency (NEES)")
    axes[1].set_xlabel("time (s)")
    return _save(fig, out / "nees.png")


def snapshot_times(an: Analysis, count: int = 3) -> list[float]:
    """A few times with a belief record of every agent: evenly spread, the last included."""
    ends = [ag.grids[-1].t for ag in an.agents.values() if ag.grids]
    starts = [ag.grids[0].t for ag in an.agents.values() if ag.grids]
    if not ends:
        return []
    lo, hi = max(starts), min(ends)
    if hi <= lo:
        return [hi]
    return [float(lo + (hi - lo) * (k + 1) / count) for k in range(count)]


def _nearest(grids: Sequence[GridRecord], t: float) -> GridRecord | None:
    if not grids:
        return None
    return min(grids, key=lambda g: abs(g.t - t))


def grid_snapshot(an: Analysis, t: float, out: Path) -> Path | None:
    """The probability of the target per cell (top) and its variance (bottom) of every agent
    side by side, at the record nearest ``t``: cells outside the room left blank, axes in
    metres, the cars and the target (truth) in a legend."""
    names = [name for name, ag in an.agents.items() if ag.grids]
    if not names:
        return None
    fig = Figure(figsize=(3.6 * len(names) + 1.6, 7.2))
    c = an.cell_size
    mu_im = var_im = None
    axes_mu, axes_var = [], []
    panels: list[tuple[Axes, tuple[float, float, float, float]]] = []
    for k, name in enumerate(names):
        g = _nearest(an.agents[name].grids, t)
        assert g is not None
        h, w = g.mu.shape
        extent = (g.origin[0] * c, (g.origin[0] + w) * c, g.origin[1] * c, (g.origin[1] + h) * c)
        inside = g.inside(an.room_cells)
        ax_mu = fig.add_subplot(2, len(names), k + 1)
        ax_var = fig.add_subplot(2, len(names), len(names) + k + 1)
        axes_mu.append(ax_mu)
        axes_var.append(ax_var)
        mu_im = ax_mu.imshow(np.where(inside, g.mu, np.nan), origin="lower", extent=extent,
                             cmap="hot", vmin=0.0, vmax=1.0, interpolation="nearest")
        var_im = ax_var.imshow(np.where(inside, g.var, np.nan), origin="lower", extent=extent,
                               cmap="Blues_r", vmin=0.0, vmax=1.0, interpolation="nearest")
        for ax in (ax_mu, ax_var):
            _room(ax, an)
            if an.truth is not None:
                tg = an.truth.target_at(g.t)[0]
                ax.plot(tg[0], tg[1], "x", color="lime", ms=9, mew=2, label="target (truth)")
                for j, car in enumerate(sorted(an.truth.cars)):
                    xy = an.truth.car_at(car, g.t)[0]
                    ax.plot(xy[0], xy[1], "o", color=_colour(j), ms=6, mec="w", label=car)
            ax.set_xlabel("x (m)", fontsize=8)
            ax.set_ylabel("y (m)", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.set_aspect("equal")
            panels.append((ax, extent))
        ax_mu.set_title(f"{name}: P(target), t = {an.rel(g.t):.0f} s", fontsize=9)
        ax_var.set_title(f"{name}: variance", fontsize=9)
    # One world frame for every panel, so that the same cell sits at the same place: the
    # room when it is known (nothing drawn outside it), else the union of the windows.
    if an.room_cells is not None:
        w_m, h_m = an.room_cells[0] * c, an.room_cells[1] * c
        for ax, _ in panels:
            ax.set_xlim(0.0, w_m)
            ax.set_ylim(0.0, h_m)
    else:
        box = np.array([e for _, e in panels])
        for ax, _ in panels:
            ax.set_xlim(box[:, 0].min(), box[:, 1].max())
            ax.set_ylim(box[:, 2].min(), box[:, 3].max())
    if mu_im is not None and var_im is not None:
        fig.colorbar(mu_im, ax=axes_mu, shrink=0.8, label="probability of the target in the cell")
        fig.colorbar(var_im, ax=axes_var, shrink=0.8, label="variance of that probability")
    handles, labels = axes_mu[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    return _save(fig, out / f"grid_{an.rel(t):05.1f}s.png")


def wire_scale(per_second_kb: Sequence[FloatArray]) -> float:
    """The top of the wire plot (KB/s): 1.5 times the 95th percentile of every agent's
    per-second rate, so that a few seconds of start-up burst (snapshots to every new peer)
    do not flatten the steady rate; never below the largest rate when nothing bursts."""
    values = np.concatenate([np.asarray(v, dtype=np.float64) for v in per_second_kb]
                            ) if per_second_kb else np.zeros(0)
    if not values.size or not np.any(values > 0):
        return 1.0
    top = 1.5 * float(np.percentile(values, 95))
    return float(values.max()) * 1.05 if values.max() <= top or top <= 0 else top


def wire(an: Analysis, out: Path, faults: Faults | None = None) -> Path | None:
    """KB sent per second per agent (a start-up burst beyond the scale is marked with its
    peak), and KB by message kind over the run."""
    if not an.agents:
        return None
    fig = Figure(figsize=(9, 6.5))
    ax_t, ax_k = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    t0, t1 = an.t_start, an.run.t_end
    kinds = sorted({k for ag in an.agents.values() for k in ag.wire.tx_by_kind})
    width = 0.8 / max(1, len(an.agents))
    rates = {name: ag.wire.per_second(t0, t1) for name, ag in an.agents.items()}
    top = wire_scale([per_s / 1000.0 for _, per_s in rates.values()])
    shade(ax_t, an, faults)
    for i, (name, ag) in enumerate(an.agents.items()):
        starts, per_s = rates[name]
        kb = per_s / 1000.0
        ax_t.step(an.rel(starts), kb, where="post", color=_colour(i), lw=1.0, label=name)
        over = np.flatnonzero(kb > top)
        if over.size:
            k = int(over[np.argmax(kb[over])])
            ax_t.annotate(f"{name}: {kb[k]:.1f} KB/s at {an.rel(starts[k]):.0f} s (off scale)",
                          (float(an.rel(starts[k])), top), xytext=(40, -14 - 11 * i),
                          textcoords="offset points", fontsize=7, color=_colour(i),
                          bbox={"fc": "w", "ec": "none", "alpha": 0.8})
        values = [ag.wire.tx_by_kind.get(k, {}).get("bytes", 0) / 1000.0 for k in kinds]
        ax_k.bar(np.arange(len(kinds)) + i * width, values, width, color=_colour(i), label=name)
    ax_t.set_ylim(0.0, top)
    ax_t.set_xlabel("time (s)")
    ax_t.set_ylabel("sent (KB/s)")
    ax_t.set_title("On the wire")
    ax_t.legend(fontsize=8, loc="upper right")
    ax_t.grid(alpha=0.3)
    ax_k.set_xticks(np.arange(len(kinds)) + 0.4 - width / 2, kinds)
    ax_k.set_ylabel("sent, whole run (KB)")
    ax_k.legend(fontsize=8)
    ax_k.grid(alpha=0.3, axis="y")
    return _save(fig, out / "wire.png")


def coverage(an: Analysis, out: Path, faults: Faults | None = None) -> Path | None:
    """Cells searched now and ever per agent, and the overlap of their searched cells."""
    if not any(ag.grids for ag in an.agents.values()):
        return None
    fig = Figure(figsize=(9, 6))
    ax_n, ax_j = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    area = an.cell_size**2
    for i, (name, ag) in enumerate(an.agents.items()):
        t = an.rel([g.t for g in ag.grids])
        ax_n.plot(t, ag.coverage["now"] * area, color=_colour(i), lw=1.2, label=f"{name} now")
        ax_n.plot(t, ag.coverage["ever"] * area, color=_colour(i), ls="--", lw=1.0,
                  label=f"{name} ever")  # fmt: skip
    for k, ((a, b), ov) in enumerate(an.overlap.items()):
        ax_j.plot(an.rel(ov["t"]), ov["jaccard"], color=_colour(k), label=f"{a} ∩ {b} / ∪")
    shade(ax_n, an, faults)
    shade(ax_j, an, faults, legend=False)
    where = "room" if an.room_cells is not None else "window"
    ax_n.set_ylabel(f"searched area in the {where} (m²)")
    ax_n.set_title(f"Coverage: cells with var < {an.coverage_var:g}")
    ax_n.legend(fontsize=8)
    ax_n.grid(alpha=0.3)
    ax_j.set_ylim(0.0, 1.05)
    ax_j.set_ylabel("overlap of searched cells")
    ax_j.set_xlabel("time (s)")
    ax_j.grid(alpha=0.3)
    if ax_j.lines:
        ax_j.legend(fontsize=8)
    return _save(fig, out / "coverage.png")


def rerun(an: Analysis, reruns: Mapping[str, AgentRerun], out: Path,
          faults: Faults | None = None) -> Path | None:
    """Recorded vs re-run convergence per agent: track uncertainty, grid var, position error."""
    if not reruns:
        return None
    names = list(reruns)
    rows = 3 if an.truth is not None else 2
    fig = Figure(figsize=(4.8 * len(names) + 0.5, 2.6 * rows + 0.8))
    for k, name in enumerate(names):
        r, ag = reruns[name], an.agents[name]
        axes = [fig.add_subplot(rows, len(names), row * len(names) + k + 1) for row in range(rows)]
        recorded: dict[str, Any] = {"color": "0.6", "lw": 2.4}
        axes[0].plot(an.rel(an.times), ag.series.uncertainty, label="recorded (log)", **recorded)
        axes[1].plot(an.rel([g.t for g in ag.grids]), ag.grid_var, **recorded)
        if an.truth is not None and ag.errors is not None:
            axes[2].plot(an.rel(an.times), ag.errors.pos_err, **recorded)
        for trace, colour in ((r.baseline, "C0"), (r.variant, "C3")):
            t = an.rel(trace.t)
            unc = np.trace(trace.P, axis1=1, axis2=2) / 4.0
            axes[0].plot(t, unc, color=colour, lw=1.0, label=f"re-run: {trace.label}")
            axes[1].plot(t, trace.mean_var, color=colour, lw=1.0)
            if an.truth is not None:
                axes[2].plot(t, track_errors(trace.series, an.truth).pos_err, color=colour, lw=1.0)
        axes[0].set_title(f"{name} (open loop)", fontsize=10)
        axes[0].set_ylabel("track trace(P)/4")
        axes[0].set_ylim(0.0, 1.1)
        axes[0].legend(fontsize=7, loc="upper right")
        axes[1].set_ylabel("grid mean var")
        axes[1].set_ylim(0.0, 1.05)
        if an.truth is not None:
            _cap(axes[2], _span(an))
            axes[2].set_ylabel("position error (m)")
        axes[-1].set_xlabel("time (s)")
        for ax in axes:
            shade(ax, an, faults, legend=ax is axes[0])
            ax.grid(alpha=0.3)
    return _save(fig, out / "rerun.png")


def draw_all(
    an: Analysis, out: Path, reruns: Mapping[str, AgentRerun] | None = None,
    faults: Faults | None = None,
) -> dict[str, Path]:
    """Every figure; keys name them for the report. Fault windows (``faults``) are shaded on
    every plot over time."""
    made: dict[str, Path | None] = {
        "uncertainty": uncertainty(an, out, faults),
        "speed": speed(an, out, faults),
        "trajectories": trajectories(an, out, faults),
        "error": errors(an, out, faults),
        "nees": nees(an, out, faults),
        "coverage": coverage(an, out, faults),
        "wire": wire(an, out, faults),
        "reputation": reputation_figure(an, faults, out, _save) if faults is not None else None,
    }
    for k, t in enumerate(snapshot_times(an)):
        made[f"grid{k}"] = grid_snapshot(an, t, out)
    if reruns:
        made["rerun"] = rerun(an, reruns, out, faults)
    return {k: v for k, v in made.items() if v is not None}
