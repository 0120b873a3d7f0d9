"""``stigmesh keygen FILE``: a new swarm key, 32 random bytes as hex, mode 0600.

An existing file is never overwritten (:func:`tools.swarmkey.write_key`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.swarmkey import write_key


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path, help="where to write the key (hex, mode 0600)")


def main(args: argparse.Namespace) -> int:
    try:
        write_key(args.path)
    except FileExistsError as exc:
        if Path(exc.filename or args.path) != args.path:  # its folder is a file
            print(f"stigmesh keygen: cannot write {args.path}: {exc.filename} is a file, not "
                  "a folder", file=sys.stderr)
        else:
            print(f"stigmesh keygen: {args.path} exists; not overwritten", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"stigmesh keygen: cannot write {args.path}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"wrote a new swarm key to {args.path}")
    return 0
