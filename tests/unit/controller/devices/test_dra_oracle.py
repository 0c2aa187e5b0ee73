"""A brute-force device matching oracle for the planner's DRA counts (issue 29, "DRA exact counts,
property tested against brute force": soundness was tested, exactness was not).

controller/devices/dra.py claims: when the device sets of the pending signatures are *laminar*
(any two nested or disjoint: a device class and narrower requests within it), the per-node counts
are exactly the allocator's; otherwise they are conservative (never a false fit). The oracle
decides, with no use of dra.py's counting, whether a set of requests can be given distinct free
devices of one node: it tries every assignment of devices to the requested slots (the structured
allocator's question, ``k8s.io/dynamic-resource-allocation/structured``: every request gets
``count`` distinct devices that its class and selectors match and no claim holds). Which models a
request accepts is drawn first and the CEL selector is written from it, so the oracle never reads
CEL.

Checked on small worlds (1 to 3 nodes, up to 4 devices each, some held by other claims, up to 4
members of 1 or 2 requests for 1 or 2 devices): for every node and every subset of the members,
"the counts fit" (every device resource's requests within its free count) equals "the oracle finds
distinct devices" when the family is laminar, and implies it otherwise; and the planner releases
the whole gang exactly when some placement of its members on the nodes gets every member its
devices (nested requests).
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations, product

from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.controller.devices import dra
from cogate.controller.planning.planner import Outcome
from tests.builders import node
from tests.unit.controller.devices.test_dra import claim, inputs, member, plan, request, rslice

MODELS = ("a100", "h100", "l4")
MODEL = 'device.attributes["gpu.example.com"].model'


def selector(models: frozenset[str] | None) -> list[str]:
    """The CEL selector that accepts exactly ``models`` (``None``: the whole class)."""
    return [] if models is None else [" || ".join(f'{MODEL} == "{m}"' for m in sorted(models))]


def laminar(sets: list[frozenset[str]]) -> bool:
    """Any two sets nested or disjoint (the class itself is every model: nested with all)."""
    return all(a <= b or b <= a or not (a & b) for a, b in combinations(sets, 2))


def oracle(asks: list[tuple[frozenset[str], int]], free: list[tuple[str, str]]) -> bool:
    """Whether every ``(accepted models, count)`` ask gets ``count`` distinct devices of ``free``
    (``(device, model)`` of one node), by trying every assignment of devices to the slots."""
    slots = sorted((models for models, count in asks for _ in range(count)), key=len)
    if len(slots) > len(free):
        return False

    def go(i: int, used: frozenset[str]) -> bool:
        if i == len(slots):
            return True
        return any(go(i + 1, used | {d}) for d, model in free if d not in used and model in slots[i])

    return go(0, frozenset())


@st.composite
def worlds(draw, crossing: bool):
    """Nodes with devices (some held), members asking for devices of a model set each. With
    ``crossing`` a request may accept two models (families need not be laminar)."""
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 3)))]
    devices = {n: [(f"d{j}", draw(st.sampled_from(MODELS))) for j in range(draw(st.integers(0, 4)))] for n in nodes}
    keys = [(n, d) for n in nodes for d, _ in devices[n]]
    taken = set(draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))) if keys else set()
    choices = [None, *(frozenset({m}) for m in MODELS)]
    if crossing:
        choices += [frozenset(p) for p in combinations(MODELS, 2)]
    claims = [claim(f"held{i}", allocated=[k]) for i, k in enumerate(sorted(taken))]
    members, asks = [], {}
    for i in range(draw(st.integers(1, 4))):
        reqs = [(draw(st.sampled_from(choices)), draw(st.integers(1, 2))) for _ in range(draw(st.integers(1, 2)))]
        claims.append(claim(f"c{i}", *[request(f"r{j}", count=c, selectors=selector(s)) for j, (s, c) in enumerate(reqs)]))
        members.append(member(f"m{i}", f"c{i}", cpu="0"))
        asks[members[-1].uid] = [(frozenset(MODELS) if s is None else s, c) for s, c in reqs]
    free = {n: [(d, model) for d, model in devices[n] if (n, d) not in taken] for n in nodes}
    world = inputs([rslice(n, *devices[n]) for n in nodes], claims=claims)
    return nodes, world, members, asks, free


def _counts_fit(subset, room) -> bool:
    need: Counter[str] = Counter()
    for m in subset:
        for r, q in m.requests.items():
            if dra.is_device_resource(r):
                need[r] += q
    return all(q <= room.get(r, 0) for r, q in need.items())


def _check_every_subset(world_, exact: bool) -> None:
    nodes, world, members, asks, free = world_
    resolved, acc = dra.account(members, {}, world, dra.Selection())
    assert not any(m.unplanned for m in resolved), [m.unplanned for m in resolved]
    for n in nodes:
        held = acc.held.get(n, {})
        room = {r: a - held.get(r, 0) for r, a in acc.allocatable.get(n, {}).items()}
        for k in range(1, len(resolved) + 1):
            for subset in combinations(resolved, k):
                fits = _counts_fit(subset, room)
                found = oracle([a for m in subset for a in asks[m.uid]], free[n])
                if exact:
                    assert fits == found, (n, [asks[m.uid] for m in subset], free[n], room)
                else:
                    assert found or not fits, (n, [asks[m.uid] for m in subset], free[n], room)


@settings(max_examples=100, deadline=None)
@given(worlds(crossing=False))
def test_counts_are_exactly_the_allocators_for_nested_requests(world_):
    _check_every_subset(world_, exact=True)


@settings(max_examples=100, deadline=None)
@given(worlds(crossing=True))
def test_counts_are_exact_for_laminar_families_and_never_a_false_fit_otherwise(world_):
    nodes, world, members, asks, free = world_
    sets = list({s for a in asks.values() for s, _ in a})
    _check_every_subset(world_, exact=laminar(sets))


@settings(max_examples=80, deadline=None)
@given(worlds(crossing=False))
def test_the_planner_releases_a_gang_exactly_when_the_oracle_finds_a_placement_with_its_devices(world_):
    """Over every placement of the members on the nodes (members need no CPU: devices decide)."""
    nodes, world, members, asks, free = world_
    v, _, _ = plan([node(n).alloc(cpu=8, memory="64Gi").info() for n in nodes], members, len(members), world)
    found = any(all(oracle([a for m, at in zip(members, placement) if at == n for a in asks[m.uid]], free[n])
                    for n in nodes)
                for placement in product(nodes, repeat=len(members)))
    assert (v.outcome == Outcome.RELEASED) == found, (v.outcome, v.message, asks, free)


def test_the_oracle_itself():
    a, h, any_ = frozenset({"a100"}), frozenset({"h100"}), frozenset(MODELS)
    free = [("d0", "a100"), ("d1", "h100"), ("d2", "h100")]
    assert oracle([(any_, 1), (a, 1), (h, 1)], free)
    assert not oracle([(any_, 2), (a, 1), (h, 1)], free)
    assert not oracle([(a, 2)], free) and oracle([(h, 2)], free) and oracle([], [])
    # the crossing case dra.py counts conservatively: a real assignment exists (a100; h100 + l4)
    assert oracle([(frozenset({"a100", "h100"}), 1), (frozenset({"h100", "l4"}), 2)],
                  [("d0", "a100"), ("d1", "h100"), ("d2", "l4")])
    assert laminar([a, h, any_]) and not laminar([frozenset({"a100", "h100"}), frozenset({"h100", "l4"})])
