"""Run a command on a busy machine: one CPU-burning process per core beside it.

    python tests/busy.py -- make test
    python tests/busy.py --burners 2 -- .venv/bin/pytest tests/system

The burners are plain busy loops at normal priority (as a build or a browser on a
user's laptop would be), started before the command and stopped when it ends. Each
also stops by itself if this script dies or after ``--max-seconds``, so none is ever
left behind. The exit status is the command's.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

# A busy loop that checks now and then whether it should still run: its parent (this
# script) must be alive and its time must not be up.
BURN = """
import os, sys, time
parent, end = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(200_000):
        pass
"""


def start_burners(count: int, max_seconds: float) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", BURN, str(os.getpid()), f"{max_seconds:g}"])
            for _ in range(count)]


def stop_burners(burners: list[subprocess.Popen[bytes]]) -> None:
    for proc in burners:
        if proc.poll() is None:
            proc.terminate()
    for proc in burners:
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--burners", type=int, default=os.cpu_count() or 1,
                   help="busy processes to run beside the command (default: one per core)")
    p.add_argument("--max-seconds", type=float, default=3600.0,
                   help="a burner stops by itself after this long (default 3600)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give a command after --")
    burners = start_burners(args.burners, args.max_seconds)
    print(f"busy.py: {len(burners)} busy process(es) (PIDs "
          f"{', '.join(str(b.pid) for b in burners)}) beside: {' '.join(command)}",
          file=sys.stderr, flush=True)
    began = time.monotonic()
    child = subprocess.Popen(command)
    try:
        code = child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        code = child.wait()
    finally:
        stop_burners(burners)
    print(f"busy.py: command exited with status {code} after "
          f"{time.monotonic() - began:.0f} s under load", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
