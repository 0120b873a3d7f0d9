"""A child process joined to the world by a SEQPACKET socket pair (a SITL car, the render worker).

The child gets its end as an inherited file descriptor; the world keeps the
other, non-blocking. The child is expected to exit when the world's end closes.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable
from typing import Any


def spawn_linked(
    argv: Callable[[int], list[str]], buffer: int, *, first: bytes | None = None, **popen: Any
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start ``argv(fd)`` with ``fd`` its end of a new link (send and receive buffers of
    ``buffer`` bytes; ``first`` is queued before it starts); the process and the world's end."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            ours.setsockopt(socket.SOL_SOCKET, opt, buffer)
        if first is not None:
            ours.send(first)
        proc = subprocess.Popen(
            argv(theirs.fileno()), pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, **popen
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    ours.setblocking(False)
    return proc, ours
