"""The benchmarks' modules for tests: ``bench/`` is a folder of scripts, not a package, so a test
imports one with that folder on ``sys.path`` for the import only."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

#: The repository's ``bench/`` folder.
BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str) -> ModuleType:
    """Module ``bench/<name>.py`` (imported once; later calls return the same module)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
