"""The simulation core: PyBullet physics, virtual cars and their firmware, sensors.

Time is an argument: :class:`World` never reads a clock. ``advance_to(t)``
steps physics at the arena's rate, ticks every car's firmware every 5 ms of
its own clock, takes sensor readings and ground truth; ``deliver`` hands a
datagram to a car endpoint at ``t``. The same core runs paced to real time
(``worlds.server``) or in virtual time inside one process.

Every call that moves time returns a :class:`Step`: the datagrams the cars
send and the log events (ground truth, firmware events, faults). Frames are
returned by :meth:`World.capture_frame` (or taken as a job to render elsewhere,
:meth:`World.frame_job`); any output it produced waits for the next ``Step``.

Each car's uptime runs from its own boot with a seeded offset and crystal
error: ``now_us = int((t - boot_time) * (1 + drift) * 1e6)``.

A car's firmware is the Python reference model (``firmware="model"``), ticked
and fed here, or the ESP32 sketch itself built for the host
(``firmware="sitl"``, :mod:`worlds.sitl`): that one runs in its own process
on the real clock and serves its own sockets; the world mirrors it from its
trace and drives the body from its motor outputs (``firmware_*`` methods).

Why one module of ~520 lines: it is one :class:`World`. Cars, target, physics
and firmware advance together on one clock; the bodies, sensors, camera, a
car's parts and the SITL bridge are their own modules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pybullet as p

from protocol.mz01 import Address, Event, EventKind, FirmwareModel, Kind, StepResult
from protocol.mz01.firmware import TELEMETRY_PERIOD_US, TICK_PERIOD_US
from worlds.arena import Arena
from worlds.bodies import Scene
from worlds.camera import CameraRenderer, frame_rng
from worlds.motion import MotionModel, TargetState, motion_model
from worlds.sensors import Landmark, Point3, observation
from worlds.sitl import SitlFirmware, Trace
from worlds.steps import CarFirmware, Counters, Frame, LogEvent, RenderJob, Send, Step, WorldError
from worlds.vcar import VirtualCar

__all__ = [
    "FIRMWARES", "PORT_CAMERA", "PORT_COMMAND", "PORT_PROBE", "CarFirmware", "Counters",
    "Frame", "LogEvent", "RenderJob", "Send", "Step", "VirtualCar", "World", "WorldError",
]  # fmt: skip

PORT_COMMAND = 4210
PORT_PROBE = 4211
PORT_CAMERA = 8080
TRUTH_PERIOD = 0.05  # ground truth at 20 Hz
FIRMWARES = ("model", "sitl")
TICK_PERIOD = TICK_PERIOD_US / 1e6
RESET_STARTUP = 0.3  # s from an ESP32 reset to setup() (Espressif: ~300 ms to app_main)


class World:
    """Every body, car and sensor of one arena, advanced by the caller's clock."""

    def __init__(
        self, arena: Arena, seed: int | None = None, t0: float = 0.0, firmware: str = "model"
    ) -> None:
        if firmware not in FIRMWARES:
            raise WorldError(f"firmware must be one of {FIRMWARES}, got {firmware!r}")
        self.firmware = firmware
        self.arena = arena
        self.seed = arena.seed if seed is None else seed
        self.t0 = t0
        self.t = t0
        self.client = p.connect(p.DIRECT)
        self._out = Step()
        self._closed = False
        try:
            self.scene = Scene(self.client, arena)
        except BaseException:
            self.close()
            raise
        self.dt = 1.0 / arena.physics.rate_hz
        self.t_phys = t0
        self.physics_steps = 0
        self.physics_skipped = 0.0
        self.motion: MotionModel | None = (
            motion_model(arena.target.motion) if arena.target is not None else None
        )
        self.target_state: TargetState | None = None
        self._set_target(t0)
        self.next_truth = t0
        self.landmarks = [Landmark(tag.id, tag.x, tag.y, tag.z, tag.yaw, -1) for tag in arena.tags]
        self.renderer = CameraRenderer(self.client, arena.camera, frame_rng(self.seed))
        self.cars: dict[int, VirtualCar] = {}
        for spec in arena.cars:
            car = VirtualCar(spec, self, np.random.default_rng([self.seed, spec.id]))
            self.cars[spec.id] = car
            self._log_boot(car, t0)

    # -- lookups ---------------------------------------------------------------

    def car(self, key: int | str) -> VirtualCar:
        for car in self.cars.values():
            if key in (car.id, car.spec.name):
                return car
        raise WorldError(f"no car {key!r}")

    def car_by_address(self, address: str) -> VirtualCar:
        for car in self.cars.values():
            if car.spec.address == address:
                return car
        raise WorldError(f"no car at {address}")

    # -- output ----------------------------------------------------------------

    def _log(self, t: float, event: str, **fields: Any) -> None:
        self._out.events.append(LogEvent(t, event, fields))

    def notice(self, car: int, what: str) -> None:
        """Tell the SITL host: ``car`` (re)boots (``"boot"``) or its link changed (``"link"``)."""
        self._out.notices.append((car, what))

    def drain(self) -> Step:
        """Take the datagrams and log events produced since the last call."""
        out, self._out = self._out, Step()
        return out

    def _send(self, car: VirtualCar, port: int, dst: Address, data: bytes, t: float) -> None:
        if car.link_up(t):
            car.counters.tx += 1
            self._out.sends.append(Send(car.id, port, dst, data))
        else:
            car.counters.dropped_out += 1

    # -- time --------------------------------------------------------------------

    def _set_target(self, t: float) -> None:
        if self.motion is None or self.scene.target is None:
            return
        self.target_state = self.motion.state(t - self.t0)
        self.scene.target.set_state(self.target_state)

    def advance_to(self, t: float) -> Step:
        """Run everything scheduled up to and including ``t``; returns the output."""
        self._run_until(t)
        return self.drain()

    def _run_until(self, t: float) -> None:
        """Advance time, keeping what it produces for the caller's next drain."""
        if t < self.t:
            raise WorldError(f"time cannot go back: {t} < {self.t}")
        while True:
            t_step = self.t_phys + self.dt
            t_next, what = t_step, "physics"
            if self.next_truth < t_next:
                t_next, what = self.next_truth, "truth"
            car_next: VirtualCar | None = None
            for car in self.cars.values():
                if car.next_tick < t_next:
                    t_next, what, car_next = car.next_tick, "tick", car
                if car.next_obs < t_next:
                    t_next, what, car_next = car.next_obs, "obs", car
            if t_next > t:
                break
            if what == "physics":
                self._set_target(t_step)
                p.stepSimulation(physicsClientId=self.client)
                self.t_phys = t_step
                self.physics_steps += 1
            elif what == "truth":
                self._truth(t_next)
                self.next_truth += TRUTH_PERIOD
            elif what == "tick":
                assert car_next is not None
                self._tick(car_next, t_next)
                car_next.next_tick += TICK_PERIOD
            else:
                assert car_next is not None
                self._observe(car_next, t_next)
                car_next.next_obs += 1.0 / self.arena.sensing.rate_hz
        self.t = t

    def skip_physics(self, t: float) -> float:
        """Let physics time jump to ``t`` without stepping (bodies hold still).

        A real-time driver that cannot keep up calls this instead of
        spiralling; firmware, sensors and truth still run for every instant.
        Returns the simulated seconds skipped.
        """
        steps = math.floor((t - self.t_phys) / self.dt)
        if steps <= 0:
            return 0.0
        skipped = steps * self.dt
        self.t_phys += skipped
        self.physics_skipped += skipped
        self._log(self.t, "physics_skip", skipped=skipped)
        return skipped

    # -- per-car work ------------------------------------------------------------

    def _sensor_values(self, car: VirtualCar) -> tuple[float | None, dict[str, Any] | None]:
        gyro = None
        if car.gyro is not None:
            _, rate = self.scene.cars[car.id].motion()
            gyro = round(car.gyro.read(rate), 6)
        return gyro, car.sim_obs if self.arena.sensing.mode == "synthetic" else None

    def _sensors_now(self, car: VirtualCar, t: float, fw: FirmwareModel) -> None:
        gyro, sim = self._sensor_values(car)
        angle = None
        if car.gyro is not None and self.arena.car_model.gyro_angle:
            yaw = self.scene.cars[car.id].pose()[2]
            angle = round(car.gyro.angle(yaw, t), 6)
        fw.set_sensors(rssi=0, gyro_z=gyro, sim=sim, gyro_angle=angle)

    def _tick(self, car: VirtualCar, t: float) -> None:
        fw = car.firmware
        if not car.online(t) or not isinstance(fw, FirmwareModel):
            return
        now_us = car.uptime_us(t)
        if now_us - fw.state.last_telemetry_us >= TELEMETRY_PERIOD_US:
            self._sensors_now(car, t, fw)
        self._handle(car, fw.tick(now_us), t)

    def _observe(self, car: VirtualCar, t: float) -> None:
        if self.arena.sensing.mode != "synthetic" or not car.online(t) or car.camera_frozen(t):
            return
        eye, yaw = self.scene.cars[car.id].camera()
        car.sim_obs = observation(
            car.uptime_us(t) // 1000,
            eye,
            yaw,
            tags=self.landmarks,
            target=self._target_landmark(),
            sensing=self.arena.sensing,
            cast=self._cast,
            rng=car.rng,
        )

    def _target_landmark(self) -> Landmark | None:
        target, state = self.scene.target, self.target_state
        if target is None or state is None:
            return None
        return Landmark(target.spec.tag_id, state.x, state.y, target.spec.height, None, target.body)

    def _cast(self, starts: Sequence[Point3], ends: Sequence[Point3]) -> list[int]:
        results = p.rayTestBatch(list(starts), list(ends), physicsClientId=self.client)
        return [int(r[0]) for r in results]

    def _handle(
        self, car: VirtualCar, res: StepResult, t: float, fw_t: float | None = None
    ) -> None:
        """A firmware step at ``t``; ``fw_t``: a SITL car's own time of it, logged beside."""
        extra = {} if fw_t is None else {"fw_t": fw_t}
        for out in res.outgoing:
            self._send(car, PORT_COMMAND, out.dst, out.data, t)
        if res.accepted and res.command is not None and res.command.kind in (Kind.ARM, Kind.DRIVE):
            car.fed_t = t if fw_t is None else fw_t
        for ev in res.events:
            self._firmware_event(car, ev.kind, ev, t, extra)
        if not res.accepted:
            car.counters.rejected += 1
        self._apply_duty(car, t)

    def _firmware_event(
        self, car: VirtualCar, kind: EventKind, ev: Event, t: float, extra: dict[str, float]
    ) -> None:
        src = list(ev.src) if ev.src is not None else None
        command = ev.command.name if ev.command is not None else None
        if kind is EventKind.ACCEPTED:
            if ev.command is not Kind.DRIVE:  # DRIVEs show as duty changes
                self._log(t, "accept", car=car.id, command=command, src=src, **extra)
        elif kind is EventKind.REJECTED:
            self._log(t, "reject", car=car.id, reason=ev.reason, command=command, src=src, **extra)
        elif kind is EventKind.ARMED:
            self._log(t, "arm", car=car.id, src=src, token=ev.token, **extra)
        elif kind is EventKind.DISARMED:
            self._log(
                t, "disarm", car=car.id, reason=ev.reason, src=src, token=ev.token,
                last_feed_t=car.fed_t, **extra,
            )  # fmt: skip
        else:
            self._log(t, str(kind.value), car=car.id, src=src, **extra)

    def _apply_duty(self, car: VirtualCar, t: float) -> None:
        duty = car.firmware.wheels
        if duty == car.duty:
            return
        car.duty = duty
        vl, vr = self.scene.cars[car.id].set_duty(*duty)
        self._log(t, "duty", car=car.id, left=duty[0], right=duty[1], speed=[vl, vr])

    def _truth(self, t: float) -> None:
        cars = []
        for car in self.cars.values():
            body = self.scene.cars[car.id]
            x, y, yaw = body.pose()
            v, w = body.motion()
            cars.append({
                "id": car.id, "x": round(x, 5), "y": round(y, 5), "yaw": round(yaw, 5),
                "v": round(v, 5), "w": round(w, 5), "duty": list(car.duty),
            })  # fmt: skip
        target = None
        if self.target_state is not None:
            s = self.target_state
            target = {
                "x": round(s.x, 5), "y": round(s.y, 5), "yaw": round(s.yaw, 5),
                "vx": round(s.vx, 5), "vy": round(s.vy, 5),
            }  # fmt: skip
        self._log(t, "truth", cars=cars, target=target)

    def _log_boot(self, car: VirtualCar, t: float) -> None:
        self._log(
            t, "boot", car=car.id, name=car.spec.name, address=car.spec.address,
            nonce=car.nonce, token=car.firmware.token, boot_time=car.boot_time,
            drift_ppm=round(car.drift * 1e6, 3),
            gyro_bias=car.gyro.bias if car.gyro is not None else None,
            gyro_scale=car.gyro.scale if car.gyro is not None else None,
        )  # fmt: skip

    # -- the car endpoints -------------------------------------------------------

    def deliver(self, car_key: int | str, port: int, data: bytes, src: Address, t: float) -> Step:
        """A datagram from ``src`` arriving at a car's UDP ``port`` at ``t``."""
        self._run_until(t)
        car = self.car(car_key)
        fw = car.firmware
        if not isinstance(fw, FirmwareModel):
            raise WorldError(f"car {car.id} runs the SITL firmware: it serves its own sockets")
        if not car.link_up(t):
            car.counters.dropped_in += 1
            return self.drain()
        car.counters.rx += 1
        now_us = car.uptime_us(t)
        if port == PORT_COMMAND:
            if len(data) > 5 and data[5] == Kind.HELLO:  # answered at once: fresh sensors
                self._sensors_now(car, t, fw)
            self._handle(car, fw.receive_datagram(data, src, now_us), t)
        elif port == PORT_PROBE:
            car.counters.probes += 1
            reply = fw.receive_probe(data, src, now_us)
            if reply is not None:
                self._send(car, PORT_PROBE, reply.dst, reply.data, t)
        else:
            raise WorldError(f"no UDP port {port} on a car")
        return self.drain()

    def capture_frame(self, car_key: int | str, t: float, on_board: bool = False) -> Frame | None:
        """The car's camera frame at ``t`` (None while the car is off or its link is down).

        A frozen camera returns its last frame again, unchanged. ``on_board``:
        the frame stays on the car (a SITL car's camera), so only power matters.
        Rendered here; the server renders :meth:`frame_job` in a worker instead.
        """
        job = self.frame_job(car_key, t, on_board)
        return self.frame_done(job, self.render(job)) if isinstance(job, RenderJob) else job

    def frame_job(
        self, car_key: int | str, t: float, on_board: bool = False
    ) -> RenderJob | Frame | None:
        """:meth:`capture_frame` up to the render: the frame to render, or what needs none."""
        self._run_until(t)
        car = self.car(car_key)
        if not (car.online(t) if on_board else car.link_up(t)):
            return None
        if car.camera_frozen(t) and car.last_frame is not None:
            return replace(car.last_frame, repeated=True)
        eye, yaw = self.scene.cars[car.id].camera()
        return RenderJob(
            car.id, eye, yaw, self.scene.poses(), car.uptime_us(t) // 1000, car.nonce, t
        )

    def render(self, job: RenderJob) -> bytes:
        """The job's JPEG, rendered in this process (the scene must still be as it was)."""
        return self.renderer.encode(self.renderer.render(job.eye, job.yaw))

    def frame_done(self, job: RenderJob, jpeg: bytes) -> Frame | None:
        """The rendered job as the car's next frame (None if the car rebooted meanwhile)."""
        car = self.car(job.car)
        if car.nonce != job.boot_id:
            return None
        car.frame_seq += 1
        car.counters.frames += 1
        frame = Frame(car.id, jpeg, job.capture_ms, job.boot_id, car.frame_seq, job.t)
        car.last_frame = frame
        return frame

    # -- faults ------------------------------------------------------------------

    def _duration(self, duration: float) -> float:
        if not (isinstance(duration, int | float) and 0 <= duration <= 3600):
            raise WorldError(f"duration must be in [0, 3600] s, got {duration!r}")
        return float(duration)

    def drop_link(self, car_key: int | str, duration: float, t: float) -> Step:
        """Lose every datagram to and from the car (and its camera stream) for ``duration``."""
        duration = self._duration(duration)
        self._run_until(t)
        car = self.car(car_key)
        car.link_down_until = t + duration
        self.notice(car.id, "link")
        self._log(t, "fault", kind="drop_link", car=car.id, duration=duration, until=t + duration)
        return self.drain()

    def freeze_camera(self, car_key: int | str, duration: float, t: float) -> Step:
        """The camera (and synthetic sensing) produces nothing new for ``duration``."""
        duration = self._duration(duration)
        self._run_until(t)
        car = self.car(car_key)
        car.camera_frozen_until = t + duration
        self._log(
            t, "fault", kind="freeze_camera", car=car.id, duration=duration, until=t + duration
        )
        return self.drain()

    def reboot(self, car_key: int | str, t: float, down: float = 0.0) -> Step:
        """Power-cycle a car: wheels stop now; after ``down`` s it boots with a new nonce."""
        down = self._duration(down)
        self._run_until(t)
        car = self.car(car_key)
        old = car.nonce
        car.boot(t + down)
        self._apply_duty(car, t)
        self._log(t, "fault", kind="reboot", car=car.id, down=down, old_nonce=old)
        self._log_boot(car, t + down)
        return self.drain()

    # -- SITL cars: the firmware in its own process (worlds.sitl_host) --------------

    def _sitl_car(self, car_key: int | str) -> tuple[VirtualCar, SitlFirmware]:
        car = self.car(car_key)
        if not isinstance(car.firmware, SitlFirmware):
            raise WorldError(f"car {car.id} runs the firmware model, not SITL")
        return car, car.firmware

    def firmware_inputs(self, car_key: int | str, t: float) -> tuple[float | None, Any]:
        """A SITL car's board inputs at ``t``: its gyro reading and synthetic observation."""
        self._run_until(t)
        return self._sensor_values(self._sitl_car(car_key)[0])

    def firmware_motors(self, car_key: int | str, wheels: tuple[float, float], t: float) -> Step:
        """A SITL car's motor outputs from ``t`` on: the wheels follow."""
        self._run_until(t)
        car, fw = self._sitl_car(car_key)
        fw.wheels = wheels
        self._apply_duty(car, t)
        return self.drain()

    def firmware_trace(self, car_key: int | str, trace: Trace, t: float) -> Step:
        """One traced core call of a SITL car, at ``t``, logged as the model's would be.

        The call's own time is logged as ``fw_t``, and is an accepted ARM's or
        DRIVE's ``last_feed_t``.
        """
        self._run_until(t)
        car, fw = self._sitl_car(car_key)
        expected = (fw.boot_nonce, fw.token)
        res = fw.apply(trace)
        if trace.ev == "init" and (fw.boot_nonce, fw.token) != expected:
            self._log(t, "boot_mismatch", car=car.id, expected=list(expected), nonce=fw.boot_nonce)
        car.counters.rx += trace.ev == "rx"
        car.counters.probes += trace.ev == "probe"
        if res is not None:
            self._handle(car, res, t, fw_t=car.world_time(int(trace.fields["us"])))
        elif trace.ev in ("health", "mdns"):
            fields = {k: v for k, v in trace.fields.items() if k not in ("ev", "us")}
            self._log(t, trace.ev, car=car.id, **fields)
        return self.drain()

    def firmware_reset(self, car_key: int | str, t: float, why: str) -> Step:
        """A SITL car's firmware died (a panic, a crash): the ESP32 resets, the PCA9685 does not.

        The wheels keep their duties until the new boot's setup() switches them off.
        """
        self._run_until(t)
        car, fw = self._sitl_car(car_key)
        old = car.nonce
        car.boot(t + RESET_STARTUP, wheels=fw.wheels)
        self._log(t, "fault", kind="firmware_reset", car=car.id, why=why, old_nonce=old)
        self._log_boot(car, t + RESET_STARTUP)
        return self.drain()

    def power_off(self, car_key: int | str, t: float, why: str) -> Step:
        """Cut a car's power for good: wheels stop, it never boots again."""
        self._run_until(t)
        car, fw = self._sitl_car(car_key)
        car.boot_time = math.inf
        fw.wheels = (0.0, 0.0)
        self._apply_duty(car, t)
        self._log(t, "fault", kind="power_off", car=car.id, why=why)
        return self.drain()

    # -- status ------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        cars = []
        for car in self.cars.values():
            x, y, yaw = self.scene.cars[car.id].pose()
            fw = car.firmware
            cars.append({
                "id": car.id, "name": car.spec.name, "address": car.spec.address,
                "boot": fw.boot_nonce, "token": fw.token, "armed": fw.armed, "estop": fw.estop,
                "reason": str(fw.reason), "duty": list(car.duty),
                "uptime_ms": car.uptime_us(self.t) // 1000, "online": car.online(self.t),
                "link_up": car.link_up(self.t), "camera_frozen": car.camera_frozen(self.t),
                "pose": [round(x, 4), round(y, 4), round(yaw, 4)],
                "counters": car.counters.__dict__.copy(),
            })  # fmt: skip
        return {
            "arena": self.arena.name,
            "t": self.t,
            "sim_time": self.t - self.t0,
            "sensing": self.arena.sensing.mode,
            "physics_steps": self.physics_steps,
            "physics_skipped": self.physics_skipped,
            "cars": cars,
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        p.disconnect(physicsClientId=self.client)
