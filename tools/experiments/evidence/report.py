"""The evidence's report: a section per experiment, written as docs/evidence.md and .json, and
the README's evidence table (between its markers)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

README_BEGIN = "<!-- evidence-table: written by python -m tools.experiments.evidence -->"
README_END = "<!-- /evidence-table -->"


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def md(self) -> str:
        out = [f"## {self.title}", "", *self.text, ""]
        for name, caption in self.figures:
            out += [f"![{caption}](evidence/{name})", "", f"*{caption}*", ""]
        return "\n".join(out)


def write(sections: Sequence[Section], out: Path, *, quick: bool, measured: str,
          extra: dict[str, Any], command: str = "python -m tools.experiments.evidence") -> Path:
    md = out / "evidence.md"
    head = [
        "# Evidence",
        "",
        *(["**QUICK RUN** (`--quick`): few seeds, no real-process runs, a smoke test of the "
           "pipeline; these numbers are not the evidence.", ""] if quick else []),
        f"Written by `{command}` from the scenario suite (`scenarios/suite.toml`): "
        f"{measured}. Every lockstep "
        "run is deterministic: `stigmesh run --lockstep scenarios/FILE.toml --seed N` "
        "reproduces it exactly. Errors are against the world's ground truth, measured by "
        "`tools.replay` from the run logs on a 10 Hz time base, and only while the agent "
        "holds a track (an agent drops its track after its `track_timeout` without news; "
        "how long it holds one is measured on its own). \"After 20 s\" is run time. "
        "p-values are two-sided (Wilcoxon signed-rank when paired by seed). Every "
        "simulated car carries a yaw-rate gyro (an arena's `car_model.gyro`, true by "
        "default; each draws a bias and a scale error at boot, `gyro_bias` and `gyro_scale`, "
        "worlds/ARENA.md): the Freenove FNK0053 has none, and a real car is the car measured here "
        "only with an MPU-6050 added (`firmware/README.md`, \"A gyro\"); the fault-free "
        "scenes without one: README.md, \"Without a gyro\" "
        "(`stigmesh sweep scenarios/FILE.toml --over gyro=1,0`).",
        "",
    ]
    text = "\n".join(head) + "\n" + "\n".join(s.md() for s in sections)
    md.write_text(text, encoding="utf-8")
    data = {"sections": {s.title: s.data for s in sections}, **extra}
    (out / "evidence.json").write_text(json.dumps(data, indent=1, default=str) + "\n",
                                       encoding="utf-8")
    return md


def write_readme_table(readme: Path, table: str, intro: str) -> bool:
    """Replace what lies between the README's evidence-table markers with ``intro`` and
    ``table``; nothing else of the file changes. False when the markers are not there."""
    text = readme.read_text(encoding="utf-8")
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < begin:
        return False
    new = text[: begin + len(README_BEGIN)] + "\n" + intro + "\n\n" + table + text[end:]
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return True
