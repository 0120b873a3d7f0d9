"""The agent's own loop must not die silently: it stops the car, says why, exits non-zero."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agents.drivers.net import resolve_interface
from agents.drivers.runtime import EXIT_FAILED, AgentRuntime, RuntimeOptions, claim_epoch
from protocol.runlog import log_path, read_run_log
from tests.support.carserver import ModelCar, free_address
from tests.support.files import FullDisk
from tools.agent_config import agent_config
from worlds.arena import load_arena, shipped_arena


def _settled(car: ModelCar, within: float = 5.0) -> tuple[bool, tuple[float, float], str]:
    """The car's state once it is disarmed (its thread may not have read the agent's last
    datagram when the agent returns; a car left armed disarms by its watchdog within
    300 ms, with reason ``watchdog``), or as it is after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        with car.lock:
            state = (car.model.armed, car.model.wheels, car.model.reason)
        if not state[0] or time.monotonic() > deadline:
            return state
        time.sleep(0.01)


def _runtime(car: ModelCar, run_dir: Path) -> AgentRuntime:
    """walnut's agent on loopback driving ``car``, for at most 60 s."""
    config = agent_config(load_arena(shipped_arena("two_cars")), "walnut")
    return AgentRuntime(RuntimeOptions(
        config=config, car=car.address, iface=resolve_interface("127.0.0.1"),
        key=bytes(range(32)), swarm="fatal-test", run_dir=run_dir, swarm_port=0,
        mdns=False, duration=60.0, lock_dir=run_dir / "locks",
    ))


def _drive_then(run_dir: Path, act: Callable[[AgentRuntime], None],
                ) -> tuple[AgentRuntime, bool, int, float, tuple[bool, tuple[float, float], str]]:
    """walnut drives a ModelCar; from the first tick that finds the car driving, ``act`` runs
    before every tick. Returns the runtime, whether the car drove, the exit code, the run's
    wall seconds and the car's settled state."""
    with ModelCar(free_address()) as car:
        runtime = _runtime(car, run_dir)
        drove = threading.Event()
        real_tick = runtime.node.tick

        def tick(now: float, *, decide: bool = True):
            if car.model.armed and any(car.model.wheels):
                drove.set()
            if drove.is_set():
                act(runtime)
            return real_tick(now, decide=decide)

        runtime.node.tick = tick  # type: ignore[method-assign]
        started = time.monotonic()
        code = asyncio.run(runtime.run())
        elapsed = time.monotonic() - started
        state = _settled(car)
    return runtime, drove.is_set(), code, elapsed, state


def test_a_failing_tick_stops_the_car_and_exits_non_zero(tmp_path: Path) -> None:
    def fail(runtime: AgentRuntime) -> None:
        raise FloatingPointError("a bug in the decision")

    runtime, armed, code, elapsed, state = _drive_then(tmp_path, fail)
    assert armed, "the car never drove: nothing was tested"
    assert code == EXIT_FAILED and elapsed < 30.0
    assert runtime.fatal is not None and "a bug in the decision" in runtime.fatal
    assert state == (False, (0.0, 0.0), "stop")  # stopped by the agent, not by its watchdog
    lines = list(read_run_log(log_path(tmp_path, "walnut")))
    assert [ln["where"] for ln in lines if ln["event"] == "fatal"] == ["the decision loop"]
    assert lines[-1]["event"] == "stop" and "a bug" in lines[-1]["fatal"]


def test_each_start_claims_a_higher_epoch(tmp_path: Path) -> None:
    first = claim_epoch(tmp_path, "walnut", 1_800_000_000.0)
    again = claim_epoch(tmp_path, "walnut", 1_800_000_000.0)  # within the same second
    back = claim_epoch(tmp_path, "walnut", 1_700_000_000.0)  # the wall clock set back
    assert first == 1_800_000_000 and again == first + 1 and back == first + 2
    (tmp_path / "hazel.epoch").write_text("garbage\n")
    assert claim_epoch(tmp_path, "hazel", 1_800_000_005.0) == 1_800_000_005


def test_a_log_that_cannot_be_written_stops_the_car_and_exits_non_zero(tmp_path: Path) -> None:
    """A full disk under a driving agent: it says why, stops the car itself and exits (its
    logging neither stops the STOP nor leaves a process running without its loop)."""
    def fill_the_disk(runtime: AgentRuntime) -> None:
        file = runtime.log._file
        if file is not None and not isinstance(file._file, FullDisk):
            file._file = FullDisk(file._file)  # type: ignore[assignment]

    runtime, full, code, elapsed, state = _drive_then(tmp_path, fill_the_disk)
    assert full, "the car never drove: nothing was tested"
    assert code == EXIT_FAILED and elapsed < 30.0
    assert runtime.fatal is not None and "No space left on device" in runtime.fatal
    assert state == (False, (0.0, 0.0), "stop")  # stopped by the agent, not by its watchdog
