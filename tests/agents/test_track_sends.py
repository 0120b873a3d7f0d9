"""When a TRACK goes out: a fresh detection at once, at most ``rates.track_burst`` of those a
second; one the limit holds back goes when the limit allows (the agent's timer), not at the
next beat; a resend that carries nothing new does not count against the limit."""

from __future__ import annotations

import numpy as np

from agents.agent import Agent
from agents.config import AgentConfig
from agents.core import AgentCore
from agents.observations import ObservationBatch, PoseFix, TagSighting
from agents.room import Room
from protocol.swarm import swarm_id_from_name

FIX = PoseFix(1.0, 2.5, 0.0, np.diag([1e-4, 1e-4, 1e-4]))


def config() -> AgentConfig:
    return AgentConfig(name="walnut", room=Room(5.0, 5.0), landmarks={0: (0.0, 2.5)},
                       target_tag=100)


def seen(t: float) -> ObservationBatch:
    """A frame at ``t`` that sees the target 1.5 m ahead (and carries a pose fix)."""
    return ObservationBatch(t, True, target=TagSighting(100, 1.5, 0.0, 0.03, 0.01),
                            pose_fix=FIX)


def tracks_sent(core: AgentCore) -> int:
    return sum(1 for s in core.take_outputs().sends if type(s.body).__name__ == "Track")


def test_a_detection_held_back_by_the_burst_limit_goes_when_the_limit_allows() -> None:
    core = AgentCore(config(), t0=0.0)
    burst = 1.0 / core.config.rates.track_burst
    core.on_observations(seen(0.01), 0.01)
    assert tracks_sent(core) == 1 and core.track_due_at() is None
    core.on_observations(seen(0.02), 0.02)  # within the limit of the first
    assert tracks_sent(core) == 0
    due = core.track_due_at()
    assert due is not None and abs(due - (0.01 + burst)) < 1e-12
    core.send_due_track(due - 1e-3)
    assert tracks_sent(core) == 0
    core.send_due_track(due)
    assert tracks_sent(core) == 1 and core.track_due_at() is None


def test_a_resend_does_not_hold_back_the_next_detection() -> None:
    core = AgentCore(config(), t0=0.0)
    core.on_observations(seen(0.01), 0.01)
    core.tick(0.1)
    core.take_outputs()
    core.tick(0.3)  # nothing new for 1 / rates.track: the last TRACK again
    assert tracks_sent(core) == 1
    core.on_observations(seen(0.31), 0.31)  # 10 ms after the resend: at once
    assert tracks_sent(core) == 1


def test_the_agents_timer_sends_the_held_back_track() -> None:
    agent = Agent(config(), key=b"k" * 32, swarm_id=swarm_id_from_name("sends-test"),
                  epoch=1, t0=0.0, first_tick=0.5)
    agent.receive_frame(seen(0.01), 0.01)
    assert [o.kind for o in agent.service(0.01)].count("track") == 1
    agent.receive_frame(seen(0.02), 0.02)
    assert [o.kind for o in agent.service(0.02)].count("track") == 0
    sent_at = []
    t = agent.get_timer()
    while t is not None and t < 0.5:  # the agent's wake-ups before its first beat
        sent_at += [t for o in agent.service(t) if o.kind == "track"]
        t = agent.get_timer()
    assert sent_at == [0.01 + 1.0 / agent.core.config.rates.track_burst]
