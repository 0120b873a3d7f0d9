"""Read a run directory (protocol/RUNLOG.md) robustly.

One :class:`ProcessLog` per process log (protocol/runlog.py: ``NAME.mcap``, or
``NAME.jsonl`` of older runs): ``world`` is the world server, every other log
an agent named by the file's stem. Logs are streamed, never held whole: one
pass finds the damaged events and the time span, and each metric streams the
events it needs again (:class:`Stream`). Damaged lines
are skipped and counted, never fatal: a killed process's truncated last line,
a line that is not JSON or nests too deep to parse, anything that is not an
object with a finite ``t`` and a string ``event``, a ``t`` more than
:data:`MAX_RUN_SPAN` from the run's median time (no run lasts days; one wild
``t`` would stretch the time base to ages), and a line whose fields the
readers index have the wrong type (:func:`line_damage`: a car id that is not
an integer, a car list that is not a list, ...) or, for an agent's core
inputs, that the re-run could not parse. Unknown events and keys are
kept and ignored by the metrics. A missing world or agent log is a note in
the report, not an error. Only a directory that holds no run log at all is
refused, with :class:`NotARunError`.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from agents.faults import ByzantineSpec
from agents.node import batch_from_fields
from protocol.errors import ProtocolError
from protocol.runlog import ReadStats, b64, process_logs, read_run_log
from protocol.swarm.codec import decode_payload
from protocol.swarm.errors import SwarmDecodeError
from protocol.swarm.messages import MAC_LEN, MAX_DATAGRAM_LIMIT, Message
from worlds.arena import ARENA_DIR, Arena, ArenaError, load_arena, shipped_arena

WORLD = "world"
MAX_RUN_SPAN = 86400.0  # s: a line further than a day from the run's median time is damaged
Line = dict[str, Any]
Progress = Callable[[str], None]


class NotARunError(Exception):
    """``path`` is not a run directory; ``reason`` says why."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: not a run directory: {reason}")


HEAVY = frozenset({"belief", "truth", "rx", "tx", "obs", "car_rx", "car_tx"})  # streamed


class Stream:
    """A process log's kept events, read from its file anew on each iteration (memory: one
    chunk), skipping the events the first reading found damaged (by their position)."""

    def __init__(self, path: Path, dropped: frozenset[int], names: frozenset[str] | None = None,
                 count: int | None = None) -> None:
        self.path = path
        self.dropped = dropped
        self.names = names
        self._count = count

    def __iter__(self) -> Iterator[Line]:
        for k, line in enumerate(read_run_log(self.path, ReadStats())):
            if k not in self.dropped and (self.names is None or line.get("event") in self.names):
                yield line

    def __len__(self) -> int:
        if self._count is None:
            self._count = sum(1 for _ in self)
        return self._count

    def __getitem__(self, index: int) -> Line:
        if index < 0:
            return list(self)[index]
        for k, line in enumerate(self):
            if k == index:
                return line
        raise IndexError(index)


@dataclass
class ProcessLog:
    """One process's well-formed events, in file order: ``lines`` is a list (in memory) or a
    :class:`Stream` over the file; the small events are kept once read, the heavy ones
    (:data:`HEAVY`) are streamed each time, so a long run's replay stays bounded in memory."""

    name: str
    path: Path
    lines: list[Line] | Stream
    stats: ReadStats
    span: tuple[float, float] | None = None  # first and last t, when known without a pass
    _cache: dict[frozenset[str], list[Line]] = field(default_factory=dict, repr=False)

    def events(self, *names: str) -> list[Line] | Stream:
        wanted = frozenset(names)
        if isinstance(self.lines, Stream):
            if wanted & HEAVY:
                return Stream(self.lines.path, self.lines.dropped, wanted)
            if wanted not in self._cache:
                self._cache[wanted] = [line for line in self.lines if line["event"] in wanted]
            return self._cache[wanted]
        return [line for line in self.lines if line["event"] in wanted]

    def first(self, name: str) -> Line | None:
        return next(iter(self.events(name)), None)

    @property
    def t_first(self) -> float | None:
        if self.span is not None:
            return self.span[0]
        return next(iter(self.lines))["t"] if self.lines else None

    @property
    def t_last(self) -> float | None:
        if self.span is not None:
            return self.span[1]
        return max(line["t"] for line in self.lines) if self.lines else None


