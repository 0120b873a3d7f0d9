"""What the faults did, for the report: when each fault was on, who lied and what it
published, how each agent's trust in each peer moved and when it first refused it, and
every refusal counted by reason.

- Fault windows: from the run's ``schedule.json`` (the scenario's planned operations, at
  the times they were applied), else from the logs' own fault events (an agent's
  ``faults_set`` and ``byzantine``, the world's ``fault``), for a run whose faults were
  set by hand. A window runs from the operation that sets a fault to the one that clears
  it (a kill to its restart), else to the end of the run.
- A liar's *published* track is what it sent (its TRACK datagrams, the lie), its *private*
  one the track of its belief records (its own, honest belief).
- Reputation: each receiver's score of each peer at every ``peer_track`` event and every
  belief record; first refused: its first ``peer_distrusted`` event or ``peer_track``
  refused as ``distrusted``, whichever is earlier.
- Refusals: the wire's rejections by reason plus the peer TRACKs the reputation refused
  (as ``reputation``, as the run's summary counts them).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from protocol.swarm.messages import Track
from tools.replay.load import ProcessLog, RunDir, datagram_bytes, decode_own, swarm_id_of
from tools.replay.metrics.common import FloatArray
from tools.summary import REPUTATION

DISTRUSTED = "distrusted"
CLEAR = "clear"


@dataclass(frozen=True)
class FaultWindow:
    """A fault that was on from ``start`` to ``end`` (log times); ``kind`` is one of faults,
    byzantine, kill, world."""

    start: float
    end: float
    kind: str
    label: str


@dataclass
class PeerTrust:
    """One receiver's score of one peer over time, and when it first refused the peer."""

    receiver: str
    peer: str
    t: FloatArray
    score: FloatArray
    first_refused: float | None
    refused_tracks: int


@dataclass
class Published:
    """A liar's tracks: what it published (TRACK datagrams) and what it believed."""

    agent: str
    lying: list[FaultWindow]
    published_t: FloatArray
    published_xy: FloatArray  # (n, 2)
    private_t: FloatArray
    private_xy: FloatArray


@dataclass
class Faults:
    windows: list[FaultWindow]
    source: str  # where the windows came from
    trust: dict[tuple[str, str], PeerTrust] = field(default_factory=dict)
    liars: dict[str, Published] = field(default_factory=dict)
    refusals: dict[str, dict[str, int]] = field(default_factory=dict)  # agent -> reason -> n


# ---------------------------------------------------------------- windows

_AGENT_OP = re.compile(r"^(?P<agent>[^:]+): (?P<what>faults|byzantine) ?(?P<dir>in|out|both)? "
                       r"?(?P<spec>.*)$")
_WORLD_OP = re.compile(r"^world: (?P<kind>\S+) car (?P<car>\S+) (?P<s>[0-9.eE+-]+) s$")


def _close(open_: dict[tuple[str, ...], tuple[float, str]], key: tuple[str, ...], t: float,
           kind: str, out: list[FaultWindow]) -> None:
    if key in open_:
        start, label = open_.pop(key)
        out.append(FaultWindow(start, t, kind, label))


def windows_of_ops(ops: list[tuple[float, str]], t_end: float) -> list[FaultWindow]:
    """Windows from timed operation texts (``tools.experiments.schedule`` ``describe()``):
    ``NAME: faults DIR SPEC``, ``NAME: byzantine SPEC``, ``NAME: kill``, ``NAME: restart``,
    ``world: KIND car C S s``; a SPEC of ``clear`` ends the window."""
    out: list[FaultWindow] = []
    open_: dict[tuple[str, ...], tuple[float, str]] = {}
    for t, text in sorted(ops, key=lambda o: o[0]):
        if (w := _WORLD_OP.match(text)) is not None:
            out.append(FaultWindow(t, min(t_end, t + float(w["s"])), "world", text))
            continue
        name, _, what = text.partition(": ")
        if what in ("kill", "restart"):
            if what == "kill":
                open_[("kill", name)] = (t, text)
            else:
                _close(open_, ("kill", name), t, "kill", out)
            continue
        m = _AGENT_OP.match(text)
        if m is None:
            continue
        kind = m["what"]
        dirs = ("in", "out") if kind == "faults" and m["dir"] in (None, "both") else (m["dir"],)
        for d in dirs:
            key: tuple[str, ...] = (kind, name, d or "")
            _close(open_, key, t, kind, out)
            if m["spec"].strip() != CLEAR:
                open_[key] = (t, text)
    for still, (start, label) in open_.items():
        out.append(FaultWindow(start, t_end, still[0], label))
    return _merged(out)


