"""Preemptions side by side in the Preempting room (issue 37 kinds 1 to 4): the reconciler with the
real planner against the fake API (:class:`tests.builders.World`).

Kind 1: independent gangs preempt at once, a stuck victim holds up only its own gang; kind 2: a
higher priority takes over a lower preemption's room; kind 3: new members of a standing release
preempt; kind 4: a preemption whose node is cordoned or tainted ends at once and is chosen again.
The pure rules: tests/unit/controller/preemption/test_coordination.py and test_coordination_props.py.
"""

from __future__ import annotations

from tests.builders import GATE, T0, World, pod, raw_pg, ready_node


def two_node_world(gangs=("a", "b"), cpu="4", **kw) -> World:
    """Nodes n1, n2 (4 cpu), each full of two low-priority pods of 2 cpu (``low-<node>-<k>``); a
    gang per name in ``gangs`` (minMember 2, priority 1000) of two gated members of 2 cpu."""
    nodes = [ready_node(n, cpu) for n in ("n1", "n2")]
    pods = [pod(f"low-{n}-{k}").req(cpu="2").on(n).priority(100).raw() for n in ("n1", "n2") for k in range(2)]
    pods += [pod(f"{g}-{i}").req(cpu="2").group(g).gated().priority(1000).raw() for g in gangs for i in range(2)]
    return World(pods, [raw_pg(g, 2) for g in gangs], nodes=nodes, **kw)


def record(w: World, g: str):
    return w.rec.memory.recall(f"pg-uid-{g}").preemption.in_flight


def test_independent_gangs_preempt_at_once_on_other_nodes():
    w = two_node_world()
    w.cluster.keep_deleted = True  # victims terminate slowly
    w.run()
    ra, rb = record(w, "a"), record(w, "b")
    assert ra is not None and rb is not None  # both started in one pass
    assert {v.node for v in ra.victims} != {v.node for v in rb.victims}
    assert not ({v.uid for v in ra.victims} & {v.uid for v in rb.victims})
    assert sorted(w.cluster.deleted) == ["low-n1-0", "low-n1-1", "low-n2-0", "low-n2-1"]
    assert w.metric("cogate_controller_preemptions_total", result="Started") == 2
    for g in ("a", "b"):
        assert w.condition(g)["status"] == "True"


def test_a_stuck_victim_holds_up_only_its_own_gang():
    w = two_node_world()
    w.cluster.keep_deleted = True
    w.run()
    on = {record(w, g).victims[0].node: g for g in ("a", "b")}
    stuck_gang = on["n1"]
    free_gang = on["n2"]
    for k in range(2):  # n2's victims terminate; n1's never do
        del w.cluster.pods[f"low-n2-{k}"]
    w.run(1.0)
    w.run(1.0)
    assert not w.gated(f"{free_gang}-0") and not w.gated(f"{free_gang}-1")
    assert w.condition(free_gang)["reason"] == "Placed"
    assert w.gated(f"{stuck_gang}-0") and w.condition(stuck_gang)["status"] == "True"
    rec = record(w, stuck_gang)
    w.run(rec.deadline - w.now)
    assert w.condition(stuck_gang)["reason"] == "VictimsStuck"


def test_a_third_gang_never_shares_the_victims_or_the_room_of_the_two_in_flight():
    w = two_node_world(gangs=("a", "b", "c"))
    w.cluster.keep_deleted = True
    w.run()
    assert record(w, "a") is not None and record(w, "b") is not None
    assert record(w, "c") is None  # no room left: both nodes' room is held
    assert sorted(w.cluster.deleted) == ["low-n1-0", "low-n1-1", "low-n2-0", "low-n2-1"]
    w.run(1.0)
    assert record(w, "c") is None and w.gated("c-0")
    assert w.condition("c")["status"] == "False"


