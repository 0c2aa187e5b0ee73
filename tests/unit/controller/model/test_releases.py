"""The release table (controller/model/releases.py): parsing, what each release cannot support,
and that every release a feature is said to be tested on runs that feature's tests."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cogate.controller.model import releases as rel
from cogate.localcluster import versions

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("text, version", [
    ("v1.36.3", (1, 36)), ("v1.30.14-eks-1234abc", (1, 30)), ("v1.31.2-gke.1000", (1, 31)), ("1.37.0", (1, 37)),
    ("v1.34.0-alpha.1", (1, 34)), ("", None), ("unknown", None), ("v1", None),
])
def test_parse(text, version):
    assert rel.parse(text) == version


def test_unsupported_is_every_feature_newer_than_the_release():
    for minor in range(30, 40):
        got = {f.name for f in rel.unsupported((1, minor))}
        assert got == {f.name for f in rel.FEATURES if f.since and (1, minor) < f.since}
    assert {f.name for f in rel.unsupported((1, 30))} == {"native_gangs", "native_preemption", "preemption_nomination",
                                                         "dra", "never_gated_report"}
    assert rel.unsupported((1, 36)) == [] and rel.unsupported((2, 0)) == []


def _makefile_subsets() -> dict[str, list[str]]:
    return rel.makefile_subsets((ROOT / "Makefile").read_text())


def test_tested_releases_are_the_ones_make_test_runs():
    assert set(_makefile_subsets()) | {rel.DEFAULT_TESTED} == set(rel.TESTED_RELEASES)
    assert f"v{rel.DEFAULT_TESTED}" == versions.DEFAULT_RELEASE
    assert {f"v{r}" for r in rel.TESTED_RELEASES} <= set(versions.RELEASES)


def test_every_feature_names_tests_that_exist():
    for f in rel.FEATURES:
        assert f.tests and all((ROOT / t).is_file() for t in f.tests), f


def test_status_per_release_follows_the_makefile():
    subsets = _makefile_subsets()
    table = {f.name: {r: rel.status_on(f, r, subsets, runs=()) for r in rel.TESTED_RELEASES} for f in rel.FEATURES}
    assert table["gang_release"] == {"1.30.14": "tested", "1.36.3": "tested", "1.37.2": "tested"}
    assert table["dra"]["1.30.14"] == "not available" and table["preemption_nomination"]["1.30.14"] == "not available"
    assert table["preemption_nomination"]["1.37.2"] == "not tested"  # only the default runs test_preemption.py
    # its tests need GenericWorkload on (NATIVE_SUBSET) and skip on the default release
    assert table["native_preemption"] == {"1.30.14": "not available", "1.36.3": "not tested", "1.37.2": "tested"}
    for f in rel.FEATURES:
        assert table[f.name][rel.DEFAULT_TESTED] == ("not tested" if f.gated else "tested")
        for r in rel.TESTED_RELEASES:
            if table[f.name][r] == "tested":
                assert (r == rel.DEFAULT_TESTED and not f.gated) or set(f.tests) & set(subsets[r]), (f.name, r)


def test_recorded_runs_name_real_files_releases_and_commits():
    for r in rel.RUNS:
        # the default release runs the whole suite: a run there is recorded only for its feature gates
        assert r.release in rel.TESTED_RELEASES and (r.release != rel.DEFAULT_TESTED or r.gates), r
        assert r.tests and all((ROOT / t).is_file() for t in r.tests), r
        assert len(r.commit) >= 7 and int(r.commit, 16) >= 0 and r.date.endswith("UTC"), r
        assert 0 <= r.passed <= r.total and r.seconds > 0, r
        assert r.ok or r.note, f"a failed run says why: {r}"
        gates = f" COGATE_FEATURE_GATES={r.gates}" if r.gates else ""
        assert r.command.startswith(f"COGATE_KUBERNETES_VERSION={r.release}{gates} .venv/bin/pytest -m e2e tests/e2e/")


def test_status_from_recorded_runs():
    f = next(f for f in rel.FEATURES if f.name == "late_labels")
    ok = rel.Run("1.37.2", f.tests, "abc1234", "2026-12-06 16:00 UTC", 90, 3.0, 9, 9)
    bad = rel.Run("1.37.2", f.tests, "def5678", "2026-12-06 17:00 UTC", 90, 3.0, 8, 9, "a bug")
    other = rel.Run("1.37.2", ("tests/e2e/test_rbac.py",), "abc1234", "2026-12-06 16:00 UTC", 90, 3.0, 7, 7)
    assert rel.status_on(f, "1.37.2", {}, [ok, other]) == "tested once (abc1234: test_admission_late_labels.py)"
    assert rel.status_on(f, "1.37.2", {}, [ok, bad]).startswith("failed once (abc1234/def5678:")
    assert rel.status_on(f, "1.37.2", {}, [other]) == "not tested"
    assert rel.status_on(f, "1.37.2", {"1.37.2": list(f.tests)}, [bad]) == "tested"  # make test runs it
    pre = next(f for f in rel.FEATURES if f.name == "preemption_nomination")
    assert rel.status_on(pre, "1.30.14", {}, [dataclasses.replace(ok, release="1.30.14", tests=pre.tests)]) \
        == "not available"
    assert ok.ok and not bad.ok and not dataclasses.replace(ok, total=0).ok
