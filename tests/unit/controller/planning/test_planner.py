"""Planner rules (controller/planning/planner.py), table-driven."""

from __future__ import annotations

import pytest

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.records import (
    HostPort,
    LabelSelector,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodInfo,
    Reservation,
    Taint,
    Toleration,
)
from cogate.controller.planning.planner import (
    Decision,
    GroupRequest,
    PlannerConfig,
    complete_since,
    decide,
    mixed_priorities,
    pinned_node_problems,
)
from tests.builders import group_request, node, pod as pod_

Gi = 2**30
Mi = 2**20
CFG = PlannerConfig()
NOW = 10_000.0


_uid = [0]


def pod(group="g", cpu=1, mem=1, ns="default", name=None, node_name="", gated=True, created=0.0, gates=None,
        labels=None, phase=None, **kw):
    _uid[0] += 1
    b = pod_(name or f"{group or 'p'}-{_uid[0]}", ns).uid(f"uid-{_uid[0]}").created(created)
    b.labels({POD_GROUP_LABEL: group} if group else {}).labels(labels or {})
    if cpu:
        b.req(cpu=cpu)
    if mem:
        b.req(memory=int(mem * Gi))
    if gates is None:
        gates = (GATE,) if gated and not node_name else ()
    if gates:
        b.gated(*gates)
    if node_name:
        b.on(node_name)
    if phase:
        b.phase(phase)
    return b.info(**kw)


def run(nodes, groups, pods=(), reservations=(), now=NOW, cfg=CFG) -> Decision:
    return decide(nodes, list(pods), list(groups), list(reservations), now, cfg)


def only(d: Decision):
    assert len(d.verdicts) == 1
    return d.verdicts[0]


def check_plan_valid(nodes, pods, reservations, d: Decision, groups):
    """Every planned member fits its node's remaining room (resources and pod slots)."""
    by_uid = {m.uid: m for g in groups for m in g.members}
    used = {n.name: {"pods": 0} for n in nodes}
    for p in pods:
        for k, v in p.requests.items():
            used[p.node_name][k] = used[p.node_name].get(k, 0) + v
        used[p.node_name]["pods"] += 1
    for r in d.reservations:
        for k, v in r.requests.items():
            used[r.node_name][k] = used[r.node_name].get(k, 0) + v
        used[r.node_name]["pods"] += 1
    for n in nodes:
        for k, v in used[n.name].items():
            assert v <= n.allocatable.get(k, 0), (n.name, k, v)
    for v in d.verdicts:
        for uid, nn in v.release.items():
            if nn:
                assert any(r.pod_uid == uid and r.node_name == nn for r in d.reservations)
                assert uid in by_uid


# -- membership ---------------------------------------------------------------------


def test_waiting_for_members():
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request([pod(), pod()], 3)]))
    assert v.outcome == "WaitingForMembers"
    assert v.message == "2 of 3 members present"
    assert v.release == {}


def test_failed_members_are_not_present():
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request([pod(),
                  pod(phase="Failed", gated=False)], 2)]))
    assert v.outcome == "WaitingForMembers"


def test_release_all_when_fits():
    ms = [pod(cpu=1) for _ in range(4)]
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info(), node("n2").alloc(cpu=2, memory="8Gi").info()]
    d = run(nodes, [group_request(ms)])
    v = only(d)
    assert v.outcome == "Released" and v.fits == 4
    assert set(v.release) == {m.uid for m in ms}
    assert sorted(v.release.values()) == ["n1", "n1", "n2", "n2"]
    assert {r.pod_uid for r in d.reservations} == {m.uid for m in ms}
    assert all(r.expires == NOW + 60 for r in d.reservations)
    check_plan_valid(nodes, [], [], d, [group_request(ms)])


def test_never_partial_release():
    ms = [pod(cpu=2) for _ in range(3)]
    busy = [pod(group=None, node_name="n1", cpu=2)]
    v = only(run([node("n1").alloc(cpu=6, memory="8Gi").info()], [group_request(ms)], pods=busy))
    assert v.outcome == "InsufficientCapacity"
    assert v.release == {} and v.fits == 2
    assert v.message.startswith("fits 2 of 3: cpu short by 2 on eligible nodes")


def test_members_beyond_min_member_without_room_wait_gated():
    # Issue 9 item 5, its whole kind: a member without room is never released towards nowhere,
    # whether it existed at the release (here) or came after it (ungate_new_members).
    ms = [pod(cpu=2, created=i) for i in range(5)]
    d = run([node("n1").alloc(cpu=6, memory="8Gi").info()], [group_request(ms, 3)])
    v = only(d)
    assert v.outcome == "Released" and v.fits == 3
    assert v.release == {m.uid: "n1" for m in ms[:3]}
    assert v.waiting == tuple(m.name for m in ms[3:])
    assert f"; 2 members ({ms[3].name}, {ms[4].name}) wait gated for capacity: cpu short by" in v.message
    assert len(d.reservations) == 3


def test_members_beyond_min_member_with_room_are_released_pinned():
    ms = [pod(cpu=2, created=i) for i in range(5)]
    d = run([node("n1").alloc(cpu=6, memory="8Gi").info(),
             node("n2").alloc(cpu=4, memory="8Gi").info()], [group_request(ms, 3)])
    v = only(d)
    assert v.outcome == "Released" and v.fits == 5 and v.waiting == ()
    assert sorted(v.release.values()) == ["n1", "n1", "n1", "n2", "n2"]
    assert len(d.reservations) == 5


def test_bound_members_count_towards_quorum():
    bound = [pod(node_name="n1", cpu=3, gated=False) for _ in range(2)]
    gated = [pod(cpu=1)]
    nodes = [node("n1").alloc(cpu=8, memory="8Gi").info()]
    v = only(run(nodes, [group_request(bound + gated, 3)], pods=bound))
    assert v.outcome == "Released" and v.fits == 3
    assert v.release == {gated[0].uid: "n1"}


