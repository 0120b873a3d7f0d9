"""The control protocol's sans-IO parts: framing bounds, the answer, and key files."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.control import (
    MAX_DEPTH,
    MAX_LINE,
    ControlError,
    KeyFileError,
    answer,
    decode_line,
    json_depth_exceeds,
    mac,
    read_key_file,
    write_key_file,
)

KEY = bytes(range(32))
CHALLENGE = bytes(16)


def _echo(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("cmd") == "refuse":
        raise ValueError("refused on purpose")
    return {"echo": request}


def _signed(request: dict[str, Any], key: bytes = KEY) -> bytes:
    import json

    return json.dumps({"request": request, "mac": mac(key, CHALLENGE, request)}).encode() + b"\n"


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert not json_depth_exceeds(b'{"a": [1, {"b": [2]}]}', 4)
    assert json_depth_exceeds(b'{"a": [1, {"b": [2]}]}', 3)
    assert not json_depth_exceeds(b'{"a": "[[[[{{{{", "b": "\\"[[[["}', 1)
    assert json_depth_exceeds(b'"unterminated \\\\"' + b"[" * 5, 4)
    assert not json_depth_exceeds(b'"' + b'\\"[' * 20000, 1)  # linear, not quadratic


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"[" * 30000 + b"]" * 30000 + b"\n", "too_deep"),  # RecursionError in json.loads
        (b'{"a": "' + b"x" * MAX_LINE + b'"}\n', "too_long"),
        (b"{not json}\n", "malformed"),
        (b"[1, 2]\n", "malformed"),
        (b'{"a": 1}', "malformed"),  # no newline: cut short
        (b'{"a": "\xff"}\n', "malformed"),
        (b'{"a": ' + b"9" * 5000 + b"}\n", "malformed"),  # int too long to convert
    ],
)
def test_lines_over_a_bound_or_not_objects_raise_control_error(line: bytes, reason: str) -> None:
    with pytest.raises(ControlError) as info:
        decode_line(line)
    assert info.value.reason == reason


def test_a_line_at_the_depth_bound_is_fine() -> None:
    deep = b'{"a": ' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}\n"
    assert decode_line(deep).keys() == {"a"}
    with pytest.raises(ControlError, match="nests at most"):
        decode_line(b'{"a": ' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}\n")


def test_answer_authenticates_then_handles() -> None:
    assert answer(_signed({"cmd": "x"}), KEY, CHALLENGE, _echo) == {
        "ok": True,
        "echo": {"cmd": "x"},
    }
    wrong = answer(_signed({"cmd": "x"}, b"y" * 32), KEY, CHALLENGE, _echo, "swarm key")
    assert wrong == {
        "ok": False,
        "reason": "unauthorised",
        "error": "not authorised: wrong swarm key",
    }
    refused = answer(_signed({"cmd": "refuse"}), KEY, CHALLENGE, _echo)
    assert refused["reason"] == "bad_request" and refused["error"] == "refused on purpose"
    shape = answer(b'{"request": [], "mac": "00"}\n', KEY, CHALLENGE, _echo)
    assert shape["reason"] == "malformed"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_fuzz_answer_never_raises(junk: bytes) -> None:
    for line in (junk, junk + b"\n", b'{"request": ' + junk + b', "mac": "0"}\n'):
        reply = answer(line, KEY, CHALLENGE, _echo)
        assert reply["ok"] is False and isinstance(reply["error"], str)


# ---------------------------------------------------------------- key files


def test_a_written_key_is_private_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "k.key"
    key = write_key_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_key_file(path, "test key") == key
    with pytest.raises(FileExistsError):
        write_key_file(path)
    fresh = write_key_file(path, replace=True)
    assert fresh != key and read_key_file(path, "test key") == fresh
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["k.key"]  # no temporary left


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o700 | 0o007])
def test_a_key_file_others_can_open_is_refused_with_the_chmod(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "open key"
    write_key_file(path)
    os.chmod(path, mode)
    with pytest.raises(KeyFileError) as info:
        read_key_file(path, "test key")
    message = str(info.value)
    assert f"mode {mode:04o}" in message and "chmod 600 'open key'" not in message
    assert message.endswith(f"chmod 600 '{path}'") and "\n" not in message


def test_oversized_odd_and_non_files_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.key"
    big.write_text(secrets.token_bytes(2000).hex() + "\n")
    big.chmod(0o600)
    with pytest.raises(KeyFileError, match="over 1024 bytes; at most 1024"):
        read_key_file(big, "test key")
    just_over = tmp_path / "over.key"
    just_over.write_text(secrets.token_bytes(1025).hex())
    just_over.chmod(0o600)
    with pytest.raises(KeyFileError, match="1025 bytes; at most 1024"):
        read_key_file(just_over, "test key")
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(KeyFileError, match="not a regular file"):
        read_key_file(fifo, "test key")  # and does not block
    with pytest.raises(KeyFileError, match="not a regular file"):
        read_key_file(tmp_path, "test key")
    with pytest.raises(KeyFileError, match="does not exist; make one"):
        read_key_file(tmp_path / "none", "test key", "; make one")
    binary = tmp_path / "bin.key"
    binary.write_bytes(b"\xff\xfe" * 20)
    binary.chmod(0o600)
    with pytest.raises(KeyFileError, match="hexadecimal"):
        read_key_file(binary, "test key")
