"""Files that fail as real ones do, for the code that must survive them."""

from __future__ import annotations

import errno


class FullDisk:
    """Wraps an open file: every write from now on fails as on a full disk."""

    def __init__(self, f: object) -> None:
        self._f = f

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name: str) -> object:
        return getattr(self._f, name)
