"""Why a swarm datagram was rejected: the named reasons and the one error type."""

from __future__ import annotations

from enum import StrEnum

from protocol.errors import ProtocolError


class RejectReason(StrEnum):
    """Every way a received swarm datagram can fail, in check order (see SWARM.md)."""

    TOO_SHORT = "too_short"  # cannot hold a MAC and one byte of msgpack
    TOO_LONG = "too_long"  # over the configured datagram limit
    BAD_MAC = "bad_mac"
    MALFORMED = "malformed"  # not msgpack, or over a structural limit, ext type, bad map key
    TRAILING_BYTES = "trailing_bytes"  # one complete msgpack object followed by more bytes
    BAD_VERSION = "bad_version"
    BAD_SHAPE = "bad_shape"  # wrong container type or arity, cell bin not a multiple of 8
    UNKNOWN_KIND = "unknown_kind"
    BAD_TYPE = "bad_type"  # a field holds the wrong msgpack type
    NOT_FINITE = "not_finite"  # NaN or infinity in a float or float16 cell value
    OUT_OF_RANGE = "out_of_range"  # right type, value outside the field's range
    INCONSISTENT = "inconsistent"  # fields valid alone but contradicting each other
    WRONG_SWARM = "wrong_swarm"
    DUPLICATE = "duplicate"  # replay window: this (sender, epoch, seq) was already accepted
    TOO_OLD = "too_old"  # replay window: seq is 64 or more behind the newest accepted


class SwarmDecodeError(ProtocolError):
    """A swarm datagram was rejected; ``reason`` is a :class:`RejectReason` value."""

    def __init__(self, reason: RejectReason, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.reject_reason = reason


class FieldError(ValueError):
    """A message field is invalid.

    Raised by the message constructors: on the sending side it is a plain
    ``ValueError`` (the sender's bug); the decoder turns it into a
    :class:`SwarmDecodeError` with the same ``reason``.
    """

    def __init__(self, reason: RejectReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
