"""The wire family: the datagrams an agent sent (by kind, per second) and received or refused."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocol.runlog import datagram_size, rejection
from tools.replay.load import ProcessLog, datagram_bytes
from tools.replay.metrics.common import FloatArray


@dataclass
class Wire:
    """Datagrams an agent sent and received."""

    tx_t: FloatArray
    tx_bytes: FloatArray
    tx_by_kind: dict[str, dict[str, int]]
    tx_broadcast: int
    tx_unicast: int
    rx_ok: int
    rx_ok_bytes: int
    rejected: dict[str, int]
    stop_counters: dict[str, int]
    core_counters: dict[str, int]

    def per_second(self, t0: float, t1: float) -> tuple[FloatArray, FloatArray]:
        """Bytes sent in each whole second from ``t0`` (bin starts, bytes)."""
        n = max(1, math.ceil(t1 - t0))
        edges = t0 + np.arange(n + 1, dtype=np.float64)
        counts, _ = np.histogram(self.tx_t, bins=edges, weights=self.tx_bytes)
        return edges[:-1], counts.astype(np.float64)


def wire_of(log: ProcessLog) -> Wire:
    tx_t: list[float] = []
    tx_bytes: list[int] = []
    by_kind: dict[str, dict[str, int]] = {}
    broadcast = unicast = rx_ok = rx_ok_bytes = 0
    rejected: dict[str, int] = {}
    stop: dict[str, int] = {}
    core: dict[str, int] = {}
    for line in log.lines:
        event = line["event"]
        if event == "tx":
            n = datagram_size(line)
            tx_t.append(line["t"])
            tx_bytes.append(n)
            kind = by_kind.setdefault(str(line.get("kind", "?")), {"datagrams": 0, "bytes": 0})
            kind["datagrams"] += 1
            kind["bytes"] += n
            if line.get("to") is None:
                broadcast += 1
            else:
                unicast += 1
        elif event == "rx" and line.get("ok"):
            data = datagram_bytes(line)
            rx_ok += 1
            rx_ok_bytes += len(data) if data is not None else 0
        elif (refused := rejection(line)) is not None:
            rejected[refused[0]] = rejected.get(refused[0], 0) + refused[1]
        elif event == "stop" and isinstance(line.get("counters"), dict):
            stop = {str(k): int(v) for k, v in line["counters"].items()}
        elif event == "belief" and isinstance(line.get("counters"), dict):
            core = {str(k): int(v) for k, v in line["counters"].items()}
    return Wire(
        np.asarray(tx_t, dtype=np.float64),
        np.asarray(tx_bytes, dtype=np.float64),
        dict(sorted(by_kind.items())),
        broadcast,
        unicast,
        rx_ok,
        rx_ok_bytes,
        dict(sorted(rejected.items())),
        stop,
        core,
    )


def wire_summary(wire: Wire, duration: float) -> dict[str, Any]:
    total = float(wire.tx_bytes.sum())
    n = int(wire.tx_bytes.size)
    return {
        "tx_datagrams": n,
        "tx_bytes": int(total),
        "tx_broadcast": wire.tx_broadcast,
        "tx_unicast": wire.tx_unicast,
        "tx_datagrams_per_s": n / duration if duration > 0 else None,
        "tx_bytes_per_s": total / duration if duration > 0 else None,
        "tx_by_kind": wire.tx_by_kind,
        "rx_accepted": wire.rx_ok,
        "rx_accepted_bytes": wire.rx_ok_bytes,
        "rx_rejected": wire.rejected,
        "rx_rejected_total": sum(wire.rejected.values()),
        "stop_counters": wire.stop_counters,
        "core_counters": wire.core_counters,
    }
