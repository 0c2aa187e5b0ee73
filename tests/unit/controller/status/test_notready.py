"""Released members waiting for a node that is not Ready (controller/status/notready.py, pure; issue 29).

Every case the rule knows: a node Ready, NotReady (Ready False), unreachable (Ready Unknown with
the node lifecycle controller's taints), readiness taints only (Ready True), mixed nodes, members
pinned or bound, started or not, a grace that expired, and the condition written from it.
"""

from __future__ import annotations

import math

import pytest

from cogate import api
from cogate.controller.model import records
from cogate.controller.model.records import NodeInfo, NodeSelectorRequirement, NodeSelectorTerm, PodInfo, Taint
from cogate.controller.status import conditions, lifecycle, notready
from cogate.controller.status.notready import NodeWait
from cogate.controller.model.verdicts import GroupRequest
from cogate.models import PodGroupStatus, format_time

from tests.builders import NS, podgroup

NOW = 1_780_000_000.0
NOT_READY, UNREACHABLE = records.READINESS_TAINTS
DEFAULT = (records.Toleration(NOT_READY, "Exists", "", "NoExecute", 300),
           records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", 300))
CPU = {"cpu": 8000, "pods": 10}


def taints(*keys):
    return tuple(Taint(k, "", e) for k in keys for e in ("NoSchedule", "NoExecute"))


def member(name, *, pin="", node="", phase=None, tolerations=DEFAULT, deleting=False, group="g"):
    aff = (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (pin,)),)),) if pin else ()
    return PodInfo(NS, name, "uid-" + name, labels={api.POD_GROUP_LABEL: group}, node_name=node,
                   phase=phase or ("Running" if node else "Pending"), requests={"cpu": 1000},
                   required_node_affinity=aff, has_controller=True, deleting=deleting, tolerations=tuple(tolerations))


def nodes_of(*ns):
    return {n.name: n for n in ns}


def judge(members, nodes, seen=None, now=NOW, released=True):
    """The shell's order: stuck members of the pass, then the waits among them and the bound ones."""
    request = GroupRequest(NS, "g", 2, 0.0, released, tuple(members))
    stuck = lifecycle.stuck_members(list(nodes.values()), [], [request])
    return notready.waits(members, nodes, stuck, seen or {}, now)


# -- who waits ---------------------------------------------------------------------------------------------


def test_a_ready_node_keeps_nobody_waiting():
    nodes = nodes_of(NodeInfo("n1", allocatable=CPU))
    assert judge([member("k-0", pin="n1"), member("k-1", node="n1", phase="Pending")], nodes) == ()


def test_not_ready_pinned_and_bound_not_started_wait_running_ones_do_not():
    """Ready False (NotReady) with the not-ready taints, as the node lifecycle controller sets it."""
    n1 = NodeInfo("n1", allocatable=CPU, taints=taints(NOT_READY), ready=False, not_ready_since=NOW - 60)
    ms = [member("k-0", pin="n1"), member("k-1", pin="n1"), member("k-2", node="n1", phase="Pending"),
          member("k-3", node="n1", phase="Running"), member("k-4", node="n1", phase="Succeeded"),
          member("k-5", pin="n1", deleting=True), member("k-6", node="n1", phase="Pending", deleting=True)]
    (w,) = judge(ms, nodes_of(n1))
    assert w == NodeWait("n1", f"Ready is not True; taint {NOT_READY}", NOW - 60, ("k-0", "k-1"), ("k-2",),
                         NOW + 240, 300.0)


def test_unreachable_node_counts_from_its_taint():
    n1 = NodeInfo("n1", allocatable=CPU, taints=taints(UNREACHABLE), ready=False, not_ready_since=NOW - 10)
    (w,) = judge([member("k-0", pin="n1")], nodes_of(n1))
    assert (w.state, w.since, w.deadline) == (f"Ready is not True; taint {UNREACHABLE}", NOW - 10, NOW + 290)


def test_readiness_taints_only_on_a_ready_node_are_the_same_state():
    n1 = NodeInfo("n1", allocatable=CPU, taints=taints(NOT_READY), not_ready_since=NOW - 5)
    (w,) = judge([member("k-0", pin="n1")], nodes_of(n1))
    assert w.state == f"taint {NOT_READY}" and w.pinned == ("k-0",) and w.deadline == NOW + 295


def test_without_a_time_of_the_node_it_counts_from_when_cogate_first_saw_it():
    n1 = NodeInfo("n1", allocatable=CPU, ready=False)
    assert judge([member("k-0", pin="n1")], nodes_of(n1))[0].since == NOW
    (w,) = judge([member("k-0", pin="n1")], nodes_of(n1), seen={"n1": NOW - 100})
    assert (w.since, w.deadline) == (NOW - 100, NOW + 200)
    assert notready.start(n1, {}, NOW) == NOW
    assert notready.deadline(n1, math.inf, {}, NOW) == math.inf


