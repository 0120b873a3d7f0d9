"""The control protocol: one key-authenticated JSON request per stream connection.

Agents (``RUN_DIR/NAME.sock``, opened by the swarm key) and the world
(``RUN_DIR/world.sock``, opened by the world's control key ``RUN_DIR/world.key``)
both speak it on a UNIX socket; an agent started with ``--control-listen
ADDRESS:PORT`` also speaks it on TCP, so that a script on another host can
inspect it and inject faults (the same challenge-response authenticates it;
like the swarm itself, it is not encrypted). One JSON object a line, each way::

    server -> client  {"server": NAME, "challenge": HEX}     16 fresh random bytes
    client -> server  {"request": {...}, "mac": HEX}
    server -> client  {"ok": true, ...}  or  {"ok": false, "reason": R, "error": TEXT}

where ``mac = HMAC-SHA256(key, challenge || canonical(request))`` and the
canonical form is the request as JSON with sorted keys and no spaces. The
server then closes the connection: a challenge opens exactly one request.

Bounds: a request line is at most :data:`MAX_LINE` bytes (64 KiB), a reply
line :data:`MAX_REPLY` bytes, JSON nests at most :data:`MAX_DEPTH` levels,
and a client has :data:`REQUEST_TIMEOUT` seconds to send its request. A line
over a bound, not JSON or not an object is answered ``ok: false`` with
reason ``too_long``, ``too_deep`` or ``malformed``; a wrong MAC with
``unauthorised``; a refused request with ``bad_request``. The socket file
is mode 0600 before it accepts a connection, so only its owner can connect;
the key keeps a stale or foreign socket from obeying the wrong client.

Keys are kept in files of hexadecimal text, mode 0600
(:func:`write_key_file`); :func:`read_key_file` refuses a file others can
read, as ssh refuses an open private key. Every failure a client sees is a
:class:`ControlError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import shlex
import socket
import stat
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from protocol.errors import ProtocolError

MAX_LINE = 64 * 1024  # a request or greeting line, newline included
MAX_REPLY = 1024 * 1024  # a reply line (a status reply is a few KiB)
MAX_DEPTH = 32  # JSON nesting; valid messages nest at most 6 levels
REQUEST_TIMEOUT = 5.0  # s a client has to send its request
CHALLENGE_BYTES = 16
KEY_BYTES = 32  # a new key
MIN_KEY_BYTES = 16
MAX_KEY_BYTES = 1024

Handler = Callable[[dict[str, Any]], dict[str, Any]]
Target = Path | tuple[str, int]  # a UNIX socket, or a TCP (host, port)


class ControlReason(StrEnum):
    UNREACHABLE = "unreachable"  # nothing listens on the socket
    NO_KEY = "no_key"  # the client has no usable key
    TIMEOUT = "timeout"
    BROKEN = "broken"  # the connection failed mid-exchange
    TOO_LONG = "too_long"
    TOO_DEEP = "too_deep"
    MALFORMED = "malformed"
    UNAUTHORISED = "unauthorised"
    BAD_REQUEST = "bad_request"  # the server refused the request itself


class ControlError(ProtocolError):
    """A control exchange failed or was refused; ``str()`` is the one-line message."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason, detail)

    def __str__(self) -> str:
        return self.detail or self.reason


class KeyFileError(ValueError):
    """A key file is missing, unreadable, open to others, or does not hold a usable key."""


# ---------------------------------------------------------------- framing

# A JSON string (unterminated: to the end) or a bracket; strings never fail to match,
# so the scan is linear whatever the input.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*+"?|[\[\]{}]')


def json_depth_exceeds(data: bytes, limit: int) -> bool:
    """Whether the JSON text ``data`` nests arrays and objects deeper than ``limit``."""
    depth = 0
    for match in _TOKENS.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def decode_line(line: bytes, limit: int = MAX_LINE) -> dict[str, Any]:
    """One protocol line as a JSON object; raises :class:`ControlError` (and nothing else)."""
    if len(line) > limit:
        raise ControlError(ControlReason.TOO_LONG, f"a line is at most {limit} bytes")
    if not line.endswith(b"\n"):
        raise ControlError(ControlReason.MALFORMED, "the line ended without a newline")
    if json_depth_exceeds(line, MAX_DEPTH):
        raise ControlError(ControlReason.TOO_DEEP, f"JSON nests at most {MAX_DEPTH} levels")
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ControlError(ControlReason.MALFORMED, f"not a JSON line: {exc}") from None
    if not isinstance(obj, dict):
        raise ControlError(ControlReason.MALFORMED, "a line is a JSON object")
    return obj


