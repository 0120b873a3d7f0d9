"""MZ01, the car link: command codec, clock probe, telemetry and the reference firmware model.

The normative rules are in ``protocol/MZ01.md``; the golden vectors that both
this model and the C firmware core must pass are in ``protocol/vectors/``.
"""

from protocol.mz01.firmware import (
    Address,
    CarState,
    Event,
    EventKind,
    FirmwareModel,
    Outgoing,
    StepResult,
    check_command,
    stamp_offset_ms,
)
from protocol.mz01.packet import (
    COMMAND_SIZE,
    FLAG_RESET_ESTOP,
    MAGIC,
    Command,
    Kind,
    PacketError,
    Reason,
    decode_command,
    encode_command,
    to_binary32,
)
from protocol.mz01.probe import (
    PROBE_MAGIC,
    ProbeError,
    ProbeReply,
    ProbeRequest,
    decode_probe_reply,
    decode_probe_request,
    encode_probe_reply,
    encode_probe_request,
)
from protocol.mz01.telemetry import (
    MAX_TELEMETRY_BYTES,
    Telemetry,
    TelemetryError,
    encode_telemetry,
    parse_telemetry,
)

__all__ = [
    "COMMAND_SIZE",
    "FLAG_RESET_ESTOP",
    "MAGIC",
    "MAX_TELEMETRY_BYTES",
    "PROBE_MAGIC",
    "Address",
    "CarState",
    "Command",
    "Event",
    "EventKind",
    "FirmwareModel",
    "Kind",
    "Outgoing",
    "PacketError",
    "ProbeError",
    "ProbeReply",
    "ProbeRequest",
    "Reason",
    "StepResult",
    "Telemetry",
    "TelemetryError",
    "check_command",
    "decode_command",
    "decode_probe_reply",
    "decode_probe_request",
    "encode_command",
    "encode_probe_reply",
    "encode_probe_request",
    "encode_telemetry",
    "parse_telemetry",
    "stamp_offset_ms",
    "to_binary32",
]
