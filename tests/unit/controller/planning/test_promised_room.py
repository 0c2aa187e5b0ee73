"""Room promised to others is never planned as free (issue 21, items 2a and 2c).

2a: a reservation of a member pinned to its node and not bound yet holds for as long as the
member exists there pinned and unbound (kube-scheduler slow or stopped), TTL or not, also
after a restart (restored reservations); it goes when the member binds, is deleted, becomes
terminal or is not pinned to that node (placement ``free``: then the TTL ends it).

2c: pods kube-scheduler nominated a node for (``status.nominatedNodeName``) hold room there
for pods of their priority or lower, in the same list of room promised as reservations
(``capacity.promised_room``); a group of higher priority is lent that room, as kube-scheduler
filters it (``addGENominatedPods``).

End to end: tests/e2e/test_promised_room.py.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.controller.planning import capacity
from cogate.controller.model import records
from cogate.controller.status.inputs import restored_reservations
from cogate.controller.planning.planner import Decision, GroupRequest, Outcome, PlannerConfig, decide
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.model.records import (NodeSelectorRequirement, NodeSelectorTerm, PodInfo, Promise,
                                       Reservation)
from tests.builders import node, pod

NOW = 50_000.0
TTL = 60.0
CFG = PlannerConfig(reservation_ttl_seconds=TTL)


def pin(name: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (name,)),)),)


def member(group: str, i: int, cpu: int, *, gated: bool = True, pinned_to: str = "", node_name: str = "",
           priority: int = 0, phase: str = "") -> PodInfo:
    b = pod(f"{group}-{i}").group(group).req(cpu=cpu).priority(priority).created(i)
    if gated:
        b.gated()
    if pinned_to:
        b.pinned(pinned_to)
    if node_name:
        b.on(node_name)
    if phase:
        b.phase(phase)
    return b.info()


def request(name: str, members, *, released: bool = False, min_member: int | None = None,
            created: float = 0.0) -> GroupRequest:
    members = tuple(members)
    return GroupRequest("team", name, len(members) if min_member is None else min_member, created, released, members)


def outcome(d: Decision, name: str) -> Outcome:
    return next(v.outcome for v in d.verdicts if v.name == name)


def verdict(d: Decision, name: str):
    return next(v for v in d.verdicts if v.name == name)


# -- 2a: reservations of pinned, unbound members ---------------------------------------------


def pinned_gang(name: str, size: int, cpu: int, node_name: str) -> tuple[GroupRequest, list[Reservation]]:
    """A released gang all pinned to ``node_name``, unbound (kube-scheduler has not bound them),
    with the reservations its release made at ``NOW``."""
    ms = [member(name, i, cpu, gated=False, pinned_to=node_name) for i in range(size)]
    res = [Reservation(m.uid, m.namespace, m.name, node_name, dict(m.requests), (), NOW + TTL) for m in ms]
    return request(name, ms, released=True), res


@pytest.mark.parametrize("size,cpu,node_cpu,second", [
    (1, 8, 8, 1),    # one member fills the node; a second gang of one
    (3, 2, 8, 2),    # 6 of 8 CPU reserved; the second gang needs 2 x 2
    (4, 2, 8, 4),    # the node full; the second gang as large
    (2, 3, 10, 3),   # 6 of 10; the second gang needs 3 x 3 = 9
])
@pytest.mark.parametrize("waited", [TTL, 2 * TTL, 10 * TTL + 1])
def test_pinned_unbound_reservation_outlives_the_ttl(size, cpu, node_cpu, second, waited):
    """kube-scheduler stopped: the first gang stays pinned, unbound, long past the TTL; the second
    gang (which would fit the empty node) is never released onto the same room."""
    nodes = [node("n1").cpu(node_cpu).info()]
    a, res = pinned_gang("a", size, cpu, "n1")
    b = request("b", [member("b", i, cpu) for i in range(second)], created=10)
    d = decide(nodes, [], [a, b], res, NOW + waited, CFG)
    v = verdict(d, "b")
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY, v.message
    assert v.release == {}
    assert v.fits == (node_cpu - size * cpu) // cpu
    assert v.message.startswith(f"fits {v.fits} of {second}: cpu short by")
    assert sorted(r.pod_uid for r in d.reservations) == sorted(r.pod_uid for r in res)
    assert outcome(d, "a") == Outcome.ALREADY_RELEASED and verdict(d, "a").release == {}


@pytest.mark.parametrize("gangs", [2, 3, 4])
def test_several_pinned_gangs_keep_their_room_past_the_ttl(gangs):
    """Gangs pinned across nodes, all unbound past the TTL: one more gang finds no room."""
    nodes = [node(f"n{i}").cpu(4).info() for i in range(gangs)]
    requests, reservations = [], []
    for i in range(gangs):
        g, res = pinned_gang(f"a{i}", 2, 2, f"n{i}")
        requests.append(g)
        reservations += res
    late = request("late", [member("late", 0, 2)], created=10)
    d = decide(nodes, [], requests + [late], reservations, NOW + 5 * TTL, CFG)
    assert outcome(d, "late") == Outcome.INSUFFICIENT_CAPACITY
    assert verdict(d, "late").message.startswith("fits 0 of 1: cpu short by 2")
    assert len(d.reservations) == 2 * gangs


def _with(req: GroupRequest, i: int, **change) -> GroupRequest:
    ms = list(req.members)
    ms[i] = dataclasses.replace(ms[i], **change)
    return dataclasses.replace(req, members=tuple(ms))


@pytest.mark.parametrize("case", ["bound", "deleted", "terminal", "unpinned", "pinned elsewhere"])
@pytest.mark.parametrize("after", [1.0, 2 * TTL])
def test_reservation_goes_when_its_member_binds_goes_or_is_not_pinned_there(case, after):
    """Each way a reservation ends frees exactly that member's room for another gang (cpu 4 on a
    node of 8: gang a = 2 x 4 pinned; gang b needs 4). ``unpinned`` (placement free) and a pin to
    another node end only at the TTL."""
    nodes = [node("n1").cpu(8).info(), node("n2").cpu(0).info()]
    a, res = pinned_gang("a", 2, 4, "n1")
    pods: list[PodInfo] = []
    if case == "bound":
        bound = dataclasses.replace(a.members[0], node_name="n1", phase="Running")
        a = _with(a, 0, node_name="n1", phase="Running")
        pods = [bound]
    elif case == "deleted":
        a = dataclasses.replace(a, members=a.members[1:])
    elif case == "terminal":
        a = _with(a, 0, phase="Failed")
    elif case == "unpinned":
        a = _with(a, 0, required_node_affinity=())
    else:
        a = _with(a, 0, required_node_affinity=pin("n2"))
    b = request("b", [member("b", 0, 4)], created=10)
    d = decide(nodes, pods, [a, b], res, NOW + after, CFG)
    kept = {r.pod_uid for r in d.reservations}
    ends_now = case in ("bound", "deleted", "terminal") or after >= TTL
    if ends_now:
        assert res[0].pod_uid not in kept
        if case == "bound":  # its room is charged as a bound pod instead: still no room for b
            assert outcome(d, "b") == Outcome.INSUFFICIENT_CAPACITY
        else:
            assert outcome(d, "b") == Outcome.RELEASED
            assert verdict(d, "b").release == {"uid-b-0": "n1"}
    else:
        assert res[0].pod_uid in kept
        assert outcome(d, "b") == Outcome.INSUFFICIENT_CAPACITY
    assert res[1].pod_uid in kept  # the other member, still pinned and unbound, keeps its room


@pytest.mark.parametrize("size,cpu", [(1, 4), (2, 3), (4, 2)])
@pytest.mark.parametrize("released", [True, False])
def test_restored_reservations_hold_past_the_ttl(size, cpu, released):
    """After a restart the reservations rebuilt from the pins hold as the original ones did,
    whether or not the group's release still stands (a timed-out gang's pinned members still
    bind there and nowhere else)."""
    nodes = [node("n1").cpu(8).info()]
    a, _ = pinned_gang("a", size, cpu, "n1")
    a = dataclasses.replace(a, released=released)
    restored = restored_reservations([a], NOW, TTL)
    assert [(r.name, r.node_name, r.requests, r.expires) for r in restored] == [
        (m.name, "n1", {"cpu": cpu * 1000}, NOW + TTL) for m in a.members]
    b = request("b", [member("b", 0, 8 - size * cpu + 1)], created=10)
    for later in (NOW + TTL, NOW + 3 * TTL):
        d = decide(nodes, [], [a, b], restored, later, CFG)
        assert outcome(d, "b") == Outcome.INSUFFICIENT_CAPACITY
        assert len(d.reservations) == size


def test_planning_state_keeps_pinned_reservations_past_the_ttl_like_decide():
    nodes = [node("n1").cpu(8).info()]
    a, res = pinned_gang("a", 2, 4, "n1")
    b = request("b", [member("b", 0, 4)], created=10)
    state = PlanningState.build(nodes, [])
    for t in (NOW, NOW + TTL, NOW + 4 * TTL):
        got = state.decide([a, b], res, t, CFG)
        assert got == decide(nodes, [], [a, b], res, t, CFG)
        assert outcome(got, "b") == Outcome.INSUFFICIENT_CAPACITY


# -- 2c: nominated pods -------------------------------------------------------------------------


def nominated(name: str, node_name: str, cpu: int, priority: int = 0, **kw) -> PodInfo:
    """A pod kube-scheduler nominated ``node_name`` for (a preemptor waiting for its victims)."""
    return PodInfo("other", name, f"uid-{name}", requests={"cpu": cpu * 1000}, priority=priority,
                   nominated_node=node_name, **kw)


def test_nominated_pod_info_reads_the_nomination():
    raw = {"metadata": {"name": "p", "namespace": "x", "uid": "u"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}], "priority": 7},
           "status": {"phase": "Pending", "nominatedNodeName": "n3"}}
    p = records.nominated_pod_info(raw)
    assert p is not None and (p.nominated_node, p.priority, p.requests["cpu"]) == ("n3", 7, 2000)
    assert records.nominated_pod_info({**raw, "status": {"phase": "Pending"}}) is None
    assert records.nominated_pod_info({**raw, "spec": {**raw["spec"], "nodeName": "n3"}}) is None
    assert records.pod_info({**raw, "status": {"phase": "Pending"}}).nominated_node == ""


@pytest.mark.parametrize("nom_cpu,nom_prio,gang,gang_prio,released", [
    (4, 0, (2, 2), 0, False),     # equal priority: counted, and 4 of 8 left hold the gang
    (6, 0, (2, 2), 0, False),     # 6 of 8 nominated: a gang of 2 x 2 does not fit
    (6, 10, (2, 2), 5, False),    # higher priority nomination: counted
    (6, 5, (2, 2), 5, False),     # equal priority: counted
    (6, 4, (2, 2), 5, True),      # lower priority: lent to the gang (kube-scheduler ignores it for it)
    (8, -1, (4, 2), 0, True),     # lower priority, the whole node
])
def test_a_nomination_holds_room_for_pods_of_its_priority_or_lower(nom_cpu, nom_prio, gang, gang_prio, released):
    nodes = [node("n1").cpu(8).info()]
    size, cpu = gang
    g = request("g", [member("g", i, cpu, priority=gang_prio) for i in range(size)])
    nom = nominated("preemptor", "n1", nom_cpu, nom_prio)
    d = decide(nodes, [nom], [g], [], NOW, CFG)
    v = verdict(d, "g")
    fits_counted = (8 - nom_cpu) // cpu >= size
    if released or fits_counted:
        assert v.outcome == Outcome.RELEASED, v.message
        assert set(v.release.values()) == {"n1"} and len(v.release) == size
    else:
        assert v.outcome == Outcome.INSUFFICIENT_CAPACITY, v.message
        assert v.fits == (8 - nom_cpu) // cpu
        assert v.message.startswith(f"fits {v.fits} of {size}: cpu short by")
    assert not released or not fits_counted or nom_prio < gang_prio


def test_nominations_and_reservations_are_one_list_of_room_promised():
    a, res = pinned_gang("a", 1, 2, "n1")
    nom = nominated("preemptor", "n2", 3, 9)
    also_reserved = dataclasses.replace(a.members[0], nominated_node="n2")  # counted once, as its reservation
    out = capacity.promised_room([(res[0], a.members[0])], capacity.nominated_pods([nom, also_reserved]),
                                 {res[0].pod_uid: "PodGroup team/a"})
    assert out == [
        Promise(a.members[0], "n1", {"cpu": 2000}, (), "reserved", 0, "PodGroup team/a"),
        Promise(nom, "n2", {"cpu": 3000}, (), "nominated", 9, "pod other/preemptor"),
    ]
    gone = dataclasses.replace(nom, uid="u2", deleting=True)
    bound = dataclasses.replace(nom, uid="u3", node_name="n2")
    done = dataclasses.replace(nom, uid="u4", phase="Succeeded")
    assert capacity.nominated_pods([gone, bound, done]) == []


@pytest.mark.parametrize("nom_prio,blocked", [(0, True), (3, True), (-5, False)])
def test_a_new_member_of_a_released_group_does_not_take_nominated_room(nom_prio, blocked):
    """Released groups' new members see nominations as the others do."""
    nodes = [node("n1").cpu(4).info()]
    running = member("g", 0, 2, gated=False, node_name="n1")
    new = member("g", 1, 2)
    g = request("g", [running, new], released=True, min_member=1)
    nom = nominated("preemptor", "n1", 2, nom_prio)
    d = decide(nodes, [running, nom], [g], [], NOW, CFG)
    v = verdict(d, "g")
    assert v.outcome == Outcome.ALREADY_RELEASED
    if blocked:
        assert v.release == {} and v.waiting == ("g-1",)
        assert "cpu short by 2" in v.message
    else:
        assert v.release == {"uid-g-1": "n1"} and v.waiting == ()


