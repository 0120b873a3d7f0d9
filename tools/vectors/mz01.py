"""``python -m tools.vectors.mz01 [--check]``: write the MZ01 golden vectors.

Writes ``protocol/vectors/mz01_vectors.json`` (canonical) and
``mz01_vectors.txt`` (the line format of MZ01.md) from the hand-written
scenarios; ``--check`` only compares them with what it would write.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tools.vectors import mz01_scenarios, mz01_scenarios_stop
from tools.vectors.mz01_format import (
    JSON_PATH,
    TXT_PATH,
    VECTOR_DIR,
    Scenario,
    render_json,
    render_txt,
)


def scenarios() -> tuple[Scenario, ...]:
    """Every scenario, in file order."""
    return (*mz01_scenarios.scenarios(), *mz01_scenarios_stop.scenarios())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    items = scenarios()
    outputs = {JSON_PATH: render_json(items), TXT_PATH: render_txt(items)}
    if args.check:
        stale = [p for p, text in outputs.items() if not p.exists() or p.read_text() != text]
        for path in stale:
            print(f"out of date: {path}", file=sys.stderr)
        return 1 if stale else 0
    VECTOR_DIR.mkdir(parents=True, exist_ok=True)
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