def test_mixed_nodes_one_wait_per_node_in_name_order():
    nodes = nodes_of(NodeInfo("b", allocatable=CPU, taints=taints(UNREACHABLE), ready=False, not_ready_since=NOW - 1),
                     NodeInfo("a", allocatable=CPU, ready=False, not_ready_since=NOW - 2),
                     NodeInfo("up", allocatable=CPU),
                     NodeInfo("cordoned", allocatable=CPU, ready=False, unschedulable=True, not_ready_since=NOW))
    ms = [member("k-0", pin="b"), member("k-1", pin="a"), member("k-2", node="a", phase="Pending"),
          member("k-3", pin="up"), member("k-4", pin="cordoned"), member("k-5", pin="gone")]
    got = judge(ms, nodes)
    assert [(w.node, w.pinned, w.bound) for w in got] == [("a", ("k-1",), ("k-2",)), ("b", ("k-0",), ())], \
        "a cordoned node is stuck at once (PlannedNodeUnusable), a gone node too: nobody waits for them"


def test_members_tolerating_differently_the_earliest_deadline_of_the_node_is_told():
    n1 = NodeInfo("n1", allocatable=CPU, taints=taints(UNREACHABLE), ready=False, not_ready_since=NOW)
    short = (records.Toleration(UNREACHABLE, "Exists", "", "NoExecute", 60),)
    (w,) = judge([member("k-0", pin="n1"), member("k-1", node="n1", phase="Pending", tolerations=short)],
                 nodes_of(n1))
    assert (w.deadline, w.grace) == (NOW + 60, 60.0)


def test_no_toleration_means_no_wait_and_a_toleration_without_seconds_never_ends():
    n1 = NodeInfo("n1", allocatable=CPU, taints=taints(UNREACHABLE), ready=False, not_ready_since=NOW)
    assert judge([member("k-0", pin="n1", tolerations=())], nodes_of(n1)) == (), "given up after the 3 s grace"
    (w,) = judge([member("k-0", pin="n1", tolerations=(records.Toleration("", "Exists"),))], nodes_of(n1))
    assert w.deadline == math.inf and "no deadline" in notready.message((w,), NOW)


def test_grace_expired_pinned_members_are_given_up_bound_ones_stay_told():
    n1 = NodeInfo("n1", allocatable=CPU, taints=taints(UNREACHABLE), ready=False, not_ready_since=NOW - 301)
    ms = [member("k-0", pin="n1"), member("k-1", node="n1", phase="Pending")]
    (w,) = judge(ms, nodes_of(n1))
    assert w.pinned == () and w.bound == ("k-1",), "the pinned one is PlannedNodeUnusable's now"
    assert f"deadline {format_time(NOW - 1)} (passed)" in notready.message((w,), NOW)
    assert judge([member("k-0", pin="n1")], nodes_of(n1)) == ()


def test_a_group_not_released_has_no_pinned_member_waiting():
    n1 = NodeInfo("n1", allocatable=CPU, ready=False, not_ready_since=NOW)
    gated = PodInfo(NS, "k-0", "uid-k-0", gates=(api.DEFAULT_GATE_NAME,), tolerations=DEFAULT,
                    required_node_affinity=member("x", pin="n1").required_node_affinity)
    assert judge([gated], nodes_of(n1), released=False) == ()


# -- what is said -----------------------------------------------------------------------------------------


def test_message_names_nodes_counts_members_and_deadline():
    w1 = NodeWait("n1", f"Ready is not True; taint {UNREACHABLE}", NOW, ("k-0", "k-1"), (), NOW + 300, 300.0)
    w2 = NodeWait("n2", "Ready is not True", NOW - 5, (), ("k-2",), NOW + 25.5, 30.5)
    text = notready.message((w1, w2), NOW)
    assert text == (
        f"3 released members wait for 2 nodes that are not Ready: node n1 (Ready is not True; taint {UNREACHABLE}, "
        f"since {format_time(NOW)}): 2 pinned, not bound (k-0, k-1); deadline {format_time(NOW + 300)} "
        f"(tolerationSeconds 300); node n2 (Ready is not True, since {format_time(NOW - 5)}): 1 bound, not started "
        f"(k-2); deadline {format_time(NOW + 25.5)} (tolerationSeconds 30.5); at its deadline cogate gives up on a "
        "pinned member and plans it again (PlannedNodeUnusable) and Kubernetes evicts a bound one (its NoExecute "
        "taint) unless the node is Ready before")
    one = notready.message((w1,), NOW)
    assert one.startswith("2 released members wait for 1 node that is not Ready: ") and "Kubernetes evicts" not in one
    assert notready.message((), NOW) == ""
    assert notready.situation((w1, w2)) == "n1,n2"


def test_message_cuts_long_lists():
    many = tuple(NodeWait(f"n{i}", "Ready is not True", NOW, tuple(f"k-{j}" for j in range(7)), (), NOW + 300, 300.0)
                 for i in range(7))
    text = notready.message(many, NOW)
    assert text.startswith("49 released members wait for 7 nodes")
    assert "k-0, k-1, k-2, k-3, k-4 and 2 more" in text and "and 2 more nodes" in text and "node n5" not in text


def test_one_member_one_node_reads_in_the_singular():
    w = NodeWait("n1", "Ready is not True", NOW, ("k-0",), (), NOW + 300, 300.0)
    assert notready.message((w,), NOW).startswith("1 released member waits for 1 node that is not Ready: ")


