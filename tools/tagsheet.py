"""Printable tag36h11 sheets at physical size: bitmaps, page layout, matplotlib pages.

Size convention (the project's, worlds/ARENA.md and agents/perception/tagmap.py):
a tag's ``size`` is the edge of its **black square**, 8 of the tag's 10
cells. The tag as printed is 10 cells: the black square plus a one-cell
white border that the detector needs, so it is cut on the marks outside that
border and its outer edge is ``size * 10 / 8``.

Bitmaps come from OpenCV's ``DICT_APRILTAG_36h11`` (the same call the
simulator's textures use), upright as the project's detector reads them.
Cells are drawn as vector rectangles, so a page is exact at any resolution.
A tag too large for the page is split along cell lines into pieces; a piece
that has a neighbour to its right or below carries a glue strip there (the
next cell's print, up to 8 mm), which goes under that neighbour up to the
grey join ticks, so a slightly short cut leaves no white seam.

:func:`layout` places everything in millimetres; :func:`page_figure` draws one
page; :func:`write_pdf` saves every page with matplotlib's ``PdfPages``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.patches import PathPatch, Rectangle
from matplotlib.path import Path as MplPath

TAG_CELLS = 10  # tag36h11 with its white border
BLACK_CELLS = 8  # the black square: a one-cell black border around 6x6 data cells
MAX_TAG_ID = 586
MM_PER_INCH = 25.4
PT_MM = MM_PER_INCH / 72.0  # one typographic point in mm

HEADER_MM = 30.0  # title, convention, scale bar
MARK_GAP_MM = 1.5  # cut marks start this far outside a corner
MARK_LEN_MM = 5.0
SLOT_PAD_MM = MARK_GAP_MM + MARK_LEN_MM + 0.5  # around a cut rectangle
LABEL_MM = 8.0  # two lines of text under a cut rectangle
MAX_FLAP_MM = 8.0  # glue strip of a piece under its right and lower neighbours
SCALE_BAR_MM = 100.0


@dataclass(frozen=True)
class Paper:
    name: str
    width: float  # mm
    height: float  # mm


PAPERS = {"a4": Paper("A4", 210.0, 297.0), "letter": Paper("Letter", 215.9, 279.4)}


@dataclass(frozen=True)
class PrintTag:
    """One tag to print: ``size`` is the black square's edge in metres."""

    tag_id: int
    size: float
    role: str  # "wall", "target", "robot"
    note: str = ""  # where it goes, in a few words

    @property
    def cell_mm(self) -> float:
        return self.size * 1000.0 / BLACK_CELLS

    @property
    def outer_mm(self) -> float:
        return self.cell_mm * TAG_CELLS


@dataclass(frozen=True)
class Piece:
    """Rows ``r0:r1`` and columns ``c0:c1`` (cells) of a tag; the whole tag is one piece."""

    tag: PrintTag
    r0: int
    r1: int
    c0: int
    c1: int
    grid: tuple[int, int] = (1, 1)  # pieces per column, per row
    row: int = 0
    col: int = 0

    @property
    def width(self) -> float:
        return (self.c1 - self.c0) * self.tag.cell_mm

    @property
    def height(self) -> float:
        return (self.r1 - self.r0) * self.tag.cell_mm

    @property
    def whole(self) -> bool:
        return self.grid == (1, 1)

    @property
    def flap(self) -> float:
        """The glue strip's width, mm: the next cell's print, at most 8 mm."""
        return min(self.tag.cell_mm, MAX_FLAP_MM)

    @property
    def flap_right(self) -> float:
        return self.flap if self.c1 < TAG_CELLS else 0.0

    @property
    def flap_bottom(self) -> float:
        return self.flap if self.r1 < TAG_CELLS else 0.0

    @property
    def cut_width(self) -> float:
        """The width cut out: the piece and its glue strip."""
        return self.width + self.flap_right

    @property
    def cut_height(self) -> float:
        return self.height + self.flap_bottom


