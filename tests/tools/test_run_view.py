"""`stigmesh run --view`: the live view beside a scenario's real processes, its URL printed
as `demo --view` prints it; refused in lockstep (no network to watch)."""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

import pytest

from tools.commands import run as run_cmd
from worlds.arena import shipped_arena

SCENARIO = """
name = "viewed"
arena = "arena.toml"
duration = 6.0
seed = 1
"""


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_lockstep_refuses_view(tmp_path: Path, capsys) -> None:
    code = run_cmd.main(_args("default", "--lockstep", "--view", "--run-dir",
                              str(tmp_path / "run")))
    assert code == 2
    assert "--view needs real mode" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_real_run_serves_the_view_and_prints_its_url(tmp_path: Path, capsys) -> None:
    prefix = f"127.{random.randint(100, 250)}.{random.randint(1, 250)}."
    arena = shipped_arena("two_cars").read_text().replace("127.0.2.", prefix)
    (tmp_path / "arena.toml").write_text(arena)
    (tmp_path / "viewed.toml").write_text(SCENARIO)
    run_dir = tmp_path / "run"
    code = run_cmd.main(_args(str(tmp_path / "viewed.toml"), "--run-dir", str(run_dir),
                              "--port", str(random.randint(20000, 40000)), "--quiet",
                              "--no-report", "--view", "--view-port", "0"))
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    url = re.search(r"live view: (\S+)", out.out)
    assert url is not None, out.out + out.err
    assert re.search(r"127\.0\.0\.1:\d+", url.group(1)), url.group(1)
    assert (run_dir / "view.out").exists()  # the view ran as one of the run's processes