@pytest.mark.parametrize("succeeded,new,m", [(1, 5, 6), (1, 1, 2), (3, 2, 3), (6, 1, 3)])
def test_succeeded_members_never_count_towards_a_new_gang(succeeded, new, m):
    """Issue 21 item 6: a Succeeded member cannot run again, so a gang decision (an unreleased
    group) leaves it out: minMember 6 with 1 Succeeded and 5 new pods releases nothing."""
    done = [pod(node_name="n1", phase="Succeeded", gated=False) for _ in range(succeeded)]
    v = only(run([node("n1").alloc(cpu=64, memory="8Gi").info()],
                 [group_request(done + [pod(cpu=1) for _ in range(new)], m)]))
    assert v.outcome == "WaitingForMembers" and v.fits == 0 and not v.release
    assert v.message.startswith(f"{new} of {m} members present")


def test_succeeded_members_count_towards_a_standing_release():
    """While the release stands a Succeeded member is its finished work: a Job's next pod joins."""
    done = [pod(node_name="n1", phase="Succeeded", gated=False)]
    new = pod(cpu=1)
    v = only(run([node("n1").alloc(cpu=1, memory="8Gi").info()], [group_request(done + [new], 2, released=True)]))
    assert v.outcome == "AlreadyReleased" and v.release == {new.uid: "n1"}


def test_members_gated_by_other_gate_only_are_not_ours():
    ours = [pod(cpu=1)]
    foreign = [pod(cpu=1, gates=("example.com/other",))]
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request(ours + foreign, 2)]))
    assert v.outcome == "WaitingForMembers" and v.fits == 0
    assert v.message == (f"2 of 2 members present, 0 bound; 1 held by other scheduling gates "
                         f"({foreign[0].name}: example.com/other)")
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request(ours + foreign, 1)]))
    assert v.outcome == "Released" and v.fits == 1
    assert v.release == {ours[0].uid: "n1"}


def test_waiting_message_names_the_first_members_held_by_other_gates():
    """Issue 9 item 9: say which members other scheduling gates hold (first few), and which gates."""
    ours = [pod(cpu=1, name="w-0")]
    held = [pod(cpu=1, name=f"w-{i}", gates=(GATE, "example.com/quota")) for i in range(1, 4)]
    held.append(pod(cpu=1, name="w-4", gates=("example.com/quota", "example.com/other")))
    held.append(pod(cpu=1, name="w-5", gates=("example.com/other",)))
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request(ours + held, 3)]))
    assert v.outcome == "WaitingForMembers"
    assert v.message == ("6 of 3 members present, 0 bound; 5 held by other scheduling gates (w-1: example.com/quota, "
                         "w-2: example.com/quota, w-3: example.com/quota and 2 more)")


def test_shortfall_names_pods_terminating_on_the_nodes_the_group_needs():
    """Issue 9 item 9: a pod being deleted still holds its room (kube-scheduler counts it until
    it is gone); the waiting message says so, naming it, only for nodes the group could use."""
    dying = pod(group=None, cpu=3, node_name="n1", name="old-web", deleting=True)
    elsewhere = pod(group=None, cpu=3, node_name="n2", name="other", deleting=True)
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info(),
             node("n2").labels({"pool": "b"}).alloc(cpu=4, memory="8Gi").info()]
    members = [pod(cpu=2, node_selector={"kubernetes.io/hostname": "n1"}) for _ in range(2)]
    v = only(run(nodes, [group_request(members, 2)], pods=[dying, elsewhere]))
    assert v.outcome == "InsufficientCapacity"
    assert "1 pod terminating on eligible nodes (old-web) still holds room until gone" in v.message
    assert "other" not in v.message.split("terminating")[1]


def test_ungated_unbound_members_are_reported_as_waiting_for_the_scheduler():
    # A group whose release no longer stands (timed out) and whose members sit in kube-scheduler's queue.
    queued = [pod(cpu=1, gates=()), pod(cpu=1, gates=())]
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request(queued, 2)]))
    assert v.outcome == "WaitingForMembers"
    assert v.message == "2 of 2 members present, 0 bound; 2 ungated and waiting for kube-scheduler"


def test_members_with_our_and_other_gate_are_released_unplanned():
    a = pod(cpu=1)
    b = pod(cpu=1, gates=(GATE, "example.com/other"))
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request([a, b], 1)]))
    assert v.outcome == "Released"
    assert v.release == {a.uid: "n1", b.uid: ""}


def test_mixed_priorities_helper():
    assert mixed_priorities(group_request([pod(priority=1), pod(priority=2)]))
    assert not mixed_priorities(group_request([pod(priority=5), pod(priority=5)]))


def test_complete_since():
    g = group_request([pod(created=50), pod(created=10), pod(created=30)], 2, created=20)
    assert complete_since(g) == 30
    g = group_request([pod(created=5), pod(created=10)], 2, created=20)
    assert complete_since(g) == 20
    assert complete_since(group_request([pod()], 2)) is None


# -- resources -------------------------------------------------------------------------


def test_fragmentation_totals_fit_but_no_node_does():
    # 4 nodes x 3 cpu = 12 cpu free; 4 members x 2 cpu = 8 cpu, but also 2 x 4 cpu members
    nodes = [node(f"n{i}").alloc(cpu=3, memory="8Gi").info() for i in range(4)]
    ms = [pod(cpu=2) for _ in range(2)] + [pod(cpu=4)]
    v = only(run(nodes, [group_request(ms)]))
    assert v.outcome == "ExceedsClusterCapacity"
    assert "no eligible node has room for a member requesting cpu 4" in v.message


def test_fragmentation_with_bound_pods():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info(), node("n2").alloc(cpu=4, memory="8Gi").info()]
    bound = [pod(group=None, node_name="n1", cpu=2), pod(group=None, node_name="n2", cpu=2)]
    v = only(run(nodes, [group_request([pod(cpu=3)])], pods=bound))
    assert v.outcome == "InsufficientCapacity"
    assert "no eligible node has room" in v.message


