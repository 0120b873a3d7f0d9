"""Network interfaces and the swarm's UDP sockets.

Traffic goes only where the user points it: the interface is always explicit.
On loopback every agent shares 127.255.255.255 for broadcast (Linux routes
all of 127.0.0.0/8 to ``lo``); on a real interface the subnet's broadcast
address is used. Nothing here ever sends to the limited broadcast address.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from dataclasses import dataclass

LOOPBACK_BROADCAST = "127.255.255.255"
LIMITED_BROADCAST = str(ipaddress.IPv4Network("0.0.0.0/0").broadcast_address)  # never used
_SIOCGIFADDR = 0x8915
_SIOCGIFBRDADDR = 0x8919


class InterfaceError(ValueError):
    """The named interface does not exist or has no usable IPv4 address."""


@dataclass(frozen=True)
class Interface:
    name: str  # as given: an interface name or an address
    address: str  # the IPv4 address to bind and announce
    broadcast: str  # where swarm broadcasts go

    @property
    def loopback(self) -> bool:
        return ipaddress.IPv4Address(self.address).is_loopback


def _ioctl_address(name: str, request: int) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        packed = struct.pack("256s", name.encode()[:15])
        try:
            result = fcntl.ioctl(s.fileno(), request, packed)
        except OSError as exc:
            raise InterfaceError(f"interface {name!r}: {exc.strerror}") from None
    return socket.inet_ntoa(result[20:24])


def resolve_interface(spec: str) -> Interface:
    """``lo``, ``eth0``, or an IPv4 address (loopback addresses need no interface)."""
    try:
        addr = ipaddress.IPv4Address(spec)
    except ValueError:
        address = _ioctl_address(spec, _SIOCGIFADDR)
        if ipaddress.IPv4Address(address).is_loopback:
            return Interface(spec, address, LOOPBACK_BROADCAST)
        broadcast = _ioctl_address(spec, _SIOCGIFBRDADDR)
        if broadcast in ("0.0.0.0", LIMITED_BROADCAST):
            raise InterfaceError(f"interface {spec!r} has no subnet broadcast address") from None
        return Interface(spec, address, broadcast)
    if addr.is_loopback:
        return Interface(spec, str(addr), LOOPBACK_BROADCAST)
    for name in _interface_names():
        try:
            if _ioctl_address(name, _SIOCGIFADDR) == str(addr):
                return Interface(name, str(addr), _ioctl_address(name, _SIOCGIFBRDADDR))
        except InterfaceError:
            continue
    raise InterfaceError(f"no interface has the address {addr}")


def _interface_names() -> list[str]:
    return [name for _, name in socket.if_nameindex()]


def unicast_socket(iface: Interface, port: int = 0) -> socket.socket:
    """The agent's own socket: sends broadcasts and unicasts, receives unicasts."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.setblocking(False)
    s.bind((iface.address, port))
    return s


def broadcast_socket(iface: Interface, port: int) -> socket.socket:
    """Receives the swarm's broadcasts; shared by every agent on this host."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.setblocking(False)
    s.bind((iface.broadcast, port))
    return s
