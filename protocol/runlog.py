"""The run directory's log format: one MCAP file per process (protocol/RUNLOG.md).

Every process writes ``NAME.mcap`` (:func:`log_path`) through :class:`RunLog`:
its events (``t``, ``event`` and fields, exactly as RUNLOG.md lists them) go
in msgpack on the channel ``/NAME/events``, one message per chunk holding the
events of that chunk in order, with bytes as bytes and floats as float64; the
belief grids go as binary arrays on ``/NAME/grid``, and the poses, tracks,
peers and the room on the channels of the live view (protocol/scenelog.py), so
Foxglove plays a run back as ``stigmesh view`` shows it live. Chunks
(protocol/mcapfile.py) are closed every :data:`FLUSH_EVERY` seconds of the
log's clock (and after each :data:`DURABLE` event, which :meth:`RunLog.log`
returns only once it is in the file); they are compressed and written on the
log's own thread, so logging never waits for zstd. A killed process loses at
most the chunk it was filling and any closed one not yet written (the
writer's backlog: milliseconds), and a reader sees a process's events at most
that late.

:class:`LogReader` is the one reader: it streams a log chunk by chunk (memory
bounded by one chunk, whatever the run's length), follows a log that is still
being written (each ``read()`` returns what was completed since the last),
reads old JSON-lines logs too, and yields every event as the dict a JSON line
used to decode to — bytes as base64 strings, arrays as lists, a belief's grid
as ``mu_f32``/``var_f32`` float32 bytes in base64 — so readers never see the
container. Damaged data (a truncated last chunk, a chunk that does not
decompress, a line that is not JSON) is skipped and counted, never fatal; where
a damaged record header loses the framing, reading resumes at the next whole
chunk (its CRC holds) and the bytes between are counted unread.

Why one module of ~560 lines: it is one contract, with its writer and its one
reader side by side so that they cannot drift apart; the container itself is
protocol/mcapfile.py (writing) and protocol/mcapread.py (reading).
"""

from __future__ import annotations

import base64
import heapq
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgpack
import numpy as np
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.records import Channel, Message

from protocol import scene
from protocol.mcapfile import CHUNK_BYTES, ChannelSpec, McapFile
from protocol.mcapread import (
    MAGIC,
    RECORD_HEADER,
    Framing,
    chunk_data,
    iter_messages,
    read_record,
    split_records,
)
from protocol.scenelog import ScenePainter, grid_data
from protocol.swarm.messages import MAC_LEN

LOG_SUFFIX = ".mcap"
OLD_SUFFIX = ".jsonl"  # runs written before the MCAP logs
LOG_SUFFIXES = (LOG_SUFFIX, OLD_SUFFIX)
EVENTS = "events"  # the topic /NAME/events
EVENTS_ENCODING = "msgpack"
FLUSH_EVERY = 2.0  # s of the log's clock: a chunk is closed at least this often
# Rare events that say what was done to a process close its chunk at once, so a kill
# right after them (a scenario's fault, then its kill) cannot take them away.
DURABLE = frozenset({"start", "faults_set", "byzantine", "fatal", "stop"})
# Datagrams logged by their size only (RUNLOG.md): what a robot sent that nothing reads back
# byte for byte. A re-run rebuilds the PATCHes and SNAPSHOTs an agent sent from its inputs;
# its HEARTBEATs are drawn on /NAME/scene before they lose their bytes; PINGs and PONGs, and
# the car link's frames, are read for their times and kinds only. (None: every kind.)
SIZE_ONLY: dict[str, frozenset[str] | None] = {
    "tx": frozenset({"patch", "snapshot", "heartbeat", "ping", "pong"}),
    "car_tx": None, "car_rx": None}
# A sent datagram's MAC is logged as zeros: the key holder can compute it again from the
# payload, no reader checks it, and sixteen random bytes a datagram were 1.7 % of a log.
ZERO_MAC = bytes(MAC_LEN)
# Fields of the agent's frequent outputs kept as float32 (RUNLOG.md): values a reader plots
# or compares, never an input of a re-run and never a time (times stay float64: on the wall
# clock float32 would round them to minutes).
FLOAT32: dict[str, frozenset[str]] = {
    "decision": frozenset({"v", "omega", "duty", "goal"}),
    "detection": frozenset({"x", "y", "cov"}),
    "peer_track": frozenset({"x", "score", "nis", "agreement"}),
}


