"""``stigmesh log``: a run's MCAP logs as JSON lines, and merged into one MCAP file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from protocol.mcapread import iter_messages
from protocol.runlog import RunLog, log_path, read_run_log
from tests.support.clock import FakeClock
from tools import cli as stigmesh

REPO = Path(__file__).resolve().parents[2]


def _run(run_dir: Path) -> None:
    """Two small logs in virtual time: bytes, floats, an array, several chunks."""
    for k, name in enumerate(("walnut", "world")):
        clock = FakeClock(100.0 + k * 0.05)
        log = RunLog(log_path(run_dir, name), name, clock)
        log.log("start", arena="two_cars")
        for i in range(400):
            log.log("tick", i=i, raw=bytes([i % 256, 0, 255]), x=0.1 * i + 1e-17)
            clock.advance(0.1)
        log.close()


def test_cat_prints_each_event_as_the_json_line_of_older_runs(tmp_path: Path, capsys) -> None:
    _run(tmp_path)
    assert stigmesh.main(["log", "cat", str(tmp_path / "walnut"), "--event", "tick"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 400 and lines == [
        e for e in read_run_log(log_path(tmp_path, "walnut")) if e["event"] == "tick"]
    assert lines[7] == {"t": lines[7]["t"], "proc": "walnut", "event": "tick", "i": 7,
                        "raw": "BwD/", "x": 0.1 * 7 + 1e-17}
    assert stigmesh.main(["log", "cat", str(tmp_path / "hazel")]) == 2
    capsys.readouterr()
    (tmp_path / "notes.txt").write_bytes(b"\x00\xff not a log\n")
    assert stigmesh.main(["log", "cat", str(tmp_path / "notes.txt")]) == 1
    err = capsys.readouterr().err
    assert err == (f"stigmesh log cat: {tmp_path / 'notes.txt'}: no event in it: not a run log,"
                   " or every record damaged (1 damaged record(s) skipped)\n")


def test_export_jsonl_reads_back_the_same_events_and_mcap_merges(tmp_path: Path) -> None:
    run, out = tmp_path / "run", tmp_path / "out"
    _run(run)
    assert stigmesh.main(["log", "export", str(run), "--jsonl", "--out", str(out)]) == 0
    for name in ("walnut", "world"):
        assert list(read_run_log(out / f"{name}.jsonl")) == list(
            read_run_log(log_path(run, name)))
    merged = tmp_path / "all.mcap"
    assert stigmesh.main(["log", "export", str(run), "--mcap", str(merged)]) == 0
    messages = list(iter_messages(merged))
    times = [t for _, _, t, _ in messages]
    assert times == sorted(times)
    assert {c.topic for c, _, _, _ in messages} == {"/walnut/events", "/world/events"}



def test_damage_is_skipped_and_said_with_the_bytes_not_read(tmp_path: Path, capsys) -> None:
    """A wrecked record header in walnut's log: cat, export and merge go on past it (the
    chunks after it are read) and each says on stderr what it skipped."""
    run = tmp_path / "run"
    _run(run)
    path = log_path(run, "walnut")
    data = bytearray(path.read_bytes())
    at = len(data) // 3
    data[at:at + 64] = bytes(64)
    path.write_bytes(bytes(data))
    assert stigmesh.main(["log", "cat", str(run / "walnut")]) == 0
    out, err = capsys.readouterr()
    ticks = [json.loads(x)["i"] for x in out.splitlines() if '"tick"' in x]
    assert ticks[-1] == 399 and len(ticks) < 400  # the last chunk read, some lost
    assert "damaged record(s) skipped;" in err and "bytes unread" in err
    assert stigmesh.main(["log", "export", str(run), "--mcap", str(tmp_path / "a.mcap")]) == 0
    assert "stigmesh log export: 1 damaged record(s) skipped;" in capsys.readouterr().err
    assert stigmesh.main(["log", "size", str(run)]) == 0
    walnut = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("walnut"))
    assert walnut.endswith("bytes unread (their events are lost)")


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # `stigmesh log cat RUN/NAME | head`: head closes the pipe; no traceback
    _run(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "tools.cli", "log", "cat",
                             str(tmp_path / "walnut")], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err and "Broken" not in err, err


def test_size_says_mb_per_minute_of_each_log(tmp_path: Path, capsys) -> None:
    _run(tmp_path)
    assert stigmesh.main(["log", "size", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    walnut = next(r.split() for r in rows if r.startswith("walnut"))
    mb, span, rate = (float(v) for v in walnut[1:4])
    assert mb == round(log_path(tmp_path, "walnut").stat().st_size / 1e6, 3)
    assert span == 39.9 and abs(rate - mb / (span / 60)) < 1e-3 and walnut[4] == "events"


def test_an_export_it_cannot_write_is_one_line(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    _run(run)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory\n")
    for args in (["--jsonl", "--out", str(blocked / "out")], ["--mcap", str(blocked / "x.mcap")]):
        assert stigmesh.main(["log", "export", str(run), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"stigmesh log export: cannot write {blocked}/")
        assert "Not a directory" in err
