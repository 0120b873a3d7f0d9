"""The camera stream: MJPEG over HTTP (``multipart/x-mixed-replace``), sans-IO.

The car serves ``GET /stream`` on TCP 8080. Each part is one JPEG with three
extra headers: ``X-Capture-Ms`` (car uptime at sensor capture), ``X-Boot-Id``
(the boot nonce in hex) and ``X-Frame-Seq``.

- :func:`response_head` and :func:`encode_part` write the stream (car side).
- :class:`MjpegParser` reads it incrementally: feed bytes, get :class:`Part`s.
  A framing error is fatal for the connection and raises :class:`MjpegError`.
- :func:`parse_frame_headers` turns a part into a :class:`CameraFrame` or
  raises :class:`FrameRejected` (a well-framed part with bad content). Given
  the camera's size, it reads the JPEG's frame header (:func:`jpeg_size`)
  and refuses any other size before anyone decodes the image: a few hundred
  bytes can declare 32000x32000 pixels and cost seconds and gigabytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from protocol.errors import ProtocolError

BOUNDARY = "stigmeshframe"
MAX_HEAD_BYTES = 4096
MAX_PART_BYTES = 256 * 1024  # a 320x240 JPEG is 5-30 KB; a 640x480 one fits too
JPEG_SOI = b"\xff\xd8"
JPEG_EOI = b"\xff\xd9"


class MjpegReason(StrEnum):
    BAD_STATUS = "bad_status"
    BAD_CONTENT_TYPE = "bad_content_type"
    HEAD_TOO_LARGE = "head_too_large"
    BAD_BOUNDARY = "bad_boundary"
    BAD_HEADER = "bad_header"
    MISSING_LENGTH = "missing_length"
    PART_TOO_LARGE = "part_too_large"
    BAD_PART_END = "bad_part_end"


class FrameReason(StrEnum):
    MISSING_HEADER = "missing_header"
    BAD_HEADER_VALUE = "bad_header_value"
    CORRUPT_JPEG = "corrupt_jpeg"
    WRONG_BOOT = "wrong_boot"
    STALE_FRAME = "stale_frame"
    FUTURE_FRAME = "future_frame"
    OLD_SEQ = "old_seq"
    FRAME_SIZE = "frame_size"


class MjpegError(ProtocolError):
    """The byte stream is not a well-formed MJPEG stream; drop the connection."""


class FrameRejected(ProtocolError):
    """A well-framed part that must not be used; count it and carry on."""


@dataclass(frozen=True)
class Part:
    headers: dict[str, str]  # lower-cased names
    body: bytes


@dataclass(frozen=True)
class CameraFrame:
    capture_ms: int
    boot_id: int
    seq: int
    jpeg: bytes


def response_head(boundary: str = BOUNDARY) -> bytes:
    return (
        "HTTP/1.1 200 OK\r\n"
        f"Content-Type: multipart/x-mixed-replace; boundary={boundary}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")


def request(host: str, path: str = "/stream") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode("ascii")


def encode_part(
    jpeg: bytes, capture_ms: int, boot_id: int, seq: int, boundary: str = BOUNDARY
) -> bytes:
    head = (
        f"--{boundary}\r\n"
        "Content-Type: image/jpeg\r\n"
        f"Content-Length: {len(jpeg)}\r\n"
        f"X-Capture-Ms: {capture_ms}\r\n"
        f"X-Boot-Id: {boot_id:08x}\r\n"
        f"X-Frame-Seq: {seq}\r\n\r\n"
    ).encode("ascii")
    return head + jpeg + b"\r\n"


def _parse_header_lines(block: bytes) -> dict[str, str]:
    try:
        text = block.decode("ascii")
    except UnicodeDecodeError as exc:
        raise MjpegError(MjpegReason.BAD_HEADER, "non-ASCII header") from exc
    headers: dict[str, str] = {}
    for line in text.split("\r\n"):
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise MjpegError(MjpegReason.BAD_HEADER, f"not a header line: {line[:60]!r}")
        headers[name.strip().lower()] = value.strip()
    return headers


class MjpegParser:
    """Incremental parser of the client side of ``GET /stream``.

    ``feed(data)`` returns the parts completed by ``data``. After an
    :class:`MjpegError` the parser is unusable: close the connection.
    """

    def __init__(self, max_part_bytes: int = MAX_PART_BYTES) -> None:
        self._buf = bytearray()
        self._boundary: bytes | None = None
        self._max_part = max_part_bytes
        self._pending: dict[str, str] | None = None  # headers of the part being read
        self._length = 0
        self._failed = False

    def _take_head(self) -> bytes | None:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD_BYTES:
                raise MjpegError(MjpegReason.HEAD_TOO_LARGE, f"> {MAX_HEAD_BYTES} bytes")
            return None
        if end > MAX_HEAD_BYTES:
            raise MjpegError(MjpegReason.HEAD_TOO_LARGE, f"{end} bytes")
        block = bytes(self._buf[:end])
        del self._buf[: end + 4]
        return block

    def _read_response_head(self) -> bool:
        block = self._take_head()
        if block is None:
            return False
        status, _, rest = block.partition(b"\r\n")
        fields = status.split(b" ", 2)
        if len(fields) < 2 or not fields[0].startswith(b"HTTP/1.") or fields[1] != b"200":
            raise MjpegError(MjpegReason.BAD_STATUS, repr(status[:60]))
        ctype = _parse_header_lines(rest).get("content-type", "")
        kind, _, params = ctype.partition(";")
        if kind.strip().lower() != "multipart/x-mixed-replace":
            raise MjpegError(MjpegReason.BAD_CONTENT_TYPE, repr(ctype[:60]))
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.lower() == "boundary" and value.strip('"'):
                self._boundary = value.strip('"').encode("ascii", "replace")
                return True
        raise MjpegError(MjpegReason.BAD_CONTENT_TYPE, "no boundary")

    def _read_part_head(self) -> bool:
        assert self._boundary is not None
        while self._buf.startswith(b"\r\n"):  # tolerated preamble/epilogue CRLFs
            del self._buf[:2]
        block = self._take_head()
        if block is None:
            return False
        first, _, rest = block.partition(b"\r\n")
        if first.rstrip() != b"--" + self._boundary:
            raise MjpegError(MjpegReason.BAD_BOUNDARY, repr(first[:60]))
        headers = _parse_header_lines(rest)
        raw_len = headers.get("content-length")
        if raw_len is None:
            raise MjpegError(MjpegReason.MISSING_LENGTH, "part without Content-Length")
        if not raw_len.isdigit():
            raise MjpegError(MjpegReason.MISSING_LENGTH, repr(raw_len[:20]))
        length = int(raw_len)
        if length > self._max_part:
            raise MjpegError(MjpegReason.PART_TOO_LARGE, f"{length} > {self._max_part}")
        self._pending, self._length = headers, length
        return True

    def feed(self, data: bytes) -> list[Part]:
        if self._failed:
            raise MjpegError(MjpegReason.BAD_BOUNDARY, "parser already failed")
        self._buf += data
        parts: list[Part] = []
        try:
            if self._boundary is None and not self._read_response_head():
                return parts
            while True:
                if self._pending is None and not self._read_part_head():
                    return parts
                need = self._length + 2
                if len(self._buf) < need:
                    return parts
                if self._buf[self._length : need] != b"\r\n":
                    raise MjpegError(MjpegReason.BAD_PART_END, "body not followed by CRLF")
                assert self._pending is not None
                parts.append(Part(self._pending, bytes(self._buf[: self._length])))
                del self._buf[:need]
                self._pending = None
        except MjpegError:
            self._failed = True
            raise


def _header_int(headers: dict[str, str], name: str, base: int, limit: int) -> int:
    raw = headers.get(name)
    if raw is None:
        raise FrameRejected(FrameReason.MISSING_HEADER, name)
    try:
        value = int(raw, base)
    except ValueError as exc:
        raise FrameRejected(FrameReason.BAD_HEADER_VALUE, f"{name}: {raw[:20]!r}") from exc
    if not 0 <= value <= limit:
        raise FrameRejected(FrameReason.BAD_HEADER_VALUE, f"{name}: {value}")
    return value


# Start-of-frame markers (SOF0..SOF15 but DHT C4, JPG C8 and DAC CC): they carry the size.
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_RST = range(0xD0, 0xD8)


def jpeg_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a JPEG's first frame header, without decoding; raises
    :class:`FrameRejected` (``corrupt_jpeg``) when there is no well-formed one before the scan.

    Segments are walked by their lengths from SOI, as a decoder walks them.
    """
    if not data.startswith(JPEG_SOI):
        raise FrameRejected(FrameReason.CORRUPT_JPEG, "no SOI marker")
    i, n = 2, len(data)
    while True:
        if i >= n or data[i] != 0xFF:
            raise FrameRejected(FrameReason.CORRUPT_JPEG, f"no marker at byte {i}")
        while i < n and data[i] == 0xFF:  # fill bytes
            i += 1
        if i >= n:
            raise FrameRejected(FrameReason.CORRUPT_JPEG, "truncated before the frame header")
        marker = data[i]
        i += 1
        if marker == 0x01 or marker in _RST:  # no length, nothing to skip
            continue
        if marker in (0x00, 0xD8, 0xD9, 0xDA):
            raise FrameRejected(
                FrameReason.CORRUPT_JPEG, f"marker {marker:02X} before a frame header"
            )
        if i + 2 > n:
            raise FrameRejected(FrameReason.CORRUPT_JPEG, "truncated segment length")
        length = int.from_bytes(data[i : i + 2], "big")
        if length < 2 or i + length > n:
            raise FrameRejected(FrameReason.CORRUPT_JPEG, f"segment {marker:02X} of bad length")
        if marker in _SOF:
            if length < 8:
                raise FrameRejected(FrameReason.CORRUPT_JPEG, "short frame header")
            height = int.from_bytes(data[i + 3 : i + 5], "big")
            width = int.from_bytes(data[i + 5 : i + 7], "big")
            return width, height
        i += length