def _merged(windows: list[FaultWindow]) -> list[FaultWindow]:
    """One window per span and label: a ``faults both`` set is one window, not in and out."""
    seen: set[tuple[float, float, str]] = set()
    out = []
    for w in sorted(windows, key=lambda w: (w.start, w.end, w.label)):
        if (w.start, w.end, w.label) not in seen:
            seen.add((w.start, w.end, w.label))
            out.append(w)
    return out


def schedule_windows(path: Path, t_start: float, t_end: float) -> list[FaultWindow] | None:
    """The windows of ``path`` (a run's ``schedule.json``; times after ``t_start``), or None
    when it cannot be read. An operation's time is when it was applied, else planned."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        planned = record["planned"]
        applied = record.get("applied") or []
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(planned, list):
        return None
    at = {(a.get("text"), a.get("t")): a.get("at") for a in applied if isinstance(a, dict)}
    ops = []
    for p in planned:
        if not isinstance(p, dict) or not isinstance(p.get("text"), str):
            continue
        t = at.get((p["text"], p.get("t")), p.get("t"))
        if isinstance(t, int | float) and math.isfinite(t):
            ops.append((t_start + float(t), p["text"]))
    return windows_of_ops(ops, t_end)


def event_windows(run: RunDir) -> list[FaultWindow]:
    """The windows of the logs' own fault events."""
    from agents.faults import ByzantineSpec, LinkFaults, format_byzantine, format_faults

    ops: list[tuple[float, str]] = []
    for name, log in run.agents.items():
        for e in log.events("faults_set", "byzantine"):
            try:
                if e["event"] == "faults_set":
                    spec = format_faults(LinkFaults.from_mapping(e.get("spec") or {}))
                    ops.append((e["t"], f"{name}: faults {e.get('direction', 'both')} {spec}"))
                else:
                    byz = e.get("spec")
                    text = CLEAR if byz is None else format_byzantine(
                        ByzantineSpec.from_mapping(byz))
                    ops.append((e["t"], f"{name}: byzantine {text}"))
            except (ValueError, TypeError, KeyError):
                continue
    if run.world is not None:
        for e in run.world.events("fault"):
            d = e.get("duration")
            if isinstance(d, int | float):
                ops.append((e["t"], f"world: {e.get('kind')} car {e.get('car')} {d:g} s"))
    return windows_of_ops(ops, run.t_end)


def fault_windows(run: RunDir) -> tuple[list[FaultWindow], str]:
    """The run's fault windows and where they came from."""
    found = schedule_windows(run.path / "schedule.json", run.t_start, run.t_end)
    if found is not None:
        return found, "schedule.json"
    return event_windows(run), "the logs' fault events"


