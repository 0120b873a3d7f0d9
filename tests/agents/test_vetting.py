"""The core vets its peers on its own evidence: a liar who is the only one to claim the target
is refuted by the own camera that looked there and saw nothing, once per new measurement;
a peer whose claim the own camera confirms keeps its weight; a PATCH's hot cells are vetted
the same way."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from agents.belief import ReputationTable
from agents.belief.constraints import FreeSpace
from agents.belief.deposit import Footprint
from agents.belief.track import TrackFilter
from agents.config import AgentConfig, track_for_target
from agents.core import AgentCore
from agents.observations import ObservationBatch, PoseFix, TagSighting
from agents.room import Room
from protocol.swarm import Cells, Heartbeat, Message, Mode, Patch, Track, swarm_id_from_name

SWARM = swarm_id_from_name("vetting-test")
PEER = ("127.0.0.9", 40000)
POSE = (1.0, 2.5, 0.0)  # the robot stands still, its camera facing east along y = 2.5
FRAME = 0.125  # 8 frames a second
TRACK_PERIOD = 0.2  # the peer's TRACKs, 5 a second


def core_with_peer(at: tuple[float, float] = (3.0, 1.0)) -> AgentCore:
    """A core whose peer hazel (epoch 7, standing ``at``) is known and whose clock equals
    ours."""
    config = AgentConfig(name="walnut", room=Room(5.0, 5.0), landmarks={0: (0.0, 2.5)},
                         target_tag=100, track=track_for_target(1.0, 0.67, None))  # the orbit's
    core = AgentCore(config, t0=0.0)
    body = Heartbeat(at[0], at[1], 0.0, (0.1, 0.0, 0.0, 0.1, 0.0, 0.1), Mode.SEARCH, 0, 0, ())
    core.on_message(Message(SWARM, "hazel", 7, 0, 0.0, body), PEER, 0.0)
    core.peers["hazel"].clock.add_sample(0.0, 0.0, 0.0, 0.002)
    core.take_outputs()
    return core


def frame(core: AgentCore, t: float, target: tuple[float, float] | None = None) -> None:
    """One camera frame from POSE: a pose fix, and the target sighted at ``target``."""
    sighting = None
    if target is not None:
        dx, dy = target[0] - POSE[0], target[1] - POSE[1]
        sighting = TagSighting(100, math.hypot(dx, dy), math.atan2(dy, dx) - POSE[2],
                               0.02, 0.01)
    fix = PoseFix(*POSE, np.diag([1e-4, 1e-4, 1e-4]))
    core.on_car_status(t, 0.0, 0.0, 0.0)
    core.on_observations(ObservationBatch(t, True, pose_fix=fix, target=sighting), t)


def peer_track(seq: int, t: float, at: tuple[float, float], updates: int) -> Message:
    cov = (0.004, 0.0, 0.0, 0.0, 0.004, 0.0, 0.0, 0.01, 0.0, 0.01)
    return Message(SWARM, "hazel", 7, seq, t, Track((at[0], at[1], 0.0, 0.0), cov, t, updates))


def run(core: AgentCore, seconds: float, claim: tuple[float, float], *,
        seen: tuple[float, float] | None = None, resend: int = 1) -> list[tuple[str, dict]]:
    """Frames at 8 Hz, the peer's TRACK claiming ``claim`` at 5 Hz (each one sent ``resend``
    times, the same measurement), ticks at 10 Hz; the records, in order."""
    records: list[tuple[str, dict]] = []
    t, seq, updates = 0.0, 1, 0
    next_frame, next_track, next_tick = 0.0, 0.3, 0.0
    while t < seconds:
        t = min(next_frame, next_track, next_tick)
        if t == next_frame:
            frame(core, t, seen)
            next_frame = round(next_frame + FRAME, 9)
        if t == next_track:
            updates += 1
            for _ in range(resend):
                core.on_message(peer_track(seq, t, claim, updates), PEER, t)
                seq += 1
            next_track = round(next_track + TRACK_PERIOD, 9)
        if t == next_tick:
            core.tick(t)
            next_tick = round(next_tick + 0.1, 9)
        records += [(r.event, r.fields) for r in core.take_outputs().records]
    return records


def test_a_liar_who_alone_claims_the_target_where_the_camera_sees_nothing_is_distrusted() -> None:
    core = core_with_peer()
    records = run(core, 3.0, claim=(2.5, 2.5), resend=3)  # 1.5 m ahead, in plain view
    checks = [f for e, f in records if e == "peer_track" and f["check"] is not None]
    assert checks and all(not f["check"] and f["check_reason"] == "seen_empty" for f in checks)
    # One check per new measurement, however often the same TRACK is resent.
    tracks = [f for e, f in records if e == "peer_track"]
    assert len(tracks) == 3 * len({round(f["t_ref"], 6) for f in tracks})
    assert core.vetting.checks["track_checks"] == len(checks) <= len(tracks) // 3
    distrusted = [f for e, f in records if e == "peer_distrusted"]
    assert len(distrusted) == 1 and distrusted[0]["by"] == "track"
    assert not core.reputation.fusable("hazel")
    # Nothing of the liar's was ever fused: not the refuted claims, nor their resends
    # (no check reaches a resend, and the peer's latest check failed), so there was no
    # track to drop; nothing of the liar's is fused any more.
    assert [f["outcome"] for f in tracks[:3]] == ["refuted", "disputed", "disputed"]
    assert distrusted[0]["track"] == "none" and not core.track.initialised
    # Distrusted on the failed check that takes a fresh peer's score under the threshold.
    fresh, needed = ReputationTable(core.config.reputation), 1
    while fresh.record("x", False) >= core.config.reputation.threshold:
        needed += 1
    failed = [f for f in checks if f["t_ref"] <= distrusted_at(records)]
    assert len(failed) == needed
    k = next(i for i, (e, _) in enumerate(records) if e == "peer_distrusted")
    after = [f["outcome"] for e, f in records[k:] if e == "peer_track"]
    assert len(after) > 10 and set(after) == {"distrusted"}
    print(f"\ndistrusted {distrusted_at(records) - checks[0]['t_ref']:.2f} s after the first "
          f"check, on failed check {needed}")


def distrusted_at(records: list[tuple[str, dict]]) -> float:
    """The t_ref of the TRACK whose check made the peer distrusted."""
    k = next(i for i, (e, _) in enumerate(records) if e == "peer_distrusted")
    return next(f["t_ref"] for e, f in records[k:] if e == "peer_track")


def test_a_peer_whose_claim_the_own_camera_confirms_keeps_its_weight() -> None:
    core = core_with_peer()
    records = run(core, 3.0, claim=(2.5, 2.5), seen=(2.52, 2.48))
    checks = [f for e, f in records if e == "peer_track" and f["check"] is not None]
    assert checks and all(f["check"] for f in checks)
    assert {f["check_reason"] for f in checks} <= {"witness_agrees", "seen_there"}
    assert "witness_agrees" in {f["check_reason"] for f in checks}  # once the witness has it
    assert not any(e == "peer_distrusted" for e, _ in records)
    assert core.reputation.score("hazel") > 0.8


def test_a_claim_outside_the_own_view_is_not_judged() -> None:
    core = core_with_peer()
    records = run(core, 2.0, claim=(0.5, 0.5))  # behind the camera: no evidence either way
    assert all(f["check"] is None for e, f in records if e == "peer_track")
    assert core.vetting.checks["track_checks"] == 0
    assert core.reputation.score("hazel") == core.reputation.score("nobody")


def test_a_peer_between_the_camera_and_its_claim_is_not_refuted_by_what_it_hides() -> None:
    # An honest peer 0.8 m in front of the camera reports the target 0.7 m beyond itself:
    # the camera sees the peer's back, not the place, and must not call it empty.
    core = core_with_peer(at=(1.8, 2.5))
    records = run(core, 2.0, claim=(2.5, 2.5))
    assert all(f["check"] is None for e, f in records if e == "peer_track")
    assert not any(e == "peer_distrusted" for e, _ in records)
    # The same claim from a peer standing aside is refuted (as in the first test).
    aside = core_with_peer(at=(1.8, 1.5))
    records = run(aside, 2.0, claim=(2.5, 2.5))
    assert {f["check_reason"] for e, f in records if e == "peer_track" and f["check"] is False} \
        == {"seen_empty"}


def test_patch_hot_cells_where_the_camera_sees_nothing_fail_the_patch() -> None:
    core = core_with_peer()
    for k in range(8):  # a second of empty frames looking east
        frame(core, k * FRAME)
    t = 7 * FRAME
    cs = core.config.grid.cell_size
    ix = [round(2.5 / cs - 0.5) + d for d in (0, 1, 0, 1)]
    iy = [round(2.5 / cs - 0.5) + d for d in (0, 0, 1, 1)]
    cells = Cells.from_arrays(ix, iy, [0.9] * 4, [0.05] * 4)
    body = Patch(round(cs * 1000), t, cells)
    core.on_message(Message(SWARM, "hazel", 7, 1, t, body), PEER, t)
    out = core.take_outputs().records
    records = [r.fields for r in out if r.event == "patch_check"]
    assert len(records) == 1
    assert not records[0]["passed"] and records[0]["refuted"] == 4
    # The peer is still fusable (one failure), but the cells the camera refuted are not fused.
    assert core.reputation.fusable("hazel")
    assert not any(r.event == "fused_patch" for r in out)
    assert core.counters.as_dict().get("patch_refuted") == 1
    assert core.vetting.checks == {"track_checks": 0, "track_failed": 0,
                                   "patch_checks": 1, "patch_failed": 1}
    # The same cells again, unchanged: nothing new is claimed, nothing is checked.
    core.on_message(Message(SWARM, "hazel", 7, 2, t + 0.1, Patch(body.cell_size_mm, t + 0.1,
                                                                  cells)), PEER, t + 0.1)
    assert core.vetting.checks["patch_checks"] == 1


def test_a_liar_among_observers_is_distrusted_and_the_track_starts_over_from_the_witness() -> None:
    core = core_with_peer()
    records = run(core, 3.0, claim=(2.0, 2.0), seen=(3.2, 2.9))  # the target 1.5 m off the lie
    checks = [f for e, f in records if e == "peer_track" and f["check"] is not None]
    assert checks and not any(f["check"] for f in checks)
    assert "witness_disagrees" in {f["check_reason"] for f in checks}
    distrusted = [f for e, f in records if e == "peer_distrusted"]
    assert len(distrusted) == 1 and distrusted[0]["track"] == "witness"
    assert np.hypot(*(core.track.position - (3.2, 2.9))) < 0.1  # the own detections only


def test_a_capture_mapped_after_its_receipt_is_taken_as_now_and_every_track_encodes() -> None:
    # Under load the car's clock mapping can place a frame's capture after its receipt; the
    # track then stood in the future and its TRACK (t_ref > t_sent) failed to encode, which
    # stopped the agent.
    core = core_with_peer()
    for k in range(1, 40):
        t = k * FRAME
        sighting = TagSighting(100, 1.5, 0.0, 0.02, 0.01)
        fix = PoseFix(*POSE, np.diag([1e-4, 1e-4, 1e-4]))
        core.on_car_status(t, 0.0, 0.0, 0.0)
        core.on_observations(ObservationBatch(t + 0.05, True, pose_fix=fix, target=sighting), t)
        core.tick(t)
        for send in core.take_outputs().sends:
            if isinstance(send.body, Track):
                assert send.body.t_ref <= t
                Message(SWARM, "walnut", 1, k, t, send.body)  # the codec's own checks
    assert core.stats["captures_after_receipt"] == 39 and core.track.initialised


def jumping_claims(core: AgentCore, a: tuple[float, float], b: tuple[float, float],
                   until: float = 8.0) -> Iterator[tuple[float, list[Any]]]:
    """Frames at 8 Hz (no target), the peer's TRACK claiming ``a`` and from 2 s ``b`` at
    5 Hz, ticks at 10 Hz; at each step its time and the core's records."""
    t, seq, next_frame, next_track, next_tick = 0.0, 1, 0.0, 0.3, 0.0
    while t < until:
        t = min(next_frame, next_track, next_tick)
        if t == next_frame:
            frame(core, t)
            next_frame = round(next_frame + FRAME, 9)
        if t == next_track:
            core.on_message(peer_track(seq, t, a if t < 2.0 else b, seq), PEER, t)
            seq += 1
            next_track = round(next_track + TRACK_PERIOD, 9)
        if t == next_tick:
            core.tick(t)
            next_tick = round(next_tick + 0.1, 9)
        yield t, core.take_outputs().records