def test_the_miss_names_room_promised_to_others_on_eligible_nodes():
    """What a waiting message can name (item 2b): each promise's holder, at the group's turn."""
    from cogate.controller.planning.capacity import Snapshot
    from cogate.controller.planning.planner import Pass, classify

    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    a, res = pinned_gang("a", 2, 2, "n1")
    nom = nominated("preemptor", "n2", 4, 1)
    b = request("b", [member("b", 0, 3)], created=10)
    run = Pass(Snapshot(nodes, [nom], False), [a, b], res, NOW, CFG)
    miss = run._try_release(b, classify(b, GATE))
    assert [(p.holder, p.node_name, p.kind) for p in miss.promised] == [
        ("PodGroup team/a", "n1", "reserved"), ("PodGroup team/a", "n1", "reserved"),
        ("pod other/preemptor", "n2", "nominated")]


# -- property: room promised is never planned as free ---------------------------------------------

_node_cpu = st.integers(min_value=1, max_value=8)


@st.composite
def scenario(draw):
    n = draw(st.integers(min_value=1, max_value=4))
    nodes = [node(f"n{i}").cpu(draw(_node_cpu)).info() for i in range(n)]
    names = [x.name for x in nodes]
    noms = [nominated(f"nom{k}", draw(st.sampled_from(names)), draw(st.integers(1, 4)), draw(st.integers(-2, 2)))
            for k in range(draw(st.integers(0, 4)))]
    prio = draw(st.integers(-2, 2))
    groups = []
    for gi in range(draw(st.integers(1, 3))):
        size = draw(st.integers(1, 4))
        ms = [member(f"g{gi}", i, draw(st.integers(1, 3)), priority=prio) for i in range(size)]
        groups.append(request(f"g{gi}", ms, min_member=draw(st.integers(1, size)), created=float(gi)))
    return nodes, noms, groups, prio