def test_extended_resource_and_missing_allocatable():
    gpu_node = NodeInfo("g1", allocatable={"cpu": 8000, "pods": 10, "nvidia.com/gpu": 2})
    cpu_node = NodeInfo("c1", allocatable={"cpu": 8000, "pods": 10})
    m = PodInfo("default", "w", "u1", labels={POD_GROUP_LABEL: "g"}, requests={"cpu": 1000, "nvidia.com/gpu": 2},
                gates=(GATE,))
    v = only(run([cpu_node, gpu_node], [group_request([m])]))
    assert v.release == {"u1": "g1"}
    m2 = PodInfo("default", "w2", "u2", labels={POD_GROUP_LABEL: "g"},
                 requests={"cpu": 1000, "nvidia.com/gpu": 2}, gates=(GATE,))
    v = only(run([cpu_node, gpu_node], [group_request([m, m2])]))
    assert v.outcome == "ExceedsClusterCapacity"
    assert "nvidia.com/gpu short by 2" in v.message


def test_pod_count_limit():
    nodes = [node("n1").alloc(cpu=64, memory="8Gi", pods=3).info()]
    existing = [pod(group=None, node_name="n1", cpu=0, mem=0)]
    ms = [pod(cpu=0.1, mem=0) for _ in range(3)]
    v = only(run(nodes, [group_request(ms)], pods=existing))
    assert v.outcome == "InsufficientCapacity" and v.fits == 2
    assert "pods short by 1" in v.message


def test_zero_request_not_blocked_by_overcommitted_node():
    nodes = [node("n1").alloc(cpu=1, memory="8Gi").info()]
    existing = [pod(group=None, node_name="n1", cpu=2, mem=0)]  # node over-committed on cpu
    m = pod(cpu=0, mem=1)
    assert only(run(nodes, [group_request([m])], pods=existing)).outcome == "Released"


def test_members_with_different_specs():
    nodes = [node("big").alloc(cpu=8, memory="8Gi").info(), node("small").alloc(cpu=2, memory="2Gi").info()]
    big = pod(cpu=6, mem=4)
    small = [pod(cpu=1, mem=1) for _ in range(3)]
    d = run(nodes, [group_request([big] + small)])
    v = only(d)
    assert v.outcome == "Released"
    assert v.release[big.uid] == "big"
    assert sorted(v.release[m.uid] for m in small) in (["big", "big", "small"], ["big", "small", "small"])
    check_plan_valid(nodes, [], [], d, [group_request([big] + small)])


def test_most_constrained_first_avoids_greedy_trap():
    # the small member could go anywhere; the big one only fits n1 when n1 is still empty
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info(), node("n2").alloc(cpu=2, memory="8Gi").info()]
    small = pod(cpu=2, created=0)
    big = pod(cpu=4, created=1)
    v = only(run(nodes, [group_request([small, big])]))
    assert v.outcome == "Released"
    assert v.release == {small.uid: "n2", big.uid: "n1"}


def test_terminal_and_unbound_pods_in_pods_are_ignored():
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info()]
    junk = [pod(group=None, node_name="n1", cpu=2, phase="Succeeded"), pod(group=None, cpu=2, gated=False)]
    assert only(run(nodes, [group_request([pod(cpu=2)])], pods=junk)).outcome == "Released"


# -- node filters ----------------------------------------------------------------------

TAINT = Taint("dedicated", "train", "NoSchedule")


