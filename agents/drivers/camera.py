"""The camera driver: the car's MJPEG stream in, observation batches out, never blocking.

Two threads, neither shared with the DRIVE loop:

- the **stream** thread connects to ``http://CAR:8080/stream`` with a plain
  socket (:func:`protocol.mjpeg.request`, :class:`~protocol.mjpeg.MjpegParser`),
  checks every part (:func:`~protocol.mjpeg.parse_frame_headers`, which
  refuses a JPEG whose frame header declares another size than the camera's
  before anything decodes it; then :class:`~protocol.mjpeg.FrameGate`: boot
  id against telemetry, staleness by capture time, replayed sequence numbers)
  and puts an accepted frame in a one-frame slot. A frame still in the slot
  when a newer one arrives is dropped and counted (``superseded``): frames are
  never queued. A broken connection, or one that delivers no complete part
  within ``frame_timeout`` (silent: ``stream_silent``; trickling bytes:
  ``stream_stalled``), is closed and retried with exponential backoff.
- the **worker** thread takes the newest frame from the slot, checks its age
  again (it may have waited while the previous frame was processed:
  ``stale_at_worker``), decodes it (``corrupt_jpeg`` when ``cv2.imdecode``
  fails), runs the :class:`~agents.perception.pipeline.Pipeline` and hands
  the batch (empty when nothing was seen) and a timing record to ``on_batch``.

Every rejection is counted by its reason in :meth:`CameraDriver.stats`.
``car_to_local(uptime_s)`` maps the car's clock to the local monotonic clock
or returns None while it is not synchronised; the frame then carries its
receipt time, flagged unsynchronised. ``predict(t_capture)``, when given,
returns the tracker's pose at a capture time (or None); it and ``on_batch``
are called from the worker thread, so they must only read state the owner
publishes safely (a snapshot, a queue). The dict given to ``on_batch`` holds
the stage times on the local monotonic clock: ``t_capture`` (mapped, or the
receipt time), ``t_receipt``, ``t_taken`` (the worker took it),
``t_decoded``, ``t_detected``, ``t_posed``, ``t_done``; their differences in
ms; the frame's ``seq``, ``capture_ms`` and ``boot``; the drop count; and the
pipeline's per-frame record.

:meth:`CameraDriver.feed` and :meth:`CameraDriver.process_newest` are the
two halves the threads run; tests call them directly with crafted bytes.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from agents.observations import ObservationBatch
from agents.perception.pipeline import Pipeline, PredictedPose
from protocol.errors import RejectCounters
from protocol.mjpeg import (
    FrameGate,
    FrameReason,
    FrameRejected,
    GatedFrame,
    MjpegError,
    MjpegParser,
    Part,
    parse_frame_headers,
    request,
)

CAMERA_PORT = 8080
SUPERSEDED = "superseded"
STALE_AT_WORKER = "stale_at_worker"
STREAM_CLOSED = "stream_closed"
STREAM_SILENT = "stream_silent"
STREAM_STALLED = "stream_stalled"
CONNECT_FAILED = "connect_failed"
WORKER_ERROR = "worker_error"


def decode_gray(jpeg: bytes) -> npt.NDArray[np.uint8] | None:
    """The JPEG as a grey image, or None when OpenCV cannot decode it."""
    try:
        image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_GRAYSCALE)
    except cv2.error:
        return None
    if image is None or image.ndim != 2 or image.size == 0:
        return None
    return np.asarray(image, dtype=np.uint8)


@dataclass(frozen=True)
class _Slot:
    frame: GatedFrame
    t_receipt: float


class CameraDriver:
    """Reads one car's camera and feeds the perception pipeline on the newest frame only."""

    def __init__(  # noqa: PLR0917  (the runtime's interface names these six)
        self,
        car: str,
        pipeline: Pipeline,
        expected_boot: Callable[[], int | None],
        car_to_local: Callable[[float], float | None],
        on_batch: Callable[[ObservationBatch, dict[str, Any]], None],
        log: Callable[..., None],
        *,
        port: int = CAMERA_PORT,
        gate: FrameGate | None = None,
        predict: Callable[[float], PredictedPose | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        connect_timeout: float = 1.0,
        frame_timeout: float = 2.0,
        backoff: tuple[float, float] = (0.1, 2.0),
    ) -> None:
        if not (0 < backoff[0] <= backoff[1]) or connect_timeout <= 0 or frame_timeout <= 0:
            raise ValueError("timeouts and backoff must be > 0, backoff as (first, longest)")
        self.car, self.port = car, port
        self.pipeline = pipeline
        self.expected_boot = expected_boot
        self.car_to_local = car_to_local
        self.on_batch = on_batch
        self.log = log
        self.gate = gate or FrameGate()
        self.predict = predict
        self.clock = clock
        self.connect_timeout = connect_timeout
        self.frame_timeout = frame_timeout  # s the stream may go without a complete part
        cam = pipeline.map.camera
        self.frame_size = (cam.width, cam.height)  # any other size is refused undecoded
        self.backoff = backoff
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._slot: _Slot | None = None
        self._rejects = RejectCounters()
        self._counts = {
            "parts": 0,
            "accepted": 0,
            "processed": 0,
            "batches": 0,
            "connects": 0,
        }
        self._parser = MjpegParser()
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._connected = False
        self._last: dict[str, Any] = {}
        self._pipeline_counts: dict[str, int] = {}  # a snapshot taken by the worker
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._threads:
            raise RuntimeError("already started")
        self._threads = [
            threading.Thread(target=self._stream_main, name=f"camera-{self.car}", daemon=True),
            threading.Thread(target=self._worker_main, name=f"perception-{self.car}", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._ready:
            self._ready.notify_all()
        for t in self._threads:
            t.join(timeout)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = dict(self._counts)
            out["rejected"] = self._rejects.as_dict()
            out["dropped"] = self._rejects[SUPERSEDED]
            out["connected"] = self._connected
            out["pending"] = self._slot is not None
            out["last"] = dict(self._last)
            out["pipeline"] = dict(self._pipeline_counts)
        return out

    def _count(self, reason: str) -> None:
        with self._lock:
            self._rejects.count(reason)

    # ------------------------------------------------------------------ frame intake

    def reset_stream(self) -> None:
        """A new connection: a fresh parser (the gate keeps its replay memory)."""
        self._parser = MjpegParser()

    def feed(self, data: bytes, received_at: float) -> None:
        """Bytes from the stream; raises :class:`MjpegError` when the stream is broken."""
        for part in self._parser.feed(data):
            self.take_part(part, received_at)

    def take_part(self, part: Part, received_at: float) -> bool:
        """Check one part; keep it as the newest frame. False (and counted) when rejected."""
        with self._lock:
            self._counts["parts"] += 1
        try:
            frame = parse_frame_headers(part, self.frame_size)
            local = self.car_to_local(frame.capture_ms / 1000.0)
            mapper = None if local is None else (lambda _uptime: local)
            gated = self.gate.check(frame, self.expected_boot(), received_at, mapper)
        except FrameRejected as exc:
            self._count(exc.reason)
            return False
        with self._ready:
            self._counts["accepted"] += 1
            if self._slot is not None:
                self._rejects.count(SUPERSEDED)
            self._slot = _Slot(gated, received_at)
            self._ready.notify()
        return True

    # ------------------------------------------------------------------ processing

    def process_newest(self) -> bool:
        """Run the pipeline on the newest frame, if any; True when a frame was taken."""
        with self._lock:
            slot, self._slot = self._slot, None
        if slot is None:
            return False
        t_taken = self.clock()
        gated = slot.frame
        if gated.synchronized and t_taken - gated.t_capture > self.gate.max_age:
            self._count(STALE_AT_WORKER)
            return True
        image = decode_gray(gated.frame.jpeg)
        t_decoded = self.clock()
        if image is None:
            self._count(FrameReason.CORRUPT_JPEG)
            return True
        predicted = self.predict(gated.t_capture) if self.predict is not None else None
        result = self.pipeline.process(image, gated.t_capture, gated.synchronized, predicted)
        rec = result.record
        t_detected = t_decoded + (rec.t_detected - rec.t_start)
        t_posed = t_decoded + (rec.t_posed - rec.t_start)
        t_done = t_decoded + (rec.t_done - rec.t_start)
        info: dict[str, Any] = {
            "car": self.car,
            "seq": gated.frame.seq,
            "boot": gated.frame.boot_id,
            "capture_ms": gated.frame.capture_ms,
            "synchronized": gated.synchronized,
            "t_capture": gated.t_capture,
            "t_receipt": slot.t_receipt,
            "t_taken": t_taken,
            "t_decoded": t_decoded,
            "t_detected": t_detected,
            "t_posed": t_posed,
            "t_done": t_done,
            "transport_ms": (slot.t_receipt - gated.t_capture) * 1e3,
            "wait_ms": (t_taken - slot.t_receipt) * 1e3,
            "decode_ms": (t_decoded - t_taken) * 1e3,
            "detect_ms": rec.detect_ms,
            "pose_ms": rec.pose_ms,
            "age_ms": (t_done - gated.t_capture) * 1e3,
            "record": rec.as_dict(),
        }
        counts = self.pipeline.counters.as_dict()  # read where it is written: this thread
        with self._lock:
            self._counts["processed"] += 1
            self._pipeline_counts = counts
            info["dropped"] = self._rejects[SUPERSEDED]
            self._last = {k: v for k, v in info.items() if k != "record"}
        if result.batch is not None:
            with self._lock:
                self._counts["batches"] += 1
            self.on_batch(result.batch, info)
        return True

    # ------------------------------------------------------------------ threads

    def _worker_main(self) -> None:
        while not self._stop.is_set():
            with self._ready:
                while self._slot is None and not self._stop.is_set():
                    self._ready.wait(0.5)
            if self._stop.is_set():
                return
            try:
                self.process_newest()
            except Exception as exc:  # keep perceiving; the failure is counted and logged
                self._count(WORKER_ERROR)
                self.log("camera_worker_error", car=self.car, error=repr(exc))

    def _stream_main(self) -> None:
        delay = self.backoff[0]
        while not self._stop.is_set():
            got_frame = self._stream_once()
            if self._stop.is_set():
                return
            delay = self.backoff[0] if got_frame else min(delay * 2.0, self.backoff[1])
            self._stop.wait(delay)

    def _stream_once(self) -> bool:
        """One connection, until it breaks; True when it delivered at least one part."""
        try:
            sock = socket.create_connection((self.car, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            self._count(CONNECT_FAILED)
            self.log("camera_connect_failed", car=self.car, error=str(exc))
            return False
        self._sock = sock
        before = self._counts["parts"]
        reason = STREAM_CLOSED
        try:
            sock.settimeout(self.frame_timeout)
            sock.sendall(request(self.car))
            self.reset_stream()
            with self._lock:
                self._connected = True
                self._counts["connects"] += 1
            self.log("camera_connected", car=self.car, port=self.port)
            # A deadline per part, not per read: bytes trickling in do not hold it open.
            deadline = time.monotonic() + self.frame_timeout
            trickled = 0  # bytes since the last complete part
            while not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    reason = STREAM_STALLED if trickled else STREAM_SILENT
                    break
                sock.settimeout(left)
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    reason = STREAM_STALLED if trickled else STREAM_SILENT
                    break
                if not data:
                    break
                parts = self._counts["parts"]
                self.feed(data, self.clock())
                if self._counts["parts"] > parts:
                    deadline, trickled = time.monotonic() + self.frame_timeout, 0
                else:
                    trickled += len(data)
        except MjpegError as exc:  # the stream itself is broken: reconnect
            reason = exc.reason
        except OSError as exc:
            reason = STREAM_CLOSED
            self.log("camera_socket_error", car=self.car, error=str(exc))
        finally:
            with self._lock:
                self._connected = False
            self._sock = None
            sock.close()
        if not self._stop.is_set():
            self._count(reason)
            self.log("camera_disconnected", car=self.car, reason=reason)
        return self._counts["parts"] > before
