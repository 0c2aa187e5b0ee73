"""The third-party sources the tests build are in the repository (``third_party/``), each with its
license and listed in ``third_party/README.md``, and nothing that builds or tests reads them from
outside the checkout (issue 30 item 2: a public clone runs ``make test`` on its own)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from cogate.localcluster import build, versions

from tests.unit.test_repository import tracked_text_files

REPO = Path(__file__).resolve().parents[2]
THIRD_PARTY = REPO / "third_party"
#: Every snapshot something here builds or reads: the build's (versions.SOURCES) and scheduler-plugins
#: (bench/schedplugins.py, tests/e2e/test_scheduler_plugins_leftovers.py).
SNAPSHOTS = (*versions.SOURCES.values(), "scheduler-plugins-v0.34.7")


def test_each_snapshot_is_in_the_repository_with_its_license_and_listed_in_the_readme():
    readme = (THIRD_PARTY / "README.md").read_text()
    for name in SNAPSHOTS:
        src = THIRD_PARTY / name
        assert (src / "go.mod").is_file() and (src / "go.sum").is_file(), name
        assert "Apache License" in (src / "LICENSE").read_text(), name
        assert f"## {name}/" in readme, f"third_party/README.md says nothing of {name}/"
    listed = {p.name for p in THIRD_PARTY.iterdir() if p.is_dir()}
    assert listed == set(SNAPSHOTS), f"third_party/ holds {sorted(listed)}; built or read: {sorted(SNAPSHOTS)}"


def test_the_readers_default_to_the_repositorys_third_party(monkeypatch):
    monkeypatch.delenv(build.THIRD_PARTY_ENV, raising=False)
    monkeypatch.delenv("COGATE_COSCHEDULING_SRC", raising=False)
    assert build.third_party_dir() == THIRD_PARTY
    sys.path.insert(0, str(REPO / "bench"))
    try:
        schedplugins = importlib.reload(importlib.import_module("schedplugins"))
    finally:
        sys.path.pop(0)
    assert schedplugins.DEFAULT_SRC == THIRD_PARTY / "scheduler-plugins-v0.34.7"
    # the binary cache key (go.mod digest + version) is the copy's own: a go.mod change rebuilds
    assert schedplugins.bin_dir(schedplugins.DEFAULT_SRC).name.startswith("scheduler-plugins-v0.34.7-")


def test_no_tracked_code_or_build_file_looks_beside_the_repository():
    code = {name: text for name, text in tracked_text_files().items()
            if not name.startswith(("third_party/", "docs/")) and name != "tests/unit/test_third_party.py"
            and (name.endswith((".py", ".toml", ".cfg")) or Path(name).name in ("Makefile", "run", "Dockerfile"))}
    assert "localcluster/build.py" in code
    outside = sorted(name for name, text in code.items() if "shared/third_party" in text or '/ "shared" /' in text)
    assert not outside, f"these read third-party sources from outside the repository: {outside}"
