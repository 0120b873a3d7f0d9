"""Fixtures for tests that run the system as real processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.procs import Swarm, private_swarm, private_swarm_args
from worlds.arena import shipped_arena

__all__ = ["make_swarm", "private_swarm_args"]


def make_swarm(tmp: Path, arena_source: Path) -> Swarm:
    return private_swarm(tmp, arena_source)


@pytest.fixture
def two_car_swarm(tmp_path: Path) -> Iterator[Swarm]:
    swarm = make_swarm(tmp_path, shipped_arena("two_cars"))
    try:
        yield swarm
    finally:
        swarm.stop_all()
