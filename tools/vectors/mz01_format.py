"""MZ01 golden vectors: the data model and the JSON and text formats (MZ01.md).

The scenarios are in :mod:`tools.vectors.mz01_scenarios` and
:mod:`tools.vectors.mz01_scenarios_stop`, every expected outcome written by
hand from MZ01.md (nothing here runs the firmware model); every step checks
the whole car state and the telemetry it sent. :mod:`tools.vectors.mz01`
writes them to ``protocol/vectors/``; the tests read them back with
:func:`load_json` and :func:`load_txt`.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Address = tuple[str, int]

FORMAT = "mz01-vectors/2"
VECTOR_DIR = Path(__file__).resolve().parents[2] / "protocol" / "vectors"
JSON_PATH = VECTOR_DIR / "mz01_vectors.json"
TXT_PATH = VECTOR_DIR / "mz01_vectors.txt"


# -- the data model -----------------------------------------------------------


@dataclass(frozen=True)
class Boot:
    robot_id: int
    nonce: int
    token: int
    motor_ok: bool = True
    camera_ok: bool = True


@dataclass(frozen=True)
class State:
    """Every field of MZ01.md's car state a step checks (all but the boot constants)."""

    armed: bool = False
    estop: bool = False
    token: int = 0
    left: float = 0.0
    right: float = 0.0
    bound: Address | None = None
    telemetry_to: Address | None = None
    last_seq: int = 0
    last_feed_us: int = 0
    last_telemetry_us: int = 0
    motor_ok: bool = True
    camera_ok: bool = True
    reason: str = ""


@dataclass(frozen=True)
class Rx:
    t_us: int
    src: Address
    data: bytes
    accept: bool
    reason: str  # the rejection reason, "" when accepted
    state: State
    sent: tuple[Address, ...] = ()  # where telemetry went at once, in order


@dataclass(frozen=True)
class Tick:
    t_us: int
    state: State
    sent: tuple[Address, ...] = ()


@dataclass(frozen=True)
class Health:
    t_us: int
    motor_ok: bool
    camera_ok: bool


@dataclass(frozen=True)
class Probe:
    t_us: int
    request: bytes
    reply: bytes | None


@dataclass(frozen=True)
class Note:
    text: str


Step = Rx | Tick | Health | Probe | Note


@dataclass(frozen=True)
class Scenario:
    name: str
    doc: str
    boot: Boot
    steps: tuple[Step, ...]


# -- JSON -----------------------------------------------------------------------


