"""Benchmark of the belief estimators.

:func:`run` returns one dict per case::

    case        name of the case
    median_s    median time of one operation, seconds
    min_s       the fastest batch's time of one operation (less sensitive to other load)
    reps        number of timed batches (the median is over these)
    inner       operations per batch
    floor_s     median time of the floor, measured in the same run (batches interleaved
                with the case's): the least any implementation of the operation must do,
                e.g. a numpy copy of the same arrays
    floor_min_s the fastest batch of the floor
    ratio       median_s / floor_s (robust against a shared, noisy machine)
    target_s    the time budget of the case, or None
    meets_target  median_s <= target_s, or None without a target
    note        what one operation is

Run ``python -m tools.bench.belief [--quick]`` for one JSON object per line.
"""

from __future__ import annotations

import argparse
import hmac
import json
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from agents.belief.deposit import Detection, Footprint
from agents.belief.fusion import FusionRule, ci_matrix
from agents.belief.grid import PheromoneGrid
from agents.belief.params import GridParams
from agents.belief.track import TrackFilter
from protocol.swarm import SwarmReceiver, SwarmSender, patch_capacity, swarm_id_from_name

TARGET_TICK_64_S = 80e-6
TARGET_TICK_256_S = 1.5e-3


def _batch_time(op: Callable[[], object], inner: int) -> float:
    """Mean time of one call in a batch of ``inner`` calls."""
    t0 = time.perf_counter()
    for _ in range(inner):
        op()
    return (time.perf_counter() - t0) / inner


