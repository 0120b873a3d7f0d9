"""How late this process wakes up: the scheduling delay a busy machine adds, measured.

Tests that assert on wall-clock latencies allow for what they measured with this
(beside the code under test, in the same process), instead of constants tuned on
an idle machine.
"""

from __future__ import annotations

import threading
import time


class Lateness:
    """A thread that naps ``nap`` s again and again and keeps the worst oversleep."""

    def __init__(self, nap: float = 0.01) -> None:
        self.nap = nap
        self.worst = 0.0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lateness", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            before = time.monotonic()
            time.sleep(self.nap)
            self.worst = max(self.worst, time.monotonic() - before - self.nap)
            self.samples += 1

    def __enter__(self) -> Lateness:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5.0)
