"""Release patch building: gate removal and node-affinity pinning for every affinity shape.

Each patch is applied with ``jsonpatch`` and the result is checked against
kube-apiserver's rule for gated pods (ValidatePodUpdate: required node affinity may only
be narrowed — no change to the number of non-empty-list terms, each term only gains
requirements appended after its existing ones, empty terms stay empty) and for the
scheduling-gates list (deletions only).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from cogate.controller.model import records
from cogate.controller.planning.patches import awaiting_bind, pin_ops, pin_requirement, release_patch
from cogate.gates import find as find_gate

GATE = "scheduling.x-k8s.io/pod-group"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PIN = {"key": "metadata.name", "operator": "In", "values": ["node-1"]}


def pod(spec_extra: dict[str, Any] | None = None, gates: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}],
                            "schedulingGates": [{"name": g} for g in (gates if gates is not None else [GATE])]}
    spec.update(spec_extra or {})
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": spec}


def required_terms(p: dict[str, Any]) -> list[dict[str, Any]] | None:
    req = (((p["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(REQ))
    return None if req is None else req.get("nodeSelectorTerms")


def only_narrowed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Independent statement of the apiserver rule for a gated pod's required node affinity."""
    old_terms = required_terms(old)
    new_terms = required_terms(new)
    if not old_terms:
        return True
    if new_terms is None or len(new_terms) != len(old_terms):
        return False
    for o, n in zip(old_terms, new_terms):
        o, n = o or {}, n or {}
        if not o.get("matchExpressions") and not o.get("matchFields"):
            if n.get("matchExpressions") or n.get("matchFields"):
                return False
        for key in ("matchExpressions", "matchFields"):
            ol, nl = o.get(key) or [], n.get(key) or []
            if nl[: len(ol)] != ol:
                return False
    # everything outside the required node affinity is untouched
    strip = lambda p: {k: v for k, v in p["spec"].items() if k not in ("affinity", "schedulingGates")}  # noqa: E731
    return strip(old) == strip(new)


def pinned_to(p: dict[str, Any], node: str) -> bool:
    """Every non-empty term requires metadata.name In [node] (so the pod can go nowhere else)."""
    terms = required_terms(p) or []
    live = [t for t in terms if t and (t.get("matchExpressions") or t.get("matchFields"))]
    return bool(live) and all(pin_requirement(node) in (t.get("matchFields") or []) for t in live)


EXPR = {"key": "zone", "operator": "In", "values": ["a", "b"]}
FIELD_OTHER = {"key": "metadata.name", "operator": "NotIn", "values": ["node-9"]}

AFFINITY_SHAPES = {
    "no affinity": {},
    "affinity without nodeAffinity": {"affinity": {"podAntiAffinity": {REQ: []}}},
    "nodeAffinity with only preferred": {"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [EXPR]}}]}}},
    "required with empty terms list": {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": []}}}},
    "one term with matchExpressions": {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {"matchExpressions": [EXPR]}]}}}},
    "two ORed terms, expressions and fields": {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {"matchExpressions": [EXPR]}, {"matchFields": [FIELD_OTHER]}]}}}},
    "term with both lists": {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {"matchExpressions": [EXPR], "matchFields": [FIELD_OTHER]}]}}}},
    "empty term next to a real one": {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {}, {"matchExpressions": [EXPR]}]}}}},
    "term with empty matchFields list": {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {"matchExpressions": [EXPR], "matchFields": []}]}}}},
}


@pytest.mark.parametrize("shape", sorted(AFFINITY_SHAPES))
def test_pinned_patch_narrows_only_and_removes_gate(shape):
    before = pod(copy.deepcopy(AFFINITY_SHAPES[shape]), gates=["other/gate", GATE, "third"])
    ops = release_patch(before, GATE, "node-1")
    assert ops is not None
    assert ops[-2:] == [{"op": "test", "path": "/spec/schedulingGates/1/name", "value": GATE},
                        {"op": "remove", "path": "/spec/schedulingGates/1"}]
    after = jsonpatch.apply_patch(before, ops)
    assert after["spec"]["schedulingGates"] == [{"name": "other/gate"}, {"name": "third"}]
    assert only_narrowed(before, after), ops
    assert pinned_to(after, "node-1"), ops
    assert before["spec"].get("affinity") == AFFINITY_SHAPES[shape].get("affinity")  # input not mutated
    # other affinity kinds survive
    for kind in ("podAntiAffinity", "podAffinity"):
        if kind in (before["spec"].get("affinity") or {}):
            assert after["spec"]["affinity"][kind] == before["spec"]["affinity"][kind]
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    if pref in ((before["spec"].get("affinity") or {}).get("nodeAffinity") or {}):
        assert after["spec"]["affinity"]["nodeAffinity"][pref] == before["spec"]["affinity"]["nodeAffinity"][pref]