def test_a_peer_whose_claims_jump_away_from_the_track_is_disputed_not_believed() -> None:
    # The peer alone tells where the target is, behind the camera (no own evidence either
    # way), standing at A; from 2 s it claims B, 1.5 m away, as confidently. Either claim
    # may be the lie. Fusing B by covariance intersection made the track confident at B
    # (NEES in the thousands when A was the truth); the track must stay consistent with A.
    core = core_with_peer()
    a = np.array([0.5, 1.0])  # B, (2.0, 1.0): 56 degrees off the camera's axis
    outcomes: list[str] = []
    worst = 0.0
    for t, records in jumping_claims(core, (0.5, 1.0), (2.0, 1.0)):
        for r in records:
            if r.event == "peer_track" and r.fields["t_ref"] >= 2.0:
                assert r.fields["check"] is None  # nothing of the own evidence bears on it
                outcomes.append(r.fields["outcome"])
        if core.track.initialised and t >= 2.0:
            d = core.track.position - a
            worst = max(worst, float(d @ np.linalg.solve(core.track.covariance[:2, :2], d)))
    # A's chi-square (2 dof) stays inside its 99.9 % bound whenever a track is held: B is
    # fused, if at all, only with the offset it disputes in its covariance.
    assert worst < 13.8, worst
    assert outcomes[:5] == ["disputed"] * 5


