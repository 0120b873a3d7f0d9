"""The world driven through the agent's own controller session (`stigmesh car drive`)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from protocol.runlog import log_path, read_run_log
from tests.support.sitlcar import firmware_args
from tests.worlds.rawcar import free_subnet, world_process
from tests.worlds.test_server import FIRMWARES, TOP_SPEED, _write_arena, physics_skipped


@FIRMWARES
def test_the_controller_session_drives_car_1_forward_and_car_2_stays(
    tmp_path: Path, firmware: str
) -> None:
    subnet = free_subnet()
    arena = _write_arena(tmp_path, subnet)
    run_dir = tmp_path / "run"
    with world_process(arena, run_dir, *firmware_args(firmware)) as world:
        result = subprocess.run(
            [sys.executable, "-m", "tools.cli", "car", f"{subnet}.1", "drive",
             "--left", "0.8", "--right", "0.8", "--for", "1.0"],
            capture_output=True, text=True, timeout=60, check=False,
        )
        rc, _, err = world.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    assert rc == 0, err
    truth = [line for line in read_run_log(log_path(run_dir, "world")) if line["event"] == "truth"]
    first, last = truth[0]["cars"], truth[-1]["cars"]
    (x0, y0, yaw0), (x1, y1, _) = ((c["x"], c["y"], c["yaw"]) for c in (first[0], last[0]))
    forward = (x1 - x0) * math.cos(yaw0) + (y1 - y0) * math.sin(yaw0)
    sideways = -(x1 - x0) * math.sin(yaw0) + (y1 - y0) * math.cos(yaw0)
    # physics the world skipped (a busy machine) cost at most the top speed for that long
    skipped = physics_skipped(run_dir, truth[0]["t"], truth[-1]["t"])
    print(f"car 1 moved {forward:.2f} m forward ({sideways:+.3f} m sideways) in a 1 s drive; "
          f"the world skipped {skipped:.3f} s of physics")
    assert 0.3 - TOP_SPEED * skipped < forward < 0.8 and abs(sideways) < 0.05
    moved2 = math.hypot(last[1]["x"] - first[1]["x"], last[1]["y"] - first[1]["y"])
    assert moved2 < 0.005
    arms = [line for line in read_run_log(log_path(run_dir, "world")) if line["event"] == "arm"]
    assert [a["car"] for a in arms] == [1]
