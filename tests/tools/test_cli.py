"""The ``stigmesh`` entry point: every command listed, only the named one imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools import cli

REPO = Path(__file__).resolve().parents[2]

_PROBE = """
import json, sys
from tools import cli
parser = cli.build_parser(sys.argv[1:])
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("tools.", "worlds.", "scipy")))))
"""


def _imported(*argv: str) -> set[str]:
    """The project and scipy modules a fresh interpreter holds after building the parser."""
    out = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=REPO, check=True,
                         capture_output=True, text=True, timeout=60)
    return set(json.loads(out.stdout))


def test_a_car_command_imports_the_car_module_only() -> None:
    mods = _imported("car", "127.0.0.1", "estop")
    assert "tools.commands.car" in mods
    others = {c.module for c in cli.COMMANDS} - {"tools.commands.car"}
    assert not mods & others, sorted(mods & others)
    assert not any(m.startswith("scipy") for m in mods), "the car tools do not need scipy"


def test_the_top_level_help_imports_no_command() -> None:
    assert not _imported("--help") & {c.module for c in cli.COMMANDS}


def test_every_command_is_listed_and_each_parses_its_own_arguments(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.build_parser(["--help"]).parse_args(["--help"])
    assert exc.value.code == 0
    listing = capsys.readouterr().out
    for command in cli.COMMANDS:
        assert command.name in listing
    args = cli.build_parser(["keygen", "k.key"]).parse_args(["keygen", "k.key"])
    assert args.command == "keygen" and args.path == Path("k.key")


def test_an_unknown_command_is_one_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["nonsense"])
    assert exc.value.code == 2
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err


def test_demo_refuses_a_bad_port_and_a_run_dir_it_cannot_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before anything starts: --port 70000 made the demo wait out its whole run with no
    agent up, and a run directory under a file raised."""
    assert cli.main(["demo", "--quiet", "--port", "70000"]) == 2
    assert "--port must be 1..65535, got 70000" in capsys.readouterr().err
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n")
    assert cli.main(["demo", "--quiet", "--run-dir", str(blocked / "run")]) == 2
    assert f"--run-dir {blocked / 'run'}: cannot write there" in capsys.readouterr().err
