"""``stigmesh keygen FILE``: a new swarm key, the secret that authenticates every datagram.

A key file holds the key as hexadecimal text (32 random bytes), mode 0600.
Reading one refuses a file other users can open (as ssh refuses an open
private key, with the ``chmod`` to run) and a key the swarm codec would
refuse (16..1024 bytes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from protocol.control import KeyFileError, read_key_file, write_key_file
from protocol.swarm.codec import MAX_KEY_BYTES, MIN_KEY_BYTES

__all__ = ["MAX_KEY_BYTES", "MIN_KEY_BYTES", "KeyFileError", "main", "read_key", "write_key"]


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


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path, help="where to write the key (hex, mode 0600)")


def main(args: argparse.Namespace) -> int:
    try:
        write_key(args.path)
    except FileExistsError:
        print(f"stigmesh keygen: {args.path} exists; not overwritten", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"stigmesh keygen: cannot write {args.path}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"wrote a new swarm key to {args.path}")
    return 0
