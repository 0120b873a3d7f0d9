"""Lockstep benchmark: how many times faster than real time a whole swarm runs.

``run(quick)`` runs :class:`~tools.experiments.lockstep.Lockstep` (the world, every
agent's sans-IO core and the swarm wire in virtual time, no logs) unpaced for the
two-agent default arena and the eight-agent one, and reports the real-time factor
RTF = simulated seconds / wall seconds. Floors measured in the same run, on the same
arena: the world alone with its cars driven open loop at 30 Hz (what lockstep would
reach if the agents cost nothing) and bare ``stepSimulation`` (PyBullet's share).

Where the time goes: a cProfile pass over a few simulated seconds of the same run,
its own time summed per room (agents, protocol, worlds, tools, PyBullet and numpy
in C, the rest), as fractions of the profiled total.

The longest single service call of any agent over the first seconds, start-up included
(lockstep runs one thread, so this is its own time, uncontended): a call longer than a
DRIVE period (33 ms) holds that agent's car link; several at once on a shared machine
add up past the firmware's 300 ms watchdog (what the search viewpoints, once built at the
first search decision, did to eight agents on two cores).

Targets (issue 12): RTF >= 40 for two agents, >= 15 for eight; no service call over 33 ms.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tools.bench.world import _drive_all, _physics_floor, _start_driving
from tools.experiments.lockstep import STEP, Lockstep
from worlds.arena import load_arena, shipped_arena
from worlds.sim import World

TARGETS = {"two_cars": 40.0, "eight_cars": 15.0}
DRIVE_PERIOD = 1.0 / 30.0  # s: the longest a service call may take (one DRIVE period)
ROOMS = ("agents", "protocol", "worlds", "tools")


def _lockstep_rtf(arena_name: str, sim_seconds: float) -> tuple[float, int]:
    """RTF of a lockstep run after a 2 s warm-up (the first look, the first paths)."""
    ls = Lockstep(load_arena(shipped_arena(arena_name)), seed=1)
    try:
        ls.run(2.0)
        start = time.perf_counter()
        ls.run(sim_seconds)
        wall = time.perf_counter() - start
        return sim_seconds / wall, len(ls.agents)
    finally:
        ls.close()


def _longest_service(arena_name: str, sim_seconds: float) -> tuple[float, str, float]:
    """The longest single ``Agent.service`` call from the start: (seconds, agent, at)."""
    ls = Lockstep(load_arena(shipped_arena(arena_name)), seed=1)
    longest = (0.0, "", 0.0)
    try:
        for member in ls.agents.values():
            agent = member.agent
            service = agent.service

            def timed(now: float, service: Any = service, name: str = member.name) -> Any:
                nonlocal longest
                start = time.perf_counter()
                out = service(now)
                took = time.perf_counter() - start
                if took > longest[0]:
                    longest = (took, name, now - ls.t0)
                return out

            agent.service = timed  # type: ignore[method-assign]
        ls.run(sim_seconds)
        return longest
    finally:
        ls.close()


def _longest_service_cold(arena_name: str, sim_seconds: float) -> tuple[float, str, float]:
    """:func:`_longest_service` in a fresh interpreter, as an agent starts: nothing that a
    process builds once (and caches) is built yet."""
    code = ("import json, sys; from tools.bench.lockstep import _longest_service; "
            "print(json.dumps(_longest_service(sys.argv[1], float(sys.argv[2]))))")
    out = subprocess.run([sys.executable, "-c", code, arena_name, str(sim_seconds)],
                         capture_output=True, text=True, check=True, timeout=600,
                         cwd=Path(__file__).resolve().parents[2])
    took, who, at = json.loads(out.stdout.strip().splitlines()[-1])
    return float(took), str(who), float(at)


def _world_rtf(arena_name: str, sim_seconds: float) -> tuple[float, float]:
    """RTF of the world alone (open-loop drive at 30 Hz, advanced every STEP), and of
    bare physics in it."""
    world = World(load_arena(shipped_arena(arena_name)), t0=0.0)
    try:
        _start_driving(world, 0.001)
        t, k, next_drive = 0.0, 0, 1.0 / 30.0
        start = time.perf_counter()
        while t < sim_seconds:
            t = round(t + STEP, 6)
            world.advance_to(t)
            if t >= next_drive:
                _drive_all(world, t, k)
                k += 1
                next_drive += 1.0 / 30.0
        wall = time.perf_counter() - start
        return sim_seconds / wall, 1.0 / _physics_floor(world, min(sim_seconds, 2.0))
    finally:
        world.close()


def _room(filename: str) -> str:
    if filename.startswith("~") or filename.startswith("<"):
        return "C (pybullet, numpy, builtins)"
    for room in ROOMS:
        if f"/{room}/" in filename and "site-packages" not in filename:
            return room
    return "libraries"


def _where_time_goes(arena_name: str, sim_seconds: float) -> dict[str, float]:
    """Own time per room over ``sim_seconds`` of a lockstep run, as fractions."""
    ls = Lockstep(load_arena(shipped_arena(arena_name)), seed=1)
    try:
        ls.run(2.0)
        profile = cProfile.Profile()
        profile.enable()
        ls.run(sim_seconds)
        profile.disable()
    finally:
        ls.close()
    by_room: dict[str, float] = defaultdict(float)
    for func in pstats.Stats(profile).get_stats_profile().func_profiles.values():
        by_room[_room(func.file_name)] += func.tottime
    total = sum(by_room.values()) or 1.0
    return {room: round(t / total, 3) for room, t in sorted(by_room.items(),
                                                             key=lambda kv: -kv[1])}


def run(quick: bool) -> list[dict[str, Any]]:
    sim = 5.0 if quick else 20.0
    cases = []
    for arena_name, target in TARGETS.items():
        rtf, agents = _lockstep_rtf(arena_name, sim)
        world_rtf, physics_rtf = _world_rtf(arena_name, min(sim, 10.0))
        cases.append({
            "case": f"lockstep {arena_name}",
            "agents": agents,
            "sim_s": sim,
            "rtf": round(rtf, 2),
            "world_only_rtf": round(world_rtf, 2),
            "physics_only_rtf": round(physics_rtf, 2),
            "ratio": round(rtf / world_rtf, 3),
            "target_rtf": target,
            "meets_target": rtf >= target,
            "own_time": _where_time_goes(arena_name, 2.0 if quick else 5.0),
        })
        took, who, at = _longest_service_cold(arena_name, sim)
        cases.append({
            "case": f"longest agent service call {arena_name}",
            "longest_s": round(took, 4), "agent": who, "at_s": round(at, 2), "sim_s": sim,
            "target_s": round(DRIVE_PERIOD, 4), "meets_target": took <= DRIVE_PERIOD,
            "note": "from the start, start-up included; one thread, so uncontended",
        })
    return cases
