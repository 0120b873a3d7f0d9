"""The evidence's report: a section per experiment, written as docs/evidence.md and .json."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.experiments.evidence.plan import Plan


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


def write(sections: Sequence[Section], out: Path, plan: Plan, *, quick: bool,
          measured: str, extra: dict[str, Any]) -> Path:
    md = out / "evidence.md"
    head = [
        "# Evidence",
        "",
        *(["**QUICK RUN** (`--quick`): few seeds and short runs, a smoke test of the "
           "pipeline; these numbers are not the evidence.", ""] if quick else []),
        "Written by `python -m tools.experiments.evidence" + (" --quick" if quick else "")
        + f"`: {measured}."
        " Every lockstep run is deterministic: the "
        "command in each row reproduces its numbers exactly. Errors are against the world's "
        "ground truth, measured by `tools.replay` from the run logs (tracks predicted to a "
        "10 Hz time base). \"After 20 s\" is run time. Mean ± std over seeds unless said; "
        "p-values are two-sided (Wilcoxon signed-rank when paired by seed).",
        "",
        "A note on what \"track error\" includes: an agent's track is counted wherever it "
        "holds one, including while it is only predicted after the target was lost; an agent "
        "drops its track after 6 s without any new measurement (its own or a peer's), and "
        "then nothing is counted until it has a track again. Those predicted stretches "
        "dominate the larger errors below.",
        "",
    ]
    text = "\n".join(head) + "\n" + "\n".join(s.md() for s in sections)
    md.write_text(text, encoding="utf-8")
    data = {"plan": plan.__dict__, "sections": {s.title: s.data for s in sections}, **extra}
    (out / "evidence.json").write_text(json.dumps(data, indent=1, default=str) + "\n",
                                       encoding="utf-8")
    return md
