"""The simulated world: PyBullet physics, virtual cars, the world server (worlds/WORLD.md).

pybullet writes its build time on standard error when it is imported, which
every start of the world (and every tool that builds one) would show: it is
imported here first, with file descriptor 2 pointed at /dev/null meanwhile, so
the modules of this package find it loaded and quiet.
"""

from __future__ import annotations

import contextlib
import os
import sys


def _import_pybullet_quietly() -> None:
    if "pybullet" in sys.modules:
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no standard error to silence
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        with contextlib.suppress(ImportError):  # reported where the physics is built
            import pybullet  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


_import_pybullet_quietly()
