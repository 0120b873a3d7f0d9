"""The core's search map: its own looks go out as LOOKs, a peer's looks count once, from a
trusted peer, where it stood, at a bounded rate; sharing off sends and applies none."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from agents.belief.search import CameraLook, SearchMap, SearchParams, viewpoints_for
from agents.config import AgentConfig
from agents.core import AgentCore
from agents.room import Room
from agents.seeking import LookBucket, LookLedger
from protocol.swarm import Heartbeat, Look, LookRecord, Message, Mode, swarm_id_from_name

SWARM = swarm_id_from_name("core-search-test")
PEER = ("127.0.0.9", 40000)
STILL = SearchParams(target_speed=0.0)  # no diffusion: maps compare exactly


def config(name: str = "walnut", **search: Any) -> AgentConfig:
    return AgentConfig(name=name, room=Room(5.0, 5.0), landmarks={0: (0.0, 2.5)},
                       target_tag=100, search=replace(STILL, **search))


def synced_core(x: float = 1.0, y: float = 1.0, fusion: str = "ci", **search: Any) -> AgentCore:
    """A core whose peer hazel (epoch 7) stands at (x, y), its clock equal to ours."""
    core = AgentCore(replace(config(**search), fusion=fusion), t0=0.0)
    body = Heartbeat(x, y, 0.0, (0.1, 0.0, 0.0, 0.1, 0.0, 0.1), Mode.SEARCH, 0, 0, ())
    core.on_message(Message(SWARM, "hazel", 7, 0, 0.0, body), PEER, 0.0)
    core.peers["hazel"].clock.add_sample(0.0, 0.0, 0.0, 0.002)
    core.take_outputs()
    return core


def look_message(seq: int, first: int, looks: list[tuple[int, int, int, int]],
                 t: float = 0.5) -> Message:
    return Message(SWARM, "hazel", 7, seq, t, Look(first, t, 300, 1082, tuple(
        LookRecord(*r) for r in looks)))


def applied_directly(looks: list[tuple[int, int, int, int]]) -> np.ndarray:
    m = SearchMap(Room(5.0, 5.0), STILL)
    for _, x, y, h in looks:
        m.apply_look(CameraLook(0.0, x / 100, y / 100, h * math.pi / 32768, 3.0, 1.082))
    return m.p


A, B, C = (200, 100, 100, 0), (100, 120, 110, 8192), (0, 140, 120, 16384)


def test_a_resent_look_counts_once() -> None:
    core = synced_core()
    core.on_message(look_message(1, 10, [A, B]), PEER, 0.5)
    core.on_message(look_message(2, 11, [B, C]), PEER, 0.6)  # look 11 again, then 12
    core.on_message(look_message(3, 10, [A, B]), PEER, 0.7)  # both again
    assert core.seeker.map is not None
    assert core.seeker.stats["looks_applied"] == 3
    assert core.counters["look_duplicate"] == 3
    assert np.array_equal(core.seeker.map.p, applied_directly([A, B, C]))
    records = [r.fields for r in core.take_outputs().records if r.event == "peer_look"]
    assert [(r["applied"], r["again"]) for r in records] == [(2, 0), (1, 1), (0, 2)]


def test_a_distrusted_peers_looks_are_not_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    core = synced_core()
    monkeypatch.setattr(core.reputation, "fusable", lambda name: False)
    core.on_message(look_message(1, 0, [A]), PEER, 0.5)
    assert core.counters["look_distrusted"] == 1 and core.seeker.stats["looks_applied"] == 0
    assert core.seeker.map is not None
    assert np.array_equal(core.seeker.map.p, applied_directly([]))


def test_a_look_far_from_where_the_peer_said_it_was_is_refused() -> None:
    core = synced_core(x=4.5, y=4.5)  # 1 s after its HEARTBEAT: 1 m + 1 m/s * 1 s of slack
    core.on_message(look_message(1, 0, [A]), PEER, 1.0)  # at (1.0, 1.0), 4.9 m away
    assert core.counters["look_misplaced"] == 1 and core.seeker.stats["looks_applied"] == 0
    near = synced_core(x=2.5, y=1.0)
    near.on_message(look_message(1, 0, [(0, 100, 100, 0)]), PEER, 1.0)  # 1.5 m away: 2 m slack
    assert near.seeker.stats["looks_applied"] == 1


def test_a_flood_of_looks_is_bounded_by_the_peers_bucket() -> None:
    core = synced_core()
    flood = [(0, 100 + k, 100, 0) for k in range(64)]
    core.on_message(look_message(1, 0, flood), PEER, 0.5)
    assert core.seeker.stats["looks_applied"] == 16  # the bucket's burst
    assert core.counters["look_rate_exceeded"] == 48
    more = [(0, 100 + k, 100, 0) for k in range(64)]
    core.on_message(look_message(2, 64, more), PEER, 1.5)  # one second later: 8 more
    assert core.seeker.stats["looks_applied"] == 24


def test_looks_wait_for_the_peers_clock() -> None:
    core = AgentCore(config(), t0=0.0)
    body = Heartbeat(1.0, 1.0, 0.0, (0.1, 0.0, 0.0, 0.1, 0.0, 0.1), Mode.SEARCH, 0, 0, ())
    core.on_message(Message(SWARM, "hazel", 7, 0, 0.0, body), PEER, 0.0)
    core.on_message(look_message(1, 0, [A]), PEER, 0.5)
    assert core.counters["look_peer_clock_unsynced"] == 1
    assert core.seeker.stats["looks_applied"] == 0


def _make_looks(core: AgentCore, n: int, t0: float = 0.1) -> None:
    """``n`` frames that saw nothing, from a good pose, a quarter second apart."""
    cov = np.diag([1e-4, 1e-4, 1e-4])
    for k in range(n):
        pose = np.array([1.0 + 0.1 * k, 1.0, 0.3 * k])
        core.seeker.after_frame(t0 + 0.25 * k, pose, cov, None, False)


def test_own_looks_go_out_twice_and_a_receiver_applies_exactly_the_same() -> None:
    sender = AgentCore(config(), t0=0.0)
    _make_looks(sender, 4)  # t = 0.1 .. 0.85
    sender.tick(1.0)
    first = [s.body for s in sender.take_outputs().sends if isinstance(s.body, Look)]
    _make_looks(sender, 4, t0=1.1)  # t = 1.1 .. 1.85
    sender.tick(2.0)
    second = [s.body for s in sender.take_outputs().sends if isinstance(s.body, Look)]
    assert len(first) == len(second) == 1
    assert first[0].first_seq == 0 and len(first[0].looks) == 4
    assert second[0].first_seq == 0 and len(second[0].looks) == 8  # the last 2 s: all again
    assert [r.age_ms for r in second[0].looks] == [1750, 1500, 1250, 1000, 750, 500, 250, 0]
    receiver = synced_core(x=1.5, y=1.0)
    receiver.on_message(Message(SWARM, "hazel", 7, 1, 1.0, first[0]), PEER, 1.0)
    receiver.on_message(Message(SWARM, "hazel", 7, 2, 2.0, second[0]), PEER, 2.0)
    assert receiver.seeker.stats["looks_applied"] == 8
    assert receiver.seeker.map is not None and sender.seeker.map is not None
    assert np.array_equal(receiver.seeker.map.p, sender.seeker.map.p)  # the same, bit for bit


def test_no_look_while_the_pose_is_uncertain_or_more_often_than_the_interval() -> None:
    core = AgentCore(config(), t0=0.0)
    core.seeker.after_frame(0.1, np.array([1.0, 1.0, 0.0]), np.diag([0.1, 0.1, 0.01]), None, False)
    assert core.seeker.stats["looks_made"] == 0  # 0.32 m of standard deviation
    good = np.diag([1e-4, 1e-4, 1e-4])
    for t in (0.1, 0.2, 0.3, 0.36):
        core.seeker.after_frame(t, np.array([1.0, 1.0, 0.0]), good, None, False)
    assert core.seeker.stats["looks_made"] == 2  # 0.1 and 0.36


def test_sharing_off_sends_and_applies_no_look() -> None:
    core = synced_core(share=False)
    _make_looks(core, 4)
    core.tick(1.0)
    core.tick(2.0)
    assert not [s for s in core.take_outputs().sends if isinstance(s.body, Look)]
    assert core.seeker.stats["looks_made"] == 4
    core.on_message(look_message(1, 0, [A]), PEER, 2.1)
    assert core.counters["look_not_sharing"] == 1 and core.seeker.stats["looks_applied"] == 0


def test_fusion_none_applies_no_look() -> None:
    core = synced_core(fusion="none")  # the no-sharing baseline uses nothing it receives
    core.on_message(look_message(1, 0, [A]), PEER, 0.5)
    assert core.counters["look_not_sharing"] == 1 and core.seeker.stats["looks_applied"] == 0


def test_no_look_while_a_track_is_held() -> None:
    core = AgentCore(config(), t0=0.0)
    good = np.diag([1e-4, 1e-4, 1e-4])
    core.seeker.after_frame(0.1, np.array([1.0, 1.0, 0.0]), good, None, True)
    assert core.seeker.stats["looks_made"] == 0


def test_a_track_holds_the_map_on_it_and_search_resumes_from_there() -> None:
    core = AgentCore(config(target_speed=0.5), t0=0.0)
    core.track.update_position((3.0, 3.0), np.eye(2) * 0.01, 0.0)
    core._track_info_at = 0.0  # as a fused detection sets it
    core.tick(0.1)
    assert core.seeker.map is not None
    assert core.seeker.map.probability_within(3.0, 3.0, 0.5) > 0.8
    core.track.reset()
    for k in range(2, 22):  # two seconds: 0.5 m/s spreads it at most 1 m
        core.tick(0.1 * k)
    assert core.seeker.map.probability_within(3.0, 3.0, 0.5) < 0.9  # it spreads ...
    assert core.seeker.map.probability_within(3.0, 3.0, 1.5) > 0.999  # ... at the target's speed


def test_ledger_counts_each_look_once() -> None:
    ledger = LookLedger(window=8)
    assert ledger.admit("walnut", 1, 10) is None
    assert ledger.admit("walnut", 1, 10) == "look_duplicate"
    assert ledger.admit("walnut", 1, 8) is None  # late, inside the window
    assert ledger.admit("walnut", 1, 8) == "look_duplicate"
    assert ledger.admit("walnut", 1, 3) is None  # 7 behind: the window's last slot
    assert ledger.admit("walnut", 1, 2) == "look_too_old"
    assert ledger.admit("walnut", 2, 10) is None  # a new epoch is a new stream
    assert ledger.admit("hazel", 1, 10) is None
    assert ledger.admit("walnut", 1, 30) is None  # a jump clears the bitmap
    assert ledger.admit("walnut", 1, 29) is None
    assert ledger.admit("walnut", 1, 30) == "look_duplicate"


def test_ledger_forgets_the_least_recently_used_stream() -> None:
    ledger = LookLedger(window=8, max_streams=2)
    ledger.admit("a", 1, 0)
    ledger.admit("b", 1, 0)
    ledger.admit("a", 1, 1)
    ledger.admit("c", 1, 0)  # evicts b
    assert ledger.admit("a", 1, 0) == "look_duplicate"
    assert ledger.admit("b", 1, 0) is None


def test_bucket_bounds_looks_per_second() -> None:
    bucket = LookBucket(rate=8.0, burst=16.0, now=0.0)
    assert sum(bucket.take(0.0) for _ in range(40)) == 16
    assert sum(bucket.take(1.0) for _ in range(40)) == 8
    assert sum(bucket.take(100.0) for _ in range(40)) == 16


def test_the_belief_log_carries_the_search_counters_not_the_map() -> None:
    core = AgentCore(config(), t0=0.0)
    _make_looks(core, 3)
    core.tick(1.0)
    beliefs = [r.fields for r in core.take_outputs().records if r.event == "belief"]
    assert beliefs and beliefs[-1]["search"]["looks_made"] == 3
    assert beliefs[-1]["search"]["shape"] == (20, 20)
    assert "search_f32" not in beliefs[-1]  # a re-run rebuilds the map; the log is smaller


def test_a_peers_look_is_applied_past_the_robots_in_front_of_it() -> None:
    """A third robot stands 0.8 m in front of hazel's camera: the receiver applies hazel's
    look without the cells behind it (this robot has no pose: it hides nothing)."""
    core = synced_core()
    pecan = Heartbeat(1.8, 1.0, 0.0, (0.1, 0.0, 0.0, 0.1, 0.0, 0.1), Mode.SEARCH, 0, 0, ())
    core.on_message(Message(SWARM, "pecan", 3, 0, 0.0, pecan), ("127.0.0.10", 40000), 0.0)
    core.on_message(look_message(1, 10, [A]), PEER, 0.5)
    assert core.seeker.map is not None and core.seeker.stats["looks_applied"] == 1
    expected = SearchMap(Room(5.0, 5.0), STILL, robot_radius=core.config.nav.robot_radius)
    expected.apply_look(CameraLook(0.0, 1.0, 1.0, 0.0, 3.0, 1.082), [(1.8, 1.0)])
    assert np.array_equal(core.seeker.map.p, expected.p)
    assert not np.array_equal(core.seeker.map.p, applied_directly([A]))
    behind = core.seeker.map.cell_of(3.0, 1.0)
    assert core.seeker.map.p[behind] > applied_directly([A])[behind]  # not searched


def test_the_viewpoints_are_built_with_the_agent_not_at_its_first_search() -> None:
    """Built at the first search decision, they held the agent's loop 0.06-0.29 s (eight
    agents on two cores: past the car's 300 ms watchdog)."""
    viewpoints_for.cache_clear()
    core = AgentCore(config(viewpoint_spacing=0.6), t0=0.0)  # a setting no other test uses
    assert viewpoints_for.cache_info().misses == 1
    view = core.seeker.view((1.0, 1.0, 0.0), 0.1)
    assert view is not None and len(view.gains) > 0
    assert viewpoints_for.cache_info().misses == 1


def test_a_peers_look_is_applied_as_late_as_it_is() -> None:
    """A look taken 2.2 s before t_ref 0.5 (its age field), received at 0.5 with the target
    declared at 0.5 m/s: four steps of the map's walk old (one per 0.5 s)."""
    core = synced_core(target_speed=0.5)
    old = (2200, 100, 100, 0)
    core.on_message(look_message(1, 10, [old]), PEER, 0.5)
    assert core.seeker.map is not None and core.seeker.stats["looks_applied"] == 1
    walked = SearchMap(Room(5.0, 5.0), replace(STILL, target_speed=0.5))
    walked.apply_look(CameraLook(-1.7, 1.0, 1.0, 0.0, 3.0, 1.082), age=2.2)
    assert np.array_equal(core.seeker.map.p, walked.p)
    assert not np.array_equal(core.seeker.map.p, applied_directly([old]))
