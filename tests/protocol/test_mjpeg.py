from __future__ import annotations

import contextlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.mjpeg import (
    CameraFrame,
    FrameGate,
    FrameReason,
    FrameRejected,
    MjpegError,
    MjpegParser,
    MjpegReason,
    Part,
    encode_part,
    parse_frame_headers,
    response_head,
)

JPEG = b"\xff\xd8" + bytes(range(256)) * 3 + b"\xff\xd9"


def stream(n: int) -> bytes:
    return response_head() + b"".join(
        encode_part(JPEG[: 100 + i] + b"\xff\xd9", 1000 + 80 * i, 0xDEADBEEF, i) for i in range(n)
    )


def test_parser_reassembles_every_part_whatever_the_chunking() -> None:
    data = stream(20)
    rng = random.Random(3)
    for _ in range(20):
        parser, parts, i = MjpegParser(), [], 0
        while i < len(data):
            step = rng.randint(1, 300)
            parts += parser.feed(data[i : i + step])
            i += step
        frames = [parse_frame_headers(p) for p in parts]
        assert [f.seq for f in frames] == list(range(20))
        assert frames[3] == CameraFrame(1240, 0xDEADBEEF, 3, JPEG[:103] + b"\xff\xd9")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"HTTP/1.1 404 Not Found\r\n\r\n", MjpegReason.BAD_STATUS),
        (b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n\r\n", MjpegReason.BAD_CONTENT_TYPE),
        (b"HTTP/1.1 200 OK\r\nContent-Type: multipart/x-mixed-replace\r\n\r\n",
         MjpegReason.BAD_CONTENT_TYPE),
        (b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 5000, MjpegReason.HEAD_TOO_LARGE),
        (response_head() + b"--other\r\nContent-Length: 1\r\n\r\nx\r\n", MjpegReason.BAD_BOUNDARY),
        (response_head() + b"--stigmeshframe\r\nX-A: 1\r\n\r\n", MjpegReason.MISSING_LENGTH),
        (response_head() + b"--stigmeshframe\r\nContent-Length: 999999999\r\n\r\n",
         MjpegReason.PART_TOO_LARGE),
        (response_head() + b"--stigmeshframe\r\nContent-Length: 2\r\n\r\nabcd",
         MjpegReason.BAD_PART_END),
    ],
)
def test_framing_errors_have_their_reason(data: bytes, reason: MjpegReason) -> None:
    with pytest.raises(MjpegError) as info:
        MjpegParser().feed(data)
    assert info.value.reason == reason


@pytest.mark.parametrize(
    ("headers", "body", "reason"),
    [
        ({"x-boot-id": "1", "x-frame-seq": "1"}, JPEG, FrameReason.MISSING_HEADER),
        ({"x-capture-ms": "1", "x-frame-seq": "1"}, JPEG, FrameReason.MISSING_HEADER),
        ({"x-capture-ms": "1", "x-boot-id": "1"}, JPEG, FrameReason.MISSING_HEADER),
        ({"x-capture-ms": "soon", "x-boot-id": "1", "x-frame-seq": "1"}, JPEG,
         FrameReason.BAD_HEADER_VALUE),
        ({"x-capture-ms": "-5", "x-boot-id": "1", "x-frame-seq": "1"}, JPEG,
         FrameReason.BAD_HEADER_VALUE),
        ({"x-capture-ms": "1", "x-boot-id": "1", "x-frame-seq": "1"}, b"GIF89a....",
         FrameReason.CORRUPT_JPEG),
    ],
)
def test_bad_parts_are_rejected_with_their_reason(
    headers: dict[str, str], body: bytes, reason: FrameReason
) -> None:
    with pytest.raises(FrameRejected) as info:
        parse_frame_headers(Part(headers, body))
    assert info.value.reason == reason


def test_gate_rejects_other_boots_stale_future_and_replayed_frames() -> None:
    gate = FrameGate(max_age=0.25)
    offset = 100.0  # local = car + 100 s

    def to_local(t: float) -> float:
        return t + offset

    f = CameraFrame(capture_ms=5000, boot_id=7, seq=1, jpeg=JPEG)
    ok = gate.check(f, expected_boot=7, received_at=105.1, car_to_local=to_local)
    assert ok.synchronized and ok.t_capture == pytest.approx(105.0)
    cases = [
        (CameraFrame(5100, 8, 2, JPEG), 105.2, FrameReason.WRONG_BOOT),
        (CameraFrame(5100, 7, 1, JPEG), 105.2, FrameReason.OLD_SEQ),
        (CameraFrame(5100, 7, 3, JPEG), 105.4, FrameReason.STALE_FRAME),
        (CameraFrame(5500, 7, 4, JPEG), 105.4, FrameReason.FUTURE_FRAME),
    ]
    for frame, at, reason in cases:
        with pytest.raises(FrameRejected) as info:
            gate.check(frame, expected_boot=7, received_at=at, car_to_local=to_local)
        assert info.value.reason == reason
    unsynced = gate.check(CameraFrame(1, 7, 9, JPEG), 7, received_at=200.0, car_to_local=None)
    assert not unsynced.synchronized and unsynced.t_capture == 200.0


def test_gate_refuses_a_freshness_limit_looser_than_the_camera_timeout() -> None:
    with pytest.raises(ValueError):
        FrameGate(max_age=0.5)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.integers(min_value=1, max_value=64))
def test_fuzz_parser_raises_only_its_own_errors(junk: bytes, step: int) -> None:
    for data in (junk, response_head() + junk, stream(2)[: len(junk)] + junk):
        parser = MjpegParser(max_part_bytes=4096)
        try:
            for i in range(0, len(data), step):
                for part in parser.feed(data[i : i + step]):
                    with contextlib.suppress(FrameRejected):
                        parse_frame_headers(part)
        except MjpegError:
            pass
