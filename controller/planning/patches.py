"""JSON Patches that release a gated member (pure): pin it to its planned node, remove the gate.

- :func:`release_patch`: the minimal JSON Patch releasing a member (API JSON): with placement
  ``pinned`` first :func:`pin_ops` (narrow required node affinity to the planned node),
  then the ``test`` + ``remove`` of the gate (:func:`cogate.gates.remove`);
- :func:`pin_target`: which node a released member is pinned to (none for members with
  constraints the planner does not evaluate: volume claims, hard topology spread, DRA);
- :func:`pinned_node`: the node a member's required node affinity pins it to (what
  :func:`pin_ops` wrote), read back to restore reservations after a restart;
- :func:`awaiting_bind`: the one rule for "released, unbound, pinned": the node a released
  member waits on for kube-scheduler to bind it (stale pins, restored reservations, timeout
  evictions);
- :func:`left_group`: a gated pod whose label no longer names a group is released on its own;
- :func:`left_to_native`: a gated pod stored with a native gang field is released to Kubernetes'
  own gang scheduling.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cogate import api, gates
from cogate.controller.model.records import PodInfo

#: ``--placement``: ``pinned`` narrows each released member's node affinity to its planned
#: node; ``free`` only removes the gate and lets kube-scheduler choose.
PLACEMENTS = ("pinned", "free")
#: Node-field key kube-scheduler's NodeAffinity plugin matches ``matchFields`` against
#: (the only field key the API accepts in a node selector term).
NODE_NAME_FIELD = "metadata.name"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def pin_requirement(node: str) -> dict[str, Any]:
    """``matchFields`` requirement selecting exactly node ``node``."""
    return {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}


def _term_is_empty(term: Mapping[str, Any]) -> bool:
    return not term.get("matchExpressions") and not term.get("matchFields")


def pin_ops(spec: Mapping[str, Any], node: str) -> list[dict[str, Any]]:
    """JSON Patch ops narrowing ``spec``'s required node affinity to node ``node``.

    Rule (kube-apiserver ``ValidatePodUpdate`` for gated pods, KEP-3838 "mutable
    scheduling directives", pkg/apis/core/validation ``validateNodeAffinityMutation`` /
    ``validateNodeSelectorTermHasOnlyAdditions``): while a pod is gated its required node
    affinity may only be narrowed —

    - no required node affinity (or an empty ``nodeSelectorTerms`` list): anything may
      be set -> add one term ``{matchFields: [metadata.name In [node]]}``, creating
      ``spec.affinity`` / ``nodeAffinity`` / the required selector as needed;
    - existing terms: the number of terms is fixed and each term may only gain
      requirements appended after its existing ``matchExpressions``/``matchFields``
      -> append the requirement to each term's ``matchFields`` (terms are ORed, so the
      pod then fits exactly the planned node, if that node passed the original terms);
    - an empty term (no requirements; it matches no node) must stay empty -> untouched.

    A term that already carries exactly this requirement is left alone (idempotent).
    Raises ``ValueError`` naming the field when the affinity has an unexpected shape.
    """
    if not node:
        return []
    req = pin_requirement(node)
    found = _required_terms(spec, {"matchFields": [req]})
    if isinstance(found, dict):  # a level was missing: the op adds it with the one term
        return [found]
    base, terms = found
    return [op for i, old in enumerate(terms) if (op := _narrow_term(base, i, old, req)) is not None]


#: The objects from ``spec`` down to the required node selector (``pin_ops``).
_LEVELS = ("affinity", "nodeAffinity", _REQUIRED)


def _required_terms(spec: Mapping[str, Any], term: dict[str, Any]) -> dict[str, Any] | tuple[str, list[Any]]:
    """``(JSON pointer, list)`` of ``spec``'s required node selector terms, or, where a level
    (:data:`_LEVELS`, then a missing or empty ``nodeSelectorTerms``) is missing, the op adding
    it with ``term`` as its one term. Raises ``ValueError`` naming a level of the wrong shape."""
    at, path, name = spec, "/spec", "spec"
    for depth, key in enumerate(_LEVELS):
        got = at.get(key)
        path, name = f"{path}/{key}", f"{name}.{key}"
        if got is None:
            value: dict[str, Any] = {"nodeSelectorTerms": [term]}
            for outer in reversed(_LEVELS[depth + 1:]):
                value = {outer: value}
            return {"op": "add", "path": path, "value": value}
        if not isinstance(got, Mapping):
            raise ValueError(f"{name}: not an object")
        at = got
    terms = at.get("nodeSelectorTerms")
    if not terms:
        return {"op": "add", "path": f"{path}/nodeSelectorTerms", "value": [term]}
    if not isinstance(terms, list):
        raise ValueError(f"{name}.nodeSelectorTerms: not a list")
    return path, terms


def _narrow_term(base: str, i: int, old: Any, req: dict[str, Any]) -> dict[str, Any] | None:
    """The op appending ``req`` to term ``i`` (``old``) of the required node selector terms at
    ``base``; None for a term that must stay as it is (null or empty: it matches no node) or
    already carries ``req``. Raises ``ValueError`` naming a term of the wrong shape."""
    if old is None:
        return None  # a null term matches no node; it must stay as it is
    name = f"spec.affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms[{i}]"
    if not isinstance(old, Mapping):
        raise ValueError(f"{name}: not an object")
    if _term_is_empty(old):
        return None
    fields = old.get("matchFields")
    if fields is not None and not isinstance(fields, list):
        raise ValueError(f"{name}.matchFields: not a list")
    if fields and req in fields:
        return None
    path = f"{base}/nodeSelectorTerms/{i}/matchFields"
    return {"op": "add", "path": path + "/-", "value": req} if fields else {"op": "add", "path": path, "value": [req]}


def release_patch(pod: Mapping[str, Any], gate: str, node: str = "",
                  annotations: Mapping[str, str] | None = None) -> list[dict[str, Any]] | None:
    """The JSON Patch releasing ``pod`` (API JSON): optional pinning ops, the ``annotations`` to
    set (:func:`annotation_ops`), then ``test`` + ``remove`` of the gate.

    ``node`` '' means placement free (only the gate is removed). Returns ``None`` when
    the pod does not carry ``gate`` (nothing to do). The ``test`` makes the patch fail
    with 422 instead of removing a different gate when the list changed meanwhile.
    Raises ``ValueError`` (see :func:`pin_ops`) on an unexpected affinity shape.
    """
    removal = gates.remove(pod, gate)
    if removal is None:
        return None
    pins = pin_ops(pod.get("spec") or {}, node) if node else []
    return pins + annotation_ops(pod, annotations or {}) + removal


def _pointer(key: str) -> str:
    """``key`` as one JSON Pointer token (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def annotation_ops(pod: Mapping[str, Any], annotations: Mapping[str, str]) -> list[dict[str, Any]]:
    """JSON Patch ops setting ``annotations`` on ``pod`` (API JSON, as read): one ``add`` of
    ``/metadata/annotations`` when the pod has none, else one ``add`` per key not already set to
    that value (``add`` replaces an existing member, RFC 6902). Empty when nothing changes (e.g.
    the consume-provisioning-request annotation of cluster-autoscaler, issue 16)."""
    if not annotations:
        return []
    current = (pod.get("metadata") or {}).get("annotations")
    if not isinstance(current, Mapping) or not current:
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(sorted(annotations.items()))}]
    return [{"op": "add", "path": f"/metadata/annotations/{_pointer(k)}", "value": v}
            for k, v in sorted(annotations.items()) if current.get(k) != v]


