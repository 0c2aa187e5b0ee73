"""The pure rules of preemptions side by side (controller/preemption/coordination.py and
``inflight.room_lost``, issue 37 kinds 1 to 4), table by table. The shell: test_coordinating.py;
properties: test_coordination_props.py."""

from __future__ import annotations

import pytest

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.constraints import Taint, Toleration
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.model.verdicts import GroupRequest, PlannerConfig
from cogate.controller.preemption import coordination, inflight
from cogate.controller.preemption.victims import NoPreemption, Preemption, Reason, select_victims

NOW = 1_000.0
CFG = PlannerConfig()


def bound(name, node, cpu=2000, priority=100):
    return PodInfo("batch", name, f"u-{name}", node_name=node, phase="Running", requests={"cpu": cpu},
                   priority=priority)


def member(group, i, cpu=2000, priority=1000, **kw):
    return PodInfo("team", f"{group}-{i}", f"u-{group}-{i}", labels={POD_GROUP_LABEL: group}, requests={"cpu": cpu},
                   gates=(GATE,), priority=priority, **kw)


def gang(name, size=2, priority=1000, min_member=None, cpu=2000):
    return GroupRequest("team", name, min_member or size, 0.0, False,
                        tuple(member(name, i, cpu, priority) for i in range(size)))


def nodes(*names, cpu=4000):
    return [NodeInfo(n, allocatable={"cpu": cpu, "pods": 110}) for n in names]


def in_flight(group: GroupRequest, victims, node, priority, started=NOW - 5):
    return inflight.start(group.namespace, group.name, [(v, v.node_name, 30.0) for v in victims],
                          {m.uid: node for m in group.members}, group.members, priority, "m", started)


# -- kind 1 ------------------------------------------------------------------------------------


def test_a_selection_that_takes_another_preemptions_victim_clashes():
    a = gang("a")
    rec = in_flight(a, [bound("y", "n1")], "n1", 1000)
    assert coordination.clashes(Preemption((), {}, 1000, ()), coordination.claimed([rec])) == []
    sel = select_victims(gang("b", 1), nodes("n1"), [bound("x", "n1"), bound("y", "n1")], [], [], [], CFG)
    assert isinstance(sel, Preemption) and [v.pod.name for v in sel.victims] == ["y"]
    assert coordination.clashes(sel, coordination.claimed([rec])) == ["batch/y (PodGroup team/a's)"]


def test_held_room_is_charged_for_every_other_group_whatever_its_priority():
    a = gang("a", priority=100)
    rec = in_flight(a, [bound("x", "n1")], "n1", 100)
    held = coordination.held_room([(rec, a.members)], GATE)
    assert [(q.node_name, q.requests["cpu"], q.preempting) for q in held] == [("n1", 2000, True)] * 2
    # a higher-priority gang does not see it as free (only a takeover lends it: kind 2)
    sel = select_victims(gang("b", 1), nodes("n1"), [], held, [], [], CFG)
    assert isinstance(sel, NoPreemption) and sel.reason is Reason.NO_LOWER_PRIORITY_PODS


def test_choose_starts_independent_preemptions_in_one_pass_and_skips_a_clash():
    ns = nodes("n1", "n2")
    pods = [bound(f"p{n}{k}", n) for n in ("n1", "n2") for k in range(2)]
    gs = [gang("a"), gang("b"), gang("c")]

    def select(r, room):
        return select_victims(r, ns, pods, room, [], [], CFG)

    choice = coordination.choose([coordination.Waiting(("team", g.name), (g,)) for g in gs], {}, [], select, None,
                                 GATE, NOW, 5)
    assert [c.key[1] for c in choice.start] == ["a", "b"]
    assert choice.notes[("team", "c")].reason is Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION
    # the same pass again with a's record in flight but its victims not yet seen terminating: b's
    # selection is made with a's room charged, so it never picks a's victims
    a_rec = choice.start[0].record
    again = coordination.choose([coordination.Waiting(("team", "b"), (gs[1],))],
                                {("team", "a"): (a_rec, gs[0].members)}, [], select, None, GATE, NOW, 5)
    assert [c.key for c in again.start] == [("team", "b")]
    assert not ({v.pod.uid for v in again.start[0].victims} & {v.uid for v in a_rec.victims})


