"""Reading MCAP logs record by record, surviving damage (protocol/RUNLOG.md).

:func:`split_records` and :func:`chunk_data` take records from bytes as they arrive
and a chunk's uncompressed records; :class:`Framing` walks a log's top level for every
reader (protocol/runlog.py's :class:`~protocol.runlog.LogReader`, :func:`iter_messages`,
and the writer reopening a log to append): where a record header can only be damage
(:func:`framing_lost`) or a record is torn, the walk resumes at :func:`next_chunk`, the
next chunk whose data decompresses and matches its CRC, and counts what it skipped.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import zstandard
from mcap.data_stream import ReadDataStream
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.records import Channel, Chunk, Message, Schema

MAGIC = bytes([137, 77, 67, 65, 80, 48, 13, 10])
RECORD_HEADER = 9  # opcode (1) + length (8)


def split_records(buf: bytes) -> tuple[list[tuple[int, bytes]], int]:
    """The whole records (opcode, body) at the start of ``buf`` and how many bytes they take;
    a record not all there yet (still being written, or torn by a kill) is left."""
    out: list[tuple[int, bytes]] = []
    i = 0
    while len(buf) - i >= RECORD_HEADER:
        opcode, length = buf[i], int.from_bytes(buf[i + 1:i + RECORD_HEADER], "little")
        end = i + RECORD_HEADER + length
        if end > len(buf):
            break
        out.append((opcode, buf[i + RECORD_HEADER:end]))
        i = end
    return out, i


# The records a log's top level may hold (a chunk holds the rest); any other opcode below the
# private range (0x80 and up, which readers skip) is damage: the framing is lost there.
TOP_LEVEL = frozenset({Opcode.HEADER, Opcode.FOOTER, Opcode.SCHEMA, Opcode.CHANNEL,
                       Opcode.MESSAGE, Opcode.ATTACHMENT, Opcode.METADATA, Opcode.CHUNK,
                       Opcode.MESSAGE_INDEX, Opcode.CHUNK_INDEX, Opcode.ATTACHMENT_INDEX,
                       Opcode.METADATA_INDEX, Opcode.STATISTICS, Opcode.SUMMARY_OFFSET,
                       Opcode.DATA_END})
MAX_RECORD = 1 << 26  # bytes: no record of a log comes near (a chunk closes at 1 MiB)


def framing_lost(opcode: int, length: int) -> bool:
    """Whether a top-level record header can only be damage: an opcode no MCAP file has
    there, or a length no log's record has."""
    return (opcode < 0x80 and opcode not in TOP_LEVEL) or length > MAX_RECORD


def next_chunk(buf: bytes, start: int, *, final: bool) -> tuple[int | None, bool]:
    """Where the framing resumes after damage: the first offset at or after ``start`` where
    a whole chunk record stands whose data decompresses and matches its CRC. Returns
    (offset, True) for one found; else, unless ``final`` (no more bytes are coming),
    (offset, False) for the first place where a chunk not all in ``buf`` yet may start;
    else (None, False)."""
    marker = Opcode.CHUNK.to_bytes(1, "little")
    waiting: int | None = None
    j = buf.find(marker, start)
    while j >= 0:
        if len(buf) - j < RECORD_HEADER:
            if waiting is None and not final:
                waiting = j
            break
        length = int.from_bytes(buf[j + 1:j + RECORD_HEADER], "little")
        end = j + RECORD_HEADER + length
        if length <= MAX_RECORD:
            if end > len(buf):
                if waiting is None and not final:
                    waiting = j
            else:
                try:
                    chunk_data(buf[j + RECORD_HEADER:end])
                    return j, True
                except (McapError, ValueError, EOFError, IndexError, UnicodeDecodeError):
                    pass
        j = buf.find(marker, j + 1)
    return waiting, False


def chunk_data(body: bytes) -> bytes:
    """A chunk record's uncompressed records; McapError when it is damaged."""
    chunk = Chunk.read(ReadDataStream(BytesIO(body)))
    if chunk.compression == "zstd":
        try:
            data = zstandard.ZstdDecompressor().decompress(
                chunk.data, max_output_size=chunk.uncompressed_size)
        except zstandard.ZstdError as e:
            raise McapError(f"chunk does not decompress: {e}") from e
    elif chunk.compression == "":
        data = chunk.data
    else:
        raise McapError(f"chunk compression {chunk.compression!r}")
    if chunk.uncompressed_crc and zlib.crc32(data) != chunk.uncompressed_crc:
        raise McapError("chunk CRC mismatch")
    return data


