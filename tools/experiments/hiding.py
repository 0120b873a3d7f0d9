"""A hidden target: where a scenario's :class:`~tools.experiments.scenario.Hide` puts it
for a seed (:func:`hidden_place`), the scenario with it standing there (:func:`hidden`),
and the arena file a run plays it in (:func:`arena_text`, :func:`materialise`)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

from protocol.tomlfile import FileError
from tools.experiments.scenario import Hide, Scenario, ScenarioError
from worlds.arena import Arena, Obstacle, TargetSpec, Waypoints, parse_arena


def hidden_place(arena: Arena, hide: Hide, seed: int) -> tuple[float, float]:
    """The place of the run ``seed``: the first draw (from ``hide.seed`` and ``seed``) that
    is in the room, clear of every obstacle, away from the cars' starts and seen by no
    camera at the start (range, field of view, tall obstacles); millimetres."""
    from tools.replay.metrics.footprint import blockers, camera_of, sees

    assert arena.target is not None
    half = arena.target.body_side / 2
    x0, y0, x1, y1 = hide.box
    x0, y0 = max(x0, half), max(y0, half)
    x1, y1 = min(x1, arena.room.size_x - half), min(y1, arena.room.size_y - half)
    cameras = [camera_of(arena, c.x, c.y, c.heading) for c in arena.cars]
    boxes = blockers(arena)
    rng = random.Random(f"stigmesh-hide/{hide.seed}/{seed}")
    for _ in range(20000):
        x, y = round(rng.uniform(x0, x1), 3), round(rng.uniform(y0, y1), 3)
        if any(_near_box(x, y, o, half + hide.clearance) for o in arena.obstacles):
            continue
        if any(math.hypot(x - c.x, y - c.y) < hide.from_cars for c in arena.cars):
            continue
        if any(bool(sees(arena, cam, [x], [y], boxes=boxes)[0]) for cam in cameras):
            continue
        return x, y
    raise ScenarioError(arena.source, hide.line, "no place in target.hide_in is hidden from "
                        "every camera and clear of the obstacles")


def _near_box(x: float, y: float, o: Obstacle, margin: float) -> bool:
    c, n = math.cos(-o.yaw), math.sin(-o.yaw)
    dx, dy = x - o.x, y - o.y
    lx, ly = c * dx - n * dy, n * dx + c * dy
    return abs(lx) < o.size_x / 2 + margin and abs(ly) < o.size_y / 2 + margin


def hidden(scenario: Scenario) -> Scenario:
    """The scenario's arena with its target standing still at the seed's hiding place."""
    hide, arena = scenario.hide, scenario.arena
    assert hide is not None and arena.target is not None
    x, y = hidden_place(arena, hide, scenario.seed)
    motion = Waypoints(((x, y), (x, y)), 0.0, False)
    target = TargetSpec(arena.target.tag_id, arena.target.size, arena.target.height, motion)
    return replace(scenario, arena=replace(arena, target=target))


def arena_text(scenario: Scenario) -> str | None:
    """The arena file a hidden target's run is played in (the arena's own file with its
    ``[target.motion]`` replaced by the place), or None when the arena's own file is it."""
    place = scenario.target_place
    if place is None:
        return None
    line = scenario.hide.line if scenario.hide is not None else 0
    lines = Path(scenario.arena_file).read_text(encoding="utf-8").splitlines()
    head = [i for i, text in enumerate(lines) if text.split("#")[0].strip() == "[target.motion]"]
    if len(head) != 1:
        raise ScenarioError(scenario.source, line, f"a hidden target needs its arena "
                            f"({scenario.arena_file}) to give [target.motion] as a table")
    start = head[0]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")),
               len(lines))
    x, y = place
    motion = ["[target.motion]  # the scenario's hiding place (tools/SCENARIO.md)",
              'kind = "waypoints"', f"points = [[{x!r}, {y!r}], [{x!r}, {y!r}]]",
              "speed = 0.0", "loop = false", ""]
    return "\n".join([*lines[:start], *motion, *lines[end:]]) + "\n"


def materialise(scenario: Scenario, run_dir: Path) -> Scenario:
    """The scenario as a run directory holds it: a hidden target's arena written to
    ``RUN_DIR/arena.toml`` (the world process and the replay read that file)."""
    text = arena_text(scenario)
    if text is None:
        return scenario
    path = run_dir / "arena.toml"
    path.write_text(text, encoding="utf-8")
    return replace(scenario, arena=replace(scenario.arena, source=str(path)))


def check_arena_text(scenario: Scenario) -> None:
    """The hidden target's arena file reads back to the same target (ScenarioError if not)."""
    text = arena_text(scenario)
    if text is None:
        return
    line = scenario.hide.line if scenario.hide is not None else 0
    try:
        again = parse_arena(text, scenario.arena_file, Path(scenario.arena_file).parent)
    except FileError as exc:
        raise ScenarioError(scenario.source, line, f"the hidden target's arena: {exc}") from None
    if again.target != scenario.arena.target:
        raise ScenarioError(scenario.source, line, "the hidden target's arena does not read "
                            "back to the same target")
