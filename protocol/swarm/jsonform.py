"""Messages as plain JSON-able dicts, the "decoded content" of the golden vectors."""

from __future__ import annotations

from typing import Any

import numpy as np

from protocol.swarm.cells import Cells
from protocol.swarm.messages import (
    Body,
    Bye,
    Heartbeat,
    Kind,
    Look,
    LookRecord,
    Message,
    Mode,
    Patch,
    Ping,
    Pong,
    Snapshot,
    Track,
)


def cells_to_json(cells: Cells) -> dict[str, list[Any]]:
    """Indices as ints; mu and var as the exact values of their float16s."""
    return {
        "ix": [int(v) for v in cells.ix],
        "iy": [int(v) for v in cells.iy],
        "mu": [float(v) for v in cells.mu],
        "var": [float(v) for v in cells.var],
    }


def cells_from_json(d: dict[str, list[Any]]) -> Cells:
    return Cells.from_arrays(
        np.asarray(d["ix"], dtype=np.int64), np.asarray(d["iy"], dtype=np.int64),
        np.asarray(d["mu"], dtype=np.float64), np.asarray(d["var"], dtype=np.float64),
    )


def body_to_json(body: Body) -> dict[str, Any]:
    match body:
        case Heartbeat():
            return {
                "x": body.x, "y": body.y, "heading": body.heading, "cov": list(body.cov),
                "mode": body.mode.name, "origin_ix": body.origin_ix,
                "origin_iy": body.origin_iy, "counters": dict(body.counters),
            }
        case Patch():
            return {
                "cell_size_mm": body.cell_size_mm, "t_ref": body.t_ref,
                "cells": cells_to_json(body.cells),
            }
        case Track():
            return {
                "mean": list(body.mean), "cov": list(body.cov), "t_ref": body.t_ref,
                "updates": body.updates,
            }
        case Ping():
            return {"ping_id": body.ping_id}
        case Pong():
            return {"ping_id": body.ping_id, "t1": body.t1, "t2": body.t2, "t3": body.t3}
        case Snapshot():
            return {
                "snapshot_id": body.snapshot_id, "chunk_index": body.chunk_index,
                "chunk_count": body.chunk_count, "origin_ix": body.origin_ix,
                "origin_iy": body.origin_iy, "width": body.width, "height": body.height,
                "cell_size_mm": body.cell_size_mm, "t_ref": body.t_ref,
                "cells": cells_to_json(body.cells),
            }
        case Bye():
            return {"reason": body.reason}
        case Look():
            return {
                "first_seq": body.first_seq, "t_ref": body.t_ref, "range_cm": body.range_cm,
                "fov_mrad": body.fov_mrad, "looks": [list(r) for r in body.looks],
            }
    raise TypeError(f"not a message body: {type(body).__name__}")


def body_from_json(kind: Kind, d: dict[str, Any]) -> Body:
    match kind:
        case Kind.HEARTBEAT:
            return Heartbeat(
                d["x"], d["y"], d["heading"], tuple(d["cov"]), Mode[d["mode"]],
                d["origin_ix"], d["origin_iy"], tuple(d["counters"].items()),
            )
        case Kind.PATCH:
            return Patch(d["cell_size_mm"], d["t_ref"], cells_from_json(d["cells"]))
        case Kind.TRACK:
            return Track(tuple(d["mean"]), tuple(d["cov"]), d["t_ref"], d["updates"])
        case Kind.PING:
            return Ping(d["ping_id"])
        case Kind.PONG:
            return Pong(d["ping_id"], d["t1"], d["t2"], d["t3"])
        case Kind.SNAPSHOT:
            return Snapshot(
                d["snapshot_id"], d["chunk_index"], d["chunk_count"], d["origin_ix"],
                d["origin_iy"], d["width"], d["height"], d["cell_size_mm"], d["t_ref"],
                cells_from_json(d["cells"]),
            )
        case Kind.BYE:
            return Bye(d["reason"])
        case Kind.LOOK:
            return Look(d["first_seq"], d["t_ref"], d["range_cm"], d["fov_mrad"],
                        tuple(LookRecord(*r) for r in d["looks"]))


def message_to_json(message: Message) -> dict[str, Any]:
    return {
        "kind": message.kind.name,
        "swarm_id": message.swarm_id,
        "sender": message.sender,
        "epoch": message.epoch,
        "seq": message.seq,
        "t_sent": message.t_sent,
        "body": body_to_json(message.body),
    }


def message_from_json(d: dict[str, Any]) -> Message:
    return Message(
        d["swarm_id"], d["sender"], d["epoch"], d["seq"], d["t_sent"],
        body_from_json(Kind[d["kind"]], d["body"]),
    )
