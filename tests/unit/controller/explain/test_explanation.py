"""``cogate explain``'s pure part: a snapshot in, the controller's own answer out (issue 31).

Each shape checks the wording against the controller's (the condition ``status.compute_all``
writes from ``planner.decide``'s verdict), what fits where, the first shortfall per node group, and
what preemption or more nodes would change."""

from __future__ import annotations

import json

import pytest

from cogate.controller.explain import report
from cogate.controller.explain.explanation import NO_MEMBER_NOTE, World, explain
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.planning import planner
from cogate.controller.status import status as status_mod
from tests.builders.objects import node, pod, podgroup

NOW = 1.7e9
NS = "team"


def members(n: int, cpu: float = 3, group: str = "g", **spec):
    out = []
    for i in range(n):
        b = pod(f"{group}-{i}").group(group).req(cpu=cpu, memory="500Mi").gated()
        if spec:
            b.spec(**spec)
        out.append(b.info())
    return tuple(out)


def world(nodes, ms, min_member, pods=(), group="g", budgets=()):
    g = podgroup(group).min_member(min_member).info()
    return World(tuple(nodes), tuple(pods), (g,), tuple(ms), (), tuple(budgets))


def controller_condition(w: World, name: str = "g"):
    """The Released condition the controller writes for this world (decide, then compute_all)."""
    from cogate.controller.status.inputs import build_group_requests, members_by_group
    requests = build_group_requests(w.groups, members_by_group(w.members))
    decision = planner.decide(w.nodes, w.pods, requests, (), NOW)
    v = next(v for v in decision.verdicts if v.name == name)
    g = next(g for g in w.groups if g.pg.metadata.name == name)
    st = status_mod.compute_all(g.pg, next(r for r in requests if r.name == name).members, v, NOW).status
    c = next(c for c in st.conditions if c.type == "Released")
    return c.status, c.reason, c.message


def ten_cpu(name: str = "n1"):
    return node(name).alloc(cpu=10, memory="8Gi").info()


def test_fits_minmember_3_of_the_readme_example():
    w = world([ten_cpu()], members(6), 3)
    e = explain(w, NS, "g", NOW)
    assert e.starts and e.phase == "Scheduling"
    assert (e.condition["status"], e.condition["reason"], e.condition["message"]) == controller_condition(w)
    assert e.condition["message"].startswith("fits 3 of 3: releasing 3 gated members")
    assert [n for _, n in e.placements] == ["n1"] * 3
    assert e.left_out == ("g-3", "g-4", "g-5")
    assert e.node_groups[0].shortfall == "cpu: needs 3, 1 free"
    assert e.preemption is None  # nothing to preempt for a group that starts


def test_fits_3_of_4_says_the_shortfall_and_does_not_start():
    w = world([ten_cpu()], members(6), 4)
    e = explain(w, NS, "g", NOW)
    assert not e.starts and e.phase == "Pending"
    assert (e.condition["status"], e.condition["reason"], e.condition["message"]) == controller_condition(w)
    assert "fits 3 of 4" in e.condition["message"]
    assert len(e.placements) == 3 and e.left_out[0] == "g-3"
    (ng,) = e.node_groups
    assert ng.nodes == ("n1",) and ng.room_for == 0 and ng.shortfall == "cpu: needs 3, 1 free"
    text = report.text(e)
    assert "would not start" in text and "Released=False InsufficientCapacity: fits 3 of 4" in text
    assert "first shortfall: cpu: needs 3, 1 free" in text


def test_taint_excludes_a_node_group_and_says_which():
    nodes = [ten_cpu("a1"), node("t1").alloc(cpu=10, memory="8Gi").taint("dedicated", "gpu").info(),
             node("t2").alloc(cpu=10, memory="8Gi").taint("dedicated", "gpu").info()]
    w = world(nodes, members(4), 4)
    e = explain(w, NS, "g", NOW)
    assert not e.starts
    assert (e.condition["status"], e.condition["reason"], e.condition["message"]) == controller_condition(w)
    assert "excluded by taint dedicated=gpu" in e.condition["message"]
    by_nodes = {ng.nodes: ng for ng in e.node_groups}
    assert by_nodes[("t1", "t2")].shortfall == "taint dedicated=gpu"
    assert "taints dedicated=gpu:NoSchedule" in by_nodes[("t1", "t2")].shape
    assert by_nodes[("a1",)].shortfall == "cpu: needs 3, 1 free"


