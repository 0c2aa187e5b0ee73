"""``localcluster/provenance.py``: the commit a recorded run names (issue 29: evidence that can be
re-run). A run on uncommitted code is ``-dirty``; the files the recording itself wrote are not code."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cogate.localcluster.provenance import git_commit


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "a.json").write_text("{}\n")
    (tmp_path / "docs" / "page.md").write_text("# page\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")
    return tmp_path


def test_a_clean_checkout_names_its_commit(repo):
    assert git_commit(repo) == _git(repo, "rev-parse", "--short", "HEAD")


@pytest.mark.parametrize("changed,outputs,dirty", [
    ("code.py", ("docs/results", "docs/page.md"), True),          # the code differs: -dirty
    ("docs/results/a.json", ("docs/results", "docs/page.md"), False),  # an earlier section's own results file
    ("docs/page.md", ("docs/results", "docs/page.md"), False),      # the page rendered from them
    ("docs/page.md", ("docs/results",), True),                      # not this recording's output
    ("docs/results/a.json", ("docs/page.md",), True),               # not this recording's output
])
def test_only_files_other_than_the_recordings_own_make_it_dirty(repo, changed, outputs, dirty):
    (repo / changed).write_text("changed\n")
    commit = _git(repo, "rev-parse", "--short", "HEAD")
    assert git_commit(repo, outputs) == commit + ("-dirty" if dirty else "")


def test_by_default_recorded_evidence_of_either_kind_is_not_code(repo):
    """One sitting: the differential's results file, then a benchmark section's (issue 29)."""
    (repo / "docs" / "results" / "a.json").write_text("changed\n")
    commit = _git(repo, "rev-parse", "--short", "HEAD")
    assert git_commit(repo) == commit
    (repo / "code.py").write_text("x = 2\n")
    assert git_commit(repo) == commit + "-dirty"


def test_untracked_files_do_not_count_and_no_checkout_is_empty(repo, tmp_path_factory):
    (repo / "new.py").write_text("y = 2\n")
    assert not git_commit(repo).endswith("-dirty")
    assert git_commit(tmp_path_factory.mktemp("plain")) == ""