@settings(max_examples=300, deadline=None)
@given(scenario())
def test_property_no_node_is_promised_beyond_its_room(case):
    """Every member planned on a node fits it after the nominations of its priority or higher
    and every reservation there (brute force over the plan), and the incremental planner agrees."""
    nodes, noms, groups, prio = case
    d = decide(nodes, noms, groups, [], NOW, CFG)
    for n in nodes:
        reserved = sum(r.requests.get("cpu", 0) for r in d.reservations if r.node_name == n.name)
        counted = sum(p.requests["cpu"] for p in noms if p.nominated_node == n.name and p.priority >= prio)
        assert reserved + counted <= n.allocatable["cpu"] or reserved == 0
    state = PlanningState.build(nodes, noms)
    assert state.decide(groups, [], NOW, CFG) == d
    # a lower-priority nomination never blocks: dropping them changes nothing
    higher = [p for p in noms if p.priority >= prio]
    assert decide(nodes, higher, groups, [], NOW, CFG).verdicts == d.verdicts


def test_planning_state_follows_nomination_deltas():
    nodes = [node("n1").cpu(4).info()]
    g = request("g", [member("g", 0, 3)])
    state = PlanningState.build(nodes, [])
    nom = nominated("preemptor", "n1", 2, 1)
    state.upsert_nominated(nom)
    assert outcome(state.decide([g], [], NOW, CFG), "g") == Outcome.INSUFFICIENT_CAPACITY
    state.upsert_nominated(dataclasses.replace(nom, nominated_node=""))  # nomination cleared
    assert outcome(state.decide([g], [], NOW, CFG), "g") == Outcome.RELEASED
    state.upsert_nominated(nom)
    state.remove_nominated(nom.uid)
    assert outcome(state.decide([g], [], NOW + 1, CFG), "g") == Outcome.RELEASED
    bound = dataclasses.replace(nom, node_name="n1", phase="Running")
    state.upsert_pod(bound)
    state.upsert_nominated(nom)  # the nominated-pods watch lags: the bound record wins
    assert state.pods == [bound]