def pinned_node(p: PodInfo) -> str | None:
    """The single node ``p``'s required node affinity narrows it to, or ``None``.

    A pod is pinned when every non-empty ``nodeSelectorTerms`` entry carries a
    ``matchFields`` requirement ``metadata.name In [node]`` with one value, the same node
    in each: what :func:`pin_ops` writes on release (terms are ORed, so only then is the
    node certain). Empty terms match no node (kube-scheduler NodeAffinity) and are skipped.
    """
    node: str | None = None
    for term in p.required_node_affinity:
        if not term.match_expressions and not term.match_fields:
            continue
        names = {r.values[0] for r in term.match_fields
                 if r.key == NODE_NAME_FIELD and r.operator == "In" and len(r.values) == 1}
        if len(names) != 1:
            return None
        (name,) = names
        if node is not None and name != node:
            return None
        node = name
    return node


def awaiting_bind(p: PodInfo, gate: str | None = None) -> str | None:
    """The node released member ``p`` is pinned to while it waits to be bound, or ``None``.

    ``p`` counts when it is released, unbound (no ``nodeName``), not terminal (Succeeded or
    Failed), not being deleted, and pinned (:func:`pinned_node`: what :func:`pin_ops` wrote on
    release; nothing else writes it). Released means it carries no scheduling gate at all
    (kube-scheduler is on it: restored reservations, stale pins); with ``gate``, only that gate
    must be gone (cogate released it; another gate may still hold it: timeout evictions).
    Returns :func:`pinned_node`'s answer unchanged, so a caller may test ``is not None``
    or truthiness as before.
    """
    if (p.gated_by(gate) if gate is not None else p.gates) or p.bound or p.terminal or p.deleting:
        return None
    return pinned_node(p)


def pin_target(member: PodInfo | None, node: str, placement: str) -> str:
    """The node a released member is pinned to ('' = only the gate is removed).

    The planned ``node`` with placement ``pinned``. The planner already answers '' for a member
    whose node it cannot foresee (constraints it does not evaluate, ``PodInfo.unplanned``; a
    scheduler other than kube-scheduler's default profile: ``members.pins``): pinning it could
    tie it for good (node affinity cannot change once the gate is gone) to a node its volume
    rule or its scheduler excludes, so kube-scheduler (or its scheduler) places it freely.
    """
    if placement != "pinned" or not node or member is None:
        return ""
    return node


def left_group(pod: Mapping[str, Any]) -> bool:
    """The pod (API JSON) carries no group any more: label absent or empty, and not being deleted
    (its gate is removed: it is scheduled as a plain pod)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return not labels.get(api.POD_GROUP_LABEL) and not meta.get("deletionTimestamp")


def left_to_native(pod: Mapping[str, Any]) -> bool:
    """The pod (API JSON, as stored) sets ``spec.schedulingGroup`` or ``spec.workloadRef``
    (:func:`cogate.api.native_gang_field`: the API server kept it, GenericWorkload is on) and is not
    being deleted: Kubernetes' own gang scheduling places it, so cogate's gate is removed."""
    meta = pod.get("metadata") or {}
    return bool(api.native_gang_field(pod.get("spec"))) and not meta.get("deletionTimestamp")
