"""Where `make test`'s time goes: each phase's elapsed seconds, and a warning before CI's limit.

`.ci/run` sets ``$COGATE_PHASES_FILE`` (and ``$COGATE_PHASES_START``, epoch seconds of its own
start); then every build of a Go tool (``cogate.localcluster.build``) and every test phase of the
Makefile (``python localcluster/phases.py run NAME -- COMMAND...``) appends one line
``<seconds>\\t<phase>`` to that file, and `.ci/run` prints :func:`report` when it ends, pass or
fail. Without the variable nothing is recorded (a developer's `make test` is unchanged).

CI has :data:`CI_LIMIT_SECONDS` (90 minutes) for one run; a run that comes within
:data:`MARGIN_SECONDS` (20 minutes) of it gets a warning with the table: it never fails a
passing suite for time alone.

Standard library only: `.ci/run` runs this file with the machine's ``python3`` before and after
the project's virtualenv exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

PHASES_ENV = "COGATE_PHASES_FILE"
START_ENV = "COGATE_PHASES_START"
#: Put before every phase recorded (``make test`` sets ``(background) `` for the builds it overlaps
#: with the tests: their time is not added to the wall time, it runs beside it).
PREFIX_ENV = "COGATE_PHASES_PREFIX"
#: The prefix of a phase that ran beside others (left out of the sum).
BACKGROUND = "(background)"
#: CI's time for one run of `.ci/run`, seconds.
CI_LIMIT_SECONDS = 90 * 60
#: A run within this many seconds of :data:`CI_LIMIT_SECONDS` is warned about.
MARGIN_SECONDS = 20 * 60


def record(phase: str, seconds: float, path: str | os.PathLike[str] | None = None) -> None:
    """Append ``seconds`` (elapsed) of ``phase`` (after ``$COGATE_PHASES_PREFIX``) to ``path`` (default
    ``$COGATE_PHASES_FILE``; nothing when neither is set). Tabs and newlines in ``phase`` become spaces."""
    target = path if path is not None else os.environ.get(PHASES_ENV)
    if not target:
        return
    name = " ".join((os.environ.get(PREFIX_ENV, "") + phase).split())
    with open(target, "a", encoding="utf-8") as f:
        f.write(f"{seconds:.1f}\t{name}\n")


def parse(text: str) -> list[tuple[str, float]]:
    """``[(phase, seconds), ...]`` in the order recorded; lines that are not ``<seconds>\\t<phase>``
    are skipped (a run killed mid-write leaves at most one such line)."""
    out = []
    for line in text.splitlines():
        seconds, sep, phase = line.partition("\t")
        try:
            value = float(seconds)
        except ValueError:
            continue
        if sep and phase:
            out.append((phase, value))
    return out


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes:d}:{secs:02d}"


def report(phases: list[tuple[str, float]], total: float | None = None,
           limit: float = CI_LIMIT_SECONDS, margin: float = MARGIN_SECONDS) -> str:
    """The phase table (seconds and m:ss per phase, the sum of those not run in the background
    (:data:`BACKGROUND`: beside other phases, not after them), and ``total`` when given: the whole
    run's wall time, which also holds what no phase records, such as the Python install), then a
    warning line when the run (``total``, else the sum) is at or past ``limit - margin``."""
    width = max([len(p) for p, _ in phases] + [len("phases (sum)")])
    lines = [f"{'phase'.ljust(width)}  {'seconds':>8}  {'m:ss':>6}"]
    lines += [f"{p.ljust(width)}  {s:8.0f}  {_clock(s):>6}" for p, s in phases]
    summed = sum(s for p, s in phases if not p.startswith(BACKGROUND))
    lines.append(f"{'phases (sum)'.ljust(width)}  {summed:8.0f}  {_clock(summed):>6}")
    if total is not None:
        lines.append(f"{'whole run'.ljust(width)}  {total:8.0f}  {_clock(total):>6}")
    spent = total if total is not None else summed
    if spent >= limit - margin:
        lines.append(f"WARNING: this run took {_clock(spent)}, within {_clock(margin)} of CI's limit of "
                     f"{_clock(limit)} (or past it): make a phase above cheaper before adding more")
    return "\n".join(lines)


def _run(phase: str, command: list[str]) -> int:
    start = time.monotonic()
    try:
        return subprocess.call(command)
    finally:
        record(phase, time.monotonic() - start)


def main(argv: list[str] | None = None) -> int:
    """``run PHASE -- COMMAND...``: run COMMAND, record its time as PHASE, exit with its code.
    ``report [FILE]``: print :func:`report` of FILE (default ``$COGATE_PHASES_FILE``), with the
    whole run's time since ``$COGATE_PHASES_START`` when set."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) >= 3 and args[0] == "run" and args[2] == "--" and len(args) > 3:
        return _run(args[1], args[3:])
    if args[:1] == ["report"] and len(args) <= 2:
        path = args[1] if len(args) == 2 else os.environ.get(PHASES_ENV, "")
        if not path or not Path(path).exists():
            print("no phases recorded", file=sys.stderr)
            return 0
        start = os.environ.get(START_ENV)
        total = time.time() - float(start) if start else None
        print(report(parse(Path(path).read_text(encoding="utf-8")), total))
        return 0
    print("usage: phases.py run PHASE -- COMMAND... | phases.py report [FILE]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
