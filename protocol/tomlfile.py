"""The one reader of the project's TOML files: typed, ranged, every error at its line.

Every file format of stigmesh (site, robot, arena, scenario, tag map,
calibration) is read through :class:`Table`: a getter per type that checks
the value and its range, refuses unknown keys with a "did you mean", and
raises :class:`FileError` as ``file:line: key: reason``. A typo never falls
back silently to a default.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

PathKey = tuple[str | int, ...]


class FileError(ValueError):
    """A file was refused: ``file``, ``line`` (0 when unknown) and ``reason``."""

    def __init__(self, file: str, line: int, reason: str) -> None:
        self.file = file
        self.line = line
        self.reason = reason
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {reason}")


# -- line index ----------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\.\"' ]+?)\s*=")


def _split_key(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in text.split(".")]


def line_index(text: str) -> dict[PathKey, int]:
    """Map key paths (``("cars", 1, "address")``) to their 1-based line numbers.

    Tables and arrays of tables map too (``("cars", 1)``). Good enough for the
    files the project accepts: keys on their own lines, no multi-line strings.
    """
    index: dict[PathKey, int] = {}
    counters: dict[PathKey, int] = {}
    table: PathKey = ()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = _HEADER.match(line)
        if header and line.startswith("["):
            names = _split_key(header.group(2))
            if header.group(1) == "[[":
                base = _resolve(names[:-1], counters)
                key = (*base, names[-1])
                count = counters.get(key, 0)
                counters[key] = count + 1
                table = (*key, count)
            else:
                table = _resolve(names, counters)
            index.setdefault(table, number)
            continue
        match = _KEY.match(raw)
        if match and not raw.lstrip().startswith(("[", "]", "{", "}", ",")):
            path = (*table, *_split_key(match.group(1)))
            index.setdefault(path, number)
    return index


def _resolve(names: list[str], counters: dict[PathKey, int]) -> PathKey:
    """A dotted header's path, entering the last element of arrays of tables."""
    path: PathKey = ()
    for name in names:
        path = (*path, name)
        if path in counters:
            path = (*path, counters[path] - 1)
    return path


