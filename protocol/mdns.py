"""The swarm's mDNS service record: type, instance name and TXT keys (sans-IO).

Service type ``_stigmesh._udp.local.``; instance ``AGENT [SWARM]``; TXT keys
``id`` (the agent id), ``swarm`` (swarm name), ``epoch`` (decimal u32), ``v``
(protocol version) and ``port`` (the agent's unicast UDP port). The design
named the instance after the agent alone; with the swarm in it, two swarms on
one LAN may both have a "walnut" (mDNS instance names must be unique).
Parsing is strict: a record that is not one of ours raises :class:`AdError`
with a named reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.errors import ProtocolError
from protocol.swarm.fields import check_name
from protocol.swarm.messages import PROTOCOL_VERSION

SERVICE_TYPE = "_stigmesh._udp.local."


class AdError(ProtocolError):
    """A service record that cannot describe a stigmesh peer."""


@dataclass(frozen=True)
class PeerAd:
    name: str
    swarm: str
    epoch: int
    port: int
    version: int


def instance_name(agent: str, swarm: str) -> str:
    return f"{agent} [{swarm}].{SERVICE_TYPE}"


def txt_record(agent: str, swarm: str, epoch: int, port: int) -> dict[str, str]:
    return {
        "id": agent,
        "swarm": swarm,
        "epoch": str(epoch),
        "v": str(PROTOCOL_VERSION),
        "port": str(port),
    }


def _text(props: Mapping[bytes, bytes | None], key: str) -> str:
    raw = props.get(key.encode())
    if raw is None:
        raise AdError("missing_key", key)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AdError("bad_value", key) from None


def _uint(props: Mapping[bytes, bytes | None], key: str, top: int) -> int:
    text = _text(props, key)
    if not text.isdigit() or int(text) > top:
        raise AdError("bad_value", f"{key}={text[:20]!r}")
    return int(text)


def parse_ad(instance: str, props: Mapping[bytes, bytes | None]) -> PeerAd:
    """A peer from its instance name and TXT properties (as zeroconf gives them)."""
    if not instance.endswith("." + SERVICE_TYPE):
        raise AdError("wrong_type", instance)
    name = _text(props, "id")
    try:
        check_name(name)
    except ValueError:
        raise AdError("bad_name", repr(name[:40])) from None
    version = _uint(props, "v", 255)
    if version != PROTOCOL_VERSION:
        raise AdError("bad_version", str(version))
    return PeerAd(
        name=name,
        swarm=_text(props, "swarm"),
        epoch=_uint(props, "epoch", 0xFFFF_FFFF),
        port=_uint(props, "port", 0xFFFF),
        version=version,
    )
