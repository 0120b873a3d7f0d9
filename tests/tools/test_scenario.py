"""Scenario files: validation with the line of the problem, and the schedule as operations."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.belief import FusionRule
from agents.config import FUSION_NONE
from agents.faults import ByzantineSpec, LinkFaults
from agents.transport import Direction
from tools.experiments.scenario import FUSIONS, Scenario, ScenarioError
from tools.experiments.scenario_file import (
    SCENARIO_DIR,
    SUITE_FILE,
    load_scenario,
    load_suite,
    parse_scenario,
    parse_suite,
)
from tools.experiments.schedule import (
    Kill,
    Restart,
    SetByzantine,
    SetLink,
    WorldFault,
    every_agent_faults,
    timeline,
)

HEAD = 'arena = "two_cars"\nduration = 30.0\nseed = 4\n'


def parse(body: str) -> Scenario:
    return parse_scenario(HEAD + body, "test.toml", Path("."))


def error(body: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse(body)
    return info.value


def line_of(body: str, needle: str) -> int:
    """1-based line of ``needle`` in the whole file (HEAD + body)."""
    for i, line in enumerate((HEAD + body).splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(needle)


def test_every_shipped_scenario_loads() -> None:
    files = sorted(f for f in SCENARIO_DIR.glob("*.toml") if f != SUITE_FILE)
    assert {"default", "partition", "byzantine"} <= {f.stem for f in files}
    for f in files:
        s = load_scenario(f)
        assert s.duration > 0 and s.agents
        timeline(s)
    byz = load_scenario(SCENARIO_DIR / "byzantine.toml")
    assert len(byz.agents) == 3
    ops = timeline(byz)
    assert [(o.t, o.op) for o in ops] == [
        (20.0, SetByzantine("pecan", ByzantineSpec(bias=(2.0, 0.0))))
    ]
    part = timeline(load_scenario(SCENARIO_DIR / "partition.toml"))
    assert [o.t for o in part] == [20.0, 20.0, 40.0, 40.0]


def test_the_shipped_suite_has_every_scene_the_issue_asks_for() -> None:
    suite = load_suite()
    kinds = [s.kind for s in suite.scenes]
    assert len(suite.scenes) >= 6 and suite.seeds == 10
    assert {"fault_free", "loss", "partition", "liar_among", "liar_only", "search"} <= set(kinds)
    assert {len(load_scenario(s.file).agents) for s in suite.scenes} >= {2, 3, 8}
    search = next(s for s in suite.scenes if s.kind == "search")
    assert search.seeds >= 30  # one hiding place per seed


SUITE_HEAD = 'seeds = 3\n[[scene]]\nname = "orbit"\nfile = "default.toml"\nkind = "fault_free"\n'
SUITE_HEAD += 'tests = "the orbit"\n'


def suite_error(body: str) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_suite(SUITE_HEAD + body, "suite.toml", SCENARIO_DIR)
    return str(info.value)


def test_a_suite_refuses_scenes_its_targets_cannot_measure() -> None:
    ok = parse_suite(SUITE_HEAD, "suite.toml", SCENARIO_DIR)
    assert [(s.name, s.seeds, s.real) for s in ok.scenes] == [("orbit", 3, True)]

    def scene(name: str, file: str, kind: str, extra: str = "") -> str:
        return (f'[[scene]]\nname = "{name}"\nfile = "{file}"\nkind = "{kind}"\n'
                f'tests = "x"\n{extra}')

    assert "needs a Byzantine action" in suite_error(scene("l", "default.toml", "liar_among"))
    assert "hidden target" in suite_error(scene("s", "default.toml", "search"))
    assert "names a fault_free scene" in suite_error(scene("b", "burst_loss.toml", "loss"))
    assert "only a loss scene" in suite_error(
        scene("w", "waypoints.toml", "fault_free", 'reference = "orbit"\n'))
    assert "named twice" in suite_error(scene("orbit", "default.toml", "fault_free"))
    assert "not one of" in suite_error(scene("x", "default.toml", "orbit"))
    assert "cannot read" in suite_error(scene("x", "missing.toml", "fault_free"))


def test_a_car_link_spec_as_text_or_table() -> None:
    assert parse("").car_link is None
    text = parse('car_link = "delay=20ms jitter=15ms drop=0.01"\n').car_link
    table = parse('car_link = {delay = 0.02, jitter = "15ms", drop = 0.01}\n').car_link
    assert text == table and text is not None
    assert (text.delay, text.jitter, text.drop) == (0.02, 0.015, 0.01)


def test_fusion_names_match_the_agent() -> None:
    assert set(FUSIONS) == {*(r.value for r in FusionRule), FUSION_NONE}


def test_defaults_and_per_agent_settings() -> None:
    s = parse(
        'fusion = "naive"\nuse_reputation = false\n'
        '[[agents]]\nname = "walnut"\n'
        '[[agents]]\nname = "hazel"\nfusion = "ci"\n[agents.set]\n"grid.q_drift" = 0.2\n'
    )
    assert s.setup("walnut").fusion == "naive" and not s.setup("walnut").use_reputation
    hazel = s.agent_config("hazel")
    assert hazel.fusion == "ci" and hazel.grid.q_drift == 0.2 and not hazel.use_reputation
    every = parse("")
    assert every.names == ("walnut", "hazel") and every.seed == 4


@pytest.mark.parametrize(
    ("body", "needle", "words"),
    [
        ('agents = ["walnut", "oak"]\n', "agents", "'oak' has no car"),
        ('[[schedule]]\nat = 30.0\nagent = "walnut"\nclear = true\n', "at = 30.0",
         "not before the end"),
        ('[[schedule]]\nat = 2.0\nagent = "walnut"\nfaults = {drop = 1.5}\n', "faults",
         "probability"),
        ('[[schedule]]\nat = 2.0\nagent = "walnut"\nfaults = "drop=0.5 delay=50"\n', "faults",
         "needs a unit"),
        ('[[schedule]]\nat = 2.0\nagent = "walnut"\nfaults = {dorp = 0.5}\n', "faults",
         "did you mean 'drop'"),
        ('[[schedule]]\nat = 2.0\nagent = "oak"\nkill = true\n', "agent = \"oak\"",
         "not an agent"),
        ('[[schedule]]\nat = 2.0\nagent = "walnut"\nbyzantine = {bias = [2]}\n', "byzantine",
         "bias"),
        ('[[schedule]]\nat = 2.0\npartition = "walnut|oak"\n', "partition", "'oak'"),
        ('[[schedule]]\nat = 2.0\nworld = {drop_link = {car = 7, duration = 1.0}}\n', "world",
         "no car 7"),
        ('[[schedule]]\nat = 2.0\nagent = "walnut"\nclear = true\nduration = 3.0\n',
         "duration = 3.0", "cannot last"),
        ('[[schedule]]\nat = 25.0\npartition = "walnut|hazel"\nduration = 10.0\n',
         "duration = 10.0", "after the run"),
        ('[[schedule]]\nat = 2.0\nagent = "walnut"\nkill = true\nfaults = {drop = 0.1}\n',
         "[[schedule]]", "exactly one"),
        ('[[schedule]]\nat = 2.0\nagent = "walnut"\nclear = true\nwhen = 3\n', "when",
         "unknown key"),
        ('[[agents]]\nname = "walnut"\n[agents.set]\n"grid.nonsense" = 1\n', "[[agents]]",
         "grid.nonsense"),
        ('[[agents]]\nname = "walnut"\nfusion = "average"\n', "fusion", "not one of"),
        ('car_link = "delay=20"\n', "car_link", "needs a unit"),
        ('car_link = "partition=walnut|hazel"\n', "car_link", "no partition"),
        ('car_link = 3\n', "car_link", "must be a table"),
    ],
)
def test_errors_name_the_line(body: str, needle: str, words: str) -> None:
    exc = error(body)
    assert exc.file == "test.toml"
    assert exc.line == line_of(body, needle), str(exc)
    assert words in exc.reason, str(exc)
    assert str(exc).startswith(f"test.toml:{exc.line}: ")


def test_toml_syntax_and_arena_errors() -> None:
    exc = error("[[schedule]\nat = 1\n")
    assert exc.line == 4 and "TOML" in exc.reason
    with pytest.raises(ScenarioError) as info:
        parse_scenario('arena = "no_such_room"\nduration = 5\n', "x.toml", Path("."))
    assert info.value.line == 1 and "no shipped arena" in info.value.reason
    with pytest.raises(ScenarioError) as info:
        parse_scenario('arena = "two_cars"\n', "x.toml", Path("."))
    assert "duration" in info.value.reason


def test_acting_on_a_dead_agent_is_refused_with_its_line() -> None:
    body = (
        '[[schedule]]\nat = 5.0\nagent = "hazel"\nkill = true\n'
        '[[schedule]]\nat = 8.0\nagent = "hazel"\nfaults = {drop = 0.2}\n'
    )
    exc = error(body)
    assert exc.line == line_of(body, "at = 8.0") - 1
    assert "not running at 8 s (killed at 5 s)" in exc.reason
    exc = error('[[schedule]]\nat = 5.0\nagent = "hazel"\nrestart = true\n')
    assert "nothing to restart" in exc.reason


def test_partition_composes_with_an_agents_own_faults() -> None:
    s = parse(
        '[[schedule]]\nat = 1.0\nagent = "walnut"\nfaults = {drop = 0.3}\ndirection = "in"\n'
        '[[schedule]]\nat = 2.0\npartition = "walnut|hazel"\nduration = 5.0\n'
        '[[schedule]]\nat = 3.0\nagent = "hazel"\nkill = true\nduration = 2.0\n'
        '[[schedule]]\nat = 4.0\nworld = {reboot = {car = "hazel"}}\n'
        '[[schedule]]\nat = 10.0\nagent = "*"\nbyzantine = "noise=0.3"\nduration = 1.0\n'
    )
    cut = ((("walnut",), ("hazel",)))
    ops = [(o.t, o.op) for o in timeline(s)]
    assert ops == [
        (1.0, SetLink("walnut", Direction.IN, LinkFaults(drop=0.3))),
        (2.0, SetLink("walnut", Direction.IN, LinkFaults(drop=0.3, partition=cut))),
        (2.0, SetLink("hazel", Direction.IN, LinkFaults(partition=cut))),
        (3.0, Kill("hazel")),
        (4.0, WorldFault("reboot", "hazel", 0.0)),
        # the restarted process starts clear, and the partition still holds for it
        (5.0, Restart("hazel")),
        (5.0, SetLink("hazel", Direction.IN, LinkFaults(partition=cut))),
        (7.0, SetLink("walnut", Direction.IN, LinkFaults(drop=0.3))),
        (7.0, SetLink("hazel", Direction.IN, LinkFaults())),
        (10.0, SetByzantine("walnut", ByzantineSpec(noise=0.3))),
        (10.0, SetByzantine("hazel", ByzantineSpec(noise=0.3))),
        (11.0, SetByzantine("walnut", None)),
        (11.0, SetByzantine("hazel", None)),
    ]


def test_both_directions_and_clear() -> None:
    s = parse(
        '[[schedule]]\nat = 1.0\nagent = ["walnut", "hazel"]\nfaults = "delay=50ms"\n'
        '[[schedule]]\nat = 2.0\nagent = "walnut"\nfaults = {drop = 0.1}\ndirection = "out"\n'
        '[[schedule]]\nat = 3.0\nagent = "walnut"\nclear = true\n'
    )
    ops = [(o.t, o.op) for o in timeline(s)]
    delay = LinkFaults(delay=0.05)
    assert ops == [
        (1.0, SetLink("walnut", Direction.BOTH, delay)),
        (1.0, SetLink("hazel", Direction.BOTH, delay)),
        (2.0, SetLink("walnut", Direction.OUT, LinkFaults(drop=0.1))),
        (3.0, SetLink("walnut", Direction.BOTH, LinkFaults())),
        (3.0, SetByzantine("walnut", None)),
    ]


def test_added_actions_are_validated_and_star_skips_dead_agents() -> None:
    s = parse('[[schedule]]\nat = 5.0\nagent = "hazel"\nkill = true\n')
    more = s.with_actions([every_agent_faults(6.0, LinkFaults(drop=0.5), Direction.IN)])
    assert [(o.t, o.op) for o in timeline(more)][-1] == (
        6.0, SetLink("walnut", Direction.IN, LinkFaults(drop=0.5))
    )
    assert more.with_fusion("none").setup("hazel").fusion == "none"
    with pytest.raises(ValueError):
        s.with_seed(-1)


def test_a_hidden_target_stands_at_its_seeds_place_out_of_every_view(tmp_path: Path) -> None:
    from tools.replay.metrics.footprint import camera_of, sees
    from worlds.arena import load_arena

    search = load_scenario(SCENARIO_DIR / "hidden_search.toml")
    assert search.hide is not None
    x0, y0, x1, y1 = search.hide.box
    places = [search.with_seed(k).target_place for k in range(1, 31)]
    assert len(set(places)) == 30 and places == [search.with_seed(k).target_place
                                                 for k in range(1, 31)]
    arena = search.arena
    cameras = [camera_of(arena, c.x, c.y, c.heading) for c in arena.cars]
    for place in places:
        assert place is not None and x0 <= place[0] <= x1 and y0 <= place[1] <= y1
        assert not any(sees(arena, cam, [place[0]], [place[1]])[0] for cam in cameras)
    # the run's arena file: the arena's own, the target standing at the place
    one = search.with_seed(7)
    run = one.materialise(tmp_path)
    assert run.arena.source == str(tmp_path / "arena.toml")
    assert load_arena(tmp_path / "arena.toml").target == one.arena.target
    assert load_scenario(SCENARIO_DIR / "default.toml").arena_text() is None
    bad = (SCENARIO_DIR / "hidden_search.toml").read_text().replace(
        "hide_in = [0.3, 0.3, 7.7, 5.7]", "hide_in = [9.0, 9.0, 9.5, 9.5]")
    (tmp_path / "bad.toml").write_text(bad.replace('"arenas/hidden.toml"',
                                                   f'"{SCENARIO_DIR}/arenas/hidden.toml"'))
    with pytest.raises(ScenarioError, match="does not meet the room"):
        load_scenario(tmp_path / "bad.toml")
