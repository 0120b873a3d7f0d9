"""A key holder's worst: sequences of sealed, wire-valid messages with any values the wire
allows, and the agent's own frames between them. Whatever they claim, nothing inside the
agent fails (no ``internal_error``), its track and grid stay finite, its covariance stays
positive semi-definite, and its loop goes on. (A run of 3,500 sequences found nothing on
2026-12-05; this keeps a sample of them in every run.)"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agents.observations import ObservationBatch, PoseFix, TagSighting
from protocol.swarm import Cells, Heartbeat, Look, Mode, Patch, Track
from protocol.swarm.errors import FieldError
from protocol.swarm.messages import LookRecord
from tests.agents.test_hostile import OFFSET, Agent, Member

ANY32 = st.floats(allow_nan=False, allow_infinity=False, width=32)
VALUE = st.one_of(st.floats(-20, 20, width=32), ANY32,
                  st.sampled_from([0.0, 1e-30, -1e-30, 1e-7, 5.0, 1e6]))
VARIANCE = st.one_of(st.floats(min_value=0, allow_infinity=False, width=32),
                     st.sampled_from([0.0, 1e-30, 1e-6, 0.01, 1.0, 1e6]))
AGE = st.one_of(st.floats(-5, 5), st.sampled_from([0.0, -1e3, 1e3]))  # s, t_ref - now
I16 = st.integers(-32768, 32767)


@st.composite
def covariance(draw: st.DrawFn, dim: int) -> tuple[float, ...]:
    """An upper triangle with non-negative diagonal (the wire's rule) and anything else."""
    return tuple(draw(VARIANCE if col == row else VALUE)
                 for row in range(dim) for col in range(row, dim))


@st.composite
def step(draw: st.DrawFn) -> tuple:
    kind = draw(st.sampled_from(["track", "patch", "heartbeat", "look", "frame", "tick"]))
    if kind == "track":
        if draw(st.booleans()):  # a claim the limits pass: in the room, at a sane speed
            mean = (draw(st.floats(0, 5)), draw(st.floats(0, 5)), draw(st.floats(-2, 2)),
                    draw(st.floats(-2, 2)))
            var = [draw(st.floats(1e-4, 1.0)) for _ in range(4)]
            cov = (var[0], 0.0, 0.0, 0.0, var[1], 0.0, 0.0, var[2], 0.0, var[3])
            return (kind, mean, cov, draw(st.floats(-0.5, 0.0)), draw(st.integers(0, 50)))
        return (kind, tuple(draw(VALUE) for _ in range(4)), draw(covariance(4)), draw(AGE),
                draw(st.integers(0, 2**32 - 1)))
    if kind == "patch":
        n = draw(st.integers(1, 30))
        cells = [st.lists(st.integers(-40, 80), min_size=n, max_size=n),
                 st.lists(st.integers(-40, 80), min_size=n, max_size=n),
                 st.lists(st.floats(-65504, 65504, width=16), min_size=n, max_size=n),
                 st.lists(st.floats(0, 65504, width=16), min_size=n, max_size=n)]
        return (kind, *(draw(c) for c in cells), draw(AGE),
                draw(st.sampled_from([100, 1, 50, 65535])))
    if kind == "heartbeat":
        return (kind, draw(VALUE), draw(VALUE), draw(st.floats(-math.pi, math.pi)),
                draw(covariance(3)), draw(st.integers(-200, 200)), draw(st.integers(-200, 200)))
    if kind == "look":
        n = draw(st.integers(1, 64))
        records = [(draw(st.integers(0, 65535)), draw(I16), draw(I16), draw(I16))
                   for _ in range(n)]
        return (kind, draw(st.integers(0, 2**32 - 65)), draw(AGE), draw(st.integers(1, 65535)),
                draw(st.integers(1, 6283)), records)
    if kind == "frame":  # the own camera, with the target at any range and bearing or none
        seen = draw(st.booleans())
        return (kind, draw(st.floats(0.2, 6.0)) if seen else None, draw(st.floats(-1.0, 1.0)),
                draw(st.floats(0.001, 0.2)), draw(st.floats(0.0, 0.1)))
    return (kind, draw(st.floats(0.01, 2.0)))


def _apply(a: Agent, hazel: Member, s: tuple) -> None:
    t = a.t + OFFSET  # hazel's clock
    kind = s[0]
    if kind == "track":
        hazel.send(Track(s[1], s[2], max(0.0, t + s[3]), s[4]))
    elif kind == "patch":
        ox, oy = a.core.grid.origin
        cells = Cells.from_arrays(np.array(s[1]) + ox, np.array(s[2]) + oy, s[3], s[4])
        hazel.send(Patch(s[6], max(0.0, t + s[5]), cells))
    elif kind == "heartbeat":
        hazel.send(Heartbeat(s[1], s[2], s[3], s[4], Mode.SEARCH, s[5], s[6], ()))
    elif kind == "look":
        hazel.send(Look(s[1], max(0.0, t + s[2]), s[3], s[4],
                        tuple(LookRecord(*r) for r in s[5])))
    elif kind == "frame":
        sighting = None if s[1] is None else TagSighting(100, s[1], s[2], 0.02, 0.01)
        fix = PoseFix(1.0, 2.5, 0.0, np.diag([1e-4, 1e-4, 1e-4]))
        a.t = round(a.t + s[3], 9)
        a.node.car_status(a.t, (0.0, 0.0), 0.0)
        a.node.observations(ObservationBatch(a.t - s[4], True, pose_fix=fix, target=sighting),
                            a.t)
        a.sent += a.node.datagrams()
    else:
        a.tick(s[1])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step(), min_size=1, max_size=40))
def test_no_sequence_of_valid_messages_breaks_the_agent(steps: list[tuple]) -> None:
    a = Agent()
    hazel = Member(a)
    hazel.join()
    for s in steps:
        try:
            _apply(a, hazel, s)
        except FieldError:  # a value the wire itself refuses: no datagram to send
            continue
        assert a.core.counters["internal_error"] == 0, [
            line for line in a.lines if line["event"] == "refused"][-1:]
        track = a.core.track
        if track.initialised:
            x, P = track.state_at(a.t)
            assert np.all(np.isfinite(x)) and np.all(np.isfinite(P))
            assert np.all(np.linalg.eigvalsh(0.5 * (P + P.T)) > -1e-9)
        assert np.all(np.isfinite(a.core.grid.mu)) and np.all(np.isfinite(a.core.grid.var))
    a.tick(0.1)  # the loop goes on
    assert a.core.counters["internal_error"] == 0
    # what the sequences reached (pytest --hypothesis-show-statistics)
    event(f"tracks fused: {min(a.core.stats['tracks_fused'], 2)}")
    event(f"cells fused: {min(a.core.stats['cells_fused'], 1)}")
    event(f"refused: {min(a.core.counters.total, 1)}")
