"""SwarmNode: AgentCore plus the swarm codec and the input log, still without IO.

It decodes swarm datagrams (counting every rejection by reason), feeds the
core, encodes what the core sends, and writes every core input to the run log
with full precision, so that :func:`replay_inputs` can re-run the core on a
recorded log and reproduce its belief bit for bit. Sockets, threads and
timers live in :mod:`agents.drivers.runtime` (real time) and the lockstep runner
(virtual time); both drive this same object.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.belief import CellBlock
from agents.belief.search import CameraLook
from agents.core import AgentCore, OutPatch, OutSnapshot, Send
from agents.faults import Byzantine, ByzantineSpec, CellArrays
from agents.navigation import NavDecision
from agents.observations import ObservationBatch, PoseFix, TagSighting
from agents.odometry import GyroAngle
from agents.rejections import RejectionSampler
from protocol.swarm import Message, SwarmReceiver, SwarmSender, Track
from protocol.swarm.codec import decode_payload
from protocol.swarm.messages import MAC_LEN

Address = tuple[str, int]
LogFn = Callable[..., None]  # log(event, t=..., **fields), e.g. RunLog.log

# Events that are inputs of the core, in the order they happened.
RAW_SAMPLE_BYTES = 64  # of a rejected datagram, logged as a sample
INPUT_EVENTS = frozenset(
    {"rx", "discovered", "car", "obs", "tick", "decide", "byzantine", "oracle_look"}
)


@dataclass(frozen=True)
class Datagram:
    to: Address | None  # None: broadcast
    data: bytes
    kind: str


def _no_log(event: str, t: float | None = None, **fields: object) -> None:
    return None


def batch_to_fields(batch: ObservationBatch) -> dict[str, Any]:
    def sighting(s: TagSighting | None) -> list[float] | None:
        if s is None:
            return None
        return [s.tag_id, s.range, s.bearing, s.sigma_range, s.sigma_bearing]

    fix = batch.pose_fix
    return {
        "t_capture": batch.t_capture,
        "synchronized": batch.synchronized,
        "tags": [sighting(s) for s in batch.tags],
        "target": sighting(batch.target),
        "pose_fix": None if fix is None else [fix.x, fix.y, fix.theta, np.asarray(fix.cov)],
    }


def batch_from_fields(f: dict[str, Any]) -> ObservationBatch:
    def sighting(v: list[Any] | None) -> TagSighting | None:
        return None if v is None else TagSighting(int(v[0]), v[1], v[2], v[3], v[4])

    fix = f.get("pose_fix")
    tags = tuple(s for s in (sighting(v) for v in f["tags"]) if s is not None)
    return ObservationBatch(
        t_capture=f["t_capture"],
        synchronized=f["synchronized"],
        tags=tags,
        target=sighting(f["target"]),
        pose_fix=None if fix is None else PoseFix(fix[0], fix[1], fix[2], np.asarray(fix[3])),
    )


class SwarmNode:
    """One agent's swarm side: decode, feed the core, encode, log."""

    def __init__(
        self,
        core: AgentCore,
        key: bytes,
        swarm_id: int,
        epoch: int,
        *,
        limit: int = 1200,
        log: LogFn = _no_log,
    ) -> None:
        self.core = core
        self.name = core.config.name
        self.epoch = epoch
        self.sender = SwarmSender(key, swarm_id, self.name, epoch, limit=limit)
        self.receiver = SwarmReceiver(key, swarm_id, limit=limit)
        self.log = log
        self.bytes_out = 0
        self.datagrams_out = 0
        self.bytes_in = 0
        self.datagrams_in = 0
        self._out: list[Datagram] = []
        self.decision: NavDecision | None = None
        self.liar: Byzantine | None = None  # what it sends is distorted (Byzantine at=send)
        self.rejections = RejectionSampler()

    def set_byzantine(self, spec: ByzantineSpec | None, seed: int, now: float) -> None:
        """Make this agent lie (``None`` or an honest spec: stop lying).

        Send-stage behaviours distort what it broadcasts, its own belief staying
        honest; sense-stage ones distort its detections inside the core. The change
        is logged as a core input so that a replay reproduces it.
        """
        mapping = None if spec is None else spec.to_mapping()
        self.log("byzantine", t=now, spec=mapping, seed=seed)
        self.core.set_sensor_fault(spec, seed)
        self.liar = None if spec is None or spec.is_honest else Byzantine(spec, seed + 1)

    # ------------------------------------------------------------ inputs

    def receive_datagram(self, data: bytes, src: Address, now: float) -> Message | None:
        self.datagrams_in += 1
        self.bytes_in += len(data)
        msg = self.receiver.receive_datagram(data, src, now)
        if msg is None:
            rejection = self.receiver.last_rejection
            reason = str(rejection.reason) if rejection else "unknown"
            count = self.rejections.admit(reason, now)
            if count is not None:  # a sample: at most one a second per reason, truncated
                self.log("rx", t=now, src=src, raw=data[:RAW_SAMPLE_BYTES], size=len(data),
                         ok=False, reason=reason, count=count)
            return None
        if msg.sender == self.name:
            return msg  # our own broadcast looped back: not an input
        self.log("rx", t=now, src=src, raw=data, ok=True)
        self.core.on_message(msg, src, now)
        self._collect(now)
        return msg

    def discovered(self, name: str, addr: Address, epoch: int, now: float) -> None:
        self.log("discovered", t=now, peer=name, addr=addr, epoch=epoch)
        self.core.on_peer_discovered(name, addr, epoch, now)
        self._collect(now)

    def car_status(
        self, now: float, duty: tuple[float, float], gyro_z: float | None,
        angle: GyroAngle | None = None, *, sampled_at: float | None = None,
    ) -> None:
        """The car's telemetry: ``sampled_at``, when it took it (None: unsynchronised)."""
        self.log("car", t=now, duty=duty, gyro=gyro_z,
                 angle=None if angle is None else list(angle), at=sampled_at)
        self.core.on_car_status(now, duty[0], duty[1], gyro_z, angle, sampled_at=sampled_at)

    def observations(
        self, batch: ObservationBatch, now: float, stages: dict[str, float] | None = None
    ) -> None:
        """A sensor frame; ``stages`` are its per-stage timestamps (camera), for the log."""
        extra = {} if stages is None else {"stages": stages}
        self.log("obs", t=now, **batch_to_fields(batch), **extra)
        self.core.on_observations(batch, now)
        self._collect(now)

    def tick(self, now: float, *, decide: bool = True) -> NavDecision | None:
        if decide:
            self.log("tick", t=now)
        else:
            self.log("tick", t=now, decide=False)
        self.core.tick(now, decide=decide)
        self._collect(now)
        self.flush_rejections(now)
        return self.decision

    def decide(self, now: float) -> NavDecision | None:
        """A decision between beats, because something new is known."""
        self.log("decide", t=now)
        self.core.decide(now)
        self._collect(now)
        return self.decision

    def send_track(self, now: float) -> None:
        """The TRACK the burst limit held back, at the time it may go."""
        self.log("track_due", t=now)
        self.core.send_due_track(now)
        self._collect(now)

    def flush_rejections(self, now: float, *, final: bool = False) -> None:
        """Log the rejections tallied but not yet logged (``final``: all of them)."""
        for reason, count in self.rejections.flush(now, final=final):
            self.log("rx", t=now, ok=False, reason=reason, count=count)

    # ------------------------------------------------------------ outputs

    def datagrams(self) -> list[Datagram]:
        out, self._out = self._out, []
        return out

    def _collect(self, now: float) -> None:
        out = self.core.take_outputs()
        if out.decision is not None:
            self.decision = out.decision
        for send in out.sends:
            for data in self._encode(send, now):
                kind = type(send.body).__name__.lower().removeprefix("out")
                self._out.append(Datagram(send.to, data, kind))
                self.bytes_out += len(data)
                self.datagrams_out += 1
                self.log("tx", t=now, to=send.to, kind=kind, raw=data)
        for record in out.records:
            self.log(record.event, t=now, **record.fields)

    def _encode(self, send: Send, now: float) -> list[bytes]:
        body = send.body
        size = self.core.config.grid.cell_size
        mm = round(size * 1000)
        if isinstance(body, OutPatch):
            c = self._lie_cells(body.cells, now, "patch")
            if not len(c.ix):
                return []
            return self.sender.patch_datagrams(
                c.ix, c.iy, c.mu, c.var, cell_size_mm=mm, t_ref=body.t_ref, now=now
            )
        if isinstance(body, OutSnapshot):
            c = self._lie_cells(body.cells, now, "snapshot")
            ox, oy = body.origin
            inside = (c.ix >= ox) & (c.ix < ox + body.width) & (c.iy >= oy) & (
                c.iy < oy + body.height
            )
            return self.sender.snapshot_datagrams(
                c.ix[inside], c.iy[inside], c.mu[inside], c.var[inside],
                snapshot_id=body.snapshot_id, origin_ix=ox, origin_iy=oy, width=body.width,
                height=body.height, cell_size_mm=mm, t_ref=body.t_ref, now=now,
            )
        if isinstance(body, Track) and self.liar is not None:
            body = self.liar.transform_track(body, now)
        return [self.sender.seal(body, now)]

    def _lie_cells(self, cells: CellBlock, now: float, stream: str) -> CellArrays:
        if self.liar is None:
            return CellArrays(cells.ix, cells.iy, cells.mu, cells.var)
        return self.liar.transform_cells(
            cells.ix, cells.iy, cells.mu, cells.var, now,
            cell_size=self.core.config.grid.cell_size, stream=stream,
        )