def test_existing_terms_keep_their_requirements_in_order():
    before = pod(copy.deepcopy(AFFINITY_SHAPES["two ORed terms, expressions and fields"]))
    after = jsonpatch.apply_patch(before, release_patch(before, GATE, "node-1"))
    terms = required_terms(after)
    assert terms == [
        {"matchExpressions": [EXPR], "matchFields": [PIN]},
        {"matchFields": [FIELD_OTHER, PIN]},
    ]


def test_empty_term_is_left_empty():
    before = pod(copy.deepcopy(AFFINITY_SHAPES["empty term next to a real one"]))
    after = jsonpatch.apply_patch(before, release_patch(before, GATE, "node-1"))
    assert required_terms(after)[0] == {}


def test_only_empty_terms_means_no_pinning_ops():
    spec = {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{}]}}}}
    assert pin_ops(spec, "node-1") == []


def test_already_pinned_term_is_idempotent():
    spec = {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchFields": [dict(PIN)]}]}}}}
    assert pin_ops(spec, "node-1") == []
    assert pin_ops(spec, "node-2") == [{"op": "add", "path": f"/spec/affinity/nodeAffinity/{REQ}/nodeSelectorTerms/0/matchFields/-",
                                        "value": pin_requirement("node-2")}]


@pytest.mark.parametrize("node", ["", None])
def test_free_placement_only_removes_gate(node):
    before = pod(copy.deepcopy(AFFINITY_SHAPES["one term with matchExpressions"]))
    ops = release_patch(before, GATE, node or "")
    assert ops == [{"op": "test", "path": "/spec/schedulingGates/0/name", "value": GATE},
                   {"op": "remove", "path": "/spec/schedulingGates/0"}]


@pytest.mark.parametrize("gates", [[], ["other"], None])
def test_no_patch_without_the_gate(gates):
    p = pod(gates=gates or [])
    if gates is None:
        del p["spec"]["schedulingGates"]
    assert release_patch(p, GATE, "node-1") is None
    assert find_gate(p, GATE) is None


def test_test_op_fails_when_gate_list_changed():
    before = pod(gates=["a", GATE])
    ops = release_patch(before, GATE, "")
    changed = pod(gates=[GATE])  # someone removed "a" meanwhile: index 1 no longer exists / differs
    with pytest.raises(jsonpatch.JsonPatchException):
        jsonpatch.apply_patch(changed, ops)
    changed = pod(gates=["x", "y"])
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(changed, ops)


@pytest.mark.parametrize("spec,field", [
    ({"affinity": "zone-a"}, "spec.affinity"),
    ({"affinity": {"nodeAffinity": []}}, "spec.affinity.nodeAffinity"),
    ({"affinity": {"nodeAffinity": {REQ: "x"}}}, REQ),
    ({"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": {"a": 1}}}}}, "nodeSelectorTerms"),
    ({"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": ["x"]}}}}, "nodeSelectorTerms[0]"),
    ({"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [EXPR], "matchFields": "x"}]}}}},
     "nodeSelectorTerms[0].matchFields"),
])
def test_odd_affinity_shapes_raise_naming_the_field(spec, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        pin_ops(spec, "node-1")


def _member(*, gates: tuple[str, ...] = (), pinned: bool = True, node: str = "", phase: str = "Pending",
            deleting: bool = False) -> records.PodInfo:
    pin = records.NodeSelectorRequirement("metadata.name", "In", ("node-1",))
    terms = (records.NodeSelectorTerm(match_fields=(pin,)),)
    return records.PodInfo("ns", "p", "u1", gates=gates, node_name=node, phase=phase, deleting=deleting,
                           required_node_affinity=terms if pinned else ())


@pytest.mark.parametrize("member,gate,expected", [
    (_member(), None, "node-1"),  # released, unbound, pinned
    (_member(pinned=False), None, None),  # released with placement free: no pin to wait on
    (_member(gates=(GATE,)), None, None),  # still gated
    (_member(gates=("other/gate",)), None, None),  # another gate holds it: kube-scheduler is not on it yet
    (_member(gates=("other/gate",)), GATE, "node-1"),  # ... but cogate released it
    (_member(gates=(GATE,)), GATE, None),
    (_member(node="node-1"), None, None),  # bound
    (_member(phase="Failed"), None, None),  # terminal
    (_member(phase="Succeeded"), GATE, None),
    (_member(deleting=True), None, None),
])
def test_awaiting_bind_is_released_unbound_and_pinned(member, gate, expected):
    assert awaiting_bind(member, gate) == expected
