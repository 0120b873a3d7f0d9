"""Fixtures for tests that run the system as real processes on loopback."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.procs import Swarm
from tools.swarmkey import write_key
from worlds.arena import load_arena, shipped_arena


def private_arena(tmp: Path, source: Path) -> Path:
    """A copy of an arena whose cars live on a loopback /24 no other test is using."""
    prefix = f"127.{random.randint(100, 250)}.{random.randint(1, 250)}."
    text = source.read_text().replace("127.0.2.", prefix)
    path = tmp / source.name
    path.write_text(text)
    return path


def make_swarm(tmp: Path, arena_source: Path) -> Swarm:
    arena_path = private_arena(tmp, arena_source)
    run_dir = tmp / "run"
    run_dir.mkdir()
    key = run_dir / "swarm.key"
    write_key(key)
    return Swarm(arena_path, load_arena(arena_path), run_dir, key)


def private_swarm_args() -> list[str]:
    """A swarm name and broadcast port of its own, so parallel runs never mix."""
    return ["--swarm", f"test-{random.getrandbits(32):08x}",
            "--port", str(random.randint(20000, 40000))]


@pytest.fixture
def two_car_swarm(tmp_path: Path) -> Iterator[Swarm]:
    swarm = make_swarm(tmp_path, shipped_arena("two_cars"))
    try:
        yield swarm
    finally:
        swarm.stop_all()
