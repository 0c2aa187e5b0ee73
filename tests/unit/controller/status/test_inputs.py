"""The planner's input from the caches (controller/status/inputs.py, pure); the pass that builds it:
test_reconciler.py; restored reservations, timeout victims and pods without their PodGroup: the
test_regressions_*.py files of the regressions they fixed."""

from __future__ import annotations

from cogate.controller.model import records
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
