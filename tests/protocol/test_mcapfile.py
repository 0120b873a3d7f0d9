"""McapFile: its background writer (the same bytes as in place, off the caller's thread), and
the summary that indexes its chunks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import zstandard
from mcap.opcode import Opcode

from protocol.mcapfile import ChannelSpec, McapFile
from protocol.mcapread import MAGIC, chunk_data, iter_messages, split_records

REPO = Path(__file__).resolve().parents[2]


def _fill(f: McapFile) -> None:
    """Three chunks over two channels, the second declared after the first chunk."""
    a = f.channel(ChannelSpec("/a", "msgpack", "", "", b""))
    for k in range(50):
        f.add(a, 1000 + k, bytes([k % 251]) * (10 + k))
    f.close_chunk()
    b = f.channel(ChannelSpec("/b", "json", "b", "jsonschema", b"{}"))
    for k in range(30):
        f.add(b if k % 2 else a, 2000 + k, b"x" * k)
    f.close_chunk()
    f.add(a, 3000, b"last")


def test_the_background_writer_writes_the_same_bytes(tmp_path: Path) -> None:
    here, there = tmp_path / "here.mcap", tmp_path / "there.mcap"
    inline = McapFile(here, "walnut")
    _fill(inline)
    inline.finish()
    background = McapFile(there, "walnut", background=True)
    _fill(background)
    background.finish()
    assert there.read_bytes() == here.read_bytes()
    assert [(c.topic, t) for c, _, t, _ in iter_messages(there)][-1] == ("/a", 3000)


class _HeldCompressor:
    """zstd's compressor, held until the test lets it go."""

    def __init__(self, real: zstandard.ZstdCompressor) -> None:
        self.real = real
        self.go = threading.Event()
        self.started = threading.Event()

    def compress(self, data: bytes) -> bytes:
        self.started.set()
        assert self.go.wait(60)
        return self.real.compress(data)


def test_closing_a_chunk_does_not_wait_for_its_compression(tmp_path: Path) -> None:
    f = McapFile(tmp_path / "w.mcap", "walnut", background=True)
    held = _HeldCompressor(f._compressor)
    f._compressor = held  # type: ignore[assignment]
    a = f.channel(ChannelSpec("/a", "msgpack", "", "", b""))
    f.add(a, 1, b"one")
    f.close_chunk()  # returns although the compressor is held
    assert held.started.wait(60)
    f.add(a, 2, b"two")  # the next chunk fills meanwhile
    held.go.set()
    f.finish()
    assert [d for _, _, _, d in iter_messages(tmp_path / "w.mcap")] == [b"one", b"two"]


def test_a_failed_write_is_raised_to_the_caller(tmp_path: Path) -> None:
    f = McapFile(tmp_path / "w.mcap", "walnut", background=True)
    a = f.channel(ChannelSpec("/a", "msgpack", "", "", b""))
    f.drain()
    f._file.close()  # the next write fails on the writer's thread
    f.add(a, 1, b"one")
    f.close_chunk()
    with pytest.raises(ValueError):
        f.drain()
    f.drain()  # raised once


def test_chunks_closed_before_exit_are_written_at_exit(tmp_path: Path) -> None:
    """A process that exits without finishing its file still leaves its closed chunks."""
    path = tmp_path / "w.mcap"
    code = textwrap.dedent(f"""
        from pathlib import Path
        from protocol.mcapfile import ChannelSpec, McapFile
        f = McapFile(Path({str(path)!r}), "walnut", background=True)
        a = f.channel(ChannelSpec("/a", "msgpack", "", "", b""))
        for k in range(20):
            f.add(a, k, bytes(200_000))
            f.close_chunk()
    """)
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=120)
    assert _messages_in_chunks(path) == 20


def _messages_in_chunks(path: Path) -> int:
    """How many messages the whole chunks of a file hold (it need not have a summary)."""
    records, _ = split_records(path.read_bytes()[len(MAGIC):])
    inner = [split_records(chunk_data(body))[0] for op, body in records if op == Opcode.CHUNK]
    return sum(1 for chunk in inner for op, _ in chunk if op == Opcode.MESSAGE)


def test_the_summary_indexes_every_chunk_also_after_a_reopen(tmp_path: Path) -> None:
    """A reader that seeks by the summary's chunk indexes finds every message, in order, in
    a log written, left without a summary (a killed process), reopened and finished."""
    from mcap.reader import SeekingReader

    path = tmp_path / "x.mcap"
    first = McapFile(path, "x")
    _fill(first)
    first.close_chunk()
    first._file.close()  # killed: no summary
    second = McapFile(path, "x")
    c = second.channel(ChannelSpec("/c", "msgpack", "", "", b""))
    for k in range(20):
        second.add(c, 4000 + k, bytes([k]))
        if k % 8 == 7:
            second.close_chunk()
    second.finish()
    with path.open("rb") as f:
        reader = SeekingReader(f)
        summary = reader.get_summary()
        assert summary is not None and summary.statistics is not None
        assert len(summary.chunk_indexes) == summary.statistics.chunk_count == 6
        assert summary.statistics.message_count == 50 + 30 + 1 + 20
        assert (summary.statistics.message_start_time,
                summary.statistics.message_end_time) == (1000, 4019)
        times = [m.log_time for _, _, m in reader.iter_messages()]
    assert times == sorted(times) and len(times) == 101
    assert times == [m[2] for m in iter_messages(path)]
