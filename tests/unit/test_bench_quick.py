"""Smoke test of the benchmark suite (bench/run.py --quick --no-cluster): a well-formed report
comes out. It checks the report's shape only, never a timing (speed targets live in bench/)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

pytest.importorskip("matplotlib", reason="the test extra installs matplotlib (pip install -e '.[test]')")


def _no_cluster_benchmarks() -> list[str]:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import importlib

        run = importlib.import_module("run")
        return [n for n in run.BENCHMARKS if not getattr(importlib.import_module(n), "NEEDS_CLUSTER", False)]
    finally:
        sys.path.remove(str(REPO / "bench"))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("bench") / "benchmarks.md"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "run.py"), "--quick", "--no-cluster", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:]
    files = sorted((out.with_suffix("") / "results").glob("*.json"))
    docs = [json.loads(f.read_text()) for f in files]
    assert [f.stem for f in files] == sorted(d["result"]["module"] for d in docs)
    return out, {"quick": all(d["quick"] for d in docs), "results": [d["result"] for d in docs]}


def test_every_no_cluster_benchmark_ran(report: tuple[Path, dict]) -> None:
    _, doc = report
    names = [r["name"] for r in doc["results"]]
    expected = _no_cluster_benchmarks()
    assert {"planning_pass", "webhook", "controller_memory"} <= set(expected)
    for name in expected:
        assert name in names
        r = next(r for r in doc["results"] if r["name"] == name)
        assert r["status"] == "ok", r["notes"]
    for r in doc["results"]:
        if r["name"] not in expected:  # cluster benchmarks: skipped with a note under --no-cluster
            assert r["status"] == "skipped" and "control plane" in r["notes"][0]
    assert doc["quick"] is True
    for r in (r for r in doc["results"] if r["status"] == "ok"):
        run = r["run"]  # each section says when, where, at which commit and with what it ran
        assert run["commit"] and run["date"].endswith("UTC") and len(run["load_average"]) == 3 and run["cores"]
        assert run["settings"]["quick"] is True and run["settings"]["kubernetes"]
        for fact in ("CPU", "cores", "memory", "kernel", "Python"):
            assert run["machine"].get(fact), fact


def test_results_follow_the_contract(report: tuple[Path, dict]) -> None:
    out, doc = report
    plots = out.with_suffix("")
    for r in (r for r in doc["results"] if r["status"] == "ok"):
        assert r["title"] and r["what"] and r["baseline"], r["name"]
        assert r["tables"] and r["targets"] and r["plots"], r["name"]
        for t in r["tables"]:
            assert t["columns"] and t["rows"], (r["name"], t["caption"])
            assert all(len(row) == len(t["columns"]) for row in t["rows"]), (r["name"], t["caption"])
        for p in r["plots"]:
            data = (plots / p["file"]).read_bytes()
            assert data[:8] == PNG_MAGIC and len(data) > 1000, p["file"]
        for t in r["targets"]:
            assert isinstance(t["met"], bool) or (t["met"] is None and t["target"].startswith("none")), t
            assert t["what"] and t["target"] and t["measured"], t
            assert t["met"] is not False or t["explanation"], t


def test_markdown_report_has_every_section(report: tuple[Path, dict]) -> None:
    out, doc = report
    md = out.read_text()
    assert md.startswith("# Benchmarks\n")
    assert "## Machine" in md and "## Targets" in md
    for r in doc["results"]:
        assert f"\n## {r['title']}\n" in md, r["title"]
        for p in r["plots"]:
            assert f"]({out.with_suffix('').name}/{p['file']})" in md
        for t in r["tables"]:
            header = "| " + " | ".join(t["columns"]) + " |"
            assert header in md, header
            # the header, the separator and one line per row
            lines = md[md.index(header):].splitlines()
            assert lines[1] == "|" + "---|" * len(t["columns"])
            assert all(line.startswith("| ") for line in lines[2:2 + len(t["rows"])])


def test_planning_pass_takes_a_candidate_planner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The incremental planner plugs into benchmark 1 as planning_pass.CANDIDATE: its passes are
    checked against decide() and reported in their own columns."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import planning_pass

    calls = {"steady": 0, "change": 0}

    class Counting(planning_pass.FromScratch):
        label = "counting test candidate"

        def steady(self):
            calls["steady"] += 1
            return super().steady()

        def after_one_change(self, event):
            calls["change"] += 1
            return super().after_one_change(event)

    monkeypatch.setattr(planning_pass, "CANDIDATE", Counting)
    result = planning_pass.run(True, tmp_path)
    assert calls["steady"] > 0 and calls["change"] > 0
    assert any("counting test candidate" in n for n in result["notes"])
    assert not any("from-scratch planner itself" in n for n in result["notes"])

    class Wrong(planning_pass.FromScratch):
        def after_one_change(self, event):
            super().after_one_change(event)
            return planning_pass.decide([], [], [], [], planning_pass.NOW)  # no verdicts

    monkeypatch.setattr(planning_pass, "CANDIDATE", Wrong)
    with pytest.raises(AssertionError, match="differs from decide"):
        planning_pass.run(True, tmp_path)


def test_report_names_no_machine_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    """What bench/run.py writes (report and results.json) says the repository's paths relative to it
    and the home directory as ``~``; other paths and look-alikes stay as they were."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import run

    repo, home = Path("/srv/checkout/cogate"), Path("/srv/people/ann")
    result = {"name": "x", "seconds": 1.5, "notes": [
        'File "/srv/checkout/cogate/bench/x.py", line 3, in run',
        "built from /srv/checkout/cogate; cached in /srv/people/ann/.cache/cogate/bin/y.",
        "/srv/checkout/cogate-old/z, /srv/checkout/cogate.git, /srv/people/anna and /usr/lib/cni stay",
    ], "tables": [{"rows": [["/srv/people/ann/a", 2]]}]}
    assert run.portable(result, repo, home) == {"name": "x", "seconds": 1.5, "notes": [
        'File "./bench/x.py", line 3, in run',
        "built from .; cached in ~/.cache/cogate/bin/y.",
        "/srv/checkout/cogate-old/z, /srv/checkout/cogate.git, /srv/people/anna and /usr/lib/cni stay",
    ], "tables": [{"rows": [["~/a", 2]]}]}
    assert run.portable("at /x/y", Path("/"), Path("/")) == "at /x/y"  # a root directory is never cut


