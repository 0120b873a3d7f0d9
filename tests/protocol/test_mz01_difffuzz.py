"""The differential fuzzer: the C core and the Python model agree, and it can tell when not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from protocol.mz01 import Command, Kind, encode_command
from protocol.mz01.firmware import FirmwareModel
from protocol.mz01.packet import to_binary32
from protocol.mz01.telemetry import parse_telemetry
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


def test_the_gyro_reaches_both_telemetries_alike(binary: Path) -> None:
    """A ``sensors`` step sets gyro_z and gyro_angle (binary32 bits) for the telemetry
    that follows, in the C driver as in the model; the reader's angle bound holds on
    the C text at the largest binary32 within it."""
    hello = encode_command(Command(7, Kind.HELLO, boot_nonce=1, session_token=2)).hex()
    lines = ["boot 7 1 2 1 1", "sensors 5 bf000000 40490ff9", f"rx 6 127.0.0.10 40000 {hello}",
             "sensors 7 - -", "tick 100006"]  # fmt: skip
    out = run_batch(binary, lines)
    assert out[1].startswith("sensors 0 0 2 ")
    first = parse_telemetry(out[2].rpartition(" ")[2].encode())
    assert first.gyro_z == -0.5 and first.gyro_angle is not None
    assert to_binary32(first.gyro_angle) == to_binary32(3.1416) <= 3.1416
    assert out[2].endswith(',"gyro_z":-0.5,"gyro_angle":3.14159989}')
    assert out[4].endswith(',"gyro_z":null,"gyro_angle":null}')
    model = FirmwareModel(7, 1, 2, True, True)
    model.set_sensors(gyro_z=-0.5, gyro_angle=to_binary32(3.1416))
    reply = model.receive_datagram(bytes.fromhex(lines[2].split()[4]), ("127.0.0.10", 40000), 6)
    python, c_first = f"x {reply.outgoing[0].data.decode()}", f"x {out[2].rpartition(' ')[2]}"
    assert same_line(python, c_first)
    assert not same_line(python, c_first.replace("3.14159989", "3.14159966"))  # next binary32
    assert not same_line(python, c_first.replace("-0.5,", "-0.49999997,"))
    assert not same_line(python, f"x {out[4].rpartition(' ')[2]}")


def test_driver_refuses_a_malformed_step(binary: Path) -> None:
    with pytest.raises(RuntimeError, match="exited 2"):
        run_batch(binary, ["boot 7 1 2 1 1", "rx 5 not-an-ip 1 -"])
    assert run_batch(binary, ["boot 7 1 2 1 1", "tick 5"])[1].startswith("tick 0 0 2 ")
