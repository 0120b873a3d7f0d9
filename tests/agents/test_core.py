"""AgentCore alone, in virtual time: peers come, go silent, return; outputs are deterministic."""

from __future__ import annotations

import math

from agents.config import AgentConfig
from agents.core import AgentCore, OutSnapshot, Send
from agents.room import Room
from protocol.swarm import Heartbeat, Message, Mode, Ping, Pong, swarm_id_from_name

SWARM = swarm_id_from_name("core-test")
PEER = ("127.0.0.9", 40000)


def config(name: str = "walnut") -> AgentConfig:
    return AgentConfig(name=name, room=Room(5.0, 5.0), landmarks={0: (0.0, 2.5)},
                       target_tag=100)


def heartbeat(epoch: int, seq: int, t: float) -> Message:
    body = Heartbeat(1.0, 1.0, 0.0, (0.1, 0.0, 0.0, 0.1, 0.0, 0.1), Mode.SEARCH, 0, 0, ())
    return Message(SWARM, "hazel", epoch, seq, t, body)


def _confirm(core: AgentCore, epoch: int, seq: int, t: float) -> list[Send]:
    """Tick so the core PINGs the peer, answer as the peer would; the sends that follow."""
    core.tick(t)
    pings = [s for s in core.take_outputs().sends if isinstance(s.body, Ping)]
    assert pings and pings[-1].to == PEER
    ping_id = pings[-1].body.ping_id  # type: ignore[union-attr]
    pong = Pong(ping_id, t, 100.0 + t, 100.0 + t)
    core.on_message(Message(SWARM, "hazel", epoch, seq, 100.0 + t, pong), PEER, t + 0.002)
    return list(core.take_outputs().sends)


def test_a_new_peer_gets_a_snapshot_once_confirmed_lost_after_3s_returns_by_itself() -> None:
    core = AgentCore(config(), t0=0.0)
    core.on_message(heartbeat(7, 0, 0.1), PEER, 0.1)
    out = core.take_outputs()
    assert not any(isinstance(s.body, OutSnapshot) for s in out.sends)  # not before a PONG
    assert [r.event for r in out.records] == ["peer_joined"]
    snaps = [s for s in _confirm(core, 7, 1, 0.2) if isinstance(s.body, OutSnapshot)]
    assert len(snaps) == 1 and snaps[0].to == PEER
    t = 0.2
    while t < 3.6:  # silence
        t = round(t + 0.1, 6)
        core.tick(t)
    records = [r for r in core.take_outputs().records if r.event == "peer_lost"]
    assert len(records) == 1 and records[0].fields["peer"] == "hazel"
    assert core.peers["hazel"].lost
    core.on_message(heartbeat(7, 2, 100.0 + t), PEER, t)  # the peer clock reads 100 s more
    assert not core.peers["hazel"].lost
    assert [r.event for r in core.take_outputs().records] == ["peer_returned"]


def test_a_new_epoch_replaces_the_peer_only_once_it_answers_a_ping() -> None:
    core = AgentCore(config(), t0=0.0)
    core.on_message(heartbeat(7, 0, 0.1), PEER, 0.1)
    _confirm(core, 7, 1, 0.2)
    core.on_message(heartbeat(8, 0, 0.3), PEER, 0.3)  # restarted: a higher epoch
    assert core.peers["hazel"].epoch == 7  # a candidate until it answers
    sends = _confirm(core, 8, 1, 6.0)  # past the 5 s between two SNAPSHOTs to one peer
    assert core.peers["hazel"].epoch == 8
    assert any(isinstance(s.body, OutSnapshot) for s in sends)
    core.on_message(heartbeat(7, 9, 106.1), PEER, 6.1)  # the old incarnation: refused
    assert core.counters["stale_epoch"] == 1 and core.peers["hazel"].epoch == 8


