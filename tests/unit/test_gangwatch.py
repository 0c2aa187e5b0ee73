"""The e2e judge of all-or-nothing (tests/e2e/gangwatch.py release_faults) catches every split it
names and passes a release whose members are all ungated, pinned and bound where pinned."""

from __future__ import annotations

import itertools

import pytest

from tests.e2e.gangwatch import Seen, pinned_node, release_faults


def pod(rv, name, *, gated=False, bound="", pin="", group="g"):
    return Seen(rv, "Pod", name, group, gated=gated, bound=bound, pin=pin)


def pg(rv, released, group="g"):
    return Seen(rv, "PodGroup", group, group, released=released)


def created(*names, rv=1):
    return [pod(rv + i, n, gated=True) for i, n in enumerate(names)]


def released(*names, rv=10, pinned=True, order=None):
    """The release of ``names`` (PodGroup first), then each member ungated (pinned to node n-<name>)
    and bound there, interleaved as kube-scheduler does: ungate a, bind a, ungate b, ..."""
    log, i = [pg(rv, True)], rv + 1
    for n in order or names:
        pin = f"n-{n}" if pinned else ""
        log += [pod(i, n, pin=pin), pod(i + 1, n, pin=pin, bound=f"n-{n}")]
        i += 2
    return log


def test_pinned_release_interleaved_with_bindings_is_one_release():
    log = created("a", "b", "c") + released("a", "b", "c")
    assert release_faults(log, "g") == []
    assert release_faults(log, "g", members=["a", "b", "c"]) == []


def test_unpinned_member_bound_while_a_sibling_is_gated_is_a_split():
    log = created("a", "b", "c") + released("a", "b", "c", pinned=False)
    assert release_faults(log, "g", members=["a", "b", "c"]) == [
        "a was bound without a pin while b, c of the same release still held the gate",
        "b was bound without a pin while c of the same release still held the gate"]


def test_all_ungated_before_any_binding_needs_no_pin():
    log = created("a", "b") + [pg(10, True), pod(11, "a"), pod(12, "b"), pod(13, "a", bound="x"), pod(14, "b", bound="y")]
    assert release_faults(log, "g", members=["a", "b"]) == []


def test_a_covered_member_never_ungated():
    log = created("a", "b") + released("a")
    assert release_faults(log, "g", members=["a", "b"]) == ["b was covered by the release but its gate was never removed"]
    assert release_faults(log, "g") == []  # without the members: the release covered only a


def test_bound_elsewhere_than_pinned():
    log = created("a") + [pg(10, True), pod(11, "a", pin="n1"), pod(12, "a", pin="n1", bound="n2")]
    assert release_faults(log, "g") == ["a was pinned to n1 but bound on n2"]


def test_bound_before_the_release_was_recorded():
    log = created("a", "b") + [pod(10, "a"), pod(11, "b"), pod(12, "a", bound="n"), pg(13, True)]
    assert release_faults(log, "g") == ["bound before the PodGroup recorded the release: a"]
    log = created("a") + [pod(10, "a"), pod(11, "a", bound="n"), pg(12, False)]
    assert release_faults(log, "g") == ["members were bound (a) but the PodGroup never recorded a release"]


def test_other_groups_and_order_of_arrival_do_not_matter():
    log = created("a", "b") + released("a", "b") + [pod(30, "x", bound="n", group="other")]
    for perm in itertools.permutations(log):
        assert release_faults(perm, "g", members=["a", "b"]) == []


@pytest.mark.parametrize("pinned", [True, False])
def test_every_interleaving_of_two_gates_and_two_bindings(pinned):
    """Over every order of (ungate a, ungate b, bind a, bind b), each binding after its own gate
    removal: unpinned, a fault exactly when a binding precedes the other gate's removal; pinned
    (and bound where pinned), never."""
    for order in itertools.permutations(["ua", "ub", "ba", "bb"]):
        if order.index("ba") < order.index("ua") or order.index("bb") < order.index("ub"):
            continue
        log = created("a", "b") + [pg(5, True)]
        state = {"a": [True, ""], "b": [True, ""]}
        for i, e in enumerate(order):
            name = e[1]
            state[name] = [False, state[name][1]] if e[0] == "u" else [state[name][0], f"n-{name}"]
            log.append(pod(10 + i, name, gated=state[name][0], bound=state[name][1], pin=f"n-{name}" if pinned else ""))
        split = max(order.index("ua"), order.index("ub")) > min(order.index("ba"), order.index("bb"))
        assert bool(release_faults(log, "g", members=["a", "b"])) == (split and not pinned), order


def pin_spec(*terms):
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def field(*values, op="In", key="metadata.name"):
    return {"key": key, "operator": op, "values": list(values)}


@pytest.mark.parametrize("spec, node", [
    ({}, ""),
    (pin_spec({"matchFields": [field("n1")]}), "n1"),
    (pin_spec({"matchFields": [field("n1")], "matchExpressions": [{"key": "zone", "operator": "In",
                                                                   "values": ["a"]}]}), "n1"),
    (pin_spec({"matchFields": [field("n1")]}, {"matchFields": [field("n1")]}), "n1"),
    (pin_spec({"matchFields": [field("n1")]}, {"matchFields": [field("n2")]}), ""),
    (pin_spec({"matchFields": [field("n1", "n2")]}), ""),
    (pin_spec({"matchFields": [field("n1", op="NotIn")]}), ""),
    (pin_spec({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}), ""),
])
def test_pinned_node(spec, node):
    assert pinned_node(spec) == node
