"""The agent's one-line warnings: each starts once, lists while it holds, clears once."""

from __future__ import annotations

from agents.health import Health

A = ("192.168.1.23", 47000)


def keys(h: Health, now: float) -> tuple[list[str], list[str]]:
    started, cleared = h.check(now)
    return [w.key for w in started], [w.key for w in cleared]


def test_wrong_key_is_named_after_two_seconds_of_bad_macs_and_clears() -> None:
    h = Health(started=0.0)
    for k in range(30):  # 3 s of datagrams failing the MAC, 10 a second
        h.bad_mac(A, k * 0.1)
    started, _ = h.check(2.95)
    assert [w.key for w in started] == ["bad_mac:192.168.1.23"]
    assert "wrong swarm key on 192.168.1.23?" in started[0].text
    assert keys(h, 3.0) == ([], [])  # announced once
    assert keys(h, 6.0) == ([], ["bad_mac:192.168.1.23"])  # quiet for 2 s: cleared
    h.bad_mac(A, 10.0)  # a new spell starts from zero
    assert keys(h, 10.5) == ([], [])


def test_one_bad_datagram_is_not_a_wrong_key() -> None:
    h = Health(started=0.0)
    h.bad_mac(A, 1.0)
    assert keys(h, 1.5) == ([], [])


def test_car_that_does_not_arm_and_a_clock_that_does_not_converge() -> None:
    h = Health(started=0.0)
    h.car(1.0, ("ready", False, 1, "token"), 7)
    assert keys(h, 5.9) == ([], [])
    started, _ = h.check(6.1)
    assert [w.key for w in started] == ["car_not_armed"] and "token" in started[0].text
    assert keys(h, 11.1) == (["car_clock"], [])
    h.car(12.0, ("driving", True, 1, ""), 7)
    assert sorted(keys(h, 12.0)[1]) == ["car_clock", "car_not_armed"]


def test_a_clock_that_does_not_converge_says_the_round_trip_it_has_and_needs() -> None:
    """A car link whose round trips are all 102 ms (the limit is 50): the session sends no
    ARM, and the warnings say why in numbers, not a guess."""
    h = Health(started=0.0)
    h.car(1.0, ("ready", False, 1, ""), 7)
    h.car_clock(0.102, 0.05)
    started, _ = h.check(11.1)
    text = {w.key: w.text for w in started}
    assert "no ARM is sent before the clock offset to the car converges" in text["car_not_armed"]
    assert "best probe round trip is 102 ms and arming needs one under 50 ms" in text["car_clock"]
    quiet = Health(started=0.0)
    quiet.car(1.0, ("ready", False, 1, ""), 7)
    quiet.car_clock(None, 0.05)
    assert "no probe on UDP 4211 was answered" in quiet.check(11.1)[0][-1].text


def test_wrong_robot_id_and_a_reboot() -> None:
    h = Health(started=0.0, expect_car_id=2)
    h.car(1.0, ("driving", True, 1, ""), 7)
    h.car(2.0, ("driving", True, 1, ""), 8)  # a new boot nonce
    started, _ = h.check(2.0)
    assert sorted(w.key for w in started) == ["car_id", "car_rebooted"]


def test_camera_tags_and_peers() -> None:
    h = Health(started=0.0, camera=True)
    for t in range(1, 12):
        h.frame(float(t))
    h.tag_seen(1.0)
    assert keys(h, 11.5) == (["no_tag"], [])
    assert keys(h, 15.5) == (["camera_stale", "no_peer"], [])
    h.peers(1)
    h.frame(16.0)
    h.tag_seen(16.0)
    assert sorted(keys(h, 16.0)[1]) == ["camera_stale", "no_peer", "no_tag"]


def test_a_car_without_a_gyro_is_named_and_one_that_has_one_is_not() -> None:
    h = Health(started=0.0)
    for k in range(60):  # 6 s of telemetry at 10 Hz, gyro_z null
        h.telemetry(k * 0.1, gyro=False)
    started, _ = h.check(6.0)
    assert [w.key for w in started] == ["no_gyro"]
    assert "MPU-6050" in started[0].text and "A gyro" in started[0].text
    h.telemetry(6.1, gyro=True)  # a reading: cleared
    assert keys(h, 6.2) == ([], ["no_gyro"])
    with_gyro = Health(started=0.0)
    for k in range(100):
        with_gyro.telemetry(k * 0.1, gyro=True, angle=True)
    assert keys(with_gyro, 10.0) == ([], [])
    silent = Health(started=0.0)  # no telemetry at all is another warning's business
    assert "no_gyro" not in keys(silent, 30.0)[0]


def test_a_firmware_without_the_gyro_angle_is_named() -> None:
    h = Health(started=0.0)
    for k in range(60):  # 6 s of gyro readings without an angle: an older firmware
        h.telemetry(k * 0.1, gyro=True, angle=False)
    started, _ = h.check(6.0)
    assert [w.key for w in started] == ["no_gyro_angle"]
    assert "firmware/esp32/stigmesh_car" in started[0].text and "\n" not in started[0].text
    h.telemetry(6.1, gyro=True, angle=True)
    assert keys(h, 6.2) == ([], ["no_gyro_angle"])
    current = Health(started=0.0)
    for k in range(100):
        current.telemetry(k * 0.1, gyro=True, angle=True)
    assert keys(current, 10.0) == ([], [])
    no_gyro = Health(started=0.0)  # no gyro at all: the no_gyro warning alone
    for k in range(60):
        no_gyro.telemetry(k * 0.1, gyro=False)
    assert [w.key for w in no_gyro.check(6.0)[0]] == ["no_gyro"]
