"""controller.quota: a group whose missing members a ResourceQuota refuses says so (issue 9 item 9)."""

from __future__ import annotations

import pytest

from cogate.controller.kube.informer import namespaced_key
from cogate.controller.model.records import InvalidObject
from cogate.controller.planning.planner import GroupRequest, GroupVerdict
from cogate.controller.model.quota import QuotaInfo, explain_waiting, member_usage, quota_info, quota_refusal

from tests.builders import NS, Harness, informer, pod, raw_pg, raw_pod, verdict

GiB = 2**30


def raw_quota(name="compute", hard=None, used=None, ns=NS, **spec):
    hard = hard or {"requests.cpu": "8", "pods": "10"}
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": "3"},
            "spec": {"hard": hard, **spec}, "status": {"hard": hard, "used": used or {}}}


def member(cpu_m=2000, mem=GiB, gpu=0, name="w-0", phase="Pending", created=0.0):
    b = pod(name).req(cpu=f"{cpu_m}m", memory=mem).phase(phase).created(created)
    if gpu:
        b.req({"nvidia.com/gpu": gpu})
    return b.info()


def test_quota_info_parses_amounts_in_resource_units():
    q = quota_info(raw_quota(hard={"requests.cpu": "8", "limits.cpu": "16", "memory": "4Gi", "pods": "10"},
                             used={"requests.cpu": "7500m", "memory": "1Gi", "pods": "3"}))
    assert q.hard == {"requests.cpu": 8000, "limits.cpu": 16000, "memory": 4 * GiB, "pods": 10}
    assert q.used == {"requests.cpu": 7500, "memory": GiB, "pods": 3}
    assert not q.scoped
    assert quota_info(raw_quota(scopes=["BestEffort"])).scoped
    with pytest.raises(InvalidObject, match="status.used.requests.cpu"):
        quota_info(raw_quota(used={"requests.cpu": "lots"}))


@pytest.mark.parametrize("key,expected", [
    ("pods", 1), ("count/pods", 1),
    ("cpu", 2000), ("requests.cpu", 2000), ("memory", GiB), ("requests.memory", GiB),
    ("requests.nvidia.com/gpu", 1), ("requests.ephemeral-storage", 0),
    ("limits.cpu", None), ("limits.memory", None), ("requests.storage", None), ("persistentvolumeclaims", None),
    ("count/deployments.apps", None), ("services", None),
])
def test_member_usage_as_the_pod_quota_evaluator_charges(key, expected):
    assert member_usage(member(gpu=1), key) == expected


def test_member_usage_without_a_member_knows_only_pod_counts():
    assert member_usage(None, "pods") == 1
    assert member_usage(None, "requests.cpu") is None


@pytest.mark.parametrize("hard,used,m,expected", [
    ({"requests.cpu": "8"}, {"requests.cpu": "8"}, member(), "ResourceQuota compute: requests.cpu 8 of 8 used, "
                                                             "a member requests 2"),
    ({"requests.cpu": "8"}, {"requests.cpu": "6"}, member(), ""),  # exactly fits
    ({"requests.cpu": "8"}, {"requests.cpu": "6500m"}, member(), "requests.cpu 6500m of 8 used"),
    ({"pods": "4"}, {"pods": "4"}, None, "ResourceQuota compute: pods 4 of 4 used, a member is 1 pod"),
    ({"requests.nvidia.com/gpu": "2"}, {"requests.nvidia.com/gpu": "2"}, member(), ""),  # member asks none
    ({"requests.nvidia.com/gpu": "2"}, {"requests.nvidia.com/gpu": "2"}, member(gpu=1), "requests.nvidia.com/gpu 2 of 2"),
    ({"limits.cpu": "8"}, {"limits.cpu": "8"}, member(), ""),  # limits are not evaluated
    ({"memory": "4Gi"}, {"memory": "3.5Gi"}, member(), "memory 3.5Gi of 4Gi used, a member requests 1Gi"),
])
def test_quota_refusal(hard, used, m, expected):
    got = quota_refusal([quota_info(raw_quota(hard=hard, used=used))], NS, m)
    assert (expected in got) if expected else got == ""
    if expected:
        assert got.startswith("ResourceQuota compute: ")


def test_quota_refusal_ignores_other_namespaces_and_scoped_quotas():
    full = {"requests.cpu": "8"}
    assert quota_refusal([quota_info(raw_quota(hard=full, used=full, ns="other"))], NS, member()) == ""
    assert quota_refusal([quota_info(raw_quota(hard=full, used=full, scopes=["NotTerminating"]))], NS, member()) == ""


def _request(members, min_member=3):
    return GroupRequest(NS, "pg", min_member, 0.0, False, tuple(members))


FULL = [QuotaInfo(NS, "compute", {"requests.cpu": 8000}, {"requests.cpu": 8000})]


def test_explain_waiting_appends_the_quota_to_a_group_short_of_members():
    v = GroupVerdict(NS, "pg", "WaitingForMembers", {}, 0, "2 of 3 members present")
    got = explain_waiting(v, _request([member(name="a"), member(name="b")]), FULL)
    assert got.message.startswith("2 of 3 members present; ResourceQuota compute: requests.cpu 8 of 8 used, "
                                  "a member requests 2: the API server refuses more members")
    assert "hold quota from creation, gated or not" in got.message
    assert (got.outcome, got.fits, got.release) == (v.outcome, v.fits, v.release)


@pytest.mark.parametrize("outcome,members,quotas", [
    ("InsufficientCapacity", ["a", "b"], FULL),  # not waiting for members
    ("WaitingForMembers", ["a", "b", "c"], FULL),  # all present (held by other gates, say)
    ("WaitingForMembers", ["a", "b"], []),  # no quota
    ("WaitingForMembers", ["a", "b"], [QuotaInfo(NS, "compute", {"requests.cpu": 8000}, {"requests.cpu": 2000})]),
])
def test_explain_waiting_leaves_other_verdicts_alone(outcome, members, quotas):
    v = GroupVerdict(NS, "pg", outcome, {}, 0, "msg")
    assert explain_waiting(v, _request([member(name=n) for n in members]), quotas) is v


def test_reconciler_reports_the_refusing_quota_in_condition_and_event():
    """The pass appends the quota to the WaitingForMembers verdict before status and events."""
    h = Harness([raw_pod("a", cpu="2"), raw_pod("b", cpu="2")], [raw_pg(min_member=3)],
                [verdict("WaitingForMembers", message="2 of 3 members present")])
    h.caches.quotas = informer("quotas", [raw_quota(hard={"requests.cpu": "4"}, used={"requests.cpu": "4"})],
                               namespaced_key, quota_info)
    h.run()
    cond = next(c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "Released")
    assert cond["reason"] == "WaitingForMembers"
    assert "ResourceQuota compute: requests.cpu 4 of 4 used, a member requests 2" in cond["message"]
    assert any("ResourceQuota compute" in e[2] for e in h.events if e[1] == "WaitingForMembers")