@pytest.mark.parametrize(
    "n,member_kw,fits",
    [
        (node("n1").alloc(cpu=4, memory="8Gi").unschedulable().info(), {}, False),
        (node("n1").alloc(cpu=4, memory="8Gi").unschedulable().info(),
         {"tolerations": (Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),)}, True),
        (node("n1").alloc(cpu=4, memory="8Gi").not_ready().info(), {}, False),
        (node("n1").alloc(cpu=4, memory="8Gi").taint(TAINT).info(), {}, False),
        (node("n1").alloc(cpu=4, memory="8Gi").taint(Taint("k", "v", "NoExecute")).info(), {}, False),
        (node("n1").alloc(cpu=4, memory="8Gi").taint(Taint("k", "v", "PreferNoSchedule")).info(), {}, True),
        (node("n1").alloc(cpu=4, memory="8Gi").taint(TAINT).info(), {"tolerations": (Toleration("dedicated", "Equal", "train", "NoSchedule"),)},
         True),
        (node("n1").alloc(cpu=4, memory="8Gi").taint(TAINT).info(), {"tolerations": (Toleration("dedicated", "Equal", "infer", "NoSchedule"),)},
         False),
        (node("n1").alloc(cpu=4, memory="8Gi").taint(TAINT).info(), {"tolerations": (Toleration("dedicated", "Exists"),)}, True),
        (node("n1").alloc(cpu=4, memory="8Gi").taint(TAINT).info(), {"tolerations": (Toleration("", "Exists"),)}, True),
        (node("n1").alloc(cpu=4, memory="8Gi").taint(TAINT).info(), {"tolerations": (Toleration("dedicated", "Equal", "train", "NoExecute"),)},
         False),
        (node("n1").labels({"pool": "gpu"}).alloc(cpu=4, memory="8Gi").info(), {"node_selector": {"pool": "gpu"}}, True),
        (node("n1").labels({"pool": "cpu"}).alloc(cpu=4, memory="8Gi").info(), {"node_selector": {"pool": "gpu"}}, False),
        (node("n1").alloc(cpu=4, memory="8Gi").info(), {"node_selector": {"pool": "gpu"}}, False),
        (node("n1").labels({"zone": "b"}).alloc(cpu=4, memory="8Gi").info(),
         {"required_node_affinity": (
             NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("a",)),)),
             NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("b",)),)))}, True),  # terms ORed
        (node("n1").labels({"zone": "b", "gen": "3"}).alloc(cpu=4, memory="8Gi").info(),
         {"required_node_affinity": (
             NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("b",)),
                               NodeSelectorRequirement("gen", "Gt", ("4",)))),)}, False),  # exprs ANDed
        (node("n1").alloc(cpu=4, memory="8Gi").info(), {"required_node_affinity": (NodeSelectorTerm(),)}, False),  # empty term
        (node("n1").alloc(cpu=4, memory="8Gi").info(), {"required_node_affinity": (
            NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", ("n1",)),)),)}, True),
        (node("n1").alloc(cpu=4, memory="8Gi").info(), {"required_node_affinity": (
            NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", ("n2",)),)),)}, False),
    ],
)
def test_node_filters(n, member_kw, fits):
    v = only(run([n], [group_request([pod(**member_kw)])]))
    assert (v.outcome == "Released") is fits
    if not fits:
        # the node's state (cordoned, NotReady) waits for the cluster; the member's own
        # constraints (selector, affinity, tolerations) are Unschedulable (issue 21 item 9)
        node_state = not n.ready or n.unschedulable
        assert v.outcome == ("ExceedsClusterCapacity" if node_state else "Unschedulable")


def test_exclusion_reasons_in_message():
    nodes = [node("t1").alloc(cpu=4, memory="8Gi").taint(TAINT).info(),
             node("t2").alloc(cpu=4, memory="8Gi").taint(TAINT).info(), node("ok").alloc(cpu=2, memory="8Gi").info(),
             node("c").alloc(cpu=4, memory="8Gi").unschedulable().info()]
    ms = [pod(cpu=2) for _ in range(2)]
    v = only(run(nodes, [group_request(ms)]))
    assert v.outcome == "ExceedsClusterCapacity"
    assert "fits 1 of 2" in v.message
    assert "cpu short by 2 on eligible nodes" in v.message
    assert "2 nodes excluded by taint dedicated=train" in v.message
    assert "1 node excluded by unschedulable (cordoned)" in v.message


def test_memory_shortfall_human_units():
    v = only(run([node("n1").alloc(cpu=8, memory="4Gi").info()],
                 [group_request([pod(cpu=1, mem=3), pod(cpu=1, mem=2.5)])]))
    assert "memory short by 1.5Gi" in v.message


# -- host ports ---------------------------------------------------------------------------


def test_host_port_taken_on_node():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info(), node("n2").alloc(cpu=4, memory="8Gi").info()]
    existing = [pod(group=None, node_name="n1", cpu=0, mem=0, host_ports=(HostPort(8080),))]
    m = pod(host_ports=(HostPort(8080, "TCP", "10.1.1.1"),))
    assert only(run(nodes, [group_request([m])], pods=existing)).release == {m.uid: "n2"}


def test_host_ports_between_members():
    nodes = [node("n1").alloc(cpu=8, memory="8Gi").info(), node("n2").alloc(cpu=8, memory="8Gi").info()]
    ms = [pod(host_ports=(HostPort(9000),)) for _ in range(3)]
    v = only(run(nodes, [group_request(ms)]))
    assert v.outcome == "ExceedsClusterCapacity" and v.fits == 2
    ms = [pod(host_ports=(HostPort(9000),)) for _ in range(2)]
    v = only(run(nodes, [group_request(ms)]))
    assert sorted(v.release.values()) == ["n1", "n2"]


def test_host_port_other_protocol_ok():
    existing = [pod(group=None, node_name="n1", cpu=0, mem=0, host_ports=(HostPort(53, "UDP"),))]
    m = pod(host_ports=(HostPort(53, "TCP"),))
    assert only(run([node("n1").alloc(cpu=4, memory="8Gi").info()],
                    [group_request([m])], pods=existing)).outcome == "Released"


def test_host_port_reserved_blocks():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    other = group_request([pod(group="o", gated=False)], name="o", released=True)
    r = Reservation(other.members[0].uid, "default", "x", "n1", {"cpu": 0}, (HostPort(80),), NOW + 30)
    m = pod(host_ports=(HostPort(80),))
    v = run(nodes, [other, group_request([m])], reservations=[r]).verdicts[1]
    assert v.outcome == "InsufficientCapacity"
    assert "host port in use" in v.message


# -- pod anti-affinity ------------------------------------------------------------------

ONE_PER_NODE = PodAffinityTerm("kubernetes.io/hostname", LabelSelector(((POD_GROUP_LABEL, "g"),)))


def test_anti_affinity_hostname_between_members():
    nodes = [node(f"n{i}").alloc(cpu=16, memory="8Gi").info() for i in range(3)]
    ms = [pod(required_pod_anti_affinity=(ONE_PER_NODE,)) for _ in range(3)]
    v = only(run(nodes, [group_request(ms)]))
    assert v.outcome == "Released" and sorted(v.release.values()) == ["n0", "n1", "n2"]
    ms = [pod(required_pod_anti_affinity=(ONE_PER_NODE,)) for _ in range(4)]
    v = only(run(nodes, [group_request(ms)]))
    assert v.outcome == "ExceedsClusterCapacity" and v.fits == 3


def test_anti_affinity_against_bound_pods_in_term_namespaces():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info(), node("n2").alloc(cpu=4, memory="8Gi").info()]
    term = PodAffinityTerm("kubernetes.io/hostname", LabelSelector((("app", "db"),)))
    db_same_ns = pod(group=None, node_name="n1", labels={"app": "db"}, cpu=0, mem=0)
    m = pod(required_pod_anti_affinity=(term,))
    assert only(run(nodes, [group_request([m])], pods=[db_same_ns])).release == {m.uid: "n2"}
    # a matching pod in another namespace does not count unless the term names it
    db_other = pod(group=None, ns="other", node_name="n1", labels={"app": "db"}, cpu=0, mem=0)
    m = pod(required_pod_anti_affinity=(term,))
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request([m])], pods=[db_other]))
    assert v.outcome == "Released"
    term_ns = PodAffinityTerm("kubernetes.io/hostname", LabelSelector((("app", "db"),)), namespaces=("other",))
    m = pod(required_pod_anti_affinity=(term_ns,))
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request([m])], pods=[db_other]))
    assert v.outcome == "InsufficientCapacity" and "pod anti-affinity" in v.message