def test_a_higher_priority_gang_takes_over_a_lower_preemptions_room():
    pods = [pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
            pod("low-b").req(cpu="2").on("n1").priority(100).raw(),
            pod("mid-0").req(cpu="2").group("mid").gated().priority(500).raw(),
            pod("mid-1").req(cpu="2").group("mid").gated().priority(500).raw()]
    w = World(pods, [raw_pg("mid", 2)])
    w.cluster.keep_deleted = True
    w.run()
    assert record(w, "mid") is not None
    w.run(1.0)
    w.cluster.pods.update({f"top-{i}": pod(f"top-{i}").req(cpu="2").group("top").gated().priority(1000).raw()
                           for i in range(2)})
    w.cluster.pgs["top"] = raw_pg("top", 2)
    w.cluster.calls.clear()
    w.run(1.0)
    assert record(w, "mid") is None
    top = record(w, "top")
    assert top is not None and sorted(v.name for v in top.victims) == ["low-a", "low-b"]  # inherited
    assert "taking over the room PodGroup team/mid (priority 500) was freeing" in top.message
    c = w.condition("mid")
    assert (c["status"], c["reason"]) == ("False", "Superseded") and "PodGroup team/top" in c["message"]
    assert all("nominatedNodeName" not in w.cluster.pods[m]["status"] for m in ("mid-0", "mid-1"))
    assert all(w.cluster.pods[m]["status"]["nominatedNodeName"] == "n1" for m in ("top-0", "top-1"))
    assert not [c for c in w.cluster.calls if c[0] in ("mark", "delete")]  # no new victim: they terminate already
    w.run(1.0)  # mid selects again (top's room is held): the condition still names who took it
    c = w.condition("mid")
    assert c["reason"] == "NoLowerPriorityPods" and "(earlier: PodGroup team/top" in c["message"], c
    for v in ("low-a", "low-b"):
        del w.cluster.pods[v]
    w.run(1.0)
    assert not w.gated("top-0") and not w.gated("top-1")
    assert w.gated("mid-0") and w.gated("mid-1")  # nothing of the lower gang is released there
    assert w.condition("top")["reason"] == "Placed"


def test_an_equal_priority_gang_does_not_take_over():
    pods = [pod("low-a").req(cpu="2").on("n1").priority(100).raw(),
            pod("low-b").req(cpu="2").on("n1").priority(100).raw(),
            pod("a-0").req(cpu="2").group("a").gated().priority(500).raw(),
            pod("a-1").req(cpu="2").group("a").gated().priority(500).raw()]
    w = World(pods, [raw_pg("a", 2)])
    w.cluster.keep_deleted = True
    w.run()
    w.cluster.pods.update({f"b-{i}": pod(f"b-{i}").req(cpu="2").group("b").gated().priority(500).raw()
                           for i in range(2)})
    w.cluster.pgs["b"] = raw_pg("b", 2)
    w.run(1.0)
    assert record(w, "a") is not None and record(w, "b") is None


