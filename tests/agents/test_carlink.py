"""The car adapter's decision policy: re-arm by a deliberate gesture after a refused ARM."""

from __future__ import annotations

from agents.carlink import CarAdapter
from protocol.mz01.firmware import EventKind, FirmwareModel
from protocol.mz01.session import ControllerSession, SessionConfig, SessionState
from tests.support.carbench import Bench, SimCar


def test_a_refused_arm_is_retried_by_a_new_gesture_and_the_car_drives() -> None:
    car = SimCar(FirmwareModel(3, boot_nonce=0xABCD0001, token=9))
    car.model.set_health(motor_ok=True, camera_ok=False)  # ARM refused: unhealthy...
    bench = Bench(car)
    session = ControllerSession(SessionConfig(robot_id=3))
    bench.add_controller(session)
    adapter = CarAdapter(session)
    bench.run_until(1.0)

    def decide(now: float) -> None:
        if round(now * 1000) % 100 == 0:  # the agent wants motion, at 10 Hz, always
            adapter.set_decision(0.5, 0.5, now)
        if abs(now - 2.0) < 1e-9:
            car.model.set_health(motor_ok=True, camera_ok=True)  # ...until the camera is back

    bench.run_until(4.0, decide)
    assert session.state is SessionState.DRIVING and car.model.armed
    assert car.model.wheels == (0.5, 0.5)
    arms = [e for _, e in bench.car_events if e.kind is EventKind.ARMED]
    assert len(arms) == 1


def test_an_arm_lost_on_the_way_is_retried() -> None:
    car = SimCar(FirmwareModel(3, boot_nonce=0xABCD0001, token=9))
    lost = {"n": 0}

    def drop(direction: str, data: bytes) -> bool:
        if direction == "up" and len(data) == 32 and data[5] == 2 and lost["n"] == 0:
            lost["n"] += 1  # the first ARM never arrives
            return True
        return False

    bench = Bench(car, drop=drop)
    session = ControllerSession(SessionConfig(robot_id=3))
    bench.add_controller(session)
    adapter = CarAdapter(session)
    bench.run_until(1.0)
    bench.run_until(3.0, lambda now: adapter.set_decision(0.5, 0.5, now)
                    if round(now * 1000) % 100 == 0 else None)
    assert lost["n"] == 1 and car.model.armed and session.state is SessionState.DRIVING
