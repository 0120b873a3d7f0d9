from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from mcap.opcode import Opcode
from mcap.reader import make_reader

from protocol.mcapread import MAGIC, RECORD_HEADER, Framing, iter_messages, split_records
from protocol.runlog import (
    FLUSH_EVERY,
    LogReader,
    ReadStats,
    RunLog,
    b64,
    datagram_size,
    log_path,
    read_run_log,
)
from protocol.swarm.messages import MAC_LEN
from tests.support.clock import FakeClock
from tests.support.files import FullDisk


def test_lines_round_trip_with_bytes_arrays_and_exact_floats(tmp_path: Path) -> None:
    clock = FakeClock(12.5)
    log = RunLog(log_path(tmp_path, "walnut"), "walnut", clock)
    x = 0.1 + 0.2
    log.log("rx", raw=b"\x00\xffMZ01", mu=np.array([0.5, 1.25]), x=x, n=np.int64(3))
    clock.advance(1.0)
    log.log("tick")
    log.close()
    lines = list(read_run_log(log_path(tmp_path, "walnut")))
    assert [(d["t"], d["event"], d["proc"]) for d in lines] == [
        (12.5, "rx", "walnut"),
        (13.5, "tick", "walnut"),
    ]
    assert b64(lines[0]["raw"]) == b"\x00\xffMZ01"
    assert lines[0]["mu"] == [0.5, 1.25] and lines[0]["x"] == x and lines[0]["n"] == 3


def test_a_killed_writer_damages_at_most_its_last_line(tmp_path: Path) -> None:
    path = log_path(tmp_path, "victim")
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from protocol.runlog import RunLog
        log = RunLog(Path({str(path)!r}), "victim", time.monotonic)
        i = 0
        while True:
            log.log("spam", i=i, pad="x" * 500)
            i += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:  # until it has written 200 kB (a busy machine starts it slowly), then kill it
        deadline = time.monotonic() + 60.0
        while (not path.exists() or path.stat().st_size < 200_000) and proc.poll() is None:
            assert time.monotonic() < deadline, "the writer wrote too little in 60 s"
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
    stats = ReadStats()
    seq = [d["i"] for d in read_run_log(path, stats)]
    assert seq == list(range(len(seq))) and len(seq) > 100
    assert stats.bad_lines <= 1



def _chunked_log(path: Path, chunks: int = 6, per: int = 40) -> list[tuple[int, int]]:
    """A closed log of ``chunks`` chunks of ``per`` events each (event ``i`` counts them
    all); each chunk record's (offset, size) in the file."""
    rng = np.random.default_rng(3)
    log = RunLog(path, "walnut", FakeClock(10.0), idle_flush=False)
    for c in range(chunks):
        for k in range(per):  # noise, so zstd leaves chunks of some size
            log.log("spam", i=c * per + k, pad=rng.integers(0, 255, 64).tolist())
        log.flush()
    log.close()
    data = path.read_bytes()
    records, _ = split_records(data[len(MAGIC):])
    out, at = [], len(MAGIC)
    for opcode, body in records:
        if opcode == Opcode.CHUNK:
            out.append((at, RECORD_HEADER + len(body)))
        at += RECORD_HEADER + len(body)
    assert len(out) == chunks
    return out


