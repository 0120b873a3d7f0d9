"""MCAP files written chunk by chunk and read record by record (protocol/RUNLOG.md).

:class:`McapFile` writes a file with the ``mcap`` library's record classes
rather than its ready-made writer: neither ``mcap.Writer`` (its zstd level is
fixed) nor the Foxglove SDK's writer (its channels need a schema, it buffers
in native code) lets a chunk be closed on a clock at a chosen zstd level, and
a restarted process must append to its log after the last whole chunk. Each
chunk goes to the file in one ``write`` with its message indexes, so a killed
writer leaves whole chunks and at most one torn record after them. With
``background=True`` the chunks are compressed and written in order on a thread
of the file's own (zstd releases the GIL), so the thread that logs does not wait
7-25 ms for a chunk at level 19 (profiled: 2 and 8 agents); :meth:`McapFile.drain` waits for them.

The reading side is protocol/mcapread.py (a log reopened to append is walked with
its :class:`~protocol.mcapread.Framing`: damage inside stays, a torn end is cut).
"""

from __future__ import annotations

import atexit
import contextlib
import queue
import sys
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import IO, Any

import zstandard
from mcap.data_stream import ReadDataStream, RecordBuilder
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.records import (
    Channel,
    Chunk,
    ChunkIndex,
    DataEnd,
    Footer,
    Header,
    Message,
    MessageIndex,
    Metadata,
    Schema,
    Statistics,
    SummaryOffset,
)

from protocol.mcapread import MAGIC, RECORD_HEADER, Framing

PROFILE = "stigmesh"
CHUNK_BYTES = 1 << 20  # uncompressed bytes that close a chunk (a writer closes it sooner)
ZSTD_LEVEL = 19  # ~25 ms for a chunk of 2 s of an agent's events; 12 % smaller than level 3
BACKLOG = 32  # closed chunks a background writer may hold before the logger waits for it


@dataclass(frozen=True)
class ChannelSpec:
    """A channel as both a Foxglove WebSocket and an MCAP file declare it."""

    topic: str
    message_encoding: str  # "protobuf", "json" or "msgpack"
    schema_name: str
    schema_encoding: str  # "protobuf", "jsonschema", or "" for no schema
    schema_data: bytes


@dataclass
class _Open:
    """What a log file holds already (when a restarted process appends to it)."""

    end: int = 0  # where the data section ends (new records go here)
    schemas: dict[str, Schema] = field(default_factory=dict)
    channels: dict[str, Channel] = field(default_factory=dict)
    chunk_indexes: list[ChunkIndex] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)


class _ChunkIndexes:
    """The chunk indexes of the summary section, each kept as its record's bytes (168 B
    a chunk against 604 B as objects, measured on an agent's log: a log of hours closes
    thousands of chunks), and the span of message times they cover."""

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.start: int | None = None
        self.end: int | None = None

    def add(self, index: ChunkIndex) -> None:
        out = RecordBuilder()
        index.write(out)
        self.records.append(out.end())
        start, end = index.message_start_time, index.message_end_time
        self.start = start if self.start is None else min(self.start, start)
        self.end = end if self.end is None else max(self.end, end)


def _aside(path: Path) -> Path:
    """A free name beside ``path`` for a file it must not overwrite (``walnut.mcap.damaged``,
    then ``.damaged-2``, ...: no log suffix, so no reader takes it for a process's log)."""
    k, aside = 1, path.with_name(path.name + ".damaged")
    while aside.exists():
        k += 1
        aside = path.with_name(f"{path.name}.damaged-{k}")
    return aside


