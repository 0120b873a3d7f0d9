"""The reference model against the golden vectors, and the vector files themselves."""

from __future__ import annotations

import itertools
import struct

import pytest

from protocol.mz01 import FirmwareModel, Reason
from protocol.mz01.vectors import (
    JSON_PATH,
    TXT_PATH,
    Health,
    Note,
    Probe,
    Rx,
    Scenario,
    State,
    Tick,
    load_json,
    load_txt,
    render_json,
    render_txt,
    scenarios,
)

COMMITTED_JSON = JSON_PATH.read_text(encoding="utf-8")
COMMITTED_TXT = TXT_PATH.read_text(encoding="utf-8")
VECTORS = load_json(COMMITTED_JSON)
PROBE_SRC = ("127.0.0.42", 4211)


def bits(x: float) -> bytes:
    return struct.pack(">f", x)


def check_state(car: FirmwareModel, want: State, where: str) -> None:
    got = (car.armed, car.estop, car.token, bits(car.wheels[0]), bits(car.wheels[1]))
    assert got == (want.armed, want.estop, want.token, bits(want.left), bits(want.right)), where


def run(sc: Scenario) -> None:
    b = sc.boot
    car = FirmwareModel(b.robot_id, b.nonce, b.token, b.motor_ok, b.camera_ok)
    for i, step in enumerate(sc.steps):
        where = f"{sc.name} step {i}: {step}"
        if isinstance(step, Rx):
            result = car.receive_datagram(step.data, step.src, step.t_us)
            assert (result.accepted, result.reason) == (step.accept, step.reason), where
            if not step.accept:
                assert car.reason == step.reason, where
            check_state(car, step.state, where)
        elif isinstance(step, Tick):
            car.tick(step.t_us)
            check_state(car, step.state, where)
            assert car.reason == step.reason, where
        elif isinstance(step, Health):
            car.set_health(step.motor_ok, step.camera_ok)
        elif isinstance(step, Probe):
            out = car.receive_probe(step.request, PROBE_SRC, step.t_us)
            if step.reply is None:
                assert out is None, where
            else:
                assert out is not None and out.dst == PROBE_SRC, where
                assert out.data == step.reply, where


@pytest.mark.parametrize("sc", VECTORS, ids=[sc.name for sc in VECTORS])
def test_model_passes_vector(sc: Scenario) -> None:
    run(sc)


def test_committed_files_are_what_the_generator_writes() -> None:
    items = scenarios()
    assert render_json(items) == COMMITTED_JSON
    assert render_txt(items) == COMMITTED_TXT


def test_txt_and_json_hold_the_same_content() -> None:
    from_txt = load_txt(COMMITTED_TXT)
    assert render_json(from_txt) == COMMITTED_JSON
    assert render_txt(VECTORS) == COMMITTED_TXT
    assert [sc.name for sc in from_txt] == [sc.name for sc in VECTORS]


def test_txt_lines_follow_the_format() -> None:
    fields = {"scenario": 2, "boot": 6, "health": 4, "rx": 12, "tick": 8, "probe": 4, "end": 1}
    for line in COMMITTED_TXT.splitlines():
        assert line, "no blank lines"
        if line.startswith("#"):
            continue
        parts = line.split(" ")
        assert fields[parts[0]] == len(parts), line
        assert all(parts), f"one space between fields: {line!r}"


def test_times_never_go_back_and_names_are_unique() -> None:
    assert len({sc.name for sc in VECTORS}) == len(VECTORS)
    for sc in VECTORS:
        times = [s.t_us for s in sc.steps if not isinstance(s, Note)]
        assert times == sorted(times), sc.name


def _rx_steps() -> list[Rx]:
    return [s for sc in VECTORS for s in sc.steps if isinstance(s, Rx)]


def test_every_reason_is_exercised() -> None:
    rejected = {s.reason for s in _rx_steps() if not s.accept}
    ticked = {s.reason for sc in VECTORS for s in sc.steps if isinstance(s, Tick)}
    disarms = {Reason.WATCHDOG, Reason.STOP, Reason.ESTOP}
    assert rejected == {r.value for r in Reason if r not in disarms}
    assert disarms <= ticked


def test_every_kind_is_accepted_and_rejected_somewhere() -> None:
    for kind in range(1, 6):
        verdicts = {s.accept for s in _rx_steps() if len(s.data) == 32 and s.data[5] == kind}
        assert verdicts == {True, False}, kind


def _arm_offsets(accept: bool) -> set[int]:
    """int32(stamp − uptime_ms) of every well-formed ARM, computed here from the bytes."""
    out = set()
    for s in _rx_steps():
        if len(s.data) == 32 and s.data[:4] == b"MZ01" and s.data[5] == 2 and s.accept == accept:
            stamp = struct.unpack(">I", s.data[20:24])[0]
            d = (stamp - s.t_us // 1000) % 2**32
            out.add(d - 2**32 if d >= 2**31 else d)
    return out


def test_stamp_window_edges_are_covered() -> None:
    assert {-30, 150} <= _arm_offsets(True)
    assert {-31, 151} <= _arm_offsets(False)


def test_stamp_wrap_is_covered() -> None:
    arms = [s for s in _rx_steps() if s.accept and s.data[5:6] == b"\x02"]
    wraps = [s for s in arms if abs(struct.unpack(">I", s.data[20:24])[0] - s.t_us // 1000) > 2**31]
    assert len(wraps) >= 3


def test_probes_cover_valid_and_invalid() -> None:
    probes = [s for sc in VECTORS for s in sc.steps if isinstance(s, Probe)]
    assert any(p.reply is not None for p in probes)
    assert any(p.reply is None and len(p.request) != 8 for p in probes)
    assert any(p.reply is None and len(p.request) == 8 and p.request[:4] != b"MZC1" for p in probes)


def test_watchdog_edge_ticks_are_covered() -> None:
    """Somewhere a tick 1 µs before the disarm still finds the car armed."""
    for sc in VECTORS:
        ticks = [s for s in sc.steps if isinstance(s, Tick)]
        for before, after in itertools.pairwise(ticks):
            if before.state.armed and after.reason == "watchdog" and after.t_us - before.t_us == 1:
                return
    pytest.fail("no tick at 299.999 ms still armed followed by the disarm at 300 ms")