def test_damage_inside_a_log_costs_only_the_damaged_chunk(tmp_path: Path) -> None:
    """A chunk whose data no longer matches its CRC, and one whose length field is wrecked
    (the framing is lost there): each costs its own events, counted with its bytes; the
    reader resumes at the next whole chunk."""
    path = log_path(tmp_path, "walnut")
    chunks = _chunked_log(path)
    data = bytearray(path.read_bytes())
    (a, a_size), (b, _) = chunks[1], chunks[4]
    data[a + a_size // 2:a + a_size // 2 + 32] = bytes(32)  # inside chunk 1's data
    data[b + 1:b + RECORD_HEADER] = b"\xff" * 8  # chunk 4's length: beyond any record
    path.write_bytes(bytes(data))
    stats = ReadStats()
    seq = [e["i"] for e in read_run_log(path, stats)]
    assert seq == [i for i in range(240) if i // 40 not in (1, 4)]
    # chunk 1's record; chunk 4's up to chunk 5 (its message indexes were in the stretch)
    assert stats.bad_lines == 2 and stats.unread_bytes == a_size + chunks[5][0] - b
    # The container's own walk (stigmesh log merge, size) skips the same: one events
    # message per chunk, four chunks whole.
    framing = Framing()
    topics = [channel.topic for channel, _, _, _ in iter_messages(path, framing)]
    assert topics.count("/walnut/events") == 4
    assert (framing.damaged, framing.unread_bytes) == (2, stats.unread_bytes)
    # Zeros from chunk 2's start into chunk 3's header: one stretch with chunk 4's (whose
    # header was wrecked), resumed at chunk 5.
    data = bytearray(path.read_bytes())
    c = chunks[2][0]
    data[c:chunks[3][0] + 4] = bytes(chunks[3][0] + 4 - c)
    path.write_bytes(bytes(data))
    stats = ReadStats()
    seq = [e["i"] for e in read_run_log(path, stats)]
    assert seq == [i for i in range(240) if i // 40 not in (1, 2, 3, 4)]
    assert stats.bad_lines == 2 and stats.unread_bytes == a_size + chunks[5][0] - c


def test_a_live_reader_resumes_after_damage_when_the_next_chunk_arrives(
    tmp_path: Path,
) -> None:
    """Followed as it grows: a torn record waits for its end, a wrecked header is damage at
    once, and the reader picks up the next chunk when it is all there."""
    source = log_path(tmp_path / "source", "walnut")
    chunks = _chunked_log(source, chunks=3)
    data = bytearray(source.read_bytes())
    data[chunks[1][0] + 1:chunks[1][0] + RECORD_HEADER] = b"\xff" * 8
    path = log_path(tmp_path, "walnut")
    reader = LogReader(path)
    third = chunks[2][0] + 20  # part of the third chunk's record
    path.write_bytes(bytes(data[:third]))
    assert [e["i"] for e in reader.read()] == list(range(40))
    assert reader.stats.bad_lines == 1
    with path.open("ab") as f:
        f.write(bytes(data[third:]))
    assert [e["i"] for e in reader.read()] == list(range(80, 120))
    assert reader.stats.bad_lines == 1
    assert reader.stats.unread_bytes == chunks[2][0] - chunks[1][0]



def test_a_restarted_writer_appends_after_damage_and_keeps_it(tmp_path: Path, capsys) -> None:
    """A process restarted on a log with a wrecked chunk header (it raised OverflowError and
    the process did not start) appends after the last whole record; the chunks before and
    after the damage are still read, and indexed in the new summary. A file that is no
    MCAP log is kept aside, not overwritten."""
    path = log_path(tmp_path, "walnut")
    chunks = _chunked_log(path)
    data = bytearray(path.read_bytes())
    data[chunks[2][0] + 1:chunks[2][0] + RECORD_HEADER] = b"\xff" * 8
    path.write_bytes(bytes(data))
    log = RunLog(path, "walnut", FakeClock(50.0), idle_flush=False)
    log.log("spam", i=1000)
    log.close()
    stats = ReadStats()
    seq = [e["i"] for e in read_run_log(path, stats)]
    assert seq == [i for i in range(240) if i // 40 != 2] + [1000] and stats.bad_lines == 1
    with path.open("rb") as f:  # the summary indexes the six whole chunks
        reader = make_reader(f)
        summary = reader.get_summary()
        assert summary is not None and len(summary.chunk_indexes) == 6
        assert sum(1 for _ in reader.iter_messages(topics=["/walnut/events"])) == 6
    other = log_path(tmp_path, "hazel")
    other.write_bytes(b"not a log at all")
    RunLog(other, "hazel", FakeClock(1.0), idle_flush=False).close()
    assert (tmp_path / "hazel.mcap.damaged").read_bytes() == b"not a log at all"
    assert "kept as hazel.mcap.damaged" in capsys.readouterr().err
    assert list(read_run_log(other)) == []



def test_a_full_disk_stops_the_log_without_raising_in_the_caller(tmp_path: Path) -> None:
    """The caller may be stopping a car: a failed write is kept as the log's error, later
    events are counted as dropped, and what was written before stays readable."""
    path = log_path(tmp_path, "walnut")
    clock = FakeClock(10.0)
    log = RunLog(path, "walnut", clock, idle_flush=False)
    log.log("tick", i=0)
    log.flush()
    assert log._file is not None
    log._file._file = FullDisk(log._file._file)  # type: ignore[assignment]
    log.log("tick", i=1)
    log.log("faults_set", direction="in", spec="drop=1")  # durable: written (or not) now
    assert log.error is not None and "No space left on device" in log.error
    log.log("tick", i=2)
    log.flush()
    log.close()
    assert log.dropped == 1  # the one after (the chunk that failed held the two before)
    assert [e["i"] for e in read_run_log(path) if e["event"] == "tick"] == [0]


def _read_soon(reader: LogReader, within: float = 30.0) -> list[dict[str, Any]]:
    """What the reader sees once the log's writer thread has written something new."""
    deadline = time.monotonic() + within
    while not (lines := reader.read()) and time.monotonic() < deadline:
        time.sleep(0.005)
    return lines


def test_a_chunk_closes_on_its_clock_and_at_once_after_a_durable_event(tmp_path: Path) -> None:
    clock = FakeClock(100.0)
    path = log_path(tmp_path, "walnut")
    log = RunLog(path, "walnut", clock)
    reader = LogReader(path)
    log.log("tick")
    assert reader.read() == []  # still in the chunk being filled
    clock.advance(FLUSH_EVERY)
    log.log("tick")  # the chunk is due: closed with both ticks, written by the log's thread
    assert [e["t"] for e in _read_soon(reader)] == [100.0, 100.0 + FLUSH_EVERY]
    log.log("faults_set", direction="in", spec="drop=0.5")  # a kill now must not lose it
    assert [e["event"] for e in reader.read()] == ["faults_set"]
    log.close()
    assert reader.read() == []


def test_sent_grid_datagrams_and_car_frames_are_kept_by_size(tmp_path: Path) -> None:
    """RUNLOG.md: a sent PATCH/SNAPSHOT and the car link's frames keep their size, not their
    bytes; a TRACK, a received datagram and the core's inputs keep their bytes."""
    log = RunLog(log_path(tmp_path, "walnut"), "walnut", FakeClock(1.0))
    log.log("tx", to=None, kind="patch", raw=b"p" * 300)
    log.log("tx", to=None, kind="snapshot", raw=b"s" * 900)
    log.log("tx", to=None, kind="track", raw=b"t" * 104 + b"m" * MAC_LEN)
    for kind in ("heartbeat", "ping", "pong"):
        log.log("tx", to=None, kind=kind, raw=b"h" * 90)
    log.log("rx", src=["127.0.0.1", 1], ok=True, raw=b"r" * 200)
    log.log("car_tx", kind="drive", raw=b"d" * 32)
    log.log("car_rx", raw=b"c" * 48)
    log.close()
    lines = list(read_run_log(log_path(tmp_path, "walnut")))
    kept = {(d["event"], d.get("kind")): ("raw" in d, datagram_size(d)) for d in lines}
    assert kept == {("tx", "patch"): (False, 300), ("tx", "snapshot"): (False, 900),
                    ("tx", "track"): (True, 120), ("tx", "heartbeat"): (False, 90),
                    ("tx", "ping"): (False, 90), ("tx", "pong"): (False, 90),
                    ("rx", None): (True, 200),
                    ("car_tx", "drive"): (False, 32), ("car_rx", None): (False, 48)}
    raws = {d["event"]: b64(d["raw"]) for d in lines if "raw" in d}
    assert raws == {"tx": b"t" * 104 + bytes(MAC_LEN),  # a sent MAC is logged as zeros
                    "rx": b"r" * 200}  # a received datagram whole, its MAC checked by a re-run


def test_events_of_one_time_are_filed_with_one_t_and_read_back_with_theirs(
    tmp_path: Path,
) -> None:
    """RUNLOG.md: an event with its predecessor's time (same value, same type) is filed
    without ``t`` and read back with it; a new chunk starts with its own."""
    path = log_path(tmp_path, "walnut")
    clock = FakeClock(7.25)
    log = RunLog(path, "walnut", clock)
    log.log("tick")
    log.log("decision", mode="track", v=0.5, omega=0.0, duty=[0.5, 0.5], goal=None)
    log.log("car", t=7, duty=[0.0, 0.0], gyro=None)  # the same value as an int: kept
    log.log("car", t=7, duty=[0.0, 0.0], gyro=None)
    clock.advance(0.5)
    log.log("tick")
    log.log("faults_set", direction="in", spec="drop=0.5")  # closes the chunk
    log.log("tick")
    log.close()
    events = list(read_run_log(path))
    assert [(e["event"], e["t"], type(e["t"])) for e in events] == [
        ("tick", 7.25, float), ("decision", 7.25, float), ("car", 7, int), ("car", 7, int),
        ("tick", 7.75, float), ("faults_set", 7.75, float), ("tick", 7.75, float)]
    filed = [msgpack.Unpacker(raw=False) for _ in range(2)]
    batches = [data for channel, _, _, data in iter_messages(path)
               if channel.topic == "/walnut/events"]
    assert len(batches) == 2
    for unpacker, data in zip(filed, batches, strict=True):
        unpacker.feed(data)
    assert [["t" in e for e in u] for u in filed] == [
        [True, False, True, False, True, False], [True]]


def test_frequent_outputs_keep_float32_values_and_float64_times(tmp_path: Path) -> None:
    """RUNLOG.md: a decision's, detection's and peer track's values are float32; their times
    and every input keep float64 (on the wall clock float32 would round a time to minutes)."""
    t = 1_764_650_000.123456  # a wall-clock time
    x = 0.1 + 0.2
    log = RunLog(log_path(tmp_path, "walnut"), "walnut", FakeClock(t))
    log.log("decision", mode="track", v=x, omega=-x, duty=[x, 1.0], goal=None)
    log.log("detection", t_det=t - 0.05, x=x, y=2.0, cov=np.array([[x, 0.0], [0.0, x]]))
    log.log("peer_track", peer="hazel", t_ref=t - 0.02, x=[x, 1.0, 0.0, 0.0], score=x)
    log.log("car", duty=[x, x], gyro=x)  # an input: exact
    log.close()
    decision, detection, peer, car = read_run_log(log_path(tmp_path, "walnut"))
    x32 = float(np.float32(x))
    assert x32 != x
    assert (decision["v"], decision["omega"], decision["duty"]) == (x32, -x32, [x32, 1.0])
    assert (detection["x"], detection["cov"]) == (x32, [[x32, 0.0], [0.0, x32]])
    assert (peer["x"][0], peer["score"]) == (x32, x32)
    assert [d["t"] for d in (decision, detection, peer, car)] == [t] * 4
    assert (detection["t_det"], peer["t_ref"]) == (t - 0.05, t - 0.02)
    assert car["duty"] == [x, x] and car["gyro"] == x


def test_an_integer_beyond_64_bits_is_logged_as_a_float_and_the_next_event_is_whole(
    tmp_path: Path,
) -> None:
    log = RunLog(log_path(tmp_path, "walnut"), "walnut", FakeClock(1.0))
    log.log("decision", mode="track", v=0.5, omega=2**70, duty=[0.5, 0.5], goal=None)
    log.log("rx", n=2**65)
    log.log("decision", mode="search", v=0.25, omega=0.0, duty=[0.25, 0.25], goal=None)
    log.close()
    first, rx, after = read_run_log(log_path(tmp_path, "walnut"))
    assert (first["omega"], rx["n"]) == (float(2**70), float(2**65))
    assert (after["mode"], after["v"], after["duty"]) == ("search", 0.25, [0.25, 0.25])


def test_one_belief_in_two_carries_its_grid(tmp_path: Path) -> None:
    """RUNLOG.md: the grid goes to /NAME/grid with every second belief record; the others
    keep their numbers and digest without arrays."""
    clock = FakeClock(5.0)
    log = RunLog(log_path(tmp_path, "walnut"), "walnut", clock)
    grids = [np.full((2, 3), k / 4, dtype=np.float32) for k in range(4)]
    for k, g in enumerate(grids):
        log.log("belief", digest=f"d{k}", origin=[0, 0], shape=[2, 3], mean_var=0.5,
                mu_f32=g.tobytes(), var_f32=(1 - g).tobytes())
        clock.advance(1.0)
    log.close()
    beliefs = list(read_run_log(log_path(tmp_path, "walnut")))
    assert [b["digest"] for b in beliefs] == ["d0", "d1", "d2", "d3"]
    assert [("mu_f32" in b, "var_f32" in b, "grid" in b) for b in beliefs] == [
        (True, True, False), (False, False, False)] * 2
    for k in (0, 2):
        mu = np.frombuffer(b64(beliefs[k]["mu_f32"]), dtype="<f4").reshape(2, 3)
        assert np.allclose(mu, grids[k], atol=0.002)