@dataclass(frozen=True)
class Placement:
    page: int  # 0-based
    x: float  # mm from the page's left edge to the piece's left edge
    y: float  # mm from the page's top edge to the piece's top edge
    piece: Piece


@dataclass(frozen=True)
class Sheet:
    site: str
    paper: Paper
    margin: float
    pages: int
    placements: tuple[Placement, ...]


class LayoutError(ValueError):
    """A tag cannot be printed on this paper."""


@cache
def tag_cells(tag_id: int) -> npt.NDArray[np.bool_]:
    """10x10 booleans, True = black, row 0 at the top, as the tag is seen upright."""
    if not 0 <= tag_id <= MAX_TAG_ID:
        raise ValueError(f"tag36h11 ids are 0..{MAX_TAG_ID}, got {tag_id}")
    dictionary = cv2.aruco.getPredefinedDictionary(cv2.aruco.DICT_APRILTAG_36h11)
    marker = cv2.aruco.generateImageMarker(dictionary, tag_id, BLACK_CELLS)
    cells = np.zeros((TAG_CELLS, TAG_CELLS), dtype=bool)
    cells[1:-1, 1:-1] = marker < 128
    cells.setflags(write=False)
    return cells


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    """``n`` cells into ``parts`` runs along cell lines, the larger runs first."""
    base, extra = divmod(n, parts)
    bounds, start = [], 0
    for k in range(parts):
        size = base + (1 if k < extra else 0)
        bounds.append((start, start + size))
        start += size
    return bounds


def pieces(tag: PrintTag, max_w: float, max_h: float) -> list[Piece]:
    """The tag whole if it fits ``max_w`` x ``max_h`` mm, else the fewest k x k pieces."""
    for k in range(1, TAG_CELLS + 1):
        extent = math.ceil(TAG_CELLS / k) * tag.cell_mm
        if k > 1:
            extent += min(tag.cell_mm, MAX_FLAP_MM)
        if extent <= max_w and extent <= max_h:
            spans = _split(TAG_CELLS, k)
            return [
                Piece(tag, r0, r1, c0, c1, (k, k), i, j)
                for i, (r0, r1) in enumerate(spans)
                for j, (c0, c1) in enumerate(spans)
            ]
    raise LayoutError(
        f"tag {tag.tag_id}: its cells ({tag.cell_mm:.0f} mm) are larger than the printable area"
    )


def layout(site: str, tags: Sequence[PrintTag], paper: Paper, margin: float = 10.0) -> Sheet:
    """Place every tag (or its pieces) on pages, rows of slots left to right, top to bottom."""
    if not 3.0 <= margin <= 40.0:
        raise LayoutError(f"the margin must be 3..40 mm, got {margin:g}")
    area_w = paper.width - 2 * margin
    area_h = paper.height - 2 * margin - HEADER_MM
    max_w, max_h = area_w - 2 * SLOT_PAD_MM, area_h - 2 * SLOT_PAD_MM - LABEL_MM
    items: list[Piece] = []
    for tag in sorted(tags, key=lambda t: (-t.size, t.role != "wall", t.tag_id)):
        items.extend(pieces(tag, max_w, max_h))
    placements: list[Placement] = []
    page, x, y, row_h = 0, 0.0, 0.0, 0.0
    for item in items:
        slot_w = item.cut_width + 2 * SLOT_PAD_MM
        slot_h = item.cut_height + 2 * SLOT_PAD_MM + LABEL_MM
        if x + slot_w > area_w + 1e-9:  # next row
            x, y, row_h = 0.0, y + row_h, 0.0
        if y + slot_h > area_h + 1e-9:  # next page
            page, x, y, row_h = page + 1, 0.0, 0.0, 0.0
        placements.append(
            Placement(page, margin + x + SLOT_PAD_MM, margin + HEADER_MM + y + SLOT_PAD_MM, item)
        )
        x += slot_w
        row_h = max(row_h, slot_h)
    return Sheet(site, paper, margin, page + 1 if placements else 0, tuple(placements))