def test_a_claim_kept_without_new_measurements_is_checked_again_on_new_own_detections() -> None:
    # A peer that stopped measuring keeps sending the same claim (one update count), which
    # contradicts the own track (it is disputed): each own detection since its last check is
    # new evidence against it; its resends between two own detections are not, and the own
    # views of its time are counted once. (liar_only: the honest robots see the target while
    # the liar coasts its lie; they distrusted it 25 s after its onset, median of 3 seeds.)
    core = core_with_peer()
    t, seq, next_frame, next_track = 0.0, 1, 0.0, 0.3
    checks: list[dict] = []
    outcomes: set[str] = set()
    resends_checked = 0
    while t < 3.0:
        t = min(next_frame, next_track)
        if t == next_frame:
            frame(core, t, (3.2, 2.9))  # the target, 1.5 m from the claim
            next_frame = round(next_frame + FRAME, 9)
        if t == next_track:
            for resend in (False, True):  # the same TRACK twice, no own frame between
                core.on_message(peer_track(seq, t, (2.0, 2.0), 5), PEER, t)
                seq += 1
                for r in core.take_outputs().records:
                    if r.event == "peer_track":
                        outcomes.add(r.fields["outcome"])
                    if r.event == "peer_track" and r.fields["check"] is not None:
                        checks.append(r.fields)
                        resends_checked += resend
            next_track = round(next_track + TRACK_PERIOD, 9)
    assert "disputed" in outcomes
    assert len(checks) > 3 and all(not f["check"] for f in checks)
    assert all(f["check_reason"] == "witness_disagrees" and f["refuting"] == 0
               for f in checks[1:])
    assert resends_checked == 0
    assert core.vetting.checks["track_checks"] == len(checks)
    assert not core.reputation.fusable("hazel")


