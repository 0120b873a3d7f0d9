"""Fixtures for tests that run the system as real processes on loopback.

These tests must pass on a busy machine (``python tests/busy.py -- make test``), so:
they wait on events (a line in a run log, an answer on a control socket) with
generous deadlines instead of sleeping; they stop the processes they start
themselves, once their checks are done, and give each process only a backstop
lifetime (:data:`BACKSTOP`) that no test comes near, so nothing outlives a test
runner that was killed; and a time they assert on is measured against another
time the test measured, not against a constant tuned on an idle machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.netns import Net
from tools.procs import RunLogs, Swarm, private_swarm, private_swarm_args, wait_for
from worlds.arena import shipped_arena

__all__ = ["BACKSTOP", "RunLogs", "make_swarm", "private_swarm_args", "wait_for"]

# Seconds a process started by a system test may live at most. The test stops it
# with SIGTERM long before; this only bounds a process whose test runner died.
BACKSTOP = 300.0


def make_swarm(tmp: Path, arena_source: Path) -> Swarm:
    return private_swarm(tmp, arena_source)


@pytest.fixture
def net() -> Iterator[Net]:
    """A hub namespace with a bridge; hosts are added by the test (``net.add_host``)."""
    n = Net()
    try:
        yield n
    finally:
        n.close()


@pytest.fixture
def two_car_swarm(tmp_path: Path) -> Iterator[Swarm]:
    swarm = make_swarm(tmp_path, shipped_arena("two_cars"))
    try:
        yield swarm
    finally:
        swarm.stop_all()