def compact(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as the log keeps it: a :data:`SIZE_ONLY` datagram's ``raw`` becomes its
    ``size``; any other datagram the process *sent* keeps its MAC as zeros (RUNLOG.md)."""
    kinds = SIZE_ONLY.get(record["event"], frozenset())
    raw = record.get("raw")
    if not isinstance(raw, bytes | bytearray):
        return record
    if kinds is None or record.get("kind") in kinds:
        record = {k: v for k, v in record.items() if k != "raw"}
        record["size"] = len(raw)
    elif record["event"] == "tx" and len(raw) > MAC_LEN:
        record = {**record, "raw": bytes(raw[:-MAC_LEN]) + ZERO_MAC}
    return record


def datagram_size(line: dict[str, Any]) -> int:
    """A logged datagram's size: from its base64 ``raw``, else its ``size`` field."""
    raw = line.get("raw")
    if isinstance(raw, str):
        return len(raw) * 3 // 4 - raw.endswith("=") - raw.endswith("==")
    size = line.get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) else 0


def _loggable(value: object) -> object:
    """An array, numpy number, set or enum as the plain value both encodings write."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if hasattr(value, "value") and isinstance(value.value, str | int):  # enums
        return value.value
    raise TypeError(f"cannot log a {type(value).__name__}")


def _default(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return _loggable(value)


def dumps(obj: object, **kw: Any) -> str:
    """One event as a JSON line (bytes as base64): ``stigmesh log cat`` prints these."""
    return json.dumps(obj, default=_default, separators=(",", ":"))


def _pack_default(value: object) -> object:
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, int):  # only one beyond 64 bits gets here: as JSON reads it back
        return float(value)
    return _loggable(value)


class _EventPacker:
    """msgpack of one event, its :data:`FLOAT32` fields as float 32 (one per log: not shared)."""

    def __init__(self) -> None:
        self._full = msgpack.Packer(default=_pack_default, use_bin_type=True)
        self._single = msgpack.Packer(default=_pack_default, use_bin_type=True,
                                      use_single_float=True)

    def pack(self, event: dict[str, Any], *, same_t: bool = False) -> bytes:
        """``event`` packed; ``same_t``: without its ``t`` (the previous event's, RUNLOG.md)."""
        full, single = self._full, self._single
        if same_t:
            event = {k: v for k, v in event.items() if k != "t"}
        narrow = FLOAT32.get(event["event"])
        if narrow is None:
            return full.pack(event)
        parts = [full.pack_map_header(len(event))]
        for key, value in event.items():
            parts += (full.pack(key), (single if key in narrow else full).pack(value))
        return b"".join(parts)


class RunLog:
    """Writes one process's log (MCAP: see the module's docstring).

    ``log(event, **fields)`` records an event; events an agent or the world logs
    are also drawn on the scene channels (:class:`ScenePainter`). Thread-safe.

    A write that fails (a full disk) does not raise in the caller, whose loop may be
    stopping a car: the log stops there, :attr:`error` says why and :attr:`dropped`
    counts the events logged since (the chunk whose write failed is lost with it); its
    owner decides what that means.
    """

    def __init__(self, path: Path, process: str, clock: Callable[[], float],
                 *, flush_every: float = FLUSH_EVERY, idle_flush: bool | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.process = process
        self._clock = clock
        self._flush_every = flush_every
        self._lock = threading.Lock()
        self._packer = _EventPacker()
        self._file: McapFile | None = McapFile(path, process, background=True)
        self._events_channel = self._file.channel(
            ChannelSpec(f"/{process}/{EVENTS}", EVENTS_ENCODING, "", "", b""))
        self._batch: list[bytes] = []
        self._batch_t: float | None = None  # the first event's time in the batch
        self._last_t: float | None = None  # the last event's time in the batch
        self._painter = ScenePainter(process)
        self._since: float | None = None  # the log time of the chunk's first message
        self.lines = 0
        self.error: str | None = None  # why the log stopped: a write failed
        self.dropped = 0  # events logged since (not those of the chunk that failed)
        self._closed = threading.Event()
        # Chunks close on the log's own clock, so a log in virtual time (lockstep) is the
        # same bytes every run; on the real clock a thread also closes a quiet log's chunk.
        if idle_flush if idle_flush is not None else clock in (time.monotonic, time.time):
            threading.Thread(target=self._flush_loop, name=f"runlog-{process}",
                             daemon=True).start()

    def log(self, event: str, t: float | None = None, **fields: object) -> None:
        """Record one event; ``t`` defaults to the clock's reading now."""
        stamp = self._clock() if t is None else t
        record: dict[str, Any] = {"t": stamp, "event": event, **fields}
        with self._lock:
            if self._file is None:
                self.dropped += self.error is not None
                return
            try:
                for spec, data in self._painter.paint(record):  # may take a belief's grid
                    self._file.add(self._file.channel(spec), scene.nanoseconds(stamp), data)
                same_t = (self._batch_t is not None and stamp == self._last_t
                          and type(stamp) is type(self._last_t))
                self._batch.append(self._packer.pack(compact(record), same_t=same_t))
                if self._batch_t is None:
                    self._batch_t = stamp
                self._last_t = stamp
                self.lines += 1
                if event in DURABLE:
                    self._close_chunk()
                    self._file.drain()
                else:
                    self._pending(stamp)
            except OSError as exc:
                self._failed(exc)

    def scene(self, spec: ChannelSpec, data: bytes, t: float | None = None) -> None:
        """Write one message on a scene channel (the world's room, for instance)."""
        stamp = self._clock() if t is None else t
        with self._lock:
            if self._file is not None:
                try:
                    self._file.add(self._file.channel(spec), scene.nanoseconds(stamp), data)
                    self._pending(stamp)
                except OSError as exc:
                    self._failed(exc)

    def flush(self) -> None:
        """Close the chunk being filled now, so readers see every event logged so far."""
        with self._lock:
            try:
                self._close_chunk()
                if self._file is not None:
                    self._file.drain()
            except OSError as exc:
                self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        """A write failed: the log stops here (what is in the file stays readable)."""
        self.error = f"{self.path}: {exc.strerror or exc}"
        self.dropped += len(self._batch)
        self._batch, self._batch_t = [], None
        if self._file is not None:
            self._file.abandon()
            self._file = None

    def _pending(self, now: float) -> None:
        """Something was added at ``now`` (the log's clock): close the chunk when it is due
        or full."""
        if self._since is None:
            self._since = now
        assert self._file is not None
        if (now - self._since >= self._flush_every
                or self._file.pending + sum(map(len, self._batch)) >= CHUNK_BYTES):
            self._close_chunk()

    def _close_chunk(self) -> None:
        self._since = None
        if self._file is None:
            return
        if self._batch:
            assert self._batch_t is not None
            self._file.add(self._events_channel, scene.nanoseconds(self._batch_t),
                           b"".join(self._batch))
            self._batch, self._batch_t = [], None
        self._file.close_chunk()

    def _flush_loop(self) -> None:
        """Close a chunk that is due even when nothing more is logged (a quiet process)."""
        while not self._closed.wait(self._flush_every / 4):
            with self._lock:
                if self._since is not None and self._clock() - self._since >= self._flush_every:
                    try:
                        self._close_chunk()
                    except OSError as exc:
                        self._failed(exc)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                try:
                    self._close_chunk()
                    self._file.finish()
                except OSError as exc:
                    self._failed(exc)
                self._file = None
        self._closed.set()


def log_path(run_dir: Path, process: str) -> Path:
    return run_dir / f"{process}{LOG_SUFFIX}"


def process_logs(run_dir: Path) -> dict[str, Path]:
    """Every process log of a run directory by process name (an MCAP log wins over an old
    JSON-lines one of the same name)."""
    found: dict[str, Path] = {}
    for suffix in reversed(LOG_SUFFIXES):
        for path in sorted(run_dir.glob(f"*{suffix}")):
            if path.is_file():
                found[path.name.removesuffix(suffix)] = path
    return dict(sorted(found.items()))


# ---------------------------------------------------------------- reading


@dataclass
class ReadStats:
    lines: int = 0  # events read
    # damaged: JSON lines that do not parse; MCAP chunks that do not decode, and stretches
    # of a file whose framing was lost, each one (the events in them are not known)
    bad_lines: int = 0
    unread_bytes: int = 0  # of an MCAP log: in damaged chunks and stretches


MAX_INT_DIGITS = 308  # a longer integer does not fit a float, as readers use numbers


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError("an integer too large for a float")
    return int(text)


def _plain(value: Any) -> Any:
    """A msgpack value as JSON would have given it: bytes as base64, nothing else changed."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _grid_f32(data: bytes, which: int, shape: tuple[int, int]) -> str:
    values = np.frombuffer(data, dtype=np.uint8).reshape(shape[0], shape[1], 2)[:, :, which]
    f32 = (values.astype(np.float32) / np.float32(scene.GRID_LEVELS)).astype("<f4")
    return base64.b64encode(f32.tobytes()).decode("ascii")


class LogReader:
    """Reads one process's log as it grows: each :meth:`read` returns the events completed
    since the last call; iterating streams the whole log once (see the module's docstring)."""

    READ_SIZE = 1 << 20

    def __init__(self, path: Path, stats: ReadStats | None = None) -> None:
        self.path = path
        self.stats = stats if stats is not None else ReadStats()
        self.process = path.name.split(".")[0]
        self._offset = 0
        self._buffer = b""
        self._format: str | None = None  # "mcap" or "jsonl", from the first bytes
        self._channels: dict[int, Channel] = {}
        self._grids: dict[int, bytes] = {}  # log time (ns) -> the grid message's data
        self._framing = Framing()  # an MCAP log's records, damage counted

    def read(self) -> list[dict[str, Any]]:
        """Every event completed since the last call (none yet if the file is not there)."""
        try:
            with _either(self.path).open("rb") as f:
                return list(self._consume(f))
        except FileNotFoundError:
            return []

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with _either(self.path).open("rb") as f:
            yield from self._consume(f)
        yield from self._finish()

    def _finish(self) -> Iterator[dict[str, Any]]:
        """At the end of a whole read: what is left over is damage (a record torn by a kill,
        or a stretch whose framing was lost, after which whole chunks may still stand)."""
        if self._format == "mcap":
            yield from self._records(final=True)
        elif self._buffer.strip() if self._format == "jsonl" else self._buffer:
            self.stats.bad_lines += 1  # a torn last line (or a file too short for its magic)
            self.stats.lines += self._format == "jsonl"
        self._buffer = b""

    def _consume(self, f: IO[bytes]) -> Iterator[dict[str, Any]]:
        f.seek(self._offset)
        while True:
            data = f.read(self.READ_SIZE)
            if not data:
                return
            self._offset += len(data)
            self._buffer += data
            if self._format is None:
                if len(self._buffer) < len(MAGIC) and self._buffer == MAGIC[:len(self._buffer)]:
                    continue
                self._format = "mcap" if self._buffer.startswith(MAGIC) else "jsonl"
                if self._format == "mcap":
                    self._buffer = self._buffer[len(MAGIC):]
            yield from (self._lines() if self._format == "jsonl" else self._records())

    def _lines(self) -> Iterator[dict[str, Any]]:
        lines = self._buffer.split(b"\n")
        self._buffer = lines.pop()  # an unfinished last line waits for its end
        for line in lines:
            if not line.strip():
                continue
            self.stats.lines += 1
            try:
                obj = json.loads(line.decode("utf-8", errors="replace"), parse_int=_parse_int)
            except (ValueError, RecursionError):  # not JSON, a number too long, too deep
                self.stats.bad_lines += 1
                continue
            if not isinstance(obj, dict) or "event" not in obj or "t" not in obj:
                self.stats.bad_lines += 1
                continue
            yield obj

    def _records(self, *, final: bool = False) -> Iterator[dict[str, Any]]:
        """The events of the whole records in the buffer (:class:`Framing`: a record not
        all there yet waits, damage is skipped and counted)."""
        data, self._buffer = self._buffer, b""
        framing = self._framing
        damaged, unread = framing.damaged, framing.unread_bytes
        try:
            for _, opcode, body in framing.feed(data, final=final):
                try:
                    if opcode == Opcode.CHANNEL:
                        self._known(body)
                    elif opcode == Opcode.CHUNK:
                        yield from self._chunk_events(chunk_data(body))
                except (McapError, ValueError, KeyError, IndexError, EOFError,
                        msgpack.UnpackException, UnicodeDecodeError):
                    framing.damage(len(body) + RECORD_HEADER)
        finally:
            self.stats.bad_lines += framing.damaged - damaged
            self.stats.unread_bytes += framing.unread_bytes - unread

    def _known(self, body: bytes) -> None:
        channel = read_record(Opcode.CHANNEL, body)
        assert isinstance(channel, Channel)
        self._channels[channel.id] = channel

    def _chunk_events(self, data: bytes) -> Iterator[dict[str, Any]]:
        records, _ = split_records(data)
        for opcode, body in records:
            if opcode == Opcode.CHANNEL:
                self._known(body)
            elif opcode == Opcode.MESSAGE:
                message = read_record(opcode, body)
                assert isinstance(message, Message)
                channel = self._channels.get(message.channel_id)
                if channel is None:
                    continue
                if channel.topic.endswith("/grid"):
                    self._grids[message.log_time] = message.data
                elif (channel.topic.endswith(f"/{EVENTS}")
                      and channel.message_encoding == EVENTS_ENCODING):
                    yield from self._events(message.data)
        self._grids.clear()

    def _events(self, data: bytes) -> Iterator[dict[str, Any]]:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
        unpacker.feed(data)
        last_t: object = None  # an event without ``t`` has its predecessor's (RUNLOG.md)
        for obj in unpacker:
            self.stats.lines += 1
            if isinstance(obj, dict) and "t" not in obj and last_t is not None:
                obj["t"] = last_t
            if not isinstance(obj, dict) or "event" not in obj or "t" not in obj:
                self.stats.bad_lines += 1
                continue
            last_t = obj["t"]
            if obj.get("grid") == "u8" and obj.get("event") == "belief":
                self._attach_grid(obj)
            event = {"t": obj.pop("t"), "proc": self.process}
            event.update((k, _plain(v)) for k, v in obj.items())
            yield event

    def _attach_grid(self, obj: dict[str, Any]) -> None:
        message = self._grids.get(scene.nanoseconds(float(obj["t"])))
        data = grid_data(message) if message is not None else None
        shape = obj.get("shape")
        del obj["grid"]
        if data is None or not isinstance(shape, list) or len(data) != 2 * shape[0] * shape[1]:
            return
        obj["mu_f32"] = _grid_f32(data, 0, (shape[0], shape[1]))
        obj["var_f32"] = _grid_f32(data, 1, (shape[0], shape[1]))


def _either(path: Path) -> Path:
    """``path``, or when it is not there the log of the other format beside it
    (``walnut.jsonl`` reads ``walnut.mcap``), so callers that name a log either way work."""
    if path.suffix in LOG_SUFFIXES and not path.exists():
        for suffix in LOG_SUFFIXES:
            if path.with_suffix(suffix).exists():
                return path.with_suffix(suffix)
    return path


def merge_logs(paths: list[Path], out: Path, stats: ReadStats | None = None) -> int:
    """Every MCAP log of ``paths`` in one MCAP file, in log-time order (each log is in time
    order already, chunk by chunk); how many messages were written. Damage is skipped and
    counted in ``stats`` (``bad_lines``: damaged records and stretches)."""
    out.unlink(missing_ok=True)
    target = McapFile(out, "run")
    mcaps = [p for p in paths if p.suffix == LOG_SUFFIX]
    framings = [Framing() for _ in mcaps]
    streams = [((t, k, channel, schema, data)
                for channel, schema, t, data in iter_messages(p, framings[k]))
               for k, p in enumerate(mcaps)]
    count = 0
    for t, _, channel, schema, data in heapq.merge(*streams, key=lambda m: (m[0], m[1])):
        spec = ChannelSpec(channel.topic, channel.message_encoding,
                                 schema.name if schema else "", schema.encoding if schema else "",
                                 schema.data if schema else b"")
        target.add(target.channel(spec), t, data)
        count += 1
        if target.pending >= CHUNK_BYTES:
            target.close_chunk()
    target.finish()
    if stats is not None:
        stats.bad_lines += sum(f.damaged for f in framings)
        stats.unread_bytes += sum(f.unread_bytes for f in framings)
    return count


def read_run_log(path: Path, stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Yield each event of a log (MCAP or old JSON lines) as a dict; skip and count damage."""
    yield from LogReader(path, stats)


def b64(data: str) -> bytes:
    """Decode a bytes field of an event as a reader yields it."""
    return base64.b64decode(data.encode("ascii"), validate=True)


def rejection(line: dict[str, Any]) -> tuple[str, int] | None:
    """(reason, how many) when ``line`` reports rejections, else None.

    Two events do: ``rx`` with ``ok`` false (the decoder refused datagrams) and
    ``refused`` (the agent refused a valid message's content). Each stands for
    ``count`` rejections of its reason (logs before sampling: one each).
    """
    event = line.get("event")
    if not ((event == "rx" and not line.get("ok")) or event == "refused"):
        return None
    count = line.get("count", 1)
    n = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
    return str(line.get("reason", "unknown")), n