def _f32(x: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", x))[0])


def _addr_json(a: Address | None) -> list[Any] | None:
    return None if a is None else [a[0], a[1]]


def _state_json(s: State) -> dict[str, Any]:
    return {
        "armed": s.armed, "estop": s.estop, "token": s.token, "left": s.left, "right": s.right,
        "bound": _addr_json(s.bound), "telemetry_to": _addr_json(s.telemetry_to),
        "last_seq": s.last_seq, "last_feed_us": s.last_feed_us,
        "last_telemetry_us": s.last_telemetry_us, "motor_ok": s.motor_ok,
        "camera_ok": s.camera_ok, "reason": s.reason,
    }  # fmt: skip


def _step_to_json(step: Step) -> dict[str, Any]:
    if isinstance(step, Note):
        return {"op": "note", "text": step.text}
    if isinstance(step, Health):
        return {
            "op": "health", "t_us": step.t_us,
            "motor_ok": step.motor_ok, "camera_ok": step.camera_ok,
        }  # fmt: skip
    if isinstance(step, Probe):
        reply = None if step.reply is None else step.reply.hex()
        return {
            "op": "probe", "t_us": step.t_us,
            "request_hex": step.request.hex(), "reply_hex": reply,
        }  # fmt: skip
    sent = [_addr_json(a) for a in step.sent]
    if isinstance(step, Tick):
        return {"op": "tick", "t_us": step.t_us, "state": _state_json(step.state), "sent": sent}
    return {
        "op": "rx", "t_us": step.t_us, "src": list(step.src), "hex": step.data.hex(),
        "verdict": "accept" if step.accept else "reject", "reason": step.reason,
        "state": _state_json(step.state), "sent": sent,
    }  # fmt: skip


def _boot_to_json(b: Boot) -> dict[str, Any]:
    return {
        "robot_id": b.robot_id, "nonce": b.nonce, "token": b.token,
        "motor_ok": b.motor_ok, "camera_ok": b.camera_ok,
    }  # fmt: skip


def render_json(items: Sequence[Scenario]) -> str:
    """The canonical JSON: one step per line, so diffs stay readable."""
    dump = json.dumps
    lines = ["{", f'  "format": {dump(FORMAT)},', '  "spec": "protocol/MZ01.md",']
    lines.append('  "scenarios": [')
    for i, sc in enumerate(items):
        lines += [
            "    {",
            f'      "name": {dump(sc.name)},',
            f'      "doc": {dump(sc.doc)},',
            f'      "boot": {dump(_boot_to_json(sc.boot))},',
            '      "steps": [',
        ]
        steps = [dump(_step_to_json(step), allow_nan=False) for step in sc.steps]
        lines += [f"        {text}," for text in steps[:-1]] + [f"        {steps[-1]}"]
        lines += ["      ]", "    }" + ("," if i < len(items) - 1 else "")]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def _addr_from_json(v: list[Any] | None) -> Address | None:
    return None if v is None else (str(v[0]), int(v[1]))


def _state_from_json(d: dict[str, Any]) -> State:
    return State(
        d["armed"], d["estop"], d["token"], float(d["left"]), float(d["right"]),
        _addr_from_json(d["bound"]), _addr_from_json(d["telemetry_to"]), d["last_seq"],
        d["last_feed_us"], d["last_telemetry_us"], d["motor_ok"], d["camera_ok"], d["reason"],
    )  # fmt: skip


def _sent_from_json(v: list[list[Any]]) -> tuple[Address, ...]:
    return tuple((str(a[0]), int(a[1])) for a in v)


def _step_from_json(d: dict[str, Any]) -> Step:
    op = d["op"]
    if op == "note":
        return Note(d["text"])
    if op == "health":
        return Health(d["t_us"], d["motor_ok"], d["camera_ok"])
    if op == "probe":
        reply = None if d["reply_hex"] is None else bytes.fromhex(d["reply_hex"])
        return Probe(d["t_us"], bytes.fromhex(d["request_hex"]), reply)
    state, sent = _state_from_json(d["state"]), _sent_from_json(d["sent"])
    if op == "tick":
        return Tick(d["t_us"], state, sent)
    if op == "rx":
        host, port = d["src"]
        accept = {"accept": True, "reject": False}[d["verdict"]]
        data = bytes.fromhex(d["hex"])
        return Rx(d["t_us"], (host, port), data, accept, d["reason"], state, sent)
    raise ValueError(f"unknown op {op!r}")


def load_json(text: str) -> tuple[Scenario, ...]:
    """Scenarios from the canonical JSON."""
    doc = json.loads(text)
    if doc.get("format") != FORMAT:
        raise ValueError(f"not {FORMAT}: {doc.get('format')!r}")
    out = []
    for sc in doc["scenarios"]:
        b = sc["boot"]
        boot = Boot(b["robot_id"], b["nonce"], b["token"], b["motor_ok"], b["camera_ok"])
        steps = tuple(_step_from_json(s) for s in sc["steps"])
        out.append(Scenario(sc["name"], sc["doc"], boot, steps))
    return tuple(out)


# -- text -------------------------------------------------------------------------

STATE_FIELDS = 13


def _g9(x: float) -> str:
    return "%.9g" % x  # noqa: UP031  (the exact C printf format MZ01.md names)


def _hex(data: bytes) -> str:
    return data.hex() if data else "-"


def _bit(flag: bool) -> str:
    return "1" if flag else "0"


def _addr_txt(a: Address | None) -> str:
    return "-" if a is None else f"{a[0]}:{a[1]}"


def _sent_txt(sent: tuple[Address, ...]) -> str:
    return ",".join(_addr_txt(a) for a in sent) if sent else "-"


def _state_txt(s: State) -> str:
    return " ".join([
        _bit(s.armed), _bit(s.estop), str(s.token), _g9(s.left), _g9(s.right),
        _addr_txt(s.bound), _addr_txt(s.telemetry_to), str(s.last_seq), str(s.last_feed_us),
        str(s.last_telemetry_us), _bit(s.motor_ok), _bit(s.camera_ok), s.reason or "-",
    ])  # fmt: skip


def _step_to_txt(step: Step) -> str:
    if isinstance(step, Note):
        return f"# {step.text}"
    if isinstance(step, Health):
        return f"health {step.t_us} {_bit(step.motor_ok)} {_bit(step.camera_ok)}"
    if isinstance(step, Probe):
        reply = "-" if step.reply is None else _hex(step.reply)
        return f"probe {step.t_us} {_hex(step.request)} {reply}"
    if isinstance(step, Tick):
        return f"tick {step.t_us} {_state_txt(step.state)} {_sent_txt(step.sent)}"
    verdict = "accept" if step.accept else "reject"
    host, port = step.src
    return (
        f"rx {step.t_us} {host} {port} {_hex(step.data)} {verdict} {step.reason or '-'} "
        f"{_state_txt(step.state)} {_sent_txt(step.sent)}"
    )


def render_txt(items: Sequence[Scenario]) -> str:
    """The line format of MZ01.md, "Golden vectors"."""
    lines = [
        "# MZ01 golden vectors, written by `python -m tools.vectors.mz01`; do not edit.",
        "# The same content as mz01_vectors.json; the format is in protocol/MZ01.md.",
    ]
    for sc in items:
        b = sc.boot
        lines += [
            f"scenario {sc.name}",
            f"# {sc.doc}",
            f"boot {b.robot_id} {b.nonce} {b.token} {_bit(b.motor_ok)} {_bit(b.camera_ok)}",
        ]
        lines += [_step_to_txt(step) for step in sc.steps]
        lines.append("end")
    return "\n".join(lines) + "\n"


def _unhex(field: str) -> bytes:
    return b"" if field == "-" else bytes.fromhex(field)


def _flag(field: str) -> bool:
    return {"0": False, "1": True}[field]


def _addr_from_txt(field: str) -> Address | None:
    if field == "-":
        return None
    host, port = field.rsplit(":", 1)
    return (host, int(port))


def _sent_from_txt(field: str) -> tuple[Address, ...]:
    if field == "-":
        return ()
    return tuple(a for a in map(_addr_from_txt, field.split(",")) if a is not None)


def _state_from_txt(f: Sequence[str]) -> State:
    armed, estop, token, left, right, bound, tel, seq, feed, tel_t, motor, camera, reason = f
    return State(
        _flag(armed), _flag(estop), int(token), _f32(float(left)), _f32(float(right)),
        _addr_from_txt(bound), _addr_from_txt(tel), int(seq), int(feed), int(tel_t),
        _flag(motor), _flag(camera), "" if reason == "-" else reason,
    )  # fmt: skip


def load_txt(text: str) -> tuple[Scenario, ...]:
    """Scenarios from the line format, as a C reader would see them."""
    out: list[Scenario] = []
    name: str | None = None
    doc = ""
    boot: Boot | None = None
    steps: list[Step] = []
    n = STATE_FIELDS
    for line in text.splitlines():
        if line.startswith("#"):
            if name is not None and boot is None:
                doc = line[2:]
            elif name is not None:
                steps.append(Note(line[2:]))
            continue
        f = line.split(" ")
        op, args = f[0], f[1:]
        if op == "scenario":
            name, doc, boot, steps = args[0], "", None, []
        elif op == "boot":
            rid, nonce, token, motor, camera = args
            boot = Boot(int(rid), int(nonce), int(token), _flag(motor), _flag(camera))
        elif op == "health":
            steps.append(Health(int(args[0]), _flag(args[1]), _flag(args[2])))
        elif op == "probe":
            reply = None if args[2] == "-" else _unhex(args[2])
            steps.append(Probe(int(args[0]), _unhex(args[1]), reply))
        elif op == "tick":
            state = _state_from_txt(args[1 : 1 + n])
            steps.append(Tick(int(args[0]), state, _sent_from_txt(args[1 + n])))
        elif op == "rx":
            t_us, host, port, hexdata, verdict, reason = args[:6]
            accept = {"accept": True, "reject": False}[verdict]
            state = _state_from_txt(args[6 : 6 + n])
            sent = _sent_from_txt(args[6 + n])
            rejected = "" if reason == "-" else reason
            steps.append(
                Rx(int(t_us), (host, int(port)), _unhex(hexdata), accept, rejected, state, sent)
            )
        elif op == "end":
            if name is None or boot is None:
                raise ValueError("end without scenario and boot")
            out.append(Scenario(name, doc, boot, tuple(steps)))
            name, boot = None, None
        else:
            raise ValueError(f"unknown record {op!r}")
    return tuple(out)