def test_node_selector_no_node_matches_is_the_members_own_constraint():
    nodes = [node(f"n{i}").alloc(cpu=10, memory="8Gi").labels({"zone": "a"}).info() for i in range(2)]
    w = world(nodes, members(2, nodeSelector={"zone": "b"}), 2)
    e = explain(w, NS, "g", NOW)
    assert not e.starts and e.condition["reason"] == "Unschedulable"
    assert (e.condition["status"], e.condition["reason"], e.condition["message"]) == controller_condition(w)
    (ng,) = e.node_groups  # same shape: one group (the hostname label does not split it)
    assert ng.nodes == ("n0", "n1") and ng.shortfall == "nodeSelector"


def test_node_groups_split_by_labels_and_count_room():
    nodes = [node("a").alloc(cpu=10, memory="8Gi").labels({"zone": "a"}).info(),
             node("b").alloc(cpu=10, memory="8Gi").labels({"zone": "b"}).info()]
    w = world(nodes, members(8), 8)
    e = explain(w, NS, "g", NOW)
    assert "fits 6 of 8" in e.condition["message"]
    assert [(ng.nodes, "zone=" in ng.shape) for ng in e.node_groups] == [(("a",), True), (("b",), True)]
    assert all(ng.shortfall == "cpu: needs 3, 1 free" for ng in e.node_groups)


def test_preemption_names_the_victims_the_controller_would_take():
    low = pod("low").req(cpu=8).priority(0).on("n1").info()
    ms = tuple(pod(f"g-{i}").group("g").req(cpu=3).priority(100).gated().info() for i in range(2))
    w = world([ten_cpu()], ms, 2, pods=[low])
    e = explain(w, NS, "g", NOW)
    assert not e.starts and e.condition["reason"] == "InsufficientCapacity"
    assert e.preemption is not None and e.preemption.starts
    assert e.preemption.victims == ("team/low on n1",)
    assert "with preemption: preemption: it would start" in report.text(e)
    off = explain(w, NS, "g", NOW, preemption=False)
    assert off.preemption is None
    assert explain(w, NS, "g", NOW, ReconcilerConfig(preemption=False)).preemption is None


def test_preemption_says_why_not_when_nothing_lower_runs():
    high = pod("high").req(cpu=8).priority(1000).on("n1").info()
    ms = tuple(pod(f"g-{i}").group("g").req(cpu=3).priority(100).gated().info() for i in range(2))
    e = explain(world([ten_cpu()], ms, 2, pods=[high]), NS, "g", NOW)
    assert e.preemption is not None and not e.preemption.starts
    assert e.preemption.reason == "NoLowerPriorityPods" and e.preemption.victims == ()


def test_more_nodes_would_make_room():
    w = world([ten_cpu()], members(9), 9)
    extra = [node(f"new-{i}").alloc(cpu=10, memory="8Gi").info() for i in range(2)]
    e = explain(w, NS, "g", NOW, extra_nodes=extra)
    assert not e.starts
    assert e.add_nodes is not None and e.add_nodes.starts and e.add_nodes.reason == "Released"
    assert e.add_nodes.message.startswith("fits 9 of 9") and e.add_nodes.change == "2 more nodes (new-0, new-1)"
    one = explain(w, NS, "g", NOW, extra_nodes=extra[:1])
    assert one.add_nodes is not None and not one.add_nodes.starts and "fits 6 of 9" in one.add_nodes.message


