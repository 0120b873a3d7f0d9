from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agents.drivers.carlock import CarLock, CarLockedError


def test_second_process_gets_a_clear_error_naming_the_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, pathlib
                from agents.drivers.carlock import CarLock
                lock = CarLock("127.0.2.1", pathlib.Path({str(tmp_path)!r}))
                lock.acquire()
                print("held", flush=True)
                sys.stdin.readline()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(CarLockedError) as info:
            CarLock("127.0.2.1", tmp_path).acquire()
        assert info.value.holder_pid == holder.pid
        assert f"PID {holder.pid}" in str(info.value)
        # Another car is not affected.
        with CarLock("127.0.2.2", tmp_path) as other:
            assert other.held
    finally:
        holder.kill()
        holder.wait(timeout=5)
    # A dead holder leaves no stale lock: the kernel released it.
    with CarLock("127.0.2.1", tmp_path) as lock:
        assert lock.held
    assert not lock.held


def test_lock_is_exclusive_within_one_process_too(tmp_path: Path) -> None:
    with CarLock(3, tmp_path), pytest.raises(CarLockedError):
        CarLock(3, tmp_path).acquire()
