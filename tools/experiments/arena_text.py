"""The arena file a run plays in: the scene's own arena file with what the scenario changes
written into its text, and the check that the text reads back to it.

Two changes: a hidden target's place (:func:`~tools.experiments.hiding.hidden_arena_text`
replaces its ``[target.motion]``) and a sweep's car constants (:func:`car_model_text` sets
keys of its ``[car_model]``, e.g. ``stigmesh sweep --over gyro=0``). The run directory keeps
the result as ``RUN_DIR/arena.toml``, which the world process and the replay read.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from protocol.tomlfile import FileError
from tools.experiments.hiding import check_hidden_arena_text, hidden_arena_text
from worlds.arena import Arena, parse_arena


def car_model_text(text: str, sets: Mapping[str, bool | float]) -> str:
    """An arena file's ``text`` with these ``[car_model]`` keys set (the table added at the
    end when the file has none; :func:`check_run_arena_text` reads it back)."""

    def value(v: bool | float) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else repr(float(v))

    lines = text.splitlines()
    given = [f"{k} = {value(v)}  # set by the scenario" for k, v in sets.items()]
    head = [i for i, t in enumerate(lines) if t.split("#")[0].strip() == "[car_model]"]
    if not head:
        return "\n".join([*lines, "", "[car_model]", *given]) + "\n"
    start = head[0]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")),
               len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # after the table's last line
    table = [t for t in lines[start:end] if t.split("#")[0].split("=")[0].strip() not in sets]
    return "\n".join([*lines[:start], *table, *given, *lines[end:]]) + "\n"


def run_arena_text(arena_file: str, place: tuple[float, float] | None,
                   car_model_sets: Mapping[str, bool | float], *, source: str,
                   line: int) -> str | None:
    """``arena_file`` with the hidden target at ``place`` (None: its own motion) and these
    car constants; None when neither changes it. ``source``, ``line``: the scenario's, for
    a ScenarioError (a FileError)."""
    if place is None and not car_model_sets:
        return None
    if place is not None:
        text = hidden_arena_text(arena_file, place, source=source, line=line)
    else:
        try:
            text = Path(arena_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise FileError(source, 0, f"cannot read the arena: {exc}") from None
    return car_model_text(text, car_model_sets) if car_model_sets else text


def check_run_arena_text(text: str, arena_file: str, arena: Arena, *, hidden: bool,
                         sets_car_model: bool, source: str, line: int) -> None:
    """``text`` reads back to ``arena``'s target (when ``hidden``) and car constants (when
    ``sets_car_model``: the scenario sets some); a FileError at ``source`` if not."""
    if hidden:
        check_hidden_arena_text(text, arena_file, arena.target, source=source, line=line)
    if sets_car_model:
        why = f"the arena ({arena_file}) with the scenario's car constants"
        try:
            again = parse_arena(text, arena_file, Path(arena_file).parent)
        except FileError as exc:
            raise FileError(source, 0, f"{why}: {exc}") from None
        if again.car_model != arena.car_model:
            raise FileError(source, 0, f"{why} does not read back to them")


__all__ = ["car_model_text", "check_run_arena_text", "run_arena_text"]
