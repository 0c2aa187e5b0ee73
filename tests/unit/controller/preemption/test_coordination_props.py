"""Property tests of preemptions side by side (controller/preemption/coordination.py, issue 37 kinds 1, 2).

Random small clusters (1-5 nodes, bound pods of random priorities and requests) and 2-4 gated
gangs of random priorities. :func:`coordination.choose` runs with the real victim selection over
two passes (the first pass's victims are terminating in the second, as the watch shows them), and
for every set of preemptions in flight at the end:

Gangs arrive in two waves (the second pass sees them all), so a later gang may outrank one in flight.

(a) no two share a victim (kind 1);
(b) they never share room: with every victim of every one gone, all their plans hold at once
    (each member on its planned node, in plan order, on one room: the oracle is the planner's
    room, not the code under test);
(c) a preemption taken over had a priority strictly below its taker's (kind 2), and its taker
    waits for its victims on the planned nodes;
(d) every victim has a priority below its preemptor's.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.model.verdicts import GroupRequest, PlannerConfig
from cogate.controller.planning import planner
from cogate.controller.planning.capacity import Snapshot
from cogate.controller.preemption import coordination
from cogate.controller.preemption.victims import select_victims

CFG = PlannerConfig()
NOW = 1_000.0


@st.composite
def worlds(draw):
    nodes = [NodeInfo(f"n{i}", labels={"kubernetes.io/hostname": f"n{i}"},
                      allocatable={"cpu": draw(st.sampled_from([2000, 4000, 8000])), "pods": 110})
             for i in range(draw(st.integers(1, 5)))]
    free = {n.name: n.allocatable["cpu"] for n in nodes}
    pods = []
    for j in range(draw(st.integers(4, 24))):
        cpu = draw(st.sampled_from([1000, 2000, 2000]))
        on = draw(st.sampled_from([n.name for n in nodes]))
        if free[on] < cpu:
            continue
        free[on] -= cpu
        pods.append(PodInfo("batch", f"p{j}", f"u-p{j}", node_name=on, phase="Running", requests={"cpu": cpu},
                            priority=draw(st.sampled_from([0, 10, 100, 100, 200]))))
    groups = []
    for k in range(draw(st.integers(2, 4))):
        size = draw(st.integers(1, 3))
        prio = draw(st.sampled_from([50, 150, 300, 1000]))
        members = tuple(PodInfo("team", f"g{k}-{i}", f"u-g{k}-{i}", labels={POD_GROUP_LABEL: f"g{k}"},
                                requests={"cpu": draw(st.sampled_from([500, 1000, 2000]))}, gates=(GATE,),
                                priority=prio, created=float(i)) for i in range(size))
        groups.append(GroupRequest("team", f"g{k}", draw(st.integers(1, size)), float(k), False, members))
    return nodes, pods, groups, draw(st.integers(1, len(groups)))


def run_choose(nodes, pods, groups, flying):
    def select(r, room):
        return select_victims(r, nodes, pods, room, [], [], CFG)

    def take(r, lower, room):
        return coordination.takeover(r, lower, nodes, pods, room, [], [], CFG)

    order = sorted(groups, key=lambda g: (-min(m.priority for m in g.members), g.created))
    waiting = [coordination.Waiting((g.namespace, g.name), (g,)) for g in order if (g.namespace, g.name) not in flying]
    present = {p.uid: p for p in pods}  # the victims terminating hold less room (inflight.holds)
    return coordination.choose(waiting, flying, [], select, take, GATE, NOW, 10, present)


def plans_hold_together(nodes, pods, records, groups) -> bool:
    gone = {v.uid for r in records for v in r.victims}
    rest = [p for p in pods if p.uid not in gone]
    snap = Snapshot(nodes, rest, False, False)
    room = snap.room([])
    members = {m.uid: m for g in groups for m in g.members}
    for r in records:
        for uid, name in r.plan.items():
            m = members[uid]
            spec = room.spec_for(m)
            i = snap.index[name]
            if i not in spec.eligible or not room.fits(spec, i):
                return False
            room.occupy(m, spec.req, spec.ports, i)
    return True


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds())
def test_concurrent_preemptions_never_share_victims_or_room(world):
    nodes, pods, groups, first = world
    by_key = {(g.namespace, g.name): g for g in groups}
    flying: dict = {}
    priorities = {}
    for arrived in (groups[:first], groups):  # two passes: the first's victims terminate in the second
        choice = run_choose(nodes, pods, arrived, flying)
        for c in choice.start:
            event(f"taken over: {bool(c.taken)}")
            for rec, _ in c.taken:
                taken_key = (rec.namespace, rec.name)
                assert rec.priority < c.record.priority  # (c)
                on = set(c.record.plan.values())
                mine = {v.uid for v in c.record.victims}
                assert {v.uid for v in rec.victims if v.node in on} <= mine
                flying.pop(taken_key, None)
            flying[c.key] = (c.record, by_key[c.key].members)
            priorities[c.key] = c.record.priority
        doomed = {v.uid for rec, _ in flying.values() for v in rec.victims}
        pods = [replace(p, deleting=True) if p.uid in doomed else p for p in pods]
    records = [rec for rec, _ in flying.values()]
    event(f"in flight together: {len(records)}")
    seen: set[str] = set()
    for rec in records:  # (a), (d)
        uids = {v.uid for v in rec.victims}
        assert not (uids & seen), "two preemptions share a victim"
        seen |= uids
        by_uid = {p.uid: p for p in pods}
        assert all(by_uid[u].priority < rec.priority for u in uids)
    assert plans_hold_together(nodes, pods, records, groups)  # (b)


def test_the_planner_places_every_plan_once_all_victims_are_gone():
    """One worked example of (b) through the planner itself: two gangs on two full nodes."""
    nodes = [NodeInfo(n, allocatable={"cpu": 4000, "pods": 110}) for n in ("n1", "n2")]
    pods = [PodInfo("batch", f"p{n}{k}", f"u-{n}{k}", node_name=n, phase="Running", requests={"cpu": 2000},
                    priority=100) for n in ("n1", "n2") for k in range(2)]
    groups = [GroupRequest("team", g, 2, 0.0, False, tuple(
        PodInfo("team", f"{g}-{i}", f"u-{g}-{i}", labels={POD_GROUP_LABEL: g}, requests={"cpu": 2000},
                gates=(GATE,), priority=1000) for i in range(2))) for g in ("a", "b")]
    choice = run_choose(nodes, pods, groups, {})
    assert len(choice.start) == 2
    gone = {v.pod.uid for c in choice.start for v in c.victims}
    assert len(gone) == 4
    d = planner.decide(nodes, [p for p in pods if p.uid not in gone], groups, [], NOW, CFG)
    assert all(v.outcome == "Released" for v in d.verdicts)
