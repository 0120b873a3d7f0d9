"""A lying swarm member, or a stranger without the key, against one agent (issue 10).

Every input here is a real datagram, sealed with the swarm key where a member
would hold it, fed through SwarmNode.receive_datagram exactly as the runtime
and lockstep do. Each test names the hole it closes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.config import AgentConfig
from agents.core import AgentCore
from agents.node import Datagram, SwarmNode
from agents.room import Room
from protocol.runlog import rejection
from protocol.swarm import (
    Cells,
    Heartbeat,
    Message,
    Mode,
    Patch,
    Ping,
    Pong,
    SwarmSender,
    Track,
    swarm_id_from_name,
)
from protocol.swarm.codec import decode_datagram, pack, seal, to_wire
from protocol.swarm.limits import Implausible

KEY = bytes(range(32))
SWARM = "hostile-test"
SID = swarm_id_from_name(SWARM)
ME = ("127.0.0.1", 47001)
HAZEL = ("127.0.0.9", 41000)
OFFSET = 500.0  # hazel's clock reads 500 s more than ours


class Agent:
    """walnut's node, its log lines, and a clock; datagrams it sends are kept."""

    def __init__(self) -> None:
        config = AgentConfig(name="walnut", room=Room(5.0, 5.0), landmarks={0: (0.0, 2.5)},
                             target_tag=100)
        self.core = AgentCore(config, t0=0.0)
        self.lines: list[dict[str, object]] = []
        self.node = SwarmNode(self.core, KEY, SID, epoch=1, log=self._log)
        self.sent: list[Datagram] = []
        self.t = 0.0

    def _log(self, event: str, t: float | None = None, **fields: object) -> None:
        self.lines.append({"event": event, "t": t, **fields})

    def rx(self, data: bytes, src: tuple[str, int] = HAZEL) -> None:
        self.node.receive_datagram(data, src, self.t)
        self.sent += self.node.datagrams()

    def tick(self, dt: float = 0.1) -> None:
        self.t = round(self.t + dt, 9)
        self.node.tick(self.t)
        self.sent += self.node.datagrams()

    def rejected(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for line in self.lines:
            r = rejection(line)
            if r is not None:
                out[r[0]] = out.get(r[0], 0) + r[1]
        return out

    def sent_to(self, addr: tuple[str, int], kind: str) -> list[Datagram]:
        return [d for d in self.sent if d.to == addr and d.kind == kind]


class Member:
    """A key holder speaking as ``name``; its clock is ours plus OFFSET."""

    def __init__(self, agent: Agent, name: str = "hazel", epoch: int = 7,
                 src: tuple[str, int] = HAZEL) -> None:
        self.agent, self.name, self.epoch, self.src = agent, name, epoch, src
        self.sender = SwarmSender(KEY, SID, name, epoch)

    def send(self, body: object) -> bytes:
        data = self.sender.seal(body, self.agent.t + OFFSET)  # type: ignore[arg-type]
        self.agent.rx(data, self.src)
        return data

    def join(self) -> None:
        """Speak, answer walnut's PING: confirmed, clocks mapped."""
        hb = Heartbeat(1.0, 1.0, 0.0, (0.01, 0.0, 0.0, 0.01, 0.0, 0.01), Mode.SEARCH, 0, 0, ())
        self.send(hb)
        for _ in range(3):
            pings = self.agent.sent_to(self.src, "ping")
            if pings:
                break
            self.agent.tick()
        msg = self.agent.node.receiver.decode(pings[-1].data)
        assert isinstance(msg.body, Ping)
        t = self.agent.t + OFFSET
        self.send(Pong(msg.body.ping_id, msg.t_sent, t, t))
        assert self.agent.core.peers[self.name].clock.synchronized_at_time(self.agent.t)


def honest_track(agent: Agent, updates: int, x: float = 2.0) -> Track:
    cov = (0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.1, 0.0, 0.1)
    return Track((x, 2.0, 0.3, 0.0), cov, agent.t + OFFSET, updates)


def test_a_track_from_the_distant_past_is_refused_and_tracking_goes_on() -> None:
    a = Agent()
    hazel = Member(a)
    hazel.join()
    before = a.core.counters.total
    cov = (0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.1, 0.0, 0.1)
    hazel.send(Track((2.0, 2.0, 0.0, 0.0), cov, 0.0, 3))  # valid on the wire, 500 s old here
    assert a.rejected() == {Implausible.TIME.value: 1}
    assert a.core.counters.total == before + 1
    for k in range(5):  # later tracks, from anyone, are still fused
        a.tick()
        hazel.send(honest_track(a, 10 + k))
    assert a.core.stats["tracks_fused"] == 5 and a.core.track.initialised


def test_a_huge_track_is_refused_before_the_agent_has_its_own_and_the_tick_lives() -> None:
    a = Agent()
    hazel = Member(a)
    hazel.join()
    tiny = (1e-30, 0.0, 0.0, 0.0, 1e-30, 0.0, 0.0, 1e-30, 0.0, 1e-30)
    hazel.send(Track((3e38, 3e38, 0.0, 0.0), tiny, a.t + OFFSET, 5))
    hazel.send(Track((2.0, 2.0, 0.0, 0.0), tiny, a.t + OFFSET, 6))  # in the room, overconfident
    hazel.send(Track((2.0, 2.0, 40.0, 0.0), honest_track(a, 7).cov, a.t + OFFSET, 7))
    assert a.rejected() == {
        Implausible.POSITION.value: 1, Implausible.COVARIANCE.value: 1,
        Implausible.VELOCITY.value: 1,
    }
    assert not a.core.track.initialised
    for _ in range(20):
        a.tick()
    assert a.sent_to(None, "heartbeat")  # type: ignore[arg-type]


def test_cells_beyond_what_the_grid_means_are_refused_and_leave_the_grid_alone() -> None:
    a = Agent()
    hazel = Member(a)
    hazel.join()
    mu_before = a.core.grid.mu.copy()
    ix, iy = a.core.grid.origin
    cells = Cells.from_arrays(np.array([ix + 5]), np.array([iy + 5]), [65504.0], [2.0**-24])
    hazel.send(Patch(100, a.t + OFFSET, cells))
    assert a.rejected() == {Implausible.CELLS.value: 1}
    assert np.array_equal(a.core.grid.mu, mu_before)
    ok = Cells.from_arrays(np.array([ix + 5]), np.array([iy + 5]), [0.8], [0.05])
    hazel.send(Patch(100, a.t + OFFSET, ok))
    assert a.core.stats["cells_fused"] == 1


def test_a_deeply_nested_datagram_is_counted_as_malformed() -> None:
    a = Agent()
    for depth in (4, 990, 1023):
        a.rx(seal(b"\x91" * depth + b"\x01", KEY))
    assert a.node.receiver.counters["malformed"] == 3
    assert a.rejected() == {"malformed": 1}  # sampled: one line a second...
    a.tick(1.1)
    assert a.rejected() == {"malformed": 3}  # ... whose counts add up


def test_an_exception_inside_the_core_is_one_counted_rejection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = Agent()
    hazel = Member(a)
    hazel.join()

    def broken(*args: object, **kwargs: object) -> int:
        raise ArithmeticError("a bug in fusion")

    monkeypatch.setattr(a.core.grid, "fuse", broken)
    ix, iy = a.core.grid.origin
    ok = Cells.from_arrays(np.array([ix + 5]), np.array([iy + 5]), [0.8], [0.05])
    hazel.send(Patch(100, a.t + OFFSET, ok))
    hazel.send(Patch(100, a.t + OFFSET, ok))
    assert a.core.counters["internal_error"] == 2
    logged = [ln for ln in a.lines if ln["event"] == "refused"]
    assert len(logged) == 1 and "a bug in fusion" in str(logged[0]["error"])
    assert "Patch" in str(logged[0]["message"])
    monkeypatch.undo()
    hazel.send(Patch(100, a.t + OFFSET, ok))
    assert a.core.stats["cells_fused"] == 1


# ---------------------------------------------------------------- epochs and discovery


def test_a_replayed_old_epoch_neither_resets_the_peer_nor_draws_a_snapshot() -> None:
    a = Agent()
    old = Member(a, epoch=7)
    captured = old.sender.seal(Heartbeat(1.0, 1.0, 0.0, (0.01,) * 6, Mode.SEARCH, 0, 0, ()),
                               a.t + OFFSET)
    for _ in range(60):
        a.tick()
    new = Member(a, epoch=8)  # hazel restarted
    new.join()
    clock = a.core.peers["hazel"].clock
    forged = ("127.0.0.66", 9999)  # a victim the attacker wants flooded
    a.rx(captured, forged)
    assert a.core.counters["stale_epoch"] == 1
    assert a.core.peers["hazel"].epoch == 8 and a.core.peers["hazel"].clock is clock
    assert clock.synchronized_at_time(a.t)
    assert not [d for d in a.sent if d.to == forged]


def test_a_new_epoch_from_a_forged_address_gets_no_snapshot_there() -> None:
    a = Agent()
    Member(a, epoch=7).join()
    snapshots = len(a.sent_to(HAZEL, "snapshot"))
    forged = ("127.0.0.66", 9999)
    stranger = Member(a, epoch=9, src=forged)  # a higher epoch, never answering from there
    stranger.send(Heartbeat(1.0, 1.0, 0.0, (0.01,) * 6, Mode.SEARCH, 0, 0, ()))
    for _ in range(30):
        a.tick()
    assert not a.sent_to(forged, "snapshot")
    # pinged (52 bytes a second) while a candidate, dropped after the 3 s a silent peer has
    assert len(a.sent_to(forged, "ping")) <= 4
    assert a.core.peers["hazel"].epoch == 7 and len(a.sent_to(HAZEL, "snapshot")) == snapshots


def test_mdns_can_only_add_an_address_to_try() -> None:
    a = Agent()
    Member(a, epoch=7).join()
    peer = a.core.peers["hazel"]
    a.node.discovered("hazel", ("127.0.0.77", 5000), 12345, a.t)
    a.node.discovered("stranger", ("127.0.0.78", 5000), 1, a.t)
    a.tick()
    assert a.core.peers["hazel"] is peer and peer.epoch == 7
    assert "stranger" not in a.core.peers
    assert a.sent_to(("127.0.0.78", 5000), "ping")  # someone there may answer


def test_snapshots_to_one_name_at_most_every_5_s_whatever_the_churn() -> None:
    a = Agent()
    for epoch in range(10, 30):  # twenty restarts, each one confirmed
        Member(a, epoch=epoch).join()
        a.tick(0.5)
    snapshot_ids = {
        decode_datagram(d.data, KEY, SID).body.snapshot_id  # type: ignore[union-attr]
        for d in a.sent_to(HAZEL, "snapshot")
    }
    elapsed = a.t
    assert len(snapshot_ids) <= 1 + elapsed // 5.0


def test_the_peer_table_is_bounded() -> None:
    a = Agent()
    hb = Heartbeat(1.0, 1.0, 0.0, (0.01,) * 6, Mode.SEARCH, 0, 0, ())
    for k in range(100):  # a hundred names within a second: none of them lost yet
        Member(a, name=f"n{k:03d}", epoch=1, src=(f"127.0.1.{k + 1}", 40000)).send(hb)
    assert len(a.core.peers.current) == 64
    assert a.core.counters["peer_table_full"] == 36
    for _ in range(40):  # once the first ones are lost, a new name takes a lost one's place
        a.tick()
    Member(a, name="late", epoch=1, src=("127.0.2.1", 40000)).send(hb)
    assert "late" in a.core.peers and len(a.core.peers.current) == 64


def test_cycling_names_draws_a_bounded_volume_of_snapshots() -> None:
    a = Agent()
    for k in range(100):
        Member(a, name=f"n{k:03d}", epoch=1, src=(f"127.0.1.{k + 1}", 40000)).join()
        a.tick(0.1)
    ids = {decode_datagram(d.data, KEY, SID).body.snapshot_id  # type: ignore[union-attr]
           for d in a.sent if d.kind == "snapshot"}
    assert 8 <= len(ids) <= 8 + 2 * a.t  # the table-wide budget: 8 at once, then 2 a second


# ---------------------------------------------------------------- floods and the log


def test_an_unauthenticated_flood_is_counted_not_written_out() -> None:
    a = Agent()
    junk = bytes(1000)
    for k in range(5000):
        a.t = k * 0.001  # five seconds of a 1 kHz flood
        a.node.receive_datagram(junk, ("127.0.0.66", 1), a.t)
    a.tick()
    a.node.flush_rejections(a.t, final=True)
    rx = [ln for ln in a.lines if ln["event"] == "rx"]
    assert a.node.receiver.counters["bad_mac"] == 5000
    assert sum(int(ln["count"]) for ln in rx) == 5000  # type: ignore[call-overload]
    assert len(rx) <= 7
    raw = [ln["raw"] for ln in rx if "raw" in ln]
    assert raw and all(len(r) <= 64 for r in raw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["wal\u202enut", "a b", "é", "x" * 33, ""])
def test_names_outside_the_safe_set_are_refused_on_the_wire(name: str) -> None:
    body = Ping(1)
    wire = to_wire(Message(SID, "walnut", 1, 0, 1.0, body))
    wire[3] = name
    a = Agent()
    a.rx(seal(pack(wire), KEY))
    assert a.node.receiver.counters["out_of_range"] == 1


def test_times_outside_the_monotonic_range_are_refused_on_the_wire() -> None:
    cov = (0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.1, 0.0, 0.1)
    body = Track((2.0, 2.0, 0.0, 0.0), cov, 1.0, 3)
    wire = to_wire(Message(SID, "hazel", 1, 0, 2.0, body))
    a = Agent()
    for t_ref in (-1e300, -1.0, 2.0**32):
        wire[7][2] = t_ref
        wire[6] = max(t_ref, 2.0**32 + 1)
        a.rx(seal(pack(wire), KEY))
    assert a.node.receiver.counters["out_of_range"] == 3


def test_an_honest_pair_still_meets_and_fuses() -> None:
    """The rules above cost an honest peer nothing but one PING round trip."""
    a = Agent()
    hazel = Member(a)
    hazel.join()
    assert a.sent_to(HAZEL, "snapshot")
    hazel.send(honest_track(a, 1))
    assert a.core.stats["tracks_fused"] == 1 and a.rejected() == {}
    assert math.isclose(float(a.core.track.state[0]), 2.0, abs_tol=1e-6)