# -- the condition -------------------------------------------------------------------------------------------


def pg(**status):
    return podgroup("g").uid("u1").created(None).rv(None).min_member(2).status(**status).obj()


def planned(st):
    return next((c for c in st.conditions if c.type == conditions.CONDITION_PLANNED_NODES_USABLE), None)


RELEASED = dict(phase="Scheduling", scheduleStartTime="2024-01-01T00:00:00Z")


def test_condition_says_node_not_ready_then_clears_when_nothing_waits():
    g = pg(**RELEASED)
    st = lifecycle.lifecycle_conditions(PodGroupStatus(), g.status, g, [], "AlreadyReleased", "",
                                        lifecycle.Findings(not_ready="2 released members wait ..."), NOW)
    c = planned(st)
    assert (c.status, c.reason, c.message) == ("False", "NodeNotReady", "2 released members wait ...")
    g2 = pg(**RELEASED, conditions=[c.model_dump(exclude_none=True) for c in st.conditions])
    st2 = lifecycle.lifecycle_conditions(g2.status, g2.status, g2, [], "AlreadyReleased", "", lifecycle.Findings(),
                                         NOW + 5)
    c2 = planned(st2)
    assert (c2.status, c2.reason) == ("True", "PlannedNodesUsable"), "Ready again: at once, before they bind"
    assert "not Ready" in c2.message


@pytest.mark.parametrize("stuck, not_ready, want", [
    ("k-0 pinned to n1 (taint)", "", ("False", "PlannedNodeUnusable", "k-0 pinned to n1 (taint)")),
    ("k-0 pinned to n1 (taint)", "k-1 waits for n2", ("False", "PlannedNodeUnusable",
                                                      "k-0 pinned to n1 (taint); k-1 waits for n2")),
    ("", "k-1 waits for n2", ("False", "NodeNotReady", "k-1 waits for n2")),
])
def test_stuck_members_come_first_and_the_wait_follows(stuck, not_ready, want):
    conds = conditions.ConditionSet([], NOW, 1)
    conditions.write_planned_nodes_usable(conds, stuck=stuck, placed=0, min_member=2, not_ready=not_ready)
    c = conds.get(conditions.CONDITION_PLANNED_NODES_USABLE)
    assert (c.status, c.reason, c.message) == want


def test_nothing_written_when_nothing_waited():
    conds = conditions.ConditionSet([], NOW, 1)
    conditions.write_planned_nodes_usable(conds, stuck="", placed=2, min_member=2, not_ready="")
    assert conds.to_list() == []


def test_given_up_members_turn_the_reason_to_planned_node_unusable_and_it_stays_until_placed():
    conds = conditions.ConditionSet([], NOW, 1)
    conditions.write_planned_nodes_usable(conds, stuck="", placed=2, min_member=2, not_ready="k-0 waits for n1")
    conditions.write_planned_nodes_usable(conds, stuck="k-0 pinned to n1 (not Ready): deleted", placed=1,
                                          min_member=2)
    conditions.write_planned_nodes_usable(conds, stuck="", placed=1, min_member=2)
    assert conds.get(conditions.CONDITION_PLANNED_NODES_USABLE).reason == "PlannedNodeUnusable"
    conditions.write_planned_nodes_usable(conds, stuck="", placed=2, min_member=2)
    assert conds.get(conditions.CONDITION_PLANNED_NODES_USABLE).status == "True"


# -- the node's own time ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("conds, taint_list, want", [
    ([{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}], [], (True, 0.0)),
    # no readiness taint yet: no time (a merge patch of the Ready condition keeps an old lastTransitionTime)
    ([{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}], [], (False, 0.0)),
    ([{"type": "Ready", "status": "Unknown"}], [], (False, 0.0)),
    ([], [], (False, 0.0)),
    # the NoExecute readiness taint's timeAdded wins: the taint eviction controller counts from it
    ([{"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
     [{"key": UNREACHABLE, "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:01Z"},
      {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:05Z"}], (False, 1767225605.0)),
    # taints only on a Ready node
    ([{"type": "Ready", "status": "True"}], [{"key": NOT_READY, "effect": "NoExecute", "timeAdded": "2026-01-01T00:01:00Z"}],
     (True, 1767225660.0)),
    # someone else's NoExecute taint is no readiness
    ([{"type": "Ready", "status": "True"}], [{"key": "maint", "effect": "NoExecute", "timeAdded": "2026-01-01T00:01:00Z"}],
     (True, 0.0)),
])
def test_readiness_of_a_node_and_since_when(conds, taint_list, want):
    assert records.readiness(conds, taint_list) == want
    raw = {"metadata": {"name": "n1"}, "spec": {"taints": taint_list}, "status": {"conditions": conds}}
    n = records.node_info(raw)
    assert (n.ready, n.not_ready_since) == want


def test_a_bad_time_added_is_named():
    with pytest.raises(records.InvalidObject, match=r"spec.taints\[0\].timeAdded"):
        records.readiness([], [{"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": "yesterday"}])
