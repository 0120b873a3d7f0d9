"""``LinkFaults``: what the network does to one direction of an agent's transport.

A frozen, validated value with a text form (``parse_faults`` / ``format_faults``)
and a TOML-table form (``LinkFaults.from_mapping`` / ``to_mapping``) that use the
same keys. The model that applies it is :class:`agents.faults.link_model.LinkModel`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agents.faults.tokens import (
    CLEAR,
    FaultSpecError,
    Parser,
    build_spec,
    check_duration,
    check_probability,
    format_duration,
    format_number,
    mapping_tokens,
    parse_count,
    parse_duration,
    parse_probability,
    split_tokens,
)

MAX_DELAY = 60.0  # seconds; a "delay" longer than this is an outage, use drop or partition
DEFAULT_REORDER_HOLD = 0.25  # longer than a TRACK period (5 Hz), so a held TRACK is overtaken
MAX_CORRUPT_BYTES = 64
_NAME = re.compile(r"^[^\s,|=]+$")


class JitterShape(StrEnum):
    """How jitter spreads the delay: ``uniform`` on [delay - j, delay + j], or ``normal``
    with standard deviation j. Either is clipped at zero."""

    UNIFORM = "uniform"
    NORMAL = "normal"


@dataclass(frozen=True)
class BurstLoss:
    """Two-state Gilbert–Elliott loss, one step per datagram on each link.

    Before each datagram the link's state moves good→bad with probability
    ``enter`` and bad→good with probability ``leave``; the datagram is then lost
    with probability ``loss_bad`` in the bad state, ``loss_good`` in the good one.
    """

    enter: float
    leave: float
    loss_bad: float = 1.0
    loss_good: float = 0.0

    def __post_init__(self) -> None:
        for name in ("enter", "leave", "loss_bad", "loss_good"):
            object.__setattr__(self, name, check_probability(getattr(self, name), f"burst {name}"))
        if self.enter == 0.0 or self.leave == 0.0:
            raise FaultSpecError(
                "burst enter and leave must be > 0 (a state that is never entered or never "
                "left is not a burst model)"
            )

    @property
    def stationary_bad(self) -> float:
        """Long-run fraction of datagrams that meet the bad state."""
        return self.enter / (self.enter + self.leave)

    @property
    def stationary_loss(self) -> float:
        """Long-run loss rate of this model alone."""
        bad = self.stationary_bad
        return bad * self.loss_bad + (1.0 - bad) * self.loss_good

    @property
    def mean_burst_length(self) -> float:
        """Mean number of consecutive datagrams in the bad state (1 / leave)."""
        return 1.0 / self.leave


def _check_partition(groups: object) -> tuple[tuple[str, ...], ...]:
    if isinstance(groups, str) or not isinstance(groups, tuple | list):
        raise FaultSpecError("partition must be a sequence of groups of agent names")
    out: list[tuple[str, ...]] = []
    seen: set[str] = set()
    for group in groups:
        if isinstance(group, str) or not isinstance(group, tuple | list) or not group:
            raise FaultSpecError("each partition group must be a non-empty list of names")
        names = []
        for name in group:
            if not isinstance(name, str) or not _NAME.match(name):
                raise FaultSpecError(
                    f"partition names must be non-empty, without spaces, ',', '|' or '=': "
                    f"{name!r}"
                )
            if name in seen:
                raise FaultSpecError(f"{name!r} is in two partition groups")
            seen.add(name)
            names.append(name)
        out.append(tuple(names))
    if len(out) == 1:
        raise FaultSpecError("a partition needs at least two groups")
    return tuple(out)


@dataclass(frozen=True)
class LinkFaults:
    """Network faults on one direction of one agent's transport. The default is no fault.

    - ``drop``: independent loss probability per datagram.
    - ``burst``: Gilbert–Elliott burst loss (see :class:`BurstLoss`), or None.
    - ``delay``, ``jitter`` (seconds), ``jitter_shape``: each delivered copy waits
      ``delay`` plus a jitter draw (see :class:`JitterShape`), never less than zero.
    - ``duplicate``: probability that a second copy (with its own delay) is delivered.
    - ``reorder``, ``reorder_hold``: probability that a copy is held back for an extra
      ``reorder_hold`` seconds, so that datagrams sent after it overtake it.
    - ``corrupt``, ``corrupt_bytes``: probability per delivered copy that
      ``corrupt_bytes`` distinct random bytes each get one random bit flipped.
    - ``partition``: groups of agent names; datagrams between agents of different
      groups are dropped. An agent in no group, or an address that resolves to no
      agent (a broadcast address), is not partitioned.
    """

    drop: float = 0.0
    burst: BurstLoss | None = None
    delay: float = 0.0
    jitter: float = 0.0
    jitter_shape: JitterShape = JitterShape.UNIFORM
    duplicate: float = 0.0
    reorder: float = 0.0
    reorder_hold: float = DEFAULT_REORDER_HOLD
    corrupt: float = 0.0
    corrupt_bytes: int = 1
    partition: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        for name in ("drop", "duplicate", "reorder", "corrupt"):
            object.__setattr__(self, name, check_probability(getattr(self, name), name))
        for name in ("delay", "jitter", "reorder_hold"):
            object.__setattr__(self, name, check_duration(getattr(self, name), name, MAX_DELAY))
        if self.burst is not None and not isinstance(self.burst, BurstLoss):
            raise FaultSpecError("burst must be a BurstLoss or None")
        try:
            object.__setattr__(self, "jitter_shape", JitterShape(self.jitter_shape))
        except ValueError:
            raise FaultSpecError(
                f"jitter shape must be uniform or normal, got {self.jitter_shape!r}"
            ) from None
        n = self.corrupt_bytes
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CORRUPT_BYTES:
            raise FaultSpecError(f"corrupt_bytes must be an int in 1..{MAX_CORRUPT_BYTES}")
        object.__setattr__(self, "partition", _check_partition(self.partition))

    @property
    def is_clear(self) -> bool:
        """True when this spec changes nothing (the ``clear`` spec)."""
        return (
            self.drop == 0.0
            and self.burst is None
            and self.delay == 0.0
            and self.jitter == 0.0
            and self.duplicate == 0.0
            and self.reorder == 0.0
            and self.corrupt == 0.0
            and not self.partition
        )

    def group_of(self, name: str | None) -> int | None:
        """Index of the partition group holding ``name``, or None."""
        if name is None:
            return None
        for i, group in enumerate(self.partition):
            if name in group:
                return i
        return None

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, object]) -> LinkFaults:
        """From a TOML table with the text keys; bare numbers under duration keys are seconds."""
        return build_spec(mapping_tokens(mapping), _PARSERS, LinkFaults, strict_units=False,
                          canonical=_CANONICAL)

    def to_mapping(self) -> dict[str, Any]:
        """The TOML-table form (durations in seconds); ``from_mapping`` inverts it."""
        out: dict[str, Any] = {}
        if self.drop:
            out["drop"] = self.drop
        if self.burst is not None:
            b = self.burst
            out["burst"] = [b.enter, b.leave, b.loss_bad, b.loss_good]
        if self.delay:
            out["delay"] = self.delay
        if self.jitter or self.jitter_shape is not JitterShape.UNIFORM:
            out["jitter"] = [self.jitter, self.jitter_shape.value]
        if self.duplicate:
            out["dup"] = self.duplicate
        if self.reorder or self.reorder_hold != DEFAULT_REORDER_HOLD:
            out["reorder"] = [self.reorder, self.reorder_hold]
        if self.corrupt or self.corrupt_bytes != 1:
            out["corrupt"] = [self.corrupt, self.corrupt_bytes]
        if self.partition:
            out["partition"] = [list(g) for g in self.partition]
        return out


# --- the text form ----------------------------------------------------------------------

def _parts(value: str, what: str, lo: int, hi: int) -> list[str]:
    parts = [p.strip() for p in value.split(",")]
    if not lo <= len(parts) <= hi or not all(parts):
        span = f"{lo}" if lo == hi else f"{lo} to {hi}"
        raise FaultSpecError(f"{what} takes {span} comma-separated values, got {value!r}")
    return parts


def _drop(value: str, strict: bool) -> dict[str, Any]:
    return {"drop": parse_probability(value, "drop")}


def _burst(value: str, strict: bool) -> dict[str, Any]:
    parts = _parts(value, "burst (enter,leave[,loss_bad[,loss_good]])", 2, 4)
    names = ("enter", "leave", "loss_bad", "loss_good")
    probs = {n: parse_probability(p, f"burst {n}") for n, p in zip(names, parts, strict=False)}
    return {"burst": BurstLoss(**probs)}


def _delay(value: str, strict: bool) -> dict[str, Any]:
    return {"delay": parse_duration(value, "delay", unit_required=strict)}


def _jitter(value: str, strict: bool) -> dict[str, Any]:
    parts = _parts(value, "jitter (amount[,uniform|normal])", 1, 2)
    out: dict[str, Any] = {"jitter": parse_duration(parts[0], "jitter", unit_required=strict)}
    if len(parts) == 2:
        try:
            out["jitter_shape"] = JitterShape(parts[1].lower())
        except ValueError:
            raise FaultSpecError(
                f"jitter shape must be uniform or normal, got {parts[1]!r}"
            ) from None
    return out


def _duplicate(value: str, strict: bool) -> dict[str, Any]:
    return {"duplicate": parse_probability(value, "dup")}


def _reorder(value: str, strict: bool) -> dict[str, Any]:
    parts = _parts(value, "reorder (probability[,hold])", 1, 2)
    out: dict[str, Any] = {"reorder": parse_probability(parts[0], "reorder")}
    if len(parts) == 2:
        out["reorder_hold"] = parse_duration(parts[1], "reorder hold", unit_required=strict)
    return out


def _corrupt(value: str, strict: bool) -> dict[str, Any]:
    parts = _parts(value, "corrupt (probability[,bytes])", 1, 2)
    out: dict[str, Any] = {"corrupt": parse_probability(parts[0], "corrupt")}
    if len(parts) == 2:
        out["corrupt_bytes"] = parse_count(parts[1], "corrupt bytes", 1, MAX_CORRUPT_BYTES)
    return out


def _partition(value: str, strict: bool) -> dict[str, Any]:
    groups = [tuple(n.strip() for n in g.split(",")) for g in value.split("|")]
    return {"partition": _check_partition(groups)}


_PARSERS: dict[str, Parser] = {
    "drop": _drop,
    "burst": _burst,
    "delay": _delay,
    "jitter": _jitter,
    "dup": _duplicate,
    "duplicate": _duplicate,
    "reorder": _reorder,
    "corrupt": _corrupt,
    "partition": _partition,
}
_CANONICAL = {"duplicate": "dup"}


def parse_faults(text: str) -> LinkFaults:
    """Parse e.g. ``"drop=0.3 burst=0.05,0.5,1.0 delay=50ms jitter=10ms dup=0.01"``.

    Keys: ``drop=P``, ``burst=ENTER,LEAVE[,LOSS_BAD[,LOSS_GOOD]]``, ``delay=DUR``,
    ``jitter=DUR[,uniform|normal]``, ``dup=P``, ``reorder=P[,HOLD]``,
    ``corrupt=P[,BYTES]``, ``partition=a,b|c``; or ``clear`` alone. P is a number in
    [0, 1] or a percentage; DUR needs a unit (us, ms, s). Raises :class:`FaultSpecError`.
    """
    return build_spec(split_tokens(text), _PARSERS, LinkFaults, strict_units=True,
                      canonical=_CANONICAL)


def format_faults(spec: LinkFaults) -> str:
    """The canonical text of ``spec``; ``parse_faults`` gives back an equal spec."""
    tokens: list[str] = []
    for key, value in spec.to_mapping().items():
        if key == "burst":
            enter, leave, loss_bad, loss_good = value
            parts = [enter, leave, loss_bad, loss_good]
            if loss_good == 0.0:
                parts = parts[:3] if loss_bad != 1.0 else parts[:2]
            text = ",".join(format_number(v) for v in parts)
        elif key == "delay":
            text = format_duration(value)
        elif key == "jitter":
            amount, shape = value
            text = format_duration(amount)
            if shape != JitterShape.UNIFORM:
                text += f",{shape}"
        elif key == "reorder":
            p, hold = value
            text = format_number(p)
            if hold != DEFAULT_REORDER_HOLD:
                text += f",{format_duration(hold)}"
        elif key == "corrupt":
            p, k = value
            text = format_number(p) + (f",{k}" if k != 1 else "")
        elif key == "partition":
            text = "|".join(",".join(g) for g in value)
        else:
            text = format_number(value)
        tokens.append(f"{key}={text}")
    return " ".join(tokens) if tokens else CLEAR

