"""`stigmesh tags`: printed tags decode with the project's detector at their physical size.

Pages are rasterised through the same figures the PDF is written from
(``page_figure``), at a known resolution; every tag is decoded with
``safe_detector``, a tag printed in pieces after its pieces are joined as on
paper (each piece laid over its neighbour's glue strip).
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import pytest

from agents.perception.detect import mean_edge, safe_detector
from tools.tagsheet import (
    HEADER_MM,
    PAPERS,
    LayoutError,
    PrintTag,
    Sheet,
    layout,
    page_figure,
    tag_cells,
    write_pdf,
)

DPI = 150
PX_PER_MM = DPI / 25.4
Gray = npt.NDArray[np.uint8]

TAGS = [
    PrintTag(0, 0.200, "wall", "too large for A4: four pieces"),
    PrintTag(1, 0.020, "wall", "the smallest a site allows"),
    PrintTag(2, 0.045, "wall"),
    PrintTag(586, 0.060, "wall", "the last id"),
    *[PrintTag(100, 0.120, "target", f"face {k} of 4") for k in range(1, 5)],
    PrintTag(200, 0.080, "robot", "carried by hazel"),
]

SITE = """\
name = "lab"

[room]
size = [5.0, 4.0]

[[tags]]
id = 0
x = 0.625
y = 0.0
z = 0.21
yaw_deg = 90
size = 0.05

[[tags]]
id = 1
x = 0.0
y = 2.0
z = 0.21
yaw_deg = 0
size = 0.05
measured = false

[target]
tag_id = 100
size = 0.06

