"""Swarm key files: the secret that authenticates every datagram (``stigmesh keygen``).

A key file holds the key as hexadecimal text (32 random bytes), mode 0600.
Reading one refuses a file other users can open (as ssh refuses an open
private key, with the ``chmod`` to run) and a key the swarm codec would
refuse (16..1024 bytes).
"""

from __future__ import annotations

from pathlib import Path

from protocol.control import KeyFileError, read_key_file, write_key_file
from protocol.swarm.codec import MAX_KEY_BYTES, MIN_KEY_BYTES

__all__ = ["MAX_KEY_BYTES", "MIN_KEY_BYTES", "KeyFileError", "read_key", "write_key"]


def write_key(path: Path, nbytes: int = 32) -> bytes:
    """A new random key in ``path`` (mode 0600); an existing file raises ``FileExistsError``."""
    return write_key_file(path, nbytes)


def read_key(path: Path) -> bytes:
    """The swarm key in ``path``; raises :class:`KeyFileError` with the fix in its message."""
    return read_key_file(
        path,
        "swarm key",
        f" (make one: stigmesh keygen {path})",
        min_bytes=MIN_KEY_BYTES,
        max_bytes=MAX_KEY_BYTES,
        fix=" (stigmesh keygen NEW_FILE makes a good one)",
    )
