"""``stigmesh log``: a run's logs as JSON lines, or as one MCAP file for Foxglove.

    stigmesh log cat RUN/NAME [--event E ...]     every event of one log, one JSON line each
    stigmesh log export RUN --jsonl [--out DIR]   NAME.jsonl beside (or in DIR) each NAME.mcap
    stigmesh log export RUN --mcap FILE           every process of the run in one MCAP file
    stigmesh log size RUN                         each log's MB, span and MB per minute

The logs are MCAP (protocol/RUNLOG.md); ``cat`` prints what ``grep`` users read
before: ``{"t": ..., "proc": ..., "event": ..., ...}`` with bytes in base64.
``export --mcap`` merges the processes' channels in time order, so one file
opened in Foxglove (with tools/view/stigmesh.layout.json) plays the whole run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protocol.runlog import ReadStats

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    cat = sub.add_parser("cat", help="print one log's events as JSON lines")
    cat.add_argument("log", type=Path, metavar="RUN/NAME",
                     help="a log file, or RUN_DIR/NAME for NAME's log in RUN_DIR")
    cat.add_argument("--event", action="append", default=[], metavar="E",
                     help="only these events (repeatable)")
    export = sub.add_parser("export", help="a run's logs as JSON lines or as one MCAP file")
    export.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    what = export.add_mutually_exclusive_group(required=True)
    what.add_argument("--jsonl", action="store_true", help="write NAME.jsonl for each log")
    what.add_argument("--mcap", type=Path, metavar="FILE", help="merge every log into FILE")
    export.add_argument("--out", type=Path, default=None,
                        help="where the JSON lines go (default: the run directory)")
    size = sub.add_parser("size", help="each log's size, span and MB per minute, by channel")
    size.add_argument("run_dir", type=Path, metavar="RUN_DIR")


def _resolve(spec: Path) -> Path | None:
    from protocol.runlog import LOG_SUFFIXES, log_path

    if spec.is_file():
        return spec
    for candidate in (log_path(spec.parent, spec.name),
                      *(spec.with_suffix(s) for s in LOG_SUFFIXES)):
        if candidate.is_file():
            return candidate
    return None


def _damage(stats: ReadStats) -> str:
    """What a read skipped, for the user: damaged records and the bytes not read."""
    unread = (f"; {stats.unread_bytes:,} bytes unread (their events are lost)"
              if stats.unread_bytes else "")
    return f"{stats.bad_lines} damaged record(s) skipped{unread}"


def main(args: argparse.Namespace) -> int:
    from protocol.runlog import ReadStats, dumps, process_logs, read_run_log

    if args.action == "cat":
        path = _resolve(args.log)
        if path is None:
            print(f"stigmesh log cat: no log {args.log}", file=sys.stderr)
            return EXIT_USAGE
        wanted = set(args.event)
        stats = ReadStats()
        read = 0
        for event in read_run_log(path, stats):
            read += 1
            if not wanted or event.get("event") in wanted:
                sys.stdout.write(dumps(event) + "\n")
        if stats.bad_lines and not read:
            print(f"stigmesh log cat: {path}: no event in it: not a run log, or every record "
                  f"damaged ({_damage(stats)})", file=sys.stderr)
            return EXIT_FAILED
        if stats.bad_lines:
            print(f"stigmesh log cat: {_damage(stats)}", file=sys.stderr)
        return EXIT_OK
    logs = process_logs(args.run_dir) if args.run_dir.is_dir() else {}
    if not logs:
        print(f"stigmesh log {args.action}: {args.run_dir} holds no process log",
              file=sys.stderr)
        return EXIT_USAGE
    if args.action == "size":
        print("\n".join(size_table(logs)))
        return EXIT_OK
    try:
        return _export(args, logs)
    except OSError as exc:  # where the output goes: not a directory, not writable, full
        where = exc.filename or (args.mcap or args.out)
        print(f"stigmesh log export: cannot write {where}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_USAGE


def _export(args: argparse.Namespace, logs: dict[str, Path]) -> int:
    """The logs merged into one MCAP file, or each as JSON lines."""
    from protocol.runlog import ReadStats, dumps, merge_logs, read_run_log

    if args.mcap is not None:
        stats = ReadStats()
        count = merge_logs(list(logs.values()), args.mcap, stats)
        print(f"wrote {args.mcap}: {count} messages of {len(logs)} logs "
              f"({args.mcap.stat().st_size / 1e6:.2f} MB)")
        if stats.bad_lines:
            print(f"stigmesh log export: {_damage(stats)}", file=sys.stderr)
        return EXIT_OK
    out: Path = args.out or args.run_dir
    out.mkdir(parents=True, exist_ok=True)
    for name, path in logs.items():
        if path.suffix == ".jsonl" and out == args.run_dir:
            continue  # already JSON lines
        target = out / f"{name}.jsonl"
        stats = ReadStats()
        with target.open("w", encoding="utf-8") as f:
            for event in read_run_log(path, stats):
                f.write(dumps(event) + "\n")
        print(f"wrote {target}")
        if stats.bad_lines:
            print(f"stigmesh log export: {path.name}: {_damage(stats)}", file=sys.stderr)
    return EXIT_OK


def size_table(logs: dict[str, Path]) -> list[str]:
    """Per log: its bytes on disk, the span of its events, MB per minute of that span, and
    each channel's share of the uncompressed messages (and what damage it skipped)."""
    from collections import Counter

    from protocol.mcapread import iter_messages
    from protocol.runlog import ReadStats, read_run_log

    rows = [f"{'log':10} {'MB':>7} {'span s':>7} {'MB/min':>7}  uncompressed by channel"]
    for name, path in logs.items():
        stats = ReadStats()
        times = [float(e["t"]) for e in read_run_log(path, stats)]
        span = max(times) - min(times) if times else 0.0
        mb = path.stat().st_size / 1e6
        by: Counter[str] = Counter()
        for channel, _, _, data in iter_messages(path):
            by[channel.topic.rsplit("/", 1)[-1]] += len(data)
        total = sum(by.values()) or 1
        shares = ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in by.most_common())
        rate = f"{mb / (span / 60):7.3f}" if span > 0 else f"{'-':>7}"
        damage = f"; {_damage(stats)}" if stats.bad_lines else ""
        rows.append(f"{name:10} {mb:7.3f} {span:7.1f} {rate}  {shares}{damage}")
    return rows