def _scan_existing(path: Path) -> _Open | None:
    """The data section of an MCAP log we may append to; None when ``path`` is not one.
    Damage inside it stays where it is (readers skip it: :class:`Framing`) and is not
    indexed; a torn record at its end is cut off."""
    found = _Open(end=len(MAGIC))
    framing = Framing()
    chunk_at: int | None = None  # the chunk whose message indexes may follow
    try:
        with path.open("rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return None
            while not framing.ended:
                data = f.read(1 << 20)
                for offset, opcode, body in framing.feed(data, final=not data):
                    if opcode in (Opcode.DATA_END, Opcode.FOOTER):
                        return found  # the summary follows: written again on close
                    damaged = framing.damaged
                    try:
                        _scanned(found, offset, opcode, body, chunk_at)
                    except (McapError, ValueError, EOFError, IndexError, UnicodeDecodeError):
                        framing.damage(RECORD_HEADER + len(body))
                    if opcode == Opcode.CHUNK and framing.damaged == damaged:
                        chunk_at = offset
                    elif opcode != Opcode.MESSAGE_INDEX or framing.damaged != damaged:
                        chunk_at = None
                    found.end = offset + RECORD_HEADER + len(body)
                if not data:
                    break
    except OSError:
        return None
    return found


def _scanned(found: _Open, offset: int, opcode: int, body: bytes, chunk_at: int | None) -> None:
    """What one record of a log being reopened adds: a schema, a channel, a chunk's index,
    or (right after its chunk) a chunk's message index."""
    stream = ReadDataStream(BytesIO(body))
    if opcode == Opcode.SCHEMA:
        schema = Schema.read(stream)
        found.schemas[schema.name] = schema
    elif opcode == Opcode.CHANNEL:
        channel = Channel.read(stream)
        found.channels[channel.topic] = channel
    elif opcode == Opcode.CHUNK:
        chunk = Chunk.read(stream)
        found.chunk_indexes.append(ChunkIndex(
            message_start_time=chunk.message_start_time,
            message_end_time=chunk.message_end_time, chunk_start_offset=offset,
            chunk_length=RECORD_HEADER + len(body), message_index_offsets={},
            message_index_length=0, compression=chunk.compression,
            compressed_size=len(chunk.data), uncompressed_size=chunk.uncompressed_size))
    elif opcode == Opcode.MESSAGE_INDEX and chunk_at is not None:
        index = MessageIndex.read(stream)
        last = found.chunk_indexes[-1]
        last.message_index_offsets[index.channel_id] = offset
        last.message_index_length += RECORD_HEADER + len(body)
        found.counts[index.channel_id] = found.counts.get(index.channel_id, 0) + len(index.records)


@dataclass(frozen=True)
class _Closed:
    """A chunk taken from the builder, to be compressed and written."""

    data: bytes
    start: int
    end: int
    indexes: dict[int, list[tuple[int, int]]]


class _Writer:
    """Runs a file's writes in the order they were put, on a thread of its own.

    A write that fails is raised in the caller at its next :meth:`put` (after queueing that
    one) or :meth:`drain`, as a write done in place would have raised in its caller."""

    def __init__(self, write: Callable[[bytes | _Closed], None], name: str) -> None:
        self._write = write
        # bounded: a writer that cannot keep up slows the logger rather than filling memory
        self._queue: queue.Queue[bytes | _Closed | None] = queue.Queue(maxsize=BACKLOG)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def put(self, item: bytes | _Closed) -> None:
        self._queue.put(item)  # queued first: an earlier write's failure loses nothing more
        self._raise()

    def drain(self) -> None:
        """Return once everything put so far is written."""
        self._queue.join()
        self._raise()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._raise()

    def _raise(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._write(item)
            except Exception as exc:  # handed to the caller (_raise)
                if self._error is None:
                    self._error = exc
            finally:
                self._queue.task_done()


class McapFile:
    """An MCAP file written chunk by chunk; not thread-safe (its user holds a lock).

    ``background``: chunks are compressed and written on a thread of their own, in order
    (the bytes are the same as without); :meth:`drain` waits for them, :meth:`finish`
    too, and so does the interpreter's exit."""

    def __init__(self, path: Path, process: str, profile: str = PROFILE, *,
                 background: bool = False) -> None:
        occupied = path.exists() and path.stat().st_size > 0
        existing = _scan_existing(path) if occupied else None
        if occupied and existing is None:  # not ours to append to, nor to overwrite
            aside = _aside(path)
            path.rename(aside)
            print(f"{path}: not an MCAP log to append to; kept as {aside.name}, a new log "
                  "begun", file=sys.stderr)
        self._path = path
        self._file: IO[bytes] = path.open("r+b" if existing else "wb")
        self._schemas: dict[str, Schema] = {}
        self._channels: dict[str, Channel] = {}
        self._chunk_indexes = _ChunkIndexes()
        self._counts: dict[int, int] = {}
        self._compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self._chunk = RecordBuilder()
        self._indexes: dict[int, list[tuple[int, int]]] = {}
        self._times: list[int] = []
        self.messages = 0
        if existing is not None:
            self._file.seek(existing.end)
            self._file.truncate()
            self._schemas, self._channels = existing.schemas, existing.channels
            for index in existing.chunk_indexes:
                self._chunk_indexes.add(index)
            self._counts = existing.counts
            self.messages = sum(existing.counts.values())
        else:
            out = RecordBuilder()
            Header(profile=profile, library=f"stigmesh/{process}").write(out)
            Metadata(name="stigmesh", metadata={"process": process, "format": "1"}).write(out)
            self._file.write(MAGIC + out.end())
            self._file.flush()
        self._writer: _Writer | None = None
        if background:
            self._writer = _Writer(self._write, f"mcap-{process}")
            atexit.register(self._drain_at_exit)

    def channel(self, spec: ChannelSpec) -> int:
        """The id of the channel ``spec`` names (its schema and channel records are written
        before the first chunk that uses them)."""
        known = self._channels.get(spec.topic)
        if known is not None:
            return known.id
        out = RecordBuilder()
        schema_id = 0
        if spec.schema_encoding:
            schema = self._schemas.get(spec.schema_name)
            if schema is None:
                schema = Schema(id=len(self._schemas) + 1, data=spec.schema_data,
                                encoding=spec.schema_encoding, name=spec.schema_name)
                self._schemas[spec.schema_name] = schema
                schema.write(out)
            schema_id = schema.id
        channel = Channel(id=len(self._channels) + 1, topic=spec.topic,
                          message_encoding=spec.message_encoding, metadata={},
                          schema_id=schema_id)
        self._channels[spec.topic] = channel
        channel.write(out)
        self._put(out.end())
        return channel.id

    def add(self, channel_id: int, log_time: int, data: bytes) -> None:
        self._indexes.setdefault(channel_id, []).append((log_time, self._chunk.count))
        Message(channel_id=channel_id, log_time=log_time, data=data, publish_time=log_time,
                sequence=self.messages & 0xFFFFFFFF).write(self._chunk)
        self._times.append(log_time)
        self._counts[channel_id] = self._counts.get(channel_id, 0) + 1
        self.messages += 1

    @property
    def pending(self) -> int:
        return self._chunk.count

    def close_chunk(self) -> None:
        """Close the chunk being filled: it is compressed and written with its message
        indexes in one write (on the writer's thread when in the background)."""
        if not self._times:
            return
        closed = _Closed(self._chunk.end(), min(self._times), max(self._times),
                         dict(sorted(self._indexes.items())))
        self._indexes = {}
        self._times.clear()
        self._put(closed)

    def drain(self) -> None:
        """Return once every chunk closed so far is in the file (at once when not in the
        background)."""
        if self._writer is not None:
            self._writer.drain()

    def _put(self, item: bytes | _Closed) -> None:
        if self._writer is not None:
            self._writer.put(item)
        else:
            self._write(item)

    def _write(self, item: bytes | _Closed) -> None:
        if isinstance(item, bytes):
            self._file.write(item)
            return
        data = item.data
        compressed = self._compressor.compress(data)
        out = RecordBuilder()
        Chunk(compression="zstd", data=compressed, message_end_time=item.end,
              message_start_time=item.start, uncompressed_crc=zlib.crc32(data),
              uncompressed_size=len(data)).write(out)
        chunk_length = out.count
        offset = self._file.tell()
        index = ChunkIndex(message_start_time=item.start, message_end_time=item.end,
                           chunk_start_offset=offset, chunk_length=chunk_length,
                           message_index_offsets={}, message_index_length=0, compression="zstd",
                           compressed_size=len(compressed), uncompressed_size=len(data))
        for channel_id, records in item.indexes.items():
            index.message_index_offsets[channel_id] = offset + out.count
            MessageIndex(channel_id=channel_id, records=records).write(out)
        index.message_index_length = out.count - chunk_length
        self._file.write(out.end())
        self._file.flush()
        self._chunk_indexes.add(index)

    def abandon(self) -> None:
        """Stop after a failed write: nothing more is written, the writer's thread ends and
        the file closes; what is in it stays readable (no summary: readers walk it)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            atexit.unregister(self._drain_at_exit)
            with contextlib.suppress(Exception):  # the failure the caller already has
                writer.stop()
        with contextlib.suppress(OSError):
            self._file.close()

    def _drain_at_exit(self) -> None:
        try:
            self.drain()
        except Exception as exc:  # at exit there is no caller left to raise it to
            print(f"{self._path}: a log chunk was not written: {exc}", file=sys.stderr)

    def finish(self) -> None:
        """The last chunk, then the summary (schemas, channels, statistics, chunk indexes)."""
        self.close_chunk()
        if self._writer is not None:
            writer, self._writer = self._writer, None
            atexit.unregister(self._drain_at_exit)
            writer.stop()
        out = RecordBuilder()
        DataEnd(data_section_crc=0).write(out)
        self._file.write(out.end())
        summary_start = self._file.tell()
        summary = RecordBuilder()
        offsets: list[SummaryOffset] = []

        def group(opcode: int, records: list[Any]) -> None:
            begin = summary.count
            for record in records:
                if isinstance(record, bytes):
                    summary.write(record)
                else:
                    record.write(summary)
            if records:
                offsets.append(SummaryOffset(group_opcode=opcode, group_start=summary_start + begin,
                                             group_length=summary.count - begin))

        chunks = self._chunk_indexes
        group(Opcode.SCHEMA, list(self._schemas.values()))
        group(Opcode.CHANNEL, list(self._channels.values()))
        group(Opcode.STATISTICS, [Statistics(
            attachment_count=0, channel_count=len(self._channels),
            channel_message_counts=dict(self._counts), chunk_count=len(chunks.records),
            message_count=sum(self._counts.values()),
            message_end_time=0 if chunks.end is None else chunks.end,
            message_start_time=0 if chunks.start is None else chunks.start,
            metadata_count=1, schema_count=len(self._schemas))])
        group(Opcode.CHUNK_INDEX, chunks.records)
        offset_start = summary_start + summary.count
        for o in offsets:
            o.write(summary)
        body = summary.end()
        self._file.write(body)
        tail = RecordBuilder()
        Footer(summary_start=summary_start, summary_offset_start=offset_start,
               summary_crc=0).write(tail)
        self._file.write(tail.end() + MAGIC)
        self._file.flush()
        self._file.close()