def test_only_replaces_the_rerun_sections_file_and_the_report_keeps_the_others(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``--only``: the re-run benchmark's results file is replaced, every other one stays, and the
    report is rendered from all of them in BENCHMARKS order, each section with its own commit; a
    skipped section keeps its previous file; a file of the other kind (``--quick``) is not shown."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import run

    out = tmp_path / "benchmarks.md"
    rdir = run.results_dir(out)

    def result(module: str, commit: str, status: str = "ok") -> dict:
        return {"name": module, "module": module, "title": f"T {module}", "what": "", "baseline": "", "tables": [],
                "plots": [], "targets": [], "notes": [], "status": status, "seconds": 1.0,
                "run": {"commit": commit, "date": "2026-12-06 16:00 UTC", "load_average": [1.0, 2.0, 3.0],
                        "cores": 2, "settings": {"quick": False}, "machine": {"CPU": "x"}}}

    for m in run.BENCHMARKS:
        run.write_result(rdir, result(m, "old1234"), quick=False)
    run.write_result(rdir, result("webhook", "quick99"), quick=True)  # another kind: replaces, is not shown
    monkeypatch.setattr(run, "run_one", lambda name, *a: result(name, "new5678"))
    assert run.main(["--only", "planning_pass", "--out", str(out)]) == 0
    shown = run.load_results(rdir, quick=False)
    assert [r["module"] for r in shown] == [m for m in run.BENCHMARKS if m != "webhook"]
    assert [r["run"]["commit"] for r in shown] == ["new5678" if m == "planning_pass" else "old1234"
                                                   for m in run.BENCHMARKS if m != "webhook"]
    md = out.read_text()
    assert "| [T planning_pass](#t-planning_pass) | new5678 |" in md
    assert "at commit old1234 in 1.0 s; machine load average (1/5/15 min) at its start: 1.0 / 2.0 / 3.0" in md
    monkeypatch.setattr(run, "run_one", lambda name, *a: {**result(name, "skip000", "skipped"), "run": None})
    assert run.main(["--only", "explain", "--out", str(out)]) == 0
    assert json.loads((rdir / "explain.json").read_text())["result"]["run"]["commit"] == "old1234"


def test_the_report_is_rendered_from_the_results_files() -> None:
    """docs/benchmarks.md is what docs/benchmarks/results/*.json say (issue 29 item 2): every section
    in BENCHMARKS order, each naming the commit, date, load and settings of its own run."""
    import sys as _sys

    _sys.path.insert(0, str(REPO / "bench"))
    try:
        run = importlib.import_module("run")
        out = REPO / "docs" / "benchmarks.md"
        results = run.load_results(run.results_dir(out), quick=False)
        assert [r["module"] for r in results] == run.BENCHMARKS, "a benchmark has no results file"
        expected = run.render(results, "benchmarks", "../bench/README.md", quick=False)
    finally:
        _sys.path.remove(str(REPO / "bench"))
    assert out.read_text() == expected, "docs/benchmarks.md differs: run `.venv/bin/python bench/run.py --report`"
    for r in results:
        assert r["status"] == "ok", (r["module"], r["notes"][:1])
        if r.get("run"):  # else a historical result, written before sections recorded their commit
            assert r["run"]["commit"] and not r["run"]["commit"].endswith("-dirty"), r["module"]
