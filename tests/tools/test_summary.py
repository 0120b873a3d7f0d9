"""The end-of-run summary counts what the decoder rejected and what the reputation refused."""

from __future__ import annotations

from pathlib import Path

from protocol.runlog import RunLog, log_path
from tests.support.clock import FakeClock
from tools.summary import REPUTATION, summarize


def test_rejections_by_reason_include_the_reputations_refusals(tmp_path: Path) -> None:
    clock = FakeClock(10.0)
    log = RunLog(log_path(tmp_path, "hazel"), "hazel", clock)
    log.log("start", name="hazel")
    log.log("rx", ok=False, reason="bad_mac", count=3)
    log.log("refused", reason="implausible_speed", count=1)
    for outcome in ("fused", "distrusted", "distrusted", "no_new_information"):
        clock.advance(0.5)
        log.log("peer_track", peer="walnut", outcome=outcome)
    log.close()
    (hazel,) = summarize(tmp_path, ["hazel"]).agents
    assert hazel.rejected == {"bad_mac": 3, "implausible_speed": 1, REPUTATION: 2}