# -- issue 37 kind 10: the room promised to a nominated pod is named ---------------------------------


@pytest.mark.parametrize("noms,gang_prio,named", [
    ([("hp", "n1", 2, 1000)], 0, ["pod other/hp (priority 1000, on n1: cpu 2)"]),
    ([("hp", "n1", 2, 0)], 0, ["pod other/hp (priority 0, on n1: cpu 2)"]),            # equal: counted, named
    ([("a", "n1", 1, 5), ("b", "n1", 3, 5)], 0, ["pod other/b (priority 5, on n1: cpu 3)",
                                                  "pod other/a (priority 5, on n1: cpu 1)"]),  # most room first
    ([("low", "n1", 2, -1), ("hp", "n1", 2, 9)], 0, ["pod other/hp (priority 9, on n1: cpu 2)"]),  # lower: lent
])
def test_a_waiting_gang_names_the_pods_nominated_on_its_nodes(noms, gang_prio, named):
    """Issue 37 kind 10: a gang kept gated because kube-scheduler nominated the room for a pending
    pod of equal or higher priority says which pod and how much room, not only what is short; a
    nomination of lower priority is lent to the gang and not named."""
    nodes = [node("n1").cpu(4).info()]
    g = request("g", [member("g", i, 2, priority=gang_prio) for i in range(2)], created=NOW)
    pods = [nominated(n, where, cpu, prio) for n, where, cpu, prio in noms]
    d = decide(nodes, pods, [g], [], NOW, CFG)
    inc = PlanningState.build(nodes, pods).decide([g], [], NOW, CFG)
    assert d.verdicts == inc.verdicts
    v = verdict(d, "g")
    assert v.outcome == Outcome.INSUFFICIENT_CAPACITY, v.message
    assert v.message.endswith("room promised to pods kube-scheduler nominated, not bound yet: " + ", ".join(named))


