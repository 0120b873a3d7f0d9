"""A hidden target: where a scenario's :class:`Hide` puts it for a seed (:func:`hidden_place`),
the arena with it standing there (:func:`hidden_arena`), and the arena file a run plays it
in (:func:`hidden_arena_text`). The scenario (:mod:`tools.experiments.scenario`) holds a
:class:`Hide` and calls these with its fields.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from pathlib import Path

from protocol.tomlfile import FileError
from worlds.arena import Arena, Obstacle, TargetSpec, Waypoints, parse_arena


@dataclass(frozen=True)
class Hide:
    """The target stands still at a place drawn from the run's seed: uniformly in ``box``
    (xmin, ymin, xmax, ymax), clear of the obstacles, away from the cars' starts and out of
    every camera's view at the start. ``seed`` picks a family of places."""

    box: tuple[float, float, float, float]
    seed: int = 0
    clearance: float = 0.15  # m between the target's column and an obstacle
    from_cars: float = 0.5  # m from a car's start
    line: int = 0


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
    raise FileError(arena.source, hide.line, "no place in target.hide_in is hidden from "
                    "every camera and clear of the obstacles")


def _near_box(x: float, y: float, o: Obstacle, margin: float) -> bool:
    c, n = math.cos(-o.yaw), math.sin(-o.yaw)
    dx, dy = x - o.x, y - o.y
    lx, ly = c * dx - n * dy, n * dx + c * dy
    return abs(lx) < o.size_x / 2 + margin and abs(ly) < o.size_y / 2 + margin


def hidden_arena(arena: Arena, hide: Hide, seed: int) -> Arena:
    """``arena`` with its target standing still at the hiding place of run ``seed``."""
    assert arena.target is not None
    x, y = hidden_place(arena, hide, seed)
    motion = Waypoints(((x, y), (x, y)), 0.0, False)
    target = TargetSpec(arena.target.tag_id, arena.target.size, arena.target.height, motion)
    return replace(arena, target=target)


def hidden_arena_text(arena_file: str, place: tuple[float, float], *, source: str,
                      line: int) -> str:
    """The arena file a hidden target's run is played in: ``arena_file`` with its
    ``[target.motion]`` replaced by the place. ``source`` and ``line`` name the scenario's
    ``hide_in`` in the :class:`FileError` for an arena without such a table."""
    lines = Path(arena_file).read_text(encoding="utf-8").splitlines()
    head = [i for i, text in enumerate(lines) if text.split("#")[0].strip() == "[target.motion]"]
    if len(head) != 1:
        raise FileError(source, line, f"a hidden target needs its arena ({arena_file}) to "
                        "give [target.motion] as a table")
    start = head[0]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")),
               len(lines))
    x, y = place
    motion = ["[target.motion]  # the scenario's hiding place (tools/SCENARIO.md)",
              'kind = "waypoints"', f"points = [[{x!r}, {y!r}], [{x!r}, {y!r}]]",
              "speed = 0.0", "loop = false", ""]
    return "\n".join([*lines[:start], *motion, *lines[end:]]) + "\n"


def check_hidden_arena_text(text: str, arena_file: str, target: TargetSpec | None, *,
                            source: str, line: int) -> None:
    """``text`` reads back to ``target`` (a :class:`FileError` if not)."""
    try:
        again = parse_arena(text, arena_file, Path(arena_file).parent)
    except FileError as exc:
        raise FileError(source, line, f"the hidden target's arena: {exc}") from None
    if again.target != target:
        raise FileError(source, line, "the hidden target's arena does not read back to the "
                        "same target")


__all__ = ["Hide", "check_hidden_arena_text", "hidden_arena", "hidden_arena_text",
           "hidden_place"]