def read_record(opcode: int, body: bytes) -> Channel | Message | Schema | None:
    """A channel, message or schema record's object (None for any other record)."""
    stream = ReadDataStream(BytesIO(body))
    if opcode == Opcode.CHANNEL:
        return Channel.read(stream)
    if opcode == Opcode.SCHEMA:
        return Schema.read(stream)
    if opcode == Opcode.MESSAGE:
        return Message.read(stream, len(body))
    return None


class Framing:
    """Top-level records from a log's bytes as they arrive (after the magic), surviving
    damage: a record not all there yet waits for its end (``final``: none is coming, it
    is damage); where the framing is lost (:func:`framing_lost`, or a torn record), the
    walk resumes at :func:`next_chunk`. Counts each damaged record or stretch and the
    bytes it could not read; a caller reports a record it cannot decode with
    :meth:`damage`. Stops at the footer (the summary was behind it)."""

    def __init__(self, start: int = len(MAGIC)) -> None:
        self.damaged = 0
        self.unread_bytes = 0
        self.ended = False
        self._lost = False
        self._buffer = b""
        self._base = start  # the file offset of the buffer's first byte

    def feed(self, data: bytes, *, final: bool = False) -> Iterator[tuple[int, int, bytes]]:
        """The whole records (file offset, opcode, body) that ``data`` completes."""
        buf, i = self._buffer + data, 0
        while not self.ended:
            if self._lost:
                j, whole = next_chunk(buf, i, final=final)
                found = len(buf) if j is None else j
                self.unread_bytes += found - i
                i = found
                if not whole:
                    break  # nothing more here (or a chunk still arriving)
                self._lost = False
            if len(buf) - i < RECORD_HEADER:
                if final and i < len(buf):
                    self.damage(len(buf) - i)
                    i = len(buf)
                break
            opcode, length = buf[i], int.from_bytes(buf[i + 1:i + RECORD_HEADER], "little")
            end = i + RECORD_HEADER + length
            if framing_lost(opcode, length) or (final and end > len(buf)):
                self.damage(1)
                self._lost = True
                i += 1
                continue
            if end > len(buf):
                break
            body, at, i = buf[i + RECORD_HEADER:end], self._base + i, end
            if opcode == Opcode.FOOTER:
                self.ended = True
                break
            yield at, opcode, body
        self._base += i
        self._buffer = b"" if self.ended else buf[i:]

    def damage(self, unread: int) -> None:
        """One damaged record or stretch (its contents unknown), ``unread`` bytes of it."""
        self.damaged += 1
        self.unread_bytes += unread


def iter_messages(path: Path, framing: Framing | None = None,
                  ) -> Iterator[tuple[Channel, Schema | None, int, bytes]]:
    """Every message of an MCAP log with its channel and schema, in file order; damage is
    skipped (:class:`Framing`) and counted in ``framing``."""
    framing = framing if framing is not None else Framing()
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}

    with path.open("rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            framing.damage(path.stat().st_size)
            return
        while not framing.ended:
            data = f.read(1 << 20)
            for _, opcode, body in framing.feed(data, final=not data):
                try:
                    inner = split_records(chunk_data(body))[0] if opcode == Opcode.CHUNK else [
                        (opcode, body)]
                    for op, rec in inner:
                        record = read_record(op, rec)
                        if isinstance(record, Schema):
                            schemas[record.id] = record
                        elif isinstance(record, Channel):
                            channels[record.id] = record
                        elif isinstance(record, Message) and record.channel_id in channels:
                            channel = channels[record.channel_id]
                            yield (channel, schemas.get(channel.schema_id), record.log_time,
                                   record.data)
                except (McapError, ValueError, EOFError, IndexError, UnicodeDecodeError):
                    framing.damage(len(body) + RECORD_HEADER)
            if not data:
                break
