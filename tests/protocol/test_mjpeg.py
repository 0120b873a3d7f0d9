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
    jpeg_size,
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


def _jpeg(width: int, height: int, before_sof: bytes = b"") -> bytes:
    """A JPEG's header as an encoder writes it (APP0, SOF0), then a scan and EOI."""
    app0 = b"\xff\xe0\x00\x10JFIF\x00" + bytes(9)
    sof = (b"\xff\xc0\x00\x0b\x08" + height.to_bytes(2, "big") + width.to_bytes(2, "big")
           + b"\x01\x01\x11\x00")  # fmt: skip
    sos = b"\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00" + bytes(40)
    return b"\xff\xd8" + app0 + before_sof + sof + sos + b"\xff\xd9"


def test_jpeg_size_is_read_from_the_frame_header_not_from_lookalikes() -> None:
    assert jpeg_size(_jpeg(320, 240)) == (320, 240)
    fake = b"\xff\xc0\x00\x0b\x08\x7d\x00\x7d\x00\x01\x01\x11\x00"  # says 32000x32000
    comment = b"\xff\xfe" + (2 + len(fake)).to_bytes(2, "big") + fake  # inside a COM segment
    assert jpeg_size(_jpeg(320, 240, comment + b"\xff\xff")) == (320, 240)  # and fill bytes
    assert jpeg_size(_jpeg(32000, 32000)) == (32000, 32000)


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xd8\xff\xd9",  # no frame header at all
        _jpeg(320, 240)[:30],  # truncated inside the frame header
        b"\xff\xd8\xff\xda\x00\x08" + _jpeg(320, 240)[2:],  # a scan before the frame header
        b"\xff\xd8\x00" + _jpeg(320, 240)[2:],  # not a marker where one must be
        b"\xff\xd8\xff\xe0\x00\x01" + _jpeg(320, 240)[2:],  # a segment length under 2
        b"\xff\xd8\xff\xc0\x00\x05\x08\x00\xf0\xff\xd9",  # a frame header too short
    ],
)
def test_a_jpeg_without_a_sound_frame_header_is_corrupt(body: bytes) -> None:
    with pytest.raises(FrameRejected) as info:
        jpeg_size(body)
    assert info.value.reason == FrameReason.CORRUPT_JPEG


def test_a_frame_of_another_size_is_refused_before_decoding() -> None:
    headers = {"x-capture-ms": "1", "x-boot-id": "1", "x-frame-seq": "1"}
    assert parse_frame_headers(Part(headers, _jpeg(320, 240)), (320, 240)).seq == 1
    for width, height in ((32000, 32000), (240, 320), (640, 480), (0, 0)):
        with pytest.raises(FrameRejected) as info:
            parse_frame_headers(Part(headers, _jpeg(width, height)), (320, 240))
        assert info.value.reason == FrameReason.FRAME_SIZE
    with pytest.raises(FrameRejected) as info:
        parse_frame_headers(Part(headers, b"\xff\xd8" + bytes(50) + b"\xff\xd9"), (320, 240))
    assert info.value.reason == FrameReason.CORRUPT_JPEG


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=0, max_value=60))
def test_fuzz_jpeg_size_raises_only_its_own_error(junk: bytes, cut: int) -> None:
    good = _jpeg(320, 240)
    for data in (b"\xff\xd8" + junk, good[:cut] + junk, junk + good):
        with contextlib.suppress(FrameRejected):
            width, height = jpeg_size(data)
            assert 0 <= width < 65536 and 0 <= height < 65536
