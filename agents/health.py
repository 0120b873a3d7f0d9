"""What is wrong with this agent, in one line each (sans-IO).

The runtime reports what it sees (a datagram that failed the MAC, the car's
telemetry and session state, a wall tag in view, a camera frame, the peers);
:meth:`Health.check` says which conditions hold now. Each condition is
announced once when it starts and once when it clears, and the ones that
hold are listed by ``stigmesh status``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Address = tuple[str, int]

BAD_MAC_FOR = 2.0  # s of datagrams failing the MAC from one address
ARM_REFUSED_FOR = 5.0  # s connected to the car without being armed
NO_TAG_FOR = 10.0  # s without a wall tag in camera mode
CLOCK_UNSYNCED_FOR = 10.0  # s connected without a converged clock to the car
NO_PEER_FOR = 15.0  # s after start with no confirmed peer
CAMERA_STALE_FOR = 3.0  # s without a camera frame
NO_GYRO_FOR = 5.0  # s of the car's telemetry without a gyro reading


def _gap(last: float, seen: float, since: float | None) -> float:
    """Seconds up to ``last`` without a thing last ``seen``, counted from ``since``, the first
    chance to see it (-inf before there was one)."""
    return -math.inf if since is None else last - max(seen, since)


@dataclass(frozen=True)
class Warning:
    key: str  # stable name of the condition, e.g. "bad_mac:192.168.1.23"
    text: str  # one line, with the likely fix


@dataclass
class Health:
    """Observations and the conditions they imply; ``camera`` when the agent uses one."""

    started: float
    camera: bool = False
    expect_car_id: int | None = None
    _bad_mac: dict[str, tuple[float, float]] = field(default_factory=dict)  # first, last
    _car_connected: float | None = None
    _car_state: str = "connecting"
    _car_reason: str = ""
    _car_synced: bool = False
    _car_round_trip: float | None = None  # s: the best clock probe's, None without one
    _car_round_trip_limit: float = math.inf  # s: the most that lets the clock converge
    _car_id: int | None = None
    _boot: int | None = None
    _reboots: int = 0
    _last_tag: float = -math.inf
    _last_frame: float = -math.inf
    _telemetry_since: float | None = None
    _last_telemetry: float = -math.inf
    _last_gyro: float = -math.inf
    _gyro_since: float | None = None  # the first gyro reading
    _last_angle: float = -math.inf
    _peer_seen: bool = False
    _active: dict[str, Warning] = field(default_factory=dict)

    # ------------------------------------------------------------------ observations

    def bad_mac(self, addr: Address, now: float) -> None:
        first, last = self._bad_mac.get(addr[0], (now, now))
        if now - last > BAD_MAC_FOR:  # a new spell
            first = now
        self._bad_mac[addr[0]] = (first, now)
        if len(self._bad_mac) > 64:  # keep the newest senders only
            oldest = min(self._bad_mac, key=lambda a: self._bad_mac[a][1])
            del self._bad_mac[oldest]

    def car(self, now: float, view: tuple[str, bool, int | None, str], boot: int | None) -> None:
        """The car link's view (session state, clock synced, telemetry's robot id and last
        refusal reason) and the car's boot nonce."""
        state, synced, robot_id, reason = view
        if self._car_connected is None and state != "connecting":
            self._car_connected = now
        self._car_state, self._car_synced, self._car_reason = state, synced, reason
        if robot_id is not None:
            self._car_id = robot_id
        if boot is not None:
            if self._boot is not None and boot != self._boot:
                self._reboots += 1
            self._boot = boot

    def car_clock(self, round_trip: float | None, limit: float) -> None:
        """The car clock probes: the best round trip kept (None: none answered in time), and
        the most one may take for the clock to converge."""
        self._car_round_trip, self._car_round_trip_limit = round_trip, limit

    def telemetry(self, now: float, gyro: bool, angle: bool = False) -> None:
        """A telemetry object from the car, with a gyro reading or without (``null``), and
        with the gyro's integrated angle or without."""
        if self._telemetry_since is None:
            self._telemetry_since = now
        self._last_telemetry = now
        if gyro:
            self._last_gyro = now
            if self._gyro_since is None:
                self._gyro_since = now
        if angle:
            self._last_angle = now

    def tag_seen(self, now: float) -> None:
        self._last_tag = now

    def frame(self, now: float) -> None:
        self._last_frame = now

    def peers(self, confirmed: int) -> None:
        self._peer_seen = self._peer_seen or confirmed > 0

    # ------------------------------------------------------------------ conditions

    def conditions(self, now: float) -> list[Warning]:
        out: list[Warning] = []
        for addr, (first, last) in sorted(self._bad_mac.items()):
            if now - last <= BAD_MAC_FOR and last - first >= BAD_MAC_FOR:
                out.append(Warning(f"bad_mac:{addr}", f"datagrams from {addr} fail the MAC for "
                                   f"{last - first:.0f} s: wrong swarm key on {addr}?"))
        connected = self._car_connected
        if connected is not None:
            if self._car_state in ("ready", "arming") and now - connected > ARM_REFUSED_FOR:
                if not self._car_synced and not self._car_reason:
                    out.append(Warning("car_not_armed", "the car is not armed: no ARM is sent "
                                       "before the clock offset to the car converges"))
                else:
                    why = f" (last refusal: {self._car_reason})" if self._car_reason else ""
                    out.append(Warning("car_not_armed", f"the car does not arm{why}: another "
                                       "controller may hold it, or its token is stale; "
                                       "`stigmesh car ADDR status` shows who"))
            if not self._car_synced and now - connected > CLOCK_UNSYNCED_FOR:
                out.append(Warning("car_clock", self._clock_text()))
        if self.expect_car_id is not None and self._car_id not in (None, self.expect_car_id):
            out.append(Warning("car_id", f"the car reports robot id {self._car_id}, the config "
                               f"expects {self.expect_car_id}: is this the right car?"))
        gyro_gaps = (  # (key, seconds of telemetry without it, the warning's text)
            ("no_gyro", _gap(self._last_telemetry, self._last_gyro, self._telemetry_since),
             "the car's telemetry has had no gyro reading for {:.0f} s: the heading rests "
             "on the wheels, which slip in turns; add an MPU-6050 on its I2C bus "
             "(firmware/README.md, \"A gyro\")"),
            ("no_gyro_angle", _gap(self._last_gyro, self._last_angle, self._gyro_since),
             "the car's gyro readings have come without gyro_angle for {:.0f} s: its "
             "firmware predates it, and 10 Hz rate samples miss turns; flash the sketch in "
             "firmware/esp32/stigmesh_car"))
        for key, without, text in gyro_gaps:
            if without > NO_GYRO_FOR:
                out.append(Warning(key, text.format(without)))
        if self._reboots:
            out.append(Warning("car_rebooted", f"the car rebooted {self._reboots} time(s) "
                               "during this run: check its power"))
        if self.camera:
            since = max(self._last_frame, self.started)
            if now - since > CAMERA_STALE_FOR:
                out.append(Warning("camera_stale", f"no camera frame for {now - since:.0f} s: "
                                   "is the car's stream on TCP 8080 reachable?"))
            seen = max(self._last_tag, self.started)
            if now - seen > NO_TAG_FOR:
                out.append(Warning("no_tag", f"no wall tag seen for {now - seen:.0f} s: are "
                                   "the site's tags in view and the camera focused?"))
        if not self._peer_seen and now - self.started > NO_PEER_FOR:
            out.append(Warning("no_peer", f"no peer found after {NO_PEER_FOR:.0f} s: same swarm "
                               "name, key and port, and broadcast reaching this interface?"))
        return out

    def _clock_text(self) -> str:
        rtt, limit = self._car_round_trip, self._car_round_trip_limit
        if rtt is None:
            return ("the clock offset to the car does not converge: no probe on UDP 4211 was "
                    "answered in time (blocked, lost, or round trips over 250 ms?)")
        return (f"the clock offset to the car does not converge: the best probe round trip "
                f"is {1000 * rtt:.0f} ms and arming needs one under {1000 * limit:.0f} ms "
                "(Wi-Fi congested, the car far from the access point, or its modem asleep?)")

    def check(self, now: float) -> tuple[list[Warning], list[Warning]]:
        """(conditions that started, conditions that cleared) since the last check."""
        current = {w.key: w for w in self.conditions(now)}
        started = [w for k, w in current.items() if k not in self._active]
        cleared = [w for k, w in self._active.items() if k not in current]
        self._active = current
        return started, cleared

    @property
    def active(self) -> list[Warning]:
        return list(self._active.values())
