"""Beliefs move only through datagrams: a robot that can never see the target tracks it
from its peer's messages alone (real processes; a partition blocks hazel's view)."""

from __future__ import annotations

import bisect
import math
import statistics
from pathlib import Path

import pytest

from protocol.runlog import log_path, read_run_log
from tests.system.conftest import BACKSTOP, RunLogs, make_swarm, private_swarm_args, wait_for

# Each wait below has its own deadline; this bounds the whole test on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
ARENA = Path(__file__).parent / "arenas" / "partition.toml"
RUN = 25.0  # s of hazel's run the test looks at; the track error counts after 10 s


def test_the_blind_robot_tracks_the_target_through_fused_messages(tmp_path: Path) -> None:
    swarm = make_swarm(tmp_path, ARENA)
    args = private_swarm_args()
    live = RunLogs(swarm.run_dir)

    def hazel_ran(seconds: float) -> bool:
        start = live.events("hazel", "start")
        return bool(start) and any(b["t"] > start[0]["t"] + seconds
                                   for b in live.events("hazel", "belief"))

    try:
        # No fixed run length: the agents run until hazel has logged 25 s of beliefs.
        procs = [swarm.start_world(duration=BACKSTOP)]
        procs += [swarm.start_agent(n, duration=BACKSTOP, extra=args) for n in ("walnut", "hazel")]
        wait_for(lambda: hazel_ran(RUN), RUN + 90, f"{RUN:g} s of hazel's beliefs", procs,
                 every=0.5)
        codes = swarm.stop("walnut", "hazel")
        assert codes == {"walnut": 0, "hazel": 0}, (procs[1].tail(), procs[2].tail())
    finally:
        swarm.stop_all()
    run = swarm.run_dir
    truth_t, truth_xy = [], []
    for line in read_run_log(log_path(run, "world")):
        if line["event"] == "truth":
            truth_t.append(line["t"])
            truth_xy.append((line["target"]["x"], line["target"]["y"]))
    hazel = list(read_run_log(log_path(run, "hazel")))
    walnut = list(read_run_log(log_path(run, "walnut")))
    assert not [line for line in hazel if line["event"] == "detection"], "hazel saw it"
    assert [line for line in walnut if line["event"] == "detection"]
    fused = [line for line in hazel if line["event"] == "peer_track" and line["fused"]]
    start = next(line["t"] for line in hazel if line["event"] == "start")
    errors = []
    for b in hazel:
        if b["event"] == "belief" and "track" in b and b["t"] > start + 10:
            t, (x, y) = b["track"]["t"], b["track"]["x"][:2]
            i = min(bisect.bisect_left(truth_t, t), len(truth_t) - 1)
            errors.append(math.hypot(x - truth_xy[i][0], y - truth_xy[i][1]))
    median = statistics.median(errors)
    print(f"hazel (never saw the target) fused {len(fused)} TRACKs from walnut; track error "
          f"after 10 s: median {median:.2f} m, max {max(errors):.2f} m over {len(errors)} s")
    assert len(errors) >= 10 and median < 0.5