def test_existing_pods_anti_affinity_is_symmetric():
    term = PodAffinityTerm("kubernetes.io/hostname", LabelSelector(((POD_GROUP_LABEL, "g"),)))
    loner = pod(group=None, node_name="n1", cpu=0, mem=0, required_pod_anti_affinity=(term,))
    m = pod()
    assert only(run([node("n1").alloc(cpu=4, memory="8Gi").info(),
                     node("n2").alloc(cpu=4, memory="8Gi").info()], [group_request([m])], pods=[loner])).release == {m.uid: "n2"}


def test_anti_affinity_zone_topology():
    nodes = [node("a1").labels({"zone": "a"}).alloc(cpu=4, memory="8Gi").info(),
             node("a2").labels({"zone": "a"}).alloc(cpu=4, memory="8Gi").info(),
             node("b1").labels({"zone": "b"}).alloc(cpu=4, memory="8Gi").info()]
    term = PodAffinityTerm("zone", LabelSelector(((POD_GROUP_LABEL, "g"),)))
    ms = [pod(required_pod_anti_affinity=(term,)) for _ in range(2)]
    v = only(run(nodes, [group_request(ms)]))
    assert v.outcome == "Released"
    zones = sorted({"a1": "a", "a2": "a", "b1": "b"}[n] for n in v.release.values())
    assert zones == ["a", "b"]
    ms = [pod(required_pod_anti_affinity=(term,)) for _ in range(3)]
    assert only(run(nodes, [group_request(ms)])).outcome == "ExceedsClusterCapacity"


def test_required_pod_affinity_satisfied_only_by_bound_pods():
    nodes = [node("a1").labels({"zone": "a"}).alloc(cpu=4, memory="8Gi").info(),
             node("b1").labels({"zone": "b"}).alloc(cpu=4, memory="8Gi").info()]
    term = PodAffinityTerm("zone", LabelSelector((("app", "db"),)))
    db = pod(group=None, node_name="b1", labels={"app": "db"}, cpu=0, mem=0)
    m = pod(required_pod_affinity=(term,))
    assert only(run(nodes, [group_request([m])], pods=[db])).release == {m.uid: "b1"}
    m = pod(required_pod_affinity=(term,))
    v = only(run(nodes, [group_request([m])]))
    assert v.outcome == "Unschedulable"
    assert "pod affinity" in v.message and v.release == {}


# -- competing groups, reservations --------------------------------------------------


def test_two_groups_same_room_exactly_one_released_then_the_other():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    a = group_request([pod(group="a", cpu=2) for _ in range(2)], name="a", created=1)
    b = group_request([pod(group="b", cpu=2) for _ in range(2)], name="b", created=2)
    d = run(nodes, [b, a])
    va, vb = d.verdicts[1], d.verdicts[0]
    assert (va.outcome, vb.outcome) == ("Released", "InsufficientCapacity")
    # still unbound: reservations hold the room on the next decision
    a_rel = group_request(a.members, name="a", created=1, released=True)
    d2 = run(nodes, [b, a_rel], reservations=d.reservations, now=NOW + 1)
    assert d2.verdicts[0].outcome == "InsufficientCapacity"
    assert {r.pod_uid for r in d2.reservations} == {m.uid for m in a.members}
    # a's pods bound then finished and gone: b is released
    d3 = run(nodes, [b], reservations=d2.reservations, now=NOW + 2)
    assert d3.verdicts[0].outcome == "Released"
    assert {r.pod_uid for r in d3.reservations} == {m.uid for m in b.members}


def test_reservation_dropped_when_pod_binds_and_not_double_counted():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    a = group_request([pod(group="a", cpu=2)], name="a", created=1)
    d = run(nodes, [a])
    (r,) = d.reservations
    bound_a = pod(group="a", cpu=2, node_name="n1", gated=False)
    bound_a = PodInfo(**{**bound_a.__dict__, "uid": r.pod_uid})
    a2 = group_request([bound_a], name="a", created=1, released=True)
    b = group_request([pod(group="b", cpu=2)], name="b", created=2)
    d2 = run(nodes, [a2, b], pods=[bound_a], reservations=d.reservations, now=NOW + 1)
    assert d2.verdicts[1].outcome == "Released"  # 2 cpu bound + 2 for b = 4: not double counted
    assert r.pod_uid not in {x.pod_uid for x in d2.reservations}


def test_reservation_holds_while_a_bound_member_is_not_yet_among_the_bound_pods():
    # The members watch shows the member bound before the bound-pods watch delivers it: its room
    # must stay charged (by the reservation) until the bound pods carry it, then only once.
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    a = group_request([pod(group="a", cpu=2) for _ in range(2)], name="a", created=1)
    d = run(nodes, [a])
    rs = {r.pod_uid: r for r in d.reservations}
    bound = [PodInfo(**{**m.__dict__, "node_name": "n1", "gates": ()}) for m in a.members]
    a2 = group_request(bound, name="a", created=1, released=True)
    b = group_request([pod(group="b", cpu=2)], name="b", created=2)
    for seen in range(3):  # 0, 1 or 2 of a's members already among the bound pods
        d2 = run(nodes, [a2, b], pods=bound[:seen], reservations=d.reservations, now=NOW + 1)
        assert d2.verdicts[1].outcome == "InsufficientCapacity", seen
        assert {r.pod_uid for r in d2.reservations} == set(rs) - {m.uid for m in bound[:seen]}