def replay_inputs(
    core: AgentCore, lines: Iterable[dict[str, Any]], swarm_id: int
) -> Iterator[tuple[float, str]]:
    """Feed a recorded log's core inputs to ``core``; yield (t, digest) at each belief record.

    ``lines`` are one agent's log lines in file order. Accepted datagrams are
    re-decoded from their logged bytes (the MAC was checked when they arrived).
    """
    for line in lines:
        event, t = line.get("event"), line.get("t")
        if not isinstance(t, float | int):
            continue
        if event == "rx" and line.get("ok"):
            raw = base64.b64decode(line["raw"])
            msg = decode_payload(raw[:-MAC_LEN], swarm_id)
            core.on_message(msg, (line["src"][0], line["src"][1]), t)
        elif event == "discovered":
            addr = (str(line["addr"][0]), int(line["addr"][1]))
            core.on_peer_discovered(line["peer"], addr, line["epoch"], t)
        elif event == "car":
            angle = line.get("angle")  # absent from logs before 2026-12-05
            core.on_car_status(t, line["duty"][0], line["duty"][1], line["gyro"],
                               None if angle is None else GyroAngle(*angle),
                               sampled_at=line.get("at"))  # absent from older logs
        elif event == "obs":
            core.on_observations(batch_from_fields(line), t)
        elif event == "tick":
            core.tick(t, decide=line.get("decide", True) is not False)
        elif event == "decide":
            core.decide(t)
        elif event == "track_due":
            core.send_due_track(t)
        elif event == "byzantine":
            spec = None if line["spec"] is None else ByzantineSpec.from_mapping(line["spec"])
            core.set_sensor_fault(spec, int(line["seed"]))
        elif event == "oracle_look":  # the lockstep oracle handed another robot's look
            look = CameraLook(*(float(v) for v in line["look"]))
            core.on_oracle_look(str(line["sender"]), look, t)
        else:
            continue
        for record in core.take_outputs().records:
            if record.event == "belief":
                yield t, record.fields["digest"]