def test_a_coasting_claim_fused_before_any_own_track_is_checked_once_the_target_is_seen(
) -> None:
    # liar_only, seed 2: the liar's claims, out of the own camera's view, were fused while
    # the honest robot had no track of its own; then the liar coasted (resends, one update
    # count) while the honest robot saw the target 1.5 m away. Its resends were never fused
    # again, so never disputed, so never checked: distrusted only 28 s after the onset.
    core = core_with_peer()
    claim, target = (0.5, 1.0), (3.2, 2.9)  # the claim behind the camera, the target in view
    t, seq, next_frame, next_track = 0.0, 1, 0.0, 0.3
    outcomes: list[tuple[float, str]] = []
    distrusted_at = math.inf
    while t < 4.0:
        t = min(next_frame, next_track)
        if t == next_frame:
            frame(core, t, target if t >= 1.0 else None)
            next_frame = round(next_frame + FRAME, 9)
        if t == next_track:
            core.on_message(peer_track(seq, t, claim, min(seq, 3)), PEER, t)  # coasts from 3
            seq += 1
            next_track = round(next_track + TRACK_PERIOD, 9)
        for r in core.take_outputs().records:
            if r.event == "peer_track":
                outcomes.append((t, r.fields["outcome"]))
            if r.event == "peer_distrusted":
                distrusted_at = min(distrusted_at, t)
    assert [o for _, o in outcomes[:3]] == ["fused"] * 3
    assert {o for u, o in outcomes if 0.8 < u < 1.0} == {"no_new_information"}
    assert distrusted_at < 2.5, distrusted_at  # within 1.5 s of the first own detection
    assert not core.reputation.fusable("hazel")
    assert core.track.initialised
    assert float(np.hypot(*(core.track.position - np.array(target)))) < 0.1


