"""``stigmesh calibrate`` on checkerboards rendered through the arena's lens model."""

from __future__ import annotations

import argparse
import math
import socket
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from agents.perception.tagmap import Intrinsics, load_intrinsics
from protocol.mjpeg import encode_part, response_head
from tests.tools.boards import views
from tools.commands.calibrate import (
    EXIT_REFUSED,
    EXIT_SAVED,
    Calibration,
    CalibrationSession,
    Refusal,
    add_arguments,
    main,
)
from worlds.arena import load_arena, shipped_arena

ARENA_CAMERA = load_arena(shipped_arena("two_cars")).camera
LENS = Intrinsics(
    ARENA_CAMERA.width, ARENA_CAMERA.height, ARENA_CAMERA.fx, ARENA_CAMERA.fy,
    ARENA_CAMERA.cx, ARENA_CAMERA.cy, (ARENA_CAMERA.k1, ARENA_CAMERA.k2, 0.0, 0.0),
)  # fmt: skip


@pytest.fixture(scope="module")
def good_views() -> list[np.ndarray]:
    return views(LENS, 24, seed=1)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_recovers_the_lens_from_rendered_boards(good_views: list[np.ndarray]):
    session = CalibrationSession()
    messages = [session.offer(v).message for v in good_views]
    assert messages[0] == "view 1/15 accepted: board covers new area"
    assert session.views >= 15
    result = session.calibrate()
    assert isinstance(result, Calibration)
    print(f"\nfx {result.fx:.2f} fy {result.fy:.2f} cx {result.cx:.2f} cy {result.cy:.2f} "
          f"k1 {result.dist[0]:.4f} k2 {result.dist[1]:.4f} RMS {result.rms_px:.3f} px "
          f"over {result.views} views (truth fx = fy = 250, k1 -0.12, k2 0.02)")  # fmt: skip
    assert result.fx == pytest.approx(LENS.fx, rel=0.03)
    assert result.fy == pytest.approx(LENS.fy, rel=0.03)
    assert result.cx == pytest.approx(LENS.cx, abs=3.0)
    assert result.cy == pytest.approx(LENS.cy, abs=3.0)
    assert result.dist[0] == pytest.approx(-0.12, abs=0.03)
    assert result.rms_px < 1.0


def test_images_directory_writes_a_calibration_the_map_reads(
    tmp_path: Path, good_views: list[np.ndarray], capsys: pytest.CaptureFixture[str]
):
    folder = tmp_path / "shots"
    folder.mkdir()
    for k, image in enumerate(good_views):
        cv2.imwrite(str(folder / f"view{k:02d}.png"), image)
    cv2.imwrite(str(folder / "zz_blank.png"), np.full((240, 320), 128, np.uint8))
    (folder / "notes.txt").write_text("not an image")
    out = tmp_path / "walnut.toml"
    assert main(_args("--images", str(folder), "--out", str(out))) == EXIT_SAVED
    printed = capsys.readouterr().out
    assert "view00.png: view 1/15 accepted: board covers new area" in printed
    assert "zz_blank.png: rejected: no board found" in printed
    camera = load_intrinsics(out)
    assert camera.fx == pytest.approx(250.0, rel=0.03) and camera.width == 320


def test_too_few_views_are_refused(tmp_path: Path, good_views, capsys):
    folder = tmp_path / "few"
    folder.mkdir()
    for k, image in enumerate(good_views[:9]):
        cv2.imwrite(str(folder / f"v{k}.png"), image)
    out = tmp_path / "cam.toml"
    assert main(_args("--images", str(folder), "--out", str(out))) == EXIT_REFUSED
    assert not out.exists()
    assert "refused: too few views: 9 accepted, 15 needed" in capsys.readouterr().err


def test_a_board_that_is_not_flat_is_refused_above_1_px():
    session = CalibrationSession()
    for image in views(LENS, 22, seed=4, fold=math.radians(25)):
        session.offer(image)
    assert session.views >= 15
    result = session.calibrate()
    assert isinstance(result, Refusal), result
    print(f"\n{result.reason}")
    assert "is above 1 px: not saved" in result.reason


def test_repeated_views_are_not_counted_twice(good_views):
    session = CalibrationSession()
    assert session.offer(good_views[0]).accepted
    again = session.offer(good_views[0])
    assert not again.accepted and again.message == "rejected: same place and pose as view 1"
    with pytest.raises(ValueError):
        CalibrationSession(min_views=10)
    with pytest.raises(SystemExit):
        _args("--images", "x", "--views", "12")
    with pytest.raises(SystemExit):
        _args("--images", "x", "--max-rms", "1.5")


def test_guided_capture_from_a_camera_stream(tmp_path: Path, good_views, capsys):
    """The tool reads a car's MJPEG stream (a loopback stand-in) until it has its views."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    jpegs = [bytes(cv2.imencode(".jpg", v, [cv2.IMWRITE_JPEG_QUALITY, 90])[1]) for v in good_views]
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(response_head())
            seq = 0
            while not stop.is_set():
                seq += 1
                try:
                    conn.sendall(encode_part(jpegs[seq % len(jpegs)], seq * 80, 7, seq))
                except OSError:
                    return
                time.sleep(0.005)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    out = tmp_path / "cam.toml"
    try:
        code = main(_args("--camera", "127.0.0.1", "--port", str(port), "--interval", "0",
                          "--timeout", "20", "--out", str(out)))  # fmt: skip
    finally:
        stop.set()
        server.close()
        thread.join(2.0)
    printed = capsys.readouterr().out
    assert code == EXIT_SAVED, printed
    assert "view 15/15 accepted" in printed
    assert load_intrinsics(out).fx == pytest.approx(250.0, rel=0.03)
