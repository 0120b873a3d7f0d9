"""Two evidence caches compared run by run: the paired table and its refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.experiments.evidence.compare import compare, main
from tools.experiments.evidence.jobs import Cache, cached_results
from tools.experiments.evidence.plan import Job
from tools.experiments.scenario_file import parse_scenario

SCENARIO = parse_scenario('arena = "two_cars"\nduration = 2.0\n', "c.toml", Path("."))


def _cache(directory: Path, errors: list[float], held: float) -> None:
    cache = Cache(directory)
    for seed, err in enumerate(errors, start=1):
        job = Job("orbit", "c.toml", "as_file", seed)
        cache.put(job, SCENARIO, {"key": job.key, "scene": "orbit", "variant": "as_file",
                                  "seed": seed, "deps": {"agents/core.py": "x"},
                                  "metrics": {"err_p50": err, "held": held}})


def test_two_caches_are_paired_by_seed(tmp_path: Path) -> None:
    before = [0.10, 0.12, 0.11, 0.13, 0.09, 0.10]
    _cache(tmp_path / "old", before, 0.9)
    _cache(tmp_path / "new", [e - 0.02 for e in before], 0.95)
    old, new = cached_results(tmp_path / "old"), cached_results(tmp_path / "new")
    assert sorted(old) == [f"orbit-as_file-{k}" for k in range(1, 7)]
    lines = compare(old, new, ("err_p50", "held"))
    assert lines[0] == "orbit as_file (6 seeds in both)"
    assert "0.1083 ->     0.0883" in lines[1] and "p   0.0312" in lines[1]
    assert lines[1].endswith("better 6 / worse 0")  # lower error is better
    assert lines[2].endswith("better 6 / worse 0")  # higher held is better


def test_an_empty_cache_is_refused_in_one_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _cache(tmp_path / "old", [0.1] * 5, 0.9)
    assert main([str(tmp_path / "old"), str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no lockstep results in" in err


def test_a_closed_pipe_is_no_error(tmp_path: Path) -> None:
    """`compare OLD NEW | head` that closed the pipe before the table: exit 0, no traceback."""
    import subprocess
    import sys

    _cache(tmp_path / "old", [0.1, 0.2, 0.3], 0.9)
    _cache(tmp_path / "new", [0.1, 0.2, 0.4], 0.9)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.experiments.evidence.compare", str(tmp_path / "old"),
         str(tmp_path / "new")], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # before it writes: its write fails with EPIPE
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()