def test_a_nomination_on_nodes_the_gang_cannot_use_or_with_room_to_spare_is_not_named():
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).labels({"pool": "x"}).info()]
    g = request("g", [member("g", i, 2) for i in range(3)], created=NOW)
    d = decide(nodes, [nominated("far", "n2", 4, 100), nominated("near", "n1", 2, 100)], [g], [], NOW, CFG)
    assert verdict(d, "g").message.endswith(
        "nominated, not bound yet: pod other/far (priority 100, on n2: cpu 4), pod other/near (priority 100, on n1: cpu 2)")
    picky = pod("p-0").group("p").req(cpu=2).gated().created(0).spec(nodeSelector={"pool": "x"}).info()
    p = request("p", [picky, member("p", 1, 2)], created=NOW)
    d2 = decide(nodes, [nominated("near", "n1", 4, 100), nominated("far", "n2", 2, 100)], [p], [], NOW, CFG)
    msg = verdict(d2, "p").message
    assert "pod other/far" in msg and "pod other/near" in msg, msg
    fits = decide(nodes, [nominated("small", "n1", 1, 100)], [g], [], NOW, CFG)
    assert verdict(fits, "g").outcome == Outcome.RELEASED
    other = request("o", [pod("o-0").group("o").req(cpu=4).gated().created(0).spec(nodeSelector={"pool": "x"})
                          .info()], created=NOW)
    d3 = decide(nodes, [nominated("near", "n1", 4, 100), nominated("far", "n2", 1, 100)], [other], [], NOW, CFG)
    msg = verdict(d3, "o").message
    assert "pod other/far" in msg and "pod other/near" not in msg, msg  # n1 is not eligible for o-0
