"""The controller session against the reference firmware model, in virtual time."""

from __future__ import annotations

import pytest

from protocol.mz01.firmware import EventKind, FirmwareModel
from protocol.mz01.packet import Command, Kind, decode_command, encode_command
from protocol.mz01.session import (
    ControllerSession,
    SessionConfig,
    SessionEvent,
    SessionState,
)
from tests.support.carbench import CONTROLLER, Bench, SimCar

ROBOT = 7


def make_bench(**kw: object) -> tuple[Bench, ControllerSession]:
    car = SimCar(FirmwareModel(ROBOT, boot_nonce=0xC0FFEE01, token=41), drift_ppm=300.0)
    bench = Bench(car, **kw)  # type: ignore[arg-type]
    session = ControllerSession(SessionConfig(robot_id=ROBOT))
    bench.add_controller(session)
    return bench, session


def drive_forward(bench: Bench, session: ControllerSession, until: float) -> None:
    """Neutral first, then motion: the gesture that arms the car."""
    start = bench.now

    def step(now: float) -> None:
        if now - start < 0.05:
            session.set_decision(0.0, 0.0, now)
        elif round(now * 1000) % 100 == 0:  # a fresh decision at 10 Hz
            session.set_decision(0.6, 0.6, now)

    bench.run_until(until, step)


def test_connects_synchronises_and_arms_on_the_gesture() -> None:
    bench, session = make_bench()
    bench.run_until(1.5)
    assert session.state is SessionState.READY
    assert session.synchronized_at_time(bench.now)
    assert not bench.car.model.armed  # no gesture yet: no ARM
    drive_forward(bench, session, 2.5)
    assert session.state is SessionState.DRIVING
    assert bench.car.model.armed and bench.car.model.wheels == pytest.approx((0.6, 0.6))


def test_clock_mapping_tracks_the_car_uptime() -> None:
    bench, session = make_bench(latency=0.004)
    bench.run_until(2.0)
    now = bench.now
    true_uptime = bench.car.uptime_us(now) / 1e6
    estimate = session.clock.local_to_remote(now, now)
    bound = session.clock.uncertainty_at_time(now)
    assert abs(estimate - true_uptime) <= bound <= 0.025


def test_unsynchronised_clock_prevents_arm() -> None:
    # Probe replies never arrive: telemetry flows but the clock never synchronises.
    bench, session = make_bench(drop=lambda direction, data: data[:4] == b"MZC1")
    bench.run_until(1.0)
    assert session.state is SessionState.READY
    assert not session.synchronized_at_time(bench.now)
    drive_forward(bench, session, 3.0)
    assert not any(kind == "arm" for _, _, kind, _ in bench.sent_log)
    assert not bench.car.model.armed


def test_wheels_zero_within_watchdog_plus_one_tick_after_the_last_accepted_drive() -> None:
    cut = {"on": False}
    bench, session = make_bench(drop=lambda direction, data: cut["on"] and direction == "up")
    bench.run_until(1.5)
    drive_forward(bench, session, 2.5)
    assert bench.car.model.wheels != (0.0, 0.0)
    cut["on"] = True  # the link dies: nothing reaches the car any more
    drive_forward(bench, session, 3.5)
    last_drive = max(
        t for t, e in bench.car_events if e.kind is EventKind.ACCEPTED and e.command is Kind.DRIVE
    )
    zero_at = min(t for t, w in bench.wheel_log if t > last_drive and w == (0.0, 0.0))
    assert zero_at - last_drive <= 0.300 + 0.005 + 1e-9
    disarm = [e for t, e in bench.car_events if e.kind is EventKind.DISARMED]
    assert disarm and disarm[-1].reason == "watchdog"


