"""Slices (issue 32 item 1): ranks from the operators' labels, the search that puts each slice in one
domain (controller/topology/slices.py) against a brute force, and the planner placing slices
(controller/planning/sliced.py through controller/planning/fenced.py) against a brute force over
small labelled clusters."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.controller.planning.planner import Outcome, decide
from cogate.controller.topology import constraints as t
from cogate.controller.topology.constraints import HOSTNAME_LABEL as HOST
from cogate.controller.topology.constraints import Constraint, TopologyError
from cogate.controller.topology.slices import COMPLETION_INDEX, JOB_INDEX, Slice, assign, ranks, slices_of
from tests.builders import group_request, node, pod

LEVELS = ("block", "rack", HOST)
LWS = "leaderworkerset.sigs.k8s.io/worker-index"


def test_ranks_from_each_operator_label():
    assert ranks([("a", "a", {COMPLETION_INDEX: "3"}), ("b", "b", {LWS: "0"})]) == {"a": 3, "b": 0}
    # a JobSet: job index x pods per Job (largest completion index + 1) + completion index
    jobset = [(f"{j}-{c}", f"{j}-{c}", {JOB_INDEX: str(j), COMPLETION_INDEX: str(c)}) for j in range(3) for c in range(4)]
    got = ranks(jobset)
    assert got["0-0"] == 0 and got["1-0"] == 4 and got["2-3"] == 11 and sorted(got.values()) == list(range(12))
    assert ranks([("k", "k", {"training.kubeflow.org/replica-index": "7"})]) == {"k": 7}


@pytest.mark.parametrize("members, text", [
    ([("a", "a", {}), ("b", "b", {COMPLETION_INDEX: "0"})], "member a carries none of the labels"),
    ([("a", "a", {COMPLETION_INDEX: "1"}), ("b", "b", {LWS: "1"})], "a and b both have rank 1"),
    ([("a", "a", {COMPLETION_INDEX: "x"})], "member a carries none"),
])
def test_rank_errors_name_the_members(members, text):
    with pytest.raises(TopologyError, match=text):
        ranks(members)


def test_slices_of_consecutive_ranks():
    assert slices_of({"a": 0, "b": 5, "c": 1, "d": 4, "e": 8}, 4) == {0: ["a", "c"], 1: ["d", "b"], 2: ["e"]}


class Slots:
    """A toy room: domain -> free slots, each member one slot, with an undo log."""

    def __init__(self, caps):
        self.free = dict(caps)
        self.log = []

    def place(self, s, d):
        if self.free[d] < len(s.members):
            return False
        self.free[d] -= len(s.members)
        self.log.append((d, len(s.members)))
        return True

    def mark(self):
        return len(self.log)

    def rollback(self, m):
        while len(self.log) > m:
            d, n = self.log.pop()
            self.free[d] += n


def _brute(sizes, fixed, caps, needed):
    """The most members any assignment of slices to domains (or none) places, and whether one reaches ``needed``."""
    names = list(caps)
    best = 0
    for choice in itertools.product([None, *names], repeat=len(sizes)):
        if any(c is not None and f is not None and c != f for c, f in zip(choice, fixed)):
            continue
        used = {d: sum(n for n, c in zip(sizes, choice) if c == d) for d in names}
        if all(used[d] <= caps[d] for d in names):
            best = max(best, sum(n for n, c in zip(sizes, choice) if c is not None))
    return best


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.lists(st.integers(0, 9), min_size=1, max_size=4),
       st.data())
def test_assign_against_brute_force(sizes, caps, data):
    """Every slice placed fits its domain whole; a gang the brute force places is placed, and when it
    is not the best partial answer is as good as the brute force's."""
    domains = {f"d{i}": c for i, c in enumerate(caps)}
    fixed = [data.draw(st.sampled_from([None, None, *domains])) for _ in sizes]
    needed = data.draw(st.integers(1, sum(sizes)))
    slices = [Slice(k, tuple(f"m{k}-{j}" for j in range(n)), fixed[k]) for k, n in enumerate(sizes)]
    room = Slots(domains)
    a = assign(slices, list(domains), needed, room.place, room.mark, room.rollback)
    used = {d: 0 for d in domains}
    for k, d in a.placed.items():
        assert fixed[k] in (None, d)
        used[d] += sizes[k]
    assert all(used[d] == domains[d] - room.free[d] for d in domains), "the answer is what is left applied"
    assert all(used[d] <= domains[d] for d in domains)
    assert a.fits == sum(sizes[k] for k in a.placed)
    best = _brute(sizes, fixed, domains, needed)
    if best >= needed:
        assert a.fits >= needed
    else:
        assert a.fits == best


def members(n, cpu=1, group="g", first=0):
    return [pod(f"{group}-{i}").group(group).req(cpu=cpu).gated().labels({COMPLETION_INDEX: str(i)}).info()
            for i in range(first, first + n)]


def sliced(ms, size, min_member=None, required=0, level=1):
    c = Constraint(LEVELS, required=required, slice_size=size, slice_level=level)
    return dataclasses.replace(group_request(ms, min_member), topology=c)


def cluster(layout, cpu=4):
    return [node(f"{rack}-{i}").labels(block=block, rack=rack).cpu(cpu).info()
            for block, racks in layout.items() for rack, n in racks.items() for i in range(n)]


