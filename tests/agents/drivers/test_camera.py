"""The camera driver: frame checks with crafted bytes, newest-frame-only under a slow pipeline."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import cv2
import numpy as np
import pytest

from agents.drivers.camera import (
    STALE_AT_WORKER,
    SUPERSEDED,
    CameraDriver,
)
from agents.observations import ObservationBatch
from agents.perception.pipeline import Pipeline, PredictedPose
from agents.perception.records import FrameResult
from protocol.mjpeg import MjpegError, encode_part, response_head
from tests.agents.perception.scenes import wall_arena
from tools.agent_config import simulated_tag_map

BOOT = 0xABCD1234
OLD_BOOT = 0x11111111


def _jpeg() -> bytes:
    image = np.full((240, 320), 200, np.uint8)
    cv2.rectangle(image, (100, 80), (220, 160), 40, -1)
    ok, buf = cv2.imencode(".jpg", image)
    assert ok
    return bytes(buf)


JPEG = _jpeg()


def _part(headers: dict[str, str], body: bytes) -> bytes:
    head = "--stigmeshframe\r\nContent-Type: image/jpeg\r\n"
    head += f"Content-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode() + b"\r\n" + body + b"\r\n"


class Recorder:
    def __init__(self) -> None:
        self.batches: list[tuple[ObservationBatch, dict[str, Any]]] = []
        self.logs: list[tuple[str, dict[str, Any]]] = []

    def on_batch(self, batch: ObservationBatch, info: dict[str, Any]) -> None:
        self.batches.append((batch, info))

    def log(self, event: str, **fields: Any) -> None:
        self.logs.append((event, fields))


@pytest.fixture(scope="module")
def pipeline() -> Pipeline:
    return Pipeline(simulated_tag_map(wall_arena()))


def _driver(pipeline: Pipeline, rec: Recorder, car_to_local=lambda u: u, **kw) -> CameraDriver:
    return CameraDriver("127.0.0.1", pipeline, lambda: BOOT, car_to_local, rec.on_batch,
                        rec.log, **kw)  # fmt: skip


def test_crafted_parts_are_rejected_by_reason_and_counted(pipeline: Pipeline):
    rec = Recorder()
    driver = _driver(pipeline, rec, clock=lambda: 50.0)
    now = 50.0
    good = {"X-Capture-Ms": "49990", "X-Boot-Id": f"{BOOT:08x}"}
    stream = response_head()
    stream += _part({**good, "X-Frame-Seq": "1"}, JPEG)  # accepted
    stream += _part({"X-Boot-Id": f"{BOOT:08x}", "X-Frame-Seq": "2"}, JPEG)  # no capture time
    stream += _part({**good, "X-Frame-Seq": "3"}, b"GIF89a" + JPEG[6:])  # no JPEG SOI marker
    stream += _part({**good, "X-Boot-Id": f"{OLD_BOOT:08x}", "X-Frame-Seq": "9"}, JPEG)
    stream += _part({**good, "X-Frame-Seq": "1"}, JPEG)  # a replay of seq 1
    stream += _part({"X-Capture-Ms": "49000", "X-Boot-Id": f"{BOOT:08x}", "X-Frame-Seq": "4"},
                    JPEG)  # 1 s old  # fmt: skip
    stream += _part({"X-Capture-Ms": "49995", "X-Boot-Id": "zz", "X-Frame-Seq": "5"}, JPEG)
    for k in range(0, len(stream), 700):  # in pieces, as TCP delivers it
        driver.feed(stream[k : k + 700], now)
    stats = driver.stats()
    assert stats["parts"] == 7 and stats["accepted"] == 1
    assert stats["rejected"] == {
        "missing_header": 1,
        "corrupt_jpeg": 1,
        "wrong_boot": 1,
        "old_seq": 1,
        "stale_frame": 1,
        "bad_header_value": 1,
    }
    assert driver.process_newest() and len(rec.batches) == 1
    batch, info = rec.batches[0]
    assert info["seq"] == 1 and info["synchronized"] and batch.t_capture == pytest.approx(49.99)
    assert info["transport_ms"] == pytest.approx(10.0)
    for key in ("t_receipt", "t_taken", "t_decoded", "t_detected", "t_posed", "t_done"):
        assert isinstance(info[key], float)
    assert info["t_decoded"] <= info["t_detected"] <= info["t_posed"] <= info["t_done"]


def _segments_through_sof(jpeg: bytes) -> bytes:
    """The JPEG from SOI through its frame header (SOF0), without tables or scan."""
    i = 2
    while True:
        marker, length = jpeg[i + 1], int.from_bytes(jpeg[i + 2 : i + 4], "big")
        i += 2 + length
        if marker == 0xC0:
            return jpeg[:i]


def _bomb() -> bytes:
    """The 333-byte JPEG of an 8x8 image whose frame header says 32000x32000."""
    ok, buf = cv2.imencode(".jpg", np.zeros((8, 8), np.uint8))
    assert ok
    small = bytearray(buf)
    at = len(_segments_through_sof(bytes(small))) - 8  # SOF0 ends: height, width, 1 component
    assert small[at : at + 4] == bytes([0, 8, 0, 8])
    small[at : at + 4] = (32000).to_bytes(2, "big") * 2
    return bytes(small)


def test_a_decompression_bomb_is_refused_before_decoding(pipeline: Pipeline):
    bomb = _bomb()
    assert len(bomb) == 333
    rec = Recorder()
    driver = _driver(pipeline, rec, clock=lambda: 50.0)
    head = {"X-Capture-Ms": "49990", "X-Boot-Id": f"{BOOT:08x}"}
    driver.feed(response_head() + _part({**head, "X-Frame-Seq": "1"}, bomb), 50.0)
    stats = driver.stats()  # refused on its header: it never reaches the decoder
    assert stats["rejected"] == {"frame_size": 1} and not stats["pending"]
    assert not driver.process_newest()
    big = np.full((480, 640), 90, np.uint8)  # a real JPEG of another size is refused too
    driver.feed(_part({**head, "X-Frame-Seq": "2"}, bytes(cv2.imencode(".jpg", big)[1])), 50.0)
    driver.feed(_part({**head, "X-Frame-Seq": "3"}, JPEG), 50.0)  # the camera's own size
    stats = driver.stats()
    assert stats["rejected"] == {"frame_size": 2} and stats["accepted"] == 1


def test_a_part_opencv_cannot_decode_is_a_corrupt_jpeg(pipeline: Pipeline):
    rec = Recorder()
    driver = _driver(pipeline, rec, clock=lambda: 50.0)
    garbage = _segments_through_sof(JPEG) + b"\xff\xd9"  # the right size, and no image
    stream = response_head() + _part(
        {"X-Capture-Ms": "49990", "X-Boot-Id": f"{BOOT:08x}", "X-Frame-Seq": "1"}, garbage
    )
    driver.feed(stream, 50.0)
    assert driver.stats()["accepted"] == 1
    assert driver.process_newest()
    assert rec.batches == [] and driver.stats()["rejected"] == {"corrupt_jpeg": 1}


def test_previous_boot_and_unsynchronised_clock(pipeline: Pipeline):
    rec = Recorder()
    boot = [OLD_BOOT]
    driver = CameraDriver("127.0.0.1", pipeline, lambda: boot[0], lambda u: None,
                          rec.on_batch, rec.log, clock=lambda: 7.0)  # fmt: skip
    head = response_head()
    part = _part({"X-Capture-Ms": "123", "X-Boot-Id": f"{BOOT:08x}", "X-Frame-Seq": "1"}, JPEG)
    driver.feed(head + part, 7.0)  # telemetry still reports the previous boot
    assert driver.stats()["rejected"] == {"wrong_boot": 1}
    boot[0] = BOOT
    driver.feed(part, 7.0)
    assert driver.process_newest()
    batch, info = rec.batches[0]
    assert not batch.synchronized and batch.t_capture == 7.0  # the receipt time, flagged
    assert not info["synchronized"]


def test_a_broken_stream_raises_for_a_reconnect(pipeline: Pipeline):
    driver = _driver(pipeline, Recorder())
    with pytest.raises(MjpegError):
        driver.feed(response_head() + b"--otherboundary\r\n\r\n", 1.0)


def test_only_the_newest_frame_waits(pipeline: Pipeline):
    rec = Recorder()
    clock = [50.0]
    driver = _driver(pipeline, rec, clock=lambda: clock[0])
    driver.feed(response_head(), 50.0)
    for seq in (1, 2, 3):
        driver.feed(encode_part(JPEG, 49990 + seq, BOOT, seq), 50.0)
    stats = driver.stats()
    assert stats["accepted"] == 3 and stats["dropped"] == 2 and stats["pending"]
    assert driver.process_newest() and not driver.process_newest()
    assert [info["seq"] for _, info in rec.batches] == [3]
    # a frame that waited past the freshness limit is not processed
    driver.feed(encode_part(JPEG, 49995, BOOT, 4), 50.0)
    clock[0] = 50.4
    assert driver.process_newest()
    assert len(rec.batches) == 1 and driver.stats()["rejected"][STALE_AT_WORKER] == 1


class SlowPipeline(Pipeline):
    def __init__(self, base: Pipeline, delay: float) -> None:
        super().__init__(base.map, base.params)
        self.delay = delay

    def process(
        self,
        image: np.ndarray,
        t_capture: float,
        synchronized: bool,
        predicted: PredictedPose | None = None,
    ) -> FrameResult:
        time.sleep(self.delay)
        return super().process(image, t_capture, synchronized, predicted)


def _serve(server: socket.socket, bursts: list[range], gap: float, offset: float) -> None:
    """One connection per burst of sequence numbers, a frame every ``gap`` s."""
    for burst in bursts:
        conn, _ = server.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(response_head())
            for seq in burst:
                capture_ms = int((time.monotonic() + offset) * 1000)
                conn.sendall(encode_part(JPEG, capture_ms, BOOT, seq))
                time.sleep(gap)
            time.sleep(0.15)


def test_slow_pipeline_drops_frames_never_queues_and_reconnects(pipeline: Pipeline):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    offset = 1000.0  # car uptime = local monotonic + 1000 s
    bursts = [range(1, 31), range(31, 61)]
    thread = threading.Thread(target=_serve, args=(server, bursts, 0.005, offset), daemon=True)
    thread.start()
    rec = Recorder()
    driver = CameraDriver(
        "127.0.0.1", SlowPipeline(pipeline, 0.05), lambda: BOOT, lambda u: u - offset,
        rec.on_batch, rec.log, port=port, backoff=(0.02, 0.1),
    )  # fmt: skip
    driver.start()
    try:
        thread.join(10.0)
        deadline = time.monotonic() + 3.0
        while driver.stats()["pending"] and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
    finally:
        driver.stop()
        server.close()
    stats = driver.stats()
    seqs = [info["seq"] for _, info in rec.batches]
    print(f"\n60 frames at 200 fps, pipeline 50 ms: accepted {stats['accepted']}, processed "
          f"{stats['processed']}, dropped {stats['dropped']}, seqs {seqs}")  # fmt: skip
    assert stats["connects"] >= 2 and stats["rejected"].get("stream_closed", 0) >= 1
    assert stats["accepted"] == 60
    assert seqs == sorted(seqs) and len(seqs) < 30  # strictly newer each time, most skipped
    assert stats["dropped"] == stats["accepted"] - stats["processed"]
    assert seqs[-1] == 60  # the newest frame is the one left to process
    waits = [info["wait_ms"] for _, info in rec.batches]
    assert max(waits) < 100.0  # a frame waits at most about one pipeline run, never a queue
    assert stats["rejected"].get(SUPERSEDED, 0) == stats["dropped"]


def _trickle(server: socket.socket, stop: threading.Event, gap: float) -> None:
    """Accept one client and send it an endless part, a byte every ``gap`` s."""
    server.settimeout(10.0)
    try:
        conn, _ = server.accept()
    except TimeoutError:
        return
    with conn:
        conn.recv(4096)
        head = encode_part(JPEG, 1, BOOT, 1)
        conn.sendall(response_head() + head[: head.index(b"\r\n\r\n") + 4])
        for byte in JPEG:
            if stop.wait(gap):
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return


def test_a_trickling_stream_is_dropped_at_the_frame_deadline(pipeline: Pipeline):
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    thread = threading.Thread(target=_trickle, args=(server, stop, 0.05), daemon=True)
    thread.start()
    dropped = threading.Event()
    reasons: list[str] = []

    def log(event: str, **fields: Any) -> None:
        if event == "camera_disconnected":
            reasons.append(fields["reason"])
            dropped.set()

    driver = CameraDriver(
        "127.0.0.1", pipeline, lambda: BOOT, lambda u: u, Recorder().on_batch, log,
        port=server.getsockname()[1], frame_timeout=1.0, backoff=(5.0, 5.0),
    )  # fmt: skip
    driver.start()
    began = time.monotonic()
    try:
        # a byte every 50 ms never lets a read time out; the part's deadline does
        assert dropped.wait(8.0), "the trickling stream held the connection"
        took = time.monotonic() - began
    finally:
        stop.set()
        driver.stop()
        thread.join(5.0)
        server.close()
    assert reasons[0] == "stream_stalled" and took < 4.0
    assert driver.stats()["parts"] == 0