def encode_line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode("utf-8") + b"\n"


def canonical(request: dict[str, Any]) -> bytes:
    return json.dumps(request, sort_keys=True, separators=(",", ":")).encode("utf-8")


def mac(key: bytes, challenge: bytes, request: dict[str, Any]) -> str:
    return hmac.new(key, challenge + canonical(request), hashlib.sha256).hexdigest()


def refusal(reason: str, error: str) -> dict[str, Any]:
    return {"ok": False, "reason": str(reason), "error": error}


# ---------------------------------------------------------------- server


def answer(
    line: bytes, key: bytes, challenge: bytes, handle: Handler, key_label: str = "key"
) -> dict[str, Any]:
    """The reply to one request line (sans-IO: the server's whole decision)."""
    try:
        message = decode_line(line)
    except ControlError as exc:
        return refusal(exc.reason, str(exc))
    request, tag = message.get("request"), message.get("mac")
    if not isinstance(request, dict) or not isinstance(tag, str):
        return refusal(ControlReason.MALFORMED, 'a request is {"request": {...}, "mac": HEX}')
    if not hmac.compare_digest(mac(key, challenge, request), tag):
        return refusal(ControlReason.UNAUTHORISED, f"not authorised: wrong {key_label}")
    try:
        return {"ok": True, **handle(request)}
    except ControlError as exc:
        return refusal(exc.reason, str(exc))
    except (ValueError, KeyError, TypeError) as exc:
        return refusal(ControlReason.BAD_REQUEST, str(exc))


def bind_private(path: Path) -> socket.socket:
    """A UNIX socket bound at ``path`` (a stale file replaced), mode 0600, not yet listening."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)  # before listen(): nobody can connect in between
    except BaseException:
        sock.close()
        raise
    return sock


Connection = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]


def _connection(name: str, key: bytes, handle: Handler, key_label: str) -> Connection:
    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        challenge = secrets.token_bytes(CHALLENGE_BYTES)
        try:
            writer.write(encode_line({"server": name, "challenge": challenge.hex()}))
            await writer.drain()
            try:
                line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT)
            except ValueError:  # the limit: more than MAX_LINE bytes without a newline
                reply = refusal(ControlReason.TOO_LONG, f"a line is at most {MAX_LINE} bytes")
            else:
                reply = answer(line, key, challenge, handle, key_label)
            writer.write(encode_line(reply))
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    return one


async def serve_control(
    path: Path, name: str, key: bytes, handle: Handler, key_label: str = "key"
) -> asyncio.Server:
    """Serve ``handle`` on ``path`` until the returned server is closed.

    ``handle`` gets the authenticated request and returns the reply's fields;
    it refuses by raising :class:`ControlError`, ``ValueError``, ``KeyError``
    or ``TypeError`` (the message goes back to the client).
    """
    sock = bind_private(path)
    return await asyncio.start_unix_server(
        _connection(name, key, handle, key_label), sock=sock, limit=MAX_LINE
    )


async def serve_control_tcp(
    address: tuple[str, int], name: str, key: bytes, handle: Handler, key_label: str = "key"
) -> asyncio.Server:
    """The same service on TCP ``address`` (an interface's address, never all of them)."""
    return await asyncio.start_server(
        _connection(name, key, handle, key_label), address[0], address[1], limit=MAX_LINE,
        reuse_address=True,
    )


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (an IPv4 address or a name, a port 1..65535); ``ValueError`` saying why."""
    host, sep, port = text.rpartition(":")
    if not (sep and host and port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(f"expected HOST:PORT with a port in 1..65535, got {text!r}")
    if host in ("0.0.0.0", "", "*"):
        raise ValueError("give the interface's own address, not every interface (0.0.0.0)")
    return host, int(port)


# ---------------------------------------------------------------- client


def exchange(
    target: Target, key: bytes, req: dict[str, Any], timeout: float = 5.0
) -> dict[str, Any]:
    """Send one request and return the reply, ``ok`` or not; raises :class:`ControlError`."""
    path = target if isinstance(target, Path) else f"{target[0]}:{target[1]}"
    family = socket.AF_UNIX if isinstance(target, Path) else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(target) if isinstance(target, Path) else target)
        except OSError as exc:
            raise ControlError(
                ControlReason.UNREACHABLE, f"nothing listens on {path}: {exc.strerror or exc}"
            ) from None
        stream = sock.makefile("rwb")
        hello = decode_line(_read(stream, MAX_LINE, path), MAX_LINE)
        try:
            challenge = bytes.fromhex(str(hello["challenge"]))
        except (KeyError, ValueError):
            raise ControlError(ControlReason.MALFORMED, f"{path}: no challenge") from None
        stream.write(encode_line({"request": req, "mac": mac(key, challenge, req)}))
        stream.flush()
        return decode_line(_read(stream, MAX_REPLY, path), MAX_REPLY)
    except TimeoutError:
        raise ControlError(ControlReason.TIMEOUT, f"{path}: no answer in {timeout:g} s") from None
    except OSError as exc:
        raise ControlError(
            ControlReason.BROKEN, f"control exchange with {path} failed: {exc.strerror or exc}"
        ) from None
    finally:
        sock.close()


def _read(stream: Any, limit: int, path: Path | str) -> bytes:
    line: bytes = stream.readline(limit + 1)
    if not line:
        raise ControlError(ControlReason.BROKEN, f"{path}: the server closed without answering")
    return line


def request(
    target: Target, key: bytes, req: dict[str, Any], timeout: float = 5.0
) -> dict[str, Any]:
    """Send one request; the ``ok`` reply, or :class:`ControlError` with the server's reason."""
    reply = exchange(target, key, req, timeout)
    if reply.get("ok") is not True:
        reason = str(reply.get("reason"))
        known = reason if reason in {r.value for r in ControlReason} else "bad_request"
        raise ControlError(known, str(reply.get("error", "refused")))
    return reply


# ---------------------------------------------------------------- key files


def write_key_file(path: Path, nbytes: int = KEY_BYTES, *, replace: bool = False) -> bytes:
    """Write a new random key as hex, mode 0600; an existing file raises ``FileExistsError``
    unless ``replace`` (then it is replaced atomically)."""
    key = secrets.token_bytes(nbytes)
    path.parent.mkdir(parents=True, exist_ok=True)
    target = path.with_name(f".{path.name}.{secrets.token_hex(4)}") if replace else path
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex() + "\n")
    if replace:
        os.replace(target, path)
    return key