def test_more_nodes_than_minmember_needs_say_all_fit_and_the_room():
    """6 members of 3 CPU, minMember 4, one node of 10 CPU: with 2 more nodes all 6 fit, said
    "fits all 4 (room for 6)", never "fits 6 of 4" (issue 29), in the report as the controller writes it."""
    w = world([ten_cpu()], members(6), 4)
    extra = [node(f"new-{i}").alloc(cpu=10, memory="8Gi").info() for i in range(2)]
    e = explain(w, NS, "g", NOW, extra_nodes=extra)
    assert e.add_nodes is not None and e.add_nodes.starts
    assert e.add_nodes.message.startswith("fits all 4 (room for 6): releasing 6 gated members"), e.add_nodes.message
    assert "fits all 4 (room for 6)" in report.text(e) and "of 4" not in report.text(e).split("with:")[1]
    bigger = World(w.nodes + tuple(extra), w.pods, w.groups, w.members, (), ())
    assert controller_condition(bigger)[2].startswith("fits all 4 (room for 6): releasing 6 gated members")


def test_a_running_group_starts():
    ms = tuple(pod(f"g-{i}").group("g").req(cpu=3).on("n1").info() for i in range(3))
    g = podgroup("g").min_member(3).status(phase="Running", scheduleStartTime="2024-01-01T00:00:00Z",
                                           conditions=[{"type": "Released", "status": "True", "reason": "Released",
                                                        "message": "fits 3 of 3", "lastTransitionTime":
                                                        "2024-01-01T00:00:00Z"}]).info()
    e = explain(World((ten_cpu(),), ms, (g,), ms), NS, "g", NOW)
    assert e.starts and e.condition["status"] == "True"
    assert sorted(e.placements) == [(f"g-{i}", "n1") for i in range(3)]


def released_status(phase: str):
    return dict(phase=phase, scheduleStartTime="2024-01-01T00:00:00Z",
                conditions=[{"type": "Released", "status": "True", "reason": "Released", "message": "fits 3 of 3",
                             "lastTransitionTime": "2024-01-01T00:00:00Z"}])


@pytest.mark.parametrize("phase", ["Scheduling", "Scheduled", "Running", "Finished"])
def test_a_released_group_whose_members_are_all_gone_says_released_not_would_start(phase):
    """A new user's finding (issue 29): the verdict line said "would start" for a released group whose
    ReplicaSet was deleted. It says "released", notes that the next members are decided again as a
    whole, and lists no node groups (no member is left out to measure room for)."""
    g = podgroup("g").min_member(3).status(**released_status(phase)).info()
    e = explain(World((ten_cpu(),), (), (g,), ()), NS, "g", NOW)
    assert e.released and e.starts  # exit 0, as for any released group
    assert e.notes == (NO_MEMBER_NOTE,) and e.node_groups == () and e.placements == ()
    out = report.text(e)
    assert out.splitlines()[0] == f"PodGroup team/g (minMember 3): released (phase {e.phase})"
    assert "would start" not in out and "room for 0" not in out and f"note: {NO_MEMBER_NOTE}" in out
    assert json.loads(json.dumps(e.to_dict()))["released"] is True


def test_would_start_is_said_only_before_the_release_and_released_after_it():
    """The README example before the release (this pass releases it: "would start") and after it (the
    status records it and 3 members run: "released"); a group that fits whole lists no node groups."""
    before = explain(world([ten_cpu()], members(3), 3), NS, "g", NOW)
    assert before.starts and not before.released and before.notes == () and before.node_groups == ()
    assert report.text(before).splitlines()[0] == "PodGroup team/g (minMember 3): would start (phase Scheduling)"
    ms = tuple(pod(f"g-{i}").group("g").req(cpu=3).on("n1").phase("Running").info() for i in range(3))
    g = podgroup("g").min_member(3).status(**released_status("Running")).info()
    after = explain(World((ten_cpu(),), ms, (g,), ms), NS, "g", NOW)
    assert after.released and after.notes == ()
    assert report.text(after).splitlines()[0] == "PodGroup team/g (minMember 3): released (phase Running)"
    waiting = explain(world([ten_cpu()], members(4), 4), NS, "g", NOW)
    assert not waiting.starts and not waiting.released and waiting.node_groups
    assert report.text(waiting).splitlines()[0] == "PodGroup team/g (minMember 4): would not start (phase Pending)"