@dataclass
class RunDir:
    path: Path
    world: ProcessLog | None
    agents: dict[str, ProcessLog]
    notes: list[str] = field(default_factory=list)
    skipped: int = 0  # damaged lines skipped, over every log

    @property
    def t_start(self) -> float:
        """The run's start: the world's first line, else the earliest agent line."""
        if self.world is not None and self.world.t_first is not None:
            return self.world.t_first
        firsts = [log.t_first for log in self.agents.values() if log.t_first is not None]
        return min(firsts) if firsts else 0.0

    @property
    def t_end(self) -> float:
        logs = [*self.agents.values(), *([self.world] if self.world else [])]
        lasts = [log.t_last for log in logs if log.t_last is not None]
        return max(lasts) if lasts else self.t_start

    @property
    def world_start(self) -> Line | None:
        return self.world.first("start") if self.world is not None else None

    def car_names(self) -> dict[int, str]:
        """Car id -> name, from the world's start and boot events."""
        names: dict[int, str] = {}
        if self.world is None:
            return names
        start = self.world_start
        if start is not None:
            for car in start.get("cars") or []:  # ids and names checked by line_damage
                names[car["id"]] = car["name"]
        for boot in self.world.events("boot"):
            if "car" in boot and "name" in boot:
                names[boot["car"]] = boot["name"]
        return names


def _number(value: object) -> bool:
    """A finite JSON number that converts to a float (an integer of 400 digits does not)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63


def _car_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _numbers(value: object, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(_number(x) for x in value)


def _cars(value: object, named: bool = False) -> bool:
    """A list of car objects whose ids (and names) are of the right type."""
    return isinstance(value, list) and all(
        isinstance(car, dict)
        and _car_id(car.get("id"))
        and (not named or isinstance(car.get("name"), str))
        for car in value
    )


# Fields the readers index without looking, by process kind and event; checked when present.
_FIELDS: dict[tuple[str, str], dict[str, Callable[[object], bool]]] = {
    (WORLD, "start"): {"cars": lambda v: _cars(v, named=True)},
    (WORLD, "boot"): {"name": lambda v: isinstance(v, str)},
    (WORLD, "truth"): {"cars": _cars, "target": lambda v: v is None or isinstance(v, dict)},
    ("agent", "belief"): {
        "pose": lambda v: v is None or _numbers(v, 3),
        "pose_t": _number,
        "pose_cov": lambda v: v is None or (
            isinstance(v, list) and len(v) == 3 and all(_numbers(row, 3) for row in v)),
    },
}


def line_damage(line: Line, world: bool) -> str | None:
    """Why a decoded line cannot be used (None when it can); ``world``: from world.jsonl."""
    if not _number(line.get("t")):
        return "t is not a finite number"
    event = line.get("event")
    if not isinstance(event, str):
        return "event is not a string"
    if world and "car" in line and not _car_id(line["car"]):  # the world names cars by id
        return "car id is not an integer"
    for key, fits in _FIELDS.get((WORLD if world else "agent", event), {}).items():
        if key in line and not fits(line[key]):
            return f"{event}.{key} is malformed"
    return None


def read_process_log(path: Path, name: str) -> ProcessLog:
    """Every well-formed event of one log, in memory (small logs, tests)."""
    stats = ReadStats()
    lines: list[Line] = []
    for line in read_run_log(path, stats):
        if line_damage(line, name == WORLD) is None:
            lines.append(line)
        else:
            stats.bad_lines += 1
    return ProcessLog(name, path, lines, stats)


@dataclass
class _FirstPass:
    """What one streaming pass over a log learns: the damaged events' positions, every
    kept event's t (for the run's median time), the start and the swarm id."""

    stats: ReadStats
    dropped: set[int]
    times: array[float]
    positions: array[int]
    start: Line | None = None


def _first_pass(path: Path, name: str) -> _FirstPass:
    stats = ReadStats()
    found = _FirstPass(stats, set(), array("d"), array("q"))
    world = name == WORLD
    swarm_id: int | None = None
    for k, line in enumerate(read_run_log(path, stats)):
        if line_damage(line, world) is not None:
            found.dropped.add(k)
            continue
        event = line["event"]
        if not world:
            if event == "start" and found.start is None:
                found.start = line
                if isinstance(line.get("swarm_id"), int):
                    swarm_id = int(line["swarm_id"])
            elif swarm_id is None and event in ("tx", "rx"):
                data = datagram_bytes(line)
                if data is not None and (event == "tx" or line.get("ok")):
                    swarm_id = envelope_swarm_id(data)
            if not _replayable(line, swarm_id):
                found.dropped.add(k)
                continue
        found.times.append(float(line["t"]))
        found.positions.append(k)
    stats.bad_lines += len(found.dropped)
    return found


def _pair(value: object) -> bool:
    return isinstance(value, list) and len(value) == 2


def _angle(value: object) -> bool:
    """A ``car`` line's ``angle``: null, or [boot, uptime_ms, rad] (agents.odometry.GyroAngle)."""
    if value is None:
        return True
    return (isinstance(value, list) and len(value) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:2])
            and isinstance(value[2], int | float) and not isinstance(value[2], bool)
            and math.isfinite(value[2]))