def test_a_disputed_claim_no_own_evidence_bears_on_is_looked_at_for_a_while() -> None:
    # As above: the peer claims A, then from 2 s B, 1.5 m away, out of the camera's view
    # and with no own detection to settle it. The navigator is sent to look at B (VERIFY),
    # so the own views can speak to its next claims, for ``verify_time`` at most: a place
    # that cannot be seen is not chased.
    core = core_with_peer()
    a, b = (0.5, 1.0), (2.0, 1.0)
    verify_time = core.config.reputation.verify_time
    looks: list[tuple[float, tuple[float, float]]] = []
    disputed_at = t = math.inf
    for t, records in jumping_claims(core, a, b):
        for r in records:
            if r.event == "peer_track" and r.fields["outcome"] == "disputed":
                disputed_at = min(disputed_at, t)
            if r.event == "decision" and r.fields["mode"] == "verify":
                looks.append((t, tuple(r.fields["goal"])))
    assert 2.0 <= disputed_at < 2.5 and looks
    assert looks[0][0] - disputed_at <= 0.1  # the next decision
    assert all(goal == pytest.approx(b) for _, goal in looks)
    assert looks[-1][0] - disputed_at <= verify_time < looks[-1][0] - disputed_at + 0.2
    assert core.vetting.to_verify(t) is None


def test_a_disputed_place_the_own_views_reach_is_looked_at_past_verify_time() -> None:
    # liar_only seeds 4 and 6: the honest robot reached a view of the lie's place only 3.4 s
    # into the dispute, refuted five claims in 0.4 s, and was then sent back to search when
    # verify_time (4 s from the dispute's start) ran out, 0.2-0.4 s before the refutations
    # or its own detections would have distrusted the liar. A place the own views reach is
    # no unreachable place: the look goes on, verify_time counted from the last view that
    # bore on the peer's claims.
    core = core_with_peer()
    v, p = core.vetting, core.config.reputation
    track = TrackFilter(core.config.track, FreeSpace(5.0, 5.0))
    track.update_position((1.5, 4.0), np.eye(2) * 0.01, 0.0)  # the own (coasting) track
    claim = np.array([2.5, 2.5, 0.0, 0.0])  # 1.5 m ahead of the camera, 1.8 m from the track
    P = np.diag([0.004, 0.004, 0.01, 0.01])
    v.contest("hazel", track, claim, P, t=0.0, now=0.0, verdict=None)
    assert v.to_verify(1.0) == (2.5, 2.5)
    at = p.verify_time - 0.5
    for k in range(3):  # the camera, facing east from POSE, sees the place empty
        v.own_view(at - 0.2 + 0.1 * k, Footprint(*POSE, 3.0, math.radians(62.0)),
                   np.diag([1e-4, 1e-4, 1e-4]), None)
    verdict = v.check_track("hazel", (7, 9), claim, P, at, clock_u=0.0, now=at)
    assert verdict is not None and not verdict.outcome.passed and verdict.outcome.refuting >= 2
    assert core.reputation.fusable("hazel")  # one failure: not yet distrusted
    assert v.to_verify(p.verify_time + 0.5) == (2.5, 2.5)  # it was verify_time's end
    assert v.to_verify(at + p.verify_time + 0.1) is None  # and now is, counted from the view