def test_choose_never_starts_a_selection_whose_victims_another_preemption_has():
    ns = nodes("n1", cpu=8000)
    pods = [bound("x", "n1", cpu=4000), bound("y", "n1", cpu=4000)]
    a = gang("a", size=1, cpu=3000)
    rec = in_flight(a, [pods[1]], "n1", 1000)  # frees 4, holds 3: 1 left there

    def select(r, room):  # as before the watch shows y terminating, and blind to the held room: y again
        return select_victims(r, ns, pods, [], [], [], CFG)

    b = gang("b", size=1, cpu=1000)
    assert [v.pod.name for v in select(b, []).victims] == ["y"]
    choice = coordination.choose([coordination.Waiting(("team", "b"), (b,))], {("team", "a"): (rec, a.members)},
                                 [], select, None, GATE, NOW, 5)
    assert choice.start == [] and choice.clashed[("team", "b")] == ["batch/y (PodGroup team/a's)"]


# -- kind 2 ------------------------------------------------------------------------------------


def test_a_higher_priority_takes_over_a_lower_preemptions_room_and_inherits_its_victims():
    ns = nodes("n1")
    victims = [bound("x", "n1"), bound("y", "n1")]
    low = gang("low", priority=500)
    rec = in_flight(low, victims, "n1", 500)
    pods = [v.__class__(**{**v.__dict__, "deleting": True}) for v in victims]
    top = gang("top", priority=1000)
    held = coordination.held_room([(rec, low.members)], GATE)
    assert isinstance(select_victims(top, ns, pods, held, [], [], CFG), NoPreemption)
    t = coordination.takeover(top, [rec], ns, pods, held, [], [], CFG)
    assert t is not None and t.taken == (rec,) and t.victims == ()
    assert sorted(v.name for v in t.inherited) == ["x", "y"] and set(t.plan.values()) == {"n1"}
    assert t.message.startswith("taking over the room PodGroup team/low (priority 500) was freeing on 1 node n1")
    started = coordination.start_takeover(t, top, NOW)
    assert started.deadline == NOW + (rec.started + 30.0 - NOW) + inflight.STUCK_SLACK_SECONDS  # what is left of theirs
    assert "PodGroup team/top (priority 1000) took over" in coordination.taken_over_message(rec, top, 1000, ["n1"])


@pytest.mark.parametrize("priority", [500, 400])
def test_no_takeover_of_an_equal_or_higher_priority(priority):
    ns = nodes("n1")
    victims = [bound("x", "n1"), bound("y", "n1")]
    low = gang("low", priority=500)
    rec = in_flight(low, victims, "n1", 500)
    assert coordination.takeover(gang("top", priority=priority), [rec], ns, victims, [], [], [], CFG) is None


def test_a_takeover_leaves_alone_the_lower_preemptions_whose_room_it_does_not_use():
    ns = nodes("n1", "n2")
    lo1 = gang("lo1", priority=200)
    lo2 = gang("lo2", priority=100)
    r1 = in_flight(lo1, [bound("x", "n1"), bound("y", "n1")], "n1", 200)
    r2 = in_flight(lo2, [bound("z", "n2"), bound("w", "n2")], "n2", 100)
    top = gang("top", priority=1000)
    pods = [bound(n, node, priority=100) for n, node in (("x", "n1"), ("y", "n1"), ("z", "n2"), ("w", "n2"))]
    pods = [p.__class__(**{**p.__dict__, "deleting": True}) for p in pods]
    held = coordination.held_room([(r1, lo1.members), (r2, lo2.members)], GATE)
    t = coordination.takeover(top, [r1, r2], ns, pods, held, [], [], CFG)
    assert t is not None and [r.name for r in t.taken] == ["lo2"]  # the lowest priority first


# -- kind 3 ------------------------------------------------------------------------------------