def read_key_file(
    path: Path,
    what: str,
    hint: str = "",
    *,
    min_bytes: int = MIN_KEY_BYTES,
    max_bytes: int = MAX_KEY_BYTES,
    fix: str = "",
) -> bytes:
    """The key in ``path``; raises :class:`KeyFileError` with a one-line message and its fix.

    ``what`` names the key ("swarm key"); ``hint`` ends the message for a missing file,
    ``fix`` the message for a file that holds no usable key.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block us
    except FileNotFoundError:
        raise KeyFileError(f"{what} file {path} does not exist{hint}") from None
    except OSError as exc:
        raise KeyFileError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    limit = 2 * max_bytes + 64  # hex, and room for whitespace
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise KeyFileError(f"{what} file {path} is not a regular file")
        data = b""
        while len(data) <= limit and (chunk := os.read(fd, limit + 1 - len(data))):
            data += chunk
    except OSError as exc:
        raise KeyFileError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(data.decode("ascii").strip()) if len(data) <= limit else None
    except ValueError:  # UnicodeDecodeError too
        raise KeyFileError(f"{what} file {path} must hold the key as hexadecimal{fix}") from None
    if key is None or len(key) > max_bytes:
        size = f"{len(key)} bytes" if key is not None else f"over {max_bytes} bytes"
        raise KeyFileError(f"{what} in {path} is {size}; at most {max_bytes} are allowed{fix}")
    if len(key) < min_bytes:
        raise KeyFileError(
            f"{what} in {path} is {len(key)} bytes; at least {min_bytes} are needed{fix}"
        )
    if mode & 0o077:
        raise KeyFileError(
            f"{what} file {path} is open to other users (mode {stat.S_IMODE(mode):04o}); "
            f"make it private: chmod 600 {shlex.quote(str(path))}"
        )
    return key