def test_a_fresh_own_detection_settles_a_dispute_without_a_look() -> None:
    core = core_with_peer()
    records = []
    for k in range(8):  # the target seen at (3.2, 2.9), the peer claiming it 1.5 m away
        t = k * FRAME
        frame(core, t, (3.2, 2.9))
        core.on_message(peer_track(k + 1, t, (2.0, 2.0), k + 1), PEER, t)
        core.tick(t)
        records += core.take_outputs().records
    assert any(r.fields["outcome"] in ("disputed", "refuted") for r in records
               if r.event == "peer_track")
    assert core.vetting.to_verify(t) is None
    assert "verify" not in {r.fields["mode"] for r in records if r.event == "decision"}


def test_a_lie_beyond_the_wall_is_checked_as_it_was_told_not_clamped_into_the_room() -> None:
    """The camera sees the target 0.5 m from the east wall; the peer claims it 1.5 m further
    east, 1 m beyond the wall. Clamped into the room, the claim's covariance grew by the
    move and it 'agreed' with the witness 0.5 m away (liar_among seed 3, from 44.7 s)."""
    core = core_with_peer()
    records = run(core, 3.0, claim=(6.0, 2.5), seen=(4.5, 2.5))
    checks = [f for e, f in records if e == "peer_track" and f["check"] is not None]
    assert checks and "witness_disagrees" in {f["check_reason"] for f in checks}
    assert not any(f["check"] for f in checks)
    assert any(e == "peer_distrusted" for e, _ in records)


def unchecked_claim(core: AgentCore, t: float, updates: int) -> dict[str, Any]:
    """The peer claims the target behind the camera at ``t`` (no own evidence reaches it):
    the record of that TRACK."""
    core.on_message(peer_track(1000 + updates, t, (0.5, 0.5), updates), PEER, t)
    return [r.fields for r in core.take_outputs().records if r.event == "peer_track"][-1]


def test_a_refuted_peer_is_not_believed_where_no_check_reaches_until_a_check_passes() -> None:
    # Trusted, its claim that no check reaches is fused: no own track contradicts it.
    trusted = core_with_peer()
    run(trusted, 0.35, claim=(0.5, 0.5))
    assert unchecked_claim(trusted, 0.5, 100)["outcome"] == "fused"
    # Refuted once (still fusable by its score), the same claim is held and looked at.
    core = core_with_peer()
    records = run(core, 0.35, claim=(2.5, 2.5))  # in plain view, and nothing there
    assert [f["check_reason"] for e, f in records
            if e == "peer_track" and f["check"] is False] == ["seen_empty"]
    assert core.reputation.fusable("hazel") and not core.track.initialised
    held = unchecked_claim(core, 0.5, 100)
    assert held["outcome"] == "disputed" and held["check"] is None
    assert not core.track.initialised
    assert core.vetting.to_verify(0.5) == (0.5, 0.5)
    # A check it passes (the own camera sees the target where it says) ends that.
    for k in range(8):
        t = 0.6 + FRAME * k
        frame(core, t, target=(2.5, 2.5))
        core.on_message(peer_track(200 + k, t, (2.5, 2.5), 200 + k), PEER, t)
        core.tick(t)
    checks = [r.fields["check"] for r in core.take_outputs().records
              if r.event == "peer_track"]
    assert checks[-1] is True
    core.tick(9.0)  # own track and witness forgotten: nothing contradicts the next claim
    core.take_outputs()
    assert not core.track.initialised
    assert unchecked_claim(core, 9.0, 300)["outcome"] == "fused"