def test_the_request_of_new_members_caps_their_priority_at_the_groups():
    bound_m = PodInfo("team", "g-0", "u-g-0", labels={POD_GROUP_LABEL: "g"}, node_name="n1", phase="Running",
                      requests={"cpu": 1000}, priority=1000)
    new = member("g", 1, priority=5000)
    g = GroupRequest("team", "g", 2, 0.0, True, (bound_m, new))
    r = coordination.joining_request(g, ["g-1"], GATE)
    assert r is not None and not r.released and r.min_member == 1
    assert [(m.name, m.priority) for m in r.members] == [("g-1", 1000)]
    assert coordination.joining_request(g, [], GATE) is None
    assert coordination.joining_targets(g, ["g-1"], GATE) == [1]


def test_joining_targets_all_new_members_then_what_minmember_lacks():
    ms = tuple(member("g", i) for i in range(4))
    g = GroupRequest("team", "g", 3, 0.0, True, ms)
    assert coordination.joining_targets(g, ["g-0", "g-1", "g-2", "g-3"], GATE) == [4, 3]
    assert coordination.joining_targets(g, ["g-2", "g-3"], GATE) == [2, 1]


# -- kind 4 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("node,expected", [
    (NodeInfo("n1", allocatable={"cpu": 4000}), None),
    (NodeInfo("n1", allocatable={"cpu": 4000}, unschedulable=True), "planned node n1 no longer takes member a-0 "
                                                                     "(unschedulable (cordoned))"),
    (NodeInfo("n1", allocatable={"cpu": 4000}, taints=(Taint("gpu", "x", "NoSchedule"),)),
     "planned node n1 no longer takes member a-0 (taint gpu=x)"),
    (NodeInfo("n1", allocatable={"cpu": 4000}, taints=(Taint("gpu", "x", "PreferNoSchedule"),)), None),
    (NodeInfo("n1", allocatable={"cpu": 4000}, ready=False), "planned node n1 no longer takes member a-0 (not Ready)"),
    (None, "planned node n1 is gone"),
])
def test_room_lost(node, expected):
    a = gang("a")
    rec = in_flight(a, [bound("x", "n1")], "n1", 1000)
    assert inflight.room_lost(rec, a.members, {"n1": node} if node else {}, GATE) == expected


def test_room_lost_heeds_the_members_tolerations_and_ends_the_preemption_at_once():
    tol = (Toleration("gpu", "Equal", "x", "NoSchedule"),)
    g = GroupRequest("team", "a", 1, 0.0, False, (member("a", 0, tolerations=tol),))
    rec = in_flight(g, [bound("x", "n1")], "n1", 1000)
    tainted = {"n1": NodeInfo("n1", taints=(Taint("gpu", "x", "NoSchedule"),))}
    assert inflight.room_lost(rec, g.members, tainted, GATE) is None
    cordoned = {"n1": NodeInfo("n1", unschedulable=True)}
    j = inflight.judge(rec, g.members, False, {"u-x": bound("x", "n1")}, NOW, GATE, cordoned)
    assert j.step is inflight.Step.PLAN_CHANGED and j.again and j.record is None
    assert "unschedulable (cordoned)" in j.message


def test_a_hold_counts_only_what_its_terminating_victims_do_not_take_already():
    a = gang("a", size=2, cpu=2000)
    x, y = bound("x", "n1", cpu=1500), bound("y", "n1", cpu=1500)
    rec = in_flight(a, [x, y], "n1", 1000)
    full = [q.requests["cpu"] for q in inflight.holds(rec, a.members, GATE)]
    assert full == [2000, 2000]
    there = {"u-x": x.__class__(**{**x.__dict__, "deleting": True}), "u-y": y}  # y not yet seen terminating
    assert [q.requests["cpu"] for q in inflight.holds(rec, a.members, GATE, there)] == [500, 2000]
    there["u-y"] = y.__class__(**{**y.__dict__, "deleting": True})
    assert [q.requests["cpu"] for q in inflight.holds(rec, a.members, GATE, there)] == [0, 1000]
    assert [q.requests["cpu"] for q in inflight.holds(rec, a.members, GATE, {})] == [2000, 2000]  # both gone