def test_ping_is_answered_and_pong_maps_the_peer_clock() -> None:
    core = AgentCore(config(), t0=0.0)
    core.on_message(heartbeat(7, 0, 100.0), PEER, 0.0)
    core.tick(0.05)
    pings = [s for s in core.take_outputs().sends if isinstance(s.body, Ping)]
    assert pings and pings[0].to == PEER
    ping_id = pings[0].body.ping_id  # type: ignore[union-attr]
    # The peer's clock reads 100 s more than ours; 2 ms each way.
    pong = Pong(ping_id, 0.05, 100.052, 100.052)
    core.on_message(Message(SWARM, "hazel", 7, 1, 100.052, pong), PEER, 0.054)
    clock = core.peers["hazel"].clock
    assert math.isclose(clock.offset_at_time(0.054), 100.0, abs_tol=1e-9)
    assert clock.synchronized_at_time(0.054)
    core.on_message(Message(SWARM, "hazel", 7, 2, 100.06, Ping(5)), PEER, 0.06)
    pongs = [s.body for s in core.take_outputs().sends if isinstance(s.body, Pong)]
    assert pongs == [Pong(5, 100.06, 0.06, 0.06)]


def test_same_inputs_same_outputs_bit_for_bit() -> None:
    def run() -> list[str]:
        core = AgentCore(config(), t0=0.0)
        digests = []
        for k in range(1, 40):
            t = k * 0.1
            core.on_car_status(t, 0.5, 0.45, 0.1)
            if k % 7 == 0:
                core.on_message(heartbeat(3, k, t), PEER, t)
            core.tick(t)
            core.take_outputs()
            digests.append(core.belief_digest())
        return digests

    assert run() == run()


def _track(updates: int, t: float) -> Message:
    from protocol.swarm import Track

    cov = (0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.1, 0.0, 0.1)
    return Message(SWARM, "hazel", 7, updates + 100, t, Track((2.0, 2.0, 0.5, 0.0), cov, t,
                                                              updates))


def test_a_track_without_new_information_is_not_fused_again_and_then_dropped() -> None:
    core = AgentCore(config(), t0=0.0)
    core.on_message(heartbeat(7, 0, 0.0), PEER, 0.0)
    core.peers["hazel"].clock.add_sample(0.0, 0.0, 0.0, 0.002)  # clocks agree
    core.on_message(_track(5, 0.01), PEER, 0.01)
    assert core.track.initialised and core.stats["tracks_fused"] == 1
    core.on_message(_track(5, 0.2), PEER, 0.2)  # the same five measurements, predicted
    assert core.stats["tracks_fused"] == 1
    assert core.counters["track_no_new_information"] == 1
    core.on_message(_track(6, 0.3), PEER, 0.3)  # one more: fused
    assert core.stats["tracks_fused"] == 2
    t = 0.3
    while t < 0.3 + core.config.track_timeout + 0.2:  # then nothing new at all
        t = round(t + 0.1, 6)
        core.tick(t)
    records = core.take_outputs().records
    outcomes = [r.fields["outcome"] for r in records if r.event == "peer_track"]
    assert outcomes == ["fused", "no_new_information", "fused"]
    dropped = [r for r in records if r.event == "track_dropped"]
    assert len(dropped) == 1 and not core.track.initialised


def test_a_lost_robots_heartbeat_keeps_its_last_known_place() -> None:
    """LOST_POSE heartbeats carry x = y = 0: that is no place to brake for or look from."""
    core = AgentCore(config(), t0=0.0)
    core.on_message(heartbeat(7, 0, 0.1), PEER, 0.1)
    peer = core.peers["hazel"]
    assert (peer.position, peer.position_at) == ((1.0, 1.0), 0.1)
    lost = Heartbeat(0.0, 0.0, 0.0, (1e6, 0.0, 0.0, 1e6, 0.0, 1e6), Mode.LOST_POSE, 0, 0, ())
    core.on_message(Message(SWARM, "hazel", 7, 1, 0.5, lost), PEER, 0.5)
    assert (peer.position, peer.position_at) == ((1.0, 1.0), 0.1)
