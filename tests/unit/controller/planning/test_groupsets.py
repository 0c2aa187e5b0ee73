"""Sets of PodGroups in planning (cogate.controller.planning.groupsets): all or nothing, k of n,
competing sets, KEP-6012's stealing shape, and the incremental planner agreeing with a rebuild."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model import groupsets as gs
from cogate.controller.model.records import NodeInfo, PodInfo
from cogate.controller.planning.planner import GroupRequest, PlannerConfig, decide
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.status.inputs import build_group_requests
from tests.builders.objects import podgroup

NS = "t"


def node(name: str, cpu: int) -> NodeInfo:
    return NodeInfo(name, labels={"kubernetes.io/hostname": name}, allocatable={"cpu": cpu * 1000, "pods": 110})


def members(group: str, n: int, cpu: int, created: float = 0.0) -> tuple[PodInfo, ...]:
    return tuple(PodInfo(NS, f"{group}-{i}", f"{group}-{i}", labels={POD_GROUP_LABEL: group},
                         requests={"cpu": cpu * 1000}, gates=(GATE,), created=created + i) for i in range(n))


def group(name: str, n: int, cpu: int, min_member: int | None = None, sset: tuple[str, ...] = (),
          minimum: int | None = None, created: float = 0.0, released: bool = False) -> GroupRequest:
    spec = None
    if sset:
        keys = tuple(sorted((NS, s) for s in sset))
        spec = gs.SetSpec(keys, minimum or len(keys), gs.SET_ANNOTATION)
    return GroupRequest(NS, name, n if min_member is None else min_member, created, released,
                        members(name, n, cpu, created), group_set=spec)


def verdicts(nodes, groups):
    d = decide(nodes, [], groups, [], 1000.0, PlannerConfig())
    return {v.name: v for v in d.verdicts}


def planned(v) -> int:
    return sum(1 for n in v.release.values() if n)


def test_ps_and_workers_where_only_ps_fits_release_neither():
    ps = group("ps", 1, 2, sset=("ps", "workers"))
    workers = group("workers", 4, 3, sset=("ps", "workers"), created=1)
    got = verdicts([node("n0", 10)], [ps, workers])
    # the workers never fit 10 CPU: each group says so (FitsCluster=False), ps naming the workers
    assert got["ps"].outcome == "ExceedsClusterCapacity" and got["ps"].release == {}, got["ps"]
    assert got["ps"].message.startswith("fits 1 of 1, but waits for set [ps, workers] (1 of 2 groups needed fit): "
                                        "PodGroup workers is short: fits 3 of 4 even with every eligible node empty"), got["ps"].message
    assert got["workers"].outcome == "ExceedsClusterCapacity" and got["workers"].release == {}
    assert got["workers"].message.endswith("; set [ps, workers] waits for it (1 of 2 groups needed fit)")
    # alone, ps would have been released
    assert verdicts([node("n0", 10)], [group("ps", 1, 2), group("workers", 4, 3, created=1)])["ps"].outcome == \
        "Released"


def test_a_set_that_fits_is_released_together_and_holds_its_room():
    ps = group("ps", 1, 2, sset=("ps", "workers"))
    workers = group("workers", 2, 3, sset=("ps", "workers"), created=1)
    other = group("other", 1, 4, created=2)
    got = verdicts([node("n0", 10)], [ps, workers, other])
    assert got["ps"].outcome == got["workers"].outcome == "Released"
    assert planned(got["ps"]) + planned(got["workers"]) == 3
    assert got["other"].outcome == "InsufficientCapacity"  # 2 + 6 taken: 2 left of 10


def test_a_held_set_holds_no_room_for_others():
    ps = group("ps", 1, 2, sset=("ps", "workers"))
    workers = group("workers", 4, 3, sset=("ps", "workers"), created=1)
    later = group("later", 2, 4, created=5)
    got = verdicts([node("n0", 10)], [ps, workers, later])
    assert got["later"].outcome == "Released" and planned(got["later"]) == 2


def test_two_sets_competing_for_one_room_one_runs():
    a = [group("a1", 2, 2, sset=("a1", "a2")), group("a2", 1, 2, sset=("a1", "a2"), created=1)]
    b = [group("b1", 2, 2, sset=("b1", "b2"), created=2), group("b2", 1, 2, sset=("b1", "b2"), created=3)]
    got = verdicts([node("n0", 6)], b + a)
    assert [got[n].outcome for n in ("a1", "a2")] == ["Released", "Released"]
    assert [got[n].release for n in ("b1", "b2")] == [{}, {}]
    assert "waits for set [b1, b2]" in got["b2"].message or "set [b1, b2] waits for it" in got["b2"].message


def test_kep_6012_stealing_shape_places_two_and_two():
    """Two children of minimum 2, one with 4 pods, room for 4: CompositePodGroup's greedy child
    takes 4; cogate places each child's minimum (2 + 2) and the other 2 wait gated."""
    big = group("big", 4, 1, min_member=2, sset=("big", "small"))
    small = group("small", 2, 1, sset=("big", "small"), created=5)
    got = verdicts([node("n0", 4)], [big, small])
    assert got["big"].outcome == got["small"].outcome == "Released", got
    assert (planned(got["big"]), planned(got["small"])) == (2, 2)
    assert set(got["big"].waiting) == {"big-2", "big-3"}


