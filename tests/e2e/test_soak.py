"""The chaos soak's short profile (issue 35): bench/soak.py for 2 minutes with a fixed seed on its own
local control plane (it restarts kube-apiserver, so not the session's cluster), asserting zero
invariant violations (bench/soak_invariants.py), and that the run did what a soak must: faults of
several kinds injected, gangs started, the controller recovered after the faults.

CI cost: 206 s in one run on the 2-core team machine at load 20-24 (control plane start, 10 s before
the first fault, 2 min of faults, the last canary and the injectors stopping, the convergence
check, teardown); see docs/operations/soak.md.
"""

from __future__ import annotations

import pytest

from tests.builders.bench import bench_module

pytestmark = pytest.mark.e2e

SEED = 35
MINUTES = 2.0


def _soak():
    return bench_module("soak")


def test_short_soak_keeps_every_invariant(tmp_path, monkeypatch):
    monkeypatch.setenv("SOAK_EVENTS_DIR", str(tmp_path))
    summary = _soak().run_soak(SEED, MINUTES, tmp_path / "out", gap=12.0)
    report = "\n".join(f"{v['invariant']} {v['ref']} t={v['t']:.1f}: {v['message']}\n    " + "\n    ".join(v["around"])
                       for v in summary["violations"])
    print({k: v for k, v in summary.items() if k != "violations"})
    assert summary["violations"] == [], report
    assert sum(summary["faults"].values()) >= 4 and len(summary["faults"]) >= 3, summary["faults"]
    assert summary["gangs_started"] >= 3, summary
    assert summary["recoveries"] >= 1 and summary["converged_seconds"] is not None, summary
    assert summary["lease_transitions"] >= 0, "no controller replica ever held the Lease"
    assert (tmp_path / "out" / summary["plot"]).is_file()