# --------------------------------------------------------------------------- drawing


def _black_path(piece: Piece, x0: float, y0: float) -> MplPath | None:
    """The piece's black cells, and those of its glue strips, as one compound path of
    row runs (no seams between cells); the strips are cut to their width."""
    cells = tag_cells(piece.tag.tag_id)
    c = piece.tag.cell_mm
    r_end = piece.r1 + (1 if piece.flap_bottom else 0)
    c_end = piece.c1 + (1 if piece.flap_right else 0)
    x_max, y_max = x0 + piece.cut_width, y0 + piece.cut_height
    verts: list[tuple[float, float]] = []
    codes: list[np.uint8] = []
    for r in range(piece.r0, r_end):
        col = piece.c0
        while col < c_end:
            if not cells[r, col]:
                col += 1
                continue
            end = col
            while end < c_end and cells[r, end]:
                end += 1
            left, right = x0 + (col - piece.c0) * c, min(x0 + (end - piece.c0) * c, x_max)
            top, bottom = y0 + (r - piece.r0) * c, min(y0 + (r + 1 - piece.r0) * c, y_max)
            verts += [(left, top), (right, top), (right, bottom), (left, bottom), (left, top)]
            codes += [MplPath.MOVETO, MplPath.LINETO, MplPath.LINETO, MplPath.LINETO,
                      MplPath.CLOSEPOLY]
            col = end
    return MplPath(verts, codes) if verts else None


def _cut_marks(ax: Axes, x: float, y: float, piece: Piece) -> None:
    """An L of two short lines outside each corner of the cut; grey join ticks where a
    glue strip starts (the neighbour's edge goes there)."""
    g, n = MARK_GAP_MM, MARK_LEN_MM
    w, h = piece.cut_width, piece.cut_height
    for cx, sx in ((x, -1.0), (x + w, 1.0)):
        for cy, sy in ((y, -1.0), (y + h, 1.0)):
            # along the horizontal edge's line, and along the vertical edge's line
            ax.plot([cx + sx * g, cx + sx * (g + n)], [cy, cy], color="black", lw=0.5)
            ax.plot([cx, cx], [cy + sy * g, cy + sy * (g + n)], color="black", lw=0.5)
    if piece.flap_right:
        jx = x + piece.width
        ax.plot([jx, jx], [y - g, y - g - n], color="0.5", lw=0.5)
        ax.plot([jx, jx], [y + h + g, y + h + g + n], color="0.5", lw=0.5)
    if piece.flap_bottom:
        jy = y + piece.height
        ax.plot([x - g, x - g - n], [jy, jy], color="0.5", lw=0.5)
        ax.plot([x + w + g, x + w + g + n], [jy, jy], color="0.5", lw=0.5)


def _piece_label(p: Placement) -> tuple[str, str]:
    tag, piece = p.piece.tag, p.piece
    size = f"{tag.size * 1000:g} mm black square"
    head = f"tag {tag.tag_id} \N{MIDDLE DOT} {size} \N{MIDDLE DOT} {tag.role}"
    if tag.note:
        head += f" \N{MIDDLE DOT} {tag.note}"
    if piece.whole:
        return head, "\N{UPWARDS ARROW} this side up; cut on the marks"
    rows, cols = piece.grid
    where = f"piece row {piece.row + 1}/{rows}, column {piece.col + 1}/{cols} (row 1 at the top)"
    strips = [side for side, w in (("right", piece.flap_right), ("bottom", piece.flap_bottom)) if w]
    if not strips:
        return head, f"{where}; cut on the black marks; goes over its neighbours' strips"
    which = " and ".join(strips) + (" strips go" if len(strips) > 1 else " strip goes")
    return head, (f"{where}; cut on the black marks; the {which} under the next piece, "
                  "up to the grey ticks")


