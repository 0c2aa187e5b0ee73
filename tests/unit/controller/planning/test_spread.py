"""PodTopologySpread Filter model (controller/planning/spread.py) and the planner's use of it.

Table tests state kube-scheduler v1.36's rules one by one (podtopologyspread/filtering.go,
common.go); the property test compares the planner with an independent from-scratch
implementation of the same Filter and a brute-force search over placements and orders.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.records import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    pod_info,
)
from cogate.controller.planning.planner import GroupRequest, Outcome, PlannerConfig, decide
from cogate.controller.planning.spread import MISSING_LABEL, PINNED_SKEW, SKEW, Tracker
from tests.builders import node, pod as pod_

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
CORDON = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
APP = LabelSelector((("app", "x"),))


_n = itertools.count()


def pod(node_name="", labels=None, ns="default", spread=(), cpu=1, deleting=False, created=0.0, **kw):
    i = next(_n)
    b = pod_(f"p{i}", ns).uid(f"u{i}").labels({"app": "x"} if labels is None else labels).req(cpu=cpu).created(created)
    if node_name:
        b.on(node_name)
    else:
        b.gated()
    if deleting:
        b.deleting(0)
    if not cpu:  # kept as the record it always was (the converter leaves a zero request out)
        kw["requests"] = {"cpu": 0}
    return b.info(topology_spread=tuple(spread), **kw)


def hard(key=HOST, skew=1, selector=APP, **kw):
    return TopologySpreadConstraint(max_skew=skew, topology_key=key, label_selector=selector, **kw)


def allowed(nodes, placed, incoming):
    t = Tracker(nodes)
    index = {n.name: i for i, n in enumerate(nodes)}
    for p in placed:
        t.add(p, index[p.node_name])
    return {n.name for i, n in enumerate(nodes) if t.allows(incoming, i)}


# -- the Filter, rule by rule --------------------------------------------------------


def test_skew_counts_matching_pods_against_the_least_loaded_domain():
    nodes = [node("a").cpu(8).info(), node("b").cpu(8).info(), node("c").cpu(8).info()]
    placed = [pod("a"), pod("a"), pod("b")]
    # counts a=2 b=1 c=0, min 0: only c (0+1-0) and nothing else within maxSkew 1
    assert allowed(nodes, placed, pod(spread=[hard()])) == {"c"}
    assert allowed(nodes, placed, pod(spread=[hard(skew=2)])) == {"b", "c"}


def test_cordoned_and_tainted_nodes_are_domains_by_default():
    # nodeTaintsPolicy Ignore (default): the cordoned node b is a domain with 0 pods, so a is
    # refused (1 + 1 - 0); b passes this Filter (NodeUnschedulable refuses it)
    nodes = [node("a").cpu(8).info(), node("b").cpu(8).taint(CORDON).unschedulable().info()]
    assert allowed(nodes, [pod("a")], pod(spread=[hard()])) == {"b"}
    # ... Honor: b is not a domain (the pod does not tolerate its taint), a alone is min
    assert allowed(nodes, [pod("a")], pod(spread=[hard(node_taints_policy="Honor")])) == {"a", "b"}


def test_node_affinity_policy_honor_limits_domains_to_nodes_the_pod_may_use():
    nodes = [node("a").labels({"pool": "p"}).cpu(8).info(), node("b").cpu(8).info()]
    sel = {"pool": "p"}
    assert allowed(nodes, [pod("a")], pod(spread=[hard()], node_selector=sel)) == {"a", "b"}
    # Ignore: b counts as a domain with 0 pods, so a (1 + 1 - 0 = 2) is refused
    assert allowed(nodes, [pod("a")], pod(spread=[hard(node_affinity_policy="Ignore")], node_selector=sel)) == {"b"}
    terms = (NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("pool", "In", ("p",)),)),)
    assert allowed(nodes, [pod("a")], pod(spread=[hard()], required_node_affinity=terms)) == {"a", "b"}


def test_min_domains_forces_a_zero_minimum_while_domains_are_fewer():
    nodes = [node("a").labels({ZONE: "z1"}).cpu(8).info(), node("b").labels({ZONE: "z2"}).cpu(8).info()]
    placed = [pod("a"), pod("b")]
    c = hard(key=ZONE)
    assert allowed(nodes, placed, pod(spread=[c])) == {"a", "b"}  # 1 + 1 - 1 = 1
    # minDomains 3 > 2 domains: min is 0, so 1 + 1 - 0 = 2 > 1 everywhere
    assert allowed(nodes, placed, pod(spread=[hard(key=ZONE, min_domains=3)])) == set()
    assert allowed(nodes, placed, pod(spread=[hard(key=ZONE, min_domains=3, skew=2)])) == {"a", "b"}
    # 3 zones, minDomains 3: counts 1/1/0, min 0, the empty zone takes one
    nodes.append(node("c").labels({ZONE: "z3"}).cpu(8).info())
    assert allowed(nodes, placed, pod(spread=[hard(key=ZONE, min_domains=3)])) == {"c"}


def test_pinned_members_with_min_domains_may_only_add_up_to_max_skew_per_node():
    # differential seed 1000: maxSkew 1, minDomains 2 on hostname over 4 nodes; the planner put two
    # members on each node, but a pinned member's only domain is its node (nodeAffinityPolicy
    # Honor), fewer than minDomains, so kube-scheduler took min as 0 and refused the second one
    nodes = [node("a").cpu(8).info(), node("b").cpu(8).info(), node("c").cpu(8).info(), node("d").cpu(8).info()]
    c = hard(min_domains=2)
    placed = [pod("a"), pod("b"), pod("c"), pod("d")]
    t = Tracker(nodes)
    for i, p in enumerate(placed):
        t.add(p, i)
    assert t.reason(pod(spread=[c]), 0) == PINNED_SKEW
    assert allowed(nodes, placed, pod(spread=[hard(min_domains=2, skew=2)])) == {"a", "b", "c", "d"}
    # Ignore: the pin does not change the domains, the constraint as written decides
    assert allowed(nodes, placed, pod(spread=[hard(min_domains=2, node_affinity_policy="Ignore")])) == \
        {"a", "b", "c", "d"}
    ms = members(8, [c])
    v = decide1([node(n).cpu(16).info() for n in "abcd"], ms, 8)
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and "fits 4 of 8" in v.message
    assert PINNED_SKEW in v.message


def test_nodes_without_the_topology_key_are_refused_and_are_no_domain():
    nodes = [node("a").labels({ZONE: "z1"}).cpu(8).info(), node("b").cpu(8).info()]
    t = Tracker(nodes)
    incoming = pod(spread=[hard(key=ZONE)])
    assert t.reason(incoming, 1) == MISSING_LABEL
    assert t.reason(incoming, 0) is None
    t.add(pod("a"), 0)
    assert t.reason(incoming, 0) is None  # the only domain is z1: 1 + 1 - 1
    # every constraint's key must be on the node, also for another constraint's domains
    both = pod(spread=[hard(), hard(key=ZONE, skew=5)])
    assert allowed(nodes, [pod("a")], both) == {"a"}


def test_only_pods_of_the_namespace_that_match_and_are_not_terminating_count():
    nodes = [node("a").cpu(8).info(), node("b").cpu(8).info()]
    placed = [pod("a", ns="other"), pod("a", labels={"app": "y"}), pod("a", deleting=True)]
    assert allowed(nodes, placed, pod(spread=[hard()])) == {"a", "b"}
    assert allowed(nodes, [pod("a")], pod(spread=[hard()])) == {"b"}


def test_a_pod_outside_its_own_selector_does_not_add_itself():
    nodes = [node("a").cpu(8).info(), node("b").cpu(8).info()]
    incoming = pod(labels={"app": "y"}, spread=[hard()])
    assert allowed(nodes, [pod("a")], incoming) == {"a", "b"}  # 1 + 0 - 0 <= 1
    assert allowed(nodes, [pod("a"), pod("a")], incoming) == {"b"}


def test_match_label_keys_narrow_the_selector_to_the_pods_own_values():
    nodes = [node("a").cpu(8).info(), node("b").cpu(8).info()]
    old = [pod("a", labels={"app": "x", "rev": "1"}), pod("a", labels={"app": "x", "rev": "1"})]
    c = hard(match_label_keys=("rev",))
    assert allowed(nodes, old, pod(labels={"app": "x", "rev": "2"}, spread=[c])) == {"a", "b"}
    assert allowed(nodes, old, pod(labels={"app": "x", "rev": "1"}, spread=[c])) == {"b"}
    # a key the pod lacks is skipped
    assert allowed(nodes, old, pod(labels={"app": "x"}, spread=[c])) == {"b"}


def test_missing_selector_matches_nothing_and_empty_selector_counts_nothing():
    nodes = [node("a").cpu(8).info(), node("b").cpu(8).info()]
    placed = [pod("a"), pod("a"), pod("a")]
    assert allowed(nodes, placed, pod(spread=[hard(selector=None)])) == {"a", "b"}
    assert allowed(nodes, placed, pod(spread=[hard(selector=LabelSelector())])) == {"a", "b"}
    expr = LabelSelector(match_expressions=(LabelSelectorRequirement("app", "Exists"),))
    assert allowed(nodes, placed, pod(spread=[hard(selector=expr)])) == {"b"}


def test_tracker_pop_undoes_add():
    nodes = [node("a").cpu(8).info(), node("b").cpu(8).info()]
    t = Tracker(nodes)
    incoming = pod(spread=[hard()])
    assert t.allows(incoming, 0)
    t.add(pod("a"), 0)
    assert not t.allows(incoming, 0)
    t.pop()
    assert t.allows(incoming, 0) and t.allows(incoming, 1)


def test_parsing_keeps_only_do_not_schedule_with_upstream_defaults():
    raw = {"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": {"containers": [], "topologySpreadConstraints": [
        {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "x"}}, "matchLabelKeys": ["rev"]},
        {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}},
        {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3,
         "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"},
    ]}}
    p = pod_info(raw)
    assert p.topology_spread == (
        TopologySpreadConstraint(2, ZONE, LabelSelector((("app", "x"),)), 1, "Honor", "Ignore", ("rev",)),
        TopologySpreadConstraint(1, HOST, None, 3, "Ignore", "Honor", ()),
    )
    assert p.unplanned == ()


# -- the planner ---------------------------------------------------------------------------


def members(n, spread, cpu=1, ns="default", labels=None):
    lab = {POD_GROUP_LABEL: "g", "app": "x"}
    lab.update(labels or {})
    return [pod(labels=lab, spread=spread, cpu=cpu, ns=ns, created=float(i)) for i in range(n)]


def decide1(nodes, ms, min_member, bound=(), cfg=PlannerConfig()):
    g = GroupRequest("default", "g", min_member, 0.0, False, tuple(ms))
    return decide(nodes, list(bound), [g], [], 1000.0, cfg).verdicts[0]


def test_hard_spread_over_one_schedulable_and_one_cordoned_node_stays_gated():
    # issue 9 item 6: maxSkew 1 on hostname, DoNotSchedule, minMember 2; the cordoned node is a
    # domain with 0 pods, so kube-scheduler places one member and refuses the other
    nodes = [node("n1").cpu(8).info(), node("n2").cpu(8).taint(CORDON).unschedulable().info()]
    v = decide1(nodes, members(2, [hard()]), 2)
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY
    assert v.release == {}
    assert "fits 1 of 2" in v.message and "topology spread (maxSkew)" in v.message


def test_spread_members_are_released_pinned_one_per_domain():
    nodes = [node("n1").cpu(8).info(), node("n2").cpu(8).info(), node("n3").cpu(8).info()]
    ms = members(3, [hard()])
    v = decide1(nodes, ms, 3)
    assert v.outcome == Outcome.RELEASED
    assert sorted(v.release.values()) == ["n1", "n2", "n3"]


def test_spread_placement_revisits_nodes_as_the_minimum_rises():
    # 5 members, maxSkew 1 over 3 nodes: 2/2/1 exists; filling node by node would stop at 3
    nodes = [node("n1").cpu(2).info(), node("n2").cpu(2).info(), node("n3").cpu(2).info()]
    v = decide1(nodes, members(5, [hard()]), 5)
    assert v.outcome == Outcome.RELEASED
    counts = sorted(list(v.release.values()).count(n) for n in ("n1", "n2", "n3"))
    assert counts == [1, 2, 2]


def test_bound_pods_and_earlier_groups_count_for_the_skew():
    nodes = [node("n1").labels({ZONE: "z1"}).cpu(8).info(), node("n2").labels({ZONE: "z2"}).cpu(8).info()]
    bound = [pod("n1"), pod("n1")]
    # z1 has 2 matching pods: both members must go to z2 first (0+1-0, then 1+1-... min is 1 then)
    v = decide1(nodes, members(2, [hard(key=ZONE)]), 2, bound=bound)
    assert v.outcome == Outcome.RELEASED and set(v.release.values()) == {"n2"}
    v = decide1(nodes, members(3, [hard(key=ZONE)]), 3, bound=bound)
    assert v.outcome == Outcome.RELEASED
    assert list(v.release.values()).count("n2") == 2 and list(v.release.values()).count("n1") == 1


def test_schedule_anyway_never_blocks():
    nodes = [node("n1").cpu(8).info(), node("n2").cpu(8).taint(CORDON).unschedulable().info()]
    raw_spread = [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
                   "labelSelector": {"matchLabels": {"app": "x"}}}]
    ms = []
    for i in range(2):
        ms.append(pod_info({"metadata": {"name": f"m{i}", "namespace": "default", "uid": f"m{i}",
                                         "labels": {POD_GROUP_LABEL: "g", "app": "x"}},
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                                     "schedulingGates": [{"name": GATE}], "topologySpreadConstraints": raw_spread}}))
    v = decide1(nodes, ms, 2)
    assert v.outcome == Outcome.RELEASED and set(v.release.values()) == {"n1"}


# -- property: the planner against an independent Filter and brute force -------------------


def ref_allows(nodes, placed, p):
    """From-scratch Filter (podtopologyspread.Filter) for pod ``p`` given ``placed`` [(pod, node name)]."""
    by = {n.name: n for n in nodes}
    for c in p.topology_spread:
        extra = {k: p.labels[k] for k in c.match_label_keys if k in p.labels}

        def match(labels, c=c, extra=extra):
            if c.label_selector is None:
                return False
            return all(labels.get(k) == v for k, v in extra.items()) and c.label_selector.matches(labels)

        empty = c.label_selector is not None and not extra and not c.label_selector.match_labels \
            and not c.label_selector.match_expressions
        counts: dict[str, int] = {}
        for n in nodes:
            if not all(x.topology_key in n.labels for x in p.topology_spread):
                continue
            if c.node_affinity_policy == "Honor" and any(n.labels.get(k) != v for k, v in p.node_selector.items()):
                continue
            if c.node_taints_policy == "Honor" and any(
                    t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in p.tolerations)
                    for t in n.taints):
                continue
            d = n.labels[c.topology_key]
            counts.setdefault(d, 0)
            counts[d] += sum(1 for q, nn in placed if nn == n.name and q.namespace == p.namespace
                             and not q.deleting and not empty and match(q.labels))
        target = by[p.node_name_planned]
        if c.topology_key not in target.labels:
            return False
        mn = 0 if len(counts) < c.min_domains else min(counts.values(), default=2**31 - 1)
        skew = counts.get(target.labels[c.topology_key], 0) + (1 if match(p.labels) else 0) - mn
        if skew > c.max_skew:
            return False
        # pinned: kube-scheduler sees the planned node as the only domain (nodeAffinityPolicy Honor)
        if c.node_affinity_policy == "Honor" and c.min_domains > 1:
            here = sum(1 for q, nn in placed if nn == target.name and q.namespace == p.namespace
                       and not q.deleting and not empty and match(q.labels))
            if here + (1 if match(p.labels) else 0) > c.max_skew:
                return False
    return True


class _P:
    """A member with a tentative node, for ref_allows."""

    def __init__(self, m, node_name):
        self.__dict__.update(m.__dict__)
        self.node_name_planned = node_name


def node_ok(n, m):
    if n.unschedulable and not any(t.tolerates(CORDON) for t in m.tolerations):
        return False
    if any(n.labels.get(k) != v for k, v in m.node_selector.items()):
        return False
    return all(any(t.tolerates(x) for t in m.tolerations) for x in n.taints if x.effect in ("NoSchedule", "NoExecute"))


def sequence_exists(nodes, bound, plan):
    """Some order of ``plan`` [(member, node)] in which every member passes resources and the Filter."""
    free = {n.name: n.allocatable["cpu"] - sum(p.requests.get("cpu", 0) for p in bound if p.node_name == n.name)
            for n in nodes}
    by = {n.name: n for n in nodes}
    if any(not node_ok(by[nn], m) for m, nn in plan):
        return False
    for nn in free:
        if sum(m.requests.get("cpu", 0) for m, x in plan if x == nn) > free[nn]:
            return False
    base = [(p, p.node_name) for p in bound]
    for order in itertools.permutations(plan):
        placed = list(base)
        for m, nn in order:
            if not ref_allows(nodes, placed, _P(m, nn)):
                break
            placed.append((m, nn))
        else:
            return True
    return False


def any_release_exists(nodes, bound, ms, needed):
    for choice in itertools.product([None] + [n.name for n in nodes], repeat=len(ms)):
        plan = [(m, c) for m, c in zip(ms, choice) if c is not None]
        if len(plan) >= needed and sequence_exists(nodes, bound, plan):
            return True
    return False


@st.composite
def spread_scenarios(draw):
    zones = ["z1", "z2"]
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        extra = {"pool": "p"} if draw(st.booleans()) else {}
        zone, cpu = draw(st.sampled_from(zones + [None])), draw(st.integers(0, 3))
        taints = [CORDON] if draw(st.integers(0, 4)) == 0 else []
        b = node(f"n{i}").hostname(f"n{i}" if draw(st.integers(0, 6)) != 0 else None)
        for t in taints:
            b.taint(t)
        nodes.append(b.labels({ZONE: zone} if zone else {}).labels(extra).cpu(cpu).info())
    nodes = [NodeInfo(n.name, n.labels, n.allocatable, n.taints, unschedulable=bool(n.taints)) for n in nodes]
    bound = []
    for n in nodes:
        for _ in range(draw(st.integers(0, 2))):
            bound.append(pod(n.name, labels={"app": draw(st.sampled_from(["x", "y"])), "rev": "1"}, cpu=0,
                             deleting=draw(st.integers(0, 5)) == 0))
    c = TopologySpreadConstraint(
        max_skew=draw(st.integers(1, 2)), topology_key=draw(st.sampled_from([HOST, ZONE])),
        label_selector=draw(st.sampled_from([APP, None, LabelSelector()])),
        min_domains=draw(st.sampled_from([1, 1, 2, 3])),
        node_affinity_policy=draw(st.sampled_from(["Honor", "Ignore"])),
        node_taints_policy=draw(st.sampled_from(["Honor", "Ignore"])),
        match_label_keys=draw(st.sampled_from([(), ("rev",)])),
    )
    spread = [c]
    if draw(st.integers(0, 3)) == 0:
        spread.append(TopologySpreadConstraint(max_skew=1, topology_key=HOST, label_selector=APP))
    n = draw(st.integers(1, 3))
    sel = {"pool": "p"} if draw(st.integers(0, 3)) == 0 else {}
    tol = (Toleration(operator="Exists"),) if draw(st.integers(0, 3)) == 0 else ()
    rev = draw(st.sampled_from(["1", "2"]))
    ms = [pod(labels={POD_GROUP_LABEL: "g", "app": "x", "rev": rev}, spread=spread, cpu=1, created=float(i),
              node_selector=sel, tolerations=tol) for i in range(n)]
    return nodes, bound, ms, draw(st.integers(1, n))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spread_scenarios())
def test_planner_releases_only_placements_kube_scheduler_can_reach(sc):
    nodes, bound, ms, min_member = sc
    v = decide1(nodes, ms, min_member, bound=[p for p in bound])
    if v.outcome == Outcome.RELEASED:
        by_uid = {m.uid: m for m in ms}
        plan = [(by_uid[u], nn) for u, nn in v.release.items() if nn]
        assert len(plan) >= min_member
        assert sequence_exists(nodes, bound, plan), (v, plan)
    elif not any_release_exists(nodes, bound, ms, min_member):
        # or Unschedulable when members no node takes by their own constraints (nodeSelector, ...)
        # leave fewer than minMember (issue 21 item 9)
        assert v.outcome in (Outcome.INSUFFICIENT_CAPACITY, Outcome.EXCEEDS_CLUSTER_CAPACITY) or (
            v.outcome == Outcome.UNSCHEDULABLE
            and ("by its own constraints" in v.message or "by their own constraints" in v.message)), v


@pytest.mark.parametrize("reason", [SKEW, MISSING_LABEL])
def test_reasons_are_named_in_the_waiting_message(reason):
    if reason == SKEW:
        nodes = [node("n1").cpu(8).info(), node("n2").cpu(8).taint(CORDON).unschedulable().info()]
    else:
        nodes = [node("n1").labels({ZONE: "z1"}).cpu(1).info(), node("n2").cpu(8).info()]
    v = decide1(nodes, members(2, [hard(key=HOST if reason == SKEW else ZONE)]), 2)
    assert v.outcome != Outcome.RELEASED
    assert reason in v.message
