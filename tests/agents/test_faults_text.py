"""The fault vocabulary's text and mapping forms: link faults and Byzantine specs parsed,
formatted and read from TOML tables, bad tokens named, any spec round-tripped."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.faults import (
    BurstLoss,
    ByzantineSpec,
    FaultSpecError,
    JitterShape,
    LinkFaults,
    Stage,
    format_byzantine,
    format_faults,
    parse_byzantine,
    parse_faults,
)


def test_the_brief_example_parses_to_the_right_values() -> None:
    spec = parse_faults(
        "drop=0.3 burst=0.05,0.5,1.0 delay=50ms jitter=10ms dup=0.01 reorder=0.05 corrupt=0.001"
    )
    assert spec == LinkFaults(
        drop=0.3,
        burst=BurstLoss(0.05, 0.5, 1.0, 0.0),
        delay=0.05,
        jitter=0.01,
        duplicate=0.01,
        reorder=0.05,
        corrupt=0.001,
    )
    assert format_faults(spec) == (
        "drop=0.3 burst=0.05,0.5 delay=50ms jitter=10ms dup=0.01 reorder=0.05 corrupt=0.001"
    )


def test_units_percentages_and_options() -> None:
    spec = parse_faults(
        "drop=30% delay=0.5s jitter=250us,normal reorder=0.1,100ms corrupt=0.01,4 "
        "duplicate=0.2 partition=walnut,hazel|oak"
    )
    assert spec.drop == 0.3
    assert spec.delay == 0.5
    assert spec.jitter == 250e-6 and spec.jitter_shape is JitterShape.NORMAL
    assert (spec.reorder, spec.reorder_hold) == (0.1, 0.1)
    assert (spec.corrupt, spec.corrupt_bytes) == (0.01, 4)
    assert spec.duplicate == 0.2
    assert spec.partition == (("walnut", "hazel"), ("oak",))
    assert parse_faults(format_faults(spec)) == spec


def test_clear_means_no_faults() -> None:
    assert parse_faults("clear") == LinkFaults()
    assert parse_faults("  ") == LinkFaults()
    assert LinkFaults().is_clear and format_faults(LinkFaults()) == "clear"
    assert parse_byzantine("clear") == ByzantineSpec()
    assert format_byzantine(ByzantineSpec()) == "clear"
    assert not parse_faults("delay=1ms").is_clear


@pytest.mark.parametrize(
    ("text", "token", "problem"),
    [
        ("drop=1.5", "drop=1.5", "probability in [0, 1]"),
        ("drop=abc", "drop=abc", "must be a number"),
        ("drop=-5%", "drop=-5%", "probability"),
        ("dorp=0.1", "dorp=0.1", "did you mean 'drop'"),
        ("delay=50", "delay=50", "needs a unit"),
        ("delay=50min", "delay=50min", "duration"),
        ("delay=2h", "delay=2h", "duration"),
        ("delay=-1ms", "delay=-1ms", "in [0, 60]"),
        ("delay=120s", "delay=120s", "in [0, 60]"),
        ("jitter=1ms,gauss", "jitter=1ms,gauss", "uniform or normal"),
        ("burst=0.1", "burst=0.1", "2 to 4"),
        ("burst=0,0.5", "burst=0,0.5", "must be > 0"),
        ("corrupt=0.1,0", "corrupt=0.1,0", "1..64"),
        ("partition=a,b", "partition=a,b", "two groups"),
        ("partition=a|b,a", "partition=a|b,a", "two partition groups"),
        ("drop=0.1 drop=0.2", "drop=0.2", "already set"),
        ("dup=0.1 duplicate=0.2", "duplicate=0.2", "already set"),
        ("clear drop=0.1", "clear", "cannot be combined"),
        ("drop", "drop", "key=value"),
        ("drop=0.1 =3", "=3", "key=value"),
    ],
)
def test_bad_link_tokens_are_named(text: str, token: str, problem: str) -> None:
    with pytest.raises(FaultSpecError) as err:
        parse_faults(text)
    assert err.value.token == token
    assert problem in str(err.value)
    assert repr(token) in str(err.value)


@pytest.mark.parametrize(
    ("text", "token", "problem"),
    [
        ("bias=2", "bias=2", "two comma-separated"),
        ("bias=2,x", "bias=2,x", "must be a number"),
        ("noise=-1", "noise=-1", "noise must be in"),
        ("replay=5", "replay=5", "needs a unit"),
        ("overconfident=0.5", "overconfident=0.5", "must be in [1,"),
        ("at=both", "at=both", "send or sense"),
        ("lie=1", "lie=1", "unknown key"),
        ("drop=0.1", "drop=0.1", "unknown key"),
    ],
)
def test_bad_byzantine_tokens_are_named(text: str, token: str, problem: str) -> None:
    with pytest.raises(FaultSpecError) as err:
        parse_byzantine(text)
    assert err.value.token == token
    assert problem in str(err.value)


def test_the_same_keys_as_a_toml_table() -> None:
    table = tomllib.loads(
        """
        [out]
        drop = 0.3
        burst = [0.05, 0.5, 1.0]
        delay = "50ms"
        jitter = [0.01, "normal"]
        dup = 0.01
        reorder = [0.05, 0.1]
        partition = [["walnut", "hazel"], ["oak"]]

        [liar]
        bias = [2, 0]
        noise = 0.3
        replay = 5
        overconfident = 10
        at = "sense"
        """
    )
    spec = LinkFaults.from_mapping(table["out"])
    assert spec == parse_faults(
        "drop=0.3 burst=0.05,0.5,1 delay=50ms jitter=10ms,normal dup=0.01 reorder=0.05,100ms "
        "partition=walnut,hazel|oak"
    )
    liar = ByzantineSpec.from_mapping(table["liar"])
    assert liar == parse_byzantine("bias=2,0 noise=0.3 replay=5s overconfident=10 at=sense")
    with pytest.raises(FaultSpecError, match=r"'drop=1\.5'"):
        LinkFaults.from_mapping({"drop": 1.5})
    with pytest.raises(FaultSpecError, match="boolean"):
        LinkFaults.from_mapping({"drop": True})
    with pytest.raises(FaultSpecError, match="unknown key"):
        ByzantineSpec.from_mapping({"bais": [1, 0]})


probability = st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0))
positive_probability = st.floats(1e-6, 1.0)
duration = st.one_of(
    st.just(0.0), st.floats(0.0, 60.0), st.integers(0, 60_000).map(lambda ms: ms / 1000)
)
names = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=8)


@st.composite
def link_faults(draw: st.DrawFn) -> LinkFaults:
    burst = draw(
        st.none()
        | st.builds(BurstLoss, positive_probability, positive_probability, probability, probability)
    )
    groups = draw(st.lists(names, min_size=0, max_size=6, unique=True))
    cut = draw(st.integers(1, max(1, len(groups) - 1)))
    partition = (tuple(groups[:cut]), tuple(groups[cut:])) if len(groups) >= 2 else ()
    return LinkFaults(
        drop=draw(probability),
        burst=burst,
        delay=draw(duration),
        jitter=draw(duration),
        jitter_shape=draw(st.sampled_from(JitterShape)),
        duplicate=draw(probability),
        reorder=draw(probability),
        reorder_hold=draw(duration),
        corrupt=draw(probability),
        corrupt_bytes=draw(st.integers(1, 64)),
        partition=partition,
    )


@settings(max_examples=300, deadline=None)
@given(link_faults())
def test_link_faults_text_and_mapping_round_trip(spec: LinkFaults) -> None:
    assert parse_faults(format_faults(spec)) == spec
    assert LinkFaults.from_mapping(spec.to_mapping()) == spec


@settings(max_examples=300, deadline=None)
@given(
    st.builds(
        ByzantineSpec,
        bias=st.tuples(st.floats(-1000, 1000), st.floats(-1000, 1000)),
        noise=st.floats(0, 100),
        replay=st.one_of(st.floats(0, 3600), st.integers(0, 10_000).map(lambda ms: ms / 1000)),
        overconfident=st.floats(1, 1e6),
        at=st.sampled_from(Stage),
    )
)
def test_byzantine_text_and_mapping_round_trip(spec: ByzantineSpec) -> None:
    assert parse_byzantine(format_byzantine(spec)) == spec
    assert ByzantineSpec.from_mapping(spec.to_mapping()) == spec


def test_the_brief_byzantine_example() -> None:
    spec = parse_byzantine("bias=2,0 noise=0.3 replay=5s overconfident=10")
    assert spec == ByzantineSpec(bias=(2.0, 0.0), noise=0.3, replay=5.0, overconfident=10.0)
    assert spec.at is Stage.SEND
    assert format_byzantine(spec) == "bias=2,0 noise=0.3 replay=5s overconfident=10"
    assert parse_byzantine("bias=0.5m,-1m overconfident=10x") == ByzantineSpec(
        bias=(0.5, -1.0), overconfident=10.0
    )