[[robot_tags]]
robot = "hazel"
tag_id = 200
size = 0.04
forward = -0.06
left = 0.0
height = 0.12
yaw_deg = 180
"""


def raster(sheet: Sheet, page: int) -> Gray:
    buf = io.BytesIO()
    page_figure(sheet, page).savefig(buf, format="png", dpi=DPI)
    image = cv2.imdecode(np.frombuffer(buf.getvalue(), np.uint8), cv2.IMREAD_GRAYSCALE)
    assert image is not None
    return np.asarray(image, dtype=np.uint8)


def joined(sheet: Sheet, pages: list[Gray], tag_id: int) -> Gray:
    """The pieces of one tag cut out (with their glue strips) and laid together."""
    parts = [p for p in sheet.placements if p.piece.tag.tag_id == tag_id]
    cell = parts[0].piece.tag.cell_mm
    pad = 2 * cell
    side = round((10 * cell + 2 * pad) * PX_PER_MM)
    canvas = np.full((side, side), 255, np.uint8)
    for p in sorted(parts, key=lambda q: (q.piece.row, q.piece.col)):
        piece = p.piece
        sx, sy = round(p.x * PX_PER_MM) - 1, round(p.y * PX_PER_MM) - 1
        w = round((p.x + piece.cut_width) * PX_PER_MM) + 1 - sx
        h = round((p.y + piece.cut_height) * PX_PER_MM) + 1 - sy
        dx = round((pad + piece.c0 * cell) * PX_PER_MM) - 1
        dy = round((pad + piece.r0 * cell) * PX_PER_MM) - 1
        src = pages[p.page][sy : sy + h, sx : sx + w]
        canvas[dy : dy + h, dx : dx + w] = np.minimum(canvas[dy : dy + h, dx : dx + w], src)
    return canvas


def decode(image: Gray) -> list[tuple[int, float, npt.NDArray[np.float64]]]:
    """(id, mean edge px, corners) of every tag decoded without a corrected bit."""
    found = []
    for d in safe_detector().detect(np.ascontiguousarray(image)):
        assert d.hamming == 0 and d.decision_margin > 50, (d.tag_id, d.decision_margin)
        corners = np.asarray(d.corners, dtype=np.float64)
        found.append((int(d.tag_id), mean_edge(corners), corners))
    return found


def test_bitmaps_are_the_simulators_tags() -> None:
    from worlds.camera import tag_image

    for tag_id in (0, 7, 100, 586):
        assert np.array_equal(tag_cells(tag_id), tag_image(tag_id, 1) < 128)
    with pytest.raises(ValueError, match=r"0\.\.586"):
        tag_cells(587)


@pytest.mark.parametrize("paper", ["a4", "letter"])
def test_every_tag_decodes_at_its_physical_size(paper: str) -> None:
    sheet = layout("lab", TAGS, PAPERS[paper])
    pages = [raster(sheet, k) for k in range(sheet.pages)]
    whole = {p.piece.tag.tag_id for p in sheet.placements if p.piece.whole}
    assert whole == {1, 2, 586, 100, 200}  # tag 0 (250 mm with its border) is in pieces
    seen: Counter[int] = Counter()
    errors: list[float] = []
    found = [f for image in pages for f in decode(image)]
    found += decode(joined(sheet, pages, 0))
    sizes = {t.tag_id: t.size for t in TAGS}
    for tag_id, edge, corners in found:
        seen[tag_id] += 1
        expected = sizes[tag_id] * 1000 * PX_PER_MM
        errors.append(abs(edge / expected - 1))
        # pupil-apriltags' first corner is the tag's top-right as printed: upright on paper
        top_right, top_left, bottom_left = corners[0], corners[1], corners[2]
        assert top_left[0] < top_right[0] and top_left[1] < bottom_left[1]
    assert seen == Counter(t.tag_id for t in TAGS)
    assert max(errors) < 0.01, errors
    for k, image in enumerate(pages):  # the 100 mm bar, on every page
        row = image[round((sheet.margin + 17.0) * PX_PER_MM)]
        dark = np.flatnonzero(row < 128)
        first = dark[0]
        run = dark[: np.argmax(np.diff(dark) > 1) + 1] if np.any(np.diff(dark) > 1) else dark
        assert first == pytest.approx(sheet.margin * PX_PER_MM, abs=1.5), k
        assert len(run) == pytest.approx(100 * PX_PER_MM, rel=0.01), k


def test_pieces_keep_to_cell_lines_and_the_page() -> None:
    sheet = layout("lab", [PrintTag(3, 0.2, "wall")], PAPERS["a4"])
    parts = [p.piece for p in sheet.placements]
    assert [(q.r0, q.r1, q.c0, q.c1) for q in parts] == [
        (0, 5, 0, 5), (0, 5, 5, 10), (5, 10, 0, 5), (5, 10, 5, 10)]
    assert [(q.flap_right, q.flap_bottom) for q in parts] == [
        (8.0, 8.0), (0.0, 8.0), (8.0, 0.0), (0.0, 0.0)]
    paper = sheet.paper
    for p in sheet.placements:
        assert sheet.margin <= p.x and p.x + p.piece.cut_width <= paper.width - sheet.margin
        assert sheet.margin + HEADER_MM <= p.y
        assert p.y + p.piece.cut_height <= paper.height - sheet.margin
    with pytest.raises(LayoutError, match=r"tag 9: its cells \(250 mm\) are larger"):
        layout("lab", [PrintTag(9, 2.0, "wall")], PAPERS["a4"])


def test_the_pdf_has_one_page_of_the_papers_size_per_sheet_page(tmp_path: Path) -> None:
    for paper, box in (("a4", (595.28, 841.89)), ("letter", (612.0, 792.0))):
        sheet = layout("lab", TAGS[1:4], PAPERS[paper])
        out = tmp_path / f"{paper}.pdf"
        write_pdf(sheet, out)
        boxes = re.findall(rb"/MediaBox \[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", out.read_bytes())
        assert len(boxes) == sheet.pages == 1
        assert [float(v) for v in boxes[0]] == pytest.approx(box, abs=0.01)


def tags_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", "tags", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_command_reads_a_site_or_an_arena(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "lab.toml"
    site.write_text(SITE)
    result = tags_cli(str(site), "--out", str(tmp_path / "lab.pdf"))  # the real entry point
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"wrote {tmp_path / 'lab.pdf'}: 7 tags of site lab on 2 A4")
    assert (tmp_path / "lab.pdf").read_bytes().startswith(b"%PDF")

    from tools.cli import main
    from worlds.arena import shipped_arena

    status = main(["tags", str(shipped_arena("two_cars")), "--out", str(tmp_path / "two.pdf"),
                   "--ids", "0-1,100", "--paper", "letter"])
    out = capsys.readouterr().out
    assert status == 0 and "6 tags of site two_cars" in out and "2 larger than a page" in out


def test_the_command_refuses_mistakes_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.cli import main

    def run(*args: str) -> tuple[int, str]:
        status = main(["tags", *args])
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        return status, err

    assert run(str(tmp_path / "none.toml")) == (
        2, f"stigmesh tags: {tmp_path}/none.toml: no such file\n")
    site = tmp_path / "lab.toml"
    site.write_text(SITE)
    for args, message in (
        (["--ids", "7"], "--ids: tag 7 is not in site lab"),
        (["--ids", "1-x"], "--ids: '1-x' is not an id or a range like 10-15"),
        (["--margin", "1"], "the margin must be 3..40 mm"),
    ):
        status, err = run(str(site), "--out", str(tmp_path / "x.pdf"), *args)
        assert status == 2 and message in err, err
    site.write_text(SITE.replace("yaw_deg = 90", "yaw_deg = 900"))
    status, err = run(str(site))
    assert status == 2 and "lab.toml:11: tags[0].yaw_deg: 900 is outside" in err
    site.write_bytes(b"\x00\xff")  # not text: the file is named
    status, err = run(str(site))
    assert status == 2 and err.startswith(f"stigmesh tags: {site}: cannot read: ")
    assert "utf-8" in err
    assert not (tmp_path / "x.pdf").exists()
