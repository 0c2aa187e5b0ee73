"""The recorded differential runs: the page docs/results/differential.md is what the results files
in docs/results/differential/ say (rendered by ``python -m tests.e2e.differential --report``), and
each file records the commit, date, load and settings of its run (issue 29 item 2)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.differential import RESULTS_DIR, RESULTS_PAGE, report

ROOT = Path(__file__).resolve().parents[2]


def _docs() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((ROOT / RESULTS_DIR).glob("*.json"))}


def test_the_page_is_rendered_from_the_results_files():
    docs = _docs()
    assert {"mixed.json", "tight.json", "devices.json"} <= set(docs)
    assert (ROOT / RESULTS_PAGE).read_text() == report(docs), \
        "docs/results/differential.md differs: run `.venv/bin/python -m tests.e2e.differential --report`"


def test_every_results_file_says_when_where_and_how_it_ran():
    for name, doc in _docs().items():
        run = doc["run"]
        assert run["commit"] and not run["commit"].endswith("-dirty"), (name, run["commit"])
        assert run["date"].endswith("UTC") and len(run["load_average"]) == 3 and run["cores"]
        assert {"family", "seeds", "placement", "stable", "settle_timeout", "kubernetes"} <= set(run["settings"])
        counted = sum(c["scenarios"] for c in doc["summary"].values())
        assert counted == len(doc["runs"]), name
        assert len(doc["cases"]) == sum(c["FP"] + c["FN"] for c in doc["summary"].values()), name


def test_report_counts_and_cases():
    doc = {"command": "python -m tests.e2e.differential --count 2", "elapsed_seconds": 9.5,
           "run": {"commit": "abc1234", "date": "2026-12-06 14:00 UTC", "load_average": [1.0, 2.0, 3.0], "cores": 2,
                   "settings": {"family": "tight", "seeds": "0-1", "stable": 2.0, "kubernetes": "v1.36.3"}},
           "summary": {"pinned": {"scenarios": 2, "TP": 1, "TN": 0, "FP": 1, "FN": 0}},
           "cases": [{"seed": 1, "family": "tight", "placement": "pinned", "classification": "FP",
                      "verdict": "Released", "min_member": 3, "bound": {"a": "n1"}, "members": 3}]}
    page = report({"tight.json": doc})
    assert "| [tight.json](differential/tight.json) | tight | 0-1 | pinned | 2 | 1 | 0 | **1** | 0 | abc1234 |" in page
    assert "| tight.json | 1 | tight | pinned | FP | Released | 3 | 1/3 |" in page
    assert "None." not in page
    assert "None." in report({})
