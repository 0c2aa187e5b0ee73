"""``cogate explain -f``: a manifest not yet applied, as the objects it would make (pure).

:func:`expand` reads the documents of a manifest (a PodGroup and its workload) and returns the
PodGroup and the pods the workload's controllers would create, each as the API server would store
it after cogate's webhook admitted it (:func:`cogate.webhook.admission.evaluate`: the scheduling
gate added, an adopted scheduler name rewritten; a refused pod raises :class:`ManifestError` with
the webhook's words). Pods per kind, as the built-in controllers make them:

- ``Pod``: itself;
- ``ReplicaSet``, ``Deployment``: ``spec.replicas`` (default 1) pods of ``spec.template``, named
  ``<name>-<i>`` (the real ones get random suffixes);
- ``StatefulSet``: ``spec.replicas`` pods ``<name>-<ordinal>`` (as the StatefulSet controller names them);
- ``Job``: ``spec.parallelism`` (default 1), at most ``spec.completions``, pods ``<name>-<i>``.

Each pod's ``spec.priority`` and ``spec.preemptionPolicy`` come from its ``priorityClassName`` (else
the class marked ``globalDefault``, else 0), as the API server's Priority admission plugin sets them
(``plugin/pkg/admission/priority``); a class that does not exist raises :class:`ManifestError`, as
the API server refuses the pod. Other kinds are skipped (named in :attr:`Expanded.skipped`). Each object gets a uid
``explain-<namespace>-<name>`` and ``creationTimestamp`` = ``now``; the namespace is the object's,
else ``namespace``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cogate import api
from cogate.models import format_time
from cogate.webhook import admission

__all__ = ["ManifestError", "Expanded", "PriorityClass", "expand", "WORKLOAD_KINDS"]

#: Kinds whose pod template becomes would-be pods.
WORKLOAD_KINDS = ("ReplicaSet", "Deployment", "StatefulSet", "Job")


class ManifestError(ValueError):
    """The manifest cannot be read as PodGroups and workloads: the message names the document and field."""


@dataclass(frozen=True)
class Expanded:
    """``podgroups``: the PodGroups (API JSON); ``pods``: the would-be pods (API JSON, admitted);
    ``skipped``: ``"Kind/name"`` of documents of other kinds; ``warnings``: the webhook's warnings."""

    podgroups: tuple[dict[str, Any], ...]
    pods: tuple[dict[str, Any], ...]
    skipped: tuple[str, ...]
    warnings: tuple[str, ...]


def _int(obj: Mapping[str, Any], field: str, default: int | None, where: str) -> int | None:
    v = obj.get(field, default)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ManifestError(f"{where}: spec.{field} must be a non-negative integer, got {v!r}")
    return v


def _count(kind: str, spec: Mapping[str, Any], where: str) -> int:
    if kind == "Job":
        parallelism = _int(spec, "parallelism", 1, where) or 0
        completions = _int(spec, "completions", None, where)
        return parallelism if completions is None else min(parallelism, completions)
    return _int(spec, "replicas", 1, where) or 0


def _stamp(obj: dict[str, Any], namespace: str, now: float) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    meta["namespace"] = meta.get("namespace") or namespace
    meta.setdefault("uid", f"explain-{meta['namespace']}-{meta.get('name', '')}")
    meta.setdefault("creationTimestamp", format_time(now))
    return obj


def _apply(pod: dict[str, Any], patch: Iterable[Mapping[str, Any]]) -> None:
    """Apply the webhook's JSON Patch: ``add``/``replace`` at object paths and list ends, the only
    operations it emits (:func:`cogate.gates.add`, the scheduler-name rewrite)."""
    for op in patch:
        if op["op"] not in ("add", "replace"):
            raise ManifestError(f"unexpected webhook patch operation {op['op']!r}")
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = pod
        for p in parents:
            target = target[int(p)] if isinstance(target, list) else target.setdefault(p, {})
        if isinstance(target, list):
            target.append(op["value"]) if last == "-" else target.insert(int(last), op["value"])
        else:
            target[last] = op["value"]


@dataclass(frozen=True)
class PriorityClass:
    """A PriorityClass as the Priority admission plugin reads it: ``value``, ``preemption_policy``
    (``PreemptLowerPriority`` when unset), ``global_default``."""

    name: str
    value: int
    preemption_policy: str = "PreemptLowerPriority"
    global_default: bool = False


