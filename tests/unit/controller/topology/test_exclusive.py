"""Exclusive gangs (issue 32, ``topology.cogate.dev/exclusive``): the pure rule
(controller/topology/exclusive.py) and the planner with it (controller/planning/exclusion.py), each
rule with several inputs, and a property test of the choice against a brute force over small trees."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.controller.planning.fenced import fence_requests
from cogate.controller.planning.planner import Outcome, decide
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.topology import constraints as t
from cogate.controller.topology.constraints import HOSTNAME_LABEL as HOST
from cogate.controller.topology.constraints import Constraint, TopologyError
from cogate.controller.topology.exclusive import Claims, claims, refusal
from tests.builders import NS, group_request, node, pod

LEVELS = ("block", "rack", HOST)
RACK = Constraint(LEVELS, required=1)
EXCL = Constraint(LEVELS, required=1, exclusive=True)


def cluster(layout, cpu=4):
    """``{"b1": {"r1": 2}}`` -> nodes ``<rack>-<i>`` labelled block and rack, ``cpu`` cores each."""
    return [node(f"{rack}-{i}").labels(block=block, rack=rack).cpu(cpu).info()
            for block, racks in layout.items() for rack, n in racks.items() for i in range(n)]


def gated(n, group, cpu=1, priority=0):
    return [pod(f"{group}-{i}").group(group).req(cpu=cpu).priority(priority).gated().info() for i in range(n)]


def running(group, *nodes, cpu=1, start=0):
    return [pod(f"{group}-{start + i}").group(group).req(cpu=cpu).on(n).info() for i, n in enumerate(nodes)]


def gang(ms, c=None, name=None, **kw):
    g = group_request(ms, name=name or ms[0].group, **kw)
    return dataclasses.replace(g, topology=c) if c is not None else g


def rack_of(nodes, name):
    return next(n.labels["rack"] for n in nodes if n.name == name)


def racks(verdict, nodes):
    return {rack_of(nodes, n) for n in verdict.release.values() if n}


# -- the pure rule


def test_claims_hold_the_whole_required_domain_of_an_exclusive_gang_only():
    domains = {"a1": ("a1", "a2"), "a2": ("a1", "a2")}
    c = claims({("ns", "e"): ["a1"], ("ns", "o"): ["b1"]}, {("ns", "e"): domains})
    assert c.placed == {"a1": {("ns", "e")}, "b1": {("ns", "o")}}
    assert c.held == {"a1": {("ns", "e")}, "a2": {("ns", "e")}}
    assert c.held_by_others(("ns", "e")) == {}
    assert c.held_by_others(("ns", "o")) == {"a1": ("ns", "e"), "a2": ("ns", "e")}
    # a node in no domain of the level holds only itself
    assert claims({("ns", "e"): ["x"]}, {("ns", "e"): domains}).held == {"x": {("ns", "e")}}


@pytest.mark.parametrize("nodes, expect", [
    (("a1", "a2"), "holds members of PodGroup ns/o"),       # another gang's member placed there
    (("c1",), "held by exclusive PodGroup ns/x"),          # inside another exclusive gang's hold
    (("d1",), ""),                                         # free
    (("e1",), ""),                                         # only its own member
])
def test_refusal_names_the_gang_that_claims_the_domain(nodes, expect):
    c = Claims(placed={"a2": {("ns", "o"), ("ns", "p")}, "c0": {("ns", "x")}, "e1": {("ns", "e")}},
               held={"c0": {("ns", "x")}, "c1": {("ns", "x")}, "e1": {("ns", "e")}})
    assert refusal(("ns", "e"), nodes, c) == expect


def test_exclusive_needs_a_required_level():
    with pytest.raises(TopologyError, match="exclusive gang needs"):
        t.parse({t.PREFERRED: "rack", t.EXCLUSIVE: "true"}, [], LEVELS)
    assert t.parse({t.REQUIRED: "rack", t.EXCLUSIVE: "true"}, [], LEVELS) == EXCL


# -- placed only where no other gang is


def test_exclusive_gang_avoids_a_rack_holding_another_gangs_member():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    other = gang(running("o", "r1-0"))
    # best fit alone would be r1 (7 free, 3 left over); r1 holds a member of o
    for c, expect in ((RACK, "r1"), (EXCL, "r2")):
        d = decide(nodes, other.members, [other, gang(gated(4, "e"), c)], [], 0.0)
        v = d.verdicts[1]
        assert v.outcome == Outcome.RELEASED and racks(v, nodes) == {expect}, v.message


def test_pods_that_are_no_gang_member_do_not_count():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    plain = pod("web").req(cpu=1).on("r1-0").info()
    v = decide(nodes, [plain], [gang(gated(4, "e"), EXCL)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.RELEASED and racks(v, nodes) == {"r1"}


def test_every_rack_claimed_waits_with_insufficient_capacity_naming_each():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    o1, o2 = gang(running("o", "r1-0")), gang(running("p", "r2-1"))
    v = decide(nodes, [*o1.members, *o2.members], [o1, o2, gang(gated(4, "e"), EXCL)], [], 0.0).verdicts[2]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY and v.release == {}
    assert f"r1 refused (holds members of PodGroup {NS}/o)" in v.message, v.message
    assert f"r2 refused (holds members of PodGroup {NS}/p)" in v.message
    assert v.domain == ()  # no closest domain: preemption and new nodes look at no refused one


def test_pinned_and_reserved_members_of_other_gangs_count():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    pinned = pod("o-0").group("o").req(cpu=1).pinned("r1-0").info()  # released, waiting to bind
    other = gang([pinned], released=True)
    v = decide(nodes, [], [other, gang(gated(4, "e"), EXCL)], [], 0.0).verdicts[1]
    assert racks(v, nodes) == {"r2"}, v.message


def test_preferred_rack_inside_an_exclusive_block_refuses_the_whole_block():
    c = Constraint(LEVELS, required=0, preferred=1, exclusive=True)
    nodes = cluster({"b1": {"r1": 2, "r2": 2}, "b2": {"r3": 2, "r4": 2}})
    other = gang(running("o", "r2-0"))
    v = decide(nodes, other.members, [other, gang(gated(4, "e"), c)], [], 0.0).verdicts[1]
    assert v.outcome == Outcome.RELEASED and racks(v, nodes) <= {"r3", "r4"}, v.message


def test_two_exclusive_gangs_in_one_pass_never_share_a_rack():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    e1, e2 = gang(gated(4, "e1"), EXCL, created=1.0), gang(gated(4, "e2"), EXCL, created=2.0)
    v1, v2 = decide(nodes, [], [e1, e2], [], 0.0).verdicts
    assert v1.outcome == v2.outcome == Outcome.RELEASED
    assert racks(v1, nodes) == {"r1"} and racks(v2, nodes) == {"r2"}
    # without exclusive both fit rack r1 (8 cores)
    v1, v2 = decide(nodes, [], [gang(gated(4, "e1"), RACK, created=1.0), gang(gated(4, "e2"), RACK, created=2.0)],
                    [], 0.0).verdicts
    assert racks(v1, nodes) == racks(v2, nodes) == {"r1"}


# -- kept while it runs


def test_a_later_gang_is_kept_out_of_the_exclusive_gangs_rack():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    e = gang(running("e", "r1-0", "r1-1"), EXCL, released=True)
    # 8 fit r2 alone: go there; 9 need r1 as well: wait, saying why
    v = decide(nodes, e.members, [e, gang(gated(8, "g"))], [], 0.0).verdicts[1]
    assert v.outcome == Outcome.RELEASED and racks(v, nodes) == {"r2"}
    d = decide(nodes, e.members, [e, gang(gated(9, "g"))], [], 0.0)
    v = d.verdicts[1]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY, v.message
    assert f"2 nodes held by exclusive PodGroup {NS}/e" in v.message
    assert d.excluded[(NS, "g")] == frozenset({"r1-0", "r1-1"})
    # without the exclusive gang's constraint, 9 fit across both racks
    plain = dataclasses.replace(e, topology=RACK)
    assert decide(nodes, e.members, [plain, gang(gated(9, "g"))], [], 0.0).verdicts[1].outcome == Outcome.RELEASED


def test_a_topology_gang_is_refused_a_held_rack_by_name():
    nodes = cluster({"b1": {"r1": 2, "r2": 1}})
    e = gang(running("e", "r1-0"), EXCL, released=True)
    v = decide(nodes, e.members, [e, gang(gated(6, "g"), RACK)], [], 0.0).verdicts[1]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY
    assert f"r1 refused (held by exclusive PodGroup {NS}/e)" in v.message, v.message


def test_new_members_of_other_released_gangs_stay_out():
    nodes = cluster({"b1": {"r1": 1, "r2": 1}})
    e = gang(running("e", "r1-0"), EXCL, released=True)
    g = gang([*running("g", "r2-0", cpu=4, start=5), *gated(1, "g", cpu=1)], released=True, min_member=1)
    v = decide(nodes, e.members + g.members[:1], [e, g], [], 0.0).verdicts[1]
    assert v.release == {} and "held by exclusive" in v.message, v.message


def test_its_own_replacement_stays_in_its_rack():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    e = gang([*running("e", "r1-0", start=5), *gated(1, "e")], EXCL, released=True, min_member=1)
    v = decide(nodes, e.members[:1], [e], [], 0.0).verdicts[0]
    assert racks(v, nodes) == {"r1"}, v.message


def test_a_finished_or_deleted_exclusive_gang_frees_its_rack():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    done = [pod(f"e-{i}").group("e").req(cpu=1).on(n, "Succeeded").info() for i, n in enumerate(("r1-0", "r1-1"))]
    for members in (done, []):
        groups = [gang(members, EXCL, name="e", released=True)] if members else []
        v = decide(nodes, [], [*groups, gang(gated(9, "g"))], [], 0.0).verdicts[-1]
        assert v.outcome == Outcome.RELEASED, v.message


def test_the_incremental_planner_sees_a_hold_go():
    # 5-core nodes, members of 3 cores: r2 has the cores for 3 (10) but takes 2: a wait whose totals are
    # not short, which the incremental planner keeps while nothing changes
    nodes = cluster({"b1": {"r1": 2, "r2": 2}}, cpu=5)
    g = gang(gated(3, "g", cpu=3))
    e = gang(running("e", "r1-0"), EXCL, released=True)
    state = PlanningState.build(nodes, e.members)
    now = g.members[0].created + 1.0  # complete just now: not starving, so its waiting verdict may be kept
    assert state.decide([e, g], [], now).verdicts[1].outcome == Outcome.INSUFFICIENT_CAPACITY
    assert state.decide([e, g], [], now + 1).verdicts[1].outcome == Outcome.INSUFFICIENT_CAPACITY
    assert state.last_kept == 1  # kept: nothing changed
    # the same room and the same g: only the hold went (its PodGroup no longer exclusive); g's kept
    # verdict must not be reused
    assert state.decide([dataclasses.replace(e, topology=RACK), g], [], now + 2).verdicts[1].outcome \
        == Outcome.RELEASED


# -- preemption and new nodes


def test_fence_requests_keep_preemption_and_new_nodes_off_claimed_racks():
    nodes = cluster({"b1": {"r1": 2, "r2": 2}, "b2": {"r3": 1}})
    other = gang(running("o", "r1-0"))
    e = gang(gated(12, "e", priority=10), EXCL)
    d = decide(nodes, other.members, [other, e], [], 0.0)
    v = d.verdicts[1]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY or v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY
    # r1 holds o's member: not a place to preempt in or ask nodes for
    assert {"r1-0", "r1-1"} <= d.excluded[(NS, "e")]
    assert not ({"r2-0", "r2-1", "r3-0"} & d.excluded[(NS, "e")])
    fenced = fence_requests(d.verdicts, {(NS, "e"): e}, d.excluded)[(NS, "e")]
    term = fenced.members[0].required_node_affinity[0]
    assert any(r.key == "metadata.name" and r.operator == "NotIn" and "r1-0" in r.values for r in term.match_fields)


def test_without_an_exclusive_gang_nothing_is_excluded():
    nodes = cluster({"b1": {"r1": 2}})
    other = gang(running("o", "r1-0"))
    assert decide(nodes, other.members, [other, gang(gated(9, "g"), RACK)], [], 0.0).excluded == {}


# -- property: the choice against a brute force


@st.composite
def scenes(draw):
    layout, others, k = {}, [], 0
    for b in range(draw(st.integers(1, 2))):
        layout[f"b{b}"] = {f"r{b}{r}": draw(st.integers(1, 2)) for r in range(draw(st.integers(1, 3)))}
    names = [f"{rack}-{i}" for racks_ in layout.values() for rack, n in racks_.items() for i in range(n)]
    for name in names:
        for _ in range(draw(st.integers(0, 2))):
            others.append((f"o{k}", name, draw(st.booleans())))  # (gang or plain pod, node, is a gang member)
            k += 1
    return layout, others, draw(st.integers(1, 8))


@settings(max_examples=150, deadline=None)
@given(scenes())
def test_choice_matches_brute_force(scene):
    layout, others, size = scene
    nodes = cluster(layout, cpu=3)
    bound, groups = [], []
    for name, n, member in others:
        b = pod(name).req(cpu=1).on(n)
        if member:
            b = b.group(name)
        bound.append(b.info())
        if member:
            groups.append(gang([bound[-1]]))
    e = gang(gated(size, "e"), EXCL)
    v = decide(nodes, bound, [*groups, e], [], 0.0).verdicts[-1]
    # brute force: racks with no gang member, each holding size 1-core members in its free cores
    free = {}
    for n in nodes:
        used = sum(1 for p in bound if p.node_name == n.name)
        rack = n.labels["rack"]
        taken = any(p.node_name == n.name and p.group for p in bound)
        cores, bad = free.get(rack, (0, False))
        free[rack] = (cores + 3 - used, bad or taken)
    fitting = {r: cores - size for r, (cores, bad) in free.items() if not bad and cores >= size}
    if not fitting:
        assert v.outcome != Outcome.RELEASED, v.message
        return
    assert v.outcome == Outcome.RELEASED, v.message
    (chosen,) = racks(v, nodes)
    assert chosen in fitting
    assert fitting[chosen] == min(fitting.values())  # best fit among the free racks


def test_victims_are_chosen_only_in_a_rack_free_of_other_gangs():
    """Racks r1 and r2 (2 nodes of 4 cores), full: r1 of a gang o (priority 0), r2 of plain pods
    (priority 50), so by priority alone victims would be o's. A high-priority exclusive gang of 2 x 4 cores preempts the plain pods of r2, never o's members
    (it would still hold r1 afterwards); a high-priority plain gang may not preempt inside the rack of a
    running exclusive gang x (it could not be placed there while x runs)."""
    from cogate.controller.preemption.victims import Gang, Preemption, select_victims

    nodes = cluster({"b1": {"r1": 2, "r2": 2}})
    o = gang(running("o", "r1-0", "r1-1", cpu=4))
    plain = [pod(f"low-{n}").req(cpu=4).priority(50).on(n).info() for n in ("r2-0", "r2-1")]
    e = gang(gated(2, "e", cpu=4, priority=100), EXCL)
    d = decide(nodes, [*o.members, *plain], [o, e], [], 0.0)
    v = d.verdicts[1]
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY and v.domain == (("block", "b1"), ("rack", "r2")), v.message
    fenced = fence_requests(d.verdicts, {(NS, "e"): e}, d.excluded)[(NS, "e")]
    got = select_victims(fenced, nodes, [*o.members, *plain], [], [], [Gang(NS, "o", 2)])
    assert isinstance(got, Preemption) and {x.pod.name for x in got.victims} == {"low-r2-0", "low-r2-1"}
    # the exclusive gang x runs in r1 (low priority): a high-priority gang of 2 x 4 cores may use r2 only
    x = gang(running("x", "r1-0", "r1-1", cpu=4), EXCL, released=True)
    g = gang(gated(2, "g", cpu=4, priority=100))
    d = decide(nodes, [*x.members, *plain], [x, g], [], 0.0)
    assert d.verdicts[1].outcome == Outcome.INSUFFICIENT_CAPACITY
    fenced = fence_requests(d.verdicts, {(NS, "g"): g}, d.excluded)[(NS, "g")]
    got = select_victims(fenced, nodes, [*x.members, *plain], [], [], [Gang(NS, "x", 2)])
    assert isinstance(got, Preemption) and {x.node for x in got.victims} == {"r2-0", "r2-1"}
    # unfenced, it would take x (lower priority) whole in r1: the fence is what keeps it out
    got = select_victims(g, nodes, [*x.members, *plain], [], [], [Gang(NS, "x", 2)])
    assert isinstance(got, Preemption) and {x.node for x in got.victims} == {"r1-0", "r1-1"}


def test_a_set_rolled_back_leaves_no_claim_behind():
    """A set [a, b]: exclusive a is planned into r2 (best fit), then b never fits and the set is rolled
    back; exclusive c, planned after, takes r2 (best fit), not kept off it by a release that never was."""
    from cogate.controller.model import groupsets as gs

    nodes = cluster({"b1": {"r1": 2, "r2": 1}})
    spec = gs.SetSpec(((NS, "a"), (NS, "b")), 2, gs.SET_ANNOTATION)
    a = dataclasses.replace(gang(gated(4, "a"), EXCL, created=0.0), group_set=spec)
    b = dataclasses.replace(gang(gated(1, "b", cpu=64), created=1.0), group_set=spec)
    c = gang(gated(4, "c"), EXCL, created=2.0)
    va, vb, vc = decide(nodes, [], [a, b, c], [], 0.0).verdicts
    assert va.release == vb.release == {}, va.message
    assert vc.outcome == Outcome.RELEASED and racks(vc, nodes) == {"r2"}, vc.message