def test_k_of_n_releases_the_groups_that_fit_once_k_do():
    rs = ("r0", "r1", "r2")
    groups = [group(r, 2, 2, sset=rs, minimum=2, created=i) for i, r in enumerate(rs)]
    got = verdicts([node("n0", 8)], groups)
    assert [got[r].outcome for r in rs] == ["Released", "Released", "InsufficientCapacity"]
    assert verdicts([node("n0", 4)], groups)["r0"].release == {}


def test_once_the_minimum_stands_the_others_join_alone():
    rs = ("r0", "r1")
    groups = [group("r0", 2, 2, sset=rs, minimum=1, released=True), group("r1", 2, 2, sset=rs, minimum=1)]
    got = verdicts([node("n0", 8)], groups)
    assert got["r1"].outcome == "Released"


def test_a_set_that_does_not_form_waits_and_one_that_cannot_be_read_is_unschedulable():
    got = verdicts([node("n0", 10)], [group("a", 1, 1, sset=("a", "b")), group("b", 1, 1)])
    assert got["a"].outcome == "WaitingForMembers" and "PodGroup b names no set" in got["a"].message
    assert got["b"].outcome == "Released"
    pg = podgroup("x", NS).annotations({gs.SET_ANNOTATION: "nope"}).info()
    req = build_group_requests([pg], {})[0]
    assert req.group_set is None and req.group_set_error.startswith(f"annotation {gs.SET_ANNOTATION}: not JSON")
    v = decide([node("n0", 1)], [], [req], [], 0.0, PlannerConfig()).verdicts[0]
    assert v.outcome == "Unschedulable" and v.message.startswith("invalid annotation")


def test_annotations_are_read_into_the_request():
    pg = podgroup("ps", NS).annotations({gs.SET_ANNOTATION: '["workers"]'}).info()
    assert build_group_requests([pg], {})[0].group_set == gs.SetSpec(((NS, "ps"), (NS, "workers")), 2, gs.SET_ANNOTATION)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(0, 2)), min_size=2, max_size=4),
       st.integers(2, 12), st.booleans())
def test_the_incremental_planner_agrees_and_a_set_is_all_or_nothing(shapes, cpu, pair):
    names = [f"g{i}" for i in range(len(shapes))]
    sset = tuple(names[:2]) if pair else tuple(names)
    groups = [group(n, size, c, min_member=max(1, size - extra) if extra < size else 1, sset=sset if n in sset else (),
                    created=i)
              for i, (n, (size, c, extra)) in enumerate(zip(names, shapes))]
    nodes = [node("n0", cpu), node("n1", cpu // 2)]
    d = decide(nodes, [], groups, [], 1000.0, PlannerConfig())
    state = PlanningState()
    for n in nodes:
        state.upsert_node(n)
    for _ in range(2):
        assert state.decide(groups, [], 1000.0) == d
    released = {v.name for v in d.verdicts if v.outcome == "Released"}
    assert not released & set(sset) or set(sset) <= released
