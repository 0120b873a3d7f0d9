"""The telemetry's ``sim`` object: what the world writes, the agent reads back; bad ones refused."""

from __future__ import annotations

import json

import pytest

from protocol.mz01.simobs import SimObsError, SimObservation, parse_sim


def test_written_and_read_back_through_json() -> None:
    obs = SimObservation(84568, ((14, 1.2531, 0.4472), (15, 1.3902, -0.4514)),
                         (100, 2.0417, 0.1203), 0.03, 0.01)
    wire = json.loads(json.dumps(obs.to_json()))
    assert wire == {"obs_ms": 84568, "tags": [[14, 1.2531, 0.4472], [15, 1.3902, -0.4514]],
                    "target": [100, 2.0417, 0.1203], "sigma": [0.03, 0.01]}
    assert parse_sim(wire) == obs
    assert parse_sim({**wire, "target": None}).target is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"obs_ms": -1}, "bad_type"),
        ({"tags": [[1, 2.0]]}, "bad_shape"),
        ({"tags": [[1, -2.0, 0.0]]}, "out_of_range"),
        ({"target": [1, 2.0, 4.0]}, "out_of_range"),
        ({"sigma": [0.0, 0.01]}, "out_of_range"),
        ({"sigma": [float("nan"), 0.01]}, "not_finite"),
        ({"tags": [[1, 1.0, 0.0]] * 65}, "bad_shape"),
    ],
)
def test_a_malformed_object_is_refused_with_its_reason(change: dict, reason: str) -> None:
    good = {"obs_ms": 1, "tags": [], "target": None, "sigma": [0.03, 0.01]}
    with pytest.raises(SimObsError) as info:
        parse_sim({**good, **change})
    assert info.value.reason == reason