def _replayable(line: Line, swarm_id: int | None) -> bool:
    """Whether a core input parses as the re-run parses it (agents.node.replay_inputs)."""
    event = line["event"]
    try:
        if event == "rx" and line.get("ok"):
            data = datagram_bytes(line)
            if data is None:
                return False
            if swarm_id is not None:
                decode_payload(data[:-MAC_LEN], swarm_id)
            return _pair(line["src"])
        if event == "discovered":
            addr = line["addr"]
            return _pair(addr) and int(addr[1]) >= 0 and "peer" in line and "epoch" in line
        if event == "car":
            return _pair(line["duty"]) and "gyro" in line and _angle(line.get("angle"))
        if event == "obs":
            batch_from_fields(line)
        elif event == "byzantine" and line["spec"] is not None:
            ByzantineSpec.from_mapping(line["spec"])
            int(line["seed"])
    except (ProtocolError, ValueError, TypeError, KeyError, IndexError, OverflowError):
        return False
    return True


def load_run(path: Path, progress: Progress | None = None) -> RunDir:
    """Read every process log of the run directory ``path``: one streaming pass each, to
    find the damaged events and the run's time span; the metrics then stream the logs."""
    path = Path(path)
    if not path.exists():
        raise NotARunError(path, "it does not exist")
    if not path.is_dir():
        raise NotARunError(path, "it is a file, not a directory")
    files = process_logs(path)
    if not files:
        raise NotARunError(path, "it holds no process log (*.mcap, or *.jsonl of older runs)")
    world: ProcessLog | None = None
    agents: dict[str, ProcessLog] = {}
    notes: list[str] = []
    passes: dict[str, tuple[Path, _FirstPass]] = {}
    for name, file in files.items():
        try:
            passes[name] = (file, _first_pass(file, name))
        except OSError as e:
            notes.append(f"{file.name}: unreadable ({e.strerror or e})")
    every = [p.times for _, p in passes.values() if len(p.times)]
    middle = float(np.median(np.concatenate([np.frombuffer(t, dtype=np.float64) for t in every]))
                   ) if every else 0.0
    read: list[ProcessLog] = []
    for name, (file, first) in passes.items():
        times = np.frombuffer(first.times, dtype=np.float64) if len(first.times) else np.zeros(0)
        far = np.abs(times - middle) > MAX_RUN_SPAN
        if far.any():
            positions = np.frombuffer(first.positions, dtype=np.int64)
            first.dropped.update(int(k) for k in positions[far])
            first.stats.bad_lines += int(far.sum())
            times = times[~far]
        kept = int(times.size)
        span = (float(times[0]), float(times.max())) if kept else None
        log = ProcessLog(name, file, Stream(file, frozenset(first.dropped), count=kept),
                         first.stats, span)
        if first.start is not None:
            log._cache[frozenset({"start"})] = [first.start]
        read.append(log)
        if first.stats.bad_lines:
            notes.append(
                f"{file.name}: {first.stats.bad_lines} damaged line(s) of {first.stats.lines} "
                "skipped" + (f"; {first.stats.unread_bytes:,} bytes of the file unread (the "
                             "events in them are lost)" if first.stats.unread_bytes else "")
            )
        if progress is not None:
            progress(f"read {file.name}: {kept} events")
        if name == WORLD:
            world = log
        else:
            agents[name] = log
    logs = [*agents.values(), *([world] if world else [])]
    if not any(log.lines for log in logs):
        raise NotARunError(path, f"none of its {len(files)} process logs holds a run event")
    if world is None or not world.lines:
        notes.append("no world log: no ground truth, so no errors against it")
        world = None
    elif not world.first("truth"):
        notes.append("the world log holds no truth events: no errors against ground truth")
    for name, log in list(agents.items()):
        if not log.lines:
            notes.append(f"{log.path.name} holds no events: agent left out")
            del agents[name]
    if not agents:
        notes.append("no agent logs")
    return RunDir(path, world, agents, notes, sum(log.stats.bad_lines for log in read))


