"""``stigmesh tags SITE --out tags.pdf``: every tag of a site, printable at its physical size.

Each tag is printed with its id, the site's name and its intended size, cut
marks, and on every page a 100 mm scale bar to check that the printer did
not scale the page. A tag's size is the edge of its black square (8 of its
10 cells); the one-cell white border is part of the tag and is cut with it.
A tag too large for the paper is printed in pieces with glue strips.

SITE is a site file (protocol/SITE.md) or an arena (worlds/ARENA.md, a site
plus the simulator's parts). Wall tags, the target's tag four times (one per
face of its column) and robot tags are printed. Print at 100 % ("actual
size"), then measure the bar.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tools.tagsheet import PAPERS, LayoutError, PrintTag, layout, write_pdf

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TARGET_FACES = 4


@dataclass(frozen=True)
class SiteTags:
    """What a site says about its tags: its name and every tag to print."""

    name: str
    tags: tuple[PrintTag, ...]


class _Wall(Protocol):
    """A wall tag as an arena's ``TagSpec`` or a tag map's ``WorldTag`` has it."""

    @property
    def id(self) -> int: ...
    @property
    def size(self) -> float: ...
    @property
    def x(self) -> float | None: ...
    @property
    def y(self) -> float | None: ...
    @property
    def z(self) -> float | None: ...
    @property
    def yaw(self) -> float | None: ...
    @property
    def measured(self) -> bool: ...


def _wall_note(t: _Wall) -> str:
    if not t.measured or t.x is None or t.y is None or t.z is None or t.yaw is None:
        return "position not surveyed"
    facing = math.degrees(t.yaw)
    return f"centre x {t.x:.3f} y {t.y:.3f} z {t.z:.3f} m, facing {facing:.0f}\N{DEGREE SIGN}"


def _collect(walls: Iterable[_Wall], target: tuple[int, float] | None,
             robots: Iterable[tuple[str, int, float]]) -> tuple[PrintTag, ...]:
    out = [PrintTag(t.id, t.size, "wall", _wall_note(t)) for t in walls]
    if target is not None:
        tag_id, size = target
        out += [PrintTag(tag_id, size, "target", f"face {k + 1} of {TARGET_FACES}")
                for k in range(TARGET_FACES)]
    out += [PrintTag(i, size, "robot", f"carried by {robot}") for robot, i, size in robots]
    return tuple(out)


def site_tags(path: Path) -> SiteTags:
    """The tags of a site file (protocol/SITE.md) or of an arena (a site plus the simulator's
    parts). Raises :class:`~protocol.tomlfile.FileError` naming the file."""
    from protocol import tomlfile

    top = tomlfile.read(path)
    if "cars" in top.data:
        from worlds.arena import read_arena

        arena = read_arena(top)
        name, site = arena.name, arena.site
    else:
        from protocol.site import load_site

        site = load_site(path)  # read again: a site's reader takes the file, not a table
        name = site.name
    t = site.target
    robots = [(r.robot, r.tag_id, r.size) for r in site.robot_tags]
    return SiteTags(name, _collect(site.tags, None if t is None else (t.tag_id, t.size), robots))


def parse_ids(text: str) -> set[int]:
    """``"0,3,10-15"`` as a set of ids; ValueError with the offending part."""
    ids: set[int] = set()
    for raw in text.split(","):
        part = raw.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo > hi:
                    raise ValueError
                ids.update(range(lo, hi + 1))
            else:
                ids.add(int(part))
        except ValueError:
            raise ValueError(f"--ids: {part!r} is not an id or a range like 10-15") from None
    return ids


def select(tags: Sequence[PrintTag], ids: set[int] | None, site: str) -> list[PrintTag]:
    if ids is None:
        return list(tags)
    missing = sorted(ids - {t.tag_id for t in tags})
    if missing:
        raise ValueError(f"--ids: tag {missing[0]} is not in site {site}")
    return [t for t in tags if t.tag_id in ids]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("site", type=Path,
                   help="the site file (protocol/SITE.md), or an arena that holds one")
    p.add_argument("--out", type=Path, default=Path("tags.pdf"),
                   help="the PDF to write (default tags.pdf)")
    p.add_argument("--paper", choices=sorted(PAPERS), default="a4",
                   help="paper size (default a4)")
    p.add_argument("--margin", type=float, default=10.0,
                   help="mm left blank at each edge; most printers need 5 (default 10)")
    p.add_argument("--ids", default=None,
                   help="print only these tags, e.g. 0,3,10-15 (a reprint)")


def _fail(message: str, status: int = EXIT_USAGE) -> int:
    print(f"stigmesh tags: {message}", file=sys.stderr)
    return status


def main(args: argparse.Namespace) -> int:
    try:
        site = site_tags(args.site)
        ids = None if args.ids is None else parse_ids(args.ids)
        tags = select(site.tags, ids, site.name)
    except ValueError as exc:  # the site or arena file (FileError names it), or --ids
        return _fail(str(exc))
    if not tags:
        return _fail(f"site {site.name} has no tags to print")
    try:
        sheet = layout(site.name, tags, PAPERS[args.paper], args.margin)
    except LayoutError as exc:
        return _fail(f"{exc} (paper {args.paper}, margin {args.margin:g} mm)")
    try:
        write_pdf(sheet, args.out)
    except OSError as exc:
        return _fail(f"cannot write {args.out}: {exc.strerror or exc}", EXIT_FAILED)
    pieced = sorted({p.piece.tag.tag_id for p in sheet.placements if not p.piece.whole})
    note = (f"; {len(pieced)} larger than a page, in pieces (ids {', '.join(map(str, pieced))})"
            if pieced else "")
    print(f"wrote {args.out}: {len(tags)} tags of site {site.name} on {sheet.pages} "
          f"{sheet.paper.name} pages{note}. Print at 100 % and check the 100 mm bar.")
    return EXIT_OK
