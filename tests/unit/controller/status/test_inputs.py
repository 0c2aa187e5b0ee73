"""The planner's input from the caches (controller/status/inputs.py, pure); the pass that builds it:
test_reconciler.py; restored reservations, timeout victims and pods without their PodGroup: the
test_regressions_*.py files of the regressions they fixed."""

from __future__ import annotations

import pytest

from cogate.controller.model import records
from cogate.controller.model.verdicts import min_member_of
from cogate.controller.status.inputs import build_group_requests, group_object, members_by_group

from tests.builders import NS, raw_pg, raw_pod


def test_members_exclude_deleting_and_other_namespaces():
    a = records.pod_info(raw_pod("a"))
    d = raw_pod("d")
    d["metadata"]["deletionTimestamp"] = "2024-01-01T00:01:00Z"
    other = raw_pod("o")
    other["metadata"]["namespace"] = "elsewhere"
    idx = members_by_group([a, records.pod_info(d), records.pod_info(other)])
    assert {k: [p.name for p in v] for k, v in idx.items()} == {(NS, "pg"): ["a"], ("elsewhere", "pg"): ["o"]}
    reqs = build_group_requests([group_object(raw_pg())], idx)
    assert [m.name for m in reqs[0].members] == ["a"]


def test_min_member_is_read_from_the_podgroup_once_and_carried_by_the_request():
    """``min_member_of`` is the controller's one reader of ``spec.minMember``; the request carries
    it (unset: 1, the CRD's default; below 1: refused when the PodGroup is read)."""
    pgs = [group_object(raw_pg("three", min_member=3)), group_object(raw_pg("one", min_member=1))]
    unset = raw_pg("unset")
    del unset["spec"]["minMember"]
    pgs.append(group_object(unset))
    assert [min_member_of(g.pg) for g in pgs] == [3, 1, 1]
    assert [r.min_member for r in build_group_requests(pgs, {})] == [3, 1, 1]
    with pytest.raises(ValueError, match="minMember"):
        group_object(raw_pg("zero", min_member=0))
