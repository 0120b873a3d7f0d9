"""Peer discovery over mDNS (zeroconf), pinned to one interface, plus static peers.

zeroconf runs its own thread; discovered peers are handed to ``on_peer`` from
that thread, so the caller must hop to its own loop (the runtime passes a
``call_soon_threadsafe`` wrapper). zeroconf is always given the interface
explicitly: its default announces on every interface of the machine.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from zeroconf import (
    IPVersion,
    NonUniqueNameException,
    ServiceBrowser,
    ServiceInfo,
    ServiceStateChange,
    Zeroconf,
)

from agents.drivers.net import Interface
from protocol.errors import RejectCounters
from protocol.mdns import SERVICE_TYPE, AdError, instance_name, parse_ad, txt_record

OnPeer = Callable[[str, tuple[str, int], int], None]  # name, unicast address, epoch


class DuplicateAgentError(RuntimeError):
    """Another agent of this swarm already announces the same name."""


class Discovery:
    def __init__(
        self,
        iface: Interface,
        *,
        name: str,
        swarm: str,
        epoch: int,
        port: int,
        on_peer: OnPeer,
    ) -> None:
        self.iface, self.name, self.swarm, self.on_peer = iface, name, swarm, on_peer
        self.rejects = RejectCounters()
        self._zc = Zeroconf(interfaces=[iface.address], ip_version=IPVersion.V4Only)
        self._info = ServiceInfo(
            SERVICE_TYPE,
            instance_name(name, swarm),
            addresses=[socket.inet_aton(iface.address)],
            port=port,
            properties=txt_record(name, swarm, epoch, port),
        )
        self._browser: ServiceBrowser | None = None

    def start(self) -> None:
        try:
            self._zc.register_service(self._info, allow_name_change=False)
        except NonUniqueNameException:
            self._zc.close()
            raise DuplicateAgentError(
                f"an agent named {self.name!r} already runs in swarm {self.swarm!r} on this "
                "network; agent names must be unique within a swarm"
            ) from None
        self._browser = ServiceBrowser(self._zc, SERVICE_TYPE, handlers=[self._changed])

    def _changed(self, **kw: Any) -> None:
        zc: Zeroconf = kw["zeroconf"]
        instance: str = kw["name"]
        state: ServiceStateChange = kw["state_change"]
        if state is ServiceStateChange.Removed:
            return
        info = zc.get_service_info(SERVICE_TYPE, instance, timeout=1000)
        if info is None:
            self.rejects.count("no_info")
            return
        try:
            ad = parse_ad(instance, info.properties)
        except AdError as exc:
            self.rejects.count(exc.reason)
            return
        addresses = info.parsed_addresses(IPVersion.V4Only)
        if ad.name == self.name or ad.swarm != self.swarm or not addresses:
            return
        self.on_peer(ad.name, (addresses[0], ad.port), ad.epoch)

    def close(self) -> None:
        try:
            if self._browser is not None:
                self._browser.cancel()
            self._zc.unregister_service(self._info)
        finally:
            self._zc.close()
