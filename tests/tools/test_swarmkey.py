"""Swarm key files: an open or oversized key is refused in one line with the fix."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tools.swarmkey import KeyFileError, read_key, write_key


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", *args], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


def test_a_world_readable_key_is_refused_with_the_chmod(tmp_path: Path) -> None:
    key = tmp_path / "swarm.key"
    write_key(key)
    key.chmod(0o644)
    with pytest.raises(KeyFileError, match=rf"mode 0644.*chmod 600 {key}$"):
        read_key(key)
    for command in (("faults", "walnut", "status"), ("status",)):
        result = cli(*command, "--run-dir", str(tmp_path))
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.strip().endswith(f"chmod 600 {key}")
        assert len(result.stderr.strip().splitlines()) == 1
    key.chmod(0o600)
    assert len(read_key(key)) == 32


def test_a_key_the_swarm_codec_would_refuse_is_refused_on_reading(tmp_path: Path) -> None:
    key = tmp_path / "big.key"
    key.write_text(secrets.token_bytes(1030).hex() + "\n")  # the agent died on this in its codec
    key.chmod(0o600)
    with pytest.raises(KeyFileError, match=r"1030 bytes; at most 1024 are allowed \(stigmesh keyg"):
        read_key(key)
    result = cli("status", "--run-dir", str(tmp_path), "--swarm-key", str(key))
    assert result.returncode == 2 and "at most 1024" in result.stderr
    huge = tmp_path / "huge.key"
    huge.write_bytes(b"00" * 10_000_000)  # not read whole
    huge.chmod(0o600)
    with pytest.raises(KeyFileError, match="over 1024 bytes"):
        read_key(huge)


def test_keygen_never_overwrites_and_names_a_folder_that_is_a_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tools import cli

    key = tmp_path / "swarm.key"
    assert cli.main(["keygen", str(key)]) == 0 and len(key.read_text().strip()) == 64
    before = key.read_text()
    assert cli.main(["keygen", str(key)]) == 2 and key.read_text() == before
    assert f"{key} exists; not overwritten" in capsys.readouterr().err
    assert cli.main(["keygen", str(key / "nested.key")]) == 2  # under a file
    assert f"{key} is a file, not a folder" in capsys.readouterr().err
