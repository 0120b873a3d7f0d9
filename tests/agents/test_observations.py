from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.observations import (
    Detection,
    ObservationBatch,
    ObservationError,
    PoseFix,
    TagSighting,
    checked_covariance,
)
from protocol.errors import ProtocolError


def sighting(tag_id: int = 3, **kw: float) -> TagSighting:
    values = {"range": 1.5, "bearing": 0.2, "sigma_range": 0.05, "sigma_bearing": 0.02}
    values.update(kw)
    return TagSighting(
        tag_id, values["range"], values["bearing"], values["sigma_range"], values["sigma_bearing"]
    )


def test_valid_sighting_and_noise_cov() -> None:
    s = sighting()
    assert s.tag_id == 3
    assert np.allclose(s.noise_cov, np.diag([0.05**2, 0.02**2]))


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"range": math.nan}, "not_finite"),
        ({"range": math.inf}, "not_finite"),
        ({"range": 0.0}, "bad_range"),
        ({"range": -1.0}, "bad_range"),
        ({"bearing": 3.5}, "bad_bearing"),
        ({"bearing": -math.inf}, "not_finite"),
        ({"sigma_range": 0.0}, "bad_sigma"),
        ({"sigma_bearing": -0.1}, "bad_sigma"),
        ({"sigma_bearing": math.nan}, "not_finite"),
    ],
)
def test_sighting_refuses_bad_numbers(kw: dict[str, float], reason: str) -> None:
    with pytest.raises(ObservationError) as info:
        sighting(3, **kw)
    assert info.value.reason == reason


@pytest.mark.parametrize("tag_id", [-1, True, 1.0, "3"])
def test_sighting_refuses_bad_tag_ids(tag_id: object) -> None:
    with pytest.raises(ObservationError) as info:
        TagSighting(tag_id, 1.0, 0.0, 0.1, 0.1)  # type: ignore[arg-type]
    assert info.value.reason == "bad_tag_id"


def test_observation_error_is_both_protocol_error_and_value_error() -> None:
    with pytest.raises(ProtocolError):
        sighting(range=-1.0)
    with pytest.raises(ValueError, match="bad_range"):
        sighting(range=-1.0)


def test_pose_fix_stores_read_only_symmetric_cov() -> None:
    cov = np.diag([0.01, 0.02, 0.003])
    fix = PoseFix(1.0, 2.0, 0.5, cov)
    cov[0, 0] = 99.0  # the fix holds its own copy
    assert fix.cov[0, 0] == 0.01
    with pytest.raises(ValueError):
        fix.cov[0, 0] = 1.0


@pytest.mark.parametrize(
    "cov",
    [
        np.eye(2),  # wrong shape
        np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),  # not symmetric
        np.diag([1.0, -0.1, 1.0]),  # not PSD
        np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),  # indefinite
        np.diag([1.0, math.nan, 1.0]),
        np.diag([0.0, 1.0, 1.0]),  # PSD but a zero variance: no information direction is fine,
        # certainty is not
        [["a", "b", "c"]] * 3,
    ],
)
def test_pose_fix_refuses_bad_covariances(cov: object) -> None:
    with pytest.raises(ObservationError):
        PoseFix(0.0, 0.0, 0.0, cov)  # type: ignore[arg-type]


def test_detection_validates_2x2() -> None:
    d = Detection(1.0, 2.0, np.array([[0.01, 0.002], [0.002, 0.02]]), t=5.0)
    assert d.cov.shape == (2, 2)
    with pytest.raises(ObservationError):
        Detection(1.0, 2.0, np.eye(3), t=5.0)
    with pytest.raises(ObservationError):
        Detection(1.0, 2.0, np.eye(2), t=math.nan)
    with pytest.raises(ObservationError):
        Detection(1.0, math.inf, np.eye(2), t=0.0)


def test_batch_coerces_tags_to_tuple_and_refuses_duplicates() -> None:
    b = ObservationBatch(1.0, True, [sighting(1), sighting(2)])  # type: ignore[arg-type]
    assert isinstance(b.tags, tuple)
    assert [s.tag_id for s in b.tags] == [1, 2]
    with pytest.raises(ObservationError) as info:
        ObservationBatch(1.0, True, (sighting(1), sighting(1)))
    assert info.value.reason == "duplicate_tag"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"t_capture": math.nan, "synchronized": True},
        {"t_capture": 1.0, "synchronized": 1},
        {"t_capture": 1.0, "synchronized": True, "tags": (object(),)},
        {"t_capture": 1.0, "synchronized": True, "target": object()},
        {"t_capture": 1.0, "synchronized": True, "pose_fix": object()},
    ],
)
def test_batch_refuses_bad_fields(kwargs: dict[str, object]) -> None:
    with pytest.raises(ObservationError):
        ObservationBatch(**kwargs)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-3.0, 3.0), min_size=9, max_size=9),
    st.floats(1e-6, 1.0),
)
def test_any_gram_matrix_is_accepted(entries: list[float], ridge: float) -> None:
    a = np.array(entries).reshape(3, 3)
    cov = a @ a.T + ridge * np.eye(3)
    out = checked_covariance(cov, 3)
    assert np.array_equal(out, out.T)
    assert np.allclose(out, cov)