def dotted(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known word, or nothing."""
    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# -- reading -------------------------------------------------------------------


class Source:
    """One file's name, its parsed data and where each key sits."""

    def __init__(self, file: str, text: str, base: Path | None = None) -> None:
        self.file = file
        self.base = base  # relative paths inside the file are resolved against this
        try:
            self.data: dict[str, Any] = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            match = re.search(r"at line (\d+)", str(exc))
            line = int(match.group(1)) if match else 0
            reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
            raise FileError(file, line, f"TOML syntax: {reason}") from None
        self.index = line_index(text)

    def line(self, path: PathKey) -> int:
        while path:
            if path in self.index:
                return self.index[path]
            path = path[:-1]
        return 0

    def fail(self, path: PathKey, reason: str) -> FileError:
        return FileError(self.file, self.line(path), reason)

    def root(self) -> Table:
        return Table(self, (), self.data)


def parse(text: str, source: str = "<toml>", base: Path | None = None) -> Table:
    """The top table of TOML ``text``; ``source`` names it in errors."""
    return Source(source, text, base).root()


def read(path: str | Path) -> Table:
    """The top table of a TOML file; relative paths in it resolve beside it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileError(str(p), 0, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FileError(str(p), 0, f"cannot read: {exc}") from None
    return parse(text, str(p), p.parent)


class Table:
    """One TOML table being read: typed getters that fail with a line number."""

    def __init__(self, source: Source, path: PathKey, data: object) -> None:
        if not isinstance(data, dict):
            raise source.fail(path, f"{dotted(path) or 'file'} must be a table")
        self.source = source
        self.path = path
        self.data: dict[str, Any] = data
        self.asked: set[str] = set()
        self._children: dict[str, Table] = {}  # one reader per sub-table, whoever asks

    @property
    def file(self) -> str:
        return self.source.file

    @property
    def line(self) -> int:
        """This table's line (its header's), 0 when unknown."""
        return self.source.line(self.path)

    def raw(self, key: str) -> Any:
        """The value as parsed (None when absent); the key counts as known."""
        self.asked.add(key)
        return self.data.get(key)

    def has(self, key: str) -> bool:
        return key in self.data

    def fail(self, key: str, reason: str) -> FileError:
        path = (*self.path, key)
        return self.source.fail(path, f"{dotted(path)}: {reason}")

    def missing(self, key: str) -> FileError:
        """``key`` is required; if an unknown key here looks like it, point at that one."""
        strays = [k for k in self.data if k not in self.asked and k != key]
        close = difflib.get_close_matches(key, strays, n=1, cutoff=0.6)
        if close:
            path = (*self.path, close[0])
            return self.source.fail(
                path, f"{dotted(path)}: unknown key (did you mean {key!r}?)")
        return self.fail(key, "is required")

    def number(
        self,
        key: str,
        default: float | None = None,
        low: float = -math.inf,
        high: float = math.inf,
        *,
        low_open: bool = False,
    ) -> float:
        value = self.raw(key)
        if value is None:
            if default is None:
                raise self.missing(key)
            return default
        return self.check_number(key, value, low, high, low_open=low_open)

    def optional_number(
        self, key: str, low: float = -math.inf, high: float = math.inf
    ) -> float | None:
        value = self.raw(key)
        return None if value is None else self.check_number(key, value, low, high)

    def check_number(
        self, key: str, value: object, low: float, high: float, *, low_open: bool = False
    ) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"must be a number, got {type(value).__name__}")
        number = float(value)
        if not math.isfinite(number):
            raise self.fail(key, "must be finite")
        too_low = number <= low if low_open else number < low
        if too_low or number > high:
            bracket = "(" if low_open else "["
            raise self.fail(key, f"{number:g} is outside {bracket}{low:g}, {high:g}]")
        return number

    def angle_deg(self, key: str, default: float | None = None) -> float:
        """An angle written in degrees (``..._deg``), returned in radians."""
        return math.radians(self.number(key, default, -360.0, 360.0))

    def integer(
        self, key: str, default: int | None = None, low: int = 0, high: int = 2**63
    ) -> int:
        value = self.raw(key)
        if value is None:
            if default is None:
                raise self.missing(key)
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {type(value).__name__}")
        if not low <= value <= high:
            raise self.fail(key, f"{value} is outside [{low}, {high}]")
        return value

    def string(self, key: str, default: str | None = None) -> str:
        value = self.raw(key)
        if value is None:
            if default is None:
                raise self.missing(key)
            return default
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {type(value).__name__}")
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: str | None = None) -> str:
        value = self.string(key, default)
        if value not in choices:
            raise self.fail(key, f"must be one of {', '.join(choices)}, got {value!r}"
                            f"{did_you_mean(value, choices)}")
        return value

    def file_path(self, key: str, default: Path | None = None) -> Path:
        """A file path; a relative one is taken beside the file that names it."""
        value = self.raw(key)
        if value is None:
            if default is None:
                raise self.missing(key)
            return default
        if not isinstance(value, str) or not value:
            raise self.fail(key, "must be a file name")
        p = Path(value).expanduser()
        if not p.is_absolute() and self.source.base is not None:
            p = self.source.base / p
        return p

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {type(value).__name__}")
        return value

    def vector(
        self, key: str, n: int, low: float = -math.inf, high: float = math.inf
    ) -> tuple[float, ...]:
        value = self.raw(key)
        if value is None:
            raise self.missing(key)
        if not isinstance(value, list) or len(value) != n:
            raise self.fail(key, f"must be a list of {n} numbers")
        return tuple(self.check_number(key, v, low, high) for v in value)

    def points(self, key: str) -> tuple[tuple[float, float], ...]:
        value = self.raw(key)
        if not isinstance(value, list) or len(value) < 2:
            raise self.fail(key, "must be a list of at least 2 [x, y] points")
        out: list[tuple[float, float]] = []
        for point in value:
            if not isinstance(point, list) or len(point) != 2:
                raise self.fail(key, "each point must be [x, y]")
            x, y = (self.check_number(key, v, -math.inf, math.inf) for v in point)
            out.append((x, y))
        return tuple(out)

    def table(self, key: str, *, required: bool = False) -> Table | None:
        value = self.raw(key)
        if value is None:
            if required:
                raise self.missing(key)
            return None
        if key not in self._children:
            self._children[key] = Table(self.source, (*self.path, key), value)
        return self._children[key]

    def tables(self, key: str) -> Iterator[Table]:
        value = self.raw(key)
        if value is None:
            return
        if not isinstance(value, list):
            raise self.fail(key, f"must be an array of tables ([[{key}]])")
        for i, item in enumerate(value):
            yield Table(self.source, (*self.path, key, i), item)

    def only(self, allowed: Iterable[str]) -> None:
        """Refuse keys outside ``allowed`` before reading (a misspelt table name)."""
        allowed = tuple(allowed)
        for key in self.data:
            if key not in allowed:
                hint = did_you_mean(key, allowed) or f" (expected one of {', '.join(allowed)})"
                raise self.fail(key, f"unknown key{hint}")

    def done(self) -> None:
        """Refuse every key no getter asked for: a typo must not fall back to a default."""
        for key in self.data:
            if key not in self.asked:
                raise self.fail(key, f"unknown key{did_you_mean(key, self.asked)}")
