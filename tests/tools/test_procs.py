"""The process set of a demo or a real run: its paths mean the same to every process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.procs import Swarm
from worlds.arena import load_arena, shipped_arena


def test_relative_paths_are_taken_from_where_the_command_was_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The world and agents run from the repository's root: `stigmesh demo` started in
    another folder made its run directory there and theirs under the repository ('the world
    server did not start'), until the paths were made absolute here."""
    monkeypatch.chdir(tmp_path)
    arena = load_arena(shipped_arena("two_cars"))
    swarm = Swarm(Path("arena.toml"), arena, Path("runs/demo-x"), Path("runs/demo-x/swarm.key"))
    assert swarm.run_dir == tmp_path / "runs" / "demo-x"
    assert swarm.key_file == tmp_path / "runs" / "demo-x" / "swarm.key"
    assert swarm.arena_path == tmp_path / "arena.toml"
