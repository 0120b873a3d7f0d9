"""Camera mode end to end: each agent localizes from wall AprilTags in its car's MJPEG
frames, detects the target, shares it; replay measures the error and the latency budget."""

from __future__ import annotations

import argparse
import json

import pytest

from protocol.runlog import log_path, read_run_log
from tests.system.conftest import BACKSTOP, RunLogs, private_swarm_args, wait_for
from tools.commands import replay as replay_main
from tools.procs import Swarm

pytestmark = pytest.mark.slow
RUN = 60.0  # s of each agent's run; the replay's track error counts after 20 s


@pytest.mark.timeout(300)  # each wait has its own deadline; this bounds the whole test
def test_two_camera_cars_localize_detect_share_and_replay(two_car_swarm: Swarm) -> None:
    swarm = two_car_swarm
    run = swarm.run_dir
    live = RunLogs(run)
    args = [*private_swarm_args(), "--sensing", "camera"]
    # No fixed run length: the agents run until each has logged RUN s of beliefs.
    procs = [swarm.start_world(duration=BACKSTOP, extra=["--sensing", "camera"])]
    procs += [swarm.start_agent(n, duration=BACKSTOP, extra=args) for n in ("walnut", "hazel")]

    def ran(name: str) -> bool:
        start = live.events(name, "start")
        return bool(start) and any(b["t"] > start[0]["t"] + RUN
                                   for b in live.events(name, "belief"))

    wait_for(lambda: ran("walnut") and ran("hazel"), RUN + 120,
             f"{RUN:g} s of both agents' beliefs", procs, every=1.0)
    codes = swarm.stop("walnut", "hazel")
    assert codes == {"walnut": 0, "hazel": 0}, (procs[1].tail(), procs[2].tail())
    swarm.stop_all()
    for name in ("walnut", "hazel"):
        log = list(read_run_log(log_path(run, name)))
        staged = [line for line in log if line["event"] == "obs" and "stages" in line]
        poses = [line for line in log if line["event"] == "pose_acquired"]
        detections = [line for line in log if line["event"] == "detection"]
        shared = [line for line in log if line["event"] == "tx" and line["kind"] == "track"]
        stats = next(line for line in log if line["event"] == "camera_stats")
        print(f"{name}: {stats['processed']} frames processed, {len(poses)} pose fixes "
              f"acquired, {len(detections)} target detections, {len(shared)} TRACKs sent; "
              f"camera rejects {stats['rejected']}")
        assert len(staged) > 300 and poses and len(detections) > 20 and shared
    parser = argparse.ArgumentParser()
    replay_main.add_arguments(parser)
    assert replay_main.main(parser.parse_args([str(run)])) == 0
    report = run / "report"
    metrics = json.loads((report / "metrics.json").read_text())
    text = (report / "report.md").read_text()
    assert "capture→drive" in text
    for name in ("walnut", "hazel"):
        after = metrics["agents"][name]["errors"]["position_error_after_settle_m"]
        print(f"{name}: camera-mode track error after 20 s: median {after['median']:.2f} m, "
              f"p95 {after['p95']:.2f} m")
        assert after["median"] < 0.5
