"""``ByzantineSpec``: how a lying agent distorts what it detects or what it sends.

A frozen, validated value with a text form (``parse_byzantine`` /
``format_byzantine``) and a TOML-table form with the same keys. The behaviour
itself is :class:`agents.faults.byzantine.Byzantine`.
"""

from __future__ import annotations

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
    check_real,
    format_duration,
    format_number,
    mapping_tokens,
    parse_duration,
    parse_number,
    split_tokens,
)

MAX_BIAS = 1000.0  # metres
MAX_NOISE = 100.0  # metres
MAX_REPLAY = 3600.0  # seconds
MAX_OVERCONFIDENT = 1e6


class Stage(StrEnum):
    """Where bias, noise and overconfidence act.

    ``send``: on the TRACK and PATCH beliefs it broadcasts (its own belief stays
    honest: a liar). ``sense``: on its detections (a broken sensor: its own belief
    is wrong and so is everything it sends, through its honest filters). Replay
    always acts on what is sent.
    """

    SEND = "send"
    SENSE = "sense"


@dataclass(frozen=True)
class ByzantineSpec:
    """Behaviours of a lying agent; the default is an honest one.

    - ``bias``: (dx, dy) metres added to positions (cells shift by whole cells).
    - ``noise``: standard deviation (metres) of zero-mean Gaussian noise added to
      positions, fresh for each detection or message.
    - ``replay``: seconds; broadcast the belief sent that long ago, restamped as
      current, instead of the current one.
    - ``overconfident``: factor >= 1 that covariances and variances are divided by.
    - ``at``: the :class:`Stage` bias, noise and overconfidence act at.
    """

    bias: tuple[float, float] = (0.0, 0.0)
    noise: float = 0.0
    replay: float = 0.0
    overconfident: float = 1.0
    at: Stage = Stage.SEND

    def __post_init__(self) -> None:
        b = self.bias
        if isinstance(b, str) or not isinstance(b, tuple | list) or len(b) != 2:
            raise FaultSpecError("bias must be a pair (dx, dy) in metres")
        object.__setattr__(
            self,
            "bias",
            (
                check_real(b[0], "bias dx", -MAX_BIAS, MAX_BIAS),
                check_real(b[1], "bias dy", -MAX_BIAS, MAX_BIAS),
            ),
        )
        object.__setattr__(self, "noise", check_real(self.noise, "noise", 0.0, MAX_NOISE))
        object.__setattr__(self, "replay", check_duration(self.replay, "replay", MAX_REPLAY))
        object.__setattr__(
            self,
            "overconfident",
            check_real(self.overconfident, "overconfident", 1.0, MAX_OVERCONFIDENT),
        )
        try:
            object.__setattr__(self, "at", Stage(self.at))
        except ValueError:
            raise FaultSpecError(f"at must be send or sense, got {self.at!r}") from None

    @property
    def is_honest(self) -> bool:
        """True when nothing is distorted (the ``clear`` spec, whatever ``at`` says)."""
        return (
            self.bias == (0.0, 0.0)
            and self.noise == 0.0
            and self.replay == 0.0
            and self.overconfident == 1.0
        )

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, object]) -> ByzantineSpec:
        """From a TOML table with the text keys; a bare number for ``replay`` is seconds."""
        return build_spec(mapping_tokens(mapping), _PARSERS, ByzantineSpec, strict_units=False)

    def to_mapping(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.bias != (0.0, 0.0):
            out["bias"] = list(self.bias)
        if self.noise:
            out["noise"] = self.noise
        if self.replay:
            out["replay"] = self.replay
        if self.overconfident != 1.0:
            out["overconfident"] = self.overconfident
        if self.at is not Stage.SEND:
            out["at"] = self.at.value
        return out


# --- the text form ----------------------------------------------------------------------

def _metres(text: str, what: str) -> float:
    t = text.strip()
    return parse_number(t[:-1] if t.endswith("m") and not t.endswith("em") else t, what)


def _bias(value: str, strict: bool) -> dict[str, Any]:
    parts = [p.strip() for p in value.split(",")]
    if len(parts) != 2 or not all(parts):
        raise FaultSpecError(f"bias takes two comma-separated metres dx,dy, got {value!r}")
    return {"bias": (_metres(parts[0], "bias dx"), _metres(parts[1], "bias dy"))}


def _noise(value: str, strict: bool) -> dict[str, Any]:
    return {"noise": _metres(value, "noise")}


def _replay(value: str, strict: bool) -> dict[str, Any]:
    return {"replay": parse_duration(value, "replay", unit_required=strict)}


def _overconfident(value: str, strict: bool) -> dict[str, Any]:
    t = value.strip()
    return {"overconfident": parse_number(t[:-1] if t.endswith("x") else t, "overconfident")}


def _at(value: str, strict: bool) -> dict[str, Any]:
    try:
        return {"at": Stage(value.strip().lower())}
    except ValueError:
        raise FaultSpecError(f"at must be send or sense, got {value!r}") from None


_PARSERS: dict[str, Parser] = {
    "bias": _bias,
    "noise": _noise,
    "replay": _replay,
    "overconfident": _overconfident,
    "at": _at,
}


def parse_byzantine(text: str) -> ByzantineSpec:
    """Parse e.g. ``"bias=2,0 noise=0.3 replay=5s overconfident=10"``.

    Keys: ``bias=DX,DY`` (metres, an optional ``m`` suffix), ``noise=SIGMA`` (metres),
    ``replay=DUR`` (needs a unit: us, ms, s), ``overconfident=FACTOR`` (>= 1, an
    optional ``x`` suffix), ``at=send|sense``; or ``clear`` alone (an honest agent).
    Raises :class:`FaultSpecError` naming the bad token.
    """
    return build_spec(split_tokens(text), _PARSERS, ByzantineSpec, strict_units=True)


def format_byzantine(spec: ByzantineSpec) -> str:
    """The canonical text of ``spec``; ``parse_byzantine`` gives back an equal spec."""
    tokens = []
    for key, value in spec.to_mapping().items():
        if key == "bias":
            text = ",".join(format_number(v) for v in value)
        elif key == "replay":
            text = format_duration(value)
        elif key == "at":
            text = value
        else:
            text = format_number(value)
        tokens.append(f"{key}={text}")
    return " ".join(tokens) if tokens else CLEAR