def released_world(extra: int = 1, low: int = 2) -> World:
    """PodGroup pg (minMember 2, priority 1000) released, its two members bound on n1 (4 of 8 cpu);
    ``low`` low-priority pods of 2 cpu fill the rest of n1; ``extra`` new gated members of 2 cpu."""
    done = {"phase": "Running", "conditions": [{"type": "Released", "status": "True", "reason": "Released",
                                                "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
            "scheduleStartTime": "2024-01-01T00:00:00Z"}
    pods = [pod(f"m-{i}").req(cpu="2").group("pg").on("n1").priority(1000).raw() for i in range(2)]
    pods += [pod(f"low-{k}").req(cpu="2").on("n1").priority(100).raw() for k in range(low)]
    pods += [pod(f"new-{i}").req(cpu="2").group("pg").gated().priority(1000).raw() for i in range(extra)]
    return World(pods, [raw_pg("pg", 2, status=done)], nodes=[ready_node("n1", "8")])


def test_a_new_member_of_a_standing_release_preempts_within_its_groups_priority():
    w = released_world(extra=1)
    w.cluster.keep_deleted = True
    w.run()
    rec = record(w, "pg")
    assert rec is not None and rec.joining and len(rec.victims) == 1
    assert w.cluster.pods["new-0"]["status"]["nominatedNodeName"] == "n1"
    assert "new members of its standing release: new-0" in w.condition()["message"]
    del w.cluster.pods[rec.victims[0].name]
    w.run(1.0)
    assert not w.gated("new-0")
    assert w.condition()["reason"] == "Placed" and record(w, "pg") is None


def test_new_members_preempt_only_below_the_groups_lowest_priority():
    w = released_world(extra=1)
    w.cluster.pods["new-0"]["spec"]["priority"] = 50000  # a new member above its group preempts as the group
    for k in range(2):
        w.cluster.pods[f"low-{k}"]["spec"]["priority"] = 1000  # equal to the group's: never a victim
    w.run()
    assert record(w, "pg") is None and w.cluster.deleted == []
    assert w.condition()["reason"] == "NoLowerPriorityPods"


def test_new_members_that_cannot_all_fit_preempt_for_what_the_group_lacks_first():
    w = released_world(extra=3)  # room for two more at most
    w.cluster.keep_deleted = True
    w.run()
    # minMember is met by the bound members: nothing is short of it, so each new member counts as 1;
    # all three never fit, so the selection asks for the minimum (one)
    rec = record(w, "pg")
    assert rec is not None and len(rec.plan) == 1 and len(rec.victims) == 1


def cordon(w: World, name: str, taint: dict | None = None) -> None:
    n = w.cluster.nodes[name]
    if taint is None:
        n["spec"]["unschedulable"] = True
    else:
        n["spec"].setdefault("taints", []).append(taint)
    w.cluster._bump(n)


def test_a_cordoned_target_node_ends_the_preemption_at_once_and_it_is_chosen_again_elsewhere():
    nodes = [ready_node("n1", "4"), ready_node("n2", "4")]
    pods = [pod(f"low-{n}-{k}").req(cpu="2").on(n).priority(100 if n == "n1" else 200).raw()
            for n in ("n1", "n2") for k in range(2)]
    pods += [pod(f"m-{i}").req(cpu="2").group("pg").gated().priority(1000).raw() for i in range(2)]
    w = World(pods, [raw_pg("pg", 2)], nodes=nodes)
    w.cluster.keep_deleted = True
    w.run()
    assert {v.node for v in record(w, "pg").victims} == {"n1"}  # the lower priorities first
    cordon(w, "n1")
    w.run(1.0)
    rec = record(w, "pg")
    assert rec is not None and {v.node for v in rec.victims} == {"n2"}  # chosen again at once
    assert set(rec.plan.values()) == {"n2"}
    ended = [e for e in w.events if e[1] == "PreemptionEnded"]
    assert ended and "PlanChanged" in ended[-1][3] and "unschedulable (cordoned)" in ended[-1][3]
    assert w.metric("cogate_controller_preemptions_total", result="PlanChanged") == 1
    assert w.rec.memory.recall("pg-uid-pg").preemption.attempts == 0  # no back-off


def test_a_taint_on_the_target_node_ends_the_preemption_too():
    w = two_node_world(gangs=("a",))
    w.cluster.keep_deleted = True
    w.run()
    node = record(w, "a").victims[0].node
    cordon(w, node, {"key": "maintenance", "value": "x", "effect": "NoSchedule"})
    w.run(1.0)
    rec = record(w, "a")
    assert rec is not None and {v.node for v in rec.victims} != {node}
    assert any("taint maintenance=x" in e[3] for e in w.events if e[1] == "PreemptionEnded")
    assert T0 < w.now and GATE


def test_two_preemptions_on_one_node_each_place_their_gang_as_its_own_victims_go():
    """Each holds only what its terminating victims do not take: the first whose victims are gone
    fits at once, never DoesNotFitAfterPreemption while the other's victims still terminate."""
    pods = [pod(f"low-{k}").req(cpu="1").on("n1").priority(100).raw() for k in range(8)]
    pods += [pod(f"{g}-0").req(cpu="2").group(g).gated().priority(1000).raw() for g in ("a", "b")]
    w = World(pods, [raw_pg(g, 1) for g in ("a", "b")], nodes=[ready_node("n1", "8")])
    w.cluster.keep_deleted = True
    for _ in range(3):
        w.run(0.5)
    ra, rb = record(w, "a"), record(w, "b")
    assert ra is not None and rb is not None
    assert len(ra.victims) == 2 and len(rb.victims) == 2 and not ({v.uid for v in ra.victims} & {v.uid for v in rb.victims})
    for v in ra.victims:
        del w.cluster.pods[v.name]
    w.run(1.0)
    w.run(1.0)
    assert not w.gated("a-0") and w.condition("a")["reason"] == "Placed"
    assert w.gated("b-0") and w.condition("b")["status"] == "True"
    for v in rb.victims:
        del w.cluster.pods[v.name]
    w.run(1.0)
    w.run(1.0)
    assert not w.gated("b-0") and w.condition("b")["reason"] == "Placed"
    assert w.metric("cogate_controller_preemptions_total", result="DoesNotFitAfterPreemption") == 0