# ---------------------------------------------------------------- trust and refusals


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def peer_trust(log: ProcessLog) -> dict[str, PeerTrust]:
    """Per peer: the receiver's score over time, and when it first refused the peer."""
    rows: dict[str, list[tuple[float, float]]] = {}
    first: dict[str, float] = {}
    refused: dict[str, int] = {}
    for e in log.events("peer_track", "peer_distrusted", "belief"):
        t = float(e["t"])
        if e["event"] == "belief":
            peers = e.get("peers")
            for peer, entry in (peers.items() if isinstance(peers, dict) else ()):
                if isinstance(entry, dict) and _number(entry.get("score")):
                    rows.setdefault(str(peer), []).append((t, float(entry["score"])))
            continue
        peer = e.get("peer")
        if not isinstance(peer, str):
            continue
        if _number(e.get("score")):
            rows.setdefault(peer, []).append((t, float(e["score"])))
        if e["event"] == "peer_distrusted" or e.get("outcome") == DISTRUSTED:
            first.setdefault(peer, t)
            if e["event"] == "peer_track":
                refused[peer] = refused.get(peer, 0) + 1
    out = {}
    for peer in sorted(set(rows) | set(first)):
        pts = sorted(rows.get(peer, []))
        out[peer] = PeerTrust(log.name, peer, np.array([p[0] for p in pts], dtype=np.float64),
                              np.array([p[1] for p in pts], dtype=np.float64),
                              first.get(peer), refused.get(peer, 0))
    return out


def refusals(log: ProcessLog, wire_rejected: dict[str, int],
             trust: dict[str, PeerTrust]) -> dict[str, int]:
    """The wire's rejections by reason plus the TRACKs the reputation refused."""
    out = dict(wire_rejected)
    n = sum(p.refused_tracks for p in trust.values())
    if n:
        out[REPUTATION] = out.get(REPUTATION, 0) + n
    return dict(sorted(out.items()))


# ---------------------------------------------------------------- liars


def published(log: ProcessLog, lying: list[FaultWindow]) -> Published:
    """What a liar sent (its TRACK datagrams) and believed (its belief records' track)."""
    swarm_id = swarm_id_of(log)
    pub_t: list[float] = []
    pub: list[tuple[float, float]] = []
    own_t: list[float] = []
    own: list[tuple[float, float]] = []
    for e in log.events("tx", "belief"):
        if e["event"] == "tx":
            if e.get("kind") != "track" or swarm_id is None:
                continue
            data = datagram_bytes(e)
            msg = decode_own(data, swarm_id) if data is not None else None
            if msg is not None and isinstance(msg.body, Track):
                pub_t.append(float(e["t"]))
                pub.append((float(msg.body.mean[0]), float(msg.body.mean[1])))
        elif isinstance(e.get("track"), dict):
            x = e["track"].get("x")
            if isinstance(x, list) and len(x) >= 2 and _number(x[0]) and _number(x[1]):
                own_t.append(float(e["t"]))
                own.append((float(x[0]), float(x[1])))
    return Published(log.name, lying, np.array(pub_t), np.array(pub).reshape(-1, 2),
                     np.array(own_t), np.array(own).reshape(-1, 2))


def faults_of(run: RunDir, wire_rejected: dict[str, dict[str, int]] | None = None) -> Faults:
    """Everything above for a run; ``wire_rejected``: each agent's rejections by reason
    (the wire metric's), so that they are not counted twice."""
    windows, source = fault_windows(run)
    out = Faults(windows, source)
    for name, log in run.agents.items():
        trust = peer_trust(log)
        for peer, p in trust.items():
            out.trust[(name, peer)] = p
        out.refusals[name] = refusals(log, (wire_rejected or {}).get(name, {}), trust)
        lying = [w for w in windows if w.kind == "byzantine" and w.label.startswith(f"{name}:")]
        if lying:
            out.liars[name] = published(log, lying)
    return out


def faults_summary(f: Faults, t_start: float) -> dict[str, Any]:
    """The machine-readable part (metrics.json ``faults``), times run-relative."""
    return {
        "windows_from": f.source,
        "windows": [{"start_s": w.start - t_start, "end_s": w.end - t_start, "kind": w.kind,
                     "what": w.label} for w in f.windows],
        "first_refused_s": {f"{r}->{p}": (None if v.first_refused is None
                                          else v.first_refused - t_start)
                            for (r, p), v in f.trust.items()},
        "refused_tracks": {f"{r}->{p}": v.refused_tracks for (r, p), v in f.trust.items()},
        "rejected": f.refusals,
        "liars": sorted(f.liars),
    }
