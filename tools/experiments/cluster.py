"""Where sweeps and the evidence run their lockstep trials: a Dask cluster.

:class:`Cluster` is a local :class:`dask.distributed.LocalCluster` by default, one worker
process per core (one thread each: a trial is one CPU-bound Python loop, and every worker
holds its own PyBullet), or a running cluster when given its scheduler's address
(``--scheduler tcp://HOST:8786``), so a sweep that outgrows this machine runs on many.
:meth:`Cluster.map` submits one task per item and hands each result back as it
completes; the results are the same as the trials' own in this process, whatever
worker ran them, because a lockstep trial is deterministic for its seed.

Workers of a remote cluster must run the same code: on connecting, every worker reports
the fingerprint of its ``agents``, ``protocol``, ``worlds`` and ``tools`` sources
(:func:`code_fingerprint`) and a worker that differs from this checkout is refused with
:class:`ClusterError` before anything is submitted. Tasks carry what they need (a trial's
scenario is built here and shipped), so the workers need the code, not the files.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("agents", "protocol", "worlds", "tools")  # what a trial's result depends on
T = TypeVar("T")
R = TypeVar("R")


class ClusterError(RuntimeError):
    """No cluster to run on: the scheduler cannot be reached, or its workers run other code."""


def default_workers() -> int:
    """One worker per core of this machine."""
    return max(1, os.cpu_count() or 1)


def source_files(root: Path = ROOT) -> list[Path]:
    """The Python sources a trial may import, sorted (``agents``, ``protocol``, ``worlds``,
    ``tools``)."""
    return sorted(p for d in SOURCES for p in (root / d).rglob("*.py")
                  if "__pycache__" not in p.parts)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def code_fingerprint(root: Path = ROOT) -> str:
    """One hash of every source file's path and content."""
    h = hashlib.sha256()
    for path in source_files(root):
        h.update(str(path.relative_to(root)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


class Cluster:
    """A Dask client on a local cluster (``workers`` processes) or on ``scheduler``.

    Use as a context manager; a local cluster is stopped on exit, a remote one is left
    running (only the client closes).
    """

    def __init__(self, scheduler: str | None = None, workers: int | None = None) -> None:
        self.scheduler = scheduler
        self.workers = workers if workers is not None else default_workers()
        if self.workers < 1:
            raise ValueError("a cluster needs at least one worker")
        self._cluster: Any = None
        self.client: Any = None

    def __enter__(self) -> Cluster:
        from dask.distributed import Client, LocalCluster

        if self.scheduler is None:
            self._cluster = LocalCluster(
                n_workers=self.workers, threads_per_worker=1, processes=True,
                # the scheduler's HTTP endpoint starts even without a dashboard: a free
                # loopback port, not the fixed 8787 another sweep may hold
                host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR,
            )  # fmt: skip
            self.client = Client(self._cluster)
            return self
        try:
            self.client = Client(self.scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"no Dask scheduler at {self.scheduler}: {exc}") from None
        try:
            self._check_code()
        except BaseException:
            self.client.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.client is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    def _check_code(self) -> None:
        mine = code_fingerprint()
        theirs = self.client.run(code_fingerprint)
        if not theirs:
            raise ClusterError(f"the Dask scheduler at {self.scheduler} has no worker")
        other = sorted(addr for addr, fp in theirs.items() if fp != mine)
        if other:
            raise ClusterError(
                f"{len(other)} of {len(theirs)} worker(s) of {self.scheduler} run other code "
                f"than this checkout (e.g. {other[0]}); start them from the same commit"
            )
        self.workers = len(theirs)

    def describe(self) -> str:
        if self.scheduler is None:
            return f"a local Dask cluster of {self.workers} worker process(es)"
        return f"the Dask cluster at {self.scheduler} ({self.workers} worker(s))"

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            on_lost: Callable[[T, BaseException], R]) -> Iterator[tuple[int, R]]:
        """``(index, fn(item))`` for every item, in the order they complete. A task whose
        worker died (a crash the trial could not catch) gives ``on_lost(item, error)``."""
        from dask.distributed import as_completed

        futures = {self.client.submit(fn, item, pure=False): i for i, item in enumerate(items)}
        for future in as_completed(futures):
            i = futures.pop(future)
            try:
                result = future.result()
            except Exception as exc:  # KilledWorker, a lost connection: the task is lost
                result = on_lost(items[i], exc)
            future.release()
            yield i, result