def test_reservation_dropped_when_pod_deleted():
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info()]
    ghost = Reservation("gone", "default", "x", "n1", {"cpu": 2000}, (), NOW + 30)
    d = run(nodes, [group_request([pod(cpu=2)])], reservations=[ghost])
    assert d.verdicts[0].outcome == "Released"
    assert "gone" not in {r.pod_uid for r in d.reservations}


def test_reservation_ttl():
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info()]
    waiting = pod(group="a", cpu=2, gated=False)
    a = group_request([waiting], name="a", released=True)
    r = Reservation(waiting.uid, "default", waiting.name, "n1", {"cpu": 2000}, (), NOW + 5)
    b = group_request([pod(group="b", cpu=2)], name="b", created=5)
    d = run(nodes, [a, b], reservations=[r])
    assert d.verdicts[1].outcome == "InsufficientCapacity"
    assert d.reservations == (r,)
    d = run(nodes, [a, b], reservations=[r], now=NOW + 5)
    assert d.verdicts[1].outcome == "Released"
    assert r not in d.reservations


def test_reservation_of_unreleased_gated_pod_is_replanned():
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info()]
    m = pod(cpu=2)
    r = Reservation(m.uid, "default", m.name, "n1", {"cpu": 2000}, (), NOW + 30)
    d = run(nodes, [group_request([m])], reservations=[r])
    assert d.verdicts[0].outcome == "Released"
    assert [x.pod_uid for x in d.reservations] == [m.uid]


def test_custom_ttl():
    d = run([node("n1").alloc(cpu=4, memory="8Gi").info()],
            [group_request([pod()])], cfg=PlannerConfig(reservation_ttl_seconds=7))
    assert d.reservations[0].expires == NOW + 7


# -- released groups ---------------------------------------------------------------------


def test_released_group_ungates_replacements_with_room_and_holds_the_rest_gated():
    """Issue 9 item 5: a new member of a released group is released only towards room the planner
    found (pinned, reserved); one without room stays gated, named, with what it lacks."""
    running = [pod(cpu=2, node_name="n1", gated=False) for _ in range(2)]
    new = pod(cpu=2)
    too_big = pod(cpu=100, name="too-big")
    g = group_request(running + [new, too_big], 2, released=True)
    d = run([node("n1").alloc(cpu=8, memory="8Gi").info()], [g], pods=running)
    v = only(d)
    assert v.outcome == "AlreadyReleased"
    assert v.release == {new.uid: "n1"}
    assert v.waiting == ("too-big",)
    assert "1 member (too-big) waits gated for capacity: cpu short by" in v.message
    assert [r.pod_uid for r in d.reservations] == [new.uid]


def test_rollout_surge_pod_on_a_full_cluster_waits_gated_until_an_old_member_goes():
    """Deployment gang (minMember 2, 2 x 2 CPU) on two full 2-CPU nodes, maxSurge 1: the surge pod
    has no room, so it stays gated (not ungated into Unschedulable); once an old member is gone
    (maxUnavailable >= 1) its room takes the new one, pinned there."""
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info(), node("n2").alloc(cpu=2, memory="8Gi").info()]
    old = [pod(cpu=2, node_name=f"n{i}", gated=False, name=f"old-{i}") for i in (1, 2)]
    surge = pod(cpu=2, name="surge")
    v = only(run(nodes, [group_request(old + [surge], 2, released=True)], pods=old))
    assert v.release == {} and v.waiting == ("surge",)
    v = only(run(nodes, [group_request(old[1:] + [surge], 2, released=True)], pods=old[1:]))
    assert v.release == {surge.uid: "n1"} and v.waiting == ()


def test_released_group_new_member_held_by_another_gate_too_stays_gated():
    other = pod(cpu=1, gates=(GATE, "example.com/other"), name="both")
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request([other], 1, released=True)]))
    assert v.release == {} and v.waiting == ("both",)
    assert "also held by other scheduling gates" in v.message


def test_released_group_that_lost_quorum_still_ungates():
    g = group_request([pod(cpu=1)], 3, released=True)
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [g]))
    assert v.outcome == "AlreadyReleased" and list(v.release.values()) == ["n1"]


def test_released_group_gated_member_with_reservation_keeps_node():
    m = pod(cpu=2)
    r = Reservation(m.uid, "default", m.name, "n2", {"cpu": 2000}, (), NOW + 30)
    d = run([node("n1").alloc(cpu=2, memory="8Gi").info(),
             node("n2").alloc(cpu=2, memory="8Gi").info()], [group_request([m], released=True)], reservations=[r])
    assert only(d).release == {m.uid: "n2"}
    assert d.reservations == (r,)


# -- order, blocking, backfill, starvation -------------------------------------------


def test_priority_before_age():
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info()]
    old = group_request([pod(group="old", cpu=2, priority=0)], name="old", created=1)
    new = group_request([pod(group="new", cpu=2, priority=100)], name="new", created=2)
    d = run(nodes, [old, new])
    assert [v.outcome for v in d.verdicts] == ["InsufficientCapacity", "Released"]


def test_age_then_name_order():
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info()]
    x = group_request([pod(group="x", cpu=2)], name="x", created=5)
    y = group_request([pod(group="y", cpu=2)], name="y", created=3)
    assert [v.outcome for v in run(nodes, [x, y]).verdicts] == ["InsufficientCapacity", "Released"]
    b = group_request([pod(group="b", cpu=2)], name="b", created=3)
    a = group_request([pod(group="a", cpu=2)], name="a", created=3)
    assert [v.outcome for v in run(nodes, [b, a]).verdicts] == ["InsufficientCapacity", "Released"]


def test_group_priority_is_highest_member_priority():
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info()]
    a = group_request([pod(group="a", cpu=1, priority=0), pod(group="a", cpu=1, priority=50)], name="a", created=9)
    b = group_request([pod(group="b", cpu=2, priority=10)], name="b", created=1)
    assert [v.outcome for v in run(nodes, [a, b]).verdicts] == ["Released", "InsufficientCapacity"]