def page_figure(sheet: Sheet, page: int) -> Figure:
    """One page as a matplotlib figure at the paper's size, drawn in mm (y down)."""
    paper = sheet.paper
    fig = Figure(figsize=(paper.width / MM_PER_INCH, paper.height / MM_PER_INCH),
                 facecolor="white")
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(0.0, paper.width)
    ax.set_ylim(paper.height, 0.0)
    ax.set_axis_off()
    m = sheet.margin
    ax.text(m, m, f"stigmesh tags \N{MIDDLE DOT} site {sheet.site} \N{MIDDLE DOT} tag36h11 "
            f"\N{MIDDLE DOT} {paper.name} \N{MIDDLE DOT} page {page + 1} of {sheet.pages}",
            fontsize=9, va="top", ha="left", weight="bold")
    ax.text(m, m + 5.0, "A tag's size is the edge of its black square (8 of its 10 cells); "
            "the white border (1 cell) belongs to the tag.", fontsize=7.5, va="top")
    ax.text(m, m + 9.0, "Print at 100 % (actual size, never fit-to-page). The bar below must "
            "measure exactly 100 mm; if it does not, do not use these tags.",
            fontsize=7.5, va="top")
    bar_y = m + 16.0
    ax.add_patch(Rectangle((m, bar_y), SCALE_BAR_MM, 2.0, facecolor="black", edgecolor="none"))
    for k in range(11):
        tick = 3.0 if k % 5 == 0 else 1.5
        ax.plot([m + 10.0 * k] * 2, [bar_y + 2.0, bar_y + 2.0 + tick], color="black", lw=0.5)
    for k, label in ((0, "0"), (5, "50"), (10, "100 mm")):
        ax.text(m + 10.0 * k, bar_y + 5.5, label, fontsize=6.5, va="top", ha="center")
    for p in sheet.placements:
        if p.page != page:
            continue
        piece = p.piece
        path = _black_path(piece, p.x, p.y)
        if path is not None:
            ax.add_patch(PathPatch(path, facecolor="black", edgecolor="none", lw=0))
        _inner_label(ax, p, sheet.site)
        _cut_marks(ax, p.x, p.y, piece)
        head, tail = _piece_label(p)
        below = p.y + piece.cut_height + SLOT_PAD_MM
        ax.text(p.x, below, head, fontsize=6.5, va="top", ha="left")
        ax.text(p.x, below + 3.2, tail, fontsize=6, va="top", ha="left", color="0.3")
    return fig


def _inner_label(ax: Axes, p: Placement, site: str) -> None:
    """Id, size and site, small and grey, in the outer half of the bottom white border.

    It reads upright when the tag is mounted the right way up; on a pieced tag it
    is clipped to each piece, so it reads whole once the pieces are joined.
    """
    piece, tag = p.piece, p.piece.tag
    c = tag.cell_mm
    if c < 4.0 or piece.r1 != TAG_CELLS:
        return
    fontsize = min(0.3 * c / PT_MM, 8.0)
    tag_x = p.x - piece.c0 * c  # where the whole tag's left edge would be
    tag_y = p.y - piece.r0 * c
    dot = " \N{MIDDLE DOT} "
    label = ax.text(
        tag_x + 1.2 * c, tag_y + 9.7 * c, f"id {tag.tag_id}{dot}{tag.size * 1000:g} mm{dot}{site}",
        fontsize=fontsize, va="center", ha="left", color="0.55",
    )
    label.set_clip_path(Rectangle((p.x, p.y), piece.width, piece.height, transform=ax.transData))


def write_pdf(sheet: Sheet, path: Path) -> None:
    """Every page of ``sheet`` into one PDF whose pages are exactly the paper's size."""
    meta = {"Title": f"stigmesh tags: {sheet.site}", "Creator": "stigmesh tags",
            "CreationDate": None}
    with PdfPages(path, metadata=meta) as pdf:
        for page in range(sheet.pages):
            pdf.savefig(page_figure(sheet, page))