def _prioritise(pod: dict[str, Any], classes: Mapping[str, PriorityClass] | None) -> None:
    """``spec.priority``/``preemptionPolicy`` as the Priority admission plugin sets them (module doc);
    nothing when ``classes`` is None (not known: the pod keeps what it says)."""
    if classes is None:
        return
    spec = pod.setdefault("spec", {})
    name = spec.get("priorityClassName")
    if name:
        pc = classes.get(name)
        if pc is None:
            raise ManifestError(f"Pod {pod['metadata']['namespace']}/{pod['metadata'].get('name', '')}: no PriorityClass "
                                f"with name {name} was found (the API server refuses the pod)")
    else:
        pc = next((c for c in classes.values() if c.global_default), None)
    spec["priority"] = pc.value if pc is not None else 0
    if pc is not None and "preemptionPolicy" not in spec:
        spec["preemptionPolicy"] = pc.preemption_policy


def _admit(pod: dict[str, Any], gate: str, scheduler_names: frozenset[str], warnings: list[str]) -> dict[str, Any]:
    meta = pod["metadata"]
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": meta["uid"], "operation": "CREATE", "namespace": meta["namespace"],
                          "name": meta.get("name", ""), "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "object": pod}}
    try:
        decision = admission.evaluate(review, gate, scheduler_names)
    except admission.InvalidReview as exc:
        raise ManifestError(f"Pod {meta['namespace']}/{meta.get('name', '')}: {exc}") from exc
    if decision.refusal:
        raise ManifestError(f"Pod {meta['namespace']}/{meta.get('name', '')}: the webhook refuses it: {decision.refusal}")
    warnings.extend(decision.warnings)
    if decision.patch:
        _apply(pod, decision.patch)
    return pod


def _pods_of(doc: Mapping[str, Any], kind: str, name: str, namespace: str, now: float) -> list[dict[str, Any]]:
    where = f"{kind}/{name}"
    if kind == "Pod":
        return [_stamp(copy.deepcopy(dict(doc)), namespace, now)]
    spec = doc.get("spec") or {}
    template = spec.get("template")
    if not isinstance(spec, Mapping) or not isinstance(template, Mapping):
        raise ManifestError(f"{where}: spec.template must be an object")
    out = []
    for i in range(_count(kind, spec, where)):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(dict(template.get("metadata") or {})),
               "spec": copy.deepcopy(dict(template.get("spec") or {}))}
        pod["metadata"]["name"] = f"{name}-{i}"
        pod["metadata"]["namespace"] = (doc.get("metadata") or {}).get("namespace") or namespace
        out.append(_stamp(pod, namespace, now))
    return out


def expand(docs: Iterable[Any], namespace: str, now: float, gate: str = api.DEFAULT_GATE_NAME,
           scheduler_names: frozenset[str] = frozenset({"default-scheduler"}),
           classes: Mapping[str, PriorityClass] | None = None) -> Expanded:
    """The PodGroups and would-be pods of the manifest ``docs`` (parsed YAML documents; ``None``
    documents and ``List`` items are taken as kubectl does), in ``namespace`` unless a document
    names one; ``now``: epoch seconds; ``classes``: the cluster's PriorityClasses by name (None:
    unknown, priorities left as the pods say). Raises :class:`ManifestError` (module doc)."""
    podgroups, pods, skipped, warnings = [], [], [], []
    flat: list[Any] = []
    for doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "List":
            flat.extend(doc.get("items") or [])
        elif doc is not None:
            flat.append(doc)
    for n, doc in enumerate(flat, 1):
        if not isinstance(doc, Mapping) or not isinstance(doc.get("metadata"), Mapping):
            raise ManifestError(f"document {n}: not a Kubernetes object (no metadata)")
        kind, name = str(doc.get("kind") or ""), str(doc["metadata"].get("name") or "")
        if not name:
            raise ManifestError(f"document {n} ({kind}): metadata.name is required")
        if kind == api.KIND and str(doc.get("apiVersion", "")).startswith(api.GROUP + "/"):
            podgroups.append(_stamp(copy.deepcopy(dict(doc)), namespace, now))
        elif kind == "Pod" or kind in WORKLOAD_KINDS:
            for p in _pods_of(doc, kind, name, namespace, now):
                _prioritise(p, classes)
                pods.append(_admit(p, gate, scheduler_names, warnings))
        else:
            skipped.append(f"{kind}/{name}")
    return Expanded(tuple(podgroups), tuple(pods), tuple(skipped), tuple(warnings))