def test_never_sends_nonzero_wheels_on_an_expired_decision() -> None:
    bench, session = make_bench()
    bench.run_until(1.5)
    decisions: list[tuple[float, float]] = []

    def step(now: float) -> None:
        # Decide at 10 Hz for a second, then fall silent (a stalled planner).
        if now < 1.55:
            session.set_decision(0.0, 0.0, now)
        elif now < 2.5 and round(now * 1000) % 100 == 0:
            session.set_decision(0.5, -0.5, now)
            decisions.append((now, 0.5))

    bench.run_until(4.0, step)
    last_decision = decisions[-1][0]
    drives = [
        (t, decode_command(data))
        for t, _, kind, data in bench.sent_log
        if kind == "drive"
    ]
    assert drives, "the session should have driven"
    for t, cmd in drives:
        if t - last_decision > session.config.decision_lease:
            assert (cmd.left, cmd.right) == (0.0, 0.0), f"nonzero wheels at {t}"
    # The session keeps the car armed with zero wheels; the car never moves on stale input.
    assert bench.car.model.wheels == (0.0, 0.0)


def test_old_token_packets_are_rejected_after_any_disarm() -> None:
    bench, session = make_bench()
    bench.run_until(1.5)
    drive_forward(bench, session, 2.2)
    old = [data for _, _, kind, data in bench.sent_log if kind == "drive"][-1]
    old_token = decode_command(old).session_token
    bench.car.model.receive_datagram(
        bytes.fromhex("4d5a3031") + bytes([ROBOT, Kind.STOP]) + bytes(26),
        ("127.0.0.99", 1234),
        bench.car.uptime_us(bench.now),
    )
    assert bench.car.model.token == old_token + 1
    result = bench.car.model.receive_datagram(old, CONTROLLER, bench.car.uptime_us(bench.now))
    assert not result.accepted and result.reason == "bad_token"