def parse_frame_headers(part: Part, size: tuple[int, int] | None = None) -> CameraFrame:
    """Check a part's stigmesh headers and JPEG markers; raise :class:`FrameRejected`.

    With ``size`` (width, height), the JPEG must declare exactly that size (``frame_size``).
    """
    capture_ms = _header_int(part.headers, "x-capture-ms", 10, 2**63 - 1)  # u64 uptime
    boot_id = _header_int(part.headers, "x-boot-id", 16, 2**32 - 1)
    seq = _header_int(part.headers, "x-frame-seq", 10, 2**63 - 1)
    body = part.body
    if len(body) < 4 or not body.startswith(JPEG_SOI) or not body.rstrip(b"\0").endswith(JPEG_EOI):
        raise FrameRejected(FrameReason.CORRUPT_JPEG, "missing JPEG SOI/EOI markers")
    if size is not None:
        declared = jpeg_size(body)
        if declared != size:
            raise FrameRejected(
                FrameReason.FRAME_SIZE,
                f"{declared[0]}x{declared[1]}, the camera's is {size[0]}x{size[1]}",
            )
    return CameraFrame(capture_ms, boot_id, seq, body)


@dataclass(frozen=True)
class GatedFrame:
    """A frame fit for use, with its capture time on the local monotonic clock."""

    frame: CameraFrame
    t_capture: float
    synchronized: bool  # False: t_capture is the receipt time; never chain poses with it


