"""Role minimums in planning (cogate.controller.planning.roles): tables and properties against a brute force.

Properties on small random cases (1 to 3 nodes, two roles and members of no role):
* a released group's plan is a valid placement in which every role has its minimum and the group
  minMember (so a group whose role minimum cannot be placed is never released);
* non-greedy: members beyond the role minimums never make a group wait that would be released
  without them (no role is left below its minimum because another role's surplus took its room);
* on one node with one resource and members of one shape per role, the planner releases exactly
  when a brute force finds a placement of every role's minimum.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model import roles as roles_mod
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.planning.planner import GroupRequest, PlannerConfig, decide
from cogate.controller.status.inputs import build_group_requests
from tests.builders.objects import pod, podgroup

ROLE = "tier"
GPU = "nvidia.com/gpu"


def node(name: str, cpu: int, gpu: int = 0, pods: int = 110) -> NodeInfo:
    return NodeInfo(name, labels={"kubernetes.io/hostname": name},
                    allocatable={"cpu": cpu * 1000, "memory": 1 << 40, "pods": pods, **({GPU: gpu} if gpu else {})})


def member(name: str, role: str, cpu: int, gpu: int = 0, created: float = 0.0, label: str = ROLE,
           bound_on: str = "") -> PodInfo:
    labels = {POD_GROUP_LABEL: "g", **({label: role} if role else {})}
    req = {"cpu": cpu * 1000, **({GPU: gpu} if gpu else {})}
    if bound_on:
        return PodInfo("default", name, name, labels=labels, requests=req, node_name=bound_on, phase="Running",
                       created=created)
    return PodInfo("default", name, name, labels=labels, requests=req, gates=(GATE,), created=created)


def group(members, min_member: int, minimums: dict[str, int] | None, label: str = ROLE) -> GroupRequest:
    roles = None if minimums is None else roles_mod.Roles(tuple(sorted(minimums.items())), label)
    return GroupRequest("default", "g", min_member, 0.0, False, tuple(members), roles=roles)


def verdict(nodes, g, bound=()):
    return decide(nodes, list(bound), [g], [], 1000.0, PlannerConfig()).verdicts[0]


# -- tables

def ray_shape(cpu_workers: int, gpus: int = 1):
    """KubeRay: head (1 CPU), ``cpu_workers`` CPU workers (2 CPU), 2 GPU workers (1 CPU, 1 GPU each);
    one node of 12 CPU and ``gpus`` GPUs."""
    ms = [member("head", "headgroup", 1, created=0, label="ray.io/group")]
    ms += [member(f"cpu-{i}", "cpu", 2, created=1 + i, label="ray.io/group") for i in range(cpu_workers)]
    ms += [member(f"gpu-{i}", "gpu", 1, gpu=1, created=10 + i, label="ray.io/group") for i in range(2)]
    return [node("n0", 12, gpu=gpus)], ms


def test_kuberay_surplus_cpu_workers_do_not_satisfy_a_short_gpu_group():
    nodes, ms = ray_shape(4)
    # scheduler-plugins' (and KubeRay's) global rule: minMember 5 is met by head + 4 CPU workers
    assert verdict(nodes, group(ms, 5, None)).outcome == "Released"
    # by the operators' default labels (ray.io/group), no role label named
    v = verdict(nodes, group(ms, 5, {"headgroup": 1, "cpu": 2, "gpu": 2}, label=""))
    assert v.outcome == "ExceedsClusterCapacity", v
    assert "fits all 5 (room for 6) even with every eligible node empty, but role gpu fits 1 of 2: nvidia.com/gpu short by 1" in v.message, \
        v.message
    assert v.release == {}


def test_a_role_short_of_room_taken_by_others_is_named():
    nodes, ms = ray_shape(2, gpus=2)
    other = PodInfo("default", "other", "other", requests={"cpu": 1000, GPU: 1}, node_name="n0", phase="Running")
    v = verdict(nodes, group(ms, 5, {"headgroup": 1, "cpu": 2, "gpu": 2}, label="ray.io/group"), [other])
    assert v.outcome == "InsufficientCapacity", v
    assert v.message.startswith("fits 4 of 5: role gpu fits 1 of 2: nvidia.com/gpu short by 1"), v.message


def test_role_minimums_are_placed_before_surplus_members_of_any_role():
    # one node of 6 CPU: the 4 surplus workers (oldest) of 1 CPU would take all the room of the
    # two 2-CPU parameter servers if packed greedily (pack places the smaller batch first when it
    # has more members than needed); role minimums are placed first
    ms = [member(f"w{i}", "worker", 1, created=i) for i in range(4)]
    ms += [member(f"ps{i}", "ps", 2, created=10 + i) for i in range(2)]
    v = verdict([node("n0", 6)], group(ms, 4, {"worker": 2, "ps": 2}))
    assert v.outcome == "Released", v
    planned = {u for u, n in v.release.items() if n}
    assert {"ps0", "ps1", "w0", "w1"} <= planned and len(planned) == 4, v.release
    assert set(v.waiting) == {"w2", "w3"}


def test_bound_members_count_for_their_role():
    bound = [member("ps0", "ps", 2, bound_on="n0")]
    ms = bound + [member("w0", "worker", 1, created=1), member("w1", "worker", 1, created=2)]
    v = verdict([node("n0", 4)], group(ms, 3, {"ps": 1, "worker": 2}), bound)
    assert v.outcome == "Released" and v.fits == 3, v


def test_a_role_with_too_few_members_waits_for_members_and_is_named():
    ms = [member("l0", "launcher", 1), member("w0", "worker", 1, created=1)]
    ms += [member(f"x{i}", "", 1, created=2 + i) for i in range(2)]
    v = verdict([node("n0", 10)], group(ms, 4, {"launcher": 1, "worker": 2}))
    assert v.outcome == "WaitingForMembers", v
    assert v.message == "role worker: 1 of 2 members present (role read from tier)", v.message


def test_a_job_scaled_down_below_its_role_minimums_is_told_what_to_change():
    """The operator lowered minMember to the 3 members it keeps; the annotation still asks 1 + 4."""
    ms = [member("l0", "launcher", 1)] + [member(f"w{i}", "worker", 1, created=1 + i) for i in range(2)]
    v = verdict([node("n0", 10)], group(ms, 3, {"launcher": 1, "worker": 4}))
    assert v.outcome == "WaitingForMembers", v
    assert v.message == ("role worker: 2 of 4 members present (role read from tier); the 3 members present meet "
                         "minMember 3 but the role minimums ask for 5: if the job was scaled down, lower annotation "
                         "cogate.dev/role-minimums (cogate never lowers it)"), v.message


def test_role_minimums_above_min_member_still_hold():
    """Volcano skips minTaskMember when minAvailable is below the sum; cogate holds both."""
    ms = [member("a0", "a", 4), member("b0", "b", 4, created=1), member("b1", "b", 4, created=2)]
    v = verdict([node("n0", 8)], group(ms, 1, {"a": 1, "b": 2}))
    assert v.outcome == "ExceedsClusterCapacity", v
    assert "fits all 1 (room for 2) even with every eligible node empty, but role b fits 1 of 2" in v.message, v.message


def test_min_member_above_the_role_minimums_takes_extras_after_them():
    ms = [member("a0", "a", 1), member("a1", "a", 1, created=1), member("x", "", 1, created=2)]
    v = verdict([node("n0", 3)], group(ms, 3, {"a": 1}))
    assert v.outcome == "Released" and len([n for n in v.release.values() if n]) == 3, v
    v = verdict([node("n0", 2)], group(ms, 3, {"a": 1}))
    assert v.outcome == "ExceedsClusterCapacity" and v.message.startswith("fits 2 of 3 even with"), v


def test_unreadable_role_annotations_hold_the_group_unschedulable():
    pg = podgroup("g").min_member(1).annotations({roles_mod.ROLE_MINIMUMS_ANNOTATION: '{"w": 0}'}).info()
    m = pod("m").group("g").req(cpu=1).gated().info()
    req = build_group_requests([pg], {(pg.pg.metadata.namespace, "g"): [m]})[0]
    assert req.roles is None and "minimum of role 'w' is 0" in req.roles_error
    v = decide([node("n0", 4)], [], [req], [], 1000.0, PlannerConfig()).verdicts[0]
    assert v.outcome == "Unschedulable" and v.message.startswith(f"invalid annotation {roles_mod.ROLE_MINIMUMS_ANNOTATION}")


def test_annotations_are_read_into_the_request():
    pg = podgroup("g").min_member(2).annotations({roles_mod.ROLE_MINIMUMS_ANNOTATION: '{"w": 2}',
                                                  roles_mod.ROLE_LABEL_ANNOTATION: "app/role"}).info()
    req = build_group_requests([pg], {})[0]
    assert req.roles == roles_mod.Roles((("w", 2),), "app/role") and req.roles_error == ""


# -- properties against a brute force

@st.composite
def cases(draw, one_node: bool = False):
    n_nodes = 1 if one_node else draw(st.integers(1, 3))
    nodes = [node(f"n{i}", draw(st.integers(0, 5)), gpu=0 if one_node else draw(st.integers(0, 2)),
                  pods=draw(st.integers(1, 4)) if not one_node else 110) for i in range(n_nodes)]
    minimums = {"a": draw(st.integers(1, 2)), "b": draw(st.integers(1, 2))}
    ms: list[PodInfo] = []
    shape = {r: (draw(st.integers(0, 3)), 0 if one_node else draw(st.integers(0, 1))) for r in ("a", "b", "")}
    t = 0.0
    for role, n in minimums.items():  # the minimum members first (oldest), then the extras
        for _ in range(n):
            cpu, gpu = shape[role] if one_node else (draw(st.integers(0, 3)), draw(st.integers(0, 1)))
            ms.append(member(f"m{len(ms)}", role, cpu, gpu, created=t))
            t += 1
    extras = []
    for _ in range(draw(st.integers(0, 3))):
        role = draw(st.sampled_from(["a", "b", ""]))
        cpu, gpu = shape[role] if one_node else (draw(st.integers(0, 3)), draw(st.integers(0, 1)))
        extras.append(member(f"m{len(ms) + len(extras)}", role, cpu, gpu, created=t))
        t += 1
    min_member = draw(st.integers(1, sum(minimums.values())))
    return nodes, ms, extras, minimums, min_member


def valid(nodes, placed) -> bool:
    for n in nodes:
        here = [p for p, nn in placed if nn == n.name]
        if len(here) > n.allocatable["pods"]:
            return False
        for r in ("cpu", GPU):
            if sum(p.requests.get(r, 0) for p in here) > n.allocatable.get(r, 0):
                return False
    return True


def brute_force(nodes, ms, minimums, min_member) -> bool:
    """A placement exists in which every role has its minimum and the group minMember."""
    for choice in itertools.product([None] + [n.name for n in nodes], repeat=len(ms)):
        placed = [(m, c) for m, c in zip(ms, choice) if c is not None]
        if len(placed) < min_member:
            continue
        got = {r: sum(1 for m, _ in placed if m.labels.get(ROLE) == r) for r in minimums}
        if all(got[r] >= n for r, n in minimums.items()) and valid(nodes, placed):
            return True
    return False


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_a_release_places_every_role_minimum_validly(case):
    nodes, ms, extras, minimums, min_member = case
    members = ms + extras
    v = verdict(nodes, group(members, min_member, minimums))
    if v.outcome != "Released":
        return
    by = {m.uid: m for m in members}
    placed = [(by[u], n) for u, n in v.release.items() if n]
    assert valid(nodes, placed)
    assert len(placed) >= min_member
    for r, n in minimums.items():
        assert sum(1 for m, _ in placed if m.labels.get(ROLE) == r) >= n, (r, v)
    assert brute_force(nodes, members, minimums, min_member)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_surplus_members_never_make_a_group_wait(case):
    nodes, ms, extras, minimums, min_member = case
    alone = verdict(nodes, group(ms, min_member, minimums))
    with_extras = verdict(nodes, group(ms + extras, min_member, minimums))
    if alone.outcome == "Released":
        assert with_extras.outcome == "Released", (alone, with_extras)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(one_node=True))
def test_on_one_node_release_is_exactly_when_the_minimums_fit(case):
    nodes, ms, extras, minimums, min_member = case
    members = ms + extras
    v = verdict(nodes, group(members, min_member, minimums))
    assert (v.outcome == "Released") == brute_force(nodes, members, minimums, min_member), v
