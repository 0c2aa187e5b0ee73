"""Which code a recorded run ran: the commit a results file names (bench/run.py's benchmark
sections, the differential test's families: issue 29, "evidence that can be re-run").

A run records the checkout's short commit, with ``-dirty`` when a tracked file differs from it, so
a figure measured on uncommitted code names no commit that claims to reproduce it. The files a
recording writes itself (its results files and the page rendered from them) are left out of that
check: the sections of one sitting each rewrite their own file, and the second section ran the same
code as the first.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["RECORDED", "git_commit"]

#: Where the repository keeps recorded evidence (paths relative to it): the benchmarks' report, plots
#: and results files (bench/run.py) and the differential test's results (docs/differential.md). None of
#: it is code a run executes, so a change there never makes a run ``-dirty``: one sitting runs the
#: differential and every benchmark one after the other, each writing its own files.
RECORDED = ("docs/benchmarks", "docs/benchmarks.md", "docs/results")


def _git(repo: Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def git_commit(repo: Path, outputs: Sequence[str] = RECORDED) -> str:
    """The short commit of ``repo``'s checkout, with ``-dirty`` when a tracked file other than
    ``outputs`` (paths relative to ``repo``, files or directories; default :data:`RECORDED`) differs
    from it; '' when ``repo`` is not a git checkout or git is missing. Never raises."""
    commit = _git(repo, "rev-parse", "--short", "HEAD")
    if not commit:
        return ""
    dirty = _git(repo, "status", "--porcelain", "--untracked-files=no", "--", ".",
                 *(f":(exclude){p}" for p in outputs))
    return commit + ("-dirty" if dirty else "")
