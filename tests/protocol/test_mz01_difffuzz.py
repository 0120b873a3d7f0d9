"""The differential fuzzer: the C core and the Python model agree, and it can tell when not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tools.vectors import difffuzz
from tools.vectors.difffuzz import DEFAULT_BINARY, ROOT, fuzz, reproducer, run_batch, same_line

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


@pytest.fixture(scope="module")
def binary() -> Path:
    difffuzz.build(DEFAULT_BINARY)
    return DEFAULT_BINARY


def test_short_run_finds_no_mismatch(binary: Path) -> None:
    report = fuzz(binary, sequences=3000, seed=20240601)
    assert report.steps > 50_000 and report.accepted > 5_000 and report.disarms > 2_000
    assert report.mismatching_steps == 0, report.mismatches[:3]


def test_a_mutant_core_is_caught(binary: Path, tmp_path: Path) -> None:
    """The watchdog firing 1 µs late is a real difference the fuzzer must see."""
    src = (ROOT / "firmware/core/mz01_core.c").read_text()
    edge = "now_us - car->last_feed_us >= MZ01_WATCHDOG_US"
    assert src.count(edge) == 1
    (tmp_path / "mz01_core.c").write_text(src.replace(edge, edge.replace(">=", ">")))
    mutant = tmp_path / "mz01_diff"
    subprocess.run(
        ["cc", "-O1", "-std=c11", f"-I{ROOT / 'firmware/core'}",
         str(ROOT / "firmware/test/mz01_diff.c"), str(tmp_path / "mz01_core.c"), "-o", str(mutant)],
        check=True,
    )  # fmt: skip
    report = fuzz(mutant, sequences=1000, seed=5)
    assert report.mismatching_steps > 0
    first = report.mismatches[0]
    assert reproducer(5, first.sequence)[first.step] == first.input


def test_comparison_reads_telemetry_as_objects() -> None:
    head = "tick 1 0 7 3dcccccd 00000000 - 127.0.0.1:5 1 0 100 1 1 - 127.0.0.1:5"
    common = '"id":7,"boot":1,"token":7,"uptime_ms":0,"armed":true,"estop":false,"reason":""'
    tail = '"rssi":0,"camera_ok":true,"motor_ok":true,"seq":1,"gyro_z":null'
    python = f'{head} {{{common},{tail},"duty":[0.10000000149011612,0.0]}}'
    c_text = f'{head} {{{common},"rssi":0,"camera_ok":true,"motor_ok":true,"seq":1,' \
             f'"duty":[0.100000001,0],"gyro_z":null}}'
    assert same_line(python, c_text)  # %.9g text of the same binary32, keys in another order
    assert not same_line(python, c_text.replace('"seq":1', '"seq":2'))
    assert not same_line(python, c_text.replace("0.100000001", "0.10000001"))  # next binary32
    assert not same_line(python, c_text.replace(" 1 1 - 127", " 1 0 - 127"))
    assert not same_line("health 1 0 7", "health 1 0 8")


def test_driver_refuses_a_malformed_step(binary: Path) -> None:
    with pytest.raises(RuntimeError, match="exited 2"):
        run_batch(binary, ["boot 7 1 2 1 1", "rx 5 not-an-ip 1 -"])
    assert run_batch(binary, ["boot 7 1 2 1 1", "tick 5"])[1].startswith("tick 0 0 2 ")
