"""The autoscaler side-by-side benchmark's report (bench/bench_autoscaler_cluster.py), from made-up
runs: the ratios per repetition and their median, the unfit gang's targets (met only when cogate
added no node and bound no member), rows as wide as their columns. No cluster, no timing."""

from __future__ import annotations

import json

import pytest

from tests.builders.bench import bench_module

pytest.importorskip("matplotlib", reason="the test extra installs matplotlib (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def mod():
    return bench_module("bench_autoscaler_cluster")


def run_(mod, system, k, time_s, **kw):
    base = {"system": system, "run": k, "time s": time_s, "bound": 4, "started": True, "nodes added": 2,
            "nodes in vain": 0, "nodes without a member": 0, "autoscaler target": 2, "request created s": None,
            "provisioned s": None, "requests": 0, "first node s": 0.5, "nodes ready s": 0.8,
            "first release s": None, "last release s": None, "first bound s": 0.9, "NotProvisioned s": None,
            "load": 1.0, "status": "", "request status": ""}
    if system == "cogate":
        base.update({"request created s": 0.2, "provisioned s": 0.4, "requests": 1, "first release s": 0.9,
                     "last release s": 0.95})
    base.update(kw)
    return base


def unfit(mod, system, nodes, bound):
    return run_(mod, system, 1, None, bound=bound, started=False, **{"nodes added": nodes, "nodes in vain": nodes,
                                                                     "autoscaler target": nodes})


def workloads(mod):
    return (mod.Workload(4, "6", "autoscaled", True, 2), mod.Workload(5, "12", "autoscaled", False, 5, hold_s=10.0))


def results(mod, cogate_unfit_nodes=0, cogate_unfit_bound=0):
    fit, nofit = workloads(mod)
    spec = mod.QUICK_SPEC
    return {
        fit.label(spec): [run_(mod, "cogate", 1, 1.0), run_(mod, "alone", 1, 4.0),
                          run_(mod, "alone", 2, 5.0), run_(mod, "cogate", 2, 2.0),
                          run_(mod, "cogate", 3, 3.0), run_(mod, "alone", 3, 3.0)],
        nofit.label(spec): [unfit(mod, "cogate", cogate_unfit_nodes, cogate_unfit_bound), unfit(mod, "alone", 4, 4)],
    }


def test_ratios_per_run_and_their_median(mod, tmp_path):
    res = mod.report(mod.QUICK_SPEC, workloads(mod), results(mod), tmp_path, 90.0, True)
    json.dumps(res, allow_nan=False)
    fit_rows = res["tables"][0]["rows"]
    assert [(r[1], r[2], r[4]) for r in fit_rows] == [
        (1, "cogate", 0.25), (1, "autoscaler alone", 1.0), (2, "cogate", 0.4), (2, "autoscaler alone", 1.0),
        (3, "cogate", 1.0), (3, "autoscaler alone", 1.0)]
    summary = {r[1]: r for r in res["tables"][1]["rows"]}
    assert summary["cogate"][3:8] == [2.0, 1.0, 3.0, 0.4, "0.25, 0.4, 1.0"]
    assert summary["autoscaler alone"][3:6] == [4.0, 3.0, 5.0]
    phases = {r[1]: r for r in res["tables"][2]["rows"]}
    assert phases["cogate"][2:] == [3, 0.2, 0.4, 0.5, 0.8, 0.95, 2.0, 1.2]
    assert phases["autoscaler alone"][2:] == [3, None, None, 0.5, 0.8, None, 4.0, 3.2]
    time_target = res["targets"][0]
    assert "no time target" in time_target["target"] and time_target["measured"].startswith("median 0.4x over 3 runs")
    for t in res["tables"]:
        assert all(len(row) == len(t["columns"]) for row in t["rows"])
    assert (tmp_path / "autoscaler_cluster.png").is_file()


@pytest.mark.parametrize("nodes,bound,met", [(0, 0, (True, True)), (4, 0, (False, True)), (4, 4, (False, False))])
def test_the_unfit_gangs_targets_are_met_only_without_nodes_or_members(mod, tmp_path, nodes, bound, met):
    res = mod.report(mod.QUICK_SPEC, workloads(mod), results(mod, nodes, bound), tmp_path, 90.0, True)
    vain, members = res["targets"][1:3]
    assert "nodes added in vain" in vain["what"] and "members bound" in members["what"]
    assert (vain["met"], members["met"]) == met
    assert vain["measured"].startswith(f"{nodes} (the autoscaler alone: 4, 4/5 pods bound)")
    for t in (vain, members):
        assert t["met"] or t["explanation"] or (t["met"] is None and t["target"].startswith("none"))
    rows = {r[1]: r for r in res["tables"][3]["rows"]}
    assert rows["autoscaler alone"][3:6] == [4, 4, "4/5"]


def test_empty_new_nodes_are_named_in_a_note_only_when_there_are_some(mod, tmp_path):
    res = mod.report(mod.QUICK_SPEC, workloads(mod), results(mod), tmp_path, 90.0, True)
    assert not [n for n in res["notes"] if "new nodes no member was bound to, per run" in n]
    r = results(mod)
    fit = workloads(mod)[0].label(mod.QUICK_SPEC)
    r[fit][0]["nodes without a member"] = 1
    res = mod.report(mod.QUICK_SPEC, workloads(mod), r, tmp_path, 90.0, True)
    (note,) = [n for n in res["notes"] if "new nodes no member was bound to, per run" in n]
    assert "cogate [1, 0, 0], the autoscaler alone [0, 0, 0]" in note