class FrameGate:
    """Rejects frames from another boot, stale frames and replays, by capture time.

    ``car_to_local`` maps a car uptime in seconds to the local clock; pass
    ``None`` while the car's clock is not synchronised, and the frame falls
    back to its receipt time (flagged ``synchronized=False``).
    """

    def __init__(self, max_age: float = 0.25, future_tolerance: float = 0.025) -> None:
        if not 0.0 < max_age <= 0.35:
            raise ValueError(f"max_age must be in (0, 0.35] s (camera timeout), got {max_age}")
        if future_tolerance < 0:
            raise ValueError("future_tolerance must be >= 0")
        self.max_age = max_age
        self.future_tolerance = future_tolerance
        self._last_seq: tuple[int, int] | None = None  # (boot, seq)

    def check(
        self,
        frame: CameraFrame,
        expected_boot: int | None,
        received_at: float,
        car_to_local: Callable[[float], float] | None,
    ) -> GatedFrame:
        if expected_boot is None or frame.boot_id != expected_boot:
            raise FrameRejected(
                FrameReason.WRONG_BOOT, f"frame boot {frame.boot_id:08x}, car {expected_boot}"
            )
        last = self._last_seq
        if last is not None and last[0] == frame.boot_id and frame.seq <= last[1]:
            raise FrameRejected(FrameReason.OLD_SEQ, f"{frame.seq} <= {last[1]}")
        if car_to_local is None:
            t_capture, synced = received_at, False
        else:
            t_capture, synced = car_to_local(frame.capture_ms / 1000.0), True
            age = received_at - t_capture
            if age > self.max_age:
                raise FrameRejected(FrameReason.STALE_FRAME, f"{age * 1000:.0f} ms old")
            if age < -self.future_tolerance:
                raise FrameRejected(FrameReason.FUTURE_FRAME, f"{-age * 1000:.0f} ms ahead")
        self._last_seq = (frame.boot_id, frame.seq)
        return GatedFrame(frame, t_capture, synced)