def slice_racks(v, ms, nodes, size):
    rack = {n.name: n.labels["rack"] for n in nodes}
    out: dict[int, set[str]] = {}
    for i, m in enumerate(ms):
        if m.uid in v.release:
            out.setdefault(i // size, set()).add(rack[v.release[m.uid]])
    return out


def test_slices_by_completion_index_each_in_one_rack():
    """Block b1: r1 holds 6 one-core members, r2 and r3 hold 2 each: 8 members fit the block, but in
    slices of 4 only one slice fits a rack; block b2's two racks of 6 hold one slice each."""
    nodes = cluster({"b1": {"r1": 3, "r2": 1, "r3": 1}, "b2": {"r4": 3, "r5": 3}}, cpu=2)
    ms = members(8)
    v = decide(nodes, [], [sliced(ms, 4)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.RELEASED, v.message
    assert slice_racks(v, ms, nodes, 4) in ({0: {"r4"}, 1: {"r5"}}, {0: {"r5"}, 1: {"r4"}})
    assert "in block b2" in v.message
    # without slices block b1 is the best fit (least left over), its racks mixed
    plain = dataclasses.replace(sliced(ms, 4), topology=Constraint(LEVELS, required=0))
    assert {n.labels["block"] for n in nodes if n.name in decide(nodes, [], [plain], [], 0.0).verdicts[0].release.values()} == {"b1"}


def test_slices_that_fit_no_rack_wait_and_say_which_slice():
    nodes = cluster({"b1": {"r1": 3, "r2": 1, "r3": 1}}, cpu=2)
    v = decide(nodes, [], [sliced(members(8), 4)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and v.release == {}
    assert "b1 fits 4 (1 of 2 slices of 4 placed, each in one rack; slice 1 (ranks 4-7) fits no rack of it)" \
        in v.message, v.message


def test_kueue_slice_annotations_and_several_slices_per_rack():
    """podset-slice-size 2 at rack level, required block: two slices share r1 (4 cores), a third goes to r2."""
    nodes = cluster({"b1": {"r1": 1, "r2": 1}})
    ms = [dataclasses.replace(m, topology_asked=((t.KUEUE_REQUIRED, "block"), (t.KUEUE_SLICE_REQUIRED, "rack"),
                                                  (t.KUEUE_SLICE_SIZE, "2"))) for m in members(6)]
    c = t.parse({}, [dict(m.topology_asked) for m in ms], LEVELS)
    assert c == Constraint(LEVELS, required=0, slice_size=2, slice_level=1, source="kueue")
    v = decide(nodes, [], [dataclasses.replace(group_request(ms), topology=c)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.RELEASED
    assert all(len(racks) == 1 for racks in slice_racks(v, ms, nodes, 2).values())


def test_members_without_ranks_hold_the_group():
    ms = [*members(3), pod("g-x").group("g").req(cpu=1).gated().info()]
    v = decide(cluster({"b1": {"r1": 2}}), [], [sliced(ms, 2)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.UNSCHEDULABLE
    assert v.message.startswith("topology: slices need ranks: member g-x carries none of the labels")


def test_a_replacement_goes_to_its_slices_rack():
    """Slices of 2 run in r1 (ranks 0-1) and r2 (ranks 2-3); rank 3 is replaced: it goes to r2 although
    r1 has room, and waits gated when r2 is full."""
    nodes = cluster({"b1": {"r1": 1, "r2": 1}})
    running = [dataclasses.replace(m, gates=(), node_name=n) for m, n in zip(members(3), ("r1-0", "r1-0", "r2-0"))]
    new = members(1, first=3)[0]
    g = dataclasses.replace(sliced([*running, new], 2), released=True)
    v = decide(nodes, running, [g], [], 0.0).verdicts[0]
    assert v.release == {new.uid: "r2-0"}, v.message
    full = [*running, pod("x").req(cpu=3).on("r2-0").info()]
    v = decide(nodes, full, [g], [], 0.0).verdicts[0]
    assert v.release == {} and v.waiting == ("g-3",), v.message


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["b1", "b2"]), st.sampled_from(["r1", "r2", "r3"]), st.integers(0, 4)),
                min_size=1, max_size=6), st.integers(1, 8), st.integers(1, 4), st.sampled_from([None, 0]))
def test_planner_against_brute_force(spec, size, slice_size, required):
    """Uniform one-core members in slices by rank, nodes of 0-4 cores: released iff some allowed domain
    (a block, or the cluster) can take every slice whole in racks of it; then each slice in one rack."""
    nodes = [node(f"n{i}").labels(block=b, rack=f"{b}{r}").cpu(c).info() for i, (b, r, c) in enumerate(spec)]
    ms = members(size)
    v = decide(nodes, [], [sliced(ms, slice_size, required=required)], [], 0.0).verdicts[0]
    rack_free: dict[tuple[str, str], int] = {}
    for n in nodes:
        key = (n.labels["block"], n.labels["rack"])
        rack_free[key] = rack_free.get(key, 0) + n.allocatable.get("cpu", 0) // 1000
    sizes = [len(range(k, min(k + slice_size, size))) for k in range(0, size, slice_size)]
    scopes = [{k: f for k, f in rack_free.items() if k[0] == b} for b in ("b1", "b2")] if required == 0 else [rack_free]
    holds = any(_brute(sizes, [None] * len(sizes), scope, size) >= size for scope in scopes if scope)
    assert (v.outcome == Outcome.RELEASED) == holds, v.message
    if holds:
        rack = {n.name: (n.labels["block"], n.labels["rack"]) for n in nodes}
        by_slice: dict[int, set] = {}
        for i, m in enumerate(ms):
            by_slice.setdefault(i // slice_size, set()).add(rack[v.release[m.uid]])
        assert all(len(r) == 1 for r in by_slice.values())
        if required == 0:
            assert len({b for r in by_slice.values() for b, _ in r}) == 1
