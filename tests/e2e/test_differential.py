"""Differential test: cogate's planner against the real kube-scheduler (see differential.py).

A small fixed-seed batch in ``pinned`` placement (cogate's default): whenever the
planner says a group fits (``Released``), kube-scheduler must bind at least
minMember of its members once they are ungated (no false positive); whenever it holds a group
back, kube-scheduler must not bind minMember of them once the runner ungates them all (no false
negative). The 200+ scenario runs per placement
are made with ``python -m tests.e2e.differential`` and recorded in docs/differential.md.

This test **replaces** the cluster's fake nodes (label ``type=kwok``) with each
scenario's nodes and deletes them at the end; other capacity-sensitive e2e tests
create their own nodes (``only_nodes``), so nothing depends on what is left.
"""

from __future__ import annotations

import json

import pytest

from .differential import DEVICE_MODELS, Runner, classify, generate, summarize

pytestmark = pytest.mark.e2e

#: Fixed seeds: 12 "mixed" scenarios, a mix of groups that fit and that do not (checked
#: below), 4 "tight" packing puzzles (a spreading scheduler fragments them) and 6 "devices"
#: scenarios (DRA: ResourceSlices, claims allocated by kube-scheduler, issue 17).
SEEDS = tuple(range(12))
TIGHT_SEEDS = tuple(range(4))
DEVICE_SEEDS = tuple(range(6))


def test_generator_is_deterministic_and_valid():
    a, b = generate(7), generate(7)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert json.dumps(generate(8), sort_keys=True) != json.dumps(a, sort_keys=True)
    for seed in SEEDS:
        sc = generate(seed)
        assert 1 <= len(sc["nodes"]) <= 6
        assert 2 <= len(sc["members"]) <= 8
        assert 1 <= sc["min_member"] <= len(sc["members"])
        node_names = {n["name"] for n in sc["nodes"]}
        assert all(p["node"] in node_names for p in sc["existing"])
        assert all("schedulingGates" not in m["spec"] for m in sc["members"])  # the runner adds GATE
    for seed in TIGHT_SEEDS:
        sc = generate(seed, "tight")
        assert sc["family"] == "tight" and sc["min_member"] == len(sc["members"])
        cpu = int(sc["nodes"][0]["cpu"]) * 1000
        demand = sum(int(m["spec"]["containers"][0]["resources"]["requests"]["cpu"].removesuffix("m"))
                     for m in sc["members"])
        assert demand > 0.5 * cpu * len(sc["nodes"])  # tight: the group needs most of the cluster
    # the fixed batch exercises hard topology spread (PodTopologySpread is modelled by the planner)
    spread = [seed for seed in SEEDS for m in generate(seed)["members"]
              if any(c["whenUnsatisfiable"] == "DoNotSchedule"
                     for c in m["spec"].get("topologySpreadConstraints", []))]
    assert len(set(spread)) >= 3, spread
    for seed in DEVICE_SEEDS:
        sc = generate(seed, "devices")
        assert sc["family"] == "devices" and set(sc["devices"]) == {n["name"] for n in sc["nodes"]}
        assert all(m["count"] in (1, 2) and m["model"] in ("", *DEVICE_MODELS) for m in sc["members"])
        assert all(p["node"] in sc["devices"] and sc["devices"][p["node"]] for p in sc["device_pods"])
    # the devices batch has scenarios with too few devices and scenarios with enough
    demand = [sum(m["count"] for m in generate(s, "devices")["members"]) for s in DEVICE_SEEDS]
    supply = [sum(map(len, generate(s, "devices")["devices"].values())) for s in DEVICE_SEEDS]
    assert any(d > n for d, n in zip(demand, supply)) and any(d <= n for d, n in zip(demand, supply))
    with pytest.raises(ValueError, match="family"):
        generate(1, "nope")


@pytest.mark.parametrize(
    ("released", "bound", "min_member", "expected"),
    [(True, 3, 3, "TP"), (True, 4, 3, "TP"), (True, 2, 3, "FP"), (False, 2, 3, "TN"), (False, 0, 1, "TN"),
     (False, 3, 3, "FN")],
)
def test_classify(released, bound, min_member, expected):
    assert classify(released, bound, min_member) == expected


def test_planner_fits_is_never_followed_by_an_unschedulable_member(cluster, kube):
    runner = Runner(kube)
    outcomes = []
    try:
        for seed in SEEDS:
            outcomes.append(runner.run(generate(seed), "pinned"))
        for seed in TIGHT_SEEDS:
            outcomes.append(runner.run(generate(seed, "tight"), "pinned"))
        for seed in DEVICE_SEEDS:
            outcomes.append(runner.run(generate(seed, "devices"), "pinned"))
    finally:
        runner.delete_fake_nodes()
    summary = summarize(outcomes)["pinned"]
    assert summary["scenarios"] == len(SEEDS) + len(TIGHT_SEEDS) + len(DEVICE_SEEDS)
    # the batch is not vacuous: it has groups the planner releases and groups it holds back
    assert summary["TP"] + summary["FP"] > 0 and summary["TN"] + summary["FN"] > 0, summary
    for o in outcomes:
        # every member was either bound or reported Unschedulable by kube-scheduler: none is still gated
        assert len(o.bound) + len(o.unschedulable) == o.members, o.as_dict()
        if o.verdict == "Released":
            # pinned: each planned member was narrowed to its planned node, and landed there
            for name, node in o.planned.items():
                assert o.bound.get(name) in (node, None), (name, node, o.as_dict())
    false_positives = [o.as_dict(with_snapshot=True) for o in outcomes if o.classification == "FP"]
    assert false_positives == [], json.dumps(false_positives, indent=1)[:20000]
    # and no false negative: a group the planner holds back, ungated whole by the runner, never
    # gets minMember bound by kube-scheduler (the planner's "does not fit" is not too cautious)
    false_negatives = [o.as_dict(with_snapshot=True) for o in outcomes if o.classification == "FN"]
    assert false_negatives == [], json.dumps(false_negatives, indent=1)[:20000]
