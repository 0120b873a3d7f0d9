"""A liar's damage undone, as the evidence measures it: "back under the limit" is the first
time an honest agent holds a track that stays good for a while, not the last excursion of
the run (which, on liar_only, the scene makes: the liar alone sees the target again later
and any honest track coasts out of the limit, the oracle's too)."""

from __future__ import annotations

import numpy as np
import pytest

from tools.experiments.evidence.stats import back_under, recovery

STEP = 0.1
ONSET = 20.0


def series(*pieces: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """An error series at 10 Hz from (seconds, error) pieces; NaN: no track held."""
    err = np.concatenate([np.full(round(s / STEP), e, dtype=float) for s, e in pieces])
    return np.arange(err.size) * STEP, err


def test_back_under_is_the_reacquisition_and_for_good_the_scene_s_last_excursion() -> None:
    # good until the onset; the lie for 2 s; no track; re-acquired at 32 s and good for 4 s;
    # the target leaves every honest camera and the track coasts out (0.6 m) until dropped;
    # re-acquired at 50 s
    t, err = series((20.0, 0.05), (2.0, 1.5), (10.0, np.nan), (4.0, 0.05), (3.0, 0.6),
                    (11.0, np.nan), (10.0, 0.05))
    assert back_under(t, err, ONSET, 0.3, hold=2.0) == 12.0
    assert recovery(t, err, ONSET, 0.3) == 30.0


def test_the_moment_before_a_lie_reaches_the_track_is_not_a_recovery() -> None:
    t, err = series((20.1, 0.05), (3.0, 1.5), (8.0, 0.05))
    # the 1 s rolling median (10 samples) stays under 0.3 m until 5 of them are the lie, at
    # 20.5 s, and is back under once 4 at most are: at 23.6 s
    assert back_under(t, err, ONSET, 0.3, hold=2.0) == pytest.approx(3.6)


def test_an_agent_that_never_holds_a_good_track_never_recovers() -> None:
    t, err = series((20.0, 0.05), (5.0, 1.5), (35.0, np.nan))
    assert back_under(t, err, ONSET, 0.3, hold=2.0) is None
    t, err = series((20.0, 0.05), (40.0, 0.05))
    assert back_under(t, err, ONSET, 0.3, hold=2.0) == 0.0