def test_exceeds_cluster_capacity_never_blocks():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    huge = group_request([pod(group="huge", cpu=8, priority=1000)], name="huge", created=0)
    small = group_request([pod(group="small", cpu=1)], name="small", created=1)
    d = run(nodes, [huge, small], now=1e9)  # huge has waited "forever"
    assert [v.outcome for v in d.verdicts] == ["ExceedsClusterCapacity", "Released"]
    assert "fits 0 of 1 even with every eligible node empty: cpu short by" in d.verdicts[0].message


def test_backfill_before_starvation():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    busy = [pod(group=None, node_name="n1", cpu=2)]
    big = group_request([pod(group="big", cpu=3, created=100)], name="big", created=100)
    small = group_request([pod(group="small", cpu=1, created=200)], name="small", created=200)
    d = run(nodes, [big, small], pods=busy, now=100 + 299)
    assert [v.outcome for v in d.verdicts] == ["InsufficientCapacity", "Released"]


def test_starving_group_blocks_later_groups():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    busy = [pod(group=None, node_name="n1", cpu=2)]
    big = group_request([pod(group="big", cpu=3, created=100)], name="big", created=100)
    small = group_request([pod(group="small", cpu=1, created=200)], name="small", created=200)
    d = run(nodes, [big, small], pods=busy, now=100 + 300)
    assert [v.outcome for v in d.verdicts] == ["InsufficientCapacity", "InsufficientCapacity"]
    assert "starving" in d.verdicts[0].message
    assert "default/big" in d.verdicts[1].message
    assert d.reservations == ()
    # once room frees, the starving group goes first
    d = run(nodes, [big, small], now=100 + 400)
    assert [v.outcome for v in d.verdicts] == ["Released", "Released"]


def test_starvation_measured_from_completion():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    busy = [pod(group=None, node_name="n1", cpu=2)]
    # group created long ago but its last member only arrived at t=1000
    big = group_request([pod(group="big", cpu=1.5, created=0), pod(group="big", cpu=1.5, created=1000)], name="big", created=0)
    small = group_request([pod(group="small", cpu=1, created=1)], name="small", created=1)
    d = run(nodes, [big, small], pods=busy, now=1200)
    assert [v.outcome for v in d.verdicts] == ["InsufficientCapacity", "Released"]
    d = run(nodes, [big, small], pods=busy, now=1300, cfg=PlannerConfig(starvation_seconds=300))
    assert [v.outcome for v in d.verdicts] == ["InsufficientCapacity", "InsufficientCapacity"]


def test_starving_group_does_not_block_released_groups():
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    busy = [pod(group=None, node_name="n1", cpu=2)]
    big = group_request([pod(group="big", cpu=3)], name="big", created=0)
    rel = group_request([pod(group="rel", cpu=1)], name="rel", created=50, released=True)
    d = run(nodes, [big, rel], pods=busy, now=1e6)
    assert d.verdicts[1].outcome == "AlreadyReleased"
    assert list(d.verdicts[1].release.values()) == ["n1"]


def test_starving_group_blocks_only_groups_that_could_use_its_nodes():
    """Issue 9 item 3: a1 (pool=a) runs a plain 6-CPU pod, b1 (pool=b) is empty; ``big`` needs two
    4-CPU members on pool=a and starves after 300 s. A one-member group on pool=b takes nothing
    ``big`` could use, so it is released; one that could use pool=a still waits behind it."""
    nodes = [node("a1").labels({"pool": "a"}).alloc(cpu=8, memory="8Gi").info(),
             node("b1").labels({"pool": "b"}).alloc(cpu=8, memory="8Gi").info()]
    busy = [pod(group=None, node_name="a1", cpu=6)]
    big = group_request([pod(group="big", cpu=4, created=0, node_selector={"pool": "a"}) for _ in range(2)], name="big", created=0)
    on_b = group_request([pod(group="onb", cpu=1, created=10, node_selector={"pool": "b"})], name="onb", created=10)
    anywhere = group_request([pod(group="any", cpu=1, created=20)], name="any", created=20)
    cfg = PlannerConfig(starvation_seconds=300)
    d = run(nodes, [big, on_b, anywhere], pods=busy, now=299, cfg=cfg)
    assert [v.outcome for v in d.verdicts] == ["InsufficientCapacity", "Released", "Released"]
    d = run(nodes, [big, on_b, anywhere], pods=busy, now=300, cfg=cfg)
    assert [v.outcome for v in d.verdicts] == ["InsufficientCapacity", "Released", "InsufficientCapacity"]
    assert "starving" in d.verdicts[0].message
    assert "waiting behind starving PodGroup default/big" in d.verdicts[2].message
    assert d.verdicts[1].release == {on_b.members[0].uid: "b1"}


def test_starvation_scope_covers_every_node_with_pod_anti_affinity():
    nodes = [node("a1").labels({"pool": "a"}).alloc(cpu=8, memory="8Gi").info(),
             node("b1").labels({"pool": "b"}).alloc(cpu=8, memory="8Gi").info()]
    busy = [pod(group=None, node_name="a1", cpu=6)]
    big = group_request([pod(group="big", cpu=4, node_selector={"pool": "a"}) for _ in range(2)], name="big")
    anti = (PodAffinityTerm("zone", LabelSelector((("app", "x"),))),)
    on_b = group_request([pod(group="onb", cpu=1, created=10, node_selector={"pool": "b"},
                      required_pod_anti_affinity=anti)], name="onb", created=10)
    d = run(nodes, [big, on_b], pods=busy, now=1000)
    assert [v.outcome for v in d.verdicts] == ["InsufficientCapacity", "InsufficientCapacity"]


