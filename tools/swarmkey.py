"""``stigmesh keygen FILE``: a new swarm key, the secret that authenticates every datagram.

A key file holds the key as hexadecimal text (32 random bytes), mode 0600.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path

MIN_KEY_BYTES = 16


class KeyFileError(ValueError):
    """The key file is missing, unreadable or does not hold a usable key."""


def write_key(path: Path, nbytes: int = 32) -> bytes:
    key = secrets.token_bytes(nbytes)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex() + "\n")
    return key


def read_key(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise KeyFileError(f"swarm key file {path} does not exist (make one: stigmesh keygen "
                           f"{path})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read swarm key file {path}: {exc}") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise KeyFileError(f"swarm key file {path} must hold the key as hexadecimal") from None
    if len(key) < MIN_KEY_BYTES:
        raise KeyFileError(
            f"swarm key in {path} is {len(key)} bytes; at least {MIN_KEY_BYTES} are needed"
        )
    return key


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