def test_second_controller_cannot_drive_a_bound_car_but_can_stop_it() -> None:
    bench, first = make_bench()
    bench.run_until(1.5)
    drive_forward(bench, first, 2.0)
    assert first.state is SessionState.DRIVING
    # A second controller connects to the driving car. Its HELLO takes the telemetry
    # destination, but the car keeps sending telemetry to the controller it is bound to.
    intruder = ControllerSession(SessionConfig(robot_id=ROBOT))
    bench.add_controller(intruder, ("127.0.0.66", 40000))
    drive_forward(bench, first, 2.5)
    assert first.state is SessionState.DRIVING and intruder.state is SessionState.READY

    def both(now: float) -> None:
        first.set_decision(0.6, 0.6, now)
        intruder.set_decision(-1.0, 1.0, now) if now > 2.6 else intruder.set_decision(0, 0, now)

    bench.run_until(3.0, both)
    # The car is armed by the first controller: the intruder's gesture does not ARM.
    assert intruder.state is SessionState.READY
    assert not any(kind == "arm" and addr != CONTROLLER for _, addr, kind, _ in bench.sent_log)
    # Even a hand-made DRIVE with the current nonce, token and a fresh stamp is
    # refused: not bound.
    t = bench.car.model
    up = bench.car.uptime_us(bench.now)
    forged = encode_command(
        Command(ROBOT, Kind.DRIVE, 0, t.boot_nonce, t.token, 10**6, up // 1000, -1.0, 1.0)
    )
    result = t.receive_datagram(forged, ("127.0.0.66", 40000), up)
    assert not result.accepted and result.reason == "not_bound"
    assert bench.car.model.wheels == pytest.approx((0.6, 0.6))
    intruder.stop(bench.now)
    bench.run_until(3.2, both)
    disarms = [e for _, e in bench.car_events if e.kind is EventKind.DISARMED]
    assert not bench.car.model.armed and disarms[-1].reason == "stop"
    assert disarms[-1].src == ("127.0.0.66", 40000)
    # The disarm tells the former controller at once (and no periodic telemetry
    # follows), so it stops driving.
    bench.run_until(3.7, both)
    assert first.state is not SessionState.DRIVING
    faults = {e.event for addr, e in bench.session_events if addr == CONTROLLER}
    assert faults & {SessionEvent.CAR_DISARMED, SessionEvent.TELEMETRY_LOST}


def test_a_fault_consumes_the_gesture_until_neutral() -> None:
    bench, session = make_bench()
    bench.run_until(1.5)
    drive_forward(bench, session, 2.5)
    bench.car.model.receive_datagram(
        bytes.fromhex("4d5a3031") + bytes([ROBOT, Kind.STOP]) + bytes(26),
        ("127.0.0.99", 1234),
        bench.car.uptime_us(bench.now),
    )
    bench.run_until(3.5, lambda now: session.set_decision(0.6, 0.6, now))
    assert session.state is SessionState.READY and not bench.car.model.armed
    drive_forward(bench, session, 4.5)  # neutral, then motion: re-armed
    assert session.state is SessionState.DRIVING and bench.car.model.armed


def test_telemetry_timeout_ends_the_session_with_a_stop() -> None:
    cut = {"on": False}
    bench, session = make_bench(drop=lambda direction, data: cut["on"] and direction == "down")
    bench.run_until(1.5)
    drive_forward(bench, session, 2.5)
    cut["on"] = True
    t_cut = bench.now
    bench.run_until(3.5, lambda now: session.set_decision(0.6, 0.6, now))
    lost = [e for _, e in bench.session_events if e.event is SessionEvent.TELEMETRY_LOST]
    assert lost and lost[0].t - t_cut <= 0.35 + 0.1 + 0.01
    assert any(kind == "stop" and t >= lost[0].t for t, _, kind, _ in bench.sent_log)
    assert session.state is SessionState.CONNECTING and not bench.car.model.armed


def test_estop_latches_and_only_a_reset_clears_it() -> None:
    bench, session = make_bench()
    bench.run_until(1.5)
    drive_forward(bench, session, 2.5)
    session.estop(bench.now)
    bench.run_until(2.8)
    assert bench.car.model.estop and session.state is SessionState.ESTOPPED
    drive_forward(bench, session, 3.5)
    assert not bench.car.model.armed
    session.reset_estop(bench.now)
    bench.run_until(3.8)
    assert not bench.car.model.estop and session.state is SessionState.READY
    drive_forward(bench, session, 4.8)
    assert bench.car.model.armed


@pytest.mark.parametrize(
    "kwargs",
    [
        {"drive_hz": 19.0},
        {"drive_hz": 51.0},
        {"telemetry_timeout": 0.5},
        {"decision_lease": 0.31},
        {"robot_id": 256},
    ],
)
def test_configuration_looser_than_the_safety_defaults_is_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        SessionConfig(**kwargs)


def test_car_reboot_resets_the_clock_and_faults_the_session() -> None:
    bench, session = make_bench()
    bench.run_until(1.5)
    drive_forward(bench, session, 2.5)
    bench.car.model = FirmwareModel(ROBOT, boot_nonce=0x0BADBEEF, token=5)
    bench.car.boot_at = bench.now
    bench.run_until(3.5, lambda now: session.set_decision(0.6, 0.6, now))
    kinds = [e.event for _, e in bench.session_events]
    assert SessionEvent.TELEMETRY_LOST in kinds or SessionEvent.CAR_REBOOTED in kinds
    assert not bench.car.model.armed


def test_a_changed_decision_goes_out_at_once_or_10_ms_after_the_last_drive() -> None:
    bench, session = make_bench()
    bench.run_until(1.5)
    drive_forward(bench, session, 2.5)
    assert session.state is SessionState.DRIVING
    session.handle_timer(bench.now)
    session.datagrams_to_send()
    last = session._drive_sent[0]

    def drives(at: float, left: float, right: float) -> list[tuple[float, float]]:
        session.set_decision(left, right, at)
        session.handle_timer(at)
        sent = [decode_command(t.data) for t in session.datagrams_to_send() if t.kind == "drive"]
        return [(round(c.left, 3), round(c.right, 3)) for c in sent]

    assert drives(last + 0.005, 0.2, 0.7) == []  # 5 ms after a DRIVE: not yet ...
    assert session.get_timer() == last + 0.010  # ... but 10 ms after it, not at the 30 Hz slot
    assert drives(last + 0.010, 0.2, 0.7) == [(0.2, 0.7)]
    last = session._drive_sent[0]
    assert drives(last + 0.012, 0.2, 0.8) == [(0.2, 0.8)]  # 12 ms after: at once
    assert drives(last + 0.030, 0.2, 0.8) == []  # the same decision: nothing extra
    assert drives(last + 0.046, 0.2, 0.8) == [(0.2, 0.8)]  # the cadence goes on from there
