"""The world whose log cannot be written runs on (it is the cars' physics) and says so."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import pytest

import worlds.main as world_main
from protocol.runlog import RunLog
from tests.support.files import FullDisk
from worlds.arena import shipped_arena


class _FullDiskLog(RunLog):
    """A world log on a disk that fills up as soon as the log is open."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        assert self._file is not None
        self._file._file = FullDisk(self._file._file)  # type: ignore[assignment]


def test_a_world_whose_log_fails_runs_its_time_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(world_main, "RunLog", _FullDiskLog)
    block = f"127.{random.randint(100, 250)}.{random.randint(1, 250)}"
    args = argparse.Namespace(arena=shipped_arena("two_cars"), run_dir=tmp_path, duration=1.0,
                              sensing=None, seed=None, cars_on=block, firmware="model")
    assert world_main.main(args) == world_main.EXIT_FAILED
    captured = capsys.readouterr()
    assert "stigmesh world: stopped;" in captured.out  # it ran its second
    assert "writing the log failed:" in captured.err and "No space left on device" in captured.err