# ---------------------------------------------------------------- the arena


def _arena_file(spec: str) -> Path | None:
    """An arena given as a path or as the name of a shipped arena."""
    path = Path(spec)
    if path.is_file():
        return path
    shipped = shipped_arena(spec)
    return shipped if shipped.is_file() else None


def find_arena(run: RunDir, explicit: str | None = None) -> tuple[Arena | None, str]:
    """The run's arena and where it came from: ``explicit`` (a path or shipped name), else
    the world's start event (its ``source`` file, else its ``arena`` name).

    An explicit arena that cannot be read raises :class:`ArenaError`; a recorded one that
    cannot be found gives ``(None, why)``.
    """
    if explicit is not None:
        file = _arena_file(explicit)
        if file is None:
            raise ArenaError(explicit, 0, "no such file and no shipped arena of that name")
        return load_arena(file), f"--arena {explicit}"
    start = run.world_start
    if start is None:
        return None, "the run does not record its arena (no world start event)"
    candidates: list[Path] = []
    source = start.get("source")
    if isinstance(source, str) and source:
        candidates += [Path(source), ARENA_DIR.parent.parent / source]
    name = start.get("arena")
    if isinstance(name, str) and name:
        candidates.append(shipped_arena(name))
    for file in candidates:
        if file.is_file():
            try:
                return load_arena(file), f"recorded: {file}"
            except ArenaError as e:
                return None, f"the recorded arena does not load: {e}"
    return None, f"the recorded arena ({source or name}) is not found"


# ---------------------------------------------------------------- datagrams


def datagram_bytes(line: Line) -> bytes | None:
    """The ``raw`` field of an rx/tx line, or None when it is missing or not base64."""
    raw = line.get("raw")
    if not isinstance(raw, str):
        return None
    try:
        return b64(raw)
    except ValueError:
        return None


def envelope_swarm_id(data: bytes) -> int | None:
    """The swarm id in a datagram's envelope (the third field), without other checks."""
    try:
        env = msgpack.unpackb(data[:-MAC_LEN], raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException):
        return None
    if isinstance(env, list) and len(env) > 2 and isinstance(env[2], int):
        return int(env[2])
    return None


def swarm_id_of(log: ProcessLog) -> int | None:
    """The agent's swarm id: its start event, else the envelope of its first datagram."""
    start = log.first("start")
    if start is not None and isinstance(start.get("swarm_id"), int):
        return int(start["swarm_id"])
    for line in log.lines:
        if line["event"] in ("tx", "rx") and (line["event"] == "tx" or line.get("ok")):
            data = datagram_bytes(line)
            if data is not None and (sid := envelope_swarm_id(data)) is not None:
                return sid
    return None


def decode_own(data: bytes, swarm_id: int) -> Message | None:
    """Decode a logged datagram whose MAC was already checked; None if it does not decode."""
    try:
        return decode_payload(data[:-MAC_LEN], swarm_id, limit=MAX_DATAGRAM_LIMIT)
    except SwarmDecodeError:
        return None


def float32_grid(field_value: object, shape: tuple[int, int]) -> np.ndarray | None:
    """A belief record's ``mu_f32``/``var_f32`` array (float32, as logged: a long run's grids
    are the bulk of a replay's memory), or None when it does not fit ``shape``."""
    if not isinstance(field_value, str):
        return None
    try:
        data = b64(field_value)
    except ValueError:
        return None
    if len(data) != 4 * shape[0] * shape[1]:
        return None
    return np.frombuffer(data, dtype="<f4").reshape(shape).astype(np.float32)


def iter_lines(log: ProcessLog, *names: str) -> Iterator[Line]:
    wanted = set(names)
    return (line for line in log.lines if line["event"] in wanted)
