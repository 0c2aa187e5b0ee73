"""The domain tree and the choice among domains (issue 32 item 2): controller/topology/domains.py,
the choice checked against a brute force over small trees."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.controller.topology.constraints import HOSTNAME_LABEL as HOST
from cogate.controller.topology.constraints import Constraint
from cogate.controller.topology.domains import Domain, Trial, build, choose, dominant, may_hold

LEVELS = ("block", "rack", HOST)


def _nodes(spec):
    """``[(block or None, rack or None), ...]`` -> name -> labels (node ``n<i>``)."""
    out = {}
    for i, (block, rack) in enumerate(spec):
        labels = {HOST: f"n{i}"}
        if block is not None:
            labels["block"] = block
        if rack is not None:
            labels["rack"] = rack
        out[f"n{i}"] = labels
    return out


def test_tree_levels_children_and_excluded():
    tree = build(LEVELS, _nodes([("b1", "r1"), ("b1", "r1"), ("b1", "r2"), ("b2", "r1"), (None, "r9"), ("b2", None)]))
    assert [(d.values, d.nodes, d.children) for d in tree.domains[0]] == [
        (("b1",), ("n0", "n1", "n2"), 2), (("b2",), ("n3", "n5"), 1)]
    # rack r1 of b1 and rack r1 of b2 are two domains (values are hierarchical)
    assert [d.values for d in tree.domains[1]] == [("b1", "r1"), ("b1", "r2"), ("b2", "r1")]
    assert tree.excluded == {0: 1, 1: 2, 2: 2}
    assert tree.cluster.nodes == tuple(f"n{i}" for i in range(6)) and tree.cluster.children == 2
    assert tree.domains[1][0].selector(LEVELS) == {"block": "b1", "rack": "r1"}


def test_bound_and_dominant():
    assert may_hold({"cpu": 4000, "pods": 10}, {"cpu": 4000, "pods": 4})
    assert not may_hold({"cpu": 3999}, {"cpu": 4000})
    assert not may_hold({}, {"nvidia.com/gpu": 1})
    assert dominant({"cpu": 4000, "memory": 1 << 30}, {"cpu": 8000, "memory": 1 << 40}) == "cpu"
    assert dominant({"cpu": 1000, "nvidia.com/gpu": 8}, {"cpu": 64000, "nvidia.com/gpu": 16}) == "nvidia.com/gpu"
    assert dominant({"pods": 3}, {"pods": 110}) == "pods"


labelled = st.lists(st.tuples(st.sampled_from(["b1", "b2", None]), st.sampled_from(["r1", "r2", "r3", None])),
                    min_size=1, max_size=9)
constraints = st.sampled_from([
    Constraint(LEVELS, required=1), Constraint(LEVELS, required=0), Constraint(LEVELS, required=2),
    Constraint(LEVELS, preferred=2), Constraint(LEVELS, preferred=1), Constraint(LEVELS, required=0, preferred=2),
    Constraint(LEVELS, required=0, preferred=1)])


@settings(max_examples=300, deadline=None)
@given(labelled, st.lists(st.integers(0, 4), min_size=9, max_size=9), st.integers(1, 12), constraints)
def test_choice_against_brute_force(spec, slots, needed, c):
    """Every chosen domain holds the gang, at the tightest level allowed that has one, and is the
    best fit there; no domain that could hold the gang is passed over when the answer is none."""
    nodes = _nodes(spec)
    cap = {f"n{i}": slots[i] for i in range(len(spec))}
    tree = build(LEVELS, nodes)

    def holds(d: Domain) -> int:
        return sum(cap[n] for n in d.nodes)

    def trial(d: Domain) -> Trial:
        total = holds(d)
        return Trial(min(total, needed), max(total - needed, 0))

    choice = choose(c, tree, needed, trial)
    if choice.domain is None:
        assert choose(c, tree, needed, trial, order=lambda d: (holds(d), d.children, d.values)).domain is None
    allowed = [(lv, [tree.cluster] if lv is None else list(tree.domains[lv])) for lv in c.tried()]
    first = next(((lv, ds) for lv, ds in allowed if any(holds(d) >= needed for d in ds)), None)
    if first is None:
        assert choice.domain is None
        return
    level, domains = first
    assert choice.domain is not None and choice.level == level and holds(choice.domain) >= needed
    assert all(n in choice.domain.nodes for n in choice.domain.nodes)
    if level is not None:
        want = {k: v for k, v in zip(LEVELS, choice.domain.values)}
        assert all(all(nodes[n].get(k) == v for k, v in want.items()) for n in choice.domain.nodes)
    best = min((holds(d) - needed, d.children, d.values) for d in domains if holds(d) >= needed)
    assert (holds(choice.domain) - needed, choice.domain.children, choice.domain.values) == best
    # tried in best-fit order, the first holding domain is the same one
    ordered = choose(c, tree, needed, trial, order=lambda d: (holds(d), d.children, d.values))
    assert (ordered.domain, ordered.level) == (choice.domain, choice.level)


def test_pruned_domains_are_never_chosen():
    tree = build(LEVELS, _nodes([("b1", "r1"), ("b1", "r2")]))
    choice = choose(Constraint(LEVELS, required=1), tree, 1,
                    lambda d: Trial(1, 0, pruned=d.values == ("b1", "r1")))
    assert choice.domain is not None and choice.domain.values == ("b1", "r2")
