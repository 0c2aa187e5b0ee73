"""After the release (controller/status/lifecycle.py, pure) and the shell acting on it (issue 9 items 1, 2, 3, 5)."""

from __future__ import annotations

import math

import pytest

from cogate import api
from cogate.controller.status import lifecycle
from cogate.controller.model import records
from cogate.controller.planning.planner import GroupRequest, GroupVerdict
from cogate.controller.model.records import NodeInfo, NodeSelectorRequirement, NodeSelectorTerm, PodInfo, Taint
from cogate.models import PodGroupStatus, format_time

from tests.builders import NS, ApiError, Harness, node, podgroup, raw_pg, raw_pod, ready_node, verdict

GATE = api.DEFAULT_GATE_NAME
NOW = 1_704_067_300.0


def member(name, *, node="", pin="", gates=(), phase=None, owner=True, disruption="", deleting=False, created=0.0,
           group="g", tolerations=()):
    aff = ()
    if pin:
        aff = (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (pin,)),)),)
    return PodInfo(NS, name, "uid-" + name, labels={api.POD_GROUP_LABEL: group}, node_name=node,
                   phase=phase or ("Running" if node else "Pending"), requests={"cpu": 4000}, gates=tuple(gates),
                   required_node_affinity=aff, has_controller=owner, disruption=disruption, deleting=deleting,
                   created=created, tolerations=tuple(tolerations))


def request(members, released=True, min_member=2):
    return GroupRequest(NS, "g", min_member, 0.0, released, tuple(members))


def pg(min_member=2, **status):
    return podgroup("g").uid("u1").created(None).rv(None).min_member(min_member).status(**status).obj()


# -- stuck members -------------------------------------------------------------------------------------


def test_stuck_members_are_the_pinned_unbound_ones_whose_node_went_bad():
    nodes = [NodeInfo("n1", allocatable={"cpu": 8000, "pods": 10}, taints=(Taint("maint", "now", "NoSchedule"),)),
             NodeInfo("n2", allocatable={"cpu": 8000, "pods": 10})]
    ms = [member("k-0", pin="n1"), member("k-1", pin="n1", owner=False), member("k-2", pin="n2"),
          member("k-3", node="n1"), member("k-4", pin="n1", gates=(GATE,))]
    stuck = lifecycle.stuck_members(nodes, [], [request(ms)])
    assert sorted(s.member.name for s in stuck.values()) == ["k-0", "k-1"]
    assert {s.node for s in stuck.values()} == {"n1"}
    delete, report = lifecycle.split_stuck(stuck.values(), recreate=True)
    assert [s.member.name for s in delete] == ["k-0"] and [s.member.name for s in report] == ["k-1"]
    text = lifecycle.stuck_message(delete, report)
    assert "k-0 (node n1 has taint maint=now)" in text and "deleted so their owner recreates them gated" in text
    assert "k-1 (node n1 has taint maint=now)" in text and "not deleted" in text
    delete, report = lifecycle.split_stuck(stuck.values(), recreate=False)
    assert delete == [] and len(report) == 2