def _batch_times(
    op: Callable[[], object], floor: Callable[[], object], reps: int, inner: int
) -> tuple[list[float], list[float]]:
    """``reps`` batch times of ``op`` and of ``floor``, their batches alternating (after a
    warm-up), so that a load on a shared machine weighs on both alike."""
    for f in (op, floor):
        for _ in range(max(1, inner // 4)):
            f()
    times: list[float] = []
    floor_times: list[float] = []
    for _ in range(reps):
        times.append(_batch_time(op, inner))
        floor_times.append(_batch_time(floor, inner))
    return times, floor_times


def _case(
    name: str,
    op: Callable[[], object],
    floor: Callable[[], object],
    *,
    reps: int,
    inner: int,
    note: str,
    target_s: float | None = None,
) -> dict[str, Any]:
    times, floor_times = _batch_times(op, floor, reps, inner)
    median = statistics.median(times)
    floor_s = statistics.median(floor_times)
    return {
        "case": name,
        "median_s": median,
        "min_s": min(times),
        "reps": reps,
        "inner": inner,
        "floor_s": floor_s,
        "floor_min_s": min(floor_times),
        "ratio": median / floor_s if floor_s > 0 else math.inf,
        "target_s": target_s,
        "meets_target": None if target_s is None else median <= target_s,
        "note": note,
    }


def _grid_tick_case(size: int, reps: int, inner: int, target_s: float) -> dict[str, Any]:
    grid = PheromoneGrid(GridParams(width=size, height=size), 1.0, 1.0)
    footprint = Footprint(1.0, 1.0, 0.3, 2.0, math.radians(62))
    detection = Detection(2.0, 1.5, np.array([[0.01, 0.003], [0.003, 0.02]]))
    dt = 0.1

    def tick() -> None:
        grid.predict(dt)
        grid.deposit(footprint, [detection])
        grid.decay(dt)

    mu, var = grid.mu, grid.var
    return _case(
        f"grid_tick_{size}",
        tick,
        lambda: (mu.copy(), var.copy()),
        reps=reps,
        inner=inner,
        note=f"{size}x{size} predict + deposit (2 m, 62° footprint, one detection) + decay",
        target_s=target_s,
    )


def _grid_tick_sliding_case(reps: int, inner: int) -> dict[str, Any]:
    grid = PheromoneGrid(GridParams(), 0.0, 0.0)
    detection_cov = np.eye(2) * 0.01
    state = {"t": 0.0}

    def tick() -> None:
        t = state["t"] = state["t"] + 0.1
        x = 0.5 * t  # 0.5 m/s: a slide every other tick
        footprint = Footprint(x, 0.0, 0.0, 2.0, math.radians(62))
        grid.tick(t, (x, 0.0), footprint, [Detection(x + 1.0, 0.2, detection_cov)])

    mu, var = grid.mu, grid.var
    return _case(
        "grid_tick_64_sliding",
        tick,
        lambda: (mu.copy(), var.copy()),
        reps=reps,
        inner=inner,
        note="64x64 tick() with the robot at 0.5 m/s (slides every other tick), new footprint "
        "and detection objects each tick",
    )


def _fuse_patch_case(reps: int, inner: int) -> dict[str, Any]:
    grid = PheromoneGrid(GridParams(), 0.0, 0.0)
    rng = np.random.default_rng(0)
    ox, oy = grid.origin
    n = 500
    ix = rng.integers(ox, ox + 64, n).astype(np.int16)
    iy = rng.integers(oy, oy + 64, n).astype(np.int16)
    mu = rng.uniform(0.0, 1.0, n)
    var = rng.uniform(0.05, 1.0, n)

    def fuse() -> None:
        grid.fuse(ix, iy, mu, var, age=0.3, age_uncertainty=0.01, rule=FusionRule.CI)

    return _case(
        "grid_fuse_patch_500",
        fuse,
        lambda: (ix.copy(), iy.copy(), mu.copy(), var.copy()),
        reps=reps,
        inner=inner,
        note="fuse a 500-cell patch (staleness + fast CI) into a 64x64 window",
    )


def _track_case(reps: int, inner: int) -> dict[str, Any]:
    track = TrackFilter()
    R = np.eye(2) * 0.01
    state = {"t": 0.0}
    track.update_position([0.0, 0.0], R, 0.0)

    def step() -> None:
        t = state["t"] = state["t"] + 0.1
        track.predict_to(t)
        track.update_position([t, 0.0], R, t)

    x, P = track.state, track.covariance
    return _case(
        "track_predict_update",
        step,
        lambda: (x.copy(), P.copy()),
        reps=reps,
        inner=inner,
        note="CV track: predict_to + gated position update",
    )


def _ci_case(reps: int, inner: int) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
    Pa, Pb = A @ A.T + 0.01 * np.eye(4), B @ B.T + 0.01 * np.eye(4)
    xa, xb = rng.normal(size=4), rng.normal(size=4)
    return _case(
        "ci_matrix_4x4",
        lambda: ci_matrix(xa, Pa, xb, Pb, "trace"),
        lambda: (xa.copy(), Pa.copy(), xb.copy(), Pb.copy()),
        reps=reps,
        inner=inner,
        note="4x4 covariance intersection with the trace-minimising ω search",
    )


TARGET_WIRE_S = 40e-6
TARGET_BYTES_PER_CELL = 8.5
_WIRE_KEY = b"bench-key-0123456789abcdef012345"


def _full_patch() -> tuple[SwarmSender, SwarmReceiver, dict[str, Any]]:
    """A sender and receiver, and the arrays of one full PATCH datagram's cells."""
    key, swarm = _WIRE_KEY, swarm_id_from_name("bench")
    sender = SwarmSender(key, swarm, "walnut", 0xDEADBEEF)
    n = patch_capacity(cell_size_mm=100, t_ref=12.5, swarm_id=swarm, sender="walnut",
                       epoch=0xDEADBEEF, t_sent=12.5)
    rng = np.random.default_rng(3)
    flat = rng.choice(64 * 64, size=n, replace=False)
    cells = {
        "ix": (flat % 64 - 32).astype(np.int16),
        "iy": (flat // 64 - 32).astype(np.int16),
        "mu": rng.random(n),
        "var": rng.uniform(0.01, 1.0, n),
    }
    return sender, SwarmReceiver(key, swarm), cells


def _wire_case(reps: int, inner: int) -> dict[str, Any]:
    sender, receiver, c = _full_patch()
    t = [100.0]

    def round_trip() -> None:
        t[0] += 1e-3
        (data,) = sender.patch_datagrams(
            c["ix"], c["iy"], c["mu"], c["var"], cell_size_mm=100, t_ref=t[0], now=t[0]
        )
        receiver.decode(data)  # MAC, structure, types, ranges, swarm id, replay window

    (data,) = sender.patch_datagrams(
        c["ix"], c["iy"], c["mu"], c["var"], cell_size_mm=100, t_ref=1.0, now=1.0
    )
    floor = _envelope_floor(data, sender, receiver.swarm_id, t)
    case = _case(
        "patch_datagram_encode_mac_decode",
        round_trip,
        floor,
        reps=reps,
        inner=inner,
        target_s=TARGET_WIRE_S,
        note=f"one full PATCH ({len(c['ix'])} cells, {len(data)} bytes): encode, HMAC, "
        "verify, decode, validate; floor: msgpack.packb + HMAC of an envelope with the "
        "same cell bin, then msgpack.unpackb + HMAC verify (no checks, no arrays)",
    )
    return case


def _envelope_floor(
    data: bytes, sender: SwarmSender, swarm_id: int, t: list[float]
) -> Callable[[], object]:
    """The least a PATCH round trip must do: pack and sign an envelope holding the same
    cell bin, then verify and unpack it, with nothing checked or converted."""
    cells_bin = msgpack.unpackb(data[:-16])[7][2]
    key = _WIRE_KEY
    head = [1, 2, swarm_id, sender.sender, sender.epoch]

    def floor() -> object:
        t[0] += 1e-3
        payload = msgpack.packb([*head, sender.next_seq, t[0], [100, t[0], cells_bin]])
        datagram = payload + hmac.digest(key, payload, "sha256")[:16]
        body, tag = datagram[:-16], datagram[-16:]
        if not hmac.compare_digest(hmac.digest(key, body, "sha256")[:16], tag):
            raise AssertionError("the floor's own MAC does not verify")
        return msgpack.unpackb(body)

    return floor


def _bytes_per_cell_case() -> dict[str, Any]:
    sender, _, c = _full_patch()
    (data,) = sender.patch_datagrams(
        c["ix"], c["iy"], c["mu"], c["var"], cell_size_mm=100, t_ref=1.0, now=1.0
    )
    value = len(data) / len(c["ix"])
    return {
        "case": "bytes_per_cell",
        "value": value,
        "cells": len(c["ix"]),
        "datagram_bytes": len(data),
        "target": TARGET_BYTES_PER_CELL,
        "meets_target": value <= TARGET_BYTES_PER_CELL,
        "note": "a full PATCH datagram from sender 'walnut', envelope and MAC included",
    }


def run(quick: bool) -> list[dict[str, Any]]:
    """Run every case; ``quick`` uses few repetitions (a smoke test, not a measurement)."""
    reps = 3 if quick else 15
    small = 20 if quick else 400
    large = 3 if quick else 40
    return [
        _grid_tick_case(64, reps, small, TARGET_TICK_64_S),
        _grid_tick_case(256, reps, large, TARGET_TICK_256_S),
        _grid_tick_sliding_case(reps, small),
        _fuse_patch_case(reps, small),
        _track_case(reps, small),
        _ci_case(reps, small),
        _wire_case(reps, small),
        _bytes_per_cell_case(),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    args = parser.parse_args()
    for result in run(quick=args.quick):
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
