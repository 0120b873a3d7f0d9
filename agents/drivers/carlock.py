"""One OS file lock per car on a host, so two agents can never drive one car.

The lock is an ``flock`` on ``<lock_dir>/car-<key>.lock``; the kernel drops it
when the holder exits, however it exits, so a crashed agent never leaves a
stale lock behind. The holder writes its PID into the file so the loser can
say who holds the car.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from pathlib import Path
from types import TracebackType


class CarLockedError(RuntimeError):
    """Another process already drives this car."""

    def __init__(self, key: str, holder_pid: int | None, path: Path) -> None:
        self.key, self.holder_pid, self.path = key, holder_pid, path
        who = f"PID {holder_pid}" if holder_pid else "another process"
        super().__init__(f"car {key} is already driven by {who} (lock {path})")


def default_lock_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / "stigmesh-locks"


class CarLock:
    """``with CarLock("127.0.2.1"):`` holds the car until the block ends."""

    def __init__(self, key: str | int, lock_dir: Path | None = None) -> None:
        self.key = str(key)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.key)
        self.path = (lock_dir or default_lock_dir()) / f"car-{safe}.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise CarLockedError(self.key, holder, self.path) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.ftruncate(fd, 0)
            os.close(fd)  # closing drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> CarLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        raw = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(raw) if raw.isdigit() else None
