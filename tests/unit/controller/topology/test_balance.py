"""Balanced gangs (issue 32 item 2): the even split (controller/topology/balance.py), the balance level
(constraints.py) and the planner splitting a gang across the fewest domains that hold it
(controller/planning/balanced.py through fenced.py), against a brute force over small clusters."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.controller.planning.planner import Outcome, decide
from cogate.controller.topology import constraints as t
from cogate.controller.topology.balance import even_parts
from cogate.controller.topology.constraints import HOSTNAME_LABEL as HOST
from cogate.controller.topology.constraints import Constraint, TopologyError
from cogate.controller.topology.slices import COMPLETION_INDEX
from tests.builders import group_request, node, pod

LEVELS = ("block", "rack", HOST)


def test_even_parts():
    units = [(f"m{i}",) for i in range(128)]
    assert [len(p) for p in even_parts(units, 8)] == [16] * 8
    assert [len(p) for p in even_parts(units[:10], 3)] == [4, 3, 3]
    assert even_parts([("a", "b"), ("c", "d"), ("e",)], 2) == [("a", "b", "c", "d"), ("e",)]


def test_balance_level_and_its_errors():
    assert Constraint(LEVELS, required=0, preferred=1, balanced=True).balance_level() == 1
    assert Constraint(LEVELS, required=0, balanced=True).balance_level() == 1
    assert Constraint(LEVELS, preferred=1, balanced=True).balance_level() == 1
    assert Constraint(LEVELS, required=0).balance_level() is None
    with pytest.raises(TopologyError, match="balanced: a balanced split needs"):
        t.parse({t.BALANCED: "true", t.LEVELS: "block,rack"}, [])
    with pytest.raises(TopologyError, match="balanced"):
        t.parse({t.BALANCED: "true", t.REQUIRED: HOST, t.LEVELS: "block,rack"}, [])
    assert t.parse({t.BALANCED: "true", t.REQUIRED: "block", t.LEVELS: "block,rack"}, []).balanced


def cluster(layout, cpu=1):
    """``{"b1": {"r1": 5}}``: nodes ``<rack>-<i>`` of ``cpu`` cores."""
    return [node(f"{rack}-{i}").labels(block=block, rack=rack).cpu(cpu).info()
            for block, racks in layout.items() for rack, n in racks.items() for i in range(n)]


def members(n, ranked=True):
    return [pod(f"g-{i}").group("g").req(cpu=1).gated().labels({COMPLETION_INDEX: str(i)} if ranked else {}).info()
            for i in range(n)]


def per_rack(v, nodes):
    rack = {n.name: n.labels["rack"] for n in nodes}
    return Counter(rack[x] for x in v.release.values())


def gang(ms, **c):
    return dataclasses.replace(group_request(ms), topology=Constraint(LEVELS, **c))


def test_the_marin_case_split_evenly_not_packed():
    """Racks of 5 one-core nodes, a gang of 8, preferred rack in one block: packed it is 5+3; balanced,
    4+4 over two racks (never three)."""
    nodes = cluster({"b1": {"r1": 5, "r2": 5, "r3": 5}})
    packed = decide(nodes, [], [gang(members(8), required=0, preferred=1)], [], 0.0).verdicts[0]
    assert sorted(per_rack(packed, nodes).values()) == [3, 5]
    v = decide(nodes, [], [gang(members(8), required=0, preferred=1, balanced=True)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.RELEASED, v.message
    assert sorted(per_rack(v, nodes).values()) == [4, 4]
    assert "split 4+4 across racks" in v.message and "in block b1 (wider than the preferred rack" in v.message
    # consecutive ranks together: ranks 0-3 in one rack, 4-7 in the other
    rack = {n.name: n.labels["rack"] for n in nodes}
    ms = members(8)
    v = decide(nodes, [], [dataclasses.replace(gang(ms, required=0, balanced=True))], [], 0.0).verdicts[0]
    assert len({rack[v.release[m.uid]] for m in ms[:4]}) == 1 and len({rack[v.release[m.uid]] for m in ms[4:]}) == 1


def test_the_fewest_racks_whose_parts_each_fit():
    """r1 holds 5, r2 and r3 hold 3: 8 in 2 parts of 4 do not fit (r2 holds 3), 3+3+2 do."""
    nodes = cluster({"b1": {"r1": 5, "r2": 3, "r3": 3}})
    v = decide(nodes, [], [gang(members(8, ranked=False), required=0, balanced=True)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.RELEASED and sorted(per_rack(v, nodes).values()) == [2, 3, 3], v.message


def test_no_even_split_waits_and_says_so():
    """Block b1: r1 holds 6, r2 holds 1: 7 fit the block but no even split does (4+3 needs two racks of 3+)."""
    nodes = cluster({"b1": {"r1": 6, "r2": 1}})
    v = decide(nodes, [], [gang(members(7), required=0, balanced=True)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY and v.release == {}
    assert "b1 fits 6 (no even split of 7 across at most 2 racks of it fits)" in v.message, v.message


def test_balanced_slices_keep_each_slice_whole():
    """Slices of 2 at node level, balanced across racks: 8 members as 2 parts of 2 slices each."""
    nodes = cluster({"b1": {"r1": 3, "r2": 3, "r3": 3}}, cpu=2)
    ms = members(8)
    c = dict(required=0, preferred=1, balanced=True, slice_size=2, slice_level=2)
    v = decide(nodes, [], [gang(ms, **c)], [], 0.0).verdicts[0]
    assert v.outcome == Outcome.RELEASED, v.message
    assert sorted(per_rack(v, nodes).values()) == [4, 4]
    assert all(v.release[ms[k].uid] == v.release[ms[k + 1].uid] for k in range(0, 8, 2))


def _min_split(caps, n):
    """The fewest k whose even parts of ``n`` fit k distinct racks of ``caps`` (brute force), or None."""
    for k in range(1, min(n, len(caps)) + 1):
        sizes = [n // k + (1 if j < n % k else 0) for j in range(k)]
        if any(all(s <= caps[r] for s, r in zip(sizes, racks)) for racks in itertools.permutations(caps, k)):
            return k
    return None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["b1", "b2"]), st.sampled_from(["r1", "r2", "r3"]), st.integers(0, 4)),
                min_size=1, max_size=7), st.integers(2, 9))
def test_planner_against_brute_force(spec, size):
    """Uniform one-core members, required block, balanced across racks: released iff some block has a
    split, then in as few racks of the chosen block as any split of it needs, the parts even."""
    nodes = [node(f"n{i}").labels(block=b, rack=f"{b}{r}").cpu(c).info() for i, (b, r, c) in enumerate(spec)]
    caps: dict[str, dict[str, int]] = {}
    for n in nodes:
        racks = caps.setdefault(n.labels["block"], {})
        racks[n.labels["rack"]] = racks.get(n.labels["rack"], 0) + n.allocatable.get("cpu", 0) // 1000
    v = decide(nodes, [], [gang(members(size), required=0, balanced=True)], [], 0.0).verdicts[0]
    splits = {b: _min_split(racks, size) for b, racks in caps.items()}
    assert (v.outcome == Outcome.RELEASED) == any(k is not None for k in splits.values()), v.message
    if v.outcome == Outcome.RELEASED:
        rack = {n.name: (n.labels["block"], n.labels["rack"]) for n in nodes}
        used = Counter(rack[x] for x in v.release.values())
        blocks = {b for b, _ in used}
        assert len(blocks) == 1
        k = splits[blocks.pop()]
        assert len(used) == k and max(used.values()) - min(used.values()) <= 1