def test_group_with_a_member_running_alone_that_can_never_fit_is_not_judged_to_fit():
    """Issue 9 item 3: minMember 3, three 2-CPU members, one 4-CPU node; one member's gate was
    removed by hand and it runs. The empty-cluster check charges it: 1 placed + 1 more fits,
    never 3, so the group exceeds the cluster (and never becomes the starving group others wait
    behind), instead of FitsCluster turning True."""
    nodes = [node("n1").alloc(cpu=4, memory="8Gi").info()]
    alone = pod(group="g", cpu=2, node_name="n1", gated=False)
    g = group_request([alone, pod(group="g", cpu=2), pod(group="g", cpu=2)], 3, name="g")
    later = group_request([pod(group="later", cpu=1, created=5)], name="later", created=5)
    d = run(nodes, [g, later], pods=[alone], now=1e6)
    assert d.verdicts[0].outcome == "ExceedsClusterCapacity"
    assert "fits 2 of 3 even with every eligible node empty" in d.verdicts[0].message
    assert d.verdicts[1].outcome == "Released"


def test_waiting_group_never_blocks():
    nodes = [node("n1").alloc(cpu=2, memory="8Gi").info()]
    w = group_request([pod(group="w", cpu=2)], 5, name="w", created=0)
    s = group_request([pod(group="s", cpu=2)], name="s", created=10)
    assert [v.outcome for v in run(nodes, [w, s], now=1e6).verdicts] == ["WaitingForMembers", "Released"]


def test_verdicts_follow_input_order_and_are_deterministic():
    nodes = [node(f"n{i}").alloc(cpu=3, memory="8Gi").info() for i in range(3)]
    groups = [group_request([pod(group=f"g{i}", cpu=2) for _ in range(2)], name=f"g{i}", created=i) for i in range(3)]
    d1 = run(nodes, groups)
    d2 = run(nodes, groups)
    assert d1 == d2
    assert [v.name for v in d1.verdicts] == ["g0", "g1", "g2"]
    assert [v.outcome for v in d1.verdicts] == ["Released", "InsufficientCapacity", "InsufficientCapacity"]
    check_plan_valid(nodes, [], [], d1, groups)


def test_all_bound_group_releases_nothing_pending():
    bound = [pod(node_name="n1", gated=False) for _ in range(2)]
    v = only(run([node("n1").alloc(cpu=4, memory="8Gi").info()], [group_request(bound)], pods=bound))
    assert v.outcome == "Released" and v.release == {} and v.fits == 2


def test_shortfall_message_names_fragmentation_not_only_totals():
    # 3 nodes of 8 cpu, 4 members of 7 cpu: totals say "short by 4", but what is missing is a node with 7 free.
    nodes = [node(f"n{i}").alloc(cpu=8, memory="16Gi").info() for i in range(3)]
    v = only(run(nodes, [group_request([pod(cpu=7) for _ in range(4)])]))
    assert v.outcome == "ExceedsClusterCapacity"
    assert v.message == ("fits 3 of 4 even with every eligible node empty: cpu short by 4 on eligible nodes "
                         "(at most 1 free on one node, a member requests 7)")


def test_shortfall_message_with_room_taken_by_bound_pods():
    nodes = [node("n0").alloc(cpu=8, memory="16Gi").info()]
    bound = [pod(group=None, cpu=5, node_name="n0")]
    v = only(run(nodes, [group_request([pod(cpu=2) for _ in range(3)])], pods=bound, now=0.0))
    assert v.outcome == "InsufficientCapacity"
    assert v.message == "fits 1 of 3: cpu short by 3 on eligible nodes (at most 1 free on one node, a member requests 2)"


# -- pinned members whose node became unusable (issue 9 item 1) ---------------------------


def pinned(cpu=4, node_name="n1", name=None, created=0.0, **kw):
    pin = NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (node_name,)),))
    return pod(cpu=cpu, gated=False, name=name, created=created, required_node_affinity=(pin,), **kw), node_name


@pytest.mark.parametrize("change, reason", [
    (lambda n: n.taint(Taint("maint", "now", "NoSchedule")), "node n1 has taint maint=now"),
    (lambda n: n.unschedulable(), "node n1 is unschedulable (cordoned)"),
    (lambda n: n.not_ready(), "node n1 is not Ready"),
])
def test_pinned_node_that_became_unusable_is_named(change, reason):
    a, b = pinned(name="k-0"), pinned(name="k-1")
    assert pinned_node_problems([node("n1").alloc(cpu=8, memory="8Gi").info()], [], [a, b]) == {}
    got = pinned_node_problems([change(node("n1").alloc(cpu=8, memory="8Gi")).info()], [], [a, b])
    assert got == {a[0].uid: reason, b[0].uid: reason}


def test_pinned_node_deleted_or_room_taken():
    a, b = pinned(name="k-0", created=1), pinned(name="k-1", created=2)
    assert pinned_node_problems([node("n2").alloc(cpu=8, memory="8Gi").info()],
                                [], [a]) == {a[0].uid: "node n1 no longer exists"}
    other = pod(group=None, cpu=2, node_name="n1")  # bound after the release, outside cogate's control
    got = pinned_node_problems([node("n1").alloc(cpu=8, memory="8Gi").info()], [other], [a, b])
    assert got == {b[0].uid: "node n1: room taken (cpu: 2 free, the member requests 4)"}


def test_pinned_node_tolerated_taint_and_bound_members_are_fine():
    tol = (Toleration("maint", "Exists"),)
    a = pinned(tolerations=tol)
    assert pinned_node_problems([node("n1").alloc(cpu=4, memory="8Gi").taint(Taint("maint", "now", "NoSchedule")).info()], [], [a]) == {}
    # the member cache lags: its uid is already among the bound pods -> not judged (no double count)
    m, _ = a
    bound_copy = PodInfo(m.namespace, m.name, m.uid, labels=m.labels, node_name="n1", phase="Running",
                         requests=m.requests)
    assert pinned_node_problems([node("n1").alloc(cpu=4, memory="8Gi").info()], [bound_copy], [a]) == {}
