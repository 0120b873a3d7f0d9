"""``python -m worlds ARENA.toml --run-dir DIR``: the same as ``stigmesh world``."""

import sys

from worlds.main import run

sys.exit(run())