#: The tolerations kube-apiserver's DefaultTolerationSeconds admission plugin gives every pod.
NOT_READY, UNREACHABLE = lifecycle.READINESS_TAINTS
DEFAULT_TOLERATIONS = (records.Toleration(NOT_READY, "Exists", "", "NoExecute", 300),
                       records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", 300))


def lifecycle_taints(*keys):
    return tuple(Taint(k, "", e) for k in keys for e in ("NoSchedule", "NoExecute"))


@pytest.mark.parametrize("tolerations, taints, expected", [
    # the default tolerations: 300 s, whichever key the node carries (or both before the taint comes)
    (DEFAULT_TOLERATIONS, (), 300.0),
    (DEFAULT_TOLERATIONS, lifecycle_taints(UNREACHABLE), 300.0),
    (DEFAULT_TOLERATIONS, lifecycle_taints(NOT_READY), 300.0),
    # no toleration: the taint eviction controller deletes a bound pod at once
    ((), lifecycle_taints(UNREACHABLE), 0.0),
    ((), (), 0.0),
    # one key tolerated only: the other key, once on the node, evicts at once
    ((records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", 60),), lifecycle_taints(UNREACHABLE), 60.0),
    ((records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", 60),), lifecycle_taints(NOT_READY), 0.0),
    ((records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", 60),), (), 0.0),
    # tolerated without tolerationSeconds: for ever; an empty key with Exists tolerates every taint
    ((records.Toleration("", "Exists"),), lifecycle_taints(UNREACHABLE), math.inf),
    ((records.Toleration("", "Exists", "", "NoExecute", 30),), (), 30.0),
    # the least of the matching tolerations' seconds; 0 or less: at once
    ((records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", 600),
      records.Toleration(UNREACHABLE, "Exists", "", "", 120)), lifecycle_taints(UNREACHABLE), 120.0),
    ((records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", -5),), lifecycle_taints(UNREACHABLE), 0.0),
    ((records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", 0),), lifecycle_taints(UNREACHABLE), 0.0),
    # a toleration of the NoSchedule taint only does not keep a pod through a NoExecute one
    ((records.Toleration(UNREACHABLE, "Exists", "", "NoSchedule"),), lifecycle_taints(UNREACHABLE), 0.0),
    # the least over both keys on the node
    ((records.Toleration(NOT_READY, "Exists", "", "NoExecute", 100),
      records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", 200)), lifecycle_taints(NOT_READY, UNREACHABLE), 100.0),
])
def test_eviction_grace_is_kubernetes_own_clock_for_a_pod_on_a_node_that_is_not_ready(tolerations, taints, expected):
    n = NodeInfo("n1", allocatable={"cpu": 8000, "pods": 10}, taints=taints, ready=False)
    assert lifecycle.eviction_grace(member("k-0", pin="n1", tolerations=tolerations), n) == expected


def test_members_pinned_to_a_node_that_is_only_not_ready_wait_as_long_as_kubernetes_keeps_bound_pods_there():
    """Issue 29: under load, a kwok node's lease was renewed late, the node lifecycle controller
    marked it NotReady for a few seconds, and cogate deleted the 40 released members pinned to it
    after 3 s: the owner made them again, gated, and a released gang of 1,000 waited again for a
    node that was back at once. Only the node's readiness is wrong here: the members wait."""
    cpu = {"cpu": 8000, "pods": 10}
    nodes = [NodeInfo("down", allocatable=cpu, taints=lifecycle_taints(UNREACHABLE), ready=False),
             NodeInfo("down-cordoned", allocatable=cpu, taints=lifecycle_taints(UNREACHABLE), ready=False,
                      unschedulable=True),
             NodeInfo("down-full", allocatable=cpu, ready=False),
             NodeInfo("down-tainted", allocatable=cpu, taints=(Taint("maint", "now", "NoSchedule"),), ready=False),
             NodeInfo("tainted", allocatable=cpu, taints=lifecycle_taints(NOT_READY)),
             NodeInfo("up", allocatable=cpu)]
    filler = member("filler", node="down-full", owner=False, group="other")
    ms = [member("a-0", pin="down", tolerations=DEFAULT_TOLERATIONS),
          member("a-1", pin="down", tolerations=DEFAULT_TOLERATIONS),
          member("b-0", pin="down-cordoned", tolerations=DEFAULT_TOLERATIONS),
          member("c-0", pin="down-full", tolerations=DEFAULT_TOLERATIONS, created=1.0),  # fits beside the filler
          member("c-1", pin="down-full", tolerations=DEFAULT_TOLERATIONS, created=2.0),  # no room left for it
          member("d-0", pin="down-tainted", tolerations=DEFAULT_TOLERATIONS),
          member("e-0", pin="tainted", tolerations=DEFAULT_TOLERATIONS),
          member("f-0", pin="down"),  # no toleration: Kubernetes would evict it at once
          member("g-0", pin="gone", tolerations=DEFAULT_TOLERATIONS),
          member("h-0", pin="up", tolerations=DEFAULT_TOLERATIONS)]
    stuck = lifecycle.stuck_members(nodes, [filler], [request(ms)])
    assert {s.member.name: s.wait for s in stuck.values()} == {
        "a-0": 300.0, "a-1": 300.0,  # only not Ready (and its lifecycle taints): they wait
        "b-0": 0.0,  # cordoned as well
        "c-0": 300.0, "c-1": 0.0,  # the node's room no longer holds c-1 whatever its readiness
        "d-0": 0.0,  # an untolerated taint of someone else as well
        "e-0": 300.0,  # Ready, but the lifecycle taint is still there: the same state
        "f-0": 0.0,
        "g-0": 0.0,  # the node is gone
    }
    assert stuck["uid-a-0"].reason == "node down is not Ready"


# -- departures ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("after, cause", [
    (None, "deleted"),
    (dict(deleting=True, disruption="PreemptionByScheduler"), "preempted by kube-scheduler (DisruptionTarget "
                                                              "PreemptionByScheduler)"),
    (dict(deleting=True, disruption="EvictionByEvictionAPI"), "evicted (Eviction API, e.g. kubectl drain)"),
    (dict(phase="Failed"), "failed"),
    (dict(group="other"), "left the group (its label changed)"),
])
def test_departures_name_the_member_and_the_cause(after, cause):
    before = member("k-0", node="n1")
    gang = lifecycle.gang_members([request([before, member("k-1", node="n1")])], GATE)
    assert set(gang) == {"uid-k-0", "uid-k-1"}
    current = {"uid-k-1": member("k-1", node="n1")}
    if after is not None:
        current["uid-k-0"] = member("k-0", node="n1", **after)
    (d,) = lifecycle.departures(gang, current)
    assert d.member.name == "k-0" and d.cause.startswith(cause)


def test_departure_of_a_deleted_pod_uses_its_last_record_and_ignores_our_own():
    gang = lifecycle.gang_members([request([member("k-0", node="n1")])], GATE)
    last = {"uid-k-0": member("k-0", node="n1", disruption="DeletionByTaintManager")}
    (d,) = lifecycle.departures(gang, {}, last)
    assert "taint manager" in d.cause
    assert lifecycle.departures(gang, {}, last, ignore={"uid-k-0"}) == []
    # unreleased groups and gated members are not a gang
    assert lifecycle.gang_members([request([member("k-0", node="n1")], released=False)], GATE) == {}


def test_record_reads_the_disruption_target_condition():
    raw = raw_pod("a", node="n1", phase="Running")
    raw["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    assert records.pod_info(raw).disruption == "PreemptionByScheduler"
    raw["status"]["conditions"][0]["status"] = "False"
    assert records.pod_info(raw).disruption == ""


def test_ungated_without_release_only_before_any_release():
    ms = [member("g-0", node="n1"), member("g-1", gates=(GATE,)), member("g-2", gates=(GATE, "x"))]
    assert [m.name for m in lifecycle.ungated_without_release(pg(3), ms, GATE)] == ["g-0"]
    assert lifecycle.ungated_without_release(pg(3, scheduleStartTime="2024-01-01T00:00:00Z", phase="Scheduling"),
                                             ms, GATE) == []


def test_fell_below_quorum_only_after_reaching_it():
    one = [member("k-0", node="n1")]
    assert lifecycle.fell_below_quorum(pg(2, phase="Running"), one)
    assert not lifecycle.fell_below_quorum(pg(2, phase="Scheduling"), one)
    assert not lifecycle.fell_below_quorum(pg(2, phase="Running"), one + [member("k-1", node="n1")])


def test_pdb_manifest_and_actions():
    body = lifecycle.pdb_manifest(pg(3), "u1")
    assert body["spec"] == {"minAvailable": 3, "selector": {"matchLabels": {api.POD_GROUP_LABEL: "g"}}}
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert body["metadata"]["labels"][lifecycle.MANAGED_BY_LABEL] == "cogate"
    assert [lifecycle.pdb_action(p) for p in ("Pending", "Scheduling", "Scheduled", "Running", "Finished", "Failed")] \
        == ["delete", "keep", "ensure", "ensure", "delete", "delete"]


# -- conditions ---------------------------------------------------------------------------------------------


def cond(st: PodGroupStatus, type_: str):
    return st.condition(type_)


def test_conditions_from_findings_and_their_way_back():
    g = pg(2, phase="Running", scheduleStartTime="2024-01-01T00:00:00Z")
    ms = [member("k-1", node="n1")]
    lost = (lifecycle.Departure(member("k-0", node="n1"), "preempted by kube-scheduler"),)
    f = lifecycle.Findings(stuck="k-2 pinned ...", refused="pod k-3: no", lost=lost, waiting=("k-4",))
    st = lifecycle.lifecycle_conditions(PodGroupStatus(), g.status, g, ms, "AlreadyReleased", "released; 1 waits", f, NOW)
    assert cond(st, "PlannedNodesUsable").status == "False"
    assert cond(st, "ReleaseAccepted").reason == "ReleaseRefused"
    d = cond(st, "Disrupted")
    assert d.status == "True" and d.reason == "MemberLost"
    assert "member k-0 left the released group: preempted" in d.message and "1 of minMember 2 placed" in d.message
    assert cond(st, "MembersWaiting").status == "True" and cond(st, "MembersWaiting").message == "released; 1 waits"
    # next pass: all resolved, the member replaced
    g2 = pg(2, phase="Scheduling", scheduleStartTime="2024-01-01T00:00:00Z", conditions=[
        c.model_dump(exclude_none=True) for c in st.conditions])
    ms2 = ms + [member("k-5", node="n1")]
    st2 = lifecycle.lifecycle_conditions(g2.status, g2.status, g2, ms2, "AlreadyReleased", "released",
                                         lifecycle.Findings(), NOW + 5)
    assert cond(st2, "PlannedNodesUsable").status == "True"
    assert cond(st2, "ReleaseAccepted").status == "True"
    assert cond(st2, "Disrupted").status == "False" and cond(st2, "Disrupted").reason == "MembersPlaced"
    assert cond(st2, "MembersWaiting").status == "False"


def test_planned_nodes_usable_stays_false_until_the_gang_is_placed_again():
    # The stuck members were deleted: their replacements are back gated, nothing is stuck any
    # more, but the group is not placed: the condition keeps saying what happened.
    g = pg(2, phase="Scheduling", scheduleStartTime="2024-01-01T00:00:00Z")
    st = lifecycle.lifecycle_conditions(PodGroupStatus(), g.status, g, [], "AlreadyReleased", "released",
                                        lifecycle.Findings(stuck="k-1, k-2 pinned to n1 ..."), NOW)
    g2 = pg(2, phase="Scheduling", scheduleStartTime="2024-01-01T00:00:00Z",
            conditions=[c.model_dump(exclude_none=True) for c in st.conditions])
    for placed, want in ((0, "False"), (1, "False"), (2, "True")):
        ms = [member(f"k-{i}", node="n2") for i in range(placed)] + [member("k-9", gates=(GATE,))]
        st2 = lifecycle.lifecycle_conditions(g2.status, g2.status, g2, ms, "AlreadyReleased", "released",
                                             lifecycle.Findings(), NOW + 5)
        assert cond(st2, "PlannedNodesUsable").status == want, placed


def test_no_conditions_when_nothing_happened():
    g = pg(2)
    st = lifecycle.lifecycle_conditions(PodGroupStatus(), g.status, g, [], "Released", "fits", lifecycle.Findings(),
                                        NOW)
    assert st.conditions == []


def test_refusal_before_release_also_says_so_in_released():
    g = pg(3)
    st = lifecycle.lifecycle_conditions(PodGroupStatus(), g.status, g, [], None, "fits 3 of 3",
                                        lifecycle.Findings(refused="pod k-3: frozen"), NOW)
    r = cond(st, "Released")
    assert r.status == "False" and r.reason == "ReleaseRefused" and "k-3" in r.message


# -- the shell: stuck members, refused releases -------------------------------------------------------------


def pinned_raw(name, node="n1", owner=True):
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return raw_pod(name, gates=(), affinity=aff, owner=owner, cpu="4")


RELEASED = {"phase": "Scheduling", "scheduleStartTime": "2024-01-01T00:00:00Z"}


def stuck_harness(**kw):
    pods = [pinned_raw("k-0"), pinned_raw("k-1", owner=False)]
    h = Harness(pods, [raw_pg(min_member=2, status=dict(RELEASED))], lambda groups: [verdict("AlreadyReleased")], **kw)
    tainted = ready_node("n1", taints=[{"key": "maint", "value": "now", "effect": "NoSchedule"}])
    h.caches.nodes.apply_local(tainted)
    return h


def test_stuck_members_are_deleted_after_the_grace_when_owned_and_reported():
    h = stuck_harness()
    h.run()
    assert h.cluster.deleted == [] and not [e for e in h.events if e[1] == "PlannedNodeUnusable"]
    h.now += 3.5
    h.run()
    assert h.cluster.deleted == ["k-0"], "only the member with a controller owner is deleted"
    (ev,) = [e for e in h.events if e[1] == "PlannedNodeUnusable"]
    assert ev[0] == "Warning" and "k-0" in ev[2] and "k-1" in ev[2] and "n1" in ev[2]
    st = h.cluster.pgs["pg"]["status"]
    (c,) = [c for c in st["conditions"] if c["type"] == "PlannedNodesUsable"]
    assert c["status"] == "False" and "maint=now" in c["message"]
    h.now += 1
    h.run()
    assert h.cluster.deleted == ["k-0"], "deleted once"


def not_ready_harness(tolerations):
    pods = [pinned_raw("k-0"), pinned_raw("k-1")]
    for p in pods:
        p["spec"]["tolerations"] = tolerations
    h = Harness(pods, [raw_pg(min_member=2, status=dict(RELEASED))], lambda groups: [verdict("AlreadyReleased")])
    down = (node("n1").hostname(None).cpu("64").labels({"zone": "a"})
            .status(conditions=[{"type": "Ready", "status": "Unknown"}])
            .spec(taints=[{"key": UNREACHABLE, "effect": "NoSchedule"}, {"key": UNREACHABLE, "effect": "NoExecute"}])
            .raw())
    h.caches.nodes.apply_local(down)
    return h


DEFAULT_RAW = [{"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
               for k in (NOT_READY, UNREACHABLE)]


def planned_condition(h):
    st = h.cluster.pgs["pg"].get("status") or {}
    return next((c for c in st.get("conditions") or [] if c["type"] == "PlannedNodesUsable"), None)


def test_members_on_a_node_that_is_not_ready_are_deleted_only_once_kubernetes_would_evict_them(caplog):
    """Meanwhile the PodGroup says so (issue 29): PlannedNodesUsable=False/NodeNotReady naming the node,
    the members and the deadline, and one Warning NodeNotReady event, not one a pass."""
    h = not_ready_harness(DEFAULT_RAW)
    start = h.now
    with caplog.at_level("INFO", logger="cogate.controller.release.aftercare"):
        h.run()
    deadline = format_time(start + 300)
    assert f"2 pinned, not bound (k-0, k-1); deadline {deadline} (tolerationSeconds 300)" in caplog.text
    assert h.rec.debouncer.wakeup == pytest.approx(h.now + 300, abs=0.1), "a pass is due when their wait ends"
    for step in (3.5, 100, 196):  # 299.5 s after the node was first seen not Ready
        h.now += step
        h.run()
        assert h.cluster.deleted == [], "kube-scheduler binds them once the node is Ready again"
        assert not [e for e in h.events if e[1] == "PlannedNodeUnusable"]
        c = planned_condition(h)
        assert (c["status"], c["reason"]) == ("False", "NodeNotReady"), c
        assert "node n1 (Ready is not True; taint node.kubernetes.io/unreachable" in c["message"]
        assert f"deadline {deadline}" in c["message"]
    (ev,) = [e for e in h.events if e[1] == "NodeNotReady"]
    assert ev[0] == "Warning" and ev[2] == c["message"]
    h.now += 1
    h.run()
    assert sorted(h.cluster.deleted) == ["k-0", "k-1"], "300 s: Kubernetes would have evicted them had they bound"
    (ev,) = [e for e in h.events if e[1] == "PlannedNodeUnusable"]
    assert "not Ready" in ev[2]
    assert planned_condition(h)["reason"] == "PlannedNodeUnusable"


def test_the_deadline_counts_from_the_nodes_own_time_across_a_restart():
    """The unreachable taint's timeAdded starts the clock (as Kubernetes' taint eviction controller's),
    not when this process first saw the node: a restarted controller keeps the same deadline."""
    h = not_ready_harness(DEFAULT_RAW)
    added = format_time(h.now - 200)
    raw = (node("n1").hostname(None).cpu("64").labels({"zone": "a"})
           .status(conditions=[{"type": "Ready", "status": "Unknown"}])
           .spec(taints=[{"key": UNREACHABLE, "effect": "NoSchedule"},
                         {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": added}]).raw())
    h.caches.nodes.apply_local(raw)
    h.run()
    c = planned_condition(h)
    assert f"since {added}" in c["message"] and f"deadline {format_time(h.now + 100)}" in c["message"], c
    h.now += 101
    h.run()
    assert sorted(h.cluster.deleted) == ["k-0", "k-1"]


def test_members_on_a_node_back_to_ready_are_never_deleted():
    h = not_ready_harness(DEFAULT_RAW)
    h.run()
    h.now += 30
    h.run()
    assert planned_condition(h)["reason"] == "NodeNotReady"
    h.caches.nodes.apply_local(ready_node("n1"))
    h.now += 1
    h.run()
    c = planned_condition(h)
    assert (c["status"], c["reason"]) == ("True", "PlannedNodesUsable"), "said at once, before they bind"
    h.now += 300
    h.run()
    assert h.cluster.deleted == [] and not [e for e in h.events if e[1] == "PlannedNodeUnusable"]
    assert len([e for e in h.events if e[1] == "NodeNotReady"]) == 1


def test_a_bound_member_not_started_on_a_node_not_ready_is_told_and_left_to_kubernetes():
    """A member bound to a node whose kubelet is gone never starts: the PodGroup names it with the
    deadline at which Kubernetes' taint eviction controller deletes it; cogate deletes nothing."""
    pods = [raw_pod("k-0", gates=(), node="n1", owner=True), raw_pod("k-1", gates=(), node="n2", phase="Running")]
    for p in pods:
        p["spec"]["tolerations"] = DEFAULT_RAW
    h = Harness(pods, [raw_pg(min_member=2, status=dict(RELEASED))], lambda groups: [verdict("AlreadyReleased")])
    added = format_time(h.now - 10)
    h.caches.nodes.apply_local(node("n1").hostname(None).cpu("64").labels({"zone": "a"})
                               .status(conditions=[{"type": "Ready", "status": "False"}])
                               .spec(taints=[{"key": NOT_READY, "effect": "NoExecute", "timeAdded": added}]).raw())
    h.caches.nodes.apply_local(ready_node("n2"))
    h.run()
    c = planned_condition(h)
    assert (c["status"], c["reason"]) == ("False", "NodeNotReady"), c
    assert "1 released member waits for 1 node" in c["message"] and "1 bound, not started (k-0)" in c["message"]
    assert f"deadline {format_time(h.now + 290)}" in c["message"] and "Kubernetes evicts a bound one" in c["message"]
    h.now += 400
    h.run()
    assert h.cluster.deleted == [], "Kubernetes' to evict"
    assert "(passed)" in planned_condition(h)["message"]
    assert len([e for e in h.events if e[1] == "NodeNotReady"]) == 1


def test_members_without_a_toleration_of_a_node_not_ready_go_after_the_grace():
    """Kubernetes evicts a bound pod at once from a node that is not Ready when it does not
    tolerate the taint: no reason to wait longer for an unbound one."""
    h = not_ready_harness([])
    h.run()
    h.now += 3.5
    h.run()
    assert sorted(h.cluster.deleted) == ["k-0", "k-1"]


def test_no_recreate_flag_only_reports():
    h = stuck_harness()
    h.rec.config.recreate_stuck_members = False
    h.run()
    h.now += 4
    h.run()
    assert h.cluster.deleted == []
    assert any(e[1] == "PlannedNodeUnusable" for e in h.events)


def test_a_refused_dry_run_releases_none_and_backs_off():
    pods = [raw_pod("k-1"), raw_pod("k-2"), raw_pod("k-3")]
    rel = {"uid-k-1": "n1", "uid-k-2": "n1", "uid-k-3": "n1"}
    h = Harness(pods, [raw_pg(min_member=3)], lambda groups: [verdict("Released", rel, 3, "fits 3 of 3")] if groups
                else [])
    refusal = ApiError(422, "refused")
    refusal.body = '{"kind": "Status", "message": "k-3\'s affinity is frozen by policy"}'
    h.cluster.dry_errors["k-3"] = [refusal] * 10
    h.run()
    assert [e for e in h.cluster.log if e[0] == "pod"] == [], "no gate removed"
    st = h.cluster.pgs["pg"]["status"]
    assert not st.get("scheduleStartTime"), "a refused release is not recorded as a release"
    (c,) = [c for c in st["conditions"] if c["type"] == "ReleaseAccepted"]
    assert c["status"] == "False" and "k-3" in c["message"] and "frozen by policy" in c["message"]
    refused = [e for e in h.events if e[1] == "ReleaseRefused"]
    assert len(refused) == 1 and "retrying in 5s" in refused[0][2]
    # within the back-off the group is not planned again: no hot loop
    for _ in range(5):
        h.now += 0.5
        h.run()
    assert len([e for e in h.events if e[1] == "ReleaseRefused"]) == 1
    assert [g for call in h.decide_calls[1:] for g in call["groups"]] == []
    h.now += 3
    h.run()
    refused = [e for e in h.events if e[1] == "ReleaseRefused"]
    assert len(refused) == 2 and "retrying in 10s" in refused[1][2]
    h.cluster.dry_errors["k-3"] = []
    h.now += 10.5
    h.run()
    assert sorted(e[1] for e in h.cluster.log if e[0] == "pod") == ["k-1", "k-2", "k-3"]
    (c,) = [c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "ReleaseAccepted"]
    assert c["status"] == "True"


def test_a_patch_refused_after_the_dry_run_is_reported_and_not_retried_at_once():
    pods = [raw_pod("k-1"), raw_pod("k-2")]
    h = Harness(pods, [raw_pg(min_member=2)], [verdict("Released", {"uid-k-1": "n1", "uid-k-2": "n1"}, 2)])
    h.cluster.pod_errors["k-2"] = [ApiError(403, "denied by webhook")] * 10
    h.run()
    assert [e[1] for e in h.cluster.log if e[0] == "pod"] == ["k-1"]
    (ev,) = [e for e in h.events if e[1] == "ReleaseRefused"]
    assert "k-2" in ev[2] and "1 other members were released" in ev[2]
    h.verdicts = [verdict("AlreadyReleased", {"uid-k-2": "n1"}, 1)]
    attempts = len(h.cluster.pod_errors["k-2"])
    h.now += 1
    h.run()
    assert len(h.cluster.pod_errors["k-2"]) == attempts, "not patched again within the back-off"
    st = h.cluster.pgs["pg"]["status"]
    (c,) = [c for c in st["conditions"] if c["type"] == "ReleaseAccepted"]
    assert c["status"] == "False" and "k-2" in c["message"]


def test_verdict_names_waiting_members_and_the_shell_says_so():
    pods = [raw_pod("a", gates=(), node="n1", phase="Running"), raw_pod("b")]
    v = GroupVerdict(NS, "pg", "AlreadyReleased", {}, 1, "released; 1 member (b) waits gated for capacity: x",
                     ("b",))
    h = Harness(pods, [raw_pg(min_member=1, status=dict(RELEASED))], [v])
    h.run()
    assert [e for e in h.cluster.log if e[0] == "pod"] == []
    (ev,) = [e for e in h.events if e[1] == "WaitingForCapacity"]
    assert ev[0] == "Normal" and "(b)" in ev[2]
    (c,) = [c for c in h.cluster.pgs["pg"]["status"]["conditions"] if c["type"] == "MembersWaiting"]
    assert c["status"] == "True" and c["reason"] == "WaitingForCapacity"


# -- departures between the release and the next pass ------------------------------------------------


def _two_members(owner: tuple[str, str, str, str], min_member: int):
    """A World: members k-0 and k-1 (1 CPU, gated, of ``owner``: kind, name, uid, apiVersion) of
    PodGroup pg (``min_member``), one node of 4 CPU; its first pass releases both."""
    from tests.builders import World, pod

    pods = [pod(f"k-{i}").req(cpu="1").group("pg").owner(*owner).gated().raw() for i in range(2)]
    w = World(pods, [raw_pg("pg", min_member)], nodes=(ready_node("n1", "4"),), preemption=False)
    w.run()
    assert not w.gated("k-0") and not w.gated("k-1")
    return w


def _change_k0(w, change) -> None:
    """``change`` applied to pod k-0 in the fake API server (None: k-0 deleted)."""
    if change is None:
        del w.cluster.pods["k-0"]
    else:
        change(w.cluster.pods["k-0"])
        w.cluster._bump(w.cluster.pods["k-0"])


def _preempted(p: dict) -> None:
    p["metadata"]["deletionTimestamp"] = "2024-01-01T00:02:00Z"
    p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]


def _relabelled(p: dict) -> None:
    p["metadata"]["labels"][api.POD_GROUP_LABEL] = "other"


#: What happens to member k-0 after the pass that released it and before the next one starts:
#: (bind it first, change to its pod or None: deleted, the cause the MemberLost event names).
BETWEEN = {
    "bound then preempted": (True, _preempted, "preempted by kube-scheduler (DisruptionTarget PreemptionByScheduler)"),
    "bound then deleted": (True, None, "deleted"),
    "bound then failed": (True, lambda p: p["status"].update(phase="Failed"), "failed"),
    "bound then relabelled": (True, _relabelled, "left the group (its label changed)"),
    "deleted before it was bound": (False, None, "deleted"),
    "relabelled before it was bound": (False, _relabelled, "left the group (its label changed)"),
}


@pytest.mark.parametrize("bind, change, cause", BETWEEN.values(), ids=BETWEEN.keys())
@pytest.mark.parametrize("min_member", [2, 1])
def test_a_member_that_leaves_before_any_pass_saw_it_bound_is_reported_once(bind, change, cause, min_member):
    """Seen in CI (1.30.14, under load): a ReplicaSet's 2 members were released, bound and Running, and
    one was preempted before the controller's next pass; the departures were judged against the
    members of the standing release at the last pass, taken before its release (gated then) and only
    once bound, so no ``MemberLost`` came at all and the PodGroup kept saying all was well. Every
    member a release ungates belongs to it from that moment: the next pass reports it once, with
    its cause, and ``Disrupted`` says whether minMember are still placed."""
    w = _two_members(("ReplicaSet", "k", "rs1", "apps/v1"), min_member)
    w.bind("k-1")
    if bind:
        w.bind("k-0")
    _change_k0(w, change)
    w.run(1)
    lost = w.reasons("MemberLost")
    assert [e[3] for e in lost] == [f"member k-0 left the released group: {cause}; 1 of minMember {min_member} placed"], \
        w.events
    disrupted = w.condition(type_="Disrupted")
    assert (disrupted["status"], disrupted["reason"]) == (("True", "MemberLost") if min_member == 2
                                                          else ("False", "MembersPlaced")), disrupted
    assert "member k-0 left the released group" in disrupted["message"], disrupted
    w.run(1)
    w.run(30)
    assert len(w.reasons("MemberLost")) == 1, w.events  # once


def _succeeded(p: dict) -> None:
    p["status"]["phase"] = "Succeeded"


#: What happens to member k-0 (bound) before the next pass, once its work is done: nothing is lost.
FINISHED = {
    "succeeded": [_succeeded],
    "succeeded, then being deleted": [_succeeded, lambda p: p["metadata"].update(deletionTimestamp="2024-01-01T00:02:00Z")],
    "succeeded, then deleted": [_succeeded, None],
}


@pytest.mark.parametrize("seen_running", [True, False], ids=["a pass saw it Running", "released in the last pass"])
@pytest.mark.parametrize("steps", FINISHED.values(), ids=FINISHED.keys())
def test_a_member_that_finished_is_never_lost_whatever_happens_to_it_then(steps, seen_running):
    """A member whose work is done (Succeeded) and that is then deleted (its Job deleted, a TTL, a
    cleanup) left nothing undone: no ``MemberLost``, ``Disrupted`` stays False, the release stands.
    Before, a member a pass had seen Running and the next saw Succeeded and deleting, or gone after
    the watch's last record said Succeeded, was reported "deleted"."""
    w = _two_members(("Job", "k", "job1", "batch/v1"), 2)
    w.bind("k-0")
    w.bind("k-1")
    if seen_running:
        w.run(1)
    for step in steps:
        _change_k0(w, step)
        w.relist()  # the watch delivers each change (its DELETED event carries the last state)
    w.run(1)
    w.run(1)
    assert w.reasons("MemberLost") == [], w.events
    disrupted = w.condition(type_="Disrupted")
    assert disrupted is None or disrupted["status"] == "False", disrupted
    assert w.condition(type_="Released")["status"] == "True"


def test_departures_leave_out_members_whose_last_record_is_succeeded():
    gang = lifecycle.gang_members([request([member("k-0", node="n1"), member("k-1", node="n1")])], GATE)
    done = member("k-0", node="n1", phase="Succeeded")
    assert lifecycle.departures(gang, {"uid-k-1": member("k-1", node="n1")}, {"uid-k-0": done}) == []
    assert lifecycle.departures(gang, {"uid-k-0": member("k-0", node="n1", phase="Succeeded", deleting=True),
                                       "uid-k-1": member("k-1", node="n1")}) == []
    # without a record of its end it was lost
    (d,) = lifecycle.departures(gang, {"uid-k-1": member("k-1", node="n1")})
    assert d.member.name == "k-0" and d.cause == "deleted"
