"""The reference model against the golden vectors, and the vector files themselves."""

from __future__ import annotations

import itertools
import struct

import pytest

from protocol.mz01 import FirmwareModel, Outgoing, Reason, parse_telemetry
from tools.vectors.mz01 import scenarios
from tools.vectors.mz01_format import (
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
)

COMMITTED_JSON = JSON_PATH.read_text(encoding="utf-8")
COMMITTED_TXT = TXT_PATH.read_text(encoding="utf-8")
VECTORS = load_json(COMMITTED_JSON)
PROBE_SRC = ("127.0.0.42", 4211)


def bits(x: float) -> bytes:
    return struct.pack(">f", x)


def observed(car: FirmwareModel) -> tuple[object, ...]:
    s = car.state
    return (
        s.armed, s.estop, s.token, bits(s.left), bits(s.right), s.bound, s.telemetry_to,
        s.last_seq, s.last_feed_us, s.last_telemetry_us, s.motor_ok, s.camera_ok, s.reason,
    )  # fmt: skip


def expected(w: State) -> tuple[object, ...]:
    return (
        w.armed, w.estop, w.token, bits(w.left), bits(w.right), w.bound, w.telemetry_to,
        w.last_seq, w.last_feed_us, w.last_telemetry_us, w.motor_ok, w.camera_ok, w.reason,
    )  # fmt: skip


def check_sent(outgoing: tuple[Outgoing, ...], want: tuple[tuple[str, int], ...],
               state: State, t_us: int, where: str) -> None:
    assert tuple(o.dst for o in outgoing) == want, where
    for o in outgoing:  # the telemetry describes the state after the step
        t = parse_telemetry(o.data)
        assert (t.armed, t.estop, t.token, t.reason, t.uptime_ms) == (
            state.armed, state.estop, state.token, state.reason, t_us // 1000,
        ), where  # fmt: skip


def run(sc: Scenario) -> None:
    b = sc.boot
    car = FirmwareModel(b.robot_id, b.nonce, b.token, b.motor_ok, b.camera_ok)
    for i, step in enumerate(sc.steps):
        where = f"{sc.name} step {i}: {step}"
        if isinstance(step, Rx):
            result = car.receive_datagram(step.data, step.src, step.t_us)
            assert (result.accepted, result.reason) == (step.accept, step.reason), where
            assert observed(car) == expected(step.state), where
            check_sent(result.outgoing, step.sent, step.state, step.t_us, where)
        elif isinstance(step, Tick):
            result = car.tick(step.t_us)
            assert observed(car) == expected(step.state), where
            check_sent(result.outgoing, step.sent, step.state, step.t_us, where)
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
    fields = {"scenario": 2, "boot": 6, "health": 4, "rx": 21, "tick": 16, "probe": 4, "end": 1}
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
    ticked = {s.state.reason for sc in VECTORS for s in sc.steps if isinstance(s, Tick)}
    only_disarms = {Reason.WATCHDOG, Reason.STOP, Reason.ESTOP}
    assert rejected == {r.value for r in Reason if r not in only_disarms}
    assert only_disarms | {Reason.UNHEALTHY} <= ticked


def test_every_kind_is_accepted_and_rejected_somewhere() -> None:
    for kind in range(1, 6):
        verdicts = {s.accept for s in _rx_steps() if len(s.data) == 32 and s.data[5] == kind}
        assert verdicts == {True, False}, kind


def _offsets(kind: int, accept: bool) -> set[int]:
    """int32(stamp − uptime_ms) of every well-formed ``kind``, computed here from the bytes."""
    out = set()
    for s in _rx_steps():
        if len(s.data) == 32 and s.data[:4] == b"MZ01" and s.data[5] == kind and s.accept == accept:
            stamp = struct.unpack(">I", s.data[20:24])[0]
            d = (stamp - s.t_us // 1000) % 2**32
            out.add(d - 2**32 if d >= 2**31 else d)
    return out


@pytest.mark.parametrize("kind", [2, 3], ids=["arm", "drive"])
def test_stamp_window_edges_are_covered(kind: int) -> None:
    assert {-100, 30} <= _offsets(kind, True)
    assert {-101, 31} <= _offsets(kind, False)


def test_stamp_wrap_is_covered() -> None:
    arms = [s for s in _rx_steps() if s.accept and s.data[5:6] == b"\x02"]
    wraps = [s for s in arms if abs(struct.unpack(">I", s.data[20:24])[0] - s.t_us // 1000) > 2**31]
    assert len(wraps) >= 3


def test_stop_and_estop_with_junk_are_accepted() -> None:
    """Item 9: bad wheels (NaN, Inf, > 1), flag bits and robot id 0 do not keep a STOP out."""
    junk = [
        s for s in _rx_steps()
        if s.accept and len(s.data) == 32 and s.data[5] in (4, 5) and s.data[4] == 0
        and struct.unpack(">H", s.data[6:8])[0] != 0
        and not all(abs(w) <= 1.0 for w in struct.unpack(">ff", s.data[24:32]))
    ]  # fmt: skip
    assert {s.data[5] for s in junk} == {4, 5}


def test_late_drive_gets_only_the_rest_of_its_lease() -> None:
    """Item 8: some accepted DRIVE's lease starts at its stamp, before its arrival."""
    late = [s for s in _rx_steps() if s.accept and s.data[5:6] == b"\x03"
            and s.state.last_feed_us < s.t_us]  # fmt: skip
    assert late


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
            if (before.state.armed and after.state.reason == "watchdog"
                    and after.t_us - before.t_us == 1):  # fmt: skip
                return
    pytest.fail("no tick at 299.999 ms still armed followed by the disarm at 300 ms")
