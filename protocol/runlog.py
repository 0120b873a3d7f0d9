"""The run directory's log format: JSON lines, one file per process.

Every line is one JSON object with at least ``t`` (the writer's monotonic
clock, seconds), ``proc`` (the process name) and ``event``. Bytes are written
as base64 strings, numpy arrays as lists, floats with full precision so that
a replay sees exactly what the process saw. Each line is written and flushed
in one call, so a killed process damages at most its last line, and
:func:`read_run_log` skips such a line and counts it.

This module holds the format; the clock is always passed in by the caller.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import structlog

LOG_SUFFIX = ".jsonl"


def _default(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if hasattr(value, "value") and isinstance(value.value, str | int):  # enums
        return value.value
    raise TypeError(f"cannot log a {type(value).__name__}")


def dumps(obj: object, **kw: Any) -> str:
    return json.dumps(obj, default=_default, separators=(",", ":"))


class RunLog:
    """Writes one process's JSON-lines log through structlog."""

    def __init__(self, path: Path, process: str, clock: Callable[[], float]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.process = process
        self._clock = clock
        self._file: IO[str] = path.open("a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()
        self._logger = structlog.wrap_logger(
            structlog.WriteLogger(self._file),
            processors=[structlog.processors.JSONRenderer(serializer=dumps)],
            cache_logger_on_first_use=True,
        )
        self.lines = 0

    def log(self, event: str, t: float | None = None, **fields: object) -> None:
        """Write one line; ``t`` defaults to the clock's reading now."""
        stamp = self._clock() if t is None else t
        with self._lock:
            if self._file.closed:
                return
            self._logger.msg(t=stamp, proc=self.process, event=event, **fields)
            self.lines += 1

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                self._file.close()


def log_path(run_dir: Path, process: str) -> Path:
    return run_dir / f"{process}{LOG_SUFFIX}"


@dataclass
class ReadStats:
    lines: int = 0
    bad_lines: int = 0


MAX_INT_DIGITS = 308  # a longer integer does not fit a float, as readers use numbers


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError("an integer too large for a float")
    return int(text)


def read_run_log(path: Path, stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Yield each well-formed line as a dict; skip and count damaged ones."""
    stats = stats if stats is not None else ReadStats()
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for line in f:
            stats.lines += 1
            try:
                obj = json.loads(line, parse_int=_parse_int)
            except (ValueError, RecursionError):  # not JSON, a number too long, too deep
                stats.bad_lines += 1
                continue
            if not isinstance(obj, dict) or "event" not in obj or "t" not in obj:
                stats.bad_lines += 1
                continue
            yield obj


def b64(data: str) -> bytes:
    """Decode a bytes field written by :class:`RunLog`."""
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