def test_unknown_group_raises_lookup_error():
    with pytest.raises(LookupError, match="team/nope"):
        explain(world([ten_cpu()], members(1), 1), NS, "nope", NOW)


def test_dict_is_json_and_other_groups_count():
    other = tuple(pod(f"o-{i}").group("o").req(cpu=3).on("n1").info() for i in range(2))
    og = podgroup("o").min_member(2).info()
    ms = members(2)
    w = World((ten_cpu(),), other, (podgroup("g").min_member(2).info(), og), ms + other)
    d = json.loads(json.dumps(explain(w, NS, "g", NOW).to_dict()))
    assert d["podGroup"] == "team/g" and d["minMember"] == 2
    assert d["starts"] is False and "fits 1 of 2" in d["condition"]["message"]
    assert d["nodeGroups"][0]["shortfall"] == "cpu: needs 3, 1 free"


def test_preemption_keeps_out_of_an_exclusive_gangs_rack_as_the_controller_does():
    """Rack p1 runs the exclusive gang ex (priority 0), rack p2 pods of priority 50; a gang of priority
    100 would take ex's members by priority alone, but the controller keeps it out of ex's rack
    (docs/topology.md, "Exclusive"): explain names p2's pods."""
    from cogate.controller.topology import constraints as t

    nodes = [node(n).labels(rack=r).alloc(cpu=4, memory="8Gi").info()
             for n, r in (("p1-0", "p1"), ("p1-1", "p1"), ("p2-0", "p2"), ("p2-1", "p2"))]
    ex = tuple(pod(f"ex-{i}").group("ex").req(cpu=4).on(f"p1-{i}").info() for i in range(2))
    mid = [pod(f"mid-{i}").req(cpu=4).priority(50).on(f"p2-{i}").info() for i in range(2)]
    ms = tuple(pod(f"g-{i}").group("g").req(cpu=4).priority(100).gated().info() for i in range(2))
    exg = podgroup("ex").min_member(2).annotations({t.REQUIRED: "rack", t.EXCLUSIVE: "true"}).info()
    w = World(tuple(nodes), (*ex, *mid), (podgroup("g").min_member(2).info(), exg), (*ms, *ex), (), ())
    e = explain(w, NS, "g", NOW)
    assert e.preemption is not None and e.preemption.starts, e.preemption
    assert set(e.preemption.victims) == {"team/mid-0 on p2-0", "team/mid-1 on p2-1"}


@pytest.mark.parametrize("labelled", [False, True])
def test_a_topology_gangs_best_attempt_stays_in_the_domain_it_may_use(labelled):
    """``topology.cogate.dev/required: rack`` (found by a new user): with no node carrying the rack
    label, explain said "fits 0 of 2" beside "fits where (2): g-0 -> n1, g-1 -> n1". The best attempt
    now stays where the gang may go, as its preemption and ProvisioningRequests do: nowhere without
    the label; with two racks that each hold one member now, inside the closest rack (ra: empty, it
    holds the gang; rb never does)."""
    from cogate.controller.topology import constraints as t

    if labelled:
        nodes = [node(n).labels(rack=r).alloc(cpu=c, memory="8Gi").info()
                 for n, r, c in (("a-0", "ra", 4), ("b-0", "rb", 3))]
    else:
        nodes = [ten_cpu()]
    ms = members(2, cpu=2)
    g = podgroup("g").min_member(2).annotations({t.REQUIRED: "rack"}).info()
    nodes_taken = (pod("other").req(cpu=2).on("a-0").info(),) if labelled else ()
    w = World(tuple(nodes), nodes_taken, (g,), ms, (), ())
    e = explain(w, NS, "g", NOW)
    assert not e.starts and "fits 1 of 2" in e.condition["message"] if labelled else "fits 0 of 2" in e.condition["message"]
    assert (e.condition["status"], e.condition["reason"], e.condition["message"]) == controller_condition(w)
    if labelled:
        assert e.placements == (("g-0", "a-0"),), e.placements
    else:
        assert e.placements == () and e.left_out == ("g-0", "g-1")
        assert "fits where" not in report.text(e)
