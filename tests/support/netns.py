"""Network namespaces a test makes for itself: a hub with a bridge, hosts wired to it.

Addresses come from 198.18.0.0/15 (RFC 2544, for tests); nothing leaves the
namespaces, and the fixture deletes them at the end.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess

__all__ = ["SKIP", "Net"]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _netns_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    name = f"stgprobe{random.getrandbits(16):04x}"
    try:
        _ip("netns", "add", name)
        _ip("netns", "del", name)
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"ip netns does not work here: {exc}"
    return None


SKIP = _netns_reason()


class Net:
    """A hub namespace with a bridge, and agent namespaces wired to it."""

    def __init__(self) -> None:
        tag = f"{random.getrandbits(16):04x}"
        self.hub = f"stg-hub-{tag}"
        self.spaces: list[str] = [self.hub]
        _ip("netns", "add", self.hub)
        self.run(self.hub, "link", "set", "lo", "up")
        self.run(self.hub, "link", "add", "br0", "type", "bridge")
        self.run(self.hub, "link", "set", "br0", "up")
        self.tag = tag

    def run(self, ns: str, *args: str) -> None:
        _ip("-n", ns, *args)

    def add_host(self, index: int, address: str) -> str:
        ns = f"stg-{index}-{self.tag}"
        _ip("netns", "add", ns)
        self.spaces.append(ns)
        self.run(ns, "link", "set", "lo", "up")
        inside, outside = f"veth{index}", f"vh{index}{self.tag}"
        self.run(ns, "link", "add", inside, "type", "veth", "peer", "name", outside)
        self.run(ns, "link", "set", outside, "netns", self.hub)
        self.run(ns, "addr", "add", f"{address}/16", "brd", "+", "dev", inside)
        self.run(ns, "link", "set", inside, "up")
        self.run(self.hub, "link", "set", outside, "master", "br0")
        self.run(self.hub, "link", "set", outside, "up")
        return ns

    def close(self) -> None:
        for ns in reversed(self.spaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10, check=False)

